"""Expected n-gram counts of a forest (minismt.hypergraph.ngrams) against enumeration of every derivation:
random forests split by their n-gram state (two-tail edges, shared sub-forests, repeated tails, empty yields),
unsplit forests (accepted only where the counts are exact, else a clear error), and the search graphs of both
of minismt's decoders."""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph import HypergraphBuilder
from minismt.hypergraph.expectations import ExpectationBatch, first_order_with_gradient
from minismt.hypergraph.ngrams import edge_ngrams, expected_ngram_counts, split_by_bleu_state, split_by_ngram_state
from minismt.metrics import BleuReferences
import random_forests
from random_forests import derivation_table

NAMES = ["f0", "f1", "f2"]
VALUES = [-1.0, -0.5, 0.0, 0.5, 1.0]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GAP = None


def forests():
    return random_forests.forests(FeatureSpace(NAMES), max_nodes=7, values=VALUES, words=["a", "b", "c"],
                                  max_derivations=120)


weights_st = st.lists(st.floats(-1.5, 1.5), min_size=3, max_size=3).map(np.array)


def signature(template, tail_states, vocab, k):
    """A node's n-gram state from one edge: (length capped at k + 1, first and last min(length, k) words)."""
    sequence, total = [], 0
    for item in template:
        if item >= 0:
            sequence.append(vocab[int(item)])
            total += 1
            continue
        n, first, last = tail_states[-int(item) - 1]
        total += n
        sequence.extend(first if n <= k else list(first) + [GAP] + list(last))
    m = min(total, k)
    return min(total, k + 1), tuple(sequence[:m]), tuple(sequence[len(sequence) - m:])


def split_by_state(hg, order):
    """The same derivations (features, yields) in a forest whose every node is split by its order-gram state,
    the new goal a node over every state of the old one."""
    k = order - 1
    builder = HypergraphBuilder(hg.space, hg.vocab)
    states = []  # per old node: {state: new node}
    for v in range(hg.n_nodes):
        lo, hi = int(hg.in_offsets[v]), int(hg.in_offsets[v + 1])
        if lo == hi:
            states.append({(0, (), ()): builder.add_node()})
            continue
        groups = defaultdict(list)
        for e in range(lo, hi):
            template = hg.tmpl[hg.tmpl_offsets[e]:hg.tmpl_offsets[e + 1]]
            for combo in itertools.product(*[list(states[int(t)].items()) for t in hg.edge_tails(e)]):
                groups[signature(template, [c[0] for c in combo], hg.vocab, k)].append((e, [c[1] for c in combo]))
        here = {}
        for state, edges in groups.items():
            node = builder.add_node()
            for e, tails in edges:
                target = [hg.vocab[int(i)] if i >= 0 else int(-i - 1)
                          for i in hg.tmpl[hg.tmpl_offsets[e]:hg.tmpl_offsets[e + 1]]]
                builder.add_edge(node, tails, hg.edge_features(e), target)
            here[state] = node
        states.append(here)
    goal = builder.add_node()
    for node in states[-1].values():
        builder.add_edge(goal, [node], {}, [0])
    return builder.build()


def enumerated_counts(hg, w, order, barriers=("<s>", "</s>")):
    goal = derivation_table(hg, hg.edge_scores(w))[hg.goal]
    scores = np.array([d[0] for d in goal])
    p = np.exp(scores - scores.max())
    p /= p.sum()
    totals = defaultdict(float)
    for prob, d in zip(p, goal):
        words = d[-1]
        for n in range(1, order + 1):
            for i in range(len(words) - n + 1):
                gram = tuple(words[i:i + n])
                if not any(word in barriers for word in gram):
                    totals[gram] += prob
    return totals


def assert_counts_equal(found, expected):
    for gram in set(found) | set(expected):
        assert found.get(gram, 0.0) == pytest.approx(expected.get(gram, 0.0), abs=1e-9), gram


@SETTINGS
@given(forests(), weights_st, st.sampled_from([1, 2, 3, 4]))
def test_split_forests_give_the_enumerated_expected_counts(hg, w, order):
    split = split_by_state(hg, order)
    assert_counts_equal(expected_ngram_counts(split, w, order), enumerated_counts(hg, w, order))


@SETTINGS
@given(forests(), weights_st, st.sampled_from([2, 3, 4]))
def test_an_unsplit_forest_is_exact_or_refused(hg, w, order):
    """A forest the check accepts gives exact counts per edge; one it refuses is an InputError naming the node."""
    try:
        ngrams = edge_ngrams(hg, order)
    except InputError as error:
        assert "is not split by its" in str(error)
        return
    assert_counts_equal(ngrams.counts(hg, hg.edge_posteriors(w)), enumerated_counts(hg, w, order))


