"""Moses hypergraphs (-output-search-graph-hypergraph): real Moses graphs, round trips, malformed input, fuzzing."""

from __future__ import annotations

import gzip
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import shared_path
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph import Hypergraph, HypergraphBuilder
from plugins.moses.hypergraph import (LAYOUT_BOS, LAYOUT_EOS, LAYOUT_SPACE, MosesHypergraph,
                                      dumps_moses_hypergraph, moses_feature_name, read_moses_hypergraph,
                                      read_moses_hypergraph_weights, read_moses_hypergraphs,
                                      write_moses_hypergraph)
from plugins.moses.ini import flatten_weights, read_moses_ini_weights
from plugins.moses.nbest import iter_nbest

# (vertices, edges) of hypergraphs/{0..4}.gz, fixtures/moses/m30k/README.md.
SIZES = [(1198, 8794), (1668, 18623), (1616, 17114), (1625, 12067), (2391, 23945)]

# Moses' dense features in the order it writes them in hypergraphs (its feature-function order).
FILE_ORDER = (["UnknownWordPenalty0_0", "WordPenalty0_0", "PhrasePenalty0_0"]
              + [f"TranslationModel0_{i}" for i in range(4)] + [f"LexicalReordering0_{i}" for i in range(6)]
              + ["Distortion0_0", "LM0_0"])


def m30k(*parts: str):
    return shared_path("fixtures", "moses", "m30k", *parts)


@pytest.fixture(scope="module")
def graphs():
    """The five fixture graphs, read once (one feature space and vocabulary)."""
    return read_moses_hypergraphs(m30k("hypergraphs"))


@pytest.fixture(scope="module")
def nbest():
    """Moses' distinct 100-best entries of the first 5 dev sentences, per sentence (same MERT weights)."""
    out: dict[int, list] = {}
    for entry in iter_nbest(m30k("nbest.dev20.txt")):
        if entry.sentence < 5:
            out.setdefault(entry.sentence, []).append(entry)
    return out


def mert_weights() -> dict[str, float]:
    return flatten_weights(read_moses_ini_weights(m30k("moses.mert.ini")))


# ---- real Moses graphs -----------------------------------------------------------------------

def test_fixture_graphs_read_with_the_header_counts(graphs):
    sources = m30k("hypergraphs", "dev5.src").read_text("utf-8").splitlines()
    assert len(graphs) == 5
    for graph, (n_nodes, n_edges), source, k in zip(graphs, SIZES, sources, range(5)):
        header = gzip.decompress(m30k("hypergraphs", f"{k}.gz").read_bytes()).split(b"\n", 2)[1]
        assert header == f"{n_nodes} {n_edges}".encode()
        assert isinstance(graph, MosesHypergraph)
        assert (graph.n_nodes, graph.n_edges) == (n_nodes, n_edges)
        arity = np.diff(graph.tail_offsets)
        # node 0 has the one tailless <s> edge; every other edge extends one earlier hypothesis
        assert graph.in_offsets[1] == 1 and arity[0] == 0 and np.all(arity[1:] == 1)
        goal_edges = np.arange(graph.in_offsets[-2], graph.in_offsets[-1])
        assert np.all(graph.edge_layout[goal_edges] == LAYOUT_EOS) and graph.edge_layout[0] == LAYOUT_BOS
        assert np.all(graph.feat_offsets[goal_edges + 1] == graph.feat_offsets[goal_edges])
        covered = graph.source_covered
        assert covered[0] == 0 and covered[-1] == len(source.split())
        # a recombined vertex covers as many words through every incoming edge
        assert np.array_equal(graph.edge_covered, covered[graph.edge_head])
    space = graphs[0].space
    assert all(g.space is space for g in graphs) and all(g.vocab is graphs[0].vocab for g in graphs)
    assert space.dense_names == FILE_ORDER and space.sparse_names == []


def test_read_into_the_moses_ini_space():
    """With the space of moses.ini (the n-best and decoder order) the graph reads into that order."""
    weights = mert_weights()
    space = FeatureSpace(weights)
    graph = read_moses_hypergraph(m30k("hypergraphs", "0.gz"), space)
    assert graph.space is space and space.dense_names == list(weights) and len(space) == 15
    assert space.dense_names[:8] == [f"LexicalReordering0_{i}" for i in range(6)] + ["Distortion0_0", "LM0_0"]
    plain = read_moses_hypergraph(m30k("hypergraphs", "0.gz"))
    assert graph.edge_features(1) == plain.edge_features(1)
    assert graph.edge_features(1)["UnknownWordPenalty0_0"] == -100.0
    assert graph.edge_features(1)["Distortion0_0"] == -5.0
    assert graph.edge_features(1)["TranslationModel0_0"] == 0.0  # zeros Moses wrote are kept


def test_weights_file_is_the_mert_ini_rounded():
    weights = read_moses_hypergraph_weights(m30k("hypergraphs", "weights"))
    ini = mert_weights()
    assert list(weights) == FILE_ORDER and set(weights) == set(ini)
    for name, value in ini.items():
        assert weights[name] == pytest.approx(value, abs=5e-7)


