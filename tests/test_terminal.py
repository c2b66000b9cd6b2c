"""What a user sees on the terminal: progress bars only on a terminal, no remaining time estimated
from a wait of unknown length, log lines on lines of their own, and Ctrl-C with worker processes
is one line and leaves no process behind."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from conftest import synthetic_system
from minismt import progress

INTERRUPTED = "minismt: interrupted (tune, pipeline and demo resume when run again)"


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    """A tiny synthetic model, its 200 test sentences, and 8,000 lines (about 10 s with two jobs)."""
    data, model = synthetic_system(tmp_path_factory, n_pairs=300, seed=2, dev=6, test=200)
    folder = tmp_path_factory.mktemp("terminal")
    (folder / "data").symlink_to(data)
    (folder / "model").symlink_to(model)
    sentences = (data / "test.src").read_text().splitlines()
    references = (data / "test.tgt").read_text().splitlines()
    (folder / "long.src").write_text("\n".join(sentences * 40) + "\n")
    (folder / "dev.src").write_text("\n".join((sentences * 2)[:300]) + "\n")
    (folder / "dev.ref").write_text("\n".join((references * 2)[:300]) + "\n")
    return folder


def minismt() -> str:
    return shutil.which("minismt") or str(Path(sys.executable).with_name("minismt"))


def decode_argv(system, source: str, *extra) -> list[str]:
    return [minismt(), "decode", "--model", str(system / "model"), "--input", str(system / source),
            "--output", str(system / "out.txt"), "--stack", "20", *extra]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bar_is_drawn_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progress.bar(total=3).disable
    monkeypatch.setattr(sys, "stderr", FakeTerminal())
    assert not progress.bar(total=3).disable
    assert progress.bar(total=3, enabled=False).disable


def test_the_rate_starts_after_the_first_unit_with_warmup(monkeypatch):
    """A first unit that starts workers or compiles kernels (here 600 s) does not enter the rate,
    so the remaining time is not hours long; before a second unit ends there is no estimate."""
    monkeypatch.setattr(sys, "stderr", FakeTerminal())
    clock = Clock()
    bar = progress.bar(total=11, warmup=True, mininterval=0)
    bar._time = clock
    bar.start_t = bar.last_print_t = clock.now
    clock.now += 600.0
    bar.update(1)
    assert bar.format_dict["rate"] is None and "?" in str(bar)
    clock.now += 2.0
    bar.update(1)
    assert bar.format_dict["rate"] == pytest.approx(0.5)  # one unit in 2 s, not two in 602 s
    assert "00:18" in str(bar)  # 9 units left at 2 s each
    plain = progress.bar(total=11, mininterval=0)
    plain._time = clock
    plain.start_t = plain.last_print_t = clock.now - 602.0
    plain.n = 2
    assert "<45:09" in str(plain)  # without warmup: 9 units at 301 s each


def test_steps_of_unrelated_lengths_show_no_rate_and_no_remaining_time(monkeypatch):
    monkeypatch.setattr(sys, "stderr", FakeTerminal())
    bar = progress.bar(total=6, desc="estimate_kn", unit="step", eta=False)
    bar.update(2)
    text = str(bar)
    assert "2/6" in text and "<" not in text and "step/s" not in text and "?" not in text


def test_no_bar_in_a_log_file(system):
    """stderr in a file or a pipe: the log line, and no bar fragments."""
    result = subprocess.run(decode_argv(system, "data/test.src"), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    words = sum(len(line.split()) for line in (system / "data" / "test.src").read_text().splitlines())
    assert result.stderr == f"decoded 200 sentences ({words} words)\n"


def read_terminal(argv) -> tuple[int, str]:
    """Run ``argv`` with stderr on a pseudo-terminal; its exit status and what the terminal received."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 24 rows, 100 columns
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return process.wait(timeout=300), b"".join(chunks).decode("utf-8", "replace")


def test_on_a_terminal_the_bar_is_drawn_and_the_log_line_has_its_own_line(system):
    status, shown = read_terminal(decode_argv(system, "data/test.src"))
    assert status == 0, shown
    assert "decode: 100%" in shown and "200/200" in shown and "\r" in shown
    lines = [line.split("\r")[-1] for line in shown.replace("\r\n", "\n").split("\n")]
    assert any(line.startswith("decoded 200 sentences (") for line in lines), shown


def children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return found


def default_sigint() -> None:
    """In the child before it runs: Ctrl-C handled as in a terminal, also when the tests run where SIGINT is
    ignored (a shell's background job or nohup), which a child would inherit and never be interrupted."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_after_workers_start(argv, wait: float = 1.0) -> tuple[int, str, list[int]]:
    """Start ``argv`` in its own process group, wait for its two workers, then Ctrl-C (SIGINT to
    the whole group, as a terminal sends it); exit status, stderr and the workers' pids."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, env={**os.environ, "PYTHONFAULTHANDLER": "1"},
                               preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    workers = []
    while len(workers) < 2 and time.monotonic() < deadline and process.poll() is None:
        workers = children(process.pid)
        time.sleep(0.05)
    time.sleep(wait)
    assert process.poll() is None, f"finished before the interrupt: {process.stderr.read()}"
    os.killpg(process.pid, signal.SIGINT)
    try:
        _, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)  # faulthandler: where it hangs
        _, err = process.communicate(timeout=60)
        pytest.fail(f"no exit 60 s after Ctrl-C:\n{err}")
    return process.returncode, err, workers


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the worker processes in /proc (Linux)")
@pytest.mark.parametrize("command,wait", [("decode", 1.0), ("tune", 1.0), ("decode", 0.0), ("tune", 0.0)])
def test_ctrl_c_with_two_jobs_is_one_line_and_stops_the_workers(system, tmp_path, command, wait):
    """Ctrl-C while the workers decode, and (wait 0) while they are still starting: importing numpy and
    numba, before any code of ours runs in them (a second or more on a busy machine)."""
    if command == "decode":
        argv = decode_argv(system, "long.src", "--jobs", "2")
    else:
        argv = [minismt(), "tune", "--model", str(system / "model"), "--dev-src", str(system / "dev.src"),
                "--dev-ref", str(system / "dev.ref"), "--tuner", "mert", "--run-dir", str(tmp_path / "run"),
                "--iterations", "20", "--jobs", "2"]
    status, err, workers = interrupt_after_workers_start(argv, wait)
    assert status == 130 and err == INTERRUPTED + "\n", err  # no worker traceback, no leaked semaphore
    assert len(workers) >= 2
    time.sleep(0.5)
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()
                and "zombie" not in Path(f"/proc/{pid}/status").read_text()]
