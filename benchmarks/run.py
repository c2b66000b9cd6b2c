"""Run a named benchmark: ``python benchmarks/run.py NAME [--quick]``; ``all`` runs every one.

Each benchmark runs in its own process (so peak memory is its own) and prints
one JSON object as its last line; ratios are against a baseline measured in
the same run. ``all`` also writes ``benchmarks/RESULTS.md`` (machine, date,
every benchmark's numbers; ``--results FILE`` elsewhere), and ``--assemble
FILE ...`` writes it from benchmark outputs saved earlier (each file's last
line is one benchmark's JSON object, or the file is one, e.g. from benchmarks/results/).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name -> module in benchmarks/ with a run(quick: bool, **options) -> dict function, or (module, options)
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
    "tuner-quality-fr-en": ("tuner_quality", {"corpus": "multi30k-fr-en"}),
    "tuner-quality-hard": ("tuner_quality", {"max_train": 3000, "iterations": 4, "runs": "all-tuners"}),
    "tuner-quality-hard-fr-en": ("tuner_quality", {"max_train": 3000, "iterations": 4, "runs": "all-tuners",
                                                   "corpus": "multi30k-fr-en"}),
    "tuner-quality-hard-hiero": ("tuner_quality", {"max_train": 3000, "iterations": 4, "runs": "all-tuners",
                                                   "model_kind": "hiero"}),
    "tuner-quality-hard-hiero-seeds": ("tuner_quality", {"max_train": 3000, "iterations": 4, "runs": "seeds",
                                                         "model_kind": "hiero"}),
    "tuner-quality-hard-fr-en-hiero": ("tuner_quality", {"max_train": 3000, "iterations": 4, "runs": "all-tuners",
                                                         "corpus": "multi30k-fr-en", "model_kind": "hiero"}),
    "tuner-quality-long": ("tuner_quality", {"max_train": 3000, "join": 3, "iterations": 4, "runs": "all-tuners"}),
    "tuner-quality-long-hiero": ("tuner_quality", {"max_train": 3000, "join": 3, "iterations": 4,
                                                   "runs": "all-tuners", "model_kind": "hiero"}),
    "tuner-quality-long-hiero-seeds": ("tuner_quality", {"max_train": 3000, "join": 3, "iterations": 4,
                                                         "runs": "seeds", "model_kind": "hiero"}),
    "tuner-quality-long-hiero-whole-steps": ("tuner_quality", {"max_train": 3000, "join": 3, "iterations": 4,
                                                               "runs": "seeds", "model_kind": "hiero",
                                                               "step_search": "none", "decode_norm": "none",
                                                               "accept": "any"}),
    "tuner-quality-long-whole-steps": ("tuner_quality", {"max_train": 3000, "join": 3, "iterations": 4,
                                                         "runs": "every-tuner", "step_search": "none",
                                                         "decode_norm": "none", "accept": "any"}),
    "tuner-quality-longer": ("tuner_quality", {"max_train": 2000, "join": 5, "iterations": 4, "runs": "seeds"}),
    "tuner-quality-longer-whole-steps": ("tuner_quality", {"max_train": 2000, "join": 5, "iterations": 4,
                                                           "runs": "seeds", "step_search": "none",
                                                           "decode_norm": "none", "accept": "any"}),
    "tuner-quality-longer-step-only": ("tuner_quality", {"max_train": 2000, "join": 5, "iterations": 4,
                                                         "runs": "seeds", "accept": "any"}),
    "tuner-quality-mid": ("tuner_quality", {"max_train": 9000, "join": 2, "iterations": 8, "runs": "seeds",
                                            "stack": 200}),
    "moses-same-model-mid": "moses_same_model",
    "moses-same-model-long": ("moses_same_model", {"max_train": 3000, "join": 3, "iterations": 4, "stack": 100}),
    "moses-same-model-hard": ("moses_same_model", {"max_train": 3000, "join": 1, "iterations": 4, "stack": 100}),
    "forest-learning": ("tuner_quality", {"runs": "forest-learning"}),
    "forest-learning-hiero": ("tuner_quality", {"runs": "forest-learning", "model_kind": "hiero"}),
    "forest-learning-sparse": ("tuner_quality", {"runs": "forest-learning-sparse"}),
    "forest-learning-hiero-sparse": ("tuner_quality", {"runs": "forest-learning-sparse", "model_kind": "hiero"}),
    "tuner-comparison": "tuner_comparison",
    "tuner-comparison-fr-en": ("tuner_comparison", {"corpus": "multi30k-fr-en"}),
    "accumulation-study": ("tuner_comparison", {"study": "accumulation"}),
    "hypergraph-study": ("tuner_comparison", {"study": "hypergraph"}),
    "hypergraph-study-hiero": ("tuner_comparison", {"study": "hypergraph-hiero"}),
    "sparse-study": ("tuner_comparison", {"study": "sparse"}),
    "bo-speed": "bo_speed",
    "first-hour": "first_hour",
    "moses-tuning-speed": "moses_tuning_speed",
    "hiero-grammar": "hiero_grammar",
    "hiero-decode": "hiero_decode",
    "dtrain-large": "dtrain_large",
    "hiero-tuning": "hiero_tuning",
    "expectation-speed": "expectation_speed",
    "mbr-study": "mbr_study",
    "cdec-tuners": "cdec_tuners",
}


def run_one(name: str, quick: bool) -> dict:
    sys.path.insert(0, str(HERE))
    module, options = BENCHMARKS[name] if isinstance(BENCHMARKS[name], tuple) else (BENCHMARKS[name], {})
    result = importlib.import_module(module).run(quick=quick, **options)
    result["benchmark"] = name
    return result


def machine() -> dict:
    """What the numbers were measured on."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), "")
    except OSError:
        pass
    memory = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            kb = int(next(line.split()[1] for line in handle if line.startswith("MemTotal")))
        memory = f"{kb / 2 ** 20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return {"cpu": model or platform.processor(), "cores": os.cpu_count(), "memory": memory,
            "python": platform.python_version(), "system": platform.platform()}


