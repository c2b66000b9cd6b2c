"""IBM Model 1 (Brown, Della Pietra, Della Pietra & Mercer 1993, Sec. 4.1) with a NULL word.

For a pair ``e = e_1..e_I`` (conditioning side, plus ``e_0 = NULL``) and
``f = f_1..f_J`` (generated side):

    Pr(f | e) = prod_j 1/(I+1) sum_{i=0..I} t(f_j | e_i)

(the length probability epsilon, a constant, is left out of the reported
log-likelihood). EM: the expected count of (e, f) in a pair is
``t(f|e) / sum_{i'} t(f|e_{i'})`` summed over the positions where they occur,
and ``t(f|e) = c(f|e) / sum_f c(f|e)`` over the corpus. t starts uniform,
``1 / n_f``. The Viterbi alignment picks ``argmax_i t(f_j|e_i)`` for every j.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from minismt.align import _kernels
from minismt.align.translation_table import PairIndex, TranslationTable, alignment_from_positions
from minismt.corpus import Alignment
from minismt.errors import InputError

Callback = Callable[[str, int, float], None]
"""Called after every EM iteration with (model name, iteration number from 1, log-likelihood)."""


@dataclass
class IBM1Model:
    """A trained Model 1: ``t(f|e)`` and the log-likelihood of the E-step of every iteration
    (``log_likelihoods[k]`` is the corpus log-likelihood under the parameters before update k+1)."""

    t: TranslationTable
    log_likelihoods: list[float]


def check_iterations(name: str, value) -> int:
    """An iteration count: a non-negative integer, else InputError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InputError(f"{name}={value!r}", expected="a non-negative integer")
    return int(value)


def check_table(index: PairIndex, t: TranslationTable) -> np.ndarray:
    """The probabilities of ``t``, which must have been trained on ``index``'s pairs."""
    if t.keys is not index.keys and not np.array_equal(t.keys, index.keys):
        raise InputError("the translation table was trained on another corpus",
                         expected="the PairIndex the model was trained on")
    return np.ascontiguousarray(t.prob, dtype=np.float64)


def train_ibm1(index: PairIndex, iterations: int = 5, t0: TranslationTable | None = None,
               callback: Callback | None = None) -> IBM1Model:
    """Run ``iterations`` EM iterations of Model 1 on ``index``, from ``t0`` or the uniform table."""
    iterations = check_iterations("iterations", iterations)
    t = index.uniform_table() if t0 is None else check_table(index, t0).copy()
    counts = np.empty_like(t)
    log_likelihoods = []
    for iteration in range(1, iterations + 1):
        loglik = _kernels.ibm1_expectation(index.pair_ids, index.block_offsets, index.e_lengths,
                                           index.f_lengths, t, counts)
        _kernels.normalize_rows(counts, index.row_offsets, t)
        log_likelihoods.append(float(loglik))
        if callback is not None:
            callback("ibm1", iteration, float(loglik))
    return IBM1Model(TranslationTable(index.keys, t, index.n_e, index.n_f), log_likelihoods)


def viterbi_ibm1(index: PairIndex, model: IBM1Model) -> Alignment:
    """Most probable Model 1 alignment of every pair of ``index`` as (e position, f position) links;
    f words aligned to NULL get no link."""
    t = check_table(index, model.t)
    positions = np.empty(int(index.f_offsets[-1]), dtype=np.int32)
    _kernels.ibm1_viterbi(index.pair_ids, index.block_offsets, index.e_lengths, index.f_lengths, t,
                          positions)
    return alignment_from_positions(positions, index.f_offsets)
