"""Fixed features (tuners.fixing): the tuners' view keeps every score, fixed weights never move, and the
Moses and cdec drivers fix what their configurations make untuneable."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import shared_path
from minismt.cli import main as cli
from minismt.corpus import Vocabulary
from minismt.features import FeatureSpace, read_weights
from minismt.io import read_lines
from minismt.kbest import KBestBuilder
from minismt.metrics import corpus_bleu
from plugins.moses.driver import MosesDevDecoder, untuneable_features
from plugins.moses.ini import flatten_weights, read_moses_ini_weights
from random_forests import HypothesisDraws, random_forest
from tuners.devdecoder import MinismtDevDecoder
from tuners.fixing import FIXED_COLUMN, FixedFeatures, matches
from tuners.loop import TuningRun
from test_decoder_drivers import _cdec_fixture, _moses_fixture, _quote

DENSE = ["A_0", "A_1", "B_0", "C_0"]


@st.composite
def kbest_and_fixing(draw):
    """A random k-best list over dense and sparse features, a random fixed subset and start weights."""
    space = FeatureSpace(DENSE)
    builder = KBestBuilder(space)
    sparse_names = ["s1", "s2", "s3", "t1"]
    for sentence in range(draw(st.integers(1, 3))):
        for k in range(draw(st.integers(1, 4))):
            dense = np.array(draw(st.lists(st.integers(-3, 3), min_size=4, max_size=4)), dtype=float)
            chosen = sorted(set(draw(st.lists(st.sampled_from(sparse_names), max_size=3))))
            indices = [space.add(n) for n in chosen]
            order = np.argsort(indices)
            values = [float(draw(st.integers(-2, 2))) for _ in chosen]
            builder.add(sentence, f"h{sentence} {k}", dense, np.asarray(indices)[order].tolist(),
                        np.asarray(values)[order].tolist())
    kbest = builder.build()
    fixed = set(draw(st.lists(st.sampled_from(DENSE + sparse_names), max_size=4)))
    start = np.array(draw(st.lists(st.integers(-2, 2), min_size=len(space), max_size=len(space))), dtype=float)
    return kbest, fixed, start


@settings(max_examples=150, deadline=None)
@given(kbest_and_fixing(), st.floats(0.1, 3.0), st.data())
def test_the_view_keeps_every_kbest_score_up_to_the_fixed_columns_weight(case, column, data):
    """A hypothesis' score in the view is c times its score under the full weights the view gives back (c, the
    fixed column's weight, > 0): the tuner ranks exactly as the decoder will; fixed weights stay at the start's."""
    kbest, fixed, start = case
    view = FixedFeatures(kbest.space, start, lambda name: name in fixed)
    projected = view.kbest(kbest)
    assert FIXED_COLUMN not in kbest.space and projected.space is view.space
    w_view = np.array(data.draw(st.lists(st.integers(-3, 3), min_size=len(view.space), max_size=len(view.space))),
                      dtype=float)
    if view.has_column:
        w_view[view.column] = column
    w_full = view.weights_out(w_view)
    scale = column if view.has_column and view.informative else 1.0
    for name in fixed & set(kbest.space.names):
        assert w_full[kbest.space.index(name)] == start[kbest.space.index(name)]
    full_scores = kbest.scores(w_full)
    view_scores = projected.scores(w_view)
    if scale != 1.0:
        assert view_scores == pytest.approx(scale * full_scores, abs=1e-9)
    else:  # no column, or one constant within each list: the same score differences within every list
        for s in range(kbest.n_instances):
            rows = list(kbest.rows(s))
            difference = view_scores[rows] - full_scores[rows]
            assert difference == pytest.approx(np.full(len(rows), difference[0]), abs=1e-9)
    free = [view.space.index(n) for n in view.space.names if n != FIXED_COLUMN]
    assert view.weights_in(w_full)[free] == pytest.approx(w_view[free] / scale)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_the_view_keeps_every_edge_score_and_viterbi(data):
    """Forests: every edge's score in the view is c times its score under the full weights given back, so the
    Viterbi derivation is the same; an edge's fixed features become one fixed-column entry."""
    space = FeatureSpace(DENSE, ["s1", "s2"])
    forest = data.draw(forests_of(space))
    fixed = set(data.draw(st.lists(st.sampled_from(space.names), max_size=4)))
    start = np.array(data.draw(st.lists(st.integers(-2, 2), min_size=len(space), max_size=len(space))), dtype=float)
    view = FixedFeatures(space, start, lambda name: name in fixed)
    projected = view.forest(forest)
    w_view = np.array(data.draw(st.lists(st.integers(-3, 3), min_size=len(view.space), max_size=len(view.space))),
                      dtype=float)
    if view.has_column:
        w_view[view.column] = data.draw(st.floats(0.1, 3.0))
    w_full = view.weights_out(w_view)
    scale = w_view[view.column] if view.has_column and view.informative else 1.0
    assert projected.edge_scores(w_view) == pytest.approx(scale * forest.edge_scores(w_full), abs=1e-9)
    assert projected.viterbi(w_view).score == pytest.approx(scale * forest.viterbi(w_full).score, abs=1e-9)
    for e in range(projected.n_edges):
        ids = projected.feat_ids[projected.feat_offsets[e]:projected.feat_offsets[e + 1]]
        assert np.unique(ids).shape == ids.shape
    assert all(w_full[space.index(n)] == start[space.index(n)] for n in fixed)


