"""RAMPION (Gimpel & Smith 2012; cdec's rampion_cccp): the numba passes against a plain NumPy reference on
random k-best lists, the ramp loss' definition, determinism and bad parameters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tuners
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.kbest import KBestBuilder
from minismt.metrics import sentence_bleu


def random_kbest(seed: int, sentences: int, k: int):
    """k-best lists with continuous dense features, a sparse feature on some hypotheses and random BLEU
    statistics."""
    rng = np.random.default_rng(seed)
    space = FeatureSpace(["a_0", "b_0", "c_0"], [])
    builder = KBestBuilder(space)
    for s in range(sentences):
        for j in range(int(rng.integers(1, k + 1))):
            length = int(rng.integers(4, 15))
            matches = sorted(rng.integers(0, length + 1, size=4).tolist(), reverse=True)
            stats = [min(matches[n], length - n) if length - n > 0 else 0 for n in range(4)]
            row = [stats[0], length, stats[1], length - 1, stats[2], length - 2, stats[3], length - 3,
                   int(rng.integers(4, 15))]
            names = [space.add(f"sp_{int(rng.integers(0, 4))}")] if rng.uniform() < 0.5 else []
            builder.add(s, f"s{s} h{j}", (10 * rng.standard_normal(3)).tolist(), names,
                        [float(rng.standard_normal())] * len(names), stats=row)
    return builder.build()


def reference_rampion(data, w0, cccp_iterations, ssd_iterations, eta, C, alpha):
    """RAMPION as written in the paper and cdec, on a dense matrix of every hypothesis' features."""
    X = np.zeros((data.n_hypotheses, len(data.space)))
    X[:, :data.features.shape[1]] = data.features
    for row in range(data.n_hypotheses):
        for j in range(data.indptr[row], data.indptr[row + 1]):
            X[row, data.indices[j]] += data.values[j]
    cost = 1.0 - sentence_bleu(data.stats)
    offsets, n = data.offsets, data.offsets.shape[0] - 1
    w = np.array(w0, dtype=float)

    def best(i, sign):
        rows = np.arange(offsets[i], offsets[i + 1])
        return rows[int(np.argmax(X[rows] @ w + sign * alpha * cost[rows]))]

    for _ in range(cccp_iterations):
        hopes = [best(i, -1.0) for i in range(n)]
        for _ in range(ssd_iterations):
            for i in range(n):
                fear = best(i, 1.0)
                w = w - w * (eta * C / n) + eta * (X[hopes[i]] - X[fear])
    losses = [max(X[r] @ w + alpha * cost[r] for r in range(offsets[i], offsets[i + 1]))
              - max(X[r] @ w - alpha * cost[r] for r in range(offsets[i], offsets[i + 1])) for i in range(n)]
    return w, float(np.mean(losses))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), sentences=st.integers(1, 8), k=st.integers(1, 6),
       iterations=st.tuples(st.integers(1, 3), st.integers(1, 3)), eta=st.sampled_from([1e-4, 1e-2, 0.3]),
       C=st.sampled_from([0.0, 1.0, 50.0]), alpha=st.sampled_from([0.5, 10.0]))
def test_rampion_equals_the_plain_algorithm(seed, sentences, k, iterations, eta, C, alpha):
    """The kernels (weights kept as scale * v, the shrinkage folded in when the scale gets small) give the
    weights and the ramp loss of the algorithm written out on a dense matrix."""
    assume(eta * C / sentences < 1.0)
    data = random_kbest(seed, sentences, k)
    w0 = np.random.default_rng(seed + 1).standard_normal(len(data.space))
    tuner = tuners.get_tuner("rampion", cccp_iterations=iterations[0], ssd_iterations=iterations[1], eta=eta,
                             C=C, alpha=alpha)
    w = tuner.fit(data, w0)
    expected, loss = reference_rampion(data, w0, *iterations, eta, C, alpha)
    np.testing.assert_allclose(w, expected, rtol=1e-9, atol=1e-12)
    assert tuner.history_[-1]["ramp_loss"] == pytest.approx(loss, rel=1e-9, abs=1e-12)
    assert all(h["ramp_loss"] >= 0.0 for h in tuner.history_)


def test_the_shrinkage_folds_into_the_weights_when_the_scale_gets_small():
    """A strong L2 term shrinks the scale below its floor many times over; the weights still equal the
    plain algorithm's (which shrinks them at every step)."""
    data = random_kbest(5, 6, 5)
    w0 = np.ones(len(data.space))
    tuner = tuners.get_tuner("rampion", cccp_iterations=3, ssd_iterations=4, eta=0.2, C=25.0)
    expected, _ = reference_rampion(data, w0, 3, 4, 0.2, 25.0, 10.0)
    np.testing.assert_allclose(tuner.fit(data, w0), expected, rtol=1e-9, atol=1e-12)
    assert (1 - 0.2 * 25.0 / 6) ** (3 * 4 * 6) < 1e-3 ** 2


def test_rampion_moves_towards_bleu_and_is_deterministic():
    """On lists whose BLEU follows feature a and opposes feature b, RAMPION from the wrong weights raises the
    model-best BLEU by far; a second fit gives the same bits."""
    from test_tuners_conformance import toy_kbest
    data = toy_kbest()
    w0 = np.array([-1.0, 1.0, 0.0, 0.0, 0.0])
    tuner = tuners.get_tuner("rampion", eta=0.01)
    w = tuner.fit(data, w0)
    assert data.bleu(w, smooth="none") > tuner.initial_bleu_ + 0.1
    assert np.array_equal(w, tuners.get_tuner("rampion", eta=0.01).fit(data, w0))
    assert [h["iteration"] for h in tuner.history_] == list(range(1, 11))


@pytest.mark.parametrize("params", [{"eta": 0}, {"eta": -1.0}, {"alpha": float("nan")}, {"C": -1},
                                    {"cccp_iterations": 0}, {"ssd_iterations": 2.5}, {"C": "x"},
                                    {"eta": 0.5, "C": 10.0}])
def test_bad_parameters_are_input_errors(params):
    """Each an InputError naming the parameter (the last: a shrinkage step 1 - eta C / N that is not positive)."""
    with pytest.raises(InputError):
        tuners.get_tuner("rampion", **params).fit(random_kbest(1, 3, 3), np.zeros(3))
