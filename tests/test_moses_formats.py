"""Moses n-best lists, extractor features.dat/scores.dat and moses.ini: real Moses files, fuzzing."""

from __future__ import annotations

import gzip
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import shared_path
from fuzz_lines import mutations
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.kbest import KBestBuilder
from minismt.metrics import BleuReferences, corpus_bleu_from_stats
from plugins.moses.ini import (flatten_weights, group_weights, read_moses_ini_weights,
                               write_moses_ini)
from plugins.moses.mertfiles import (read_extractor_files, read_features_dat, read_scores_dat,
                                     write_features_dat, write_scores_dat)
from plugins.moses.nbest import (NbestEntry, format_nbest_line, iter_nbest, parse_nbest_line,
                                 read_nbest, write_kbest_nbest, write_nbest)

# Sentence counts of nbest.dev20.txt stated in fixtures/moses/m30k/README.md.
M30K_COUNTS = [100, 18, 49, 100, 32, 42, 100, 74, 100, 86, 60, 100, 100, 100, 88, 70, 100, 34, 100, 37]

# (folder, n-best list the extractor read, reference files), fixtures/moses/README.md.
EXTRACTOR_RUNS = [
    ("example", "NBEST.eqlabels", ["REF.0", "REF.1", "REF.2"]),
    ("scorer100", "nbest.eqlabels", ["reference.100.txt"]),
    ("sparse_demo", "NBEST.sparse", ["REF.0", "REF.1", "REF.2"]),
]

# 1-best corpus BLEU and summed 1-best statistics stated in fixtures/moses/README.md.
ONE_BEST = [
    ("example", 0.938144, [41, 41, 37, 38, 33, 35, 27, 32, 39]),
    ("scorer100", 0.072223, [948, 1750, 306, 1650, 127, 1550, 62, 1450, 2870]),
]

EXAMPLE_DENSE = ["d_0", "d_1", "d_2", "d_3", "d_4", "d_5", "d_6", "lm_0", "lm_1",
                 "tm_0", "tm_1", "tm_2", "tm_3", "tm_4", "w_0"]


def moses(*parts: str):
    return shared_path("fixtures", "moses", *parts)


def file_lines(path) -> list[str]:
    data = path.read_bytes().decode("utf-8")
    assert data.endswith("\n")
    return data[:-1].split("\n")


# ---- n-best lists ---------------------------------------------------------------------

def test_m30k_nbest_round_trips_byte_for_byte(tmp_path):
    path = moses("m30k", "nbest.dev20.txt")
    entries = list(iter_nbest(path))
    assert [format_nbest_line(e) for e in entries] == file_lines(path)
    write_nbest(tmp_path / "out.txt", entries)
    assert (tmp_path / "out.txt").read_bytes() == path.read_bytes()
    first = entries[0]
    assert first.text == "a group of men loading baumwolle on a truck "
    assert first.features[:2] == [("LexicalReordering0", [-1.68182, 0.0, 0.0, -0.718026, 0.0, 0.0]),
                                  ("Distortion0", [0.0])]
    assert first.score == -103.904 and first.alignment is None and first.line == 1


def test_m30k_nbest_counts_and_names():
    path = moses("m30k", "nbest.dev20.txt")
    kb = read_nbest(path)
    assert kb.n_hypotheses == 1490 == len(file_lines(path))
    assert np.diff(kb.offsets).tolist() == M30K_COUNTS
    assert kb.space.dense_names == (
        [f"LexicalReordering0_{i}" for i in range(6)] + ["Distortion0_0", "LM0_0", "WordPenalty0_0",
                                                         "PhrasePenalty0_0"]
        + [f"TranslationModel0_{i}" for i in range(4)])
    assert kb.hypothesis(0) == "a group of men loading baumwolle on a truck "
    # "distinct": no two entries of a sentence share a string
    for i in range(kb.n_instances):
        texts = kb.texts(kb.rows(i))
        assert len(set(texts)) == len(texts)


