"""The array hypergraph (forest) and a builder for decoders.

A :class:`Hypergraph` is a topologically sorted forest: every edge's tails are
earlier nodes than its head, and the goal (root) is the last node. Its arrays::

    n_nodes                                    number of nodes
    in_offsets    int64[n+1]                   node v's incoming edges are in_offsets[v]:in_offsets[v+1]
    edge_head     int32[E]                     head node of each edge (edges are grouped by head, in node order)
    tail_offsets  int64[E+1], tails int32  tails of edge e: tails[tail_offsets[e]:tail_offsets[e+1]]
    feat_offsets  int64[E+1], feat_ids int32, feat_values float64
                                                   sparse features of each edge over space
    tmpl_offsets  int64[E+1], tmpl int32   target-side template: a word id (>= 0, in vocab)
                                                   or -(i+1) for the yield of tail i (0-based)

and what only the cdec JSON writer needs: ``rules`` (rule strings) with
``edge_rule`` (index into ``rules`` or -1), ``node_cat`` (category per node, or
None), ``spans`` (int32[E, 4]) and ``node_hash`` (uint64[n]); ``scores``
(float64[E]) holds edge scores set by :meth:`Hypergraph.reweight`, and
``feat_dim`` is the largest feature id used + 1 (the shortest weight array).

A node with no incoming edge is a start node (as node 0 of a lattice): it has
one empty derivation of score 0, as in cdec. So every node has a derivation,
and a derivation is a tree: a node used twice is expanded twice.

The algorithms are methods here and live in :mod:`minismt.hypergraph.algorithms`
(Viterbi, inside/outside, posteriors, pruning) and :mod:`minismt.hypergraph.derivations`.
"""

from __future__ import annotations

import copy
from typing import Mapping, Sequence

import numpy as np

from minismt.corpus import Vocabulary
from minismt.errors import InputError, finite_number
from minismt.features import FeatureSpace
from minismt.hypergraph import _kernels, algorithms, derivations


def _array(values, dtype, name: str, ndim: int = 1) -> np.ndarray:
    """``values`` as a contiguous array of ``dtype``; a lossy conversion is an InputError."""
    dtype = np.dtype(dtype)
    try:
        raw = np.asarray(values)
    except (TypeError, ValueError) as err:
        raise InputError(f"{name} is not an array ({err})") from None
    if raw.ndim != ndim:
        raise InputError(f"{name} has {raw.ndim} dimensions", expected=f"{ndim}")
    # numbers whose type holds every value of ``dtype``'s need no range check
    if raw.size and not (raw.dtype.kind in "iuf" and np.can_cast(raw.dtype, dtype, "safe")):
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            if raw.dtype.kind not in "iu" or raw.min() < info.min or raw.max() > info.max:
                raise InputError(f"{name} is not an array of {dtype.name}", expected=f"integers that fit {dtype.name}")
        elif raw.dtype.kind not in "iuf":
            raise InputError(f"{name} is not an array of numbers", expected=dtype.name)
    return np.ascontiguousarray(raw, dtype=dtype)


def _check_offsets(offsets: np.ndarray, n: int, end: int | None, name: str) -> None:
    if offsets.shape != (n + 1,):
        raise InputError(f"{name} has {offsets.shape[0]} entries", expected=f"{n + 1}")
    if offsets[0] != 0 or _kernels.first_decrease(offsets) >= 0:
        raise InputError(f"{name} is not a non-decreasing sequence starting at 0")
    if end is not None and offsets[-1] != end:
        raise InputError(f"{name} ends at {offsets[-1]}", expected=f"{end}, the length of the data it indexes")


def concatenated(graphs: Sequence["Hypergraph"], offsets_name: str, data_name: str, shift_data=None):
    """One CSR pair over ``graphs`` in turn (their ids made global): the ``offsets_name`` offsets, each graph's
    moved past the items before it, and the ``data_name`` items, graph ``i``'s passed through
    ``shift_data(items, i)`` when given (e.g. tails moved past the nodes before)."""
    offsets = [np.zeros(1, np.int64)]
    items = []
    base = 0
    for i, graph in enumerate(graphs):
        offset = getattr(graph, offsets_name)
        offsets.append(offset[1:] + base)
        base += int(offset[-1])
        data = getattr(graph, data_name)
        items.append(data if shift_data is None else shift_data(data, i))
    return np.concatenate(offsets), (np.concatenate(items) if items else np.zeros(0))


