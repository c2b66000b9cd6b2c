"""dtrain (Simianer, Riezler & Dyer 2012): its scorers, pair sampling, perceptron updates and feature selection
against slow references, the shards in lock step, and epochs that give the same weights however the shards'
sentences are decoded (one process, a process pool, a Dask cluster)."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tuners
from fake_decoder import REFS, FakeDecoder
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.kbest import KBestBuilder
from minismt.metrics import BleuReferences
from tuners import _dtrain_kernels as K
from tuners.dtrain import DTrain, make_shards, select_and_mix
from tuners.loop import TuningRun

WORDS = ["a", "b", "c", "d", "e"]


def slow_score(hyp: list[str], ref: list[str], scorer: str, order: int) -> float:
    """dtrain's per-sentence BLEU (score.cc) from the words, by counting n-grams."""
    if not hyp or not ref:
        return 0.0
    clipped, totals = [], []
    for n in range(1, order + 1):
        h = Counter(tuple(hyp[i:i + n]) for i in range(len(hyp) - n + 1))
        r = Counter(tuple(ref[i:i + n]) for i in range(len(ref) - n + 1))
        clipped.append(sum(min(c, r[g]) for g, c in h.items()))
        totals.append(max(len(hyp) - n + 1, 0))
    m = order if len(ref) >= order else len(ref)
    bp = 1.0 if len(hyp) > len(ref) else math.exp(1 - len(ref) / len(hyp))
    if scorer == "smooth_bleu":
        partial, total = [0.0] * m, 0.0
        for i in range(m):
            if totals[i] == 0 or clipped[i] == 0:
                break
            for j in range(i, m):
                partial[j] += math.log(clipped[i] / totals[i]) / (j + 1)
            total += math.exp(partial[i]) / 2 ** (order - i)
        return bp * total
    log_sum = 0.0
    for i in range(m):
        if (scorer == "bleu" or i == 0) and (totals[i] == 0 or clipped[i] == 0):
            return 0.0
        add = 1 if scorer == "stupid_bleu" and i > 0 else 0
        log_sum += math.log((clipped[i] + add) / (totals[i] + add)) / m
    return bp * math.exp(log_sum)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=9), st.lists(st.sampled_from(WORDS), max_size=7),
       st.sampled_from(["stupid_bleu", "bleu", "smooth_bleu"]), st.integers(1, 4))
def test_sentence_scores_equal_dtrains_formulas(hyp, ref, scorer, order):
    stats = BleuReferences([[" ".join(ref)]]).stats(np.zeros(1, dtype=np.int64), [" ".join(hyp)])
    out = np.empty(1)
    K.sentence_scores(stats, tuners.dtrain.SCORERS[scorer], order, out)
    assert out[0] == pytest.approx(slow_score(hyp, ref, scorer, order), abs=1e-12)


def slow_pairs(gold, model, sampling, hi_lo, misranked_only, threshold, limit):
    """dtrain's pair sampling (pairsampling.h, with the paper's XYX and (better, worse) PRO pairs), by lists."""
    n = len(gold)
    if n < 2:
        return []
    rows = sorted(range(n), key=lambda r: -gold[r])
    pairs, considered = [], [0]

    def accept(a, b):
        return abs(a - b) >= threshold if threshold > 0 else a != b

    def block(tops, lows):
        for a in tops:
            for b in lows:
                i, j = rows[a], rows[b]
                if misranked_only and not model[i] <= model[j]:
                    continue
                if accept(gold[i], gold[j]):
                    pairs.append((i, j))
                considered[0] += 1
                if considered[0] == limit:
                    return False
        return True

    if sampling == "all":
        for a in range(n - 1):
            if not block([a], range(a + 1, n)):
                break
    elif sampling == "XYX":
        cut = math.floor(n * hi_lo + 0.5)
        top = max(cut, 1)
        if n > 4:
            while top < n and gold[rows[top - 1]] == gold[rows[top]]:
                top += 1
        else:
            top = 1
        bottom = n - cut
        while top < bottom < n and gold[rows[bottom - 1]] == gold[rows[bottom]]:
            bottom -= 1
        bottom = max(bottom, top)
        if block(range(top), range(top, n)):
            block(range(top, bottom), range(bottom, n))
    else:
        for i in range(n - 1):
            for j in range(i + 1, n):
                if gold[i] != gold[j] and accept(gold[i], gold[j]) and len(pairs) < K.PRO_CANDIDATES:
                    pairs.append((i, j) if gold[i] > gold[j] else (j, i))
        if len(pairs) > K.PRO_KEPT:  # the largest differences, in the order of the first 5,000
            pairs = sorted(pairs, key=lambda p: -abs(gold[p[0]] - gold[p[1]]))[:K.PRO_KEPT]
    return pairs


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3)), max_size=40),
       st.sampled_from(["all", "XYX", "PRO"]), st.sampled_from([0.1, 0.25, 0.5]), st.booleans(),
       st.sampled_from([0.0, 0.2]), st.sampled_from([-1, 7]))
