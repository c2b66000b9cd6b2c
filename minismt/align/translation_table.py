"""The sparse translation table t(f|e) and the co-occurrence index it lives on.

A dense ``V_e x V_f`` table does not fit (Multi30k has about 10k x 18k types), and
only pairs that co-occur in some sentence pair can ever get probability mass. So
:class:`PairIndex` lists the distinct co-occurring pairs once, as sorted codes
``e * n_f + f`` (NULL is ``e = n_e``), and stores for every sentence pair the flat
``J x (I + 1)`` block of pair ids that the EM kernels read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minismt.align import _kernels
from minismt.corpus import Alignment, TokenArray
from minismt.errors import InputError

NULL = -1
"""The e id of the empty word in :class:`TranslationTable` lookups."""


def check_tokens(name: str, tokens: TokenArray) -> TokenArray:
    """``tokens`` as a TokenArray of int32 ids >= 0 and consistent int64 offsets, else InputError."""
    ids = getattr(tokens, "ids", None)
    offsets = getattr(tokens, "offsets", None)
    if ids is None or offsets is None:
        raise InputError(f"{name} is a {type(tokens).__name__}", expected="a TokenArray")
    ids, offsets = np.asarray(ids), np.asarray(offsets)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer) or (ids.size and ids.min() < 0):
        raise InputError(f"{name} has bad word ids", expected="a 1-D array of integer ids >= 0")
    if offsets.ndim != 1 or offsets.shape[0] < 1 or not np.issubdtype(offsets.dtype, np.integer) \
            or offsets[0] != 0 or offsets[-1] != ids.shape[0] or np.any(np.diff(offsets) < 0):
        raise InputError(f"{name} has inconsistent sentence offsets",
                         expected="non-decreasing offsets from 0 to the number of ids")
    return TokenArray(ids.astype(np.int32, copy=False), offsets.astype(np.int64, copy=False))


def check_pair(f_name: str, f: TokenArray, e_name: str, e: TokenArray) -> tuple[TokenArray, TokenArray]:
    """Both sides checked by :func:`check_tokens`, with the same number of sentences."""
    f, e = check_tokens(f_name, f), check_tokens(e_name, e)
    if len(f) != len(e):
        raise InputError(f"{f_name} has {len(f)} sentences, {e_name} {len(e)}",
                         expected="the same number of sentences on both sides")
    return f, e


class PairIndex:
    """Co-occurring (e, f) pairs of a corpus and every sentence pair's block of pair ids.

    ``f`` is the generated side and ``e`` the conditioning side (see
    :func:`minismt.align.align_direction`), with the same number of sentences.
    Pairs with an empty side get an empty block.
    """

    def __init__(self, f: TokenArray, e: TokenArray):
        f, e = check_pair("f", f, "e", e)
        self.f_offsets = np.ascontiguousarray(f.offsets, dtype=np.int64)
        self.e_offsets = np.ascontiguousarray(e.offsets, dtype=np.int64)
        f_ids = np.ascontiguousarray(f.ids, dtype=np.int32)
        e_ids = np.ascontiguousarray(e.ids, dtype=np.int32)
        self.n_f = int(f_ids.max()) + 1 if f_ids.size else 0
        self.n_e = int(e_ids.max()) + 1 if e_ids.size else 0
        self.f_lengths = np.diff(self.f_offsets)
        self.e_lengths = np.diff(self.e_offsets)
        sizes = self.f_lengths * (self.e_lengths + 1)
        sizes[self.e_lengths == 0] = 0
        self.block_offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=self.block_offsets[1:])
        if self.block_offsets[-1] >= 2**31:
            raise InputError(f"{self.block_offsets[-1]} (e, f) positions in the corpus",
                             expected="fewer than 2**31; align the corpus in parts")
        self.keys, self.row_offsets, self.pair_ids = _kernels.build_pair_index(
            f_ids, self.f_offsets, e_ids, self.e_offsets, np.int64(self.n_f), np.int64(self.n_e),
            self.block_offsets)

    def __len__(self) -> int:
        """Number of distinct co-occurring pairs (NULL pairs included)."""
        return self.keys.shape[0]

    @property
    def n_sentences(self) -> int:
        return self.f_lengths.shape[0]

    def uniform_table(self) -> np.ndarray:
        """``t(f|e) = 1 / n_f`` for every pair: the uniform start of EM."""
        return np.full(len(self), 1.0 / max(self.n_f, 1))


@dataclass
class TranslationTable:
    """t(f|e) over the co-occurring pairs: ``prob[k]`` belongs to the sorted code ``keys[k] = e * n_f + f``
    (NULL as ``e = n_e``); every other pair has probability 0."""

    keys: np.ndarray  # int64[P], sorted
    prob: np.ndarray  # float64[P]
    n_e: int
    n_f: int

    def __len__(self) -> int:
        return self.keys.shape[0]

    @property
    def e(self) -> np.ndarray:
        """The e id of every entry, :data:`NULL` for the empty word."""
        e = (self.keys // max(self.n_f, 1)).astype(np.int64)
        e[e == self.n_e] = NULL
        return e

    @property
    def f(self) -> np.ndarray:
        """The f id of every entry."""
        return (self.keys % max(self.n_f, 1)).astype(np.int64)

    def lookup(self, e, f) -> np.ndarray:
        """``t(f|e)`` for arrays of ids (``e`` may be :data:`NULL`); 0 for pairs never seen together."""
        e = np.asarray(e, dtype=np.int64)
        f = np.asarray(f, dtype=np.int64)
        e = np.where(e == NULL, self.n_e, e)
        codes = e * max(self.n_f, 1) + f
        out = np.zeros(codes.shape)
        if len(self):
            at = np.minimum(np.searchsorted(self.keys, codes), len(self) - 1)
            hit = (e >= 0) & (e <= self.n_e) & (f >= 0) & (f < self.n_f) & (self.keys[at] == codes)
            out[hit] = self.prob[at[hit]]
        return out

    def get(self, e: int | None, f: int) -> float:
        """``t(f|e)``; ``e=None`` (or :data:`NULL`) is the empty word."""
        return float(self.lookup([NULL if e is None else e], [f])[0])

    def to_dict(self) -> dict[tuple[int | None, int], float]:
        """``{(e or None, f): t(f|e)}`` for every entry."""
        return {(None if e == NULL else int(e), int(f)): float(p)
                for e, f, p in zip(self.e, self.f, self.prob)}


def alignment_from_positions(positions: np.ndarray, f_offsets: np.ndarray) -> Alignment:
    """Links ``(e position, f position)`` from the e position (or -1 for NULL) of every f word."""
    f_offsets = np.asarray(f_offsets, dtype=np.int64)
    n_sentences = f_offsets.shape[0] - 1
    sentence = np.repeat(np.arange(n_sentences, dtype=np.int64), np.diff(f_offsets))
    j = np.arange(positions.shape[0], dtype=np.int64) - f_offsets[sentence]
    keep = positions >= 0
    sentence, i, j = sentence[keep], positions[keep].astype(np.int64), j[keep]
    order = np.lexsort((j, i, sentence))
    links = np.stack([i[order], j[order]], axis=1).astype(np.int32).reshape(-1, 2)
    offsets = np.zeros(n_sentences + 1, dtype=np.int64)
    np.cumsum(np.bincount(sentence, minlength=n_sentences), out=offsets[1:])
    return Alignment(links, offsets)
