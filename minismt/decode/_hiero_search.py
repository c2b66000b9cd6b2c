"""The numba search of the Hiero chart decoder: CKY+ with cube pruning (Chiang 2007, section 5)
and the n-gram LM integrated through :mod:`minismt.decode._chart_lm`.

The caller (:mod:`minismt.decode.hiero`) lists a sentence's *cells* in the order they are filled
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

from minismt._primitives import GOLDEN, grow, grow_rows, heap_pop, heap_push, mix64
from minismt.decode._chart_lm import apply_rule

LN10 = math.log(10.0)


@njit(cache=True)
def _state_hash(left, left_len, right, right_len, complete, full):
    h = mix64(np.uint64(left_len) + GOLDEN)
    for k in range(left_len):
        h = mix64(h ^ (np.uint64(left[k] + 2) + GOLDEN))
    h = mix64(h ^ (np.uint64(right_len) + np.uint64(7)))
    for k in range(right_len):
        h = mix64(h ^ (np.uint64(right[k] + 2) + GOLDEN))
    if complete:
        h = mix64(h ^ np.uint64(11))
    if full:
        h = mix64(h ^ np.uint64(13))
    return h


@njit(cache=True)
def _same_state(a, b, left, left_len, right, right_len, complete, full):
    if left_len[a] != left_len[b] or right_len[a] != right_len[b] or complete[a] != complete[b] \
            or full[a] != full[b]:
        return False
    for k in range(left_len[a]):
        if left[a, k] != left[b, k]:
            return False
    for k in range(right_len[a]):
        if right[a, k] != right[b, k]:
            return False
    return True


@njit(cache=True, inline="always")
def _apply(t, app, rank, k1, k2, app_child, app_rules_lo, rules, rule_tgt, rule_tgt_off, cell_off,
           cell_items, left, left_len, left_est, full, right_w, right_b, right_len, length, complete, out,
           children, scratch_ints, scratch_floats):
    """Apply candidate (app, rule rank, child ranks) into item slot ``out``; returns the rule and
    the log10 LM score the application adds (``children`` receives the child items)."""
    rule = rules[app_rules_lo[app] + rank]
    for k in range(2):
        c = app_child[app, k]
        if c >= 0:
            children[k] = cell_items[cell_off[c] + (k1 if k == 0 else k2)]
        else:
            children[k] = -1
    delta = apply_rule(t, rule_tgt[rule_tgt_off[rule]:rule_tgt_off[rule + 1]], children, left,
                       left_len, left_est, full, right_w, right_b, right_len, length, complete, out,
                       scratch_ints, scratch_floats)
    return rule, delta


@njit(cache=True)
def search(t, weights_lm, n_cells, cell_order, app_cell, app_child, app_rules_lo, app_rules_hi,
           rules, rule_tgt, rule_tgt_off, rule_static, pop_limit):
    """Fill the cells ``cell_order`` (ids < ``n_cells``) from the applications (sorted by the
    position of their cell in ``cell_order``).  Application ``a`` builds cell ``app_cell[a]`` from
    the items of ``app_child[a]`` (two cell ids, -1 absent) with the rules
    ``rules[app_rules_lo[a]:app_rules_hi[a]]`` (best first).  Rule r has the target side
    ``rule_tgt[rule_tgt_off[r]:rule_tgt_off[r+1]]`` (LM ids, ``-1 - k`` for child k) and the score
    ``rule_static[r]`` of its non-LM features; ``weights_lm`` weighs the LM feature (ln 10 x log10).

    Returns ``n_items, item_score, item_cell, n_edges, edge_head, edge_rule, edge_tails``
    (int64[E, 2], -1 absent) and ``edge_lm`` (the LM feature of each edge); items are numbered in
    the order they are made (children before heads) and the goal is the best item of the last
    cell."""
    n_ctx = max(t.order - 1, 1)
    cap = 1024
    left = np.full((cap, n_ctx), -1, dtype=np.int32)
    left_len = np.zeros(cap, dtype=np.int64)
    left_est = np.zeros(cap, dtype=np.float64)
    full = np.zeros(cap, dtype=np.bool_)
    right_w = np.full((cap, n_ctx), -1, dtype=np.int32)
    right_b = np.zeros((cap, n_ctx), dtype=np.float64)
    right_len = np.zeros(cap, dtype=np.int64)
    length = np.zeros(cap, dtype=np.int64)
    complete = np.zeros(cap, dtype=np.bool_)
    item_score = np.zeros(cap, dtype=np.float64)
    item_cell = np.zeros(cap, dtype=np.int64)
    item_hash = np.zeros(cap, dtype=np.uint64)
    item_slot = np.zeros(cap, dtype=np.int64)
    n_items = 0
    edge_head, edge_rule, edge_tails, edge_lm = new_edges(1024)
    n_edges = 0
    cell_off = np.zeros(n_cells, dtype=np.int64)
    cell_len = np.zeros(n_cells, dtype=np.int64)
    cell_items = np.zeros(1024, dtype=np.int64)
    n_cell_items = 0
    children = np.full(2, -1, dtype=np.int64)
    scratch_ints = np.empty((3, n_ctx), dtype=np.int32)
    scratch_floats = np.empty((2, n_ctx), dtype=np.float64)
    w_lm = weights_lm * LN10
    next_app = 0
    n_apps = app_cell.shape[0]
    # the candidates of the cell being filled: their key (application, rule rank, child ranks), score,
    # item state as computed when pushed (so that a pop needs no second LM walk), rule, children, LM;
    # a binary heap of them (best first) and an open-addressing set of their keys
    p_cap = 1024
    p_key = np.zeros((p_cap, 4), dtype=np.int64)
    p_score = np.zeros(p_cap, dtype=np.float64)
    p_slot = np.zeros(p_cap, dtype=np.int64)
    heap = np.zeros(p_cap, dtype=np.int64)
    p_rule = np.zeros(p_cap, dtype=np.int64)
    p_children = np.zeros((p_cap, 2), dtype=np.int64)
    p_delta = np.zeros(p_cap, dtype=np.float64)
    p_left = np.zeros((p_cap, n_ctx), dtype=np.int32)
    p_left_len = np.zeros(p_cap, dtype=np.int64)
    p_left_est = np.zeros(p_cap, dtype=np.float64)
    p_full = np.zeros(p_cap, dtype=np.bool_)
    p_right_w = np.zeros((p_cap, n_ctx), dtype=np.int32)
    p_right_b = np.zeros((p_cap, n_ctx), dtype=np.float64)
    p_right_len = np.zeros(p_cap, dtype=np.int64)
    p_length = np.zeros(p_cap, dtype=np.int64)
    p_complete = np.zeros(p_cap, dtype=np.bool_)
    seen = np.full(4096, -1, dtype=np.int64)       # candidate ids by key
    states = np.full(1024, -1, dtype=np.int64)     # the cell's item ids by LM state
    for cell in cell_order:
        first_app = next_app
        while next_app < n_apps and app_cell[next_app] == cell:
            next_app += 1
        heap_size = 0
        n_cand = 0
        first_item = n_items
        # the first candidate of every application whose child cells have items, then up to
        # pop_limit pops, each pushing its neighbours: the next rule of the block, the next item of
        # a child cell
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
                if n_items + 2 >= cap:
                    cap = 2 * cap
                    (left, left_len, left_est, full, right_w, right_b, right_len, length, complete, item_score,
                     item_cell, item_hash, item_slot) = _grow_items(
                        cap, left, left_len, left_est, full, right_w, right_b, right_len, length, complete,
                        item_score, item_cell, item_hash, item_slot)
                # the candidate's state into the next item slot; recombined with an item of the same state
                _copy_item(p_left, p_left_len, p_left_est, p_full, p_right_w, p_right_b, p_right_len, p_length,
                           p_complete, p, left, left_len, left_est, full, right_w, right_b, right_len, length,
                           complete, n_items)
                score = p_score[p]
                h = _state_hash(left[n_items], left_len[n_items], right_w[n_items], right_len[n_items],
                                complete[n_items], full[n_items])
                if 2 * (n_items - first_item + 1) > states.shape[0]:
                    states = _rehash_states(2 * states.shape[0], first_item, n_items, item_hash, item_slot,
                                            left, left_len, right_w, right_len, complete, full)
                slot, found = _find_state(states, h, n_items, left, left_len, right_w, right_len, complete, full)
                if found:
                    head = states[slot]
                    if score > item_score[head]:
                        item_score[head] = score
                else:
                    head = n_items
                    states[slot] = head
                    item_hash[head] = h
                    item_slot[head] = slot
                    item_score[head] = score
                    item_cell[head] = cell
                    n_items += 1
                if n_edges >= edge_head.shape[0]:
                    edge_head, edge_rule, edge_tails, edge_lm = grow_edges(2 * n_edges, edge_head, edge_rule,
                                                                           edge_tails, edge_lm)
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
                if 2 * (n_cand + 1) > seen.shape[0]:
                    seen = _rehash_candidates(2 * seen.shape[0], p_key, n_cand, p_slot)
                slot, found = _find_candidate(seen, p_key, ca, nr, n1, n2)
                if found:
                    continue
                if n_cand >= p_cap:
                    p_cap = 2 * p_cap
                    (p_key, p_score, p_slot, heap, p_rule, p_children, p_delta, p_left, p_left_len, p_left_est,
                     p_full, p_right_w, p_right_b, p_right_len, p_length, p_complete) = _grow_pool(
                        p_cap, p_key, p_score, p_slot, heap, p_rule, p_children, p_delta, p_left, p_left_len,
                        p_left_est, p_full, p_right_w, p_right_b, p_right_len, p_length, p_complete)
                rule, delta = _apply(t, ca, nr, n1, n2, app_child, app_rules_lo, rules, rule_tgt, rule_tgt_off,
                                     cell_off, cell_items, left, left_len, left_est, full, right_w, right_b, right_len,
                                     length, complete, n_items, children, scratch_ints, scratch_floats)
                score = rule_static[rule] + w_lm * delta
                for k in range(2):
                    if children[k] >= 0:
                        score += item_score[children[k]]
                _keep(n_cand, ca, nr, n1, n2, rule, delta, children, n_items, left, left_len, left_est, full, right_w,
                      right_b, right_len, length, complete, p_key, p_rule, p_children, p_delta, p_left,
                      p_left_len, p_left_est, p_full, p_right_w, p_right_b, p_right_len, p_length, p_complete)
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
            states[item_slot[item]] = -1
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


@njit(cache=True, inline="always")
def _key_hash(a, rank, k1, k2):
    h = mix64(np.uint64(a) + GOLDEN)
    h = mix64(h ^ (np.uint64(rank) + GOLDEN))
    h = mix64(h ^ (np.uint64(k1) + GOLDEN))
    return mix64(h ^ (np.uint64(k2) + GOLDEN))


@njit(cache=True)
def _find_candidate(table, p_key, a, rank, k1, k2):
    """``(slot, True)`` of the candidate with key (a, rank, k1, k2) in the open-addressing set
    ``table`` (candidate ids, -1 empty), or ``(free slot, False)``."""
    mask = table.shape[0] - 1
    slot = np.int64(_key_hash(a, rank, k1, k2) & np.uint64(mask))
    while table[slot] >= 0:
        p = table[slot]
        if p_key[p, 0] == a and p_key[p, 1] == rank and p_key[p, 2] == k1 and p_key[p, 3] == k2:
            return slot, True
        slot = (slot + 1) & mask
    return slot, False


@njit(cache=True)
def _rehash_candidates(size, p_key, n_cand, p_slot):
    table = np.full(size, -1, dtype=np.int64)
    for p in range(n_cand):
        slot, _ = _find_candidate(table, p_key, p_key[p, 0], p_key[p, 1], p_key[p, 2], p_key[p, 3])
        table[slot] = p
        p_slot[p] = slot
    return table


@njit(cache=True)
def _find_state(table, h, item, left, left_len, right, right_len, complete, full):
    """``(slot, True)`` of the item of ``item``'s LM state in the open-addressing set ``table``
    (item ids, -1 empty), or ``(free slot, False)``."""
    mask = table.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    while table[slot] >= 0:
        if _same_state(table[slot], item, left, left_len, right, right_len, complete, full):
            return slot, True
        slot = (slot + 1) & mask
    return slot, False


@njit(cache=True)
def _rehash_states(size, first_item, n_items, item_hash, item_slot, left, left_len, right, right_len, complete,
                   full):
    table = np.full(size, -1, dtype=np.int64)
    for item in range(first_item, n_items):
        slot, _ = _find_state(table, item_hash[item], item, left, left_len, right, right_len, complete, full)
        table[slot] = item
        item_slot[item] = slot
    return table


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
def _grow_items(cap, left, left_len, left_est, full, right_w, right_b, right_len, length, complete, item_score,
                item_cell, item_hash, item_slot):
    return (grow_rows(left, cap), grow(left_len, cap), grow(left_est, cap), grow(full, cap), grow_rows(right_w, cap),
            grow_rows(right_b, cap), grow(right_len, cap), grow(length, cap), grow(complete, cap),
            grow(item_score, cap), grow(item_cell, cap), grow(item_hash, cap), grow(item_slot, cap))


@njit(cache=True)
def reachable(goal, n_items, edge_head, edge_tails):
    """The items under ``goal`` (items are numbered children first, so one sweep down suffices)."""
    order = np.argsort(edge_head, kind="mergesort")
    first = np.searchsorted(edge_head[order], np.arange(n_items + 1))
    reach = np.zeros(n_items, dtype=np.bool_)
    reach[goal] = True
    for item in range(goal, -1, -1):
        if not reach[item]:
            continue
        for q in range(first[item], first[item + 1]):
            e = order[q]
            for k in range(2):
                if edge_tails[e, k] >= 0:
                    reach[edge_tails[e, k]] = True
    return reach


@njit(cache=True)
def _keep(p, a, rank, k1, k2, rule, delta, children, slot, left, left_len, left_est, full, right_w, right_b,
          right_len, length, complete, p_key, p_rule, p_children, p_delta, p_left, p_left_len, p_left_est,
          p_full, p_right_w, p_right_b, p_right_len, p_length, p_complete):
    """Candidate ``p``: its key, rule, children, LM score and the item state computed in ``slot``."""
    p_key[p, 0] = a
    p_key[p, 1] = rank
    p_key[p, 2] = k1
    p_key[p, 3] = k2
    p_rule[p] = rule
    p_children[p, 0] = children[0]
    p_children[p, 1] = children[1]
    p_delta[p] = delta
    _copy_item(left, left_len, left_est, full, right_w, right_b, right_len, length, complete, slot, p_left,
               p_left_len, p_left_est, p_full, p_right_w, p_right_b, p_right_len, p_length, p_complete, p)


@njit(cache=True, inline="always")
def _copy_item(left, left_len, left_est, full, right_w, right_b, right_len, length, complete, i, to_left,
               to_left_len, to_left_est, to_full, to_right_w, to_right_b, to_right_len, to_length, to_complete, j):
    """Item state ``i`` of the first arrays into slot ``j`` of the second (items and candidates)."""
    to_left[j, :] = left[i]
    to_left_len[j] = left_len[i]
    to_left_est[j] = left_est[i]
    to_full[j] = full[i]
    to_right_w[j, :] = right_w[i]
    to_right_b[j, :] = right_b[i]
    to_right_len[j] = right_len[i]
    to_length[j] = length[i]
    to_complete[j] = complete[i]


@njit(cache=True)
def _grow_pool(cap, p_key, p_score, p_slot, heap, p_rule, p_children, p_delta, p_left, p_left_len, p_left_est,
               p_full, p_right_w, p_right_b, p_right_len, p_length, p_complete):
    return (grow_rows(p_key, cap), grow(p_score, cap), grow(p_slot, cap), grow(heap, cap), grow(p_rule, cap),
            grow_rows(p_children, cap), grow(p_delta, cap),
            grow_rows(p_left, cap), grow(p_left_len, cap), grow(p_left_est, cap), grow(p_full, cap),
            grow_rows(p_right_w, cap),
            grow_rows(p_right_b, cap), grow(p_right_len, cap), grow(p_length, cap), grow(p_complete, cap))
