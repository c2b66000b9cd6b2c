"""Numba kernels for Hiero (SCFG) rule extraction as Moses ``extract-rules`` with its defaults.

See :mod:`minismt.extract.hiero` for what is computed; ``tests/hiero_reference.py`` is the slow
reference these kernels must agree with.

Kernels work on the flat arrays of :mod:`minismt.corpus`: word ids + ``int64`` sentence offsets
and alignment links ``int32[L, 2]`` (source, target) + ``int64`` offsets.  Links are taken in the
order given (Moses keeps the input order of the links of one target word in the rule alignment,
and repeated links); they must lie inside their sentence pair.

Two stages:

1. :func:`enumerate_occurrences` visits the initial phrase pairs and their hole sets in
   ``extract-rules``' order and writes one record per rule occurrence (``int32[N, 14]``, columns
   ``REC_*``): the sentence, the phrase pair ``(s1, s2, t1, t2)``, the number of holes ``k`` and
   up to two holes ``(s1, s2, t1, t2)`` in target order, plus the fractional weight ``1/n``.
2. :func:`render_occurrences` turns the records into the symbols of the rules: source symbols
   (word ids; the holes as ``-1`` / ``-2`` in *source* order), target symbols (word ids and the
   same ``-1`` / ``-2`` codes, which is the co-indexing), and the alignment as pairs of symbol
   positions in Moses' order (word links by target position, input order within one target word,
   then one pair per hole in target order).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from minismt._primitives import GOLDEN, grow, grow_rows, mix64
from minismt.extract._kernels import phrase_boxes

REC_SENT = 0
REC_P = 1      # phrase pair s1, s2, t1, t2 in columns 1..4
REC_K = 5      # number of holes
REC_H1 = 6     # first hole (target order) s1, s2, t1, t2 in columns 6..9
REC_H2 = 10    # second hole in columns 10..13
REC_WIDTH = 14

_SEP = np.uint64(0x632BE59BD9B4E019)


@njit(cache=True)
def _push(rec, w, n, sent, s1, s2, t1, t2, k, a_s1, a_s2, a_t1, a_t2, b_s1, b_s2, b_t1, b_t2):
    rec = grow_rows(rec, n + 1)
    w = grow(w, n + 1)
    rec[n, 0] = sent
    rec[n, 1] = s1
    rec[n, 2] = s2
    rec[n, 3] = t1
    rec[n, 4] = t2
    rec[n, 5] = k
    rec[n, 6] = a_s1
    rec[n, 7] = a_s2
    rec[n, 8] = a_t1
    rec[n, 9] = a_t2
    rec[n, 10] = b_s1
    rec[n, 11] = b_s2
    rec[n, 12] = b_t1
    rec[n, 13] = b_t2
    w[n] = 0.0
    return rec, w


@njit(cache=True)
def enumerate_occurrences(src_offsets, tgt_offsets, links, link_offsets, max_span,
                          max_symbols_source, max_symbols_target, max_nonterm, min_hole_source,
                          min_hole_target, min_words, nonterm_consec_source, require_aligned_word,
                          fractional_counting):
    """Every rule occurrence of the corpus, in sentence order and within a sentence in
    ``extract-rules``' order; returns ``(records int32[N, 14], weights float64[N])``.

    Initial phrase pairs: every target span ``[t1, t2]`` of at most ``max_span`` words with a link
    gives the source span ``[min_f, max_f]`` of its links; if no word there links outside the
    target span, the box and its loose variants (source start retreating over unaligned words,
    end advancing, at most ``max_span`` source words) are initial phrase pairs.  They are visited
    by target length, target start, then source start descending and source end ascending.  For
    each: the lexical rule (if it has at most ``max_symbols_*`` words), then the hole sets, a
    one-hole set before the two-hole sets that extend it; candidate holes are the initial phrase
    pairs inside it (not spanning its whole target side, at least ``min_hole_*`` words) in the order
    (t1, t2, -s1, s2).  Every rule of one phrase pair gets weight ``1/n`` (n its number of rules).
    """
    n_sent = src_offsets.shape[0] - 1
    rec = np.empty((1024, REC_WIDTH), dtype=np.int32)
    w = np.empty(1024, dtype=np.float64)
    n = 0
    cand = np.empty(64, dtype=np.int64)
    for s in range(n_sent):
        n_src = src_offsets[s + 1] - src_offsets[s]
        n_tgt = tgt_offsets[s + 1] - tgt_offsets[s]
        lo = link_offsets[s]
        hi = link_offsets[s + 1]
        if n_src == 0 or n_tgt == 0 or hi == lo:
            continue
        f_count = np.zeros(n_src, dtype=np.int32)
        f_min_e = np.full(n_src, n_tgt, dtype=np.int64)
        f_max_e = np.full(n_src, -1, dtype=np.int64)
        e_min_f = np.full(n_tgt, n_src, dtype=np.int64)
        e_max_f = np.full(n_tgt, -1, dtype=np.int64)
        for q in range(lo, hi):
            f = links[q, 0]
            e = links[q, 1]
            f_count[f] += 1
            f_min_e[f] = min(f_min_e[f], e)
            f_max_e[f] = max(f_max_e[f], e)
            e_min_f[e] = min(e_min_f[e], f)
            e_max_f[e] = max(e_max_f[e], f)
        aligned = np.zeros(n_tgt + 1, dtype=np.int64)  # prefix counts of aligned target words
        for e in range(n_tgt):
            aligned[e + 1] = aligned[e] + (1 if e_max_f[e] >= 0 else 0)

        # initial phrase pairs in the order (t1, t2, -s1, s2); rng_* index them by target span
        ph_s1, ph_s2, ph_t1, ph_t2, n_ph = phrase_boxes(n_src, n_tgt, f_count, f_min_e, f_max_e, e_min_f,
                                                        e_max_f, max_span)
        rng_lo = np.zeros((n_tgt, n_tgt), dtype=np.int64)
        rng_hi = np.zeros((n_tgt, n_tgt), dtype=np.int64)
        for p in range(n_ph - 1, -1, -1):
            rng_lo[ph_t1[p], ph_t2[p]] = p
        for p in range(n_ph):
            rng_hi[ph_t1[p], ph_t2[p]] = p + 1

        # the rules of each phrase pair, phrase pairs by target length first
        for t_len in range(1, min(n_tgt, max_span) + 1):
            for t1 in range(n_tgt - t_len + 1):
                t2 = t1 + t_len - 1
                for p in range(rng_lo[t1, t2], rng_hi[t1, t2]):
                    p_s1 = ph_s1[p]
                    p_s2 = ph_s2[p]
                    p_slen = p_s2 - p_s1 + 1
                    base = n
                    if p_slen <= max_symbols_source and t_len <= max_symbols_target:
                        rec, w = _push(rec, w, n, s, p_s1, p_s2, t1, t2, 0,
                                       -1, -1, -1, -1, -1, -1, -1, -1)
                        n += 1
                    if max_nonterm >= 1:
                        n_cand = 0
                        for a in range(t1, t2 + 1):
                            for b in range(a, t2 + 1):
                                if a == t1 and b == t2:
                                    continue
                                if b - a + 1 < min_hole_target:
                                    continue
                                for q in range(rng_lo[a, b], rng_hi[a, b]):
                                    if ph_s1[q] >= p_s1 and ph_s2[q] <= p_s2 and \
                                            ph_s2[q] - ph_s1[q] + 1 >= min_hole_source:
                                        cand = grow(cand, n_cand + 1)
                                        cand[n_cand] = q
                                        n_cand += 1
                        p_aligned = aligned[t2 + 1] - aligned[t1]
                        for i in range(n_cand):
                            h = cand[i]
                            a_s1 = ph_s1[h]
                            a_s2 = ph_s2[h]
                            a_t1 = ph_t1[h]
                            a_t2 = ph_t2[h]
                            a_slen = a_s2 - a_s1 + 1
                            a_tlen = a_t2 - a_t1 + 1
                            a_aligned = aligned[a_t2 + 1] - aligned[a_t1]
                            src_words = p_slen - a_slen
                            tgt_words = t_len - a_tlen
                            if src_words >= min_words and tgt_words >= min_words and \
                                    src_words + 1 <= max_symbols_source and \
                                    tgt_words + 1 <= max_symbols_target and \
                                    (not require_aligned_word or p_aligned - a_aligned > 0):
                                rec, w = _push(rec, w, n, s, p_s1, p_s2, t1, t2, 1,
                                               a_s1, a_s2, a_t1, a_t2, -1, -1, -1, -1)
                                n += 1
                            if max_nonterm < 2:
                                continue
                            for j in range(i + 1, n_cand):
                                g = cand[j]
                                b_s1 = ph_s1[g]
                                b_s2 = ph_s2[g]
                                b_t1 = ph_t1[g]
                                b_t2 = ph_t2[g]
                                if b_t1 <= a_t2:
                                    continue  # target overlap (b starts no earlier than a)
                                if not (a_s2 < b_s1 or b_s2 < a_s1):
                                    continue  # source overlap
                                if not nonterm_consec_source and (a_s2 + 1 == b_s1 or b_s2 + 1 == a_s1):
                                    continue
                                src_words2 = src_words - (b_s2 - b_s1 + 1)
                                tgt_words2 = tgt_words - (b_t2 - b_t1 + 1)
                                if src_words2 < min_words or tgt_words2 < min_words:
                                    continue
                                if src_words2 + 2 > max_symbols_source or tgt_words2 + 2 > max_symbols_target:
                                    continue
                                if require_aligned_word and \
                                        p_aligned - a_aligned - (aligned[b_t2 + 1] - aligned[b_t1]) <= 0:
                                    continue
                                rec, w = _push(rec, w, n, s, p_s1, p_s2, t1, t2, 2,
                                               a_s1, a_s2, a_t1, a_t2, b_s1, b_s2, b_t1, b_t2)
                                n += 1
                    if n > base:
                        weight = 1.0 / (n - base) if fractional_counting else 1.0
                        for r in range(base, n):
                            w[r] = weight
    return rec[:n].copy(), w[:n].copy()


@njit(cache=True)
def _sizes(rec, tgt_offsets, tgt_link_offsets):
    """Numbers of source symbols, target symbols and alignment pairs of each occurrence."""
    n = rec.shape[0]
    n_src = np.empty(n, dtype=np.int64)
    n_tgt = np.empty(n, dtype=np.int64)
    n_align = np.empty(n, dtype=np.int64)
    for r in range(n):
        base = tgt_offsets[rec[r, 0]]
        k = rec[r, REC_K]
        ns = rec[r, 2] - rec[r, 1] + 1 + k
        nt = rec[r, 4] - rec[r, 3] + 1 + k
        na = tgt_link_offsets[base + rec[r, 4] + 1] - tgt_link_offsets[base + rec[r, 3]] + k
        for h in range(k):
            c = REC_H1 + 4 * h
            ns -= rec[r, c + 1] - rec[r, c] + 1
            nt -= rec[r, c + 3] - rec[r, c + 2] + 1
            na -= tgt_link_offsets[base + rec[r, c + 3] + 1] - tgt_link_offsets[base + rec[r, c + 2]]
        n_src[r] = ns
        n_tgt[r] = nt
        n_align[r] = na
    return n_src, n_tgt, n_align


@njit(cache=True, parallel=True)
def render_occurrences(rec, src_ids, src_offsets, tgt_ids, tgt_offsets, tgt_link_src,
                       tgt_link_offsets):
    """The symbols and alignments of the occurrences ``rec`` (see the module docstring).

    ``tgt_link_src`` lists, for every target token of the corpus in order, the source positions
    linked to it in input order; token ``j`` (corpus-wide index) has entries
    ``tgt_link_offsets[j]:tgt_link_offsets[j+1]``.  Returns
    ``(src_syms, src_off, tgt_syms, tgt_off, align int16[K, 2], align_off)``."""
    n = rec.shape[0]
    n_src, n_tgt, n_align = _sizes(rec, tgt_offsets, tgt_link_offsets)
    src_off = np.zeros(n + 1, dtype=np.int64)
    tgt_off = np.zeros(n + 1, dtype=np.int64)
    align_off = np.zeros(n + 1, dtype=np.int64)
    for r in range(n):
        src_off[r + 1] = src_off[r] + n_src[r]
        tgt_off[r + 1] = tgt_off[r] + n_tgt[r]
        align_off[r + 1] = align_off[r] + n_align[r]
    src_syms = np.empty(src_off[n], dtype=np.int32)
    tgt_syms = np.empty(tgt_off[n], dtype=np.int32)
    align = np.empty((align_off[n], 2), dtype=np.int16)
    for r in prange(n):
        s = rec[r, 0]
        p_s1 = rec[r, 1]
        p_s2 = rec[r, 2]
        p_t1 = rec[r, 3]
        p_t2 = rec[r, 4]
        k = rec[r, REC_K]
        # holes in target order: h1 = columns 6..9, h2 = 10..13; source codes -1/-2 by source order
        code1 = -1
        code2 = -2
        if k == 2 and rec[r, REC_H2] < rec[r, REC_H1]:
            code1 = -2
            code2 = -1
        src_pos = np.empty(p_s2 - p_s1 + 1, dtype=np.int64)
        src_hole = np.zeros(2, dtype=np.int64)
        tgt_hole = np.zeros(2, dtype=np.int64)
        # source side
        out = src_off[r]
        pos = p_s1
        while pos <= p_s2:
            if k >= 1 and pos == rec[r, REC_H1]:
                src_hole[0] = out - src_off[r]
                src_syms[out] = code1
                pos = rec[r, REC_H1 + 1] + 1
            elif k >= 2 and pos == rec[r, REC_H2]:
                src_hole[1] = out - src_off[r]
                src_syms[out] = code2
                pos = rec[r, REC_H2 + 1] + 1
            else:
                src_pos[pos - p_s1] = out - src_off[r]
                src_syms[out] = src_ids[src_offsets[s] + pos]
                pos += 1
            out += 1
        # target side and the word links
        out = tgt_off[r]
        a = align_off[r]
        base = tgt_offsets[s]
        pos = p_t1
        while pos <= p_t2:
            if k >= 1 and pos == rec[r, REC_H1 + 2]:
                tgt_hole[0] = out - tgt_off[r]
                tgt_syms[out] = code1
                pos = rec[r, REC_H1 + 3] + 1
            elif k >= 2 and pos == rec[r, REC_H2 + 2]:
                tgt_hole[1] = out - tgt_off[r]
                tgt_syms[out] = code2
                pos = rec[r, REC_H2 + 3] + 1
            else:
                t_sym = out - tgt_off[r]
                tgt_syms[out] = tgt_ids[base + pos]
                for q in range(tgt_link_offsets[base + pos], tgt_link_offsets[base + pos + 1]):
                    align[a, 0] = src_pos[tgt_link_src[q] - p_s1]
                    align[a, 1] = t_sym
                    a += 1
                pos += 1
            out += 1
        for h in range(k):  # the co-indexing, holes in target order
            align[a, 0] = src_hole[h]
            align[a, 1] = tgt_hole[h]
            a += 1
    return src_syms, src_off, tgt_syms, tgt_off, align, align_off


@njit(cache=True, parallel=True)
def occurrence_hashes(src_syms, src_off, tgt_syms, tgt_off, align, align_off, sent, with_sentence):
    """A 64-bit hash of each occurrence's rule (source symbols, target symbols, alignment), and of
    its sentence too when ``with_sentence``."""
    n = src_off.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for r in prange(n):
        h = mix64(np.uint64(src_off[r + 1] - src_off[r]) + GOLDEN)
        for q in range(src_off[r], src_off[r + 1]):
            h = mix64(h ^ (np.uint64(src_syms[q] + 3) + _SEP))
        h = mix64(h ^ (np.uint64(tgt_off[r + 1] - tgt_off[r]) + GOLDEN))
        for q in range(tgt_off[r], tgt_off[r + 1]):
            h = mix64(h ^ (np.uint64(tgt_syms[q] + 3) + _SEP))
        h = mix64(h ^ (np.uint64(align_off[r + 1] - align_off[r]) + GOLDEN))
        for q in range(align_off[r], align_off[r + 1]):
            h = mix64(h ^ (np.uint64(align[q, 0] * 65536 + align[q, 1]) + _SEP))
        if with_sentence:
            h = mix64(h ^ (np.uint64(sent[r]) + GOLDEN))
        out[r] = h
    return out


@njit(cache=True)
def _same(a, b, src_syms, src_off, tgt_syms, tgt_off, align, align_off):
    if src_off[a + 1] - src_off[a] != src_off[b + 1] - src_off[b]:
        return False
    if tgt_off[a + 1] - tgt_off[a] != tgt_off[b + 1] - tgt_off[b]:
        return False
    if align_off[a + 1] - align_off[a] != align_off[b + 1] - align_off[b]:
        return False
    for q in range(src_off[a + 1] - src_off[a]):
        if src_syms[src_off[a] + q] != src_syms[src_off[b] + q]:
            return False
    for q in range(tgt_off[a + 1] - tgt_off[a]):
        if tgt_syms[tgt_off[a] + q] != tgt_syms[tgt_off[b] + q]:
            return False
    for q in range(align_off[a + 1] - align_off[a]):
        if align[align_off[a] + q, 0] != align[align_off[b] + q, 0] or \
                align[align_off[a] + q, 1] != align[align_off[b] + q, 1]:
            return False
    return True


@njit(cache=True)
def groups_match(group, rep, src_syms, src_off, tgt_syms, tgt_off, align, align_off):
    """True when every occurrence r has the same rule as ``rep[group[r]]`` (no hash collision)."""
    for r in range(group.shape[0]):
        if not _same(r, rep[group[r]], src_syms, src_off, tgt_syms, tgt_off, align, align_off):
            return False
    return True


@njit(cache=True)
def float32_sums(group, weight, n_groups):
    """Moses' counts: each occurrence's ``float(1.0 / n)`` added in single precision, in the order
    of the occurrences (extraction order)."""
    out = np.zeros(n_groups, dtype=np.float32)
    for r in range(group.shape[0]):
        out[group[r]] = out[group[r]] + np.float32(weight[r])
    return out


# ---- scoring (Moses ``score --Hierarchical`` + ``consolidate``) --------------------------------


@njit(cache=True)
def side_hash_step(h, symbol):
    """One symbol more in a rule side's hash (:func:`side_hashes`); a non-terminal is ``-1``."""
    if symbol < 0:
        symbol = -1
    return mix64(h ^ (np.uint64(symbol + 3) + _SEP))


