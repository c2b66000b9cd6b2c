"""TuningRun with a fake dev decoder: accumulation, convergence, best weights, and resuming after kills."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.kbest import KBestBuilder
from tuners.base import Tuner
from tuners.loop import TuningRun

FAKE = textwrap.dedent('''
    import time
    import numpy as np
    from minismt.features import FeatureSpace
    from minismt.kbest import KBestBuilder
    from tuners.base import Tuner

    class FakeDecoder:
        """A fixed pool of 30 hypotheses per sentence; 'decoding' returns the top 5 under w."""
        def __init__(self, n_sentences=6, delay=0.0):
            rng = np.random.default_rng(1)
            self.space = FeatureSpace(["a_0", "b_0", "c_0"])
            self.words = ["the", "cat", "sat", "on", "mat", "a", "dog"]
            self.pool = [[(" ".join(rng.choice(self.words, size=int(rng.integers(2, 7)))),
                           rng.standard_normal(3)) for _ in range(30)] for _ in range(n_sentences)]
            self.delay = delay
        def decode(self, weights, iteration):
            time.sleep(self.delay)
            builder = KBestBuilder(self.space)
            best = []
            for s, pool in enumerate(self.pool):
                order = np.argsort([-(f @ weights) for _, f in pool], kind="stable")[:5]
                for j in order:
                    builder.add(s, pool[j][0], pool[j][1])
                best.append(pool[order[0]][0])
            return builder.build(len(self.pool)), best

    class RandomSearch(Tuner):
        """Seeded random search on the k-best list (a stand-in tuner for loop tests)."""
        def __init__(self, seed=0, trials=30):
            self.seed = seed
            self.trials = trials
        def fit(self, data, w0):
            w0 = self.check_data(data, w0)
            rng = np.random.default_rng([self.seed, data.n_hypotheses])
            best, best_bleu = w0, data.bleu(w0)
            for _ in range(self.trials):
                w = best + rng.normal(scale=0.5, size=w0.shape)
                bleu = data.bleu(w)
                if bleu > best_bleu:
                    best, best_bleu = w, bleu
            self.weights_ = best
            return best

    REFS = [["the cat sat on the mat"], ["a dog sat"], ["the mat"], ["a cat on a mat"],
            ["the dog"], ["cat sat on mat"]]
''')
exec(FAKE)  # FakeDecoder, RandomSearch, REFS for the in-process tests


def test_loop_merges_stops_and_returns_best(tmp_path):
    decoder = FakeDecoder()
    run = TuningRun(decoder, REFS, RandomSearch(seed=1), tmp_path, max_iter=8)
    final = run.run(np.array([0.0, 0.0, 1.0]))
    history = json.loads((tmp_path / "history.json").read_text())
    assert 1 <= len(history) <= 8
    sizes = [h["hypotheses"] for h in history]
    assert sizes == sorted(sizes)                         # merged lists only grow
    best = max(history, key=lambda h: (h["dev_bleu"], -h["iteration"]))
    assert np.array_equal(final, np.array(best["weights"]))
    written = dict(line.split() for line in (tmp_path / "weights.final").read_text().splitlines())
    assert [float(written[n]) for n in decoder.space.names] == final.tolist()
    if len(history) < 8:
        assert history[-1]["new_hypotheses"] == 0        # stopped because nothing changed
    assert (tmp_path / "tune.log").read_text().count("iteration") == len(history)


def test_aggregate_keeps_instances_per_iteration(tmp_path):
    run = TuningRun(FakeDecoder(), REFS, RandomSearch(seed=2), tmp_path, accumulate="aggregate",
                    max_iter=3, return_best=False)
    run.run(np.array([1.0, 0.0, 0.0]))
    assert [h["hypotheses"] for h in json.loads((tmp_path / "history.json").read_text())][0] == 30


def test_settings_mismatch_and_bad_arguments(tmp_path):
    TuningRun(FakeDecoder(), REFS, RandomSearch(), tmp_path, max_iter=1, seed=1).run(np.zeros(3))
    with pytest.raises(InputError, match="other settings"):
        TuningRun(FakeDecoder(), REFS, RandomSearch(), tmp_path, max_iter=1, seed=2).run(np.zeros(3))
    with pytest.raises(InputError):
        TuningRun(FakeDecoder(), REFS, RandomSearch(), tmp_path, accumulate="sum")


SCRIPT = FAKE + textwrap.dedent('''
    import sys
    from tuners.loop import TuningRun
    run = TuningRun(FakeDecoder(delay=0.15), REFS, RandomSearch(seed=5), sys.argv[1], max_iter=12)
    run.run(np.array([0.0, 1.0, -1.0]))
''')


def test_killed_runs_resume_to_bit_identical_weights(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, str(script), str(tmp_path / "clean")], check=True, env=env)
    reference = (tmp_path / "clean" / "weights.final").read_text()
    rng = random.Random(4)
    killed = tmp_path / "killed"
    kills = 0
    for _ in range(40):
        proc = subprocess.Popen([sys.executable, str(script), str(killed)], env=env)
        try:
            proc.wait(timeout=rng.uniform(1.0, 3.0))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            continue
        assert proc.returncode == 0
        break
    assert kills >= 2, "the test should interrupt the run several times"
    assert (killed / "weights.final").read_text() == reference


PROGRAM = FAKE + textwrap.dedent('''
    import sys
    from minismt.features import read_weights
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    if args.get("--fail"):
        print("model file not found", file=sys.stderr)
        sys.exit(3)
    decoder = FakeDecoder()
    w = decoder.space.weights(read_weights(args["--weights"]), grow=False)
    kbest, _ = decoder.decode(w, 0)
    with open(args["--nbest"], "w") as out:
        for s in range(kbest.n_instances):
            for r in kbest.rows(s):
                f = kbest.features[r]
                out.write(f"{s} ||| {kbest.hypothesis(r)} ||| a= {float(f[0])!r} b= {float(f[1])!r} c= {float(f[2])!r} ||| {float(f @ w)!r}\\n")
''')


def test_command_decoder_drives_the_loop_and_reports_failures(tmp_path):
    from tuners.devdecoder import CommandDevDecoder
    program = tmp_path / "fake_decoder.py"
    program.write_text(PROGRAM)
    space = FakeDecoder().space
    command = [sys.executable, str(program), "--weights", "{weights}", "--nbest", "{kbest}"]
    decoder = CommandDevDecoder(command, space, len(REFS), str(tmp_path / "work"))
    in_process = TuningRun(FakeDecoder(), REFS, RandomSearch(seed=1), tmp_path / "a", max_iter=3)
    through_program = TuningRun(decoder, REFS, RandomSearch(seed=1), tmp_path / "b", max_iter=3)
    w0 = np.array([0.0, 0.0, 1.0])
    assert np.array_equal(through_program.run(w0), in_process.run(w0))
    failing = CommandDevDecoder(command + ["--fail", "1"], space, len(REFS), str(tmp_path / "work2"))
    with pytest.raises(InputError, match="model file not found"):
        failing.decode(w0, 0)
