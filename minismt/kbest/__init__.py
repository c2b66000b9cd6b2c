"""KBest: the tuning data of n-best tuners, as flat arrays.

One KBest holds ``I`` *instances* (usually one per dev sentence; after
:meth:`KBest.aggregate`, one per sentence and iteration) and ``N`` hypotheses:

``offsets``       int64[I+1]   hypotheses of instance i are rows ``offsets[i]:offsets[i+1]``
``sentence_ids``  int64[I]     the dev sentence of each instance
``features``      float64[N,D] dense feature values (D = ``space.n_dense``)
``indptr``, ``indices``, ``values``   CSR block of sparse features (global indices >= D)
``stats``         int32[N,9]   BLEU statistics (see :mod:`minismt.metrics`), or None
``text``          uint8[...]   UTF-8 hypothesis strings, concatenated; ``text_offsets`` int64[N+1]

A list of 10 million hypotheses with 20 dense features takes about 2.3 GB plus
its text (see ``benchmarks/``).
"""

from __future__ import annotations

import json
import zipfile
import zlib
from array import array
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from minismt.errors import InputError
from minismt.extract.phrases import gather_ranges
from minismt.features import FeatureSpace
from minismt.io import atomic_write
from minismt.kbest import _kernels
from minismt.metrics import N_STATS, corpus_bleu_from_stats, sentence_bleu


MAX_SENTENCES = 10_000_000
"""Largest number of sentences a reader builds a KBest for (ids 0 .. MAX_SENTENCES-1).

A KBest holds one instance per sentence id up to the largest one, so a single
corrupt id such as ``99999999999`` would otherwise allocate gigabytes.
"""


def check_sentence_id(sentence: int, previous: int, n_sentences: int | None, path, line: int) -> None:
    """Readers' check of a sentence id: not below ``previous``, below ``n_sentences`` (or the cap)."""
    if sentence < previous:
        raise InputError(f"sentence id {sentence} after {previous}", path, line,
                         "lines grouped by non-decreasing sentence id")
    limit = MAX_SENTENCES if n_sentences is None else n_sentences
    if sentence >= limit:
        raise InputError(f"sentence id {sentence}", path, line,
                         f"ids below n_sentences={n_sentences}" if n_sentences is not None else
                         f"ids below {MAX_SENTENCES} (pass n_sentences for more)")


