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
from minismt.hypergraph.graph import Hypergraph


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
