"""Speed of hypergraph MERT's line search (tuners.hgmert) against cdec's ``mr_dpmert_map``.

One line search along every direction of cdec's first agenda, from its origin,
exactly as in ../shared/fixtures/cdec (README Sec. 4-5):

- dpmert_testdata: forests 0.json and 1.json (15,167 edges), weights.0, the 21
  directions of agenda.1 (6 unit axes + 15 random); cdec: map 0.66 s;
- decode_nc: the 10 hgs_json_p17 forests (5,321 edges), dpmert_decoded/weights.0,
  the 26 directions of dpmert_decoded/agenda.1 (11 axes + 15 random); cdec: 0.13 s.

Timed: edge scores, the envelope of every forest along every direction (one
numba kernel), BLEU statistics of every distinct translation on the goal
envelopes (cache cold: a fresh problem per repeat, as the mapper scores every
segment) and the merged sweeps; the best of ``repeats`` runs. cdec's times are
``/usr/bin/time`` of the mapper process (start-up and reading its binary
forests included), from the fixture README; ours exclude reading the JSON
forests, reported apart. The best direction can differ from dpmert.pl's: with
4 references the closest reference length ties to the shorter one here and to
the first one in cdec's IBM BLEU, which changes BLEU along some directions
(``ours_along_cdec_best`` is the line cdec picked). Also a full ``hg-mert`` fit on dpmert_testdata
(1 random restart, 15 random directions per round) against dpmert.pl's
projected BLEU after its 5 opt-iterations (0.623521).

Without ../shared: CKY-shaped synthetic forests of the same sizes (the
hypergraph-speed benchmark's), with made-up references, and no cdec baseline.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from minismt.corpus import Vocabulary
from minismt.features import FeatureSpace
from minismt.hypergraph import read_cdec_json
from minismt.metrics import BleuReferences
from minismt.hypergraph import ForestData
from tuners.hgmert import HypergraphMERT, _Forests
from tuners.search import SMOOTH

CDEC = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "cdec"
CDEC_MAP_SECONDS = {"dpmert_testdata": 0.66, "decode_nc": 0.13}
CDEC_PROJECTED_BLEU = {"dpmert_testdata": 0.481539, "decode_nc": 0.256403}  # best.1 of each run
CDEC_PROJECTED_X = {"dpmert_testdata": -8.39879, "decode_nc": -0.887999}
CDEC_FINAL_BLEU = 0.623521  # dpmert_testdata, after dpmert.pl's 5 opt-iterations


def _vector(space: FeatureSpace, text: str) -> np.ndarray:
    out = np.zeros(len(space))
    for item in text.split(";"):
        name, value = item.split("=")
        out[space.index(name)] = float(value)
    return out


def _cdec_problem(name: str):
    """Forests, references, origin and the directions of sentence 0's lines in agenda.1."""
    space, vocab = FeatureSpace(), Vocabulary()
    start = time.perf_counter()
    if name == "dpmert_testdata":
        folder = CDEC / "dpmert_testdata"
        hgs = [read_cdec_json(folder / f"{i}.json", space, vocab) for i in range(2)]
        refs = BleuReferences.from_files([folder / f"c2e.txt.{i}" for i in range(4)])
    else:
        folder = CDEC / "dpmert_decoded"
        hgs = [read_cdec_json(CDEC / "decode_nc" / "hgs_json_p17" / f"{i}.json", space, vocab) for i in range(10)]
        refs = BleuReferences.from_files([CDEC / "decode_nc" / "dev.refs"])
    read_s = time.perf_counter() - start
    lines = [line.split() for line in (folder / "agenda.1").read_text().splitlines()]
    lines = [line for line in lines if line[1] == "0"]
    origin = _vector(space, lines[0][2])
    directions = np.array([_vector(space, line[3]) for line in lines])
    # the direction dpmert.pl picked (best.1: "<origin> <direction>|x|score")
    picked = _vector(space, (folder / "best.1").read_text().split("|")[0].split(" ")[1])
    cdec_best = int(np.flatnonzero(np.all(directions == picked, axis=1))[0])
    return ForestData(hgs, range(len(hgs)), refs), origin, directions, read_s, cdec_best


