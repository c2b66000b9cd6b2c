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
    """A seed where the tuner takes one; no interpolation with the start point (PRO's Psi), a wide box for
    box-bounded tuners (BO) and a step for the toy's unit-scale features (RAMPION), so that one fit shows
    what the optimiser itself does."""
    params = {}
    signature = inspect.signature(cls.__init__).parameters
    if "seed" in signature:
        params["seed"] = 3
    if "psi" in signature:
        params["psi"] = 1.0
    if "bound" in signature:  # Bayesian optimisation searches a box w0 +- bound: wide enough to flip signs
        params.update(bound=2.0, steps=30)
    if "ssd_iterations" in signature:  # RAMPION's step 1e-4 is cdec's, for features of log-probability scale
        params["eta"] = 0.01
    return params


# the tuners that fit on k-best lists; the forest and online tuners have their own test files
KBEST_TUNERS = sorted(name for name, cls in tuners.REGISTRY.items() if cls.tags.fits_on == "kbest")


@pytest.mark.parametrize("name", KBEST_TUNERS)
def test_tuner_conformance(name):
    cls = tuners.REGISTRY[name]
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
        with pytest.raises(InputError, match=r"has no parameter .not_a_parameter. \(expected one of "):
            tuners.get_tuner(name, not_a_parameter=1)


def test_a_tuner_that_fits_on_a_decoder_must_be_an_online_tuner():
    class Decodes(tuners.base.Tuner):
        tags = tuners.base.TunerTags(fits_on="decoder")

    with pytest.raises(TypeError, match="must subclass OnlineTuner"):
        tuners.register("decodes-but-not-online")(Decodes)
    assert "decodes-but-not-online" not in tuners.REGISTRY


def kbest_with_gap():
    """Sentences 0 and 2 have hypotheses, sentence 1 has none (a decoder that failed on it)."""
    space = FeatureSpace(["good_0", "bad_0", "noise_0", "noise_1"])
    builder = KBestBuilder(space)
    stats = [5, 10, 3, 9, 2, 8, 1, 7, 10]
    for s in (0, 2):
        for j in range(3):
            builder.add(s, f"s{s} h{j}", [j, -j, 0.5, 0.1 * j], stats=stats)
    return builder.build(3)


@pytest.mark.parametrize("name", KBEST_TUNERS)
def test_tuner_bad_input(name):
    """The issue's bad input: NaN/inf features, a sentence with an empty list, weights missing
    features (or naming unknown ones), mismatched sentence ids; each an InputError that says
    what is wrong."""
    cls = tuners.REGISTRY[name]
    tuner = tuners.get_tuner(name, **seeded_params(cls))
    data = toy_kbest(6, 5)
    with pytest.raises(InputError, match="no hypothesis.*dev sentence 1"):
        tuner.fit(kbest_with_gap(), np.zeros(4))
    w = {"good_0": 1.0, "bad_0": 0.0, "noise_0": 0.0}
    with pytest.raises(InputError, match="miss 1 dense feature.*noise_1"):
        tuner.fit(data, w)
    with pytest.raises(InputError, match="unknown feature name 'typo_0'"):
        tuner.fit(data, {**w, "noise_1": 0.0, "typo_0": 1.0})
    with pytest.raises(InputError, match="weight vector"):
        tuner.fit(data, np.zeros(2))
    for bad in (np.inf, -np.inf):
        with pytest.raises(InputError):
            tuner.fit(data, np.array([bad, 0, 0, 0, 0]))
    # a full dict (sparse weights may be left out) is accepted
    assert tuner.fit(data, {**w, "noise_1": 0.0}).shape == (len(data.space),)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_features_and_mismatched_ids_are_refused(value):
    """Tuning data cannot hold NaN/inf features, and lists of other sentences do not merge."""
    space = FeatureSpace(["a_0", "b_0"])
    stats = [1, 1, 0, 0, 0, 0, 0, 0, 1]
    for sparse in (False, True):
        builder = KBestBuilder(space)
        builder.add(0, "x", [1.0, 0.0], stats=stats)
        if sparse:
            builder.add(1, "y", [1.0, 0.0], [space.add("sp")], [value], stats=stats)
        else:
            builder.add(1, "y", [1.0, value], stats=stats)
        with pytest.raises(InputError, match="finite"):
            builder.build()
    one, other = toy_kbest(3, 2), toy_kbest(4, 2)
    with pytest.raises(InputError):
        one.merge(other)


def test_set_params_follows_scikit_learns_contract():
    """set_params sets by name and returns the tuner; get_params reads them back; an unknown name is an
    error that lists the valid ones (the tuning loop seeds each iteration's tuner this way)."""
    from minismt.errors import InputError
    from tuners.base import get_tuner
    tuner = get_tuner("mert")
    assert tuner.set_params(seed=7, n_random_restarts=3) is tuner
    assert tuner.get_params()["seed"] == 7 and tuner.get_params()["n_random_restarts"] == 3
    with pytest.raises(InputError, match="has no parameter 'restarts'.*expected one of n_random_restarts"):
        tuner.set_params(restarts=3)
