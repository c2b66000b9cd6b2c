"""The decoder's sparse features (rule identifiers, aligned word pairs) for large-scale tuning.

On a small synthetic model: edges, 1-best and k-best entries carry the features, the search
scores them (non-zero sparse weights change the 1-best, and every reported score is
``w . h`` over dense and sparse features), names survive every file format, zero sparse
weights and no option leave the decoder's output unchanged, and ``minismt tune`` tunes them.
A hand-made table whose words hold every character the formats treat specially checks the
name escaping end to end.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from conftest import synthetic_system
from minismt.cli import main
from minismt.corpus import Vocabulary
from minismt.decode import FEATURE_NAMES, Decoder, DecoderSettings, PhraseModel
from minismt.decode.settings import parse_sparse_features
from minismt.decode.sparse import escape_word, family_of, parse_name, rule_id_name, unescape_word, word_pair_name
from minismt.errors import InputError
from minismt.extract import PhraseTable
from minismt.features import FeatureSpace, read_weights, write_weights
from minismt.hypergraph import read_cdec_json, write_cdec_json
from minismt.io import read_lines
from minismt.lm import LanguageModel, estimate_kn
from minismt.kbest import kbest_of
from minismt.parallel import DecodeJob, decode_corpus
from minismt.manifest import load_manifest
from plugins.moses.nbest import read_nbest, split_indexed_name, write_kbest_nbest

BOTH = ("rule-id", "word-pair")


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    data, model_dir = synthetic_system(tmp_path_factory, n_pairs=800, seed=9, dev=12, test=12)
    return data, str(model_dir), PhraseModel.load(model_dir), read_lines(data / "test.src")


# words with every character a format treats specially: '_' (Moses sparse labels and dense Label_i),
# '|||', '#' (weights-file comments), '=' and ':' (labels, cdec name=value), our ',' '~' '%', digits
SOURCE_WORDS = ["a_1", "b#c", "x|||y", "p=q", "%41", "k~l", "m,n", "c:d", "12", "ü_ß"]
TARGET_WORDS = ["t_1", "t#2", "t=3", "t:4", "t~5", "t,6", "t%7", "8", "é_9"]
WEIRD_SENTENCES = ["a_1 b#c x|||y p=q", "%41 k~l m,n c:d 12", "ü_ß a_1 12 m,n", "12 x|||y zzunknown b#c"]


@pytest.fixture(scope="module")
def weird():
    """A hand-made table over the n-grams of WEIRD_SENTENCES with random word alignments."""
    rng = random.Random(11)
    src_vocab, tgt_vocab = Vocabulary(SOURCE_WORDS), Vocabulary(TARGET_WORDS)
    pairs = {}
    for sentence in WEIRD_SENTENCES:
        words = [w for w in sentence.split() if w in src_vocab]
        for s in range(len(words)):
            for length in (1, 2, 3):
                gram = tuple(words[s:s + length])
                if len(gram) < length or (length > 1 and rng.random() > 0.5):
                    continue
                for _ in range(rng.randint(1, 2)):
                    target = tuple(rng.choice(TARGET_WORDS) for _ in range(rng.randint(1, 3)))
                    links = sorted({(rng.randrange(len(gram)), rng.randrange(len(target)))
                                    for _ in range(rng.randint(0, 3))})
                    pairs.setdefault((gram, target), links)
    rows = list(pairs)
    src_ids = [src_vocab.encode(list(g), grow=False) for g, _ in rows]
    tgt_ids = [tgt_vocab.encode(list(t), grow=False) for _, t in rows]
    links = [np.array(pairs[r], dtype=np.int16).reshape(-1, 2) for r in rows]
    n = len(rows)
    table = PhraseTable.from_rows(
        src_vocab, tgt_vocab, np.concatenate(src_ids), np.cumsum([0] + [len(x) for x in src_ids]),
        np.concatenate(tgt_ids), np.cumsum([0] + [len(x) for x in tgt_ids]),
        np.array([[rng.uniform(0.05, 1.0) for _ in range(4)] for _ in range(n)]), np.ones((n, 3)),
        np.concatenate(links), np.cumsum([0] + [len(x) for x in links]),
        np.array([[rng.uniform(0.05, 1.0) for _ in range(6)] for _ in range(n)]))
    text = [" ".join(rng.choice(TARGET_WORDS) for _ in range(rng.randint(2, 8))) for _ in range(200)]
    lm = LanguageModel.from_model(estimate_kn(text, order=3, discount_fallback=True))
    return PhraseModel.from_parts(table, lm)


def expected_sparse(table: PhraseTable, row: int) -> dict[str, float]:
    """The features of a phrase-table row, from its strings and alignment."""
    if row < 0:
        return {}
    source, target = (side.split() for side in table.phrase_strings(row))
    out = {rule_id_name(source, target): 1.0}
    for s, t in table.alignment(row).tolist():
        name = word_pair_name(source[s], target[t])
        out[name] = out.get(name, 0.0) + 1.0
    return out


def sparse_lists(rows) -> list[dict]:
    """``{name: value}`` of every hypothesis of a worker's k-best rows (:class:`minismt.kbest.KBestRows`)."""
    return [{rows.names[i]: v for i, v in zip(rows.indices[lo:hi].tolist(), rows.values[lo:hi].tolist())}
            for lo, hi in zip(rows.indptr[:-1], rows.indptr[1:])]


