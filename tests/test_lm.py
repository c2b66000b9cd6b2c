"""Language models: lmplz-exact estimation, ARPA I/O, and queries equal to KenLM's.

The references are the real tools where they are available (``lmplz`` outputs in
../shared/fixtures/kenlm, the ``kenlm`` Python module) and a slow obvious
dictionary implementation of the formulas for tiny random corpora.
"""

from __future__ import annotations

import gzip
import math
import random
from collections import Counter, defaultdict
from fractions import Fraction

import kenlm
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import shared_path
from minismt.corpus import TokenArray, Vocabulary
from minismt.errors import InputError
from minismt.lm import LanguageModel, State, estimate_kn, read_arpa, write_arpa

SPECIALS = ("<unk>", "<s>", "</s>")


# ----------------------------------------------------------------------------- helpers

def multi30k(name: str, n_lines: int | None = None) -> list[str]:
    path = shared_path("corpora", "multi30k", name)
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    return [line.lower() for line in lines[:n_lines]]


def as_dict(model) -> dict:
    """{n-gram words: (log10 prob, log10 back-off)} of every order."""
    return {words: (p, b) for n in range(1, model.order + 1) for words, p, b in model.items(n)}


def kenlm_model(path) -> kenlm.Model:
    return kenlm.Model(str(path))


def assert_same_scores(ours: LanguageModel, theirs: kenlm.Model, lines, tol: float = 1e-5) -> int:
    """Every token's (log10 prob, n-gram length, oov) equal; returns the number of OOV tokens."""
    oovs = 0
    for line in lines:
        a, b = list(ours.full_scores(line)), list(theirs.full_scores(line))
        assert len(a) == len(b) == len(line.split()) + 1
        for (pa, na, oa), (pb, nb, ob) in zip(a, b):
            assert abs(pa - pb) <= tol, (line, pa, pb)
            assert (na, oa) == (nb, ob), line
            oovs += oa
    return oovs


def context_state(lm: LanguageModel, context: tuple[str, ...]) -> State:
    """The state after reading ``context`` (from <s> when it begins with <s>)."""
    if context and context[0] == "<s>":
        state, words = lm.begin_sentence_state(), context[1:]
    else:
        state, words = lm.null_context_state(), context
    for word in words:
        state = lm.score_word(state, word)[1]
    return state


def distribution_sum(lm: LanguageModel, context: tuple[str, ...]) -> float:
    """sum over the vocabulary but <s> of p(w | context), computed with back-off."""
    logprobs = lm.next_word_logprobs(context_state(lm, context))
    keep = np.ones(logprobs.shape[0], dtype=bool)
    keep[1] = False
    return math.fsum(10.0 ** logprobs[keep])


# ----------------------------------------------------------------------------- the slow reference

