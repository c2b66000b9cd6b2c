"""Phrase-table training from a word-aligned corpus: Moses ``train-model.perl`` steps 4-7.

1. Lexical translation tables w(e|f), w(f|e) (:mod:`minismt.extract.lexical`).
2. Phrase-pair extraction as Moses' ``extract`` (Koehn, Och & Marcu 2003; Och & Ney 2004):
   every pair of a source span and a target span, each of at most ``max_length`` words,
   with at least one alignment link inside and none leaving it, including the variants
   that extend the source span over unaligned words; with each occurrence its word
   alignment and its word-based (``wbe``) msd orientations in both directions
   (:mod:`minismt.extract._kernels`).
3. Scoring as ``score`` + ``consolidate``: relative frequencies p(e|f) = c(f,e)/c(f),
   p(f|e) = c(f,e)/c(e), counting every extracted occurrence once, and the lexical
   weights lex(e|f), lex(f|e) (Koehn et al. 2003) computed with the pair's most frequent
   alignment, ties to the greater alignment in Moses' comparison: target-to-source for
   lex(e|f) and the written alignment, source-to-target for lex(f|e) (Moses scores the
   inverse table separately).
4. msd-bidirectional-fe reordering probabilities (:mod:`minismt.extract.reordering`).

The enumeration runs in a numba kernel over the flat corpus arrays; phrases become ids by
hashing (:mod:`minismt.extract.phrases`), and all counting is ``np.unique``/``bincount``.
The distinct pairs come out in Moses' sorted order, so writing needs no sort.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from minismt.corpus import Alignment, TokenArray, Vocabulary
from minismt.errors import InputError
from minismt.extract import _kernels
from minismt.extract.lexical import LexicalTable, count_lexical_table
from minismt.extract.phrases import (byte_order_ids, byte_order_ranks, check_words,
                                     gather_ranges, unique_spans)
from minismt.extract.reordering import msd_probabilities
from minismt.extract.phrase_table import PhraseTable, limit_rows, take_ranges
from minismt.progress import bar as progress_bar

DEFAULT_MAX_LENGTH = 7       # train-model.perl -max-phrase-length
DEFAULT_TABLE_LIMIT = 20     # Moses' table-limit
DEFAULT_REORDERING_SMOOTHING = 0.5  # train-model.perl -reordering-smooth

STAGES = ("lexical tables", "extraction", "scoring", "reordering")


@dataclass
class PhrasePairs:
    """The phrase pairs of a corpus with what was counted.

    ``table`` rows are the pairs in Moses' order (after the table limit, if one was given),
    with reordering probabilities; ``orientation_counts[r]`` are row r's backward
    mono/swap/discontinuous and forward mono/swap/discontinuous counts; ``n_occurrences``
    the extracted occurrences, ``n_pairs`` the distinct pairs before the table limit;
    ``timings`` the seconds of each stage.
    """

    table: PhraseTable
    orientation_counts: np.ndarray
    lexical: LexicalTable
    n_occurrences: int
    n_pairs: int
    timings: dict[str, float] = field(default_factory=dict)


def _check_offsets(offsets: np.ndarray, total: int, what: str) -> None:
    if (offsets.ndim != 1 or offsets.shape[0] < 1 or offsets[0] != 0 or offsets[-1] != total
            or bool(np.any(np.diff(offsets) < 0))):
        raise InputError(f"inconsistent {what} offsets",
                         expected=f"non-decreasing offsets from 0 to {total}")


def link_sentences(links: np.ndarray, link_offsets: np.ndarray, src_offsets: np.ndarray,
                   tgt_offsets: np.ndarray) -> np.ndarray:
    """The sentence pair of every alignment point; a point outside its sentence pair is an
    :class:`InputError` naming the (1-based) pair."""
    n_sent = link_offsets.shape[0] - 1
    link_sent = np.repeat(np.arange(n_sent, dtype=np.int64), np.diff(link_offsets))
    src_len = np.diff(np.asarray(src_offsets, dtype=np.int64))
    tgt_len = np.diff(np.asarray(tgt_offsets, dtype=np.int64))
    bad = np.flatnonzero((links[:, 0] < 0) | (links[:, 1] < 0)
                         | (links[:, 0] >= src_len[link_sent]) | (links[:, 1] >= tgt_len[link_sent]))
    if bad.shape[0]:
        k = int(bad[0])
        s = int(link_sent[k])
        raise InputError(f"alignment point {int(links[k, 0])}-{int(links[k, 1])} is outside "
                         f"sentence pair {s + 1} ({int(src_len[s])} source words, "
                         f"{int(tgt_len[s])} target words)",
                         expected="0-based source-target positions inside the sentence pair")
    return link_sent


def _check_ids(tokens: TokenArray, vocab: Vocabulary, side: str) -> None:
    ids = np.asarray(tokens.ids)
    if ids.shape[0] == 0:
        return
    bad = np.flatnonzero((ids < 0) | (ids >= len(vocab)))
    if bad.shape[0]:
        sentence = int(np.searchsorted(tokens.offsets, bad[0], side="right")) - 1
        raise InputError(f"word id {int(ids[bad[0]])} in {side} sentence {sentence + 1} is not "
                         f"in the {side} vocabulary ({len(vocab)} words)")
    word = check_words(vocab.words, np.unique(ids))
    if word is not None:
        raise InputError(f"{side} word {word[:40]!r} cannot be written in a Moses table",
                         expected="words without spaces or control characters, other than '|||'")


def validate_corpus(src: TokenArray, tgt: TokenArray, alignment: Alignment,
                    src_vocab: Vocabulary, tgt_vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """Check the corpus at the API boundary; return the links sorted by (sentence, source,
    target position) without duplicates, and their offsets.

    Different sentence counts, word ids outside the vocabularies and links outside their
    sentence pair are an :class:`InputError` naming the (1-based) sentence.
    """
    if not (len(src) == len(tgt) == len(alignment)):
        raise InputError(f"{len(src)} source sentences, {len(tgt)} target sentences and "
                         f"{len(alignment)} alignment lines",
                         expected="the same number of sentences on both sides and in the alignment")
    _check_offsets(np.asarray(src.offsets), np.asarray(src.ids).shape[0], "source sentence")
    _check_offsets(np.asarray(tgt.offsets), np.asarray(tgt.ids).shape[0], "target sentence")
    links = np.asarray(alignment.links).reshape(-1, 2).astype(np.int64)
    link_offsets = np.asarray(alignment.offsets, dtype=np.int64)
    _check_offsets(link_offsets, links.shape[0], "alignment")
    _check_ids(src, src_vocab, "source")
    _check_ids(tgt, tgt_vocab, "target")
    n_sent = len(src)
    link_sent = link_sentences(links, link_offsets, np.asarray(src.offsets), np.asarray(tgt.offsets))
    order = np.lexsort((links[:, 1], links[:, 0], link_sent))
    links, link_sent = links[order], link_sent[order]
    keep = np.ones(links.shape[0], dtype=bool)
    keep[1:] = ((link_sent[1:] != link_sent[:-1]) | (links[1:, 0] != links[:-1, 0])
                | (links[1:, 1] != links[:-1, 1]))
    links, link_sent = links[keep], link_sent[keep]
    new_offsets = np.searchsorted(link_sent, np.arange(n_sent + 1), side="left").astype(np.int64)
    return np.ascontiguousarray(links, dtype=np.int32), new_offsets


def _check_parameters(max_length, table_limit, reordering_smoothing) -> None:
    if isinstance(max_length, bool) or not (isinstance(max_length, (int, np.integer))
                                            and 1 <= max_length <= _kernels.MAX_PHRASE_LENGTH):
        raise InputError(f"max_length {max_length!r}",
                         expected=f"an integer from 1 to {_kernels.MAX_PHRASE_LENGTH}")
    if table_limit is not None and (isinstance(table_limit, bool) or not (
            isinstance(table_limit, (int, np.integer)) and table_limit >= 0)):
        raise InputError(f"table_limit {table_limit!r}", expected="None or an integer >= 0")
    if isinstance(reordering_smoothing, bool) or not (
            isinstance(reordering_smoothing, (int, float, np.integer, np.floating))
            and math.isfinite(reordering_smoothing) and reordering_smoothing >= 0):
        raise InputError(f"reordering_smoothing {reordering_smoothing!r}",
                         expected="a finite number >= 0")


def train_lexical_table(src: TokenArray, tgt: TokenArray, alignment: Alignment,
                        src_vocab: Vocabulary, tgt_vocab: Vocabulary) -> LexicalTable:
    """Moses step 4 alone: the lexical translation tables of a word-aligned corpus."""
    links, link_offsets = validate_corpus(src, tgt, alignment, src_vocab, tgt_vocab)
    return count_lexical_table(np.asarray(src.ids, dtype=np.int32),
                               np.asarray(src.offsets, dtype=np.int64),
                               np.asarray(tgt.ids, dtype=np.int32),
                               np.asarray(tgt.offsets, dtype=np.int64), links, link_offsets,
                               len(src_vocab), len(tgt_vocab))


def extract_phrase_pairs(src: TokenArray, tgt: TokenArray, alignment: Alignment,
                         src_vocab: Vocabulary, tgt_vocab: Vocabulary,
                         max_length: int = DEFAULT_MAX_LENGTH,
                         table_limit: int | None = None,
                         reordering_smoothing: float = DEFAULT_REORDERING_SMOOTHING,
                         smooth_with_counts: bool = False, progress: bool = False) -> PhrasePairs:
    """Steps 4-7: the distinct phrase pairs with their scores, alignment, orientation counts
    and reordering probabilities (see the module docstring and :func:`train_phrase_table`;
    here ``table_limit`` defaults to None, all pairs)."""
    _check_parameters(max_length, table_limit, reordering_smoothing)
    links, link_offsets = validate_corpus(src, tgt, alignment, src_vocab, tgt_vocab)
    corpus = _Corpus(np.ascontiguousarray(src.ids, dtype=np.int32),
                     np.ascontiguousarray(src.offsets, dtype=np.int64),
                     np.ascontiguousarray(tgt.ids, dtype=np.int32),
                     np.ascontiguousarray(tgt.offsets, dtype=np.int64), len(src_vocab),
                     len(tgt_vocab))
    timings: dict[str, float] = {}
    # stages of unrelated lengths: no rate and no remaining time
    with progress_bar(total=len(STAGES), desc="phrase table", unit="step", enabled=progress, eta=False) as bar:
        start = time.perf_counter()

        def stage_done(name: str) -> None:
            nonlocal start
            now = time.perf_counter()
            timings[name] = now - start
            start = now
            bar.set_postfix_str(name)
            bar.update(1)

        lexical = count_lexical_table(corpus.src_ids, corpus.src_offsets, corpus.tgt_ids,
                                      corpus.tgt_offsets, links, link_offsets,
                                      corpus.n_src_words, corpus.n_tgt_words)
        stage_done("lexical tables")

        occ = _Occurrences(*_kernels.extract_phrase_pairs(corpus.src_offsets, corpus.tgt_offsets,
                                                          links, link_offsets, max_length))
        src_phrase, n_src_phrases = _phrase_ids(corpus.src_ids, corpus.src_offsets, occ.sent,
                                                occ.src_start, occ.src_len, src_vocab.words)
        tgt_phrase, n_tgt_phrases = _phrase_ids(corpus.tgt_ids, corpus.tgt_offsets, occ.sent,
                                                occ.tgt_start, occ.tgt_len, tgt_vocab.words)
        stage_done("extraction")

        pairs = _count_pairs(src_phrase, tgt_phrase, n_src_phrases, n_tgt_phrases)
        del src_phrase, tgt_phrase
        mask_t2s, occ_t2s, occ_s2t = _best_alignments(pairs, occ)
        src_len = occ.src_len[pairs.rep].astype(np.int64)
        tgt_len = occ.tgt_len[pairs.rep].astype(np.int64)
        lex_ef, lex_fe = _kernels.lexical_weights(
            occ.sent[occ_t2s], occ.src_start[occ_t2s], occ.tgt_start[occ_t2s],
            occ.sent[occ_s2t], occ.src_start[occ_s2t], occ.tgt_start[occ_s2t], src_len, tgt_len,
            corpus.src_offsets, corpus.tgt_offsets, links, link_offsets,
            *lexical.corpus_weights(corpus.src_ids, corpus.src_offsets, corpus.tgt_ids,
                                    corpus.tgt_offsets, links, link_offsets))
        del occ_t2s, occ_s2t
        scores = np.column_stack([pairs.c_fe / pairs.c_e, lex_fe, pairs.c_fe / pairs.c_f, lex_ef])
        counts = np.column_stack([pairs.c_e, pairs.c_f, pairs.c_fe])
        del lex_ef, lex_fe
        align_links, align_offsets = _kernels.mask_links(mask_t2s, src_len, tgt_len)
        del mask_t2s
        stage_done("scoring")

        orientation_counts = _kernels.orientation_counts(pairs.of, occ.backward, occ.forward,
                                                         pairs.n)
        reordering = msd_probabilities(orientation_counts, reordering_smoothing,
                                       smooth_with_counts)
        stage_done("reordering")

    rep_sent = occ.sent[pairs.rep]
    rows = _Rows(pairs.src, corpus.src_offsets[rep_sent] + occ.src_start[pairs.rep], src_len,
                 corpus.tgt_offsets[rep_sent] + occ.tgt_start[pairs.rep], tgt_len, scores,
                 counts, align_links, align_offsets, reordering, orientation_counts)
    n_occ = occ.size
    del occ, rep_sent, scores, counts, align_links, align_offsets, reordering, orientation_counts
    keep = limit_rows(_source_offsets(rows.source), rows.scores[:, 2], table_limit)
    if keep.shape[0] < pairs.n:
        rows = rows.take(keep)
    row_offsets = _source_offsets(rows.source)
    src_words, src_word_offsets = gather_ranges(corpus.src_ids, rows.src_first[row_offsets[:-1]],
                                                rows.src_len[row_offsets[:-1]])
    tgt_words, tgt_word_offsets = gather_ranges(corpus.tgt_ids, rows.tgt_first, rows.tgt_len)
    table = PhraseTable(Vocabulary(src_vocab.words), Vocabulary(tgt_vocab.words), src_words,
                        src_word_offsets, row_offsets, tgt_words, tgt_word_offsets, rows.scores,
                        rows.counts, rows.align_links, rows.align_offsets, rows.reordering)
    return PhrasePairs(table, rows.orientation_counts, lexical, n_occ, pairs.n, timings)


def _source_offsets(source: np.ndarray) -> np.ndarray:
    """CSR offsets of the runs of equal source phrase ids."""
    new_source = np.ones(source.shape[0], dtype=bool)
    new_source[1:] = source[1:] != source[:-1]
    return np.append(np.flatnonzero(new_source), source.shape[0]).astype(np.int64)


@dataclass
class _Rows:
    """Per phrase pair (in Moses' order): source phrase id, where an occurrence's words are in
    the corpus, and everything the table stores."""

    source: np.ndarray
    src_first: np.ndarray
    src_len: np.ndarray
    tgt_first: np.ndarray
    tgt_len: np.ndarray
    scores: np.ndarray
    counts: np.ndarray
    align_links: np.ndarray
    align_offsets: np.ndarray
    reordering: np.ndarray
    orientation_counts: np.ndarray

    def take(self, keep: np.ndarray) -> "_Rows":
        align_links, align_offsets = take_ranges(self.align_links, self.align_offsets, keep)
        return _Rows(self.source[keep], self.src_first[keep], self.src_len[keep],
                     self.tgt_first[keep], self.tgt_len[keep], self.scores[keep],
                     self.counts[keep], align_links, align_offsets, self.reordering[keep],
                     self.orientation_counts[keep])


@dataclass
class _Corpus:
    src_ids: np.ndarray
    src_offsets: np.ndarray
    tgt_ids: np.ndarray
    tgt_offsets: np.ndarray
    n_src_words: int
    n_tgt_words: int


@dataclass
class _Occurrences:
    """One entry per extracted phrase-pair occurrence (see ``_kernels.extract_phrase_pairs``)."""

    sent: np.ndarray
    src_start: np.ndarray
    src_len: np.ndarray
    tgt_start: np.ndarray
    tgt_len: np.ndarray
    backward: np.ndarray
    forward: np.ndarray
    mask: np.ndarray

    @property
    def size(self) -> int:
        return int(self.sent.shape[0])


@dataclass
class _Pairs:
    """Distinct phrase pairs in Moses' order: ``of[k]`` is the pair of occurrence k, ``rep[p]``
    one occurrence of pair p, ``src``/``tgt`` its phrase ids, ``c_*`` the counts."""

    of: np.ndarray
    rep: np.ndarray
    src: np.ndarray
    tgt: np.ndarray
    c_fe: np.ndarray
    c_f: np.ndarray
    c_e: np.ndarray

    @property
    def n(self) -> int:
        return int(self.rep.shape[0])


def _phrase_ids(words, offsets, sent, start, length, vocabulary) -> tuple[np.ndarray, int]:
    """The phrase of each occurrence as an id in Moses' byte order (int32), and the number of
    distinct phrases."""
    inverse, representative = unique_spans(words, offsets, sent, start, length)
    ranks, end_rank = byte_order_ranks(vocabulary)
    ids = byte_order_ids(words, offsets, sent, start, length, representative, ranks, end_rank)
    return ids.astype(np.int32)[inverse], int(representative.shape[0])


def _count_pairs(src_phrase, tgt_phrase, n_src_phrases: int, n_tgt_phrases: int) -> _Pairs:
    """Distinct (source, target) phrase pairs sorted by source then target id, and c(f,e),
    c(f), c(e) counting every occurrence once."""
    stride = np.int64(max(n_tgt_phrases, 1))
    keys, rep, of = np.unique(src_phrase.astype(np.int64) * stride + tgt_phrase,
                              return_index=True, return_inverse=True)
    n = int(keys.shape[0])
    pair_src = (keys // stride).astype(np.int32)
    pair_tgt = (keys % stride).astype(np.int32)
    del keys
    c_fe = np.bincount(of.reshape(-1), minlength=n).astype(np.float64)
    c_f = np.bincount(src_phrase, minlength=n_src_phrases).astype(np.float64)[pair_src]
    c_e = np.bincount(tgt_phrase, minlength=n_tgt_phrases).astype(np.float64)[pair_tgt]
    return _Pairs(of.reshape(-1).astype(np.int32), rep.astype(np.int64), pair_src, pair_tgt,
                  c_fe, c_f, c_e)


def _best_alignments(pairs: _Pairs, occ: _Occurrences) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The alignment of each pair for lex(e|f) and the written alignment (compared in
    target-to-source order) and for lex(f|e) (source-to-target order): the most frequent,
    ties to the greater (Moses). Returns the lex(e|f) masks and, for both, an occurrence
    with that alignment."""
    order = np.lexsort((occ.mask, pairs.of))
    sorted_pair = pairs.of[order]
    sorted_mask = occ.mask[order]
    new_group = np.ones(occ.size, dtype=bool)
    new_group[1:] = (sorted_pair[1:] != sorted_pair[:-1]) | (sorted_mask[1:] != sorted_mask[:-1])
    group_start = np.flatnonzero(new_group)
    del new_group
    group_count = np.diff(np.append(group_start, occ.size))
    group_mask = sorted_mask[group_start]
    group_offsets = np.searchsorted(sorted_pair[group_start], np.arange(pairs.n + 1)).astype(np.int64)
    group_occ = order[group_start]
    del sorted_pair, sorted_mask, group_start, order
    best_t2s, best_s2t = _kernels.best_alignments(
        group_offsets, group_mask, group_count, occ.src_len[pairs.rep].astype(np.int64),
        occ.tgt_len[pairs.rep].astype(np.int64))
    return group_mask[best_t2s], group_occ[best_t2s], group_occ[best_s2t]


def train_phrase_table(src: TokenArray, tgt: TokenArray, alignment: Alignment,
                       src_vocab: Vocabulary, tgt_vocab: Vocabulary,
                       max_length: int = DEFAULT_MAX_LENGTH,
                       table_limit: int | None = DEFAULT_TABLE_LIMIT,
                       reordering_smoothing: float = DEFAULT_REORDERING_SMOOTHING,
                       progress: bool = False, smooth_with_counts: bool = False) -> PhraseTable:
    """Train a phrase table with msd-bidirectional-fe reordering, as Moses'
    ``train-model.perl --reordering msd-bidirectional-fe`` steps 4-7.

    ``src``/``tgt`` are the two sides of the corpus as word ids of ``src_vocab``/``tgt_vocab``,
    ``alignment`` its word alignment (source-target links). Phrases have at most
    ``max_length`` words (1-8; Moses' default 7). All probabilities are estimated from all
    extracted pairs; then at most ``table_limit`` translations per source phrase are kept
    (the highest p(e|f), ties to the target phrase first in byte order; None or 0 keeps
    all), as Moses' decoder keeps 20 by default. ``reordering_smoothing`` is the constant
    added to each orientation count (``smooth_with_counts``: proportional to the global
    orientation distribution, Moses' ``--SmoothWithCounts``). ``progress`` shows a bar.
    """
    return extract_phrase_pairs(src, tgt, alignment, src_vocab, tgt_vocab, max_length,
                                table_limit, reordering_smoothing, smooth_with_counts,
                                progress).table
