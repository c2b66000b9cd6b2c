"""Numba kernels for phrase-table training: phrase-pair extraction with word-based
orientations, phrase hashing, the most frequent word alignment of a phrase pair, and the
lexical weights of Koehn, Och & Marcu (2003).

Kernels work on the flat arrays of :mod:`minismt.corpus` (word ids + offsets, alignment
links + offsets) and assume validated input: links sorted by (source, target) position
within a sentence, without duplicates, inside the sentence.

The word alignment inside a phrase pair is a ``uint64`` mask with bit ``8*i + j`` set for
the link between relative source position ``i`` and relative target position ``j``; this
is why phrases are at most :data:`MAX_PHRASE_LENGTH` words long.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from minismt._primitives import GOLDEN, grow, mix64, mix_in

MAX_PHRASE_LENGTH = 8

MONO = 0
SWAP = 1
DISCONTINUOUS = 2

_ONE = np.uint64(1)
_BYTE = np.uint64(0xFF)


def _set_codes() -> np.ndarray:
    """Order-preserving codes of the subsets of {0..7}: comparing codes compares the sets
    as sorted sequences (C++ ``std::set`` order: element by element, a prefix first)."""
    codes = np.zeros(256, dtype=np.int64)
    for bits in range(256):
        code = 0
        digits = 0
        for element in range(8):
            if bits >> element & 1:
                code = code * 9 + element + 1
                digits += 1
        codes[bits] = code * 9 ** (8 - digits)
    return codes


SET_CODES = _set_codes()


@njit(cache=True)
def range_positions(starts, lengths):
    """The positions of the ranges ``starts[k] .. starts[k] + lengths[k] - 1``, in order, and the
    ranges' offsets among them (:func:`minismt.extract.phrases.gather_ranges`)."""
    n = lengths.shape[0]
    offsets = np.zeros(n + 1, dtype=np.int64)
    for k in range(n):
        offsets[k + 1] = offsets[k] + lengths[k]
    positions = np.empty(offsets[n], dtype=np.int64)
    for k in range(n):
        for i in range(lengths[k]):
            positions[offsets[k] + i] = starts[k] + i
    return positions, offsets


@njit(cache=True)
def row_positions(offsets, rows):
    """:func:`range_positions` of the rows ``offsets[r]:offsets[r+1]`` for r in ``rows``
    (:func:`minismt.extract.phrase_table.take_ranges`)."""
    starts = np.empty(rows.shape[0], dtype=np.int64)
    lengths = np.empty(rows.shape[0], dtype=np.int64)
    for k in range(rows.shape[0]):
        starts[k] = offsets[rows[k]]
        lengths[k] = offsets[rows[k] + 1] - starts[k]
    return range_positions(starts, lengths)


@njit(cache=True)
def _is_aligned(matrix, n_src, n_tgt, f, e):
    """Moses ``isAligned``: the corners (-1, -1) and (I, J) count as aligned."""
    if f == -1 and e == -1:
        return True
    if f < 0 or e < 0:
        return False
    if f == n_src and e == n_tgt:
        return True
    if f >= n_src or e >= n_tgt:
        return False
    return matrix[f, e] != 0


@njit(cache=True)
def _orientation(left_top, right_top):
    """Moses ``getOrientWordModel`` for msd: mono, swap, else discontinuous."""
    if left_top and not right_top:
        return MONO
    if right_top and not left_top:
        return SWAP
    return DISCONTINUOUS


