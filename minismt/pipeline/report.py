"""The pipeline's report: report.json (every number), report.md (tables) and PNG figures.

Figures are drawn with matplotlib's object API on the Agg canvas (no display, no
global backend change), one column of a two-column paper wide (3.3 inches, 300 dpi);
each figure's title is also its heading in report.md:

- ``dev_bleu.png``: dev BLEU of the weights decoded at each iteration, mean over
  seeds per tuner with the min-max band (the papers' convergence figures);
- ``test_bleu.png``: test BLEU of every run (points), with mean and standard deviation
  where a tuner has several runs; the y range is the tuners', the untuned system a
  dashed line within it or a note when it lies outside;
- ``error_surface.png``: corpus BLEU of the model-best hypotheses of the final
  accumulated k-best list of MERT's run (else the first run that kept one) along
  ``w + x d`` for the coordinate direction ``d`` of one feature, on a fine grid of
  ``x`` (:meth:`minismt.kbest.KBest.bleu` at every point) - piecewise constant, as the
  line search of Och (2003) sees it;
- ``hypergraph.png``: the search graph of one short test sentence under the tuned
  weights, pruned to its best paths (max-marginal pruning), in layers by the number
  of source words translated, each state labelled with its coverage, the best
  derivation in red (:func:`minismt.hypergraph.draw.draw_layered`); for a Hiero model its
  forest (:func:`chart_forest_figure`): chart items in layers by span, edges with two tails.

BLEU is in percent (0-100) everywhere in the report.

The figures import matplotlib (0.29 s) and the engine modules they draw from (the decoder,
k-best lists, hypergraph drawing: 0.31 s) when they are drawn; the tables (:func:`summary_rows`,
:func:`format_table`, :func:`markdown`) need numpy only.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import textwrap
import time

import numpy as np

from minismt import __version__
from minismt.errors import InputError
from minismt.manifest import load_manifest
from minismt.io import atomic_write, read_lines
from minismt.pipeline.significance import paired_bootstrap

MAX_DRAWN_EDGES = 16
SURFACE_POINTS = 1001
UNTUNED = "untuned"
COLUMN_WIDTH = 3.3  # inches: one column of a two-column paper (about 8 cm)
DPI = 300
STYLE = {"font.size": 7, "axes.titlesize": 7.5, "axes.labelsize": 7, "xtick.labelsize": 6.5,
         "ytick.labelsize": 6.5, "legend.fontsize": 6.5, "figure.titlesize": 7.5}
FILLED, EMPTY = "■", "□"


def _stats(values) -> dict:
    values = [float(v) for v in values if v is not None]
    if not values:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0}
    array = np.asarray(values)
    return {"mean": float(array.mean()), "std": float(array.std(ddof=1)) if array.size > 1 else 0.0,
            "min": float(array.min()), "max": float(array.max()), "n": int(array.size)}


def _test_numbers(result: dict) -> dict:
    keys = ("bleu", "chrf", "ter", "bleu_precisions", "bleu_bp", "sys_len", "ref_len", "lines",
            "decode_seconds", "words_per_second")
    return {k: result.get(k) for k in keys}


def _runs_of(tuner: str, specs, tests) -> list[dict]:
    runs = []
    for spec in specs:
        if spec["tuner"] != tuner:
            continue
        tuned = spec["outcome"].result
        tested = tests[spec["key"]].result
        runs.append({
            "seed": spec["seed"], "seeded": spec["seeded"], "key": spec["key"],
            "run_dir": spec["run_dir"],
            "iterations": [{**{k: v for k, v in r.items() if k not in ("dev_bleu", "tuned_bleu")},
                            "dev_bleu": 100 * r["dev_bleu"], "tuned_bleu": 100 * r["tuned_bleu"]}
                           for r in tuned["history"]],
            "best_dev_bleu": 100 * tuned["best_dev_bleu"] if tuned["best_dev_bleu"] is not None else None,
            "tune_seconds": spec["outcome"].ran_seconds, "iteration_seconds": tuned["tune_seconds"],
            "weights": tuned["weights"],
            "test": _test_numbers(tested),
            "test_hyp": os.path.join(tests[spec["key"]].folder, tested["hyp"]),
        })
    return runs


def _representative(runs: list[dict]) -> dict:
    """The run whose dev BLEU is best (chosen on dev, never on test); the first on ties."""
    return max(runs, key=lambda r: (r["best_dev_bleu"] if r["best_dev_bleu"] is not None else -1.0,
                                    -runs.index(r)))


def write_report(pipeline, corpus, model, specs, tests, began: float) -> dict:
    """Summaries, significance and figures of a finished pipeline; writes the report folder."""
    config = pipeline.config
    out = os.path.abspath(config.report_dir)
    os.makedirs(out, exist_ok=True)
    test_cfg = config.test
    report_began = time.perf_counter()
    references = read_lines(os.path.join(corpus.folder, "test.tgt"))

    tuners = {}
    for tuner in config.tune["tuners"]:
        runs = _runs_of(tuner, specs, tests)
        rep = _representative(runs)
        distinct = list({r["key"]: r for r in runs}.values())  # a tuner without randomness: one run
        tuners[tuner] = {
            "params": config.tune["params"].get(tuner, {}),
            "seeded": runs[0]["seeded"],
            "runs": runs,
            "representative_seed": rep["seed"],
            "summary": {
                "test_bleu": _stats(r["test"]["bleu"] for r in distinct),
                "test_chrf": _stats(r["test"]["chrf"] for r in distinct),
                "test_ter": _stats(r["test"]["ter"] for r in distinct),
                "best_dev_bleu": _stats(r["best_dev_bleu"] for r in distinct),
                "tune_seconds": _stats(r["tune_seconds"] for r in distinct),
                "note": "over distinct runs (a tuner without randomness has one)",
            },
        }
    baseline = None
    if UNTUNED in tests:
        outcome = tests[UNTUNED]
        baseline = {"test": _test_numbers(outcome.result),
                    "test_hyp": os.path.join(outcome.folder, outcome.result["hyp"]),
                    "dev_bleu": next((100 * s["outcome"].result["history"][0]["dev_bleu"] for s in specs
                                      if s["outcome"].result["history"]), None)}

    # significance between the representative runs (and the untuned system)
    systems = [(tuner, read_lines(next(r for r in info["runs"] if r["seed"] == info["representative_seed"])
                                  ["test_hyp"])) for tuner, info in tuners.items()]
    if baseline is not None:
        systems.append((UNTUNED, read_lines(baseline["test_hyp"])))
    significance = None
    if len(systems) > 1:
        pipeline.log(f"report: paired bootstrap ({test_cfg['bootstrap_samples']} resamples) between "
                     f"{len(systems)} systems")
        significance = paired_bootstrap(systems, references, n_samples=test_cfg["bootstrap_samples"],
                                        seed=test_cfg["bootstrap_seed"], tokenize=test_cfg["tokenize"],
                                        lowercase=test_cfg["lowercase"],
                                        all_pairs=test_cfg["significance"] == "all")
        significance["systems"] = {t: {"seed": info["representative_seed"]} for t, info in tuners.items()}
        significance["note"] = ("each tuner is represented by its run with the best dev BLEU; p is the "
                                "probability that the difference is due to chance")

    report = {
        "minismt": __version__, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count()},
        "config_file": config.source, "config": config.to_dict(),
        "work_dir": pipeline.work, "log": pipeline.log_path,
        "corpus": {k: v for k, v in corpus.result.items() if k != "digest"},
        "model": {"features": model.result["features"], "training_steps": model.result["steps"]},
        "test_signature": next(iter(tests.values())).result["signature"] if tests else None,
        "baseline": baseline,
        "tuners": tuners,
        "significance": significance,
        "steps": [{"step": o.step, "label": o.label, "key": o.key, "folder": o.folder, "cached": o.cached,
                   "seconds": o.seconds, "ran_seconds": o.ran_seconds} for o in pipeline.steps],
        "figures": {},
    }
    if config.output["figures"]:
        report["figures"] = draw_figures(report, pipeline, specs, model, corpus, out)
    distinct_steps = {(o.step, o.key): o for o in pipeline.steps}.values()  # two systems can share a test
    report["timings"] = {
        **{f"{step}_seconds": round(sum(o.seconds for o in distinct_steps if o.step == step), 3)
           for step in ("corpus", "train", "tune", "test")},
        "report_seconds": round(time.perf_counter() - report_began, 3),
        "total_seconds": round(time.perf_counter() - began, 3),
        "note": "seconds spent in this invocation; cached steps count 0",
    }
    with atomic_write(os.path.join(out, "report.json")) as handle:
        json.dump(report, handle, indent=1, sort_keys=False, default=float)
        handle.write("\n")
    with atomic_write(os.path.join(out, "report.md")) as handle:
        handle.write(markdown(report))
    return report


# ---- tables ------------------------------------------------------------------------------------------
def _pm(stats: dict, digits: int = 2) -> str:
    if stats["mean"] is None:
        return "-"
    if stats["n"] <= 1:
        return f"{stats['mean']:.{digits}f}"
    return f"{stats['mean']:.{digits}f} ± {stats['std']:.{digits}f}"


def _p_value(report: dict, a: str, b: str, metric: str = "BLEU") -> float | None:
    significance = report.get("significance") or {}
    for pair in significance.get("pairs", []):
        if pair["metric"] == metric and {pair["a"], pair["b"]} == {a, b}:
            return pair["p_value"]
    return None


def _runs_cell(info: dict) -> str:
    """How many runs a tuner had: ``1 (xN)`` when one run without randomness stands for N seeds."""
    if not info["seeded"] and len(info["runs"]) > 1:
        return f"1 (x{len(info['runs'])})"
    return str(len({r["key"] for r in info["runs"]}))


def _several_runs(report: dict) -> bool:
    """Does some tuner have more than one distinct run (so that there are means and deviations)?"""
    return any(len({r["key"] for r in info["runs"]}) > 1 for info in report["tuners"].values())


def summary_rows(report: dict) -> list[list[str]]:
    """The tuners x BLEU table (header first): the demo prints it, report.md holds it."""
    names = list(report["tuners"])
    first = names[0] if names else None
    header = ["tuner", "runs", "dev BLEU", "test BLEU", "min-max", "chrF2", "TER",
              f"p vs {first}" if first else "p", "tune s"]
    rows = [header]
    base = report.get("baseline")
    if base is not None:
        p = _p_value(report, UNTUNED, first) if first else None
        rows.append([UNTUNED, "-", "-" if base["dev_bleu"] is None else f"{base['dev_bleu']:.2f}",
                     f"{base['test']['bleu']:.2f}", "", f"{base['test']['chrf']:.2f}",
                     f"{base['test']['ter']:.2f}", "-" if p is None else f"{p:.3f}", "-"])
    for name, info in report["tuners"].items():
        s = info["summary"]
        runs = _runs_cell(info)
        p = None if name == first else _p_value(report, name, first)
        spread = (f"{s['test_bleu']['min']:.2f}-{s['test_bleu']['max']:.2f}" if s["test_bleu"]["n"] > 1 else "")
        rows.append([name, runs, _pm(s["best_dev_bleu"]), _pm(s["test_bleu"]), spread, _pm(s["test_chrf"]),
                     _pm(s["test_ter"]), "-" if p is None else f"{p:.3f}", f"{s['tune_seconds']['mean']:.1f}"])
    return rows


def format_table(rows: list[list[str]]) -> str:
    """Plain-text columns (first column left-aligned, the others right-aligned)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for k, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _md_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join("---" if i == 0 else "---:"
                                                             for i in range(len(rows[0]))) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def markdown(report: dict) -> str:
    config = report["config"]
    corpus = report["corpus"]
    pairs = corpus.get("pairs", {})
    parts = ["# minismt pipeline report", ""]
    parts.append(f"Corpus **{corpus.get('name')}**: {pairs.get('train')} training, {pairs.get('dev')} dev and "
                 f"{pairs.get('test')} test pairs. Tuning: {config['tune']['iterations']} iterations at most, "
                 f"{config['tune']['kbest']}-best lists, stack {config['tune']['stack']}, seeds "
                 f"{config['tune']['seeds']}. Test: stack {config['test']['stack']}. BLEU in percent; dev BLEU "
                 f"is the best iteration's; "
                 + ("test numbers are mean ± standard deviation over seeds. " if _several_runs(report)
                    else "one run per tuner. ")
                 + f"Created {report['created']} by minismt {report['minismt']}.")
    rows = summary_rows(report)
    parts += ["", "## Tuners", "", _md_table(rows), ""]
    if any("(x" in row[1] for row in rows[1:]):
        parts.append("A tuner without randomness runs once and stands for every seed (runs `1 (xN)`).")
    parts.append("p: paired bootstrap on test BLEU against the first tuner, between the runs with the best dev "
                 "BLEU. tune s: seconds the tuning run took (its step in the Timings table).")
    parts += ["", "## Runs", ""]
    rows = [["tuner", "seed", "iterations", "best dev BLEU", "test BLEU", "chrF2", "TER", "tune s"]]
    for name, info in report["tuners"].items():
        for run in info["runs"]:
            rows.append([name, str(run["seed"]), str(len(run["iterations"])), f"{run['best_dev_bleu']:.2f}",
                         f"{run['test']['bleu']:.2f}", f"{run['test']['chrf']:.2f}", f"{run['test']['ter']:.2f}",
                         f"{run['tune_seconds']:.1f}"])
    parts += [_md_table(rows), ""]
    parts += ["## Dev BLEU per iteration (mean over seeds)", ""]
    longest = max((len(r["iterations"]) for info in report["tuners"].values() for r in info["runs"]), default=0)
    rows = [["tuner"] + [str(i) for i in range(longest)]]
    for name, info in report["tuners"].items():
        row = [name]
        for i in range(longest):
            values = [r["iterations"][i]["dev_bleu"] for r in info["runs"] if i < len(r["iterations"])]
            row.append(f"{np.mean(values):.2f}" if values else "")
        rows.append(row)
    parts += [_md_table(rows), ""]
    significance = report.get("significance")
    if significance:
        parts += ["## Paired bootstrap", ""]
        parts.append(f"{significance['samples']} resamples, seed {significance['seed']} "
                     f"({significance['implementation']}); {significance['note']}.")
        parts.append("")
        rows = [["A", "B", "metric", "A", "B", "p"]]
        for pair in significance["pairs"]:
            rows.append([pair["a"], pair["b"], pair["metric"], f"{pair['score_a']:.2f}", f"{pair['score_b']:.2f}",
                         f"{pair['p_value']:.4f}"])
        parts += [_md_table(rows), ""]
        parts += ["Signatures:", ""] + [f"- {m}: `{s}`" for m, s in significance["signatures"].items()] + [""]
    parts += ["## Test metrics", "", f"sacrebleu: `{report['test_signature']}`", ""]
    figures = report.get("figures") or {}
    if figures:
        parts += ["## Figures", ""]
        for name, info in figures.items():
            if info.get("file"):
                parts += [f"### {info.get('title', name)}", "", f"![{name}]({info['file']})", ""]
                if info.get("note"):
                    parts += [info["note"], ""]
    timings = report.get("timings") or {}
    parts += ["## Timings", "", f"This invocation: {timings.get('total_seconds', 0):.1f} s (corpus "
              f"{timings.get('corpus_seconds', 0):.1f}, train {timings.get('train_seconds', 0):.1f}, tune "
              f"{timings.get('tune_seconds', 0):.1f}, test {timings.get('test_seconds', 0):.1f}, report "
              f"{timings.get('report_seconds', 0):.1f}); cached steps count 0."
              + (f" The tune figure adds up the tuning runs' own times; up to {config['tune']['parallel']} ran "
                 f"at a time, so it can exceed the total." if config["tune"]["parallel"] > 1 else ""), ""]
    rows = [["step", "cached", "seconds now", "seconds when it ran", "key"]]
    for step in report["steps"]:
        ran = step.get("ran_seconds")
        rows.append([step["label"], "yes" if step["cached"] else "no", f"{step['seconds']:.1f}",
                     "-" if ran is None else f"{ran:.1f}", step["key"][:12]])
    parts += [_md_table(rows), ""]
    return "\n".join(parts)