def test_m30k_total_is_weighted_sum_plus_unknown_word_penalty():
    """total = w.h + (-100) x (unknown words), w from moses.mert.ini; UnknownWordPenalty0 is not printed."""
    weights = flatten_weights(read_moses_ini_weights(moses("m30k", "moses.mert.ini")))
    sources = file_lines(moses("m30k", "dev20.src"))
    kb = read_nbest(moses("m30k", "nbest.dev20.txt"))
    residual = [e.score - sum(weights[n] * v for n, v in zip(e.dense_names(), e.dense_values()))
                for e in iter_nbest(moses("m30k", "nbest.dev20.txt"))]
    residual = np.array(residual)
    unknown = np.round(residual / -100.0)
    assert np.all(np.abs(residual + 100.0 * unknown) < 1e-3)
    assert unknown.min() == 0 and (unknown == 0).sum() > 0
    assert unknown[0] == 1  # sentence 0, "baumwolle" copied through (README)
    # the same through the KBest (the space has no UnknownWordPenalty0, so it is 0 there)
    known = {k: v for k, v in weights.items() if k in kb.space}
    assert np.allclose(kb.scores(known) - 100.0 * unknown, [e.score for e in iter_nbest(
        moses("m30k", "nbest.dev20.txt"))], atol=1e-3)
    # a copied-through word is a source word: a line with k unknown words has >= k of them
    sentence = np.repeat(kb.sentence_ids, np.diff(kb.offsets))
    for row, k in enumerate(unknown):
        source = set(sources[sentence[row]].split())
        assert sum(t in source for t in kb.hypothesis(row).split()) >= k


@pytest.mark.parametrize("folder,name", [("example", "NBEST"), ("scorer100", "nbest.out")])
def test_legacy_labels_match_eqlabels(tmp_path, folder, name):
    """Old-style ``d:`` labels read as ``d=``; written back in the new style they read the same."""
    legacy = list(iter_nbest(moses(folder, name)))
    eq_path = moses(folder, "nbest.eqlabels" if folder == "scorer100" else "NBEST.eqlabels")
    eq = list(iter_nbest(eq_path))
    assert legacy == eq
    # eqlabels lists: byte-identical except the missing space of "0|||" (we write "0 |||")
    expected = [re.sub(r"^(\d+)\|\|\|", r"\1 |||", line) for line in file_lines(eq_path)]
    assert [format_nbest_line(e) for e in eq] == expected
    write_nbest(tmp_path / "new.txt", legacy)
    assert list(iter_nbest(tmp_path / "new.txt")) == [
        NbestEntry(e.sentence, e.text, e.features, e.sparse, e.score, e.alignment, e.line)
        for e in legacy]
    kb = read_nbest(moses(folder, name))
    assert kb.space.dense_names == EXAMPLE_DENSE
    assert np.array_equal(kb.features, read_nbest(tmp_path / "new.txt").features)
    assert legacy[0].text == "this should also be there is looking further . "


def test_sparse_nbest_and_kbest_writer(tmp_path):
    path = moses("sparse_demo", "NBEST.sparse")
    entries = list(iter_nbest(path))
    # README: " sp_a= 1" on every 7th line, " sp_b= -0.5" on every 5th, counting from 0
    for k, e in enumerate(entries):
        assert e.sparse == dict([("sp_a", 1.0)] * (k % 7 == 0) + [("sp_b", -0.5)] * (k % 5 == 0))
    assert [format_nbest_line(e) for e in entries] == [
        re.sub(r"^(\d+)\|\|\|", r"\1 |||", line) for line in file_lines(path)]
    kb = read_nbest(path)
    assert kb.space.sparse_names == ["sp_a", "sp_b"]
    weights = dict(zip(kb.space.names, np.linspace(-1, 1, len(kb.space))))
    write_kbest_nbest(tmp_path / "kb.txt", kb, weights)
    again = read_nbest(tmp_path / "kb.txt")
    assert again.space == kb.space
    assert np.array_equal(again.features, kb.features) and again.texts() == kb.texts()
    assert np.array_equal(again.indices, kb.indices) and np.array_equal(again.values, kb.values)
    scores = [e.score for e in iter_nbest(tmp_path / "kb.txt")]
    assert np.allclose(scores, kb.scores(weights), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dense,sparse,message", [
    (["LM"], [], "cannot be written as a Moses label group"),
    (["L_M_0"], [], "cannot be written as a Moses label group"),
    (["LM_1"], [], "out of order"),
    (["LM_0", "TM_0", "LM_1"], [], "out of order"),
    (["LM_0"], ["sparse"], "cannot be written to a Moses n-best"),
])
def test_write_kbest_nbest_rejects_unwritable_names(tmp_path, dense, sparse, message):
    space = FeatureSpace(dense, sparse)
    builder = KBestBuilder(space)
    builder.add(0, "a b ", np.ones(len(dense)), [len(dense)] if sparse else [], [1.0] if sparse else [])
    with pytest.raises(InputError, match=re.escape(message)):
        write_kbest_nbest(tmp_path / "out", builder.build(), np.ones(len(space)))
    assert not (tmp_path / "out").exists()


