"""The envelope semiring of the forest core: upper envelopes of lines over a forest.

Kumar et al. (2009), "Efficient Minimum Error Rate Training and Minimum
Bayes-Risk Decoding for Translation Hypergraphs and Lattices" (and Macherey et
al. 2008 for lattices), as cdec's ``training/dpmert/mert_geometry.h``: along
the line ``w + x * d`` every edge ``e`` is the line ``a_e + x * b_e``
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
  order, are merged in linear time and swept by :func:`upper_envelope`
  (Macherey et al. 2008, Algorithm 1), the kernel n-best MERT uses too. No
  sort is needed, and the envelope so far stays small (a few lines) while an
  edge's sum may be long.

A node without incoming edges (a start node) is the single line ``0 + 0x``
(one empty derivation). Every line of an envelope keeps a back-pointer: its
edge and, for each tail, the index of the tail's envelope line it sums, so a
line of the goal's envelope *is* one derivation, read out (pre-order edges and
yield) by the forest core's walks (:func:`minismt.hypergraph._kernels.walk_edges`,
:func:`~minismt.hypergraph._kernels.walk_yield`).

Ties follow Viterbi (:func:`minismt.hypergraph._kernels.inside`): of identical
lines at a node the one of the first incoming edge is kept (candidate lines are
numbered in edge order and ``upper_envelope`` keeps the first row of equal
lines), and intercepts are summed in Viterbi's order (edge score, then tails
left to right), so along ``d = 0`` the envelope is the Viterbi derivation bit
for bit. Hypergraph MERT's line search over these envelopes is in
:mod:`tuners._hgmert_kernels`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minismt._primitives import grow
from minismt.hypergraph._kernels import edge_scores, walk_edges, walk_yield

__all__ = ["envelopes", "upper_envelope"]


@njit(cache=True)
def upper_envelope(a, sorted_b, order, lo, hi, hull_rows, hull_x, hull_b):
    """Upper envelope of the lines ``a[r] + gamma * b[r]`` of one instance's rows.

    ``order[lo:hi]`` are the rows sorted by slope and ``sorted_b[lo:hi]``
    their slopes (n-best MERT: :func:`tuners._mert_kernels.sentence_orders`). Macherey et al. (2008),
    Algorithm 1: of each run of equal slopes only the highest line enters (the
    first row on equal intercepts); a line pops the stack top while it meets
    the top at or left of the top's own left breakpoint. Writes the envelope's
    rows at ``hull_rows[lo:lo+k]``, their left breakpoints at
    ``hull_x[lo:lo+k]`` (``hull_x[lo] = -inf``, strictly increasing) and
    slopes at ``hull_b[lo:lo+k]``, and returns ``k``: row ``hull_rows[lo+t]``
    is the model-best on ``(hull_x[lo+t], hull_x[lo+t+1])``.

    Before the sweep, lines that cannot reach the envelope are skipped
    (the Akl-Toussaint heuristic in the dual, where line ``(b, a)`` is a
    point and the envelope the upper convex hull): a point strictly below
    the chords from a lowest-slope line L to a highest-intercept line T and
    from T to a highest-slope line R is below the hull (any L and R of their
    runs will do: a lower end point only lowers the chord). The test is two
    products; it spares most lines the divisions of the sweep. (In floating
    point a line within rounding of a chord may be skipped; the interval it
    would hold on the envelope is then as narrow as that rounding.)
    """
    if hi == lo:
        return 0
    b_left, a_left = sorted_b[lo], a[order[lo]]
    b_right, a_right = sorted_b[hi - 1], a[order[hi - 1]]
    b_top, a_top = b_left, a_left
    for i in range(lo + 1, hi):
        if a[order[i]] > a_top:
            a_top = a[order[i]]
            b_top = sorted_b[i]
    k = 0
    i = lo
    while i < hi:
        r = order[i]
        m = sorted_b[i]
        i += 1
        while i < hi and sorted_b[i] == m:
            other = order[i]
            if a[other] > a[r] or (a[other] == a[r] and other < r):
                r = other
            i += 1
        y = a[r]
        if m <= b_top:
            if b_top > b_left and (y - a_left) * (b_top - b_left) < (a_top - a_left) * (m - b_left):
                continue
        elif b_right > b_top and (y - a_top) * (b_right - b_top) < (a_right - a_top) * (m - b_top):
            continue
        x = -np.inf
        while k > 0:
            x = (a[hull_rows[lo + k - 1]] - y) / (m - hull_b[lo + k - 1])
            if x > hull_x[lo + k - 1]:
                break
            k -= 1
        if k == 0:
            x = -np.inf
        hull_rows[lo + k] = r
        hull_x[lo + k] = x
        hull_b[lo + k] = m
        k += 1
    return k


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
    right, as :meth:`Hypergraph.yield_of` reads them), read out by the forest
    core's walks with the envelope lines as items (line ``s`` applies
    ``pool_edge[s]``, its tails are the lines ``pool_tails[pool_bp[s]:]``).
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
    edges = np.empty(256, np.int32)
    max_nodes = 0
    for f in range(n_forests):
        max_nodes = max(max_nodes, node_bounds[f + 1] - node_bounds[f])
    frame_item = np.empty(max_nodes + 1, np.int64)
    frame_pos = np.empty(max_nodes + 1, np.int64)
    none = np.empty(0, np.int32)
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
                    n_e = walk_edges(g, pool_edge, pool_bp, pool_tails, tail_offsets, frame_item, frame_pos, none, 0,
                                     False)
                    n_w = walk_yield(g, pool_edge, pool_bp, pool_tails, tmpl_offsets, tmpl, frame_item, frame_pos,
                                     none, 0, False)
                    edges = grow(edges, n_edges_out + n_e)
                    words = grow(words, n_words + n_w)
                    walk_edges(g, pool_edge, pool_bp, pool_tails, tail_offsets, frame_item, frame_pos, edges,
                               n_edges_out, True)
                    walk_yield(g, pool_edge, pool_bp, pool_tails, tmpl_offsets, tmpl, frame_item, frame_pos, words,
                               n_words, True)
                    n_edges_out += n_e
                    n_words += n_w
                    n_out += 1
                    word_offsets[n_out] = n_words
                    edge_offsets[n_out] = n_edges_out
            seg_offsets[j * n_forests + f + 1] = n_out
    return (seg_offsets, seg_x[:n_out].copy(), seg_m[:n_out].copy(), seg_a[:n_out].copy(),
            word_offsets[:n_out + 1].copy(), words[:n_words].copy(), edge_offsets[:n_out + 1].copy(),
            edges[:n_edges_out].copy())
