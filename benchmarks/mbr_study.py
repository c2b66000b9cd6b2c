"""MBR and consensus decoding against Viterbi decoding of the same weights, and against Moses' ``-mbr``,
``-lmbr`` and ``-con`` on the same model and weights, on Multi30k de-en test_2016.

Two systems trained on the full corpus (benchmarks/tuner_quality.py's ``prepare``): minismt's phrase-based model
and its Hiero model, each tuned by MERT on the full dev set (seed 1, 6 iterations). With the tuned weights,
test_2016 is decoded three ways by ``minismt decode`` (two processes): Viterbi, ``--mbr kbest`` (Kumar & Byrne
2004: the 200 best distinct translations, each against the others, sentence BLEU+1 gains, posterior
``exp(w . f)``) and ``--mbr forest`` (DeNero et al. 2009: the same candidates against the expected n-gram counts
of every derivation of the search graph). The phrase-based model's moses.ini with the same weights is decoded by
Moses (two threads) with its Viterbi search, ``-mbr`` (200 candidates, scale 1), ``-lmbr`` (Tromble et al. 2008,
its default parameters) and ``-con`` (DeNero et al. 2009); Moses' chart decoder has no MBR, so Hiero is ours only.
The Moses built for these machines runs ``-lmbr`` (its log shows the lattice MBR scores) but writes no line to
standard output (and refuses ``-mbr -lmbr`` together); the result records that as its error.
The posterior scale of each kind (k-best MBR, consensus) is the one of :data:`SCALES` with the best dev BLEU, for
ours and Moses alike. Reported: BLEU (sacrebleu on the tokenised lowercased text), the change against Viterbi, the
dev BLEU of each scale, and the wall-clock
seconds per sentence of each decode (model loading included, for both). The papers report +0.3 to +1 BLEU for
MBR and consensus decoding over Viterbi. Quick mode: 3,000 training pairs, 100 dev and test sentences, 2
iterations, phrase-based only.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tuner_quality  # noqa: E402

MOSES = tuner_quality.MULTI30K.parents[1] / "tools" / "moses" / "bin" / "moses"
MODES = {"viterbi": [], "kbest": ["--mbr", "kbest"], "forest": ["--mbr", "forest"]}
MOSES_MODES = {"viterbi": ([], None), "mbr": (["-mbr", "-mbr-size", "200"], "kbest"), "lmbr": (["-lmbr"], "kbest"),
               "con": (["-con"], "forest")}
"""Moses' decodings, each with the posterior scale chosen for ours of the same kind."""
SCALES = (1.0, 3.0, 10.0, 30.0, 100.0)
"""The posterior scales tried on the dev set (weights tuned to an L1 norm of 1 make ``exp(w . f)`` flat at scale 1,
the default of Moses and of ``minismt decode``: Tromble et al. and DeNero et al. tune the scale on held-out data)."""
JOBS = 2


def _bleu(hypotheses: list[str], references: list[str]) -> float:
    import sacrebleu
    return round(sacrebleu.corpus_bleu(hypotheses, [references], tokenize="none").score, 2)


def _tune(model: Path, data: Path, folder: Path, iterations: int, quick: int | None) -> tuple[dict, object]:
    """MERT seed 1 on the dev set: the tuned weights by name, and the decoder's space."""
    from minismt.decode import DecoderSettings
    from minismt.io import read_lines
    from minismt.parallel import named_weights
    from tuners.devdecoder import MinismtDevDecoder
    from tuners.loop import TuningRun
    dev_src, dev_ref = read_lines(data / "dev.src"), read_lines(data / "dev.tgt")
    if quick:
        dev_src, dev_ref = dev_src[:quick], dev_ref[:quick]
    decoder = MinismtDevDecoder(str(model), dev_src, DecoderSettings(kbest=100, jobs=JOBS))
    tuning = TuningRun(decoder, [[r] for r in dev_ref], "mert", folder / "tune", max_iter=iterations, seed=1)
    final = tuning.run(decoder.default_weights)
    decoder.close()
    weights, names = named_weights(decoder.space, final)
    return dict(zip(names, weights.tolist())), tuning


def _ours(model: Path, source: Path, weights_file: Path, out: Path, mode: list[str]) -> float:
    """``minismt decode`` of ``source`` into ``out``: wall-clock seconds."""
    cli = "import sys; from minismt.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = [sys.executable, "-c", cli, "decode", "--model", str(model), "--input", str(source), "--output", str(out),
            "--weights", str(weights_file), "--jobs", str(JOBS), "--quiet", *mode]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-500:])
    return time.perf_counter() - started


