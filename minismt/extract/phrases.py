"""Phrases as integer ids: exact deduplication of word spans and Moses' byte order.

A span is ``words[offsets[row] + start : ... + length]`` of a flat id array (a corpus
sentence, or one phrase of a table). :func:`unique_spans` gives every span the id of its
distinct word sequence by 64-bit hashing, checks that equal hashes mean equal words and
falls back to an exact row sort if they ever do not.

Moses sorts its tables with ``LC_ALL=C sort`` over lines ``src ||| tgt ||| ...``, i.e. by
the UTF-8 bytes of ``"w1 w2 ... |||"``. For words without bytes <= 0x20 (which tokenised
text never has) that is the lexicographic order of word sequences in which words compare
by their bytes and the end of a phrase compares like the word ``|||``: so ``a b`` sorts
before ``a`` (``b`` < ``|||``) but ``a ~`` after it. :func:`byte_order_ids` numbers
distinct phrases in that order.
"""

from __future__ import annotations

import bisect
from typing import Sequence

import numpy as np

from minismt.extract import _kernels

END_OF_PHRASE = "|||"


def unique_spans(words: np.ndarray, offsets: np.ndarray, row: np.ndarray, start: np.ndarray,
                 length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ids of the distinct word sequences of the spans.

    Returns ``inverse`` (int64[N], the id of each span) and ``representative`` (int64[U],
    one span index per id); the numbering itself carries no order.
    """
    hashes = _kernels.span_hashes(words, offsets, row, start, length)
    return unique_spans_hashed(words, offsets, row, start, length, hashes)


def unique_spans_hashed(words, offsets, row, start, length, hashes):
    """:func:`unique_spans` with the hashes given; exact even if different spans collide."""
    if hashes.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    _, representative, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    inverse = inverse.astype(np.int64).reshape(-1)
    representative = representative.astype(np.int64)
    if _kernels.spans_match(words, offsets, row, start, length, representative[inverse]):
        return inverse, representative
    return _unique_spans_exact(words, offsets, row, start, length)


def _unique_spans_exact(words, offsets, row, start, length):
    width = int(length.max()) if length.shape[0] else 0
    padded = np.full((length.shape[0], width + 1), -1, dtype=np.int64)
    padded[:, 0] = length
    first = offsets[row] + start
    for t in range(width):
        has = length > t
        padded[has, t + 1] = words[first[has] + t]
    _, representative, inverse = np.unique(padded, axis=0, return_index=True,
                                           return_inverse=True)
    return inverse.astype(np.int64).reshape(-1), representative.astype(np.int64)


def byte_order_ranks(vocabulary: Sequence[str]) -> tuple[np.ndarray, int]:
    """Rank of each word in UTF-8 byte order, and the rank of the end of a phrase.

    Words get even ranks 2, 4, ...; the end of a phrase gets the odd rank between the words
    below ``|||`` and those above it (0 is left for padding).
    """
    keys = [w.encode("utf-8") for w in vocabulary]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    ranks = np.empty(len(keys), dtype=np.int32)
    ranks[np.asarray(order, dtype=np.int64)] = 2 * np.arange(len(keys), dtype=np.int32) + 2
    end_rank = 2 * bisect.bisect_left([keys[i] for i in order], END_OF_PHRASE.encode()) + 1
    return ranks, end_rank


def byte_order_ids(words: np.ndarray, offsets: np.ndarray, row: np.ndarray, start: np.ndarray,
                   length: np.ndarray, representative: np.ndarray, ranks: np.ndarray,
                   end_rank: int) -> np.ndarray:
    """Position of each distinct phrase (given by its representative span) in Moses' byte
    order: ``ids[u]`` for distinct phrase u.

    Each phrase is the sequence of its word ranks followed by the end rank, padded with 0;
    as many ranks as fit are packed into one uint64 sort key, first word in the highest bits.
    """
    n = representative.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    rep_len = length[representative].astype(np.int64)
    width = int(rep_len.max()) + 1
    bits = max(int(ranks.max()) if ranks.shape[0] else 0, end_rank).bit_length()
    per_key = 64 // bits
    n_keys = -(-width // per_key)
    keys = np.zeros((n_keys, n), dtype=np.uint64)
    first = offsets[row[representative]] + start[representative]
    for t in range(width):
        field = np.zeros(n, dtype=np.uint64)
        has = rep_len > t
        field[has] = ranks[words[first[has] + t]]
        field[rep_len == t] = end_rank
        shift = np.uint64(bits * (per_key - 1 - t % per_key))
        keys[t // per_key] |= field << shift
    order = np.lexsort(keys[::-1]) if n_keys > 1 else np.argsort(keys[0], kind="stable")
    ids = np.empty(n, dtype=np.int64)
    ids[order] = np.arange(n, dtype=np.int64)
    return ids


def check_words(vocabulary: Sequence[str], used: np.ndarray) -> str | None:
    """The first used word a Moses table cannot hold (empty, whitespace or control
    characters, or ``|||``), or None."""
    for index in np.asarray(used).tolist():
        word = vocabulary[index]
        if not word or word == END_OF_PHRASE or any(ord(c) <= 0x20 or c.isspace() for c in word):
            return word
    return None


def gather_ranges(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ranges ``flat[starts[k]:starts[k] + lengths[k]]`` (rows, if ``flat`` has more than one
    dimension) concatenated, and their offsets."""
    positions, offsets = _kernels.range_positions(np.asarray(starts, dtype=np.int64),
                                                  np.asarray(lengths, dtype=np.int64))
    return flat[positions], offsets
