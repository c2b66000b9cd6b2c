"""Speed, memory and quality of word alignment on Multi30k de-en train (29,000 pairs; 3,000 when quick).

Moses-tokenised and lowercased (``minismt.corpus.Tokenizer``; its time is reported
but not counted), then both directions of ``align_corpus`` (5 IBM Model 1 + 5 HMM
iterations each) and grow-diag-final-and, step by step and end to end (``jobs=1``
and ``jobs=2``); then the same end to end with ``aligner="fast-align"`` (4 EM
iterations of the reparameterised IBM Model 2, the default), its time as a ratio to the
HMM's.
Quality: AER against ``GOLD``, a hand alignment of the first 10 training pairs made
for this benchmark (sure and possible links, in the tokenisation above), and links
per source word. Peak memory is the process's maximum resident set size.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np

from minismt.align import (PairIndex, align_corpus, alignment_error_rate, swap, symmetrize,
                           train_hmm, train_ibm1, viterbi_hmm)
from minismt.corpus import Alignment, TokenArray, Tokenizer, Vocabulary
from minismt.io import read_lines

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "multi30k"

# (sure links, possible-only links) of training pairs 0..9, as (de position, en position)
GOLD = [
    ("0-0 1-1 2-3 3-4 4-5 6-6 9-7 10-8 11-9 12-10", "5-6 7-7 8-7"),
    ("0-0 1-1 3-4 4-6 5-7 6-10 7-11", "2-2 3-3 4-5 6-9"),
    ("0-0 1-1 2-2 3-3 4-4 5-5 6-7 8-6 9-8", "7-6"),
    ("0-0 1-1 2-2 3-3 4-4 5-5 6-7 7-8 8-9 9-10 11-11 12-12 13-13 14-14", "6-6"),
    ("0-0 1-1 3-3 4-5 6-6 7-7 9-8", "2-2 3-4 8-6"),
    ("0-0 1-1 2-2 3-3 4-4 5-5 6-6 8-7 9-8 10-9 11-10 12-12 13-13 14-11 15-14", ""),
    ("0-0 1-1 2-3 3-5 4-6 5-7", "2-2 6-4"),
    ("0-0 1-1 2-2 3-3 6-6 7-7 9-9 10-11 11-12 12-8 13-13", "4-4 5-5 12-10"),
    ("0-0 1-1 2-2 3-3 4-4 5-5 6-7 8-9 9-10 11-11", "6-6 7-8 10-8"),
    ("0-0 1-1 2-6 4-8 5-9 6-2 7-3 8-10", "2-4 2-5 2-7 3-4 3-7 4-5"),
]


def gold_alignments() -> tuple[Alignment, Alignment]:
    """``(sure, possible)`` of the first ``len(GOLD)`` pairs; possible includes sure."""
    def parse(text):
        return [tuple(int(x) for x in point.split("-")) for point in text.split()]
    sure = [parse(s) for s, _ in GOLD]
    possible = [parse(s) + parse(p) for s, p in GOLD]
    return Alignment.from_lists(sure), Alignment.from_lists(possible)


def first(alignment: Alignment, n: int) -> Alignment:
    """The first n sentences of an alignment."""
    end = int(alignment.offsets[n])
    return Alignment(alignment.links[:end], alignment.offsets[:n + 1].copy())


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def run(quick: bool = False) -> dict:
    n_pairs = 3000 if quick else None
    start = time.perf_counter()
    de = read_lines(CORPUS / "train.de.gz")[:n_pairs]
    en = read_lines(CORPUS / "train.en.gz")[:n_pairs]
    tok_de, tok_en = Tokenizer("de"), Tokenizer("en")
    de = [tok_de(line) for line in de]
    en = [tok_en(line) for line in en]
    tokenise_s = time.perf_counter() - start
    src = TokenArray.from_sentences(de, Vocabulary())
    tgt = TokenArray.from_sentences(en, Vocabulary())
    tiny = TokenArray.from_sentences(["a b", "b"], Vocabulary())
    align_corpus(tiny, tiny, aligner="hmm")  # load the compiled kernels outside the timing
    align_corpus(tiny, tiny, aligner="fast-align")
    rss_before = peak_rss_gb()

    steps: dict[str, dict[str, float]] = {}
    results = {}
    for name, f, e in (("forward", tgt, src), ("reverse", src, tgt)):
        times = {}
        t0 = time.perf_counter()
        index = PairIndex(f, e)
        times["index"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ibm1 = train_ibm1(index, 5)
        times["ibm1_5_iterations"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        hmm = train_hmm(index, ibm1.t, 5)
        times["hmm_5_iterations"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        results[name] = (viterbi_hmm(index, hmm), ibm1, hmm, len(index))
        times["viterbi"] = time.perf_counter() - t0
        times["total"] = sum(times.values())
        steps[name] = {k: round(v, 3) for k, v in times.items()}
    t0 = time.perf_counter()
    reverse_links = swap(results["reverse"][0])
    symmetric = symmetrize(results["forward"][0], reverse_links)
    symmetrize_s = time.perf_counter() - t0
    total_s = steps["forward"]["total"] + steps["reverse"]["total"] + symmetrize_s

    t0 = time.perf_counter()
    result = align_corpus(src, tgt, aligner="hmm")
    end_to_end_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    result_jobs2 = align_corpus(src, tgt, jobs=2, aligner="hmm")
    jobs2_s = time.perf_counter() - t0
    assert np.array_equal(result.symmetric.links, symmetric.links)
    assert np.array_equal(result_jobs2.symmetric.links, symmetric.links)

    t0 = time.perf_counter()
    fast = align_corpus(src, tgt, aligner="fast-align")
    fast_s = time.perf_counter() - t0

    sure, possible = gold_alignments()

    def aer_of(r):
        return {name: round(alignment_error_rate(first(a, len(GOLD)), sure, possible), 4)
                for name, a in (("forward", r.forward), ("reverse", r.reverse),
                                ("grow-diag-final-and", r.symmetric))}

    aer = aer_of(result)
    loglik = result.log_likelihoods
    return {
        "data": f"multi30k de-en train, {len(src)} pairs, {src.ids.size} de / {tgt.ids.size} en tokens",
        "pairs": len(src),
        "cooccurring_pairs": {"forward": results["forward"][3], "reverse": results["reverse"][3]},
        "tokenise_seconds_not_counted": round(tokenise_s, 2),
        "steps_seconds": steps,
        "symmetrize_seconds": round(symmetrize_s, 3),
        "total_seconds": round(total_s, 2),
        "align_corpus_seconds": round(end_to_end_s, 2),
        "align_corpus_jobs2_seconds": round(jobs2_s, 2),
        "symmetric_links": int(symmetric.links.shape[0]),
        "final_log_likelihood": {d: {m: round(v[-1], 1) for m, v in loglik[d].items()} for d in loglik},
        "aer_vs_hand_gold_first10": aer,
        "symmetric_links_per_source_word": round(symmetric.links.shape[0] / src.ids.size, 4),
        "fast_align": {
            "align_corpus_seconds": round(fast_s, 2),
            "seconds_ratio_to_hmm": round(fast_s / end_to_end_s, 3),
            "symmetric_links_per_source_word": round(fast.symmetric.links.shape[0] / src.ids.size, 4),
            "final_log_likelihood": {d: round(v["ibm2"][-1], 1) for d, v in fast.log_likelihoods.items()},
            "final_tension": {d: round(m.ibm2.tension, 3) for d, m in (("forward", fast.forward_model),
                                                                       ("reverse", fast.reverse_model))},
            "aer_vs_hand_gold_first10": aer_of(fast),
        },
        "rss_before_align_gb": round(rss_before, 3),
        "peak_rss_gb": round(peak_rss_gb(), 3),
    }


if __name__ == "__main__":
    import json
    import sys
    print(json.dumps(run(quick="--quick" in sys.argv), indent=1))
