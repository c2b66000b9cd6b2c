"""Numba primitives shared by every kernel module: array growth, log-sum-exp, 64-bit hashing.

Kernels that build arrays of unknown size (hypotheses, arcs, derivations,
envelope lines) grow them geometrically with :func:`grow` / :func:`grow_rows`;
semiring code adds probabilities in log space with :func:`logaddexp`; hash
tables (n-gram tables, recombination states, spans, derivation sets) mix
integers with the splitmix64 finaliser :func:`mix64` (Steele, Lea & Flood
2014, "Fast splittable pseudorandom number generators") and :func:`mix_in`,
and hash word sequences polynomially with :data:`POLY_BASE`; the readers that intern the words
and names of a file's bytes hash them with FNV-1a (:func:`fnv1a`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
"""2**64 / golden ratio: splitmix64's increment, the seed of every hash chain."""
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
POLY_BASE = np.uint64(0x100000001B3)
"""The 64-bit FNV prime, the base of the polynomial hashes of word sequences and of :func:`fnv1a`."""
FNV_OFFSET = np.uint64(0xCBF29CE484222325)
"""The 64-bit FNV offset basis, where :func:`fnv1a` starts."""


@njit(cache=True)
def grow(a, need):
    """``a`` itself if it holds ``need`` items, else a copy with at least twice the room."""
    if need <= a.shape[0]:
        return a
    b = np.empty(max(need, 2 * a.shape[0], 16), a.dtype)
    b[:a.shape[0]] = a
    return b


@njit(cache=True)
def grow_rows(a, need):
    """``a`` itself if it has ``need`` rows, else a copy with at least twice the rows."""
    if need <= a.shape[0]:
        return a
    b = np.empty((max(need, 2 * a.shape[0], 16), a.shape[1]), a.dtype)
    b[:a.shape[0]] = a
    return b


@njit(cache=True)
def logaddexp(a, b):
    """``log(exp(a) + exp(b))`` without overflow; ``-inf`` if both are ``-inf``. A ``-inf`` side
    (an outside score not reached yet) returns the other at once, without ``exp`` and ``log1p``."""
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@njit(cache=True, inline="always")
def fnv1a(data, start, end):
    """The 64-bit FNV-1a hash of the bytes ``data[start:end]`` (kernels that intern words and names
    read from files)."""
    h = FNV_OFFSET
    for i in range(start, end):
        h = (h ^ np.uint64(data[i])) * POLY_BASE
    return h


@njit(cache=True, inline="always")
def mix64(x):
    """The splitmix64 finaliser: a bijection of uint64 that spreads every input bit."""
    x = (x ^ (x >> np.uint64(30))) * MIX1
    x = (x ^ (x >> np.uint64(27))) * MIX2
    return x ^ (x >> np.uint64(31))


@njit(cache=True, inline="always")
def mix_in(h, x):
    """The hash ``h`` extended by the non-negative integer ``x``."""
    return mix64(h ^ (np.uint64(x) + GOLDEN))
