"""Hypergraph MERT: exact line searches over every derivation of the dev set's forests.

Kumar, Macherey, Dyer & Och (2009), "Efficient Minimum Error Rate Training and
Minimum Bayes-Risk Decoding for Translation Hypergraphs and Lattices" (MERT on
hypergraphs; for lattices, Macherey et al. 2008): along a line ``w + x * d`` of weight space, corpus
BLEU of the Viterbi translations is a step function of ``x``, and its steps
can be found over *all* derivations of a forest, not only a k-best list, by
running the inside algorithm in the envelope semiring (the forest core's
:mod:`minismt.hypergraph._envelope_kernels`; the sweep is :mod:`tuners._hgmert_kernels`):

- every edge is a line ``w . f_e + x * d . f_e``;
- bottom-up, an edge's value is the Minkowski sum of its tails' upper envelopes
  plus its own line (the envelope "product"), and a node's value the upper
  envelope of its incoming edges' values (the "sum", Macherey et al. 2008,
  Sec. 3, Algorithm 1);
- every line of the goal's envelope is one derivation (back-pointers), the
  Viterbi derivation on its interval of ``x``; its yield gives BLEU statistics
  (:class:`~minismt.metrics.BleuReferences`, cached by yield);
- a dev sentence with several forests (ForestData) takes the upper envelope of
  its forests' goal envelopes (ties to the first forest, as
  :meth:`ForestData.translations`), and the breakpoints of all sentences are
  swept as in n-best MERT (Och 2003, Sec. 6) with n-best MERT's own kernels
  (:func:`tuners._mert_kernels.breakpoints`, :func:`~tuners._mert_kernels.best_interval`).

Around the line search, everything is n-best MERT's (:class:`tuners.mert.MERT`,
Moses' ``mert``), by composition: the same :class:`tuners.search.DirectionSearch`
runs the coordinate ("powell") or random-direction search, draws random
directions and restarts from one seeded generator and normalises the result,
on the line searches of :class:`ForestLineSearches`; the choice of the
interval (the best BLEU, of equal ones the nearest to the current point; its
midpoint, or :data:`tuners.search.OUTSIDE` beyond the finite end of an
unbounded one) is n-best MERT's too.

Differences from cdec's ``dpmert`` (``mr_dpmert_map``/``reduce``, dpmert.pl),
all deliberate: BLEU is minismt's (sacrebleu's arithmetic, ``smooth="none"`` by
default; the closest reference length ties to the shorter one) where cdec
computes IBM BLEU in float32 (ties to the first reference, zero matches
floored at 0.01); breakpoints are not merged when closer than 1/65536; of
equally good intervals the one nearest to the current point wins (cdec: the
leftmost); an unbounded best interval gives the point 1 beyond its finite end
(cdec: 0.1 left of the first breakpoint, 1000 right of the last); error
surfaces are kept in memory, so cdec's base64 defect (README of the cdec
fixtures, Sec. 3) cannot happen. The search is Moses' (coordinate directions
of every free feature plus ``n_random_directions`` random ones per round, move
along the best), which dpmert.pl does too; the defaults are dpmert.pl's (15
random directions, at most 5 rounds, no random restarts): on the Multi30k dev
set's forests (3M edges) a line search takes one to three seconds
(a random direction costs more than an axis), so n-best MERT's 20 restarts would take hours per iteration. The
directions of a round share the machine's cores (threads; the envelope kernel
releases the GIL).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numba
import numpy as np

from minismt.errors import InputError
from minismt.hypergraph import ForestData, Hypergraph, _kernels
from minismt.hypergraph._envelope_kernels import envelopes
from tuners import _hgmert_kernels
from tuners import _mert_kernels as K
from tuners.base import Tuner, TunerTags, register
from tuners.search import OUTSIDE, SMOOTH, DirectionSearch

DIRECTION_BLOCK = 1 << 22
"""Most direction-vector entries (directions x features) one kernel call gets; more go in blocks."""


class Envelope(NamedTuple):
    """The upper envelope of a forest's goal along ``w + x * d``: one derivation per line, left to right.

    Line ``i`` (``intercepts[i] + x * slopes[i]``, strictly increasing slopes)
    is the Viterbi derivation for ``x`` from ``x[i]`` (``x[0] = -inf``) to
    ``x[i+1]`` (``+inf`` after the last); ``edges[i]`` are its edges in
    pre-order (:meth:`Hypergraph.yield_of`), ``texts[i]`` its yield.
    """

    x: np.ndarray
    slopes: np.ndarray
    intercepts: np.ndarray
    edges: list
    texts: list


def forest_envelope(hg: Hypergraph, w, direction) -> Envelope:
    """The goal envelope of one forest along ``w + x * direction`` (Kumar et al. 2009)."""
    if not isinstance(hg, Hypergraph):
        raise InputError(f"a {type(hg).__name__}", expected="a Hypergraph")
    if hg.n_nodes == 0:
        raise InputError("the hypergraph is empty", expected="a forest with a goal node")
    a = hg.edge_scores(w)
    try:
        d = hg.weight_array(direction)
    except InputError as err:
        raise InputError(f"bad direction: {err}") from None
    out = envelopes(hg.in_offsets, hg.tail_offsets, hg.tails, hg.feat_offsets, hg.feat_ids, hg.feat_values,
                    hg.tmpl_offsets, hg.tmpl, np.array([0, hg.n_nodes], dtype=np.int64), a, d[None, :])
    _, x, slopes, intercepts, word_offsets, words, edge_offsets, edges = out
    n = x.shape[0]
    return Envelope(x, slopes, intercepts, [edges[edge_offsets[i]:edge_offsets[i + 1]] for i in range(n)],
                    [" ".join(hg.vocab.decode(words[word_offsets[i]:word_offsets[i + 1]])) for i in range(n)])


def best_interval(data: ForestData, w, direction, lower: float = -np.inf, upper: float = np.inf,
                  prefer: float = 0.0, smooth: str = "none") -> tuple[float, float, float]:
    """``(bleu, lo, hi)``: the best interval of ``x`` in ``[lower, upper]`` along ``w + x * direction``.

    Exact over every derivation of the forests; of equally good intervals the
    one nearest to ``prefer`` (then the leftmost), as n-best MERT's
    :func:`tuners.mert.line_search`. As in cdec's and Moses' MERT, envelope pieces
    with equal BLEU statistics are one interval: at their common breakpoint the
    model-best is a tie, which the decoder may break towards a third derivation.
    """
    forests, w, direction = _line_problem(data, w, direction, smooth, lower, upper)
    _, out = forests.searches(forests.intercepts(w), direction[None, :], SMOOTH[smooth],
                              float(lower), float(upper), float(prefer))
    return float(out[0, 0]), float(out[0, 1]), float(out[0, 2])


def line_search(data: ForestData, w, direction, lower: float = -np.inf, upper: float = np.inf,
                prefer: float = 0.0, smooth: str = "none") -> tuple[float, float]:
    """Exact line search of corpus BLEU along ``w + gamma * direction`` over the forests: ``(gamma, bleu)``.

    ``gamma`` is ``prefer`` when it lies in the best interval (:func:`best_interval`),
    else that interval's midpoint, or :data:`tuners.search.OUTSIDE` beyond the finite
    end of an unbounded one (as :func:`tuners.mert.line_search`).
    """
    bleu, lo, hi = best_interval(data, w, direction, lower, upper, prefer, smooth)
    gamma = prefer if lo <= prefer <= hi else K.interval_point(lo, hi, OUTSIDE)
    return float(gamma), bleu


@register("hg-mert")
class HypergraphMERT(Tuner):
    """MERT on forests (Kumar et al. 2009; Macherey et al. 2008 for lattices).

    The parameters, the search and the result are n-best MERT's
    (:class:`tuners.mert.MERT`, Moses' ``mert``: the same
    :class:`~tuners.search.DirectionSearch`), only the line search runs over
    every derivation of the forests of a :class:`~minismt.hypergraph.ForestData`
    instead of a k-best list (:class:`ForestLineSearches`).

    Parameters
    ----------
    n_random_restarts : searches from random points besides the one from ``w0`` (0: dpmert.pl
        searches from the current weights only; n-best MERT's 20 restarts cost 21 searches of
        thousands of edges per sentence).
    n_random_directions : random unit directions line-searched in every round besides the
        coordinate directions (dpmert.pl: 15); for ``optimizer="random-direction"``
        the number of non-improving directions in a row that ends a search.
    optimizer : ``"powell"`` (coordinate search, the best direction of a round wins) or
        ``"random-direction"``.
    ranges : ``(min, max)`` of the random restart points (numbers, or one value per feature).
    fixed : names or indices of features whose weight stays at its ``w0`` value.
    seed : seed of ``numpy.random.default_rng`` for restart points and random directions.
    smooth : corpus BLEU optimised: ``"none"`` (0 if an order has no match) or ``"exp"``.
    normalize : ``"l1"``, ``"l2"`` or ``"none"``: scaling of the result.
    epsilon : BLEU gain at or below which a search stops (1e-4).
    max_rounds : most rounds of one search (dpmert.pl: 5 per decoder iteration).

    Notes
    -----
    The defaults are cdec's ``dpmert.pl`` (the hypergraph MERT the BO paper compares
    with); ``n_random_restarts=20, n_random_directions=0, max_rounds=100`` give Moses'
    search. After :meth:`fit`: ``weights_``, ``bleu_`` (BLEU of the Viterbi translations at
    ``weights_``), ``best_start_`` and ``history_`` (one dict per start), as MERT.
    With the same seed, the same directions and restart points are drawn as by
    :class:`~tuners.mert.MERT` on the same feature space.
    """

    tags = TunerTags(fits_on="forests")

    def __init__(self, n_random_restarts: int = 0, n_random_directions: int = 15,
                 optimizer: str = "powell", ranges=None, fixed=None, seed: int = 0, smooth: str = "none",
                 normalize: str = "l1", epsilon: float = 1e-4, max_rounds: int = 5):
        self.set_params(**{name: value for name, value in locals().items() if name != "self"})

    def fit(self, data: ForestData, w0) -> np.ndarray:
        """Run the searches from ``w0`` and the random restarts; returns the normalised best weights."""
        w_start = self._check_forests(data, w0)
        search = DirectionSearch(**self.get_params())
        self.weights_, self.bleu_, self.best_start_, self.history_ = search.run(
            data.space, w_start, lambda free: ForestLineSearches(data, free, self.smooth))
        return self.weights_

    @staticmethod
    def _check_forests(data: ForestData, w0) -> np.ndarray:
        if not isinstance(data, ForestData):
            raise InputError(f"tuning data of type {type(data).__name__}", expected="a ForestData of forests")
        empty = [i for i, f in enumerate(data.forests) if f.n_edges == 0]
        if empty:
            raise InputError(f"{len(empty)} forest(s) have no edge, the first is forest {empty[0]}",
                             expected="a derivation for every forest")
        return data.weight_array(w0).astype(np.float64, copy=True)


# ---- the forests of a dev set as one problem ----------------------------------------------------
class _Forests:
    """The forests of a :class:`ForestData` laid end to end (sorted by dev sentence, stable) and a
    cache of BLEU statistics by (sentence, yield), so that each distinct translation is scored once."""

    def __init__(self, data: ForestData):
        order = np.argsort(data.sentence_ids, kind="stable")
        forests = [data.forests[i] for i in order]
        self.sentence = np.ascontiguousarray(data.sentence_ids[order])
        self.n_sentences = data.n_sentences
        self.n_features = len(data.space)
        self.references = data.references
        self.vocab = forests[0].vocab
        nodes = np.array([f.n_nodes for f in forests], dtype=np.int64)
        edges = np.array([f.n_edges for f in forests], dtype=np.int64)
        node_base = np.concatenate([[0], np.cumsum(nodes)]).astype(np.int64)
        edge_base = np.concatenate([[0], np.cumsum(edges)]).astype(np.int64)

        def chain(name, shift=None, dtype=None):
            parts = [getattr(f, name) for f in forests]
            if shift is not None:
                parts = [p + s for p, s in zip(parts, shift)]
            return np.ascontiguousarray(np.concatenate(parts), dtype=dtype)

        def offsets(name):
            parts = [getattr(f, name) for f in forests]
            ends = np.cumsum([0] + [int(p[-1]) for p in parts])
            return np.ascontiguousarray(np.concatenate([[0]] + [p[1:] + e for p, e in zip(parts, ends)]),
                                        dtype=np.int64)

        self.node_bounds = node_base
        self.edge_base = edge_base
        self.arrays = (offsets("in_offsets"), offsets("tail_offsets"),
                       chain("tails", node_base[:-1].astype(np.int32), np.int32),
                       offsets("feat_offsets"), chain("feat_ids", dtype=np.int32),
                       chain("feat_values", dtype=np.float64), offsets("tmpl_offsets"),
                       chain("tmpl", dtype=np.int32))
        self._cache: dict = {}
        self._table = np.zeros((0, K.N_STATS), dtype=np.int32)

    def intercepts(self, w: np.ndarray) -> np.ndarray:
        """``w . f_e`` of every edge (checked finite)."""
        a = np.empty(self.arrays[3].shape[0] - 1)
        _kernels.edge_scores(self.arrays[3], self.arrays[4], self.arrays[5], w, a)
        if not np.all(np.isfinite(a)):
            raise InputError("the weights give an edge an infinite score", expected="finite edge scores")
        return a

    def envelopes(self, a: np.ndarray, directions: np.ndarray):
        """:func:`minismt.hypergraph._envelope_kernels.envelopes` of every forest along every direction.

        The directions are shared out over ``numba.config.NUMBA_NUM_THREADS`` threads (the
        kernel releases the GIL); the parts are joined in direction order, so the result
        does not depend on the number of threads.
        """
        n_threads = min(directions.shape[0], max(1, int(numba.config.NUMBA_NUM_THREADS)))
        if n_threads == 1:
            return envelopes(*self.arrays, self.node_bounds, a, directions)
        chunks = [np.ascontiguousarray(c) for c in np.array_split(directions, n_threads)]
        with ThreadPoolExecutor(n_threads) as pool:
            parts = list(pool.map(lambda c: envelopes(*self.arrays, self.node_bounds, a, c), chunks))
        return _join_envelopes(parts)

    def stats(self, seg_offsets, word_offsets, words, n_directions: int) -> np.ndarray:
        """int32[N, 9] BLEU statistics of the yields of the goal lines (cached by sentence and yield)."""
        sentence = np.repeat(np.tile(self.sentence, n_directions), np.diff(seg_offsets)).tolist()
        data = words.tobytes()
        ends = (word_offsets * words.itemsize).tolist()
        index = np.empty(len(sentence), dtype=np.int64)
        cache = self._cache
        new_sentences, new_texts = [], []
        for i, s in enumerate(sentence):
            key = (s, data[ends[i]:ends[i + 1]])
            row = cache.get(key)
            if row is None:
                row = len(cache)
                cache[key] = row
                new_sentences.append(s)
                new_texts.append(" ".join(self.vocab.decode(words[word_offsets[i]:word_offsets[i + 1]])))
            index[i] = row
        if new_texts:
            fresh = self.references.stats(np.asarray(new_sentences, dtype=np.int64), new_texts)
            self._table = np.concatenate([self._table, fresh])
        return np.ascontiguousarray(self._table[index])

    def searches(self, a: np.ndarray, directions: np.ndarray, smooth: int, lower: float = -np.inf,
                 upper: float = np.inf, prefer: float = 0.0):
        """Line searches from the point of the edge scores ``a`` along every row of ``directions``:
        ``(gammas, out)`` with ``out[j] = [bleu, lo, hi]`` of the best interval."""
        n = directions.shape[0]
        gammas = np.zeros(n)
        out = np.zeros((n, 3))
        per_block = max(1, DIRECTION_BLOCK // max(1, self.n_features))
        for start in range(0, n, per_block):
            block = np.ascontiguousarray(directions[start:start + per_block], dtype=np.float64)
            seg_offsets, _, slopes, intercepts, word_offsets, words, _, _ = self.envelopes(a, block)
            stats = self.stats(seg_offsets, word_offsets, words, block.shape[0])
            _hgmert_kernels.sweeps(seg_offsets, intercepts, slopes, stats, self.sentence, self.n_sentences, smooth,
                     lower, upper, prefer, OUTSIDE, out[start:start + per_block],
                     gammas[start:start + per_block])
        return gammas, out

    def coordinate_searches(self, a: np.ndarray, free: np.ndarray, smooth: int):
        """:meth:`searches` along the unit direction of every feature in ``free``, in blocks."""
        per_block = max(1, DIRECTION_BLOCK // max(1, self.n_features))
        gammas, scores = [], []
        for start in range(0, free.shape[0], per_block):
            block = free[start:start + per_block]
            directions = np.zeros((block.shape[0], self.n_features))
            directions[np.arange(block.shape[0]), block] = 1.0
            block_gammas, out = self.searches(a, directions, smooth)
            gammas.append(block_gammas)
            scores.append(out[:, 0])
        return np.concatenate(gammas), np.concatenate(scores)

    def bleu(self, a: np.ndarray, smooth: int) -> float:
        """Corpus BLEU of the Viterbi translations at the point of ``a`` (the envelopes along ``d = 0``)."""
        _, out = self.searches(a, np.zeros((1, self.n_features)), smooth)
        return float(out[0, 0])


class ForestLineSearches:
    """MERT's line searches over forest envelopes (a :class:`tuners.search.LineSearches`)."""

    def __init__(self, data: ForestData, free: np.ndarray, smooth: str):
        self.forests = _Forests(data)
        self.free = free
        self.smooth = SMOOTH[smooth]
        self.a = None

    def bleu(self, w: np.ndarray) -> float:
        """Corpus BLEU of the Viterbi translations at ``w`` (equal to :meth:`ForestData.bleu`)."""
        return self.forests.bleu(self.forests.intercepts(w), self.smooth)

    def current(self, w: np.ndarray) -> float:
        self.a = self.forests.intercepts(w)
        return self.forests.bleu(self.a, self.smooth)

    def coordinates(self):
        return self.forests.coordinate_searches(self.a, self.free, self.smooth)

    def along(self, directions: np.ndarray):
        gammas, out = self.forests.searches(self.a, directions, self.smooth)
        return gammas, out[:, 0]


