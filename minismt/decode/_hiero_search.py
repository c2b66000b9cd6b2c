"""The numba search of the Hiero chart decoder: CKY+ with cube pruning (Chiang 2007, section 5)
and the n-gram LM integrated through :mod:`minismt.decode._chart_lm`.

:mod:`minismt.decode._hiero_chart` lists a sentence's *cells* in the order they are filled
(every cell after the cells its items are built from) and its *applications*: a cell, up to two
child cells (the items of its non-terminals) and a block of rules (best first).  Rule-table
applications, unknown-word copy rules and Moses' glue rules (``S -> <s>``, ``S -> S X``,
``S -> S </s>``) are all applications; the goal is the last cell.

In a cell, cube pruning pops candidates best first: a candidate is an application with one rule
of its block and one item of each child cell (both lists best first, so the candidate grid is a
cube whose neighbours are one step further along one axis); its score is exact: the rule's
score, the children's and the LM score the application adds.  Up to ``pop_limit`` candidates are
popped per cell; a popped candidate whose LM state is already an item of the cell is recombined
into it.  Every popped candidate is an edge of the forest (0, 1 or 2 tails), so the forest's
Viterbi derivation is the decoder's 1-best with its score.

Features: the rules' dense non-LM features (``rule_feats``) and the LM (ln 10 x the log10
probability an application adds) in the last column of ``edge_feats``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from minismt._primitives import (GOLDEN, MIX1, MIX2, grow, grow_rows, heap_pop, heap_push, mix64, njit_borrowing,
                                power_of_two)
from minismt.decode._chart_lm import STATE, apply_rule, new_states, room, row_hash, row_width, same_row

LN10 = math.log(10.0)


@njit(cache=True)
def search(t, weights_lm, n_cells, cell_order, app_cell, app_child, app_rules_lo, app_rules_hi, rule_tgt,
           rule_tgt_off, rule_static, pop_limit):
    """Fill the cells ``cell_order`` (ids < ``n_cells``) from the applications (sorted by the
    position of their cell in ``cell_order``).  Application ``a`` builds cell ``app_cell[a]`` from
    the items of ``app_child[a]`` (two cell ids, -1 absent) with the rules ``app_rules_lo[a]`` to
    ``app_rules_hi[a] - 1`` (a block of the sentence's rules, best first; the applications of one
    source side share it).  Rule r has the target side ``rule_tgt[rule_tgt_off[r]:rule_tgt_off[r+1]]`` (LM ids, ``-1 - k`` for child k) and the score
    ``rule_static[r]`` of its non-LM features; ``weights_lm`` weighs the LM feature (ln 10 x log10).

    Returns ``n_items, item_score, item_cell, n_edges, edge_head, edge_rule, edge_tails``
    (int64[E, 2], -1 absent) and ``edge_lm`` (the LM feature of each edge); items are numbered in
    the order they are made (children before heads) and the goal is the best item of the last
    cell.

    This function owns the arrays and gives each cell room for the most it can add before
    :func:`_fill_cell` fills it without allocating (so without reference counting)."""
    n_ctx = max(t.order - 1, 1)
    width = row_width(t.order)
    states = new_states(t)
    max_target = np.max(rule_tgt_off[1:] - rule_tgt_off[:-1]) if rule_tgt_off.shape[0] > 1 else 0
    item_row = np.full((1024, width), -1, dtype=np.int32)     # LM states (:mod:`_chart_lm`)
    item_est = np.zeros(1024, dtype=np.float64)
    item_score = np.zeros(1024, dtype=np.float64)
    item_cell = np.zeros(1024, dtype=np.int64)
    item_slot = np.zeros(1024, dtype=np.int64)
    n_items = 0
    edge_head, edge_rule, edge_tails, edge_lm = new_edges(1024)
    n_edges = 0
    cell_off = np.zeros(n_cells, dtype=np.int64)
    cell_len = np.zeros(n_cells, dtype=np.int64)
    cell_items = np.zeros(1024, dtype=np.int64)
    n_cell_items = 0
    next_app = 0
    n_apps = app_cell.shape[0]
    # the candidates of the cell being filled (:func:`_fill_cell`), a heap of them and an
    # open-addressing set of their keys; the cell's items by LM state
    p_key, p_score, p_slot, heap, p_rule, p_children, p_delta, p_row, p_est = _new_pool(1024, width)
    seen = np.full(4096, -1, dtype=np.int64)
    cell_states = np.full(1024, -1, dtype=np.int64)
    for cell in cell_order:
        first_app = next_app
        while next_app < n_apps and app_cell[next_app] == cell:
            next_app += 1
        # the most candidates the cell can have: the applications' first candidates and three per
        # pop, and at most the points of their grids; as many items and edges as pops
        grid = 0
        for a in range(first_app, next_app):
            points = app_rules_hi[a] - app_rules_lo[a]
            for k in range(2):
                if app_child[a, k] >= 0:
                    points *= cell_len[app_child[a, k]]
            grid += points
        most = min(grid, next_app - first_app + 3 * pop_limit)
        pops = min(most, pop_limit)
        # each candidate adds at most one LM state per word it scores
        states = room(states, most * (max_target + 2 * n_ctx))
        if most > p_key.shape[0]:
            p_key, p_score, p_slot, heap, p_rule, p_children, p_delta, p_row, p_est = _new_pool(
                power_of_two(most), width)
        if 2 * most > seen.shape[0]:
            seen = np.full(power_of_two(2 * most), -1, dtype=np.int64)
        if 2 * pops > cell_states.shape[0]:
            cell_states = np.full(power_of_two(2 * pops), -1, dtype=np.int64)
        need = n_items + pops
        item_row, item_est, item_score = grow_rows(item_row, need), grow(item_est, need), grow(item_score, need)
        item_cell, item_slot = grow(item_cell, need), grow(item_slot, need)
        edge_head, edge_rule, edge_tails, edge_lm = grow_edges(n_edges + pops, edge_head, edge_rule, edge_tails,
                                                               edge_lm)
        first_item = n_items
        n_items, n_edges = _fill_cell(
            t, states, weights_lm * LN10, pop_limit, cell, first_app, next_app, app_child, app_rules_lo,
            app_rules_hi, rule_tgt, rule_tgt_off, rule_static, cell_off, cell_len, cell_items, item_row,
            item_est, item_score, item_cell, item_slot, n_items, edge_head, edge_rule, edge_tails, edge_lm,
            n_edges, p_key, p_score, p_slot, heap, p_rule, p_children, p_delta, p_row, p_est, seen, cell_states)
        # the cell's items, best first
        n_cell = n_items - first_item
        cell_items = grow(cell_items, n_cell_items + n_cell)
        by_score = np.argsort(-item_score[first_item:n_items], kind="mergesort")
        cell_off[cell] = n_cell_items
        cell_len[cell] = n_cell
        for k in range(n_cell):
            cell_items[n_cell_items + k] = first_item + by_score[k]
        n_cell_items += n_cell
    return (n_items, item_score[:n_items].copy(), item_cell[:n_items].copy(), n_edges,
            edge_head[:n_edges].copy(), edge_rule[:n_edges].copy(), edge_tails[:n_edges].copy(),
            edge_lm[:n_edges].copy())


@njit_borrowing
def _fill_cell(t, states, w_lm, pop_limit, cell, first_app, next_app, app_child, app_rules_lo, app_rules_hi,
               rule_tgt, rule_tgt_off, rule_static, cell_off, cell_len, cell_items, item_row, item_est,
               item_score, item_cell, item_slot, n_items, edge_head, edge_rule, edge_tails, edge_lm, n_edges,
               p_key, p_score, p_slot, heap, p_rule, p_children, p_delta, p_row, p_est, seen, cell_states):
    """Cube pruning in one cell (the applications ``first_app:next_app``), in arrays :func:`search`
    made room in; returns the new ``n_items, n_edges``.

    The first candidate of every application whose child cells have items, then up to ``pop_limit``
    pops, best first, each pushing its neighbours (the next rule of the block, the next item of a
    child cell).  A candidate (``p_*``) keeps its key (application, rule rank, child ranks), score,
    rule, children, LM score and the LM state row computed when it was pushed (so that a pop needs
    no second LM walk); ``seen`` holds the candidates by key and ``cell_states`` the cell's items by
    LM state (both empty on entry, and emptied on return)."""
    width = item_row.shape[1]
    heap_size = 0
    n_cand = 0
    first_item = n_items
    a = first_app
    pops = 0
    while True:
        if a < next_app:            # the first candidates
            if app_rules_hi[a] <= app_rules_lo[a] or (app_child[a, 0] >= 0 and cell_len[app_child[a, 0]] == 0) \
                    or (app_child[a, 1] >= 0 and cell_len[app_child[a, 1]] == 0):
                a += 1
                continue
            moves_a, moves_rank, moves_k1, moves_k2, n_moves = a, 0, 0, 0, 1
            a += 1
        else:
            if heap_size == 0 or pops >= pop_limit:
                break
            p = heap_pop(heap, 0, heap_size, p_score)
            heap_size -= 1
            pops += 1
            # the candidate's state into the next item slot; recombined with an item of the same state
            for k in range(width):
                item_row[n_items, k] = p_row[p, k]
            item_est[n_items] = p_est[p]
            score = p_score[p]
            slot, found = _find_state(cell_states, row_hash(item_row, n_items, STATE), n_items, item_row)
            if found:
                head = cell_states[slot]
                if score > item_score[head]:
                    item_score[head] = score
            else:
                head = n_items
                cell_states[slot] = head
                item_slot[head] = slot
                item_score[head] = score
                item_cell[head] = cell
                n_items += 1
            edge_head[n_edges] = head
            edge_rule[n_edges] = p_rule[p]
            edge_tails[n_edges, 0] = p_children[p, 0]
            edge_tails[n_edges, 1] = p_children[p, 1]
            edge_lm[n_edges] = LN10 * p_delta[p]
            n_edges += 1
            moves_a, moves_rank, moves_k1, moves_k2, n_moves = p_key[p, 0], p_key[p, 1], p_key[p, 2], \
                p_key[p, 3], 3
        for move in range(n_moves):
            ca, nr, n1, n2 = moves_a, moves_rank, moves_k1, moves_k2
            if n_moves == 3:
                if move == 0:
                    if app_rules_lo[ca] + nr + 1 >= app_rules_hi[ca]:
                        continue
                    nr += 1
                else:
                    c = app_child[ca, move - 1]
                    if c < 0:
                        continue
                    if move == 1:
                        if n1 + 1 >= cell_len[c]:
                            continue
                        n1 += 1
                    else:
                        if n2 + 1 >= cell_len[c]:
                            continue
                        n2 += 1
            slot, found = _find_candidate(seen, p_key, ca, nr, n1, n2)
            if found:
                continue
            rule = app_rules_lo[ca] + nr
            c0, c1 = app_child[ca, 0], app_child[ca, 1]
            child0 = cell_items[cell_off[c0] + n1] if c0 >= 0 else -1
            child1 = cell_items[cell_off[c1] + n2] if c1 >= 0 else -1
            delta = apply_rule(t, states, rule_tgt, rule_tgt_off[rule], rule_tgt_off[rule + 1], child0, child1,
                               item_row, item_est, p_row, p_est, n_cand)
            score = rule_static[rule] + w_lm * delta
            if child0 >= 0:
                score += item_score[child0]
            if child1 >= 0:
                score += item_score[child1]
            p_key[n_cand, 0] = ca
            p_key[n_cand, 1] = nr
            p_key[n_cand, 2] = n1
            p_key[n_cand, 3] = n2
            p_rule[n_cand] = rule
            p_children[n_cand, 0] = child0
            p_children[n_cand, 1] = child1
            p_delta[n_cand] = delta
            p_score[n_cand] = score
            seen[slot] = n_cand
            p_slot[n_cand] = slot
            heap_push(heap, 0, heap_size, n_cand, p_score)
            heap_size += 1
            n_cand += 1
    # empty the sets for the next cell
    for q in range(n_cand):
        seen[p_slot[q]] = -1
    for item in range(first_item, n_items):
        cell_states[item_slot[item]] = -1
    return n_items, n_edges


@njit(cache=True)
def _new_pool(cap, width):
    """The candidate arrays of a cell with room for ``cap`` candidates: key, score, slot in the set of
    keys, heap, rule, children, LM score, LM state row and its ``est``."""
    return (np.zeros((cap, 4), dtype=np.int64), np.zeros(cap, dtype=np.float64), np.zeros(cap, dtype=np.int64),
            np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.int64), np.zeros((cap, 2), dtype=np.int64),
            np.zeros(cap, dtype=np.float64), np.zeros((cap, width), dtype=np.int32), np.zeros(cap, dtype=np.float64))


@njit(cache=True, inline="always")
def _key_hash(a, rank, k1, k2):
    """A candidate key's hash: its fields spread by odd multipliers (independent products), then one
    mix (instead of a chain of four :func:`mix_in`: eight dependent products before every probe)."""
    return mix64(np.uint64(a) * MIX1 + np.uint64(rank) * MIX2 + np.uint64(k1) * GOLDEN + np.uint64(k2))


@njit_borrowing
def _find_candidate(table, p_key, a, rank, k1, k2):
    """``(slot, True)`` of the candidate with key (a, rank, k1, k2) in the open-addressing set
    ``table`` (candidate ids, -1 empty; a power of two), or ``(free slot, False)``."""
    mask = table.shape[0] - 1
    slot = np.int64(_key_hash(a, rank, k1, k2) & np.uint64(mask))
    while table[slot] >= 0:
        p = table[slot]
        if p_key[p, 0] == a and p_key[p, 1] == rank and p_key[p, 2] == k1 and p_key[p, 3] == k2:
            return slot, True
        slot = (slot + 1) & mask
    return slot, False


@njit_borrowing
def _find_state(table, h, item, item_row):
    """``(slot, True)`` of the item of ``item``'s LM state in the open-addressing set ``table``
    (item ids, -1 empty; a power of two), or ``(free slot, False)``."""
    mask = table.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    while table[slot] >= 0:
        if same_row(item_row, table[slot], item, STATE):
            return slot, True
        slot = (slot + 1) & mask
    return slot, False


@njit(cache=True)
def new_edges(cap):
    """The edge arrays of a chart search: head item, rule, two tails (-1 absent), LM feature."""
    return (np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.int64), np.full((cap, 2), -1, dtype=np.int64),
            np.zeros(cap, dtype=np.float64))


@njit(cache=True)
def grow_edges(cap, edge_head, edge_rule, edge_tails, edge_lm):
    """The edge arrays with room for ``cap`` edges."""
    return grow(edge_head, cap), grow(edge_rule, cap), grow_rows(edge_tails, cap), grow(edge_lm, cap)


@njit(cache=True)
def reachable(goal, n_items, edge_head, edge_tails):
    """The items under ``goal``: one sweep over the edges, last first. The chart makes a cell's
    edges after every edge of the cells its children are in (cells in ``cell_order``, children
    over shorter spans or earlier ``S`` cells), so an item is known to be reachable before the
    sweep meets its edges (the search's and forced decoding's)."""
    reach = np.zeros(n_items, dtype=np.bool_)
    reach[goal] = True
    for e in range(edge_head.shape[0] - 1, -1, -1):
        if reach[edge_head[e]]:
            for k in range(2):
                if edge_tails[e, k] >= 0:
                    reach[edge_tails[e, k]] = True
    return reach


@njit(cache=True)
def forest_order(goal, n_items, edge_head, edge_tails, item_start, item_end):
    """The forest under ``goal`` in Moses' chart-hypergraph order: ``(nodes, new_id, edges,
    in_offsets)``: the reachable items by span width, then start, then item id (children first,
    the goal last), each item's node id (-1 if unreachable), their edges grouped by head node in
    that order (each node's in the order they were made: the best first), and the offsets of each
    node's edges.  Counting sorts (spans are positions of the sentence), so linear in the chart."""
    reach = reachable(goal, n_items, edge_head, edge_tails)
    positions = 0
    for item in range(n_items):
        positions = max(positions, item_end[item] + 1)
    buckets = np.zeros(positions * positions + 1, dtype=np.int64)
    n_nodes = 0
    for item in range(n_items):
        if reach[item]:
            buckets[(item_end[item] - item_start[item]) * positions + item_start[item] + 1] += 1
            n_nodes += 1
    for b in range(1, buckets.shape[0]):
        buckets[b] += buckets[b - 1]
    nodes = np.empty(n_nodes, dtype=np.int64)
    new_id = np.full(n_items, -1, dtype=np.int64)
    for item in range(n_items):
        if reach[item]:
            key = (item_end[item] - item_start[item]) * positions + item_start[item]
            nodes[buckets[key]] = item
            new_id[item] = buckets[key]
            buckets[key] += 1
    in_offsets = np.zeros(n_nodes + 1, dtype=np.int64)
    for e in range(edge_head.shape[0]):
        if new_id[edge_head[e]] >= 0:
            in_offsets[new_id[edge_head[e]] + 1] += 1
    for v in range(n_nodes):
        in_offsets[v + 1] += in_offsets[v]
    edges = np.empty(in_offsets[n_nodes], dtype=np.int64)
    fill = in_offsets[:n_nodes].copy()
    for e in range(edge_head.shape[0]):
        v = new_id[edge_head[e]]
        if v >= 0:
            edges[fill[v]] = e
            fill[v] += 1
    return nodes, new_id, edges, in_offsets


@njit(cache=True)
def forest_edges(edges, edge_tails, new_id, edge_rule, edge_lm, lm_column, n_grammar, local_global, tm, tm_column,
                 words, wp_column, pp_column, special_dense, rule_tmpl, rule_tmpl_off, sparse_off, sparse_ids,
                 sparse_values):
    """The edge arrays of a forest, edge ``k`` being the search's edge ``edges[k]``: ``(tail_offsets, tails,
    feat_offsets, feat_ids, feat_values, tmpl_offsets, tmpl)`` (a :class:`~minismt.hypergraph.Hypergraph`'s).

    An edge's tails are the node ids ``new_id`` of its items, its target template is its local rule
    ``r = edge_rule[e]``'s, ``rule_tmpl[rule_tmpl_off[r]:rule_tmpl_off[r+1]]``.  The local rule is a
    grammar rule ``g = local_global[r]`` if ``r < n_grammar``: dense features ``-words[g]`` (word
    penalty), 1 (phrase penalty) and ``tm[g]`` (its scores, from ``tm_column``), sparse features
    ``sparse_off[g]:sparse_off[g+1]`` of ``sparse_ids``/``sparse_values`` (none when ``sparse_off`` is
    empty); else a special rule with the dense features ``special_dense[r - n_grammar]``.  The column
    ``lm_column`` is the edge's LM value ``edge_lm[e]``.  Features: the non-zero dense ones in
    column order, then the sparse ones."""
    n = edges.shape[0]
    dense = special_dense.shape[1]
    has_sparse = sparse_off.shape[0] > 0
    rows = np.zeros((n, dense), dtype=np.float64)      # each edge's dense features
    tail_offsets = np.zeros(n + 1, dtype=np.int64)
    feat_offsets = np.zeros(n + 1, dtype=np.int64)
    tmpl_offsets = np.zeros(n + 1, dtype=np.int64)
    for k in range(n):
        e = edges[k]
        r = edge_rule[e]
        if r >= n_grammar:
            for c in range(dense):
                rows[k, c] = special_dense[r - n_grammar, c]
        else:
            g = local_global[r]
            rows[k, wp_column] = -np.float64(words[g])
            rows[k, pp_column] = 1.0
            for c in range(tm.shape[1]):
                rows[k, tm_column + c] = tm[g, c]
        rows[k, lm_column] = edge_lm[e]
        nonzero = 0
        for c in range(dense):
            nonzero += rows[k, c] != 0.0
        if r < n_grammar and has_sparse:
            nonzero += sparse_off[local_global[r] + 1] - sparse_off[local_global[r]]
        tail_offsets[k + 1] = tail_offsets[k] + (edge_tails[e, 0] >= 0) + (edge_tails[e, 1] >= 0)
        feat_offsets[k + 1] = feat_offsets[k] + nonzero
        tmpl_offsets[k + 1] = tmpl_offsets[k] + rule_tmpl_off[r + 1] - rule_tmpl_off[r]
    tails = np.empty(tail_offsets[n], dtype=np.int32)
    feat_ids = np.empty(feat_offsets[n] + dense, dtype=np.int32)      # room for the last edge's zeros
    feat_values = np.empty(feat_offsets[n] + dense, dtype=np.float64)
    tmpl = np.empty(tmpl_offsets[n], dtype=np.int32)
    for k in range(n):
        e = edges[k]
        r = edge_rule[e]
        q = tail_offsets[k]
        for side in range(2):
            if edge_tails[e, side] >= 0:
                tails[q] = new_id[edge_tails[e, side]]
                q += 1
        q = feat_offsets[k]
        for c in range(dense):          # every column written, the next one over it if it is zero
            feat_ids[q] = c
            feat_values[q] = rows[k, c]
            q += rows[k, c] != 0.0
        if r < n_grammar and has_sparse:
            g = local_global[r]
            for s in range(sparse_off[g], sparse_off[g + 1]):
                feat_ids[q] = sparse_ids[s]
                feat_values[q] = sparse_values[s]
                q += 1
        t = tmpl_offsets[k]
        for s in range(rule_tmpl_off[r], rule_tmpl_off[r + 1]):
            tmpl[t] = rule_tmpl[s]
            t += 1
    return (tail_offsets, tails, feat_offsets, feat_ids[:feat_offsets[n]], feat_values[:feat_offsets[n]],
            tmpl_offsets, tmpl)
