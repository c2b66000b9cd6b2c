"""Moses n-best lists: streaming reader, KBest reader, byte-exact writer.

A line is ``id ||| hypothesis ||| features ||| total`` with an optional fifth
field (word alignment). Features are grouped by producer: a label ``Name=``
followed by that producer's values. Legacy lists (the ones in the Moses source
tree) write labels as ``name:`` and have no space before the first ``|||``;
both spellings are read the same way. As in Moses, a label containing ``_`` is
a sparse feature whose single next token is its value.

Numbers are written like C++ ``ostream`` with its default precision (``%g``,
6 significant digits), so that a list read and written again is byte-identical
to what Moses wrote (new-style lists; legacy lists come back in the new style).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from minismt.errors import InputError
from minismt.features import FeatureSpace, parse_float
from minismt.io import atomic_write, iter_lines
from minismt.kbest import KBest, KBestBuilder, check_sentence_id

SEPARATOR = "|||"


_INTEGER = re.compile(r"[0-9]+")
_INDEXED = re.compile(r"(.*)_(0|[1-9][0-9]*)")


def parse_index(token: str, path, line: int, what: str) -> int:
    """A non-negative decimal integer (ASCII digits only)."""
    if not _INTEGER.fullmatch(token):
        raise InputError(f"{token[:40]!r} is not a non-negative integer", path, line, what)
    return int(token)


def format_number(value: float) -> str:
    """``value`` as C++ ``ostream << double`` prints it by default (``%g``: -1.68182, 0, -9, -0)."""
    return "%g" % value


def split_indexed_name(name: str) -> tuple[str, int] | None:
    """``("Label", i)`` for a name ``Label_i`` (i a decimal index), else None."""
    match = _INDEXED.fullmatch(name)
    if match is None:
        return None
    return match.group(1), int(match.group(2))


@dataclass
class NbestEntry:
    """One n-best line.

    ``text`` is the hypothesis exactly as between the first two separators, less
    one leading and one trailing space (so Moses' trailing space is kept);
    ``features`` are the dense label groups in file order, ``sparse`` the sparse
    features; ``alignment`` is the fifth field (less the space after ``|||``)
    or None; ``line`` is the line number in the file (0 if not read from one).
    """

    sentence: int
    text: str
    features: list[tuple[str, list[float]]]
    sparse: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    alignment: str | None = None
    line: int = 0

    def dense_names(self) -> list[str]:
        """Names of the dense values as Moses' extractor gives them: ``Label_0 .. Label_{k-1}``."""
        return [f"{label}_{i}" for label, values in self.features for i in range(len(values))]

    def dense_values(self) -> list[float]:
        """The dense values in file order (matching :meth:`dense_names`)."""
        return [v for _, values in self.features for v in values]

    def layout(self) -> tuple[tuple[str, int], ...]:
        """``((label, number of values), ...)``: what must agree between the lines of one list."""
        return tuple((label, len(values)) for label, values in self.features)


def _strip_one(text: str) -> str:
    """``text`` less one leading and one trailing space, if present."""
    if text.startswith(" "):
        text = text[1:]
    if text.endswith(" "):
        text = text[:-1]
    return text


def _parse_features(body: str, path, line: int):
    """Dense groups and sparse features of the features field of one line."""
    groups: list[tuple[str, list[float]]] = []
    sparse: dict[str, float] = {}
    labels: set[str] = set()
    current: list[float] | None = None
    tokens = body.split()
    position = 0
    while position < len(tokens):
        token = tokens[position]
        position += 1
        if token.endswith("=") or token.endswith(":"):
            if current is not None and not current:
                raise InputError(f"label {groups[-1][0]!r} has no values", path, line,
                                 "one or more numbers after a dense label")
            label = token[:-1]
            if not label:
                raise InputError(f"empty feature label {token!r}", path, line, "'Name=' or 'name:'")
            if label in labels:
                raise InputError(f"feature label {label!r} given twice", path, line,
                                 "each label once per line")
            labels.add(label)
            if "_" in label:
                if position >= len(tokens):
                    raise InputError(f"sparse feature {label!r} has no value", path, line,
                                     "a number after a sparse label")
                sparse[label] = parse_float(tokens[position], path, line,
                                             f"the value of sparse feature {label}")
                position += 1
                current = None
            else:
                current = []
                groups.append((label, current))
            continue
        if current is None:
            if not groups and not sparse:
                raise InputError(f"value {token[:40]!r} before any feature label", path, line,
                                 "'Name=' first")
            raise InputError(f"{token[:40]!r} where a label is expected", path, line,
                             "'Name=' after the value of a sparse feature")
        current.append(parse_float(token, path, line, f"a value of {groups[-1][0]}"))
    if current is not None and not current:
        raise InputError(f"label {groups[-1][0]!r} has no values", path, line,
                         "one or more numbers after a dense label")
    dense_names = {f"{label}_{i}" for label, values in groups for i in range(len(values))}
    for name in sparse:
        if name in dense_names:
            raise InputError(f"sparse feature {name!r} has the name of a dense value", path, line,
                             "distinct feature names")
    return groups, sparse


def parse_nbest_line(text: str, path=None, line: int = 0) -> NbestEntry:
    """One n-best line (without its line ending) as an :class:`NbestEntry`."""
    fields = text.split(SEPARATOR)
    if len(fields) not in (4, 5):
        raise InputError(f"{len(fields)} fields", path, line,
                         "'id ||| hypothesis ||| features ||| score [||| alignment]'")
    sentence_text = fields[0].strip()
    if not sentence_text:
        raise InputError("empty sentence id", path, line, "a sentence number")
    if sentence_text.startswith("-") and _INTEGER.fullmatch(sentence_text[1:]):
        raise InputError(f"negative sentence id {sentence_text}", path, line, "an id >= 0")
    sentence = parse_index(sentence_text, path, line, "a sentence number")
    groups, sparse = _parse_features(fields[2], path, line)
    score_tokens = fields[3].split()
    if len(score_tokens) != 1:
        raise InputError(f"{len(score_tokens)} tokens in the score field", path, line,
                         "one total score")
    score = parse_float(score_tokens[0], path, line, "the total score")
    alignment = None
    if len(fields) == 5:
        alignment = fields[4][1:] if fields[4].startswith(" ") else fields[4]
    return NbestEntry(sentence, _strip_one(fields[1]), groups, sparse, score, alignment, line)


def iter_nbest(path: str | os.PathLike) -> Iterator[NbestEntry]:
    """Yield the entries of a Moses n-best list (plain or gzip), one line at a time."""
    for number, text in iter_lines(path):
        yield parse_nbest_line(text, path, number)


def dense_columns(names: Sequence[str], space: FeatureSpace, path, line: int):
    """Dense column of each name in ``space`` (None when the names are exactly its dense names)."""
    if list(names) == space.dense_names:
        return None
    columns = np.empty(len(names), dtype=np.int64)
    for k, name in enumerate(names):
        index = space.get(name)
        if index is None or index >= space.n_dense:
            raise InputError(f"dense feature {name!r} is not a dense feature of the feature space",
                             path, line, f"names among {space.dense_names[:6]}...")
        columns[k] = index
    return columns


def sparse_arrays(sparse: dict[str, float], space: FeatureSpace, path, line: int):
    """Sorted sparse ``(indices, values)`` of ``{name: value}``, growing ``space``."""
    pairs = []
    for name, value in sparse.items():
        index = space.add(name)
        if index < space.n_dense:
            raise InputError(f"sparse feature {name!r} has the name of a dense feature", path, line,
                             "sparse names distinct from the dense ones")
        pairs.append((index, value))
    pairs.sort()
    return [i for i, _ in pairs], [v for _, v in pairs]


def read_nbest(path: str | os.PathLike, space: FeatureSpace | None = None,
               n_sentences: int | None = None, components: Mapping[str, Sequence[int]] | None = None) -> KBest:
    """Read an n-best list into a :class:`KBest` (one instance per sentence ``0 .. n-1``).

    Without ``space`` the dense names come from the first line (``Label_i``).
    With one, every dense name of the list must be a dense name of ``space``
    (dense names of ``space`` missing from the list get 0, as Moses'
    UnknownWordPenalty0, which is never printed). Sparse names are added to the
    space. Every line must have the first line's label groups, and sentence ids
    must not decrease. ``components`` gives, for a producer of which Moses prints only some values
    (``tuneable-components`` in moses.ini), the index of each printed value (``{"TranslationModel0":
    [0, 2, 3]}``: its three values are ``TranslationModel0_0``, ``_2`` and ``_3``). No statistics are
    attached (see :class:`BleuReferences`).
    """
    builder: KBestBuilder | None = None
    layout = None
    columns = None
    last = -1
    for entry in iter_nbest(path):
        if builder is None:
            layout = entry.layout()
            names = entry.dense_names()
            if components:
                names = _component_names(entry, components, path)
            if space is None:
                space = FeatureSpace(names)
            columns = dense_columns(names, space, path, entry.line)
            builder = KBestBuilder(space)
        elif entry.layout() != layout:
            raise InputError("feature groups differ from the first line: "
                             + " ".join(f"{label}({k})" for label, k in entry.layout()), path,
                             entry.line, " ".join(f"{label}({k})" for label, k in layout))
        check_sentence_id(entry.sentence, last, n_sentences, path, entry.line)
        last = entry.sentence
        values = entry.dense_values()
        if columns is None:
            dense = values
        else:
            dense = np.zeros(space.n_dense)
            dense[columns] = values
        indices, sparse_values = sparse_arrays(entry.sparse, space, path, entry.line)
        builder.add(entry.sentence, entry.text, dense, indices, sparse_values)
    if builder is None:
        builder = KBestBuilder(space if space is not None else FeatureSpace())
    return builder.build(n_sentences)


def _component_names(entry: NbestEntry, components: Mapping[str, Sequence[int]], path) -> list[str]:
    """The dense names of ``entry``'s values when some producers print only the components listed."""
    names = []
    for label, values in entry.features:
        indices = components.get(label, range(len(values)))
        if len(indices) != len(values):
            raise InputError(f"{label} has {len(values)} values", path, entry.line,
                             f"its {len(indices)} tuneable components")
        names += [f"{label}_{i}" for i in indices]
    return names


def _writable_label(name: str, sparse: bool) -> bool:
    """Whether ``name= ...`` reads back as the same dense label (no ``_``) or sparse name (``_``)."""
    return (bool(name) and ("_" in name) == sparse and SEPARATOR not in name
            and not any(c.isspace() for c in name))


def format_nbest_line(entry: NbestEntry) -> str:
    """The new-style line of ``entry`` (no line ending): ``id ||| text ||| Label= v v ||| score``.

    Anything that would not read back as the same entry (a label with ``_``
    or a sparse name without, a non-finite number, a line break or ``|||`` in
    the text) is an :class:`InputError`.
    """
    if "\n" in entry.text or SEPARATOR in entry.text:
        raise InputError(f"hypothesis of sentence {entry.sentence} contains a line break or '|||'",
                         expected="text that fits in one n-best field")
    for label, values in entry.features:
        if not _writable_label(label, sparse=False):
            raise InputError(f"dense label {label!r} cannot be written to a Moses n-best list",
                             expected="a non-empty label without '_', spaces or '|||'")
        if not values or not all(map(math.isfinite, values)):
            raise InputError(f"dense label {label!r} has no values or a non-finite one",
                             expected="one or more finite values")
    for name, value in entry.sparse.items():
        if not _writable_label(name, sparse=True) or not math.isfinite(value):
            raise InputError(f"sparse feature {name!r} = {value} cannot be written to a Moses n-best "
                             "list", expected="a name with '_' (Moses reads others as dense), finite")
    if not math.isfinite(entry.score):
        raise InputError(f"total score {entry.score}", expected="a finite score")
    parts = [f"{entry.sentence} ||| {entry.text} |||"]
    for label, values in entry.features:
        parts.append(f" {label}=")
        parts.extend(" " + format_number(v) for v in values)
    for name, value in entry.sparse.items():
        parts.append(f" {name}= {format_number(value)}")
    parts.append(" ||| " + format_number(entry.score))
    if entry.alignment is not None:
        if any(c in entry.alignment for c in "\r\n") or SEPARATOR in entry.alignment:
            raise InputError(f"alignment of sentence {entry.sentence} contains a line break or '|||'",
                             expected="an alignment that fits in one n-best field")
        parts.append(" ||| " + entry.alignment)
    return "".join(parts)


def write_nbest(path: str | os.PathLike, entries: Iterable[NbestEntry]) -> None:
    """Write entries as a new-style n-best list, atomically (gzip if ``path`` ends in .gz)."""
    with atomic_write(path) as out:
        for entry in entries:
            out.write(format_nbest_line(entry))
            out.write("\n")


def groups_of_names(names: Sequence[str]) -> list[tuple[str, int]]:
    """Rebuild ``[(label, k), ...]`` from dense names ``Label_0 .. Label_{k-1}`` in order.

    Names that cannot be written as Moses label groups (no ``_i`` suffix,
    indices out of order, a label with ``_`` which Moses would read as sparse)
    are an :class:`InputError`.
    """
    groups: list[tuple[str, int]] = []
    for name in names:
        split = split_indexed_name(name)
        if split is None or not split[0] or "_" in split[0] or SEPARATOR in split[0]:
            raise InputError(f"dense feature {name!r} cannot be written as a Moses label group",
                             expected="names 'Label_i' with a label without '_'")
        label, index = split
        if groups and groups[-1][0] == label and groups[-1][1] == index:
            groups[-1] = (label, index + 1)
        elif index == 0 and all(g[0] != label for g in groups):
            groups.append((label, 1))
        else:
            raise InputError(f"dense feature {name!r} is out of order",
                             expected="Label_0, Label_1, ... consecutive for each label")
    return groups


def kbest_entries(kbest: KBest, weights) -> Iterator[NbestEntry]:
    """The hypotheses of ``kbest`` as n-best entries, score = ``kbest.scores(weights)``.

    Instances are visited by sentence id (stable), so the lines of a list that
    aggregates several iterations stay grouped by sentence.
    """
    groups = groups_of_names(kbest.space.dense_names)
    scores = kbest.scores(weights)
    order = np.argsort(kbest.sentence_ids, kind="stable")
    for instance in order:
        sentence = int(kbest.sentence_ids[instance])
        for row in kbest.rows(int(instance)):
            values = kbest.features[row].tolist()
            features = []
            start = 0
            for label, k in groups:
                features.append((label, values[start:start + k]))
                start += k
            indices, sparse_values = kbest.sparse_row(row)
            sparse = {kbest.space.name(int(i)): float(v) for i, v in zip(indices, sparse_values)}
            yield NbestEntry(sentence, kbest.hypothesis(row), features, sparse, float(scores[row]))


def write_kbest_nbest(path: str | os.PathLike, kbest: KBest, weights) -> None:
    """Write a :class:`KBest` as a Moses n-best list, with model scores under ``weights``."""
    write_nbest(path, kbest_entries(kbest, weights))
