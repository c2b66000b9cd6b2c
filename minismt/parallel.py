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

import hashlib
import json
import math
import multiprocessing
import os
import queue
import signal
import threading
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from minismt.decode.settings import PER_CHUNK, DecoderSettings
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.kbest import KBestRows
from minismt.progress import bar as progress_bar
from minismt.progress import in_worker_process


_DECODERS: dict = {}  # per-process cache: DecodeJob.key() -> Decoder
_MODELS: dict = {}    # per-process cache: model_dir -> PhraseModel (new weights do not reload it)
_NAMES: dict = {}     # per-process cache: names digest -> the names tuple (the latest few), see DecodeJob
_NAMES_KEPT = 4
_LAST_NAMES: list = [None, "", ""]  # the last names tuple given to a DecodeJob, its text and digest


def _names_text(names: tuple[str, ...]) -> tuple[str | None, str]:
    """``(text, digest)`` of ``names``: their lines (None if a name holds a line break) and the BLAKE2b digest
    of the lines, kept for the last tuple (a tuner sends the same names with every new weights)."""
    if _LAST_NAMES[0] is not names:
        text = "\n".join(names)
        if text.count("\n") != len(names) - 1 and names:  # the lines would not tell the names apart
            text, data = None, ("json\n" + json.dumps(names)).encode("utf-8")
        else:
            data = ("lines\n" + text).encode("utf-8")
        _LAST_NAMES[:] = [names, text, hashlib.blake2b(data, digest_size=16).hexdigest()]
    return _LAST_NAMES[1], _LAST_NAMES[2]


