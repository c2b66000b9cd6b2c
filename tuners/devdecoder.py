"""minismt's own decoder as the dev-set decoder of a :class:`~tuners.loop.TuningRun`."""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Sequence

import numpy as np

from minismt.features import FeatureSpace
from minismt.kbest import KBest, KBestBuilder
from minismt.parallel import DecodeJob, decode_corpus
from minismt.train import load_manifest


class MinismtDevDecoder:
    """Decodes the dev sentences with a trained model, returning distinct k-best lists.

    ``kbest`` is Moses' tuning default (100 distinct strings); decoding runs
    in ``jobs`` local processes or on ``executor`` (e.g. a Dask client's).
    """

    def __init__(self, model_dir: str, sentences: Sequence[str], kbest: int = 100, jobs: int = 1,
                 executor: Executor | None = None, stack_size: int = 200,
                 distortion_limit: int | None = None, progress: bool = False):
        manifest = load_manifest(model_dir)
        self.model_dir = model_dir
        self.sentences = list(sentences)
        self.space = FeatureSpace(manifest["features"])
        self.default_weights = self.space.weights(manifest["default_weights"], grow=False)
        self.kbest = kbest
        self.jobs = jobs
        self.executor = executor
        self.stack_size = stack_size
        self.distortion_limit = distortion_limit
        self.progress = progress

    def decode(self, weights: np.ndarray, iteration: int) -> tuple[KBest, list[str]]:
        job = DecodeJob(self.model_dir, weights=self.space.weights_dict(weights),
                        stack_size=self.stack_size, distortion_limit=self.distortion_limit,
                        kbest=self.kbest, distinct=True)
        outputs = decode_corpus(job, self.sentences, executor=self.executor, jobs=self.jobs,
                                progress=self.progress)
        builder = KBestBuilder(self.space)
        for output in outputs:
            for text, _, features in output.kbest:
                builder.add(output.index, text, features[: self.space.n_dense])
        kbest = builder.build(len(self.sentences))
        kbest.iterations[:] = iteration
        return kbest, [o.best for o in outputs]
