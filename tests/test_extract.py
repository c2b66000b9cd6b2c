"""Phrase-table training (minismt.extract): hand-checked examples, a slow obvious reference
on random corpora, Moses text formats (real Moses fixtures), the binary table, the table
limit and bad input."""

from __future__ import annotations

import gzip
import math
import os
from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import shared_path
from minismt.corpus import Alignment, TokenArray, Vocabulary
from minismt.errors import InputError
from minismt.extract import (PhraseTable, extract_phrase_pairs, read_moses_tables,
                             train_lexical_table, train_phrase_table, write_moses_phrase_table,
                             write_moses_reordering_table)
from minismt.extract.phrases import byte_order_ids, byte_order_ranks, unique_spans_hashed


def corpus(src_lines, tgt_lines, links, src_vocab=None, tgt_vocab=None):
    src_vocab = Vocabulary() if src_vocab is None else src_vocab
    tgt_vocab = Vocabulary() if tgt_vocab is None else tgt_vocab
    src = TokenArray.from_sentences(src_lines, src_vocab)
    tgt = TokenArray.from_sentences(tgt_lines, tgt_vocab)
    return src, tgt, Alignment.from_lists(links), src_vocab, tgt_vocab


def rows_by_pair(table: PhraseTable) -> dict[tuple[str, str], int]:
    return {table.phrase_strings(r): r for r in range(len(table))}


def text_lines(path) -> list[str]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as handle:
        data = handle.read().decode("utf-8")
    assert data == "" or data.endswith("\n")
    return data.splitlines()


# ---- (a) hand-checked examples ----------------------------------------------------------
#
# Sentence pairs (links source-target):
#   1. a b c / x y   0-0 2-1        (b unaligned)
#   2. a c   / y x   0-1 1-0        (swap)
#   3. b c   / x z   0-0 1-0        (x aligned to two words, z unaligned)
# Extracted occurrences (source | target, backward/forward orientation):
#   1: a|x (mono/disc), a b|x (mono/mono), a b c|x y (mono/mono), c|y (disc/mono), b c|y (mono/mono)
#   2: c|y (disc/swap), a c|y x (mono/mono), a|x (swap/disc)
#   3: b c|x (mono/disc), b c|x z (mono/mono)
# Counts: c(a,x)=2, c(c,y)=2, the others 1; c(f): a 2, "b c" 3, c 2, others 1;
# c(e): x 4, y 3, others 1.
# Lexical table: c(a,x)=2 c(c,y)=2 c(b,x)=1 c(c,x)=1 c(b,NULL)=1 c(NULL,z)=1, so
# w(x|a)=1 w(y|c)=2/3 w(x|b)=1/2 w(x|c)=1/3 w(z|NULL)=1; w(a|x)=1/2 w(c|y)=1 w(b|x)=1/4
# w(c|x)=1/4 w(b|NULL)=1; rounded to 7 decimals as Moses' lex files: 2/3 -> 0.6666667.
# lex(e|f) of "b c ||| x" = (w(x|b) + w(x|c)) / 2 = (0.5 + 0.3333333) / 2; of "b c ||| x z"
# the same times w(z|NULL) = 1; lex(f|e) of both = w(b|x) w(c|x) = 1/16.
# Byte order puts "a b c" < "a b" < "a c" < "a" ('c', 'b' < '|') and "x z" < "x".

HAND_SOURCE = ["a b c", "a c", "b c"]
HAND_TARGET = ["x y", "y x", "x z"]
HAND_LINKS = [[(0, 0), (2, 1)], [(0, 1), (1, 0)], [(0, 0), (1, 0)]]

HAND_PHRASE_TABLE = [
    "a b c ||| x y ||| 1 0.5 1 0.666667 ||| 0-0 2-1 ||| 1 1 1 ||| |||",
    "a b ||| x ||| 0.25 0.5 1 1 ||| 0-0 ||| 4 1 1 ||| |||",
    "a c ||| y x ||| 1 0.5 1 0.666667 ||| 1-0 0-1 ||| 1 1 1 ||| |||",
    "a ||| x ||| 0.5 0.5 1 1 ||| 0-0 ||| 4 2 2 ||| |||",
    "b c ||| x z ||| 1 0.0625 0.333333 0.416667 ||| 0-0 1-0 ||| 1 3 1 ||| |||",
    "b c ||| x ||| 0.25 0.0625 0.333333 0.416667 ||| 0-0 1-0 ||| 4 3 1 ||| |||",
    "b c ||| y ||| 0.333333 1 0.333333 0.666667 ||| 1-0 ||| 3 3 1 ||| |||",
    "c ||| y ||| 0.666667 1 1 0.666667 ||| 0-0 ||| 3 2 2 ||| |||",
]
# singletons: (1 + 0.5) / 2.5 = 0.6, 0.5 / 2.5 = 0.2; two occurrences (1, 1, 0): 1.5 / 3.5
HAND_REORDERING = [
    "a b c ||| x y ||| 0.6 0.2 0.2 0.6 0.2 0.2",
    "a b ||| x ||| 0.6 0.2 0.2 0.6 0.2 0.2",
    "a c ||| y x ||| 0.6 0.2 0.2 0.6 0.2 0.2",
    "a ||| x ||| 0.428571 0.428571 0.142857 0.142857 0.142857 0.714286",
    "b c ||| x z ||| 0.6 0.2 0.2 0.6 0.2 0.2",
    "b c ||| x ||| 0.6 0.2 0.2 0.2 0.2 0.6",
    "b c ||| y ||| 0.6 0.2 0.2 0.6 0.2 0.2",
    "c ||| y ||| 0.142857 0.142857 0.714286 0.428571 0.428571 0.142857",
]
HAND_ORIENTATIONS = {  # backward mono swap disc, forward mono swap disc
    ("a b c", "x y"): [1, 0, 0, 1, 0, 0], ("a b", "x"): [1, 0, 0, 1, 0, 0],
    ("a c", "y x"): [1, 0, 0, 1, 0, 0], ("a", "x"): [1, 1, 0, 0, 0, 2],
    ("b c", "x z"): [1, 0, 0, 1, 0, 0], ("b c", "x"): [1, 0, 0, 0, 0, 1],
    ("b c", "y"): [1, 0, 0, 1, 0, 0], ("c", "y"): [0, 0, 2, 1, 1, 0],
}


