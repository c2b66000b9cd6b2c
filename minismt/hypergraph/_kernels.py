"""Numba kernels of :mod:`minismt.hypergraph`: array traversals of a topologically sorted forest.

As in cdec (``decoder/inside_outside.h``, ``decoder/viterbi.h``), there is one
bottom-up traversal (:func:`inside`) and one top-down traversal
(:func:`outside`), each run in a semiring chosen by a constant:

- ``VITERBI``: (max, +) over scores ``w . f``, with back-pointers;
- ``LOG``: (log-sum-exp, +), the log of the real (sum, x) semiring, with a
  stable ``logaddexp``.

Nodes without incoming edges (lattice start nodes) get the semiring one (0), as
in cdec. The third semiring, the envelope (upper convex hull) semiring of
hypergraph MERT, is :mod:`minismt.hypergraph._envelope_kernels`. The lazy k-best
search of Huang & Chiang (2005), Algorithm 3, is :func:`lazy_kbest`. Every
derivation, whichever algorithm made it (Viterbi back-pointers, a k-best
derivation, an envelope line), is read out by the one yield walk
(:func:`walk_yield`) and the one edge walk (:func:`walk_edges`); the remaining
kernels sum a derivation's features, cut sub-forests and check a forest's arrays
(:func:`first_fault`, for :class:`~minismt.hypergraph.Hypergraph`). Every kernel takes
edges with any number of tails.

Arrays follow :class:`minismt.hypergraph.Hypergraph`: node ``v``'s incoming
edges are ``in_offsets[v]:in_offsets[v+1]``; the tails of edge ``e`` are
``tails[tail_offsets[e]:tail_offsets[e+1]]``; its target template is
``tmpl[tmpl_offsets[e]:tmpl_offsets[e+1]]`` with a word id ``>= 0`` or
``-(i+1)`` for the yield of tail ``i``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from minismt._primitives import GOLDEN, POLY_BASE, grow, heap_pop, heap_push, logaddexp

VITERBI = 0
LOG = 1

TAIL_NOT_EARLIER, FEATURE_ID_OUTSIDE, FEATURE_NOT_FINITE, TEMPLATE_WORD_OUTSIDE, TEMPLATE_SLOT_OUTSIDE = 1, 2, 3, 4, 5
"""The faults :func:`first_fault` finds, in the order it looks for them."""


@njit(cache=True)
def first_decrease(offsets):
    """The first ``i`` with ``offsets[i + 1] < offsets[i]``, -1 if there is none."""
    for i in range(offsets.shape[0] - 1):
        if offsets[i + 1] < offsets[i]:
            return i
    return -1


@njit(cache=True)
def first_fault(in_offsets, tail_offsets, tails, feat_ids, feat_values, tmpl_offsets, tmpl, n_features, n_words):
    """One pass over a forest's arrays (their offsets already checked): ``(fault, edge, position,
    edge_head, feat_dim)``: the first fault found, in this order -- a tail that is not an earlier
    node than its edge's head, a feature id outside ``[0, n_features)``, a non-finite feature value,
    a template word id ``>= n_words``, a template slot with no tail -- with its edge and its
    position in the array it is in (``fault`` 0 if there is none); each edge's head node; the
    largest feature id + 1."""
    n_nodes = in_offsets.shape[0] - 1
    n_edges = in_offsets[n_nodes]
    edge_head = np.empty(n_edges, dtype=np.int32)
    for v in range(n_nodes):
        for e in range(in_offsets[v], in_offsets[v + 1]):
            edge_head[e] = v
    for e in range(n_edges):
        for q in range(tail_offsets[e], tail_offsets[e + 1]):
            if tails[q] < 0 or tails[q] >= edge_head[e]:
                return TAIL_NOT_EARLIER, e, q, edge_head, 0
    feat_dim = 0
    for q in range(feat_ids.shape[0]):
        if feat_ids[q] < 0 or feat_ids[q] >= n_features:
            return FEATURE_ID_OUTSIDE, -1, q, edge_head, 0
        feat_dim = max(feat_dim, feat_ids[q] + 1)
    for q in range(feat_values.shape[0]):
        if not np.isfinite(feat_values[q]):
            return FEATURE_NOT_FINITE, -1, q, edge_head, 0
    for e in range(n_edges):
        arity = tail_offsets[e + 1] - tail_offsets[e]
        for q in range(tmpl_offsets[e], tmpl_offsets[e + 1]):
            if tmpl[q] >= n_words:
                return TEMPLATE_WORD_OUTSIDE, e, q, edge_head, 0
            if tmpl[q] < 0 and -tmpl[q] - 1 >= arity:
                return TEMPLATE_SLOT_OUTSIDE, e, q, edge_head, 0
    return 0, -1, -1, edge_head, feat_dim

@njit(cache=True)
def edge_scores(feat_offsets, feat_ids, feat_values, w, out):
    """``out[e] = w . f_e``: the sparse dot product of every edge's features with ``w``.

    Returns False when some score is not finite.
    """
    finite = True
    for e in range(out.shape[0]):
        s = 0.0
        for p in range(feat_offsets[e], feat_offsets[e + 1]):
            s += w[feat_ids[p]] * feat_values[p]
        out[e] = s
        if not math.isfinite(s):
            finite = False
    return finite


@njit(cache=True)
def inside(in_offsets, tail_offsets, tails, score, semiring, value, best_edge):
    """Bottom-up traversal: ``value[v] = (+)_{e in in(v)} score[e] + sum_{t in tails(e)} value[t]``.

    ``(+)`` is ``max`` (``VITERBI``; ``best_edge[v]`` gets the first maximising
    edge) or log-sum-exp (``LOG``). A node without incoming edges gets 0 and
    ``best_edge = -1``.
    """
    n = value.shape[0]
    for v in range(n):
        lo = in_offsets[v]
        hi = in_offsets[v + 1]
        best_edge[v] = -1
        if lo == hi:
            value[v] = 0.0
            continue
        acc = -np.inf
        for e in range(lo, hi):
            x = score[e]
            for p in range(tail_offsets[e], tail_offsets[e + 1]):
                x += value[tails[p]]
            if semiring == VITERBI:
                if best_edge[v] == -1 or x > acc:
                    acc = x
                    best_edge[v] = e
            else:
                acc = logaddexp(acc, x)
        value[v] = acc


@njit(cache=True)
def outside(edge_head, tail_offsets, tails, score, inside_value, semiring, value):
    """Top-down traversal: outside scores with the goal (last node) at 0.

    ``value[t] = (+)`` over edges ``e`` and tail positions ``i`` with
    ``tails(e)[i] = t`` of ``value[head(e)] + score[e] + sum_{j != i} inside[tails(e)[j]]``.
    Edges are visited in reverse order, so every head is final before its tails
    receive from it. Nodes that no derivation of the goal uses stay at ``-inf``.
    """
    n = value.shape[0]
    value[:] = -np.inf
    if n == 0:
        return
    value[n - 1] = 0.0
    for e in range(edge_head.shape[0] - 1, -1, -1):
        b = value[edge_head[e]]
        if b == -np.inf:
            continue
        lo = tail_offsets[e]
        hi = tail_offsets[e + 1]
        for p in range(lo, hi):
            x = b + score[e]
            for q in range(lo, hi):
                if q != p:
                    x += inside_value[tails[q]]
            t = tails[p]
            if semiring == VITERBI:
                if x > value[t]:
                    value[t] = x
            else:
                value[t] = logaddexp(value[t], x)


@njit(cache=True)
def edge_marginals(edge_head, tail_offsets, tails, score, inside_value, outside_value, out):
    """``out[e] = outside[head(e)] + score[e] + sum_t inside[t]``.

    With Viterbi inside/outside this is the max-marginal of ``e`` (the score of
    the best derivation using it); with log inside/outside, ``out[e] - log Z`` is
    the log posterior (expected count) of ``e``.
    """
    for e in range(edge_head.shape[0]):
        x = outside_value[edge_head[e]]
        if x != -np.inf:
            x += score[e]
            for p in range(tail_offsets[e], tail_offsets[e + 1]):
                x += inside_value[tails[p]]
        out[e] = x


@njit(cache=True)
def live_parts(in_offsets, edge_head, tail_offsets, tails, keep_edge, node_out, edge_out):
    """The sub-forest that ``keep_edge`` leaves: live, goal-reachable nodes and edges.

    A node is live if it had no incoming edge to begin with (a lattice start
    node) or one kept edge has only live tails; an edge survives if it is kept,
    its tails are live and its head is reachable from the goal through surviving
    edges. Fills the boolean ``node_out`` and ``edge_out``.
    """
    n = node_out.shape[0]
    n_edges = edge_head.shape[0]
    live = np.zeros(n, np.bool_)
    usable = np.zeros(n_edges, np.bool_)
    for v in range(n):
        lo = in_offsets[v]
        hi = in_offsets[v + 1]
        if lo == hi:
            live[v] = True
            continue
        for e in range(lo, hi):
            if not keep_edge[e]:
                continue
            ok = True
            for p in range(tail_offsets[e], tail_offsets[e + 1]):
                if not live[tails[p]]:
                    ok = False
                    break
            if ok:
                usable[e] = True
                live[v] = True
    node_out[:] = False
    edge_out[:] = False
    if n == 0 or not live[n - 1]:
        return
    node_out[n - 1] = True
    for e in range(n_edges - 1, -1, -1):
        if usable[e] and node_out[edge_head[e]]:
            edge_out[e] = True
            for p in range(tail_offsets[e], tail_offsets[e + 1]):
                node_out[tails[p]] = True


# ---- derivations: the one yield walk and the one edge walk ---------------------------
#
# A derivation is read out of *items*: item ``x`` applies edge ``item_edge[x]`` (-1: a start
# node, the empty derivation) and its ``i``-th tail is derived by item
# ``children[child_off[x] + i]``. The Viterbi derivation's items are nodes (``best_edge``,
# ``tails``, :func:`viterbi_child_offsets`), the lazy k-best's are its derivations
# ``<e, j>`` (:func:`lazy_kbest`), the envelope's are the lines of the node envelopes
# (:mod:`minismt.hypergraph._envelope_kernels`). A child is always an item of an earlier
# node, so ``n_nodes + 1`` frames hold any walk.

@njit(cache=True)
def walk_yield(root, item_edge, child_off, children, tmpl_offsets, tmpl, frame_item, frame_pos, out, start,
               write):
    """The number of words of ``root``'s yield, in template order; with ``write`` they go to ``out[start:]``."""
    e = item_edge[root]
    if e < 0:
        return 0
    n = 0
    frame_item[0] = root
    frame_pos[0] = tmpl_offsets[e]
    sp = 1
    while sp > 0:
        x = frame_item[sp - 1]
        e = item_edge[x]
        pos = frame_pos[sp - 1]
        if pos == tmpl_offsets[e + 1]:
            sp -= 1
            continue
        frame_pos[sp - 1] = pos + 1
        word = tmpl[pos]
        if word >= 0:
            if write:
                out[start + n] = word
            n += 1
        else:
            c = children[child_off[x] - word - 1]
            if item_edge[c] >= 0:
                frame_item[sp] = c
                frame_pos[sp] = tmpl_offsets[item_edge[c]]
                sp += 1
    return n


