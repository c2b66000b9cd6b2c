"""MERT: minimum error rate training on k-best lists with exact line searches.

Och (2003), "Minimum Error Rate Training in Statistical Machine Translation",
Sec. 6: corpus BLEU of the model-best hypotheses is a step function along any
line ``w + gamma * d`` of weight space, so it can be maximised exactly along
the line; the envelope formulation is Macherey et al. (2008), "Lattice-based
Minimum Error Rate Training for Statistical Machine Translation", Sec. 3 and
Algorithm 1 (kernels in :mod:`tuners._mert_kernels`).

The search around the line search is Moses' ``mert`` (``mert/Optimizer.cpp``,
``mert/mert.cpp``):

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

import math
from typing import Iterable

import numpy as np

from minismt.errors import InputError
from minismt.kbest import KBest
from tuners import _mert_kernels as K
from tuners.base import Tuner, register

OUTSIDE = 1.0
"""Distance beyond the finite end of an unbounded best interval at which the line search stops."""

CACHED_LINES = 1 << 24
"""Most (coordinate direction, hypothesis) pairs whose sorted slopes a fit keeps (200 MB)."""

DEFAULT_RANGE = (-1.0, 1.0)
"""Interval of random-restart weights for every feature ``ranges`` does not cover."""

_SMOOTH = {"none": K.SMOOTH_NONE, "exp": K.SMOOTH_EXP}
_OPTIMIZERS = ("powell", "random-direction")
_NORMS = ("l1", "l2", "none")


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
        not covered are drawn from :data:`DEFAULT_RANGE` ``[-1, 1]``.
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

    # ---- validation ----------------------------------------------------------------
    def _check_params(self) -> None:
        for name in ("n_random_restarts", "n_random_directions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise InputError(f"{name}={value!r}", expected="an integer >= 0")
        if isinstance(self.max_rounds, bool) or not isinstance(self.max_rounds, (int, np.integer)) \
                or self.max_rounds < 1:
            raise InputError(f"max_rounds={self.max_rounds!r}", expected="an integer >= 1")
        if self.optimizer not in _OPTIMIZERS:
            raise InputError(f"optimizer={self.optimizer!r}", expected=" or ".join(map(repr, _OPTIMIZERS)))
        if self.optimizer == "random-direction" and self.n_random_directions < 1:
            raise InputError("optimizer='random-direction' with n_random_directions=0",
                             expected="n_random_directions >= 1")
        if self.smooth not in _SMOOTH:
            raise InputError(f"smooth={self.smooth!r}", expected="'none' or 'exp'")
        if self.normalize not in _NORMS:
            raise InputError(f"normalize={self.normalize!r}", expected=" or ".join(map(repr, _NORMS)))
        if not isinstance(self.epsilon, (int, float)) or not math.isfinite(self.epsilon) \
                or self.epsilon < 0:
            raise InputError(f"epsilon={self.epsilon!r}", expected="a finite number >= 0")

    def _free(self, data: KBest) -> np.ndarray:
        """Indices of the optimised features (all but ``fixed``)."""
        size = len(data.space)
        free = np.ones(size, dtype=bool)
        items = [] if self.fixed is None else [self.fixed] if isinstance(self.fixed, str) else self.fixed
        for item in items:
            if isinstance(item, str):
                index = data.space.index(item)
            elif isinstance(item, (int, np.integer)) and not isinstance(item, bool) and 0 <= item < size:
                index = int(item)
            else:
                raise InputError(f"fixed feature {item!r}",
                                 expected=f"a feature name or an index below {size}")
            free[index] = False
        return np.flatnonzero(free)

    def _ranges(self, data: KBest) -> tuple[np.ndarray, np.ndarray]:
        """Per-feature ``(low, high)`` of random restart points."""
        size, n_dense = len(data.space), data.space.n_dense
        low = np.full(size, DEFAULT_RANGE[0])
        high = np.full(size, DEFAULT_RANGE[1])
        if self.ranges is None:
            return low, high
        try:
            given_low, given_high = self.ranges
        except (TypeError, ValueError):
            raise InputError(f"ranges of type {type(self.ranges).__name__}",
                             expected="a pair (min, max)") from None
        for target, given, what in ((low, given_low, "min"), (high, given_high, "max")):
            values = np.atleast_1d(np.asarray(given, dtype=np.float64))
            if values.ndim != 1 or values.shape[0] not in (1, n_dense, size):
                raise InputError(f"{what} ranges of shape {values.shape}",
                                 expected=f"a number, {n_dense} dense values or {size} values")
            if values.shape[0] == 1:
                target[:] = values[0]
            else:
                target[: values.shape[0]] = values
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))) or np.any(low > high):
            raise InputError("restart ranges with NaN, inf or min > max", expected="finite min <= max")
        return low, high

    # ---- search --------------------------------------------------------------------
    def fit(self, data: KBest, w0) -> np.ndarray:
        """Run the searches from ``w0`` and the random restarts; returns the normalised best weights."""
        w_start = self.check_data(data, w0)
        self._check_params()
        free = self._free(data)
        low, high = self._ranges(data)
        rng = self._rng()
        search = _Search(data, free, _SMOOTH[self.smooth], self.epsilon, self.max_rounds,
                         self.n_random_directions, rng)
        return self._restarts(search, w_start, free, low, high, rng,
                              lambda w: data.bleu(w, smooth=self.smooth))

    def _rng(self) -> np.random.Generator:
        try:
            return np.random.default_rng(self.seed)
        except (TypeError, ValueError) as err:
            raise InputError(f"seed={self.seed!r}: {err}", expected="a non-negative integer") from None

    def _restarts(self, search: "_SearchBase", w_start: np.ndarray, free: np.ndarray, low: np.ndarray,
                  high: np.ndarray, rng: np.random.Generator, bleu) -> np.ndarray:
        """The searches from ``w_start`` and the random restarts; keeps and normalises the best end point.

        ``bleu(w)`` is the corpus BLEU of the tuning data at ``w``. Shared with
        hypergraph MERT (:mod:`tuners.hgmert`), which brings its own ``search``.
        """
        history = []
        best_w, best_bleu, best_start = None, -np.inf, 0
        for start in range(self.n_random_restarts + 1):
            w = w_start.copy()
            if start > 0:
                w[free] = rng.uniform(low[free], high[free])
            bleu_start = bleu(w)
            if self.optimizer == "powell":
                w, rounds, searches = search.powell(w)
            else:
                w, rounds, searches = search.random_directions(w)
            bleu_end = bleu(w)
            history.append({"start": start, "origin": "w0" if start == 0 else "random",
                            "bleu_start": bleu_start, "bleu": bleu_end, "rounds": rounds,
                            "line_searches": searches})
            if bleu_end > best_bleu:
                best_w, best_bleu, best_start = w, bleu_end, start

        weights = _normalized(best_w, self.normalize)
        self.weights_ = weights
        self.bleu_ = bleu(weights)
        self.best_start_ = best_start
        self.history_ = history
        return weights


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
    if smooth not in _SMOOTH:
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
    K.best_interval(xs, from_rows, to_rows, n, base, data.stats, _SMOOTH[smooth], float(lower),
                    float(upper), float(prefer), out)
    lo, hi = out[1], out[2]
    gamma = prefer if lo <= prefer <= hi else K.interval_point(lo, hi, OUTSIDE)
    return float(gamma), float(out[0])


def _normalized(w: np.ndarray, norm: str) -> np.ndarray:
    if norm == "none":
        return w.copy()
    total = float(np.abs(w).sum()) if norm == "l1" else float(np.sqrt(w @ w))
    return w / total if total > 0 else w.copy()


class _SearchBase:
    """Moses' searches around an exact line search, for any tuning data (k-best lists, forests).

    A subclass provides the line searches from the current point: ``_current(w)``
    makes ``w`` the current point and returns its BLEU;
    ``_coordinate_searches()`` line-searches every free coordinate direction
    and ``_line_searches(*lines)`` the directions of ``_random(count)``, which
    returns ``(directions, *lines)``; both return ``(gammas, scores)``.
    """

    def __init__(self, free: np.ndarray, n_features: int, epsilon: float, max_rounds: int, n_random: int,
                 rng: np.random.Generator):
        self.free = free
        self.n_features = n_features
        self.epsilon = epsilon
        self.max_rounds = max_rounds
        self.n_random = n_random
        self.rng = rng

    def _unit_directions(self, count: int) -> np.ndarray:
        """``count`` random unit directions over the free features (Gaussian, normalised)."""
        directions = np.zeros((count, self.n_features))
        g = self.rng.standard_normal((count, self.free.shape[0]))
        directions[:, self.free] = g / np.linalg.norm(g, axis=1, keepdims=True)
        return directions

    def powell(self, w: np.ndarray):
        """Moses' coordinate search from ``w``: returns the end point, rounds and line searches."""
        n_coord = self.free.shape[0]
        if n_coord == 0:
            return w, 0, 0
        rounds = searches = 0
        while rounds < self.max_rounds:
            rounds += 1
            current = self._current(w)
            gammas, scores = self._coordinate_searches()
            searches += n_coord
            if self.n_random:
                directions, *lines = self._random(self.n_random)
                more_gammas, more_scores = self._line_searches(*lines)
                searches += self.n_random
                gammas = np.concatenate([gammas, more_gammas])
                scores = np.concatenate([scores, more_scores])
            j = int(np.argmax(scores))
            if not scores[j] > current:
                break
            if j < n_coord:
                w[self.free[j]] += gammas[j]
            else:
                w = w + gammas[j] * directions[j - n_coord]
            if scores[j] - current <= self.epsilon:
                break
        return w, rounds, searches

    def random_directions(self, w: np.ndarray):
        """Moses' random-direction search: stop after ``n_random`` non-improving directions in a row."""
        if self.free.shape[0] == 0:
            return w, 0, 0
        searches = unchanged = 0
        while unchanged < self.n_random and searches < self.max_rounds * self.n_random:
            current = self._current(w)
            directions, *lines = self._random(1)
            gammas, scores = self._line_searches(*lines)
            searches += 1
            if scores[0] > current:
                w = w + gammas[0] * directions[0]
            unchanged = 0 if scores[0] - current > self.epsilon else unchanged + 1
        return w, searches, searches