@njit(cache=True)
def side_hash_end(h, length):
    """The hash of a rule side of ``length`` symbols from its chain of :func:`side_hash_step`."""
    return mix64(h ^ (np.uint64(length) + GOLDEN))


@njit(cache=True, parallel=True)
def side_hashes(syms, off):
    """A 64-bit hash of each rule side as Moses' ``score`` compares it: a string in which every
    non-terminal is the same ``[X][X]`` token (the co-indexing is not part of it).  Built left to
    right (``GOLDEN``, a step per symbol, the length last), so that the source patterns of an input
    sentence hash the same way as they are enumerated."""
    n = off.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for r in prange(n):
        h = GOLDEN
        for q in range(off[r], off[r + 1]):
            h = side_hash_step(h, syms[q])
        out[r] = side_hash_end(h, off[r + 1] - off[r])
    return out


@njit(cache=True)
def sides_match(group, rep, syms, off):
    """True when every rule side r equals side ``rep[group[r]]`` with the non-terminals made one
    token (no hash collision in :func:`side_hashes`)."""
    for r in range(group.shape[0]):
        b = rep[group[r]]
        if off[r + 1] - off[r] != off[b + 1] - off[b]:
            return False
        for q in range(off[r + 1] - off[r]):
            x = syms[off[r] + q]
            y = syms[off[b] + q]
            if x != y and not (x < 0 and y < 0):
                return False
    return True


