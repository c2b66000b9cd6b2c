"""The step search: how far a tuning iteration moves towards its tuner's weights, by a line search on the
dev set's search graphs.

An n-best tuner's weights ``w'`` are the best (for its objective) on the k-best lists decoded so far, and
those lists hold only translations the decoder found near the weights they were decoded with. Far from
them the lists say nothing of what the search will prefer: on Multi30k de-en trained on 3,000 pairs with
dev sentences of 38 words, MERT's first weights put the LM at 0.001 of their L1 norm, reach 32.35 BLEU on
the 100-best lists and decode to 6.70 (31.35 at the start). The search graph of each sentence holds
every translation the search kept, far more than the list: the Viterbi translations of the graphs under
``w'`` score 22.99, and along the segment from ``w_t`` to ``w'`` the graphs' BLEU follows the decoded
BLEU (31.45/31.51, 31.67/31.70, 32.04/32.19 at a quarter, half and three quarters of the step).

So the run moves to ``w_t + rho (w' - w_t)`` with ``rho`` in ``[0, 1]`` maximising the corpus BLEU of the
search graphs' Viterbi translations along the segment, found exactly over every derivation by the
envelope semiring (the lattice line search of Macherey et al. 2008, on hypergraphs Kumar et al. 2009;
:func:`tuners.hgmert.line_search`): the mixing line search of Watanabe (2012)'s ORO, on the search
graphs instead of the k-best lists. Of equally good points the one nearest to ``rho = 1`` (the tuner's
own step) wins. At ``rho = 0`` the graphs' Viterbi translations are the decoded 1-best, so the chosen
point never scores below the dev BLEU of ``w_t`` on the graphs.

The graphs are pruned to :data:`EDGES_PER_REFERENCE_WORD` edges per reference word by max-marginal under
``w_t`` (Moses' ``kbmira --hg-prune``), in the decoding workers: on the setting above a line search then
takes 0.9 s instead of 6.9 s over the whole graphs (4.35M edges), finds the same point (rho 0.856 against
0.858) and still sees the fall of the full step (29.20).

The tuning loop (:class:`tuners.loop.TuningRun`) compares ``w_t`` and ``w'`` scaled to one L1 norm, so that
``rho`` is the share of the turn from one direction to the other; and when it cuts a step short, the
graphs' best translations under ``w'`` join the merged k-best list, so that the next fit sees what ``w'``
would choose (as a decode at ``w'`` would show it) instead of proposing it again unseen.

The graphs are still those of ``w_t``: far enough from it the search at the chosen point prunes otherwise
and can find worse translations than the graphs promise. So the loop then checks the step where it is
judged, on the decoded dev BLEU (``accept="decoded"``, :data:`ACCEPTS`): a step whose decode scores below
the weights it started from is halved and decoded again, up to :data:`BACKTRACKS` times, and after that the
iteration goes on from the weights it started from (decoded again, so that its lists and graphs are there):
the backtracking line search on the objective itself (Nocedal & Wright 2006, sec. 3.1, with the sufficient
decrease asked for being none). Every trial's k-best list joins the accumulated lists (what the search does
at those weights), so the next fit sees what it would choose there. With a deterministic decoder no decoded
iteration is then below the one before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minismt.hypergraph import ForestData
from minismt.metrics import corpus_bleu_from_stats, length_ratio
from tuners import hgmert

EDGES_PER_REFERENCE_WORD = 50
"""The step search's forests keep this many edges per reference word (Moses' ``--hg-prune`` default)."""

STEP_SEARCHES = ("forest", "none")

ACCEPTS = ("decoded", "any")
"""``"decoded"``: a step is kept only when its decoded dev BLEU is not below that of the weights it started
from (else it is halved, see the module docstring); ``"any"``: every step is kept, as the loop was before."""
BACKTRACKS = 3
"""Halvings of a rejected step before the iteration goes back to the weights it started from: the step's
last trial is an eighth of it, and an iteration decodes at most :data:`BACKTRACKS` + 2 times."""


@dataclass(frozen=True)
class Step:
    """The outcome of a step search: ``rho`` of the tuner's step taken, the search graphs' corpus BLEU and
    output/reference length ratio there and at the tuner's own weights (``rho = 1``)."""

    rho: float
    bleu: float
    length_ratio: float
    full_bleu: float
    full_length_ratio: float


def step_search(data: ForestData, w_now, w_next, smooth: str = "exp") -> Step:
    """The best ``rho`` in ``[0, 1]`` for ``w_now + rho (w_next - w_now)`` on the forests of ``data``
    (decoded under ``w_now``), with the forests' BLEU and length ratio there and at ``w_next``."""
    w_now = data.weight_array(w_now)
    w_next = data.weight_array(w_next)
    rho, _ = hgmert.line_search(data, w_now, w_next - w_now, 0.0, 1.0, prefer=1.0, smooth=smooth)
    rho = min(1.0, max(0.0, rho))
    at = data.stats(w_now + rho * (w_next - w_now)).sum(axis=0, dtype=np.int64)
    full = at if rho == 1.0 else data.stats(w_next).sum(axis=0, dtype=np.int64)
    return Step(rho, corpus_bleu_from_stats(at, smooth=smooth), length_ratio(at),
                corpus_bleu_from_stats(full, smooth=smooth), length_ratio(full))


def mixed(w_now, w_next, rho: float) -> np.ndarray:
    """``w_now + rho (w_next - w_now)`` (``w_next`` when ``rho`` is 1: no rounding of the tuner's weights)."""
    w_next = np.asarray(w_next, dtype=np.float64)
    if rho == 1.0:
        return w_next
    w_now = np.asarray(w_now, dtype=np.float64)
    if w_now.shape[0] < w_next.shape[0]:  # sparse features met since w_now was set have weight 0 there
        w_now = np.concatenate([w_now, np.zeros(w_next.shape[0] - w_now.shape[0])])
    return w_now + rho * (w_next - w_now)