def reference_kn(lines: list[str], order: int, fallback=None) -> dict:
    """Interpolated modified Kneser-Ney straight from the formulas, in dictionaries.

    Heafield et al. (2013) sec. 3 with Chen & Goodman (1998) eq. (26), plus the
    lmplz conventions documented in minismt.lm.estimate (vocabulary numbering,
    <s> probability 1, |V| without <s>, the final-flush counts-of-counts).
    Returns {words: (log10 prob, log10 back-off)}; raises InputError when a
    discount cannot be estimated and ``fallback`` is None.
    """
    sentences = [[w for w in line.split(" ") if w] for line in lines]
    ids = {w: i for i, w in enumerate(SPECIALS)}
    for sentence in sentences:
        for word in sentence:
            ids.setdefault(word, len(ids))
    # raw counts c of every n-gram with <s> only at its start
    c = [Counter() for _ in range(order + 1)]
    for sentence in sentences:
        tokens = ["<s>", *sentence, "</s>"]
        for end in range(1, len(tokens)):
            for n in range(1, min(order, end + 1) + 1):
                c[n][tuple(tokens[end - n + 1:end + 1])] += 1
    # adjusted counts a: raw for order N and <s>-initial n-grams, else distinct left extensions
    a = [dict() for _ in range(order + 1)]
    a[order] = dict(c[order])
    for n in range(1, order):
        left = defaultdict(set)
        for gram in c[n + 1]:
            left[gram[1:]].add(gram[0])
        for gram, count in c[n].items():
            a[n][gram] = count if gram[0] == "<s>" else len(left[gram])
    a[1][("<unk>",)] = 0
    a[1][("<s>",)] = 0
    # counts of adjusted counts t[n][k], k = 1..4
    t = [[0] * 5 for _ in range(order + 1)]
    for n in range(1, order + 1):
        for count in a[n].values():
            if 1 <= count <= 4:
                t[n][count] += 1
    # lmplz's final flush: the suffixes of the padded N-gram that sorts last (by last word id,
    # then the one before, ...) enter the statistics with their raw counts
    windows = []
    for sentence in sentences:
        tokens = ["<s>"] * (order - 1) + sentence + ["</s>"]
        windows += [tuple(tokens[end - order + 1:end + 1]) for end in range(order - 1, len(tokens))]
    last = max(windows, key=lambda w: [ids[x] for x in reversed(w)])
    for n in range(1, order):
        gram = last[order - n:]
        raw, adjusted = c[n][gram], a[n][gram]
        if 1 <= adjusted <= 4:
            t[n][adjusted] -= 1
        if 1 <= raw <= 4:
            t[n][raw] += 1
        if gram[0] == "<s>":
            break
    # discounts, Chen & Goodman eq. (26)
    D = {}
    for n in range(1, order + 1):
        n1, n2, n3, n4 = t[n][1:5]
        good = n1 > 0 and n2 > 0 and n3 > 0
        if good:
            y = n1 / (n1 + 2 * n2)
            D[n] = [0.0, 1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3]
            good = all(0 <= D[n][k] <= k for k in (1, 2, 3))
        if not good:
            if fallback is None:
                raise InputError(f"no discounts for order {n}")
            D[n] = [0.0, *fallback]
    # u and the back-off weight b (gamma) per context
    denominator, n_k = Counter(), defaultdict(Counter)
    for n in range(1, order + 1):
        for gram, count in a[n].items():
            denominator[gram[:-1]] += count
            if count > 0:
                n_k[gram[:-1]][min(count, 3)] += 1
    b = {h: sum(D[len(h) + 1][k] * n_k[h][k] for k in (1, 2, 3)) / denominator[h] for h in denominator}
    # interpolation, from the uniform distribution over the vocabulary without <s>
    size = len(ids) - 1
    p = {}
    for n in range(1, order + 1):
        for gram, count in a[n].items():
            u = (count - D[n][min(count, 3)]) / denominator[gram[:-1]]
            lower = 1.0 / size if n == 1 else p[gram[1:]]
            p[gram] = u + b[gram[:-1]] * lower
    p[("<s>",)] = 1.0
    def log10(x):
        return math.log10(x) if x > 0 else -math.inf

    return {gram: (min(0.0, log10(prob)), log10(b[gram]) if len(gram) < order and gram in b else 0.0)
            for gram, prob in p.items()}


WORDS = ["a", "b", "c", "d", "é", "naïve", "x\u00a0y", "7"]
tiny_corpus = st.integers(1, len(WORDS)).flatmap(lambda k: st.lists(
    st.lists(st.sampled_from(WORDS[:k]), max_size=8).map(" ".join), min_size=1, max_size=25))


@settings(max_examples=300, deadline=None)
@given(tiny_corpus, st.integers(2, 6), st.sampled_from([None, True, (0.3, 0.9, 1.2)]))
def test_estimate_equals_slow_reference(lines, order, fallback):
    fallback_values = (0.5, 1.0, 1.5) if fallback is True else fallback
    try:
        expected = reference_kn(lines, order, fallback_values)
    except InputError:
        with pytest.raises(InputError, match="discount"):
            estimate_kn(lines, order=order, discount_fallback=fallback)
        return
    model = estimate_kn(lines, order=order, discount_fallback=fallback)
    ours = as_dict(model)
    assert ours.keys() == expected.keys()
    for gram, (p, b) in expected.items():
        assert ours[gram][0] == pytest.approx(p, rel=0, abs=1e-9), gram
        assert ours[gram][1] == pytest.approx(b, rel=0, abs=1e-9), gram


# ----------------------------------------------------------------------------- lmplz itself

