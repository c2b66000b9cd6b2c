"""The settings of a decode: search, k-best list and processes, with their defaults and checks in one place.

The command line (``minismt decode`` and ``minismt tune``), the pipeline's configuration, the dev
decoder of a tuning run and the worker processes all take their defaults from
:class:`DecoderSettings`, and every value is checked when one is made. This module imports no
numba, so that ``minismt --help`` can show the defaults without loading the decoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from minismt.errors import InputError

SPARSE_FEATURES = ("rule-id", "word-pair", "rule-shape", "source-bigram", "target-bigram")
"""The sparse feature families, in their canonical order: the phrase-based decoder's rule-id and
word-pair (:mod:`minismt.decode.sparse`), the Hiero decoder's rule-id, rule-shape, source-bigram and
target-bigram (:mod:`minismt.extract.hiero_features`)."""
PHRASE_SPARSE_FEATURES = ("rule-id", "word-pair")
HIERO_SPARSE_FEATURES = ("rule-id", "rule-shape", "source-bigram", "target-bigram")
PER_CHUNK = "<each chunk's own, from the rule store>"
"""A Hiero :class:`~minismt.parallel.DecodeJob`'s grammar for a stream of lines (standard input): the process
that decodes a chunk of lines reads their grammar from the model's rule store
(:func:`minismt.decode.hiero.store_and_lm`), as cdec extracts each sentence's grammar, so no line waits for
the end of the input."""


def parse_sparse_features(value) -> tuple[str, ...]:
    """The canonical tuple of sparse feature families of ``value``.

    ``value`` is None, a comma-separated string (``"rule-id,word-pair"``; ``""`` and
    ``"none"`` mean none) or a sequence of family names. Unknown names are an
    :class:`InputError`; repeats are dropped and the order is :data:`SPARSE_FEATURES`'.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        items = [item.strip() for item in value.split(",") if item.strip()]
        if items == ["none"]:
            items = []
    else:
        try:
            items = list(value)
        except TypeError:
            raise InputError(f"sparse features {value!r}",
                             expected="names among " + ", ".join(SPARSE_FEATURES)) from None
    for item in items:
        if item not in SPARSE_FEATURES:
            raise InputError(f"unknown sparse feature {item!r}", expected="names among " + ", ".join(SPARSE_FEATURES))
    return tuple(family for family in SPARSE_FEATURES if family in items)


@dataclass(frozen=True)
class DecoderSettings:
    """How to decode a corpus; the defaults are Moses'.

    ``stack_size``: histogram pruning (Moses ``-s``); ``beam_threshold``: threshold pruning (Moses
    ``-b``; 0 switches it off); ``distortion_limit``: None takes the model's, a negative one means
    none; ``kbest``: distinct (``distinct``) or derivation k-best list size per sentence, 0 for the
    1-best only; ``sparse_features``: sparse feature families (:data:`SPARSE_FEATURES`, a tuple or
    a comma-separated string); ``word_pair_vocabulary``: with the ``word-pair`` family, keep only the
    pairs of two words among the N most frequent source and target words of the training corpus
    (the APRO paper's 500; None: every aligned pair); ``jobs``: decoding processes (results do not
    depend on it). For a Hiero model: ``pop_limit``, cube pruning's pops per chart cell (cdec's
    200; Moses' chart decoder pops 1000), ``max_chart_span``, the longest span a rule-table rule
    covers (Chiang's 10; Moses' 20) and ``table_limit``, the rules kept per source side (Moses'
    20; 0 keeps all). A bad value is an :class:`InputError` naming it.
    """

    stack_size: int = 200
    beam_threshold: float = 1e-5
    distortion_limit: int | None = None
    kbest: int = 0
    distinct: bool = True
    sparse_features: tuple[str, ...] = ()
    word_pair_vocabulary: int | None = None
    jobs: int = 1
    pop_limit: int = 200
    max_chart_span: int = 10
    table_limit: int = 20

    def __post_init__(self):
        for name, value in _checked(self.__dict__, {}).items():
            object.__setattr__(self, name, value)
        _check_combination(self.__dict__, {})

    @classmethod
    def from_options(cls, labels: Mapping[str, str], **values) -> "DecoderSettings":
        """Settings from a user's options; an error names the field as ``labels`` spells it
        (e.g. ``{"stack_size": "--stack"}``)."""
        checked = _checked(values, labels)
        _check_combination({"sparse_features": cls.sparse_features, **checked}, labels)
        return cls(**checked)

    def search_key(self) -> tuple:
        """What decides a decoder's search (not the list size or the processes)."""
        return (self.stack_size, self.beam_threshold, self.distortion_limit, self.sparse_features,
                self.word_pair_vocabulary, self.pop_limit, self.max_chart_span, self.table_limit)


