"""Lexical translation tables from a word-aligned corpus (Moses training step 4).

As Moses' ``get_lexical`` (``train-model.perl`` / ``LexicalTranslationModel.pm``), the
maximum-likelihood word translation probabilities

    w(e|f) = c(f, e) / c(f),        w(f|e) = c(f, e) / c(e),

where c(f, e) counts alignment links between the words f and e, a word without links is
aligned to NULL (c(f, NULL), c(NULL, e)), and c(f) = sum_e c(f, e), c(e) = sum_f c(f, e)
include the NULL links. Moses writes these tables as ``lex.f2e`` (``e f w(e|f)``) and
``lex.e2f`` (``f e w(f|e)``) with ``%.7f`` and its ``score`` program computes the phrase
lexical weights from the numbers read back; the probabilities here are rounded to 7
decimals the same way, so that lexical weights equal Moses' (the exact ratios are
``counts / src_counts[f]`` and ``counts / tgt_counts[e]``). NULL is its own id (the
vocabulary size), not the word "NULL".
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from minismt.corpus import Vocabulary
from minismt.io import atomic_write

LEX_DECIMALS = 7  # the %.7f of Moses' lex.f2e / lex.e2f


def round_like_printf(values: np.ndarray, decimals: int = LEX_DECIMALS) -> np.ndarray:
    """``float("%.<decimals>f" % v)`` for each value: the number Moses reads back from its
    lexical table files (correctly rounded, as printf)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return values.copy()
    unique, inverse = np.unique(values, return_inverse=True)
    rounded = np.array([float(f"{v:.{decimals}f}") for v in unique.tolist()], dtype=np.float64)
    return rounded[inverse].reshape(values.shape)