@pytest.mark.parametrize("order", [3, 5])
def test_estimate_equals_lmplz_fixture(order):
    """Our estimator on lmplz's input reproduces lmplz's model: counts, discounts, n-grams and
    their order, probabilities and back-offs to lmplz's float32 precision."""
    text = shared_path("fixtures", "kenlm", "text.en")
    lmplz = read_arpa(shared_path("fixtures", "kenlm", f"lmplz.o{order}.arpa"))
    model = estimate_kn(text, order=order)
    log = shared_path("fixtures", "kenlm", f"lmplz.o{order}.log").read_text().splitlines()
    stats = [line.split() for line in log[log.index("Statistics:") + 1:][:order]]
    assert model.counts == lmplz.counts == [int(row[1]) for row in stats]
    for n, row in enumerate(stats):
        logged = [float(field.split("=")[1]) for field in row[2:]]
        assert np.allclose(model.discounts[n], logged, rtol=5e-6, atol=0), n + 1
    assert model.vocab.words == lmplz.vocab.words
    for n in range(order):
        assert np.array_equal(model.ngrams[n], lmplz.ngrams[n])
        assert np.max(np.abs(model.logprob[n] - lmplz.logprob[n])) < 1e-6
        assert np.max(np.abs(model.backoff[n] - lmplz.backoff[n])) < 1e-6


def test_lmplz_fixture_totals_on_heldout(tmp_path):
    """The README's kenlm totals over heldout.en, from our estimate through kenlm and through ours."""
    text = shared_path("fixtures", "kenlm", "text.en")
    heldout = shared_path("fixtures", "kenlm", "heldout.en").read_text(encoding="utf-8").splitlines()
    for order, total in [(3, -4919.4084), (5, -4914.6851)]:
        model = estimate_kn(text, order=order)
        write_arpa(model, tmp_path / f"o{order}.arpa")
        theirs = kenlm_model(tmp_path / f"o{order}.arpa")
        assert sum(theirs.score(line) for line in heldout) == pytest.approx(total, abs=2e-3)
        ours = LanguageModel.from_model(model)
        assert sum(ours.score(line) for line in heldout) == pytest.approx(total, abs=2e-3)
        assert sum(len(line.split()) + 1 for line in heldout) == 2603


# ----------------------------------------------------------------------------- kenlm agreement

@pytest.fixture(scope="module")
def train3000():
    return multi30k("train.en.gz", 3000)


@pytest.fixture(scope="module")
def validation():
    return multi30k("val.en.gz")


@pytest.mark.parametrize("order", [3, 4, 5])
def test_every_heldout_token_equals_kenlm(order, train3000, validation, tmp_path):
    model = estimate_kn(train3000, order=order)
    path = tmp_path / "lm.arpa"
    write_arpa(model, path)
    theirs = kenlm_model(path)
    oovs = assert_same_scores(LanguageModel.from_arpa(path), theirs, validation)
    assert oovs > 50
    direct = LanguageModel.from_model(model)
    assert_same_scores(direct, theirs, validation)
    logprobs, matched = direct.score_ids(*direct.encode_lines(validation))
    expected = [item for line in validation for item in theirs.full_scores(line)]
    assert np.allclose(logprobs, [p for p, _, _ in expected], rtol=0, atol=1e-5)
    assert matched.tolist() == [n for _, n, _ in expected]


def test_states_recombine_as_kenlm_states(train3000, validation, tmp_path):
    """score_word walks give kenlm's BaseScore numbers, and two of our states are equal exactly
    when kenlm's are (so a decoder recombines the same hypotheses)."""
    model = estimate_kn(train3000, order=4)
    write_arpa(model, tmp_path / "lm.arpa")
    theirs = kenlm_model(tmp_path / "lm.arpa")
    ours = LanguageModel.from_arpa(tmp_path / "lm.arpa")
    our_states, their_states = [], []
    for line in validation[:150]:
        state = ours.begin_sentence_state()
        kstate = kenlm.State()
        theirs.BeginSentenceWrite(kstate)
        total = 0.0
        for word in line.split() + ["</s>"]:
            logprob, state = ours.score_word(state, word)
            knext = kenlm.State()
            assert abs(logprob - theirs.BaseScore(kstate, word, knext)) < 1e-5
            assert state.length <= 3 and len(state.backoffs) == state.length
            total += logprob
            kstate = knext
            our_states.append(state)
            their_states.append(kstate)
        assert total == pytest.approx(ours.score(line), abs=1e-9)
    first_ours, first_theirs = {}, {}
    labels_ours = [first_ours.setdefault(s, i) for i, s in enumerate(our_states)]
    labels_theirs = [first_theirs.setdefault(s, i) for i, s in enumerate(their_states)]
    assert labels_ours == labels_theirs
    assert len(first_ours) < len(our_states)


