"""The Hiero chart decoder (minismt.decode.hiero) against brute-force enumeration
(tests/hiero_decoder_reference.py) on small random grammars with a small LM:

* without pruning, the best score equals the best derivation's and the forest holds exactly the
  derivations the reference enumerates (yields and scores);
* with pruning, the forest's Viterbi is the decoder's 1-best and every k-best entry's features
  recompute its score;
* an all-unknown sentence, an empty line.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from hiero_decoder_reference import FEATURE_NAMES, Rule, enumerate_derivations
from minismt.corpus import Vocabulary
from minismt.decode.hiero import HieroDecoder
from minismt.extract.hiero_grammar import HieroGrammar
from minismt.extract.hiero_table import HieroTable
from minismt.lm import LanguageModel, estimate_kn

SRC = ["a", "b", "c", "d"]
TGT = ["w", "x", "y", "z"]


def grammar_of(rules: list[Rule]) -> HieroGrammar:
    """A HieroGrammar holding ``rules`` (grouped by source side, as the decoder expects)."""
    src_vocab, tgt_vocab = Vocabulary(), Vocabulary()

    def encode(side, vocab):
        return [-s if isinstance(s, int) else vocab.add(s) for s in side]

    encoded = [(encode(r.source, src_vocab), encode(r.target, tgt_vocab), r.scores) for r in rules]
    encoded.sort(key=lambda e: e[0])
    src = [e[0] for e in encoded]
    source_offsets = [0] + [k + 1 for k in range(len(src) - 1) if src[k] != src[k + 1]] + [len(src)]

    def flat(sides):
        offsets = np.cumsum([0] + [len(s) for s in sides]).astype(np.int64)
        return np.array([x for s in sides for x in s], dtype=np.int32), offsets

    src_syms, src_off = flat(src)
    tgt_syms, tgt_off = flat([e[1] for e in encoded])
    table = HieroTable(src_syms, src_off, tgt_syms, tgt_off, np.zeros((0, 2), dtype=np.int16),
                       np.zeros(len(encoded) + 1, dtype=np.int64), np.array([e[2] for e in encoded]),
                       np.zeros((len(encoded), 3)))
    return HieroGrammar(table, src_vocab, tgt_vocab, np.array(source_offsets, dtype=np.int64),
                        np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32))


def random_rules(rng: np.random.Generator, n_rules: int) -> list[Rule]:
    rules = set()
    while len(rules) < n_rules:
        shape = rng.integers(0, 4)
        if shape == 0:                       # a phrase pair
            source = tuple(rng.choice(SRC, size=int(rng.integers(1, 3))))
            target = tuple(rng.choice(TGT, size=int(rng.integers(1, 3))))
        elif shape == 1:                     # one non-terminal
            source = tuple(rng.choice(SRC, size=1)) + (1,)
            if rng.random() < 0.5:
                source = source[::-1]
            target = tuple(rng.choice(TGT, size=int(rng.integers(0, 2)))) + (1,)
            if rng.random() < 0.5 or len(target) == 1:
                target = target[::-1] + (str(rng.choice(TGT)),)
        else:                                # two non-terminals, straight or crossed
            source = (1, str(rng.choice(SRC)), 2)
            nts = (1, 2) if rng.random() < 0.5 else (2, 1)
            target = (nts[0], str(rng.choice(TGT)), nts[1])
        scores = tuple(float(x) for x in rng.uniform(0.05, 1.0, size=4))
        rules.add(Rule(source, target, scores))
    return sorted(rules, key=repr)


@pytest.fixture(scope="module")
def lm():
    rng = np.random.default_rng(5)
    lines = [" ".join(rng.choice(TGT, size=int(rng.integers(1, 8)))) for _ in range(200)]
    return LanguageModel.from_model(estimate_kn(lines, order=3, discount_fallback=True))


def _weights(rng) -> dict[str, float]:
    base = {"UnknownWordPenalty0_0": 1.0, "WordPenalty0_0": -1.0, "PhrasePenalty0_0": 0.2,
            "TranslationModel0_0": 0.2, "TranslationModel0_1": 0.2, "TranslationModel0_2": 0.2,
            "TranslationModel0_3": 0.2, "TranslationModel1_0": 1.0, "LM0_0": 0.5}
    return {k: v * float(rng.uniform(0.5, 1.5)) for k, v in base.items()}


@pytest.mark.parametrize("seed", range(30))
def test_unpruned_search_equals_every_derivation(lm, seed):
    rng = np.random.default_rng(seed)
    rules = random_rules(rng, int(rng.integers(4, 12)))
    sentence = list(rng.choice(SRC + ["q"], size=int(rng.integers(1, 5))))
    weights = _weights(rng)
    max_span = int(rng.integers(2, 6))
    expected = enumerate_derivations(sentence, rules, lm, weights, max_span=max_span)
    decoder = HieroDecoder(grammar_of(rules), lm, weights, table_limit=0, pop_limit=10**9,
                           max_span=max_span)
    result = decoder.decode(sentence)
    best = max(expected, key=lambda d: d.score)
    assert result.score == pytest.approx(best.score, abs=1e-6)
    # the forest holds every derivation: the same multiset of (yield, score)
    forest = result.hypergraph.kbest(len(expected) + 5, decoder.weights)
    assert len(forest.scores) == len(expected)
    ours = Counter((text, round(float(s), 6)) for text, s in zip(forest.texts, forest.scores))
    theirs = Counter((" ".join(d.words), round(d.score, 6)) for d in expected)
    assert ours == theirs


@pytest.mark.parametrize("seed", range(20))
def test_pruned_forest_viterbi_is_the_one_best(lm, seed):
    rng = np.random.default_rng(100 + seed)
    rules = random_rules(rng, 20)
    sentence = list(rng.choice(SRC + ["q"], size=int(rng.integers(3, 9))))
    weights = _weights(rng)
    decoder = HieroDecoder(grammar_of(rules), lm, weights, table_limit=3, pop_limit=int(rng.integers(1, 6)))
    result = decoder.decode(sentence)
    best = result.hypergraph.viterbi(decoder.weights)
    assert best.score == pytest.approx(result.score, abs=1e-9) and best.text == result.best
    kbest = result.hypergraph.kbest(20, decoder.weights)
    assert len(kbest) >= 1 and kbest.scores[0] == pytest.approx(result.score, abs=1e-9)
    names = list(FEATURE_NAMES)
    for derivation in kbest:
        features = derivation.features()
        assert set(features) <= set(names) and features["PhrasePenalty0_0"] >= 3
        assert sum(decoder.weights[names.index(k)] * v for k, v in features.items()) == \
            pytest.approx(derivation.score, abs=1e-9)


def test_unknown_words_and_empty_line(lm):
    rules = [Rule(("a",), ("w",), (0.5, 0.5, 0.5, 0.5))]
    decoder = HieroDecoder(grammar_of(rules), lm)
    result = decoder.decode(["zz", "yy"])
    assert result.best == "zz yy"
    assert result.feature_dict()["UnknownWordPenalty0_0"] == -200.0
    assert result.feature_dict()["WordPenalty0_0"] == -4.0
    empty = decoder.decode([])
    assert empty.best == ""
    assert empty.feature_dict()["WordPenalty0_0"] == -2.0
    assert empty.feature_dict()["LM0_0"] == pytest.approx(np.log(10) * lm.score("", bos=True, eos=True))


@pytest.mark.slow
def test_moses_hiero_anchor_sentences(tmp_path):
    """The Moses Hiero anchor (fixtures/moses/m30k-hiero): our rules from the alignment Moses' were
    made from (minismt train --aligner hmm, 374,641 links), our LM, the untuned weights, pop limit
    1000 and Moses' span limit 20: the 1-best of the 5 fixture sentences is Moses' and so is the
    model score of each (Moses' n-best list's first entry)."""
    from conftest import shared_path
    from corpora.fetch import fetch
    from minismt.corpus import Alignment, TokenArray
    from minismt.extract.hiero_grammar import build_grammars
    from minismt.io import read_lines
    from minismt.manifest import HIERO_DEFAULT_WEIGHTS
    from minismt.train import Trainer, TrainingConfig
    fixture = shared_path("fixtures", "moses", "m30k-hiero")
    corpus = shared_path("corpora", "multi30k")
    if not (fixture / "test5.src").is_file() or not corpus.is_dir():
        pytest.skip("the m30k-hiero fixture or the Multi30k corpus is missing")
    fetch("multi30k-de-en", tmp_path / "data", from_dir=corpus, progress=False)
    trainer = Trainer(TrainingConfig(src=str(tmp_path / "data" / "train.src"),
                                     tgt=str(tmp_path / "data" / "train.tgt"), out=str(tmp_path / "m"),
                                     aligner="hmm", progress=False))
    trainer.prepare()
    assert trainer.align().info["links"] == 374_641
    trainer.lm()
    model = tmp_path / "m"
    src_vocab, tgt_vocab = Vocabulary(), Vocabulary()
    src = TokenArray.from_sentences(read_lines(model / "corpus" / "train.src"), src_vocab)
    tgt = TokenArray.from_sentences(read_lines(model / "corpus" / "train.tgt"), tgt_vocab)
    sentences = read_lines(fixture / "test5.src")
    grammar = build_grammars(src, tgt, Alignment.read(model / "align" / "aligned.grow-diag-final-and"),
                             src_vocab, tgt_vocab, {"test5": sentences})[0]["test5"]
    lm = LanguageModel.from_arpa(model / "lm" / "lm.4.arpa")
    decoder = HieroDecoder(grammar, lm, HIERO_DEFAULT_WEIGHTS, pop_limit=1000, max_span=20)
    moses_best = read_lines(fixture / "test5.1best.out")
    moses_scores = {}
    for line in read_lines(fixture / "nbest100.txt"):
        fields = line.split(" ||| ")
        moses_scores.setdefault(int(fields[0]), float(fields[-1]))
    for i, sentence in enumerate(sentences):
        result = decoder.decode(sentence)
        assert result.best == moses_best[i].strip()
        assert result.score == pytest.approx(moses_scores[i], abs=1e-3)


def test_sparse_rule_features_on_the_edges(lm):
    """With sparse rule features, every grammar rule's edge carries its features (as
    minismt.extract.hiero_features computes them), their weights join the search, the forest's
    Viterbi under the full weights is the 1-best, and k-best features recompute the scores."""
    from minismt.extract.hiero_features import FAMILIES, rule_features
    rng = np.random.default_rng(3)
    rules = random_rules(rng, 25)
    grammar = grammar_of(rules)
    families = list(FAMILIES)
    plain = HieroDecoder(grammar, lm)
    found = rule_features(grammar.table, grammar.src_vocab.words, grammar.tgt_vocab.words, families)
    weights = {name: float(rng.normal(0, 0.3)) for name in found.names[::3]}
    decoder = HieroDecoder(grammar, lm, weights, sparse_features=families)
    w = decoder.full_weights()
    assert len(w) == len(decoder.space) == len(FEATURE_NAMES) + len(set(found.names))
    sentences = [list(rng.choice(SRC, size=int(rng.integers(3, 7)))) for _ in range(8)]
    changed = 0
    for sentence in sentences:
        result = decoder.decode(sentence)
        graph = result.hypergraph
        best = graph.viterbi(w)
        assert best.score == pytest.approx(result.score, abs=1e-9) and best.text == result.best
        for derivation in graph.kbest(10, w):
            assert float(derivation.dense() @ w) == pytest.approx(derivation.score, abs=1e-9)
        assert any(name.startswith("RuleShape_") for name in result.sparse)
        changed += plain.decode(sentence).best != result.best
    assert changed > 0            # the sparse weights change some translations
    # the features of a grammar edge are its rule's
    result = decoder.decode(sentences[0])
    graph = result.hypergraph
    for e in range(graph.n_edges):
        feats = graph.edge_features(e)
        if "TranslationModel0_0" in feats:
            sparse = {k for k in feats if k not in FEATURE_NAMES}
            assert any(k.startswith("RuleId_") for k in sparse)
            assert sum(k.startswith("RuleShape_") for k in sparse) == 1


def test_weights_over_names_decode_as_the_same_weights_by_name(lm):
    """A worker's weights (an array over names, the dense names first) give the Hiero decoder the weights the same
    ``{name: weight}`` gives, new weights over the same names too (the grammar keeps each name's place), and the
    same checks: a family that is off, an unknown name, a weight that is not finite; a name no rule has weighs
    nothing, as by name."""
    from minismt.errors import InputError
    from minismt.extract.hiero_features import FAMILIES, rule_features
    from minismt.decode.hiero import FEATURE_NAMES as DENSE
    rng = np.random.default_rng(5)
    grammar = grammar_of(random_rules(rng, 25))
    families = list(FAMILIES)
    found = rule_features(grammar.table, grammar.src_vocab.words, grammar.tgt_vocab.words, families)
    names = tuple(DENSE) + tuple(dict.fromkeys(found.names[::2])) + ("RuleId_no~rule",)
    plain = HieroDecoder(grammar, lm)
    sentences = [list(rng.choice(SRC, size=int(rng.integers(3, 7)))) for _ in range(6)]
    for trial in range(3):
        values = np.concatenate([plain.weights, rng.normal(0, 0.5, len(names) - len(DENSE))])
        values[len(DENSE) + trial::3] = 0.0
        by_array = HieroDecoder(grammar, lm, values, sparse_features=families, names=names)
        by_name = HieroDecoder(grammar, lm, dict(zip(names, values.tolist())), sparse_features=families)
        np.testing.assert_array_equal(by_array.full_weights(), by_name.full_weights())
        assert by_array.space == by_name.space
        for sentence in sentences:
            a, b = by_array.decode(sentence), by_name.decode(sentence)
            assert (a.best, a.score, a.sparse) == (b.best, b.score, b.sparse)
    for bad, error in (("WordPair_a~b", "word-pair features are off"),
                       ("NoSuch_a", "unknown feature name")):
        with pytest.raises(InputError, match=error):
            HieroDecoder(grammar, lm, np.concatenate([plain.weights, [1.0]]), sparse_features=["rule-id"],
                         names=tuple(DENSE) + (bad,))
    values = np.concatenate([plain.weights, np.ones(len(names) - len(DENSE))])
    values[-2] = np.inf
    with pytest.raises(InputError, match="weight of"):
        HieroDecoder(grammar, lm, values, sparse_features=families, names=names)


def test_a_60_word_sentence(lm):
    """A long sentence: every rule-table span stays within max_span, the glue chains the whole
    sentence, the forest's Viterbi is the 1-best and each word is translated or copied."""
    rng = np.random.default_rng(60)
    rules = random_rules(rng, 20)
    decoder = HieroDecoder(grammar_of(rules), lm, pop_limit=20)
    sentence = list(rng.choice(SRC + ["q"], size=60))
    result = decoder.decode(sentence)
    features = result.feature_dict()
    assert features["UnknownWordPenalty0_0"] == -100.0 * sentence.count("q")
    assert result.best.split().count("q") == sentence.count("q")
    assert features["TranslationModel1_0"] > 0           # glue rules joined the pieces
    best = result.hypergraph.viterbi(decoder.full_weights())
    assert best.text == result.best and best.score == pytest.approx(result.score, abs=1e-9)


@pytest.mark.parametrize("seed", range(30))
def test_forced_decoding_equals_every_derivation_of_the_reference(lm, seed):
    """Forced decoding to the yield of some derivation: the forest holds exactly the derivations the
    reference enumerates with that yield (scores included), its best is the 1-best; a reference the
    grammar cannot write gives None."""
    rng = np.random.default_rng(300 + seed)
    rules = random_rules(rng, int(rng.integers(4, 12)))
    sentence = list(rng.choice(SRC + ["q"], size=int(rng.integers(1, 5))))
    weights = _weights(rng)
    max_span = int(rng.integers(2, 6))
    everything = enumerate_derivations(sentence, rules, lm, weights, max_span=max_span)
    reference = list(everything[int(rng.integers(len(everything)))].words)
    expected = [d for d in everything if list(d.words) == reference]
    decoder = HieroDecoder(grammar_of(rules), lm, weights, table_limit=0, max_span=max_span)
    result = decoder.force(sentence, reference)
    assert result is not None and result.best == " ".join(reference)
    assert result.score == pytest.approx(max(d.score for d in expected), abs=1e-6)
    forest = result.hypergraph.kbest(len(expected) + 5, decoder.weights)
    assert sorted(round(float(s), 6) for s in forest.scores) == sorted(round(d.score, 6) for d in expected)
    assert set(forest.texts) == {" ".join(reference)}
    for derivation in forest:
        assert float(derivation.dense() @ decoder.weights) == pytest.approx(derivation.score, abs=1e-9)
    yields = {" ".join(d.words) for d in everything}
    unreachable = next(r for r in (reference + ["z"], ["z"] * 7, ["w"] * 9) if " ".join(r) not in yields)
    assert decoder.force(sentence, unreachable) is None


def test_forced_decoding_of_the_one_best_and_of_an_unknown_word(lm):
    """The decoder's own 1-best is reachable by forced decoding with a score at least its own (no
    pruning there); a copied unknown word is matched by its copy; an empty line forces to ""."""
    rng = np.random.default_rng(7)
    rules = random_rules(rng, 20)
    decoder = HieroDecoder(grammar_of(rules), lm, pop_limit=3)
    for _ in range(10):
        sentence = list(rng.choice(SRC + ["q"], size=int(rng.integers(2, 9))))
        decoded = decoder.decode(sentence)
        forced = decoder.force(sentence, decoded.best)
        assert forced is not None and forced.best == decoded.best
        assert forced.score >= decoded.score - 1e-9
    forced = decoder.force(["zz"], ["zz"])
    assert forced.best == "zz" and forced.feature_dict()["UnknownWordPenalty0_0"] == -100.0
    assert decoder.force(["zz"], ["yy"]) is None
    empty = decoder.force([], [])
    assert empty.best == "" and empty.score == pytest.approx(decoder.decode([]).score)


def test_node_labels_and_spans(lm):
    """Every forest node has its label and span over <s> w_1 .. w_n </s>: X nodes inside the words,
    S nodes from <s>, the goal over everything; a tail's span lies inside its head's."""
    rng = np.random.default_rng(11)
    decoder = HieroDecoder(grammar_of(random_rules(rng, 20)), lm, pop_limit=5)
    sentence = list(rng.choice(SRC + ["q"], size=7))
    for result in (decoder.decode(sentence), decoder.force(sentence, decoder.decode(sentence).best)):
        graph, spans, labels = result.hypergraph, result.node_spans, result.node_labels
        assert spans.shape == (graph.n_nodes, 2) and len(labels) == graph.n_nodes
        assert labels[graph.goal] == "S" and spans[graph.goal].tolist() == [0, 9]
        for v in range(graph.n_nodes):
            start, end = spans[v]
            assert (start >= 1 and end <= 8) if labels[v] == "X" else start == 0
            assert start < end
        for e in range(graph.n_edges):
            head = spans[graph.edge_head[e]]
            for tail in graph.edge_tails(e):
                assert head[0] <= spans[tail][0] and spans[tail][1] <= head[1]


def _random_chart(data):
    """A chart as the search makes one: cells filled in order, each with a span; a cell's edges made
    after every edge of earlier cells, their tails items of earlier cells; an item made by its first edge."""
    from hypothesis import strategies as st
    n_cells = data.draw(st.integers(1, 7))
    item_start, item_end, item_cell, edge_head, edge_tails = [], [], [], [], []
    for cell in range(n_cells):
        start = data.draw(st.integers(0, 4))
        end = start + data.draw(st.integers(0 if cell == 0 else 1, 4))
        earlier = len(item_start)
        n_new = 0
        for _ in range(data.draw(st.integers(1, 5))):
            head = data.draw(st.integers(earlier, earlier + n_new))
            if head == earlier + n_new:          # a new item of the cell
                item_start.append(start)
                item_end.append(end)
                item_cell.append(cell)
                n_new += 1
            tails = [data.draw(st.integers(-1, earlier - 1)) if earlier else -1 for _ in range(2)]
            edge_head.append(head)
            edge_tails.append(tails)
    goal = data.draw(st.sampled_from([i for i, c in enumerate(item_cell) if c == n_cells - 1]))
    return (goal, len(item_start), np.array(edge_head, dtype=np.int64),
            np.array(edge_tails, dtype=np.int64).reshape(-1, 2), np.array(item_start, dtype=np.int64),
            np.array(item_end, dtype=np.int64))


def test_forest_order_equals_sorting_the_reachable_items():
    """forest_order (one sweep, counting sorts) against the obvious: the items reachable from the goal by
    a search over the edges, sorted by span width, start and id; their edges sorted by head, stably."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from minismt.decode._hiero_search import forest_order

    @settings(max_examples=300, deadline=None)
    @given(st.data())
    def check(data):
        goal, n_items, edge_head, edge_tails, start, end = _random_chart(data)
        reach, todo = {goal}, [goal]
        while todo:
            item = todo.pop()
            for e in np.flatnonzero(edge_head == item).tolist():
                for tail in edge_tails[e].tolist():
                    if tail >= 0 and tail not in reach:
                        reach.add(tail)
                        todo.append(tail)
        expected_nodes = sorted(reach, key=lambda i: (end[i] - start[i], start[i], i))
        node_of = {item: k for k, item in enumerate(expected_nodes)}
        expected_edges = sorted((e for e in range(edge_head.shape[0]) if edge_head[e] in reach),
                                key=lambda e: (node_of[int(edge_head[e])], e))
        nodes, new_id, edges, in_offsets = forest_order(goal, n_items, edge_head, edge_tails, start, end)
        assert nodes.tolist() == expected_nodes
        assert new_id.tolist() == [node_of.get(i, -1) for i in range(n_items)]
        assert edges.tolist() == expected_edges
        assert np.diff(in_offsets).tolist() == [sum(1 for e in expected_edges if edge_head[e] == item)
                                                for item in expected_nodes]

    check()


def _chart_reference(n, max_span, sources, spans, side_start, side_end, source_rules, rule_tgt, rule_lm_tgt, rule_tgt_off,
                     rule_static, uncovered, special_tgt, special_lm_tgt, special_off, special_static):
    """The chart of :func:`minismt.decode._hiero_chart.applications` built the obvious way: lists of
    applications in the order matches, unknown words, <s>, glue, </s>, sorted (stably) by the
    position of their cell among the cells in filling order."""
    width, s_base = n + 1, (n + 1) ** 2
    sides = sorted(set(sources.tolist()))
    block_rows = [list(range(side_start[s], side_end[s])) for s in sides]
    rows = [p for block in block_rows for p in block]
    local_global = [int(source_rules[p]) for p in rows]
    block_start = np.cumsum([0] + [len(block) for block in block_rows]).tolist()
    specials = range(len(special_static))
    targets = [rule_tgt[rule_tgt_off[p]:rule_tgt_off[p + 1]].tolist() for p in rows]
    targets += [special_tgt[special_off[s]:special_off[s + 1]].tolist() for s in specials]
    lm_targets = [rule_lm_tgt[rule_tgt_off[p]:rule_tgt_off[p + 1]].tolist() for p in rows]
    lm_targets += [special_lm_tgt[special_off[s]:special_off[s + 1]].tolist() for s in specials]
    n_grammar, n_oov = len(local_global), len(uncovered)
    apps = []                       # (cell, child 0, child 1, lo, hi)
    for m in range(len(sources)):
        b = sides.index(int(sources[m]))
        child = [int(spans[m, 2 + 2 * k] * width + spans[m, 3 + 2 * k]) if spans[m, 2 + 2 * k] >= 0 else -1
                 for k in range(2)]
        apps.append((int(spans[m, 0] * width + spans[m, 1]), *child, block_start[b], block_start[b + 1]))
    for j, p in enumerate(uncovered.tolist()):
        apps.append((p * width + p + 1, -1, -1, n_grammar + j, n_grammar + j + 1))
    apps.append((s_base + 1, -1, -1, n_grammar + n_oov, n_grammar + n_oov + 1))
    for end in range(1, n + 1):
        for start in range(max(end - max_span, 0), end):
            apps.append((s_base + end + 1, s_base + start + 1, start * width + end, n_grammar + n_oov + 1,
                         n_grammar + n_oov + 2))
    apps.append((s_base + n + 2, s_base + n + 1, -1, n_grammar + n_oov + 2, n_grammar + n_oov + 3))
    cells = [i * width + i + length for length in range(1, min(n, max_span) + 1) for i in range(n - length + 1)]
    cells += [s_base + k for k in range(1, n + 3)]
    apps.sort(key=lambda app: cells.index(app[0]))
    static = [float(rule_static[p]) for p in rows] + special_static.tolist()
    return (s_base + n + 3, cells, apps, lm_targets, targets, static, local_global)


def test_chart_applications_equal_the_obvious_construction():
    """_hiero_chart.applications (one kernel: blocks, target sides, counting sort by cell) against
    _chart_reference on random matches of random sentences."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from minismt.decode._hiero_chart import applications

    @settings(max_examples=200, deadline=None)
    @given(st.data())
    def check(data):
        n = data.draw(st.integers(0, 9))
        max_span = data.draw(st.integers(1, 6))
        n_sides = data.draw(st.integers(1, 6))
        side_sizes = data.draw(st.lists(st.integers(0, 3), min_size=n_sides, max_size=n_sides))
        # each side's rows are one run, the runs in any order (a decoder ranks sides as sentences need them)
        stored = data.draw(st.permutations(range(n_sides)))
        side_start, side_end = np.zeros(n_sides, dtype=np.int64), np.zeros(n_sides, dtype=np.int64)
        row = 0
        for side in stored:
            side_start[side], side_end[side] = row, row + side_sizes[side]
            row += side_sizes[side]
        n_rows = row
        source_rules = np.array(data.draw(st.permutations(range(2 * n_rows + 3)))[:n_rows], dtype=np.int64)
        tgt_len = data.draw(st.lists(st.integers(0, 4), min_size=n_rows, max_size=n_rows))
        rule_tgt_off = np.cumsum([0] + tgt_len).astype(np.int64)
        rule_tgt = np.array(data.draw(st.lists(st.integers(-2, 7), min_size=int(rule_tgt_off[-1]),
                                               max_size=int(rule_tgt_off[-1]))), dtype=np.int32)
        rule_lm_tgt = np.where(rule_tgt >= 0, rule_tgt * 3 + 1, rule_tgt).astype(np.int32)
        rule_static = np.array(data.draw(st.lists(st.floats(-5, 5), min_size=n_rows, max_size=n_rows)))
        matches = []
        for start in range(n):
            for end in range(start + 1, min(start + max_span, n) + 1):
                for _ in range(data.draw(st.integers(0, 2))):
                    gaps = [-1] * 4
                    if end - start >= 2 and data.draw(st.booleans()):
                        cut = data.draw(st.integers(start + 1, end - 1))
                        gaps[:2] = [start, cut]
                    matches.append(([start, end] + gaps, data.draw(st.integers(0, n_sides - 1))))
        spans = np.array([m for m, _ in matches], dtype=np.int64).reshape(-1, 6)
        sources = np.array([s for _, s in matches], dtype=np.int64)
        uncovered = np.array(sorted(data.draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=n))) if n else [],
                             dtype=np.int64)
        special_len = [1] * uncovered.shape[0] + [1, 2, 2]
        special_off = np.cumsum([0] + special_len).astype(np.int64)
        special_tgt = np.arange(int(special_off[-1]), dtype=np.int64) + 100
        special_lm_tgt = special_tgt + 1000
        special_static = np.arange(len(special_len), dtype=np.float64) - 0.5
        args = (n, max_span, sources, spans, side_start, side_end, source_rules, rule_tgt, rule_lm_tgt, rule_tgt_off,
                rule_static, uncovered, special_tgt, special_lm_tgt, special_off, special_static)
        n_cells, cells, apps, lm_targets, targets, static, local_global = _chart_reference(*args)
        (got_cells, cell_order, app_cell, app_child, app_lo, app_hi, lm_tgt, match_tgt, tgt_offsets, got_static,
         got_local) = applications(*args)
        assert got_cells == n_cells
        assert cell_order.tolist() == cells
        assert list(zip(app_cell.tolist(), app_child[:, 0].tolist(), app_child[:, 1].tolist(), app_lo.tolist(),
                        app_hi.tolist())) == apps
        assert [lm_tgt[a:b].tolist() for a, b in zip(tgt_offsets[:-1], tgt_offsets[1:])] == lm_targets
        assert [match_tgt[a:b].tolist() for a, b in zip(tgt_offsets[:-1], tgt_offsets[1:])] == targets
        assert got_static.tolist() == static
        assert got_local.tolist() == local_global

    check()
