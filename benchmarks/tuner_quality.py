"""Tuner quality on Multi30k de-en: dev and test BLEU per iteration for MERT, PRO, APRO and KBMIRA.

Trains the model (as benchmarks/train_speed.py), then for each tuner runs
``TuningRun`` on the 1,014-sentence dev set (100-best distinct, merged) and
decodes test_2016 with the weights of every iteration. MERT, KBMIRA and PRO run with
three seeds, APRO twice (it must give identical weights). Moses on the same data: MERT dev
40.95 after 6 iterations, test_2016 39.99; kbmira test_2016 40.36; untuned 39.93. Quick
mode: 200 dev / 200 test sentences, 2 iterations, one run each.

``tuner-quality-hard`` and ``tuner-quality-hard-fr-en`` (benchmarks/run.py) are the hard,
small-data settings of the tuning-quality issue: the model trained on the first 3,000 pairs
only (9.5% of the de-en and 5.0% of the fr-en dev tokens unknown), 4 iterations, three seeds.
``tuner-quality-long`` is the hardest: the same 3,000 pairs, and dev and test sentences of 38 words
(Multi30k's val and test_2016 joined three lines at a time: 338 and 333 lines), where the k-best
lists of the start say least about the search far from it; without the step search
(``tuner-quality-long-whole-steps``, the loop as before: whole steps, weights decoded at the tuner's
scale) MERT fell from 31.16 to 14.47 and 1.29 there (seeds 1 and 3). ``tuner-quality-longer`` (2,000 pairs,
five lines joined: 202 dev sentences of 63 words) is where k-best MIRA falls as on the held-out pair
without them (``-whole-steps``: 30.05 -> 5.85 in its first step, seed 2; ``minismt tune`` at stack 200, seed
1: its first weights put the LM at -0.361, 30.32 -> 2.54) and MERT's first step to 1.81, 0.71 and 23.33.
``first_step_dev_bleu_change_worst`` is what the first tuning step does to the decoded dev
BLEU (a collapse is a large negative); ``targets`` checks each tuning-quality target
(:func:`targets`) and says whether it is met.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

MULTI30K = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "multi30k"
MOSES_MERT_TEST, MOSES_KBMIRA_TEST, MOSES_UNTUNED_TEST = 39.99, 40.36, 39.93
"""Moses on the same data, test_2016 (../shared/fixtures/moses/m30k/README.md)."""


SEED_RUNS = [("mert", 1), ("mert", 2), ("mert", 3), ("kbmira", 1), ("kbmira", 2), ("kbmira", 3), ("apro", 1),
             ("pro", 1), ("pro", 2), ("pro", 3)]
"""``runs="seeds"``: three seeds of every tuner that samples, one run of deterministic APRO."""
EVERY_TUNER_RUNS = SEED_RUNS + [("o-oro", 1), ("listmle-te", 1), ("structsvm", 1)]
"""``runs="every-tuner"``: the seeds, and one run of the online, listwise and structured tuners."""
SAMPLING_TUNERS = ("mert", "kbmira", "pro", "oro", "o-oro", "listnet", "listnet-te", "listmle", "listmle-top5",
                   "listmle-te", "nbl-bo", "mira")
"""The tuners whose runs depend on the seed (random starts, sampled pairs, shuffled instances or mini-batches)."""
ALL_TUNER_RUNS = ([(tuner, seed) for tuner in SAMPLING_TUNERS for seed in (1, 2, 3)]
                  + [("apro", 1), ("structsvm", 1), ("minrisk", 1), ("rampion", 1), ("hg-minrisk", 1)])
"""``runs="all-tuners"``: every tuner that fits on k-best lists or decodes its own batches (the tuners the step
search serves), three seeds each, one run of the deterministic ones (APRO, StructSVM, minimum risk, RAMPION:
their seed is unused), and forest minimum risk on the whole search graphs (on graphs pruned to 50 edges per
reference word its second step on the long Hiero setting fell 0.92 below the start). The other forest tuners
(hg-mert and the BO family on forests) were not rerun: the step search and the decoding scale leave them as
they were."""
PHRASE_SPARSE = {"sparse_features": "rule-id,word-pair", "word_pair_vocabulary": 500}
"""The phrase-based model's sparse features at the APRO paper's scale (the sparse study's)."""
HIERO_SPARSE = {"sparse_features": "rule-id,rule-shape,source-bigram,target-bigram"}
"""A Hiero model's sparse rule features (the BO paper's large-scale set, as cdec computes it)."""


def forest_learning_runs(sparse: dict | None = None) -> list[tuple]:
    """``runs="forest-learning"`` (``"forest-learning-sparse"`` with the model's sparse features): issue 37's
    tuners beside MERT (3 seeds, the reference), each tuner's decoder options ``sparse`` added: minimum risk on
    k-best lists and on whole forests (deterministic: one run each), online MIRA with hope and fear from the
    k-best lists and from the forests (3 seeds each: the shards' order)."""
    extra = dict(sparse or {})
    return ([("mert", seed, extra) for seed in (1, 2, 3)] + [("minrisk", 1, extra), ("hg-minrisk", 1, extra)]
            + [("mira", seed, extra) for seed in (1, 2, 3)]
            + [("mira", seed, {"select": "forest", **extra}) for seed in (1, 2, 3)])


DEFAULT_RUNS = SEED_RUNS + [("apro", 2)]
"""The seeds, and APRO once more: its two runs must give identical weights."""
QUICK_RUNS = [("mert", 0), ("kbmira", 0), ("apro", 0), ("pro", 0)]
"""Quick mode: one run of each."""


DECODER_PARAMS = ("sparse_features", "word_pair_vocabulary")
"""Run parameters that are the dev and test decoder's (:class:`~minismt.decode.DecoderSettings`), not the tuner's."""


def run(quick: bool = False, iterations: int = 6, stack: int = 100, jobs: int = 2,
        corpus: str = "multi30k-de-en", runs=None, partial_json: str | None = None,
        test_every_iteration: bool = True, max_train: int | None = None, kbest: int = 100,
        quick_sentences: int = 200, model_kind: str = "phrase", test_2017: bool = False, join: int = 1,
        step_search: str | None = None, decode_norm: str | None = None, accept: str = "decoded") -> dict:
    """Train on ``corpus``, tune with each ``(tuner, seed[, params])`` of ``runs``, decode test with the weights
    of every iteration (or, without ``test_every_iteration``, only with the final ones).

    ``params`` are the tuner's, except ``accumulate`` (merge | aggregate | none), the tuning loop's, and
    :data:`DECODER_PARAMS` (sparse features and their word-pair vocabulary), the decoder's: a run with
    sparse features also records its feature space's size and its non-zero sparse weights.
    ``partial_json``: a file rewritten after every tuning run with the results so far; the runs it already
    holds (same tuner label and seed) are not run again, so a killed benchmark resumes.
    ``max_train``: train on the first N pairs only (the hard, small-data setting: more unknown words).
    ``quick_sentences``: dev and test sentences in quick mode.
    ``model_kind``: "phrase" or "hiero" (``minismt train --hiero`` on the HMM alignment, as Moses' Hiero
    anchor, with grammars for dev, test_2016 and test_2017; decoded by minismt's chart decoder).
    ``test_2017``: also decode test_2017 with every run's final weights, and both test sets untuned.
    ``join``: dev and test sentences are ``join`` consecutive lines joined (long sentences; see :func:`prepare`).
    ``step_search``, ``decode_norm``, ``accept``: the tuning loop's (:class:`~tuners.loop.TuningRun`; None: its
    defaults; "none", "none" and "any" is the loop as it was before them).
    """
    from minismt.decode import DecoderSettings
    from minismt.io import read_lines
    from tuners.devdecoder import MinismtDevDecoder
    from tuners.loop import TuningRun
    if quick:
        iterations = 2
    with tempfile.TemporaryDirectory() as tmp:
        data, model = prepare(corpus, Path(tmp), max_train, model_kind, quick_sentences if quick else None, join)
        dev_src, dev_ref = read_lines(data / "dev.src"), read_lines(data / "dev.tgt")
        known = {w for line in read_lines(data / "train.src") for w in line.split()}
        dev_tokens = [w for line in dev_src for w in line.split()]
        unknown = round(sum(w not in known for w in dev_tokens) / max(len(dev_tokens), 1), 3)
        test_src, test_ref = read_lines(data / "test.src"), read_lines(data / "test.tgt")
        if quick:
            n = quick_sentences
            dev_src, dev_ref, test_src, test_ref = dev_src[:n], dev_ref[:n], test_src[:n], test_ref[:n]
        tests = {"test": (test_src, test_ref)}
        if test_2017:
            tests["test2017"] = (read_lines(data / "test2017.src"), read_lines(data / "test2017.tgt"))
            if quick:
                tests["test2017"] = tuple(side[:quick_sentences] for side in tests["test2017"])
        untuned = None
        untuned_output = None  # the untuned weights' test 1-best, against which each run's final output is tested
        if runs is None or runs == "seeds":
            runs = QUICK_RUNS if quick else DEFAULT_RUNS if runs is None else SEED_RUNS
        elif runs == "every-tuner":
            runs = QUICK_RUNS if quick else EVERY_TUNER_RUNS
        elif runs == "all-tuners":
            runs = QUICK_RUNS if quick else ALL_TUNER_RUNS
        elif runs in ("forest-learning", "forest-learning-sparse"):
            sparse = (HIERO_SPARSE if model_kind == "hiero" else PHRASE_SPARSE) if runs.endswith("sparse") else {}
            runs = forest_learning_runs(sparse)[:4] if quick else forest_learning_runs(sparse)
        results = _earlier_runs(partial_json)
        done = {(r["tuner"], r["seed"]) for r in results}
        for spec in runs:
            tuner, seed = spec[0], spec[1]
            params = dict(spec[2]) if len(spec) > 2 else {}
            label = tuner + "".join(f" {k}={v}" for k, v in sorted(params.items()))
            if (label, seed) in done:
                continue
            accumulate = params.pop("accumulate", None)  # the loop's options, not the tuner's
            forest_prune = params.pop("forest_prune", None)
            settings = DecoderSettings(stack_size=stack, kbest=kbest, jobs=jobs,
                                       **{k: params.pop(k) for k in DECODER_PARAMS if k in params})
            decoder = MinismtDevDecoder(str(model), dev_src, settings)
            if test_2017 and untuned is None:
                untuned = {name: _test_bleu(model, decoder.default_weights, decoder.space, *pair, settings)[0]
                           for name, pair in tests.items()}
            if untuned_output is None:
                untuned_output = _test_decode(model, decoder.default_weights, decoder.space, test_src, settings)
                untuned_bleu = _bleu_and_ratio(untuned_output, test_ref)[0]
            run_dir = Path(tmp) / f"run-{len(results)}"
            started = time.perf_counter()
            tuning = TuningRun(decoder, [[r] for r in dev_ref], tuner, run_dir, max_iter=iterations,
                               seed=seed, tuner_params=params, accumulate=accumulate, step_search=step_search,
                               decode_norm=decode_norm, forest_prune=forest_prune, accept=accept)
            final = tuning.run(decoder.default_weights)
            seconds = time.perf_counter() - started
            decoder.close()
            per_iteration = []
            test_output = {tuple(float(x) for x in decoder.default_weights): untuned_output}  # decoded once
            test_bleu = {weights: _bleu_and_ratio(output, test_ref) for weights, output in test_output.items()}
            for record in tuning.history:
                weights = tuple(record.weights)
                if test_every_iteration and weights not in test_bleu:
                    test_output[weights] = _test_decode(model, weights, decoder.space, test_src, settings)
                    test_bleu[weights] = _bleu_and_ratio(test_output[weights], test_ref)
                per_iteration.append({"iteration": record.iteration, "dev_bleu": round(100 * record.dev_bleu, 2),
                                      "test_bleu": test_bleu.get(weights, (None,))[0], "seconds": record.seconds,
                                      "dev_length_ratio": record.dev_length_ratio,
                                      "tuned_kbest_bleu": round(100 * record.tuned_bleu, 2),
                                      "tuned_length_ratio": record.tuned_length_ratio, "step": record.step,
                                      "step_bleu": None if record.step is None else round(100 * record.step_bleu, 2),
                                      "full_step_bleu": None if record.step is None
                                      else round(100 * record.full_step_bleu, 2),
                                      "rejected_dev_bleu": [round(100 * b, 4) for b in record.rejected]})
            final_key = tuple(float(x) for x in final)
            if final_key not in test_output:
                test_output[final_key] = _test_decode(model, final_key, decoder.space, test_src, settings)
                test_bleu[final_key] = _bleu_and_ratio(test_output[final_key], test_ref)
            if test_2017:
                result_2017 = _test_bleu(model, final_key, decoder.space, *tests["test2017"], settings)[0]
            best_dev = max(r.dev_bleu for r in tuning.history)
            result = {"tuner": label, "seed": seed, "tuning_seconds": round(seconds, 1),
                      "iterations": per_iteration, "final_weights": list(final_key),
                      "final_dev_bleu": round(100 * best_dev, 2), "final_test_bleu": test_bleu[final_key][0],
                      "final_test_length_ratio": test_bleu[final_key][1],
                      "final_test_bleu_change": round(test_bleu[final_key][0] - untuned_bleu, 2),
                      "final_test_p_vs_untuned": _p_value(untuned_output, test_output[final_key], test_ref)}
            if test_2017:
                result["final_test_2017_bleu"] = result_2017
            if settings.sparse_features:
                result.update(_sparse_record(decoder.space, final, tuning, run_dir))
            results.append(result)
            if partial_json:
                temporary = f"{partial_json}.tmp"
                with open(temporary, "w", encoding="utf-8") as out:
                    json.dump(results, out)
                os.replace(temporary, partial_json)
    summary = summarize(results)
    goals = targets(summary, full_corpus=(max_train is None and not quick and model_kind == "phrase"
                                          and corpus == "multi30k-de-en" and join == 1))  # Moses' numbers
    extra = {"untuned_test_bleu": untuned} if untuned is not None else {}
    if untuned_output is not None:
        extra["untuned_test_bleu_of_the_start"] = untuned_bleu
    return {"corpus": corpus, "model": model_kind, **extra, "iteration_table": iteration_table(results), "train_pairs": max_train or "all", "unknown_dev_tokens": unknown,
            "lines_joined": join, "step_search": step_search or "forest", "decode_norm": decode_norm or "l1",
            "accept": accept,
            "dev_sentences": len(dev_src), "test_sentences": len(test_src), "iterations": iterations,
            "stack": stack, "summary": summary, "targets": goals,
            "targets_met": f"{sum(g['met'] for g in goals.values())} of {len(goals)}", "runs": results,
            "moses": {"mert_test_2016": MOSES_MERT_TEST, "kbmira_test_2016": MOSES_KBMIRA_TEST,
                      "untuned_test_2016": MOSES_UNTUNED_TEST}}


def iteration_table(results: list[dict]) -> str:
    """Markdown: per run, the decoded dev BLEU of every iteration (with the step search, the part of the tuner's
    step each took), its final test BLEU and the tuning time."""
    width = max((len(r["iterations"]) for r in results), default=0)
    stepped = any(i.get("step") is not None for r in results for i in r["iterations"])
    lines = ["| tuner | seed | " + " | ".join(f"dev {i}" + (" (step)" if i and stepped else "") for i in range(width))
             + " | test | seconds |",
             "|---|---|" + "---|" * width + "---|---|"]
    for r in results:
        cells = []
        for i, record in enumerate(r["iterations"]):
            step = r["iterations"][i - 1].get("step") if i else None
            cells.append(f"{record['dev_bleu']:.2f}" + (f" ({step:.2f})" if step is not None else ""))
        cells += [""] * (width - len(cells))
        lines.append(f"| {r['tuner']} | {r['seed']} | " + " | ".join(cells)
                     + f" | {r['final_test_bleu']:.2f} | {r['tuning_seconds']:.0f} |")
    return "\n".join(lines)


def _earlier_runs(partial_json: str | None) -> list[dict]:
    """The runs a ``partial_json`` file of an earlier, killed run of the same benchmark holds ([] if none)."""
    if not partial_json or not os.path.exists(partial_json):
        return []
    with open(partial_json, encoding="utf-8") as handle:
        return json.load(handle)


def prepare(corpus: str, folder: Path, max_train: int | None = None,
            model_kind: str = "phrase", max_eval: int | None = None, join: int = 1) -> tuple[Path, Path]:
    """Fetch ``corpus`` (from ../shared; its first ``max_train`` training pairs, the first ``max_eval``
    dev and test sentences) into ``folder/data`` and train a 4-gram model in ``folder/model``
    (``model_kind`` "hiero": a Hiero model on the HMM alignment with grammars for dev, test and test2017).
    ``join`` > 1: each dev and test sentence (and reference) is ``join`` consecutive lines joined by a space,
    an incomplete last group left out (Multi30k's 1,014 val lines give 338 dev sentences, test_2016's 1,000
    lines 333)."""
    from corpora.fetch import fetch
    from minismt.io import read_lines
    from minismt.train import Trainer, TrainingConfig
    data, model = folder / "data", folder / "model"
    fetch(corpus, data, from_dir=MULTI30K, progress=False, max_train=max_train)
    if join > 1:
        for name in ("dev", "test", "test2017"):
            for side in ("src", "tgt"):
                path = data / f"{name}.{side}"
                lines = read_lines(path)
                joined = [" ".join(lines[i:i + join]) for i in range(0, len(lines) - join + 1, join)]
                path.write_text("".join(line + "\n" for line in joined), encoding="utf-8")
    if max_eval is not None:
        for name in ("dev", "test", "test2017"):
            for side in ("src", "tgt"):
                path = data / f"{name}.{side}"
                path.write_text("".join(line + "\n" for line in read_lines(path)[:max_eval]), encoding="utf-8")
    hiero = {"model": "hiero", "aligner": "hmm",
             "grammar_inputs": tuple(str(data / f"{name}.src") for name in ("dev", "test", "test2017"))}
    Trainer(TrainingConfig(src=str(data / "train.src"), tgt=str(data / "train.tgt"), out=str(model),
                           lm_order=4, progress=False, **(hiero if model_kind == "hiero" else {}))).run()
    return data, model


def summarize(results: list[dict]) -> dict:
    """Per tuner: runs, dev and test BLEU mean and spread (test std too), identical weights over runs."""
    summary = {}
    for name in sorted({r["tuner"] for r in results}):
        mine = [r for r in results if r["tuner"] == name]
        tests = [r["final_test_bleu"] for r in mine]
        devs = [max(i["dev_bleu"] for i in r["iterations"]) for r in mine]  # the returned weights' dev BLEU
        summary[name] = {"runs": len(mine), "dev_bleu_mean": round(statistics.mean(devs), 2),
                         "dev_bleu_spread": round(max(devs) - min(devs), 2),
                         "test_bleu_mean": round(statistics.mean(tests), 2),
                         "test_bleu_std": round(statistics.pstdev(tests), 2),
                         "test_bleu_spread": round(max(tests) - min(tests), 2),
                         "identical_weights_over_runs": all(
                             (r["final_weights"], r.get("final_sparse_weights_sha256"))
                             == (mine[0]["final_weights"], mine[0].get("final_sparse_weights_sha256"))
                             for r in mine)}
        ratios = [r["final_test_length_ratio"] for r in mine if "final_test_length_ratio" in r]
        if len(ratios) == len(mine):  # output / reference words on test: below 1 the brevity penalty applies
            summary[name]["test_length_ratio_mean"] = round(statistics.mean(ratios), 4)
        steps = [r["iterations"][1]["dev_bleu"] - r["iterations"][0]["dev_bleu"] for r in mine
                 if len(r["iterations"]) > 1]
        if steps:  # the first tuning step's effect on the decoded dev BLEU (a collapse is negative)
            summary[name]["first_step_dev_bleu_change_mean"] = round(statistics.mean(steps), 2)
            summary[name]["first_step_dev_bleu_change_worst"] = round(min(steps), 2)
        tested = [r for r in mine if "final_test_p_vs_untuned" in r]
        if tested:  # a drop on test counts when it is significant (paired bootstrap against the untuned weights)
            summary[name]["significant_test_drops"] = sum(r["final_test_bleu_change"] < 0
                                                          and r["final_test_p_vs_untuned"] < SIGNIFICANCE
                                                          for r in tested)
        summary[name]["largest_fall_below_start"] = round(max(  # the no-fall goal: every decoded iteration
            r["iterations"][0]["dev_bleu"] - min(i["dev_bleu"] for i in r["iterations"]) for r in mine), 2)
        summary[name]["largest_drop_below_best_from_iteration_2"] = round(max(
            _drops_below_best(r["iterations"], FIRST_STABLE_ITERATION) for r in mine), 2)
    return summary


FIRST_STABLE_ITERATION = 2
"""From this iteration on, no decode may fall more than ``MAX_DROP`` BLEU below the best before it."""
MAX_FIRST_STEP_LOSS = 0.5
MAX_DROP = 1.0


def _drops_below_best(iterations: list[dict], first: int) -> float:
    """The largest ``best dev BLEU so far - dev BLEU`` over the iterations from ``first`` on (0 if none)."""
    best, drop = float("-inf"), 0.0
    for record in iterations:
        if record["iteration"] >= first:
            drop = max(drop, best - record["dev_bleu"])
        best = max(best, record["dev_bleu"])
    return drop


def targets(summary: dict, full_corpus: bool) -> dict:
    """The tuning-quality targets, each with the measured value and whether it is met.

    Every tuner: its worst first step loses at most ``MAX_FIRST_STEP_LOSS`` decoded dev BLEU, no decoded
    iteration falls more than ``MAX_FIRST_STEP_LOSS`` below the start, no run's test BLEU is below the untuned
    weights' with a paired-bootstrap p-value under ``SIGNIFICANCE``, and no
    iteration from ``FIRST_STABLE_ITERATION`` on falls more than ``MAX_DROP`` below the best before it;
    APRO at least PRO (dev and test means); on the full corpus, MERT's test BLEU at least Moses MERT's
    and the best tuner's at least Moses kbmira's.
    """
    out = {}
    for name, row in summary.items():
        if "first_step_dev_bleu_change_worst" in row:
            worst = row["first_step_dev_bleu_change_worst"]
            out[f"{name}: first step >= -{MAX_FIRST_STEP_LOSS}"] = {"value": worst, "met": worst >= -MAX_FIRST_STEP_LOSS}
        if "largest_fall_below_start" in row:
            fall = row["largest_fall_below_start"]
            out[f"{name}: never below the start - {MAX_FIRST_STEP_LOSS}"] = {"value": fall,
                                                                          "met": fall <= MAX_FIRST_STEP_LOSS}
        if "significant_test_drops" in row:
            drops = row["significant_test_drops"]
            out[f"{name}: test never significantly below the untuned weights (p < {SIGNIFICANCE})"] = {
                "value": drops, "met": drops == 0}
        drop = row["largest_drop_below_best_from_iteration_2"]
        out[f"{name}: no drop > {MAX_DROP} from iteration {FIRST_STABLE_ITERATION}"] = {"value": drop,
                                                                                       "met": drop <= MAX_DROP}
    apro = [row for name, row in summary.items() if name.split()[0] == "apro"]
    pro = [row for name, row in summary.items() if name.split()[0] == "pro"]
    if apro and pro:
        for what in ("dev_bleu_mean", "test_bleu_mean"):
            a, p = apro[0][what], max(row[what] for row in pro)
            out[f"apro >= pro ({what})"] = {"value": round(a - p, 2), "met": a >= p}
    if full_corpus:
        mert = [row["test_bleu_mean"] for name, row in summary.items() if name.split()[0] == "mert"]
        if mert:
            out[f"mert test >= Moses MERT {MOSES_MERT_TEST}"] = {"value": mert[0], "met": mert[0] >= MOSES_MERT_TEST}
        best = max(row["test_bleu_mean"] for row in summary.values())
        out[f"best tuner test >= Moses kbmira {MOSES_KBMIRA_TEST}"] = {"value": best, "met": best >= MOSES_KBMIRA_TEST}
    return out


def _test_bleu(model, weights, space, test_src, test_ref, settings) -> tuple[float, float]:
    """Test-set BLEU (sacrebleu-equal, tokenised lowercased references) of the weights' 1-best, decoded with the
    dev decoder's search and sparse features (1-best only), and its length ratio (output / reference words:
    below 1 the brevity penalty ``exp(1 - 1 / ratio)`` scales the BLEU down)."""
    return _bleu_and_ratio(_test_decode(model, weights, space, test_src, settings), test_ref)


def _bleu_and_ratio(output: list[str], test_ref: list[str]) -> tuple[float, float]:
    """BLEU (sacrebleu-equal) of ``output`` against one reference each, and its output / reference length ratio."""
    from minismt.metrics import BleuReferences, corpus_bleu_from_stats, length_ratio
    stats = BleuReferences([[r] for r in test_ref]).stats(np.arange(len(output)), output).sum(axis=0, dtype=np.int64)
    return round(100 * corpus_bleu_from_stats(stats), 2), round(length_ratio(stats), 4)


BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED = 1000, 12345
"""The paired bootstrap of a run's final test output against the untuned weights' (sacrebleu's, as
``minismt eval --significance``)."""
SIGNIFICANCE = 0.05
"""A tuner's test BLEU *drops* only when it is below the untuned weights' with a p-value under this."""


def _p_value(untuned_output: list[str], output: list[str], test_ref: list[str]) -> float:
    """The paired-bootstrap p-value of the difference between ``output``'s test BLEU and the untuned weights'
    (Koehn 2004, as sacrebleu computes it: the chance that the difference is due to the test set's sample)."""
    from minismt.pipeline.significance import paired_bootstrap
    result = paired_bootstrap([("untuned", untuned_output), ("tuned", output)], test_ref,
                              n_samples=BOOTSTRAP_SAMPLES, seed=BOOTSTRAP_SEED, metrics=("BLEU",), all_pairs=False)
    return round(float(result["pairs"][0]["p_value"]), 4)


def _test_decode(model, weights, space, test_src, settings) -> list[str]:
    """The weights' test-set 1-best, decoded with the dev decoder's search and sparse features."""
    from dataclasses import replace
    from minismt.manifest import load_manifest
    from minismt.parallel import DecodeJob, decode_corpus, named_weights
    grammar = None
    if load_manifest(str(model)).get("model") == "hiero":
        from minismt.decode.hiero import grammar_for
        grammar = grammar_for(str(model), test_src)
    job = DecodeJob(str(model), replace(settings, kbest=0), *named_weights(space, np.array(weights)),
                    grammar=grammar)
    return [o.best for o in decode_corpus(job, test_src, jobs=settings.jobs)]


def _sparse_record(space, final: np.ndarray, tuning, run_dir: Path) -> dict:
    """What a run with sparse features adds to its record: the final feature space's size, the returned weights'
    non-zero sparse weights (their count, the largest and a digest standing for them: a tuned space holds
    thousands of names) and the most non-zero sparse weights of any weights the tuner returned (every
    iteration's; the returned weights may be the untuned ones, whose sparse weights are all 0)."""
    import hashlib
    n = space.n_dense
    with open(run_dir / "checkpoint.json", encoding="utf-8") as handle:
        state = json.load(handle)
    last = state.get("tuner_weights") or state["weights"]  # the tuner's last output, which no decode scored
    tuned = [record.weights for record in tuning.history[1:]] + [last]
    nonzero = np.flatnonzero(final[n:]) + n
    largest = sorted(nonzero.tolist(), key=lambda i: -abs(final[i]))[:10]
    return {"features": {"dense": n, "sparse": len(space) - n},
            "final_weights": [float(x) for x in final[:n]],
            "final_sparse_weights_sha256": hashlib.sha256(json.dumps(
                sorted((space.name(i), float(final[i])) for i in nonzero.tolist())).encode()).hexdigest(),
            "final_sparse_nonzero": int(nonzero.size),
            "largest_final_sparse_weights": {space.name(i): round(float(final[i]), 6) for i in largest},
            "tuned_sparse_nonzero_max": max(int(np.count_nonzero(np.asarray(w)[n:])) for w in tuned)}


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="multi30k-de-en")
    parser.add_argument("--runs", default=None, help="comma-separated tuner:seed items (default: the issue's set)")
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--partial-json", default=None,
                        help="write the runs so far here after every run; runs it holds are not run again "
                             "(a killed benchmark resumes: give the same options)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--final-test-only", action="store_true", help="decode test with the final weights only")
    args = parser.parse_args()
    chosen = None if args.runs is None else [(item.split(":")[0], int(item.split(":")[1]))
                                             for item in args.runs.split(",")]
    print(json.dumps(run(quick=args.quick, iterations=args.iterations, corpus=args.corpus, runs=chosen,
                         partial_json=args.partial_json, test_every_iteration=not args.final_test_only)))
