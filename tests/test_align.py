"""Word alignment against slow obvious references: IBM Model 1 and HMM EM (dictionary tables,
plain forward-backward, sums over all alignments), Viterbi, grow-diag-final-and, AER;
behaviour on real data (Multi30k, fast_align's output) and on long sentences."""

from __future__ import annotations

import importlib.util
import itertools
import math
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from conftest import shared_path
from minismt.align import (NULL, HMMModel, PairIndex, TranslationTable, align_corpus,
                           align_direction, alignment_error_rate, grow_diag_final_and,
                           intersection, swap, symmetrize, train_hmm, train_ibm1, union,
                           viterbi_hmm, viterbi_ibm1)
from minismt.align import _kernels
from minismt.corpus import Alignment, TokenArray, Tokenizer, Vocabulary
from minismt.errors import InputError
from minismt.io import read_lines

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "align_speed.py"


def tokens(sentences) -> TokenArray:
    """A TokenArray from lists of integer ids."""
    ids = np.array([w for s in sentences for w in s], dtype=np.int32)
    offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(s) for s in sentences])
    return TokenArray(ids, offsets)


# ---------------------------------------------------------------- references: the model definitions

def clip(d, max_jump):
    return max(-max_jump, min(max_jump, d))


def ref_transition(prev, state, n_i, c, p0, max_jump, smoothing):
    """p(state | prev, I): states 0..I-1 are words, i + I is the empty twin of i (Och & Ney 2003);
    jumps interpolated with the uniform 1/I by weight smoothing."""
    ip = prev if prev < n_i else prev - n_i
    if state >= n_i:
        return p0 if state - n_i == ip else 0.0
    z = sum(c[clip(k - ip, max_jump)] for k in range(n_i))
    return (1 - p0) * ((1 - smoothing) * c[clip(state - ip, max_jump)] / z + smoothing / n_i)


def ref_initial(state, n_i, s, p0, max_jump, smoothing):
    if state >= n_i:
        return p0 / n_i
    z = sum(s[min(k, max_jump)] for k in range(n_i))
    return (1 - p0) * ((1 - smoothing) * s[min(state, max_jump)] / z + smoothing / n_i)


def ref_word(e, state):
    return e[state] if state < len(e) else None


def ref_normalize(t, counts):
    """M-step for t: counts over each e's row; rows without counts keep their values."""
    totals = defaultdict(float)
    for (e, _), v in counts.items():
        totals[e] += v
    return {(e, f): counts.get((e, f), 0.0) / totals[e] if totals[e] > 0 else p
            for (e, f), p in t.items()}


def ref_normalize_vector(counts, keys, old):
    total = sum(counts.get(k, 0.0) for k in keys)
    return {k: counts.get(k, 0.0) / total for k in keys} if total > 0 else old


# ---------------------------------------------------------------- reference IBM Model 1

def ref_ibm1(pairs, n_f, iterations):
    """Model 1 EM with a dictionary t-table: returns (t, log-likelihood of every iteration)."""
    t = {}
    for f, e in pairs:
        if f and e:
            for fw in f:
                for ew in list(e) + [None]:
                    t[(ew, fw)] = 1.0 / n_f
    lls = []
    for _ in range(iterations):
        counts = defaultdict(float)
        ll = 0.0
        for f, e in pairs:
            if not f or not e:
                continue
            es = list(e) + [None]
            for fw in f:
                total = sum(t[(ew, fw)] for ew in es)
                ll += math.log(total / len(es))
                for ew in es:
                    counts[(ew, fw)] += t[(ew, fw)] / total
        t = ref_normalize(t, counts)
        lls.append(ll)
    return t, lls


# ---------------------------------------------------------------- reference HMM: plain forward-backward

