"""Hiero rule scoring as Moses' ``score --Hierarchical`` (both directions) + ``consolidate``.

From the distinct extracted rules with their alignment variants and fractional counts
(:func:`minismt.extract.hiero.aggregate_rules`), each rule -- a source side, a target side and the
pairing of their non-terminals -- gets

* the counts c(f,e) (its fractional count), c(f) (all rules with the same source *string*, every
  non-terminal written ``[X][X]``) and c(e) (all rules with the same target string);
* p(e|f) = c(f,e)/c(f) and p(f|e) = c(f,e)/c(e);
* lex(e|f) and lex(f|e) (Koehn, Och & Marcu 2003) over the rule's symbols with its most frequent
  word alignment (ties to the greater alignment in Moses' comparison, target-to-source for lex(e|f)
  and the written alignment, source-to-target for lex(f|e)); a non-terminal pair counts 1.

Numbers are as Moses writes them: the counts go through ``score``'s single-precision sums and
six-digit text before ``consolidate`` divides them in single precision, and the four scores and
the counts of :class:`HieroTable` are the six-digit numbers the text table says (what Moses reads
back), so our decoder and Moses' see the same model.  Moses sums the fractional counts
in the byte order of its sorted extract file; here they are summed in double precision, so a
count can differ from Moses' in the last printed digit (tests compare with a relative tolerance
of 1e-5).  Rules are kept in Moses' order: source string, then target string (UTF-8 bytes).

One Moses quirk is not copied: when two rules differ only in how their two non-terminals pair
(``a [X][X] b [X][X]`` to ``[X][X] c [X][X]``, straight and crossed), ``consolidate`` pairs the
lines of its two halves by position although the halves sort them differently, so Moses can give
the crossed rule the inverse scores of the straight one.  Each rule here has its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.extract import _hiero_kernels as _k
from minismt.extract.hiero import LHS, NONTERMINAL, HieroRules, take_sides
from minismt.extract.lexical import LexicalTable
from minismt.extract.moses import TokenTexts, format_g
from minismt.extract.phrase_table import take_ranges
from minismt.extract.phrases import byte_order_ranks
from minismt.io import atomic_write

SCORE_NAMES = ("p(f|e)", "lex(f|e)", "p(e|f)", "lex(e|f)")
COUNT_NAMES = ("c(e)", "c(f)", "c(f,e)")
MAX_SYMBOLS = 64   # positions of a rule side held in one 64-bit set
CHUNK_ROWS = 100_000


@dataclass
class SideCounts:
    """Summed counts per rule side string: ``hashes`` sorted (:func:`side_hashes`), ``counts``."""

    hashes: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, hashes: np.ndarray, counts: np.ndarray) -> "SideCounts":
        unique, inverse = np.unique(hashes, return_inverse=True)
        return cls(unique, np.bincount(inverse.reshape(-1), weights=counts,
                                       minlength=unique.shape[0]))

    @classmethod
    def merge(cls, parts: list["SideCounts"]) -> "SideCounts":
        if not parts:
            return cls(np.zeros(0, dtype=np.uint64), np.zeros(0))
        return cls.of(np.concatenate([p.hashes for p in parts]),
                      np.concatenate([p.counts for p in parts]))

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        if hashes.shape[0] == 0:
            return np.zeros(0)
        pos = np.minimum(np.searchsorted(self.hashes, hashes), max(self.hashes.shape[0] - 1, 0))
        if self.hashes.shape[0] == 0 or not bool(np.all(self.hashes[pos] == hashes)):
            raise ValueError("a rule side is missing from the side counts")
        return self.counts[pos]


def side_hashes(syms: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each rule side as a string (every non-terminal the same token)."""
    return _k.side_hashes(np.ascontiguousarray(syms), np.ascontiguousarray(offsets))