def _synthetic_problem(name: str, rng: np.random.Generator):
    from hypergraph_speed import SIZES, _synthetic
    space = FeatureSpace([f"F{i}" for i in range(12)])
    vocab = Vocabulary()
    sizes = [(350, 1026), (2197, 14141)] if name == "dpmert_testdata" else SIZES[:10]
    hgs = [_synthetic(rng, space, vocab, n, e) for n, e in sizes]
    words = [w for w in vocab.words() if w]
    refs = BleuReferences([[" ".join(rng.choice(words, 12))] for _ in hgs])
    n_dir = 21 if name == "dpmert_testdata" else 26
    g = rng.standard_normal((n_dir - 6, len(space)))
    directions = np.concatenate([np.eye(len(space))[:6], g / np.linalg.norm(g, axis=1, keepdims=True)])
    return ForestData(hgs, range(len(hgs)), refs), rng.normal(size=len(space)), directions, 0.0, None


def _line_searches(data: ForestData, origin: np.ndarray, directions: np.ndarray):
    forests = _Forests(data)
    start = time.perf_counter()
    a = forests.intercepts(origin)
    gammas, out = forests.searches(a, directions, SMOOTH["none"])
    total = time.perf_counter() - start
    start = time.perf_counter()
    envelopes = forests.envelopes(a, directions)
    kernel = time.perf_counter() - start
    return total, kernel, envelopes[1].shape[0], gammas, out


def run(quick: bool = False) -> dict:
    repeats = 1 if quick else 5
    have_cdec = CDEC.is_dir()
    rng = np.random.default_rng(0)
    result: dict = {"data": "cdec fixtures" if have_cdec else f"synthetic ({CDEC} is absent)"}
    for name in ("dpmert_testdata", "decode_nc"):
        data, origin, directions, read_s, cdec_best = (_cdec_problem(name) if have_cdec
                                                       else _synthetic_problem(name, rng))
        start = time.perf_counter()
        _line_searches(data, origin, directions[:2])  # compile outside the timing
        warmup = time.perf_counter() - start
        runs = [_line_searches(data, origin, directions) for _ in range(repeats)]
        seconds = min(r[0] for r in runs)
        _, _, segments, gammas, out = runs[0]
        best = int(np.argmax(out[:, 0]))
        entry = {"forests": len(data.forests), "edges": sum(hg.n_edges for hg in data.forests),
                 "directions": int(directions.shape[0]), "seconds": round(seconds, 4),
                 "envelope_kernel_seconds": round(min(r[1] for r in runs), 4),
                 "goal_lines": segments, "read_json_seconds": round(read_s, 3),
                 "warmup_seconds": round(warmup, 2), "best_direction": best,
                 "best_x": round(float(gammas[best]), 6), "best_bleu": round(float(out[best, 0]), 6)}
        if have_cdec:
            entry["cdec_map_seconds"] = CDEC_MAP_SECONDS[name]
            entry["speedup_vs_cdec"] = round(CDEC_MAP_SECONDS[name] / seconds, 2)
            entry["cdec_best_direction"] = cdec_best
            entry["cdec_best_x"] = CDEC_PROJECTED_X[name]
            entry["cdec_best_bleu"] = CDEC_PROJECTED_BLEU[name]
            entry["ours_along_cdec_best"] = {"x": round(float(gammas[cdec_best]), 6),
                                             "bleu": round(float(out[cdec_best, 0]), 6)}
        result[name] = entry
        if name == "dpmert_testdata":
            tuner = HypergraphMERT(n_random_restarts=0 if quick else 1, n_random_directions=15, seed=0)
            start = time.perf_counter()
            tuner.fit(data, origin)
            fit = {"seconds": round(time.perf_counter() - start, 3), "bleu": round(tuner.bleu_, 6),
                   "line_searches": sum(h["line_searches"] for h in tuner.history_),
                   "restarts": tuner.n_random_restarts}
            if have_cdec:
                fit["cdec_dpmert_pl_bleu"] = CDEC_FINAL_BLEU
            result["fit_dpmert_testdata"] = fit
    return result


if __name__ == "__main__":
    import json
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    print(json.dumps(run()))
