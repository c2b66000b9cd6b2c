"""cdec k-best lists and weights files: real cdec output, round trips, malformed input, fuzzing."""

from __future__ import annotations

import gzip
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import shared_path
from minismt.errors import InputError
from minismt.features import FeatureSpace, read_weights
from plugins.cdec.kbest_file import (CdecEntry, format_kbest_line, iter_kbest, read_kbest,
                                write_kbest, write_kbest_from)
from plugins.cdec.weights import read_cdec_weights, write_cdec_weights

# (k-best file, weights file cdec decoded it with), under fixtures/cdec; see its README.
SCORED_KBEST = [
    ("decode_nc/kbest.init.100", "decode_nc/weights.init"),
    ("decode_nc/kbest.dpmertfinal.100", "dpmert_decoded/weights.final"),
    ("dpmert_decoded/kbest100.final", "dpmert_decoded/weights.final"),
    ("dpmert_testdata/kbest100.w0", "dpmert_testdata/weights.0"),
    ("dpmert_testdata/kbest100_derivs.w0", "dpmert_testdata/weights.0"),
    ("dpmert_testdata/kbest100.final", "dpmert_testdata/weights.final"),
] + [
    (f"hg_test/{kind}.{tag}.txt", f"hg_test/weights.{weights}")
    for tag, weights in [("tiny", "tiny"), ("hg", "hg"), ("hg_f2neg", "hg_f2neg"),
                         ("hg_int", "f1"), ("hg_balanced", "f1"), ("small", "small")]
    for kind in ("kbest", "kbest_unique")
]

# (file, lines, sentences, distinct strings or None). The README says kbest.small.txt has
# "only 5 distinct strings"; it has 2 (60 + 40 derivations); the 5 are in kbest_unique.small.txt.
KBEST_SIZES = [
    ("decode_nc/kbest.init.100", 760, 10, None),
    ("decode_nc/kbest.dpmertfinal.100", 864, 10, None),
    ("dpmert_testdata/kbest100.w0", 200, 2, None),
    ("dpmert_testdata/kbest100.final", 200, 2, None),
    ("hg_test/kbest.small.txt", 100, 1, 2),
    ("hg_test/kbest_unique.small.txt", 5, 1, 5),
    ("hg_test/kbest.hg_balanced.txt", 16, 1, 16),
]

WEIGHTS_FILES = ["decode_nc/weights.init", "dpmert_testdata/weights.0", "dpmert_testdata/weights.final",
                 "dpmert_pl_run/weights.final", "dpmert_decoded/weights.final", "hg_test/weights.tiny",
                 "hg_test/weights.small", "hg_test/weights.hg_f2neg", "hg_test/weights.f1"]


def cdec(name: str):
    return shared_path("fixtures", "cdec", *name.split("/"))


def six_digit_bound(entry: CdecEntry, weights: dict[str, float]) -> float:
    """Largest |score - w.f| that 6-significant-digit printing of features and score explains.

    Each printed number is off by at most half a unit in its 6th digit, i.e. 5e-6 relative.
    """
    terms = sum(abs(weights.get(name, 0.0) * value) for name, value in entry.features.items())
    return 5e-6 * (terms + abs(entry.score)) + 1e-12


def nonzero(features: dict[str, float]) -> dict[str, float]:
    return {name: value for name, value in features.items() if value != 0.0}


def write_text(path, text: str):
    path.write_bytes(text.encode("utf-8"))
    return path


# ---- real cdec output ------------------------------------------------------------------


def test_kbest_init_100_counts_scores_and_order():
    entries = list(iter_kbest(cdec("decode_nc/kbest.init.100")))
    weights = read_cdec_weights(cdec("decode_nc/weights.init"))
    assert len(entries) == 760
    assert sorted({e.sentence for e in entries}) == list(range(10))
    assert [e.line for e in entries] == list(range(1, 761))
    assert entries[0] == CdecEntry(0, "musharraf last akt ?", {
        "PhraseModel_1": 3.26007, "LanguageModel": -12.8351, "PhraseModel_0": 0.733732, "Glue": 3.0,
        "PassThrough": 1.0, "WordPenalty": -1.73718, "LanguageModel_OOV": 1.0, "PhraseModel_6": 1.0,
        "PhraseModel_5": 0.0, "PhraseModel_4": 0.724524, "PhraseModel_3": 2.06412,
        "PhraseModel_2": 2.74036}, -10.8372, 1)
    for e in entries:
        model = sum(weights.get(name, 0.0) * value for name, value in e.features.items())
        assert math.isclose(model, e.score, rel_tol=1e-3, abs_tol=1e-3), e
        assert abs(model - e.score) <= six_digit_bound(e, weights), e


