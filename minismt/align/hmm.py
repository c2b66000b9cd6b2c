"""The HMM alignment model (Vogel, Ney & Tillmann 1996) with empty words (Och & Ney 2003).

The alignment ``a_j`` of the generated word ``f_j`` depends on ``a_{j-1}`` only
through the jump width:

    Pr(f | e) = sum_a prod_j p(a_j | a_{j-1}, I) t(f_j | e_{a_j})
    p(i | i', I) = c(i - i') / sum_{i''=1..I} c(i'' - i')

The empty word (Och & Ney 2003): the HMM gets I more states, ``i + I`` being an
"empty" twin of position i that emits with ``t(f|NULL)`` and remembers i for the
next jump:

    p(i + I | i', I) = p(i + I | i' + I, I) = p0 delta(i, i')
    p(i | i', I) = p(i | i' + I, I) = (1 - p0) c(i - i') / sum_{i''} c(i'' - i')

with p0 fixed (0.2 by default). The first word starts at real position i with
``(1 - p0) c0(i) / sum_{i''} c0(i'')`` and at each empty twin with ``p0 / I``.
Both are smoothed as in Och & Ney (2003) by interpolation with the uniform
distribution, ``(1 - alpha) c(i - i') / sum_{i''} c(i'' - i') + alpha / I`` (and
likewise for ``c0``), with ``alpha = smoothing`` (0.2 by default, GIZA++'s
``emAlSmooth``; 0 gives the unsmoothed model).
Jump widths are clipped to ``[-max_jump, max_jump]``, start positions to
``[0, max_jump]``. EM (Baum-Welch, scaled forward-backward): ``c(d)`` becomes
the expected number of jumps of width d into a real word, ``c0(i)`` the expected
number of sentences whose first word is aligned to real position i, and t is
re-estimated from the state posteriors as in Model 1. Training starts from a
given t (Model 1's) and uniform ``c`` and ``c0``.

Note that re-normalising ``c(d)`` per (i', I) is the papers' estimate, not an
exact maximisation over the jump parameters, so unlike Model 1 the likelihood is
not guaranteed to rise in every iteration (it did in every run on real data:
Multi30k, news commentary; tests/test_align.py shows a tiny counterexample).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minismt.align import _kernels
from minismt.align.ibm1 import Callback, check_iterations, check_table
from minismt.align.translation_table import PairIndex, TranslationTable, alignment_from_positions
from minismt.corpus import Alignment
from minismt.errors import InputError

DEFAULT_P0 = 0.2
DEFAULT_MAX_JUMP = 100
DEFAULT_SMOOTHING = 0.2


@dataclass
class HMMModel:
    """A trained HMM: ``t(f|e)``, the jump counts ``jump[d + max_jump] = c(d)`` and the start
    counts ``initial[i] = c0(i)`` (each normalised to sum 1), p0, the smoothing weight, and the
    log-likelihood of the E-step of every iteration."""

    t: TranslationTable
    jump: np.ndarray     # float64[2 * max_jump + 1]
    initial: np.ndarray  # float64[max_jump + 1]
    p0: float
    max_jump: int
    smoothing: float
    log_likelihoods: list[float]

    def transition_matrix(self, length: int) -> np.ndarray:
        """``[2I, 2I]`` state transition probabilities for ``I = length`` (rows sum to 1)."""
        a = np.empty((length, length))
        _kernels.transition_matrix(length, self.jump, self.p0, self.max_jump, self.smoothing, a)
        full = np.zeros((2 * length, 2 * length))
        full[:length, :length] = a
        full[length:, :length] = a
        full[np.arange(2 * length), np.tile(np.arange(length), 2) + length] = self.p0
        return full

    def initial_distribution(self, length: int) -> np.ndarray:
        """``[2I]`` probabilities of the first state for ``I = length`` (sum to 1)."""
        pi = np.empty(2 * length)
        _kernels.initial_distribution(length, self.initial, self.p0, self.max_jump, self.smoothing,
                                      pi)
        return pi


def check_hmm_parameters(p0, max_jump, smoothing) -> tuple[float, int, float]:
    """``0 <= p0 < 1``, an integer ``max_jump >= 1`` and ``0 <= smoothing <= 1``, else InputError."""
    if isinstance(p0, bool) or not isinstance(p0, (int, float, np.floating)) or not 0.0 <= p0 < 1.0:
        raise InputError(f"p0={p0!r}", expected="a probability 0 <= p0 < 1")
    if isinstance(max_jump, bool) or not isinstance(max_jump, (int, np.integer)) or max_jump < 1:
        raise InputError(f"max_jump={max_jump!r}", expected="an integer >= 1")
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float, np.floating)) \
            or not 0.0 <= smoothing <= 1.0:
        raise InputError(f"smoothing={smoothing!r}", expected="a weight 0 <= smoothing <= 1")
    return float(p0), int(max_jump), float(smoothing)


def train_hmm(index: PairIndex, t0: TranslationTable | None = None, iterations: int = 5,
              p0: float = DEFAULT_P0, max_jump: int = DEFAULT_MAX_JUMP,
              smoothing: float = DEFAULT_SMOOTHING, callback: Callback | None = None) -> HMMModel:
    """Run ``iterations`` EM iterations of the HMM on ``index``, from ``t0`` (else uniform t)
    and uniform jump and start counts."""
    iterations = check_iterations("iterations", iterations)
    p0, max_jump, smoothing = check_hmm_parameters(p0, max_jump, smoothing)
    t = index.uniform_table() if t0 is None else check_table(index, t0).copy()
    jump = np.full(2 * max_jump + 1, 1.0 / (2 * max_jump + 1))
    initial = np.full(max_jump + 1, 1.0 / (max_jump + 1))
    t_counts = np.empty_like(t)
    jump_counts = np.empty_like(jump)
    initial_counts = np.empty_like(initial)
    log_likelihoods = []
    for iteration in range(1, iterations + 1):
        loglik = _kernels.hmm_expectation(index.pair_ids, index.block_offsets, index.e_lengths,
                                          index.f_lengths, t, jump, initial, p0, max_jump,
                                          smoothing, t_counts, jump_counts, initial_counts)
        _kernels.normalize_rows(t_counts, index.row_offsets, t)
        if jump_counts.sum() > 0:
            jump = jump_counts / jump_counts.sum()
        if initial_counts.sum() > 0:
            initial = initial_counts / initial_counts.sum()
        log_likelihoods.append(float(loglik))
        if callback is not None:
            callback("hmm", iteration, float(loglik))
    return HMMModel(TranslationTable(index.keys, t, index.n_e, index.n_f), jump, initial, p0,
                    max_jump, smoothing, log_likelihoods)


def viterbi_hmm(index: PairIndex, model: HMMModel) -> Alignment:
    """Most probable HMM state sequence of every pair of ``index`` as (e position, f position)
    links; f words in an empty state get no link."""
    t = check_table(index, model.t)
    positions = np.empty(int(index.f_offsets[-1]), dtype=np.int32)
    _kernels.hmm_viterbi(index.pair_ids, index.block_offsets, index.e_lengths, index.f_lengths, t,
                         model.jump, model.initial, model.p0, model.max_jump, model.smoothing,
                         positions)
    return alignment_from_positions(positions, index.f_offsets)
