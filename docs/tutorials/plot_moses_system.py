"""
Tune a Moses system
===================

Two ways to put minismt's tuners inside Moses, both on the real Moses (``../shared/tools/moses`` next to
the repository; this page is left out of the build without it):

1. ``minismt tune --decoder moses``: minismt's tuning loop runs Moses on the dev set each iteration, as
   ``mert-moses.pl`` runs it, and tunes with any tuner (here APRO, Hopkins & May 2011's ranking with
   Dreyer & Dong 2015's all-pairs objective), writing a tuned ``moses.ini``;
2. ``mert-moses.pl --batch-mira`` with ``minismt-kbmira`` in place of Moses' ``kbmira``: Moses' own script
   drives the iterations, minismt's tuner fits each one.

The system is a phrase-based model that ``minismt train`` wrote for Moses (its ``moses.ini``, tables and
LM are Moses' formats) on the synthetic corpus.
"""

# %%
# A Moses system
# --------------
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import minismt
from corpora.synthetic import write_synthetic
from minismt.train import Trainer, TrainingConfig

SHARED = Path(minismt.__file__).resolve().parents[2] / "shared"
MOSES = SHARED / "tools" / "moses"
work = Path(tempfile.mkdtemp())
write_synthetic(work / "data", n_pairs=1000, seed=3, dev=30, test=30)
Trainer(TrainingConfig(src=str(work / "data" / "train.src"), tgt=str(work / "data" / "train.tgt"),
                       out=str(work / "model"), lm_order=3, progress=False)).run()
ini = work / "model" / "moses.ini"
print(ini.read_text(encoding="utf-8").split("[weight]")[1].strip())

# %%
# ``minismt tune --decoder moses``
# --------------------------------
# Each iteration runs ``moses -config moses.ini -weight-overwrite ... -n-best-list FILE 100 distinct``
# (the search graphs too, for the step search) and keeps its files in ``tuned/decoder/decode.N/``;
# ``tuned/moses.ini`` is the original with the new ``[weight]`` numbers.
from minismt.cli import main

status = main(["tune", "--decoder", "moses", "--decoder-cmd", f"{MOSES / 'bin' / 'moses'} -threads 2",
               "--config", str(ini), "--dev-src", str(work / "data" / "dev.src"),
               "--dev-ref", str(work / "data" / "dev.tgt"), "--tuner", "apro", "--iterations", "3", "--seed", "1",
               "--run-dir", str(work / "tuned"), "--quiet"])
assert status == 0
print((work / "tuned" / "moses.ini").read_text(encoding="utf-8").split("[weight]")[1].strip())

# %%
# ``mert-moses.pl`` with ``minismt-kbmira``
# -----------------------------------------
# ``minismt-kbmira`` takes the flags of Moses' ``kbmira``, reads the extractor's files of every iteration
# and writes kbmira's weights file, but fits with any n-best tuner (``--tuner``, default ``apro``).  Put it
# next to Moses' own tools as ``kbmira``:
mertdir = work / "mertdir"
mertdir.mkdir()
for tool in ("extractor", "mert", "pro", "evaluator"):
    shutil.copy(MOSES / "bin" / tool, mertdir / tool)
(mertdir / "kbmira").symlink_to(Path(sys.executable).parent / "minismt-kbmira")
done = subprocess.run(["perl", str(MOSES / "scripts" / "training" / "mert-moses.pl"), str(work / "data" / "dev.src"),
                       str(work / "data" / "dev.tgt"), str(MOSES / "bin" / "moses"), str(ini),
                       "--mertdir", str(mertdir), "--batch-mira", "--batch-mira-args", "--tuner apro",
                       "--maximum-iterations", "2", "--working-dir", str(work / "mert-work")],
                      capture_output=True, text=True, cwd=work)
assert done.returncode == 0, done.stderr[-2000:]
for log in sorted((work / "mert-work").glob("run*.mert.log")):    # what minismt-kbmira printed each iteration
    lines = [line for line in log.read_text(encoding="utf-8").splitlines() if "BLEU" in line]
    if lines:
        print(log.name, "; ".join(lines))
print((work / "mert-work" / "moses.ini").read_text(encoding="utf-8").split("[weight]")[1].strip())