@pytest.mark.parametrize("kbest_name,weights_name", SCORED_KBEST, ids=[k for k, _ in SCORED_KBEST])
def test_kbest_scores_are_the_model_score_sorted_best_first(kbest_name, weights_name):
    kbest_path = cdec(kbest_name)
    weights = read_cdec_weights(cdec(weights_name))
    entries = list(iter_kbest(kbest_path))
    assert entries
    for e in entries:
        model = sum(weights.get(name, 0.0) * value for name, value in e.features.items())
        assert math.isclose(model, e.score, rel_tol=1e-3, abs_tol=1e-3), e
        assert abs(model - e.score) <= six_digit_bound(e, weights), e
    for previous, e in zip(entries, entries[1:]):
        assert e.sentence >= previous.sentence
        if e.sentence == previous.sentence:
            assert e.score <= previous.score, (previous, e)

    kb = read_kbest(kbest_path)
    w = np.array([weights.get(name, 0.0) for name in kb.space.names])
    np.testing.assert_allclose(kb.scores(w), [e.score for e in entries], rtol=1e-4, atol=1e-3)
    assert kb.texts() == [e.text for e in entries]


def test_every_kbest_fixture_is_checked():
    folder = shared_path("fixtures", "cdec")
    on_disk = {path.relative_to(folder).as_posix() for path in folder.glob("*/kbest*")}
    assert on_disk == {name for name, _ in SCORED_KBEST}


@pytest.mark.parametrize("name,lines,sentences,distinct", KBEST_SIZES, ids=[s[0] for s in KBEST_SIZES])
def test_kbest_sizes(name, lines, sentences, distinct):
    kb = read_kbest(cdec(name))
    assert (kb.n_hypotheses, kb.n_instances) == (lines, sentences)
    assert np.all(np.diff(kb.offsets) > 0)
    if distinct is not None:
        assert len(set(kb.texts())) == distinct


def test_read_kbest_dense_and_sparse_columns_agree():
    path = cdec("decode_nc/kbest.init.100")
    weights = read_cdec_weights(cdec("decode_nc/weights.init"))
    dense_names = ["LanguageModel", "WordPenalty", "NotInTheFile"]
    mixed = read_kbest(path, dense_names=dense_names)
    assert mixed.space.dense_names == dense_names
    assert "LanguageModel" not in mixed.space.sparse_names
    assert mixed.features[0, :2].tolist() == [-12.8351, -1.73718]
    assert not mixed.features[:, 2].any()
    sparse = read_kbest(path)
    assert sparse.space.n_dense == 0
    for kb in (mixed, sparse):
        w = np.array([weights.get(name, 0.0) for name in kb.space.names])
        for row, e in enumerate(iter_kbest(path)):
            assert nonzero(kb.feature_dict(row)) == nonzero(e.features)
        np.testing.assert_allclose(kb.scores(w), sparse.scores(
            np.array([weights.get(name, 0.0) for name in sparse.space.names])), rtol=1e-12)


def test_read_kbest_shares_a_space_across_files():
    space = FeatureSpace(["LanguageModel"])
    first = read_kbest(cdec("decode_nc/kbest.init.100"), space=space)
    second = read_kbest(cdec("hg_test/kbest.tiny.txt"), space=space)
    assert first.space is second.space is space
    assert {"f1", "f2", "Glue"} <= set(space.sparse_names)
    with pytest.raises(InputError, match="dense_names"):
        read_kbest(cdec("hg_test/kbest.tiny.txt"), space=space, dense_names=["f1"])


