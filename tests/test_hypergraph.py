"""minismt.hypergraph: kernels against brute-force enumeration, cdec fixtures, JSON I/O, drawings."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter, defaultdict
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import shared_path
from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph import (Hypergraph, HypergraphBuilder, dumps_cdec_json, loads_cdec_json, read_cdec_json,
                                to_dot, to_networkx, write_cdec_json)
from minismt.hypergraph.algorithms import best_edges_mask
from minismt.hypergraph.draw import draw_layered, layered_layout, node_layers
from minismt.kbest import kbest_of
from minismt.metrics import BleuReferences
from plugins.cdec.kbest_file import iter_kbest
from plugins.cdec.weights import read_cdec_weights
import random_forests
from random_forests import derivation_table

NAMES = ["f0", "f1", "f2"]
DYADIC = [-2.0, -1.5, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0]
MAX_DERIVATIONS = 300


# ---- brute force ----------------------------------------------------------------------------

def node_counts(hg: Hypergraph, edges: tuple) -> Counter:
    """How often each node occurs in the derivation tree with these edges."""
    counts = Counter(int(hg.edge_head[e]) for e in edges)
    for e in edges:
        for t in hg.edge_tails(e):
            if hg.in_offsets[t] == hg.in_offsets[t + 1]:
                counts[int(t)] += 1
    if hg.in_offsets[hg.goal] == hg.in_offsets[hg.goal + 1]:
        counts[hg.goal] += 1
    return counts


def logsumexp(values) -> float:
    values = list(values)
    if not values:
        return -math.inf
    top = max(values)
    return top + math.log(sum(math.exp(x - top) for x in values))


# ---- random forests -----------------------------------------------------------------------

def forests():
    """The shared random forests (:func:`random_forests.random_forest`): <= 8 nodes, <= 2 tails per edge,
    dyadic features (sums are exact, so ties are exact), labelled and unlabelled nodes."""
    return random_forests.forests(FeatureSpace(NAMES), max_nodes=8, values=DYADIC, labels=("X", "S", None),
                                  words=["a", "b", "c"], max_derivations=MAX_DERIVATIONS)


weights_st = st.lists(st.sampled_from(DYADIC), min_size=3, max_size=3).map(np.array)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(forests(), weights_st)
def test_viterbi_and_inside_equal_brute_force(hg, w):
    scores = hg.edge_scores(w)
    every = derivation_table(hg, scores)
    vit, best = hg.viterbi_scores(w)
    inside = hg.inside(w)
    for v in range(hg.n_nodes):
        assert vit[v] == max(d[0] for d in every[v])
        assert inside[v] == pytest.approx(logsumexp(d[0] for d in every[v]), abs=1e-9)
        assert (best[v] == -1) == (hg.in_offsets[v] == hg.in_offsets[v + 1])
    d = hg.viterbi(w)
    top = max(x[0] for x in every[hg.goal])
    assert d.score == top
    assert (d.score, tuple(d.edges.tolist()), tuple(d.text.split())) in every[hg.goal]
    assert hg.yield_of(d.edges) == d.text
    assert float(d.dense()[:3] @ w) == d.score
    assert hg.log_partition(w) == pytest.approx(logsumexp(x[0] for x in every[hg.goal]), abs=1e-9)
    reweighted = hg.reweight(w)
    assert reweighted.viterbi().score == d.score and reweighted.viterbi().text == d.text


@SETTINGS
@given(forests(), weights_st)
def test_outside_and_posteriors_equal_brute_force_marginals(hg, w):
    scores = hg.edge_scores(w)
    goal = derivation_table(hg, scores)[hg.goal]
    log_z = logsumexp(d[0] for d in goal)
    edge_expect = np.zeros(hg.n_edges)
    node_expect = np.zeros(hg.n_nodes)
    for score, edges, _ in goal:
        p = math.exp(score - log_z)
        for e in edges:
            edge_expect[e] += p
        for v, c in node_counts(hg, edges).items():
            node_expect[v] += c * p
    np.testing.assert_allclose(hg.edge_posteriors(w), edge_expect, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(hg.node_posteriors(w), node_expect, rtol=1e-9, atol=1e-12)
    inside, outside = hg.inside(w), hg.outside(w)
    for v in range(hg.n_nodes):
        if node_expect[v] == 0:
            assert outside[v] == -math.inf
        else:
            assert outside[v] == pytest.approx(math.log(node_expect[v]) + log_z - inside[v], abs=1e-9)
    goal_in = slice(hg.in_offsets[hg.goal], hg.in_offsets[hg.goal + 1])
    if goal_in.stop > goal_in.start:
        assert hg.edge_posteriors(w)[goal_in].sum() == pytest.approx(1.0)
    mm = hg.max_marginals(w)
    for e in range(hg.n_edges):
        using = [d[0] for d in goal if e in d[1]]
        assert mm[e] == (max(using) if using else -math.inf)


@SETTINGS
@given(forests(), weights_st, st.integers(1, 25))
def test_kbest_is_the_top_of_the_enumeration(hg, w, k):
    goal = derivation_table(hg, hg.edge_scores(w))[hg.goal]
    ranked = sorted((d[0] for d in goal), reverse=True)
    kb = hg.kbest(k, w)
    assert len(kb) == min(k, len(goal))
    assert kb.scores.tolist() == ranked[:k]
    known = {d[1]: d for d in goal}
    seen = set()
    dense = kb.dense_features()
    for i, d in enumerate(kb):
        key = tuple(d.edges.tolist())
        assert key not in seen
        seen.add(key)
        assert known[key][0] == d.score and " ".join(known[key][2]) == d.text
        assert float(dense[i, :3] @ w) == d.score
        assert d.features() == {n: v for n, v in zip(NAMES, dense[i, :3]) if v != 0}


@SETTINGS
@given(forests(), weights_st, st.integers(1, 12))
def test_distinct_kbest_is_the_top_of_the_unique_yields(hg, w, k):
    goal = derivation_table(hg, hg.edge_scores(w))[hg.goal]
    best_of: dict[tuple, float] = {}
    for score, _, words in goal:
        best_of[words] = max(score, best_of.get(words, -math.inf))
    ranked = sorted(best_of.values(), reverse=True)
    kb = hg.kbest(k, w, distinct=True)
    assert len(kb) == min(k, len(best_of))
    assert kb.scores.tolist() == ranked[:k]
    assert len(set(kb.texts)) == len(kb)
    for d in kb:
        assert best_of[tuple(d.text.split())] == d.score
        assert hg.yield_of(d.edges) == d.text
    cut = ranked[len(kb) - 1]
    assert {y for y, s in best_of.items() if s > cut} <= {tuple(t.split()) for t in kb.texts}


def derivation_multiset(hg: Hypergraph, w) -> Counter:
    if hg.n_nodes == 0:
        return Counter()
    return Counter((d[0], d[2]) for d in derivation_table(hg, hg.edge_scores(w))[hg.goal])


@SETTINGS
@given(forests(), weights_st, st.sampled_from([1.0, 0.5, 0.2, 0.05]))
def test_max_marginal_pruning_keeps_exactly_the_passing_edges(hg, w, threshold):
    goal = derivation_table(hg, hg.edge_scores(w))[hg.goal]
    best = max(d[0] for d in goal)
    passing = np.zeros(hg.n_edges, dtype=bool)
    for e in range(hg.n_edges):
        using = [d[0] for d in goal if e in d[1]]
        passing[e] = bool(using) and max(using) - best >= math.log(threshold)
    mask = hg.prune_mask(threshold, w)
    assert mask.tolist() == passing.tolist()
    pruned = hg.prune(threshold, w)
    assert pruned.n_edges == int(passing.sum())
    kept = Counter((d[0], d[2]) for d in goal if all(passing[e] for e in d[1]))
    assert derivation_multiset(pruned, w) == kept
    assert pruned.viterbi(w).score == best


@SETTINGS
@given(forests(), weights_st, st.integers(1, 30))
def test_pruning_to_n_edges_keeps_the_best_max_marginals(hg, w, n):
    """prune_to(n) keeps the n edges of highest max-marginal, with ties (Moses' Graph::Prune), against the
    max-marginals of the enumerated derivations; the Viterbi derivation survives."""
    goal = derivation_table(hg, hg.edge_scores(w))[hg.goal]
    best_through = np.array([max([d[0] for d in goal if e in d[1]], default=-math.inf) for e in range(hg.n_edges)])
    mask = best_edges_mask(hg, n, w)
    if hg.n_edges <= n:
        assert mask.all()
    else:
        cut = np.sort(best_through)[::-1][n - 1]
        assert mask.tolist() == (best_through >= cut).tolist()
        assert mask.sum() >= n
    pruned = hg.prune_to(n, w)
    assert pruned.viterbi(w).score == max(d[0] for d in goal)
    assert pruned.viterbi(w).text == hg.viterbi(w).text


@SETTINGS
@given(forests(), weights_st, st.sampled_from([0.9, 0.3, 0.05]))
def test_posterior_pruning_keeps_the_likely_edges_and_the_viterbi_path(hg, w, threshold):
    posterior = hg.edge_posteriors(w)
    mask = hg.prune_mask(threshold, w, by="posterior")
    clear = np.abs(posterior - threshold) > 1e-9
    viterbi_edges = set(hg.viterbi(w).edges.tolist())
    for e in np.flatnonzero(clear):
        assert mask[e] == (posterior[e] >= threshold or e in viterbi_edges)
    assert all(mask[e] for e in viterbi_edges)
    assert hg.prune(threshold, w, by="posterior").viterbi(w).score == hg.viterbi(w).score


@SETTINGS
@given(forests(), weights_st, st.data())
def test_subgraph_has_exactly_the_derivations_of_the_kept_edges(hg, w, data):
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=hg.n_edges, max_size=hg.n_edges)), dtype=bool)
    goal = derivation_table(hg, hg.edge_scores(w))[hg.goal]
    expected = Counter((d[0], d[2]) for d in goal if all(mask[e] for e in d[1]))
    sub = hg.subgraph(mask)
    assert derivation_multiset(sub, w) == expected
    assert (sub.n_nodes == 0) == (not expected)
    assert sub.n_edges <= int(mask.sum())


@settings(max_examples=40, deadline=None)
@given(forests(), st.lists(st.floats(-3, 3), min_size=3, max_size=3).map(np.array), st.integers(1, 10))
def test_real_valued_weights(hg, w, k):
    goal = derivation_table(hg, hg.edge_scores(w))[hg.goal]
    ranked = sorted((d[0] for d in goal), reverse=True)
    np.testing.assert_allclose(hg.kbest(k, w).scores, ranked[:k], rtol=1e-12, atol=1e-12)
    assert hg.viterbi(w).score == pytest.approx(ranked[0], abs=1e-12)


def test_random_forests_have_two_tail_edges_shared_sub_forests_and_repeated_tails():
    """What the brute-force tests above check the kernels on: most forests of the generator have an
    edge with two tails, a node that is a tail of two edges (a shared sub-forest) and many an edge
    whose two tails are one node."""
    rng = np.random.default_rng(0)
    two_tails = shared = repeated = 0
    for _ in range(200):
        hg = random_forests.random_forest(random_forests.RngDraws(rng), FeatureSpace(NAMES), n_nodes=6)
        arity = np.diff(hg.tail_offsets)
        two_tails += bool(np.any(arity >= 2))
        shared += bool(np.any(np.bincount(hg.tails, minlength=hg.n_nodes) >= 2))
        repeated += any(len(set(hg.edge_tails(e).tolist())) < arity[e] for e in range(hg.n_edges))
    assert two_tails >= 140 and shared >= 140 and repeated >= 40, (two_tails, shared, repeated)


# ---- builder, validation, API ---------------------------------------------------------------

def small_forest() -> Hypergraph:
    """cdec's hg_test.hg as code: 'X A a B C c' is the best under f1=.4, f2=1."""
    b = HypergraphBuilder(FeatureSpace(["f1", "f2"]))
    for _ in range(6):
        b.add_node("X")
    b.add_edge(0, (), {}, ["a"])
    b.add_edge(1, (0,), {"f1": -0.8, "f2": -0.1}, ["A", 0])
    b.add_edge(2, (), {"f2": -1}, ["c"])
    b.add_edge(3, (2,), {"f1": -0.2, "f2": -0.1}, ["C", 0])
    b.add_edge(4, (1, 3), {"f1": -1.2, "f2": -0.2}, [0, "B", 1])
    b.add_edge(4, (1, 3), {"f1": -0.5, "f2": -1.3}, [0, "b", 1])
    b.add_edge(5, (4,), {"f1": -0.5, "f2": -0.8}, ["X", 0], rule="[X] ||| X [X] ||| X [1]")
    b.add_edge(5, (4,), {"f1": -0.7, "f2": -0.9}, ["Z", 0])
    return b.build()


def test_builder_and_api():
    hg = small_forest()
    w = {"f1": 0.4, "f2": 1.0, "unknown": 5.0}
    d = hg.viterbi(w)
    assert (d.text, round(d.score, 6)) == ("X A a B C c", -3.28)
    assert d.features() == pytest.approx({"f1": -2.7, "f2": -2.2})
    assert hg.edge_target(4) == "[1] B [2]" and hg.edge_features(1) == {"f1": -0.8, "f2": -0.1}
    assert hg.edge_head.tolist() == [0, 1, 2, 3, 4, 4, 5, 5]
    assert [x.text for x in hg.kbest(10, w)] == ["X A a B C c", "Z A a B C c", "X A a b C c", "Z A a b C c"]
    refs = BleuReferences([["X A a B C c"]])
    stats = hg.kbest(2, w).bleu_stats(refs, 0)
    assert stats.shape == (2, 9) and stats[0].tolist() == [6, 6, 5, 5, 4, 4, 3, 3, 6]
    kb = kbest_of([hg.kbest(3, w).rows()], hg.space)
    kb.set_stats(refs.kbest_stats(kb))
    assert kb.stats[:2].tolist() == stats.tolist()
    assert kb.texts() == ["X A a B C c", "Z A a B C c", "X A a b C c"]
    np.testing.assert_allclose(kb.scores(hg.weight_array(w)), [-3.28, -3.46, -4.1])
    empty = HypergraphBuilder().build()
    assert empty.viterbi(np.zeros(0)) is None and len(empty.kbest(5, np.zeros(0))) == 0
    assert empty.log_partition(np.zeros(0)) == -math.inf


def test_bad_input_is_an_input_error():
    b = HypergraphBuilder()
    b.add_node()
    with pytest.raises(InputError, match="earlier nodes"):
        b.add_edge(0, (0,))
    with pytest.raises(InputError, match="tail position"):
        b.add_edge(0, (), target=[1])
    with pytest.raises(InputError, match="feature value of the edge into node 0 is nan .expected a finite number"):
        b.add_edge(0, (), {"f": math.nan})
    hg = small_forest()
    forward = hg.tails.copy()
    forward[-1] = 5
    with pytest.raises(InputError, match="edge 7 into node 5 has tail 5"):
        hg.replace(tails=forward)
    with pytest.raises(InputError, match="reference to tail"):
        hg.replace(tmpl=np.where(hg.tmpl == -2, -3, hg.tmpl))
    with pytest.raises(InputError, match="non-finite"):
        hg.replace(feat_values=np.where(hg.feat_values == -1, np.inf, hg.feat_values))
    with pytest.raises(InputError, match="at least 2 weights"):
        hg.viterbi(np.zeros(1))
    with pytest.raises(InputError, match="not finite"):
        hg.viterbi(np.array([np.nan, 0.0]))
    with pytest.raises(InputError, match="not reweighted"):
        hg.viterbi()
    with pytest.raises(InputError, match="threshold"):
        hg.prune(0.0, np.zeros(2))
    with pytest.raises(InputError, match="k = -1"):
        hg.kbest(-1, np.zeros(2))


def test_networkx_and_dot_export():
    hg = small_forest()
    graph = to_networkx(hg, {"f1": 0.4, "f2": 1.0})
    assert graph.number_of_nodes() == hg.n_nodes + hg.n_edges
    assert graph.number_of_edges() == hg.tails.shape[0] + hg.n_edges
    assert nx.is_directed_acyclic_graph(graph) and nx.is_bipartite(graph)
    assert graph.nodes[("edge", 4)]["target"] == "[1] B [2]"
    assert graph.nodes[("edge", 4)]["score"] == pytest.approx(-0.68)
    assert graph.nodes[("node", 5)]["label"] == "5: X (goal)"
    assert [graph.edges[("node", t), ("edge", 4)]["position"] for t in (1, 3)] == [0, 1]
    assert list(graph.successors(("edge", 7))) == [("node", 5)]
    dot = to_dot(hg)
    assert dot.startswith('digraph "hypergraph" {') and dot.rstrip().endswith("}")
    assert 'e4 [shape=box, label="[1] B [2]"];' in dot
    assert "n1 -> e4 [label=\"1\"];" in dot and "n3 -> e4 [label=\"2\"];" in dot and "e4 -> n4;" in dot
    assert dot.count(" -> ") == graph.number_of_edges()


def crossing_lattice() -> Hypergraph:
    """start -> a, b; a -> d, b -> c; c, d -> goal: in node order the arcs a -> d and b -> c cross."""
    b = HypergraphBuilder(FeatureSpace(["f1"]))
    for _ in range(6):
        b.add_node()
    b.add_edge(0, (), {}, [])
    for head, tail, word in ((1, 0, "a"), (2, 0, "b"), (3, 2, "c"), (4, 1, "d"), (5, 3, "x"), (5, 4, "y")):
        b.add_edge(head, (tail,), {"f1": -1.0}, [0, word])
    return b.build()


def test_layered_layout_rows_columns_and_routes():
    hg = small_forest()
    assert node_layers(hg).tolist() == [0, 1, 0, 1, 2, 3]
    layout = layered_layout(hg)
    assert layout.nodes[:, 1].tolist() == [0, 1, 0, 1, 2, 3] and layout.crossings == 0
    assert [(t, h) for t, h, _ in layout.arcs] == [(0, 1), (2, 3), (1, 4), (3, 4), (1, 4), (3, 4), (4, 5), (4, 5)]
    skipping = layered_layout(hg, [0, 1, 0, 1, 2, 4])  # the goal's edges skip layer 3: a virtual point each
    for (tail, head, _), route in zip(skipping.arcs, skipping.routes):
        assert route[0].tolist() == skipping.nodes[tail].tolist() and route[-1].tolist() == skipping.nodes[head].tolist()
        assert np.all(np.diff(route[:, 1]) == 1)  # one point per layer
    assert [len(r) for r in skipping.routes] == [2, 2, 2, 2, 2, 2, 3, 3]
    with pytest.raises(InputError, match="does not grow"):
        layered_layout(hg, [0] * hg.n_nodes)

    lattice = crossing_lattice()
    layout = layered_layout(lattice)
    assert layout.crossings == 0
    x = layout.nodes[:, 0]
    assert (x[1] < x[2]) == (x[4] < x[3])  # a's child on a's side
    highlighted = layered_layout(lattice, highlight=[2, 3, 5])  # start -> b -> c -> goal in the first column
    x = highlighted.nodes[:, 0]
    assert x[2] < x[1] and x[3] < x[4] and highlighted.crossings == 0
    assert x[0] == x[2] == x[3] == x[5]


def test_draw_layered_labels_nodes_and_edges():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgba
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch
    lattice = crossing_lattice()
    figure = Figure(figsize=(3.3, 3.0), dpi=100)
    FigureCanvasAgg(figure)
    ax = figure.add_axes((0, 0, 1, 1))
    labels = ["s", "A", "B", "C", "D", "goal"]
    words = [lattice.edge_target(e).replace("[1]", "").strip() for e in range(lattice.n_edges)]
    best = lattice.viterbi({"f1": 1.0})
    layout = draw_layered(lattice, ax, labels, edge_labels=words, highlight=best.edges)
    texts = [t.get_text() for t in ax.texts]
    assert set(labels) <= set(texts) and {"a", "b", "c", "d", "x", "y"} <= set(texts)
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == len(layout.arcs) == 6  # the axiom has no tail: no arrow
    red = [p for p in arrows if p.get_edgecolor() == to_rgba("tab:red")]
    assert len(red) == len(best.edges) - 1 == 3
    boxes = [t.get_window_extent() for t in ax.texts]
    overlaps = [(i, j) for i in range(len(boxes)) for j in range(i) if boxes[i].overlaps(boxes[j])]
    assert not overlaps, [(texts[i], texts[j]) for i, j in overlaps]


# ---- cdec fixtures -------------------------------------------------------------------------

CDEC = ("fixtures", "cdec")
HG_TAGS = [  # tag, forest, weights, cdec's top string and score (README section 4)
    ("tiny", "hg_test.tiny", "weights.tiny", "X <s>", -80.84),
    ("hg", "hg_test.hg", "weights.hg", "X A a B C c", -3.28),
    ("hg_f2neg", "hg_test.hg", "weights.hg_f2neg", "Z A a b C c", 2.52),
    ("hg_int", "hg_test.hg_int", "weights.f1", None, 0.4),
    ("hg_balanced", "hg_test.hg_balanced", "weights.f1", None, 0.0),
    ("small", "small", "weights.small", "there is a small house", -3.00298),
]


def tie_groups(scores, tol=2e-4) -> list[list[int]]:
    groups: list[list[int]] = []
    for i, s in enumerate(scores):
        if groups and abs(scores[groups[-1][-1]] - s) <= tol:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def assert_same_kbest(kb, entries, label):
    """Same scores rank by rank; same strings within every group of tied scores but the last
    (where cdec and we may keep different members of a tie cut by k)."""
    ref_scores = [e.score for e in entries]
    assert len(kb) == len(entries), label
    np.testing.assert_allclose(kb.scores, ref_scores, rtol=1e-5, atol=1e-4, err_msg=label)
    for group in tie_groups(ref_scores)[:-1]:
        assert Counter(kb.texts[i] for i in group) == Counter(entries[i].text for i in group), (label, group)


def kbest_by_sentence(path) -> dict[int, list]:
    out = defaultdict(list)
    for entry in iter_kbest(path):
        out[entry.sentence].append(entry)
    return out


@pytest.mark.parametrize("tag,forest,weights,top,top_score", HG_TAGS)
def test_cdec_hg_test_viterbi_and_kbest(tag, forest, weights, top, top_score):
    folder = shared_path(*CDEC, "hg_test")
    w = read_cdec_weights(folder / weights)
    names = [f"{forest}.json", f"{forest}.from_bin.json"] if forest != "small" else ["small.from_bin.json"]
    for name in names:
        hg = read_cdec_json(folder / name)
        d = hg.viterbi(w)
        assert d.score == pytest.approx(top_score, abs=1e-5)
        if top is not None:
            assert d.text == top
        for distinct, prefix in ((False, "kbest"), (True, "kbest_unique")):
            entries = kbest_by_sentence(folder / f"{prefix}.{tag}.txt")[0]
            kb = hg.kbest(100, w, distinct=distinct)
            assert_same_kbest(kb, entries, f"{name} {prefix}")
            assert kb[0].features() == pytest.approx(entries[0].features, abs=1e-5)


@pytest.mark.parametrize("name,sizes", [("hg", (6, 8)), ("hg_balanced", (9, 13)), ("hg_int", (2, 4)),
                                        ("lattice", (4, 8)), ("tiny", (2, 3)), ("tiny_lattice", (3, 4))])
def test_cdec_hg_test_graphs_against_brute_force(name, sizes):
    folder = shared_path(*CDEC, "hg_test")
    for suffix in (".json", ".from_bin.json"):
        hg = read_cdec_json(folder / f"hg_test.{name}{suffix}")
        assert (hg.n_nodes, hg.n_edges) == sizes
        rng = np.random.default_rng(len(name))
        w = rng.normal(size=len(hg.space))
        goal = derivation_table(hg, hg.edge_scores(w))[hg.goal]
        assert hg.viterbi(w).score == pytest.approx(max(d[0] for d in goal))
        assert hg.log_partition(w) == pytest.approx(logsumexp(d[0] for d in goal))
        np.testing.assert_allclose(hg.kbest(1000, w).scores, sorted((d[0] for d in goal), reverse=True))
    lattice = read_cdec_json(folder / f"hg_test.{name}.json")
    if "lattice" in name:
        assert lattice.in_offsets[1] == 0 and lattice.node_cat[0] is None


@pytest.mark.parametrize("folder,name,weights", [("hg_test", "small.from_bin.json", "weights.small"),
                                                  ("dpmert_testdata", "0.json", "weights.0")])
def test_cdec_forest_complete_kbest_equals_enumeration(folder, name, weights):
    """All 166 / 7,633 derivations of real forests: k-best with a large k is the sorted enumeration."""
    path = shared_path(*CDEC, folder, name)
    hg = read_cdec_json(path)
    w = hg.weight_array(read_cdec_weights(path.parent / weights))
    goal = derivation_table(hg, hg.edge_scores(w))[hg.goal]
    kb = hg.kbest(10 * len(goal), w)
    assert kb.scores.tolist() == sorted((d[0] for d in goal), reverse=True)
    assert Counter(tuple(d.edges.tolist()) for d in kb) == Counter(d[1] for d in goal)
    best_of: dict[str, float] = {}
    for score, _, words in goal:
        best_of[" ".join(words)] = max(score, best_of.get(" ".join(words), -math.inf))
    unique = hg.kbest(10 * len(goal), w, distinct=True)
    assert dict(zip(unique.texts, unique.scores.tolist())) == best_of and len(unique) == len(best_of)
    assert unique.scores.tolist() == sorted(best_of.values(), reverse=True)


def test_cdec_tiny_lattice_yield():
    hg = read_cdec_json(shared_path(*CDEC, "hg_test", "hg_test.tiny_lattice.json"))
    d = hg.viterbi({"f1": 1.0})
    assert (d.text, round(d.score, 9)) == ("a b", -0.3)


def ibm_bleu(hypotheses, references) -> float:
    """cdec's IBM BLEU (mteval/ns.cc): closest reference length (ties: first), max(match, 0.01), float32."""
    stats = BleuReferences(references).stats(np.arange(len(hypotheses)), hypotheses).sum(axis=0)
    ref_len = 0
    for hyp, refs in zip(hypotheses, references):
        n = len(hyp.split())
        ref_len += min((abs(len(r.split()) - n), i, len(r.split())) for i, r in enumerate(refs))[2]
    hyp_len = np.float32(stats[1])
    logs = [np.log(np.float32(max(stats[2 * i], 0.01)) / np.float32(stats[2 * i + 1]))
            for i in range(4) if stats[2 * i + 1] > 0]
    brevity = min(np.float32(0), np.float32(1) - np.float32(ref_len) / hyp_len)
    return float(np.exp(np.float32(np.mean(np.array(logs, dtype=np.float32))) + brevity))


@pytest.fixture(scope="module")
def dpmert_forests():
    folder = shared_path(*CDEC, "dpmert_testdata")
    space, vocab = FeatureSpace(), Vocabulary()
    return folder, [read_cdec_json(folder / f"{i}.json", space, vocab) for i in range(2)]


@pytest.mark.parametrize("weights,onebest,bleu", [("weights.0", "onebest.w0", 0.298243),
                                                   ("weights.final", "onebest.final", 0.623521)])
def test_cdec_dpmert_testdata_viterbi_and_bleu(dpmert_forests, weights, onebest, bleu):
    folder, forests_ = dpmert_forests
    assert [(hg.n_nodes, hg.n_edges) for hg in forests_] == [(350, 1026), (2197, 14141)]
    w = read_cdec_weights(folder / weights)
    texts = [hg.viterbi(w).text for hg in forests_]
    assert texts == (folder / onebest).read_text(encoding="utf-8").splitlines()
    references = list(zip(*[(folder / f"c2e.txt.{i}").read_text(encoding="utf-8").splitlines() for i in range(4)]))
    assert ibm_bleu(texts, references) == pytest.approx(bleu, abs=1e-6)


@pytest.mark.parametrize("weights,kbest,distinct", [("weights.0", "kbest100.w0", True),
                                                    ("weights.0", "kbest100_derivs.w0", False),
                                                    ("weights.final", "kbest100.final", True)])
def test_cdec_dpmert_testdata_kbest(dpmert_forests, weights, kbest, distinct):
    folder, forests_ = dpmert_forests
    w = read_cdec_weights(folder / weights)
    entries = kbest_by_sentence(folder / kbest)
    for s, hg in enumerate(forests_):
        kb = hg.kbest(100, w, distinct=distinct)
        assert_same_kbest(kb, entries[s], f"{kbest}:{s}")
        for d, entry in zip(kb, entries[s]):
            assert float(hg.weight_array(w)[d.feature_ids] @ d.feature_values) == pytest.approx(d.score, abs=1e-9)


@pytest.fixture(scope="module")
def decode_nc():
    folder = shared_path(*CDEC, "decode_nc")
    out = {}
    for sub in ("hgs_json", "hgs_json_p17"):
        space, vocab = FeatureSpace(), Vocabulary()
        out[sub] = [read_cdec_json(folder / sub / f"{i}.json", space, vocab) for i in range(10)]
    return folder, out


def test_cdec_decode_nc_viterbi_equals_onebest(decode_nc):
    folder, forests_ = decode_nc
    sizes = [(63, 158), (132, 619), (90, 177), (140, 504), (169, 529), (243, 1207), (161, 529), (193, 1019),
             (120, 351), (91, 228)]
    assert [(hg.n_nodes, hg.n_edges) for hg in forests_["hgs_json"]] == sizes
    w = read_cdec_weights(folder / "weights.init")
    onebest = (folder / "onebest.init").read_text(encoding="utf-8").splitlines()
    assert [hg.viterbi(w).text for hg in forests_["hgs_json_p17"]] == onebest
    for hg, text in zip(forests_["hgs_json"], onebest):
        # 6-digit features reorder near-ties: in sentence 1 the two best strings are 9e-8 apart with 17-digit
        # features and 2e-6 apart, the other way round, with 6 digits; cdec's string is then within 1e-4 of ours
        near = hg.kbest(10, w, distinct=True)
        best = [t for t, s in zip(near.texts, near.scores) if s >= near.scores[0] - 1e-4]
        assert hg.viterbi(w).text == near.texts[0] and text in best
    references = [[r] for r in (folder / "dev.refs").read_text(encoding="utf-8").splitlines()]
    assert ibm_bleu(onebest, references) == pytest.approx(0.0873304, abs=1e-6)


def test_cdec_decode_nc_kbest_and_dpmert_decoded(decode_nc):
    folder, forests_ = decode_nc
    decoded = shared_path(*CDEC, "dpmert_decoded")
    runs = [(folder / "weights.init", folder / "kbest.init.100"),
            (decoded / "weights.final", decoded / "kbest100.final")]
    for sub in ("hgs_json", "hgs_json_p17"):
        for weights, kbest in runs:
            w = read_cdec_weights(weights)
            entries = kbest_by_sentence(kbest)
            for s, hg in enumerate(forests_[sub]):
                assert_same_kbest(hg.kbest(100, w, distinct=True), entries[s], f"{sub} {kbest.name}:{s}")
    references = [[r] for r in (folder / "dev.refs").read_text(encoding="utf-8").splitlines()]
    for weights, onebest, bleu in (("weights.0", "onebest.weights.0", 0.0873304),
                                   ("weights.final", "onebest.weights.final", 0.348162)):
        w = read_cdec_weights(decoded / weights)
        texts = [hg.viterbi(w).text for hg in forests_["hgs_json_p17"]]
        assert texts == (decoded / onebest).read_text(encoding="utf-8").splitlines()
        assert ibm_bleu(texts, references) == pytest.approx(bleu, abs=1e-6)


# ---- JSON round trip and reader robustness -----------------------------------------------

def all_cdec_json() -> list[Path]:
    root = shared_path(*CDEC)
    files = sorted((root / "hg_test").glob("*.json")) + sorted((root / "dpmert_testdata").glob("*.json"))
    for sub in ("hgs_json", "hgs_json_p17"):
        files += sorted((root / "decode_nc" / sub).glob("*.json"))
    return files


ARRAYS = ["in_offsets", "edge_head", "tail_offsets", "tails", "feat_offsets", "feat_ids", "feat_values",
          "tmpl_offsets", "tmpl", "spans", "node_hash"]


def assert_same_forest(a: Hypergraph, b: Hypergraph):
    """Equal arrays; equal rule strings where ``a`` has them (the writer spells out missing ones)."""
    assert a.n_nodes == b.n_nodes
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.node_cat == b.node_cat and a.space == b.space and a.vocab == b.vocab
    if a.edge_rule is not None:
        assert all(b.rules[j] == a.rules[i] for i, j in zip(a.edge_rule, b.edge_rule) if i >= 0)


def test_cdec_json_round_trip_is_exact_and_byte_identical(tmp_path):
    files = all_cdec_json()
    assert len(files) == 37
    for path in files:
        hg = read_cdec_json(path)
        back = loads_cdec_json(dumps_cdec_json(hg))
        assert_same_forest(hg, back)
        assert np.array_equal(hg.edge_rule, back.edge_rule) and hg.rules == back.rules
        original = path.read_text(encoding="utf-8")
        if path.name == "hg_test.lattice.json":  # cdec shipped it with a stray '"' after the object
            assert original.endswith('}"\n')
            original = original[:-2] + "\n"
        assert dumps_cdec_json(hg, digits=17 if "p17" in path.parts[-2] else 6) == original, path.name
    hg = read_cdec_json(files[0])
    write_cdec_json(hg, tmp_path / "f.json.gz")
    with gzip.open(tmp_path / "f.json.gz", "rb") as handle:
        assert handle.read().decode("utf-8") == dumps_cdec_json(hg)
    assert_same_forest(hg, read_cdec_json(tmp_path / "f.json.gz"))


def test_cdec_json_empty_builder_and_escaping(tmp_path):
    empty = loads_cdec_json("{}")
    assert empty.n_nodes == 0 and empty.n_edges == 0 and dumps_cdec_json(empty) == "{}\n"
    b = HypergraphBuilder(FeatureSpace(["a/b"]))
    b.add_node("X")
    b.add_node("Goal")
    b.add_edge(0, (), {"a/b": 0.1, "new": 3.0}, ["und/oder", 'say"hi"', "\\"])
    b.add_edge(1, (0, 0), {}, [1, "x", 0])
    hg = b.build()
    text = dumps_cdec_json(hg)
    assert '"features":["a/b","new"]' in text
    assert '"[Goal] ||| [X] [X] ||| [2] x [1]"' in text
    assert 'und\\/oder say\\"hi\\" \\\\' in text
    back = loads_cdec_json(text)
    word = 'und/oder say"hi" \\'
    assert back.viterbi(np.zeros(2)).text == hg.viterbi(np.zeros(2)).text == f"{word} x {word}"
    write_cdec_json(back, tmp_path / "b.json")
    assert (tmp_path / "b.json").read_text(encoding="utf-8") == text
    many = FeatureSpace([f"F{i}" for i in range(1000)])
    b = HypergraphBuilder(many)
    b.add_node()
    b.add_edge(0, (), {"F999": 1.5}, ["w"])
    text = dumps_cdec_json(b.build())
    assert '"features"' not in text and '"feats":["F999",1.5]' in text
    assert loads_cdec_json(text).edge_features(0) == {"F999": 1.5}


BAD_DOCUMENTS = [
    ('{"rules":[1,"[X] ||| a ||| a"],"edges":[{"tail":[],"rule":1}],"node":{"in_edges":[0]}', "invalid JSON"),
    ('{"features":["\\ud800"],"node":{"in_edges":[]}}', "surrogate"),
    ('{"edges":[{"tail":[1],"feats":[]}],"node":{"in_edges":[0]},"node":{"in_edges":[]}}', "earlier nodes"),
    ('{"rules":[1,"[X] ||| a ||| [2] a"],"edges":[{"tail":[],"rule":1}],"node":{"in_edges":[0]}}', "uses \\[2\\]"),
    ('{"features":["f"],"edges":[{"tail":[],"feats":[0,NaN]}],"node":{"in_edges":[0]}}', "NaN"),
    ('{"features":["f"],"edges":[{"tail":[],"feats":[0,1e999]}],"node":{"in_edges":[0]}}', "out of range"),
    ('{"features":["f"],"edges":[{"tail":[],"feats":[0,"x"]}],"node":{"in_edges":[0]}}', "a number"),
    ('{"features":["f"],"edges":[{"tail":[],"feats":[3,1]}],"node":{"in_edges":[0]}}', "feature key"),
    ('{"edges":[{"tail":"0"}],"node":{"in_edges":[0]}}', "an array"),
    ('{"edges":[{"tail":[]}],"node":{"in_edges":[1]}}', "in-edge of node 0"),
    ('{"edges":[{"tail":[]}]}', "in no node"),
    ('{"edges":[{"tail":[]}],"node":{"in_edges":[0]},"node":{"in_edges":[0]}}', "nodes 0 and 1"),
    ('{"edges":[{"tail":[],"rule":7}],"node":{"in_edges":[0]}}', "rule 7"),
    ('{"rules":[1,"no rule here"],"edges":[{"tail":[],"rule":1}],"node":{"in_edges":[0]}}', "malformed"),
    ('{"edges":[{"tail":[],"color":1}],"node":{"in_edges":[0]}}', "color"),
    ('{"node":{"in_edges":[]}} trailing', "after the JSON"),
    ("[1, 2]", "one JSON object"),
    ('{"features":["a b"],"node":{"in_edges":[]}}', "feature name"),
]


@pytest.mark.parametrize("document,message", BAD_DOCUMENTS)
def test_malformed_cdec_json_names_the_file(tmp_path, document, message):
    path = tmp_path / "bad.json"
    path.write_text(document, encoding="utf-8")
    space, vocab = FeatureSpace(["keep"]), Vocabulary(["w"])
    with pytest.raises(InputError, match=message) as err:
        read_cdec_json(path, space, vocab)
    assert err.value.path == str(path) and str(path) in str(err.value)
    assert space.names == ["keep"] and vocab.words == ["w"]


def test_corrupt_gzip_and_missing_file(tmp_path):
    data = gzip.compress(b'{"node":{"in_edges":[]}}')
    (tmp_path / "cut.json.gz").write_bytes(data[:-6])
    with pytest.raises(InputError, match="cut.json.gz"):
        read_cdec_json(tmp_path / "cut.json.gz")
    with pytest.raises(InputError, match="cannot open"):
        read_cdec_json(tmp_path / "missing.json")


SMALL_FILES = ["hg_test.hg.json", "hg_test.lattice.json", "hg_test.hg_int.from_bin.json", "hg_test.tiny.json",
               "hg_test.hg_balanced.from_bin.json"]


@pytest.fixture(scope="module")
def small_texts() -> list[str]:
    folder = shared_path(*CDEC, "hg_test")
    return [(folder / name).read_text(encoding="utf-8") for name in SMALL_FILES]


def load_or_input_error(data) -> None:
    """Reading gives a usable forest or an InputError, nothing else."""
    try:
        hg = loads_cdec_json(data, source="fuzz.json")
    except InputError as err:
        assert err.path == "fuzz.json"
        event("InputError")
        return
    event("read")
    w = np.zeros(len(hg.space))
    hg.viterbi(w)
    hg.kbest(3, w, distinct=True)
    assert_same_forest(hg, loads_cdec_json(dumps_cdec_json(hg)))


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=120) | st.text(alphabet='{}[]",:0123456789-.eE ntrufalsed\\', max_size=120))
def test_fuzz_random_bytes(data):
    load_or_input_error(data)