def forests_of(space):
    @st.composite
    def draw_forest(draw):
        draws = HypothesisDraws(draw)
        return random_forest(draws, space, Vocabulary(), draws.integer(1, 6))
    return draw_forest()


def test_patterns_and_a_non_positive_fixed_column():
    assert matches("LexicalReordering0_3", ["LM0", "LexicalReordering0_*"]) and not matches("LM0_0", ["LM0"])
    space = FeatureSpace(["a", "b"])
    builder = KBestBuilder(space)
    builder.add(0, "x", np.array([1.0, 0.0]))
    builder.add(0, "y", np.array([0.0, 1.0]))
    view = FixedFeatures(space, np.array([1.0, 2.0]), lambda name: name == "b")
    view.kbest(builder.build())
    assert view.informative and view.space.names == ["a", FIXED_COLUMN]
    assert view.weights_out(np.array([3.0, -1.0])).tolist() == [3.0, 2.0] and view.unscaled == 1


@pytest.mark.parametrize("tuner", ["mert", "pro", "oro", "structsvm", "hg-mert"])
def test_fixed_weights_never_move_in_any_tuner_family(tuner, moses_system, tmp_path):
    """minismt's decoder, LM0 and the six reordering weights fixed: every iteration of an n-best, online,
    reference-needing and hypergraph tuner decodes with them at their start values, and the free ones move."""
    data, model = moses_system
    sources, references = read_lines(data / "dev.src"), [[r] for r in read_lines(data / "dev.tgt")]
    decoder = MinismtDevDecoder(str(model), sources, stack_size=20, kbest=20)
    lines = []
    run = TuningRun(decoder, references, tuner, tmp_path / "run", max_iter=3, seed=1,
                    fix=["LM0_0", "LexicalReordering0_*"],
                    on_iteration=lines.append)
    start = decoder.default_weights.copy()
    final = run.run(start)
    fixed = [decoder.space.index(n) for n in decoder.space.names if n == "LM0_0" or n.startswith("LexicalReordering0_")]
    assert len(fixed) == 7 and lines[0].startswith("fixed features (their weights stay): LexicalReordering0_0")
    for record in run.history:
        assert np.array_equal(np.asarray(record.weights)[fixed], start[fixed])
    assert np.array_equal(final[fixed], start[fixed])
    assert any(not np.allclose(r.weights, start) for r in run.history[1:])
    assert run.view.informative and run.view.unscaled == 0
    settings = json.loads((tmp_path / "run" / "run.json").read_text())
    assert settings["fixed_features"] == {"fix": ["LM0_0", "LexicalReordering0_*"], "free": []}


def _edit_ini(source, target, replacements: dict[str, str]) -> None:
    text = source.read_text(encoding="utf-8")
    for old, new in replacements.items():
        assert old in text
        text = text.replace(old, new)
    target.write_text(text, encoding="utf-8")


