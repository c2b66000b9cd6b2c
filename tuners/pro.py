"""PRO: Pairwise Ranking Optimization (Hopkins & May, EMNLP 2011), as Moses' ``pro`` + MegaM run it.

The steps as Dreyer & Dong (2015, Sec. 3, papers/apro-all-pairs-ranking.txt) summarise them,
for each sentence s with BLEU+1 scores ``b_i`` and features ``f_i``:

2. sample ``Gamma = 5000`` candidate pairs ``(i, j)`` uniformly with replacement,
   discard those with ``|b_i - b_j| < beta = 0.05``, keep the ``Xi = 50`` with the
   largest ``|b_i - b_j|`` (ties: the earlier draw; kept in sampling order, as Moses);
3. for each kept pair with ``b_i > b_j`` add ``x = f_i - f_j`` with label 1 and ``-x``
   with label 0 (the two lines per pair of Moses' pro.data);
4. train a binary classifier, here L2-regularised logistic regression without bias
   (MegaM ``-nobias binary`` with its Gaussian prior of precision ``lambda = 1``)::

       w' = argmin_w  sum_n [log(1 + exp(w . x_n)) - y_n w . x_n] + lambda / 2 ||w||^2

   by L-BFGS on the exact loss and gradient, and interpolate
   ``w_{t+1} = Psi w' + (1 - Psi) w_t`` with Hopkins & May's ``Psi = 0.1``.

BLEU+1 is Moses' PRO variant by default: +1 on the matches and totals of every
order including unigrams, brevity penalty from the raw lengths
(``sentence_bleu(smooth_unigram=True)``).
"""

from __future__ import annotations

import math
import os

import numpy as np
import scipy.sparse
from scipy.optimize import minimize
from scipy.special import expit

from minismt.errors import InputError
from minismt.io import atomic_write
from minismt.kbest import KBest
from minismt.metrics import bleu_plus_one
from tuners.base import Tuner, register

MOSES_PRO_BLEU = {"smooth_unigram": True}
"""BLEU+1 options of Moses' PRO (``sentenceLevelBleuPlusOne``): add 1 to every order."""


