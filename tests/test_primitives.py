"""The shared numba primitives against plain Python references."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from minismt._primitives import hash_find, hash_index

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
