"""The pipeline's report: report.json (every number), report.md (tables) and PNG figures.

Figures are drawn with matplotlib's object API on the Agg canvas (no display, no
global backend change):

- ``dev_bleu.png``: dev BLEU of the weights decoded at each iteration, mean over
  seeds per tuner with the min-max band (the papers' convergence figures);
- ``test_bleu.png``: test BLEU of every run (points) with mean and standard deviation
  over seeds per tuner, the untuned system as a dashed line;
- ``error_surface.png``: MERT's error surface: corpus BLEU of the model-best
  hypotheses of the final accumulated k-best list along ``w + x d`` for the
  coordinate direction ``d`` of one feature, on a fine grid of ``x``
  (:meth:`minismt.kbest.KBest.bleu` at every point) - piecewise constant, as the
  line search of Och (2003) sees it;
- ``hypergraph.png``: the search graph of one short test sentence under the tuned
  weights, pruned to its best paths (max-marginal pruning), drawn bottom-up from
  the axiom to the goal with the Viterbi derivation in red.

BLEU is in percent (0-100) everywhere in the report.
"""

from __future__ import annotations

import json
import os
import platform
import time

import numpy as np

from minismt import __version__
from minismt.errors import InputError
from minismt.io import atomic_write, read_lines

MAX_DRAWN_EDGES = 30
SURFACE_POINTS = 1001
UNTUNED = "untuned"


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
            "tune_seconds": tuned["tune_seconds"], "wall_seconds": tuned.get("wall_seconds"),
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
    from minismt.pipeline.significance import paired_bootstrap
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
    report["timings"] = {
        "corpus_seconds": sum(o.seconds for o in pipeline.steps if o.step == "corpus"),
        "train_seconds": sum(o.seconds for o in pipeline.steps if o.step == "train"),
        "tune_seconds": sum(o.seconds for o in pipeline.steps if o.step == "tune"),
        "test_seconds": sum(o.seconds for o in pipeline.steps if o.step == "test"),
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
        n_runs = len({r["key"] for r in info["runs"]})
        runs = f"{n_runs}" if info["seeded"] else f"1 (x{len(info['runs'])})"
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
                 f"is the best iteration's; test numbers are mean ± standard deviation over seeds. "
                 f"Created {report['created']} by minismt {report['minismt']}.")
    parts += ["", "## Tuners", "", _md_table(summary_rows(report)), ""]
    parts.append("A tuner without randomness runs once and stands for every seed (runs `1 (xN)`). "
                 "p: paired bootstrap on test BLEU against the first tuner, between the runs with the "
                 "best dev BLEU.")
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
        captions = {"dev_bleu": "Dev BLEU per iteration (mean over seeds, band: min-max)",
                    "test_bleu": "Test BLEU per tuner (points: seeds; bar: mean ± sd)",
                    "error_surface": "MERT error surface along one weight",
                    "hypergraph": "Search graph of a short test sentence"}
        for name, info in figures.items():
            if info.get("file"):
                parts += [f"### {captions.get(name, name)}", "", f"![{name}]({info['file']})", ""]
                if info.get("note"):
                    parts += [info["note"], ""]
    timings = report.get("timings") or {}
    parts += ["## Timings", "", f"This invocation: {timings.get('total_seconds', 0):.1f} s (corpus "
              f"{timings.get('corpus_seconds', 0):.1f}, train {timings.get('train_seconds', 0):.1f}, tune "
              f"{timings.get('tune_seconds', 0):.1f}, test {timings.get('test_seconds', 0):.1f}, report "
              f"{timings.get('report_seconds', 0):.1f}); cached steps count 0.", ""]
    rows = [["step", "cached", "seconds now", "seconds when it ran", "key"]]
    for step in report["steps"]:
        ran = step.get("ran_seconds")
        rows.append([step["label"], "yes" if step["cached"] else "no", f"{step['seconds']:.1f}",
                     "-" if ran is None else f"{ran:.1f}", step["key"][:12]])
    parts += [_md_table(rows), ""]
    return "\n".join(parts)


# ---- figures ---------------------------------------------------------------------------------------
def _figure(width: float = 7.0, height: float = 4.5):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    figure = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(figure)
    return figure


def draw_figures(report: dict, pipeline, specs, model, corpus, out: str) -> dict:
    """Every figure; a figure that cannot be drawn is logged and left out, the others still are."""
    figures = {}
    for name, draw in (("dev_bleu", _draw_convergence), ("test_bleu", _draw_test),
                       ("error_surface", _draw_error_surface), ("hypergraph", _draw_hypergraph)):
        if name == "hypergraph" and not pipeline.config.output["hypergraph"]:
            continue
        try:
            info = draw(report, pipeline, specs, model, corpus, os.path.join(out, f"{name}.png"))
        except Exception as err:  # a figure must not lose the report; say why it is missing
            pipeline.log(f"report: figure {name} not drawn ({type(err).__name__}: {err})")
            info = {"file": None, "error": f"{type(err).__name__}: {err}"}
        figures[name] = info
    return figures