@pytest.mark.parametrize("source", ["weights", "moses.mert.ini"])
def test_viterbi_is_moses_one_best(graphs, nbest, source):
    """The Viterbi string is Moses' 1-best, its w.h Moses' total and its h Moses' features (n-best precision)."""
    weights = (read_moses_hypergraph_weights(m30k("hypergraphs", "weights")) if source == "weights"
               else mert_weights())
    # dev5 = the first 5 sentences of dev20; dev20.mert.1best is the MERT-weights decode of them
    one_best = m30k("dev20.mert.1best").read_text("utf-8").split("\n")
    sources = m30k("hypergraphs", "dev5.src").read_text("utf-8").splitlines()
    for k, graph in enumerate(graphs):
        best = graph.viterbi(weights)
        assert best.text + " " == one_best[k]  # Moses writes every word followed by a space
        first = nbest[k][0]
        assert first.text == one_best[k]
        assert best.score == pytest.approx(first.score, abs=1e-3)
        assert best.score == pytest.approx(float(best.dense() @ graph.weight_array(weights)), abs=1e-9)
        features = best.features()
        for name, value in zip(first.dense_names(), first.dense_values()):
            assert features.get(name, 0.0) == pytest.approx(value, rel=1e-5, abs=1e-4), name
        # UnknownWordPenalty0 is not in the n-best list but in Moses' total: -100 per copied source word
        residual = first.score - sum(weights[n] * v for n, v in zip(first.dense_names(), first.dense_values()))
        unknown = -features.get("UnknownWordPenalty0_0", 0.0) / 100.0
        assert unknown == [1, 0, 0, 2, 0][k] and residual == pytest.approx(-100.0 * unknown, abs=1e-2)
        source = set(sources[k].split())
        assert sum(word in source for word in best.text.split()) >= unknown


def test_kbest_agrees_with_viterbi_and_moses_distinct_nbest(graphs, nbest):
    weights = mert_weights()
    for k, graph in enumerate(graphs):
        best = graph.viterbi(weights)
        top = graph.kbest(20, weights)
        assert top[0].text == best.text and top[0].score == pytest.approx(best.score, abs=1e-9)
        assert np.array_equal(top[0].edges, best.edges)
        assert np.all(np.diff(top.scores) <= 1e-12)
        # distinct k-best = Moses' "100 distinct" list (which stops early for some sentences), in
        # Moses' order but for one near tie in sentence 3 (2.5e-5 apart) that float32 Moses orders otherwise
        moses = nbest[k]
        ours = graph.kbest(len(moses), weights, distinct=True)
        assert len(ours) == len(moses)
        rank = {text: i for i, text in enumerate(ours.texts)}
        assert set(rank) == {e.text[:-1] for e in moses}
        for i, entry in enumerate(moses):
            assert ours.scores[i] == pytest.approx(entry.score, abs=1e-3)
            assert ours.scores[rank[entry.text[:-1]]] == pytest.approx(entry.score, abs=1e-3)
        swapped = [i for i, e in enumerate(moses) if ours.texts[i] != e.text[:-1]]
        assert swapped == ([46, 47] if k == 3 else [])


def test_fixture_graphs_round_trip_byte_for_byte(graphs, tmp_path):
    for k, graph in enumerate(graphs):
        original = gzip.decompress(m30k("hypergraphs", f"{k}.gz").read_bytes())
        assert dumps_moses_hypergraph(graph).encode("utf-8") == original
    write_moses_hypergraph(graphs[0], tmp_path / "0.gz")
    write_moses_hypergraph(graphs[0], tmp_path / "0.txt")
    original = gzip.decompress(m30k("hypergraphs", "0.gz").read_bytes())
    assert gzip.decompress((tmp_path / "0.gz").read_bytes()) == original
    assert (tmp_path / "0.txt").read_bytes() == original
    again = read_moses_hypergraph(tmp_path / "0.gz", graphs[0].space.copy())
    assert_same_graph(again, graphs[0])


# ---- small files: details, directories, malformed input, writer ---------------------------------

PHRASE_SAMPLE = """\
# target ||| features ||| source-covered
5 7
# node 0
1
<s> |||  ||| 0
# node 1
2
[0] a group  ||| WordPenalty0=-2.000000 TranslationModel0_1=-0.500000 TranslationModel0_2=-1.250000 LM0=-3.000000 sp_a=1.000000  ||| 1
[0] group  ||| WordPenalty0=-1.000000 TranslationModel0_1=-0.700000 TranslationModel0_2=-0.000000 LM0=-2.500000  ||| 1
# node 2
1
[0] a group of  ||| WordPenalty0=-3.000000 TranslationModel0_1=-0.600000 TranslationModel0_2=-0.900000 LM0=-2.000000 sp_b=-0.500000  ||| 2
# node 3
2
[1] of men  ||| WordPenalty0=-2.000000 TranslationModel0_1=-0.300000 TranslationModel0_2=-0.400000 LM0=-1.500000  ||| 3
[2] men  ||| WordPenalty0=-1.000000 TranslationModel0_1=-0.100000 TranslationModel0_2=-0.200000 LM0=-4.000000  ||| 3
# node 4
1
[3] </s> |||  ||| 3
"""