def ref_hmm_estep(pairs, t, c, s, p0, max_jump, smoothing):
    """Unscaled forward-backward over all 2I states; returns (log-lik, t, jump, start counts)."""
    tc, jc, ic = defaultdict(float), defaultdict(float), defaultdict(float)
    ll = 0.0
    for f, e in pairs:
        if not f or not e:
            continue
        n_i, n_j, n_s = len(e), len(f), 2 * len(e)

        def emit(j, state):
            return t[(ref_word(e, state), f[j])]

        def trans(prev, state):
            return ref_transition(prev, state, n_i, c, p0, max_jump, smoothing)

        alpha = [[0.0] * n_s for _ in range(n_j)]
        for q in range(n_s):
            alpha[0][q] = ref_initial(q, n_i, s, p0, max_jump, smoothing) * emit(0, q)
        for j in range(1, n_j):
            for q in range(n_s):
                alpha[j][q] = emit(j, q) * sum(alpha[j - 1][p] * trans(p, q) for p in range(n_s))
        beta = [[1.0] * n_s for _ in range(n_j)]
        for j in range(n_j - 2, -1, -1):
            for p in range(n_s):
                beta[j][p] = sum(trans(p, q) * emit(j + 1, q) * beta[j + 1][q] for q in range(n_s))
        z = sum(alpha[n_j - 1])
        ll += math.log(z)
        for j in range(n_j):
            for q in range(n_s):
                tc[(ref_word(e, q), f[j])] += alpha[j][q] * beta[j][q] / z
        for q in range(n_i):
            ic[min(q, max_jump)] += alpha[0][q] * beta[0][q] / z
        for j in range(1, n_j):
            for p in range(n_s):
                for q in range(n_i):
                    ip = p if p < n_i else p - n_i
                    jc[clip(q - ip, max_jump)] += alpha[j - 1][p] * trans(p, q) * emit(j, q) * beta[j][q] / z
    return ll, tc, jc, ic


def ref_hmm_enumerated_estep(pairs, t, c, s, p0, max_jump, smoothing):
    """The same E-step as an explicit sum over every state sequence (tiny sentences only)."""
    tc, jc, ic = defaultdict(float), defaultdict(float), defaultdict(float)
    ll = 0.0
    for f, e in pairs:
        if not f or not e:
            continue
        n_i, n_j = len(e), len(f)
        paths = []
        for seq in itertools.product(range(2 * n_i), repeat=n_j):
            p = ref_initial(seq[0], n_i, s, p0, max_jump, smoothing) * t[(ref_word(e, seq[0]), f[0])]
            for j in range(1, n_j):
                p *= (ref_transition(seq[j - 1], seq[j], n_i, c, p0, max_jump, smoothing)
                      * t[(ref_word(e, seq[j]), f[j])])
            paths.append((seq, p))
        z = sum(p for _, p in paths)
        ll += math.log(z)
        for seq, p in paths:
            w = p / z
            for j in range(n_j):
                tc[(ref_word(e, seq[j]), f[j])] += w
            if seq[0] < n_i:
                ic[min(seq[0], max_jump)] += w
            for j in range(1, n_j):
                if seq[j] < n_i:
                    prev = seq[j - 1] if seq[j - 1] < n_i else seq[j - 1] - n_i
                    jc[clip(seq[j] - prev, max_jump)] += w
    return ll, tc, jc, ic


def ref_hmm(pairs, t, iterations, p0, max_jump, smoothing, estep=ref_hmm_estep):
    """HMM EM from t and uniform jump/start tables: returns (t, c, s, log-likelihoods)."""
    widths, starts = range(-max_jump, max_jump + 1), range(max_jump + 1)
    c = {d: 1.0 for d in widths}
    s = {i: 1.0 for i in starts}
    lls = []
    for _ in range(iterations):
        ll, tc, jc, ic = estep(pairs, t, c, s, p0, max_jump, smoothing)
        t = ref_normalize(t, tc)
        c = ref_normalize_vector(jc, widths, c)
        s = ref_normalize_vector(ic, starts, s)
        lls.append(ll)
    return t, c, s, lls


# ---------------------------------------------------------------- comparison helpers

def close(a, b, tol=1e-9):
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def assert_table_equal(table, reference):
    got = table.to_dict()
    assert set(got) == set(reference)
    for key, value in reference.items():
        assert close(got[key], value), (key, got[key], value)


def assert_vector_equal(array, reference, offset):
    total = sum(reference.values())
    for k, value in reference.items():
        assert close(array[k + offset], value / total), (k, array[k + offset], value / total)


def split(corpus):
    f = [list(p[0]) for p in corpus]
    e = [list(p[1]) for p in corpus]
    n_f = max((w for s in f for w in s), default=-1) + 1
    return f, e, n_f


words = st.lists(st.integers(0, 5), max_size=5)
corpus_st = st.lists(st.tuples(words, words), min_size=1, max_size=6)
tiny_words = st.lists(st.integers(0, 3), max_size=3)
tiny_corpus_st = st.lists(st.tuples(tiny_words, tiny_words), min_size=1, max_size=3)


# ---------------------------------------------------------------- (a) kernels == references

