"""minismt pipeline and demo: configuration checks, a tiny end-to-end run, caching, resuming, significance."""

from __future__ import annotations

import copy
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
from minismt.pipeline.report import bleu_by_tuner_figure, error_surface_figure, markdown, summary_rows
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
    ("[tune]\ntuners = [\"kbmira\"]\n[tune.params.kbmira]\nC = -1\n", 3, "tune.params.kbmira: C=-1",
     "a finite number > 0"),
    ("[tune]\ntuners = [\"hg-minrisk\"]\n[tune.params.hg-minrisk]\ncooling = 2\n", 3,
     "tune.params.hg-minrisk: cooling=2", "(0, 1)"),
    ("[train]\nlm_order = 3\n", None, "no tuners", "tuners = "),
    ("[corpus]\nname = \"multi99k\"\n[tune]\ntuners = [\"mert\"]\n", 2, "corpus.name", "multi30k-de-en"),
    ("[corpus]\nsize = -5\n[tune]\ntuners = [\"mert\"]\n", 2, "corpus.size = -5", ">= 1"),
    ("[tune]\ntuners = [\"mert\"]\n[test]\nbootstrap_seed = 0\n", 4, "test.bootstrap_seed", ">= 1"),
    ("[tune]\ntuners = [\"mert\"]\nseeds = [1, 1]\n", 3, "tune.seeds", "distinct"),
    ("[tune]\ntuners = [\"mert\"]\n[output]\nsurface_feature = \"LM\"\n", 4, "output.surface_feature", "LM0_0"),
    ("[tune]\ntuners = [\"mert\"]\niterations = = 3\n", 3, "not valid TOML", None),
    ("[train]\naligner = \"giza\"\n[tune]\ntuners = [\"mert\"]\n", 2, "train.aligner", "'fast-align', 'hmm'"),
    ("[tune]\ntuners = [\"mert\"]\nfix = [\"LM0 _0\"]\n", 3, "tune.fix", "shell patterns"),
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
    report = Pipeline(config, progress=False, echo=False).run()
    return folder, config, report


def test_tiny_pipeline_writes_the_report(tiny):
    folder, config, report = tiny
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


# ---- the report: tables and figures agree with each other -----------------------------------------------
def md_table(text: str, heading: str) -> list[list[str]]:
    """The rows (header first) of the table under ``## heading`` of a report.md."""
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("|") and not line.startswith("|---")]


def one_seed(report: dict) -> dict:
    """``report`` as if tune.seeds had been [0]: each tuner keeps its seed-0 run."""
    out = copy.deepcopy(report)
    out["config"]["tune"]["seeds"] = [0]
    for info in out["tuners"].values():
        info["runs"] = [r for r in info["runs"] if r["seed"] == 0]
        bleu = info["runs"][0]["test"]["bleu"]
        info["summary"]["test_bleu"] = {"mean": bleu, "std": 0.0, "min": bleu, "max": bleu, "n": 1}
    return out


def title_of(ax) -> str:
    return " ".join(ax.get_title().split())


def test_report_tables_agree_on_runs_and_tuning_times(tiny):
    _, _, report = tiny
    text = markdown(report)
    tuners = {row[0]: row for row in md_table(text, "Tuners")[1:]}
    runs = md_table(text, "Runs")[1:]
    timings = {row[0]: row for row in md_table(text, "Timings")[1:]}
    assert tuners["mert"][1] == "2" and tuners["apro"][1] == "1 (x2)"  # one run stands for both seeds
    for name, info in report["tuners"].items():
        for run in info["runs"]:
            label = next(s["label"] for s in report["steps"] if s["step"] == "tune" and s["key"] == run["key"])
            row = next(r for r in runs if r[:2] == [name, str(run["seed"])])
            assert row[-1] == timings[label][3], (name, run["seed"])  # the step's "seconds when it ran"
    apro = next(s["label"] for s in report["steps"] if s["label"].startswith("tune apro"))
    assert tuners["apro"][-1] == timings[apro][3]
    single = one_seed(report)
    rows = summary_rows(single)
    assert [row[1] for row in rows[2:]] == ["1", "1"]  # not "1 (x1)"
    assert "(x" not in markdown(single) and "one run per tuner" in markdown(single)