def test_perplexity_and_null_context_equal_kenlm(train3000, validation, tmp_path):
    model = estimate_kn(train3000, order=3)
    write_arpa(model, tmp_path / "lm.arpa")
    theirs, ours = kenlm_model(tmp_path / "lm.arpa"), LanguageModel.from_model(model)
    for line in validation[:50]:
        assert ours.perplexity(line) == pytest.approx(theirs.perplexity(line), rel=1e-5)
        assert ours.score(line, bos=False, eos=False) == pytest.approx(
            theirs.score(line, bos=False, eos=False), abs=1e-4)
        a, b = list(ours.full_scores(line, bos=False)), list(theirs.full_scores(line, bos=False))
        assert [n for _, n, _ in a] == [n for _, n, _ in b]


def test_cdec_lm_fixture_equals_kenlm():
    path = shared_path("fixtures", "cdec", "decode_nc", "lm.3.arpa.gz")
    model = read_arpa(path)
    assert model.counts == [4236, 16563, 22417]
    assert model.logprob[0][1] == pytest.approx(-4.231141)  # an older lmplz's <s>
    ours, theirs = LanguageModel.from_arpa(path), kenlm_model(path)
    folder = path.parent
    lines = []
    for name in ("dev.refs", "dev.src", "onebest.init"):
        lines += (folder / name).read_text(encoding="utf-8").splitlines()
    assert assert_same_scores(ours, theirs, lines) > 0


def test_pruned_model_completed_as_kenlm_does(tmp_path):
    """Bigrams missing under their trigrams (SRILM-style pruning) get KenLM's hallucinated entries."""
    text = shared_path("fixtures", "kenlm", "lmplz.o3.arpa").read_text(encoding="utf-8")
    head, rest = text.split("\\2-grams:\n", 1)
    bigrams, tail = rest.split("\n\n", 1)
    kept = [line for i, line in enumerate(bigrams.splitlines())
            if not (line.endswith(" </s>\t0") and i % 2 == 0)]
    removed = len(bigrams.splitlines()) - len(kept)
    assert removed > 500
    head = head.replace("ngram 2=16052", f"ngram 2={len(kept)}")
    pruned = tmp_path / "pruned.arpa"
    pruned.write_text(head + "\\2-grams:\n" + "\n".join(kept) + "\n\n" + tail, encoding="utf-8")
    heldout = shared_path("fixtures", "kenlm", "heldout.en").read_text(encoding="utf-8").splitlines()
    assert_same_scores(LanguageModel.from_arpa(pruned), kenlm_model(pruned), heldout)


def test_missing_unk_gets_kenlm_logprob(tmp_path):
    path = tmp_path / "nounk.arpa"
    path.write_text("\\data\\\nngram 1=3\nngram 2=2\n\n\\1-grams:\n-1.0\t<s>\t-0.5\n-0.5\t</s>\n-0.7\ta\t-0.2\n\n"
                    "\\2-grams:\n-0.3\t<s> a\n-0.1\ta </s>\n\n\\end\\\n", encoding="utf-8")
    model = read_arpa(path)
    assert model.vocab.words == ["<unk>", "<s>", "</s>", "a"] and model.logprob[0][0] == -100.0
    assert_same_scores(LanguageModel.from_arpa(path), kenlm_model(path), ["a", "a b", "b b a", ""])


# ----------------------------------------------------------------------------- normalisation

def test_every_context_of_a_tiny_model_sums_to_one(tmp_path):
    rng = random.Random(5)
    lines = [" ".join(rng.choice("abcdefg") for _ in range(rng.randint(0, 9))) for _ in range(40)]
    model = estimate_kn(lines, order=4, discount_fallback=True)
    write_arpa(model, tmp_path / "tiny.arpa")
    direct, via_arpa = LanguageModel.from_model(model), LanguageModel.from_arpa(tmp_path / "tiny.arpa")
    contexts = {()} | {words[:-1] for n in range(2, 5) for words, _, _ in model.items(n)}
    assert len(contexts) > 150
    for context in contexts:
        # the query table holds float32 values as KenLM does (the estimate itself is checked to 1e-9 above)
        assert distribution_sum(direct, context) == pytest.approx(1.0, abs=1e-6), context
        assert distribution_sum(via_arpa, context) == pytest.approx(1.0, abs=1e-6), context


