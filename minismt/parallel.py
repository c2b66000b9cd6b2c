"""Sentence-parallel decoding through any ``concurrent.futures.Executor``.

Local processes by default (``jobs``), or any executor the caller passes, such
as a Dask distributed client's ``client.get_executor()`` when one machine is
not enough. Work is sent in chunks of sentence indices; each worker loads the
model once (cached per process) and returns plain results, so the output is
the same, in the same order, whatever the executor.
"""

from __future__ import annotations

import os
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

_DECODERS: dict = {}  # per-process cache: (model_dir, options) -> Decoder


@dataclass
class DecodeJob:
    """What every worker needs to rebuild the same decoder."""

    model_dir: str
    weights: dict | None = None
    stack_size: int = 200
    beam_threshold: float = 1e-5
    distortion_limit: int | None = None
    kbest: int = 0
    distinct: bool = True
    hypergraph_dir: str | None = None

    def key(self) -> tuple:
        weights = tuple(sorted((self.weights or {}).items()))
        return (self.model_dir, weights, self.stack_size, self.beam_threshold, self.distortion_limit)


@dataclass
class SentenceOutput:
    """The decoder's answer for one sentence: 1-best, its score and features, optional k-best."""

    index: int
    best: str
    score: float
    features: np.ndarray
    kbest: list[tuple[str, float, np.ndarray]] = field(default_factory=list)
    n_nodes: int = 0
    n_edges: int = 0


def _decoder(job: DecodeJob):
    decoder = _DECODERS.get(job.key())
    if decoder is None:
        from minismt.decode import Decoder
        decoder = Decoder(job.model_dir, weights=job.weights, stack_size=job.stack_size,
                          beam_threshold=job.beam_threshold, distortion_limit=job.distortion_limit)
        _DECODERS.clear()
        _DECODERS[job.key()] = decoder
    return decoder


def decode_chunk(job: DecodeJob, indices: Sequence[int], sentences: Sequence[str]) -> list[SentenceOutput]:
    """Decode some sentences in this process (the unit of work sent to an executor)."""
    decoder = _decoder(job)
    outputs = []
    for index, sentence in zip(indices, sentences):
        result = decoder.decode(sentence)
        output = SentenceOutput(index, result.best, float(result.score), _dense(result.features),
                                n_nodes=result.hypergraph.n_nodes, n_edges=result.hypergraph.n_edges)
        if job.kbest > 0:
            found = result.hypergraph.kbest(job.kbest, decoder.weights, distinct=job.distinct)
            dense = found.dense_features()
            output.kbest = [(text, float(score), dense[k])
                            for k, (text, score) in enumerate(zip(found.texts, found.scores))]
        if job.hypergraph_dir is not None:
            from minismt.hypergraph import write_cdec_json
            write_cdec_json(result.hypergraph, os.path.join(job.hypergraph_dir, f"{index}.json.gz"))
        outputs.append(output)
    return outputs


def _dense(features) -> np.ndarray:
    return np.asarray(features, dtype=np.float64)


def decode_corpus(job: DecodeJob, sentences: Sequence[str], executor: Executor | None = None,
                  jobs: int = 1, chunk_size: int = 16, progress: bool = False) -> list[SentenceOutput]:
    """Decode ``sentences`` in order; in this process when ``jobs == 1`` and no executor is given."""
    from tqdm import tqdm
    chunks = [list(range(start, min(start + chunk_size, len(sentences))))
              for start in range(0, len(sentences), chunk_size)]
    bar = tqdm(total=len(sentences), desc="decode", unit="sent", disable=not progress)
    results: list[SentenceOutput] = []
    if executor is None and jobs <= 1:
        for chunk in chunks:
            results.extend(decode_chunk(job, chunk, [sentences[i] for i in chunk]))
            bar.update(len(chunk))
        bar.close()
        return results
    own = executor is None
    pool = executor if executor is not None else ProcessPoolExecutor(max_workers=jobs)
    try:
        futures = [pool.submit(decode_chunk, job, chunk, [sentences[i] for i in chunk])
                   for chunk in chunks]
        for future in futures:
            part = future.result()
            results.extend(part)
            bar.update(len(part))
    finally:
        bar.close()
        if own:
            pool.shutdown()
    return results
