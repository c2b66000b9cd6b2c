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

from minismt._primitives import GOLDEN, grow
from minismt.extract._hiero_kernels import side_hash_end, side_hash_step


@njit(cache=True)
def _sentence_patterns(words, max_symbols, max_nonterm, consecutive_nonterm, out):
    """The hashes of the source sides matching ``words`` (unknown words are negative and match
    nothing), with repeats; returns the buffer and how many were written."""
    n = words.shape[0]
    depth_cap = max_symbols + 1
    pos = np.zeros(depth_cap, dtype=np.int64)
    n_nt = np.zeros(depth_cap, dtype=np.int64)
    last_nt = np.zeros(depth_cap, dtype=np.bool_)
    has_t = np.zeros(depth_cap, dtype=np.bool_)
    h = np.zeros(depth_cap, dtype=np.uint64)
    choice = np.zeros(depth_cap, dtype=np.int64)
    count = 0
    for start in range(n):
        pos[0] = start
        n_nt[0] = 0
        last_nt[0] = False
        has_t[0] = False
        h[0] = GOLDEN
        choice[0] = 0
        d = 0
        while d >= 0:
            if d == max_symbols:
                d -= 1
                continue
            c = choice[d]
            choice[d] += 1
            p = pos[d]
            if c == 0:             # a terminal
                if p >= n or words[p] < 0:
                    continue
                nxt = d + 1
                pos[nxt] = p + 1
                n_nt[nxt] = n_nt[d]
                last_nt[nxt] = False
                has_t[nxt] = True
                h[nxt] = side_hash_step(h[d], words[p])
            else:                  # a non-terminal over c words
                if p + c > n or n_nt[d] >= max_nonterm or (last_nt[d] and not consecutive_nonterm):
                    d -= 1
                    continue
                nxt = d + 1
                pos[nxt] = p + c
                n_nt[nxt] = n_nt[d] + 1
                last_nt[nxt] = True
                has_t[nxt] = has_t[d]
                h[nxt] = side_hash_step(h[d], -1)
            choice[nxt] = 0
            if has_t[nxt]:
                out = grow(out, count + 1)
                out[count] = side_hash_end(h[nxt], nxt)
                count += 1
            d = nxt
    return out, count


@njit(cache=True)
def source_patterns(ids, offsets, max_symbols, max_nonterm, consecutive_nonterm):
    """Every distinct (sentence, source-side hash) of the sentences ``ids[offsets[s]:offsets[s+1]]``
    (training-vocabulary ids, negative for unknown words): ``int64`` sentences and ``uint64``
    hashes, sorted by sentence then hash."""
    n_sent = offsets.shape[0] - 1
    sent_out = np.empty(1024, dtype=np.int64)
    hash_out = np.empty(1024, dtype=np.uint64)
    buffer = np.empty(1024, dtype=np.uint64)
    total = 0
    for s in range(n_sent):
        buffer, count = _sentence_patterns(ids[offsets[s]:offsets[s + 1]], max_symbols,
                                           max_nonterm, consecutive_nonterm, buffer)
        found = np.sort(buffer[:count])
        sent_out = grow(sent_out, total + count)
        hash_out = grow(hash_out, total + count)
        for k in range(count):
            if k == 0 or found[k] != found[k - 1]:
                sent_out[total] = s
                hash_out[total] = found[k]
                total += 1
    return sent_out[:total].copy(), hash_out[:total].copy()
