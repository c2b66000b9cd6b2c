"""Batch k-best MIRA (tuners.kbmira): kernels against slow direct implementations, one update by
hand, the Moses kbmira-dedupfix runs of ../shared/fixtures/moses, determinism, weights files,
bad input."""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest
from conftest import shared_path
from hypothesis import given, settings
from hypothesis import strategies as st

from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.kbest import KBest, KBestBuilder
from minismt.metrics import corpus_bleu_from_stats
from plugins.moses.mertfiles import read_extractor_files, read_kbmira_weights, write_kbmira_weights
from tuners import _kbmira_kernels as kernels
from tuners.base import REGISTRY
from tuners.kbmira import BACKGROUND_INIT, KBMIRA

DENSE = ["d_0", "d_1", "d_2"]
SPARSE = ["sp_a", "sp_b", "sp_c"]


# ---- slow direct implementations -------------------------------------------------------------
def slow_background_bleu(stats, bg):
    """exp(mean log p_n + min(0, 1 - R/T1)) * R over stats + bg, written out."""
    total = [float(s) + float(b) for s, b in zip(stats, bg)]
    if any(total[2 * n] <= 0 for n in range(4)):
        return 0.0
    log_precision = sum(math.log(total[2 * n] / total[2 * n + 1]) for n in range(4)) / 4
    brevity = min(0.0, 1.0 - total[8] / total[1])
    return math.exp(log_precision + brevity) * total[8]


def random_nested(rng, n_sentences, k_max, sparse=True, duplicate=False):
    """Sentences of hypotheses ``(features dict, stats list)`` with continuous features (no ties)."""
    nested = []
    for _ in range(n_sentences):
        hyps = []
        for _ in range(int(rng.integers(1, k_max + 1))):
            features = {name: float(rng.normal()) for name in DENSE}
            if sparse:
                for name in SPARSE:
                    if rng.uniform() < 0.4:
                        features[name] = float(rng.choice([1.0, -0.5, 2.0]))
            length = int(rng.integers(3, 12))
            matches = [int(rng.integers(0, max(length - n, 0) + 1)) for n in range(4)]
            matches = sorted(matches, reverse=True)
            stats = []
            for n in range(4):
                stats += [min(matches[n], max(length - n, 0)), max(length - n, 0)]
            stats.append(int(rng.integers(3, 12)))
            hyps.append((features, stats))
        if duplicate and len(hyps) > 1:
            # same feature vector as the first, other statistics: dropped as in Moses
            hyps.append((dict(hyps[0][0]), [4, 4, 3, 3, 2, 2, 1, 1, 4]))
        nested.append(hyps)
    return nested


def build(nested, space=None):
    space = space or FeatureSpace(DENSE, SPARSE)
    builder = KBestBuilder(space)
    for s, hyps in enumerate(nested):
        for k, (features, stats) in enumerate(hyps):
            names = sorted(n for n in features if n not in DENSE)
            builder.add(s, f"s{s} h{k}", [features[n] for n in DENSE],
                        [space.index(n) for n in names], [features[n] for n in names], stats=stats)
    return builder.build(len(nested))


def first_by_features(hyps):
    seen, out = [], []
    for features, stats in hyps:
        key = sorted(features.items())
        if key not in seen:
            seen.append(key)
            out.append((features, stats))
    return out