# ---- figures ---------------------------------------------------------------------------------------
def _styled(build):
    """Build a figure under :data:`STYLE` (font sizes for a figure one column wide)."""
    @functools.wraps(build)
    def wrapper(*args, **kwargs):
        import matplotlib
        with matplotlib.rc_context(STYLE):
            return build(*args, **kwargs)
    return wrapper


def _figure(height: float, layout: str | None = "constrained"):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    figure = Figure(figsize=(COLUMN_WIDTH, height), dpi=DPI, layout=layout)
    FigureCanvasAgg(figure)
    return figure


def _title(ax, title: str) -> None:
    """The title, wrapped to the figure's width (report.md's heading has the same words)."""
    ax.set_title(textwrap.fill(title, 46))


def draw_figures(report: dict, pipeline, specs, model, corpus, out: str) -> dict:
    """Every figure; a figure that cannot be drawn is logged and left out, the others still are."""
    output = pipeline.config.output
    builders = {"dev_bleu": lambda: dev_bleu_figure(report),
                "test_bleu": lambda: bleu_by_tuner_figure(report),
                "error_surface": lambda: error_surface_figure(report, output["surface_feature"]),
                "hypergraph": lambda: _hypergraph(report, pipeline, model, corpus)}
    figures = {}
    for name, build in builders.items():
        if name == "hypergraph" and not output["hypergraph"]:
            continue
        try:
            figure, info = build()
            figure.savefig(os.path.join(out, f"{name}.png"))
            info = {"file": f"{name}.png", **info}
        except Exception as err:  # a figure must not lose the report; say why it is missing
            pipeline.log(f"report: figure {name} not drawn ({type(err).__name__}: {err})")
            info = {"file": None, "error": f"{type(err).__name__}: {err}"}
        figures[name] = info
    return figures