def sparse_part(features: dict) -> dict:
    return {name: value for name, value in features.items() if name not in FEATURE_NAMES}


def assert_same_features(found: list[dict], expected: list[dict]) -> None:
    """Same names per hypothesis, values equal up to the 6 digits of the text formats."""
    assert len(found) == len(expected)
    for a, b in zip(found, expected):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-6)


def sparse_score(weights: dict, sparse: dict) -> float:
    return sum(weights.get(name, 0.0) * value for name, value in sparse.items())


# ----------------------------------------------------------------------------- names and options

def test_names_are_escaped_and_never_look_dense():
    for word in SOURCE_WORDS + TARGET_WORDS + ["plain", "tab\x01", "a b", "%", "%zz", "_0"]:
        escaped = escape_word(word)
        assert unescape_word(escaped) == word
        assert not any(c in escaped for c in "_,~=#|:") and not any(c.isspace() for c in escaped)
    for source, target in ((["12"], ["3_4"]), (["a_1", "x|||y"], ["t=3", "0"]), (["%41"], ["_0"])):
        for name, family in ((rule_id_name(source, target), "rule-id"),
                             (word_pair_name(source[0], target[0]), "word-pair")):
            assert split_indexed_name(name) is None          # Moses would read Label_i as a dense value
            assert name.count("_") == 1 and "|||" not in name and "#" not in name and "=" not in name
            assert family_of(name) == family
            parsed = parse_name(name)
            assert parsed[0] == family and parsed[2][0] == target[0] and parsed[1][0] == source[0]
    assert parse_name(rule_id_name(["a_1", "x|||y"], ["t=3", "0"]))[1:] == (["a_1", "x|||y"], ["t=3", "0"])
    assert word_pair_name("12", "3_4") == "WordPair_12~3%5F4"
    assert family_of("LM0_0") is None and family_of("RuleId_0") is None and family_of("Other_a~b") is None


def test_sparse_feature_option_parsing():
    assert parse_sparse_features(None) == () == parse_sparse_features("") == parse_sparse_features("none")
    assert parse_sparse_features("word-pair,rule-id,word-pair") == BOTH
    assert parse_sparse_features(["word-pair"]) == ("word-pair",)
    with pytest.raises(InputError, match="unknown sparse feature 'rule-size'"):
        parse_sparse_features("rule-id,rule-size")
    # the Hiero decoder's families parse, and the phrase-based decoder refuses them
    assert parse_sparse_features("target-bigram,rule-shape") == ("rule-shape", "target-bigram")


def test_sparse_weights_need_their_family(system):
    _, _, model, _ = system
    with pytest.raises(InputError, match="word-pair features are off"):
        Decoder(model, weights={"WordPair_a~b": 1.0})
    with pytest.raises(InputError, match="word-pair features are off"):
        Decoder(model, weights={"WordPair_a~b": 1.0}, sparse_features="rule-id")
    with pytest.raises(InputError, match="unknown feature name"):
        Decoder(model, weights={"NoSuch_a": 1.0}, sparse_features=BOTH)
    with pytest.raises(InputError, match="rule-shape with a phrase-based model"):
        Decoder(model, sparse_features="rule-id,rule-shape")
    decoder = Decoder(model, weights={"WordPair_a~b": 1.0, "RuleId_a~b": 0.0, "LM0_0": 0.3}, sparse_features=BOTH)
    assert decoder.sparse_weights == {"WordPair_a~b": 1.0} and decoder.weights[FEATURE_NAMES.index("LM0_0")] == 0.3


