"""What Moses' ``extractor --sctype BLEU`` does: an n-best list + references -> features.dat, scores.dat.

The statistics are minismt's sacrebleu-exact BLEU statistics, which are Moses'
(clipped n-gram matches and counts for n = 1..4, closest reference length, ties
to the shorter) whenever tokens are separated by single spaces, as in Moses
output. Repeated hypotheses of a sentence (same string and features) are
written once, as the extractor does.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.kbest import KBest
from minismt.metrics import BleuReferences
from plugins.cdec.kbest_file import iter_kbest, read_kbest
from plugins.moses.mertfiles import FeaturesBlock, ScoresBlock, write_features_dat, write_scores_dat
from plugins.moses.nbest import read_nbest

SPARSE_EPSILON = 1e-5  # the extractor leaves out sparse values smaller than this


def kbest_blocks(kbest: KBest):
    """features.dat and scores.dat blocks of a KBest with statistics, one pair per instance."""
    if kbest.stats is None:
        raise InputError("the k-best list has no BLEU statistics", expected="statistics to write")
    names = kbest.space.dense_names
    fblocks, sblocks = [], []
    for i in range(kbest.n_instances):
        rows = kbest.rows(i)
        if len(rows) == 0:
            continue
        sparse = []
        for r in rows:
            indices, values = kbest.sparse_row(r)
            sparse.append([(kbest.space.name(int(k)), float(v)) for k, v in zip(indices, values)
                           if abs(v) >= SPARSE_EPSILON])
        sentence = int(kbest.sentence_ids[i])
        fblocks.append(FeaturesBlock(sentence, names, kbest.features[rows.start:rows.stop], sparse))
        sblocks.append(ScoresBlock(sentence, "BLEU", kbest.stats[rows.start:rows.stop].astype(np.float64)))
    return fblocks, sblocks


def read_any_kbest(path, fmt: str) -> KBest:
    """A Moses n-best list or (``fmt="cdec"``) a cdec k-best list whose every feature name becomes dense."""
    if fmt == "moses":
        return read_nbest(path)
    if fmt == "cdec":
        names: dict[str, None] = {}
        for entry in iter_kbest(path):
            names.update(dict.fromkeys(entry.features))
        return read_kbest(path, space=FeatureSpace(list(names)))
    raise InputError(f"k-best format {fmt!r}", expected="'moses' or 'cdec'")


def extract(nbest_path, ref_paths: Sequence, features_path, scores_path, fmt: str = "moses",
            lowercase: bool = False, dedup: bool = True) -> KBest:
    """Write features.dat/scores.dat for an n-best list; returns the KBest with its statistics. An empty
    list is an :class:`InputError` and nothing is written (existing files stay as they were)."""
    kbest = read_any_kbest(nbest_path, fmt)
    if kbest.n_hypotheses == 0:
        raise InputError("no hypotheses", nbest_path, expected="an n-best list with at least one line")
    refs = BleuReferences.from_files(ref_paths, lowercase=lowercase)
    if kbest.n_instances > refs.n_sentences:
        raise InputError(f"sentence id {kbest.n_instances - 1} but the references have "
                         f"{refs.n_sentences} lines", nbest_path,
                         expected=f"ids below {refs.n_sentences}")
    kbest.set_stats(refs.kbest_stats(kbest))
    if dedup:
        kbest = kbest.dedup("hypothesis")
    fblocks, sblocks = kbest_blocks(kbest)
    write_features_dat(os.fspath(features_path), fblocks)
    write_scores_dat(os.fspath(scores_path), sblocks)
    return kbest