def _colors(n: int):
    from matplotlib import colormaps
    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


@_styled
def dev_bleu_figure(report: dict):
    """Dev BLEU per iteration, mean over each tuner's runs with the min-max band: (Figure, info)."""
    from matplotlib.ticker import MaxNLocator
    several = _several_runs(report)
    title = "Dev BLEU per iteration" + (" (mean over seeds, band: min-max)" if several else "")
    figure = _figure(2.6)
    ax = figure.subplots()
    data = {}
    for color, (name, info) in zip(_colors(len(report["tuners"])), report["tuners"].items()):
        unique = list({r["key"]: r for r in info["runs"]}.values())
        longest = max(len(r["iterations"]) for r in unique)
        mean, low, high = [], [], []
        for i in range(longest):
            values = [r["iterations"][i]["dev_bleu"] for r in unique if i < len(r["iterations"])]
            mean.append(float(np.mean(values)))
            low.append(min(values))
            high.append(max(values))
        x = np.arange(longest)
        label = f"{name} ({len(unique)} runs)" if len(unique) > 1 else name
        ax.plot(x, mean, marker="o", markersize=3, lw=1.0, color=color, label=label)
        if len(unique) > 1:
            ax.fill_between(x, low, high, color=color, alpha=0.15, linewidth=0)
        data[name] = {"mean": mean, "min": low, "max": high}
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("iteration (weights decoded; 0 = untuned)")
    ax.set_ylabel("dev BLEU (%)")
    _title(ax, title)
    ax.grid(alpha=0.3)
    ax.legend()
    return figure, {"title": title, "series": data}


