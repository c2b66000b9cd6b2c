"""Kernels of :func:`minismt.decode.options.collect_options`: a sentence's translation options in a few calls.

A sentence has a few hundred options; built from NumPy expressions, each of them a call of a few
microseconds, the collection took about a millisecond, a tenth of a phrase-based sentence's decoding at
stack 100. These kernels lay the options out, fill their words and stateless features, order them and gather
the kept ones, each in one pass. The logarithms of the table's probabilities and the weighted future score
stay NumPy's (:mod:`minismt.decode.options`), so every value is the one NumPy computes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minismt.decode._kernels import forward_classes, phrase_lm
from minismt.extract._kernels import row_positions


@njit(cache=True)
def option_layout(span_src, row_offsets, tgt_offsets):
    """Every option of a sentence before the table limit: for each span (start-major, then length) whose
    source phrase ``span_src[s, l-1]`` the table holds, its rows in table order; then one pass-through option
    for each word with no phrase of its own. Returns ``start``, ``length`` (int32), ``row`` (int64, -1 for a
    pass-through) and the CSR ``offsets`` of their target words (a pass-through copies one word)."""
    n, max_len = span_src.shape
    total = 0
    for s in range(n):
        if span_src[s, 0] < 0:
            total += 1
        for j in range(max_len):
            u = span_src[s, j]
            if u >= 0:
                total += row_offsets[u + 1] - row_offsets[u]
    start = np.empty(total, np.int32)
    length = np.empty(total, np.int32)
    row = np.empty(total, np.int64)
    offsets = np.empty(total + 1, np.int64)
    offsets[0] = 0
    o = 0
    for s in range(n):
        for j in range(max_len):
            u = span_src[s, j]
            if u >= 0:
                for r in range(row_offsets[u], row_offsets[u + 1]):
                    start[o] = s
                    length[o] = j + 1
                    row[o] = r
                    offsets[o + 1] = offsets[o] + tgt_offsets[r + 1] - tgt_offsets[r]
                    o += 1
    for s in range(n):
        if span_src[s, 0] < 0:
            start[o] = s
            length[o] = 1
            row[o] = -1
            offsets[o + 1] = offsets[o] + 1
            o += 1
    return start, length, row, offsets


@njit(cache=True)
def option_words(row, offsets, table_words, table_offsets, tgt_to_lm, copied, copied_lm, tgt, lm_ids):
    """``tgt`` and ``lm_ids`` (CSR by ``offsets``): a table row's target words and their LM ids; the
    pass-through options, in order, take ``copied[k]`` and ``copied_lm[k]``."""
    k = 0
    for o in range(row.shape[0]):
        r = row[o]
        if r < 0:
            tgt[offsets[o]] = copied[k]
            lm_ids[offsets[o]] = copied_lm[k]
            k += 1
        else:
            first = table_offsets[r]
            for i in range(offsets[o + 1] - offsets[o]):
                word = table_words[first + i]
                tgt[offsets[o] + i] = word
                lm_ids[offsets[o] + i] = tgt_to_lm[word]


@njit(cache=True)
def option_scores(tm_logs, reordering_logs, log_floor, lm_tables, lm_ids, offsets, row, lm_bounds, dense, tm_col,
                  wp_col, pp_col, uwp_col, unknown_score, reordering, estimate, inner, st_words, st_backs, st_len,
                  bound, fwd_class):
    """The options' stateless features and reordering scores: the table's log probabilities ``tm_logs`` and
    ``reordering_logs`` (one row per table option, which come first; NumPy's logarithms) floored at
    ``log_floor`` into ``dense[:, tm_col:tm_col+4]`` and ``reordering`` (a pass-through keeps zeros there),
    the word and phrase penalties, each pass-through's unknown-word penalty; the LM scores of
    :func:`~minismt.decode._kernels.phrase_lm`, ``bound`` (``inner`` plus the LM bound of each word before the
    C-th, whose context the phrase does not fix) and the forward reordering classes."""
    c = st_words.shape[1]
    for o in range(tm_logs.shape[0]):
        for j in range(tm_logs.shape[1]):
            dense[o, tm_col + j] = _floored(tm_logs[o, j], log_floor)
    for o in range(reordering_logs.shape[0]):
        for j in range(reordering_logs.shape[1]):
            reordering[o, j] = _floored(reordering_logs[o, j], log_floor)
    for o in range(row.shape[0]):
        dense[o, wp_col] = -(offsets[o + 1] - offsets[o])
        dense[o, pp_col] = 1.0
        if row[o] < 0:
            dense[o, uwp_col] = unknown_score
    phrase_lm(lm_tables, lm_ids, offsets, estimate, inner, st_words, st_backs, st_len)
    for o in range(row.shape[0]):
        head = 0.0
        for p in range(offsets[o], min(offsets[o] + c, offsets[o + 1])):
            head += lm_bounds[lm_ids[p]]
        bound[o] = inner[o] + head
    forward_classes(reordering, fwd_class)


@njit(cache=True)
def _floored(value, floor):
    """``np.maximum(value, floor)``: a NaN stays NaN."""
    return value if value >= floor or value != value else floor


@njit(cache=True)
def option_order(start, length, future, max_length, table_limit):
    """The options kept and their order: by span (start, then length), best ``future`` first within a span,
    ties in collection order (a stable sort, as ``np.lexsort((-future, span))``), at most ``table_limit`` of
    each span (0: all)."""
    n_spans = (np.int64(start.max()) + 1) * max_length if start.shape[0] else 0
    first = np.zeros(n_spans + 1, np.int64)
    for o in range(start.shape[0]):
        first[start[o] * max_length + length[o]] += 1  # the span's key + 1: counts become starts
    for k in range(n_spans):
        first[k + 1] += first[k]
    order = np.empty(start.shape[0], np.int64)
    filled = first[:-1].copy()
    for o in range(start.shape[0]):
        key = start[o] * max_length + length[o] - 1
        i = filled[key]
        while i > first[key] and -future[order[i - 1]] > -future[o]:  # insertion: stable, few per span
            order[i] = order[i - 1]
            i -= 1
        order[i] = o
        filled[key] += 1
    if table_limit <= 0:
        return order
    keep = np.empty(start.shape[0], np.int64)
    n_kept = 0
    for key in range(n_spans):
        for i in range(first[key], min(first[key + 1], first[key] + table_limit)):
            keep[n_kept] = order[i]
            n_kept += 1
    return keep[:n_kept]


@njit(cache=True)
def span_index(n, max_length, start, end):
    """``lo[s, l-1]:hi[s, l-1]``: the options of span (s, l), for options sorted by span."""
    lo = np.zeros((n, max_length), np.int64)
    hi = np.zeros((n, max_length), np.int64)
    counts = np.zeros(n * max_length + 1, np.int64)
    for o in range(start.shape[0]):
        counts[start[o] * max_length + (end[o] - start[o])] += 1
    for key in range(n * max_length):
        counts[key + 1] += counts[key]
        lo[key // max_length, key % max_length] = counts[key]
        hi[key // max_length, key % max_length] = counts[key + 1]
    return lo, hi


@njit(cache=True)
def gather_options(keep, n, max_length, start, end, row, offsets, tgt, lm_ids, dense, reordering, fwd_class,
                   estimate, inner, st_words, st_backs, st_len, bound, future):
    """The options at ``keep`` (sorted by span): every array of :class:`~minismt.decode.options.TranslationOptions`
    taken, the target words re-offset, and the span index."""
    positions, taken = row_positions(offsets, keep)
    kept_start, kept_end = start[keep], end[keep]
    lo, hi = span_index(n, max_length, kept_start, kept_end)
    return (kept_start, kept_end, row[keep], taken, tgt[positions], lm_ids[positions], dense[keep], reordering[keep],
            fwd_class[keep], estimate[keep], inner[keep], st_words[keep], st_backs[keep], st_len[keep], bound[keep],
            future[keep], lo, hi)
