"""Bayesian-optimisation tuning: NBL-BO, HG-BO, CHG-BO and HG-REMBO (Miao, Wang & Blunsom 2016).

Yishu Miao, Ziyu Wang and Phil Blunsom, "Bayesian Optimisation for Machine
Translation" (2016). Corpus BLEU of the model-best translations of *fixed*
tuning data is treated as a black box of the weights and maximised by
Gaussian-process Bayesian optimisation inside a box around the current
weights. One :meth:`fit` is one outer iteration of the paper's Algorithm 1
(the tuning loop decodes the new forests or k-best lists between fits):

1. box ``B_i = {x : w_i^k - b <= x^k <= w_i^k + b}`` around the start
   weights ``w_i``, per feature (Algorithm 1, line 2; Sec. 2 and Fig. 1);
   ``b = 0.1`` (Sec. 3, footnote 4: "The BO bound size is 0.1"; Fig. 3c
   compares 0.01 and 0.5);
2. a candidate point set ``X`` drawn in the box (Algorithm 1, line 3):
   ``n_candidates`` points uniform in the box, drawn once per fit;
3. ``steps`` BO iterations (Algorithm 1, lines 4-9; "the number of BO
   iterations is 100", Sec. 3, footnote 4): ``x_j = argmax EI(x)``, BLEU of
   the model-best translations at ``x_j`` on the fixed data (Viterbi of the
   reweighted forests for HG variants; model-best of the k-best lists for
   NBL-BO), GP update;
4. ``w_{i+1} = x_best`` (Algorithm 1, line 10): the evaluated point of the
   highest BLEU (the first one on ties).

The paper implements this with spearmint (Sec. 3: "ARD Matern 5/2 kernel and
EI acquisition function"). Here the GP is scikit-learn's
``GaussianProcessRegressor`` with ``ConstantKernel * Matern(nu=2.5,
length_scale per dimension) + WhiteKernel`` and ``normalize_y=True`` on the
box scaled to the unit cube (as spearmint scales its inputs), with
hyperparameters by maximum marginal likelihood (L-BFGS-B from the previous
step's hyperparameters plus ``n_restarts`` restarts seeded from the tuner's
generator; spearmint instead averages EI over MCMC samples of them). What the
paper leaves open, and the choices made here:

* initial design: the GP starts with ``w_i`` evaluated (its BLEU on the fixed
  data is the baseline x_best has to beat, so a fit never returns a point
  worse than ``w_i`` on the data); then ``n_init`` (1) points of ``X`` are
  evaluated before the first EI step, as spearmint's ``GPEIOptChooser``
  takes its first grid candidate while it has fewer than two observations.
  ``steps`` counts every evaluation after ``w_i`` (``1 + steps`` in all);
* EI (Brochu et al. 2010, the paper's ref. [6]; ``xi = 0``, for maximisation) uses the
  posterior of the latent function (the white-noise variance taken out of the
  predictive variance) and the best BLEU observed so far, as spearmint does;
* EI is maximised over ``X`` minus the points already evaluated, plus a local
  refinement: ``n_local`` points drawn each step around the incumbent best
  point (Gaussian, standard deviation 5% of the box width, clipped to the
  box); the first maximiser wins ties. (Spearmint refines its best grid
  points with L-BFGS; random local candidates need no EI gradient.)

Variants (Sec. 2):

* ``hg-bo`` (HG-BO, Algorithm 1): forests of the current iteration
  (:class:`~minismt.hypergraph.ForestData`), evaluated by
  :class:`~minismt.hypergraph.batch.ForestBatch` (one numba call per point);
* ``chg-bo`` (CHG-BO): the same on the forests of the previous and the current
  iteration together ("combines hypergraphs from one previous and current
  iterations"): the tag ``forest_iterations=2``, a sentence's translation is the best
  Viterbi derivation over its forests;
* ``nbl-bo`` (NBL-BO): Algorithm 1 "replacing the hypergraphs with N-best
  lists": a :class:`~minismt.kbest.KBest` and its model-best BLEU;
* ``hg-rembo`` (HG-REMBO, Sec. 2 and the "two step coordinate ascent" of
  Sec. 3, Table 3): first HG-BO on the dense ("default") features, then,
  with those fixed, BO of ``g(z) = f(A_bar z + w)`` over a low-dimensional
  ``z`` (``w``: the weights after the first step, constant during the BO),
  where ``A`` (``h x d``, h = the sparse features used by the forests) has
  i.i.d. standard normal entries as in REMBO (Wang et al. 2013, ref. [11]) and
  ``A_bar_mn = A_mn / ||A_m||_1`` (Sec. 2) is row-normalised in L1 norm.
  ``z`` is bounded by ``[-b_z, b_z]^d`` with ``b_z = b`` by default: since
  every row of ``A_bar`` has L1 norm 1, ``|(A_bar z)_m| <= max_n |z_n|``, so
  each sparse weight moves by at most ``b_z`` ("the regularisation of A
  ensures that each update of the weights remains in a bounded domain").
  The paper gives no value of ``d``; the default here is 10 (``min(d, h)`` is
  used). Without sparse features HG-REMBO is HG-BO.

Which weights are optimised: the dense features of the space that occur in
the data (an unused feature cannot change BLEU); sparse weights stay as in
``w0`` (HG-REMBO moves them in its second step). If the space has no dense
feature at all (e.g. forests read with a fresh :class:`FeatureSpace`, which
makes every name sparse), HG-BO/CHG-BO/NBL-BO optimise every feature that
occurs and HG-REMBO embeds every one of them.

Every random choice (candidates, local points, GP restarts, the embedding)
comes from ``numpy.random.default_rng(seed)`` made in :meth:`fit`: the same
seed gives bit-identical weights.

scikit-learn and :mod:`scipy.stats` are imported where the GP is built and EI
computed, not at the top: ``import tuners`` (which registers these tuners, and
which every ``minismt tune`` and pipeline does) would take 0.5 s more (0.8 s).
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

from minismt.errors import InputError
from minismt.hypergraph import ForestData
from minismt.hypergraph.batch import ForestBatch
from minismt.kbest import KBest
from minismt.metrics import corpus_bleu_from_stats
from tuners.base import Tuner, TunerTags, register

BOUND = 0.1
"""Half-width ``b`` of the search box (Sec. 3, footnote 4)."""

STEPS = 100
"""BO iterations per fit (Sec. 3, footnote 4)."""

EMBEDDING_DIM = 10
"""Dimension ``d`` of HG-REMBO's embedding (not given in the paper)."""

