"""Numba kernels of dtrain (:mod:`tuners.dtrain`): its per-sentence BLEU scorers, pair sampling and the
pairwise (margin) perceptron update of one sentence's k-best list.

Array conventions are those of :class:`minismt.kbest.KBest` (``offsets``, dense ``features``, CSR
``indptr``/``indices``/``values`` with global indices) and its ``[N, 9]`` BLEU statistics
(:mod:`minismt.metrics.bleu`: matches and totals of orders 1-4, then the reference length). Kernels assume
valid arrays; the checks are in :mod:`tuners.dtrain`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from minismt.kbest._kernels import row_axpy

STUPID_BLEU, BLEU, SMOOTH_BLEU = 0, 1, 2
"""dtrain's stateless per-sentence scorers (``scorer=stupid_bleu | bleu | smooth_bleu``)."""
ALL_PAIRS, XYX, PRO = 0, 1, 2
"""dtrain's pair sampling (``pair_sampling=all | XYX | PRO``)."""
PRO_CANDIDATES, PRO_KEPT = 5000, 50
"""PRO's sampling as dtrain has it (Hopkins & May 2011, Fig. 4): the first 5,000 pairs whose scores differ
by at least the threshold, of which the 50 with the largest score difference."""
N_COUNTS = 3
"""Per-sentence counters: sampled pairs, rank errors (model score of the better one <= the worse one's),
margin violations (ranked right but closer than the margin)."""


@njit(cache=True)
def _brevity_penalty(hyp_len, ref_len):
    if hyp_len > ref_len:
        return 1.0
    return math.exp(1.0 - ref_len / hyp_len)


@njit(cache=True)
def sentence_scores(stats, scorer, order, out):
    """``out[h]``: dtrain's per-sentence BLEU of each row of ``stats`` (one reference).

    ``STUPID_BLEU`` (Lin & Och 2004, dtrain's default): the n-gram precisions of orders 2..N get 1 added to
    their matches and totals, 0 when no unigram matches; ``BLEU``: Papineni et al. 2002, 0 when an order
    has no match; ``SMOOTH_BLEU`` (Liang et al. 2006): the sum over n of the BLEU of orders 1..n divided by
    2^(N-n+1), up to the first order without a match. A reference shorter than N words is scored on its
    length's orders with uniform weights (stupid and plain BLEU); the brevity penalty is
    ``exp(1 - r/c)`` for ``c <= r``; an empty hypothesis or reference scores 0."""
    for h in range(stats.shape[0]):
        hyp_len = stats[h, 1]
        ref_len = stats[h, 8]
        if hyp_len == 0 or ref_len == 0:
            out[h] = 0.0
            continue
        m_orders = order if ref_len >= order else ref_len
        bp = _brevity_penalty(float(hyp_len), float(ref_len))
        if scorer == SMOOTH_BLEU:
            total = 0.0
            log_sum = 0.0
            for n in range(m_orders):
                matches, grams = stats[h, 2 * n], stats[h, 2 * n + 1]
                if grams == 0 or matches == 0:
                    break
                log_sum += math.log(matches / grams)
                total += math.exp(log_sum / (n + 1)) / 2.0 ** (order - n)
            out[h] = bp * total
            continue
        log_sum = 0.0
        zero = False
        for n in range(m_orders):
            add = 1.0 if (scorer == STUPID_BLEU and n > 0) else 0.0
            matches, grams = stats[h, 2 * n], stats[h, 2 * n + 1]
            if (scorer == BLEU or n == 0) and (grams == 0 or matches == 0):
                zero = True
                break
            log_sum += math.log((matches + add) / (grams + add)) / m_orders
        out[h] = 0.0 if zero else bp * math.exp(log_sum)


@njit(cache=True)
def _accept(gold_a, gold_b, threshold):
    if threshold > 0.0:
        return abs(gold_a - gold_b) >= threshold
    return gold_a != gold_b


@njit(cache=True)
def _block_pairs(rows, gold, model, top_lo, top_hi, low_lo, low_hi, misranked_only, threshold, limit,
                 first, second, count):
    """The pairs (better, worse) of ``rows[top_lo:top_hi]`` x ``rows[low_lo:low_hi]`` (rows sorted by gold
    score, best first) appended to ``first``/``second`` from ``count[0]``; ``count[1]`` counts the
    considered pairs against ``limit`` (dtrain's ``max_pairs``). Returns False once the limit is reached."""
    for a in range(top_lo, top_hi):
        for b in range(low_lo, low_hi):
            i, j = rows[a], rows[b]
            if misranked_only and not model[i] <= model[j]:
                continue
            if _accept(gold[i], gold[j], threshold):
                first[count[0]] = i
                second[count[0]] = j
                count[0] += 1
            count[1] += 1
            if count[1] == limit:
                return False
    return True


