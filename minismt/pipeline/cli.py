"""``minismt pipeline CONFIG.toml`` and ``minismt demo``: registered by :func:`add_pipeline_commands`.

``minismt --help`` imports this module; the report module (numpy: 0.10 s) is imported by the
summary that is printed after a run, not here.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import os
import sys
import textwrap

from minismt.io import check_writable_dir
from minismt.pipeline.config import check_config, describe_schema, dump_toml, load_config
from minismt.pipeline.run import run_pipeline


FORMATTER = argparse.RawDescriptionHelpFormatter

# The demo: the built-in synthetic corpus, five tuners (three seeds each where they are random).
# Its times on a fresh clone are benchmarks/RESULTS.md's first-hour (the README quotes them).
DEMO_CONFIG = {
    "corpus": {"name": "synthetic", "size": 3000, "seed": 1, "dev": 150, "test": 200},
    "tune": {"tuners": ["mert", "pro", "apro", "kbmira", "o-oro"], "seeds": 3,
             "iterations": 5, "kbest": 100, "stack": 50, "parallel": 2,
             "params": {"mert": {"n_random_restarts": 5}}},
    "test": {"stack": 50, "jobs": 2},
    "output": {},
}


def _text(*paragraphs: str) -> str:
    """Paragraphs filled to 78 columns; one holding a newline is kept as laid out."""
    return "\n\n".join(p if "\n" in p else textwrap.fill(p, 78) for p in paragraphs)


def demo_work_dir(out: str) -> str:
    """The demo's default work folder: under the user's cache, one per report folder.

    ``$XDG_CACHE_HOME/minismt/demo-<hash of OUT's absolute path>`` (``~/.cache`` when
    XDG_CACHE_HOME is unset), so the 100 MB of cached steps stay out of the report
    folder (and out of a git checkout) while a rerun with the same ``--out`` reuses them.
    """
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256(os.path.abspath(out).encode("utf-8")).hexdigest()[:12]
    return os.path.join(cache, "minismt", f"demo-{key}")


def check_output_dirs(work_dir: str, work_flag: str, report_dir: str, report_flag: str) -> None:
    """Fail before any work when the work or report folder cannot be created and written."""
    check_writable_dir(work_dir, work_flag)
    check_writable_dir(report_dir, report_flag)


def _print_summary(report: dict, out_dir: str, work_dir: str) -> None:
    from minismt.pipeline.report import format_table, summary_rows
    print(format_table(summary_rows(report)))
    signature = report.get("test_signature") or ""
    print(f"\nBLEU/chrF/TER by sacrebleu: {signature}")
    if report.get("significance"):
        print(f"p: paired bootstrap on test BLEU ({report['significance']['samples']} resamples, seed "
              f"{report['significance']['seed']}) between each tuner's best-dev run and the first tuner's")
    total = report["timings"]["total_seconds"]
    print(f"report: {os.path.join(out_dir, 'report.md')} (and report.json, "
          f"{', '.join(f['file'] for f in report['figures'].values() if f.get('file')) or 'no figures'}); "
          f"{total:.1f} s")
    print(f"work folder (every step's outputs, reused by the next run): {work_dir}")


def _pipeline_command(args) -> int:
    overrides = {}
    if args.work_dir:
        overrides["work_dir"] = os.path.abspath(args.work_dir)
    if args.out:
        overrides["report_dir"] = os.path.abspath(args.out)
    config = load_config(args.config, overrides={"output": overrides} if overrides else None)
    check_output_dirs(config.work_dir, "--work-dir" if args.work_dir else "output.work_dir",
                      config.report_dir, "--out" if args.out else "output.report_dir")
    if args.check:
        print(config.to_toml(), end="")
        return 0
    report = run_pipeline(config, progress=not args.quiet, echo=not args.quiet, dask_scheduler=args.dask_scheduler)
    _print_summary(report, config.report_dir, config.work_dir)
    return 0


def demo_config(out: str = ".", work_dir: str | None = None, tuners=None, seeds: int | None = None,
                iterations: int | None = None) -> dict:
    """The demo's configuration as nested dicts (``check_config`` reads it)."""
    data = copy.deepcopy(DEMO_CONFIG)
    data["output"]["report_dir"] = os.path.abspath(out)
    data["output"]["work_dir"] = os.path.abspath(work_dir or demo_work_dir(out))
    if tuners:
        data["tune"]["tuners"] = list(tuners)
        data["tune"]["params"] = {t: p for t, p in data["tune"]["params"].items() if t in tuners}
    if seeds is not None:
        data["tune"]["seeds"] = seeds
    if iterations is not None:
        data["tune"]["iterations"] = iterations
    return data


def _demo_command(args) -> int:
    tuners = [t.strip() for t in args.tuners.split(",") if t.strip()] if args.tuners else None
    data = demo_config(args.out, args.work_dir, tuners, args.seeds, args.iterations)
    config = check_config(data, path="minismt demo")
    if args.print_config:
        print(dump_toml(data), end="")
        return 0
    check_output_dirs(config.work_dir, "--work-dir" if args.work_dir else "the demo's work folder (--work-dir)",
                      config.report_dir, "--out")
    if not args.quiet:
        print(f"minismt demo: report to {config.report_dir}, work folder {config.work_dir}", file=sys.stderr)
    report = run_pipeline(config, progress=not args.quiet, echo=not args.quiet)
    _print_summary(report, config.report_dir, config.work_dir)
    return 0