CHART_SAMPLE = """\
# target ||| features ||| source-covered
4 5
# node 0
2
das  ||| TM_1=-1.000000 TM_2=-0.500000 WP=-1.000000  ||| 1
the  ||| TM_1=-0.200000 TM_2=-0.300000 WP=-1.000000  ||| 1
# node 1
1
house  ||| TM_1=-0.100000 TM_2=-0.100000 WP=-1.000000  ||| 1
# node 2
1
[1] of [0]  ||| TM_1=0.000000 TM_2=0.000000 WP=-1.000000 glue_x=1.000000  ||| 2
# node 3
1
<s> [2] </s>  ||| TM_1=0.000000 TM_2=0.000000 WP=0.000000  ||| 2
"""


def write_text(path, text: str):
    path.write_bytes(text.encode("utf-8"))
    return path


def assert_same_graph(a: Hypergraph, b: Hypergraph) -> None:
    """Same arrays, features (-0 included), templates as words (the vocabularies may differ)."""
    assert a.space == b.space
    assert [a.vocab[t] if t >= 0 else t for t in a.tmpl.tolist()] == [b.vocab[t] if t >= 0 else t
                                                                       for t in b.tmpl.tolist()]
    for name in ("in_offsets", "tail_offsets", "tails", "feat_offsets", "feat_ids", "feat_values",
                 "tmpl_offsets", "edge_covered", "edge_layout"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert np.array_equal(np.signbit(a.feat_values), np.signbit(b.feat_values))


def test_phrase_sample(tmp_path):
    graph = read_moses_hypergraph(write_text(tmp_path / "0", PHRASE_SAMPLE))
    assert graph.space.dense_names == ["WordPenalty0_0", "TranslationModel0_0", "TranslationModel0_1", "LM0_0"]
    assert graph.space.sparse_names == ["sp_a", "sp_b"]
    assert graph.edge_features(1) == {"WordPenalty0_0": -2.0, "TranslationModel0_0": -0.5,
                                      "TranslationModel0_1": -1.25, "LM0_0": -3.0, "sp_a": 1.0}
    assert np.signbit(graph.feat_values[graph.feat_offsets[2] + 2])  # -0.000000 stays -0
    assert graph.source_covered.tolist() == [0, 1, 2, 3, 3]
    assert graph.edge_layout.tolist() == [LAYOUT_BOS] + [LAYOUT_SPACE] * 5 + [LAYOUT_EOS]
    weights = {"WordPenalty0_0": -0.1, "TranslationModel0_0": 1.0, "TranslationModel0_1": 1.0, "LM0_0": 1.0,
               "sp_a": 0.5, "sp_b": 2.0}
    # node 1: "group" -3.1 beats "a group" -4.05; node 3: "group of men" -5.1, "a group of men" -6.05 and -8.4
    best = graph.viterbi(weights)
    assert best.text == "group of men" and best.score == pytest.approx(-5.1)
    kbest = graph.kbest(5, weights)
    assert kbest.texts == ["group of men", "a group of men", "a group of men"]
    assert kbest.scores.tolist() == pytest.approx([-5.1, -6.05, -8.4])
    assert graph.kbest(5, weights, distinct=True).texts == ["group of men", "a group of men"]
    assert dumps_moses_hypergraph(graph) == PHRASE_SAMPLE


def test_chart_sample_with_two_tails_and_boundaries(tmp_path):
    graph = read_moses_hypergraph(write_text(tmp_path / "0.txt", CHART_SAMPLE))
    assert graph.edge_tails(3).tolist() == [1, 0]
    assert graph.edge_layout[4] == LAYOUT_BOS | LAYOUT_EOS | LAYOUT_SPACE
    weights = {"TM_0": 1.0, "TM_1": 1.0, "WP_0": 0.0, "glue_x": 0.0}
    assert [d.text for d in graph.kbest(3, weights)] == ["house of the", "house of das"]
    assert graph.space.dense_names == ["TM_0", "TM_1", "WP_0"] and graph.space.sparse_names == ["glue_x"]
    assert dumps_moses_hypergraph(graph) == CHART_SAMPLE


def test_crlf_comments_and_spacing_are_normalised(tmp_path):
    text = PHRASE_SAMPLE.replace("# node 2\n", "# node 2\n# another comment\n")
    text = text.replace("[2] men ", "[2]  men ").replace("\n", "\r\n") + "# trailing\n\n"
    graph = read_moses_hypergraph(write_text(tmp_path / "g", text))
    assert dumps_moses_hypergraph(graph) == PHRASE_SAMPLE


def test_exact_numbers_when_six_decimals_would_lose_them(tmp_path):
    builder = HypergraphBuilder(FeatureSpace(["LM0_0", "TM0_0", "TM0_1"]))
    start, mid, goal = builder.add_node(), builder.add_node(), builder.add_node()
    builder.add_edge(start)
    builder.add_edge(mid, [start], {"LM0_0": -1e-7, "TM0_1": 0.1 + 0.2, "sparse_x": 1234567.25}, [0, "a", "b"])
    builder.add_edge(goal, [mid], {"TM0_0": -2.5})
    graph = builder.build()
    text = dumps_moses_hypergraph(graph, source_covered=[0, 3, 3])
    assert text.split("\n")[7] == "[0] a b  ||| LM0=-1e-07 TM0_2=0.30000000000000004 sparse_x=1234567.250000  ||| 3"
    assert text.split("\n")[4] == " |||  ||| 0"
    write_moses_hypergraph(graph, tmp_path / "g.gz", source_covered=np.array([0, 3, 3]))
    again = read_moses_hypergraph(tmp_path / "g.gz", graph.space.copy())
    assert np.array_equal(again.feat_values, graph.feat_values) and again.viterbi(
        {"LM0_0": 1.0, "TM0_0": 1.0, "TM0_1": 1.0}).text == "a b"
    assert dumps_moses_hypergraph(again) == text


def test_tails_in_target_order_are_written_as_moses_reads_them(tmp_path):
    builder = HypergraphBuilder(FeatureSpace(["LM0_0"]))
    a, b, top = builder.add_node(), builder.add_node(), builder.add_node()
    builder.add_edge(a, [], {"LM0_0": -1.0}, ["x"])
    builder.add_edge(b, [], {"LM0_0": -2.0}, ["y"])
    builder.add_edge(top, [a, b], {}, [1, "of", 0])
    graph = builder.build()
    text = dumps_moses_hypergraph(graph, source_covered=[1, 1, 2])
    assert text.split("\n")[-2] == "[1] of [0]  |||  ||| 2"
    again = read_moses_hypergraph(write_text(tmp_path / "g", text))
    assert again.edge_tails(2).tolist() == [1, 0] and again.viterbi({"LM0_0": 1.0}).text == "y of x"


@pytest.mark.parametrize("change,message", [
    ("no_covered", "no source-covered counts"),
    ("word", "cannot be written"),
    ("boundary_word", "cannot be written"),
    ("sparse_reads_dense", "would read back as a dense feature"),
    ("tail_twice", "every tail exactly once"),
    ("tail_unused", "every tail exactly once"),
    ("dense_names", "cannot be written as a Moses label group"),
])
def test_writer_refuses_what_would_not_read_back(tmp_path, change, message):
    dense = ["LM0_0"] if change != "dense_names" else ["Glue"]
    builder = HypergraphBuilder(FeatureSpace(dense))
    a, top = builder.add_node(), builder.add_node()
    features = {dense[0]: 1.0, "Sparse": 2.0} if change == "sparse_reads_dense" else {dense[0]: 1.0}
    word = {"word": "[3]", "boundary_word": "</s>"}.get(change, "w")
    builder.add_edge(a, [], features, [word])
    target = {"tail_twice": [0, 0], "tail_unused": ["v"]}.get(change, [0])
    builder.add_edge(top, [a], {}, target)
    covered = None if change == "no_covered" else [1, 1]
    with pytest.raises(InputError, match=re.escape(message)):
        write_moses_hypergraph(builder.build(), tmp_path / "g", source_covered=covered)
    assert list(tmp_path.iterdir()) == []


def test_moses_feature_names():
    assert moses_feature_name("LM0") == ("LM0_0", True)
    assert moses_feature_name("TranslationModel0_4") == ("TranslationModel0_3", True)
    assert moses_feature_name("TargetWordInsertionFeature0_the") == ("TargetWordInsertionFeature0_the", False)
    assert moses_feature_name("PP_a_1") == ("PP_a_1", False)
    assert moses_feature_name("LM0_0") == ("LM0_0", False)
    assert moses_feature_name("LM0_01") == ("LM0_01", False)


def test_read_moses_hypergraphs_folder_rules(tmp_path):
    folder = tmp_path / "hg"
    folder.mkdir()
    write_text(folder / "weights", "LM0 0.5\nTranslationModel0_1 1\n")
    write_text(folder / "dev.src", "not a graph\n")
    (folder / "1.gz").write_bytes(gzip.compress(CHART_SAMPLE.replace("TM_", "TranslationModel0_")
                                                .replace("WP=", "LM0=").encode("utf-8")))
    write_text(folder / "0.txt", PHRASE_SAMPLE)
    graphs = read_moses_hypergraphs(folder)
    assert [g.n_nodes for g in graphs] == [5, 4]
    assert graphs[0].space is graphs[1].space and graphs[0].space.sparse_names == ["sp_a", "sp_b", "glue_x"]
    assert read_moses_hypergraph_weights(folder / "weights") == {"LM0_0": 0.5, "TranslationModel0_0": 1.0}
    write_text(folder / "3", PHRASE_SAMPLE)
    with pytest.raises(InputError, match="no hypergraph for sentence 2"):
        read_moses_hypergraphs(folder)
    write_text(folder / "2.txt.gz", PHRASE_SAMPLE)
    with pytest.raises(InputError, match="file name '2.txt.gz'"):
        read_moses_hypergraphs(folder)
    (folder / "2.txt.gz").rename(folder / "02")
    write_text(folder / "2", PHRASE_SAMPLE)
    with pytest.raises(InputError, match="are both sentence 2"):
        read_moses_hypergraphs(folder)
    with pytest.raises(InputError, match="cannot list"):
        read_moses_hypergraphs(tmp_path / "absent")
    write_text(tmp_path / "w", "LM0 1\nLM0_1 2\n")
    with pytest.raises(InputError, match="two weights for LM0_0"):
        read_moses_hypergraph_weights(tmp_path / "w")


def test_read_into_a_given_space_checks_the_names(tmp_path):
    path = write_text(tmp_path / "0", PHRASE_SAMPLE)
    with pytest.raises(InputError, match="LM0_0 is not a dense feature") as info:
        read_moses_hypergraph(path, FeatureSpace(["WordPenalty0_0", "TranslationModel0_0", "TranslationModel0_1"]))
    assert info.value.line == 8
    with pytest.raises(InputError, match="TranslationModel0_1 is not a dense feature"):
        read_moses_hypergraph(path, FeatureSpace(["WordPenalty0_0", "TranslationModel0_0", "LM0_0"]))
    with pytest.raises(InputError, match="WordPenalty0 is written for WordPenalty0, which has 2 value"):
        read_moses_hypergraph(path, FeatureSpace(["WordPenalty0_0", "WordPenalty0_1", "TranslationModel0_0",
                                                  "TranslationModel0_1", "LM0_0"]))
    indexed = write_text(tmp_path / "1", PHRASE_SAMPLE.replace("LM0=", "LM0_1="))
    for space in (None, FeatureSpace(["WordPenalty0_0", "TranslationModel0_0", "TranslationModel0_1", "LM0_0"])):
        with pytest.raises(InputError, match="LM0_1.. is written for LM0, which has 1 value") as info:
            read_moses_hypergraph(indexed, space)
        assert info.value.line == 8
    space = FeatureSpace(["X_0", "WordPenalty0_0", "TranslationModel0_0", "TranslationModel0_1", "LM0_0"], ["s_z"])
    graph = read_moses_hypergraph(path, space)
    assert space.sparse_names == ["s_z", "sp_a", "sp_b"] and graph.feat_dim == len(space)
    failing = FeatureSpace(["WordPenalty0_0"])
    with pytest.raises(InputError):
        read_moses_hypergraph(path, failing)
    assert len(failing) == 1  # nothing is added to the space when the file is bad


MALFORMED = [
    # (old, new, line, message): PHRASE_SAMPLE with `old` replaced by `new` (once)
    ("# target ||| features ||| source-covered\n", "# target ||| features\n", 1, "first line"),
    ("5 7\n", "5 7 9\n", 2, "counts line"),
    ("5 7\n", "5 x\n", 2, "not a non-negative integer"),
    ("5 7\n", "5 8\n", 2, "the file has 7 edges"),
    ("5 7\n", "5 6\n", 18, "vertex 4 brings the edges to 7"),
    ("5 7\n", "6 7\n", 20, "the file ends after 5 of 6 vertices"),
    ("5 7\n", "4 6\n", 18, "text after the last vertex"),
    ("# node 1\n2\n", "# node 1\n0\n", 7, "vertex 1 has no edges"),
    ("# node 1\n2\n", "# node 1\n3\n", 10, "1 fields"),
    ("[2] men ", "[3] men ", 16, "edge into vertex 3 refers to vertex 3"),
    ("[2] men ", "[7] men ", 16, "refers to vertex 7"),
    ("[2] men ", "[-1] men ", 16, "bad non-terminal"),
    ("[2] men ", "[] men ", 16, "bad non-terminal"),
    ("[2] men ", "[2] <s> men ", 16, "the word '<s>' inside"),
    ("[2] men ", "[2] </s> men ", 16, "the word '</s>' inside"),
    ("[2] men ", "[2] ||| men ", 16, "4 fields"),
    ("[2] men ", "[2] m ||| en ", 16, "4 fields"),
    ("[2] men ", "||| [2] men ", 16, "the word '|||' inside"),
    ("[2] men ", "[2]\tmen ", 16, "whitespace other than spaces"),
    ("[2] men ", "[2] m\u2028en ", 16, "whitespace other than spaces"),
    ("LM0=-4.000000", "LM0=nan", 16, "not finite"),
    ("LM0=-4.000000", "LM0=-inf", 16, "not finite"),
    ("LM0=-4.000000", "LM0=1e999", 16, "not finite"),
    ("LM0=-4.000000", "LM0=0x10", 16, "not a number"),
    ("LM0=-4.000000", "LM0=1_0", 16, "not a number"),
    ("LM0=-4.000000", "LM0=", 16, "not a number"),
    ("LM0=-4.000000", "LM0-4.000000", 16, "has no '='"),
    ("LM0=-4.000000", "=-4.000000", 16, "has no name"),
    ("LM0=-4.000000", "LM|||0=-4.000000", 16, "contains '|||'"),
    ("LM0=-4.000000", "LM0=-4 LM0=-4", 16, "given twice on one edge"),
    ("LM0=-4.000000", "LM0=-4 LM0_1=-4", 16, "both as LM0 and as LM0_k"),
    ("LM0=-4.000000", "LM0=-4 LM0_0=1", 16, "has the name of a dense feature"),
    ("  ||| 1\n[0] group", "  ||| -1\n[0] group", 8, "the number of source words covered"),
    ("  ||| 1\n[0] group", "  ||| 1 \n[0] group", 8, "the number of source words covered"),
    ("  ||| 1\n[0] group", "  ||| 99999999999\n[0] group", 8, "99999999999 source words"),
    ("[3] </s> |||  ||| 3\n", "", 19, "the file ends after 0 of the 1 edges of vertex 4"),
    ("[3] </s> |||  ||| 3\n", "[3] </s> |||  ||| 3\nmore\n", 20, "text after the last vertex"),
]


@pytest.mark.parametrize("old,new,line,message", MALFORMED)
def test_malformed_files(tmp_path, old, new, line, message):
    assert old in PHRASE_SAMPLE
    path = write_text(tmp_path / "0", PHRASE_SAMPLE.replace(old, new, 1))
    with pytest.raises(InputError, match=re.escape(message)) as info:
        read_moses_hypergraph(path)
    assert info.value.path == str(path) and info.value.line == line


def test_empty_bad_utf8_and_truncated_gzip(tmp_path):
    with pytest.raises(InputError, match="the file ends before its first line") as info:
        read_moses_hypergraph(write_text(tmp_path / "e", ""))
    assert info.value.line == 1
    empty = read_moses_hypergraph(write_text(tmp_path / "z", "# target ||| features ||| source-covered\n0 0\n"))
    assert empty.n_nodes == 0 and empty.viterbi({}) is None
    assert dumps_moses_hypergraph(empty) == "# target ||| features ||| source-covered\n0 0\n"
    (tmp_path / "b").write_bytes(PHRASE_SAMPLE.encode().replace(b"group", b"gr\xffoup", 1))
    with pytest.raises(InputError, match="not UTF-8") as info:
        read_moses_hypergraph(tmp_path / "b")
    assert info.value.line == 8
    packed = gzip.compress(PHRASE_SAMPLE.encode())
    (tmp_path / "t.gz").write_bytes(packed[:len(packed) // 2])
    with pytest.raises(InputError):
        read_moses_hypergraph(tmp_path / "t.gz")


# ---- fuzzing: only InputError, and whatever reads writes back and reads the same ------------------

TOKENS = [" ||| ", "|||", " ", "  ", "\n", "\r\n", "\t", "#", "# node 3\n", "[0]", "[1]", "[3]", "[4]", "[9]", "[]",
          "[x]", "<s>", "</s>", "=", "LM0=", "LM0_1=", "TranslationModel0_2=", "sp_a=", "0", "1", "2", "7",
          "-0.000000", "1.500000", "1e-07", "nan", "-inf", "1e999", "99999999999", "-", ".", "e", "é", "\x00",
          "\u2028", "\x85", "\ufeff"]
BAD_BYTES = [b"\xff", b"\xc3", b"\xe2\x82", b"\x80", b"\x1f\x8b"]


@st.composite
def mutated(draw, sample: str):
    """A sample with lines dropped, duplicated, swapped, truncated or with a field/token replaced; maybe gzip."""
    lines = sample.split("\n")
    for _ in range(draw(st.integers(0, 3))):
        # hypothesis favours 0, which would nearly always break the first line
        i = draw(st.integers(0, len(lines) - 1) | st.integers(1, max(1, len(lines) - 1)))
        i = min(i, len(lines) - 1)
        line = lines[i]
        op = draw(st.sampled_from(["truncate", "drop", "duplicate", "swap", "field", "token", "insert"]))
        separator = draw(st.sampled_from([" ||| ", " ", "="]))
        parts = line.split(separator)
        j = draw(st.integers(0, len(parts) - 1))
        if op == "truncate":
            lines[i] = line[:draw(st.integers(0, len(line)))]
        elif op == "drop":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, line)
        elif op == "swap":
            k = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[k] = lines[k], line
        elif op == "field":
            parts[j] = "".join(draw(st.lists(st.sampled_from(TOKENS), max_size=3)))
            lines[i] = separator.join(parts)
        elif op == "token":
            parts.insert(j, draw(st.sampled_from(TOKENS)))
            lines[i] = separator.join(parts)
        else:
            lines.insert(i, "".join(draw(st.lists(st.sampled_from(TOKENS), max_size=6))))
        if not lines:
            lines = [""]
    data = "\n".join(lines).encode("utf-8")
    if draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from(BAD_BYTES)) + data[at:]
    if draw(st.integers(0, 5)) == 0:
        data = gzip.compress(data, mtime=0)
        if draw(st.booleans()):
            data = data[:draw(st.integers(0, len(data)))]
    return data


def documents():
    """Random bytes, format tokens, and (more often) mutated samples, which get past the first lines."""
    soup = st.lists(st.sampled_from(TOKENS), max_size=60).map(lambda t: "".join(t).encode("utf-8"))
    samples = st.sampled_from([PHRASE_SAMPLE, CHART_SAMPLE, PHRASE_SAMPLE.replace("\n", "\r\n")])
    return st.one_of(st.binary(max_size=200), soup, *[samples.flatmap(mutated)] * 4)


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("moses_hypergraph_fuzz")


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=documents(), with_space=st.booleans())
def test_fuzz_reader_raises_only_input_error(fuzz_dir, data, with_space):
    path = fuzz_dir / "0"
    path.write_bytes(data)
    space = FeatureSpace(["WordPenalty0_0", "TranslationModel0_0", "TranslationModel0_1", "LM0_0"]) \
        if with_space else None
    before = None if space is None else space.names
    try:
        graph = read_moses_hypergraph(path, space)
    except InputError as err:
        assert err.path == str(path)
        assert err.line is None or err.line >= 1
        if space is not None:
            assert space.names == before
        return
    text = dumps_moses_hypergraph(graph)
    copy = write_text(fuzz_dir / "1", text)
    again = read_moses_hypergraph(copy, graph.space.copy())
    assert_same_graph(again, graph)
    assert dumps_moses_hypergraph(again) == text


