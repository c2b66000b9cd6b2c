"""Numba kernels of the expectation semirings (:mod:`minismt.hypergraph.expectations`).

A first-order expectation semiring value (Li & Eisner 2009, Table 1) is a pair ``<p, p r>``: a (sum of)
derivation probability mass and the mass-weighted sum of a vector ``r`` over those derivations. Its
operations are

    <p1, s1> (+) <p2, s2> = <p1 + p2, s1 + s2>,      <p1, s1> (x) <p2, s2> = <p1 p2, p1 s2 + p2 s1>.

Here a value is kept as ``(log p, s / p)``: the log mass and the *conditional expectation* of ``r`` under
it. Then (x) adds both parts, and (+) is a log-sum-exp of the masses and the mass-weighted mean of the
expectations, so that no part overflows however long the sentence (a 500-word forest's mass is
``exp(10^4)``) and the vectors are means, never differences of huge numbers. The traversals are those of
:mod:`._kernels` (inside bottom-up, outside top-down with the goal at one, a tail repeated in an edge
counted once per position), over ``R`` values per node instead of one.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from minismt._primitives import logaddexp
from minismt.hypergraph._kernels import LOG, inside


@njit(cache=True)
def _merge(acc_log, acc_vec, x, vec):
    """``(acc_log, acc_vec) (+)= (x, vec)`` in place on ``acc_vec``; returns the new log mass."""
    if x == -np.inf:
        return acc_log
    if acc_log == -np.inf:
        acc_vec[:] = vec
        return x
    if acc_log >= x:
        top = acc_log
        a, b = 1.0, math.exp(x - top)
    else:
        top = x
        a, b = math.exp(acc_log - top), 1.0
    total = a + b
    for i in range(acc_vec.shape[0]):
        acc_vec[i] = (a * acc_vec[i] + b * vec[i]) / total
    return top + math.log(total)


@njit(cache=True)
def first_order_inside(in_offsets, tail_offsets, tails, score, r, log_beta, r_beta):
    """Inside values ``<beta(v), beta_r(v)>`` of every node: ``log_beta[v]`` the log mass of its derivations
    (scores ``score[e]`` summed over a derivation's edges) and ``r_beta[v]`` the expectation of their ``r``
    (``r[e]`` summed over the edges). A start node has ``(0, 0)``: one empty derivation; a node whose
    derivations all score ``-inf`` has ``(-inf, 0)``."""
    n = log_beta.shape[0]
    dim = r.shape[1]
    vec = np.empty(dim)
    for v in range(n):
        lo = in_offsets[v]
        hi = in_offsets[v + 1]
        r_beta[v, :] = 0.0
        if lo == hi:
            log_beta[v] = 0.0
            continue
        acc = -np.inf
        for e in range(lo, hi):
            x = score[e]
            vec[:] = r[e]
            for p in range(tail_offsets[e], tail_offsets[e + 1]):
                t = tails[p]
                x += log_beta[t]
                for i in range(dim):
                    vec[i] += r_beta[t, i]
            acc = _merge(acc, r_beta[v], x, vec)
        log_beta[v] = acc


@njit(cache=True)
def first_order_outside(edge_head, tail_offsets, tails, score, r, log_beta, r_beta, log_alpha, r_alpha):
    """Outside values ``<alpha(v), alpha_r(v)>`` with the goal (last node) at ``(0, 0)``: for each edge ``e`` and
    tail position ``i``, ``alpha(head) (x) <score[e], r[e]> (x) the other tails' inside values`` is added to
    tail ``i``'s value. Edges are visited in reverse, so a head is final before its tails receive from it;
    nodes no goal derivation uses keep ``(-inf, 0)``."""
    n = log_alpha.shape[0]
    dim = r.shape[1]
    log_alpha[:] = -np.inf
    r_alpha[:, :] = 0.0
    if n == 0:
        return
    log_alpha[n - 1] = 0.0
    vec = np.empty(dim)
    for e in range(edge_head.shape[0] - 1, -1, -1):
        h = edge_head[e]
        b = log_alpha[h]
        if b == -np.inf:
            continue
        lo = tail_offsets[e]
        hi = tail_offsets[e + 1]
        for p in range(lo, hi):
            x = b + score[e]
            for i in range(dim):
                vec[i] = r_alpha[h, i] + r[e, i]
            for q in range(lo, hi):
                if q != p:
                    u = tails[q]
                    x += log_beta[u]
                    for i in range(dim):
                        vec[i] += r_beta[u, i]
            t = tails[p]
            log_alpha[t] = _merge(log_alpha[t], r_alpha[t], x, vec)


@njit(cache=True)
def first_order_edges(edge_head, tail_offsets, tails, score, r, log_beta, r_beta, log_alpha, r_alpha, log_mass,
                      r_edge):
    """Edge marginals ``alpha(head) (x) <score[e], r[e]> (x) prod beta(tails)``: ``log_mass[e]`` the log mass of
    the goal derivations through ``e`` (each counted once per use of ``e``) and ``r_edge[e]`` the expectation of
    their ``r``."""
    dim = r.shape[1]
    for e in range(edge_head.shape[0]):
        h = edge_head[e]
        x = log_alpha[h]
        for i in range(dim):
            r_edge[e, i] = r_alpha[h, i] + r[e, i]
        if x != -np.inf:
            x += score[e]
        for p in range(tail_offsets[e], tail_offsets[e + 1]):
            t = tails[p]
            if x != -np.inf:
                x += log_beta[t]
            for i in range(dim):
                r_edge[e, i] += r_beta[t, i]
        log_mass[e] = x


@njit(cache=True)
def sparse_products(posterior, r_edge, feat_offsets, feat_ids, feat_values, out):
    """``out[:, j] += sum_e posterior[e] r_edge[e] f_e[j]``: the expected products ``E[r f^T]`` (a feature on a
    derivation's edges times the derivation's ``r``), from the edge marginals of ``r``, over each edge's
    sparse features only."""
    dim = r_edge.shape[1]
    for e in range(posterior.shape[0]):
        mu = posterior[e]
        if mu == 0.0:
            continue
        for k in range(feat_offsets[e], feat_offsets[e + 1]):
            j = feat_ids[k]
            x = mu * feat_values[k]
            for i in range(dim):
                out[i, j] += x * r_edge[e, i]


@njit(cache=True)
def sparse_expectation(posterior, feat_offsets, feat_ids, feat_values, out):
    """``out[j] += sum_e posterior[e] f_e[j]``: the expected feature vector ``E[f]``."""
    for e in range(posterior.shape[0]):
        mu = posterior[e]
        if mu == 0.0:
            continue
        for k in range(feat_offsets[e], feat_offsets[e + 1]):
            out[feat_ids[k]] += mu * feat_values[k]


@njit(cache=True)
def batch_posteriors(node_off, edge_off, in_offsets, edge_head, tail_offsets, tails, score, values, log_beta,
                     log_alpha, posterior, node_posterior, log_z, expectation, score_expectation):
    """Log inside (the forest core's, over all forests at once: they share no node) and outside over each forest
    ``f`` of a batch (nodes ``node_off[f]:node_off[f+1]``, its goal the last; edges ``edge_off[f]:edge_off[f+1]``;
    global ids), and from them each edge's posterior ``mu_e``, each node's ``nu_v`` (expected uses), ``log Z_f``,
    ``E_f[values]`` and ``E_f[score]`` (``sum_e mu_e x_e``).
    A forest whose derivations all score ``-inf`` has zero posteriors and expectations."""
    dim = values.shape[1]
    inside(in_offsets, tail_offsets, tails, score, LOG, log_beta, np.empty(log_beta.shape[0], dtype=np.int64))
    for f in range(node_off.shape[0] - 1):
        first, goal = node_off[f], node_off[f + 1] - 1
        for v in range(first, goal + 1):
            log_alpha[v] = -np.inf
        log_alpha[goal] = 0.0
        z = log_beta[goal]
        log_z[f] = z
        for i in range(dim):
            expectation[f, i] = 0.0
        score_expectation[f] = 0.0
        for e in range(edge_off[f + 1] - 1, edge_off[f] - 1, -1):
            b = log_alpha[edge_head[e]]
            lo, hi = tail_offsets[e], tail_offsets[e + 1]
            mass = b + score[e]
            for p in range(lo, hi):
                mass += log_beta[tails[p]]
            if b == -np.inf or z == -np.inf or mass == -np.inf:
                posterior[e] = 0.0
                continue
            mu = math.exp(mass - z)
            posterior[e] = mu
            for i in range(dim):
                expectation[f, i] += mu * values[e, i]
            score_expectation[f] += mu * score[e]
            for p in range(lo, hi):
                t = tails[p]
                log_alpha[t] = logaddexp(log_alpha[t], mass - log_beta[t])
        for v in range(first, goal + 1):
            m = log_alpha[v] + log_beta[v] - z
            node_posterior[v] = math.exp(m) if m > -np.inf else 0.0


@njit(cache=True)
def batch_covariance_weights(node_off, edge_off, in_offsets, edge_head, tail_offsets, tails, score, values,
                             coefficients, score_coefficient, posterior, node_posterior, q_beta, q_alpha, out):
    """``out[e] = mu_e (E_e[q] - E[q])`` for the edge-local ``q_e = coefficients . values[e] + score_coefficient
    score[e]``: the derivative of ``E[q]`` in edge ``e``'s score, so that ``sum_e out[e] f_e`` is the covariance
    of ``q`` with the features (the gradient of ``E[q]`` for unit scale; Li & Eisner 2009, sec. 4.1).
    ``E_e[q]`` is the first-order semiring's edge marginal, from the conditional inside and outside
    expectations of ``q`` (``q_beta``, ``q_alpha``) weighted by the posteriors of :func:`batch_posteriors`
    (an edge's share of its head's inside mass is ``mu_e / nu_head``, of a tail's outside mass ``mu_e / nu_tail``):
    no logarithm or exponential, two passes that only multiply and add."""
    dim = values.shape[1]
    for f in range(node_off.shape[0] - 1):
        first, goal = node_off[f], node_off[f + 1] - 1
        for v in range(first, goal + 1):
            q_alpha[v] = 0.0
            nu = node_posterior[v]
            acc = 0.0
            if nu > 0.0:
                for e in range(in_offsets[v], in_offsets[v + 1]):
                    mu = posterior[e]
                    if mu == 0.0:
                        continue
                    x = score_coefficient * score[e]
                    for i in range(dim):
                        x += coefficients[i] * values[e, i]
                    for p in range(tail_offsets[e], tail_offsets[e + 1]):
                        x += q_beta[tails[p]]
                    acc += mu / nu * x
            q_beta[v] = acc
        mean = q_beta[goal]
        for e in range(edge_off[f + 1] - 1, edge_off[f] - 1, -1):
            mu = posterior[e]
            if mu == 0.0:
                out[e] = 0.0
                continue
            lo, hi = tail_offsets[e], tail_offsets[e + 1]
            x = q_alpha[edge_head[e]] + score_coefficient * score[e]
            for i in range(dim):
                x += coefficients[i] * values[e, i]
            for p in range(lo, hi):
                x += q_beta[tails[p]]
            out[e] = mu * (x - mean)
            for p in range(lo, hi):
                t = tails[p]
                q_alpha[t] += mu / node_posterior[t] * (x - q_beta[t])
