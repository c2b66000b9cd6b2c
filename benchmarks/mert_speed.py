"""Speed of MERT (tuners.mert): Moses' scorer100 run and a larger synthetic k-best list.

scorer100 (../shared/fixtures/moses, 100 sentences x 100 hypotheses x 15 dense
features): MERT from line 1 of init.opt with 20 random restarts within its
min/max lines, as Moses' ``mert -d 15 -n 20`` was run there; the baseline is
that run's wall time (2.05 s) and printed BLEU (0.0980919) from the fixture's
README (Moses cannot be run here). The kernels are compiled on the 3-sentence
example/ first, outside the timing.

Synthetic: 1,000 sentences x 100 hypotheses x 15 dense features (quick: 200
sentences, 5 restarts), features a noisy linear image of a hidden quality that
also sets the BLEU statistics, so the search has something to find.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from minismt.features import FeatureSpace
from minismt.kbest import KBest
from plugins.moses.mertfiles import read_extractor_files, read_init_opt
from tuners.mert import MERT

MOSES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "moses"
MOSES_SECONDS = 2.05
MOSES_BLEU = 0.0980919


def _moses_problem(name: str):
    folder = MOSES / name
    data = read_extractor_files([folder / "features.dat"], [folder / "scores.dat"])
    start, low, high = read_init_opt(folder / "init.opt")
    return data, start, (low, high)


def synthetic(n_sentences: int, k: int = 100, n_features: int = 15, seed: int = 0) -> KBest:
    """k-best lists whose features and BLEU statistics both follow a hidden quality per hypothesis."""
    rng = np.random.default_rng(seed)
    n = n_sentences * k
    quality = rng.uniform(size=n)
    loadings = rng.normal(size=n_features)
    features = quality[:, None] * loadings[None, :] + rng.normal(scale=1.0, size=(n, n_features))
    ref_len = np.repeat(rng.integers(10, 40, n_sentences), k)
    length = np.maximum(1, ref_len + rng.integers(-5, 6, n))
    stats = np.zeros((n, 9), dtype=np.int32)
    for order in range(4):
        total = np.maximum(length - order, 0)
        stats[:, 2 * order + 1] = total
        stats[:, 2 * order] = rng.binomial(total, np.clip(quality * 0.9 ** order, 0, 1))
    stats[:, 8] = ref_len
    space = FeatureSpace([f"F{i}" for i in range(n_features)])
    return KBest(space, np.arange(0, n + 1, k), features, np.zeros(0, np.uint8),
                 np.zeros(n + 1, np.int64), stats=stats)


def _timed_fit(tuner: MERT, data: KBest, w0, repeats: int):
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        tuner.fit(data, w0)
        seconds.append(time.perf_counter() - start)
    searches = sum(h["line_searches"] for h in tuner.history_)
    return min(seconds), searches


def run(quick: bool = False) -> dict:
    repeats = 1 if quick else 3
    result: dict = {}
    start = time.perf_counter()
    if MOSES.is_dir():
        data, w0, ranges = _moses_problem("example")
    else:
        data, w0, ranges = synthetic(3), np.ones(15), None
    MERT(n_random_restarts=1, n_random_directions=1, ranges=ranges).fit(data, w0)
    result["warmup_seconds"] = round(time.perf_counter() - start, 3)

    if MOSES.is_dir():
        data, w0, ranges = _moses_problem("scorer100")
        tuner = MERT(n_random_restarts=20, ranges=ranges, seed=0)
        seconds, searches = _timed_fit(tuner, data, w0, repeats)
        result["scorer100"] = {
            "hypotheses": data.n_hypotheses, "seconds": round(seconds, 4),
            "moses_seconds": MOSES_SECONDS, "speedup_vs_moses": round(MOSES_SECONDS / seconds, 2),
            "bleu": round(tuner.bleu_, 7), "moses_bleu": MOSES_BLEU,
            "bleu_ratio_vs_moses": round(tuner.bleu_ / MOSES_BLEU, 4),
            "bleu_from_init_opt": round(tuner.history_[0]["bleu"], 7),
            "line_searches": searches, "us_per_line_search": round(1e6 * seconds / searches, 1)}
    else:
        result["scorer100"] = f"absent: {MOSES} holds the Moses fixtures"

    n_sentences, restarts = (200, 5) if quick else (1000, 20)
    data = synthetic(n_sentences)
    w0 = np.ones(15)
    tuner = MERT(n_random_restarts=restarts, seed=0)
    seconds, searches = _timed_fit(tuner, data, w0, 1)
    result["synthetic"] = {
        "sentences": n_sentences, "hypotheses": data.n_hypotheses, "features": 15,
        "restarts": restarts, "seconds": round(seconds, 3),
        "bleu_start": round(data.bleu(w0, smooth="none"), 5),
        "bleu": round(tuner.bleu_, 5), "line_searches": searches,
        "us_per_line_search": round(1e6 * seconds / searches, 1)}
    return result


if __name__ == "__main__":
    import json
    print(json.dumps(run()))