def test_read_nbest_with_given_space():
    path = moses("example", "NBEST.eqlabels")
    space = FeatureSpace(["extra_0"] + EXAMPLE_DENSE[::-1])
    kb = read_nbest(path, space=space, n_sentences=5)
    plain = read_nbest(path)
    assert kb.n_instances == 5 and np.diff(kb.offsets).tolist() == [100, 100, 100, 0, 0]
    assert np.all(kb.features[:, 0] == 0)
    assert np.array_equal(kb.features[:, 1:], plain.features[:, ::-1])
    with pytest.raises(InputError, match=r"NBEST.eqlabels:1\b"):
        read_nbest(path, space=FeatureSpace(EXAMPLE_DENSE[:-1]))
    with pytest.raises(InputError, match=r"NBEST.eqlabels:201\b"):
        read_nbest(path, n_sentences=2)


def test_alignment_field_and_exact_text():
    line = "3|||  x  y   |||  A= 1 -0 B_c= 2.5 |||  -0.5  ||| 0-0 1-1 "
    e = parse_nbest_line(line)
    assert (e.sentence, e.text, e.features, e.sparse, e.score, e.alignment) == (
        3, " x  y  ", [("A", [1.0, -0.0])], {"B_c": 2.5}, -0.5, "0-0 1-1 ")
    assert format_nbest_line(e) == "3 |||  x  y   ||| A= 1 -0 B_c= 2.5 ||| -0.5 ||| 0-0 1-1 "
    assert parse_nbest_line(format_nbest_line(e)) == e


@pytest.mark.parametrize("text,message", [
    ("0 ||| a ||| A= 1", "3 fields"),
    ("0 ||| a ||| A= 1 ||| 2 ||| x ||| y", "6 fields"),
    (" ||| a ||| A= 1 ||| 2", "empty sentence id"),
    ("x ||| a ||| A= 1 ||| 2", "not a non-negative integer"),
    ("1.0 ||| a ||| A= 1 ||| 2", "not a non-negative integer"),
    ("-1 ||| a ||| A= 1 ||| 2", "negative sentence id"),
    ("0 ||| a ||| 1 A= 1 ||| 2", "before any feature label"),
    ("0 ||| a ||| A= B= 1 ||| 2", "has no values"),
    ("0 ||| a ||| A= 1 B= ||| 2", "has no values"),
    ("0 ||| a ||| A= nan ||| 2", "not finite"),
    ("0 ||| a ||| A= inf ||| 2", "not finite"),
    ("0 ||| a ||| A= 1e999 ||| 2", "not finite"),
    ("0 ||| a ||| A= 1_0 ||| 2", "not a number"),
    ("0 ||| a ||| A= x=1 ||| 2", "not a number"),
    ("0 ||| a ||| A= 1 s_x= 2 3 ||| 2", "where a label is expected"),
    ("0 ||| a ||| A= 1 s_x= ||| 2", "has no value"),
    ("0 ||| a ||| A= 1 s_x= B= 2 ||| 2", "not a number"),
    ("0 ||| a ||| A= 1 A= 2 ||| 2", "given twice"),
    ("0 ||| a ||| = 1 ||| 2", "empty feature label"),
    ("0 ||| a ||| A= 1 ||| ", "0 tokens"),
    ("0 ||| a ||| A= 1 ||| 2 3", "2 tokens"),
    ("0 ||| a ||| A= 1 ||| nan", "not finite"),
    ("", "1 fields"),
])
def test_malformed_nbest_lines(tmp_path, text, message):
    path = tmp_path / "nbest"
    path.write_text("0 ||| ok ||| A= 1 ||| 1\n" + text + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(message)) as info:
        list(iter_nbest(path))
    assert info.value.path == str(path) and info.value.line == 2


