"""The phrase-based decoder against a slow obvious scorer and an exhaustive search.

The slow scorer computes the 15 features of a derivation (its phrase pairs in target
order, each a source span and a phrase-table row) from scratch: translation-model logs
from the table, Moses' distance and orientation rules, and the LM's full-sentence score.
The exhaustive search enumerates every segmentation and ordering Moses' distortion
rules allow and scores each with the slow scorer.
"""

from __future__ import annotations

import gzip
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import shared_path
from corpora.synthetic import write_synthetic
from minismt.corpus import Tokenizer, Vocabulary
from minismt.decode import FEATURE_NAMES, MAX_SENTENCE_LENGTH, Decoder, PhraseModel
from minismt.decode import _kernels
from minismt.decode.options import collect_options
from minismt.errors import InputError
from minismt.extract import PhraseTable
from minismt.lm import LanguageModel, estimate_kn
from minismt.train import Trainer, TrainingConfig

COL = {name: i for i, name in enumerate(FEATURE_NAMES)}
LN10 = math.log(10.0)


# ----------------------------------------------------------------------------- slow reference

def slow_features(model: PhraseModel, tokens, steps, complete: bool, end_orientation: bool = False):
    """Features of a derivation from scratch; ``steps`` = [(start, end exclusive, row)] in target order
    (row -1: the source word copied through)."""
    table, f = model.table, np.zeros(len(FEATURE_NAMES))
    words, prev, prev_reo = [], None, None
    for start, end, row in steps:
        last = end - 1
        if row >= 0:
            target = table.tgt_vocab.decode(table.target_ids(row).tolist())
            for i in range(4):
                f[COL[f"TranslationModel0_{i}"]] += max(math.log(table.scores[row, i]), -100.0)
            reo = [max(math.log(p), -100.0) for p in table.reordering[row]]
        else:
            assert end - start == 1
            target = [tokens[start]]
            f[COL["UnknownWordPenalty0_0"]] -= 100
            reo = [0.0] * 6
        f[COL["WordPenalty0_0"]] -= len(target)
        f[COL["PhrasePenalty0_0"]] += 1
        prev_end = prev[1] if prev else -1
        f[COL["Distortion0_0"]] -= abs(start - (prev_end + 1))
        if prev is None:
            ori = 0 if start == 0 else 2
        elif start == prev[1] + 1:
            ori = 0
        elif prev[0] == last + 1:
            ori = 1
        else:
            ori = 2
        f[COL[f"LexicalReordering0_{ori}"]] += reo[ori]
        if prev is not None:
            f[COL[f"LexicalReordering0_{3 + ori}"]] += prev_reo[3 + ori]
        prev, prev_reo = (start, last), reo
        words.extend(target)
    if complete and end_orientation and prev is not None:
        ori = 0 if prev[1] == len(tokens) - 1 else 2
        f[COL[f"LexicalReordering0_{3 + ori}"]] += prev_reo[3 + ori]
    f[COL["LM0_0"]] = model.lm.score(" ".join(words), bos=True, eos=complete) * LN10
    return f, " ".join(words)


def span_options(table: PhraseTable, tokens, max_length: int) -> dict:
    """{(start, end): rows} of every span, with the pass-through (-1) for words without an option."""
    ids = table.src_vocab.encode(tokens, grow=False)
    out = {}
    for s in range(len(tokens)):
        for e in range(s + 1, min(len(tokens), s + max_length) + 1):
            if np.all(ids[s:e] >= 0):
                rows = table.lookup(ids[s:e]).tolist()
                if rows:
                    out[(s, e)] = rows
        if (s, s + 1) not in out:
            out[(s, s + 1)] = [-1]
    return out


def all_derivations(table: PhraseTable, tokens, limit: int, max_length: int):
    """Every derivation Moses' search may build: |start - (prev_end + 1)| <= limit, and a phrase
    not starting at the first gap ends within ``limit`` of it."""
    n = len(tokens)
    options = span_options(table, tokens, max_length)

    def extend(covered, prev_end, steps):
        if all(covered):
            yield list(steps)
            return
        gap = covered.index(False)
        for s in range(n):
            if covered[s] or (limit >= 0 and abs(s - (prev_end + 1)) > limit):
                continue
            for e in range(s + 1, min(n, s + max_length) + 1):
                if covered[e - 1]:
                    break
                if limit >= 0 and s != gap and e - gap > limit:
                    continue
                for row in options.get((s, e), []):
                    now = covered[:s] + [True] * (e - s) + covered[e:]
                    steps.append((s, e, row))
                    yield from extend(now, e - 1, steps)
                    steps.pop()

    yield from extend([False] * n, -1, [])