@settings(max_examples=60, deadline=None)
@given(corpus_st)
def test_pair_index_lists_every_cooccurring_pair(corpus):
    f, e, _ = split(corpus)
    index = PairIndex(tokens(f), tokens(e))
    expected = []
    for fs, es in zip(f, e):
        if fs and es:
            expected.extend((ew if ew is not None else index.n_e) * index.n_f + fw
                            for fw in fs for ew in es + [None])
    keys, inverse = np.unique(np.array(expected, dtype=np.int64), return_inverse=True)
    assert np.array_equal(index.keys, keys)
    assert np.array_equal(index.pair_ids, inverse.reshape(-1))
    rows = np.searchsorted(keys, np.arange(index.n_e + 2) * max(index.n_f, 1))
    assert np.array_equal(index.row_offsets, rows)


@settings(max_examples=100, deadline=None)
@given(corpus_st, st.integers(1, 5))
def test_ibm1_matches_reference(corpus, iterations):
    f, e, n_f = split(corpus)
    model = train_ibm1(PairIndex(tokens(f), tokens(e)), iterations)
    t_ref, lls_ref = ref_ibm1(list(zip(f, e)), n_f, iterations)
    assert_table_equal(model.t, t_ref)
    assert all(close(a, b) for a, b in zip(model.log_likelihoods, lls_ref))
    assert len(model.log_likelihoods) == iterations


@settings(max_examples=100, deadline=None)
@given(corpus_st, st.integers(0, 3), st.integers(1, 4), st.sampled_from([0.0, 0.2, 0.5]),
       st.sampled_from([1, 2, 100]), st.sampled_from([0.0, 0.2, 1.0]))
def test_hmm_matches_forward_backward_reference(corpus, ibm1_iterations, iterations, p0, max_jump,
                                                 smoothing):
    f, e, n_f = split(corpus)
    index = PairIndex(tokens(f), tokens(e))
    ibm1 = train_ibm1(index, ibm1_iterations)
    model = train_hmm(index, ibm1.t, iterations, p0=p0, max_jump=max_jump, smoothing=smoothing)
    pairs = list(zip(f, e))
    t0, _ = ref_ibm1(pairs, n_f, ibm1_iterations)
    t_ref, c_ref, s_ref, lls_ref = ref_hmm(pairs, t0, iterations, p0, max_jump, smoothing)
    assert_table_equal(model.t, t_ref)
    assert_vector_equal(model.jump, c_ref, max_jump)
    assert_vector_equal(model.initial, s_ref, 0)
    assert all(close(a, b) for a, b in zip(model.log_likelihoods, lls_ref))


@settings(max_examples=60, deadline=None)
@given(tiny_corpus_st, st.integers(1, 2), st.sampled_from([0.2, 0.5]), st.sampled_from([1, 100]),
       st.sampled_from([0.0, 0.3]))
def test_hmm_matches_sum_over_all_alignments(corpus, iterations, p0, max_jump, smoothing):
    f, e, n_f = split(corpus)
    index = PairIndex(tokens(f), tokens(e))
    model = train_hmm(index, train_ibm1(index, 1).t, iterations, p0=p0, max_jump=max_jump,
                      smoothing=smoothing)
    pairs = list(zip(f, e))
    t0, _ = ref_ibm1(pairs, n_f, 1)
    t_ref, c_ref, s_ref, lls_ref = ref_hmm(pairs, t0, iterations, p0, max_jump, smoothing,
                                           estep=ref_hmm_enumerated_estep)
    assert_table_equal(model.t, t_ref)
    assert_vector_equal(model.jump, c_ref, max_jump)
    assert_vector_equal(model.initial, s_ref, 0)
    assert all(close(a, b) for a, b in zip(model.log_likelihoods, lls_ref))


@settings(max_examples=60, deadline=None)
@given(tiny_corpus_st, st.integers(1, 3))
def test_ibm1_likelihood_is_the_sum_over_all_alignments(corpus, iterations):
    f, e, _ = split(corpus)
    model = train_ibm1(PairIndex(tokens(f), tokens(e)), iterations + 1)
    t = train_ibm1(PairIndex(tokens(f), tokens(e)), iterations).t
    ll = 0.0
    for fs, es in zip(f, e):
        if fs and es:
            es = es + [None]
            ll += math.log(sum(math.prod(t.get(es[i], fw) / len(es) for i, fw in zip(a, fs))
                               for a in itertools.product(range(len(es)), repeat=len(fs))))
    assert close(model.log_likelihoods[-1], ll)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 3), max_size=4), st.lists(st.integers(0, 3), max_size=4)),
                min_size=1, max_size=3), st.sampled_from([0.0, 0.2]), st.sampled_from([0.0, 0.2]))
