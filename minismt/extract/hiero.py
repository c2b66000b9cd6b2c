"""Hiero (SCFG) rule extraction as Moses ``extract-rules`` with its default options.

Computes, for a word-aligned corpus, every rule occurrence Moses' ``extract-rules`` (as run by
``train-model.perl -hierarchical``: ``--MaxSpan 10``, all other options default) extracts:

* the *initial phrase pairs* of each sentence pair: consistent boxes of the alignment matrix with
  at most ``max_span`` words a side, the loose ones (unaligned boundary words, both sides) included;
* for each initial phrase pair its lexical rule (if it has at most ``max_symbols_source`` words)
  and every rule cut from it with one or two holes (smaller initial phrase pairs replaced by
  co-indexed non-terminals) under Moses' constraints: holes cover >= 2 source words, do not
  overlap, are not adjacent on the source side, leave >= 1 terminal on each side with <= 5 source
  symbols, and leave an aligned target terminal;
* the fractional count of each occurrence: ``1/n`` for the ``n`` rules of its initial phrase pair.

:func:`extract_hiero` returns the occurrences (:class:`HieroOccurrences`); :func:`aggregate_rules`
sums them into distinct rules, per corpus (float64 sums) or per sentence pair as Moses writes its
extract file (float64 sums and Moses' float32 sums in extraction order), and
:meth:`HieroRules.extract_line` renders a rule as a line of Moses' ``extract`` file::

    der [X][X] [X] ||| the [X][X] [X] ||| 0-0 1-1 ||| 0.333333 ||| 

Rule encoding: source symbols are word ids with the holes as ``-1`` (``X1``) and ``-2`` (``X2``)
numbered in source order; target symbols are word ids and the same codes (this is the
co-indexing); the alignment is ``int16`` pairs of symbol positions in Moses' order: the word links
by target position (input order within one target word), then one pair per hole in target order.

The enumeration runs in numba kernels (:mod:`minismt.extract._hiero_kernels`); the slow, obvious
reference it is tested against is ``tests/hiero_reference.py`` (itself checked against the real
Moses binary by ``tests/test_hiero_reference.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minismt.corpus import Alignment, TokenArray, Vocabulary
from minismt.errors import InputError
from minismt.extract import _hiero_kernels as _k
from minismt.extract.extraction import link_sentences
from minismt.extract.phrase_table import take_ranges

NONTERMINAL = "[X][X]"
LHS = "[X]"


@dataclass(frozen=True)
class HieroOptions:
    """The ``extract-rules`` options honoured; the defaults are Moses' (with ``--MaxSpan 10``).
    ``max_nonterm`` may be 0, 1 or 2."""

    max_span: int = 10
    max_symbols_source: int = 5
    max_symbols_target: int = 999
    max_nonterm: int = 2
    min_hole_source: int = 2
    min_hole_target: int = 1
    min_words: int = 1
    nonterm_consec_source: bool = False
    require_aligned_word: bool = True
    fractional_counting: bool = True


DEFAULT_HIERO_OPTIONS = HieroOptions()


@dataclass
class HieroOccurrences:
    """One entry per extracted rule occurrence, in sentence order and, within a sentence pair, in
    ``extract-rules``' order.

    ``records`` is ``int32[N, 14]``: sentence, initial phrase pair ``(s1, s2, t1, t2)``, number of
    holes, two holes ``(s1, s2, t1, t2)`` in target order (-1 when absent).  ``weight`` is the
    fractional count ``1/n``.  Rule ``r`` has source symbols ``src_syms[src_off[r]:src_off[r+1]]``,
    target symbols ``tgt_syms[tgt_off[r]:...]`` and alignment ``align[align_off[r]:...]`` (see the
    module docstring for the encoding)."""

    records: np.ndarray
    weight: np.ndarray
    src_syms: np.ndarray
    src_off: np.ndarray
    tgt_syms: np.ndarray
    tgt_off: np.ndarray
    align: np.ndarray
    align_off: np.ndarray

    @property
    def sent(self) -> np.ndarray:
        return self.records[:, _k.REC_SENT]

    @property
    def size(self) -> int:
        return int(self.records.shape[0])

    def __len__(self) -> int:
        return self.size


@dataclass
class HieroRules:
    """Distinct rules (per corpus, or per sentence pair when ``sentence`` is not None), in order
    of first extraction.  ``count`` is the float64 sum of the occurrences' ``1/n``;
    ``moses_count`` (per sentence pair only, else None) the float32 sum Moses computes.
    ``first[i]`` is an occurrence of rule i; ``n_occurrences[i]`` how many there were."""

    src_syms: np.ndarray
    src_off: np.ndarray
    tgt_syms: np.ndarray
    tgt_off: np.ndarray
    align: np.ndarray
    align_off: np.ndarray
    count: np.ndarray
    moses_count: np.ndarray | None
    sentence: np.ndarray | None
    first: np.ndarray
    n_occurrences: np.ndarray

    def __len__(self) -> int:
        return int(self.count.shape[0])

    def select(self, rows: np.ndarray) -> "HieroRules":
        """The corpus-level rules ``rows`` (``first`` and ``n_occurrences`` kept)."""
        rows = np.asarray(rows, dtype=np.int64)
        return HieroRules(*take_sides(self, rows), self.count[rows], None, None, self.first[rows],
                          self.n_occurrences[rows])

    def sides(self, i: int, src_vocab: Vocabulary, tgt_vocab: Vocabulary) -> tuple[str, str, str]:
        """Rule ``i`` as Moses' strings: source side, target side, ``s-t`` alignment."""
        src = _side(self.src_syms[self.src_off[i]:self.src_off[i + 1]], src_vocab)
        tgt = _side(self.tgt_syms[self.tgt_off[i]:self.tgt_off[i + 1]], tgt_vocab)
        pairs = self.align[self.align_off[i]:self.align_off[i + 1]]
        return src, tgt, " ".join(f"{int(s)}-{int(t)}" for s, t in pairs)

    def extract_line(self, i: int, src_vocab: Vocabulary, tgt_vocab: Vocabulary) -> str:
        """Rule ``i`` as a line of Moses' forward extract file (without the newline); the count is
        ``moses_count`` when there is one, else ``count`` rounded to float32, printed ``%g``."""
        src, tgt, align = self.sides(i, src_vocab, tgt_vocab)
        value = self.moses_count[i] if self.moses_count is not None else self.count[i]
        return f"{src} ||| {tgt} ||| {align} ||| {format_count(value)} ||| "

    def extract_lines(self, src_vocab: Vocabulary, tgt_vocab: Vocabulary) -> list[str]:
        return [self.extract_line(i, src_vocab, tgt_vocab) for i in range(len(self))]


