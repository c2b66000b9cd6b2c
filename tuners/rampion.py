"""RAMPION: structured ramp loss minimised by CCCP (Gimpel & Smith 2012), as cdec's ``rampion_cccp``.

Kevin Gimpel and Noah A. Smith, "Structured Ramp Loss Minimization for Machine Translation", NAACL 2012.
With the cost of a hypothesis ``cost(h) = 1 - BLEU+1(h)`` (Lin & Och 2004; :func:`minismt.metrics.sentence_bleu`)
scaled by ``alpha``, the loss of a dev sentence is the ramp loss

    L_i(w) = max_h [w.h + alpha cost(h)] - max_h [w.h - alpha cost(h)]

(the score of the "fear" minus that of the "hope", both over the sentence's k-best list), and RAMPION
minimises ``sum_i L_i(w) + C/2 |w|^2``. The loss is a difference of two convex functions, so it is
minimised by the concave-convex procedure (CCCP, Yuille & Rangarajan 2003): each of ``cccp_iterations``
outer iterations linearises the concave part at the current weights, i.e. fixes every sentence's hope
``h+_i = argmax_h w.h - alpha cost(h)``, and minimises the convex rest by ``ssd_iterations`` passes of
stochastic subgradient descent over the sentences in their order: per sentence, the fear
``h-_i = argmax_h w.h + alpha cost(h)`` under the current weights, then

    w <- (1 - eta C / N) w + eta (h+_i - h-_i)

cdec's inner optimiser and its defaults (``-I 10 -J 5 --eta 1e-4 -C 1 --alpha 10``). Nothing is random:
the same data and start give the same weights. ``fit`` returns the weights after the last pass (what
``rampion_cccp`` writes). On accumulated k-best lists (``TunerTags(accumulate="merge")``, cdec's k-best
repository). The weights are in their own units (the step ``eta`` and the cost scale ``alpha`` are set
for features of log-probability scale), so the loop does not rescale them to a unit L1 norm.
"""

from __future__ import annotations

import numpy as np

from minismt.decode.settings import check_integer
from minismt.errors import InputError, finite_number
from minismt.kbest import KBest
from minismt.metrics import bleu_plus_one, corpus_bleu_from_stats
from tuners import _rampion_kernels as kernels
from tuners.base import Tuner, TunerTags, register


@register("rampion")
class Rampion(Tuner):
    """Structured ramp loss minimisation by CCCP (Gimpel & Smith 2012), cdec's ``rampion_cccp``.

    Parameters
    ----------
    cccp_iterations : CCCP (outer) iterations, each fixing the hopes (cdec ``-I``, T').
    ssd_iterations : stochastic subgradient passes over the sentences per CCCP iteration (cdec ``-J``, T'').
    eta : step size (cdec ``--eta``).
    C : L2 regularisation strength (cdec ``-C``).
    alpha : cost scale: the cost of a hypothesis is ``alpha * (1 - BLEU+1)`` (cdec ``--alpha``).
    bleu_options : keyword arguments of :func:`minismt.metrics.sentence_bleu` for BLEU+1; None is Lin &
        Och's.

    Notes
    -----
    After :meth:`fit`: ``weights_``, ``history_`` (one dict per CCCP iteration: ``iteration``,
    ``ramp_loss`` (the mean of ``L_i`` over the sentences), ``objective`` (the summed loss plus
    ``C/2 |w|^2``), ``bleu`` (corpus BLEU of the model-best hypotheses) and ``hopes_changed`` (how many sentences' hopes
    differ from the previous iteration's; None in the first)),
    ``initial_bleu_``, ``n_iter_``.
    """

    tags = TunerTags(scales_weights=False)

    def __init__(self, cccp_iterations: int = 10, ssd_iterations: int = 5, eta: float = 1e-4, C: float = 1.0,
                 alpha: float = 10.0, bleu_options: dict | None = None):
        self.cccp_iterations = cccp_iterations
        self.ssd_iterations = ssd_iterations
        self.eta = eta
        self.C = C
        self.alpha = alpha
        self.bleu_options = bleu_options

    def _check_params(self) -> None:
        for name in ("cccp_iterations", "ssd_iterations"):
            check_integer(getattr(self, name), name, 1)
        for name in ("eta", "alpha", "C"):
            value = finite_number(getattr(self, name), name)
            if value < 0 or (value == 0 and name != "C"):
                raise InputError(f"{name} is {value!r}", expected="a number > 0" if name != "C" else "a number >= 0")

    def fit(self, data: KBest, w0) -> np.ndarray:
        """Run RAMPION from ``w0`` on the k-best lists ``data``; returns the weights after the last pass."""
        self._check_params()
        w = self.check_data(data, w0)
        offsets = data.offsets
        n = offsets.shape[0] - 1
        arrays = (data.features, data.indptr, data.indices, data.values)
        cost = 1.0 - bleu_plus_one(data.stats, self.bleu_options)
        alpha, eta = float(self.alpha), float(self.eta)
        shrink = 1.0 - eta * float(self.C) / n
        if not shrink > 0:
            raise InputError(f"eta * C / N = {eta * float(self.C) / n:g}", expected="below 1 (a smaller eta or C)")

        def bleu_of(weights):
            return corpus_bleu_from_stats(data.corpus_stats(data.model_best(weights)), smooth="none")

        self.initial_bleu_ = bleu_of(w)
        v, scale = w.copy(), np.ones(1)
        goals = np.empty(n, dtype=np.int64)
        previous = None
        history = []
        for iteration in range(1, self.cccp_iterations + 1):
            kernels.hopes(offsets, *arrays, v, scale[0], cost, alpha, goals)
            for _ in range(self.ssd_iterations):
                kernels.subgradient_pass(offsets, *arrays, v, scale, cost, alpha, goals, eta, shrink)
            current = v * scale[0]
            loss = kernels.ramp_loss(offsets, *arrays, current, cost, alpha)
            history.append({"iteration": iteration, "ramp_loss": loss / n,
                            "objective": loss + 0.5 * float(self.C) * float(current @ current),
                            "bleu": bleu_of(current),
                            "hopes_changed": None if previous is None else int(np.count_nonzero(goals != previous))})
            previous = goals.copy()
        self.weights_ = v * scale[0]
        if not np.all(np.isfinite(self.weights_)):
            raise InputError("RAMPION's weights became NaN or inf", expected="a smaller eta")
        self.history_ = history
        self.n_iter_ = len(history)
        return self.weights_

