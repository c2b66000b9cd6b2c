"""BLEU statistics and corpus BLEU against sacrebleu; sentence BLEU+1 against a slow reference."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import shared_path
from minismt.errors import InputError
from minismt.io import read_lines
from minismt.metrics import (BleuReferences, bleu_plus_one, corpus_bleu, corpus_bleu_from_stats,
                             sentence_bleu)

WORDS = ["a", "the", "cat", "dog", "sat", "on", "mat", "The", "A", "Dog", ".", "é", "naïve"]


def sacre_corpus(hyps, refs, lowercase=False):
    """sacrebleu with tokenize='none'; refs[s] is the list of references of sentence s."""
    n_refs = max(len(r) for r in refs)
    streams = [[r[k] if k < len(r) else None for r in refs] for k in range(n_refs)]
    return sacrebleu.corpus_bleu(hyps, streams, tokenize="none", lowercase=lowercase).score


def sacre_stats(hyp, refs, lowercase=False):
    """sacrebleu's [hyp_len, ref_len, m1..m4, t1..t4] mapped to our [m1 t1 .. m4 t4 ref_len]."""
    bleu = sacrebleu.BLEU(tokenize="none", lowercase=lowercase)
    prep = bleu._preprocess_segment
    info = bleu._extract_reference_info([prep(r) for r in refs])
    s = bleu._compute_segment_statistics(prep(hyp), info)
    return [s[2], s[6], s[3], s[7], s[4], s[8], s[5], s[9], s[1]]


sentence = st.lists(st.sampled_from(WORDS), min_size=0, max_size=14).map(" ".join)
corpus = st.integers(1, 6).flatmap(lambda n_refs: st.lists(
    st.tuples(sentence, st.lists(sentence, min_size=n_refs, max_size=n_refs)), min_size=1, max_size=8))


@settings(max_examples=300, deadline=None)
@given(corpus, st.booleans())
def test_statistics_and_corpus_bleu_equal_sacrebleu(data, lowercase):
    hyps = [h for h, _ in data]
    refs = [r for _, r in data]
    stats = BleuReferences(refs, lowercase=lowercase).stats(np.arange(len(hyps)), hyps)
    for k, (h, r) in enumerate(data):
        assert stats[k].tolist() == sacre_stats(h, r, lowercase)
    ours = corpus_bleu_from_stats(stats) * 100
    assert abs(ours - sacre_corpus(hyps, refs, lowercase)) < 1e-9


def test_statistics_of_whitespace_variants_follow_str_split():
    refs = [["a  b\tc d\u00a0e"]]
    hyp = " a b c\u2003d e "
    stats = BleuReferences(refs).stats([0], [hyp])
    assert stats[0].tolist() == sacre_stats(hyp, refs[0])


def perturb(line: str, rng: random.Random) -> str:
    words = line.split()
    out = []
    for w in words:
        r = rng.random()
        if r < 0.08:
            continue
        if r < 0.16:
            out.append(rng.choice(words))
        elif r < 0.22:
            out.append(w.upper())
        else:
            out.append(w)
        if rng.random() < 0.05:
            out.append("extra")
    if len(out) > 3 and rng.random() < 0.3:
        i = rng.randrange(len(out) - 1)
        out[i], out[i + 1] = out[i + 1], out[i]
    return " ".join(out)


@pytest.mark.parametrize("lowercase", [False, True])
def test_multi30k_val_perturbed_equals_sacrebleu(lowercase):
    refs = read_lines(shared_path("corpora", "multi30k", "val.en.gz"))
    other = read_lines(shared_path("corpora", "multi30k", "test_2016_flickr.en.gz"))
    rng = random.Random(7)
    hyps = [perturb(line, rng) for line in refs]
    two_refs = [[r, o] for r, o in zip(refs, other)]  # a second, unrelated reference stream
    for hyp_set, references in ((hyps, [[r] for r in refs]), (hyps[:len(two_refs)], two_refs)):
        ours = corpus_bleu(hyp_set, references, lowercase=lowercase) * 100
        assert abs(ours - sacre_corpus(hyp_set, references, lowercase)) < 1e-9
    assert 10 < ours < 95


