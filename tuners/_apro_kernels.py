"""Numba kernels of APRO (Dreyer & Dong 2015): all-pairs squared-hinge ranking loss in O(k log k).

For one sentence with model scores ``h`` (``h_i = w . f_i``) and BLEU+1 scores
``b``, the paper's quantities (eqs. 4-7) are, over the violating preference pairs
``Q = {(i, j) : b_i > b_j and 1 - h_i + h_j > 0}``::

    q_{i.} = |{j : (i, j) in Q}|      r_{i.} = sum_{j : (i, j) in Q} h_j      (eqs. 5, 7)
    q_{.i} = |{j : (j, i) in Q}|      r_{.i} = sum_{j : (j, i) in Q} h_j      (eq. 6)

(``r_{.i}`` is not in the paper, whose eq. 11 needs only ``r_{i.}``; the
gradient below needs it.)

They come from two sweeps over the hypotheses sorted by model score, each
inserting hypotheses into a Fenwick tree indexed by BLEU rank and querying a
prefix of ranks, as Lee & Lin (2014) do with an order-statistic tree for
RankSVM (after Airola et al. 2011): O(k log k).

* Sweep 1 visits ``i`` by decreasing ``h_i``; the inserted set is every ``j`` with
  ``1 - h_i + h_j > 0``, which only grows as ``h_i`` falls. Ranks below
  ``rank(b_i)`` give ``q_{i.}`` and ``r_{i.}``.
* Sweep 2 visits ``i`` by increasing ``h_i``; the inserted set is every ``j`` with
  ``1 - h_j + h_i > 0``. Ranks above ``rank(b_i)`` (a prefix of the reversed
  ranks) give ``q_{.i}`` and ``r_{.i}``.

The margin tests are evaluated as ``(1.0 - h_i) + h_j``, the same expression
as a direct double loop over pairs, so both agree on every boundary case.

The sentence loss is eq. (11)::

    L = sum_i q_{i.} (h_i^2 - 2 h_i + 1) + q_{.i} (h_i^2 + 2 h_i) - 2 r_{i.} h_i

and its derivative with respect to ``h_i`` (the gradient is ``X^T alpha``)::

    alpha_i = dL/dh_i = 2 [q_{.i} (1 + h_i) - r_{.i}] - 2 [q_{i.} (1 - h_i) + r_{i.}]

The squared hinge is once differentiable; its generalised Hessian (Mangasarian
2002, used by Lee & Lin 2014 in their truncated Newton method) with respect to
``h`` is twice the Laplacian of the graph ``Q``, so ``d^2 L / dh^2 . z`` is::

    (Lap z)_i = (q_{i.} + q_{.i}) z_i - sum_{j : (i, j) in Q} z_j - sum_{j : (j, i) in Q} z_j

computed by replaying both sweeps with ``z`` in the tree (the sort order and
the sweep cut points of the evaluation at ``w`` are kept, so ``Q`` is the one
at ``w``).

Loss and quantities use model scores centred on the sentence's median score
(every formula above depends on score differences only, so the result is the
same; centring avoids cancellation in eq. 11 when scores are large).

Kernels run sentences in a fixed number of contiguous blocks (``blocks``) in
parallel; each block sums its sentences in order and the caller sums the
blocks in order, so results do not depend on the number of threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True)
def block_bounds(offsets, n_blocks):
    """First sentence of each of ``n_blocks`` contiguous blocks with about equal hypothesis counts.

    Returns ``int64[n_blocks + 1]`` (``blocks[b]:blocks[b+1]`` are the sentences of block b).
    """
    n_sent = offsets.shape[0] - 1
    total = offsets[n_sent]
    blocks = np.empty(n_blocks + 1, dtype=np.int64)
    blocks[0] = 0
    s = 0
    for b in range(1, n_blocks):
        target = (total * b) // n_blocks
        while s < n_sent and offsets[s] < target:
            s += 1
        blocks[b] = s
    blocks[n_blocks] = n_sent
    return blocks


@njit(parallel=True, cache=True)
def bleu_ranks(offsets, bleu, rank, n_ranks):
    """Dense rank of every hypothesis's BLEU+1 within its sentence (0 = lowest; ties share a rank).

    Writes ``rank[N]`` and the number of distinct scores of each sentence ``n_ranks[S]``.
    """
    for s in prange(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        if hi == lo:
            n_ranks[s] = 0
            continue
        order = np.argsort(bleu[lo:hi], kind="mergesort")
        r = 0
        previous = bleu[lo + order[0]]
        for p in range(hi - lo):
            value = bleu[lo + order[p]]
            if value != previous:
                r += 1
                previous = value
            rank[lo + order[p]] = r
        n_ranks[s] = r + 1


@njit(cache=True)
def _tree_add(tree, size, pos, value):
    """Fenwick tree: add ``value`` at 1-based position ``pos``."""
    while pos <= size:
        tree[pos] += value
        pos += pos & -pos


@njit(cache=True)
def _tree_prefix(tree, pos):
    """Fenwick tree: sum of positions ``1..pos``."""
    total = 0.0
    while pos > 0:
        total += tree[pos]
        pos -= pos & -pos
    return total


@njit(cache=True)
def _tree_insert(tree, size, pos, value):
    """Fenwick tree of (count, sum) pairs ``tree[:, 0]``, ``tree[:, 1]``: add ``(1, value)`` at ``pos``."""
    while pos <= size:
        tree[pos, 0] += 1.0
        tree[pos, 1] += value
        pos += pos & -pos


@njit(cache=True)
def _tree_count_sum(tree, pos):
    """Fenwick tree of (count, sum) pairs: totals over positions ``1..pos``."""
    count = 0.0
    total = 0.0
    while pos > 0:
        count += tree[pos, 0]
        total += tree[pos, 1]
        pos -= pos & -pos
    return count, total


@njit(cache=True)
def _model_scores(features, indptr, indices, values, w, lo, hi, h):
    """``h[i] = w . f_{lo+i}`` (dense row plus its sparse entries) for rows ``lo..hi-1``."""
    d = features.shape[1]
    for i in range(hi - lo):
        row = lo + i
        total = 0.0
        for c in range(d):
            total += features[row, c] * w[c]
        for p in range(indptr[row], indptr[row + 1]):
            total += values[p] * w[indices[p]]
        h[i] = total


@njit(cache=True)
def _sentence_sweeps(h, hc, rank, n_ranks, order, cut_first, cut_second,
                     q_first, q_second, r_first, r_second, tree):
    """The quantities of eqs. (5)-(7) of one sentence by two Fenwick-tree sweeps.

    ``h``: model scores (margin tests); ``hc``: the same scores centred (summed
    into ``r``); ``rank``: BLEU ranks 0..n_ranks-1; ``order``: argsort of ``h``.
    Writes ``q_first = q_{i.}``, ``r_first = r_{i.}``, ``q_second = q_{.i}``,
    ``r_second = r_{.i}`` and the cut points of both sweeps (for the Hessian).
    ``tree`` is scratch space of at least ``(n_ranks + 1, 2)`` (counts are exact
    in float64).
    """
    k = h.shape[0]
    tree[: n_ranks + 1, :] = 0.0
    # sweep 1: i by decreasing h_i; insert j (from the top) while 1 - h_i + h_j > 0
    t = k - 1
    for p in range(k - 1, -1, -1):
        i = order[p]
        while t >= 0 and (1.0 - h[i]) + h[order[t]] > 0.0:
            j = order[t]
            _tree_insert(tree, n_ranks, rank[j] + 1, hc[j])
            t -= 1
        cut_first[p] = t
        count, total = _tree_count_sum(tree, rank[i])        # ranks below rank(b_i): b_j < b_i
        q_first[i] = int(count)
        r_first[i] = total
    tree[: n_ranks + 1, :] = 0.0
    # sweep 2: i by increasing h_i; insert j (from the bottom) while 1 - h_j + h_i > 0
    t = 0
    for p in range(k):
        i = order[p]
        while t < k and (1.0 - h[order[t]]) + h[i] > 0.0:
            j = order[t]
            _tree_insert(tree, n_ranks, n_ranks - rank[j], hc[j])
            t += 1
        cut_second[p] = t
        count, total = _tree_count_sum(tree, n_ranks - 1 - rank[i])  # ranks above: b_j > b_i
        q_second[i] = int(count)
        r_second[i] = total


@njit(parallel=True, cache=True)
def loss_gradient(offsets, blocks, features, indptr, indices, values, w, rank, n_ranks,
                  order, cut_first, cut_second, q_total, alpha, block_loss, block_grad):
    """Sum of sentence losses (eq. 11) and ``X^T alpha`` over the dense features, per block.

    Inputs: the KBest arrays, weights ``w`` over the whole space, BLEU ranks.
    Writes per hypothesis: ``order`` (argsort of the sentence's model scores),
    the sweep cuts, ``q_total = q_{i.} + q_{.i}`` and ``alpha = dL_s/dh_i``; per
    block: ``block_loss[b] = sum L_s`` and ``block_grad[b] = sum_i alpha_i f_i``
    (dense part; the caller adds the sparse part from ``alpha``).
    """
    n_blocks = blocks.shape[0] - 1
    d = features.shape[1]
    for b in prange(n_blocks):
        k_max = 0
        for s in range(blocks[b], blocks[b + 1]):
            k_max = max(k_max, offsets[s + 1] - offsets[s])
        h = np.empty(k_max)
        hc = np.empty(k_max)
        q_first = np.empty(k_max, dtype=np.int64)
        q_second = np.empty(k_max, dtype=np.int64)
        r_first = np.empty(k_max)
        r_second = np.empty(k_max)
        tree = np.zeros((k_max + 1, 2))
        loss = 0.0
        grad = np.zeros(d)
        for s in range(blocks[b], blocks[b + 1]):
            lo = offsets[s]
            hi = offsets[s + 1]
            k = hi - lo
            if k == 0:
                continue
            _model_scores(features, indptr, indices, values, w, lo, hi, h)
            local = np.argsort(h[:k])
            centre = h[local[k // 2]]
            for i in range(k):
                hc[i] = h[i] - centre
            _sentence_sweeps(h[:k], hc[:k], rank[lo:hi], n_ranks[s], local,
                             cut_first[lo:hi], cut_second[lo:hi], q_first, q_second,
                             r_first, r_second, tree)
            for i in range(k):
                order[lo + i] = local[i]
                x = hc[i]
                q1 = q_first[i]
                q2 = q_second[i]
                loss += q1 * (x * x - 2.0 * x + 1.0) + q2 * (x * x + 2.0 * x) - 2.0 * r_first[i] * x
                a = 2.0 * (q2 * (1.0 + x) - r_second[i]) - 2.0 * (q1 * (1.0 - x) + r_first[i])
                alpha[lo + i] = a
                q_total[lo + i] = q1 + q2
                if a != 0.0:
                    for c in range(d):
                        grad[c] += a * features[lo + i, c]
        block_loss[b] = loss
        block_grad[b, :] = grad


@njit(parallel=True, cache=True)
def hessian_laplacian(offsets, blocks, features, indptr, indices, values, v, rank, n_ranks,
                      order, cut_first, cut_second, q_total, u, block_out):
    """``u = Lap_Q (X v)`` per sentence and ``X^T u`` over the dense features, per block.

    Replays the sweeps of the last :func:`loss_gradient` call (its ``order``,
    cuts and ``q_total``) with ``z = X v`` in the tree, so ``Q`` is the set of
    violating pairs at that call's weights. Writes ``u`` per hypothesis and
    ``block_out[b] = sum_i u_i f_i`` (dense part).
    """
    n_blocks = blocks.shape[0] - 1
    d = features.shape[1]
    for b in prange(n_blocks):
        k_max = 0
        for s in range(blocks[b], blocks[b + 1]):
            k_max = max(k_max, offsets[s + 1] - offsets[s])
        z = np.empty(k_max)
        tree = np.zeros(k_max + 1)
        out = np.zeros(d)
        for s in range(blocks[b], blocks[b + 1]):
            lo = offsets[s]
            hi = offsets[s + 1]
            k = hi - lo
            if k == 0:
                continue
            m = n_ranks[s]
            _model_scores(features, indptr, indices, values, v, lo, hi, z)
            for p in range(m + 1):
                tree[p] = 0.0
            t = k - 1
            for p in range(k - 1, -1, -1):
                i = order[lo + p]
                while t > cut_first[lo + p]:
                    j = order[lo + t]
                    _tree_add(tree, m, rank[lo + j] + 1, z[j])
                    t -= 1
                u[lo + i] = q_total[lo + i] * z[i] - _tree_prefix(tree, rank[lo + i])
            for p in range(m + 1):
                tree[p] = 0.0
            t = 0
            for p in range(k):
                i = order[lo + p]
                while t < cut_second[lo + p]:
                    j = order[lo + t]
                    _tree_add(tree, m, m - rank[lo + j], z[j])
                    t += 1
                u[lo + i] -= _tree_prefix(tree, m - 1 - rank[lo + i])
            for i in range(k):
                a = u[lo + i]
                if a != 0.0:
                    for c in range(d):
                        out[c] += a * features[lo + i, c]
        block_out[b, :] = out


@njit(parallel=True, cache=True)
def pair_statistics(offsets, features, indptr, indices, values, w, rank, n_ranks,
                    q_first, q_second, r_first, r_second):
    """``q_{i.}``, ``q_{.i}``, ``r_{i.}``, ``r_{.i}`` (eqs. 5-7, uncentred scores) of every hypothesis."""
    n_sent = offsets.shape[0] - 1
    for s in prange(n_sent):
        lo = offsets[s]
        hi = offsets[s + 1]
        k = hi - lo
        if k == 0:
            continue
        h = np.empty(k)
        _model_scores(features, indptr, indices, values, w, lo, hi, h)
        local = np.argsort(h)
        cut_first = np.empty(k, dtype=np.int64)
        cut_second = np.empty(k, dtype=np.int64)
        q1 = np.empty(k, dtype=np.int64)
        q2 = np.empty(k, dtype=np.int64)
        r1 = np.empty(k)
        r2 = np.empty(k)
        _sentence_sweeps(h, h, rank[lo:hi], n_ranks[s], local, cut_first, cut_second,
                         q1, q2, r1, r2, np.zeros((k + 1, 2)))
        q_first[lo:hi] = q1
        q_second[lo:hi] = q2
        r_first[lo:hi] = r1
        r_second[lo:hi] = r2


@njit(cache=True)
def sparse_transpose_add(indptr, indices, values, coef, out):
    """``out[indices[p]] += values[p] * coef[row]`` over the CSR block: the sparse part of ``X^T coef``."""
    for row in range(indptr.shape[0] - 1):
        c = coef[row]
        if c != 0.0:
            for p in range(indptr[row], indptr[row + 1]):
                out[indices[p]] += values[p] * c
