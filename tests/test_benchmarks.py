"""The benchmark runner works (at a small size) and prints one JSON object as its last line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import shared_path

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


def run_quick(name: str) -> dict:
    out = subprocess.run([sys.executable, str(RUN), name, "--quick"], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_kbest_memory_and_bleu_stats_quick():
    memory = run_quick("kbest-memory")
    assert memory["hypotheses"] == 1_000_000 and memory["peak_rss_gb"] < 4
    assert run_quick("bleu-stats")["hypotheses"] > 0


def test_results_are_assembled_from_saved_outputs(tmp_path):
    """RESULTS.md from saved benchmark outputs: machine, date, each benchmark's numbers and tables."""
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text("progress line\n" + json.dumps({"benchmark": "x-speed", "seconds": 1.5,
                                                      "nested": {"ratio": 2.0}}) + "\n")
    second.write_text(json.dumps({"benchmark": "y-quality", "table": "| a |\n|---|\n| 1 |", "runs": [1, 2]}))
    third = tmp_path / "c.json"  # a result file as benchmarks/results/ keeps them: indented JSON
    third.write_text(json.dumps({"benchmark": "z-study", "dev": {"bleu": 40.5}}, indent=1))
    results = tmp_path / "RESULTS.md"
    subprocess.run([sys.executable, str(RUN), "--assemble", str(first), str(second), str(third), "--results",
                    str(results)], check=True, capture_output=True)
    text = results.read_text()
    assert "## x-speed" in text and "| seconds | 1.5 |" in text and "| nested.ratio | 2.0 |" in text
    assert "## y-quality" in text and "| a |\n|---|\n| 1 |" in text and "runs" not in text.split("## y-quality")[1]
    assert "## z-study" in text and "| dev.bleu | 40.5 |" in text
    assert "cores" in text and "x-speed, y-quality, z-study" in text


def test_update_replaces_one_section_and_keeps_the_others(tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\nheader\n\n## a-speed\n\n| key | value |\n|---|---|\n| s | 1 |\n\n"
                       "## b-speed\n\n| key | value |\n|---|---|\n| s | 2 |\n")
    new_a, new_c = tmp_path / "a.json", tmp_path / "c.json"
    new_a.write_text(json.dumps({"benchmark": "a-speed", "s": 10}))
    new_c.write_text(json.dumps({"benchmark": "c-speed", "s": 3}))
    subprocess.run([sys.executable, str(RUN), "--update", str(new_a), str(new_c), "--results", str(results)],
                   check=True, capture_output=True)
    text = results.read_text()
    assert text.startswith("# Benchmark results\n\nheader\n\n## a-speed\n")
    assert "| s | 10 |" in text and "| s | 1 |" not in text
    assert text.index("## a-speed") < text.index("## b-speed") < text.index("## c-speed")
    assert "| s | 2 |" in text and text.endswith("| s | 3 |\n")


@pytest.mark.slow
def test_every_benchmark_runs_quick(tmp_path):
    out = subprocess.run([sys.executable, str(RUN), "all", "--quick", "--results", str(tmp_path / "R.md")],
                         capture_output=True, text=True, check=True).stdout
    summary = json.loads(out.strip().splitlines()[-1])
    assert len(summary["results"]) == len(subprocess.run(
        [sys.executable, str(RUN), "--list"], capture_output=True, text=True).stdout.split())


