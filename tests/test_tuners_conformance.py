"""One conformance test over every registered tuner (as scikit-learn's check_estimator):
parameters stored unchanged, fit improves a toy objective, same seed gives bit-identical
weights, bad input raises InputError."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import tuners
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.kbest import KBestBuilder

N_TUNERS = len(tuners.REGISTRY)


def toy_kbest(n_sentences=40, k=25, seed=0):
    """Hypotheses whose BLEU statistics follow feature 0 (good) and feature 1 (bad)."""
    rng = np.random.default_rng(seed)
    space = FeatureSpace(["good_0", "bad_0", "noise_0", "noise_1"], ["sp_a"])
    builder = KBestBuilder(space)
    for s in range(n_sentences):
        for j in range(k):
            quality = rng.uniform()
            dense = [quality + 0.1 * rng.standard_normal(), -quality + 0.1 * rng.standard_normal(),
                     rng.standard_normal(), rng.standard_normal()]
            length = 20
            matches = [int(round(length * quality ** (n + 1) * 0.9)) + 1 for n in range(4)]
            stats = [matches[0], length, matches[1], length - 1, matches[2], length - 2,
                     matches[3], length - 3, 20]
            sparse = ([space.add("sp_a")], [1.0]) if j % 3 == 0 else ([], [])
            builder.add(s, f"s{s} h{j}", dense, sparse[0], sparse[1], stats=stats)
    return builder.build()


def seeded_params(cls):
    """A seed where the tuner takes one; no interpolation with the start point (PRO's Psi), so
    that one fit shows what the optimiser itself does."""
    params = {}
    signature = inspect.signature(cls.__init__).parameters
    if "seed" in signature:
        params["seed"] = 3
    if "psi" in signature:
        params["psi"] = 1.0
    return params


@pytest.mark.parametrize("name", sorted(tuners.REGISTRY))
def test_tuner_conformance(name):
    cls = tuners.REGISTRY[name]
    if cls.needs != "kbest":
        pytest.skip(f"{name} tunes on {cls.needs}, not on k-best lists (covered by its own tests)")
    tuner = tuners.get_tuner(name, **seeded_params(cls))
    defaults = tuner.get_params()
    data = toy_kbest()
    w0 = np.array([-1.0, 1.0, 0.0, 0.0, 0.0])
    before = data.bleu(w0, smooth="none")
    w = tuner.fit(data, w0)
    assert tuner.get_params() == defaults, "fit must not change the parameters"
    assert isinstance(w, np.ndarray) and w.shape == (len(data.space),) and np.all(np.isfinite(w))
    assert np.array_equal(w, tuner.weights_)
    assert data.bleu(w, smooth="none") > before + 0.05
    again = tuners.get_tuner(name, **seeded_params(cls)).fit(data, w0)
    assert np.array_equal(w, again), "same seed must give bit-identical weights"
    with pytest.raises(InputError):
        tuners.get_tuner(name).fit(data, np.array([np.nan, 0, 0, 0, 0]))
    no_stats = toy_kbest(5, 4)
    no_stats.stats = None
    with pytest.raises(InputError):
        tuners.get_tuner(name).fit(no_stats, np.zeros(5))


def test_registry_rejects_unknown_names_and_parameters():
    with pytest.raises(InputError, match="unknown tuner"):
        tuners.get_tuner("no-such-tuner")
    if N_TUNERS:
        name = sorted(tuners.REGISTRY)[0]
        with pytest.raises(InputError, match="bad parameters"):
            tuners.get_tuner(name, not_a_parameter=1)
