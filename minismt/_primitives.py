"""Numba primitives shared by every kernel module: array growth, log-sum-exp, 64-bit hashing.

Kernels that build arrays of unknown size (hypotheses, arcs, derivations,
envelope lines) grow them geometrically with :func:`grow` / :func:`grow_rows`;
semiring code adds probabilities in log space with :func:`logaddexp`; best-first searches keep
index heaps (:func:`heap_push` / :func:`heap_pop`); hash tables (n-gram tables,
recombination states, spans, derivation sets, and keys to positions: :func:`hash_index` /
:func:`hash_find`) mix integers with the splitmix64 finaliser :func:`mix64` (Steele, Lea & Flood
2014, "Fast splittable pseudorandom number generators") and :func:`mix_in`,
and hash word sequences polynomially with :data:`POLY_BASE`; the readers that intern the words
and names of a file's bytes hash them with FNV-1a (:func:`fnv1a`). Hot kernels that allocate
nothing compile without reference counting (:func:`njit_borrowing`), and lookups into tables
larger than the caches fetch their slots ahead (:func:`prefetch`).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
"""2**64 / golden ratio: splitmix64's increment, the seed of every hash chain."""
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
POLY_BASE = np.uint64(0x100000001B3)
"""The 64-bit FNV prime, the base of the polynomial hashes of word sequences and of :func:`fnv1a`."""
FNV_OFFSET = np.uint64(0xCBF29CE484222325)
"""The 64-bit FNV offset basis, where :func:`fnv1a` starts."""


def _numba_knows_nrt_option() -> bool:
    try:
        from numba.core.cpu import CPUTargetOptions
    except ImportError:
        return False
    return hasattr(CPUTargetOptions, "_nrt")


_WITHOUT_REFCOUNTS = {"_nrt": False} if _numba_knows_nrt_option() else {}


def njit_borrowing(function):
    """``njit(cache=True)`` for a hot kernel that allocates nothing and only works in arrays its caller
    owns: compiled without numba's reference counting (the ``_nrt=False`` option), whose atomic
    increment and decrement of every array argument and view, at every call, were 40% of the Hiero
    search's time.  Plain ``njit(cache=True)`` where numba does not know the option."""
    return njit(cache=True, **_WITHOUT_REFCOUNTS)(function)


@njit(cache=True)
def power_of_two(n):
    """The least power of two >= ``n`` and >= 16: the size of an open-addressing table (probed with a
    mask) and of storage that doubles."""
    size = 16
    while size < n:
        size *= 2
    return size


@njit(cache=True)
def hash_index(keys):
    """An open-addressing table of the distinct uint64 ``keys`` and their positions, for
    :func:`hash_find`: rows ``(key, position + 1)`` (0: an empty slot), a power of two at least
    twice their number, so that a lookup reads one row in the common case."""
    table = np.zeros((power_of_two(2 * keys.shape[0]), 2), dtype=np.uint64)
    mask = table.shape[0] - 1
    for i in range(keys.shape[0]):
        slot = np.int64(mix64(keys[i]) & np.uint64(mask))
        while table[slot, 1] != 0:
            slot = (slot + 1) & mask
        table[slot, 0] = keys[i]
        table[slot, 1] = np.uint64(i + 1)
    return table


@njit(cache=True)
def hash_find(table, queries):
    """The position of each of ``queries`` among the keys of ``table`` (:func:`hash_index`), -1 if
    it is not one."""
    out = np.empty(queries.shape[0], dtype=np.int64)
    mask = table.shape[0] - 1
    for q in range(queries.shape[0]):
        key = queries[q]
        slot = np.int64(mix64(key) & np.uint64(mask))
        out[q] = -1
        while table[slot, 1] != 0:
            if table[slot, 0] == key:
                out[q] = np.int64(table[slot, 1]) - 1
                break
            slot = (slot + 1) & mask
    return out


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


@njit(cache=True, inline="always")
def _heap_before(a, b, score):
    """Heap order of items: the higher ``score`` first, then the smaller index (the earlier made)."""
    return (score[a] > score[b]) | ((score[a] == score[b]) & (a < b))   # no branch to mispredict


@njit_borrowing
def heap_push(heap, lo, size, item, score):
    """Push ``item`` on the binary heap ``heap[lo:lo + size]`` of indices into ``score`` (best on top:
    the highest score, then the smallest index); the caller counts the new size."""
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if not _heap_before(item, heap[lo + parent], score):
            break
        heap[lo + i] = heap[lo + parent]
        i = parent
    heap[lo + i] = item


@njit_borrowing
def heap_pop(heap, lo, size, score):
    """Remove and return the top of the heap of :func:`heap_push` holding ``size`` items.

    Bottom-up (Floyd): the hole at the top sinks to a leaf along the better children (one comparison
    per level), and the last item rises from there (rarely more than a level or two), instead of
    sinking the last item from the top with two comparisons per level.  The order is a strict total
    one, so the items come out in the same order either way."""
    top = heap[lo]
    size -= 1
    last = heap[lo + size]
    i = 0
    child = 1
    while child < size:
        if child + 1 < size:
            child += np.int64(_heap_before(heap[lo + child + 1], heap[lo + child], score))
        heap[lo + i] = heap[lo + child]
        i = child
        child = 2 * i + 1
    while i > 0:
        parent = (i - 1) // 2
        if not _heap_before(last, heap[lo + parent], score):
            break
        heap[lo + i] = heap[lo + parent]
        i = parent
    heap[lo + i] = last
    return top


@intrinsic
def prefetch(typingctx, array, index):
    """Ask the CPU to bring ``array[index]`` (1-D, ``0 <= index < len``) into its caches and go on (LLVM's
    ``llvm.prefetch``, for reading): lookups whose addresses are known before they are needed overlap
    their memory latencies instead of paying them one after the other."""
    if not isinstance(array, types.Array) or array.ndim != 1 or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        view = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, array_type, view, [args[1]])
        i32 = ir.IntType(32)
        function_type = ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, i32, i32, i32])
        function = builder.module.declare_intrinsic("llvm.prefetch", [cgutils.voidptr_t], function_type)
        builder.call(function, [builder.bitcast(pointer, cgutils.voidptr_t), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.none(array, index), codegen
