"""Hiero grammars for input sentences: rules extracted from a word-aligned corpus, scored as
Moses scores them, and kept only where an input sentence can use them.

A full rule table for 29,000 Multi30k pairs has 7.6 million rules; a test set of 1,000 sentences
uses 1.2 million of them.  :func:`build_grammars` therefore never holds the full table: it
extracts the corpus in chunks of sentence pairs (:mod:`minismt.extract.hiero`), keeps the rules
whose source side matches some input sentence (Moses' ``filter-rule-table hierarchical``: the
terminals in order, each non-terminal over at least one word; :mod:`minismt.extract._grammar_kernels`)
and only the per-target-string counts c(e) of the others, which p(f|e) needs
(:mod:`minismt.extract.hiero_table`).  This is Moses' pipeline (``train-model.perl -hierarchical``
then ``filter-model-given-input.pl``) in one pass, with the same rules and scores.

A :class:`HieroGrammar` is the scored table of one input set with, for each sentence, the rules
it matches (cdec's per-sentence grammars).  It is saved as one ``.npz`` (``allow_pickle=False``)
and written as Moses' rule table (with the glue grammar) or as cdec per-sentence grammars.
"""

from __future__ import annotations

import os
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from minismt.corpus import Alignment, TokenArray, Vocabulary, array_to_words, words_to_array
from minismt.errors import InputError
from minismt.extract import _grammar_kernels as _gk
from minismt.extract import _hiero_kernels as _hk
from minismt.extract.extraction import train_lexical_table
from minismt.extract.hiero import (DEFAULT_HIERO_OPTIONS, LHS, NONTERMINAL, HieroOptions,
                                   aggregate_rules, extract_hiero, merge_rules)
from minismt.extract.hiero_table import (COUNT_NAMES, SCORE_NAMES, HieroTable, SideCounts,
                                         rule_hashes, score_rules, side_hashes, target_counts,
                                         write_moses_rule_table)
from minismt.io import atomic_write
from minismt.progress import bar as progress_bar

FORMAT = "minismt-hiero-grammar"
VERSION = 1
DEFAULT_CHUNK_PAIRS = 2000

GLUE_GRAMMAR = (
    "<s> [X] ||| <s> [S] ||| 1 ||| 0-0 ||| 0 ||| |||",
    "[X][S] </s> [X] ||| [X][S] </s> [S] ||| 1 ||| 0-0 1-1 ||| 0 ||| |||",
    "[X][S] [X][X] [X] ||| [X][S] [X][X] [S] ||| 2.718 ||| 0-0 1-1 ||| 0 ||| |||",
)
"""The glue grammar ``extract-rules --GlueGrammar`` writes (Chiang 2007's S -> <S X, S X> and,
through ``<s>``, S -> <X, X>; the one score is 2.718 = e on the concatenation, so its feature
counts glue rules)."""


def write_glue_grammar(path: str | os.PathLike) -> None:
    with atomic_write(path) as out:
        out.write("".join(line + "\n" for line in GLUE_GRAMMAR))


def looks_like_nonterminal(word: str) -> bool:
    """A word Moses' and cdec's rule readers would take for a non-terminal (``[...]``)."""
    return len(word) >= 3 and word.startswith("[") and word.endswith("]")