# ---- helpers ------------------------------------------------------------------------------------------
def _join_envelopes(parts: list) -> tuple:
    """The outputs of :func:`minismt.hypergraph._envelope_kernels.envelopes` for consecutive blocks of directions
    as one output: the offsets of each part are shifted by the lines, words and edges before it."""
    seg_offsets, word_offsets, edge_offsets = [np.zeros(1, np.int64)], [np.zeros(1, np.int64)], \
        [np.zeros(1, np.int64)]
    n_lines = n_words = n_edges = 0
    for seg, _, _, _, words_at, words, edges_at, edges in parts:
        seg_offsets.append(seg[1:] + n_lines)
        word_offsets.append(words_at[1:] + n_words)
        edge_offsets.append(edges_at[1:] + n_edges)
        n_lines, n_words, n_edges = n_lines + seg[-1], n_words + words.shape[0], n_edges + edges.shape[0]
    return (np.concatenate(seg_offsets), *(np.concatenate([p[i] for p in parts]) for i in (1, 2, 3)),
            np.concatenate(word_offsets), np.concatenate([p[5] for p in parts]), np.concatenate(edge_offsets),
            np.concatenate([p[7] for p in parts]))


def _line_problem(data: ForestData, w, direction, smooth: str, lower: float, upper: float):
    if not isinstance(data, ForestData):
        raise InputError(f"tuning data of type {type(data).__name__}", expected="a ForestData of forests")
    if smooth not in SMOOTH:
        raise InputError(f"smooth={smooth!r}", expected="'none' or 'exp'")
    if not lower <= upper or math.isnan(lower) or math.isnan(upper):
        raise InputError(f"bounds [{lower}, {upper}]", expected="lower <= upper")
    try:
        d = data.weight_array(direction)
    except InputError as err:
        raise InputError(f"bad direction: {err}") from None
    return _Forests(data), data.weight_array(w), d
