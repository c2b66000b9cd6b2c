"""Online hope/fear MIRA (tuners.mira): one shard learning sentence by sentence is batch MIRA's single epoch
over the same lists in the same order; rounds through the tuning loop with a fake decoder and with minismt's
decoder; the pseudo-document carried from round to round; bad parameters."""

from __future__ import annotations

import numpy as np
import pytest

import test_tuner_oro
import tuners
from fake_decoder import REFS, FakeDecoder
from minismt.errors import InputError
from tuners import _kbmira_kernels as kernels
from tuners.kbmira import BACKGROUND_INIT, _dedup_by_features
from tuners.loop import TuningRun
from tuners._mira_kernels import cutting_plane_epoch
from tuners.mira import OnlineMIRA


class Source(test_tuner_oro.Source):
    """ORO's test source over the fake decoder, also keeping every list it decoded."""

    def __init__(self, decoder):
        super().__init__(decoder)
        self.lists = []

    def decode(self, requests):
        lists = super().decode(requests)
        self.lists.extend(lists)
        return lists


def test_one_shard_sentence_by_sentence_is_one_online_pass_of_batch_mira():
    """shards=1, batch_size=1, mixing by average: every sentence is decoded with the weights the sentence
    before it left, and the result is the running average of the MIRA steps on those lists in that order."""
    source = Source(FakeDecoder())
    w0 = np.array([0.0, 1.0, -1.0])
    tuner = OnlineMIRA(C=0.05, shards=1, batch_size=1, mixing="average", seed=4)
    w = tuner.fit(source, w0)
    requests = source.decoder.requests
    assert [len(call) for call in requests] == [1] * len(REFS)
    order = [int(indices[0]) for call in requests for _, indices in call]
    assert sorted(order) == list(range(len(REFS)))
    # replay: the same kernel over the decoded lists, one at a time, from the same start
    weights, totals = w0.copy(), w0.copy()
    last, counter, background = np.zeros(3, dtype=np.int64), np.zeros(1, dtype=np.int64), np.array(BACKGROUND_INIT)
    for call, kbest in zip(requests, source.lists):
        assert np.array_equal(call[0][0], weights)  # decoded with the weights the previous step left
        train = _dedup_by_features(kbest)
        kernels.mira_epoch(np.flatnonzero(np.diff(train.offsets) > 0).astype(np.int64), train.offsets,
                           train.features, train.indptr, train.indices, train.values, train.stats, weights, totals,
                           last, counter, background, 0.05, 0.999, False, 1e-6, np.zeros(3), np.zeros(3, np.int8),
                           np.zeros(3, np.int64))
    kernels.fix_totals(weights, totals, last, counter)
    assert counter[0] > 0
    np.testing.assert_allclose(w, totals / counter[0], rtol=1e-12)
    assert tuner.state_["step"] == len(REFS) and tuner.state_["background"] == pytest.approx(background.tolist())


def test_shards_mix_and_the_pseudo_document_carries_over():
    source = Source(FakeDecoder())
    w0 = np.array([0.0, 1.0, -1.0])
    tuner = OnlineMIRA(batch_size=2, shards=2, seed=3)
    w = tuner.warm_start({"step": 4, "background": [2.0] * 9}).fit(source, w0)
    assert [len(call) for call in source.decoder.requests] == [2, 2]
    assert 0.0 <= tuner.rho_ <= 1.0 and np.all(np.isfinite(w))
    assert [h["step"] for h in tuner.history_] == [5, 6]
    again = OnlineMIRA(batch_size=2, shards=2, seed=3).warm_start({"step": 4, "background": [2.0] * 9})
    assert np.array_equal(again.fit(Source(FakeDecoder()), w0), w)
    fresh = OnlineMIRA(batch_size=2, shards=2, seed=3)
    fresh.fit(Source(FakeDecoder()), w0)
    assert fresh.state_["background"] != tuner.state_["background"]  # the carried pseudo-document counts


def test_mira_runs_in_the_loop_and_resumes_identically(tmp_path):
    run = TuningRun(FakeDecoder(), REFS, "mira", tmp_path / "a", max_iter=3, seed=2,
                    tuner_params={"batch_size": 1, "shards": 2, "C": 0.05})
    w = run.run(np.array([0.0, 1.0, -1.0]))
    assert np.all(np.isfinite(w)) and len(run.history) >= 1
    assert run.tuner_state["step"] == 3 * len(run.history) and len(run.tuner_state["background"]) == 9
    again = TuningRun(FakeDecoder(), REFS, "mira", tmp_path / "b", max_iter=3, seed=2,
                      tuner_params={"batch_size": 1, "shards": 2, "C": 0.05})
    assert np.array_equal(again.run(np.array([0.0, 1.0, -1.0])), w)


