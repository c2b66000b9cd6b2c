"""Numba kernel of online MIRA's cutting-plane update (:mod:`tuners.mira`, ``optimizer="cutting-plane"``; cdec's
``kbest_cut_mira -o 3``).

For one sentence's k-best list, with hope ``o`` fixed (``argmax w.h + B(h)``) and ``d_h = h_o - h``, the MIRA step is
the quadratic programme (Crammer et al. 2006, PA-I with many constraints; Chiang 2012, sec. 3)

    max_alpha  sum_h alpha_h l_h - 1/2 |sum_h alpha_h d_h|^2,   alpha >= 0, sum_h alpha_h <= C,
    l_h = B(o) - B(h) - w.d_h,   w' = w + sum_h alpha_h d_h,

over a working set of constraints grown by the cutting plane: the most violated ``h`` under the current ``w'``
(``argmax_h B(o) - B(h) - w'.d_h``: the fear, re-found) joins while it violates more than the set's worst by
``VIOLATION_EPSILON``, at most ``max_constraints`` times, and after each the set's programme is solved by SMO
over pairs of constraints (cdec's). The hope itself stands for the slack (``d = 0``, ``l = 0``; its alpha is
``C`` minus the others'), so moving ``delta`` from ``j`` to ``i`` changes ``w'`` by ``delta (h_j - h_i)`` and
the objective by ``delta (g_i - g_j) - delta^2 |h_j - h_i|^2 / 2``, ``g`` the violations under ``w'``. With one
constraint this is PA-I's ``min(C, l / |d|^2)``, batch MIRA's step.

The arrays are those of :mod:`tuners._kbmira_kernels` (the lazily averaged weights included).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minismt.kbest._kernels import row_score
from tuners._kbmira_kernels import N_STATS, _add_update, background_bleu, hope_fear

MAX_SMO_SWEEPS = 10
"""The most SMO sweeps over the working set's pairs per cut (cdec's ``MAX_SMO``)."""
VIOLATION_EPSILON = 1e-4
"""How much more than the working set's worst a new constraint must be violated to join (cdec's
``SMO_EPSILON``)."""


@njit(cache=True)
def _add_row(features, indptr, indices, values, row, scale, w, change, seen, touched, n_touched):
    """``w += scale h_row`` and the same into ``change``, the row's sparse indices recorded in ``touched``."""
    for k in range(features.shape[1]):
        w[k] += scale * features[row, k]
        change[k] += scale * features[row, k]
    for p in range(indptr[row], indptr[row + 1]):
        index = indices[p]
        w[index] += scale * values[p]
        change[index] += scale * values[p]
        if seen[index] == 0:
            seen[index] = 1
            touched[n_touched] = index
            n_touched += 1
    return n_touched


@njit(cache=True)
def _distance(features, indptr, indices, values, a, b, buffer, seen, touched):
    """``|h_a - h_b|^2`` (``buffer`` and ``seen`` come back zeroed)."""
    total = 0.0
    for k in range(features.shape[1]):
        d = features[a, k] - features[b, k]
        total += d * d
    n = 0
    for row, sign in ((a, 1.0), (b, -1.0)):
        for p in range(indptr[row], indptr[row + 1]):
            index = indices[p]
            buffer[index] += sign * values[p]
            if seen[index] == 0:
                seen[index] = 1
                touched[n] = index
                n += 1
    for t in range(n):
        index = touched[t]
        total += buffer[index] * buffer[index]
        buffer[index] = 0.0
        seen[index] = 0
    return total


@njit(cache=True)
def _violation(features, indptr, indices, values, stats, w, bg, hope, hope_bleu, hope_score, row):
    """``l_row`` under ``w``: ``B(o) - B(row) - w.(h_o - h_row)``."""
    return hope_bleu - background_bleu(stats, row, bg) - hope_score + row_score(features, indptr, indices, values, w,
                                                                                 row)