def test_hmm_viterbi_is_the_most_probable_state_sequence(corpus, p0, smoothing):
    f, e, _ = split(corpus)
    index = PairIndex(tokens(f), tokens(e))
    model = train_hmm(index, train_ibm1(index, 2).t, 2, p0=p0, max_jump=2, smoothing=smoothing)
    links = viterbi_hmm(index, model).to_lists()
    t = model.t.to_dict()
    c = {d: model.jump[d + 2] for d in range(-2, 3)}
    s = {i: model.initial[i] for i in range(3)}
    for (fs, es), sentence_links in zip(zip(f, e), links):
        if not fs or not es:
            assert sentence_links == []
            continue
        n_i = len(es)
        chosen = {j: i for i, j in sentence_links}
        assert len(chosen) == len(sentence_links)
        best = best_chosen = -math.inf
        for seq in itertools.product(range(2 * n_i), repeat=len(fs)):
            p = ref_initial(seq[0], n_i, s, p0, 2, smoothing) * t[(ref_word(es, seq[0]), fs[0])]
            for j in range(1, len(fs)):
                p *= (ref_transition(seq[j - 1], seq[j], n_i, c, p0, 2, smoothing)
                      * t[(ref_word(es, seq[j]), fs[j])])
            best = max(best, p)
            if all(chosen.get(j) == q if q < n_i else j not in chosen for j, q in enumerate(seq)):
                best_chosen = max(best_chosen, p)
        assert close(best_chosen, best, 1e-12)


@settings(max_examples=60, deadline=None)
@given(corpus_st, st.integers(0, 3))
def test_ibm1_viterbi_picks_the_most_probable_word(corpus, iterations):
    f, e, _ = split(corpus)
    index = PairIndex(tokens(f), tokens(e))
    model = train_ibm1(index, iterations)
    for (fs, es), sentence_links in zip(zip(f, e), viterbi_ibm1(index, model).to_lists()):
        chosen = {j: i for i, j in sentence_links}
        for j, fw in enumerate(fs):
            if not es:
                continue
            best = max(model.t.get(ew, fw) for ew in es + [None])
            got = model.t.get(es[chosen[j]], fw) if j in chosen else model.t.get(None, fw)
            assert got == best


def test_translation_table_lookups_and_hmm_distributions():
    f, e = [[0, 1], [1]], [[2, 0], [0]]
    index = PairIndex(tokens(f), tokens(e))
    model = train_hmm(index, train_ibm1(index, 3).t, 2, max_jump=3)
    table = model.t
    assert table.get(None, 1) == table.get(NULL, 1) == table.lookup([NULL], [1])[0] > 0
    assert table.get(1, 0) == 0.0 and table.get(7, 0) == 0.0 and table.get(0, 9) == 0.0
    rows = np.where(table.e == NULL, 3, table.e)
    assert np.allclose(np.bincount(rows, weights=table.prob)[np.unique(rows)], 1.0)
    for length in (1, 2, 5):
        full = model.transition_matrix(length)
        assert np.allclose(full.sum(axis=1), 1.0)
        c = {d: model.jump[d + 3] for d in range(-3, 4)}
        for p in range(2 * length):
            for q in range(2 * length):
                assert close(full[p, q], ref_transition(p, q, length, c, model.p0, 3, model.smoothing))
        assert close(model.initial_distribution(length).sum(), 1.0)


# ---------------------------------------------------------------- (b) EM never lowers the likelihood

def non_decreasing(values):
    return all(b >= a - 1e-9 * max(1.0, abs(a)) for a, b in zip(values, values[1:]))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 7), max_size=8), st.lists(st.integers(0, 7), max_size=8)),
                min_size=1, max_size=12))
def test_ibm1_log_likelihood_never_decreases(corpus):
    f, e, _ = split(corpus)
    assert non_decreasing(train_ibm1(PairIndex(tokens(f), tokens(e)), 8).log_likelihoods)


@settings(max_examples=60, deadline=None)
@given(corpus_st, st.lists(st.floats(0.01, 1.0), min_size=5, max_size=5),
       st.lists(st.floats(0.01, 1.0), min_size=3, max_size=3), st.sampled_from([0.0, 0.2]),
       st.sampled_from([0.0, 0.2]))
def test_hmm_em_for_t_under_fixed_jumps_never_decreases(corpus, jump, initial, p0, smoothing):
    """With the jump and start tables held fixed the HMM's EM is exact, so it is monotone."""
    f, e, _ = split(corpus)
    index = PairIndex(tokens(f), tokens(e))
    t = index.uniform_table()
    jump, initial = np.array(jump), np.array(initial)
    t_counts, jump_counts, initial_counts = np.empty_like(t), np.empty_like(jump), np.empty_like(initial)
    lls = []
    for _ in range(8):
        lls.append(_kernels.hmm_expectation(index.pair_ids, index.block_offsets, index.e_lengths,
                                            index.f_lengths, t, jump, initial, p0, 2, smoothing,
                                            t_counts, jump_counts, initial_counts))
        _kernels.normalize_rows(t_counts, index.row_offsets, t)
    assert non_decreasing(lls)


