"""A trained model folder's manifest: its name and format, the dense features of the phrase-based and
the Hiero model with their default weights, and :func:`load_manifest`, where ``minismt decode`` and
``minismt tune`` start.

``minismt train`` writes the manifest (:mod:`minismt.train`); the decoder and the tuners read it.
:func:`moses_ini` is the phrase-based model as Moses' decoder reads it (``MODEL/moses.ini``),
:func:`moses_chart_ini` the Hiero model with one input set's grammar as Moses' chart decoder reads it.
"""

from __future__ import annotations

import json
import os
from itertools import groupby

from minismt.errors import InputError
from minismt.features import format_weight

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "minismt-model"
MANIFEST_VERSION = 1

# Dense features of the phrase-based model, named as Moses names them in features.dat,
# with the default (untuned) weights Moses' train-model.perl writes into moses.ini.
# UnknownWordPenalty0_0 is -100 per copied unknown word with weight 1, as in Moses (a
# weight of 1, not 100, keeps the weight vector's scale sensible for regularised tuners).
DEFAULT_WEIGHTS = {
    "LexicalReordering0_0": 0.3, "LexicalReordering0_1": 0.3, "LexicalReordering0_2": 0.3,
    "LexicalReordering0_3": 0.3, "LexicalReordering0_4": 0.3, "LexicalReordering0_5": 0.3,
    "Distortion0_0": 0.3,
    "LM0_0": 0.5,
    "WordPenalty0_0": -1.0,
    "PhrasePenalty0_0": 0.2,
    "TranslationModel0_0": 0.2, "TranslationModel0_1": 0.2, "TranslationModel0_2": 0.2,
    "TranslationModel0_3": 0.2,
    "UnknownWordPenalty0_0": 1.0,
}


# Dense features of the Hiero model, in the order and with the default weights of the moses.ini that
# train-model.perl -hierarchical -glue-grammar writes: the rule table's four scores (TranslationModel0)
# and the glue grammar's one (TranslationModel1, ln 2.718 ~ 1 per glue rule).
HIERO_DEFAULT_WEIGHTS = {
    "UnknownWordPenalty0_0": 1.0,
    "WordPenalty0_0": -1.0,
    "PhrasePenalty0_0": 0.2,
    "TranslationModel0_0": 0.2, "TranslationModel0_1": 0.2, "TranslationModel0_2": 0.2,
    "TranslationModel0_3": 0.2,
    "TranslationModel1_0": 1.0,
    "LM0_0": 0.5,
}

MODEL_KINDS = ("phrase", "hiero")


def load_manifest(model_dir: str | os.PathLike, kind: str | None = None) -> dict:
    """The manifest of a trained model directory (``minismt decode`` and ``tune`` start here).

    ``kind``: the model the caller can use (``"phrase"`` or ``"hiero"``); another kind is an
    InputError that says what to do instead."""
    path = os.path.join(os.fspath(model_dir), MANIFEST)
    try:
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except FileNotFoundError:
        raise InputError("no model here (manifest.json missing); run 'minismt train' first",
                         path) from None
    except (OSError, ValueError) as err:
        raise InputError(f"unreadable model manifest ({err})", path) from None
    if manifest.get("format") != MANIFEST_FORMAT or "files" not in manifest:
        raise InputError("not a complete minismt model", path,
                         expected="a manifest written by a finished 'minismt train'")
    found = manifest.get("model", "phrase")
    if kind is not None and found != kind:
        names = {"phrase": "phrase-based", "hiero": "Hiero"}
        raise InputError(f"a {names.get(found, found)} model", path,
                         expected=f"a {names.get(kind, kind)} model")
    return manifest


MOSES_FEATURE_LINES = [
    ("UnknownWordPenalty0", "UnknownWordPenalty"),
    ("WordPenalty0", "WordPenalty"),
    ("PhrasePenalty0", "PhrasePenalty"),
    ("TranslationModel0", "PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={phrase_table_text} "
                          "input-factor=0 output-factor=0"),
    ("LexicalReordering0", "LexicalReordering name=LexicalReordering0 num-features=6 "
                           "type=wbe-msd-bidirectional-fe-allff input-factor=0 output-factor=0 "
                           "path={reordering_table_text}"),
    ("Distortion0", "Distortion"),
    ("LM0", "KENLM name=LM0 factor=0 path={lm_arpa} order={lm_order}"),
]
"""``(producer, [feature] line)`` of the phrase-based model in the order of Moses' train-model.perl; a line's
``{file}`` fields are the manifest's files, made absolute (Moses reads paths from its working folder)."""