def add_pipeline_commands(sub) -> None:
    """Register ``pipeline`` and ``demo`` on the ``minismt`` subparsers object."""
    p = sub.add_parser(
        "pipeline", help="corpus -> train -> tune (tuners x seeds) -> test -> report, cached and resumable",
        formatter_class=FORMATTER,
        description=_text(
            "Run an experiment described by a TOML file: get the corpus (the built-in synthetic one, a "
            "registered corpus such as multi30k-de-en, downloaded or copied with 'from', or a local "
            "folder), train a phrase-based or Hiero model ([train] model), tune it with one tuner or "
            "several for a comparison, each over N seeds, decode the test set with every tuned weight "
            "vector and score it with sacrebleu (BLEU with its signature, chrF2, TER), test the "
            "differences with paired "
            "bootstrap resampling (sacrebleu's implementation), and write a report.",
            "Every step keeps its outputs in the work folder under a key, the hash of its "
            "configuration and of its inputs; a step that finished before is skipped ('cached' in "
            "WORK/pipeline.log), so rerunning after a change redoes only what the change affects. A "
            "run that was killed or interrupted (Ctrl-C) resumes where it stopped: each tuning run "
            "continues from its last finished iteration and ends with the weights an uninterrupted "
            "run gives.",
            "The report folder gets report.json (every number: per tuner, seed and iteration dev "
            "BLEU, test BLEU/chrF/TER, signatures, timings, p-values), report.md (the tables), "
            "dev_bleu.png (convergence, mean over seeds), test_bleu.png (spread over seeds), "
            "error_surface.png (MERT's BLEU along one weight) and hypergraph.png (a short test "
            "sentence's search graph), and a copy of pipeline.log.",
            "Example configuration:\n\n"
            "  [corpus]\n"
            "  name = \"synthetic\"     # or \"multi30k-de-en\" (from = \"../shared/corpora/multi30k\"), or \"local\"\n"
            "  size = 3000\n"
            "  dev = 150\n"
            "  test = 200\n\n"
            "  [tune]\n"
            "  tuners = [\"mert\", \"pro\", \"apro\", \"kbmira\"]\n"
            "  seeds = 3\n"
            "  iterations = 5\n"
            "  stack = 50\n\n"
            "  [tune.params.apro]\n"
            "  C = 0.1\n\n"
            "  [output]\n"
            "  work_dir = \"work\"        # relative paths: from the config file's folder\n"
            "  report_dir = \"report\"",
            "Sections and keys (an unknown key is an error that lists the valid ones):\n\n"
            + describe_schema()))
    p.add_argument("config", metavar="CONFIG.toml", help="the experiment's configuration")
    p.add_argument("--work-dir", metavar="DIR", help="override output.work_dir (where the steps' outputs go)")
    p.add_argument("--out", metavar="DIR", help="override output.report_dir (where the report goes)")
    p.add_argument("--check", action="store_true",
                   help="only check the configuration and print it with every default filled in")
    p.add_argument("--dask-scheduler", metavar="ADDRESS",
                   help="decode the tuning runs' dev sets and the test set on a Dask distributed cluster (e.g. "
                        "tcp://host:8786) instead of local processes; each worker reads the model at the same "
                        "path (work_dir on a shared file system). The results and their keys do not depend on it")
    p.add_argument("--quiet", action="store_true", help="no progress bars or log lines on stderr (the log "
                   "file is still written)")
    p.set_defaults(run=_pipeline_command)

    d = sub.add_parser(
        "demo", help="the whole pipeline on the built-in synthetic corpus: a tuner comparison in minutes",
        formatter_class=FORMATTER,
        description=_text(
            "Run 'minismt pipeline' on the synthetic corpus shipped with minismt (no download): "
            "3,000 training pairs of a toy language pair with reordering, inflection and ambiguity "
            "(see 'minismt corpora synth'), 150 dev and 200 test sentences; train a phrase-based "
            "model with a 4-gram LM (the default, as minismt train); tune it with MERT (5 random "
            "restarts), PRO, APRO, k-best MIRA and optimized online ranking (O-ORO), three seeds "
            "each where the tuner is random (APRO is "
            "deterministic and runs once), 5 iterations of 100-best lists, two runs at a time; "
            "decode the test set with every result and print a table of tuners x BLEU (dev BLEU, "
            "test BLEU mean ± sd over seeds and its range, chrF2, TER, the paired-bootstrap p-value "
            "against MERT, tuning time).",
            "The report (report.md, report.json, dev_bleu.png, test_bleu.png, error_surface.png, "
            "hypergraph.png) goes to the current folder or --out DIR, the steps' outputs to a work "
            "folder (--work-dir; printed at the end); a second run reuses them and takes seconds. "
            "Measured on 2 cores: 54 s once numba has cached its compiled kernels, 149 s the first "
            "time on a machine (compiling them), 5 s for a rerun.",
            "--print-config prints the demo's configuration as TOML: a starting point for your own "
            "'minismt pipeline' experiments."))
    d.add_argument("--out", default=".", metavar="DIR", help="report folder (default: the current folder)")
    d.add_argument("--work-dir", metavar="DIR", help="where the steps' outputs go (default "
                   "$XDG_CACHE_HOME/minismt/demo-HASH, ~/.cache when XDG_CACHE_HOME is unset; one per --out)")
    d.add_argument("--tuners", metavar="LIST", help="comma-separated tuners instead of the demo's five, e.g. mert,apro")
    d.add_argument("--seeds", type=int, metavar="N", help="seeds per tuner (default 3)")
    d.add_argument("--iterations", type=int, metavar="N", help="tuning iterations (default 5)")
    d.add_argument("--print-config", action="store_true", help="print the demo's configuration as TOML and exit")
    d.add_argument("--quiet", action="store_true", help="no progress bars or log lines on stderr")
    d.set_defaults(run=_demo_command)
