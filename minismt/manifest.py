"""A trained model folder's manifest: its name and format, the phrase-based model's dense features with
their default weights, and :func:`load_manifest`, where ``minismt decode`` and ``minismt tune`` start.

``minismt train`` writes the manifest (:mod:`minismt.train`); the decoder and the tuners read it.
"""

from __future__ import annotations

import json
import os

from minismt.errors import InputError

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
