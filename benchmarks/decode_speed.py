"""Phrase-based decoding of Multi30k de-en test_2016 (1,000 sentences, 12,102 words): ``minismt decode``
against Moses2 (the fastest peer) and the classic Moses decoder, in the same run, on the same model.

The model is ``minismt train`` on the full Multi30k de-en train set (sacremoses-tokenised, lowercased, as the
Moses anchors), untuned weights, distortion limit 6, table limit 20.  The peers read the model's own tables
as ../shared/fixtures/moses/m30k-moses2 has them read: Moses' ``filter-model-given-input.pl`` filters the
phrase and reordering tables to the test set, Moses2 reads the filtered phrase table as a ProbingPT
(``CreateProbingPT``) and the reordering table as text, both read the LM in KenLM's binary form.  Each
decoder runs as a user runs it, one process reading standard input: at stacks 100 and 200 on the whole
test set and at stack 1000 on its first 200 sentences, with one and two threads (``--jobs`` for ours),
twice, the decoders' order reversed in the second round, after one untimed run of each on the test set
(numba's cache compiled, every file read once before any timing).  Words per second = source words / (wall
time of the run - wall time of the same command on 64 empty lines, which loads the model in each of our
decoding processes; the fixture's start-up run reads no input); peak memory = the largest resident set of the run's
processes.  Reported per stack and threads: each
decoder's words/s (mean and both rounds), our ratio to Moses2 and to Moses, BLEU (sacrebleu, tokenised
text), peak memory; per stack (one thread, untimed runs with 1-best lists): how many sentences our 1-best
scores higher or lower under the model than Moses2's (search errors), and how many 1-bests are the same.
``quick``: 3,000 training pairs, the first 100 sentences, stacks 100 and 200, one round.
The goal (issue 39): 3x Moses2 at stacks 100 and 200 on one thread, at equal BLEU and no more search errors.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
MULTI30K = SHARED / "corpora" / "multi30k"
MOSES_ROOT = SHARED / "tools" / "moses"
MOSES, MOSES2 = MOSES_ROOT / "bin" / "moses", MOSES_ROOT / "bin" / "moses2"
CREATE_PROBING, BUILD_BINARY = MOSES_ROOT / "bin" / "CreateProbingPT", MOSES_ROOT / "bin" / "build_binary"
FILTER = MOSES_ROOT / "scripts" / "training" / "filter-model-given-input.pl"
STACKS = (100, 200, 1000)
THREADS = (1, 2)
ROUNDS = 2
STACK_1000_SENTENCES = 200
SCORE_TOLERANCE = 1e-3      # model scores printed with 6 significant digits
START_UP_LINES = 64         # empty lines: enough chunks that each of our decoding processes loads the model


_TIMER = """import resource, subprocess, sys, time
with open(sys.argv[1], "rb") as source, open(sys.argv[2], "wb") as target:
    started = time.perf_counter()
    done = subprocess.run(sys.argv[3:], stdin=source, stdout=target, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - started
sys.stderr.buffer.write(done.stderr[-500:])
print(seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode)
"""


def _run(argv: list[str], stdin: Path, stdout: Path) -> tuple[float, float, int, str]:
    """Run ``argv`` with ``stdin`` and ``stdout`` files under a small Python parent that times it and reads its
    peak resident memory (a child of this large process would inherit this process' peak): wall seconds, peak
    MB (the largest of its processes), exit status, the tail of its stderr."""
    done = subprocess.run([sys.executable, "-c", _TIMER, str(stdin), str(stdout), *argv], capture_output=True,
                          text=True)
    seconds, peak_kb, status = done.stdout.split()
    return float(seconds), int(peak_kb) / 1024, int(status), done.stderr


def _peer_files(model: Path, sources: Path, work: Path) -> dict:
    """Moses' filtered tables of the model for ``sources``, the LM in KenLM's binary form, the ProbingPT: the
    ini files of Moses and Moses2 (or why there are none)."""
    missing = [str(p) for p in (MOSES, MOSES2, CREATE_PROBING, BUILD_BINARY, FILTER) if not p.is_file()]
    if missing or shutil.which("perl") is None:
        return {"error": "missing: " + ", ".join(missing or ["perl"])}
    filtered = work / "filtered"
    steps = [["perl", str(FILTER), str(filtered), str(model / "moses.ini"), str(sources)],
             [str(BUILD_BINARY), str(model / "lm" / "lm.4.arpa"), str(work / "lm.binlm")],
             [str(CREATE_PROBING), "--num-scores", "4", "--log-prob", "--input-pt",
              str(filtered / "phrase-table.0-0.1.1.gz"), "--output-dir", str(work / "probing")]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            return {"error": f"{Path(step[0]).name}: {done.stderr[-400:]}"}
    classic, fast = [], []
    for line in (filtered / "moses.ini").read_text().splitlines():
        if line.startswith("KENLM "):
            line = re.sub(r"path=\S+", f"path={work / 'lm.binlm'}", line)
        classic.append(line)
        fast.append(f"ProbingPT name=TranslationModel0 num-features=4 path={work / 'probing'} input-factor=0 "
                    "output-factor=0" if line.startswith("PhraseDictionaryMemory ") else line)
    (work / "moses.ini").write_text("\n".join(classic) + "\n")
    (work / "moses2.ini").write_text("\n".join(fast) + "\n")
    return {"moses": work / "moses.ini", "moses2": work / "moses2.ini"}


def _commands(model: Path, peers: dict, stack: int, threads: int) -> dict[str, list[str]]:
    ours = [sys.executable, "-c", "import sys; from minismt.cli import main; sys.exit(main(sys.argv[1:]))",
            "decode", "--model", str(model), "--stack", str(stack), "--jobs", str(threads), "--quiet"]
    commands = {"minismt": ours}
    if "error" not in peers:
        commands["moses2"] = [str(MOSES2), "-f", str(peers["moses2"]), "-threads", str(threads), "-s", str(stack)]
        commands["moses"] = [str(MOSES), "-f", str(peers["moses"]), "-threads", str(threads), "-s", str(stack)]
    return commands


def _first_scores(path: Path) -> dict[int, float]:
    """The model score of each sentence's first n-best line (Moses' n-best format)."""
    scores: dict[int, float] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split(" ||| ")
        scores.setdefault(int(fields[0]), float(fields[-1]))
    return scores


def _search_errors(model: Path, peers: dict, stack: int, sources: Path, work: Path) -> dict:
    """Per sentence, whose 1-best scores higher under the model, ours or Moses2's (one thread, untimed)."""
    ours = work / "ours.nbest"
    commands = _commands(model, peers, stack, 1)
    _, _, status, err = _run(commands["minismt"] + ["--kbest", "1", "--kbest-out", str(ours)], sources,
                             work / "ours.1best")
    if status != 0:
        return {"error": err}
    theirs = work / "moses2.nbest"
    _, _, status, err = _run(commands["moses2"] + ["-n-best-list", str(theirs), "1"], sources, work / "moses2.1best")
    if status != 0:
        return {"error": err}
    a, b = _first_scores(ours), _first_scores(theirs)
    higher = sum(a[i] > b[i] + SCORE_TOLERANCE for i in a)
    lower = sum(a[i] < b[i] - SCORE_TOLERANCE for i in a)
    return {"ours_higher": higher, "ours_lower": lower, "equal": len(a) - higher - lower,
            "no_more_search_errors": higher >= lower}


def run(quick: bool = False) -> dict:
    import sacrebleu
    from corpora.fetch import fetch
    from minismt.io import read_lines
    from minismt.train import Trainer, TrainingConfig
    result: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / "data"
        fetch("multi30k-de-en", data, from_dir=MULTI30K, progress=False, max_train=3000 if quick else None)
        model = work / "model"
        Trainer(TrainingConfig(src=str(data / "train.src"), tgt=str(data / "train.tgt"), out=str(model),
                               lm_order=4, progress=False)).run()
        sources, references = read_lines(data / "test.src"), read_lines(data / "test.tgt")
        if quick:
            sources, references = sources[:100], references[:100]
        (work / "test.src").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
        (work / "empty.src").write_text("\n" * START_UP_LINES, encoding="utf-8")
        peers = _peer_files(model, work / "test.src", work)
        result["peers"] = {"error": peers["error"]} if "error" in peers else "Moses2 (ProbingPT) and Moses"
        stacks = (100, 200) if quick else STACKS
        for argv in _commands(model, peers, stacks[0], 1).values():  # untimed: numba's cache, the files read once
            _run(argv, work / "test.src", work / "warm-up.out")
        for stack in stacks:
            count = min(len(sources), STACK_1000_SENTENCES) if stack == 1000 else len(sources)
            inputs = work / f"input-{stack}.src"
            inputs.write_text("".join(s + "\n" for s in sources[:count]), encoding="utf-8")
            words = sum(len(s.split()) for s in sources[:count])
            refs = references[:count]
            entry: dict = {"sentences": count, "words": words}
            for threads in THREADS:
                commands = _commands(model, peers, stack, threads)
                speeds: dict[str, list[float]] = {name: [] for name in commands}
                peaks: dict[str, float] = {}
                outputs: dict[str, list[str]] = {}
                for round_ in range(1 if quick else ROUNDS):
                    names = list(commands) if round_ % 2 == 0 else list(commands)[::-1]
                    for name in names:
                        start_up, _, status, err = _run(commands[name], work / "empty.src", work / "empty.out")
                        seconds, peak, status2, err2 = _run(commands[name], inputs, work / f"{name}.out")
                        if status or status2:
                            speeds[name].append(float("nan"))
                            entry.setdefault("errors", {})[name] = err or err2
                            continue
                        speeds[name].append(words / (seconds - start_up))
                        peaks[name] = max(peaks.get(name, 0.0), peak)
                        outputs[name] = [line.strip() for line in read_lines(work / f"{name}.out")]
                cell = {}
                for name, values in speeds.items():
                    cell[name] = {"words_per_second": round(sum(values) / len(values), 1),
                                  "rounds": [round(v, 1) for v in values], "peak_mb": round(peaks.get(name, 0.0))}
                    if name in outputs:
                        cell[name]["bleu"] = round(sacrebleu.corpus_bleu(outputs[name], [refs],
                                                                         tokenize="none").score, 2)
                for peer in ("moses2", "moses"):
                    if peer in cell and cell[peer]["words_per_second"] > 0:
                        cell[f"ratio_to_{peer}"] = round(cell["minismt"]["words_per_second"]
                                                         / cell[peer]["words_per_second"], 2)
                if "moses2" in outputs and "minismt" in outputs:
                    cell["same_1best_as_moses2"] = sum(a == b for a, b in zip(outputs["minismt"], outputs["moses2"]))
                entry[f"threads_{threads}"] = cell
            if "error" not in peers:
                entry["model_scores_vs_moses2"] = _search_errors(model, peers, stack, inputs, work)
            result[f"stack_{stack}"] = entry
    result["targets"] = _targets(result)
    return result


def _targets(result: dict) -> dict:
    """Issue 39's goals: 3x Moses2's words/s at stacks 100 and 200 on one thread, BLEU within 0.1, no more
    search errors."""
    targets = {}
    for stack in (100, 200):
        cell = result.get(f"stack_{stack}", {}).get("threads_1", {})
        if "ratio_to_moses2" not in cell:
            continue
        targets[f"stack {stack}: >= 3x Moses2"] = {"value": cell["ratio_to_moses2"], "met": cell["ratio_to_moses2"] >= 3}
        gap = round(cell["minismt"]["bleu"] - cell["moses2"]["bleu"], 2)
        targets[f"stack {stack}: BLEU within 0.1 of Moses2"] = {"value": gap, "met": gap >= -0.1}
        errors = result[f"stack_{stack}"].get("model_scores_vs_moses2", {})
        if "no_more_search_errors" in errors:
            targets[f"stack {stack}: no more search errors than Moses2"] = {
                "value": f"{errors['ours_higher']} higher, {errors['ours_lower']} lower",
                "met": errors["no_more_search_errors"]}
    return targets