def dense_edge_features(hg) -> np.ndarray:
    out = np.zeros((hg.n_edges, len(FEATURE_NAMES)))
    rows = np.repeat(np.arange(hg.n_edges), np.diff(hg.feat_offsets))
    out[rows, hg.feat_ids] = hg.feat_values
    return out


def derivation_steps(result, edges) -> list:
    """(start, end, row) of a derivation's phrase edges (given pre-order, goal first) in target order."""
    steps = []
    for e in reversed([int(x) for x in edges]):
        if result.edge_spans[e, 0] >= 0:
            steps.append((int(result.edge_spans[e, 0]), int(result.edge_spans[e, 1]), int(result.edge_rows[e])))
    return steps


def count_derivations(hg) -> int:
    count = [0] * hg.n_nodes
    for v in range(hg.n_nodes):
        lo, hi = hg.in_offsets[v], hg.in_offsets[v + 1]
        if lo == hi:
            count[v] = 1
        for e in range(lo, hi):
            c = 1
            for t in hg.edge_tails(e):
                c *= count[int(t)]
            count[v] += c
    return count[-1]


# ----------------------------------------------------------------------------- models

def tiny_model(seed: int, sentences) -> PhraseModel:
    """A hand-made phrase table over the n-grams of ``sentences`` and a trigram LM on random text."""
    rng = random.Random(seed)
    src_vocab = Vocabulary(sorted({w for s in sentences for w in s.split()} - {"zz"}))
    tgt_words = [f"t{i}" for i in range(9)]
    tgt_vocab = Vocabulary(tgt_words + ["tx"])  # "tx" is unknown to the LM
    pairs = {}
    for sentence in sentences:
        words = sentence.split()
        for s in range(len(words)):
            for length, chance, most in ((1, 1.0, 2), (2, 0.4, 2), (3, 0.3, 1)):
                gram = tuple(words[s:s + length])
                if len(gram) < length or "zz" in gram or gram == ("s7",) or rng.random() > chance:
                    continue
                for _ in range(rng.randint(1, most)):
                    target = tuple(rng.choice(tgt_words + ["tx"]) for _ in range(rng.randint(1, 3)))
                    pairs[(gram, target)] = None
    rows = list(pairs)
    src_ids = [src_vocab.encode(list(g), grow=False) for g, _ in rows]
    tgt_ids = [tgt_vocab.encode(list(t), grow=False) for _, t in rows]
    n = len(rows)
    reordering = np.array([[*_simplex(rng), *_simplex(rng)] for _ in range(n)])
    table = PhraseTable.from_rows(
        src_vocab, tgt_vocab, np.concatenate(src_ids), np.cumsum([0] + [len(x) for x in src_ids]),
        np.concatenate(tgt_ids), np.cumsum([0] + [len(x) for x in tgt_ids]),
        np.array([[rng.uniform(0.02, 1.0) for _ in range(4)] for _ in range(n)]), np.ones((n, 3)),
        np.zeros((0, 2), dtype=np.int16), np.zeros(n + 1, dtype=np.int64), reordering)
    text = [" ".join(rng.choice(tgt_words) for _ in range(rng.randint(2, 8))) for _ in range(300)]
    lm = LanguageModel.from_model(estimate_kn(text, order=3, discount_fallback=True))
    weights = {name: rng.uniform(0.1, 1.0) for name in FEATURE_NAMES}
    weights["WordPenalty0_0"] = rng.uniform(-1.0, 1.0)
    weights["UnknownWordPenalty0_0"] = 1.0
    return PhraseModel.from_parts(table, lm, weights, distortion_limit=2)


def _simplex(rng):
    x = [rng.uniform(0.05, 1.0) for _ in range(3)]
    return [v / sum(x) for v in x]


TINY_SENTENCES = ["s0 s1 s2 s3 s4", "s3 s7 s2 s6", "s4 zz s0 s5", "s5 s1 s6 s0 s2", "s6 s5 s4 s2"]


