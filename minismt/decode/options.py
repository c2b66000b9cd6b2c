"""Translation options of one sentence: every source span's phrase-table rows with their features.

As Moses' ``TranslationOptionCollection``: for every span up to the maximum phrase
length, the rows translating it, each with its stateless features

- ``TranslationModel0_0..3`` = log p(f|e), log lex(f|e), log p(e|f), log lex(e|f),
  floored at -100 as Moses' ``FloorScore(TransformScore(p))``;
- ``WordPenalty0_0`` = -(target length), ``PhrasePenalty0_0`` = 1;

its six lexicalised-reordering log probabilities (used by orientation during the
search) and a context-free LM estimate (:func:`minismt.decode._kernels.phrase_lm`).
The options of a span are limited to the ``table_limit`` best by future score
(w . stateless features + w_LM . LM estimate), as Moses' ``table-limit``.

A source word with no option of its own (out of vocabulary, or only inside longer
phrases) gets a pass-through option copying it: ``UnknownWordPenalty0_0`` = -100
per unknown word (:data:`UNKNOWN_WORD_SCORE`, Moses' value, with weight 1), translation-model scores 0 and
reordering log probabilities 0 (Moses has no reordering scores for it and scores
nothing, unless ``default-scores`` is configured); its target word is the LM's own
word when the LM knows it, else ``<unk>``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from minismt.corpus import Vocabulary
from minismt.decode import _kernels, _options_kernels
from minismt.decode.model import FEATURE_NAMES, PhraseModel

LOG_FLOOR = -100.0  # Moses' LOWEST_SCORE
UNKNOWN_WORD_SCORE = -100.0  # Moses' UnknownWordPenalty feature value per copied word

_COL = {name: i for i, name in enumerate(FEATURE_NAMES)}
TM_COL = _COL["TranslationModel0_0"]  # the four translation-model scores follow it, in the table's order
WP_COL = _COL["WordPenalty0_0"]
PP_COL = _COL["PhrasePenalty0_0"]
UWP_COL = _COL["UnknownWordPenalty0_0"]
LM_COL = _COL["LM0_0"]
ROLE_COLS = np.array([_COL[f"LexicalReordering0_{i}"] for i in range(6)]
                     + [_COL["Distortion0_0"], LM_COL], dtype=np.int64)


@dataclass
class TranslationOptions:
    """The options of one sentence, sorted by span (start, length), best future score first.

    ``start``/``end`` source span (end exclusive); ``row`` phrase-table row (-1: pass-through);
    ``tgt``/``lm_ids`` target words as hypergraph-vocabulary and LM ids, CSR by ``tgt_offsets``;
    ``dense`` float64[O, 15] stateless features; ``reordering`` float64[O, 6] log probabilities;
    ``fwd_class`` equal forward triples share a class; ``lm_estimate``/``lm_inner``/``lm_state_*``
    from :func:`~minismt.decode._kernels.phrase_lm`; ``lm_bound`` an upper bound of the
    phrase's log10 LM score after any context; ``future`` the weighted estimate;
    ``span_lo``/``span_hi`` int64[n, L] option ranges per (start, length); ``sparse_score`` the
    weighted sum of each option's sparse features (:mod:`minismt.decode.sparse`), None without them.
    """

    length: int
    start: np.ndarray
    end: np.ndarray
    row: np.ndarray
    tgt_offsets: np.ndarray
    tgt: np.ndarray
    lm_ids: np.ndarray
    dense: np.ndarray
    reordering: np.ndarray
    fwd_class: np.ndarray
    lm_estimate: np.ndarray
    lm_inner: np.ndarray
    lm_state_words: np.ndarray
    lm_state_backs: np.ndarray
    lm_state_len: np.ndarray
    lm_bound: np.ndarray
    future: np.ndarray
    span_lo: np.ndarray
    span_hi: np.ndarray
    sparse_score: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.start.shape[0])

    def take(self, keep: np.ndarray, max_length: int) -> "TranslationOptions":
        """The options at the indices ``keep`` (sorted by span), re-indexed by span."""
        keep = np.asarray(keep, dtype=np.int64)
        taken = _options_kernels.gather_options(
            keep, self.length, max_length, self.start, self.end, self.row, self.tgt_offsets, self.tgt, self.lm_ids,
            self.dense, self.reordering, self.fwd_class, self.lm_estimate, self.lm_inner, self.lm_state_words,
            self.lm_state_backs, self.lm_state_len, self.lm_bound, self.future)
        return TranslationOptions(self.length, *taken,
                                  None if self.sparse_score is None else self.sparse_score[keep])


def collect_options(model: PhraseModel, tokens: list[str], vocab: Vocabulary, weights: np.ndarray,
                    max_length: int, table_limit: int | None, sparse_score=None) -> TranslationOptions:
    """The translation options of a tokenised sentence.

    ``vocab`` is the hypergraph's target vocabulary: the table's, grown here by the
    pass-through words it lacks. ``sparse_score``, if given, maps the options' phrase-table
    rows (-1: pass-through) to the weighted sum of their sparse features, which joins their
    future score (and so the table-limit ranking) and is kept as ``options.sparse_score``.
    """
    table, lm = model.table, model.lm
    n = len(tokens)
    src = table.src_vocab.encode(tokens, grow=False)
    span_src = np.empty((n, max_length), dtype=np.int64)
    _kernels.span_sources(src, max_length, model.source_hashes, model.source_order, table.src_words,
                          table.src_offsets, span_src)
    start, length, row, offsets = _options_kernels.option_layout(span_src, table.row_offsets, table.tgt_offsets)
    n_opt = row.shape[0]
    unknown = start[row < 0]
    n_known = n_opt - unknown.shape[0]  # the table's options come first
    words = [tokens[int(s)] for s in unknown]
    tgt = np.empty(offsets[-1], dtype=np.int32)
    lm_ids = np.empty(offsets[-1], dtype=np.int32)
    _options_kernels.option_words(row, offsets, table.tgt_words, table.tgt_offsets, model.tgt_to_lm,
                                  np.array([vocab.add(word) for word in words], dtype=np.int32),
                                  lm.encode(words), tgt, lm_ids)

    dense = np.zeros((n_opt, len(FEATURE_NAMES)))
    reordering = np.zeros((n_opt, 6))
    table_rows = row[:n_known]
    with np.errstate(divide="ignore"):
        tm_logs = np.log(np.take(table.scores, table_rows, axis=0))
        reordering_logs = (np.log(np.take(table.reordering, table_rows, axis=0)) if table.reordering is not None
                           else np.zeros((0, 6)))
    c = lm.order - 1
    estimate = np.empty(n_opt)
    inner = np.empty(n_opt)
    st_words = np.empty((n_opt, c), dtype=np.int32)
    st_backs = np.empty((n_opt, c))
    st_len = np.empty(n_opt, dtype=np.int32)
    bound = np.empty(n_opt)
    fwd_class = np.empty(n_opt, dtype=np.int32)
    _options_kernels.option_scores(tm_logs, reordering_logs, LOG_FLOOR, lm.tables, lm_ids, offsets, row,
                                   model.lm_bounds, dense, TM_COL, WP_COL, PP_COL, UWP_COL, UNKNOWN_WORD_SCORE,
                                   reordering, estimate, inner, st_words, st_backs, st_len, bound, fwd_class)
    future = dense @ weights + weights[LM_COL] * math.log(10.0) * estimate
    sparse = None
    if sparse_score is not None:
        sparse = np.asarray(sparse_score(row), dtype=np.float64)
        future = future + sparse

    # sort by span, best future first; keep the table_limit best of each span
    order = _options_kernels.option_order(start, length, future, max_length, table_limit or 0)
    full = TranslationOptions(n, start, start + length, row, offsets, tgt, lm_ids, dense, reordering,
                              fwd_class, estimate, inner, st_words, st_backs, st_len, bound, future,
                              np.zeros((n, max_length), np.int64), np.zeros((n, max_length), np.int64), sparse)
    return full.take(order, max_length)


def reference_filter(options: TranslationOptions, reference: np.ndarray) -> np.ndarray:
    """Indices of the options whose target phrase occurs somewhere in ``reference`` (ids as ``options.tgt``)."""
    ref = [int(x) for x in reference]
    grams = set()
    for i in range(len(ref)):
        for j in range(i + 1, len(ref) + 1):
            grams.add(tuple(ref[i:j]))
    tgt = options.tgt.tolist()
    off = options.tgt_offsets.tolist()
    return np.array([o for o in range(len(options)) if tuple(tgt[off[o]:off[o + 1]]) in grams],
                    dtype=np.int64)
