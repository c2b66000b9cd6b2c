"""Fixed features: weights a tuning run leaves where they start, and the tuners' view without them.

A feature is fixed when the decoder's configuration says so (Moses: ``tuneable=false`` in moses.ini,
UnknownWordPenalty0 by default, components marked 0 in ``tuneable-components``; cdec: a feature the
start weights file does not name) or the user fixes it by name (``minismt tune --fix``); the user can
also free a feature the configuration fixes (``--free``, where the decoder lists its values).
Names are matched as shell patterns (``fnmatch``: ``--fix 'LexicalReordering0_*'``).

The tuners never see a fixed feature. :class:`FixedFeatures` projects the tuning data (k-best lists,
forests) onto the free features plus, when some fixed feature has a non-zero weight, one column
:data:`FIXED_COLUMN` holding every hypothesis' (edge's) fixed part of the model score,
``sum_j w_j f_j`` over the fixed features, so that the fixed features still count in every score the
tuner compares, as in the decoder. The tuner starts that column's weight at 1 and may move it (MERT and
hypergraph MERT keep it at 1: the column is passed as their ``fixed`` parameter, as Moses' ``mert -o``
keeps features out of its line searches); the tuned weights are then divided by it, which leaves the
fixed weights at their start values and changes no argmax: the decoder translates with the scaled
weights exactly as with the tuner's. Unless the column is informative in the iteration's tuning data
(it varies within some k-best list, or is non-zero on some forest edge; Moses leaves its untuneable
features out of its n-best lists, so there it is 0) the tuner's weight for it is meaningless and
nothing is scaled. If a tuner
gives an informative column a weight <= 0 (the fixed features' score should count against a
translation, which fixed weights cannot express) the free weights are kept unscaled and
:attr:`FixedFeatures.unscaled` counts it.
"""

from __future__ import annotations

import fnmatch
from typing import Callable, Sequence

import numpy as np

from minismt.features import FeatureSpace
from minismt.hypergraph import Hypergraph
from minismt.kbest import KBest

FIXED_COLUMN = "FixedFeatures"
"""The name of the column that carries the fixed features' part of the model score."""