def test_hand_example_moses_files(tmp_path):
    table = train_phrase_table(*corpus(HAND_SOURCE, HAND_TARGET, HAND_LINKS), progress=True)
    write_moses_phrase_table(table, tmp_path / "phrase-table")
    write_moses_reordering_table(table, tmp_path / "reordering-table")
    assert text_lines(tmp_path / "phrase-table") == HAND_PHRASE_TABLE
    assert text_lines(tmp_path / "reordering-table") == HAND_REORDERING


def test_hand_example_counts_scores_orientations():
    pairs = extract_phrase_pairs(*corpus(HAND_SOURCE, HAND_TARGET, HAND_LINKS))
    table = pairs.table
    assert pairs.n_occurrences == 10 and pairs.n_pairs == len(table) == 8
    rows = rows_by_pair(table)
    assert set(rows) == set(HAND_ORIENTATIONS)
    for pair, expected in HAND_ORIENTATIONS.items():
        assert pairs.orientation_counts[rows[pair]].tolist() == expected
    w_yc = 0.6666667
    expected = {  # p(f|e), lex(f|e), p(e|f), lex(e|f); c(e), c(f), c(f,e)
        ("a", "x"): ([2 / 4, 0.5, 1, 1], [4, 2, 2]),
        ("a b", "x"): ([1 / 4, 0.5 * 1.0, 1, 1], [4, 1, 1]),
        ("a b c", "x y"): ([1, 0.5 * 1.0 * 1.0, 1, 1 * w_yc], [1, 1, 1]),
        ("c", "y"): ([2 / 3, 1, 1, w_yc], [3, 2, 2]),
        ("b c", "y"): ([1 / 3, 1.0 * 1.0, 1 / 3, w_yc], [3, 3, 1]),
        ("a c", "y x"): ([1, 0.5 * 1.0, 1, w_yc * 1], [1, 1, 1]),
        ("b c", "x"): ([1 / 4, 0.25 * 0.25, 1 / 3, (0.5 + 0.3333333) / 2], [4, 3, 1]),
        ("b c", "x z"): ([1, 0.25 * 0.25, 1 / 3, (0.5 + 0.3333333) / 2 * 1.0], [1, 3, 1]),
    }
    for pair, (scores, counts) in expected.items():
        r = rows[pair]
        np.testing.assert_allclose(table.scores[r], scores, rtol=0, atol=1e-15)
        assert table.counts[r].tolist() == counts
    assert table.alignment(rows[("a c", "y x")]).tolist() == [[1, 0], [0, 1]]  # target order
    assert table.alignment(rows[("b c", "x z")]).tolist() == [[0, 0], [1, 0]]
    np.testing.assert_allclose(table.reordering[rows[("c", "y")]],
                               [0.5 / 3.5, 0.5 / 3.5, 2.5 / 3.5, 1.5 / 3.5, 1.5 / 3.5, 0.5 / 3.5],
                               rtol=0, atol=1e-15)


def test_hand_example_lexical_table(tmp_path):
    src, tgt, links, sv, tv = corpus(HAND_SOURCE, HAND_TARGET, HAND_LINKS)
    lex = train_lexical_table(src, tgt, links, sv, tv)
    a, b, c = (sv.get(w) for w in "abc")
    x, y, z = (tv.get(w) for w in "xyz")
    null_f, null_e = lex.null_src, lex.null_tgt
    f_ids, e_ids = lex.pairs()
    assert Counter(dict(zip(zip(f_ids.tolist(), e_ids.tolist()), lex.counts.tolist()))) == Counter(
        {(a, x): 2, (c, y): 2, (b, x): 1, (c, x): 1, (b, null_e): 1, (null_f, z): 1})
    w_ef, w_fe = lex.lookup([a, c, b, c, null_f, b, a], [x, y, x, x, z, null_e, y])
    assert w_ef.tolist() == [1.0, 0.6666667, 0.5, 0.3333333, 1.0, 0.5, 0.0]
    assert w_fe.tolist() == [0.5, 1.0, 0.25, 0.25, 1.0, 1.0, 0.0]
    lex.write_moses(tmp_path / "lex", sv, tv)
    assert "y c 0.6666667" in text_lines(tmp_path / "lex.f2e")
    assert "z NULL 1.0000000" in text_lines(tmp_path / "lex.f2e")
    assert "b NULL 1.0000000" in text_lines(tmp_path / "lex.e2f")


