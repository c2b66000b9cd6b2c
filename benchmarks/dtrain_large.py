"""dtrain as it is meant to be used (Simianer, Riezler & Dyer 2012): training on a training corpus, not a dev
set, with many sparse features, for both engines; time and memory per epoch, the features kept.

Multi30k de-en (sacremoses-tokenised, lowercased): the first 10,000 training pairs are dtrain's training data
(``minismt tune --tuner dtrain --dev-src``), the model is ``minismt train`` on the other 19,000 pairs (held out,
so the phrases of a training sentence are not its own: the simplest form of what leave-one-out counts do, which
our phrase table does not compute).  Each engine runs ``minismt tune`` as a user would: 3 epochs, 10 shards, the
sparse features of the engine (phrase-based: ``rule-id,word-pair``; Hiero: ``rule-id,rule-shape,source-bigram,
target-bigram``, as cdec's), dtrain's defaults otherwise (cdec's distributed example: XYX pairs, stupid BLEU,
eta 1e-4, margin 1, select_k 100,000 by l2), whole steps and every epoch kept (``--step-search none --accept
any``: dtrain as cdec runs it; a step search over the forests of 10,000 sentences costs a decode of them),
``--jobs 2``.  Per epoch, from the run's log as it is written: seconds, the training-set BLEU of the mixed
weights, the features non-zero before selection and kept after it, and the peak resident memory of the run's
processes (the sum over the driver and its decoding workers, sampled every 0.5 s; pages they share counted in
each).  Then test_2016 is decoded with the untuned and the final weights.  ``quick``: 3,000 model pairs and
300 dtrain sentences, 2 epochs, 3 shards, phrase-based only.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MULTI30K = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "multi30k"
TRAIN_PAIRS = 10_000
EPOCHS, SHARDS = 3, 10
SPARSE = {"phrase": "rule-id,word-pair", "hiero": "rule-id,rule-shape,source-bigram,target-bigram"}
CLI = "import sys; from minismt.cli import main; sys.exit(main(sys.argv[1:]))"
_ITERATION_LINE = re.compile(r"iteration (\d+): decoded dev BLEU (\d+\.\d+).*; (\d+\.\d+) s$")
_KEPT = re.compile(r"features kept (\d+) of (\d+) non-zero")


class _TreeMemory:
    """The largest summed resident memory (MB) of a process and its descendants since the last ``take``,
    sampled in a thread."""

    def __init__(self, pid: int, every: float = 0.5):
        import psutil
        self._root, self._every, self._peak, self._stop = psutil.Process(pid), every, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil
        while not self._stop.is_set():
            try:
                processes = [self._root, *self._root.children(recursive=True)]
                total = 0
                for process in processes:
                    try:
                        total += process.memory_info().rss
                    except psutil.Error:
                        pass
                self._peak = max(self._peak, total / 2 ** 20)
            except psutil.Error:
                return
            self._stop.wait(self._every)

    def take(self) -> float:
        peak, self._peak = self._peak, 0.0
        return round(peak)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _tune(argv: list[str], errors: Path) -> dict:
    """Run ``minismt tune`` and read its log as it is written.  Iteration t decodes the training set with the
    mixed weights of epoch t (t = 0: the untuned weights), then runs epoch t + 1 from them; per iteration: the
    training-set BLEU of those weights, epoch t + 1's features (non-zero and kept), the iteration's seconds
    (the log's) and the peak memory of the run's processes during it."""
    started = time.perf_counter()
    with open(errors, "w", encoding="utf-8") as stderr:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True)
    memory = _TreeMemory(process.pid)
    iterations, kept = [], {}
    for line in process.stdout:
        found = _KEPT.search(line)
        if found:
            kept = {"kept_features": int(found.group(1)), "nonzero_features": int(found.group(2))}
        found = _ITERATION_LINE.search(line.rstrip())
        if found:
            iterations.append({"iteration": int(found.group(1)), "train_bleu": float(found.group(2)),
                               "seconds": float(found.group(3)), "peak_mb": memory.take(), **kept})
            kept = {}
    process.wait()
    error = errors.read_text(encoding="utf-8")
    memory.stop()
    return {"iterations": iterations, "wall_seconds": round(time.perf_counter() - started, 1),
            **({"error": error[-600:]} if process.returncode else {})}


def _engine(kind: str, data: Path, work: Path, quick: bool) -> dict:
    import sacrebleu
    from minismt.io import read_lines
    from minismt.train import Trainer, TrainingConfig
    model = work / f"model-{kind}"
    hiero = {"model": "hiero", "aligner": "hmm"} if kind == "hiero" else {}
    started = time.perf_counter()
    Trainer(TrainingConfig(src=str(data / "model.src"), tgt=str(data / "model.tgt"), out=str(model), lm_order=4,
                           progress=False, **hiero)).run()
    training_seconds = time.perf_counter() - started
    run_dir = work / f"dtrain-{kind}"
    argv = [sys.executable, "-c", CLI, "tune", "--model", str(model), "--dev-src", str(data / "dtrain.src"),
            "--dev-ref", str(data / "dtrain.tgt"), "--tuner", "dtrain", "--run-dir", str(run_dir),
            "--iterations", str(2 if quick else EPOCHS), "--seed", "1", "--jobs", "2", "--step-search", "none",
            "--accept", "any", "--sparse-features", SPARSE[kind], "--tuner-param", f"shards={3 if quick else SHARDS}",
            "--quiet"]
    result = {"model_training_seconds": round(training_seconds, 1), "sparse_features": SPARSE[kind],
              **_tune(argv, work / f"tune-{kind}.err")}
    references = read_lines(data / "test.tgt")
    for name, weights in (("untuned", None), ("dtrain", run_dir / "weights.final")):
        if weights is not None and not weights.is_file():
            continue
        out = work / f"test-{kind}-{name}.out"
        command = [sys.executable, "-c", CLI, "decode", "--model", str(model), "--input", str(data / "test.src"),
                   "--output", str(out), "--jobs", "2", "--quiet"]
        if weights is not None:
            command += ["--weights", str(weights), "--sparse-features", SPARSE[kind]]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            result[f"{name}_test_error"] = done.stderr[-400:]
            continue
        result[f"{name}_test_bleu"] = round(sacrebleu.corpus_bleu(read_lines(out), [references],
                                                                  tokenize="none").score, 2)
    final = run_dir / "weights.final"
    if final.is_file():
        result["final_weights"] = sum(1 for line in final.read_text(encoding="utf-8").splitlines() if line.strip())
    return result


def run(quick: bool = False) -> dict:
    from corpora.fetch import fetch
    from minismt.io import read_lines
    result: dict = {"train_pairs": 300 if quick else TRAIN_PAIRS, "epochs": 2 if quick else EPOCHS,
                    "shards": 3 if quick else SHARDS}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / "data"
        fetch("multi30k-de-en", data, from_dir=MULTI30K, progress=False, max_train=3300 if quick else None)
        n = result["train_pairs"]
        for side in ("src", "tgt"):
            lines = read_lines(data / f"train.{side}")
            (data / f"dtrain.{side}").write_text("".join(s + "\n" for s in lines[:n]), encoding="utf-8")
            (data / f"model.{side}").write_text("".join(s + "\n" for s in lines[n:]), encoding="utf-8")
            if quick:
                test = read_lines(data / f"test.{side}")[:100]
                (data / f"test.{side}").write_text("".join(s + "\n" for s in test), encoding="utf-8")
        result["model_pairs"] = len(read_lines(data / "model.src"))
        for kind in (("phrase",) if quick else ("phrase", "hiero")):
            result[kind] = _engine(kind, data, work, quick)
    return result