def matches(name: str, patterns: Sequence[str]) -> bool:
    """Whether ``name`` matches one of the shell patterns (case-sensitive)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


class FixedFeatures:
    """The tuners' view of a feature space whose ``is_fixed`` features keep the weights of ``start``.

    ``space`` is the decoder's (it may grow by sparse names; the view follows); ``start`` the run's start
    weights over it. :attr:`space` is the view's own space (free dense names, :data:`FIXED_COLUMN` when
    needed, then free sparse names), grown as the decoder's grows.
    """

    def __init__(self, space: FeatureSpace, start: np.ndarray, is_fixed: Callable[[str], bool]):
        self.full = space
        self.start = np.asarray(start, dtype=np.float64).copy()
        self.is_fixed = is_fixed
        weighted = any(self.start[space.index(n)] != 0.0 for n in space.names if is_fixed(n))
        self.has_column = weighted
        dense = [n for n in space.dense_names if not is_fixed(n)] + ([FIXED_COLUMN] if weighted else [])
        self.space = FeatureSpace(dense)
        self.column = self.space.index(FIXED_COLUMN) if weighted else -1
        self._target = np.zeros(0, dtype=np.int64)  # view index of every full index, -1 when fixed
        self.unscaled = 0
        self.informative = False  # whether the column varied in the data projected since start_iteration
        self._sync()

    def _sync(self) -> None:
        """Extend the index map (and the view's space) to the names the decoder's space has gained."""
        known = self._target.shape[0]
        if known == len(self.full):
            return
        extra = np.empty(len(self.full) - known, dtype=np.int64)
        for k, name in enumerate(self.full.names[known:]):
            if self.is_fixed(name):
                extra[k] = -1
            else:
                extra[k] = self.space.add(name)
        self._target = np.concatenate([self._target, extra])
        if self.start.shape[0] < len(self.full):
            self.start = np.concatenate([self.start, np.zeros(len(self.full) - self.start.shape[0])])

    def start_iteration(self) -> None:
        """Forget whether the column was informative: each iteration's projections decide it anew."""
        self.informative = False

    @property
    def active(self) -> bool:
        """Whether any feature of the decoder's space is fixed (else the view is the space itself)."""
        self._sync()
        return bool((self._target < 0).any())

    def fixed_names(self) -> list[str]:
        """The fixed features met so far, in the decoder's order."""
        self._sync()
        return [self.full.name(int(i)) for i in np.flatnonzero(self._target < 0)]

    def _fixed_weights(self) -> np.ndarray:
        """The start weights of the fixed features, 0 for the free ones (over the full space)."""
        return np.where(self._target < 0, self.start[: self._target.shape[0]], 0.0)

    # ---- weights ---------------------------------------------------------------------
    def weights_in(self, w: np.ndarray) -> np.ndarray:
        """A full weight vector as the tuners see it (the fixed column at 1)."""
        self._sync()
        w = np.asarray(w, dtype=np.float64)
        out = np.zeros(len(self.space))
        free = np.flatnonzero(self._target[: w.shape[0]] >= 0)
        out[self._target[free]] = w[free]
        if self.has_column:
            out[self.column] = 1.0
        return out

    def weights_out(self, w: np.ndarray, count: bool = True) -> np.ndarray:
        """The full weight vector of a tuner's weights: fixed features at their start values, the free ones
        divided by the fixed column's weight when it is positive (else kept, and counted in
        :attr:`unscaled` when ``count``)."""
        self._sync()
        w = np.asarray(w, dtype=np.float64)
        out = self._fixed_weights()
        scale = 1.0
        if self.has_column and self.informative:
            if w[self.column] > 0:
                scale = float(w[self.column])
            elif count:
                self.unscaled += 1
        free = np.flatnonzero(self._target >= 0)
        values = np.zeros(free.shape[0])
        present = self._target[free] < w.shape[0]
        values[present] = w[self._target[free][present]] / scale
        out[free] = values
        return out

    # ---- data ------------------------------------------------------------------------
    def kbest(self, kbest: KBest) -> KBest:
        """``kbest`` over the view's space: free columns kept, fixed ones summed into the fixed column."""
        self._sync()
        target = self._target
        fixed_w = self._fixed_weights()
        n_dense_full = self.full.n_dense
        dense_target = target[:n_dense_full]
        features = np.zeros((kbest.n_hypotheses, self.space.n_dense))
        free_dense = np.flatnonzero(dense_target >= 0)
        features[:, dense_target[free_dense]] = kbest.features[:, free_dense]
        row_of_entry = np.repeat(np.arange(kbest.n_hypotheses), np.diff(kbest.indptr))
        entry_target = target[kbest.indices] if kbest.indices.size else np.zeros(0, dtype=np.int64)
        keep = entry_target >= 0
        if self.has_column:
            fixed_part = kbest.features @ fixed_w[:n_dense_full]
            dropped = ~keep
            fixed_part += np.bincount(row_of_entry[dropped], weights=kbest.values[dropped] *
                                      fixed_w[kbest.indices[dropped]], minlength=kbest.n_hypotheses)
            features[:, self.column] = fixed_part
            sizes = np.diff(kbest.offsets)
            if not self.informative and sizes.any():
                starts = kbest.offsets[:-1][sizes > 0]
                varies = np.maximum.reduceat(fixed_part, starts) != np.minimum.reduceat(fixed_part, starts)
                self.informative = bool(varies.any())
        indptr = np.concatenate([[0], np.cumsum(np.bincount(row_of_entry[keep], minlength=kbest.n_hypotheses))])
        indices = entry_target[keep].astype(np.int32)
        values = kbest.values[keep]
        order = np.lexsort((indices, row_of_entry[keep]))  # view indices sorted within each row
        return KBest(self.space, kbest.offsets, features, kbest.text, kbest.text_offsets, indptr,
                     indices[order], values[order], kbest.stats, kbest.sentence_ids, kbest.iterations)

    def forest(self, graph: Hypergraph) -> Hypergraph:
        """``graph`` over the view's space: each edge's free features kept, its fixed ones summed into
        the fixed column."""
        self._sync()
        n_edges = graph.n_edges
        edge_of_entry = np.repeat(np.arange(n_edges), np.diff(graph.feat_offsets))
        entry_target = self._target[graph.feat_ids] if graph.feat_ids.size else np.zeros(0, dtype=np.int64)
        keep = entry_target >= 0
        edges = [edge_of_entry[keep]]
        ids = [entry_target[keep]]
        values = [graph.feat_values[keep]]
        if self.has_column:
            dropped = ~keep
            fixed_part = np.bincount(edge_of_entry[dropped], weights=graph.feat_values[dropped] *
                                     self._fixed_weights()[graph.feat_ids[dropped]], minlength=n_edges)
            scored = np.flatnonzero(fixed_part != 0.0)
            self.informative = self.informative or scored.size > 0
            edges.append(scored)
            ids.append(np.full(scored.shape[0], self.column, dtype=np.int64))
            values.append(fixed_part[scored])
        edges_all, ids_all, values_all = (np.concatenate(part) for part in (edges, ids, values))
        order = np.lexsort((ids_all, edges_all))
        offsets = np.concatenate([[0], np.cumsum(np.bincount(edges_all, minlength=n_edges))])
        return graph.replace(space=self.space, feat_offsets=offsets, feat_ids=ids_all[order].astype(np.int32),
                             feat_values=values_all[order], scores=None)
