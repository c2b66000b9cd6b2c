"""Feature names <-> indices, dense + sparse feature vectors, weights files.

A :class:`FeatureSpace` holds the dense names first (a fixed block, indices
``0 .. n_dense-1``) and then sparse names, which grow as readers meet them.
Weights are a dense ``float64`` array over the whole space (a few million
sparse names cost a few tens of MB); feature vectors of hypotheses are a dense
row plus sparse ``(indices, values)`` pairs with indices ``>= n_dense``.
"""

from __future__ import annotations

import math
import os
import re
from typing import Iterable, Mapping

import numpy as np

from minismt.errors import InputError
from minismt.io import atomic_write, iter_lines


# ---- sparse feature names ------------------------------------------------------------------
# A sparse name is ``Label_<text>`` where the text holds a ``~`` (so it never looks like a dense
# ``Label_i``); words inside it are escaped so that every name round-trips through Moses n-best
# lists, cdec JSON forests and k-best lists, and moses.ini / minismt / cdec weights files.

_SPECIAL = set("%_,~=#|:")


def escape_word(word: str) -> str:
    """``word`` with ``% _ , ~ = # | :`` and control characters (and whitespace) as ``%XX``."""
    if not any(c in _SPECIAL or c <= " " or c == "\x7f" or c.isspace() for c in word):
        return word
    out = []
    for c in word:
        if c in _SPECIAL or c <= " " or c == "\x7f" or c.isspace():
            out.extend(f"%{b:02X}" for b in c.encode("utf-8"))
        else:
            out.append(c)
    return "".join(out)


def unescape_word(text: str) -> str:
    """The word :func:`escape_word` escaped."""
    if "%" not in text:
        return text
    data = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "%" and _is_hex(text[i + 1:i + 3]):
            data.append(int(text[i + 1:i + 3], 16))
            i += 3
        else:
            data.extend(text[i].encode("utf-8"))
            i += 1
    return data.decode("utf-8")


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(c in "0123456789ABCDEFabcdef" for c in text)


class FeatureSpace:
    """Feature names and their indices: dense names first, then sparse, growing.

    Parameters
    ----------
    dense_names : names of the dense features, in the order of their columns.
    sparse_names : sparse names known in advance (more are added by :meth:`add`).
    """

    def __init__(self, dense_names: Iterable[str] = (), sparse_names: Iterable[str] = ()):
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        for name in dense_names:
            if name in self._index:
                raise InputError(f"dense feature name {name!r} given twice")
            self._append(name)
        self.n_dense = len(self._names)
        for name in sparse_names:
            self.add(name)

    def _append(self, name: str) -> int:
        if not isinstance(name, str) or name.split(None, 1) != [name]:  # empty, or a space (str.isspace's) in it
            raise InputError(f"bad feature name {name!r}", expected="a non-empty name without spaces")
        index = len(self._names)
        self._names.append(name)
        self._index[name] = index
        return index

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: str) -> bool:
        return name in self._index

    def __iter__(self):
        return iter(self._names)

    def __repr__(self) -> str:
        return f"FeatureSpace(n_dense={self.n_dense}, n_sparse={len(self) - self.n_dense})"

    def __eq__(self, other) -> bool:
        return (isinstance(other, FeatureSpace) and self.n_dense == other.n_dense
                and self._names == other._names)

    @property
    def names(self) -> list[str]:
        """All names, index order (a copy)."""
        return list(self._names)

    @property
    def dense_names(self) -> list[str]:
        return self._names[: self.n_dense]

    @property
    def sparse_names(self) -> list[str]:
        return self._names[self.n_dense:]

    def add(self, name: str) -> int:
        """Index of ``name``, adding it as a sparse feature if it is new."""
        index = self._index.get(name)
        if index is None:
            index = self._append(name)
        return index

    def index(self, name: str) -> int:
        """Index of a known name; an unknown name is an :class:`InputError`."""
        try:
            return self._index[name]
        except KeyError:
            raise InputError(f"unknown feature name {name!r}",
                             expected=f"one of the {len(self)} names of the feature space") from None

    def get(self, name: str, default=None):
        return self._index.get(name, default)

    def name(self, index: int) -> str:
        return self._names[index]

    def is_dense(self, index: int) -> bool:
        return index < self.n_dense

    def copy(self) -> "FeatureSpace":
        """The same names in a space of its own (the names are not checked again)."""
        out = FeatureSpace.__new__(FeatureSpace)
        out._names, out._index, out.n_dense = list(self._names), dict(self._index), self.n_dense
        return out

    # ---- vectors -------------------------------------------------------------
    def split(self, values: Mapping[str, float], grow: bool = True):
        """Turn ``{name: value}`` into a dense row and sorted sparse ``(indices, values)``.

        New names become sparse features when ``grow``; otherwise they are an
        :class:`InputError`.
        """
        dense = np.zeros(self.n_dense)
        sparse: dict[int, float] = {}
        for name, value in values.items():
            index = self.add(name) if grow else self.index(name)
            if index < self.n_dense:
                dense[index] = value
            else:
                sparse[index] = sparse.get(index, 0.0) + value
        keys = sorted(sparse)
        return (dense, np.asarray(keys, dtype=np.int32),
                np.asarray([sparse[k] for k in keys], dtype=np.float64))

    def weights(self, values: Mapping[str, float], grow: bool = True,
                require_dense: bool = False) -> np.ndarray:
        """A weight array of length ``len(self)`` from ``{name: weight}`` (missing names: 0).

        With ``require_dense`` a dense feature without a weight is an
        :class:`InputError` (a start point must weight every dense feature;
        sparse features start at 0).
        """
        if require_dense:
            missing = [name for name in self.dense_names if name not in values]
            if missing:
                shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
                raise InputError(f"the weights miss {len(missing)} dense feature(s): {shown}",
                                 expected="a weight for every dense feature")
        indices = [(self.add(n) if grow else self.index(n)) for n in values]
        w = np.zeros(len(self))
        for index, value in zip(indices, values.values()):
            w[index] = value
        return w

    def start_weights(self, w0) -> np.ndarray:
        """A start point as a finite float64 array over the space: a ``{name: weight}`` dict naming every
        dense feature, or an array of at least the dense weights (missing sparse weights are 0)."""
        if isinstance(w0, Mapping):
            w = self.weights(w0, grow=False, require_dense=True)
        else:
            w = np.asarray(w0, dtype=np.float64)
            if w.ndim != 1 or not self.n_dense <= w.shape[0] <= len(self):
                raise InputError(f"start weights of shape {w.shape}",
                                 expected=f"a weight for each of the {self.n_dense} dense features "
                                          f"(and at most the {len(self) - self.n_dense} sparse ones)")
            w = np.concatenate([w, np.zeros(len(self) - w.shape[0])])
        if not np.all(np.isfinite(w)):
            raise InputError("start weights contain NaN or inf", expected="finite weights")
        return w

    def weights_dict(self, w: np.ndarray, skip_zero_sparse: bool = True) -> dict[str, float]:
        """``{name: weight}`` of a weight array; zero sparse weights are left out."""
        w = np.asarray(w, dtype=np.float64)
        out = {}
        for index, value in enumerate(w[: len(self)]):
            if index >= self.n_dense and skip_zero_sparse and value == 0.0:
                continue
            out[self._names[index]] = float(value)
        return out

    def to_json(self) -> dict:
        return {"dense": self.dense_names, "sparse": self.sparse_names}

    @classmethod
    def from_json(cls, data: dict) -> "FeatureSpace":
        return cls(data["dense"], data["sparse"])


