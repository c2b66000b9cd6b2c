"""Hiero decoding of Multi30k de-en test_2016 (1,000 sentences, 12,102 words): minismt's chart
decoder against Moses' chart decoder on the same rules, LM and weights, in the same run.

The model is ``minismt train --hiero`` on the alignment Moses' Hiero anchor used (``--aligner
hmm``; ../shared/fixtures/moses/m30k-hiero), with the grammar for test_2016, untuned weights.
Both decoders run one thread with Moses' settings: rule spans up to 20 words, table limit 20, pop
limit 200 (``quick``: 3,000 training pairs, the first 100 sentences).  Reported: BLEU (sacrebleu on the tokenised
lowercased text), source words per second over the decoding time (ours: the sum of the
per-sentence times, model loading excluded; Moses: its ``Translation took`` lines, as the anchor
measured), their ratio, how many 1-best translations are the same, the forests' sizes (edges per
sentence), hypergraph MERT's line search over the first 100 forests (seconds per direction), and
our speed and forest sizes at pop limit 1000 on the first 100 sentences (with Moses' speed on them at
pop limit 1000 in the same run), and the peak memory of
``minismt decode`` and of Moses decoding the whole set (each its own process).  The anchor's
numbers: BLEU 39.11 at 301 words/s (pop limit 200), 0.87 GB; the goal is 3x Moses' speed and at
most its memory.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
MULTI30K = SHARED / "corpora" / "multi30k"
MOSES = SHARED / "tools" / "moses" / "bin" / "moses"
BUILD_BINARY = SHARED / "tools" / "moses" / "bin" / "build_binary"
CDEC = SHARED / "tools" / "cdec" / "cdec"
ANCHOR = {"bleu_p200": 39.11, "words_per_second_p200": 301.1}
POP_LIMIT = 200
MAX_SPAN = 20
FOREST_SENTENCES = 100      # forests kept for the line-search timing
POP_1000_SENTENCES = 100


def _peak_mb(argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``argv`` under a small Python parent that reports its peak resident memory (MB): the
    command's own, whatever else this process ran before."""
    wrapper = ("import resource, subprocess, sys\n"
               "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "sys.stdout.write(done.stdout)\n"
               "sys.stderr.write(done.stderr)\n"
               "sys.stderr.write('\\npeak-kb %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
               "sys.exit(done.returncode)\n")
    done = subprocess.run([sys.executable, "-c", wrapper, *argv], capture_output=True, text=True)
    peak = re.findall(r"peak-kb (\d+)", done.stderr)
    return (round(int(peak[-1]) / 1024, 1) if peak else float("nan")), done


def _spread(values) -> dict:
    import numpy as np
    values = np.asarray(values, dtype=np.float64)
    return {"mean": round(float(values.mean()), 1), "median": float(np.median(values)),
            "max": int(values.max())}


def _line_search(forests, references, weights) -> dict:
    """Hypergraph MERT's line searches (the envelope semiring over every derivation, then the BLEU
    sweep) over the forests, along the 9 axes and 6 random directions from the decoding weights:
    seconds per direction."""
    import numpy as np
    from minismt.hypergraph import ForestData
    from minismt.metrics import BleuReferences
    from tuners.hgmert import _Forests
    from tuners.search import SMOOTH
    data = ForestData(forests, range(len(forests)), BleuReferences([[r] for r in references]))
    n = weights.shape[0]
    rng = np.random.default_rng(0)
    random = rng.standard_normal((6, n))
    directions = np.concatenate([np.eye(n), random / np.linalg.norm(random, axis=1, keepdims=True)])
    prepared = _Forests(data)
    prepared.searches(prepared.intercepts(weights), directions[:2], SMOOTH["none"])   # compile
    started = time.perf_counter()
    prepared.searches(prepared.intercepts(weights), directions, SMOOTH["none"])
    seconds = time.perf_counter() - started
    return {"forests": len(forests), "edges": int(sum(f.n_edges for f in forests)),
            "directions": int(directions.shape[0]),
            "seconds_per_direction": round(seconds / directions.shape[0], 4)}