def _colors(n: int):
    from matplotlib import colormaps
    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def _draw_convergence(report, pipeline, specs, model, corpus, path) -> dict:
    figure = _figure()
    ax = figure.subplots()
    data = {}
    for color, (name, info) in zip(_colors(len(report["tuners"])), report["tuners"].items()):
        unique = {r["key"]: r for r in info["runs"]}.values()
        longest = max(len(r["iterations"]) for r in unique)
        mean, low, high = [], [], []
        for i in range(longest):
            values = [r["iterations"][i]["dev_bleu"] for r in unique if i < len(r["iterations"])]
            mean.append(float(np.mean(values)))
            low.append(min(values))
            high.append(max(values))
        x = np.arange(longest)
        ax.plot(x, mean, marker="o", color=color, label=f"{name} ({len(unique)} run{'s' * (len(unique) > 1)})")
        if len(unique) > 1:
            ax.fill_between(x, low, high, color=color, alpha=0.15, linewidth=0)
        data[name] = {"mean": mean, "min": low, "max": high}
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("iteration (weights decoded; 0 = untuned)")
    ax.set_ylabel("dev BLEU (%)")
    ax.set_title("Dev BLEU per iteration (mean over seeds, band: min-max)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    return {"file": os.path.basename(path), "series": data}


def _draw_test(report, pipeline, specs, model, corpus, path) -> dict:
    figure = _figure()
    ax = figure.subplots()
    names = list(report["tuners"])
    rng = np.random.default_rng(0)
    for k, (color, name) in enumerate(zip(_colors(len(names)), names)):
        info = report["tuners"][name]
        values = [r["test"]["bleu"] for r in {r["key"]: r for r in info["runs"]}.values()]
        s = info["summary"]["test_bleu"]
        ax.errorbar([k], [s["mean"]], yerr=[s["std"] or 0.0], fmt="s", color=color, capsize=6, markersize=8)
        ax.scatter(k + rng.uniform(-0.12, 0.12, len(values)), values, color=color, alpha=0.6, s=18)
    base = report.get("baseline")
    if base is not None:
        ax.axhline(base["test"]["bleu"], color="grey", linestyle="--", label=f"untuned {base['test']['bleu']:.2f}")
        ax.legend(fontsize=8)
    ax.set_xticks(range(len(names)), names)
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.set_ylabel("test BLEU (%)")
    ax.set_title("Test BLEU per tuner (points: seeds; square: mean ± sd)")
    ax.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    return {"file": os.path.basename(path)}


def error_surface(run_dir: str, feature: str, points: int = SURFACE_POINTS) -> dict:
    """Corpus BLEU (%) of the model-best of a run's final accumulated k-best list along one weight.

    The weights are the tuner's output on that list (the checkpoint's), so x = 0 is where the
    tuner stopped; ``x`` spans 3 times the larger of the weight and the mean absolute weight on
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
    w = np.asarray(state["weights"], dtype=np.float64)
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


def _draw_error_surface(report, pipeline, specs, model, corpus, path) -> dict:
    tuners = list(report["tuners"])
    order = (["mert"] if "mert" in tuners else []) + [t for t in tuners if t != "mert"]
    surface = None
    for tuner in order:  # MERT's, else the first tuner's whose run kept a k-best list (not a forest tuner's)
        seed = report["tuners"][tuner]["runs"][0]["seed"]
        spec = next(s for s in specs if s["tuner"] == tuner and s["seed"] == seed)
        if any(name.startswith("accumulated.") for name in os.listdir(spec["run_dir"])):
            surface = error_surface(spec["run_dir"], pipeline.config.output["surface_feature"])
            break
    if surface is None:
        raise InputError("no tuning run kept a k-best list (hypergraph tuners keep none)",
                         expected="an n-best tuner such as mert among tune.tuners")
    figure = _figure()
    ax = figure.subplots()
    values = surface["weight"] + np.asarray(surface["x"])
    ax.plot(values, surface["bleu"], color="tab:blue", linewidth=1.2, drawstyle="steps-mid")
    ax.axvline(surface["weight"], color="tab:red", linestyle="--",
               label=f"{tuner}'s weight {surface['weight']:.4f} (BLEU {surface['bleu_at_weights']:.2f})")
    ax.set_xlabel(f"weight of {surface['feature']} (other weights fixed)")
    ax.set_ylabel("corpus BLEU of the model-best (%)")
    ax.set_title(f"{tuner} error surface: final accumulated k-best list, seed {seed}\n"
                 f"({surface['sentences']} sentences, {surface['hypotheses']} hypotheses, "
                 f"{len(surface['x'])} points)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    return {"file": os.path.basename(path), "tuner": tuner, "seed": seed, **surface}


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


def _draw_hypergraph(report, pipeline, specs, model, corpus, path) -> dict:
    import networkx as nx
    from minismt.decode import Decoder
    from minismt.hypergraph.draw import to_networkx
    sentences = read_lines(os.path.join(corpus.folder, "test.src"))
    index = _pick_sentence(sentences)
    tuner = next(iter(report["tuners"]))
    info = report["tuners"][tuner]
    run = next(r for r in info["runs"] if r["seed"] == info["representative_seed"])
    model_dir = os.path.join(model.folder, model.result["model_dir"])
    decoder = Decoder(model_dir, weights=run["weights"], stack_size=pipeline.config.test["stack"])
    result = decoder.decode(sentences[index])
    full = decoder.full_weights() if hasattr(decoder, "full_weights") else decoder.weights
    graph = result.hypergraph
    pruned, kept_margin = _best_edges(graph, full, MAX_DRAWN_EDGES)
    best = pruned.viterbi(full)
    best_edges = {int(e) for e in best.edges} if best is not None else set()
    g = to_networkx(pruned, full)
    layers = {}
    for depth, generation in enumerate(nx.topological_generations(g)):
        for node in generation:
            layers[node] = depth
    by_layer: dict[int, list] = {}
    for node, depth in layers.items():
        by_layer.setdefault(depth, []).append(node)
    pos = {}
    for depth in sorted(by_layer):  # each layer ordered by its predecessors' heights: fewer crossings
        nodes = by_layer[depth]
        nodes.sort(key=lambda n: (float(np.mean([pos[u][1] for u in g.predecessors(n)]))
                                  if depth else 0.0, n[0], n[1]))
        for k, node in enumerate(nodes):
            pos[node] = (depth, k - (len(nodes) - 1) / 2.0)
    n_layers = max(by_layer) + 1 if by_layer else 1
    tallest = max((len(v) for v in by_layer.values()), default=1)
    figure = _figure(max(7.0, 1.3 * n_layers), max(4.0, 0.55 * tallest + 1.5))
    ax = figure.subplots()
    on_best = {("edge", e) for e in best_edges}
    arcs_best = [(u, v) for u, v in g.edges if u in on_best or v in on_best]
    arcs_other = [(u, v) for u, v in g.edges if (u, v) not in set(arcs_best)]
    nx.draw_networkx_edges(g, pos, edgelist=arcs_other, ax=ax, edge_color="#999999", arrows=True, arrowsize=8,
                           node_size=300)
    nx.draw_networkx_edges(g, pos, edgelist=arcs_best, ax=ax, edge_color="tab:red", width=1.8, arrows=True,
                           arrowsize=10, node_size=300)
    hypernodes = [n for n in g.nodes if n[0] == "node"]
    nx.draw_networkx_nodes(g, pos, nodelist=hypernodes, ax=ax, node_size=90, node_color="#1f77b4")
    labels = {}
    for node in g.nodes:
        if node[0] != "edge":
            continue
        text = g.nodes[node]["target"].replace("[1]", "").strip()
        tails = list(g.predecessors(node))
        labels[node] = text if text else ("<s>" if not tails else "</s>")
    for node, text in labels.items():
        x, y = pos[node]
        ax.text(x, y, text, ha="center", va="center", fontsize=7,
                bbox=dict(boxstyle="round,pad=0.25", fc="#ffe9e9" if node in on_best else "white",
                          ec="tab:red" if node in on_best else "#777777", lw=0.8))
    ax.set_title(f"Search graph of test sentence {index}: \"{sentences[index]}\"\n"
                 f"1-best \"{result.best}\" ({tuner} weights); the {pruned.n_edges} of {graph.n_edges} edges "
                 f"with the best max-marginals, best derivation in red", fontsize=9)
    ax.set_axis_off()
    figure.tight_layout()
    figure.savefig(path)
    return {"file": os.path.basename(path), "sentence_index": index, "source": sentences[index],
            "translation": result.best, "tuner": tuner, "seed": run["seed"], "nodes": graph.n_nodes,
            "edges": graph.n_edges, "drawn_nodes": pruned.n_nodes, "drawn_edges": pruned.n_edges,
            "max_marginal_margin": kept_margin,
            "note": "boxes are hyperedges (a phrase translation, its target words shown), dots are hypernodes "
                    "(recombined decoder states); arcs go from tail node to edge to head node"}
