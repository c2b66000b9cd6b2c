"""Speed of BLEU statistics for a whole k-best list: minismt's numba kernel vs sacrebleu per sentence.

Data: the Moses n-best list of the scorer100 fixture (10,000 hypotheses) if
../shared is present, else a synthetic list of the same size. Both sides
produce the same statistics (checked here); the ratio is sacrebleu's time over ours.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import sacrebleu

from minismt.metrics import BleuReferences

FIXTURE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "moses" / "scorer100"


def _data(quick: bool):
    if FIXTURE.is_dir():
        refs = (FIXTURE / "reference.100.txt").read_text(encoding="utf-8").splitlines()
        sentence, hyps = [], []
        for line in (FIXTURE / "nbest.eqlabels").read_text(encoding="utf-8").splitlines():
            fields = line.split("|||")
            sentence.append(int(fields[0]))
            hyps.append(fields[1].strip())
        return "moses scorer100 n-best", [[r] for r in refs], np.array(sentence), hyps
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(300)]
    refs = [[" ".join(rng.choice(words, 20))] for _ in range(100)]
    sentence = np.repeat(np.arange(100), 100)
    hyps = [" ".join(rng.choice(words, 20)) for _ in sentence]
    return "synthetic", refs, sentence, hyps


def run(quick: bool = False) -> dict:
    source, refs, sentence, hyps = _data(quick)
    repeats = 1 if quick else 3
    BleuReferences(refs).stats(sentence[:10], hyps[:10])  # compile outside the timing
    ours_s = []
    for _ in range(repeats):
        start = time.perf_counter()
        table = BleuReferences(refs)
        ours = table.stats(sentence, hyps)
        ours_s.append(time.perf_counter() - start)
    bleu = sacrebleu.BLEU(tokenize="none")
    base_s = []
    for _ in range(repeats):
        start = time.perf_counter()
        infos = [bleu._extract_reference_info(r) for r in refs]
        base = [bleu._compute_segment_statistics(h, infos[s]) for s, h in zip(sentence, hyps)]
        base_s.append(time.perf_counter() - start)
    base = np.array(base)
    assert np.array_equal(ours[:, 8], base[:, 1]) and np.array_equal(ours[:, 0:8:2], base[:, 2:6])
    return {"data": source, "hypotheses": len(hyps), "minismt_seconds": round(min(ours_s), 4),
            "sacrebleu_seconds": round(min(base_s), 4),
            "speedup_vs_sacrebleu": round(min(base_s) / min(ours_s), 2)}