@pytest.fixture(scope="module")
def tiny():
    return tiny_model(5, TINY_SENTENCES)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    corpus = tmp_path_factory.mktemp("corpus")
    write_synthetic(corpus, n_pairs=1500, seed=3)
    out = tmp_path_factory.mktemp("model")
    Trainer(TrainingConfig(src=str(corpus / "train.src"), tgt=str(corpus / "train.tgt"), out=str(out),
                           lm_order=4, progress=False)).run()
    model = PhraseModel.load(out)
    test = (corpus / "test.src").read_text(encoding="utf-8").splitlines()
    return model, out, test


# ----------------------------------------------------------------------------- exhaustive search

@pytest.mark.parametrize("limit, weights", [(2, None), (-1, None), (2, {"LM0_0": -0.2})])
def test_no_search_error_and_the_graph_holds_every_derivation(tiny, limit, weights):
    """Without pruning the best is the true maximum over all derivations (scored from scratch),
    the search graph holds exactly all of them and its k best are the top of the enumeration.
    (A negative LM weight switches off the decoder's LM upper-bound test.)"""
    model = tiny.with_weights(weights)
    w = model.weights
    decoder = Decoder(model, stack_size=10 ** 6, beam_threshold=0.0, distortion_limit=limit, table_limit=0)
    for sentence in TINY_SENTENCES if limit >= 0 else [s for s in TINY_SENTENCES if len(s.split()) < 5]:
        tokens = sentence.split()
        scored = []
        for steps in all_derivations(model.table, tokens, limit, 3):
            f, text = slow_features(model, tokens, steps, complete=True)
            scored.append((float(f @ w), text, f))
        scored.sort(key=lambda x: -x[0])
        result = decoder.decode(sentence)
        assert result.score == pytest.approx(scored[0][0], abs=1e-9)
        best_texts = {text for score, text, _ in scored if score > scored[0][0] - 1e-9}
        assert result.best in best_texts
        assert count_derivations(result.hypergraph) == len(scored)
        kb = result.hypergraph.kbest(30, w)
        np.testing.assert_allclose(kb.scores, [s for s, _, _ in scored[:30]], atol=1e-9)
        for d in kb:
            f, text = slow_features(model, tokens, derivation_steps(result, d.edges), complete=True)
            assert text == d.text
            np.testing.assert_allclose(d.dense(), f, atol=1e-9)


def test_end_orientation_option_matches_the_slow_scorer(tiny):
    decoder = Decoder(tiny, stack_size=10 ** 6, beam_threshold=0.0, table_limit=0, score_end_orientation=True)
    for sentence in TINY_SENTENCES[:3]:
        tokens = sentence.split()
        best = max(float(slow_features(tiny, tokens, steps, True, True)[0] @ tiny.weights)
                   for steps in all_derivations(tiny.table, tokens, 2, 3))
        result = decoder.decode(sentence)
        assert result.score == pytest.approx(best, abs=1e-9)
        for d in result.hypergraph.kbest(10, tiny.weights):
            f, _ = slow_features(tiny, tokens, derivation_steps(result, d.edges), True, True)
            np.testing.assert_allclose(d.dense(), f, atol=1e-9)


# ----------------------------------------------------------------------------- search graph

def test_viterbi_of_the_graph_is_the_decoder_best(synthetic):
    model, _, test = synthetic
    for stack in (200, 10):
        decoder = Decoder(model, stack_size=stack)
        for sentence in test[:12]:
            result = decoder.decode(sentence)
            best = result.hypergraph.viterbi(decoder.weights)
            assert best.score == pytest.approx(result.score, abs=1e-9)
            assert best.text == result.best
            np.testing.assert_allclose(best.dense(), result.features, atol=1e-9)
            assert float(result.features @ decoder.weights) == pytest.approx(result.score, abs=1e-9)


def test_kbest_derivations_recompute_with_the_slow_scorer(synthetic):
    model, _, test = synthetic
    decoder = Decoder(model, stack_size=50)
    for sentence in test[:5]:
        tokens = sentence.split()
        result = decoder.decode(sentence)
        kb = result.hypergraph.kbest(25, decoder.weights)
        assert len(kb) == 25
        for d in kb:
            assert float(d.dense() @ decoder.weights) == pytest.approx(d.score, abs=1e-9)
            f, text = slow_features(model, tokens, derivation_steps(result, d.edges), complete=True)
            assert text == d.text
            np.testing.assert_allclose(d.dense(), f, atol=1e-8)


