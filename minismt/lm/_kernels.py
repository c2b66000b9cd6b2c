"""Numba kernels of the n-gram query table: hashing, building, lookups and KenLM-exact scoring.

The table (:class:`LMTables`, built by :mod:`minismt.lm.query`) keeps unigrams in
arrays indexed by word id and every longer n-gram in one open-addressing hash
table with linear probing. An n-gram's key is a 64-bit hash chained from its
newest word towards its oldest, with the order mixed in at every step::

    h_1 = mix(w_n + GOLDEN)
    h_k = mix(h_{k-1} ^ (w_{n-k+1} * M + k))        (k = 2 .. n)

so the decoder extends a match one word to the left at O(1) cost, exactly as
KenLM's probing model does. A slot is KenLM's 16 bytes (:data:`SLOT_DTYPE`, four
to a cache line, so the table of a model of a million n-grams stays in the
processor's last-level cache): the key, and the log10 probability and back-off as
float32, the precision KenLM stores them in. As in KenLM, an n-gram is known by
its hash alone: the key is the hash's low 62 bits (two distinct n-grams of one
model sharing them is refused when the table is built; a query of an absent
n-gram matching a stored key has a chance of about 2**-62 per probe). The two
high bits are flags: ``EXTENDS``, the n-gram is the context of a longer one or has
a non-zero back-off, which decides how far a state is kept; ``LEFT``, the n-gram
is the suffix of a longer one, so a longer match may exist (KenLM's
``independent_left``, which saves the lookup that would fail).

Scoring follows KenLM's ``GenericModel::FullScore``: the probability of the
longest n-gram ending in the word that the table holds, plus the back-offs of
the context suffixes longer than that n-gram; the new state holds the words of
the longest matched n-gram that extends (at most order-1 words).

A state is three things: ``words`` (int32[order-1], newest word first, -1 after
``length``), ``backoffs`` (float64[order-1], log10 back-off of the suffix of
length i+1) and ``length``. Two states with equal ``words`` arrays score every
continuation identically (hypothesis recombination).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from minismt._primitives import GOLDEN, MIX1, mix64, njit_borrowing, prefetch

EMPTY = np.uint64(0)


SLOT_DTYPE = np.dtype([("key", np.uint64), ("logprob", np.float32), ("backoff", np.float32)], align=True)
"""The record of one hash-table slot (16 bytes)."""

EXTENDS = np.uint64(1 << 63)
"""Key flag: the n-gram is the context of a longer one or has a non-zero back-off."""
LEFT = np.uint64(1 << 62)
"""Key flag: the n-gram is the suffix of a longer one."""
HASH_BITS = np.uint64((1 << 62) - 1)
"""The key's bits that hold the hash."""


class LMTables(NamedTuple):
    """The arrays of a query table; numba kernels take the tuple whole.

    Attributes
    ----------
    order : int
        N, the highest n-gram order.
    bos, eos, unk : int
        Word ids of ``<s>`` (1), ``</s>`` (2) and ``<unk>`` (0).
    uni_values : float64[V, 2]
        log10 probability and log10 back-off of every word id (float32 values, as the n-grams').
    uni_extends : bool[V]
        The unigram is the context of a bigram or has a non-zero back-off.
    uni_left : bool[V]
        The unigram ends some bigram.
    slots : record[C] of :data:`SLOT_DTYPE` (C a power of two)
        The n-grams of orders 2..N: ``key`` (uint64, 0 = empty slot: the hash's low
        62 bits and the flags ``EXTENDS`` and ``LEFT``, as ``uni_extends``,
        ``uni_left``), ``logprob`` and ``backoff``.
    ending_best : float64[V]
        The highest log10 probability of an n-gram (a unigram included) ending in
        each word: what a decoder's optimistic LM estimate needs.
    """

    order: int
    bos: int
    eos: int
    unk: int
    uni_values: np.ndarray
    uni_extends: np.ndarray
    uni_left: np.ndarray
    slots: np.ndarray
    ending_best: np.ndarray


@njit(cache=True)
def hash_start(word):
    """Hash chain value of the unigram ``word``."""
    return mix64(np.uint64(word) + GOLDEN)


