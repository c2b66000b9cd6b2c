"""MERT's search around an exact line search, for any tuning data (k-best lists, forests).

Moses' ``mert`` (``mert/Optimizer.cpp``, ``mert/mert.cpp``; see
:mod:`tuners.mert` for the search and its deliberate differences from Moses):
from ``w0`` and from random restart points, a coordinate ("powell") or
random-direction search moves along the best of exact line searches of
corpus BLEU (Och 2003, Sec. 6); the best end point is kept and normalised.

:class:`DirectionSearch` is that driver. It does not see the tuning data: it
gets a :class:`LineSearches` object, which line-searches from a current point
along directions. n-best MERT passes one over k-best envelopes
(:class:`tuners.mert.KBestLineSearches`), hypergraph MERT one over forest
envelopes (:class:`tuners.hgmert.ForestLineSearches`, Kumar et al. 2009); with
the same parameters and seed both draw the same restart points and directions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Protocol

import numpy as np

from minismt.errors import InputError
from minismt.features import FeatureSpace
from tuners import _mert_kernels as K

OUTSIDE = 1.0
"""Distance beyond the finite end of an unbounded best interval at which the line search stops."""

DEFAULT_RANGE = (0.0, 1.0)
"""Interval of random-restart weights for every feature ``ranges`` does not cover: Moses' (the second and
third lines of mert-moses.pl's init.opt). Restarts in [-1, 1] give log-probability features negative
weights the first k-best list cannot refute: on Multi30k de-en (seed 1) MERT's first weights put
LexicalReordering0_2 (discontinuous orientation) at -0.12, rewarding improbable jumps the list hardly
holds, and the decoded dev BLEU fell 38.83 -> 35.83 (39.51 with that one weight reset); from [0, 1]
the same seed gives 40.34."""

SMOOTH = {"none": K.SMOOTH_NONE, "exp": K.SMOOTH_EXP}
"""The kernels' code of each corpus BLEU a search can optimise."""

OPTIMIZERS = ("powell", "random-direction")
NORMS = ("l1", "l2", "none")