def slow_kbmira(nested, w0, epochs, C=0.01, decay=0.999, model_bg=False, eps=1e-6):
    """Moses kbmira with dict vectors, no shuffling, and the average summed explicitly after
    every update: returns (best averaged weights, per-epoch BLEU, final background)."""
    w = dict(w0)
    total = dict(w0)
    n_updates = 0
    bg = [1.0] * 9
    nested = [first_by_features(h) for h in nested]

    def score(f, weights):
        return sum(v * weights.get(k, 0.0) for k, v in f.items())

    best, best_bleu, history = dict(w0), 0.0, []
    for _ in range(epochs):
        for hyps in nested:
            scores = [score(f, w) for f, _ in hyps]
            bleus = [slow_background_bleu(s, bg) for _, s in hyps]
            rows = range(len(hyps))
            hope = max(rows, key=lambda i: (scores[i] + bleus[i], -i))
            fear = max(rows, key=lambda i: (scores[i] - bleus[i], -i))
            model = max(rows, key=lambda i: (scores[i], -i))
            if hope == fear or not bleus[hope] > bleus[fear]:
                continue
            a, b = hyps[hope][0], hyps[fear][0]
            d = {}
            for k in set(a) | set(b):
                value = a.get(k, 0.0) - b.get(k, 0.0)
                if k in DENSE or not (k in a and k in b and abs(value) <= eps):
                    d[k] = value
            loss = bleus[hope] - bleus[fear] - score(d, w)
            if loss > 0:
                norm = sum(v * v for v in d.values())
                eta = C if norm == 0 else min(C, loss / norm)
                for k, v in d.items():
                    w[k] = w.get(k, 0.0) + eta * v
                n_updates += 1
                for k in set(total) | set(w):
                    total[k] = total.get(k, 0.0) + w.get(k, 0.0)
            source = hyps[model if model_bg else hope][1]
            bg = [decay * x + s for x, s in zip(bg, source)]
        avg = {k: v / n_updates for k, v in total.items()} if n_updates else dict(w)
        summed = np.zeros(9, dtype=np.int64)
        for hyps in nested:
            scores = [score(f, avg) for f, _ in hyps]
            summed += hyps[max(range(len(hyps)), key=lambda i: (scores[i], -i))][1]
        bleu = corpus_bleu_from_stats(summed, smooth="none")
        history.append(bleu)
        if bleu > best_bleu:
            best, best_bleu = avg, bleu
    return best, history, bg


def as_array(space, weights):
    return np.array([weights.get(name, 0.0) for name in space])


# ---- (a) background BLEU, hope/fear, whole epochs against the slow versions ------------------
stats_st = st.lists(st.integers(0, 30), min_size=9, max_size=9)
bg_st = st.lists(st.floats(0.01, 50.0), min_size=9, max_size=9)


@settings(max_examples=200, deadline=None)
@given(stats_st, bg_st)
def test_background_bleu_matches_formula(stats, bg):
    stats = np.array([stats], dtype=np.int32)
    got = kernels.background_bleu(stats, 0, np.array(bg))
    assert got == pytest.approx(slow_background_bleu(stats[0], bg), rel=1e-12)


def test_initial_background_is_moses():
    assert BACKGROUND_INIT == (1.0,) * 9
    # a perfect 4-word hypothesis on the initial background: BLEU 1 times R = 4 + 1
    assert kernels.background_bleu(np.array([[4, 4, 3, 3, 2, 2, 1, 1, 4]], dtype=np.int32), 0,
                                   np.ones(9)) == pytest.approx(5.0)


@pytest.mark.parametrize("seed", range(6))
def test_hope_fear_matches_slow_selection(seed):
    rng = np.random.default_rng(seed)
    nested = random_nested(rng, 8, 12)
    kb = build(nested)
    w = rng.normal(size=len(kb.space))
    bg = rng.uniform(0.5, 20.0, size=9)
    for s, hyps in enumerate(nested):
        lo, hi = kb.offsets[s], kb.offsets[s + 1]
        hope, fear, model, hope_bleu, fear_bleu = kernels.hope_fear(
            lo, hi, kb.features, kb.indptr, kb.indices, kb.values, kb.stats, w, bg)
        weights = dict(zip(kb.space, w))
        scores = [sum(v * weights[k] for k, v in f.items()) for f, _ in hyps]
        bleus = [slow_background_bleu(st_, bg) for _, st_ in hyps]
        rows = range(len(hyps))
        assert hope - lo == max(rows, key=lambda i: (scores[i] + bleus[i], -i))
        assert fear - lo == max(rows, key=lambda i: (scores[i] - bleus[i], -i))
        assert model - lo == max(rows, key=lambda i: (scores[i], -i))
        assert hope_bleu == pytest.approx(bleus[hope - lo], rel=1e-12)
        assert fear_bleu == pytest.approx(bleus[fear - lo], rel=1e-12)


@pytest.mark.parametrize("seed,model_bg,C", [(0, False, 0.01), (1, True, 0.01), (2, False, 1.0),
                                             (3, True, 0.3)])
