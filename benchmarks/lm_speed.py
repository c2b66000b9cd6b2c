"""Speed of the language-model pipeline: lmplz-exact estimation, ARPA I/O, and queries vs kenlm.

Data: Multi30k train.en (29,000 lines; ``--quick``: the first 3,000), tokenised
and lowercased as the Moses reference system does (sacremoses, ``escape=False``;
tokenisation is timed separately and not counted), a 4-gram model as
``lmplz -o 4``; then val.en scored by our numba table and by ``kenlm.Model`` on
the same ARPA file, in the same run. Without ../shared a synthetic corpus of the
same shape is used. The n-gram counts are compared with lmplz's on the Moses
reference system's text (fixtures/moses/m30k/README.md).
"""

from __future__ import annotations

import gzip
import resource
import tempfile
import time
from pathlib import Path

import kenlm
import numpy as np

from minismt.corpus import Tokenizer
from minismt.lm import LanguageModel, estimate_kn, read_arpa, write_arpa

SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpora" / "multi30k"
MOSES_LMPLZ_COUNTS = [10_213, 80_010, 174_841, 244_283]  # lmplz -o 4 on Moses' train.clean.en
MOSES_TRAIN_TOKENS = 377_534                              # Moses' tokenised train.en


def _read(name: str) -> list[str]:
    with gzip.open(CORPUS / name, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def _synthetic(n_lines: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(10_000)])
    ranks = rng.zipf(1.3, size=n_lines * 13) % words.shape[0]
    lengths = rng.integers(5, 22, size=n_lines)
    ends = np.cumsum(lengths)
    tokens = words[ranks[:ends[-1]]]
    return [" ".join(tokens[e - n:e]) for e, n in zip(ends, lengths)]


def _best(fn, repeats: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def run(quick: bool = False) -> dict:
    n_lines = 3_000 if quick else 29_000
    if (CORPUS / "train.en.gz").is_file():
        source = "multi30k train.en" + (" (first 3,000 lines)" if quick else "")
        raw_train, raw_val = _read("train.en.gz")[:n_lines], _read("val.en.gz")
        tokenizer = Tokenizer("en")
        start = time.perf_counter()
        train = [tokenizer(line) for line in raw_train]
        val = [tokenizer(line) for line in raw_val]
        tokenise_s = time.perf_counter() - start
    else:
        source = "synthetic (../shared absent)"
        train, val = _synthetic(n_lines, 0), _synthetic(1_014, 1)
        tokenise_s = 0.0
    train_tokens = sum(len(line.split()) for line in train)

    estimate_kn(train[:200], order=4, discount_fallback=True)  # warm-up outside the timings
    estimate_s, model = _best(lambda: estimate_kn(train, order=4), 1 if quick else 3)
    with tempfile.TemporaryDirectory() as tmp:
        arpa = Path(tmp) / "train.en.arpa"
        write_s, _ = _best(lambda: write_arpa(model, arpa), 1)
        arpa_mb = arpa.stat().st_size / 2**20
        read_s, read_back = _best(lambda: read_arpa(arpa), 1)
        LanguageModel.from_model(estimate_kn(train[:200], order=4, discount_fallback=True))  # compile
        build_s, lm = _best(lambda: LanguageModel.from_model(read_back), 1)
        kenlm_load_s, km = _best(lambda: kenlm.Model(str(arpa)), 1)

    repeats = 3 if quick else 7
    n_scored = sum(len(line.split()) + 1 for line in val)

    def ours_bulk():
        ids, offsets = lm.encode_lines(val)
        return lm.score_ids(ids, offsets)[0]

    val_ids, val_offsets = lm.encode_lines(val)

    def ours_kernel():
        return lm.score_ids(val_ids, val_offsets)[0]

    def ours_api():
        return [list(lm.full_scores(line)) for line in val]

    def theirs():
        return [list(km.full_scores(line)) for line in val]

    ours_bulk()
    bulk_s, bulk = _best(ours_bulk, repeats)
    kernel_s, _ = _best(ours_kernel, repeats)
    api_s, _ = _best(ours_api, repeats)
    kenlm_s, ref = _best(theirs, repeats)
    ref_flat = np.array([p for sentence in ref for p, _, _ in sentence])
    max_diff = float(np.max(np.abs(bulk - ref_flat)))
    assert max_diff < 1e-5, max_diff

    counts = model.counts
    return {
        "data": source,
        "train_lines": len(train),
        "train_tokens": train_tokens,
        "tokenise_seconds_not_counted": round(tokenise_s, 3),
        "estimate_seconds": round(estimate_s, 3),
        "write_arpa_seconds": round(write_s, 3),
        "arpa_mb": round(arpa_mb, 1),
        "read_arpa_seconds": round(read_s, 3),
        "build_table_seconds": round(build_s, 3),
        "kenlm_load_arpa_seconds": round(kenlm_load_s, 3),
        "ngram_counts": counts,
        "moses_lmplz_counts": MOSES_LMPLZ_COUNTS,
        "tokenisation_matches_moses": (not quick and train_tokens == MOSES_TRAIN_TOKENS
                                       and counts == MOSES_LMPLZ_COUNTS),
        "moses_train_tokens": MOSES_TRAIN_TOKENS,
        "discounts": np.round(model.discounts, 6).tolist(),
        "val_tokens_scored": n_scored,
        "max_abs_diff_vs_kenlm": max_diff,
        "ours_kernel_tokens_per_s": round(n_scored / kernel_s),
        "ours_bulk_tokens_per_s": round(n_scored / bulk_s),
        "ours_full_scores_tokens_per_s": round(n_scored / api_s),
        "kenlm_full_scores_tokens_per_s": round(n_scored / kenlm_s),
        "speedup_kernel_vs_kenlm": round(kenlm_s / kernel_s, 2),
        "speedup_bulk_vs_kenlm": round(kenlm_s / bulk_s, 2),
        "speedup_full_scores_vs_kenlm": round(kenlm_s / api_s, 2),
        "val_log10_prob_ours": round(float(bulk.sum()), 4),
        "val_log10_prob_kenlm": round(float(ref_flat.sum()), 4),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