class KBest:
    """k-best lists of a dev set with features, BLEU statistics and strings."""

    def __init__(self, space: FeatureSpace, offsets, features, text, text_offsets,
                 indptr=None, indices=None, values=None, stats=None, sentence_ids=None,
                 iterations=None):
        self.space = space
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        n_inst = self.offsets.shape[0] - 1
        self.features = np.ascontiguousarray(features, dtype=np.float64)
        n = self.features.shape[0]
        if self.features.ndim != 2 or self.features.shape[1] != space.n_dense:
            raise InputError(f"dense features have shape {self.features.shape}",
                             expected=f"(N, {space.n_dense})")
        if n_inst < 0 or self.offsets[0] != 0 or self.offsets[-1] != n or np.any(np.diff(self.offsets) < 0):
            raise InputError("offsets do not partition the hypotheses",
                             expected=f"non-decreasing offsets from 0 to {n}")
        self.text = np.ascontiguousarray(text, dtype=np.uint8)
        self.text_offsets = np.ascontiguousarray(text_offsets, dtype=np.int64)
        if self.text_offsets.shape != (n + 1,) or self.text_offsets[-1] != self.text.shape[0]:
            raise InputError("text offsets do not match the hypotheses")
        if indptr is None:
            indptr = np.zeros(n + 1, dtype=np.int64)
            indices = np.zeros(0, dtype=np.int32)
            values = np.zeros(0, dtype=np.float64)
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(indices, dtype=np.int32)
        self.values = np.ascontiguousarray(values, dtype=np.float64)
        if self.indptr.shape != (n + 1,) or self.indptr[-1] != self.indices.shape[0] \
                or self.indices.shape != self.values.shape:
            raise InputError("sparse block does not match the hypotheses")
        if self.indices.size and (self.indices.min() < space.n_dense or self.indices.max() >= len(space)):
            raise InputError("sparse feature index outside the sparse part of the feature space")
        if not np.all(np.isfinite(self.features)) or not np.all(np.isfinite(self.values)):
            raise InputError("feature values must be finite (found NaN or inf)")
        self.stats = None
        if stats is not None:
            self.set_stats(stats)
        self.sentence_ids = (np.arange(n_inst, dtype=np.int64) if sentence_ids is None
                             else np.ascontiguousarray(sentence_ids, dtype=np.int64))
        self.iterations = (np.zeros(n_inst, dtype=np.int64) if iterations is None
                           else np.ascontiguousarray(iterations, dtype=np.int64))
        if self.sentence_ids.shape != (n_inst,) or self.iterations.shape != (n_inst,):
            raise InputError("sentence_ids/iterations must have one entry per instance")

    # ---- sizes and access -----------------------------------------------------
    @property
    def n_instances(self) -> int:
        return self.offsets.shape[0] - 1

    @property
    def n_hypotheses(self) -> int:
        return self.features.shape[0]

    def __len__(self) -> int:
        return self.n_hypotheses

    def __repr__(self) -> str:
        return (f"KBest({self.n_instances} instances, {self.n_hypotheses} hypotheses, "
                f"{self.space!r}, stats={'yes' if self.stats is not None else 'no'})")

    def nbytes(self) -> int:
        """Bytes held by the arrays."""
        arrays = [self.offsets, self.features, self.text, self.text_offsets, self.indptr,
                  self.indices, self.values, self.sentence_ids, self.iterations]
        if self.stats is not None:
            arrays.append(self.stats)
        return int(sum(a.nbytes for a in arrays))

    def rows(self, instance: int) -> range:
        return range(int(self.offsets[instance]), int(self.offsets[instance + 1]))

    def hypothesis(self, row: int) -> str:
        return bytes(self.text[self.text_offsets[row]:self.text_offsets[row + 1]]).decode("utf-8")

    def texts(self, rows: Iterable[int] | None = None) -> list[str]:
        rows = range(self.n_hypotheses) if rows is None else rows
        return [self.hypothesis(int(r)) for r in rows]

    def sparse_row(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.indptr[row], self.indptr[row + 1]
        return self.indices[lo:hi], self.values[lo:hi]

    def feature_dict(self, row: int) -> dict[str, float]:
        """``{name: value}`` of one hypothesis (dense and sparse)."""
        out = {name: float(v) for name, v in zip(self.space.dense_names, self.features[row])}
        for index, value in zip(*self.sparse_row(row)):
            out[self.space.name(int(index))] = float(value)
        return out

    def feature_matrix(self) -> np.ndarray:
        """All features as one dense ``[N, len(space)]`` array (dense block, then sparse columns);
        meant for small lists such as an online learner's mini-batch."""
        out = np.zeros((self.n_hypotheses, len(self.space)))
        out[:, : self.space.n_dense] = self.features
        if self.indices.size:
            rows = np.repeat(np.arange(self.n_hypotheses), np.diff(self.indptr))
            np.add.at(out, (rows, self.indices), self.values)
        return out

    def set_stats(self, stats) -> None:
        stats = np.ascontiguousarray(stats, dtype=np.int32)
        if stats.shape != (self.n_hypotheses, N_STATS):
            raise InputError(f"BLEU statistics have shape {stats.shape}",
                             expected=f"({self.n_hypotheses}, {N_STATS})")
        self.stats = stats

    def _require_stats(self) -> np.ndarray:
        if self.stats is None:
            raise InputError("this k-best list has no BLEU statistics",
                             expected="statistics computed against the references")
        return self.stats

    # ---- model scores ------------------------------------------------------------
    def weight_array(self, weights) -> np.ndarray:
        """A weight array over ``space`` from an array or a ``{name: weight}`` dict."""
        if isinstance(weights, dict):
            return self.space.weights(weights, grow=False)
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1 or w.shape[0] < self.space.n_dense:
            raise InputError(f"weight vector of shape {w.shape}",
                             expected=f"at least the {self.space.n_dense} dense weights")
        if w.shape[0] < len(self.space):
            w = np.concatenate([w, np.zeros(len(self.space) - w.shape[0])])
        return w

    def scores(self, weights) -> np.ndarray:
        """Model score w . h of every hypothesis."""
        w = self.weight_array(weights)
        out = self.features @ w[: self.space.n_dense]
        if self.indices.size:
            _kernels.sparse_dot(self.indptr, self.indices, self.values, w, out)
        return out

    def model_best(self, weights) -> np.ndarray:
        """Row of the highest-scoring hypothesis of each instance (first wins ties; -1 if empty)."""
        return _kernels.segment_argmax(self.offsets, self.scores(weights))

    def corpus_stats(self, rows) -> np.ndarray:
        """Summed BLEU statistics of the given rows (rows < 0 are skipped)."""
        rows = np.asarray(rows, dtype=np.int64)
        return self._require_stats()[rows[rows >= 0]].sum(axis=0, dtype=np.int64)

    def bleu(self, weights, smooth: str = "exp") -> float:
        """Corpus BLEU (0..1) of the model-best hypotheses under ``weights``."""
        return corpus_bleu_from_stats(self.corpus_stats(self.model_best(weights)), smooth=smooth)

    def sentence_bleu(self, **options) -> np.ndarray:
        """Sentence BLEU+1 of every hypothesis; options as :func:`minismt.metrics.sentence_bleu`."""
        return sentence_bleu(self._require_stats(), **options)

    def oracle(self, **options) -> np.ndarray:
        """Row of the hypothesis with the highest sentence BLEU+1 in each instance (first wins ties)."""
        return _kernels.segment_argmax(self.offsets, self.sentence_bleu(**options))

    # ---- accumulation across iterations -----------------------------------------
    def _hashes(self, with_features: bool) -> np.ndarray:
        return _kernels.row_hashes(self.text, self.text_offsets, self.features, self.indptr,
                                   self.indices, self.values, with_features)

    def take(self, rows) -> "KBest":
        """A new KBest with only ``rows`` (sorted, within their instances)."""
        rows = np.asarray(rows, dtype=np.int64)
        keep = np.zeros(self.n_hypotheses, dtype=bool)
        keep[rows] = True
        return self._select(keep)

    def _select(self, keep: np.ndarray) -> "KBest":
        kept_before = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
        offsets = kept_before[self.offsets]
        lengths = np.diff(self.text_offsets)[keep]
        text_mask = np.repeat(keep, np.diff(self.text_offsets))
        nnz = np.diff(self.indptr)
        sparse_mask = np.repeat(keep, nnz)
        return KBest(self.space, offsets, self.features[keep], self.text[text_mask],
                     np.concatenate([[0], np.cumsum(lengths)]),
                     np.concatenate([[0], np.cumsum(nnz[keep])]), self.indices[sparse_mask],
                     self.values[sparse_mask], None if self.stats is None else self.stats[keep],
                     self.sentence_ids.copy(), self.iterations.copy())

    def dedup(self, by: str = "hypothesis") -> "KBest":
        """Drop repeated hypotheses within each instance, keeping the first.

        ``by="hypothesis"``: same string and same feature vector (as Moses' extractor);
        ``by="string"``: same string only.
        """
        if by not in ("hypothesis", "string"):
            raise InputError(f"dedup by {by!r}", expected="'hypothesis' or 'string'")
        with_features = by == "hypothesis"
        keep = _kernels.first_occurrences(self.offsets, self._hashes(with_features), self.text,
                                          self.text_offsets, self.features, self.indptr,
                                          self.indices, self.values, with_features)
        return self if keep.all() else self._select(keep)

    def merge(self, other: "KBest", by: str = "hypothesis") -> "KBest":
        """This list with ``other``'s new hypotheses appended per instance (Moses-style merging).

        Both lists must cover the same instances (same ``sentence_ids``). The
        result keeps this list's rows first, so rows already seen keep their
        order; ``result.n_hypotheses - self.n_hypotheses`` is the number of new ones.
        """
        if not np.array_equal(self.sentence_ids, other.sentence_ids):
            raise InputError("cannot merge k-best lists of different sentences",
                             expected=f"{self.n_instances} instances with the same sentence ids")
        space = self._check_space(other.space)
        both = KBest._concatenate([self, other], space, interleave=True)
        return both.dedup(by)

    @classmethod
    def aggregate(cls, lists: Sequence["KBest"]) -> "KBest":
        """One instance per (iteration, sentence): each list kept whole, for listwise tuners.

        ``iterations`` records which list each instance came from.
        """
        if not lists:
            raise InputError("nothing to aggregate", expected="at least one k-best list")
        space = lists[0].space
        for kb in lists[1:]:
            space = kb._check_space(space)
        parts = []
        for number, kb in enumerate(lists):
            part = KBest(kb.space, kb.offsets, kb.features, kb.text, kb.text_offsets, kb.indptr,
                         kb.indices, kb.values, kb.stats, kb.sentence_ids,
                         np.full(kb.n_instances, number, dtype=np.int64))
            parts.append(part)
        return cls._concatenate(parts, space, interleave=False)

    def _check_space(self, space: FeatureSpace) -> FeatureSpace:
        """The larger of two compatible spaces (one's names a prefix of the other's)."""
        a, b = self.space, space
        if a is b:
            return a
        small, large = (a, b) if len(a) <= len(b) else (b, a)
        if small.n_dense != large.n_dense or large.names[: len(small)] != small.names:
            raise InputError("k-best lists over different feature spaces",
                             expected="lists read with the same FeatureSpace")
        return large

    @staticmethod
    def _concatenate(parts: Sequence["KBest"], space: FeatureSpace, interleave: bool) -> "KBest":
        """Stack lists; with ``interleave`` instance i of the result is instance i of every part."""
        have_stats = all(p.stats is not None or p.n_hypotheses == 0 for p in parts)
        if interleave:
            n_inst = parts[0].n_instances
            order = []  # (part, instance) pairs in output order
            for i in range(n_inst):
                for p in range(len(parts)):
                    order.append((p, i))
            counts = np.zeros(n_inst, dtype=np.int64)
            for part in parts:
                counts += np.diff(part.offsets)
            offsets = np.concatenate([[0], np.cumsum(counts)])
            sentence_ids = parts[0].sentence_ids
            iterations = parts[0].iterations
        else:
            order = [(p, i) for p in range(len(parts)) for i in range(parts[p].n_instances)]
            offsets = np.concatenate([[0], np.cumsum(np.concatenate([np.diff(p.offsets) for p in parts]))])
            sentence_ids = np.concatenate([p.sentence_ids for p in parts])
            iterations = np.concatenate([p.iterations for p in parts])
        row_index = np.concatenate(
            [np.arange(parts[p].offsets[i], parts[p].offsets[i + 1]) for p, i in order]
            or [np.zeros(0, dtype=np.int64)]).astype(np.int64)
        part_index = np.concatenate(
            [np.full(parts[p].offsets[i + 1] - parts[p].offsets[i], p) for p, i in order]
            or [np.zeros(0, dtype=np.int64)]).astype(np.int64)
        base = np.concatenate([[0], np.cumsum([p.n_hypotheses for p in parts])])
        global_rows = base[part_index] + row_index
        features = np.concatenate([p.features for p in parts])[global_rows]
        stats = (np.concatenate([p.stats if p.stats is not None else np.zeros((0, N_STATS), np.int32)
                                 for p in parts])[global_rows] if have_stats else None)
        text_all = np.concatenate([p.text for p in parts])
        text_base = np.concatenate([[0], np.cumsum([p.text.shape[0] for p in parts])])
        starts = np.concatenate([p.text_offsets[:-1] + text_base[k] for k, p in enumerate(parts)])
        ends = np.concatenate([p.text_offsets[1:] + text_base[k] for k, p in enumerate(parts)])
        text, text_offsets = gather_ranges(text_all, starts[global_rows], (ends - starts)[global_rows])
        sp_all_idx = np.concatenate([p.indices for p in parts])
        sp_all_val = np.concatenate([p.values for p in parts])
        sp_base = np.concatenate([[0], np.cumsum([p.indices.shape[0] for p in parts])])
        sp_starts = np.concatenate([p.indptr[:-1] + sp_base[k] for k, p in enumerate(parts)])
        sp_ends = np.concatenate([p.indptr[1:] + sp_base[k] for k, p in enumerate(parts)])
        sp_lengths = (sp_ends - sp_starts)[global_rows]
        sp_idx, indptr = gather_ranges(sp_all_idx, sp_starts[global_rows], sp_lengths)
        sp_val, _ = gather_ranges(sp_all_val, sp_starts[global_rows], sp_lengths)
        return KBest(space, offsets, features, text, text_offsets, indptr, sp_idx, sp_val, stats, sentence_ids,
                     iterations)

    # ---- storage (no pickle) ---------------------------------------------------------
    def save(self, path) -> None:
        """Write to an ``.npz`` file atomically (arrays + feature names as JSON, no pickle)."""
        arrays = dict(offsets=self.offsets, features=self.features, text=self.text,
                      text_offsets=self.text_offsets, indptr=self.indptr, indices=self.indices,
                      values=self.values, sentence_ids=self.sentence_ids, iterations=self.iterations,
                      space=np.frombuffer(json.dumps(self.space.to_json()).encode(), dtype=np.uint8))
        if self.stats is not None:
            arrays["stats"] = self.stats
        with atomic_write(path, compress=False, binary=True) as handle:
            np.savez(handle, **arrays)

    @classmethod
    def load(cls, path, space: FeatureSpace | None = None) -> "KBest":
        """Read a file written by :meth:`save`; ``space`` (if given) must extend the stored one."""
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
            stored = FeatureSpace.from_json(json.loads(bytes(arrays.pop("space")).decode()))
            if space is not None:
                if space.n_dense != stored.n_dense or space.names[: len(stored)] != stored.names:
                    raise InputError("saved k-best list has another feature space", path)
            else:
                space = stored
            return cls(space, arrays["offsets"], arrays["features"], arrays["text"],
                       arrays["text_offsets"], arrays["indptr"], arrays["indices"], arrays["values"],
                       arrays.get("stats"), arrays["sentence_ids"], arrays["iterations"])
        except InputError as err:
            raise InputError(err.message, path, expected=err.expected) from None
        except (OSError, EOFError, ValueError, KeyError, TypeError, IndexError, AttributeError,
                zipfile.BadZipFile, zlib.error) as err:
            raise InputError(f"not a k-best list saved by minismt ({type(err).__name__}: {err})",
                             path) from None


class KBestBuilder:
    """Builds a :class:`KBest` row by row with compact buffers (no per-row objects kept).

    Rows must come grouped by sentence, with non-decreasing sentence ids, as in
    Moses and cdec k-best files.
    """

    def __init__(self, space: FeatureSpace):
        self.space = space
        self.n_dense = space.n_dense
        self._dense = array("d")
        self._sentence = array("q")
        self._text = bytearray()
        self._text_offsets = array("q", [0])
        self._indptr = array("q", [0])
        self._indices = array("i")
        self._values = array("d")
        self._stats = array("i")
        self._has_stats: bool | None = None
        self.last_sentence = -1

    def __len__(self) -> int:
        return len(self._sentence)

    def _start_rows_of(self, sentence: int) -> None:
        if sentence < 0:
            raise InputError(f"sentence id {sentence}", expected="ids >= 0")
        if sentence < self.last_sentence:
            raise InputError(f"sentence id {sentence} after {self.last_sentence}",
                             expected="hypotheses grouped by non-decreasing sentence id")

    def add(self, sentence: int, text: str, dense, sparse_indices=(), sparse_values=(),
            stats=None) -> None:
        """Append one hypothesis of ``sentence`` (dense row of length ``n_dense``)."""
        self._start_rows_of(sentence)
        dense = np.asarray(dense, dtype=np.float64)
        if dense.shape != (self.n_dense,):
            raise InputError(f"{dense.shape[0] if dense.ndim else 0} dense values",
                             expected=f"{self.n_dense}")
        self.last_sentence = sentence
        self._sentence.append(sentence)
        self._dense.frombytes(dense.tobytes())
        self._text += text.encode("utf-8")
        self._text_offsets.append(len(self._text))
        if len(sparse_indices):
            self._indices.frombytes(np.asarray(sparse_indices, dtype=np.int32).tobytes())
            self._values.frombytes(np.asarray(sparse_values, dtype=np.float64).tobytes())
        self._indptr.append(len(self._indices))
        self._add_stats(stats, 1)

    def add_many(self, sentence: int, texts: Sequence[str], dense: np.ndarray, stats=None) -> None:
        """Append a block of hypotheses of one sentence with dense features only."""
        self._start_rows_of(sentence)
        dense = np.ascontiguousarray(dense, dtype=np.float64)
        k = len(texts)
        if dense.shape != (k, self.n_dense):
            raise InputError(f"dense block of shape {dense.shape}", expected=f"({k}, {self.n_dense})")
        self.last_sentence = sentence
        self._sentence.extend([sentence] * k)
        self._dense.frombytes(dense.tobytes())
        ends = []
        for text in texts:
            self._text += text.encode("utf-8")
            ends.append(len(self._text))
        self._text_offsets.extend(ends)
        self._indptr.extend([len(self._indices)] * k)
        self._add_stats(stats, k)

    def _add_stats(self, stats, k: int) -> None:
        has = stats is not None
        if self._has_stats is None:
            self._has_stats = has
        elif self._has_stats != has:
            raise InputError("statistics given for some hypotheses but not others")
        if has:
            block = np.asarray(stats, dtype=np.int32).reshape(k, -1)
            self._stats.frombytes(np.ascontiguousarray(block).tobytes())

    def build(self, n_sentences: int | None = None) -> KBest:
        """The KBest, with one instance per sentence ``0 .. n_sentences-1``."""
        sentence = np.frombuffer(self._sentence, dtype=np.int64) if len(self._sentence) else \
            np.zeros(0, dtype=np.int64)
        if n_sentences is None:
            n_sentences = int(sentence[-1]) + 1 if sentence.size else 0
        if sentence.size and sentence[-1] >= n_sentences:
            raise InputError(f"sentence id {int(sentence[-1])} in a list of {n_sentences} sentences")
        counts = np.bincount(sentence, minlength=n_sentences) if sentence.size else \
            np.zeros(n_sentences, dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        n = len(self._sentence)
        features = (np.frombuffer(self._dense, dtype=np.float64).reshape(n, self.n_dense)
                    if n and self.n_dense else np.zeros((n, self.n_dense)))
        stats = None
        if self._has_stats:
            stats = np.frombuffer(self._stats, dtype=np.int32).reshape(n, -1)
        elif n == 0:
            stats = np.zeros((0, N_STATS), dtype=np.int32)  # an empty list has known statistics
        return KBest(self.space, offsets, features,
                     np.frombuffer(self._text, dtype=np.uint8) if self._text else np.zeros(0, np.uint8),
                     np.frombuffer(self._text_offsets, dtype=np.int64),
                     np.frombuffer(self._indptr, dtype=np.int64),
                     np.frombuffer(self._indices, dtype=np.int32) if len(self._indices) else
                     np.zeros(0, np.int32),
                     np.frombuffer(self._values, dtype=np.float64) if len(self._values) else
                     np.zeros(0, np.float64),
                     stats)


# ---- from decoder output: per-sentence k-best rows -> one KBest ---------------------------

@dataclass
class KBestRows:
    """One sentence's derivations as arrays, as a worker sends them back.

    ``text`` uint8 (UTF-8 strings, concatenated) with ``text_offsets`` int64[k+1]; ``scores``
    float64[k] the model scores under the job's weights (sparse ones included); ``features``
    float64[k, 15] the dense features (order of ``minismt.decode.FEATURE_NAMES``); the sparse
    ones as CSR ``indptr`` int64[k+1], ``indices`` int32 into ``names`` (this list's sparse names:
    every worker numbers its features its own way), ``values`` float64, zeros left out.
    """

    text: np.ndarray
    text_offsets: np.ndarray
    scores: np.ndarray
    features: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    names: tuple[str, ...] = ()

    def __len__(self) -> int:
        return self.scores.shape[0]

    def texts(self) -> list[str]:
        data = self.text.tobytes()
        return [data[lo:hi].decode("utf-8") for lo, hi in zip(self.text_offsets[:-1].tolist(),
                                                                self.text_offsets[1:].tolist())]

    @classmethod
    def of(cls, texts: Sequence[str], scores, feat_offsets, feat_ids, feat_values, space) -> "KBestRows":
        """The rows of derivations whose features are CSR over ``space`` (sorted ids): dense ids go to
        ``features``, the others keep their order and are named in order of first use."""
        k = len(texts)
        n_dense = space.n_dense
        rows = np.repeat(np.arange(k), np.diff(feat_offsets))
        is_dense = feat_ids < n_dense
        dense = np.zeros((k, n_dense))
        dense[rows[is_dense], feat_ids[is_dense]] = feat_values[is_dense]
        keep = ~is_dense & (feat_values != 0.0)
        ids, rows = feat_ids[keep], rows[keep]
        unique, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank = np.empty(order.shape[0], dtype=np.int32)
        rank[order] = np.arange(order.shape[0], dtype=np.int32)
        encoded = [text.encode("utf-8") for text in texts]
        text_offsets = np.zeros(k + 1, dtype=np.int64)
        np.cumsum([len(x) for x in encoded], out=text_offsets[1:])
        return cls(np.frombuffer(b"".join(encoded), dtype=np.uint8), text_offsets,
                   np.asarray(scores, dtype=np.float64), dense,
                   np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=k))]).astype(np.int64),
                   rank[inverse.reshape(-1)], feat_values[keep],
                   tuple(space.name(int(unique[j])) for j in order.tolist()))