def test_sampled_contexts_of_a_real_model_sum_to_one(train3000):
    model = estimate_kn(train3000, order=4)
    lm = LanguageModel.from_model(model)
    contexts = sorted({words[:-1] for n in range(2, 5) for words, _, _ in model.items(n)})
    for context in [()] + random.Random(0).sample(contexts, 300):
        assert distribution_sum(lm, context) == pytest.approx(1.0, abs=1e-6), context


# ----------------------------------------------------------------------------- discounts by hand

def test_discounts_by_hand_trigram():
    # <s> a </s> (x3), <s> b b a </s>, <s> b a </s>; ids <unk> <s> </s> a b.
    # 3-grams (raw): <s> a </s> 3, <s> b b 1, b b a 1, b a </s> 2, <s> b a 1 -> n = 3, 1, 1, 0
    #   Y = 3/5, D1 = 1 - 2Y/3 = 3/5, D2 = 2 - 3Y = 1/5, D3+ = 3 - 0 = 3
    # 2-grams (adjusted): <s> a 3, <s> b 2 (raw: begin with <s>); a </s> 2 {<s>, b}; b b 1 {<s>};
    #   b a 2 {b, <s>} -> n = 1, 3, 1, 0; Y = 1/7, D1 = 1 - 6/7 = 1/7, D2 = 2 - 1/7 = 13/7, D3+ = 3
    # 1-grams (adjusted): a 2 {<s>, b}, b 2 {<s>, b}, </s> 1 {a} -> n = 1, 2, 0, 0; but lmplz's
    #   final flush counts the last unigram of its suffix-sorted stream, b (from "<s> b b", the
    #   N-gram that sorts last), with its raw count 3: n = 1, 1, 1, 0; Y = 1/3, D = 1/3, 1, 3
    lines = ["a", "b b a", "a", "a", "b a"]
    model = estimate_kn(lines, order=3)
    assert model.counts_of_counts.tolist() == [[1, 1, 1, 0], [1, 3, 1, 0], [3, 1, 1, 0]]
    expected = [[Fraction(1, 3), 1, 3], [Fraction(1, 7), Fraction(13, 7), 3], [Fraction(3, 5), Fraction(1, 5), 3]]
    assert np.allclose(model.discounts, np.array(expected, dtype=float), rtol=0, atol=1e-12)
    # <unk> gets b() / |V|: b() = (D1 N1 + D2 N2 + D3+ N3+) / sum a over the unigrams' adjusted
    # counts (</s> 1; a, b 2) = (1/3 + 2 * 1) / 5 = 7/15, and |V| = 4 (<unk> </s> a b)
    assert model.logprob[0][0] == pytest.approx(math.log10(Fraction(7, 15) / 4), abs=1e-12)
    assert model.logprob[0][1] == 0.0


def test_discounts_by_hand_bigram_and_fallback():
    # <s> b b c </s>, <s> c </s> (x2). 2-grams: <s> b 1, b b 1, b c 1, c </s> 3, <s> c 2
    #   -> n = 3, 1, 1, 0; Y = 3/5; D1 = 3/5, D2 = 2 - 9/5 = 1/5, D3+ = 3
    # 1-grams: b 2 {<s>, b}, c 2 {b, <s>}, </s> 1 -> n = 1, 2, 0, 0; the flush counts c (last in
    #   the stream, from "b c") with its raw count 3 -> n = 1, 1, 1, 0; D = 1/3, 1, 3
    model = estimate_kn(["b b c", "c", "c"], order=2)
    assert model.counts_of_counts.tolist() == [[1, 1, 1, 0], [3, 1, 1, 0]]
    assert np.allclose(model.discounts, [[1 / 3, 1, 3], [0.6, 0.2, 3]], rtol=0, atol=1e-12)
    # one more "b c": 1-grams b 2, c 2, </s> 1, and the flush puts c in with its raw count 4 -> n3 = 0
    with pytest.raises(InputError, match="1-grams with adjusted count 4 because no 1-gram has adjusted count 3"):
        estimate_kn(["b b c", "c", "c", "b c"], order=2)
    model = estimate_kn(["b b c", "c", "c", "b c"], order=2, discount_fallback=True)
    assert model.discounts[0].tolist() == [0.5, 1.0, 1.5]


# ----------------------------------------------------------------------------- ARPA files