def rule_hashes(rules: HieroRules) -> np.ndarray:
    """A 64-bit hash of each row's rule: source and target symbols with their non-terminal
    pairing (the word alignment, which tells variants of a rule apart, is not part of it)."""
    n = len(rules)
    return _k.occurrence_hashes(rules.src_syms, rules.src_off, rules.tgt_syms, rules.tgt_off,
                                np.zeros((0, 2), dtype=np.int16), np.zeros(n + 1, dtype=np.int64),
                                np.zeros(n, dtype=np.int32), False)


def target_counts(rules: HieroRules) -> SideCounts:
    """c(e) contributions of ``rules``: their counts summed per target string."""
    return SideCounts.of(side_hashes(rules.tgt_syms, rules.tgt_off), rules.count)


@dataclass
class HieroTable:
    """Scored Hiero rules in Moses' order.  Rule r: source symbols ``src_syms[src_off[r]:...]``
    (word ids; non-terminals ``-1``, ``-2`` in source order), target symbols (word ids and the
    same codes: the co-indexing), the written alignment ``align[align_off[r]:...]`` (``int16``
    pairs of symbol positions, non-terminal pairs included, in Moses' order), ``scores``
    (``SCORE_NAMES``, probabilities) and ``counts`` (``COUNT_NAMES``)."""

    src_syms: np.ndarray
    src_off: np.ndarray
    tgt_syms: np.ndarray
    tgt_off: np.ndarray
    align: np.ndarray
    align_off: np.ndarray
    scores: np.ndarray
    counts: np.ndarray

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    def take(self, rows: np.ndarray) -> "HieroTable":
        """The rules ``rows``, in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        return HieroTable(*take_sides(self, rows), self.scores[rows], self.counts[rows])


def _moses_float(values: np.ndarray) -> np.ndarray:
    """A C++ float printed with six digits and read back as a float: what ``consolidate`` reads of
    a count and a decoder of a score."""
    values = np.asarray(values, dtype=np.float32).astype(np.float64)
    if values.shape[0] == 0:
        return values
    unique, inverse = np.unique(values, return_inverse=True)
    read = np.array([float("%g" % v) for v in unique.tolist()], dtype=np.float32)
    return read[inverse.reshape(-1)].astype(np.float64)


def _group(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group ids (in order of first appearance) and one representative per group."""
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty_like(by_first)
    rank[by_first] = np.arange(by_first.shape[0])
    return rank[inverse.reshape(-1)].astype(np.int64), first[by_first].astype(np.int64)


def _moses_order(src_syms, src_off, tgt_syms, tgt_off, src_vocab: Vocabulary,
                 tgt_vocab: Vocabulary, tiebreak: np.ndarray) -> np.ndarray:
    """The order of rules by the UTF-8 bytes of ``"source [X] ||| target [X] |||"``, ties (rules
    differing only in their non-terminal pairing) by ``tiebreak``."""
    return np.lexsort([tiebreak] + _side_keys(tgt_syms, tgt_off, tgt_vocab)
                      + _side_keys(src_syms, src_off, src_vocab))


def side_order(syms: np.ndarray, off: np.ndarray, vocab: Vocabulary, ranks: tuple | None = None) -> np.ndarray:
    """The order of rule sides by the UTF-8 bytes of ``"side [X] |||"`` (Moses' order of source
    sides), ties by position; ``ranks``: :func:`symbol_ranks` of ``vocab``, when the caller keeps them."""
    return np.lexsort([np.arange(off.shape[0] - 1)] + _side_keys(syms, off, vocab, ranks))


def symbol_ranks(vocab: Vocabulary) -> tuple[np.ndarray, int]:
    """The byte-order ranks of a vocabulary's words and of the rule symbols after them (the non-terminal, the
    left-hand side), and the rank of the end of a side: what :func:`side_order` sorts by."""
    return byte_order_ranks(list(vocab.words) + [NONTERMINAL, LHS])


