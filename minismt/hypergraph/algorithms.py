"""Viterbi, inside/outside, posteriors, max-marginals and pruning of a :class:`Hypergraph`.

Semiring parsing over a topologically sorted forest (Goodman 1999), as cdec
does it (``decoder/viterbi.h``, ``decoder/inside_outside.h``): one bottom-up
pass computes the inside value of every node,

    beta(v) = (+)_{e in IN(v)}  s_e (x) (x)_{u in T(e)} beta(u),        s_e = w . f_e,

and one top-down pass the outside value,

    alpha(goal) = 1,   alpha(u) = (+)_{e: u in T(e)} alpha(head(e)) (x) s_e (x) (x)_{u' in T(e), u' != u} beta(u'),

in the Viterbi semiring (max, +) or the log semiring (log-sum-exp, +); these are
the inside and outside algorithms of Li & Eisner (2009, Fig. 1-2, "First- and
second-order expectation semirings"), computed in log space. A start node (no
incoming edge) has inside value 1 (score 0), as in cdec.

From them: the edge marginal ``alpha(head) (x) s_e (x) prod beta(tails)`` is the
max-marginal of ``e`` in the Viterbi semiring and ``Z`` times its posterior
(expected count) in the log semiring, ``Z = beta(goal)``.

Pruning keeps an edge if the best derivation through it is at least
``threshold`` times as probable as the best derivation overall
(``by="max_marginal"``: cdec's ``--beam_prune`` with beam ``-log threshold``),
or if its posterior is at least ``threshold`` (``by="posterior"``); then what is
dead or unreachable goes and the nodes are renumbered.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from minismt.errors import InputError
from minismt.hypergraph import _kernels
from minismt.hypergraph.derivations import Derivation

if TYPE_CHECKING:  # the class's methods call these functions: graph.py imports this module
    from minismt.hypergraph.graph import Hypergraph


def _scores(hg: Hypergraph, w) -> np.ndarray:
    """Edge scores under ``w``, or the stored ones of a reweighted hypergraph."""
    return hg.edge_scores(w)


def viterbi_scores(hg: Hypergraph, w=None) -> tuple[np.ndarray, np.ndarray]:
    """Best score of every node and its back-pointer (the first best incoming edge; -1 at start nodes)."""
    return _inside(hg, _scores(hg, w), _kernels.VITERBI)


def viterbi(hg: Hypergraph, w=None):
    """The best derivation of the goal, or None for the empty hypergraph."""
    if hg.n_nodes == 0:
        return None
    value, best = viterbi_scores(hg, w)
    words, edges = _kernels.viterbi_tree(best, hg.tail_offsets, hg.tails, hg.tmpl_offsets, hg.tmpl, hg.goal)
    offsets, ids, values = _kernels.feature_sums(np.array([0, edges.shape[0]], dtype=np.int64), edges,
                                                 hg.feat_offsets, hg.feat_ids, hg.feat_values, max(hg.feat_dim, 1))
    return Derivation(float(value[hg.goal]), " ".join(hg.vocab.decode(words)), edges, ids, values, hg.space)


def inside(hg: Hypergraph, w=None) -> np.ndarray:
    """Log inside score ``log beta(v)`` of every node."""
    return _inside(hg, _scores(hg, w), _kernels.LOG)[0]


def outside(hg: Hypergraph, w=None, inside_value=None) -> np.ndarray:
    """Log outside score ``log alpha(v)`` of every node (``-inf`` for nodes no goal derivation uses)."""
    scores = _scores(hg, w)
    if inside_value is None:
        inside_value, _ = _inside(hg, scores, _kernels.LOG)
    value = np.empty(hg.n_nodes)
    _kernels.outside(hg.edge_head, hg.tail_offsets, hg.tails, scores,
                     np.ascontiguousarray(inside_value, dtype=np.float64), _kernels.LOG, value)
    return value


def log_partition(hg: Hypergraph, w=None) -> float:
    """``log Z``, the log-sum-exp of all goal derivations' scores (``-inf`` if there is no node)."""
    if hg.n_nodes == 0:
        return -math.inf
    return float(inside(hg, w)[hg.goal])