@njit(cache=True)
def walk_edges(root, item_edge, child_off, children, tail_offsets, frame_item, frame_pos, out, start, write):
    """The number of edges of ``root``'s derivation, pre-order with children left to right (as
    :meth:`Hypergraph.yield_of` reads them); with ``write`` they go to ``out[start:]``."""
    if item_edge[root] < 0:
        return 0
    n = 0
    frame_item[0] = root
    frame_pos[0] = -1
    sp = 1
    while sp > 0:
        x = frame_item[sp - 1]
        e = item_edge[x]
        i = frame_pos[sp - 1]
        if i == -1:
            if write:
                out[start + n] = e
            n += 1
        i += 1
        if i == tail_offsets[e + 1] - tail_offsets[e]:
            sp -= 1
            continue
        frame_pos[sp - 1] = i
        c = children[child_off[x] + i]
        if item_edge[c] >= 0:
            frame_item[sp] = c
            frame_pos[sp] = -1
            sp += 1
    return n


@njit(cache=True)
def viterbi_child_offsets(best_edge, tail_offsets):
    """``child_off`` of the Viterbi derivation's items (nodes): node ``v``'s tails start at
    ``tail_offsets[best_edge[v]]`` in ``tails``."""
    out = np.zeros(best_edge.shape[0], np.int64)
    for v in range(best_edge.shape[0]):
        if best_edge[v] >= 0:
            out[v] = tail_offsets[best_edge[v]]
    return out


