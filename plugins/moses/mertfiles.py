"""The files of Moses' tuning programs: extractor's features.dat and scores.dat, mert's init.opt
and kbmira's weights file.

``extractor`` turns each n-best list into two files of per-sentence blocks::

    FEATURES_TXT_BEGIN_0 <sid> <nhyps> <ndense> <name_1> ... <name_ndense>
    <v_1> ... <v_ndense> [<sparse>=<value> ...]
    FEATURES_TXT_END_0

    SCORES_TXT_BEGIN_0 <sid> <nhyps> <nstats> <scorer>
    <s_1> ... <s_nstats>
    SCORES_TXT_END_0

Every number is followed by a space, as Moses writes them (C++ default float
format, ``%g``), and so is the last name of a features header; both files (text mode)
are read and written byte-exactly. mert/kbmira/pro read the files of all tuning
iterations together; :func:`read_extractor_files` does the same and returns a KBest.

mert's ``init.opt`` (:func:`read_init_opt`) holds the start weights, one per dense
feature, optionally followed by the min and max lines of the random restarts. kbmira's
weights file (``kbmira -o``; :func:`write_kbmira_weights`, :func:`read_kbmira_weights`)
holds ``F<i> value`` for dense feature ``i``, then ``name value`` for sparse features.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from minismt.errors import InputError
from minismt.features import FeatureSpace, format_weight, parse_float
from minismt.io import atomic_write, iter_lines
from minismt.kbest import KBest, KBestBuilder, check_sentence_id
from minismt.metrics import N_STATS
from plugins.moses.nbest import (dense_columns, format_number, parse_index,
                                 sparse_arrays)

FEATURES_BEGIN = "FEATURES_TXT_BEGIN_0"
FEATURES_END = "FEATURES_TXT_END_0"
SCORES_BEGIN = "SCORES_TXT_BEGIN_0"
SCORES_END = "SCORES_TXT_END_0"

KBMIRA_DENSE_NAME = re.compile(r"F([0-9]+)")
"""Name of dense feature ``i`` in a kbmira weights file, ``F<i>``; every other name is sparse."""

SPARSE_WEIGHT_THRESHOLD = 1e-8
"""Sparse weights with ``|w|`` at most this are left out of a kbmira weights file (as Moses)."""


@dataclass
class FeaturesBlock:
    """The hypotheses of one sentence in features.dat.

    ``dense`` is ``float64[nhyps, len(names)]``; ``sparse[k]`` lists the
    ``(name, value)`` pairs of hypothesis k in file order; ``line`` is the line
    number of the header (hypothesis k is on line ``line + 1 + k``).
    """

    sentence: int
    names: list[str]
    dense: np.ndarray
    sparse: list[list[tuple[str, float]]]
    line: int = 0

    def __len__(self) -> int:
        return self.dense.shape[0]


@dataclass
class ScoresBlock:
    """The metric statistics of one sentence in scores.dat: ``stats`` is ``float64[nhyps, nstats]``."""

    sentence: int
    scorer: str
    stats: np.ndarray
    line: int = 0

    def __len__(self) -> int:
        return self.stats.shape[0]


def _header(tokens: list[str], tag: str, path, line: int) -> tuple[int, int, int]:
    """Sentence id, hypothesis count and value count of a block header."""
    if len(tokens) < 4:
        raise InputError(f"block header with {len(tokens)} fields", path, line,
                         f"'{tag} <sentence> <hypotheses> <count> ...'")
    sentence = parse_index(tokens[1], path, line, "a sentence id in the block header")
    count = parse_index(tokens[2], path, line, "the number of hypotheses in the block header")
    width = parse_index(tokens[3], path, line, "the number of values in the block header")
    return sentence, count, width


def _block_rows(lines, count: int, end_tag: str, path, header_line: int):
    """Yield ``(line_number, text)`` of the ``count`` rows of a block, then check its END tag."""
    number = header_line
    for k in range(count):
        item = next(lines, None)
        if item is None:
            raise InputError(f"file ends after {k} of {count} hypothesis lines", path, number + 1,
                             f"{count} lines and {end_tag}")
        number, text = item
        if text.strip() == end_tag:
            raise InputError(f"{end_tag} after {k} of {count} hypothesis lines", path, number,
                             f"{count} lines as the header at line {header_line} says")
        yield number, text
    item = next(lines, None)
    if item is None:
        raise InputError(f"file ends without {end_tag}", path, number + 1, end_tag)
    number, text = item
    if text.strip() != end_tag:
        raise InputError(f"{text[:40]!r} after {count} hypothesis lines", path, number,
                         f"{end_tag} (the header at line {header_line} says {count} lines)")


def read_features_dat(path: str | os.PathLike) -> Iterator[FeaturesBlock]:
    """Yield the blocks of a features.dat file (plain or gzip), one at a time.

    Tokens of a hypothesis line are split at their last ``=`` as in Moses:
    ``name=value`` is sparse, a bare number dense; every line must have the
    header's number of dense values. Blank lines between blocks are skipped.
    """
    lines = iter_lines(path)
    for number, text in lines:
        tokens = text.split()
        if not tokens:
            continue
        if tokens[0] != FEATURES_BEGIN:
            raise InputError(f"{tokens[0][:40]!r} where a block starts", path, number, FEATURES_BEGIN)
        sentence, count, width = _header(tokens, FEATURES_BEGIN, path, number)
        names = tokens[4:]
        if len(names) != width:
            raise InputError(f"{len(names)} feature names for {width} dense features", path,
                             number, f"{width} names")
        if len(set(names)) != len(names):
            raise InputError("a dense feature name is given twice", path, number, "distinct names")
        rows: list[list[float]] = []
        sparse: list[list[tuple[str, float]]] = []
        for row_number, row_text in _block_rows(lines, count, FEATURES_END, path, number):
            dense_row: list[float] = []
            sparse_row: list[tuple[str, float]] = []
            seen: set[str] = set()
            for token in row_text.split():
                name, equals, value = token.rpartition("=")
                if not equals:
                    dense_row.append(parse_float(token, path, row_number, "a dense feature value"))
                    continue
                if not name:
                    raise InputError(f"sparse feature {token[:40]!r} without a name", path,
                                     row_number, "'name=value'")
                if name in seen:
                    raise InputError(f"sparse feature {name!r} given twice", path, row_number,
                                     "each name once per line")
                seen.add(name)
                sparse_row.append((name, parse_float(value, path, row_number,
                                                      f"the value of sparse feature {name}")))
            if len(dense_row) != width:
                raise InputError(f"{len(dense_row)} dense values", path, row_number,
                                 f"{width} as in the block header at line {number}")
            rows.append(dense_row)
            sparse.append(sparse_row)
        dense = np.array(rows, dtype=np.float64).reshape(len(rows), width)
        yield FeaturesBlock(sentence, names, dense, sparse, number)


def read_scores_dat(path: str | os.PathLike) -> Iterator[ScoresBlock]:
    """Yield the blocks of a scores.dat file (plain or gzip), one at a time.

    A BLEU block must hold 9 statistics per line, non-negative integers (in the
    layout of :mod:`minismt.metrics.bleu`); other scorers are read as finite numbers.
    """
    lines = iter_lines(path)
    for number, text in lines:
        tokens = text.split()
        if not tokens:
            continue
        if tokens[0] != SCORES_BEGIN:
            raise InputError(f"{tokens[0][:40]!r} where a block starts", path, number, SCORES_BEGIN)
        sentence, count, width = _header(tokens, SCORES_BEGIN, path, number)
        if len(tokens) != 5:
            raise InputError(f"block header with {len(tokens)} fields", path, number,
                             f"'{SCORES_BEGIN} <sentence> <hypotheses> <count> <scorer>'")
        scorer = tokens[4]
        bleu = scorer == "BLEU"
        if bleu and width != N_STATS:
            raise InputError(f"BLEU block with {width} statistics", path, number, f"{N_STATS}")
        rows: list[list[float]] = []
        for row_number, row_text in _block_rows(lines, count, SCORES_END, path, number):
            row = [parse_float(t, path, row_number, "a statistic") for t in row_text.split()]
            if len(row) != width:
                raise InputError(f"{len(row)} statistics", path, row_number,
                                 f"{width} as in the block header at line {number}")
            if bleu and any(v < 0 or v != int(v) or v >= 2 ** 31 for v in row):
                raise InputError("BLEU statistics must be counts", path, row_number,
                                 "non-negative integers")
            rows.append(row)
        stats = np.array(rows, dtype=np.float64).reshape(len(rows), width)
        yield ScoresBlock(sentence, scorer, stats, number)


def _format_row(values: Iterable[float]) -> str:
    return "".join(format_number(v) + " " for v in values)


def write_features_dat(path: str | os.PathLike, blocks: Iterable[FeaturesBlock]) -> None:
    """Write features.dat blocks as Moses' extractor does (atomic; gzip for ``.gz``)."""
    with atomic_write(path) as out:
        for block in blocks:
            if block.dense.shape != (len(block.sparse), len(block.names)):
                raise InputError(f"features block of sentence {block.sentence}: dense values of shape "
                                 f"{block.dense.shape} for {len(block.sparse)} hypotheses",
                                 expected=f"({len(block.sparse)}, {len(block.names)})")
            out.write(f"{FEATURES_BEGIN} {block.sentence} {len(block.sparse)} {len(block.names)} "
                      + "".join(name + " " for name in block.names) + "\n")
            for dense_row, sparse_row in zip(block.dense.tolist(), block.sparse):
                out.write(_format_row(dense_row)
                          + "".join(f"{name}={format_number(value)} " for name, value in sparse_row)
                          + "\n")
            out.write(FEATURES_END + "\n")