def test_each_test_step_is_timed_on_its_own(tiny, tmp_path, monkeypatch):
    """The untuned system takes a second longer to decode: only its step's time shows it."""
    import minismt.parallel
    folder, _, _ = tiny
    text = TINY.replace('work_dir = "work"', f'work_dir = "{folder / "work"}"').replace(
        "bootstrap_samples = 200", "bootstrap_samples = 200\nstack = 7")  # new test steps, the rest cached
    pipeline = Pipeline(load_config(write_config(tmp_path, text)), progress=False, echo=False)
    corpus = pipeline.corpus()
    model = pipeline.train(corpus)
    specs = pipeline.tune(corpus, model)
    decode = minismt.parallel.decode_requests
    calls = []

    def slow_first(requests, *args, **kwargs):
        calls.append(len(requests))
        if len(calls) == 1:
            time.sleep(1.0)
        return decode(requests, *args, **kwargs)

    monkeypatch.setattr(minismt.parallel, "decode_requests", slow_first)
    outcomes = pipeline.test(corpus, model, specs)
    # one decode per distinct weights (untuned, mert seed 0, mert seed 1, apro; two tuned runs that end with the
    # same weights share one step)
    assert calls == [1] * len({o.key for o in outcomes.values()}) and len(calls) >= 2
    untuned, others = outcomes["untuned"], [o for name, o in outcomes.items() if name != "untuned"]
    assert not untuned.cached and untuned.seconds >= 1.0
    assert all(o.seconds < untuned.seconds - 0.5 for o in others)
    for outcome in outcomes.values():
        record = json.loads((Path(outcome.folder) / "step.json").read_text())
        assert record["seconds"] == pytest.approx(outcome.seconds, abs=1e-3)
        assert 0 < record["result"]["decode_seconds"] <= record["seconds"]


def test_error_surface_heading_names_the_tuner_shown(tiny):
    _, _, report = tiny
    text = markdown(report)
    assert "### Error surface along LM0_0 of mert's final k-best list (seed 0)" in text
    assert "MERT error surface" not in text
    without_mert = {**report, "tuners": {"apro": report["tuners"]["apro"]}}
    figure, info = error_surface_figure(without_mert, "LM0_0")
    assert info["tuner"] == "apro" and info["title"] == "Error surface along LM0_0 of apro's final k-best list (seed 0)"
    assert title_of(figure.axes[0]) == info["title"] and "MERT was not run" in info["note"]
    text = markdown({**without_mert, "figures": {"error_surface": {"file": "error_surface.png", **info}}})
    headings = [line for line in text.splitlines() if line.startswith("### ")]
    assert headings == [f"### {info['title']}"]
    assert figure.axes[0].get_xlabel() == "weight of LM0_0 (the others fixed)"


