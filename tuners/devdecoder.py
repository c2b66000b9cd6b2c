"""minismt's own decoder as the dev-set decoder of a :class:`~tuners.loop.TuningRun`."""

from __future__ import annotations

from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Sequence

import numpy as np

from minismt.features import FeatureSpace
from minismt.kbest import KBest, KBestBuilder
from minismt.parallel import DecodeJob, decode_corpus, decode_requests, force_corpus
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
        self._pool: ProcessPoolExecutor | None = None

    def _job(self, weights: np.ndarray) -> DecodeJob:
        return DecodeJob(self.model_dir, weights=self.space.weights_dict(weights),
                         stack_size=self.stack_size, distortion_limit=self.distortion_limit,
                         kbest=self.kbest, distinct=True)

    def _executor(self) -> Executor | None:
        """The caller's executor, or a process pool kept for the decoder's lifetime (workers load
        the model once, not once per decode)."""
        if self.executor is None and self.jobs > 1 and self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.jobs)
        return self.executor if self.executor is not None else self._pool

    def close(self) -> None:
        """Shut down the decoder's own process pool, if it made one."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def _kbest(self, outputs, sentence_ids=None) -> KBest:
        builder = KBestBuilder(self.space)
        for local, output in enumerate(outputs):
            for text, _, features in output.kbest:
                builder.add(local, text, features[: self.space.n_dense])
        kbest = builder.build(len(outputs))
        if sentence_ids is not None:
            kbest.sentence_ids[:] = sentence_ids
        return kbest

    def decode(self, weights: np.ndarray, iteration: int) -> tuple[KBest, list[str]]:
        outputs = decode_corpus(self._job(weights), self.sentences, executor=self._executor(),
                                jobs=self.jobs, progress=self.progress)
        kbest = self._kbest(outputs)
        kbest.iterations[:] = iteration
        return kbest, [o.best for o in outputs]

    def force(self, weights: np.ndarray, references: Sequence[str], iteration: int) -> KBest:
        """Forced decoding of every dev sentence into its reference under ``weights``: one instance
        per sentence holding the best reference derivation's features, empty when the reference
        cannot be reached (structured SVMs use these as the reference's feature vector)."""
        found = force_corpus(self._job(weights), self.sentences, list(references),
                             executor=self._executor(), jobs=self.jobs)
        builder = KBestBuilder(self.space)
        for index, (reference, features) in enumerate(zip(references, found)):
            if features is not None:
                builder.add(index, reference, features[: self.space.n_dense])
        kbest = builder.build(len(self.sentences))
        kbest.iterations[:] = iteration
        return kbest

    def decode_batches(self, requests: Sequence[tuple[np.ndarray, Sequence[int]]],
                       iteration: int) -> list[KBest]:
        """The k-best lists of some dev sentences under per-request weights (online tuners):
        one KBest per ``(weights, sentence indices)`` request, its ``sentence_ids`` the indices."""
        outputs = decode_requests([(self._job(w), list(indices)) for w, indices in requests],
                                  self.sentences, executor=self._executor(), jobs=self.jobs)
        lists = []
        for (_, indices), answer in zip(requests, outputs):
            kbest = self._kbest(answer, np.asarray(list(indices), dtype=np.int64))
            kbest.iterations[:] = iteration
            lists.append(kbest)
        return lists


class CommandDevDecoder:
    """Any decoder program that reads a weights file and writes a k-best list (Moses or cdec format).

    ``command`` is an argument list (run without a shell); the items ``{weights}``,
    ``{kbest}`` and ``{iteration}`` are replaced by the weights file written for
    this iteration, the k-best file the program must write, and the iteration
    number. A program that exits non-zero is an :class:`InputError` carrying its
    stderr. The 1-best of each sentence is the list's model-best under the weights.
    """

    def __init__(self, command: Sequence[str], space: FeatureSpace, n_sentences: int, work_dir: str,
                 kbest_format: str = "moses"):
        if kbest_format not in ("moses", "cdec"):
            from minismt.errors import InputError
            raise InputError(f"k-best format {kbest_format!r}", expected="'moses' or 'cdec'")
        self.command = list(command)
        self.space = space
        self.n_sentences = n_sentences
        self.work_dir = work_dir
        self.kbest_format = kbest_format

    def decode(self, weights: np.ndarray, iteration: int) -> tuple[KBest, list[str]]:
        import os
        import subprocess
        from minismt.errors import InputError
        from minismt.features import write_weights
        folder = os.path.join(self.work_dir, f"decode.{iteration}")
        os.makedirs(folder, exist_ok=True)
        weights_path = os.path.join(folder, "weights")
        kbest_path = os.path.join(folder, "kbest")
        write_weights(weights_path, self.space.weights_dict(weights, skip_zero_sparse=True))
        argv = [item.replace("{weights}", weights_path).replace("{kbest}", kbest_path)
                .replace("{iteration}", str(iteration)) for item in self.command]
        try:
            done = subprocess.run(argv, capture_output=True, text=True)
        except OSError as err:
            raise InputError(f"cannot run the decoder {argv[0]!r}: {err.strerror or err}") from None
        if done.returncode != 0:
            raise InputError(f"the decoder exited with status {done.returncode}; its stderr ends: "
                             f"{done.stderr[-2000:]}", argv[0])
        if self.kbest_format == "moses":
            from plugins.moses.nbest import read_nbest
            kbest = read_nbest(kbest_path, space=self.space, n_sentences=self.n_sentences)
        else:
            from plugins.cdec.kbest import read_kbest
            kbest = read_kbest(kbest_path, space=self.space, n_sentences=self.n_sentences)
        kbest.iterations[:] = iteration
        best = kbest.model_best(weights)
        return kbest, [kbest.hypothesis(int(r)) if r >= 0 else "" for r in best]