class LineSearches(Protocol):
    """Exact line searches of corpus BLEU on some tuning data, from one current point at a time.

    Made for the free features (their indices); ``gammas[j]`` is the step along direction ``j``
    to the chosen point of its best interval and ``scores[j]`` that interval's BLEU.
    """

    def current(self, w: np.ndarray) -> float:
        """Make ``w`` the current point; its corpus BLEU (as the line searches compute it)."""

    def coordinates(self) -> tuple[np.ndarray, np.ndarray]:
        """``(gammas, scores)`` along the unit direction of every free feature, in order."""

    def along(self, directions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(gammas, scores)`` along every row of ``directions`` (float64[n, features])."""

    def bleu(self, w: np.ndarray) -> float:
        """Corpus BLEU of the tuning data at ``w`` (the start and end points of a search)."""


class SearchResult(NamedTuple):
    """The normalised best end point, its BLEU, the start it came from and one dict per start."""

    weights: np.ndarray
    bleu: float
    best_start: int
    history: list


@dataclass(frozen=True)
class DirectionSearch:
    """Moses' searches and random restarts around the line searches of a :class:`LineSearches`.

    The parameters are :class:`tuners.mert.MERT`'s (checked on construction, in that order);
    ``smooth`` names the corpus BLEU the line searches optimise (:data:`SMOOTH`).
    """

    n_random_restarts: int
    n_random_directions: int
    optimizer: str
    ranges: object
    fixed: Iterable | None
    seed: object
    smooth: str
    normalize: str
    epsilon: float
    max_rounds: int

    def __post_init__(self):
        self._check_params()

    # ---- validation ----------------------------------------------------------------
    def _check_params(self) -> None:
        for name in ("n_random_restarts", "n_random_directions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise InputError(f"{name}={value!r}", expected="an integer >= 0")
        if isinstance(self.max_rounds, bool) or not isinstance(self.max_rounds, (int, np.integer)) \
                or self.max_rounds < 1:
            raise InputError(f"max_rounds={self.max_rounds!r}", expected="an integer >= 1")
        if self.optimizer not in OPTIMIZERS:
            raise InputError(f"optimizer={self.optimizer!r}", expected=" or ".join(map(repr, OPTIMIZERS)))
        if self.optimizer == "random-direction" and self.n_random_directions < 1:
            raise InputError("optimizer='random-direction' with n_random_directions=0",
                             expected="n_random_directions >= 1")
        if self.smooth not in SMOOTH:
            raise InputError(f"smooth={self.smooth!r}", expected="'none' or 'exp'")
        if self.normalize not in NORMS:
            raise InputError(f"normalize={self.normalize!r}", expected=" or ".join(map(repr, NORMS)))
        if not isinstance(self.epsilon, (int, float)) or not math.isfinite(self.epsilon) \
                or self.epsilon < 0:
            raise InputError(f"epsilon={self.epsilon!r}", expected="a finite number >= 0")

    def free(self, space: FeatureSpace) -> np.ndarray:
        """Indices of the optimised features (all but ``fixed``)."""
        size = len(space)
        free = np.ones(size, dtype=bool)
        items = [] if self.fixed is None else [self.fixed] if isinstance(self.fixed, str) else self.fixed
        for item in items:
            if isinstance(item, str):
                index = space.index(item)
            elif isinstance(item, (int, np.integer)) and not isinstance(item, bool) and 0 <= item < size:
                index = int(item)
            else:
                raise InputError(f"fixed feature {item!r}",
                                 expected=f"a feature name or an index below {size}")
            free[index] = False
        return np.flatnonzero(free)

    def restart_ranges(self, space: FeatureSpace) -> tuple[np.ndarray, np.ndarray]:
        """Per-feature ``(low, high)`` of random restart points."""
        size, n_dense = len(space), space.n_dense
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

    def _rng(self) -> np.random.Generator:
        try:
            return np.random.default_rng(self.seed)
        except (TypeError, ValueError) as err:
            raise InputError(f"seed={self.seed!r}: {err}", expected="a non-negative integer") from None

    # ---- search --------------------------------------------------------------------
    def run(self, space: FeatureSpace, w_start: np.ndarray,
            line_searches: Callable[[np.ndarray], LineSearches]) -> SearchResult:
        """The searches from ``w_start`` and the random restarts; keeps and normalises the best end point.

        ``line_searches(free)`` makes the line searches over the tuning data for the free
        features' indices.
        """
        free = self.free(space)
        low, high = self.restart_ranges(space)
        rng = self._rng()
        lines = line_searches(free)
        history = []
        best_w, best_bleu, best_start = None, -np.inf, 0
        for start in range(self.n_random_restarts + 1):
            w = w_start.copy()
            if start > 0:
                w[free] = rng.uniform(low[free], high[free])
            bleu_start = lines.bleu(w)
            if self.optimizer == "powell":
                w, rounds, searches = self._powell(lines, free, rng, w)
            else:
                w, rounds, searches = self._random_directions(lines, free, rng, w)
            bleu_end = lines.bleu(w)
            history.append({"start": start, "origin": "w0" if start == 0 else "random",
                            "bleu_start": bleu_start, "bleu": bleu_end, "rounds": rounds,
                            "line_searches": searches})
            if bleu_end > best_bleu:
                best_w, best_bleu, best_start = w, bleu_end, start
        weights = normalized(best_w, self.normalize)
        return SearchResult(weights, lines.bleu(weights), best_start, history)

    @staticmethod
    def _unit_directions(count: int, free: np.ndarray, n_features: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` random unit directions over the free features (Gaussian, normalised)."""
        directions = np.zeros((count, n_features))
        g = rng.standard_normal((count, free.shape[0]))
        directions[:, free] = g / np.linalg.norm(g, axis=1, keepdims=True)
        return directions

    def _powell(self, lines: LineSearches, free: np.ndarray, rng: np.random.Generator, w: np.ndarray):
        """Moses' coordinate search from ``w``: returns the end point, rounds and line searches."""
        n_coord = free.shape[0]
        if n_coord == 0:
            return w, 0, 0
        rounds = searches = 0
        while rounds < self.max_rounds:
            rounds += 1
            current = lines.current(w)
            gammas, scores = lines.coordinates()
            searches += n_coord
            if self.n_random_directions:
                directions = self._unit_directions(self.n_random_directions, free, w.shape[0], rng)
                more_gammas, more_scores = lines.along(directions)
                searches += self.n_random_directions
                gammas = np.concatenate([gammas, more_gammas])
                scores = np.concatenate([scores, more_scores])
            j = int(np.argmax(scores))
            if not scores[j] > current:
                break
            if j < n_coord:
                w[free[j]] += gammas[j]
            else:
                w = w + gammas[j] * directions[j - n_coord]
            if scores[j] - current <= self.epsilon:
                break
        return w, rounds, searches

    def _random_directions(self, lines: LineSearches, free: np.ndarray, rng: np.random.Generator,
                           w: np.ndarray):
        """Moses' random-direction search: stop after ``n_random_directions`` non-improving ones in a row."""
        if free.shape[0] == 0:
            return w, 0, 0
        searches = unchanged = 0
        while unchanged < self.n_random_directions and searches < self.max_rounds * self.n_random_directions:
            current = lines.current(w)
            directions = self._unit_directions(1, free, w.shape[0], rng)
            gammas, scores = lines.along(directions)
            searches += 1
            if scores[0] > current:
                w = w + gammas[0] * directions[0]
            unchanged = 0 if scores[0] - current > self.epsilon else unchanged + 1
        return w, searches, searches


def normalized(w: np.ndarray, norm: str) -> np.ndarray:
    """``w`` scaled to ``sum |w| = 1`` (``"l1"``, Moses), ``|w| = 1`` (``"l2"``) or unchanged (``"none"``)."""
    if norm == "none":
        return w.copy()
    total = float(np.abs(w).sum()) if norm == "l1" else float(np.sqrt(w @ w))
    return w / total if total > 0 else w.copy()
