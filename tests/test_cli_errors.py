"""Every failure a user can cause on the command line: one line ``minismt: <file>[:<line>]: <what>
(expected ...)`` on stderr, exit status 2, no traceback, found before the expensive work, and no good
output replaced; a run directory belongs to one run."""

from __future__ import annotations

import json

import pytest

from conftest import synthetic_system
from minismt.cli import main
from minismt.io import read_lines


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    """A tiny synthetic model and a 6-sentence dev set."""
    return synthetic_system(tmp_path_factory, n_pairs=300, seed=2, dev=6, test=6)


def one_error(capsys, argv, *needles) -> str:
    """Run the CLI, expect exit 2 and one clean error line holding every needle; return the line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("minismt: ") and "Traceback" not in err and "minismt: error" not in err, err
    for needle in needles:
        assert str(needle) in lines[0], (needle, lines[0])
    return lines[0]


def unwritable(tmp_path):
    """A path no one can create: it lies under a regular file (works as root too)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x\n")
    return blocker / "sub"


def tune_args(data, model, run_dir, tuner="mert", *extra):
    return ["tune", "--model", str(model), "--dev-src", str(data / "dev.src"), "--dev-ref", str(data / "dev.tgt"),
            "--tuner", tuner, "--iterations", "2", "--kbest", "5", "--stack", "10", "--run-dir", str(run_dir),
            "--quiet", *extra]


def decode_args(data, model, output, *extra):
    return ["decode", "--model", str(model), "--input", str(data / "dev.src"), "--output", str(output),
            "--stack", "10", "--quiet", *extra]


# ---- train ----------------------------------------------------------------------------------------
def test_train_missing_corpus(tmp_path, capsys):
    tgt = tmp_path / "t.tgt"
    tgt.write_text("a\n")
    one_error(capsys, ["train", "--src", str(tmp_path / "nope.src"), "--tgt", str(tgt), "--out",
                       str(tmp_path / "m"), "--quiet"], tmp_path / "nope.src", "--src", "no such file")
    assert not (tmp_path / "m").exists()  # no half-made model folder


def test_train_unwritable_out(tmp_path, capsys):
    (tmp_path / "s").write_text("a b\n")
    (tmp_path / "t").write_text("a b\n")
    out = unwritable(tmp_path)
    one_error(capsys, ["train", "--src", str(tmp_path / "s"), "--tgt", str(tmp_path / "t"), "--out", str(out),
                       "--quiet"], out, "--out")


def test_train_tokenize_without_languages(tmp_path, capsys):
    (tmp_path / "s").write_text("a b\n")
    (tmp_path / "t").write_text("a b\n")
    one_error(capsys, ["train", "--src", str(tmp_path / "s"), "--tgt", str(tmp_path / "t"), "--out",
                       str(tmp_path / "m"), "--tokenize", "--quiet"], "--tokenize needs --src-lang and --tgt-lang")
    assert not (tmp_path / "m").exists()


def test_failed_train_says_why_in_its_log(tmp_path, capsys):
    (tmp_path / "s").write_text("a b\nc d\n")
    (tmp_path / "t").write_text("a b\n")
    line = one_error(capsys, ["train", "--src", str(tmp_path / "s"), "--tgt", str(tmp_path / "t"), "--out",
                              str(tmp_path / "m"), "--quiet"])
    log = (tmp_path / "m" / "train.log").read_text()
    assert "failed: " in log and line.removeprefix("minismt: ") in log


# ---- decode ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--output", "--kbest-out", "--hypergraph-dir"])
def test_decode_unwritable_outputs_fail_before_decoding(system, tmp_path, capsys, flag):
    data, model = system
    bad = unwritable(tmp_path)
    good = tmp_path / "out.txt"
    good.write_text("good output\n")
    argv = decode_args(data, model, bad if flag == "--output" else good)
    if flag == "--kbest-out":
        argv += ["--kbest", "3", "--kbest-out", str(bad)]
    elif flag == "--hypergraph-dir":
        argv += ["--hypergraph-dir", str(bad)]
    one_error(capsys, argv, bad, flag)
    assert good.read_text() == "good output\n"


