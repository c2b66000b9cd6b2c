"""KBest memory: 10 million hypotheses x 20 dense features with BLEU statistics must fit in < 4 GB.

Builds the list with KBestBuilder (as readers do), then scores it, takes the
model-best and the BLEU+1 oracles; reports the arrays' bytes and the process's
peak resident memory against the 4 GB budget.
"""

from __future__ import annotations

import resource
import time

import numpy as np

from minismt.features import FeatureSpace
from minismt.kbest import KBestBuilder

BUDGET = 4 * 1024 ** 3


def run(quick: bool = False) -> dict:
    n_sentences, k, dim = (1000, 1000, 20) if quick else (10_000, 1000, 20)
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(5000)]
    pool = [" ".join(rng.choice(words, size=int(rng.integers(8, 16)))) for _ in range(k)]
    space = FeatureSpace([f"F{i}_0" for i in range(dim)])
    start = time.perf_counter()
    builder = KBestBuilder(space)
    for s in range(n_sentences):
        dense = rng.standard_normal((k, dim))
        stats = rng.integers(0, 20, size=(k, 9), dtype=np.int32)
        builder.add_many(s, pool, dense, stats=stats)
    kbest = builder.build(n_sentences)
    build_s = time.perf_counter() - start
    peak_build = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    w = rng.standard_normal(dim)
    best = kbest.model_best(w)
    oracle = kbest.oracle()
    use_s = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert best.shape == oracle.shape == (n_sentences,)
    return {
        "hypotheses": kbest.n_hypotheses, "dense_features": dim,
        "array_bytes": kbest.nbytes(), "peak_rss_bytes": peak,
        "peak_rss_gb": round(peak / 1024 ** 3, 3),
        "peak_rss_after_build_gb": round(peak_build / 1024 ** 3, 3), "budget_gb": BUDGET / 1024 ** 3,
        "peak_over_budget": round(peak / BUDGET, 3),
        "build_seconds": round(build_s, 2), "model_best_and_oracle_seconds": round(use_s, 2),
    }