def _interned_names(digest: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """The one tuple of this process for the names of ``digest`` (``names`` if it is the first): the
    decoders' caches of what each name is know it by identity."""
    kept = _NAMES.pop(digest, None)
    _NAMES[digest] = kept = names if kept is None else kept  # the latest used last
    while len(_NAMES) > _NAMES_KEPT:
        _NAMES.pop(next(iter(_NAMES)))
    return kept


@dataclass
class DecodeJob:
    """What every worker needs to rebuild the same decoder: the model, the settings and the weights.

    ``weights`` is a float64 array over ``names`` (the dense weights, then the sparse ones), or None
    for the model's own; a ``{name: value}`` mapping is turned into the two here, once, and
    :func:`named_weights` gives them from an array over a feature space. Workers keep their
    decoders by :meth:`key`, which holds a digest of the weights, not the weights.
    """

    model_dir: str
    settings: DecoderSettings = DecoderSettings()
    weights: np.ndarray | None = None
    names: tuple[str, ...] = ()
    hypergraph_dir: str | None = None
    hypergraph_writer: Callable | None = None  # writer(result, hypergraph_dir, i); None: DIR/<i>.json.gz
    return_hypergraph: bool = False  # send each search graph back (Hypergraph.to_portable)
    hypergraph_edges: tuple[int, ...] = ()  # with return_hypergraph: sentence i's graph pruned to [i] edges first
    grammar: str | None = None       # a Hiero model's grammar (the input set's; decode.settings.PER_CHUNK: each
                                     # chunk's own, from the rule store), None for phrase-based
    mbr: str | None = None           # "kbest" or "forest": the 1-best is the MBR / consensus choice (decode.mbr)
    mbr_size: int = 200              # its candidates: the search graph's best distinct translations (Moses' 200)
    mbr_scale: float = 1.0           # p(d) ~ exp(mbr_scale * w . f(d)) (Moses' -mbr-scale)
    weights_digest: str = field(init=False, default="")
    names_digest: str = field(init=False, default="")

    def __post_init__(self):
        if self.mbr not in (None, "kbest", "forest"):
            raise InputError(f"mbr={self.mbr!r}", expected="None, 'kbest' or 'forest'")
        if isinstance(self.mbr_size, bool) or not isinstance(self.mbr_size, int) or self.mbr_size < 1:
            raise InputError(f"mbr_size={self.mbr_size!r}", expected="an integer >= 1")
        if not (isinstance(self.mbr_scale, (int, float)) and math.isfinite(self.mbr_scale) and self.mbr_scale > 0):
            raise InputError(f"mbr_scale={self.mbr_scale!r}", expected="a finite number > 0")
        if isinstance(self.weights, Mapping):
            self.names = tuple(self.weights)
            values = list(self.weights.values())
            try:
                self.weights = np.array(values, dtype=np.float64)
            except (TypeError, ValueError):
                raise InputError(f"weights {values!r}", expected="numbers") from None
        elif self.weights is not None:
            self.weights = np.ascontiguousarray(self.weights, dtype=np.float64)
            self.names = tuple(self.names)
        self.names_digest = _names_text(self.names)[1]
        self.names = _interned_names(self.names_digest, self.names)
        digest = hashlib.blake2b(digest_size=16)
        if self.weights is not None:
            digest.update(self.weights.tobytes())
            digest.update(self.names_digest.encode("ascii"))
        self.weights_digest = digest.hexdigest()

    def __getstate__(self) -> dict:
        """Pickled with its names as one string (many sparse names pickle and load 10x faster so), which a
        process that has them by their digest does not split again."""
        state = dict(self.__dict__)
        text = _names_text(self.names)[0]
        if self.names and text is not None:
            state["names"] = text
        return state

    def __setstate__(self, state: dict) -> None:
        names = state["names"]
        if isinstance(names, str):  # split only when this process does not have them yet
            digest = state["names_digest"]
            state["names"] = _interned_names(digest, _NAMES.get(digest) or tuple(names.split("\n")))
        self.__dict__.update(state)

    def key(self) -> tuple:
        return self.model_dir, self.grammar, self.settings.search_key(), self.weights_digest


_LAST_NAMED: list = [None, None, ()]  # named_weights' last space, sparse indices and names: the same tuple again


def named_weights(space: FeatureSpace, weights) -> tuple[np.ndarray, tuple[str, ...]]:
    """A :class:`DecodeJob`'s ``(weights, names)`` of an array over ``space``: the dense weights and
    the non-zero sparse ones (a zero weighs nothing, and a tuned space can hold many names)."""
    weights = np.asarray(weights, dtype=np.float64)
    n = space.n_dense
    sparse = np.flatnonzero(weights[n:len(space)]) + n
    last_space, last_sparse, names = _LAST_NAMED
    if last_space is not space or not np.array_equal(last_sparse, sparse):  # a space's names never change
        names = tuple(space.dense_names) + tuple(space.name(i) for i in sparse.tolist())
        _LAST_NAMED[:] = [space, sparse, names]
    return np.concatenate([weights[:n], weights[sparse]]), names


@dataclass
class SentenceOutput:
    """The decoder's answer for one sentence: 1-best, its score and features, optional k-best.

    ``features`` are the 1-best's dense features and ``sparse`` its sparse ones ``{name: value}``
    (empty unless ``settings.sparse_features``); ``kbest`` the k-best list (``settings.kbest``);
    scores include the sparse features' contribution; ``n_nodes``/``n_edges`` the search graph's size
    (0 when nothing asked for the graph: a phrase-based 1-best is then decoded without it).
    """

    index: int
    best: str
    score: float
    features: np.ndarray
    kbest: KBestRows | None = None
    n_nodes: int = 0
    n_edges: int = 0
    sparse: dict = field(default_factory=dict)
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


def _ignore_interrupts() -> None:
    """SIGINT ignored from now on in this process (and the processes it starts), and no longer blocked:
    a Ctrl-C that came while it was blocked (:class:`_QuietSpawnProcess`) is dropped."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _start_worker(job: DecodeJob | None = None) -> None:
    """Initializer of :func:`process_pool`'s workers: Ctrl-C is the parent's to handle (SIGINT ignored;
    processes a worker starts inherit that), SIGTERM (:func:`stop_pool`) ends the worker and the processes
    it started, and the worker holds no semaphore that ending it at once would leak. With a ``job``, the
    worker loads its model before its first task (:func:`prepare`)."""
    _ignore_interrupts()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    in_worker_process()
    if job is not None:
        try:
            prepare(job)
        except Exception:  # an initializer's error breaks the pool: the first chunk loads again and says why
            _MODELS.clear()
            _DECODERS.clear()


def process_pool(jobs: int, prepared: DecodeJob | None = None) -> ProcessPoolExecutor:
    """A pool of ``jobs`` local worker processes whose workers leave Ctrl-C to the parent, each loading the
    model of the job ``prepared`` (if given) as it starts.  Workers start fresh ("spawn"): forking a process
    that has run a parallel numba kernel (training) or scipy can kill the child ("fork() called from a
    process already using GNU OpenMP")."""
    return ProcessPoolExecutor(max_workers=jobs, mp_context=spawn_context(), initializer=_start_worker,
                               initargs=(prepared,))


class _QuietSpawnProcess(multiprocessing.context.SpawnProcess):
    """A spawned process that starts with SIGINT blocked, until its code ignores it
    (:func:`_ignore_interrupts`): a Ctrl-C while it is still importing (a second or more on a busy
    machine) would otherwise print its KeyboardInterrupt traceback under the parent's one line.  (The
    parent's own SIGINT is blocked only for the start, in the starting thread; it is delivered after.)"""

    def start(self) -> None:
        if not hasattr(signal, "pthread_sigmask"):
            return super().start()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            super().start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


class _QuietSpawnContext(multiprocessing.context.SpawnContext):
    Process = _QuietSpawnProcess


_SPAWN = _QuietSpawnContext()


def spawn_context():
    """The "spawn" multiprocessing context of every process minismt starts; its processes start with
    SIGINT blocked (:class:`_QuietSpawnProcess`): their code must begin with :func:`_ignore_interrupts`,
    as :func:`process_pool`'s initializer and :func:`run_ignoring_interrupts` do."""
    return _SPAWN


def run_ignoring_interrupts(function, *args):
    """``function(*args)`` with SIGINT ignored: the target of a helper process (``multiprocessing.Process``)
    that its parent stops itself, so that Ctrl-C does not print the helper's traceback too (and with no
    semaphore left behind when the parent terminates it)."""
    _ignore_interrupts()
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


def _decoder(job: DecodeJob, sentences: Sequence[str] = ()):
    """This process's decoder for ``job`` (kept for the next chunk of the same job); with a Hiero job whose
    grammar is :data:`~minismt.decode.settings.PER_CHUNK`, a decoder on the grammar of ``sentences``."""
    if job.grammar == PER_CHUNK:
        return _chunk_decoder(job, sentences)
    key = job.key()
    decoder = _DECODERS.get(key)
    if decoder is None and job.grammar is not None:
        decoder = _DECODERS[key] = _hiero_decoder(job)
    if decoder is None:
        from minismt.decode import Decoder, PhraseModel
        model = _MODELS.get(job.model_dir)
        if model is None:
            _MODELS.clear()
            model = _MODELS[job.model_dir] = PhraseModel.load(job.model_dir)
        settings = job.settings
        decoder = Decoder(model, weights=job.weights, names=job.names or None, stack_size=settings.stack_size,
                          beam_threshold=settings.beam_threshold, distortion_limit=settings.distortion_limit,
                          sparse_features=settings.sparse_features,
                          word_pair_vocabulary=settings.word_pair_vocabulary)
        if len(_DECODERS) >= 8:
            _DECODERS.pop(next(iter(_DECODERS)))
        _DECODERS[key] = decoder
    return decoder


def _hiero_decoder(job: DecodeJob):
    from minismt.decode.hiero import load_model
    model = _MODELS.get((job.model_dir, job.grammar))
    if model is None:
        _MODELS.clear()
        model = _MODELS[(job.model_dir, job.grammar)] = load_model(job.model_dir, job.grammar, decoding=True)
    grammar, lm, _ = model
    if len(_DECODERS) >= 8:
        _DECODERS.pop(next(iter(_DECODERS)))
    return _hiero_decoder_of(job, grammar, lm)


def _chunk_decoder(job: DecodeJob, sentences: Sequence[str]):
    """A Hiero decoder on the grammar of ``sentences`` alone, read from the model's rule store (memory-mapped,
    opened once per process with the LM)."""
    store, lm = _rule_store(job)
    grammar = store.grammar(sentences, decoding=True, max_span=job.settings.max_chart_span)
    return _hiero_decoder_of(job, grammar, lm)


def _rule_store(job: DecodeJob):
    """This process's rule store and LM of ``job``'s Hiero model (opened once)."""
    from minismt.decode.hiero import store_and_lm
    key = (job.model_dir, "rule store")
    if key not in _MODELS:
        _MODELS.clear()
        _MODELS[key] = store_and_lm(job.model_dir)
    return _MODELS[key]


def prepare(job: DecodeJob) -> None:
    """Load this process's model for ``job`` before any input is read, as Moses loads its model first: the
    phrase table and LM (phrase-based), the grammar and LM (Hiero on a file's grammar) or the rule store and
    LM (Hiero per chunk), and, for a phrase-based model, the compiled search kernels (numba loads each from
    its cache at its first call) through a throwaway decoder on a one-word sentence. A stream's first line is
    then answered at full speed, and the fixed cost is paid before the input, where a run's start-up is
    measured (``decode-speed`` subtracts a run on an empty input, for every decoder)."""
    if job.grammar == PER_CHUNK:
        _rule_store(job)
        return
    decoder = _decoder(job)
    if job.grammar is None:
        from minismt.decode import Decoder
        warm = Decoder(decoder.model, stack_size=job.settings.stack_size)  # the job's own decoder is left as new
        warm.decode(["."], graph=not _best_only(job))


def prepared_executor(job: DecodeJob, executor: Executor | None = None, jobs: int = 1) -> Executor | None:
    """Where to decode ``job``, its models loaded (:func:`prepare`) before the input is read: here (``jobs <= 1``,
    no executor: None), or a :func:`process_pool` of ``jobs`` workers made and prepared here (the caller
    decodes on it and shuts it down, :func:`stop_pool` on an error); a caller's executor (a cluster) is returned
    as it is, its workers loading at their first chunk."""
    if executor is not None:
        return executor
    if jobs <= 1:
        prepare(job)
        return None
    pool = process_pool(jobs, prepared=job)
    try:  # a task submitted while no worker is idle starts one: all start now, each loading as it starts
        for future in [pool.submit(_ready) for _ in range(jobs)]:
            future.result()
    except BaseException:
        stop_pool(pool)
        raise
    return pool


def _ready() -> None:
    """A task that does nothing: a worker runs it once its initializer is done."""


def dask_client(address: str, timeout: float = 30.0):
    """A Dask distributed client of the scheduler at ``address`` (e.g. ``tcp://host:8786``): decode on its
    workers with ``client.get_executor()``; each worker needs the model folder on a path it can read (the
    same path as here) and minismt installed. A scheduler that cannot be reached within ``timeout`` seconds
    is an :class:`InputError` naming the address."""
    from distributed import Client  # 0.33 s, only when a cluster is asked for
    try:
        return Client(address, timeout=timeout)
    except (OSError, ValueError, TypeError) as err:
        raise InputError(f"--dask-scheduler {address}: {err}",
                         expected="the address of a running Dask scheduler, e.g. tcp://host:8786") from None


def _best_only(job: DecodeJob) -> bool:
    """Whether ``job`` needs only each sentence's 1-best: a phrase-based search then builds no search graph (a
    Hiero chart is its forest: always built)."""
    return (job.grammar is None and job.settings.kbest == 0 and job.mbr is None and not job.return_hypergraph
            and job.hypergraph_writer is None and job.hypergraph_dir is None)


def _hiero_decoder_of(job: DecodeJob, grammar, lm):
    from minismt.decode.hiero import HieroDecoder
    settings = job.settings
    return HieroDecoder(grammar, lm, job.weights, table_limit=settings.table_limit,
                        pop_limit=settings.pop_limit, max_span=settings.max_chart_span,
                        sparse_features=settings.sparse_features, names=None if job.weights is None else job.names)


def decode_chunk(job: DecodeJob, indices: Sequence[int], sentences: Sequence[str]) -> list[SentenceOutput]:
    """Decode some sentences in this process (the unit of work sent to an executor)."""
    decoder = _decoder(job, sentences)
    k, distinct = job.settings.kbest, job.settings.distinct
    best_only = _best_only(job)
    outputs = []
    for index, sentence in zip(indices, sentences):
        result = decoder.decode(sentence, graph=False) if best_only else decoder.decode(sentence)
        graph = result.hypergraph
        output = SentenceOutput(index, result.best, float(result.score), _dense(result.features),
                                n_nodes=0 if graph is None else graph.n_nodes,
                                n_edges=0 if graph is None else graph.n_edges, sparse=dict(result.sparse))
        if job.mbr is not None:
            _choose_by_mbr(job, decoder, result.hypergraph, output)
        if k > 0:  # the space grows as sentences are decoded: the weights over it as it is now
            found = result.hypergraph.kbest(k, decoder.full_weights(), distinct=distinct)
            output.kbest = KBestRows.of(found.texts, found.scores, found.feat_offsets, found.feat_ids,
                                        found.feat_values, decoder.space)
        if job.return_hypergraph:
            graph = result.hypergraph
            if job.hypergraph_edges and graph.n_edges > job.hypergraph_edges[index]:
                graph = graph.prune_to(job.hypergraph_edges[index], decoder.full_weights())
            output.hypergraph = graph.to_portable()
        if job.hypergraph_writer is not None:
            job.hypergraph_writer(result, job.hypergraph_dir, index)
        elif job.hypergraph_dir is not None:
            from minismt.hypergraph import write_cdec_json
            write_cdec_json(result.hypergraph, os.path.join(job.hypergraph_dir, f"{index}.json.gz"))
        outputs.append(output)
    return outputs


def _choose_by_mbr(job: DecodeJob, decoder, graph, output: SentenceOutput) -> None:
    """Replace the output's 1-best (text, score, features) by the MBR or consensus choice among the graph's
    ``job.mbr_size`` best distinct translations (:mod:`minismt.decode.mbr`)."""
    from minismt.decode.mbr import consensus, kbest_mbr
    weights = decoder.full_weights()
    found = graph.kbest(job.mbr_size, weights, distinct=True)
    if not found.texts:
        return
    if job.mbr == "kbest":
        chosen = kbest_mbr(found.texts, found.scores, job.mbr_scale)
    else:
        chosen = consensus(graph, weights, found.texts, job.mbr_scale)
    rows = KBestRows.of(found.texts, found.scores, found.feat_offsets, found.feat_ids, found.feat_values,
                        decoder.space)
    output.best, output.score = found.texts[chosen], float(found.scores[chosen])
    output.features = np.array(rows.features[chosen], dtype=np.float64)
    lo, hi = int(rows.indptr[chosen]), int(rows.indptr[chosen + 1])
    output.sparse = {rows.names[int(i)]: float(v) for i, v in zip(rows.indices[lo:hi], rows.values[lo:hi])}


def force_chunk(job: DecodeJob, indices: Sequence[int], sentences: Sequence[str],
                references: Sequence[str]) -> list[KBestRows | None]:
    """Forced decoding of some sentences into their references (the unit sent to an executor): per
    sentence one row, the reference with its best derivation's score and features, or None where the
    reference is not reachable within the search's pruning."""
    decoder = _decoder(job, sentences)
    outputs = []
    for sentence, reference in zip(sentences, references):
        result = decoder.force(sentence, reference)
        if result is None:
            outputs.append(None)
            continue
        space = FeatureSpace(decoder.space.dense_names, result.sparse)
        ids = np.arange(len(space), dtype=np.int32)
        values = np.concatenate([result.features, np.fromiter(result.sparse.values(), float, len(result.sparse))])
        outputs.append(KBestRows.of([reference], [result.score], np.array([0, len(space)]), ids, values, space))
    return outputs


def force_corpus(job: DecodeJob, sentences: Sequence[str], references: Sequence[str],
                 executor: Executor | None = None, jobs: int = 1, chunk_size: int = 16) -> list[KBestRows | None]:
    """:func:`force_chunk` over a corpus, in order, on the executor (or ``jobs`` local processes)."""
    if len(references) != len(sentences):
        raise InputError(f"{len(references)} references for {len(sentences)} sentences",
                         expected="one reference per sentence")
    chunks = [list(range(start, min(start + chunk_size, len(sentences))))
              for start in range(0, len(sentences), chunk_size)]
    args = [(job, c, [sentences[i] for i in c], [references[i] for i in c]) for c in chunks]
    return [rows for part in _map_chunks(force_chunk, args, executor, jobs) for rows in part]


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


def decode_stream(job: DecodeJob, lines: Iterable[str], executor: Executor | None = None, jobs: int = 1,
                  window: int | None = None, chunk_size: int = 16) -> Iterator[SentenceOutput]:
    """Decode ``lines`` as they come (standard input, a pipe), yielding each sentence's output in input order
    as soon as it and every sentence before it are decoded.

    A reader thread reads the lines as they arrive; each chunk of work is the lines read and not yet taken
    when it is made, at most ``chunk_size``: a line typed at a terminal is decoded alone and at once, a piped
    file in full chunks (a Hiero job with the grammar :data:`~minismt.decode.settings.PER_CHUNK` reads one
    grammar per chunk). Here (``jobs <= 1``, no executor) a chunk is decoded when the one before it is done;
    otherwise chunks go to the executor (the caller's, else a :func:`process_pool` made here), at most
    ``window`` (default ``4 * jobs``) ahead of the one yielded, so a long input is never held in memory.
    Indices count lines from 0 (a forest written by the job is ``<index>``)."""
    stop = threading.Event()
    window = max(1, window or 4 * max(jobs, 1))
    incoming: queue.Queue = queue.Queue(maxsize=window * chunk_size)
    end = object()

    def put(target: queue.Queue, item) -> bool:
        """Put ``item`` unless told to stop (the consumer left) while ``target`` is full."""
        while not stop.is_set():
            try:
                target.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for item in enumerate(lines):
                if not put(incoming, item):
                    return
        except BaseException as error:  # reading failed: raised in order, after the lines before it
            put(incoming, error)
            return
        put(incoming, end)

    def chunks() -> Iterator[tuple[list[int], list[str]]]:
        finished = False
        while not finished:
            taken = [incoming.get()]
            while len(taken) < chunk_size and taken[-1] is not end and not isinstance(taken[-1], BaseException):
                try:
                    taken.append(incoming.get_nowait())
                except queue.Empty:
                    break
            last = taken[-1]
            finished = last is end or isinstance(last, BaseException)
            if finished:
                taken.pop()
            if taken:
                yield [i for i, _ in taken], [line for _, line in taken]
            if isinstance(last, BaseException):
                raise last

    threading.Thread(target=read, name="decode-stream-reader", daemon=True).start()
    if executor is None and jobs <= 1:
        try:
            for indices, chunk in chunks():
                yield from decode_chunk(job, indices, chunk)
        finally:
            stop.set()
        return
    pool = executor if executor is not None else process_pool(jobs)
    pending: queue.Queue = queue.Queue(maxsize=window)

    def submit() -> None:
        try:
            for indices, chunk in chunks():
                if not put(pending, pool.submit(decode_chunk, job, indices, chunk)):
                    return
        except BaseException as error:
            put(pending, error)
            return
        put(pending, end)

    threading.Thread(target=submit, name="decode-stream-submitter", daemon=True).start()
    try:
        while True:
            item = pending.get()
            if item is end:
                break
            if isinstance(item, BaseException):
                raise item
            yield from item.result()
    except BaseException:
        stop.set()
        while not pending.empty():  # what was submitted and not taken is cancelled
            item = pending.get_nowait()
            if isinstance(item, Future):
                item.cancel()
        if executor is None:
            stop_pool(pool)
        raise
    stop.set()
    if executor is None:
        pool.shutdown()


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
