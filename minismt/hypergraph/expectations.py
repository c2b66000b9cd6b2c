"""Expectations over all derivations of a forest: the first- and second-order expectation semirings.

Li & Eisner (2009, "First- and second-order expectation semirings with applications to minimum-risk
training on translation forests"). A derivation ``d`` has probability ``p(d) = exp(gamma w . f(d)) / Z``
(``gamma``: the scale, Smith & Eisner 2006's temperature inverse) and additively decomposed values
``r(d) = sum_{e in d} r_e`` (any edge-local vector: features, loss or BLEU statistics of split-state
forests, the edge score itself for the entropy).

- **First order** (Table 1: ``<p, p r>``, ``(x)`` is ``<p1 p2, p1 r2 + p2 r1>``): :func:`first_order` runs the
  inside and outside traversals over that semiring and gives ``log Z``, ``E[r]`` and, per edge, its
  posterior ``mu_e`` (expected count) with ``E_e[r]``, the expectation of ``r`` over the derivations through
  ``e`` weighted by ``p(d)`` times the uses of ``e``. :func:`expected_features` is ``E[f] = sum_e mu_e f_e``.
- **Second order** (Table 3: ``<p, p r, p s, p r s^T>``): the expected products ``E[r s^T]`` are computed as
  the paper's inside-outside speed-up does, from the first-order edge marginals of ``r`` alone:
  ``E[r s^T] = sum_e mu_e E_e[r] s_e^T`` for any edge-local ``s`` (:func:`expected_products`), so ``s`` may be
  the sparse feature vectors of thousands of features without a dense value per node. Their use is the
  gradient of an expectation, ``dE[r]/dw = gamma (E[r f^T] - E[r] E[f]^T)`` (:func:`expectation_gradient`).

Values are kept as log masses and conditional expectations (:mod:`._expectation_kernels`), so nothing
overflows on long sentences. Each function takes weights ``w`` (array or mapping) or, without them, the
scores of a reweighted forest.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from minismt.errors import InputError
from minismt.hypergraph import _expectation_kernels as _kernels
from minismt.hypergraph import _kernels as _graph_kernels
from minismt.hypergraph.graph import Hypergraph, concatenated


@dataclass(frozen=True)
class FirstOrder:
    """The first-order expectations of an edge-local ``r`` (``R`` values per edge) over a forest.

    ``log_z``: the log partition ``log Z``; ``expectation``: ``E[r]`` (``R``); ``posteriors``: each edge's
    expected count ``mu_e``; ``edge_expectations``: ``E_e[r]`` (``E x R``), ``r``'s expectation over the goal
    derivations through edge ``e`` (0 where none is). ``sum_e mu_e r_e = E[r]``.
    """

    log_z: float
    expectation: np.ndarray
    posteriors: np.ndarray
    edge_expectations: np.ndarray


def _scores(hg: Hypergraph, w, scale: float) -> np.ndarray:
    if not (isinstance(scale, (int, float)) and math.isfinite(scale)):
        raise InputError(f"scale={scale!r}", expected="a finite number")
    return hg.edge_scores(w) * float(scale)


def _edge_values(hg: Hypergraph, values, name: str) -> np.ndarray:
    """``values`` as a contiguous float64 ``E x R`` array (a 1-d array is one value per edge)."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[0] != hg.n_edges:
        raise InputError(f"{name} has shape {np.shape(values)}", expected=f"({hg.n_edges},) or ({hg.n_edges}, R)")
    if not np.all(np.isfinite(array)):
        raise InputError(f"{name} has a value that is not finite", expected="finite edge values")
    return np.ascontiguousarray(array)


def first_order(hg: Hypergraph, values, w=None, scale: float = 1.0) -> FirstOrder:
    """The first-order expectation semiring's inside-outside over ``hg`` for the edge values ``values``
    (``E`` or ``E x R``), with ``p(d)`` proportional to ``exp(scale * w . f(d))``. An empty forest has
    ``log Z = -inf`` and zero expectations."""
    r = _edge_values(hg, values, "values")
    if hg.n_nodes == 0:
        return FirstOrder(-math.inf, np.zeros(r.shape[1]), np.zeros(0), np.zeros((0, r.shape[1])))
    return _first_order(hg, r, _scores(hg, w, scale))


