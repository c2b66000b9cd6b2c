"""Numba kernels over KBest arrays: model scores, per-instance argmax, dedup hashing."""

from __future__ import annotations

import numpy as np
from numba import njit

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@njit(cache=True)
def sparse_dot(indptr, indices, values, w, out):
    """Add each row's sparse features times ``w`` to ``out`` (in place)."""
    for row in range(indptr.shape[0] - 1):
        acc = 0.0
        for j in range(indptr[row], indptr[row + 1]):
            acc += values[j] * w[indices[j]]
        out[row] += acc


@njit(cache=True)
def row_score(features, indptr, indices, values, w, row):
    """``w . h`` of one hypothesis: its dense row, then its sparse (CSR) entries."""
    acc = 0.0
    for col in range(features.shape[1]):
        acc += features[row, col] * w[col]
    for j in range(indptr[row], indptr[row + 1]):
        acc += values[j] * w[indices[j]]
    return acc


@njit(cache=True)
def row_axpy(row, coef, features, indptr, indices, values, w):
    """``w += coef * h_row``: one hypothesis' dense row, then its sparse (CSR) entries."""
    if coef == 0.0:
        return
    for col in range(features.shape[1]):
        w[col] += coef * features[row, col]
    for j in range(indptr[row], indptr[row + 1]):
        w[indices[j]] += coef * values[j]


@njit(cache=True)
def model_scores(features, indptr, indices, values, w, out):
    """``out[row] = w . h_row`` for every hypothesis (:func:`row_score`, so every tuner kernel that
    scores rows one at a time gets the same bits)."""
    for row in range(features.shape[0]):
        out[row] = row_score(features, indptr, indices, values, w, row)


@njit(cache=True)
def segment_argmax(offsets, scores):
    """Row of the highest score in each segment ``offsets[i]:offsets[i+1]`` (first wins ties; -1 if empty)."""
    n = offsets.shape[0] - 1
    best = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        top = -np.inf
        for row in range(offsets[i], offsets[i + 1]):
            if best[i] < 0 or scores[row] > top:
                top = scores[row]
                best[i] = row
    return best


@njit(cache=True)
def _mix_bytes(h, data):
    for b in data:
        h = (h ^ np.uint64(b)) * _FNV_PRIME
    return h


@njit(cache=True)
def row_hashes(text, text_offsets, features, indptr, indices, values, with_features):
    """FNV-1a hash of each hypothesis string, optionally mixed with its feature vector."""
    n = text_offsets.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for row in range(n):
        h = _mix_bytes(_FNV_OFFSET, text[text_offsets[row]:text_offsets[row + 1]])
        if with_features:
            h = (h ^ np.uint64(0xFF)) * _FNV_PRIME
            h = _mix_bytes(h, features[row].view(np.uint8))
            h = _mix_bytes(h, indices[indptr[row]:indptr[row + 1]].view(np.uint8))
            h = _mix_bytes(h, values[indptr[row]:indptr[row + 1]].view(np.uint8))
        out[row] = h
    return out


@njit(cache=True)
def _same_row(a, b, text, text_offsets, features, indptr, indices, values, with_features):
    la = text_offsets[a + 1] - text_offsets[a]
    if la != text_offsets[b + 1] - text_offsets[b]:
        return False
    for k in range(la):
        if text[text_offsets[a] + k] != text[text_offsets[b] + k]:
            return False
    if with_features:
        for k in range(features.shape[1]):
            if features[a, k] != features[b, k]:
                return False
        na = indptr[a + 1] - indptr[a]
        if na != indptr[b + 1] - indptr[b]:
            return False
        for k in range(na):
            if indices[indptr[a] + k] != indices[indptr[b] + k]:
                return False
            if values[indptr[a] + k] != values[indptr[b] + k]:
                return False
    return True


@njit(cache=True)
def first_occurrences(offsets, hashes, text, text_offsets, features, indptr, indices, values,
                      with_features):
    """Mask of rows that are the first occurrence of their hypothesis within their segment.

    Rows with equal hashes are compared in full, so a hash collision never drops
    a distinct hypothesis.
    """
    n_rows = hashes.shape[0]
    keep = np.ones(n_rows, dtype=np.bool_)
    for i in range(offsets.shape[0] - 1):
        lo, hi = offsets[i], offsets[i + 1]
        if hi - lo < 2:
            continue
        order = np.argsort(hashes[lo:hi], kind="mergesort") + lo
        start = 0
        while start < order.shape[0]:
            stop = start + 1
            while stop < order.shape[0] and hashes[order[stop]] == hashes[order[start]]:
                stop += 1
            # order within a run of equal hashes is by row (stable sort): earlier rows win
            for a in range(start, stop):
                ra = order[a]
                if not keep[ra]:
                    continue
                for b in range(a + 1, stop):
                    rb = order[b]
                    if keep[rb] and _same_row(ra, rb, text, text_offsets, features, indptr,
                                              indices, values, with_features):
                        keep[rb] = False
            start = stop
    return keep