def test_fuzz_samples_are_valid(tmp_path):
    for sample in (PHRASE_SAMPLE, CHART_SAMPLE):
        graph = read_moses_hypergraph(write_text(tmp_path / "0", sample))
        assert dumps_moses_hypergraph(graph) == sample


# ---- the numba reader against the Python reader ------------------------------------------------------

def assert_same_parse(fast, slow):
    for name in ("in_offsets", "tail_offsets", "tails", "tmpl_offsets", "tmpl", "feat_offsets", "feat_names",
                 "feat_values", "covered", "layout"):
        a, b = np.asarray(getattr(fast, name)), np.asarray(getattr(slow, name))
        assert a.shape == b.shape and np.array_equal(a, b), name
    assert np.array_equal(np.signbit(np.asarray(fast.feat_values, dtype=float)),
                          np.signbit(np.asarray(slow.feat_values, dtype=float)))  # -0.000000 stays -0.0
    assert fast.words == slow.words and list(fast.names) == list(slow.names) and fast.name_lines == slow.name_lines


def test_numba_reader_takes_every_real_moses_graph():
    """Every hypergraph Moses wrote in the fixtures (phrase-based and chart) is read by the numba reader,
    with the Python reader's arrays, words, names and number bits."""
    from plugins.moses.hypergraph import _parse_fast, _parse_slow
    files = sorted(m30k("hypergraphs").glob("*.gz"))
    hiero = shared_path("fixtures", "moses", "m30k-hiero")
    files += sorted(p for p in hiero.rglob("*") if p.is_file() and p.name.split(".")[0].isdigit()
                    and "hypergraph" in str(p.parent))
    assert len(files) >= 5
    for path in files:
        fast = _parse_fast(path)
        assert fast is not None, path
        assert_same_parse(fast, _parse_slow(path))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=documents())
