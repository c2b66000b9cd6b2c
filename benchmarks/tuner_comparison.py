"""Every tuner on Multi30k: dev/test BLEU over 3 seeds, a table and convergence curves.

The issue-6 comparison: MERT, PRO, APRO, k-best MIRA, ORO, O-ORO, ListNet,
ListMLE, top-5 ListMLE, ListMLE-TE and the structured SVM (with forced-decoding
references, and with oracle surrogates only), each tuned with seeds 0, 1 and 2
(the deterministic APRO and structured SVM once) for 6 iterations on the 1,014-sentence dev set (100-best,
stack 100; each tuner with its own accumulation default: merging, instance
aggregating for the listwise ones), then test_2016 decoded with the weights
of the best dev BLEU. Prints the JSON of :func:`tuner_quality.run` plus a
markdown table (``table``) and writes the dev-BLEU-per-iteration curves
(mean over seeds, the papers' convergence figures) to ``--png``.

``python benchmarks/tuner_comparison.py --corpus multi30k-fr-en --png curves.png``;
``--from-json FILE`` redraws the table and figure from an earlier run's output.
Quick mode (``run.py tuner-comparison --quick``): 200 sentences, 2 iterations, one seed.

The sparse-feature study (``--sparse-study``, ``run.py sparse-study``): PRO, APRO, k-best MIRA,
ListMLE-TE, ORO and HG-REMBO (and APRO with the paper's C = 0.01) each dense only and with
``--sparse-features rule-id,word-pair`` and the word pairs of the 500 most frequent words (the APRO
paper's setting, its Sec. 5.1 and footnote 5), 3 seeds (APRO once), the same 6 iterations, 100-best and stack 100; per run the
final feature space's size, its non-zero sparse weights, dev BLEU per iteration, the test BLEU
of the returned weights and the tuning time. ``--results-dir benchmarks/results`` writes
``tuner_comparison_<corpus>_sparse.{json,md,png}`` (the table and, per tuner, dense against
sparse dev BLEU per iteration). Its quick mode trains on 2,000 pairs and tunes on 30 dev
sentences (stack 20, 20-best, HG-REMBO with 10 BO steps), in well under a minute.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tuner_quality  # noqa: E402

TUNERS = ["mert", "pro", "apro", "kbmira", "oro", "o-oro", "listnet", "listmle", "listmle-top5",
          "listmle-te", "structsvm", "structsvm correct=oracle"]
ACCUMULATION_STUDY = ["listnet accumulate=merge", "listmle-te accumulate=merge"]
"""With ``--accumulation-study``: the listwise tuners with k-best merging instead of instance aggregating."""
HYPERGRAPH_STUDY = ["mert", "hg-mert", "nbl-bo", "hg-bo", "chg-bo"]
"""With ``--hypergraph-study``: n-best and hypergraph MERT and the BO tuners (issue 7), test BLEU per iteration."""
HIERO_SPARSE = " ".join(f"{key}={value}" for key, value in tuner_quality.HIERO_SPARSE.items())
"""The sparse rule features of a Hiero model (the BO paper's large-scale set, as cdec computes it)."""
HIERO_HYPERGRAPH_STUDY = HYPERGRAPH_STUDY + [f"hg-rembo {HIERO_SPARSE}", f"kbmira {HIERO_SPARSE}"]
"""With ``--hypergraph-study --hiero``: the hypergraph study on a Hiero model's forests (edges with two
tails), plus HG-REMBO and k-best MIRA with the sparse rule features."""
HIERO_QUICK = {"max_train": 3000, "quick_sentences": 60}
"""The Hiero study's quick mode: a Hiero model of 3,000 pairs, 60 dev and test sentences."""
SPARSE_STUDY = ["pro", "apro", "apro C=0.01", "kbmira", "listmle-te", "oro", "hg-rembo"]
"""With ``--sparse-study``: these tuners dense only and with :data:`SPARSE_OPTIONS` (the APRO paper's scale);
APRO also with the paper's C = 0.01 (its default C = 1 was chosen on the dense features)."""
SPARSE_OPTIONS = " ".join(f"{key}={value}" for key, value in tuner_quality.PHRASE_SPARSE.items())
"""The decoder options of the sparse runs (benchmarks/tuner_quality.py's ``DECODER_PARAMS``)."""
SPARSE_QUICK = {"max_train": 2000, "quick_sentences": 30, "stack": 20, "kbest": 20, "jobs": 1}
"""The sparse study's quick mode: a small model and dev set, so that the 14 runs take well under a minute."""
SPARSE_QUICK_PARAMS = {"hg-rembo": "steps=10"}
"""Tuner parameters of the quick sparse study (HG-REMBO's 2 x 100 BO steps would dominate it)."""
SEEDS = [0, 1, 2]
DETERMINISTIC = {"apro", "structsvm"}  # no random choice: one run stands for every seed


def comparison_runs(quick: bool, labels=TUNERS, seed_major: bool = False) -> list[tuple]:
    """(tuner, seed, params) of the comparison: seeded tuners 3 times, deterministic ones once; with
    ``seed_major`` every tuner's seed 0 first (partial results then cover every tuner)."""
    from tuners.base import parse_tuner_params
    runs = []
    for label in labels:
        name, *options = label.split()
        params = parse_tuner_params(options)
        seeds = [0] if quick or name in DETERMINISTIC else SEEDS
        runs.extend((name, seed, params) for seed in seeds)
    if seed_major:
        runs.sort(key=lambda run: run[1])
    return runs


def iteration_table(result: dict) -> str:
    """Markdown: mean dev / test BLEU of the weights decoded at each iteration, per tuner."""
    length = max(len(r["iterations"]) for r in result["runs"])
    lines = ["| tuner | " + " | ".join(f"it {i + 1} dev / test" for i in range(length)) + " |",
             "|---|" + "---|" * length]
    for name in _labels(result):
        runs = [r for r in result["runs"] if r["tuner"] == name]
        cells = []
        for i in range(length):
            at = [r["iterations"][i] for r in runs if i < len(r["iterations"])]
            dev = statistics.mean(x["dev_bleu"] for x in at) if at else None
            tests = [x["test_bleu"] for x in at if x.get("test_bleu") is not None]
            cells.append("" if dev is None else f"{dev:.2f} / {statistics.mean(tests):.2f}" if tests else f"{dev:.2f}")
        lines.append(f"| {name} ({len(runs)} runs) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _labels(result: dict) -> list[str]:
    """The result's tuner labels, in the order of TUNERS and HYPERGRAPH_STUDY, then the others sorted."""
    known = TUNERS + [t for t in HYPERGRAPH_STUDY if t not in TUNERS]
    return [t for t in known if t in result["summary"]] + sorted(set(result["summary"]) - set(known))


def table(result: dict) -> str:
    """Markdown: tuner, runs, dev BLEU mean (spread), test BLEU mean, std and spread, and (when the runs
    measured it) the test output's length ratio (output / reference words; below 1 the brevity penalty
    applies)."""
    ratios = all("test_length_ratio_mean" in s for s in result["summary"].values())
    lines = ["| tuner | runs | dev BLEU mean (spread) | test BLEU mean | test std | test spread |"
             + (" test length ratio |" if ratios else ""), "|---|---|---|---|---|---|" + ("---|" if ratios else "")]
    for name in _labels(result):
        s = result["summary"][name]
        lines.append(f"| {name} | {s['runs']} | {s['dev_bleu_mean']:.2f} ({s['dev_bleu_spread']:.2f}) | "
                     f"{s['test_bleu_mean']:.2f} | {s['test_bleu_std']:.2f} | {s['test_bleu_spread']:.2f} |"
                     + (f" {s['test_length_ratio_mean']:.3f} |" if ratios else ""))
    return "\n".join(lines)


CLAIMS = [
    ("APRO (Dreyer & Dong 2015)", "APRO gives similar or better results than PRO", "apro", "pro"),
    ("ORO (Watanabe 2012)", "O-ORO is better than ORO", "o-oro", "oro"),
    ("ORO (Watanabe 2012)", "O-ORO is better than MIRA", "o-oro", "kbmira"),
    ("ORO (Watanabe 2012)", "O-ORO is better than PRO", "o-oro", "pro"),
    ("ORO (Watanabe 2012)", "O-ORO is better than MERT", "o-oro", "mert"),
    ("Listwise (Chen et al. 2017)", "ListNet is better than PRO", "listnet", "pro"),
    ("Listwise (Chen et al. 2017)", "top-5 ListMLE is better than ListMLE", "listmle-top5", "listmle"),
    ("Listwise (Chen et al. 2017)", "ListMLE-TE is better than ListMLE", "listmle-te", "listmle"),
    ("Listwise (Chen et al. 2017)", "ListMLE-TE is better than MERT with the basic features", "listmle-te", "mert"),
    ("SVM (Gonzalez-Rubio et al. 2010)", "the structured SVM outperforms MERT", "structsvm", "mert"),
    ("BO (Miao et al. 2016)", "NBL-BO is better than MERT", "nbl-bo", "mert"),
    ("BO (Miao et al. 2016)", "HG-BO is better than MERT", "hg-bo", "mert"),
    ("BO (Miao et al. 2016)", "CHG-BO is better than MERT", "chg-bo", "mert"),
    ("BO (Miao et al. 2016)", "HG-BO is better than NBL-BO", "hg-bo", "nbl-bo"),
]
"""(paper, claim, tuner A, tuner B): each paper's claim that A's test BLEU is at least B's, that
:func:`claims` checks on a comparison's results (the rows whose two tuners the result holds)."""


def verdict(difference: float, spread: float) -> str:
    """A claim "A is at least B" from the mean test BLEU difference A - B: inside the seed spread
    when ``|difference|`` is at most ``spread`` (the larger of the two tuners' max - min over seeds),
    else confirmed or contradicted by its sign."""
    if abs(difference) <= spread:
        return "inside the seed spread"
    return "confirmed" if difference > 0 else "contradicted"


def claims(result: dict) -> str:
    """Markdown: every :data:`CLAIMS` row whose tuners the result holds: the two tuners' mean dev and
    test BLEU differences, the larger test seed spread and the verdict (:func:`verdict`)."""
    summary = result["summary"]
    lines = ["| paper | claim | dev A - B | test A - B | test seed spread | verdict |",
             "|---|---|---|---|---|---|"]
    for paper, claim, a, b in CLAIMS:
        if a not in summary or b not in summary:
            continue
        sa, sb = summary[a], summary[b]
        test = sa["test_bleu_mean"] - sb["test_bleu_mean"]
        spread = max(sa["test_bleu_spread"], sb["test_bleu_spread"])
        lines.append(f"| {paper} | {claim} ({a} vs {b}) | {sa['dev_bleu_mean'] - sb['dev_bleu_mean']:+.2f} | "
                     f"{test:+.2f} | {spread:.2f} | {verdict(round(test, 2), round(spread, 2))} |")
    return "\n".join(lines)


OUTLIER_BLEU = 3.0
"""A curve whose highest mean is this far above every other curve's is drawn cut at the top (:func:`curves`)."""


def y_scale(series: dict[str, list[float]]) -> tuple[float, float, bool]:
    """``(bottom, top, clipped)`` of a BLEU-per-iteration panel (:func:`curves`): from 2 BLEU below the
    lowest first mean to 0.5 above the highest mean, or, when one curve's highest mean is more than
    :data:`OUTLIER_BLEU` above every other curve's (``clipped``), to 1 BLEU above the others."""
    bottom = min(values[0] for values in series.values()) - 2.0
    highest = sorted(max(values) for values in series.values())
    clipped = len(highest) > 1 and highest[-1] - highest[-2] > OUTLIER_BLEU
    return bottom, (highest[-2] + 1.0 if clipped else highest[-1] + 0.5), clipped


def curves(result: dict, path: str) -> None:
    """Dev BLEU of the weights decoded at each iteration, mean over seeds, one line per tuner; when the
    runs decoded the test set at every iteration (the hypergraph study), test BLEU in a second panel.

    The scale starts 2 BLEU below the untuned weights; a mean below that is
    drawn on the bottom edge and its value given in the legend.  A tuner that climbs more than
    :data:`OUTLIER_BLEU` above every other (k-best MIRA learning a dev set by heart with sparse
    features) would squeeze the others into a band: the scale ends 1 BLEU above the others, and
    its means above that are drawn on the top edge, each with its value.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = _labels(result)
    with_test = all(i.get("test_bleu") is not None for r in result["runs"] for i in r["iterations"])
    figure, panels = plt.subplots(1, 2 if with_test else 1, figsize=(14 if with_test else 9, 5.5), squeeze=False)
    colours = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20").colors
    styles = ["-", "--", "-.", ":"]
    markers = "osD^v<>ph*Xd"
    for axes, key, what in zip(panels[0], ("dev_bleu", "test_bleu"), ("dev", "test")):
        series = {}
        for name in labels:
            runs = [r for r in result["runs"] if r["tuner"] == name]
            length = max(len(r["iterations"]) for r in runs)
            series[name] = [statistics.mean(r["iterations"][i][key] for r in runs if i < len(r["iterations"]))
                            for i in range(length)]
        bottom, top, clipped = y_scale(series)
        for k, (name, means) in enumerate(series.items()):
            low = [f"{i + 1}: {m:.1f}" for i, m in enumerate(means) if m < bottom]
            label = name + (f" (iteration {', '.join(low)} off scale)" if low else "")
            colour = colours[k % len(colours)]
            axes.plot(range(1, len(means) + 1), [min(max(m, bottom), top) for m in means], color=colour,
                      linestyle=styles[k % len(styles)], marker=markers[k % len(markers)], label=label)
            for i, m in enumerate(means):
                if m > top:
                    axes.annotate(f"{m:.1f}", (i + 1, top), textcoords="offset points", xytext=(0, -13),
                                  ha="center", fontsize=8, color=colour)
        axes.set_ylim(bottom - 0.1, top + 0.1 if clipped else top)
        axes.set_xlabel("iteration (weights decoded; 1 = untuned)")
        axes.set_ylabel(f"{what} BLEU")
        system = " Hiero" if result.get("model") == "hiero" else ""
        axes.set_title(f"{result['corpus']}{system}: {what} BLEU per iteration (mean over seeds)")
        axes.grid(alpha=0.3)
        axes.legend(ncol=2, fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _dense_label(label: str) -> str:
    """A run's tuner label without the decoder's sparse-feature options (:data:`SPARSE_OPTIONS`)."""
    return " ".join(word for word in label.split() if word.split("=")[0] not in tuner_quality.DECODER_PARAMS)


def _sparse_groups(result: dict) -> list[tuple[str, list[dict], list[dict]]]:
    """``(tuner label, dense runs, sparse runs)`` of the sparse study, in :data:`SPARSE_STUDY`'s order."""
    groups = []
    labels = {_dense_label(r["tuner"]) for r in result["runs"]}
    for name in [n for n in SPARSE_STUDY if n in labels] + sorted(labels - set(SPARSE_STUDY)):
        mine = [r for r in result["runs"] if _dense_label(r["tuner"]) == name]
        if mine:
            groups.append((name, [r for r in mine if "sparse_features=" not in r["tuner"]],
                           [r for r in mine if "sparse_features=" in r["tuner"]]))
    return groups


def _spread(values: list[float]) -> float:
    return max(values) - min(values) if values else 0.0


def sparse_table(result: dict) -> str:
    """Markdown: per tuner, dense only and with sparse features: features (dense + sparse names in the final
    space, mean over runs), non-zero sparse weights of the returned weights (and the most of any weights the
    tuner returned), dev BLEU of the returned weights mean (spread), test BLEU mean (std), tuning seconds and
    the sparse runs' difference to the dense ones (dev / test means)."""
    lines = ["| tuner | runs | features (dense + sparse) | non-zero sparse weights: returned (most tuned) | "
             "dev BLEU mean (spread) | test BLEU mean (std) | tuning s | sparse - dense dev / test |",
             "|---|---|---|---|---|---|---|---|"]
    for name, dense, sparse in _sparse_groups(result):
        means = {}
        for kind, runs in (("dense", dense), ("sparse", sparse)):
            if not runs:
                continue
            devs = [r["final_dev_bleu"] for r in runs]
            tests = [r["final_test_bleu"] for r in runs]
            means[kind] = (statistics.mean(devs), statistics.mean(tests))
            features = [r.get("features", {"dense": len(r["final_weights"]), "sparse": 0}) for r in runs]
            size = (f"{statistics.mean(f['dense'] for f in features):.0f} + "
                    f"{statistics.mean(f['sparse'] for f in features):,.0f}")
            nonzero = (f"{statistics.mean(r['final_sparse_nonzero'] for r in runs):,.0f} "
                       f"({max(r['tuned_sparse_nonzero_max'] for r in runs):,})" if kind == "sparse" else "")
            difference = ""
            if kind == "sparse" and "dense" in means:
                difference = (f"{means['sparse'][0] - means['dense'][0]:+.2f} / "
                              f"{means['sparse'][1] - means['dense'][1]:+.2f}")
            lines.append(f"| {name}{' + sparse' if kind == 'sparse' else ''} | {len(runs)} | {size} | {nonzero} | "
                         f"{means[kind][0]:.2f} ({_spread(devs):.2f}) | {means[kind][1]:.2f} "
                         f"({statistics.pstdev(tests):.2f}) | "
                         f"{statistics.mean(r['tuning_seconds'] for r in runs):.0f} | {difference} |")
    return "\n".join(lines)


def sparse_curves(result: dict, path: str) -> None:
    """One panel per tuner: dev BLEU of the weights decoded at each iteration, dense only (solid) against
    sparse features (dashed), mean over seeds with the seeds' range shaded; the legend gives the
    final space's sparse features."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    groups = _sparse_groups(result)
    columns = min(3, len(groups))
    rows = (len(groups) + columns - 1) // columns
    figure, panels = plt.subplots(rows, columns, figsize=(5 * columns, 3.8 * rows), squeeze=False, sharey=True)
    every = [i["dev_bleu"] for r in result["runs"] for i in r["iterations"]]
    for axes, (name, dense, sparse) in zip(panels.flat, groups):
        for runs, colour, style, what in ((dense, "tab:blue", "-", "dense"), (sparse, "tab:red", "--", "sparse")):
            if not runs:
                continue
            length = max(len(r["iterations"]) for r in runs)
            at = [[r["iterations"][i]["dev_bleu"] for r in runs if i < len(r["iterations"])] for i in range(length)]
            x = range(1, length + 1)
            if what == "sparse":
                features = statistics.mean(r["features"]["sparse"] for r in runs)
                what = f"+ {features:,.0f} sparse features"
            else:
                what = "dense (15 features)"
            test = statistics.mean(r["final_test_bleu"] for r in runs)
            axes.plot(x, [statistics.mean(v) for v in at], color=colour, linestyle=style, marker="o",
                      label=f"{what}, {len(runs)} run{'s' if len(runs) > 1 else ''}; test BLEU {test:.2f}")
            if len(runs) > 1:
                axes.fill_between(x, [min(v) for v in at], [max(v) for v in at], color=colour, alpha=0.15)
        axes.set_title(name)
        axes.set_xlabel("iteration (weights decoded; 1 = untuned)")
        axes.set_ylabel("dev BLEU")
        axes.set_ylim(min(every) - 0.3, max(every) + 0.3)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8, loc="best")
    for axes in list(panels.flat)[len(groups):]:
        axes.set_visible(False)
    figure.suptitle(f"{result['corpus']}: dev BLEU per iteration, dense only vs rule-id + word-pair sparse features "
                    f"(mean over seeds, range shaded)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write_sparse_study(result: dict, folder: str) -> dict:
    """``tuner_comparison_<corpus>_sparse.{json,md,png}`` in ``folder``; returns their paths."""
    import datetime
    import os
    base = os.path.join(folder, f"tuner_comparison_{result['corpus']}_sparse")
    paths = {"json": base + ".json", "md": base + ".md", "png": base + ".png"}
    os.makedirs(folder, exist_ok=True)
    sparse_curves(result, paths["png"])
    with open(paths["json"], "w", encoding="utf-8") as out:
        json.dump(result, out, indent=1)
        out.write("\n")
    size = "quick mode" if result.get("quick") else "full size"
    seeds = "seed 0" if result.get("quick") else "seeds 0-2 (APRO, deterministic, once)"
    text = [f"# Sparse features at the APRO paper's scale, {result['corpus']}", "",
            f"`python benchmarks/tuner_comparison.py --sparse-study` ({size}, {datetime.date.today().isoformat()}): "
            f"each tuner dense only (15 features) and with `--sparse-features rule-id,word-pair "
            f"--word-pair-vocabulary 500`; {result['iterations']} iterations, {result['kbest']}-best, stack "
            f"{result['stack']}, {result['dev_sentences']} dev and {result['test_sentences']} test sentences, "
            f"{seeds}. Dev BLEU: the returned (best-dev) weights'; test BLEU: "
            f"theirs on the test set; features: names in the final space; non-zero sparse weights: in the "
            f"returned weights (in parentheses the most of any weights the tuner returned).", "",
            result["table"], "", f"![dev BLEU per iteration, dense vs sparse]({os.path.basename(paths['png'])})", ""]
    with open(paths["md"], "w", encoding="utf-8") as out:
        out.write("\n".join(text))
    return paths


def sparse_study(quick: bool = False, corpus: str = "multi30k-de-en", partial_json: str | None = None,
                 results_dir: str | None = None) -> dict:
    """The sparse-feature study (see the module's docstring); with ``results_dir`` also its files there."""
    labels = []
    for name in SPARSE_STUDY:
        extra = (" " + SPARSE_QUICK_PARAMS[name]) if quick and name in SPARSE_QUICK_PARAMS else ""
        labels += [name + extra, f"{name} {SPARSE_OPTIONS}{extra}"]
    options = SPARSE_QUICK if quick else {}
    result = tuner_quality.run(quick=quick, corpus=corpus, runs=comparison_runs(quick, labels, True),
                               partial_json=partial_json, test_every_iteration=False, **options)
    result["quick"] = quick
    result["kbest"] = options.get("kbest", 100)
    result["table"] = sparse_table(result)
    if results_dir is not None:
        result["files"] = write_sparse_study(result, results_dir)
    return result


STUDIES = {"accumulation": (ACCUMULATION_STUDY, False), "hypergraph": (HYPERGRAPH_STUDY, True),
           "hypergraph-hiero": (HIERO_HYPERGRAPH_STUDY, True)}
"""``study`` -> (tuner labels, test BLEU at every iteration); the "sparse" study is :func:`sparse_study`."""


def run(quick: bool = False, corpus: str = "multi30k-de-en", png: str | None = None,
        partial_json: str | None = None, labels=TUNERS, per_iteration: bool = False,
        study: str | None = None, results_dir: str | None = None) -> dict:
    """The comparison of ``labels`` (or of the tuners of ``study``: "accumulation", "hypergraph",
    "hypergraph-hiero" (on a Hiero model) or "sparse"; ``results_dir``: where the sparse study writes its
    files)."""
    if study == "sparse":
        return sparse_study(quick, corpus, partial_json, results_dir)
    if study is not None:
        labels, per_iteration = STUDIES[study]
    result = tuner_quality.run(quick=quick, corpus=corpus, runs=comparison_runs(quick, labels, per_iteration),
                               partial_json=partial_json, test_every_iteration=per_iteration,
                               model_kind="hiero" if study == "hypergraph-hiero" else "phrase",
                               **(HIERO_QUICK if quick and study == "hypergraph-hiero" else {}))
    result["table"] = table(result)
    result["claims"] = claims(result)
    if per_iteration:
        result["iteration_table"] = iteration_table(result)
    if png:
        curves(result, png)
        result["png"] = png
    return result


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="multi30k-de-en")
    parser.add_argument("--png", default=None, help="write the convergence curves here")
    parser.add_argument("--partial-json", default=None,
                        help="write the runs so far here after every run; runs it holds are not run again "
                             "(a killed benchmark resumes: give the same options)")
    parser.add_argument("--from-json", default=None, help="redraw from an earlier run's JSON output")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--accumulation-study", action="store_true",
                        help="run only " + ", ".join(ACCUMULATION_STUDY) + " (compare with the main table)")
    parser.add_argument("--hypergraph-study", action="store_true",
                        help="run " + ", ".join(HYPERGRAPH_STUDY) + " with test BLEU at every iteration")
    parser.add_argument("--hiero", action="store_true",
                        help="with --hypergraph-study: on a Hiero model (" + ", ".join(HIERO_HYPERGRAPH_STUDY) + ")")
    parser.add_argument("--sparse-study", action="store_true",
                        help="run " + ", ".join(SPARSE_STUDY) + " dense only and with sparse features")
    parser.add_argument("--results-dir", default=None,
                        help="the sparse study writes tuner_comparison_<corpus>_sparse.{json,md,png} here")
    args = parser.parse_args()
    if args.sparse_study:
        print(json.dumps(sparse_study(args.quick, args.corpus, args.partial_json, args.results_dir)))
    elif args.from_json:
        from run import read_output
        earlier = read_output(args.from_json)
        if isinstance(earlier, list):  # a --partial-json file: the runs so far
            earlier = {"corpus": args.corpus, "runs": earlier, "summary": tuner_quality.summarize(earlier)}
        print(table(earlier))
        print(claims(earlier))
        if any(i.get("test_bleu") is not None for r in earlier["runs"] for i in r["iterations"]):
            print(iteration_table(earlier))
        if args.png:
            curves(earlier, args.png)
    else:
        print(json.dumps(run(quick=args.quick, corpus=args.corpus, png=args.png,
                             partial_json=args.partial_json,
                             study=("accumulation" if args.accumulation_study else
                                    ("hypergraph-hiero" if args.hiero else "hypergraph") if args.hypergraph_study
                                    else None))))
