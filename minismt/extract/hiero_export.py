"""A Hiero grammar for the decoders that read it as text: Moses' load-time table limit, and the
grammar, glue grammar, configuration and weights that make cdec decode as Moses' chart decoder.

**Table limit.** Moses keeps, per source side, the 20 rules (``[table-limit]``) with the best
*future score* when it loads a rule table (``PhraseDictionaryMemory``)::

    sum_i w_TM_i * max(ln p_i, -100) + w_WP * (-terminals) + w_PP + w_LM * ln(10) * LMest

where LMest is the log10 probability of each maximal run of target words scored on its own, from
no context (KenLM's ``RuleScore``, as Moses' ``LanguageModelKen::CalcScore``); ties go to the
earlier rule.  :func:`table_limit` computes it for any weights.  cdec has no table limit, so its
grammar is cut this way before it is written.

**cdec.** :func:`write_cdec_files` writes, for one grammar and one set of Moses-named weights
(``TranslationModel0_0`` ...), the files with which cdec's SCFG decoder scores every derivation
as Moses' chart decoder does (the recipe of ../fixtures/cdec/m30k-hiero, where cdec's output equals
Moses' for 978 of 1,000 test_2016 sentences at pop limit 200):

* ``grammar.gz``: ``[X] ||| src [X,1] ... ||| tgt [X,2] ... ||| TM0=... TM1=... TM2=... TM3=...
  PhrasePenalty=1``: the four scores as Moses' feature values (``max(ln p, -100)``, 7 digits), the
  non-terminals co-indexed;
* ``glue``: Moses' glue grammar in cdec's form (``[S] -> <s>``, ``[S] -> [S,1] [X,2]`` with
  ``Glue=1``, ``[S] -> [S,1] </s>``, each with ``PhrasePenalty=1``);
* ``cdec.ini``: ``formalism=scfg``, the grammar, ``scfg_max_span_limit=20`` (Moses'
  ``[max-chart-span]``), the glue grammar instead of cdec's own, pass-through rules for unknown
  words, cube pruning, ``WordPenalty`` and ``KLanguageModel -x`` (the ``<s>``/``</s>`` come from
  the glue rules);
* ``weights``: Moses' weights mapped to cdec's features: TM0..TM3 and PhrasePenalty as they are,
  ``LanguageModel`` x ln 10 (cdec scores log10), ``WordPenalty`` x ln 10 (cdec's word penalty is
  -1/ln 10 per word), ``Glue`` = TranslationModel1 x ln 2.718, ``PassThrough`` = -100 x
  UnknownWordPenalty + PhrasePenalty (Moses' copy rule);
* ``input.txt``: the sentences wrapped in ``<s> ... </s>``, which cdec's output then carries too
  (``sed 's/^<s> //; s/ <\\/s>$//'`` removes them).
"""

from __future__ import annotations

import math
import os
from typing import Mapping, Sequence

import numpy as np

from minismt.errors import InputError
from minismt.extract.hiero_grammar import HieroGrammar
from minismt.extract.moses import TokenTexts
from minismt.extract.phrase_table import limit_rows, take_ranges
from minismt.io import atomic_write, write_lines
from minismt.lm import LanguageModel

DEFAULT_TABLE_LIMIT = 20
LOWEST_SCORE = -100.0          # Moses' FloorScore
GLUE_SCORE = math.log(2.718)   # the glue grammar's one score, as Moses reads it
CHUNK_ROWS = 100_000
CDEC_GLUE = (
    "[S] ||| <s> ||| <s> ||| PhrasePenalty=1",
    "[S] ||| [S,1] [X,2] ||| [1] [2] ||| Glue=1 PhrasePenalty=1",
    "[S] ||| [S,1] </s> ||| [1] </s> ||| PhrasePenalty=1",
)
TM_WEIGHTS = tuple(f"TranslationModel0_{i}" for i in range(4))


def feature_values(scores: np.ndarray) -> np.ndarray:
    """Moses' feature values of rule-table scores: ``max(ln p, -100)``."""
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(np.asarray(scores, dtype=np.float64)), LOWEST_SCORE)