@dataclass
class HieroGrammar:
    """The scored rules of one input set (:class:`HieroTable`, in Moses' order, so the rules of one
    source side are contiguous: source side u has rules ``source_offsets[u]:source_offsets[u+1]``)
    and per input sentence s the source sides it matches:
    ``sentence_sources[sentence_offsets[s]:sentence_offsets[s+1]]`` (increasing)."""

    table: HieroTable
    src_vocab: Vocabulary
    tgt_vocab: Vocabulary
    source_offsets: np.ndarray
    sentence_offsets: np.ndarray
    sentence_sources: np.ndarray
    cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    """What users derive from the rules once for every weights (e.g. the sparse rule features)."""

    def __len__(self) -> int:
        return len(self.table)

    @property
    def n_sentences(self) -> int:
        return self.sentence_offsets.shape[0] - 1

    @property
    def n_sources(self) -> int:
        return self.source_offsets.shape[0] - 1

    def sources_of(self, sentence: int) -> np.ndarray:
        return self.sentence_sources[self.sentence_offsets[sentence]:self.sentence_offsets[sentence + 1]]

    def rules_of(self, sentence: int) -> np.ndarray:
        """The rules sentence ``sentence`` can use, increasing."""
        sources = self.sources_of(sentence).astype(np.int64)
        return concatenated_ranges(self.source_offsets[sources], self.source_offsets[sources + 1])

    def write_moses(self, path: str | os.PathLike) -> int:
        """Moses' hierarchical rule table of every rule (gzip for ``.gz``); returns the count."""
        if self.table.counts.shape[1] != len(COUNT_NAMES):
            raise ValueError("a grammar loaded for decoding (no counts, no alignments) cannot be written as a table")
        return write_moses_rule_table(self.table, self.src_vocab, self.tgt_vocab, path)

    def save(self, path: str | os.PathLike) -> None:
        t = self.table
        arrays = {
            "format": np.array(FORMAT), "version": np.array(VERSION, dtype=np.int64),
            "src_syms": t.src_syms, "src_off": t.src_off, "tgt_syms": t.tgt_syms,
            "tgt_off": t.tgt_off, "align": t.align, "align_off": t.align_off,
            "scores": t.scores, "counts": t.counts,
            "source_offsets": self.source_offsets, "sentence_offsets": self.sentence_offsets,
            "sentence_sources": self.sentence_sources,
            "score_names": np.array(SCORE_NAMES), "count_names": np.array(COUNT_NAMES),
        }
        for side, vocab in (("src", self.src_vocab), ("tgt", self.tgt_vocab)):
            arrays[f"{side}_vocab_utf8"], arrays[f"{side}_vocab_offsets"] = words_to_array(vocab.words)
        with atomic_write(path, binary=True, compress=False) as out:
            np.savez(out, **arrays)

    @classmethod
    def load(cls, path: str | os.PathLike, decoding: bool = False) -> "HieroGrammar":
        """Read a grammar written by :meth:`save`; anything else is an :class:`InputError`.

        ``decoding``: only what a decoder reads (no counts, no word alignments; the scores, which are single
        precision numbers, in single precision): a third less memory, and it cannot be written as a table."""
        try:
            with np.load(path, allow_pickle=False) as data:
                skip = ("counts", "align") if decoding else ()
                arrays = {key: data[key] for key in data.files if key not in skip}
            if decoding:
                n = arrays["scores"].shape[0]
                arrays.update(counts=np.zeros((n, 0)), align=np.zeros((0, 2), dtype=np.int16),
                              align_off=np.zeros(n + 1, dtype=np.int64), scores=arrays["scores"].astype(np.float32))
            if str(arrays.get("format", "")) != FORMAT or int(arrays.get("version", -1)) != VERSION:
                raise InputError("not a minismt Hiero grammar", path, expected=f"{FORMAT} {VERSION}")
            vocabs = [Vocabulary(array_to_words(arrays[f"{side}_vocab_utf8"],
                                                arrays[f"{side}_vocab_offsets"]))
                      for side in ("src", "tgt")]
            table = HieroTable(arrays["src_syms"], arrays["src_off"], arrays["tgt_syms"],
                               arrays["tgt_off"], arrays["align"], arrays["align_off"],
                               arrays["scores"], arrays["counts"])
            return cls(table, vocabs[0], vocabs[1], arrays["source_offsets"],
                       arrays["sentence_offsets"], arrays["sentence_sources"])
        except InputError:
            raise
        except (OSError, EOFError, ValueError, KeyError, TypeError, IndexError,
                UnicodeDecodeError, zipfile.BadZipFile, zlib.error) as err:
            raise InputError(f"not a minismt Hiero grammar ({type(err).__name__}: {err})",
                             path) from None


