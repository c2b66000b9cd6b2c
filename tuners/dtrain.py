"""dtrain: distributed pairwise ranking SGD with iterative parameter mixing and l1/l2 feature selection
(Simianer, Riezler & Dyer 2012), as cdec's ``dtrain`` with its ``parallelize.rb`` and ``lplp.rb``.

Patrick Simianer, Stefan Riezler and Chris Dyer, "Joint Feature Selection in Distributed Stochastic Learning
for Large-Scale Discriminative Training in SMT", ACL 2012. The sentences are split into ``shards``; in each
epoch every shard learns on its own, from the epoch's weights ``v``, sentence by sentence: the sentence is
decoded with the shard's current weights into a k-best list, each hypothesis is scored by a per-sentence
BLEU (dtrain's ``stupid_bleu`` by default), training pairs are sampled from the list (``XYX``: the top 10%
against the middle 80% and the bottom 10%, the middle against the bottom), and for each pair ``(x1, x2)``
with ``BLEU(x1) > BLEU(x2)`` the pairwise hinge loss ``(margin - w.(x1 - x2))_+`` takes a stochastic
gradient step ``w <- w + eta (x1 - x2)`` when the model ranks the pair wrong or within ``loss_margin`` (the
margin perceptron; ``loss_margin = 0`` is the plain perceptron, ``gamma`` > 0 adds dtrain's L2 term). After
the epoch the shards' weight vectors are stacked into a matrix ``W`` (shards x features), the ``select_k``
features whose columns have the largest l2 norm (or ``l1``, ``linfty``, ``l0``: non-zero in every shard) are
kept, and ``v`` becomes the shards' mean of those columns, 0 elsewhere (iterative parameter mixing with
l1/l2-regularised feature selection, the paper's Algorithm 4; without selection, K above the number of
features, it is plain parameter mixing).

How the shards run: in lock step, every step decoding the next sentence of each shard with that shard's
weights in one call to the dev decoder, which spreads the sentences over its executor (local processes, or
a Dask cluster with ``minismt tune --dask-scheduler``); the updates, a few thousand pair differences per
sentence, are made in the driver by :mod:`tuners._dtrain_kernels`. A shard's weights depend on its own
sentences only, so the mixed weights are the same however many processes decode. One :meth:`fit` is one
epoch (one outer iteration of :class:`~tuners.loop.TuningRun`), which decodes the whole "dev" set with the
mixed weights: train on a training subset with ``minismt tune --tuner dtrain --dev-src SUBSET ...``.

Defaults are those of cdec's distributed example (``training/dtrain/examples/parallelized/dtrain.ini`` and
``parallelize.rb``): k = the dev decoder's k-best size (100, distinct strings, dtrain's ``filter=uniq``),
``learning_rate`` 1e-4, ``loss_margin`` 1, ``gamma`` 0, ``pair_sampling`` XYX with ``hi_lo`` 0.1,
``scorer`` stupid_bleu with N = 4, selection ``l2`` keeping 100,000 features, shards in the input's order
(``randomize`` shuffles them once by the seed, ``reshard`` every epoch). Where cdec's binary departs from the
paper we follow the paper and say so: its XYX leaves out the middle-against-bottom pairs (the bound of that
loop is computed from the wrong end), and its PRO sampling keeps pairs in k-best order, so that the worse
hypothesis of a pair can be the one moved up; here XYX has all three blocks and every pair is (better,
worse). Pairs of equal score are never taken. dtrain's options for the non-distributed learner (per-coordinate
rates, l1 clipping, batch updates, rescaling, averaging over epochs, forest sampling) are not built.
"""

from __future__ import annotations

import math

import numpy as np

from minismt.errors import InputError, finite_number
from minismt.kbest import KBest
from minismt.kbest import _kernels as kbest_kernels
from tuners import _dtrain_kernels as K
from tuners.base import BatchSource, OnlineTuner, TunerTags, register

SCORERS = {"stupid_bleu": K.STUPID_BLEU, "bleu": K.BLEU, "smooth_bleu": K.SMOOTH_BLEU}
SAMPLINGS = {"all": K.ALL_PAIRS, "XYX": K.XYX, "PRO": K.PRO}
NORMS = ("l2", "l1", "linfty", "l0")


def make_shards(order: np.ndarray, shards: int) -> list[np.ndarray]:
    """``order`` (sentence indices) cut into ``shards`` consecutive blocks of ``round(n / shards)`` sentences,
    what is left over joining the last one, as ``parallelize.rb`` does (fewer shards when the blocks run out)."""
    n = order.shape[0]
    size = int(math.floor(n / shards + 0.5))
    blocks = []
    for z in range(shards):
        block = order[z * size:(z + 1) * size] if size else order[:0]
        if block.shape[0] == 0:
            break
        blocks.append(block)
    if blocks and shards * size < n:
        blocks[-1] = np.concatenate([blocks[-1], order[shards * size:]])
    return blocks


