"""``minismt pipeline``: corpus -> train -> tune (tuners x seeds) -> test -> report, every step cached.

Each step keeps its outputs in ``WORK/<step>-<key>/`` where the key is the sha256
of the step's configuration and of its inputs (the digest of the corpus files,
the model's training keys, the tuned weights, ...). A step that finished writes
``step.json`` last; when the pipeline runs again a step whose folder holds a
``step.json`` with the same key is skipped ("cached" in the log). A tuning run
that was killed resumes from its last checkpoint (:class:`tuners.loop.TuningRun`
keeps one per iteration in its run folder) and ends with the same weights as an
uninterrupted run; a training step that was killed redoes only its unfinished
parts (:class:`minismt.train.Trainer` caches its own sub-steps).

Everything the pipeline does is appended to ``WORK/pipeline.log`` with a time
stamp: which step ran or was cached, its key and its time.

``minismt --help`` imports this module (minismt.pipeline imports it), so the steps import the
tuners, the decoder, the trainer, the corpora and the report when they run: importing them here
would add 0.86 s to every ``minismt`` command's start-up (0.11 s).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import asdict, dataclass, field
from typing import Callable

from minismt import __version__
from minismt.decode.settings import DecoderSettings
from minismt.errors import InputError
from minismt.io import atomic_write, file_sha256, json_sha256, read_lines, write_lines
from minismt.manifest import load_manifest
from minismt.pipeline.config import LOCAL, SYNTHETIC, PipelineConfig
from minismt.pipeline.log import PipelineLog
from minismt.progress import bar as progress_bar

STEP_FILE = "step.json"
LOG_FILE = "pipeline.log"
STEP_FORMAT = 1  # bump when a step's outputs change meaning, so that old folders are not reused


def files_digest(paths) -> str:
    """sha256 over the sha256 of each file, in order."""
    h = hashlib.sha256()
    for path in paths:
        h.update(file_sha256(path).encode())
    return h.hexdigest()


@dataclass
class StepOutcome:
    """A step of this pipeline run: was it cached, how long it took (when it ran), what it gave."""

    step: str
    label: str
    key: str
    folder: str
    cached: bool
    seconds: float
    result: dict = field(default_factory=dict)
    ran_seconds: float | None = None  # how long the step took when it ran (also for a cached step)


def _read_step(folder: str, key: str) -> dict | None:
    try:
        with open(os.path.join(folder, STEP_FILE), encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    return record if record.get("key") == key and record.get("format") == STEP_FORMAT else None


def _write_step(folder: str, step: str, label: str, key: str, key_parts: dict, seconds: float,
                result: dict) -> None:
    record = {"format": STEP_FORMAT, "step": step, "label": label, "key": key, "inputs": key_parts,
              "seconds": round(seconds, 3), "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "minismt": __version__, "result": result}
    with atomic_write(os.path.join(folder, STEP_FILE)) as out:
        json.dump(record, out, indent=1, sort_keys=True, default=str)


# ---- the tuning run of one (tuner, seed), also run in worker processes ------------------------
RUN_OPTIONS = ("iterations", "seed", "accumulate", "reset_after", "keep", "lowercase", "params", "fix",
               "step_search", "decode_norm", "accept")
"""The keys of a tuning run's spec (the pipeline's ``[tune]`` table) that :func:`tuners.runs.tuning_run` takes."""


def tune_one(spec: dict, log: Callable[[str], None] | None = None) -> dict:
    """Tune (or resume) one run described by ``spec``; returns its results. Logs its start to ``log``,
    or (in a worker process) appends it to the log file ``spec["log_path"]``."""
    from minismt.parallel import dask_client
    from tuners.runs import minismt_tuning_run, tuning_settings
    began = time.perf_counter()
    if log is None and spec.get("log_path"):
        log = PipelineLog(spec["log_path"], echo=False)
    if log is not None:
        done = _checkpoint_progress(spec["run_dir"], spec["iterations"])
        how = f"resuming after iteration {done - 1}" if done else "running"
        log(f"{spec['label']}: {how} (key {spec['key'][:12]}, pid {os.getpid()}, {spec['run_dir']})")
    os.makedirs(spec["folder"], exist_ok=True)
    sources = read_lines(spec["dev_src"])
    references = [[r] for r in read_lines(spec["dev_ref"])]
    client = dask_client(spec["dask_scheduler"]) if spec.get("dask_scheduler") else None
    try:
        run = minismt_tuning_run(spec["model_dir"], sources, references, spec["tuner"], spec["run_dir"],
                                 tuning_settings(spec), executor=None if client is None else client.get_executor(),
                                 **{k: spec[k] for k in RUN_OPTIONS})
        decoder = run.decoder
        try:
            final = run.run(decoder.default_weights)
        finally:
            decoder.close()
    finally:
        if client is not None:
            client.close()
    history = [dict(r.__dict__) for r in run.history]
    return {"history": history, "weights": decoder.space.weights_dict(final, skip_zero_sparse=True),
            "tune_seconds": round(sum(r["seconds"] for r in history), 3),
            "best_dev_bleu": max((r["dev_bleu"] for r in history), default=None),
            "accumulate": run.accumulate, "wall_seconds": round(time.perf_counter() - began, 3)}


def _warm_up(spec: dict) -> None:
    """Decode one dev sentence into a k-best list here, before worker processes start: numba compiles the
    decoder's kernels once and caches them, instead of every worker compiling them at the same time."""
    from minismt.parallel import DecodeJob, decode_chunk
    from tuners.runs import tuning_settings
    sources = read_lines(spec["dev_src"])
    if sources:
        decode_chunk(DecodeJob(spec["model_dir"], tuning_settings(spec),
                               grammar=grammar_of(spec["model_dir"], sources)), [0], sources[:1])


