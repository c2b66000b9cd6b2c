"""Paired bootstrap resampling between systems (Koehn 2004), with sacrebleu's own implementation.

:func:`paired_bootstrap` runs ``sacrebleu.significance.PairedTest`` with
``test_type="bs"``: the Moses script ``bootstrap-hypothesis-difference-significance.pl``
as sacrebleu reimplements it. For each of ``n_samples`` resamples of the test
sentences (with replacement, the same resamples for both systems, drawn from
``numpy.random.default_rng(seed)``) the metric of both systems is recomputed from
their sufficient statistics; the p-value is ``(c + 1) / (n_samples + 1)``, ``c``
counting resamples whose centred absolute difference exceeds the observed one.
sacrebleu reads its seed from the ``SACREBLEU_SEED`` environment variable; it is
set for the duration of the call and restored afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Sequence

import sacrebleu
from sacrebleu.significance import PairedTest

from minismt.errors import InputError
from minismt.metrics.evaluate import bleu_scorer


@contextlib.contextmanager
def _sacrebleu_seed(seed: int):
    """``SACREBLEU_SEED`` set to ``seed``, and sacrebleu's INFO log (a line per system and metric of the
    bootstrap, written to the terminal by its own handler) held back, while the block runs."""
    old = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(int(seed))
    logger = logging.getLogger("sacrebleu")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)
        if old is None:
            os.environ.pop("SACREBLEU_SEED", None)
        else:
            os.environ["SACREBLEU_SEED"] = old


def _metrics(tokenize: str, lowercase: bool, which: Sequence[str]) -> dict:
    made = {"BLEU": lambda: bleu_scorer(lowercase, tokenize),
            "chrF": lambda: sacrebleu.CHRF(lowercase=lowercase),
            "TER": lambda: sacrebleu.TER()}
    unknown = [m for m in which if m not in made]
    if unknown:
        raise InputError(f"metric {unknown[0]!r}", expected="BLEU, chrF or TER")
    return {name: made[name]() for name in which}


def paired_bootstrap(systems: Sequence[tuple[str, Sequence[str]]], references: Sequence[str],
                     n_samples: int = 1000, seed: int = 12345, tokenize: str = "none",
                     lowercase: bool = False, metrics: Sequence[str] = ("BLEU", "chrF", "TER"),
                     all_pairs: bool = True) -> dict:
    """Paired bootstrap p-values between every pair of ``systems`` (``(name, hypotheses)``), or with
    ``all_pairs=False`` between the first system and each other one.

    Returns ``{"pairs": [{"a", "b", "metric", "score_a", "score_b", "p_value"}...],
    "signatures": {metric: sacrebleu signature incl. the bootstrap settings},
    "implementation": ..., "samples": n, "seed": s}``. ``seed`` must be >= 1 (sacrebleu
    treats 0 as "unseeded"). BLEU is :func:`minismt.metrics.evaluate.bleu_scorer`'s
    (no tokenized-period warning with ``tokenize="none"``).
    """
    if seed < 1:
        raise InputError(f"bootstrap seed {seed}", expected="an integer >= 1 (0 is unseeded to sacrebleu)")
    if n_samples < 1:
        raise InputError(f"bootstrap samples {n_samples}", expected="at least 1")
    systems = [(name, list(hyps)) for name, hyps in systems]
    refs = list(references)
    for name, hyps in systems:
        if len(hyps) != len(refs):
            raise InputError(f"system {name!r} has {len(hyps)} hypotheses for {len(refs)} references",
                             expected="one hypothesis per test sentence")
    pairs, signatures = [], {}
    with _sacrebleu_seed(seed):
        for i in range(len(systems) - 1 if all_pairs else 1):
            test = PairedTest(systems[i:], _metrics(tokenize, lowercase, metrics), references=[refs],
                              test_type="bs", n_samples=n_samples)
            sigs, scores = test()
            for metric in scores:
                if metric == "System":
                    continue
                key = next(m for m in metrics if metric.startswith(m))
                signatures.setdefault(key, str(sigs[metric]))
                base = scores[metric][0]
                for name, result in zip(scores["System"][1:], scores[metric][1:]):
                    pairs.append({"a": systems[i][0], "b": name, "metric": key,
                                  "score_a": float(base.score), "score_b": float(result.score),
                                  "p_value": float(result.p_value)})
    return {"implementation": "sacrebleu.significance.PairedTest(test_type='bs')",
            "samples": n_samples, "seed": seed, "signatures": signatures, "pairs": pairs}