class _Search(_SearchBase):
    """One tuning problem: its arrays, and the sorted slopes of the coordinate directions.

    The slopes of a coordinate direction are one feature's values, the same at
    every point, so their per-instance sort orders are made once per
    :meth:`MERT.fit` (12 bytes per hypothesis and direction) when they fit in
    :data:`CACHED_LINES`; otherwise they are remade every round in blocks.
    """

    def __init__(self, data: KBest, free: np.ndarray, smooth: int, epsilon: float, max_rounds: int,
                 n_random: int, rng: np.random.Generator):
        super().__init__(free, len(data.space), epsilon, max_rounds, n_random, rng)
        self.data = data
        self.smooth = smooth
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

    def _coordinate_searches(self):
        """Line searches along every coordinate direction from the point of ``self.scores``."""
        gammas, scores = [], []
        for index, block in enumerate(self.blocks):
            lines = self.cached[index] if self.cached is not None else self._coordinate_lines(block)
            block_gammas, block_scores = self._line_searches(*lines)
            gammas.append(block_gammas)
            scores.append(block_scores)
        return np.concatenate(gammas), np.concatenate(scores)

    def _sort(self, slopes: np.ndarray):
        orders = np.empty(slopes.shape, dtype=np.int32)
        sorted_slopes = np.empty(slopes.shape)
        K.sentence_orders(self.data.offsets, slopes, orders, sorted_slopes)
        return orders, sorted_slopes

    def _current(self, w: np.ndarray) -> float:
        """Model scores at ``w`` (into ``self.scores``) and the BLEU of the model-best rows."""
        K.model_scores(*self.arrays, w, self.scores)
        return K.model_bleu(self.data.offsets, self.scores, self.data.stats, self.smooth)

    def _random(self, count: int):
        """``count`` random unit directions over the free features, their slopes and orders."""
        directions = self._unit_directions(count)
        slopes = np.empty((count, self.data.n_hypotheses))
        K.direction_slopes(*self.arrays, directions, slopes)
        return (directions,) + self._sort(slopes)

    def _line_searches(self, orders, sorted_slopes):
        gammas = np.zeros(orders.shape[0])
        scores = np.zeros(orders.shape[0])
        K.line_searches(self.data.offsets, self.scores, sorted_slopes, orders, self.data.stats,
                        self.smooth, OUTSIDE, gammas, scores)
        return gammas, scores
