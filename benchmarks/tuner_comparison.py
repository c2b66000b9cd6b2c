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
SEEDS = [0, 1, 2]
DETERMINISTIC = {"apro", "structsvm"}  # no random choice: one run stands for every seed


def comparison_runs(quick: bool, labels=TUNERS, seed_major: bool = False) -> list[tuple]:
    """(tuner, seed, params) of the comparison: seeded tuners 3 times, deterministic ones once; with
    ``seed_major`` every tuner's seed 0 first (partial results then cover every tuner)."""
    runs = []
    for label in labels:
        name, *options = label.split()
        params = dict(option.split("=") for option in options)
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
    """Markdown: tuner, runs, dev BLEU mean (spread), test BLEU mean, std and spread."""
    lines = ["| tuner | runs | dev BLEU mean (spread) | test BLEU mean | test std | test spread |",
             "|---|---|---|---|---|---|"]
    for name in _labels(result):
        s = result["summary"][name]
        lines.append(f"| {name} | {s['runs']} | {s['dev_bleu_mean']:.2f} ({s['dev_bleu_spread']:.2f}) | "
                     f"{s['test_bleu_mean']:.2f} | {s['test_bleu_std']:.2f} | {s['test_bleu_spread']:.2f} |")
    return "\n".join(lines)


def curves(result: dict, path: str) -> None:
    """Dev BLEU of the weights decoded at each iteration, mean over seeds, one line per tuner; when the
    runs decoded the test set at every iteration (the hypergraph study), test BLEU in a second panel.

    The scale starts 2 BLEU below the untuned weights; a mean below that is
    drawn on the bottom edge and its value given in the legend.
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
        bottom = min(values[0] for values in series.values()) - 2.0
        top = max(max(values) for values in series.values()) + 0.5
        for k, (name, means) in enumerate(series.items()):
            low = [f"{i + 1}: {m:.1f}" for i, m in enumerate(means) if m < bottom]
            label = name + (f" (iteration {', '.join(low)} off scale)" if low else "")
            axes.plot(range(1, len(means) + 1), [max(m, bottom) for m in means], color=colours[k % len(colours)],
                      linestyle=styles[k % len(styles)], marker=markers[k % len(markers)], label=label)
        axes.set_ylim(bottom - 0.1, top)
        axes.set_xlabel("iteration (weights decoded; 1 = untuned)")
        axes.set_ylabel(f"{what} BLEU")
        axes.set_title(f"{result['corpus']}: {what} BLEU per iteration (mean over seeds)")
        axes.grid(alpha=0.3)
        axes.legend(ncol=2, fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


STUDIES = {"accumulation": (ACCUMULATION_STUDY, False), "hypergraph": (HYPERGRAPH_STUDY, True)}
"""``study`` -> (tuner labels, test BLEU at every iteration)."""


def run(quick: bool = False, corpus: str = "multi30k-de-en", png: str | None = None,
        partial_json: str | None = None, labels=TUNERS, per_iteration: bool = False,
        study: str | None = None) -> dict:
    """The comparison of ``labels`` (or of the tuners of ``study``: "accumulation" or "hypergraph")."""
    if study is not None:
        labels, per_iteration = STUDIES[study]
    result = tuner_quality.run(quick=quick, corpus=corpus, runs=comparison_runs(quick, labels, per_iteration),
                               partial_json=partial_json, test_every_iteration=per_iteration)
    result["table"] = table(result)
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
    parser.add_argument("--partial-json", default=None)
    parser.add_argument("--from-json", default=None, help="redraw from an earlier run's JSON output")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--accumulation-study", action="store_true",
                        help="run only " + ", ".join(ACCUMULATION_STUDY) + " (compare with the main table)")
    parser.add_argument("--hypergraph-study", action="store_true",
                        help="run " + ", ".join(HYPERGRAPH_STUDY) + " with test BLEU at every iteration")
    args = parser.parse_args()
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as handle:
            earlier = json.loads(handle.read().strip().splitlines()[-1])
        if isinstance(earlier, list):  # a --partial-json file: the runs so far
            earlier = {"corpus": args.corpus, "runs": earlier, "summary": tuner_quality.summarize(earlier)}
        print(table(earlier))
        if any(i.get("test_bleu") is not None for r in earlier["runs"] for i in r["iterations"]):
            print(iteration_table(earlier))
        if args.png:
            curves(earlier, args.png)
    else:
        print(json.dumps(run(quick=args.quick, corpus=args.corpus, png=args.png,
                             partial_json=args.partial_json,
                             study=("accumulation" if args.accumulation_study else
                                    "hypergraph" if args.hypergraph_study else None))))
