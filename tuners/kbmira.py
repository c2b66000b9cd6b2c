"""Batch k-best MIRA (Cherry & Foster 2012), as Moses' ``kbmira``.

Colin Cherry and George Foster, "Batch Tuning Strategies for Statistical
Machine Translation", NAACL 2012, Sec. 3 and Algorithm 1 (batch MIRA over
k-best lists); the background BLEU of hope/fear selection from David Chiang,
Yuval Marton and Philip Resnik, "Online Large-Margin Training of Syntactic and
Structural Translation Features", EMNLP 2008. For ``epochs`` passes over the
dev sentences (shuffled every epoch), each sentence's k-best list gives

* the background BLEU of a hypothesis ``h``, ``B(h) = BLEU(s(h) + bg) * R``:
  BLEU (no smoothing, brevity penalty) of its statistics ``s(h)`` added to a
  background pseudo-document ``bg`` and scaled by that sum's reference length
  ``R`` (Chiang et al. 2008; Moses' ``calculateSentenceLevelBackgroundScore``
  with its BLEU scorer); ``bg`` starts with every statistic at 1 (Moses' current
  kbmira; its 2012 version started from ``[4 4 3 3 2 2 1 1 4]``);
* hope ``h+ = argmax_h w.h + B(h)`` and fear ``h- = argmax_h w.h - B(h)``
  (Cherry & Foster's hope and fear; the first hypothesis wins ties);
* if ``h+`` and ``h-`` differ and ``B(h+) > B(h-)``: the MIRA step (Crammer et
  al. 2006, PA-I) with ``d = h+ - h-`` and ``loss = B(h+) - B(h-) - w.d``:
  if ``loss > 0`` then ``w += eta d`` with ``eta = min(C, loss / |d|^2)``; and
  the background becomes ``decay * bg + s(h+)`` (``model_bg``: the statistics
  of the model-best instead, Moses' ``--model-bg``).

The weights are averaged over updates as Moses' ``MiraWeightVector`` does: the
running sum starts at ``w0`` and adds the weights after every update, and the
average is that sum divided by the number of updates, ``(w0 + w1 + ... + wn) / n``
(just ``w0`` before the first update). After each epoch the corpus BLEU (no
smoothing, as Moses' BLEU) of the model-best hypotheses under the averaged
weights is measured, and ``fit`` returns the averaged weights of the first
epoch that reached the best BLEU (strictly better than every earlier epoch and
than 0), the weights Moses' kbmira writes; if no epoch scores above 0 (Moses
then writes no file) it returns ``w0``.

As Moses' ``HypPackEnumerator`` (with its de-duplication bug fixed, the
"kbmira-dedupfix" of ``../shared/fixtures/moses``) hypotheses of a sentence
with the same feature vector as an earlier one are dropped before training.
The sentence order of an epoch comes from ``numpy.random.default_rng(seed)``;
``shuffle_rng="moses"`` instead replays glibc's ``srand(seed)``/``rand()`` with
libstdc++'s ``std::random_shuffle``, applied cumulatively before every pass
over the data including the evaluation passes, which is the order of Moses'
kbmira ``-r seed`` on Linux: on the Moses fixtures this reproduces every
epoch's BLEU of ``kbmira-dedupfix`` to the 6 digits Moses prints and its
weights to about 1e-6 (Moses computes in single precision, this module in double).

The inner loop is a numba kernel over the KBest arrays
(:mod:`tuners._kbmira_kernels`); the averaged weights are kept lazily, so an
update costs the number of dense features plus the sparse features of the
hope and fear, whatever the size of the feature space.

Moses' weights file (``kbmira -o``: ``F<i> value`` for dense feature ``i``,
then ``name value`` for sparse features) is written and read by
:func:`plugins.moses.mertfiles.write_kbmira_weights` and
:func:`plugins.moses.mertfiles.read_kbmira_weights`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from minismt.errors import InputError
from minismt.kbest import KBest
from minismt.metrics import corpus_bleu_from_stats
from tuners import _kbmira_kernels as kernels
from tuners.base import Tuner, register

BACKGROUND_INIT = (1.0,) * 9
"""Initial background pseudo-document ``[m1 t1 m2 t2 m3 t3 m4 t4 ref_len]`` of Moses' kbmira (all 1)."""