@njit(cache=True)
def viterbi_tree(best_edge, tail_offsets, tails, tmpl_offsets, tmpl, goal):
    """Yield (word ids) and pre-order edges of the derivation that ``best_edge`` picks at ``goal``."""
    n = best_edge.shape[0]
    child_off = viterbi_child_offsets(best_edge, tail_offsets)
    frame_item = np.empty(n + 1, np.int64)
    frame_pos = np.empty(n + 1, np.int64)
    none = np.empty(0, np.int32)
    words = np.empty(walk_yield(goal, best_edge, child_off, tails, tmpl_offsets, tmpl, frame_item, frame_pos,
                                none, 0, False), np.int32)
    walk_yield(goal, best_edge, child_off, tails, tmpl_offsets, tmpl, frame_item, frame_pos, words, 0, True)
    edges = np.empty(walk_edges(goal, best_edge, child_off, tails, tail_offsets, frame_item, frame_pos,
                                none, 0, False), np.int32)
    walk_edges(goal, best_edge, child_off, tails, tail_offsets, frame_item, frame_pos, edges, 0, True)
    return words, edges


@njit(cache=True)
def feature_sums(edge_offsets, edges, feat_offsets, feat_ids, feat_values, dim):
    """Sum of the edges' features for each derivation, as CSR ``(offsets, ids, values)``.

    Derivation ``i`` uses ``edges[edge_offsets[i]:edge_offsets[i+1]]`` (with
    repetition); ids come out sorted, sums that are exactly zero are left out.
    """
    m = edge_offsets.shape[0] - 1
    acc = np.zeros(dim)
    touched = np.zeros(dim, np.bool_)
    idx = np.empty(16, np.int32)
    out_offsets = np.zeros(m + 1, np.int64)
    out_ids = np.empty(16, np.int32)
    out_values = np.empty(16, np.float64)
    n_out = 0
    for i in range(m):
        n_idx = 0
        for q in range(edge_offsets[i], edge_offsets[i + 1]):
            e = edges[q]
            for p in range(feat_offsets[e], feat_offsets[e + 1]):
                f = feat_ids[p]
                if not touched[f]:
                    touched[f] = True
                    if n_idx == idx.shape[0]:
                        idx = grow(idx, n_idx + 1)
                    idx[n_idx] = f
                    n_idx += 1
                acc[f] += feat_values[p]
        order = np.sort(idx[:n_idx])
        if n_out + n_idx > out_ids.shape[0]:
            out_ids = grow(out_ids, n_out + n_idx)
            out_values = grow(out_values, n_out + n_idx)
        for f in order:
            if acc[f] != 0.0:
                out_ids[n_out] = f
                out_values[n_out] = acc[f]
                n_out += 1
            acc[f] = 0.0
            touched[f] = False
        out_offsets[i + 1] = n_out
    return out_offsets, out_ids[:n_out].copy(), out_values[:n_out].copy()


