"""Sparse features of the phrase-based decoder, for large-scale tuning (``Decoder(sparse_features=...)``).

Two families, each switched on by its name:

``rule-id``
    One indicator per phrase pair (phrase-table row) used, as Moses' ``PhrasePairFeature``
    (``pp_``) and the "rule identifier" features of the Bayesian-optimisation paper's Table 3:
    ``RuleId_<source words>~<target words>``, words joined by ``,``; value 1 per use.
``word-pair``
    Lexical pairs inside the phrase pairs used, as Moses' ``WordTranslationFeature`` (``wt_``):
    ``WordPair_<source word>~<target word>`` counts, for every link of the phrase pair's word
    alignment (the table keeps each pair's alignment from extraction, see
    :mod:`minismt.extract.phrase_table`), that pair of words. Unaligned words give no feature (Moses'
    default, no ``NULL`` pairs); a phrase pair whose table row has no alignment (hand-made
    tables) gives none. With a vocabulary of ``N`` (``word_pair_vocabulary``; the APRO paper
    uses the 500 most frequent words, its footnote 5) only pairs of a source word among the
    ``N`` most frequent of the training corpus' source side and a target word among the ``N``
    most frequent of its target side give a feature (:func:`frequent_words`); a link with a
    word outside them gives none. Moses' ``WordTranslationFeature`` with vocabulary files
    backs off to ``OTHER`` instead (``wt_OTHER~the``), one name for each rare side; that
    back-off is not implemented here (its name could not be told from the word ``OTHER``).

Pass-through copies of unknown words have neither (they are sentence-specific; the
``UnknownWordPenalty`` scores them), nor have the axiom and goal edges.

Names are the words' text, escaped so that every name round-trips through Moses n-best
lists (a sparse label needs a ``_`` and must not look like a dense ``Label_i``; no
``|||``), cdec JSON forests and k-best lists (``name=value``), moses.ini and minismt/cdec
weights files (``name value``, ``#`` starts a comment): in a word, ``%`` ``_`` ``,`` ``~``
``=`` ``#`` ``|`` ``:`` and control characters become ``%XX`` (their UTF-8 bytes). So the
only ``_`` of a name is the one after the family label, what follows always contains ``~``
(never a bare index), and :func:`unescape_word` gives the words back.

The search sees the features through the translation options: each option's static score
gets ``sum_f w_f * h_f`` over its sparse features (and so does its future-cost estimate and
the table-limit ranking, as for the dense stateless features), so non-zero sparse weights
change the search exactly as the features' contribution to the model score; the
hypergraph's edges carry the features themselves (see :class:`SparseFeatureTable`).
"""

from __future__ import annotations

import math

import threading
from typing import Iterable, Mapping, Sequence

import numpy as np

from minismt.decode.model import FEATURE_NAMES
from minismt.errors import InputError, finite_number
from minismt.extract.hiero_features import FAMILIES as HIERO_FAMILIES
from minismt.features import FeatureSpace, escape_word, unescape_word

LABELS = {"rule-id": "RuleId", "word-pair": "WordPair",
          **{family: label for family, label in HIERO_FAMILIES.items() if family != "rule-id"}}
_FAMILY_OF_LABEL = {label: family for family, label in LABELS.items()}

def rule_id_name(source: Sequence[str], target: Sequence[str]) -> str:
    """``RuleId_<source words>~<target words>`` (words escaped, joined by ``,``)."""
    return (f"{LABELS['rule-id']}_" + ",".join(map(escape_word, source)) + "~"
            + ",".join(map(escape_word, target)))


def word_pair_name(source: str, target: str) -> str:
    """``WordPair_<source word>~<target word>`` (escaped)."""
    return f"{LABELS['word-pair']}_{escape_word(source)}~{escape_word(target)}"


def family_of(name: str) -> str | None:
    """The family (``"rule-id"``, ``"word-pair"``) whose names ``name`` looks like, else None."""
    label, sep, rest = name.partition("_")
    if not sep or "~" not in rest:
        return None
    return _FAMILY_OF_LABEL.get(label)


def parse_name(name: str) -> tuple[str, list[str], list[str]] | None:
    """``(family, source words, target words)`` of a sparse feature name, or None."""
    family = family_of(name)
    if family is None:
        return None
    source, _, target = name.partition("_")[2].partition("~")
    if family == "rule-id":
        return family, [unescape_word(w) for w in source.split(",")], [unescape_word(w) for w in target.split(",")]
    return family, [unescape_word(source)], [unescape_word(target)]


