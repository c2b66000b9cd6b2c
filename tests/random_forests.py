"""Random forests and their brute-force enumeration, for the tests of the forest core.

One generator (:func:`random_forest`) makes the forests every forest test uses:
acyclic, the goal last, 0-3 in-edges per node (so start nodes appear anywhere),
edges with 0 to ``max_tails`` tails drawn from *any* earlier node (sub-forests
are shared, a tail may repeat within an edge, two-tail edges are common),
templates that put 0-2 words anywhere among the tails in any order, and a
bounded number of derivations so that :func:`derivation_table` can list them
all. It draws from hypothesis (:func:`forests`) or from a seeded numpy
generator (:class:`RngDraws`).
"""

from __future__ import annotations

import itertools
import math

from hypothesis import strategies as st

from minismt.hypergraph import Hypergraph, HypergraphBuilder

WORDS = ["a", "b", "c", "d"]


class RngDraws:
    """Random choices from a seeded ``numpy.random.Generator``."""

    def __init__(self, rng):
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]``."""
        return int(self.rng.integers(lo, hi + 1))

    def integers(self, lo: int, hi: int, size: int) -> list[int]:
        """``size`` integers in ``[lo, hi]``."""
        return [int(x) for x in self.rng.integers(lo, hi + 1, size)]

    def words(self, words, size: int) -> list[str]:
        return [str(x) for x in self.rng.choice(words, size)]

    def permutation(self, n: int) -> list[int]:
        return [int(i) for i in self.rng.permutation(n)]

    def chance(self, p: float) -> bool:
        """True with probability ``p``."""
        return bool(self.rng.random() < p)


class HypothesisDraws(RngDraws):
    """The same choices drawn by hypothesis (which shrinks them); ``chance`` ignores ``p``."""

    def __init__(self, draw):
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def integers(self, lo: int, hi: int, size: int) -> list[int]:
        return [self.integer(lo, hi) for _ in range(size)]

    def words(self, words, size: int) -> list[str]:
        return [self.draw(st.sampled_from(words)) for _ in range(size)]

    def permutation(self, n: int) -> list[int]:
        return list(self.draw(st.permutations(range(n))))

    def chance(self, p: float) -> bool:
        return self.draw(st.booleans())


def random_forest(draws, space, vocab=None, n_nodes: int = 6, *, max_tails: int = 2, values=(-2, -1, 0, 1, 2),
                  labels=("X",), words=WORDS, feature_chance: float = 0.7,
                  max_derivations: int = 200) -> Hypergraph:
    """A random forest over ``space`` (module docstring); feature values are drawn from ``values``, each
    feature on an edge with probability ``feature_chance``; an edge whose tails would take the node past
    ``max_derivations`` derivations gets no tails."""
    builder = HypergraphBuilder(space, vocab)
    counts: list[int] = []
    for v in range(n_nodes):
        builder.add_node(labels[draws.integer(0, len(labels) - 1)] if len(labels) > 1 else labels[0])
        n_in = draws.integer(1 if v == n_nodes - 1 else 0, 3)
        total = 0
        for _ in range(n_in):
            tails = draws.integers(0, v - 1, draws.integer(0, max_tails)) if v > 0 else []
            if math.prod(counts[t] for t in tails) + total > max_derivations:
                tails = []
            total += math.prod(counts[t] for t in tails)
            target: list = draws.permutation(len(tails))
            for word in draws.words(words, draws.integer(0, 2)):
                target.insert(draws.integer(0, len(target)), word)
            feats = {name: values[draws.integer(0, len(values) - 1)] for name in space.names
                     if draws.chance(feature_chance)}
            builder.add_edge(v, tails, feats, target)
        counts.append(total if n_in else 1)
    return builder.build()


@st.composite
def forests(draw, space, vocab=None, max_nodes: int = 7, **options):
    """Hypothesis strategy of :func:`random_forest` with 1 to ``max_nodes`` nodes."""
    draws = HypothesisDraws(draw)
    return random_forest(draws, space, vocab, draws.integer(1, max_nodes), **options)


def derivation_table(hg: Hypergraph, *edge_values) -> list[list[tuple]]:
    """Every derivation of every node by plain recursion over the forest, in edge and tail order:
    ``(sums..., pre-order edges, yield words)``, one sum per array of ``edge_values`` (an edge's value
    plus its tails' sums, left to right). A start node has the one empty derivation."""
    table: list[list[tuple]] = []
    k = len(edge_values)
    for v in range(hg.n_nodes):
        lo, hi = int(hg.in_offsets[v]), int(hg.in_offsets[v + 1])
        if lo == hi:
            table.append([(0,) * k + ((), ())])
            continue
        here = []
        for e in range(lo, hi):
            for combo in itertools.product(*[table[int(t)] for t in hg.edge_tails(e)]):
                sums = []
                for j, values in enumerate(edge_values):
                    x = values[e]
                    for child in combo:
                        x += child[j]
                    sums.append(x)
                edges = (e,) + sum((child[k] for child in combo), ())
                words: list[str] = []
                for item in hg.tmpl[hg.tmpl_offsets[e]:hg.tmpl_offsets[e + 1]]:
                    words.extend([hg.vocab[int(item)]] if item >= 0 else combo[-int(item) - 1][k + 1])
                here.append(tuple(sums) + (edges, tuple(words)))
        table.append(here)
    return table
