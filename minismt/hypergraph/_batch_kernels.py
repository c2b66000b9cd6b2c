"""Numba kernels of :mod:`minismt.hypergraph.batch`: Viterbi + yields + BLEU statistics of a dev set of forests.

All forests of a dev set are concatenated into one set of arrays (see
:class:`minismt.hypergraph.batch.ForestBatch`): node ids are global (forest
``f`` owns nodes ``node_off[f]:node_off[f+1]``, its goal is the last one),
``in_offsets`` / ``tail_offsets`` / ``feat_offsets`` / ``tmpl_offsets`` index
global edge ids, and a template word is an *entry* id: entry ``k`` stands for
one vocabulary word of one dev sentence and expands to the reference-local
token ids ``ent_tokens[ent_offsets[k]:ent_offsets[k+1]]`` (-1 for a token no
reference of that sentence has; usually exactly one token).

The arithmetic is the one of :mod:`minismt.hypergraph._kernels` (edge score
``s = 0; s += w[id] * value`` in feature order, then ``x = s + value[tail]``
in tail order, the first maximising edge wins), so scores, ties and
derivations are bit-identical to :meth:`Hypergraph.viterbi`; the statistics
come from :func:`minismt.metrics._kernels.hypothesis_stats`, the kernel of
:meth:`BleuReferences.stats`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from minismt.metrics._kernels import bleu_from_sums, hypothesis_stats

N_STATS = 9


@njit(cache=True)
def viterbi_all(w, in_offsets, tail_offsets, tails, feat_offsets, feat_ids, feat_values, value, best_edge):
    """Max-semiring inside pass over every node of every forest (edge scoring fused in).

    ``value[v]`` = best derivation score of node ``v`` (0 for a start node),
    ``best_edge[v]`` its first maximising in-edge (-1 for a start node).
    Returns False when some edge score is not finite (as :meth:`Hypergraph.edge_scores`).
    """
    finite = True
    n = value.shape[0]
    for v in range(n):
        lo = in_offsets[v]
        hi = in_offsets[v + 1]
        best_edge[v] = -1
        if lo == hi:
            value[v] = 0.0
            continue
        acc = -np.inf
        for e in range(lo, hi):
            s = 0.0
            for p in range(feat_offsets[e], feat_offsets[e + 1]):
                s += w[feat_ids[p]] * feat_values[p]
            if not math.isfinite(s):
                finite = False
            x = s
            for p in range(tail_offsets[e], tail_offsets[e + 1]):
                x += value[tails[p]]
            if best_edge[v] == -1 or x > acc:
                acc = x
                best_edge[v] = e
        value[v] = acc
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
def _walk(goal, best_edge, tail_offsets, tails, tmpl_offsets, tmpl, ent_offsets, ent_tokens, frame_node,
          frame_pos, out, start, write):
    """Walk the Viterbi derivation of ``goal`` in template order; returns its number of tokens.

    With ``write``, the tokens (expanded entries; with ``ent_offsets`` None-like
    empty, the raw template items) go to ``out[start:]``.
    """
    n = 0
    e = best_edge[goal]
    if e < 0:
        return 0
    frame_node[0] = goal
    frame_pos[0] = tmpl_offsets[e]
    sp = 1
    while sp > 0:
        v = frame_node[sp - 1]
        e = best_edge[v]
        pos = frame_pos[sp - 1]
        if pos == tmpl_offsets[e + 1]:
            sp -= 1
            continue
        frame_pos[sp - 1] = pos + 1
        item = tmpl[pos]
        if item >= 0:
            if ent_offsets.shape[0] == 0:
                if write:
                    out[start + n] = item
                n += 1
            else:
                lo = ent_offsets[item]
                hi = ent_offsets[item + 1]
                if write:
                    for p in range(lo, hi):
                        out[start + n + p - lo] = ent_tokens[p]
                n += hi - lo
        else:
            t = tails[tail_offsets[e] - item - 1]
            if best_edge[t] >= 0:
                frame_node[sp] = t
                frame_pos[sp] = tmpl_offsets[best_edge[t]]
                sp += 1
    return n


@njit(cache=True)
def yields(chosen, node_off, best_edge, tail_offsets, tails, tmpl_offsets, tmpl, ent_offsets, ent_tokens,
           max_nodes):
    """CSR ``(offsets, tokens)`` of the Viterbi yield of every sentence's chosen forest.

    ``ent_offsets`` empty: the raw template items (vocabulary ids); else the
    expanded reference-local tokens. Two walks (count, then write).
    """
    n_sent = chosen.shape[0]
    frame_node = np.empty(max_nodes + 1, np.int64)
    frame_pos = np.empty(max_nodes + 1, np.int64)
    offsets = np.zeros(n_sent + 1, np.int64)
    dummy = np.empty(0, np.int32)
    for s in range(n_sent):
        goal = node_off[chosen[s] + 1] - 1
        offsets[s + 1] = offsets[s] + _walk(goal, best_edge, tail_offsets, tails, tmpl_offsets, tmpl, ent_offsets,
                                            ent_tokens, frame_node, frame_pos, dummy, 0, False)
    tokens = np.empty(offsets[n_sent], np.int32)
    for s in range(n_sent):
        goal = node_off[chosen[s] + 1] - 1
        _walk(goal, best_edge, tail_offsets, tails, tmpl_offsets, tmpl, ent_offsets, ent_tokens, frame_node,
              frame_pos, tokens, offsets[s], True)
    return offsets, tokens


@njit(cache=True)
def forest_stats(w, in_offsets, tail_offsets, tails, feat_offsets, feat_ids, feat_values, tmpl_offsets, tmpl,
                 node_off, sent_offsets, sent_forests, ent_offsets, ent_tokens, max_nodes, ref_keys, ref_counts,
                 ref_key_offsets, ref_lens, ref_len_offsets, out):
    """``out[s]`` = int32[9] BLEU statistics of sentence ``s``'s Viterbi translation under ``w``.

    Returns False (``out`` untouched) when an edge score is not finite.
    """
    n_nodes = in_offsets.shape[0] - 1
    value = np.empty(n_nodes)
    best_edge = np.empty(n_nodes, np.int64)
    if not viterbi_all(w, in_offsets, tail_offsets, tails, feat_offsets, feat_ids, feat_values, value, best_edge):
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
                     ref_key_offsets, ref_lens, ref_len_offsets, smooth, out, finite):
    """``out[k]`` = corpus BLEU under ``W[k]`` (the weight vectors in parallel); ``finite[k]`` False
    when an edge score under ``W[k]`` is not finite (``out[k]`` is then NaN)."""
    n_sent = sent_offsets.shape[0] - 1
    for k in prange(W.shape[0]):
        stats = np.zeros((n_sent, N_STATS), np.int32)
        ok = forest_stats(W[k], in_offsets, tail_offsets, tails, feat_offsets, feat_ids, feat_values, tmpl_offsets,
                          tmpl, node_off, sent_offsets, sent_forests, ent_offsets, ent_tokens, max_nodes, ref_keys,
                          ref_counts, ref_key_offsets, ref_lens, ref_len_offsets, stats)
        finite[k] = ok
        if ok:
            sums = np.zeros(N_STATS, np.float64)
            for s in range(n_sent):
                for j in range(N_STATS):
                    sums[j] += stats[s, j]
            out[k] = bleu_from_sums(sums, smooth)
        else:
            out[k] = np.nan

