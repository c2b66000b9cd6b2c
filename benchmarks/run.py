"""Run a named benchmark: ``python benchmarks/run.py NAME [--quick]``; ``all`` runs every one.

Each benchmark runs in its own process (so peak memory is its own) and prints
one JSON object as its last line; ratios are against a baseline measured in
the same run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name -> module in benchmarks/ with a run(quick: bool) -> dict function
BENCHMARKS = {
    "kbest-memory": "kbest_memory",
    "bleu-stats": "bleu_stats",
    "align-speed": "align_speed",
    "extract-speed": "extract_speed",
    "lm-speed": "lm_speed",
    "train-speed": "train_speed",
    "hypergraph-speed": "hypergraph_speed",
    "mert-moses-fixture": "mert_speed",
    "hgmert-speed": "hgmert_speed",
    "apro-scaling": "apro_scaling",
    "decode-speed": "decode_speed",
    "tuner-quality": "tuner_quality",
    "tuner-comparison": "tuner_comparison",
    "bo-speed": "bo_speed",
}


def run_one(name: str, quick: bool) -> dict:
    sys.path.insert(0, str(HERE))
    module = importlib.import_module(BENCHMARKS[name])
    result = module.run(quick=quick)
    result["benchmark"] = name
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", nargs="?", help="benchmark name, or 'all'")
    parser.add_argument("--quick", action="store_true", help="a smaller size, for a smoke test")
    parser.add_argument("--list", action="store_true", help="list the benchmarks")
    args = parser.parse_args(argv)
    if args.list or not args.name:
        print("\n".join(BENCHMARKS))
        return 0
    if args.name == "all":
        results = []
        for name in BENCHMARKS:
            cmd = [sys.executable, str(HERE / "run.py"), name] + (["--quick"] if args.quick else [])
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            print(out, end="")
            results.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps({"benchmark": "all", "results": results}))
        return 0
    if args.name not in BENCHMARKS:
        parser.error(f"unknown benchmark {args.name!r}; known: {', '.join(BENCHMARKS)}")
    print(json.dumps(run_one(args.name, args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