@pytest.mark.parametrize("lines,line,message", [
    (["1 ||| a ||| A= 1 ||| 1", "0 ||| b ||| A= 1 ||| 1"], 2, "sentence id 0 after 1"),
    (["0 ||| a ||| A= 1 ||| 1", "0 ||| b ||| A= 1 2 ||| 1"], 2, "feature groups differ"),
    (["0 ||| a ||| A= 1 ||| 1", "0 ||| b ||| B= 1 ||| 1"], 2, "feature groups differ"),
    (["0 ||| a ||| A= 1 ||| 1", "0 ||| b ||| A= 1 A_0= 2 ||| 1"], 2, "name of a dense value"),
    (["99999999999 ||| a ||| A= 1 ||| 1"], 1, "sentence id 99999999999"),
])
def test_malformed_nbest_lists(tmp_path, lines, line, message):
    path = tmp_path / "nbest"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(message)) as info:
        read_nbest(path)
    assert info.value.path == str(path) and info.value.line == line


def test_nbest_gzip_and_bad_bytes(tmp_path):
    data = moses("example", "NBEST.eqlabels").read_bytes()
    (tmp_path / "n.gz").write_bytes(gzip.compress(data))
    assert read_nbest(tmp_path / "n.gz").n_hypotheses == 300
    (tmp_path / "bad").write_bytes(data[:1000] + b"\xff" + data[1000:])
    with pytest.raises(InputError, match="not UTF-8"):
        read_nbest(tmp_path / "bad")


# ---- extractor files ----------------------------------------------------------------------

@pytest.mark.parametrize("folder", ["example", "scorer100", "sparse_demo"])
def test_extractor_files_round_trip_byte_for_byte(tmp_path, folder):
    features, scores = moses(folder, "features.dat"), moses(folder, "scores.dat")
    write_features_dat(tmp_path / "features.dat", read_features_dat(features))
    write_scores_dat(tmp_path / "scores.dat", read_scores_dat(scores))
    assert (tmp_path / "features.dat").read_bytes() == features.read_bytes()
    assert (tmp_path / "scores.dat").read_bytes() == scores.read_bytes()


def test_legacy_features_dat_round_trips(tmp_path):
    path = moses("example", "features.legacy-labels.dat")
    blocks = list(read_features_dat(path))
    assert blocks[0].names == [f"_{i}" for i in range(19)]
    write_features_dat(tmp_path / "f.dat", blocks)
    assert (tmp_path / "f.dat").read_bytes() == path.read_bytes()


@pytest.mark.parametrize("folder,nbest,refs", EXTRACTOR_RUNS)
def test_bleu_stats_equal_scores_dat(folder, nbest, refs):
    """Our statistics of the n-best strings = the extractor's, hypothesis by hypothesis."""
    kx = read_extractor_files([moses(folder, "features.dat")], [moses(folder, "scores.dat")])
    kb = read_nbest(moses(folder, nbest))
    references = BleuReferences.from_files([moses(folder, r) for r in refs])
    assert kx.n_hypotheses == kb.n_hypotheses  # the extractor removed no duplicate (README)
    assert np.array_equal(references.kbest_stats(kb), kx.stats)
    assert kx.space == kb.space
    assert np.array_equal(kx.features, kb.features)
    assert np.array_equal(kx.indptr, kb.indptr) and np.array_equal(kx.indices, kb.indices)
    assert np.array_equal(kx.values, kb.values)
    assert kx.texts() == [""] * kx.n_hypotheses


@pytest.mark.parametrize("folder,bleu,summed", ONE_BEST)
def test_one_best_bleu_matches_readme(folder, bleu, summed):
    kx = read_extractor_files([moses(folder, "features.dat")], [moses(folder, "scores.dat")])
    first = kx.stats[kx.offsets[:-1]]
    assert first.sum(axis=0).tolist() == summed
    assert corpus_bleu_from_stats(first, smooth="none") == pytest.approx(bleu, abs=1e-6)
    assert corpus_bleu_from_stats(first) == pytest.approx(bleu, abs=1e-6)