@njit(cache=True)
def _position_sets(align, lo, hi, outer_col, sets):
    """The alignment pairs ``align[lo:hi]`` as one bit set per position of column ``outer_col``
    (0: source positions, 1: target positions) of the positions linked to it."""
    sets[:] = 0
    inner_col = 1 - outer_col
    for q in range(lo, hi):
        sets[align[q, outer_col]] |= np.uint64(1) << np.uint64(align[q, inner_col])


@njit(cache=True)
def _compare_sets(a, b):
    """Compare two bit sets as C++ compares ``std::set<size_t>``: sorted elements in order, a
    proper prefix first."""
    diff = a ^ b
    if diff == 0:
        return 0
    low = diff & (~diff + np.uint64(1))     # the lowest element in one set only
    above = ~(low | (low - np.uint64(1)))   # the elements greater than it
    if a & low:
        return 1 if (b & above) == 0 else -1
    return -1 if (a & above) == 0 else 1


@njit(cache=True)
def best_variants(rule_offsets, count, align, align_off, n_src, n_tgt):
    """For each rule (its alignment variants ``rule_offsets[r]:rule_offsets[r+1]``, each with its
    count) the variant Moses' ``ExtractionPhrasePair::FindBestAlignmentTargetToSource`` picks in the
    direct table (compared target-to-source) and in the inverse table (source-to-target): the
    highest count, ties to the greater alignment.  ``n_src``/``n_tgt``: symbols of each rule."""
    n_rules = rule_offsets.shape[0] - 1
    best_fwd = np.empty(n_rules, dtype=np.int64)
    best_inv = np.empty(n_rules, dtype=np.int64)
    sets_a = np.zeros(64, dtype=np.uint64)
    sets_b = np.zeros(64, dtype=np.uint64)
    for r in range(n_rules):
        lo = rule_offsets[r]
        for direction in range(2):
            outer_col = 1 if direction == 0 else 0
            n_outer = n_tgt[r] if direction == 0 else n_src[r]
            best = lo
            for v in range(lo + 1, rule_offsets[r + 1]):
                if count[v] < count[best]:
                    continue
                if count[v] == count[best]:
                    _position_sets(align, align_off[v], align_off[v + 1], outer_col, sets_a)
                    _position_sets(align, align_off[best], align_off[best + 1], outer_col, sets_b)
                    c = 0
                    for o in range(n_outer):
                        c = _compare_sets(sets_a[o], sets_b[o])
                        if c != 0:
                            break
                    if c <= 0:
                        continue
                best = v
            if direction == 0:
                best_fwd[r] = best
            else:
                best_inv[r] = best
    return best_fwd, best_inv


