"""Online rank optimisation: ORO and optimized ORO (Watanabe 2012).

Watanabe (2012), "Optimized Online Rank Learning for Machine Translation"
(papers/oro-optimized-online-rank-learning.txt). The dev set is learned from
in mini-batches (16 sentences): each batch is decoded with the current
weights, its n-best lists are scored with sentence BLEU+1, the *oracles* of
a sentence are its hypotheses of highest BLEU+1 and every (oracle,
non-oracle) pair gives ``Phi = h(e*) - h(e')``. Losses of a batch:

- hinge: ``(1/M) sum_pairs max(0, 1 - w . Phi)`` (M pairs in the batch);
- softmax: the mean over sentences of
  ``-log sum_{e*} exp(w . h(e*)) + log sum_{e in n-best} exp(w . h(e))``.

Updates, with the learning rate ``eta_k = eta0 / (1 + lambda eta0 k)``:

- ORO (the paper's SGD): ``w <- w - eta_k (lambda w + grad loss)``, then the
  projection ``w <- min(1, (1/sqrt(lambda)) / ||w||) w``;
- O-ORO: the L2 shrink ``w' = (1 - lambda eta_k) w``, then the batch's
  passive-aggressive problem ``min_w 1/2 ||w - w'||^2 + eta_k sum xi``
  solved exactly through its dual (bounded coordinate ascent on
  ``tau in [0, eta_k]`` with exact steps on the free coordinates,
  :mod:`tuners._oro_kernels`), then the projection.
  The hinge constraints are the paper's, ``w . Phi >= 1 - xi``; for the
  softmax loss each sentence's loss is linearised at ``w'`` (its constraint
  is ``loss(w') + grad(w') . (w - w') <= xi``), the usual passive-aggressive
  treatment of a smooth loss.

Optimized parallel learning (the paper's last algorithm): the sentences are
split into ``shards``; in each round every shard learns from its own
mini-batches starting at the round's weights ``w^t``, the shard weights are
averaged into ``w^{t+1/2}``, and ``w^{t+1} = (1 - rho) w^t + rho w^{t+1/2}``
with ``rho`` in ``[0, 1]`` from an exact line search of corpus BLEU on the
round's n-best lists (``mixing="line-search"``, the paper's "-L" systems;
ties go to ``rho = 1``) or ``rho = 1`` (``mixing="average"``). Shards run in
lock step: at each step the next mini-batch of every shard is decoded with
that shard's weights in one call to the decoder, which spreads the sentences
over its executor (local processes or a Dask cluster); the updates themselves
are small QPs made in the driver. One :meth:`fit` is one round (one pass over
the dev set), one outer iteration of :class:`~tuners.loop.TuningRun`.

Defaults not fixed by the paper: ``lam = 1e-3`` (weights within a ball of radius
~31.6) and ``eta0 = 0.1`` for ORO's SGD, chosen by re-running rounds over Multi30k
de-en's fixed dev 100-best lists (``eta0`` in {0.01, 0.1, 1}, ``lam`` in {1e-3,
1e-2}); ``eta0 = 0.001`` for O-ORO, whose per-constraint dual bound ``eta`` plays
the role of MIRA's C, chosen by tuning for 4 rounds on the small-data setting
(de-en trained on 3,000 pairs, 400 dev sentences): best decoded dev BLEU 30.68,
30.33, 30.35 over seeds 1-3 (start 29.61) against 30.01, 29.61, 30.52 with 0.01,
whose seed 2 ended at 28.98; ``lam`` in {1e-4, 1e-3, 1e-2} made no difference at
0.001 and at most 0.4 at 0.01 and 0.1 (seed 1). On Multi30k de-en (1,014 dev sentences, 6 rounds,
seeds 1-3) 0.001 against 0.01: best dev BLEU 40.15 against 39.54, test_2016 39.97 against 39.30.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from minismt.errors import InputError
from minismt.kbest import KBest
from tuners import _oro_kernels as K
from tuners.base import BatchSource, OnlineTuner, register
from tuners.mert import line_search

LOSSES = ("hinge", "softmax")
MIXINGS = ("line-search", "average")


def batch_constraints(batch: KBest, w: np.ndarray, loss: str, bleu_options: dict | None = None):
    """A mini-batch's losses as passive-aggressive constraints at ``w``.

    Returns ``(a, g, value, gradient)``: rows of the dual problem (hinge: one
    per (oracle, non-oracle) pair, ``a = 1 - w . Phi``, ``g = -Phi``;
    softmax: one per sentence, ``a`` its loss at ``w`` and ``g`` its
    gradient) and the batch loss with its gradient (hinge averaged over the
    pairs, softmax over the sentences).
    """
    features = batch.feature_matrix()
    dim = features.shape[1]
    w = np.concatenate([w, np.zeros(dim - w.shape[0])]) if w.shape[0] < dim else w
    bleu = batch.sentence_bleu(**(bleu_options or {}))
    scores = features @ w
    rows_a, rows_g = [], []
    for i in range(batch.n_instances):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        if hi == lo:
            continue
        oracle = bleu[lo:hi] == bleu[lo:hi].max()
        h, s = features[lo:hi], scores[lo:hi]
        if loss == "hinge":
            if oracle.all():
                continue
            phi = (h[oracle][:, None, :] - h[~oracle][None, :, :]).reshape(-1, dim)
            rows_g.append(-phi)
            rows_a.append(1.0 - phi @ w)
        else:
            p_all = np.exp(s - logsumexp(s))
            p_oracle = np.exp(s[oracle] - logsumexp(s[oracle]))
            rows_a.append(np.array([logsumexp(s) - logsumexp(s[oracle])]))
            rows_g.append((p_all @ h - p_oracle @ h[oracle])[None, :])
    if not rows_a:
        return np.zeros(0), np.zeros((0, dim)), 0.0, np.zeros(dim)
    a, g = np.concatenate(rows_a), np.concatenate(rows_g)
    if loss == "hinge":
        violated = a > 0.0
        value = float(a[violated].sum()) / a.shape[0]
        gradient = g[violated].sum(axis=0) / a.shape[0]
    else:
        value = float(a.mean())
        gradient = g.mean(axis=0)
    return a, g, value, gradient


def solve_dual(a: np.ndarray, g: np.ndarray, eta: float, tol: float = 1e-10,
               max_sweeps: int = 10_000) -> tuple[np.ndarray, np.ndarray]:
    """``(tau, u)`` maximising ``sum tau a - 1/2 ||sum tau g||^2`` over ``[0, eta]``; ``u = sum tau g``."""
    tau = np.zeros(a.shape[0])
    u = np.zeros(g.shape[1])
    if a.shape[0]:
        K.dual_coordinate_ascent(np.ascontiguousarray(g), np.ascontiguousarray(a), float(eta), tol,
                                 max_sweeps, tau, u)
    return tau, u


def shuffled_shards(n_sentences: int, shards: int, batch_size: int, seed) -> list[list[np.ndarray]]:
    """The dev sentences shuffled by ``default_rng(seed)`` and dealt into ``shards`` (every ``shards``-th one),
    each cut into mini-batches of ``batch_size``: the round plan of the online tuners."""
    order = np.random.default_rng(seed).permutation(n_sentences)
    plan = []
    for s in range(min(shards, n_sentences)):
        mine = order[s::shards]
        plan.append([mine[i:i + batch_size] for i in range(0, mine.shape[0], batch_size)])
    return plan


class ORO(OnlineTuner):
    """Online rank optimisation (Watanabe 2012): SGD over mini-batches, parallel shards, mixing.

    Parameters
    ----------
    loss : ``"hinge"`` (oracle x non-oracle pairs) or ``"softmax"``.
    batch_size : sentences per mini-batch (the paper's 16).
    shards : parallel learners per round (the paper ran 8 jobs); each takes every
        ``shards``-th sentence of the round's shuffled order.
    lam : L2 regularisation lambda; also the projection radius ``1/sqrt(lam)``.
    eta0 : initial learning rate of ``eta_k = eta0 / (1 + lam eta0 k)``.
    mixing : ``"line-search"`` (rho by exact BLEU line search) or ``"average"`` (rho = 1).
    bleu_options : the sentence BLEU+1 variant (:func:`minismt.metrics.sentence_bleu`).
    seed : shuffles the sentences into shards and mini-batches each round.

    Notes
    -----
    After :meth:`fit`: ``weights_``, ``rho_``, ``state_`` (``{"step": k}``) and
    ``history_`` (one dict per lock step: mean batch loss over shards, ``eta``).
    """

    optimized = False

    def __init__(self, loss: str = "hinge", batch_size: int = 16, shards: int = 8, lam: float = 1e-3,
                 eta0: float = 0.1, mixing: str = "line-search", bleu_options: dict | None = None,
                 seed: int = 0):
        self.loss = loss
        self.batch_size = batch_size
        self.shards = shards
        self.lam = lam
        self.eta0 = eta0
        self.mixing = mixing
        self.bleu_options = bleu_options
        self.seed = seed

    def _check_params(self) -> None:
        if self.loss not in LOSSES:
            raise InputError(f"loss={self.loss!r}", expected=" or ".join(map(repr, LOSSES)))
        if self.mixing not in MIXINGS:
            raise InputError(f"mixing={self.mixing!r}", expected=" or ".join(map(repr, MIXINGS)))
        for name in ("batch_size", "shards"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InputError(f"{name}={value!r}", expected="an integer >= 1")
        for name in ("lam", "eta0"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise InputError(f"{name}={value!r}", expected="a finite number > 0")

    def _rate(self, step: int) -> float:
        return self.eta0 / (1.0 + self.lam * self.eta0 * step)

    def _update(self, w: np.ndarray, batch: KBest, eta: float) -> tuple[np.ndarray, float]:
        """One mini-batch step from ``w``; returns the new weights and the batch loss at ``w``."""
        dim = len(batch.space)
        w = np.concatenate([w, np.zeros(dim - w.shape[0])]) if w.shape[0] < dim else w
        if self.optimized:
            shrunk = (1.0 - self.lam * eta) * w
            a, g, value, _ = batch_constraints(batch, shrunk, self.loss, self.bleu_options)
            _, u = solve_dual(a, g, eta)
            new = shrunk - u
        else:
            _, _, value, gradient = batch_constraints(batch, w, self.loss, self.bleu_options)
            new = w - eta * (self.lam * w + gradient)
        norm = float(np.sqrt(new @ new))
        radius = 1.0 / math.sqrt(self.lam)
        if norm > radius:
            new = new * (radius / norm)
        return new, value

    def fit(self, source: BatchSource, w0) -> np.ndarray:
        """One round over the dev set from ``w0``, continuing the learning-rate schedule of
        :attr:`start_state` (the previous round's ``state_``, see :meth:`warm_start`)."""
        self._check_params()
        w_round = self.check_start(source, w0)
        step = int((self.start_state or {}).get("step", 0))
        shard_batches = shuffled_shards(source.n_sentences, self.shards, self.batch_size, self.seed)
        weights = [w_round.copy() for _ in shard_batches]
        seen: list[KBest] = []
        history = []
        n_steps = max(len(b) for b in shard_batches) if shard_batches else 0
        for j in range(n_steps):
            active = [s for s, batches in enumerate(shard_batches) if j < len(batches)]
            lists = source.decode([(weights[s], shard_batches[s][j]) for s in active])
            eta = self._rate(step + j + 1)
            losses = []
            for s, batch in zip(active, lists):
                weights[s], value = self._update(weights[s], batch, eta)
                losses.append(value)
            seen.extend(lists)
            history.append({"step": step + j + 1, "eta": eta, "loss": float(np.mean(losses))})
        dim = len(source.space)
        pad = [np.concatenate([w, np.zeros(dim - w.shape[0])]) for w in weights + [w_round]]
        averaged, w_round = np.mean(pad[:-1], axis=0), pad[-1]
        rho = 1.0
        if self.mixing == "line-search" and seen:
            rho, _ = line_search(KBest.aggregate(seen), w_round, averaged - w_round, 0.0, 1.0, prefer=1.0)
        w_new = w_round + rho * (averaged - w_round)
        self.rho_ = rho
        self.state_ = {"step": step + n_steps}
        self.history_ = history
        self.weights_ = w_new
        return w_new


register("oro")(ORO)


@register("o-oro")
class OptimizedORO(ORO):
    """Optimized ORO (Watanabe 2012): L2 shrink, then the batch's dual QP solved exactly, then projection."""

    optimized = True

    def __init__(self, loss: str = "hinge", batch_size: int = 16, shards: int = 8, lam: float = 1e-3,
                 eta0: float = 0.001, mixing: str = "line-search", bleu_options: dict | None = None,
                 seed: int = 0):
        super().__init__(loss=loss, batch_size=batch_size, shards=shards, lam=lam, eta0=eta0,
                         mixing=mixing, bleu_options=bleu_options, seed=seed)