def write_scores_dat(path: str | os.PathLike, blocks: Iterable[ScoresBlock]) -> None:
    """Write scores.dat blocks as Moses' extractor does (atomic; gzip for ``.gz``)."""
    with atomic_write(path) as out:
        for block in blocks:
            stats = np.asarray(block.stats, dtype=np.float64)
            if stats.ndim != 2:
                raise InputError(f"scores block of sentence {block.sentence}: statistics of shape "
                                 f"{stats.shape}", expected="(hypotheses, statistics)")
            out.write(f"{SCORES_BEGIN} {block.sentence} {stats.shape[0]} {stats.shape[1]} "
                      f"{block.scorer}\n")
            for row in stats.tolist():
                out.write(_format_row(row) + "\n")
            out.write(SCORES_END + "\n")


def _pairs(features_path, scores_path) -> Iterator[tuple[FeaturesBlock, ScoresBlock]]:
    """The blocks of one features.dat/scores.dat pair, checked against each other."""
    features = read_features_dat(features_path)
    scores = read_scores_dat(scores_path)
    while True:
        fblock = next(features, None)
        sblock = next(scores, None)
        if fblock is None and sblock is None:
            return
        if fblock is None:
            raise InputError(f"block of sentence {sblock.sentence} has no features block",
                             scores_path, sblock.line, f"as many blocks as {os.fspath(features_path)}")
        if sblock is None:
            raise InputError(f"block of sentence {fblock.sentence} has no scores block",
                             features_path, fblock.line, f"as many blocks as {os.fspath(scores_path)}")
        if sblock.sentence != fblock.sentence or len(sblock) != len(fblock):
            raise InputError(f"block of sentence {sblock.sentence} with {len(sblock)} hypotheses",
                             scores_path, sblock.line,
                             f"sentence {fblock.sentence} with {len(fblock)} hypotheses as "
                             f"{os.fspath(features_path)}:{fblock.line}")
        if sblock.scorer != "BLEU":
            raise InputError(f"scorer {sblock.scorer!r}", scores_path, sblock.line, "BLEU")
        yield fblock, sblock


