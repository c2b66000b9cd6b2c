"""Online hope/fear MIRA (Chiang 2012, "Hope and fear for discriminative training of statistical translation
models", JMLR; cdec's ``kbest_cut_mira``): the dev sentences are decoded as the weights learn.

Each round (one outer iteration of :class:`~tuners.loop.TuningRun`) shuffles the dev sentences into
``shards`` that learn side by side from the round's weights, each in mini-batches of ``batch_size``
sentences (1: every sentence is decoded with the weights its predecessor left, as in cdec). For every sentence
of a decoded batch, from its k-best list:

* the gain of a translation ``h`` is the background BLEU of Chiang et al. (2008), ``B(h) = BLEU(s(h) + bg) R``:
  its statistics added to a pseudo-document ``bg`` of the hopes so far, decayed by ``decay`` at each sentence
  (cdec's ``--pseudo_doc``, Moses kbmira's; the pseudo-document carries over rounds);
* hope ``argmax w.h + B(h)``, fear ``argmax w.h - B(h)`` (cdec's defaults, model plus and minus cost);
* the MIRA step (PA-I): with ``d = h_hope - h_fear`` and ``loss = B(hope) - B(fear) - w.d > 0``,
  ``w += min(C, loss / |d|^2) d`` (``C``: cdec's ``--max_step_size``, 0.001); or, with
  ``optimizer="cutting-plane"`` (cdec's ``-o 3``), the step of a working set of constraints that the fears
  re-found under the stepped weights join (:mod:`tuners._mira_kernels`);

the inner loop is batch MIRA's kernel (:func:`tuners._kbmira_kernels.mira_epoch`) over that batch's lists.
Each shard's weights are averaged over its updates (Chiang 2012, sec. 3.5); the shards' averages are mixed
into the next weights as ORO mixes its shards (Watanabe 2012; Chiang 2012 averages parallel learners too):
``w + rho (mean - w)`` with ``rho`` from an exact line search of corpus BLEU on the round's lists
(``mixing="line-search"``, ties to 1) or ``rho = 1`` (``"average"``).

Hope and fear come from each sentence's k-best list (``select="kbest"``, cdec's ``--k_best_size``) or from its
whole search graph (``select="forest"``, Chiang 2012 sec. 4 searches the forest): the Viterbi derivations under
``w.f(d) +- G(d)``, where ``G`` is the background BLEU linearised at the pseudo-document, ``G(d) = grad B(0) .
s(d)``, an edge-decomposed gain (each edge's n-gram statistics on the forest split by its BLEU state,
matches not clipped: :func:`tuners.minrisk.edge_statistics`); the loss and the step then use the true
background BLEU of the two translations, as in the k-best case. The linearisation is the first-order term of
Chiang's oracle-document BLEU in the sentence's statistics, which are small against the pseudo-document's
(Tromble et al.'s linear BLEU needs corpus-fitted constants instead). On forests the round's weights are mixed
by the exact line search over the round's forests (hypergraph MERT's).
"""

from __future__ import annotations

import copy
import math

import numpy as np

from minismt.errors import InputError
from minismt.hypergraph import ForestData
from minismt.kbest import KBest
from minismt.metrics import MAX_ORDER
from tuners import _kbmira_kernels as kernels
from tuners._mira_kernels import cutting_plane_epoch
from tuners.base import BatchSource, OnlineTuner, register
from tuners.hgmert import line_search as forest_line_search
from tuners.kbmira import BACKGROUND_INIT, _dedup_by_features
from tuners.mert import line_search
from tuners.minrisk import edge_statistics
from tuners.oro import MIXINGS, shuffled_shards


