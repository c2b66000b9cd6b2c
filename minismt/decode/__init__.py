"""Phrase-based decoding: a numba stack decoder (Koehn 2004; Moses' normal search) that
returns, per sentence, its search graph as a :class:`~minismt.hypergraph.Hypergraph`.

- :class:`PhraseModel` (:mod:`.model`): phrase table, language model and the 15 dense
  feature weights of a model directory written by ``minismt train``;
- :class:`Decoder` (:mod:`.search`): ``decode(source)`` and forced decoding
  ``force(source, reference)``, each a :class:`DecodeResult`;
- :class:`DecoderSettings` (:mod:`.settings`): stack, beam, distortion limit, k-best size, sparse
  features and processes of a decode, with their defaults;
- translation options (:mod:`.options`) and the numba search (:mod:`._kernels`);
- optional sparse features for large-scale tuning (:mod:`.sparse`: ``Decoder(model,
  sparse_features=("rule-id", "word-pair"))``; then ``result.sparse`` and the hypergraph
  edges carry them, and ``decoder.full_weights()`` weighs them).

Example::

    decoder = Decoder("model/", stack_size=100)
    result = decoder.decode("ein mann mit einem hut .")
    result.best, result.score, result.feature_dict
    result.hypergraph.kbest(100, decoder.weights, distinct=True)

The decoder's modules are imported when one of their names is first used: ``minismt --help`` reads
:class:`DecoderSettings`' defaults without loading numba (0.95 s).
"""

import importlib

from minismt.decode.settings import SPARSE_FEATURES, DecoderSettings, parse_sparse_features

_LAZY = {"DEFAULT_WEIGHTS": "model", "FEATURE_NAMES": "model", "PhraseModel": "model",
         "MAX_SENTENCE_LENGTH": "search", "DecodeResult": "search", "Decoder": "search"}

__all__ = ["DEFAULT_WEIGHTS", "DecodeResult", "Decoder", "DecoderSettings", "FEATURE_NAMES", "MAX_SENTENCE_LENGTH",
           "PhraseModel", "SPARSE_FEATURES", "parse_sparse_features"]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