@njit(cache=True)
def hash_extend(h, word, k):
    """Hash chain value of the k-gram made by putting ``word`` before the (k-1)-gram hashed ``h``."""
    return mix64(h ^ (np.uint64(word) * MIX1 + np.uint64(k)))


@njit(cache=True)
def slot_key(h):
    """The hash bits stored for chain value ``h``: never 0, which marks an empty slot."""
    key = h & HASH_BITS
    return key if key != EMPTY else np.uint64(1)


@njit(cache=True)
def ngram_hash(rev_words, k):
    """Chain value of the k-gram whose words, newest first, are ``rev_words[:k]``."""
    h = hash_start(rev_words[0])
    for i in range(1, k):
        h = hash_extend(h, rev_words[i], i + 1)
    return h


@njit_borrowing
def find_slot(slots, h):
    """Slot of the n-gram whose chain value is ``h``, or -1."""
    key = slot_key(h)
    mask = np.int64(slots.shape[0] - 1)
    s = np.int64(key & np.uint64(mask))
    while slots[s].key != EMPTY:
        if slots[s].key & HASH_BITS == key:
            return s
        s = (s + 1) & mask
    return -1


@njit(cache=True)
def lookup_rows(slots, rev_rows, k, out):
    """``out[r]`` = slot of the k-gram ``rev_rows[r, :k]`` (newest first), -1 when absent."""
    for r in range(rev_rows.shape[0]):
        out[r] = find_slot(slots, ngram_hash(rev_rows[r], k))


@njit(cache=True)
def insert_rows(slots, rev_rows, k, logprob, backoff):
    """Insert k-grams (words newest first); returns the first row whose key is already present, or -1."""
    mask = np.int64(slots.shape[0] - 1)
    for r in range(rev_rows.shape[0]):
        h = ngram_hash(rev_rows[r], k)
        if find_slot(slots, h) >= 0:
            return r
        key = slot_key(h)
        s = np.int64(key & np.uint64(mask))
        while slots[s].key != EMPTY:
            s = (s + 1) & mask
        slot = slots[s]
        slot.key = key | EXTENDS if backoff[r] != 0.0 else key
        slot.logprob = logprob[r]
        slot.backoff = backoff[r]
    return -1


@njit_borrowing
def score_word(t, in_words, in_backoffs, in_length, word, out_words, out_backoffs):
    """log10 p(word | state) with KenLM's back-off semantics, writing the next state.

    Parameters
    ----------
    t : LMTables
    in_words, in_backoffs, in_length : the state before ``word`` (see the module docstring)
    word : int
        Word id (``t.unk`` for out-of-vocabulary words).
    out_words, out_backoffs : int32[N-1], float64[N-1]
        Receive the next state (must not alias the input state).

    Returns
    -------
    (log10 probability, length of the matched n-gram, length of the next state, independent): the last
    is KenLM's ``independent_left``: no longer n-gram ends in the matched one with the words before
    it (the context ended in a lookup that failed, the order was reached, or the matched n-gram is the
    suffix of no longer one), so no words further left can change the score.
    """
    n_ctx = out_words.shape[0]
    logprob = t.uni_values[word, 0]
    matched = 1
    out_length = 0
    if n_ctx > 0:
        out_words[0] = word
        out_backoffs[0] = t.uni_values[word, 1]
        if t.uni_extends[word]:
            out_length = 1
    h = hash_start(word)
    left = t.uni_left[word]
    if left:  # every context length's first slot at once: their memory latencies overlap
        mask = np.int64(t.slots.shape[0] - 1)
        hp = h
        for i in range(min(in_length, t.order - 1)):
            hp = hash_extend(hp, in_words[i], i + 2)
            prefetch(t.slots, np.int64(slot_key(hp) & np.uint64(mask)))
    failed = False
    for i in range(in_length):
        k = i + 2
        if k > t.order or not left:
            break
        h = hash_extend(h, in_words[i], k)
        s = find_slot(t.slots, h)
        if s < 0:
            failed = True
            break
        slot = t.slots[s]
        logprob = np.float64(slot.logprob)
        left = slot.key & LEFT != EMPTY
        matched = k
        if k <= n_ctx:
            out_words[k - 1] = in_words[i]
            out_backoffs[k - 1] = slot.backoff
            if slot.key & EXTENDS != EMPTY:
                out_length = k
    for i in range(matched - 1, in_length):
        logprob += in_backoffs[i]
    for i in range(out_length, n_ctx):
        out_words[i] = -1
        out_backoffs[i] = 0.0
    return logprob, matched, out_length, failed or not left or matched == t.order