def column_norms(stacked: np.ndarray, norm: str) -> np.ndarray:
    """Per feature (column of the shards x features matrix), the norm ``lplp.rb`` selects by: ``l2``, ``l1``,
    ``linfty``, or ``l0`` (1 when the weight is non-zero in every shard, else 0)."""
    magnitude = np.abs(stacked)
    if norm == "l2":
        return np.sqrt((stacked * stacked).sum(axis=0))
    if norm == "l1":
        return magnitude.sum(axis=0)
    if norm == "linfty":
        return magnitude.max(axis=0)
    return (magnitude > 0).all(axis=0).astype(np.float64)


def select_and_mix(stacked: np.ndarray, select_k: int, norm: str = "l2") -> tuple[np.ndarray, int]:
    """Iterative parameter mixing with feature selection (Simianer et al. 2012, Algorithm 4, ``lplp.rb
    <norm> select_k K``): the mean over the shards (rows) of the ``select_k`` columns of largest norm among
    those non-zero in some shard (ties: the lower index first), 0 in every other column. Returns the mixed
    weights and the number of features kept."""
    norms = column_norms(stacked, norm)
    candidates = np.flatnonzero(np.abs(stacked).max(axis=0) > 0)
    ranked = candidates[np.argsort(-norms[candidates], kind="mergesort")]
    kept = np.sort(ranked[:select_k])
    mixed = np.zeros(stacked.shape[1])
    mixed[kept] = stacked[:, kept].sum(axis=0) / stacked.shape[0]
    return mixed, int(kept.shape[0])