def _first_order(hg: Hypergraph, r: np.ndarray, score: np.ndarray) -> FirstOrder:
    """:func:`first_order` of a non-empty forest with edge scores ``score``."""
    dim = r.shape[1]
    log_beta, r_beta = np.empty(hg.n_nodes), np.empty((hg.n_nodes, dim))
    _kernels.first_order_inside(hg.in_offsets, hg.tail_offsets, hg.tails, score, r, log_beta, r_beta)
    log_alpha, r_alpha = np.empty(hg.n_nodes), np.empty((hg.n_nodes, dim))
    _kernels.first_order_outside(hg.edge_head, hg.tail_offsets, hg.tails, score, r, log_beta, r_beta, log_alpha,
                                 r_alpha)
    log_mass, r_edge = np.empty(hg.n_edges), np.empty((hg.n_edges, dim))
    _kernels.first_order_edges(hg.edge_head, hg.tail_offsets, hg.tails, score, r, log_beta, r_beta, log_alpha,
                               r_alpha, log_mass, r_edge)
    log_z = float(log_beta[hg.goal])
    posteriors = np.exp(log_mass - log_z) if log_z > -math.inf else np.zeros(hg.n_edges)
    r_edge[posteriors == 0.0] = 0.0
    return FirstOrder(log_z, r_beta[hg.goal].copy(), posteriors, r_edge)


def _feature_dim(hg: Hypergraph) -> int:
    return max(len(hg.space), hg.feat_dim)


def edge_posteriors(hg: Hypergraph, w=None, scale: float = 1.0) -> np.ndarray:
    """Each edge's posterior (expected count) under ``scale * w``: :meth:`Hypergraph.edge_posteriors` of the
    scaled scores."""
    scored = copy.copy(hg)
    scored.scores = _scores(hg, w, scale)
    return scored.edge_posteriors()


def expected_features(hg: Hypergraph, w=None, scale: float = 1.0) -> np.ndarray:
    """``E[f]``, the expected feature vector over the feature space (sparse features included)."""
    out = np.zeros(_feature_dim(hg))
    if hg.n_nodes:
        _kernels.sparse_expectation(edge_posteriors(hg, w, scale), hg.feat_offsets, hg.feat_ids, hg.feat_values,
                                    out)
    return out


def expected_products(hg: Hypergraph, values, w=None, scale: float = 1.0, other=None) -> np.ndarray:
    """``E[r s^T]`` (``R x S``): ``r`` the edge values ``values``, ``s`` the edge values ``other`` (``E x S``)
    or, without ``other``, the edges' features over the feature space (``R x`` its size)."""
    result = first_order(hg, values, w, scale)
    weighted = result.edge_expectations * result.posteriors[:, None]
    if other is not None:
        return weighted.T @ _edge_values(hg, other, "other")
    out = np.zeros((weighted.shape[1], _feature_dim(hg)))
    if hg.n_nodes:
        _kernels.sparse_products(result.posteriors, result.edge_expectations, hg.feat_offsets, hg.feat_ids,
                                 hg.feat_values, out)
    return out


