"""The shared numba primitives against plain Python references."""

from __future__ import annotations

import heapq

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from minismt._primitives import hash_find, hash_index, heap_pop, heap_push

KEYS = st.integers(0, 2 ** 64 - 1)


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(KEYS, unique=True, max_size=300), others=st.lists(KEYS, max_size=50),
       small=st.booleans())
def test_hash_find_equals_a_dict(keys, others, small):
    """Every key is found at its position, anything else is -1 (0 and 2**64 - 1 included; keys that
    share their low bits when ``small``: long probe runs)."""
    if small:
        keys = sorted({k % 64 for k in keys} | {0})
    position = {k: i for i, k in enumerate(keys)}
    queries = keys + others + [0, 2 ** 64 - 1]
    table = hash_index(np.array(keys, dtype=np.uint64))
    assert table.shape[0] >= 2 * len(keys) and table.shape[0] & (table.shape[0] - 1) == 0
    found = hash_find(table, np.array(queries, dtype=np.uint64))
    assert found.tolist() == [position.get(q, -1) for q in queries]


@settings(max_examples=100, deadline=None)
@given(scores=st.lists(st.integers(-5, 5), min_size=1, max_size=200), ops=st.lists(st.booleans(), max_size=400),
       lo=st.integers(0, 3))
def test_heap_pops_in_the_order_of_a_sorted_list(scores, ops, lo):
    """Pushes and pops interleaved (``ops``: True pushes the next item, False pops), then the rest popped:
    every pop is the best waiting item (highest score, ties to the smallest index), as heapq says. Few
    distinct scores, so ties are common."""
    score = np.array(scores, dtype=np.float64)
    heap = np.full(lo + len(scores), -7, dtype=np.int64)
    size, pushed, popped, expected, waiting = 0, 0, [], [], []
    for push in ops + [True] * len(scores) + [False] * len(scores):
        if push and pushed < len(scores):
            heap_push(heap, lo, size, pushed, score)
            heapq.heappush(waiting, (-scores[pushed], pushed))
            size += 1
            pushed += 1
        elif not push and size:
            popped.append(int(heap_pop(heap, lo, size, score)))
            expected.append(heapq.heappop(waiting)[1])
            size -= 1
    assert popped == expected and size == 0 and pushed == len(scores)
    assert np.all(heap[:lo] == -7)
