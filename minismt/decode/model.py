"""The phrase-based model the decoder reads: phrase table, language model, feature weights.

:meth:`PhraseModel.load` reads a model directory written by ``minismt train``
(its ``manifest.json``: the ``.npz`` phrase table, the ARPA language model, the
15 dense feature names with their default weights and the distortion limit).
:meth:`PhraseModel.from_parts` builds one from objects (tests, hand-made tables).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Mapping

import numpy as np

from minismt.corpus import Vocabulary
from minismt.decode import _kernels
from minismt.errors import InputError, finite_number
from minismt.extract.phrase_table import PhraseTable
from minismt.features import FeatureSpace
from minismt.io import iter_lines
from minismt.lm import LanguageModel
from minismt.manifest import DEFAULT_WEIGHTS as TRAIN_DEFAULT_WEIGHTS
from minismt.manifest import load_manifest

# The dense features of the phrase-based model, named as Moses names them in features.dat.
FEATURE_NAMES = (
    "LexicalReordering0_0", "LexicalReordering0_1", "LexicalReordering0_2",
    "LexicalReordering0_3", "LexicalReordering0_4", "LexicalReordering0_5",
    "Distortion0_0", "LM0_0", "WordPenalty0_0", "PhrasePenalty0_0",
    "TranslationModel0_0", "TranslationModel0_1", "TranslationModel0_2", "TranslationModel0_3",
    "UnknownWordPenalty0_0",
)

# The untuned weights of Moses' train-model.perl, as minismt.train writes them into manifests;
# UnknownWordPenalty0_0 is -100 per copied unknown word with weight 1, as in Moses.
DEFAULT_WEIGHTS = dict(TRAIN_DEFAULT_WEIGHTS)

DEFAULT_DISTORTION_LIMIT = 6

_COUNT_LOCK = threading.Lock()  # decoders of one model may be made by several threads


class PhraseModel:
    """Phrase table + language model + weights over the 15 dense features.

    Attributes
    ----------
    table : PhraseTable
    lm : LanguageModel
    space : FeatureSpace
        The 15 dense names (:data:`FEATURE_NAMES`).
    weights : float64[15]
        The model's weights (the manifest's defaults unless replaced).
    distortion_limit : int
        Moses' ``distortion-limit``; negative means no limit.
    tgt_to_lm : int32[len(table.tgt_vocab)]
        The language-model id of every target word of the table (``<unk>`` = 0).
    source_hashes, source_order : the table's source phrases by hash (for finding the phrases of a sentence)
    lm_bounds : float64[len(lm.vocab)]
        An upper bound of log10 p(w | any context) per LM word (:func:`~._kernels.word_bounds`).
    path : str or None
        The model directory it was loaded from.
    """

    def __init__(self, table: PhraseTable, lm: LanguageModel, weights=None,
                 distortion_limit: int = DEFAULT_DISTORTION_LIMIT, path: str | None = None):
        self.table = table
        self.lm = lm
        self.space = FeatureSpace(FEATURE_NAMES)
        self.distortion_limit = _integer(distortion_limit, "distortion limit")
        self.path = path
        self.tgt_to_lm = lm.vocab_map(table.tgt_vocab)
        self.source_hashes, self.source_order = table.index
        self.lm_bounds = np.empty(len(lm.vocab))
        _kernels.word_bounds(lm.tables, self.lm_bounds)
        self.max_phrase_length = int(np.diff(table.src_offsets).max()) if table.n_sources else 1
        self.weights = self.weight_vector(weights, base=np.array([DEFAULT_WEIGHTS[n] for n in FEATURE_NAMES]))

    @classmethod
    def load(cls, model_dir: str | os.PathLike) -> "PhraseModel":
        """Read the model directory written by ``minismt train``."""
        model_dir = os.fspath(model_dir)
        manifest = load_manifest(model_dir, kind="phrase")
        files = manifest["files"]
        for key in ("phrase_table", "lm_arpa"):
            if key not in files:
                raise InputError(f"the manifest names no {key} file", os.path.join(model_dir, "manifest.json"))
        names = manifest.get("features", list(FEATURE_NAMES))
        if sorted(names) != sorted(FEATURE_NAMES):
            raise InputError(f"manifest features {names}", os.path.join(model_dir, "manifest.json"),
                             expected="the 15 dense phrase-based features " + " ".join(FEATURE_NAMES))
        table = PhraseTable.load(os.path.join(model_dir, files["phrase_table"]))
        lm = LanguageModel.of_model(model_dir, files)
        return cls(table, lm, manifest.get("default_weights"),
                   manifest.get("distortion_limit", DEFAULT_DISTORTION_LIMIT), path=model_dir)

    @classmethod
    def from_parts(cls, table: PhraseTable, lm: LanguageModel, weights=None,
                   distortion_limit: int = DEFAULT_DISTORTION_LIMIT) -> "PhraseModel":
        """A model from a phrase table and a language model in memory."""
        return cls(table, lm, weights, distortion_limit)

    def weight_vector(self, weights=None, base=None) -> np.ndarray:
        """float64[15]: ``base`` (default: the model's weights) with ``weights`` put in.

        ``weights`` is a ``{name: value}`` mapping over :data:`FEATURE_NAMES`
        (names not given keep their value) or a sequence of 15 numbers.
        Unknown names and non-finite values are an :class:`InputError`.
        """
        out = np.array(self.weights if base is None else base, dtype=np.float64)
        if weights is None:
            return out
        if isinstance(weights, Mapping):
            for name, value in weights.items():
                index = self.space.get(name)
                if index is None:
                    raise InputError(f"unknown feature name {name!r}",
                                     expected="one of " + " ".join(FEATURE_NAMES))
                out[index] = finite_number(value, f"weight of {name}")
            return out
        try:
            array = np.asarray(weights, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError("weights are neither a mapping nor numbers",
                             expected="{name: value} or 15 numbers") from None
        if array.shape != (len(FEATURE_NAMES),):
            raise InputError(f"{array.size} weights", expected=f"{len(FEATURE_NAMES)} in the order of FEATURE_NAMES")
        if not np.all(np.isfinite(array)):
            raise InputError("a weight is not finite", expected="finite weights")
        return array.copy()

    def with_weights(self, weights) -> "PhraseModel":
        """A model sharing this one's table and LM, with ``weights`` put in (see :meth:`weight_vector`)."""
        other = object.__new__(PhraseModel)
        other.__dict__.update(self.__dict__)
        other.weights = self.weight_vector(weights)
        return other

    def weight_dict(self) -> dict[str, float]:
        return {name: float(v) for name, v in zip(FEATURE_NAMES, self.weights)}

    def training_word_counts(self) -> tuple[Counter, Counter]:
        """``(source counts, target counts)``: how often each word occurs in the training corpus.

        Read from the cleaned training text the manifest names (``files.train_src``/``train_tgt``,
        the text the phrase table was extracted from), counted on first use and kept on the model
        (nothing the training writes holds word counts: the phrase table's are phrase-pair counts
        after the table limit). A model without a directory has no training corpus: an
        :class:`InputError`.
        """
        with _COUNT_LOCK:
            counts = self.__dict__.get("_training_word_counts")
            if counts is None:
                counts = self.__dict__["_training_word_counts"] = self._count_training_words()
        return counts

    def _count_training_words(self) -> tuple[Counter, Counter]:
        if self.path is None:
            raise InputError("the model has no training corpus (it was not loaded from a model directory)",
                             expected="a model directory from 'minismt train'")
        manifest_path = os.path.join(self.path, "manifest.json")
        files = load_manifest(self.path)["files"]
        counts = []
        for key in ("train_src", "train_tgt"):
            if key not in files:
                raise InputError(f"the manifest names no {key} file", manifest_path,
                                 expected="a model directory from 'minismt train'")
            path = os.path.join(self.path, files[key])
            if not os.path.exists(path):
                raise InputError(f"the training corpus file {files[key]} is missing", path,
                                 expected="the model directory as 'minismt train' wrote it")
            counter: Counter = Counter()
            for _, line in iter_lines(path):
                counter.update(line.split())
            counts.append(counter)
        return counts[0], counts[1]

    def target_vocabulary(self) -> Vocabulary:
        """A copy of the phrase table's target vocabulary (the decoder extends it with unknown words)."""
        return Vocabulary(self.table.tgt_vocab.words)




def _integer(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputError(f"{name} {value!r}", expected="an integer")
    return int(value)
