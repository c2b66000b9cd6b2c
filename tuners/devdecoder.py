"""Dev-set decoders of a :class:`~tuners.loop.TuningRun`: minismt's own, and external decoder programs."""

from __future__ import annotations

from abc import ABC, abstractmethod
import hashlib
import json
import os
import shutil
import subprocess
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import asdict, replace
from typing import Sequence

import numpy as np

from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph import Hypergraph
from minismt.io import atomic_write, file_sha256, json_sha256, lines_sha256, write_lines
from minismt.kbest import KBest, kbest_of
from minismt.manifest import load_manifest
from minismt.decode.settings import DecoderSettings
from minismt.parallel import (DecodeJob, decode_corpus, decode_requests, force_corpus, named_weights, process_pool,
                             stop_pool)


class DevDecoder(ABC):
    """What the tuning loop decodes the dev set with: :meth:`decode` is required; the optional
    capabilities are explicit, each a flag the decoder sets and the method it then overrides:

    - ``outputs_forests``, :meth:`decode_hypergraphs`: every dev sentence's forest (hypergraph tuners);
    - ``decodes_with_forests``, :meth:`decode_with_forests`: the k-best lists and the forests of one decode
      (the tuning loop's step search);
    - ``forces``, :meth:`force`: forced decoding to the references (StructSVM's reference features);
    - ``decodes_batches``, :meth:`decode_batches`: sentence subsets under several weights (online tuners).

    :meth:`identity` (what decides the output besides the weights, for ``run.json``),
    :meth:`fixed_by_config` (features the decoder's configuration keeps out of tuning) and
    :meth:`close` (release processes) have defaults. ``space`` is the decoder's feature space.
    """

    space: FeatureSpace
    outputs_forests = False
    decodes_with_forests = False
    forces = False
    decodes_batches = False
    default_forest_prune = 0
    """Hypergraph tuners tune on each forest's ``N`` x (reference words) best edges (0: the whole forest;
    :class:`~tuners.loop.TuningRun`'s ``forest_prune``)."""
    frees_fixed = True
    """Whether the user may free (``minismt tune --free``) a feature :meth:`fixed_by_config` fixes."""

    def fixed_by_config(self, name: str) -> bool:
        """Whether the decoder's configuration keeps this feature's weight out of tuning (Moses'
        ``tuneable=false``; a feature cdec's start weights do not name); see :mod:`tuners.fixing`."""
        return False

    @abstractmethod
    def decode(self, weights: np.ndarray, iteration: int) -> tuple[KBest, list[str]]:
        """The k-best list (no statistics needed) and the 1-best string of every dev sentence."""

    def decode_hypergraphs(self, weights: np.ndarray, iteration: int) -> tuple[list, list[str]]:
        """The forest of every dev sentence under ``weights`` and its Viterbi string."""
        raise InputError(f"{type(self).__name__} does not output hypergraphs",
                         expected="a decoder with forests (minismt's, Moses', cdec's)")

    def decode_with_forests(self, weights: np.ndarray, iteration: int,
                            max_edges: Sequence[int] = ()) -> tuple[KBest, list[str], list]:
        """What :meth:`decode` returns and the forest of every dev sentence, from one decode; with
        ``max_edges``, sentence ``i``'s forest may be pruned to its ``max_edges[i]`` edges of highest
        max-marginal under ``weights`` (:meth:`Hypergraph.prune_to`)."""
        raise InputError(f"{type(self).__name__} does not output k-best lists and forests from one decode",
                         expected="minismt's decoder for the forest step search (--step-search none otherwise)")

    def force(self, weights: np.ndarray, references: Sequence[str], iteration: int) -> KBest:
        """The derivations of each reference (forced decoding)."""
        raise InputError(f"{type(self).__name__} cannot force-decode", expected="minismt's decoder")

    def decode_batches(self, requests: Sequence[tuple[np.ndarray, Sequence[int]]], iteration: int) -> list[KBest]:
        """One k-best list per ``(weights, sentence indices)`` request."""
        raise InputError(f"{type(self).__name__} decodes the whole dev set only",
                         expected="a decoder with decode_batches (minismt's) for an online tuner")

    def decode_batch_forests(self, requests: Sequence[tuple[np.ndarray, Sequence[int]]], iteration: int) -> list:
        """The forests of some dev sentences under per-request weights: one list of forests per
        ``(weights, sentence indices)`` request (an online tuner's hope and fear on forests)."""
        raise InputError(f"{type(self).__name__} cannot decode mini-batches into forests",
                         expected="a decoder with forests and mini-batches (minismt's, Moses', cdec's)")

    def identity(self) -> dict:
        """What decides the output besides the weights (``run.json``)."""
        return {"decoder": type(self).__name__}

    def close(self) -> None:
        """Release what the decoder holds (processes); it is not used afterwards."""


