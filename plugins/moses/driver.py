"""Tune a Moses system with any minismt tuner: Moses decodes the dev set, minismt tunes.

:class:`MosesDevDecoder` is the dev decoder of a :class:`~tuners.loop.TuningRun`.
Every decode runs the user's Moses command as mert-moses.pl runs it, without
a shell::

    <moses command> -config moses.ini -weight-overwrite 'WordPenalty0= -1 LM0= 0.5 ...'
        [-weight-file sparse-weights] -n-best-list nbest K distinct -input-file input > stdout

(``-output-search-graph-hypergraph true gz DIR`` instead of the n-best list
for hypergraph tuners, gzipped as mert-moses.pl asks for them, read by a numba
reader, deleted once read and pruned to 50 edges per reference word as Moses'
``kbmira --hg-prune``; both from one run for the tuning loop's step search, which
moves towards an n-best tuner's weights only as far as the search graphs reward). The dense features are those of the ``[weight]``
section of moses.ini, named ``Producer_i`` (0-based, as features.dat); the
start weights are that section's. Sparse features come from the n-best lists
and go back to Moses in a ``-weight-file`` of ``name value`` lines.

Untuneable features are found as mert-moses.pl finds them, by running
``<moses command> -config moses.ini -show-weights`` once: a producer it lists as
``Name UNTUNEABLE`` (``tuneable=false`` in moses.ini; UnknownWordPenalty0 and a
few others by default) and every value it shows as ``UNTUNEABLECOMPONENT``
(``tuneable-components``) keep their moses.ini weights (:meth:`fixed_by_config`;
Moses leaves them out of its n-best lists, so they cannot be freed).

:meth:`MosesDevDecoder.write_config` writes the tuned moses.ini: the numbers
of the ``[weight]`` lines change, every other byte of the file is kept; with
sparse weights, a ``moses.sparse-weights`` file is written next to it and a
``[weight-file]`` section pointing at it is appended (as mert-moses.pl does).
"""

from __future__ import annotations

import os
import subprocess
from typing import Sequence

import numpy as np

from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.features import FeatureSpace, format_weight, write_weights
from minismt.io import atomic_write
from plugins.moses.hypergraph import read_moses_hypergraphs
from plugins.moses.ini import flatten_weights, group_weights, read_moses_ini_weights, write_moses_ini
from plugins.moses.nbest import read_nbest
from tuners.devdecoder import ProgramDevDecoder

SPARSE_WEIGHTS = "moses.sparse-weights"
"""The sparse weights file written next to a tuned moses.ini."""


def untuneable_features(command: Sequence[str], config: str, weights: dict[str, float]
                        ) -> tuple[set[str], dict[str, list[int]]]:
    """The untuneable ``Name_i`` features among ``weights`` (flat moses.ini weights) as
    ``<command> -config CONFIG -show-weights`` prints them, and for every producer with untuneable
    components the indices of its tuneable ones (the values its n-best entries print)."""
    argv = list(command) + ["-config", config, "-show-weights"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True)
    except OSError as error:
        raise InputError(f"cannot run the Moses decoder {argv[0]!r}: {error.strerror or error}",
                         expected="a decoder command that runs (--decoder-cmd)") from None
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", errors="replace").strip()[-1500:] or "(nothing)"
        raise InputError(f"'{' '.join(argv)[:300]}' exited with status {done.returncode}; its stderr ends: "
                         f"{tail}", config, expected="a moses.ini the Moses command loads")
    sizes: dict[str, int] = {}
    for name in weights:
        producer = name.rsplit("_", 1)[0]
        sizes[producer] = sizes.get(producer, 0) + 1
    untuneable: set[str] = set()
    components: dict[str, list[int]] = {}
    for line in done.stdout.decode("utf-8", errors="replace").splitlines():
        tokens = line.split()
        if len(tokens) == 2 and tokens[1] == "UNTUNEABLE":
            untuneable.update(f"{tokens[0]}_{i}" for i in range(sizes.get(tokens[0], 0)))
        elif len(tokens) > 1 and tokens[0].endswith("=") and "UNTUNEABLECOMPONENT" in tokens[1:]:
            producer = tokens[0][:-1]
            values = tokens[1:]
            untuneable.update(f"{producer}_{i}" for i, v in enumerate(values) if v == "UNTUNEABLECOMPONENT")
            components[producer] = [i for i, v in enumerate(values) if v != "UNTUNEABLECOMPONENT"]
    return untuneable & set(weights), components