def test_extractor_files_of_several_iterations_are_merged():
    f, s = moses("example", "features.dat"), moses("example", "scores.dat")
    sf, ss = moses("sparse_demo", "features.dat"), moses("sparse_demo", "scores.dat")
    one = read_extractor_files([f], [s])
    both = read_extractor_files([f, sf], [s, ss])
    assert np.diff(both.offsets).tolist() == [200, 200, 200]
    for i in range(3):
        rows = list(both.rows(i))
        assert np.array_equal(both.features[rows[:100]], one.features[list(one.rows(i))])
        assert np.array_equal(both.features[rows[100:]], one.features[list(one.rows(i))])
        assert np.array_equal(both.stats[rows[100:]], one.stats[list(one.rows(i))])
    assert both.space.sparse_names == ["sp_a", "sp_b"]
    assert both.indptr[100] == 0 and both.indptr[101] == 2


def test_extractor_mismatches(tmp_path):
    f, s = moses("example", "features.dat"), moses("example", "scores.dat")
    lines = s.read_text(encoding="utf-8").split("\n")
    lines[0] = lines[0].replace(" 0 100 ", " 1 100 ")
    (tmp_path / "s1").write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(InputError, match="sentence 0 with 100 hypotheses") as info:
        read_extractor_files([f], [tmp_path / "s1"])
    assert info.value.line == 1
    (tmp_path / "s2").write_text("\n".join(s.read_text(encoding="utf-8").split("\n")[:204]) + "\n",
                                 encoding="utf-8")
    with pytest.raises(InputError, match="has no scores block") as info:
        read_extractor_files([f], [tmp_path / "s2"])
    assert info.value.path == str(f) and info.value.line == 205
    with pytest.raises(InputError, match="one scores file per features file"):
        read_extractor_files([f, f], [s])
    with pytest.raises(InputError, match="dense feature names differ"):
        read_extractor_files([f, moses("example", "features.legacy-labels.dat")], [s, s])


@pytest.mark.parametrize("text,line,message", [
    ("FEATURES_TXT_BEGIN_0 0 2 2 a b \n1 2 \nFEATURES_TXT_END_0\n", 3, "after 1 of 2"),
    ("FEATURES_TXT_BEGIN_0 0 1 2 a b \n1 2 \n1 2 \n", 3, "after 1 hypothesis lines"),
    ("FEATURES_TXT_BEGIN_0 0 1 2 a b \n1 2 \n", 3, "file ends without"),
    ("FEATURES_TXT_BEGIN_0 0 3 2 a b \n1 2 \n", 3, "file ends after 1 of 3"),
    ("FEATURES_TXT_BEGIN_0 0 1 2 a \n1 2 \nFEATURES_TXT_END_0\n", 1, "1 feature names"),
    ("FEATURES_TXT_BEGIN_0 0 1 2 a a \n1 2 \nFEATURES_TXT_END_0\n", 1, "given twice"),
    ("FEATURES_TXT_BEGIN_0 -1 1 2 a b \n1 2 \nFEATURES_TXT_END_0\n", 1, "non-negative integer"),
    ("FEATURES_TXT_BEGIN_0 0 1 \n", 1, "3 fields"),
    ("FEATURES_TXT_BEGIN_0 0 1 2 a b \n1 2 3 \nFEATURES_TXT_END_0\n", 2, "3 dense values"),
    ("FEATURES_TXT_BEGIN_0 0 1 2 a b \n1 nan \nFEATURES_TXT_END_0\n", 2, "not finite"),
    ("FEATURES_TXT_BEGIN_0 0 1 2 a b \n1 2 =3 \nFEATURES_TXT_END_0\n", 2, "without a name"),
    ("FEATURES_TXT_BEGIN_0 0 1 2 a b \n1 2 x=1 x=2 \nFEATURES_TXT_END_0\n", 2, "given twice"),
    ("FEATURES_TXT_BEGIN_0 0 1 2 a b \n1 2 x= \nFEATURES_TXT_END_0\n", 2, "not a number"),
    ("1 2 \n", 1, "where a block starts"),
])
def test_malformed_features_dat(tmp_path, text, line, message):
    (tmp_path / "f").write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(message)) as info:
        list(read_features_dat(tmp_path / "f"))
    assert info.value.line == line and info.value.path == str(tmp_path / "f")