def test_most_frequent_alignment_ties_as_moses():
    # "a b ||| x y" once with 0-0 1-1 (A) and once with 0-0 0-1 1-1 (B). Moses keeps the
    # greater alignment on ties: target-to-source A > B ({1} > {0,1} at y) for the direct
    # table (lex(e|f), printed alignment); source-to-target B > A ({0,1} > {0} at a) for the
    # inverse table (lex(f|e)).
    table = train_phrase_table(*corpus(["a b", "a b"], ["x y", "x y"],
                                       [[(0, 0), (1, 1)], [(0, 0), (0, 1), (1, 1)]]))
    row = rows_by_pair(table)[("a b", "x y")]
    assert table.alignment(row).tolist() == [[0, 0], [1, 1]]
    # w(x|a)=2/3 w(y|a)=1/3 w(y|b)=1; w(a|x)=1 w(a|y)=1/3 w(b|y)=2/3 (7 decimals)
    assert table.scores[row, 3] == 0.6666667 * 1.0
    assert table.scores[row, 1] == (1.0 + 0.3333333) / 2 * 0.6666667
    assert table.counts[row].tolist() == [2, 2, 2]


def test_max_length_limits_both_sides_and_the_unaligned_extension():
    src, tgt, links, sv, tv = corpus(["a b c"], ["x y"], [[(0, 0), (2, 1)]])
    assert set(rows_by_pair(train_phrase_table(src, tgt, links, sv, tv, max_length=2))) == {
        ("a", "x"), ("a b", "x"), ("c", "y"), ("b c", "y")}
    assert set(rows_by_pair(train_phrase_table(src, tgt, links, sv, tv, max_length=1))) == {
        ("a", "x"), ("c", "y")}


def test_sentence_boundaries_are_aligned_corners():
    # a single link in a one-word pair is monotone both ways (corners (-1,-1) and (I,J))
    pairs = extract_phrase_pairs(*corpus(["a"], ["x"], [[(0, 0)]]))
    assert pairs.orientation_counts.tolist() == [[1, 0, 0, 1, 0, 0]]


def test_empty_and_unaligned_sentences_give_no_pairs(tmp_path):
    src, tgt, links, sv, tv = corpus(["a", "", "b"], ["x", "y", ""], [[], [], []])
    table = train_phrase_table(src, tgt, links, sv, tv)
    assert len(table) == 0 and table.n_sources == 0
    write_moses_phrase_table(table, tmp_path / "pt")
    assert text_lines(tmp_path / "pt") == []
    table.save(tmp_path / "t.npz")
    assert len(PhraseTable.load(tmp_path / "t.npz")) == 0


# ---- (b) slow obvious reference -----------------------------------------------------------

NULL = None


def round7(value: float) -> float:
    return float(f"{value:.7f}")


