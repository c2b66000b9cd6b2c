"""The Hiero rule store (minismt.extract.hiero_store): the grammar of any input read from it is
the grammar filtering the full table gives (``build_grammars``, itself checked against a slow
matcher in test_hiero_scoring), array for array, on random corpora, inputs, chunk sizes and
bucket counts; the store folder appears whole or not at all; what a Hiero model folder does with
inputs no grammar was built for; bad stores."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minismt.cli import main
from minismt.errors import InputError
from minismt.extract.hiero_grammar import build_grammars
from minismt.extract.hiero_store import RuleStore, build_rule_store
from minismt.io import read_lines
from minismt.manifest import load_manifest
from test_hiero_scoring import WORDS_SRC, _encode, _random_corpus

GRAMMAR_ARRAYS = ("source_offsets", "sentence_offsets", "sentence_sources")
TABLE_ARRAYS = ("src_syms", "src_off", "tgt_syms", "tgt_off", "align", "align_off", "scores", "counts")


def _assert_same_grammar(ours, expected) -> None:
    for name in TABLE_ARRAYS:
        a, b = getattr(ours.table, name), getattr(expected.table, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for name in GRAMMAR_ARRAYS:
        a, b = getattr(ours, name), getattr(expected, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), buckets=st.integers(1, 7), chunk_pairs=st.integers(1, 5))
def test_store_grammar_equals_filtering_the_full_table(tmp_path_factory, seed, buckets, chunk_pairs):
    rng = np.random.default_rng(seed)
    src, tgt, alignment, src_vocab, tgt_vocab = _encode(*_random_corpus(rng, int(rng.integers(1, 12)), 12))
    words = WORDS_SRC + ["q"]          # "q" is not in the training corpus
    lines = [" ".join(rng.choice(words, size=int(rng.integers(0, 14)))) for _ in range(int(rng.integers(1, 6)))]
    expected = build_grammars(src, tgt, alignment, src_vocab, tgt_vocab, {"input": lines})[0]["input"]
    folder = tmp_path_factory.mktemp("store") / "store"
    report = build_rule_store(src, tgt, alignment, src_vocab, tgt_vocab, folder, chunk_pairs=chunk_pairs,
                              buckets=buckets)
    store = RuleStore(folder)
    _assert_same_grammar(store.grammar(lines), expected)
    decoding = store.grammar(lines, decoding=True)   # what a decoder reads: no counts or alignments
    for name in ("src_syms", "src_off", "tgt_syms", "tgt_off"):
        assert np.array_equal(getattr(decoding.table, name), getattr(expected.table, name)), name
    for name in GRAMMAR_ARRAYS:
        assert np.array_equal(getattr(decoding, name), getattr(expected, name)), name
    assert decoding.table.scores.dtype == np.float32 and np.array_equal(decoding.table.scores, expected.table.scores)
    assert decoding.table.counts.shape == (len(expected), 0) and decoding.table.align.shape == (0, 2)
    full = build_grammars(src, tgt, alignment, src_vocab, tgt_vocab, None)[0]["all"]
    assert len(store) == report.rules_kept == len(full)


def _matches_within(side: np.ndarray, words: list[int], span: int, consecutive_nonterminals: bool) -> bool:
    """Does the source side (word ids, negative non-terminals) match some span of at most ``span`` words of
    ``words``: each terminal its word, each non-terminal one word or more, in order (slowly, by recursion)?"""
    n = len(words)

    def rest(k: int, p: int, start: int) -> bool:
        if k == len(side):
            return p - start <= span
        if side[k] >= 0:
            return p < n and words[p] == side[k] and rest(k + 1, p + 1, start)
        if k > 0 and side[k - 1] < 0 and not consecutive_nonterminals:
            return False
        return any(rest(k + 1, p + c, start) for c in range(1, n - p + 1))

    return any(rest(0, start, start) for start in range(n))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), span=st.integers(1, 6))
def test_a_grammar_for_a_rule_span_keeps_the_sides_that_match_within_it(tmp_path_factory, seed, span):
    """``max_span``: the rules of the sides that match a span of at most that many words (the decoder's rule
    span: what it can apply), each with the rows and scores of the grammar of any span."""
    rng = np.random.default_rng(seed)
    src, tgt, alignment, src_vocab, tgt_vocab = _encode(*_random_corpus(rng, int(rng.integers(1, 12)), 12))
    lines = [" ".join(rng.choice(WORDS_SRC + ["q"], size=int(rng.integers(0, 16)))) for _ in range(3)]
    folder = tmp_path_factory.mktemp("store") / "store"
    build_rule_store(src, tgt, alignment, src_vocab, tgt_vocab, folder, buckets=3)
    store = RuleStore(folder)
    full, limited = store.grammar(lines), store.grammar(lines, max_span=span)
    encoded = [[src_vocab.get(w) for w in line.split()] for line in lines]
    consecutive = store.options.nonterm_consec_source
    kept = [u for u in range(full.n_sources)
            if any(_matches_within(full.table.src_syms[full.table.src_off[full.source_offsets[u]]:
                                                       full.table.src_off[full.source_offsets[u] + 1]],
                                   words, span, consecutive) for words in encoded)]
    rows = np.concatenate([np.arange(full.source_offsets[u], full.source_offsets[u + 1]) for u in kept]) \
        if kept else np.zeros(0, dtype=np.int64)
    expected = full.table.take(rows)
    for name in TABLE_ARRAYS:
        assert np.array_equal(getattr(limited.table, name), getattr(expected, name)), name
    assert limited.n_sources == len(kept)


def test_store_is_replaced_whole_and_leftovers_go(tmp_path):
    rng = np.random.default_rng(3)
    corpus = _encode(*_random_corpus(rng, 8, 10))
    folder = tmp_path / "store"
    (tmp_path / "store.partial").mkdir()
    (tmp_path / "store.partial" / "junk").write_text("a killed build's leftover")
    build_rule_store(*corpus, folder, buckets=3)
    assert not (tmp_path / "store.partial").exists()
    first = RuleStore(folder).grammar(["a b c"])
    build_rule_store(*corpus, folder, buckets=5)          # an existing store is replaced
    assert RuleStore(folder).info["buckets"] == 5
    _assert_same_grammar(RuleStore(folder).grammar(["a b c"]), first)


def test_bad_stores_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no Hiero rule store"):
        RuleStore(tmp_path / "missing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "store.json").write_text("{not json")
    with pytest.raises(InputError, match="unreadable Hiero rule store"):
        RuleStore(tmp_path / "bad")
    (tmp_path / "bad" / "store.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(InputError, match="not a minismt Hiero rule store"):
        RuleStore(tmp_path / "bad")


def test_a_model_translates_any_input_and_an_old_model_says_why_not(hiero_system, tmp_path, capsys):
    """Trained without --grammar-for, a Hiero model decodes any text (its grammar built from the
    store and cached), the same translations as with a grammar built at training time; a model
    folder without a store (an older minismt) gets one clear line and exit 2."""
    data, trained = hiero_system
    model = tmp_path / "model"
    assert main(["train", "--src", str(data / "train.src"), "--tgt", str(data / "train.tgt"), "--out", str(model),
                 "--lm-order", "3", "--hiero", "--quiet"]) == 0
    assert "grammars" not in json.loads((model / "manifest.json").read_text()) or \
        not json.loads((model / "manifest.json").read_text())["grammars"]
    for folder, out in ((model, "any.out"), (trained, "named.out")):
        assert main(["decode", "--model", str(folder), "--input", str(data / "test.src"), "--output",
                     str(tmp_path / out), "--quiet"]) == 0
    assert read_lines(tmp_path / "any.out") == read_lines(tmp_path / "named.out")
    cached = list((model / "model" / "rule-store" / "grammars").glob("input-*.npz"))
    assert len(cached) == 1 and not list(cached[0].parent.glob(".*.tmp"))
    # one sentence typed in, with a word never seen and an empty line
    typed = ("zzzunseen " + read_lines(data / "test.src")[0] + "\n\n").encode()
    done = subprocess.run([shutil.which("minismt") or str(Path(sys.executable).with_name("minismt")),
                           "decode", "--model", str(model)], input=typed, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.decode().splitlines()
    assert len(printed) == 2 and "zzzunseen" in printed[0].split() and printed[1] == ""  # copied
    # an older model folder: no store
    old = tmp_path / "old"
    shutil.copytree(model, old)
    shutil.rmtree(old / "model" / "rule-store")
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["files"]["rule_store"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["decode", "--model", str(old), "--input", str(data / "dev.src"), "--output",
                 str(tmp_path / "old.out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no rule store" in err[0] and "Traceback" not in err[0]


def test_grammar_command_writes_moses_and_cdec_files_for_any_input_and_weights(hiero_system, tmp_path, capsys):
    """``minismt grammar``: the Moses and cdec files of the test set equal those training wrote for
    it (default weights); other weights go into moses.ini and cdec's weights and move cdec's table
    limit; the real cdec and Moses decode with them when present."""
    import gzip
    from conftest import shared_path
    data, model = hiero_system
    out = tmp_path / "out"
    assert main(["grammar", "--model", str(model), "--input", str(data / "test.src"), "--out", str(out)]) == 0
    trained = model / "grammars" / "test"
    for name in ("rule-table.gz", "cdec/grammar.gz", "cdec/weights", "cdec/input.txt"):
        assert gzip.decompress((out / name).read_bytes()) == gzip.decompress((trained / name).read_bytes()) \
            if name.endswith(".gz") else (out / name).read_text() == (trained / name).read_text(), name
    weights = tmp_path / "weights"
    weights.write_text("TranslationModel0_2 0.9\nLM0_0 0.05\nTranslationModel1_0 -0.5\n")
    assert main(["grammar", "--model", str(model), "--input", str(data / "test.src"), "--out", str(tmp_path / "w"),
                 "--weights", str(weights), "--quiet"]) == 0
    ini = (tmp_path / "w" / "moses.ini").read_text()
    assert "the given weights" in ini and "\nTranslationModel1= -0.5\n" in ini, ini
    from minismt.extract.hiero_export import cdec_weights
    written = dict(line.split() for line in read_lines(tmp_path / "w" / "cdec" / "weights"))
    given = {**load_manifest(model)["default_weights"], "TranslationModel0_2": 0.9, "LM0_0": 0.05,
             "TranslationModel1_0": -0.5}
    assert {k: float(v) for k, v in written.items()} == cdec_weights(given)
    assert gzip.decompress((tmp_path / "w" / "cdec" / "grammar.gz").read_bytes()) != \
        gzip.decompress((out / "cdec" / "grammar.gz").read_bytes())
    capsys.readouterr()
    assert main(["grammar", "--model", str(model), "--input", str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert "missing" in capsys.readouterr().err
    cdec, moses = shared_path("tools", "cdec", "cdec"), shared_path("tools", "moses", "bin", "moses")
    if not (cdec.is_file() and moses.is_file()):
        pytest.skip("the real cdec or Moses is missing")
    done = subprocess.run([str(cdec), "-c", str(out / "cdec" / "cdec.ini"), "-w", str(out / "cdec" / "weights"),
                           "-i", str(out / "cdec" / "input.txt")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == len(read_lines(data / "test.src"))
    done = subprocess.run([str(moses), "-f", str(out / "moses.ini"), "-i", str(out / "input.txt"), "-threads", "1"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == len(read_lines(data / "test.src"))