def test_split_weights_checks_each_sparse_name_once_with_the_same_answers(monkeypatch):
    """A worker splits many weight vectors over one growing set of names: once a name is accepted its family is
    not checked again, and every answer (the parts, their values, the errors) is the one of a first split."""
    from minismt.decode import sparse
    monkeypatch.setattr(sparse, "_ACCEPTED_SPARSE", {})
    rng = np.random.default_rng(5)
    names = list(FEATURE_NAMES) + [word_pair_name(f"s{i}", f"t{i}") for i in range(300)] \
        + [rule_id_name([f"s{i}"], [f"t{i}", "x"]) for i in range(300)]
    values = rng.standard_normal(len(names))
    values[rng.choice(len(names), 200, replace=False)] = 0.0
    first = sparse.split_weights(values, ("rule-id", "word-pair"), FEATURE_NAMES, names)
    checked = []
    monkeypatch.setattr(sparse, "family_of", lambda name: checked.append(name) or family_of(name))
    for scale in (1.0, 2.0):
        again = sparse.split_weights(values * scale, ("rule-id", "word-pair"), FEATURE_NAMES, names)
        assert np.array_equal(again[0], first[0] * scale)
        assert again[1] == {name: value * scale for name, value in first[1].items()}
        assert all(type(value) is float for value in again[1].values())
    assert checked == []  # every sparse name was accepted by the first split
    with pytest.raises(InputError, match="rule-id features are off"):
        sparse.split_weights(values, ("word-pair",), FEATURE_NAMES, names)  # accepted under the other families only
    bad = dict(first[1])
    bad[next(iter(bad))] = float("nan")
    with pytest.raises(InputError, match="weight of"):
        sparse.split_weights(bad, ("rule-id", "word-pair"), FEATURE_NAMES)
    unknown = dict(first[1], NoSuch_a=1.0)
    dense, _ = sparse.split_weights(unknown, ("rule-id", "word-pair"), FEATURE_NAMES)
    assert dense == {"NoSuch_a": 1.0}  # unknown names stay with the dense ones, as before


# ----------------------------------------------------------------------------- the decoder

def test_edges_carry_the_rule_id_and_word_pair_features_of_their_phrase_pair(system):
    _, _, model, test = system
    for families in (BOTH, ("rule-id",), ("word-pair",)):
        decoder = Decoder(model, stack_size=30, sparse_features=families)
        for sentence in test[:4] + ["zzqx " + test[0]]:
            result = decoder.decode(sentence)
            hg = result.hypergraph
            assert hg.space is decoder.space
            for e in range(hg.n_edges):
                expected = {name: v for name, v in expected_sparse(model.table, int(result.edge_rows[e])).items()
                            if family_of(name) in families}
                assert sparse_part(hg.edge_features(e)) == expected
            # the 1-best's sparse features are the sum over its edges
            best = hg.viterbi(decoder.full_weights())
            total: dict[str, float] = {}
            for e in best.edges:
                for name, value in sparse_part(hg.edge_features(int(e))).items():
                    total[name] = total.get(name, 0.0) + value
            assert result.sparse == total
            assert result.feature_dict == {**dict(zip(FEATURE_NAMES, result.features.tolist())), **total}
    # pass-through copies of unknown words have none
    result = Decoder(model, sparse_features=BOTH).decode("zzqx yyqv")
    assert result.best == "zzqx yyqv" and result.sparse == {}


def test_zero_sparse_weights_and_no_option_give_the_same_search(system):
    _, _, model, test = system
    plain = Decoder(model, stack_size=30)
    sparse = Decoder(model, stack_size=30, sparse_features=BOTH)
    assert plain.space is model.space and len(plain.space) == len(FEATURE_NAMES)
    for sentence in test:
        a, b = plain.decode(sentence), sparse.decode(sentence)
        assert a.sparse == {} and b.sparse
        assert (a.best, a.score, a.features.tolist()) == (b.best, b.score, b.features.tolist())
        ha, hb = a.hypergraph, b.hypergraph
        for name in ("in_offsets", "tail_offsets", "tails", "tmpl_offsets", "tmpl"):
            np.testing.assert_array_equal(getattr(ha, name), getattr(hb, name))
        np.testing.assert_array_equal(a.edge_rows, b.edge_rows)
        for e in range(ha.n_edges):
            dense_b = {k: v for k, v in hb.edge_features(e).items() if k in FEATURE_NAMES}
            assert ha.edge_features(e) == dense_b
        assert ha.kbest(10, plain.weights, distinct=True).texts == hb.kbest(10, sparse.full_weights(),
                                                                             distinct=True).texts


def test_sparse_weights_change_the_best_and_scores_are_w_dot_h(system):
    _, _, model, test = system
    probe = Decoder(model, stack_size=30, sparse_features=BOTH)
    changed = 0
    for sentence in test[:8]:
        first = probe.decode(sentence)
        # penalise everything the untuned 1-best uses, reward one other rule of the graph
        weights = {name: -2.0 for name in first.sparse}
        decoder = Decoder(model, weights=weights, stack_size=30, sparse_features=BOTH)
        result = decoder.decode(sentence)
        changed += result.best != first.best
        total = float(result.features @ decoder.weights) + sparse_score(weights, result.sparse)
        assert total == pytest.approx(result.score, abs=1e-9)
        w = decoder.full_weights()
        viterbi = result.hypergraph.viterbi(w)
        assert viterbi.score == pytest.approx(result.score, abs=1e-9)
        assert viterbi.text == result.best
        assert viterbi.features() == pytest.approx({k: v for k, v in result.feature_dict.items() if v != 0.0})
        assert result.hypergraph.viterbi(decoder.weight_dict()).score == pytest.approx(result.score, abs=1e-9)
        for d in result.hypergraph.kbest(20, w, distinct=True):
            assert float(d.dense() @ w) == pytest.approx(d.score, abs=1e-9)
        # the untuned 1-best, scored with the sparse weights, is now worse
        assert first.score + sparse_score(weights, first.sparse) <= result.score + 1e-9
    assert changed >= 6


