"""A drop-in for Moses' ``kbmira`` that runs any n-best tuner of minismt.

``mert-moses.pl --batch-mira --mertdir DIR`` runs ``DIR/kbmira`` with the
flags of Moses' batch MIRA (Cherry & Foster 2012) once per tuning iteration::

    kbmira [--batch-mira-args] --dense-init run3.init.opt [--sparse-init run3.sparse-weights]
           [-r SEED] --ffile run1.features.dat ... --scfile run1.scores.dat ... -o mert.out

and reads back the weights file (``F<i> value`` per dense feature, then
``name value`` per sparse feature, which it divides by the dense L1 sum) and
the log line ``Best BLEU = x`` from standard error. This program takes the
same flags and writes the same file and lines, but tunes with a tuner of
:data:`tuners.base.REGISTRY` chosen by ``--tuner`` (default ``apro``); with
``--tuner kbmira`` it is Moses' kbmira with its de-duplication bug fixed
(the ``kbmira-dedupfix`` runs of ``../shared/fixtures/moses``, reproduced
to the 6 digits Moses prints). Installed as ``kbmira`` in a copy of the
user's mertdir (next to Moses' ``extractor``, ``mert`` and ``pro``), it
lets ``mert-moses.pl`` tune with any of minismt's n-best tuners;
``--batch-mira-args "--tuner pro --tuner-param seed=3"`` picks the tuner.

The features/scores files of all iterations are merged as Moses' kbmira
merges them: the hypotheses of each sentence concatenated in file order,
and a hypothesis whose feature vector repeats an earlier one of the same
sentence dropped. ``Best BLEU`` is the corpus BLEU (Moses': unsmoothed,
with the reference lengths of scores.dat) of the model-best hypotheses of
those lists under the weights written.

``-t hypergraph -H DIR -R REF`` reads Moses hypergraphs
(:func:`plugins.moses.hypergraph.read_moses_hypergraphs`) with the dense
features named by the ``name= value`` start file, takes the 100 best
distinct translations of each graph under the start weights, scores them
against the references (:class:`minismt.metrics.BleuReferences`) and tunes
on those lists; so ``--tuner kbmira`` is then batch MIRA on the lists, not
Moses' hope/fear search inside the graphs.

Unlike Moses' kbmira, the weights file is written once, at the end, and
always (with the start weights if no epoch of ``--tuner kbmira`` scores
above 0, where Moses writes nothing and mert-moses.pl would reuse a stale
file).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import textwrap
import time

import numpy as np

from minismt.errors import InputError
from minismt.features import FeatureSpace, parse_float
from minismt.io import iter_lines
from minismt.kbest import KBest, kbest_of
from plugins.moses.hypergraph import moses_feature_name, read_moses_hypergraphs
from plugins.moses.mertfiles import (KBMIRA_DENSE_NAME, format_kbmira_weights, name_value_lines,
                                     read_extractor_files, write_kbmira_weights)
from plugins.moses.nbest import format_number

PROG = "minismt-kbmira"
DEFAULT_TUNER = "apro"
MOSES_C = 0.01
MOSES_DECAY = 0.999
MOSES_ITERS = 60
MOSES_HG_PRUNE = 50
HG_KBEST = 100
"""Distinct translations taken from each hypergraph (-t hypergraph) for the n-best tuners."""
SCCONFIG_VALUES = {"case": ("true", "false"), "reflen": ("closest", "shortest", "average")}
"""Scorer config keys of Moses' BLEU scorer this drop-in accepts, with their values."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are :class:`InputError` (one line, exit status 2)."""

    def error(self, message):
        raise InputError(message, expected=f"the flags of '{PROG} --help'")


def _float_in(low: float, high: float, low_open: bool, what: str):
    def convert(text: str) -> float:
        try:
            value = parse_float(text)
        except InputError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if (value <= low if low_open else value < low) or value > high:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value
    return convert