def derivation_multiset(hg, w):
    return Counter((round(d[0], 9), d[-1]) for d in derivation_table(hg, hg.edge_scores(w))[hg.goal])


@SETTINGS
@given(forests(), weights_st, st.sampled_from([1, 2, 3, 4]))
def test_splitting_keeps_the_derivations_and_makes_the_counts_exact(hg, w, order):
    split, origin = split_by_ngram_state(hg, order)
    assert derivation_multiset(split, w) == derivation_multiset(hg, w)
    edge_ngrams(split, order)  # passes the check
    assert origin.shape == (split.n_edges,) and origin.max(initial=-1) < hg.n_edges
    for e in np.flatnonzero(origin >= 0):
        assert split.edge_features(e) == hg.edge_features(int(origin[e]))
    assert_counts_equal(expected_ngram_counts(hg, w, order), enumerated_counts(hg, w, order))
    if split is not hg:  # a reweighted forest keeps its scores through the split
        assert_counts_equal(expected_ngram_counts(hg.reweight(w), None, order), enumerated_counts(hg, w, order))


@SETTINGS
@given(forests(), weights_st, st.sampled_from([2, 4]))
def test_a_split_without_features_takes_them_from_the_forest_through_its_origins(hg, w, order):
    """The split forest without features, batched with its origins, gives the expected BLEU-like statistics
    (each edge's n-grams by order and a marked part of them) and their gradient of the split forest with its
    features copied."""
    copied, origin = split_by_ngram_state(hg, order)
    bare, bare_origin = split_by_ngram_state(hg, order, features=False)
    assert np.array_equal(origin, bare_origin)
    assert bare is hg or bare.feat_ids.size == 0
    ngrams = edge_ngrams(bare, order)
    matched = np.arange(ngrams.orders.shape[0]) % 3 == 0  # BLEU statistics per edge, some n-grams "matched"
    counts = np.zeros((bare.n_edges, 2 * order), dtype=np.int16)
    edge_of = np.repeat(np.arange(bare.n_edges), np.diff(ngrams.offsets))
    np.add.at(counts, (edge_of, 2 * (ngrams.orders - 1) + 1), 1)
    np.add.at(counts, (edge_of[matched], 2 * (ngrams.orders[matched] - 1)), 1)
    batch = ExpectationBatch([(hg, bare, bare_origin, counts)])
    result = batch.evaluate(w)
    reference, gradient = first_order_with_gradient(copied, counts.astype(np.float64), w)
    np.testing.assert_allclose(result.expectation[0], reference.expectation, rtol=1e-9, atol=1e-9)
    coefficients = np.arange(1.0, 2 * order + 1)
    np.testing.assert_allclose(batch.gradient(coefficients), coefficients @ gradient, rtol=1e-7, atol=1e-8)


def bleu_statistics_by_hand(words, references, order):
    """``[m1, t1, ...]`` of a yield: its n-grams without a barrier, and those some reference holds."""
    held = {tuple(ref.split()[i:i + n]) for ref in references for n in range(1, order + 1)
            for i in range(len(ref.split()) - n + 1)}
    out = []
    for n in range(1, order + 1):
        grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
        grams = [g for g in grams if not any(word in ("<s>", "</s>") for word in g)]
        out += [sum(g in held for g in grams), len(grams)]
    return out


@SETTINGS
@given(forests(), weights_st, st.sampled_from([1, 2, 3, 4]),
       st.lists(st.lists(st.sampled_from(["a", "b", "c", "<s>"]), max_size=7).map(" ".join), min_size=1,
                max_size=2))
def test_the_bleu_split_keeps_the_derivations_and_gives_each_its_statistics(hg, w, order, references):
    """Every derivation of the forest split by its BLEU state is one of the forest's (same score and yield,
    each once), and the sums of its edges' statistics are its yield's BLEU statistics, matches unclipped."""
    split, origin, counts = split_by_bleu_state(hg, BleuReferences([references]), 0, order, features=False)
    scores = np.where(origin >= 0, hg.edge_scores(w)[np.maximum(origin, 0)], 0.0)
    table = derivation_table(split, scores, *[counts[:, j].astype(np.int64) for j in range(2 * order)])
    found = Counter()
    for derivation in table[split.goal]:
        words = derivation[-1]
        assert list(derivation[1:1 + 2 * order]) == bleu_statistics_by_hand(words, references, order), words
        found[(round(derivation[0], 9), words)] += 1
    assert found == derivation_multiset(hg, w)
    assert split.n_edges <= split_by_ngram_state(hg, order)[0].n_edges or split_by_ngram_state(hg, order)[0] is hg


