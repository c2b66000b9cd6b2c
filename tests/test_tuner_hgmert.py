"""Hypergraph MERT (Kumar et al. 2009): envelopes against brute-force enumeration, the line search
against ForestData.bleu, the tuner against n-best MERT on complete k-best lists, and cdec's dpmert.

Random forests have small integer features, weights and directions, so every
derivation's line ``a + x b`` has integer coefficients: its intercepts and
slopes are exact in float64, every intersection of two lines is the correctly
rounded quotient of two exact integers (what the kernels compute too), and a
model score at a dyadic ``x`` with a small denominator is exact. Brute force
is exact rational arithmetic over all enumerated derivations.
"""

from __future__ import annotations

import base64
import itertools
import math
import struct
from fractions import Fraction

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tuners
from conftest import shared_path
from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph import HypergraphBuilder, read_cdec_json
from minismt.kbest import KBestBuilder
from minismt.metrics import BleuReferences
from plugins.cdec.weights import read_cdec_weights
from tuners import hgmert
from minismt.hypergraph import ForestData, _envelope_kernels
import random_forests
from random_forests import RngDraws, derivation_table
from tuners.hgmert import HypergraphMERT, best_interval, forest_envelope, line_search
from tuners.mert import MERT

NAMES = ["f0", "f1", "f2"]
WORDS = ["a", "b", "c", "d"]
MAX_DERIVATIONS = 200
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- random forests and brute force ----------------------------------------------------------
def forests(space: FeatureSpace, vocab: Vocabulary, max_nodes: int = 7):
    """The shared random forests (:mod:`random_forests`) with <= 3 tails per edge and integer features in
    [-2, 2] (identical lines: ties)."""
    return random_forests.forests(space, vocab, max_nodes, max_tails=3, values=range(-2, 3), words=WORDS,
                                  max_derivations=MAX_DERIVATIONS)


def random_forest(rng: np.random.Generator, space: FeatureSpace, vocab: Vocabulary, n: int = 6,
                  feature_range: int = 2, max_derivations: int = MAX_DERIVATIONS):
    """The same kind of forest with <= 2 tails per edge, from a seeded generator."""
    values = range(-feature_range, feature_range + 1)
    return random_forests.random_forest(RngDraws(rng), space, vocab, n, values=values, words=WORDS,
                                        max_derivations=max_derivations)


def edge_dot(hg, v) -> list[int]:
    """``v . f_e`` of every edge, in Python integers."""
    out = []
    for e in range(hg.n_edges):
        out.append(sum(int(v[hg.space.index(k)]) * int(x) for k, x in hg.edge_features(e).items()))
    return out


def derivations(hg, w, d):
    """Every derivation of the goal as ``(slope, intercept, pre-order edges, words)``, exact integers."""
    return derivation_table(hg, edge_dot(hg, d), edge_dot(hg, w))[hg.goal]


def exact_envelope(lines):
    """Upper envelope of ``(slope, intercept, edges, words)`` lines in rational arithmetic:
    ``[(left x or None, line)]``; of identical lines the lexicographically first edges (Viterbi's)."""
    best: dict[int, tuple] = {}
    for line in lines:
        m, a, edges = line[0], line[1], line[2]
        if m not in best or a > best[m][1] or (a == best[m][1] and edges < best[m][2]):
            best[m] = line
    hull: list[tuple] = []
    for m in sorted(best):
        line = best[m]
        x = None
        while hull:
            top_x, top = hull[-1]
            x = Fraction(top[1] - line[1], line[0] - top[0])
            if top_x is None or x > top_x:
                break
            hull.pop()
            x = None
        hull.append((x if hull else None, line))
    return hull


def dyadic_between(lo: float, hi: float) -> float:
    """A dyadic rational with a small denominator strictly inside ``(lo, hi)`` (either may be infinite)."""
    if lo == -math.inf and hi == math.inf:
        return 0.0
    if lo == -math.inf:
        return float(math.floor(hi) - 1)
    if hi == math.inf:
        return float(math.floor(lo) + 1)
    for p in range(0, 40):
        k = math.floor(lo * 2 ** p) + 1
        if k / 2 ** p < hi:
            return k / 2 ** p
    raise AssertionError(f"no dyadic point in ({lo}, {hi})")


