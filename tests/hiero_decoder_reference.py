"""Reference Hiero chart decoding for the tests: every derivation of a sentence, by brute force.

This module says in plain Python *what* a Hiero chart decoder (Chiang 2007, "Hierarchical
phrase-based translation") searches over, with the conventions of Moses' chart decoder run with a
glue grammar, so that a fast decoder can be compared with it on small inputs.  It is written for
checking, not for speed: it lists every derivation, computes its features one rule application at
a time and scores it with the weights.  Nothing is pruned and nothing is recombined.

The grammar of a sentence
-------------------------
The input ``w_1 .. w_n`` is wrapped as ``<s> w_1 .. w_n </s>``: position 0 is ``<s>``, positions
``1..n`` the words, position ``n+1`` is ``</s>``.  Spans ``[i, j)`` are half-open.  There are two
labels, ``X`` and ``S``; an *item* is a label over a span and has a list of derivations.

1. Rule-table rules (label ``X``) apply to a span ``[i, j)`` of real words (``1 <= i < j <= n+1``)
   with ``j - i <= max_span`` when their source items match it: every word equals the input word
   at its place, every non-terminal covers a non-empty sub-span that is an ``X`` item; the
   non-terminals cover disjoint sub-spans in source order.
2. An unknown-word rule ``X -> w_p / w_p`` on ``[p, p+1)`` for every position whose word is not the
   source side of a one-word rule (no rule has ``source == (w_p,)``).
3. The glue grammar (label ``S``): ``S -> <s>`` on ``[0, 1)``; ``S -> S_1 X_2 / S_1 X_2`` on
   ``[0, j)`` from ``S`` on ``[0, k)`` and ``X`` on ``[k, j)`` (``max_span`` does not apply);
   ``S -> S_1 </s>`` on ``[0, n+2)`` from ``S`` on ``[0, n+1)``, which is the goal.

Features (summed over the rule applications of a derivation)
-------------------------------------------------------------
* ``UnknownWordPenalty0_0``: -100 per unknown-word rule;
* ``WordPenalty0_0``: minus the target words each rule writes (``<s>`` and ``</s>`` included), so
  ``-(len(words) + 2)`` for the whole derivation;
* ``PhrasePenalty0_0``: +1 per rule application of any kind (table, unknown-word and glue rules);
* ``TranslationModel0_0..3``: per rule-table rule, ``max(ln p, -100)`` of its four scores (a score
  of 0 gives -100, as Moses floors ``log(0)``); unknown-word and glue rules add nothing;
* ``TranslationModel1_0``: ``ln(2.718)`` per ``S -> S X`` glue rule (Moses' glue score 2.718);
* ``LM0_0``: ``ln(10) * lm.score(" ".join(words), bos=True, eos=True)``, computed once on the
  whole yield (``lm`` answers as ``kenlm.Model.score``: total log10 probability, ``<s>`` as
  context only, ``p(</s> | ...)`` included).

A derivation's features are added up bottom-up: the children's features in source order, then the
rule's own features; ``LM0_0`` is set at the goal.  The score is ``sum(weights.get(name, 0) *
features[name])`` over the nine names in ``FEATURE_NAMES`` order (other weight names are ignored).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

__all__ = ["FEATURE_NAMES", "GLUE_SCORE", "Derivation", "Node", "Rule", "best", "enumerate_derivations"]

#: The dense feature names every derivation has, in the order the score sums them.
FEATURE_NAMES = (
    "UnknownWordPenalty0_0",
    "WordPenalty0_0",
    "PhrasePenalty0_0",
    "TranslationModel0_0",
    "TranslationModel0_1",
    "TranslationModel0_2",
    "TranslationModel0_3",
    "TranslationModel1_0",
    "LM0_0",
)

#: The score Moses' glue grammar gives the rule ``S -> S X`` (its feature is ``ln`` of it).
GLUE_SCORE = 2.718

#: What an unknown-word rule adds to UnknownWordPenalty0_0.
UNKNOWN_WORD_PENALTY = -100.0

#: The floor of a translation-model log score (Moses' ``FloorScore``).
LOG_FLOOR = -100.0


@dataclass(frozen=True)
class Rule:
    """A rule-table rule ``X -> source / target`` with its four translation-model probabilities.

    ``source`` items are words (str) or ints ``k >= 1`` meaning the non-terminal ``X_k`` (numbered
    1, 2, ... in source order); ``target`` items are words or ints ``k`` meaning the non-terminal
    co-indexed with source non-terminal ``k``.  ``scores`` are p(f|e), lex(f|e), p(e|f), lex(e|f)."""

    source: tuple
    target: tuple
    scores: tuple


@dataclass(frozen=True)
class Node:
    """One rule application of a derivation: ``label`` over ``[start, end)`` built by a rule of
    ``kind`` ``"rule"`` (``index`` into the rule list), ``"unknown"``, ``"glue_bos"`` (S -> <s>),
    ``"glue"`` (S -> S X) or ``"glue_eos"`` (S -> S </s>); ``index`` is -1 for the last four.
    ``children`` are the nodes under the rule's non-terminals, in source order."""

    label: str
    start: int
    end: int
    kind: str
    index: int
    children: tuple

    def __str__(self) -> str:
        name = f"r{self.index}" if self.kind == "rule" else self.kind
        inner = "".join(" " + str(child) for child in self.children)
        return f"({self.label}[{self.start},{self.end}) {name}{inner})"


