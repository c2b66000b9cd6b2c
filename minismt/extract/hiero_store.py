"""The full scored Hiero rule table of a corpus, stored so that the grammar of any input is a
look-up: what ``minismt train --hiero`` keeps, so that a Hiero model translates any text.

Moses keeps its full rule table and filters it for each input (``filter-model-given-input.pl``);
cdec extracts each sentence's rules from a suffix array over the training corpus (Lopez 2007).
A suffix array cannot give Moses' scores without the whole table: p(f|e) divides by c(e), the
count of a target string over *every* rule of the corpus, which only a full extraction knows.  So
this is Moses' way, made cheap: the table is built once, in ``buckets`` parts by the hash of
the source side (every rule of a source string lands in one bucket, so c(f) and Moses' order are
local to it), each part scored as :func:`~minismt.extract.hiero_table.score_rules` scores the
whole table (c(e) from every chunk of the corpus), and written as uncompressed ``.npy`` arrays
that are memory-mapped when read.  The grammar of an input joins the hashes of the source sides
its sentences can match (:func:`~minismt.extract.hiero_grammar.input_patterns`) with each
bucket's sorted side hashes and reads only those rules: the same rules, scores and order as
:func:`~minismt.extract.hiero_grammar.build_grammars` filtering the full table gives.

Building holds one chunk of rule occurrences and one bucket of rules at a time: the chunks'
distinct rules are spilled to disk by bucket between the two passes.

Layout of a store folder::

    store.json                   format, version, options, sizes, the report of the build
    src-vocab.npy, tgt-vocab.npy (+ -offsets.npy)   the vocabularies (UTF-8 bytes, offsets)
    bucket-NN/ARRAY.npy          one scored HieroTable per bucket, in Moses' order, and its
                                 source sides: side_offsets (rules of each side), side_hash
                                 (sorted), side_of_hash (the side of each sorted hash)
"""

from __future__ import annotations

import mmap
import os
import time
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from minismt.corpus import Alignment, TokenArray, Vocabulary, array_to_words, words_to_array
from minismt.errors import InputError
from minismt.extract.extraction import train_lexical_table
from minismt.extract.hiero import DEFAULT_HIERO_OPTIONS, HieroOptions, HieroRules, merge_rules
from minismt.extract.hiero_grammar import (DEFAULT_CHUNK_PAIRS, CorpusTotals, GrammarReport,
                                           concatenated_ranges,
                                           HieroGrammar, check_vocabularies, extract_chunks,
                                           input_patterns, sentence_index, source_sides)
from minismt.extract.hiero_table import HieroTable, score_rules, side_hashes, side_order, symbol_ranks
from minismt.extract.phrase_table import take_ranges
from minismt.io import load_arrays, read_folder_info, replaced_folder, save_arrays, write_folder_info
from minismt.progress import bar as progress_bar

STORE_FORMAT = "minismt-hiero-rule-store"
STORE_VERSION = 1
DEFAULT_BUCKETS = 16
TABLE_ARRAYS = ("src_syms", "src_off", "tgt_syms", "tgt_off", "align", "align_off", "scores", "counts")
_SPILL_ARRAYS = ("src_syms", "src_off", "tgt_syms", "tgt_off", "align", "align_off", "count",
                 "n_occurrences")


def _bucket_of(hashes: np.ndarray, buckets: int) -> np.ndarray:
    return (hashes % np.uint64(buckets)).astype(np.int64)


def build_rule_store(src: TokenArray, tgt: TokenArray, alignment: Alignment,
                     src_vocab: Vocabulary, tgt_vocab: Vocabulary, path: str | os.PathLike,
                     options: HieroOptions = DEFAULT_HIERO_OPTIONS,
                     chunk_pairs: int = DEFAULT_CHUNK_PAIRS, buckets: int = DEFAULT_BUCKETS,
                     progress: bool = False) -> GrammarReport:
    """Extract and score every Hiero rule of a word-aligned corpus into the store folder ``path``.

    The folder appears complete or not at all: it is built beside ``path`` and renamed into
    place (an existing store there is replaced); a killed build leaves only the partial folder,
    which the next build removes."""
    if chunk_pairs < 1 or buckets < 1:
        raise InputError(f"chunk_pairs {chunk_pairs}, buckets {buckets}", expected="integers >= 1")
    check_vocabularies(src_vocab, tgt_vocab)
    with replaced_folder(path) as partial:
        return _build(partial, src, tgt, alignment, src_vocab, tgt_vocab, options, chunk_pairs, buckets, progress)