def test_write_read_roundtrip_plain_and_gzip(tmp_path, train3000):
    model = estimate_kn(train3000[:500], order=4)
    write_arpa(model, tmp_path / "lm.arpa")
    write_arpa(model, tmp_path / "lm.arpa.gz")
    assert (tmp_path / "lm.arpa.gz").read_bytes()[:2] == b"\x1f\x8b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lm.arpa", "lm.arpa.gz"]
    text = (tmp_path / "lm.arpa").read_text(encoding="utf-8")
    assert gzip.decompress((tmp_path / "lm.arpa.gz").read_bytes()).decode("utf-8") == text
    lines = text.splitlines()
    assert lines[:5] == ["\\data\\"] + [f"ngram {n}={c}" for n, c in enumerate(model.counts, 1)]
    assert lines[-1] == "\\end\\" and lines[7].startswith("-") and lines[8].startswith("0\t<s>\t-")
    back = read_arpa(tmp_path / "lm.arpa.gz")
    assert back.vocab == model.vocab and back.counts == model.counts
    for n in range(model.order):
        assert np.array_equal(back.ngrams[n], model.ngrams[n])
        for ours, read in ((model.logprob[n], back.logprob[n]), (model.backoff[n], back.backoff[n])):
            assert np.array_equal(ours.astype(np.float32), read.astype(np.float32))
    # every value is the shortest decimal of its float32, and every non-top n-gram has a back-off
    for line in lines:
        fields = line.split("\t")
        if len(fields) > 1:
            value = fields[0]
            assert value == np.format_float_positional(np.float32(value), unique=True, trim="-")
    assert sum(1 for line in lines if line.count("\t") == 2) == sum(model.counts[:-1])


def test_token_array_input_gives_the_same_model():
    lines = ["a b c", "c b", "", "b a a c d", "d d"] * 3
    vocab = Vocabulary(["zz", "d", "c"])
    tokens = TokenArray.from_sentences(lines, vocab)
    from_tokens = estimate_kn(tokens, order=3, vocab=vocab, discount_fallback=True)
    from_text = estimate_kn(lines, order=3, discount_fallback=True)
    assert from_tokens.vocab == from_text.vocab
    for n in range(3):
        assert np.array_equal(from_tokens.ngrams[n], from_text.ngrams[n])
        assert np.array_equal(from_tokens.logprob[n], from_text.logprob[n])
    lm = LanguageModel.from_model(from_text)
    assert lm.vocab_map(vocab).tolist() == [0, 6, 5, 3, 4]


def test_text_is_split_like_lmplz(tmp_path):
    corpus = tmp_path / "corpus.txt.gz"
    corpus.write_bytes(gzip.compress("a\tb  c\r\nb\u00a0c a\n\n".encode("utf-8")))
    model = estimate_kn(corpus, order=2, discount_fallback=True)
    assert model.vocab.words == ["<unk>", "<s>", "</s>", "a", "b", "c", "b\u00a0c"]
    assert ("<s>", "</s>") in as_dict(model)


# ----------------------------------------------------------------------------- bad input

def test_bad_corpora_raise_input_error(tmp_path):
    with pytest.raises(InputError, match="empty"):
        estimate_kn([])
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(InputError, match="empty"):
        estimate_kn(empty)
    with pytest.raises(InputError, match="empty"):
        estimate_kn(TokenArray(np.zeros(0, np.int32), np.zeros(1, np.int64)), vocab=Vocabulary())
    with pytest.raises(InputError, match="Vocabulary"):
        estimate_kn(TokenArray.from_sentences(["a b"], Vocabulary()))
    for order in (1, 7, True, "3", 2.0):
        with pytest.raises(InputError, match="order"):
            estimate_kn(["a b c"], order=order)
    with pytest.raises(InputError, match="discount_fallback=True"):
        estimate_kn(["a b c d e f"], order=3)
    with pytest.raises(InputError, match="discount_fallback"):
        estimate_kn(["a b c"], order=3, discount_fallback=(0.5, -1, 1))
    with pytest.raises(InputError, match="UTF-8") as err:
        estimate_kn([b"ok", b"\xff\xfe"], order=2)
    assert err.value.line == 2
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\u00e9\n".encode("latin-1"))
    with pytest.raises(InputError, match="UTF-8"):
        estimate_kn(latin1, order=2)
    with pytest.raises(InputError, match="<s>") as err:
        estimate_kn(["a b", "a <s> b"], order=2)
    assert err.value.line == 2
    with pytest.raises(InputError, match="cannot open"):
        estimate_kn(tmp_path / "missing.txt")


