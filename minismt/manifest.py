"""A trained model folder's manifest: its name and format, the phrase-based model's dense features with
their default weights, and :func:`load_manifest`, where ``minismt decode`` and ``minismt tune`` start.

``minismt train`` writes the manifest (:mod:`minismt.train`); the decoder and the tuners read it.
:func:`moses_ini` is the same model as Moses' decoder reads it (``MODEL/moses.ini``).
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


def load_manifest(model_dir: str | os.PathLike) -> dict:
    """The manifest of a trained model directory (``minismt decode`` and ``tune`` start here)."""
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


def moses_ini(model_dir: str | os.PathLike, manifest: dict) -> str:
    """The text of a moses.ini for the trained model in ``model_dir``: its phrase and reordering tables, its
    ARPA LM (KenLM reads it), the distortion limit and the default weights, in Moses' names and order, so
    that Moses decodes the model (and mert-moses.pl tunes it) as train-model.perl's moses.ini would."""
    folder = os.path.abspath(os.fspath(model_dir))
    fields = {key: os.path.join(folder, path) for key, path in manifest["files"].items()}
    fields["lm_order"] = manifest["lm_order"]
    weights = manifest["default_weights"]
    by_producer = {producer: [weights[name] for name in names]
                   for producer, names in groupby(manifest["features"], key=lambda n: n.rpartition("_")[0])}
    lines = ["# moses.ini written by minismt train (the untuned default weights)", "",
             "[input-factors]", "0", "", "[mapping]", "0 T 0", "",
             "[distortion-limit]", str(manifest["distortion_limit"]), "", "[feature]"]
    lines += [line.format(**fields) for _, line in MOSES_FEATURE_LINES]
    lines += ["", "[weight]"]
    lines += [f"{producer}= " + " ".join(format_weight(w) for w in by_producer[producer])
              for producer, _ in MOSES_FEATURE_LINES]
    return "\n".join(lines) + "\n"
