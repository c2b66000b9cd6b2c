"""Moses text phrase tables and lexicalised reordering tables: writers and readers.

Phrase table line (``train-model.perl`` steps 5-6: ``score`` twice, then ``consolidate``)::

    src ||| tgt ||| p(f|e) lex(f|e) p(e|f) lex(e|f) ||| alignment ||| c(e) c(f) c(f,e) ||| |||

with the alignment as ``i-j`` (0-based source, target position) in Moses' order (by target
position, then source position). Reordering table line (``lexical-reordering-score``,
``wbe-msd-bidirectional-fe``)::

    src ||| tgt ||| b-mono b-swap b-disc f-mono f-swap f-disc

Both are sorted as ``LC_ALL=C sort`` leaves them (by the bytes of ``src ||| tgt |||``), in
the same order. Numbers are written as C++ streams write them (``%g``, 6 significant
digits): the lexical weights and reordering probabilities are doubles, while
``consolidate`` holds the counts and divides them in single precision, so the counts, p(f|e)
and p(e|f) are printed from their ``float32`` value as Moses prints them (1/3 prints
``0.333333`` either way; a value within 6e-8 of a rounding boundary would not). Files ending
in ``.gz`` are gzipped at level 6, gzip's default (what Moses' ``gzip`` pipes produce).
"""

from __future__ import annotations

import math
import os
from array import array

import numpy as np

from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.extract.phrase_table import PhraseTable
from minismt.io import atomic_write, iter_lines

SEPARATOR = " ||| "
CHUNK_ROWS = 100_000