@njit(cache=True)
def _lookup(keys, values, key):
    """``values`` at ``key`` in the sorted ``keys``; 1.0 when absent (Moses' permissive lookup)."""
    pos = np.searchsorted(keys, key)
    if pos < keys.shape[0] and keys[pos] == key:
        return values[pos]
    return 1.0


@njit(cache=True)
def _lexical_weight(outer_syms, o0, n_outer, inner_syms, i0, sets, lex_keys, values, stride,
                    null_id, outer_is_target):
    """One direction of Moses' ``computeLexicalTranslation``: the product over the outer symbols
    of the mean table value over their linked inner symbols (``sets``), the NULL entry for an
    unlinked word; a non-terminal pair and a pair missing from the table count 1."""
    score = 1.0
    for o in range(n_outer):
        x = outer_syms[o0 + o]
        bits = sets[o]
        if bits == 0:
            key = np.int64(null_id) * stride + x if outer_is_target else np.int64(x) * stride + null_id
            score *= _lookup(lex_keys, values, key)
            continue
        total = 0.0
        linked = 0
        for i in range(64):
            if bits >> np.uint64(i) & np.uint64(1):
                y = inner_syms[i0 + i]
                if x >= 0 and y >= 0:
                    key = np.int64(y) * stride + x if outer_is_target else np.int64(x) * stride + y
                    total += _lookup(lex_keys, values, key)
                else:
                    total += 1.0
                linked += 1
        score *= total / linked
    return score