@njit(cache=True)
def _sentence_phrase_pairs(s, src_offsets, tgt_offsets, links, link_offsets, max_length, fill,
                           base, out_sent, out_src_start, out_src_len, out_tgt_start,
                           out_tgt_len, out_prev, out_next, out_mask):
    """Phrase pairs of sentence pair ``s`` as Moses' ``extract`` finds them (:func:`phrase_boxes`);
    returns their number. With ``fill`` the pairs are written from index ``base``: sentence, spans,
    backward and forward word-based orientations and the alignment mask.
    """
    n_src = src_offsets[s + 1] - src_offsets[s]
    n_tgt = tgt_offsets[s + 1] - tgt_offsets[s]
    lo = link_offsets[s]
    hi = link_offsets[s + 1]
    if n_src == 0 or n_tgt == 0 or hi == lo:
        return 0
    matrix = np.zeros((n_src, n_tgt), dtype=np.uint8)
    f_count = np.zeros(n_src, dtype=np.int32)
    f_min_e = np.full(n_src, n_tgt, dtype=np.int32)
    f_max_e = np.full(n_src, -1, dtype=np.int32)
    e_min_f = np.full(n_tgt, n_src, dtype=np.int32)
    e_max_f = np.full(n_tgt, -1, dtype=np.int32)
    e_start = np.zeros(n_tgt + 1, dtype=np.int32)
    for k in range(lo, hi):
        f = links[k, 0]
        e = links[k, 1]
        matrix[f, e] = 1
        f_count[f] += 1
        f_min_e[f] = min(f_min_e[f], e)
        f_max_e[f] = max(f_max_e[f], e)
        e_min_f[e] = min(e_min_f[e], f)
        e_max_f[e] = max(e_max_f[e], f)
        e_start[e + 1] += 1
    for e in range(n_tgt):
        e_start[e + 1] += e_start[e]
    # source positions of each target word, ascending (links are sorted by source position)
    e_src = np.empty(hi - lo, dtype=np.int32)
    e_fill = e_start[:n_tgt].copy()
    for k in range(lo, hi):
        e = links[k, 1]
        e_src[e_fill[e]] = links[k, 0]
        e_fill[e] += 1

    box_s1, box_s2, box_t1, box_t2, count = phrase_boxes(n_src, n_tgt, f_count, f_min_e, f_max_e, e_min_f,
                                                         e_max_f, max_length)
    if fill:
        for b in range(count):
            start_f, end_f, es, ee = box_s1[b], box_s2[b], box_t1[b], box_t2[b]
            idx = base + b
            out_sent[idx] = s
            out_src_start[idx] = start_f
            out_src_len[idx] = end_f - start_f + 1
            out_tgt_start[idx] = es
            out_tgt_len[idx] = ee - es + 1
            out_prev[idx] = _orientation(
                _is_aligned(matrix, n_src, n_tgt, start_f - 1, es - 1),
                _is_aligned(matrix, n_src, n_tgt, end_f + 1, es - 1))
            out_next[idx] = _orientation(
                _is_aligned(matrix, n_src, n_tgt, end_f + 1, ee + 1),
                _is_aligned(matrix, n_src, n_tgt, start_f - 1, ee + 1))
            mask = np.uint64(0)
            for e in range(es, ee + 1):
                for k in range(e_start[e], e_start[e + 1]):
                    bit = np.uint64(8 * (e_src[k] - start_f) + (e - es))
                    mask |= _ONE << bit
            out_mask[idx] = mask
    return count