int_vectors = st.lists(st.integers(-3, 3), min_size=3, max_size=3).map(lambda v: np.array(v, dtype=np.float64))


# ---- (1) envelopes against brute force -------------------------------------------------------
def check_envelope(hg, w, d) -> int:
    """forest_envelope against the exact envelope of all enumerated derivations; returns its size."""
    every = derivations(hg, w, d)
    hull = exact_envelope(every)
    env = forest_envelope(hg, w, d)
    # the same lines, breakpoints and (Viterbi's) derivation on each segment
    assert env.slopes.tolist() == [float(line[0]) for _, line in hull]
    assert env.intercepts.tolist() == [float(line[1]) for _, line in hull]
    assert env.x[0] == -np.inf and env.x[1:].tolist() == [float(x) for x, _ in hull[1:]]
    assert [tuple(e.tolist()) for e in env.edges] == [line[2] for _, line in hull]
    assert env.texts == [" ".join(line[3]) for _, line in hull]
    for edges, text in zip(env.edges, env.texts):
        assert hg.yield_of(edges) == text
    # the envelope is the maximum over all derivations at many x (breakpoints, near them, a grid)
    points = {Fraction(k, 4) for k in range(-40, 41)}
    for x, _ in hull[1:]:
        points |= {x, x - Fraction(1, 1024), x + Fraction(1, 1024)}
    for x in points:
        top = max(line[1] + x * line[0] for line in every)
        i = int(np.searchsorted(env.x, float(x), side="right")) - 1
        assert Fraction(env.intercepts[i]) + x * Fraction(env.slopes[i]) == top
        assert max(Fraction(a) + x * Fraction(m) for a, m in zip(env.intercepts, env.slopes)) == top
    # each segment's derivation is the Viterbi derivation inside its interval
    bounds = list(env.x) + [np.inf]
    for i in range(len(env.x)):
        x = dyadic_between(bounds[i], bounds[i + 1])
        viterbi = hg.viterbi(w + x * d)
        assert viterbi.edges.tolist() == env.edges[i].tolist() and viterbi.text == env.texts[i]
        assert viterbi.score == env.intercepts[i] + x * env.slopes[i]
    return len(env.x)


@SETTINGS
@given(st.data(), int_vectors, int_vectors)
def test_goal_envelope_equals_brute_force_upper_envelope(data, w, d):
    space, vocab = FeatureSpace(NAMES), Vocabulary()
    check_envelope(data.draw(forests(space, vocab)), w, d)


def test_large_goal_envelopes_equal_brute_force():
    """Bigger forests and wider weights than the hypothesis test, for envelopes of many lines."""
    rng = np.random.default_rng(5)
    sizes = []
    for _ in range(30):
        space, vocab = FeatureSpace(NAMES), Vocabulary()
        hg = random_forest(rng, space, vocab, int(rng.integers(7, 11)), feature_range=6, max_derivations=1000)
        w = rng.integers(-9, 10, 3).astype(np.float64)
        d = rng.integers(-9, 10, 3).astype(np.float64)
        sizes.append(check_envelope(hg, w, d))
    assert max(sizes) >= 6 and sum(size >= 4 for size in sizes) >= 10


@SETTINGS
@given(st.data(), int_vectors)
def test_envelope_along_no_direction_is_viterbi(data, w):
    space, vocab = FeatureSpace(NAMES), Vocabulary()
    hg = data.draw(forests(space, vocab))
    env = forest_envelope(hg, w, np.zeros(3))
    viterbi = hg.viterbi(w)
    assert len(env.x) == 1 and env.slopes[0] == 0.0
    assert env.intercepts[0] == viterbi.score and env.edges[0].tolist() == viterbi.edges.tolist()


# ---- (2) the line search against ForestData.bleu ---------------------------------------------
@st.composite
def forest_data(draw, max_sentences: int = 3):
    """2-3 dev sentences with 1-2 forests each (in shuffled order) and 1-2 references over WORDS."""
    space, vocab = FeatureSpace(NAMES), Vocabulary()
    n = draw(st.integers(1, max_sentences))
    ids = [s for s in range(n) for _ in range(draw(st.integers(1, 2)))]
    ids = draw(st.permutations(ids))
    hgs = [draw(forests(space, vocab, max_nodes=5)) for _ in ids]
    sentence = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
    refs = [draw(st.lists(sentence, min_size=1, max_size=2)) for _ in range(n)]
    return ForestData(hgs, ids, BleuReferences(refs))


