"""Minimum Bayes risk and consensus decoding: choose the translation with the highest expected BLEU under the
model's posterior instead of the most probable one.

Both choose among the ``size`` best distinct translations of a sentence's search graph (Moses' ``-mbr-size``,
200), under ``p(d)`` proportional to ``exp(scale * w . f(d))`` (Moses' ``-mbr-scale``, 1):

- ``"kbest"``: k-best MBR (Kumar & Byrne 2004, as Moses ``-mbr``): the candidate ``e`` maximising
  ``sum_{e'} p(e') BLEU(e, e')`` over the same list, with sentence BLEU+1 (Lin & Och 2004: +1 on the matches and
  totals of orders 2 to 4) as the gain: the quadratic cost of pairs of the list;
- ``"forest"``: consensus decoding over the whole forest (DeNero et al. 2009, "Fast consensus decoding over
  translation forests"): the expected n-gram counts ``E[c(g)]`` of every derivation of the forest
  (:func:`minismt.hypergraph.ngrams.expected_ngram_counts`) stand for the reference, and the candidate with the
  highest BLEU+1 against them wins (matches ``min(c_e(g), E[c(g)])``, reference length ``E[length]``): linear in
  the list, and the evidence is every derivation, not the list.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

import numpy as np

from minismt.decode import _mbr_kernels as _kernels
from minismt.errors import InputError
from minismt.hypergraph.ngrams import expected_ngram_counts

MBR_MODES = ("kbest", "forest")
ORDER = 4


def posterior(scores: Sequence[float], scale: float) -> np.ndarray:
    """``exp(scale * score)`` normalised over the list."""
    values = scale * np.asarray(scores, dtype=np.float64)
    values = np.exp(values - values.max())
    return values / values.sum()


def _ngrams(words: Sequence[str]) -> list[Counter]:
    return [Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1)) for n in range(1, ORDER + 1)]


def bleu_plus_one(candidate: Sequence[str], counts: list, reference_length: float) -> float:
    """Sentence BLEU+1 of ``candidate`` against reference n-gram ``counts`` (per order, possibly expected
    counts) and a reference length: clipped matches, +1 on the matches and totals of orders 2 to 4."""
    mine = _ngrams(candidate)
    log_precision = 0.0
    for n in range(ORDER):
        matches = sum(min(c, counts[n].get(g, 0.0)) for g, c in mine[n].items())
        total = max(len(candidate) - n, 0)
        if n > 0:
            matches, total = matches + 1.0, total + 1.0
        if matches <= 0 or total <= 0:
            return 0.0
        log_precision += math.log(matches / total)
    length = len(candidate)
    brevity = min(0.0, 1.0 - reference_length / length) if length else -math.inf
    return math.exp(brevity + log_precision / ORDER)


def pairwise_gains(texts: Sequence[str]) -> np.ndarray:
    """``[i, j]``: sentence BLEU+1 of ``texts[i]`` with ``texts[j]`` as the reference (numba, from integer ids of
    the n-grams of the list)."""
    ids: dict[tuple[str, ...], int] = {}
    rows: list[list[tuple[int, int, int]]] = []
    for text in texts:
        counted = _ngrams(text.split())
        rows.append(sorted((ids.setdefault(g, len(ids)), n + 1, c) for n in range(ORDER)
                           for g, c in counted[n].items()))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    flat = np.array([item for r in rows for item in r], dtype=np.int64).reshape(-1, 3)
    out = np.empty((len(texts), len(texts)))
    _kernels.pairwise_bleu(offsets, np.ascontiguousarray(flat[:, 0]), np.ascontiguousarray(flat[:, 1]),
                           np.ascontiguousarray(flat[:, 2]).astype(np.float64),
                           np.array([len(t.split()) for t in texts], dtype=np.float64), ORDER, out)
    return out


def kbest_mbr(texts: Sequence[str], scores: Sequence[float], scale: float = 1.0) -> int:
    """The index of the k-best MBR choice among ``texts``: the highest ``sum_j p_j BLEU+1(texts[i], texts[j])``
    (first wins ties)."""
    if not texts:
        raise InputError("no candidates for MBR", expected="a non-empty k-best list")
    return int(np.argmax(pairwise_gains(texts) @ posterior(scores, scale)))


def consensus(forest, weights, texts: Sequence[str], scale: float = 1.0) -> int:
    """The index of the forest consensus choice among ``texts`` (first wins ties): BLEU+1 against the
    forest's expected n-gram counts under ``scale * weights``."""
    if not texts:
        raise InputError("no candidates for consensus decoding", expected="a non-empty k-best list")
    expected = expected_ngram_counts(forest, weights, ORDER, scale)
    counts = [Counter() for _ in range(ORDER)]
    for gram, count in expected.items():
        counts[len(gram) - 1][gram] = count
    length = float(sum(counts[0].values()))
    gains = [bleu_plus_one(text.split(), counts, length) for text in texts]
    return int(np.argmax(gains))
