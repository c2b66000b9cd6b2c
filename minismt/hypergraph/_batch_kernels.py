"""Numba kernels of :mod:`minismt.hypergraph.batch`: Viterbi + yields + BLEU statistics of a dev set of forests.

All forests of a dev set are concatenated into one set of arrays (see
:class:`minismt.hypergraph.batch.ForestBatch`): node ids are global (forest
``f`` owns nodes ``node_off[f]:node_off[f+1]``, its goal is the last one),
``in_offsets`` / ``tail_offsets`` / ``feat_offsets`` / ``tmpl_offsets`` index
global edge ids, and a template word is an *entry* id: entry ``k`` stands for
one vocabulary word of one dev sentence and expands to the reference-local
token ids ``ent_tokens[ent_offsets[k]:ent_offsets[k+1]]`` (-1 for a token no
reference of that sentence has; usually exactly one token).

The Viterbi pass and the yield walk are the forest core's
(:func:`minismt.hypergraph._kernels.edge_scores`, :func:`~minismt.hypergraph._kernels.inside`,
:func:`~minismt.hypergraph._kernels.walk_yield`) over the concatenated arrays, so
scores, ties and derivations are bit-identical to :meth:`Hypergraph.viterbi`; the
statistics come from :func:`minismt.metrics._kernels.hypothesis_stats`, the kernel of
:meth:`BleuReferences.stats`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from minismt.hypergraph._kernels import VITERBI, edge_scores, inside, viterbi_child_offsets, walk_yield
from minismt.metrics._kernels import bleu_from_sums, hypothesis_stats

N_STATS = 9


@njit(cache=True)
def new_scratch(n_nodes, n_edges):
    """The arrays of one Viterbi pass: edge scores, node values, back-pointers."""
    return np.empty(n_edges), np.empty(n_nodes), np.empty(n_nodes, np.int64)


@njit(cache=True)
def viterbi_all(w, in_offsets, tail_offsets, tails, feat_offsets, feat_ids, feat_values, score, value, best_edge):
    """The max-semiring inside pass over every node of every forest under ``w``.

    ``score[e]`` gets the edge scores, ``value[v]`` the best derivation score of
    node ``v`` (0 for a start node), ``best_edge[v]`` its first maximising
    in-edge (-1 for a start node). Returns False when some edge score is not
    finite (as :meth:`Hypergraph.edge_scores`).
    """
    finite = edge_scores(feat_offsets, feat_ids, feat_values, w, score)
    inside(in_offsets, tail_offsets, tails, score, VITERBI, value, best_edge)
    return finite


@njit(cache=True)
def choose_forests(value, node_off, sent_offsets, sent_forests, chosen):
    """``chosen[s]``: the forest of sentence ``s`` whose goal scores best (the first one on ties)."""
    for s in range(chosen.shape[0]):
        best = -1
        best_score = 0.0
        for q in range(sent_offsets[s], sent_offsets[s + 1]):
            f = sent_forests[q]
            score = value[node_off[f + 1] - 1]
            if best == -1 or score > best_score:
                best = f
                best_score = score
        chosen[s] = best


@njit(cache=True)
def yields(chosen, node_off, best_edge, tail_offsets, tails, tmpl_offsets, tmpl, ent_offsets, ent_tokens,
           max_nodes):
    """CSR ``(offsets, tokens)`` of the Viterbi yield of every sentence's chosen forest.

    ``ent_offsets`` empty: the raw template items (vocabulary ids); else each
    item (an entry) expanded to its reference-local tokens.
    """
    n_sent = chosen.shape[0]
    child_off = viterbi_child_offsets(best_edge, tail_offsets)
    frame_item = np.empty(max_nodes + 1, np.int64)
    frame_pos = np.empty(max_nodes + 1, np.int64)
    item_offsets = np.zeros(n_sent + 1, np.int64)
    none = np.empty(0, np.int32)
    for s in range(n_sent):
        goal = node_off[chosen[s] + 1] - 1
        item_offsets[s + 1] = item_offsets[s] + walk_yield(goal, best_edge, child_off, tails, tmpl_offsets, tmpl,
                                                           frame_item, frame_pos, none, 0, False)
    items = np.empty(item_offsets[n_sent], np.int32)
    for s in range(n_sent):
        goal = node_off[chosen[s] + 1] - 1
        walk_yield(goal, best_edge, child_off, tails, tmpl_offsets, tmpl, frame_item, frame_pos, items,
                   item_offsets[s], True)
    if ent_offsets.shape[0] == 0:
        return item_offsets, items
    offsets = np.zeros(n_sent + 1, np.int64)
    for s in range(n_sent):
        n = 0
        for q in range(item_offsets[s], item_offsets[s + 1]):
            n += ent_offsets[items[q] + 1] - ent_offsets[items[q]]
        offsets[s + 1] = offsets[s] + n
    tokens = np.empty(offsets[n_sent], np.int32)
    p = 0
    for q in range(items.shape[0]):
        for r in range(ent_offsets[items[q]], ent_offsets[items[q] + 1]):
            tokens[p] = ent_tokens[r]
            p += 1
    return offsets, tokens


@njit(cache=True)
def forest_stats(w, in_offsets, tail_offsets, tails, feat_offsets, feat_ids, feat_values, tmpl_offsets, tmpl,
                 node_off, sent_offsets, sent_forests, ent_offsets, ent_tokens, max_nodes, ref_keys, ref_counts,
                 ref_key_offsets, ref_lens, ref_len_offsets, out, scratch):
    """``out[s]`` = int32[9] BLEU statistics of sentence ``s``'s Viterbi translation under ``w``.

    ``scratch`` (:func:`new_scratch`) holds the pass's arrays. Returns False
    (``out`` untouched) when an edge score is not finite.
    """
    score, value, best_edge = scratch
    if not viterbi_all(w, in_offsets, tail_offsets, tails, feat_offsets, feat_ids, feat_values, score, value,
                       best_edge):
        return False
    n_sent = out.shape[0]
    chosen = np.empty(n_sent, np.int64)
    choose_forests(value, node_off, sent_offsets, sent_forests, chosen)
    offsets, tokens = yields(chosen, node_off, best_edge, tail_offsets, tails, tmpl_offsets, tmpl, ent_offsets,
                             ent_tokens, max_nodes)
    hypothesis_stats(tokens, offsets, np.arange(n_sent), ref_keys, ref_counts, ref_key_offsets, ref_lens,
                     ref_len_offsets, out)
    return True


@njit(cache=True, parallel=True)
def forest_bleu_many(W, in_offsets, tail_offsets, tails, feat_offsets, feat_ids, feat_values, tmpl_offsets, tmpl,
                     node_off, sent_offsets, sent_forests, ent_offsets, ent_tokens, max_nodes, ref_keys, ref_counts,
                     ref_key_offsets, ref_lens, ref_len_offsets, smooth, n_threads, out, finite):
    """``out[k]`` = corpus BLEU under ``W[k]`` (the weight vectors in parallel); ``finite[k]`` False
    when an edge score under ``W[k]`` is not finite (``out[k]`` is then NaN). Each of the
    ``n_threads`` threads takes a contiguous block of rows and reuses one scratch for them."""
    n_sent = sent_offsets.shape[0] - 1
    n_points = W.shape[0]
    n_chunks = max(1, min(n_threads, n_points))
    for c in prange(n_chunks):
        scratch = new_scratch(in_offsets.shape[0] - 1, feat_offsets.shape[0] - 1)
        stats = np.zeros((n_sent, N_STATS), np.int32)
        for k in range(c * n_points // n_chunks, (c + 1) * n_points // n_chunks):
            ok = forest_stats(W[k], in_offsets, tail_offsets, tails, feat_offsets, feat_ids, feat_values,
                              tmpl_offsets, tmpl, node_off, sent_offsets, sent_forests, ent_offsets, ent_tokens,
                              max_nodes, ref_keys, ref_counts, ref_key_offsets, ref_lens, ref_len_offsets, stats,
                              scratch)
            finite[k] = ok
            if ok:
                sums = np.zeros(N_STATS, np.float64)
                for s in range(n_sent):
                    for j in range(N_STATS):
                        sums[j] += stats[s, j]
                out[k] = bleu_from_sums(sums, smooth)
            else:
                out[k] = np.nan