def test_moses_fixture_1best_equals_sacrebleu_and_readme():
    hyps = read_lines(shared_path("fixtures", "moses", "m30k", "dev20.mert.1best"))
    refs = [[r] for r in read_lines(shared_path("fixtures", "moses", "m30k", "dev20.ref"))]
    assert abs(corpus_bleu(hyps, refs) * 100 - sacre_corpus(hyps, refs)) < 1e-9
    # README: sacrebleu --tokenize none on hyp.1best.txt gives 93.8144 (example) / 7.2223 (scorer100)
    for folder, ref_names, expected in [("example", ["REF.0", "REF.1", "REF.2"], 93.8144),
                                        ("scorer100", ["reference.100.txt"], 7.2223)]:
        hyps = read_lines(shared_path("fixtures", "moses", folder, "hyp.1best.txt"))
        refs = BleuReferences.from_files([shared_path("fixtures", "moses", folder, n) for n in ref_names])
        score = corpus_bleu_from_stats(refs.stats(np.arange(len(hyps)), hyps)) * 100
        assert round(score, 4) == expected


def slow_sentence_bleu(stat, smooth_unigram=False, smooth_bp=False, ref_scale=1.0, unclipped_bp=False):
    """The textbook formula, one hypothesis at a time."""
    m = [stat[2 * n] for n in range(4)]
    t = [stat[2 * n + 1] for n in range(4)]
    log_p = 0.0
    for n in range(4):
        add = 1 if (n > 0 or smooth_unigram) else 0
        if m[n] + add == 0:
            return 0.0
        log_p += math.log((m[n] + add) / (t[n] + add))
    c = t[0] + (1 if smooth_bp else 0)
    r = stat[8] * ref_scale + (1 if smooth_bp else 0)
    if c == 0:
        return 0.0
    bp = 1 - r / c
    if not unclipped_bp:
        bp = min(0.0, bp)
    return math.exp(log_p / 4 + bp)


@settings(max_examples=200, deadline=None)
@given(corpus, st.booleans(), st.booleans(), st.sampled_from([1.0, 1.05]), st.booleans())
def test_sentence_bleu_variants_equal_slow_reference(data, unigram, bp, scale, unclipped):
    hyps = [h for h, _ in data]
    stats = BleuReferences([r for _, r in data]).stats(np.arange(len(hyps)), hyps)
    fast = sentence_bleu(stats, smooth_unigram=unigram, smooth_bp=bp, ref_scale=scale,
                         unclipped_bp=unclipped)
    for k in range(len(hyps)):
        slow = slow_sentence_bleu(stats[k].tolist(), unigram, bp, scale, unclipped)
        assert fast[k] == pytest.approx(slow, rel=1e-12, abs=1e-300)


def test_sentence_bleu_plus1_smoothed_unigrams_equals_moses_sentence_bleu():
    folder = ("fixtures", "moses", "example")
    hyps = read_lines(shared_path(*folder, "hyp.1best.txt"))
    expected = [float(x) for x in read_lines(shared_path(*folder, "sentence-bleu.1best.txt"))]
    refs = BleuReferences.from_files([shared_path(*folder, f"REF.{k}") for k in range(3)])
    ours = sentence_bleu(refs.stats(np.arange(len(hyps)), hyps), smooth_unigram=True)
    assert ours == pytest.approx(expected, rel=5e-6)


def test_lin_och_bleu_plus1_by_hand():
    # hyp "a b c" vs ref "a b d": m=[2,1,0,-], t=[3,2,1,0]; +1 on orders 2..4
    stats = BleuReferences([["a b d"]]).stats([0], ["a b c"])[0]
    assert stats.tolist() == [2, 3, 1, 2, 0, 1, 0, 0, 3]
    expected = math.exp((math.log(2 / 3) + math.log(2 / 3) + math.log(1 / 2) + math.log(1 / 1)) / 4)
    assert sentence_bleu(stats) == pytest.approx(expected, rel=1e-15)