def brute_force_points(data: ForestData, w, d):
    """A dyadic point inside every interval between the intersections of any two derivation lines
    of one sentence (exact), and one beyond each end; and the intersections."""
    cuts: set[Fraction] = set()
    for s in range(data.n_sentences):
        lines = {(m, a) for hg, t in zip(data.forests, data.sentence_ids) if t == s
                 for m, a, _, _ in derivations(hg, w, d)}
        for (m1, a1), (m2, a2) in itertools.combinations(lines, 2):
            if m1 != m2:
                cuts.add(Fraction(a1 - a2, m2 - m1))
    edges = [-math.inf] + sorted(float(x) for x in cuts) + [math.inf]
    return sorted({dyadic_between(lo, hi) for lo, hi in zip(edges, edges[1:]) if lo < hi}), cuts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
@given(forest_data(), int_vectors, int_vectors, st.sampled_from(["none", "exp"]))
def test_line_search_equals_brute_force_bleu(data, w, d, smooth):
    points, cuts = brute_force_points(data, w, d)
    values = [data.bleu(w + x * d, smooth=smooth) for x in points]
    bleu, lo, hi = best_interval(data, w, d, smooth=smooth)
    assert bleu == max(values)
    # at every point of the interval but its inner breakpoints (adjacent pieces with equal statistics are one
    # interval, as cdec's and Moses' MERT make them; at such a point the model-best is a tie that Viterbi may
    # break towards a third derivation: w = 0 with every line through one point does it)
    inside = [x for x in points if lo < x < hi]
    assert inside and all(data.bleu(w + x * d, smooth=smooth) == bleu for x in inside)
    # the swept error surface at every test point (lower == upper: the interval holding x)
    for x, value in zip(points, values):
        assert best_interval(data, w, d, lower=x, upper=x, smooth=smooth)[0] == value
    # ties: of equal intervals the one nearest to 0, so a line without a better one stays at 0
    here = data.bleu(w, smooth=smooth)
    gamma, score = line_search(data, w, d, smooth=smooth)
    assert score == bleu
    if 0 not in cuts:
        assert score > here or gamma == 0.0
    # the search's BLEU at a point is ForestData.bleu (the envelopes along d = 0)
    search = hgmert.ForestLineSearches(data, np.arange(3), smooth)
    assert search.bleu(w) == here


# ---- (3) against n-best MERT on complete k-best lists ----------------------------------------
def complete_kbest(data: ForestData):
    """Every derivation of every forest as a k-best list (per sentence: its forests in data order,
    derivations in lexicographic order of their pre-order edges, the order Viterbi breaks ties in)."""
    builder = KBestBuilder(data.space)
    zero = np.zeros(3)
    for s in range(data.n_sentences):
        for hg, t in zip(data.forests, data.sentence_ids):
            if t != s:
                continue
            for _, _, edges, words in sorted(derivations(hg, zero, zero), key=lambda x: x[2]):
                features = np.zeros(3)
                for e in edges:
                    for name, value in hg.edge_features(e).items():
                        features[data.space.index(name)] += value
                text = " ".join(words)
                builder.add(s, text, features, stats=data.references.stats([s], [text])[0])
    return builder.build(data.n_sentences)


def random_forest_data(seed: int, n_sentences: int = 4) -> ForestData:
    rng = np.random.default_rng(seed)
    space, vocab = FeatureSpace(NAMES), Vocabulary()
    ids = [s for s in range(n_sentences) for _ in range(1 + int(rng.random() < 0.3))]
    rng.shuffle(ids)
    hgs = [random_forest(rng, space, vocab, int(rng.integers(3, 8))) for _ in ids]
    refs = [[" ".join(rng.choice(WORDS, int(rng.integers(2, 7)))) for _ in range(int(rng.integers(1, 3)))]
            for _ in range(n_sentences)]
    return ForestData(hgs, ids, BleuReferences(refs))