def _build(partial: str, src: TokenArray, tgt: TokenArray, alignment: Alignment, src_vocab: Vocabulary,
           tgt_vocab: Vocabulary, options: HieroOptions, chunk_pairs: int, buckets: int,
           progress: bool) -> GrammarReport:
    """:func:`build_rule_store` into the folder ``partial``."""
    spill = os.path.join(partial, "spill")
    os.makedirs(spill)
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    lexical = train_lexical_table(src, tgt, alignment, src_vocab, tgt_vocab)
    seconds["lexical tables"] = time.perf_counter() - started

    started = time.perf_counter()
    report = GrammarReport(pairs=len(src))
    totals = CorpusTotals()
    n_chunks = 0
    for rules in extract_chunks(src, tgt, alignment, options, chunk_pairs, report, progress):
        totals.add(rules)
        bucket = _bucket_of(side_hashes(rules.src_syms, rules.src_off), buckets)
        for b in range(buckets):
            part = rules.select(np.flatnonzero(bucket == b))
            np.savez(os.path.join(spill, f"{b:02d}-{n_chunks:05d}.npz"),
                     **{name: getattr(part, name) for name in _SPILL_ARRAYS})
        n_chunks += 1
    targets = totals.finish(report, options)
    seconds["extraction"] = time.perf_counter() - started

    started = time.perf_counter()
    for b in progress_bar(range(buckets), desc="hiero scoring", unit="bucket", enabled=progress):
        parts = []
        for c in range(n_chunks):
            spilled = os.path.join(spill, f"{b:02d}-{c:05d}.npz")
            with np.load(spilled, allow_pickle=False) as data:
                arrays = {name: data[name] for name in _SPILL_ARRAYS}
            os.unlink(spilled)
            n = arrays["count"].shape[0]
            parts.append(HieroRules(arrays["src_syms"], arrays["src_off"], arrays["tgt_syms"],
                                    arrays["tgt_off"], arrays["align"], arrays["align_off"],
                                    arrays["count"], None, None, np.zeros(n, dtype=np.int64),
                                    arrays["n_occurrences"]))
        table = score_rules(merge_rules(parts), lexical, src_vocab, tgt_vocab, targets)
        del parts
        report.rules_kept += len(table)
        side_offsets, side_hash = source_sides(table)
        by_hash = np.argsort(side_hash)
        folder = os.path.join(partial, f"bucket-{b:02d}")
        os.makedirs(folder)
        save_arrays(folder, {**{name: _compact(getattr(table, name)) for name in TABLE_ARRAYS},
                             "side_offsets": side_offsets, "side_hash": side_hash[by_hash],
                             "side_of_hash": by_hash.astype(np.int64)})
    os.rmdir(spill)
    seconds["scoring"] = time.perf_counter() - started

    for side, vocab in (("src", src_vocab), ("tgt", tgt_vocab)):
        utf8, offsets = words_to_array(vocab.words)
        save_arrays(partial, {f"{side}-vocab": utf8, f"{side}-vocab-offsets": offsets})
    report.seconds = {k: round(v, 2) for k, v in seconds.items()}
    report.sizes = {"all": report.rules_kept}
    write_folder_info(os.path.join(partial, "store.json"),
                      {"format": STORE_FORMAT, "version": STORE_VERSION, "buckets": buckets,
                       "options": asdict(options), "report": report.as_dict()})
    return report




def _compact(values: np.ndarray) -> np.ndarray:
    """The array as stored: the scores and counts (six-digit numbers read as a C++ float, see
    :mod:`minismt.extract.hiero_table`) in single precision, offsets in 32 bits, both exactly."""
    if values.dtype == np.float64:
        small = values.astype(np.float32)
        if not np.array_equal(small.astype(np.float64), values):
            raise RuntimeError("a rule score that single precision does not hold")
        return small
    if values.dtype == np.int64 and (values.shape[0] == 0 or int(values[-1]) < 2 ** 31):
        return values.astype(np.int32)
    return values


