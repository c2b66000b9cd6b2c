"""Compile numba's decoder and tuner kernels in a second process while the pipeline trains.

On a fresh install numba's cache is empty, and compiling the kernels of the
decoder, the k-best extraction and the tuners takes longer than the demo's
decoding and tuning themselves. Training runs on one core; this process uses
the other: it writes a made-up model (a few phrase pairs, a bigram LM) in the
same files ``minismt train`` writes, and runs one tuning iteration of every
configured tuner on it with the pipeline's decoder settings. That compiles the
kernels with the argument types the real runs use, and numba caches them on
disk, so the tuning runs load them instead of compiling them. Nothing of the
made-up model reaches the pipeline's results.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import replace

import numpy as np

from minismt.corpus import Vocabulary
from minismt.decode import DEFAULT_WEIGHTS, DecoderSettings
from minismt.extract.phrase_table import PhraseTable
from minismt.io import atomic_write
from minismt.manifest import MANIFEST, MANIFEST_FORMAT
from minismt.parallel import DecodeJob, decode_chunk
from minismt.pipeline.log import PipelineLog
from tuners.runs import minismt_tuning_run, tuning_settings

SOURCES = ["a b c d", "b c a", "d a b c e", "c d e a b", "e"]
REFERENCES = ["x y z w", "y z x", "w x y z v", "z w v x y", "v"]


def write_toy_model(folder: str) -> str:
    """A model directory like ``minismt train``'s: phrase pairs over :data:`SOURCES` and a bigram ARPA LM."""
    rng = np.random.default_rng(0)
    src_words = sorted({w for s in SOURCES for w in s.split()})
    tgt_words = sorted({w for r in REFERENCES for w in r.split()})
    src_vocab, tgt_vocab = Vocabulary(src_words), Vocabulary(tgt_words)
    pairs = {}
    for sentence, reference in zip(SOURCES, REFERENCES):
        words, targets = sentence.split(), reference.split()
        for length in (1, 2):
            for start in range(len(words) - length + 1):
                gram = tuple(words[start:start + length])
                for k in range(2):
                    pairs[(gram, tuple(targets[(start + k) % len(targets):][:length] or targets[:1]))] = None
    rows = list(pairs)
    src_ids = [src_vocab.encode(list(g), grow=False) for g, _ in rows]
    tgt_ids = [tgt_vocab.encode(list(t), grow=False) for _, t in rows]
    n = len(rows)
    reordering = rng.dirichlet(np.ones(3), size=2 * n).reshape(n, 6)
    table = PhraseTable.from_rows(
        src_vocab, tgt_vocab, np.concatenate(src_ids), np.cumsum([0] + [len(x) for x in src_ids]),
        np.concatenate(tgt_ids), np.cumsum([0] + [len(x) for x in tgt_ids]), rng.uniform(0.05, 1.0, (n, 4)),
        np.ones((n, 3)), np.zeros((0, 2), dtype=np.int16), np.zeros(n + 1, dtype=np.int64), reordering)
    os.makedirs(os.path.join(folder, "model"), exist_ok=True)
    os.makedirs(os.path.join(folder, "lm"), exist_ok=True)
    table.save(os.path.join(folder, "model", "phrase-table"))
    unigrams = ["<unk>", "<s>", "</s>"] + tgt_words
    bigrams = [f"{a} {b}" for a in ["<s>"] + tgt_words for b in tgt_words + ["</s>"]]
    lines = ["", "\\data\\", f"ngram 1={len(unigrams)}", f"ngram 2={len(bigrams)}", "", "\\1-grams:"]
    lines += [f"{-99.0 if w == '<s>' else -1.5:.4f}\t{w}" + ("" if w in ("</s>", "<unk>") else "\t-0.3000")
              for w in unigrams]
    lines += ["", "\\2-grams:"] + [f"{-0.2 - 0.1 * (i % 7):.4f}\t{g}" for i, g in enumerate(bigrams)]
    lines += ["", "\\end\\", ""]
    with atomic_write(os.path.join(folder, "lm", "lm.2.arpa")) as out:
        out.write("\n".join(lines))
    manifest = {"format": MANIFEST_FORMAT, "lm_order": 2, "features": list(DEFAULT_WEIGHTS),
                "default_weights": dict(DEFAULT_WEIGHTS), "distortion_limit": 6,
                "files": {"phrase_table": "model/phrase-table", "lm_arpa": "lm/lm.2.arpa"}}
    with atomic_write(os.path.join(folder, MANIFEST)) as out:
        json.dump(manifest, out, indent=2, sort_keys=True)
    return folder


def compile_kernels(tune: dict, log_path: str | None = None) -> list[str]:
    """One tuning iteration of each tuner of ``tune`` (the pipeline's ``[tune]`` table) on the toy model,
    and a 1-best decode; returns the tuners that failed on it (logged, not raised: the real runs then
    compile what is missing themselves)."""
    failed = []
    with tempfile.TemporaryDirectory(prefix="minismt-precompile-") as folder:
        model_dir = write_toy_model(folder)
        decode_chunk(DecodeJob(model_dir, DecoderSettings(stack_size=tune["stack"])), list(range(len(SOURCES))),
                     SOURCES)
        settings = replace(tuning_settings(tune), jobs=1)
        for index, tuner in enumerate(tune["tuners"]):
            try:
                run = minismt_tuning_run(model_dir, SOURCES, [[r] for r in REFERENCES], tuner,
                                         os.path.join(folder, f"run-{index}"), settings, accumulate=tune["accumulate"],
                                         reset_after=tune["reset_after"], iterations=1,
                                         params=tune["params"].get(tuner, {}))
                try:
                    run.run(run.decoder.default_weights)
                finally:
                    run.decoder.close()
            except Exception as err:  # a toy problem a tuner cannot handle only means less is compiled here
                failed.append(tuner)
                if log_path:
                    PipelineLog(log_path, echo=False)(f"precompile: {tuner} on the toy model: "
                                                      f"{type(err).__name__}: {err}")
    return failed
