"""The minismt command: eval against sacrebleu, --help of every subcommand, clear errors."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys

import pytest
import sacrebleu

from conftest import shared_path
from minismt.cli import build_parser, main
from minismt.io import read_lines


def subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sorted(action.choices)


@pytest.mark.parametrize("command", [[]] + [[c] for c in subcommands()])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as stop:
        main(command + ["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "usage: minismt" in out and len(out.split()) > 20


@pytest.fixture(scope="module")
def val_files(tmp_path_factory):
    refs = read_lines(shared_path("corpora", "multi30k", "val.en.gz"))
    rng = random.Random(3)
    hyps = [" ".join(w for w in line.split() if rng.random() > 0.1) for line in refs]
    folder = tmp_path_factory.mktemp("eval")
    (folder / "hyp.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    return folder / "hyp.txt", shared_path("corpora", "multi30k", "val.en.gz"), hyps, refs


@pytest.mark.parametrize("lowercase", [False, True])
def test_eval_json_equals_sacrebleu(val_files, lowercase, capsys):
    hyp_file, ref_file, hyps, refs = val_files
    args = ["eval", "--hyp", str(hyp_file), "--ref", str(ref_file), "--json"]
    assert main(args + (["--lowercase"] if lowercase else [])) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["bleu"] == sacrebleu.corpus_bleu(hyps, [refs], lowercase=lowercase).score
    assert result["chrf"] == sacrebleu.CHRF(lowercase=lowercase).corpus_score(hyps, [refs]).score
    assert result["ter"] == sacrebleu.corpus_ter(hyps, [refs]).score
    bleu_signature = result["signature"].split(";")[0]
    assert bleu_signature.startswith("BLEU:") and ("case:lc" in bleu_signature) == lowercase
    assert {"bleu", "chrf", "ter", "signature"} <= set(result)


def test_eval_lowercase_chrf_and_two_references(val_files, tmp_path, capsys):
    hyp_file, ref_file, hyps, refs = val_files
    second = tmp_path / "ref2.txt"
    second.write_text("\n".join(r.upper() for r in refs) + "\n", encoding="utf-8")
    assert main(["eval", "--hyp", str(hyp_file), "--ref", str(ref_file), "--ref", str(second),
                 "--json", "--lowercase"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    both = [refs, [r.upper() for r in refs]]
    assert result["bleu"] == sacrebleu.corpus_bleu(hyps, both, lowercase=True).score
    assert result["chrf"] == sacrebleu.CHRF(lowercase=True).corpus_score(hyps, both).score
    assert result["ter"] == sacrebleu.corpus_ter(hyps, both).score
    assert "nrefs:2" in result["signature"]


def test_eval_mismatched_lines_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "h").write_text("a\nb\n")
    (tmp_path / "r").write_text("a\n")
    assert main(["eval", "--hyp", str(tmp_path / "h"), "--ref", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"minismt: {tmp_path / 'r'}: 1 lines") and err.count("\n") == 1


def test_eval_missing_and_non_utf8_files(tmp_path, capsys):
    assert main(["eval", "--hyp", str(tmp_path / "nope"), "--ref", str(tmp_path / "nope")]) == 2
    assert "cannot open" in capsys.readouterr().err
    (tmp_path / "bad").write_bytes(b"ok\n\xff\xfe\n")
    (tmp_path / "r").write_text("a\nb\n")
    assert main(["eval", "--hyp", str(tmp_path / "bad"), "--ref", str(tmp_path / "r")]) == 2
    assert f"{tmp_path / 'bad'}:2" in capsys.readouterr().err


def test_console_script_is_installed():
    exe = shutil.which("minismt") or str(__import__("pathlib").Path(sys.executable).with_name("minismt"))
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True).stdout
    assert "eval" in out