def test_hmm_jump_estimate_is_not_an_exact_m_step():
    """The papers' count-based jump estimate can lower the likelihood on a tiny corpus (the
    reference agrees); on real data it rises (see the Multi30k test)."""
    f, e = [[0], [2, 2, 1]], [[0, 1, 2], [0]]
    index = PairIndex(tokens(f), tokens(e))
    model = train_hmm(index, train_ibm1(index, 5).t, 2, smoothing=0.0)
    _, _, _, lls_ref = ref_hmm(list(zip(f, e)), ref_ibm1(list(zip(f, e)), 3, 5)[0], 2, 0.2, 100, 0.0)
    assert close(model.log_likelihoods[0], lls_ref[0]) and close(model.log_likelihoods[1], lls_ref[1])
    assert model.log_likelihoods[1] < model.log_likelihoods[0] - 0.1


# ---------------------------------------------------------------- (c) an obvious alignment

def toy():
    src = TokenArray.from_sentences(["das haus", "das buch", "ein buch"], Vocabulary())
    tgt = TokenArray.from_sentences(["the house", "the book", "a book"], Vocabulary())
    return src, tgt


def test_toy_corpus_gets_the_obvious_alignment():
    src, tgt = toy()
    result = align_corpus(src, tgt, aligner="hmm")
    obvious = [[(0, 0), (1, 1)]] * 3
    assert result.symmetric.to_lists() == obvious
    assert result.forward.to_lists() == obvious
    assert result.reverse.to_lists() == obvious
    for direction in ("forward", "reverse"):
        assert non_decreasing(result.log_likelihoods[direction]["ibm1"])
        assert non_decreasing(result.log_likelihoods[direction]["hmm"])
        assert len(result.log_likelihoods[direction]["hmm"]) == 5
    assert result.forward_model.hmm.jump.argmax() - result.forward_model.hmm.max_jump == 1


def test_directions_are_explicit():
    """forward = Pr(tgt | src): each target word has at most one link; reverse = Pr(src | tgt),
    swapped: each source word has at most one link; all links are (source, target)."""
    src = TokenArray.from_sentences(["a b c", "a c", "d", ""], Vocabulary())
    tgt = TokenArray.from_sentences(["x y", "x z z w", "", "q"], Vocabulary())
    result = align_corpus(src, tgt, ibm1_iterations=3, hmm_iterations=2, aligner="hmm")
    forward = align_direction(tgt, src, ibm1_iterations=3, hmm_iterations=2, aligner="hmm")
    reverse = align_direction(src, tgt, ibm1_iterations=3, hmm_iterations=2, aligner="hmm")
    assert result.forward.to_lists() == forward.alignment.to_lists()
    assert result.reverse.to_lists() == swap(reverse.alignment).to_lists()
    for s in range(len(src)):
        fwd, rev = result.forward.to_lists()[s], result.reverse.to_lists()[s]
        assert len({j for _, j in fwd}) == len(fwd) and len({i for i, _ in rev}) == len(rev)
        for i, j in fwd + rev + result.symmetric.to_lists()[s]:
            assert i < len(src.sentence(s)) and j < len(tgt.sentence(s))
    assert result.symmetric.to_lists()[2] == result.symmetric.to_lists()[3] == []


def test_ibm1_only_and_jobs_and_progress(capsys):
    src, tgt = toy()
    only_ibm1 = align_corpus(src, tgt, hmm_iterations=0, aligner="hmm")
    assert only_ibm1.forward_model.hmm is None and only_ibm1.log_likelihoods["forward"]["hmm"] == []
    assert only_ibm1.symmetric.to_lists() == [[(0, 0), (1, 1)]] * 3
    one = align_corpus(src, tgt, progress=True, aligner="hmm")
    assert capsys.readouterr().err == ""  # stderr is not a terminal here: no bar (tests/test_terminal.py draws one)
    two = align_corpus(src, tgt, jobs=2, aligner="hmm")
    for name in ("forward", "reverse", "symmetric"):
        assert np.array_equal(getattr(one, name).links, getattr(two, name).links)
    assert one.log_likelihoods == two.log_likelihoods


