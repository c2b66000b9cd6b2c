"""A fake dev-set decoder and a stand-in tuner for the tuning-loop tests.

Imported by the tests, and run as a program: ``python fake_decoder.py decode --weights W
--nbest OUT [--fail 1]`` writes a Moses n-best list like a decoder; ``python
fake_decoder.py tune RUN_DIR [TUNER]`` runs a whole (slowed-down) TuningRun, to be killed
(with a stand-in n-best tuner, or the named online tuner).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from minismt.features import FeatureSpace, read_weights
from minismt.kbest import KBestBuilder
from tuners.base import Tuner
from tuners.devdecoder import DevDecoder

REFS = [["the cat sat on the mat"], ["a dog sat"], ["the mat"], ["a cat on a mat"],
        ["the dog"], ["cat sat on mat"]]


class FakeDecoder(DevDecoder):
    """A fixed pool of 30 hypotheses per sentence; 'decoding' returns the top 5 under w."""

    decodes_batches = True

    def __init__(self, n_sentences: int = 6, delay: float = 0.0):
        rng = np.random.default_rng(1)
        self.space = FeatureSpace(["a_0", "b_0", "c_0"])
        words = ["the", "cat", "sat", "on", "mat", "a", "dog"]
        self.pool = [[(" ".join(rng.choice(words, size=int(rng.integers(2, 7)))), rng.standard_normal(3))
                      for _ in range(30)] for _ in range(n_sentences)]
        self.delay = delay
        self.requests = []  # every decode_batches call's (weights, indices), for the tests

    def _top(self, sentence, weights):
        pool = self.pool[sentence]
        return np.argsort([-(f @ weights) for _, f in pool], kind="stable")[:5]

    def decode(self, weights, iteration):
        time.sleep(self.delay)
        builder = KBestBuilder(self.space)
        best = []
        for s, pool in enumerate(self.pool):
            order = self._top(s, weights)
            for j in order:
                builder.add(s, pool[j][0], pool[j][1])
            best.append(pool[order[0]][0])
        return builder.build(len(self.pool)), best

    def decode_batches(self, requests, iteration):
        """Online tuners' decoding: the top 5 of some sentences' pools under per-request weights."""
        time.sleep(self.delay / 4)
        self.requests.append([(np.array(w, copy=True), list(indices)) for w, indices in requests])
        lists = []
        for weights, indices in requests:
            builder = KBestBuilder(self.space)
            for local, s in enumerate(indices):
                for j in self._top(s, weights):
                    builder.add(local, self.pool[s][j][0], self.pool[s][j][1])
            kbest = builder.build(len(indices))
            kbest.sentence_ids[:] = indices
            lists.append(kbest)
        return lists


class RandomSearch(Tuner):
    """Seeded random search on the k-best list (a stand-in tuner for loop tests)."""

    def __init__(self, seed=0, trials=30):
        self.seed = seed
        self.trials = trials

    def fit(self, data, w0):
        w0 = self.check_data(data, w0)
        rng = np.random.default_rng([self.seed, data.n_hypotheses])
        best, best_bleu = w0, data.bleu(w0)
        for _ in range(self.trials):
            w = best + rng.normal(scale=0.5, size=w0.shape)
            bleu = data.bleu(w)
            if bleu > best_bleu:
                best, best_bleu = w, bleu
        self.weights_ = best
        return best


def write_nbest(weights_path: str, nbest_path: str) -> None:
    decoder = FakeDecoder()
    w = decoder.space.weights(read_weights(weights_path), grow=False)
    kbest, _ = decoder.decode(w, 0)
    with open(nbest_path, "w", encoding="utf-8") as out:
        for s in range(kbest.n_instances):
            for r in kbest.rows(s):
                a, b, c = (float(x) for x in kbest.features[r])
                out.write(f"{s} ||| {kbest.hypothesis(r)} ||| a= {a!r} b= {b!r} c= {c!r} ||| "
                          f"{float(kbest.features[r] @ w)!r}\n")


def main(argv) -> int:
    if argv[0] == "decode":
        args = dict(zip(argv[1::2], argv[2::2]))
        if args.get("--fail"):
            print("model file not found", file=sys.stderr)
            return 3
        write_nbest(args["--weights"], args["--nbest"])
        return 0
    from tuners.loop import TuningRun
    if len(argv) > 2:  # an online tuner by name, e.g. o-oro
        run = TuningRun(FakeDecoder(delay=0.15), REFS, argv[2], argv[1], max_iter=12, seed=5,
                        tuner_params={"batch_size": 2, "shards": 2})
    else:
        run = TuningRun(FakeDecoder(delay=0.15), REFS, RandomSearch(seed=5), argv[1], max_iter=12)
    run.run(np.array([0.0, 1.0, -1.0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
