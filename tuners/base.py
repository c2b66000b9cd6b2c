"""The Tuner interface and the registry of tuners by name.

A tuner is configured by keyword arguments in ``__init__`` (stored unchanged, no
work there) and optimises weights on fixed tuning data with ``fit(data, w0)``,
which returns the new weights and leaves ``weights_`` and ``history_`` (one dict
per inner iteration or epoch) on the tuner, as scikit-learn estimators do.
``data`` is a :class:`minismt.kbest.KBest` with BLEU statistics; weights are
float64 arrays over ``data.space`` (dense names first, then sparse names).
Every random choice comes from ``numpy.random.default_rng(seed)`` made inside
``fit``, so the same seed gives bit-identical weights.
"""

from __future__ import annotations

import inspect
import json
from typing import Callable, Protocol, Sequence

import numpy as np

from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph import ForestData
from minismt.kbest import KBest

REGISTRY: dict[str, type["Tuner"]] = {}


class Tuner:
    """Base class: parameters in ``__init__``, optimisation in :meth:`fit`."""

    name = "tuner"
    needs = "kbest"  # what fit() takes: "kbest" (n-best tuners), "hypergraph" or "decoder" (online)
    accumulate = "merge"  # the tuning loop's default accumulation for this tuner (listwise: "aggregate")

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
    """A tuner that decodes as it learns (``needs = "decoder"``).

    ``fit(source, w0, state)`` makes one round over the dev set (one outer
    iteration of the tuning loop), decoding mini-batches through ``source``;
    it leaves ``state_``, a JSON-serialisable dict (e.g. the step counter of a
    learning-rate schedule) that the loop checkpoints and passes to the next
    round, so that a resumed run continues exactly where it stopped.
    """

    needs = "decoder"

    def fit(self, source: BatchSource, w0, state: dict | None = None) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} does not implement fit")

    @staticmethod
    def check_start(source: BatchSource, w0) -> np.ndarray:
        return source.space.start_weights(w0)


class HypergraphTuner(Tuner):
    """A tuner that optimises on forests (``needs = "hypergraph"``): ``fit(data: ForestData, w0)``.

    ``forest_iterations`` is how many of the latest outer iterations' forests
    the tuning loop passes (1: the current ones; CHG-BO: 2, previous and current).
    """

    needs = "hypergraph"
    forest_iterations = 1

    def fit(self, data: "ForestData", w0) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} does not implement fit")


def register(name: str) -> Callable[[type[Tuner]], type[Tuner]]:
    """Class decorator adding a tuner to :data:`REGISTRY` under ``name``."""
    def add(cls: type[Tuner]) -> type[Tuner]:
        if name in REGISTRY and REGISTRY[name] is not cls:
            raise ValueError(f"tuner name {name!r} registered twice")
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
