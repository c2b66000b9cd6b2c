"""APRO: All-Pairs Ranking Optimization (Dreyer & Dong, NAACL 2015, papers/apro-all-pairs-ranking.txt).

APRO ranks *all* pairs of each sentence's k-best list instead of PRO's sample.
With ``b_i`` the BLEU+1 of hypothesis i, ``f_i`` its features and ``h_i = w . f_i``:

* preference pairs of sentence s (eq. 1): ``P^s = {(i, j) : b_i > b_j}``, ties excluded;
* sentence loss, the pairwise squared hinge (eq. 2)::

      L^s_w = sum_{(i,j) in P^s} max(0, 1 - h_i + h_j)^2

* objective (eq. 3), with ``N = sum_s k_s`` the number of hypotheses::

      w' = argmin_w  1/2 w^T w + C / N * sum_s L^s_w

  (the paper's footnote 9: Lee & Lin's solver is called with ``C' = C / N``);
  ``C = 1`` by default, not the paper's 0.01 (see :data:`DEFAULT_C`);
* new weights ``w_{t+1} = Psi w' + (1 - Psi) w_t`` with ``Psi = 1`` (Sec. 5.1), i.e. PRO's
  step 4 without interpolation by default.

Each ``L^s`` and its derivatives are computed in O(k log k) from the
quantities ``q_{i.}``, ``q_{.i}``, ``r_{i.}`` of eqs. (4)-(7) and the
rearranged loss of eq. (11), by sorted sweeps with a Fenwick tree over BLEU
ranks (:mod:`tuners._apro_kernels`). The objective is convex and once
differentiable; it is minimised by a trust-region Newton-CG method
(``scipy.optimize.minimize(method="trust-ncg")``) with the exact gradient and
the generalised Hessian-vector product, as Lee & Lin (2014) minimise RankSVM
with a truncated Newton method. No randomness: the same data and start
weights give the same result, bit for bit.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
from scipy.optimize import minimize

from minismt.errors import InputError
from minismt.kbest import KBest
from minismt.metrics import bleu_plus_one
from tuners import _apro_kernels as kernels
from tuners.base import Tuner, register

N_BLOCKS = 64
"""Sentences are processed in this many contiguous blocks (in parallel); fixed, so that the
floating-point summation order, and hence the result, does not depend on the thread count."""

METHODS = ("trust-ncg", "trust-krylov")

DEFAULT_C = 1.0
"""C of eq. (3). At ``w = 0`` the loss term is ``C P / N`` with ``P`` preference pairs and ``N``
hypotheses; ``P / N`` is at most ``k / 2`` for lists of ``k`` entries (40 on Moses' scorer100
100-best lists, 110 on 231 accumulated entries per sentence: ties are not pairs). The paper's
C = 0.01 was set on lists of ``k_s`` about 3,600 (its Sec. 5.2), where the loss weighs up to 18;
on a first 100-best list it weighs about 0.4, the regulariser wins, every weight ends within a
few hundredths of 0 along the mean pair difference (the LM weight pulled towards 0 by length)
and the first tuning step loses 1.4 decoded dev BLEU on Multi30k de-en (2.1 and 3.7 on the
small-data de-en and fr-en settings). C = 1 (loss weight about 40 on a first list) loses at most
0.2 there (it gains 0.4 on fr-en), and reaches the best dev BLEU of C in {0.01, 0.1, 1, 10} on
Multi30k de-en (benchmarks/tuner_quality.py)."""


class APROObjective:
    """The APRO objective of eq. (3) over one k-best list, its gradient and generalised Hessian.

    ``f(w) = 1/2 w.w + C/N sum_s L^s_w``; ``grad f = w + C/N X^T alpha`` and
    ``H v = v + 2 C/N X^T Lap_Q X v`` (see :mod:`tuners._apro_kernels` for
    ``alpha`` and ``Lap_Q``). ``X`` is the dense block ``features [N, D]`` plus
    the CSR block ``(indptr, indices, values)`` with global column indices below
    ``n_weights``; neither is copied. ``bleu[N]`` are the BLEU+1 scores.

    The sort orders and sweep cut points (which define the violating pairs
    ``Q``) of the two most recently evaluated weight vectors are kept, because a
    trust-region method asks for Hessian products at its current point after
    evaluating a rejected trial point.
    """

    def __init__(self, offsets, features, indptr, indices, values, bleu, C: float, n_weights: int):
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.features = np.ascontiguousarray(features, dtype=np.float64)
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(indices, dtype=np.int32)
        self.values = np.ascontiguousarray(values, dtype=np.float64)
        self.n_weights = int(n_weights)
        self.n_hypotheses = self.features.shape[0]
        self.C = float(C)
        self.scale = self.C / self.n_hypotheses if self.n_hypotheses else 0.0   # C / N of eq. (3)
        n_sent = self.offsets.shape[0] - 1
        self.rank = np.empty(self.n_hypotheses, dtype=np.int32)
        self.n_ranks = np.empty(n_sent, dtype=np.int64)
        kernels.bleu_ranks(self.offsets, np.ascontiguousarray(bleu, dtype=np.float64),
                           self.rank, self.n_ranks)
        self.blocks = kernels.block_bounds(self.offsets, N_BLOCKS)
        self._work = np.empty(self.n_hypotheses)   # alpha or u of the current call
        self._states: OrderedDict[bytes, dict] = OrderedDict()
        self.n_evaluations = 0
        self.n_hessian_products = 0

    @classmethod
    def from_kbest(cls, data: KBest, bleu, C: float) -> "APROObjective":
        return cls(data.offsets, data.features, data.indptr, data.indices, data.values, bleu, C,
                   len(data.space))

    def n_pairs(self) -> int:
        """Number of preference pairs ``sum_s |P^s|`` (eq. 1)."""
        total = 0
        for s in range(self.offsets.shape[0] - 1):
            counts = np.bincount(self.rank[self.offsets[s]:self.offsets[s + 1]])
            k = int(counts.sum())
            total += (k * k - int(np.dot(counts, counts))) // 2
        return total

    # ---- evaluation ----------------------------------------------------------------------
    def _state(self, w: np.ndarray) -> dict:
        w = np.ascontiguousarray(w, dtype=np.float64)
        key = w.tobytes()
        state = self._states.get(key)
        if state is not None:
            self._states.move_to_end(key)
            return state
        if len(self._states) >= 2:
            _, state = self._states.popitem(last=False)
        else:
            n = self.n_hypotheses
            state = {name: np.empty(n, dtype=np.int32)
                     for name in ("order", "cut_first", "cut_second", "q_total")}
        n_blocks = self.blocks.shape[0] - 1
        block_loss = np.zeros(n_blocks)
        block_grad = np.zeros((n_blocks, self.features.shape[1]))
        kernels.loss_gradient(self.offsets, self.blocks, self.features, self.indptr, self.indices,
                              self.values, w, self.rank, self.n_ranks, state["order"],
                              state["cut_first"], state["cut_second"], state["q_total"],
                              self._work, block_loss, block_grad)
        loss_grad = np.zeros(self.n_weights)
        loss_grad[: self.features.shape[1]] = block_grad.sum(axis=0)
        if self.indices.size:
            kernels.sparse_transpose_add(self.indptr, self.indices, self.values, self._work, loss_grad)
        state["loss"] = float(block_loss.sum())
        state["objective"] = 0.5 * float(w @ w) + self.scale * state["loss"]
        state["gradient"] = w + self.scale * loss_grad
        self._states[key] = state
        self.n_evaluations += 1
        return state

    def __call__(self, w) -> tuple[float, np.ndarray]:
        """Objective of eq. (3) and its gradient."""
        state = self._state(w)
        return state["objective"], state["gradient"].copy()

    def loss(self, w) -> float:
        """``sum_s L^s_w`` (eq. 2 summed over sentences, computed by eq. 11)."""
        return self._state(w)["loss"]

    def hessp(self, w, v) -> np.ndarray:
        """Generalised Hessian of eq. (3) at ``w`` times ``v``: ``v + 2 C/N X^T Lap_Q X v``."""
        state = self._state(w)
        v = np.ascontiguousarray(v, dtype=np.float64)
        n_blocks = self.blocks.shape[0] - 1
        block_out = np.zeros((n_blocks, self.features.shape[1]))
        kernels.hessian_laplacian(self.offsets, self.blocks, self.features, self.indptr, self.indices,
                                  self.values, v, self.rank, self.n_ranks, state["order"],
                                  state["cut_first"], state["cut_second"], state["q_total"],
                                  self._work, block_out)
        product = np.zeros(self.n_weights)
        product[: self.features.shape[1]] = block_out.sum(axis=0)
        if self.indices.size:
            kernels.sparse_transpose_add(self.indptr, self.indices, self.values, self._work, product)
        self.n_hessian_products += 1
        return v + 2.0 * self.scale * product

    def pair_statistics(self, w) -> dict[str, np.ndarray]:
        """``q_{i.}``, ``q_{.i}``, ``r_{i.}`` (eqs. 5-7) and ``r_{.i}`` of every hypothesis at ``w``."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        n = self.n_hypotheses
        out = {"q_i_dot": np.empty(n, dtype=np.int64), "q_dot_i": np.empty(n, dtype=np.int64),
               "r_i_dot": np.empty(n), "r_dot_i": np.empty(n)}
        kernels.pair_statistics(self.offsets, self.features, self.indptr, self.indices, self.values,
                                w, self.rank, self.n_ranks, out["q_i_dot"], out["q_dot_i"],
                                out["r_i_dot"], out["r_dot_i"])
        return out


