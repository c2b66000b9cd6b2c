"""Tuning the real Moses with n-best lists against hypergraphs: time per iteration and what it is spent on.

``minismt tune --decoder moses`` with MERT (100-best lists) and with hypergraph MERT (Moses' gzipped
search hypergraphs, ``-output-search-graph-hypergraph true gz``; pruned to 50 edges per reference word
as Moses' ``kbmira --hg-prune`` does, the driver's default, and on the whole forests: ``--forest-prune
0``) on a model minismt trained on the first
10,000 Multi30k de-en pairs, the first 300 dev sentences, 3 iterations each, the Moses of ../shared/tools
with two threads. Per iteration: total seconds, Moses' own seconds (the decoder process), reading the
forests, the tuner and the rest, the forests' size on disk before they are deleted, and the ratio of the
hypergraph iteration to the n-best iteration (the goal: at most 2). Moses' peak memory (its max RSS,
from ``/usr/bin/time`` where there is one) with lists and with hypergraphs. Quick mode: a synthetic model of 1,000 pairs and 20
dev sentences. Skipped (an empty result with a reason) without ../shared/tools/moses.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
MOSES = SHARED / "tools" / "moses" / "bin" / "moses"
TIME = Path("/usr/bin/time")


def _timed_decoder(command, config, sources, work_dir):
    """A MosesDevDecoder that records the seconds of each Moses run and of reading its forests."""
    from plugins.moses.driver import MosesDevDecoder

    class Timed(MosesDevDecoder):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.moses_seconds: dict[int, float] = {}
            self.read_seconds: dict[int, float] = {}
            self.forest_bytes: dict[int, int] = {}
            self.peak_kb = 0

        def _command(self, folder, weights, input_path, hypergraph_dir):
            argv = super()._command(folder, weights, input_path, hypergraph_dir)
            if TIME.exists():
                argv = [str(TIME), "-f", "%M", "-o", os.path.join(folder, "maxrss")] + argv
            return argv

        def _run(self, folder, weights, sentences, hypergraphs):
            began = time.perf_counter()
            out = super()._run(folder, weights, sentences, hypergraphs)
            iteration = int(os.path.basename(folder).split(".")[1])
            try:
                self.peak_kb = max(self.peak_kb, int(Path(folder, "maxrss").read_text().split()[-1]))
            except (OSError, ValueError, IndexError):
                pass
            self.moses_seconds[iteration] = self.moses_seconds.get(iteration, 0.0) + time.perf_counter() - began
            return out

        def _read_hypergraphs(self, hypergraph_dir, n_sentences):
            iteration = int(os.path.basename(os.path.dirname(hypergraph_dir)).split(".")[1])
            self.forest_bytes[iteration] = sum(p.stat().st_size for p in Path(hypergraph_dir).iterdir())
            began = time.perf_counter()
            graphs = super()._read_hypergraphs(hypergraph_dir, n_sentences)
            self.read_seconds[iteration] = time.perf_counter() - began
            return graphs

    return Timed(command, config, sources, work_dir)


def _tune(tuner: str, model: Path, sources, references, folder: Path, iterations: int,
          forest_prune: int | None = None) -> dict:
    from tuners.loop import TuningRun
    name = tuner if forest_prune is None else f"{tuner}-prune{forest_prune}"
    decoder = _timed_decoder([str(MOSES), "-threads", "2"], model / "moses.ini", sources, folder / f"{name}-work")
    run = TuningRun(decoder, references, tuner, folder / name, max_iter=iterations, seed=1, forest_prune=forest_prune)
    run.run(decoder.default_weights)
    rows = []
    for record in run.history:
        t = record.iteration
        moses, read = decoder.moses_seconds.get(t, 0.0), decoder.read_seconds.get(t, 0.0)
        rows.append({"iteration": t, "dev_bleu": round(100 * record.dev_bleu, 2), "seconds": round(record.seconds, 2),
                     "moses_seconds": round(moses, 2), "read_seconds": round(read, 2),
                     "tuner_and_rest_seconds": round(record.seconds - moses - read, 2),
                     "forest_megabytes": round(decoder.forest_bytes.get(t, 0) / 2 ** 20, 1),
                     "size": record.hypotheses})
    return {"iterations": rows, "seconds_mean": round(statistics.mean(r["seconds"] for r in rows), 2),
            "moses_peak_rss_mb": round(decoder.peak_kb / 1024, 1) if decoder.peak_kb else None,
            "left_on_disk_mb": round(sum(p.stat().st_size for p in (folder / f"{name}-work").rglob("*")
                                         if p.is_file()) / 2 ** 20, 1)}


def run(quick: bool = False, max_train: int = 10000, dev_sentences: int = 300, iterations: int = 3) -> dict:
    if not MOSES.exists():
        return {"skipped": f"no real Moses at {MOSES}"}
    from minismt.io import read_lines
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if quick:
            from corpora.synthetic import write_synthetic
            from minismt.train import Trainer, TrainingConfig
            data, model = folder / "data", folder / "model"
            write_synthetic(data, n_pairs=1000, seed=3, dev=20, test=5)
            Trainer(TrainingConfig(src=str(data / "train.src"), tgt=str(data / "train.tgt"), out=str(model),
                                   lm_order=3, progress=False)).run()
            dev_sentences = 20
        else:
            from tuner_quality import prepare
            data, model = prepare("multi30k-de-en", folder, max_train)
        sources = read_lines(data / "dev.src")[:dev_sentences]
        references = [[r] for r in read_lines(data / "dev.tgt")[:dev_sentences]]
        nbest = _tune("mert", model, sources, references, folder, iterations)
        pruned = _tune("hg-mert", model, sources, references, folder, iterations)  # the driver's default: 50
        forests = _tune("hg-mert", model, sources, references, folder, iterations, forest_prune=0)
    return {"train_pairs": 1000 if quick else max_train, "dev_sentences": dev_sentences, "moses_threads": 2,
            "nbest_mert": nbest, "hypergraph_mert": forests, "hypergraph_mert_pruned_50": pruned,
            "hypergraph_to_nbest_iteration_ratio": round(forests["seconds_mean"] / nbest["seconds_mean"], 2),
            "pruned_hypergraph_to_nbest_iteration_ratio": round(pruned["seconds_mean"] / nbest["seconds_mean"], 2),
            "goal_ratio": 2.0}


if __name__ == "__main__":
    import sys
    print(json.dumps(run(quick="--quick" in sys.argv)))
