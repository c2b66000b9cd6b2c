"""The expectation semiring's speed: one evaluation of forest minimum risk (expected BLEU and its gradient)
over the 1,014 dev forests of a Hiero model at pop limit 200, against one inside-outside pass over them.

The model is ``minismt train --hiero`` on Multi30k de-en (HMM alignment, as hiero-decode), with the grammar
for the dev set (val, 1,014 sentences), untuned weights; minismt's chart decoder at pop limit 200 and rule
spans up to 20 words gives each sentence's forest (``quick``: 3,000 training pairs, 100 sentences).
Timed, each the median of three runs after a warm-up, in one process:

- ``inside_outside_seconds``: the forest core's log inside-outside pass (each edge's posterior,
  :meth:`Hypergraph.edge_posteriors`) over the decoder's forests;
- ``split_inside_outside_seconds``: the same pass over the forests split by their 4-gram state, the forests
  the expectations are exact on (our decoders' forests are split by the minimised LM state only; see
  :mod:`minismt.hypergraph.ngrams`), with the edges' scores given;
- ``evaluation_seconds``: one evaluation of ``hg-minrisk``'s objective, value and gradient (the batched
  passes of :class:`~minismt.hypergraph.expectations.ExpectationBatch`, the log-BLEU of the expected
  statistics, its derivative, the gradient over the feature space);
- ``per_forest_semiring_seconds``: the same value and gradient by a first-order semiring traversal per forest
  (:func:`~minismt.hypergraph.expectations.first_order_with_gradient`, the reference the batch is tested
  against) over the split forests with their features;
- ``preparation_seconds``: once per tuning iteration, the split, the edges' n-grams and their matches.

The goal (issue 37): an evaluation within 3x one inside-outside pass. Reported against both passes: over the
split forests (what the evaluation traverses) and over the decoder's (4M edges, the issue's number).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
MULTI30K = SHARED / "corpora" / "multi30k"
POP_LIMIT = 200
MAX_SPAN = 20
GOAL_RATIO = 3.0


def _median_seconds(function, repeats: int = 3) -> float:
    function()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run(quick: bool = False) -> dict:
    import copy

    import numpy as np
    from corpora.fetch import fetch
    from minismt.decode.hiero import HieroDecoder, load_model
    from minismt.hypergraph import ForestData
    from minismt.hypergraph.expectations import first_order_with_gradient
    from minismt.hypergraph.ngrams import split_by_bleu_state, split_by_ngram_state
    from minismt.io import read_lines
    from minismt.metrics import BleuReferences
    from minismt.train import Trainer, TrainingConfig
    from tuners.minrisk import N_COUNTS, ForestMinimumRisk, edge_statistics, log_bleu_of_expectations
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        fetch("multi30k-de-en", data, from_dir=MULTI30K, progress=False, max_train=3000 if quick else None)
        sources, references = read_lines(data / "dev.src"), read_lines(data / "dev.tgt")
        if quick:
            sources, references = sources[:100], references[:100]
        (data / "input.src").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
        Trainer(TrainingConfig(src=str(data / "train.src"), tgt=str(data / "train.tgt"),
                               out=str(Path(tmp) / "model"), aligner="hmm", model="hiero",
                               grammar_inputs=(str(data / "input.src"),), progress=False)).run()
        grammar, lm, manifest = load_model(Path(tmp) / "model", "input")
        decoder = HieroDecoder(grammar, lm, manifest["default_weights"], pop_limit=POP_LIMIT, max_span=MAX_SPAN)
        forests = [decoder.decode(sentence).hypergraph for sentence in sources]
    w = decoder.full_weights()
    bleu_references = BleuReferences([[r] for r in references])
    forest_data = ForestData(forests, np.arange(len(forests)), bleu_references)
    tuner = ForestMinimumRisk()
    started = time.perf_counter()
    tuner._prepare(forest_data)
    preparation = time.perf_counter() - started
    split_scored = []
    full_split_edges = 0
    for s, forest in enumerate(forests):
        full_split_edges += split_by_ngram_state(forest, features=False)[0].n_edges
        split, origin, _ = split_by_bleu_state(forest, bleu_references, s, features=False)
        scores = forest.edge_scores(w)
        split = copy.copy(split)
        split.scores = np.where(origin >= 0, scores[np.maximum(origin, 0)], 0.0)
        split_scored.append(split)
    unsplit = _median_seconds(lambda: [forest.edge_posteriors(w) for forest in forests])
    split_pass = _median_seconds(lambda: [split.edge_posteriors() for split in split_scored])
    evaluation = _median_seconds(lambda: tuner._objective(w, 0.0))
    value, gradient, _ = tuner._objective(w, 0.0)
    with_features = [edge_statistics(forest, s, bleu_references) for s, forest in enumerate(forests)]

    def per_forest():
        """The objective's value and gradient, a semiring traversal per forest (the reference)."""
        rows = [first_order_with_gradient(stats.split, stats.counts.astype(np.float64), w)
                for stats in with_features]
        total = np.sum([result.expectation for result, _ in rows], axis=0)
        reference = sum(float(stats.lengths[np.argmin(np.abs(stats.lengths - result.expectation[1]))])
                        for stats, (result, _) in zip(with_features, rows))
        slow_value, derivative = log_bleu_of_expectations(total, reference)
        return slow_value, derivative @ np.sum([g[:N_COUNTS] for _, g in rows], axis=0)

    semiring = _median_seconds(per_forest)
    slow_value, slow_gradient = per_forest()
    edges = int(sum(f.n_edges for f in forests))
    ratio_split, ratio_unsplit = evaluation / split_pass, evaluation / unsplit
    return {
        "sentences": len(forests), "pop_limit": POP_LIMIT, "max_chart_span": MAX_SPAN, "edges": edges,
        "split_edges": int(tuner.split_edges_), "split_factor": round(tuner.split_edges_ / edges, 2),
        "ngram_state_split_factor": round(full_split_edges / edges, 2),
        "inside_outside_seconds": round(unsplit, 3), "split_inside_outside_seconds": round(split_pass, 3),
        "evaluation_seconds": round(evaluation, 3), "per_forest_semiring_seconds": round(semiring, 3),
        "preparation_seconds": round(preparation, 1),
        "evaluation_over_split_inside_outside": round(ratio_split, 2),
        "evaluation_over_inside_outside": round(ratio_unsplit, 2),
        "batched_speedup_over_per_forest": round(semiring / evaluation, 2),
        "same_value_and_gradient_as_per_forest": bool(
            abs(value - slow_value) < 1e-9 and np.allclose(gradient, slow_gradient, rtol=1e-7, atol=1e-9)),
        "goals": {"evaluation within 3x the split forests' inside-outside": ratio_split <= GOAL_RATIO,
                  "evaluation within 3x the decoder forests' inside-outside": ratio_unsplit <= GOAL_RATIO},
    }