def expectation_gradient(hg: Hypergraph, values, w=None, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``E[r]`` and its gradient in the weights, ``scale (E[r f^T] - E[r] E[f]^T)`` (``R x`` the feature space's
    size): the covariance of ``r`` and the features under ``p``, what minimum-risk training follows."""
    result, gradient = first_order_with_gradient(hg, values, w, scale)
    return result.expectation, gradient


def first_order_with_gradient(hg: Hypergraph, values, w=None, scale: float = 1.0) -> tuple[FirstOrder, np.ndarray]:
    """:func:`first_order` and the gradient of :func:`expectation_gradient`, from one inside-outside pass."""
    result = first_order(hg, values, w, scale)
    dim = _feature_dim(hg)
    products = np.zeros((result.expectation.shape[0], dim))
    features = np.zeros(dim)
    if hg.n_nodes:
        _kernels.sparse_products(result.posteriors, result.edge_expectations, hg.feat_offsets, hg.feat_ids,
                                 hg.feat_values, products)
        _kernels.sparse_expectation(result.posteriors, hg.feat_offsets, hg.feat_ids, hg.feat_values, features)
    return result, float(scale) * (products - np.outer(result.expectation, features))


def entropy(hg: Hypergraph, w=None, scale: float = 1.0) -> float:
    """The entropy of ``p`` over the derivations, ``log Z - E[scale w . f(d)]`` (in nats): the first-order
    expectation of the edge scores (Li & Eisner 2009, sec. 3; the entropy term of Smith & Eisner 2006's
    deterministic annealing). 0 for an empty forest."""
    if hg.n_nodes == 0:
        return 0.0
    scores = _scores(hg, w, scale)
    result = _first_order(hg, np.ascontiguousarray(scores[:, None]), scores)
    return max(0.0, result.log_z - float(result.expectation[0]))


@dataclass(frozen=True)
class BatchExpectations:
    """The first-order expectations of every forest of an :class:`ExpectationBatch` under one weight vector:
    ``log_z`` (F), ``expectation`` (``F x R``: ``E_f[r]``) and ``score_expectation`` (F: ``E_f[scale w . f]``,
    so that ``log_z - score_expectation`` is each forest's entropy)."""

    log_z: np.ndarray
    expectation: np.ndarray
    score_expectation: np.ndarray


class ExpectationBatch:
    """Edge-local values ``r`` over many forests, their expectations and the gradients of those, in two
    batched kernel passes instead of a first-order semiring traversal per forest and expectation.

    ``pieces``: ``(forest, structure, origin, values)`` per forest: ``structure`` is the forest the
    derivations are enumerated over (``forest`` itself, or ``forest`` split by its n-gram or BLEU state
    (:mod:`minismt.hypergraph.ngrams`, which may leave out the features)), ``origin``
    each structure edge's edge in ``forest`` (-1: an edge with no features, score 0), and ``values`` its ``E x R``
    edge values (any numeric type: small integer counts stay small). Scores and features are ``forest``'s, so a
    split forest's many copies of an edge cost no feature storage and the gradient's sparse pass runs over the
    unsplit edges.

    :meth:`evaluate` is one log inside-outside pass over every structure (the posteriors, ``log Z``,
    ``E[r]``, ``E[score]``); :meth:`gradient` then gives the gradient in ``w`` of any linear function of the
    expectations, ``sum_f c . E_f[r] + c_score E_f[score]`` (the score held fixed: the covariance with the
    features, Li & Eisner 2009 sec. 4.1), from the conditional inside and outside expectations of the one
    edge value ``c . r + c_score score`` (:func:`._kernels.batch_covariance_weights`): the projection a
    minimum-risk objective needs (``c`` its derivative in the expectations) costs one more pass that only
    multiplies and adds, however many values ``r`` has. Equal to :func:`first_order_with_gradient` per forest.
    """

    def __init__(self, pieces):
        pieces = list(pieces)
        if not pieces:
            raise InputError("no forests", expected="at least one (forest, structure, origin, values)")
        self.space = pieces[0][0].space
        if any(forest.space is not self.space for forest, *_ in pieces):
            raise InputError("the forests do not share one feature space")
        structures = [structure for _, structure, _, _ in pieces]
        values = [np.asarray(v) for *_, v in pieces]
        dims = {v.shape[1] if v.ndim == 2 else -1 for v in values}
        if len(dims) != 1 or -1 in dims:
            raise InputError("the forests' edge values differ in width or are not 2-d", expected="E x R arrays")
        for (forest, structure, origin, value) in pieces:
            if structure.n_nodes == 0 or structure.n_edges == 0:
                raise InputError("a forest without a derivation", expected="non-empty forests")
            if np.shape(origin) != (structure.n_edges,) or value.shape[0] != structure.n_edges:
                raise InputError(f"{np.shape(origin)[0]} origins and {value.shape[0]} values for "
                                 f"{structure.n_edges} edges", expected="one of each per structure edge")
            if origin.size and (origin.max() >= forest.n_edges or origin.min() < -1):
                raise InputError("an origin that is not an edge of its forest")
        n_nodes = np.array([s.n_nodes for s in structures], dtype=np.int64)
        n_edges = np.array([s.n_edges for s in structures], dtype=np.int64)
        self.node_off = np.concatenate([[0], np.cumsum(n_nodes)])
        self.edge_off = np.concatenate([[0], np.cumsum(n_edges)])
        node_base = self.node_off[:-1]
        self.in_offsets, _ = concatenated(structures, "in_offsets", "in_offsets")
        self.tail_offsets, self.tails = concatenated(structures, "tail_offsets", "tails",
                                                     lambda tails, i: tails.astype(np.int64) + node_base[i])
        self.edge_head = np.concatenate([s.edge_head.astype(np.int64) + base
                                         for s, base in zip(structures, node_base)])
        self.values = np.ascontiguousarray(np.concatenate(values))
        forests = [forest for forest, *_ in pieces]
        forest_edges = np.concatenate([[0], np.cumsum([f.n_edges for f in forests])])
        self.origin = np.concatenate([np.where(np.asarray(o) >= 0, np.asarray(o) + base, -1)
                                      for (_, _, o, _), base in zip(pieces, forest_edges[:-1])])
        self.feat_offsets, self.feat_ids = concatenated(forests, "feat_offsets", "feat_ids")
        _, self.feat_values = concatenated(forests, "feat_offsets", "feat_values")
        self._widest = max(forests, key=lambda forest: forest.feat_dim)
        self.n_forest_edges = int(forest_edges[-1])
        self.n_forests = len(pieces)
        self.n_edges = int(self.edge_off[-1])
        n = int(self.node_off[-1])
        self._log_beta, self._log_alpha, self._node_posterior = np.empty(n), np.empty(n), np.empty(n)
        self._posterior, self._score = np.empty(self.n_edges), np.empty(self.n_edges)
        self._scale = None

    def evaluate(self, w, scale: float = 1.0) -> BatchExpectations:
        """Every forest's ``log Z``, ``E[r]`` and ``E[score]`` with ``p(d)`` proportional to
        ``exp(scale * w . f(d))``; :meth:`gradient` then refers to these weights."""
        if not (isinstance(scale, (int, float)) and math.isfinite(scale)):
            raise InputError(f"scale={scale!r}", expected="a finite number")
        w = self._widest.weight_array(w)
        forest_scores = np.empty(self.n_forest_edges)
        _graph_kernels.edge_scores(self.feat_offsets, self.feat_ids, self.feat_values, w, forest_scores)
        if not np.all(np.isfinite(forest_scores)):
            raise InputError("the weights give an edge an infinite score", expected="finite edge scores")
        forest_scores *= float(scale)
        self._score[:] = np.where(self.origin >= 0, forest_scores[np.maximum(self.origin, 0)], 0.0)
        log_z = np.empty(self.n_forests)
        expectation = np.empty((self.n_forests, self.values.shape[1]))
        score_expectation = np.empty(self.n_forests)
        _kernels.batch_posteriors(self.node_off, self.edge_off, self.in_offsets, self.edge_head, self.tail_offsets,
                                  self.tails, self._score, self.values, self._log_beta, self._log_alpha,
                                  self._posterior, self._node_posterior, log_z, expectation, score_expectation)
        self._scale = float(scale)
        return BatchExpectations(log_z, expectation, score_expectation)

    def gradient(self, coefficients, score_coefficient: float = 0.0) -> np.ndarray:
        """The gradient in ``w`` of ``sum_f coefficients . E_f[r] + score_coefficient E_f[score]`` at the
        weights of the last :meth:`evaluate`, the score held fixed: ``scale * sum_f Cov_f(q, f)`` over the
        feature space, ``q = coefficients . r + score_coefficient score``."""
        if self._scale is None:
            raise InputError("gradient() before evaluate()", expected="evaluate(w) first")
        coefficients = np.asarray(coefficients, dtype=np.float64)
        if coefficients.shape != (self.values.shape[1],):
            raise InputError(f"{coefficients.shape} coefficients", expected=f"({self.values.shape[1]},)")
        n = int(self.node_off[-1])
        weights = np.empty(self.n_edges)
        _kernels.batch_covariance_weights(self.node_off, self.edge_off, self.in_offsets, self.edge_head,
                                          self.tail_offsets, self.tails, self._score, self.values, coefficients,
                                          float(score_coefficient), self._posterior, self._node_posterior,
                                          np.empty(n), np.empty(n), weights)
        kept = self.origin >= 0
        per_edge = np.bincount(self.origin[kept], weights=weights[kept], minlength=self.n_forest_edges)
        out = np.zeros(_feature_dim(self._widest))
        _kernels.sparse_expectation(per_edge, self.feat_offsets, self.feat_ids, self.feat_values, out)
        return self._scale * out