@njit(cache=True)
def sample_pairs(lo, hi, gold, model, sampling, hi_lo, misranked_only, threshold, limit, first, second):
    """The training pairs of one sentence's hypotheses ``lo:hi`` (each (better, worse) by ``gold``) into
    ``first``/``second``; returns how many.

    ``ALL_PAIRS``: every pair of different gold scores. ``XYX`` (Simianer et al. 2012): the list sorted by
    gold score is cut into the top ``hi_lo`` part X, the middle Y and the bottom ``hi_lo`` part X (a cut
    moved past ties of the gold score), and the pairs are top x (middle and bottom), then middle x bottom.
    ``PRO``: dtrain's Hopkins & May sampling (:data:`PRO_CANDIDATES`, :data:`PRO_KEPT`). With
    ``misranked_only`` (the plain perceptron: no margin, no regulariser) only pairs the model ranks wrong
    are kept. Ties of the gold score keep the k-best order (a stable sort)."""
    n = hi - lo
    if n < 2:
        return 0
    rows = lo + np.argsort(-gold[lo:hi], kind="mergesort")
    count = np.zeros(2, dtype=np.int64)
    if sampling == ALL_PAIRS:
        for a in range(n - 1):
            if not _block_pairs(rows, gold, model, a, a + 1, a + 1, n, misranked_only, threshold, limit,
                                first, second, count):
                break
        return count[0]
    if sampling == PRO:
        candidates = 0
        for a in range(n - 1):
            for b in range(a + 1, n):
                i, j = lo + a, lo + b  # the k-best order, as dtrain's PRO sampling reads it
                if gold[i] == gold[j] or not _accept(gold[i], gold[j], threshold):
                    continue
                if gold[i] > gold[j]:
                    first[candidates], second[candidates] = i, j
                else:
                    first[candidates], second[candidates] = j, i
                candidates += 1
                if candidates == PRO_CANDIDATES:
                    break
            if candidates == PRO_CANDIDATES:
                break
        if candidates > PRO_KEPT:
            difference = np.empty(candidates)
            for p in range(candidates):
                difference[p] = abs(gold[first[p]] - gold[second[p]])
            keep = np.argsort(-difference, kind="mergesort")[:PRO_KEPT]
            kept_first, kept_second = first[keep].copy(), second[keep].copy()
            first[:PRO_KEPT] = kept_first
            second[:PRO_KEPT] = kept_second
            candidates = PRO_KEPT
        return candidates
    cut = int(math.floor(n * hi_lo + 0.5))
    top = max(cut, 1)
    if n > 4:
        while top < n and gold[rows[top - 1]] == gold[rows[top]]:
            top += 1
    else:
        top = 1
    bottom = n - cut
    while top < bottom < n and gold[rows[bottom - 1]] == gold[rows[bottom]]:
        bottom -= 1
    if bottom < top:
        bottom = top
    if _block_pairs(rows, gold, model, 0, top, top, n, misranked_only, threshold, limit, first, second, count):
        _block_pairs(rows, gold, model, top, bottom, bottom, n, misranked_only, threshold, limit, first, second,
                     count)
    return count[0]


@njit(cache=True)
def sentence_update(lo, hi, features, indptr, indices, values, gold, model, w, eta, gamma, loss_margin,
                    sampling, hi_lo, threshold, limit, first, second, counts):
    """dtrain's update from one sentence's k-best list (rows ``lo:hi``): its pairs sampled
    (:func:`sample_pairs`; misranked ones only for the plain perceptron, ``gamma == loss_margin == 0``), then
    in their order ``w += eta (h(better) - h(worse))`` for each pair the model ranks wrong or within
    ``loss_margin`` (the margin perceptron), with ``w -= 2 gamma eta / pairs * w`` after it when ``gamma`` > 0
    (the SVM's L2 term). The model scores ``model`` are the decode's, fixed for the sentence (dtrain's
    ``repeat=1``). ``counts`` (:data:`N_COUNTS`) are incremented."""
    plain = gamma == 0.0 and loss_margin == 0.0
    n_pairs = sample_pairs(lo, hi, gold, model, sampling, hi_lo, plain, threshold, limit, first, second)
    counts[0] += n_pairs
    for p in range(n_pairs):
        i, j = first[p], second[p]
        difference = model[i] - model[j]
        wrong = difference <= 0.0
        if wrong:
            counts[1] += 1
        elif difference < loss_margin:
            counts[2] += 1
        if wrong or difference < loss_margin:
            row_axpy(i, eta, features, indptr, indices, values, w)
            row_axpy(j, -eta, features, indptr, indices, values, w)
            if gamma > 0.0:
                shrink = 1.0 - 2.0 * gamma * eta / n_pairs
                for col in range(w.shape[0]):
                    w[col] *= shrink
    return n_pairs
