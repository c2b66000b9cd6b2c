"""Array hypergraphs (translation forests) and their algorithms.

- :class:`Hypergraph`, :class:`HypergraphBuilder` (:mod:`.graph`): the arrays,
  in topological order with the goal last;
- Viterbi, inside/outside in the log semiring, posteriors, max-marginals and
  pruning (:mod:`.algorithms`; Goodman 1999, Li & Eisner 2009, as cdec);
- the first- and second-order expectation semirings (:mod:`.expectations`; Li & Eisner 2009): expectations of
  edge-local values, expected features and products, the gradient of an expectation, entropy;
- the n-grams each edge creates and a forest's expected n-gram counts (:mod:`.ngrams`), on the forest split
  by its n-gram state where the decoder's minimised LM state merged what BLEU's n-grams tell apart;
- lazy k-best with a distinct-yield option (:mod:`.derivations`; Huang & Chiang 2005, Alg. 3);
- :class:`ForestData` (:mod:`.forests`): the forests of a dev set, what hypergraph tuners fit on;
- cdec's forest formats: today's Boost binary archives (:mod:`.cdec_binary`, its kernel in
  :mod:`._cdec_binary_kernels`) and the JSON of cdec up to 2014 (:mod:`.cdec_json`);
- networkx and Graphviz DOT export (:mod:`.draw`).

The numba kernels, the forest core, are in :mod:`._kernels` (the traversals in the max-plus and log
semirings, lazy k-best, the derivation walks), :mod:`._expectation_kernels` (the traversals in the
expectation semiring), :mod:`._ngram_kernels` (edge n-grams, the split by n-gram state),
:mod:`._envelope_kernels` (the envelope semiring of hypergraph MERT) and :mod:`._batch_kernels` (the Viterbi
BLEU of a dev set's forests, for the BO tuners).
"""

from minismt.hypergraph.cdec_binary import loads_cdec_binary, read_cdec_binary
from minismt.hypergraph.cdec_json import (dumps_cdec_json, loads_cdec_json, read_cdec_forests, read_cdec_json,
                                          write_cdec_json)
from minismt.hypergraph.draw import to_dot, to_networkx
from minismt.hypergraph.forests import ForestData
from minismt.hypergraph.graph import Hypergraph, HypergraphBuilder
from minismt.hypergraph.derivations import Derivation, KBestList

__all__ = ["Derivation", "ForestData", "Hypergraph", "HypergraphBuilder", "KBestList", "dumps_cdec_json",
           "loads_cdec_binary", "loads_cdec_json", "read_cdec_binary", "read_cdec_forests", "read_cdec_json",
           "to_dot", "to_networkx", "write_cdec_json"]
