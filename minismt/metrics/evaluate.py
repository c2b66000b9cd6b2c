"""Corpus BLEU, chrF and TER of a hypothesis file with sacrebleu, as its command line reports them."""

from __future__ import annotations

from typing import Sequence

import sacrebleu

from minismt.errors import InputError
from minismt.io import read_lines


def bleu_scorer(lowercase: bool = False, tokenize: str | None = None) -> sacrebleu.BLEU:
    """sacrebleu's BLEU with ``tokenize`` (default ``13a``). ``tokenize="none"`` says the text is
    tokenised on purpose, so sacrebleu's ``force`` is on: no warning that 100 lines end in a tokenised
    period (the scores are the same); with a tokenizer the warning stays, it may point at text that was
    meant to be raw. An unknown tokenizer, or one whose extra package is missing, is an :class:`InputError`."""
    try:
        return sacrebleu.BLEU(lowercase=lowercase, force=tokenize == "none",
                              **({"tokenize": tokenize} if tokenize else {}))
    except (KeyError, ValueError):
        known = ", ".join(getattr(sacrebleu.BLEU, "TOKENIZERS", ["13a", "none", "intl", "char", "zh"]))
        raise InputError(f"unknown BLEU tokenizer {tokenize!r}", expected=f"one of {known}") from None
    except (ImportError, RuntimeError) as err:  # a tokenizer whose extra package is not installed
        reason = " ".join(str(err).split())[:160]
        raise InputError(f"BLEU tokenizer {tokenize!r} cannot run here ({reason})",
                         expected="its extra package installed, or another tokenizer") from None


def evaluate(hypotheses: Sequence[str], reference_sets: Sequence[Sequence[str]],
             lowercase: bool = False, tokenize: str | None = None) -> dict:
    """BLEU, chrF and TER with sacrebleu's defaults (0..100), their signatures and BLEU's details.

    ``reference_sets`` holds one list of lines per reference file. ``lowercase``
    makes BLEU and chrF case-insensitive (sacrebleu's TER already is);
    ``tokenize`` overrides BLEU's tokenizer (default ``13a``; ``none`` for
    pre-tokenised text, as tuning uses; see :func:`bleu_scorer`).
    """
    if not hypotheses:
        raise InputError("no hypotheses to score", expected="at least one line")
    bleu = bleu_scorer(lowercase, tokenize)
    chrf = sacrebleu.CHRF(lowercase=lowercase)
    ter = sacrebleu.TER()
    refs = [list(r) for r in reference_sets]
    b = bleu.corpus_score(list(hypotheses), refs)
    c = chrf.corpus_score(list(hypotheses), refs)
    t = ter.corpus_score(list(hypotheses), refs)
    signatures = {"BLEU": str(bleu.get_signature()), "chrF2": str(chrf.get_signature()),
                  "TER": str(ter.get_signature())}
    return {
        "bleu": b.score, "chrf": c.score, "ter": t.score,
        "signature": "; ".join(f"{name}: {sig}" for name, sig in signatures.items()),
        "bleu_precisions": list(b.precisions), "bleu_bp": b.bp,
        "sys_len": b.sys_len, "ref_len": b.ref_len,
        "lines": len(hypotheses), "references": len(refs),
    }


def evaluate_files(hyp_path, ref_paths: Sequence, lowercase: bool = False,
                   tokenize: str | None = None) -> dict:
    """:func:`evaluate` on files (plain or gzipped); every file must have the same line count."""
    if not ref_paths:
        raise InputError("no reference file given", expected="at least one --ref FILE")
    hyps = read_lines(hyp_path)
    if not hyps:
        raise InputError("empty file", hyp_path, expected="one hypothesis per line")
    sets = []
    for path in ref_paths:
        lines = read_lines(path)
        if len(lines) != len(hyps):
            raise InputError(f"{len(lines)} lines, but the hypothesis file {hyp_path} has {len(hyps)}",
                             path, expected="one reference line per hypothesis line")
        sets.append(lines)
    return evaluate(hyps, sets, lowercase=lowercase, tokenize=tokenize)