@njit(cache=True)
def phrase_boxes(n_src, n_tgt, f_count, f_min_e, f_max_e, e_min_f, e_max_f, max_length):
    """The phrase pairs of one sentence pair as Moses' ``extract`` (and ``extract-rules``) find them:
    ``(s1, s2, t1, t2, n)``, inclusive spans in the order (t1, t2, -s1, s2).

    Loops as ``ExtractTask::extract``: every target span ``[t1, t2]`` of at most ``max_length`` words
    with at least one link gives the source span ``[min_f, max_f]`` of its links; if no source word
    there links outside ``[t1, t2]``, the source span is extended over unaligned words on both sides
    (at most ``max_length`` words). ``f_count``, ``f_min_e`` ... are each word's number of links and
    the smallest and largest position it links to (-1 / the other side's length when unaligned).
    """
    box_s1 = np.empty(16, dtype=np.int32)
    box_s2 = np.empty(16, dtype=np.int32)
    box_t1 = np.empty(16, dtype=np.int32)
    box_t2 = np.empty(16, dtype=np.int32)
    n = 0
    for es in range(n_tgt):
        min_f = n_src
        max_f = -1
        for ee in range(es, min(n_tgt, es + max_length)):
            if e_max_f[ee] >= 0:
                min_f = min(min_f, e_min_f[ee])
                max_f = max(max_f, e_max_f[ee])
            if max_f < 0:
                continue
            if max_f - min_f >= max_length:
                break  # the source span only grows with ee
            consistent = True
            for f in range(min_f, max_f + 1):
                if f_count[f] > 0 and (f_min_e[f] < es or f_max_e[f] > ee):
                    consistent = False
                    break
            if not consistent:
                continue
            start_f = min_f
            while start_f >= 0 and start_f > max_f - max_length and \
                    (start_f == min_f or f_count[start_f] == 0):
                end_f = max_f
                while end_f < n_src and end_f < start_f + max_length and \
                        (end_f == max_f or f_count[end_f] == 0):
                    box_s1 = grow(box_s1, n + 1)
                    box_s2 = grow(box_s2, n + 1)
                    box_t1 = grow(box_t1, n + 1)
                    box_t2 = grow(box_t2, n + 1)
                    box_s1[n] = start_f
                    box_s2[n] = end_f
                    box_t1[n] = es
                    box_t2[n] = ee
                    n += 1
                    end_f += 1
                start_f -= 1
    return box_s1, box_s2, box_t1, box_t2, n


@njit(cache=True, parallel=True)
def extract_phrase_pairs(src_offsets, tgt_offsets, links, link_offsets, max_length):
    """All phrase pairs of a corpus, in sentence order (two passes: count, then fill).

    Returns ``(sentence, src_start, src_len, tgt_start, tgt_len, backward, forward, mask)``,
    one entry per extracted occurrence; orientations are :data:`MONO`, :data:`SWAP`,
    :data:`DISCONTINUOUS` relative to the previous (backward) and next (forward) phrase.
    """
    n_sent = src_offsets.shape[0] - 1
    counts = np.zeros(n_sent, dtype=np.int64)
    no_i32 = np.zeros(0, dtype=np.int32)
    no_i8 = np.zeros(0, dtype=np.int8)
    no_u64 = np.zeros(0, dtype=np.uint64)
    for s in prange(n_sent):
        counts[s] = _sentence_phrase_pairs(s, src_offsets, tgt_offsets, links, link_offsets,
                                           max_length, False, 0, no_i32, no_i32, no_i8, no_i32,
                                           no_i8, no_i8, no_i8, no_u64)
    starts = np.zeros(n_sent + 1, dtype=np.int64)
    for s in range(n_sent):
        starts[s + 1] = starts[s] + counts[s]
    total = starts[n_sent]
    sent = np.empty(total, dtype=np.int32)
    src_start = np.empty(total, dtype=np.int32)
    src_len = np.empty(total, dtype=np.int8)
    tgt_start = np.empty(total, dtype=np.int32)
    tgt_len = np.empty(total, dtype=np.int8)
    backward = np.empty(total, dtype=np.int8)
    forward = np.empty(total, dtype=np.int8)
    mask = np.empty(total, dtype=np.uint64)
    for s in prange(n_sent):
        _sentence_phrase_pairs(s, src_offsets, tgt_offsets, links, link_offsets, max_length,
                               True, starts[s], sent, src_start, src_len, tgt_start, tgt_len,
                               backward, forward, mask)
    return sent, src_start, src_len, tgt_start, tgt_len, backward, forward, mask


@njit(cache=True)
def orientation_counts(pair_of, backward, forward, n_pairs):
    """``int32[P, 6]``: per pair, the occurrences with each backward orientation (columns
    0-2: mono, swap, discontinuous) and each forward orientation (columns 3-5)."""
    counts = np.zeros((n_pairs, 6), dtype=np.int32)
    for k in range(pair_of.shape[0]):
        counts[pair_of[k], backward[k]] += 1
        counts[pair_of[k], 3 + forward[k]] += 1
    return counts


