"""A newcomer's first hour, timed: the README's set-up commands on a fresh clone.

A fresh ``git clone`` of this repository's committed state into a temporary folder, a new
virtual environment, and then, each timed on its own:

- ``pip install -e .`` (the README's first command; packages come from pip's cache when the
  machine has one, as on a second try);
- ``minismt demo --out A``: the first demo, numba's kernels compiled (the clone has no cache)
  and every step run;
- ``minismt demo --out B``: a later demo, kernels cached, every step run again (another
  output folder has another work folder);
- ``minismt demo --out A`` again: a rerun, every step cached;
- ``pip install -e '.[test]'`` and ``pytest -q`` (the README's second command), unless
  ``quick``.

The demos' work folders go to a temporary ``XDG_CACHE_HOME``. The clone has ``../shared`` (the
real Moses/cdec fixtures and corpora) next to it when this repository has, so that the tests
that read them run, as the README says. The load average before and
after is recorded with the times: a number measured on a busy machine says so.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _timed(argv, cwd, env) -> tuple[float, str]:
    """Seconds ``argv`` took and the last line it printed on stdout (a failure raises, with its output)."""
    began = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = round(time.perf_counter() - began, 1)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return seconds, (done.stdout.strip().splitlines() or [""])[-1]


def run(quick: bool = False) -> dict:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "minismt"
        shared = REPO.parent / "shared"
        if shared.is_dir():
            (Path(tmp) / "shared").symlink_to(shared)
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, check=True,
                                capture_output=True, text=True).stdout.strip()
        subprocess.run([sys.executable, "-m", "venv", ".venv"], cwd=clone, check=True)
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache"),
               "PATH": f"{clone / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
        env.pop("VIRTUAL_ENV", None)
        env.pop("PYTHONPATH", None)
        python = str(clone / ".venv" / "bin" / "python")
        seconds = {"install": _timed([python, "-m", "pip", "install", "-q", "-e", "."], clone, env)[0]}
        minismt = str(clone / ".venv" / "bin" / "minismt")
        seconds["first_demo"] = _timed([minismt, "demo", "--out", "report-a", "--quiet"], clone, env)[0]
        seconds["later_demo"] = _timed([minismt, "demo", "--out", "report-b", "--quiet"], clone, env)[0]
        seconds["rerun_demo"] = _timed([minismt, "demo", "--out", "report-a", "--quiet"], clone, env)[0]
        tests = None
        if not quick:
            seconds["install_test_extras"] = _timed([python, "-m", "pip", "install", "-q", "-e", ".[test]"],
                                                    clone, env)[0]
            seconds["tests"], tests = _timed([python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], clone, env)
    load_after = os.getloadavg()
    return {"commit": commit, "shared_fixtures": shared.is_dir(), "seconds": seconds, "tests": tests,
            "load_average_1min_before": round(load_before[0], 2), "load_average_1min_after": round(load_after[0], 2),
            "measured": f"{datetime.date.today().isoformat()}, fresh clone, load average {load_before[0]:.2f} "
                        f"before and {load_after[0]:.2f} after"}