def test_numba_reader_reads_what_the_python_reader_reads_or_leaves_it(fuzz_dir, data):
    """On random and mutated files the numba reader either leaves the file to the Python reader or gives
    exactly what the Python reader gives (which then must accept the file)."""
    from plugins.moses.hypergraph import _parse_fast, _parse_slow
    path = fuzz_dir / "fast"
    path.write_bytes(data)
    fast = _parse_fast(path)
    try:
        slow = _parse_slow(path)
    except InputError:
        assert fast is None
        return
    if fast is not None:
        assert_same_parse(fast, slow)


@pytest.mark.parametrize("old,new", [
    # the edge on line 9 has the names of the one before, in order: they are taken from that edge, so a repeated name
    # there must still be caught
    ("TranslationModel0_1=-0.700000", "WordPenalty0=-0.700000"),
    ("TranslationModel0_2=-0.000000", "TranslationModel0_1=-0.000000"),
    ("LM0=-2.500000", "LM|||0=-2.500000"),
    ("LM0=-2.500000", "LM0=-2.500000\u00a0"),
    ("TranslationModel0_1=-0.700000", "TranslationModel0_1=-0.700000\u3000"),
])
def test_numba_reader_leaves_a_bad_feature_after_names_of_the_last_edge(tmp_path, old, new):
    from plugins.moses.hypergraph import _parse_fast
    path = write_text(tmp_path / "0", PHRASE_SAMPLE.replace(old, new, 1))
    assert _parse_fast(path) is None
    with pytest.raises(InputError) as info:
        read_moses_hypergraph(path)
    assert info.value.line == 9