LOCAL_SCALE = 0.05
"""Standard deviation of the local EI candidates, as a fraction of the box width."""

_SMOOTH = ("exp", "none")


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    """EI of maximisation, ``(mu - best) Phi(z) + sigma phi(z)`` with ``z = (mu - best) / sigma``
    (``max(mu - best, 0)`` where sigma = 0)."""
    from scipy.stats import norm
    mean = np.asarray(mean, dtype=np.float64)
    std = np.asarray(std, dtype=np.float64)
    gain = mean - best
    out = np.maximum(gain, 0.0)
    positive = std > 0
    z = gain[positive] / std[positive]
    out[positive] = gain[positive] * norm.cdf(z) + std[positive] * norm.pdf(z)
    return np.maximum(out, 0.0)


class BoxBayesOpt:
    """GP-EI maximisation of ``objective(x)`` over the box ``[lower, upper]`` (Algorithm 1, lines 3-10).

    ``run(objective, x0, steps)`` evaluates ``x0`` (inside the box), then
    ``n_init`` candidates, then EI-chosen points, ``steps`` evaluations after
    ``x0`` in all; returns ``(x_best, y_best)``. ``records`` gets one dict per
    evaluation (``step``, ``kind`` "start"/"init"/"ei", ``bleu``,
    ``best_bleu``, ``ei``). :meth:`fit_gp` and :meth:`propose` are the two
    halves of a step (the benchmark times them).
    """

    def __init__(self, lower, upper, rng: np.random.Generator, *, n_candidates: int = 10000,
                 n_local: int = 500, n_init: int = 1, n_restarts: int = 2, optimize_every: int = 1):
        self.lower = np.asarray(lower, dtype=np.float64)
        self.upper = np.asarray(upper, dtype=np.float64)
        self.width = self.upper - self.lower
        self.rng = rng
        self.n_candidates = n_candidates
        self.n_local = n_local
        self.n_init = n_init
        self.n_restarts = n_restarts
        self.optimize_every = optimize_every
        self.dim = self.lower.shape[0]
        # Algorithm 1, line 3: the candidate set X in the box (unit-cube coordinates), drawn once
        self.candidates = rng.random((n_candidates, self.dim))
        self.available = np.ones(n_candidates, dtype=bool)
        self.U: list[np.ndarray] = []
        self.X: list[np.ndarray] = []
        self.y: list[float] = []
        self.gp = None
        self._kernel = None
        self._fits = 0
        self.records: list[dict] = []

    def to_box(self, u: np.ndarray) -> np.ndarray:
        return np.clip(self.lower + u * self.width, self.lower, self.upper)

    def to_unit(self, x: np.ndarray) -> np.ndarray:
        return np.clip((x - self.lower) / self.width, 0.0, 1.0)

    def _initial_kernel(self):
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel
        return (ConstantKernel(1.0, (1e-3, 1e3))
                * Matern(length_scale=np.ones(self.dim), length_scale_bounds=(1e-2, 1e2), nu=2.5)
                + WhiteKernel(1e-2, (1e-6, 1.0)))

    def fit_gp(self) -> None:
        """Fit the GP to the evaluations so far (hyperparameters re-optimised every ``optimize_every`` fits)."""
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.gaussian_process import GaussianProcessRegressor
        kernel = self._kernel if self._kernel is not None else self._initial_kernel()
        optimise = self._fits % self.optimize_every == 0
        gp = GaussianProcessRegressor(kernel, normalize_y=True, optimizer="fmin_l_bfgs_b" if optimise else None,
                                      n_restarts_optimizer=self.n_restarts if optimise else 0,
                                      random_state=int(self.rng.integers(2 ** 31 - 1)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            gp.fit(np.array(self.U), np.array(self.y))
        self.gp = gp
        self._kernel = gp.kernel_
        self._fits += 1

    def propose(self) -> tuple[np.ndarray, float, int]:
        """``(u, EI, candidate index or -1 for a local point)`` of the EI maximiser (unit coordinates)."""
        pool = np.flatnonzero(self.available)
        best_u = self.U[int(np.argmax(self.y))]
        local = np.clip(best_u + LOCAL_SCALE * self.rng.standard_normal((self.n_local, self.dim)), 0.0, 1.0)
        points = np.concatenate([self.candidates[pool], local]) if self.n_local else self.candidates[pool]
        if points.shape[0] == 0:
            points = self.rng.random((1, self.dim))
            pool = pool[:0]
        mean, std = self.gp.predict(points, return_std=True)
        noise = float(self._kernel.k2.noise_level) * float(getattr(self.gp, "_y_train_std", 1.0)) ** 2
        latent = np.sqrt(np.maximum(std ** 2 - noise, 0.0))
        ei = expected_improvement(mean, latent, max(self.y))
        k = int(np.argmax(ei))
        return points[k], float(ei[k]), (int(pool[k]) if k < pool.shape[0] else -1)

    def _record(self, kind: str, x: np.ndarray, u: np.ndarray, y: float, ei) -> None:
        self.X.append(x)
        self.U.append(u)
        self.y.append(float(y))
        self.records.append({"step": len(self.y) - 1, "kind": kind, "bleu": float(y),
                             "best_bleu": float(max(self.y)), "ei": ei})

    def run(self, objective, x0, steps: int) -> tuple[np.ndarray, float]:
        # one BLAS thread: the GP's matrices are tiny, and OpenBLAS threads make L-BFGS-B several
        # times slower (much more when other processes share the cores)
        with threadpool_limits(limits=1, user_api="blas"):
            return self._run(objective, x0, steps)

    def _run(self, objective, x0, steps: int) -> tuple[np.ndarray, float]:
        x0 = np.asarray(x0, dtype=np.float64)
        self._record("start", x0, self.to_unit(x0), objective(x0), None)
        for j in range(steps):
            if j < self.n_init and self.available.any():
                k = int(np.flatnonzero(self.available)[0])
                self.available[k] = False
                u = self.candidates[k]
                x = self.to_box(u)
                self._record("init", x, u, objective(x), None)
                continue
            self.fit_gp()
            u, ei, k = self.propose()
            if k >= 0:
                self.available[k] = False
            x = self.to_box(u)
            self._record("ei", x, u, objective(x), ei)
        best = int(np.argmax(self.y))
        return self.X[best], self.y[best]


def _check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise InputError(f"{name}={value!r}", expected=f"an integer >= {low}")
    return int(value)


def _check_positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise InputError(f"{name}={value!r}", expected="a finite number > 0")
    return float(value)


class _BayesOptTuner:
    """Parameters and the box search shared by the four tuners (see the module docstring); HG-BO, CHG-BO
    and NBL-BO take exactly these parameters, HG-REMBO adds its embedding's."""

    def __init__(self, bound: float = BOUND, steps: int = STEPS, n_candidates: int = 10000, n_local: int = 500,
                 n_init: int = 1, n_restarts: int = 2, optimize_every: int = 1, smooth: str = "exp",
                 seed: int = 0):
        self.bound = bound
        self.steps = steps
        self.n_candidates = n_candidates
        self.n_local = n_local
        self.n_init = n_init
        self.n_restarts = n_restarts
        self.optimize_every = optimize_every
        self.smooth = smooth
        self.seed = seed

    def _check_params(self) -> np.random.Generator:
        _check_positive("bound", self.bound)
        _check_int("steps", self.steps, 0)
        _check_int("n_candidates", self.n_candidates, 1)
        _check_int("n_local", self.n_local, 0)
        _check_int("n_init", self.n_init, 0)
        _check_int("n_restarts", self.n_restarts, 0)
        _check_int("optimize_every", self.optimize_every, 1)
        if self.smooth not in _SMOOTH:
            raise InputError(f"smooth={self.smooth!r}", expected="'exp' or 'none'")
        try:
            return np.random.default_rng(self.seed)
        except (TypeError, ValueError) as err:
            raise InputError(f"seed={self.seed!r}: {err}", expected="a non-negative integer") from None

    def _optimiser(self, lower, upper, rng) -> BoxBayesOpt:
        return BoxBayesOpt(lower, upper, rng, n_candidates=self.n_candidates, n_local=self.n_local,
                           n_init=self.n_init, n_restarts=self.n_restarts, optimize_every=self.optimize_every)

    @staticmethod
    def _split_dims(n_dense: int, used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(BO dimensions, sparse dimensions): the used dense features and the used sparse ones;
        with no dense feature in the space, every used feature is both."""
        used = np.flatnonzero(np.bincount(np.asarray(used, dtype=np.int64).ravel()))  # sorted, distinct; O(n)
        if n_dense == 0:
            return used, used
        return used[used < n_dense], used[used >= n_dense]

    def _box_search(self, evaluate, w: np.ndarray, dims: np.ndarray, rng, phase: str, history: list) -> np.ndarray:
        """Algorithm 1's inner loop over ``w[dims]`` in ``w[dims] +- bound``; returns the new weights."""
        if dims.size == 0:
            return w
        x0 = w[dims].copy()

        def objective(x):
            trial = w.copy()
            trial[dims] = x
            return evaluate(trial)

        bo = self._optimiser(x0 - self.bound, x0 + self.bound, rng)
        x_best, _ = bo.run(objective, x0, int(self.steps))
        for record in bo.records:
            history.append({"phase": phase, **record})
        out = w.copy()
        out[dims] = x_best
        return out

    def _finish(self, w: np.ndarray, evaluate, start_bleu: float, history: list) -> np.ndarray:
        self.weights_ = w
        self.bleu_ = float(evaluate(w))
        self.bleu_start_ = start_bleu
        self.history_ = history
        return w


class _HypergraphBO(_BayesOptTuner, Tuner):
    """HG-BO and its variants: ``fit(ForestData, w0)``."""

    tags = TunerTags(fits_on="forests")

    def _prepare(self, data, w0):
        if not isinstance(data, ForestData):
            raise InputError(f"tuning data of type {type(data).__name__}", expected="a ForestData (forests)")
        w = data.weight_array(w0)
        rng = self._check_params()
        batch = ForestBatch(data)
        smooth = self.smooth

        def evaluate(weights):
            return batch.bleu(weights, smooth=smooth)

        return w, rng, batch, evaluate


@register("hg-bo")
class HGBO(_HypergraphBO):
    """HG-BO (Miao et al. 2016, Algorithm 1): GP-EI search of the dense weights in ``w0 +- bound`` on fixed forests.

    Parameters
    ----------
    bound : half-width ``b`` of the box around ``w0`` per weight (Sec. 3: 0.1).
    steps : BLEU evaluations after ``w0`` (Sec. 3: 100 BO iterations).
    n_candidates : size of the candidate set ``X`` drawn once in the box (Algorithm 1, line 3).
    n_local : EI candidates drawn around the incumbent at every step (local refinement).
    n_init : candidates evaluated before the first GP (spearmint: 1).
    n_restarts : random restarts of the GP hyperparameter optimisation.
    optimize_every : re-optimise the GP hyperparameters every this many steps (1: every step).
    smooth : corpus BLEU maximised: ``"exp"`` (sacrebleu's default) or ``"none"``.
    seed : seed of ``numpy.random.default_rng``.

    Notes
    -----
    After :meth:`fit`: ``weights_``, ``bleu_`` (its BLEU on the data), ``bleu_start_`` (of ``w0``),
    ``history_`` (one dict per evaluation: ``phase``, ``step``, ``kind``, ``bleu``, ``best_bleu``, ``ei``).
    """

    def fit(self, data: ForestData, w0) -> np.ndarray:
        w, rng, batch, evaluate = self._prepare(data, w0)
        dims, _ = self._split_dims(data.space.n_dense, batch.feat_ids)
        history: list[dict] = []
        start_bleu = evaluate(w)
        w = self._box_search(evaluate, w, dims, rng, "dense", history)
        return self._finish(w, evaluate, start_bleu, history)


@register("chg-bo")
class CHGBO(HGBO):
    """CHG-BO (Miao et al. 2016, Sec. 2): HG-BO on the previous and the current iteration's forests together."""

    tags = TunerTags(fits_on="forests", forest_iterations=2)


@register("hg-rembo")
class HGREMBO(_HypergraphBO):
    """HG-REMBO (Miao et al. 2016, Sec. 2 and 3): HG-BO of the dense weights, then BO of the sparse weights
    ``w_sparse + A_bar z`` in a random ``d``-dimensional embedding with ``z`` in ``[-embedding_bound, embedding_bound]^d``.

    Parameters as :class:`HGBO`, and
    embedding_dim : ``d`` (not given in the paper; ``min(d, number of sparse features)`` is used).
    embedding_bound : bound of every ``z_n`` (default ``bound``: each sparse weight then moves by at most ``bound``).
    sparse_steps : BO evaluations of the second step (default ``steps``).

    After :meth:`fit` also ``embedding_`` (``A_bar``, ``[h, d]``) and ``sparse_ids_`` (its rows' feature ids),
    ``z_`` (the chosen point of the embedding); ``history_`` phases are ``"dense"`` and ``"sparse"``.
    """

    def __init__(self, bound: float = BOUND, steps: int = STEPS, embedding_dim: int = EMBEDDING_DIM,
                 embedding_bound: float | None = None, sparse_steps: int | None = None, n_candidates: int = 10000,
                 n_local: int = 500, n_init: int = 1, n_restarts: int = 2, optimize_every: int = 1,
                 smooth: str = "exp", seed: int = 0):
        super().__init__(bound=bound, steps=steps, n_candidates=n_candidates, n_local=n_local, n_init=n_init,
                         n_restarts=n_restarts, optimize_every=optimize_every, smooth=smooth, seed=seed)
        self.embedding_dim = embedding_dim
        self.embedding_bound = embedding_bound
        self.sparse_steps = sparse_steps

    def fit(self, data: ForestData, w0) -> np.ndarray:
        w, rng, batch, evaluate = self._prepare(data, w0)
        d = _check_int("embedding_dim", self.embedding_dim, 1)
        bound_z = self.bound if self.embedding_bound is None else _check_positive("embedding_bound",
                                                                                 self.embedding_bound)
        steps_z = self.steps if self.sparse_steps is None else _check_int("sparse_steps", self.sparse_steps, 0)
        n_dense = data.space.n_dense
        dims, sparse = self._split_dims(n_dense, batch.feat_ids)
        history: list[dict] = []
        start_bleu = evaluate(w)
        # step 1 (Sec. 3, Table 3): the dense ("default") features by HG-BO
        if n_dense > 0:
            w = self._box_search(evaluate, w, dims, rng, "dense", history)
        self.sparse_ids_ = sparse
        self.embedding_ = np.zeros((sparse.shape[0], 0))
        self.z_ = np.zeros(0)
        if sparse.size == 0:
            return self._finish(w, evaluate, start_bleu, history)
        # step 2: the sparse features in a random embedding, g(z) = f(A_bar z + w) (Sec. 2)
        d = min(d, int(sparse.shape[0]))
        A = rng.standard_normal((sparse.shape[0], d))
        A_bar = A / np.abs(A).sum(axis=1, keepdims=True)
        base = w.copy()

        def g(z):
            trial = base.copy()
            trial[sparse] = base[sparse] + A_bar @ z
            return evaluate(trial)

        bo = self._optimiser(np.full(d, -bound_z), np.full(d, bound_z), rng)
        z_best, _ = bo.run(g, np.zeros(d), steps_z)
        for record in bo.records:
            history.append({"phase": "sparse", **record})
        w = base.copy()
        w[sparse] = base[sparse] + A_bar @ z_best
        self.embedding_ = A_bar
        self.z_ = z_best
        return self._finish(w, evaluate, start_bleu, history)


@register("nbl-bo")
class NBLBO(_BayesOptTuner, Tuner):
    """NBL-BO (Miao et al. 2016, Sec. 2): Algorithm 1 on k-best lists: GP-EI search of the dense weights in
    ``w0 +- bound`` maximising the corpus BLEU of the model-best hypotheses of a :class:`KBest`.

    Parameters and attributes as :class:`HGBO`. Its box is in the weights' own units, so the loop decodes
    its weights as they are (``scales_weights=False``).
    """

    tags = TunerTags(scales_weights=False)

    def fit(self, data: KBest, w0) -> np.ndarray:
        w = self.check_data(data, w0)
        rng = self._check_params()
        n_dense = data.space.n_dense
        used = np.concatenate([np.flatnonzero((data.features != 0).any(axis=0)), np.unique(data.indices)])
        dims, _ = self._split_dims(n_dense, used)
        smooth = self.smooth

        def evaluate(weights):
            return corpus_bleu_from_stats(data.corpus_stats(data.model_best(weights)), smooth=smooth)

        history: list[dict] = []
        start_bleu = evaluate(w)
        w = self._box_search(evaluate, w, dims, rng, "dense", history)
        return self._finish(w, evaluate, start_bleu, history)