def test_bad_input_is_an_input_error():
    src, tgt = toy()
    short = TokenArray.from_sentences(["the house"], Vocabulary())
    with pytest.raises(InputError, match="sentences"):
        align_corpus(src, short)
    with pytest.raises(InputError, match="sentences"):
        align_direction(short, src)
    with pytest.raises(InputError, match="sentences"):
        PairIndex(short, src)
    for kwargs in ({"p0": 1.0}, {"p0": -0.1}, {"ibm1_iterations": -1}, {"hmm_iterations": 1.5},
                   {"max_jump": 0}, {"smoothing": 1.5}, {"jobs": 0}, {"method": "grow-diag"}):
        with pytest.raises(InputError):
            align_corpus(src, tgt, **kwargs)
    with pytest.raises(InputError, match="TokenArray"):
        align_corpus(["das haus"], tgt)
    with pytest.raises(InputError, match="ids"):
        align_corpus(TokenArray(np.array([-1, 0, 1], dtype=np.int32), np.array([0, 1, 2, 3])), tgt)
    with pytest.raises(InputError, match="offsets"):
        align_corpus(TokenArray(np.array([0, 1], dtype=np.int32), np.array([0, 1, 5, 2])), tgt)
    other = PairIndex(tokens([[0]]), tokens([[0]]))
    with pytest.raises(InputError, match="another corpus"):
        viterbi_ibm1(PairIndex(tgt, src), train_ibm1(other, 1))
    with pytest.raises(InputError, match="sentences"):
        grow_diag_final_and(Alignment.from_lists([[]]), Alignment.from_lists([[], []]))


def test_empty_sentences_get_no_links():
    src = TokenArray.from_sentences(["", "a b", "", "c"], Vocabulary())
    tgt = TokenArray.from_sentences(["x", "y z", "", ""], Vocabulary())
    result = align_corpus(src, tgt)
    for alignment in (result.forward, result.reverse, result.symmetric):
        assert len(alignment) == 4
        lists = alignment.to_lists()
        assert lists[0] == lists[2] == lists[3] == []
    nothing = TokenArray.from_sentences([], Vocabulary())
    empty = align_corpus(nothing, nothing, aligner="hmm")
    assert len(empty.symmetric) == 0 and empty.log_likelihoods["forward"]["ibm1"] == [0.0] * 5


# ---------------------------------------------------------------- (d) symmetrisation

NEIGHBOURS = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]


def ref_grow_diag_final_and(fwd, rev):
    """fast_align's atools: intersection; passes over the sorted union adding points next to the
    alignment with an unaligned word; then forward, then reverse points with both words unaligned."""
    result = fwd & rev
    aligned_i = {i for i, _ in result}
    aligned_j = {j for _, j in result}
    pending = sorted((fwd | rev) - result)
    while True:
        added = False
        for i, j in pending:
            if (i, j) in result or (i in aligned_i and j in aligned_j):
                continue
            if any((i + di, j + dj) in result for di, dj in NEIGHBOURS):
                result.add((i, j))
                aligned_i.add(i)
                aligned_j.add(j)
                added = True
        if not added:
            break
    for points in (fwd, rev):
        for i, j in sorted(points):
            if i not in aligned_i and j not in aligned_j:
                result.add((i, j))
                aligned_i.add(i)
                aligned_j.add(j)
    return result


points = st.sets(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=14)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(points, points), min_size=0, max_size=4))
def test_symmetrization_matches_reference(sentences):
    fwd = Alignment.from_lists([a for a, _ in sentences])
    rev = Alignment.from_lists([b for _, b in sentences])
    gdfa = grow_diag_final_and(fwd, rev).to_lists()
    inter = intersection(fwd, rev).to_lists()
    uni = union(fwd, rev).to_lists()
    for s, (a, b) in enumerate(sentences):
        assert gdfa[s] == sorted(ref_grow_diag_final_and(set(a), set(b)))
        assert inter[s] == sorted(set(a) & set(b))
        assert uni[s] == sorted(set(a) | set(b))
        assert set(inter[s]) <= set(gdfa[s]) <= set(uni[s])