class MosesDevDecoder(ProgramDevDecoder):
    """Decodes the dev set with a Moses command and a moses.ini (see the module docstring).

    ``command``: the Moses program and the flags of the user (``["moses",
    "-threads", "2"]``); ``config``: the moses.ini to tune; ``sentences``: the
    dev source lines; ``work_dir``: where each decode's files go.
    """

    outputs_forests = True
    decodes_with_forests = True  # k-best lists and forests from one run: the tuning loop's step search

    name = "Moses"

    def __init__(self, command: Sequence[str], config: str | os.PathLike, sentences: Sequence[str],
                 work_dir: str | os.PathLike, kbest: int = 100):
        self.config = os.path.abspath(os.fspath(config))
        self.start = flatten_weights(read_moses_ini_weights(self.config))
        space = FeatureSpace(list(self.start))
        super().__init__(command, space, sentences, os.fspath(work_dir), kbest)
        self.default_weights = space.weights(self.start, grow=False)
        self.vocab = Vocabulary()  # shared by every decode's hypergraphs
        self.untuneable, self.components = untuneable_features(self.command, self.config, self.start)

    frees_fixed = False
    default_forest_prune = 50
    """As Moses' own hypergraph tuning (``kbmira --hg-prune``): 50 edges per reference word. On Multi30k
    de-en (300 dev sentences) hypergraph MERT reaches the same dev BLEU in each of 3 iterations as on the
    whole forests (3.8M edges cut to 0.19M), at 52 s per iteration against 166 s (benchmarks: moses-tuning-speed)."""

    def fixed_by_config(self, name: str) -> bool:
        """Whether ``moses -show-weights`` calls the feature (or its producer) untuneable."""
        return name in self.untuneable

    def _weight_arguments(self, folder: str, weights: np.ndarray) -> list[str]:
        """``-weight-overwrite`` with every dense weight, ``-weight-file`` with the non-zero sparse ones."""
        named = self.space.weights_dict(weights, skip_zero_sparse=True)
        dense = {name: named[name] for name in self.space.dense_names}
        text = " ".join(f"{producer}= " + " ".join(format_weight(v) for v in values)
                        for producer, values in group_weights(dense).items())
        argv = ["-weight-overwrite", text]
        sparse = {name: value for name, value in named.items() if name not in dense}
        if sparse:
            path = os.path.join(folder, "sparse-weights")
            write_weights(path, sparse)
            argv += ["-weight-file", path]
        return argv

    def _command(self, folder, weights, input_path, hypergraph_dir, kbest=True):
        argv = self.command + ["-config", self.config] + self._weight_arguments(folder, weights)
        if kbest:
            argv += ["-n-best-list", os.path.join(folder, "nbest"), str(self.kbest), "distinct"]
        if hypergraph_dir is not None:
            argv += ["-output-search-graph-hypergraph", "true", "gz", hypergraph_dir]
        return argv + ["-input-file", input_path]

    def _read_kbest(self, folder, n_sentences):
        path = os.path.join(folder, "nbest")
        if not os.path.exists(path):
            raise InputError("Moses wrote no n-best list", path, expected="an -n-best-list file")
        return read_nbest(path, space=self.space, n_sentences=n_sentences, components=self.components)

    def _read_hypergraphs(self, hypergraph_dir, n_sentences):
        return read_moses_hypergraphs(hypergraph_dir, self.space, self.vocab)

    def write_config(self, weights: np.ndarray, path: str | os.PathLike) -> None:
        """The tuned moses.ini at ``path`` (atomically): the tuned ``[weight]`` numbers, every other byte
        of the original kept; non-zero sparse weights in ``moses.sparse-weights`` next to it, named by an
        appended ``[weight-file]`` section."""
        path = os.fspath(path)
        named = self.space.weights_dict(weights, skip_zero_sparse=True)
        write_moses_ini(self.config, path, {name: named[name] for name in self.space.dense_names})
        sparse = {name: value for name, value in named.items() if name not in self.start}
        if not sparse:
            return
        sparse_path = os.path.join(os.path.dirname(os.path.abspath(path)), SPARSE_WEIGHTS)
        write_weights(sparse_path, sparse)
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if text and not text.endswith("\n"):
            text += "\n"
        with atomic_write(path) as out:
            out.write(f"{text}\n[weight-file]\n{sparse_path}\n")