def test_test_bleu_figure_shows_the_differences_between_tuners(tiny):
    _, _, report = tiny
    figure, info = bleu_by_tuner_figure(report)
    ax = figure.axes[0]
    assert ax.get_xlabel() == "tuner" and ax.get_ylabel() == "test BLEU (%)"
    assert title_of(ax) == info["title"] == report["figures"]["test_bleu"]["title"]
    assert f"### {info['title']}\n" in markdown(report)  # the same words in report.md
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "mean ± sd" in legend and "mean ± sd" in info["title"]  # mert has two runs
    bleu = [r["test"]["bleu"] for t in report["tuners"].values() for r in t["runs"]]
    mert = report["tuners"]["mert"]["summary"]["test_bleu"]
    low, high = ax.get_ylim()
    shown = bleu + [mert["mean"] - mert["std"], mert["mean"] + mert["std"]]
    assert low < min(shown) and max(shown) < high
    assert high - low <= 1.3 * (max(shown) - min(shown)) + 1.0 + 1e-9  # the tuners' range, not the untuned's
    untuned = report["baseline"]["test"]["bleu"]
    if low <= untuned <= high:
        assert f"untuned ({untuned:.2f})" in legend
    else:
        assert any(t.get_text().startswith(f"untuned: {untuned:.2f}") for t in ax.texts)

    single = one_seed(report)
    figure, info = bleu_by_tuner_figure(single)
    ax = figure.axes[0]
    assert info["title"] == "Test BLEU per tuner (one run each, seed 0)" == title_of(ax)
    legend = ax.get_legend()
    assert legend is None or "mean ± sd" not in [t.get_text() for t in legend.get_texts()]
    assert ax.get_xlabel() == "tuner" and not ax.containers  # no error bars


def test_search_graph_figure_is_layered_and_labelled(tiny):
    from minismt.decode import Decoder
    from minismt.io import read_lines
    from minismt.pipeline.report import FILLED, search_graph_figure
    folder, _, report = tiny
    png = (folder / "report" / "hypergraph.png").read_bytes()
    assert int.from_bytes(png[16:20], "big") == 990  # 3.3 inches at 300 dpi
    drawn = report["figures"]["hypergraph"]
    assert f"### {drawn['title']}\n" in markdown(report) and drawn["drawn_edges"] <= 16
    train = next(s for s in report["steps"] if s["step"] == "train")
    corpus = next(s for s in report["steps"] if s["step"] == "corpus")
    source = read_lines(Path(corpus["folder"]) / "test.src")[drawn["sentence_index"]]
    run = report["tuners"]["mert"]["runs"][0]
    decoder = Decoder(str(Path(train["folder"]) / "model"), weights=run["weights"], stack_size=10)
    result = decoder.decode(source)
    figure, info = search_graph_figure(result, decoder.full_weights(), "mert")
    assert figure.get_size_inches()[0] == pytest.approx(3.3)
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend[0] == f"best derivation: {info['best_derivation']}" and FILLED in legend[2]
    ax = figure.axes[0]
    n = len(result.source)
    nodes = [t for t in ax.texts if t.get_text() == "goal" or set(t.get_text()) <= {"■", "□"}]
    assert len(nodes) == info["drawn_nodes"]
    for node in nodes:  # the layer (y) of a state is the number of source words it has translated
        text = node.get_text()
        assert node.get_position()[1] == (n + 1 if text == "goal" else text.count(FILLED))
        assert text == "goal" or len(text) == n
    red = [p for p in ax.patches if p.get_edgecolor()[:3] == pytest.approx((0.839, 0.153, 0.157), abs=1e-3)]
    marked = [t for t in nodes if t.get_bbox_patch().get_edgecolor()[:3] == pytest.approx(
        (0.839, 0.153, 0.157), abs=1e-3)]
    assert len(red) == len(marked) - 1 >= 2  # the best derivation: a path from the empty coverage to the goal
    assert {t.get_text() for t in marked} >= {"□" * n, "goal"}


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
    folder, config, first = tiny
    before = len(log_lines(folder / "work"))
    report = Pipeline(config, progress=False, echo=False).run()
    assert all(step["cached"] for step in report["steps"]), report["steps"]
    new = log_lines(folder / "work")[before:]
    assert sum("cached, not redone" in line for line in new) == len(report["steps"])
    assert not any(": running" in line for line in new)  # no step ran again (timing it would be load-dependent)
    for tuner in ("mert", "apro"):
        assert report["tuners"][tuner]["summary"] == first["tuners"][tuner]["summary"]


