"""TuningRun with fake dev decoders: accumulation, convergence, best weights, resuming after
kills, and driving an external decoder program."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
import pytest

from fake_decoder import REFS, FakeDecoder, RandomSearch
from minismt.errors import InputError
from plugins.command import CommandDevDecoder
from tuners.loop import TuningRun

PROGRAM = str(Path(__file__).with_name("fake_decoder.py"))
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


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
    records = [line for line in (tmp_path / "tune.log").read_text().splitlines() if "tuned BLEU" in line]
    assert len(records) == len(history)


@pytest.mark.parametrize("accumulate", ["merge", "aggregate", "none"])
def test_accepted_steps_never_lower_the_decoded_dev_bleu(tmp_path, accumulate):
    """With accept="decoded" no iteration decodes below the one before it: a step that does is halved and decoded
    again (the trials' lists accumulated, the log saying each), at worst back to the weights it started from.
    The same runs with accept="any" do fall, so the property is not the fake decoder's."""
    from tuners.step import BACKTRACKS
    falls = backs = 0
    for seed in range(12):
        kept = TuningRun(FakeDecoder(), REFS, RandomSearch(seed=seed), tmp_path / f"any{seed}", accumulate,
                         max_iter=6, accept="any")
        kept.run(np.array([0.0, 1.0, -1.0]))
        bleu = [r.dev_bleu for r in kept.history]
        falls += sum(b < a for a, b in zip(bleu, bleu[1:]))
        run = TuningRun(FakeDecoder(), REFS, RandomSearch(seed=seed), tmp_path / f"dec{seed}", accumulate,
                        max_iter=6)
        run.run(np.array([0.0, 1.0, -1.0]))
        log = (tmp_path / f"dec{seed}" / "tune.log").read_text()
        for before, after in zip(run.history, run.history[1:]):
            assert after.dev_bleu >= before.dev_bleu
            assert all(trial < before.dev_bleu for trial in after.rejected)
            assert len(after.rejected) <= BACKTRACKS + 1
            if len(after.rejected) == BACKTRACKS + 1:  # back to the weights it started from
                backs += 1
                assert after.weights == before.weights and after.dev_bleu == before.dev_bleu
            elif after.rejected:  # a part of the step, not the weights it started from
                assert not np.allclose(after.weights, before.weights)
            assert log.count(f"iteration {after.iteration}: decoded dev BLEU") == len(after.rejected) + 1
        if accumulate == "merge":
            assert [r.hypotheses for r in run.history] == sorted(r.hypotheses for r in run.history)
        assert json.loads((tmp_path / f"dec{seed}" / "run.json").read_text())["accept"] == "decoded"
        assert "accept" not in json.loads((tmp_path / f"any{seed}" / "run.json").read_text())
    assert falls >= 5 and backs >= 1
    with pytest.raises(InputError, match="accept='maybe'"):
        TuningRun(FakeDecoder(), REFS, RandomSearch(), tmp_path / "bad", accept="maybe")


def test_aggregate_keeps_instances_per_iteration(tmp_path):
    run = TuningRun(FakeDecoder(), REFS, RandomSearch(seed=2), tmp_path, accumulate="aggregate",
                    max_iter=3, return_best=False)
    run.run(np.array([1.0, 0.0, 0.0]))
    assert [h["hypotheses"] for h in json.loads((tmp_path / "history.json").read_text())][0] == 30


def test_settings_mismatch_and_bad_arguments(tmp_path):
    TuningRun(FakeDecoder(), REFS, RandomSearch(), tmp_path, max_iter=1, seed=1).run(np.zeros(3))
    with pytest.raises(InputError, match="holds another run: seed: 1 -> 2"):
        TuningRun(FakeDecoder(), REFS, RandomSearch(), tmp_path, max_iter=1, seed=2).run(np.zeros(3))
    with pytest.raises(InputError, match="accumulate: \"merge\" -> \"none\"; iterations: 1 -> 2"):
        TuningRun(FakeDecoder(), REFS, RandomSearch(), tmp_path, "none", max_iter=2, seed=1).run(np.zeros(3))
    with pytest.raises(InputError, match="references: "):
        TuningRun(FakeDecoder(), REFS[::-1], RandomSearch(), tmp_path, max_iter=1, seed=1).run(np.zeros(3))
    with pytest.raises(InputError, match="tuner_params.*-> 3"):  # an object's parameters are recorded too
        TuningRun(FakeDecoder(), REFS, RandomSearch(trials=3), tmp_path, max_iter=1, seed=1).run(np.zeros(3))
    with pytest.raises(InputError):
        TuningRun(FakeDecoder(), REFS, RandomSearch(), tmp_path, accumulate="sum")


def _reached(run_dir: Path, iteration: int, proc, timeout: float = 60.0) -> bool:
    """Wait until the run's checkpoint holds ``iteration`` (False if the process ended first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if json.loads((run_dir / "checkpoint.json").read_text())["iteration"] >= iteration:
                return True
        except (FileNotFoundError, ValueError, KeyError):
            pass
        time.sleep(0.005)
    return False


@pytest.mark.parametrize("tuner", [[], ["o-oro"]], ids=["kbest-tuner", "online-tuner"])
def test_killed_runs_resume_to_bit_identical_weights(tmp_path, tuner):
    """SIGKILL during start-up, and at random moments after checkpoints 0, 1 and 3 (mid-iteration
    or mid-save); every restart resumes, and the final weights equal an uninterrupted run's
    (for an online tuner too: its learning-rate step is in the checkpoint)."""
    subprocess.run([sys.executable, PROGRAM, "tune", str(tmp_path / "clean")] + tuner, check=True, env=ENV)
    reference = (tmp_path / "clean" / "weights.final").read_text()
    rng = random.Random(4)
    killed = tmp_path / "killed"
    kills = 0
    for target in (None, 0, 1, 3):
        proc = subprocess.Popen([sys.executable, PROGRAM, "tune", str(killed)] + tuner, env=ENV)
        if target is None:
            time.sleep(rng.uniform(0.05, 0.3))
        elif not _reached(killed, target, proc):
            proc.wait()
            continue
        time.sleep(rng.uniform(0.0, 0.2))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
    subprocess.run([sys.executable, PROGRAM, "tune", str(killed)] + tuner, check=True, env=ENV)
    assert kills >= 3, "the test should interrupt the run several times"
    assert (killed / "weights.final").read_text() == reference


def test_command_decoder_drives_the_loop_and_reports_failures(tmp_path):
    space = FakeDecoder().space
    command = [sys.executable, PROGRAM, "decode", "--weights", "{weights}", "--nbest", "{kbest}"]
    decoder = CommandDevDecoder(command, space, len(REFS), str(tmp_path / "work"))
    in_process = TuningRun(FakeDecoder(), REFS, RandomSearch(seed=1), tmp_path / "a", max_iter=3)
    through_program = TuningRun(decoder, REFS, RandomSearch(seed=1), tmp_path / "b", max_iter=3)
    w0 = np.array([0.0, 0.0, 1.0])
    assert np.array_equal(through_program.run(w0), in_process.run(w0))
    failing = CommandDevDecoder(command + ["--fail", "1"], space, len(REFS), str(tmp_path / "work2"))
    with pytest.raises(InputError, match="model file not found"):
        failing.decode(w0, 0)


def test_accumulation_defaults_to_the_tuners_own(tmp_path):
    """Listwise tuners get instance aggregating by default, the others Moses' merging; either can be chosen."""
    assert TuningRun(FakeDecoder(), REFS, "listmle-te", tmp_path / "a").accumulate == "aggregate"
    assert TuningRun(FakeDecoder(), REFS, "mert", tmp_path / "b").accumulate == "merge"
    assert TuningRun(FakeDecoder(), REFS, "listmle", tmp_path / "c", accumulate="merge").accumulate == "merge"
    run = TuningRun(FakeDecoder(), REFS, "listnet", tmp_path / "d", max_iter=3, seed=1)
    run.run(np.array([0.0, 1.0, -1.0]))
    assert [r.hypotheses for r in run.history] == [30, 60, 90][: len(run.history)]


def test_the_decoder_declares_what_it_can_do(tmp_path):
    """A dev decoder is a DevDecoder; a capability it lacks is an error before any work."""
    with pytest.raises(InputError, match="a dev decoder of type object.*DevDecoder"):
        TuningRun(object(), REFS, "mert", str(tmp_path / "a"))
    decoder = FakeDecoder()
    assert not decoder.outputs_forests and not decoder.forces and decoder.decodes_batches
    run = TuningRun(decoder, REFS, "hg-mert", str(tmp_path / "b"), max_iter=1)
    with pytest.raises(InputError, match="FakeDecoder does not output hypergraphs"):
        run.run(np.zeros(3))
    assert not (tmp_path / "b" / "tune.log").exists()


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_a_rejected_trial_is_shown_below_the_bleu_it_fell_from(a, b):
    """The acceptance's log line says "decoded dev BLEU X is below iteration t's Y": X and Y have two
    decimals, or as many more as make them differ (a fall of 0.003 BLEU is not shown as 32.00 below 32.00)."""
    from tuners.loop import _distinct_percents
    low, high = _distinct_percents(min(a, b), max(a, b))
    places = len(low.split(".")[1])
    assert places == len(high.split(".")[1]) and 2 <= places <= 6
    assert float(low) <= float(high)
    if round(100 * max(a, b), 6) - round(100 * min(a, b), 6) >= 2e-6:
        assert low != high and (places == 2 or f"{100 * a:.{places - 1}f}" == f"{100 * b:.{places - 1}f}")