def grammar_of(model_dir: str, sentences: list[str]) -> str | None:
    """The grammar of a Hiero model for ``sentences`` (None for a phrase-based model)."""
    if load_manifest(model_dir).get("model") != "hiero":
        return None
    from minismt.decode.hiero import grammar_for
    return grammar_for(model_dir, sentences)


def _describe(err: BaseException) -> str:
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _checkpoint_progress(run_dir: str, max_iter: int) -> int:
    """Iterations a run has finished, from its checkpoint (max_iter once it is done)."""
    try:
        with open(os.path.join(run_dir, "checkpoint.json"), encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return 0
    return max_iter if state.get("done") else min(max_iter, int(state.get("iteration", -1)) + 1)


class _Poller(threading.Thread):
    """Moves a progress bar to the sum of the pending runs' finished iterations."""

    def __init__(self, bar, runs: list[tuple[str, int]], interval: float = 0.5):
        super().__init__(daemon=True)
        self.bar, self.runs, self.interval = bar, runs, interval
        self.stop = threading.Event()

    def update(self) -> None:
        done = sum(_checkpoint_progress(d, m) for d, m in self.runs)
        if done != self.bar.n:
            self.bar.n = done
            self.bar.refresh()

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            self.update()


class Pipeline:
    """Runs a :class:`PipelineConfig`: ``Pipeline(config).run()`` returns the report (a dict)."""

    def __init__(self, config: PipelineConfig, progress: bool = True, echo: bool = True,
                 log: Callable[[str], None] | None = None, dask_scheduler: str | None = None):
        self.config = config
        self.dask_scheduler = dask_scheduler  # decode on this Dask cluster instead of local processes
        self.work = os.path.abspath(config.work_dir)
        os.makedirs(self.work, exist_ok=True)
        self.progress = progress
        self.log = log or PipelineLog(os.path.join(self.work, LOG_FILE), echo=echo)
        self.log_path = os.path.join(self.work, LOG_FILE)
        self.steps: list[StepOutcome] = []
        self._precompile = None  # the process of _start_precompile while it may still be compiling
        self._precompile_began = 0.0

    # ---- caching ------------------------------------------------------------------------------
    def folder(self, step: str, key: str, label: str | None = None) -> str:
        name = f"{step}-{label}-{key[:12]}" if label else f"{step}-{key[:12]}"
        return os.path.join(self.work, name)

    def step(self, step: str, label: str, key_parts: dict, run: Callable[[str], dict]) -> StepOutcome:
        """Run ``run(folder)`` unless the step with these inputs has finished before."""
        key_parts = {"step": step, "format": STEP_FORMAT, **key_parts}
        key = json_sha256(key_parts)
        folder = self.folder(step, key, label if label != step else None)
        record = _read_step(folder, key)
        if record is not None:
            self.log(f"{label}: cached, not redone (key {key[:12]}, {record['seconds']:.1f} s when it ran)")
            outcome = StepOutcome(step, label, key, folder, True, 0.0, record["result"], record["seconds"])
        else:
            resumed = os.path.isdir(folder)
            self.log(f"{label}: {'resuming an unfinished run' if resumed else 'running'} (key {key[:12]})")
            os.makedirs(folder, exist_ok=True)
            began = time.perf_counter()
            result = run(folder)
            seconds = time.perf_counter() - began
            _write_step(folder, step, label, key, key_parts, seconds, result)
            self.log(f"{label}: done in {seconds:.1f} s")
            outcome = StepOutcome(step, label, key, folder, False, round(seconds, 3), result, round(seconds, 3))
        self.steps.append(outcome)
        return outcome

    # ---- steps ---------------------------------------------------------------------------------
    def corpus(self) -> StepOutcome:
        c = self.config.corpus
        parts = {"corpus": {k: v for k, v in c.items()}}
        if c["name"] == LOCAL:
            parts["files"] = files_digest(os.path.join(c["path"], f"{s}.{side}")
                                          for s in ("train", "dev", c["test_split"]) for side in ("src", "tgt"))

        def run(folder: str) -> dict:
            if c["name"] == SYNTHETIC:
                from corpora.synthetic import write_synthetic
                write_synthetic(folder, c["size"], c["seed"], dev=c["dev"], test=c["test"])
                source = {"name": SYNTHETIC, "seed": c["seed"]}
            else:
                if c["name"] == LOCAL:
                    origin = c["path"]
                    source = {"name": LOCAL, "path": origin}
                else:
                    from corpora.fetch import fetch
                    origin = os.path.join(self.work, f"download-{c['name']}")
                    manifest = fetch(c["name"], origin, from_dir=c["from"], progress=self.progress,
                                     max_train=c["size"])
                    source = {"name": c["name"], "source_language": manifest.get("source_language"),
                              "target_language": manifest.get("target_language")}
                limits = {"train": c["size"], "dev": c["dev"], "test": c["test"]}
                for split, origin_split in (("train", "train"), ("dev", "dev"), ("test", c["test_split"])):
                    for side in ("src", "tgt"):
                        lines = read_lines(os.path.join(origin, f"{origin_split}.{side}"))
                        if limits[split] is not None:
                            lines = lines[: limits[split]]
                        write_lines(os.path.join(folder, f"{split}.{side}"), lines)
            sizes = {split: len(read_lines(os.path.join(folder, f"{split}.src"))) for split in ("train", "dev", "test")}
            for split, n in sizes.items():
                if n == 0:
                    raise InputError(f"the {split} split of corpus {c['name']!r} is empty", folder)
            return {**source, "pairs": sizes, "digest": files_digest(self.corpus_files(folder))}

        return self.step("corpus", "corpus", parts, run)

    @staticmethod
    def corpus_files(folder: str) -> list[str]:
        return [os.path.join(folder, f"{s}.{side}") for s in ("train", "dev", "test") for side in ("src", "tgt")]

    def train(self, corpus: StepOutcome) -> StepOutcome:
        t = self.config.train

        def run(folder: str) -> dict:
            from minismt.train import Trainer, TrainingConfig
            config = TrainingConfig(src=os.path.join(corpus.folder, "train.src"),
                                    tgt=os.path.join(corpus.folder, "train.tgt"), out=os.path.join(folder, "model"),
                                    lm_order=t["lm_order"], lowercase=t["lowercase"], max_length=t["max_length"],
                                    max_phrase_length=t["max_phrase_length"], table_limit=t["table_limit"],
                                    ibm1_iterations=t["ibm1_iterations"], hmm_iterations=t["hmm_iterations"],
                                    aligner=t["aligner"], model=t["model"],
                                    grammar_inputs=(os.path.join(corpus.folder, "dev.src"),
                                                    os.path.join(corpus.folder, "test.src"))
                                    if t["model"] == "hiero" else (),
                                    progress=self.progress)
            trainer = Trainer(config, log=lambda m: self.log(f"train: {m}"))
            manifest = trainer.run()
            return {"model_dir": "model", "features": manifest["features"],
                    "steps": {name: {"seconds": r.seconds, "cached": r.cached, "info": r.info}
                              for name, r in trainer.records.items()},
                    "model_key": json_sha256({name: step["key"] for name, step in manifest["steps"].items()})}

        # the model kind joins the key only when it is not the default: earlier runs keep their keys
        train_key = {k: v for k, v in t.items() if not (k == "model" and v == "phrase")}
        return self.step("train", "train", {"corpus": corpus.result["digest"], "train": train_key}, run)

    def tune_specs(self, corpus: StepOutcome, model: StepOutcome) -> list[dict]:
        """One spec per (tuner, seed); a tuner without randomness has one run (one key) for every seed."""
        from tuners.base import get_tuner
        u = self.config.tune
        model_dir = os.path.join(model.folder, model.result["model_dir"])
        specs = []
        for tuner in u["tuners"]:
            params = u["params"].get(tuner, {})
            seeded = "seed" in get_tuner(tuner).get_params() and "seed" not in params
            for seed in u["seeds"]:
                parts = {"model": model.result["model_key"], "corpus": corpus.result["digest"], "tuner": tuner,
                         "params": params, "seed": seed if seeded else None,
                         **{k: u[k] for k in ("iterations", "kbest", "stack", "accumulate", "reset_after",
                                              "keep", "lowercase")}}
                if u["fix"]:  # only then, so that the runs of earlier configurations keep their keys
                    parts["fix"] = u["fix"]
                # always: the step search and the decoding scale (on by default) changed what a run with earlier
                # keys did
                parts["step_search"] = u["step_search"]
                parts["decode_norm"] = u["decode_norm"]
                parts["accept"] = u["accept"]  # always: the step's acceptance (on by default) changed them too
                key = json_sha256({"step": "tune", "format": STEP_FORMAT, **parts})
                folder = self.folder("tune", key, tuner)
                specs.append({"tuner": tuner, "seed": seed, "seeded": seeded, "key_parts": parts, "key": key,
                              "folder": folder, "run_dir": os.path.join(folder, "run"), "model_dir": model_dir,
                              "dev_src": os.path.join(corpus.folder, "dev.src"),
                              "dev_ref": os.path.join(corpus.folder, "dev.tgt"),
                              "params": params, "jobs": u["jobs"], "dask_scheduler": self.dask_scheduler,
                              "label": f"tune {tuner}"
                              + (f" seed {seed}" if seeded else " (no randomness: one run for every seed)"),
                              **{k: u[k] for k in ("iterations", "kbest", "stack", "accumulate", "reset_after",
                                                   "keep", "lowercase", "fix", "step_search",
                                                   "decode_norm", "accept")}})
        return specs

    def tune(self, corpus: StepOutcome, model: StepOutcome) -> list[dict]:
        """Every tuning run; returns the specs with ``outcome`` (a StepOutcome) filled in."""
        specs = self.tune_specs(corpus, model)
        unique: dict[str, dict] = {}
        for spec in specs:
            unique.setdefault(spec["key"], spec)
        outcomes: dict[str, StepOutcome] = {}
        pending = []
        for key, spec in unique.items():
            record = _read_step(spec["folder"], key)
            if record is not None:
                self.log(f"{spec['label']}: cached, not redone (key {key[:12]}, "
                         f"{record['seconds']:.1f} s when it ran)")
                outcomes[key] = StepOutcome("tune", spec["label"], key, spec["folder"], True, 0.0, record["result"],
                                            record["seconds"])
            else:
                pending.append(spec)
        if pending:
            self._run_pending(pending, outcomes)
        for spec in unique.values():
            self.steps.append(outcomes[spec["key"]])
        for spec in specs:
            spec["outcome"] = outcomes[spec["key"]]
        return specs

    def _run_pending(self, pending: list[dict], outcomes: dict) -> None:
        from minismt.parallel import process_pool, stop_pool
        iterations = self.config.tune["iterations"]
        bar = poller = None

        def finish(spec, result):
            seconds = result["wall_seconds"]  # the run's own time (in a pool, waiting is not counted)
            _write_step(spec["folder"], "tune", spec["label"], spec["key"], spec["key_parts"], seconds, result)
            best = result["best_dev_bleu"]
            note = f", best dev BLEU {100 * best:.2f}" if best is not None else ""
            self.log(f"{spec['label']}: done in {seconds:.1f} s{note}")
            outcomes[spec["key"]] = StepOutcome("tune", spec["label"], spec["key"], spec["folder"], False,
                                                round(seconds, 3), result, round(seconds, 3))
            poller.update()

        def start_bar():
            # after the waits for the precompile process and the warm-up, whose lengths are unknown; the
            # first iteration starts the workers and loads the kernels: the rate starts after it
            nonlocal bar, poller
            bar = progress_bar(total=len(pending) * iterations, desc="tune", unit="iter", enabled=self.progress,
                               warmup=True)
            poller = _Poller(bar, [(s["run_dir"], iterations) for s in pending])
            poller.start()

        try:
            workers = min(self.config.tune["parallel"], len(pending))
            if workers <= 1:
                self._await_precompile()
                start_bar()
                for spec in pending:
                    finish(spec, tune_one(spec, self.log))
            else:
                self.log(f"tune: {len(pending)} runs on {workers} processes (each logs its start to "
                         f"{os.path.basename(self.log_path)})")
                self._await_precompile()
                _warm_up(pending[0])
                # different tuners first: parallel workers then compile different kernels, not the same ones
                pending = sorted(pending, key=lambda spec: (spec["seed"] if spec["seeded"] else 0))
                start_bar()
                pool = process_pool(workers)
                futures = {}
                try:
                    futures = {pool.submit(tune_one, {**spec, "log_path": self.log_path}): spec for spec in pending}
                    remaining = set(futures)
                    while remaining:
                        done, remaining = wait(remaining, return_when=FIRST_COMPLETED)
                        for future in done:
                            finish(futures[future], future.result())
                except BaseException:
                    # stop the other runs now (their checkpoints are written atomically: they resume later)
                    stop_pool(pool)
                    raise
                finally:
                    pool.shutdown(wait=True, cancel_futures=True)
        except BaseException as err:
            self.log(f"tune: stopped by {_describe(err)}; finished iterations are kept, "
                     f"run the pipeline again to resume")
            raise
        finally:
            if poller is not None:
                poller.stop.set()
                poller.join()
                poller.update()
                bar.close()

    def test(self, corpus: StepOutcome, model: StepOutcome, specs: list[dict]) -> dict[str, StepOutcome]:
        """Decode and score the test set with each distinct tuned weights (and the untuned ones).

        The systems not cached are decoded one after another (sharing the worker processes), so that each
        step's seconds are its own decoding and scoring time."""
        from minismt.metrics.evaluate import evaluate
        from minismt.parallel import DecodeJob, dask_client, decode_requests, prepared_executor, stop_pool
        s = self.config.test
        settings = DecoderSettings(stack_size=s["stack"], jobs=s["jobs"])
        model_dir = os.path.join(model.folder, model.result["model_dir"])
        systems: dict[str, tuple[str, dict]] = {}  # tune key (or "untuned") -> (label, weights)
        if s["baseline"]:
            systems["untuned"] = ("test untuned", dict(load_manifest(model_dir)["default_weights"]))
        for spec in specs:
            systems.setdefault(spec["key"], (f"test {spec['label'][5:]}", spec["outcome"].result["weights"]))
        sources = read_lines(os.path.join(corpus.folder, "test.src"))
        references = read_lines(os.path.join(corpus.folder, "test.tgt"))
        grammar = grammar_of(model_dir, sources)
        outcomes: dict[str, StepOutcome] = {}
        pending = []
        for name, (label, weights) in systems.items():
            parts = {"step": "test", "format": STEP_FORMAT, "model": model.result["model_key"],
                     "corpus": corpus.result["digest"], "weights": weights, "stack": s["stack"],
                     "tokenize": s["tokenize"], "lowercase": s["lowercase"]}
            key = json_sha256(parts)
            folder = self.folder("test", key)  # by key only: two systems with the same weights share it
            record = _read_step(folder, key)
            if record is not None:
                self.log(f"{label}: cached, not redone (key {key[:12]}, {record['seconds']:.1f} s when it ran)")
                outcomes[name] = StepOutcome("test", label, key, folder, True, 0.0, record["result"],
                                             record["seconds"])
            elif not any(p[3] == key for p in pending):
                pending.append((name, label, parts, key, folder, weights))
        if pending:
            for name, label, parts, key, folder, weights in pending:
                self.log(f"{label}: running (key {key[:12]})")
            words = sum(len(x.split()) for x in sources)
            client = dask_client(self.dask_scheduler) if self.dask_scheduler else None
            pool = None
            try:
                # start the processes and load the model before any clock (on a cluster: at the first chunk)
                began = time.perf_counter()
                pool = prepared_executor(DecodeJob(model_dir, settings, grammar=grammar),
                                         None if client is None else client.get_executor(), s["jobs"])
                if client is None and s["jobs"] > 1:
                    self.log(f"test: {s['jobs']} decoding processes started in {time.perf_counter() - began:.1f} s")
                for name, label, parts, key, folder, weights in pending:  # one at a time: each step's own time
                    began = time.perf_counter()
                    outputs = decode_requests(
                        [(DecodeJob(model_dir, settings, weights, grammar=grammar),
                          range(len(sources)))], sources, executor=pool, jobs=1, progress=self.progress)[0]
                    decoded = time.perf_counter() - began
                    hyps = [o.best for o in outputs]
                    os.makedirs(folder, exist_ok=True)
                    write_lines(os.path.join(folder, "hyp.txt"), hyps)
                    metrics = evaluate(hyps, [references], lowercase=s["lowercase"], tokenize=s["tokenize"])
                    seconds = time.perf_counter() - began
                    result = {**metrics, "hyp": "hyp.txt", "decode_seconds": round(decoded, 3),
                              "words_per_second": round(words / decoded, 1) if decoded > 0 else None}
                    _write_step(folder, "test", label, key, parts, seconds, result)
                    self.log(f"{label}: BLEU {metrics['bleu']:.2f}, chrF2 {metrics['chrf']:.2f}, "
                             f"TER {metrics['ter']:.2f} ({seconds:.1f} s)")
                    outcomes[name] = StepOutcome("test", label, key, folder, False, round(seconds, 3), result,
                                                 round(seconds, 3))
            finally:
                if client is not None:
                    client.close()
                elif pool is not None:
                    stop_pool(pool)  # at once, also after Ctrl-C: no chunk keeps decoding
        for name, (label, _) in systems.items():
            if name not in outcomes:  # the same weights as another system
                key = json_sha256({"step": "test", "format": STEP_FORMAT, "model": model.result["model_key"],
                              "corpus": corpus.result["digest"], "weights": systems[name][1], "stack": s["stack"],
                              "tokenize": s["tokenize"], "lowercase": s["lowercase"]})
                outcomes[name] = next(o for o in outcomes.values() if o.key == key)
        for name in systems:
            self.steps.append(outcomes[name])
        return outcomes

    # ---- everything ------------------------------------------------------------------------------
    def run(self) -> dict:
        """Every step, then the report; returns the report (as written to report.json)."""
        from minismt.pipeline.report import write_report
        began = time.perf_counter()
        source = self.config.source or "(built-in configuration)"
        self.log(f"pipeline started: {source}, work dir {self.work}")
        self._start_precompile()
        try:
            corpus = self.corpus()
            model = self.train(corpus)
            specs = self.tune(corpus, model)
            tests = self.test(corpus, model, specs)
            report = write_report(self, corpus, model, specs, tests, began)
        except BaseException as err:
            self.log(f"pipeline stopped by {_describe(err)}")
            raise
        finally:
            self._stop_precompile()
        self.log(f"pipeline finished in {time.perf_counter() - began:.1f} s; report in "
                 f"{os.path.abspath(self.config.report_dir)}")
        copy = os.path.join(os.path.abspath(self.config.report_dir), LOG_FILE)
        if os.path.abspath(self.log_path) != copy:
            shutil.copyfile(self.log_path, copy)
        return report

    # ---- compiling the kernels while training (minismt.pipeline.precompile) ---------------------------
    def _start_precompile(self) -> None:
        """Start :func:`minismt.pipeline.precompile.compile_kernels` in a second process (``precompile =
        false`` in ``[tune]`` turns it off)."""
        if not self.config.tune["precompile"] or (os.cpu_count() or 1) < 2:
            return
        from minismt.parallel import run_ignoring_interrupts, spawn_context
        from minismt.pipeline.precompile import compile_kernels
        self._precompile = spawn_context().Process(target=run_ignoring_interrupts,
                                            args=(compile_kernels, self.config.tune, self.log_path),
                                            name="minismt-precompile", daemon=True)
        self._precompile.start()
        self._precompile_began = time.perf_counter()

    def _await_precompile(self) -> None:
        """Before the first tuning run: wait for the precompiling process, so that the runs load the
        kernels it compiled instead of compiling them too."""
        process, self._precompile = self._precompile, None
        if process is None:
            return
        if process.is_alive():  # a wait of unknown length, without a progress bar: say what it is
            self.log("precompile: tuning waits for the second process to finish compiling the kernels")
        waited = time.perf_counter()
        process.join()
        if process.exitcode == 0:
            self.log(f"precompile: kernels compiled and cached in "
                     f"{time.perf_counter() - self._precompile_began:.1f} s "
                     f"(tuning waited {time.perf_counter() - waited:.1f} s for it)")
        else:
            self.log(f"precompile: the process ended with exit code {process.exitcode}; the tuning runs "
                     f"compile the kernels themselves")

    def _stop_precompile(self) -> None:
        process, self._precompile = self._precompile, None
        if process is not None and process.is_alive():
            process.terminate()
            process.join()

    def outcomes(self) -> list[dict]:
        return [asdict(o) for o in self.steps]


def run_pipeline(config: PipelineConfig, progress: bool = True, echo: bool = True,
                 dask_scheduler: str | None = None) -> dict:
    """``Pipeline(config).run()``: the report dict; with ``dask_scheduler`` (an address) every decode of the
    tuning runs and of the test set runs on that Dask cluster (the results do not depend on it)."""
    return Pipeline(config, progress=progress, echo=echo, dask_scheduler=dask_scheduler).run()