def _side_keys(syms: np.ndarray, off: np.ndarray, vocab: Vocabulary, ranks: tuple | None = None) -> list[np.ndarray]:
    """``np.lexsort`` keys (least significant first) that order rule sides by their text."""
    ranks, end_rank = ranks or symbol_ranks(vocab)
    n_words = len(vocab)
    code = np.where(syms < 0, n_words, syms).astype(np.int64)
    symbol_rank = ranks[code].astype(np.int64)
    length = np.diff(off)
    width = int(length.max()) + 2 if length.shape[0] else 0
    side_keys = []
    for t in range(width):
        field = np.zeros(length.shape[0], dtype=np.int64)
        has = length > t
        field[has] = symbol_rank[off[:-1][has] + t]
        field[length == t] = ranks[n_words + 1]
        field[length == t - 1] = end_rank
        side_keys.append(field)
    return side_keys[::-1]


def score_rules(rules: HieroRules, lexical: LexicalTable, src_vocab: Vocabulary,
                tgt_vocab: Vocabulary, targets: SideCounts | None = None) -> HieroTable:
    """Score the distinct rule variants ``rules`` (one per rule and alignment, with corpus
    counts, as :func:`aggregate_rules` gives them) into a :class:`HieroTable`.

    ``targets`` holds c(e) for every target string of the whole corpus (needed when ``rules`` is
    filtered by source side); by default c(e) is summed over ``rules`` themselves."""
    n_variants = len(rules)
    src_len = np.diff(rules.src_off)
    tgt_len = np.diff(rules.tgt_off)
    if n_variants and (int(src_len.max()) > MAX_SYMBOLS or int(tgt_len.max()) > MAX_SYMBOLS):
        raise InputError(f"a rule side longer than {MAX_SYMBOLS} symbols", expected="max_span <= 64")
    # rules: source and target symbols with the co-indexing; variants differ in word alignment
    no_align = np.zeros((0, 2), dtype=np.int16)
    no_align_off = np.zeros(n_variants + 1, dtype=np.int64)
    rule_of, rule_rep = _group(rule_hashes(rules))
    if not _k.groups_match(rule_of, rule_rep, rules.src_syms, rules.src_off, rules.tgt_syms,
                           rules.tgt_off, no_align, no_align_off):
        raise RuntimeError("64-bit hash collision between two Hiero rules")
    n_rules = rule_rep.shape[0]
    by_rule = np.argsort(rule_of, kind="stable")
    rule_offsets = np.zeros(n_rules + 1, dtype=np.int64)
    np.cumsum(np.bincount(rule_of, minlength=n_rules), out=rule_offsets[1:])
    variant_count = rules.count[by_rule].astype(np.float32).astype(np.float64)
    align, align_off = take_ranges(rules.align, rules.align_off, by_rule)
    best_fwd, best_inv = _k.best_variants(rule_offsets, variant_count, align, align_off,
                                          src_len[rule_rep], tgt_len[rule_rep])
    c_fe = np.bincount(rule_of, weights=rules.count, minlength=n_rules)
    src_syms, src_off = take_ranges(rules.src_syms, rules.src_off, rule_rep)
    tgt_syms, tgt_off = take_ranges(rules.tgt_syms, rules.tgt_off, rule_rep)
    src_hash = side_hashes(src_syms, src_off)
    source_of, source_rep = _group(src_hash)
    if not _k.sides_match(source_of, source_rep, src_syms, src_off):
        raise RuntimeError("64-bit hash collision between two rule source sides")
    c_f = np.bincount(source_of, weights=c_fe)[source_of]
    tgt_hash = side_hashes(tgt_syms, tgt_off)
    if targets is None:
        target_of, target_rep = _group(tgt_hash)
        if not _k.sides_match(target_of, target_rep, tgt_syms, tgt_off):
            raise RuntimeError("64-bit hash collision between two rule target sides")
        c_e = np.bincount(target_of, weights=c_fe)[target_of]
    else:
        c_e = targets.lookup(tgt_hash)
    lex_ef, lex_fe = _k.lexical_weights(
        src_syms, src_off, tgt_syms, tgt_off, align, align_off, best_fwd, best_inv,
        lexical.keys, lexical.w_e_given_f, lexical.w_f_given_e, lexical.n_src, lexical.n_tgt)
    written, written_off = take_ranges(align, align_off, best_fwd)
    written, written_off = _string_order(written, written_off)
    # consolidate: counts as score printed them, divided in single precision
    m_e, m_f, m_fe = _moses_float(c_e), _moses_float(c_f), _moses_float(c_fe)
    p_f_given_e = (m_fe.astype(np.float32) / m_e.astype(np.float32)).astype(np.float64)
    p_e_given_f = (m_fe.astype(np.float32) / m_f.astype(np.float32)).astype(np.float64)
    # the numbers as the text table carries them, so that every decoder reads the same values
    scores = np.column_stack([_moses_float(v) for v in (p_f_given_e, lex_fe, p_e_given_f, lex_ef)])
    counts = np.column_stack([m_e, m_f, m_fe])
    order = _moses_order(src_syms, src_off, tgt_syms, tgt_off, src_vocab, tgt_vocab,
                         tiebreak=_twin_order(src_hash, tgt_hash, rule_offsets, align, align_off))
    src_syms, src_off = take_ranges(src_syms, src_off, order)
    tgt_syms, tgt_off = take_ranges(tgt_syms, tgt_off, order)
    written, written_off = take_ranges(written, written_off, order)
    return HieroTable(src_syms, src_off, tgt_syms, tgt_off, written, written_off,
                      scores[order], counts[order])


