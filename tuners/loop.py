"""The outer tuning loop: decode the dev set -> accumulate k-best lists -> tune -> checkpoint.

``TuningRun`` drives any :class:`DevDecoder` (minismt's own decoder here; the
Moses and cdec plugins provide others) and any registered n-best tuner:

1. decode the dev set with ``w_t`` into a k-best list (and the 1-best, scored
   with sacrebleu-exact corpus BLEU),
2. accumulate: ``merge`` (Moses: all iterations' lists, duplicates removed),
   ``aggregate`` (each iteration's list kept as its own instances, for listwise
   tuners) or ``none`` (this iteration's list only), optionally starting afresh
   every ``reset_after`` iterations (the APRO paper's reset),
3. ``w' = tuner.fit(accumulated, w_t)`` with the tuner seeded by (seed, t),
4. the step search (``step_search="forest"``, :mod:`tuners.step`; minismt's decoder gives the dev set's
   search graphs with its k-best lists): ``w_{t+1} = w_t + rho (w' - w_t)`` with the ``rho`` in [0, 1]
   whose translations in the search graphs have the best BLEU; a step cut short adds the graphs' best
   translations under ``w'`` to the merged list; ``w_{t+1}`` scaled to an L1 norm of 1 (``decode_norm``),
5. write a checkpoint (weights, accumulated list, history) atomically,
6. (the next iteration's decode) the step's acceptance (``accept="decoded"``): when the decode of
   ``w_{t+1}`` scores below ``w_t``'s decoded dev BLEU, the step is halved and decoded again (at most
   :data:`~tuners.step.BACKTRACKS` times, then back to ``w_t``), every trial's list accumulated.

That is the k-best iteration. The tuner's class declares in its
:class:`~tuners.base.TunerTags` what it fits on, and the run picks one of
three iteration strategies from them:

- ``fits_on="kbest"``: the above; with ``needs_reference`` (structured SVMs)
  ``fit`` gets a :class:`~tuners.base.KBestWithReference` that adds the
  forced decoding of each sentence's first reference under ``w_t`` when the
  decoder can force (``decoder.forces``);
- ``fits_on="decoder"`` (online tuners): steps 1-2 as above (for the dev BLEU
  and the stopping rule), then one round over the dev set in which the tuner
  decodes its own mini-batches (``decoder.decode_batches``); its state
  (e.g. its learning-rate step), given with ``warm_start`` before ``fit`` and
  read from ``state_`` after, is checkpointed with the weights;
- ``fits_on="forests"`` (hypergraph tuners): the forests of the dev set
  (``decoder.decode_hypergraphs``) of this iteration, or of the last
  ``forest_iterations`` ones (CHG-BO), as a
  :class:`~minismt.hypergraph.ForestData`; nothing is accumulated.

Fixed features (``fix`` and ``free`` name patterns, and what the decoder's
configuration fixes: :meth:`DevDecoder.fixed_by_config`) keep their start
weights: every strategy gives its tuner the data and weights of a
:class:`~tuners.fixing.FixedFeatures` view without them.

It stops after ``max_iter`` iterations or when decoding adds no new hypothesis
to the accumulated list (a forest tuner: when its step was rejected until the
iteration went back to the weights it started from, whose forests it has fitted
already), and returns the weights with the best dev BLEU (or
the last ones). A run killed at any point resumes from its last checkpoint and
ends with bit-identical weights, because every input of an iteration is in the
checkpoint and every random choice is seeded by (seed, iteration).

A run directory belongs to one run: ``run.json`` records what decides its
result (tuner and parameters, seed, accumulation, iterations, the references'
and the decoder's identity: model, dev sentences, decoder settings), written
before the first decode; running again in the same directory with any of these
different is an :class:`InputError` that lists what differs.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from minismt.errors import InputError
from minismt.hypergraph import ForestData
from minismt.io import atomic_write, lines_sha256, write_lines
from minismt.kbest import KBest, kbest_of
from minismt.metrics import BleuReferences, corpus_bleu_from_stats, length_ratio
from tuners.base import KBestWithReference, Tuner, TunerTags, get_tuner
from tuners.devdecoder import DevDecoder
from tuners.fixing import FIXED_COLUMN, FixedFeatures, matches
from tuners.step import ACCEPTS, BACKTRACKS, EDGES_PER_REFERENCE_WORD, STEP_SEARCHES, mixed, step_search

DECODE_NORMS = ("l1", "none")
CHECKPOINT = "checkpoint.json"
SETTINGS = "run.json"


@dataclass
class IterationRecord:
    """One decoding iteration: the weights it decoded with, the decoded dev BLEU and output/reference length
    ratio, the tuner's result on the tuning data (BLEU and length ratio of its weights' best hypotheses) and,
    with a step search, the part ``step`` of the tuner's step taken and the search graphs' BLEU there
    (``step_bleu``) and at the tuner's weights (``full_step_bleu``); ``rejected``: the decoded dev BLEU of
    the trials rejected before these weights were accepted (``accept="decoded"``), in order."""

    iteration: int
    dev_bleu: float
    tuned_bleu: float
    hypotheses: int
    new_hypotheses: int
    seconds: float
    weights: list[float] = field(default_factory=list)
    dev_length_ratio: float | None = None
    tuned_length_ratio: float | None = None
    step: float | None = None
    step_bleu: float | None = None
    full_step_bleu: float | None = None
    rejected: list[float] = field(default_factory=list)


class TuningRun:
    """Tune the weights of a decoder on a dev set with one tuner; resumable.

    Parameters
    ----------
    decoder : the dev-set decoder (see :class:`DevDecoder`).
    references : one list of reference strings per dev sentence.
    tuner : a registered tuner name or a :class:`Tuner` instance.
    run_dir : where checkpoints, the log and ``weights.final`` go.
    accumulate : ``merge`` | ``aggregate`` | ``none``; None: the tuner's own default
        (its tag ``accumulate``: ``aggregate`` for the listwise tuners, else ``merge``).
    reset_after : start accumulating afresh every N iterations (None: never).
    max_iter : at most this many decoding iterations.
    seed : seeds the tuner of iteration t with (seed, t).
    return_best : return the weights with the best dev BLEU (else the last ones).
    lowercase : case-insensitive BLEU.
    on_iteration : called with each ``tune.log`` line as it is written (e.g. ``print``): the fixed
        features at the start, then a line per iteration as it ends.
    fix, free : shell patterns of feature names to keep at their start weights, and of features the
        decoder's configuration fixes to tune all the same (see :mod:`tuners.fixing`).
    forest_prune : hypergraph tuners: keep of each forest only the ``forest_prune`` x (reference words)
        edges of highest max-marginal under the decoding weights (Moses' ``kbmira --hg-prune``, 50 there;
        :meth:`Hypergraph.prune_to`); 0 keeps the whole forest; None: the decoder's
        ``default_forest_prune`` (Moses' driver 50, as Moses; cdec's and minismt's 0).
    decode_norm : ``"l1"``: every weight vector after the first is decoded scaled to an L1 norm of 1, as
        mert-moses.pl scales every optimiser's weights: the model's ranking does not depend on the scale, but
        the search's threshold pruning (``beam_threshold``, absolute in score units) does, and weights that
        grow from iteration to iteration (k-best MIRA's: L1 4.4 to 27.6 in three iterations) prune ever
        harder. Not done when a fixed feature has a non-zero weight (the fixed weights set the scale).
        ``"none"``: decode the tuner's weights as they are. None: ``"l1"`` for the n-best tuners (but NBL-BO:
        :attr:`TunerTags.scales_weights`), else ``"none"`` (the online and Bayesian tuners take steps and
        boxes in the weights' own units).
    step_search : ``"forest"``: an n-best or online tuner's iteration moves to the point of the segment from
        ``w_t`` to the tuner's weights whose Viterbi translations in the dev set's search graphs have the
        best corpus BLEU (:mod:`tuners.step`); ``"none"``: to the tuner's weights. None: ``"forest"`` when
        the decoder gives k-best lists and forests from one decode (minismt's, Moses', cdec's) and the tuner
        does not fit on forests itself, else ``"none"``.
    accept : ``"decoded"`` (the default): a step whose decoded dev BLEU is below that of the weights it
        started from is halved and decoded again, at most :data:`~tuners.step.BACKTRACKS` times, then the
        iteration goes on from those weights (:mod:`tuners.step`), for every tuner and decoder; ``"any"``:
        every step is kept.
    """

    def __init__(self, decoder: DevDecoder, references: Sequence[Sequence[str]], tuner,
                 run_dir: str | os.PathLike, accumulate: str | None = None, reset_after: int | None = None,
                 max_iter: int = 10, seed: int = 0, return_best: bool = True,
                 lowercase: bool = False, tuner_params: dict | None = None, on_iteration=None,
                 fix: Sequence[str] = (), free: Sequence[str] = (), forest_prune: int | None = None,
                 step_search: str | None = None, decode_norm: str | None = None, accept: str = "decoded"):
        self.tags: TunerTags = (tuner if isinstance(tuner, Tuner) else _tuner_class(tuner)).tags
        if accumulate is None:
            accumulate = self.tags.accumulate
        if accumulate not in ("merge", "aggregate", "none"):
            raise InputError(f"accumulate={accumulate!r}", expected="'merge', 'aggregate' or 'none'")
        if max_iter < 1:
            raise InputError(f"max_iter={max_iter}", expected="at least 1")
        if not isinstance(decoder, DevDecoder):
            raise InputError(f"a dev decoder of type {type(decoder).__name__}",
                             expected="a tuners.devdecoder.DevDecoder (minismt's, Moses', cdec's or your subclass)")
        self.decoder = decoder
        self.fix, self.free = list(fix), list(free)
        if forest_prune is None:
            forest_prune = decoder.default_forest_prune
        if isinstance(forest_prune, bool) or not isinstance(forest_prune, int) or forest_prune < 0:
            raise InputError(f"forest_prune={forest_prune!r}",
                             expected="an integer >= 0 (edges per reference word; 0: the whole forest)")
        self.forest_prune = forest_prune
        if step_search is None:
            step_search = ("forest" if decoder.decodes_with_forests and self.tags.fits_on != "forests"
                           else "none")
        if step_search not in STEP_SEARCHES:
            raise InputError(f"step_search={step_search!r}", expected=" or ".join(map(repr, STEP_SEARCHES)))
        if step_search == "forest" and self.tags.fits_on == "forests":
            raise InputError("step_search='forest' with a hypergraph tuner",
                             expected="'none': a hypergraph tuner chooses its weights on the forests itself")
        if step_search == "forest" and not decoder.decodes_with_forests:
            DevDecoder.decode_with_forests(decoder, np.zeros(0), 0)  # the base class's error
        self.step_search = step_search
        if decode_norm is None:
            decode_norm = "l1" if self.tags.fits_on == "kbest" and self.tags.scales_weights else "none"
        if decode_norm not in DECODE_NORMS:
            raise InputError(f"decode_norm={decode_norm!r}", expected=" or ".join(map(repr, DECODE_NORMS)))
        self.decode_norm = decode_norm
        if accept not in ACCEPTS:
            raise InputError(f"accept={accept!r}", expected=" or ".join(map(repr, ACCEPTS)))
        self.accept = accept
        self._step_forests: list | None = None  # the step search's forests of this iteration's decode
        self._tuner_output: np.ndarray | None = None  # the tuner's weights of the last iteration, before the step
        self._list_size = 1  # the most hypotheses the last decode listed for a sentence
        self._learned: KBest | None = None  # the search graphs' translations under a cut step's tuner weights
        self._trial_new = 0  # new hypotheses of this iteration's decodes so far (rejected trials first)
        self.reference_words = [max(1, round(sum(len(r.split()) for r in refs) / max(1, len(refs))))
                                for refs in references]
        refused = [n for n in decoder.space.names if decoder.fixed_by_config(n) and matches(n, self.free)]
        if refused and not decoder.frees_fixed:
            raise InputError(f"--free {refused[0]}: the {getattr(decoder, 'name', 'decoder')} configuration "
                             f"makes it untuneable and the decoder leaves it out of its k-best lists",
                             expected="the feature made tuneable in the decoder's configuration")
        self.view: FixedFeatures | None = None  # the tuners' view without the fixed features (set by run)
        self.references = BleuReferences(references, lowercase=lowercase)
        self.first_references = [refs[0] for refs in references]  # forced decoding's targets
        self.tuner = tuner
        self.tuner_params = dict(tuner_params or {})
        self.run_dir = os.fspath(run_dir)
        self.accumulate = accumulate
        self.reset_after = reset_after
        self.max_iter = max_iter
        self.seed = seed
        self.return_best = return_best
        self.lowercase = lowercase
        self.on_iteration = on_iteration
        self.references_digest = lines_sha256("\t".join(refs) for refs in references)
        self.history: list[IterationRecord] = []
        self.tuner_state: dict | None = None  # an online tuner's state between rounds
        self._accumulated: KBest | list[KBest] | None = None  # k-best lists so far (a list: aggregate)
        self._forests: dict[int, list] = {}   # hypergraph tuners: forests of the latest iterations

    # ---- the tuner of one iteration ------------------------------------------------
    def _tuner(self, iteration: int) -> Tuner:
        if isinstance(self.tuner, Tuner):
            return self.tuner
        tuner = get_tuner(self.tuner, **self.tuner_params)
        if "seed" in tuner.get_params() and "seed" not in self.tuner_params:
            tuner.set_params(seed=int(np.random.SeedSequence([self.seed, iteration]).generate_state(1)[0]))
        if "fixed" in tuner.get_params() and self.view is not None and self.view.active and self.view.has_column:
            given = tuner.get_params()["fixed"]
            given = [] if given is None else [given] if isinstance(given, str) else list(given)
            tuner.set_params(fixed=given + [FIXED_COLUMN])  # MERT's line searches keep the column at 1
        return tuner

    def is_fixed(self, name: str) -> bool:
        """Whether the run keeps this feature's weight (``fix``, or the decoder's configuration less ``free``)."""
        return matches(name, self.fix) or (self.decoder.fixed_by_config(name) and not matches(name, self.free))

    def _tuner_weights(self, weights: np.ndarray) -> np.ndarray:
        return self.view.weights_in(weights) if self.view.active else weights

    def _run_weights(self, weights, count: bool = True) -> np.ndarray:
        weights = np.asarray(weights, dtype=np.float64)
        return self.view.weights_out(weights, count) if self.view.active else weights

    def _tuner_kbest(self, kbest: KBest) -> KBest:
        return self.view.kbest(kbest) if self.view.active else kbest

    # ---- what the run is --------------------------------------------------------------
    def settings(self) -> dict:
        """Everything that decides this run's weights, as JSON values (``run.json``)."""
        if isinstance(self.tuner, Tuner):
            name, params = self.tuner.name, self.tuner.get_params()
        else:
            name, params = self.tuner, self.tuner_params
        decoder = self.decoder.identity()
        settings = {"tuner": name, "tuner_params": params, "seed": self.seed, "accumulate": self.accumulate,
                    "reset_after": self.reset_after, "iterations": self.max_iter, "lowercase": self.lowercase,
                    "references": self.references_digest, "decoder": decoder}
        if self.fix or self.free:
            settings["fixed_features"] = {"fix": self.fix, "free": self.free}
        if self.forest_prune:
            settings["forest_prune"] = self.forest_prune
        if self.step_search != "none":
            settings["step_search"] = self.step_search
        if self.decode_norm != "none":
            settings["decode_norm"] = self.decode_norm
        if self.accept != "any":
            settings["accept"] = self.accept
        return json.loads(json.dumps(settings, sort_keys=True, default=str))

    def _claim(self) -> None:
        """Record this run's settings in a new run directory, or refuse one that holds another run."""
        path = self._path(SETTINGS)
        mine = self.settings()
        if os.path.exists(path):
            try:
                with open(path, encoding="utf-8") as handle:
                    theirs = json.load(handle)
            except (OSError, ValueError) as err:
                raise InputError(f"unreadable run settings ({err})", path) from None
            differences = _differences(theirs, mine)
            if differences:
                raise InputError("the run directory holds another run: " + "; ".join(differences), path,
                                 expected="the same settings to resume it, or a new run directory")
            return
        if os.path.exists(self._path(CHECKPOINT)):
            return  # a run from before run.json: _load checks the seed and accumulation it recorded
        os.makedirs(self.run_dir, exist_ok=True)
        with atomic_write(path) as out:
            json.dump(mine, out, indent=1, sort_keys=True)

    # ---- checkpoints ----------------------------------------------------------------
    def _path(self, name: str) -> str:
        return os.path.join(self.run_dir, name)

    def _save(self, iteration: int, weights: np.ndarray, accumulated: KBest | list[KBest] | None,
              done: bool) -> None:
        os.makedirs(self.run_dir, exist_ok=True)
        parts = accumulated if isinstance(accumulated, list) else ([accumulated] if accumulated else [])
        for k, part in enumerate(parts):
            part.save(self._path(f"accumulated.{iteration}.{k}.npz"))
        if self._learned is not None:
            self._learned.save(self._path(f"accumulated.{iteration}.learned.npz"))
        state = {"iteration": iteration, "weights": [float(x) for x in weights],
                 "tuner_weights": [float(x) for x in self._tuner_output] if self._tuner_output is not None else None,
                 "space": self.decoder.space.to_json(), "parts": len(parts), "done": done,
                 "history": [r.__dict__ for r in self.history], "seed": self.seed,
                 "accumulate": self.accumulate, "max_iter": self.max_iter, "tuner_state": self.tuner_state,
                 "learned": self._learned is not None}
        with atomic_write(self._path(CHECKPOINT)) as out:
            json.dump(state, out)
        for name in os.listdir(self.run_dir):  # older iterations' lists are no longer needed
            if name.startswith("accumulated.") and not name.startswith(f"accumulated.{iteration}."):
                os.unlink(self._path(name))

    def _load(self):
        path = self._path(CHECKPOINT)
        if not os.path.exists(path):
            return None
        try:
            with open(path, encoding="utf-8") as handle:
                state = json.load(handle)
        except (OSError, ValueError) as err:
            raise InputError(f"unreadable checkpoint ({err})", path) from None
        if state.get("seed") != self.seed or state.get("accumulate") != self.accumulate:
            raise InputError("the run directory holds a run with other settings", path,
                             expected="the same seed and accumulation, or a new --run-dir")
        self._restore_space(state.get("space", {}), path)
        parts = [KBest.load(self._path(f"accumulated.{state['iteration']}.{k}.npz"), self.decoder.space)
                 for k in range(state["parts"])]
        self.history = [IterationRecord(**r) for r in state["history"]]
        self.tuner_state = state.get("tuner_state")
        if state.get("learned"):
            self._learned = KBest.load(self._path(f"accumulated.{state['iteration']}.learned.npz"), self.decoder.space)
        return state, parts

    def _restore_space(self, saved: dict, path: str) -> None:
        """Grow the decoder's feature space to the checkpoint's (sparse names met by earlier iterations, in
        their order), so that the saved weights and lists line up with it."""
        space = self.decoder.space
        names = list(saved.get("dense", [])) + list(saved.get("sparse", []))
        if space.dense_names != list(saved.get("dense", [])) or space.names != names[: len(space)]:
            raise InputError("the checkpoint's features differ from the decoder's", path,
                             expected="the same model or configuration as the interrupted run")
        for name in names[len(space):]:
            space.add(name)

    # ---- the loop ------------------------------------------------------------------------
    def run(self, w0) -> np.ndarray:
        """Tune from ``w0`` (or resume); returns the final weights and writes ``weights.final``."""
        space = self.decoder.space
        weights = space.start_weights(w0)
        self.view = FixedFeatures(space, weights, self.is_fixed)
        self._accumulated = None
        start = 0
        self._claim()
        loaded = self._load()
        if loaded is not None:
            state, parts = loaded
            weights = np.asarray(state["weights"], dtype=np.float64)
            self.view = FixedFeatures(space, weights, self.is_fixed)  # fixed weights never change
            start = state["iteration"] + 1
            if parts:
                self._accumulated = parts if self.accumulate == "aggregate" else parts[0]
            if state["done"]:
                return self._finish(weights)
        for pattern in self.fix + self.free:
            if start == 0 and not any(matches(name, [pattern]) for name in space.names):
                self._log_line(f"note: {pattern!r} matches no feature (yet): the features are "
                               + ", ".join(space.dense_names[:6]) + (", ..." if len(space.dense_names) > 6 else ""))
        if start == 0 and self.tags.needs_reference and not self.decoder.forces:
            what = type(self.decoder).__name__ + (" with a Hiero model" if getattr(self.decoder, "grammar", None)
                                                  else "")
            self._log_line(f"note: the decoder ({what}) cannot force-decode the references: each sentence's "
                           "hypothesis with the best sentence BLEU+1 stands in for its reference")
        if start == 0 and self.view.active:
            fixed = self.view.fixed_names()
            shown = ", ".join(f"{n} {weights[space.index(n)]:g}" for n in fixed[:12])
            self._log_line(f"fixed features (their weights stay): {shown}"
                           + (f" and {len(fixed) - 12} more" if len(fixed) > 12 else ""))
        iteration = {"kbest": self._kbest_iteration, "decoder": self._online_iteration,
                     "forests": self._forest_iteration}[self.tags.fits_on]
        forests = self.tags.fits_on == "forests"
        for t in range(start, self.max_iter):
            began = time.perf_counter()
            self.view.start_iteration()
            unscaled = self.view.unscaled
            weights, converged = iteration(self._tuner(t), weights, t, began)
            self._save(t, weights, self._accumulated, done=converged or t == self.max_iter - 1)
            self._log(self.history[-1], forests=forests)
            if self.view.unscaled > unscaled:
                self._log_line(f"note, iteration {t}: the tuner weighted the fixed features' part of the score <= 0; "
                               f"the fixed weights stay, the free ones are not rescaled")
            if converged:
                break
        return self._finish(weights)

    # ---- the three iteration strategies: each returns (w_{t+1}, converged) and records the iteration
    def _kbest_iteration(self, tuner: Tuner, weights: np.ndarray, t: int, began: float):
        """An n-best tuner's iteration: fit on the accumulated k-best list (with the forced decoding of the
        references when the tuner needs it and the decoder can force)."""
        weights, (data, dev, new), rejected = self._accepted(weights, t, self._decode_and_accumulate)
        fit_data = self._tuner_kbest(data)
        if self.tags.needs_reference and self.decoder.forces:
            reference = self.decoder.force(weights, self.first_references, t)
            reached = int(np.count_nonzero(np.diff(reference.offsets)))
            self._log_line(f"iteration {t}: forced decoding reached {reached} of {len(reference.offsets) - 1} "
                           "references (the others: the hypothesis with the best sentence BLEU+1)")
            fit_data = KBestWithReference(fit_data, self._tuner_kbest(reference))
        w_next = self._run_weights(tuner.fit(fit_data, self._tuner_weights(weights)))
        return self._record(t, weights, w_next, data, dev, new, began, rejected)

    def _online_iteration(self, tuner: Tuner, weights: np.ndarray, t: int, began: float):
        """An online tuner's iteration: the dev set decoded and accumulated as for n-best tuners (dev BLEU,
        stopping rule), then one round in which the tuner decodes its own mini-batches, started from the
        previous round's state."""
        weights, (data, dev, new), rejected = self._accepted(weights, t, self._decode_and_accumulate)
        source = _BatchSource(self, t)
        w_next = self._run_weights(tuner.warm_start(self.tuner_state).fit(source, self._tuner_weights(weights)))
        self.tuner_state = tuner.state_
        report = getattr(tuner, "report_", None)  # a line of the tuner's own about its round (dtrain's selection)
        if report:
            self._log_line(f"iteration {t}: {report}")
        return self._record(t, weights, w_next, data, dev, new, began, rejected)

    def _forest_iteration(self, tuner: Tuner, weights: np.ndarray, t: int, began: float):
        """A hypergraph tuner's iteration: decode forests, tune on the latest ``forest_iterations``
        iterations' forests, record. Forests are not checkpointed: after a resume, an earlier iteration's
        are decoded again with the weights of its record."""
        if not self.decoder.outputs_forests:  # the base class's error, before any decoding
            DevDecoder.decode_hypergraphs(self.decoder, weights, t)
        weights, (forests, dev), rejected = self._accepted(weights, t, self._decode_scored_forests,
                                                           self._revisited_forests)
        if len(rejected) > BACKTRACKS:  # back at weights whose forests were fitted: the same step would follow
            edges = sum(f.n_edges for f in forests)  # the tuner's weights are these: their BLEU is the decoded one
            self.history.append(IterationRecord(t, dev[0], dev[0], edges, edges,
                                                round(time.perf_counter() - began, 3), [float(x) for x in weights],
                                                dev_length_ratio=round(dev[1], 4), rejected=rejected))
            self._log_line(f"iteration {t}: back at iteration {t - 1}'s weights, whose forests the tuner has "
                           "fitted: converged")
            return weights, True
        window = [u for u in range(t - self.tags.forest_iterations + 1, t + 1) if u >= 0]
        self._forests = {u: f for u, f in self._forests.items() if u in window}
        self._forests[t] = forests
        for u in window:
            if u not in self._forests:
                record = next(r for r in self.history if r.iteration == u)
                self._forests[u] = self._decode_forests(np.asarray(record.weights), u)[0]
        every = [f for u in window for f in self._forests[u]]
        if self.view.active:
            every = [self.view.forest(f) for f in every]
        ids = np.concatenate([np.arange(len(self._forests[u])) for u in window])
        data = ForestData(every, ids, self.references)
        w_fit = np.asarray(tuner.fit(data, self._tuner_weights(weights)), dtype=np.float64)
        w_next = self._tuner_output = self._run_weights(w_fit)
        edges = sum(f.n_edges for f in forests)
        self.history.append(IterationRecord(t, dev[0], data.bleu(w_fit), edges, edges,
                                            round(time.perf_counter() - began, 3), [float(x) for x in weights],
                                            dev_length_ratio=round(dev[1], 4), rejected=rejected))
        return w_next, False

    def _revisited_forests(self, t: int) -> tuple[list, tuple[float, float]] | None:
        """Iteration ``t - 1``'s forests and decoded dev BLEU and length ratio, kept since it decoded them (a
        deterministic decoder gives them again), or None after a resume, which keeps no forests."""
        if t - 1 not in self._forests:
            return None
        previous = self.history[-1]
        return self._forests[t - 1], (previous.dev_bleu, previous.dev_length_ratio)

    def _accepted(self, weights: np.ndarray, t: int, decode, revisit=None) -> tuple[np.ndarray, tuple, list[float]]:
        """Decode ``weights``, the step iteration ``t - 1`` took, with ``decode(weights, t, first)`` (whose
        outcome's second item is the decoded dev BLEU and length ratio); with
        ``accept="decoded"``, while the dev BLEU is below iteration ``t - 1``'s, halve the step and decode
        again, and after :data:`BACKTRACKS` halvings go back to iteration ``t - 1``'s weights, whose outcome
        ``revisit(t)`` gives without a decode when it kept it (else None). Returns the
        accepted weights, their decode's outcome and the rejected trials' dev BLEU."""
        outcome = decode(weights, t, True)
        rejected: list[float] = []
        previous = self.history[-1] if self.accept == "decoded" and self.history else None
        if previous is None or previous.iteration != t - 1:
            return weights, outcome, rejected
        start = np.asarray(previous.weights, dtype=np.float64)
        if start.shape[0] < weights.shape[0]:  # sparse features met since then weigh 0 there
            start = np.concatenate([start, np.zeros(weights.shape[0] - start.shape[0])])
        while outcome[1][0] < previous.dev_bleu and len(rejected) <= BACKTRACKS:
            rejected.append(outcome[1][0])
            back = len(rejected) > BACKTRACKS
            low, high = _distinct_percents(rejected[-1], previous.dev_bleu)
            self._log_line(f"iteration {t}: decoded dev BLEU {low} is below iteration {t - 1}'s {high}: "
                           + ("back to its weights" if back else "the step is halved and decoded again"))
            weights = start if back else self._decoding_scale(mixed(start, weights, 0.5))
            outcome = (revisit(t) if back and revisit is not None else None) or decode(weights, t, False)
        return weights, outcome, rejected

    def _decode_scored_forests(self, weights: np.ndarray, t: int,
                               first: bool = True) -> tuple[list, tuple[float, float]]:
        """The dev set's forests under ``weights`` (:meth:`_decode_forests`) and the dev BLEU and length ratio
        of the decoder's 1-best."""
        forests, onebest = self._decode_forests(weights, t)
        stats = self.references.stats(np.arange(len(onebest)), onebest).sum(axis=0, dtype=np.int64)
        return forests, (corpus_bleu_from_stats(stats), length_ratio(stats))

    def _decode_forests(self, weights: np.ndarray, t: int) -> tuple[list, list[str]]:
        """The dev set's forests under ``weights`` (pruned to ``forest_prune`` edges per reference word) and
        the decoder's 1-best (the Viterbi derivation, which pruning keeps)."""
        forests, onebest = self.decoder.decode_hypergraphs(weights, t)
        if self.forest_prune:
            forests = [forest.prune_to(self.forest_prune * words, weights)
                       for forest, words in zip(forests, self.reference_words)]
        return forests, onebest

    def _decode_and_accumulate(self, weights: np.ndarray, t: int,
                               first: bool = True) -> tuple[KBest, tuple[float, float], int]:
        """Decode the dev set into a k-best list (with the step search, and its forests), accumulate it; the
        tuning data (the accumulated list, an aggregated one for ``aggregate``), the dev BLEU and length
        ratio of the 1-best and the number of new hypotheses. ``first``: the iteration's first decode (a
        later one, after a rejected trial, neither starts the lists afresh nor counts the trial's
        hypotheses as new again)."""
        if self.step_search == "forest":
            budgets = [EDGES_PER_REFERENCE_WORD * words for words in self.reference_words]
            kbest, onebest, forests = self.decoder.decode_with_forests(weights, t, budgets)
            padded = self.decoder.space.start_weights(weights)  # sparse features met in this decode weigh 0
            self._step_forests = [forest if forest.n_edges <= budget else forest.prune_to(budget, padded)
                                  for forest, budget in zip(forests, budgets)]
            del forests
        else:
            kbest, onebest = self.decoder.decode(weights, t)
        kbest.set_stats(self.references.kbest_stats(kbest))
        self._list_size = max(1, int(np.diff(kbest.offsets).max(initial=0)))
        dev_stats = self.references.stats(np.arange(len(onebest)), onebest).sum(axis=0, dtype=np.int64)
        dev = (corpus_bleu_from_stats(dev_stats), length_ratio(dev_stats))
        if first and self.reset_after and t > 0 and t % self.reset_after == 0:
            self._accumulated = None
        elif self._learned is not None and self._accumulated is not None:
            self._accumulated = self._accumulated.merge(self._learned)
        self._learned = None
        new = _new_hypotheses(self._accumulated, kbest) + (0 if first else self._trial_new)
        self._trial_new = new
        self._accumulated = self._accumulate(self._accumulated, kbest)
        data = KBest.aggregate(self._accumulated) if isinstance(self._accumulated, list) else self._accumulated
        return data, dev, new

    def _record(self, t: int, weights: np.ndarray, w_next, data: KBest, dev: tuple[float, float], new: int,
                began: float, rejected: list[float]) -> tuple[np.ndarray, bool]:
        """Record a k-best or online iteration, after the step search (if any) from ``weights`` towards the
        tuner's ``w_next``; converged when decoding (with its rejected trials) added no new hypothesis
        (after the first)."""
        w_next = np.asarray(w_next, dtype=np.float64)
        tuned = data.corpus_stats(data.model_best(w_next))
        record = IterationRecord(t, dev[0], corpus_bleu_from_stats(tuned), data.n_hypotheses, new, 0.0,
                                 [float(x) for x in weights], dev_length_ratio=round(dev[1], 4),
                                 tuned_length_ratio=round(length_ratio(tuned), 4), rejected=rejected)
        self._tuner_output = w_next
        if self.step_search == "forest":
            # between weights of one L1 norm (when they may be scaled), so that rho is the share of the turn
            target = self._decoding_scale(w_next, like=weights)
            forests = ForestData(self._step_forests, np.arange(len(self._step_forests)), self.references)
            step = step_search(forests, weights, target)
            if step.rho < 1.0 and self.accumulate == "merge":
                self._learn_from_forests(target, t)
            self._step_forests = None
            record.step, record.step_bleu, record.full_step_bleu = step.rho, step.bleu, step.full_bleu
            w_next = mixed(weights, target, step.rho)
        w_next = self._decoding_scale(w_next)
        record.seconds = round(time.perf_counter() - began, 3)
        self.history.append(record)
        converged = t > 0 and new == 0
        if converged and len(rejected) > BACKTRACKS:  # the same lists again: the last weights are the decoded ones
            return weights, True
        return w_next, converged

    def _learn_from_forests(self, target: np.ndarray, t: int) -> None:
        """A step cut short: the search graphs' best distinct translations under the tuner's weights join the
        merged list (as many per sentence as the decode listed), so that the next fit sees what its weights
        would choose, as a decode at them would show it, and does not propose them again unseen."""
        target = self.decoder.space.start_weights(target)
        lists = [forest.kbest(self._list_size, target, distinct=True).rows() for forest in self._step_forests]
        extra = kbest_of(lists, self.decoder.space)
        extra.iterations[:] = t
        extra.set_stats(self.references.kbest_stats(extra))
        self._learned = extra  # merged at the next decode: the checkpoint's list stays the one the tuner fit on

    def _decoding_scale(self, weights: np.ndarray, like: np.ndarray | None = None) -> np.ndarray:
        """``weights`` scaled to an L1 norm of 1 (or to that of ``like``) if ``decode_norm`` says so and no fixed
        feature has a non-zero weight: the same ranking of every translation."""
        if self.decode_norm == "none" or (self.view.active and self.view.has_column):
            return weights
        total = float(np.abs(weights).sum())
        norm = 1.0 if like is None else float(np.abs(like).sum())
        return weights * (norm / total) if total > 0 and norm > 0 else weights

    def _accumulate(self, accumulated, kbest: KBest):
        if self.accumulate == "none" or accumulated is None:
            return [kbest] if self.accumulate == "aggregate" else kbest
        if self.accumulate == "merge":
            return accumulated.merge(kbest)
        return accumulated + [kbest]

    def _log(self, record: IterationRecord, forests: bool = False) -> None:
        """One line per iteration in ``tune.log`` (for a hypergraph tuner ``hypotheses`` are the edges of
        the iteration's forests): the decoded dev BLEU and length ratio, the tuner's BLEU and length ratio on
        its data, and the step search's part of the tuner's step with the search graphs' BLEU."""
        def ratio(value):
            return f", length ratio {value:.3f}" if value is not None else ""

        size = (f"tuned BLEU on the forests {100 * record.tuned_bleu:.2f}, {record.hypotheses} forest edges"
                if forests else f"tuned BLEU on the k-best {100 * record.tuned_bleu:.2f}"
                f"{ratio(record.tuned_length_ratio)}, {record.hypotheses} hypotheses ({record.new_hypotheses} new)")
        step = ""
        if record.step is not None:
            step = (f"; step {record.step:.3g} of the tuner's (search-graph BLEU {100 * record.step_bleu:.2f} there"
                    + (f", {100 * record.full_step_bleu:.2f} at the tuner's weights)" if record.step < 1 else ")"))
        previous = [r for r in self.history if r.iteration < record.iteration]
        if record.rejected:
            # a trial is rejected against the record before it, so there is one
            shown = [_distinct_percents(b, previous[-1].dev_bleu)[0] for b in record.rejected]
            step += (f"; accepted after {len(record.rejected)} rejected trial"
                     + ("s" if len(record.rejected) > 1 else "") + " (decoded dev BLEU " + ", ".join(shown) + ")")
        change = f" ({100 * (record.dev_bleu - previous[-1].dev_bleu):+.2f})" if previous else ""
        self._log_line(f"iteration {record.iteration}: decoded dev BLEU {100 * record.dev_bleu:.2f}{change}"
                       f"{ratio(record.dev_length_ratio)}; {size}{step}; {record.seconds:.1f} s")

    def _log_line(self, line: str) -> None:
        """Append a line to ``tune.log`` and pass it to ``on_iteration``."""
        with open(self._path("tune.log"), "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        if self.on_iteration is not None:
            self.on_iteration(line)

    def _finish(self, last: np.ndarray) -> np.ndarray:
        """``weights.final``: the best-dev-BLEU weights (those a decode was scored with) or the last."""
        final = last
        if self.return_best and self.history:
            best = max(self.history, key=lambda r: (r.dev_bleu, -r.iteration))
            final = np.asarray(best.weights, dtype=np.float64)
        names = self.decoder.space.names
        write_lines(self._path("weights.final"), [f"{n} {repr(float(v))}" for n, v in zip(names, final)])
        with atomic_write(self._path("history.json")) as out:
            json.dump([r.__dict__ for r in self.history], out, indent=1)
        return final


def _differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    """``"key: old -> new"`` for every setting that differs (nested keys joined by dots; digests shortened)."""
    def show(value) -> str:
        text = json.dumps(value, sort_keys=True)
        return text[:13] + "...\"" if isinstance(value, str) and len(value) == 64 else text

    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {show(a)} -> {show(b)}")
    return out


def _tuner_class(name: str) -> type[Tuner]:
    return type(get_tuner(name))


def _new_hypotheses(accumulated, kbest: KBest) -> int:
    """Hypotheses of ``kbest`` not in the merged list (merge) or in the previous iteration's list."""
    if accumulated is None:
        return kbest.n_hypotheses
    previous = accumulated[-1] if isinstance(accumulated, list) else accumulated
    return previous.merge(kbest).n_hypotheses - previous.n_hypotheses


class _BatchSource:
    """Online tuners' view of the dev decoder: some sentences under given weights, with statistics."""

    def __init__(self, run: TuningRun, iteration: int):
        if not run.decoder.decodes_batches:  # the base class's error, before any decoding
            DevDecoder.decode_batches(run.decoder, [], iteration)
        self.run = run
        self.iteration = iteration
        self.space = run.view.space if run.view.active else run.decoder.space
        self.n_sentences = run.references.n_sentences
        self.references = run.references

    def decode(self, requests) -> list[KBest]:
        run = self.run
        requests = [(run._run_weights(w, count=False), indices) for w, indices in requests]
        lists = run.decoder.decode_batches(requests, self.iteration)
        for kbest in lists:
            kbest.set_stats(run.references.kbest_stats(kbest))
        return [run._tuner_kbest(kbest) for kbest in lists]

    def decode_forests(self, requests) -> list[list]:
        """The forests of each request's sentences (in the tuner's view of the features), for an online tuner
        that finds its hope and fear on forests."""
        run = self.run
        requests = [(run._run_weights(w, count=False), indices) for w, indices in requests]
        batches = run.decoder.decode_batch_forests(requests, self.iteration)
        return [[run.view.forest(g) if run.view.active else g for g in forests] for forests in batches]


def _distinct_percents(a: float, b: float) -> tuple[str, str]:
    """BLEU fractions ``a`` and ``b`` as percentages with two decimals, or with as many more (up to six) as
    make them differ, so that a log line never says that 32.00 is below 32.00."""
    for places in range(2, 7):
        low, high = f"{100 * a:.{places}f}", f"{100 * b:.{places}f}"
        if low != high:
            break
    return low, high