def test_no_search_error_with_sparse_weights(weird):
    """Without pruning the graph holds every derivation; the decoder's best under random sparse
    weights is the best of them all, rescored with those weights."""
    settings = dict(stack_size=10 ** 6, beam_threshold=0.0, table_limit=0, sparse_features=BOTH)
    full = Decoder(weird, **settings)
    rng = random.Random(3)
    for sentence in WEIRD_SENTENCES:
        graph = full.decode(sentence).hypergraph
        weights = {name: rng.uniform(-3.0, 3.0) for name in full.space.sparse_names}
        decoder = Decoder(weird, weights=weights, **settings)
        result = decoder.decode(sentence)
        best = graph.viterbi(decoder.full_weights())
        assert result.score == pytest.approx(best.score, abs=1e-9)
        assert result.hypergraph.viterbi(decoder.full_weights()).score == pytest.approx(best.score, abs=1e-9)
        kb = result.hypergraph.kbest(30, decoder.full_weights())
        np.testing.assert_allclose(kb.scores, graph.kbest(30, decoder.full_weights()).scores, atol=1e-9)


def test_forced_decoding_carries_sparse_features(system):
    _, _, model, test = system
    decoder = Decoder(model, stack_size=50, sparse_features=BOTH)
    for sentence in test[:4]:
        free = decoder.decode(sentence)
        forced = decoder.force(sentence, free.best)
        assert forced is not None and forced.best == free.best
        assert forced.score == pytest.approx(free.score, abs=1e-9) and forced.sparse == free.sparse


# ----------------------------------------------------------------------------- file formats

def test_names_round_trip_through_nbest_cdec_json_kbest_and_weights_files(weird, tmp_path):
    from plugins.cdec.kbest_file import read_kbest, write_kbest_from
    probe = Decoder(weird, sparse_features=BOTH)
    for sentence in WEIRD_SENTENCES:
        probe.decode(sentence)
    rng = random.Random(5)
    weights = {name: rng.uniform(-1.0, 1.0) for name in probe.space.sparse_names}
    decoder = Decoder(weird, weights=weights, sparse_features=BOTH)
    results = [decoder.decode(s) for s in WEIRD_SENTENCES]
    assert any("%" in name for name in decoder.space.sparse_names)
    w = decoder.full_weights()
    kbest = kbest_of([result.hypergraph.kbest(10, w, distinct=True).rows() for result in results], decoder.space)
    assert kbest.indices.size
    expected = [kbest.feature_dict(r) for r in range(kbest.n_hypotheses)]

    write_kbest_nbest(tmp_path / "nbest", kbest, w)
    for space in (FeatureSpace(FEATURE_NAMES), None):
        back = read_nbest(tmp_path / "nbest", space=space)
        assert back.space.n_dense == len(FEATURE_NAMES)           # no sparse name read as dense
        assert_same_features([back.feature_dict(r) for r in range(back.n_hypotheses)], expected)
        assert back.texts() == kbest.texts()
        known = {name: value for name, value in decoder.weight_dict().items() if name in back.space}
        np.testing.assert_allclose(back.scores(known), kbest.scores(w), rtol=1e-5, atol=1e-5)

    write_kbest_from(tmp_path / "cdec.kbest", kbest, w)
    back = read_kbest(tmp_path / "cdec.kbest", space=FeatureSpace(FEATURE_NAMES))
    assert_same_features([back.feature_dict(r) for r in range(back.n_hypotheses)], expected)

    space, vocab = FeatureSpace(FEATURE_NAMES), Vocabulary()
    for i, result in enumerate(results):
        write_cdec_json(result.hypergraph, tmp_path / f"{i}.json.gz")
        graph = read_cdec_json(tmp_path / f"{i}.json.gz", space, vocab)
        assert [graph.edge_features(e) for e in range(graph.n_edges)] == \
            [result.hypergraph.edge_features(e) for e in range(graph.n_edges)]
        best = graph.viterbi(decoder.weight_dict())
        assert best.score == pytest.approx(result.score, abs=1e-9) and best.text == result.best

    write_weights(tmp_path / "weights", decoder.weight_dict())
    read = read_weights(tmp_path / "weights")
    assert read == decoder.weight_dict()
    again = Decoder(weird, weights=read, sparse_features=BOTH)
    assert [again.decode(s).score for s in WEIRD_SENTENCES] == [r.score for r in results]


# ----------------------------------------------------------------------------- parallel and tuning