def reference(src_sents, tgt_sents, aligns, max_length, sigma, with_counts):
    """Moses steps 4-7 by brute force: every span pair, consistency by checking every link."""
    cfe, cf, ce = Counter(), Counter(), Counter()
    for f, e, a in zip(src_sents, tgt_sents, aligns):
        for i, j in a:
            cfe[f[i], e[j]] += 1
            cf[f[i]] += 1
            ce[e[j]] += 1
        for j, word in enumerate(e):
            if all(jj != j for _, jj in a):
                cfe[NULL, word] += 1
                cf[NULL] += 1
                ce[word] += 1
        for i, word in enumerate(f):
            if all(ii != i for ii, _ in a):
                cfe[word, NULL] += 1
                cf[word] += 1
                ce[NULL] += 1
    w_ef = {k: round7(v / cf[k[0]]) for k, v in cfe.items()}
    w_fe = {k: round7(v / ce[k[1]]) for k, v in cfe.items()}

    def orientation(left_top, right_top):
        return 0 if left_top and not right_top else 1 if right_top and not left_top else 2

    occurrences = []
    for f, e, a in zip(src_sents, tgt_sents, aligns):
        n_f, n_e = len(f), len(e)

        def aligned(i, j):
            return (i, j) in ((-1, -1), (n_f, n_e)) or (i, j) in a

        for fs in range(n_f):
            for fe in range(fs, min(n_f, fs + max_length)):
                for es in range(n_e):
                    for ee in range(es, min(n_e, es + max_length)):
                        inside = [(i, j) for i, j in a if fs <= i <= fe and es <= j <= ee]
                        if not inside or any((fs <= i <= fe) != (es <= j <= ee) for i, j in a):
                            continue
                        occurrences.append((
                            tuple(f[fs:fe + 1]), tuple(e[es:ee + 1]),
                            frozenset((i - fs, j - es) for i, j in inside),
                            orientation(aligned(fs - 1, es - 1), aligned(fe + 1, es - 1)),
                            orientation(aligned(fe + 1, ee + 1), aligned(fs - 1, ee + 1))))
    pair_count = Counter((f, e) for f, e, *_ in occurrences)
    src_count = Counter(f for f, *_ in occurrences)
    tgt_count = Counter(e for _, e, *_ in occurrences)
    alignments = defaultdict(Counter)
    orient = defaultdict(lambda: [0] * 6)
    global_orient = [0] * 6
    for f, e, al, back, fwd in occurrences:
        alignments[f, e][al] += 1
        orient[f, e][back] += 1
        orient[f, e][3 + fwd] += 1
        global_orient[back] += 1
        global_orient[3 + fwd] += 1

    def t2s(al, n_e):
        return tuple(tuple(sorted(i for i, j in al if j == jj)) for jj in range(n_e))

    def s2t(al, n_f):
        return tuple(tuple(sorted(j for i, j in al if i == ii)) for ii in range(n_f))

    result = {}
    for (f, e), count in pair_count.items():
        best_t2s = max(alignments[f, e].items(), key=lambda kv: (kv[1], t2s(kv[0], len(e))))[0]
        best_s2t = max(alignments[f, e].items(), key=lambda kv: (kv[1], s2t(kv[0], len(f))))[0]
        lex_ef = 1.0
        for j, word in enumerate(e):
            linked = sorted(i for i, jj in best_t2s if jj == j)
            lex_ef *= (sum(w_ef[f[i], word] for i in linked) / len(linked) if linked
                       else w_ef[NULL, word])
        lex_fe = 1.0
        for i, word in enumerate(f):
            linked = sorted(j for ii, j in best_s2t if ii == i)
            lex_fe *= (sum(w_fe[word, e[j]] for j in linked) / len(linked) if linked
                       else w_fe[word, NULL])
        reordering = []
        for first in (0, 3):
            c = orient[f, e][first:first + 3]
            if with_counts:
                total = sum(global_orient[first:first + 3])
                prior = [sigma * (global_orient[first + o] + 0.1) / total for o in range(3)]
            else:
                prior = [sigma] * 3
            smoothed = [c[o] + prior[o] for o in range(3)]
            norm = smoothed[0] + smoothed[1] + smoothed[2]
            reordering += [v / norm for v in smoothed]
        result[" ".join(f), " ".join(e)] = dict(
            scores=[count / tgt_count[e], lex_fe, count / src_count[f], lex_ef],
            counts=[tgt_count[e], src_count[f], count],
            alignment=sorted(best_t2s, key=lambda ij: (ij[1], ij[0])),
            orientations=orient[f, e], reordering=reordering)
    return result, cfe


SRC_WORDS = ["a", "a,", "ä", "~", "b"]      # byte order: a < a, < b < ~ < |||-end < ä
TGT_WORDS = ["x", "x!", "|", "||||", "y"]