@_styled
def bleu_by_tuner_figure(report: dict):
    """Test BLEU of every tuner's runs (and their mean ± sd when a tuner has several): (Figure, info).

    The y range is the tuners' (where their differences show); the untuned system is a dashed line
    if it falls in that range, else a note in the corner."""
    names = list(report["tuners"])
    several = _several_runs(report)
    seeds = report["config"]["tune"]["seeds"]
    title = ("Test BLEU per tuner (points: runs, one per seed; bar: mean ± sd)" if several
             else f"Test BLEU per tuner (one run each, seed {seeds[0]})" if len(seeds) == 1
             else "Test BLEU per tuner (one run each)")
    figure = _figure(2.4)
    ax = figure.subplots()
    rng = np.random.default_rng(0)
    shown, labelled = [], False
    for k, (color, name) in enumerate(zip(_colors(len(names)), names)):
        values = [r["test"]["bleu"] for r in {r["key"]: r for r in report["tuners"][name]["runs"]}.values()]
        s = report["tuners"][name]["summary"]["test_bleu"]
        spread = 0.08 if len(values) > 1 else 0.0
        ax.scatter(k + rng.uniform(-spread, spread, len(values)), values, color=color, s=14, zorder=3,
                   alpha=0.8 if several else 1.0, label="run (one per seed)" if several and k == 0 else None)
        if len(values) > 1:
            ax.errorbar([k + 0.25], [s["mean"]], yerr=[s["std"]], fmt="_", color="black", markersize=8,
                        capsize=3, lw=0.9, zorder=3, label=None if labelled else "mean ± sd")
            labelled = True
        ax.annotate(f"{s['mean']:.2f}", (k + (0.3 if len(values) > 1 else 0.1), s["mean"]), fontsize=6,
                    va="center", ha="left", xytext=(4 if len(values) > 1 else 0, 0), textcoords="offset points")
        shown += values + ([s["mean"] - s["std"], s["mean"] + s["std"]] if len(values) > 1 else [])
    low, high = min(shown), max(shown)
    pad = max(0.15 * (high - low), 0.5)
    ax.set_ylim(low - pad, high + pad)
    base = report.get("baseline")
    untuned = None
    if base is not None:
        untuned = base["test"]["bleu"]
        if low - pad <= untuned <= high + pad:
            ax.axhline(untuned, color="grey", linestyle="--", lw=0.9, label=f"untuned ({untuned:.2f})")
        else:
            where = "below" if untuned < low else "above"
            ax.text(0.98, 0.03 if where == "below" else 0.97, f"untuned: {untuned:.2f} ({where} this range)",
                    transform=ax.transAxes, ha="right", va="bottom" if where == "below" else "top",
                    fontsize=6.5, color="dimgrey", style="italic")
    ax.set_xticks(range(len(names)), names)
    ax.set_xlim(-0.5, len(names) - 0.3)
    ax.set_xlabel("tuner")
    ax.set_ylabel("test BLEU (%)")
    _title(ax, title)
    ax.grid(axis="y", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best")
    return figure, {"title": title, "untuned": untuned, "ylim": list(ax.get_ylim())}


def error_surface(run_dir: str, feature: str, points: int = SURFACE_POINTS) -> dict:
    """Corpus BLEU (%) of the model-best of a run's final accumulated k-best list along one weight.

    The weights are the tuner's output on that list (the checkpoint's ``tuner_weights``; the run's next
    weights, after its step search, in checkpoints that have none), so x = 0 is where the tuner stopped;
    ``x`` spans 3 times the larger of the weight and the mean absolute weight on
    each side.
    """
    from minismt.features import FeatureSpace
    from minismt.kbest import KBest
    path = os.path.join(run_dir, "checkpoint.json")
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError) as err:
        raise InputError(f"no readable checkpoint ({err})", path) from None
    space = FeatureSpace.from_json(state["space"])
    parts = [KBest.load(os.path.join(run_dir, f"accumulated.{state['iteration']}.{k}.npz"), space)
             for k in range(state["parts"])]
    if not parts:
        raise InputError("the run kept no k-best list (a hypergraph or online tuner?)", run_dir)
    kbest = parts[0]
    for part in parts[1:]:
        kbest = kbest.merge(part)
    if feature not in space.names:
        raise InputError(f"output.surface_feature = {feature!r}", expected="one of " + ", ".join(space.names))
    w = np.asarray(state.get("tuner_weights") or state["weights"], dtype=np.float64)
    index = space.names.index(feature)
    direction = np.zeros_like(w)
    direction[index] = 1.0
    scale = 3.0 * max(abs(w[index]), float(np.abs(w[: space.n_dense]).mean()), 1e-3)
    xs = np.linspace(-scale, scale, points)
    bleu = np.array([100.0 * kbest.bleu(w + x * direction) for x in xs])
    best = int(np.argmax(bleu))
    return {"feature": feature, "weight": float(w[index]), "x": xs.tolist(), "bleu": bleu.tolist(),
            "bleu_at_weights": float(100.0 * kbest.bleu(w)), "best_x": float(xs[best]),
            "best_bleu": float(bleu[best]), "hypotheses": kbest.n_hypotheses, "sentences": kbest.n_instances,
            "iteration": state["iteration"]}