@pytest.mark.parametrize("text,line,message", [
    ("SCORES_TXT_BEGIN_0 0 1 9 BLEU\n1 1 1 1 1 1 1 1 \nSCORES_TXT_END_0\n", 2, "8 statistics"),
    ("SCORES_TXT_BEGIN_0 0 1 8 BLEU\n1 1 1 1 1 1 1 1 \nSCORES_TXT_END_0\n", 1, "BLEU block with 8"),
    ("SCORES_TXT_BEGIN_0 0 1 9 BLEU\n1 1 1 1 1 1 1 1.5 1 \nSCORES_TXT_END_0\n", 2, "must be counts"),
    ("SCORES_TXT_BEGIN_0 0 1 9 BLEU\n1 1 1 1 1 1 1 -1 1 \nSCORES_TXT_END_0\n", 2, "must be counts"),
    ("SCORES_TXT_BEGIN_0 0 1 9\n", 1, "4 fields"),
    ("SCORES_TXT_BEGIN_0 0 1 2 TER\n1 inf \nSCORES_TXT_END_0\n", 2, "not finite"),
    ("SCORES_TXT_BEGIN_0 0 1 2 TER\n1 2 \nSCORES_TXT_END\n", 3, "after 1 hypothesis lines"),
])
def test_malformed_scores_dat(tmp_path, text, line, message):
    (tmp_path / "s").write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(message)) as info:
        list(read_scores_dat(tmp_path / "s"))
    assert info.value.line == line


# ---- moses.ini --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["mert", "kbmira", "untuned"])
def test_moses_ini_round_trip(tmp_path, name):
    src = moses("m30k", f"moses.{name}.ini")
    grouped = read_moses_ini_weights(src)
    assert len(grouped) == 7 and grouped["UnknownWordPenalty0"] == [1.0]
    assert len(grouped["LexicalReordering0"]) == 6 and len(grouped["TranslationModel0"]) == 4
    flat = flatten_weights(grouped)
    assert len(flat) == 15 and group_weights(flat) == grouped
    write_moses_ini(src, tmp_path / "same.ini", flat)
    assert (tmp_path / "same.ini").read_bytes() == src.read_bytes()
    write_moses_ini(src, tmp_path / "none.ini", {})
    assert (tmp_path / "none.ini").read_bytes() == src.read_bytes()

    changes = {"LM0_0": 0.125, "TranslationModel0_2": -1e-7, "LexicalReordering0_5": 3.0}
    write_moses_ini(src, tmp_path / "new.ini", changes)
    new = read_moses_ini_weights(tmp_path / "new.ini")
    expected = dict(flat, **changes)
    assert flatten_weights(new) == expected
    old_lines = src.read_text(encoding="utf-8").split("\n")
    new_lines = (tmp_path / "new.ini").read_text(encoding="utf-8").split("\n")
    assert len(old_lines) == len(new_lines)
    changed_values = 0
    for old, line in zip(old_lines, new_lines):
        if old == line:
            continue
        old_tokens, new_tokens = old.split(" "), line.split(" ")
        assert old_tokens[0] in ("LM0=", "TranslationModel0=", "LexicalReordering0=")
        assert len(old_tokens) == len(new_tokens)
        changed_values += sum(a != b for a, b in zip(old_tokens, new_tokens))
    assert changed_values == 3


def test_moses_ini_keeps_comments_and_line_endings(tmp_path):
    src = tmp_path / "in.ini"
    src.write_bytes(b"[feature]\r\nLM0= ignored here\r\n[weight]  # w\r\n\r\n# c\r\n"
                    b"LM0=   0.5\t0.25  # keep\r\nWordPenalty0= -1\r\n[other]\r\nX= y")
    assert read_moses_ini_weights(src) == {"LM0": [0.5, 0.25], "WordPenalty0": [-1.0]}
    write_moses_ini(src, tmp_path / "out.ini", {"LM0_1": 2.0, "WordPenalty0_0": -1.0})
    assert (tmp_path / "out.ini").read_bytes() == src.read_bytes().replace(b"0.25", b"2.0")


@pytest.mark.parametrize("weights,message", [
    ({"Nope0_0": 1.0}, "no [weight] line for 'Nope0'"),
    ({"LM0_1": 1.0}, "LM0 has 1 weights"),
    ({"LM0": 1.0}, "weight name 'LM0'"),
    ({"LM0_0": float("nan")}, "a finite weight"),
])
def test_write_moses_ini_rejects_unknown_weights(tmp_path, weights, message):
    src = moses("m30k", "moses.mert.ini")
    with pytest.raises(InputError, match=re.escape(message)):
        write_moses_ini(src, tmp_path / "out.ini", weights)
    assert not (tmp_path / "out.ini").exists()