HIERO_MOSES_FEATURE_LINES = [
    ("UnknownWordPenalty0", "UnknownWordPenalty"),
    ("WordPenalty0", "WordPenalty"),
    ("PhrasePenalty0", "PhrasePenalty"),
    ("TranslationModel0", "PhraseDictionaryMemory name=TranslationModel0 num-features=4 path={rule_table_text} "
                          "input-factor=0 output-factor=0"),
    ("TranslationModel1", "PhraseDictionaryMemory name=TranslationModel1 num-features=1 path={glue_grammar} "
                          "input-factor=0 output-factor=0 tuneable=true"),
    ("LM0", "KENLM name=LM0 factor=0 path={lm_arpa} order={lm_order}"),
]
"""``(producer, [feature] line)`` of the Hiero model as train-model.perl -hierarchical writes them."""

MOSES_CHART_MAX_SPAN = (20, 1000)
"""``[max-chart-span]`` of train-model.perl's Hiero moses.ini: rule-table rules over at most 20 words,
glue rules over any span."""


def _weight_lines(manifest: dict, feature_lines, weights: dict | None = None) -> list[str]:
    weights = {**manifest["default_weights"], **(weights or {})}
    by_producer = {producer: [weights[name] for name in names]
                   for producer, names in groupby(manifest["features"], key=lambda n: n.rpartition("_")[0])}
    return [f"{producer}= " + " ".join(format_weight(w) for w in by_producer[producer])
            for producer, _ in feature_lines]


def moses_chart_ini(model_dir: str | os.PathLike, manifest: dict, rule_table: str | os.PathLike,
                    input_name: str, weights: dict | None = None) -> str:
    """The text of a moses.ini for Moses' chart decoder (``[search-algorithm] 3``) and the Hiero model
    in ``model_dir`` with the rule table ``rule_table`` (an input set's grammar), the glue grammar and
    the ARPA LM, as train-model.perl -hierarchical -glue-grammar writes it, with ``weights`` (by
    default the untuned default weights)."""
    folder = os.path.abspath(os.fspath(model_dir))
    fields = {key: os.path.join(folder, path) for key, path in manifest["files"].items()}
    fields["rule_table_text"] = os.path.abspath(os.fspath(rule_table))
    fields["lm_order"] = manifest["lm_order"]
    lines = [f"# moses.ini for Moses' chart decoder, written by minismt ({'the given' if weights else 'the untuned default'} "
             f"weights; rules filtered to the input set {input_name!r})", "",
             "[input-factors]", "0", "", "[mapping]", "0 T 0", "1 T 1", "",
             "[cube-pruning-pop-limit]", "1000", "", "[non-terminals]", "X", "",
             "[search-algorithm]", "3", "", "[inputtype]", "3", "",
             "[max-chart-span]", *(str(n) for n in MOSES_CHART_MAX_SPAN), "", "[feature]"]
    lines += [line.format(**fields) for _, line in HIERO_MOSES_FEATURE_LINES]
    lines += ["", "[weight]"] + _weight_lines(manifest, HIERO_MOSES_FEATURE_LINES, weights)
    return "\n".join(lines) + "\n"


def moses_ini(model_dir: str | os.PathLike, manifest: dict) -> str:
    """The text of a moses.ini for the trained model in ``model_dir``: its phrase and reordering tables, its
    ARPA LM (KenLM reads it), the distortion limit and the default weights, in Moses' names and order, so
    that Moses decodes the model (and mert-moses.pl tunes it) as train-model.perl's moses.ini would."""
    folder = os.path.abspath(os.fspath(model_dir))
    fields = {key: os.path.join(folder, path) for key, path in manifest["files"].items()}
    fields["lm_order"] = manifest["lm_order"]
    lines = ["# moses.ini written by minismt train (the untuned default weights)", "",
             "[input-factors]", "0", "", "[mapping]", "0 T 0", "",
             "[distortion-limit]", str(manifest["distortion_limit"]), "", "[feature]"]
    lines += [line.format(**fields) for _, line in MOSES_FEATURE_LINES]
    lines += ["", "[weight]"] + _weight_lines(manifest, MOSES_FEATURE_LINES)
    return "\n".join(lines) + "\n"
