"""KBest against slow list-of-tuples references: scores, argmax, dedup, merge, aggregate, oracles."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.kbest import KBest, KBestBuilder
from minismt.metrics import BleuReferences, sentence_bleu

DENSE = ["LM0_0", "TM0_0", "WP0_0"]
SPARSE = ["sp_a", "sp_b", "sp_c"]
WORDS = ["a", "b", "c", "ü"]

# one hypothesis: (text, dense values, {sparse name: value})
hypothesis_st = st.tuples(
    st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join),
    st.tuples(*[st.sampled_from([0.0, 1.0, -2.5]) for _ in DENSE]),
    st.dictionaries(st.sampled_from(SPARSE), st.sampled_from([1.0, -0.5]), max_size=2))
lists_st = st.lists(st.lists(hypothesis_st, max_size=6), min_size=1, max_size=4)


def build(space, nested, stats=False):
    builder = KBestBuilder(space)
    for s, hyps in enumerate(nested):
        for text, dense, sparse in hyps:
            idx = [space.add(n) for n in sorted(sparse)]
            builder.add(s, text, dense, idx, [sparse[n] for n in sorted(sparse)],
                        stats=[len(text.split())] * 9 if stats else None)
    return builder.build(len(nested))


def as_nested(kb):
    out = []
    for i in range(kb.n_instances):
        rows = []
        for r in kb.rows(i):
            idx, val = kb.sparse_row(r)
            rows.append((kb.hypothesis(r), tuple(kb.features[r].tolist()),
                         {kb.space.name(int(k)): float(v) for k, v in zip(idx, val)}))
        out.append(rows)
    return out


def slow_dedup(rows, by):
    seen, out = [], []
    for text, dense, sparse in rows:
        key = text if by == "string" else (text, dense, tuple(sorted(sparse.items())))
        if key not in seen:
            seen.append(key)
            out.append((text, dense, sparse))
    return out


def slow_score(row, w):
    text, dense, sparse = row
    return sum(d * w[n] for d, n in zip(dense, DENSE)) + sum(v * w[n] for n, v in sparse.items())


@settings(max_examples=150, deadline=None)
@given(lists_st, st.lists(st.floats(-3, 3), min_size=6, max_size=6))
def test_build_scores_and_model_best_equal_slow(nested, wvals):
    space = FeatureSpace(DENSE, SPARSE)
    kb = build(space, nested)
    assert as_nested(kb) == [[(t, tuple(map(float, d)), s) for t, d, s in hyps] for hyps in nested]
    w = dict(zip(DENSE + SPARSE, wvals))
    scores = kb.scores(w)
    best = kb.model_best(w)
    for i, hyps in enumerate(nested):
        slow = [slow_score(h, w) for h in hyps]
        np.testing.assert_allclose(scores[kb.offsets[i]:kb.offsets[i + 1]], slow, rtol=1e-12, atol=1e-12)
        if hyps:
            top = max(scores[kb.offsets[i]:kb.offsets[i + 1]])
            first = next(k for k in kb.rows(i) if scores[k] == top)
            assert best[i] == first
        else:
            assert best[i] == -1


@settings(max_examples=150, deadline=None)
@given(lists_st, lists_st, st.sampled_from(["hypothesis", "string"]))
def test_merge_equals_slow_concatenate_then_dedup(first, second, by):
    n = min(len(first), len(second))
    first, second = first[:n], second[:n]
    space = FeatureSpace(DENSE, SPARSE)
    a, b = build(space, first, stats=True), build(space, second, stats=True)
    merged = a.merge(b, by=by)
    expected = [slow_dedup(x + y, by) for x, y in zip(first, second)]
    assert as_nested(merged) == [[(t, tuple(map(float, d)), s) for t, d, s in rows] for rows in expected]
    # statistics travel with their rows
    assert [merged.stats[r, 0] for r in range(merged.n_hypotheses)] == \
        [len(t.split()) for rows in expected for t, _, _ in rows]


def test_merge_keeps_old_rows_first_and_counts_new():
    space = FeatureSpace(DENSE)
    a = build(space, [[("x", (1, 0, 0), {}), ("y", (0, 1, 0), {})]])
    b = build(space, [[("y", (0, 1, 0), {}), ("z", (0, 0, 1), {}), ("x", (1, 0, 0), {})]])
    m = a.merge(b)
    assert m.texts() == ["x", "y", "z"]
    assert m.n_hypotheses - a.n_hypotheses == 1
    assert a.merge(a).n_hypotheses == a.n_hypotheses


def test_merge_with_grown_feature_space():
    space = FeatureSpace(DENSE)
    a = build(space, [[("x", (1, 0, 0), {})]])
    b = build(space, [[("x", (1, 0, 0), {"new_feature": 2.0})]])  # space grows while reading b
    m = a.merge(b)
    assert m.n_hypotheses == 2 and m.space is space
    assert m.feature_dict(1)["new_feature"] == 2.0


def test_aggregate_keeps_each_iteration_as_instances():
    space = FeatureSpace(DENSE)
    a = build(space, [[("x", (1, 0, 0), {})], [("y", (0, 1, 0), {})]])
    b = build(space, [[("x", (1, 0, 0), {})], []])
    agg = KBest.aggregate([a, b])
    assert agg.n_instances == 4
    assert agg.sentence_ids.tolist() == [0, 1, 0, 1]
    assert agg.iterations.tolist() == [0, 0, 1, 1]
    assert agg.offsets.tolist() == [0, 1, 2, 3, 3]
    assert agg.texts() == ["x", "y", "x"]


def test_oracle_is_highest_sentence_bleu_plus1():
    refs = BleuReferences([["a b c d"], ["x y"]])
    nested = [["a b", "a b c d", "a b c d"], ["z", "x y z"]]
    space = FeatureSpace(DENSE)
    builder = KBestBuilder(space)
    for s, hyps in enumerate(nested):
        for h in hyps:
            builder.add(s, h, [0, 0, 0])
    kb = builder.build()
    kb.set_stats(refs.kbest_stats(kb))
    assert kb.oracle().tolist() == [1, 4]
    bleu1 = sentence_bleu(kb.stats)
    assert bleu1[1] == pytest.approx(1.0)
    assert kb.bleu([0, 0, 0]) == pytest.approx(0.0, abs=1e-12) or kb.bleu([0, 0, 0]) > 0


def test_save_load_round_trip_without_pickle(tmp_path):
    space = FeatureSpace(DENSE, SPARSE)
    kb = build(space, [[("ä b", (1, 2, 3), {"sp_a": 1.0})], [("c", (0, 0, 0), {})]], stats=True)
    path = tmp_path / "kb.npz"
    kb.save(path)
    back = KBest.load(path)
    assert as_nested(back) == as_nested(kb)
    assert np.array_equal(back.stats, kb.stats)
    assert back.space == kb.space
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError):
        KBest.load(tmp_path / "bad.npz")


def test_nan_features_and_bad_order_are_input_errors():
    space = FeatureSpace(DENSE)
    builder = KBestBuilder(space)
    builder.add(0, "x", [np.nan, 0, 0])
    with pytest.raises(InputError, match="finite"):
        builder.build()
    builder = KBestBuilder(space)
    builder.add(1, "x", [0, 0, 0])
    with pytest.raises(InputError, match="non-decreasing"):
        builder.add(0, "y", [0, 0, 0])
    with pytest.raises(InputError, match="dense values"):
        builder.add(1, "y", [0, 0])


def test_kbest_without_stats_refuses_bleu():
    kb = build(FeatureSpace(DENSE), [[("x", (0, 0, 0), {})]])
    with pytest.raises(InputError, match="statistics"):
        kb.oracle()


@settings(max_examples=100, deadline=None)
@given(lists_st, st.sampled_from(["hypothesis", "string"]))
def test_dedup_survives_hash_collisions(nested, by):
    """With every hash equal, rows are told apart by full comparison alone."""
    from minismt.kbest import _kernels
    kb = build(FeatureSpace(DENSE, SPARSE), nested)
    keep = _kernels.first_occurrences(kb.offsets, np.zeros(kb.n_hypotheses, dtype=np.uint64), kb.text,
                                      kb.text_offsets, kb.features, kb.indptr, kb.indices, kb.values,
                                      by == "hypothesis")
    expected = [slow_dedup(rows, by) for rows in as_nested(kb)]
    assert as_nested(kb._select(keep)) == expected
    assert as_nested(kb.dedup(by)) == expected


@pytest.fixture(scope="module")
def saved_list(tmp_path_factory):
    folder = tmp_path_factory.mktemp("load")
    build(FeatureSpace(DENSE, SPARSE), [[("a b", (1, 2, 3), {"sp_a": 1.0})]],
          stats=True).save(folder / "good.npz")
    return folder, (folder / "good.npz").read_bytes()


@settings(max_examples=2000, deadline=None)
@given(data=st.binary(max_size=600), cut=st.integers(0, 400))
def test_load_of_random_or_truncated_files_raises_only_input_error(saved_list, data, cut):
    """KBest.load on random bytes, or on a real saved list cut short or overwritten in part."""
    folder, raw = saved_list
    for k, blob in enumerate([data, raw[:cut], raw[:cut] + data + raw[cut + len(data):]]):
        path = folder / f"case{k}.npz"
        path.write_bytes(blob)
        try:
            KBest.load(path)
        except InputError:
            pass
