"""Minimum risk training: the weights that maximise the dev set's expected BLEU, on k-best lists (``minrisk``,
as cdec's ``minrisk_optimize``) and on whole forests through the expectation semirings (``hg-minrisk``).

Each dev sentence's translations ``d`` (its k-best list, or every derivation of its forest) get
``p(d) = exp(w . f(d)) / Z``. The objective, maximised by L-BFGS (scipy), is

    J(w) = log BLEU(M, T, R) + temperature * mean_s H(p_s) - l1 ||w||_1,
    log BLEU = min(0, 1 - R / T_1) + 1/4 sum_n log(M_n / T_n),    M_n = sum_s E_s[m_n],  T_n = sum_s E_s[t_n],

the BLEU of the expected sufficient statistics (Smith & Eisner 2006, sec. 4; Li & Eisner 2009, sec. 6),
``R`` the sum of each sentence's reference length closest to its expected length. This is the corpus BLEU
every tuner here is judged by, reached as ``p`` peaks, and needs no tuned constants, where Tromble et al.'s
linear BLEU needs gain parameters fitted to a corpus. On k-best lists the statistics are each hypothesis'
own (clipped matches, as BLEU); on forests a match is not clipped (each n-gram of a derivation found in a
reference counts), because clipping is not a sum over edges: the forest's ``m_n`` and ``t_n`` are sums of
what each edge's new n-grams add on the forest split by its BLEU state (:mod:`minismt.hypergraph.ngrams`), and
their expectations and gradients come from the first-order expectation semiring over all forests at once
(:class:`minismt.hypergraph.expectations.ExpectationBatch`; the gradient of an expectation is a covariance with
the features, and of the objective, the covariance with the one edge value ``c . r - temperature / S * score``,
``c`` the objective's derivative in the statistics).

Deterministic annealing (Smith & Eisner 2006): with ``temperature > 0`` the entropy term keeps ``p`` spread
while the weights take shape; each L-BFGS solve is followed by another from its result at ``temperature *
cooling``, until the temperature is below ``min_temperature``, and a last solve at 0. The default is cdec's
(``minrisk_optimize -T 0``: no entropy term, one solve), and, as there, the start weights are scaled to unit L2
norm. ``l1`` is cdec's ``-C``, here by L-BFGS-B over ``w = w+ - w-`` with both parts non-negative.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize

from minismt.errors import InputError
from minismt.hypergraph import ForestData, Hypergraph
from minismt.hypergraph.expectations import ExpectationBatch
from minismt.hypergraph.ngrams import split_by_bleu_state
from minismt.kbest import KBest
from minismt.metrics import MAX_ORDER
from tuners.base import Tuner, TunerTags, register

N_COUNTS = 2 * MAX_ORDER
"""The statistics whose expectations the objective takes: ``m_1, t_1, ..., m_4, t_4``."""
FLOOR = 1e-9
"""The least expected match count a log takes (an order no translation matches)."""


def log_bleu_of_expectations(counts: np.ndarray, reference_length: float) -> tuple[float, np.ndarray]:
    """``log BLEU`` of summed expected statistics ``[m1, t1, ..., m4, t4]`` and its derivative in each."""
    matches, totals = np.maximum(counts[0::2], FLOOR), np.maximum(counts[1::2], FLOOR)
    value = float(np.mean(np.log(matches) - np.log(totals)))
    derivative = np.zeros(N_COUNTS)
    derivative[0::2] = 0.25 / matches
    derivative[1::2] = -0.25 / totals
    length = totals[0]
    if length < reference_length:
        value += 1.0 - reference_length / length
        derivative[1] += reference_length / length ** 2
    return value, derivative


def _closest_length(lengths: np.ndarray, length: float) -> float:
    """The reference length closest to ``length`` (ties to the shorter), as BLEU's brevity penalty takes it."""
    lengths = np.sort(lengths)
    return float(lengths[np.argmin(np.abs(lengths - length))])


class EdgeStatistics(NamedTuple):
    """A forest split by its BLEU state against a sentence's references (``split``; its edges' features are copied
    only when asked, else ``origin`` gives each edge's edge in the unsplit forest, -1 for the edges into a new
    goal), each split edge's BLEU statistics ``counts`` (int16, ``[m1, t1, ..., m4, t4]``: the n-grams it creates
    and those of them some reference holds, matches unclipped) and the sentence's reference ``lengths``. A
    derivation's sums of the counts are its statistics, matches unclipped."""

    split: Hypergraph
    origin: np.ndarray
    counts: np.ndarray
    lengths: np.ndarray


def edge_statistics(forest, sentence: int, references, features: bool = True) -> EdgeStatistics:
    """:class:`EdgeStatistics` of ``forest``, a forest of dev sentence ``sentence`` of ``references``
    (:func:`~minismt.hypergraph.ngrams.split_by_bleu_state`)."""
    split, origin, counts = split_by_bleu_state(forest, references, sentence, MAX_ORDER, features=features)
    return EdgeStatistics(split, origin, counts, references.reference_lengths(sentence).astype(np.float64))