def _int_in(low: int, high: int, what: str):
    def convert(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value
    return convert


def build_parser() -> argparse.ArgumentParser:
    """The command line: Moses kbmira's flags plus ``--tuner`` and ``--tuner-param``."""
    p = _Parser(
        prog=PROG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.fill(
            "Drop-in replacement for Moses' 'kbmira' (batch k-best MIRA) that tunes with any "
            "n-best tuner of minismt. It takes kbmira's flags, reads the extractor's "
            "features.dat/scores.dat files of every tuning iteration, and writes kbmira's "
            "weights file ('F<i> value' per dense feature, then 'name value' per sparse "
            "feature) and the stderr lines mert-moses.pl parses ('Best BLEU = x'). Install it "
            "as 'kbmira' in a copy of your Moses mertdir and run mert-moses.pl --batch-mira "
            "--mertdir THATDIR; pick the tuner with --batch-mira-args '--tuner NAME'. "
            "'--tuner kbmira' is Moses' kbmira with its hypothesis de-duplication bug fixed.",
            width=79, break_on_hyphens=False),
        epilog=(
            "example (what mert-moses.pl runs in iteration 2):\n"
            f"  {PROG} --dense-init run2.init.opt -r 2000 --ffile run1.features.dat "
            "--ffile run2.features.dat\n"
            "      --scfile run1.scores.dat --scfile run2.scores.dat -o mert.out 2> mert.log\n"
            f"  {PROG} --tuner kbmira -d init.opt -F features.dat -S scores.dat -r 1234 "
            "-o weights.txt\n\n"
            "exit status: 0 success, 2 bad input (one 'error:' line on stderr), 130 interrupted"))
    data = p.add_argument_group("input")
    data.add_argument("-t", "--type", default="nbest", metavar="nbest|hypergraph",
                      help="what to tune on: 'nbest' (default) reads the -F/-S files; "
                           f"'hypergraph' reads the -H hypergraphs and tunes on the {HG_KBEST} best "
                           "distinct translations of each under the start weights, scored "
                           "against the -R references")
    data.add_argument("-F", "--ffile", action="append", default=[], metavar="FILE",
                      help="features.dat of one tuning iteration (Moses extractor, plain or "
                           "gzipped); repeat for several iterations, in the order of their -S")
    data.add_argument("-S", "--scfile", action="append", default=[], metavar="FILE",
                      help="scores.dat (BLEU statistics) matching the -F at the same position; "
                           "repeat as -F")
    data.add_argument("-H", "--hgdir", metavar="DIR",
                      help="directory of Moses hypergraphs (moses -output-search-graph-hypergraph), "
                           "one file <sentence id>[.ext] per sentence (-t hypergraph)")
    data.add_argument("-R", "--reference", action="append", default=[], metavar="FILE",
                      help="reference file, one line per sentence (-t hypergraph; BLEU "
                           "statistics with the closest reference length); repeat for several "
                           "references")
    data.add_argument("--sctype", default="BLEU", metavar="NAME",
                      help="scorer; only BLEU (the default) is supported")
    data.add_argument("-c", "--scconfig", default="", metavar="KEY:VALUE,...",
                      help="scorer configuration as for Moses' BLEU scorer: case:true|false, "
                           "reflen:closest|shortest|average. With -t nbest they were applied by "
                           "the extractor when it wrote scores.dat, so they change nothing here; "
                           "with -t hypergraph case:false scores case-insensitively and reflen "
                           "must be closest")
    start = p.add_argument_group("start point and output")
    start.add_argument("-d", "--dense-init", metavar="FILE",
                       help="start weights of the dense features: Moses mert's init.opt (weights "
                            "on the first line, the min/max lines are ignored) or one "
                            "'name= value' per line, in the order of the features.dat columns "
                            "(default: all 0). -t hypergraph needs the 'name= value' form with "
                            "Moses' feature names (e.g. mert-moses.pl's runN.dense); the weights "
                            "file then lists the dense features in this file's order")
    start.add_argument("-s", "--sparse-init", metavar="FILE",
                       help="start weights of sparse features, one 'name value' per line "
                            "(needs -d; default: all 0)")
    start.add_argument("-o", "--output-file", metavar="FILE",
                       help="weights file to write (atomically); default: standard output, as "
                            "Moses' kbmira. mert-moses.pl passes '-o mert.out'")
    mira = p.add_argument_group("Moses kbmira's hyperparameters (used by --tuner kbmira; "
                                "other tuners ignore them, set theirs with --tuner-param)")
    mira.add_argument("-C", "--cparam", type=_float_in(0.0, math.inf, True, "a number > 0"),
                      metavar="C", help=f"MIRA step-size cap, lower for more regularisation "
                                        f"(default {MOSES_C})")
    mira.add_argument("-D", "--decay", type=_float_in(0.0, 1.0, True, "a number in (0, 1]"),
                      help=f"decay of the BLEU background corpus (default {MOSES_DECAY})")
    mira.add_argument("-J", "--iters", type=_int_in(0, 10 ** 9, "an integer >= 0"), metavar="N",
                      help=f"MIRA epochs (default {MOSES_ITERS})")
    mira.add_argument("--no-shuffle", action="store_true",
                      help="do not shuffle the sentences before each epoch")
    mira.add_argument("--streaming", action="store_true",
                      help="Moses streams the lists to save memory, which implies --no-shuffle; "
                           "here the lists are read into memory and the order is not shuffled")
    mira.add_argument("--model-bg", action="store_true",
                      help="add the model-best instead of the hope to the BLEU background")
    mira.add_argument("--hg-prune", type=_int_in(1, 10 ** 9, "an integer >= 1"),
                      metavar="N", help=f"Moses prunes hypergraphs to N edges per reference word "
                                        f"(default {MOSES_HG_PRUNE}) for its hope/fear search; "
                                        "ignored here (the k-best lists come from the whole graphs)")
    mira.add_argument("--safe-hope", action="store_true",
                      help="Moses' safe hope decoding: not supported (an error)")
    mira.add_argument("--streaming-out", action="store_true",
                      help="Moses prints the weights after every sentence: not supported (an error)")
    common = p.add_argument_group("tuner")
    common.add_argument("-r", "--random-seed", type=_int_in(-2 ** 31, 2 ** 32 - 1, "a 32-bit integer"),
                        metavar="SEED",
                        help="random seed. --tuner kbmira replays Moses' srand(SEED) sentence "
                             "order (without -r: seeded from the clock, as Moses); other tuners "
                             "with a 'seed' parameter get SEED (without -r: their default seed)")
    common.add_argument("--tuner", default=DEFAULT_TUNER, metavar="NAME",
                        help=f"n-best tuner of minismt's registry (default {DEFAULT_TUNER}): "
                             + ", ".join(nbest_tuners()))
    common.add_argument("--tuner-param", action="append", default=[], metavar="KEY=VALUE",
                        help="a constructor parameter of the tuner, e.g. C=0.001 or "
                             "bleu_options={\"smooth\":\"exp\"}; VALUE is read as a JSON literal "
                             "when it is one, else as a string; repeat for several. Wins over "
                             "-C/-D/-J/-r")
    common.add_argument("--verbose", action="store_true",
                        help="print every iteration of the tuner's history (kbmira: always)")
    return p


def nbest_tuners() -> list[str]:
    """Names of the registered tuners that tune on n-best lists."""
    from tuners import REGISTRY  # importing the package registers every tuner

    return sorted(name for name, cls in REGISTRY.items() if cls.tags.fits_on == "kbest")


# ---- init files ------------------------------------------------------------------------------
def read_dense_init(path) -> tuple[list[str] | None, np.ndarray]:
    """Names (None for the legacy format) and values of a kbmira ``--dense-init`` file.

    As Moses' kbmira: a first line without ``=`` is the legacy mert ``init.opt``
    format whose first line holds the weights (its min/max lines are ignored);
    otherwise every non-blank line is ``name= value`` (several values after one
    name are taken in order, as moses.ini writes them, each with that name).
    With n-best lists only the order of the values matters: they weight the
    features.dat columns by position.
    """
    lines = list(iter_lines(path))
    if not lines or not lines[0][1].strip():
        raise InputError("no weights on the first line", path, 1,
                         "init.opt weights or 'name= value' lines")
    if "=" not in lines[0][1]:
        number, text = lines[0]
        return None, np.array([parse_float(t, path, number, "a weight") for t in text.split()])
    names: list[str] = []
    values: list[float] = []
    for number, text in lines:
        if not text.strip():
            continue
        name, equals, rest = text.rpartition("=")
        name = name.strip()
        if not equals or not name or any(c.isspace() for c in name):
            raise InputError(f"{text[:40]!r}", path, number, "'name= value'")
        tokens = rest.split()
        if not tokens:
            raise InputError(f"no value after {name}=", path, number, "'name= value'")
        values.extend(parse_float(t, path, number, "a weight") for t in tokens)
        names.extend([name] * len(tokens))
    return names, np.array(values)


def moses_dense_names(names: list[str]) -> list[str]:
    """The feature names Moses' kbmira gives the values of a ``name= value`` dense init file.

    A run of n > 1 equal consecutive names becomes ``name_1 .. name_n`` (so
    ``TranslationModel0=`` four times gives ``TranslationModel0_1 .. _4``, the
    hypergraph spelling); a name on its own stays as it is.
    """
    out: list[str] = []
    start = 0
    while start < len(names):
        end = start
        while end < len(names) and names[end] == names[start]:
            end += 1
        if end - start == 1:
            out.append(names[start])
        else:
            out.extend(f"{names[start]}_{k}" for k in range(1, end - start + 1))
        start = end
    return out


def read_sparse_init(path) -> dict[str, float]:
    """``{name: weight}`` of a kbmira ``--sparse-init`` file: one ``name value`` per line."""
    weights: dict[str, float] = {}
    for number, name, value in name_value_lines(path, "'name value'"):
        if name in weights:
            raise InputError(f"sparse feature {name!r} given twice", path, number, "each name once")
        weights[name] = value
    return weights


def start_point(space: FeatureSpace, dense: np.ndarray | None, sparse: dict[str, float],
                dense_path=None, sparse_path=None) -> np.ndarray:
    """Start weights over ``space`` (adding the sparse-init names it lacks) from the init files."""
    if dense is not None and dense.shape[0] != space.n_dense:
        raise InputError(f"{dense.shape[0]} dense start weights for the {space.n_dense} dense "
                         f"features of features.dat", dense_path, expected=f"{space.n_dense} weights")
    for name in sparse:
        if name in space and space.is_dense(space.index(name)):
            raise InputError(f"{name!r} is a dense feature of features.dat", sparse_path,
                             expected="sparse feature names only")
        if KBMIRA_DENSE_NAME.fullmatch(name):
            raise InputError(f"sparse feature name {name!r} would read back as a dense index",
                             sparse_path, expected="names not of the form F<number>")
        space.add(name)
    w0 = np.zeros(len(space))
    if dense is not None:
        w0[: space.n_dense] = dense
    for name, value in sparse.items():
        w0[space.index(name)] = value
    return w0


# ---- scorer and tuner ------------------------------------------------------------------------
def parse_scconfig(text: str) -> dict[str, str]:
    """``{key: value}`` of a Moses scorer config ``key:value,key:value`` accepted for BLEU."""
    config: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        key, colon, value = item.partition(":")
        if not colon:
            raise InputError(f"scorer config item {item!r} has no colon", expected="KEY:VALUE")
        if key not in SCCONFIG_VALUES:
            raise InputError(f"scorer config key {key!r} is not supported",
                             expected=", ".join(f"{k}:{'|'.join(v)}" for k, v in SCCONFIG_VALUES.items()))
        if value not in SCCONFIG_VALUES[key]:
            raise InputError(f"scorer config {key}:{value}",
                             expected=f"{key}:{'|'.join(SCCONFIG_VALUES[key])}")
        config[key] = value
    return config


def make_tuner(args, log):
    """The tuner of ``--tuner`` with Moses' flags and ``--tuner-param`` applied; logs what it uses."""
    from tuners import REGISTRY, get_tuner
    from tuners.base import parse_tuner_params

    name = args.tuner
    choices = nbest_tuners()
    if name not in choices:
        problem = (f"unknown tuner {name!r}" if name not in REGISTRY else
                   f"tuner {name!r} fits on {REGISTRY[name].tags.fits_on}, not on n-best lists")
        raise InputError(problem, expected="one of " + ", ".join(choices))
    cls = REGISTRY[name]
    given = parse_tuner_params(args.tuner_param)
    valid = set(cls().get_params())
    unknown = sorted(set(given) - valid)
    if unknown:
        raise InputError(f"tuner {name!r} has no parameter {', '.join(unknown)}",
                         expected="one of " + ", ".join(sorted(valid)))
    params: dict = {}
    mira_flags = [flag for flag, value in (("-C", args.cparam), ("-D", args.decay), ("-J", args.iters),
                                           ("--no-shuffle", args.no_shuffle),
                                           ("--streaming", args.streaming),
                                           ("--model-bg", args.model_bg)) if value]
    if name == "kbmira":
        no_shuffle = args.no_shuffle or args.streaming
        params.update(C=MOSES_C if args.cparam is None else args.cparam,
                      decay=MOSES_DECAY if args.decay is None else args.decay,
                      epochs=MOSES_ITERS if args.iters is None else args.iters,
                      shuffle=not no_shuffle, model_bg=args.model_bg, shuffle_rng="moses")
        log(f"kbmira with c={format_number(params['C'])} decay={format_number(params['decay'])} "
            f"no_shuffle={int(no_shuffle)}")
        if args.random_seed is not None:
            log(f"Initialising random seed to {args.random_seed}")
            params["seed"] = args.random_seed % 2 ** 32
        else:
            log("Initialising random seed from system clock")
            params["seed"] = int(time.time()) % 2 ** 32
    else:
        if mira_flags:
            log(f"note: {' '.join(mira_flags)} set Moses kbmira's hyperparameters; tuner {name} "
                "ignores them (use --tuner-param)")
        if args.random_seed is not None:
            if "seed" in valid:
                log(f"Initialising random seed to {args.random_seed}")
                params["seed"] = args.random_seed
            else:
                log(f"note: tuner {name} uses no random numbers, -r is ignored")
    params.update(given)
    tuner = get_tuner(name, **params)
    log(f"{PROG}: tuning with {tuner!r}")
    return tuner


# ---- running ---------------------------------------------------------------------------------
def format_bleu(value: float) -> str:
    """BLEU as Moses prints it (6 significant digits), never in exponent notation.

    mert-moses.pl reads ``Best BLEU = ([-\\d.]+)``, which would cut ``1e-05`` short.
    """
    text = format_number(value)
    if "e" in text:
        text = f"{value:.12f}".rstrip("0").rstrip(".")
    return text


def _history_line(name: str, index: int, entry: dict) -> str:
    if name == "kbmira":
        return (f"{entry['updates']}/{entry['examples']} updates, avg loss = "
                f"{format_number(entry['avg_loss'])}, BLEU = {format_number(entry['bleu'])}")
    items = ", ".join(f"{k}={format_number(v) if isinstance(v, float) else v}"
                      for k, v in entry.items())
    return f"{name} {index + 1}: {items}"


def load_nbest(args, log) -> KBest:
    """The merged, de-duplicated lists of the -F/-S pairs."""
    if not args.ffile and not args.scfile:
        raise InputError("no features/scores files", expected="-F/--ffile and -S/--scfile")
    if len(args.ffile) != len(args.scfile):
        raise InputError(f"{len(args.ffile)} -F/--ffile and {len(args.scfile)} -S/--scfile",
                         expected="one scores file per features file")
    merged = read_extractor_files(args.ffile, args.scfile)
    data = merged.dedup("hypothesis")
    log(f"Read {merged.n_hypotheses} hypotheses of {merged.n_instances} sentences from "
        f"{len(args.ffile)} features/scores pair(s), {data.n_hypotheses} with distinct feature "
        f"vectors, {data.space.n_dense} dense and {len(data.space) - data.space.n_dense} sparse "
        f"features")
    return data


def load_hypergraphs(args, names: list[str], dense: np.ndarray, sparse: dict[str, float],
                     config: dict[str, str], log) -> tuple[KBest, np.ndarray]:
    """The distinct 100-best lists of the -H hypergraphs under the start weights, with BLEU
    statistics against the -R references, and the start weights over their feature space."""
    from minismt.metrics import BleuReferences

    ours = []
    for moses in moses_dense_names(names):
        name, is_dense = moses_feature_name(moses)
        if not is_dense:
            raise InputError(f"dense start weight {moses!r} is not named as a dense Moses feature",
                             args.dense_init, expected="'Name= value' lines as moses -show-weights prints")
        ours.append(name)
    space = FeatureSpace(ours)
    graphs = read_moses_hypergraphs(args.hgdir, space)
    if not graphs:
        raise InputError("no hypergraph files", args.hgdir, expected="files <sentence id>[.<ext>]")
    references = BleuReferences.from_files(args.reference, lowercase=config.get("case") == "false")
    if references.n_sentences < len(graphs):
        raise InputError(f"{references.n_sentences} reference lines for {len(graphs)} hypergraphs",
                         args.reference[0], expected=f"{len(graphs)} lines")
    w0 = start_point(space, dense, sparse, args.dense_init, args.sparse_init)
    data = kbest_of([graph.kbest(HG_KBEST, w0, distinct=True).rows() for graph in graphs], space)
    data.set_stats(references.kbest_stats(data))
    if args.hg_prune is not None:
        log("note: --hg-prune is ignored: the k-best lists come from the whole hypergraphs")
    log(f"Read {len(graphs)} hypergraphs from {args.hgdir}: the {HG_KBEST} best distinct "
        f"translations of each under the start weights, {data.n_hypotheses} hypotheses, "
        f"{space.n_dense} dense and {len(space) - space.n_dense} sparse features")
    return data, w0


def check_output(path) -> None:
    """Fail before tuning if no weights file can be written at ``path``."""
    if os.path.isdir(path):
        raise InputError("cannot write the weights: a directory", path, expected="a file name")
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"cannot write the weights: {folder} is not a writable folder", path,
                         expected="a file in a writable folder")


