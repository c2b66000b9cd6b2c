"""Hiero rule scoring and grammar filtering (minismt.extract.hiero_table, hiero_grammar).

* the scored table against the slow formula of ``tests/hiero_reference.py`` (exact fractions) on
  random corpora: the same rules, written alignments and lexical weights, and counts and
  probabilities within single precision;
* against the real Moses ``extract-rules`` + ``score --Hierarchical`` (both directions) +
  ``consolidate`` on random corpora: the same lines in the same order, numbers within 2e-5 (Moses
  sums the fractional counts in single precision in the order of its sorted extract file);
* filtering to input sentences against a slow matcher, per sentence, with the scores of the full
  table; the grammar file round trip; bad input.
"""

from __future__ import annotations

import gzip
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import shared_path
from hiero_reference import score_corpus, source_matches
from minismt.corpus import Alignment, TokenArray, Vocabulary
from minismt.errors import InputError
from minismt.extract.grammar import read_moses_rules
from minismt.extract.hiero_grammar import (GLUE_GRAMMAR, HieroGrammar, build_grammars,
                                           write_glue_grammar)

WORDS_SRC = ["a", "b", "c", "d", "e"]
WORDS_TGT = ["v", "w", "x", "y", "z"]


def _random_corpus(rng: np.random.Generator, n_pairs: int, max_len: int):
    """Few words, so that rules repeat across sentences and share sides; sorted links."""
    sources, targets, alignments = [], [], []
    for _ in range(n_pairs):
        ls, lt = int(rng.integers(1, max_len + 1)), int(rng.integers(1, max_len + 1))
        density = float(rng.uniform(0.1, 0.5))
        links = [(i, j) for i in range(ls) for j in range(lt) if rng.random() < density]
        if rng.random() < 0.3:       # near-diagonal with unaligned words: many rules
            links = sorted({(i, min(lt - 1, i * lt // ls)) for i in range(ls) if rng.random() < 0.8})
        sources.append([WORDS_SRC[k] for k in rng.integers(0, len(WORDS_SRC), ls)])
        targets.append([WORDS_TGT[k] for k in rng.integers(0, len(WORDS_TGT), lt)])
        alignments.append(links)
    return sources, targets, alignments


def _encode(sources, targets, alignments):
    src_vocab, tgt_vocab = Vocabulary(), Vocabulary()
    src = TokenArray.from_sentences(sources, src_vocab)
    tgt = TokenArray.from_sentences(targets, tgt_vocab)
    return src, tgt, Alignment.from_lists(alignments), src_vocab, tgt_vocab


def _table_lines(grammar: HieroGrammar, tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "rule-table"
    grammar.write_moses(path)
    return [line.split(" ||| ") for line in path.read_text(encoding="utf-8").splitlines()]


def _numbers(text: str) -> np.ndarray:
    return np.array([float(x) for x in text.split()])


@pytest.mark.parametrize("seed", range(40))
def test_scores_equal_the_slow_formula(tmp_path, seed):
    rng = np.random.default_rng(seed)
    corpus = _random_corpus(rng, int(rng.integers(1, 8)), 10)
    grammars, _ = build_grammars(*_encode(*corpus), inputs=None,
                                 chunk_pairs=int(rng.integers(1, 4)))
    ours = _table_lines(grammars["all"], tmp_path)
    expected = score_corpus(*corpus)
    assert len(ours) == len(expected)
    assert [(f[0], f[1]) for f in ours] == [(r.source, r.target) for r in expected]
    by_key = {(r.source, r.target, r.alignment): r for r in expected}
    for fields in ours:
        rule = by_key[fields[0], fields[1], fields[3]]
        scores, counts = _numbers(fields[2]), _numbers(fields[4])
        # lexical weights: the same double, printed from single precision as Moses prints it
        assert scores[[1, 3]].tolist() == [float("%g" % np.float32(rule.scores[k])) for k in (1, 3)]
        # printed with 6 digits from counts that were printed with 6 digits before the division
        np.testing.assert_allclose(scores[[0, 2]], [rule.scores[0], rule.scores[2]], rtol=2e-5)
        np.testing.assert_allclose(counts, [float(c) for c in rule.counts], rtol=5e-6)
        assert fields[5:] == ["|||"]


def test_hand_worked_scores(tmp_path):
    """Two sentence pairs sharing the rule ``a -> x``; every count by hand.

    Pair 1 ``a b`` / ``x y`` (0-0 1-1) has initial phrase pairs a/x, b/y and ab/xy; ab/xy gives
    ``a b -> x y`` only (a hole must cover >= 2 source words), so every rule has count 1.
    Pair 2 ``a`` / ``x`` (0-0) gives ``a -> x`` again.  So c(a -> x) = 2 = c(a) = c(x)."""
    grammars, _ = build_grammars(*_encode(["a b", "a"], ["x y", "x"], [[(0, 0), (1, 1)], [(0, 0)]]),
                                 inputs=None)
    lines = [" ||| ".join(f) for f in _table_lines(grammars["all"], tmp_path)]
    # w(x|a) = 2/2, w(y|b) = 1/1: every lexical weight is 1
    assert lines == [
        "a [X] ||| x [X] ||| 1 1 1 1 ||| 0-0 ||| 2 2 2 ||| |||",
        "a b [X] ||| x y [X] ||| 1 1 1 1 ||| 0-0 1-1 ||| 1 1 1 ||| |||",
        "b [X] ||| y [X] ||| 1 1 1 1 ||| 0-0 ||| 1 1 1 ||| |||",
    ]


# ---- against the real Moses tools ---------------------------------------------------------------

def _moses_bin(name: str) -> Path:
    path = shared_path("tools", "moses", "bin", name)
    if not path.is_file():
        pytest.skip(f"{path} is not a file")
    return path


def _moses_rule_table(folder: Path, corpus, lexical_prefix) -> list[str]:
    """train-model.perl -hierarchical's steps 5-6 on one core: extract-rules, sort, score both
    ways, sort the inverse half, consolidate."""
    sources, targets, alignments = corpus
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.de").write_text("".join(" ".join(s) + "\n" for s in sources), encoding="utf-8")
    (folder / "train.en").write_text("".join(" ".join(t) + "\n" for t in targets), encoding="utf-8")
    (folder / "aligned").write_text(
        "".join(" ".join(f"{s}-{t}" for s, t in a) + "\n" for a in alignments), encoding="utf-8")
    env = dict(os.environ, LC_ALL="C")

    def run(command: list[str]) -> None:
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env,
                              timeout=120)
        assert done.returncode == 0, (command, done.stderr)

    def sort(name: str) -> None:
        lines = (folder / name).read_bytes().splitlines(keepends=True)
        (folder / f"{name}.sorted").write_bytes(b"".join(sorted(lines)))

    run([str(_moses_bin("extract-rules")), "train.en", "train.de", "aligned", "extract",
         "--GlueGrammar", "glue-grammar", "--MaxSpan", "10"])
    sort("extract")
    sort("extract.inv")
    lexical_prefix(folder / "lex")
    run([str(_moses_bin("score")), "extract.sorted", "lex.f2e", "half.f2e", "--Hierarchical"])
    run([str(_moses_bin("score")), "extract.inv.sorted", "lex.e2f", "half.e2f", "--Inverse",
         "--Hierarchical"])
    sort("half.e2f")
    run([str(_moses_bin("consolidate")), "half.f2e", "half.e2f.sorted", "rule-table",
         "--Hierarchical"])
    return (folder / "rule-table").read_text(encoding="utf-8").splitlines()


# rules that differ only in how their non-terminals pair ("p [X] q [X] r" -> "P [X] Q [X] R",
# straight and crossed): Moses orders them by their first line in its sorted extract file
TWINS = (["p a b q c d r".split()] * 3,
         ["P C D Q A B R".split(), "P A B Q C D R".split(), "P A B Q C D R".split()],
         [[(0, 0), (1, 4), (2, 5), (3, 3), (4, 1), (5, 2), (6, 6)], [(i, i) for i in range(7)],
          [(i, i) for i in range(7) if i != 3]])


@pytest.mark.parametrize("seed", list(range(25)) + ["twins"])
def test_rule_table_matches_moses(tmp_path, seed):
    from minismt.extract.extraction import train_lexical_table
    if seed == "twins":
        corpus = TWINS
    else:
        rng = np.random.default_rng(500 + seed)
        corpus = _random_corpus(rng, int(rng.integers(1, 8)), 12)
    src, tgt, alignment, src_vocab, tgt_vocab = _encode(*corpus)
    lexical = train_lexical_table(src, tgt, alignment, src_vocab, tgt_vocab)
    moses = _moses_rule_table(tmp_path / "moses", corpus,
                              lambda prefix: lexical.write_moses(prefix, src_vocab, tgt_vocab))
    grammars, _ = build_grammars(src, tgt, alignment, src_vocab, tgt_vocab, inputs=None)
    ours = _table_lines(grammars["all"], tmp_path)
    theirs = [line.split(" ||| ") for line in moses]
    assert [f[:2] + f[3:4] + f[5:] for f in ours] == [f[:2] + f[3:4] + f[5:] for f in theirs]
    if seed == "twins":
        assert sum(f[0] == "p [X][X] q [X][X] r [X]" and f[1] == "P [X][X] Q [X][X] R [X]"
                   for f in ours) == 2
    for mine, moses_fields in zip(ours, theirs):
        for k in (2, 4):
            np.testing.assert_allclose(_numbers(mine[k]), _numbers(moses_fields[k]), rtol=2e-5)


@pytest.mark.slow
def test_fixture_rule_table_lines(tmp_path):
    """The first 2,000 lines of Moses' Multi30k de-en rule table (fixtures/moses/m30k-hiero, made
    from the alignment of ``minismt train --aligner hmm``, 374,641 links): each is one of the rules
    we build for those source sides, alignment equal and numbers within 2e-5."""
    from minismt.train import Trainer, TrainingConfig
    head = shared_path("fixtures", "moses", "m30k-hiero", "rule-table.head2000.txt")
    corpus = shared_path("corpora", "multi30k")
    if not head.is_file() or not corpus.is_dir():
        pytest.skip("the m30k-hiero fixture or the Multi30k corpus is missing")
    from corpora.fetch import fetch
    fetch("multi30k-de-en", tmp_path / "data", from_dir=corpus, progress=False)
    trainer = Trainer(TrainingConfig(src=str(tmp_path / "data" / "train.src"),
                                     tgt=str(tmp_path / "data" / "train.tgt"),
                                     out=str(tmp_path / "m"), aligner="hmm", progress=False))
    trainer.prepare()
    assert trainer.align().info["links"] == 374_641
    src_lines = (tmp_path / "m" / "corpus" / "train.src").read_text(encoding="utf-8").splitlines()
    tgt_lines = (tmp_path / "m" / "corpus" / "train.tgt").read_text(encoding="utf-8").splitlines()
    alignment = Alignment.read(tmp_path / "m" / "align" / "aligned.grow-diag-final-and")
    src_vocab, tgt_vocab = Vocabulary(), Vocabulary()
    src = TokenArray.from_sentences(src_lines, src_vocab)
    tgt = TokenArray.from_sentences(tgt_lines, tgt_vocab)
    expected = head.read_text(encoding="utf-8").splitlines()
    inputs = sorted({" ".join("@" if w == "[X][X]" else w for w in line.split(" ||| ")[0].split()[:-1])
                     for line in expected})
    grammars, _ = build_grammars(src, tgt, alignment, src_vocab, tgt_vocab, {"head": inputs})
    ours: dict[tuple[str, str, str], list[str]] = {}
    for fields in _table_lines(grammars["head"], tmp_path):
        ours.setdefault((fields[0], fields[1], fields[3]), []).append(fields)
    for line in expected:
        fields = line.split(" ||| ")
        candidates = ours.get((fields[0], fields[1], fields[3]), [])
        assert candidates, line
        assert any(np.allclose(_numbers(c[2]), _numbers(fields[2]), rtol=2e-5) and
                   np.allclose(_numbers(c[4]), _numbers(fields[4]), rtol=2e-5)
                   for c in candidates), line


# ---- filtering ---------------------------------------------------------------------------------

def _rule_key(grammar: HieroGrammar, r: int):
    t = grammar.table
    return (tuple(t.src_syms[t.src_off[r]:t.src_off[r + 1]].tolist()),
            tuple(t.tgt_syms[t.tgt_off[r]:t.tgt_off[r + 1]].tolist()))


@pytest.mark.parametrize("seed", range(30))
def test_filtered_grammars_match_a_slow_matcher(seed):
    rng = np.random.default_rng(seed)
    src, tgt, alignment, src_vocab, tgt_vocab = _encode(*_random_corpus(rng, int(rng.integers(2, 8)), 12))
    words = WORDS_SRC + ["q"]          # "q" is not in the training corpus
    inputs = {name: [" ".join(rng.choice(words, size=int(rng.integers(1, 10))))
                     for _ in range(int(rng.integers(1, 4)))] for name in ("dev", "test")}
    full = build_grammars(src, tgt, alignment, src_vocab, tgt_vocab, None)[0]["all"]
    grammars, report = build_grammars(src, tgt, alignment, src_vocab, tgt_vocab, inputs,
                                      chunk_pairs=int(rng.integers(1, 4)))
    full_index = {_rule_key(full, r): r for r in range(len(full))}
    for name, lines in inputs.items():
        grammar = grammars[name]
        assert grammar.n_sentences == len(lines)
        for s, line in enumerate(lines):
            expected = set()
            for r in range(len(full)):
                source = " ".join("[X][X]" if x < 0 else src_vocab[int(x)]
                                  for x in full.table.src_syms[full.table.src_off[r]:full.table.src_off[r + 1]])
                if source_matches(source + " [X]", line.split()):
                    expected.add(_rule_key(full, r))
            rules = grammar.rules_of(s)
            assert np.all(np.diff(rules) > 0)
            assert {_rule_key(grammar, int(r)) for r in rules} == expected
        # every rule of the grammar is used by a sentence, with the full table's numbers
        used = np.unique(np.concatenate([grammar.rules_of(s) for s in range(len(lines))]))
        assert used.tolist() == list(range(len(grammar)))
        assert np.all(np.diff(grammar.source_offsets) > 0)
        for r in range(len(grammar)):
            f = full_index[_rule_key(grammar, r)]
            assert np.array_equal(grammar.table.scores[r], full.table.scores[f])
            assert np.array_equal(grammar.table.counts[r], full.table.counts[f])
        assert report.sizes[name] == len(grammar)


def test_grammar_file_round_trip_and_moses_reader(tmp_path):
    rng = np.random.default_rng(3)
    src, tgt, alignment, src_vocab, tgt_vocab = _encode(*_random_corpus(rng, 6, 10))
    grammars, _ = build_grammars(src, tgt, alignment, src_vocab, tgt_vocab,
                                 {"test": ["a b c d", "e a"]})
    grammar = grammars["test"]
    grammar.save(tmp_path / "g.npz")
    loaded = HieroGrammar.load(tmp_path / "g.npz")
    for name in ("src_syms", "src_off", "tgt_syms", "tgt_off", "align", "align_off", "scores",
                 "counts"):
        assert np.array_equal(getattr(loaded.table, name), getattr(grammar.table, name)), name
    assert loaded.src_vocab == src_vocab and loaded.tgt_vocab == tgt_vocab
    for name in ("source_offsets", "sentence_offsets", "sentence_sources"):
        assert np.array_equal(getattr(loaded, name), getattr(grammar, name)), name
    path = tmp_path / "rule-table.gz"
    assert grammar.write_moses(path) == len(grammar)
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        text = handle.read()
    rules = read_moses_rules(path)
    assert len(rules) == len(grammar) == text.count("\n")
    assert all(len(rule.scores) == 4 and len(rule.counts) == 3 for rule in rules)
    write_glue_grammar(tmp_path / "glue-grammar")
    assert (tmp_path / "glue-grammar").read_text(encoding="utf-8").splitlines() == list(GLUE_GRAMMAR)


def test_bad_input(tmp_path):
    src, tgt, alignment, src_vocab, tgt_vocab = _encode(["a [b]"], ["x y"], [[(0, 0), (1, 1)]])
    with pytest.raises(InputError, match=r"\[b\]"):
        build_grammars(src, tgt, alignment, src_vocab, tgt_vocab, None)
    src, tgt, alignment, src_vocab, tgt_vocab = _encode(["a b"], ["x y"], [[(0, 0), (2, 1)]])
    with pytest.raises(InputError):
        build_grammars(src, tgt, alignment, src_vocab, tgt_vocab, None)
    with pytest.raises(InputError):
        HieroGrammar.load(tmp_path / "missing.npz")
    (tmp_path / "other.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError):
        HieroGrammar.load(tmp_path / "other.npz")


@pytest.mark.parametrize("seed", range(10))
def test_sentence_matches_records_every_split(seed):
    """The chart decoder's view of the filter: for each source side of a grammar, every span of at
    most max_span words it matches and every way its non-terminals split that span."""
    from minismt.extract import _grammar_kernels
    from minismt.extract.hiero_table import side_hashes
    rng = np.random.default_rng(100 + seed)
    src, tgt, alignment, src_vocab, tgt_vocab = _encode(*_random_corpus(rng, 5, 10))
    table = build_grammars(src, tgt, alignment, src_vocab, tgt_vocab, None)[0]["all"].table
    sentence = list(rng.choice(WORDS_SRC + ["q"], size=int(rng.integers(1, 9))))
    words = np.array([src_vocab.get(w) for w in sentence], dtype=np.int32)
    max_span = int(rng.integers(2, 7))
    hashes, spans, count = _grammar_kernels.sentence_matches(
        words, 5, 2, False, max_span, np.empty(16, dtype=np.uint64), np.empty((16, 6), dtype=np.int32), True)
    found = {(int(h), tuple(int(x) for x in row)) for h, row in zip(hashes[:count], spans[:count])}
    assert len(found) == count                       # no match listed twice
    side_hash = side_hashes(table.src_syms, table.src_off)
    expected = set()
    for r in range(len(table)):
        symbols = table.src_syms[table.src_off[r]:table.src_off[r + 1]].tolist()
        n = len(sentence)

        def splits(k: int, p: int, nts: tuple):
            if k == len(symbols):
                yield p, nts
                return
            if symbols[k] < 0:
                for q in range(p + 1, n + 1):
                    yield from splits(k + 1, q, nts + (p, q))
            elif p < n and words[p] == symbols[k]:
                yield from splits(k + 1, p + 1, nts)

        for start in range(n):
            for end, nts in splits(0, start, ()):
                if end - start <= max_span:
                    expected.add((int(side_hash[r]), (start, end) + nts + (-1,) * (4 - len(nts))))
    assert expected <= found
    table_hashes = set(side_hash.tolist())
    assert {m for m in found if m[0] in table_hashes} == expected