def read_extractor_files(feature_files: Sequence, score_files: Sequence,
                         space: FeatureSpace | None = None) -> KBest:
    """A :class:`KBest` with BLEU statistics from features.dat/scores.dat pairs (one per iteration).

    Blocks of the same sentence id are concatenated in the order of the files
    (and of the blocks within a file), as mert/kbmira/pro merge them; no
    duplicate is removed. The files hold no hypothesis strings, so every text
    is empty. ``space`` behaves as in :func:`plugins.moses.nbest.read_nbest`:
    without it, the dense names of the first block; every block must have the
    same dense names as the first one.
    """
    if len(feature_files) != len(score_files):
        raise InputError(f"{len(feature_files)} features files and {len(score_files)} scores files",
                         expected="one scores file per features file")
    parts: dict[int, list[tuple[np.ndarray, list, np.ndarray, str, int]]] = {}
    first_names: list[str] | None = None
    columns = None
    for features_path, scores_path in zip(feature_files, score_files):
        for fblock, sblock in _pairs(features_path, scores_path):
            if first_names is None:
                first_names = fblock.names
                if space is None:
                    space = FeatureSpace(first_names)
                columns = dense_columns(first_names, space, features_path, fblock.line)
            elif fblock.names != first_names:
                raise InputError("dense feature names differ from the first block", features_path,
                                 fblock.line, " ".join(first_names))
            check_sentence_id(fblock.sentence, -1, None, features_path, fblock.line)
            dense = fblock.dense
            if columns is not None:
                dense = np.zeros((len(fblock), space.n_dense))
                dense[:, columns] = fblock.dense
            parts.setdefault(fblock.sentence, []).append(
                (dense, fblock.sparse, sblock.stats.astype(np.int32), os.fspath(features_path),
                 fblock.line))
    builder = KBestBuilder(space if space is not None else FeatureSpace())
    for sentence in sorted(parts):
        for dense, sparse, stats, path, line in parts[sentence]:
            for k, (row, pairs) in enumerate(zip(dense, sparse)):
                indices, values = sparse_arrays(dict(pairs), space, path, line + 1 + k)
                builder.add(sentence, "", row, indices, values, stats[k])
    return builder.build()