def test_each_ngram_is_created_once_at_the_edge_where_its_words_meet():
    """S -> X c X (X twice, the same node), X -> a b | a a: the 3-grams across the rule are the edge's."""
    space = FeatureSpace(["f"])
    builder = HypergraphBuilder(space)
    builder.add_node()
    x = builder.add_node()
    builder.add_edge(x, [0], {"f": 1.0}, ["a", "b", 0])
    builder.add_edge(x, [0], {"f": 0.0}, ["a", "a", 0])
    s = builder.add_node()
    builder.add_edge(s, [x, x], {}, [0, "c", 1])
    hg = builder.build()
    with pytest.raises(InputError, match="node 1 of the forest is not split by its 2-gram state"):
        edge_ngrams(hg, 2)  # X's last word (b or a) meets c
    ngrams = edge_ngrams(hg, 1)
    assert [hg.vocab.decode(g[:1].tolist()) for g in ngrams.grams[ngrams.offsets[2]:]] == [["c"]]
    p = 1 / (1 + math.exp(-1.0))  # X -> a b
    counts = expected_ngram_counts(hg, [1.0], 1)
    assert counts == pytest.approx({("a",): 2 * (p + 2 * (1 - p)), ("b",): 2 * p, ("c",): 1.0})


def test_barriers_are_in_no_ngram():
    space = FeatureSpace(["f"])
    builder = HypergraphBuilder(space)
    builder.add_node()
    builder.add_node()
    builder.add_edge(1, [0], {}, ["<s>", "a", "b", 0])
    builder.add_node()
    builder.add_edge(2, [1], {}, [0, "c", "</s>"])
    counts = expected_ngram_counts(builder.build(), [0.0], 3)
    assert counts == pytest.approx({("a",): 1, ("b",): 1, ("c",): 1, ("a", "b"): 1, ("b", "c"): 1,
                                    ("a", "b", "c"): 1})


def test_order_must_be_positive():
    hg = split_by_state(random_forests.random_forest(random_forests.RngDraws(np.random.default_rng(1)),
                                                     FeatureSpace(NAMES)), 2)
    with pytest.raises(InputError, match="order"):
        edge_ngrams(hg, 0)


def enumerable(hg, limit: int = 500) -> bool:
    """Whether the forest has at most ``limit`` derivations."""
    counts = np.zeros(hg.n_nodes)
    for v in range(hg.n_nodes):
        lo, hi = int(hg.in_offsets[v]), int(hg.in_offsets[v + 1])
        counts[v] = 1 if lo == hi else sum(math.prod(counts[int(t)] for t in hg.edge_tails(e)) for e in range(lo, hi))
    return counts[-1] <= limit


@pytest.mark.parametrize("kind", ["phrase", "hiero"])
def test_the_decoders_search_graphs_give_the_enumerated_counts(kind, moses_system, hiero_system):
    """Both decoders' search graphs (3-gram LMs with minimised states, so not always split by the n-gram
    state): split where needed, their expected counts of orders 1-4 are the enumerated ones on every test
    sentence whose graph has at most 500 derivations (at least one)."""
    from minismt.corpus import Vocabulary
    from minismt.decode.settings import DecoderSettings
    from minismt.hypergraph import Hypergraph
    from minismt.io import read_lines
    from minismt.manifest import load_manifest
    from minismt.parallel import DecodeJob, decode_chunk, named_weights
    data, model = moses_system if kind == "phrase" else hiero_system
    manifest = load_manifest(str(model))
    space, vocab = FeatureSpace(manifest["features"]), Vocabulary()
    w = space.weights(manifest["default_weights"])
    sentences, grammar = read_lines(data / "test.src"), None
    if kind == "hiero":
        from minismt.decode.hiero import grammar_for
        grammar = grammar_for(str(model), sentences)
    job = DecodeJob(str(model), DecoderSettings(stack_size=5, pop_limit=5, kbest=0), *named_weights(space, w),
                    return_hypergraph=True, grammar=grammar)
    checked = 0
    for output in decode_chunk(job, list(range(len(sentences))), sentences):
        graph = Hypergraph.from_portable(output.hypergraph, space, vocab)
        weights = space.start_weights(w)
        if enumerable(graph):
            for order in (1, 2, 3, 4):
                assert_counts_equal(expected_ngram_counts(graph, weights, order),
                                    enumerated_counts(graph, weights, order))
            checked += 1
    assert checked >= 1