def test_parallel_outputs_and_dev_decoder_carry_sparse_features(system):
    data, model_dir, model, _ = system
    from tuners.devdecoder import MinismtDevDecoder
    sources, references = read_lines(data / "dev.src")[:8], read_lines(data / "dev.tgt")[:8]
    dev = MinismtDevDecoder(model_dir, sources, kbest=8, stack_size=30, sparse_features="rule-id,word-pair")
    w0 = dev.default_weights
    kbest, best = dev.decode(w0, 0)
    assert len(dev.space) > len(FEATURE_NAMES) and kbest.indices.size
    assert all(family_of(name) in BOTH for name in dev.space.sparse_names)
    # weights on some sparse features: the k-best scores are the decoder's, w . h over both parts
    weights = np.concatenate([w0, np.zeros(len(dev.space) - len(w0))])
    for i in range(len(sources)):
        for name in sparse_part(kbest.feature_dict(int(kbest.offsets[i]))):
            weights[dev.space.index(name)] = -3.0
    outputs = decode_corpus(dev._job(weights), sources, chunk_size=3)
    assert all(o.kbest.indptr.shape == (len(o.kbest) + 1,) for o in outputs)
    tuned = kbest_of([o.kbest for o in outputs], dev.space)
    np.testing.assert_allclose(tuned.scores(weights), [s for o in outputs for s in o.kbest.scores], atol=1e-9)
    assert sum(o.best != b for o, b in zip(outputs, best)) >= len(sources) // 2
    for o in outputs:
        row = int(tuned.offsets[o.index])
        assert tuned.hypothesis(row) == o.best and sparse_part(tuned.feature_dict(row)) == o.sparse
    # other processes name the features the same way
    pooled = decode_corpus(dev._job(weights), sources, jobs=2, chunk_size=3)
    assert [(o.best, o.score, o.sparse, sparse_lists(o.kbest)) for o in pooled] == \
        [(o.best, o.score, o.sparse, sparse_lists(o.kbest)) for o in outputs]
    # forests read back into the dev decoder's space
    graphs, onebest = dev.decode_hypergraphs(weights, 1)
    assert onebest == [o.best for o in outputs]
    full = np.concatenate([weights, np.zeros(len(dev.space) - len(weights))])
    for graph, output in zip(graphs, outputs):
        assert graph.viterbi(full).score == pytest.approx(output.score, abs=1e-9)
    # forced derivations of the references that can be reached carry their features too
    forced = dev.force(weights, references, 2)
    reachable = [i for i in range(len(sources)) if forced.offsets[i + 1] > forced.offsets[i]]
    assert reachable
    for i in reachable:
        assert sparse_part(forced.feature_dict(int(forced.offsets[i])))


def test_weights_over_names_decode_as_the_same_weights_by_name(system):
    """A worker's weights (an array over names, dense names first, as a DecodeJob sends them) give the decoder
    the weights the same ``{name: weight}`` gives, new weights over the same names too (their ids are kept), and
    the same checks of each name: a family that is off, an unknown name or a weight that is not finite."""
    _, _, model, test = system
    probe = Decoder(model, stack_size=30, sparse_features=BOTH)
    used = sorted({name for sentence in test[:6] for name in probe.decode(sentence).sparse})
    names = tuple(FEATURE_NAMES) + tuple(used) + ("RuleId_never~seen",)
    rng = np.random.default_rng(4)
    for trial in range(3):
        values = np.concatenate([probe.weights, rng.normal(0, 1, len(names) - len(FEATURE_NAMES))])
        values[len(FEATURE_NAMES) + trial::3] = 0.0
        by_array = Decoder(model, weights=values, names=names, stack_size=30, sparse_features=BOTH)
        by_name = Decoder(model, weights=dict(zip(names, values.tolist())), stack_size=30, sparse_features=BOTH)
        assert by_array.weight_dict() == by_name.weight_dict()
        assert by_array.sparse_weights == {n: v for n, v in zip(names[len(FEATURE_NAMES):],
                                                                 values[len(FEATURE_NAMES):].tolist()) if v}
        for sentence in test[:6]:
            a, b = by_array.decode(sentence), by_name.decode(sentence)
            assert (a.best, a.score, a.sparse) == (b.best, b.score, b.sparse)
    for bad, error in ((("WordPair_a~b",), "word-pair features are off"), (("NoSuch_a",), "unknown feature name")):
        with pytest.raises(InputError, match=error):
            Decoder(model, weights=np.concatenate([probe.weights, [1.0]]), names=tuple(FEATURE_NAMES) + bad,
                    sparse_features="rule-id")
    assert Decoder(model, weights=np.concatenate([probe.weights, [0.0]]), names=tuple(FEATURE_NAMES) + ("NoSuch_a",),
                   sparse_features="rule-id").sparse_weights == {}  # a zero weight is not looked at, as by name
    values = np.concatenate([probe.weights, np.ones(len(names) - len(FEATURE_NAMES))])
    values[-2] = np.nan
    with pytest.raises(InputError, match="weight of"):
        Decoder(model, weights=values, names=names, sparse_features=BOTH)


