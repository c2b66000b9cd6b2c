"""Tuning runs built in one place: ``minismt tune``, the pipeline's runs and its kernel precompilation.

The options have the names of ``minismt tune`` and of the pipeline's ``[tune]`` table
(``iterations``, ``keep``, ``params``); minismt's dev decoder gets its settings as one
:class:`~minismt.decode.DecoderSettings`.
"""

from __future__ import annotations

import os
from concurrent.futures import Executor
from typing import Mapping, Sequence

from minismt.decode.settings import DecoderSettings
from tuners.devdecoder import DevDecoder, MinismtDevDecoder
from tuners.loop import TuningRun


def tuning_settings(tune: Mapping) -> DecoderSettings:
    """The dev decoder's settings of a pipeline's ``[tune]`` table (or of a run's spec, which has its keys;
    ``jobs`` may be left out)."""
    return DecoderSettings(stack_size=tune["stack"], kbest=tune["kbest"], jobs=tune.get("jobs", DecoderSettings.jobs))


def tuning_run(decoder: DevDecoder, references: Sequence[Sequence[str]], tuner: str, run_dir: str | os.PathLike, *,
               iterations: int = 10, seed: int = 0, accumulate: str | None = None, reset_after: int | None = None,
               keep: str = "best", lowercase: bool = False, params: dict | None = None,
               on_iteration=None, fix: Sequence[str] = (), free: Sequence[str] = (),
               forest_prune: int | None = None, step_search: str | None = None,
               decode_norm: str | None = None, accept: str = "decoded") -> TuningRun:
    """The :class:`TuningRun` of ``tuner`` decoding with ``decoder``; ``keep`` is "best" (the best dev
    BLEU's weights) or "last", ``params`` the tuner's parameters, ``fix`` and ``free`` feature name
    patterns (see :mod:`tuners.fixing`), ``forest_prune`` the hypergraph tuners' forest pruning (edges per
    reference word), ``step_search`` "forest" or "none", ``decode_norm`` "l1" or "none" (None: the run's
    defaults) and ``accept`` "decoded" or "any" (see :class:`TuningRun`)."""
    return TuningRun(decoder, references, tuner, run_dir, accumulate=accumulate, reset_after=reset_after,
                     max_iter=iterations, seed=seed, return_best=keep == "best", lowercase=lowercase,
                     tuner_params=params, on_iteration=on_iteration, fix=fix, free=free, forest_prune=forest_prune,
                     step_search=step_search, decode_norm=decode_norm, accept=accept)


def minismt_tuning_run(model_dir: str, sources: Sequence[str], references: Sequence[Sequence[str]], tuner: str,
                       run_dir: str | os.PathLike, settings: DecoderSettings, *, progress: bool = False,
                       executor: Executor | None = None, **options) -> TuningRun:
    """:func:`tuning_run` with minismt's dev decoder of ``model_dir`` on ``sources`` (``run.decoder``; the
    caller closes it), decoding in ``settings.jobs`` local processes or on ``executor`` (a Dask client's)."""
    decoder = MinismtDevDecoder(model_dir, sources, settings, executor=executor, progress=progress)
    return tuning_run(decoder, references, tuner, run_dir, **options)
