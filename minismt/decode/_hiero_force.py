"""Forced decoding of the Hiero chart decoder: every derivation whose yield is the reference.

The applications are the search's (:mod:`minismt.decode._hiero_search`: the same rules, table
limit, span limit and glue rules), but the target side is fixed, so an item is a cell with a span
``[start, end)`` of the reference (``<s>`` at 0, ``</s>`` last) and a rule applies where its
target words match the reference around its children's spans.  A reference span fixes the item's
words, so it fixes its LM state too: nothing needs pruning or LM-state recombination, and the
search is exact (synchronous CKY parsing of the source and the reference, as cdec's forced
alignment of a forest to a reference).

Every match is an edge of the forest; its LM feature is the LM value (:mod:`_chart_lm`: the log10
score of the yield from no context) of its head's span minus its children's, so a derivation's LM
features sum to the reference's sentence score, as in a decoding forest.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from minismt._primitives import grow, grow_rows
from minismt.decode._hiero_search import grow_edges, new_edges
from minismt.lm._kernels import score_sentence

LN10 = math.log(10.0)
FIRST_SPECIAL = -100
"""Target symbols <= this are the special words ``<s>`` and ``</s>`` of the glue rules; -1 - k stands
for child k, symbols >= 0 are target words."""


@njit(cache=True)
def span_values(t, lm_ids):
    """``V[s, e]``: the LM value of the reference span ``[s, e)`` of ``lm_ids`` (``<s> words </s>``):
    the log10 score of its words from no context (from ``<s>`` when ``s == 0``)."""
    m = lm_ids.shape[0]
    values = np.zeros((m + 1, m + 1))
    logprob = np.zeros(m + 1)
    matched = np.zeros(m + 1, dtype=np.int64)
    words = lm_ids[1:m - 1]
    # from <s>: the words, then </s>
    score_sentence(t, words, True, True, logprob, matched)
    total = 0.0
    for e in range(2, m + 1):
        total += logprob[e - 2]
        values[0, e] = total
    for s in range(1, m):
        score_sentence(t, lm_ids[s:m - 1], False, True, logprob, matched)
        total = 0.0
        for e in range(s + 1, m + 1):
            total += logprob[e - s - 1]
            values[s, e] = total
    return values


@njit(cache=True)
def _matches(template, lo, hi, reference, at):
    """Whether ``template[lo:hi]`` (words only) is the reference from position ``at``."""
    if at < 0 or at + hi - lo > reference.shape[0]:
        return False
    for k in range(hi - lo):
        if template[lo + k] != reference[at + k]:
            return False
    return True


@njit(cache=True)
def force(n_cells, cell_order, app_cell, app_child, app_rules_lo, app_rules_hi, rule_tgt,
          rule_tgt_off, rule_static, reference, values, weights_lm):
    """Every derivation of the reference ``reference`` (target ids of ``<s> words </s>``) from the
    applications (as :func:`minismt.decode._hiero_search.search`, ``rule_tgt`` in target ids with
    :data:`FIRST_SPECIAL` and below for ``<s>``/``</s>``); ``values``: :func:`span_values`.

    Returns ``n_items, item_score, item_cell, item_start, item_end, n_edges, edge_head, edge_rule,
    edge_tails, edge_lm`` (as the search's; items children first, each item's score its best
    derivation's)."""
    m = reference.shape[0]
    w_lm = weights_lm * LN10
    item_score = np.zeros(256)
    item_cell = np.zeros(256, dtype=np.int64)
    item_start = np.zeros(256, dtype=np.int64)
    item_end = np.zeros(256, dtype=np.int64)
    n_items = 0
    edge_head, edge_rule, edge_tails, edge_lm = new_edges(256)
    n_edges = 0
    # a finished cell's items, by start: cell_items[cell_lo[c]:cell_hi[c]], starts ascending
    cell_lo = np.zeros(n_cells, dtype=np.int64)
    cell_hi = np.zeros(n_cells, dtype=np.int64)
    cell_items = np.zeros(256, dtype=np.int64)
    n_cell_items = 0
    item_of = {(0, 0): 0}
    next_app = 0
    n_apps = app_cell.shape[0]
    # a placement of a rule: (child items, start, end) collected before they are added
    found = np.zeros((16, 4), dtype=np.int64)
    for cell in cell_order:
        first_app = next_app
        while next_app < n_apps and app_cell[next_app] == cell:
            next_app += 1
        item_of.clear()
        first_item = n_items
        for a in range(first_app, next_app):
            c0, c1 = app_child[a, 0], app_child[a, 1]
            if (c0 >= 0 and cell_hi[c0] == cell_lo[c0]) or (c1 >= 0 and cell_hi[c1] == cell_lo[c1]):
                continue
            for rule in range(app_rules_lo[a], app_rules_hi[a]):
                lo, hi = rule_tgt_off[rule], rule_tgt_off[rule + 1]
                n_found = 0
                # the template's segments: words, child, words, child, words
                first_nt, second_nt = -1, -1
                for k in range(lo, hi):
                    x = rule_tgt[k]
                    if x < 0 and x > FIRST_SPECIAL:
                        if first_nt < 0:
                            first_nt = k
                        else:
                            second_nt = k
                if first_nt < 0:
                    for s in range(m - (hi - lo) + 1):
                        if _matches(rule_tgt, lo, hi, reference, s):
                            found, n_found = _found(found, n_found, -1, -1, s, s + hi - lo)
                else:
                    child_a = -1 - rule_tgt[first_nt]
                    cell_a = app_child[a, child_a]
                    for qa in range(cell_lo[cell_a], cell_hi[cell_a]):
                        ia = cell_items[qa]
                        start = item_start[ia] - (first_nt - lo)
                        if not _matches(rule_tgt, lo, first_nt, reference, start):
                            continue
                        if second_nt < 0:
                            if _matches(rule_tgt, first_nt + 1, hi, reference, item_end[ia]):
                                end = item_end[ia] + hi - first_nt - 1
                                if child_a == 0:
                                    found, n_found = _found(found, n_found, ia, -1, start, end)
                                else:
                                    found, n_found = _found(found, n_found, -1, ia, start, end)
                            continue
                        if not _matches(rule_tgt, first_nt + 1, second_nt, reference, item_end[ia]):
                            continue
                        at = item_end[ia] + second_nt - first_nt - 1
                        cell_b = app_child[a, 1 - child_a]
                        q = cell_lo[cell_b] + np.searchsorted(item_start[cell_items[cell_lo[cell_b]:cell_hi[cell_b]]], at)
                        while q < cell_hi[cell_b] and item_start[cell_items[q]] == at:
                            ib = cell_items[q]
                            if _matches(rule_tgt, second_nt + 1, hi, reference, item_end[ib]):
                                end = item_end[ib] + hi - second_nt - 1
                                if child_a == 0:
                                    found, n_found = _found(found, n_found, ia, ib, start, end)
                                else:
                                    found, n_found = _found(found, n_found, ib, ia, start, end)
                            q += 1
                for f in range(n_found):
                    t0, t1, start, end = found[f, 0], found[f, 1], found[f, 2], found[f, 3]
                    key = (start, end)
                    if key in item_of:
                        head = item_of[key]
                    else:
                        if n_items == item_score.shape[0]:
                            item_score, item_cell = grow(item_score, n_items + 1), grow(item_cell, n_items + 1)
                            item_start, item_end = grow(item_start, n_items + 1), grow(item_end, n_items + 1)
                        head = n_items
                        item_of[key] = head
                        item_score[head] = -np.inf
                        item_cell[head] = cell
                        item_start[head] = start
                        item_end[head] = end
                        n_items += 1
                    delta = values[start, end]
                    score = rule_static[rule]
                    for tail in (t0, t1):
                        if tail >= 0:
                            delta -= values[item_start[tail], item_end[tail]]
                            score += item_score[tail]
                    score += w_lm * delta
                    if score > item_score[head]:
                        item_score[head] = score
                    if n_edges == edge_head.shape[0]:
                        edge_head, edge_rule, edge_tails, edge_lm = grow_edges(n_edges + 1, edge_head, edge_rule,
                                                                               edge_tails, edge_lm)
                    edge_head[n_edges] = head
                    edge_rule[n_edges] = rule
                    edge_tails[n_edges, 0] = t0
                    edge_tails[n_edges, 1] = t1
                    edge_lm[n_edges] = LN10 * delta
                    n_edges += 1
        # the cell's items, by start
        n_cell = n_items - first_item
        cell_items = grow(cell_items, n_cell_items + n_cell)
        by_start = np.argsort(item_start[first_item:n_items], kind="mergesort")
        cell_lo[cell] = n_cell_items
        cell_hi[cell] = n_cell_items + n_cell
        for k in range(n_cell):
            cell_items[n_cell_items + k] = first_item + by_start[k]
        n_cell_items += n_cell
    return (n_items, item_score[:n_items].copy(), item_cell[:n_items].copy(), item_start[:n_items].copy(),
            item_end[:n_items].copy(), n_edges, edge_head[:n_edges].copy(), edge_rule[:n_edges].copy(),
            edge_tails[:n_edges].copy(), edge_lm[:n_edges].copy())


@njit(cache=True)
def _found(found, n_found, t0, t1, start, end):
    if n_found >= found.shape[0]:
        found = grow_rows(found, 2 * found.shape[0])
    found[n_found, 0] = t0
    found[n_found, 1] = t1
    found[n_found, 2] = start
    found[n_found, 3] = end
    return found, n_found + 1