@_styled
def error_surface_figure(report: dict, feature: str):
    """The error surface (:func:`error_surface`) of MERT's run, else of the first tuner whose run kept
    a k-best list; its title and report.md's heading name the tuner: (Figure, info)."""
    tuners = list(report["tuners"])
    surface = None
    for tuner in sorted(tuners, key=lambda t: t != "mert"):  # hypergraph tuners keep no k-best list
        run = report["tuners"][tuner]["runs"][0]
        if any(name.startswith("accumulated.") for name in os.listdir(run["run_dir"])):
            surface = error_surface(run["run_dir"], feature)
            break
    if surface is None:
        raise InputError("no tuning run kept a k-best list (hypergraph tuners keep none)",
                         expected="an n-best tuner such as mert among tune.tuners")
    seed = run["seed"]
    title = f"Error surface along {feature} of {tuner}'s final k-best list (seed {seed})"
    figure = _figure(2.6)
    ax = figure.subplots()
    values = surface["weight"] + np.asarray(surface["x"])
    ax.plot(values, surface["bleu"], color="tab:blue", linewidth=1.0, drawstyle="steps-mid",
            label="BLEU of the model-best hypotheses")
    ax.axvline(surface["weight"], color="tab:red", linestyle="--", lw=0.9,
               label=f"{tuner}'s weight {surface['weight']:.4f} (BLEU {surface['bleu_at_weights']:.2f})")
    ax.set_xlabel(f"weight of {feature} (the others fixed)")
    ax.set_ylabel("corpus BLEU (%)")
    _title(ax, title)
    ax.grid(alpha=0.3)
    figure.legend(loc="outside lower center")
    note = (f"{surface['sentences']} sentences, {surface['hypotheses']} hypotheses; BLEU of the model-best "
            f"hypotheses at {len(surface['x'])} points, piecewise constant as in MERT's line search.")
    if tuner != "mert":
        note += f" MERT was not run: this is {tuner}'s k-best list, as MERT's line search would see it."
    return figure, {"title": title, "tuner": tuner, "seed": seed, "note": note, **surface}