GOOD_ARPA = ("\\data\\\nngram 1=5\nngram 2=4\nngram 3=2\n\n\\1-grams:\n-1.2\t<unk>\t0\n0\t<s>\t-0.3\n"
             "-0.7\t</s>\t0\n-0.6\ta\t-0.25\n-0.9\tb\t-0.1\n\n\\2-grams:\n-0.2\t<s> a\t-0.1\n-0.4\ta b\t-0.05\n"
             "-0.3\tb </s>\t0\n-0.5\ta </s>\t0\n\n\\3-grams:\n-0.1\t<s> a b\n-0.2\ta b </s>\n\n\\end\\\n")


@pytest.mark.parametrize("text, message", [
    ("", "no \\\\data"),
    ("\\data\\\nngram 1=1\n\n\\1-grams:\n-1\t<s>\n\n\\end\\\n", "lack </s>"),
    (GOOD_ARPA.replace("ngram 2=4", "ngram 3=4"), "in order"),
    (GOOD_ARPA.replace("ngram 2=4", "ngram 2=5"), "announced"),
    (GOOD_ARPA.replace("-0.4\ta b", "x\ta b"), "not a number"),
    (GOOD_ARPA.replace("-0.4\ta b", "nan\ta b"), "log10 probability"),
    (GOOD_ARPA.replace("a b </s>", "a c </s>"), "not among the unigrams"),
    (GOOD_ARPA.replace("-0.5\ta </s>", "-0.5\ta b"), "twice"),
    (GOOD_ARPA.replace("<s> a b\n", "b a b\n"), "context"),
    (GOOD_ARPA.replace("-0.1\t<s> a b", "-0.1\t<s> a b\t-0.2"), "back-off on a highest-order"),
    (GOOD_ARPA.replace("\\end\\", "\\end"), "end"),
    (GOOD_ARPA + "more\n", "after \\\\end"),
])
def test_malformed_arpa_raises_input_error(tmp_path, text, message):
    path = tmp_path / "bad.arpa"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        read_arpa(path)


def test_good_arpa_fixture_is_good(tmp_path):
    path = tmp_path / "good.arpa"
    path.write_text("# made by hand\n\n" + GOOD_ARPA, encoding="utf-8")
    assert read_arpa(path).counts == [5, 4, 2]
    assert_same_scores(LanguageModel.from_arpa(path), kenlm_model(path), ["a b", "b a", "a a b b c"])
    path.write_bytes(GOOD_ARPA.replace("-0.6\ta", "-0.6\t\xe9").encode("latin-1"))
    with pytest.raises(InputError, match="UTF-8"):
        read_arpa(path)


@st.composite
def broken_arpa(draw) -> bytes:
    lines = GOOD_ARPA.split("\n")
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "replace", "edit", "swap", "count"]))
        if op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "replace":
            lines[i] = draw(st.text(alphabet=st.sampled_from(list("\t -.0123456789e<>/\\sabnd=gram:#")),
                                    max_size=25))
        elif op == "edit":
            line = lines[i]
            j = draw(st.integers(0, len(line)))
            lines[i] = line[:j] + draw(st.text(max_size=3)) + line[j + draw(st.integers(0, 3)):]
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines[i] = lines[i].replace("=", "=" + str(draw(st.integers(0, 10**12))), 1)
    data = "\n".join(lines).encode("utf-8")
    if draw(st.booleans()):
        j = draw(st.integers(0, len(data)))
        data = data[:j] + draw(st.binary(min_size=1, max_size=3)) + data[j:]
    return gzip.compress(data) if draw(st.booleans()) else data


@pytest.fixture(scope="module")
def fuzz_file(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz") / "lm.arpa"


@pytest.mark.filterwarnings("ignore:.*positive log10 probability")
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken_arpa())
def test_only_input_error_escapes_the_reader(fuzz_file, data):
    fuzz_file.write_bytes(data)
    try:
        model = read_arpa(fuzz_file)
        LanguageModel.from_model(model).score("a b c")
    except InputError:
        pass