def _inside(hg: Hypergraph, scores: np.ndarray, semiring: int) -> tuple[np.ndarray, np.ndarray]:
    value = np.empty(hg.n_nodes)
    best = np.empty(hg.n_nodes, dtype=np.int64)
    _kernels.inside(hg.in_offsets, hg.tail_offsets, hg.tails, scores, semiring, value, best)
    return value, best


def _marginals(hg: Hypergraph, scores: np.ndarray, semiring: int):
    """Inside, outside and edge marginals in one semiring."""
    inside_value, _ = _inside(hg, scores, semiring)
    outside_value = np.empty(hg.n_nodes)
    _kernels.outside(hg.edge_head, hg.tail_offsets, hg.tails, scores, inside_value, semiring, outside_value)
    edge_value = np.empty(hg.n_edges)
    _kernels.edge_marginals(hg.edge_head, hg.tail_offsets, hg.tails, scores, inside_value, outside_value,
                            edge_value)
    return inside_value, outside_value, edge_value


def edge_posteriors(hg: Hypergraph, w=None) -> np.ndarray:
    """``alpha(head) s_e prod beta(tails) / Z``: the expected number of times a derivation uses ``e``."""
    if hg.n_nodes == 0:
        return np.zeros(0)
    inside_value, _, edge_value = _marginals(hg, _scores(hg, w), _kernels.LOG)
    return np.exp(edge_value - inside_value[hg.goal])


def node_posteriors(hg: Hypergraph, w=None) -> np.ndarray:
    """``alpha(v) beta(v) / Z``: the expected number of times a derivation uses node ``v``."""
    if hg.n_nodes == 0:
        return np.zeros(0)
    inside_value, outside_value, _ = _marginals(hg, _scores(hg, w), _kernels.LOG)
    return np.exp(inside_value + outside_value - inside_value[hg.goal])


def max_marginals(hg: Hypergraph, w=None) -> np.ndarray:
    """Score of the best goal derivation that uses each edge (``-inf`` if none does)."""
    if hg.n_nodes == 0:
        return np.zeros(0)
    return _marginals(hg, _scores(hg, w), _kernels.VITERBI)[2]


def prune_mask(hg: Hypergraph, threshold: float, w=None, by: str = "max_marginal") -> np.ndarray:
    """Edges kept by pruning at ``threshold`` in (0, 1].

    ``by="max_marginal"``: keep ``e`` if ``exp(max_marginal(e) - viterbi) >= threshold``
    (1 keeps only edges of best derivations). ``by="posterior"``: keep ``e``
    if its posterior is ``>= threshold``; the edges of the Viterbi derivation
    are kept too, so that the pruned forest is never empty.
    """
    threshold = float(threshold)
    if not (0.0 < threshold <= 1.0):
        raise InputError(f"pruning threshold {threshold}", expected="a number in (0, 1]")
    if by not in ("max_marginal", "posterior"):
        raise InputError(f"pruning by {by!r}", expected="'max_marginal' or 'posterior'")
    if hg.n_nodes == 0:
        return np.zeros(0, dtype=bool)
    scores = _scores(hg, w)
    if by == "max_marginal":
        inside_value, _, edge_value = _marginals(hg, scores, _kernels.VITERBI)
        return edge_value - inside_value[hg.goal] >= math.log(threshold)
    log_inside, _, log_edge = _marginals(hg, scores, _kernels.LOG)
    keep = log_edge - log_inside[hg.goal] >= math.log(threshold)
    _, best = _inside(hg, scores, _kernels.VITERBI)
    _, edges = _kernels.viterbi_tree(best, hg.tail_offsets, hg.tails, hg.tmpl_offsets, hg.tmpl, hg.goal)
    keep[edges] = True
    return keep


