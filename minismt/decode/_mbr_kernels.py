"""Numba kernel of k-best MBR (:mod:`minismt.decode.mbr`): sentence BLEU+1 of every candidate against every
other, from each candidate's n-grams as sorted integer ids."""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def pairwise_bleu(offsets, grams, orders, counts, lengths, max_order, out):
    """``out[i, j]``: BLEU+1 (+1 on the matches and totals of orders 2 and up) of candidate ``i`` with candidate
    ``j`` as the reference. Candidate ``i``'s distinct n-grams are rows ``offsets[i]:offsets[i+1]``, sorted by
    id, with their order and count; matches are clipped by the reference's count."""
    k = lengths.shape[0]
    matches = np.zeros(max_order)
    for i in range(k):
        for j in range(k):
            matches[:] = 0.0
            a, a_end = offsets[i], offsets[i + 1]
            b, b_end = offsets[j], offsets[j + 1]
            while a < a_end and b < b_end:
                if grams[a] == grams[b]:
                    matches[orders[a] - 1] += min(counts[a], counts[b])
                    a += 1
                    b += 1
                elif grams[a] < grams[b]:
                    a += 1
                else:
                    b += 1
            length = lengths[i]
            log_precision = 0.0
            zero = False
            for n in range(max_order):
                m = matches[n]
                total = max(length - n, 0)
                if n > 0:
                    m += 1.0
                    total += 1.0
                if m <= 0.0 or total <= 0.0:
                    zero = True
                    break
                log_precision += math.log(m / total)
            if zero or length == 0:
                out[i, j] = 0.0
                continue
            brevity = min(0.0, 1.0 - lengths[j] / length)
            out[i, j] = math.exp(brevity + log_precision / max_order)