# ---- mert's init.opt ---------------------------------------------------------------------
def read_init_opt(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Moses' ``init.opt``: start weights, then optionally the min and max lines of random restarts.

    Each non-blank line holds one value per dense feature, separated by
    whitespace. Returns ``(start, min, max)``; ``min`` and ``max`` are
    ``None`` when the file has the start line only.
    """
    rows: list[tuple[int, np.ndarray]] = []
    for number, text in iter_lines(path):
        tokens = text.split()
        if not tokens:
            continue
        rows.append((number, np.array([parse_float(t, path, number, "a weight") for t in tokens])))
    if len(rows) not in (1, 3):
        raise InputError(f"{len(rows)} non-blank lines", path, rows[-1][0] if rows else None,
                         "the start weights, optionally followed by a min and a max line")
    width = rows[0][1].shape[0]
    for number, values in rows[1:]:
        if values.shape[0] != width:
            raise InputError(f"{values.shape[0]} values", path, number,
                             f"{width} as in the start line")
    if len(rows) == 1:
        return rows[0][1], None, None
    low, high = rows[1][1], rows[2][1]
    if np.any(low > high):
        column = int(np.argmax(low > high))
        raise InputError(f"min {low[column]} above max {high[column]} in column {column + 1}",
                         path, rows[1][0], "min <= max")
    return rows[0][1], low, high


# ---- kbmira's weights file ---------------------------------------------------------------
def name_value_lines(path: str | os.PathLike, expected: str) -> Iterator[tuple[int, str, float]]:
    """``(line number, name, weight)`` of each ``name value`` line of a weights file; blank lines skipped.

    ``expected`` says what a line holds, for the error on a line with other than two fields.
    """
    for number, text in iter_lines(path):
        fields = text.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise InputError(f"{len(fields)} fields", path, number, expected)
        yield number, fields[0], parse_float(fields[1], path, number, "a weight")


def write_kbmira_weights(path: str | os.PathLike, kbest_space: FeatureSpace, weights) -> None:
    """Write :func:`format_kbmira_weights` to ``path``, atomically."""
    text = format_kbmira_weights(kbest_space, weights, path)
    with atomic_write(path) as out:
        out.write(text)


def format_kbmira_weights(kbest_space: FeatureSpace, weights, path=None) -> str:
    """Weights as Moses' kbmira writes them: ``F<i> value`` per dense feature, then sparse ``name value``.

    ``weights`` is an array over ``kbest_space`` (a shorter one is padded with
    zeros) or a ``{name: weight}`` dict of known names. Sparse weights with
    ``|w| <= 1e-8`` are left out, as Moses does. Values are written with the
    shortest text that reads back to the same float (Moses prints 6 significant
    digits; both read the same way). ``path`` only names the file in errors.
    """
    if isinstance(weights, Mapping):
        w = kbest_space.weights(weights, grow=False)
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1 or not kbest_space.n_dense <= w.shape[0] <= len(kbest_space):
            raise InputError(f"weight vector of shape {w.shape}",
                             expected=f"between {kbest_space.n_dense} and {len(kbest_space)} weights")
    if not np.all(np.isfinite(w)):
        raise InputError("weights contain NaN or inf", path, expected="finite weights")
    lines = [f"F{i} {format_weight(w[i])}" for i in range(kbest_space.n_dense)]
    for index in range(kbest_space.n_dense, w.shape[0]):
        if abs(w[index]) > SPARSE_WEIGHT_THRESHOLD:
            name = kbest_space.name(index)
            if KBMIRA_DENSE_NAME.fullmatch(name):
                raise InputError(f"sparse feature name {name!r} would read back as a dense index",
                                 path, expected="sparse names not of the form F<number>")
            lines.append(f"{name} {format_weight(w[index])}")
    return "".join(line + "\n" for line in lines)


def read_kbmira_weights(path: str | os.PathLike, dense_names: Sequence[str]) -> dict[str, float]:
    """``{name: weight}`` from a kbmira weights file: ``F<i>`` is ``dense_names[i]``, other names sparse.

    Every dense index must be given exactly once; blank lines are skipped.
    ``dense_names`` may also be a :class:`FeatureSpace` (its dense names).
    """
    if isinstance(dense_names, FeatureSpace):
        dense_names = dense_names.dense_names
    dense_names = list(dense_names)
    dense: dict[int, float] = {}
    sparse: dict[str, float] = {}
    for number, name, value in name_value_lines(path, "'F<index> value' or 'name value'"):
        match = KBMIRA_DENSE_NAME.fullmatch(name)
        if match:
            index = int(match.group(1))
            if index >= len(dense_names):
                raise InputError(f"dense index {name}", path, number,
                                 f"F0 .. F{len(dense_names) - 1} ({len(dense_names)} dense features)")
            if index in dense:
                raise InputError(f"{name} given twice", path, number, "each dense index once")
            dense[index] = value
        else:
            if name in sparse or name in dense_names:
                raise InputError(f"feature {name!r} given twice or as a sparse name of a dense feature",
                                 path, number, "each sparse name once")
            sparse[name] = value
    missing = [f"F{i}" for i in range(len(dense_names)) if i not in dense]
    if missing:
        raise InputError(f"no weight for {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}",
                         path, expected=f"F0 .. F{len(dense_names) - 1}")
    out = {dense_names[i]: dense[i] for i in range(len(dense_names))}
    out.update(sparse)
    return out
