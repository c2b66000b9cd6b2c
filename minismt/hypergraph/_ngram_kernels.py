"""Numba kernels of the n-grams a forest's edges create (:mod:`minismt.hypergraph.ngrams`).

With ``K = order - 1``, what a parent edge needs of a tail's yield is its *boundary*: the first and the last
``min(len, K)`` words, and whether it is longer than ``K`` (then the words between the two boundaries are a gap
no n-gram crosses). An edge's sequence is its target template with each tail replaced by that boundary; the
n-grams it creates are the n-grams of that sequence (orders 1 to ``order``) that cross no gap, hold no barrier
word (``<s>``, ``</s>``) and do not lie inside one tail's words. Summed over a derivation's edges, these are the
n-grams of its yield, each once, exactly when every node's derivations share the boundaries its parents use:
a forest split by the n-gram state, as a decoder with an LM of that order splits it. :func:`boundaries` finds
each node's boundaries bottom-up and the first node whose derivations disagree on a boundary a parent uses.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minismt._primitives import grow, grow_rows
from minismt.metrics._kernels import ngram_key

GAP = -3
"""The token standing for the inside of a yield longer than ``K`` words."""


@njit(cache=True)
def needed_sides(in_offsets, tail_offsets, tails, tmpl_offsets, tmpl, need_left, need_right):
    """``need_left[t]`` / ``need_right[t]``: a parent's n-grams may reach into that side of tail ``t``'s yield, or
    a parent's own boundary on a side its parents need may be made of it: some template has an item before /
    after ``t``'s slot, or ``t`` is in an edge into a node that needs that side (top-down, so a head is final
    before its tails)."""
    need_left[:] = False
    need_right[:] = False
    for v in range(in_offsets.shape[0] - 2, -1, -1):
        for e in range(in_offsets[v], in_offsets[v + 1]):
            lo = tmpl_offsets[e]
            hi = tmpl_offsets[e + 1]
            for p in range(lo, hi):
                item = tmpl[p]
                if item < 0:
                    t = tails[tail_offsets[e] - item - 1]
                    if p > lo or need_left[v]:
                        need_left[t] = True
                    if p < hi - 1 or need_right[v]:
                        need_right[t] = True


@njit(cache=True)
def _sequence(e, edge_tails, tmpl_offsets, tmpl, k, length, left, right, seq, owner):
    """Edge ``e``'s sequence into ``seq``: its template with each tail (``edge_tails[i]`` for slot ``i``) replaced by
    that node's boundary words, ``GAP`` inside a yield longer than ``k``; ``owner`` gets the template slot each
    token came from (-1 for the edge's own words). Returns the sequence's size and the yield's length capped at
    ``k + 1``."""
    size = 0
    total = 0
    for p in range(tmpl_offsets[e], tmpl_offsets[e + 1]):
        item = tmpl[p]
        if item >= 0:
            seq[size] = item
            owner[size] = -1
            size += 1
            total += 1
            continue
        slot = -item - 1
        t = edge_tails[slot]
        n = length[t]
        total += n
        if n <= k:
            for i in range(n):
                seq[size] = left[t, i]
                owner[size] = slot
                size += 1
        else:
            for i in range(k):
                seq[size] = left[t, i]
                owner[size] = slot
                size += 1
            seq[size] = GAP
            owner[size] = slot
            size += 1
            for i in range(k):
                seq[size] = right[t, i]
                owner[size] = slot
                size += 1
    return size, min(total, k + 1)


@njit(cache=True)
def boundaries(in_offsets, tail_offsets, tails, tmpl_offsets, tmpl, k, need_left, need_right, length, left,
               right, max_seq):
    """Each node's yield length (capped at ``k + 1``) and its first and last ``min(length, k)`` words, from its
    first in-edge (a start node: the empty yield); returns -1, or the first node one of whose in-edges gives a
    different boundary on a side its parents use (its length too, where short)."""
    seq = np.empty(max_seq, dtype=np.int64)
    owner = np.empty(max_seq, dtype=np.int64)
    first = np.empty(k, dtype=np.int64)
    last = np.empty(k, dtype=np.int64)
    for v in range(in_offsets.shape[0] - 1):
        lo = in_offsets[v]
        hi = in_offsets[v + 1]
        length[v] = 0
        if lo == hi:
            continue
        for e in range(lo, hi):
            edge_tails = tails[tail_offsets[e]:tail_offsets[e + 1]]
            size, n = _sequence(e, edge_tails, tmpl_offsets, tmpl, k, length, left, right, seq, owner)
            m = min(n, k)
            for i in range(m):
                first[i] = seq[i]
                last[i] = seq[size - m + i]
            if e == lo:
                length[v] = n
                for i in range(m):
                    left[v, i] = first[i]
                    right[v, i] = last[i]
                continue
            short_before = length[v] <= k
            if (need_left[v] or need_right[v]) and (n <= k or short_before) and n != length[v]:
                return v
            for i in range(m):
                if need_left[v] and first[i] != left[v, i]:
                    return v
                if need_right[v] and last[i] != right[v, i]:
                    return v
    return -1


@njit(cache=True)
def count_edge_ngrams(tail_offsets, tails, tmpl_offsets, tmpl, k, length, left, right, barrier, max_seq, counts):
    """``counts[e]``: how many n-grams edge ``e`` creates (:func:`edge_ngrams`'s sizes)."""
    seq = np.empty(max_seq, dtype=np.int64)
    owner = np.empty(max_seq, dtype=np.int64)
    no_grams = np.empty((1, k + 1), dtype=np.int32)
    no_orders = np.empty(1, dtype=np.int32)
    for e in range(counts.shape[0]):
        edge_tails = tails[tail_offsets[e]:tail_offsets[e + 1]]
        size, _ = _sequence(e, edge_tails, tmpl_offsets, tmpl, k, length, left, right, seq, owner)
        counts[e] = _scan(seq, owner, size, k, barrier, e, no_grams, no_orders, 0, False)


@njit(cache=True)
def edge_ngrams(tail_offsets, tails, tmpl_offsets, tmpl, k, length, left, right, barrier, max_seq, offsets,
                grams, orders):
    """The n-grams each edge creates: edge ``e``'s are rows ``offsets[e]:offsets[e+1]`` of ``grams`` (word ids,
    padded with -1) with their orders."""
    seq = np.empty(max_seq, dtype=np.int64)
    owner = np.empty(max_seq, dtype=np.int64)
    for e in range(offsets.shape[0] - 1):
        edge_tails = tails[tail_offsets[e]:tail_offsets[e + 1]]
        size, _ = _sequence(e, edge_tails, tmpl_offsets, tmpl, k, length, left, right, seq, owner)
        _scan(seq, owner, size, k, barrier, e, grams, orders, offsets[e], True)


@njit(cache=True)
def _scan(seq, owner, size, k, barrier, e, grams, orders, at, write):
    """Visit the new n-grams of one sequence (orders 1 to ``k + 1``), writing them from row ``at`` when
    ``write``; returns how many there are."""
    found = 0
    for start in range(size):
        for n in range(1, k + 2):
            end = start + n
            if end > size:
                break
            bad = False
            inside = owner[start] >= 0
            for i in range(start, end):
                token = seq[i]
                if token == GAP:
                    bad = True
                    break
                for b in range(barrier.shape[0]):
                    if token == barrier[b]:
                        bad = True
                if bad:
                    break
                if owner[i] != owner[start]:
                    inside = False
            if bad:
                break  # longer n-grams from this start hold the same gap or barrier
            if inside:
                continue  # counted at the tail's own edges
            if write:
                row = at + found
                for i in range(n):
                    grams[row, i] = seq[start + i]
                orders[row] = n
            found += 1
    return found


@njit(cache=True)
def _same_state(u, n, first, last, k, need_left, need_right, n_len, n_left, n_right):
    """Whether new node ``u`` has the state (yield length ``n`` capped at ``k + 1``, boundaries ``first`` and
    ``last``) on what its parents see: the whole yield where either is short, else the needed sides."""
    if n <= k or n_len[u] <= k:
        if n != n_len[u]:
            return False
        for i in range(n):
            if first[i] != n_left[u, i]:
                return False
        return True
    for i in range(k):
        if need_left and first[i] != n_left[u, i]:
            return False
        if need_right and last[i] != n_right[u, i]:
            return False
    return True


@njit(cache=True)
def split_by_state(in_offsets, tail_offsets, tails, tmpl_offsets, tmpl, k, need_left, need_right, max_seq, max_arity,
                   max_edges, known, nomatch):
    """The forest's nodes split by their n-gram state: each old node becomes one new node per distinct state (yield
    length capped at ``k + 1`` and the boundary words its parents see) of its derivations, each old edge one new
    edge per choice of its tails' new nodes, into the new node of the state that choice makes. Returns the new
    nodes' first index per old node (``n_old + 1``), each new edge's head, old edge and tails (``max_arity``
    columns, -1 padded), the new edge count, -1 if it would pass ``max_edges``, and the new nodes' states (length,
    left and right boundaries). Edges come grouped by head in node order, as :class:`~minismt.hypergraph.Hypergraph`
    keeps them. With reference n-gram codes ``known`` (sorted; empty: none), the state is minimised against them
    (:func:`_minimise`), template words being reference-local ids."""
    n_old = in_offsets.shape[0] - 1
    width = max(k, 1)
    first_new = np.zeros(n_old + 1, dtype=np.int64)
    n_len = np.zeros(16, dtype=np.int64)
    n_left = np.zeros((16, width), dtype=np.int64)
    n_right = np.zeros((16, width), dtype=np.int64)
    e_head = np.zeros(16, dtype=np.int64)
    e_old = np.zeros(16, dtype=np.int64)
    e_tails = np.full((16, max(max_arity, 1)), -1, dtype=np.int64)
    seq = np.empty(max_seq, dtype=np.int64)
    owner = np.empty(max_seq, dtype=np.int64)
    first = np.empty(width, dtype=np.int64)
    last = np.empty(width, dtype=np.int64)
    choice = np.empty(max(max_arity, 1), dtype=np.int64)
    count = 0
    edges = 0
    for v in range(n_old):
        first_new[v] = count
        lo = in_offsets[v]
        hi = in_offsets[v + 1]
        if lo == hi:
            if count + 1 > n_len.shape[0]:
                n_len = grow(n_len, count + 1)
                n_left = grow_rows(n_left, count + 1)
                n_right = grow_rows(n_right, count + 1)
            n_len[count] = 0
            count += 1
            continue
        block = edges
        for e in range(lo, hi):
            t0 = tail_offsets[e]
            arity = tail_offsets[e + 1] - t0
            for i in range(arity):
                choice[i] = first_new[tails[t0 + i]]
            while True:
                size, n = _sequence(e, choice, tmpl_offsets, tmpl, k, n_len, n_left, n_right, seq, owner)
                m = min(n, k)
                for i in range(m):
                    first[i] = seq[i]
                    last[i] = seq[size - m + i]
                if known.shape[0] > 0:
                    _minimise(first, last, n, k, known, nomatch)
                head = -1
                for u in range(first_new[v], count):
                    if not (need_left[v] or need_right[v]) or _same_state(u, n, first, last, k, need_left[v],
                                                                          need_right[v], n_len, n_left, n_right):
                        head = u
                        break
                if head < 0:
                    if count + 1 > n_len.shape[0]:
                        n_len = grow(n_len, count + 1)
                        n_left = grow_rows(n_left, count + 1)
                        n_right = grow_rows(n_right, count + 1)
                    head = count
                    n_len[head] = n
                    for i in range(m):
                        n_left[head, i] = first[i]
                        n_right[head, i] = last[i]
                    count += 1
                if edges + 1 > max_edges:
                    return first_new, e_head, e_old, e_tails, -1, n_len, n_left, n_right
                if edges + 1 > e_head.shape[0]:
                    e_head = grow(e_head, edges + 1)
                    e_old = grow(e_old, edges + 1)
                    e_tails = grow_rows(e_tails, edges + 1)
                e_head[edges] = head
                e_old[edges] = e
                for i in range(arity):
                    e_tails[edges, i] = choice[i]
                for i in range(arity, e_tails.shape[1]):
                    e_tails[edges, i] = -1
                edges += 1
                position = arity - 1  # the next choice of tails (an odometer over their new nodes)
                while position >= 0:
                    t = tails[t0 + position]
                    choice[position] += 1
                    if choice[position] < first_new[t + 1]:
                        break
                    choice[position] = first_new[t]
                    position -= 1
                if position < 0:
                    break
        order = np.argsort(e_head[block:edges], kind="mergesort")
        e_head[block:edges] = e_head[block:edges][order]
        e_old[block:edges] = e_old[block:edges][order]
        e_tails[block:edges] = e_tails[block:edges][order]
    first_new[n_old] = count
    return first_new, e_head, e_old, e_tails, edges, n_len[:count], n_left[:count], n_right[:count]


@njit(cache=True)
def _is_known(known, seq, start, n):
    """Whether the n-gram ``seq[start:start+n]`` (reference-local ids) is among the sorted codes ``known``."""
    key = ngram_key(seq, start, n)
    at = np.searchsorted(known, key)
    return at < known.shape[0] and known[at] == key


@njit(cache=True)
def _minimise(first, last, n, k, known, nomatch):
    """A node's BLEU state: its boundary words reduced to those a reference n-gram can hold, the others
    ``nomatch``. A parent's n-gram that reaches ``j`` words into the yield holds them as its own prefix or suffix,
    a reference n-gram when it matches; and a prefix of a reference n-gram is one (a suffix too). So only the
    longest prefix of the left boundary that is a reference n-gram, and the longest such suffix of the right one,
    can be in a match (a short yield, ``n <= k``, is one sequence: its words outside both are never matched); the
    rest can be any word no reference holds, the lengths kept for the counts. KenLM's state minimisation, with
    the references as the language model."""
    if n <= k:
        p = 0
        while p < n and _is_known(known, first, 0, p + 1):
            p += 1
        q = 0
        while q < n - p and _is_known(known, first, n - q - 1, q + 1):
            q += 1
        for i in range(p, n - q):
            first[i] = nomatch
            last[i] = nomatch
        return
    p = 0
    while p < k and _is_known(known, first, 0, p + 1):
        p += 1
    for i in range(p, k):
        first[i] = nomatch
    q = 0
    while q < k and _is_known(known, last, k - q - 1, q + 1):
        q += 1
    for i in range(k - q):
        last[i] = nomatch


@njit(cache=True)
def edge_bleu_counts(tail_offsets, tails, tmpl_offsets, tmpl, k, length, left, right, barrier, max_seq, known,
                     out):
    """``out[e]``: edge ``e``'s BLEU statistics ``[m1, t1, ..., m_{k+1}, t_{k+1}]``: the n-grams it creates of each
    order (``t``) and those of them among the reference codes ``known`` (``m``, unclipped)."""
    seq = np.empty(max_seq, dtype=np.int64)
    owner = np.empty(max_seq, dtype=np.int64)
    grams = np.empty((max_seq * (k + 1), k + 1), dtype=np.int64)
    orders = np.empty(max_seq * (k + 1), dtype=np.int32)
    for e in range(out.shape[0]):
        edge_tails = tails[tail_offsets[e]:tail_offsets[e + 1]]
        size, _ = _sequence(e, edge_tails, tmpl_offsets, tmpl, k, length, left, right, seq, owner)
        found = _scan(seq, owner, size, k, barrier, e, grams, orders, 0, True)
        for row in range(found):
            n = orders[row]
            out[e, 2 * (n - 1) + 1] += 1
            if _is_known(known, grams[row], 0, n):
                out[e, 2 * (n - 1)] += 1

