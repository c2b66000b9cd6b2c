"""The phrase table the decoder loads: phrase pairs, their four scores, word alignments and
msd-bidirectional-fe reordering probabilities, sorted and indexed by source phrase.

Binary form: one ``.npz`` written with ``np.savez`` and read with ``allow_pickle=False``:

==================== ============== ===================================================
key                  dtype, shape   meaning
==================== ============== ===================================================
format, version      str, int64     ``minismt-phrase-table``, 1
src_vocab_utf8       uint8[B]       source words, UTF-8, concatenated
src_vocab_offsets    int64[Vf+1]    word k is ``src_vocab_utf8[o[k]:o[k+1]]``
tgt_vocab_utf8/...   (same)         target words
src_words            int32[W]       distinct source phrases (word ids), concatenated,
src_offsets          int64[U+1]     in Moses' byte order
row_offsets          int64[U+1]     rows of source phrase u: ``row_offsets[u]:[u+1]``
tgt_words            int32[T]       target phrase of each row, concatenated
tgt_offsets          int64[P+1]
scores               float64[P, 4]  p(f|e), lex(f|e), p(e|f), lex(e|f) (probabilities)
counts               float64[P, 3]  c(e), c(f), c(f,e) (NaN when unknown)
align_links          int16[K, 2]    word alignment of each row: (source, target) positions
align_offsets        int64[P+1]
reordering           float64[P, 6]  optional: backward mono/swap/disc, forward mono/swap/disc
==================== ============== ===================================================

Rows are in Moses' order (source phrase, then target phrase, by the UTF-8 bytes of
``"src ||| tgt |||"``), so the source phrases are sorted and ``row_offsets`` is the CSR
index from a source phrase to all its translations. :meth:`PhraseTable.lookup` and the
decoder find a source phrase through a 64-bit hash index (:attr:`PhraseTable.index`).

Folder form (what ``minismt train`` writes; :meth:`PhraseTable.save` to a path without ``.npz``):
the same arrays as ``NAME.npy`` files, with the index (``index_hashes``, sorted, and
``index_order``, the source phrase of each) and ``table.json`` (format, version).  :meth:`load`
memory-maps them (copy-on-write): a decoder reads the pages of the phrases its input uses, not
the whole table, and processes decoding with the same model share those pages.

The table holds the four translation probabilities only, as modern Moses tables do: the
phrase penalty is a decoder feature (``PhrasePenalty``, constant per phrase pair), not a
table column.
"""

from __future__ import annotations

import os
import zipfile
import zlib

import numpy as np

from minismt.corpus import Vocabulary, array_to_words, words_to_array
from minismt.errors import InputError
from minismt.io import (atomic_write, load_arrays, read_folder_info, replaced_folder, save_arrays,
                        write_folder_info)
from minismt.extract import _kernels
from minismt.extract.phrases import byte_order_ids, byte_order_ranks, unique_spans

FORMAT = "minismt-phrase-table"
VERSION = 1
SCORE_NAMES = ("p(f|e)", "lex(f|e)", "p(e|f)", "lex(e|f)")
COUNT_NAMES = ("c(e)", "c(f)", "c(f,e)")
REORDERING_NAMES = ("backward-mono", "backward-swap", "backward-discontinuous",
                    "forward-mono", "forward-swap", "forward-discontinuous")


def take_ranges(flat: np.ndarray, offsets: np.ndarray, order: np.ndarray):
    """Ranges ``flat[offsets[k]:offsets[k+1]]`` for k in ``order``, concatenated, and their offsets
    (the work is in the ranges taken, not in the table's size)."""
    positions, taken_offsets = _kernels.row_positions(np.asarray(offsets, dtype=np.int64),
                                                      np.asarray(order, dtype=np.int64))
    return flat[positions], taken_offsets


def limit_rows(row_offsets: np.ndarray, p_e_given_f: np.ndarray, table_limit: int | None) -> np.ndarray:
    """Rows kept by a table limit, in increasing order: per source phrase (rows
    ``row_offsets[u]:row_offsets[u+1]``, sorted by target phrase) the ``table_limit`` rows
    with the highest p(e|f), ties to the earlier row (the target phrase first in byte order).
    None or 0 keeps all rows."""
    n_rows = int(row_offsets[-1])
    rows = np.arange(n_rows, dtype=np.int64)
    if not table_limit:
        return rows
    if table_limit < 0:
        raise ValueError("table_limit must be >= 0")
    sizes = np.diff(row_offsets)
    if sizes.shape[0] == 0 or sizes.max() <= table_limit:
        return rows
    source = np.repeat(np.arange(sizes.shape[0], dtype=np.int64), sizes)
    order = np.lexsort((rows, -p_e_given_f, source))
    rank = rows - row_offsets[:-1][source[order]]
    return np.sort(order[rank < table_limit])