def test_a_decode_job_pickles_its_names_as_one_text_and_a_process_keeps_one_tuple_of_them(system):
    import pickle
    _, model_dir, _, _ = system
    names = tuple(FEATURE_NAMES) + tuple(f"RuleId_w{i}~v{i}" for i in range(2000))
    job = DecodeJob(model_dir, DecoderSettings(sparse_features=BOTH), np.arange(len(names), dtype=float), names)
    state = job.__getstate__()
    assert state["names"] == "\n".join(names)
    again = pickle.loads(pickle.dumps(job))
    assert again.names == names and again.names is job.names  # this process has them: the same tuple
    assert (again.key(), again.names_digest) == (job.key(), job.names_digest)
    other = DecodeJob(model_dir, DecoderSettings(sparse_features=BOTH), np.zeros(len(names)), tuple(list(names)))
    assert other.names is job.names and other.key() != job.key()
    odd = DecodeJob(model_dir, DecoderSettings(), np.zeros(2), ("a\nb", "c"))  # a line break: kept as a tuple
    assert odd.__getstate__()["names"] == ("a\nb", "c") and pickle.loads(pickle.dumps(odd)).names == ("a\nb", "c")
    for joined_alike in (("a", "b", "c"), ("a", "b\nc")):
        assert DecodeJob(model_dir, DecoderSettings(), np.zeros(len(joined_alike)), joined_alike).names == joined_alike


def test_decode_job_without_sparse_features_is_unchanged(system):
    _, model_dir, _, test = system
    job = DecodeJob(model_dir, DecoderSettings(stack_size=30, kbest=5))
    assert job.settings.sparse_features == ()
    outputs = decode_corpus(job, test[:4])
    assert all(o.sparse == {} and sparse_lists(o.kbest) == [{}] * len(o.kbest) for o in outputs)
    assert all(o.kbest.features[0].shape == (len(FEATURE_NAMES),) for o in outputs)


def test_cli_decode_with_sparse_features(system, tmp_path):
    data, model_dir, _, _ = system
    base = ["decode", "--model", model_dir, "--input", str(data / "test.src"), "--stack", "30", "--quiet"]
    assert main(base + ["--output", str(tmp_path / "plain"), "--kbest", "5", "--kbest-out",
                        str(tmp_path / "plain.nbest"), "--hypergraph-dir", str(tmp_path / "plain.hg")]) == 0
    assert main(base + ["--output", str(tmp_path / "zero"), "--sparse-features", "rule-id,word-pair"]) == 0
    assert (tmp_path / "plain").read_bytes() == (tmp_path / "zero").read_bytes()
    assert read_nbest(tmp_path / "plain.nbest").space.sparse_names == []
    # sparse weights from the weights file change the output; n-best totals are w . h
    manifest = load_manifest(model_dir)
    probe = Decoder(model_dir, stack_size=30, sparse_features=BOTH)
    sparse = {}
    for sentence in read_lines(data / "test.src"):
        sparse.update({name: -3.0 for name in probe.decode(sentence).sparse if name.startswith("RuleId_")})
    weights = dict(manifest["default_weights"], **sparse)
    write_weights(tmp_path / "weights", weights)
    args = base + ["--output", str(tmp_path / "sparse"), "--weights", str(tmp_path / "weights"),
                   "--sparse-features", "rule-id,word-pair", "--kbest", "5", "--kbest-out",
                   str(tmp_path / "sparse.nbest"), "--hypergraph-dir", str(tmp_path / "hg")]
    assert main(args) == 0
    assert read_lines(tmp_path / "sparse") != read_lines(tmp_path / "plain")
    from plugins.moses.nbest import iter_nbest
    entries = list(iter_nbest(tmp_path / "sparse.nbest"))
    assert any(e.sparse for e in entries)
    for entry in entries:
        assert all(family_of(name) in BOTH for name in entry.sparse)
        total = sum(weights[f"{label}_{i}"] * v for label, values in entry.features for i, v in enumerate(values))
        assert entry.score == pytest.approx(total + sparse_score(weights, entry.sparse), rel=1e-5, abs=1e-4)
    graph = read_cdec_json(tmp_path / "hg" / "0.json.gz", FeatureSpace(FEATURE_NAMES))
    assert graph.viterbi(weights).text == read_lines(tmp_path / "sparse")[0]
    # sparse weights without the option, and unknown families, are clear errors
    assert main(base + ["--output", str(tmp_path / "x"), "--weights", str(tmp_path / "weights")]) == 2
    assert main(base + ["--output", str(tmp_path / "y"), "--sparse-features", "rule-shape"]) == 2


