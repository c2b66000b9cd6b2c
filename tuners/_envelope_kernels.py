"""Numba kernels of hypergraph MERT: upper envelopes over forests and the line-search sweep.

Kumar et al. (2009), "Efficient Minimum Error Rate Training and Minimum
Bayes-Risk Decoding for Translation Hypergraphs and Lattices" (and Macherey et
al. 2008 for lattices): along the
line ``w + x * d`` every edge ``e`` is the line ``a_e + x * b_e``
(``a_e = w . f_e``, ``b_e = d . f_e``) and every derivation the sum of its
edges' lines. Bottom-up over the topologically sorted forest, the value of a
node is the *upper envelope* of the lines of its derivations, a convex
piecewise-linear function:

- (x) for an edge: the Minkowski sum of its tails' envelopes plus the edge's
  own line. Each tail's envelope has strictly increasing slopes, so the sum
  is a merge of the tails' breakpoints: one line per run between two
  consecutive breakpoints of any tail, already in slope order;
- (+) at a node: the upper envelope of the lines of all its incoming edges'
  sums (a convex function is the maximum of its lines). The edges are folded
  in one at a time: the envelope so far and the next edge's sum, both in slope
  order, are merged in linear time and swept by the algorithm of Macherey et
  al. (2008), Algorithm 1: :func:`tuners._mert_kernels.upper_envelope`
  itself, the kernel n-best MERT uses. No sort is needed, and the envelope so
  far stays small (a few lines) while an edge's sum may be long.

A node without incoming edges (a start node) is the single line ``0 + 0x``
(one empty derivation). Every line of an envelope keeps a back-pointer: its
edge and, for each tail, the index of the tail's envelope line it sums, so a
line of the goal's envelope *is* one derivation, read out top-down (pre-order
edges and yield) by :func:`envelopes`.

Ties follow Viterbi (``minismt.hypergraph._kernels.inside``): of identical
lines at a node the one of the first incoming edge is kept (candidate lines are
numbered in edge order and ``upper_envelope`` keeps the first row of equal
lines), and intercepts are summed in Viterbi's order (edge score, then tails
left to right), so along ``d = 0`` the envelope is the Viterbi derivation bit
for bit.

The sweep over sentences (:func:`sweeps`) is n-best MERT's: the goal lines
of each sentence (of all its forests, first forest first) are the rows of one
instance of :func:`tuners._mert_kernels.breakpoints`, and
:func:`tuners._mert_kernels.best_interval` sweeps corpus BLEU.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minismt._primitives import grow
from minismt.hypergraph._kernels import edge_scores
from tuners._mert_kernels import N_STATS, best_interval, breakpoints, interval_point, sentence_orders
from tuners._mert_kernels import upper_envelope

__all__ = ["envelopes", "sweeps"]


@njit(cache=True, nogil=True)
def envelopes(in_offsets, tail_offsets, tails, feat_offsets, feat_ids, feat_values, tmpl_offsets, tmpl,
              node_bounds, a, directions):
    """The goal envelope of every forest along every direction, with each line's derivation.

    The arrays are those of :class:`minismt.hypergraph.Hypergraph` for several
    forests laid end to end: forest ``f`` holds nodes
    ``node_bounds[f]:node_bounds[f+1]`` (its goal the last of them), node and
    edge ids are global. ``a`` are the edge scores ``w . f_e`` at the current
    point, ``directions[j]`` the direction vectors (the slopes ``d_j . f_e``
    are computed here).

    Returns ``(seg_offsets, seg_x, seg_slope, seg_intercept, word_offsets,
    words, edge_offsets, edges)``: the goal lines of direction ``j`` and forest
    ``f`` are ``seg_offsets[j*F+f]:seg_offsets[j*F+f+1]``, left to right;
    line ``s`` is on top for ``x`` from ``seg_x[s]`` (``-inf`` for the first)
    to the next line's ``seg_x``, its derivation has the yield
    ``words[word_offsets[s]:word_offsets[s+1]]`` (word ids) and the edges
    ``edges[edge_offsets[s]:edge_offsets[s+1]]`` (pre-order, children left to
    right, as :meth:`Hypergraph.yield_of` reads them).
    """
    n_forests = node_bounds.shape[0] - 1
    n_dir = directions.shape[0]
    n_total = in_offsets.shape[0] - 1
    b = np.empty(a.shape[0])
    node_lo = np.empty(n_total, np.int64)
    node_hi = np.empty(n_total, np.int64)
    # envelope lines of the nodes of the current forest: left breakpoint, slope, intercept,
    # edge (-1 at a start node) and the offset of its tails' line indices in pool_tails
    pool_x = np.empty(1024)
    pool_m = np.empty(1024)
    pool_a = np.empty(1024)
    pool_edge = np.empty(1024, np.int64)
    pool_bp = np.empty(1024, np.int64)
    pool_tails = np.empty(1024, np.int64)
    # candidate lines of one node (the Minkowski sums of its incoming edges)
    cand_m = np.empty(256)
    cand_a = np.empty(256)
    cand_edge = np.empty(256, np.int64)
    cand_bp = np.empty(256, np.int64)
    cand_tails = np.empty(256, np.int64)
    order = np.empty(256, np.int64)
    sorted_m = np.empty(256)
    hull_rows = np.empty(256, np.int64)
    hull_x = np.empty(256)
    hull_b = np.empty(256)
    ptr = np.empty(8, np.int64)
    # outputs
    seg_offsets = np.zeros(n_dir * n_forests + 1, np.int64)
    seg_x = np.empty(64)
    seg_m = np.empty(64)
    seg_a = np.empty(64)
    word_offsets = np.zeros(65, np.int64)
    words = np.empty(256, np.int32)
    edge_offsets = np.zeros(65, np.int64)
    edges = np.empty(256, np.int64)
    stack = np.empty(64, np.int64)
    frame_seg = np.empty(64, np.int64)
    frame_pos = np.empty(64, np.int64)
    n_out = 0
    n_words = 0
    n_edges_out = 0
    for j in range(n_dir):
        edge_scores(feat_offsets, feat_ids, feat_values, directions[j], b)
        for f in range(n_forests):
            v0, v1 = node_bounds[f], node_bounds[f + 1]
            n_pool = 0
            n_pool_tails = 0
            for v in range(v0, v1):
                lo, hi = in_offsets[v], in_offsets[v + 1]
                node_lo[v] = n_pool
                if lo == hi:
                    if n_pool + 1 > pool_x.shape[0]:
                        pool_x = grow(pool_x, n_pool + 1)
                        pool_m = grow(pool_m, n_pool + 1)
                        pool_a = grow(pool_a, n_pool + 1)
                        pool_edge = grow(pool_edge, n_pool + 1)
                        pool_bp = grow(pool_bp, n_pool + 1)
                    pool_x[n_pool] = -np.inf
                    pool_m[n_pool] = 0.0
                    pool_a[n_pool] = 0.0
                    pool_edge[n_pool] = -1
                    pool_bp[n_pool] = n_pool_tails
                    n_pool += 1
                    node_hi[v] = n_pool
                    continue
                # (x) the Minkowski sum of each incoming edge (a slope-sorted run of candidate lines),
                # (+) folded into the node's envelope so far by a linear merge and upper_envelope
                n_cand = 0
                n_cand_tails = 0
                k = 0
                for e in range(lo, hi):
                    t0 = tail_offsets[e]
                    arity = tail_offsets[e + 1] - t0
                    if arity > ptr.shape[0]:
                        ptr = np.empty(2 * arity, np.int64)
                    for i in range(arity):
                        ptr[i] = node_lo[tails[t0 + i]]
                    first = n_cand
                    if arity == 1:
                        # one tail (every edge of a phrase-based lattice): its lines shifted by the edge's
                        # line, in its own order, up to a breakpoint overflowed to +inf (as the loop below)
                        s0 = ptr[0]
                        s1 = node_hi[tails[t0]]
                        if n_cand + (s1 - s0) > cand_m.shape[0]:
                            cand_m = grow(cand_m, n_cand + (s1 - s0))
                            cand_a = grow(cand_a, n_cand + (s1 - s0))
                            cand_edge = grow(cand_edge, n_cand + (s1 - s0))
                            cand_bp = grow(cand_bp, n_cand + (s1 - s0))
                        if n_cand_tails + (s1 - s0) > cand_tails.shape[0]:
                            cand_tails = grow(cand_tails, n_cand_tails + (s1 - s0))
                        for s in range(s0, s1):
                            if s > s0 and pool_x[s] == np.inf:
                                break
                            cand_m[n_cand] = b[e] + pool_m[s]
                            cand_a[n_cand] = a[e] + pool_a[s]
                            cand_edge[n_cand] = e
                            cand_bp[n_cand] = n_cand_tails
                            cand_tails[n_cand_tails] = s
                            n_cand_tails += 1
                            n_cand += 1
                    while arity != 1:
                        m = b[e]
                        y = a[e]
                        for i in range(arity):
                            m += pool_m[ptr[i]]
                            y += pool_a[ptr[i]]
                        if n_cand + 1 > cand_m.shape[0]:
                            cand_m = grow(cand_m, n_cand + 1)
                            cand_a = grow(cand_a, n_cand + 1)
                            cand_edge = grow(cand_edge, n_cand + 1)
                            cand_bp = grow(cand_bp, n_cand + 1)
                        if n_cand_tails + arity > cand_tails.shape[0]:
                            cand_tails = grow(cand_tails, n_cand_tails + arity)
                        cand_m[n_cand] = m
                        cand_a[n_cand] = y
                        cand_edge[n_cand] = e
                        cand_bp[n_cand] = n_cand_tails
                        for i in range(arity):
                            cand_tails[n_cand_tails + i] = ptr[i]
                        n_cand_tails += arity
                        n_cand += 1
                        # the next breakpoint of any tail (+inf: an overflowed one no finite x reaches)
                        nx = np.inf
                        for i in range(arity):
                            s = ptr[i]
                            if s + 1 < node_hi[tails[t0 + i]] and pool_x[s + 1] < nx:
                                nx = pool_x[s + 1]
                        if nx == np.inf:
                            break
                        for i in range(arity):
                            s = ptr[i]
                            if s + 1 < node_hi[tails[t0 + i]] and pool_x[s + 1] == nx:
                                ptr[i] = s + 1
                    # merge the envelope so far (hull_rows[:k], slope order) with the new run;
                    # on equal slopes the earlier line first, so that it wins full ties
                    need = k + n_cand - first
                    if need > order.shape[0]:
                        order = grow(order, need)
                        sorted_m = grow(sorted_m, need)
                    i = 0
                    r = first
                    n_merged = 0
                    while i < k or r < n_cand:
                        if r == n_cand or (i < k and cand_m[hull_rows[i]] <= cand_m[r]):
                            order[n_merged] = hull_rows[i]
                            i += 1
                        else:
                            order[n_merged] = r
                            r += 1
                        sorted_m[n_merged] = cand_m[order[n_merged]]
                        n_merged += 1
                    if n_merged > hull_rows.shape[0]:
                        hull_rows = grow(hull_rows, n_merged)
                        hull_x = grow(hull_x, n_merged)
                        hull_b = grow(hull_b, n_merged)
                    k = upper_envelope(cand_a, sorted_m, order, 0, n_merged, hull_rows, hull_x, hull_b)
                if n_pool + k > pool_x.shape[0]:
                    pool_x = grow(pool_x, n_pool + k)
                    pool_m = grow(pool_m, n_pool + k)
                    pool_a = grow(pool_a, n_pool + k)
                    pool_edge = grow(pool_edge, n_pool + k)
                    pool_bp = grow(pool_bp, n_pool + k)
                for t in range(k):
                    r = hull_rows[t]
                    e = cand_edge[r]
                    arity = tail_offsets[e + 1] - tail_offsets[e]
                    if n_pool_tails + arity > pool_tails.shape[0]:
                        pool_tails = grow(pool_tails, n_pool_tails + arity)
                    pool_x[n_pool] = hull_x[t]
                    pool_m[n_pool] = hull_b[t]
                    pool_a[n_pool] = cand_a[r]
                    pool_edge[n_pool] = e
                    pool_bp[n_pool] = n_pool_tails
                    for i in range(arity):
                        pool_tails[n_pool_tails + i] = cand_tails[cand_bp[r] + i]
                    n_pool_tails += arity
                    n_pool += 1
                node_hi[v] = n_pool
            # read out the goal's lines and their derivations
            if v1 > v0:
                goal = v1 - 1
                for g in range(node_lo[goal], node_hi[goal]):
                    if n_out + 1 > seg_x.shape[0]:
                        seg_x = grow(seg_x, n_out + 1)
                        seg_m = grow(seg_m, n_out + 1)
                        seg_a = grow(seg_a, n_out + 1)
                    if n_out + 2 > word_offsets.shape[0]:
                        word_offsets = grow(word_offsets, n_out + 2)
                        edge_offsets = grow(edge_offsets, n_out + 2)
                    seg_x[n_out] = pool_x[g]
                    seg_m[n_out] = pool_m[g]
                    seg_a[n_out] = pool_a[g]
                    # edges, pre-order
                    stack[0] = g
                    sp = 1
                    while sp > 0:
                        sp -= 1
                        s = stack[sp]
                        e = pool_edge[s]
                        if e < 0:
                            continue
                        if n_edges_out + 1 > edges.shape[0]:
                            edges = grow(edges, n_edges_out + 1)
                        edges[n_edges_out] = e
                        n_edges_out += 1
                        arity = tail_offsets[e + 1] - tail_offsets[e]
                        if sp + arity > stack.shape[0]:
                            stack = grow(stack, sp + arity)
                        for i in range(arity - 1, -1, -1):
                            stack[sp] = pool_tails[pool_bp[s] + i]
                            sp += 1
                    # yield, template order
                    sp = 0
                    if pool_edge[g] >= 0:
                        frame_seg[0] = g
                        frame_pos[0] = tmpl_offsets[pool_edge[g]]
                        sp = 1
                    while sp > 0:
                        s = frame_seg[sp - 1]
                        e = pool_edge[s]
                        pos = frame_pos[sp - 1]
                        if pos == tmpl_offsets[e + 1]:
                            sp -= 1
                            continue
                        frame_pos[sp - 1] = pos + 1
                        item = tmpl[pos]
                        if item >= 0:
                            if n_words + 1 > words.shape[0]:
                                words = grow(words, n_words + 1)
                            words[n_words] = item
                            n_words += 1
                        else:
                            t = pool_tails[pool_bp[s] - item - 1]
                            if pool_edge[t] >= 0:
                                if sp + 1 > frame_seg.shape[0]:
                                    frame_seg = grow(frame_seg, sp + 1)
                                    frame_pos = grow(frame_pos, sp + 1)
                                frame_seg[sp] = t
                                frame_pos[sp] = tmpl_offsets[pool_edge[t]]
                                sp += 1
                    n_out += 1
                    word_offsets[n_out] = n_words
                    edge_offsets[n_out] = n_edges_out
            seg_offsets[j * n_forests + f + 1] = n_out
    return (seg_offsets, seg_x[:n_out].copy(), seg_m[:n_out].copy(), seg_a[:n_out].copy(),
            word_offsets[:n_out + 1].copy(), words[:n_words].copy(), edge_offsets[:n_out + 1].copy(),
            edges[:n_edges_out].copy())


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