@njit(cache=True)
def begin_state(t, words, backoffs):
    """Write KenLM's ``BeginSentenceState`` (context ``<s>``); returns its length, 1."""
    words[:] = -1
    backoffs[:] = 0.0
    if words.shape[0] == 0:
        return 0
    words[0] = t.bos
    backoffs[0] = t.uni_values[t.bos, 1]
    return 1


@njit(cache=True)
def _score_into(t, ids, bos, eos, out_logprob, out_matched, start, words_a, backs_a, words_b, backs_b):
    """Score one sentence into ``out_*[start:]`` using the given scratch states; returns its total."""
    if bos:
        length = begin_state(t, words_a, backs_a)
    else:
        words_a[:] = -1
        backs_a[:] = 0.0
        length = 0
    n = ids.shape[0]
    total = 0.0
    for i in range(n + 1 if eos else n):
        word = ids[i] if i < n else t.eos
        logprob, matched, length, _ = score_word(t, words_a, backs_a, length, word, words_b, backs_b)
        out_logprob[start + i] = logprob
        out_matched[start + i] = matched
        total += logprob
        words_a, words_b = words_b, words_a
        backs_a, backs_b = backs_b, backs_a
    return total


@njit(cache=True)
def score_sentence(t, ids, bos, eos, out_logprob, out_matched):
    """log10 probability and matched n-gram length of every token of one sentence (then of
    ``</s>`` when ``eos``), starting from ``<s>`` when ``bos`` (KenLM's ``full_scores``); returns the total."""
    n_ctx = t.order - 1
    return _score_into(t, ids, bos, eos, out_logprob, out_matched, 0,
                       np.empty(n_ctx, dtype=np.int32), np.empty(n_ctx, dtype=np.float64),
                       np.empty(n_ctx, dtype=np.int32), np.empty(n_ctx, dtype=np.float64))


@njit(cache=True)
def score_sentences(t, ids, offsets, bos, eos, out_logprob, out_matched):
    """:func:`score_sentence` for many sentences: sentence s is ``ids[offsets[s]:offsets[s+1]]``,
    its scores go to ``out_*[offsets[s] + s * eos ...]``; returns the total."""
    n_ctx = t.order - 1
    words_a = np.empty(n_ctx, dtype=np.int32)
    backs_a = np.empty(n_ctx, dtype=np.float64)
    words_b = np.empty(n_ctx, dtype=np.int32)
    backs_b = np.empty(n_ctx, dtype=np.float64)
    total = 0.0
    extra = 1 if eos else 0
    for s in range(offsets.shape[0] - 1):
        total += _score_into(t, ids[offsets[s]:offsets[s + 1]], bos, eos, out_logprob, out_matched,
                             offsets[s] + s * extra, words_a, backs_a, words_b, backs_b)
    return total


@njit(cache=True)
def next_word_logprobs(t, words, backoffs, length, out):
    """``out[w]`` = log10 p(w | state) for every word id w (the whole next-word distribution)."""
    n_ctx = t.order - 1
    scratch_words = np.empty(n_ctx, dtype=np.int32)
    scratch_backs = np.empty(n_ctx, dtype=np.float64)
    for w in range(out.shape[0]):
        out[w] = score_word(t, words, backoffs, length, w, scratch_words, scratch_backs)[0]


@njit(cache=True)
def mark_neighbours(t, rev_rows, k):
    """For every k-gram, mark its context (older k-1 words) ``extends`` and its suffix (newer
    k-1 words) ``left``.

    Returns the first row whose context or suffix is absent from the table, or -1.
    """
    for r in range(rev_rows.shape[0]):
        row = rev_rows[r]
        if k == 2:
            t.uni_extends[row[1]] = True
            t.uni_left[row[0]] = True
            continue
        s = find_slot(t.slots, ngram_hash(row[1:k], k - 1))
        if s < 0:
            return r
        t.slots[s].key |= EXTENDS
        s = find_slot(t.slots, ngram_hash(row, k - 1))
        if s < 0:
            return r
        t.slots[s].key |= LEFT
    return -1