def test_grow_diag_final_and_by_hand():
    def gdfa(a, b):
        return grow_diag_final_and(Alignment.from_lists([a]), Alignment.from_lists([b])).to_lists()[0]
    # grow: the diagonal neighbour (1, 1) of (0, 0) joins; both its words were unaligned
    assert gdfa([(0, 0), (1, 1)], [(0, 0)]) == [(0, 0), (1, 1)]
    # grow: (1, 2) and (2, 1) touch (1, 1) and each has one unaligned word
    assert gdfa([(0, 0), (1, 1), (2, 1)], [(0, 0), (1, 1), (1, 2)]) == [(0, 0), (1, 1), (1, 2), (2, 1)]
    # grow does not add a point whose two words are both aligned already
    assert gdfa([(0, 0), (1, 1), (0, 1)], [(0, 0), (1, 1)]) == [(0, 0), (1, 1)]
    # final-and: forward points first, so (0, 1) wins over the reverse's (0, 0)
    assert gdfa([(0, 1)], [(0, 0)]) == [(0, 1)]
    # final-and needs both words unaligned: (3, 0) is not added, (3, 3) is
    assert gdfa([(0, 0), (3, 0)], [(0, 0), (3, 3)]) == [(0, 0), (3, 3)]
    assert symmetrize(Alignment.from_lists([[(0, 0)]]), Alignment.from_lists([[(1, 1)]]),
                      "union").to_lists() == [[(0, 0), (1, 1)]]


# ---------------------------------------------------------------- (e) AER

def test_alignment_error_rate_by_hand():
    a = Alignment.from_lists([[(0, 0), (1, 1), (1, 2)], [(0, 0), (0, 1)]])
    sure = Alignment.from_lists([[(0, 0), (1, 1)], [(0, 0), (1, 1)]])
    possible = Alignment.from_lists([[(1, 2), (2, 2)], []])  # sure links count as possible too
    # |A|=5, |S|=4, |A&S|=3, |A&P|=4 (P = S | possible)
    assert alignment_error_rate(a, sure, possible) == pytest.approx(1 - 7 / 9)
    # P = S: |A&S| = |A&P| = 3
    assert alignment_error_rate(a, sure) == pytest.approx(1 - 6 / 9)
    assert alignment_error_rate(sure, sure) == 0.0
    assert alignment_error_rate(Alignment.from_lists([[(5, 5)]]), Alignment.from_lists([[(0, 0)]])) == 1.0
    assert alignment_error_rate(Alignment.from_lists([[]]), Alignment.from_lists([[]])) == 0.0
    with pytest.raises(InputError, match="sentences"):
        alignment_error_rate(a, Alignment.from_lists([[]]))


# ---------------------------------------------------------------- (f) Pharaoh files

def test_pharaoh_round_trip(tmp_path):
    src = TokenArray.from_sentences(["das haus", "das buch", "", "ein buch"], Vocabulary())
    tgt = TokenArray.from_sentences(["the house", "the book", "", "a book"], Vocabulary())
    result = align_corpus(src, tgt)
    for name in ("forward", "reverse", "symmetric"):
        path = tmp_path / f"aligned.{name}"
        getattr(result, name).write(path)
        back = Alignment.read(path)
        assert np.array_equal(back.links, getattr(result, name).links)
        assert np.array_equal(back.offsets, getattr(result, name).offsets)
    assert (tmp_path / "aligned.symmetric").read_text() == "0-0 1-1\n0-0 1-1\n\n0-0 1-1\n"


# ---------------------------------------------------------------- (g) long sentences

def log_space_likelihood(model, fs, es):
    """log Pr(f | e) of one pair by a forward pass in log space with the model's tables."""
    n_i = len(es)
    with np.errstate(divide="ignore"):
        trans = np.log(model.transition_matrix(n_i))
        words = np.array(list(es) + [NULL])
        log_t = np.log(model.t.lookup(np.tile(words, len(fs)), np.repeat(fs, len(words)))
                       .reshape(len(fs), len(words)))
        alpha = np.log(model.initial_distribution(n_i))
    emit = np.concatenate([log_t[:, :n_i], np.repeat(log_t[:, n_i:], n_i, axis=1)], axis=1)
    alpha = alpha + emit[0]
    for j in range(1, len(fs)):
        alpha = logsumexp(alpha[:, None] + trans, axis=0) + emit[j]
    return float(logsumexp(alpha))