def test_tune_kbmira_with_sparse_features_writes_sparse_weights(system, tmp_path, capsys):
    data, model_dir, _, _ = system
    run_dir = tmp_path / "run"
    args = ["tune", "--model", model_dir, "--dev-src", str(data / "dev.src"), "--dev-ref", str(data / "dev.tgt"),
            "--tuner", "kbmira", "--iterations", "2", "--kbest", "8", "--stack", "30", "--keep", "last",
            "--sparse-features", "rule-id,word-pair", "--run-dir", str(run_dir), "--quiet"]
    assert main(args) == 0
    weights = read_weights(run_dir / "weights.final")
    assert all(name in weights for name in FEATURE_NAMES)
    sparse = {name: value for name, value in weights.items() if name not in FEATURE_NAMES}
    assert {family_of(name) for name in sparse} == set(BOTH)
    assert any(value != 0.0 for value in sparse.values())
    # the tuned weights decode
    assert main(["decode", "--model", model_dir, "--input", str(data / "test.src"), "--output",
                 str(tmp_path / "out"), "--weights", str(run_dir / "weights.final"), "--sparse-features",
                 "rule-id,word-pair", "--stack", "30", "--quiet"]) == 0
    assert len(read_lines(tmp_path / "out")) == 12
    # sparse features are minismt's own: not with another decoder
    capsys.readouterr()
    assert main(["tune", "--decoder", "moses", "--decoder-cmd", "moses", "--config", "x", "--dev-src",
                 str(data / "dev.src"), "--dev-ref", str(data / "dev.tgt"), "--tuner", "kbmira",
                 "--sparse-features", "rule-id", "--run-dir", str(tmp_path / "m"), "--quiet"]) == 2
    assert "--sparse-features" in capsys.readouterr().err


def test_interrupted_sparse_tuning_resumes_to_the_same_weights(system, tmp_path):
    """The feature space grows while tuning; a resumed run restores it from the checkpoint and ends with the
    weights of an uninterrupted run."""
    from tuners.devdecoder import MinismtDevDecoder
    from tuners.loop import TuningRun
    data, model_dir, _, _ = system
    sources = read_lines(data / "dev.src")
    references = [[r] for r in read_lines(data / "dev.tgt")]

    class Interrupted(MinismtDevDecoder):
        def decode_with_forests(self, weights, iteration, max_edges=()):  # the step search's decode
            if iteration == 2:
                raise KeyboardInterrupt
            return super().decode_with_forests(weights, iteration, max_edges)

    def run(decoder_class, run_dir):
        decoder = decoder_class(model_dir, sources, kbest=8, stack_size=30, sparse_features=BOTH)
        return TuningRun(decoder, references, "kbmira", run_dir, max_iter=3, seed=4), decoder

    clean, decoder = run(MinismtDevDecoder, tmp_path / "clean")
    expected = clean.run(decoder.default_weights)
    interrupted, decoder = run(Interrupted, tmp_path / "resumed")
    with pytest.raises(KeyboardInterrupt):
        interrupted.run(decoder.default_weights)
    resumed, decoder = run(MinismtDevDecoder, tmp_path / "resumed")
    assert np.array_equal(resumed.run(decoder.default_weights), expected)
    assert len(decoder.space) > 15


# ----------------------------------------------------------------------------- the word-pair vocabulary

