"""Phrase-based stack decoding (Koehn 2004, "Pharaoh"; Moses' normal search) returning the search graph.

Hypotheses are expanded stack by stack (stack k: k source words covered) with every
translation option of an uncovered span the distortion limit allows. As Moses'
``SearchNormal``: a phrase may start at most ``distortion_limit`` words from the end of
the previous one (``|start - (prev_end + 1)|``, the first phrase measured from 0), and a
phrase that does not start at the first gap must end within ``distortion_limit`` of it so
that the gap stays reachable. A hypothesis' score is ``w . h`` over the 15 dense features,
computed as Moses computes them:

- ``Distortion0_0`` = ``-sum |start - (prev_end + 1)|``;
- ``LexicalReordering0_0..5`` (msd-bidirectional-fe, phrase-based orientation at decoding as
  Moses does for ``wbe`` models): the new phrase pair's backward score of its orientation
  w.r.t. the previous phrase (monotone if it starts where the previous one ended, swap if it
  ends where the previous one started, else discontinuous; the first phrase is monotone iff it
  starts the sentence) and the previous phrase pair's forward score of the same orientation;
- ``LM0_0`` = natural-log LM probability of the target words, ``</s>`` included;
- the stateless features of :mod:`minismt.decode.options`.

Moses does not score the last phrase's forward orientation against the sentence end (its
search graphs show the same forward score on every final arc from one hypothesis);
``score_end_orientation=True`` adds it (monotone if the last phrase ends the sentence, else
discontinuous) on the edges into the goal.

Hypotheses are recombined when everything later edges depend on is equal: coverage, the
last phrase's source span, the class of its forward reordering scores (Moses'
``ComparePrevScores``), the KenLM-trimmed LM state and, in forced decoding, the target
position; a complete hypothesis only needs its LM state (and, with the end orientation,
the rest). Every expansion is kept as an arc, so the search graph is exact: each edge's
features depend only on its tail node and its option. Stacks are pruned as Moses'
``HypothesisStackNormal``: hypotheses whose score + future cost falls below the stack's
best + ln(beam_threshold) are discarded, and a stack holding 2 x stack_size is cut to the
stack_size best (then once more, with the threshold, before it is expanded). The future
cost of a coverage is the sum of Koehn's future-cost table over its uncovered gaps.

With ``sparse_features`` (:mod:`minismt.decode.sparse`: rule identifiers, aligned word
pairs) every translation option's static score also holds the weighted sum of its phrase
pair's sparse features, and the hypergraph edges carry them (over the decoder's growing
feature space); the numba search itself does not change (it sees static option scores).

Two shortcuts leave the result unchanged: an expansion whose score with an upper bound
of its LM score (the best probability each word has after any context) is already below
the stack's threshold is discarded before its LM lookups, and LM lookups go through a
cache on (LM state, word) (see :mod:`minismt.decode._kernels`).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from minismt.errors import InputError
from minismt.decode import _kernels
from minismt.decode.model import FEATURE_NAMES, PhraseModel
from minismt.decode.settings import PHRASE_SPARSE_FEATURES, DecoderSettings, check_integer, sentence_tokens
from minismt.decode.options import LM_COL, ROLE_COLS, collect_options, reference_filter
from minismt.decode.sparse import SparseFeatureTable, split_weights
from minismt.hypergraph import Hypergraph

MAX_SENTENCE_LENGTH = 256  # coverage bitsets of four 64-bit words


@dataclass
class DecodeResult:
    """What decoding one sentence gives.

    ``hypergraph`` is the search graph (goal last; None from ``decode(graph=False)``, whose
    ``edge_spans`` and ``edge_rows`` are those of the 1-best's phrases); ``best``/``score``/``features`` the
    1-best translation, its model score ``w . h`` and its 15 dense feature values (order
    :data:`FEATURE_NAMES`); ``edge_spans`` int32[E, 2] the source span (end exclusive) of
    each hypergraph edge and ``edge_rows`` int64[E] its phrase-table row (-1 for
    pass-through words, the axiom and goal edges); ``sparse`` the 1-best's sparse features
    ``{name: value}`` (empty unless the decoder has ``sparse_features``); ``stats`` search
    counts; ``timings`` seconds per phase.
    """

    source: list[str]
    hypergraph: Hypergraph | None
    best: str
    score: float
    features: np.ndarray
    edge_spans: np.ndarray
    edge_rows: np.ndarray
    sparse: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return self.hypergraph.n_nodes

    @property
    def n_edges(self) -> int:
        return self.hypergraph.n_edges

    def coverage(self) -> np.ndarray:
        """bool[n_nodes, n_words]: the source words each search-graph node has translated."""
        graph = self.hypergraph
        covered = np.zeros((graph.n_nodes, len(self.source)), dtype=bool)
        for e in range(graph.n_edges):  # tails are earlier nodes: their coverage is known
            head = graph.edge_head[e]
            tails = graph.edge_tails(e)
            if tails.size:
                covered[head] |= covered[tails].any(axis=0)
            start, end = self.edge_spans[e]
            if start >= 0:
                covered[head, start:end] = True
        return covered

    @property
    def feature_dict(self) -> dict[str, float]:
        """``{name: value}`` of the 1-best: the 15 dense features, then its sparse ones."""
        out = {name: float(v) for name, v in zip(FEATURE_NAMES, self.features)}
        out.update(self.sparse)
        return out


class Decoder:
    """Phrase-based stack decoder.

    Parameters
    ----------
    model : PhraseModel or a model directory
    weights : ``{name: value}`` replacing some of the model's weights, 15 numbers, or with ``names``
        one number per name (a float64 array over a feature space, as worker processes get them);
        names may also weight sparse features of the enabled families (others weigh 0)
    stack_size, beam_threshold, distortion_limit, sparse_features, word_pair_vocabulary : as
        :class:`DecoderSettings` (Moses ``-s`` 200, ``-b`` 1e-5, the model's distortion limit, none,
        every word pair), checked there
    max_phrase_length : longest source phrase used; None takes the table's
    table_limit : options kept per source span by future score (Moses ``table-limit``, 20; 0: all)
    score_end_orientation : also score the last phrase's forward orientation against the end
    names : the feature names of an array of ``weights``

    Notes
    -----
    ``weights`` holds the 15 dense weights and ``sparse_weights`` the sparse ones by name;
    ``space`` is the hypergraphs' feature space: the model's 15 names, and with sparse
    features a space shared by the model's decoders that grows as names are met (ids never
    change); :meth:`full_weights` is the weight array over it (for the hypergraphs' k-best,
    Viterbi, ...).

    A decoder may be shared by threads (the search releases the GIL; each thread has its own
    LM cache). The hypergraphs it returns share one target vocabulary: the phrase table's,
    grown by every pass-through word met so far (ids never change, so older graphs stay valid).
    """

    def __init__(self, model: PhraseModel | str, weights=None, stack_size: int = DecoderSettings.stack_size,
                 beam_threshold: float = DecoderSettings.beam_threshold, distortion_limit: int | None = None,
                 max_phrase_length: int | None = None, table_limit: int = 20,
                 score_end_orientation: bool = False, sparse_features=None, names=None,
                 word_pair_vocabulary: int | None = None):
        if not isinstance(model, PhraseModel):
            model = PhraseModel.load(model)
        self.model = model
        settings = DecoderSettings(stack_size=stack_size, beam_threshold=beam_threshold,
                                   distortion_limit=distortion_limit, sparse_features=sparse_features,
                                   word_pair_vocabulary=word_pair_vocabulary)
        self.sparse_features = settings.sparse_features
        other = [f for f in self.sparse_features if f not in PHRASE_SPARSE_FEATURES]
        if other:
            raise InputError(f"the sparse features {', '.join(other)} with a phrase-based model",
                             expected="rule-id and word-pair (the others are the Hiero decoder's)")
        self.word_pair_vocabulary = settings.word_pair_vocabulary
        self._sparse_w = None
        if self.sparse_features:
            self._sparse = SparseFeatureTable.for_model(model, self.sparse_features, self.word_pair_vocabulary)
            self.space = self._sparse.space
        if self.sparse_features and names is not None and tuple(names[:len(FEATURE_NAMES)]) == FEATURE_NAMES:
            values = np.asarray(weights, dtype=np.float64)  # a worker's weights: each name looked up once
            if values.shape != (len(names),):
                raise InputError(f"{values.size} weights for {len(names)} names", expected="one weight per name")
            self.weights = model.weight_vector(values[:len(FEATURE_NAMES)])
            self._sparse_w = self._sparse.named_weight_array(names, values)
        else:
            weights, sparse_weights = split_weights(weights, self.sparse_features, FEATURE_NAMES, names)
            self.weights = model.weight_vector(weights)
            if self.sparse_features:
                self._sparse_w = self._sparse.weight_array({k: v for k, v in sparse_weights.items() if v != 0.0})
        if self.sparse_features:  # both arrays weigh 0 at the dense features
            self._has_sparse_weights = bool(np.any(self._sparse_w))
        else:
            self._sparse = None
            self.space = model.space
            self._has_sparse_weights = False
        self.stack_size = settings.stack_size
        self.beam_threshold = settings.beam_threshold
        self.distortion_limit = (model.distortion_limit if settings.distortion_limit is None
                                 else settings.distortion_limit)
        self.max_phrase_length = (model.max_phrase_length if max_phrase_length is None
                                  else check_integer(max_phrase_length, "max_phrase_length", 1))
        self.table_limit = check_integer(table_limit, "table_limit", 0)
        self.score_end_orientation = bool(score_end_orientation)
        self.vocab = model.target_vocabulary()
        self._vocab_lock = threading.Lock()
        self._local = threading.local()

    # ---- public -------------------------------------------------------------------------
    def decode(self, source: str | Sequence[str], graph: bool = True) -> DecodeResult:
        """Translate one tokenised sentence; returns its 1-best and search graph. ``graph=False``: the
        1-best alone (the same translation, score and features), without building the search graph
        (``hypergraph`` None; ``edge_spans`` and ``edge_rows`` those of the 1-best's phrases), as a
        decoder asked for no k-best list, forest or MBR does."""
        return self._run(self._tokens(source, "source"), None, graph)

    def force(self, source: str | Sequence[str], reference: str | Sequence[str]) -> DecodeResult | None:
        """Forced decoding: the search graph of the derivations of ``source`` whose target is
        exactly ``reference`` (within the same pruning), or None if none is reachable."""
        tokens = self._tokens(source, "source")
        ref_tokens = self._tokens(reference, "reference")
        return self._run(tokens, ref_tokens)

    def full_weights(self) -> np.ndarray:
        """The weights over :attr:`space` as it is now: the 15 dense ones, then the sparse ones."""
        out = np.zeros(len(self.space))
        out[: len(FEATURE_NAMES)] = self.weights
        if self._sparse_w is not None:
            out[len(FEATURE_NAMES): self._sparse_w.shape[0]] = self._sparse_w[len(FEATURE_NAMES):]
        return out

    def weight_dict(self) -> dict[str, float]:
        """``{name: weight}``: the 15 dense weights and the non-zero sparse ones."""
        out = {name: float(v) for name, v in zip(FEATURE_NAMES, self.weights)}
        out.update(self.sparse_weights)
        return out

    @property
    def sparse_weights(self) -> dict[str, float]:
        """``{name: weight}`` of the non-zero sparse weights."""
        if self._sparse_w is None:
            return {}
        return {self.space.name(i): float(self._sparse_w[i]) for i in np.flatnonzero(self._sparse_w).tolist()}

    # ---- internals ----------------------------------------------------------------------
    def _sparse_scores(self, rows: np.ndarray) -> np.ndarray:
        return self._sparse.scores(rows, self._sparse_w)

    def _transition_cache(self):
        """This thread's LM transition cache (allocated once, cleared by each search)."""
        cache = getattr(self._local, "transition_cache", None)
        if cache is None:
            cache = self._local.transition_cache = _kernels.transition_cache()
        return cache

    def _tokens(self, sentence, what: str) -> list[str]:
        return sentence_tokens(sentence, what, MAX_SENTENCE_LENGTH, "the coverage capacity")

    def _run(self, tokens: list[str], reference: list[str] | None, graph: bool = True) -> DecodeResult | None:
        clock = time.perf_counter()
        model, w = self.model, self.weights
        n = len(tokens)
        max_length = max(1, min(self.max_phrase_length, n))
        with self._vocab_lock:
            options = collect_options(model, tokens, self.vocab, w, max_length, self.table_limit,
                                      self._sparse_scores if self._has_sparse_weights else None)
            forced = reference is not None
            if forced:
                ref = np.array([self.vocab.get(x, -2) for x in reference], dtype=np.int32)
                options = options.take(reference_filter(options, ref), max_length)
            else:
                ref = np.zeros(0, dtype=np.int32)
        fc = np.empty((n + 1, n + 1))
        _kernels.future_costs(n, options.span_lo, options.span_hi, options.future, fc)
        t_options = time.perf_counter()

        w_reo = np.ascontiguousarray(w[ROLE_COLS[:6]])
        log_beam = math.log(self.beam_threshold) if self.beam_threshold > 0 else -math.inf
        static = options.dense @ w
        if options.sparse_score is not None:
            static = static + options.sparse_score
        search_options = _kernels.SearchOptions(
            options.start, options.end, static, options.reordering, options.fwd_class, options.tgt_offsets,
            options.tgt, options.lm_ids, options.lm_inner, options.lm_state_words, options.lm_state_backs,
            options.lm_state_len, options.lm_bound, options.span_lo, options.span_hi)
        scoring = _kernels.Scoring(w_reo, float(w[ROLE_COLS[6]]), float(w[LM_COL] * math.log(10.0)),
                                   float(model.lm_bounds[model.lm.tables.eos]), self.score_end_orientation,
                                   model.lm_bounds)
        limits = _kernels.Limits(self.stack_size, log_beam, self.distortion_limit)
        (h_int, h_flt, _, e_int, e_lm, st_mem, st_cnt, s_w, s_b, s_len, stats) = _kernels.search(
            model.lm.tables, n, fc, search_options, scoring, limits, _kernels.Reference(forced, ref),
            self._transition_cache())
        t_search = time.perf_counter()
        if not graph:
            return self._best_only(tokens, options, h_int, h_flt, e_int, e_lm, st_mem, st_cnt, s_w, s_b, s_len, stats,
                                   (clock, t_options, t_search))

        (n_nodes, in_offsets, tails, tail_offsets, feat_offsets, feat_ids, feat_values, tmpl_offsets, tmpl,
         node_hyp, edge_arc, arc_edge) = _kernels.emit(
            model.lm.tables, n, h_int, e_int, e_lm, st_mem, st_cnt, s_w, s_b, s_len, options.start, options.end,
            options.dense, options.reordering, options.tgt_offsets, options.tgt, ROLE_COLS,
            self.score_end_orientation)
        if n_nodes == 0:
            if forced:
                return None
            raise InputError("no translation reaches the end of the sentence",
                             expected="a distortion limit that lets every word be covered")
        n_edges = int(in_offsets[-1])
        has_opt = edge_arc >= 0
        edge_opt = np.full(n_edges, -1, dtype=np.int64)
        edge_opt[has_opt] = e_int[edge_arc[has_opt], _kernels.OPT]
        edge_rows = np.full(n_edges, -1, dtype=np.int64)
        edge_rows[has_opt] = options.row[edge_opt[has_opt]]
        if self._sparse is not None:
            feat_offsets, feat_ids, feat_values = _kernels.append_edge_features(
                feat_offsets, feat_ids, feat_values, *self._sparse.features(edge_rows))
        hg = Hypergraph(self.space, self.vocab, int(n_nodes), in_offsets, tail_offsets, tails, feat_offsets,
                        feat_ids, feat_values, tmpl_offsets, tmpl)

        # the 1-best: the best complete hypothesis (its future cost is the exact goal-edge score)
        goal = n_nodes - 1
        goal_edges = np.arange(in_offsets[goal], in_offsets[goal + 1])
        goal_tail_hyp = node_hyp[tails[goal_edges - 1]]
        finals = h_flt[goal_tail_hyp, _kernels.SCORE] + h_flt[goal_tail_hyp, _kernels.FUT]
        pick = int(np.argmax(finals))
        path = [int(goal_edges[pick])]
        hyp = int(goal_tail_hyp[pick])
        while hyp != 0:
            arc = int(h_int[hyp, _kernels.BEST])
            path.append(int(arc_edge[arc]))
            hyp = int(e_int[arc, _kernels.TAIL])
        path.reverse()
        words = []
        features = np.zeros(len(FEATURE_NAMES))
        sparse: dict[str, float] = {}
        for edge in path:
            words.extend(int(x) for x in tmpl[tmpl_offsets[edge] + 1:tmpl_offsets[edge + 1]])
            lo, hi = feat_offsets[edge], feat_offsets[edge + 1]
            if self._sparse is None:
                features[feat_ids[lo:hi]] += feat_values[lo:hi]
                continue
            for index, value in zip(feat_ids[lo:hi].tolist(), feat_values[lo:hi].tolist()):
                if index < len(FEATURE_NAMES):
                    features[index] += value
                else:
                    name = self.space.name(index)
                    sparse[name] = sparse.get(name, 0.0) + value

        edge_spans = np.full((hg.n_edges, 2), -1, dtype=np.int32)
        edge_spans[has_opt, 0] = options.start[edge_opt[has_opt]]
        edge_spans[has_opt, 1] = options.end[edge_opt[has_opt]]
        t_emit = time.perf_counter()
        return DecodeResult(
            source=tokens, hypergraph=hg, best=" ".join(self.vocab.decode(words)), score=float(finals[pick]),
            features=features, edge_spans=edge_spans, edge_rows=edge_rows, sparse=sparse,
            stats=_search_stats(len(options), stats),
            timings={"options": t_options - clock, "search": t_search - t_options, "hypergraph": t_emit - t_search,
                     "total": t_emit - clock})

    def _best_only(self, tokens, options, h_int, h_flt, e_int, e_lm, st_mem, st_cnt, s_w, s_b, s_len, stats,
                   clocks) -> DecodeResult:
        """The 1-best from the search's arrays (:func:`~minismt.decode._kernels.best_path`), without the graph."""
        clock, t_options, t_search = clocks
        n = len(tokens)
        arcs, score, features = _kernels.best_path(
            self.model.lm.tables, n, h_int, h_flt, e_int, e_lm, st_mem, st_cnt, s_w, s_b, s_len, options.start,
            options.end, options.dense, options.reordering, ROLE_COLS, self.score_end_orientation)
        if arcs.shape[0] == 0 and n > 0:
            raise InputError("no translation reaches the end of the sentence",
                             expected="a distortion limit that lets every word be covered")
        opts = e_int[arcs, _kernels.OPT]
        words = [int(x) for o in opts.tolist() for x in options.tgt[options.tgt_offsets[o]:options.tgt_offsets[o + 1]]]
        rows = options.row[opts]
        sparse: dict[str, float] = {}
        if self._sparse is not None:
            offsets, ids, values = self._sparse.features(rows)
            for index, value in zip(ids.tolist(), values.tolist()):
                name = self.space.name(index)
                sparse[name] = sparse.get(name, 0.0) + value
        t_best = time.perf_counter()
        return DecodeResult(
            source=tokens, hypergraph=None, best=" ".join(self.vocab.decode(words)), score=float(score),
            features=features, edge_spans=np.stack([options.start[opts], options.end[opts]], axis=1).astype(np.int32),
            edge_rows=rows, sparse=sparse, stats=_search_stats(len(options), stats),
            timings={"options": t_options - clock, "search": t_search - t_options, "hypergraph": 0.0,
                     "total": t_best - clock})


def _search_stats(n_options: int, stats: np.ndarray) -> dict[str, int]:
    """The search's counts by name (:data:`~minismt.decode._kernels.N_STATS`)."""
    return {"options": n_options, "expansions": int(stats[_kernels.ST_EXPANSIONS]),
            "discarded": int(stats[_kernels.ST_DISCARDED]), "discarded_before_lm": int(stats[_kernels.ST_EARLY]),
            "recombined": int(stats[_kernels.ST_RECOMBINED]), "created": int(stats[_kernels.ST_CREATED]),
            "pruned": int(stats[_kernels.ST_PRUNED]), "lm_queries": int(stats[_kernels.ST_LM_CALLS]),
            "lm_cache_misses": int(stats[_kernels.ST_LM_MISSES])}

