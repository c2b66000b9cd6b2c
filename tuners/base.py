"""The Tuner interface and the registry of tuners by name.

A tuner is configured by keyword arguments in ``__init__`` (stored unchanged, no
work there; :meth:`Tuner.get_params` and :meth:`Tuner.set_params` read and set
them) and optimises weights on fixed tuning data with ``fit(data, w0)``, the one
fit form of every tuner, which returns the new weights and leaves ``weights_``
and ``history_`` (one dict per inner iteration or epoch) on the tuner, as
scikit-learn estimators do. What ``data`` is, and what else the tuning loop
gets ready for the tuner, the class declares in its :class:`TunerTags` (as
scikit-learn's estimator tags): a :class:`minismt.kbest.KBest` with BLEU
statistics (the default), a :class:`KBestWithReference` (the k-best list and
the forced decoding of the references), a
:class:`minismt.hypergraph.ForestData` or a :class:`BatchSource`. Weights are
float64 arrays over ``data.space`` (dense names first, then sparse names).
Every random choice comes from ``numpy.random.default_rng(seed)`` made inside
``fit``, so the same seed gives bit-identical weights.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.kbest import KBest

REGISTRY: dict[str, type["Tuner"]] = {}

FITS_ON = ("kbest", "forests", "decoder")
ACCUMULATIONS = ("merge", "aggregate", "none")


@dataclass(frozen=True)
class TunerTags:
    """What a tuner class fits on and needs from the tuning loop (its ``tags``).

    fits_on : ``"kbest"`` (``fit`` takes the accumulated :class:`KBest`), ``"forests"``
        (a :class:`~minismt.hypergraph.ForestData` of the dev set's forests) or ``"decoder"``
        (a :class:`BatchSource`: an online tuner decodes its own mini-batches).
    needs_reference : with ``fits_on="kbest"``, ``fit`` takes a :class:`KBestWithReference`
        holding the forced decoding of each sentence's first reference, when the decoder can
        force (else the plain :class:`KBest`).
    forest_iterations : with ``fits_on="forests"``, how many of the latest outer iterations'
        forests ``fit`` gets (1: the current ones; CHG-BO: 2, previous and current).
    accumulate : the loop's default accumulation of k-best lists: ``"merge"``, ``"aggregate"``
        (the listwise tuners) or ``"none"``.
    scales_weights : whether the loop may decode this tuner's weights scaled to an L1 norm of 1 by default
        (:class:`~tuners.loop.TuningRun`'s ``decode_norm``): True for the n-best tuners, whose results mean a
        direction; False where the tuner works in the weights' own units (NBL-BO's box of +-0.1).
    """

    fits_on: str = "kbest"
    needs_reference: bool = False
    forest_iterations: int = 1
    accumulate: str = "merge"
    scales_weights: bool = True

    def __post_init__(self):
        if self.fits_on not in FITS_ON:
            raise ValueError(f"fits_on={self.fits_on!r}: one of {', '.join(FITS_ON)}")
        if self.accumulate not in ACCUMULATIONS:
            raise ValueError(f"accumulate={self.accumulate!r}: one of {', '.join(ACCUMULATIONS)}")
        if self.forest_iterations < 1:
            raise ValueError(f"forest_iterations={self.forest_iterations}: at least 1")


@dataclass(frozen=True)
class KBestWithReference:
    """Tuning data of a tuner with ``needs_reference``: the k-best list and the reference derivations.

    ``reference`` holds one instance per dev sentence with at most one hypothesis: the forced
    decoding of the sentence's first reference under the weights ``kbest`` was decoded with
    (none where the reference is unreachable).
    """

    kbest: KBest
    reference: KBest


class Tuner:
    """Base class: parameters in ``__init__``, optimisation in :meth:`fit`, needs in :attr:`tags`."""

    name = "tuner"
    tags = TunerTags()

    @classmethod
    def param_names(cls) -> list[str]:
        """The constructor's keyword arguments: the tuner's parameters."""
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    @classmethod
    def check_param_names(cls, names) -> None:
        """An :class:`InputError` naming the unknown ones among ``names`` and listing the valid ones."""
        unknown = [key for key in names if key not in cls.param_names()]
        if unknown:
            raise InputError(f"tuner {cls.name!r} has no parameter {', '.join(map(repr, unknown))}",
                             expected=f"one of {', '.join(cls.param_names())}")

    def get_params(self) -> dict:
        """The constructor's keyword arguments and their current values (scikit-learn's contract)."""
        return {p: getattr(self, p) for p in self.param_names()}

    def set_params(self, **params) -> "Tuner":
        """Set parameters by name, as scikit-learn estimators do; an unknown name is an error."""
        self.check_param_names(params)
        for key, value in params.items():
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def fit(self, data: KBest, w0) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} does not implement fit")

    @staticmethod
    def check_data(data: KBest, w0) -> np.ndarray:
        """Validate tuning data and the start point; returns ``w0`` as a float64 array over the space."""
        if not isinstance(data, KBest):
            raise InputError(f"tuning data of type {type(data).__name__}", expected="a KBest")
        if data.stats is None:
            raise InputError("the k-best list has no BLEU statistics",
                             expected="statistics computed against the references")
        if data.n_hypotheses == 0:
            raise InputError("the k-best list is empty", expected="at least one hypothesis")
        empty = np.flatnonzero(np.diff(data.offsets) == 0)
        if empty.size:
            raise InputError(f"{empty.size} instance(s) have no hypothesis, the first is dev sentence "
                             f"{int(data.sentence_ids[empty[0]])}",
                             expected="at least one hypothesis for every sentence")
        if isinstance(w0, dict):
            w = data.space.weights(w0, grow=False, require_dense=True)
        else:
            w = data.weight_array(np.asarray(w0, dtype=np.float64))
        if not np.all(np.isfinite(w)):
            raise InputError("start weights contain NaN or inf", expected="finite weights")
        return w.astype(np.float64, copy=True)


class BatchSource(Protocol):
    """What an online tuner decodes with: some dev sentences under given weights, scored."""

    space: FeatureSpace
    n_sentences: int

    def decode(self, requests: Sequence[tuple[np.ndarray, Sequence[int]]]) -> list[KBest]:
        """One k-best list with BLEU statistics per ``(weights, dev sentence indices)`` request."""


class OnlineTuner(Tuner):
    """A tuner that decodes as it learns (``fits_on="decoder"``).

    ``fit(source, w0)`` makes one round over the dev set (one outer iteration
    of the tuning loop), decoding mini-batches through ``source`` (a
    :class:`BatchSource`); it starts from :attr:`start_state` (set with
    :meth:`warm_start`) and leaves ``state_``, a JSON-serialisable dict (e.g.
    the step counter of a learning-rate schedule) that the loop checkpoints and
    gives the next round with :meth:`warm_start`, so that a resumed run
    continues exactly where it stopped.
    """

    tags = TunerTags(fits_on="decoder")
    start_state: dict | None = None

    def warm_start(self, state: dict | None) -> "OnlineTuner":
        """Start the next :meth:`fit` from ``state``, an earlier round's ``state_`` (None: the first round)."""
        self.start_state = None if state is None else dict(state)
        return self

    @staticmethod
    def check_start(source: BatchSource, w0) -> np.ndarray:
        return source.space.start_weights(w0)