def test_pair_sampling_equals_the_slow_reference(items, sampling, hi_lo, misranked_only, threshold, limit):
    gold = np.array([g / 4 for g, _ in items], dtype=np.float64)
    model = np.array([m for _, m in items], dtype=np.float64)
    first, second = np.empty(5000, dtype=np.int64), np.empty(5000, dtype=np.int64)
    count = K.sample_pairs(0, len(items), gold, model, tuners.dtrain.SAMPLINGS[sampling], hi_lo, misranked_only,
                           threshold, limit, first, second)
    expected = slow_pairs(list(gold), list(model), sampling, hi_lo, misranked_only, threshold, limit)
    assert list(zip(first[:count].tolist(), second[:count].tolist())) == expected
    assert all(gold[i] > gold[j] for i, j in expected)


def test_xyx_pairs_the_top_tenth_with_the_rest_and_the_middle_with_the_bottom():
    """The paper's XYX on a 100-best list of distinct scores: 10 x 90 + 80 x 10 pairs."""
    gold = np.linspace(1.0, 0.0, 100)
    first, second = np.empty(5000, dtype=np.int64), np.empty(5000, dtype=np.int64)
    count = K.sample_pairs(0, 100, gold, np.zeros(100), K.XYX, 0.1, False, 0.0, -1, first, second)
    assert count == 10 * 90 + 80 * 10
    pairs = set(zip(first[:count].tolist(), second[:count].tolist()))
    assert (0, 10) in pairs and (9, 99) in pairs and (10, 90) in pairs and (10, 89) not in pairs


def random_list(rng, size, space):
    builder = KBestBuilder(space)
    for j in range(size):
        matches = int(rng.integers(0, 4))
        stats = [matches + 1, 9, matches, 8, max(0, matches - 1), 7, 0, 6, 9]
        sparse = [space.index("sp_x")] if rng.uniform() < 0.5 else []
        builder.add(0, f"h{j}", rng.standard_normal(3), sparse, [float(rng.standard_normal())] * len(sparse),
                    stats=stats)
    return builder.build(1)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("params", [{}, {"loss_margin": 0.0}, {"gamma": 0.01}, {"pair_sampling": "all"},
                                    {"pair_sampling": "PRO", "pair_threshold": 0.05}])
def test_learning_from_a_list_is_the_pairwise_perceptron(seed, params):
    """dtrain's updates, by explicit vectors: each sampled pair the decode's model scores rank wrong (or within
    the margin) moves w by eta (x_better - x_worse), then shrinks it when gamma > 0."""
    rng = np.random.default_rng(seed)
    space = FeatureSpace(["a_0", "b_0", "c_0"], ["sp_x"])
    kbest = random_list(rng, 30, space)
    tuner = DTrain(learning_rate=0.1, **params)
    w0 = rng.standard_normal(4)
    start = w0.copy()
    counts = np.zeros(K.N_COUNTS, dtype=np.int64)
    w, _ = tuner.learn(w0, kbest, counts)
    assert np.array_equal(w0, start)
    X = kbest.feature_matrix()
    model = X @ w0
    gold = np.empty(30)
    K.sentence_scores(kbest.stats, K.STUPID_BLEU, 4, gold)
    plain = tuner.gamma == 0 and tuner.loss_margin == 0
    pairs = slow_pairs(list(gold), list(model), tuner.pair_sampling, 0.1, plain, tuner.pair_threshold, -1)
    expected = w0.copy()
    for i, j in pairs:
        if model[i] - model[j] <= 0 or model[i] - model[j] < tuner.loss_margin:
            expected += 0.1 * (X[i] - X[j])
            if tuner.gamma:
                expected *= 1 - 2 * tuner.gamma * 0.1 / len(pairs)
    assert np.allclose(w, expected, atol=1e-12)
    assert counts[0] == len(pairs) and counts[1] == sum(model[i] <= model[j] for i, j in pairs)