def test_every_arc_and_hypothesis_recomputes_with_the_slow_scorer(synthetic):
    """For every edge, the best path to its tail plus the edge is a partial derivation whose
    summed features equal the slow scorer's; so every hypothesis' features are right."""
    model, _, test = synthetic
    decoder = Decoder(model, stack_size=100)
    for sentence in test[:3]:
        tokens = sentence.split()
        result = decoder.decode(sentence)
        hg = result.hypergraph
        feats = dense_edge_features(hg)
        _, back = hg.viterbi_scores(decoder.weights)
        path_steps, path_feats = [None] * hg.n_nodes, [None] * hg.n_nodes
        path_steps[0], path_feats[0] = [], np.zeros(len(FEATURE_NAMES))
        for v in range(1, hg.goal):
            e = int(back[v])
            t = int(hg.edge_tails(e)[0])
            path_steps[v] = path_steps[t] + [(int(result.edge_spans[e, 0]), int(result.edge_spans[e, 1]),
                                              int(result.edge_rows[e]))]
            path_feats[v] = path_feats[t] + feats[e]
        covered = np.bincount([sum(b - a for a, b, _ in path_steps[v]) for v in range(1, hg.goal)])
        assert covered.max() <= decoder.stack_size  # histogram pruning
        for e in range(1, hg.n_edges):
            t = int(hg.edge_tails(e)[0])
            if hg.edge_head[e] == hg.goal:
                f, _ = slow_features(model, tokens, path_steps[t], complete=True)
            else:
                step = (int(result.edge_spans[e, 0]), int(result.edge_spans[e, 1]), int(result.edge_rows[e]))
                f, _ = slow_features(model, tokens, path_steps[t] + [step], complete=False)
            np.testing.assert_allclose(path_feats[t] + feats[e], f, atol=1e-8)


def test_search_that_outgrows_its_first_stores_keeps_every_expansion_once(synthetic):
    """The expansions stop to grow the hypothesis and arc stores (1,024 and 4,096 rows at first) and go on
    where they stopped: a search that creates more hypotheses and arcs than that has no arc twice, and
    every arc's head is a hypothesis of the stack its span leads to."""
    model, _, test = synthetic
    decoder = Decoder(model, stack_size=200)
    sentence = max(test, key=len)
    result = decoder.decode(sentence)
    assert result.stats["created"] > 1024 and result.stats["recombined"] + result.stats["created"] > 4096
    hg = result.hypergraph
    arcs = {(int(hg.edge_tails(e)[0]), int(hg.edge_head[e]), int(result.edge_rows[e]), tuple(result.edge_spans[e]))
            for e in range(1, hg.n_edges)}
    assert len(arcs) == hg.n_edges - 1
    covered = result.coverage().sum(axis=1)
    for e in range(1, hg.in_offsets[hg.goal]):
        start, end = result.edge_spans[e]
        assert covered[hg.edge_head[e]] == covered[hg.edge_tails(e)[0]] + (end - start)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([-np.inf, -3.0, -2.5, -1.0, 0.0, 0.5]), min_size=1, max_size=70))
def test_pruning_sorts_best_first_as_numpys_stable_argsort(values):
    totals = np.array(values)
    order = np.empty(len(values), np.int64)
    _kernels._sort_best_first(totals, len(values), order, np.empty(len(values), np.int64))
    assert order.tolist() == np.argsort(-totals, kind="stable").tolist()


def test_the_best_alone_equals_the_graphs_best(synthetic):
    """``decode(graph=False)`` follows the best complete hypothesis' best arcs instead of building the
    graph: the same translation, score, features and phrases as the graph's 1-best, bit for bit."""
    model, _, test = synthetic
    plain = Decoder(model, stack_size=50)
    sparse = Decoder(model, stack_size=50, sparse_features="rule-id,word-pair")
    for decoder, sentence in [(plain, x) for x in test[:8] + [""]] + [(sparse, x) for x in test[8:12]]:
        full, alone = decoder.decode(sentence), decoder.decode(sentence, graph=False)
        assert alone.hypergraph is None and (decoder is plain or alone.sparse)
        assert (alone.best, alone.score, alone.sparse) == (full.best, full.score, full.sparse)
        assert alone.features.tolist() == full.features.tolist()
        path = full.hypergraph.viterbi(decoder.full_weights())
        phrases = [e for e in path.edges.tolist()[::-1] if full.edge_spans[e, 0] >= 0]
        assert alone.edge_spans.tolist() == full.edge_spans[phrases].tolist()
        assert alone.edge_rows.tolist() == full.edge_rows[phrases].tolist()