@dataclass(frozen=True)
class Derivation:
    """A complete derivation: its target words (without ``<s>``/``</s>``), its nine features, its
    model score and its tree (a ``Node``; ``str(tree)`` prints it in brackets)."""

    words: tuple[str, ...]
    features: dict[str, float]
    score: float
    tree: object


# ------------------------------------------------------------------------------------- checks

def _check_rule(rule: Rule, index: int) -> int:
    """Reject a malformed rule (raising ValueError); return its number of non-terminals."""
    if len(rule.source) == 0:
        raise ValueError(f"rule {index}: empty source side")
    nonterminals = [item for item in rule.source if not isinstance(item, str)]
    for item in list(rule.source) + list(rule.target):
        if isinstance(item, str):
            if item == "":
                raise ValueError(f"rule {index}: an empty word")
        elif isinstance(item, bool) or not isinstance(item, int):
            raise ValueError(f"rule {index}: item {item!r} is neither a word nor a non-terminal index")
    if nonterminals != list(range(1, len(nonterminals) + 1)):
        raise ValueError(f"rule {index}: source non-terminals must be numbered 1, 2, ... in order, "
                         f"got {nonterminals}")
    target_nonterminals = sorted(item for item in rule.target if not isinstance(item, str))
    if target_nonterminals != nonterminals:
        raise ValueError(f"rule {index}: the target must use each source non-terminal exactly once")
    if len(rule.source) == 1 and nonterminals:
        # X -> X_1 would let an item derive itself: infinitely many derivations
        raise ValueError(f"rule {index}: a rule made of one non-terminal alone")
    if len(rule.scores) != 4:
        raise ValueError(f"rule {index}: needs 4 scores, got {len(rule.scores)}")
    for score in rule.scores:
        if not score >= 0:  # also rejects NaN
            raise ValueError(f"rule {index}: score {score!r} is not a probability")
    return len(nonterminals)


def _log_score(probability: float) -> float:
    """``max(ln p, -100)``, with ``ln 0`` taken as minus infinity."""
    if probability == 0:
        return LOG_FLOOR
    return max(math.log(probability), LOG_FLOOR)


# ------------------------------------------------------------------------------------- features

def _zero_features() -> dict:
    return {name: 0.0 for name in FEATURE_NAMES}