# ---- lazy k-best (Huang & Chiang 2005, Algorithm 3) ---------------------------------

@njit(cache=True, inline="always")
def _reserve(start, size, cap, pool, used, v):
    """Room for one more item in node ``v``'s segment of ``pool`` (moved to the end when full)."""
    if size[v] < cap[v]:
        return pool, used
    new_cap = max(4, 2 * cap[v])
    pool = grow(pool, used + new_cap)
    for i in range(size[v]):
        pool[used + i] = pool[start[v] + i]
    start[v] = used
    cap[v] = new_cap
    return pool, used + new_cap


@njit(cache=True)
def _grow_store(need, d_edge, d_score, d_rank_off, d_hash, d_pow, d_len):
    """The derivation store's arrays, each with room for ``need`` derivations."""
    return (grow(d_edge, need), grow(d_score, need), grow(d_rank_off, need), grow(d_hash, need),
            grow(d_pow, need), grow(d_len, need))


@njit(cache=True)
def _rank_key(d, d_edge, d_rank_off, ranks, arity):
    h = np.uint64(d_edge[d]) * GOLDEN + np.uint64(1)
    for i in range(arity):
        h = (h ^ np.uint64(ranks[d_rank_off[d] + i])) * GOLDEN
    return h ^ (h >> np.uint64(29))


