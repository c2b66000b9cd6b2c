"""Numba kernels of the structured SVM tuner: Figure 1's cutting plane and its dual QP.

Every constraint of the n-slack structural SVM (Tsochantaridis et al. 2005,
González-Rubio et al. 2008, Figure 1) is one hypothesis row ``r`` of instance
``i`` and reads, in the common form of the four variants::

    a_r . w >= b_r - xi_i        a_r = c_r (psi_i - f_r),   H_r(w) = b_r - a_r . w

with ``psi_i`` the feature vector of the instance's correct output (forced
decoding of the reference, or the oracle surrogate), ``f_r`` the hypothesis'
features and ``(b_r, c_r)`` chosen by the variant (see :mod:`tuners.structsvm`).
The working set ``S_i`` of instance ``i`` is a list of its rows, kept in
``members[offsets[i]:offsets[i] + count[i]]`` (a row enters at most once, so
the segment of the instance's hypotheses always has room); ``alpha[r]`` is the
dual variable of row ``r`` (0 outside the working set).

The dual over the working set is (``box = C/n``, ``inv = n/C``)::

    L1:  max  sum_r alpha_r b_r - 1/2 |w|^2
         s.t. alpha >= 0,  sum_{r in S_i} alpha_r <= box
    L2:  max  sum_r alpha_r b_r - 1/2 |w|^2 - inv/2 sum_i sigma_i^2
         s.t. alpha >= 0

with ``w = sum_r alpha_r a_r`` and ``sigma_i = sum_{r in S_i} alpha_r``. It is
solved by alternating two phases, warm started from the previous solution:

* a sweep of block coordinate ascent, one instance at a time: for L1, SMO
  steps on the block's most violating pair, the simplex inequality made an
  equality by a dummy variable ``alpha0_i`` with ``a = 0, b = 0`` (Platt 1999;
  Keerthi et al. 2008's sequential dual method for multi-class SVMs); for L2,
  exact steps on the coordinate with the largest projected gradient, whose
  curvature carries the extra diagonal term ``inv``. Each block is solved to
  KKT residual ``tol``; this finds the active face;
* conjugate gradients on that face, which resolve the coupling between
  blocks through ``w`` (all of SMT's constraint vectors point in similar
  directions, and coordinate ascent alone needs thousands of sweeps there).

The solve stops when a whole sweep finds every block's KKT residual at most
``tol`` (so changes nothing). ``w`` is kept up to date with every step and
rebuilt from ``alpha`` at the start of each solve, so rounding does not drift.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minismt.kbest._kernels import row_axpy, row_score


@njit(cache=True)
def direction_sqnorm(i, up, cu, down, cd, features, indptr, indices, values,
                      ref_features, ref_indptr, ref_indices, ref_values, scratch):
    """``|a_up - a_down|^2`` with ``a_r = c_r (psi_i - f_r)``; a row ``-1`` is the dummy (``a = 0``).

    The difference ``(cu - cd) psi_i - cu f_up + cd f_down`` is formed coordinate
    by coordinate (sparse ones through the zeroed ``scratch``), not as
    ``Q_uu + Q_dd - 2 Q_ud``, which would cancel for nearly equal hypotheses.
    """
    cr = cu - cd
    acc = 0.0
    for j in range(features.shape[1]):
        x = cr * ref_features[i, j]
        if up >= 0:
            x -= cu * features[up, j]
        if down >= 0:
            x += cd * features[down, j]
        acc += x * x
    for p in range(ref_indptr[i], ref_indptr[i + 1]):
        scratch[ref_indices[p]] += cr * ref_values[p]
    if up >= 0:
        for p in range(indptr[up], indptr[up + 1]):
            scratch[indices[p]] -= cu * values[p]
    if down >= 0:
        for p in range(indptr[down], indptr[down + 1]):
            scratch[indices[p]] += cd * values[p]
    for p in range(ref_indptr[i], ref_indptr[i + 1]):
        x = scratch[ref_indices[p]]
        acc += x * x
        scratch[ref_indices[p]] = 0.0
    if up >= 0:
        for p in range(indptr[up], indptr[up + 1]):
            x = scratch[indices[p]]
            acc += x * x
            scratch[indices[p]] = 0.0
    if down >= 0:
        for p in range(indptr[down], indptr[down + 1]):
            x = scratch[indices[p]]
            acc += x * x
            scratch[indices[p]] = 0.0
    return acc


@njit(cache=True)
def _row_clear(r, features, indptr, indices, scratch):
    """Zero the entries of ``scratch`` where row ``r`` has features."""
    for j in range(features.shape[1]):
        scratch[j] = 0.0
    for p in range(indptr[r], indptr[r + 1]):
        scratch[indices[p]] = 0.0


@njit(cache=True)
def rebuild_weights(offsets, features, indptr, indices, values, ref_features, ref_indptr,
                    ref_indices, ref_values, c, alpha, members, count, sigma, w):
    """``w = sum_r alpha_r a_r`` and ``sigma_i = sum_{r in S_i} alpha_r`` from scratch.

    Only the entries where some ``a_r`` of the working set has a feature are
    reset, so ``w`` must be 0 elsewhere (it is: every update adds some ``a_r``),
    and the cost does not depend on the size of the feature space.
    """
    for i in range(offsets.shape[0] - 1):
        if count[i] > 0:
            _row_clear(i, ref_features, ref_indptr, ref_indices, w)
        for j in range(count[i]):
            _row_clear(members[offsets[i] + j], features, indptr, indices, w)
    for i in range(offsets.shape[0] - 1):
        lo = offsets[i]
        total = 0.0
        scaled = 0.0
        for j in range(count[i]):
            r = members[lo + j]
            total += alpha[r]
            scaled += alpha[r] * c[r]
            row_axpy(r, -alpha[r] * c[r], features, indptr, indices, values, w)
        row_axpy(i, scaled, ref_features, ref_indptr, ref_indices, ref_values, w)
        sigma[i] = total


@njit(cache=True)
def _solve_block_l1(i, lo, features, indptr, indices, values, ref_features, ref_indptr, ref_indices,
                    ref_values, b, c, alpha, alpha0, members, count, w, scratch, tol, max_steps):
    """SMO on instance ``i``'s block until its KKT residual is at most ``tol``; returns its steps.

    With gradients ``g_r = b_r - a_r . w`` (and ``g = 0`` for the dummy), the
    residual is ``max_r g_r - min_{alpha_r > 0} g_r``; each step moves mass from
    the argmin to the argmax, by the exact maximiser along that direction,
    clipped at the mass available.
    """
    steps = 0
    while steps < max_steps:
        ref_w = row_score(ref_features, ref_indptr, ref_indices, ref_values, w, i)
        up = -1
        g_up = 0.0
        down = -2
        g_down = np.inf
        if alpha0[i] > 0.0:
            down = -1
            g_down = 0.0
        for j in range(count[i]):
            r = members[lo + j]
            g = b[r] - c[r] * (ref_w - row_score(features, indptr, indices, values, w, r))
            if g > g_up:
                up = r
                g_up = g
            if alpha[r] > 0.0 and g < g_down:
                down = r
                g_down = g
        if down == -2 or g_up - g_down <= tol:
            break
        cu = c[up] if up >= 0 else 0.0
        cd = c[down] if down >= 0 else 0.0
        eta = direction_sqnorm(i, up, cu, down, cd, features, indptr, indices, values,
                                ref_features, ref_indptr, ref_indices, ref_values, scratch)
        available = alpha[down] if down >= 0 else alpha0[i]
        t = available
        if eta > 0.0 and (g_up - g_down) / eta < available:
            t = (g_up - g_down) / eta
        if t <= 0.0:
            break
        if up >= 0:
            alpha[up] += t
        else:
            alpha0[i] += t
        if down >= 0:
            alpha[down] = 0.0 if t == available else alpha[down] - t
        else:
            alpha0[i] = 0.0 if t == available else alpha0[i] - t
        row_axpy(i, t * (cu - cd), ref_features, ref_indptr, ref_indices, ref_values, w)
        if up >= 0:
            row_axpy(up, -t * cu, features, indptr, indices, values, w)
        if down >= 0:
            row_axpy(down, t * cd, features, indptr, indices, values, w)
        steps += 1
    return steps


@njit(cache=True)
def _solve_block_l2(i, lo, features, indptr, indices, values, ref_features, ref_indptr, ref_indices,
                    ref_values, b, c, qkk, alpha, sigma, members, count, w, inv, tol, max_steps):
    """Coordinate ascent on instance ``i``'s block (L2 slacks); returns the steps made.

    With ``g_r = b_r - a_r . w - inv * sigma_i``, the residual is the largest
    projected gradient ``|g_r|`` (``alpha_r > 0``) or ``max(g_r, 0)``
    (``alpha_r = 0``); each step solves for that coordinate exactly, with
    curvature ``|a_r|^2 + inv``.
    """
    steps = 0
    while steps < max_steps:
        ref_w = row_score(ref_features, ref_indptr, ref_indices, ref_values, w, i)
        best = -1
        best_g = 0.0
        worst = tol
        for j in range(count[i]):
            r = members[lo + j]
            g = b[r] - c[r] * (ref_w - row_score(features, indptr, indices, values, w, r))
            g -= inv * sigma[i]
            projected = abs(g) if alpha[r] > 0.0 else max(g, 0.0)
            if projected > worst:
                worst = projected
                best = r
                best_g = g
        if best < 0:
            break
        new = alpha[best] + best_g / (qkk[best] + inv)
        if new < 0.0:
            new = 0.0
        t = new - alpha[best]
        if t == 0.0:
            break
        alpha[best] = new
        sigma[i] += t
        cr = c[best] * t
        row_axpy(i, cr, ref_features, ref_indptr, ref_indices, ref_values, w)
        row_axpy(best, -cr, features, indptr, indices, values, w)
        steps += 1
    return steps


@njit(cache=True)
def _row_flush(r, t, features, indptr, indices, scratch, w):
    """``w += t * scratch`` where row ``r`` has features, zeroing ``scratch`` there.

    Applied to every row a vector was scattered from, each entry is added once
    (a second visit finds it zeroed).
    """
    for j in range(features.shape[1]):
        w[j] += t * scratch[j]
        scratch[j] = 0.0
    for p in range(indptr[r], indptr[r + 1]):
        w[indices[p]] += t * scratch[indices[p]]
        scratch[indices[p]] = 0.0


@njit(cache=True)
def _face_cg(offsets, features, indptr, indices, values, ref_features, ref_indptr, ref_indices,
             ref_values, b, c, alpha, alpha0, sigma, members, count, w, scratch, inv, l2, tol, work):
    """Conjugate gradients on the face of the current ``alpha``; True if a bound was hit.

    The face fixes every ``alpha_r = 0`` (and, for L1, the block sums of the
    blocks whose dummy is 0); on it the dual is an unconstrained concave
    quadratic, which conjugate gradients, projected onto the fixed block sums,
    maximise in at most as many steps as the rank of its Hessian (``A A^T``,
    plus ``inv`` times the block indicator for L2), whatever the coupling
    between blocks that slows coordinate ascent down (the face phase of
    Moré & Toraldo 1991's GPCG). A step that would leave the feasible set
    stops at its boundary and ends the phase: the variable that reached its
    bound leaves the face, and the caller starts again on the smaller face.
    """
    n_inst = offsets.shape[0] - 1
    total = 0
    for i in range(n_inst):
        total += count[i]
    free = np.empty(total, dtype=np.int64)
    blocks = np.empty(n_inst, dtype=np.int64)
    start = np.empty(n_inst + 1, dtype=np.int64)
    tight = np.zeros(n_inst, dtype=np.bool_)
    n_free = 0
    n_blocks = 0
    for i in range(n_inst):
        first = n_free
        for j in range(count[i]):
            r = members[offsets[i] + j]
            if alpha[r] > 0.0:
                free[n_free] = r
                n_free += 1
        is_tight = (not l2) and alpha0[i] <= 0.0
        if n_free == first or (is_tight and n_free - first == 1):
            n_free = first
            continue
        blocks[n_blocks] = i
        start[n_blocks] = first
        tight[n_blocks] = is_tight
        n_blocks += 1
    start[n_blocks] = n_free
    if n_free == 0:
        return False
    res = np.empty(n_free)
    direction = np.empty(n_free)
    qp = np.empty(n_free)
    for q in range(n_blocks):
        i = blocks[q]
        ref_w = row_score(ref_features, ref_indptr, ref_indices, ref_values, w, i)
        mean = 0.0
        for k in range(start[q], start[q + 1]):
            r = free[k]
            res[k] = b[r] - c[r] * (ref_w - row_score(features, indptr, indices, values, w, r))
            if l2:
                res[k] -= inv * sigma[i]
            mean += res[k]
        if tight[q]:
            mean /= start[q + 1] - start[q]
            for k in range(start[q], start[q + 1]):
                res[k] -= mean
    rr = 0.0
    for k in range(n_free):
        direction[k] = res[k]
        rr += res[k] * res[k]
    for it in range(2 * n_free + 10):
        largest = 0.0
        for k in range(n_free):
            largest = max(largest, abs(res[k]))
        if largest <= 0.1 * tol:
            break
        work[1] += 1
        for q in range(n_blocks):
            i = blocks[q]
            scaled = 0.0
            for k in range(start[q], start[q + 1]):
                r = free[k]
                scaled += direction[k] * c[r]
                row_axpy(r, -direction[k] * c[r], features, indptr, indices, values, scratch)
            row_axpy(i, scaled, ref_features, ref_indptr, ref_indices, ref_values, scratch)
        curvature = 0.0
        slope = 0.0
        t_max = np.inf
        hit = -1
        for q in range(n_blocks):
            i = blocks[q]
            ref_v = row_score(ref_features, ref_indptr, ref_indices, ref_values, scratch, i)
            block_sum = 0.0
            for k in range(start[q], start[q + 1]):
                block_sum += direction[k]
            for k in range(start[q], start[q + 1]):
                r = free[k]
                qp[k] = c[r] * (ref_v - row_score(features, indptr, indices, values, scratch, r))
                if l2:
                    qp[k] += inv * block_sum
                curvature += direction[k] * qp[k]
                slope += direction[k] * res[k]
                if direction[k] < 0.0 and alpha[r] / -direction[k] < t_max:
                    t_max = alpha[r] / -direction[k]
                    hit = k
            if not l2 and not tight[q] and block_sum > 0.0 and alpha0[i] / block_sum < t_max:
                t_max = alpha0[i] / block_sum
                hit = n_free + q
        t = t_max
        if curvature > 0.0 and slope / curvature < t_max:
            t = slope / curvature
            hit = -1
        if slope <= 0.0 or t == np.inf:
            t = 0.0
            hit = -1
        for q in range(n_blocks):
            i = blocks[q]
            _row_flush(i, t, ref_features, ref_indptr, ref_indices, scratch, w)
            for k in range(start[q], start[q + 1]):
                _row_flush(free[k], t, features, indptr, indices, scratch, w)
        if t == 0.0:
            break
        for q in range(n_blocks):
            i = blocks[q]
            block_sum = 0.0
            for k in range(start[q], start[q + 1]):
                r = free[k]
                alpha[r] = max(alpha[r] + t * direction[k], 0.0)
                block_sum += direction[k]
            if l2:
                sigma[i] += t * block_sum
            elif not tight[q]:
                alpha0[i] = max(alpha0[i] - t * block_sum, 0.0)
        if hit >= n_free:
            alpha0[blocks[hit - n_free]] = 0.0
            return True
        if hit >= 0:
            alpha[free[hit]] = 0.0
            return True
        for q in range(n_blocks):
            mean = 0.0
            for k in range(start[q], start[q + 1]):
                mean += qp[k]
            mean = mean / (start[q + 1] - start[q]) if tight[q] else 0.0
            for k in range(start[q], start[q + 1]):
                res[k] -= t * (qp[k] - mean)
        rr_new = 0.0
        for k in range(n_free):
            rr_new += res[k] * res[k]
        beta = rr_new / rr
        rr = rr_new
        for k in range(n_free):
            direction[k] = res[k] + beta * direction[k]
    return False


@njit(cache=True)
def solve_dual(offsets, features, indptr, indices, values, ref_features, ref_indptr, ref_indices,
               ref_values, b, c, qkk, alpha, alpha0, sigma, members, count, w, scratch, box, l2,
               first, tol, max_sweeps, work):
    """Solve the dual over the working set in place (warm start from ``alpha``).

    Alternates a sweep of block coordinate ascent (every block to residual
    ``tol``; it finds the active face and certifies optimality) with
    conjugate gradients on the face (which resolve the coupling between
    blocks). Sweeps visit the blocks from instance ``first`` (the one whose
    working set just grew) onwards, cyclically. Returns the number of sweeps
    made, the last of which changed nothing, or -1 if ``max_sweeps`` did not
    bring every block's residual to ``tol``; ``work`` accumulates the sweeps
    and conjugate-gradient steps.
    """
    n_inst = offsets.shape[0] - 1
    inv = 1.0 / box
    rebuild_weights(offsets, features, indptr, indices, values, ref_features, ref_indptr,
                    ref_indices, ref_values, c, alpha, members, count, sigma, w)
    max_steps = 0
    total = 0
    for i in range(n_inst):
        max_steps = max(max_steps, 100 * (count[i] + 1))
        total += count[i]
    for sweep in range(max_sweeps):
        work[0] += 1
        steps = 0
        for k in range(n_inst):
            i = (first + k) % n_inst
            if count[i] == 0:
                continue
            if l2:
                steps += _solve_block_l2(i, offsets[i], features, indptr, indices, values,
                                         ref_features, ref_indptr, ref_indices, ref_values, b, c, qkk,
                                         alpha, sigma, members, count, w, inv, tol, max_steps)
            else:
                steps += _solve_block_l1(i, offsets[i], features, indptr, indices, values,
                                         ref_features, ref_indptr, ref_indices, ref_values, b, c,
                                         alpha, alpha0, members, count, w, scratch, tol, max_steps)
        if steps == 0:
            return sweep + 1
        for restart in range(total + 1):
            if not _face_cg(offsets, features, indptr, indices, values, ref_features, ref_indptr,
                            ref_indices, ref_values, b, c, alpha, alpha0, sigma, members, count, w,
                            scratch, inv, l2, tol, work):
                break
    return -1


@njit(cache=True)
def dual_objective(offsets, b, alpha, members, count, sigma, w, box, l2):
    """``sum_r alpha_r b_r - 1/2 |w|^2`` (minus ``inv/2 sum_i sigma_i^2`` for L2)."""
    value = -0.5 * np.dot(w, w)
    for i in range(offsets.shape[0] - 1):
        for j in range(count[i]):
            r = members[offsets[i] + j]
            value += alpha[r] * b[r]
        if l2:
            value -= 0.5 / box * sigma[i] * sigma[i]
    return value


@njit(cache=True)
def cutting_plane(offsets, features, indptr, indices, values, ref_features, ref_indptr, ref_indices,
                  ref_values, b, c, w0, box, l2, epsilon, max_iter, tol, max_sweeps,
                  qkk, alpha, alpha0, sigma, members, count, w, scratch,
                  history_added, history_size, history_dual, history_work):
    """Figure 1 (Tsochantaridis et al. 2005; González-Rubio et al. 2008), n-slack cutting plane.

    Each pass (lines 4-11) visits the instances in order: the most violated
    hypothesis ``argmax_r H_r(w)`` (line 6, first row on ties), the slack
    ``xi_i = max(0, max_{r in S_i} H_r(w))`` (line 7); if ``H > xi_i + epsilon``
    (line 8) the row joins ``S_i`` (line 9) and the dual is solved again
    (line 10). The first pass searches with ``w0``; ``w`` is the dual's
    solution from the first solve on. Passes repeat until one adds nothing
    (line 13) while ``w`` is a dual solution: a first pass with ``w0`` that
    adds nothing is followed by one with the empty working set's ``w = 0``.
    Per pass, ``history_*`` record the constraints added, the working-set
    size, the dual objective at the end, and the work of its dual solves
    (sweeps, conjugate-gradient steps). Returns ``(passes, converged,
    qp_converged)``, the last False if a solve did not converge.
    """
    n_inst = offsets.shape[0] - 1
    w[:] = w0
    at_solution = False
    qp_converged = True
    max_k = 0
    for i in range(n_inst):
        max_k = max(max_k, offsets[i + 1] - offsets[i])
    violation = np.empty(max_k)
    for it in range(max_iter):
        searched_with_solution = at_solution
        added = 0
        for i in range(n_inst):
            lo = offsets[i]
            hi = offsets[i + 1]
            ref_w = row_score(ref_features, ref_indptr, ref_indices, ref_values, w, i)
            best = -1
            best_h = -np.inf
            for r in range(lo, hi):
                h = b[r] - c[r] * (ref_w - row_score(features, indptr, indices, values, w, r))
                violation[r - lo] = h
                if h > best_h:
                    best_h = h
                    best = r
            xi = 0.0
            for j in range(count[i]):
                xi = max(xi, violation[members[lo + j] - lo])
            if best_h > xi + epsilon:
                if not at_solution:
                    w[:] = 0.0
                members[lo + count[i]] = best
                count[i] += 1
                alpha[best] = 0.0
                qkk[best] = direction_sqnorm(i, best, c[best], -1, 0.0, features, indptr, indices,
                                              values, ref_features, ref_indptr, ref_indices,
                                              ref_values, scratch)
                sweeps = solve_dual(offsets, features, indptr, indices, values, ref_features,
                                    ref_indptr, ref_indices, ref_values, b, c, qkk, alpha, alpha0,
                                    sigma, members, count, w, scratch, box, l2, i, tol, max_sweeps,
                                    history_work[it])
                if sweeps < 0:
                    qp_converged = False
                at_solution = True
                added += 1
        history_added[it] = added
        history_size[it] = count.sum()
        if added == 0 and not at_solution:
            w[:] = 0.0
            at_solution = True
        history_dual[it] = dual_objective(offsets, b, alpha, members, count, sigma, w, box, l2)
        if added == 0 and searched_with_solution:
            return it + 1, True, qp_converged
    return max_iter, False, qp_converged