@st.composite
def random_corpora(draw):
    """Up to 4 sentence pairs drawn from at most 3 distinct ones, each with its own random
    alignment, so that phrase pairs recur with different alignments (ties included)."""
    distinct = []
    for _ in range(draw(st.integers(1, 3))):
        n_f, n_e = draw(st.integers(0, 6)), draw(st.integers(0, 6))
        distinct.append((draw(st.lists(st.sampled_from(SRC_WORDS), min_size=n_f, max_size=n_f)),
                         draw(st.lists(st.sampled_from(TGT_WORDS), min_size=n_e, max_size=n_e))))
    src_sents, tgt_sents, aligns = [], [], []
    for f, e in draw(st.lists(st.sampled_from(distinct), min_size=1, max_size=4)):
        points = st.tuples(st.integers(0, max(len(f) - 1, 0)), st.integers(0, max(len(e) - 1, 0)))
        src_sents.append(f)
        tgt_sents.append(e)
        aligns.append(draw(st.sets(points, max_size=len(f) * len(e))) if f and e else set())
    return src_sents, tgt_sents, aligns


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_corpora(), st.integers(1, 7), st.sampled_from([0.5, 0.0, 1.25]), st.booleans())
def test_fast_extraction_equals_reference(data, max_length, sigma, with_counts):
    src_sents, tgt_sents, aligns = data
    expected, lex_counts = reference(src_sents, tgt_sents, aligns, max_length, sigma, with_counts)
    sv, tv = Vocabulary(SRC_WORDS), Vocabulary(TGT_WORDS)
    src = TokenArray.from_sentences(src_sents, sv, grow=False)
    tgt = TokenArray.from_sentences(tgt_sents, tv, grow=False)
    pairs = extract_phrase_pairs(src, tgt, Alignment.from_lists(aligns), sv, tv,
                                 max_length=max_length, reordering_smoothing=sigma,
                                 smooth_with_counts=with_counts)
    table = pairs.table
    rows = rows_by_pair(table)
    assert set(rows) == set(expected) and len(rows) == len(table) == pairs.n_pairs
    for pair, want in expected.items():
        r = rows[pair]
        np.testing.assert_allclose(table.scores[r], want["scores"], rtol=0, atol=1e-12)
        assert table.counts[r].tolist() == want["counts"]
        assert [tuple(ij) for ij in table.alignment(r).tolist()] == want["alignment"]
        assert pairs.orientation_counts[r].tolist() == want["orientations"]
        np.testing.assert_allclose(table.reordering[r], want["reordering"], rtol=0, atol=1e-12)
    # rows in the order LC_ALL=C sort gives Moses' lines
    keys = [f"{s} ||| {t} |||".encode() for s, t in (table.phrase_strings(r) for r in range(len(table)))]
    assert keys == sorted(keys)
    # lexical counts
    f_ids, e_ids = pairs.lexical.pairs()
    src_word = SRC_WORDS + [NULL]
    tgt_word = TGT_WORDS + [NULL]
    assert Counter({(src_word[f], tgt_word[e]): c for f, e, c in
                    zip(f_ids.tolist(), e_ids.tolist(), pairs.lexical.counts.tolist())}) == lex_counts
    # the table limit keeps the top rows by p(e|f), ties to the earlier target in byte order
    limited = train_phrase_table(src, tgt, Alignment.from_lists(aligns), sv, tv,
                                 max_length=max_length, table_limit=2)
    by_source = defaultdict(list)
    for r in range(len(table)):
        s, t = table.phrase_strings(r)
        by_source[s].append((-table.scores[r, 2], f"{t} |||".encode(), t))
    kept = {(s, t) for s, options in by_source.items() for _, _, t in sorted(options)[:2]}
    assert set(rows_by_pair(limited)) == kept


# ---- phrase ids: hashing and Moses' byte order --------------------------------------------

def test_hash_collisions_fall_back_to_exact_ids():
    words = np.array([1, 2, 3, 1, 2, 1, 2, 3, 4], dtype=np.int32)
    offsets = np.array([0, 9], dtype=np.int64)
    start = np.array([0, 3, 5, 0, 8, 6], dtype=np.int64)
    length = np.array([3, 2, 3, 2, 1, 2], dtype=np.int64)
    row = np.zeros(6, dtype=np.int64)
    inverse, rep = unique_spans_hashed(words, offsets, row, start, length,
                                       np.zeros(6, dtype=np.uint64))  # everything collides
    spans = [tuple(words[s:s + n]) for s, n in zip(start, length)]
    assert len(rep) == len(set(spans))
    for k in range(6):
        assert spans[k] == spans[rep[inverse[k]]]
        assert all((spans[k] == spans[m]) == (inverse[k] == inverse[m]) for m in range(6))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "a,", "~", "|", "||", "||||", "ä", "z", "!", "a|"]),
                         min_size=1, max_size=4), min_size=1, max_size=12, unique_by=tuple))
def test_byte_order_ids_sort_like_lc_all_c(phrases):
    vocab = Vocabulary([w for p in phrases for w in p])
    flat = np.concatenate([vocab.encode(p, grow=False) for p in phrases]).astype(np.int32)
    lengths = np.array([len(p) for p in phrases], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n = len(phrases)
    ranks, end = byte_order_ranks(vocab.words)
    ids = byte_order_ids(flat, offsets, np.arange(n), np.zeros(n, dtype=np.int64), lengths,
                         np.arange(n), ranks, end)
    by_id = [phrases[k] for k in np.argsort(ids)]
    assert by_id == sorted(phrases, key=lambda p: (" ".join(p) + " ||| ...").encode())



@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(-3, 50), max_size=5), max_size=10), st.data())
def test_take_ranges_equals_slicing(rows, data):
    """take_ranges against slicing row by row, in any order, with repeats and empty rows."""
    from minismt.extract.phrase_table import take_ranges
    flat = np.array([x for row in rows for x in row], dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum([len(row) for row in rows])]).astype(np.int64)
    order = np.array(data.draw(st.lists(st.integers(0, max(len(rows) - 1, 0)), max_size=15 if rows else 0)),
                     dtype=np.int64)
    taken, taken_offsets = take_ranges(flat, offsets, order)
    assert taken.tolist() == [x for k in order.tolist() for x in rows[k]]
    assert np.diff(taken_offsets).tolist() == [len(rows[k]) for k in order.tolist()]
    assert taken.dtype == flat.dtype

# ---- (c) Moses text formats ------------------------------------------------------------------

