"""ForestBatch (minismt.hypergraph.batch): equal to ForestData's slow reference on random forests with ties,
several forests per sentence, odd words, and on the cdec fixture forests (cdec's BLEU numbers)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import shared_path
from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph import HypergraphBuilder, read_cdec_json
from minismt.hypergraph.batch import ForestBatch
from minismt.metrics import BleuReferences
from plugins.cdec.weights import read_cdec_weights
from minismt.hypergraph import ForestData
import random_forests
from random_forests import RngDraws

CDEC = ("fixtures", "cdec")
WORDS = ["the", "a", "house", "small", "is", "The", "HOUSE", "green", "zz", "qq"]
DYADIC = [-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0]
NAMES = ["f0", "f1", "f2"]


def random_forest(rng, space, vocab, odd_words=()):
    """A small shared random forest (:mod:`random_forests`: start nodes anywhere, shared sub-forests,
    two-tail edges, templates mixing words and tail yields in any order) with dyadic features (exact
    ties), and with ``odd_words`` some words the builder refuses."""
    hg = random_forests.random_forest(RngDraws(rng), space, vocab, int(rng.integers(1, 8)), values=DYADIC,
                                      words=WORDS)
    if odd_words and hg.tmpl.size:
        # words the builder refuses (whitespace, empty), placed by editing the template ids
        tmpl = hg.tmpl.copy()
        words = np.flatnonzero(tmpl >= 0)
        pick = words[rng.random(words.shape[0]) < 0.3]
        tmpl[pick] = rng.choice([vocab.add(w) for w in odd_words], size=pick.shape[0])
        hg = hg.replace(tmpl=tmpl)
    return hg


def random_data(seed, lowercase=False, odd_words=()):
    rng = np.random.default_rng(seed)
    space, vocab = FeatureSpace(), Vocabulary()
    for name in NAMES:
        space.add(name)
    n_sent = int(rng.integers(1, 6))
    references = [[" ".join(rng.choice(WORDS, size=int(rng.integers(0, 7)))) for _ in range(int(rng.integers(1, 3)))]
                  for _ in range(n_sent)]
    forests, sentence_ids = [], []
    for s in range(n_sent):
        for _ in range(int(rng.integers(1, 4))):
            forests.append(random_forest(rng, space, vocab, odd_words))
            sentence_ids.append(s)
            if rng.random() < 0.3:
                # the same forest with other words: a tie between two forests of one sentence
                hg = forests[-1]
                tmpl = hg.tmpl.copy()
                tmpl[tmpl >= 0] = rng.integers(0, len(vocab), size=int((tmpl >= 0).sum()))
                forests.append(hg.replace(tmpl=tmpl))
                sentence_ids.append(s)
    order = rng.permutation(len(forests))
    data = ForestData([forests[i] for i in order], np.asarray(sentence_ids)[order],
                      BleuReferences(references, lowercase=lowercase))
    return data, rng


@pytest.mark.parametrize("seed", range(60))
def test_equal_to_reference_on_random_forests(seed):
    lowercase = seed % 3 == 1
    odd = (" two  words ", "", "\u00a0x") if seed % 4 == 2 else ()
    data, rng = random_data(seed, lowercase, odd)
    batch = ForestBatch(data)
    W = rng.choice(DYADIC, size=(6, len(data.space)))
    W[0] = 0.0  # everything ties: first edges, first forests
    for w in W:
        assert batch.translations(w) == data.translations(w)
        assert np.array_equal(batch.stats(w), data.stats(w))
        for smooth in ("exp", "none"):
            assert batch.bleu(w, smooth=smooth) == data.bleu(w, smooth=smooth)
    assert np.array_equal(batch.bleu_many(W), [data.bleu(w) for w in W])
    real = rng.standard_normal((3, len(data.space)))
    assert np.array_equal(batch.bleu_many(real, smooth="none"), [data.bleu(w, smooth="none") for w in real])


def test_weights_as_dict_and_bad_weights():
    data, _ = random_data(5)
    batch = ForestBatch(data)
    w = {"f0": 0.5, "f2": -1.0, "unknown": 3.0}
    assert np.array_equal(batch.stats(w), data.stats(w))
    with pytest.raises(InputError):
        batch.bleu(np.array([np.nan, 0.0, 0.0]))
    with pytest.raises(InputError):
        batch.bleu(np.zeros(2))  # shorter than the feature ids used
    with pytest.raises(InputError):
        batch.bleu_many(np.zeros(3))
    with pytest.raises(InputError):
        batch.bleu(np.zeros(3), smooth="add1")
    b = HypergraphBuilder(data.space, data.forests[0].vocab)
    b.add_node("X")
    b.add_edge(0, (), {"f0": 1.0, "f1": 1.0}, ["a"])
    overflow = ForestData([b.build()], [0], BleuReferences([["a"]]))
    huge = np.array([1e308, 1e308, 0.0])  # an edge score overflows: InputError, as Hypergraph.edge_scores
    for what in (overflow.bleu, ForestBatch(overflow).bleu, ForestBatch(overflow).bleu_many):
        with pytest.raises(InputError):
            what(huge[None] if what.__name__ == "bleu_many" else huge)
    with pytest.raises(InputError):
        ForestBatch(data.forests)
    assert batch.bleu_many(np.zeros((0, 3))).shape == (0,)


# ---- cdec fixtures -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def decode_nc():
    folder = shared_path(*CDEC, "decode_nc")
    space, vocab = FeatureSpace(), Vocabulary()
    forests = [read_cdec_json(folder / "hgs_json_p17" / f"{i}.json", space, vocab) for i in range(10)]
    references = BleuReferences([[r] for r in (folder / "dev.refs").read_text(encoding="utf-8").splitlines()])
    return folder, ForestData(forests, np.arange(10), references)


def test_cdec_decode_nc_bleu(decode_nc):
    folder, data = decode_nc
    batch = ForestBatch(data)
    assert (batch.n_forests, batch.n_edges) == (10, 5321)
    w = read_cdec_weights(folder / "weights.init")
    onebest = (folder / "onebest.init").read_text(encoding="utf-8").splitlines()
    assert batch.translations(w) == onebest
    assert np.array_equal(batch.stats(w), data.stats(w))
    assert batch.bleu(w) == data.bleu(w)
    assert batch.bleu(w) == pytest.approx(0.0873304, abs=1e-6)  # cdec's README: onebest.init, IBM BLEU
    final = read_cdec_weights(shared_path(*CDEC, "dpmert_decoded", "weights.final"))
    assert batch.bleu(final) == pytest.approx(0.348162, abs=1e-6)  # dpmert_decoded/onebest.weights.final
    rng = np.random.default_rng(1)
    base = batch.weight_array(w)
    W = base + 0.3 * rng.standard_normal((25, base.shape[0]))
    assert np.array_equal(batch.bleu_many(W), [data.bleu(x) for x in W])


def test_cdec_decode_nc_several_forests_per_sentence(decode_nc):
    """The dpmert-final forests' sentences twice (CHG-BO's layout): the best of the two Viterbi scores wins."""
    folder, data = decode_nc
    forests = data.forests + data.forests[::-1]
    sentence_ids = np.concatenate([np.arange(10), np.arange(10)[::-1]])
    two = ForestData(forests, sentence_ids, data.references)
    batch = ForestBatch(two)
    w = read_cdec_weights(folder / "weights.init")
    assert batch.translations(w) == data.translations(w)
    assert batch.bleu(w) == data.bleu(w) == two.bleu(w)
    # a shifted copy of sentence 3's forest wins only where its extra score makes it better
    shifted = data.forests[3].replace(feat_values=data.forests[3].feat_values * 1.5)
    three = ForestData(data.forests + [shifted], np.concatenate([np.arange(10), [3]]), data.references)
    batch = ForestBatch(three)
    for x in (w, {**w, "LanguageModel": -0.5}):
        assert batch.translations(x) == three.translations(x)
        assert np.array_equal(batch.stats(x), three.stats(x))


@pytest.mark.parametrize("weights,bleu", [("weights.0", 0.298243), ("weights.final", 0.623521)])
def test_cdec_dpmert_testdata_bleu(weights, bleu):
    folder = shared_path(*CDEC, "dpmert_testdata")
    space, vocab = FeatureSpace(), Vocabulary()
    forests = [read_cdec_json(folder / f"{i}.json", space, vocab) for i in range(2)]
    references = BleuReferences(list(zip(*[(folder / f"c2e.txt.{i}").read_text(encoding="utf-8").splitlines()
                                           for i in range(4)])))
    data = ForestData(forests, np.arange(2), references)
    batch = ForestBatch(data)
    w = read_cdec_weights(folder / weights)
    assert batch.translations(w) == (folder / ("onebest.w0" if weights == "weights.0" else "onebest.final")) \
        .read_text(encoding="utf-8").splitlines()
    assert np.array_equal(batch.stats(w), data.stats(w))
    assert batch.bleu(w) == data.bleu(w) == pytest.approx(bleu, abs=1e-6)
