"""minismt pipeline and demo: configuration checks, a tiny end-to-end run, caching, resuming, significance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from minismt.errors import InputError
from minismt.pipeline.config import check_config, dump_toml, load_config
from minismt.pipeline.run import Pipeline, tune_one
from minismt.pipeline.significance import paired_bootstrap

REPO = Path(__file__).resolve().parents[1]

# A pipeline small enough for the fast tests: 400 synthetic pairs, 20 dev and test sentences,
# one iteration of 10-best lists, MERT (random: one run per seed) and APRO (deterministic: one run);
# keep = "last": the weights tested are the tuners' (with "best" one iteration would keep the start weights).
def tiny_text(tuners='["mert", "apro"]', seeds="2", iterations=1,
              params="[tune.params.mert]\nn_random_restarts = 2", work="work", report="report") -> str:
    return f"""
[corpus]
name = "synthetic"
size = 400
seed = 3
dev = 20
test = 20

[train]
lm_order = 3

[tune]
tuners = {tuners}
seeds = {seeds}
iterations = {iterations}
kbest = 10
stack = 10
keep = "last"

{params}

[test]
bootstrap_samples = 200

[output]
work_dir = "{work}"
report_dir = "{report}"
"""


TINY = tiny_text()


def write_config(folder: Path, text: str, name: str = "config.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def log_lines(work: Path) -> list[str]:
    return (work / "pipeline.log").read_text(encoding="utf-8").splitlines()


# ---- configuration ------------------------------------------------------------------------------------
def test_config_defaults_and_relative_paths(tmp_path):
    config = load_config(write_config(tmp_path, TINY))
    assert config.work_dir == str(tmp_path / "work") and config.report_dir == str(tmp_path / "report")
    assert config.tune["seeds"] == [0, 1] and config.tune["tuners"] == ["mert", "apro"]
    assert config.test["stack"] == 10  # defaults to tune.stack
    assert config.test["tokenize"] == "none" and config.tune["accumulate"] is None and config.test["baseline"]
    assert config.source == str(tmp_path / "config.toml")
    # the normalised configuration reads back to the same thing
    again = load_config(write_config(tmp_path, config.to_toml(), "again.toml"))
    assert again.to_dict() == config.to_dict()


@pytest.mark.parametrize("text, where, message, expected", [
    ("[tune]\ntuners = [\"mert\"]\nitrations = 3\n", 3, "unknown key tune.itrations", "iterations, kbest"),
    ("[tune]\ntuners = [\"mert\"]\n[tunning]\nx = 1\n", 3, "unknown section [tunning]", "[corpus], [train]"),
    ("[tune]\ntuners = [\"mert\"]\niterations = \"three\"\n", 3, "tune.iterations = \"three\"",
     "an integer >= 1"),
    ("[tune]\ntuners = [\"mert\", \"nope\"]\n", 2, "tune.tuners", "'nope' is not one"),
    ("[tune]\ntuners = [\"pro\"]\n[tune.params.pro]\ngama = 1\n", 4, "unknown key tune.params.pro.gama",
     "gamma"),
    ("[tune]\ntuners = [\"pro\"]\n[tune.params.mert]\nseed = 1\n", 3, "'mert' is not in tune.tuners", None),
    ("[train]\nlm_order = 3\n", None, "no tuners", "tuners = "),
    ("[corpus]\nname = \"multi99k\"\n[tune]\ntuners = [\"mert\"]\n", 2, "corpus.name", "multi30k-de-en"),
    ("[corpus]\nsize = -5\n[tune]\ntuners = [\"mert\"]\n", 2, "corpus.size = -5", ">= 1"),
    ("[tune]\ntuners = [\"mert\"]\n[test]\nbootstrap_seed = 0\n", 4, "test.bootstrap_seed", ">= 1"),
    ("[tune]\ntuners = [\"mert\"]\nseeds = [1, 1]\n", 3, "tune.seeds", "distinct"),
    ("[tune]\ntuners = [\"mert\"]\n[output]\nsurface_feature = \"LM\"\n", 4, "output.surface_feature", "LM0_0"),
    ("[tune]\ntuners = [\"mert\"]\niterations = = 3\n", 3, "not valid TOML", None),
])
def test_bad_configuration_names_file_line_and_key(tmp_path, text, where, message, expected):
    path = write_config(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_config(path)
    err = info.value
    assert err.path == str(path)
    assert message in err.message
    assert err.line == where
    if expected is not None:
        assert expected in (err.expected or "")
    assert str(path) in str(err)


def test_local_corpus_is_checked_and_cut_to_size(tmp_path):
    from corpora.synthetic import write_synthetic
    data = tmp_path / "data"
    write_synthetic(data, 60, seed=2, dev=10, test=10)
    text = f'[corpus]\nname = "local"\npath = "{data}"\ndev = 4\n[tune]\ntuners = ["pro"]\n'
    pipeline = Pipeline(load_config(write_config(tmp_path, text)), progress=False, echo=False)
    corpus = pipeline.corpus()
    assert corpus.result["pairs"] == {"train": 60, "dev": 4, "test": 10}
    assert (Path(corpus.folder) / "dev.tgt").read_text().splitlines() == (data / "dev.tgt").read_text().splitlines()[:4]
    (data / "test.tgt").unlink()
    with pytest.raises(InputError) as info:
        load_config(write_config(tmp_path, text))
    assert "corpus.path has no test.tgt" in info.value.message and info.value.line == 3


def test_config_check_on_the_command_line(tmp_path, capsys):
    from minismt.cli import main
    bad = write_config(tmp_path, "[tune]\ntuners = [\"mert\"]\nstak = 3\n", "bad.toml")
    assert main(["pipeline", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:3: unknown key tune.stak" in err and "stack" in err
    good = write_config(tmp_path, TINY)
    assert main(["pipeline", str(good), "--check"]) == 0
    printed = capsys.readouterr().out
    assert "[tune.params.mert]" in printed and "n_random_restarts = 2" in printed


def test_demo_configuration_is_valid_and_prints_as_toml(tmp_path, capsys):
    from minismt.cli import main
    from minismt.pipeline.cli import demo_config
    config = check_config(demo_config(str(tmp_path)))
    assert len(config.tune["tuners"]) >= 5 and config.corpus["name"] == "synthetic"
    assert main(["demo", "--print-config", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert load_config(write_config(tmp_path, text)).to_dict() == config.to_dict()
    assert dump_toml({"a": {"b": [1, 2], "c": {"d": True}}}) == "[a]\nb = [1, 2]\n\n[a.c]\nd = true\n"


@pytest.mark.parametrize("command", ["demo", "pipeline"])
def test_help(command):
    result = subprocess.run([sys.executable, "-m", "minismt.cli", command, "--help"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "synthetic" in text and "report.json" in text and "--out" in text
    if command == "pipeline":
        assert "[tune]" in text and "bootstrap_samples" in text


# ---- significance -------------------------------------------------------------------------------------
def _reference_p_value(a, b, refs, n_samples, seed):
    """Paired bootstrap as Koehn (2004) / Moses' script, written independently of sacrebleu's code:
    BLEU from minismt's sacrebleu-exact statistics, the resamples numpy's default_rng(seed) draws."""
    from minismt.metrics import BleuReferences, corpus_bleu_from_stats
    references = BleuReferences([[r] for r in refs])
    ids = np.arange(len(refs))
    stats_a, stats_b = references.stats(ids, a), references.stats(ids, b)
    observed = abs(100 * corpus_bleu_from_stats(stats_a) - 100 * corpus_bleu_from_stats(stats_b))
    rows = np.random.default_rng(seed).choice(len(refs), size=(n_samples, len(refs)), replace=True)
    diffs = np.array([abs(100 * corpus_bleu_from_stats(stats_a[r]) - 100 * corpus_bleu_from_stats(stats_b[r]))
                      for r in rows])
    centred = diffs - diffs.mean()
    return (np.count_nonzero(centred > observed) + 1) / (n_samples + 1)


def test_paired_bootstrap_matches_a_reference_implementation():
    rng = np.random.default_rng(7)
    vocabulary = [f"w{i}" for i in range(30)]
    refs = [" ".join(rng.choice(vocabulary, size=rng.integers(5, 12))) for _ in range(40)]

    def noisy(keep):
        return [" ".join(w if rng.random() < keep else rng.choice(vocabulary) for w in r.split()) for r in refs]

    a, b, c = noisy(0.8), noisy(0.7), noisy(0.78)
    result = paired_bootstrap([("a", a), ("b", b), ("c", c)], refs, n_samples=1000, seed=4321, metrics=("BLEU",))
    pairs = {(p["a"], p["b"]): p for p in result["pairs"]}
    assert set(pairs) == {("a", "b"), ("a", "c"), ("b", "c")}
    for (x, y), pair in pairs.items():
        hyps = {"a": a, "b": b, "c": c}
        expected = _reference_p_value(hyps[x], hyps[y], refs, 1000, 4321)
        assert pair["p_value"] == pytest.approx(expected, abs=1e-12), (x, y)
    assert pairs[("a", "b")]["p_value"] < 0.05 < pairs[("a", "c")]["p_value"]
    assert "bs:1000" in result["signatures"]["BLEU"] and "seed:4321" in result["signatures"]["BLEU"]
    only_first = paired_bootstrap([("a", a), ("b", b), ("c", c)], refs, n_samples=1000, seed=4321,
                                  metrics=("BLEU",), all_pairs=False)
    assert [(p["a"], p["b"]) for p in only_first["pairs"]] == [("a", "b"), ("a", "c")]
    assert os.environ.get("SACREBLEU_SEED") is None  # restored


# ---- a tiny pipeline ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pipeline")
    config = load_config(write_config(folder, TINY))
    began = time.perf_counter()
    report = Pipeline(config, progress=False, echo=False).run()
    return folder, config, report, time.perf_counter() - began


def test_tiny_pipeline_writes_the_report(tiny):
    folder, config, report, _ = tiny
    out = folder / "report"
    on_disk = json.loads((out / "report.json").read_text())
    assert on_disk["tuners"].keys() == {"mert", "apro"}
    mert, apro = on_disk["tuners"]["mert"], on_disk["tuners"]["apro"]
    assert [r["seed"] for r in mert["runs"]] == [0, 1] and mert["seeded"]
    assert len({r["key"] for r in mert["runs"]}) == 2
    assert not apro["seeded"] and len({r["key"] for r in apro["runs"]}) == 1  # one run stands for both seeds
    for info in on_disk["tuners"].values():
        for run in info["runs"]:
            assert len(run["iterations"]) == 1 and 0 < run["iterations"][0]["dev_bleu"] <= 100
            assert set(run["test"]) >= {"bleu", "chrf", "ter"} and 0 < run["test"]["bleu"] <= 100
            assert len(run["weights"]) == 15
    assert "tok:none" in on_disk["test_signature"] and "chrF2" in on_disk["test_signature"]
    assert on_disk["baseline"]["test"]["bleu"] > 0
    significance = on_disk["significance"]
    assert significance["samples"] == 200 and significance["seed"] == 12345
    assert {(p["a"], p["b"]) for p in significance["pairs"]} == {("mert", "apro"), ("mert", "untuned")}
    assert all(0 < p["p_value"] <= 1 for p in significance["pairs"])
    for name in ("dev_bleu", "test_bleu", "error_surface", "hypergraph"):
        figure = on_disk["figures"][name]
        assert figure["file"] == f"{name}.png", figure
        assert (out / figure["file"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    surface = on_disk["figures"]["error_surface"]
    assert surface["tuner"] == "mert" and surface["feature"] == "LM0_0" and len(surface["x"]) == 1001
    # x = 0 is the tuner's own result on its accumulated list: the BLEU the loop recorded
    assert surface["bleu_at_weights"] == pytest.approx(mert["runs"][0]["iterations"][0]["tuned_bleu"], abs=1e-9)
    assert on_disk["figures"]["hypergraph"]["drawn_edges"] <= 30
    markdown = (out / "report.md").read_text()
    assert "| mert |" in markdown and "| apro |" in markdown and "![dev_bleu](dev_bleu.png)" in markdown
    assert (out / "pipeline.log").exists()
    lines = log_lines(folder / "work")
    assert any("corpus: running" in line for line in lines)
    assert any("tune mert seed 1: running" in line for line in lines)
    assert any("precompile: kernels compiled and cached" in line for line in lines)


def test_precompile_runs_every_kind_of_tuner_on_the_toy_model(tmp_path):
    from minismt.decode import PhraseModel
    from minismt.pipeline.precompile import SOURCES, compile_kernels, write_toy_model
    model = PhraseModel.load(write_toy_model(str(tmp_path)))
    assert model.table.n_sources > len(SOURCES)
    tune = {"tuners": ["mert", "kbmira", "listmle", "hg-mert", "nbl-bo"], "kbest": 10, "stack": 10,
            "accumulate": None, "reset_after": None,
            "params": {"mert": {"n_random_restarts": 1}, "hg-mert": {"n_random_directions": 2}, "nbl-bo": {"steps": 3}}}
    assert compile_kernels(tune) == []
    # a tuner that fails on the toy problem is logged and skipped, not raised
    log = tmp_path / "pipeline.log"
    assert compile_kernels({**tune, "tuners": ["mert", "pro"], "params": {"mert": {"n_random_restarts": -1}}},
                           str(log)) == ["mert"]
    assert "precompile: mert on the toy model: InputError" in log.read_text()


def test_rerun_skips_every_cached_step(tiny):
    folder, config, first, first_seconds = tiny
    before = len(log_lines(folder / "work"))
    began = time.perf_counter()
    report = Pipeline(config, progress=False, echo=False).run()
    seconds = time.perf_counter() - began
    assert all(step["cached"] for step in report["steps"]), report["steps"]
    new = log_lines(folder / "work")[before:]
    assert sum("cached, not redone" in line for line in new) == len(report["steps"])
    assert not any(": running" in line for line in new)
    assert seconds < first_seconds
    for tuner in ("mert", "apro"):
        assert report["tuners"][tuner]["summary"] == first["tuners"][tuner]["summary"]


def test_a_changed_option_redoes_only_what_depends_on_it(tiny, tmp_path):
    folder, config, first, _ = tiny
    text = tiny_text(tuners='["apro"]', params="[tune.params.apro]\nC = 0.1", work=folder / "work",
                     report=tmp_path / "report")
    report = Pipeline(load_config(write_config(tmp_path, text)), progress=False, echo=False).run()
    cached = {step["label"]: step["cached"] for step in report["steps"]}
    assert cached["corpus"] and cached["train"] and cached["test untuned"]
    assert not cached["tune apro (no randomness: one run for every seed)"]
    assert report["tuners"]["apro"]["params"] == {"C": 0.1}


def test_an_interrupted_pipeline_resumes(tiny, tmp_path, monkeypatch):
    """Stopped (Ctrl-C) right after the first iteration's checkpoint; the rerun continues from there
    and ends with the weights of an uninterrupted run."""
    from tuners.loop import TuningRun
    folder, _, _, _ = tiny
    text = tiny_text(tuners='["kbmira"]', seeds="[5]", iterations=2, params="", work=folder / "work",
                     report=tmp_path / "report")
    config = load_config(write_config(tmp_path, text))
    save = TuningRun._save

    def save_then_stop(self, iteration, *args, **kwargs):
        save(self, iteration, *args, **kwargs)
        if iteration == 0:
            raise KeyboardInterrupt

    monkeypatch.setattr(TuningRun, "_save", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        Pipeline(config, progress=False, echo=False).run()
    monkeypatch.setattr(TuningRun, "_save", save)
    work = folder / "work"
    lines = log_lines(work)
    assert "stopped by KeyboardInterrupt" in lines[-1]
    spec = next(s for s in Pipeline(config, progress=False, echo=False).tune_specs(
        *_cached_corpus_and_model(config)) if s["tuner"] == "kbmira")
    run_dir = Path(spec["run_dir"])
    assert not (Path(spec["folder"]) / "step.json").exists()
    checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
    assert checkpoint["iteration"] == 0 and not checkpoint["done"]
    first_iteration = checkpoint["history"][0]

    report = Pipeline(config, progress=False, echo=False).run()
    assert any("tune kbmira seed 5: resuming after iteration 0" in line for line in log_lines(work))
    run = report["tuners"]["kbmira"]["runs"][0]
    assert [r["iteration"] for r in run["iterations"]] == [0, 1]
    assert run["iterations"][0]["seconds"] == first_iteration["seconds"]  # not redone
    uninterrupted = tune_one({**spec, "run_dir": str(tmp_path / "uninterrupted"), "folder": str(tmp_path)})
    assert uninterrupted["weights"] == run["weights"]


def _cached_corpus_and_model(config):
    pipeline = Pipeline(config, progress=False, echo=False)
    corpus = pipeline.corpus()
    return corpus, pipeline.train(corpus)


def test_a_killed_pipeline_process_resumes(tmp_path):
    """SIGKILL while tuning (a real kill, no clean-up), then the same command finishes the run."""
    text = tiny_text(tuners='["pro"]', seeds="1", iterations=3, params="")
    config = write_config(tmp_path, text)
    command = [sys.executable, "-m", "minismt.cli", "pipeline", str(config), "--quiet"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    checkpoint = None
    while time.monotonic() < deadline and process.poll() is None:
        found = list((tmp_path / "work").glob("tune-pro-*/run/checkpoint.json"))
        if found:
            checkpoint = found[0]
            break
        time.sleep(0.05)
    assert checkpoint is not None, "no checkpoint before the deadline"
    process.send_signal(signal.SIGKILL)
    process.wait()
    state = json.loads(checkpoint.read_text())
    if state["done"]:
        pytest.skip("the run finished before it could be killed")
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    log = (tmp_path / "work" / "pipeline.log").read_text()
    assert f"resuming after iteration {state['iteration']}" in log
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert len(report["tuners"]["pro"]["runs"][0]["iterations"]) == 3


@pytest.mark.slow
def test_demo_runs_and_prints_the_table(tmp_path):
    """The whole demo as users run it (a few minutes on 2 cores)."""
    result = subprocess.run([sys.executable, "-m", "minismt.cli", "demo", "--quiet"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=1800,
                            env={**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr
    for name in ("mert", "pro", "apro", "kbmira", "untuned", "test BLEU"):
        assert name in result.stdout
    for name in ("report.json", "report.md", "dev_bleu.png", "test_bleu.png", "error_surface.png", "hypergraph.png"):
        assert (tmp_path / name).exists()


# ---- output folders and local corpora: errors up front, naming the user's paths ----------------------
def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    return lines[0]


@pytest.mark.parametrize("where", ["work_dir", "report_dir", "--work-dir", "--out"])
def test_unwritable_pipeline_folders_fail_before_any_work(tmp_path, capsys, where):
    from minismt.cli import main
    blocker = tmp_path / "file"
    blocker.write_text("keep me\n")
    bad = blocker / "sub"
    work, report = ("file/sub" if where == "work_dir" else "work"), ("file/sub" if where == "report_dir" else "report")
    config = write_config(tmp_path, tiny_text(work=work, report=report))
    argv = ["pipeline", str(config)] + ([where, str(bad)] if where.startswith("--") else [])
    assert main(argv) == 2
    line = _one_error_line(capsys)
    assert line.startswith("minismt: ") and str(bad) in line and "not a writable folder" in line
    assert ("--" not in where and f"output.{where}" in line) or where in line
    assert blocker.read_text() == "keep me\n"
    assert not (tmp_path / "work").exists() and not (tmp_path / "report").exists()  # nothing ran
    assert main(argv + ["--check"]) == 2
    _one_error_line(capsys)


def test_demo_out_unwritable_fails_up_front_and_work_goes_to_the_cache(tmp_path, capsys, monkeypatch):
    from minismt.cli import main
    from minismt.pipeline.cli import demo_config
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    blocker = tmp_path / "report.md"
    blocker.write_text("an earlier report\n")
    assert main(["demo", "--out", str(blocker / "demo"), "--quiet"]) == 2
    line = _one_error_line(capsys)
    assert str(blocker / "demo") in line and "--out" in line
    assert blocker.read_text() == "an earlier report\n" and not (tmp_path / "cache").exists()
    assert main(["demo", "--out", str(tmp_path / "ok"), "--work-dir", str(blocker / "w"), "--quiet"]) == 2
    assert "--work-dir" in _one_error_line(capsys) and not (tmp_path / "ok").exists()
    # the work folder: under $XDG_CACHE_HOME/minismt, one per report folder, never inside it
    out = tmp_path / "demo-report"
    work = Path(demo_config(str(out))["output"]["work_dir"])
    assert work.parent == tmp_path / "cache" / "minismt" and out not in work.parents
    assert Path(demo_config(str(out))["output"]["work_dir"]) == work
    assert Path(demo_config(str(tmp_path / "other"))["output"]["work_dir"]) != work
    assert Path(demo_config(str(out), work_dir=str(tmp_path / "w"))["output"]["work_dir"]) == tmp_path / "w"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Path(demo_config(str(out))["output"]["work_dir"]).parent == tmp_path / "home" / ".cache" / "minismt"


def test_pipeline_defaults_to_the_lm_order_of_minismt_train(tmp_path):
    from minismt.cli import build_parser
    from minismt.train import TrainingConfig
    config = load_config(write_config(tmp_path, '[tune]\ntuners = ["mert"]\n'))
    train_default = build_parser().parse_args(["train", "--src", "s", "--tgt", "t", "--out", "m"]).lm_order
    assert config.train["lm_order"] == train_default == TrainingConfig(src="s", tgt="t", out="m").lm_order == 4


@pytest.mark.parametrize("damage, file, line, message", [
    ("train.tgt short", "train.tgt", None, "59 lines, but the source side"),
    ("dev.src long", "dev.tgt", None, "10 lines, but the source side"),
    ("train.src word", "train.src", 4, "the word '|||' cannot be written in a Moses table"),
])
def test_local_corpus_errors_name_the_users_files(tmp_path, capsys, damage, file, line, message):
    from corpora.synthetic import write_synthetic
    from minismt.cli import main
    data = tmp_path / "data"
    write_synthetic(data, 60, seed=2, dev=10, test=10)
    lines = (data / damage.split()[0]).read_text().splitlines()
    if damage == "train.tgt short":
        lines = lines[:-1]
    elif damage == "dev.src long":
        lines.append(lines[0])
    else:
        lines[3] = "a ||| b " + lines[3]
    (data / damage.split()[0]).write_text("".join(f"{x}\n" for x in lines))
    config = write_config(tmp_path, f'[corpus]\nname = "local"\npath = "{data}"\n[tune]\ntuners = ["pro"]\n')
    assert main(["pipeline", str(config), "--quiet"]) == 2
    err = _one_error_line(capsys)
    where = str(data / file) + (f":{line}" if line else "")
    assert f"{where}: {message}" in err and "work" not in err.replace(str(tmp_path), "")
    assert not (tmp_path / "work").exists()