def trained_table(table_limit=20):
    src_lines = ["ein mann , der ein auto fährt .", "ein kleines kind .", "der mann schläft .",
                 "ein auto .", "zwei männer , ein auto ."]
    tgt_lines = ["a man driving a car .", "a small child .", "the man is sleeping .",
                 "a car .", "two men , a car ."]
    links = [[(0, 0), (1, 1), (4, 3), (5, 4), (6, 2), (7, 5)], [(0, 0), (1, 1), (2, 2), (3, 3)],
             [(0, 0), (1, 1), (2, 3), (2, 2), (3, 4)], [(0, 0), (1, 1), (2, 2)],
             [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]]
    return train_phrase_table(*corpus(src_lines, tgt_lines, links), table_limit=table_limit)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_moses_write_read_round_trip(tmp_path, suffix):
    table = trained_table()
    pt, ro = tmp_path / f"phrase-table{suffix}", tmp_path / f"reordering-table{suffix}"
    write_moses_phrase_table(table, pt)
    write_moses_reordering_table(table, ro)
    assert sorted(os.listdir(tmp_path)) == sorted([pt.name, ro.name])  # no temporary files left
    if suffix:
        assert pt.read_bytes()[:2] == b"\x1f\x8b"
    back = read_moses_tables(pt, ro)
    assert len(back) == len(table) and back.n_sources == table.n_sources
    for r in range(len(table)):
        assert back.phrase_strings(r) == table.phrase_strings(r)
        assert back.alignment(r).tolist() == table.alignment(r).tolist()
    np.testing.assert_allclose(back.scores, table.scores, rtol=5e-6)
    np.testing.assert_allclose(back.reordering, table.reordering, rtol=5e-6)
    assert np.array_equal(back.counts, table.counts)
    np.testing.assert_array_equal(np.diff(back.row_offsets), np.diff(table.row_offsets))
    # and the re-read table writes the same bytes
    write_moses_phrase_table(back, tmp_path / "again")
    assert text_lines(tmp_path / "again") == text_lines(pt)


def moses_fixture(name):
    return shared_path("fixtures", "moses", "m30k", name)


def test_moses_fixture_tables_read_and_rewrite_byte_for_byte(tmp_path):
    pt_path = moses_fixture("phrase-table.head2000.txt")
    ro_path = moses_fixture("reordering-table.wbe-msd-bidirectional-fe.head2000.txt")
    table = read_moses_tables(pt_path, ro_path)
    pt_lines, ro_lines = text_lines(pt_path), text_lines(ro_path)
    assert len(table) == len(pt_lines) == len(ro_lines) == 2000
    for r, (line, ro_line) in enumerate(zip(pt_lines, ro_lines)):
        src, tgt, scores, align, counts, *_ = line.split(" ||| ")
        assert table.phrase_strings(r) == (src, tgt)  # the file's order is Moses' order
        assert table.scores[r].tolist() == [float(v) for v in scores.split()]
        assert table.counts[r].tolist() == [float(v) for v in counts.split()]
        assert table.alignment(r).tolist() == [[int(i), int(j)] for i, j in
                                               (p.split("-") for p in align.split())]
        assert table.reordering[r].tolist() == [float(v) for v in ro_line.split(" ||| ")[2].split()]
    write_moses_phrase_table(table, tmp_path / "pt")
    write_moses_reordering_table(table, tmp_path / "ro")
    assert (tmp_path / "pt").read_bytes() == pt_path.read_bytes()
    assert (tmp_path / "ro").read_bytes() == ro_path.read_bytes()


def test_moses_fixture_matches_the_formulas_implemented():
    table = read_moses_tables(moses_fixture("phrase-table.head2000.txt"),
                                   moses_fixture("reordering-table.wbe-msd-bidirectional-fe.head2000.txt"))
    c_e, c_f, c_fe = table.counts.T
    # counts are c(e) c(f) c(f,e): p(f|e) = c(f,e)/c(e), p(e|f) = c(f,e)/c(f)
    np.testing.assert_allclose(table.scores[:, 0], c_fe / c_e, rtol=1e-5)
    np.testing.assert_allclose(table.scores[:, 2], c_fe / c_f, rtol=1e-5)
    # constant smoothing 0.5: p(o) (c(f,e) + 1.5) - 0.5 are counts summing to c(f,e)
    for first in (0, 3):
        implied = table.reordering[:, first:first + 3] * (c_fe + 1.5)[:, None] - 0.5
        np.testing.assert_allclose(implied, np.rint(implied), atol=2e-4)
        np.testing.assert_allclose(np.rint(implied).sum(axis=1), c_fe)
    # lexical probabilities carry 7 decimals: lex(e|f)("! ||| wife !") / lex(e|f)("! ||| !")
    # is w(wife|NULL) = 0.0000546 (the exact ratio would have more digits)
    rows = rows_by_pair(table)
    ratio = table.scores[rows[("!", "wife !")], 3] / table.scores[rows[("!", "!")], 3]
    assert abs(ratio - 0.0000546) < 1e-10


