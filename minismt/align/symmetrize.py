"""Symmetrisation of two directional alignments (Och & Ney 2003; Koehn, Och & Marcu 2003).

Both inputs are (source position, target position) links of the same sentence
pairs: ``forward`` from the model that generates the target, ``reverse`` from
the one that generates the source, its links already swapped.

grow-diag-final-and, with the semantics of fast_align's ``atools`` (the tool
the Moses reference system on Multi30k used):

1. start from the intersection;
2. grow-diag: visit the union points not yet in the alignment in (i, j) order
   and add a point when one of its 8 neighbours (diagonals included) is in the
   alignment and its source or its target word is still unaligned; repeat
   passes until one adds nothing;
3. final-and: visit the forward points, then the reverse points, in (i, j)
   order and add those whose source and target words are both unaligned.
"""

from __future__ import annotations

import numpy as np

from minismt.align import _kernels
from minismt.corpus import Alignment
from minismt.errors import InputError

METHODS = {
    "intersection": _kernels.INTERSECTION,
    "union": _kernels.UNION,
    "grow-diag-final-and": _kernels.GROW_DIAG_FINAL_AND,
}


def _links(name: str, alignment: Alignment) -> tuple[np.ndarray, np.ndarray]:
    links = np.ascontiguousarray(alignment.links, dtype=np.int64).reshape(-1, 2)
    offsets = np.ascontiguousarray(alignment.offsets, dtype=np.int64)
    if offsets.ndim != 1 or offsets.shape[0] < 1 or offsets[0] != 0 or offsets[-1] != links.shape[0] \
            or np.any(np.diff(offsets) < 0):
        raise InputError(f"{name} alignment has inconsistent offsets",
                         expected="offsets from 0 to the number of links, non-decreasing")
    if links.size and links.min() < 0:
        raise InputError(f"{name} alignment has a negative position", expected="positions >= 0")
    return links, offsets


def symmetrize(forward: Alignment, reverse: Alignment, method: str = "grow-diag-final-and") -> Alignment:
    """Combine ``forward`` and ``reverse`` (both (source, target) links) with ``method``:
    ``"intersection"``, ``"union"`` or ``"grow-diag-final-and"``."""
    if method not in METHODS:
        raise InputError(f"symmetrization method {method!r}", expected=" or ".join(METHODS))
    fwd_links, fwd_offsets = _links("forward", forward)
    rev_links, rev_offsets = _links("reverse", reverse)
    if fwd_offsets.shape[0] != rev_offsets.shape[0]:
        raise InputError(f"forward alignment has {len(forward)} sentences, reverse {len(reverse)}",
                         expected="alignments of the same sentence pairs")
    out_links = np.empty((fwd_links.shape[0] + rev_links.shape[0], 2), dtype=np.int32)
    out_offsets = np.empty_like(fwd_offsets)
    n = _kernels.symmetrize(fwd_links, fwd_offsets, rev_links, rev_offsets, METHODS[method],
                            out_links, out_offsets)
    return Alignment(out_links[:n].copy(), out_offsets)


def intersection(forward: Alignment, reverse: Alignment) -> Alignment:
    """Links in both alignments."""
    return symmetrize(forward, reverse, "intersection")


def union(forward: Alignment, reverse: Alignment) -> Alignment:
    """Links in either alignment."""
    return symmetrize(forward, reverse, "union")


def grow_diag_final_and(forward: Alignment, reverse: Alignment) -> Alignment:
    """grow-diag-final-and as fast_align's ``atools -c grow-diag-final-and -i forward -j reverse``."""
    return symmetrize(forward, reverse, "grow-diag-final-and")