def test_a_pipeline_on_a_dask_cluster_gives_the_same_results(tiny, tmp_path):
    """`minismt pipeline --dask-scheduler`: APRO's tuning and the test set decoded on a Dask LocalCluster of two
    workers, in a work folder of its own: the same tuned weights and test scores as the local run."""
    from distributed import LocalCluster
    folder, config, first = tiny
    text = tiny_text(tuners='["apro"]', params="", work=tmp_path / "work", report=tmp_path / "report")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        report = Pipeline(load_config(write_config(tmp_path, text)), progress=False, echo=False,
                          dask_scheduler=cluster.scheduler_address).run()
    assert not any(step["cached"] for step in report["steps"])

    def results(summary):
        return {name: value for name, value in summary.items() if name != "tune_seconds"}

    assert results(report["tuners"]["apro"]["summary"]) == results(first["tuners"]["apro"]["summary"])
    assert report["tuners"]["apro"]["summary"]["test_bleu"]["mean"] > 0


def test_a_changed_option_redoes_only_what_depends_on_it(tiny, tmp_path):
    folder, config, first = tiny
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
    folder, _, _ = tiny
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


def test_hiero_pipeline(tmp_path):
    """[train] model = "hiero": minismt train --hiero with grammars for the dev and test sets, tuning
    (MERT on k-best lists and hypergraph MERT on the chart decoder's forests) and the test set
    decoded with the tuned weights, all with minismt's chart decoder; the hypergraph figure draws a
    test sentence's forest, edges with two tails among them."""
    text = tiny_text(tuners='["mert", "hg-mert"]', seeds="1", iterations=2).replace(
        "[train]\nlm_order = 3", "[train]\nlm_order = 3\nmodel = \"hiero\"")
    config = load_config(write_config(tmp_path, text))
    assert config.train["model"] == "hiero"
    report = Pipeline(config, progress=False, echo=False).run()
    on_disk = json.loads((tmp_path / "report" / "report.json").read_text())
    model = next(tmp_path.glob("work/train-*/model"))
    manifest = json.loads((model / "manifest.json").read_text())
    assert manifest["model"] == "hiero" and sorted(manifest["grammars"]) == ["dev", "test"]
    untuned = on_disk["baseline"]["test"]["bleu"]
    for tuner in ("mert", "hg-mert"):
        run = on_disk["tuners"][tuner]["runs"][0]
        assert len(run["weights"]) == 9 and "TranslationModel1_0" in run["weights"]
        assert 0 < run["test"]["bleu"] <= 100
    assert max(on_disk["tuners"][t]["runs"][0]["test"]["bleu"] for t in ("mert", "hg-mert")) > untuned
    figure = on_disk["figures"]["hypergraph"]
    assert figure["file"] == "hypergraph.png" and (tmp_path / "report" / "hypergraph.png").stat().st_size > 0
    assert figure["title"].startswith("Hiero forest of") and figure["drawn_two_tail_edges"] >= 1
    assert figure["drawn_edges"] <= 30 and figure["best_derivation"] == figure["translation"]
    assert report is not None


def test_paired_bootstrap_keeps_sacrebleus_log_off_the_terminal(capfd):
    """sacrebleu logs a line per system and metric of its bootstrap at INFO through its own handler: the
    pipeline's table is what the user sees, so the test leaves the log at WARNING and restores it."""
    import logging
    import sys
    from minismt.pipeline.significance import paired_bootstrap
    refs = ["a b c d", "e f g h", "i j k l"]
    logger = logging.getLogger("sacrebleu")
    before, handler = logger.level, logging.StreamHandler(sys.stderr)
    logger.addHandler(handler)   # as in the pipeline, where sacrebleu's log reaches the terminal
    logger.setLevel(logging.INFO)
    try:
        paired_bootstrap([("x", ["a b c d", "e f g", "i j"]), ("y", ["a b", "e f g h", "i j k l"])], refs,
                         n_samples=20, seed=3, all_pairs=False)
        out, err = capfd.readouterr()
        assert out == err == "" and logger.level == logging.INFO
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)
