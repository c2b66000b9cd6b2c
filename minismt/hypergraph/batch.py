"""Fast corpus BLEU of a dev set of forests under many weight vectors: :class:`ForestBatch`.

Hypergraph tuners (HG-BO and friends, :mod:`tuners.bayesopt`) evaluate the
BLEU of the Viterbi translations of fixed forests at thousands of weight
vectors. :meth:`ForestData.bleu <minismt.hypergraph.ForestData.bleu>` does this with
one Python-level Viterbi, string join and re-tokenisation per forest;
:class:`ForestBatch` concatenates every forest's arrays once and maps each
forest's target words to the reference-local token ids of its dev sentence
once, so that one evaluation (reweighting, Viterbi, choice of the best forest
of each sentence, yields, BLEU statistics) is a single numba call
(:mod:`minismt.hypergraph._batch_kernels`) with no Python loop over forests or
edges. The results are identical to :class:`~minismt.hypergraph.ForestData`'s:
same floating-point operations (so the same ties: the first maximising edge,
the first best forest of a sentence), same statistics kernel.
"""

from __future__ import annotations

from typing import Mapping

import numba
import numpy as np

from minismt.errors import InputError
from minismt.hypergraph import _batch_kernels as K
from minismt.hypergraph.forests import ForestData
from minismt.hypergraph.graph import concatenated
from minismt.metrics import N_STATS, corpus_bleu_from_stats, tokenize
from minismt.metrics import _kernels as bleu_kernels

_SMOOTH = {"exp": bleu_kernels.SMOOTH_EXP, "none": bleu_kernels.SMOOTH_NONE}