class MinismtDevDecoder(DevDecoder):
    """Decodes the dev sentences with a trained model, returning distinct k-best lists.

    ``settings`` (:class:`~minismt.decode.DecoderSettings`; by default Moses' tuning lists, 100
    distinct strings) with ``options`` (its fields by name, e.g. ``stack_size=100``) put in.
    Decoding runs in ``settings.jobs`` local processes or on ``executor`` (e.g. a Dask client's).
    ``sparse_features`` (e.g. ``("rule-id", "word-pair")``, see :mod:`minismt.decode.sparse`)
    makes the decoder emit sparse features: k-best lists, forests and forced derivations
    carry them, and :attr:`space` grows by their names as they are met; ``word_pair_vocabulary``
    limits the word pairs to the most frequent words (both are in :meth:`identity`).
    """

    outputs_forests = decodes_with_forests = forces = decodes_batches = True

    def __init__(self, model_dir: str, sentences: Sequence[str], settings: DecoderSettings | None = None,
                 executor: Executor | None = None, progress: bool = False, **options):
        self.settings = replace(settings or DecoderSettings(kbest=100), distinct=True, **options)
        manifest = load_manifest(model_dir)
        self.model_dir = model_dir
        self.sentences = list(sentences)
        # a Hiero model decodes with the grammar built for these sentences
        self.grammar = None
        if manifest.get("model") == "hiero":
            from minismt.decode.hiero import grammar_for
            from minismt.progress import log
            self.grammar = grammar_for(model_dir, self.sentences, log=log if progress else None)
        self.space = FeatureSpace(manifest["features"])
        self.default_weights = self.space.weights(manifest["default_weights"], grow=False)
        self.executor = executor
        self.progress = progress
        self._pool: ProcessPoolExecutor | None = None
        self.vocab = Vocabulary()  # shared by every iteration's forests (hypergraph tuners)

    @property
    def sparse_features(self) -> tuple[str, ...]:
        return self.settings.sparse_features

    def identity(self) -> dict:
        """What decides this decoder's output besides the weights (a tuning run's ``run.json``): the model
        (its training steps' input keys and features), the dev sentences and every search setting but the
        number of processes."""
        manifest = load_manifest(self.model_dir)
        model = {"features": manifest["features"], "lm_order": manifest.get("lm_order"),
                 "steps": {name: step.get("key") for name, step in manifest.get("steps", {}).items()}}
        search = {name: list(value) if isinstance(value, tuple) else value
                  for name, value in asdict(self.settings).items() if name != "jobs"}
        return {"decoder": "minismt", "model": json_sha256(model), "dev_source": lines_sha256(self.sentences),
                **({"grammar": self.grammar} if self.grammar is not None else {}), **search}

    def _job(self, weights: np.ndarray, settings: DecoderSettings | None = None, **fields) -> DecodeJob:
        w, names = named_weights(self.space, weights)
        return DecodeJob(self.model_dir, settings or self.settings, w, names, grammar=self.grammar, **fields)

    def _executor(self) -> Executor | None:
        """The caller's executor, or a process pool kept for the decoder's lifetime (workers load
        the model once, not once per decode)."""
        if self.executor is None and self.settings.jobs > 1 and self._pool is None:
            self._pool = process_pool(self.settings.jobs)
        return self.executor if self.executor is not None else self._pool

    def close(self) -> None:
        """Stop the decoder's own process pool, if it made one (at once, also after Ctrl-C: its workers
        ignore SIGINT and would otherwise finish their chunks)."""
        if self._pool is not None:
            stop_pool(self._pool)
            self._pool = None

    def decode(self, weights: np.ndarray, iteration: int) -> tuple[KBest, list[str]]:
        outputs = decode_corpus(self._job(weights), self.sentences, executor=self._executor(),
                                jobs=self.settings.jobs, progress=self.progress)
        return self._kbest(outputs, iteration), [o.best for o in outputs]

    def decode_with_forests(self, weights: np.ndarray, iteration: int,
                            max_edges: Sequence[int] = ()) -> tuple[KBest, list[str], list]:
        """The k-best lists, the 1-best and the search graphs of one decode (the k-best lists come from the
        search graphs, so they are the graphs' best distinct derivations); the graphs are pruned to
        ``max_edges`` in the worker processes, so that only what is kept travels back."""
        job = self._job(weights, return_hypergraph=True, hypergraph_edges=tuple(int(n) for n in max_edges))
        outputs = decode_corpus(job, self.sentences,
                                executor=self._executor(), jobs=self.settings.jobs, progress=self.progress)
        kbest = self._kbest(outputs, iteration)
        graphs = [Hypergraph.from_portable(o.hypergraph, self.space, self.vocab) for o in outputs]
        return kbest, [o.best for o in outputs], graphs

    def _kbest(self, outputs, iteration: int) -> KBest:
        kbest = kbest_of([o.kbest for o in outputs], self.space)
        kbest.iterations[:] = iteration
        return kbest

    def decode_hypergraphs(self, weights: np.ndarray, iteration: int) -> tuple[list, list[str]]:
        """The search graph of every dev sentence under ``weights`` (hypergraph tuners) and the 1-best,
        over this decoder's feature space and one vocabulary shared by every iteration's forests."""
        job = self._job(weights, replace(self.settings, kbest=0), return_hypergraph=True)
        outputs = decode_corpus(job, self.sentences, executor=self._executor(), jobs=self.settings.jobs,
                                progress=self.progress)
        graphs = [Hypergraph.from_portable(o.hypergraph, self.space, self.vocab) for o in outputs]
        return graphs, [o.best for o in outputs]

    def force(self, weights: np.ndarray, references: Sequence[str], iteration: int) -> KBest:
        """Forced decoding of every dev sentence into its reference under ``weights``: one instance
        per sentence holding the best reference derivation's features, empty when the reference
        cannot be reached (structured SVMs use these as the reference's feature vector)."""
        found = force_corpus(self._job(weights), self.sentences, list(references),
                             executor=self._executor(), jobs=self.settings.jobs)
        kbest = kbest_of(found, self.space)
        kbest.iterations[:] = iteration
        return kbest

    def decode_batches(self, requests: Sequence[tuple[np.ndarray, Sequence[int]]],
                       iteration: int) -> list[KBest]:
        """The k-best lists of some dev sentences under per-request weights (online tuners):
        one KBest per ``(weights, sentence indices)`` request, its ``sentence_ids`` the indices."""
        outputs = decode_requests([(self._job(w), list(indices)) for w, indices in requests],
                                  self.sentences, executor=self._executor(), jobs=self.settings.jobs)
        lists = []
        for (_, indices), answer in zip(requests, outputs):
            kbest = kbest_of([o.kbest for o in answer], self.space, np.asarray(list(indices), dtype=np.int64))
            kbest.iterations[:] = iteration
            lists.append(kbest)
        return lists

    def decode_batch_forests(self, requests: Sequence[tuple[np.ndarray, Sequence[int]]], iteration: int) -> list:
        """The search graphs of some dev sentences under per-request weights, over this decoder's space."""
        jobs = [(self._job(w, replace(self.settings, kbest=0), return_hypergraph=True), list(indices))
                for w, indices in requests]
        outputs = decode_requests(jobs, self.sentences, executor=self._executor(), jobs=self.settings.jobs)
        return [[Hypergraph.from_portable(o.hypergraph, self.space, self.vocab) for o in answer]
                for answer in outputs]


