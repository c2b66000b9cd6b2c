"""Bayesian-optimisation tuners (tuners.bayesopt, Miao et al. 2016): NBL-BO, HG-BO, CHG-BO, HG-REMBO on the
cdec decode_nc forests, with few BO steps so that the file runs in seconds."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tuners
from conftest import shared_path
from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph import HypergraphBuilder, read_cdec_json
from minismt.kbest import kbest_of
from minismt.metrics import BleuReferences
from plugins.cdec.weights import read_cdec_weights
from minismt.hypergraph import ForestData
from tuners.bayesopt import CHGBO, HGBO, HGREMBO, NBLBO, BoxBayesOpt, expected_improvement

FAST = dict(steps=12, n_candidates=400, n_local=100, n_restarts=0)


@pytest.fixture(scope="module")
def nc():
    """decode_nc: weights.init (its names are the dense features), both forest sets sharing one space and
    vocabulary (6-digit and 17-digit forests: two "iterations" of forests for CHG-BO), the references."""
    folder = shared_path("fixtures", "cdec", "decode_nc")
    w0 = read_cdec_weights(folder / "weights.init")
    space, vocab = FeatureSpace(list(w0)), Vocabulary()
    forests = {sub: [read_cdec_json(folder / sub / f"{i}.json", space, vocab) for i in range(10)]
               for sub in ("hgs_json", "hgs_json_p17")}
    references = BleuReferences([[r] for r in (folder / "dev.refs").read_text(encoding="utf-8").splitlines()])
    return w0, space, vocab, forests, references


@pytest.fixture(scope="module")
def nc_data(nc):
    w0, space, _, forests, references = nc
    return ForestData(forests["hgs_json_p17"], np.arange(10), references), space.weights(w0, grow=False)


def assert_in_box(w, w0, dims, bound):
    others = np.setdiff1d(np.arange(w.shape[0]), dims)
    assert np.all(np.abs(w[dims] - w0[dims]) <= bound)
    assert np.array_equal(w[others], w0[others])


def test_registry_and_classes():
    assert {n: tuners.REGISTRY[n] for n in ("nbl-bo", "hg-bo", "chg-bo", "hg-rembo")} == {
        "nbl-bo": NBLBO, "hg-bo": HGBO, "chg-bo": CHGBO, "hg-rembo": HGREMBO}
    assert NBLBO.tags.fits_on == "kbest"
    assert HGBO.tags.fits_on == CHGBO.tags.fits_on == HGREMBO.tags.fits_on == "forests"
    assert (HGBO.tags.forest_iterations, CHGBO.tags.forest_iterations, HGREMBO.tags.forest_iterations) == (1, 2, 1)
    params = tuners.get_tuner("hg-bo").get_params()
    assert params["bound"] == 0.1 and params["steps"] == 100  # Sec. 3, footnote 4
    assert tuners.get_tuner("hg-rembo").get_params()["embedding_dim"] == 10


def test_expected_improvement():
    ei = expected_improvement(np.array([0.0, 1.0, -1.0, 2.0]), np.array([1.0, 0.0, 0.0, 0.5]), 0.0)
    assert ei[0] == pytest.approx(1 / math.sqrt(2 * math.pi))
    assert ei[1:3].tolist() == [1.0, 0.0] and ei[3] > 2.0
    rng = np.random.default_rng(0)
    samples = 0.3 + 0.7 * rng.standard_normal(400_000)
    assert expected_improvement(np.array([0.3]), np.array([0.7]), 0.5)[0] == pytest.approx(
        np.maximum(samples - 0.5, 0).mean(), rel=0.01)


def test_box_optimiser_finds_a_smooth_peak():
    """Plain GP-EI on a smooth function of 3 variables: it gets close to the peak inside the box."""
    peak = np.array([0.3, -0.2, 0.05])
    bo = BoxBayesOpt(np.full(3, -0.5), np.full(3, 0.5), np.random.default_rng(0), n_candidates=2000, n_local=200,
                     n_restarts=1)
    x, y = bo.run(lambda x: -float(np.sum((x - peak) ** 2)), np.zeros(3), 30)
    assert y > -0.01 and y == max(r["bleu"] for r in bo.records)
    assert [r["kind"] for r in bo.records[:3]] == ["start", "init", "ei"] and len(bo.records) == 31


def test_hg_bo_improves_decode_nc_inside_the_box(nc_data):
    data, w0 = nc_data
    tuner = tuners.get_tuner("hg-bo", seed=1, **FAST)
    before = tuner.get_params()
    w = tuner.fit(data, w0)
    assert tuner.get_params() == before
    assert np.array_equal(w, tuner.weights_) and w.shape == w0.shape and np.all(np.isfinite(w))
    start = data.bleu(w0)
    assert tuner.bleu_start_ == start == pytest.approx(0.0873304, abs=1e-6)
    assert tuner.bleu_ == data.bleu(w) > start + 0.02  # the slow reference agrees with the fast evaluator
    used = np.unique(np.concatenate([f.feat_ids for f in data.forests]))
    assert_in_box(w, w0, used, 0.1)
    history = tuner.history_
    assert len(history) == 1 + FAST["steps"] and history[0]["kind"] == "start" and history[0]["bleu"] == start
    best = [h["best_bleu"] for h in history]
    assert best == list(np.maximum.accumulate([h["bleu"] for h in history])) and best[-1] == tuner.bleu_
    # determinism: same seed -> bit-identical weights; another seed -> another search
    assert np.array_equal(w, tuners.get_tuner("hg-bo", seed=1, **FAST).fit(data, w0))
    assert not np.array_equal(w, tuners.get_tuner("hg-bo", seed=2, **FAST).fit(data, w0))


def test_hg_bo_weights_as_dict_and_bound(nc, nc_data):
    data, w0 = nc_data
    names = nc[0]
    tuner = tuners.get_tuner("hg-bo", seed=0, bound=0.5, optimize_every=3, **{**FAST, "steps": 6})
    w = tuner.fit(data, names)
    assert np.all(np.abs(w - w0) <= 0.5) and tuner.bleu_ >= tuner.bleu_start_
    assert np.array_equal(w, tuners.get_tuner("hg-bo", seed=0, bound=0.5, optimize_every=3,
                                              **{**FAST, "steps": 6}).fit(data, w0))


def test_chg_bo_two_forests_per_sentence(nc):
    w0, space, _, forests, references = nc
    w0 = space.weights(w0, grow=False)
    two = ForestData(forests["hgs_json"] + forests["hgs_json_p17"], np.concatenate([np.arange(10)] * 2), references)
    tuner = tuners.get_tuner("chg-bo", seed=3, **FAST)
    w = tuner.fit(two, w0)
    assert tuner.bleu_ == two.bleu(w) > two.bleu(w0)
    assert np.all(np.abs(w - w0) <= 0.1)
    assert np.array_equal(w, CHGBO(seed=3, **FAST).fit(two, w0))


def test_nbl_bo_on_kbest_lists_from_the_forests(nc_data):
    data, w0 = nc_data
    kbest = kbest_of([hg.kbest(100, w0, distinct=True).rows() for hg in data.forests], data.space)
    kbest.set_stats(data.references.kbest_stats(kbest))
    tuner = tuners.get_tuner("nbl-bo", seed=0, **FAST)
    w = tuner.fit(kbest, w0)
    assert tuner.bleu_start_ == kbest.bleu(w0) == pytest.approx(0.0873304, abs=1e-6)
    assert tuner.bleu_ == kbest.bleu(w) > tuner.bleu_start_ + 0.02
    assert np.all(np.abs(w - w0) <= 0.1) and len(tuner.history_) == 1 + FAST["steps"]
    assert np.array_equal(w, NBLBO(seed=0, **FAST).fit(kbest, w0))


def with_sparse_features(nc):
    """decode_nc forests with synthetic sparse features: a target-word indicator on every edge with words
    (``tw_<word>`` = number of times the word is on the edge) and a rule-arity indicator."""
    w0, _, _, forests, references = nc
    space, vocab = FeatureSpace(list(w0)), Vocabulary()
    folder = shared_path("fixtures", "cdec", "decode_nc")
    out = []
    for i in range(10):
        hg = read_cdec_json(folder / "hgs_json_p17" / f"{i}.json", space, vocab)
        offsets, ids, values = [0], [], []
        for e in range(hg.n_edges):
            feats = dict(zip(hg.feat_ids[hg.feat_offsets[e]:hg.feat_offsets[e + 1]].tolist(),
                             hg.feat_values[hg.feat_offsets[e]:hg.feat_offsets[e + 1]].tolist()))
            for item in hg.tmpl[hg.tmpl_offsets[e]:hg.tmpl_offsets[e + 1]].tolist():
                if item >= 0 and len(vocab[item]) > 3:
                    key = space.add("tw_" + vocab[item])
                    feats[key] = feats.get(key, 0.0) + 1.0
            feats[space.add(f"arity_{len(hg.edge_tails(e))}")] = 1.0
            ids.extend(sorted(feats))
            values.extend(feats[k] for k in sorted(feats))
            offsets.append(len(ids))
        out.append(hg.replace(feat_offsets=np.array(offsets), feat_ids=np.array(ids, dtype=np.int32),
                              feat_values=np.array(values)))
    return ForestData(out, np.arange(10), references), space.weights(w0, grow=False)


def test_hg_rembo_sparse_features_in_an_embedding(nc):
    data, w0 = with_sparse_features(nc)
    space = data.space
    n_dense = space.n_dense
    assert len(space) - n_dense > 100
    params = dict(seed=4, embedding_dim=3, sparse_steps=8, **FAST)
    tuner = tuners.get_tuner("hg-rembo", **params)
    w = tuner.fit(data, w0)
    A, ids = tuner.embedding_, tuner.sparse_ids_
    assert ids.tolist() == list(range(n_dense, len(space)))  # every sparse feature occurs on some edge
    assert A.shape == (len(ids), 3) and np.allclose(np.abs(A).sum(axis=1), 1.0)  # A_bar: rows of L1 norm 1
    assert tuner.z_.shape == (3,) and np.all(np.abs(tuner.z_) <= 0.1)
    assert np.all(np.abs(w[ids] - w0[ids]) <= 0.1 + 1e-12)  # |A_bar z|_inf <= |z|_inf
    assert np.all(np.abs(w[:n_dense] - w0[:n_dense]) <= 0.1)
    phases = [h["phase"] for h in tuner.history_]
    assert phases == ["dense"] * (1 + FAST["steps"]) + ["sparse"] * (1 + 8)
    # the second step starts where the first ended and never loses: the final BLEU is the best seen
    dense_end = tuner.history_[FAST["steps"]]["best_bleu"]
    assert tuner.history_[1 + FAST["steps"]]["bleu"] == dense_end
    assert tuner.bleu_ == data.bleu(w) == tuner.history_[-1]["best_bleu"] >= dense_end > tuner.bleu_start_
    assert np.allclose(w[ids] - w0[ids], A @ tuner.z_)
    assert np.array_equal(w, HGREMBO(**params).fit(data, w0))
    # with a wider embedding bound the sparse weights may move further, never beyond it
    wide = tuners.get_tuner("hg-rembo", **{**params, "embedding_bound": 1.0, "steps": 2}).fit(data, w0)
    assert np.all(np.abs(wide[ids] - w0[ids]) <= 1.0 + 1e-12)


def forests_decided_by_sparse_features(n_sentences=30):
    """One forest per sentence with two one-edge derivations of equal dense features: the reference
    (``RuleId_good<i>``) and a wrong translation (``RuleId_bad<i>``, start weight 0.01, so it wins at the
    start and corpus BLEU is 0). Dense weights cannot change any translation; sentence i is right exactly
    when its good rule's weight beats its bad rule's, and corpus BLEU is the fraction of right sentences."""
    space, vocab = FeatureSpace(["LM0", "WordPenalty0"]), Vocabulary()
    forests, references = [], []
    for i in range(n_sentences):
        builder = HypergraphBuilder(space, vocab)
        goal = builder.add_node()
        for kind in ("good", "bad"):
            builder.add_edge(goal, (), {"LM0": -3.0, "WordPenalty0": -4.0, f"RuleId_{kind}{i}": 1.0},
                             [f"{kind}{i}w{k}" for k in range(4)])
        forests.append(builder.build())
        references.append([" ".join(f"good{i}w{k}" for k in range(4))])
    w0 = space.weights({"LM0": 0.5, "WordPenalty0": -1.0, **{f"RuleId_bad{i}": 0.01 for i in range(n_sentences)}},
                       grow=False)
    return ForestData(forests, np.arange(n_sentences), BleuReferences(references)), w0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hg_rembo_moves_sparse_weights_that_decide_the_translations(seed):
    """HG-REMBO's second step on forests where only the sparse weights matter: the dense step cannot gain,
    and a random point z of the embedding makes sentence i right with probability about 0.4 (the difference
    of two rows of A_bar z against the 0.01 start margin), independently over 30 sentences, so the very
    first evaluation in the embedding already gains (all 30 wrong: about 1e-6), whatever the GP does."""
    data, w0 = forests_decided_by_sparse_features()
    tuner = HGREMBO(seed=seed, **{**FAST, "steps": 6})
    w = tuner.fit(data, w0)
    assert tuner.bleu_start_ == 0.0
    assert all(h["bleu"] == 0.0 for h in tuner.history_ if h["phase"] == "dense")
    assert tuner.bleu_ == data.bleu(w) >= 0.2
    sparse = tuner.sparse_ids_
    assert sparse.tolist() == list(range(2, len(data.space))) and np.array_equal(w[:2], w0[:2])
    assert np.count_nonzero(w[sparse] != w0[sparse]) == sparse.size
    assert np.allclose(w[sparse] - w0[sparse], tuner.embedding_ @ tuner.z_)
    good = np.array([data.space.index(f"RuleId_good{i}") for i in range(30)])
    bad = np.array([data.space.index(f"RuleId_bad{i}") for i in range(30)])
    assert tuner.bleu_ == pytest.approx(np.mean(w[good] > w[bad]))


def test_hg_rembo_without_sparse_features_is_hg_bo(nc_data):
    data, w0 = nc_data
    rembo = HGREMBO(seed=5, **FAST)
    w = rembo.fit(data, w0)
    assert np.array_equal(w, HGBO(seed=5, **FAST).fit(data, w0))
    assert rembo.embedding_.shape == (0, 0) and {h["phase"] for h in rembo.history_} == {"dense"}


def test_bad_input(nc_data):
    data, w0 = nc_data
    nan = w0.copy()
    nan[1] = np.nan
    kbest = kbest_of([data.forests[0].kbest(5, w0).rows()], data.space)
    kbest.set_stats(data.references.kbest_stats(kbest))
    for name in ("hg-bo", "chg-bo", "hg-rembo"):
        with pytest.raises(InputError):
            tuners.get_tuner(name, **FAST).fit(data, nan)
        with pytest.raises(InputError):
            tuners.get_tuner(name, **FAST).fit(kbest, w0)  # k-best lists, not forests
    with pytest.raises(InputError):
        tuners.get_tuner("nbl-bo", **FAST).fit(kbest, nan)
    with pytest.raises(InputError):
        tuners.get_tuner("nbl-bo", **FAST).fit(data, w0)  # forests, not k-best lists
    for bad in (dict(bound=0.0), dict(bound=float("nan")), dict(steps=-1), dict(n_candidates=0),
                dict(smooth="add1"), dict(seed=-3), dict(optimize_every=0), dict(n_init=True)):
        with pytest.raises(InputError):
            tuners.get_tuner("hg-bo", **{**FAST, **bad}).fit(data, w0)
    for bad in (dict(embedding_dim=0), dict(embedding_bound=-1.0), dict(sparse_steps=1.5)):
        with pytest.raises(InputError):
            tuners.get_tuner("hg-rembo", **{**FAST, **bad}).fit(data, w0)
    with pytest.raises(InputError):
        tuners.get_tuner("hg-bo", no_such_parameter=1)