def test_long_sentences_do_not_underflow():
    """Word-for-word translations (ids + 1000, 10% noise words, adjacent swaps): 300 short
    pairs and two of 150 and 160 words, whose probabilities are far below 1e-308."""
    rng = np.random.default_rng(7)

    def pair(n):
        e = [int(w) for w in rng.integers(0, 200, n)]
        f = [w + 1000 if rng.random() < 0.9 else int(rng.integers(2000, 2100)) for w in e]
        for k in range(0, n - 1, 3):
            f[k], f[k + 1] = f[k + 1], f[k]
        return f, e

    pairs = [pair(int(rng.integers(5, 15))) for _ in range(300)] + [pair(150), pair(160)]
    f, e = [p[0] for p in pairs], [p[1] for p in pairs]
    index = PairIndex(tokens(f), tokens(e))
    model = train_hmm(index, train_ibm1(index, 5).t, 5)
    assert np.isfinite(model.log_likelihoods).all() and non_decreasing(model.log_likelihoods)
    assert np.isfinite(model.t.prob).all() and np.isfinite(model.jump).all()
    links = viterbi_hmm(index, model).to_lists()
    for s in (300, 301):
        assert len(links[s]) > 0.9 * len(f[s])
        assert sum(e[s][i] + 1000 == f[s][j] for i, j in links[s]) > 0.8 * len(f[s])
    # under uniform tables the long pairs' probabilities underflow float64, yet the scaled
    # forward pass equals a forward pass in log space
    uniform = HMMModel(TranslationTable(index.keys, index.uniform_table(), index.n_e, index.n_f),
                       np.full(201, 1 / 201), np.full(101, 1 / 101), 0.2, 100, 0.2, [])
    assert log_space_likelihood(uniform, f[300], e[300]) < -745
    assert log_space_likelihood(uniform, f[301], e[301]) < -745
    first = train_hmm(index, None, 1).log_likelihoods[0]
    assert close(first, sum(log_space_likelihood(uniform, fs, es) for fs, es in pairs))
    kernel_ll = _kernels.hmm_expectation(index.pair_ids, index.block_offsets, index.e_lengths,
                                         index.f_lengths, model.t.prob.copy(), model.jump,
                                         model.initial, model.p0, model.max_jump, model.smoothing,
                                         np.empty(len(index)), np.empty_like(model.jump),
                                         np.empty_like(model.initial))
    assert close(kernel_ll, sum(log_space_likelihood(model, fs, es) for fs, es in pairs))


# ---------------------------------------------------------------- (h) real data

def test_multi30k_sanity():
    de = read_lines(shared_path("corpora", "multi30k", "train.de.gz"))[:2000]
    en = read_lines(shared_path("corpora", "multi30k", "train.en.gz"))[:2000]
    src = TokenArray.from_sentences([line.lower() for line in de], Vocabulary())
    tgt = TokenArray.from_sentences([line.lower() for line in en], Vocabulary())
    start = time.perf_counter()
    result = align_corpus(src, tgt, aligner="hmm")
    assert time.perf_counter() - start < 30
    for direction in ("forward", "reverse"):
        for model in ("ibm1", "hmm"):
            lls = result.log_likelihoods[direction][model]
            assert len(lls) == 5 and np.isfinite(lls).all() and non_decreasing(lls)
    n_links = result.symmetric.links.shape[0]
    assert 0.7 * tgt.ids.size < n_links < 1.5 * tgt.ids.size
    assert len(result.symmetric) == 2000


def test_closer_to_fast_align_than_model1_and_the_diagonal():
    """fast_align's forward alignment of the cdec nc-wmt11 fixture is no gold standard, but our
    HMM should agree with it better than Model 1 and than a diagonal guess do."""
    lines = read_lines(shared_path("fixtures", "cdec", "fast_align", "nc-wmt11.de-en"))
    reference = Alignment.read(shared_path("fixtures", "cdec", "fast_align", "nc-wmt11.fwd.align"))
    src = TokenArray.from_sentences([line.split(" ||| ")[0] for line in lines], Vocabulary())
    tgt = TokenArray.from_sentences([line.split(" ||| ")[1] for line in lines], Vocabulary())
    hmm = alignment_error_rate(align_direction(tgt, src, aligner="hmm").alignment, reference)
    ibm1 = alignment_error_rate(align_direction(tgt, src, hmm_iterations=0, aligner="hmm").alignment,
                                reference)
    diagonal = Alignment.from_lists([[(min(len(s) - 1, round(j * len(s) / len(t))), j) for j in range(len(t))]
                                     if len(s) and len(t) else [] for s, t in
                                     ((src.sentence(k), tgt.sentence(k)) for k in range(len(src)))])
    assert hmm < ibm1 < alignment_error_rate(diagonal, reference)
    assert hmm < 0.45


def test_benchmark_quick_run_and_hand_gold():
    shared_path("corpora", "multi30k", "train.de.gz")
    spec = importlib.util.spec_from_file_location("align_speed", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sure, possible = module.gold_alignments()
    de = read_lines(shared_path("corpora", "multi30k", "train.de.gz"))[:len(module.GOLD)]
    tok = Tokenizer("de")
    for s, line in enumerate(de):
        length = len(tok(line).split())
        assert all(i < length for i, _ in possible.sentence(s))
    result = module.run(quick=True)
    assert result["pairs"] == 3000 and result["total_seconds"] < 30
    assert result["aer_vs_hand_gold_first10"]["grow-diag-final-and"] < 0.2
