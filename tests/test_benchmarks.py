"""The benchmark runner works (at a small size) and prints one JSON object as its last line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


def run_quick(name: str) -> dict:
    out = subprocess.run([sys.executable, str(RUN), name, "--quick"], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_kbest_memory_and_bleu_stats_quick():
    memory = run_quick("kbest-memory")
    assert memory["hypotheses"] == 1_000_000 and memory["peak_rss_gb"] < 4
    assert run_quick("bleu-stats")["hypotheses"] > 0


@pytest.mark.slow
def test_every_benchmark_runs_quick():
    out = subprocess.run([sys.executable, str(RUN), "all", "--quick"], capture_output=True,
                         text=True, check=True).stdout
    summary = json.loads(out.strip().splitlines()[-1])
    assert len(summary["results"]) == len(subprocess.run(
        [sys.executable, str(RUN), "--list"], capture_output=True, text=True).stdout.split())
