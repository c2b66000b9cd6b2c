"""Lazy k-best derivations of a hypergraph (Huang & Chiang 2005, "Better k-best parsing", Algorithm 3).

After a Viterbi pass gives every node its 1-best, ``LazyKthBest(goal, k)``
asks each node for only as many derivations as its parents need. A derivation
is ``<e, j>``: an incoming edge and, for each tail ``T_i(e)``, the rank ``j_i``
of the tail's derivation it uses; popping ``<e, j>`` from the node's candidate
heap pushes its neighbours ``<e, j + b^i>``. Cost: ``O(|E| + |D| k log k)``
where ``|D|`` is the size of the largest derivation. The search is
:func:`minismt.hypergraph._kernels.lazy_kbest`.

``distinct=True`` gives the k best *distinct yields* (cdec ``-r``): every node
keeps only derivations whose target string it has not produced yet, so each
yield comes with its best derivation.

Results carry, per derivation, its score ``w . f``, its feature vector (the sum
over its edges, repeated edges counted each time), its yield and its edges in
pre-order; :meth:`KBestList.bleu_stats` gives BLEU statistics against
references and :meth:`KBestList.add_to` appends the list to a
:class:`~minismt.kbest.KBestBuilder` for the n-best tuners.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph import _kernels
from minismt.kbest import KBestRows


@dataclass(frozen=True, eq=False)
class Derivation:
    """One derivation: score, target string, pre-order edges and summed sparse features."""

    score: float
    text: str
    edges: np.ndarray
    feature_ids: np.ndarray
    feature_values: np.ndarray
    space: FeatureSpace

    def features(self) -> dict[str, float]:
        """``{name: value}`` of the nonzero features."""
        return {self.space.name(int(i)): float(v) for i, v in zip(self.feature_ids, self.feature_values)}

    def dense(self) -> np.ndarray:
        """The feature vector as a dense array over the feature space."""
        out = np.zeros(len(self.space))
        out[self.feature_ids] = self.feature_values
        return out


class KBestList:
    """The k best derivations of a hypergraph, best first, as arrays.

    ``scores`` float64[N]; ``texts`` list of N yields; ``edge_offsets`` /
    ``edges``: CSR of each derivation's edges in pre-order; ``feat_offsets`` /
    ``feat_ids`` / ``feat_values``: CSR of each derivation's summed features
    (sorted ids, zeros left out) over ``space``.
    """

    def __init__(self, space: FeatureSpace, scores, texts, edge_offsets, edges, feat_offsets, feat_ids,
                 feat_values):
        self.space = space
        self.scores = np.asarray(scores, dtype=np.float64)
        self.texts = list(texts)
        self.edge_offsets = edge_offsets
        self.edges = edges
        self.feat_offsets = feat_offsets
        self.feat_ids = feat_ids
        self.feat_values = feat_values

    def __len__(self) -> int:
        return self.scores.shape[0]

    def __repr__(self) -> str:
        return f"KBestList({len(self)} derivations)"

    def __getitem__(self, i: int) -> Derivation:
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        lo, hi = self.feat_offsets[i], self.feat_offsets[i + 1]
        return Derivation(float(self.scores[i]), self.texts[i],
                          self.edges[self.edge_offsets[i]:self.edge_offsets[i + 1]],
                          self.feat_ids[lo:hi], self.feat_values[lo:hi], self.space)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def dense_features(self) -> np.ndarray:
        """float64[N, len(space)]: every derivation's feature vector."""
        out = np.zeros((len(self), len(self.space)))
        rows = np.repeat(np.arange(len(self)), np.diff(self.feat_offsets))
        out[rows, self.feat_ids] = self.feat_values
        return out

    def feature_dicts(self) -> list[dict[str, float]]:
        """``{name: value}`` of every derivation."""
        return [d.features() for d in self]

    def bleu_stats(self, references, sentence: int) -> np.ndarray:
        """int32[N, 9] BLEU statistics of the yields against sentence ``sentence`` of a
        :class:`~minismt.metrics.BleuReferences`."""
        return references.stats(np.full(len(self), sentence, dtype=np.int64), self.texts)

    def rows(self) -> KBestRows:
        """The derivations as one sentence's rows of a :class:`~minismt.kbest.KBest`
        (:func:`~minismt.kbest.kbest_of` joins the rows of several sentences)."""
        return KBestRows.of(self.texts, self.scores, self.feat_offsets, self.feat_ids, self.feat_values, self.space)

def kbest(hg, k: int, w=None, distinct: bool = False) -> KBestList:
    """The ``k`` best derivations of ``hg``'s goal under ``w`` (or its stored scores), best first.

    Fewer come back when the forest has fewer (distinct) derivations. Ties keep
    the order in which the search made the derivations.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise InputError(f"k = {k!r}", expected="an integer >= 0")
    scores = hg.edge_scores(w)
    empty_i = np.zeros(1, dtype=np.int64)
    if hg.n_nodes == 0 or k == 0:
        return KBestList(hg.space, [], [], empty_i, np.zeros(0, np.int32), empty_i, np.zeros(0, np.int32),
                         np.zeros(0))
    vit = np.empty(hg.n_nodes)
    best = np.empty(hg.n_nodes, dtype=np.int64)
    _kernels.inside(hg.in_offsets, hg.tail_offsets, hg.tails, scores, _kernels.VITERBI, vit, best)
    ids, d_edge, d_score, d_len, d_rank_off, d_child = _kernels.lazy_kbest(
        hg.in_offsets, hg.tail_offsets, hg.tails, hg.tmpl_offsets, hg.tmpl, scores, vit, best, int(k),
        bool(distinct))
    tok_offsets, tokens, edge_offsets, edges = _kernels.expand_derivations(
        ids, d_edge, d_len, d_rank_off, d_child, hg.tail_offsets, hg.tmpl_offsets, hg.tmpl, hg.n_nodes)
    feat_offsets, feat_ids, feat_values = _kernels.feature_sums(
        edge_offsets, edges, hg.feat_offsets, hg.feat_ids, hg.feat_values, max(hg.feat_dim, 1))
    vocab = hg.vocab
    words = tokens.tolist()
    texts = [" ".join([vocab[t] for t in words[tok_offsets[i]:tok_offsets[i + 1]]]) for i in range(ids.shape[0])]
    return KBestList(hg.space, d_score[ids], texts, edge_offsets, edges, feat_offsets, feat_ids, feat_values)
