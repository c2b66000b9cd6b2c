"""The tuning loop's step search (tuners/step.py): against brute force on random forests, and in the real loop
with the real decoder, where a step the search graphs show to fall is cut short."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import random_forests
from conftest import synthetic_system
from minismt.corpus import Vocabulary
from minismt.features import FeatureSpace
from minismt.hypergraph import ForestData
from minismt.io import read_lines
from minismt.metrics import BleuReferences
from tuners.base import Tuner, TunerTags
from tuners.devdecoder import MinismtDevDecoder
from tuners.loop import TuningRun
from tuners.step import mixed, step_search

NAMES = ["f0", "f1", "f2"]
WORDS = ["a", "b", "c", "d"]
int_vectors = st.lists(st.integers(-3, 3), min_size=3, max_size=3).map(lambda v: np.array(v, dtype=np.float64))


@st.composite
def forest_data(draw):
    """1-3 dev sentences with 1-2 forests each and 1-2 references over WORDS."""
    space, vocab = FeatureSpace(NAMES), Vocabulary()
    n = draw(st.integers(1, 3))
    ids = [s for s in range(n) for _ in range(draw(st.integers(1, 2)))]
    hgs = [draw(random_forests.forests(space, vocab, 5, max_tails=2, values=range(-2, 3), words=WORDS))
           for _ in ids]
    sentence = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
    refs = [draw(st.lists(sentence, min_size=1, max_size=2)) for _ in range(n)]
    return ForestData(hgs, ids, BleuReferences(refs))


def edge_dot(hg, v) -> list[int]:
    return [sum(int(v[hg.space.index(k)]) * int(x) for k, x in hg.edge_features(e).items())
            for e in range(hg.n_edges)]


def breakpoints(data: ForestData, w, d) -> set[Fraction]:
    """Every x where two derivation lines of one sentence cross (exact): the steps of corpus BLEU along w + x d."""
    cuts: set[Fraction] = set()
    for s in range(data.n_sentences):
        lines = {row[:2] for hg, t in zip(data.forests, data.sentence_ids) if t == s
                 for row in random_forests.derivation_table(hg, edge_dot(hg, d), edge_dot(hg, w))[hg.goal]}
        for (m1, a1), (m2, a2) in itertools.combinations(lines, 2):
            if m1 != m2:
                cuts.add(Fraction(a1 - a2, m2 - m1))
    return cuts


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forest_data(), int_vectors, int_vectors)
def test_step_search_finds_the_best_point_of_the_step(data, w_now, w_next):
    """The chosen point has the best forest BLEU of the segment (brute force: a point inside every interval
    between the breakpoints in [0, 1]), is the tuner's weights when they are among the best, and never scores
    below the start."""
    d = w_next - w_now
    cuts = breakpoints(data, w_now, d)
    assume(0 not in cuts and 1 not in cuts)  # at a crossing the Viterbi tie-break, not the envelope, decides
    inside = sorted(float(x) for x in cuts if 0 < x < 1)
    edges = [0.0] + inside + [1.0]
    points = [0.0, 1.0] + [(lo + hi) / 2 for lo, hi in zip(edges, edges[1:]) if lo < hi]
    best = max(data.bleu(w_now + x * d) for x in points)
    step = step_search(data, w_now, w_next)
    assert 0.0 <= step.rho <= 1.0
    assert step.bleu == best == data.bleu(mixed(w_now, w_next, step.rho))
    assert step.full_bleu == data.bleu(w_next)
    assert step.bleu >= data.bleu(w_now)
    if step.full_bleu == best:
        assert step.rho == 1.0  # ties go to the tuner's own step
    stats = data.stats(mixed(w_now, w_next, step.rho)).sum(axis=0)
    assert step.length_ratio == pytest.approx(stats[1] / max(1, stats[8]))


def test_mixed_pads_new_sparse_weights_and_keeps_the_tuners_weights():
    assert mixed([1.0, 2.0], [3.0, 4.0, 5.0], 0.5).tolist() == [2.0, 3.0, 2.5]
    tuned = np.array([0.1, 0.7, -0.3])
    assert mixed([1.0, 2.0, 3.0], tuned, 1.0) is tuned  # the whole step: the tuner's weights, not a rounding
    assert mixed([1.0, 2.0], [3.0, 4.0], 0.0).tolist() == [1.0, 2.0]


# ---- the real loop with the real decoder ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def system(tmp_path_factory):
    """A synthetic model of 1,500 pairs and a 40-sentence dev set (untuned dev BLEU 18.76)."""
    return synthetic_system(tmp_path_factory, n_pairs=1500, seed=5, dev=40, test=40)


class Proposal(Tuner):
    """A tuner that proposes the same weights whatever its data: no LM and a large word bonus, weights that
    k-best lists near the start cannot judge and the search turns into long, disfluent output."""

    tags = TunerTags()

    def __init__(self, weights=None):
        self.weights = weights

    def fit(self, data, w0):
        return np.asarray(self.weights, dtype=np.float64)


def _tune(system, tmp_path, tuner, step_search, iterations=2, accept="decoded"):
    data, model = system
    decoder = MinismtDevDecoder(str(model), read_lines(data / "dev.src"), stack_size=30, kbest=20)
    try:
        run = TuningRun(decoder, [[r] for r in read_lines(data / "dev.tgt")], tuner,
                        tmp_path / f"{step_search}-{accept}", max_iter=iterations, step_search=step_search,
                        accept=accept)
        run.run(decoder.default_weights)
    finally:
        decoder.close()
    return run, decoder


def _default_weights_with(model, changes: dict) -> np.ndarray:
    """The model's default weights with ``changes`` ({name: value}) put in."""
    decoder = MinismtDevDecoder(str(model), ["x"])
    space = decoder.space
    return space.weights({**dict(zip(space.dense_names, decoder.default_weights)), **changes}, grow=False)


