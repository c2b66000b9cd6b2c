"""Numba kernels of online rank optimisation (:mod:`tuners.oro`).

The per-mini-batch dual problem of optimized ORO (Watanabe 2012, "Optimized
Online Rank Learning for Machine Translation", the passive-aggressive step):

    max_tau  sum_p tau_p a_p - 1/2 || sum_p tau_p g_p ||^2,   0 <= tau_p <= eta,

whose primal is ``min_w 1/2 ||w - w'||^2 + eta sum_p xi_p`` subject to
``xi_p >= a_p - g_p . (w' - w)``, ``xi_p >= 0``; the solution is
``w = w' - sum_p tau_p g_p``. For the hinge loss, ``p`` is an (oracle,
non-oracle) pair with ``a_p = 1 - w'. Phi_p`` and ``g_p = -Phi_p``.

The dual's Hessian ``G G^T`` has rank at most the number of features, far
below the number of pairs, and pairs often share a feature difference: the
dual is flat along many directions. Coordinate ascent alone crawls along
them (thousands of sweeps on real n-best lists), so the solver alternates
its sweeps with exact steps on the free coordinates (Newton's step where the
reduced Hessian is regular, a move to the box's edge along its null space).
"""

from __future__ import annotations

import numpy as np
from numba import njit

EIGENVALUE_CUTOFF = 1e-12
"""Eigenvalues of the free coordinates' Hessian below this fraction of the largest count as zero."""
BOUND_SNAP = 1e-14
"""A free step that takes a coordinate within this fraction of ``eta`` of a bound puts it on the bound."""


@njit(cache=True)
def _sweep(g, a, eta, norms, tau, u):
    """One pass of exact bounded coordinate steps; returns the largest projected gradient seen."""
    n, d = g.shape
    worst = 0.0
    for p in range(n):
        gradient = a[p]
        for c in range(d):
            gradient -= g[p, c] * u[c]
        # projected gradient: how far tau_p is from optimal given the bounds
        if tau[p] <= 0.0:
            violation = max(gradient, 0.0)
        elif tau[p] >= eta:
            violation = max(-gradient, 0.0)
        else:
            violation = abs(gradient)
        if violation > worst:
            worst = violation
        if violation == 0.0 or norms[p] == 0.0:
            continue
        new = min(max(tau[p] + gradient / norms[p], 0.0), eta)
        step = new - tau[p]
        if step != 0.0:
            tau[p] = new
            for c in range(d):
                u[c] += step * g[p, c]
    return worst


@njit(cache=True)
def _recompute(g, tau, u):
    """``u = sum_p tau_p g_p`` afresh, dropping the rounding that incremental updates gather."""
    n, d = g.shape
    for c in range(d):
        u[c] = 0.0
    for p in range(n):
        if tau[p] != 0.0:
            for c in range(d):
                u[c] += tau[p] * g[p, c]