def prune(hg: Hypergraph, threshold: float, w=None, by: str = "max_marginal") -> Hypergraph:
    """The forest of the edges :func:`prune_mask` keeps, without dead or unreachable parts."""
    return subgraph(hg, prune_mask(hg, threshold, w, by))


def best_edges_mask(hg: Hypergraph, n_edges: int, w=None) -> np.ndarray:
    """The ``n_edges`` edges with the highest max-marginal (the score of the best derivation through the
    edge), and every edge tied with the last of them: Moses' forest pruning for hypergraph MIRA
    (``Graph::Prune`` in mert/Hypergraph.cpp, ``kbmira --hg-prune``). The Viterbi derivation's edges have
    the highest max-marginal, so they are always kept (``n_edges`` >= 1)."""
    if isinstance(n_edges, bool) or not isinstance(n_edges, (int, np.integer)) or n_edges < 1:
        raise InputError(f"n_edges={n_edges!r}", expected="an integer >= 1")
    if hg.n_edges <= n_edges:
        return np.ones(hg.n_edges, dtype=bool)
    _, _, edge_value = _marginals(hg, _scores(hg, w), _kernels.VITERBI)
    cut = np.partition(edge_value, hg.n_edges - n_edges)[hg.n_edges - n_edges]
    return edge_value >= cut


def _gather(offsets: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """New CSR offsets and source positions of the kept rows of a CSR block."""
    lengths = np.diff(offsets)[keep]
    new_offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    starts = offsets[:-1][keep]
    positions = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1], dtype=np.int64)
    return new_offsets, positions


def subgraph(hg: Hypergraph, edge_mask) -> Hypergraph:
    """The forest made of the edges in ``edge_mask``.

    Nodes that lose all their incoming edges die (start nodes stay start nodes),
    and so do the edges that use them; what no goal derivation reaches is
    dropped; nodes keep their order and are renumbered. If the goal dies, the
    result is the empty hypergraph.
    """
    edge_mask = np.asarray(edge_mask, dtype=bool)
    if edge_mask.shape != (hg.n_edges,):
        raise InputError(f"edge mask of shape {edge_mask.shape}", expected=f"({hg.n_edges},)")
    node_keep = np.zeros(hg.n_nodes, dtype=bool)
    edge_keep = np.zeros(hg.n_edges, dtype=bool)
    _kernels.live_parts(hg.in_offsets, hg.edge_head, hg.tail_offsets, hg.tails, edge_mask, node_keep, edge_keep)
    new_id = np.cumsum(node_keep, dtype=np.int64) - 1
    n = int(node_keep.sum())
    heads = new_id[hg.edge_head[edge_keep]]
    in_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(heads, minlength=n), out=in_offsets[1:])
    tail_offsets, tail_pos = _gather(hg.tail_offsets, edge_keep)
    feat_offsets, feat_pos = _gather(hg.feat_offsets, edge_keep)
    tmpl_offsets, tmpl_pos = _gather(hg.tmpl_offsets, edge_keep)
    return hg.replace(  # a plain Hypergraph, also for a subclass's forest
        n_nodes=n, in_offsets=in_offsets, tail_offsets=tail_offsets,
        tails=new_id[hg.tails[tail_pos]].astype(np.int32), feat_offsets=feat_offsets,
        feat_ids=hg.feat_ids[feat_pos], feat_values=hg.feat_values[feat_pos], tmpl_offsets=tmpl_offsets,
        tmpl=hg.tmpl[tmpl_pos], edge_rule=None if hg.edge_rule is None else hg.edge_rule[edge_keep],
        node_cat=None if hg.node_cat is None else [c for c, k in zip(hg.node_cat, node_keep) if k],
        spans=None if hg.spans is None else hg.spans[edge_keep],
        node_hash=None if hg.node_hash is None else hg.node_hash[node_keep],
        scores=None if hg.scores is None else hg.scores[edge_keep])