@njit(cache=True)
def lexical_weights(src_syms, src_off, tgt_syms, tgt_off, align, align_off, variant_fwd,
                    variant_inv, lex_keys, w_e_given_f, w_f_given_e, n_src_words, n_tgt_words):
    """lex(e|f) and lex(f|e) of each rule (Koehn, Och & Marcu 2003 over the rule's symbols, as
    Moses' ``computeLexicalTranslation`` with ``--Hierarchical``): the product over the target
    symbols (source symbols for lex(f|e)) of the mean ``w`` over the linked symbols, ``w(.|NULL)``
    for an unlinked word; a non-terminal pair and a pair missing from the table count 1.  Rule r
    uses the alignment of variant ``variant_fwd[r]`` for lex(e|f), ``variant_inv[r]`` for
    lex(f|e).  The table is keyed ``f * (n_tgt_words + 1) + e`` with NULL as id ``n_*_words``."""
    n = src_off.shape[0] - 1
    lex_ef = np.empty(n, dtype=np.float64)
    lex_fe = np.empty(n, dtype=np.float64)
    stride = np.int64(n_tgt_words + 1)
    sets = np.zeros(64, dtype=np.uint64)
    for r in range(n):
        n_src = src_off[r + 1] - src_off[r]
        n_tgt = tgt_off[r + 1] - tgt_off[r]
        v = variant_fwd[r]
        _position_sets(align, align_off[v], align_off[v + 1], 1, sets)
        lex_ef[r] = _lexical_weight(tgt_syms, tgt_off[r], n_tgt, src_syms, src_off[r], sets,
                                    lex_keys, w_e_given_f, stride, n_src_words, True)
        v = variant_inv[r]
        _position_sets(align, align_off[v], align_off[v + 1], 0, sets)
        lex_fe[r] = _lexical_weight(src_syms, src_off[r], n_src, tgt_syms, tgt_off[r], sets,
                                    lex_keys, w_f_given_e, stride, n_tgt_words, False)
    return lex_ef, lex_fe