@dataclass
class _Bucket:
    table: HieroTable
    side_offsets: np.ndarray
    side_hash: np.ndarray
    side_of_hash: np.ndarray
    maps: list  # the memory maps of the table's arrays (np.memmap's own), to release what was read


class RuleStore:
    """A store folder written by :func:`build_rule_store`, memory-mapped: :meth:`grammar` gives the
    :class:`~minismt.extract.hiero_grammar.HieroGrammar` of any input."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        info = read_folder_info(os.path.join(self.path, "store.json"), STORE_FORMAT, STORE_VERSION,
                                "minismt Hiero rule store",
                                missing="no Hiero rule store (a model trained by an older minismt?)",
                                unreadable="unreadable Hiero rule store",
                                expected="a model folder written by 'minismt train --hiero'")
        self.info = info
        self.options = HieroOptions(**info["options"])
        try:
            vocabs = load_arrays(self.path, ("src-vocab", "src-vocab-offsets", "tgt-vocab", "tgt-vocab-offsets"),
                                 mmap_mode=None)
            self.src_vocab, self.tgt_vocab = (
                Vocabulary(array_to_words(vocabs[f"{side}-vocab"], vocabs[f"{side}-vocab-offsets"]))
                for side in ("src", "tgt"))
            self._source_ranks: tuple | None = None   # side_order's ranks of the source words, once
            self._buckets = [self._bucket(f"bucket-{b:02d}") for b in range(int(info["buckets"]))]
        except (OSError, ValueError) as err:
            raise InputError(f"unreadable Hiero rule store ({err})", self.path) from None

    def _bucket(self, folder: str) -> _Bucket:
        folder = os.path.join(self.path, folder)
        maps = load_arrays(folder, TABLE_ARRAYS, mmap_mode="r")
        arrays = {name: np.asarray(m) for name, m in maps.items()}  # plain views: no np.memmap per-slice cost
        index = load_arrays(folder, ("side_offsets", "side_hash", "side_of_hash"), mmap_mode=None)
        return _Bucket(HieroTable(*(arrays[name] for name in TABLE_ARRAYS)), index["side_offsets"],
                       index["side_hash"], index["side_of_hash"],
                       [m._mmap for m in maps.values() if getattr(m, "_mmap", None) is not None])

    def __len__(self) -> int:
        return sum(len(bucket.table) for bucket in self._buckets)

    def buckets(self):
        """Each bucket's scored rules (memory-mapped :class:`HieroTable`, Moses' order within it)."""
        return (bucket.table for bucket in self._buckets)

    def grammar(self, lines: Sequence[str], decoding: bool = False, max_span: int | None = None) -> HieroGrammar:
        """The grammar of the tokenised ``lines``: every rule whose source side matches one of them
        (Moses' ``filter-rule-table hierarchical``), in Moses' order, with each sentence's sides.
        ``decoding``: only what a decoder reads, as :meth:`HieroGrammar.load` reads it (no counts, no word
        alignments, the scores in single precision, as stored); ``max_span``: only the sides that match a
        span of at most that many words (the decoder's ``max_span``: what it can apply, for lines of any
        length)."""
        sent, hashes = input_patterns(lines, self.src_vocab, self.options, max_span)
        bucket_of = _bucket_of(hashes, len(self._buckets))
        pieces, matches = [], []
        n_sides = 0
        for b, bucket in enumerate(self._buckets):
            mine = np.flatnonzero(bucket_of == b)
            if mine.shape[0] == 0 or bucket.side_hash.shape[0] == 0:
                continue
            pos = np.minimum(np.searchsorted(bucket.side_hash, hashes[mine]), bucket.side_hash.shape[0] - 1)
            found = bucket.side_hash[pos] == hashes[mine]
            sides = bucket.side_of_hash[pos[found]]
            used, local = np.unique(sides, return_inverse=True)
            rows = concatenated_ranges(bucket.side_offsets[used], bucket.side_offsets[used + 1])
            pieces.append((_take(bucket.table, rows, decoding), np.diff(bucket.side_offsets)[used]))
            self._release(bucket)
            matches.append((sent[mine][found], n_sides + local.reshape(-1)))
            n_sides += used.shape[0]
        table, side_lengths = _gather(pieces, decoding)
        # Moses' order across buckets: the sides sorted by their text (within a side, a bucket's order)
        starts = np.zeros(n_sides + 1, dtype=np.int64)
        np.cumsum(side_lengths, out=starts[1:])
        firsts_syms, firsts_off = take_ranges(table.src_syms, table.src_off, starts[:-1])
        if self._source_ranks is None:
            self._source_ranks = symbol_ranks(self.src_vocab)
        order = side_order(firsts_syms, firsts_off, self.src_vocab, self._source_ranks)
        new_id = np.empty(n_sides, dtype=np.int64)
        new_id[order] = np.arange(n_sides)
        table = table.take(concatenated_ranges(starts[order], starts[order + 1]))
        source_offsets = np.zeros(n_sides + 1, dtype=np.int64)
        np.cumsum(side_lengths[order], out=source_offsets[1:])
        sentences = np.concatenate([m[0] for m in matches]) if matches else np.zeros(0, dtype=np.int64)
        sides = new_id[np.concatenate([m[1] for m in matches])] if matches else np.zeros(0, dtype=np.int64)
        offsets, sentence_sources = sentence_index(sentences, sides, len(lines))
        return HieroGrammar(table, self.src_vocab, self.tgt_vocab, source_offsets, offsets,
                            sentence_sources.astype(np.int32))

    @staticmethod
    def _release(bucket: _Bucket) -> None:
        """Give the pages of a bucket this process read back to the OS (they stay in its page cache, so the
        next grammar reads them again cheaply): the kernel maps 64 KB around each page read, so the rules of
        a few hundred scattered sides would otherwise put the whole bucket in the process' resident memory,
        and one grammar of 16 sentences the whole store (0.75 GB on Multi30k)."""
        if hasattr(mmap, "MADV_DONTNEED"):
            for mapped in bucket.maps:
                mapped.madvise(mmap.MADV_DONTNEED)


def _take(table: HieroTable, rows: np.ndarray, decoding: bool) -> HieroTable:
    """``table.take(rows)``; ``decoding``: without counts and word alignments, the scores as stored."""
    if not decoding:
        return table.take(rows)
    src, src_off = take_ranges(table.src_syms, table.src_off, rows)
    tgt, tgt_off = take_ranges(table.tgt_syms, table.tgt_off, rows)
    return HieroTable(src, src_off, tgt, tgt_off, np.zeros((0, 2), dtype=np.int16),
                      np.zeros(rows.shape[0] + 1, dtype=np.int64), table.scores[rows], np.zeros((rows.shape[0], 0)))


def _gather(pieces, decoding: bool) -> tuple[HieroTable, np.ndarray]:
    """Several tables (each with its side lengths) as one table, and the concatenated side lengths; the
    scores and counts in double precision, or as stored when ``decoding``."""
    precision = np.float32 if decoding else np.float64
    taken = [table for table, _ in pieces]
    if not taken:
        return HieroTable(np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64),
                          np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64),
                          np.zeros((0, 2), dtype=np.int16), np.zeros(1, dtype=np.int64),
                          np.zeros((0, 4), dtype=precision),
                          np.zeros((0, 0 if decoding else 3), dtype=precision)), np.zeros(0, dtype=np.int64)
    arrays = []
    for values, offsets in (("src_syms", "src_off"), ("tgt_syms", "tgt_off"), ("align", "align_off")):
        flat = np.concatenate([getattr(t, values) for t in taken])
        lengths = np.concatenate([np.diff(getattr(t, offsets)) for t in taken])
        off = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
        np.cumsum(lengths, out=off[1:])
        arrays += [flat, off]
    return (HieroTable(*arrays, np.concatenate([t.scores for t in taken]).astype(precision),
                       np.concatenate([t.counts for t in taken]).astype(precision)),
            np.concatenate([lengths for _, lengths in pieces]))


__all__ = ["DEFAULT_BUCKETS", "RuleStore", "build_rule_store"]