def _link_text_rank(pairs: np.ndarray) -> np.ndarray:
    """Rank of each ``s-t`` pair's text in byte order (Moses sorts the written links as strings)."""
    codes = pairs[:, 0].astype(np.int64) * 65536 + pairs[:, 1]
    distinct, inverse = np.unique(codes, return_inverse=True)
    texts = [f"{c // 65536}-{c % 65536}" for c in distinct.tolist()]
    rank_of = np.empty(len(texts), dtype=np.int64)
    rank_of[np.argsort(np.array(texts, dtype=object), kind="stable")] = np.arange(len(texts))
    return rank_of[inverse.reshape(-1)]


def _string_order(pairs: np.ndarray, offsets: np.ndarray):
    """Each rule's links sorted as Moses writes them (by their ``s-t`` text), duplicates once."""
    if pairs.shape[0] == 0:
        return pairs, offsets
    row = np.repeat(np.arange(offsets.shape[0] - 1), np.diff(offsets))
    rank = _link_text_rank(pairs)
    order = np.lexsort((rank, row))
    pairs, row, rank = pairs[order], row[order], rank[order]
    keep = np.ones(pairs.shape[0], dtype=bool)
    keep[1:] = (row[1:] != row[:-1]) | (rank[1:] != rank[:-1])
    pairs, row = pairs[keep], row[keep]
    new_offsets = np.zeros_like(offsets)
    np.cumsum(np.bincount(row, minlength=offsets.shape[0] - 1), out=new_offsets[1:])
    return pairs, new_offsets