@pytest.mark.parametrize("line, expected", [
    ("a ||| b", "not a phrase table line"),
    ("a ||| b ||| 1 1 1", "3 scores"),
    ("a ||| b ||| 1 x 1 1", "scores"),
    ("a ||| b ||| 1 nan 1 1", "finite"),
    (" ||| b ||| 1 1 1 1", "empty phrase"),
    ("a ||| b ||| 1 1 1 1 ||| 0-1", "alignment point '0-1'"),
    ("a ||| b ||| 1 1 1 1 ||| 0-0 ||| 1 1", "2 counts"),
])
def test_moses_reader_errors_name_the_line(tmp_path, line, expected):
    path = tmp_path / "pt"
    path.write_text("x ||| y ||| 1 1 1 1 ||| 0-0 ||| 1 1 1 ||| |||\n" + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=expected) as err:
        read_moses_tables(path)
    assert err.value.line == 2 and err.value.path == str(path)


def test_moses_reader_duplicates_and_missing_reordering(tmp_path):
    path = tmp_path / "pt"
    path.write_text("x ||| y ||| 1 1 1 1\nz ||| y ||| 1 1 1 1\nx ||| y ||| 1 1 1 1\n", encoding="utf-8")
    with pytest.raises(InputError, match="listed again") as err:
        read_moses_tables(path)
    assert err.value.line == 3
    path.write_text("x ||| y ||| 1 1 1 1\nz ||| y ||| 1 1 1 1\n", encoding="utf-8")
    ro = tmp_path / "ro"
    ro.write_text("z ||| y ||| 0.6 0.2 0.2 0.6 0.2 0.2\nq ||| y ||| 0.6 0.2 0.2 0.6 0.2 0.2\n",
                  encoding="utf-8")
    with pytest.raises(InputError, match="no reordering probabilities for 'x ||| y'"):
        read_moses_tables(path, ro)
    ro.write_text("z ||| y ||| 0.6 0.2 0.2\n", encoding="utf-8")
    with pytest.raises(InputError, match="3 probabilities") as err:
        read_moses_tables(path, ro)
    assert err.value.line == 1
    # an unsorted table without counts or alignments is sorted; extra reordering lines ignored
    ro.write_text("z ||| y ||| 0.6 0.2 0.2 0.6 0.2 0.2\nq ||| y ||| 0.6 0.2 0.2 0.6 0.2 0.2\n"
                  "x ||| y ||| 0.2 0.2 0.6 0.6 0.2 0.2\n", encoding="utf-8")
    table = read_moses_tables(path, ro)
    assert [table.phrase_strings(r) for r in range(2)] == [("x", "y"), ("z", "y")]
    assert np.isnan(table.counts).all() and table.reordering[0].tolist() == [0.2, 0.2, 0.6, 0.6, 0.2, 0.2]


# ---- (d) binary form and lookup -----------------------------------------------------------------

@pytest.mark.parametrize("name", ["table.npz", "table"])
def test_binary_save_load_round_trip_and_lookup(tmp_path, name):
    """The one-file form and the folder form (memory-mapped, with its saved index) read back the same table."""
    table = trained_table(table_limit=None)
    table.save(tmp_path / name)
    back = PhraseTable.load(tmp_path / name)
    assert isinstance(back.scores.base, np.memmap) == (name == "table")
    for built, read in zip(table.index, back.index):
        assert np.array_equal(built, read)
    assert back.src_vocab == table.src_vocab and back.tgt_vocab == table.tgt_vocab
    for name in ("src_words", "src_offsets", "row_offsets", "tgt_words", "tgt_offsets", "scores",
                 "counts", "align_links", "align_offsets", "reordering"):
        assert np.array_equal(getattr(back, name), getattr(table, name)), name
    for u in range(back.n_sources):
        np.testing.assert_array_equal(back.lookup(back.source_ids(u)),
                                      np.arange(back.row_offsets[u], back.row_offsets[u + 1]))
    ids = table.src_vocab.encode(["ein", "auto"], grow=False)
    assert {back.phrase_strings(r)[1] for r in back.lookup(ids)} == {"a car"}
    assert back.lookup(table.src_vocab.encode(["auto", "ein"], grow=False)).shape == (0,)
    assert back.lookup([]).shape == (0,)
    assert back.lookup([-1]).shape == (0,)  # an unknown word (Vocabulary.encode(grow=False))


def test_lookup_on_the_moses_fixture(tmp_path):
    table = read_moses_tables(moses_fixture("phrase-table.head2000.txt"))
    assert table.reordering is None
    table.save(tmp_path / "t.npz")
    table = PhraseTable.load(tmp_path / "t.npz")
    rows = table.lookup(table.src_vocab.encode("! trägt ,".split(), grow=False))
    assert [table.phrase_strings(r)[1] for r in rows] == ["! stands", "!"]
    with pytest.raises(ValueError, match="no reordering"):
        write_moses_reordering_table(table, tmp_path / "ro")


