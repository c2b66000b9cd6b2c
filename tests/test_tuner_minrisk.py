"""Minimum risk (tuners.minrisk) on k-best lists and on forests: the objective (BLEU of the expected statistics,
plus the annealing's entropy) and its gradient against enumeration and finite differences, the annealing
schedule, and the fit on real forests of minismt's decoder."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph import ForestData
from minismt.kbest import KBest
from minismt.metrics import BleuReferences, corpus_bleu_from_stats
from tuners.minrisk import ForestMinimumRisk, MinimumRisk, log_bleu_of_expectations
import random_forests
from random_forests import derivation_table

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_log_bleu_of_one_translation_per_sentence_is_the_log_corpus_bleu():
    rng = np.random.default_rng(4)
    for _ in range(50):
        lengths = rng.integers(5, 30, size=4)
        totals = np.stack([np.maximum(lengths - n, 1) for n in range(4)], axis=1)
        matches = np.minimum(totals, rng.integers(1, 30, size=(4, 4)))
        stats = np.column_stack([matches[:, 0], totals[:, 0], matches[:, 1], totals[:, 1], matches[:, 2],
                                 totals[:, 2], matches[:, 3], totals[:, 3], rng.integers(5, 30, size=4)])
        value, _ = log_bleu_of_expectations(stats[:, :8].sum(axis=0).astype(float), float(stats[:, 8].sum()))
        assert value == pytest.approx(math.log(corpus_bleu_from_stats(stats, smooth="none")), abs=1e-12)


def random_lists(seed: int, sizes=(4, 6, 3, 5)) -> KBest:
    rng = np.random.default_rng(seed)
    space = FeatureSpace(["d0", "d1", "d2"], ["s0", "s1"])
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(offsets[-1])
    indptr, indices, values = [0], [], []
    for _ in range(n):
        columns = np.flatnonzero(rng.random(2) < 0.5)
        indices.extend((columns + 3).tolist())
        values.extend(rng.choice([1.0, -0.5], size=columns.size).tolist())
        indptr.append(len(indices))
    length = rng.integers(6, 14, size=n)
    totals = np.stack([np.maximum(length - k, 1) for k in range(4)], axis=1)
    matches = np.floor(totals * rng.uniform(0.2, 0.9, size=(n, 1)) ** np.arange(1, 5)).astype(int) + 1
    stats = np.column_stack([matches[:, 0], totals[:, 0], matches[:, 1], totals[:, 1], matches[:, 2], totals[:, 2],
                             matches[:, 3], totals[:, 3], np.full(n, 12)]).astype(np.int32)
    return KBest(space, offsets, rng.standard_normal((n, 3)), np.zeros(0, dtype=np.uint8),
                 np.zeros(n + 1, dtype=np.int64), np.array(indptr), np.array(indices, dtype=np.int32),
                 np.array(values, dtype=np.float64), stats)


def kbest_objective_by_hand(data: KBest, w, temperature):
    """The objective from its definition: per sentence a softmax, expected statistics, entropies."""
    X = data.feature_matrix()
    expected, entropies, reference = np.zeros(8), [], 0.0
    for s in range(data.n_instances):
        rows = slice(data.offsets[s], data.offsets[s + 1])
        scores = X[rows] @ w
        p = np.exp(scores - scores.max())
        p /= p.sum()
        expected += p @ data.stats[rows, :8]
        entropies.append(-float(np.sum(p * np.log(p))))
        reference += float(data.stats[rows, 8][0])
    value, _ = log_bleu_of_expectations(expected, reference)
    return value + temperature * float(np.mean(entropies))


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_kbest_objective_and_gradient(temperature):
    data = random_lists(5)
    tuner = MinimumRisk(temperature=temperature)
    tuner._data = data
    tuner._sentence = np.repeat(np.arange(data.n_instances), np.diff(data.offsets))
    tuner._counts = data.stats[:, :8].astype(float)
    tuner._reference = data.stats[:, 8].astype(float)
    rng = np.random.default_rng(1)
    for _ in range(5):
        w = rng.standard_normal(5)
        value, gradient, _ = tuner._objective(w, temperature)
        assert value == pytest.approx(kbest_objective_by_hand(data, w, temperature), abs=1e-12)
        for j in range(5):
            step = np.zeros(5)
            step[j] = 1e-6
            numeric = (tuner._objective(w + step, temperature)[0] - tuner._objective(w - step, temperature)[0]) / 2e-6
            assert gradient[j] == pytest.approx(numeric, abs=1e-6)


WORDS = ["a", "b", "c"]


def forests_with_references():
    names = ["f0", "f1", "f2"]

    @st.composite
    def strategy(draw):
        space, vocab = FeatureSpace(names), None
        from minismt.corpus import Vocabulary
        vocab = Vocabulary()
        draws = random_forests.HypothesisDraws(draw)
        forests = [random_forests.random_forest(draws, space, vocab, draws.integer(2, 6), words=WORDS,
                                                max_derivations=60, values=(-1.0, -0.5, 0.5, 1.0))
                   for _ in range(draw(st.integers(1, 3)))]
        references = [" ".join(draws.words(WORDS, draws.integer(1, 6))) for _ in forests]
        return forests, references
    return strategy()


def forest_objective_by_hand(forests, references, w, temperature):
    """Enumerate every derivation: unclipped n-gram matches against the reference, expected statistics."""
    expected, entropies, reference_total = np.zeros(8), [], 0.0
    for forest, reference in zip(forests, references):
        ref = reference.split()
        ref_grams = {tuple(ref[i:i + n]) for n in range(1, 5) for i in range(len(ref) - n + 1)}
        goal = derivation_table(forest, forest.edge_scores(w))[forest.goal]
        scores = np.array([d[0] for d in goal])
        p = np.exp(scores - scores.max())
        p /= p.sum()
        for prob, d in zip(p, goal):
            words = d[-1]
            for n in range(1, 5):
                grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
                expected[2 * (n - 1)] += prob * sum(g in ref_grams for g in grams)
                expected[2 * (n - 1) + 1] += prob * len(grams)
        entropies.append(-float(np.sum(p * np.log(p))))
        reference_total += len(ref)
    value, _ = log_bleu_of_expectations(expected, reference_total)
    return value + temperature * float(np.mean(entropies))


@SETTINGS
@given(forests_with_references(), st.lists(st.floats(-1, 1), min_size=3, max_size=3).map(np.array),
       st.sampled_from([0.0, 0.5]))
def test_forest_objective_equals_enumeration_and_its_gradient_the_finite_difference(case, w, temperature):
    forests, references = case
    data = ForestData(forests, np.arange(len(forests)), BleuReferences([[r] for r in references]))
    tuner = ForestMinimumRisk(temperature=temperature)
    tuner._prepare(data)
    value, gradient, _ = tuner._objective(w, temperature)
    assert value == pytest.approx(forest_objective_by_hand(forests, references, w, temperature), abs=1e-9)
    # the difference quotients' rounding error: a forest whose every yield is empty has an expected length of 0
    # and a log BLEU near -1e9 (the brevity penalty at the floored length), whose differences lose 7 digits
    rounding = 4 * np.finfo(float).eps * abs(value) / 1e-6
    for j in range(3):  # one-sided differences: where the expected length meets the reference's, the
        step = np.zeros(3)  # brevity penalty has a kink and the gradient is one side's
        step[j] = 1e-6
        right = (tuner._objective(w + step, temperature)[0] - value) / 1e-6
        left = (value - tuner._objective(w - step, temperature)[0]) / 1e-6
        assert min(abs(gradient[j] - right), abs(gradient[j] - left)) < 1e-4 + rounding


def test_annealing_schedule_and_bad_parameters():
    assert MinimumRisk().temperatures() == [0.0]
    assert MinimumRisk(temperature=1.0, cooling=0.5, min_temperature=0.2).temperatures() == [1.0, 0.5, 0.25, 0.0]
    data = random_lists(2)
    for bad in ({"temperature": -1.0}, {"cooling": 1.0}, {"l1": math.nan}, {"max_iterations": 0},
                {"temperature": 1.0, "min_temperature": 0.0}):
        with pytest.raises(InputError):
            MinimumRisk(**bad).fit(data, np.zeros(5))
    with pytest.raises(InputError, match="ForestData"):
        ForestMinimumRisk().fit(data, np.zeros(5))


def test_annealing_and_l1_fit_the_lists_deterministically():
    data = random_lists(9, sizes=(8,) * 12)
    start = np.array([0.1, -0.1, 0.0, 0.0, 0.0])
    for params in ({"temperature": 1.0, "min_temperature": 0.1}, {"l1": 0.01}):
        tuner = MinimumRisk(**params)
        w = tuner.fit(data, start)
        assert np.array_equal(w, MinimumRisk(**params).fit(data, start))
        assert tuner.expected_bleu_ > math.exp(kbest_objective_by_hand(data, start / np.linalg.norm(start), 0.0))
        assert [h["temperature"] for h in tuner.history_] == tuner.temperatures()


def test_forest_minimum_risk_raises_the_dev_bleu_of_real_forests(moses_system):
    """hg-minrisk on the search graphs of minismt's decoder (20 dev sentences of the synthetic system) from
    weights that favour long output (word penalty +1): its weights' Viterbi BLEU on the forests is higher."""
    from minismt.io import read_lines
    from tuners.devdecoder import MinismtDevDecoder
    data, model = moses_system
    sources, references = read_lines(data / "dev.src"), read_lines(data / "dev.tgt")
    decoder = MinismtDevDecoder(str(model), sources, stack_size=10, kbest=0)
    start = decoder.default_weights.copy()
    start[decoder.space.index("WordPenalty0_0")] = 1.0
    forests, _ = decoder.decode_hypergraphs(start, 0)
    forest_data = ForestData(forests, np.arange(len(forests)), BleuReferences([[r] for r in references]))
    tuner = ForestMinimumRisk(max_iterations=30)
    w = tuner.fit(forest_data, start)
    assert forest_data.bleu(w) > forest_data.bleu(start) + 0.05
    assert tuner.split_edges_ >= sum(f.n_edges for f in forests)