@register("dtrain")
class DTrain(OnlineTuner):
    """dtrain (Simianer, Riezler & Dyer 2012): sharded pairwise ranking SGD, parameter mixing and l1/l2
    feature selection after every epoch; see the module docstring. The parameters have cdec's names.

    Parameters
    ----------
    shards : how many parts the sentences are split into (``parallelize.rb -s``).
    learning_rate : the step ``eta`` of each pair's update.
    loss_margin : update also correctly ranked pairs whose model scores are closer than this (0: perceptron).
    gamma : dtrain's L2 term (0: none).
    pair_sampling : ``"XYX"``, ``"all"`` or ``"PRO"``.
    hi_lo : XYX's top and bottom part, in (0, 0.5].
    pair_threshold : the smallest score difference of a pair (0: any difference).
    max_pairs : at most this many pairs considered per sentence (None: no limit).
    scorer : ``"stupid_bleu"``, ``"bleu"`` or ``"smooth_bleu"`` (:func:`tuners._dtrain_kernels.sentence_scores`).
    N : the BLEU order, 1-4.
    select_k : features kept after each epoch (``lplp.rb ... select_k K``).
    select_norm : ``"l2"``, ``"l1"``, ``"linfty"`` or ``"l0"``.
    randomize : shuffle the sentences into shards by ``seed`` (``-z``); ``reshard``: again every epoch (``-y``).
    seed : the shuffles' seed.

    Notes
    -----
    After :meth:`fit`: ``weights_``, ``state_`` (``{"epoch": t}``), ``history_`` (the epoch's counts: pairs,
    rank errors and margin violations per sentence, the mean score of the shards' 1-bests, the non-zero
    features before selection and those kept) and ``report_`` (one line of it, which the tuning loop logs).
    """

    tags = TunerTags(fits_on="decoder", scales_weights=False, accumulate="none")
    """Online, in the weights' own units (the margin and the step set them); the loop keeps no k-best lists
    across epochs (dtrain fits on its own decodes; merged over 3 epochs of 10,000 training sentences they held
    1.9M hypotheses, and with sparse features the first epoch's 1M made a 0.44 GB checkpoint)."""

    def __init__(self, shards: int = 2, learning_rate: float = 1e-4, loss_margin: float = 1.0, gamma: float = 0.0,
                 pair_sampling: str = "XYX", hi_lo: float = 0.1, pair_threshold: float = 0.0,
                 max_pairs: int | None = None, scorer: str = "stupid_bleu", N: int = 4, select_k: int = 100_000,
                 select_norm: str = "l2", randomize: bool = False, reshard: bool = False, seed: int = 0):
        self.shards = shards
        self.learning_rate = learning_rate
        self.loss_margin = loss_margin
        self.gamma = gamma
        self.pair_sampling = pair_sampling
        self.hi_lo = hi_lo
        self.pair_threshold = pair_threshold
        self.max_pairs = max_pairs
        self.scorer = scorer
        self.N = N
        self.select_k = select_k
        self.select_norm = select_norm
        self.randomize = randomize
        self.reshard = reshard
        self.seed = seed

    def _check_params(self) -> None:
        for name, allowed in (("pair_sampling", SAMPLINGS), ("scorer", SCORERS), ("select_norm", NORMS)):
            if getattr(self, name) not in allowed:
                raise InputError(f"{name}={getattr(self, name)!r}", expected="one of " + ", ".join(allowed))
        for name, low in (("shards", 1), ("select_k", 1), ("N", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise InputError(f"{name}={value!r}", expected=f"an integer >= {low}")
        if self.N > 4:
            raise InputError(f"N={self.N}", expected="an order from 1 to 4")
        if self.max_pairs is not None and (isinstance(self.max_pairs, bool)
                                           or not isinstance(self.max_pairs, (int, np.integer)) or self.max_pairs < 1):
            raise InputError(f"max_pairs={self.max_pairs!r}", expected="an integer >= 1, or None")
        for name in ("learning_rate", "loss_margin", "gamma", "pair_threshold", "hi_lo"):
            value = finite_number(getattr(self, name), name)
            if value < 0 or (value == 0 and name in ("learning_rate", "hi_lo")):
                raise InputError(f"{name}={value}", expected="a number > 0" if name in ("learning_rate", "hi_lo")
                                 else "a number >= 0")
        if self.hi_lo > 0.5:
            raise InputError(f"hi_lo={self.hi_lo}", expected="a part of the list in (0, 0.5]")

    def shard_plan(self, n_sentences: int, epoch: int) -> list[np.ndarray]:
        """The sentences of each shard in the epoch ``epoch`` (from 0)."""
        order = np.arange(n_sentences)
        if self.randomize:
            order = np.random.default_rng([int(self.seed), epoch if self.reshard else 0]).permutation(n_sentences)
        return make_shards(order, int(self.shards))

    def learn(self, w: np.ndarray, kbest: KBest, counts: np.ndarray) -> tuple[np.ndarray, float]:
        """The weights after dtrain's updates from ``kbest`` (one or more sentences' k-best lists, each
        scored with the weights ``w`` it was decoded with), and the summed score of the model's 1-bests."""
        dim = len(kbest.space)
        w = np.concatenate([w, np.zeros(dim - w.shape[0])]) if w.shape[0] < dim else w.copy()
        model = np.empty(kbest.n_hypotheses)
        kbest_kernels.model_scores(kbest.features, kbest.indptr, kbest.indices, kbest.values, w, model)
        gold = np.empty(kbest.n_hypotheses)
        K.sentence_scores(kbest.stats, SCORERS[self.scorer], int(self.N), gold)
        longest = int(np.diff(kbest.offsets).max()) if kbest.n_instances else 0
        room = max(longest * (longest - 1) // 2, K.PRO_CANDIDATES)
        first, second = np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64)
        limit = -1 if self.max_pairs is None else int(self.max_pairs)
        best_score = 0.0
        for i in range(kbest.n_instances):
            lo, hi = int(kbest.offsets[i]), int(kbest.offsets[i + 1])
            if hi == lo:
                continue
            best_score += float(gold[lo + int(np.argmax(model[lo:hi]))])
            K.sentence_update(lo, hi, kbest.features, kbest.indptr, kbest.indices, kbest.values, gold, model, w,
                              float(self.learning_rate), float(self.gamma), float(self.loss_margin),
                              SAMPLINGS[self.pair_sampling], float(self.hi_lo), float(self.pair_threshold), limit,
                              first, second, counts)
        return w, best_score

    def fit(self, source: BatchSource, w0) -> np.ndarray:
        """One epoch from ``w0``: every shard learns from ``w0`` over its sentences, then the shards' weights
        are mixed over the selected features."""
        self._check_params()
        w_epoch = self.check_start(source, w0)
        epoch = int((self.start_state or {}).get("epoch", 0))
        plan = self.shard_plan(source.n_sentences, epoch)
        weights = [w_epoch.copy() for _ in plan]
        counts = np.zeros(K.N_COUNTS, dtype=np.int64)
        best_score = 0.0
        for j in range(max((len(shard) for shard in plan), default=0)):
            active = [z for z, shard in enumerate(plan) if j < len(shard)]
            lists = source.decode([(weights[z], [int(plan[z][j])]) for z in active])
            for z, kbest in zip(active, lists):
                weights[z], score = self.learn(weights[z], kbest, counts)
                best_score += score
        dim = len(source.space)
        stacked = np.stack([np.concatenate([w, np.zeros(dim - w.shape[0])]) for w in weights]) if weights \
            else w_epoch[None, :]
        nonzero = int(np.count_nonzero(np.abs(stacked).max(axis=0)))
        mixed, kept = select_and_mix(stacked, int(self.select_k), self.select_norm)
        n = max(source.n_sentences, 1)
        self.history_ = {"epoch": epoch + 1, "shards": len(plan), "pairs_per_sentence": counts[0] / n,
                         "rank_errors_per_sentence": counts[1] / n, "margin_violations_per_sentence": counts[2] / n,
                         "onebest_score": best_score / n, "nonzero_features": nonzero, "kept_features": kept}
        self.report_ = (f"dtrain epoch {epoch + 1}: {len(plan)} shards, {counts[0] / n:.1f} pairs, "
                        f"{counts[1] / n:.1f} rank errors and {counts[2] / n:.1f} margin violations a sentence, "
                        f"1-best {self.scorer} {best_score / n:.4f}; features kept {kept} of {nonzero} non-zero "
                        f"({self.select_norm}, select_k {self.select_k})")
        self.state_ = {"epoch": epoch + 1}
        self.weights_ = mixed
        return mixed