def test_mira_raises_the_dev_bleu_of_a_real_system(moses_system, tmp_path):
    """Two rounds with minismt's decoder on the synthetic system (20 dev sentences) from weights that favour
    long output: the best decoded dev BLEU is above the start's."""
    from minismt.io import read_lines
    from tuners.devdecoder import MinismtDevDecoder
    data, model = moses_system
    decoder = MinismtDevDecoder(str(model), read_lines(data / "dev.src"), stack_size=20, kbest=50)
    start = decoder.default_weights.copy()
    start[decoder.space.index("WordPenalty0_0")] = 1.0
    run = TuningRun(decoder, [[r] for r in read_lines(data / "dev.tgt")], "mira", tmp_path / "run", max_iter=3,
                    seed=1, tuner_params={"C": 0.1})  # few sentences and rounds: a larger cap than cdec's
    run.run(start)
    decoder.close()
    assert max(r.dev_bleu for r in run.history) > run.history[0].dev_bleu + 0.02


def random_lists(rng, n_lists, size, n_dense=4, n_sparse=3):
    """k-best arrays: dense features, a few sparse ones (global ids after the dense), BLEU statistics."""
    offsets = np.arange(0, (n_lists + 1) * size, size, dtype=np.int64)
    rows = n_lists * size
    features = rng.normal(size=(rows, n_dense))
    ids = [sorted(rng.choice(n_sparse, rng.integers(0, n_sparse + 1), replace=False) + n_dense) for _ in range(rows)]
    indptr = np.concatenate([[0], np.cumsum([len(i) for i in ids])]).astype(np.int64)
    indices = np.array([i for row in ids for i in row], dtype=np.int64)
    values = rng.normal(size=indices.shape[0])
    stats = np.zeros((rows, 9), dtype=np.int32)
    stats[:, 1::2][:, :4] = rng.integers(6, 12, size=(rows, 1)) - np.arange(4)
    stats[:, 0:8:2] = np.minimum(stats[:, 1:8:2], rng.integers(0, 8, size=(rows, 4)))
    stats[:, 8] = 10
    return offsets, features, indptr, indices, values, stats, n_dense + n_sparse


def epoch(kind, lists, w, C, max_constraints=10):
    """One pass over every list with a fresh average and background; the last weights and the average."""
    offsets, features, indptr, indices, values, stats, dim = lists
    w = w.copy()
    totals, last, counter = w.copy(), np.zeros(dim, dtype=np.int64), np.zeros(1, dtype=np.int64)
    order = np.arange(offsets.shape[0] - 1, dtype=np.int64)
    arrays = (order, offsets, features, indptr, indices, values, stats, w, totals, last, counter,
              np.array(BACKGROUND_INIT), C, 0.999, False)
    def scratch():
        return np.zeros(dim), np.zeros(dim, dtype=np.int8), np.zeros(dim, dtype=np.int64)

    if kind == "pa":
        kernels.mira_epoch(*arrays, 0.0, *scratch())
    else:
        cutting_plane_epoch(*arrays, max_constraints, *scratch(), *scratch())
    kernels.fix_totals(w, totals, last, counter)
    return w, totals / max(counter[0], 1), int(counter[0])


