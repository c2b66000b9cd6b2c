"""
Write a new tuner
=================

A tuner is a class with its parameters as keyword arguments of ``__init__`` (stored unchanged), one
``fit(data, w0)`` that returns the new weights, and ``tags`` (:class:`~tuners.base.TunerTags`) that tell the
tuning loop what ``fit`` is given: the accumulated k-best list, the dev set's forests, or a source of
mini-batches to decode.  Registered under a name, it runs everywhere the seed tuners run: ``minismt tune
--tuner NAME``, pipelines, Moses' and cdec's systems through the plugins.

This tutorial writes the structured perceptron towards the oracle (Collins 2002; Liang et al. 2006's "local
updating": the hypothesis with the best sentence BLEU+1 in each list is the target), averaged, registers
it, passes the conformance test every k-best tuner passes, and tunes a model with it.
"""

# %%
# The tuner
# ---------
# ``fits_on="kbest"``: ``fit`` gets the k-best lists accumulated over the iterations (a
# :class:`~minismt.kbest.KBest`: arrays of every hypothesis' features and BLEU statistics).  Every random
# choice comes from ``numpy.random.default_rng(seed)`` made inside ``fit``, so the same seed gives the same
# weights bit for bit.
import numpy as np

import tuners
from tuners.base import Tuner, TunerTags


@tuners.register("oracle-perceptron")
class OraclePerceptron(Tuner):
    """Averaged perceptron towards each sentence's BLEU+1 oracle (Collins 2002; Liang et al. 2006).

    epochs : passes over the sentences, in an order shuffled by ``seed``.
    rate : the step of each update ``w += rate * (h(oracle) - h(model best))``.
    """

    tags = TunerTags(fits_on="kbest", accumulate="merge")

    def __init__(self, epochs: int = 10, rate: float = 0.1, seed: int = 0):
        self.epochs = epochs
        self.rate = rate
        self.seed = seed

    def fit(self, data, w0) -> np.ndarray:
        w = self.check_data(data, w0)            # validates the data and the start weights (InputError)
        dense = data.feature_matrix()             # float64[hypotheses, features]: dense, then sparse
        oracle = data.oracle()                    # the row of each sentence's BLEU+1-best hypothesis
        rng = np.random.default_rng(self.seed)
        total, steps, history = np.zeros_like(w), 0, []
        for epoch in range(self.epochs):
            mistakes = 0
            for s in rng.permutation(data.n_instances):
                rows = np.arange(data.offsets[s], data.offsets[s + 1])
                guess = rows[np.argmax(dense[rows] @ w)]
                if guess != oracle[s] and dense[oracle[s]] @ w <= dense[guess] @ w:
                    w += self.rate * (dense[oracle[s]] - dense[guess])
                    mistakes += 1
                total += w
                steps += 1
            history.append({"epoch": epoch, "mistakes": mistakes})
        self.weights_ = total / max(steps, 1)
        self.history_ = history
        return self.weights_


# %%
# The conformance test
# --------------------
# ``tests/test_tuners_conformance.py`` checks every registered k-best tuner: its parameters are stored
# unchanged, ``fit`` raises the BLEU of a toy problem by more than 5 points, the same seed gives
# bit-identical weights, and bad input (NaN weights, lists without BLEU statistics, a sentence without
# hypotheses, weights that miss a feature) is an :class:`~minismt.errors.InputError`.  Put the class in a
# module that ``tuners/__init__.py`` imports and ``pytest tests/test_tuners_conformance.py`` runs it; here we
# call the same checks directly.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(tuners.__file__).resolve().parents[1] / "tests"))   # the repository's tests
import test_tuners_conformance as conformance

conformance.test_tuner_conformance("oracle-perceptron")
conformance.test_tuner_bad_input("oracle-perceptron")
print("the conformance checks pass")

# %%
# Tune a model with it
# --------------------
# :class:`~tuners.loop.TuningRun` is the loop of ``minismt tune``: decode the dev set into k-best lists,
# accumulate, fit, move as far as the search graphs reward, keep the step if its decode does not lower the
# dev BLEU, checkpoint.  Any registered name works, yours too.
import tempfile

from corpora.synthetic import write_synthetic
from minismt.train import Trainer, TrainingConfig
from tuners.devdecoder import MinismtDevDecoder
from tuners.loop import TuningRun

work = Path(tempfile.mkdtemp())
write_synthetic(work / "data", n_pairs=2000, seed=7, dev=60, test=60)
Trainer(TrainingConfig(src=str(work / "data" / "train.src"), tgt=str(work / "data" / "train.tgt"),
                       out=str(work / "model"), lm_order=3, progress=False)).run()
dev = (work / "data" / "dev.src").read_text(encoding="utf-8").splitlines()
references = [[line] for line in (work / "data" / "dev.tgt").read_text(encoding="utf-8").splitlines()]
decoder = MinismtDevDecoder(str(work / "model"), dev, stack_size=50)
run = TuningRun(decoder, references, "oracle-perceptron", work / "run", max_iter=4, seed=1, on_iteration=print)
weights = run.run(decoder.default_weights)
print({record.iteration: round(100 * record.dev_bleu, 2) for record in run.history})
