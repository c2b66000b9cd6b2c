"""The fast Hiero rule extractor (minismt.extract.hiero) against the slow reference
(tests/hiero_reference.py, itself checked against Moses ``extract-rules``).

Per sentence pair, the fast extractor's distinct rules (rendered as Moses' extract lines, in order
of first extraction), their exact counts (float64 vs Fraction) and Moses' float32 counts must equal
the reference's; per corpus, the summed counts too.
"""

from __future__ import annotations

import time
from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest

from hiero_reference import ExtractRulesOptions, extract_corpus
from minismt.corpus import Alignment, TokenArray, Vocabulary
from minismt.errors import InputError
from minismt.extract.hiero import (HieroOptions, aggregate_rules, extract_hiero)

VOCAB_SRC = ["a", "b", "c", "d", "e", "f"]
VOCAB_TGT = ["v", "w", "x", "y", "z", "u"]


def _random_corpus(rng: np.random.Generator, n_pairs: int, min_len: int, max_len: int,
                   duplicates: bool = True):
    """Few words (identical rules from different spans are common), random alignments with
    unaligned words, links in random input order (Moses keeps it), sometimes a repeated link."""
    sources, targets, alignments = [], [], []
    for _ in range(n_pairs):
        ls, lt = int(rng.integers(min_len, max_len + 1)), int(rng.integers(min_len, max_len + 1))
        density = float(rng.uniform(0.05, 0.45))
        links = [(i, j) for i in range(ls) for j in range(lt) if rng.random() < density]
        if rng.random() < 0.25:   # near-diagonal with unaligned words: many rules
            links = sorted({(i, min(lt - 1, i * lt // ls)) for i in range(ls) if rng.random() < 0.8})
        links = [links[k] for k in rng.permutation(len(links))]
        if duplicates and links and rng.random() < 0.1:
            links.append(links[int(rng.integers(0, len(links)))])
        sources.append([VOCAB_SRC[k] for k in rng.integers(0, len(VOCAB_SRC), ls)])
        targets.append([VOCAB_TGT[k] for k in rng.integers(0, len(VOCAB_TGT), lt)])
        alignments.append(links)
    return sources, targets, alignments


def _arrays(sources, targets, alignments):
    sv, tv = Vocabulary(), Vocabulary()
    src = TokenArray.from_sentences(sources, sv)
    tgt = TokenArray.from_sentences(targets, tv)
    rows = [link for links in alignments for link in links]
    offsets = np.cumsum([0] + [len(links) for links in alignments]).astype(np.int64)
    # links in the given order (Alignment.from_lists would sort and deduplicate them)
    alignment = Alignment(np.asarray(rows, dtype=np.int32).reshape(-1, 2), offsets)
    return src, tgt, alignment, sv, tv


def _fast_options(options: ExtractRulesOptions) -> HieroOptions:
    return HieroOptions(**{name: getattr(options, name) for name in HieroOptions.__dataclass_fields__})


def _check(sources, targets, alignments, options: ExtractRulesOptions = ExtractRulesOptions()) -> int:
    """Assert the fast extractor equals the reference; return the number of distinct rules."""
    reference = extract_corpus(sources, targets, alignments, options)
    src, tgt, alignment, sv, tv = _arrays(sources, targets, alignments)
    occ = extract_hiero(src, tgt, alignment, _fast_options(options))
    assert np.all(np.diff(occ.sent) >= 0)

    # per sentence pair: Moses' extract lines in order of first extraction, exact and float32 counts
    rules = aggregate_rules(occ, per_sentence=True)
    lines = rules.extract_lines(sv, tv)
    expected_lines = [r.extract_line() for sentence in reference for r in sentence]
    assert lines == expected_lines
    expected_sent = [s for s, sentence in enumerate(reference) for _ in sentence]
    assert rules.sentence.tolist() == expected_sent
    expected = [r for sentence in reference for r in sentence]
    for i, r in enumerate(expected):
        assert rules.sides(i, sv, tv) == r.key
        assert abs(rules.count[i] - float(r.count)) <= 1e-12 * max(1.0, float(r.count))
        assert rules.moses_count[i] == np.float32(r.moses_count)  # bit-exact
    assert rules.n_occurrences.sum() == occ.size

    # per corpus: summed counts of each distinct rule
    totals: dict[tuple[str, str, str], Fraction] = defaultdict(Fraction)
    for r in expected:
        totals[r.key] += r.count
    corpus_rules = aggregate_rules(occ)
    got = {corpus_rules.sides(i, sv, tv): corpus_rules.count[i] for i in range(len(corpus_rules))}
    assert len(got) == len(corpus_rules) == len(totals)
    assert set(got) == set(totals)
    for key, exact in totals.items():
        assert abs(got[key] - float(exact)) <= 1e-12 * max(1.0, float(exact)), key
    assert abs(float(occ.weight.sum()) - float(sum(totals.values()))) <= 1e-9 * max(1, occ.size)
    return len(expected)


@pytest.mark.parametrize("block", range(10))
def test_random_corpora_match_reference(block):
    """200 random corpora (20 per block) of 1-4 pairs with 1-12 words."""
    n_rules = 0
    for seed in range(20 * block, 20 * block + 20):
        rng = np.random.default_rng(5000 + seed)
        n_rules += _check(*_random_corpus(rng, int(rng.integers(1, 5)), 1, 12))
    assert n_rules > 0


def test_long_sentences_match_reference():
    """Sentences of 11-14 words, where MaxSpan 10 limits the initial phrase pairs."""
    rng = np.random.default_rng(77)
    for _ in range(3):
        assert _check(*_random_corpus(rng, 3, 11, 14)) > 0
    # a dense near-diagonal alignment: many spans hit the limit
    n = 14
    sources = [[VOCAB_SRC[i % 6] for i in range(n)]]
    targets = [[VOCAB_TGT[(i * 5) % 6] for i in range(n)]]
    assert _check(sources, targets, [[(i, i) for i in range(n) if i % 4 != 1]]) > 0


OTHER_OPTIONS = [
    ExtractRulesOptions(max_nonterm=1),
    ExtractRulesOptions(max_nonterm=0),
    ExtractRulesOptions(min_hole_source=1, nonterm_consec_source=True),
    ExtractRulesOptions(require_aligned_word=False, fractional_counting=False),
    ExtractRulesOptions(max_span=6, max_symbols_source=4, max_symbols_target=5, min_words=2),
]


@pytest.mark.parametrize("options", OTHER_OPTIONS, ids=range(len(OTHER_OPTIONS)))
def test_other_options_match_reference(options):
    for seed in range(25):
        rng = np.random.default_rng(9000 + seed)
        _check(*_random_corpus(rng, int(rng.integers(1, 4)), 1, 10), options)


def test_empty_sides_and_no_links():
    sources = [["a"], [], ["a", "b"], ["c"]]
    targets = [["v"], ["w"], ["v", "w"], []]
    alignments = [[(0, 0)], [], [], []]
    assert _check(sources, targets, alignments) == 1


def test_encoding_of_a_two_hole_rule():
    """der hund und die katze / the cat and the dog: X1 und X2 -> X2 and X1."""
    src, tgt, alignment, sv, tv = _arrays(
        [["der", "hund", "und", "die", "katze"]], [["the", "cat", "and", "the", "dog"]],
        [[(0, 3), (1, 4), (2, 2), (3, 0), (4, 1)]])
    occ = extract_hiero(src, tgt, alignment)
    rules = aggregate_rules(occ, per_sentence=True)
    two = [i for i in range(len(rules))
           if (rules.src_syms[rules.src_off[i]:rules.src_off[i + 1]] < 0).sum() == 2]
    assert len(two) == 1
    i = two[0]
    und, and_ = sv.get("und"), tv.get("and")
    assert rules.src_syms[rules.src_off[i]:rules.src_off[i + 1]].tolist() == [-1, und, -2]
    assert rules.tgt_syms[rules.tgt_off[i]:rules.tgt_off[i + 1]].tolist() == [-2, and_, -1]
    assert rules.align[rules.align_off[i]:rules.align_off[i + 1]].tolist() == [[1, 1], [2, 0], [0, 2]]
    assert rules.extract_line(i, sv, tv) == \
        "[X][X] und [X][X] [X] ||| [X][X] and [X][X] [X] ||| 1-1 2-0 0-2 ||| 0.166667 ||| "


def test_bad_input():
    src, tgt, _, _, _ = _arrays([["a", "b"]], [["v"]], [[]])
    with pytest.raises(InputError, match="outside sentence pair 1"):
        extract_hiero(src, tgt, Alignment(np.array([[2, 0]], dtype=np.int32), np.array([0, 1])))
    with pytest.raises(InputError):
        extract_hiero(src, tgt, Alignment(np.zeros((0, 2), dtype=np.int32), np.array([0, 0, 0])))
    with pytest.raises(InputError):
        extract_hiero(src, tgt, Alignment(np.zeros((0, 2), dtype=np.int32), np.array([0])),
                      HieroOptions(max_nonterm=3))


def test_timing_smoke():
    """Not asserted: the time for 1,000 random sentence pairs of 10-20 words."""
    rng = np.random.default_rng(3)
    sources, targets, alignments = [], [], []
    for _ in range(1000):
        ls, lt = int(rng.integers(10, 21)), int(rng.integers(10, 21))
        links = sorted({(i, min(lt - 1, max(0, i * lt // ls + int(rng.integers(-1, 2)))))
                        for i in range(ls) if rng.random() < 0.85})
        sources.append([f"s{k}" for k in rng.integers(0, 500, ls)])
        targets.append([f"t{k}" for k in rng.integers(0, 500, lt)])
        alignments.append(links)
    src, tgt, alignment, _, _ = _arrays(sources, targets, alignments)
    extract_hiero(src, tgt, alignment)  # compile / load the cache
    start = time.perf_counter()
    occ = extract_hiero(src, tgt, alignment)
    mid = time.perf_counter()
    rules = aggregate_rules(occ)
    per_sentence = aggregate_rules(occ, per_sentence=True)
    end = time.perf_counter()
    print(f"\nhiero extraction, 1000 pairs of 10-20 words: {occ.size} occurrences in "
          f"{mid - start:.3f}s; {len(rules)} distinct rules ({len(per_sentence)} per sentence) "
          f"aggregated in {end - mid:.3f}s")