def test_tuning_quality_targets_from_hand_made_runs():
    """The tuning-quality targets: the worst first step, the largest fall below the best so far from
    iteration 2 on, APRO against PRO, and (full corpus only) the test BLEU against Moses."""
    sys.path.insert(0, str(RUN.parent))
    import tuner_quality

    def run(tuner, devs, test, change=0.5, p=0.01):
        return {"tuner": tuner, "final_test_bleu": test, "final_weights": [1.0], "final_test_bleu_change": change,
                "final_test_p_vs_untuned": p, "iterations": [{"iteration": t, "dev_bleu": d} for t, d in enumerate(devs)]}

    summary = tuner_quality.summarize([run("mert", [30.0, 29.6, 31.0, 29.9], 40.0),
                                       run("mert", [30.0, 28.0, 30.5, 30.4], 40.1),
                                       run("apro", [30.0, 30.2, 30.0, 30.3], 40.2, change=-0.3, p=0.2),
                                       run("pro", [30.0, 30.1, 30.2, 30.3], 40.4, change=-0.6, p=0.03)])
    assert summary["mert"]["first_step_dev_bleu_change_worst"] == -2.0
    assert summary["mert"]["largest_drop_below_best_from_iteration_2"] == 1.1  # 31.0 -> 29.9
    assert summary["apro"]["largest_drop_below_best_from_iteration_2"] == 0.2  # iteration 2: 30.2 -> 30.0
    goals = tuner_quality.targets(summary, full_corpus=True)
    assert not goals["mert: first step >= -0.5"]["met"] and goals["apro: first step >= -0.5"]["met"]
    assert not goals["mert: no drop > 1.0 from iteration 2"]["met"]
    assert goals["apro >= pro (dev_bleu_mean)"] == {"value": 0.0, "met": True}  # best dev 30.3 each
    assert goals["apro >= pro (test_bleu_mean)"] == {"value": -0.2, "met": False}
    significance = "test never significantly below the untuned weights (p < 0.05)"
    assert goals[f"mert: {significance}"]["met"]  # above the untuned weights, whatever its p-value
    assert goals[f"apro: {significance}"]["met"]  # below them, but not significantly
    assert goals[f"pro: {significance}"] == {"value": 1, "met": False}
    assert goals["mert test >= Moses MERT 39.99"] == {"value": 40.05, "met": True}
    assert goals["best tuner test >= Moses kbmira 40.36"] == {"value": 40.4, "met": True}
    assert not any("Moses" in key for key in tuner_quality.targets(summary, full_corpus=False))


def test_sparse_study_table_and_files_from_hand_made_runs(tmp_path):
    """The sparse study's table pairs each tuner's dense and sparse runs (features, non-zero sparse weights,
    dev and test BLEU, the sparse runs' difference) and its files are written where asked."""
    sys.path.insert(0, str(RUN.parent))
    import tuner_comparison

    def run(label, seed, devs, test, sparse=None):
        record = {"tuner": label, "seed": seed, "tuning_seconds": 10.0, "final_weights": [1.0] * 15,
                  "final_dev_bleu": max(devs), "final_test_bleu": test,
                  "iterations": [{"iteration": t, "dev_bleu": d} for t, d in enumerate(devs)]}
        if sparse is not None:
            record.update({"features": {"dense": 15, "sparse": sparse}, "final_sparse_nonzero": sparse // 2,
                           "tuned_sparse_nonzero_max": sparse})
        return record

    sparse = "sparse_features=rule-id,word-pair word_pair_vocabulary=500"
    runs = [run("pro", 0, [30.0, 31.0], 29.0), run("pro", 1, [30.0, 31.4], 29.4),
            run(f"pro {sparse}", 0, [30.0, 32.0], 30.0, 1000), run(f"pro {sparse}", 1, [30.0, 32.4], 30.0, 1200),
            run("apro", 0, [30.0, 30.5], 28.0), run(f"apro {sparse}", 0, [30.0, 30.0], 28.5, 900),
            run("apro C=0.01", 0, [30.0, 30.2], 28.1), run(f"apro C=0.01 {sparse}", 0, [30.0, 30.1], 28.9, 800)]
    result = {"corpus": "toy", "runs": runs, "quick": True, "iterations": 2, "kbest": 20, "stack": 20,
              "dev_sentences": 30, "test_sentences": 30}
    result["table"] = tuner_comparison.sparse_table(result)
    rows = result["table"].splitlines()
    assert rows[2] == "| pro | 2 | 15 + 0 |  | 31.20 (0.40) | 29.20 (0.20) | 10 |  |"
    assert rows[3] == "| pro + sparse | 2 | 15 + 1,100 | 550 (1,200) | 32.20 (0.40) | 30.00 (0.00) | 10 | +1.00 / +0.80 |"
    assert rows[5] == "| apro + sparse | 1 | 15 + 900 | 450 (900) | 30.00 (0.00) | 28.50 (0.00) | 10 | -0.50 / +0.50 |"
    assert rows[6].startswith("| apro C=0.01 | 1 | 15 + 0 |")  # its own group: the label without the sparse options
    assert rows[7] == ("| apro C=0.01 + sparse | 1 | 15 + 800 | 400 (800) | 30.10 (0.00) | 28.90 (0.00) | 10 | "
                       "-0.10 / +0.80 |")
    paths = tuner_comparison.write_sparse_study(result, str(tmp_path))
    assert sorted(paths) == ["json", "md", "png"] and all(Path(p).stat().st_size > 0 for p in paths.values())
    assert result["table"] in Path(paths["md"]).read_text() and paths["png"].endswith("toy_sparse.png")


