"""cdec's binary forests (``cdec -O DIR`` → ``DIR/<i>.bin.gz``), written by the real cdec at test time.

The decode_nc fixture folder is copied to a temporary folder and decoded there (its cdec.run.ini
names the grammar and the LM relative to the current folder); every forest cdec writes is read with
:func:`read_cdec_binary` and checked against what the same cdec run prints: the 1-best, the k-best
list with its features, the model scores, and the JSON conversions of the same forests in the
fixture folder. Nothing generated is kept. Without ../shared (the cdec build and its fixtures)
these tests skip.
"""

from __future__ import annotations

import gzip
import shutil
import struct
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import shared_path
from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph.cdec_binary import HEADER_SIZE, loads_cdec_binary, read_cdec_binary
from minismt.hypergraph.cdec_json import read_cdec_json
from plugins.cdec.kbest_file import iter_kbest
from plugins.cdec.weights import read_cdec_weights, write_cdec_weights

FEATURES = ["Glue", "WordPenalty", "LanguageModel", "LanguageModel_OOV", "PassThrough"] + [
    f"PhraseModel_{i}" for i in range(7)]
# nodes/edges of the dev forests (fixtures/cdec/README.md, decode_nc)
DEV_SIZES = [(63, 158), (132, 619), (90, 177), (140, 504), (169, 529), (243, 1207), (161, 529), (193, 1019),
             (120, 351), (91, 228)]


# ---- running cdec ------------------------------------------------------------------------------

def cdec_tool() -> Path:
    return shared_path("tools", "cdec", "cdec")


