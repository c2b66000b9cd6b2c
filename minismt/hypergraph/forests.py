"""The tuning data of hypergraph tuners: the forests of a dev set and its references.

Hypergraph MERT, the BO tuners and :class:`~minismt.hypergraph.batch.ForestBatch` take a
:class:`ForestData`; the tuning loop builds one from each iteration's decoded forests.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.hypergraph.graph import Hypergraph
from minismt.metrics import corpus_bleu_from_stats


class ForestData:
    """The tuning data of hypergraph tuners (``fits_on="forests"`` in their tags): forests of the dev sentences.

    ``forests``: :class:`~minismt.hypergraph.Hypergraph` objects sharing one
    feature space and vocabulary; ``sentence_ids`` int64[F]: the dev sentence
    of each forest (a sentence may have several, e.g. the previous and the
    current iteration's for CHG-BO; its translation under ``w`` is then the best
    Viterbi derivation over them, ties to the first forest); ``references``:
    :class:`~minismt.metrics.BleuReferences` of the dev set. Every dev sentence
    needs at least one forest.

    :meth:`translations`, :meth:`stats` and :meth:`bleu` are the plain
    reference implementation (one Viterbi per forest); fast tuners evaluate
    many weight vectors with their own kernels and are tested against these.
    """

    def __init__(self, forests: Sequence, sentence_ids, references):
        self.forests = list(forests)
        self.sentence_ids = np.asarray(sentence_ids, dtype=np.int64)
        self.references = references
        if not self.forests:
            raise InputError("no forests", expected="at least one hypergraph")
        if any(not isinstance(f, Hypergraph) for f in self.forests):
            raise InputError("tuning data holds something that is not a Hypergraph", expected="Hypergraph objects")
        if self.sentence_ids.shape != (len(self.forests),):
            raise InputError(f"{self.sentence_ids.shape[0]} sentence ids for {len(self.forests)} forests",
                             expected="one dev sentence id per forest")
        space, vocab = self.forests[0].space, self.forests[0].vocab
        if any(f.space is not space or f.vocab is not vocab for f in self.forests):
            raise InputError("the forests do not share one feature space and vocabulary",
                             expected="forests read or decoded with one FeatureSpace and Vocabulary")
        n = references.n_sentences
        if self.sentence_ids.min() < 0 or self.sentence_ids.max() >= n:
            raise InputError(f"sentence id {int(self.sentence_ids.max())} for {n} dev sentences")
        missing = np.setdiff1d(np.arange(n), self.sentence_ids)
        if missing.size:
            raise InputError(f"{missing.size} dev sentence(s) have no forest, the first is {int(missing[0])}",
                             expected="at least one forest per dev sentence")
        empty = [i for i, f in enumerate(self.forests) if f.n_edges == 0]
        if empty:
            raise InputError(f"{len(empty)} forest(s) have no edge, the first is forest {empty[0]} "
                             f"(dev sentence {int(self.sentence_ids[empty[0]])})",
                             expected="a derivation for every forest")

    @property
    def space(self) -> FeatureSpace:
        return self.forests[0].space

    @property
    def n_sentences(self) -> int:
        return self.references.n_sentences

    def translations(self, w) -> list[str]:
        """The best Viterbi string of every dev sentence under ``w`` (slow reference: Python over forests)."""
        best: list[tuple[float, str] | None] = [None] * self.n_sentences
        for forest, s in zip(self.forests, self.sentence_ids.tolist()):
            derivation = forest.viterbi(w)
            if best[s] is None or derivation.score > best[s][0]:
                best[s] = (derivation.score, derivation.text)
        return [text for _, text in best]

    def stats(self, w) -> np.ndarray:
        """int32[S, 9] BLEU statistics of :meth:`translations`."""
        return self.references.stats(np.arange(self.n_sentences), self.translations(w))

    def bleu(self, w, smooth: str = "exp") -> float:
        """Corpus BLEU (0..1) of :meth:`translations`."""
        return corpus_bleu_from_stats(self.stats(w).sum(axis=0), smooth=smooth)

    def weight_array(self, w) -> np.ndarray:
        """``w`` (array or ``{name: weight}``) as float64 over the space, checked finite."""
        return self.space.start_weights(w)