# ---- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("kbest_name,weights_name", SCORED_KBEST, ids=[k for k, _ in SCORED_KBEST])
def test_kbest_round_trip(kbest_name, weights_name, tmp_path):
    path = cdec(kbest_name)
    entries = list(iter_kbest(path))
    for out in (tmp_path / "copy", tmp_path / "copy.gz"):
        write_kbest(out, entries)
        again = list(iter_kbest(out))
        assert [format_kbest_line(e) for e in again] == [format_kbest_line(e) for e in entries]
        assert again == entries
    assert gzip.decompress((tmp_path / "copy.gz").read_bytes()) == (tmp_path / "copy").read_bytes()

    # the writer prints what cdec printed, up to the order of the features
    for original, e in zip(path.read_text("utf-8").splitlines(), entries):
        head, _, feats, score = original.split(" ||| ")
        canonical = " ||| ".join([head, e.text, " ".join(sorted(feats.split())), score])
        assert format_kbest_line(e) == canonical


@pytest.mark.parametrize("kbest_name,weights_name", SCORED_KBEST, ids=[k for k, _ in SCORED_KBEST])
def test_write_kbest_from_round_trip(kbest_name, weights_name, tmp_path):
    weights = read_cdec_weights(cdec(weights_name))
    entries = list(iter_kbest(cdec(kbest_name)))
    for dense_names in ([], list(weights)):
        kb = read_kbest(cdec(kbest_name), dense_names=dense_names)
        out = tmp_path / "from_kbest"
        write_kbest_from(out, kb, weights)
        again = list(iter_kbest(out))
        assert len(again) == len(entries)
        for e, a in zip(entries, again):
            assert (a.sentence, a.text) == (e.sentence, e.text)
            assert a.features == nonzero(e.features)
            assert abs(a.score - e.score) <= six_digit_bound(e, weights), (e, a)


def test_write_kbest_from_keeps_empty_sentences_and_takes_arrays(tmp_path):
    path = write_text(tmp_path / "k",
                      "1 ||| a ||| x=1 y=-2 ||| 0\n1 ||| b |||  ||| 0\n3 ||| c ||| y=0.5 ||| 0\n")
    kb = read_kbest(path, n_sentences=5)
    assert kb.n_instances == 5 and np.diff(kb.offsets).tolist() == [0, 2, 0, 1, 0]
    write_kbest_from(tmp_path / "out", kb, np.array([2.0, 1.0]))
    assert (tmp_path / "out").read_text() == (
        "1 ||| a ||| x=1 y=-2 ||| 0\n1 ||| b |||  ||| 0\n3 ||| c ||| y=0.5 ||| 0.5\n")


@pytest.mark.parametrize("name", WEIGHTS_FILES)
def test_weights_files_parse_and_round_trip(name, tmp_path):
    weights = read_cdec_weights(cdec(name))
    assert weights and all(math.isfinite(v) for v in weights.values())
    assert weights == read_weights(cdec(name))
    write_cdec_weights(tmp_path / "w", weights)
    again = read_cdec_weights(tmp_path / "w")
    assert list(again.items()) == list(weights.items())


def test_weights_values():
    assert read_cdec_weights(cdec("decode_nc/weights.init")) == {
        "Glue": 0.0, "WordPenalty": -1.0, "LanguageModel": 0.5, "LanguageModel_OOV": -1.0,
        **{f"PhraseModel_{i}": -0.3 for i in range(7)}, "PassThrough": -2.0}
    small = read_cdec_weights(cdec("hg_test/weights.small"))
    assert small["Model_1"] == -0.5 and small["Model_5"] == 0.5
    assert read_cdec_weights(cdec("dpmert_decoded/weights.final"))["PassThrough"] == -2.084627


@given(st.dictionaries(st.text(st.characters(blacklist_categories=("Zs", "Cc", "Zl", "Zp", "Cs")),
                               min_size=1).filter(lambda s: "#" not in s and not any(c.isspace() for c in s)
                                                  and not s.startswith("\ufeff")),  # a byte-order mark: refused
                       st.floats(allow_nan=False, allow_infinity=False), max_size=8))
@settings(max_examples=200, deadline=None)
def test_write_cdec_weights_is_exact(tmp_path_factory, weights):
    path = tmp_path_factory.mktemp("w") / "weights"
    write_cdec_weights(path, weights)
    again = read_cdec_weights(path)
    assert list(again) == list(weights)
    assert all(np.float64(again[k]).tobytes() == np.float64(v).tobytes() for k, v in weights.items())