class ProgramDevDecoder(DevDecoder):
    """Base of the dev decoders that run an external decoder program (Moses, cdec, any command).

    Each decode runs the program once, without a shell, in its own folder
    ``work_dir/decode.<iteration>[.<batch>]`` holding the weights it was given,
    its output and its stderr. A program that cannot start, exits non-zero, is
    killed, or leaves a sentence without a hypothesis (a truncated list) is an
    :class:`InputError` quoting the end of its stderr; the tuning loop has then
    kept every finished iteration, and the same command resumes. A decode that
    finished (``done.json`` matching the weights and the input) is read again
    instead of being rerun, so a run killed between decoding and its checkpoint
    does not decode twice. Ctrl-C kills the program too.

    Forests (hypergraph tuners) are deleted once read, with the decode's ``done.json`` (a resumed run
    decodes them again), unless :attr:`keep_forests` is set.

    Subclasses give the argument list (:meth:`_command`) and read the output
    (:meth:`_read_kbest`, :meth:`_read_hypergraphs`).
    """

    name = "decoder"
    decodes_batches = True  # one program run per mini-batch
    keep_forests = False
    """Keep every decode's forests on disk (``minismt tune --keep-forests``)."""

    def __init__(self, command: Sequence[str], space: FeatureSpace, sentences: Sequence[str], work_dir: str,
                 kbest: int = 100):
        if isinstance(command, str) or not command:
            raise InputError(f"decoder command {command!r}", expected="a non-empty argument list")
        if kbest < 1:
            raise InputError(f"kbest={kbest}", expected="at least 1")
        self.command = [str(item) for item in command]
        self.space = space
        self.sentences = list(sentences)
        self.work_dir = os.fspath(work_dir)
        self.kbest = kbest
        self._batches: dict[int, int] = {}

    def identity(self) -> dict:
        """What decides the program's output besides the weights (a tuning run's ``run.json``): the
        command, its configuration file's bytes (``config``, where the driver has one), the dev sentences
        and the list size."""
        config = getattr(self, "config", None)
        return {"decoder": self.name, "command": self.command, "dev_source": lines_sha256(self.sentences),
                "kbest": self.kbest, "config": file_sha256(config) if config and os.path.isfile(config) else None}

    # ---- hooks ------------------------------------------------------------------------------
    @abstractmethod
    def _command(self, folder: str, weights: np.ndarray, input_path: str, hypergraph_dir: str | None,
                 kbest: bool = True) -> list[str]:
        """The argument list of one decode (write the weights into ``folder``); stdout goes to
        ``folder/stdout``. With ``hypergraph_dir`` the program writes its forests there; with ``kbest`` its
        k-best lists (both from one run when both are asked for)."""

    @abstractmethod
    def _read_kbest(self, folder: str, n_sentences: int) -> KBest:
        """The k-best lists the decode in ``folder`` wrote."""

    def _read_hypergraphs(self, hypergraph_dir: str, n_sentences: int) -> list:
        raise InputError(f"the {self.name} driver reads k-best lists only", expected="an n-best tuner")

    # ---- running ----------------------------------------------------------------------------
    def _run(self, folder: str, weights: np.ndarray, sentences: Sequence[str], hypergraphs: bool,
             kbest: bool = True) -> str | None:
        """Run the program on ``sentences`` into ``folder`` unless a finished run is there: its k-best lists
        (``kbest``), its forests (``hypergraphs``) or both from one run; returns the forest folder (None
        without forests)."""
        hypergraph_dir = os.path.join(folder, "hypergraphs") if hypergraphs else None
        outputs = "both" if hypergraphs and kbest else hypergraphs
        digest = hashlib.sha256(np.asarray(weights, dtype=np.float64).tobytes()
                                + "\n".join(sentences).encode("utf-8")
                                + f"|{self.kbest}|{outputs}".encode()).hexdigest()
        marker = os.path.join(folder, "done.json")
        try:
            with open(marker, encoding="utf-8") as handle:
                if json.load(handle).get("digest") == digest:
                    return hypergraph_dir
        except (OSError, ValueError):
            pass
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        os.makedirs(hypergraph_dir or folder)
        input_path = os.path.join(folder, "input")
        write_lines(input_path, sentences)
        argv = self._command(folder, weights, input_path, hypergraph_dir, kbest)
        stderr_path = os.path.join(folder, "stderr")
        with open(os.path.join(folder, "stdout"), "wb") as out, open(stderr_path, "wb") as err:
            try:
                process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
            except OSError as error:
                raise InputError(f"cannot run the {self.name} decoder {argv[0]!r}: {error.strerror or error}",
                                 expected="a decoder command that runs (--decoder-cmd)") from None
            try:
                status = process.wait()
            except BaseException:
                process.kill()
                process.wait()
                raise
        if status != 0:
            how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
            raise InputError(f"the {self.name} decoder {how} (command: {' '.join(argv)[:300]}); its stderr "
                             f"ends: {_tail(stderr_path)}; finished iterations are kept, rerun to resume",
                             stderr_path)
        with atomic_write(marker) as out:
            json.dump({"digest": digest, "command": argv}, out)
        return hypergraph_dir

    def _checked(self, kbest: KBest, folder: str) -> KBest:
        """``kbest`` if every sentence has a hypothesis, else an InputError (a truncated list)."""
        sizes = np.diff(kbest.offsets)
        if sizes.size and sizes.min() == 0:
            empty = int(np.argmax(sizes == 0))
            os.unlink(os.path.join(folder, "done.json"))
            raise InputError(f"the {self.name} decoder's k-best list has no hypothesis for sentence {empty} "
                             f"({int((sizes == 0).sum())} of {sizes.size} empty; a truncated list?); its stderr "
                             f"ends: {_tail(os.path.join(folder, 'stderr'))}", folder,
                             expected="at least one hypothesis per dev sentence")
        return kbest

    def _folder(self, iteration: int, batch: int | None = None) -> str:
        name = f"decode.{iteration}" if batch is None else f"decode.{iteration}.batch{batch}"
        return os.path.join(self.work_dir, name)

    # ---- the DevDecoder interface ------------------------------------------------------------------
    def decode(self, weights: np.ndarray, iteration: int) -> tuple[KBest, list[str]]:
        """The dev set's k-best lists under ``weights`` and the decoder's own 1-best: the first hypothesis it
        listed for each sentence (Moses and cdec list the best first). Rescoring the lists with ``weights``
        would differ where the decoder scores a feature its lists do not show (Moses' UnknownWordPenalty0)."""
        folder = self._folder(iteration)
        self._run(folder, weights, self.sentences, hypergraphs=False)
        kbest = self._checked(self._read_kbest(folder, len(self.sentences)), folder)
        kbest.iterations[:] = iteration
        return kbest, [kbest.hypothesis(int(r)) for r in kbest.offsets[:-1]]

    def decode_hypergraphs(self, weights: np.ndarray, iteration: int) -> tuple[list, list[str]]:
        """The dev set's forests under ``weights`` (hypergraph tuners) and their Viterbi strings."""
        folder = self._folder(iteration)
        hypergraph_dir = self._run(folder, weights, self.sentences, hypergraphs=True, kbest=False)
        graphs = self._forests(folder, hypergraph_dir, len(self.sentences))
        # features the forests brought into the space (cdec's LanguageModel_OOV when the weights do not name
        # it) weigh 0 in the decode, as in the program
        grown = self.space.start_weights(weights)
        best = [graph.viterbi(grown) for graph in graphs]
        return graphs, [derivation.text if derivation is not None else "" for derivation in best]

    def decode_with_forests(self, weights: np.ndarray, iteration: int,
                            max_edges: Sequence[int] = ()) -> tuple[KBest, list[str], list]:
        """The k-best lists, the program's own 1-best (the first of each list, as :meth:`decode`) and the
        forests of one program run (Moses: ``-n-best-list`` with ``-output-search-graph-hypergraph``; cdec:
        ``-k`` with ``-O``); the forests are returned whole (the tuning loop prunes them to ``max_edges``)."""
        folder = self._folder(iteration)
        hypergraph_dir = self._run(folder, weights, self.sentences, hypergraphs=True, kbest=True)
        kbest = self._checked(self._read_kbest(folder, len(self.sentences)), folder)
        kbest.iterations[:] = iteration
        graphs = self._forests(folder, hypergraph_dir, len(self.sentences))
        return kbest, [kbest.hypothesis(int(r)) for r in kbest.offsets[:-1]], graphs

    def decode_batch_forests(self, requests: Sequence[tuple[np.ndarray, Sequence[int]]], iteration: int) -> list:
        """One program run per ``(weights, sentence indices)`` request, writing that mini-batch's forests."""
        out = []
        for weights, indices in requests:
            folder, indices = self._batch_folder(iteration), [int(i) for i in indices]
            hypergraph_dir = self._run(folder, weights, [self.sentences[i] for i in indices], hypergraphs=True,
                                       kbest=False)
            out.append(self._forests(folder, hypergraph_dir, len(indices)))
        return out

    def _batch_folder(self, iteration: int) -> str:
        """The folder of the iteration's next mini-batch decode."""
        batch = self._batches.get(iteration, 0)
        self._batches[iteration] = batch + 1
        return self._folder(iteration, batch)

    def _forests(self, folder: str, hypergraph_dir: str, n_sentences: int) -> list:
        """The forests a finished decode of ``n_sentences`` sentences in ``folder`` wrote, one per sentence; deleted
        once read (with the decode's ``done.json``, so a resume decodes again) unless :attr:`keep_forests`."""
        graphs = self._read_hypergraphs(hypergraph_dir, n_sentences)
        if len(graphs) != n_sentences:
            os.unlink(os.path.join(folder, "done.json"))
            raise InputError(f"{len(graphs)} forests for {n_sentences} sentences", hypergraph_dir,
                             expected="one forest per sentence")
        if not self.keep_forests:
            os.unlink(os.path.join(folder, "done.json"))
            shutil.rmtree(hypergraph_dir)
        return graphs

    def decode_batches(self, requests: Sequence[tuple[np.ndarray, Sequence[int]]],
                       iteration: int) -> list[KBest]:
        """Online tuners: one program run per ``(weights, sentence indices)`` request (a decoder
        start per mini-batch, slow for decoders that load a large model)."""
        lists = []
        for weights, indices in requests:
            folder, indices = self._batch_folder(iteration), [int(i) for i in indices]
            self._run(folder, weights, [self.sentences[i] for i in indices], hypergraphs=False)
            kbest = self._checked(self._read_kbest(folder, len(indices)), folder)
            kbest.sentence_ids[:] = indices
            kbest.iterations[:] = iteration
            lists.append(kbest)
        return lists


def _tail(path: str, size: int = 2000) -> str:
    """The last ``size`` characters of a text file, or a note that it is empty."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size))
            text = handle.read().decode("utf-8", errors="replace").strip()
    except OSError:
        return "(no stderr)"
    return text or "(nothing)"
