"""minismt train end to end on the synthetic corpus: model files, manifest, caching, alignment quality."""

from __future__ import annotations


import pytest

from corpora.synthetic import write_synthetic
from minismt.cli import main
from minismt.corpus import Alignment
from minismt.errors import InputError
from minismt.manifest import load_manifest
from minismt.train import Trainer, TrainingConfig


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    folder = tmp_path_factory.mktemp("synth")
    write_synthetic(folder, n_pairs=3000, seed=11)
    return folder


@pytest.fixture(scope="module")
def model(synthetic, tmp_path_factory):
    out = tmp_path_factory.mktemp("model")
    config = TrainingConfig(src=str(synthetic / "train.src"), tgt=str(synthetic / "train.tgt"),
                            out=str(out), lm_order=3, progress=False)
    trainer = Trainer(config)
    trainer.run()
    return out, trainer


def test_model_directory_and_manifest(model):
    out, trainer = model
    manifest = load_manifest(out)
    for relative in manifest["files"].values():
        assert (out / relative).exists(), relative
    assert manifest["steps"]["prepare"]["info"]["pairs"] == 3000
    assert manifest["features"][0] == "LexicalReordering0_0"
    assert set(manifest["default_weights"]) == set(manifest["features"])
    assert (out / "train.log").read_text().count("done in") == 4


def test_alignment_error_rate_on_synthetic_corpus_below_15_percent(model, synthetic):
    from minismt.align import alignment_error_rate
    out, _ = model
    predicted = Alignment.read(out / "align" / "aligned.grow-diag-final-and")
    truth = Alignment.read(synthetic / "train.align")
    aer = alignment_error_rate(predicted, truth)
    assert aer < 0.15, aer


def test_unchanged_steps_are_not_redone(model):
    out, first = model
    again = Trainer(TrainingConfig(src=first.config.src, tgt=first.config.tgt, out=str(out),
                                   lm_order=3, progress=False))
    again.run()
    assert all(record.cached for record in again.records.values())
    # a different LM order redoes only the LM
    third = Trainer(TrainingConfig(src=first.config.src, tgt=first.config.tgt, out=str(out),
                                   lm_order=2, progress=False))
    third.run()
    assert [r.name for r in third.records.values() if not r.cached] == ["lm"]
    assert load_manifest(out)["files"]["lm_arpa"] == "lm/lm.2.arpa"


def test_train_cli_bad_input(tmp_path, capsys):
    (tmp_path / "a").write_text("x y\nz\n")
    (tmp_path / "b").write_text("x\n")
    assert main(["train", "--src", str(tmp_path / "a"), "--tgt", str(tmp_path / "b"),
                 "--out", str(tmp_path / "m"), "--quiet"]) == 2
    assert "same number of lines" in capsys.readouterr().err
    (tmp_path / "c").write_bytes(b"\xff\n\n")
    assert main(["train", "--src", str(tmp_path / "c"), "--tgt", str(tmp_path / "b"),
                 "--out", str(tmp_path / "m"), "--quiet"]) == 2
    assert f"{tmp_path / 'c'}:1" in capsys.readouterr().err
    with pytest.raises(InputError, match="no model here"):
        load_manifest(tmp_path / "nothing")