# ---- hand-written input ------------------------------------------------------------------------


def test_weights_comments_blanks_and_separators(tmp_path):
    path = write_text(tmp_path / "w", "# written by hand\n\nLanguageModel\t-1.5  # the LM\n"
                                      "   WordPenalty    2e-3\t\n#Glue 1\nPassThrough\t\t-.25\r\n")
    assert read_cdec_weights(path) == {"LanguageModel": -1.5, "WordPenalty": 0.002, "PassThrough": -0.25}


@pytest.mark.parametrize("text,line", [
    ("a 1\nb 2\na 3\n", 3),
    ("a 1\nb\n", 2),
    ("a 1 2\n", 1),
    ("a nan\n", 1),
    ("a -inf\n", 1),
    ("a one\n", 1),
    ("a=1\n", 1),
])
def test_bad_weights_lines(tmp_path, text, line):
    path = write_text(tmp_path / "w", text)
    with pytest.raises(InputError) as err:
        read_cdec_weights(path)
    assert (err.value.path, err.value.line) == (str(path), line)


@pytest.mark.parametrize("weights", [{"a b": 1.0}, {"": 1.0}, {"a#b": 1.0}, {"a": math.nan}, {"a": math.inf}])
def test_write_cdec_weights_refuses_what_cannot_read_back(tmp_path, weights):
    with pytest.raises(InputError):
        write_cdec_weights(tmp_path / "w", weights)
    assert not (tmp_path / "w").exists()


def test_kbest_token_details(tmp_path):
    path = write_text(tmp_path / "k", "0 ||| a b |||  ||| -0\n"
                                      "0 ||| |||\tx=1   a=b=-2e-3\t||| 7\n"
                                      "12 ||| ü   z ||| =x=4 ||| 1e+02\n")
    assert list(iter_kbest(path)) == [
        CdecEntry(0, "a b", {}, -0.0, 1),
        CdecEntry(0, "", {"x": 1.0, "a=b": -0.002}, 7.0, 2),
        CdecEntry(12, "ü   z", {"=x": 4.0}, 100.0, 3)]
    assert [format_kbest_line(e) for e in iter_kbest(path)] == [
        "0 ||| a b |||  ||| -0", "0 |||  ||| a=b=-0.002 x=1 ||| 7", "12 ||| ü   z ||| =x=4 ||| 100"]
    assert read_kbest(path).n_instances == 13


BAD_KBEST_LINES = [
    "0 ||| a ||| x=1",
    "0 ||| a ||| x=1 ||| 2 ||| 3",
    "0 ||| a ||| x=1 ||| 2 |||",
    "",
    "x ||| a ||| x=1 ||| 2",
    "-1 ||| a ||| x=1 ||| 2",
    "1.0 ||| a ||| x=1 ||| 2",
    " ||| a ||| x=1 ||| 2",
    "+1 ||| a ||| x=1 ||| 2",
    "1234567890123456789 ||| a ||| x=1 ||| 2",
    "0 ||| a ||| x ||| 2",
    "0 ||| a ||| =1 ||| 2",
    "0 ||| a ||| x= ||| 2",
    "0 ||| a ||| x=nan ||| 2",
    "0 ||| a ||| x=inf ||| 2",
    "0 ||| a ||| x=-Infinity ||| 2",
    "0 ||| a ||| x=1e999 ||| 2",
    "0 ||| a ||| x=abc ||| 2",
    "0 ||| a ||| x=1 x=2 ||| 2",
    "0 ||| a ||| x=1 ||| nan",
    "0 ||| a ||| x=1 ||| ",
    "0 ||| a ||| x=1 ||| 2 3",
    "0 ||| a ||| x=1 ||| two",
]


@pytest.mark.parametrize("bad", BAD_KBEST_LINES)
def test_bad_kbest_lines(tmp_path, bad):
    path = write_text(tmp_path / "k", f"0 ||| fine ||| x=1 ||| 1\n{bad}\n1 ||| fine ||| x=1 ||| 1\n")
    for read in (lambda p: list(iter_kbest(p)), read_kbest):
        with pytest.raises(InputError) as err:
            read(path)
        assert (err.value.path, err.value.line) == (str(path), 2)