@njit(cache=True)
def _seen_insert(table, d, d_edge, d_rank_off, ranks, tail_offsets):
    """Insert derivation ``d`` = <e, j> into the open-addressing set; False if <e, j> is there."""
    e = d_edge[d]
    arity = tail_offsets[e + 1] - tail_offsets[e]
    mask = np.uint64(table.shape[0] - 1)
    slot = _rank_key(d, d_edge, d_rank_off, ranks, arity) & mask
    while True:
        other = table[slot]
        if other < 0:
            table[slot] = d
            return True
        if d_edge[other] == e:
            same = True
            for i in range(arity):
                if ranks[d_rank_off[other] + i] != ranks[d_rank_off[d] + i]:
                    same = False
                    break
            if same:
                return False
        slot = (slot + np.uint64(1)) & mask


@njit(cache=True)
def _seen_rehash(table, d_edge, d_rank_off, ranks, tail_offsets):
    new = np.full(2 * table.shape[0], -1, np.int64)
    for slot in range(table.shape[0]):
        if table[slot] >= 0:
            _seen_insert(new, table[slot], d_edge, d_rank_off, ranks, tail_offsets)
    return new


@njit(cache=True, inline="always")
def _set_yield_key(d, d_edge, d_rank_off, d_child, d_hash, d_pow, d_len, tmpl_offsets, tmpl):
    """Polynomial hash, ``base**length`` and length of ``d``'s yield, from its children's."""
    e = d_edge[d]
    h = np.uint64(0)
    pw = np.uint64(1)
    length = 0
    if e >= 0:
        for p in range(tmpl_offsets[e], tmpl_offsets[e + 1]):
            item = tmpl[p]
            if item >= 0:
                h = h * POLY_BASE + np.uint64(item + 1)
                pw = pw * POLY_BASE
                length += 1
            else:
                c = d_child[d_rank_off[d] - item - 1]
                h = h * d_pow[c] + d_hash[c]
                pw = pw * d_pow[c]
                length += d_len[c]
    d_hash[d] = h
    d_pow[d] = pw
    d_len[d] = length