@pytest.mark.parametrize("seed", range(20))
def test_a_cutting_plane_of_one_constraint_is_the_pa_step(seed):
    """With one constraint per sentence the cutting plane's step is PA-I's, batch MIRA's kernel, over a pass of
    random lists with sparse features: the same weights, average and number of updates."""
    lists = random_lists(np.random.default_rng(seed), 6, 8)
    w0 = np.random.default_rng(seed + 100).normal(size=lists[-1]) * 0.1
    for C in (0.01, 1.0):
        w_pa, average_pa, updates_pa = epoch("pa", lists, w0, C)
        w_cp, average_cp, updates_cp = epoch("cutting-plane", lists, w0, C, max_constraints=1)
        np.testing.assert_allclose(w_cp, w_pa, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(average_cp, average_pa, rtol=1e-9, atol=1e-12)
        assert updates_cp == updates_pa > 0


def mira_programme_by_scipy(features, gains, hope, w, C):
    """The primal of MIRA over every hypothesis: ``min |w' - w|^2 / 2 + C xi`` subject to
    ``w'.(h_o - h) >= B(o) - B(h) - xi`` and ``xi >= 0`` (SLSQP)."""
    from scipy.optimize import minimize
    n = w.shape[0]
    d = features[hope] - features
    loss = gains[hope] - gains
    constraints = [{"type": "ineq", "fun": lambda x, k=k: x[:n] @ d[k] - loss[k] + x[n]} for k in range(len(d))]
    constraints.append({"type": "ineq", "fun": lambda x: x[n]})
    result = minimize(lambda x: 0.5 * np.sum((x[:n] - w) ** 2) + C * x[n], np.concatenate([w, [1.0]]),
                      constraints=constraints, method="SLSQP", options={"ftol": 1e-12, "maxiter": 500})
    return result.x[:n]


@pytest.mark.parametrize("seed", range(12))
def test_the_cutting_plane_solves_the_programme_over_the_whole_list(seed):
    """One sentence, dense features: with room for every constraint the cutting plane's weights are the optimum
    of MIRA's programme over all its hypotheses (scipy), to the working set's violation tolerance."""
    rng = np.random.default_rng(seed)
    offsets, features, indptr, indices, values, stats, dim = random_lists(rng, 1, 12, n_dense=5, n_sparse=0)
    w0 = rng.normal(size=dim) * 0.05
    C = 0.05
    background = np.array(BACKGROUND_INIT)
    gains = np.array([kernels.background_bleu(stats, row, background) for row in range(12)])
    hope = int(np.argmax(features @ w0 + gains))  # first row on ties, as the kernel
    expected = mira_programme_by_scipy(features, gains, hope, w0, C)
    w, _, updates = epoch("cutting-plane", (offsets, features, indptr, indices, values, stats, dim), w0, C,
                          max_constraints=12)
    assert updates == 1
    np.testing.assert_allclose(w, expected, atol=2e-3)
    violations = gains[hope] - gains - (features[hope] - features) @ w
    assert violations.max() <= (gains[hope] - gains - (features[hope] - features) @ expected).max() + 2e-3


def test_cutting_plane_mira_learns_in_the_loop(tmp_path):
    """Rounds of cutting-plane MIRA through the tuning loop with the fake decoder: deterministic, and its updates
    are not batch MIRA's."""
    runs = []
    for name in ("a", "b"):
        run = TuningRun(FakeDecoder(), REFS, "mira", tmp_path / name, max_iter=2, seed=3, return_best=False,
                        tuner_params={"optimizer": "cutting-plane", "C": 0.05})
        runs.append(run.run(np.array([0.0, 1.0, -1.0])))
    assert np.array_equal(runs[0], runs[1])
    pa = TuningRun(FakeDecoder(), REFS, "mira", tmp_path / "pa", max_iter=2, seed=3, return_best=False,
                   tuner_params={"C": 0.05})
    pa_weights = pa.run(np.array([0.0, 1.0, -1.0]))
    assert not np.array_equal(runs[0], [0.0, 1.0, -1.0]) and not np.array_equal(pa_weights, runs[0])


def test_bad_parameters(tmp_path):
    source = Source(FakeDecoder())
    for params in ({"C": 0.0}, {"decay": 1.5}, {"batch_size": 0}, {"shards": 2.5}, {"mixing": "max"},
                   {"sparse_epsilon": -1.0}, {"select": "lattice"}, {"optimizer": "sgd"}, {"max_constraints": 0},
                   {"optimizer": "cutting-plane", "select": "forest"}):
        with pytest.raises(InputError):
            tuners.get_tuner("mira", **params).fit(source, np.zeros(3))


def test_background_gradient_is_the_finite_difference():
    from tuners.mira import _background_gradient
    background = np.array([30.0, 50.0, 20.0, 45.0, 12.0, 40.0, 7.0, 35.0, 60.0])
    gradient = _background_gradient(background, 12.0)
    for j in range(8):
        step = np.zeros((1, 9))
        step[0, 8] = 12.0
        up, down = step.copy(), step.copy()
        up[0, j] += 1e-5
        down[0, j] -= 1e-5
        numeric = (kernels.background_bleu(up, 0, background) - kernels.background_bleu(down, 0, background)) / 2e-5
        assert gradient[j] == pytest.approx(numeric, rel=1e-6, abs=1e-8)


def test_forest_hope_and_fear_raise_the_dev_bleu_of_a_real_system(moses_system, tmp_path):
    """select="forest": hope and fear by Viterbi on each sentence's whole search graph; two rounds from weights
    that favour long output raise the decoded dev BLEU, as the k-best selection does."""
    from minismt.io import read_lines
    from tuners.devdecoder import MinismtDevDecoder
    data, model = moses_system
    decoder = MinismtDevDecoder(str(model), read_lines(data / "dev.src"), stack_size=20, kbest=50)
    start = decoder.default_weights.copy()
    start[decoder.space.index("WordPenalty0_0")] = 1.0
    run = TuningRun(decoder, [[r] for r in read_lines(data / "dev.tgt")], "mira", tmp_path / "run", max_iter=3,
                    seed=1, tuner_params={"C": 0.1, "select": "forest"})
    run.run(start)
    decoder.close()
    assert max(r.dev_bleu for r in run.history) > run.history[0].dev_bleu + 0.02