def test_graph_is_topological_recombined_and_moses_shaped(synthetic):
    model, _, test = synthetic
    result = Decoder(model).decode(test[0])
    hg = result.hypergraph
    for e in range(hg.n_edges):
        assert all(int(t) < int(hg.edge_head[e]) for t in hg.edge_tails(e))
    indegree = np.diff(hg.in_offsets)
    assert indegree[:-1].max() > 1, "no hypothesis was recombined"
    assert indegree[0] == 1 and hg.edge_tails(0).size == 0 and hg.edge_target(0) == ""
    assert not hg.edge_features(0)
    goal_edges = range(hg.in_offsets[hg.goal], hg.in_offsets[hg.goal + 1])
    for e in goal_edges:
        assert hg.edge_target(e) == "[1]" and set(hg.edge_features(e)) == {"LM0_0"}
    for e in range(1, hg.in_offsets[hg.goal]):
        assert hg.edge_target(e).startswith("[1] ") and hg.edge_features(e)["PhrasePenalty0_0"] == 1.0
    # every node reaches the goal and is reached from the start
    assert set(hg.tails.tolist()) == set(range(hg.goal))
    assert hg.space.names == list(FEATURE_NAMES)
    assert result.n_nodes == hg.n_nodes and result.n_edges == hg.n_edges
    assert result.stats["recombined"] > 0 and set(result.timings) >= {"search", "total"}


def test_recombination_ignores_the_number_of_target_words(synthetic):
    """Moses' recombination state is its stateful features' states (coverage, LM state, last span and its
    forward reordering class): hypotheses that differ only in how many target words they wrote recombine
    (the word penalty is stateless), so some search-graph node is reached by derivations of different
    lengths; forced decoding keeps the reference position in the state."""
    model, _, test = synthetic
    lengths_differ = False
    for sentence in test[:10]:
        hg = Decoder(model).decode(sentence).hypergraph
        lengths: list[set[int]] = []
        for node in range(hg.n_nodes):
            here: set[int] = set()
            for e in range(hg.in_offsets[node], hg.in_offsets[node + 1]):
                words = sum(1 for w in hg.edge_target(e).split() if w != "[1]")
                tails = hg.edge_tails(e)
                here |= {n + words for n in lengths[int(tails[0])]} if tails.size else {words}
            lengths.append(here)
        lengths_differ |= any(len(here) > 1 for here in lengths[:hg.goal])
    assert lengths_differ


# ----------------------------------------------------------------------------- inputs

def test_unknown_words_pass_through(synthetic):
    model, _, test = synthetic
    decoder = Decoder(model)
    sentence = test[1].split()
    before = decoder.decode(sentence).feature_dict["UnknownWordPenalty0_0"]
    sentence.insert(2, "zorglub")
    sentence.append("42")
    result = decoder.decode(sentence)
    assert "zorglub" in result.best.split() and "42" in result.best.split()
    assert result.feature_dict["UnknownWordPenalty0_0"] == before - 200.0
    assert "zorglub" in result.hypergraph.vocab and "zorglub" not in model.table.tgt_vocab
    f, text = slow_features(model, sentence, derivation_steps(result, result.hypergraph.viterbi(
        decoder.weights).edges), complete=True)
    assert text == result.best
    np.testing.assert_allclose(result.features, f, atol=1e-8)
    # Moses' -100 per unknown word, with the manifest's default weight
    assert model.weights[COL["UnknownWordPenalty0_0"]] * -100.0 == -100.0


