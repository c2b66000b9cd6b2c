"""Decoding speed and BLEU on Multi30k de-en test_2016 against the Moses decoder's numbers.

Trains a model on the full Multi30k de-en train set (sacremoses-tokenised,
lowercased, as the Moses reference system), then decodes test_2016 with one
thread and the untuned default weights at stack sizes 100, 200 and 1000,
distortion limit 6. Moses on the same data and machine class
(../shared/fixtures/moses/m30k/README.md, decode-only words/s, MERT weights):
295 / 163 / 34 words/s; untuned test_2016 BLEU 39.93. Quick mode: first 200
sentences, stacks 100 and 200.
"""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

MULTI30K = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "multi30k"
MOSES_WORDS_PER_SECOND = {100: 295, 200: 163, 1000: 34}
MOSES_UNTUNED_BLEU = 39.93


def run(quick: bool = False) -> dict:
    from corpora.fetch import fetch
    from minismt.decode import Decoder, PhraseModel
    from minismt.io import read_lines
    from minismt.metrics import corpus_bleu
    from minismt.train import Trainer, TrainingConfig
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        fetch("multi30k-de-en", data, from_dir=MULTI30K, progress=False)
        Trainer(TrainingConfig(src=str(data / "train.src"), tgt=str(data / "train.tgt"),
                               out=str(Path(tmp) / "model"), lm_order=4, progress=False)).run()
        start = time.perf_counter()
        model = PhraseModel.load(Path(tmp) / "model")
        load_seconds = time.perf_counter() - start
        sources = read_lines(data / "test.src")
        references = [[r] for r in read_lines(data / "test.tgt")]
    if quick:
        sources, references = sources[:200], references[:200]
    words = sum(len(s.split()) for s in sources)
    results = {}
    for stack in ((100, 200) if quick else (100, 200, 1000)):
        decoder = Decoder(model, stack_size=stack, distortion_limit=6)
        decoder.decode(sources[0])  # compile outside the timing
        start = time.perf_counter()
        best, scores = [], []
        for source in sources:  # keep the strings and scores, not every search graph
            result = decoder.decode(source)
            best.append(result.best)
            scores.append(result.score)
        seconds = time.perf_counter() - start
        results[str(stack)] = {
            "seconds": round(seconds, 2), "words_per_second": round(words / seconds),
            "moses_words_per_second": MOSES_WORDS_PER_SECOND[stack],
            "ratio_to_moses": round(words / seconds / MOSES_WORDS_PER_SECOND[stack], 2),
            "bleu": round(100 * corpus_bleu(best, references), 2),
            "mean_model_score": round(sum(scores) / len(scores), 4),
        }
    return {"sentences": len(sources), "source_words": words, "load_seconds": round(load_seconds, 2),
            "stacks": results, "moses_untuned_bleu_full_test": MOSES_UNTUNED_BLEU,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}
