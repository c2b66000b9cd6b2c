"""Numba kernels of the listwise tuners (:mod:`tuners.listwise`, Chen et al. 2017).

Every loss of the family is one formula over a list sorted into its
ground-truth order ``pi`` (BLEU+1 descending). With ``s_t`` the model score
and ``e_t`` the scaled BLEU+1 of the hypothesis at position ``t`` (0-based
here, 1-based in the paper), the suffix log-sum-exps

    S_j = log sum_{t >= j} exp(s_t)        E_j = log sum_{t >= j} exp(e_t)

are the log normalisers of the permutation probability model (eq. 4) at
position ``j``, and ``c_j >= 0`` are position weights. Two targets:

* hard (ListMLE family, eq. 5 and its weighted forms)::

      L = sum_j c_j (S_j - s_j)
      dL/ds_t = -c_t + sum_{j <= t} c_j exp(s_t - S_j)

* soft (ListNet family): at each position the cross entropy between the
  top-one distributions of eval and of the model over the hypotheses not yet
  placed, ``p_t^(j) = exp(e_t - E_j)`` and ``q_t^(j) = exp(s_t - S_j)``::

      L = sum_j c_j nu_j,   nu_j = sum_{t >= j} p_t^(j) (S_j - s_t)
      dL/ds_t = sum_{j <= t} c_j [exp(s_t - S_j) - exp(e_t - E_j)]

Position weights: all ones (ListMLE), ones on the first ``n`` positions (top-n
ListMLE; with ``n = 1`` and the soft target, top-one ListNet), or the
top-rank enhanced cost ``c(j) = (k - j + 1) / sum_{t=1..k} t`` of eq. (6).

Everything is O(k) per list once it is sorted: ``S`` and ``E`` by one
backward pass of ``logaddexp``; ``nu_j`` by the backward recursion
``nu_j = w_j (S_j - s_j) + (1 - w_j) (nu_{j+1} + S_j - S_{j+1})`` with
``w_j = p_j^(j)`` and ``1 - w_j = exp(E_{j+1} - E_j)`` (every term >= 0, so
no cancellation); the gradient sums by one forward pass keeping
``log sum_{j <= t} c_j exp(-S_j)`` (so ``exp(s_t + that) <= sum c``, never
overflowing). The ground-truth order is computed once per fit.

Mini-batch AdaDelta (Zeiler 2012, Algorithm 1) runs over whole epochs in one
kernel. Sparse weights are updated lazily: a weight whose gradient is 0 in a
step keeps its value and only its two running averages decay by ``rho``, so
they are decayed by ``rho ** gap`` when the weight is next touched; dense
weights are updated at every step. Kernels are sequential (the result does
not depend on the thread count) and assume valid arrays; the checks are in
:mod:`tuners.listwise`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from minismt._primitives import logaddexp
from minismt.kbest._kernels import row_score

WEIGHTS_ALL = 0
"""``c_j = 1`` at every position (ListMLE, eq. 5)."""
WEIGHTS_TOP_N = 1
"""``c_j = 1`` for the first ``top_n`` positions, else 0 (top-n ListMLE; top-one ListNet)."""
WEIGHTS_TOP_RANK = 2
"""``c(j) = (k - j + 1) / sum_{t=1..k} t`` (eq. 6, the top-rank enhanced cost)."""


@njit(cache=True)
def ground_truth_order(offsets, bleu, order):
    """Rows of each instance by decreasing ``bleu``, ties by increasing row (decoder order).

    Writes ``order[offsets[i]:offsets[i+1]]`` = the global rows of instance ``i`` in the
    order ``pi_eval`` of the paper (a stable sort of ``-bleu``).
    """
    for i in range(offsets.shape[0] - 1):
        lo = offsets[i]
        hi = offsets[i + 1]
        local = np.argsort(-bleu[lo:hi], kind="mergesort")
        for p in range(hi - lo):
            order[lo + p] = lo + local[p]


@njit(cache=True)
def position_weights(k, weighting, top_n, c):
    """Position weights ``c[0:k]`` of a list of ``k`` hypotheses (see the ``WEIGHTS_*`` constants)."""
    if weighting == WEIGHTS_TOP_RANK:
        total = 0.5 * k * (k + 1)
        for j in range(k):
            c[j] = (k - j) / total
    elif weighting == WEIGHTS_TOP_N:
        for j in range(k):
            c[j] = 1.0 if j < top_n else 0.0
    else:
        for j in range(k):
            c[j] = 1.0


@njit(cache=True)
def list_loss_gradient(s, e, c, soft, g, lse_s, lse_e):
    """Loss of one list in ground-truth order and its derivative ``g = dL/ds``.

    ``s``: model scores, ``e``: scaled BLEU+1 (used by the soft target only),
    ``c``: position weights, all of length ``k >= 1`` and in the order
    ``pi_eval``; ``soft``: ListNet's cross entropy (True) or ListMLE's negative
    log-likelihood (False). ``lse_s`` and ``lse_e`` are scratch of length ``k``
    (they hold ``S_j`` and ``E_j`` afterwards). Returns the loss.
    """
    k = s.shape[0]
    lse_s[k - 1] = s[k - 1]
    for j in range(k - 2, -1, -1):
        lse_s[j] = logaddexp(lse_s[j + 1], s[j])
    loss = 0.0
    if soft:
        lse_e[k - 1] = e[k - 1]
        for j in range(k - 2, -1, -1):
            lse_e[j] = logaddexp(lse_e[j + 1], e[j])
        nu = 0.0
        for j in range(k - 2, -1, -1):
            head = math.exp(e[j] - lse_e[j])
            rest = math.exp(lse_e[j + 1] - lse_e[j])
            nu = head * (lse_s[j] - s[j]) + rest * (nu + (lse_s[j] - lse_s[j + 1]))
            loss += c[j] * nu
        log_a_s = -np.inf
        log_a_e = -np.inf
        for t in range(k):
            if c[t] > 0.0:
                log_c = math.log(c[t])
                log_a_s = logaddexp(log_a_s, log_c - lse_s[t])
                log_a_e = logaddexp(log_a_e, log_c - lse_e[t])
            g[t] = math.exp(s[t] + log_a_s) - math.exp(e[t] + log_a_e)
    else:
        log_a = -np.inf
        for t in range(k):
            if c[t] > 0.0:
                loss += c[t] * (lse_s[t] - s[t])
                log_a = logaddexp(log_a, math.log(c[t]) - lse_s[t])
            g[t] = math.exp(s[t] + log_a) - c[t]
    return loss


@njit(cache=True)
def _list_buffers(offsets):
    """Six work arrays as long as the longest list: scores, evals, costs, gradients, two suffix sums."""
    k_max = 0
    for i in range(offsets.shape[0] - 1):
        k_max = max(k_max, offsets[i + 1] - offsets[i])
    return (np.empty(k_max), np.empty(k_max), np.empty(k_max), np.empty(k_max), np.empty(k_max),
            np.empty(k_max))


@njit(cache=True)
def losses_at_scores(offsets, order, scores, evals, weighting, top_n, soft, loss, grad):
    """Loss of every instance (``loss[I]``) and ``dL_i/ds`` of every row (``grad[N]``) at model ``scores``."""
    s, e, c, g, lse_s, lse_e = _list_buffers(offsets)
    for i in range(offsets.shape[0] - 1):
        lo = offsets[i]
        k = offsets[i + 1] - lo
        if k == 0:
            loss[i] = 0.0
            continue
        for p in range(k):
            row = order[lo + p]
            s[p] = scores[row]
            e[p] = evals[row]
        position_weights(k, weighting, top_n, c)
        loss[i] = list_loss_gradient(s[:k], e[:k], c[:k], soft, g[:k], lse_s[:k], lse_e[:k])
        for p in range(k):
            grad[order[lo + p]] = g[p]


@njit(cache=True)
def transpose_dot(features, indptr, indices, values, coef, out):
    """``out += X^T coef`` over the dense block and the CSR block (global sparse indices)."""
    d = features.shape[1]
    for row in range(features.shape[0]):
        a = coef[row]
        if a == 0.0:
            continue
        for col in range(d):
            out[col] += a * features[row, col]
        for p in range(indptr[row], indptr[row + 1]):
            out[indices[p]] += a * values[p]


@njit(cache=True)
def _adadelta_update(j, gradient, t, rho, eps, w, mean_sq_grad, mean_sq_step, last_step):
    """One AdaDelta step (Zeiler 2012, Algorithm 1) of weight ``j`` at step ``t``.

    First the running averages catch up on the ``t - 1 - last_step[j]`` steps in
    which the gradient of ``j`` was 0 (each multiplies them by ``rho`` and leaves ``w[j]``).
    """
    gap = t - 1 - last_step[j]
    if gap > 0:
        decay = rho ** gap
        mean_sq_grad[j] *= decay
        mean_sq_step[j] *= decay
    mean_sq_grad[j] = rho * mean_sq_grad[j] + (1.0 - rho) * gradient * gradient
    step = -math.sqrt(mean_sq_step[j] + eps) / math.sqrt(mean_sq_grad[j] + eps) * gradient
    mean_sq_step[j] = rho * mean_sq_step[j] + (1.0 - rho) * step * step
    w[j] += step
    last_step[j] = t


@njit(cache=True)
def adadelta_epoch(instances, batch_size, offsets, order, features, indptr, indices, values, evals,
                   weighting, top_n, soft, rho, eps, w, mean_sq_grad, mean_sq_step, last_step,
                   counter, grad, touched, is_touched):
    """One epoch of mini-batch AdaDelta over the instances in the given order.

    ``instances`` are visited in consecutive batches of ``batch_size``; each
    batch's gradient is the mean over its lists of ``dL/dw`` at the weights
    before the step. ``w``, the AdaDelta state (``mean_sq_grad`` = E[g^2],
    ``mean_sq_step`` = E[dx^2], ``last_step`` per weight, the step ``counter[0]``)
    are updated in place. ``grad`` (zeros), ``touched`` and ``is_touched`` (zeros)
    are scratch of the size of ``w`` and are left as they were given.
    Returns the summed loss of the lists, each at the weights of its step.
    """
    d = features.shape[1]
    s, e, c, g, lse_s, lse_e = _list_buffers(offsets)
    total_loss = 0.0
    n_inst = instances.shape[0]
    for start in range(0, n_inst, batch_size):
        stop = min(start + batch_size, n_inst)
        n_touched = 0
        for q in range(start, stop):
            i = instances[q]
            lo = offsets[i]
            k = offsets[i + 1] - lo
            if k == 0:
                continue
            for p in range(k):
                row = order[lo + p]
                s[p] = row_score(features, indptr, indices, values, w, row)
                e[p] = evals[row]
            position_weights(k, weighting, top_n, c)
            total_loss += list_loss_gradient(s[:k], e[:k], c[:k], soft, g[:k], lse_s[:k], lse_e[:k])
            for p in range(k):
                a = g[p]
                if a == 0.0:
                    continue
                row = order[lo + p]
                for col in range(d):
                    grad[col] += a * features[row, col]
                for nz in range(indptr[row], indptr[row + 1]):
                    j = indices[nz]
                    grad[j] += a * values[nz]
                    if is_touched[j] == 0:
                        is_touched[j] = 1
                        touched[n_touched] = j
                        n_touched += 1
        scale = 1.0 / (stop - start)
        counter[0] += 1
        t = counter[0]
        for col in range(d):
            _adadelta_update(col, grad[col] * scale, t, rho, eps, w, mean_sq_grad, mean_sq_step,
                             last_step)
            grad[col] = 0.0
        for q in range(n_touched):
            j = touched[q]
            _adadelta_update(j, grad[j] * scale, t, rho, eps, w, mean_sq_grad, mean_sq_step,
                             last_step)
            grad[j] = 0.0
            is_touched[j] = 0
    return total_loss