# ---- sparse rule features (minismt.extract.hiero_features) -------------------------------------

BIGRAM_START = -3   # <r> before a rule side's first symbol
BIGRAM_END = -4     # </r> after its last


@njit(cache=True)
def _shape_bits(syms, lo, hi):
    """cdec's rule shape of one side: the slots (words, non-terminal, words, non-terminal, words)
    with bit k set when slot k is filled; -1 when the side has more than two non-terminals."""
    bits = 0
    slot = 0
    i = lo
    while i < hi:
        if slot % 2 == 0:
            if syms[i] >= 0:
                bits |= 1 << slot
                while i < hi and syms[i] >= 0:
                    i += 1
            slot += 1
        else:
            if syms[i] >= 0:
                return -1
            bits |= 1 << slot
            i += 1
            slot += 1
        if slot > 5:
            return -1
    return bits


@njit(cache=True)
def rule_shapes(src_syms, src_off, tgt_syms, tgt_off, rows):
    """The shape code ``source bits + 32 * target bits`` of each rule of ``rows``."""
    out = np.empty(rows.shape[0], dtype=np.int64)
    for k in range(rows.shape[0]):
        r = rows[k]
        s = _shape_bits(src_syms, src_off[r], src_off[r + 1])
        t = _shape_bits(tgt_syms, tgt_off[r], tgt_off[r + 1])
        out[k] = -1 if s < 0 or t < 0 else s + 32 * t
    return out


@njit(cache=True)
def side_bigrams(syms, off, rows):
    """The bigrams of each rule side of ``rows`` framed by ``<r>`` ... ``</r>``: ``(k, a, b)`` with
    k the position in ``rows`` and a non-terminal as -1 (cdec's RuleNgramFeatures)."""
    total = 0
    for k in range(rows.shape[0]):
        total += off[rows[k] + 1] - off[rows[k]] + 1
    out = np.empty((total, 3), dtype=np.int64)
    n = 0
    for k in range(rows.shape[0]):
        r = rows[k]
        prev = BIGRAM_START
        for q in range(off[r], off[r + 1]):
            cur = syms[q] if syms[q] >= 0 else -1
            out[n, 0] = k
            out[n, 1] = prev
            out[n, 2] = cur
            n += 1
            prev = cur
        out[n, 0] = k
        out[n, 1] = prev
        out[n, 2] = BIGRAM_END
        n += 1
    return out