@njit(cache=True)
def cutting_plane_epoch(order, offsets, features, indptr, indices, values, stats, w, totals, last, counter, bg, C,
                        decay, model_bg, max_constraints, change, seen, touched, buffer, seen2, touched2):
    """One pass of cutting-plane MIRA over the instances in ``order`` (module docstring), each sentence's step one
    update of the averaged weights; then the background decays by ``decay`` and takes the hope's statistics
    (``model_bg``: the model-best's), as :func:`tuners._kbmira_kernels.mira_epoch` (which also skips a sentence
    whose hope is its fear or no better). ``change``, ``buffer``
    (float64), ``seen``, ``seen2`` (int8) are zero arrays over the feature space and ``touched``, ``touched2``
    int64 arrays of its length; they come back zeroed. Returns ``(updates, constraints added, summed first
    violation of the updated sentences)``."""
    n_dense = features.shape[1]
    updates = 0
    added = 0
    total_loss = 0.0
    rows = np.empty(max_constraints + 1, dtype=np.int64)
    alpha = np.zeros(max_constraints + 1)
    violation = np.zeros(max_constraints + 1)
    for position in range(order.shape[0]):
        instance = order[position]
        lo, hi = offsets[instance], offsets[instance + 1]
        if hi <= lo:
            continue
        hope, fear, model, hope_bleu, fear_bleu = hope_fear(lo, hi, features, indptr, indices, values, stats, w, bg)
        if hope == fear or not hope_bleu > fear_bleu:
            continue  # as batch MIRA's kernel: no step, the background kept
        rows[0] = hope
        alpha[0] = C
        m = 1
        n_touched = 0
        first = 0.0
        for cut in range(max_constraints):
            hope_score = row_score(features, indptr, indices, values, w, hope)
            worst = 0.0  # the hope's own violation
            for k in range(1, m):
                worst = max(worst, _violation(features, indptr, indices, values, stats, w, bg, hope, hope_bleu,
                                              hope_score, rows[k]))
            best, best_violation = -1, 0.0
            for row in range(lo, hi):
                g = _violation(features, indptr, indices, values, stats, w, bg, hope, hope_bleu, hope_score, row)
                if best < 0 or g > best_violation:
                    best, best_violation = row, g
            if not best_violation > worst + VIOLATION_EPSILON:
                break
            if cut == 0:
                first = best_violation
            rows[m] = best
            alpha[m] = 0.0
            m += 1
            added += 1
            for _sweep in range(MAX_SMO_SWEEPS):
                moved = False
                hope_score = row_score(features, indptr, indices, values, w, hope)
                for k in range(m):
                    violation[k] = _violation(features, indptr, indices, values, stats, w, bg, hope, hope_bleu,
                                              hope_score, rows[k])
                for i in range(m):
                    for j in range(i + 1, m):
                        if alpha[i] == 0.0 and alpha[j] == 0.0:
                            continue
                        distance = _distance(features, indptr, indices, values, rows[i], rows[j], buffer, seen2,
                                             touched2)
                        gap = violation[i] - violation[j]
                        if distance > 0.0:
                            delta = gap / distance
                        else:
                            delta = np.inf if gap > 0.0 else -np.inf if gap < 0.0 else 0.0
                        delta = min(max(delta, -alpha[i]), alpha[j])
                        if abs(delta) <= 1e-15:
                            continue
                        alpha[i] += delta
                        alpha[j] -= delta
                        n_touched = _add_row(features, indptr, indices, values, rows[j], delta, w, change, seen,
                                             touched, n_touched)
                        n_touched = _add_row(features, indptr, indices, values, rows[i], -delta, w, change, seen,
                                             touched, n_touched)
                        moved = True
                        hope_score = row_score(features, indptr, indices, values, w, hope)
                        for k in range(m):
                            violation[k] = _violation(features, indptr, indices, values, stats, w, bg, hope,
                                                      hope_bleu, hope_score, rows[k])
                if not moved:
                    break
        if alpha[0] < C:
            counter[0] += 1
            n = counter[0]
            for k in range(n_dense):
                step = change[k]
                w[k] -= step
                _add_update(w, totals, last, n, k, step)
            for t in range(n_touched):
                index = touched[t]
                if index >= n_dense:
                    step = change[index]
                    w[index] -= step
                    _add_update(w, totals, last, n, index, step)
            updates += 1
            total_loss += first
        for k in range(n_dense):
            change[k] = 0.0
        for t in range(n_touched):
            change[touched[t]] = 0.0
            seen[touched[t]] = 0
        source = model if model_bg else hope
        for k in range(N_STATS):
            bg[k] = bg[k] * decay + stats[source, k]
    return updates, added, total_loss