def tie_free_forest(rng: np.random.Generator, space: FeatureSpace, vocab: Vocabulary, n: int):
    """A forest in which no two derivations tie in model score: no node is a tail twice (in one edge or
    in two), so a derivation uses every node at most once and distinct derivations have distinct edge
    sets; every edge has Gaussian values of all features and 1-3 words."""
    builder = HypergraphBuilder(space, vocab)
    counts: list[int] = []
    unused: list[int] = []
    for v in range(n):
        builder.add_node("X")
        n_in = int(rng.integers(1 if v == n - 1 else 0, 4))
        total = 0
        for _ in range(n_in):
            k = min(int(rng.integers(0, 3)), len(unused))
            tails = [unused.pop(int(rng.integers(0, len(unused)))) for _ in range(k)]
            if math.prod(counts[t] for t in tails) + total > MAX_DERIVATIONS:
                unused.extend(tails)
                tails = []
            total += math.prod(counts[t] for t in tails)
            target = [int(i) for i in rng.permutation(len(tails))]
            for word in rng.choice(WORDS, int(rng.integers(1, 4))):
                target.insert(int(rng.integers(0, len(target) + 1)), str(word))
            builder.add_edge(v, tails, {name: float(rng.normal()) for name in NAMES}, target)
        counts.append(total if n_in else 1)
        unused.append(v)
    return builder.build()


def tie_free_forest_data(seed: int, n_sentences: int = 4) -> ForestData:
    """Tie-free forests (:func:`tie_free_forest`) of 4 sentences; each reference is the Viterbi yield of
    one of its sentence's forests under random weights, so BLEU is not 0 everywhere."""
    rng = np.random.default_rng(seed)
    space, vocab = FeatureSpace(NAMES), Vocabulary()
    ids = [s for s in range(n_sentences) for _ in range(1 + int(rng.random() < 0.3))]
    rng.shuffle(ids)
    hgs = [tie_free_forest(rng, space, vocab, int(rng.integers(3, 8))) for _ in ids]
    refs = [[hgs[ids.index(s)].viterbi(rng.standard_normal(3)).text] for s in range(n_sentences)]
    return ForestData(hgs, ids, BleuReferences(refs))


@pytest.mark.parametrize("n_threads", [2, 3, 7])
def test_envelopes_shared_over_threads_equal_one_call(monkeypatch, n_threads):
    data = random_forest_data(11, n_sentences=6)
    forests = hgmert._Forests(data)
    a = forests.intercepts(np.array([1.0, -1.0, 0.5]))
    directions = np.random.default_rng(3).standard_normal((5, 3))
    one = _envelope_kernels.envelopes(*forests.arrays, forests.node_bounds, a, directions)
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", n_threads)
    shared = forests.envelopes(a, directions)
    assert len(shared) == len(one)
    for x, y in zip(shared, one):
        assert x.dtype == y.dtype and np.array_equal(x, y)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("optimizer", ["powell", "random-direction"])
def test_same_optimum_as_nbest_mert_on_complete_kbest_lists(seed, optimizer):
    """The same search, step by step, on forests without ties in model score. On the integer-feature
    forests of random_forest_data two derivations often tie exactly (same features, e.g. a repeated
    tail's derivations swapped), and a forest sums a derivation's score edge by edge where the k-best list
    sums its features first: the ties fell differently in 7 of 120 cases (seeds 0-59, both optimizers;
    seeds 0-5 happened to agree), and the fit raised BLEU in only 9 of the 120. Measured on these
    forests: 0 of 400 cases differ (seeds 0-199), and 0 of 400 (seeds 0-99) with the edge features times
    (1 + 1e-9 noise, per value or per entry); the fit raises BLEU in 368 of the 400 (median +0.47; here
    seeds 0-4 end at 0.89-1 from 0-0.80, seed 5 stays at 0)."""
    data = tie_free_forest_data(seed)
    kbest = complete_kbest(data)
    w0 = np.array([1.0, -1.0, 0.5])
    params = dict(n_random_restarts=3, n_random_directions=2, optimizer=optimizer, seed=seed, max_rounds=100)
    assert kbest.bleu(w0, smooth="none") == data.bleu(w0, smooth="none")
    hg_tuner, kb_tuner = HypergraphMERT(**params), MERT(**params)
    w_hg, w_kb = hg_tuner.fit(data, w0), kb_tuner.fit(kbest, w0)
    assert hg_tuner.bleu_ == kb_tuner.bleu_ == data.bleu(w_hg, smooth="none")
    assert [h["bleu"] for h in hg_tuner.history_] == [h["bleu"] for h in kb_tuner.history_]
    assert [h["line_searches"] for h in hg_tuner.history_] == [h["line_searches"] for h in kb_tuner.history_]
    np.testing.assert_allclose(w_hg, w_kb, rtol=1e-9, atol=1e-12)


