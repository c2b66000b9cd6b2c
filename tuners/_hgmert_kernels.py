"""Numba kernel of hypergraph MERT's line search: corpus BLEU swept along the forests' goal envelopes.

The goal envelopes come from the forest core's envelope semiring
(:func:`minismt.hypergraph._envelope_kernels.envelopes`); the sweep over
sentences is n-best MERT's (Kumar et al. 2009, section 3): the goal lines of
each sentence (of all its forests, first forest first) are the rows of one
instance of :func:`tuners._mert_kernels.breakpoints`, and
:func:`tuners._mert_kernels.best_interval` sweeps corpus BLEU.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tuners._mert_kernels import N_STATS, best_interval, breakpoints, interval_point, sentence_orders

__all__ = ["sweeps"]


@njit(cache=True)
def sweeps(seg_offsets, seg_a, seg_m, stats, forest_sentence, n_sentences, smooth, lower, upper, prefer,
           outside, out, gammas):
    """Exact line search of corpus BLEU along every direction from the goal lines of :func:`envelopes`.

    The lines of direction ``j`` are ``seg_offsets[j*F]:seg_offsets[(j+1)*F]``
    (``F = forest_sentence.shape[0]``, forests sorted by their dev sentence
    ``forest_sentence``), with intercepts ``seg_a``, slopes ``seg_m`` and BLEU
    statistics ``stats`` (int32[N, 9]). The lines of all forests of a sentence
    are one instance of n-best MERT's :func:`~tuners._mert_kernels.breakpoints`
    (which takes their upper envelope: the sentence's best derivation over its
    forests, the first forest on ties) and the breakpoints of all sentences are
    swept by :func:`~tuners._mert_kernels.best_interval` between ``lower`` and
    ``upper``, preferring the interval nearest to ``prefer``. Writes
    ``out[j] = [bleu, lo, hi]`` of the best interval and ``gammas[j]``, its
    :func:`~tuners._mert_kernels.interval_point`.
    """
    n_forests = forest_sentence.shape[0]
    n_dir = (seg_offsets.shape[0] - 1) // n_forests
    room = 1
    for j in range(n_dir):
        room = max(room, seg_offsets[(j + 1) * n_forests] - seg_offsets[j * n_forests])
    hull_rows = np.empty(room, np.int64)
    hull_x = np.empty(room)
    hull_b = np.empty(room)
    xs = np.empty(room)
    from_rows = np.empty(room, np.int64)
    to_rows = np.empty(room, np.int64)
    base = np.zeros(N_STATS, np.int64)
    offsets = np.zeros(n_sentences + 1, np.int64)
    result = np.empty(3)
    for j in range(n_dir):
        r0 = seg_offsets[j * n_forests]
        r1 = seg_offsets[(j + 1) * n_forests]
        n = r1 - r0
        offsets[:] = 0
        for f in range(n_forests):
            offsets[forest_sentence[f] + 1] += seg_offsets[j * n_forests + f + 1] - seg_offsets[j * n_forests + f]
        for s in range(n_sentences):
            offsets[s + 1] += offsets[s]
        a = seg_a[r0:r1].copy()
        slopes = np.empty((1, n))
        slopes[0, :] = seg_m[r0:r1]
        rows = stats[r0:r1].copy()
        orders = np.empty((1, n), np.int32)
        sorted_slopes = np.empty((1, n))
        sentence_orders(offsets, slopes, orders, sorted_slopes)
        n_breaks = breakpoints(offsets, a, sorted_slopes[0], orders[0], rows, hull_rows, hull_x, hull_b,
                               xs, from_rows, to_rows, base)
        best_interval(xs, from_rows, to_rows, n_breaks, base, rows, smooth, lower, upper, prefer, result)
        out[j, 0] = result[0]
        out[j, 1] = result[1]
        out[j, 2] = result[2]
        gammas[j] = interval_point(result[1], result[2], outside)