def _bad_weights(model) -> np.ndarray:
    """The default weights with no LM and a word bonus of 10: long, disfluent output."""
    return _default_weights_with(model, {"LM0_0": 0.0, "WordPenalty0_0": -10.0})


def test_a_step_the_search_graphs_show_to_fall_is_cut_short(system, tmp_path):
    data, model = system
    bad = _bad_weights(model)
    whole, _ = _tune(system, tmp_path, Proposal(bad.tolist()), "none", accept="any")
    cut, _ = _tune(system, tmp_path, Proposal(bad.tolist()), "forest", accept="any")
    start = whole.history[0].dev_bleu
    assert cut.history[0].dev_bleu == start
    assert whole.history[1].dev_bleu < start - 0.1                   # the whole step falls far
    assert whole.history[1].dev_length_ratio > 1.3                   # into long output, which the log shows
    first = cut.history[0]
    assert first.step < 1 and first.full_step_bleu < first.dev_bleu  # the search graphs see the fall
    assert first.step_bleu >= first.dev_bleu
    assert cut.history[1].dev_bleu >= start - 0.01                   # and the step taken does not fall


def test_a_step_that_decodes_below_its_start_is_halved_until_it_does_not(system, tmp_path):
    """Without the step search, the same falling step is decoded, found below the start, halved and decoded
    again (accept="decoded", the default), until a trial is not below the start or the run is back at it."""
    from tuners.step import BACKTRACKS
    data, model = system
    run, _ = _tune(system, tmp_path, Proposal(_bad_weights(model).tolist()), "none", iterations=3)
    start, first, second = run.history
    assert first.rejected and all(b < start.dev_bleu - 0.1 for b in first.rejected[:1])  # the whole step fell
    assert len(first.rejected) <= BACKTRACKS + 1 and first.dev_bleu >= start.dev_bleu
    assert second.dev_bleu >= first.dev_bleu
    log = (tmp_path / "none-decoded" / "tune.log").read_text()
    assert f"iteration 1: decoded dev BLEU {100 * first.rejected[0]:.2f} is below iteration 0's" in log
    assert "accepted after" in log


class ForestProposal(Proposal):
    """:class:`Proposal` as a tuner that fits on forests; counts its fits."""

    tags = TunerTags(fits_on="forests")
    fits = 0

    def fit(self, data, w0):
        self.fits += 1
        return super().fit(data, w0)