def format_g(values: np.ndarray) -> list[str]:
    """``%g`` (6 significant digits, as a C++ stream) of each value."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.shape[0] == 0:
        return []
    unique, inverse = np.unique(values, return_inverse=True)
    texts = np.array(["%g" % v for v in unique.tolist()], dtype=object)
    return texts[inverse.reshape(-1)].tolist()


class TokenTexts:
    """UTF-8 bytes of a token list, to turn rows of token ids into text with NumPy gathers."""

    def __init__(self, tokens: list[str]):
        encoded = [t.encode("utf-8") for t in tokens]
        self.data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        self.offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=self.offsets[1:])

    def rows(self, flat: np.ndarray, offsets: np.ndarray, lo: int, hi: int,
             lead_space: bool = False) -> list[str]:
        """Text of rows ``lo:hi`` (row k: tokens ``flat[offsets[k]:offsets[k+1]]``), tokens
        joined by spaces; with ``lead_space`` every token, the first too, has a space
        before it."""
        ids = flat[offsets[lo]:offsets[hi]].astype(np.int64)
        counts = np.diff(offsets[lo:hi + 1])
        n_tok = ids.shape[0]
        word_len = self.offsets[ids + 1] - self.offsets[ids]
        prefix = np.ones(n_tok, dtype=np.int64)
        if not lead_space:
            prefix[(offsets[lo:hi] - offsets[lo])[counts > 0]] = 0
        token_bytes = prefix + word_len
        token_row = np.repeat(np.arange(hi - lo, dtype=np.int64), counts)
        token_start = np.cumsum(token_bytes) - token_bytes + token_row  # one newline per row
        out = np.full(int(token_bytes.sum()) + (hi - lo), ord("\n"), dtype=np.uint8)
        out[token_start[prefix == 1]] = ord(" ")
        word_first = np.cumsum(word_len) - word_len
        position = np.arange(int(word_len.sum()), dtype=np.int64)
        out[np.repeat(token_start + prefix - word_first, word_len) + position] = \
            self.data[np.repeat(self.offsets[ids] - word_first, word_len) + position]
        return out.tobytes().decode("utf-8").split("\n")[:-1]


def _alignment_rows(table: PhraseTable, lo: int, hi: int) -> list[str]:
    """Alignment field of rows ``lo:hi``, each link with a space before it (`` 0-0 1-1``)."""
    links = table.align_links[table.align_offsets[lo]:table.align_offsets[hi]].astype(np.int64)
    codes = links[:, 0] * 65536 + links[:, 1]
    distinct, inverse = np.unique(codes, return_inverse=True)
    texts = TokenTexts([f"{c // 65536}-{c % 65536}" for c in distinct.tolist()])
    return texts.rows(inverse.reshape(-1), table.align_offsets[lo:hi + 1] - table.align_offsets[lo],
                      0, hi - lo, lead_space=True)


def _source_rows(table: PhraseTable, texts: TokenTexts, row_source: np.ndarray, lo: int,
                 hi: int) -> list[str]:
    """Source phrase text of rows ``lo:hi``."""
    first, last = int(row_source[lo]), int(row_source[hi - 1]) + 1
    sources = np.array(texts.rows(table.src_words, table.src_offsets, first, last), dtype=object)
    return sources[row_source[lo:hi] - first].tolist()


def write_moses_phrase_table(table: PhraseTable, path: str | os.PathLike) -> None:
    """Write ``table`` as a Moses text phrase table (atomically; gzip for ``.gz``)."""
    src_texts, tgt_texts = TokenTexts(table.src_vocab.words), TokenTexts(table.tgt_vocab.words)
    row_source = table.row_source
    with atomic_write(path, binary=True) as out:
        for lo in range(0, len(table), CHUNK_ROWS):
            hi = min(lo + CHUNK_ROWS, len(table))
            scores = table.scores[lo:hi]
            counts = table.counts[lo:hi]
            known = (~np.isnan(counts).any(axis=1)).tolist()
            c = format_g(np.where(np.isnan(counts), 0.0, counts).astype(np.float32))
            count_fields = [" ".join(c[3 * k:3 * k + 3]) if known[k] else ""
                            for k in range(hi - lo)]
            lines = [f"{s} ||| {t} ||| {a} {b} {d} {e} |||{al} ||| {n} ||| |||\n"
                     for s, t, a, b, d, e, al, n in zip(
                         _source_rows(table, src_texts, row_source, lo, hi),
                         tgt_texts.rows(table.tgt_words, table.tgt_offsets, lo, hi),
                         format_g(scores[:, 0].astype(np.float32)), format_g(scores[:, 1]),
                         format_g(scores[:, 2].astype(np.float32)), format_g(scores[:, 3]),
                         _alignment_rows(table, lo, hi), count_fields)]
            out.write("".join(lines).encode("utf-8"))


def write_moses_reordering_table(table: PhraseTable, path: str | os.PathLike) -> None:
    """Write the msd-bidirectional-fe reordering probabilities of ``table`` as Moses'
    ``reordering-table.wbe-msd-bidirectional-fe`` (same row order as the phrase table)."""
    if table.reordering is None:
        raise InputError("the phrase table has no reordering probabilities", path)
    src_texts, tgt_texts = TokenTexts(table.src_vocab.words), TokenTexts(table.tgt_vocab.words)
    row_source = table.row_source
    with atomic_write(path, binary=True) as out:
        for lo in range(0, len(table), CHUNK_ROWS):
            hi = min(lo + CHUNK_ROWS, len(table))
            v = format_g(table.reordering[lo:hi])
            values = [" ".join(v[6 * k:6 * k + 6]) for k in range(hi - lo)]
            lines = [f"{s} ||| {t} ||| {r}\n" for s, t, r in zip(
                _source_rows(table, src_texts, row_source, lo, hi),
                tgt_texts.rows(table.tgt_words, table.tgt_offsets, lo, hi), values)]
            out.write("".join(lines).encode("utf-8"))


def _floats(text: str, count: int | None, path, number: int, what: str) -> list[float]:
    tokens = text.split()
    if count is not None and len(tokens) != count:
        raise InputError(f"{len(tokens)} {what}", path, number, f"{count} {what}")
    try:
        values = [float(t) for t in tokens]
    except ValueError:
        raise InputError(f"{what} {text.strip()[:60]!r}", path, number, "numbers") from None
    if not all(math.isfinite(v) for v in values):
        raise InputError(f"{what} {text.strip()[:60]!r}", path, number, "finite numbers")
    return values


def read_moses_tables(phrase_table_path: str | os.PathLike,
                      reordering_path: str | os.PathLike | None = None) -> PhraseTable:
    """A :class:`PhraseTable` from a Moses text phrase table (and reordering table).

    The phrase table needs at least ``src ||| tgt ||| 4 scores``; the alignment and counts
    fields are read when present (counts are NaN otherwise); further fields are ignored.
    Rows are put into Moses' sorted order (a Moses-written file already is). Every phrase
    pair needs its line in the reordering table, which may hold further pairs (ignored).
    Malformed lines are an :class:`InputError` with file and line number.
    """
    src_vocab, tgt_vocab = Vocabulary(), Vocabulary()
    src_words, tgt_words = array("i"), array("i")
    src_offsets, tgt_offsets, align_offsets = array("q", [0]), array("q", [0]), array("q", [0])
    links = array("h")
    scores, counts = array("d"), array("d")
    keys: list[tuple[str, str]] = []
    for number, line in iter_lines(phrase_table_path):
        fields = line.split(SEPARATOR)
        if len(fields) < 3:
            raise InputError("not a phrase table line", phrase_table_path, number,
                             "'src ||| tgt ||| scores ||| alignment ||| counts'")
        src_tokens, tgt_tokens = fields[0].split(), fields[1].split()
        if not src_tokens or not tgt_tokens:
            raise InputError("empty phrase", phrase_table_path, number,
                             "a source and a target phrase")
        scores.extend(_floats(fields[2], 4, phrase_table_path, number,
                              "scores (p(f|e) lex(f|e) p(e|f) lex(e|f))"))
        for token in src_tokens:
            src_words.append(src_vocab.add(token))
        for token in tgt_tokens:
            tgt_words.append(tgt_vocab.add(token))
        src_offsets.append(len(src_words))
        tgt_offsets.append(len(tgt_words))
        if len(fields) > 3:
            for token in fields[3].split():
                left, dash, right = token.partition("-")
                if not (dash and left.isdigit() and right.isdigit()
                        and int(left) < len(src_tokens) and int(right) < len(tgt_tokens)):
                    raise InputError(f"alignment point {token[:40]!r}", phrase_table_path, number,
                                     "'i-j' inside the phrase pair")
                links.append(int(left))
                links.append(int(right))
        align_offsets.append(len(links) // 2)
        if len(fields) > 4 and fields[4].strip():
            counts.extend(_floats(fields[4], 3, phrase_table_path, number,
                                  "counts (c(e) c(f) c(f,e))"))
        else:
            counts.extend((math.nan, math.nan, math.nan))
        keys.append((fields[0].strip(), fields[1].strip()))
    n_rows = len(keys)
    reordering = None
    if reordering_path is not None:
        reordering = _read_reordering(reordering_path, keys)
    try:
        return PhraseTable.from_rows(
            src_vocab, tgt_vocab, np.frombuffer(src_words, dtype=np.int32),
            np.frombuffer(src_offsets, dtype=np.int64), np.frombuffer(tgt_words, dtype=np.int32),
            np.frombuffer(tgt_offsets, dtype=np.int64),
            np.frombuffer(scores, dtype=np.float64).reshape(n_rows, 4),
            np.frombuffer(counts, dtype=np.float64).reshape(n_rows, 3),
            np.frombuffer(links, dtype=np.int16).reshape(-1, 2),
            np.frombuffer(align_offsets, dtype=np.int64), reordering, path=phrase_table_path)
    except ValueError as err:
        if isinstance(err, InputError):
            raise
        raise InputError(str(err), phrase_table_path) from None


def _read_reordering(path, keys: list[tuple[str, str]]) -> np.ndarray:
    """Six reordering probabilities for each phrase pair in ``keys``."""
    n_rows = len(keys)
    values = np.full((n_rows, 6), np.nan)
    position: dict[tuple[str, str], int] | None = None
    row = 0
    for number, line in iter_lines(path):
        fields = line.split(SEPARATOR)
        if len(fields) != 3:
            raise InputError("not a reordering table line", path, number,
                             "'src ||| tgt ||| 6 probabilities'")
        key = (fields[0].strip(), fields[1].strip())
        numbers = _floats(fields[2], 6, path, number,
                          "probabilities (msd-bidirectional-fe: backward and forward mono swap disc)")
        if position is None and row < n_rows and keys[row] == key:
            values[row] = numbers
            row += 1
            continue
        if position is None:
            position = {k: i for i, k in enumerate(keys)}
        index = position.get(key)
        if index is not None:
            values[index] = numbers
    missing = np.flatnonzero(np.isnan(values[:, 0]))
    if missing.shape[0]:
        src, tgt = keys[int(missing[0])]
        raise InputError(f"no reordering probabilities for '{src} ||| {tgt}' "
                         f"(line {int(missing[0]) + 1} of the phrase table)", path,
                         expected="a line for every phrase pair")
    return values
