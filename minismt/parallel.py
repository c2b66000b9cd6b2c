"""Sentence-parallel decoding through any ``concurrent.futures.Executor``.

Local processes by default (``jobs``), or any executor the caller passes, such
as a Dask distributed client's ``client.get_executor()`` when one machine is
not enough. Work is sent in chunks of sentence indices; each worker loads the
model once (cached per process) and returns plain results, so the output is
the same, in the same order, whatever the executor.

Local process pools come from :func:`process_pool`: their workers ignore Ctrl-C
(SIGINT goes to the whole process group) and the parent tears them down with
:func:`stop_pool`, so an interrupted command prints one line, not a traceback
per worker.

The decoder (:mod:`minismt.decode` with :mod:`minismt.hypergraph`: 0.32 s after this module, 0.14 s
after the aligner's kernels) is imported by the process that decodes, when it first does:
``minismt train`` and its aligner's spawned workers (:mod:`minismt.align` imports
:func:`process_pool` from here) never load it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from minismt.errors import InputError
from minismt.progress import bar as progress_bar
from minismt.progress import in_worker_process

_DECODERS: dict = {}  # per-process cache: (model_dir, options) -> Decoder
_MODELS: dict = {}    # per-process cache: model_dir -> PhraseModel (new weights do not reload it)


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
    sparse_features: tuple[str, ...] = ()  # sparse feature families (minismt.decode.sparse), e.g. ("rule-id",)
    return_hypergraph: bool = False  # send each search graph back (Hypergraph.to_portable)

    def key(self) -> tuple:
        weights = tuple(sorted((self.weights or {}).items()))
        return (self.model_dir, weights, self.stack_size, self.beam_threshold, self.distortion_limit,
                tuple(self.sparse_features))


@dataclass
class SentenceOutput:
    """The decoder's answer for one sentence: 1-best, its score and features, optional k-best.

    ``features`` and the k-best entries' arrays are the dense features; with sparse features
    (``DecodeJob.sparse_features``) ``sparse`` holds the 1-best's ``{name: value}`` and
    ``kbest_sparse`` one such dict per k-best entry (names, since every worker numbers them
    its own way); scores include the sparse features' contribution.
    """

    index: int
    best: str
    score: float
    features: np.ndarray
    kbest: list[tuple[str, float, np.ndarray]] = field(default_factory=list)
    n_nodes: int = 0
    n_edges: int = 0
    sparse: dict = field(default_factory=dict)
    kbest_sparse: list[dict] = field(default_factory=list)
    hypergraph: dict | None = None  # with DecodeJob.return_hypergraph: Hypergraph.to_portable()


def _exit_on_sigterm(signum, frame):
    """SIGTERM in a pool worker: stop the processes this one started (the workers of its own pool, which
    do the same in turn) and exit at once, without taking the next task of the queue."""
    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    for child in children:
        child.join(10)
    os._exit(128 + signum)


def _start_worker() -> None:
    """Initializer of :func:`process_pool`'s workers: Ctrl-C is the parent's to handle (SIGINT ignored;
    processes a worker starts inherit that), SIGTERM (:func:`stop_pool`) ends the worker and the processes
    it started, and the worker holds no semaphore that ending it at once would leak."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    in_worker_process()


def process_pool(jobs: int, context=None) -> ProcessPoolExecutor:
    """A pool of ``jobs`` local worker processes (``context``: a multiprocessing context, e.g.
    ``multiprocessing.get_context("spawn")``) whose workers leave Ctrl-C to the parent."""
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_start_worker)