def take_sides(rules, rows: np.ndarray) -> tuple:
    """The source, target and alignment arrays (each values, offsets) of the rules ``rows`` of a
    :class:`HieroRules` or a :class:`~minismt.extract.hiero_table.HieroTable`, in that order."""
    src, src_off = take_ranges(rules.src_syms, rules.src_off, rows)
    tgt, tgt_off = take_ranges(rules.tgt_syms, rules.tgt_off, rows)
    align, align_off = take_ranges(rules.align, rules.align_off, rows)
    return src, src_off, tgt, tgt_off, align, align_off


def format_count(value: float) -> str:
    """A count as Moses prints a C++ ``float`` (``%g``, 6 significant digits)."""
    return "%g" % float(np.float32(value))


def _side(symbols: np.ndarray, vocab: Vocabulary) -> str:
    words = vocab.words
    return " ".join([NONTERMINAL if int(x) < 0 else words[int(x)] for x in symbols] + [LHS])


def _check_options(options: HieroOptions) -> None:
    for name in ("max_span", "max_symbols_source", "max_symbols_target", "min_hole_source",
                 "min_hole_target", "min_words"):
        value = getattr(options, name)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise InputError(f"{name} {value!r}", expected="an integer >= 0")
    if not 1 <= options.max_span <= 32767:
        raise InputError(f"max_span {options.max_span!r}", expected="an integer from 1 to 32767")
    if options.max_nonterm not in (0, 1, 2):
        raise InputError(f"max_nonterm {options.max_nonterm!r}", expected="0, 1 or 2")


def _check_corpus(src: TokenArray, tgt: TokenArray, alignment: Alignment):
    if not (len(src) == len(tgt) == len(alignment)):
        raise InputError(f"{len(src)} source sentences, {len(tgt)} target sentences and "
                         f"{len(alignment)} alignment lines",
                         expected="the same number of sentences on both sides and in the alignment")
    links = np.ascontiguousarray(np.asarray(alignment.links).reshape(-1, 2), dtype=np.int32)
    link_offsets = np.ascontiguousarray(alignment.offsets, dtype=np.int64)
    src_offsets = np.ascontiguousarray(src.offsets, dtype=np.int64)
    tgt_offsets = np.ascontiguousarray(tgt.offsets, dtype=np.int64)
    n_sent = len(src)
    if link_offsets.shape[0] != n_sent + 1 or link_offsets[0] != 0 or link_offsets[-1] != links.shape[0] \
            or bool(np.any(np.diff(link_offsets) < 0)):
        raise InputError("inconsistent alignment offsets")
    link_sent = link_sentences(links, link_offsets, src_offsets, tgt_offsets)
    return src_offsets, tgt_offsets, links, link_offsets, link_sent