def test_a_forest_tuner_whose_step_goes_back_to_its_start_stops_there(system, tmp_path):
    """A forest tuner's data are the forests of the weights it decoded with: when its step was rejected until
    the iteration went back to those weights, the next fit would take the same forests and propose the same
    step, so the run stops there (it decoded the same rejected trials again before), and the last weights it
    returns are the decoded ones, not the rejected proposal. It neither decodes those weights again nor fits
    their forests again: it kept them."""
    from tuners.step import BACKTRACKS
    data, model = system
    start, awful = _default_weights_with(model, {}), _default_weights_with(model, {"LM0_0": -1000.0})
    decoder = MinismtDevDecoder(str(model), read_lines(data / "dev.src"), stack_size=30, kbest=20)
    decodes = []
    decode_hypergraphs = decoder.decode_hypergraphs
    decoder.decode_hypergraphs = lambda weights, t: decodes.append(t) or decode_hypergraphs(weights, t)
    tuner = ForestProposal(awful.tolist())
    try:
        run = TuningRun(decoder, [[r] for r in read_lines(data / "dev.tgt")], tuner,
                        tmp_path / "run", max_iter=4, return_best=False)
        final = run.run(start)
    finally:
        decoder.close()
    assert [r.iteration for r in run.history] == [0, 1]
    assert len(run.history[1].rejected) == BACKTRACKS + 1
    assert decodes == [0] + [1] * (BACKTRACKS + 1) and tuner.fits == 1
    assert run.history[1].dev_bleu == run.history[0].dev_bleu
    assert run.history[1].weights == run.history[0].weights and np.allclose(final, run.history[0].weights)
    assert "iteration 1: back at iteration 0's weights, whose forests the tuner has fitted: converged" in \
        (tmp_path / "run" / "tune.log").read_text()


def test_the_step_search_is_the_default_with_minismts_decoder(system, tmp_path):
    run, decoder = _tune(system, tmp_path, "mert", "forest")
    log = (tmp_path / "forest-decoded" / "tune.log").read_text()
    assert log.count("length ratio") == 2 * len(run.history) and log.count("; step ") == len(run.history)
    for record in run.history:
        assert 0 <= record.step <= 1 and record.step_bleu >= record.dev_bleu  # rho = 0 is the decoded 1-best
        assert 0.5 < record.dev_length_ratio < 2 and 0.5 < record.tuned_length_ratio < 2
    settings = json.loads((tmp_path / "forest-decoded" / "run.json").read_text())
    assert settings["step_search"] == "forest"
    data, model = system
    assert TuningRun(MinismtDevDecoder(str(model), ["x"]), [["x"]], "mert", tmp_path / "d").step_search == "forest"
    assert TuningRun(MinismtDevDecoder(str(model), ["x"]), [["x"]], "hg-mert", tmp_path / "e").step_search == "none"
    defaults = {name: TuningRun(MinismtDevDecoder(str(model), ["x"]), [["x"]], name, tmp_path / name).decode_norm
                for name in ("mert", "kbmira", "listmle-te", "structsvm", "nbl-bo", "o-oro", "hg-mert")}
    assert defaults == {"mert": "l1", "kbmira": "l1", "listmle-te": "l1", "structsvm": "l1", "nbl-bo": "none",
                        "o-oro": "none", "hg-mert": "none"}  # NBL-BO's box and the online steps are in weight units


class Scaled(Tuner):
    """A tuner that returns its start weights times ``factor`` (k-best MIRA's weights grow like this)."""

    tags = TunerTags()

    def __init__(self, factor=7.0):
        self.factor = factor

    def fit(self, data, w0):
        return self.factor * np.asarray(w0, dtype=np.float64)