def test_query_tables_folder_scores_as_the_arpa_file(tmp_path):
    """LanguageModel.save / load: the folder of query tables (memory-mapped) scores every token as the ARPA
    file it was built from, bit for bit, unknown words and sentence ends included; bad folders are InputErrors."""
    rng = np.random.default_rng(7)
    words = [f"w{k}" for k in range(40)]
    lines = [" ".join(rng.choice(words, size=int(rng.integers(1, 12)))) for _ in range(400)]
    write_arpa(estimate_kn(lines[:300], order=4, discount_fallback=True), tmp_path / "lm.arpa")
    from_arpa = LanguageModel.from_arpa(tmp_path / "lm.arpa")
    from_arpa.save(tmp_path / "lm.tables")
    loaded = LanguageModel.load(tmp_path / "lm.tables")
    assert isinstance(loaded.tables.slots.base, np.memmap) or isinstance(loaded.tables.slots, np.memmap)
    import numba        # the same numba types as the tables built from ARPA: no second compilation of the kernels
    assert [numba.typeof(a) for a in loaded.tables[4:]] == [numba.typeof(a) for a in from_arpa.tables[4:]]
    assert loaded.vocab.words == from_arpa.vocab.words and loaded.order == 4
    held_out = lines[300:] + ["zzz w1 unseen", ""]
    for a, b in zip(from_arpa.score_ids(*from_arpa.encode_lines(held_out)),
                    loaded.score_ids(*loaded.encode_lines(held_out))):
        assert np.array_equal(a, b)
    assert LanguageModel.load(tmp_path / "lm.arpa").vocab.words == from_arpa.vocab.words   # a file: ARPA
    (tmp_path / "lm.tables" / "lm.json").write_text('{"format": "other"}')
    with pytest.raises(InputError, match="not a minismt LM folder"):
        LanguageModel.load(tmp_path / "lm.tables")
    (tmp_path / "lm.tables" / "lm.json").unlink()
    with pytest.raises(InputError, match="not a minismt LM folder"):
        LanguageModel.load(tmp_path / "lm.tables")


def test_older_query_tables_are_rebuilt_once_from_the_arpa_file(tmp_path, capsys):
    """A model folder whose query tables are of an older format: ``LanguageModel.of_model`` rebuilds them from the
    model's ARPA file (and says so), then loads them as they are; without tables, the ARPA file is read; tables
    of a newer format are refused and left as they are."""
    write_arpa(estimate_kn(["a b c d", "b c d e", "a c e"], order=3, discount_fallback=True), tmp_path / "lm.arpa")
    files = {"lm_arpa": "lm.arpa", "lm_tables": "lm.tables"}
    LanguageModel.from_arpa(tmp_path / "lm.arpa").save(tmp_path / "lm.tables")
    info = tmp_path / "lm.tables" / "lm.json"
    info.write_text(info.read_text().replace('"version": 2', '"version": 1'))
    with pytest.raises(InputError, match="not a minismt LM folder"):
        LanguageModel.load(tmp_path / "lm.tables")
    rebuilt = LanguageModel.of_model(tmp_path, files)
    assert "rebuilding the LM query tables" in capsys.readouterr().err
    assert '"version": 2' in info.read_text()
    assert rebuilt.score("a b c") == LanguageModel.from_arpa(tmp_path / "lm.arpa").score("a b c")
    LanguageModel.of_model(tmp_path, files)
    assert capsys.readouterr().err == ""
    assert LanguageModel.of_model(tmp_path, {"lm_arpa": "lm.arpa"}).score("a b c") == rebuilt.score("a b c")
    info.write_text(info.read_text().replace('"version": 2', '"version": 3'))   # newer: refused, not rebuilt
    with pytest.raises(InputError, match="not a minismt LM folder"):
        LanguageModel.of_model(tmp_path, files)
    assert '"version": 3' in info.read_text()


def test_a_key_shared_by_two_ngrams_is_refused_naming_which():
    """The query table knows an n-gram by its hash: a repeated n-gram and (were it to happen) two n-grams with
    the same 62 hash bits are refused, each with its own message."""
    from minismt.lm.query import _refuse_duplicate
    rows = np.array([[3, 4, -1], [5, 6, -1], [3, 4, -1]], dtype=np.int32)
    with pytest.raises(InputError, match="listed twice"):
        _refuse_duplicate([None, rows], 2, 2)
    with pytest.raises(InputError, match="same 62-bit hash"):
        _refuse_duplicate([None, rows], 2, 1)