def test_feature_selection_is_lplps():
    """lplp.rb's own examples: shards' weights of a (1, 2, 3), b (1, 2, absent), c (66, absent, absent),
    d (10, 20, 30); the kept features by each norm, and the mean over the 3 shards (absent = 0)."""
    stacked = np.array([[1, 1, 66, 10], [2, 2, 0, 20], [3, 0, 0, 30]], dtype=np.float64)
    mixed, kept = select_and_mix(stacked, 1, "l2")
    assert kept == 1 and mixed.tolist() == [0, 0, 22, 0]
    assert select_and_mix(stacked, 2, "l1")[0].tolist() == [0, 0, 22, 20]
    assert select_and_mix(stacked, 2, "l0")[0].tolist() == [2, 0, 0, 20]  # non-zero in every shard
    assert select_and_mix(stacked, 2, "linfty")[0].tolist() == [0, 0, 22, 20]
    assert select_and_mix(stacked, 10, "l2")[0].tolist() == [2, 1, 22, 20]  # all kept: parameter mixing
    assert select_and_mix(np.zeros((2, 3)), 5)[1] == 0


def test_shards_are_parallelize_rbs():
    order = np.arange(10)
    assert [s.tolist() for s in make_shards(order, 3)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert [s.tolist() for s in make_shards(order, 4)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert [s.tolist() for s in make_shards(np.arange(5), 4)] == [[0], [1], [2], [3, 4]]
    assert [s.tolist() for s in make_shards(np.arange(2), 4)] == [[0], [1]]
    plan = DTrain(shards=2, randomize=True, seed=4).shard_plan(6, 0)
    assert sorted(np.concatenate(plan).tolist()) == list(range(6))
    assert [p.tolist() for p in DTrain(shards=2, randomize=True, seed=4).shard_plan(6, 3)] == \
        [p.tolist() for p in plan]  # shuffled once
    assert any(not np.array_equal(a, b) for a, b in zip(
        plan, DTrain(shards=2, randomize=True, reshard=True, seed=4).shard_plan(6, 3)))


class Source:
    """A BatchSource over the fake decoder, as TuningRun builds it (``one_by_one``: each request decoded in a
    call of its own, as if every shard ran alone)."""

    def __init__(self, decoder, one_by_one=False):
        self.decoder = decoder
        self.space = decoder.space
        self.n_sentences = len(REFS)
        self.references = BleuReferences(REFS)
        self.one_by_one = one_by_one

    def decode(self, requests):
        calls = [[r] for r in requests] if self.one_by_one else [requests]
        lists = [kbest for call in calls for kbest in self.decoder.decode_batches(call, 0)]
        for kbest in lists:
            kbest.set_stats(self.references.kbest_stats(kbest))
        return lists


def test_an_epoch_decodes_the_shards_in_lock_step_and_mixes_them():
    decoder = FakeDecoder()
    w0 = np.array([0.0, 1.0, -1.0])
    tuner = DTrain(shards=2, learning_rate=0.5, loss_margin=0.0)
    w = tuner.warm_start({"epoch": 2}).fit(Source(decoder), w0)
    assert [len(call) for call in decoder.requests] == [2, 2, 2]  # 6 sentences, 2 shards of 3
    assert [[indices for _, indices in call] for call in decoder.requests] == [[[0], [3]], [[1], [4]], [[2], [5]]]
    assert all(np.array_equal(weights, w0) for weights, _ in decoder.requests[0])
    assert tuner.state_ == {"epoch": 3} and tuner.history_["epoch"] == 3
    assert tuner.history_["kept_features"] == 3 and "features kept 3 of 3" in tuner.report_
    shard_weights = []
    for sentences in ([0, 1, 2], [3, 4, 5]):  # each shard alone: one learner on its 3 sentences
        part = Source(FakeDecoder())
        part.n_sentences = 3
        whole = part.decode
        part.decode = lambda requests, whole=whole, sentences=sentences: whole(
            [(w, [sentences[i] for i in indices]) for w, indices in requests])
        shard_weights.append(DTrain(shards=1, learning_rate=0.5, loss_margin=0.0).fit(part, w0))
    assert np.allclose(w, np.mean(shard_weights, axis=0))  # then averaged
    again = DTrain(shards=2, learning_rate=0.5, loss_margin=0.0).fit(Source(FakeDecoder(), one_by_one=True), w0)
    assert np.array_equal(w, again)
    kept_one = DTrain(shards=2, learning_rate=0.5, loss_margin=0.0, select_k=1).fit(Source(FakeDecoder()), w0)
    assert np.count_nonzero(kept_one) == 1


def test_dtrain_runs_in_the_loop_logs_its_selection_and_resumes_identically(tmp_path):
    params = {"shards": 3, "learning_rate": 0.1, "select_k": 2}
    run = TuningRun(FakeDecoder(), REFS, "dtrain", tmp_path / "a", max_iter=3, seed=2, tuner_params=params)
    w = run.run(np.array([0.0, 1.0, -1.0]))
    assert np.all(np.isfinite(w)) and run.tuner_state["epoch"] == len(run.history)
    log = (tmp_path / "a" / "tune.log").read_text()
    assert "iteration 0: dtrain epoch 1: 3 shards" in log and "features kept 2 of 3 non-zero" in log
    again = TuningRun(FakeDecoder(), REFS, "dtrain", tmp_path / "b", max_iter=3, seed=2, tuner_params=params)
    assert np.array_equal(again.run(np.array([0.0, 1.0, -1.0])), w)


def test_bad_parameters():
    source = Source(FakeDecoder())
    for params in ({"pair_sampling": "XXX"}, {"scorer": "ter"}, {"select_norm": "l3"}, {"shards": 0},
                   {"select_k": 0}, {"N": 5}, {"learning_rate": 0.0}, {"loss_margin": -1.0}, {"hi_lo": 0.6},
                   {"gamma": float("nan")}, {"max_pairs": 0}):
        with pytest.raises(InputError):
            tuners.get_tuner("dtrain", **params).fit(source, np.zeros(3))


def test_the_mixed_weights_are_the_same_in_one_process_a_pool_and_on_dask(moses_system, tmp_path):
    """`minismt tune --tuner dtrain`, two epochs on the synthetic system's first 12 dev sentences, decoded here
    (--jobs 1), by a pool of two processes (--jobs 2) and on a Dask LocalCluster of two workers
    (--dask-scheduler): the same weights after every epoch, and the selection in the log."""
    from distributed import LocalCluster
    from minismt.cli import main
    data, model = moses_system
    (tmp_path / "dev.src").write_text("".join(line + "\n" for line in (data / "dev.src").read_text().splitlines()[:12]))
    (tmp_path / "dev.tgt").write_text("".join(line + "\n" for line in (data / "dev.tgt").read_text().splitlines()[:12]))

    def weights_of(name, *options):
        run_dir = tmp_path / name
        assert main(["tune", "--model", str(model), "--dev-src", str(tmp_path / "dev.src"), "--dev-ref",
                     str(tmp_path / "dev.tgt"), "--tuner", "dtrain", "--tuner-param", "shards=3", "--tuner-param",
                     "learning_rate=0.01", "--iterations", "3", "--kbest", "20", "--stack", "10", "--step-search",
                     "none", "--run-dir", str(run_dir), "--quiet", *options]) == 0
        assert "dtrain epoch 2: 3 shards" in (run_dir / "tune.log").read_text()
        return [record["weights"] for record in json.loads((run_dir / "history.json").read_text())]

    here = weights_of("here", "--jobs", "1")
    assert len(here) == 3 and here[0] != here[1]  # the epoch moved the weights
    assert weights_of("pool", "--jobs", "2") == here
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        assert weights_of("dask", "--dask-scheduler", cluster.scheduler_address) == here


def test_an_unreachable_scheduler_is_one_clear_error():
    from minismt.parallel import dask_client
    with pytest.raises(InputError, match="--dask-scheduler tcp://127.0.0.1:9: .*a running Dask scheduler"):
        dask_client("tcp://127.0.0.1:9", timeout=2)