@pytest.mark.parametrize("text,message", [
    ("[weight]\nLM0 0.5\n", "where a weight line starts"),
    ("[weight]\nLM0=0.5\n", "where a weight line starts"),
    ("[weight]\nLM0= x\n", "not a number"),
    ("[weight]\nLM0= nan\n", "not finite"),
    ("[weight]\nLM0= 1\nLM0= 2\n", "given twice"),
    ("[weight\nLM0= 1\n", "section header"),
    ("[feature]\nLM0= 1\n", "no [weight] section"),
])
def test_malformed_moses_ini(tmp_path, text, message):
    (tmp_path / "ini").write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(message)):
        read_moses_ini_weights(tmp_path / "ini")


def test_group_weights_rejects_holes():
    with pytest.raises(InputError, match="indices"):
        group_weights({"A_0": 1.0, "A_2": 2.0})
    with pytest.raises(InputError, match="weight name"):
        group_weights({"A_01": 1.0})


# ---- fuzzing: every reader raises InputError or succeeds -------------------------------------

NBEST_SAMPLE = (
    "0 ||| a group of men loading baumwolle on a truck  ||| LexicalReordering0= -1.68182 0 0 "
    "-0.718026 0 0 Distortion0= 0 LM0= -44.1008 WordPenalty0= -9 PhrasePenalty0= 6 "
    "TranslationModel0= -5.31287 -12.4902 -1.85219 -3.32455 ||| -103.904\n"
    "0 ||| a group of men loading baumwolle onto a truck  ||| LexicalReordering0= -1.15821 0 0 "
    "-0.731259 0 0 Distortion0= 0 LM0= -45.1231 WordPenalty0= -9 PhrasePenalty0= 6 "
    "TranslationModel0= -4.21747 -12.9745 -4.2475 -8.18472 ||| -104.091\n"
    "1 ||| a man sleeps  ||| LexicalReordering0= -1 0 0 -0.5 0 0 Distortion0= 0 LM0= -4.1 "
    "WordPenalty0= -3 PhrasePenalty0= 2 TranslationModel0= -5 -1 -1 -3 sp_a= 1 ||| -10.5 ||| 0-0 1-1\n"
).encode()

LEGACY_SAMPLE = (
    "0||| this should also be there is looking further .  ||| d: 0 -7.66174 0 0 -3.51621 0 0 "
    "lm: -41.3435 -40.3647 tm: -67.6349 -100.438 -27.6817 -23.4685 8.99907 w: -9 ||| -14.6262\n"
    "1||| it should also be there .  ||| d: 0 -8.02947 0 0 -4.98257 0 0 lm: -40.0407 -40.0018 "
    "tm: -66.8678 -103.489 -29.1422 -26.7137 8.99907 w: -9 sp_b: -0.5 ||| -14.7898\n"
).encode()

FEATURES_SAMPLE = (
    "FEATURES_TXT_BEGIN_0 0 2 3 d_0 lm_0 w_0 \n"
    "0 -7.66174 -9 sp_a=1 sp_b=-0.5 \n"
    "-0 -41.3435 8.99907 \n"
    "FEATURES_TXT_END_0\n"
    "FEATURES_TXT_BEGIN_0 1 1 3 d_0 lm_0 w_0 \n"
    "1e-05 -40.0407 -9 sp_b=-0.5 \n"
    "FEATURES_TXT_END_0\n"
).encode()

SCORES_SAMPLE = (
    "SCORES_TXT_BEGIN_0 0 2 9 BLEU\n"
    "9 9 7 8 5 7 4 6 8 \n"
    "11 12 10 11 9 10 8 9 11 \n"
    "SCORES_TXT_END_0\n"
    "SCORES_TXT_BEGIN_0 1 1 9 BLEU\n"
    "7 9 5 8 4 7 3 6 8 \n"
    "SCORES_TXT_END_0\n"
).encode()