def test_kbest_sentence_order_and_count(tmp_path):
    path = write_text(tmp_path / "k", "0 ||| a ||| x=1 ||| 1\n2 ||| a ||| x=1 ||| 1\n1 ||| b ||| x=1 ||| 1\n")
    assert [e.sentence for e in iter_kbest(path)] == [0, 2, 1]
    with pytest.raises(InputError) as err:
        read_kbest(path)
    assert (err.value.path, err.value.line) == (str(path), 3)
    ordered = write_text(tmp_path / "ordered", "0 ||| a ||| x=1 ||| 1\n2 ||| a ||| x=1 ||| 1\n")
    assert read_kbest(ordered).n_instances == 3
    with pytest.raises(InputError) as err:
        read_kbest(ordered, n_sentences=2)
    assert err.value.line == 2
    huge = write_text(tmp_path / "huge", "123456789012 ||| a ||| x=1 ||| 1\n")
    with pytest.raises(InputError, match="n_sentences"):
        read_kbest(huge)


def test_kbest_not_utf8_and_corrupt_gzip(tmp_path):
    path = tmp_path / "k"
    path.write_bytes(b"0 ||| a ||| x=1 ||| 1\n0 ||| \xff ||| x=1 ||| 1\n")
    with pytest.raises(InputError) as err:
        list(iter_kbest(path))
    assert err.value.line == 2
    path.write_bytes(gzip.compress(b"0 ||| a ||| x=1 ||| 1\n" * 50)[:-12])
    with pytest.raises(InputError):
        read_kbest(path)


@pytest.mark.parametrize("entry", [
    CdecEntry(-1, "a", {}, 0.0), CdecEntry(0, "a ||| b", {}, 0.0), CdecEntry(0, "a\nb", {}, 0.0),
    CdecEntry(0, "a", {"x y": 1.0}, 0.0), CdecEntry(0, "a", {"": 1.0}, 0.0),
    CdecEntry(0, "a", {"x": math.nan}, 0.0), CdecEntry(0, "a", {}, math.inf)])
def test_format_kbest_line_refuses_what_cannot_read_back(entry):
    with pytest.raises(InputError):
        format_kbest_line(entry)


def test_write_kbest_is_atomic(tmp_path):
    out = write_text(tmp_path / "k", "old\n")
    entries = [CdecEntry(0, "a", {"x": 1.0}, 1.0), CdecEntry(0, "a ||| b", {}, 0.0)]
    with pytest.raises(InputError):
        write_kbest(out, entries)
    assert out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["k"]


# ---- fuzzing: every reader either succeeds or raises InputError ------------------------------------

FUZZ = settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOKENS = ["|||", " ||| ", "=", "#", " ", "  ", "\t", "\n", "\r\n", "0", "1", "7", "42", "-", "+", ".", "e",
          "E", "nan", "inf", "NaN", "x", "LM", "Glue", "_", "ü", "\x00", "\ufeff", "\u2028", "1e999"]
BAD_BYTES = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80", b"\x1f\x8b"]
FALLBACK_SEEDS = [
    ["0 ||| musharraf last akt ? ||| PhraseModel_1=3.26007 LanguageModel=-12.8351 Glue=3 ||| -10.8372",
     "0 ||| i d c b a |||  ||| 0", "1 ||| X <s> ||| f1=-2.5 f2=-99.8 ||| -80.84"],
    ["LanguageModel -0.0634002", "Model_1 -.5", "PassThrough -2.084627"],
]


