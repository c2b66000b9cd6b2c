"""The reference Hiero rule extractor (tests/hiero_reference.py) against hand-worked rules and
against the real Moses ``extract-rules`` binary in ../shared/tools/moses/bin.

The binary is run as ``train-model.perl -hierarchical -glue-grammar`` runs it through
``extract-parallel.perl`` (one part): ``extract-rules TARGET SOURCE ALIGN extract --GlueGrammar glue
--MaxSpan 10 --GZOutput --SentenceOffset 0``; every other option is Moses' default.  Its extract
files are read before extract-parallel.perl's ``LC_ALL=C sort``, so the rules of one sentence pair
are a contiguous block in sentence order.
"""

from __future__ import annotations

import gzip
import subprocess
from collections import Counter
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pytest

from conftest import shared_path
from hiero_reference import (HieroRule, PhrasePair, extract_corpus, extract_rules,
                                             format_count, glue_grammar, initial_phrase_pairs)

# ---------------------------------------------------------------------------------------------
# 1. Three sentence pairs worked out by hand.  Moses' defaults: initial phrases <= 10 words a side,
#    <= 5 source symbols, <= 2 non-terminals, every source hole >= 2 words, no adjacent source
#    holes, >= 1 terminal left on each side and an aligned target terminal; fractional counts
#    (each rule of an initial phrase pair gets 1/(rules of that pair)), summed per sentence.
# ---------------------------------------------------------------------------------------------

# (a) an unaligned source word ("ja"): the target word "sleeps" has two initial phrase pairs,
#     "schläft" and the loose "schläft ja"; the loose one is the only hole of size >= 2.
#     Initial phrase pairs: er/he, schläft/sleeps, schläft ja/sleeps, er schläft/he sleeps,
#     er schläft ja/he sleeps.  Only the last one has a hole (schläft ja/sleeps): 2 rules, 1/2 each.
PAIR_A = ("er schläft ja", "he sleeps", [(0, 0), (1, 1)])
EXPECTED_A = [
    ("er [X]", "he [X]", "0-0", F(1)),
    ("schläft [X]", "sleeps [X]", "0-0", F(1)),
    ("schläft ja [X]", "sleeps [X]", "0-0", F(1)),
    ("er schläft [X]", "he sleeps [X]", "0-0 1-1", F(1)),
    ("er schläft ja [X]", "he sleeps [X]", "0-0 1-1", F(1, 2)),
    ("er [X][X] [X]", "he [X][X] [X]", "0-0 1-1", F(1, 2)),
]

# (b) reordering with two non-terminals: "der hund" and "die katze" swap around "und".
#     Links der-the(0,3) hund-dog(1,4) und-and(2,2) die-the(3,0) katze-cat(4,1).  Consistent source
#     spans: the 5 words, [0,1], [3,4], [0,2], [2,4], [0,4].  [0,2] and [2,4] each give the lexical
#     rule and one with a hole (1/2 each); [0,4] gives the lexical rule, four one-hole rules and the
#     two-hole rule X1 und X2 -> X2 and X1 (1/6 each).
PAIR_B = ("der hund und die katze", "the cat and the dog", [(0, 3), (1, 4), (2, 2), (3, 0), (4, 1)])
EXPECTED_B = [
    ("der [X]", "the [X]", "0-0", F(1)),
    ("hund [X]", "dog [X]", "0-0", F(1)),
    ("und [X]", "and [X]", "0-0", F(1)),
    ("die [X]", "the [X]", "0-0", F(1)),
    ("katze [X]", "cat [X]", "0-0", F(1)),
    ("der hund [X]", "the dog [X]", "0-0 1-1", F(1)),
    ("die katze [X]", "the cat [X]", "0-0 1-1", F(1)),
    ("der hund und [X]", "and the dog [X]", "2-0 0-1 1-2", F(1, 2)),
    ("[X][X] und [X]", "and [X][X] [X]", "1-0 0-1", F(1, 2)),
    ("und die katze [X]", "the cat and [X]", "1-0 2-1 0-2", F(1, 2)),
    ("und [X][X] [X]", "[X][X] and [X]", "0-1 1-0", F(1, 2)),
    ("der hund und die katze [X]", "the cat and the dog [X]", "3-0 4-1 2-2 0-3 1-4", F(1, 6)),
    ("[X][X] und die katze [X]", "the cat and [X][X] [X]", "2-0 3-1 1-2 0-3", F(1, 6)),
    ("der hund und [X][X] [X]", "[X][X] and the dog [X]", "2-1 0-2 1-3 3-0", F(1, 6)),
    ("[X][X] die katze [X]", "the cat [X][X] [X]", "1-0 2-1 0-2", F(1, 6)),
    ("der hund [X][X] [X]", "[X][X] the dog [X]", "0-1 1-2 2-0", F(1, 6)),
    # word links first (und-and), then the holes in target order: the first target hole is
    # "die katze" (source symbol 2), the second "der hund" (source symbol 0)
    ("[X][X] und [X][X] [X]", "[X][X] and [X][X] [X]", "1-1 2-0 0-2", F(1, 6)),
]