def lm_estimates(grammar: HieroGrammar, lm: LanguageModel, rows: np.ndarray) -> np.ndarray:
    """LMest of each rule of ``rows``: the log10 probabilities of the target words, each maximal
    run of words scored from no context (unknown words as ``<unk>``)."""
    table = grammar.table
    syms, off = take_ranges(table.tgt_syms, table.tgt_off, rows)
    rule_of = np.repeat(np.arange(rows.shape[0]), np.diff(off))
    word = syms >= 0
    run_start = word & np.r_[True, (syms[:-1] < 0) | (np.diff(rule_of) != 0)] if syms.shape[0] else word
    words = np.flatnonzero(word)
    if words.shape[0] == 0:
        return np.zeros(rows.shape[0])
    lm_ids = target_lm_ids(grammar, lm)[syms[words]]
    starts = np.flatnonzero(run_start[words])
    offsets = np.append(starts, words.shape[0]).astype(np.int64)
    logprobs, _ = lm.score_ids(lm_ids, offsets, bos=False, eos=False)
    return np.bincount(rule_of[words], weights=logprobs, minlength=rows.shape[0])


def target_lm_ids(grammar: HieroGrammar, lm: LanguageModel) -> np.ndarray:
    """The LM id of every target word of the grammar (``<unk>`` for the LM's unknown words), computed once per
    grammar and LM and kept in ``grammar.cache``."""
    key = ("lm ids of the target words", lm)
    if key not in grammar.cache:
        grammar.cache[key] = lm.vocab_map(grammar.tgt_vocab).astype(np.int64)
    return grammar.cache[key]


def _weight(weights: Mapping[str, float], name: str) -> float:
    if name not in weights:
        raise InputError(f"no weight for {name}", expected="the Hiero model's weights (manifest features)")
    return float(weights[name])


def future_scores(grammar: HieroGrammar, weights: Mapping[str, float], lm: LanguageModel) -> np.ndarray:
    """Moses' future score of each rule under ``weights`` (module docstring). The parts no weight changes (the
    rules' feature values, terminal counts and LM estimates, :func:`future_parts`) are computed once per
    grammar and LM; the decoder ranks a source side's rules with the same sum (:func:`static_scores` plus the
    weighted LM estimate) in its kernel."""
    tm, terminals, estimates = future_parts(grammar, lm)
    return static_scores(tm, terminals, weights) + _weight(weights, "LM0_0") * math.log(10.0) * estimates


def static_scores(tm: np.ndarray, terminals: np.ndarray, weights: Mapping[str, float]) -> np.ndarray:
    """The weighted non-LM part of rules' scores: their four translation feature values (``R x 4``), word
    penalty (``terminals``) and phrase penalty; each rule's sum in the same order whichever rules are given."""
    w = [_weight(weights, name) for name in TM_WEIGHTS]
    return (tm[:, 0] * w[0] + tm[:, 1] * w[1] + tm[:, 2] * w[2] + tm[:, 3] * w[3]
            - _weight(weights, "WordPenalty0_0") * terminals + _weight(weights, "PhrasePenalty0_0"))


