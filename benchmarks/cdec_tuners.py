"""cdec's own minimum risk and MIRA (``minrisk_optimize``, ``kbest_cut_mira``) against minismt's ``minrisk``,
``hg-minrisk`` and ``mira`` on the same cdec systems, decoded by the real cdec.

1. ``decode_nc`` (../shared/fixtures/cdec/decode_nc: 10 dev sentences, cdec's Hiero grammar and trigram LM):
   cdec decodes the dev set from ``weights.init`` into forests and 100-best lists; on them, once each:
   ``minrisk_optimize -m ibm_bleu -k 100`` (the tools README's command, what cdec's ``minrisk.pl`` runs per
   iteration) against ``hg-minrisk`` on the same forests and ``minrisk`` on the same lists; one pass of
   ``kbest_cut_mira`` (mira.py's flags: ``-o 2 -C 0.001 -k 100 -u -e -m ibm_bleu -s 1 -b 1 -h 1 -f 1``) against one
   round of ``mira`` through minismt's cdec driver (cdec decodes each sentence as the weights learn). Each
   result's weights are decoded by cdec: dev BLEU, and the seconds each tuner took.
2. The Multi30k de-en Hiero system of ../shared/fixtures/cdec/m30k-tuners (``minismt train --hiero`` with
   grammars for the dev set, 1,014 sentences, and test_2016; cdec.ini at pop limit 200), tuned through
   minismt's cdec driver for 3 iterations from the default weights by ``hg-minrisk``, ``minrisk`` and
   ``mira`` (``minismt tune --decoder cdec``; seed 1; MIRA in mini-batches of :data:`MIRA_BATCH` sentences),
   every iteration decoded by cdec; the returned weights
   decode test_2016 by cdec. The fixture's numbers for cdec's own loops on this system (its README): untuned
   dev 37.48, test 39.02; ``minrisk_optimize`` 3 iterations: dev 31.78, 4.0, 18.6, test 19.49;
   ``kbest_cut_mira`` 3 passes: test 39.48. Ours must beat both and never fall.

Quick mode: part 1 only.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
CDEC = SHARED / "tools" / "cdec"
DECODE_NC = SHARED / "fixtures" / "cdec" / "decode_nc"
MULTI30K = SHARED / "corpora" / "multi30k"
FIXTURE = {"untuned_dev": 37.48, "untuned_test": 39.02, "minrisk_dev": [31.78, 4.0, 18.6], "minrisk_test": 19.49,
           "mira_online_dev": [39.87, 39.64, 39.61], "mira_final_dev": 39.82, "mira_test": 39.48}
"""cdec's loops on the Multi30k Hiero system (../shared/fixtures/cdec/m30k-tuners/README.md)."""
MIRA_BATCH = 32
"""Sentences per cdec run of ``mira`` on the Multi30k system: the driver starts cdec once per mini-batch (loading
the grammar and LM each time), where cdec's ``kbest_cut_mira`` keeps its decoder loaded; mini-batches of one
sentence would make 1,014 cdec starts a round."""
MIRA_FLAGS = ["-o", "2", "-C", "0.001", "-k", "100", "-u", "-e", "-m", "ibm_bleu", "-s", "1", "-b", "1", "-h", "1",
              "-f", "1", "-S", "1"]


def _run(argv, cwd, stdout=None, stdin=None) -> float:
    started = time.perf_counter()
    done = subprocess.run([str(a) for a in argv], cwd=cwd, stdout=stdout or subprocess.DEVNULL,
                          stderr=subprocess.PIPE, stdin=stdin, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]}: {done.stderr[-400:]}")
    return time.perf_counter() - started


def _bleu(path: Path, references: list[str]) -> float:
    import sacrebleu
    lines = [" ".join(w for w in line.split() if w not in ("<s>", "</s>"))
             for line in path.read_text(encoding="utf-8").splitlines()]
    return round(sacrebleu.corpus_bleu(lines, [references], tokenize="none").score, 2)


