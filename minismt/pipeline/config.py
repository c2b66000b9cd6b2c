"""The configuration of ``minismt pipeline``: a TOML file, checked strictly.

Every section and key is listed in :data:`SCHEMA` with its default and what it
accepts. A file with a key that is not there, a value of the wrong type or a
tuner that does not exist is refused with an :class:`~minismt.errors.InputError`
naming the file, the line (where it can be found) and the key, and listing the
valid keys. Relative paths are read relative to the folder of the config file.

Example (every section optional except ``[tune]``'s ``tuners``)::

    [corpus]
    name = "synthetic"      # or a registered corpus (minismt corpora list), or "local" + path
    size = 3000             # training pairs (synthetic: generated; others: the first N)
    seed = 1
    dev = 150
    test = 200

    [train]
    lm_order = 4            # the default, as minismt train --lm-order

    [tune]
    tuners = ["mert", "pro", "apro", "kbmira"]
    seeds = 3               # or a list: [0, 1, 2]
    iterations = 5
    kbest = 100
    stack = 50

    [tune.params.pro]
    gamma = 5000

    [test]
    bootstrap_samples = 1000

    [output]
    work_dir = "work"
    report_dir = "report"
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable

from corpora import registry
from minismt.decode.settings import DecoderSettings
from minismt.errors import InputError
from minismt.io import iter_lines
from minismt.manifest import DEFAULT_WEIGHTS

# ``minismt --help`` (0.11 s) imports this module (minismt.pipeline imports it): the checks that need
# the tuners (0.67 s), minismt.extract (0.27 s) or sacrebleu (27 ms), and the TOML reader (tomllib:
# 1.6 ms), import them when they run.


class _Bad(Exception):
    """A value a checker refuses; ``expected`` says what it accepts."""

    def __init__(self, expected: str):
        super().__init__(expected)
        self.expected = expected


@dataclass(frozen=True)
class Key:
    """One configuration key: its default, a checker returning the normalised value, and help."""

    default: Any
    check: Callable[[Any], Any]
    help: str


# ---- checkers ------------------------------------------------------------------------------
def _int(minimum: int | None = None, optional: bool = False):
    def check(value):
        if optional and value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
            raise _Bad("an integer" + (f" >= {minimum}" if minimum is not None else ""))
        return value
    return check


def _bool(value):
    if not isinstance(value, bool):
        raise _Bad("true or false")
    return value


def _str(optional: bool = False, choices: tuple[str, ...] | None = None):
    def check(value):
        if optional and value is None:
            return None
        if not isinstance(value, str) or not value:
            raise _Bad("a non-empty string")
        if choices is not None and value not in choices:
            raise _Bad("one of " + ", ".join(repr(c) for c in choices))
        return value
    return check


def _aligner(value):
    from minismt.align import ALIGNERS  # numba: only when a configuration is checked
    if value not in ALIGNERS:
        raise _Bad("one of " + ", ".join(repr(a) for a in ALIGNERS))
    return value


def _tuner_list(value):
    from tuners import REGISTRY  # importing the package registers every tuner
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise _Bad("a list of tuner names, e.g. [\"mert\", \"apro\"]")
    unknown = [v for v in value if v not in REGISTRY]
    if unknown:
        raise _Bad(f"registered tuner names ({unknown[0]!r} is not one): " + ", ".join(sorted(REGISTRY)))
    if len(set(value)) != len(value):
        raise _Bad("each tuner once")
    return list(value)


def _feature_patterns(value):
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() and " " not in v for v in value):
        raise _Bad("a list of feature names or shell patterns, e.g. [\"LM0_0\", \"LexicalReordering0_*\"]")
    return list(value)


def _seeds(value):
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise _Bad("a number of seeds >= 1, or a list of seeds")
        return list(range(value))
    if (isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                  for v in value) and len(set(value)) == len(value)):
        return list(value)
    raise _Bad("a number of seeds N (seeds 0..N-1) or a list of distinct integers >= 0")


def _params(value):
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise _Bad("tables [tune.params.TUNER] of the tuners' parameters")
    return copy.deepcopy(value)


def _path(optional: bool = True):
    return _str(optional=optional)


SYNTHETIC = "synthetic"
LOCAL = "local"

SCHEMA: dict[str, dict[str, Key]] = {
    "corpus": {
        "name": Key(SYNTHETIC, _str(), "'synthetic' (built in, no download), a registered corpus such as "
                    "'multi30k-de-en' (see 'minismt corpora list'), or 'local' with path"),
        "size": Key(None, _int(1, optional=True), "training pairs: synthetic, how many to generate "
                    "(default 3000); other corpora, keep only the first N (default all)"),
        "seed": Key(1, _int(0), "synthetic: the seed choosing the sentences"),
        "dev": Key(None, _int(1, optional=True), "dev pairs (synthetic: default 150; others: the first N, "
                   "default all)"),
        "test": Key(None, _int(1, optional=True), "test pairs (synthetic: default 200; others: the first N, "
                    "default all)"),
        "test_split": Key("test", _str(), "which split is the test set (e.g. 'test2017' for Multi30k)"),
        "from": Key(None, _path(), "registered corpora: copy the raw files from this folder instead of "
                    "downloading them"),
        "path": Key(None, _path(), "name = 'local': a folder with {train,dev,test}.{src,tgt}, tokenised"),
    },
    "train": {
        "lm_order": Key(4, _int(2), "order of the Kneser-Ney LM (2-6; 4, as minismt train and the Moses "
                        "reference system)"),
        "max_length": Key(80, _int(1), "drop training pairs with a side longer than this"),
        "max_phrase_length": Key(7, _int(1), "longest phrase extracted"),
        "table_limit": Key(20, _int(1), "translations kept per source phrase"),
        "ibm1_iterations": Key(5, _int(0), "IBM Model 1 EM iterations (aligner 'hmm')"),
        "hmm_iterations": Key(5, _int(0), "HMM alignment EM iterations (aligner 'hmm')"),
        "aligner": Key("fast-align", _aligner, "word aligner: 'fast-align' (IBM Model 2 with a "
                       "diagonal prior, as fast_align -d -o -v) or 'hmm' (IBM Model 1 then HMM)"),
        "lowercase": Key(False, _bool, "lowercase the training text"),
        "model": Key("phrase", _str(choices=("phrase", "hiero")), "'phrase' (phrase-based) or 'hiero' "
                     "(hierarchical phrase-based, Chiang 2007: minismt train --hiero with grammars for "
                     "the dev and test sets, decoded by minismt's chart decoder)"),
    },
    "tune": {
        "tuners": Key(None, _tuner_list, "the tuners to run and compare, e.g. [\"mert\", \"pro\"]"),
        "seeds": Key([0], _seeds, "seeds per tuner: a number N (0..N-1) or a list; a tuner without "
                     "randomness runs once and its run stands for every seed"),
        "iterations": Key(5, _int(1), "decoding iterations per run (at most)"),
        "kbest": Key(100, _int(1), "distinct k-best hypotheses per dev sentence and iteration"),
        "stack": Key(DecoderSettings.stack_size, _int(1), "decoder stack size while tuning (Moses' -s)"),
        "accumulate": Key(None, _str(optional=True, choices=("merge", "aggregate", "none")),
                          "k-best accumulation (default: the tuner's own, merge or aggregate)"),
        "reset_after": Key(None, _int(1, optional=True), "accumulate afresh every N iterations"),
        "keep": Key("best", _str(choices=("best", "last")), "weights kept: best dev BLEU or the last"),
        "lowercase": Key(False, _bool, "case-insensitive BLEU while tuning"),
        "fix": Key([], _feature_patterns, "features whose weights stay at the untuned values (names or shell "
                   "patterns, as minismt tune --fix); the tuners still count them in every score"),
        "step_search": Key(None, _str(optional=True, choices=("forest", "none")),
                           "how far an iteration moves towards its tuner's weights: 'forest' (the point of the "
                           "step with the best BLEU on the dev set's search graphs, minismt tune --step-search; "
                           "the default for every tuner that does not fit on forests) or 'none' (the whole step)"),
        "accept": Key("decoded", _str(choices=("decoded", "any")),
                      "which steps an iteration keeps: 'decoded' (a step only when its decoded dev BLEU is not "
                      "below that of the weights it started from, else halved and decoded again; minismt tune "
                      "--accept) or 'any'"),
        "decode_norm": Key(None, _str(optional=True, choices=("l1", "none")),
                           "'l1': decode every tuned weight vector scaled to an L1 norm of 1, as mert-moses.pl "
                           "(minismt tune --decode-norm; the default for the n-best tuners) or 'none'"),
        "jobs": Key(DecoderSettings.jobs, _int(1), "decoding processes per tuning run (does not change results)"),
        "parallel": Key(1, _int(1), "tuning runs at the same time, each in its own process "
                        "(does not change results)"),
        "params": Key({}, _params, "per-tuner parameters: [tune.params.NAME] tables, e.g. "
                      "[tune.params.apro] C = 0.001"),
        "precompile": Key(True, _bool, "while training, compile the decoder's and tuners' numba kernels in "
                          "a second process (saves minutes on a fresh install; no effect on results)"),
    },
    "test": {
        "stack": Key(None, _int(1, optional=True), "decoder stack size for the test set (default: tune.stack)"),
        "tokenize": Key("none", _str(), "sacrebleu BLEU tokenizer: 'none' (the text is already "
                        "tokenised, as in tuning), '13a', 'intl', ..."),
        "lowercase": Key(False, _bool, "case-insensitive BLEU and chrF"),
        "baseline": Key(True, _bool, "also test the untuned weights (row 'untuned')"),
        "bootstrap_samples": Key(1000, _int(10), "paired bootstrap resamples"),
        "bootstrap_seed": Key(12345, _int(1), "seed of the paired bootstrap (sacrebleu's default 12345; "
                              "0 would mean unseeded to sacrebleu, so it is refused)"),
        "significance": Key("first", _str(choices=("first", "all")), "paired bootstrap between the first "
                            "tuner and each other system ('first') or between every pair ('all')"),
        "jobs": Key(DecoderSettings.jobs, _int(1), "decoding processes for the test set"),
    },
    "output": {
        "work_dir": Key("work", _path(optional=False), "where every step keeps its outputs, by key"),
        "report_dir": Key("report", _path(optional=False), "where report.json, report.md and the PNGs go"),
        "surface_feature": Key("LM0_0", _str(), "the weight whose direction the error-surface figure varies"),
        "hypergraph": Key(True, _bool, "draw one short test sentence's hypergraph"),
        "figures": Key(True, _bool, "draw the PNG figures"),
    },
}

SYNTHETIC_DEFAULTS = {"size": 3000, "dev": 150, "test": 200}
PATH_KEYS = {("corpus", "from"), ("corpus", "path"), ("output", "work_dir"), ("output", "report_dir")}


@dataclass
class PipelineConfig:
    """A checked configuration: one dict per section with every key (defaults filled in)."""

    corpus: dict
    train: dict
    tune: dict
    test: dict
    output: dict
    source: str | None = None  # the TOML file, if any

    @property
    def work_dir(self) -> str:
        return self.output["work_dir"]

    @property
    def report_dir(self) -> str:
        return self.output["report_dir"]

    def to_dict(self) -> dict:
        return {section: copy.deepcopy(getattr(self, section)) for section in SCHEMA}

    def to_toml(self) -> str:
        """TOML text that :func:`load_config` reads back to this configuration."""
        return dump_toml({s: {k: v for k, v in getattr(self, s).items() if v is not None} for s in SCHEMA})


# ---- loading ----------------------------------------------------------------------------------
def _toml_module():
    try:
        import tomllib
        return tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli
            return tomli
        except ModuleNotFoundError:
            raise InputError("reading TOML needs Python >= 3.11 or the 'tomli' package",
                             expected="pip install tomli") from None


def _find_line(text: str | None, section: str, key: str | None) -> int | None:
    """The 1-based line of ``key`` in ``[section]`` (or of the section header), if it can be found."""
    if not text:
        return None
    current = None
    header = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-\" ]+?)\s*\]")
    for number, line in enumerate(text.splitlines(), 1):
        match = header.match(line)
        if match:
            current = match.group(1).replace('"', "").replace(" ", "")
            if key is None and current == section:
                return number
            continue
        if key is None:
            continue
        if current == section and re.match(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=", line):
            return number
        if current is None and re.match(rf"^\s*{re.escape(section)}\s*\.\s*{re.escape(key)}\s*=", line):
            return number
    return None


def load_config(path: str | os.PathLike, overrides: dict | None = None) -> PipelineConfig:
    """Read and check a TOML configuration; relative paths are taken from the file's folder."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as err:
        raise InputError(f"cannot read the configuration: {err.strerror or err}", path) from None
    toml = _toml_module()
    try:
        text = raw.decode("utf-8")
        data = toml.loads(text)
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text ({err})", path) from None
    except toml.TOMLDecodeError as err:
        line = None
        found = re.search(r"line (\d+)", str(err))
        if found:
            line = int(found.group(1))
        raise InputError(f"not valid TOML: {err}", path, line) from None
    for section, values in (overrides or {}).items():
        data.setdefault(section, {}).update(values)
    return check_config(data, path, base_dir=os.path.dirname(os.path.abspath(path)), text=text)