@register("kbmira")
class KBMIRA(Tuner):
    """Batch k-best MIRA of Cherry & Foster (2012), the algorithm of Moses' ``kbmira``.

    Parameters
    ----------
    C : step-size cap (PA-I clipping); lower is more regularised (Moses ``--cparam``).
    decay : decay ``gamma`` of the background pseudo-document, in (0, 1] (``--decay``).
    epochs : passes over the dev sentences (``--iters``).
    seed : seeds the sentence order (``numpy.random.default_rng(seed)``, or glibc's
        ``srand(seed)`` with ``shuffle_rng="moses"``).
    shuffle : shuffle the sentences before every epoch (Moses' default; ``--no-shuffle``).
    model_bg : add the model-best instead of the hope to the background (``--model-bg``).
    sparse_epsilon : a sparse feature in both hope and fear whose values differ by at
        most this is left out of ``h+ - h-`` (Moses' ``MiraFeatureVector`` uses 1e-6).
    shuffle_rng : ``"numpy"`` or ``"moses"`` (replay Moses' order; needs an integer seed).

    Notes
    -----
    After :meth:`fit`: ``weights_`` (the returned weights), ``history_`` (one dict per
    epoch: ``epoch``, ``bleu`` of the averaged weights, ``updates``, ``examples``,
    ``avg_loss`` = summed loss / examples, ``best``), ``initial_bleu_``, ``best_bleu_``,
    ``best_epoch_`` (0: none beat 0), ``n_iter_``, ``n_hypotheses_`` (after
    de-duplication) and ``background_`` (the final pseudo-document).
    """

    def __init__(self, C: float = 0.01, decay: float = 0.999, epochs: int = 60, seed=None,
                 shuffle: bool = True, model_bg: bool = False, sparse_epsilon: float = 1e-6,
                 shuffle_rng: str = "numpy"):
        self.C = C
        self.decay = decay
        self.epochs = epochs
        self.seed = seed
        self.shuffle = shuffle
        self.model_bg = model_bg
        self.sparse_epsilon = sparse_epsilon
        self.shuffle_rng = shuffle_rng

    def _check_params(self) -> None:
        if not _is_real(self.C) or not self.C > 0:
            raise InputError(f"C={self.C!r}", expected="a finite number > 0")
        if not _is_real(self.decay) or not 0 < self.decay <= 1:
            raise InputError(f"decay={self.decay!r}", expected="a number in (0, 1]")
        if isinstance(self.epochs, bool) or not isinstance(self.epochs, numbers.Integral) \
                or self.epochs < 0:
            raise InputError(f"epochs={self.epochs!r}", expected="an integer >= 0")
        if not _is_real(self.sparse_epsilon) or self.sparse_epsilon < 0:
            raise InputError(f"sparse_epsilon={self.sparse_epsilon!r}", expected="a finite number >= 0")
        if self.shuffle_rng not in ("numpy", "moses"):
            raise InputError(f"shuffle_rng={self.shuffle_rng!r}", expected="'numpy' or 'moses'")
        if self.shuffle_rng == "moses" and self.shuffle and (
                isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral)
                or not 0 <= self.seed < 2 ** 32):
            raise InputError(f"seed={self.seed!r} with shuffle_rng='moses'",
                             expected="an integer seed in [0, 2**32) (glibc's srand)")

    def fit(self, data: KBest, w0) -> np.ndarray:
        """Run ``epochs`` epochs of batch MIRA from ``w0``; returns the best epoch's averaged weights."""
        self._check_params()
        start = self.check_data(data, w0)
        train = _dedup_by_features(data)
        offsets = train.offsets
        non_empty = np.flatnonzero(np.diff(offsets) > 0).astype(np.int64)
        arrays = (train.features, train.indptr, train.indices, train.values, train.stats)

        w = start.copy()
        totals = start.copy()
        last = np.zeros(w.shape[0], dtype=np.int64)
        counter = np.zeros(1, dtype=np.int64)
        bg = np.array(BACKGROUND_INIT, dtype=np.float64)
        scratch = np.zeros(w.shape[0], dtype=np.float64)
        seen = np.zeros(w.shape[0], dtype=np.int8)
        touched = np.zeros(w.shape[0], dtype=np.int64)

        order = non_empty.copy()
        try:
            rng = np.random.default_rng(self.seed) if self.shuffle_rng == "numpy" else None
        except (TypeError, ValueError) as err:
            raise InputError(f"seed={self.seed!r} ({err})",
                             expected="None or a non-negative integer") from None
        glibc = kernels.glibc_srand(int(self.seed)) if self.shuffle and rng is None else None

        def moses_pass():
            # Moses reshuffles its sentence order at every reset(), evaluation passes included
            if glibc is not None:
                kernels.glibc_random_shuffle(order, glibc)

        def bleu_of(weights):
            return corpus_bleu_from_stats(kernels.model_best_stats(offsets, *arrays, weights),
                                          smooth="none")

        moses_pass()
        self.initial_bleu_ = bleu_of(start)
        best, best_bleu, best_epoch = start.copy(), 0.0, 0
        history = []
        for epoch in range(1, self.epochs + 1):
            moses_pass()
            if rng is not None and self.shuffle:
                order = rng.permutation(non_empty)
            updates, examples, loss = kernels.mira_epoch(
                order, offsets, *arrays, w, totals, last, counter, bg, float(self.C),
                float(self.decay), bool(self.model_bg), float(self.sparse_epsilon), scratch, seen,
                touched)
            kernels.fix_totals(w, totals, last, counter)
            average = totals / counter[0] if counter[0] else w.copy()
            moses_pass()
            bleu = bleu_of(average)
            improved = bleu > best_bleu
            if improved:
                best, best_bleu, best_epoch = average, bleu, epoch
            history.append({"epoch": epoch, "bleu": bleu, "updates": int(updates),
                            "examples": int(examples),
                            "avg_loss": float(loss) / examples if examples else 0.0,
                            "best": bool(improved)})

        self.history_ = history
        self.best_bleu_ = best_bleu
        self.best_epoch_ = best_epoch
        self.n_iter_ = len(history)
        self.n_hypotheses_ = train.n_hypotheses
        self.background_ = bg
        self.weights_ = best
        return best


def _is_real(value) -> bool:
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(float(value)))


def _dedup_by_features(data: KBest) -> KBest:
    """``data`` without hypotheses whose feature vector repeats an earlier one of the same instance.

    Moses' kbmira (fixed) keeps the first of each feature vector per sentence;
    the hypothesis strings play no part, so they are left out of the comparison.
    """
    n = data.n_hypotheses
    bare = KBest(data.space, data.offsets, data.features, np.zeros(0, dtype=np.uint8),
                 np.zeros(n + 1, dtype=np.int64), data.indptr, data.indices, data.values,
                 data.stats, data.sentence_ids, data.iterations)
    return bare.dedup("hypothesis")


__all__ = ["BACKGROUND_INIT", "KBMIRA"]
