"""Numba kernels of RAMPION (:mod:`tuners.rampion`): cost-augmented selection and the subgradient passes.

Array conventions are those of :class:`minismt.kbest.KBest` (``offsets``, dense ``features``, CSR
``indptr``/``indices``/``values`` with global indices). The weights are kept as ``scale * v`` so that the
L2 shrinkage of every step costs one multiplication instead of a pass over the whole feature space: a step
touches only the dense features and the sparse features of its hope and fear. Kernels assume valid
arrays; the checks are in :mod:`tuners.rampion`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minismt.kbest._kernels import row_axpy, row_score

RESCALE_BELOW = 1e-3
"""When ``scale`` falls below this, it is folded into ``v`` (an O(features) pass, rare)."""


@njit(cache=True)
def cost_augmented_best(offsets, features, indptr, indices, values, v, scale, cost, signed_alpha, i):
    """Row of instance ``i`` maximising ``scale * v.h + signed_alpha * cost`` (the first wins ties):
    the hope with ``signed_alpha = -alpha``, the fear with ``+alpha`` (Gimpel & Smith 2012)."""
    best_row = offsets[i]
    best = -np.inf
    for row in range(offsets[i], offsets[i + 1]):
        s = scale * row_score(features, indptr, indices, values, v, row) + signed_alpha * cost[row]
        if s > best:
            best, best_row = s, row
    return best_row


@njit(cache=True)
def hopes(offsets, features, indptr, indices, values, v, scale, cost, alpha, out):
    """``out[i]``: the hope of every instance under the current weights (CCCP's linearised concave part)."""
    for i in range(offsets.shape[0] - 1):
        out[i] = cost_augmented_best(offsets, features, indptr, indices, values, v, scale, cost, -alpha, i)


@njit(cache=True)
def subgradient_pass(offsets, features, indptr, indices, values, v, scale, cost, alpha, goals, eta, shrink):
    """One pass of stochastic subgradient descent over the instances in order (cdec's ``rampion_cccp``
    inner loop): per instance, the fear under the current weights, the weights shrunk by ``shrink`` (the
    L2 term's step, ``1 - eta C / N``) and moved by ``eta (h(hope) - h(fear))``. ``scale`` is a float64[1]
    array updated in place; ``v`` likewise."""
    for i in range(offsets.shape[0] - 1):
        fear = cost_augmented_best(offsets, features, indptr, indices, values, v, scale[0], cost, alpha, i)
        scale[0] *= shrink
        if scale[0] < RESCALE_BELOW:
            for col in range(v.shape[0]):
                v[col] *= scale[0]
            scale[0] = 1.0
        if fear != goals[i]:
            row_axpy(goals[i], eta / scale[0], features, indptr, indices, values, v)
            row_axpy(fear, -eta / scale[0], features, indptr, indices, values, v)


@njit(cache=True)
def ramp_loss(offsets, features, indptr, indices, values, w, cost, alpha):
    """The summed ramp loss ``sum_i [max_h (w.h + alpha cost) - max_h (w.h - alpha cost)]`` (Gimpel & Smith
    2012: the cost-augmented fear's score minus the cost-augmented hope's), >= 0."""
    total = 0.0
    for i in range(offsets.shape[0] - 1):
        hope = cost_augmented_best(offsets, features, indptr, indices, values, w, 1.0, cost, -alpha, i)
        fear = cost_augmented_best(offsets, features, indptr, indices, values, w, 1.0, cost, alpha, i)
        total += (row_score(features, indptr, indices, values, w, fear) + alpha * cost[fear]
                  - row_score(features, indptr, indices, values, w, hope) + alpha * cost[hope])
    return total