@FUZZ
@given(st.data())
def test_fuzz_truncated_files(small_texts, data):
    text = data.draw(st.sampled_from(small_texts))
    load_or_input_error(text[:data.draw(st.integers(0, len(text)))].encode("utf-8"))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 12) | st.integers(-2**70, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6)
    | st.sampled_from(["[X] ||| a ||| [1] b", "[X] ||| a ||| [0]", "f1", "1e999", "NaN"]),
    lambda children: st.lists(children, max_size=3) | st.lists(st.tuples(st.text(max_size=5), children),
                                                              max_size=2).map(lambda p: ("obj", p)),
    max_leaves=6)


def to_json(value) -> str:
    """JSON text of pairs-lists (("obj", [(k, v)...])) with repeated keys kept."""
    if isinstance(value, tuple) and value and value[0] == "obj":
        return "{" + ",".join(json.dumps(k) + ":" + to_json(v) for k, v in value[1]) + "}"
    if isinstance(value, list):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    return json.dumps(value)


def as_pairs(value):
    if isinstance(value, dict):
        raise AssertionError("parsed with object_pairs_hook")
    if isinstance(value, list) and value and all(isinstance(p, tuple) for p in value):
        return ("obj", [(k, as_pairs(v)) for k, v in value])
    if isinstance(value, list):
        return [as_pairs(v) for v in value]
    return value