class PhraseTable:
    """Phrase pairs with scores, alignments and reordering probabilities (see the module
    docstring for the arrays). Build one with :func:`minismt.extract.train_phrase_table`,
    :func:`minismt.extract.read_moses_tables`, :meth:`from_rows` or :meth:`load`."""

    def __init__(self, src_vocab: Vocabulary, tgt_vocab: Vocabulary, src_words: np.ndarray,
                 src_offsets: np.ndarray, row_offsets: np.ndarray, tgt_words: np.ndarray,
                 tgt_offsets: np.ndarray, scores: np.ndarray, counts: np.ndarray,
                 align_links: np.ndarray, align_offsets: np.ndarray,
                 reordering: np.ndarray | None = None, validate: bool = True,
                 index: tuple[np.ndarray, np.ndarray] | None = None):
        self.src_vocab = src_vocab
        self.tgt_vocab = tgt_vocab
        self.src_words = np.ascontiguousarray(src_words, dtype=np.int32)
        self.src_offsets = np.ascontiguousarray(src_offsets, dtype=np.int64)
        self.row_offsets = np.ascontiguousarray(row_offsets, dtype=np.int64)
        self.tgt_words = np.ascontiguousarray(tgt_words, dtype=np.int32)
        self.tgt_offsets = np.ascontiguousarray(tgt_offsets, dtype=np.int64)
        self.scores = np.ascontiguousarray(scores, dtype=np.float64)
        self.counts = np.ascontiguousarray(counts, dtype=np.float64)
        self.align_links = np.ascontiguousarray(align_links, dtype=np.int16).reshape(-1, 2)
        self.align_offsets = np.ascontiguousarray(align_offsets, dtype=np.int64)
        self.reordering = None if reordering is None else np.ascontiguousarray(
            reordering, dtype=np.float64)
        if validate:
            self._check()
        self._index = index

    @property
    def index(self) -> tuple[np.ndarray, np.ndarray]:
        """The source phrases by hash: the hashes sorted (:func:`~minismt.extract._kernels.source_hashes`)
        and the source phrase of each (ties in phrase order); built on first use unless loaded."""
        if self._index is None:
            hashes = _kernels.source_hashes(self.src_words, self.src_offsets)
            order = np.argsort(hashes, kind="stable")
            self._index = (hashes[order], order)
        return self._index

    def _check(self) -> None:
        """Consistency of the arrays (ValueError; readers turn it into InputError)."""
        n_rows = self.scores.shape[0]
        u = self.src_offsets.shape[0] - 1

        def offsets_ok(offsets, size, total):
            return (offsets.ndim == 1 and offsets.shape[0] == size + 1 and offsets[0] == 0
                    and offsets[-1] == total and bool(np.all(np.diff(offsets) >= 0)))

        problems = []
        if self.scores.shape != (n_rows, 4):
            problems.append("scores must be [P, 4]")
        if self.counts.shape != (n_rows, 3):
            problems.append("counts must be [P, 3]")
        if self.reordering is not None and self.reordering.shape != (n_rows, 6):
            problems.append("reordering must be [P, 6]")
        if not offsets_ok(self.src_offsets, u, self.src_words.shape[0]):
            problems.append("bad src_offsets")
        if not offsets_ok(self.row_offsets, u, n_rows):
            problems.append("bad row_offsets")
        if not offsets_ok(self.tgt_offsets, n_rows, self.tgt_words.shape[0]):
            problems.append("bad tgt_offsets")
        if not offsets_ok(self.align_offsets, n_rows, self.align_links.shape[0]):
            problems.append("bad align_offsets")
        for name, words, vocab in (("source", self.src_words, self.src_vocab),
                                   ("target", self.tgt_words, self.tgt_vocab)):
            if words.shape[0] and (words.min() < 0 or words.max() >= len(vocab)):
                problems.append(f"{name} word ids outside the vocabulary")
        if problems:
            raise ValueError("; ".join(problems))

    # ---- size and access ---------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.scores.shape[0])

    @property
    def n_sources(self) -> int:
        """Number of distinct source phrases."""
        return int(self.src_offsets.shape[0] - 1)

    @property
    def row_source(self) -> np.ndarray:
        """The source phrase index of each row."""
        return np.repeat(np.arange(self.n_sources, dtype=np.int64), np.diff(self.row_offsets))

    def source_ids(self, source: int) -> np.ndarray:
        return self.src_words[self.src_offsets[source]:self.src_offsets[source + 1]]

    def target_ids(self, row: int) -> np.ndarray:
        return self.tgt_words[self.tgt_offsets[row]:self.tgt_offsets[row + 1]]

    def alignment(self, row: int) -> np.ndarray:
        """The word alignment of a row, ``int16[k, 2]`` (source, target) positions."""
        return self.align_links[self.align_offsets[row]:self.align_offsets[row + 1]]

    def phrase_strings(self, row: int) -> tuple[str, str]:
        """Source and target phrase of a row as text."""
        source = int(np.searchsorted(self.row_offsets, row, side="right") - 1)
        return (" ".join(self.src_vocab.decode(self.source_ids(source).tolist())),
                " ".join(self.tgt_vocab.decode(self.target_ids(row).tolist())))

    def find_source(self, src_word_ids) -> int:
        """Index of the source phrase with these word ids, or -1."""
        query = np.ascontiguousarray(src_word_ids, dtype=np.int32).reshape(-1)
        key = _kernels.source_hashes(query, np.array([0, query.shape[0]], dtype=np.int64))[0]
        hashes, order = self.index
        pos = int(np.searchsorted(hashes, key))
        while pos < hashes.shape[0] and hashes[pos] == key:
            source = int(order[pos])
            if np.array_equal(self.source_ids(source), query):
                return source
            pos += 1
        return -1

    def lookup(self, src_word_ids) -> np.ndarray:
        """Rows (int64, in table order) translating the source phrase with these word ids;
        empty when the phrase is not in the table."""
        source = self.find_source(src_word_ids)
        if source < 0:
            return np.zeros(0, dtype=np.int64)
        return np.arange(self.row_offsets[source], self.row_offsets[source + 1], dtype=np.int64)

    # ---- building ----------------------------------------------------------------------
    @classmethod
    def from_rows(cls, src_vocab: Vocabulary, tgt_vocab: Vocabulary, src_words, src_offsets,
                  tgt_words, tgt_offsets, scores, counts, align_links, align_offsets,
                  reordering=None, path: str | os.PathLike | None = None) -> "PhraseTable":
        """A table from rows in any order (one source and target phrase per row, flat ids
        with offsets): sorts them into Moses' order and groups them by source phrase.

        A phrase pair listed twice is an :class:`InputError` naming both rows (as line
        numbers of ``path`` when given: row k is line k+1).
        """
        src_words = np.ascontiguousarray(src_words, dtype=np.int32)
        tgt_words = np.ascontiguousarray(tgt_words, dtype=np.int32)
        src_offsets = np.asarray(src_offsets, dtype=np.int64)
        tgt_offsets = np.asarray(tgt_offsets, dtype=np.int64)
        n_rows = src_offsets.shape[0] - 1
        rows = np.arange(n_rows, dtype=np.int64)
        zeros = np.zeros(n_rows, dtype=np.int64)
        src_len = np.diff(src_offsets)
        tgt_len = np.diff(tgt_offsets)
        if n_rows and (src_len.min() < 1 or tgt_len.min() < 1):
            bad = int(np.flatnonzero((src_len < 1) | (tgt_len < 1))[0])
            raise InputError("empty phrase", path, bad + 1, "a source and a target phrase")
        src_inverse, src_rep = unique_spans(src_words, src_offsets, rows, zeros, src_len)
        tgt_inverse, tgt_rep = unique_spans(tgt_words, tgt_offsets, rows, zeros, tgt_len)
        src_ranks, src_end = byte_order_ranks(src_vocab.words)
        tgt_ranks, tgt_end = byte_order_ranks(tgt_vocab.words)
        src_id = byte_order_ids(src_words, src_offsets, rows, zeros, src_len, src_rep,
                                src_ranks, src_end)[src_inverse]
        tgt_id = byte_order_ids(tgt_words, tgt_offsets, rows, zeros, tgt_len, tgt_rep,
                                tgt_ranks, tgt_end)[tgt_inverse]
        order = np.lexsort((tgt_id, src_id))
        s_sorted, t_sorted = src_id[order], tgt_id[order]
        same = np.flatnonzero((s_sorted[1:] == s_sorted[:-1]) & (t_sorted[1:] == t_sorted[:-1]))
        if same.shape[0]:
            first, second = sorted((int(order[same[0]]), int(order[same[0] + 1])))
            src_text = " ".join(src_vocab.decode(src_words[src_offsets[first]:src_offsets[first + 1]].tolist()))
            tgt_text = " ".join(tgt_vocab.decode(tgt_words[tgt_offsets[first]:tgt_offsets[first + 1]].tolist()))
            where = f"line {first + 1}" if path is not None else f"row {first}"
            raise InputError(f"phrase pair '{src_text} ||| {tgt_text}' listed again (first at {where})",
                             path, second + 1 if path is not None else None,
                             "each phrase pair once")
        new_source = np.ones(n_rows, dtype=bool)
        new_source[1:] = s_sorted[1:] != s_sorted[:-1]
        source_rows = order[new_source]
        row_offsets = np.append(np.flatnonzero(new_source), n_rows).astype(np.int64)
        unique_src_words, unique_src_offsets = take_ranges(src_words, src_offsets, source_rows)
        row_tgt_words, row_tgt_offsets = take_ranges(tgt_words, tgt_offsets, order)
        links, link_offsets = take_ranges(np.asarray(align_links).reshape(-1, 2),
                                          np.asarray(align_offsets, dtype=np.int64), order)
        return cls(src_vocab, tgt_vocab, unique_src_words, unique_src_offsets, row_offsets,
                   row_tgt_words, row_tgt_offsets, np.asarray(scores)[order],
                   np.asarray(counts)[order], links, link_offsets,
                   None if reordering is None else np.asarray(reordering)[order])

    def take(self, rows: np.ndarray) -> "PhraseTable":
        """The table of the given rows (increasing row indices keep Moses' order)."""
        rows = np.asarray(rows, dtype=np.int64)
        source = self.row_source[rows]
        keep_source = np.zeros(self.n_sources, dtype=bool)
        keep_source[source] = True
        kept_sources = np.flatnonzero(keep_source)
        per_source = np.bincount(source, minlength=self.n_sources)[kept_sources]
        row_offsets = np.zeros(kept_sources.shape[0] + 1, dtype=np.int64)
        np.cumsum(per_source, out=row_offsets[1:])
        src_words, src_offsets = take_ranges(self.src_words, self.src_offsets, kept_sources)
        tgt_words, tgt_offsets = take_ranges(self.tgt_words, self.tgt_offsets, rows)
        links, link_offsets = take_ranges(self.align_links, self.align_offsets, rows)
        return PhraseTable(self.src_vocab, self.tgt_vocab, src_words, src_offsets, row_offsets,
                           tgt_words, tgt_offsets, self.scores[rows], self.counts[rows], links,
                           link_offsets, None if self.reordering is None else self.reordering[rows])

    def limit(self, table_limit: int | None) -> "PhraseTable":
        """Keep at most ``table_limit`` translations per source phrase (see :func:`limit_rows`);
        None or 0 keeps all."""
        keep = limit_rows(self.row_offsets, self.scores[:, 2], table_limit)
        if keep.shape[0] == len(self):
            return self
        return self.take(keep)

    # ---- binary form -------------------------------------------------------------------
    def _arrays(self) -> dict:
        src_utf8, src_vocab_offsets = words_to_array(self.src_vocab.words)
        tgt_utf8, tgt_vocab_offsets = words_to_array(self.tgt_vocab.words)
        arrays = dict(src_vocab_utf8=src_utf8, src_vocab_offsets=src_vocab_offsets,
                      tgt_vocab_utf8=tgt_utf8, tgt_vocab_offsets=tgt_vocab_offsets,
                      src_words=self.src_words, src_offsets=self.src_offsets,
                      row_offsets=self.row_offsets, tgt_words=self.tgt_words,
                      tgt_offsets=self.tgt_offsets, scores=self.scores, counts=self.counts,
                      align_links=self.align_links, align_offsets=self.align_offsets)
        if self.reordering is not None:
            arrays["reordering"] = self.reordering
        return arrays

    def save(self, path: str | os.PathLike) -> None:
        """Write the table atomically: the ``.npz`` of the module docstring for a path ending in ``.npz``,
        else the folder form (the arrays as ``.npy`` files with the index, built by the folder's
        rename into place)."""
        path = os.path.abspath(os.fspath(path))
        if path.endswith(".npz"):
            arrays = dict(format=np.array(FORMAT), version=np.array(VERSION, dtype=np.int64), **self._arrays())
            with atomic_write(path, compress=False, binary=True) as handle:
                np.savez(handle, **arrays)
            return
        hashes, order = self.index
        with replaced_folder(path) as partial:
            save_arrays(partial, dict(self._arrays(), index_hashes=hashes, index_order=order))
            write_folder_info(os.path.join(partial, "table.json"), {"format": FORMAT, "version": VERSION,
                                                                    "rows": len(self), "sources": self.n_sources})

    @classmethod
    def load(cls, path: str | os.PathLike) -> "PhraseTable":
        """Read a table written by :meth:`save` (a folder is memory-mapped; its arrays are checked by
        their sizes, not read); anything else is an :class:`InputError`."""
        if os.path.isdir(path):
            return cls._load_folder(os.fspath(path))
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
            if str(arrays.get("format", "")) != FORMAT:
                raise InputError("not a phrase table saved by minismt", path,
                                 expected=f"an .npz with format {FORMAT!r}")
            if int(arrays["version"]) != VERSION:
                raise InputError(f"phrase table format version {int(arrays['version'])}", path,
                                 expected=f"version {VERSION}")
            return cls._of(arrays, validate=True)
        except InputError:
            raise
        except (OSError, EOFError, ValueError, KeyError, TypeError, IndexError,
                UnicodeDecodeError, zipfile.BadZipFile, zlib.error) as err:
            raise InputError(f"not a phrase table saved by minismt ({type(err).__name__}: {err})",
                             path) from None

    @classmethod
    def _of(cls, arrays: dict, validate: bool, index=None) -> "PhraseTable":
        src_vocab = Vocabulary(array_to_words(arrays["src_vocab_utf8"], arrays["src_vocab_offsets"]))
        tgt_vocab = Vocabulary(array_to_words(arrays["tgt_vocab_utf8"], arrays["tgt_vocab_offsets"]))
        return cls(src_vocab, tgt_vocab, arrays["src_words"], arrays["src_offsets"], arrays["row_offsets"],
                   arrays["tgt_words"], arrays["tgt_offsets"], arrays["scores"], arrays["counts"],
                   arrays["align_links"], arrays["align_offsets"], arrays.get("reordering"),
                   validate=validate, index=index)

    @classmethod
    def _load_folder(cls, path: str) -> "PhraseTable":
        try:
            info = read_folder_info(os.path.join(path, "table.json"), FORMAT, VERSION, "phrase table saved by minismt")
            arrays = load_arrays(path, [name[:-4] for name in os.listdir(path) if name.endswith(".npy")])
            rows, sources = int(info["rows"]), int(info["sources"])
            sizes = {"scores": (rows, 4), "counts": (rows, 3), "row_offsets": (sources + 1,),
                     "src_offsets": (sources + 1,), "tgt_offsets": (rows + 1,), "align_offsets": (rows + 1,),
                     "index_hashes": (sources,), "index_order": (sources,)}
            if "reordering" in arrays:
                sizes["reordering"] = (rows, 6)
            wrong = [name for name, shape in sizes.items() if arrays[name].shape != shape]
            ends = {"src_offsets": "src_words", "tgt_offsets": "tgt_words", "align_offsets": "align_links"}
            wrong += [name for name, flat in ends.items() if int(arrays[name][-1]) != arrays[flat].shape[0]]
            if wrong:
                raise InputError(f"phrase table arrays of the wrong size: {', '.join(wrong)}", path)
            return cls._of(arrays, validate=False, index=(arrays["index_hashes"], arrays["index_order"]))
        except InputError:
            raise
        except (OSError, ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as err:
            raise InputError(f"not a phrase table saved by minismt ({type(err).__name__}: {err})",
                             path) from None

