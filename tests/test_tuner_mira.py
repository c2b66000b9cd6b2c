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


def test_bad_parameters(tmp_path):
    source = Source(FakeDecoder())
    for params in ({"C": 0.0}, {"decay": 1.5}, {"batch_size": 0}, {"shards": 2.5}, {"mixing": "max"},
                   {"sparse_epsilon": -1.0}, {"select": "lattice"}):
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