@dataclass
class LexicalTable:
    """Word translation probabilities of one corpus.

    ``keys`` are the sorted codes ``f * (n_tgt + 1) + e`` of the word pairs seen linked
    (source id f in ``[0, n_src]``, target id e in ``[0, n_tgt]``; id ``n_src`` / ``n_tgt``
    is NULL), ``counts`` their c(f, e); ``src_counts[f]`` = c(f), ``tgt_counts[e]`` = c(e)
    (NULL last); ``w_e_given_f`` and ``w_f_given_e`` are the probabilities rounded as
    Moses' files carry them.
    """

    n_src: int
    n_tgt: int
    keys: np.ndarray
    counts: np.ndarray
    src_counts: np.ndarray
    tgt_counts: np.ndarray
    w_e_given_f: np.ndarray
    w_f_given_e: np.ndarray

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    @property
    def null_src(self) -> int:
        return self.n_src

    @property
    def null_tgt(self) -> int:
        return self.n_tgt

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Source and target ids of the entries (NULL = ``n_src`` / ``n_tgt``)."""
        stride = self.n_tgt + 1
        return self.keys // stride, self.keys % stride

    def lookup(self, f, e) -> tuple[np.ndarray, np.ndarray]:
        """``(w(e|f), w(f|e))`` for arrays of ids; 0 for pairs never linked."""
        key = np.asarray(f, dtype=np.int64) * (self.n_tgt + 1) + np.asarray(e, dtype=np.int64)
        return self._find(key, 0.0)

    def corpus_weights(self, src_ids: np.ndarray, src_offsets: np.ndarray, tgt_ids: np.ndarray,
                       tgt_offsets: np.ndarray, links: np.ndarray, link_offsets: np.ndarray):
        """The probabilities at every corpus link and token: ``w(e|f)`` and ``w(f|e)`` per
        link (int32[L, 2] source-target positions with sentence offsets), ``w(e|NULL)`` per
        target token and ``w(f|NULL)`` per source token (1 where a token was never unaligned,
        Moses' permissive lookup)."""
        stride = np.int64(self.n_tgt + 1)
        link_sent = np.repeat(np.arange(link_offsets.shape[0] - 1, dtype=np.int64),
                              np.diff(link_offsets))
        f = src_ids[src_offsets[:-1][link_sent] + links[:, 0]].astype(np.int64)
        e = tgt_ids[tgt_offsets[:-1][link_sent] + links[:, 1]].astype(np.int64)
        pos = np.searchsorted(self.keys, f * stride + e)
        w_e_given_f, w_f_given_e = self.w_e_given_f[pos], self.w_f_given_e[pos]
        tgt_null, _ = self._find(np.int64(self.n_src) * stride + tgt_ids.astype(np.int64), 1.0)
        _, src_null = self._find(src_ids.astype(np.int64) * stride + np.int64(self.n_tgt), 1.0)
        return w_e_given_f, w_f_given_e, tgt_null, src_null

    def _find(self, key: np.ndarray, absent: float) -> tuple[np.ndarray, np.ndarray]:
        """``(w(e|f), w(f|e))`` at each key, ``absent`` where the pair was never linked."""
        if len(self) == 0:
            return np.full(key.shape, absent), np.full(key.shape, absent)
        pos = np.minimum(np.searchsorted(self.keys, key), len(self) - 1)
        found = self.keys[pos] == key
        return (np.where(found, self.w_e_given_f[pos], absent),
                np.where(found, self.w_f_given_e[pos], absent))

    def write_moses(self, prefix: str | os.PathLike, src_vocab: Vocabulary,
                    tgt_vocab: Vocabulary) -> None:
        """Write ``<prefix>.f2e`` (``e f w(e|f)``) and ``<prefix>.e2f`` (``f e w(f|e)``) as
        Moses does (``%.7f``, NULL written ``NULL``), sorted by source then target id."""
        prefix = os.fspath(prefix)
        f_ids, e_ids = self.pairs()
        f_words = src_vocab.words + ["NULL"]
        e_words = tgt_vocab.words + ["NULL"]
        if len(f_words) != self.n_src + 1 or len(e_words) != self.n_tgt + 1:
            raise ValueError("the vocabularies do not match the lexical table")
        with atomic_write(prefix + ".f2e") as out:
            for f, e, w in zip(f_ids.tolist(), e_ids.tolist(), self.w_e_given_f.tolist()):
                out.write(f"{e_words[e]} {f_words[f]} {w:.7f}\n")
        with atomic_write(prefix + ".e2f") as out:
            for f, e, w in zip(f_ids.tolist(), e_ids.tolist(), self.w_f_given_e.tolist()):
                out.write(f"{f_words[f]} {e_words[e]} {w:.7f}\n")


def count_lexical_table(src_ids: np.ndarray, src_offsets: np.ndarray, tgt_ids: np.ndarray,
                        tgt_offsets: np.ndarray, links: np.ndarray, link_offsets: np.ndarray,
                        n_src: int, n_tgt: int) -> LexicalTable:
    """The lexical table of validated flat arrays (links without duplicates)."""
    n_sent = src_offsets.shape[0] - 1
    link_sent = np.repeat(np.arange(n_sent, dtype=np.int64), np.diff(link_offsets))
    f_pos = src_offsets[:-1][link_sent] + links[:, 0]
    e_pos = tgt_offsets[:-1][link_sent] + links[:, 1]
    stride = np.int64(n_tgt + 1)
    f_aligned = np.zeros(src_ids.shape[0], dtype=bool)
    f_aligned[f_pos] = True
    e_aligned = np.zeros(tgt_ids.shape[0], dtype=bool)
    e_aligned[e_pos] = True
    keys = np.concatenate([
        src_ids[f_pos].astype(np.int64) * stride + tgt_ids[e_pos],
        np.int64(n_src) * stride + tgt_ids[~e_aligned].astype(np.int64),
        src_ids[~f_aligned].astype(np.int64) * stride + np.int64(n_tgt),
    ])
    keys, counts = np.unique(keys, return_counts=True)
    counts = counts.astype(np.int64)
    f_of, e_of = keys // stride, keys % stride
    src_counts = np.bincount(f_of, weights=counts, minlength=n_src + 1).astype(np.int64)
    tgt_counts = np.bincount(e_of, weights=counts, minlength=n_tgt + 1).astype(np.int64)
    w_e_given_f = round_like_printf(counts / src_counts[f_of])
    w_f_given_e = round_like_printf(counts / tgt_counts[e_of])
    return LexicalTable(n_src, n_tgt, keys, counts, src_counts, tgt_counts, w_e_given_f,
                        w_f_given_e)