@register("apro")
class APRO(Tuner):
    """APRO (Dreyer & Dong 2015): all-pairs squared-hinge ranking, trust-region Newton.

    Parameters
    ----------
    C : regularisation constant of eq. (3) (:data:`DEFAULT_C`, 1; the paper's 0.01 is for
        lists of thousands of hypotheses); the loss is scaled by ``C / N`` with ``N`` the number
        of hypotheses. With tens of thousands of sparse features use the paper's 0.01: on
        Multi30k de-en with 30,000 rule-id and word-pair features, C = 1 fits the 1,014 dev
        sentences by heart (dev BLEU 50.08, test 37.18), C = 0.01 does not (40.00, 39.78).
    psi : interpolation ``w_{t+1} = psi w' + (1 - psi) w_t`` (the paper's Psi = 1: none). Measured
        on Multi30k (benchmarks/tuner_quality.py, 6 iterations): with a good start (de-en), psi = 0.3
        reaches PRO's test BLEU (40.42 against PRO's mean 40.43; 1 gives 40.13, with output 2% shorter than
        PRO's); with a start far off (fr-en on 3,000 pairs, output 5% too long), psi = 1 reaches 39.13
        dev BLEU in 3 steps where 0.3 reaches 37.60.
    bleu_options : keyword arguments of :func:`minismt.metrics.sentence_bleu`
        choosing the BLEU+1 variant; None is Lin & Och's BLEU+1, the paper's.
    tol : stop when ``||grad f(w)|| <= tol * ||grad f(0)||``, the relative
        criterion of LIBLINEAR's TRON (on which Lee & Lin's solver is built),
        measured from ``w = 0`` whatever the start point. 1e-6 puts the weights
        within about 1e-5 (relative) of the optimum on the Moses fixtures.
    max_iter : at most this many Newton (trust-region) iterations.
    method : ``"trust-ncg"`` (Steihaug CG, as TRON) or ``"trust-krylov"``.

    Notes
    -----
    The optimisation starts from the given weights (the objective is strictly
    convex, so only the number of iterations depends on them). After ``fit``:
    ``weights_``, ``history_`` (one dict per Newton iteration: objective, loss,
    gradient norm), ``n_iter_``, ``converged_``, ``n_pairs_``, ``n_evaluations_`` and
    ``n_hessian_products_`` (objective/gradient evaluations and Hessian-vector products made).
    """

    def __init__(self, C: float = DEFAULT_C, psi: float = 1.0, bleu_options: dict | None = None,
                 tol: float = 1e-6, max_iter: int = 100, method: str = "trust-ncg"):
        self.C = C
        self.psi = psi
        self.bleu_options = bleu_options
        self.tol = tol
        self.max_iter = max_iter
        self.method = method

    def _check_params(self) -> None:
        if not (isinstance(self.C, (int, float)) and math.isfinite(self.C) and self.C > 0):
            raise InputError(f"APRO C={self.C!r}", expected="a finite number > 0")
        if not (isinstance(self.psi, (int, float)) and 0 < self.psi <= 1):
            raise InputError(f"APRO psi={self.psi!r}", expected="0 < psi <= 1")
        if not (isinstance(self.tol, (int, float)) and self.tol > 0):
            raise InputError(f"APRO tol={self.tol!r}", expected="a number > 0")
        if not (isinstance(self.max_iter, (int, np.integer)) and self.max_iter >= 1):
            raise InputError(f"APRO max_iter={self.max_iter!r}", expected="an integer >= 1")
        if self.method not in METHODS:
            raise InputError(f"APRO method={self.method!r}", expected=" or ".join(METHODS))

    def fit(self, data: KBest, w0) -> np.ndarray:
        w_old = self.check_data(data, w0)
        self._check_params()
        bleu = bleu_plus_one(data.stats, self.bleu_options)
        objective = APROObjective.from_kbest(data, bleu, self.C)
        self.n_pairs_ = objective.n_pairs()
        if self.n_pairs_ == 0:
            raise InputError("no preference pairs: every sentence's hypotheses tie in BLEU+1",
                             expected="a sentence with two hypotheses of different BLEU+1")
        _, grad_zero = objective(np.zeros(objective.n_weights))
        gtol = self.tol * float(np.linalg.norm(grad_zero))
        history: list[dict] = []

        def record(intermediate_result):
            state = objective._state(intermediate_result.x)
            history.append({"iteration": len(history) + 1, "objective": state["objective"],
                            "loss": state["loss"],
                            "gradient_norm": float(np.linalg.norm(state["gradient"]))})

        result = minimize(objective, w_old, method=self.method, jac=True, hessp=objective.hessp,
                          callback=record, options={"gtol": gtol, "maxiter": self.max_iter})
        w_new = self.psi * result.x + (1.0 - self.psi) * w_old
        self.history_ = history
        self.n_iter_ = int(result.nit)
        self.converged_ = bool(result.success)
        self.n_evaluations_ = objective.n_evaluations
        self.n_hessian_products_ = objective.n_hessian_products
        self.weights_ = w_new
        return w_new