@njit(cache=True)
def lazy_kbest(in_offsets, tail_offsets, tails, tmpl_offsets, tmpl, score, vit, best_edge, k, distinct):
    """The ``k`` best derivations of the goal (last node), by Huang & Chiang (2005), Algorithm 3.

    A derivation is ``<e, j>``: an edge and a 0-based rank ``j_i`` into the
    derivation list ``D(T_i(e))`` of each tail. The 1-best of every node comes
    from the Viterbi pass (``vit``, ``best_edge``), as the algorithm assumes.
    ``LazyKthBest(v, r)`` makes ``D(v)`` hold rank ``r``; it is run with an
    explicit stack (each frame asks only for earlier nodes, so the depth is at
    most the number of nodes). Each step first applies ``LazyNext`` to the last
    derivation popped at ``v`` (pushing ``<e, j + b^i>`` for every tail ``i``
    whose rank ``j_i + 1`` exists, once each, checked in a hash set), after the
    candidate heap ``cand[v]`` was filled on its first use with ``<e, 0>`` of
    every other incoming edge, then pops the best candidate.

    With ``distinct``, each node keeps only derivations whose yield it has not
    kept yet (cdec's unique k-best, ``-r``): yields are compared by a polynomial
    hash and then word by word; a duplicate still gets its successors.

    Returns the ids of the goal's derivations, best first, and the derivation
    store ``(d_edge, d_score, d_len, d_rank_off, d_child)`` that
    :func:`expand_derivations` reads: derivation ``d`` applies edge
    ``d_edge[d]`` and derives its ``i``-th tail by derivation
    ``d_child[d_rank_off[d] + i]`` (the items of :func:`walk_yield`).
    """
    n = in_offsets.shape[0] - 1
    cap = 2 * n + 2 * min(k, 1 << 16) + 16
    d_edge = np.empty(cap, np.int32)
    d_score = np.empty(cap, np.float64)
    d_rank_off = np.empty(cap, np.int64)
    d_hash = np.empty(cap, np.uint64)
    d_pow = np.empty(cap, np.uint64)
    d_len = np.empty(cap, np.int64)
    ranks = np.empty(max(16, tails.shape[0]), np.int32)
    d_child = np.empty(max(16, tails.shape[0]), np.int64)
    n_d = 0
    n_r = 0
    dl_start = np.zeros(n, np.int64)
    dl_size = np.zeros(n, np.int64)
    dl_cap = np.zeros(n, np.int64)
    dl_pool = np.empty(4 * n + 16, np.int64)
    dl_used = 0
    hp_start = np.zeros(n, np.int64)
    hp_size = np.zeros(n, np.int64)
    hp_cap = np.zeros(n, np.int64)
    hp_pool = np.empty(16, np.int64)
    hp_used = 0
    pending = np.full(n, -1, np.int64)
    cand_ready = np.zeros(n, np.bool_)
    exhausted = np.zeros(n, np.bool_)
    seen = np.full(64, -1, np.int64)
    n_seen = 0
    ytab = np.full(64, -1, np.int64)
    ytab_node = np.full(64, -1, np.int64)
    n_ytab = 0
    buf_a = np.empty(16, np.int32)
    buf_b = np.empty(16, np.int32)
    frame_d = np.empty(n + 1, np.int64)
    frame_pos = np.empty(n + 1, np.int64)

    # the 1-best of every node, from the Viterbi back-pointers
    for v in range(n):
        e = best_edge[v]
        arity = 0 if e < 0 else tail_offsets[e + 1] - tail_offsets[e]
        d = n_d
        n_d += 1
        ranks = grow(ranks, n_r + arity)
        d_child = grow(d_child, n_r + arity)
        d_edge[d] = e
        d_score[d] = vit[v]
        d_rank_off[d] = n_r
        for i in range(arity):
            ranks[n_r + i] = 0
            d_child[n_r + i] = dl_pool[dl_start[tails[tail_offsets[e] + i]]]
        n_r += arity
        _set_yield_key(d, d_edge, d_rank_off, d_child, d_hash, d_pow, d_len, tmpl_offsets, tmpl)
        dl_pool, dl_used = _reserve(dl_start, dl_size, dl_cap, dl_pool, dl_used, v)
        dl_pool[dl_start[v]] = d
        dl_size[v] = 1
        pending[v] = d
        if e < 0:
            exhausted[v] = True
        if distinct:
            if 2 * (n_ytab + 1) > ytab.shape[0]:
                ytab, ytab_node = _ytab_rehash(ytab, ytab_node, d_hash)
            _ytab_put(ytab, ytab_node, d, v, d_hash)
            n_ytab += 1

    if n == 0 or k <= 0:
        return np.zeros(0, np.int64), d_edge[:n_d], d_score[:n_d], d_len[:n_d], d_rank_off[:n_d], d_child[:n_r]

    stack_v = np.empty(n + 1, np.int64)
    stack_r = np.empty(n + 1, np.int64)
    stack_v[0] = n - 1
    stack_r[0] = k - 1
    sp = 1
    while sp > 0:
        v = stack_v[sp - 1]
        r = stack_r[sp - 1]
        if dl_size[v] > r or exhausted[v]:
            sp -= 1
            continue
        d = pending[v]
        if d >= 0:
            # LazyNext(cand[v], d): first make sure every tail has its next rank (or has none)
            e = d_edge[d]
            t_lo = tail_offsets[e]
            arity = tail_offsets[e + 1] - t_lo
            blocked = False
            for i in range(arity):
                t = tails[t_lo + i]
                want = ranks[d_rank_off[d] + i] + 1
                if dl_size[t] <= want and not exhausted[t]:
                    stack_v[sp] = t
                    stack_r[sp] = want
                    sp += 1
                    blocked = True
                    break
            if blocked:
                continue
            # the candidates this step adds to cand[v]: on its first use <e2, 0> for every other
            # in-edge e2 of v, then LazyNext's <e, j + b^i> for every tail i whose next rank exists
            n_other = 0
            if not cand_ready[v]:
                cand_ready[v] = True
                n_other = in_offsets[v + 1] - in_offsets[v]
            for q in range(n_other + arity):
                if q < n_other:
                    e_c = in_offsets[v] + q
                    if e_c == e:
                        continue
                    bump = -1
                else:
                    e_c = e
                    bump = q - n_other
                    if ranks[d_rank_off[d] + bump] + 1 >= dl_size[tails[t_lo + bump]]:
                        continue
                c_lo = tail_offsets[e_c]
                a_c = tail_offsets[e_c + 1] - c_lo
                if n_d + 1 > d_edge.shape[0]:
                    d_edge, d_score, d_rank_off, d_hash, d_pow, d_len = _grow_store(
                        n_d + 1, d_edge, d_score, d_rank_off, d_hash, d_pow, d_len)
                ranks = grow(ranks, n_r + a_c)
                d_child = grow(d_child, n_r + a_c)
                c = n_d
                d_edge[c] = e_c
                d_rank_off[c] = n_r
                s = score[e_c]
                for p in range(a_c):
                    rp = 0 if bump < 0 else ranks[d_rank_off[d] + p] + (1 if p == bump else 0)
                    ranks[n_r + p] = rp
                    d_child[n_r + p] = dl_pool[dl_start[tails[c_lo + p]] + rp]
                    s += d_score[d_child[n_r + p]]
                d_score[c] = s
                if 2 * (n_seen + 1) > seen.shape[0]:
                    seen = _seen_rehash(seen, d_edge, d_rank_off, ranks, tail_offsets)
                if _seen_insert(seen, c, d_edge, d_rank_off, ranks, tail_offsets):
                    n_seen += 1
                    n_d += 1
                    n_r += a_c
                    hp_pool, hp_used = _reserve(hp_start, hp_size, hp_cap, hp_pool, hp_used, v)
                    heap_push(hp_pool, hp_start[v], hp_size[v], c, d_score)
                    hp_size[v] += 1
            pending[v] = -1
        if hp_size[v] == 0:
            exhausted[v] = True
            sp -= 1
            continue
        d = heap_pop(hp_pool, hp_start[v], hp_size[v], d_score)
        hp_size[v] -= 1
        pending[v] = d
        _set_yield_key(d, d_edge, d_rank_off, d_child, d_hash, d_pow, d_len, tmpl_offsets, tmpl)
        if distinct:
            if d_len[d] > buf_a.shape[0]:
                buf_a = np.empty(2 * d_len[d], np.int32)
                buf_b = np.empty(2 * d_len[d], np.int32)
            duplicate = False
            mask = np.uint64(ytab.shape[0] - 1)
            slot = (d_hash[d] ^ (np.uint64(v) * GOLDEN)) & mask
            filled = False
            while ytab[slot] >= 0:
                other = ytab[slot]
                if ytab_node[slot] == v and d_hash[other] == d_hash[d] and d_len[other] == d_len[d]:
                    if not filled:
                        walk_yield(d, d_edge, d_rank_off, d_child, tmpl_offsets, tmpl, frame_d, frame_pos, buf_a, 0,
                                   True)
                        filled = True
                    walk_yield(other, d_edge, d_rank_off, d_child, tmpl_offsets, tmpl, frame_d, frame_pos, buf_b, 0,
                               True)
                    same = True
                    for q in range(d_len[d]):
                        if buf_a[q] != buf_b[q]:
                            same = False
                            break
                    if same:
                        duplicate = True
                        break
                slot = (slot + np.uint64(1)) & mask
            if duplicate:
                continue
            if 2 * (n_ytab + 1) > ytab.shape[0]:
                ytab, ytab_node = _ytab_rehash(ytab, ytab_node, d_hash)
            _ytab_put(ytab, ytab_node, d, v, d_hash)
            n_ytab += 1
        dl_pool, dl_used = _reserve(dl_start, dl_size, dl_cap, dl_pool, dl_used, v)
        dl_pool[dl_start[v] + dl_size[v]] = d
        dl_size[v] += 1

    goal = n - 1
    m = min(k, dl_size[goal])
    out = dl_pool[dl_start[goal]:dl_start[goal] + m].copy()
    return out, d_edge[:n_d], d_score[:n_d], d_len[:n_d], d_rank_off[:n_d], d_child[:n_r]