def _moses(ini: Path, source: Path, mode: list[str]) -> tuple[list[str], float] | str:
    started = time.perf_counter()
    done = subprocess.run([str(MOSES), "-f", str(ini), "-threads", str(JOBS), "-i", str(source), *mode],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        return done.stderr[-500:]
    output = [line.strip() for line in done.stdout.splitlines()]
    if len(output) != sum(1 for _ in open(source, encoding="utf-8")):
        return f"{len(output)} lines of output (exit status 0)"
    return output, seconds


def _system(kind: str, tmp: Path, quick: bool) -> dict:
    from minismt.io import read_lines
    from plugins.moses.ini import write_moses_ini
    folder = tmp / kind
    folder.mkdir()
    data, model = tuner_quality.prepare("multi30k-de-en", folder, 3000 if quick else None, kind,
                                        100 if quick else None)
    weights, tuning = _tune(model, data, folder, 2 if quick else 6, 100 if quick else None)
    weights_file = folder / "weights.txt"
    weights_file.write_text("".join(f"{name} {value!r}\n" for name, value in weights.items()), encoding="utf-8")
    source, references = data / "test.src", read_lines(data / "test.tgt")
    if quick:
        source = folder / "test100.src"
        source.write_text("".join(line + "\n" for line in read_lines(data / "test.src")[:100]), encoding="utf-8")
        references = references[:100]
    n = len(references)
    result = {"dev_bleu_tuned": round(100 * max(r.dev_bleu for r in tuning.history), 2), "sentences": n, "ours": {}}
    dev_source, dev_references = data / "dev.src", read_lines(data / "dev.tgt")
    if quick:
        dev_source = folder / "dev100.src"
        dev_source.write_text("".join(line + "\n" for line in read_lines(data / "dev.src")[:100]), encoding="utf-8")
        dev_references = dev_references[:100]
    scales = {}
    for name, mode in MODES.items():
        if mode:  # the scale with the best dev BLEU
            dev_bleu = {}
            for scale in SCALES:
                _ours(model, dev_source, weights_file, folder / "dev.out", [*mode, "--mbr-scale", str(scale)])
                dev_bleu[scale] = _bleu(read_lines(folder / "dev.out"), dev_references)
            scales[name] = max(SCALES, key=lambda x: (dev_bleu[x], -x))
            mode = [*mode, "--mbr-scale", str(scales[name])]
        out = folder / f"{name}.out"
        seconds = _ours(model, source, weights_file, out, mode)
        result["ours"][name] = {"bleu": _bleu(read_lines(out), references),
                                "seconds_per_sentence": round(seconds / n, 4)}
        if name in scales:
            result["ours"][name].update(scale=scales[name], dev_bleu_by_scale={str(k): v for k, v in dev_bleu.items()})
    viterbi = result["ours"]["viterbi"]["bleu"]
    for name in ("kbest", "forest"):
        result["ours"][name]["gain_over_viterbi"] = round(result["ours"][name]["bleu"] - viterbi, 2)
    if kind == "phrase":
        if not MOSES.is_file():
            result["moses"] = {"error": f"{MOSES} missing"}
            return result
        ini = folder / "moses.tuned.ini"
        write_moses_ini(model / "moses.ini", ini, weights)
        result["moses"] = {}
        for name, (mode, like) in MOSES_MODES.items():
            if like is not None:
                mode = [*mode, "-mbr-scale", str(scales[like])]
            found = _moses(ini, source, mode)
            if isinstance(found, str):
                result["moses"][name] = {"error": found}
                continue
            output, seconds = found
            result["moses"][name] = {"bleu": _bleu(output, references), "seconds_per_sentence": round(seconds / n, 4)}
        base = result["moses"].get("viterbi", {}).get("bleu")
        for name in ("mbr", "lmbr", "con"):
            if base is not None and "bleu" in result["moses"][name]:
                result["moses"][name]["gain_over_viterbi"] = round(result["moses"][name]["bleu"] - base, 2)
    return result


def table(result: dict) -> str:
    """Markdown: per system and decoder, each decoding's test BLEU, its gain over Viterbi, seconds per sentence."""
    lines = ["| system | decoding | test BLEU | over Viterbi | s / sentence |", "|---|---|---|---|---|"]
    for kind in ("phrase", "hiero"):
        if kind not in result:
            continue
        for who in ("ours", "moses"):
            for name, row in result[kind].get(who, {}).items():
                if "bleu" in row:
                    lines.append(f"| {kind} | {'minismt' if who == 'ours' else 'Moses'} {name} | {row['bleu']:.2f} | "
                                 f"{row.get('gain_over_viterbi', 0.0):+.2f} | {row['seconds_per_sentence']:.4f} |")
    return "\n".join(lines)


def run(quick: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        result = {kind: _system(kind, Path(tmp), quick) for kind in (("phrase",) if quick else ("phrase", "hiero"))}
    result["table"] = table(result)
    return result