def test_fit_matches_slow_kbmira(seed, model_bg, C):
    rng = np.random.default_rng(seed)
    nested = random_nested(rng, 12, 10, duplicate=True)
    kb = build(nested)
    w0 = {"d_0": 0.5, "d_1": -0.3, "d_2": 0.1, "sp_b": 0.2}
    tuner = KBMIRA(C=C, epochs=6, shuffle=False, model_bg=model_bg)
    w = tuner.fit(kb, as_array(kb.space, w0))
    best, history, bg = slow_kbmira(nested, w0, 6, C=C, model_bg=model_bg)
    np.testing.assert_allclose(w, as_array(kb.space, best), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose([h["bleu"] for h in tuner.history_], history, rtol=1e-12)
    np.testing.assert_allclose(tuner.background_, bg, rtol=1e-12)
    assert tuner.n_hypotheses_ == kb.n_hypotheses - sum(1 for h in nested if len(h) > 1)


def test_sparse_epsilon_drops_tiny_shared_differences():
    nested = [[({"d_0": 0.0, "d_1": 0.0, "d_2": 0.0, "sp_a": 1.0}, [1, 4, 0, 3, 0, 2, 0, 1, 4]),
               ({"d_0": 1.0, "d_1": 0.0, "d_2": 0.0, "sp_a": 1.0 + 1e-7}, [4, 4, 3, 3, 2, 2, 1, 1, 4])]]
    kb = build(nested)
    sp_a = kb.space.index("sp_a")
    kept = KBMIRA(epochs=1, shuffle=False, sparse_epsilon=0.0)
    kept.fit(kb, np.zeros(len(kb.space)))
    dropped = KBMIRA(epochs=1, shuffle=False)
    dropped.fit(kb, np.zeros(len(kb.space)))
    assert dropped.weights_[sp_a] == 0.0 and kept.weights_[sp_a] != 0.0
    assert dropped.weights_[0] == pytest.approx(kept.weights_[0], rel=1e-6)


# ---- (b) one MIRA update by hand ---------------------------------------------------------------
def two_hypotheses():
    """h_A = (0, 1) perfect 4-word output, h_B = (1, 0) with no trigram match (corpus BLEU 0)."""
    space = FeatureSpace(["x", "y"])
    builder = KBestBuilder(space)
    builder.add(0, "a", [0.0, 1.0], stats=[4, 4, 3, 3, 2, 2, 1, 1, 4])
    builder.add(0, "b", [1.0, 0.0], stats=[2, 4, 1, 3, 0, 2, 0, 1, 4])
    return builder.build()


def test_one_update_by_hand():
    kb = two_hypotheses()
    w0 = np.array([1.0, 0.0])
    # background all 1: B(A) = 1 * (4 + 1); B(B) = (3/5 * 2/4 * 1/3 * 1/2)^(1/4) * 5, no brevity penalty
    bleu_a = 5.0
    bleu_b = (3 / 5 * 2 / 4 * 1 / 3 * 1 / 2) ** 0.25 * 5
    # scores w0.h: A 0, B 1; hope A (0 + 5 > 1 + 2.36), fear B (1 - 2.36 > 0 - 5)
    d = np.array([-1.0, 1.0])
    loss = bleu_a - bleu_b - w0 @ d
    eta = loss / (d @ d)  # 1.82 < C = 10
    w1 = w0 + eta * d
    average = (w0 + w1) / 1  # Moses' running sum starts at w0
    tuner = KBMIRA(C=10.0, epochs=1, shuffle=False)
    w = tuner.fit(kb, w0)
    np.testing.assert_allclose(w, average, rtol=1e-14)
    assert tuner.history_ == [{"epoch": 1, "bleu": pytest.approx(1.0), "updates": 1, "examples": 1,
                               "avg_loss": pytest.approx(loss), "best": True}]
    np.testing.assert_allclose(tuner.background_, 0.999 + np.array([4, 4, 3, 3, 2, 2, 1, 1, 4]))
    assert tuner.best_epoch_ == 1 and tuner.best_bleu_ == pytest.approx(1.0)
    assert tuner.initial_bleu_ == 0.0

    # clipped at C = 0.01: the averaged weights still pick B (BLEU 0), so no epoch beats 0 -> w0
    clipped = KBMIRA(epochs=1, shuffle=False)
    assert np.array_equal(clipped.fit(kb, w0), w0)
    assert clipped.best_epoch_ == 0 and clipped.history_[0]["bleu"] == 0.0
    assert clipped.history_[0]["updates"] == 1


# ---- (c) the Moses fixtures ----------------------------------------------------------------------
DEDUPFIX = {  # Initial BLEU, Best BLEU of kbmira-dedupfix (README of the fixtures)
    "example": (0.75774, 0.918909),
    "scorer100": (0.0825187, 0.0933156),
    "sparse_demo": (0.75774, 0.918909),
}
_LOADED: dict[str, tuple[KBest, np.ndarray]] = {}


def fixture(name):
    if name not in _LOADED:
        folder = shared_path("fixtures", "moses", name)
        data = read_extractor_files([folder / "features.dat"], [folder / "scores.dat"])
        with open(folder / "init.opt") as handle:
            w0 = np.array([float(v) for v in handle.readline().split()])
        _LOADED[name] = data, w0
    return _LOADED[name]


def moses_epochs(name):
    text = shared_path("fixtures", "moses", name, "kbmira-dedupfix.stderr.txt").read_text()
    return [(int(u), float(loss), float(bleu)) for u, loss, bleu in
            re.findall(r"(\d+)/\d+ updates, avg loss = (\S+), BLEU = (\S+)", text)]


@pytest.mark.parametrize("name", sorted(DEDUPFIX))
def test_moses_order_reproduces_kbmira_dedupfix(name):
    """Moses' printed numbers at their precision: BLEU 6 digits (abs 1e-6), avg loss rel 1e-3 (Moses sums
    in float32), weights rtol/atol 1e-5. Measured, also with the features times (1 + 1e-9 noise): epoch
    BLEU within 4.4e-7, loss within rel 3.6e-4, update counts equal, weights at most 0.85 of their
    tolerance (scorer100; the noise moves that by 1e-3 of it)."""
    data, w0 = fixture(name)
    initial, best = DEDUPFIX[name]
    tuner = KBMIRA(seed=1234, shuffle_rng="moses")
    w = tuner.fit(data, w0)
    assert tuner.initial_bleu_ == pytest.approx(initial, abs=1e-6)
    assert tuner.best_bleu_ == pytest.approx(best, abs=1e-6)
    epochs = moses_epochs(name)
    assert len(epochs) == 60 == len(tuner.history_)
    for (updates, loss, bleu), ours in zip(epochs, tuner.history_):
        assert ours["updates"] == updates
        assert ours["bleu"] == pytest.approx(bleu, abs=1e-6)
        assert ours["avg_loss"] == pytest.approx(loss, rel=1e-3)  # Moses sums in float32
    folder = shared_path("fixtures", "moses", name)
    moses = data.weight_array(read_kbmira_weights(folder / "kbmira-dedupfix.weights.txt", data.space))
    np.testing.assert_allclose(w, moses, rtol=1e-5, atol=1e-5)
    assert data.bleu(w, smooth="none") == pytest.approx(tuner.best_bleu_, abs=1e-12)


@pytest.mark.parametrize("name", sorted(DEDUPFIX))
def test_numpy_order_reaches_the_neighbourhood_of_moses(name):
    """Another sentence order, about the same best BLEU (the BLEU kbmira tracks). Measured over seeds 0-19
    and 1234, each also with the features times (1 + 1e-9 noise): at least 0.933 of Moses' gain over the
    initial BLEU (checked 0.8) and within 0.77% of Moses' best (checked 2%); example and sparse_demo reach
    Moses' 0.918909 at every seed."""
    data, w0 = fixture(name)
    initial, best = DEDUPFIX[name]
    tuner = KBMIRA(seed=1234)
    w = tuner.fit(data, w0)
    assert tuner.initial_bleu_ == pytest.approx(initial, abs=1e-5)
    assert data.bleu(w0, smooth="none") == pytest.approx(tuner.initial_bleu_, abs=1e-15)
    assert tuner.best_bleu_ > initial + 0.8 * (best - initial)
    assert tuner.best_bleu_ == pytest.approx(best, rel=0.02)
    assert data.bleu(w, smooth="none") == tuner.best_bleu_
    first_best = tuner.history_[tuner.best_epoch_ - 1]
    assert first_best["best"] and first_best["bleu"] == tuner.best_bleu_
    assert all(h["bleu"] < tuner.best_bleu_ for h in tuner.history_[: tuner.best_epoch_ - 1])


@pytest.mark.parametrize("rng", ["numpy", "moses"])
def test_sparse_demo_learns_sparse_weights(rng):
    """Measured (numpy order: seeds 0-19 and 1234, each also with the features times (1 + 1e-9 noise)):
    the smaller sparse weight is at least 0.0099 (checked > 1e-3); Moses' order: within 5.5e-8 of
    Moses' printed weights (checked 1e-6)."""
    data, w0 = fixture("sparse_demo")
    w = KBMIRA(seed=1234, shuffle_rng=rng).fit(data, w0)
    for name in ("sp_a", "sp_b"):
        assert abs(w[data.space.index(name)]) > 1e-3
    if rng == "moses":
        assert w[data.space.index("sp_a")] == pytest.approx(0.0134454, abs=1e-6)
        assert w[data.space.index("sp_b")] == pytest.approx(-0.0661533, abs=1e-6)


def test_scorer100_speed():
    data, w0 = fixture("scorer100")
    KBMIRA(seed=0, epochs=1).fit(data, w0)  # compiled and cached by numba
    start = time.perf_counter()
    KBMIRA(seed=0).fit(data, w0)
    assert time.perf_counter() - start < 1.0  # measured 0.05 s for 60 epochs over 10,000 hypotheses


# ---- (d) determinism -------------------------------------------------------------------------------
@pytest.mark.parametrize("rng", ["numpy", "moses"])
def test_same_seed_same_weights(rng):
    data, w0 = fixture("scorer100")
    w0_copy = w0.copy()
    tuner = KBMIRA(seed=7, shuffle_rng=rng)
    params = tuner.get_params()
    w = tuner.fit(data, w0)
    assert tuner.get_params() == params and np.array_equal(w0, w0_copy)
    assert w is tuner.weights_
    assert np.array_equal(w, KBMIRA(seed=7, shuffle_rng=rng).fit(data, w0))
    assert not np.array_equal(w, KBMIRA(seed=8, shuffle_rng=rng).fit(data, w0))


def test_registered():
    assert REGISTRY["kbmira"] is KBMIRA and KBMIRA.name == "kbmira"


# ---- glibc rand() / std::random_shuffle replay -------------------------------------------------
GLIBC = {  # first values of rand() after srand(seed), glibc
    0: [1804289383, 846930886, 1681692777, 1714636915],
    1: [1804289383, 846930886, 1681692777, 1714636915],
    1234: [479142414, 465566339, 961126155, 1057886067],
    2 ** 31 + 5: [902410239, 292943431, 1491539546, 1641990203],
    2 ** 32 - 1: [254925627, 1205188300, 366127624, 1401405153],
}


@pytest.mark.parametrize("seed", sorted(GLIBC))
def test_glibc_rand(seed):
    state = kernels.glibc_srand(seed)
    assert [kernels.glibc_rand(state) for _ in range(4)] == GLIBC[seed]


def test_glibc_random_shuffle_is_libstdcxx():
    items = np.arange(5, dtype=np.int64)
    kernels.glibc_random_shuffle(items, kernels.glibc_srand(1234))
    expected = list(range(5))
    for i, value in zip(range(1, 5), GLIBC[1234]):  # i = 1..4: j = rand() % (i + 1), swap
        j = value % (i + 1)
        expected[i], expected[j] = expected[j], expected[i]
    assert items.tolist() == expected == [1, 0, 4, 3, 2]


# ---- (e) weights files -----------------------------------------------------------------------------
def test_weights_file_round_trip(tmp_path):
    space = FeatureSpace(DENSE, ["sp_a", "sp_b", "sp_c", "sp_d"])
    w = np.array([0.1, -2.5, 1 / 3, 1e-9, 0.0, -0.0661533, 2e-8])
    path = tmp_path / "kbmira.weights.txt"
    write_kbmira_weights(path, space, w)
    lines = path.read_text().splitlines()
    assert lines[:3] == ["F0 0.1", "F1 -2.5", f"F2 {1 / 3!r}"]
    assert [line.split()[0] for line in lines[3:]] == ["sp_c", "sp_d"]  # |w| <= 1e-8 left out
    back = read_kbmira_weights(path, space.dense_names)
    expected = {"d_0": 0.1, "d_1": -2.5, "d_2": 1 / 3, "sp_c": -0.0661533, "sp_d": 2e-8}
    assert back == expected
    np.testing.assert_array_equal(space.weights(back, grow=False), np.where(np.abs(w) > 1e-8, w, 0.0))
    write_kbmira_weights(path, space, {"d_1": 2.0, "sp_b": 0.5})
    assert read_kbmira_weights(path, space) == {"d_0": 0.0, "d_1": 2.0, "d_2": 0.0, "sp_b": 0.5}
    write_kbmira_weights(path, space, w[:3])  # only the dense part
    assert path.read_text().count("\n") == 3


def test_read_moses_kbmira_weights():
    data, _ = fixture("sparse_demo")
    folder = shared_path("fixtures", "moses", "sparse_demo")
    weights = read_kbmira_weights(folder / "kbmira-dedupfix.weights.txt", data.space.dense_names)
    assert list(weights)[:15] == data.space.dense_names
    assert weights["d_0"] == 1.02613 and weights["w_0"] == 1.14442
    assert weights["sp_a"] == 0.0134454 and weights["sp_b"] == -0.0661533
    assert data.bleu(weights, smooth="none") == pytest.approx(0.918909, abs=1e-6)
    example, _ = fixture("example")
    folder = shared_path("fixtures", "moses", "example")
    weights = read_kbmira_weights(folder / "kbmira-dedupfix.weights.txt", example.space)
    assert [weights[n] for n in example.space.dense_names[:3]] == [1.02, 1.15489, 1.01797]
    assert example.bleu(weights, smooth="none") == pytest.approx(0.918909, abs=1e-6)


# ---- (f) bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize("params", [
    {"C": 0}, {"C": -1.0}, {"C": float("nan")}, {"C": "0.01"}, {"decay": 0.0}, {"decay": 1.5},
    {"epochs": -1}, {"epochs": 2.5}, {"epochs": True}, {"sparse_epsilon": -1e-6},
    {"shuffle_rng": "mt19937"}, {"shuffle_rng": "moses"}, {"shuffle_rng": "moses", "seed": -1},
    {"shuffle_rng": "moses", "seed": 2 ** 32}, {"shuffle_rng": "moses", "seed": 1.5},
    {"seed": -3}, {"seed": "1234"},
])
def test_bad_parameters(params):
    kb = two_hypotheses()
    with pytest.raises(InputError):
        KBMIRA(**params).fit(kb, np.zeros(2))