_INTEGERS = {"stack_size": 1, "kbest": 0, "jobs": 1, "pop_limit": 1, "max_chart_span": 1,
             "table_limit": 0}  # the smallest value of each integer field


def check_integer(value, label: str, low: int | None = None) -> int:
    """``value`` as an int (a bool is not one), at least ``low``; else an :class:`InputError` naming ``label``."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise InputError(f"{label} {value!r}", expected="an integer")
    value = int(value)
    if low is not None and value < low:
        raise InputError(f"{label} {value}", expected=f"an integer >= {low}")
    return value


def _checked(values: Mapping, labels: Mapping[str, str]) -> dict:
    """``values`` (fields of :class:`DecoderSettings`) checked and in canonical form."""
    out = dict(values)
    for name, value in values.items():
        label = labels.get(name, name)
        if name in _INTEGERS:
            out[name] = check_integer(value, label, _INTEGERS[name])
        elif name == "distortion_limit":
            out[name] = None if value is None else check_integer(value, label)
        elif name == "word_pair_vocabulary":
            out[name] = None if value is None else check_integer(value, label, 1)
        elif name == "beam_threshold":
            try:
                threshold = float(value)
            except (TypeError, ValueError):
                raise InputError(f"{label} {value!r}", expected="a number in [0, 1]") from None
            if not 0.0 <= threshold <= 1.0:
                raise InputError(f"{label} {value}", expected="a number in [0, 1]")
            out[name] = threshold
        elif name == "distinct":
            out[name] = bool(value)
        elif name == "sparse_features":
            out[name] = parse_sparse_features(value)
    return out


def _check_combination(values: Mapping, labels: Mapping[str, str]) -> None:
    """A word-pair vocabulary limit needs the word-pair features (else it would be silently ignored)."""
    if values.get("word_pair_vocabulary") is not None and "word-pair" not in values.get("sparse_features", ()):
        label = labels.get("word_pair_vocabulary", "word_pair_vocabulary")
        raise InputError(f"{label} {values['word_pair_vocabulary']} without the word-pair sparse features",
                         expected=f"{labels.get('sparse_features', 'sparse_features')} including word-pair")


def sentence_tokens(sentence, what: str, max_length: int | None = None, limit: str = "") -> list[str]:
    """The tokens a decoder takes: a string split on whitespace, or a sequence of non-empty strings
    without whitespace; at most ``max_length`` of them (``limit`` says why), else an InputError."""
    if isinstance(sentence, str):
        tokens = sentence.split()
    else:
        try:
            tokens = list(sentence)
        except TypeError:
            raise InputError(f"{what} is {type(sentence).__name__}",
                             expected="a string or a list of tokens") from None
        if not all(isinstance(x, str) and x and not any(ch.isspace() for ch in x) for x in tokens):
            raise InputError(f"{what} tokens must be non-empty strings without whitespace")
    if max_length is not None and len(tokens) > max_length:
        raise InputError(f"{what} has {len(tokens)} tokens", expected=f"at most {max_length} ({limit})")
    return tokens
