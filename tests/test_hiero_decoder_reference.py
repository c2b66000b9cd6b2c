"""The brute-force Hiero decoding reference (tests/hiero_decoder_reference.py) against derivations
and features worked out by hand: the glue grammar, unknown words, max_span, derivation counts and
the language-model feature.  The fast chart decoder is later compared with this reference."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from hiero_decoder_reference import FEATURE_NAMES, Derivation, Node, Rule, best, enumerate_derivations
from minismt.lm import LanguageModel, estimate_kn

LN_GLUE = math.log(2.718)

# A tiny target-side corpus for a 3-gram LM over the target words the rules below produce.
LM_LINES = ["x y", "y x", "x y z", "z y x", "y w x", "x x y", "w z", "y y"]


@pytest.fixture(scope="module")
def lm():
    """A 3-gram Kneser-Ney LM on LM_LINES (lmplz's fallback discounts: the corpus is tiny)."""
    return LanguageModel.from_model(estimate_kn(LM_LINES, order=3, discount_fallback=True))


class ZeroLM:
    """An LM that gives every sentence log10 probability 0, for tests about the rest of the model."""

    def score(self, sentence: str, bos: bool = True, eos: bool = True) -> float:
        return 0.0


def nodes(tree: Node):
    """Every node of a derivation tree, top-down."""
    yield tree
    for child in tree.children:
        yield from nodes(child)


def kinds(derivation: Derivation) -> Counter:
    """How many rule applications of each kind a derivation has."""
    return Counter(node.kind for node in nodes(derivation.tree))


def expected_features(*, unknown=0, words, rules_applied, tm=(0.0, 0.0, 0.0, 0.0), glue=0, lm=0.0) -> dict:
    """The nine features from counts and sums worked out by hand."""
    return {
        "UnknownWordPenalty0_0": -100.0 * unknown,
        "WordPenalty0_0": -float(words + 2),
        "PhrasePenalty0_0": float(rules_applied),
        "TranslationModel0_0": tm[0],
        "TranslationModel0_1": tm[1],
        "TranslationModel0_2": tm[2],
        "TranslationModel0_3": tm[3],
        "TranslationModel1_0": glue * LN_GLUE,
        "LM0_0": lm,
    }


def assert_features(actual: dict, expected: dict) -> None:
    assert set(actual) == set(FEATURE_NAMES)
    for name in FEATURE_NAMES:
        assert actual[name] == pytest.approx(expected[name], rel=1e-12, abs=1e-12), name


# ------------------------------------------------------------------------------------------
# 1. "a b" with four rules, worked out by hand
# ------------------------------------------------------------------------------------------

R_A = Rule(("a",), ("x",), (0.5, 0.5, 0.5, 0.5))
R_B = Rule(("b",), ("y",), (0.25, 0.25, 0.25, 0.25))
R_AX = Rule(("a", 1), (1, "x"), (0.1, 0.2, 0.3, 0.4))
R_AB = Rule(("a", "b"), ("y", "x"), (0.6, 0.7, 0.8, 0.9))
RULES_AB = [R_A, R_B, R_AX, R_AB]


def test_hand_worked_example():
    """Items of "<s> a b </s>": X[1,2) = {a/x}, X[2,3) = {b/y}, X[1,3) = {a X1/X1 x over X[2,3),
    a b/y x}; S[0,2) = {S X[1,2)}; S[0,3) = {S[0,1) X[1,3) (two), S[0,2) X[2,3)}; the goal adds
    </s>.  So three derivations: "x y" (6 rule applications: <s>, a/x, glue, b/y, glue, </s>),
    "y x" through a X1 (5: <s>, b/y, a X1, glue, </s>) and "y x" through a b (4: <s>, a b, glue, </s>)."""
    weights = {"TranslationModel0_0": 0.2, "PhrasePenalty0_0": -1.0, "WordPenalty0_0": 1.0,
               "TranslationModel1_0": 1.5}
    derivations = enumerate_derivations(["a", "b"], RULES_AB, ZeroLM(), weights)
    assert sorted(d.words for d in derivations) == [("x", "y"), ("y", "x"), ("y", "x")]
    assert len({d.tree for d in derivations}) == 3

    monotone = next(d for d in derivations if d.words == ("x", "y"))
    assert kinds(monotone) == {"glue_bos": 1, "glue": 2, "glue_eos": 1, "rule": 2}
    assert_features(monotone.features, expected_features(
        words=2, rules_applied=6, glue=2,
        tm=(math.log(0.5) + math.log(0.25),) * 4))
    # the score by hand: 0.2 * TM0_0 - 1.0 * 6 + 1.0 * (-4) + 1.5 * 2 ln 2.718
    assert monotone.score == pytest.approx(
        0.2 * (math.log(0.5) + math.log(0.25)) - 6.0 - 4.0 + 3.0 * LN_GLUE, rel=1e-12)

    hierarchical = next(d for d in derivations if d.words == ("y", "x") and d.tree.children[0].children[1].index == 2)
    assert_features(hierarchical.features, expected_features(
        words=2, rules_applied=5, glue=1,
        tm=(math.log(0.25) + math.log(0.1), math.log(0.25) + math.log(0.2),
            math.log(0.25) + math.log(0.3), math.log(0.25) + math.log(0.4))))
    # the tree: S[0,4) -> S[0,3) -> (S[0,1) <s>, X[1,3) a X1 -> (X[2,3) b))
    assert str(hierarchical.tree) == "(S[0,4) glue_eos (S[0,3) glue (S[0,1) glue_bos) (X[1,3) r2 (X[2,3) r1))))"

    phrasal = next(d for d in derivations if d.words == ("y", "x") and d is not hierarchical)
    assert_features(phrasal.features, expected_features(
        words=2, rules_applied=4, glue=1,
        tm=(math.log(0.6), math.log(0.7), math.log(0.8), math.log(0.9))))
    assert phrasal.score == pytest.approx(0.2 * math.log(0.6) - 4.0 - 4.0 + 1.5 * LN_GLUE, rel=1e-12)

    # with PhrasePenalty weighted -1 the one with the fewest rule applications wins: the phrasal one
    # (scores about -7.42 monotone, -8.24 hierarchical, -6.60 phrasal)
    assert best(["a", "b"], RULES_AB, ZeroLM(), weights).tree == phrasal.tree


def test_two_nonterminals_reorder():
    """X -> X1 c X2 / X2 w X1 swaps its non-terminals; children are listed in source order."""
    rules = [R_A, R_B, Rule(("c",), ("z",), (1.0, 1.0, 1.0, 1.0)),
             Rule((1, "c", 2), (2, "w", 1), (0.5, 0.5, 0.5, 0.5))]
    derivations = enumerate_derivations(["a", "c", "b"], rules, ZeroLM(), {})
    # monotone glue of the three words, and the swap rule over the whole sentence
    assert sorted(d.words for d in derivations) == [("x", "z", "y"), ("y", "w", "x")]
    swapped = next(d for d in derivations if d.words == ("y", "w", "x"))
    rule_node = swapped.tree.children[0].children[1]
    assert (rule_node.kind, rule_node.index, rule_node.start, rule_node.end) == ("rule", 3, 1, 4)
    assert [(c.start, c.end, c.index) for c in rule_node.children] == [(1, 2, 0), (3, 4, 1)]
    assert_features(swapped.features, expected_features(
        words=3, rules_applied=6, glue=1,
        tm=(math.log(0.5) + math.log(0.25) + math.log(0.5),) * 4))


def test_scores_floored_at_minus_100():
    """A tiny probability contributes max(ln p, -100) to the translation-model features."""
    rules = [Rule(("a",), ("x",), (1e-50, 1.0, 0.5, 0.0))]
    [derivation] = enumerate_derivations(["a"], rules, ZeroLM(), {})
    assert [derivation.features[f"TranslationModel0_{i}"] for i in range(4)] == [-100.0, 0.0, math.log(0.5), -100.0]


# ------------------------------------------------------------------------------------------
# 2. unknown words, 3. the empty sentence
# ------------------------------------------------------------------------------------------

def test_unknown_word_is_copied():
    """ "zzz" has no rule: the unknown-word rule copies it, with UnknownWordPenalty -100 and no TM score."""
    [derivation] = enumerate_derivations(["a", "zzz"], [R_A], ZeroLM(), {"UnknownWordPenalty0_0": 1.0})
    assert derivation.words == ("x", "zzz")
    assert kinds(derivation) == {"glue_bos": 1, "glue": 2, "glue_eos": 1, "rule": 1, "unknown": 1}
    assert_features(derivation.features, expected_features(
        unknown=1, words=2, rules_applied=6, glue=2, tm=(math.log(0.5),) * 4))
    assert derivation.score == -100.0


def test_word_only_inside_longer_rules_is_unknown():
    """A word with no one-word rule gets the copy rule even when a longer rule covers it."""
    derivations = enumerate_derivations(["a", "b"], [R_AB], ZeroLM(), {})
    assert sorted((d.words, d.features["UnknownWordPenalty0_0"]) for d in derivations) == [
        (("a", "b"), -200.0), (("y", "x"), 0.0)]


def test_empty_sentence(lm):
    """No words: the one derivation S -> <s>, then S -> S </s>; its yield is empty."""
    [derivation] = enumerate_derivations([], RULES_AB, lm, {"LM0_0": 1.0})
    assert derivation.words == ()
    assert str(derivation.tree) == "(S[0,2) glue_eos (S[0,1) glue_bos))"
    assert_features(derivation.features, expected_features(
        words=0, rules_applied=2, lm=math.log(10) * lm.score("", bos=True, eos=True)))
    assert derivation.score == derivation.features["LM0_0"]


# ------------------------------------------------------------------------------------------
# 4. max_span
# ------------------------------------------------------------------------------------------

def test_max_span():
    """A rule whose span would exceed max_span never applies; the glue rules are not limited."""
    rules = [Rule(("a",), ("x",), (0.5,) * 4), Rule(("b",), ("y",), (0.5,) * 4), Rule(("c",), ("z",), (0.5,) * 4),
             Rule(("a", "b", "c"), ("xyz",), (0.5,) * 4),  # 3 words
             Rule(("a", 1), (1, "x"), (0.5,) * 4),  # a over X[2,3) (2 words) or X[2,4) (3 words)
             Rule(("b", "c"), ("v",), (0.5,) * 4)]  # makes X[2,4) an item
    sentence = ["a", "b", "c"]

    def table_rule_spans(derivations):
        return Counter((node.index, node.end - node.start) for d in derivations for node in nodes(d.tree)
                       if node.kind == "rule" and node.index in (3, 4))

    wide = enumerate_derivations(sentence, rules, ZeroLM(), {}, max_span=3)
    assert table_rule_spans(wide) == {(3, 3): 1, (4, 2): 1, (4, 3): 1}
    assert ("xyz",) in {d.words for d in wide}
    # x y z and x v (glue), xyz, y x z (a X1 over b, then glue), v x (a X1 over b c: 3 words)
    assert sorted(d.words for d in wide) == [("v", "x"), ("x", "v"), ("x", "y", "z"), ("xyz",), ("y", "x", "z")]

    narrow = enumerate_derivations(sentence, rules, ZeroLM(), {}, max_span=2)
    assert table_rule_spans(narrow) == {(4, 2): 1}
    assert sorted(d.words for d in narrow) == [("x", "v"), ("x", "y", "z"), ("y", "x", "z")]
    # the glue still spans the whole sentence, beyond max_span
    assert all(d.tree.end == 5 for d in narrow)

    only_words = enumerate_derivations(sentence, rules, ZeroLM(), {}, max_span=1)
    assert [d.words for d in only_words] == [("x", "y", "z")]


# ------------------------------------------------------------------------------------------
# 5. derivation counts of the left-branching glue
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_one_translation_per_word_one_derivation(n):
    """With one one-word rule per word and no hierarchical rule, the left-branching glue S -> S X
    allows exactly one derivation."""
    sentence = [f"f{i}" for i in range(n)]
    rules = [Rule((word,), (word.upper(),), (0.5,) * 4) for word in sentence]
    [derivation] = enumerate_derivations(sentence, rules, ZeroLM(), {})
    assert derivation.words == tuple(word.upper() for word in sentence)
    assert kinds(derivation) == {"glue_bos": 1, "glue": n, "glue_eos": 1, "rule": n}
    assert derivation.features["PhrasePenalty0_0"] == 2 * n + 2
    assert derivation.features["TranslationModel1_0"] == pytest.approx(n * LN_GLUE, rel=1e-12)


@pytest.mark.parametrize("n", [1, 3, 6])
def test_two_translations_per_word_two_to_the_n(n):
    """Two one-word rules per word: 2^n derivations, all with different yields."""
    sentence = [f"f{i}" for i in range(n)]
    rules = [Rule((word,), (word + suffix,), (0.5,) * 4) for word in sentence for suffix in ("_1", "_2")]
    derivations = enumerate_derivations(sentence, rules, ZeroLM(), {})
    assert len(derivations) == 2 ** n
    assert len({d.words for d in derivations}) == 2 ** n


def test_limit():
    """More derivations than ``limit`` raises ValueError; exactly ``limit`` is fine."""
    sentence = [f"f{i}" for i in range(6)]
    rules = [Rule((word,), (word + suffix,), (0.5,) * 4) for word in sentence for suffix in ("_1", "_2")]
    assert len(enumerate_derivations(sentence, rules, ZeroLM(), {}, limit=64)) == 64
    with pytest.raises(ValueError, match="more than 63"):
        enumerate_derivations(sentence, rules, ZeroLM(), {}, limit=63)


def test_same_words_different_derivations():
    """Derivations, not strings: a phrasal rule and two glued words with the same yield are both listed."""
    rules = [R_A, R_B, Rule(("a", "b"), ("x", "y"), (0.5,) * 4)]
    derivations = enumerate_derivations(["a", "b"], rules, ZeroLM(), {})
    assert [d.words for d in derivations] == [("x", "y"), ("x", "y")]
    assert derivations[0].tree != derivations[1].tree


# ------------------------------------------------------------------------------------------
# 6. the language-model feature
# ------------------------------------------------------------------------------------------

def test_lm_feature(lm):
    """LM0_0 is ln(10) times the LM's total log10 probability of the yield with <s> ... </s>."""
    rules = RULES_AB + [Rule(("b",), ("w",), (0.5,) * 4), Rule(("a",), ("x", "x"), (0.5,) * 4)]
    weights = {"LM0_0": 1.0, "WordPenalty0_0": -0.3}
    derivations = enumerate_derivations(["a", "b", "zzz"], rules, lm, weights)
    # X[1,3): glue a (x | x x) and b (y | w): 4 ways; a X1 over b (y | w): 2; a b: 1.  zzz is copied.
    assert len(derivations) == 7
    for d in derivations:
        assert d.features["LM0_0"] == math.log(10) * lm.score(" ".join(d.words), bos=True, eos=True)
        assert d.features["LM0_0"] < 0
        assert d.score == pytest.approx(d.features["LM0_0"] - 0.3 * d.features["WordPenalty0_0"], rel=1e-12)
    top = best(["a", "b", "zzz"], rules, lm, weights)
    assert top.score == max(d.score for d in derivations)


def test_malformed_rules_rejected():
    """Rules the decoder could not apply sensibly raise ValueError."""
    for bad in [Rule((1,), (1,), (0.5,) * 4),            # X -> X1: an item would derive itself
                Rule(("a", 2), (2,), (0.5,) * 4),        # non-terminals not numbered from 1
                Rule(("a", 1), ("x",), (0.5,) * 4),      # the target drops the non-terminal
                Rule(("a",), ("x",), (0.5,) * 3)]:       # three scores
        with pytest.raises(ValueError):
            enumerate_derivations(["a"], [bad], ZeroLM(), {})