def concatenated_ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The integers of the ranges ``starts[k]:ends[k]``, concatenated."""
    lengths = ends - starts
    return np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))


def _rows(tokens: TokenArray, lo: int, hi: int) -> TokenArray:
    return TokenArray(tokens.ids[tokens.offsets[lo]:tokens.offsets[hi]],
                      tokens.offsets[lo:hi + 1] - tokens.offsets[lo])


def _alignment_rows(alignment: Alignment, lo: int, hi: int) -> Alignment:
    return Alignment(alignment.links[alignment.offsets[lo]:alignment.offsets[hi]],
                     alignment.offsets[lo:hi + 1] - alignment.offsets[lo])


@dataclass
class GrammarReport:
    """What :func:`build_grammars` did: sizes, times (s) and the peak resident memory (MB)."""

    pairs: int = 0
    occurrences: int = 0
    rules_total: int = 0
    rules_by_nonterminals: tuple[int, ...] = ()
    rules_kept: int = 0
    target_strings: int = 0
    seconds: dict | None = None
    sizes: dict | None = None

    def as_dict(self) -> dict:
        return {"pairs": self.pairs, "occurrences": self.occurrences,
                "rules_total": self.rules_total,
                "rules_by_nonterminals": list(self.rules_by_nonterminals),
                "rules_kept": self.rules_kept, "target_strings": self.target_strings,
                "seconds": self.seconds or {}, "rules_per_input": self.sizes or {}}


def build_grammars(src: TokenArray, tgt: TokenArray, alignment: Alignment,
                   src_vocab: Vocabulary, tgt_vocab: Vocabulary,
                   inputs: Mapping[str, Sequence[str]] | None,
                   options: HieroOptions = DEFAULT_HIERO_OPTIONS,
                   chunk_pairs: int = DEFAULT_CHUNK_PAIRS,
                   progress: bool = False) -> tuple[dict[str, HieroGrammar], GrammarReport]:
    """Extract, score and filter the Hiero rules of a word-aligned corpus for each input set.

    ``inputs`` maps a name to the tokenised lines of an input set; each gets a
    :class:`HieroGrammar` of the rules whose source side matches one of its sentences, with the
    same scores as in the full table.  ``inputs=None`` gives the full table under the name
    ``"all"`` (no per-sentence index).  The corpus is processed ``chunk_pairs`` sentence pairs at a
    time, so memory grows with the kept rules, not with the full table."""
    if chunk_pairs < 1:
        raise InputError(f"chunk_pairs {chunk_pairs}", expected="an integer >= 1")
    check_vocabularies(src_vocab, tgt_vocab)
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    lexical = train_lexical_table(src, tgt, alignment, src_vocab, tgt_vocab)
    seconds["lexical tables"] = time.perf_counter() - started

    started = time.perf_counter()
    patterns: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
    for name, lines in (inputs or {}).items():
        patterns[name] = (*input_patterns(lines, src_vocab, options), len(lines))
    wanted = np.unique(np.concatenate([p[1] for p in patterns.values()])) if inputs else None
    seconds["input patterns"] = time.perf_counter() - started

    started = time.perf_counter()
    report = GrammarReport(pairs=len(src))
    totals = CorpusTotals()
    kept = []
    for rules in extract_chunks(src, tgt, alignment, options, chunk_pairs, report, progress):
        totals.add(rules)
        if wanted is not None:
            rules = rules.select(np.flatnonzero(
                    np.isin(side_hashes(rules.src_syms, rules.src_off), wanted)))
        kept.append(rules)
    merged = merge_rules(kept)
    del kept
    target_table = totals.finish(report, options)
    seconds["extraction"] = time.perf_counter() - started

    started = time.perf_counter()
    table = score_rules(merged, lexical, src_vocab, tgt_vocab, target_table)
    del merged
    report.rules_kept = len(table)
    seconds["scoring"] = time.perf_counter() - started

    started = time.perf_counter()
    grammars: dict[str, HieroGrammar] = {}
    source_offsets, source_hash = source_sides(table)
    if inputs is None:
        grammars["all"] = HieroGrammar(table, src_vocab, tgt_vocab, source_offsets,
                                       np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32))
    else:
        order = np.argsort(source_hash)
        sorted_hash = source_hash[order]
        for name, (sent, hashes, n_sent) in patterns.items():
            pos = np.minimum(np.searchsorted(sorted_hash, hashes), max(sorted_hash.shape[0] - 1, 0))
            found = sorted_hash[pos] == hashes if sorted_hash.shape[0] else np.zeros(0, dtype=bool)
            offsets, sources = sentence_index(sent[found], order[pos[found]], n_sent)
            grammars[name] = _restrict(table, src_vocab, tgt_vocab, source_offsets, offsets, sources)
    seconds["filtering"] = time.perf_counter() - started
    report.seconds = {k: round(v, 2) for k, v in seconds.items()}
    report.sizes = {name: len(g) for name, g in grammars.items()}
    return grammars, report


def check_vocabularies(src_vocab: Vocabulary, tgt_vocab: Vocabulary) -> None:
    """An InputError for a corpus word that a rule table would read as a non-terminal."""
    for vocab, side in ((src_vocab, "source"), (tgt_vocab, "target")):
        bad = next((w for w in vocab.words if looks_like_nonterminal(w)), None)
        if bad is not None:
            raise InputError(f"the {side} word {bad!r} would read as a non-terminal in a rule table",
                             expected="square brackets escaped (&#91; &#93;, as Moses' "
                                      "escape-special-chars.perl)")


def input_patterns(lines: Sequence[str], src_vocab: Vocabulary, options: HieroOptions,
                   max_span: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every (sentence, source-side hash) a rule could match in the tokenised ``lines`` (words
    split at any whitespace; unknown words match nothing), sorted by sentence then hash; with
    ``max_span`` only the matches of spans of at most that many words (a decoder's rule span: the
    patterns of a line of n words grow as n^3 without it, as n with it)."""
    encoded = TokenArray.from_sentences(lines, src_vocab, grow=False)
    return _gk.source_patterns(encoded.ids, encoded.offsets, int(options.max_symbols_source),
                               int(options.max_nonterm), bool(options.nonterm_consec_source),
                               int(max_span or 0))


