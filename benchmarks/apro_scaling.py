"""APRO scaling: one full APRO optimisation at the paper's size, O(k log k) in k, vs O(k^2) and PRO.

Dreyer & Dong (2015, Sec. 5.2): an accumulated k-best list of S = 2,748 sentences
with k = 3,600 hypotheses each (20 dense features here) took their C++ APRO 8
minutes and PRO 13. Synthetic data, seeded: standard-normal features and BLEU
statistics drawn from a hidden linear quality of the features (so ties in
BLEU+1 are common, as in real lists). Reports:

* one ``APRO().fit`` at S x k and at S x k/2: seconds, peak RSS
  (``resource.getrusage``), Newton iterations, BLEU before/after, and the time
  ratio k vs k/2 (whole fit, and per Newton iteration: the iteration count
  depends on the data, not on the algorithm);
* the kernels' scaling: best-of-7 loss+gradient and Hessian-vector times at
  k/2 and k on 200 sentences, alternating sizes so that load from other
  processes hits both alike (target ratio <= 2.3, i.e. O(k log k));
* the O(k^2) double-loop loss+gradient (numba) on 8 sentences of k against
  the sweep kernel, extrapolated to the full size;
* ``PRO().fit`` on the same data.

Targets at the full size: <= 60 s and <= 4 GB. Quick: S = 300, k = 1000.
"""

from __future__ import annotations

import resource
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


def time_apro(data: KBest, w0: np.ndarray) -> dict:
    """One full APRO optimisation: seconds, peak RSS, iterations, BLEU before and after."""
    rss_before = current_rss_gb()
    tuner = APRO()
    start = time.perf_counter()
    tuner.fit(data, w0)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "newton_iterations": tuner.n_iter_, "converged": tuner.converged_,
            "rss_before_gb": rss_before, "peak_rss_gb": peak_rss_gb(),
            "bleu_before": data.bleu(w0, smooth="none"),
            "bleu_after": data.bleu(tuner.weights_, smooth="none")}


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
    PRO().fit(warm, w0)
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
    pairs_few = objective.n_pairs()
    del few, objective
    scaling = kernel_scaling(SCALING_SENTENCES, k, dim)

    # k/2 first (then freed), then the full size
    half = synthetic_kbest(n_sentences, k // 2, dim, seed=3)
    at_half = time_apro(half, w0)
    del half
    data = synthetic_kbest(n_sentences, k, dim, seed=3)
    data_gb = data.nbytes() / 1024 ** 3
    at_full = time_apro(data, w0)
    peak_apro = at_full["peak_rss_gb"]
    start = time.perf_counter()
    pro = PRO()
    w_pro = pro.fit(data, w0)
    pro_s = time.perf_counter() - start
    pro_bleu = data.bleu(w_pro, smooth="none")
    n_pairs = APROObjective.from_kbest(data, data.sentence_bleu(), 0.01).n_pairs()
    ratio = at_full["seconds"] / at_half["seconds"]
    eval_ratio = scaling["eval_ratio"]
    hessp_ratio = scaling["hessp_ratio"]
    per_iteration_ratio = ratio * at_half["newton_iterations"] / at_full["newton_iterations"]
    naive_per_pair = naive_s / pairs_few
    return {
        "sentences": n_sentences, "k": k, "dense_features": dim, "hypotheses": data.n_hypotheses,
        "preference_pairs": n_pairs, "data_gb": round(data_gb, 3),
        "apro_seconds": round(at_full["seconds"], 2), "apro_newton_iterations": at_full["newton_iterations"],
        "apro_converged": at_full["converged"],
        "apro_bleu_before": round(at_full["bleu_before"], 4),
        "apro_bleu_after": round(at_full["bleu_after"], 4),
        "peak_rss_gb": round(peak_apro, 3),
        "rss_before_fit_gb": None if at_full["rss_before_gb"] is None else round(at_full["rss_before_gb"], 3),
        "half_k_apro_seconds": round(at_half["seconds"], 2),
        "half_k_newton_iterations": at_half["newton_iterations"],
        "ratio_k_vs_half_k": round(ratio, 3),
        "per_newton_iteration_ratio_k_vs_half_k": round(per_iteration_ratio, 3),
        "kernel_scaling": {**scaling, "eval_ratio": round(eval_ratio, 3),
                           "hessp_ratio": round(hessp_ratio, 3)},
        "naive_k": k, "naive_sentences": N_NAIVE_SENTENCES, "naive_loss_grad_seconds": round(naive_s, 3),
        "sweep_loss_grad_seconds": round(sweep_s, 4), "naive_over_sweep": round(naive_s / sweep_s, 1),
        "naive_loss_grad_full_size_estimate_seconds": round(naive_per_pair * n_pairs, 1),
        "pro_seconds": round(pro_s, 2), "pro_bleu_after": round(pro_bleu, 4),
        "paper_minutes": {"apro": 8, "pro": 13},
        "targets": {"seconds": TIME_TARGET_S, "peak_rss_gb": MEMORY_TARGET_GB, "ratio": RATIO_TARGET},
        "within_targets": bool(at_full["seconds"] <= TIME_TARGET_S and peak_apro <= MEMORY_TARGET_GB
                               and max(eval_ratio, hessp_ratio) <= RATIO_TARGET),
    }


if __name__ == "__main__":
    import json
    import sys
    print(json.dumps(run(quick="--quick" in sys.argv)))
