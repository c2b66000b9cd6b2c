"""Sparse rule features of the Hiero model: the large-scale setting of the Bayesian-optimisation
paper's Table 3 (Miao et al. 2016: "rule identifier, rule shape, bigrams on source side and target
side of rules"), the features of Simianer, Riezler & Dyer (2012) as cdec computes them.

Four families, each switched on by its name:

``rule-id``
    ``RuleId_<source symbols>~<target symbols>``: one indicator per rule (cdec's
    ``RuleIdentityFeatures``); symbols joined by ``,``, words escaped, the non-terminals written
    ``[X1]`` and ``[X2]`` in source order and with the same index on the target side (the pairing).
    A rule without non-terminals has the name the phrase-based decoder gives the same phrase pair
    (:mod:`minismt.decode.sparse`).
``rule-shape``
    ``RuleShape_S<5 bits>~T<5 bits>`` (cdec's ``RuleShapeFeatures``): each side read as the slots
    words, non-terminal, words, non-terminal, words, a bit per slot, 1 where it is filled;
    ``a [X] b`` is ``S11100``, ``[X] a [X]`` is ``S01110``.
``source-bigram``, ``target-bigram``
    ``RuleSourceBigram_<a>~<b>`` / ``RuleTargetBigram_<a>~<b>``: the bigrams of the rule side
    framed by ``[<r>]`` and ``[</r>]`` (cdec's ``<r>``, ``</r>``), a non-terminal written ``[X]``
    (cdec's ``RuleNgramFeatures``), counted.

Names follow the escaping of :mod:`minismt.features`, so they survive every weights and k-best
format.  The bracketed tokens cannot be words: a Hiero model refuses words that look like
non-terminals (``[...]``), so no word's name collides with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from minismt.errors import InputError
from minismt.extract import _hiero_kernels as _k
from minismt.extract.hiero_table import HieroTable
from minismt.extract.moses import TokenTexts
from minismt.extract.phrase_table import take_ranges
from minismt.features import escape_word

FAMILIES = {"rule-id": "RuleId", "rule-shape": "RuleShape", "source-bigram": "RuleSourceBigram",
            "target-bigram": "RuleTargetBigram"}
START, END, NONTERMINAL = "[<r>]", "[</r>]", "[X]"


def check_families(families: Iterable[str]) -> tuple[str, ...]:
    """The families, checked, in :data:`FAMILIES` order."""
    families = tuple(families)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise InputError(f"Hiero sparse feature family {unknown[0]!r}",
                         expected=", ".join(FAMILIES))
    return tuple(f for f in FAMILIES if f in families)


@dataclass
class RuleFeatures:
    """The sparse features of some rules: rule ``rows[k]`` has the features
    ``ids[offsets[k]:offsets[k+1]]`` (indices into ``names``) with ``values``."""

    rows: np.ndarray
    offsets: np.ndarray
    ids: np.ndarray
    values: np.ndarray
    names: list[str]

    def of(self, k: int) -> dict[str, float]:
        """The features of ``rows[k]`` by name."""
        lo, hi = self.offsets[k], self.offsets[k + 1]
        return {self.names[i]: float(v) for i, v in zip(self.ids[lo:hi].tolist(), self.values[lo:hi].tolist())}


def _rule_id_names(table: HieroTable, rows: np.ndarray, src_words, tgt_words) -> list[str]:
    texts = []
    for syms, off, words in ((table.src_syms, table.src_off, src_words),
                             (table.tgt_syms, table.tgt_off, tgt_words)):
        side, side_off = take_ranges(syms, off, rows)
        side = np.where(side < 0, len(words) - 1 - side, side)     # -1 -> [X1], -2 -> [X2]
        tokens = TokenTexts(list(words) + ["[X1]", "[X2]"])
        # escaped words hold no space and no comma: join with spaces, then make them commas
        texts.append([t.replace(" ", ",") for t in tokens.rows(side, side_off, 0, rows.shape[0])])
    label = FAMILIES["rule-id"]
    return [f"{label}_{s}~{t}" for s, t in zip(*texts)]


def _shape_name(code: int) -> str:
    source, target = code % 32, code // 32
    return (f"{FAMILIES['rule-shape']}_S" + "".join("1" if source >> k & 1 else "0" for k in range(5))
            + "~T" + "".join("1" if target >> k & 1 else "0" for k in range(5)))


def _bigram_text(x: int, words: list[str]) -> str:
    if x == _k.BIGRAM_START:
        return START
    if x == _k.BIGRAM_END:
        return END
    return NONTERMINAL if x < 0 else words[x]


def rule_features(table: HieroTable, src_words: Sequence[str], tgt_words: Sequence[str],
                  families: Iterable[str], rows: np.ndarray | None = None) -> RuleFeatures:
    """The sparse features of the rules ``rows`` of ``table`` (all by default) in the families
    ``families``; ``src_words``/``tgt_words`` are the vocabularies' words."""
    families = check_families(families)
    rows = np.arange(len(table), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    src_words = [escape_word(w) for w in src_words]
    tgt_words = [escape_word(w) for w in tgt_words]
    names: list[str] = []
    parts = []   # (position in rows, feature id, value)
    if "rule-id" in families:
        ids = np.arange(rows.shape[0], dtype=np.int64) + len(names)
        names += _rule_id_names(table, rows, src_words, tgt_words)
        parts.append((np.arange(rows.shape[0]), ids, np.ones(rows.shape[0])))
    if "rule-shape" in families:
        codes = _k.rule_shapes(table.src_syms, table.src_off, table.tgt_syms, table.tgt_off, rows)
        if np.any(codes < 0):
            raise InputError("a rule with more than two non-terminals on a side has no rule shape")
        distinct, inverse = np.unique(codes, return_inverse=True)
        parts.append((np.arange(rows.shape[0]), inverse.reshape(-1) + len(names), np.ones(rows.shape[0])))
        names += [_shape_name(int(c)) for c in distinct.tolist()]
    for family, syms, off, words in (("source-bigram", table.src_syms, table.src_off, src_words),
                                     ("target-bigram", table.tgt_syms, table.tgt_off, tgt_words)):
        if family not in families:
            continue
        bigrams = _k.side_bigrams(syms, off, rows)
        # symbols from BIGRAM_END (-4) up: a bigram is one integer
        base = np.int64(len(words) + 4)
        pair, pair_inverse = np.unique((bigrams[:, 1] + 4) * base + (bigrams[:, 2] + 4),
                                       return_inverse=True)
        # a rule's repeated bigram counts: one entry per (rule, bigram) with its count
        key = bigrams[:, 0] * pair.shape[0] + pair_inverse.reshape(-1)
        key, counts = np.unique(key, return_counts=True)
        parts.append((key // pair.shape[0], key % pair.shape[0] + len(names), counts.astype(np.float64)))
        names += [f"{FAMILIES[family]}_{_bigram_text(int(p // base - 4), words)}"
                  f"~{_bigram_text(int(p % base - 4), words)}" for p in pair.tolist()]
    if parts:
        position = np.concatenate([p[0] for p in parts])
        ids = np.concatenate([p[1] for p in parts])
        values = np.concatenate([p[2] for p in parts])
    else:
        position = ids = np.zeros(0, dtype=np.int64)
        values = np.zeros(0)
    order = np.lexsort((ids, position))
    offsets = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(position, minlength=rows.shape[0]), out=offsets[1:])
    return RuleFeatures(rows, offsets, ids[order].astype(np.int64), values[order], names)