class _MinimumRisk(Tuner, ABC):
    """What both minimum-risk tuners share: the parameters, the annealing and the L-BFGS solves."""

    def __init__(self, temperature: float = 0.0, cooling: float = 0.5, min_temperature: float = 1e-3,
                 l1: float = 0.0, max_iterations: int = 100, normalize_start: bool = True, normalize: str = "l1",
                 seed: int = 0):
        self.set_params(**{name: value for name, value in locals().items() if name != "self"})

    def _check_params(self) -> None:
        for name, low in (("temperature", 0.0), ("min_temperature", 0.0), ("l1", 0.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < low:
                raise InputError(f"{name}={value!r}", expected=f"a finite number >= {low:g}")
        if isinstance(self.cooling, bool) or not isinstance(self.cooling, (int, float)) or \
                not 0.0 < self.cooling < 1.0:
            raise InputError(f"cooling={self.cooling!r}", expected="a number in (0, 1)")
        if self.temperature > 0 and self.min_temperature <= 0:
            raise InputError(f"min_temperature={self.min_temperature!r} with temperature {self.temperature}",
                             expected="a number > 0, where annealing stops")
        if self.normalize not in ("l1", "none"):
            raise InputError(f"normalize={self.normalize!r}", expected="'l1' or 'none'")
        if isinstance(self.max_iterations, bool) or not isinstance(self.max_iterations, int) or \
                self.max_iterations < 1:
            raise InputError(f"max_iterations={self.max_iterations!r}", expected="an integer >= 1")

    def temperatures(self) -> list[float]:
        """The annealing schedule: ``temperature``, times ``cooling`` while at least ``min_temperature``,
        then 0."""
        schedule, t = [], float(self.temperature)
        while t > 0 and t >= self.min_temperature:
            schedule.append(t)
            t *= self.cooling
        return schedule + [0.0]

    @abstractmethod
    def _objective(self, w: np.ndarray, temperature: float) -> tuple[float, np.ndarray, dict]:
        """``J(w)`` without the L1 term, its gradient and what the history records."""

    def _solve(self, w0: np.ndarray, free: np.ndarray) -> np.ndarray:
        self.history_ = []
        w = w0.copy()
        for temperature in self.temperatures():
            w = self._lbfgs(w, free, temperature)
            value, _, record = self._objective(w, temperature)
            self.history_.append({"temperature": temperature, "objective": value, **record})
        return w

    def _lbfgs(self, w0: np.ndarray, free: np.ndarray, temperature: float) -> np.ndarray:
        """One L-BFGS solve of ``-J`` over the ``free`` weights from ``w0`` (L-BFGS-B on split signs with L1)."""
        n = int(free.sum())
        full = w0.copy()

        def weights(x):
            full[free] = x if not self.l1 else x[:n] - x[n:]
            return full

        def negative(x):
            value, gradient, _ = self._objective(weights(x), temperature)
            g = gradient[free]
            if not self.l1:
                return -value, -g
            return -value + self.l1 * float(x.sum()), np.concatenate([-g + self.l1, g + self.l1])

        start = w0[free]
        if self.l1:
            start = np.concatenate([np.maximum(start, 0.0), np.maximum(-start, 0.0)])
        result = minimize(negative, start, jac=True, method="L-BFGS-B",
                          bounds=[(0.0, None)] * (2 * n) if self.l1 else None,
                          options={"maxiter": self.max_iterations})
        return weights(result.x).copy()

    def _result(self, w: np.ndarray) -> np.ndarray:
        """The weights returned: scaled to L1 norm 1 with ``normalize="l1"`` (as MERT and hypergraph MERT return
        theirs): expected BLEU grows the weights to sharpen ``p``, which no argmax needs but a decoder's
        threshold pruning, in score units, would feel (tuned weights at their own scale left the next search
        graphs a few edges each)."""
        self.expected_bleu_ = math.exp(self._objective(w, 0.0)[0])
        norm = float(np.abs(w).sum())
        return w / norm if self.normalize == "l1" and norm > 0 else w

    def _start(self, w: np.ndarray) -> np.ndarray:
        norm = float(np.linalg.norm(w))
        return w / norm if self.normalize_start and norm > 0 else w


@register("minrisk")
class MinimumRisk(_MinimumRisk):
    """Minimum risk (expected BLEU) on the accumulated k-best lists, as cdec's ``minrisk_optimize`` (module
    docstring): each hypothesis' own BLEU statistics.

    Parameters
    ----------
    temperature, cooling, min_temperature : the entropy term's weight and the annealing (0: cdec's default,
        no entropy, one solve).
    l1 : L1 strength (cdec ``-C``).
    max_iterations : L-BFGS iterations per solve.
    normalize_start : scale the start weights to unit L2 norm (cdec).
    normalize : "l1" (scale the result to L1 norm 1, as MERT) or "none".
    seed : unused (deterministic).

    Notes
    -----
    After :meth:`fit`: ``weights_``, ``expected_bleu_`` (at the solution's own scale) and ``history_`` (one dict
    per temperature).
    """

    tags = TunerTags(fits_on="kbest")

    def fit(self, data: KBest, w0) -> np.ndarray:
        self._check_params()
        w = self._start(self.check_data(data, w0))
        self._data = data
        self._sentence = np.repeat(np.arange(data.n_instances), np.diff(data.offsets))
        self._counts = data.stats[:, :N_COUNTS].astype(np.float64)
        self._reference = data.stats[:, N_COUNTS].astype(np.float64)
        self.weights_ = self._result(self._solve(w, np.ones(w.shape[0], dtype=bool)))
        del self._data, self._counts, self._reference, self._sentence
        return self.weights_

    def _segment_sum(self, values: np.ndarray) -> np.ndarray:
        return np.add.reduceat(values, self._data.offsets[:-1], axis=0)

    def _objective(self, w, temperature):
        data = self._data
        scores = data.scores(w)
        top = np.maximum.reduceat(scores, data.offsets[:-1])[self._sentence]
        mass = np.exp(scores - top)
        z = self._segment_sum(mass)
        p = mass / z[self._sentence]
        expected = self._segment_sum(p[:, None] * self._counts)  # per sentence
        reference = sum(_closest_length(self._reference[data.offsets[s]:data.offsets[s + 1]], expected[s, 1])
                        for s in range(data.n_instances))
        value, derivative = log_bleu_of_expectations(expected.sum(axis=0), reference)
        mean_entropy = float(np.mean(-self._segment_sum(p * np.log(np.maximum(p, 1e-300)))))
        per_hypothesis = self._counts @ derivative - temperature / data.n_instances * scores
        centred = p * (per_hypothesis - self._segment_sum(p * per_hypothesis)[self._sentence])
        gradient = data.features.T @ centred
        gradient = np.concatenate([gradient, np.zeros(len(data.space) - data.space.n_dense)])
        if data.indices.size:
            gradient += np.bincount(data.indices, weights=data.values * np.repeat(centred, np.diff(data.indptr)),
                                    minlength=len(data.space))
        return value + temperature * mean_entropy, gradient, {"log_expected_bleu": value,
                                                               "mean_entropy": mean_entropy}


@register("hg-minrisk")
class ForestMinimumRisk(_MinimumRisk):
    """Minimum risk (expected BLEU) over every derivation of the dev set's forests (Li & Eisner 2009): the
    expected statistics of each forest split by its BLEU state (module docstring: matches not clipped), and
    the objective's gradient, from two batched passes over all forests (:class:`ExpectationBatch`: the log
    inside-outside, then the conditional expectations of the one edge value the objective's derivative makes
    of the statistics). The parameters are :class:`MinimumRisk`'s. After :meth:`fit`: ``weights_``,
    ``expected_bleu_``, ``history_`` and ``split_edges_`` (the forests' edges after the split)."""

    tags = TunerTags(fits_on="forests")

    def fit(self, data: ForestData, w0) -> np.ndarray:
        self._check_params()
        if not isinstance(data, ForestData):
            raise InputError(f"tuning data of type {type(data).__name__}", expected="a ForestData of forests")
        w = self._start(data.weight_array(w0).astype(np.float64))
        self._prepare(data)
        self.weights_ = self._result(self._solve(w, np.ones(w.shape[0], dtype=bool)))
        del self._batch, self._lengths
        return self.weights_

    def _prepare(self, data: ForestData) -> None:
        """Split every forest, count its edges' statistics and batch them."""
        pieces, self._lengths = [], []
        for forest, sentence in zip(data.forests, data.sentence_ids):
            statistics = edge_statistics(forest, int(sentence), data.references, features=False)
            pieces.append((forest, statistics.split, statistics.origin, statistics.counts))
            self._lengths.append(statistics.lengths)
        self._batch = ExpectationBatch(pieces)
        self.split_edges_ = self._batch.n_edges

    def _objective(self, w, temperature):
        """The expected statistics and the entropies (``log Z - E[score]``) from one pass; the objective's
        derivative in the statistics, and the entropy term's weight on the scores, make the one edge value whose
        covariance with the features is the gradient."""
        result = self._batch.evaluate(w)
        reference = sum(_closest_length(lengths, expected[1])
                        for lengths, expected in zip(self._lengths, result.expectation))
        value, derivative = log_bleu_of_expectations(result.expectation.sum(axis=0), reference)
        mean_entropy = float(np.mean(np.maximum(0.0, result.log_z - result.score_expectation)))
        # d H_s / dw = -Cov_s(score, f): the scores' coefficient, with the entropy term's weight
        gradient = self._batch.gradient(derivative, -temperature / self._batch.n_forests)
        return value + temperature * mean_entropy, gradient, {"log_expected_bleu": value,
                                                               "mean_entropy": mean_entropy}