def test_bad_data():
    kb = two_hypotheses()
    with pytest.raises(InputError):
        KBMIRA().fit("features.dat", np.zeros(2))
    with pytest.raises(InputError):
        KBMIRA().fit(kb, np.array([np.nan, 0.0]))
    with pytest.raises(InputError):
        KBMIRA().fit(kb, np.zeros(1))
    kb.stats = None
    with pytest.raises(InputError):
        KBMIRA().fit(kb, np.zeros(2))


@pytest.mark.parametrize("text", [
    "F0 1 2\nF1 1\n", "F0 one\nF1 1\n", "F0 nan\nF1 1\n", "F0 1\nF1 1\nF2 1\n", "F0 1\nF0 2\nF1 1\n",
    "F0 1\n", "F0 1\nF1 1\nsp_a 1\nsp_a 2\n", "F0 1\nF1 1\nx 3\n",
])
def test_bad_weights_file(tmp_path, text):
    path = tmp_path / "w.txt"
    path.write_text(text)
    with pytest.raises(InputError):
        read_kbmira_weights(path, ["x", "y"])


def test_bad_weights_to_write(tmp_path):
    space = FeatureSpace(["x", "y"], ["F7"])
    path = tmp_path / "w.txt"
    for weights in (np.array([np.nan, 0.0, 0.0]), np.zeros(1), np.zeros(4), np.array([0.0, 0.0, 1.0]),
                    {"z": 1.0}):
        with pytest.raises(InputError):
            write_kbmira_weights(path, space, weights)
    assert not path.exists()