def coverage_labels(result) -> list[str]:
    """Each search-graph node's source coverage, one square per source word (■ translated, □ not yet)."""
    return ["".join(FILLED if c else EMPTY for c in row) for row in result.coverage()]


def _pick_sentence(sentences: list[str], minimum: int = 4) -> int:
    lengths = [len(s.split()) for s in sentences]
    candidates = [i for i, n in enumerate(lengths) if n >= minimum] or list(range(len(sentences)))
    return min(candidates, key=lambda i: (lengths[i], i))


def _best_edges(graph, w, limit: int):
    """The subgraph of the edges with the highest max-marginals, at most ``limit`` of them (more only on
    ties). It is a union of whole derivations: every edge of the best derivation through an edge has a
    max-marginal at least as high. Returns it and its margin below the Viterbi score."""
    marginals = graph.max_marginals(w)
    order = np.sort(marginals[np.isfinite(marginals)])[::-1]
    if order.size == 0:
        return graph, 0.0
    k = min(limit, order.size)
    while k > 1 and np.count_nonzero(marginals >= order[k - 1]) > limit:
        k -= 1
    cut = order[k - 1]
    return graph.subgraph(marginals >= cut), float(order[0] - cut)


def _graph_figure(height: float, title: str, best: str, legend: list):
    """A figure for a drawn hypergraph: the title above, the best derivation (red) and ``legend``'s
    entries below; returns it and the axes between."""
    from matplotlib.lines import Line2D
    figure = _figure(height, layout=None)
    handles = [Line2D([], [], color="tab:red", lw=1.4, label=f"best derivation: {best}")] + legend
    figure.legend(handles=handles, loc="lower center", frameon=False, handlelength=1.6)
    figure.suptitle(textwrap.fill(title, 52), y=0.99, va="top")
    bottom, top = 0.42 / figure.get_figheight(), 1 - 0.3 / figure.get_figheight()
    return figure, figure.add_axes((0.02, bottom + 0.02, 0.96, top - bottom - 0.02))


