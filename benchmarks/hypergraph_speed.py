"""Speed of hypergraph algorithms on real cdec forests: reweight + Viterbi, inside/outside, 100-best.

Data: the 10 decode_nc forests (5,321 edges) and dpmert_testdata/1.json (14,141
edges) when ../shared is present, else CKY-shaped synthetic forests of about the
same sizes. Each evaluation reweights every forest with a random weight vector
and runs one algorithm on all of them: Viterbi scores and back-pointers; inside
+ outside + edge posteriors (log semiring); 100-best derivations and 100-best
distinct yields (with yields and feature vectors). The baseline is a plain-Python
Viterbi (sparse dot + max over incoming edges, on Python lists) over the same
forests with the same weights, measured in the same run; both give the same scores.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from minismt.corpus import Vocabulary
from minismt.features import FeatureSpace
from minismt.hypergraph import Hypergraph, HypergraphBuilder, read_cdec_json

CDEC = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "cdec"
SIZES = [(63, 158), (132, 619), (90, 177), (140, 504), (169, 529), (243, 1207), (161, 529), (193, 1019),
         (120, 351), (91, 228), (2197, 14141)]


def cky_forest(rng: np.random.Generator, space: FeatureSpace, vocab: Vocabulary, length: int, *, per_node: int,
               n_features: int, per_edge: int, straight: float, word) -> Hypergraph:
    """A CKY-shaped random forest over a ``length``-word sentence.

    Nodes are (span, state) pairs, 3 states per span, each with ``per_node``
    incoming edges; a span of one word has lexical edges emitting
    ``word(i, k)`` for a random ``k`` in 0-2, a longer one binary edges (split
    point and states at random, straight with probability ``straight``, else
    inverted), and the goal takes every state of the whole sentence. Every
    edge has ``per_edge`` of ``n_features`` features with normal values.
    """
    states = 3
    builder = HypergraphBuilder(space, vocab)
    ids = {}
    for width in range(1, length + 1):
        for i in range(length - width + 1):
            for c in range(states):
                ids[i, i + width, c] = builder.add_node("X")
    goal = builder.add_node("Goal")

    def features():
        return rng.choice(n_features, per_edge, replace=False), rng.normal(size=per_edge)

    for (i, j, c), v in ids.items():
        for _ in range(per_node):
            if j - i == 1:
                builder.add_edge(v, (), features(), [word(i, int(rng.integers(3)))])
            else:
                k = int(rng.integers(i + 1, j))
                tails = (ids[i, k, int(rng.integers(states))], ids[k, j, int(rng.integers(states))])
                builder.add_edge(v, tails, features(), [0, 1] if rng.random() < straight else [1, 0])
    for c in range(states):
        builder.add_edge(goal, (ids[0, length, c],), features())
    return builder.build()


def _synthetic(rng: np.random.Generator, space: FeatureSpace, vocab: Vocabulary, n: int, n_edges: int) -> Hypergraph:
    """A :func:`cky_forest` with about ``n`` nodes and ``n_edges`` edges, 4 of 12 features per edge."""
    length = 1
    while 3 * length * (length + 1) // 2 + 1 < n:
        length += 1
    return cky_forest(rng, space, vocab, length, per_node=max(1, round(n_edges / n)), n_features=12, per_edge=4,
                      straight=0.7, word=lambda i, k: f"w{i}_{k}")


def _forests():
    space, vocab = FeatureSpace(), Vocabulary()
    if CDEC.is_dir():
        paths = [CDEC / "decode_nc" / "hgs_json" / f"{i}.json" for i in range(10)]
        paths.append(CDEC / "dpmert_testdata" / "1.json")
        return "cdec decode_nc + dpmert_testdata/1.json", [read_cdec_json(p, space, vocab) for p in paths], space
    space = FeatureSpace([f"F{i}" for i in range(12)])
    rng = np.random.default_rng(0)
    return "synthetic", [_synthetic(rng, space, vocab, n, e) for n, e in SIZES], space


def _python_forest(hg: Hypergraph):
    """Per node: list of (features as (id, value) pairs, tails) of its incoming edges, as Python lists."""
    feats = [list(zip(hg.feat_ids[hg.feat_offsets[e]:hg.feat_offsets[e + 1]].tolist(),
                      hg.feat_values[hg.feat_offsets[e]:hg.feat_offsets[e + 1]].tolist()))
             for e in range(hg.n_edges)]
    tails = [hg.tails[hg.tail_offsets[e]:hg.tail_offsets[e + 1]].tolist() for e in range(hg.n_edges)]
    return [[(feats[e], tails[e]) for e in range(hg.in_offsets[v], hg.in_offsets[v + 1])] for v in range(hg.n_nodes)]


def python_viterbi(forest, w: list[float]) -> float:
    """Best derivation score of the goal: plain Python, the same recurrence as the numba kernel."""
    best = [0.0] * len(forest)
    for v, incoming in enumerate(forest):
        if not incoming:
            continue
        top = -float("inf")
        for feats, tails in incoming:
            score = 0.0
            for i, x in feats:
                score += w[i] * x
            for t in tails:
                score += best[t]
            if score > top:
                top = score
        best[v] = top
    return best[-1]


def _timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def run(quick: bool = False) -> dict:
    start = time.perf_counter()
    source, forests, space = _forests()
    read_s = time.perf_counter() - start
    n_edges = sum(hg.n_edges for hg in forests)
    rng = np.random.default_rng(1)
    n_eval = 20 if quick else 200
    weights = rng.normal(size=(n_eval, len(space)))
    repeats = 1 if quick else 3
    for hg in forests:  # compile outside the timing
        hg.reweight(weights[0]).viterbi_scores()
        hg.edge_posteriors(weights[0])
        hg.kbest(5, weights[0], distinct=True)

    def viterbi_all():
        for w in weights:
            for hg in forests:
                hg.reweight(w).viterbi_scores()

    def inside_outside_all():
        for w in weights[: n_eval // 4]:
            for hg in forests:
                hg.edge_posteriors(w)

    def kbest_all(distinct: bool):
        for w in weights[:10]:
            for hg in forests:
                hg.kbest(100, w, distinct=distinct)

    viterbi_s = _timed(viterbi_all, repeats)
    inout_s = _timed(inside_outside_all, repeats) / (n_eval // 4) * n_eval
    kbest_s = _timed(lambda: kbest_all(False), repeats) / 10
    kbest_distinct_s = _timed(lambda: kbest_all(True), repeats) / 10

    python_forests = [_python_forest(hg) for hg in forests]
    n_python = 3 if quick else 10
    python_s = _timed(lambda: [python_viterbi(f, w.tolist()) for w in weights[:n_python] for f in python_forests],
                      repeats) / n_python * n_eval
    for w in weights[:n_python]:
        for hg, forest in zip(forests, python_forests):
            ours = hg.viterbi_scores(w)[0][-1]
            assert abs(python_viterbi(forest, w.tolist()) - ours) <= 1e-9 * max(1.0, abs(ours))
    return {
        "data": source, "forests": len(forests), "edges": n_edges, "evaluations": n_eval,
        "read_seconds": round(read_s, 3),
        "viterbi_evals_per_s": round(n_eval / viterbi_s, 1),
        "viterbi_us_per_edge": round(viterbi_s / n_eval / n_edges * 1e6, 4),
        "inside_outside_evals_per_s": round(n_eval / inout_s, 1),
        "inside_outside_us_per_edge": round(inout_s / n_eval / n_edges * 1e6, 4),
        "kbest100_ms_all_forests": round(kbest_s * 1e3, 2),
        "kbest100_distinct_ms_all_forests": round(kbest_distinct_s * 1e3, 2),
        "python_viterbi_evals_per_s": round(n_eval / python_s, 2),
        "speedup_vs_python_viterbi": round(python_s / viterbi_s, 1),
    }


if __name__ == "__main__":
    import json
    import sys
    print(json.dumps(run(quick="--quick" in sys.argv)))