def kbest_of(lists: Sequence[KBestRows | None], space: FeatureSpace, sentence_ids=None) -> KBest:
    """One :class:`~minismt.kbest.KBest` of per-sentence lists (None: an empty instance) over ``space``,
    whose sparse names it adds: the arrays concatenated, sparse indices renamed and sorted within
    each row, the dense block as it is (columns in ``space``'s dense order). No BLEU statistics."""
    empty = KBestRows(np.zeros(0, np.uint8), np.zeros(1, np.int64), np.zeros(0), np.zeros((0, space.n_dense)),
                      np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0))
    lists = [empty if rows is None else rows for rows in lists]
    counts = np.array([len(rows) for rows in lists], dtype=np.int64)
    text_base = np.cumsum([0] + [rows.text.shape[0] for rows in lists])
    text_offsets = np.concatenate([[0]] + [rows.text_offsets[1:] + base for rows, base in zip(lists, text_base)])
    nnz = np.concatenate([np.zeros(1, np.int64)] + [np.diff(rows.indptr) for rows in lists])
    indices = np.concatenate([np.zeros(0, np.int32)] + [
        np.array([space.add(name) for name in rows.names], dtype=np.int32)[rows.indices]
        for rows in lists if rows.names])
    values = np.concatenate([np.zeros(0)] + [rows.values for rows in lists])
    order = np.lexsort((indices, np.repeat(np.arange(nnz.shape[0] - 1), nnz[1:])))
    return KBest(space, np.concatenate([[0], np.cumsum(counts)]),
                 np.concatenate([rows.features for rows in lists] or [np.zeros((0, space.n_dense))]),
                 np.concatenate([np.zeros(0, np.uint8)] + [rows.text for rows in lists]), text_offsets,
                 np.cumsum(nnz), indices[order], values[order], None, sentence_ids)