@_styled
def search_graph_figure(result, weights, tuner: str, limit: int = MAX_DRAWN_EDGES):
    """The search graph of one decoded sentence (a :class:`minismt.decode.DecodeResult`), pruned to
    the ``limit`` edges with the best max-marginals, layer by layer from the empty coverage to the
    goal, the best derivation in red: (Figure, info)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from minismt.hypergraph.draw import draw_layered
    graph = result.hypergraph.replace(node_cat=coverage_labels(result))
    pruned, margin = _best_edges(graph, weights, limit)
    best = pruned.viterbi(weights)
    labels = list(pruned.node_cat)
    layers = [label.count(FILLED) for label in labels]
    layers[pruned.goal] += 1
    labels[pruned.goal] = "goal"
    words = [re.sub(r"\[\d+\]", "", pruned.edge_target(e)).strip() for e in range(pruned.n_edges)]
    source = " ".join(result.source)
    title = f"Search graph of “{source}” under {tuner}'s weights"
    figure, ax = _graph_figure(0.5 * (max(layers) + 1) + 1.0, title, best.text, [
        Line2D([], [], color="#8c8c8c", lw=0.7, label="other edges, labelled with the words they add"),
        Patch(fc="white", ec="#666666", lw=0.6, label=f"state: {FILLED} source word translated, {EMPTY} not yet")])
    draw_layered(pruned, ax, labels, layers=layers, edge_labels=words, highlight=best.edges)
    note = (f"The {pruned.n_edges} of {graph.n_edges} edges with the best max-marginals (a union of whole "
            f"derivations). A box is a decoder state; its squares are the source words "
            f"(“{source}”), {FILLED} translated, {EMPTY} not yet; layer k holds the states with k words "
            f"translated. An edge adds a phrase's translation (its label); red: the best derivation, "
            f"“{best.text}”.")
    return figure, {"title": title, "source": source, "translation": result.best, "best_derivation": best.text,
                    "nodes": graph.n_nodes, "edges": graph.n_edges, "drawn_nodes": pruned.n_nodes,
                    "drawn_edges": pruned.n_edges, "max_marginal_margin": margin, "note": note}


@_styled
def chart_forest_figure(result, source: list[str], weights, tuner: str, limit: int = MAX_DRAWN_EDGES):
    """The forest of one sentence the Hiero chart decoder translated (a
    :class:`minismt.decode.hiero.HieroResult`), pruned to the ``limit`` edges with the best
    max-marginals, in layers by span width from the words to the goal: each item labelled with its
    non-terminal and the source words it covers, each edge with its rule's target side (``[1]``,
    ``[2]``: the items of its non-terminals, the two tails of a two-tail edge), the best derivation in
    red: (Figure, info)."""
    from matplotlib.lines import Line2D
    from minismt.hypergraph.draw import draw_layered
    graph = result.hypergraph.replace(node_cat=[f"{label} {start} {end}" for label, (start, end)
                                                in zip(result.node_labels, result.node_spans.tolist())])
    pruned, margin = _best_edges(graph, weights, limit)
    best = pruned.viterbi(weights)
    words = ["<s>"] + list(source) + ["</s>"]
    labels, widths = [], []
    for v, cat in enumerate(pruned.node_cat):
        label, start, end = cat.split()
        start, end = int(start), int(end)
        if v == pruned.goal:
            labels.append("goal")
        elif label == "S":            # the glue rules' items: <s> and the words 1 .. end - 1
            labels.append("S <s>" if end == 1 else f"S 1-{end - 1}")
        else:                         # a rule-table rule's item: its source words (and a leaf's translation)
            text = " ".join(words[start:end]) if end - start <= 2 else f"{words[start]} … {words[end - 1]}"
            first = pruned.in_offsets[v]
            if pruned.in_offsets[v + 1] > first and pruned.edge_tails(first).size == 0:
                text += "\n→ " + pruned.edge_target(first)
            labels.append(text)
        widths.append(end - start)
    layer_of = {w: k for k, w in enumerate(sorted(set(widths)))}
    layers = [layer_of[w] for w in widths]
    two_tails = sum(pruned.edge_tails(e).size == 2 for e in range(pruned.n_edges))
    sentence = " ".join(source)
    title = f"Hiero forest of “{sentence}” under {tuner}'s weights"
    figure, ax = _graph_figure(0.55 * (max(layers) + 1) + 1.0, title, best.text, [
        Line2D([], [], color="#8c8c8c", lw=0.7, label="other edges, labelled with their rule's target")])
    draw_layered(pruned, ax, labels, layers=layers, edge_labels=[pruned.edge_target(e) for e in range(pruned.n_edges)],
                 highlight=best.edges, fontsize=6.0)
    note = (f"The {pruned.n_edges} of {graph.n_edges} edges with the best max-marginals (a union of whole "
            f"derivations), {two_tails} of them with two tails. A box is a chart item: the source words an X "
            f"item (a rule-table rule's) covers (→ its translation where a rule made it from words alone; "
            f"two items over the same words differ in their LM state), or “S 1-k”, the glue rules' item "
            f"over <s> and words 1 to k; "
            f"items are in rows by the number of words they span. An edge is a rule application, labelled "
            f"with its target side: [1] and [2] are the items of its non-terminals, so an edge with two "
            f"arrows has two tails. Red: the best derivation, “{best.text}”.")
    return figure, {"title": title, "source": sentence, "translation": result.best, "best_derivation": best.text,
                    "nodes": graph.n_nodes, "edges": graph.n_edges, "drawn_nodes": pruned.n_nodes,
                    "drawn_edges": pruned.n_edges, "drawn_two_tail_edges": two_tails,
                    "max_marginal_margin": margin, "note": note}


def _hypergraph(report, pipeline, model, corpus):
    """:func:`search_graph_figure` (a Hiero model: :func:`chart_forest_figure`) of the shortest test
    sentence of 4 words or more under the first tuner's weights (its run with the best dev BLEU)."""
    sentences = read_lines(os.path.join(corpus.folder, "test.src"))
    index = _pick_sentence(sentences)
    tuner = next(iter(report["tuners"]))
    info = report["tuners"][tuner]
    run = next(r for r in info["runs"] if r["seed"] == info["representative_seed"])
    model_dir = os.path.join(model.folder, model.result["model_dir"])
    if load_manifest(model_dir).get("model") == "hiero":
        from minismt.decode.hiero import HieroDecoder, grammar_for, load_model
        grammar, lm, _ = load_model(model_dir, grammar_for(model_dir, sentences))
        decoder = HieroDecoder(grammar, lm, run["weights"])
        result = decoder.decode(sentences[index])
        figure, drawn = chart_forest_figure(result, sentences[index].split(), decoder.full_weights(), tuner)
    else:
        from minismt.decode import Decoder
        decoder = Decoder(model_dir, weights=run["weights"], stack_size=pipeline.config.test["stack"])
        result = decoder.decode(sentences[index])
        figure, drawn = search_graph_figure(result, decoder.full_weights(), tuner)
    return figure, {**drawn, "sentence_index": index, "tuner": tuner, "seed": run["seed"]}
