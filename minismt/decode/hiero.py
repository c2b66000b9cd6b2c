"""The Hiero chart decoder (Chiang 2007) with Moses' chart-decoder conventions: CKY+ over the
sentence's rule applications, cube pruning, the n-gram LM integrated in the search, Moses' glue
grammar, and a forest per sentence whose edges have up to two tails.

    decoder = HieroDecoder(grammar, lm, weights)            # a HieroGrammar, a LanguageModel
    result = decoder.decode(["ein", "mann", "schläft"])
    result.best, result.score, result.features, result.hypergraph

The model (features in the Hiero manifest's order, :data:`FEATURE_NAMES`):

* rule-table rules apply to spans of at most ``max_span`` words (10, Chiang's limit; Moses'
  ``[max-chart-span]`` is 20), with their four scores as features (``max(ln p, -100)``); per source
  side the ``table_limit`` rules with the best future score are used (Moses' load-time limit,
  :func:`minismt.extract.hiero_export.table_limit`), best first;
* a word that is not the source side of a one-word rule is copied by an unknown-word rule
  (UnknownWordPenalty -100, as Moses);
* Moses' glue grammar: ``S -> <s>``, ``S -> S X`` (glue feature ln 2.718 ~ 1, any span) and the
  goal ``S -> S </s>``; ``<s>`` and ``</s>`` are target words (WordPenalty counts them) and every
  rule application, glue included, counts 1 in PhrasePenalty;
* the LM (ln 10 x log10 probability of ``<s> e </s>``), integrated exactly
  (:mod:`minismt.decode._chart_lm`);
* with ``sparse_features``, the sparse rule features of :mod:`minismt.extract.hiero_features` on the
  edges of the rules, weighted in the search (the table limit ranks by the dense features).

Search: :mod:`minismt.decode._hiero_search` (cube pruning with ``pop_limit`` pops per cell,
recombination on the LM state).  The forest keeps every popped candidate as an edge, so its
Viterbi derivation is the 1-best, with the same score.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from minismt._primitives import hash_find, hash_index
from minismt.corpus import Vocabulary
from minismt.decode import _hiero_chart, _hiero_force, _hiero_search
from minismt.decode.settings import HIERO_SPARSE_FEATURES, parse_sparse_features, sentence_tokens
from minismt.decode.sparse import NamedWeights, split_weights
from minismt.errors import InputError
from minismt.extract import _grammar_kernels
from minismt.extract.hiero import DEFAULT_HIERO_OPTIONS
from minismt.extract.hiero_export import DEFAULT_TABLE_LIMIT, GLUE_SCORE, future_parts, target_lm_ids
from minismt.extract.hiero_features import rule_features
from minismt.extract.hiero_grammar import HieroGrammar
from minismt.extract.hiero_table import side_hashes
from minismt.extract.phrase_table import take_ranges
from minismt.features import FeatureSpace
from minismt.hypergraph import Hypergraph
from minismt.lm import LanguageModel
from minismt.manifest import HIERO_DEFAULT_WEIGHTS

FEATURE_NAMES = tuple(HIERO_DEFAULT_WEIGHTS)
UWP, WP, PP, TM0, GLUE, LM = 0, 1, 2, 3, 7, 8
DEFAULT_POP_LIMIT = 200
DEFAULT_MAX_SPAN = 10
UNKNOWN_PENALTY = -100.0
MAX_SOURCE_SYMBOLS = DEFAULT_HIERO_OPTIONS.max_symbols_source
MAX_NONTERMINALS = DEFAULT_HIERO_OPTIONS.max_nonterm
BOS_SYMBOL, EOS_SYMBOL = _hiero_force.FIRST_SPECIAL, _hiero_force.FIRST_SPECIAL - 1
"""``<s>`` and ``</s>`` in the target templates forced decoding matches (words are target ids >= 0)."""
UNMATCHED = _hiero_force.FIRST_SPECIAL - 2
"""A reference word no rule can write."""


@dataclass
class HieroResult:
    """The 1-best translation of a sentence, its model score, its dense features (over
    :data:`FEATURE_NAMES`) and sparse ones (``{name: value}``), and the forest, with each node's
    label (``X`` or ``S``; the goal is ``S``) and span ``[start, end)`` over ``<s> w_1 .. w_n </s>``
    (``<s>`` at 0: an ``X`` node spans words, an ``S`` node starts at ``<s>``, the goal covers all)."""

    best: str
    score: float
    features: np.ndarray
    hypergraph: Hypergraph
    sparse: dict = field(default_factory=dict)
    node_labels: list = field(default_factory=list)
    node_spans: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))

    def feature_dict(self) -> dict[str, float]:
        return dict(zip(FEATURE_NAMES, self.features.tolist()))


@dataclass
class _Applications:
    """A sentence's rule applications (the arrays :func:`_hiero_search.search` and
    :func:`_hiero_force.force` take) and what its forest needs to give its edges features and
    templates: the local rules are the grammar's ``local_global`` rules, then the special rules
    (dense features ``special_dense``, templates ``special_tmpl`` cut by ``special_tmpl_off``)."""

    n_words: int
    n_cells: int
    cell_order: np.ndarray
    app_cell: np.ndarray
    app_child: np.ndarray
    app_lo: np.ndarray
    app_hi: np.ndarray          # application a applies the local rules app_lo[a] .. app_hi[a] - 1
    lm_tgt: np.ndarray          # target sides in LM ids (-1 - k: child k)
    match_tgt: np.ndarray       # the same in target ids, <s> and </s> as BOS_SYMBOL and EOS_SYMBOL
    tgt_off: np.ndarray
    static: np.ndarray          # each local rule's weighted non-LM features
    goal_cell: int
    local_global: np.ndarray
    special_dense: np.ndarray
    special_tmpl: np.ndarray
    special_tmpl_off: np.ndarray

    def search_arrays(self) -> tuple:
        return self.n_cells, self.cell_order, self.app_cell, self.app_child, self.app_lo, self.app_hi


class _KeptRules:
    """The rules a decoder has ranked, per source side: side ``s``'s kept rules (best first) are rows
    ``start[s]:end[s]`` of growing arrays of their grammar rule, weighted static score and target side
    (target ids and LM ids, cut by ``tgt_off``); ``ready[s]`` once side ``s`` is ranked
    (:func:`_hiero_chart.rank_sides`)."""

    def __init__(self, n_sources: int):
        self.ready = np.zeros(n_sources, dtype=np.bool_)
        self.start = np.zeros(n_sources, dtype=np.int64)
        self.end = np.zeros(n_sources, dtype=np.int64)
        self.n_rules = self.n_symbols = 0
        self.rules = np.zeros(0, dtype=np.int64)
        self.static = np.zeros(0)
        self.tgt_off = np.zeros(1, dtype=np.int64)
        self.tgt = np.zeros(0, dtype=np.int32)
        self.lm_tgt = np.zeros(0, dtype=np.int32)

    def arrays(self) -> tuple:
        """What :func:`_hiero_chart.applications` reads of the ranked rules."""
        return (self.start, self.end, self.rules, self.tgt, self.lm_tgt, self.tgt_off, self.static)


class HieroDecoder:
    """Decodes sentences with a :class:`HieroGrammar` (the rules of their input set), an LM and
    weights (``{name: value}`` over :data:`FEATURE_NAMES` and the sparse rule features; missing names take the
    default), or an array of weights over ``names`` (a worker's: the dense names first, each sparse name looked
    up once per names tuple)."""

    def __init__(self, grammar: HieroGrammar, lm: LanguageModel, weights: Mapping[str, float] | None = None,
                 table_limit: int = DEFAULT_TABLE_LIMIT, pop_limit: int = DEFAULT_POP_LIMIT,
                 max_span: int = DEFAULT_MAX_SPAN, sparse_features: Sequence[str] = (),
                 names: Sequence[str] | None = None):
        for name, value in (("pop_limit", pop_limit), ("max_span", max_span)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InputError(f"{name} {value!r}", expected="an integer >= 1")
        self.sparse_features = parse_sparse_features(tuple(sparse_features))
        other = [f for f in self.sparse_features if f not in HIERO_SPARSE_FEATURES]
        if other:
            raise InputError(f"the sparse features {', '.join(other)} with a Hiero model",
                             expected=", ".join(HIERO_SPARSE_FEATURES))
        self.grammar = grammar
        self.lm = lm
        self.pop_limit = int(pop_limit)
        self.max_span = int(max_span)
        self.table_limit = table_limit
        self.space = FeatureSpace(FEATURE_NAMES)
        self.vocab = Vocabulary(grammar.tgt_vocab.words)     # grows with copied unknown words
        named = None
        if names is not None:
            values = np.asarray(weights, dtype=np.float64)
            if values.shape != (len(names),):
                raise InputError(f"{values.size} weights for {len(names)} names", expected="one weight per name")
            n = len(FEATURE_NAMES)
            if self.sparse_features and tuple(names[:n]) == FEATURE_NAMES:
                named, weights = (tuple(names), values), dict(zip(FEATURE_NAMES, values[:n].tolist()))
            else:
                weights = dict(zip(names, values.tolist()))
        dense, sparse = split_weights(dict(weights or {}), self.sparse_features, FEATURE_NAMES)
        unknown = [n for n in dense if n not in HIERO_DEFAULT_WEIGHTS]
        if unknown:
            raise InputError(f"unknown feature name {unknown[0]!r}",
                             expected="one of " + " ".join(FEATURE_NAMES) + " or a sparse rule feature")
        self.weights = np.array([float(dict(HIERO_DEFAULT_WEIGHTS, **dense)[n]) for n in FEATURE_NAMES])
        table = grammar.table
        self._lm_of_target = target_lm_ids(grammar, lm)
        self._tm, self._words, self._estimates = future_parts(grammar, lm)   # once per grammar and LM
        # sparse rule features: every rule's, as space ids; their weighted sum joins the rule's score
        self._sparse = None
        self._sparse_weights = np.zeros(0)
        self._sparse_static = np.zeros(0)
        if self.sparse_features:
            key = ("rule features", self.sparse_features)    # the same for every weights
            if key not in grammar.cache:
                grammar.cache[key] = rule_features(table, grammar.src_vocab.words, grammar.tgt_vocab.words,
                                                   self.sparse_features)
            found = grammar.cache[key]
            if ("rule feature space", key) not in grammar.cache:  # the same for every weights: made once
                space = FeatureSpace(FEATURE_NAMES)
                grammar.cache[("rule feature space", key)] = (
                    space, np.array([space.add(name) for name in found.names], dtype=np.int64),
                    np.repeat(np.arange(len(table)), np.diff(found.offsets)),   # each feature value's rule
                    NamedWeights(self.sparse_features, space, False,
                                 "one of " + " ".join(FEATURE_NAMES) + " or a sparse rule feature"))
            space, ids, rows, named_weights = grammar.cache[("rule feature space", key)]
            self.space = space.copy()
            self._sparse = (found.offsets, ids[found.ids], found.values)
            if named is not None:
                self._sparse_weights = named_weights.weights(*named)
            else:
                self._sparse_weights = np.zeros(len(self.space))
                for name, value in sparse.items():
                    if name in self.space:
                        self._sparse_weights[self.space.index(name)] = value
            self._sparse_static = np.bincount(
                rows, weights=found.values * self._sparse_weights[ids[found.ids]], minlength=len(table))
        if table_limit and table_limit < 0:
            raise InputError(f"table limit {table_limit}", expected="an integer >= 0")
        # per source side, the rules kept by the table limit, best future score first: prepared for a side the
        # first time a sentence matches it (an online tuner's decoder for one mini-batch prepares that batch's)
        self._kept = _KeptRules(grammar.n_sources)
        if "source side index" not in grammar.cache:   # the same for every weights
            first = grammar.source_offsets[:-1]
            hashes = side_hashes(*take_ranges(table.src_syms, table.src_off, first)) if grammar.n_sources \
                else np.zeros(0, dtype=np.uint64)
            grammar.cache["source side index"] = hash_index(hashes)
        self._source_index = grammar.cache["source side index"]

    def _prepare(self, sides: np.ndarray) -> None:
        """Rank the rules of the source sides ``sides`` not ranked yet with these weights (Moses' table limit
        keeps each side's ``table_limit`` best by future score), so the chart reads a side's rules as one run."""
        kept = self._kept
        sides = sides[~kept.ready[sides]]
        if sides.shape[0] == 0:
            return
        w = self.weights
        (kept.rules, kept.static, kept.tgt_off, kept.tgt, kept.lm_tgt, kept.n_rules,
         kept.n_symbols) = _hiero_chart.rank_sides(
            np.unique(sides), self.grammar.source_offsets, self._tm, self._words, self._estimates,
            self._sparse_static, w[TM0:TM0 + 4].copy(), float(w[WP]), float(w[PP]), float(w[LM]) * math.log(10.0),
            int(self.table_limit or 0), self.grammar.table.tgt_syms, self.grammar.table.tgt_off, self._lm_of_target,
            kept.start, kept.end, kept.ready, kept.rules, kept.static, kept.tgt_off, kept.tgt, kept.lm_tgt,
            kept.n_rules, kept.n_symbols)

    # ---- one sentence --------------------------------------------------------------------------
    def decode(self, words: Sequence[str] | str) -> HieroResult:
        """The 1-best translation of ``words`` with its forest (cube pruning, :mod:`_hiero_search`)."""
        apps = self._applications(sentence_tokens(words, "source"))
        (n_items, item_score, item_cell, n_edges, edge_head, edge_rule, edge_tails,
         edge_lm) = _hiero_search.search(self.lm.tables, float(self.weights[LM]), *apps.search_arrays(),
                                         apps.lm_tgt, apps.tgt_off, apps.static, self.pop_limit)
        goal_items = np.flatnonzero(item_cell == apps.goal_cell)
        if goal_items.shape[0] != 1:
            raise RuntimeError(f"{goal_items.shape[0]} goal items")
        return self._result(apps, int(goal_items[0]), n_items, item_cell, edge_head, edge_rule, edge_tails,
                            edge_lm)

    def force(self, words: Sequence[str] | str, reference: Sequence[str] | str) -> HieroResult | None:
        """Forced decoding: the forest of every derivation of ``words`` whose yield is ``reference``
        (the same rule applications as :meth:`decode`: table limit, span limit, glue rules; no pop
        limit is needed, :mod:`_hiero_force`), its best derivation as the 1-best; None if the
        grammar cannot produce the reference."""
        apps = self._applications(sentence_tokens(words, "source"))
        reference = sentence_tokens(reference, "reference")
        target = np.array([BOS_SYMBOL] + [self.vocab.get(w, UNMATCHED) for w in reference] + [EOS_SYMBOL],
                          dtype=np.int64)
        t = self.lm.tables
        lm_ids = np.concatenate([[t.bos], self.lm.encode(reference), [t.eos]]).astype(np.int32)
        values = _hiero_force.span_values(t, lm_ids)
        (n_items, item_score, item_cell, item_start, item_end, n_edges, edge_head, edge_rule, edge_tails,
         edge_lm) = _hiero_force.force(*apps.search_arrays(), apps.match_tgt, apps.tgt_off, apps.static,
                                       target, values, float(self.weights[LM]))
        goal_items = np.flatnonzero(item_cell == apps.goal_cell)
        if goal_items.shape[0] == 0:
            return None
        return self._result(apps, int(goal_items[0]), n_items, item_cell, edge_head, edge_rule, edge_tails,
                            edge_lm)

    def _result(self, apps: "_Applications", goal: int, n_items, item_cell, edge_head, edge_rule, edge_tails,
                edge_lm) -> HieroResult:
        spans = _hiero_chart.item_spans(item_cell, apps.n_words)
        hypergraph, nodes = self._forest(goal, n_items, edge_head, edge_rule, edge_tails, edge_lm, apps, spans)
        best = hypergraph.viterbi(self.full_weights())
        features = best.features()
        sparse = {name: value for name, value in features.items() if name not in HIERO_DEFAULT_WEIGHTS}
        return HieroResult(best.text, float(best.score), best.dense()[:len(FEATURE_NAMES)], hypergraph,
                           sparse, ["X" if start else "S" for start in spans[nodes, 0].tolist()], spans[nodes])

    def _applications(self, words: list[str]) -> "_Applications":
        """The rule applications of a sentence: the rule-table rules whose source side matches a span
        (with the spans of their non-terminals), the unknown-word copy rules and the glue rules, with
        the cells they fill in the order the chart fills them."""
        n = len(words)
        t = self.lm.tables
        ids = self.grammar.src_vocab.encode(words, grow=False)
        matches, spans, count = _grammar_kernels.sentence_matches(
            ids, MAX_SOURCE_SYMBOLS, MAX_NONTERMINALS, False, self.max_span,
            np.empty(64, dtype=np.uint64), np.empty((64, 6), dtype=np.int32), True)
        sources = hash_find(self._source_index, matches[:count])
        found = sources >= 0
        sources, spans = sources[found], spans[:count][found].astype(np.int64)
        self._prepare(sources)
        # the special rules: unknown-word copies of the positions no one-word rule covers, then
        # <s>, glue and </s>; each (LM target, match target, template, {feature: value})
        one_word = (spans[:, 1] - spans[:, 0] == 1) & (spans[:, 2] < 0)
        covered = np.zeros(n, dtype=np.bool_)
        covered[spans[one_word, 0]] = True
        uncovered = np.flatnonzero(~covered)
        specials = []
        for p in uncovered.tolist():
            copy = self.vocab.add(words[p])
            specials.append(([int(self.lm.encode([words[p]])[0])], [copy], [copy],
                             {UWP: UNKNOWN_PENALTY, WP: -1.0, PP: 1.0}))
        specials += [([t.bos], [BOS_SYMBOL], [], {WP: -1.0, PP: 1.0}),     # <s> and </s> are not in the yield
                     ([-1, -2], [-1, -2], [-1, -2], {GLUE: GLUE_SCORE, PP: 1.0}),
                     ([-1, t.eos], [-1, EOS_SYMBOL], [-1], {WP: -1.0, PP: 1.0})]
        special_dense = np.zeros((len(specials), len(FEATURE_NAMES)))
        for k, (_, _, _, features) in enumerate(specials):
            for column, value in features.items():
                special_dense[k, column] = value
        special_off = np.zeros(len(specials) + 1, dtype=np.int64)
        np.cumsum([len(lm) for lm, _, _, _ in specials], out=special_off[1:])
        special_tmpl_off = np.zeros(len(specials) + 1, dtype=np.int64)
        np.cumsum([len(tmpl) for _, _, tmpl, _ in specials], out=special_tmpl_off[1:])
        (n_cells, cell_order, app_cell, app_child, app_lo, app_hi, lm_tgt, match_tgt, tgt_off, static,
         local_global) = _hiero_chart.applications(
            n, self.max_span, sources, spans, *self._kept.arrays(), uncovered,
            np.array([x for _, m, _, _ in specials for x in m], dtype=np.int64),
            np.array([x for lm, _, _, _ in specials for x in lm], dtype=np.int64), special_off,
            np.array([sum(self.weights[k] * v for k, v in features.items()) for _, _, _, features in specials]))
        return _Applications(
            n_words=n, n_cells=n_cells, cell_order=cell_order, app_cell=app_cell, app_child=app_child, app_lo=app_lo,
            app_hi=app_hi, lm_tgt=lm_tgt, match_tgt=match_tgt, tgt_off=tgt_off, static=static,
            goal_cell=n_cells - 1, local_global=local_global, special_dense=special_dense,
            special_tmpl=np.array([x for _, _, tmpl, _ in specials for x in tmpl], dtype=np.int32),
            special_tmpl_off=special_tmpl_off)

    def full_weights(self) -> np.ndarray:
        """The weights over :attr:`space`: the dense features, then the sparse rule features."""
        if self._sparse is None:
            return self.weights.copy()
        return np.concatenate([self.weights, self._sparse_weights[len(FEATURE_NAMES):]])

    # ---- the forest ------------------------------------------------------------------------------
    def _forest(self, goal, n_items, edge_head, edge_rule, edge_tails, edge_lm,
                apps: "_Applications", spans: np.ndarray) -> tuple[Hypergraph, np.ndarray]:
        """The items that reach the goal, numbered as Moses' chart decoder numbers its hypergraph's
        nodes (by span width, then start: children first, the goal last), and their edges (each
        node's in the order they were popped: the best first) with features and target templates;
        and the item of each node."""
        nodes, new_id, edges, in_offsets = _hiero_search.forest_order(goal, n_items, edge_head, edge_tails,
                                                                      spans[:, 0], spans[:, 1])
        # the local rules' templates: the grammar rules' target sides, then the special rules' templates
        n_grammar = apps.local_global.shape[0]
        end = apps.tgt_off[n_grammar]
        tmpl = np.concatenate([apps.match_tgt[:end], apps.special_tmpl])
        tmpl_off = np.concatenate([apps.tgt_off[:n_grammar + 1], end + apps.special_tmpl_off[1:]])
        sparse_off, sparse_ids, sparse_values = self._sparse or (np.zeros(0, dtype=np.int64),) * 2 + (np.zeros(0),)
        arrays = _hiero_search.forest_edges(
            edges, edge_tails, new_id, edge_rule, edge_lm, LM, n_grammar, apps.local_global, self._tm, TM0,
            self._words, WP, PP, apps.special_dense, tmpl, tmpl_off, sparse_off, sparse_ids, sparse_values)
        return Hypergraph(self.space, self.vocab, nodes.shape[0], in_offsets, *arrays), nodes


# ---- a trained model folder -------------------------------------------------------------------------

ON_DEMAND_PREFIX = "input-"
"""Names of the grammars built on demand from a model's rule store (the input's token digest follows)."""


def grammar_for(model_dir, sentences: Sequence[str], path=None, log=None, max_span: int | None = None) -> str:
    """The name of the grammar of a Hiero model folder for ``sentences`` (the lines of ``path``).

    A grammar built at training time (``--grammar-for``) is used when its input file had the same
    bytes or its preprocessed input has the same tokens on every line; else the grammar is read
    from the model's rule store (:class:`~minismt.extract.hiero_store.RuleStore`) and cached in it
    under the digest of the tokens, so the next command on the same input finds it.  Tokens are
    separated by any Unicode whitespace (``str.split()``, as everywhere in minismt: a no-break
    space separates tokens too).  ``max_span``: the grammar of a decoder that applies rules to spans
    of at most that many words (:meth:`RuleStore.grammar`; cached under its own digest), which a line
    of hundreds of words needs; None: Moses' filter, any span.  ``log`` (a callable) is told when a
    grammar is built."""
    import hashlib
    import os
    from minismt.io import file_sha256, read_lines
    from minismt.manifest import load_manifest
    manifest = load_manifest(model_dir, kind="hiero")
    grammars = manifest.get("grammars", {})
    digest = file_sha256(path) if path is not None else None
    for name, entry in grammars.items():
        if digest is not None and entry.get("source_sha256") == digest:
            return name
    lines = [" ".join(s.split()) for s in sentences]  # tokens: split at any Unicode whitespace, as training
    for name, entry in grammars.items():
        if [" ".join(s.split()) for s in read_lines(os.path.join(model_dir, entry["input"]))] == lines:
            return name
    key = "\n".join(lines) + ("" if max_span is None else f"\n\0rule spans up to {int(max_span)} words")
    name = ON_DEMAND_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
    cached = _on_demand_path(model_dir, manifest, name)
    if cached is None or not os.path.exists(cached):
        store = _rule_store(model_dir, manifest)
        started = time.perf_counter()
        if log is not None:
            log(f"building the grammar of {len(lines):,} sentence{'' if len(lines) == 1 else 's'} from the rule store")
        grammar = store.grammar(lines, max_span=max_span)
        grammar.save(cached)  # atomically: two processes building it leave one whole file
        if log is not None:
            log(f"grammar of {len(grammar):,} rules built in {time.perf_counter() - started:.1f} s "
                f"({os.path.relpath(cached, model_dir)})")
    return name


def _rule_store(model_dir, manifest: dict):
    import os
    from minismt.extract.hiero_store import RuleStore
    store = manifest.get("files", {}).get("rule_store")
    if store is None:
        raise InputError("the Hiero model has no rule store (trained by an older minismt) and no grammar "
                         "for these sentences", os.path.join(model_dir, "manifest.json"),
                         expected="a model trained again with 'minismt train --hiero', or the input given "
                                  "to its --grammar-for")
    return RuleStore(os.path.join(model_dir, store))


def store_and_lm(model_dir, lm: bool = True):
    """A Hiero model folder's rule store (memory-mapped) and LM (None unless ``lm``), to read the grammar of
    any lines (:data:`~minismt.decode.settings.PER_CHUNK`); a model without a store is an :class:`InputError`."""
    from minismt.manifest import load_manifest
    manifest = load_manifest(model_dir, kind="hiero")
    return _rule_store(model_dir, manifest), LanguageModel.of_model(model_dir, manifest["files"]) if lm else None


def _on_demand_path(model_dir, manifest: dict, name: str) -> str | None:
    """Where the rule store keeps the grammar ``name`` built on demand; None for a model without a store."""
    import os
    store = manifest.get("files", {}).get("rule_store")
    return None if store is None else os.path.join(model_dir, store, "grammars", name + ".npz")


def load_model(model_dir, grammar: str, decoding: bool = False) -> tuple[HieroGrammar, LanguageModel, dict]:
    """The grammar ``grammar`` of a Hiero model folder (built at training time, or on demand by
    :func:`grammar_for`; ``decoding``: only what the decoder reads, :meth:`HieroGrammar.load`), its LM and its
    manifest."""
    import os
    from minismt.manifest import load_manifest
    manifest = load_manifest(model_dir, kind="hiero")
    entry = manifest.get("grammars", {}).get(grammar)
    if entry is not None:
        path = os.path.join(model_dir, entry["grammar"])
    elif grammar.startswith(ON_DEMAND_PREFIX) and os.path.exists(_on_demand_path(model_dir, manifest, grammar) or ""):
        path = _on_demand_path(model_dir, manifest, grammar)
    else:
        raise InputError(f"no grammar {grammar!r} in the Hiero model", os.path.join(model_dir, "manifest.json"))
    return HieroGrammar.load(path, decoding=decoding), LanguageModel.of_model(model_dir, manifest["files"]), manifest
