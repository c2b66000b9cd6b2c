"""Numba kernels of MERT's exact line search (Och 2003, Sec. 6; Macherey et al. 2008, Sec. 3).

Along a line ``w + gamma * d`` through weight space every hypothesis ``h`` is a
line in ``gamma``: ``s(gamma) = w.h + gamma * d.h`` (intercept ``a = w.h``,
slope ``b = d.h``). The model-best hypothesis of a sentence is the top line,
so it changes only at the breakpoints of the sentence's *upper envelope*
(Macherey et al. 2008, Algorithm 1, the envelope semiring's
:func:`minismt.hypergraph._envelope_kernels.upper_envelope`): sort the lines by
slope, keep the highest intercept of equal slopes, and sweep them with a stack,
popping every line whose interval becomes empty. Between two consecutive breakpoints of all
sentences together the corpus statistics are constant, so corpus BLEU is a step
function of ``gamma``; merging the breakpoints of all sentences and sweeping
them left to right with the statistics' deltas evaluates it exactly on every
interval (Och 2003, Sec. 6).

Conventions shared with :class:`minismt.kbest.KBest`:

- rows of instance ``i`` are ``offsets[i]:offsets[i+1]``; ``stats`` is the
  ``[N, 9]`` BLEU statistics array;
- ties in the model score go to the first row (``KBest.model_best``): of two
  equal lines the one with the smaller row index is on the envelope;
- corpus BLEU is :func:`minismt.metrics._kernels.bleu_from_sums` itself (imported
  as ``bleu``), so that BLEU at a returned point is exactly the swept value.

Per-instance sort orders are computed once per direction (:func:`sentence_orders`);
coordinate directions keep theirs for a whole MERT run, since their slopes (one
feature column) do not depend on the point.
"""

from __future__ import annotations


import numpy as np
from numba import njit

from minismt.hypergraph._envelope_kernels import upper_envelope
from minismt.kbest._kernels import model_scores
from minismt.metrics._kernels import MAX_ORDER, SMOOTH_EXP, SMOOTH_NONE
from minismt.metrics._kernels import bleu_from_sums as bleu

N_STATS = 2 * MAX_ORDER + 1

__all__ = ["SMOOTH_EXP", "SMOOTH_NONE", "bleu", "best_interval", "breakpoints",
           "coordinate_slopes", "direction_slopes", "envelopes", "line_searches",
           "model_bleu", "model_scores", "sentence_orders"]


@njit(cache=True)
def model_bleu(offsets, scores, stats, smooth):
    """Corpus BLEU of the model-best rows (highest score, first row wins ties) of every instance."""
    acc = np.zeros(N_STATS, dtype=np.int64)
    for i in range(offsets.shape[0] - 1):
        lo, hi = offsets[i], offsets[i + 1]
        if hi == lo:
            continue
        best = lo
        for r in range(lo + 1, hi):
            if scores[r] > scores[best]:
                best = r
        for c in range(N_STATS):
            acc[c] += stats[best, c]
    return bleu(acc, smooth)


@njit(cache=True)
def coordinate_slopes(features, indptr, indices, values, position, out):
    """Slopes along coordinate directions: ``out[position[k], r] = h_r[k]`` where ``position[k] >= 0``.

    A dense feature k gives its column, a sparse one its CSR entries (0 elsewhere).
    """
    n_dense = features.shape[1]
    out[:, :] = 0.0
    for k in range(n_dense):
        j = position[k]
        if j >= 0:
            for r in range(features.shape[0]):
                out[j, r] = features[r, k]
    for r in range(features.shape[0]):
        for e in range(indptr[r], indptr[r + 1]):
            j = position[indices[e]]
            if j >= 0:
                out[j, r] = values[e]


@njit(cache=True)
def direction_slopes(features, indptr, indices, values, directions, out):
    """Slopes along arbitrary directions: ``out[j, r] = directions[j] . h_r``."""
    for j in range(directions.shape[0]):
        model_scores(features, indptr, indices, values, directions[j], out[j])


@njit(cache=True)
def sentence_orders(offsets, slopes, orders, sorted_slopes):
    """Sort each instance's rows by slope, for every direction ``j``.

    ``orders[j, lo:hi]`` (int32) are the rows ``lo:hi`` of an instance in
    ascending order of ``slopes[j]`` and ``sorted_slopes[j, lo:hi]`` their
    slopes in that order, so that the envelope sweep reads both sequentially.
    """
    for j in range(slopes.shape[0]):
        for i in range(offsets.shape[0] - 1):
            lo, hi = offsets[i], offsets[i + 1]
            if hi > lo:
                local = np.argsort(slopes[j, lo:hi])
                for t in range(hi - lo):
                    orders[j, lo + t] = lo + local[t]
                    sorted_slopes[j, lo + t] = slopes[j, lo + local[t]]


@njit(cache=True)
def envelopes(offsets, a, sorted_b, order, hull_rows, hull_x, hull_b, hull_len):
    """The upper envelope of every instance (see :func:`upper_envelope`); ``hull_len[i]`` is its size."""
    for i in range(offsets.shape[0] - 1):
        hull_len[i] = upper_envelope(a, sorted_b, order, offsets[i], offsets[i + 1],
                                     hull_rows, hull_x, hull_b)


