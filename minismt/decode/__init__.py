"""Phrase-based decoding: a numba stack decoder (Koehn 2004; Moses' normal search) that
returns, per sentence, its search graph as a :class:`~minismt.hypergraph.Hypergraph`.

- :class:`PhraseModel` (:mod:`.model`): phrase table, language model and the 15 dense
  feature weights of a model directory written by ``minismt train``;
- :class:`Decoder` (:mod:`.search`): ``decode(source)`` and forced decoding
  ``force(source, reference)``, each a :class:`DecodeResult`;
- translation options (:mod:`.options`) and the numba search (:mod:`._kernels`);
- optional sparse features for large-scale tuning (:mod:`.sparse`: ``Decoder(model,
  sparse_features=("rule-id", "word-pair"))``; then ``result.sparse`` and the hypergraph
  edges carry them, and ``decoder.full_weights()`` weighs them).

Example::

    decoder = Decoder("model/", stack_size=100)
    result = decoder.decode("ein mann mit einem hut .")
    result.best, result.score, result.feature_dict
    result.hypergraph.kbest(100, decoder.weights, distinct=True)
"""

from minismt.decode.model import DEFAULT_WEIGHTS, FEATURE_NAMES, PhraseModel
from minismt.decode.search import MAX_SENTENCE_LENGTH, DecodeResult, Decoder
from minismt.decode.sparse import SPARSE_FEATURES, parse_sparse_features

__all__ = ["DEFAULT_WEIGHTS", "DecodeResult", "Decoder", "FEATURE_NAMES", "MAX_SENTENCE_LENGTH", "PhraseModel",
           "SPARSE_FEATURES", "parse_sparse_features"]