def draw_candidates(offsets, rng: np.random.Generator, n_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Step 2, sampling: ``n_samples`` pairs per sentence, both ends uniform with replacement.

    Returns global rows ``(first, second)``, sentence after sentence in draw
    order (``n_samples`` per sentence with at least two hypotheses; sentences
    with fewer are skipped without drawing).
    """
    first, second = [], []
    for s in range(offsets.shape[0] - 1):
        lo, k = int(offsets[s]), int(offsets[s + 1] - offsets[s])
        if k < 2:
            continue
        draws = rng.integers(0, k, size=(n_samples, 2)) + lo
        first.append(draws[:, 0])
        second.append(draws[:, 1])
    if not first:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(first).astype(np.int64), np.concatenate(second).astype(np.int64)


def select_pairs(offsets, bleu, first, second, min_diff: float, n_kept: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step 2, selection: drop pairs with ``|b_i - b_j| < min_diff`` (and ties), then keep the
    ``n_kept`` largest differences of each sentence.

    Among equal differences the earlier draw wins; the kept pairs stay in draw
    order. Returns global rows ``(better, worse)`` with ``bleu[better] > bleu[worse]``
    and the positions of the kept pairs among the candidates (increasing).
    """
    diff = bleu[first] - bleu[second]
    gap = np.abs(diff)
    keep = np.flatnonzero((gap >= min_diff) & (gap > 0))
    sentence = np.searchsorted(offsets, first[keep], side="right") - 1
    # by sentence, then largest gap, then draw order; then position within the sentence
    order = np.lexsort((keep, -gap[keep], sentence))
    by_gap = keep[order]
    sorted_sentence = sentence[order]
    starts = np.searchsorted(sorted_sentence, sorted_sentence, side="left")
    position = np.arange(by_gap.shape[0]) - starts
    chosen = np.sort(by_gap[position < n_kept])
    i, j = first[chosen], second[chosen]
    better = np.where(diff[chosen] > 0, i, j)
    worse = np.where(diff[chosen] > 0, j, i)
    return better, worse, chosen


def pair_differences(data: KBest, better, worse) -> tuple[np.ndarray, scipy.sparse.csr_matrix | None]:
    """``f_better - f_worse`` per pair: dense ``[P, D]`` and sparse ``[P, n_sparse]`` (None if no sparse)."""
    dense = data.features[better] - data.features[worse]
    n_dense = data.space.n_dense
    n_sparse = len(data.space) - n_dense
    if n_sparse == 0 or data.indices.size == 0:
        return dense, None
    block = scipy.sparse.csr_matrix((data.values, data.indices - n_dense, data.indptr),
                                    shape=(data.n_hypotheses, n_sparse))
    sparse = (block[better] - block[worse]).tocsr()
    sparse.eliminate_zeros()
    return dense, sparse


def logistic_loss(w, dense, sparse, labels, lam: float) -> tuple[float, np.ndarray]:
    """L2-regularised logistic loss without bias and its gradient.

    ``sum_n [log(1 + exp(z_n)) - y_n z_n] + lam/2 ||w||^2`` with ``z = X w``,
    ``X = [dense | sparse]``, ``y`` in {0, 1}; gradient ``X^T (sigmoid(z) - y) + lam w``.
    """
    n_dense = dense.shape[1]
    z = dense @ w[:n_dense]
    if sparse is not None:
        z = z + sparse @ w[n_dense:]
    loss = float(np.sum(np.logaddexp(0.0, z) - labels * z)) + 0.5 * lam * float(w @ w)
    residual = expit(z) - labels
    grad = lam * w
    grad[:n_dense] += dense.T @ residual
    if sparse is not None:
        grad[n_dense:] += sparse.T @ residual
    return loss, grad


def training_set(dense, sparse) -> tuple[np.ndarray, scipy.sparse.csr_matrix | None, np.ndarray]:
    """Step 3: rows ``x`` (label 1) and ``-x`` (label 0) for each pair, interleaved as in pro.data."""
    n = dense.shape[0]
    rows = np.empty((2 * n, dense.shape[1]))
    rows[0::2] = dense
    rows[1::2] = -dense
    labels = np.tile([1.0, 0.0], n)
    if sparse is None:
        return rows, None, labels
    order = np.empty(2 * n, dtype=np.int64)
    order[0::2] = np.arange(n)
    order[1::2] = np.arange(n) + n
    both = scipy.sparse.vstack([sparse, -sparse], format="csr")[order]
    return rows, both.tocsr(), labels


def pro_data_lines(data: KBest, better: int, worse: int) -> str:
    """The two pro.data lines (``1`` then ``0``) of one pair, newline-terminated.

    Each line is the label followed by `` F<j> <d_j>`` for the dense differences
    ``d = f_better - f_worse`` with ``|d_j| > 1e-5`` and, if either hypothesis
    has sparse features, a space and ``<name> <d> `` for each sparse difference
    with ``|d| >= 1e-5`` (in feature-index order). Differences are taken in
    single precision and printed with ``%g``, as Moses stores features as ``float``.
    """
    d = data.features[better].astype(np.float32) - data.features[worse].astype(np.float32)
    cols = np.flatnonzero(np.abs(d) > np.float32(1e-5)).tolist()
    sparse_part = None
    if data.indptr[better + 1] > data.indptr[better] or data.indptr[worse + 1] > data.indptr[worse]:
        diff: dict[int, np.float32] = {}
        for row, sign in ((better, np.float32(1)), (worse, np.float32(-1))):
            indices, values = data.sparse_row(row)
            for index, value in zip(indices.tolist(), values.astype(np.float32)):
                diff[index] = diff.get(index, np.float32(0)) + sign * value
        sparse_part = [(data.space.name(index), float(diff[index])) for index in sorted(diff)
                       if abs(diff[index]) >= np.float32(1e-5)]
    lines = []
    for label, sign in (("1", 1.0), ("0", -1.0)):
        line = " ".join([label] + [f"F{c} {sign * float(d[c]):g}" for c in cols])
        if sparse_part is not None:
            line += " " + "".join(f"{name} {sign * value:g} " for name, value in sparse_part)
        lines.append(line + "\n")
    return "".join(lines)


def write_pro_data(path: str | os.PathLike, data: KBest, better, worse) -> None:
    """Write pairs ``(better[p], worse[p])`` in Moses' pro.data (MegaM ``-fvals``) format, as Moses' ``pro``.

    See :func:`pro_data_lines` for the two lines per pair.
    """
    with atomic_write(path) as out:
        for i, j in zip(np.asarray(better).tolist(), np.asarray(worse).tolist()):
            out.write(pro_data_lines(data, i, j))


@register("pro")
class PRO(Tuner):
    """PRO (Hopkins & May 2011): sampled pairwise ranking with logistic regression.

    Parameters
    ----------
    gamma : candidate pairs drawn per sentence (Gamma, 5000).
    beta : candidate pairs with ``|b_i - b_j| < beta`` are dropped (0.05).
    xi : pairs kept per sentence, the largest BLEU+1 differences (Xi, 50).
    psi : interpolation ``w_{t+1} = psi w' + (1 - psi) w_t`` (Psi, 0.1).
    lam : L2 regularisation strength ``lambda`` of the logistic regression, the
        precision of a Gaussian prior on ``w`` (MegaM's ``-lambda``, default 1,
        the setting of Hopkins & May and of Dreyer & Dong's experiments).
    bleu_options : keyword arguments of :func:`minismt.metrics.sentence_bleu`;
        None is Moses' PRO BLEU+1 (``smooth_unigram=True``).
    max_iter : at most this many L-BFGS iterations (the optimum is unique; the
        classifier is trained from ``w = 0``).
    seed : seed of ``numpy.random.default_rng`` for the sampling.

    Notes
    -----
    After ``fit``: ``weights_``, ``history_`` (one dict per L-BFGS iteration with
    the regularised logistic loss), ``pairs_`` (the kept ``(better, worse)`` rows),
    ``n_iter_``, ``converged_``.
    """

    def __init__(self, gamma: int = 5000, beta: float = 0.05, xi: int = 50, psi: float = 0.1,
                 lam: float = 1.0, bleu_options: dict | None = None, max_iter: int = 1000,
                 seed: int = 0):
        self.gamma = gamma
        self.beta = beta
        self.xi = xi
        self.psi = psi
        self.lam = lam
        self.bleu_options = bleu_options
        self.max_iter = max_iter
        self.seed = seed

    def _check_params(self) -> None:
        for name in ("gamma", "xi", "max_iter"):
            value = getattr(self, name)
            if not (isinstance(value, (int, np.integer)) and value >= 1):
                raise InputError(f"PRO {name}={value!r}", expected="an integer >= 1")
        if not (isinstance(self.beta, (int, float)) and 0 <= self.beta < math.inf):
            raise InputError(f"PRO beta={self.beta!r}", expected="a finite number >= 0")
        if not (isinstance(self.psi, (int, float)) and 0 < self.psi <= 1):
            raise InputError(f"PRO psi={self.psi!r}", expected="0 < psi <= 1")
        if not (isinstance(self.lam, (int, float)) and 0 < self.lam < math.inf):
            raise InputError(f"PRO lam={self.lam!r}", expected="a finite number > 0")

    def fit(self, data: KBest, w0) -> np.ndarray:
        w_old = self.check_data(data, w0)
        self._check_params()
        bleu = bleu_plus_one(data.stats, self.bleu_options, MOSES_PRO_BLEU)
        rng = np.random.default_rng(self.seed)
        first, second = draw_candidates(data.offsets, rng, int(self.gamma))
        better, worse, _ = select_pairs(data.offsets, bleu, first, second, float(self.beta), int(self.xi))
        if better.shape[0] == 0:
            raise InputError("no PRO training pairs: no sampled pair differs enough in BLEU+1",
                             expected=f"hypotheses whose BLEU+1 differ by at least beta={self.beta}")
        dense, sparse, labels = training_set(*pair_differences(data, better, worse))
        lam = float(self.lam)
        history: list[dict] = []

        def record(intermediate_result):
            history.append({"iteration": len(history) + 1, "loss": float(intermediate_result.fun)})

        result = minimize(logistic_loss, np.zeros(len(data.space)), args=(dense, sparse, labels, lam),
                          method="L-BFGS-B", jac=True, callback=record,
                          options={"maxiter": int(self.max_iter), "gtol": 1e-8, "ftol": 1e-12})
        w_new = self.psi * result.x + (1.0 - self.psi) * w_old
        self.pairs_ = (better, worse)
        self.history_ = history
        self.n_iter_ = int(result.nit)
        self.converged_ = bool(result.success)
        self.weights_ = w_new
        return w_new
