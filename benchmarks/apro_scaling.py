"""APRO scaling: one full APRO optimisation at the paper's size, O(k log k) in k, vs O(k^2) and PRO.

Dreyer & Dong (2015, Sec. 5.2): an accumulated k-best list of S = 2,748 sentences
with k = 3,600 hypotheses each (20 dense features here) took their C++ APRO 8
minutes and PRO 13. Synthetic data, seeded: standard-normal features and BLEU
statistics drawn from a hidden linear quality of the features (so ties in
BLEU+1 are common, as in real lists). Prints the issue's keys
``seconds_k3600``, ``ratio_k7200_k3600``, ``peak_gb`` and ``pro_seconds_k3600``, and:

* one ``APRO().fit`` at S x k and at S x 2k, and one ``PRO().fit`` at S x k,
  each in its own process (so ``peak_gb`` is the peak RSS of the k fit,
  data included): seconds, Newton iterations, preference pairs, BLEU before
  and after; the time ratio 2k vs k for the whole fit, per Newton iteration
  and per unit of work (evaluations + Hessian products / 2): the number of
  iterations depends on the data drawn, not on the algorithm;
* the kernels' scaling: best-of-7 loss+gradient and Hessian-vector times at
  k/2 and k on 200 sentences, alternating sizes so that load from other
  processes hits both alike (O(k log k): ratio a little above 2);
* the O(k^2) double-loop loss+gradient (numba) on 8 sentences of k against
  the sweep kernel, extrapolated to the full size's pairs.

Targets at the full size: <= 60 s, ratio <= 2.3, <= 4 GB. Quick: S = 300, k = 1000 (keys ``*_k1000``).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

import numpy as np
from numba import njit
from scipy.special import expit

from minismt.features import FeatureSpace
from minismt.kbest import KBest
from tuners.apro import APRO, APROObjective
from tuners.pro import PRO

TIME_TARGET_S = 60.0
MEMORY_TARGET_GB = 4.0
RATIO_TARGET = 2.3
N_NAIVE_SENTENCES = 8
SCALING_SENTENCES = 200


def synthetic_kbest(n_sentences: int, k: int, dim: int, seed: int) -> KBest:
    """``n_sentences`` x ``k`` hypotheses, ``dim`` dense features, BLEU statistics (features not copied)."""
    rng = np.random.default_rng(seed)
    n = n_sentences * k
    features = rng.standard_normal((n, dim))
    w_true = rng.standard_normal(dim) / np.sqrt(dim)
    stats = np.empty((n, 9), dtype=np.int32)
    chunk = max(1, 200_000 // k)
    for s0 in range(0, n_sentences, chunk):
        s1 = min(n_sentences, s0 + chunk)
        lo, hi = s0 * k, s1 * k
        quality = features[lo:hi] @ w_true + 0.5 * rng.standard_normal(hi - lo)
        precision = 0.15 + 0.7 * expit(quality)
        ref_len = np.repeat(rng.integers(10, 40, size=s1 - s0), k)
        length = np.maximum(1, ref_len + rng.integers(-4, 5, size=hi - lo))
        for order in range(4):
            total = np.maximum(0, length - order)
            stats[lo:hi, 2 * order + 1] = total
            stats[lo:hi, 2 * order] = rng.binomial(total, precision ** (order + 1))
        stats[lo:hi, 8] = ref_len
    offsets = np.arange(0, n + 1, k, dtype=np.int64)
    space = FeatureSpace([f"F{i}_0" for i in range(dim)])
    return KBest(space, offsets, features, np.zeros(0, dtype=np.uint8), np.zeros(n + 1, dtype=np.int64),
                 stats=stats)


@njit(cache=True)
def naive_loss_gradient(offsets, features, bleu, w):
    """Sum of eq. (2) over sentences and its gradient by the explicit O(k^2) double loop over pairs."""
    d = features.shape[1]
    h = features @ w
    loss = 0.0
    grad = np.zeros(d)
    for s in range(offsets.shape[0] - 1):
        for i in range(offsets[s], offsets[s + 1]):
            for j in range(offsets[s], offsets[s + 1]):
                if bleu[i] > bleu[j]:
                    margin = 1.0 - h[i] + h[j]
                    if margin > 0.0:
                        loss += margin * margin
                        for c in range(d):
                            grad[c] -= 2.0 * margin * (features[i, c] - features[j, c])
    return loss, grad


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1024 ** 3


def current_rss_gb() -> float | None:
    """Resident memory now (Linux ``/proc``), or None elsewhere."""
    try:
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * resource.getpagesize() / 1024 ** 3


def fit_once(tuner_name: str, n_sentences: int, k: int, dim: int, seed: int) -> dict:
    """One full optimisation by ``tuner_name`` ("apro" or "pro") on a fresh synthetic list.

    Meant to run in its own process (see :func:`fit_in_subprocess`), so that the
    peak RSS is this fit's: data plus the tuner's working memory.
    """
    w0 = np.zeros(dim)
    w0[0] = 1.0
    tuner = APRO() if tuner_name == "apro" else PRO()
    type(tuner)().fit(synthetic_kbest(4, 50, dim, seed=1), w0)  # numba kernels compiled or loaded
    data = synthetic_kbest(n_sentences, k, dim, seed)
    rss_before = current_rss_gb()
    start = time.perf_counter()
    weights = tuner.fit(data, w0)
    seconds = time.perf_counter() - start
    return {"tuner": tuner_name, "sentences": n_sentences, "k": k, "hypotheses": data.n_hypotheses,
            "data_gb": round(data.nbytes() / 1024 ** 3, 3), "seconds": round(seconds, 2),
            "iterations": tuner.n_iter_, "converged": tuner.converged_,
            "preference_pairs": getattr(tuner, "n_pairs_", None),
            "evaluations": getattr(tuner, "n_evaluations_", None),
            "hessian_products": getattr(tuner, "n_hessian_products_", None),
            "rss_before_fit_gb": None if rss_before is None else round(rss_before, 3),
            "peak_rss_gb": round(peak_rss_gb(), 3),
            "bleu_before": round(data.bleu(w0, smooth="none"), 4),
            "bleu_after": round(data.bleu(weights, smooth="none"), 4)}


def fit_in_subprocess(tuner_name: str, n_sentences: int, k: int, dim: int, seed: int) -> dict:
    """:func:`fit_once` in a new Python process; its JSON result."""
    command = [sys.executable, __file__, "--fit", tuner_name, str(n_sentences), str(k), str(dim), str(seed)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def kernel_scaling(n_sentences: int, k: int, dim: int, trials: int = 7) -> dict:
    """Best-of-``trials`` loss+gradient and Hessian-product times at k/2 and k hypotheses per sentence.

    Both lists are in memory and the trials alternate between them, so that
    load from other processes affects both sizes alike.
    """
    objectives = {}
    for size in (k // 2, k):
        data = synthetic_kbest(n_sentences, size, dim, seed=4)
        objectives[size] = (data, APROObjective.from_kbest(data, data.sentence_bleu(), 0.01))
    w = 0.1 * np.random.default_rng(5).standard_normal(dim)
    best = {(size, what): np.inf for size in objectives for what in ("eval", "hessp")}
    for trial in range(trials):
        for size, (_, objective) in objectives.items():
            x = w * (1.0 + 0.01 * trial)
            start = time.perf_counter()
            objective(x)
            best[size, "eval"] = min(best[size, "eval"], time.perf_counter() - start)
            start = time.perf_counter()
            objective.hessp(x, w)
            best[size, "hessp"] = min(best[size, "hessp"], time.perf_counter() - start)
    return {"sentences": n_sentences, "k": k,
            "eval_seconds": {str(size): round(best[size, "eval"], 4) for size in objectives},
            "hessp_seconds": {str(size): round(best[size, "hessp"], 4) for size in objectives},
            "eval_ratio": best[k, "eval"] / best[k // 2, "eval"],
            "hessp_ratio": best[k, "hessp"] / best[k // 2, "hessp"]}


def run(quick: bool = False) -> dict:
    n_sentences, k, dim = (300, 1000, 20) if quick else (2748, 3600, 20)
    w0 = np.zeros(dim)
    w0[0] = 1.0
    # warm the numba kernels (compiled or loaded from cache) outside the timings
    warm = synthetic_kbest(4, 50, dim, seed=1)
    APRO().fit(warm, w0)
    naive_loss_gradient(warm.offsets, warm.features, warm.sentence_bleu(), w0)

    # naive O(k^2) vs the sweep kernel, a few sentences of k hypotheses (best of 3 each)
    few = synthetic_kbest(N_NAIVE_SENTENCES, k, dim, seed=2)
    bleu_few = few.sentence_bleu()
    objective = APROObjective.from_kbest(few, bleu_few, 0.01)
    naive_s = sweep_s = np.inf
    for trial in range(3):
        w = w0 * (1.0 + 0.01 * trial)
        start = time.perf_counter()
        naive_loss, _ = naive_loss_gradient(few.offsets, few.features, bleu_few, w)
        naive_s = min(naive_s, time.perf_counter() - start)
        start = time.perf_counter()
        objective(w)
        sweep_s = min(sweep_s, time.perf_counter() - start)
    assert abs(objective.loss(w) - naive_loss) <= 1e-9 * abs(naive_loss)
    naive_per_pair = naive_s / objective.n_pairs()
    del few, objective
    scaling = kernel_scaling(SCALING_SENTENCES, k, dim)

    # each full-size fit in its own process: its peak memory is its own
    apro_k = fit_in_subprocess("apro", n_sentences, k, dim, seed=3)
    apro_2k = fit_in_subprocess("apro", n_sentences, 2 * k, dim, seed=3)
    pro_k = fit_in_subprocess("pro", n_sentences, k, dim, seed=3)
    ratio = apro_2k["seconds"] / apro_k["seconds"]
    per_iteration_ratio = ratio * apro_k["iterations"] / apro_2k["iterations"]
    # a Hessian product costs about half an evaluation (kernel_scaling's times)
    work_k, work_2k = (f["evaluations"] + 0.5 * f["hessian_products"] for f in (apro_k, apro_2k))
    per_work_ratio = ratio * work_k / work_2k
    tag, tag2 = f"k{k}", f"k{2 * k}"
    result = {
        f"seconds_{tag}": apro_k["seconds"],
        f"ratio_{tag2}_{tag}": round(ratio, 3),
        "peak_gb": apro_k["peak_rss_gb"],
        f"pro_seconds_{tag}": pro_k["seconds"],
        "sentences": n_sentences, "k": k, "dense_features": dim,
        f"apro_{tag}": apro_k, f"apro_{tag2}": apro_2k, f"pro_{tag}": pro_k,
        f"per_newton_iteration_ratio_{tag2}_{tag}": round(per_iteration_ratio, 3),
        f"per_evaluation_ratio_{tag2}_{tag}": round(per_work_ratio, 3),
        "kernel_scaling": {**scaling, "eval_ratio": round(scaling["eval_ratio"], 3),
                           "hessp_ratio": round(scaling["hessp_ratio"], 3)},
        "naive_k": k, "naive_sentences": N_NAIVE_SENTENCES, "naive_loss_grad_seconds": round(naive_s, 3),
        "sweep_loss_grad_seconds": round(sweep_s, 4), "naive_over_sweep": round(naive_s / sweep_s, 1),
        "naive_loss_grad_full_size_estimate_seconds": round(naive_per_pair * apro_k["preference_pairs"], 1),
        "paper_minutes": {"apro": 8, "pro": 13},
        "targets": {"seconds": TIME_TARGET_S, "peak_gb": MEMORY_TARGET_GB, "ratio": RATIO_TARGET},
        "within_targets": bool(apro_k["seconds"] <= TIME_TARGET_S and apro_k["peak_rss_gb"] <= MEMORY_TARGET_GB
                               and ratio <= RATIO_TARGET),
    }
    return result


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--fit":
        name, sizes = sys.argv[2], [int(x) for x in sys.argv[3:]]
        print(json.dumps(fit_once(name, *sizes)))
    else:
        print(json.dumps(run(quick="--quick" in sys.argv)))
