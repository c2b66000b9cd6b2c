"""Sparse rule features of the Hiero model (minismt.extract.hiero_features): each family against a
plain reading of its definition (cdec's RuleIdentity, RuleShape and RuleNgram features) on the
rules of random grammars, and the names through Moses n-best lists, cdec k-best lists and weights
files."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from minismt.corpus import Alignment, TokenArray, Vocabulary
from minismt.errors import InputError
from minismt.extract.hiero_features import FAMILIES, rule_features
from minismt.extract.hiero_grammar import build_grammars
from minismt.features import FeatureSpace, read_weights, write_weights
from minismt.kbest import KBestBuilder
from plugins.cdec.kbest_file import read_kbest, write_kbest_from
from plugins.moses.nbest import read_nbest, write_kbest_nbest

# words with every character the names must escape
SRC_WORDS = ["a", "b_c", "d,e", "f~g", "h=i", "j#k", "l|m", "n:o", "p%q", "ü"]
TGT_WORDS = ["v", "w_x", "y,z", "é~", "=", "#", "|", ":", "%", "r"]


def _grammar(seed: int):
    rng = np.random.default_rng(seed)
    sources, targets, alignments = [], [], []
    for _ in range(6):
        ls, lt = int(rng.integers(2, 9)), int(rng.integers(2, 9))
        sources.append([SRC_WORDS[k] for k in rng.integers(0, len(SRC_WORDS), ls)])
        targets.append([TGT_WORDS[k] for k in rng.integers(0, len(TGT_WORDS), lt)])
        alignments.append(sorted({(i, min(lt - 1, i * lt // ls)) for i in range(ls) if rng.random() < 0.8}))
    src_vocab, tgt_vocab = Vocabulary(), Vocabulary()
    src = TokenArray.from_sentences(sources, src_vocab)
    tgt = TokenArray.from_sentences(targets, tgt_vocab)
    grammars, _ = build_grammars(src, tgt, Alignment.from_lists(alignments), src_vocab, tgt_vocab, None)
    return grammars["all"]


def _sides(grammar, r):
    """A rule's sides as plain lists: words, and ("NT", index) for non-terminals."""
    t = grammar.table
    src = [("NT", -x) if x < 0 else grammar.src_vocab[int(x)] for x in t.src_syms[t.src_off[r]:t.src_off[r + 1]]]
    tgt = [("NT", -x) if x < 0 else grammar.tgt_vocab[int(x)] for x in t.tgt_syms[t.tgt_off[r]:t.tgt_off[r + 1]]]
    return src, tgt


def _escape(word: str) -> str:
    return "".join("".join(f"%{b:02X}" for b in c.encode("utf-8")) if c in "%_,~=#|:" else c
                   for c in word)


def _shape(side) -> str:
    """cdec's shape: the slots words, NT, words, NT, words; 1 where filled."""
    bits, slot, i = [], 0, 0
    while slot < 5:
        if slot % 2 == 0:
            if i < len(side) and not isinstance(side[i], tuple):
                bits.append("1")
                while i < len(side) and not isinstance(side[i], tuple):
                    i += 1
            else:
                bits.append("0")
        else:
            if i < len(side):
                assert isinstance(side[i], tuple)
                bits.append("1")
                i += 1
            else:
                bits.append("0")
        slot += 1
    assert i == len(side)
    return "".join(bits)


def _expected(grammar, r) -> dict[str, float]:
    src, tgt = _sides(grammar, r)

    def token(x):
        return f"[X{x[1]}]" if isinstance(x, tuple) else _escape(x)

    def bigram_token(x):
        return "[X]" if isinstance(x, tuple) else _escape(x)

    features = Counter()
    features["RuleId_" + ",".join(map(token, src)) + "~" + ",".join(map(token, tgt))] += 1
    features[f"RuleShape_S{_shape(src)}~T{_shape(tgt)}"] += 1
    for label, side in (("RuleSourceBigram", src), ("RuleTargetBigram", tgt)):
        framed = ["[<r>]"] + [bigram_token(x) for x in side] + ["[</r>]"]
        for a, b in zip(framed, framed[1:]):
            features[f"{label}_{a}~{b}"] += 1
    return dict(features)


@pytest.mark.parametrize("seed", range(5))
def test_every_family_equals_its_definition(seed):
    grammar = _grammar(seed)
    features = rule_features(grammar.table, grammar.src_vocab.words, grammar.tgt_vocab.words, FAMILIES)
    assert len(features.rows) == len(grammar) > 50
    for k, r in enumerate(features.rows.tolist()):
        assert features.of(k) == _expected(grammar, r)
    assert len(set(features.names)) == len(features.names)
    # a subset of rules and families gives the same features restricted
    rows = np.arange(0, len(grammar), 3)
    some = rule_features(grammar.table, grammar.src_vocab.words, grammar.tgt_vocab.words,
                         ["rule-shape", "target-bigram"], rows)
    for k, r in enumerate(rows.tolist()):
        assert some.of(k) == {n: v for n, v in _expected(grammar, r).items()
                              if n.startswith(("RuleShape_", "RuleTargetBigram_"))}


def test_examples_and_bad_family():
    grammar = _grammar(1)
    features = rule_features(grammar.table, grammar.src_vocab.words, grammar.tgt_vocab.words,
                             ["rule-shape"])
    shapes = set(features.names)
    assert "RuleShape_S10000~T10000" in shapes        # a phrase pair
    assert all(len(n) == len("RuleShape_S10000~T10000") for n in shapes)
    with pytest.raises(InputError, match="rule-identity"):
        rule_features(grammar.table, grammar.src_vocab.words, grammar.tgt_vocab.words, ["rule-identity"])


def test_names_survive_nbest_kbest_and_weights_files(tmp_path):
    grammar = _grammar(2)
    features = rule_features(grammar.table, grammar.src_vocab.words, grammar.tgt_vocab.words, FAMILIES)
    assert any("%" in name for name in features.names)
    dense = ["LM0_0", "WordPenalty0_0"]
    space = FeatureSpace(dense, features.names)
    builder = KBestBuilder(space)
    expected = []
    for k in range(min(len(grammar), 40)):
        lo, hi = features.offsets[k], features.offsets[k + 1]
        ids = [space.index(features.names[i]) for i in features.ids[lo:hi].tolist()]
        order = np.argsort(ids)
        builder.add(k // 10, f"h{k}", np.array([-1.5, -2.0]), [ids[j] for j in order],
                    features.values[lo:hi][order])
        expected.append(features.of(k) | {"LM0_0": -1.5, "WordPenalty0_0": -2.0})
    kbest = builder.build(4)
    weights = space.weights({name: 0.01 * (i % 7 - 3) for i, name in enumerate(space.names)}, grow=False)
    write_kbest_nbest(tmp_path / "nbest", kbest, weights)
    write_kbest_from(tmp_path / "kbest", kbest, weights)
    for back in (read_nbest(tmp_path / "nbest", space=FeatureSpace(dense)),
                 read_kbest(tmp_path / "kbest", space=FeatureSpace(dense))):
        got = sorted((back.feature_dict(r) for r in range(back.n_hypotheses)), key=lambda d: sorted(d.items()))
        want = sorted(expected, key=lambda d: sorted(d.items()))
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.keys() == b.keys()
            assert all(a[n] == pytest.approx(b[n]) for n in a)
    named = {name: 0.5 for name in features.names}
    write_weights(tmp_path / "weights", named)
    assert read_weights(tmp_path / "weights") == named
