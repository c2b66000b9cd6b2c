"""The expectation semirings (minismt.hypergraph.expectations) against brute-force enumeration of every
derivation of random forests with two-tail edges, shared sub-forests and repeated tails, and in log space on
forests whose partition function overflows a float."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph import HypergraphBuilder
from minismt.hypergraph.expectations import (ExpectationBatch, entropy, expectation_gradient, expected_features,
                                             expected_products, first_order, first_order_with_gradient)
import random_forests
from random_forests import derivation_table

NAMES = ["f0", "f1", "f2", "f3"]
VALUES = [-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def forests():
    return random_forests.forests(FeatureSpace(NAMES), max_nodes=8, values=VALUES, max_derivations=300,
                                  feature_chance=0.6)


weights_st = st.lists(st.floats(-1.5, 1.5), min_size=4, max_size=4).map(np.array)
scales_st = st.sampled_from([1.0, 0.5, 2.0])


def dense_features(hg) -> np.ndarray:
    """``E x D`` edge feature matrix."""
    out = np.zeros((hg.n_edges, len(hg.space)))
    for e in range(hg.n_edges):
        for k in range(hg.feat_offsets[e], hg.feat_offsets[e + 1]):
            out[e, hg.feat_ids[k]] += hg.feat_values[k]
    return out


def enumerate_goal(hg, w, scale, *edge_arrays):
    """Per goal derivation: its probability and the sums of each ``E x K`` edge array (K columns each)."""
    columns = [a[:, j] for a in edge_arrays for j in range(a.shape[1])]
    goal = derivation_table(hg, hg.edge_scores(w) * scale, *columns)[hg.goal]
    scores = np.array([d[0] for d in goal])
    top = scores.max()
    log_z = top + math.log(np.exp(scores - top).sum())
    p = np.exp(scores - log_z)
    sums = np.array([d[1:1 + len(columns)] for d in goal], dtype=np.float64).reshape(len(goal), len(columns))
    parts, start = [], 0
    for a in edge_arrays:
        parts.append(sums[:, start:start + a.shape[1]])
        start += a.shape[1]
    return log_z, p, parts, goal


@SETTINGS
@given(forests(), weights_st, scales_st, st.data())
def test_first_order_equals_enumeration(hg, w, scale, data):
    r = np.array(data.draw(st.lists(st.sampled_from(VALUES), min_size=2 * hg.n_edges, max_size=2 * hg.n_edges)),
                 dtype=np.float64).reshape(hg.n_edges, 2)
    log_z, p, (r_sum,), goal = enumerate_goal(hg, w, scale, r)
    result = first_order(hg, r, w, scale)
    assert result.log_z == pytest.approx(log_z, abs=1e-9)
    np.testing.assert_allclose(result.expectation, p @ r_sum, rtol=1e-9, atol=1e-9)
    # per edge: the expected uses and the expectation of r over the derivations through it, weighted by uses
    uses = np.zeros((len(goal), hg.n_edges))
    for i, d in enumerate(goal):
        for e in d[-2]:
            uses[i, e] += 1
    mass = p @ uses
    np.testing.assert_allclose(result.posteriors, mass, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(result.posteriors, hg.edge_posteriors(w * scale), rtol=1e-9, atol=1e-12)
    for e in np.flatnonzero(mass > 1e-12):
        np.testing.assert_allclose(result.edge_expectations[e], (p * uses[:, e]) @ r_sum / mass[e], rtol=1e-8,
                                   atol=1e-8)
    np.testing.assert_allclose(result.posteriors @ r, result.expectation, rtol=1e-9, atol=1e-9)


@SETTINGS
@given(forests(), weights_st, scales_st, st.data())
def test_second_order_equals_enumeration(hg, w, scale, data):
    """E[f], E[r s^T] for dense edge values s, E[r f^T] over the sparse features, and E[f f^T]."""
    r = np.array(data.draw(st.lists(st.sampled_from(VALUES), min_size=2 * hg.n_edges, max_size=2 * hg.n_edges)),
                 dtype=np.float64).reshape(hg.n_edges, 2)
    s = np.array(data.draw(st.lists(st.sampled_from(VALUES), min_size=3 * hg.n_edges, max_size=3 * hg.n_edges)),
                 dtype=np.float64).reshape(hg.n_edges, 3)
    f = dense_features(hg)
    _, p, (r_sum, s_sum, f_sum), _ = enumerate_goal(hg, w, scale, r, s, f)
    np.testing.assert_allclose(expected_features(hg, w, scale), p @ f_sum, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(expected_products(hg, r, w, scale, other=s), (r_sum * p[:, None]).T @ s_sum,
                               rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(expected_products(hg, r, w, scale), (r_sum * p[:, None]).T @ f_sum, rtol=1e-8,
                               atol=1e-8)
    np.testing.assert_allclose(expected_products(hg, f, w, scale), (f_sum * p[:, None]).T @ f_sum, rtol=1e-8,
                               atol=1e-8)


@SETTINGS
@given(forests(), weights_st, scales_st, st.data())
def test_gradient_is_the_covariance_and_the_finite_difference(hg, w, scale, data):
    r = np.array(data.draw(st.lists(st.sampled_from(VALUES), min_size=hg.n_edges, max_size=hg.n_edges)),
                 dtype=np.float64)
    f = dense_features(hg)
    _, p, (r_sum, f_sum), _ = enumerate_goal(hg, w, scale, r[:, None], f)
    expectation, gradient = expectation_gradient(hg, r, w, scale)
    mean_r, mean_f = p @ r_sum, p @ f_sum
    covariance = (r_sum * p[:, None]).T @ f_sum - np.outer(mean_r, mean_f)
    np.testing.assert_allclose(expectation, mean_r, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gradient, scale * covariance, rtol=1e-7, atol=1e-8)
    step = 1e-6
    for j in range(len(NAMES)):
        up, down = w.copy(), w.copy()
        up[j] += step
        down[j] -= step
        numeric = (first_order(hg, r, up, scale).expectation - first_order(hg, r, down, scale).expectation) / (2 * step)
        assert gradient[0, j] == pytest.approx(numeric[0], abs=1e-5)


@SETTINGS
@given(forests(), weights_st, scales_st)
def test_entropy_equals_enumeration(hg, w, scale):
    _, p, _, _ = enumerate_goal(hg, w, scale)
    expected = -float(np.sum(p[p > 0] * np.log(p[p > 0])))
    assert entropy(hg, w, scale) == pytest.approx(expected, abs=1e-9)


@SETTINGS
@given(st.lists(forests(), min_size=1, max_size=3), weights_st, scales_st, st.floats(-2, 2), st.data())
def test_a_batch_equals_each_forest_s_first_order_semiring(hgs, w, scale, score_coefficient, data):
    """The batched passes against :func:`first_order_with_gradient` per forest (itself tested against
    enumeration above): log Z, E[r], E[score] and the gradient of ``c . E[r] + c_s E[score]``, with integer
    edge values and each forest given as its own structure."""
    values = [np.array(data.draw(st.lists(st.integers(-3, 3), min_size=3 * hg.n_edges, max_size=3 * hg.n_edges)),
                       dtype=np.int16).reshape(hg.n_edges, 3) for hg in hgs]
    coefficients = np.array(data.draw(st.lists(st.floats(-2, 2), min_size=3, max_size=3)))
    batch = ExpectationBatch([(hg, hg, np.arange(hg.n_edges), v) for hg, v in zip(hgs, values)])
    result = batch.evaluate(w, scale)
    gradient = batch.gradient(coefficients, score_coefficient)
    expected_gradient = np.zeros_like(gradient)
    for f, (hg, v) in enumerate(zip(hgs, values)):
        scores = hg.edge_scores(w) * scale
        reference, by_edge = first_order_with_gradient(hg, np.column_stack([v, scores]), w, scale)
        assert result.log_z[f] == pytest.approx(reference.log_z, abs=1e-9)
        np.testing.assert_allclose(result.expectation[f], reference.expectation[:3], rtol=1e-9, atol=1e-9)
        assert result.score_expectation[f] == pytest.approx(reference.expectation[3], abs=1e-8)
        expected_gradient += coefficients @ by_edge[:3] + score_coefficient * by_edge[3]
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-7, atol=1e-8)


def chain(length: int, scores=(40.0, 39.0), values=(1.0, 3.0)):
    """A long-sentence forest: ``length`` two-way choices in a row (each node: two edges from the node before,
    scores ``scores``, one feature with ``values``), ``Z = (e^a + e^b)^length``, far beyond a float."""
    space = FeatureSpace(["score", "value"])
    builder = HypergraphBuilder(space)
    builder.add_node()
    for i in range(1, length + 1):
        builder.add_node()
        for score, value in zip(scores, values):
            builder.add_edge(i, [i - 1], {"score": score, "value": value}, [0, "w"])
    return builder.build()


def test_a_long_sentence_does_not_overflow():
    """2,000 choices of masses e^40 and e^39: log Z is 2000 log(e^40 + e^39), and every expectation is the
    closed form's to 1e-7 (log masses near 8e4 keep about 11 significant digits after their differences)."""
    hg = chain(2000)
    w = np.array([1.0, 0.0])
    a, b = 40.0, 39.0
    p_a = 1.0 / (1.0 + math.exp(b - a))
    result = first_order(hg, np.column_stack([np.tile([1.0, 3.0], 2000), np.ones(4000)]), w)
    assert math.isfinite(result.log_z)
    assert result.log_z == pytest.approx(2000 * (a + math.log1p(math.exp(b - a))), rel=1e-12)
    np.testing.assert_allclose(result.expectation, [2000 * (p_a + 3 * (1 - p_a)), 2000], rtol=1e-7)
    np.testing.assert_allclose(result.posteriors, np.tile([p_a, 1 - p_a], 2000), rtol=1e-7)
    features = expected_features(hg, w)
    np.testing.assert_allclose(features, [2000 * (a * p_a + b * (1 - p_a)), 2000 * (p_a + 3 * (1 - p_a))],
                               rtol=1e-7)
    # Var of the value feature: 2000 independent choices of 1 or 3
    _, gradient = expectation_gradient(hg, np.tile([1.0, 3.0], 2000), w)
    assert gradient[0, 1] == pytest.approx(2000 * 4 * p_a * (1 - p_a), rel=1e-7)
    assert entropy(hg, w) == pytest.approx(-2000 * (p_a * math.log(p_a) + (1 - p_a) * math.log(1 - p_a)),
                                           rel=1e-7)


def test_bad_edge_values_are_input_errors():
    hg = chain(3)
    with pytest.raises(InputError, match="shape"):
        first_order(hg, np.zeros(5), [1.0, 0.0])
    with pytest.raises(InputError, match="not finite"):
        first_order(hg, np.full(6, np.nan), [1.0, 0.0])
    with pytest.raises(InputError, match="scale"):
        first_order(hg, np.zeros(6), [1.0, 0.0], scale=math.inf)
