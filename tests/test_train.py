"""minismt train end to end on the synthetic corpus: model files, manifest, caching, alignment quality."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import shared_path

from minismt.cli import main
from minismt.corpus import Alignment
from minismt.errors import InputError
from minismt.manifest import load_manifest
from minismt.io import read_lines
from minismt.train import Trainer, TrainingConfig
from plugins.moses.ini import flatten_weights, read_moses_ini_weights


@pytest.fixture(scope="module")
def synthetic(synthetic_corpus):
    return synthetic_corpus


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


def test_moses_ini_names_the_models_files_and_default_weights(model):
    """MODEL/moses.ini: Moses' [feature] lines for the model's tables and LM (absolute paths of files that
    exist) and its default weights, producer by producer in the manifest's names."""
    out, _ = model
    manifest = load_manifest(out)
    assert manifest["files"]["moses_ini"] == "moses.ini"
    text = (out / "moses.ini").read_text()
    paths = re.findall(r" path=(\S+)", text)
    assert len(paths) == 3 and all(Path(p).is_absolute() and Path(p).exists() for p in paths)
    assert f"order={manifest['lm_order']}" in text and "[distortion-limit]\n6\n" in text
    assert flatten_weights(read_moses_ini_weights(out / "moses.ini")) == manifest["default_weights"]


def test_real_moses_decodes_the_moses_ini_as_our_decoder_does(model, synthetic, tmp_path):
    """The real Moses (../shared/tools) reads MODEL/moses.ini and, with the same stack size, finds the same
    1-best as our decoder for almost every sentence (the searches differ only in their pruning details)."""
    moses = shared_path("tools", "moses", "bin", "moses")
    out, _ = model
    sources = read_lines(synthetic / "dev.src")[:100]
    (tmp_path / "dev.src").write_text("\n".join(sources) + "\n")
    theirs = subprocess.run([str(moses), "-f", str(out / "moses.ini"), "-i", str(tmp_path / "dev.src"),
                             "-s", "100", "-threads", "1"], capture_output=True, text=True, check=True,
                            timeout=300).stdout.splitlines()
    assert main(["decode", "--model", str(out), "--input", str(tmp_path / "dev.src"),
                 "--output", str(tmp_path / "ours.txt"), "--stack", "100"]) == 0
    ours = read_lines(tmp_path / "ours.txt")
    assert len(theirs) == len(ours) == 100
    same = sum(a.strip() == b.strip() for a, b in zip(theirs, ours))
    assert same >= 85, same  # 95 of 100 here


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