def _scan_local_file(path: str, check_words_up_to: int | None) -> int:
    """The number of lines of ``path``; the words of its first ``check_words_up_to`` lines
    must fit in a Moses table (what training needs)."""
    from minismt.extract.phrases import check_words
    count = 0
    for count, text in iter_lines(path):
        if check_words_up_to is not None and count <= check_words_up_to:
            words = text.split()
            word = check_words(words, range(len(words)))
            if word is not None:
                raise InputError(f"the word {word[:40]!r} cannot be written in a Moses table", path, count,
                                 expected="words without control characters, other than '|||'")
    return count


def _check_local_corpus(corpus: dict) -> None:
    """Both sides of every split of a local corpus have the same number of lines, at least
    one, and the training words fit in Moses' tables.

    Checked here, on the user's files, so that errors name them (and the line) rather
    than the copies the pipeline makes in its work folder (cut to corpus.size, dev, test).
    """
    for split in ("train", "dev", corpus["test_split"]):
        src, tgt = (os.path.join(corpus["path"], f"{split}.{side}") for side in ("src", "tgt"))
        check = (corpus["size"] or sys.maxsize) if split == "train" else None
        n_src, n_tgt = _scan_local_file(src, check), _scan_local_file(tgt, check)
        if n_src != n_tgt:
            raise InputError(f"{n_tgt} lines, but the source side {src} has {n_src}", tgt,
                             expected="the same number of lines on both sides")
        if n_src == 0:
            raise InputError(f"the {split} split of the local corpus is empty", src,
                             expected="at least one sentence pair")