INI_SAMPLE = (
    "# MERT optimized configuration\n[feature]\nUnknownWordPenalty\n"
    "KENLM name=LM0 factor=0 path=lm/train.en.binary order=4\n\n[threads]\n2\n[weight]\n"
    "# The default weights are NOT optimized\n"
    "LexicalReordering0= 0.150797 -0.0177256 0.0508231 0.0492686 0.262609 0.0996113\n"
    "Distortion0= 0.00704949\nLM0= 0.0831779  # lm\nUnknownWordPenalty0= 1\n"
).encode()

TOKENS = ["|||", "||", "|", " ||| ", "=", ":", " ", "  ", "\t", "\n", "\r\n", "\r", "0", "1", "7",
          "-", "+", ".", "e", "e+", "-0", "1e-05", "3.5", "nan", "-nan", "inf", "1e999", "1_0",
          "99999999999999999999", "LM0=", "d:", "w:", "sp_a=", "sp_a=1", "a_b:", "=", "x=", "_",
          "#", "[weight]", "[feature]", "[", "]", "LM0= 0.5", "FEATURES_TXT_BEGIN_0",
          "FEATURES_TXT_END_0", "SCORES_TXT_BEGIN_0", "SCORES_TXT_END_0", "BLEU", "TER", "9",
          "2", "é", "\x00", "\u2028", "\x85", "\ufeff"]

token_soup = st.lists(st.sampled_from(TOKENS), max_size=80).map(lambda t: "".join(t).encode())


mutated = mutations(TOKENS)


def documents(*samples: bytes):
    return st.one_of(st.binary(max_size=300), token_soup, *[mutated(s) for s in samples])


FUZZ = settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("moses_fuzz")


def survives(read, *paths) -> None:
    """``read(*paths)`` succeeds or raises InputError; anything else fails the test."""
    try:
        read(*paths)
    except InputError as err:
        assert err.path is not None


def write(path, data: bytes):
    path.write_bytes(data)
    return path


@FUZZ
@given(data=documents(NBEST_SAMPLE, LEGACY_SAMPLE))
def test_fuzz_iter_nbest(fuzz_dir, data):
    survives(lambda p: list(iter_nbest(p)), write(fuzz_dir / "nbest", data))


@FUZZ
@given(data=documents(NBEST_SAMPLE, LEGACY_SAMPLE), n=st.sampled_from([None, 1, 3]))
def test_fuzz_read_nbest(fuzz_dir, data, n):
    survives(lambda p: read_nbest(p, n_sentences=n), write(fuzz_dir / "nbest", data))


@FUZZ
@given(data=documents(FEATURES_SAMPLE))
def test_fuzz_read_features_dat(fuzz_dir, data):
    survives(lambda p: list(read_features_dat(p)), write(fuzz_dir / "features", data))


@FUZZ
@given(data=documents(SCORES_SAMPLE))
def test_fuzz_read_scores_dat(fuzz_dir, data):
    survives(lambda p: list(read_scores_dat(p)), write(fuzz_dir / "scores", data))


@FUZZ
@given(features=st.one_of(st.just(FEATURES_SAMPLE), documents(FEATURES_SAMPLE)),
       scores=st.one_of(st.just(SCORES_SAMPLE), documents(SCORES_SAMPLE)))
def test_fuzz_read_extractor_files(fuzz_dir, features, scores):
    survives(lambda f, s: read_extractor_files([f, f], [s, s]),
             write(fuzz_dir / "features", features), write(fuzz_dir / "scores", scores))


@FUZZ
@given(data=documents(INI_SAMPLE))
def test_fuzz_read_moses_ini_weights(fuzz_dir, data):
    survives(read_moses_ini_weights, write(fuzz_dir / "ini", data))


def test_fuzz_samples_are_valid(tmp_path):
    """The fuzzing seeds themselves read without error (so mutations start from valid input)."""
    assert read_nbest(write(tmp_path / "n", NBEST_SAMPLE)).n_hypotheses == 3
    assert read_nbest(write(tmp_path / "l", LEGACY_SAMPLE)).space.sparse_names == ["sp_b"]
    kb = read_extractor_files([write(tmp_path / "f", FEATURES_SAMPLE)],
                              [write(tmp_path / "s", SCORES_SAMPLE)])
    assert kb.n_hypotheses == 3 and kb.space.sparse_names == ["sp_a", "sp_b"]
    assert read_moses_ini_weights(write(tmp_path / "i", INI_SAMPLE))["LM0"] == [0.0831779]
