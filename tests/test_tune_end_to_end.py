"""minismt tune on a small synthetic model: every n-best tuner runs the real loop with the real decoder."""

from __future__ import annotations

import pytest

from corpora.synthetic import write_synthetic
from minismt.cli import main
from minismt.features import read_weights
from minismt.io import read_lines
from minismt.metrics import corpus_bleu
from minismt.train import Trainer, TrainingConfig


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    write_synthetic(data, n_pairs=1500, seed=5, dev=40, test=40)
    model = tmp_path_factory.mktemp("model")
    Trainer(TrainingConfig(src=str(data / "train.src"), tgt=str(data / "train.tgt"), out=str(model),
                           lm_order=3, progress=False)).run()
    return data, model


@pytest.mark.parametrize("tuner", ["mert", "pro", "apro", "kbmira"])
def test_tune_runs_and_writes_weights(system, tuner, tmp_path):
    data, model = system
    run_dir = tmp_path / tuner
    args = ["tune", "--model", str(model), "--dev-src", str(data / "dev.src"), "--dev-ref",
            str(data / "dev.tgt"), "--tuner", tuner, "--iterations", "2", "--kbest", "20",
            "--stack", "50", "--run-dir", str(run_dir), "--quiet"]
    assert main(args) == 0
    weights = read_weights(run_dir / "weights.final")
    assert "LM0_0" in weights and len(weights) == 15
    assert read_lines(run_dir / "tune.log")
    # resuming a finished run does nothing and gives the same weights
    assert main(args) == 0
    assert read_weights(run_dir / "weights.final") == weights


def test_decode_with_tuned_weights_and_kbest(system, tmp_path):
    data, model = system
    out = tmp_path / "out.txt"
    assert main(["decode", "--model", str(model), "--input", str(data / "test.src"), "--output",
                 str(out), "--kbest", "5", "--kbest-out", str(tmp_path / "nbest"), "--stack", "50",
                 "--hypergraph-dir", str(tmp_path / "hg"), "--quiet"]) == 0
    hyps = read_lines(out)
    refs = [[r] for r in read_lines(data / "test.tgt")]
    assert len(hyps) == 40 and corpus_bleu(hyps, refs) > 0.2
    from plugins.moses.nbest import read_nbest
    kbest = read_nbest(tmp_path / "nbest")
    assert kbest.n_instances == 40
    assert len(list((tmp_path / "hg").iterdir())) == 40