@pytest.fixture(scope="module")
def seed_files():
    """The first lines of every cdec k-best and weights fixture (inline ones without ../shared)."""
    try:
        folder = shared_path("fixtures", "cdec")
    except pytest.skip.Exception:
        return FALLBACK_SEEDS
    paths = sorted(folder.glob("*/kbest*")) + sorted(folder.glob("*/weights*"))
    return [path.read_text("utf-8").splitlines()[:40] for path in paths]


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@st.composite
def mutated_line(draw, line):
    """The line left alone, or truncated, or with a field dropped, duplicated, swapped or replaced."""
    separator = draw(st.sampled_from(["|||", " ", "="]))
    fields = line.split(separator)
    i = draw(st.integers(0, len(fields) - 1))
    j = draw(st.integers(0, len(fields) - 1))
    operation = draw(st.sampled_from(["keep", "keep", "keep", "keep", "truncate", "drop", "duplicate",
                                      "swap", "replace"]))
    if operation == "keep":
        return line
    if operation == "truncate":
        return line[:draw(st.integers(0, len(line)))]
    if operation == "drop":
        del fields[i]
    elif operation == "duplicate":
        fields.insert(i, fields[i])
    elif operation == "swap":
        fields[i], fields[j] = fields[j], fields[i]
    else:
        fields[i] = draw(st.lists(st.sampled_from(TOKENS), max_size=4).map("".join))
    return separator.join(fields)


@st.composite
def mutated_excerpt(draw, files):
    """A few consecutive real lines of one fixture, each maybe mutated."""
    lines = draw(st.sampled_from(files))
    start = draw(st.integers(0, len(lines) - 1))
    excerpt = lines[start:start + draw(st.integers(1, 5))]
    return "\n".join(draw(mutated_line(line)) for line in excerpt)


@st.composite
def fuzz_input(draw, files):
    """File contents: random bytes, format-like tokens, mutated real lines; maybe broken UTF-8 or gzip."""
    kind = draw(st.sampled_from(["bytes", "tokens", "lines", "lines"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "tokens":
        data = draw(st.lists(st.sampled_from(TOKENS), max_size=40).map("".join)).encode("utf-8")
    else:
        data = draw(mutated_excerpt(files)).encode("utf-8") + draw(st.sampled_from([b"", b"\n"]))
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from(BAD_BYTES)) + data[at:]
    wrapping = draw(st.sampled_from(["plain", "plain", "plain", "gzip", "gzip-truncated", "gzip-garbage"]))
    if wrapping == "gzip":
        data = gzip.compress(data)
    elif wrapping == "gzip-truncated":
        packed = gzip.compress(data)
        data = packed[:draw(st.integers(0, len(packed) - 1))]
    elif wrapping == "gzip-garbage":
        data = gzip.compress(data) + draw(st.binary(min_size=1, max_size=8))
    return data


def fuzz_iter_kbest(path):
    try:
        entries = list(iter_kbest(path))
    except InputError:
        return
    copy = path.with_name(path.name + ".copy")
    write_kbest(copy, entries)
    assert [format_kbest_line(e) for e in iter_kbest(copy)] == [format_kbest_line(e) for e in entries]


def fuzz_read_kbest(path):
    dense_names = ["LanguageModel", "f1"]
    try:
        kb = read_kbest(path, dense_names=dense_names)
    except InputError:
        return
    entries = list(iter_kbest(path))
    assert kb.n_hypotheses == len(entries)
    for row, e in enumerate(entries):
        assert kb.hypothesis(row) == e.text
        assert kb.feature_dict(row) == {**dict.fromkeys(dense_names, 0.0), **e.features}


def fuzz_weights(reader):
    def check(path):
        try:
            weights = reader(path)
        except InputError:
            return
        copy = path.with_name(path.name + ".copy")
        copy.unlink(missing_ok=True)  # the fuzzer reuses the directory: a copy from an earlier example
        try:
            write_cdec_weights(copy, weights)
        except InputError:  # a name the writer cannot write so that it reads back (e.g. a leading U+FEFF)
            assert not copy.exists()
            return
        assert read_cdec_weights(copy) == weights
    return check


READERS = {"iter_kbest": fuzz_iter_kbest, "read_kbest": fuzz_read_kbest,
           "read_cdec_weights": fuzz_weights(read_cdec_weights), "read_weights": fuzz_weights(read_weights)}


@FUZZ
@given(data=st.data())
def test_fuzz_readers_raise_only_input_error(data, seed_files, fuzz_dir):
    """Each generated file goes through every reader (cheaper than generating it four times)."""
    path = fuzz_dir / "input"
    path.write_bytes(data.draw(fuzz_input(seed_files), label="contents"))
    for check in READERS.values():
        check(path)