def test_numba_reader_takes_the_samples_and_leaves_crlf_and_exponents(tmp_path):
    from plugins.moses.hypergraph import _parse_fast, _parse_slow
    for sample in (PHRASE_SAMPLE, CHART_SAMPLE):
        path = write_text(tmp_path / "0", sample)
        assert_same_parse(_parse_fast(path), _parse_slow(path))
    for changed in (PHRASE_SAMPLE.replace("\n", "\r\n"), PHRASE_SAMPLE.replace("=-1.000000", "=-1e0", 1)):
        path = write_text(tmp_path / "1", changed)
        assert _parse_fast(path) is None and _parse_slow(path) is not None


def _decoded_forests(model: Path, sentences: Path, folder: Path, tmp_path: Path) -> tuple[list, list[str]]:
    """``minismt decode --hypergraph-format moses`` of ``sentences``: the forests read back and the 1-best."""
    from minismt.cli import main
    out = tmp_path / "out.txt"
    assert main(["decode", "--model", str(model), "--input", str(sentences), "--output", str(out),
                 "--hypergraph-dir", str(folder), "--hypergraph-format", "moses", "--quiet"]) == 0
    return read_moses_hypergraphs(folder), out.read_text(encoding="utf-8").splitlines()


def test_hiero_forests_in_moses_chart_format(hiero_system, tmp_path, shared):
    """A Hiero model's forests written as Moses' chart decoder writes its hypergraphs (the m30k-hiero
    fixture): the same header, feature names and order, every dense feature on every edge, <s> on the
    first node's edge, </s> on the goal's, source-covered counting <s> and </s>, a space after every
    target; read back, the Viterbi derivation under the decoding weights is the decoder's 1-best."""
    from minismt.manifest import load_manifest
    data, model = hiero_system
    sentences = data / "test.src"
    graphs, best = _decoded_forests(model, sentences, tmp_path / "hg", tmp_path)
    lengths = [len(line.split()) for line in sentences.read_text(encoding="utf-8").splitlines()]
    assert len(graphs) == len(best) == len(lengths)
    weights = read_moses_hypergraph_weights(shared / "fixtures" / "moses" / "m30k-hiero" / "hypergraph" / "weights")
    fixture = read_moses_hypergraph(shared / "fixtures" / "moses" / "m30k-hiero" / "hypergraph" / "0.txt.gz")
    assert graphs[0].space.dense_names == fixture.space.dense_names
    w = graphs[0].space.weights(load_manifest(model)["default_weights"], grow=False)
    assert set(weights) >= set(graphs[0].space.dense_names)
    for graph, text, n in zip(graphs, best, lengths):
        assert graph.viterbi(w).text == text
        assert graph.edge_layout[0] == LAYOUT_BOS | LAYOUT_SPACE and graph.edge_covered[0] == 1
        goal_edges = range(graph.in_offsets[graph.goal], graph.in_offsets[graph.goal + 1])
        assert all(graph.edge_layout[e] == LAYOUT_EOS | LAYOUT_SPACE and graph.edge_covered[e] == n + 2
                   for e in goal_edges)
        assert np.all(np.diff(graph.feat_offsets) == graph.space.n_dense)
    text = gzip.open(tmp_path / "hg" / "0.gz", "rt", encoding="utf-8").read().splitlines()
    fixture_text = gzip.open(shared / "fixtures" / "moses" / "m30k-hiero" / "hypergraph" / "0.txt.gz", "rt",
                             encoding="utf-8").read().splitlines()
    assert text[0] == fixture_text[0] and text[2:4] == fixture_text[2:4] == ["# node 0", "1"]
    names = [f.rsplit("=", 1)[0] for f in text[4].split(" ||| ")[1].split()]
    assert names == [f.rsplit("=", 1)[0] for f in fixture_text[4].split(" ||| ")[1].split()]
    assert text[4].startswith("<s>  ||| ") and text[4].endswith(" ||| 1")
    # Moses' own hypergraph MIRA reads them and tunes on them
    kbmira = shared / "tools" / "moses" / "bin" / "kbmira"
    if kbmira.is_file():
        dense = tmp_path / "dense"
        fixture_weights = shared / "fixtures" / "moses" / "m30k-hiero" / "hypergraph" / "weights"
        dense.write_text("".join(f"{name}= {value}\n" for name, value in (
            line.split() for line in fixture_weights.read_text().splitlines())))
        done = subprocess.run([str(kbmira), "-t", "hypergraph", "-H", str(tmp_path / "hg"), "-R",
                               str(data / "test.tgt"), "-d", str(dense), "-J", "2", "-r", "1", "-o",
                               str(tmp_path / "mira.out")], capture_output=True, text=True)
        assert done.returncode == 0 and "Best BLEU" in done.stderr, done.stderr[-500:]
        assert len((tmp_path / "mira.out").read_text().split()) == 2 * len(weights)


