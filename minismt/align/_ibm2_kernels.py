"""Numba kernels of the reparameterised IBM Model 2 (Dyer, Chahuneau & Smith 2013, "fast_align").

Notation of the paper (Sec. 2): the generated sentence has ``m`` words, position
``i = 1..m``; the conditioning sentence has ``n`` words, position ``j = 1..n``, and
``j = 0`` is NULL. The alignment prior is

    delta(a_i = j | i, m, n) = p0                                         if j = 0
                             = (1 - p0) exp(lambda h(i, j, m, n)) / Z(i)   if 0 < j <= n
    h(i, j, m, n) = -| i/m - j/n |,   Z(i) = sum_{j'=1..n} exp(lambda h(i, j', m, n))

with ``lambda`` the diagonal tension. Here the arrays are 0-based: f word ``jf`` of
a pair is the paper's ``i = jf + 1`` and e word ``ie`` its ``j = ie + 1``. The
translation table and the per-pair blocks of pair ids are those of
:mod:`minismt.align._kernels` (column ``I`` of a block is ``(NULL, f)``).

Sec. 3 of the paper computes ``Z(i)`` and ``d log Z(i) / d lambda`` in O(1) instead of
O(n): ``h`` rises by ``1/n`` per step up to ``j_floor = floor(i n / m)`` and falls by
``1/n`` per step after it, so ``Z`` is the sum of two geometric series with ratio
``r = exp(-lambda / n)``, and the expectation of ``h`` the sum of two
arithmetico-geometric series. :func:`diagonal_partition` writes both through
``expm1`` (``(1 - r^L) / (1 - r) = expm1(-lambda L / n) / expm1(-lambda / n)``), which
keeps them accurate to rounding also when ``lambda / n`` is small.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def diagonal_feature(i, j, m, n):
    """``h(i, j, m, n) = -|i/m - j/n|`` (1-based positions, Dyer et al. 2013, Sec. 2)."""
    return -abs(i / m - j / n)


@njit(cache=True)
def _inverse_expm1_excess(x):
    """``1 / expm1(x) - 1/x`` for x > 0 without cancellation near 0 (its Taylor series, the
    Bernoulli numbers, below 0.1)."""
    if x < 0.1:
        x2 = x * x
        return -0.5 + x * (1.0 / 12 - x2 * (1.0 / 720 - x2 * (1.0 / 30240 - x2 / 1209600)))
    return 1.0 / math.expm1(x) - 1.0 / x


@njit(cache=True)
def _series(h0, length, n, tension):
    """``(S, E)`` of one monotone run of ``length`` terms ``h_k = h0 - k/n``, k = 0..length-1:
    ``S = sum_k exp(tension h_k)`` and ``E = sum_k h_k exp(tension h_k) / S``.

    ``S = exp(tension h0) (1 - r^L) / (1 - r)`` with ``r = exp(-tension / n)`` (geometric series)
    and ``E = d log S / d tension = h0 + (L/n) / expm1(tension L / n) - (1/n) / expm1(tension / n)``
    (the arithmetico-geometric series divided by S), whose two ``1 / tension`` parts cancel
    exactly; a tension below 1e-250 is the uniform limit (exact in double precision).
    """
    if length <= 0:
        return 0.0, 0.0
    if tension < 1e-250:
        return float(length), h0 - (length - 1) / (2.0 * n)
    step = tension / n
    s = math.exp(tension * h0) * math.expm1(-step * length) / math.expm1(-step)
    e = h0 + (length / n) * _inverse_expm1_excess(step * length) \
        - (1.0 / n) * _inverse_expm1_excess(step)
    return s, e


@njit(cache=True)
def diagonal_partition(i, m, n, tension):
    """``(Z(i), E[h])`` for the f position ``i`` (1-based) of an ``m x n`` pair in O(1):
    ``Z(i) = sum_{j=1..n} exp(tension h(i, j, m, n))`` and ``E[h] = d log Z / d tension``
    (Dyer et al. 2013, Sec. 3), split at ``j_floor = floor(i n / m)``."""
    j_floor = (i * n) // m
    x = i / m
    low_s, low_e = _series(j_floor / n - x, j_floor, n, tension)          # j = j_floor down to 1
    high_s, high_e = _series(x - (j_floor + 1) / n, n - j_floor, n, tension)  # j = j_floor + 1 up to n
    z = low_s + high_s
    return z, (low_s * low_e + high_s * high_e) / z


@njit(cache=True)
def swapped_partition(i, m, n, tension):
    """fast_align's normaliser of its tension gradient's model term (see
    :mod:`minismt.align.ibm2`): the geometric sums of :func:`diagonal_partition` for position i
    of an ``n x m`` pair (the two lengths swapped), with the upper run not stopped at ``m``
    when ``i > n`` (then it is the whole geometric series)."""
    j_floor = (i * m) // n
    x = i / n
    low_s, _ = _series(j_floor / m - x, j_floor, m, tension)
    high = x - (j_floor + 1) / m
    if j_floor <= m:
        high_s, _ = _series(high, m - j_floor, m, tension)
    else:
        high_s = math.exp(tension * high) / -math.expm1(-tension / m)
    return low_s + high_s


@njit(cache=True)
def ibm2_expectation(pair_ids, block_offsets, e_lengths, f_lengths, t, p0, tension, shape_ids,
                     shape_offsets, counts, shape_weights, shift):
    """E-step: fill ``counts`` (zeroed here) with the expected counts of every pair, and
    ``shape_weights`` (zeroed here) with the posterior probability of a non-NULL link summed
    over the f positions of each sentence shape (``shape_weights[shape_offsets[k] + jf]`` for
    the sentences with ``shape_ids[s] = k``, one shape per distinct ``(m, n)``).

    Returns ``(log-likelihood, empirical feature)``: ``sum log sum_j delta(j) t(f_i | e_j)``
    and ``sum_i sum_{j > 0} q(a_i = j) h(i - shift, j, m, n)``, the first term of the tension
    gradient (``shift`` 0; fast_align's has ``shift`` 1).
    """
    counts[:] = 0.0
    shape_weights[:] = 0.0
    max_i = 1
    for s in range(e_lengths.shape[0]):
        max_i = max(max_i, e_lengths[s])
    q = np.empty(max_i + 1)
    h = np.empty(max_i)
    loglik = 0.0
    feature = 0.0
    for s in range(e_lengths.shape[0]):
        n, m = e_lengths[s], f_lengths[s]
        if n == 0 or m == 0:
            continue
        row = block_offsets[s]
        weights_at = shape_offsets[shape_ids[s]]
        for jf in range(m):
            z, _ = diagonal_partition(jf + 1, m, n, tension)
            scale = (1.0 - p0) / z
            q[n] = p0 * t[pair_ids[row + n]]
            total = q[n]
            for ie in range(n):
                h[ie] = diagonal_feature(jf + 1, ie + 1, m, n)
                q[ie] = scale * math.exp(tension * h[ie]) * t[pair_ids[row + ie]]
                total += q[ie]
            loglik += math.log(total)
            inv = 1.0 / total
            linked = 0.0
            for ie in range(n):
                posterior = q[ie] * inv
                counts[pair_ids[row + ie]] += posterior
                if shift:
                    feature += posterior * diagonal_feature(jf + 1 - shift, ie + 1, m, n)
                else:
                    feature += posterior * h[ie]
                linked += posterior
            counts[pair_ids[row + n]] += q[n] * inv
            shape_weights[weights_at + jf] += linked
            row += n + 1
    return loglik, feature


@njit(cache=True)
def model_feature(shape_m, shape_n, shape_offsets, shape_weights, tension, swapped):
    """``sum_k sum_i w[k, i] E_tension[h | i, m_k, n_k]``: the second term of the tension
    gradient, the expected feature under the prior weighted by ``w`` (the posterior non-NULL
    mass). ``swapped``: fast_align's, ``sum_j h exp(tension h)`` divided by
    :func:`swapped_partition` instead of Z."""
    total = 0.0
    for k in range(shape_m.shape[0]):
        m, n = shape_m[k], shape_n[k]
        for jf in range(m):
            w = shape_weights[shape_offsets[k] + jf]
            if w != 0.0:
                z, e = diagonal_partition(jf + 1, m, n, tension)
                if swapped:
                    e *= z / swapped_partition(jf + 1, m, n, tension)
                total += w * e
    return total


@njit(cache=True)
def digamma(x):
    """The digamma function psi(x) for x > 0: the recurrence ``psi(x) = psi(x + 1) - 1/x`` up to
    x >= 10, then the asymptotic series ``ln x - 1/(2x) - sum_k B_2k / (2k x^2k)`` to k = 6
    (truncation error below 1e-15 there)."""
    result = 0.0
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    series = inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (
        1.0 / 240 - inv2 * (1.0 / 132 - inv2 * 691.0 / 32760)))))
    return result + math.log(x) - 0.5 * inv - series


@njit(cache=True)
def normalize_rows_vb(counts, row_offsets, alpha, t):
    """Mean-field M-step with a symmetric Dirichlet(alpha) prior on every row of t (Beal 2003;
    as Dyer et al. 2013 use it): ``t[p] = exp(psi(c[p] + alpha) - psi(sum_row (c + alpha)))``
    over the row's co-occurring pairs. Rows without counts keep their values."""
    for r in range(row_offsets.shape[0] - 1):
        lo, hi = row_offsets[r], row_offsets[r + 1]
        total = 0.0
        for p in range(lo, hi):
            total += counts[p]
        if total > 0.0:
            norm = digamma(total + alpha * (hi - lo))
            for p in range(lo, hi):
                t[p] = math.exp(digamma(counts[p] + alpha) - norm)


@njit(cache=True)
def ibm2_viterbi(pair_ids, block_offsets, e_lengths, f_lengths, t, p0, tension, out):
    """Most probable e position of every f word (-1: NULL) under the prior times t; ties go to
    the lowest position, NULL only when strictly more probable. ``out`` is indexed like the
    flat f ids."""
    pos = 0
    for s in range(e_lengths.shape[0]):
        n, m = e_lengths[s], f_lengths[s]
        if n == 0:
            for jf in range(m):
                out[pos + jf] = -1
            pos += m
            continue
        row = block_offsets[s]
        for jf in range(m):
            z, _ = diagonal_partition(jf + 1, m, n, tension)
            scale = (1.0 - p0) / z
            best = -1.0
            best_i = -1
            for ie in range(n):
                v = scale * math.exp(tension * diagonal_feature(jf + 1, ie + 1, m, n)) \
                    * t[pair_ids[row + ie]]
                if v > best:
                    best = v
                    best_i = ie
            if p0 * t[pair_ids[row + n]] > best:
                best_i = -1
            out[pos + jf] = best_i
            row += n + 1
        pos += m
