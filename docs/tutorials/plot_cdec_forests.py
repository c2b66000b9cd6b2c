"""
Tune a cdec system on its forests
=================================

cdec writes the whole translation forest of every sentence (``-O DIR``: Boost binary archives,
``N.bin.gz``); minismt reads them into its :class:`~minismt.hypergraph.Hypergraph` arrays, so every forest
tuner runs on a real cdec system.  Here hypergraph MERT (Kumar et al. 2009) tunes a Hiero system with the
real cdec (``../shared/tools/cdec`` next to the repository; this page is left out of the build without
it), and one of cdec's forests is read and searched in Python.

The system: ``minismt train --hiero`` on the synthetic corpus writes, for each input it has a grammar for,
the cdec files (``cdec.ini``, the grammar with Moses' table limit, the glue grammar, the weights).
"""

# %%
# A cdec system
# -------------
import tempfile
from pathlib import Path

import minismt
from corpora.synthetic import write_synthetic
from minismt.cli import main
from minismt.manifest import load_manifest

CDEC = Path(minismt.__file__).resolve().parents[2] / "shared" / "tools" / "cdec" / "cdec"
work = Path(tempfile.mkdtemp())
data, model = work / "data", work / "model"
write_synthetic(data, n_pairs=1500, seed=3, dev=40, test=40)
assert main(["train", "--src", str(data / "train.src"), "--tgt", str(data / "train.tgt"), "--out", str(model),
             "--lm-order", "3", "--hiero", "--grammar-for", str(data / "dev.src"), "--quiet"]) == 0
files = load_manifest(model)["grammars"]["dev"]
print((model / files["cdec_ini"]).read_text(encoding="utf-8"))

# %%
# Hypergraph MERT on cdec's forests
# ---------------------------------
# The dev input is the one training wrote for cdec (the sentences in ``<s> ... </s>``, which the glue grammar
# needs; the driver leaves the markers out of every translation).  Each iteration runs
# ``cdec -c cdec.ini -w weights -i input -O forests`` and line-searches over every
# derivation of every forest (the envelope semiring); ``--keep-forests`` keeps them in
# ``tuned/decoder/decode.N/hypergraphs``.  ``tuned/weights.cdec`` is cdec's weights file.
assert main(["tune", "--decoder", "cdec", "--decoder-cmd", str(CDEC), "--config", str(model / files["cdec_ini"]),
             "--init", str(model / files["cdec_weights"]), "--dev-src", str(model / files["cdec_input"]),
             "--dev-ref", str(data / "dev.tgt"), "--tuner", "hg-mert", "--iterations", "3", "--seed", "1",
             "--run-dir", str(work / "tuned"), "--keep-forests", "--quiet"]) == 0
print((work / "tuned" / "weights.cdec").read_text(encoding="utf-8"))

# %%
# One of cdec's forests in Python
# -------------------------------
# ``read_cdec_binary`` reads cdec's archive into a :class:`~minismt.hypergraph.Hypergraph` (rules with two
# nonterminals are edges with two tails); every algorithm of the forest core runs on it, here the k-best
# derivations under the weights cdec decoded with (the forest as cdec wrote it, with its ``<s>`` and
# ``</s>``, which the tuning driver leaves out).
from minismt.features import read_weights
from minismt.hypergraph import read_cdec_binary

decode = sorted((work / "tuned" / "decoder").glob("decode.*"))[-1]
forest = read_cdec_binary(decode / "hypergraphs" / "0.bin.gz")
w = forest.space.weights(read_weights(decode / "weights"))
two_tails = int((forest.tail_offsets[1:] - forest.tail_offsets[:-1] == 2).sum())
print(f"{decode.name}, sentence 0: {forest.n_nodes} nodes, {forest.n_edges} edges ({two_tails} with two tails)")
kbest = forest.kbest(3, w, distinct=True)
for score, text in zip(kbest.scores, kbest.texts):
    print(f"{score:9.4f}  {text}")