@pytest.mark.parametrize("decode_norm, fix", [("l1", ()), ("none", ()), ("l1", ("LM0_0",))])
def test_tuned_weights_are_decoded_at_an_l1_norm_of_one(system, tmp_path, decode_norm, fix):
    """The search's threshold pruning is not scale-invariant, so every tuned weight vector is decoded scaled to
    L1 = 1 (as mert-moses.pl): the same direction, not the tuner's growing scale; with 'none' as the tuner gave
    it, and never when a fixed feature has a non-zero weight (the fixed weights stay). Every step is accepted
    here (a grown scale can decode lower, and would be halved)."""
    data, model = system
    decoder = MinismtDevDecoder(str(model), read_lines(data / "dev.src"), stack_size=30, kbest=20)
    try:
        run = TuningRun(decoder, [[r] for r in read_lines(data / "dev.tgt")], Scaled(), tmp_path / "run",
                        max_iter=3, decode_norm=decode_norm, fix=fix, step_search="none", accept="any")
        run.run(decoder.default_weights)
    finally:
        decoder.close()
    start = np.asarray(run.history[0].weights)
    assert run.history[0].weights == decoder.default_weights.tolist()  # the start is decoded as given
    for record in run.history[1:]:
        w = np.asarray(record.weights)
        if fix:
            assert np.allclose(w, start)  # the fixed LM weight sets the scale: the tuner's factor is divided out
        elif decode_norm == "l1":
            assert np.abs(w).sum() == pytest.approx(1.0) and np.allclose(w, start / np.abs(start).sum())
        else:
            assert np.allclose(w, 7.0 ** record.iteration * start)


def test_forests_pruned_in_the_workers_equal_forests_pruned_after(system):
    """The step search's forests are pruned where they are decoded (only what is kept travels back): the same
    forests, array for array, as whole forests pruned afterwards; the k-best lists and 1-best are unchanged."""
    data, model = system
    sources = read_lines(data / "dev.src")[:12]
    decoder = MinismtDevDecoder(str(model), sources, stack_size=30, kbest=20, jobs=2)
    try:
        w = decoder.default_weights
        budgets = [10 * len(s.split()) for s in sources]
        kbest, onebest, whole = decoder.decode_with_forests(w, 0)
        kbest_pruned, onebest_pruned, pruned = decoder.decode_with_forests(w, 0, budgets)
    finally:
        decoder.close()
    assert onebest == onebest_pruned and kbest.texts() == kbest_pruned.texts()
    assert sum(f.n_edges for f in pruned) < sum(f.n_edges for f in whole)
    for forest, small, budget in zip(whole, pruned, budgets):
        expected = (forest.prune_to(budget, w) if forest.n_edges > budget else forest).to_portable()
        got = small.to_portable()
        assert got.keys() == expected.keys()
        for key, value in expected.items():
            assert np.array_equal(got[key], value) if isinstance(value, np.ndarray) else got[key] == value, key


def test_a_cut_step_teaches_the_list_what_the_tuners_weights_would_choose(system, tmp_path):
    """When the step is cut short, the search graphs' best translations under the tuner's weights join the
    merged list: the next fit sees them, as it would after decoding those weights (else MERT proposes the same
    weights again and the run stands still)."""
    from tuners.step import EDGES_PER_REFERENCE_WORD
    data, model = system
    sources, references = read_lines(data / "dev.src"), read_lines(data / "dev.tgt")
    decoder = MinismtDevDecoder(str(model), sources, stack_size=30, kbest=20)
    try:
        start = decoder.default_weights
        bad = start.copy()
        bad[decoder.space.index("LM0_0")], bad[decoder.space.index("WordPenalty0_0")] = 0.0, -10.0
        run = TuningRun(decoder, [[r] for r in references], Proposal(bad.tolist()), tmp_path / "run", max_iter=1)
        run.run(start)
        budgets = [EDGES_PER_REFERENCE_WORD * len(r.split()) for r in references]
        kbest, _, forests = decoder.decode_with_forests(start, 0, budgets)
    finally:
        decoder.close()
    assert run.history[0].step < 1
    learned = run._learned  # merged into the list at the next decode (saved with the checkpoint until then)
    listed = {(int(s), text) for s, text in zip(np.repeat(learned.sentence_ids, np.diff(learned.offsets)),
                                                learned.texts())}
    chosen = {(s, forest.viterbi(bad).text) for s, forest in enumerate(forests)}
    assert chosen <= listed
    assert run._accumulated.merge(learned).n_hypotheses > kbest.n_hypotheses  # new to the list
    resumed = TuningRun(MinismtDevDecoder(str(model), sources), [[r] for r in references], Proposal(bad.tolist()),
                        tmp_path / "run", max_iter=1)
    resumed._load()
    assert resumed._learned.texts() == learned.texts()