def test_claims_table_gives_each_papers_claim_a_verdict_from_the_seed_spread():
    """A claim "A is at least B" is confirmed or contradicted only when the test BLEU difference exceeds the
    larger seed spread of the two tuners; rows whose tuners the result lacks are left out."""
    sys.path.insert(0, str(RUN.parent))
    import tuner_comparison

    def row(dev, test, spread):
        return {"dev_bleu_mean": dev, "test_bleu_mean": test, "test_bleu_spread": spread}

    summary = {"apro": row(40.0, 40.1, 0.0), "pro": row(39.9, 40.5, 0.05),
               "o-oro": row(40.0, 40.2, 0.3), "oro": row(40.1, 40.0, 0.1),
               "listmle-te": row(40.0, 41.0, 0.2), "listmle": row(40.0, 40.5, 0.3)}
    rows = tuner_comparison.claims({"summary": summary}).splitlines()
    by_pair = {r.split("(")[-1].split(")")[0]: r for r in rows[2:]}
    assert by_pair["apro vs pro"].endswith("| +0.10 | -0.40 | 0.05 | contradicted |")
    assert by_pair["o-oro vs oro"].endswith("| -0.10 | +0.20 | 0.30 | inside the seed spread |")
    assert by_pair["o-oro vs pro"].endswith("| +0.10 | -0.30 | 0.30 | inside the seed spread |")
    assert by_pair["listmle-te vs listmle"].endswith("| +0.00 | +0.50 | 0.30 | confirmed |")
    assert set(by_pair) == {"apro vs pro", "o-oro vs oro", "o-oro vs pro", "listmle-te vs listmle"}


def test_curves_scale_cuts_a_curve_far_above_the_others(tmp_path):
    """The panels start 2 BLEU below the lowest first mean; a curve more than OUTLIER_BLEU above every other
    (k-best MIRA learning the dev set with sparse features) is cut at 1 BLEU above the others, else the
    scale ends 0.5 above the highest mean; both figures are drawn."""
    sys.path.insert(0, str(RUN.parent))
    import tuner_comparison

    close = {"mert": [37.0, 40.7, 41.3], "hg-mert": [37.1, 40.8, 41.6]}
    assert tuner_comparison.y_scale(close) == (35.0, 41.6 + 0.5, False)
    bottom, top, clipped = tuner_comparison.y_scale({**close, "kbmira": [37.1, 44.1, 53.7]})
    assert (bottom, clipped) == (35.0, True) and top == pytest.approx(42.6)
    assert tuner_comparison.y_scale({**close, "kbmira": [37.1, 41.0, 44.5]})[2] is False   # 2.9 above: kept

    def runs(label, means):
        return [{"tuner": label, "seed": 0, "iterations": [{"dev_bleu": m, "test_bleu": m - 1} for m in means]}]

    for name, series in (("close", close), ("cut", {**close, "kbmira": [37.1, 44.1, 53.7]})):
        path = tmp_path / f"{name}.png"
        tuner_comparison.curves({"corpus": "toy", "runs": [r for k, v in series.items() for r in runs(k, v)],
                                 "summary": dict.fromkeys(series)}, str(path))
        assert path.stat().st_size > 0