def _sum_features(children_features: list, own: dict) -> dict:
    """The children's features in order, then the rule's own features."""
    total = _zero_features()
    for features in children_features:
        for name in FEATURE_NAMES:
            total[name] += features[name]
    for name, value in own.items():
        total[name] += value
    return total


def _table_rule_features(rule: Rule) -> dict:
    target_words = sum(1 for item in rule.target if isinstance(item, str))
    return {
        "WordPenalty0_0": -float(target_words),
        "PhrasePenalty0_0": 1.0,
        "TranslationModel0_0": _log_score(rule.scores[0]),
        "TranslationModel0_1": _log_score(rule.scores[1]),
        "TranslationModel0_2": _log_score(rule.scores[2]),
        "TranslationModel0_3": _log_score(rule.scores[3]),
    }


UNKNOWN_RULE_FEATURES = {"UnknownWordPenalty0_0": UNKNOWN_WORD_PENALTY, "WordPenalty0_0": -1.0,
                         "PhrasePenalty0_0": 1.0}
GLUE_BOS_FEATURES = {"WordPenalty0_0": -1.0, "PhrasePenalty0_0": 1.0}
GLUE_FEATURES = {"PhrasePenalty0_0": 1.0, "TranslationModel1_0": math.log(GLUE_SCORE)}
GLUE_EOS_FEATURES = {"WordPenalty0_0": -1.0, "PhrasePenalty0_0": 1.0}


def model_score(features: dict, weights: dict) -> float:
    """``sum(weights[name] * features[name])`` over FEATURE_NAMES in order; a missing weight is 0."""
    total = 0.0
    for name in FEATURE_NAMES:
        total += weights.get(name, 0.0) * features[name]
    return total


# ------------------------------------------------------------------------------------- the chart

