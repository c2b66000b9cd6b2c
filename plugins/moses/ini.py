"""moses.ini weights: read the ``[weight]`` section, write tuned weights back in place.

The section holds one line per feature producer, ``Name= v1 v2 ...``, in the
order of the producer's scores (the order the n-best list prints them in).
Tuners work with flat names ``Name_i`` (0-based, as in Moses' features.dat);
:func:`flatten_weights` and :func:`group_weights` convert. As in Moses'
parser, ``#`` starts a comment anywhere on a line and ``[name]`` starts a
section.
"""

from __future__ import annotations

import math
import os
import re
from typing import Iterator, Mapping

from minismt.errors import InputError
from minismt.features import format_weight, parse_float
from minismt.io import atomic_write, iter_raw_lines
from plugins.moses.nbest import split_indexed_name

WEIGHT_SECTION = "weight"

_TOKEN = re.compile(r"\S+")


def _scan(path) -> Iterator[tuple[int, str, str, tuple | None]]:
    """Yield every line with, for ``[weight]`` lines, ``(producer, value spans, values)``.

    Raises :class:`InputError` for malformed weight lines, a producer given
    twice, or a file without a ``[weight]`` section (checked at its end).
    """
    path = os.fspath(path)
    section = None
    has_weights = False
    producers: set[str] = set()
    for number, text, ending in iter_raw_lines(path):
        body = text.split("#", 1)[0]
        stripped = body.strip()
        parsed = None
        if stripped.startswith("["):
            if not stripped.endswith("]") or len(stripped) < 2:
                raise InputError(f"section header {stripped[:40]!r}", path, number, "'[name]'")
            section = stripped[1:-1]
            has_weights = has_weights or section == WEIGHT_SECTION
        elif stripped and section == WEIGHT_SECTION:
            tokens = list(_TOKEN.finditer(body))
            label = tokens[0].group()
            if not label.endswith("=") or len(label) == 1:
                raise InputError(f"{label[:40]!r} where a weight line starts", path, number,
                                 "'Name= value ...'")
            producer = label[:-1]
            if producer in producers:
                raise InputError(f"weights of {producer!r} given twice", path, number,
                                 "one line per producer")
            producers.add(producer)
            values = [parse_float(t.group(), path, number, f"a weight of {producer}")
                      for t in tokens[1:]]
            parsed = (producer, [t.span() for t in tokens[1:]], values)
        yield number, text, ending, parsed
    if not has_weights:
        raise InputError("no [weight] section", path, expected="a [weight] section of 'Name= v ...' lines")


def read_moses_ini_weights(path: str | os.PathLike) -> dict[str, list[float]]:
    """``{producer: [weights]}`` of the ``[weight]`` section(s), in file order."""
    return {parsed[0]: parsed[2] for _, _, _, parsed in _scan(path) if parsed is not None}


def flatten_weights(grouped: Mapping[str, list[float]]) -> dict[str, float]:
    """``{"Name_i": w}`` (0-based, the features.dat names) of ``{"Name": [w0, w1, ...]}``."""
    return {f"{name}_{i}": float(w) for name, values in grouped.items() for i, w in enumerate(values)}


def _split_weight_name(name: str) -> tuple[str, int]:
    split = split_indexed_name(name)
    if split is None or not split[0]:
        raise InputError(f"weight name {name!r}", expected="'Name_i' with i = 0, 1, ...")
    return split


def group_weights(flat: Mapping[str, float]) -> dict[str, list[float]]:
    """``{"Name": [w0, w1, ...]}`` of ``{"Name_i": w}``: the inverse of :func:`flatten_weights`.

    The indices of every producer must be exactly ``0 .. k-1``.
    """
    grouped: dict[str, dict[int, float]] = {}
    for name, value in flat.items():
        producer, index = _split_weight_name(name)
        grouped.setdefault(producer, {})[index] = float(value)
    out: dict[str, list[float]] = {}
    for producer, values in grouped.items():
        if sorted(values) != list(range(len(values))):
            raise InputError(f"weights of {producer!r} have indices {sorted(values)}",
                             expected=f"{producer}_0 .. {producer}_{len(values) - 1}")
        out[producer] = [values[i] for i in range(len(values))]
    return out


def write_moses_ini(src_path: str | os.PathLike, dst_path: str | os.PathLike,
                    flat_weights: Mapping[str, float]) -> None:
    """Copy a moses.ini to ``dst_path`` (atomically) with new values for some weights.

    Only the numbers of ``[weight]`` lines named in ``flat_weights`` (as
    ``Name_i``) that change are rewritten (shortest round-trip text); every
    other byte is kept. Indices not given keep their value; a producer that the
    file does not have, or an index past its weights, is an :class:`InputError`.
    """
    src_path = os.fspath(src_path)
    wanted: dict[str, dict[int, float]] = {}
    for name, value in flat_weights.items():
        producer, index = _split_weight_name(name)
        value = float(value)
        if not math.isfinite(value):
            raise InputError(f"weight {name} = {value}", expected="a finite weight")
        wanted.setdefault(producer, {})[index] = value
    found: set[str] = set()
    with atomic_write(dst_path) as out:
        for number, text, ending, parsed in _scan(src_path):
            if parsed is not None and parsed[0] in wanted:
                producer, spans, values = parsed
                new = wanted[producer]
                beyond = [i for i in sorted(new) if i >= len(values)]
                if beyond:
                    raise InputError(f"{producer} has {len(values)} weights, not {beyond[0] + 1}",
                                     src_path, number, f"{producer}_0 .. {producer}_{len(values) - 1}")
                found.add(producer)
                pieces = []
                position = 0
                for i, (start, end) in enumerate(spans):
                    if i in new and new[i] != values[i]:
                        pieces.append(text[position:start])
                        pieces.append(format_weight(new[i]))
                        position = end
                pieces.append(text[position:])
                text = "".join(pieces)
            out.write(text + ending)
        missing = [p for p in wanted if p not in found]
        if missing:
            raise InputError(f"no [weight] line for {missing[0]!r}", src_path,
                             expected="weights only of producers in the [weight] section")
