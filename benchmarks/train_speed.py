"""Training time on Multi30k de-en (29,000 pairs): alignment + extraction + 4-gram LM.

The corpus is prepared first (sacremoses tokenisation + lowercasing, as the Moses
reference system), outside the timing. Baseline: the Moses pipeline on the same
machine class took ~40 s (fast_align x2 12 s, lmplz 0.9 s, train-model.perl steps
4-9 24 s; ../shared/fixtures/moses/m30k/README.md); the target is <= 120 s.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

MULTI30K = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "multi30k"
MOSES_SECONDS = 0.16 + 6.01 + 6.07 + 0.88 + 0.13 + 24.33  # align x2, atools, lmplz, build_binary, train-model


def run(quick: bool = False) -> dict:
    from corpora.fetch import fetch
    from minismt.train import Trainer, TrainingConfig
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        fetch("multi30k-de-en", data, from_dir=MULTI30K, progress=False,
              max_train=3000 if quick else None)
        config = TrainingConfig(src=str(data / "train.src"), tgt=str(data / "train.tgt"),
                                out=str(Path(tmp) / "model"), lm_order=4, progress=False)
        trainer = Trainer(config)
        trainer.run()
        steps = {name: {"seconds": r.seconds, "peak_rss_mb": r.peak_rss_mb, **r.info}
                 for name, r in trainer.records.items()}
    total = sum(s["seconds"] for n, s in steps.items() if n != "prepare")
    return {"pairs": steps["prepare"]["pairs"], "steps": steps,
            "align_extract_lm_seconds": round(total, 1), "target_seconds": 120,
            "moses_seconds": round(MOSES_SECONDS, 1),
            "ratio_to_moses": round(total / MOSES_SECONDS, 2)}
