"""Lexicalised reordering probabilities, msd-bidirectional-fe (Tillmann 2004; Koehn et al.
2005), as Moses' ``lexical-reordering-score`` computes them from the word-based
orientations of ``extract`` (:mod:`minismt.extract._kernels`).

For each phrase pair (f, e) and direction (backward: relative to the previous phrase,
forward: to the next one), with c(o, f, e) the number of extracted occurrences with
orientation o in {mono, swap, discontinuous}:

    p(o | f, e) = (c(o, f, e) + s_o) / sum_o' (c(o', f, e) + s_o')

Moses' default (``train-model.perl -reordering-smooth 0.5``) is constant smoothing,
s_o = sigma: a singleton gives (1 + 0.5) / (1 + 1.5) = 0.6 and 0.5 / 2.5 = 0.2. With
``--SmoothWithCounts`` (``-reordering-smooth 0.5u``) the smoothing follows the global
orientation counts C_o over all N extracted occurrences:

    s_o = sigma * (C_o + 0.1) / N

(``ScorerMSD::createSmoothing``), i.e. roughly (c(o, f, e) + sigma p(o)) / (c(f, e) + sigma).
"""

from __future__ import annotations

import numpy as np


def msd_probabilities(counts: np.ndarray, smoothing: float = 0.5,
                      smooth_with_counts: bool = False) -> np.ndarray:
    """Smoothed probabilities ``float64[P, 6]`` from orientation counts ``[P, 6]`` (backward
    mono, swap, discontinuous, then forward mono, swap, discontinuous)."""
    counts = np.asarray(counts)
    out = np.empty(counts.shape, dtype=np.float64)
    for first in (0, 3):
        block = counts[:, first:first + 3]
        if smooth_with_counts:
            totals = block.sum(axis=0, dtype=np.float64)
            total = totals.sum()
            prior = smoothing * (totals + 0.1) / total if total > 0 else np.zeros(3)
        else:
            prior = np.full(3, float(smoothing))
        smoothed = out[:, first:first + 3]
        np.add(block, prior, out=smoothed)
        smoothed /= ((smoothed[:, 0] + smoothed[:, 1]) + smoothed[:, 2])[:, None]
    return out