def test_load_rejects_other_files(tmp_path):
    table = trained_table(table_limit=None)
    (tmp_path / "table.partial").mkdir()             # a killed save's leftover goes; the folder appears whole
    table.save(tmp_path / "table")
    assert not (tmp_path / "table.partial").exists()
    np.save(tmp_path / "table" / "scores.npy", np.zeros((3, 4)))
    with pytest.raises(InputError, match="wrong size: scores"):
        PhraseTable.load(tmp_path / "table")
    (tmp_path / "table" / "table.json").write_text("{}")
    with pytest.raises(InputError, match="not a phrase table"):
        PhraseTable.load(tmp_path / "table")
    np.savez(tmp_path / "other.npz", a=np.zeros(3))
    with pytest.raises(InputError, match="not a phrase table"):
        PhraseTable.load(tmp_path / "other.npz")
    (tmp_path / "junk.npz").write_bytes(b"junk")
    with pytest.raises(InputError, match="not a phrase table"):
        PhraseTable.load(tmp_path / "junk.npz")


# ---- (e) table limit ------------------------------------------------------------------------------

def test_table_limit_keeps_top_p_e_given_f_ties_in_byte_order():
    # "s" translates as t1 three times, as u and as v twice each, as w once
    tgt_lines = ["t1", "t1", "t1", "v", "v", "u", "u", "w"]
    src, tgt, links, sv, tv = corpus(["s"] * 8, tgt_lines, [[(0, 0)]] * 8)
    full = train_phrase_table(src, tgt, links, sv, tv, table_limit=None)
    assert [full.phrase_strings(r)[1] for r in range(len(full))] == ["t1", "u", "v", "w"]
    assert full.scores[:, 2].tolist() == [3 / 8, 2 / 8, 2 / 8, 1 / 8]
    for limit, kept in ((1, ["t1"]), (2, ["t1", "u"]), (3, ["t1", "u", "v"]), (0, ["t1", "u", "v", "w"])):
        table = train_phrase_table(src, tgt, links, sv, tv, table_limit=limit)
        assert [table.phrase_strings(r)[1] for r in range(len(table))] == kept
        assert table.scores[:, 2].tolist() == full.scores[:len(kept), 2].tolist()  # from all pairs
    assert len(full.limit(2)) == 2


# ---- (f) bad input ----------------------------------------------------------------------------------

def test_bad_input_is_input_error():
    src, tgt, links, sv, tv = corpus(["a b", "c"], ["x", "y z"], [[(0, 0)], [(0, 1)]])
    with pytest.raises(InputError, match="2 source sentences, 1 target sentences"):
        train_phrase_table(src, TokenArray(tgt.ids[:1], tgt.offsets[:2]), links, sv, tv)
    with pytest.raises(InputError, match="alignment lines"):
        train_phrase_table(src, tgt, Alignment.from_lists([[(0, 0)]]), sv, tv)
    with pytest.raises(InputError, match="alignment point 1-0 is outside sentence pair 2 "
                                         r"\(1 source words, 2 target words\)"):
        train_phrase_table(src, tgt, Alignment.from_lists([[(0, 0)], [(1, 0)]]), sv, tv)
    with pytest.raises(InputError, match="outside sentence pair 1"):
        train_phrase_table(src, tgt, Alignment.from_lists([[(0, 1)], []]), sv, tv)
    with pytest.raises(InputError, match="outside sentence pair 2"):
        train_phrase_table(src, tgt, Alignment(np.array([[0, 0], [-1, 0]], dtype=np.int32),
                                               np.array([0, 1, 2])), sv, tv)
    with pytest.raises(InputError, match="word id 2 in target sentence 2"):
        train_phrase_table(src, tgt, links, sv, Vocabulary(["x", "y"]))
    with pytest.raises(InputError, match="inconsistent source sentence offsets"):
        train_phrase_table(TokenArray(src.ids, np.array([0, 2, 5])), tgt, links, sv, tv)
    for kwargs in (dict(max_length=0), dict(max_length=9), dict(max_length=2.0),
                   dict(table_limit=-1), dict(reordering_smoothing=-0.5),
                   dict(reordering_smoothing=float("nan"))):
        with pytest.raises(InputError):
            train_phrase_table(src, tgt, links, sv, tv, **kwargs)
    for word in ("|||", "a b", "\x01"):
        bad = Vocabulary(["a", word])
        with pytest.raises(InputError, match="cannot be written in a Moses table"):
            train_phrase_table(TokenArray(np.array([1], dtype=np.int32), np.array([0, 1])),
                               TokenArray(np.array([0], dtype=np.int32), np.array([0, 1])),
                               Alignment.from_lists([[(0, 0)]]), bad, Vocabulary(["x"]))


def test_duplicate_links_count_once():
    src, tgt, _, sv, tv = corpus(["a b"], ["x y"], [[]])
    twice = Alignment(np.array([[1, 1], [0, 0], [1, 1]], dtype=np.int32), np.array([0, 3]))
    once = Alignment.from_lists([[(0, 0), (1, 1)]])
    a = train_phrase_table(src, tgt, twice, sv, tv)
    b = train_phrase_table(src, tgt, once, sv, tv)
    assert np.array_equal(a.scores, b.scores) and np.array_equal(a.align_links, b.align_links)
    assert math.isclose(a.scores[0, 1], 1.0)