def test_decode_misspelt_weight_names_file_and_line(system, tmp_path, capsys):
    data, model = system
    weights = tmp_path / "w.txt"
    weights.write_text("# tuned\nLM0_0 0.5\nLexicalReorderin0_3 0.3\n")
    good = tmp_path / "out.txt"
    good.write_text("good output\n")
    one_error(capsys, decode_args(data, model, good, "--weights", str(weights)),
              f"{weights}:3: unknown feature name 'LexicalReorderin0_3'", "expected one of")
    weights.write_text("LM0_0 0.5\nRuleId_a~b 0.1\n")
    one_error(capsys, decode_args(data, model, good, "--weights", str(weights)), f"{weights}:2:",
              "rule-id features are off", "--sparse-features")
    assert good.read_text() == "good output\n"


@pytest.mark.parametrize("flag, value", [("--stack", "0"), ("--jobs", "0"), ("--kbest", "-1")])
def test_decode_bad_numbers_name_the_flag(system, tmp_path, capsys, flag, value):
    data, model = system
    one_error(capsys, decode_args(data, model, tmp_path / "o", flag, value), f"{flag} {value}", "expected")


# ---- extract --------------------------------------------------------------------------------------
def test_extract_empty_nbest_keeps_the_good_files(tmp_path, capsys):
    ffile, scfile = tmp_path / "features.dat", tmp_path / "scores.dat"
    (tmp_path / "nbest").write_text("0 ||| a b ||| F0= 1 ||| -1\n")
    (tmp_path / "ref").write_text("a b\n")
    assert main(["extract", "--nbest", str(tmp_path / "nbest"), "--ref", str(tmp_path / "ref"), "--ffile",
                 str(ffile), "--scfile", str(scfile)]) == 0
    capsys.readouterr()
    good = ffile.read_bytes(), scfile.read_bytes()
    assert good[0] and good[1]
    (tmp_path / "empty").write_text("")
    one_error(capsys, ["extract", "--nbest", str(tmp_path / "empty"), "--ref", str(tmp_path / "ref"), "--ffile",
                       str(ffile), "--scfile", str(scfile)], tmp_path / "empty", "no hypotheses")
    assert (ffile.read_bytes(), scfile.read_bytes()) == good


def test_extract_unwritable_ffile(tmp_path, capsys):
    (tmp_path / "nbest").write_text("0 ||| a b ||| F0= 1 ||| -1\n")
    (tmp_path / "ref").write_text("a b\n")
    bad = unwritable(tmp_path)
    one_error(capsys, ["extract", "--nbest", str(tmp_path / "nbest"), "--ref", str(tmp_path / "ref"), "--ffile",
                       str(bad), "--scfile", str(tmp_path / "scores.dat")], bad, "--ffile")
    assert not (tmp_path / "scores.dat").exists()


# ---- eval -----------------------------------------------------------------------------------------
def test_eval_empty_files_and_unknown_tokenizer(tmp_path, capsys):
    (tmp_path / "h").write_text("")
    (tmp_path / "r").write_text("")
    one_error(capsys, ["eval", "--hyp", str(tmp_path / "h"), "--ref", str(tmp_path / "r")], tmp_path / "h",
              "empty file")
    (tmp_path / "h").write_text("a b\n")
    (tmp_path / "r").write_text("a b\n")
    one_error(capsys, ["eval", "--hyp", str(tmp_path / "h"), "--ref", str(tmp_path / "r"), "--tokenize",
                       "nonsense"], "unknown BLEU tokenizer 'nonsense'", "13a")


# ---- tune -----------------------------------------------------------------------------------------
def test_tune_empty_dev_set_names_the_file(system, tmp_path, capsys):
    data, model = system
    empty = tmp_path / "empty.src"
    empty.write_text("")
    argv = tune_args(data, model, tmp_path / "run")
    argv[argv.index("--dev-src") + 1] = str(empty)
    argv[argv.index("--dev-ref") + 1] = str(empty)
    one_error(capsys, argv, empty, "empty file")


def test_tune_unknown_parameter_lists_the_valid_ones(system, tmp_path, capsys):
    data, model = system
    one_error(capsys, tune_args(data, model, tmp_path / "run", "mert", "--tuner-param", "restarts=3"),
              "tuner 'mert' has no parameter 'restarts'", "n_random_restarts", "seed")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flag, value", [("--iterations", "0"), ("--kbest", "0"), ("--jobs", "0"),
                                         ("--reset-after", "0")])
