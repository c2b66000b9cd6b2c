"""Moses' own tuning of the very model minismt tunes: the comparison of the tuners with the model held fixed.

A ``tuner-quality`` setting (its corpus, training pairs, lines joined, stack and iterations; see
:func:`tuner_quality.prepare`) is prepared and trained once, and the real ``mert-moses.pl`` of ../shared/tools tunes
the ``moses.ini`` that ``minismt train`` wrote (the same phrase and reordering tables and LM), as a Moses user
runs it: the dev set's phrase tables filtered, 100-best lists, Moses' MERT (``mert``: 20 random restarts,
``-r SEED``) or batch k-best MIRA (``--batch-mira``, Moses' ``kbmira -r SEED``), the given number of iterations,
and the last iteration's weights (mert-moses.pl's default). The real Moses decodes with two threads at the
setting's stack size. Per run: the decoded dev BLEU of every iteration (Moses' own 1-best ``run*.out`` files,
scored as ``tuner-quality`` scores), and the test BLEU of the final weights; Moses' untuned test BLEU beside
minismt's untuned test BLEU on the same model (the two decoders' agreement on one model). Skipped (an empty result
with a reason) without ../shared/tools/moses or perl.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tuner_quality import _bleu_and_ratio, _test_decode, prepare

SHARED = Path(__file__).resolve().parents[2] / "shared"
MOSES_TOOLS = SHARED / "tools" / "moses"
MERT_TOOLS = ("extractor", "mert", "pro", "kbmira", "evaluator")
RUNS = (("mert", 1), ("mert", 2), ("mert", 3), ("kbmira", 1))


def _moses(config: Path, source: Path, stack: int, work: Path) -> list[str]:
    """The real Moses' 1-best translations of ``source`` with ``config``'s weights."""
    with open(source, encoding="utf-8") as handle:
        done = subprocess.run([str(MOSES_TOOLS / "bin" / "moses"), "-f", str(config), "-threads", "2",
                               "-s", str(stack)], stdin=handle, capture_output=True, text=True, cwd=work,
                              check=False)
    if done.returncode != 0:
        raise RuntimeError(f"moses failed on {source}: {done.stderr[-2000:]}")
    return done.stdout.splitlines()


def _mert_moses(tuner: str, seed: int, data: Path, model: Path, mertdir: Path, work: Path, iterations: int,
                stack: int) -> float:
    """One run of mert-moses.pl in ``work``; its wall seconds."""
    flags = ["--batch-mira", "--batch-mira-args", f"-r {seed}", "--mertargs", ""] if tuner == "kbmira" else \
        ["--mertmertargs", f"-r {seed}"]  # kbmira's arguments would go to the extractor too without --mertargs
    started = time.perf_counter()
    done = subprocess.run(["perl", str(MOSES_TOOLS / "scripts" / "training" / "mert-moses.pl"),
                           str(data / "dev.src"), str(data / "dev.tgt"), str(MOSES_TOOLS / "bin" / "moses"),
                           str(model / "moses.ini"), "--mertdir", str(mertdir), "--working-dir", str(work),
                           "--maximum-iterations", str(iterations), "--nbest", "100",
                           "--decoder-flags", f"-threads 2 -s {stack}", *flags],
                          cwd=work.parent, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"mert-moses.pl ({tuner}, seed {seed}) failed: {done.stderr[-3000:]}")
    return time.perf_counter() - started


def _iteration_outputs(work: Path) -> list[Path]:
    """Moses' dev 1-best of each iteration, in order (``run1.out``, ``run2.out``, ...)."""
    runs = [(int(m.group(1)), p) for p in work.glob("run*.out") if (m := re.fullmatch(r"run(\d+)\.out", p.name))]
    return [p for _, p in sorted(runs)]


def run(quick: bool = False, corpus: str = "multi30k-de-en", max_train: int | None = 9000, join: int = 2,
        iterations: int = 8, stack: int = 200, runs=RUNS) -> dict:
    from minismt.decode import DecoderSettings
    from minismt.io import read_lines
    from tuners.devdecoder import MinismtDevDecoder
    if not (MOSES_TOOLS / "bin" / "moses").exists():
        return {"skipped": f"no real Moses at {MOSES_TOOLS / 'bin' / 'moses'}"}
    if shutil.which("perl") is None:
        return {"skipped": "mert-moses.pl needs perl"}
    if quick:
        max_train, iterations, runs = 1000, 2, RUNS[:1]
    with tempfile.TemporaryDirectory() as tmp:
        data, model = prepare(corpus, Path(tmp), max_train, "phrase", 40 if quick else None, join)
        mertdir = Path(tmp) / "mertdir"
        mertdir.mkdir()
        for tool in MERT_TOOLS:
            (mertdir / tool).symlink_to(MOSES_TOOLS / "bin" / tool)
        dev_ref, test_ref = read_lines(data / "dev.tgt"), read_lines(data / "test.tgt")
        settings = DecoderSettings(stack_size=stack, kbest=0, jobs=2)
        decoder = MinismtDevDecoder(str(model), read_lines(data / "dev.src"), settings)
        ours_untuned = _bleu_and_ratio(_test_decode(model, decoder.default_weights, decoder.space,
                                                    read_lines(data / "test.src"), settings), test_ref)
        decoder.close()
        moses_untuned = _bleu_and_ratio(_moses(model / "moses.ini", data / "test.src", stack, Path(tmp)), test_ref)
        results = []
        for tuner, seed in runs:
            work = Path(tmp) / f"{tuner}-{seed}"
            seconds = _mert_moses(tuner, seed, data, model, mertdir, work, iterations, stack)
            dev = [_bleu_and_ratio(read_lines(path), dev_ref)[0] for path in _iteration_outputs(work)]
            test = _bleu_and_ratio(_moses(work / "moses.ini", data / "test.src", stack, work), test_ref)
            falls = [round(b - dev[0], 2) for b in dev[1:]]
            results.append({"tuner": f"moses {tuner}", "seed": seed, "tuning_seconds": round(seconds, 1),
                            "dev_bleu_per_iteration": dev, "largest_fall_below_start": round(-min([0.0, *falls]), 2),
                            "last_dev_bleu": dev[-1], "best_dev_bleu": max(dev),
                            "final_test_bleu": test[0], "final_test_length_ratio": test[1]})
            print(f"moses {tuner} seed {seed}: dev {dev}, test {test[0]} ({seconds:.0f} s)", flush=True)
    table = ["| tuner | seed | dev per iteration | test | seconds |", "|---|---|---|---|---|"]
    table += [f"| {r['tuner']} | {r['seed']} | {' '.join(f'{b:.2f}' for b in r['dev_bleu_per_iteration'])} | "
              f"{r['final_test_bleu']:.2f} | {r['tuning_seconds']:.0f} |" for r in results]
    return {"corpus": corpus, "train_pairs": max_train or "all", "lines_joined": join, "iterations": iterations,
            "stack": stack, "untuned_test_bleu_moses": moses_untuned[0], "untuned_test_bleu_minismt": ours_untuned[0],
            "table": "\n".join(table), "runs": results}