def test_long_sentence_needs_more_than_64_coverage_bits(synthetic):
    model, _, test = synthetic
    tokens = " ".join(test).split()[:120]
    result = Decoder(model, stack_size=20).decode(tokens)
    assert result.hypergraph.viterbi(model.weights).score == pytest.approx(result.score, abs=1e-8)
    steps = derivation_steps(result, result.hypergraph.viterbi(model.weights).edges)
    covered = sorted(i for s, e, _ in steps for i in range(s, e))
    assert covered == list(range(120))
    np.testing.assert_allclose(result.features, slow_features(model, tokens, steps, True)[0], atol=1e-7)
    with pytest.raises(InputError):
        Decoder(model).decode(["w"] * (MAX_SENTENCE_LENGTH + 1))


def test_empty_sentence_gives_the_empty_translation(synthetic):
    model, _, _ = synthetic
    result = Decoder(model).decode("")
    assert result.best == "" and result.n_nodes == 2 and result.n_edges == 2
    expected = model.lm.score("", bos=True, eos=True) * LN10
    assert result.feature_dict["LM0_0"] == pytest.approx(expected)
    assert result.score == pytest.approx(expected * model.weights[COL["LM0_0"]])
    assert Decoder(model).force("", "") is not None and Decoder(model).force("", "x") is None


def test_bad_parameters_are_input_errors(synthetic):
    model, out, _ = synthetic
    with pytest.raises(InputError):
        Decoder(model, weights={"NoSuchFeature": 1.0})
    with pytest.raises(InputError):
        Decoder(model, weights={"LM0_0": float("nan")})
    with pytest.raises(InputError):
        Decoder(model, stack_size=0)
    with pytest.raises(InputError):
        Decoder(model, beam_threshold=2.0)
    with pytest.raises(InputError):
        Decoder(model).decode(["a", "b c"])
    with pytest.raises(InputError):
        PhraseModel.load(out / "model")
    decoder = Decoder(out, weights={"LM0_0": 0.7}, distortion_limit=3)
    assert decoder.weights[COL["LM0_0"]] == 0.7 and decoder.distortion_limit == 3
    assert decoder.model.distortion_limit == 6


def test_lm_bounds_are_upper_bounds(synthetic):
    """The decoder discards expansions before their LM lookups on these bounds."""
    model, _, test = synthetic
    lm = model.lm
    rng = random.Random(1)
    words = [w for s in test[:30] for w in s.split()] + ["</s>"]
    for sentence in test[:30]:
        state = lm.begin_sentence_state()
        for word in sentence.split():
            probe = rng.choice(words)
            logprob, _ = lm.score_word(state, probe)
            assert logprob <= model.lm_bounds[lm.encode([probe])[0]] + 1e-12
            _, state = lm.score_word(state, word)


def test_discarding_on_the_lm_bounds_changes_nothing_but_the_lookups(synthetic, monkeypatch):
    """Expansions are discarded on the LM bounds before their lookups and between them; with bounds that
    discard nothing the search makes the same hypotheses, arcs, prunings and translations, with more lookups."""
    model, _, test = synthetic
    with_bounds = [Decoder(model, stack_size=20).decode(x) for x in test[:12]]
    monkeypatch.setattr(model, "lm_bounds", np.full_like(model.lm_bounds, 1e3))
    without = [Decoder(model, stack_size=20).decode(x) for x in test[:12]]
    same = ("expansions", "discarded", "recombined", "created", "pruned")
    for a, b in zip(with_bounds, without):
        assert b.stats["discarded_before_lm"] == 0
        assert [a.stats[k] for k in same] == [b.stats[k] for k in same]
        assert (a.best, a.score, a.features.tolist()) == (b.best, b.score, b.features.tolist())
        assert a.edge_spans.tolist() == b.edge_spans.tolist() and a.edge_rows.tolist() == b.edge_rows.tolist()
    saved = sum(b.stats["lm_queries"] - a.stats["lm_queries"] for a, b in zip(with_bounds, without))
    early = sum(a.stats["discarded_before_lm"] for a in with_bounds)
    assert early > 0 and saved > early


# ----------------------------------------------------------------------------- forced decoding