def test_tune_bad_numbers_name_the_flag(system, tmp_path, capsys, flag, value):
    data, model = system
    line = one_error(capsys, tune_args(data, model, tmp_path / "run", "mert", flag, value), f"{flag} {value}")
    assert "max_iter" not in line


def test_tune_unwritable_run_dir(system, tmp_path, capsys):
    data, model = system
    bad = unwritable(tmp_path)
    one_error(capsys, tune_args(data, model, bad), bad, "--run-dir")


# ---- a run directory is one run -------------------------------------------------------------------
def test_a_finished_run_is_not_taken_over_by_another_tuner(system, tmp_path, capsys):
    data, model = system
    run = tmp_path / "run"
    assert main(tune_args(data, model, run, "mert")) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == ["iteration 0", "iteration 1"] and len(lines) == 3
    assert lines[2].startswith(f"weights written to {run / 'weights.final'} (the best dev BLEU")
    weights = (run / "weights.final").read_bytes()
    settings = json.loads((run / "run.json").read_text())
    assert settings["tuner"] == "mert" and settings["seed"] == 0 and settings["decoder"]["kbest"] == 5
    one_error(capsys, tune_args(data, model, run, "pro"), run / "run.json", 'tuner: "mert" -> "pro"')
    one_error(capsys, tune_args(data, model, run, "mert", "--seed", "4"), "seed: 0 -> 4")
    one_error(capsys, tune_args(data, model, run, "mert", "--tuner-param", "n_random_restarts=3"),
              "tuner_params.n_random_restarts: null -> 3")
    one_error(capsys, tune_args(data, model, run, "mert", "--stack", "11"), "decoder.stack_size: 10 -> 11")
    other_refs = tmp_path / "refs"
    other_refs.write_text("\n".join(reversed(read_lines(data / "dev.tgt"))) + "\n")
    argv = tune_args(data, model, run, "mert")
    argv[argv.index("--dev-ref") + 1] = str(other_refs)
    one_error(capsys, argv, "references:")
    assert (run / "weights.final").read_bytes() == weights
    assert main(tune_args(data, model, run, "mert")) == 0  # the same command still resumes (finished: no work)
    assert (run / "weights.final").read_bytes() == weights


def test_a_killed_run_does_not_resume_as_a_hybrid(system, tmp_path, capsys, monkeypatch):
    """A run interrupted in its second iteration refuses another tuner, and resumes with its own."""
    from tuners.devdecoder import MinismtDevDecoder
    data, model = system
    run = tmp_path / "run"
    decode = MinismtDevDecoder.decode_with_forests  # the step search's decode (MERT's default with minismt)

    def interrupted(self, weights, iteration, max_edges=()):
        if iteration == 1:
            raise KeyboardInterrupt
        return decode(self, weights, iteration, max_edges)

    monkeypatch.setattr(MinismtDevDecoder, "decode_with_forests", interrupted)
    assert main(tune_args(data, model, run, "mert")) == 130
    monkeypatch.setattr(MinismtDevDecoder, "decode_with_forests", decode)
    assert not json.loads((run / "checkpoint.json").read_text())["done"]
    capsys.readouterr()
    one_error(capsys, tune_args(data, model, run, "kbmira"), 'tuner: "mert" -> "kbmira"')
    assert main(tune_args(data, model, run, "mert")) == 0
    assert len(json.loads((run / "history.json").read_text())) == 2


# ---- usage errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, needles", [
    (["tune", "--model", "m"], ["minismt tune: ", "required: --dev-src, --dev-ref, --tuner, --run-dir",
                                "see 'minismt tune --help'"]),
    (["decode", "--stack", "abc"], ["minismt decode: ", "--stack: invalid int value: 'abc'"]),
    (["corpora", "fetch", "--out", "x"], ["minismt corpora fetch: ", "required: NAME"]),
    (["no-such-command"], ["minismt: ", "invalid choice: 'no-such-command'"]),
])
def test_usage_errors_are_one_line(argv, needles, capsys):
    """A missing or malformed argument: one line naming the command and what is wrong (not the whole usage)."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and not captured.out and "usage:" not in captured.err, captured.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