def register(name: str) -> Callable[[type[Tuner]], type[Tuner]]:
    """Class decorator adding a tuner to :data:`REGISTRY` under ``name``."""
    def add(cls: type[Tuner]) -> type[Tuner]:
        if name in REGISTRY and REGISTRY[name] is not cls:
            raise ValueError(f"tuner name {name!r} registered twice")
        if cls.tags.fits_on == "decoder" and not issubclass(cls, OnlineTuner):
            raise TypeError(f"tuner {name!r} fits on a decoder: it must subclass OnlineTuner (the loop calls warm_start)")
        cls.name = name
        REGISTRY[name] = cls
        return cls
    return add


def get_tuner(name: str, **params) -> Tuner:
    """A new tuner by registry name, e.g. ``get_tuner("apro", C=0.01)``."""
    import tuners  # noqa: F401  (importing the package registers every tuner)
    try:
        cls = REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown tuner {name!r}", expected=f"one of {', '.join(sorted(REGISTRY))}") from None
    cls.check_param_names(params)
    return cls(**params)


def parse_tuner_params(items) -> dict:
    """``{key: value}`` from ``KEY=VALUE`` strings; a VALUE that is a JSON literal is decoded."""
    params: dict = {}
    for item in items:
        key, equals, text = item.partition("=")
        key = key.strip()
        if not equals or not key.isidentifier():
            raise InputError(f"--tuner-param {item!r}", expected="KEY=VALUE with KEY a parameter name")
        if key in params:
            raise InputError(f"--tuner-param {key} given twice", expected="each parameter once")
        try:
            params[key] = json.loads(text)
        except ValueError:
            params[key] = text
    return params