def _twin_order(src_hash: np.ndarray, tgt_hash: np.ndarray, rule_offsets: np.ndarray,
                align: np.ndarray, align_off: np.ndarray) -> np.ndarray:
    """A tiebreak key per rule for rules with the same source and target strings (they differ in
    how their non-terminals pair): Moses writes them in the order of their first line in its
    sorted extract file, i.e. by the smallest ``"<alignment> |||"`` text among their variants
    (``align`` holds each variant's links in extract-file order, the variants of rule r at
    ``rule_offsets[r]:rule_offsets[r+1]``).  0 for every other rule."""
    n = rule_offsets.shape[0] - 1
    key = np.zeros(n, dtype=np.int64)
    pair = src_hash ^ (tgt_hash * np.uint64(0x9E3779B97F4A7C15))   # (a collision only adds a key)
    _, inverse, counts = np.unique(pair, return_inverse=True, return_counts=True)
    twins = np.flatnonzero(counts[inverse.reshape(-1)] > 1)
    if twins.shape[0] == 0:
        return key
    smallest = []
    for r in twins.tolist():
        texts = [" ".join(f"{int(s)}-{int(t)}" for s, t in align[align_off[v]:align_off[v + 1]]) + " |||"
                 for v in range(rule_offsets[r], rule_offsets[r + 1])]
        smallest.append(min(t.encode("utf-8") for t in texts))
    ranks = {text: k for k, text in enumerate(sorted(set(smallest)))}
    key[twins] = [ranks[text] + 1 for text in smallest]
    return key


def _side_rows(texts: TokenTexts, syms: np.ndarray, off: np.ndarray, n_words: int, lo: int,
               hi: int) -> list[str]:
    """Rule sides ``lo:hi`` as Moses text: non-terminals ``[X][X]``, the left-hand side last."""
    part = syms[off[lo]:off[hi]].astype(np.int64)
    part = np.where(part < 0, n_words, part)
    length = np.diff(off[lo:hi + 1])
    with_lhs = np.insert(part, (off[lo + 1:hi + 1] - off[lo]), n_words + 1)
    new_off = np.zeros(hi - lo + 1, dtype=np.int64)
    np.cumsum(length + 1, out=new_off[1:])
    return texts.rows(with_lhs, new_off, 0, hi - lo)


def write_moses_rule_table(table: HieroTable, src_vocab: Vocabulary, tgt_vocab: Vocabulary,
                           path: str | os.PathLike) -> int:
    """Write ``table`` as Moses' hierarchical rule table (atomically; gzip for ``.gz``)::

        src [X][X] [X] ||| tgt [X][X] [X] ||| p(f|e) lex(f|e) p(e|f) lex(e|f) ||| 0-0 1-1 ||| c(e) c(f) c(f,e) ||| |||

    Returns the number of rules written."""
    src_texts = TokenTexts(list(src_vocab.words) + [NONTERMINAL, LHS])
    tgt_texts = TokenTexts(list(tgt_vocab.words) + [NONTERMINAL, LHS])
    n_src, n_tgt = len(src_vocab), len(tgt_vocab)
    with atomic_write(path, binary=True) as out:
        for lo in range(0, len(table), CHUNK_ROWS):
            hi = min(lo + CHUNK_ROWS, len(table))
            scores = table.scores[lo:hi]
            counts = format_g(table.counts[lo:hi].astype(np.float32))
            links = table.align[table.align_off[lo]:table.align_off[hi]].astype(np.int64)
            codes = links[:, 0] * 65536 + links[:, 1]
            distinct, inverse = np.unique(codes, return_inverse=True)
            link_texts = TokenTexts([f"{c // 65536}-{c % 65536}" for c in distinct.tolist()])
            aligns = link_texts.rows(inverse.reshape(-1),
                                     table.align_off[lo:hi + 1] - table.align_off[lo], 0, hi - lo)
            lines = [f"{s} ||| {t} ||| {a} {b} {d} {e} ||| {al} ||| {c1} {c2} {c3} ||| |||\n"
                     for s, t, a, b, d, e, al, c1, c2, c3 in zip(
                         _side_rows(src_texts, table.src_syms, table.src_off, n_src, lo, hi),
                         _side_rows(tgt_texts, table.tgt_syms, table.tgt_off, n_tgt, lo, hi),
                         *(format_g(scores[:, k].astype(np.float32)) for k in range(4)),
                         aligns, counts[0::3], counts[1::3], counts[2::3])]
            out.write("".join(lines).encode("utf-8"))
    return len(table)