# ---- (4) cdec's dpmert on its own forests ----------------------------------------------------
def parse_vector(text: str) -> dict[str, float]:
    return {key: float(value) for key, value in (item.split("=") for item in text.split(";"))}


def cdec_point(lo: float, hi: float) -> float:
    """mr_dpmert_reduce's point of an interval: midpoint, first boundary - 0.1, last boundary + 1000."""
    if lo == -math.inf and hi == math.inf:
        return 0.0
    if lo == -math.inf:
        return hi - 0.1
    if hi == math.inf:
        return lo + 1000.0
    return 0.5 * (lo + hi)


def ibm_bleu(data: ForestData, w, references: list[list[str]]) -> float:
    """cdec's IBM BLEU (mteval/ns.cc, README Sec. 3) of the Viterbi translations: closest reference
    length with ties to the first reference, zero matches floored at 0.01, float32."""
    texts = data.translations(w)
    stats = data.references.stats(np.arange(len(texts)), texts).astype(np.int64)
    for i, text in enumerate(texts):
        length = len(text.split())
        stats[i, 8] = min((len(r.split()) for r in references[i]), key=lambda n: abs(n - length))
    total = stats.sum(axis=0)
    f = np.float32
    logs = np.array([np.log(f(max(total[2 * n], 0.01)) / f(total[2 * n + 1])) for n in range(4)
                     if total[2 * n + 1] > 0], dtype=f)
    return float(np.exp(f(logs.mean()) + min(f(0), f(1) - f(total[8]) / f(total[1]))))


def dpmert_testdata():
    folder = shared_path("fixtures", "cdec", "dpmert_testdata")
    space, vocab = FeatureSpace(), Vocabulary()
    hgs = [read_cdec_json(folder / f"{i}.json", space, vocab) for i in range(2)]
    refs = BleuReferences.from_files([folder / f"c2e.txt.{i}" for i in range(4)])
    return folder, ForestData(hgs, [0, 1], refs)


def decode_nc():
    base = shared_path("fixtures", "cdec")
    space, vocab = FeatureSpace(), Vocabulary()
    hgs = [read_cdec_json(base / "decode_nc" / "hgs_json_p17" / f"{i}.json", space, vocab) for i in range(10)]
    refs = BleuReferences.from_files([base / "decode_nc" / "dev.refs"])
    return base / "dpmert_decoded", ForestData(hgs, range(10), refs)


def reducer_lines(path):
    """``(origin, direction, x, score)`` of every line of a mr_dpmert_reduce output (or best.N),
    the vectors as cdec wrote them (``Name=value;...``)."""
    for line in path.read_text().splitlines():
        key, x, score = line.split("|")
        origin, direction = key.split(" ")
        yield origin, direction, float(x), float(score)


def line_vectors(data: ForestData, origin: str, direction: str):
    zero = {name: 0.0 for name in data.space.names}
    return (data.weight_array({**zero, **parse_vector(origin)}),
            data.weight_array({**zero, **parse_vector(direction)}))


def test_dpmert_testdata_opt1_word_penalty_axis():
    """README Sec. 4: opt1 WordPenalty axis from weights.0, x = -8.39879 -> 0.481539."""
    folder, data = dpmert_testdata()
    w = data.weight_array(read_cdec_weights(folder / "weights.0"))
    d = data.weight_array({**{name: 0.0 for name in data.space.names}, "WordPenalty": 1.0})
    gamma, bleu = line_search(data, w, d)
    assert gamma == pytest.approx(-8.39879, abs=5e-6) and bleu == pytest.approx(0.481539, abs=1e-6)
    assert data.bleu(w + gamma * d, smooth="none") == bleu
    assert data.bleu(w, smooth="none") == pytest.approx(0.298243, abs=1e-6)  # onebest.w0


