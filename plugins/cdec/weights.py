"""cdec weights files: ``Name value`` per line.

cdec writes these (``Weights::WriteToFile``) as ``Name value`` lines, optionally
after a ``# ...`` header, and that is exactly minismt's own weights format, so
reading and writing delegate to :func:`minismt.features.read_weights` and
:func:`minismt.features.write_weights`. The reader is stricter than cdec's
``Weights::InitFromFile`` in ways that only reject files cdec would misread or
that cdec never writes: a repeated name is an error (cdec keeps the last), NaN
and inf are errors, and ``Name=value`` lines are not accepted; on the other hand
``#`` starts a comment anywhere on a line (cdec: only at its start) and leading
whitespace is allowed (cdec aborts).
"""

from __future__ import annotations

import os
from typing import Mapping

from minismt.features import read_weights, write_weights


def read_cdec_weights(path: str | os.PathLike) -> dict[str, float]:
    """``{name: weight}`` of a (plain or gzipped) cdec weights file, in file order.

    A thin wrapper of :func:`minismt.features.read_weights`, whose format is cdec's:
    ``#`` comments, blank lines, any run of spaces or tabs between name and value;
    a repeated name, a line without exactly two fields or a non-finite value is an
    :class:`InputError` with path and line.
    """
    return read_weights(path)


def write_cdec_weights(path: str | os.PathLike, weights: Mapping[str, float]) -> None:
    """Write ``Name value`` lines atomically (:func:`minismt.features.write_weights`, cdec's format)."""
    write_weights(path, weights)