def extract_chunks(src: TokenArray, tgt: TokenArray, alignment: Alignment, options: HieroOptions,
                   chunk_pairs: int, report: GrammarReport, progress: bool = False):
    """The distinct rules of each ``chunk_pairs`` sentence pairs of a corpus in turn (so that the
    rule occurrences of one chunk at a time are held), counting the occurrences into ``report``."""
    chunks = range(0, len(src), chunk_pairs)
    for lo in progress_bar(chunks, desc="hiero rules", unit="chunk", enabled=progress):
        hi = min(lo + chunk_pairs, len(src))
        occ = extract_hiero(_rows(src, lo, hi), _rows(tgt, lo, hi),
                            _alignment_rows(alignment, lo, hi), options)
        report.occurrences += len(occ)
        rules = aggregate_rules(occ)
        del occ
        yield rules


class CorpusTotals:
    """What scoring needs from every rule of the corpus, whatever is kept: c(e) of each target
    string, and the distinct rules (their number, by non-terminals, for the report)."""

    def __init__(self):
        self._targets: list[SideCounts] = []
        self._identities: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, rules) -> None:
        self._targets.append(target_counts(rules))
        self._identities.append(_rule_identities(rules))
        if len(self._targets) >= 8:                       # keep the per-chunk tables compact
            self._targets = [SideCounts.merge(self._targets)]
            self._identities = [_merge_identities(self._identities)]

    def finish(self, report: GrammarReport, options: HieroOptions) -> SideCounts:
        """c(e) of every target string; the rule counts go into ``report``."""
        target_table = SideCounts.merge(self._targets)
        report.target_strings = int(target_table.hashes.shape[0])
        identities, nonterminals = _merge_identities(self._identities)
        report.rules_total = int(identities.shape[0])
        report.rules_by_nonterminals = tuple(int(n) for n in np.bincount(
                nonterminals, minlength=int(options.max_nonterm) + 1))
        self._targets, self._identities = [], []
        return target_table