class Hypergraph:
    """A topologically sorted forest with sparse edge features and target-side templates.

    Build one with :class:`HypergraphBuilder`, :func:`minismt.hypergraph.read_cdec_json`
    or from arrays (validated here; bad arrays are an :class:`InputError`).
    """

    def __init__(self, space: FeatureSpace, vocab: Vocabulary, n_nodes: int, in_offsets, tail_offsets,
                 tails, feat_offsets, feat_ids, feat_values, tmpl_offsets, tmpl, *,
                 rules: Sequence[str] | None = None, edge_rule=None, node_cat=None, spans=None,
                 node_hash=None, scores=None):
        self.space = space
        self.vocab = vocab
        if isinstance(n_nodes, bool) or not isinstance(n_nodes, (int, np.integer)) or n_nodes < 0:
            raise InputError(f"n_nodes is {n_nodes!r}", expected="an integer >= 0")
        self.n_nodes = int(n_nodes)
        self.in_offsets = _array(in_offsets, np.int64, "in_offsets")
        _check_offsets(self.in_offsets, self.n_nodes, None, "in_offsets")
        n_edges = int(self.in_offsets[-1])
        self.tail_offsets = _array(tail_offsets, np.int64, "tail_offsets")
        self.tails = _array(tails, np.int32, "tails")
        _check_offsets(self.tail_offsets, n_edges, self.tails.shape[0], "tail_offsets")
        self.feat_offsets = _array(feat_offsets, np.int64, "feat_offsets")
        self.feat_ids = _array(feat_ids, np.int32, "feat_ids")
        self.feat_values = _array(feat_values, np.float64, "feat_values")
        _check_offsets(self.feat_offsets, n_edges, self.feat_ids.shape[0], "feat_offsets")
        if self.feat_values.shape != self.feat_ids.shape:
            raise InputError(f"{self.feat_values.shape[0]} feature values for {self.feat_ids.shape[0]} ids")
        self.tmpl_offsets = _array(tmpl_offsets, np.int64, "tmpl_offsets")
        self.tmpl = _array(tmpl, np.int32, "tmpl")
        _check_offsets(self.tmpl_offsets, n_edges, self.tmpl.shape[0], "tmpl_offsets")
        fault, e, at, self.edge_head, self.feat_dim = _kernels.first_fault(
            self.in_offsets, self.tail_offsets, self.tails, self.feat_ids, self.feat_values, self.tmpl_offsets,
            self.tmpl, len(space), len(vocab))
        if fault == _kernels.TAIL_NOT_EARLIER:
            raise InputError(f"edge {e} into node {self.edge_head[e]} has tail {self.tails[at]}",
                             expected="tails that are earlier nodes (topological order)")
        if fault == _kernels.FEATURE_ID_OUTSIDE:
            raise InputError(f"feature id {int(self.feat_ids[at])}",
                             expected=f"ids of the {len(space)} names of the feature space")
        if fault == _kernels.FEATURE_NOT_FINITE:
            e = int(np.searchsorted(self.feat_offsets, at, side="right") - 1)
            raise InputError(f"edge {e} has a non-finite feature value", expected="finite features")
        if fault in (_kernels.TEMPLATE_WORD_OUTSIDE, _kernels.TEMPLATE_SLOT_OUTSIDE):
            item = int(self.tmpl[at])
            arity = self.tail_offsets[e + 1] - self.tail_offsets[e]
            what = (f"word id {item} (the vocabulary has {len(vocab)})" if item >= 0 else
                    f"a reference to tail {-item - 1} but {int(arity)} tails")
            raise InputError(f"the template of edge {e} has {what}",
                             expected="word ids of the vocabulary and references to existing tails")
        self.rules = None if rules is None else list(rules)
        if self.rules is not None and not all(isinstance(r, str) for r in self.rules):
            raise InputError("rules must be strings")
        self.edge_rule = None
        if edge_rule is not None:
            self.edge_rule = _array(edge_rule, np.int32, "edge_rule")
            limit = len(self.rules) if self.rules is not None else 0
            if self.edge_rule.shape != (n_edges,) or (n_edges and (self.edge_rule.min() < -1
                                                                   or self.edge_rule.max() >= limit)):
                raise InputError("edge_rule does not index the rules", expected=f"{n_edges} values in [-1, {limit})")
        self.node_cat = None if node_cat is None else list(node_cat)
        if self.node_cat is not None and (len(self.node_cat) != self.n_nodes or not all(
                c is None or isinstance(c, str) for c in self.node_cat)):
            raise InputError("node_cat is not one string or None per node")
        self.spans = None if spans is None else _array(spans, np.int32, "spans", ndim=2)
        if self.spans is not None and self.spans.shape != (n_edges, 4):
            raise InputError(f"spans have shape {self.spans.shape}", expected=f"({n_edges}, 4)")
        self.node_hash = None if node_hash is None else _array(node_hash, np.uint64, "node_hash")
        if self.node_hash is not None and self.node_hash.shape != (self.n_nodes,):
            raise InputError(f"{self.node_hash.shape[0]} node hashes", expected=f"{self.n_nodes}")
        self.scores = None if scores is None else self._check_scores(scores)

    def _check_scores(self, scores) -> np.ndarray:
        scores = _array(scores, np.float64, "scores")
        if scores.shape != (self.n_edges,) or not np.all(np.isfinite(scores)):
            raise InputError(f"edge scores of shape {scores.shape}", expected=f"{self.n_edges} finite values")
        return scores

    # ---- shape -----------------------------------------------------------------------
    @property
    def n_edges(self) -> int:
        """Number of hyperedges."""
        return int(self.in_offsets[-1])

    @property
    def goal(self) -> int:
        """The goal (root) node: the last one; -1 for the empty hypergraph."""
        return self.n_nodes - 1

    def __repr__(self) -> str:
        return f"Hypergraph(n_nodes={self.n_nodes}, n_edges={self.n_edges}, n_features={len(self.space)})"

    def edge_tails(self, e: int) -> np.ndarray:
        """Tail nodes of edge ``e``, in the order its template's slots refer to them."""
        return self.tails[self.tail_offsets[e]:self.tail_offsets[e + 1]]

    def edge_features(self, e: int) -> dict[str, float]:
        """``{name: value}`` of edge ``e``."""
        lo, hi = self.feat_offsets[e], self.feat_offsets[e + 1]
        return {self.space.name(int(i)): float(v) for i, v in zip(self.feat_ids[lo:hi], self.feat_values[lo:hi])}

    def edge_target(self, e: int) -> str:
        """Edge ``e``'s template in cdec notation: words and ``[i]`` for tail i (1-based)."""
        items = self.tmpl[self.tmpl_offsets[e]:self.tmpl_offsets[e + 1]]
        return " ".join(self.vocab[int(t)] if t >= 0 else f"[{-int(t)}]" for t in items)

    def replace(self, **changes) -> "Hypergraph":
        """A copy sharing the arrays, with the given constructor arguments replaced."""
        args = dict(space=self.space, vocab=self.vocab, n_nodes=self.n_nodes, in_offsets=self.in_offsets,
                    tail_offsets=self.tail_offsets, tails=self.tails, feat_offsets=self.feat_offsets,
                    feat_ids=self.feat_ids, feat_values=self.feat_values, tmpl_offsets=self.tmpl_offsets,
                    tmpl=self.tmpl, rules=self.rules, edge_rule=self.edge_rule, node_cat=self.node_cat,
                    spans=self.spans, node_hash=self.node_hash, scores=self.scores)
        args.update(changes)
        return Hypergraph(**args)

    def without_words(self, words) -> "Hypergraph":
        """A copy whose templates leave out ``words`` (e.g. a decoder's sentence markers ``<s>``, ``</s>``,
        which no translation's BLEU counts): the same derivations, scores and features, their yields without
        those words. The forest itself when none of them is in a template."""
        ids = [self.vocab.get(word) for word in words if word in self.vocab]
        drop = np.isin(self.tmpl, np.asarray(ids, dtype=np.int32)) if ids else np.zeros(self.tmpl.shape, bool)
        if not drop.any():
            return self
        kept = np.concatenate([[0], np.cumsum(~drop)])
        return self.replace(tmpl=self.tmpl[~drop], tmpl_offsets=kept[self.tmpl_offsets])

    def to_portable(self) -> dict:
        """The forest as plain arrays plus the words and feature names it uses, with ids local to it:
        what a worker process sends back (the space and vocabulary objects stay behind; rules, spans
        and hashes are left out)."""
        words, tmpl_local = np.unique(self.tmpl[self.tmpl >= 0], return_inverse=True)
        tmpl = self.tmpl.copy()
        tmpl[self.tmpl >= 0] = tmpl_local
        names, feat_local = np.unique(self.feat_ids, return_inverse=True)
        return {"n_nodes": self.n_nodes, "in_offsets": self.in_offsets, "tail_offsets": self.tail_offsets,
                "tails": self.tails, "feat_offsets": self.feat_offsets,
                "feat_ids": feat_local.astype(np.int32), "feat_values": self.feat_values,
                "tmpl_offsets": self.tmpl_offsets, "tmpl": tmpl,
                "words": [self.vocab[int(i)] for i in words], "names": [self.space.name(int(i)) for i in names]}

    @classmethod
    def from_portable(cls, data: dict, space: FeatureSpace, vocab: Vocabulary) -> "Hypergraph":
        """The forest of :meth:`to_portable` over ``space`` and ``vocab`` (new names and words are added)."""
        word_ids = np.array([vocab.add(w) for w in data["words"]] + [0], dtype=np.int32)
        name_ids = np.array([space.add(n) for n in data["names"]] + [0], dtype=np.int32)
        tmpl = np.asarray(data["tmpl"], dtype=np.int32)
        tmpl = np.where(tmpl >= 0, word_ids[np.maximum(tmpl, 0)], tmpl).astype(np.int32)
        return cls(space, vocab, data["n_nodes"], data["in_offsets"], data["tail_offsets"], data["tails"],
                   data["feat_offsets"], name_ids[np.asarray(data["feat_ids"], dtype=np.int64)],
                   data["feat_values"], data["tmpl_offsets"], tmpl)

    # ---- weights ---------------------------------------------------------------------
    def weight_array(self, w) -> np.ndarray:
        """``w`` as a float64 array over the feature space.

        ``w`` is an array (at least as long as the largest feature id used + 1)
        or a ``{name: weight}`` mapping, where names the space lacks are ignored
        (they weigh no edge, as in cdec).
        """
        if isinstance(w, Mapping):
            out = np.zeros(max(len(self.space), self.feat_dim))
            for name, value in w.items():
                index = self.space.get(name)
                if index is not None:
                    out[index] = float(value)
        else:
            out = _array(w, np.float64, "weights")
            if out.shape[0] < self.feat_dim:
                raise InputError(f"{out.shape[0]} weights, but the hypergraph uses feature id {self.feat_dim - 1}",
                                 expected=f"at least {self.feat_dim} weights (one per feature of the space)")
        if not np.all(np.isfinite(out)):
            raise InputError("a weight is not finite", expected="finite weights")
        return out

    def edge_scores(self, w=None) -> np.ndarray:
        """``w . f_e`` for every edge (the stored :attr:`scores` when ``w`` is None)."""
        if w is None:
            if self.scores is None:
                raise InputError("no weights given and the hypergraph was not reweighted",
                                 expected="weights, or a hypergraph from reweight()")
            return self.scores
        out = np.empty(self.n_edges)
        _kernels.edge_scores(self.feat_offsets, self.feat_ids, self.feat_values, self.weight_array(w), out)
        if not np.all(np.isfinite(out)):
            raise InputError("the weights give an edge an infinite score", expected="finite edge scores")
        return out

    def reweight(self, w) -> "Hypergraph":
        """A copy (sharing all arrays) whose :attr:`scores` are ``w . f_e``, used when methods get no ``w``."""
        out = copy.copy(self)
        out.scores = self.edge_scores(w)
        return out

    # ---- algorithms (see algorithms.py and kbest.py) ---------------------------------
    def viterbi(self, w=None):
        """The best derivation (:class:`~minismt.hypergraph.derivations.Derivation`), or None if there is no node."""
        return algorithms.viterbi(self, w)

    def viterbi_scores(self, w=None) -> tuple[np.ndarray, np.ndarray]:
        """Best score of every node and its back-pointer edge (-1 for start nodes)."""
        return algorithms.viterbi_scores(self, w)

    def inside(self, w=None) -> np.ndarray:
        """Log inside score of every node (log semiring)."""
        return algorithms.inside(self, w)

    def outside(self, w=None, inside=None) -> np.ndarray:
        """Log outside score of every node (``-inf`` where no derivation of the goal passes)."""
        return algorithms.outside(self, w, inside)

    def log_partition(self, w=None) -> float:
        """``log Z``: log-sum-exp of the scores of all derivations of the goal."""
        return algorithms.log_partition(self, w)

    def edge_posteriors(self, w=None) -> np.ndarray:
        """Posterior (expected count) of every edge under ``p(d) = exp(score(d)) / Z``."""
        return algorithms.edge_posteriors(self, w)

    def node_posteriors(self, w=None) -> np.ndarray:
        """Posterior (expected count) of every node."""
        return algorithms.node_posteriors(self, w)

    def max_marginals(self, w=None) -> np.ndarray:
        """Score of the best derivation that uses each edge."""
        return algorithms.max_marginals(self, w)

    def prune_mask(self, threshold: float, w=None, by: str = "max_marginal") -> np.ndarray:
        """Boolean mask of the edges that posterior/max-marginal pruning keeps (see :func:`algorithms.prune_mask`)."""
        return algorithms.prune_mask(self, threshold, w, by)

    def prune(self, threshold: float, w=None, by: str = "max_marginal") -> "Hypergraph":
        """The pruned forest (see :func:`algorithms.prune`)."""
        return algorithms.prune(self, threshold, w, by)

    def prune_to(self, n_edges: int, w=None) -> "Hypergraph":
        """The forest of the ``n_edges`` edges of highest max-marginal (ties kept; see
        :func:`algorithms.best_edges_mask`), without dead or unreachable parts."""
        return algorithms.subgraph(self, algorithms.best_edges_mask(self, n_edges, w))

    def subgraph(self, edge_mask) -> "Hypergraph":
        """The forest of the kept edges, without dead or unreachable parts, renumbered."""
        return algorithms.subgraph(self, edge_mask)

    def kbest(self, k: int, w=None, distinct: bool = False):
        """The ``k`` best derivations (:class:`~minismt.hypergraph.derivations.KBestList`), Huang & Chiang (2005) Alg. 3."""
        return derivations.kbest(self, k, w, distinct)

    def yield_of(self, edges) -> str:
        """The target string of a derivation given by its edges in pre-order (children left to right)."""
        edges = [int(e) for e in edges]
        position = 0

        def expand(node: int) -> list[str]:
            nonlocal position
            if self.in_offsets[node] == self.in_offsets[node + 1]:
                return []
            if position >= len(edges):
                raise InputError("the edge list ends inside the derivation")
            e = edges[position]
            if not (self.in_offsets[node] <= e < self.in_offsets[node + 1]):
                raise InputError(f"edge {e} does not enter node {node}", expected="edges of a derivation, pre-order")
            position += 1
            parts = [expand(int(t)) for t in self.edge_tails(e)]
            out: list[str] = []
            for item in self.tmpl[self.tmpl_offsets[e]:self.tmpl_offsets[e + 1]]:
                if item >= 0:
                    out.append(self.vocab[int(item)])
                else:
                    out.extend(parts[-int(item) - 1])
            return out

        if self.n_nodes == 0:
            raise InputError("the hypergraph is empty")
        words = expand(self.goal)
        if position != len(edges):
            raise InputError(f"{len(edges) - position} edges left after the derivation")
        return " ".join(words)