def _flatten(value, prefix: str = ""):
    """``(dotted key, value)`` of the numbers and short strings of a nested result."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _flatten(inner, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, (int, float, bool)) or (isinstance(value, str) and len(value) <= 80
                                                   and "\n" not in value):
        yield prefix, value


def results_markdown(results: list[dict], quick: bool = False, assembled: bool = False) -> str:
    """RESULTS.md: the machine, the date, and per benchmark its numbers (and tables it made)."""
    info = machine()
    how = ("Assembled by `python benchmarks/run.py --assemble` from the saved outputs of "
           + ", ".join(r.get("benchmark", "?") for r in results)) if assembled else \
        f"Written by `python benchmarks/run.py all{' --quick' if quick else ''}`"
    lines = ["# Benchmark results", "",
             f"{how} on "
             f"{datetime.date.today().isoformat()}: {info['cpu']}, {info['cores']} cores, {info['memory']}, "
             f"Python {info['python']} ({info['system']}).", ""]
    for result in results:
        lines += section_markdown(result)
    return "\n".join(lines)


TABLES = ("table", "claims", "iteration_table")
"""Keys of a result holding markdown tables, written into its section in this order."""


def section_markdown(result: dict) -> list[str]:
    """One benchmark's section of RESULTS.md: its heading, the tables it made and its numbers."""
    lines = [f"## {result.get('benchmark', '?')}", ""]
    for key in TABLES:
        if isinstance(result.get(key), str):
            lines += [result[key], ""]
    rows = [(k, v) for k, v in _flatten({k: v for k, v in result.items()
                                         if k not in ("benchmark", "runs", *TABLES)})]
    if rows:
        lines += ["| key | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows] + [""]
    return lines


def update_results(results: list[dict], path: Path) -> None:
    """Replace (or add at the end) the sections of ``results`` in the results file ``path``, keeping
    every other section as it is."""
    text = path.read_text(encoding="utf-8")
    for result in results:
        section = "\n".join(section_markdown(result))
        heading = f"\n## {result.get('benchmark', '?')}\n"
        if heading in text:
            start = text.index(heading) + 1
            end = text.find("\n## ", start)
            text = text[:start] + section + ("\n" + text[end + 1:] if end >= 0 else "")
        else:
            text = text.rstrip("\n") + "\n\n" + section
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    os.replace(temporary, path)


def write_results(results: list[dict], path: Path, quick: bool = False, assembled: bool = False) -> None:
    text = results_markdown(results, quick, assembled)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def read_output(path) -> dict | list:
    """A saved benchmark result: a JSON file (maybe indented), or a benchmark's output (progress lines, then
    one JSON line)."""
    text = Path(path).read_text(encoding="utf-8").strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(text.splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", nargs="?", help="benchmark name, or 'all'")
    parser.add_argument("--quick", action="store_true", help="a smaller size, for a smoke test")
    parser.add_argument("--list", action="store_true", help="list the benchmarks")
    parser.add_argument("--results", type=Path, default=None,
                        help="where 'all' and --assemble write the results (default benchmarks/RESULTS.md; "
                             "benchmarks/RESULTS.quick.md with --quick)")
    parser.add_argument("--assemble", nargs="+", metavar="FILE",
                        help="write the results file from saved outputs of benchmarks (last line: JSON)")
    parser.add_argument("--update", nargs="+", metavar="FILE",
                        help="replace (or add) these saved benchmarks' sections in the results file, "
                             "keeping the others")
    args = parser.parse_args(argv)
    if args.results is None:
        args.results = HERE / ("RESULTS.quick.md" if args.quick else "RESULTS.md")
    if args.assemble or args.update:
        results = [read_output(path) for path in args.assemble or args.update]
        if args.update:
            update_results(results, args.results)
        else:
            write_results(results, args.results, assembled=True)
        print(f"wrote {args.results}")
        return 0
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
        write_results(results, args.results, args.quick)
        print(json.dumps({"benchmark": "all", "results": results}))
        return 0
    if args.name not in BENCHMARKS:
        parser.error(f"unknown benchmark {args.name!r}; known: {', '.join(BENCHMARKS)}")
    print(json.dumps(run_one(args.name, args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