def _decode(folder: Path, config: Path, weights: Path, source: Path, out: Path) -> float:
    with open(out, "w", encoding="utf-8") as handle:
        return _run([CDEC / "cdec", "-c", config, "-w", weights, "-i", source], folder, stdout=handle)


def _absolute(text: str, folder: Path) -> str:
    """A cdec.ini's text with its file names (``grammar=FILE``, ``feature_function=KLanguageModel FILE``) made
    absolute, so that a decoder run from another folder finds them."""
    out = []
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        words = [str(folder / w) if (folder / w).is_file() else w for w in value.split(" ")]
        out.append(key + sep + " ".join(words))
    return "\n".join(out) + "\n"


def decode_nc(tmp: Path) -> dict:
    """Part 1 (module docstring)."""
    import numpy as np
    from minismt.features import FeatureSpace
    from minismt.hypergraph import ForestData, read_cdec_forests
    from minismt.io import read_lines
    from minismt.metrics import BleuReferences
    from plugins.cdec.driver import CdecDevDecoder
    from plugins.cdec.kbest_file import read_kbest
    from plugins.cdec.weights import read_cdec_weights, write_cdec_weights
    from tuners.loop import TuningRun
    from tuners.minrisk import ForestMinimumRisk, MinimumRisk
    folder = tmp / "decode_nc"
    shutil.copytree(DECODE_NC, folder)
    config, source = folder / "cdec.abs.ini", folder / "dev.src"
    config.write_text(_absolute((folder / "cdec.run.ini").read_text(encoding="utf-8"), folder), encoding="utf-8")
    references = read_lines(folder / "dev.refs")
    start = read_cdec_weights(folder / "weights.init")
    space = FeatureSpace(list(start))
    (folder / "hgs").mkdir()
    with open(folder / "kbest.txt", "w", encoding="utf-8") as handle:
        _run([CDEC / "cdec", "-c", config, "-w", "weights.init", "-i", source, "-k", "100", "-r", "-O", "hgs"],
             folder, stdout=handle)
    _decode(folder, config, folder / "weights.init", source, folder / "untuned.out")
    result = {"sentences": len(references), "untuned_dev": _bleu(folder / "untuned.out", references)}
    n = len(references)
    (folder / "agenda").write_text("".join(f"hgs/{i}.bin.gz {i}\n" for i in range(n)), encoding="utf-8")
    rows = {}
    with open(folder / "w.cdec-minrisk", "w", encoding="utf-8") as handle:
        seconds = _run([CDEC / "minrisk_optimize", "-r", "dev.refs", "-m", "ibm_bleu", "-i", "agenda", "-k", "100",
                        "-w", "weights.init"], folder, stdout=handle)
    rows["cdec minrisk_optimize"] = (folder / "w.cdec-minrisk", seconds)
    w0 = space.weights(start, grow=False)
    bleu_references = BleuReferences([[r] for r in references])
    forests = read_cdec_forests(folder / "hgs", n, space)
    kbest = read_kbest(folder / "kbest.txt", space=space, n_sentences=n)
    kbest.set_stats(bleu_references.kbest_stats(kbest))
    for name, tuner, data in (
            ("minismt hg-minrisk", ForestMinimumRisk(), ForestData(forests, np.arange(n), bleu_references)),
            ("minismt minrisk", MinimumRisk(), kbest)):
        started = time.perf_counter()
        weights = tuner.fit(data, w0)
        seconds = time.perf_counter() - started
        path = folder / f"w.{name.split()[1]}"
        write_cdec_weights(path, space.weights_dict(weights, skip_zero_sparse=True))
        rows[name] = (path, seconds)
    (folder / "mw").mkdir()
    (folder / "md").mkdir()
    with open(source, encoding="utf-8") as stdin:
        seconds = _run([CDEC / "kbest_cut_mira", "-c", config, "-w", "weights.init", "-r", "dev.refs", "-p", "0",
                        *MIRA_FLAGS, "-O", "mw", "-D", "md"], folder, stdin=stdin)
    rows["cdec kbest_cut_mira"] = (next((folder / "mw").iterdir()), seconds)
    decoder = CdecDevDecoder([str(CDEC / "cdec")], config, folder / "weights.init", read_lines(source),
                             folder / "ours-mira-work", kbest=100)
    started = time.perf_counter()
    run = TuningRun(decoder, [[r] for r in references], "mira", folder / "ours-mira", max_iter=2, seed=1,
                    return_best=False)
    weights = run.run(decoder.default_weights)
    seconds = time.perf_counter() - started
    path = folder / "w.mira"
    write_cdec_weights(path, space.weights_dict(weights, skip_zero_sparse=True))
    rows["minismt mira"] = (path, seconds)
    for name, (path, seconds) in rows.items():
        _decode(folder, config, path, source, folder / "tuned.out")
        result[name] = {"dev_bleu": _bleu(folder / "tuned.out", references), "seconds": round(seconds, 2)}
    return result


