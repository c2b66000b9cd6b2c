"""Hiero against phrase-based on Multi30k de-en: test_2016 and test_2017 BLEU, untuned and tuned.

Two systems on the same corpus, each tuned with MERT on the full 1,014-sentence dev set, seeds 0,
1 and 2, 6 iterations, 100-best (benchmarks/tuner_quality.py): minismt's phrase-based model and its
Hiero model (``minismt train --hiero`` on the HMM alignment the Moses Hiero anchor used, decoded by
minismt's chart decoder with its defaults: pop limit 200, rule spans up to 10 words).  Each run's
returned weights decode test_2016 and test_2017; both systems are also decoded untuned.

The anchor (../shared/fixtures/moses/m30k-hiero): Moses' chart decoder on Moses' rules from the
same alignment, test_2016: untuned 38.97 (pop limit 1000) and 39.11 (200), MERT on 300 dev
sentences 40.51 (1000) and 40.45 (200).  The goal: Hiero at least the phrase-based system and at
least Moses' chart decoder, untuned and tuned.  Quick mode: 3,000 training pairs, 200 dev and test
sentences, 2 iterations, seed 0.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tuner_quality  # noqa: E402

MOSES_HIERO = {"untuned_test_2016_pop1000": 38.97, "untuned_test_2016_pop200": 39.11,
               "mert_test_2016_pop1000": 40.51, "mert_test_2016_pop200": 40.45}
"""Moses' chart decoder on the same data (../shared/fixtures/moses/m30k-hiero/README.md)."""
SEEDS = [0, 1, 2]


def _system(result: dict) -> dict:
    """One system's untuned and tuned (mean and per seed) test BLEU and best dev BLEU."""
    runs = result["runs"]
    return {"untuned": {"test_2016": result["untuned_test_bleu"]["test"],
                        "test_2017": result["untuned_test_bleu"]["test2017"]},
            "mert": {"test_2016_mean": round(statistics.mean(r["final_test_bleu"] for r in runs), 2),
                     "test_2017_mean": round(statistics.mean(r["final_test_2017_bleu"] for r in runs), 2),
                     "dev_mean": round(statistics.mean(r["final_dev_bleu"] for r in runs), 2),
                     "test_2016": [r["final_test_bleu"] for r in runs],
                     "test_2017": [r["final_test_2017_bleu"] for r in runs],
                     "dev_per_iteration": [[i["dev_bleu"] for i in r["iterations"]] for r in runs],
                     "tuning_seconds": [r["tuning_seconds"] for r in runs]}}


def goals(hiero: dict, phrase: dict) -> dict:
    """Each goal of the Hiero decoder issue with its value and whether it is met."""
    out = {}
    for test in ("test_2016", "test_2017"):
        untuned = round(hiero["untuned"][test] - phrase["untuned"][test], 2)
        tuned = round(hiero["mert"][f"{test}_mean"] - phrase["mert"][f"{test}_mean"], 2)
        out[f"hiero - phrase-based, untuned {test}"] = {"value": untuned, "met": untuned >= 0}
        out[f"hiero - phrase-based, MERT {test}"] = {"value": tuned, "met": tuned >= 0}
    untuned, tuned = hiero["untuned"]["test_2016"], hiero["mert"]["test_2016_mean"]
    out["hiero untuned test_2016 >= Moses chart 38.97"] = {"value": untuned, "met": untuned >= 38.97}
    out["hiero MERT test_2016 >= Moses chart 40.51"] = {"value": tuned, "met": tuned >= 40.51}
    return out


def run(quick: bool = False, jobs: int = 2) -> dict:
    runs = [("mert", seed) for seed in ([0] if quick else SEEDS)]
    options = dict(quick=quick, runs=runs, test_every_iteration=False, test_2017=True, jobs=jobs,
                   max_train=3000 if quick else None)
    systems = {kind: tuner_quality.run(model_kind=kind, **options) for kind in ("hiero", "phrase")}
    hiero, phrase = _system(systems["hiero"]), _system(systems["phrase"])
    result = {"dev_sentences": systems["hiero"]["dev_sentences"], "iterations": systems["hiero"]["iterations"],
              "seeds": [seed for _, seed in runs], "hiero": hiero, "phrase": phrase, "moses_chart": MOSES_HIERO}
    if not quick:
        result["goals"] = goals(hiero, phrase)
        result["goals_met"] = f"{sum(g['met'] for g in result['goals'].values())} of {len(result['goals'])}"
    return result