def corrupted_surfaces(mapoutput) -> set[str]:
    """Directions of mr_dpmert_map's output with an error surface exposed to cdec's base64 defect
    (README Sec. 3: a serialized length = 2 mod 3 loses the last digit of the last segment's
    ref_len delta; the score changes when that digit was not 0, which the blob no longer tells)."""
    out = set()
    for line in mapoutput.read_text().splitlines():
        key, blob = line.split("\t")
        raw = base64.b64decode(blob + "=" * (-len(blob) % 4))
        pos = 4
        for _ in range(struct.unpack("<i", raw[:4])[0]):
            pos += 9 + raw[pos + 8]
        if pos % 3 == 2:
            out.add(key.split(" ")[2])
    return out


def test_dpmert_testdata_every_reducer_line():
    """All 84 lines of redoutput.1-4: the same interval as cdec (its point rule), and cdec's IBM BLEU of
    our translations there is the reducer's score, except where an error surface of agenda.1 may
    have been corrupted (mapoutput.1 is the only map output kept; 3 of its 10 exposed directions
    do differ: PassThrough=1 and two random ones)."""
    folder, data = dpmert_testdata()
    references = [line.split(" ||| ") for line in (folder / "dev.refs").read_text().splitlines()]
    corrupted = corrupted_surfaces(folder / "mapoutput.1")
    assert len(corrupted) == 10 and "PassThrough=1" in corrupted
    checked = 0
    for n in range(1, 5):
        for origin, direction, x, score in reducer_lines(folder / f"redoutput.{n}"):
            w, d = line_vectors(data, origin, direction)
            bleu, lo, hi = best_interval(data, w, d)
            assert cdec_point(lo, hi) == pytest.approx(x, rel=1e-5, abs=1e-5)
            assert data.bleu(w + x * d, smooth="none") == bleu
            if n == 1 and direction in corrupted:
                continue
            assert ibm_bleu(data, w + x * d, references) == pytest.approx(score, abs=1e-6)
            checked += 1
    assert checked == 74


def test_decode_nc_opt2_is_the_true_bleu_not_cdecs():
    """README Sec. 3 table: along the opt-2 PassThrough line the best BLEU is the true 0.273508 at
    x = 1.27162, not the reducer's 0.294422; every opt-iteration gives the "true" column."""
    folder, data = decode_nc()
    true = {1: 0.256403, 2: 0.273508, 3: 0.301951, 4: 0.340063, 5: 0.348162}
    for n, expected in true.items():
        (origin, direction, x, reported), = reducer_lines(folder / f"best.{n}")
        w, d = line_vectors(data, origin, direction)
        bleu, lo, hi = best_interval(data, w, d)
        assert bleu == pytest.approx(expected, abs=1e-6)
        assert lo < x < hi and cdec_point(lo, hi) == pytest.approx(x, rel=1e-5)
        if n in (2, 5):
            assert reported - bleu > 0.02  # the reducer's over-report (base64 defect)
    (origin, direction, _, _), = reducer_lines(folder / "best.2")
    w, d = line_vectors(data, origin, direction)
    gamma, bleu = line_search(data, w, d)
    assert gamma == pytest.approx(1.27162, abs=5e-6) and bleu == pytest.approx(0.273508, abs=1e-6)
    # the swept error surface against cdec's own rescore + fast_score scan of that line
    for row in (folder / "scan_opt2_passthrough_cdec_rescore.txt").read_text().splitlines():
        x, expected = map(float, row.split())
        assert best_interval(data, w, d, lower=x, upper=x)[0] == pytest.approx(expected, abs=1e-6)


