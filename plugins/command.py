"""A dev decoder for any decoder program that writes its k-best list in Moses' or cdec's format."""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from minismt.errors import InputError
from minismt.features import FeatureSpace, write_weights
from minismt.kbest import KBest
from plugins.cdec.kbest_file import read_kbest
from plugins.moses.nbest import read_nbest
from tuners.devdecoder import ProgramDevDecoder


class CommandDevDecoder(ProgramDevDecoder):
    """Any decoder program that reads a minismt weights file and writes a k-best list (Moses or cdec format).

    ``command`` is an argument list (run without a shell) on the dev set's own
    input; the items ``{weights}``, ``{kbest}``, ``{input}`` and ``{iteration}``
    are replaced by the weights file written for this decode, the k-best file
    the program must write, the file of the sentences to translate and the
    iteration number.
    """

    def __init__(self, command: Sequence[str], space: FeatureSpace, n_sentences: int, work_dir: str,
                 kbest_format: str = "moses", sentences: Sequence[str] | None = None):
        if kbest_format not in ("moses", "cdec"):
            raise InputError(f"k-best format {kbest_format!r}", expected="'moses' or 'cdec'")
        if sentences is None:
            sentences = [str(i) for i in range(n_sentences)]
        super().__init__(command, space, sentences, work_dir)
        self.kbest_format = kbest_format
        self._iteration = 0

    def decode(self, weights: np.ndarray, iteration: int) -> tuple[KBest, list[str]]:
        self._iteration = iteration
        return super().decode(weights, iteration)

    def _command(self, folder, weights, input_path, hypergraph_dir, kbest=True):
        weights_path = os.path.join(folder, "weights")
        write_weights(weights_path, self.space.weights_dict(weights, skip_zero_sparse=True))
        values = {"{weights}": weights_path, "{kbest}": os.path.join(folder, "kbest"), "{input}": input_path,
                  "{iteration}": str(self._iteration)}
        argv = []
        for item in self.command:
            for key, value in values.items():
                item = item.replace(key, value)
            argv.append(item)
        return argv

    def _read_kbest(self, folder, n_sentences):
        path = os.path.join(folder, "kbest")
        read = read_nbest if self.kbest_format == "moses" else read_kbest
        return read(path, space=self.space, n_sentences=n_sentences)
