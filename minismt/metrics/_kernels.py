"""Numba kernels for BLEU: statistics of whole k-best lists, BLEU from summed statistics."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

MAX_ORDER = 4
KEY_BASE = np.int64(1 << 15)  # local token ids + 1 must stay below this

SMOOTH_NONE = 0
SMOOTH_EXP = 1


@njit(cache=True)
def ngram_key(tokens, start, n):
    """Exact int64 code of the n-gram ``tokens[start:start+n]`` (ids in [0, KEY_BASE-1))."""
    key = np.int64(0)
    for k in range(n):
        key = key * KEY_BASE + np.int64(tokens[start + k] + 1)
    return key


@njit(cache=True)
def hypothesis_stats(tokens, tok_offsets, hyp_sentence, ref_keys, ref_counts, ref_key_offsets,
                     ref_lens, ref_len_offsets, out):
    """BLEU statistics ``[m1, t1, m2, t2, m3, t3, m4, t4, ref_len]`` of every hypothesis.

    ``tokens`` are per-sentence local ids (-1: a word no reference of that
    sentence has); ``ref_keys[ref_key_offsets[s]:ref_key_offsets[s+1]]`` are the
    sorted n-gram codes of sentence s's references with their clip counts (max
    count over references); the reference length is the closest to the
    hypothesis length, ties going to the shorter (as sacrebleu and Moses).
    """
    n_hyp = tok_offsets.shape[0] - 1
    for h in range(n_hyp):
        s = hyp_sentence[h]
        lo, hi = tok_offsets[h], tok_offsets[h + 1]
        length = hi - lo
        best_diff = -1
        best_len = -1
        for r in range(ref_len_offsets[s], ref_len_offsets[s + 1]):
            diff = abs(length - ref_lens[r])
            if best_diff == -1 or diff < best_diff or (diff == best_diff and ref_lens[r] < best_len):
                best_diff = diff
                best_len = ref_lens[r]
        out[h, 2 * MAX_ORDER] = best_len
        klo, khi = ref_key_offsets[s], ref_key_offsets[s + 1]
        for n in range(1, MAX_ORDER + 1):
            count = length - n + 1
            if count < 0:
                count = 0
            out[h, 2 * n - 1] = count
            matches = 0
            if count > 0 and khi > klo:
                keys = np.empty(count, dtype=np.int64)
                m = 0
                for i in range(lo, hi - n + 1):
                    ok = True
                    for k in range(n):
                        if tokens[i + k] < 0:
                            ok = False
                            break
                    if ok:
                        keys[m] = ngram_key(tokens, i, n)
                        m += 1
                if m > 0:
                    keys = np.sort(keys[:m])
                    start = 0
                    while start < m:
                        stop = start + 1
                        while stop < m and keys[stop] == keys[start]:
                            stop += 1
                        pos = np.searchsorted(ref_keys[klo:khi], keys[start]) + klo
                        if pos < khi and ref_keys[pos] == keys[start]:
                            c = stop - start
                            matches += c if c < ref_counts[pos] else ref_counts[pos]
                        start = stop
            out[h, 2 * n - 2] = matches


@njit(cache=True)
def bleu_from_sums(stats, smooth):
    """Corpus BLEU in [0, 1] of summed statistics, the arithmetic of sacrebleu's ``compute_bleu``.

    ``smooth``: SMOOTH_EXP (sacrebleu's default for corpus BLEU) replaces the
    k-th zero match count by ``100 / (2^k t_n)``; SMOOTH_NONE gives 0 as soon as
    one order has no match (Moses). An order with no n-gram ends the product.
    Allocates nothing, so MERT's sweep can call it once per interval.
    """
    sys_len = float(stats[1])
    ref_len = float(stats[2 * MAX_ORDER])
    bp = 1.0
    if sys_len < ref_len:
        bp = math.exp(1.0 - ref_len / sys_len) if sys_len > 0 else 0.0
    any_match = False
    for n in range(MAX_ORDER):
        if stats[2 * n] != 0:
            any_match = True
    if not any_match:
        return 0.0
    log_sum = 0.0
    smooth_mteval = 1.0
    stopped = False
    for n in range(MAX_ORDER):
        precision = 0.0
        if not stopped:
            correct = float(stats[2 * n])
            total = float(stats[2 * n + 1])
            if total == 0:
                stopped = True
            elif correct == 0:
                if smooth == SMOOTH_EXP:
                    smooth_mteval *= 2
                    precision = 100.0 / (smooth_mteval * total)
            else:
                precision = 100.0 * correct / total
        log_sum += -9999999999.0 if precision == 0.0 else math.log(precision)
    return bp * math.exp(log_sum / MAX_ORDER) / 100.0


@njit(cache=True)
def sentence_bleu_rows(stats, smooth_unigram, smooth_bp, ref_scale, unclipped_bp, out):
    """Sentence BLEU+1 of each row of ``stats`` (see :func:`minismt.metrics.sentence_bleu`)."""
    for h in range(stats.shape[0]):
        log_p = 0.0
        zero = False
        for n in range(MAX_ORDER):
            add = 1.0 if (n > 0 or smooth_unigram) else 0.0
            m = stats[h, 2 * n] + add
            t = stats[h, 2 * n + 1] + add
            if m <= 0.0:
                zero = True
                break
            log_p += math.log(m) - math.log(t)
        c = stats[h, 1] + (1.0 if smooth_bp else 0.0)
        if zero or c <= 0.0:
            out[h] = 0.0
            continue
        r = stats[h, 2 * MAX_ORDER] * ref_scale + (1.0 if smooth_bp else 0.0)
        log_bp = 1.0 - r / c
        if not unclipped_bp and log_bp > 0.0:
            log_bp = 0.0
        out[h] = math.exp(log_p / MAX_ORDER + log_bp)

