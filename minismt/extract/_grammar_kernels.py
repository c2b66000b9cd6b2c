"""Numba kernels that filter a Hiero grammar to input sentences (see
:mod:`minismt.extract.hiero_grammar`).

A rule's source side *matches* a sentence when its terminals occur in it in order and every
non-terminal covers at least one word between them (Moses' ``filter-rule-table hierarchical``).
:func:`source_patterns` enumerates, per sentence, every source side that matches it -- at most
``max_symbols`` symbols, at most ``max_nonterm`` non-terminals, at least one terminal -- as the
hash :func:`minismt.extract._hiero_kernels.side_hashes` gives a rule's source side, so that
filtering is a join of hashes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minismt._primitives import GOLDEN, grow, grow_rows
from minismt.extract._hiero_kernels import side_hash_end, side_hash_step


@njit(cache=True)
def sentence_matches(words, max_symbols, max_nonterm, consecutive_nonterm, max_span, out, spans,
                     record_spans):
    """Every way a source side can match a span of ``words`` (unknown words are negative and
    match nothing): the side's hash into ``out`` and, when ``record_spans``, the span and the
    non-terminals' sub-spans into ``spans`` (``int32`` rows ``start, end, nt1 start, nt1 end,
    nt2 start, nt2 end``, -1 for an absent non-terminal).  A span covers at most ``max_span``
    words.  One entry per match (a side matches a span in as many ways as its non-terminals can
    split it); returns the buffers and the number of entries."""
    n = words.shape[0]
    depth_cap = max_symbols + 1
    pos = np.zeros(depth_cap, dtype=np.int64)
    n_nt = np.zeros(depth_cap, dtype=np.int64)
    last_nt = np.zeros(depth_cap, dtype=np.bool_)
    has_t = np.zeros(depth_cap, dtype=np.bool_)
    h = np.zeros(depth_cap, dtype=np.uint64)
    choice = np.zeros(depth_cap, dtype=np.int64)
    nts = np.full((depth_cap, 4), -1, dtype=np.int64)
    count = 0
    for start in range(n):
        pos[0] = start
        n_nt[0] = 0
        last_nt[0] = False
        has_t[0] = False
        h[0] = GOLDEN
        choice[0] = 0
        nts[0, :] = -1
        d = 0
        while d >= 0:
            if d == max_symbols:
                d -= 1
                continue
            c = choice[d]
            choice[d] += 1
            p = pos[d]
            if c == 0:             # a terminal
                if p >= n or words[p] < 0 or p + 1 - start > max_span:
                    continue
                nxt = d + 1
                pos[nxt] = p + 1
                n_nt[nxt] = n_nt[d]
                last_nt[nxt] = False
                has_t[nxt] = True
                h[nxt] = side_hash_step(h[d], words[p])
                nts[nxt, :] = nts[d, :]
            else:                  # a non-terminal over c words
                if p + c > n or p + c - start > max_span or n_nt[d] >= max_nonterm or \
                        (last_nt[d] and not consecutive_nonterm):
                    d -= 1
                    continue
                nxt = d + 1
                pos[nxt] = p + c
                n_nt[nxt] = n_nt[d] + 1
                last_nt[nxt] = True
                has_t[nxt] = has_t[d]
                h[nxt] = side_hash_step(h[d], -1)
                nts[nxt, :] = nts[d, :]
                nts[nxt, 2 * n_nt[d]] = p
                nts[nxt, 2 * n_nt[d] + 1] = p + c
            choice[nxt] = 0
            if has_t[nxt]:
                out = grow(out, count + 1)
                out[count] = side_hash_end(h[nxt], nxt)
                if record_spans:
                    spans = grow_rows(spans, count + 1)
                    spans[count, 0] = start
                    spans[count, 1] = pos[nxt]
                    for k in range(4):
                        spans[count, 2 + k] = nts[nxt, k]
                count += 1
            d = nxt
    return out, spans, count


@njit(cache=True)
def source_patterns(ids, offsets, max_symbols, max_nonterm, consecutive_nonterm, max_span):
    """Every distinct (sentence, source-side hash) of the sentences ``ids[offsets[s]:offsets[s+1]]``
    (training-vocabulary ids, negative for unknown words) matching a span of at most ``max_span``
    words (``max_span <= 0``: any span): ``int64`` sentences and ``uint64`` hashes, sorted by
    sentence then hash."""
    n_sent = offsets.shape[0] - 1
    sent_out = np.empty(1024, dtype=np.int64)
    hash_out = np.empty(1024, dtype=np.uint64)
    buffer = np.empty(1024, dtype=np.uint64)
    no_spans = np.empty((0, 6), dtype=np.int32)
    total = 0
    for s in range(n_sent):
        words = ids[offsets[s]:offsets[s + 1]]
        span = max_span if max_span > 0 else words.shape[0] + 1
        buffer, no_spans, count = sentence_matches(words, max_symbols, max_nonterm,
                                                   consecutive_nonterm, span, buffer, no_spans, False)
        found = np.sort(buffer[:count])
        sent_out = grow(sent_out, total + count)
        hash_out = grow(hash_out, total + count)
        for k in range(count):
            if k == 0 or found[k] != found[k - 1]:
                sent_out[total] = s
                hash_out[total] = found[k]
                total += 1
    return sent_out[:total].copy(), hash_out[:total].copy()
