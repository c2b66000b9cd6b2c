"""
Train, tune and test a phrase-based and a Hiero model
=====================================================

``minismt pipeline`` runs a whole experiment from one configuration: the corpus, training, tuning with
several tuners over several seeds, decoding the test set with every result, significance against the first
tuner, and a report with its figures.  Every step is cached under the hash of its inputs, so a rerun only
does what changed.  This tutorial runs it from Python on the synthetic corpus, once with each engine, and
compares MERT with k-best MIRA (Cherry & Foster 2012).  Sizes are small so that the page builds in a minute
or two; the README's benchmarks give the numbers at scale.
"""

# %%
# The configuration
# -----------------
# The same keys as the TOML file of ``minismt pipeline`` (``minismt demo --print-config`` prints one);
# :func:`~minismt.pipeline.check_config` fills in every default and rejects a wrong key or value with an
# :class:`~minismt.errors.InputError` that names it.
import tempfile
from pathlib import Path

from minismt.pipeline import check_config, run_pipeline
from minismt.pipeline.report import format_table, summary_rows

work = Path(tempfile.mkdtemp())


def experiment(model: str) -> dict:
    return {"corpus": {"name": "synthetic", "size": 2000, "seed": 1, "dev": 80, "test": 120},
            "train": {"lm_order": 3, "model": model},
            "tune": {"tuners": ["mert", "kbmira"], "seeds": 2, "iterations": 3, "kbest": 100, "stack": 50,
                     "parallel": 1},
            "test": {"stack": 50, "jobs": 1},
            "output": {"report_dir": str(work / model / "report"), "work_dir": str(work / model / "work")}}


# %%
# Phrase-based
# ------------
# ``run_pipeline`` returns the report (also written as ``report.json`` and ``report.md``); the table is the
# one ``minismt pipeline`` prints: dev and test BLEU over the seeds, chrF2, TER, the paired-bootstrap p-value
# against the first tuner, and the tuning time.
#
# The pipeline starts processes (one compiles the kernels while another core trains), and Python starts
# them by importing the main script again: as every script that starts processes, this one does its work
# under ``if __name__ == "__main__":``.
if __name__ == "__main__":
    phrase = run_pipeline(check_config(experiment("phrase")), progress=False, echo=False)
    print(format_table(summary_rows(phrase)))

# %%
# Hiero
# -----
# ``model = "hiero"``: hierarchical rules (Chiang 2007) extracted as Moses' ``extract-rules`` does, decoded by
# the chart decoder with cube pruning; the same tuners tune it on its k-best lists.
if __name__ == "__main__":
    hiero = run_pipeline(check_config(experiment("hiero")), progress=False, echo=False)
    print(format_table(summary_rows(hiero)))

# %%
# The report's figures
# --------------------
# Each report folder holds its figures as PNG files: the decoded dev BLEU at each iteration (mean over the
# seeds), every run's test BLEU, the error surface of the final weights along one feature, and a search
# graph.  Here the dev-BLEU curves of both engines.
import matplotlib.image as mpimg
import matplotlib.pyplot as plt

if __name__ == "__main__":
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for ax, (model, title) in zip(axes, (("phrase", "phrase-based"), ("hiero", "Hiero"))):
        ax.imshow(mpimg.imread(work / model / "report" / "dev_bleu.png"))
        ax.set_axis_off()
        ax.set_title(title, fontsize=11)
    figure.tight_layout()
