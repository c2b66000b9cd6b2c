"""MBR and consensus decoding (minismt.decode.mbr, minismt decode --mbr): the numba pairwise BLEU+1 against the
plain one, the choices against their definitions, and the command line."""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import synthetic_system
from minismt.cli import main
from minismt.decode.mbr import _ngrams, bleu_plus_one, consensus, kbest_mbr, pairwise_gains, posterior
from minismt.features import FeatureSpace
from minismt.hypergraph import HypergraphBuilder
from minismt.io import read_lines
from random_forests import derivation_table

sentences = st.lists(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=0, max_size=8).map(" ".join),
                     min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(sentences)
def test_pairwise_gains_are_the_plain_bleu_plus_one(texts):
    expected = np.array([[bleu_plus_one(a.split(), _ngrams(b.split()), len(b.split())) for b in texts]
                         for a in texts])
    np.testing.assert_allclose(pairwise_gains(texts), expected, rtol=1e-12, atol=1e-15)


@settings(max_examples=100, deadline=None)
@given(sentences, st.data())
def test_kbest_mbr_maximises_the_expected_gain(texts, data):
    scores = data.draw(st.lists(st.floats(-5, 5), min_size=len(texts), max_size=len(texts)))
    p = posterior(scores, 0.7)
    gains = [sum(p[j] * bleu_plus_one(e.split(), _ngrams(f.split()), len(f.split())) for j, f in enumerate(texts))
             for e in texts]
    chosen = kbest_mbr(texts, scores, 0.7)
    assert gains[chosen] == pytest.approx(max(gains), abs=1e-12)


def test_mbr_is_the_map_when_the_posterior_peaks_and_the_medoid_when_it_is_flat():
    texts = ["a b c d", "a b c e", "a b c d e", "x y"]
    assert kbest_mbr(texts, [0.0, 0.0, 0.0, 1.0], scale=1000.0) == 3
    assert kbest_mbr(texts, [0.0, 0.0, 0.0, 0.0], scale=1.0) != 3


def test_consensus_uses_the_expected_counts_of_every_derivation():
    """A forest X -> 'a b' | 'a c' (features 1, 0), S -> X d: consensus scores each candidate against the
    enumerated expected n-gram counts."""
    space = FeatureSpace(["f"])
    builder = HypergraphBuilder(space)
    builder.add_node()
    x = builder.add_node()
    builder.add_edge(x, [0], {"f": 1.0}, [0, "a", "b"])
    builder.add_edge(x, [0], {"f": 0.0}, [0, "a", "c"])
    goal = builder.add_node()
    builder.add_edge(goal, [x], {}, [0, "d"])
    forest = builder.build()
    w = np.array([0.3])
    goal_derivations = derivation_table(forest, forest.edge_scores(w))[forest.goal]
    p = posterior([d[0] for d in goal_derivations], 1.0)
    counts = [dict() for _ in range(4)]
    for prob, d in zip(p, goal_derivations):
        for n, counted in enumerate(_ngrams(list(d[-1]))):
            for gram, c in counted.items():
                counts[n][gram] = counts[n].get(gram, 0.0) + prob * c
    length = sum(counts[0].values())
    texts = ["a c d", "a b d", "a b"]
    gains = [bleu_plus_one(t.split(), counts, length) for t in texts]
    assert consensus(forest, w, texts) == int(np.argmax(gains)) == 1


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    return synthetic_system(tmp_path_factory, n_pairs=600, seed=8, dev=6, test=10)


@pytest.mark.parametrize("mode", ["kbest", "forest"])
def test_decode_with_mbr(system, tmp_path, mode):
    """--mbr-size 1 leaves only the Viterbi translation; with 200 candidates the output is one of the
    k-best translations, in order, for every sentence."""
    data, model = system
    plain, one, full = tmp_path / "plain", tmp_path / "one", tmp_path / "full"
    base = ["decode", "--model", str(model), "--input", str(data / "test.src"), "--quiet"]
    assert main(base + ["--output", str(plain)]) == 0
    assert main(base + ["--output", str(one), "--mbr", mode, "--mbr-size", "1"]) == 0
    assert read_lines(one) == read_lines(plain)
    assert main(base + ["--output", str(full), "--mbr", mode, "--kbest", "200", "--kbest-out",
                        str(tmp_path / "nbest")]) == 0
    listed: dict[int, list[str]] = {}
    for line in read_lines(tmp_path / "nbest"):
        sentence, text = line.split(" ||| ")[:2]
        listed.setdefault(int(sentence), []).append(text)
    assert all(text in listed[i] for i, text in enumerate(read_lines(full)))


def test_bad_mbr_options_are_one_line_errors(system, capsys):
    data, model = system
    base = ["decode", "--model", str(model), "--input", str(data / "test.src"), "--mbr", "kbest"]
    assert main(base + ["--mbr-scale", "0"]) == 2
    assert "--mbr-scale 0.0 (expected a finite number > 0)" in capsys.readouterr().err
    assert main(base + ["--mbr-size", "0"]) == 2
    assert "--mbr-size" in capsys.readouterr().err