# (c) an unaligned target word (",") and a reordering around a hole.  Links der-the(0,2)
#     mann-man(1,3) schlief-slept(2,4) gestern-yesterday(3,0).  Twelve initial phrase pairs: der/the,
#     der/", the", mann/man, schlief/slept, gestern/yesterday, gestern/"yesterday ,", der mann/the man,
#     der mann/", the man", mann schlief/man slept, der mann schlief/the man slept (3 rules, 1/3),
#     der mann schlief/", the man slept" (4 rules, 1/4: its sub-pair "der mann schlief/the man slept"
#     would leave no source word), and the whole pair (6 rules, 1/6).  "X schlief -> X slept" comes
#     from two initial phrase pairs: 1/3 + 1/4 = 7/12.
PAIR_C = ("der mann schlief gestern", "yesterday , the man slept", [(0, 2), (1, 3), (2, 4), (3, 0)])
EXPECTED_C = [
    ("der [X]", "the [X]", "0-0", F(1)),
    ("der [X]", ", the [X]", "0-1", F(1)),
    ("mann [X]", "man [X]", "0-0", F(1)),
    ("schlief [X]", "slept [X]", "0-0", F(1)),
    ("gestern [X]", "yesterday [X]", "0-0", F(1)),
    ("gestern [X]", "yesterday , [X]", "0-0", F(1)),
    ("der mann [X]", "the man [X]", "0-0 1-1", F(1)),
    ("der mann [X]", ", the man [X]", "0-1 1-2", F(1)),
    ("mann schlief [X]", "man slept [X]", "0-0 1-1", F(1)),
    ("der mann schlief [X]", "the man slept [X]", "0-0 1-1 2-2", F(1, 3)),
    ("[X][X] schlief [X]", "[X][X] slept [X]", "1-1 0-0", F(1, 3) + F(1, 4)),
    ("der [X][X] [X]", "the [X][X] [X]", "0-0 1-1", F(1, 3)),
    ("der mann schlief [X]", ", the man slept [X]", "0-1 1-2 2-3", F(1, 4)),
    ("[X][X] schlief [X]", ", [X][X] slept [X]", "1-2 0-1", F(1, 4)),
    ("der [X][X] [X]", ", the [X][X] [X]", "0-1 1-2", F(1, 4)),
    ("der mann schlief gestern [X]", "yesterday , the man slept [X]", "3-0 0-2 1-3 2-4", F(1, 6)),
    ("[X][X] schlief gestern [X]", "yesterday , [X][X] slept [X]", "2-0 1-3 0-2", F(1, 6)),
    ("[X][X] schlief gestern [X]", "yesterday [X][X] slept [X]", "2-0 1-2 0-1", F(1, 6)),
    ("der [X][X] gestern [X]", "yesterday , the [X][X] [X]", "2-0 0-2 1-3", F(1, 6)),
    ("[X][X] gestern [X]", "yesterday , [X][X] [X]", "1-0 0-2", F(1, 6)),
    ("[X][X] gestern [X]", "yesterday [X][X] [X]", "1-0 0-1", F(1, 6)),
]

HAND_PAIRS = [PAIR_A, PAIR_B, PAIR_C]
HAND_EXPECTED = [EXPECTED_A, EXPECTED_B, EXPECTED_C]