def mutation_sites(value, path=()):
    yield path
    if isinstance(value, tuple):
        for i, (_, v) in enumerate(value[1]):
            yield from mutation_sites(v, path + (i,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from mutation_sites(v, path + (i,))


def mutate(value, path, how, new):
    if not path:
        return new if how == "replace" else value
    i, rest = path[0], path[1:]
    items = list(value[1]) if isinstance(value, tuple) else list(value)
    if rest or how == "replace":
        child = items[i][1] if isinstance(value, tuple) else items[i]
        child = mutate(child, rest, how, new) if rest else new
        items[i] = (items[i][0], child) if isinstance(value, tuple) else child
    elif how == "delete":
        del items[i]
    else:
        items.insert(i, items[i])
    return ("obj", items) if isinstance(value, tuple) else items


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(st.data())
def test_fuzz_mutated_json_values(small_texts, data):
    text = data.draw(st.sampled_from(small_texts))
    doc = as_pairs(json.JSONDecoder(object_pairs_hook=list).raw_decode(text)[0])
    sites = list(mutation_sites(doc))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(sites))
        doc = mutate(doc, path, data.draw(st.sampled_from(["replace", "replace", "delete", "duplicate"])),
                     data.draw(json_values))
        sites = list(mutation_sites(doc))
    load_or_input_error(to_json(doc))


def test_portable_forests_rebuild_in_another_space_and_vocabulary():
    """to_portable/from_portable (how worker processes send forests back): ids are remapped by name and
    word, so k-best strings, scores and features are unchanged in a space with another order."""
    folder = shared_path("fixtures", "cdec", "decode_nc", "hgs_json_p17")
    graph = read_cdec_json(folder / "3.json")
    space = FeatureSpace(["PassThrough", "LanguageModel"])
    vocab = Vocabulary()
    vocab.add("zzz")
    again = Hypergraph.from_portable(graph.to_portable(), space, vocab)
    weights = {name: 0.1 * (k + 1) * (-1) ** k for k, name in enumerate(graph.space.names)}
    first, second = graph.kbest(20, weights), again.kbest(20, weights)
    assert first.texts == second.texts and np.array_equal(first.scores, second.scores)
    assert [d.features() for d in first] == [d.features() for d in second]
    assert again.space is space and again.vocab is vocab and space.names[:2] == ["PassThrough", "LanguageModel"]


def _first_fault_reference(hg: Hypergraph, tails, feat_ids, feat_values, tmpl) -> str | None:
    """The message of the first fault of a forest's content, found the obvious way (numpy over whole
    arrays, in the order tails, feature ids, feature values, templates), or None."""
    edge_head = np.repeat(np.arange(hg.n_nodes), np.diff(hg.in_offsets))
    arity = np.diff(hg.tail_offsets)
    bad = np.flatnonzero((tails < 0) | (tails >= np.repeat(edge_head, arity)))
    if bad.size:
        e = int(np.searchsorted(hg.tail_offsets, bad[0], side="right") - 1)
        return f"edge {e} into node {edge_head[e]} has tail {tails[bad[0]]}"
    bad = np.flatnonzero((feat_ids < 0) | (feat_ids >= len(hg.space)))
    if bad.size:
        return f"feature id {feat_ids[bad[0]]}"
    bad = np.flatnonzero(~np.isfinite(feat_values))
    if bad.size:
        return f"edge {int(np.searchsorted(hg.feat_offsets, bad[0], side='right') - 1)} has a non-finite feature value"
    slot_arity = np.repeat(arity, np.diff(hg.tmpl_offsets))
    bad = np.flatnonzero((tmpl >= len(hg.vocab)) | ((tmpl < 0) & (-tmpl.astype(np.int64) - 1 >= slot_arity)))
    if bad.size:
        e = int(np.searchsorted(hg.tmpl_offsets, bad[0], side="right") - 1)
        item = int(tmpl[bad[0]])
        what = (f"word id {item} (the vocabulary has {len(hg.vocab)})" if item >= 0 else
                f"a reference to tail {-item - 1} but {int(arity[e])} tails")
        return f"the template of edge {e} has {what}"
    return None


@SETTINGS
@given(forests(), st.data())
def test_validation_finds_the_first_fault(hg, data):
    """Hypergraph's one-pass check of tails, features and templates (hypergraph._kernels.first_fault)
    reports the fault the obvious whole-array checks find first, with the same message."""
    arrays = {"tails": hg.tails.copy(), "feat_ids": hg.feat_ids.copy(), "feat_values": hg.feat_values.copy(),
              "tmpl": hg.tmpl.copy()}
    bad_values = {"tails": st.integers(-2, hg.n_nodes + 1), "feat_ids": st.integers(-1, len(hg.space) + 1),
                  "feat_values": st.sampled_from([math.inf, -math.inf, math.nan, 1.5]),
                  "tmpl": st.sampled_from([-3, -2, -1, 0, len(hg.vocab), len(hg.vocab) + 1])}
    for _ in range(data.draw(st.integers(0, 3))):
        name = data.draw(st.sampled_from(sorted(arrays)))
        if arrays[name].size:
            at = data.draw(st.integers(0, arrays[name].size - 1))
            arrays[name][at] = data.draw(bad_values[name])
    expected = _first_fault_reference(hg, **arrays)
    if expected is None:
        again = hg.replace(**arrays)
        assert again.edge_head.tolist() == hg.edge_head.tolist() and again.feat_dim == (
            int(arrays["feat_ids"].max()) + 1 if arrays["feat_ids"].size else 0)
    else:
        with pytest.raises(InputError) as err:
            hg.replace(**arrays)
        assert str(err.value).startswith(expected), (str(err.value), expected)