def run_ignoring_interrupts(function, *args):
    """``function(*args)`` with SIGINT ignored: the target of a helper process (``multiprocessing.Process``)
    that its parent stops itself, so that Ctrl-C does not print the helper's traceback too (and with no
    semaphore left behind when the parent terminates it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    in_worker_process()
    return function(*args)


def stop_pool(pool: ProcessPoolExecutor, grace: float = 2.0) -> None:
    """Tear ``pool`` down now (after Ctrl-C or an error), leaving no process or semaphore behind.

    The work not started is dropped; the work running (its workers ignore Ctrl-C) has ``grace``
    seconds to end, which a chunk of sentences does; then the workers are stopped (SIGTERM, SIGKILL
    for one that does not end within 10 s). A worker stopped while sending a result leaves part of
    it in the pool's result pipe, where the pool's thread would wait for the rest for ever (seen: one
    Ctrl-C in five hung ``minismt tune --jobs 2``); once the workers are gone the parent closes its
    own end for writing too, and the thread reads end-of-file, marks the pool broken and ends.
    """
    processes = list((getattr(pool, "_processes", None) or {}).values())
    thread = getattr(pool, "_executor_manager_thread", None)
    writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
    pool.shutdown(wait=False, cancel_futures=True)
    if thread is not None:
        thread.join(grace)
    if thread is not None and not thread.is_alive():
        return
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join()
    if writer is not None:
        writer.close()
    if thread is not None:
        thread.join()


def _decoder(job: DecodeJob):
    decoder = _DECODERS.get(job.key())
    if decoder is None:
        from minismt.decode import Decoder, PhraseModel
        model = _MODELS.get(job.model_dir)
        if model is None:
            _MODELS.clear()
            model = _MODELS[job.model_dir] = PhraseModel.load(job.model_dir)
        decoder = Decoder(model, weights=job.weights, stack_size=job.stack_size,
                          beam_threshold=job.beam_threshold, distortion_limit=job.distortion_limit,
                          sparse_features=job.sparse_features)
        if len(_DECODERS) >= 8:
            _DECODERS.pop(next(iter(_DECODERS)))
        _DECODERS[job.key()] = decoder
    return decoder


def decode_chunk(job: DecodeJob, indices: Sequence[int], sentences: Sequence[str]) -> list[SentenceOutput]:
    """Decode some sentences in this process (the unit of work sent to an executor)."""
    decoder = _decoder(job)
    outputs = []
    for index, sentence in zip(indices, sentences):
        result = decoder.decode(sentence)
        output = SentenceOutput(index, result.best, float(result.score), _dense(result.features),
                                n_nodes=result.hypergraph.n_nodes, n_edges=result.hypergraph.n_edges,
                                sparse=dict(result.sparse))
        if job.kbest > 0 and decoder.sparse_features:
            found = result.hypergraph.kbest(job.kbest, decoder.full_weights(), distinct=job.distinct)
            dense, sparse = _split_features(found, decoder.space)
            output.kbest = [(text, float(score), dense[k])
                            for k, (text, score) in enumerate(zip(found.texts, found.scores))]
            output.kbest_sparse = sparse
        elif job.kbest > 0:
            found = result.hypergraph.kbest(job.kbest, decoder.weights, distinct=job.distinct)
            dense = found.dense_features()
            output.kbest = [(text, float(score), dense[k])
                            for k, (text, score) in enumerate(zip(found.texts, found.scores))]
        if job.return_hypergraph:
            output.hypergraph = result.hypergraph.to_portable()
        if job.hypergraph_dir is not None:
            from minismt.hypergraph import write_cdec_json
            write_cdec_json(result.hypergraph, os.path.join(job.hypergraph_dir, f"{index}.json.gz"))
        outputs.append(output)
    return outputs


def _split_features(found, space) -> tuple[np.ndarray, list[dict]]:
    """The dense rows (``float64[N, n_dense]``) and sparse ``{name: value}`` dicts of a k-best list."""
    n_dense = space.n_dense
    dense = np.zeros((len(found), n_dense))
    sparse = []
    for k in range(len(found)):
        lo, hi = found.feat_offsets[k], found.feat_offsets[k + 1]
        ids, values = found.feat_ids[lo:hi], found.feat_values[lo:hi]
        is_dense = ids < n_dense
        dense[k, ids[is_dense]] = values[is_dense]
        sparse.append({space.name(int(i)): float(v) for i, v in zip(ids[~is_dense], values[~is_dense])})
    return dense, sparse


def force_chunk(job: DecodeJob, indices: Sequence[int], sentences: Sequence[str],
                references: Sequence[str]) -> list[tuple[int, np.ndarray | None, dict]]:
    """Forced decoding of some sentences into their references (the unit sent to an executor):
    ``(index, dense features of the best derivation, its sparse features {name: value})``, or
    ``(index, None, {})`` where the reference is not reachable within the search's pruning."""
    decoder = _decoder(job)
    outputs = []
    for index, sentence, reference in zip(indices, sentences, references):
        result = decoder.force(sentence, reference)
        if result is None:
            outputs.append((index, None, {}))
        else:
            outputs.append((index, _dense(result.features), dict(result.sparse)))
    return outputs