def check_config(data: dict, path: str | None = None, base_dir: str | None = None,
                 text: str | None = None) -> PipelineConfig:
    """Check a configuration given as nested dicts (what TOML gives) and fill in the defaults."""

    def fail(message: str, section: str, key: str | None, expected: str | None = None):
        raise InputError(message, path, _find_line(text, section, key), expected=expected)

    if not isinstance(data, dict):
        raise InputError("the configuration is not a table", path)
    for section in data:
        if section not in SCHEMA:
            fail(f"unknown section [{section}]", section, None,
                 expected="one of " + ", ".join(f"[{s}]" for s in SCHEMA))
    base_dir = base_dir or os.getcwd()
    sections: dict[str, dict] = {}
    for section, keys in SCHEMA.items():
        given = data.get(section, {})
        if not isinstance(given, dict):
            fail(f"{section} is not a table", section, None, expected=f"a [{section}] section")
        for key in given:
            if key not in keys:
                fail(f"unknown key {section}.{key}", section, key,
                     expected=f"one of the keys of [{section}]: " + ", ".join(keys))
        values = {}
        for key, spec in keys.items():
            if key in given:
                try:
                    value = spec.check(given[key])
                except _Bad as bad:
                    fail(f"{section}.{key} = {json.dumps(given[key], default=str)}", section, key,
                         expected=bad.expected)
                if (section, key) in PATH_KEYS and value is not None:
                    value = os.path.normpath(os.path.join(base_dir, os.path.expanduser(value)))
            else:
                value = copy.deepcopy(spec.default)
                if (section, key) in PATH_KEYS and value is not None:
                    value = os.path.normpath(os.path.join(base_dir, value))
            values[key] = value
        sections[section] = values

    corpus, tune, test = sections["corpus"], sections["tune"], sections["test"]
    # corpus: the name decides which other keys make sense
    name = corpus["name"]
    if name == SYNTHETIC:
        for key, default in SYNTHETIC_DEFAULTS.items():
            if corpus[key] is None:
                corpus[key] = default
        for key in ("from", "path"):
            if corpus[key] is not None:
                fail(f"corpus.{key} with the synthetic corpus", "corpus", key,
                     expected=f"corpus.{key} only with a registered corpus ('from') or name = 'local' ('path')")
        if corpus["test_split"] != "test":
            fail(f"corpus.test_split = {corpus['test_split']!r} with the synthetic corpus", "corpus",
                 "test_split", expected="'test' (the synthetic corpus has train, dev and test)")
    elif name == LOCAL:
        if corpus["path"] is None:
            fail("corpus.name = 'local' without corpus.path", "corpus", "name",
                 expected="path = a folder with {train,dev,test}.{src,tgt}")
        if corpus["from"] is not None:
            fail("corpus.from with a local corpus", "corpus", "from", expected="only corpus.path")
        for split in ("train", "dev", corpus["test_split"]):
            for side in ("src", "tgt"):
                file = os.path.join(corpus["path"], f"{split}.{side}")
                if not os.path.exists(file):
                    fail(f"corpus.path has no {split}.{side} ({file})", "corpus", "path",
                         expected="a folder with {train,dev,test}.{src,tgt}")
        _check_local_corpus(corpus)
    else:
        if name not in registry.CORPORA:
            fail(f"corpus.name = {name!r}", "corpus", "name",
                 expected=f"'{SYNTHETIC}', '{LOCAL}' or a registered corpus: " + ", ".join(registry.names()))
        if corpus["path"] is not None:
            fail("corpus.path with a registered corpus", "corpus", "path", expected="name = 'local'")
        splits = [s for s in registry.SPLITS if s not in ("train", "dev")]
        if corpus["test_split"] not in splits:
            fail(f"corpus.test_split = {corpus['test_split']!r}", "corpus", "test_split",
                 expected="one of " + ", ".join(splits))
        if corpus["from"] is not None and not os.path.isdir(corpus["from"]):
            fail(f"corpus.from is not a folder ({corpus['from']})", "corpus", "from",
                 expected="a folder holding the corpus' raw files")
    if not 2 <= sections["train"]["lm_order"] <= 6:
        fail(f"train.lm_order = {sections['train']['lm_order']}", "train", "lm_order",
             expected="an order from 2 to 6")
    # tune: tuners required; parameters only for listed tuners, and accepted by them
    if tune["tuners"] is None:
        fail("no tuners: tune.tuners is missing", "tune", None, expected='tuners = ["mert", ...] in [tune]')
    from tuners.base import get_tuner
    for tuner, params in tune["params"].items():
        if tuner not in tune["tuners"]:
            fail(f"tune.params.{tuner}: {tuner!r} is not in tune.tuners", f"tune.params.{tuner}", None,
                 expected="parameters of the listed tuners: " + ", ".join(tune["tuners"]))
        try:
            valid = get_tuner(tuner).get_params()
        except InputError as err:
            fail(f"tune.params.{tuner}: {err.message}", f"tune.params.{tuner}", None, expected=err.expected)
        for key in params:
            if key not in valid:
                fail(f"unknown key tune.params.{tuner}.{key}", f"tune.params.{tuner}", key,
                     expected=f"parameters of {tuner}: " + ", ".join(valid))
        try:
            check = getattr(get_tuner(tuner, **params), "_check_params", None)
            if check is not None:  # the values too, where the tuner checks them before fitting
                check()
        except InputError as err:
            fail(f"tune.params.{tuner}: {err.message}", f"tune.params.{tuner}", None, expected=err.expected)
        except (ValueError, TypeError) as err:
            fail(f"tune.params.{tuner}: {err}", f"tune.params.{tuner}", None)
    if test["stack"] is None:
        test["stack"] = tune["stack"]
    if sections["output"]["surface_feature"] not in DEFAULT_WEIGHTS:
        fail(f"output.surface_feature = {sections['output']['surface_feature']!r}", "output", "surface_feature",
             expected="a feature of the model: " + ", ".join(DEFAULT_WEIGHTS))
    try:
        from minismt.metrics.evaluate import bleu_scorer  # sacrebleu: see the note at the top
        bleu_scorer(tokenize=test["tokenize"])
    except InputError as err:
        fail(f"test.tokenize = {test['tokenize']!r}", "test", "tokenize", expected=err.expected)
    source = os.path.abspath(path) if path is not None and os.path.isfile(path) else path
    return PipelineConfig(**sections, source=source)


# ---- writing TOML (the demo's configuration, --print-config) ----------------------------------
def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as a TOML value")


def dump_toml(data: dict, prefix: str = "") -> str:
    """TOML text of nested dicts of scalars and lists (enough for a pipeline configuration)."""
    lines, tables = [], []
    for key, value in data.items():
        if isinstance(value, dict):
            tables.append((key, value))
        elif value is not None:
            lines.append(f"{key} = {_toml_value(value)}")
    out = []
    if prefix and (lines or not tables):
        out.append(f"[{prefix}]")
    out.extend(lines)
    text = "\n".join(out)
    for key, value in tables:
        sub = dump_toml(value, f"{prefix}.{key}" if prefix else key)
        text = (text + "\n\n" + sub) if text else sub
    return text + ("\n" if not prefix else "")


def describe_schema() -> str:
    """Every section and key with its default and meaning (for --help)."""
    parts = []
    for section, keys in SCHEMA.items():
        parts.append(f"[{section}]")
        for key, spec in keys.items():
            default = "-" if spec.default is None else json.dumps(spec.default)
            parts.append(f"  {key} (default {default}): {spec.help}")
    return "\n".join(parts)