def test_phrase_based_forests_in_moses_format(moses_system, tmp_path, capsys):
    """A phrase-based model's search graphs written as Moses' phrase-based decoder writes them (the m30k
    fixture): <s> with no trailing space first, </s> on the goal's edges, source-covered the words
    translated; read back, the Viterbi derivation is the decoder's 1-best."""
    from minismt.manifest import load_manifest
    data, model = moses_system
    graphs, best = _decoded_forests(model, data / "test.src", tmp_path / "hg", tmp_path)
    lengths = [len(line.split()) for line in (data / "test.src").read_text(encoding="utf-8").splitlines()]
    w = graphs[0].space.weights(load_manifest(model)["default_weights"], grow=False)
    for graph, text, n in zip(graphs, best, lengths):
        assert graph.viterbi(w).text == text
        assert graph.edge_layout[0] == LAYOUT_BOS and graph.edge_covered[0] == 0
        goal_edges = range(graph.in_offsets[graph.goal], graph.in_offsets[graph.goal + 1])
        assert all(graph.edge_layout[e] == LAYOUT_EOS and graph.edge_covered[e] == n for e in goal_edges)
    # the format without a folder to write to is one line of error
    from minismt.cli import main
    capsys.readouterr()
    assert main(["decode", "--model", str(model), "--input", str(data / "test.src"), "--output",
                 str(tmp_path / "o.txt"), "--hypergraph-format", "moses", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "without --hypergraph-dir" in err and not (tmp_path / "o.txt").exists()