def test_tuning_benchmark_resumes_from_its_partial_json(tmp_path):
    """Runs already in ``--partial-json`` (same tuner label and seed) are kept and not run again; the others
    are run and added to the file."""
    shared_path("corpora", "multi30k")  # the benchmark trains on Multi30k's first pairs
    sys.path.insert(0, str(RUN.parent))
    import tuner_quality

    earlier = {"tuner": "pro", "seed": 0, "tuning_seconds": 1.0, "final_weights": [1.0] * 15,
               "final_dev_bleu": 99.0, "final_test_bleu": 99.0,
               "iterations": [{"iteration": 0, "dev_bleu": 99.0, "test_bleu": None, "seconds": 1.0}]}
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps([earlier]))
    result = tuner_quality.run(quick=True, runs=[("pro", 0), ("mert", 0)], partial_json=str(partial),
                               test_every_iteration=False, max_train=300, quick_sentences=5, stack=5, kbest=5,
                               jobs=1)
    assert [(r["tuner"], r["seed"]) for r in result["runs"]] == [("pro", 0), ("mert", 0)]
    assert result["runs"][0] == earlier and result["runs"][1]["final_dev_bleu"] < 99.0
    assert 0.0 < result["runs"][1]["final_test_p_vs_untuned"] <= 1.0
    assert json.loads(partial.read_text()) == result["runs"]


def test_decode_speed_reads_first_scores_and_judges_its_targets(tmp_path):
    """decode-speed: each sentence's score is its first n-best line's (Moses2 repeats a sentence's 1-best), and
    the targets are 3x Moses2 on one thread, BLEU within 0.1 and no more sentences scored lower than higher."""
    sys.path.insert(0, str(RUN.parent))
    import decode_speed
    nbest = tmp_path / "n.best"
    nbest.write_text("0 ||| a b ||| F0= 1 ||| -3.5\n0 ||| a b ||| F0= 2 ||| -3.6\n1 ||| c ||| F0= 1 ||| -1.25\n")
    assert decode_speed._first_scores(nbest) == {0: -3.5, 1: -1.25}
    cell = {"minismt": {"bleu": 40.0}, "moses2": {"bleu": 40.05}, "ratio_to_moses2": 3.1}
    result = {"stack_100": {"threads_1": cell, "model_scores_vs_moses2": {
                  "ours_higher": 2, "ours_lower": 1, "no_more_search_errors": True}},
              "stack_200": {"threads_1": dict(cell, ratio_to_moses2=2.5, minismt={"bleu": 39.8})}}
    targets = decode_speed._targets(result)
    assert {name: target["met"] for name, target in targets.items()} == {
        "stack 100: >= 3x Moses2": True, "stack 100: BLEU within 0.1 of Moses2": True,
        "stack 100: no more search errors than Moses2": True,
        "stack 200: >= 3x Moses2": False, "stack 200: BLEU within 0.1 of Moses2": False}


def test_dtrain_large_reads_each_iteration_from_the_tuning_log(tmp_path):
    """dtrain-large: per iteration the training-set BLEU and seconds of the log's iteration line, the features
    kept by the epoch reported before it, and the peak memory of the run's processes."""
    sys.path.insert(0, str(RUN.parent))
    import dtrain_large
    lines = ["fixed features (their weights stay): x 1",
             "iteration 0: dtrain epoch 1: 10 shards, 3.0 pairs; features kept 70 of 90 non-zero (l2, select_k 70)",
             "iteration 0: decoded dev BLEU 30.10, length ratio 1.010; tuned BLEU on the k-best 31.00; 12.5 s",
             "iteration 1: dtrain epoch 2: 10 shards, 3.0 pairs; features kept 80 of 95 non-zero (l2, select_k 80)",
             "iteration 1: decoded dev BLEU 31.25 (+1.15), length ratio 0.990; tuned BLEU on the k-best 32.00; 7.0 s"]
    program = "import time\n" + "".join(f"print({line!r}, flush=True); time.sleep(0.6)\n" for line in lines)
    run = dtrain_large._tune([sys.executable, "-c", program], tmp_path / "err")
    assert [(i["iteration"], i["train_bleu"], i["seconds"], i["kept_features"], i["nonzero_features"])
            for i in run["iterations"]] == [(0, 30.10, 12.5, 70, 90), (1, 31.25, 7.0, 80, 95)]
    assert all(i["peak_mb"] > 0 for i in run["iterations"]) and "error" not in run
    failed = dtrain_large._tune([sys.executable, "-c", "import sys; sys.exit('no such model')"], tmp_path / "err")
    assert failed["iterations"] == [] and "no such model" in failed["error"]