def test_forced_decoding_reaches_the_decoder_output_and_nothing_else(synthetic):
    model, _, test = synthetic
    decoder = Decoder(model, stack_size=100)
    for sentence in test[:4]:
        free = decoder.decode(sentence)
        forced = decoder.force(sentence, free.best)
        assert forced is not None
        assert forced.best == free.best
        assert forced.score == pytest.approx(free.score, abs=1e-9)
        kb = forced.hypergraph.kbest(20, decoder.weights)
        assert all(d.text == free.best for d in kb)
        for d in kb:
            f, _ = slow_features(model, sentence.split(), derivation_steps(forced, d.edges), complete=True)
            np.testing.assert_allclose(d.dense(), f, atol=1e-8)
        assert decoder.force(sentence, "zorglub " + free.best) is None


def test_forced_decoding_finds_every_derivation_of_the_reference(tiny):
    decoder = Decoder(tiny, stack_size=10 ** 6, beam_threshold=0.0, table_limit=0)
    sentence = TINY_SENTENCES[0]
    tokens = sentence.split()
    by_text = {}
    for steps in all_derivations(tiny.table, tokens, 2, 3):
        f, text = slow_features(tiny, tokens, steps, complete=True)
        by_text.setdefault(text, []).append(float(f @ tiny.weights))
    text = max(by_text, key=lambda t: len(by_text[t]))
    forced = decoder.force(sentence, text)
    assert count_derivations(forced.hypergraph) == len(by_text[text])
    assert forced.score == pytest.approx(max(by_text[text]), abs=1e-9)


# ----------------------------------------------------------------------------- real text

def test_multi30k_sentences_decode_deterministically(synthetic):
    model, out, _ = synthetic
    with gzip.open(shared_path("corpora", "multi30k", "test_2016_flickr.de.gz"), "rt", encoding="utf-8") as f:
        raw = [next(f) for _ in range(5)]
    tokenizer = Tokenizer("de")
    sentences = [tokenizer(line) for line in raw]
    first = [Decoder(model).decode(s) for s in sentences]
    second = [Decoder(PhraseModel.load(out).with_weights(model.weights)).decode(s) for s in sentences]
    for a, b, s in zip(first, second, sentences):
        assert a.best == b.best and a.score == b.score
        assert a.best.split() == s.split()  # every word unknown to the toy model is copied in order
        np.testing.assert_array_equal(a.hypergraph.in_offsets, b.hypergraph.in_offsets)
        np.testing.assert_array_equal(a.hypergraph.feat_values, b.hypergraph.feat_values)
        np.testing.assert_array_equal(a.hypergraph.tmpl, b.hypergraph.tmpl)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(*[st.sampled_from([-0.0, 0.0, -1.5, -2.0]) for _ in range(3)]), max_size=40))