@njit(cache=True)
def _ytab_put(ytab, ytab_node, d, v, d_hash):
    mask = np.uint64(ytab.shape[0] - 1)
    slot = (d_hash[d] ^ (np.uint64(v) * GOLDEN)) & mask
    while ytab[slot] >= 0:
        slot = (slot + np.uint64(1)) & mask
    ytab[slot] = d
    ytab_node[slot] = v


@njit(cache=True)
def _ytab_rehash(ytab, ytab_node, d_hash):
    new = np.full(2 * ytab.shape[0], -1, np.int64)
    new_node = np.full(2 * ytab.shape[0], -1, np.int64)
    for slot in range(ytab.shape[0]):
        if ytab[slot] >= 0:
            _ytab_put(new, new_node, ytab[slot], ytab_node[slot], d_hash)
    return new, new_node


@njit(cache=True)
def expand_derivations(ids, d_edge, d_len, d_rank_off, d_child, tail_offsets, tmpl_offsets, tmpl, n_nodes):
    """Yields (CSR of word ids) and pre-order edges (CSR) of the derivations ``ids`` of :func:`lazy_kbest`."""
    m = ids.shape[0]
    frame_item = np.empty(n_nodes + 1, np.int64)
    frame_pos = np.empty(n_nodes + 1, np.int64)
    none = np.empty(0, np.int32)
    tok_offsets = np.zeros(m + 1, np.int64)
    edge_offsets = np.zeros(m + 1, np.int64)
    for i in range(m):
        tok_offsets[i + 1] = tok_offsets[i] + d_len[ids[i]]
        edge_offsets[i + 1] = edge_offsets[i] + walk_edges(ids[i], d_edge, d_rank_off, d_child, tail_offsets,
                                                           frame_item, frame_pos, none, 0, False)
    tokens = np.empty(tok_offsets[m], np.int32)
    edges = np.empty(edge_offsets[m], np.int32)
    for i in range(m):
        walk_yield(ids[i], d_edge, d_rank_off, d_child, tmpl_offsets, tmpl, frame_item, frame_pos, tokens,
                   tok_offsets[i], True)
        walk_edges(ids[i], d_edge, d_rank_off, d_child, tail_offsets, frame_item, frame_pos, edges,
                   edge_offsets[i], True)
    return tok_offsets, tokens, edge_offsets, edges