# A tiny corpus with known word counts and ties at several cuts (source: a 6, b 4, c 4, d 2, e 2, f 1;
# target: x 7, y 4, z 3, w 2, v 2, u 1)
TINY_SOURCE = ["a b c", "a b d", "a c e", "a b c", "a d f", "b e a c"]
TINY_TARGET = ["x y z", "x y w", "x z v", "x y z", "x w u", "y v x x"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from minismt.io import write_lines
    from minismt.train import Trainer, TrainingConfig
    data = tmp_path_factory.mktemp("tiny")
    write_lines(data / "train.src", TINY_SOURCE)
    write_lines(data / "train.tgt", TINY_TARGET)
    Trainer(TrainingConfig(src=str(data / "train.src"), tgt=str(data / "train.tgt"), out=str(data / "model"),
                           lm_order=2, progress=False)).run()
    return PhraseModel.load(data / "model")


def reference_word_pairs(table: PhraseTable, row: int, n: int | None) -> dict[str, float]:
    """Slow and obvious: a row's word-pair features, keeping the links whose two words are among the ``n``
    most frequent of the tiny corpus (counted here, ties to the word that sorts first)."""
    def top(lines):
        counts: dict[str, int] = {}
        for line in lines:
            for word in line.split():
                counts[word] = counts.get(word, 0) + 1
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        return {word for word, _ in ranked[:n]} if n is not None else set(counts)
    source_top, target_top = top(TINY_SOURCE), top(TINY_TARGET)
    return {name: value for name, value in expected_sparse(table, row).items()
            if family_of(name) == "word-pair" and all(
                word in keep for word, keep in zip(parse_name(name)[1] + parse_name(name)[2], (source_top, target_top)))}


def table_features(model: PhraseModel, families, n: int | None) -> list[dict[str, float]]:
    from minismt.decode.sparse import SparseFeatureTable
    table = SparseFeatureTable.for_model(model, families, n)
    offsets, ids, values = table.features(np.arange(len(model.table)))
    return [{table.space.name(int(i)): float(v) for i, v in zip(ids[lo:hi], values[lo:hi])}
            for lo, hi in zip(offsets[:-1], offsets[1:])]


def test_word_pair_vocabulary_keeps_exactly_the_pairs_of_frequent_words(tiny):
    counts = tiny.training_word_counts()
    assert counts[0]["a"] == 6 and counts[0]["b"] == counts[0]["c"] == 4 and counts[1]["x"] == 7
    every = table_features(tiny, ("word-pair",), None)
    sizes = []
    for n in (1, 2, 3, 4, 5, 6, 50):
        found = table_features(tiny, ("word-pair",), n)
        assert found == [reference_word_pairs(tiny.table, row, n) for row in range(len(tiny.table))]
        sizes.append(sum(map(len, found)))
        # rule identifiers are not limited
        both = table_features(tiny, BOTH, n)
        assert both == [{**{k: v for k, v in expected_sparse(tiny.table, row).items()
                                                  if family_of(k) == "rule-id"}, **found[row]}
                                               for row in range(len(tiny.table))]
    assert 0 < sizes[0] < sizes[2] < sizes[-1] and sizes == sorted(sizes)
    # a vocabulary larger than the corpus' is no limit
    assert table_features(tiny, ("word-pair",), 50) == every == [
        reference_word_pairs(tiny.table, row, None) for row in range(len(tiny.table))]


def test_word_pair_vocabulary_in_the_decoder_and_its_identity(tiny, system, tmp_path):
    from tuners.devdecoder import MinismtDevDecoder
    from tuners.loop import TuningRun
    limited = Decoder(tiny, sparse_features=BOTH, word_pair_vocabulary=2)
    result = limited.decode("a b c")
    assert result.sparse and all(set(parse_name(name)[1]) <= {"a", "b"} and set(parse_name(name)[2]) <= {"x", "y"}
                                 for name in result.sparse if family_of(name) == "word-pair")
    unlimited = Decoder(tiny, sparse_features=BOTH, word_pair_vocabulary=1000).decode("a b c")
    assert unlimited.sparse == Decoder(tiny, sparse_features=BOTH).decode("a b c").sparse
    # the limit is part of the dev decoder's identity: a run directory refuses another limit
    data, model_dir, _, _ = system
    sources, references = read_lines(data / "dev.src")[:2], [[r] for r in read_lines(data / "dev.tgt")[:2]]

    def claim(n):
        dev = MinismtDevDecoder(model_dir, sources, kbest=2, stack_size=5, sparse_features=BOTH,
                                word_pair_vocabulary=n)
        assert dev.identity()["word_pair_vocabulary"] == n
        assert dev.identity()["beam_threshold"] == 1e-5 and "jobs" not in dev.identity()
        TuningRun(dev, references, "kbmira", tmp_path, max_iter=1)._claim()

    claim(500)
    claim(500)
    with pytest.raises(InputError, match="word_pair_vocabulary: 500 -> null"):
        claim(None)


def test_word_pair_vocabulary_rejects_bad_values(weird, system, tmp_path, capsys):
    for bad in (0, -5, 2.5, True, "500"):
        with pytest.raises(InputError, match="word_pair_vocabulary"):
            DecoderSettings(sparse_features=BOTH, word_pair_vocabulary=bad)
    with pytest.raises(InputError, match="without the word-pair sparse features"):
        DecoderSettings(sparse_features="rule-id", word_pair_vocabulary=500)
    with pytest.raises(InputError, match="--word-pair-vocabulary 500 without"):
        DecoderSettings.from_options({"word_pair_vocabulary": "--word-pair-vocabulary"}, word_pair_vocabulary=500)
    assert DecoderSettings(sparse_features=BOTH, word_pair_vocabulary=500).search_key() != \
        DecoderSettings(sparse_features=BOTH).search_key()
    # a model made in memory has no training corpus to count
    with pytest.raises(InputError, match="no training corpus"):
        Decoder(weird, sparse_features=BOTH, word_pair_vocabulary=5)
    data, model_dir, _, _ = system
    base = ["decode", "--model", model_dir, "--input", str(data / "test.src"), "--output", str(tmp_path / "o"),
            "--quiet"]
    capsys.readouterr()
    assert main(base + ["--sparse-features", "word-pair", "--word-pair-vocabulary", "0"]) == 2
    assert "--word-pair-vocabulary 0" in capsys.readouterr().err
    assert main(base + ["--word-pair-vocabulary", "5"]) == 2
    assert "--sparse-features including word-pair" in capsys.readouterr().err
    assert main(base + ["--stack", "20", "--sparse-features", "word-pair", "--word-pair-vocabulary", "20",
                        "--kbest", "3", "--kbest-out", str(tmp_path / "nbest")]) == 0
    from plugins.moses.nbest import iter_nbest
    assert any(entry.sparse for entry in iter_nbest(tmp_path / "nbest"))
