"""A sentence's chart for the Hiero decoder: its cells in the order they are filled and its rule
applications (the arrays :func:`minismt.decode._hiero_search.search` and
:func:`minismt.decode._hiero_force.force` take), in one kernel.

Cells: an ``X`` cell ``i * (n + 1) + j`` holds the items over the words ``[i, j)``, an ``S`` cell
``s_base + 1 + k`` (``s_base = (n + 1)**2``) the items over ``<s> w_1 .. w_k``, and the goal cell
``s_base + n + 2`` the items over ``<s> w_1 .. w_n </s>``.  The ``X`` cells are filled by span
width, then start (up to ``max_span`` words), then the ``S`` cells left to right.

Applications, each a cell, two child cells (-1 absent) and a block of *local* rules (best
first): every match of a rule-table source side (its block: the side's rules), an unknown-word
copy rule for each word no one-word rule covers, ``S -> <s>``, the glue rules ``S -> S X`` (an
``X`` of at most ``max_span`` words after any ``S``) and the goal ``S -> S </s>``.  The local
rules are the blocks of the matched sides (sides in increasing id), then the special rules the
caller gives (the unknown-word copies, ``<s>``, glue, ``</s>``, in that order).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minismt._primitives import grow


@njit(cache=True)
def applications(n, max_span, sources, spans, side_start, side_end, source_rules, rule_tgt, rule_lm_tgt,
                 rule_tgt_off, rule_static, uncovered, special_tgt, special_lm_tgt, special_off, special_static):
    """The chart of a sentence of ``n`` words.

    ``sources[m]``: the source side of match ``m`` (rows ``side_start[s]:side_end[s]`` of
    ``source_rules`` are side ``s``'s grammar rules, best first), ``spans[m]``: its span and its
    non-terminals' (``start, end, nt1 start, nt1 end, nt2 start, nt2 end``, -1 absent).  Row ``p`` of
    ``source_rules`` has the target side ``rule_tgt[rule_tgt_off[p]:rule_tgt_off[p+1]]`` (target ids,
    ``-1 - k`` for non-terminal k), the same in LM ids in ``rule_lm_tgt``, and the weighted non-LM
    score ``rule_static[p]`` (in row order, so that a side's rules are read as one run).
    ``uncovered``: the positions that get an unknown-word rule; the special rules (those copies,
    ``<s>``, glue, ``</s>``) have the target sides ``special_tgt`` (in target ids, ``<s>`` and
    ``</s>`` as the caller marks them) and ``special_lm_tgt`` (LM ids), both cut by ``special_off``,
    and the scores ``special_static``.

    Returns ``(n_cells, cell_order, app_cell, app_child, app_lo, app_hi, lm_tgt, match_tgt,
    local_tgt_off, static, local_global)``: the applications sorted by the position of their cell
    in ``cell_order`` (stably), application ``a`` applying the local rules ``app_lo[a]`` to
    ``app_hi[a] - 1``; the local rules' target sides in LM ids and in target ids, their offsets and
    scores, and the grammar rule of each local grammar rule."""
    width = n + 1
    s_base = width * width
    n_cells = s_base + n + 3
    n_matches = sources.shape[0]
    # the blocks: the matched sides in increasing id, each with its rules
    by_source = np.argsort(sources, kind="mergesort")
    block_of = np.empty(n_matches, dtype=np.int64)
    block_side = np.empty(n_matches, dtype=np.int64)
    n_blocks = 0
    for k in range(n_matches):
        m = by_source[k]
        if n_blocks == 0 or block_side[n_blocks - 1] != sources[m]:
            block_side[n_blocks] = sources[m]
            n_blocks += 1
        block_of[m] = n_blocks - 1
    block_start = np.zeros(n_blocks + 1, dtype=np.int64)
    for b in range(n_blocks):
        side = block_side[b]
        block_start[b + 1] = block_start[b] + side_end[side] - side_start[side]
    n_grammar = block_start[n_blocks]
    n_special = special_static.shape[0]
    local_global = np.empty(n_grammar, dtype=np.int64)
    local_tgt_off = np.zeros(n_grammar + n_special + 1, dtype=np.int64)
    row_of = np.empty(n_grammar, dtype=np.int64)      # each local grammar rule's row
    for b in range(n_blocks):
        first = side_start[block_side[b]]
        for r in range(block_start[b], block_start[b + 1]):
            row = first + r - block_start[b]
            row_of[r] = row
            local_global[r] = source_rules[row]
            local_tgt_off[r + 1] = local_tgt_off[r] + rule_tgt_off[row + 1] - rule_tgt_off[row]
    for s in range(n_special):
        local_tgt_off[n_grammar + s + 1] = local_tgt_off[n_grammar + s] + special_off[s + 1] - special_off[s]
    # the local rules' target sides and scores
    lm_tgt = np.empty(local_tgt_off[n_grammar + n_special], dtype=np.int32)
    match_tgt = np.empty(lm_tgt.shape[0], dtype=np.int32)
    static = np.empty(n_grammar + n_special, dtype=np.float64)
    for r in range(n_grammar):
        row = row_of[r]
        q = local_tgt_off[r]
        for p in range(rule_tgt_off[row], rule_tgt_off[row + 1]):
            match_tgt[q] = rule_tgt[p]
            lm_tgt[q] = rule_lm_tgt[p]
            q += 1
        static[r] = rule_static[row]
    for s in range(n_special):
        q = local_tgt_off[n_grammar + s]
        for p in range(special_off[s], special_off[s + 1]):
            match_tgt[q] = special_tgt[p]
            lm_tgt[q] = special_lm_tgt[p]
            q += 1
        static[n_grammar + s] = special_static[s]
    # the applications, in the order: matches, unknown words, <s>, glue, </s>
    n_oov = uncovered.shape[0]
    n_glue = 0
    for end in range(1, n + 1):
        n_glue += min(end, max_span)
    n_apps = n_matches + n_oov + 1 + n_glue + 1
    cell = np.empty(n_apps, dtype=np.int64)
    child = np.full((n_apps, 2), -1, dtype=np.int64)
    lo = np.empty(n_apps, dtype=np.int64)
    for m in range(n_matches):
        cell[m] = spans[m, 0] * width + spans[m, 1]
        for k in range(2):
            if spans[m, 2 + 2 * k] >= 0:
                child[m, k] = spans[m, 2 + 2 * k] * width + spans[m, 3 + 2 * k]
        lo[m] = block_start[block_of[m]]
    a = n_matches
    for j in range(n_oov):
        cell[a] = uncovered[j] * width + uncovered[j] + 1
        lo[a] = n_grammar + j
        a += 1
    bos_at, glue_at, eos_at = n_grammar + n_oov, n_grammar + n_oov + 1, n_grammar + n_oov + 2
    cell[a] = s_base + 1
    lo[a] = bos_at
    a += 1
    for end in range(1, n + 1):
        for start in range(max(end - max_span, 0), end):
            cell[a] = s_base + end + 1
            child[a, 0] = s_base + start + 1
            child[a, 1] = start * width + end
            lo[a] = glue_at
            a += 1
    cell[a] = s_base + n + 2
    child[a, 0] = s_base + n + 1
    lo[a] = eos_at
    # the cells in the order they are filled
    n_x = 0
    for length in range(1, min(n, max_span) + 1):
        n_x += n - length + 1
    cell_order = np.empty(n_x + n + 2, dtype=np.int64)
    c = 0
    for length in range(1, min(n, max_span) + 1):
        for start in range(n - length + 1):
            cell_order[c] = start * width + start + length
            c += 1
    for k in range(1, n + 3):
        cell_order[c] = s_base + k
        c += 1
    # the applications by the position of their cell (a stable counting sort)
    position = np.full(n_cells, -1, dtype=np.int64)
    for k in range(cell_order.shape[0]):
        position[cell_order[k]] = k
    starts = np.zeros(cell_order.shape[0] + 1, dtype=np.int64)
    for k in range(n_apps):
        starts[position[cell[k]] + 1] += 1
    for k in range(cell_order.shape[0]):
        starts[k + 1] += starts[k]
    app_cell = np.empty(n_apps, dtype=np.int64)
    app_child = np.empty((n_apps, 2), dtype=np.int64)
    app_lo = np.empty(n_apps, dtype=np.int64)
    app_hi = np.empty(n_apps, dtype=np.int64)
    for k in range(n_apps):
        at = starts[position[cell[k]]]
        starts[position[cell[k]]] += 1
        app_cell[at] = cell[k]
        app_child[at, 0] = child[k, 0]
        app_child[at, 1] = child[k, 1]
        app_lo[at] = lo[k]
        app_hi[at] = block_start[block_of[k] + 1] if k < n_matches else lo[k] + 1
    return (n_cells, cell_order, app_cell, app_child, app_lo, app_hi, lm_tgt, match_tgt, local_tgt_off, static,
            local_global)


@njit(cache=True)
def item_spans(item_cell, n):
    """Each item's span ``[start, end)`` over ``<s> w_1 .. w_n </s>`` (``<s>`` at 0) from its cell:
    an ``X`` cell ``i * (n + 1) + j`` spans ``[i + 1, j + 1)``, an ``S`` cell ``s_base + k`` spans
    ``[0, k)``."""
    width = n + 1
    s_base = width * width
    spans = np.empty((item_cell.shape[0], 2), dtype=np.int64)
    for item in range(item_cell.shape[0]):
        cell = item_cell[item]
        if cell < s_base:
            spans[item, 0] = cell // width + 1
            spans[item, 1] = cell % width + 1
        else:
            spans[item, 0] = 0
            spans[item, 1] = cell - s_base
    return spans


@njit(cache=True)
def rank_sides(sides, source_offsets, tm, terminals, estimates, sparse_static, w_tm, w_wp, w_pp, w_lm_ln10,
               table_limit, tgt_syms, tgt_off, lm_of_target, start, end, ready, rules, static, kept_tgt_off,
               kept_tgt, kept_lm_tgt, n_rules, n_symbols):
    """Rank the rules of each source side of ``sides`` (not ranked yet) by Moses' future score, best first,
    ties to the earlier rule, keep the first ``table_limit`` (0: all) and append them to the kept arrays:
    each rule's grammar row, weighted static score (``sparse_static`` added when not empty) and target side
    in target ids and LM ids (``kept_tgt_off``).  Side ``s`` gets rows ``start[s]:end[s]``.  The scores are
    :func:`minismt.extract.hiero_export.static_scores` and ``future_scores``, term for term in their order.
    Returns the grown arrays and the new counts of rules and target symbols."""
    for k in range(sides.shape[0]):
        side = sides[k]
        lo, hi = source_offsets[side], source_offsets[side + 1]
        m = hi - lo
        own = np.empty(m)
        negative_future = np.empty(m)
        for i in range(m):
            r = lo + i
            score = (tm[r, 0] * w_tm[0] + tm[r, 1] * w_tm[1] + tm[r, 2] * w_tm[2] + tm[r, 3] * w_tm[3]
                     - w_wp * terminals[r] + w_pp)
            negative_future[i] = -(score + w_lm_ln10 * estimates[r])
            if sparse_static.shape[0] > 0:
                score = score + sparse_static[r]
            own[i] = score
        order = np.argsort(negative_future, kind="mergesort")     # stable: ties to the earlier rule
        keep = m if table_limit == 0 else min(m, table_limit)
        rules = grow(rules, n_rules + keep)
        static = grow(static, n_rules + keep)
        kept_tgt_off = grow(kept_tgt_off, n_rules + keep + 1)
        start[side] = n_rules
        for j in range(keep):
            r = lo + order[j]
            rules[n_rules] = r
            static[n_rules] = own[order[j]]
            length = tgt_off[r + 1] - tgt_off[r]
            kept_tgt = grow(kept_tgt, n_symbols + length)
            kept_lm_tgt = grow(kept_lm_tgt, n_symbols + length)
            for p in range(length):
                symbol = tgt_syms[tgt_off[r] + p]
                kept_tgt[n_symbols + p] = symbol
                kept_lm_tgt[n_symbols + p] = lm_of_target[symbol] if symbol >= 0 else symbol
            n_symbols += length
            n_rules += 1
            kept_tgt_off[n_rules] = n_symbols
        end[side] = n_rules
        ready[side] = True
    return rules, static, kept_tgt_off, kept_tgt, kept_lm_tgt, n_rules, n_symbols