@njit(cache=True)
def span_hashes(words, offsets, row, start, length):
    """64-bit hash of each span ``words[offsets[row[k]] + start[k]:][:length[k]]``."""
    n = row.shape[0]
    out = np.empty(n, dtype=np.uint64)
    for k in range(n):
        first = offsets[row[k]] + start[k]
        h = mix64(np.uint64(length[k]) + GOLDEN)
        for t in range(length[k]):
            h = mix64(h ^ (np.uint64(words[first + t]) + np.uint64(0x632BE59BD9B4E019)))
        out[k] = h
    return out


@njit(cache=True)
def spans_match(words, offsets, row, start, length, other):
    """True when every span k has the same words as span ``other[k]``."""
    for k in range(row.shape[0]):
        o = other[k]
        if length[k] != length[o]:
            return False
        a = offsets[row[k]] + start[k]
        b = offsets[row[o]] + start[o]
        for t in range(length[k]):
            if words[a + t] != words[b + t]:
                return False
    return True


@njit(cache=True)
def _subset(mask, outer, target_major):
    """The word positions linked to target position ``outer`` (``target_major``) or to
    source position ``outer``, as an 8-bit set."""
    if not target_major:
        return (mask >> np.uint64(8 * outer)) & _BYTE
    bits = np.uint64(0)
    for i in range(8):
        if (mask >> np.uint64(8 * i + outer)) & _ONE:
            bits |= _ONE << np.uint64(i)
    return bits


@njit(cache=True)
def _compare_alignments(a, b, n_outer, target_major):
    """Compare two alignments as Moses compares its ``vector<set<size_t>>``: target
    positions (or source positions) in order, each a sorted set of linked positions."""
    for o in range(n_outer):
        code_a = SET_CODES[_subset(a, o, target_major)]
        code_b = SET_CODES[_subset(b, o, target_major)]
        if code_a != code_b:
            return 1 if code_a > code_b else -1
    return 0


@njit(cache=True)
def best_alignments(group_offsets, group_mask, group_count, src_len, tgt_len):
    """Most frequent word alignment of each phrase pair, as Moses'
    ``ExtractionPhrasePair::FindBestAlignmentTargetToSource``: the highest count, ties to
    the greater alignment.

    Pair ``p`` has the distinct alignments ``group_offsets[p]:group_offsets[p+1]``. Moses
    picks the alignment of the direct phrase table (lex(e|f), the printed alignment) in
    target-to-source form and that of the inverse table (lex(f|e)) in source-to-target
    form, so ties can resolve differently: both indices are returned.
    """
    n_pairs = group_offsets.shape[0] - 1
    best_t2s = np.empty(n_pairs, dtype=np.int64)
    best_s2t = np.empty(n_pairs, dtype=np.int64)
    for p in range(n_pairs):
        first = group_offsets[p]
        bt = first
        bs = first
        for g in range(first + 1, group_offsets[p + 1]):
            c = group_count[g]
            if c > group_count[bt] or (c == group_count[bt] and _compare_alignments(
                    group_mask[g], group_mask[bt], tgt_len[p], True) > 0):
                bt = g
            if c > group_count[bs] or (c == group_count[bs] and _compare_alignments(
                    group_mask[g], group_mask[bs], src_len[p], False) > 0):
                bs = g
        best_t2s[p] = bt
        best_s2t[p] = bs
    return best_t2s, best_s2t