_C_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_float(token: str, path=None, line=None, what: str = "a number") -> float:
    """A finite float written in C syntax (``-1.5``, ``.5``, ``3e-05``), else an :class:`InputError`.

    Stricter than Python's ``float``, which also takes ``1_0``, ``nan``,
    ``infinity`` and non-ASCII digits: only what Moses and cdec themselves
    read is accepted.
    """
    if not _C_FLOAT.fullmatch(token):
        if token.strip().lstrip("+-").lower() in ("nan", "inf", "infinity"):
            raise InputError(f"{token[:40]!r} is not finite", path, line, f"{what}, finite")
        raise InputError(f"{token[:40]!r} is not a number", path, line, what)
    value = float(token)
    if not math.isfinite(value):
        raise InputError(f"{token[:40]!r} is not finite (overflow)", path, line, f"{what}, finite")
    return value


def read_weights(path: str | os.PathLike) -> dict[str, float]:
    """Read a weights file: one ``name value`` per line; ``#`` comments, blank lines ignored.

    This is minismt's own format and also cdec's. Moses' moses.ini and the
    kbmira output are read by :mod:`plugins.moses`.
    """
    weights: dict[str, float] = {}
    for number, text in iter_lines(path):
        body = text.split("#", 1)[0].strip()
        if not body:
            continue
        fields = body.split()
        if len(fields) != 2:
            raise InputError(f"{len(fields)} fields", path, number, "'name value'")
        name, value = fields
        if name in weights:
            raise InputError(f"feature {name!r} given twice", path, number, "each name once")
        weights[name] = parse_float(value, path, number, "a weight")
    return weights


def weight_line(path: str | os.PathLike, name: str) -> int | None:
    """The line number of ``path`` (a weights file) that gives ``name``'s weight, for error messages."""
    for number, text in iter_lines(path):
        fields = text.split("#", 1)[0].split()
        if fields and fields[0] == name:
            return number
    return None


def format_weight(value: float) -> str:
    """Shortest text that reads back to the same float."""
    return repr(float(value))


def write_weights(path: str | os.PathLike, weights: Mapping[str, float]) -> None:
    """Write ``name value`` lines atomically (values round-trip exactly).

    Names that would not read back (empty, with whitespace or ``#``, or starting with a byte-order
    mark, which a reader takes for the file's) and non-finite values are an :class:`InputError`, and
    nothing is written.
    """
    for name, value in weights.items():
        if not isinstance(name, str) or not name or "#" in name or any(c.isspace() for c in name) \
                or name.startswith("\ufeff"):
            raise InputError(f"weight name {name!r}", path,
                             expected="a non-empty name without whitespace or '#', not starting with U+FEFF")
        if not math.isfinite(float(value)):
            raise InputError(f"weight {name!r} is {value}", path, expected="a finite weight")
    with atomic_write(path) as out:
        for name, value in weights.items():
            out.write(f"{name} {format_weight(value)}\n")