def multi30k_hiero(tmp: Path, iterations: int = 3) -> dict:
    """Part 2 (module docstring)."""
    from corpora.fetch import fetch
    from minismt.io import read_lines
    from minismt.train import Trainer, TrainingConfig
    from plugins.cdec.driver import CdecDevDecoder
    from plugins.cdec.weights import write_cdec_weights
    from tuners.loop import TuningRun
    data, model = tmp / "data", tmp / "h"
    fetch("multi30k-de-en", data, from_dir=MULTI30K, progress=False)
    Trainer(TrainingConfig(src=str(data / "train.src"), tgt=str(data / "train.tgt"), out=str(model), model="hiero",
                           grammar_inputs=(str(data / "dev.src"), str(data / "test.src")), progress=False)).run()
    dev_folder, test_folder = model / "grammars" / "dev" / "cdec", model / "grammars" / "test" / "cdec"
    dev_config, test_config, start = dev_folder / "cdec.ini", test_folder / "cdec.ini", dev_folder / "weights"
    dev_src, dev_ref = read_lines(dev_folder / "input.txt"), read_lines(data / "dev.tgt")  # <s> ... </s>
    test_ref = read_lines(data / "test.tgt")
    _decode(tmp, test_config, start, test_folder / "input.txt", tmp / "untuned.test")
    result = {"untuned_test": _bleu(tmp / "untuned.test", test_ref), "fixture_cdec": FIXTURE, "runs": {}}
    for tuner in ("hg-minrisk", "minrisk", "mira"):
        decoder = CdecDevDecoder([str(CDEC / "cdec")], dev_config, start, dev_src, tmp / f"{tuner}-work", kbest=100)
        started = time.perf_counter()
        params = {"batch_size": MIRA_BATCH} if tuner == "mira" else {}
        run = TuningRun(decoder, [[r] for r in dev_ref], tuner, tmp / f"{tuner}-run", max_iter=iterations + 1,
                        seed=1, tuner_params=params)
        weights = run.run(decoder.default_weights)
        seconds = time.perf_counter() - started
        path = tmp / f"w.{tuner}"
        write_cdec_weights(path, decoder.space.weights_dict(weights, skip_zero_sparse=True))
        _decode(tmp, test_config, path, test_folder / "input.txt", tmp / f"{tuner}.test")
        dev = [round(100 * r.dev_bleu, 2) for r in run.history]
        result["runs"][tuner] = {"dev_bleu_per_iteration": dev, "test_bleu": _bleu(tmp / f"{tuner}.test", test_ref),
                                 "largest_fall_below_start": round(max(0.0, dev[0] - min(dev)), 2),
                                 "seconds": round(seconds, 1)}
        decoder.close()
    result["runs_beat_cdec"] = {name: row["test_bleu"] > max(FIXTURE["minrisk_test"], FIXTURE["mira_test"])
                                for name, row in result["runs"].items()}
    return result


def run(quick: bool = False) -> dict:
    if not (CDEC / "cdec").is_file():
        return {"error": f"{CDEC} missing"}
    with tempfile.TemporaryDirectory() as tmp:
        result = {"decode_nc": decode_nc(Path(tmp))}
        if not quick:
            folder = Path(tmp) / "m30k"
            folder.mkdir()
            result["multi30k_hiero"] = multi30k_hiero(folder)
    return result