def run(quick: bool = False) -> dict:
    import sacrebleu
    from corpora.fetch import fetch
    from minismt.decode.hiero import HieroDecoder, load_model
    from minismt.io import read_lines
    from minismt.train import Trainer, TrainingConfig
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        fetch("multi30k-de-en", data, from_dir=MULTI30K, progress=False, max_train=3000 if quick else None)
        sources = read_lines(data / "test.src")
        references = read_lines(data / "test.tgt")
        if quick:
            sources, references = sources[:100], references[:100]
        (data / "input.src").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
        trainer = Trainer(TrainingConfig(src=str(data / "train.src"), tgt=str(data / "train.tgt"),
                                         out=str(Path(tmp) / "model"), aligner="hmm", model="hiero",
                                         grammar_inputs=(str(data / "input.src"),), progress=False))
        trainer.run()
        model = Path(tmp) / "model"
        grammar, lm, manifest = load_model(model, "input")
        started = time.perf_counter()
        decoder = HieroDecoder(grammar, lm, manifest["default_weights"], pop_limit=POP_LIMIT,
                               max_span=MAX_SPAN)
        setup = time.perf_counter() - started
        decoder.decode(sources[0])                       # numba's kernels compiled or loaded
        ours, seconds, edges, forests = [], 0.0, [], []
        for i, sentence in enumerate(sources):
            started = time.perf_counter()
            decoded = decoder.decode(sentence)
            seconds += time.perf_counter() - started
            ours.append(decoded.best)
            edges.append(decoded.hypergraph.n_edges)
            if i < FOREST_SENTENCES:
                forests.append(decoded.hypergraph)
        words = sum(len(s.split()) for s in sources)
        result = {
            "sentences": len(sources), "words": words, "pop_limit": POP_LIMIT, "max_chart_span": MAX_SPAN,
            "rules": manifest["grammars"]["input"]["rules"],
            "ours": {"bleu": round(sacrebleu.corpus_bleu(ours, [references], tokenize="none").score, 2),
                     "seconds": round(seconds, 1), "words_per_second": round(words / seconds, 1),
                     "setup_seconds": round(setup, 1)},
            "anchor": ANCHOR,
            "forest_edges_per_sentence": _spread(edges),
            "line_search": _line_search(forests, references[:len(forests)], decoder.full_weights()),
        }
        # pop limit 1000 on the first sentences: speed and forest size
        few = sources[:POP_1000_SENTENCES]
        decoder_1000 = HieroDecoder(grammar, lm, manifest["default_weights"], pop_limit=1000,
                                    max_span=MAX_SPAN)
        decoder_1000.decode(few[0])
        started = time.perf_counter()
        edges_1000 = [decoder_1000.decode(sentence).hypergraph.n_edges for sentence in few]
        seconds_1000 = time.perf_counter() - started
        few_words = sum(len(s.split()) for s in few)
        result["pop_1000"] = {"sentences": len(few), "words_per_second": round(few_words / seconds_1000, 1),
                              "forest_edges_per_sentence": _spread(edges_1000)}
        if MOSES.is_file():         # Moses at pop limit 1000 on the same sentences, in the same run
            (data / "few.src").write_text("".join(s + "\n" for s in few), encoding="utf-8")
            done = subprocess.run([str(MOSES), "-f", str(model / "grammars" / "input" / "moses.ini"), "-threads", "1",
                                   "-cube-pruning-pop-limit", "1000", "-i", str(data / "few.src")],
                                  capture_output=True, text=True)
            moses_seconds = sum(float(x) for x in re.findall(
                r"Line \d+: Translation took ([0-9.]+) seconds total", done.stderr))
            if done.returncode == 0 and moses_seconds:
                result["pop_1000"]["moses_words_per_second"] = round(few_words / moses_seconds, 1)
                result["pop_1000"]["speed_ratio_vs_moses"] = round(moses_seconds / seconds_1000, 2)
            else:
                result["pop_1000"]["moses_error"] = done.stderr[-500:]
        # minismt decode as a user runs it: its peak memory
        cli = "import sys; from minismt.cli import main; sys.exit(main(sys.argv[1:]))"
        ours_mb, done = _peak_mb([sys.executable, "-c", cli, "decode", "--model", str(model), "--input",
                                  str(data / "input.src"), "--output", str(Path(tmp) / "ours.out"), "--pop-limit",
                                  str(POP_LIMIT), "--max-chart-span", str(MAX_SPAN), "--jobs", "1", "--quiet"])
        result["ours"]["decode_peak_mb"] = ours_mb if done.returncode == 0 else done.stderr[-300:]
        if MOSES.is_file():
            moses_mb, done = _peak_mb([str(MOSES), "-f", str(model / "grammars" / "input" / "moses.ini"),
                                       "-threads", "1", "-cube-pruning-pop-limit", str(POP_LIMIT),
                                       "-i", str(data / "input.src")])
            if done.returncode == 0:
                theirs = [line.strip() for line in done.stdout.splitlines()]
                moses_seconds = sum(float(x) for x in re.findall(
                    r"Line \d+: Translation took ([0-9.]+) seconds total", done.stderr))
                result["moses"] = {
                    "bleu": round(sacrebleu.corpus_bleu(theirs, [references], tokenize="none").score, 2),
                    "seconds": round(moses_seconds, 1), "peak_mb": moses_mb,
                    "words_per_second": round(words / moses_seconds, 1) if moses_seconds else None}
                result["same_1best"] = sum(a == b for a, b in zip(ours, theirs))
                if moses_seconds:
                    result["speed_ratio_vs_moses"] = round(moses_seconds / seconds, 2)
            else:
                result["moses"] = {"error": done.stderr[-500:]}
        else:
            result["moses"] = {"error": f"{MOSES} missing"}
        result["cdec"] = _cdec(model, Path(tmp), references)
        if isinstance(result["ours"]["decode_peak_mb"], float) and "peak_mb" in result["cdec"]:
            result["memory_ratio_vs_cdec"] = round(result["ours"]["decode_peak_mb"] / result["cdec"]["peak_mb"], 2)
    return result