def _as_tuples(rules: list[HieroRule]) -> Counter:
    return Counter((r.source, r.target, r.alignment, r.count) for r in rules)


@pytest.mark.parametrize("index", range(3), ids=["unaligned-source", "two-nonterminals", "unaligned-target"])
def test_hand_worked_rules(index):
    source, target, links = HAND_PAIRS[index]
    rules = extract_rules(source, target, links)
    assert _as_tuples(rules) == Counter(HAND_EXPECTED[index])
    for rule in rules:  # the inverse alignment is the same pairs, flipped
        flipped = " ".join("-".join(reversed(p.split("-"))) for p in rule.alignment.split())
        assert rule.alignment_inv == flipped


def test_hand_worked_initial_phrases_and_lines():
    source, target, links = PAIR_A
    assert sorted(initial_phrase_pairs(3, 2, links)) == [
        PhrasePair(0, 0, 0, 0), PhrasePair(0, 1, 0, 1), PhrasePair(0, 2, 0, 1),
        PhrasePair(1, 1, 1, 1), PhrasePair(1, 2, 1, 1)]
    rule = next(r for r in extract_rules(source, target, links) if r.num_nonterminals == 1)
    assert rule.extract_line() == "er [X][X] [X] ||| he [X][X] [X] ||| 0-0 1-1 ||| 0.5 ||| "
    assert rule.inverse_line() == "he [X][X] [X] ||| er [X][X] [X] ||| 0-0 1-1 ||| 0.5"
    assert format_count(F(7, 12)) == "0.583333" and format_count(F(1)) == "1"


def test_edge_cases():
    assert extract_rules("", "a", []) == []          # Moses skips pairs with an empty side
    assert extract_rules("a b", "c d", []) == []     # no link, no initial phrase pair
    with pytest.raises(ValueError):
        extract_rules("a", "b", [(1, 0)])            # Moses warns and skips the pair
    # a source side of 6 words has no lexical rule (MaxSymbolsSource 5) but still gives
    # hierarchical rules, e.g. the 6-word span with one 2-word hole (5 symbols)
    words = "a b c d e f".split()
    rules = extract_rules(words, words, [(i, i) for i in range(6)])
    assert max(len(r.source.split()) - 1 for r in rules) == 5
    assert ("[X][X] c d e f [X]", "[X][X] c d e f [X]") in {(r.source, r.target) for r in rules}
    assert ("a b c d e f [X]", "a b c d e f [X]") not in {(r.source, r.target) for r in rules}


# ---------------------------------------------------------------------------------------------
# 2. Against the real extract-rules.
# ---------------------------------------------------------------------------------------------

def _extract_rules_binary() -> Path:
    path = shared_path("tools", "moses", "bin", "extract-rules")
    if not path.is_file():
        pytest.skip(f"{path} is not a file")
    return path


