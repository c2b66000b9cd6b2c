"""Speed of the Bayesian-optimisation tuners' two costs: a BLEU evaluation on fixed forests, and a GP step.

* evaluation: corpus BLEU of the Viterbi translations of all dev forests at one
  weight vector, by :class:`minismt.hypergraph.batch.ForestBatch` (``bleu``: one
  numba call; ``bleu_many``: a batch of vectors, in parallel threads), against
  the slow reference :meth:`minismt.hypergraph.ForestData.bleu` (one Viterbi, string
  join and re-tokenisation per forest) measured in the same run on the same
  points (and checked equal);
* GP step: fitting the GP (hyperparameters by L-BFGS-B with the tuner's default
  2 restarts) plus maximising EI over the candidates (10,000 + 500 local),
  as :class:`tuners.bayesopt.BoxBayesOpt` does, timed per step over a full BO
  run (100 steps, Sec. 3 of Miao et al. 2016) on the decode_nc forests with the
  12 cdec features of ``weights.init``, and over a shorter run with 18 features
  (the paper's "18 default cdec features") on the large synthetic set.

Data: the Multi30k de-en dev set's forests (1,014 sentences, decoded at stack 100
by a model trained in the run; not in ``--quick``), the 10 cdec decode_nc forests
(5,321 edges; skipped when ../shared is absent) and a synthetic dev set sized like a 1,000-sentence one: 1,000
CKY-shaped forests of 2,000-5,000 edges over 18 dense features (50 distinct
forests built with HypergraphBuilder, each used for 20 sentences with their own
references; ``--quick``: 100 forests). Points are drawn in the HG-BO box
``w0 +- 0.1``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from minismt.corpus import Vocabulary
from minismt.features import FeatureSpace
from minismt.hypergraph import read_cdec_json
from minismt.hypergraph.batch import ForestBatch
from minismt.metrics import BleuReferences
from minismt.hypergraph import ForestData
from tuners.bayesopt import BoxBayesOpt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hypergraph_speed import cky_forest  # noqa: E402

CDEC = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "cdec"
N_FEATURES = 18
TRANSLATIONS = 3


def synthetic_forest(rng, space, vocab, length: int, tag: int):
    """A CKY-shaped forest (:func:`hypergraph_speed.cky_forest`) over a ``length``-word sentence: 4 edges per
    node, lexical edges emit one of 3 translations of the word, 6 of the 18 features on every edge; returns
    the forest and its words per position."""
    words = [[f"w{tag}_{i}_{k}" for k in range(TRANSLATIONS)] for i in range(length)]
    hg = cky_forest(rng, space, vocab, length, per_node=4, n_features=N_FEATURES, per_edge=6, straight=0.8,
                    word=lambda i, k: words[i][k])
    return hg, words


def synthetic_data(n_sentences: int, n_distinct: int = 50, seed: int = 0):
    rng = np.random.default_rng(seed)
    space = FeatureSpace([f"F{i}" for i in range(N_FEATURES)])
    vocab = Vocabulary()
    built = [synthetic_forest(rng, space, vocab, int(rng.integers(18, 29)), t) for t in range(n_distinct)]
    forests, references = [], []
    for s in range(n_sentences):
        hg, words = built[s % n_distinct]
        forests.append(hg)
        # a reference: a translation of each word (mostly in order, some dropped)
        ref = [w[int(rng.integers(TRANSLATIONS))] for w in words if rng.random() < 0.9]
        references.append([" ".join(ref)])
    return ForestData(forests, np.arange(n_sentences), BleuReferences(references)), space


def cdec_data():
    from plugins.cdec.weights import read_cdec_weights
    folder = CDEC / "decode_nc"
    w0 = read_cdec_weights(folder / "weights.init")
    space, vocab = FeatureSpace(list(w0)), Vocabulary()
    forests = [read_cdec_json(folder / "hgs_json_p17" / f"{i}.json", space, vocab) for i in range(10)]
    references = BleuReferences([[r] for r in (folder / "dev.refs").read_text(encoding="utf-8").splitlines()])
    return ForestData(forests, np.arange(10), references), space.weights(w0, grow=False)


def _per_call(fn, points, repeats: int = 3) -> float:
    """Best over ``repeats`` of the mean seconds per point of ``fn(point)`` over ``points``."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for p in points:
            fn(p)
        best = min(best, (time.perf_counter() - start) / len(points))
    return best