@register("mira")
class OnlineMIRA(OnlineTuner):
    """Online hope/fear MIRA (module docstring).

    Parameters
    ----------
    C : the step cap (cdec ``--max_step_size`` and mira.py's ``--step-size``: 0.001). cdec makes 20 passes over
        dev sets of thousands of sentences; on few sentences and rounds a larger cap learns faster: on a
        20-sentence synthetic dev set, 4 rounds from weights that favour long output took the decoded dev BLEU
        from 23.44 to 23.44, 23.70 and 34.64 with C = 0.001, 0.01 and 0.1.
    decay : the background pseudo-document's decay per sentence (0.999, as batch MIRA).
    batch_size : sentences decoded per step of a shard (1: cdec's sentence-by-sentence learning).
    shards : learners per round, mixed at its end (8, as ORO).
    mixing : ``"line-search"`` or ``"average"``.
    select : ``"kbest"`` (hope and fear from the k-best list) or ``"forest"`` (from the whole search graph).
    optimizer : ``"pa"`` (cdec's ``-o 2``, the default of its ``mira.py``: one hope/fear constraint per sentence,
        PA-I) or ``"cutting-plane"`` (``-o 3``: fears re-found under the stepped weights join a working set of
        constraints whose programme SMO solves, :mod:`tuners._mira_kernels`; with ``select="kbest"``).
    max_constraints : the cutting plane's most constraints per sentence (cdec's ``MAX_SMO``, 10).
    sparse_epsilon : sparse feature differences at most this small are left out of ``d`` (as batch MIRA).
    seed : shuffles the sentences into shards and batches each round.

    Notes
    -----
    After :meth:`fit`: ``weights_``, ``rho_``, ``state_`` (the pseudo-document and the step count, carried to
    the next round) and ``history_`` (one dict per lock step: updates, mean loss of the updates).
    """

    def __init__(self, C: float = 0.001, decay: float = 0.999, batch_size: int = 1, shards: int = 8,
                 mixing: str = "line-search", select: str = "kbest", optimizer: str = "pa", max_constraints: int = 10,
                 sparse_epsilon: float = 1e-6, seed: int = 0):
        self.set_params(**{name: value for name, value in locals().items() if name != "self"})

    def _check_params(self) -> None:
        for name, low, inclusive in (("C", 0.0, False), ("decay", 0.0, False), ("sparse_epsilon", 0.0, True)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
                    value < low or (value == low and not inclusive):
                raise InputError(f"{name}={value!r}", expected=f"a finite number {'>=' if inclusive else '>'} {low:g}")
        if self.decay > 1:
            raise InputError(f"decay={self.decay!r}", expected="a number in (0, 1]")
        for name in ("batch_size", "shards"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InputError(f"{name}={value!r}", expected="an integer >= 1")
        if self.mixing not in MIXINGS:
            raise InputError(f"mixing={self.mixing!r}", expected=" or ".join(map(repr, MIXINGS)))
        if self.select not in ("kbest", "forest"):
            raise InputError(f"select={self.select!r}", expected="'kbest' or 'forest'")
        if self.optimizer not in ("pa", "cutting-plane"):
            raise InputError(f"optimizer={self.optimizer!r}", expected="'pa' or 'cutting-plane'")
        if self.optimizer == "cutting-plane" and self.select != "kbest":
            raise InputError(f"optimizer='cutting-plane' with select={self.select!r}",
                             expected="select='kbest': the cutting plane re-finds fears in the k-best list")
        if isinstance(self.max_constraints, bool) or not isinstance(self.max_constraints, (int, np.integer)) or \
                self.max_constraints < 1:
            raise InputError(f"max_constraints={self.max_constraints!r}", expected="an integer >= 1")

    def fit(self, source: BatchSource, w0) -> np.ndarray:
        """One round over the dev set from ``w0``, the pseudo-document continuing from :attr:`start_state`."""
        self._check_params()
        w_round = self.check_start(source, w0)
        state = self.start_state or {}
        background = np.array(state.get("background", BACKGROUND_INIT), dtype=np.float64)
        step = int(state.get("step", 0))
        shard_batches = shuffled_shards(source.n_sentences, self.shards, self.batch_size, self.seed)
        learners = [_Learner(w_round, background) for _ in shard_batches]
        seen: list[KBest] = []
        history = []
        n_steps = max(len(b) for b in shard_batches) if shard_batches else 0
        seen_forests, seen_ids = [], []
        for j in range(n_steps):
            active = [s for s, batches in enumerate(shard_batches) if j < len(batches)]
            requests = [(learners[s].weights(len(source.space)), shard_batches[s][j]) for s in active]
            updates, loss = 0, 0.0
            if self.select == "forest":
                for s, forests in zip(active, source.decode_forests(requests)):
                    done, summed = learners[s].learn_forests(forests, shard_batches[s][j], source.references, self)
                    updates += done
                    loss += summed
                    seen_forests.extend(forests)
                    seen_ids.extend(int(i) for i in shard_batches[s][j])
            else:
                lists = source.decode(requests)
                for s, batch in zip(active, lists):
                    done, summed = learners[s].learn(batch, self)
                    updates += done
                    loss += summed
                seen.extend(lists)
            history.append({"step": step + j + 1, "updates": updates, "loss": loss / updates if updates else 0.0})
        dim = len(source.space)
        averages = [learner.average(dim) for learner in learners]
        w_round = np.concatenate([w_round, np.zeros(dim - w_round.shape[0])])
        averaged = np.mean(averages, axis=0) if averages else w_round
        rho = 1.0
        if self.mixing == "line-search" and seen:
            rho, _ = line_search(KBest.aggregate(seen), w_round, averaged - w_round, 0.0, 1.0, prefer=1.0)
        elif self.mixing == "line-search" and seen_forests:
            data = ForestData(seen_forests, np.asarray(seen_ids), source.references)
            rho, _ = forest_line_search(data, w_round, averaged - w_round, 0.0, 1.0, prefer=1.0)
        self.rho_ = rho
        self.weights_ = w_round + rho * (averaged - w_round)
        background = np.mean([learner.background for learner in learners], axis=0) if learners else background
        self.state_ = {"step": step + n_steps, "background": [float(x) for x in background]}
        self.history_ = history
        return self.weights_


class _Learner:
    """One shard's MIRA: its weights, the running sum for their average (kept lazily, as batch MIRA) and its
    pseudo-document."""

    def __init__(self, w0: np.ndarray, background: np.ndarray):
        self.w = w0.copy()
        self.totals = w0.copy()
        self.last = np.zeros(w0.shape[0], dtype=np.int64)
        self.counter = np.zeros(1, dtype=np.int64)
        self.background = background.copy()

    def _grow(self, dim: int) -> None:
        extra = dim - self.w.shape[0]
        if extra > 0:  # sparse features met in this batch: weight 0 so far
            self.w = np.concatenate([self.w, np.zeros(extra)])
            self.totals = np.concatenate([self.totals, np.zeros(extra)])
            self.last = np.concatenate([self.last, np.full(extra, self.counter[0], dtype=np.int64)])

    def weights(self, dim: int) -> np.ndarray:
        self._grow(dim)
        return self.w.copy()

    def learn(self, batch: KBest, tuner: OnlineMIRA) -> tuple[int, float]:
        """MIRA over one decoded batch's lists, in their order; returns the updates and their summed loss."""
        self._grow(len(batch.space))
        train = _dedup_by_features(batch)
        order = np.flatnonzero(np.diff(train.offsets) > 0).astype(np.int64)
        dim = self.w.shape[0]
        arrays = (order, train.offsets, train.features, train.indptr, train.indices, train.values, train.stats,
                  self.w, self.totals, self.last, self.counter, self.background, float(tuner.C), float(tuner.decay),
                  False)
        if tuner.optimizer == "cutting-plane":
            updates, _, loss = cutting_plane_epoch(
                *arrays, int(tuner.max_constraints), np.zeros(dim), np.zeros(dim, dtype=np.int8),
                np.zeros(dim, dtype=np.int64), np.zeros(dim), np.zeros(dim, dtype=np.int8),
                np.zeros(dim, dtype=np.int64))
        else:
            updates, _, loss = kernels.mira_epoch(*arrays, float(tuner.sparse_epsilon), np.zeros(dim),
                                                  np.zeros(dim, dtype=np.int8), np.zeros(dim, dtype=np.int64))
        return int(updates), float(loss)

    def learn_forests(self, forests, sentences, references, tuner: OnlineMIRA) -> tuple[int, float]:
        """MIRA over one decoded batch's forests: hope and fear by Viterbi under ``w.f +- G`` (module docstring),
        the step with their true background BLEU; returns the updates and their summed loss."""
        updates, total = 0, 0.0
        for forest, sentence in zip(forests, sentences):
            sentence = int(sentence)
            self._grow(len(forest.space))
            split, _, counts, lengths = edge_statistics(forest, sentence, references)
            scores = split.edge_scores(self.w)
            best = _viterbi(split, scores)
            length = len(best.text.split())
            reference = float(lengths[np.argmin(np.abs(lengths - length))])
            gains = counts @ _background_gradient(self.background, reference)
            hope, fear = _viterbi(split, scores + gains), _viterbi(split, scores - gains)
            stats = references.stats([sentence, sentence], [hope.text, fear.text]).astype(np.float64)
            hope_bleu = kernels.background_bleu(stats, 0, self.background)
            fear_bleu = kernels.background_bleu(stats, 1, self.background)
            if hope.text != fear.text and hope_bleu > fear_bleu:
                dim = self.w.shape[0]
                d = hope.dense()[:dim] - fear.dense()[:dim]
                d[np.abs(d) <= tuner.sparse_epsilon] = 0.0
                loss = hope_bleu - fear_bleu - float(self.w @ d)
                if loss > 0.0:
                    norm = float(d @ d)
                    eta = min(tuner.C, loss / norm) if norm > 0 else tuner.C
                    self.counter[0] += 1
                    n = self.counter[0]
                    self.totals += (n - self.last) * self.w + eta * d
                    self.w += eta * d
                    self.last[:] = n
                    updates += 1
                    total += loss
            self.background = self.background * tuner.decay + stats[0]
        return updates, total

    def average(self, dim: int) -> np.ndarray:
        """The weights averaged over this shard's updates (its last weights plus the start, as batch MIRA)."""
        self._grow(dim)
        if not self.counter[0]:
            return self.w.copy()
        kernels.fix_totals(self.w, self.totals, self.last, self.counter)
        return self.totals / self.counter[0]


def _viterbi(forest, scores: np.ndarray):
    """The Viterbi derivation of ``forest`` under the edge scores ``scores``."""
    scored = copy.copy(forest)
    scored.scores = scores
    return scored.viterbi()


def _background_gradient(background: np.ndarray, reference: float) -> np.ndarray:
    """``grad B(0)``: the derivative of the background BLEU ``BLEU(s + bg) R`` (:func:`kernels.background_bleu`) in
    a sentence's statistics ``[m1, t1, ..., m4, t4]`` at none, the sentence's reference length ``reference``
    added to the pseudo-document's."""
    matches, totals = background[0:2 * MAX_ORDER:2], background[1:2 * MAX_ORDER:2]
    ref = background[2 * MAX_ORDER] + reference
    if np.any(matches <= 0) or np.any(totals <= 0):
        return np.zeros(2 * MAX_ORDER)
    log_bleu = float(np.mean(np.log(matches) - np.log(totals)))
    short = totals[0] < ref
    if short:
        log_bleu += 1.0 - ref / totals[0]
    value = math.exp(log_bleu) * ref
    gradient = np.zeros(2 * MAX_ORDER)
    gradient[0::2] = value / (MAX_ORDER * matches)
    gradient[1::2] = -value / (MAX_ORDER * totals)
    if short:
        gradient[1] += value * ref / totals[0] ** 2
    return gradient