def _run_moses(binary: Path, folder: Path, sources: list[list[str]], targets: list[list[str]],
               alignments: list[list[tuple[int, int]]]) -> tuple[list[str], list[str], list[str]]:
    """Run extract-rules as train-model.perl -hierarchical -glue-grammar does; return the lines of
    extract.gz, extract.inv.gz and the glue grammar."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.de").write_text("".join(" ".join(s) + "\n" for s in sources), encoding="utf-8")
    (folder / "train.en").write_text("".join(" ".join(t) + "\n" for t in targets), encoding="utf-8")
    (folder / "aligned.grow-diag-final-and").write_text(
        "".join(" ".join(f"{s}-{t}" for s, t in a) + "\n" for a in alignments), encoding="utf-8")
    command = [str(binary), "train.en", "train.de", "aligned.grow-diag-final-and", "extract",
               "--GlueGrammar", "glue-grammar", "--MaxSpan", "10", "--GZOutput", "--SentenceOffset", "0"]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr

    def lines(name: str) -> list[str]:
        with gzip.open(folder / name, "rt", encoding="utf-8") as handle:
            return handle.read().splitlines()
    glue = (folder / "glue-grammar").read_text(encoding="utf-8").splitlines()
    return lines("extract.gz"), lines("extract.inv.gz"), glue


def _compare(ours: list[list[HieroRule]], forward: list[str], inverse: list[str]) -> int:
    """Compare sentence by sentence: Moses writes each sentence's rules as one block, in sentence
    order, so our i-th block (of len(ours[i]) lines) must equal Moses' next len(ours[i]) lines as a
    multiset; a wrong rule count shifts every later block and fails too.  Lines are compared as
    exact strings, which covers source, target, alignment and the printed count."""
    position = 0
    for sentence, rules in enumerate(ours):
        n = len(rules)
        moses_fwd, moses_inv = forward[position:position + n], inverse[position:position + n]
        assert Counter(moses_fwd) == Counter(r.extract_line() for r in rules), (
            f"sentence {sentence}: only Moses: {sorted(Counter(moses_fwd) - Counter(r.extract_line() for r in rules))}"
            f"; only ours: {sorted(Counter(r.extract_line() for r in rules) - Counter(moses_fwd))}")
        assert Counter(moses_inv) == Counter(r.inverse_line() for r in rules), f"sentence {sentence} (inverse)"
        position += n
    assert position == len(forward) == len(inverse)
    return position


def _random_corpus(rng: np.random.Generator, n_pairs: int, min_len: int, max_len: int):
    vocab_src = ["a", "b", "c", "d", "e"]       # few words, so identical rules from different
    vocab_tgt = ["v", "w", "x", "y", "z"]       # spans (consolidation) are common
    sources, targets, alignments = [], [], []
    for _ in range(n_pairs):
        ls, lt = int(rng.integers(min_len, max_len + 1)), int(rng.integers(min_len, max_len + 1))
        density = float(rng.uniform(0.1, 0.5))
        links = [(i, j) for i in range(ls) for j in range(lt) if rng.random() < density]
        if links and rng.random() < 0.2:    # sometimes a near-diagonal alignment (more rules)
            links = sorted({(i, min(lt - 1, i * lt // ls)) for i in range(ls) if rng.random() < 0.8})
        links = [links[k] for k in rng.permutation(len(links))]  # Moses keeps the input order
        sources.append([vocab_src[k] for k in rng.integers(0, len(vocab_src), ls)])
        targets.append([vocab_tgt[k] for k in rng.integers(0, len(vocab_tgt), lt)])
        alignments.append(links)
    return sources, targets, alignments


def test_glue_grammar_matches_moses(tmp_path):
    binary = _extract_rules_binary()
    _, _, glue = _run_moses(binary, tmp_path, [["a"]], [["b"]], [[(0, 0)]])
    assert glue == glue_grammar()
    # the fixture's glue grammar (written by train-model.perl through extract-parallel.perl)
    fixture = shared_path("fixtures", "moses", "m30k-hiero", "glue-grammar")
    assert fixture.read_text(encoding="utf-8").splitlines() == glue_grammar()


def test_hand_worked_pairs_match_moses(tmp_path):
    binary = _extract_rules_binary()
    sources = [p[0].split() for p in HAND_PAIRS]
    targets = [p[1].split() for p in HAND_PAIRS]
    alignments = [p[2] for p in HAND_PAIRS]
    forward, inverse, _ = _run_moses(binary, tmp_path, sources, targets, alignments)
    assert _compare(extract_corpus(sources, targets, alignments), forward, inverse) == sum(
        len(e) for e in HAND_EXPECTED)


@pytest.mark.parametrize("seed", range(30))
def test_random_corpora_match_moses(tmp_path, seed):
    binary = _extract_rules_binary()
    rng = np.random.default_rng(1000 + seed)
    sources, targets, alignments = _random_corpus(rng, int(rng.integers(1, 5)), 1, 8)
    forward, inverse, _ = _run_moses(binary, tmp_path, sources, targets, alignments)
    _compare(extract_corpus(sources, targets, alignments), forward, inverse)


def test_long_sentences_match_moses(tmp_path):
    """Sentences of 11-13 words, where MaxSpan 10 limits the initial phrase pairs."""
    binary = _extract_rules_binary()
    rng = np.random.default_rng(77)
    sources, targets, alignments = _random_corpus(rng, 3, 11, 13)
    forward, inverse, _ = _run_moses(binary, tmp_path, sources, targets, alignments)
    _compare(extract_corpus(sources, targets, alignments), forward, inverse)