def force_corpus(job: DecodeJob, sentences: Sequence[str], references: Sequence[str],
                 executor: Executor | None = None, jobs: int = 1,
                 chunk_size: int = 16, sparse: bool = False) -> list:
    """:func:`force_chunk` over a corpus, in order, on the executor (or ``jobs`` local processes):
    the dense features of each sentence's forced derivation (None if unreachable), or with
    ``sparse`` the pair ``(dense, {sparse name: value})`` (None if unreachable)."""
    if len(references) != len(sentences):
        raise InputError(f"{len(references)} references for {len(sentences)} sentences",
                         expected="one reference per sentence")
    chunks = [list(range(start, min(start + chunk_size, len(sentences))))
              for start in range(0, len(sentences), chunk_size)]
    args = [(job, c, [sentences[i] for i in c], [references[i] for i in c]) for c in chunks]
    parts = _map_chunks(force_chunk, args, executor, jobs)
    if sparse:
        return [None if dense is None else (dense, features) for part in parts for _, dense, features in part]
    return [dense for part in parts for _, dense, _ in part]


def _map_chunks(function, args: list[tuple], executor: Executor | None, jobs: int, bar=None) -> list:
    """``[function(*a) for a in args]``, here (``jobs <= 1``, no executor) or on an executor (the
    caller's, else a :func:`process_pool` made for the call); ``bar`` advances by each result's length.

    On Ctrl-C or an error the chunks not started are cancelled; a pool made here is torn down
    (:func:`stop_pool`), the caller's is left to the caller."""
    if executor is None and jobs <= 1:
        results = []
        for a in args:
            results.append(function(*a))
            if bar is not None:
                bar.update(len(results[-1]))
        return results
    pool = executor if executor is not None else process_pool(jobs)
    futures: list[Future] = []
    try:
        futures = [pool.submit(function, *a) for a in args]
        results = []
        for future in futures:
            results.append(future.result())
            if bar is not None:
                bar.update(len(results[-1]))
    except BaseException:
        if executor is None:
            stop_pool(pool)
        else:
            for future in futures:
                future.cancel()
        raise
    if executor is None:
        pool.shutdown()
    return results


def _dense(features) -> np.ndarray:
    return np.asarray(features, dtype=np.float64)


def decode_corpus(job: DecodeJob, sentences: Sequence[str], executor: Executor | None = None,
                  jobs: int = 1, chunk_size: int = 16, progress: bool = False) -> list[SentenceOutput]:
    """Decode ``sentences`` in order; in this process when ``jobs == 1`` and no executor is given."""
    return decode_requests([(job, range(len(sentences)))], sentences, executor, jobs, chunk_size,
                           progress)[0]


def decode_requests(requests: Sequence[tuple[DecodeJob, Sequence[int]]], sentences: Sequence[str],
                    executor: Executor | None = None, jobs: int = 1, chunk_size: int = 16,
                    progress: bool = False) -> list[list[SentenceOutput]]:
    """Decode several (job, sentence indices) requests at once, e.g. each with its own weights.

    All requests' chunks go to the executor together (online learners decode
    every shard's mini-batch in one parallel call); the answer holds one list
    of outputs per request, in the order of its indices.
    """
    chunks = []  # (request number, job, indices)
    for number, (job, indices) in enumerate(requests):
        indices = list(indices)
        for start in range(0, len(indices), chunk_size):
            chunks.append((number, job, indices[start:start + chunk_size]))
    # the first chunk includes loading the model (and starting the workers): the rate starts after it
    bar = progress_bar(total=sum(len(c[2]) for c in chunks), desc="decode", unit="sent", enabled=progress,
                       warmup=True)
    try:
        parts = _map_chunks(decode_chunk, [(job, chunk, [sentences[i] for i in chunk]) for _, job, chunk in chunks],
                            executor, jobs, bar)
    finally:
        bar.close()
    results: list[list[SentenceOutput]] = [[] for _ in requests]
    for (number, _, _), part in zip(chunks, parts):
        results[number].extend(part)
    return results