def evaluation_speed(data: ForestData, w0: np.ndarray, n_points: int, n_slow: int, rng) -> dict:
    start = time.perf_counter()
    batch = ForestBatch(data)
    build_s = time.perf_counter() - start
    points = w0 + rng.uniform(-0.1, 0.1, size=(n_points, w0.shape[0]))
    start = time.perf_counter()
    batch.bleu(points[0])
    batch.bleu_many(points[:2])
    first_s = time.perf_counter() - start  # numba compilation or cache load
    fast_s = _per_call(batch.bleu, points)
    start = time.perf_counter()
    many = batch.bleu_many(points)
    many_s = (time.perf_counter() - start) / n_points
    slow_s = _per_call(data.bleu, points[:n_slow], repeats=1)
    slow = [data.bleu(p) for p in points[:n_slow]]
    assert np.array_equal(many[:n_slow], slow) and all(batch.bleu(p) == b for p, b in zip(points[:n_slow], slow))
    return {"forests": batch.n_forests, "edges": batch.n_edges, "nodes": batch.n_nodes,
            "batch_build_s": round(build_s, 3), "first_call_s": round(first_s, 3),
            "batch_mb": round(batch.nbytes() / 2 ** 20, 1),
            "bleu_ms": round(fast_s * 1e3, 3), "bleu_many_ms_per_point": round(many_s * 1e3, 3),
            "reference_bleu_ms": round(slow_s * 1e3, 3), "speedup": round(slow_s / fast_s, 1),
            "speedup_many": round(slow_s / many_s, 1),
            "ns_per_edge": round(fast_s / batch.n_edges * 1e9, 2)}


class _TimedBO(BoxBayesOpt):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fit_s: list[float] = []
        self.propose_s: list[float] = []

    def fit_gp(self):
        start = time.perf_counter()
        super().fit_gp()
        self.fit_s.append(time.perf_counter() - start)

    def propose(self):
        start = time.perf_counter()
        out = super().propose()
        self.propose_s.append(time.perf_counter() - start)
        return out


def gp_speed(data: ForestData, w0: np.ndarray, steps: int, seed: int = 0) -> dict:
    """One BO run of ``steps`` steps over the used dense features in ``w0 +- 0.1`` (HG-BO), timed."""
    batch = ForestBatch(data)
    dims = np.flatnonzero(np.bincount(batch.feat_ids))
    dims = dims[dims < data.space.n_dense]
    eval_s: list[float] = []

    def objective(x):
        w = w0.copy()
        w[dims] = x
        start = time.perf_counter()
        y = batch.bleu(w)
        eval_s.append(time.perf_counter() - start)
        return y

    bo = _TimedBO(w0[dims] - 0.1, w0[dims] + 0.1, np.random.default_rng(seed))
    start = time.perf_counter()
    _, best = bo.run(objective, w0[dims], steps)
    total = time.perf_counter() - start
    fit, prop = np.array(bo.fit_s), np.array(bo.propose_s)
    tail = max(1, len(fit) // 5)
    return {"dims": int(dims.shape[0]), "steps": steps, "total_s": round(total, 2),
            "gp_step_s_mean": round(float((fit + prop).mean()), 4),
            "gp_fit_s_mean": round(float(fit.mean()), 4), "ei_s_mean": round(float(prop.mean()), 4),
            "gp_step_s_last_fifth": round(float((fit + prop)[-tail:].mean()), 4),
            "evaluation_s_mean": round(float(np.mean(eval_s)), 5),
            "evaluation_share": round(float(np.sum(eval_s)) / total, 4),
            "bleu_start": round(bo.records[0]["bleu"], 6), "bleu_best": round(float(best), 6)}


def multi30k_data(folder: Path, stack: int = 100, jobs: int = 2):
    """The forests of the Multi30k de-en dev set (1,014 sentences) decoded by a model trained here."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import tuner_quality
    from minismt.io import read_lines
    from tuners.devdecoder import MinismtDevDecoder
    data, model = tuner_quality.prepare("multi30k-de-en", folder)
    decoder = MinismtDevDecoder(str(model), read_lines(data / "dev.src"), jobs=jobs, stack_size=stack)
    start = time.perf_counter()
    forests, _ = decoder.decode_hypergraphs(decoder.default_weights, 0)
    decode_s = time.perf_counter() - start
    decoder.close()
    references = BleuReferences([[r] for r in read_lines(data / "dev.tgt")])
    return ForestData(forests, np.arange(len(forests)), references), decoder.default_weights, decode_s


def run(quick: bool = False) -> dict:
    rng = np.random.default_rng(1)
    out: dict = {}
    if not quick and (CDEC.parent.parent / "corpora" / "multi30k").is_dir():
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            data, w0, decode_s = multi30k_data(Path(tmp))
            out["multi30k_dev"] = {"forest_decode_s": round(decode_s, 1),
                                   **evaluation_speed(data, w0, 40, 5, rng)}
            out["multi30k_dev_gp"] = gp_speed(data, w0, 30)
    if (CDEC / "decode_nc").is_dir():
        data, w0 = cdec_data()
        out["decode_nc"] = evaluation_speed(data, w0, 50 if quick else 500, 20 if quick else 100, rng)
        out["decode_nc_gp"] = gp_speed(data, w0, 20 if quick else 100)
    start = time.perf_counter()
    data, space = synthetic_data(100 if quick else 1000, n_distinct=10 if quick else 50)
    build_s = time.perf_counter() - start
    w0 = np.random.default_rng(2).normal(size=len(space))
    out["synthetic"] = {"build_forests_s": round(build_s, 2),
                        **evaluation_speed(data, w0, 10 if quick else 40, 3 if quick else 5, rng)}
    out["synthetic_gp"] = gp_speed(data, w0, 10 if quick else 30)
    return out


if __name__ == "__main__":
    import sys
    print(json.dumps(run(quick="--quick" in sys.argv)))
