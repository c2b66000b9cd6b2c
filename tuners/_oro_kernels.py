"""Numba kernels of online rank optimisation (:mod:`tuners.oro`).

The per-mini-batch dual problem of optimized ORO (Watanabe 2012, "Optimized
Online Rank Learning for Machine Translation", the passive-aggressive step):

    max_tau  sum_p tau_p a_p - 1/2 || sum_p tau_p g_p ||^2,   0 <= tau_p <= eta,

whose primal is ``min_w 1/2 ||w - w'||^2 + eta sum_p xi_p`` subject to
``xi_p >= a_p - g_p . (w' - w)``, ``xi_p >= 0``; the solution is
``w = w' - sum_p tau_p g_p``. For the hinge loss, ``p`` is an (oracle,
non-oracle) pair with ``a_p = 1 - w'. Phi_p`` and ``g_p = -Phi_p``.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def dual_coordinate_ascent(g, a, eta, tol, max_sweeps, tau, u):
    """Exact bounded coordinate ascent on ``tau`` (in place); ``u = sum_p tau_p g_p`` (in place).

    Each step maximises the dual exactly along one coordinate and clips it to
    ``[0, eta]``; sweeps stop when no coordinate's projected gradient exceeds
    ``tol`` (the KKT conditions hold to ``tol``). Returns the number of sweeps.
    """
    n, d = g.shape
    norms = np.empty(n)
    for p in range(n):
        total = 0.0
        for c in range(d):
            total += g[p, c] * g[p, c]
        norms[p] = total
    for c in range(d):
        u[c] = 0.0
    for p in range(n):
        if tau[p] != 0.0:
            for c in range(d):
                u[c] += tau[p] * g[p, c]
    sweeps = 0
    while sweeps < max_sweeps:
        sweeps += 1
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
        if worst <= tol:
            break
    return sweeps
