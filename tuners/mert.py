"""MERT: minimum error rate training on k-best lists with exact line searches.

Och (2003), "Minimum Error Rate Training in Statistical Machine Translation",
Sec. 6: corpus BLEU of the model-best hypotheses is a step function along any
line ``w + gamma * d`` of weight space, so it can be maximised exactly along
the line; the envelope formulation is Macherey et al. (2008), "Lattice-based
Minimum Error Rate Training for Statistical Machine Translation", Sec. 3 and
Algorithm 1 (kernels in :mod:`tuners._mert_kernels`).

The search around the line search is Moses' ``mert`` (``mert/Optimizer.cpp``,
``mert/mert.cpp``), :class:`tuners.search.DirectionSearch`, which hypergraph
MERT shares; :meth:`MERT.fit` gives it the line searches over k-best envelopes
of :class:`KBestLineSearches`:

- ``optimizer="powell"`` (Moses' ``SimpleOptimizer``, called "powell" there,
  though it is a coordinate search): every round line-searches each
  coordinate direction (plus ``n_random_directions`` random unit directions)
  *from the same point* and moves along the single best one; rounds stop when
  the best line improves BLEU by no more than ``epsilon`` (that last move is
  still made) or no line improves at all;
- ``optimizer="random-direction"`` (Moses' ``RandomDirectionOptimizer``): line
  searches along one random unit direction after another, moving whenever BLEU improves,
  until ``n_random_directions`` directions in a row improve BLEU by no more
  than ``epsilon``;
- the search runs from ``w0`` and from ``n_random_restarts`` points drawn
  uniformly within ``ranges``; the best end point is kept (the first one on
  ties) and normalised (Moses: L1, ``sum |w| = 1``).

Every feature of the space, dense or sparse, is searched unless it is
``fixed`` (Moses' mert ignores sparse features without ``--sparse-weights``).

Differences from Moses, all deliberate: arithmetic is float64 (Moses: float);
breakpoints are not merged when closer than 1e-4 (Moses' ``min_int``), so the
swept BLEU is exact; of equally good intervals the one nearest to the current
point is taken (Moses: the leftmost), so a line with no better interval leaves
the point where it is; an unbounded best interval gives the point
:data:`OUTSIDE` beyond its finite end on either side (Moses, after cmert:
1000 left of the first breakpoint, 0.1 right of the last); random directions
are uniform on the unit sphere of the optimised coordinates (Moses draws each
component within the restart ranges).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from minismt.errors import InputError
from minismt.kbest import KBest
from tuners import _mert_kernels as K
from tuners.base import Tuner, register
from tuners.search import OUTSIDE, SMOOTH, DirectionSearch

CACHED_LINES = 1 << 24
"""Most (coordinate direction, hypothesis) pairs whose sorted slopes a fit keeps (200 MB)."""


@register("mert")
class MERT(Tuner):
    """Minimum error rate training (Och 2003) with Moses' coordinate search and random restarts.

    Parameters
    ----------
    n_random_restarts : searches from random points besides the one from ``w0`` (Moses ``-n``, 20).
    n_random_directions : random unit directions line-searched in every round besides the
        coordinate directions (Moses ``-m``); for ``optimizer="random-direction"`` the number
        of non-improving directions in a row that ends a search.
    optimizer : ``"powell"`` (Moses' default) or ``"random-direction"``.
    ranges : ``(min, max)`` of the random restart points, each a number or one value per dense
        feature (as lines 2-3 of Moses' ``init.opt``, see
        :func:`plugins.moses.mertfiles.read_init_opt`) or per feature of the space; features
        not covered are drawn from :data:`tuners.search.DEFAULT_RANGE` ``[0, 1]`` (Moses').
        The ranges bound start points only, not the search.
    fixed : a name, or names or indices, of features whose weight stays at its ``w0`` value
        (Moses optimises a subset with ``-o``).
    seed : seed of ``numpy.random.default_rng`` for restart points and random directions.
    smooth : corpus BLEU optimised: ``"none"`` (Moses' BLEU, 0 if an order has no match) or
        ``"exp"`` (sacrebleu's default).
    normalize : ``"l1"`` (Moses: ``sum |w| = 1``), ``"l2"`` or ``"none"``: scaling of the result.
    epsilon : BLEU gain at or below which a search stops (Moses' ``kEPS``, 1e-4).
    max_rounds : most rounds of one search (for ``"random-direction"``: most line searches
        are ``max_rounds * n_random_directions``).

    Notes
    -----
    After :meth:`fit`: ``weights_``; ``bleu_``, the BLEU of ``weights_``; ``best_start_``;
    ``history_``, one dict per start (``start``, ``origin`` "w0" or "random", ``bleu_start``,
    ``bleu``, ``rounds``, ``line_searches``; with ``"random-direction"`` a round is one line
    search).
    """

    def __init__(self, n_random_restarts: int = 20, n_random_directions: int = 0,
                 optimizer: str = "powell", ranges=None, fixed: Iterable | None = None,
                 seed: int = 0, smooth: str = "none", normalize: str = "l1",
                 epsilon: float = 1e-4, max_rounds: int = 100):
        self.n_random_restarts = n_random_restarts
        self.n_random_directions = n_random_directions
        self.optimizer = optimizer
        self.ranges = ranges
        self.fixed = fixed
        self.seed = seed
        self.smooth = smooth
        self.normalize = normalize
        self.epsilon = epsilon
        self.max_rounds = max_rounds

    def fit(self, data: KBest, w0) -> np.ndarray:
        """Run the searches from ``w0`` and the random restarts; returns the normalised best weights."""
        w_start = self.check_data(data, w0)
        search = DirectionSearch(**self.get_params())
        self.weights_, self.bleu_, self.best_start_, self.history_ = search.run(
            data.space, w_start, lambda free: KBestLineSearches(data, free, self.smooth))
        return self.weights_


def line_search(data: KBest, w, direction, lower: float = -np.inf, upper: float = np.inf,
                prefer: float = 0.0, smooth: str = "none") -> tuple[float, float]:
    """Exact line search of corpus BLEU along ``w + gamma * direction`` for ``gamma`` in ``[lower, upper]``.

    The same envelopes and sweep as MERT's line searches (Och 2003, Sec. 6):
    returns ``(gamma, bleu)`` with ``gamma`` in the best interval, ``prefer``
    itself when it lies in that interval (of equally good intervals the one
    nearest to ``prefer`` wins), else the interval's midpoint (or
    :data:`OUTSIDE` beyond the finite end of an unbounded one). Used for the
    mixing coefficient of parallel online learning (Watanabe 2012).
    """
    if smooth not in SMOOTH:
        raise InputError(f"smooth={smooth!r}", expected="'none' or 'exp'")
    if not lower <= upper:
        raise InputError(f"bounds [{lower}, {upper}]", expected="lower <= upper")
    if data.stats is None:
        raise InputError("the k-best list has no BLEU statistics", expected="statistics")
    a = data.scores(w)
    slopes = data.scores(direction)[None, :]
    orders = np.empty(slopes.shape, dtype=np.int32)
    sorted_slopes = np.empty(slopes.shape)
    K.sentence_orders(data.offsets, slopes, orders, sorted_slopes)
    n_rows = data.n_hypotheses
    hull_rows = np.empty(n_rows, dtype=np.int64)
    hull_x, hull_b, xs = np.empty(n_rows), np.empty(n_rows), np.empty(n_rows)
    from_rows, to_rows = np.empty(n_rows, dtype=np.int64), np.empty(n_rows, dtype=np.int64)
    base = np.zeros(data.stats.shape[1], dtype=np.int64)
    n = K.breakpoints(data.offsets, a, sorted_slopes[0], orders[0], data.stats, hull_rows, hull_x, hull_b,
                      xs, from_rows, to_rows, base)
    out = np.empty(3)
    K.best_interval(xs, from_rows, to_rows, n, base, data.stats, SMOOTH[smooth], float(lower),
                    float(upper), float(prefer), out)
    lo, hi = out[1], out[2]
    gamma = prefer if lo <= prefer <= hi else K.interval_point(lo, hi, OUTSIDE)
    return float(gamma), float(out[0])


class KBestLineSearches:
    """MERT's line searches over k-best envelopes (a :class:`tuners.search.LineSearches`).

    The envelope of each sentence's hypotheses along a line and the sweep of
    their breakpoints (Och 2003, Sec. 6; Macherey et al. 2008, Algorithm 1) are
    :mod:`tuners._mert_kernels`. The slopes of a coordinate direction are one
    feature's values, the same at every point, so their per-instance sort
    orders are made once per :meth:`MERT.fit` (12 bytes per hypothesis and
    direction) when they fit in :data:`CACHED_LINES`; otherwise they are remade
    every round in blocks.
    """

    def __init__(self, data: KBest, free: np.ndarray, smooth: str):
        self.data = data
        self.smooth_name = smooth
        self.smooth = SMOOTH[smooth]
        self.arrays = (data.features, data.indptr, data.indices, data.values)
        self.scores = np.empty(data.n_hypotheses)
        per_block = max(1, CACHED_LINES // max(1, data.n_hypotheses))
        self.blocks = [free[i:i + per_block] for i in range(0, free.shape[0], per_block)]
        self.cached = [self._coordinate_lines(self.blocks[0])] if len(self.blocks) == 1 else None

    def _coordinate_lines(self, block: np.ndarray):
        """Sort orders and sorted slopes of the coordinate directions of the features in ``block``."""
        position = np.full(len(self.data.space), -1, dtype=np.int64)
        position[block] = np.arange(block.shape[0])
        slopes = np.empty((block.shape[0], self.data.n_hypotheses))
        K.coordinate_slopes(*self.arrays, position, slopes)
        return self._sort(slopes)

    def _sort(self, slopes: np.ndarray):
        orders = np.empty(slopes.shape, dtype=np.int32)
        sorted_slopes = np.empty(slopes.shape)
        K.sentence_orders(self.data.offsets, slopes, orders, sorted_slopes)
        return orders, sorted_slopes

    def _searches(self, orders, sorted_slopes):
        gammas = np.zeros(orders.shape[0])
        scores = np.zeros(orders.shape[0])
        K.line_searches(self.data.offsets, self.scores, sorted_slopes, orders, self.data.stats,
                        self.smooth, OUTSIDE, gammas, scores)
        return gammas, scores

    def current(self, w: np.ndarray) -> float:
        """Model scores at ``w`` (into ``self.scores``) and the BLEU of the model-best rows."""
        K.model_scores(*self.arrays, w, self.scores)
        return K.model_bleu(self.data.offsets, self.scores, self.data.stats, self.smooth)

    def coordinates(self):
        """Line searches along every coordinate direction from the point of ``self.scores``."""
        gammas, scores = [], []
        for index, block in enumerate(self.blocks):
            lines = self.cached[index] if self.cached is not None else self._coordinate_lines(block)
            block_gammas, block_scores = self._searches(*lines)
            gammas.append(block_gammas)
            scores.append(block_scores)
        return np.concatenate(gammas), np.concatenate(scores)

    def along(self, directions: np.ndarray):
        """Line searches along the rows of ``directions`` from the point of ``self.scores``."""
        slopes = np.empty((directions.shape[0], self.data.n_hypotheses))
        K.direction_slopes(*self.arrays, directions, slopes)
        return self._searches(*self._sort(slopes))

    def bleu(self, w: np.ndarray) -> float:
        """Corpus BLEU of the model-best hypotheses at ``w`` (:meth:`KBest.bleu`)."""
        return self.data.bleu(w, smooth=self.smooth_name)