class ForestBatch:
    """All forests of a :class:`~minismt.hypergraph.ForestData` as one set of arrays, for fast BLEU.

    Built once (``O(size of the forests)``, plus a Python pass over the
    distinct (sentence, word) pairs); then :meth:`stats`, :meth:`bleu`,
    :meth:`bleu_many` and :meth:`translations` equal ForestData's
    ``stats``/``bleu``/``translations``.

    Arrays (global node and edge ids over the concatenated forests):
    ``node_off`` / ``edge_off`` int64[F+1] (forest f's nodes and edges),
    ``in_offsets``, ``tail_offsets``, ``tails``, ``feat_offsets``, ``feat_ids``,
    ``feat_values``, ``tmpl_offsets`` as in :class:`~minismt.hypergraph.Hypergraph`
    with global ids; ``tmpl`` has entry ids for words (entry k = one
    vocabulary word of one dev sentence, expanding to the reference-local
    tokens ``ent_tokens[ent_offsets[k]:ent_offsets[k+1]]``) and ``tmpl_words``
    the vocabulary ids; ``sent_offsets`` / ``sent_forests``: the forests of
    each dev sentence in ForestData order.
    """

    def __init__(self, data):
        if not isinstance(data, ForestData):
            raise InputError(f"forest data of type {type(data).__name__}", expected="a minismt.hypergraph.ForestData")
        forests = data.forests
        self.space = data.space
        self.vocab = forests[0].vocab
        self.references = data.references
        self.n_sentences = data.n_sentences
        self.n_forests = len(forests)
        self.sentence_ids = data.sentence_ids.copy()
        n_nodes = np.array([f.n_nodes for f in forests], dtype=np.int64)
        n_edges = np.array([f.n_edges for f in forests], dtype=np.int64)
        self.node_off = np.concatenate([[0], np.cumsum(n_nodes)]).astype(np.int64)
        self.edge_off = np.concatenate([[0], np.cumsum(n_edges)]).astype(np.int64)
        if self.node_off[-1] >= np.iinfo(np.int32).max:
            raise InputError(f"{int(self.node_off[-1])} nodes in all forests", expected="fewer than 2**31 - 1")
        self.max_nodes = int(n_nodes.max())
        self.feat_dim = max(f.feat_dim for f in forests)

        node_off, edge_off = self.node_off, self.edge_off
        self.in_offsets, _ = concatenated(forests, "in_offsets", "in_offsets")
        self.tail_offsets, tails = concatenated(forests, "tail_offsets", "tails",
                                                lambda a, i: a.astype(np.int64) + node_off[i])
        self.tails = tails.astype(np.int32)
        self.feat_offsets, feat_ids = concatenated(forests, "feat_offsets", "feat_ids")
        self.feat_ids = feat_ids.astype(np.int32)
        _, feat_values = concatenated(forests, "feat_offsets", "feat_values")
        self.feat_values = feat_values.astype(np.float64)
        self.tmpl_offsets, tmpl = concatenated(forests, "tmpl_offsets", "tmpl")
        self.tmpl_words = np.ascontiguousarray(tmpl, dtype=np.int32)
        assert self.in_offsets[-1] == edge_off[-1]

        # entries: the distinct (dev sentence, word) pairs, and their reference-local tokens
        edge_sentence = np.repeat(self.sentence_ids, n_edges)
        item_sentence = np.repeat(edge_sentence, np.diff(self.tmpl_offsets))
        is_word = self.tmpl_words >= 0
        n_words = max(len(self.vocab), 1)
        keys = item_sentence[is_word] * n_words + self.tmpl_words[is_word]
        unique = np.unique(keys)
        tmpl = self.tmpl_words.copy()
        tmpl[is_word] = np.searchsorted(unique, keys).astype(np.int32)
        self.tmpl = tmpl
        lowercase = self.references.lowercase
        local_vocab = self.references._vocab
        words = self.vocab.words
        split_cache: dict[int, list[str]] = {}
        ent_counts = np.empty(unique.shape[0], np.int64)
        ent_tokens: list[int] = []
        for k, (s, word) in enumerate(zip((unique // n_words).tolist(), (unique % n_words).tolist())):
            parts = split_cache.get(word)
            if parts is None:
                parts = split_cache[word] = tokenize(words[word], lowercase)
            get = local_vocab[s].get
            ent_tokens.extend(get(t, -1) for t in parts)
            ent_counts[k] = len(parts)
        self.ent_offsets = np.concatenate([[0], np.cumsum(ent_counts)]).astype(np.int64)
        self.ent_tokens = np.asarray(ent_tokens, dtype=np.int32)

        order = np.argsort(self.sentence_ids, kind="stable")
        self.sent_forests = order.astype(np.int64)
        self.sent_offsets = np.concatenate(
            [[0], np.cumsum(np.bincount(self.sentence_ids, minlength=self.n_sentences))]).astype(np.int64)
        refs = self.references
        self._ref_arrays = (refs._keys, refs._counts, refs._key_offsets, refs._lens, refs._len_offsets)

    # ---- sizes ---------------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return int(self.node_off[-1])

    @property
    def n_edges(self) -> int:
        return int(self.edge_off[-1])

    def __repr__(self) -> str:
        return (f"ForestBatch({self.n_forests} forests of {self.n_sentences} sentences, {self.n_nodes} nodes, "
                f"{self.n_edges} edges)")

    def nbytes(self) -> int:
        """Bytes held by the arrays."""
        arrays = [a for a in self._arrays() if isinstance(a, np.ndarray)] + [self.tmpl_words, self.sentence_ids]
        return int(sum(a.nbytes for a in arrays))

    # ---- weights -------------------------------------------------------------------------
    def weight_array(self, w) -> np.ndarray:
        """``w`` as a finite float64 array covering every feature id the forests use.

        ``w`` is an array (at least as long as the largest feature id used + 1,
        as :meth:`Hypergraph.weight_array`) or a ``{name: weight}`` mapping
        (names the space lacks are ignored).
        """
        if isinstance(w, Mapping):
            out = np.zeros(max(len(self.space), self.feat_dim, 1))
            for name, value in w.items():
                index = self.space.get(name)
                if index is not None:
                    out[index] = float(value)
        else:
            try:
                out = np.asarray(w, dtype=np.float64)
            except (TypeError, ValueError) as err:
                raise InputError(f"weights are not an array of numbers ({err})") from None
            if out.ndim != 1 or out.shape[0] < self.feat_dim:
                raise InputError(f"weights of shape {out.shape}",
                                 expected=f"at least {self.feat_dim} weights (one per feature of the space)")
            out = np.ascontiguousarray(out)
        if not np.all(np.isfinite(out)):
            raise InputError("a weight is not finite", expected="finite weights")
        if out.shape[0] == 0:
            out = np.zeros(1)
        return out

    def weight_matrix(self, W) -> np.ndarray:
        """``W`` (``[K, D]``, each row as :meth:`weight_array`) as a finite C-contiguous float64 array."""
        try:
            W = np.asarray(W, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise InputError(f"weights are not an array of numbers ({err})") from None
        if W.ndim != 2 or W.shape[1] < self.feat_dim:
            raise InputError(f"weight matrix of shape {W.shape}", expected=f"(K, >= {self.feat_dim})")
        if not np.all(np.isfinite(W)):
            raise InputError("a weight is not finite", expected="finite weights")
        if W.shape[1] == 0:
            W = np.zeros((W.shape[0], 1))
        return np.ascontiguousarray(W)

    # ---- evaluation ----------------------------------------------------------------------
    def _arrays(self):
        return (self.in_offsets, self.tail_offsets, self.tails, self.feat_offsets, self.feat_ids, self.feat_values,
                self.tmpl_offsets, self.tmpl, self.node_off, self.sent_offsets, self.sent_forests, self.ent_offsets,
                self.ent_tokens, self.max_nodes) + self._ref_arrays

    def stats(self, w) -> np.ndarray:
        """int32[S, 9] BLEU statistics of every dev sentence's Viterbi translation under ``w``."""
        out = np.zeros((self.n_sentences, N_STATS), dtype=np.int32)
        if not K.forest_stats(self.weight_array(w), *self._arrays(), out, K.new_scratch(self.n_nodes, self.n_edges)):
            raise InputError("the weights give an edge an infinite score", expected="finite edge scores")
        return out

    def bleu(self, w, smooth: str = "exp") -> float:
        """Corpus BLEU (0..1) of the Viterbi translations under ``w``."""
        if smooth not in _SMOOTH:
            raise InputError(f"smoothing {smooth!r}", expected="'exp' or 'none'")
        return corpus_bleu_from_stats(self.stats(w).sum(axis=0, dtype=np.int64), smooth=smooth)

    def bleu_many(self, W, smooth: str = "exp") -> np.ndarray:
        """float64[K]: corpus BLEU under each row of ``W`` (``[K, D]``), rows evaluated in parallel threads."""
        if smooth not in _SMOOTH:
            raise InputError(f"smoothing {smooth!r}", expected="'exp' or 'none'")
        W = self.weight_matrix(W)
        out = np.empty(W.shape[0])
        finite = np.ones(W.shape[0], dtype=np.bool_)
        if W.shape[0]:
            K.forest_bleu_many(W, *self._arrays(), _SMOOTH[smooth], numba.get_num_threads(), out, finite)
        if not np.all(finite):
            raise InputError(f"weight vector {int(np.flatnonzero(~finite)[0])} gives an edge an infinite score",
                             expected="finite edge scores")
        return out

    def translations(self, w) -> list[str]:
        """The Viterbi string of every dev sentence under ``w`` (best forest of each sentence)."""
        w = self.weight_array(w)
        score, value, best_edge = K.new_scratch(self.n_nodes, self.n_edges)
        if not K.viterbi_all(w, self.in_offsets, self.tail_offsets, self.tails, self.feat_offsets, self.feat_ids,
                             self.feat_values, score, value, best_edge):
            raise InputError("the weights give an edge an infinite score", expected="finite edge scores")
        chosen = np.empty(self.n_sentences, dtype=np.int64)
        K.choose_forests(value, self.node_off, self.sent_offsets, self.sent_forests, chosen)
        offsets, words = K.yields(chosen, self.node_off, best_edge, self.tail_offsets, self.tails, self.tmpl_offsets,
                                  self.tmpl_words, np.zeros(0, np.int64), np.zeros(0, np.int32), self.max_nodes)
        vocab = self.vocab.words
        return [" ".join(vocab[i] for i in words[offsets[s]:offsets[s + 1]].tolist())
                for s in range(self.n_sentences)]