def test_bleu_plus_one_takes_the_options_as_one_dict():
    stats = BleuReferences([["a b d"], ["a b c d"]]).stats([0, 1], ["a b c", "a b"])
    moses = {"smooth_unigram": True}
    assert np.array_equal(bleu_plus_one(stats, None), sentence_bleu(stats))
    assert np.array_equal(bleu_plus_one(stats, None, moses), sentence_bleu(stats, smooth_unigram=True))
    assert np.array_equal(bleu_plus_one(stats, {}, moses), sentence_bleu(stats))  # {} is no option
    options = {"smooth_bp": True, "ref_scale": 1.05, "unclipped_bp": True}
    assert np.array_equal(bleu_plus_one(stats, options), sentence_bleu(stats, **options))
    for bad in ["plus-one", ["smooth_bp"], {"no_such_option": True}, {"ref_scale": None}]:
        with pytest.raises(InputError, match="BLEU\\+1 options"):
            bleu_plus_one(stats, bad)


def test_corpus_bleu_no_match_and_empty():
    refs = BleuReferences([["a b"], ["c"]])
    stats = refs.stats([0, 1], ["x y", ""])
    assert corpus_bleu_from_stats(stats) == 0.0
    assert sacre_corpus(["x y", ""], [["a b"], ["c"]]) == 0.0
    assert corpus_bleu_from_stats(refs.stats([0], ["a b"]), smooth="none") == 0.0  # no 3-grams
    assert corpus_bleu_from_stats(refs.stats([0], ["a b"])) * 100 == pytest.approx(
        sacre_corpus(["a b"], [["a b"]]), abs=1e-9)


def test_bad_input_raises_input_error():
    with pytest.raises(InputError):
        BleuReferences([[]])
    with pytest.raises(InputError):
        BleuReferences(["a bare string"])
    refs = BleuReferences([["a"]])
    with pytest.raises(InputError):
        refs.stats([1], ["a"])
    with pytest.raises(InputError):
        corpus_bleu(["a", "b"], [["a"]])
    with pytest.raises(InputError):
        corpus_bleu_from_stats([1, 2, 3])
    with pytest.raises(InputError):
        corpus_bleu_from_stats(np.zeros(9), smooth="add-k")


def test_reference_files_with_different_lengths(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("x\ny\n")
    b.write_text("x\n")
    with pytest.raises(InputError, match="1 lines"):
        BleuReferences.from_files([a, b])


def test_evaluate_is_silent_on_text_tokenised_on_purpose(caplog):
    """``tokenize="none"`` says the text is tokenised on purpose: no sacrebleu warning about 100 lines
    ending in a tokenised period, and the same score; with the default 13a the warning stays (it may
    point at text meant to be raw)."""
    from minismt.metrics.evaluate import evaluate
    from minismt.pipeline.significance import paired_bootstrap
    hyps = [f"a man number {i} rides a bike ." for i in range(120)]
    refs = [f"a man number {i} rides a red bike ." for i in range(120)]
    with caplog.at_level("WARNING", logger="sacrebleu"):
        silent = evaluate(hyps, [refs], tokenize="none")
        paired_bootstrap([("a", hyps), ("b", refs)], refs, n_samples=10, tokenize="none")
    assert "tokenized period" not in caplog.text
    assert silent["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs], tokenize="none").score)
    with caplog.at_level("WARNING", logger="sacrebleu"):
        evaluate(hyps, [refs])
    assert "tokenized period" in caplog.text


def test_a_tokenizer_without_its_extra_package_is_an_input_error(monkeypatch):
    """sacrebleu raises ImportError or RuntimeError for a tokenizer whose package is missing (mecab,
    sentencepiece): one InputError naming the tokenizer, whichever packages this machine has."""
    from minismt.metrics.evaluate import bleu_scorer

    def missing(**kwargs):
        raise RuntimeError("Japanese tokenization requires extra dependencies")

    monkeypatch.setattr(sacrebleu, "BLEU", missing)
    with pytest.raises(InputError, match="BLEU tokenizer 'ja-mecab' cannot run here .*extra dependencies"):
        bleu_scorer(tokenize="ja-mecab")