class HypergraphBuilder:
    """Builds a :class:`Hypergraph` node by node, as a decoder does.

    Nodes must be added before the edges that use them; an edge's tails must be
    earlier nodes than its head. Edges may come in any order; :meth:`build`
    groups them by head (keeping their order within a head). The last node added
    is the goal.
    """

    def __init__(self, space: FeatureSpace | None = None, vocab: Vocabulary | None = None):
        self.space = space if space is not None else FeatureSpace()
        self.vocab = vocab if vocab is not None else Vocabulary()
        self._cats: list[str | None] = []
        self._heads: list[int] = []
        self._tails: list[tuple[int, ...]] = []
        self._feats: list[tuple[list[int], list[float]]] = []
        self._tmpls: list[list[int]] = []
        self._rules: list[int] = []
        self._rule_table: list[str] = []
        self._rule_index: dict[str, int] = {}

    @property
    def n_nodes(self) -> int:
        return len(self._cats)

    def add_node(self, cat: str | None = None) -> int:
        """Add a node (with an optional category such as ``"X"``); returns its id."""
        if cat is not None and not isinstance(cat, str):
            raise InputError(f"node category {cat!r}", expected="a string or None")
        self._cats.append(cat)
        return len(self._cats) - 1

    def add_edge(self, head: int, tails: Sequence[int] = (), features=None,
                 target: Sequence[str | int] | None = None, rule: str | None = None) -> None:
        """Add an edge into ``head``.

        ``features`` is ``{name: value}`` (new names grow the space) or
        ``(ids, values)``; zero values are dropped. ``target`` lists words
        (str) and tail positions (int ``i``: the yield of ``tails[i]``); by
        default the tails' yields in order. ``rule`` is a cdec rule string kept
        for :func:`~minismt.hypergraph.write_cdec_json`.
        """
        def is_int(x) -> bool:
            return isinstance(x, (int, np.integer)) and not isinstance(x, bool)

        if not is_int(head) or not (0 <= head < self.n_nodes):
            raise InputError(f"edge head {head!r}", expected=f"a node id below {self.n_nodes}")
        head = int(head)
        for t in tails:
            if not is_int(t) or not (0 <= t < head):
                raise InputError(f"edge into node {head} has tail {t!r}", expected="tails that are earlier nodes")
        tails = tuple(int(t) for t in tails)
        if features is None:
            pairs = []
        elif isinstance(features, Mapping):
            pairs = list(features.items())
            for name, _ in pairs:
                if not isinstance(name, str) or not name or any(c.isspace() for c in name):
                    raise InputError(f"feature name {name!r}", expected="a non-empty name without whitespace")
        else:
            raw_ids, raw_values = features
            if len(raw_ids) != len(raw_values):
                raise InputError(f"{len(raw_ids)} feature ids and {len(raw_values)} values")
            for i in raw_ids:
                if not is_int(i) or not (0 <= i < len(self.space)):
                    raise InputError(f"feature id {i!r}", expected=f"an id of the {len(self.space)} names of the space")
            pairs = [(int(i), value) for i, value in zip(raw_ids, raw_values)]
        kept = []
        for key, value in pairs:
            value = finite_number(value, f"a feature value of the edge into node {head}")
            if value != 0.0:
                kept.append((key, value))
        target = list(range(len(tails))) if target is None else list(target)
        for item in target:
            if isinstance(item, str):
                if not item or any(c.isspace() for c in item):
                    raise InputError(f"target word {item!r}", expected="a word without whitespace")
            elif not is_int(item) or not (0 <= item < len(tails)):
                raise InputError(f"target item {item!r}", expected=f"a word or a tail position below {len(tails)}")
        ids = [self.space.add(key) if isinstance(key, str) else key for key, _ in kept]
        values = [value for _, value in kept]
        tmpl = [self.vocab.add(item) if isinstance(item, str) else -int(item) - 1 for item in target]
        rule_id = -1
        if rule is not None:
            rule_id = self._rule_index.setdefault(rule, len(self._rule_table))
            if rule_id == len(self._rule_table):
                self._rule_table.append(rule)
        self._heads.append(head)
        self._tails.append(tails)
        self._feats.append((ids, values))
        self._tmpls.append(tmpl)
        self._rules.append(rule_id)

    def build(self) -> Hypergraph:
        """The hypergraph; edges grouped by head in node order."""
        n = self.n_nodes
        order = sorted(range(len(self._heads)), key=self._heads.__getitem__)
        in_counts = np.bincount(np.asarray(self._heads, dtype=np.int64), minlength=n) if n else np.zeros(0, np.int64)
        in_offsets = np.concatenate([[0], np.cumsum(in_counts)]).astype(np.int64)

        def csr(rows):
            offsets = np.zeros(len(rows) + 1, dtype=np.int64)
            offsets[1:] = np.cumsum([len(r) for r in rows]) if rows else []
            flat = [x for r in rows for x in r]
            return offsets, flat

        tail_offsets, tails = csr([self._tails[i] for i in order])
        feat_offsets, feat_ids = csr([self._feats[i][0] for i in order])
        _, feat_values = csr([self._feats[i][1] for i in order])
        tmpl_offsets, tmpl = csr([self._tmpls[i] for i in order])
        has_rules = any(r >= 0 for r in self._rules)
        return Hypergraph(
            self.space, self.vocab, n, in_offsets, tail_offsets, np.asarray(tails, dtype=np.int32),
            feat_offsets, np.asarray(feat_ids, dtype=np.int32), np.asarray(feat_values, dtype=np.float64),
            tmpl_offsets, np.asarray(tmpl, dtype=np.int32),
            rules=self._rule_table if has_rules else None,
            edge_rule=np.asarray([self._rules[i] for i in order], dtype=np.int32) if has_rules else None,
            node_cat=list(self._cats) if any(c is not None for c in self._cats) else None)