_ACCEPTED_SPARSE: dict[tuple, set[str]] = {}
"""Per (enabled families, dense names), the sparse names :func:`split_weights` has accepted in this process: a
worker decodes many weight vectors over one growing set of names (an online tuner's shards, 58,618 names after
one dtrain epoch on 10,000 sentences), so each name's family is checked once, not once per weight vector."""


def split_weights(weights, families: Iterable[str], dense_names: Sequence[str], names: Sequence[str] | None = None):
    """``(dense weights, {sparse name: weight})`` of a decoder's ``weights`` argument.

    Only a ``{name: value}`` mapping, or an array of one weight per name of ``names``, can hold
    sparse weights; a name of an enabled family goes to the sparse part, any other name stays
    with the dense ones (the model checks them). A sparse name of a family that is not enabled
    is an :class:`InputError`. An array whose names start with ``dense_names`` gives its dense
    block as an array (a worker's weights; only its non-zero sparse weights are named).
    """
    if names is not None:
        values = np.asarray(weights, dtype=np.float64)
        if values.shape != (len(names),):
            raise InputError(f"{values.size} weights for {len(names)} names", expected="one weight per name")
        n = len(dense_names)
        if tuple(names[:n]) != tuple(dense_names):
            return split_weights(dict(zip(names, values.tolist())), families, dense_names)
        rest = (np.flatnonzero(values[n:]) + n).tolist()
        unknown, sparse = split_weights({names[i]: values[i] for i in rest}, families, dense_names)
        if unknown:
            raise InputError(f"unknown feature name {next(iter(unknown))!r}",
                             expected="a dense feature or a sparse feature of an enabled family")
        return values[:n], sparse
    if not isinstance(weights, Mapping):
        return weights, {}
    families = frozenset(families)
    dense_set = set(dense_names)
    accepted = _ACCEPTED_SPARSE.setdefault((families, tuple(dense_names)), set())
    dense: dict = {}
    sparse: dict[str, float] = {}
    for name, value in weights.items():
        if name in accepted and isinstance(value, float) and math.isfinite(value):
            sparse[name] = float(value)
            continue
        family = None if name in dense_set else family_of(name) if isinstance(name, str) else None
        if family is None:
            dense[name] = value
        elif family in families:
            sparse[name] = finite_number(value, f"weight of {name}")
            accepted.add(name)
        else:
            raise InputError(f"weight of the sparse feature {name!r}, but the decoder's {family} features are off",
                             expected=f"sparse_features including {family!r} (--sparse-features)")
    return dense, sparse


def frequent_words(counts: Mapping[str, int], n: int) -> set[str]:
    """The ``n`` most frequent words of ``counts``; ties at the cut go to the word that sorts
    first (code points), so the set does not depend on the order the counts were made in."""
    return set(sorted(counts, key=lambda word: (-counts[word], word))[:n])