@njit(cache=True)
def breakpoints(offsets, a, sorted_b, order, stats, hull_rows, hull_x, hull_b, xs, from_rows,
                to_rows, base):
    """Breakpoints of all instances where the model-best's statistics change.

    ``base`` (int64[9]) receives the statistics summed over the model-best rows
    at ``gamma -> -inf``; breakpoint ``e`` (``e < n``, the return value) is at
    ``xs[e]``, where one instance's model-best changes from ``from_rows[e]``
    to ``to_rows[e]``. Changes between rows with equal statistics are left
    out (they do not change BLEU), and so is a change at ``+inf`` (an
    intersection that overflows), which no finite ``gamma`` reaches.
    """
    base[:] = 0
    n = 0
    for i in range(offsets.shape[0] - 1):
        lo, hi = offsets[i], offsets[i + 1]
        if hi == lo:
            continue
        k = upper_envelope(a, sorted_b, order, lo, hi, hull_rows, hull_x, hull_b)
        prev = hull_rows[lo]
        for c in range(N_STATS):
            base[c] += stats[prev, c]
        for t in range(1, k):
            r = hull_rows[lo + t]
            same = True
            for c in range(N_STATS):
                if stats[r, c] != stats[prev, c]:
                    same = False
                    break
            if not same and hull_x[lo + t] < np.inf:
                xs[n] = hull_x[lo + t]
                from_rows[n] = prev
                to_rows[n] = r
                n += 1
            prev = r
    return n


@njit(cache=True)
def _distance_to(lo, hi, point):
    if lo < point < hi:
        return 0.0
    if hi <= point:
        return point - hi
    return lo - point


@njit(cache=True)
def best_interval(xs, from_rows, to_rows, n, base, stats, smooth, lower, upper, prefer, out):
    """Sweep the breakpoints left to right; ``out = [bleu, lo, hi]`` of the best interval.

    The corpus statistics start at ``base`` (the interval ``(-inf, x_1)``)
    and change by ``stats[to] - stats[from]`` at every breakpoint; all
    changes at the same ``x`` are applied before BLEU is evaluated on the
    interval to the right. Only intervals overlapping ``[lower, upper]`` in
    more than a point count (a breakpoint is a tie), clipped to it; when
    ``lower == upper``, the interval holding that point (the right one at a breakpoint). The best interval has the highest BLEU; of equal ones, the
    nearest to ``prefer`` (then the leftmost): MERT prefers ``gamma = 0``, so
    that a line without a better interval does not move the point.
    """
    order = np.argsort(xs[:n])
    acc = base.copy()
    best = -1.0
    best_lo = best_hi = best_distance = np.inf
    lo = -np.inf
    i = 0
    while True:
        hi = xs[order[i]] if i < n else np.inf
        clipped_lo, clipped_hi = max(lo, lower), min(hi, upper)
        if clipped_lo < clipped_hi or (lower == upper and lo <= lower < hi):
            score = bleu(acc, smooth)
            distance = _distance_to(clipped_lo, clipped_hi, prefer)
            if score > best or (score == best and distance < best_distance):
                best = score
                best_lo = clipped_lo
                best_hi = clipped_hi
                best_distance = distance
        if i >= n:
            break
        lo = xs[order[i]]
        while i < n and xs[order[i]] == lo:
            e = order[i]
            for c in range(N_STATS):
                acc[c] += stats[to_rows[e], c] - stats[from_rows[e], c]
            i += 1
    out[0] = best
    out[1] = best_lo
    out[2] = best_hi


@njit(cache=True)
def interval_point(lo, hi, outside):
    """The point returned for the interval ``(lo, hi)``.

    A bounded interval gives its midpoint; an unbounded one the point
    ``outside`` beyond its finite end (Moses/cmert step out of the last
    breakpoint by a fixed amount as well); the whole line (no breakpoint) 0.
    """
    if lo == -np.inf and hi == np.inf:
        return 0.0
    if lo == -np.inf:
        return hi - outside
    if hi == np.inf:
        return lo + outside
    return 0.5 * lo + 0.5 * hi


@njit(cache=True)
def line_searches(offsets, a, sorted_slopes, orders, stats, smooth, outside, gammas, scores):
    """Exact line search along each direction ``j`` of a round: ``gammas[j]`` and its BLEU ``scores[j]``.

    ``a`` are the model scores at the current point; ``orders[j]`` and
    ``sorted_slopes[j]`` the rows of each instance sorted by their slope
    ``d_j . h`` and those slopes (:func:`sentence_orders`).
    """
    n_rows = a.shape[0]
    hull_rows = np.empty(n_rows, dtype=np.int64)
    hull_x = np.empty(n_rows)
    hull_b = np.empty(n_rows)
    xs = np.empty(n_rows)
    from_rows = np.empty(n_rows, dtype=np.int64)
    to_rows = np.empty(n_rows, dtype=np.int64)
    base = np.zeros(N_STATS, dtype=np.int64)
    out = np.empty(3)
    for j in range(orders.shape[0]):
        n = breakpoints(offsets, a, sorted_slopes[j], orders[j], stats, hull_rows, hull_x, hull_b,
                        xs, from_rows, to_rows, base)
        best_interval(xs, from_rows, to_rows, n, base, stats, smooth, -np.inf, np.inf, 0.0, out)
        scores[j] = out[0]
        gammas[j] = interval_point(out[1], out[2], outside)