def test_fit_on_dpmert_testdata_gains_most_of_cdecs_gain():
    """A full fit from weights.0 (BLEU 0.298243 on the two forests) raises the BLEU it maximises by at least
    3/4 of what dpmert.pl's final weights gained (0.623521). Which local optimum a search ends in depends on
    the seed's random directions and restart, and on ties the floating-point path breaks: measured over seeds
    0-29 with and without the edge features times (1 + 1e-9 noise), 70 fits end at 0.590 to 0.636, 12 of them
    below cdec's 0.623521 (5 of the 30 plain seeds, seed 2 among them: that it "beats cdec" was a seed's
    luck), with at least 89.6% of cdec's gain (checked 75%); the search from weights.0 alone ends at 0.575 or
    more (checked >= 0.298 + 0.25)."""
    folder, data = dpmert_testdata()
    w0 = read_cdec_weights(folder / "weights.0")
    tuner = HypergraphMERT(n_random_restarts=1, n_random_directions=15, seed=0)
    w = tuner.fit(data, w0)
    start = data.bleu(w0, smooth="none")
    assert start == pytest.approx(0.298243, abs=1e-6) and tuner.history_[0]["bleu_start"] == start
    assert tuner.history_[0]["bleu"] >= start + 0.25
    assert all(h["bleu"] >= h["bleu_start"] for h in tuner.history_)
    assert tuner.bleu_ == data.bleu(w, smooth="none") >= start + 0.75 * (0.623521 - start)


# ---- (5) determinism, (6) bad input ----------------------------------------------------------
def test_same_seed_gives_bit_identical_weights():
    data = random_forest_data(11, n_sentences=5)
    w0 = np.array([0.5, 0.5, -1.0])
    params = dict(n_random_restarts=4, n_random_directions=3, seed=7)
    tuner = tuners.get_tuner("hg-mert", **params)
    defaults = tuner.get_params()
    w = tuner.fit(data, w0)
    assert tuner.get_params() == defaults and np.array_equal(w, tuner.weights_)
    assert w.shape == (3,) and np.all(np.isfinite(w)) and abs(np.abs(w).sum() - 1.0) < 1e-12
    assert np.array_equal(w, HypergraphMERT(**params).fit(data, w0))
    assert np.array_equal(w, HypergraphMERT(**params).fit(data, {"f0": 0.5, "f1": 0.5, "f2": -1.0}))
    # never below the start (each search moves only to a better point; measured: 0 of 120 fits on
    # random_forest_data seeds 0-59 below it, 8 of them above)
    assert tuner.bleu_ == data.bleu(w, smooth="none") >= data.bleu(w0, smooth="none")


def test_registry_and_parameters():
    cls = tuners.REGISTRY["hg-mert"]
    assert cls is HypergraphMERT and cls.tags.fits_on == "forests" and cls.name == "hg-mert"
    assert set(HypergraphMERT().get_params()) == set(MERT().get_params())
    with pytest.raises(InputError, match="has no parameter 'no_such_parameter'.*expected one of n_random_restarts"):
        tuners.get_tuner("hg-mert", no_such_parameter=1)


def test_bad_input_is_an_input_error():
    data = random_forest_data(3)
    w0 = np.zeros(3)
    for bad in (np.nan, np.inf):
        with pytest.raises(InputError, match="NaN or inf"):
            HypergraphMERT().fit(data, np.array([bad, 0.0, 0.0]))
    with pytest.raises(InputError):
        HypergraphMERT().fit(data, np.zeros(2))
    with pytest.raises(InputError, match="ForestData"):
        HypergraphMERT().fit(complete_kbest(data), w0)
    for params in (dict(n_random_restarts=-1), dict(smooth="nist"), dict(optimizer="lbfgs"),
                   dict(epsilon=math.nan), dict(fixed=["no_such_feature"])):
        with pytest.raises(InputError):
            HypergraphMERT(**params).fit(data, w0)
    # a forest without edges: refused by ForestData, and by the tuner if it slips in later
    space, vocab = data.space, data.forests[0].vocab
    builder = HypergraphBuilder(space, vocab)
    builder.add_node("X")
    empty = builder.build()
    with pytest.raises(InputError, match="no edge"):
        ForestData([empty] + data.forests[1:], data.sentence_ids, data.references)
    data.forests[0] = empty
    with pytest.raises(InputError, match="no edge"):
        HypergraphMERT().fit(data, w0)
    data = random_forest_data(3)
    with pytest.raises(InputError, match="direction"):
        line_search(data, w0, np.array([np.nan, 0.0, 0.0]))
    with pytest.raises(InputError):
        best_interval(data, w0, np.ones(3), lower=1.0, upper=0.0)
    with pytest.raises(InputError):
        line_search(data, w0, np.ones(3), smooth="nist")
    with pytest.raises(InputError):
        forest_envelope(data.forests[0], np.array([np.nan, 0.0, 0.0]), np.ones(3))
