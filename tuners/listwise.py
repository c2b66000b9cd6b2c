"""Listwise tuning: ListNet, ListMLE and their top-rank enhanced forms (Chen et al. 2017).

Huadong Chen, Shujian Huang, David Chiang, Xinyu Dai and Jiajun Chen, "Top-Rank
Enhanced Listwise Optimization for Statistical Machine Translation", CoNLL
2017 (papers/listwise-top-rank-enhanced.txt).
Each KBest *instance* is one list to rank: with the loop's ``aggregate`` mode
every iteration's k-best list of a sentence is its own instance (the paper's
instance aggregating), with ``merge`` one merged list per sentence
(k-best merging); the tuners work on instances and do not care which.

For a list ``e_1..e_k`` with model scores ``s(e) = w . h(e)`` (eq. 2) and
``eval(e)`` its sentence BLEU+1 (Lin & Och 2004, the paper's metric), the
permutation probability model (eq. 4) under a scoring function ``z`` is::

    P_z(pi) = prod_{j=1..k} exp z(pi(j)) / sum_{t=j..k} exp z(pi(t))

and ``pi_eval``, the ground-truth ranking, sorts the list by BLEU+1
descending; hypotheses with equal BLEU+1 keep their row order, which is the
decoder's k-best order (merged lists: earlier iterations first), so the
ranking is deterministic and ties follow the model that produced the list.
With ``c(j) = (k - j + 1) / sum_{t=1..k} t`` (eq. 6) the losses are:

* ``listnet``, top-one ListNet ("Loss Functions", after Cao et al. 2007), with
  the top-one probabilities ``P_z(e_j) = exp z(e_j) / sum_i exp z(e_i)``::

      L_Net-T = - sum_j P_eval(e_j) log P_s(e_j)

* ``listmle``, ListMLE (eq. 5, Xia et al. 2008)::

      L_MLE = - sum_{j=1..k} log [exp s(pi_eval(j)) / sum_{t=j..k} exp s(pi_eval(t))]

* ``listmle-top5``, top-n ListMLE (Xia et al. 2008; the paper's "Top-Rank
  Enhanced Losses" and Fig. 2, n = 5): the same sum over ``j = 1..n`` only,
  normalisers still over all of ``t = j..k``;
* ``listmle-te``, top-rank enhanced ListMLE ("Top-Rank Enhanced Losses")::

      L_MLE-TE = - sum_{j=1..k} c(j) log [exp s(pi_eval(j)) / sum_{t=j..k} exp s(pi_eval(t))]

* ``listnet-te``, top-rank enhanced ListNet. The paper's form is the
  expectation over all ``k!`` permutations
  ``L_Net-TE = - sum_pi P_eval(pi) sum_j c(j) log q_j(pi)`` with
  ``q_j(pi) = exp s(pi(j)) / sum_{t>=j} exp s(pi(t))``, which the authors
  did not run ("due to the high computation cost"). Its ``j``-th term is the
  cross entropy between the top-one distributions of eval and of the model
  over the hypotheses left after a prefix drawn from ``P_eval``; here that
  prefix is fixed to the most probable one, ``pi_eval``'s::

      L_Net-TE = - sum_j c(j) sum_{t>=j} P^(j)_eval(pi_eval(t)) log P^(j)_s(pi_eval(t))
      P^(j)_z(e) = exp z(e) / sum_{t>=j} exp z(pi_eval(t))

  which costs O(k), is exact for ``j = 1`` (c(1) times top-one ListNet) and
  for ``k <= 2``, and tends to ``L_MLE-TE`` as eval becomes peaked, as the
  paper's form does.

The ListNet targets are ``P_eval`` with ``z = eval_scale * BLEU+1``; the paper
uses BLEU+1 itself (``eval_scale = 1``, BLEU in [0, 1]), a rather flat target
that asks the model's score differences to match BLEU+1 differences.

Optimisation (Algorithm 2): the objective is the total loss over all
lists; mini-batch SGD with ``batch_size = 10`` lists (the paper's) and
AdaDelta (Zeiler 2012) for the step sizes, with Zeiler's ``rho = 0.95`` and
``eps = 1e-6`` (the paper gives none, and AdaDelta has no learning rate);
each batch's gradient is the mean over its lists. Every epoch shuffles the
instances with ``numpy.random.default_rng(seed)`` (``rng.permutation`` once per
epoch, batches are consecutive slices). After each epoch the training corpus
BLEU of the model-best hypotheses (``data.bleu``) is measured, and ``fit``
returns the weights of the epoch with the best BLEU (``BestBLEU`` of
Algorithm 2; the first such epoch on ties). The paper ran 100 epochs for
ListMLE with basic features, 200 with extended and sparse ones and 300 for
ListNet, chosen on its dev set; the defaults are 100 for the ListMLE family
(this engine's dense feature sets are the basic kind; for sparse sets 200 is
the paper's choice) and 300 for the ListNet family.

Losses and gradients are computed in O(k) per list after one sort per fit,
by the numba kernels of :mod:`tuners._listwise_kernels` over the whole KBest
arrays (sparse features through the CSR block).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from minismt.errors import InputError
from minismt.kbest import KBest
from minismt.kbest._kernels import model_scores
from minismt.metrics import bleu_plus_one
from tuners import _listwise_kernels as kernels
from tuners.base import Tuner, TunerTags, register

SELECT = ("best", "last")


class ListwiseTuner(Tuner):
    """Common part of the listwise tuners: one loss of the family, mini-batch AdaDelta.

    The tuning loop aggregates instances for them by default (the paper's
    instance aggregating, the tag ``accumulate="aggregate"``); ``merge`` is the option.

    Subclasses fix the loss: ``soft`` (ListNet's cross entropy with ``P_eval``,
    else ListMLE's likelihood of ``pi_eval``) and the position weights
    (``kernels.WEIGHTS_*``; ``top_n`` is used by ``WEIGHTS_TOP_N``).

    Notes
    -----
    After :meth:`fit`: ``weights_`` (the returned weights), ``history_`` (one
    dict per epoch: ``epoch``, ``loss`` = total loss over all lists at the
    epoch's final weights, ``bleu`` = training corpus BLEU of those weights,
    ``best`` = it beat every earlier epoch), ``best_epoch_`` and ``best_bleu_`` (of
    the returned weights), ``initial_bleu_`` (of ``w0``), ``n_iter_`` (epochs run)
    and ``n_updates_`` (AdaDelta steps).
    """

    tags = TunerTags(accumulate="aggregate")
    soft = False
    weighting = kernels.WEIGHTS_ALL

    epochs: int
    batch_size: int
    rho: float
    eps: float
    select: str
    bleu_options: dict | None
    seed: object

    # ---- parameters ------------------------------------------------------------------------
    def _top_n(self) -> int:
        """Positions weighted by ``WEIGHTS_TOP_N``: 1 makes the soft target top-one ListNet."""
        return 1

    def _eval_scale(self) -> float:
        """Factor of BLEU+1 in ``P_eval`` (soft targets only)."""
        return 1.0

    def _check_params(self) -> None:
        name = type(self).__name__
        if not _is_int(self.epochs) or self.epochs < 1:
            raise InputError(f"{name} epochs={self.epochs!r}", expected="an integer >= 1")
        if not _is_int(self.batch_size) or self.batch_size < 1:
            raise InputError(f"{name} batch_size={self.batch_size!r}", expected="an integer >= 1")
        if not _is_real(self.rho) or not 0 < self.rho < 1:
            raise InputError(f"{name} rho={self.rho!r}", expected="a number in (0, 1)")
        if not _is_real(self.eps) or not self.eps > 0:
            raise InputError(f"{name} eps={self.eps!r}", expected="a finite number > 0")
        if self.select not in SELECT:
            raise InputError(f"{name} select={self.select!r}", expected="'best' or 'last'")

    def _rng(self) -> np.random.Generator:
        if isinstance(self.seed, (bool, float)):
            raise InputError(f"seed={self.seed!r}", expected="None or a non-negative integer")
        try:
            return np.random.default_rng(self.seed)
        except (TypeError, ValueError) as err:
            raise InputError(f"seed={self.seed!r} ({err})",
                             expected="None or a non-negative integer") from None

    # ---- the objective -----------------------------------------------------------------------
    def _prepare(self, data: KBest) -> tuple[np.ndarray, np.ndarray]:
        """Ground-truth order of every instance and the eval scores ``z = eval_scale * BLEU+1``."""
        bleu = bleu_plus_one(data.stats, self.bleu_options)
        order = np.empty(data.n_hypotheses, dtype=np.int64)
        kernels.ground_truth_order(data.offsets, bleu, order)
        return order, self._eval_scale() * bleu

    def _losses(self, offsets, order, scores, evals) -> tuple[np.ndarray, np.ndarray]:
        losses = np.empty(offsets.shape[0] - 1)
        dscores = np.empty(scores.shape[0])
        kernels.losses_at_scores(offsets, order, scores, evals, self.weighting, self._top_n(),
                                 self.soft, losses, dscores)
        return losses, dscores

    def _loss_gradient(self, data: KBest, order, evals, w) -> tuple[np.ndarray, np.ndarray]:
        scores = np.empty(data.n_hypotheses)
        model_scores(data.features, data.indptr, data.indices, data.values, w, scores)
        return self._losses(data.offsets, order, scores, evals)

    def list_losses(self, offsets, scores, bleu) -> tuple[np.ndarray, np.ndarray]:
        """The loss of each list ``offsets[i]:offsets[i+1]`` at model ``scores`` given the BLEU+1
        scores ``bleu`` of its hypotheses, and ``dL_i/ds`` of every row (the kernels' entry point
        without a KBest; arrays are assumed valid)."""
        self._check_params()
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        bleu = np.ascontiguousarray(bleu, dtype=np.float64)
        order = np.empty(bleu.shape[0], dtype=np.int64)
        kernels.ground_truth_order(offsets, bleu, order)
        return self._losses(offsets, order, np.ascontiguousarray(scores, dtype=np.float64),
                            self._eval_scale() * bleu)

    def loss_gradient(self, data: KBest, w) -> tuple[float, np.ndarray]:
        """Total loss over all lists of ``data`` at weights ``w`` and its gradient over ``data.space``."""
        self._check_params()
        w = self.check_data(data, w)
        order, evals = self._prepare(data)
        losses, dscores = self._loss_gradient(data, order, evals, w)
        grad = np.zeros(w.shape[0])
        kernels.transpose_dot(data.features, data.indptr, data.indices, data.values, dscores, grad)
        return float(losses.sum()), grad

    def instance_losses(self, data: KBest, w) -> np.ndarray:
        """The loss of every list (instance) of ``data`` at weights ``w``."""
        self._check_params()
        w = self.check_data(data, w)
        order, evals = self._prepare(data)
        return self._loss_gradient(data, order, evals, w)[0]

    # ---- training ----------------------------------------------------------------------------
    def fit(self, data: KBest, w0) -> np.ndarray:
        """``epochs`` epochs of mini-batch AdaDelta from ``w0``; returns the best epoch's weights."""
        w = self.check_data(data, w0)
        self._check_params()
        rng = self._rng()
        order, evals = self._prepare(data)
        n_weights = w.shape[0]
        mean_sq_grad = np.zeros(n_weights)
        mean_sq_step = np.zeros(n_weights)
        last_step = np.zeros(n_weights, dtype=np.int64)
        counter = np.zeros(1, dtype=np.int64)
        grad = np.zeros(n_weights)
        touched = np.zeros(n_weights, dtype=np.int64)
        is_touched = np.zeros(n_weights, dtype=np.int8)
        top_n = self._top_n()

        self.initial_bleu_ = data.bleu(w)
        history: list[dict] = []
        best, best_bleu, best_epoch = w.copy(), -math.inf, 0
        for epoch in range(1, self.epochs + 1):
            instances = rng.permutation(data.n_instances).astype(np.int64)
            kernels.adadelta_epoch(instances, int(self.batch_size), data.offsets, order,
                                   data.features, data.indptr, data.indices, data.values, evals,
                                   self.weighting, top_n, self.soft, float(self.rho),
                                   float(self.eps), w, mean_sq_grad, mean_sq_step, last_step,
                                   counter, grad, touched, is_touched)
            losses, _ = self._loss_gradient(data, order, evals, w)
            bleu = data.bleu(w)
            improved = bleu > best_bleu
            if improved:
                best, best_bleu, best_epoch = w.copy(), bleu, epoch
            history.append({"epoch": epoch, "loss": float(losses.sum()), "bleu": bleu,
                            "best": bool(improved)})
        if self.select == "last":
            best, best_bleu, best_epoch = w.copy(), history[-1]["bleu"], len(history)

        self.history_ = history
        self.best_epoch_ = best_epoch
        self.best_bleu_ = best_bleu
        self.n_iter_ = len(history)
        self.n_updates_ = int(counter[0])
        self.weights_ = best
        return best


@register("listnet")
class ListNet(ListwiseTuner):
    """Top-one ListNet (Chen et al. 2017, "Loss Functions"; Cao et al. 2007).

    Parameters
    ----------
    epochs : passes over the lists per fit (the paper's 300 for ListNet).
    batch_size : lists per mini-batch (the paper's 10).
    rho, eps : AdaDelta's decay and conditioning constant (Zeiler's 0.95 and 1e-6).
    eval_scale : ``P_eval`` is the softmax of ``eval_scale * BLEU+1`` (1: the paper's).
    bleu_options : keyword arguments of :func:`minismt.metrics.sentence_bleu`; None is
        Lin & Och's BLEU+1, the paper's.
    select : ``"best"``: the epoch with the best training BLEU (Algorithm 2); ``"last"``.
    seed : seeds the instance shuffling (``numpy.random.default_rng``).
    """

    soft = True
    weighting = kernels.WEIGHTS_TOP_N

    def __init__(self, epochs: int = 300, batch_size: int = 10, rho: float = 0.95,
                 eps: float = 1e-6, eval_scale: float = 1.0, bleu_options: dict | None = None,
                 select: str = "best", seed=0):
        self.epochs = epochs
        self.batch_size = batch_size
        self.rho = rho
        self.eps = eps
        self.eval_scale = eval_scale
        self.bleu_options = bleu_options
        self.select = select
        self.seed = seed

    def _eval_scale(self) -> float:
        return float(self.eval_scale)

    def _check_params(self) -> None:
        super()._check_params()
        if not _is_real(self.eval_scale) or not self.eval_scale > 0:
            raise InputError(f"{type(self).__name__} eval_scale={self.eval_scale!r}",
                             expected="a finite number > 0")


@register("listnet-te")
class ListNetTE(ListNet):
    """Top-rank enhanced ListNet: position-weighted ListNet along ``pi_eval`` (see the module doc).

    Parameters as :class:`ListNet`.
    """

    weighting = kernels.WEIGHTS_TOP_RANK


@register("listmle")
class ListMLE(ListwiseTuner):
    """ListMLE (Chen et al. 2017, eq. 5; Xia et al. 2008); with ``top_n``, top-n ListMLE.

    Parameters
    ----------
    epochs : passes over the lists per fit (the paper's 100 for basic features, 200 for
        extended and sparse ones).
    batch_size : lists per mini-batch (the paper's 10).
    rho, eps : AdaDelta's decay and conditioning constant (Zeiler's 0.95 and 1e-6).
    top_n : None for the whole permutation, else only the first ``top_n`` positions
        of ``pi_eval`` count (normalisers still over the whole rest of the list).
    bleu_options : keyword arguments of :func:`minismt.metrics.sentence_bleu`; None is
        Lin & Och's BLEU+1, the paper's.
    select : ``"best"``: the epoch with the best training BLEU (Algorithm 2); ``"last"``.
    seed : seeds the instance shuffling (``numpy.random.default_rng``).
    """

    def __init__(self, epochs: int = 100, batch_size: int = 10, rho: float = 0.95,
                 eps: float = 1e-6, top_n: int | None = None, bleu_options: dict | None = None,
                 select: str = "best", seed=0):
        self.epochs = epochs
        self.batch_size = batch_size
        self.rho = rho
        self.eps = eps
        self.top_n = top_n
        self.bleu_options = bleu_options
        self.select = select
        self.seed = seed

    @property
    def weighting(self) -> int:
        return kernels.WEIGHTS_ALL if self.top_n is None else kernels.WEIGHTS_TOP_N

    def _top_n(self) -> int:
        return 0 if self.top_n is None else int(self.top_n)

    def _check_params(self) -> None:
        super()._check_params()
        if self.top_n is not None and (not _is_int(self.top_n) or self.top_n < 1):
            raise InputError(f"{type(self).__name__} top_n={self.top_n!r}",
                             expected="None or an integer >= 1")


@register("listmle-top5")
class ListMLETop5(ListMLE):
    """Top-n ListMLE with the paper's best ``n = 5`` (Fig. 2). Parameters as :class:`ListMLE`."""

    def __init__(self, epochs: int = 100, batch_size: int = 10, rho: float = 0.95,
                 eps: float = 1e-6, top_n: int | None = 5, bleu_options: dict | None = None,
                 select: str = "best", seed=0):
        super().__init__(epochs=epochs, batch_size=batch_size, rho=rho, eps=eps, top_n=top_n,
                         bleu_options=bleu_options, select=select, seed=seed)


@register("listmle-te")
class ListMLETE(ListwiseTuner):
    """Top-rank enhanced ListMLE, ``L_MLE-TE`` with the cost ``c(j)`` of eq. (6).

    Parameters as :class:`ListMLE` without ``top_n``.
    """

    weighting = kernels.WEIGHTS_TOP_RANK

    def __init__(self, epochs: int = 100, batch_size: int = 10, rho: float = 0.95,
                 eps: float = 1e-6, bleu_options: dict | None = None, select: str = "best",
                 seed=0):
        self.epochs = epochs
        self.batch_size = batch_size
        self.rho = rho
        self.eps = eps
        self.bleu_options = bleu_options
        self.select = select
        self.seed = seed


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(float(value)))


__all__ = ["ListMLE", "ListMLETE", "ListMLETop5", "ListNet", "ListNetTE", "ListwiseTuner"]
