"""The n-grams a forest's derivations produce, edge by edge, and their expected counts.

In a forest split by the n-gram state (each node's derivations share the first and last ``order - 1`` words
their parents can see, as the search graph of a decoder with an LM of that order does), every n-gram of a
derivation's yield is created by exactly one of its edges: the one where the n-gram's words first come
together, across the rule's words and the boundaries of its tails' yields (:mod:`._ngram_kernels`). So

    count_g(d) = sum_{e in d} count_g(e),        E[count_g] = sum_e mu_e count_g(e),

with ``mu_e`` the edge posteriors: the expected n-gram counts of the whole forest (DeNero et al. 2009's
consensus decoding and Tromble et al. 2008's lattice MBR use them; Li & Eisner 2009 sec. 6 sums them into
expected BLEU statistics). :func:`edge_ngrams` checks the split and names the first node that breaks it.
``<s>`` and ``</s>`` (the barriers) are in no n-gram, as BLEU does not count them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minismt.errors import InputError
from minismt.hypergraph import _ngram_kernels as _kernels
from minismt.hypergraph.graph import Hypergraph
from minismt.metrics import MAX_ORDER, BleuReferences
from minismt.metrics._kernels import KEY_BASE

BARRIERS = ("<s>", "</s>")


@dataclass(frozen=True)
class EdgeNgrams:
    """The n-grams each edge of a forest creates: edge ``e``'s are rows ``offsets[e]:offsets[e+1]`` of
    ``grams`` (word ids of the forest's vocabulary, ``order`` columns, padded with -1), of lengths ``orders``."""

    order: int
    offsets: np.ndarray
    grams: np.ndarray
    orders: np.ndarray

    def counts(self, hg: Hypergraph, weights_per_edge: np.ndarray) -> dict[tuple[str, ...], float]:
        """``{n-gram words: sum_e weights_per_edge[e] count(e)}`` over the n-grams of non-zero weight."""
        edge_of = np.repeat(np.arange(len(self.offsets) - 1), np.diff(self.offsets))
        weights = np.asarray(weights_per_edge, dtype=np.float64)[edge_of]
        used = np.flatnonzero(weights != 0.0)
        if not used.size:
            return {}
        rows = self.grams[used]
        base = len(hg.vocab) + 1
        if base ** self.order < 2 ** 62:  # one integer per n-gram: a 1-d unique, ten times the speed of rows'
            keys = np.zeros(rows.shape[0], dtype=np.int64)
            for column in range(self.order):
                keys = keys * base + (rows[:, column].astype(np.int64) + 1)
            _, first, where = np.unique(keys, return_index=True, return_inverse=True)
            grams = rows[first]
        else:
            grams, where = np.unique(rows, axis=0, return_inverse=True)
        totals = np.bincount(where.ravel(), weights=weights[used], minlength=grams.shape[0])
        words = hg.vocab.words
        return {tuple(words[i] for i in row if i >= 0): float(total) for row, total in zip(grams.tolist(), totals)}


MAX_SPLIT_EDGES = 20_000_000
"""The most edges :func:`split_by_ngram_state` makes before it gives up with an :class:`InputError`."""


def _check_order(order) -> int:
    if isinstance(order, bool) or not isinstance(order, int) or order < 1:
        raise InputError(f"order={order!r}", expected="an integer >= 1")
    return order - 1


def _sides(hg: Hypergraph, k: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Which side of each node's yield a parent sees, and the longest edge sequence."""
    need_left = np.zeros(hg.n_nodes, dtype=np.bool_)
    need_right = np.zeros(hg.n_nodes, dtype=np.bool_)
    if k > 0:  # unigrams see no context
        _kernels.needed_sides(hg.in_offsets, hg.tail_offsets, hg.tails, hg.tmpl_offsets, hg.tmpl, need_left,
                              need_right)
    return need_left, need_right, _max_sequence(hg, k)


def _max_sequence(hg: Hypergraph, k: int) -> int:
    """The longest edge sequence: each template item a word or a tail's two boundaries and its gap."""
    return int(np.diff(hg.tmpl_offsets).max(initial=0)) * (2 * k + 1) + 1


def _boundaries(hg: Hypergraph, k: int):
    """Each node's capped yield length and boundary words, and the first node not split by its state (-1)."""
    need_left, need_right, max_seq = _sides(hg, k)
    length = np.zeros(hg.n_nodes, dtype=np.int64)
    left = np.full((hg.n_nodes, max(k, 1)), -1, dtype=np.int64)
    right = np.full((hg.n_nodes, max(k, 1)), -1, dtype=np.int64)
    fault = _kernels.boundaries(hg.in_offsets, hg.tail_offsets, hg.tails, hg.tmpl_offsets, hg.tmpl, k, need_left,
                                need_right, length, left, right, max_seq)
    return length, left, right, max_seq, fault


def edge_ngrams(hg: Hypergraph, order: int = 4, barriers=BARRIERS) -> EdgeNgrams:
    """The n-grams (orders 1 to ``order``) every edge of ``hg`` creates; an :class:`InputError` naming the first
    node whose derivations disagree on the boundary words a parent sees (a forest not split by the
    ``order``-gram state, whose counts would not be exact: :func:`split_by_ngram_state` splits it)."""
    k = _check_order(order)
    length, left, right, max_seq, fault = _boundaries(hg, k)
    if fault >= 0:
        raise InputError(f"node {fault} of the forest is not split by its {order}-gram state: its derivations' "
                         f"yields differ in the first or last {k} words a parent edge sees",
                         expected=f"a forest whose nodes carry the {order}-gram state (split_by_ngram_state)")
    barrier = np.array([hg.vocab.get(word) for word in barriers if word in hg.vocab] or [-9], dtype=np.int64)
    counts = np.zeros(hg.n_edges, dtype=np.int64)
    _kernels.count_edge_ngrams(hg.tail_offsets, hg.tails, hg.tmpl_offsets, hg.tmpl, k, length, left, right, barrier,
                               max_seq, counts)
    offsets = np.zeros(hg.n_edges + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    grams = np.full((int(offsets[-1]), order), -1, dtype=np.int32)
    orders = np.zeros(int(offsets[-1]), dtype=np.int32)
    _kernels.edge_ngrams(hg.tail_offsets, hg.tails, hg.tmpl_offsets, hg.tmpl, k, length, left, right, barrier,
                         max_seq, offsets, grams, orders)
    return EdgeNgrams(order, offsets, grams, orders)


def _gather(offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR offsets of ``rows`` (repeats allowed) and the positions of their items in the old data."""
    sizes = np.diff(offsets)[rows]
    new = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=new[1:])
    positions = np.arange(new[-1], dtype=np.int64) - np.repeat(new[:-1] - offsets[rows], sizes)
    return new, positions


def split_by_ngram_state(hg: Hypergraph, order: int = 4, max_edges: int = MAX_SPLIT_EDGES,
                         features: bool = True) -> tuple[Hypergraph, np.ndarray]:
    """``hg`` with its nodes split by their ``order``-gram state (the yield's length up to ``order - 1`` words
    and the first and last ``order - 1`` words its parents see), so that :func:`edge_ngrams` is exact on it:
    the same derivations, with the same features and yields. A decoder whose LM state is minimised (KenLM's,
    ours) recombines hypotheses that differ in words the LM cannot use but BLEU's n-grams do; this splits them
    again. Returns the forest (``hg`` itself when it is split already) and each edge's edge in ``hg`` (-1 for
    the edges into a new goal over the old goal's states). Without ``features`` the split forest's edges carry
    none (nor scores): the structure and yields alone, for a caller that takes each edge's features from ``hg``
    through the returned origins (a split multiplies the edges, their features need not be copied)."""
    k = _check_order(order)
    *_, fault = _boundaries(hg, k)
    if fault < 0 or hg.n_nodes == 0:
        return hg, np.arange(hg.n_edges, dtype=np.int64)
    split, origin, _ = _split(hg, order, max_edges, features, hg.tmpl, np.zeros(0, dtype=np.int64), 0)
    return split, origin


BARRIER_ID = int(KEY_BASE) - 3
NO_MATCH_ID = int(KEY_BASE) - 2
"""The reference-local ids :func:`split_by_bleu_state` gives ``<s>``/``</s>`` and the words no reference holds."""


def split_by_bleu_state(hg: Hypergraph, references: BleuReferences, sentence: int, order: int = 4,
                        max_edges: int = MAX_SPLIT_EDGES, features: bool = True,
                        barriers=BARRIERS) -> tuple[Hypergraph, np.ndarray, np.ndarray]:
    """``hg`` split by its BLEU state against the references of ``sentence``, and each edge's BLEU statistics.

    The BLEU state is the ``order``-gram state of :func:`split_by_ngram_state` minimised to what a match can
    use, as KenLM minimises an LM state (:func:`._ngram_kernels._minimise`): of the first and last
    ``order - 1`` words only the longest prefix and suffix that are reference n-grams, every other word, and
    every word no reference holds, one word that matches nothing. Derivations that differ only in words no
    match can hold share their nodes, so the forest grows far less than under the full n-gram state, and each
    derivation's statistics are still the sums of its edges'. Returns the forest (``features`` as in
    :func:`split_by_ngram_state`), each edge's edge in ``hg``, and ``int16 E x 2 order`` statistics per edge,
    ``[m1, t1, ..., m_order, t_order]``: the n-grams it creates (``t``) and those some reference holds (``m``,
    unclipped: clipping is not a sum over edges)."""
    k = _check_order(order)
    if order > MAX_ORDER:
        raise InputError(f"order={order}", expected=f"at most {MAX_ORDER}, the references' n-grams")
    if len(references._vocab[sentence]) >= BARRIER_ID:
        raise InputError(f"sentence {sentence}'s references have {len(references._vocab[sentence])} words",
                         expected=f"fewer than {BARRIER_ID}")
    words = np.flatnonzero(np.bincount(hg.tmpl[hg.tmpl >= 0], minlength=1))
    local = np.full(len(hg.vocab) + 1, NO_MATCH_ID, dtype=np.int64)
    found = references.local_ids(sentence, [hg.vocab.words[i] for i in words.tolist()])
    local[words] = np.where(found >= 0, found, NO_MATCH_ID)
    for word in barriers:
        if word in hg.vocab:
            local[hg.vocab.get(word)] = BARRIER_ID
    state_tmpl = np.where(hg.tmpl >= 0, local[np.maximum(hg.tmpl, 0)], hg.tmpl)
    if hg.n_nodes == 0:
        return hg, np.zeros(0, dtype=np.int64), np.zeros((0, 2 * order), dtype=np.int16)
    split, origin, (length, left, right) = _split(hg, order, max_edges, features, state_tmpl,
                                                   references.ngram_codes(sentence), NO_MATCH_ID)
    counts = np.zeros((split.n_edges, 2 * order), dtype=np.int16)
    split_tmpl = np.where(split.tmpl >= 0, local[np.maximum(split.tmpl, 0)], split.tmpl)
    _kernels.edge_bleu_counts(split.tail_offsets, split.tails, split.tmpl_offsets, split_tmpl, k, length, left,
                              right, np.array([BARRIER_ID], dtype=np.int64), _max_sequence(split, k),
                              references.ngram_codes(sentence), counts)
    return split, origin, counts


def _split(hg: Hypergraph, order: int, max_edges: int, features: bool, state_tmpl: np.ndarray, known: np.ndarray,
           nomatch: int):
    """The split of :func:`split_by_ngram_state` (``known`` empty) or :func:`split_by_bleu_state`, its states
    computed on the template words ``state_tmpl``: the forest, each edge's origin and each node's state (capped
    length, left and right boundary words; a new goal's empty)."""
    k = _check_order(order)
    need_left, need_right, max_seq = _sides(hg, k)
    max_arity = int(np.diff(hg.tail_offsets).max(initial=0))
    first_new, e_head, e_old, e_tails, n_edges, length, left, right = _kernels.split_by_state(
        hg.in_offsets, hg.tail_offsets, hg.tails, hg.tmpl_offsets, state_tmpl, k, need_left, need_right, max_seq,
        max_arity, max_edges, known, nomatch)
    if n_edges < 0:
        raise InputError(f"splitting the forest by its {order}-gram state would make more than {max_edges} edges",
                         expected="a forest closer to split (its decoder's LM of this order) or a lower order")
    e_head, e_old, e_tails = e_head[:n_edges], e_old[:n_edges], e_tails[:n_edges]
    n_nodes = int(first_new[-1])
    goals = int(first_new[-1] - first_new[-2])
    tail_offsets, _ = _gather(hg.tail_offsets, e_old)
    arity = np.diff(tail_offsets)
    tails = e_tails[np.repeat(np.arange(n_edges), arity),
                    np.arange(tail_offsets[-1]) - np.repeat(tail_offsets[:-1], arity)]
    if features:
        feat_offsets, feat_positions = _gather(hg.feat_offsets, e_old)
        feat_ids, feat_values = hg.feat_ids[feat_positions], hg.feat_values[feat_positions]
    else:
        feat_offsets = np.zeros(n_edges + 1, dtype=np.int64)
        feat_ids, feat_values = np.zeros(0, dtype=np.int32), np.zeros(0)
    tmpl_offsets, tmpl_positions = _gather(hg.tmpl_offsets, e_old)
    heads, tmpl = e_head, hg.tmpl[tmpl_positions]
    if goals > 1:  # one goal over the old goal's states, last
        new_goal = n_nodes
        n_nodes += 1
        heads = np.concatenate([heads, np.full(goals, new_goal)])
        e_old = np.concatenate([e_old, np.full(goals, -1)])
        tails = np.concatenate([tails, np.arange(first_new[-2], first_new[-1])])
        tail_offsets = np.concatenate([tail_offsets, tail_offsets[-1] + np.arange(1, goals + 1)])
        feat_offsets = np.concatenate([feat_offsets, np.full(goals, feat_offsets[-1])])
        tmpl = np.concatenate([tmpl, np.full(goals, -1)])
        tmpl_offsets = np.concatenate([tmpl_offsets, tmpl_offsets[-1] + np.arange(1, goals + 1)])
    in_offsets = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(heads, minlength=n_nodes), out=in_offsets[1:])
    scores = (None if hg.scores is None or not features
              else np.where(e_old >= 0, hg.scores[np.maximum(e_old, 0)], 0.0))
    split = Hypergraph(hg.space, hg.vocab, n_nodes, in_offsets, tail_offsets, tails.astype(np.int32),
                       feat_offsets, feat_ids, feat_values, tmpl_offsets, tmpl.astype(np.int32), scores=scores)
    if goals > 1:
        length = np.concatenate([length, [0]])
        left = np.concatenate([left, np.full((1, left.shape[1]), -1)])
        right = np.concatenate([right, np.full((1, right.shape[1]), -1)])
    return split, e_old, (length, left, right)


def expected_ngram_counts(hg: Hypergraph, w=None, order: int = 4, scale: float = 1.0,
                          barriers=BARRIERS) -> dict[tuple[str, ...], float]:
    """``{n-gram: expected count}`` over the derivations of ``hg`` with ``p(d)`` proportional to
    ``exp(scale * w . f(d))``, every n-gram of orders 1 to ``order`` (on the forest split by its ``order``-gram
    state where it is not: :func:`split_by_ngram_state`)."""
    from minismt.hypergraph.expectations import edge_posteriors
    if hg.n_nodes == 0:
        return {}
    split, _ = split_by_ngram_state(hg, order)
    return edge_ngrams(split, order, barriers).counts(split, edge_posteriors(split, w, scale))