def write_output(path, space: FeatureSpace, weights) -> None:
    """The kbmira weights file at ``path`` (atomically), or on standard output for ``None``."""
    if path is None:
        sys.stdout.write(format_kbmira_weights(space, weights))
        sys.stdout.flush()
        return
    try:
        write_kbmira_weights(path, space, weights)
    except OSError as err:
        raise InputError(f"cannot write: {err.strerror or err}", path) from None


def run(args) -> int:
    """Tune as the parsed arguments say; returns the exit status.

    The log lines of the set-up are held back until every input has been read
    and checked, so that bad input gives one error line and nothing else.
    """
    pending: list[str] | None = []

    def log(line: str) -> None:
        if pending is not None:
            pending.append(line)
        else:
            print(line, file=sys.stderr, flush=True)

    if args.type not in ("nbest", "hypergraph"):
        raise InputError(f"unknown batch mira type {args.type!r}", expected="nbest or hypergraph")
    if args.sctype != "BLEU":
        raise InputError(f"scorer {args.sctype!r} is not supported",
                         expected="--sctype BLEU (the statistics of scores.dat must be BLEU's)")
    if args.safe_hope or args.streaming_out:
        flag = "--safe-hope" if args.safe_hope else "--streaming-out"
        raise InputError(f"{flag} is not supported by this drop-in", expected=f"a run without {flag}")
    if args.sparse_init and not args.dense_init:
        raise InputError("sparse initialization requires dense initialization",
                         expected="-d/--dense-init with -s/--sparse-init")
    config = parse_scconfig(args.scconfig)
    if args.type == "hypergraph":
        missing = [flag for flag, value in (("-H/--hgdir", args.hgdir), ("-R/--reference", args.reference),
                                            ("-d/--dense-init", args.dense_init)) if not value]
        if missing:
            raise InputError(f"-t hypergraph without {', '.join(missing)}",
                             expected="-H DIR -R REF ... -d 'name= value' file")
        if config.get("reflen", "closest") != "closest":
            raise InputError(f"reflen:{config['reflen']} with -t hypergraph",
                             expected="reflen:closest (the BLEU statistics of minismt)")
    if args.output_file is not None:
        check_output(args.output_file)
    tuner = make_tuner(args, log)
    names = dense = sparse = None
    if args.dense_init:
        names, dense = read_dense_init(args.dense_init)
        if names is None and args.type == "hypergraph":
            raise InputError("dense start weights in the legacy init.opt format", args.dense_init,
                             expected="'name= value' lines with -t hypergraph (as Moses' kbmira)")
        if names is None:
            log("WARN: dense features in deprecated Moses mert format. Prefer 'name= value' format.")
    if args.sparse_init:
        sparse = read_sparse_init(args.sparse_init)
        log(f"Found {len(sparse)} initial sparse features")
    if args.type == "hypergraph":
        data, w0 = load_hypergraphs(args, names, dense, sparse or {}, config, log)
    else:
        data = load_nbest(args, log)
        w0 = start_point(data.space, dense, sparse or {}, args.dense_init, args.sparse_init)
    print("\n".join(pending), file=sys.stderr, flush=True)
    pending = None
    log(f"Initial BLEU = {format_bleu(data.bleu(w0, smooth='none'))}")
    weights = np.asarray(tuner.fit(data, w0), dtype=np.float64)
    history = getattr(tuner, "history_", None) or []
    if tuner.name == "kbmira" or args.verbose:
        for index, entry in enumerate(history):
            log(_history_line(tuner.name, index, entry))
    elif history:
        log(f"{len(history)} iteration(s); last: {_history_line(tuner.name, len(history) - 1, history[-1])}")
    best = data.bleu(weights, smooth="none")
    write_output(args.output_file, data.space, weights)
    log(f"Best BLEU = {format_bleu(best)}")
    return 0


def main(argv=None) -> int:
    """Run the drop-in kbmira with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
        return run(args)
    except InputError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else 0
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