def sentence_index(sentences: np.ndarray, sources: np.ndarray, n_sentences: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Per sentence the source sides it matches, increasing, from (sentence, side) pairs: the
    offsets and the sides (:class:`HieroGrammar`'s ``sentence_offsets``, ``sentence_sources``)."""
    by_sentence = np.lexsort((sources, sentences))
    offsets = np.zeros(n_sentences + 1, dtype=np.int64)
    np.cumsum(np.bincount(sentences, minlength=n_sentences), out=offsets[1:])
    return offsets, sources[by_sentence]


def _rule_identities(rules) -> tuple[np.ndarray, np.ndarray]:
    """A 64-bit hash of each distinct rule (source and target symbols with their non-terminal
    pairing; the word alignment is not part of a rule) and its number of non-terminals."""
    hashes = rule_hashes(rules)
    n_nt = np.add.reduceat((rules.src_syms < 0).astype(np.int64), rules.src_off[:-1]) \
        if len(rules) else np.zeros(0, dtype=np.int64)
    unique, first = np.unique(hashes, return_index=True)
    return unique, n_nt[first]


def _merge_identities(parts) -> tuple[np.ndarray, np.ndarray]:
    if not parts:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    hashes = np.concatenate([p[0] for p in parts])
    n_nt = np.concatenate([p[1] for p in parts])
    unique, first = np.unique(hashes, return_index=True)
    return unique, n_nt[first]


def source_sides(table: HieroTable) -> tuple[np.ndarray, np.ndarray]:
    """The runs of rules with the same source side (contiguous in Moses' order): their offsets and
    each side's hash (:func:`side_hashes`), checked distinct."""
    hashes = side_hashes(table.src_syms, table.src_off)
    starts = np.flatnonzero(np.r_[True, hashes[1:] != hashes[:-1]]) if hashes.shape[0] else \
        np.zeros(0, dtype=np.int64)
    offsets = np.append(starts, hashes.shape[0]).astype(np.int64)
    run = np.repeat(np.arange(starts.shape[0]), np.diff(offsets))
    if not _hk.sides_match(run, starts.astype(np.int64), table.src_syms, table.src_off) or \
            np.unique(hashes[starts]).shape[0] != starts.shape[0]:
        raise RuntimeError("64-bit hash collision between two rule source sides")
    return offsets, hashes[starts]


def _restrict(table: HieroTable, src_vocab: Vocabulary, tgt_vocab: Vocabulary,
              source_offsets: np.ndarray, sentence_offsets: np.ndarray,
              sentence_sources: np.ndarray) -> HieroGrammar:
    """The grammar of the source sides some sentence uses, renumbered (Moses' order kept)."""
    used = np.unique(sentence_sources)
    new_id = np.full(source_offsets.shape[0] - 1, -1, dtype=np.int64)
    new_id[used] = np.arange(used.shape[0])
    sub = table.take(concatenated_ranges(source_offsets[used], source_offsets[used + 1]))
    lengths = source_offsets[used + 1] - source_offsets[used]
    new_offsets = np.zeros(used.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    return HieroGrammar(sub, src_vocab, tgt_vocab, new_offsets, sentence_offsets,
                        new_id[sentence_sources].astype(np.int32))


__all__ = ["GLUE_GRAMMAR", "CorpusTotals", "GrammarReport", "HieroGrammar", "LHS", "NONTERMINAL",
           "build_grammars", "check_vocabularies", "concatenated_ranges", "extract_chunks", "input_patterns", "looks_like_nonterminal", "sentence_index",
           "source_sides", "write_glue_grammar"]
