"""The benchmark runner works (at a small size) and prints one JSON object as its last line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


def test_all_benchmarks_run_quick():
    out = subprocess.run([sys.executable, str(RUN), "all", "--quick"], capture_output=True,
                         text=True, check=True).stdout
    summary = json.loads(out.strip().splitlines()[-1])
    results = {r["benchmark"]: r for r in summary["results"]}
    assert results["kbest-memory"]["hypotheses"] == 1_000_000
    assert results["kbest-memory"]["peak_rss_gb"] < 4
    assert results["bleu-stats"]["hypotheses"] > 0