class _Chart:
    """The items of one sentence, each computed once (memoised on ``(label, start, end)``).

    A partial derivation is a tuple ``(yield, features, node)``: the target words it covers (the
    glue items include ``<s>``/``</s>``), its features so far (a dict over FEATURE_NAMES, no LM)
    and its tree."""

    def __init__(self, sentence: list, rules: list, max_span: int, limit: int):
        self.padded = ["<s>"] + list(sentence) + ["</s>"]
        self.n = len(sentence)
        self.rules = rules
        self.max_span = max_span
        self.limit = limit
        one_word_sources = {rule.source[0] for rule in rules if len(rule.source) == 1
                            and isinstance(rule.source[0], str)}
        self.unknown = [1 <= p <= self.n and self.padded[p] not in one_word_sources
                        for p in range(self.n + 2)]
        self.memo = {}

    def _append(self, out: list, partial: tuple) -> None:
        # Every position has an X item (a one-word rule or the unknown-word rule), so every
        # derivation of every item is part of at least one complete derivation, and distinct item
        # derivations give distinct complete ones: an item with more than `limit` derivations
        # means the sentence has more than `limit` too.
        out.append(partial)
        if len(out) > self.limit:
            raise ValueError(f"more than {self.limit} derivations")

    def item(self, label: str, start: int, end: int) -> list:
        key = (label, start, end)
        if key not in self.memo:
            self.memo[key] = self._x_item(start, end) if label == "X" else self._s_item(start, end)
        return self.memo[key]

    # --- X items: rule-table rules and unknown-word rules over real words

    def _source_matches(self, source: tuple, start: int, end: int) -> list:
        """Every way to lay ``source`` over ``[start, end)``: a list of tuples of the sub-spans the
        non-terminals cover, in source order (each non-empty and an X item with derivations)."""
        if len(source) == 0:
            return [()] if start == end else []
        first, rest = source[0], source[1:]
        if isinstance(first, str):
            if start < end and self.padded[start] == first:
                return self._source_matches(rest, start + 1, end)
            return []
        # the non-terminal covers at least one word and leaves at least one to each item after it
        # (so it never covers the rule's whole span, and an item never needs itself)
        matches = []
        for middle in range(start + 1, end - len(rest) + 1):
            if not self.item("X", start, middle):
                continue
            for tail in self._source_matches(rest, middle, end):
                matches.append(((start, middle),) + tail)
        return matches

    def _x_item(self, start: int, end: int) -> list:
        assert 1 <= start < end <= self.n + 1
        out = []
        if end - start <= self.max_span:
            for index, rule in enumerate(self.rules):
                own = _table_rule_features(rule)
                for spans in self._source_matches(rule.source, start, end):
                    child_lists = [self.item("X", a, b) for a, b in spans]
                    for children in itertools.product(*child_lists):
                        words = []
                        for target_item in rule.target:
                            if isinstance(target_item, str):
                                words.append(target_item)
                            else:
                                words.extend(children[target_item - 1][0])
                        features = _sum_features([child[1] for child in children], own)
                        node = Node("X", start, end, "rule", index, tuple(child[2] for child in children))
                        self._append(out, (tuple(words), features, node))
        if end == start + 1 and self.unknown[start]:
            word = self.padded[start]
            node = Node("X", start, end, "unknown", -1, ())
            self._append(out, ((word,), _sum_features([], UNKNOWN_RULE_FEATURES), node))
        return out

    # --- S items: the glue grammar, always starting at 0

    def _s_item(self, start: int, end: int) -> list:
        assert start == 0 and 1 <= end <= self.n + 2
        out = []
        if end == 1:
            node = Node("S", 0, 1, "glue_bos", -1, ())
            self._append(out, (("<s>",), _sum_features([], GLUE_BOS_FEATURES), node))
        elif end == self.n + 2:
            for s_words, s_features, s_node in self.item("S", 0, self.n + 1):
                node = Node("S", 0, end, "glue_eos", -1, (s_node,))
                self._append(out, (s_words + ("</s>",), _sum_features([s_features], GLUE_EOS_FEATURES), node))
        else:
            for split in range(1, end):
                for s_words, s_features, s_node in self.item("S", 0, split):
                    for x_words, x_features, x_node in self.item("X", split, end):
                        node = Node("S", 0, end, "glue", -1, (s_node, x_node))
                        features = _sum_features([s_features, x_features], GLUE_FEATURES)
                        self._append(out, (s_words + x_words, features, node))
        return out


# ------------------------------------------------------------------------------------- public API

def enumerate_derivations(sentence: list, rules: list, lm, weights: dict, max_span: int = 10,
                          limit: int = 200_000) -> list:
    """Every derivation of ``sentence`` (a list of words) under ``rules`` plus the unknown-word and
    glue rules, with its features and score (see the module docstring).  Derivations, not strings:
    two derivations with the same words are both listed.  Raises ValueError for a malformed rule,
    ``max_span < 1``, or more than ``limit`` derivations."""
    if max_span < 1:
        raise ValueError(f"max_span must be >= 1, got {max_span}")
    for index, rule in enumerate(rules):
        _check_rule(rule, index)
    chart = _Chart(sentence, list(rules), max_span, limit)
    n = len(sentence)
    derivations = []
    for full_words, features, node in chart.item("S", 0, n + 2):
        assert full_words[0] == "<s>" and full_words[-1] == "</s>"
        words = full_words[1:-1]
        features = dict(features)
        features["LM0_0"] = math.log(10) * lm.score(" ".join(words), bos=True, eos=True)
        derivations.append(Derivation(words=tuple(words), features=features,
                                      score=model_score(features, weights), tree=node))
    return derivations


def best(sentence: list, rules: list, lm, weights: dict, max_span: int = 10) -> Derivation:
    """The derivation with the highest score (the first one listed among equal scores)."""
    return max(enumerate_derivations(sentence, rules, lm, weights, max_span=max_span),
               key=lambda derivation: derivation.score)