def test_moses_tuneable_false_features_keep_their_moses_ini_weights(tmp_path, capsys):
    """A moses.ini with PhrasePenalty tuneable=false: the driver fixes it and UnknownWordPenalty0 (untuneable by
    default), as ``moses -show-weights`` says; the tuned moses.ini keeps both weights; they cannot be freed."""
    folder, command = _moses_fixture()
    ini = tmp_path / "moses.ini"
    _edit_ini(folder / "moses.untuned.ini", ini, {"\nPhrasePenalty\n": "\nPhrasePenalty tuneable=false\n"})
    decoder = MosesDevDecoder(command, ini, read_lines(folder / "dev20.src"), tmp_path / "w")
    assert decoder.untuneable == {"UnknownWordPenalty0_0", "PhrasePenalty0_0"} and decoder.components == {}
    base = ["tune", "--decoder", "moses", "--decoder-cmd", _quote(command), "--config", str(ini),
            "--dev-src", str(folder / "dev20.src"), "--dev-ref", str(folder / "dev20.ref"), "--tuner", "pro",
            "--iterations", "2", "--keep", "last", "--quiet", "--step-search", "none"]  # 5 of 20 search graphs
    assert cli(base + ["--run-dir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "fixed features (their weights stay): UnknownWordPenalty0_0 1, PhrasePenalty0_0 0.2"
    tuned = flatten_weights(read_moses_ini_weights(tmp_path / "run" / "moses.ini"))
    assert tuned["UnknownWordPenalty0_0"] == 1 and tuned["PhrasePenalty0_0"] == 0.2
    assert tuned != flatten_weights(read_moses_ini_weights(ini))
    assert cli(base + ["--run-dir", str(tmp_path / "run2"), "--free", "UnknownWordPenalty0_0"]) == 2
    assert "makes it untuneable" in capsys.readouterr().err
    assert cli(base + ["--run-dir", str(tmp_path / "run3"), "--iterations", "1", "--fix", "LM0"]) == 0
    assert "note: 'LM0' matches no feature (yet): the features are UnknownWordPenalty0_0, WordPenalty0_0" in \
        capsys.readouterr().out  # a producer name, not a feature name (LM0_0)


def test_cdec_features_missing_from_the_start_weights_stay_at_zero_unless_freed(tmp_path):
    """cdec: a feature the --init weights file does not name keeps weight 0 (as cdec's own tuners leave it);
    --free tunes it."""
    folder, command = _cdec_fixture()
    init = tmp_path / "weights.init"
    init.write_text("".join(line + "\n" for line in read_lines(folder / "weights.init")
                            if not line.startswith(("PassThrough", "Glue"))))
    base = ["tune", "--decoder", "cdec", "--decoder-cmd", _quote(command), "--config", str(folder / "cdec.ini"),
            "--init", str(init), "--dev-src", str(folder / "dev.src"), "--dev-ref", str(folder / "dev.refs"),
            "--tuner", "pro", "--iterations", "2", "--keep", "last", "--quiet"]
    assert cli(base + ["--run-dir", str(tmp_path / "fixed")]) == 0
    tuned = read_weights(tmp_path / "fixed" / "weights.cdec")
    assert "PassThrough" not in tuned and "Glue" not in tuned and set(tuned) == set(read_weights(init))
    assert cli(base + ["--run-dir", str(tmp_path / "freed"), "--free", "PassThrough,Glue"]) == 0
    freed = read_weights(tmp_path / "freed" / "weights.cdec")
    assert freed.get("PassThrough", 0.0) != 0.0 and freed.get("Glue", 0.0) != 0.0


def test_real_moses_untuneable_features_and_components(moses_system, tmp_path):
    """The real Moses: PhrasePenalty tuneable=false, the second phrase-table score untuneable
    (tuneable-components=1,0,1,1) and UnknownWordPenalty0: -show-weights is read as mert-moses.pl reads it, the
    n-best lists (which print three phrase-table scores) are read into the right columns, and MERT and APRO
    keep the three weights of moses.ini while the tuned moses.ini decodes to the dev BLEU the run reported."""
    moses = shared_path("tools", "moses", "bin", "moses")
    data, model = moses_system
    ini = tmp_path / "moses.ini"
    _edit_ini(model / "moses.ini", ini, {"\nPhrasePenalty\n": "\nPhrasePenalty tuneable=false\n",
                                         "PhraseDictionaryMemory ":
                                             "PhraseDictionaryMemory tuneable-components=1,0,1,1 "})
    start = flatten_weights(read_moses_ini_weights(ini))
    untuneable, components = untuneable_features([str(moses)], str(ini), start)
    assert untuneable == {"UnknownWordPenalty0_0", "PhrasePenalty0_0", "TranslationModel0_1"}
    assert components == {"TranslationModel0": [0, 2, 3]}
    decoder = MosesDevDecoder([str(moses)], ini, read_lines(data / "dev.src")[:3], tmp_path / "w", kbest=5)
    kbest, _ = decoder.decode(decoder.default_weights, 0)
    tm = [decoder.space.index(f"TranslationModel0_{i}") for i in range(4)]
    assert np.all(kbest.features[:, tm[1]] == 0) and np.all(kbest.features[:, [tm[0], tm[2], tm[3]]] != 0)
    for tuner in ("mert", "apro"):
        run_dir = tmp_path / tuner
        assert cli(["tune", "--decoder", "moses", "--decoder-cmd", f"{moses} -threads 1", "--config", str(ini),
                    "--dev-src", str(data / "dev.src"), "--dev-ref", str(data / "dev.tgt"), "--tuner", tuner,
                    "--iterations", "2", "--seed", "1", "--run-dir", str(run_dir), "--quiet"]) == 0
        tuned = flatten_weights(read_moses_ini_weights(run_dir / "moses.ini"))
        assert {n: tuned[n] for n in untuneable} == {n: start[n] for n in untuneable}
        history = json.loads((run_dir / "checkpoint.json").read_text())["history"]
        moved = dict(zip(decoder.space.names, history[1]["weights"]))
        assert {n: moved[n] for n in untuneable} == {n: start[n] for n in untuneable} and moved != start
        reported = max(r["dev_bleu"] for r in history)
        output = subprocess.run([str(moses), "-f", str(run_dir / "moses.ini"), "-i", str(data / "dev.src"),
                                 "-threads", "1"], capture_output=True, text=True, check=True).stdout.splitlines()
        assert corpus_bleu(output, [[r] for r in read_lines(data / "dev.tgt")]) == pytest.approx(reported, abs=1e-12)
