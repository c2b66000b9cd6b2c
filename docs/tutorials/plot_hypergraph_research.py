"""
Hypergraph research in Python
=============================

Every decode gives its search graph as a :class:`~minismt.hypergraph.Hypergraph`: arrays in topological
order with the goal last, one edge per hypothesis expansion, each edge carrying its features.  This tutorial
trains a small phrase-based model on the synthetic corpus (no download), decodes one sentence, and runs the
forest core's algorithms on its search graph: Viterbi, inside-outside in the log semiring, edge posteriors,
max-marginals, k-best, the expectation semiring, the MERT envelope along a direction (Macherey et al. 2008;
Kumar et al. 2009), and a drawing of the forest.
"""

# %%
# A model in a minute
# -------------------
# ``write_synthetic`` writes a synthetic language pair with its dev and test sets; ``Trainer`` is what
# ``minismt train`` runs (alignment, phrase and reordering tables, a Kneser-Ney LM).
import tempfile
from pathlib import Path

import numpy as np

from corpora.synthetic import write_synthetic
from minismt.train import Trainer, TrainingConfig

work = Path(tempfile.mkdtemp())
write_synthetic(work / "data", n_pairs=2000, seed=7)
Trainer(TrainingConfig(src=str(work / "data" / "train.src"), tgt=str(work / "data" / "train.tgt"),
                       out=str(work / "model"), lm_order=3, progress=False)).run()

# %%
# Decode a sentence and take its forest
# -------------------------------------
# The decoder returns the 1-best with its score and features, and the search graph.  Its Viterbi derivation
# under the decoder's weights is the 1-best.
from minismt.decode import Decoder

decoder = Decoder(str(work / "model"), stack_size=100)
tests = (work / "data" / "test.src").read_text(encoding="utf-8").splitlines()
source = min((s for s in tests if len(s.split()) >= 8), key=lambda s: len(s.split()))   # a short one
result = decoder.decode(source)
forest, w = result.hypergraph, decoder.full_weights()
best = forest.viterbi(w)
print(f"source: {source}\n1-best: {result.best}  (score {result.score:.4f})")
print(f"forest: {forest.n_nodes} nodes, {forest.n_edges} edges; Viterbi: {best.text} ({best.score:.4f})")
assert best.text == result.best and abs(best.score - result.score) < 1e-6

# %%
# Inside-outside, posteriors, max-marginals
# -----------------------------------------
# In the log semiring, the inside score of the goal is the log partition function of the model's
# distribution over derivations, ``p(d) = exp(w . h(d)) / Z``.  Edge posteriors are the probability that a
# derivation uses the edge; the max-marginal of an edge is the score of the best derivation through it
# (what Moses' and cdec's forest pruning use).
log_z = forest.log_partition(w)
posteriors = forest.edge_posteriors(w)
marginals = forest.max_marginals(w)
print(f"log Z = {log_z:.4f}; the Viterbi derivation has probability {np.exp(best.score - log_z):.3f}")
print(f"edges with posterior > 0.5: {(posteriors > 0.5).sum()} of {forest.n_edges}; "
      f"best max-marginal {marginals.max():.4f} (= the Viterbi score)")

# %%
# The k best derivations
# ----------------------
# Lazy k-best (Huang & Chiang 2005, Algorithm 3), here with distinct yields, as the tuners' k-best lists.
kbest = forest.kbest(5, w, distinct=True)
for score, text in zip(kbest.scores, kbest.texts):
    print(f"{score:9.4f}  {text}")

# %%
# Expectations over the whole forest
# ----------------------------------
# The first-order expectation semiring (Li & Eisner 2009) gives the expected feature vector of the
# model's distribution in one inside-outside pass: the gradient of ``log Z``.  We check it against a finite
# difference of the log partition function.
from minismt.hypergraph.expectations import expected_features

expected = expected_features(forest, w)
lm = decoder.space.index("LM0_0")
step = np.zeros_like(w)
step[lm] = 1e-6
numeric = (forest.log_partition(w + step) - forest.log_partition(w - step)) / 2e-6
print(f"E[LM0_0] = {expected[lm]:.6f}; d log Z / d w_LM = {numeric:.6f}")

# %%
# The MERT envelope along a direction
# -----------------------------------
# Hypergraph MERT moves the weights along a line ``w + x d``: for every ``x`` the forest has one Viterbi
# derivation, and the upper envelope of the goal lists them all, left to right, with the points where one
# takes over from the next.  Here the direction raises the word penalty's weight.
from tuners.hgmert import forest_envelope

direction = np.zeros_like(w)
direction[decoder.space.index("WordPenalty0_0")] = 1.0
envelope = forest_envelope(forest, w, direction)
for start, text in zip(envelope.x, envelope.texts):
    print(f"from x = {start:8.3f}: {text}")

# %%
# Draw the forest
# ---------------
# A search graph has thousands of edges; :meth:`~minismt.hypergraph.Hypergraph.prune_to`
# keeps the edges with the best max-marginals (whole derivations), and
# :func:`~minismt.hypergraph.draw.draw_layered` draws the rest bottom-up on matplotlib axes, a box per
# decoder state (its coverage of the source words: ■ translated, □ not yet), an edge labelled with the words
# it adds (its target side without the ``[1]`` that stands for the state it extends), the Viterbi
# derivation in red.  ``to_networkx`` and ``to_dot`` export a forest for other tools.
import re

import matplotlib.pyplot as plt

from minismt.hypergraph import to_networkx
from minismt.hypergraph.draw import draw_layered
from minismt.pipeline.report import FILLED, coverage_labels

small = forest.replace(node_cat=coverage_labels(result)).prune_to(40, w)
path = small.viterbi(w)
labels = list(small.node_cat)
labels[small.goal] = "goal"
layers = [label.count(FILLED) for label in labels]
layers[small.goal] = max(layers) + 1
figure, ax = plt.subplots(figsize=(10, 7))
draw_layered(small, ax, labels, layers=layers, highlight=path.edges,
             edge_labels=[re.sub(r"\[\d+\]", "", small.edge_target(e)).strip() for e in range(small.n_edges)])
ax.set_title(f"The {small.n_edges} edges of best max-marginal of {forest.n_edges}; red: {path.text}", fontsize=9)
graph = to_networkx(forest, w)
print(f"networkx: {graph.number_of_nodes()} nodes and {graph.number_of_edges()} arcs")