def word_pair_vocabulary_masks(model, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(source mask, target mask)`` over the phrase table's vocabularies: which words are among the
    ``n`` most frequent of the training corpus' source and target sides
    (:meth:`~minismt.decode.model.PhraseModel.training_word_counts`)."""
    source_counts, target_counts = model.training_word_counts()
    masks = []
    for vocab, counts in ((model.table.src_vocab, source_counts), (model.table.tgt_vocab, target_counts)):
        keep = frequent_words(counts, n)
        masks.append(np.fromiter((word in keep for word in vocab.words), dtype=bool, count=len(vocab)))
    return masks[0], masks[1]


class NamedWeights:
    """A decoder's sparse weights from an array of weights over names (the dense names first), as a worker
    gets them with every new weights: each name's id in ``space`` (added to it if ``grow``, else -1 if it is
    not there: it weighs nothing) is found once per names tuple (kept by identity, the latest few) and checked
    as :func:`split_weights` checks it when its weight is first non-zero (a family that is off, an unknown
    name: ``expected`` says what is wanted), so new weights over the same names cost an array assignment.
    Not thread-safe: the caller locks."""

    KEPT = 4

    def __init__(self, families: Sequence[str], space: FeatureSpace, grow: bool, expected: str):
        self.families, self.dense_names = tuple(families), tuple(space.dense_names)
        self.space, self.grow, self.expected = space, grow, expected
        self._kept: dict[int, tuple] = {}   # id(names) -> (names, ids, checked)

    def weights(self, names: tuple[str, ...], values: np.ndarray) -> np.ndarray:
        """The sparse weights over the space (0 at the dense features and at every name without a weight)."""
        n = len(self.dense_names)
        sparse = values[n:]
        nonzero = np.flatnonzero(sparse)
        bad = nonzero[~np.isfinite(sparse[nonzero])]
        if bad.shape[0]:
            finite_number(float(sparse[bad[0]]), f"weight of {names[n + bad[0]]}")
        entry = self._kept.get(id(names))
        if entry is None or entry[0] is not names:
            entry = self._kept[id(names)] = (names, np.full(len(names) - n, -1, dtype=np.int64),
                                             np.zeros(len(names) - n, dtype=np.bool_))
            while len(self._kept) > self.KEPT:
                self._kept.pop(next(iter(self._kept)))
        _, ids, checked = entry
        new = nonzero[~checked[nonzero]]
        if new.shape[0]:
            unknown, _ = split_weights({names[n + i]: float(sparse[i]) for i in new.tolist()}, self.families,
                                       self.dense_names)
            if unknown:
                raise InputError(f"unknown feature name {next(iter(unknown))!r}", expected=self.expected)
            space = self.space
            ids[new] = [space.add(names[n + i]) if self.grow else space.get(names[n + i], -1) for i in new.tolist()]
            checked[new] = True
        out = np.zeros(len(self.space))
        found = nonzero[ids[nonzero] >= 0]
        out[ids[found]] = sparse[found]
        return out


class SparseFeatureTable:
    """The sparse features of every phrase-table row, computed when first needed and kept.

    Row ``r``'s features are ``ids[lo[r]:hi[r]]`` / ``values[...]`` (sorted ids of ``space``,
    summed counts); ``lo[r] < 0`` until computed. One table per model, set of families and
    word-pair vocabulary is shared by the decoders of the model (:meth:`for_model`), so new
    weights do not recompute names; it is thread-safe. ``vocabulary``: the ``(source mask,
    target mask)`` of :func:`word_pair_vocabulary_masks` (None: every word pair).
    """

    def __init__(self, table, families: Sequence[str], space: FeatureSpace | None = None,
                 vocabulary: tuple[np.ndarray, np.ndarray] | None = None):
        self.table = table
        self.families = tuple(families)
        self.space = space if space is not None else FeatureSpace(FEATURE_NAMES)
        self.vocabulary = vocabulary
        n = len(table)
        self.lo = np.full(n, -1, dtype=np.int64)
        self.hi = np.full(n, -1, dtype=np.int64)
        self.ids = np.empty(1024, dtype=np.int32)
        self.values = np.empty(1024, dtype=np.float64)
        self.size = 0
        self._src_words: dict[int, str] = {}
        self._tgt_words: dict[int, str] = {}
        self._pair_ids: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()
        self._named = NamedWeights(self.families, self.space, True,
                                   "a dense feature or a sparse feature of an enabled family")

    @classmethod
    def for_model(cls, model, families: Sequence[str], word_pair_vocabulary: int | None = None) -> "SparseFeatureTable":
        """The model's table for ``families`` and the word pairs of the ``word_pair_vocabulary`` most
        frequent words (None: all; made on first use and kept on the model)."""
        key = (tuple(families), word_pair_vocabulary)
        cache = model.__dict__.setdefault("_sparse_tables", {})
        table = cache.get(key)
        if table is None:
            vocabulary = (word_pair_vocabulary_masks(model, word_pair_vocabulary)
                          if word_pair_vocabulary is not None and "word-pair" in families else None)
            table = cache[key] = cls(model.table, key[0], vocabulary=vocabulary)
        return table

    def weight_array(self, weights: Mapping[str, float]) -> np.ndarray:
        """``{sparse name: weight}`` as an array over the space (names added to it), 0 elsewhere."""
        with self._lock:
            out = self.space.weights(weights, grow=True)
        out[: self.space.n_dense] = 0.0
        return out

    def named_weight_array(self, names: tuple[str, ...], values: np.ndarray) -> np.ndarray:
        """:meth:`weight_array` of the weights ``values`` over ``names`` (dense names first), as a worker
        gets them (:class:`NamedWeights`)."""
        with self._lock:
            return self._named.weights(names, values)

    # ---- names ----------------------------------------------------------------------------
    def _source_word(self, i: int) -> str:
        word = self._src_words.get(i)
        if word is None:
            word = self._src_words[i] = self.table.src_vocab[i]
        return word

    def _target_word(self, i: int) -> str:
        word = self._tgt_words.get(i)
        if word is None:
            word = self._tgt_words[i] = self.table.tgt_vocab[i]
        return word

    def _row_features(self, row: int, source: int) -> dict[int, float]:
        table, space = self.table, self.space
        src = table.src_words[table.src_offsets[source]:table.src_offsets[source + 1]].tolist()
        tgt = table.tgt_words[table.tgt_offsets[row]:table.tgt_offsets[row + 1]].tolist()
        out: dict[int, float] = {}
        if "rule-id" in self.families:
            name = rule_id_name([self._source_word(i) for i in src], [self._target_word(i) for i in tgt])
            out[space.add(name)] = 1.0
        if "word-pair" in self.families:
            for s, t in table.align_links[table.align_offsets[row]:table.align_offsets[row + 1]].tolist():
                if not (0 <= s < len(src) and 0 <= t < len(tgt)):
                    continue
                if self.vocabulary is not None and not (self.vocabulary[0][src[s]] and self.vocabulary[1][tgt[t]]):
                    continue
                key = (src[s], tgt[t])
                index = self._pair_ids.get(key)
                if index is None:
                    index = self._pair_ids[key] = space.add(
                        word_pair_name(self._source_word(key[0]), self._target_word(key[1])))
                out[index] = out.get(index, 0.0) + 1.0
        return out

    def _ensure(self, rows: np.ndarray) -> None:
        """Compute the features of the rows (>= 0) not yet known (the caller holds the lock)."""
        rows = rows[rows >= 0]
        missing = np.unique(rows[self.lo[rows] < 0])
        if missing.shape[0] == 0:
            return
        sources = np.searchsorted(self.table.row_offsets, missing, side="right") - 1
        for row, source in zip(missing.tolist(), sources.tolist()):
            features = self._row_features(row, source)
            need = self.size + len(features)
            if need > self.ids.shape[0]:
                capacity = max(need, 2 * self.ids.shape[0])
                self.ids = np.concatenate([self.ids[:self.size], np.empty(capacity - self.size, np.int32)])
                self.values = np.concatenate([self.values[:self.size], np.empty(capacity - self.size)])
            keys = sorted(features)
            self.ids[self.size:need] = keys
            self.values[self.size:need] = [features[k] for k in keys]
            self.lo[row] = self.size
            self.hi[row] = need
            self.size = need

    # ---- per option / per edge ----------------------------------------------------------------
    def scores(self, rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``sum_f w_f h_f`` of each row (0 for rows < 0); ``weights`` over the space's first names
        (ids beyond it weigh 0)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.shape[0] == 0 or not np.any(weights):
            return np.zeros(rows.shape[0])
        with self._lock:
            self._ensure(rows)
            offsets, ids, values = self._gather(rows)
        w = np.zeros(ids.shape[0])
        inside = ids < weights.shape[0]
        w[inside] = weights[ids[inside]]
        contributions = w * values
        owner = np.repeat(np.arange(rows.shape[0]), np.diff(offsets))
        return np.bincount(owner, weights=contributions, minlength=rows.shape[0])

    def features(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CSR ``(offsets, ids, values)`` of the rows' features (none for rows < 0)."""
        rows = np.asarray(rows, dtype=np.int64)
        with self._lock:
            self._ensure(rows)
            return self._gather(rows)

    def _gather(self, rows: np.ndarray):
        has = rows >= 0
        lo = np.zeros(rows.shape[0], dtype=np.int64)
        length = np.zeros(rows.shape[0], dtype=np.int64)
        lo[has] = self.lo[rows[has]]
        length[has] = self.hi[rows[has]] - lo[has]
        offsets = np.zeros(rows.shape[0] + 1, dtype=np.int64)
        np.cumsum(length, out=offsets[1:])
        positions = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1] - lo, length)
        return offsets, self.ids[positions], self.values[positions]