@njit(cache=True)
def lexical_weights(t2s_sent, t2s_src_start, t2s_tgt_start, s2t_sent, s2t_src_start,
                    s2t_tgt_start, src_len, tgt_len, src_offsets, tgt_offsets, links,
                    link_offsets, link_w_e_given_f, link_w_f_given_e, tgt_w_null, src_w_null):
    """lex(e|f) and lex(f|e) of each phrase pair (Koehn, Och & Marcu 2003; Moses
    ``computeLexicalTranslation``).

    lex(e|f, a) = prod_j [1/|{i: (i,j) in a}| sum_{(i,j) in a} w(e_j|f_i)], with
    w(e_j|NULL) for a target word without links; lex(f|e, a) likewise with the roles
    swapped. The alignment a of pair p for lex(e|f) is that of an occurrence in sentence
    ``t2s_sent[p]`` at source/target start ``t2s_src_start[p]``/``t2s_tgt_start[p]``: its
    corpus links inside the pair, whose w values are ``link_w_e_given_f``/``link_w_f_given_e``
    (one per corpus link); ``tgt_w_null``/``src_w_null`` hold w(e|NULL)/w(f|NULL) per corpus
    token. Sums run over linked positions in increasing order, as Moses' sets.
    """
    n = src_len.shape[0]
    lex_ef = np.empty(n, dtype=np.float64)
    lex_fe = np.empty(n, dtype=np.float64)
    total = np.zeros(MAX_PHRASE_LENGTH, dtype=np.float64)
    linked = np.zeros(MAX_PHRASE_LENGTH, dtype=np.int64)
    for p in range(n):
        n_src = src_len[p]
        n_tgt = tgt_len[p]
        # lex(e|f): links sorted by source position, so each target word sums in source order
        s = t2s_sent[p]
        fs = t2s_src_start[p]
        es = t2s_tgt_start[p]
        total[:n_tgt] = 0.0
        linked[:n_tgt] = 0
        for k in range(link_offsets[s], link_offsets[s + 1]):
            i = links[k, 0] - fs
            j = links[k, 1] - es
            if 0 <= i < n_src and 0 <= j < n_tgt:
                total[j] += link_w_e_given_f[k]
                linked[j] += 1
        score = 1.0
        for j in range(n_tgt):
            if linked[j] == 0:
                score *= tgt_w_null[tgt_offsets[s] + es + j]
            else:
                score *= total[j] / linked[j]
        lex_ef[p] = score
        # lex(f|e): within a source position, links are sorted by target position
        s = s2t_sent[p]
        fs = s2t_src_start[p]
        es = s2t_tgt_start[p]
        total[:n_src] = 0.0
        linked[:n_src] = 0
        for k in range(link_offsets[s], link_offsets[s + 1]):
            i = links[k, 0] - fs
            j = links[k, 1] - es
            if 0 <= i < n_src and 0 <= j < n_tgt:
                total[i] += link_w_f_given_e[k]
                linked[i] += 1
        score = 1.0
        for i in range(n_src):
            if linked[i] == 0:
                score *= src_w_null[src_offsets[s] + fs + i]
            else:
                score *= total[i] / linked[i]
        lex_fe[p] = score
    return lex_ef, lex_fe


@njit(cache=True)
def mask_links(masks, src_len, tgt_len):
    """The links of each alignment mask in Moses' output order (target position, then
    source position): ``int16[K, 2]`` (source, target) and ``int64[P+1]`` offsets."""
    n = masks.shape[0]
    offsets = np.zeros(n + 1, dtype=np.int64)
    for p in range(n):
        c = 0
        m = masks[p]
        while m:
            m &= m - _ONE
            c += 1
        offsets[p + 1] = offsets[p] + c
    links = np.empty((offsets[n], 2), dtype=np.int16)
    for p in range(n):
        k = offsets[p]
        for j in range(tgt_len[p]):
            for i in range(src_len[p]):
                if (masks[p] >> np.uint64(8 * i + j)) & _ONE:
                    links[k, 0] = i
                    links[k, 1] = j
                    k += 1
    return links, offsets


@njit(cache=True, inline="always")
def phrase_hash(h, word):
    """Hash chain of a source phrase, extended by one word (:func:`source_hashes`; the decoder extends it
    word by word over a sentence's spans)."""
    return mix_in(h, word + 1)


@njit(cache=True)
def source_hashes(src_words, src_offsets):
    """The hash of every source phrase of a phrase table (its index: the decoder's span look-up)."""
    n = src_offsets.shape[0] - 1
    out = np.empty(n, np.uint64)
    for u in range(n):
        h = np.uint64(0)
        for i in range(src_offsets[u], src_offsets[u + 1]):
            h = phrase_hash(h, src_words[i])
        out[u] = h
    return out