def future_parts(grammar: HieroGrammar, lm: LanguageModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every rule's weight-free parts of :func:`future_scores` (feature values ``R x 4``, terminal counts, LM
    estimates), computed once per grammar and LM and kept in ``grammar.cache`` (the LM itself in the key: kept
    alive, never confused with another)."""
    key = ("future score parts", lm)
    if key not in grammar.cache:
        table = grammar.table
        rows = np.arange(len(table), dtype=np.int64)
        terminals = np.add.reduceat((table.tgt_syms >= 0).astype(np.int64), table.tgt_off[:-1]) \
            if len(table) else np.zeros(0, dtype=np.int64)
        estimates = np.concatenate([np.zeros(0)] + [lm_estimates(grammar, lm, rows[lo:lo + CHUNK_ROWS])
                                                    for lo in range(0, rows.shape[0], CHUNK_ROWS)])
        grammar.cache[key] = (feature_values(table.scores), terminals, estimates)   # chunked: a small peak
    return grammar.cache[key]


def table_limit(grammar: HieroGrammar, weights: Mapping[str, float], lm: LanguageModel,
                limit: int = DEFAULT_TABLE_LIMIT) -> np.ndarray:
    """The rules Moses keeps with ``[table-limit] limit`` (0 keeps all): per source side the
    ``limit`` best future scores, ties to the earlier rule; increasing rule ids."""
    if limit and limit < 0:
        raise InputError(f"table limit {limit}", expected="an integer >= 0")
    sizes = np.diff(grammar.source_offsets)
    if not limit or sizes.shape[0] == 0 or sizes.max() <= limit:     # nothing to rank
        return np.arange(len(grammar), dtype=np.int64)
    return limit_rows(grammar.source_offsets, future_scores(grammar, weights, lm), limit)


def _format7(values: np.ndarray) -> list[str]:
    unique, inverse = np.unique(values, return_inverse=True)
    texts = np.array(["%.7g" % v for v in unique.tolist()], dtype=object)
    return texts[inverse.reshape(-1)].tolist()


def write_cdec_grammar(grammar: HieroGrammar, rows: np.ndarray, path: str | os.PathLike) -> int:
    """The rules ``rows`` as a cdec grammar (module docstring); returns the number written."""
    table = grammar.table
    rows = np.asarray(rows, dtype=np.int64)
    sides = []
    for syms, off, vocab in ((table.src_syms, table.src_off, grammar.src_vocab),
                             (table.tgt_syms, table.tgt_off, grammar.tgt_vocab)):
        n_words = len(vocab)
        texts = TokenTexts(list(vocab.words) + ["[X,1]", "[X,2]"])
        sides.append((texts, syms, off, n_words))
    with atomic_write(path, binary=True) as out:
        for lo in range(0, rows.shape[0], CHUNK_ROWS):
            part = rows[lo:lo + CHUNK_ROWS]
            texts = []
            for token_texts, syms, off, n_words in sides:
                flat, flat_off = take_ranges(syms, off, part)
                flat = np.where(flat < 0, n_words - 1 - flat, flat)
                texts.append(token_texts.rows(flat, flat_off, 0, part.shape[0]))
            values = feature_values(table.scores[part])
            columns = [_format7(values[:, k]) for k in range(4)]
            lines = [f"[X] ||| {s} ||| {t} ||| TM0={a} TM1={b} TM2={c} TM3={d} PhrasePenalty=1\n"
                     for s, t, a, b, c, d in zip(texts[0], texts[1], *columns)]
            out.write("".join(lines).encode("utf-8"))
    return int(rows.shape[0])


def cdec_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Moses-named Hiero weights as cdec's (module docstring)."""
    ln10 = math.log(10.0)
    mapped = {f"TM{i}": _weight(weights, name) for i, name in enumerate(TM_WEIGHTS)}
    mapped["PhrasePenalty"] = _weight(weights, "PhrasePenalty0_0")
    mapped["LanguageModel"] = _weight(weights, "LM0_0") * ln10
    mapped["WordPenalty"] = _weight(weights, "WordPenalty0_0") * ln10
    mapped["Glue"] = _weight(weights, "TranslationModel1_0") * GLUE_SCORE
    mapped["PassThrough"] = -100.0 * _weight(weights, "UnknownWordPenalty0_0") + mapped["PhrasePenalty"]
    return mapped


def write_cdec_files(grammar: HieroGrammar, sentences: Sequence[str], folder: str | os.PathLike,
                     lm_path: str | os.PathLike, weights: Mapping[str, float], lm: LanguageModel,
                     limit: int = DEFAULT_TABLE_LIMIT, pop_limit: int = 200,
                     max_span: int = 20) -> dict:
    """Write cdec's grammar (table-limited under ``weights``), glue grammar, ``cdec.ini``,
    ``weights`` and ``input.txt`` for ``sentences`` into ``folder`` (module docstring); returns
    what was written: the rules kept and the files."""
    folder = os.path.abspath(os.fspath(folder))
    os.makedirs(folder, exist_ok=True)
    rows = table_limit(grammar, weights, lm, limit)
    n_rules = write_cdec_grammar(grammar, rows, os.path.join(folder, "grammar.gz"))
    write_lines(os.path.join(folder, "glue"), CDEC_GLUE)
    lines = [
        "formalism=scfg",
        f"grammar={os.path.join(folder, 'grammar.gz')}",
        f"scfg_max_span_limit={max_span}",
        f"scfg_extra_glue_grammar={os.path.join(folder, 'glue')}",
        "scfg_no_hiero_glue_grammar=true",
        "add_pass_through_rules=true",
        "intersection_strategy=cube_pruning",
        f"cubepruning_pop_limit={pop_limit}",
        "feature_function=WordPenalty",
        f"feature_function=KLanguageModel -x {os.path.abspath(os.fspath(lm_path))}",
    ]
    write_lines(os.path.join(folder, "cdec.ini"), lines)
    with atomic_write(os.path.join(folder, "weights")) as out:
        for name, value in cdec_weights(weights).items():
            out.write(f"{name} {value!r}\n")
    write_lines(os.path.join(folder, "input.txt"), [f"<s> {s} </s>" if s.strip() else "<s> </s>"
                                                   for s in sentences])
    return {"rules": n_rules, "files": ["grammar.gz", "glue", "cdec.ini", "weights", "input.txt"]}