def test_forward_classes_group_equal_triples_as_numpys_unique(triples):
    reordering = np.zeros((len(triples), 6))
    if triples:
        reordering[:, 3:] = triples
    classes = np.empty(len(triples), np.int32)
    _kernels.forward_classes(reordering, classes)
    if triples:
        _, inverse = np.unique(reordering[:, 3:], axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        same = inverse[:, None] == inverse[None, :]
        assert ((classes[:, None] == classes[None, :]) == same).all()


# ----------------------------------------------------------------------------- translation options

def slow_options(model: PhraseModel, tokens, vocab: Vocabulary, weights, max_length: int) -> dict:
    """Every option of a sentence written out one by one, before any table limit: ``{(start, end, row): (target
    words, dense features, reordering, LM estimate, LM inner score, LM bound, future score)}`` in collection
    order (by span, then table row; row -1 the pass-through of a word with no phrase of its own)."""
    table, lm = model.table, model.lm
    c = lm.order - 1
    collected = {}
    for (s, e), rows in sorted(span_options(table, tokens, max_length).items(), key=lambda kv: kv[0][0]):
        for row in rows:
            f = np.zeros(len(FEATURE_NAMES))
            if row >= 0:
                target = table.target_ids(row).tolist()
                words = table.tgt_vocab.decode(target)
                with np.errstate(divide="ignore"):
                    f[[COL[f"TranslationModel0_{i}"] for i in range(4)]] = np.maximum(np.log(table.scores[row]),
                                                                                      -100.0)
                    reordering = np.maximum(np.log(table.reordering[row]), -100.0)
            else:
                words = [tokens[s]]
                target = [vocab.get(tokens[s])]
                f[COL["UnknownWordPenalty0_0"]] = -100.0
                reordering = np.zeros(6)
            f[COL["WordPenalty0_0"]] = -len(words)
            f[COL["PhrasePenalty0_0"]] = 1.0
            scores = [p for p, _, _ in lm.full_scores(" ".join(words), bos=False, eos=False)]
            bound = sum(scores[c:]) + sum(model.lm_bounds[w] for w in lm.encode(words)[:c])
            future = f @ weights + weights[COL["LM0_0"]] * LN10 * sum(scores)
            collected[(s, e, row)] = (target, f, reordering, sum(scores), sum(scores[c:]), bound, future)
    return collected


@pytest.fixture(scope="module")
def tiny_with_zeros():
    """A tiny model (trigram LM: targets longer than its context) with zero probabilities, floored at -100."""
    model = tiny_model(7, TINY_SENTENCES)
    model.table.scores[::3, 1] = 0.0
    model.table.reordering[::4, 2] = 0.0
    model.table.reordering[::5, 4] = 0.0
    return model


@settings(max_examples=60, deadline=None)
@given(st.data())
@pytest.mark.parametrize("which", ["synthetic", "tiny"])
def test_collected_options_are_the_options_written_out(synthetic, tiny_with_zeros, which, data):
    if which == "synthetic":
        model, _, test = synthetic
    else:
        model, test = tiny_with_zeros, TINY_SENTENCES
    words = sorted({w for line in test[:50] for w in line.split()}) + ["unseen", "words"]
    tokens = data.draw(st.lists(st.sampled_from(words), max_size=14))
    max_length = data.draw(st.integers(1, 7))
    table_limit = data.draw(st.sampled_from([0, 1, 2, 20]))
    weights = np.array(data.draw(st.lists(st.floats(-1.0, 1.0), min_size=len(FEATURE_NAMES),
                                          max_size=len(FEATURE_NAMES))))
    vocab = Vocabulary(list(model.table.tgt_vocab))
    max_length = max(1, min(max_length, len(tokens)))
    options = collect_options(model, tokens, vocab, weights, max_length, table_limit)
    every = slow_options(model, tokens, vocab, weights, max_length)
    keys = [(int(s), int(e), int(r)) for s, e, r in zip(options.start, options.end, options.row)]
    expected = [every[key] for key in keys]
    close = dict(rtol=1e-12, atol=1e-12)
    for o, option in enumerate(expected):
        assert options.tgt[options.tgt_offsets[o]:options.tgt_offsets[o + 1]].tolist() == option[0]
    np.testing.assert_allclose(options.dense, np.array([o[1] for o in expected]).reshape(-1, len(FEATURE_NAMES)),
                               **close)
    np.testing.assert_allclose(options.reordering, np.array([o[2] for o in expected]).reshape(-1, 6), **close)
    for name, k in (("lm_estimate", 3), ("lm_inner", 4), ("lm_bound", 5), ("future", 6)):
        np.testing.assert_allclose(getattr(options, name), [o[k] for o in expected], **close, err_msg=name)
    # by span, best future first (ties in collection order), the table_limit best of each span kept
    spans = sorted({key[:2] for key in every}, key=lambda span: (span[0], span[1] - span[0]))
    assert sorted(set(k[:2] for k in keys), key=spans.index) == spans
    positions = [spans.index(k[:2]) for k in keys]
    assert positions == sorted(positions)
    for span in spans:
        kept = [o for o, key in enumerate(keys) if key[:2] == span]
        assert kept == list(range(kept[0], kept[-1] + 1))
        assert len(kept) == min(table_limit or len(every), sum(key[:2] == span for key in every))
        for a, b in zip(kept, kept[1:]):
            assert options.future[a] > options.future[b] or (options.future[a] == options.future[b]
                                                              and keys[a][2] < keys[b][2])
        dropped = [every[key][6] for key in every if key[:2] == span and key not in keys]
        assert all(d <= options.future[kept[-1]] + 1e-9 for d in dropped)
        lo, hi = options.span_lo[span[0], span[1] - span[0] - 1], options.span_hi[span[0], span[1] - span[0] - 1]
        assert list(range(lo, hi)) == kept
    assert (options.span_hi - options.span_lo).sum() == len(keys)
    triples = [tuple(o[2][3:] + 0.0) for o in expected]
    assert [[a == b for b in triples] for a in triples] == \
        [[a == b for b in options.fwd_class] for a in options.fwd_class]