def extract_hiero(src: TokenArray, tgt: TokenArray, alignment: Alignment,
                  options: HieroOptions = DEFAULT_HIERO_OPTIONS) -> HieroOccurrences:
    """Every Hiero rule occurrence of the word-aligned corpus (see the module docstring).

    The links of a sentence pair are used in the order given (``Alignment.from_lists`` sorts them
    by source then target position, which is what a sorted alignment file gives Moses too)."""
    _check_options(options)
    src_offsets, tgt_offsets, links, link_offsets, link_sent = _check_corpus(src, tgt, alignment)
    src_ids = np.ascontiguousarray(src.ids, dtype=np.int32)
    tgt_ids = np.ascontiguousarray(tgt.ids, dtype=np.int32)
    rec, weight = _k.enumerate_occurrences(
        src_offsets, tgt_offsets, links, link_offsets, int(options.max_span),
        int(options.max_symbols_source), int(options.max_symbols_target), int(options.max_nonterm),
        int(options.min_hole_source), int(options.min_hole_target), int(options.min_words),
        bool(options.nonterm_consec_source), bool(options.require_aligned_word),
        bool(options.fractional_counting))
    # per target token of the corpus: the source positions linked to it, in input order
    token = tgt_offsets[link_sent] + links[:, 1]
    order = np.argsort(token, kind="stable")
    tgt_link_src = np.ascontiguousarray(links[order, 0], dtype=np.int32)
    tgt_link_offsets = np.zeros(tgt_ids.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(token, minlength=tgt_ids.shape[0]), out=tgt_link_offsets[1:])
    rendered = _k.render_occurrences(rec, src_ids, src_offsets, tgt_ids, tgt_offsets, tgt_link_src,
                                     tgt_link_offsets)
    return HieroOccurrences(rec, weight, *rendered)


def aggregate_rules(occ: HieroOccurrences, per_sentence: bool = False) -> HieroRules:
    """The distinct rules of ``occ`` with summed counts, in order of first extraction.

    ``per_sentence``: one rule per (sentence pair, rule), as Moses' extract file has them, with
    Moses' float32 sums in extraction order too; else one per rule over the corpus."""
    rules, _ = _aggregate(occ.src_syms, occ.src_off, occ.tgt_syms, occ.tgt_off, occ.align,
                          occ.align_off, occ.weight, np.ascontiguousarray(occ.sent), per_sentence)
    return rules


def merge_rules(parts: list[HieroRules]) -> HieroRules:
    """The corpus-level rules of several :class:`HieroRules` (say, of consecutive chunks of a
    corpus), identical rules summed; ``first`` and ``n_occurrences`` refer to the rows of the
    concatenated parts."""
    parts = [p for p in parts if len(p)] or parts[:1]
    if not parts:
        raise ValueError("no rules to merge")
    src_syms, src_off = _concatenate([(p.src_syms, p.src_off) for p in parts])
    tgt_syms, tgt_off = _concatenate([(p.tgt_syms, p.tgt_off) for p in parts])
    align, align_off = _concatenate([(p.align, p.align_off) for p in parts])
    count = np.concatenate([p.count for p in parts])
    merged, group = _aggregate(src_syms, src_off, tgt_syms, tgt_off, align, align_off, count,
                               np.zeros(count.shape[0], dtype=np.int32), False)
    n_occ = np.concatenate([p.n_occurrences for p in parts])
    merged.n_occurrences = np.bincount(group, weights=n_occ, minlength=len(merged)).astype(np.int64)
    return merged


def _concatenate(pieces: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    values = np.concatenate([v for v, _ in pieces])
    lengths = np.concatenate([np.diff(o) for _, o in pieces])
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return values, offsets


def _aggregate(src_syms, src_off, tgt_syms, tgt_off, align, align_off, weight, sent,
               per_sentence: bool) -> tuple[HieroRules, np.ndarray]:
    """Distinct rules of the rows (occurrences or rules) with their weights summed, and the rule
    of each row."""
    hashes = _k.occurrence_hashes(src_syms, src_off, tgt_syms, tgt_off, align, align_off, sent,
                                  per_sentence)
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    # renumber the groups by first occurrence
    by_first = np.argsort(first, kind="stable")
    rank = np.empty_like(by_first)
    rank[by_first] = np.arange(by_first.shape[0])
    group = rank[inverse].astype(np.int64)
    first = first[by_first].astype(np.int64)
    if not _k.groups_match(group, first, src_syms, src_off, tgt_syms, tgt_off, align, align_off):
        raise RuntimeError("64-bit hash collision between two Hiero rules")
    n = first.shape[0]
    count = np.bincount(group, weights=weight, minlength=n)
    n_occ = np.bincount(group, minlength=n)
    moses = _k.float32_sums(group, weight, n) if per_sentence else None
    new_src, new_src_off = take_ranges(src_syms, src_off, first)
    new_tgt, new_tgt_off = take_ranges(tgt_syms, tgt_off, first)
    new_align, new_align_off = take_ranges(align, align_off, first)
    sentence = sent[first].copy() if per_sentence else None
    return HieroRules(new_src, new_src_off, new_tgt, new_tgt_off, new_align, new_align_off, count,
                      moses, sentence, first, n_occ), group