@njit(cache=True)
def _free_step(g, a, eta, tau, u, free):
    """One exact step on the free coordinates ``free`` (all strictly inside the box).

    With the thin SVD ``G_F = U S V^T`` (so ``Q = G_F G_F^T`` has eigenvectors ``u_i``,
    eigenvalues ``s_i^2``) and the gradient ``r = a_F - G_F u``, two ascent directions:
    Newton's ``sum_{s_i > 0} (u_i . r / s_i^2) u_i`` and the part of the gradient in
    ``Q``'s null space, along which the dual rises linearly. Each is tried as the exact
    line-search step cut where the first coordinate meets its bound, and as the step
    to the line optimum with every coordinate clipped to the box; the one that gains
    most is taken. Returns ``True`` when a coordinate reached its bound (the free set
    shrank), ``False`` otherwise.
    """
    k = free.shape[0]
    d = g.shape[1]
    gf = np.empty((k, d))
    r = np.empty(k)
    for i in range(k):
        p = free[i]
        total = a[p]
        for c in range(d):
            gf[i, c] = g[p, c]
            total -= g[p, c] * u[c]
        r[i] = total
    # G_F = U S V^T: the eigenvectors of Q with eigenvalue s^2 > 0 are U's columns
    left, singular, _ = np.linalg.svd(gf, full_matrices=False)
    rank = 0
    while rank < singular.shape[0] and singular[rank] ** 2 > EIGENVALUE_CUTOFF * singular[0] ** 2:
        rank += 1
    basis = np.ascontiguousarray(left[:, :rank])
    coefficients = basis.T @ r
    newton = basis @ (coefficients / singular[:rank] ** 2)
    null = r - basis @ coefficients
    best_gain = 0.0
    best_new = np.empty(k)
    best_step = np.zeros(k)
    new_tau = np.empty(k)
    step = np.empty(k)
    for which in range(2):
        direction = newton if which == 0 else null
        slope = r @ direction
        if not slope > 0.0:
            continue
        moved = gf.T @ direction
        curvature = moved @ moved
        unbounded = np.inf if curvature <= 0.0 else slope / curvature
        cut = unbounded
        for i in range(k):
            if direction[i] > 0.0:
                cut = min(cut, (eta - tau[free[i]]) / direction[i])
            elif direction[i] < 0.0:
                cut = min(cut, -tau[free[i]] / direction[i])
        for alpha in (cut, unbounded if unbounded > cut else np.inf):
            if not np.isfinite(alpha):
                continue
            for i in range(k):
                new = tau[free[i]] + alpha * direction[i]
                # a coordinate within rounding of a bound is on it (the cut's blocking one)
                if new <= BOUND_SNAP * eta:  # also clips the projected step
                    new = 0.0
                elif new >= (1.0 - BOUND_SNAP) * eta:
                    new = eta
                new_tau[i] = new
                step[i] = new - tau[free[i]]
            change = gf.T @ step
            gain = r @ step - 0.5 * (change @ change)
            if gain > best_gain:
                best_gain = gain
                best_new[:] = new_tau
                best_step[:] = step
    if best_gain <= 0.0:
        return False
    bounded = False
    for i in range(k):
        tau[free[i]] = best_new[i]     # exactly 0 or eta on a bound (tau + (eta - tau) need not be eta)
        bounded |= best_new[i] == 0.0 or best_new[i] == eta
    u += gf.T @ best_step
    return bounded


@njit(cache=True)
def dual_coordinate_ascent(g, a, eta, tol, max_sweeps, tau, u):
    """Maximise the dual over ``tau`` (in place); ``u = sum_p tau_p g_p`` (in place).

    Sweeps of exact bounded coordinate steps, each sweep followed, once the
    sweeps' work since the last such phase has paid for it, by exact steps on
    the coordinates strictly inside the box (:func:`_free_step`) until one
    takes no coordinate to its bound. Stops when a sweep finds no coordinate's
    projected gradient above ``tol`` (the KKT conditions hold to ``tol``).
    Every step raises the dual. Returns the number of sweeps.
    """
    n, d = g.shape
    norms = np.empty(n)
    for p in range(n):
        total = 0.0
        for c in range(d):
            total += g[p, c] * g[p, c]
        norms[p] = total
    _recompute(g, tau, u)
    sweeps = 0
    work = 0.0
    while sweeps < max_sweeps:
        sweeps += 1
        if _sweep(g, a, eta, norms, tau, u) <= tol:
            break
        work += n * d
        free = np.flatnonzero((tau > 0.0) & (tau < eta))
        if free.shape[0] < 2 or work < free.shape[0] * d * min(free.shape[0], d):
            continue
        work = 0.0
        while free.shape[0] >= 2 and _free_step(g, a, eta, tau, u, free):
            free = np.flatnonzero((tau > 0.0) & (tau < eta))
        _recompute(g, tau, u)
    return sweeps