def _cdec(model: Path, tmp: Path, references: list[str]) -> dict:
    """cdec decoding the model's cdec folder (table limit 20 under the default weights), the LM made
    binary by KenLM's build_binary as the cdec anchor has it: BLEU, decoding seconds, peak memory."""
    import sacrebleu
    if not (CDEC.is_file() and BUILD_BINARY.is_file()):
        return {"error": f"{CDEC} or {BUILD_BINARY} missing"}
    folder = model / "grammars" / "input" / "cdec"
    arpa = next((model / "lm").glob("*.arpa"))
    done = subprocess.run([str(BUILD_BINARY), str(arpa), str(tmp / "lm.binlm")], capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr[-500:]}
    ini = tmp / "cdec.ini"
    ini.write_text((folder / "cdec.ini").read_text().replace(str(arpa.resolve()), str(tmp / "lm.binlm")))
    started = time.perf_counter()
    peak, done = _peak_mb([str(CDEC), "-c", str(ini), "-w", str(folder / "weights"), "-i", str(folder / "input.txt")])
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        return {"error": done.stderr[-500:]}
    theirs = [line.removeprefix("<s>").removesuffix("</s>").strip() for line in done.stdout.splitlines()]
    return {"bleu": round(sacrebleu.corpus_bleu(theirs, [references], tokenize="none").score, 2),
            "process_seconds": round(seconds, 1), "peak_mb": peak}
