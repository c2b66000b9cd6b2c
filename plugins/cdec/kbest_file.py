"""cdec k-best lists (``cdec -k N [-r]``): streaming reader, KBest reader, writers.

One hypothesis per line::

    sent_id ||| translation ||| Name=value Name=value ... ||| score

cdec prints the features of each line in arbitrary (sparse-vector) order with
6 significant digits, so they are parsed as a dict; the score is w . f with the
decoder's weights. The writers print names sorted and values with ``%g``
(6 significant digits), as cdec does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

import numpy as np

from minismt.errors import InputError
from minismt.features import FeatureSpace, parse_float
from minismt.io import atomic_write, iter_lines
from minismt.kbest import KBest, KBestBuilder, check_sentence_id

SEPARATOR = "|||"
LINE_FORMAT = "'sent_id ||| translation ||| Name=value ... ||| score'"
MAX_ID_DIGITS = 18
"""Sentence ids longer than this cannot be int64 and are rejected."""


@dataclass(slots=True)
class CdecEntry:
    """One k-best line: sentence id, translation, ``{name: value}`` features, score.

    ``line`` is the 1-based line number in the file read (0 for entries made in code).
    """

    sentence: int
    text: str
    features: dict[str, float]
    score: float
    line: int = 0


def parse_kbest_line(text: str, path=None, line: int | None = None) -> CdecEntry:
    """Parse one k-best line; any malformation is an :class:`InputError` naming path and line."""
    fields = text.split(SEPARATOR)
    if len(fields) != 4:
        raise InputError(f"{len(fields) - 1} '|||' separators", path, line, LINE_FORMAT)
    id_field, translation, feature_field, score_field = fields
    sentence = _parse_sentence_id(id_field.strip(), path, line)
    features: dict[str, float] = {}
    for token in feature_field.split():
        name, eq, value = token.rpartition("=")
        if not eq:
            raise InputError(f"feature {token[:40]!r} has no '='", path, line, "Name=value")
        if not name:
            raise InputError(f"feature {token[:40]!r} has an empty name", path, line, "Name=value")
        if name in features:
            raise InputError(f"feature {name[:40]!r} given twice", path, line, "each name once per line")
        features[name] = parse_float(value, path, line, f"the value of feature {name[:40]!r}")
    score = parse_float(score_field.strip(), path, line, "the model score")
    return CdecEntry(sentence, translation.strip(), features, score, line or 0)


def _parse_sentence_id(token: str, path, line) -> int:
    if not (token.isascii() and token.isdigit()) or len(token) > MAX_ID_DIGITS:
        raise InputError(f"sentence id {token[:40]!r}", path, line,
                         f"a non-negative integer of at most {MAX_ID_DIGITS} digits")
    return int(token)


def iter_kbest(path: str | os.PathLike) -> Iterator[CdecEntry]:
    """Yield the :class:`CdecEntry` of each line of a (plain or gzipped) cdec k-best file.

    Streaming: one line in memory at a time. Sentence order is not checked here
    (:func:`read_kbest` checks it), so concatenated or reordered files can be read.
    """
    for number, text in iter_lines(path):
        yield parse_kbest_line(text, path, number)


def read_kbest(path: str | os.PathLike, space: FeatureSpace | None = None,
               dense_names: Iterable[str] | None = None,
               n_sentences: int | None = None, drop_words: Iterable[str] = ()) -> KBest:
    """Read a cdec k-best file into a :class:`KBest`, streaming.

    Names in the dense part of ``space`` fill the dense columns; every other name
    becomes a sparse feature of ``space`` (added as met). Without ``space``, a new
    ``FeatureSpace(dense_names or [])`` is used; when both are given, ``dense_names``
    must equal the space's dense names. Sentence ids must be non-decreasing; the
    result has one instance per sentence ``0 .. n_sentences-1`` (default: largest
    id + 1), empty for sentences without lines. ``drop_words`` are left out of every translation (a
    system's sentence markers).
    """
    drop = frozenset(drop_words)
    if space is None:
        space = FeatureSpace(dense_names or [])
    elif dense_names is not None and list(dense_names) != space.dense_names:
        raise InputError("dense_names differ from the dense names of the given space", path,
                         expected=f"{space.dense_names}")
    if n_sentences is not None and n_sentences < 0:
        raise InputError(f"n_sentences={n_sentences}", path, expected="a non-negative count")
    builder = KBestBuilder(space)
    last = -1
    for entry in iter_kbest(path):
        check_sentence_id(entry.sentence, last, n_sentences, path, entry.line)
        last = entry.sentence
        dense, indices, values = space.split(entry.features)
        text = " ".join(w for w in entry.text.split() if w not in drop) if drop else entry.text
        builder.add(entry.sentence, text, dense, indices, values)
    return builder.build(n_sentences)


def format_kbest_line(entry: CdecEntry) -> str:
    """One k-best line (no newline) as cdec prints it: names sorted, values ``%g``.

    Entries that would not read back (a translation with ``|||`` or a line break, a
    name with spaces, non-finite values, a negative id) are an :class:`InputError`.
    """
    if not isinstance(entry.sentence, (int, np.integer)) or entry.sentence < 0:
        raise InputError(f"sentence id {entry.sentence!r}", expected="a non-negative integer")
    if SEPARATOR in entry.text or "\n" in entry.text:
        raise InputError(f"translation {entry.text[:40]!r} contains '|||' or a line break",
                         expected="a translation printable on one k-best line")
    tokens = []
    for name in sorted(entry.features):
        value = float(entry.features[name])
        if not name or SEPARATOR in name or any(c.isspace() for c in name):
            raise InputError(f"feature name {name[:40]!r}",
                             expected="a non-empty name without spaces or '|||'")
        if not np.isfinite(value):
            raise InputError(f"feature {name[:40]!r} has value {value}", expected="a finite value")
        tokens.append(f"{name}={value:g}")
    score = float(entry.score)
    if not np.isfinite(score):
        raise InputError(f"model score {score}", expected="a finite score")
    return f"{int(entry.sentence)} ||| {entry.text} ||| {' '.join(tokens)} ||| {score:g}"


def write_kbest(path: str | os.PathLike, entries: Iterable[CdecEntry]) -> None:
    """Write entries as a cdec k-best file, atomically (gzip if ``path`` ends in ``.gz``)."""
    with atomic_write(path) as out:
        for entry in entries:
            out.write(format_kbest_line(entry))
            out.write("\n")


def iter_entries(kbest: KBest, weights: Mapping[str, float] | np.ndarray) -> Iterator[CdecEntry]:
    """The hypotheses of ``kbest`` as entries scored with ``weights``, zero features left out.

    ``weights`` is an array over ``kbest.space`` or a ``{name: weight}`` dict; names the
    space does not know are ignored (no hypothesis has them, so they add 0 to every score).
    """
    if isinstance(weights, Mapping):
        w = np.zeros(len(kbest.space))
        for name, value in weights.items():
            index = kbest.space.get(name)
            if index is not None:
                w[index] = value
        weights = w
    scores = kbest.scores(weights)
    for instance in range(kbest.n_instances):
        sentence = int(kbest.sentence_ids[instance])
        for row in kbest.rows(instance):
            features = {name: value for name, value in kbest.feature_dict(row).items() if value != 0.0}
            yield CdecEntry(sentence, kbest.hypothesis(row), features, float(scores[row]))


def write_kbest_from(path: str | os.PathLike, kbest: KBest,
                     weights: Mapping[str, float] | np.ndarray) -> None:
    """Write a :class:`KBest` as a cdec k-best file with scores w . f (see :func:`iter_entries`)."""
    write_kbest(path, iter_entries(kbest, weights))