def run_cdec(folder: Path, weights: str, source: str, out: str, *extra: str) -> list[str]:
    """``cdec -c cdec.run.ini -w WEIGHTS -i SOURCE -O OUT`` run in ``folder``; its stdout lines."""
    (folder / out).mkdir(exist_ok=True)  # cdec crashes when the -O folder does not exist
    result = subprocess.run([str(cdec_tool()), "-c", "cdec.run.ini", "-w", weights, "-i", source, "-O", out,
                             *extra], cwd=folder, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.splitlines()


@pytest.fixture(scope="module")
def decode_nc(tmp_path_factory) -> Path:
    """A writable copy of fixtures/cdec/decode_nc, decoded with weights.init into OUT/<i>.bin.gz;
    cdec's stdout (the 1-best) is in stdout.init."""
    cdec_tool()
    source = shared_path("fixtures", "cdec", "decode_nc")
    folder = tmp_path_factory.mktemp("cdec") / "decode_nc"
    shutil.copytree(source, folder, copy_function=shutil.copyfile)
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    lines = run_cdec(folder, "weights.init", "dev.src", "OUT")
    (folder / "stdout.init").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def read_dev_forests(folder: Path, out: str = "OUT") -> tuple[list, FeatureSpace, Vocabulary]:
    space, vocab = FeatureSpace(), Vocabulary()
    forests = [read_cdec_binary(folder / out / f"{i}.bin.gz", space, vocab) for i in range(10)]
    return forests, space, vocab


def kbest_by_sentence(path) -> dict[int, list]:
    out = defaultdict(list)
    for entry in iter_kbest(path):
        out[entry.sentence].append(entry)
    return out


def weighed(features: dict[str, float], weights: dict[str, float]) -> dict[str, float]:
    return {name: value for name, value in features.items() if value != 0.0 and weights.get(name, 0.0) != 0.0}


def tie_groups(scores) -> list[list[int]]:
    """Runs of ranks whose scores are equal (to 1e-9: exact ties of the full-precision forest)."""
    groups: list[list[int]] = []
    for rank, score in enumerate(scores):
        if groups and abs(scores[groups[-1][0]] - score) <= 1e-9:
            groups[-1].append(rank)
        else:
            groups.append([rank])
    return groups


def assert_kbest_is_cdecs(graph, weights, entries, label):
    """Our distinct k-best against cdec's ``-k N -r`` lines of the same forest: the same number of
    hypotheses and the same texts rank by rank, except that hypotheses whose scores tie exactly in
    the forest may come in another order (cdec's heap order) and the last tie group may be cut at k
    with other members; each hypothesis has cdec's features and score (6 significant digits), and
    its features dotted with the weights give its score. Features of weight 0 are left out: a string's
    derivations of equal score may differ in them, and cdec and we may keep different ones."""
    kb = graph.kbest(len(entries), weights, distinct=True)
    assert len(kb) == len(entries), label
    texts = list(kb.texts)
    groups = tie_groups(kb.scores.tolist())
    for group in groups[:-1]:  # a singleton group is one rank: the same text there
        assert sorted(texts[r] for r in group) == sorted(entries[r].text for r in group), (label, group)
    by_text = {e.text: e for e in entries}
    w = graph.weight_array(weights)
    for r, d in enumerate(kb):
        assert d.score == pytest.approx(float(w[d.feature_ids] @ d.feature_values), abs=1e-9), (label, r)
        entry = by_text.get(d.text)
        if entry is None:  # a member of the last tie group that cdec cut off
            assert r >= groups[-1][0], (label, r)
            continue
        assert d.score == pytest.approx(entry.score, rel=1e-5, abs=1e-4), (label, r)
        # the features that weigh: a string's derivations of equal score may differ in zero-weight ones
        # (Glue in weights.init) and cdec and we may keep different ones of them
        assert weighed(d.features(), weights) == pytest.approx(weighed(entry.features, weights), rel=1e-5,
                                                               abs=1e-5), (label, r)
    return kb


# ---- the layout, against the JSON conversions of the same forests --------------------------------

def test_dev_forests_read_as_their_json_conversions(decode_nc):
    """cdec's forests of the dev set read to what fixtures' JSON conversions of the same forests read to
    (hgs_json_p17: features with 17 digits, so exactly): nodes, categories, hashes, edges in node order,
    tails, spans, templates, rule strings and every edge's features."""
    json_dir = shared_path("fixtures", "cdec", "decode_nc", "hgs_json_p17")
    forests, space, vocab = read_dev_forests(decode_nc)
    assert [(g.n_nodes, g.n_edges) for g in forests] == DEV_SIZES
    assert sorted(space.names) == sorted(FEATURES)
    for i, graph in enumerate(forests):
        ref = read_cdec_json(json_dir / f"{i}.json")
        for name in ("in_offsets", "tail_offsets", "tails", "tmpl_offsets", "spans", "node_hash"):
            assert np.array_equal(getattr(graph, name), getattr(ref, name)), (i, name)
        assert graph.node_cat == ref.node_cat and graph.node_cat[-1] == "Goal"
        assert [graph.edge_target(e) for e in range(graph.n_edges)] == \
            [ref.edge_target(e) for e in range(ref.n_edges)]
        assert [graph.rules[r] for r in graph.edge_rule] == [ref.rules[r] for r in ref.edge_rule]
        assert len(graph.rules) == len(ref.rules)
        assert [graph.edge_features(e) for e in range(graph.n_edges)] == \
            [ref.edge_features(e) for e in range(ref.n_edges)]
        assert graph.vocab is vocab and graph.space is space


def test_plain_and_gzipped_forests_read_the_same(decode_nc, tmp_path):
    path = decode_nc / "OUT" / "2.bin.gz"
    plain = tmp_path / "2.bin"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    a, b = read_cdec_binary(path), read_cdec_binary(plain)
    for name in ("in_offsets", "tails", "feat_offsets", "feat_ids", "feat_values", "tmpl", "spans", "node_hash"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.rules == b.rules and a.space == b.space and a.vocab == b.vocab


# ---- Viterbi and k-best against cdec's output -----------------------------------------------------

def test_viterbi_is_cdecs_onebest_with_its_score(decode_nc):
    forests, _, _ = read_dev_forests(decode_nc)
    weights = read_cdec_weights(decode_nc / "weights.init")
    onebest = (decode_nc / "onebest.init").read_text(encoding="utf-8").splitlines()
    stdout = (decode_nc / "stdout.init").read_text(encoding="utf-8").splitlines()
    assert stdout == onebest
    kbest = kbest_by_sentence(decode_nc / "kbest.init.100")
    for i, graph in enumerate(forests):
        best = graph.viterbi(weights)
        assert best.text == onebest[i], i
        model_score = next(e.score for e in kbest[i] if e.text == best.text)
        assert best.score == pytest.approx(model_score, rel=1e-5, abs=1e-4), i
        assert best.score == pytest.approx(float(graph.weight_array(weights)[best.feature_ids] @ best.feature_values),
                                           abs=1e-9)


def test_kbest_is_cdecs_kbest_100(decode_nc):
    forests, _, _ = read_dev_forests(decode_nc)
    weights = read_cdec_weights(decode_nc / "weights.init")
    kbest = kbest_by_sentence(decode_nc / "kbest.init.100")
    assert sum(len(v) for v in kbest.values()) == 760
    for i, graph in enumerate(forests):
        assert_kbest_is_cdecs(graph, weights, kbest[i], f"kbest.init.100:{i}")


def test_kbest_run_now_is_the_fixture(decode_nc):
    """This cdec, run here with ``-k 100 -r``, prints the fixture's k-best list (so it wrote the same forests)."""
    lines = run_cdec(decode_nc, "weights.init", "dev.src", "OUTK", "-k", "100", "-r")
    assert lines == (decode_nc / "kbest.init.100").read_text(encoding="utf-8").splitlines()


def test_dpmert_weights_decode(decode_nc):
    """The forests cdec writes under the dpmert-tuned weights: Viterbi is cdec's 1-best, the k-best is
    kbest.dpmertfinal.100 (decoded with the same weights)."""
    tuned = shared_path("fixtures", "cdec", "dpmert_decoded", "weights.final")
    shutil.copyfile(tuned, decode_nc / "weights.dpmert")
    onebest = run_cdec(decode_nc, "weights.dpmert", "dev.src", "OUT_DPMERT")
    forests, _, _ = read_dev_forests(decode_nc, "OUT_DPMERT")
    weights = read_cdec_weights(decode_nc / "weights.dpmert")
    assert [g.viterbi(weights).text for g in forests] == onebest
    kbest = kbest_by_sentence(decode_nc / "kbest.dpmertfinal.100")
    for i, graph in enumerate(forests):
        assert_kbest_is_cdecs(graph, weights, kbest[i], f"kbest.dpmertfinal.100:{i}")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_weights_decode(decode_nc, seed):
    rng = np.random.default_rng(seed)
    weights = {name: float(v) for name, v in zip(FEATURES, rng.normal(0.0, 1.0, len(FEATURES)))}
    write_cdec_weights(decode_nc / f"weights.random{seed}", weights)
    weights = read_cdec_weights(decode_nc / f"weights.random{seed}")
    out = f"OUT_RANDOM{seed}"
    onebest = run_cdec(decode_nc, f"weights.random{seed}", "dev.src", out)
    forests, _, _ = read_dev_forests(decode_nc, out)
    assert [g.viterbi(weights).text for g in forests] == onebest


# ---- errors ------------------------------------------------------------------------------------

def forest_bytes(decode_nc, i: int = 0) -> bytes:
    return gzip.decompress((decode_nc / "OUT" / f"{i}.bin.gz").read_bytes())


def test_malformed_forests_name_the_file_and_leave_space_and_vocab_alone(decode_nc, tmp_path):
    data = forest_bytes(decode_nc)
    space, vocab = FeatureSpace(["LanguageModel"]), Vocabulary(["the"])
    cases = {
        "empty": b"",
        "not an archive": b"{}\n",
        "truncated": data[:len(data) // 2],
        "extra byte": data + b"\0",
        "big-endian": data[:36] + struct.pack("<i", 16777216) + data[40:],
        "node count": data[:HEADER_SIZE + 5] + struct.pack("<i", 10 ** 8) + data[HEADER_SIZE + 9:],
        "edge count": data[:HEADER_SIZE + 9] + struct.pack("<i", -1) + data[HEADER_SIZE + 13:],
        "json forest": (shared_path("fixtures", "cdec", "decode_nc", "hgs_json", "0.json")).read_bytes(),
    }
    for name, bad in cases.items():
        path = tmp_path / f"{name}.bin.gz"
        path.write_bytes(gzip.compress(bad))
        with pytest.raises(InputError) as info:
            read_cdec_binary(path, space, vocab)
        assert info.value.path == str(path), name
        assert space.names == ["LanguageModel"] and vocab.words == ["the"], name
    with pytest.raises(InputError, match="cannot open"):
        read_cdec_binary(tmp_path / "missing.bin.gz")
    broken = tmp_path / "broken.bin.gz"
    broken.write_bytes(gzip.compress(data)[:100])
    with pytest.raises(InputError, match="gzip|ends"):
        read_cdec_binary(broken)


def test_empty_forest(decode_nc):
    """A forest without nodes (what the layout gives for cdec's empty Hypergraph: no node or edge records)."""
    data = forest_bytes(decode_nc)
    empty = data[:HEADER_SIZE + 5] + struct.pack("<ii", 0, 0) + data[-8:]
    graph = loads_cdec_binary(empty)
    assert graph.n_nodes == 0 and graph.n_edges == 0 and graph.viterbi({}) is None


# ---- fuzzing: truncated, byte-flipped and random input raises only InputError ---------------------

@pytest.fixture(scope="module")
def fuzz_seeds(decode_nc) -> list[bytes]:
    """Small real forests (two short inputs), and dev forest 0."""
    (decode_nc / "tiny.src").write_text("akt ?\ndies ist .\n", encoding="utf-8")
    run_cdec(decode_nc, "weights.init", "tiny.src", "OUT_TINY")
    seeds = [gzip.decompress((decode_nc / "OUT_TINY" / f"{i}.bin.gz").read_bytes()) for i in range(2)]
    return seeds + [forest_bytes(decode_nc, 0)]


EXTREMES = [0, 1, 2, 7, 8, 255, 256, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 2 ** 63, 2 ** 64 - 1]


@st.composite
def corrupted(draw, seeds):
    """A real forest truncated, with bytes flipped, a field overwritten by an extreme value, a range
    dropped or repeated; or random bytes (maybe behind a real header); maybe gzipped, maybe cut."""
    data = bytearray(draw(st.sampled_from(seeds)))
    kind = draw(st.sampled_from(["truncate", "flip", "flip", "field", "field", "splice", "random"]))
    if kind == "truncate":
        data = data[:draw(st.integers(0, len(data) - 1))]
    elif kind == "flip":
        for _ in range(draw(st.integers(1, 6))):
            at = draw(st.integers(0, len(data) - 1))
            data[at] ^= draw(st.integers(1, 255))
    elif kind == "field":
        width = draw(st.sampled_from([1, 2, 4, 8]))
        at = draw(st.integers(0, len(data) - width))
        value = draw(st.sampled_from(EXTREMES)) % (1 << (8 * width))
        data[at:at + width] = value.to_bytes(width, "little")
    elif kind == "splice":
        start = draw(st.integers(0, len(data) - 1))
        stop = draw(st.integers(start, min(len(data), start + 64)))
        data = data[:start] + (data[start:stop] * 2 if draw(st.booleans()) else b"") + data[stop:]
    else:
        prefix = bytes(data[:draw(st.sampled_from([0, HEADER_SIZE, HEADER_SIZE + 5, HEADER_SIZE + 13]))])
        data = bytearray(prefix + draw(st.binary(max_size=300)))
    data = bytes(data)
    wrapping = draw(st.sampled_from(["plain", "plain", "gzip", "gzip-truncated"]))
    if wrapping != "plain":
        data = gzip.compress(data, mtime=0)
        if wrapping == "gzip-truncated":
            data = data[:draw(st.integers(0, len(data) - 1))]
    return data


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cdec_binary_fuzz")


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_reader_raises_only_input_error(fuzz_seeds, fuzz_dir, data):
    path = fuzz_dir / "0.bin.gz"
    path.write_bytes(data.draw(corrupted(fuzz_seeds), label="contents"))
    space, vocab = FeatureSpace(["LanguageModel"]), Vocabulary(["x"])
    try:
        graph = read_cdec_binary(path, space, vocab)
    except InputError as err:
        assert err.path == str(path)
        assert space.names == ["LanguageModel"] and vocab.words == ["x"]
        return
    # what reads is a valid forest (the Hypergraph constructor checked its arrays)
    assert graph.n_nodes >= 0 and graph.tails.shape[0] == graph.tail_offsets[-1]
    if graph.n_nodes:
        graph.viterbi({name: 1.0 for name in space.names})


def test_fuzz_seeds_read(fuzz_seeds):
    for data in fuzz_seeds:
        graph = loads_cdec_binary(data)
        assert graph.n_edges > 0 and graph.node_cat[-1] == "Goal"
