"""Tune a cdec system with any minismt tuner: cdec decodes the dev set, minismt tunes.

:class:`CdecDevDecoder` is the dev decoder of a :class:`~tuners.loop.TuningRun`.
Every decode runs the user's cdec command, without a shell::

    <cdec command> -c cdec.ini -w weights -i input -k K -r > kbest      (k-best tuners)
    <cdec command> -c cdec.ini -w weights -i input -O DIR > 1best       (hypergraph tuners)
    <cdec command> -c cdec.ini -w weights -i input -k K -r -O DIR > kbest   (both: the step search)

``weights`` is a cdec weights file (``Name value``); the start weights come from
one too, and its names are the dense features (in its order) and the features
tuned: every other feature of the k-best lists or forests is sparse and keeps
weight 0, as in cdec's own tuners (:meth:`CdecDevDecoder.fixed_by_config`),
unless the user frees it (``minismt tune --free``). The tuned weights are a cdec
weights file (:func:`plugins.cdec.weights.write_cdec_weights`).

The sentence markers ``<s>`` and ``</s>`` are left out of every translation, k-best and forest
(:data:`SENTENCE_MARKERS`). Forests: today's cdec writes Boost-serialised ``DIR/<i>.bin.gz``
(:mod:`minismt.hypergraph.cdec_binary`), cdec up to 2014 ``DIR/<i>.json.gz``
(:mod:`minismt.hypergraph.cdec_json`); both are read.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph import read_cdec_forests
from plugins.cdec.kbest_file import read_kbest
from plugins.cdec.weights import read_cdec_weights, write_cdec_weights
from tuners.devdecoder import ProgramDevDecoder

SENTENCE_MARKERS = ("<s>", "</s>")
"""Left out of cdec's translations: a system whose input wraps each sentence in them (``minismt train --hiero``'s
cdec folders, as Moses' glue grammar) carries them into its output, and no BLEU counts them (the translations
are scored as ``sed 's/^<s> //; s/ <\\/s>$//'`` leaves them)."""


class CdecDevDecoder(ProgramDevDecoder):
    """Decodes the dev set with a cdec command and cdec.ini (see the module docstring).

    ``command``: cdec and the user's flags (``["cdec"]``); ``config``: cdec.ini;
    ``start_weights``: a cdec weights file, whose names are the dense features.
    """

    outputs_forests = True
    decodes_with_forests = True  # k-best lists and forests from one run: the tuning loop's step search

    name = "cdec"

    def __init__(self, command: Sequence[str], config: str | os.PathLike, start_weights: str | os.PathLike,
                 sentences: Sequence[str], work_dir: str | os.PathLike, kbest: int = 100):
        self.config = os.path.abspath(os.fspath(config))
        if not os.path.isfile(self.config):
            raise InputError("no such file", self.config, expected="the cdec.ini to tune (--config)")
        start = read_cdec_weights(start_weights)
        if not start:
            raise InputError("no weights", start_weights, expected="'Name value' lines: the features to tune")
        space = FeatureSpace(list(start))
        super().__init__(command, space, sentences, os.fspath(work_dir), kbest)
        self.default_weights = space.weights(start, grow=False)
        self.vocab = Vocabulary()  # shared by every decode's forests
        self.named = frozenset(start)

    def fixed_by_config(self, name: str) -> bool:
        """A feature the start weights file does not name keeps weight 0 (unless freed)."""
        return name not in self.named

    def _command(self, folder, weights, input_path, hypergraph_dir, kbest=True):
        weights_path = os.path.join(folder, "weights")
        write_cdec_weights(weights_path, self.space.weights_dict(weights, skip_zero_sparse=True))
        argv = self.command + ["-c", self.config, "-w", weights_path, "-i", input_path]
        if kbest:
            argv += ["-k", str(self.kbest), "-r"]
        if hypergraph_dir is not None:
            argv += ["-O", hypergraph_dir]
        return argv

    def _read_kbest(self, folder, n_sentences):
        return read_kbest(os.path.join(folder, "stdout"), space=self.space, n_sentences=n_sentences,
                          drop_words=SENTENCE_MARKERS)

    def _read_hypergraphs(self, hypergraph_dir, n_sentences):
        return [forest.without_words(SENTENCE_MARKERS)
                for forest in read_cdec_forests(hypergraph_dir, n_sentences, self.space, self.vocab)]

    def write_config(self, weights: np.ndarray, path: str | os.PathLike) -> None:
        """The tuned cdec weights file (every dense weight, non-zero sparse ones), atomically."""
        write_cdec_weights(path, self.space.weights_dict(weights, skip_zero_sparse=True))
