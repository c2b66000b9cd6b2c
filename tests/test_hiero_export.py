"""Moses' table limit and the cdec files of a Hiero grammar (minismt.extract.hiero_export).

* the future score and the table limit against a plain computation (LM scores from
  ``LanguageModel.score`` of each run of target words) on a real small grammar and several limits;
* the real Moses chart decoder with its own load-time ``table-limit`` and with our pre-limited
  table gives the same output (so our limit is Moses');
* the cdec grammar reads back with our cdec reader as the table's rules; the real cdec decodes
  the synthetic test set with our cdec.ini, weights and glue to Moses' chart decoder's output for
  almost every sentence (the recipe of ../fixtures/cdec/m30k-hiero: 978 of 1,000).
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import shared_path
from minismt.errors import InputError
from minismt.extract.grammar import NT, read_cdec_rules
from minismt.extract.hiero_export import (CDEC_GLUE, cdec_weights, future_scores, table_limit,
                                          write_cdec_files)
from minismt.extract.hiero_grammar import HieroGrammar
from minismt.io import read_lines
from minismt.lm import LanguageModel
from minismt.manifest import load_manifest

WEIGHTS = {"UnknownWordPenalty0_0": 1.0, "WordPenalty0_0": -1.0, "PhrasePenalty0_0": 0.2,
           "TranslationModel0_0": 0.2, "TranslationModel0_1": 0.2, "TranslationModel0_2": 0.2,
           "TranslationModel0_3": 0.2, "TranslationModel1_0": -0.5, "LM0_0": 0.5}


@pytest.fixture(scope="module")
def system(hiero_system):
    folder, model = hiero_system
    manifest = load_manifest(model)
    entry = manifest["grammars"]["test"]
    grammar = HieroGrammar.load(model / entry["grammar"])
    lm = LanguageModel.from_arpa(model / manifest["files"]["lm_arpa"])
    return folder, model, manifest, grammar, lm


def _slow_future_score(grammar: HieroGrammar, lm: LanguageModel, r: int, weights) -> float:
    t = grammar.table
    tgt = t.tgt_syms[t.tgt_off[r]:t.tgt_off[r + 1]].tolist()
    runs, run = [], []
    for x in tgt + [-1]:
        if x < 0:
            if run:
                runs.append(run)
            run = []
        else:
            run.append(grammar.tgt_vocab[x])
    lm_est = sum(lm.score(" ".join(words), bos=False, eos=False) for words in runs)
    tm = sum(weights[f"TranslationModel0_{i}"] * max(math.log(t.scores[r, i]), -100.0) for i in range(4))
    return (tm + weights["WordPenalty0_0"] * -sum(len(w) for w in runs) + weights["PhrasePenalty0_0"]
            + weights["LM0_0"] * math.log(10) * lm_est)


def test_future_scores_and_table_limit_equal_their_definition(system):
    _, _, _, grammar, lm = system
    scores = future_scores(grammar, WEIGHTS, lm)
    rng = np.random.default_rng(0)
    for r in rng.choice(len(grammar), size=300, replace=False).tolist():
        assert scores[r] == pytest.approx(_slow_future_score(grammar, lm, r, WEIGHTS), abs=1e-9)
    for limit in (1, 3, 20):
        kept = set(table_limit(grammar, WEIGHTS, lm, limit).tolist())
        expected = set()
        for u in range(grammar.n_sources):
            rules = range(grammar.source_offsets[u], grammar.source_offsets[u + 1])
            expected |= set(sorted(rules, key=lambda r: (-scores[r], r))[:limit])
        assert kept == expected
    assert table_limit(grammar, WEIGHTS, lm, 0).tolist() == list(range(len(grammar)))
    with pytest.raises(InputError):
        table_limit(grammar, WEIGHTS, lm, -1)
    with pytest.raises(InputError, match="LM0_0"):
        future_scores(grammar, {k: v for k, v in WEIGHTS.items() if k != "LM0_0"}, lm)


def _moses() -> Path:
    path = shared_path("tools", "moses", "bin", "moses")
    if not path.is_file():
        pytest.skip(f"{path} is not a file")
    return path


def _run_moses(ini: Path, source: Path, pop: int = 200) -> list[str]:
    done = subprocess.run([str(_moses()), "-f", str(ini), "-i", str(source), "-threads", "1",
                           "-cube-pruning-pop-limit", str(pop), "-weight-overwrite",
                           "TranslationModel1= -0.5"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_moses_with_our_pre_limited_table_decodes_as_with_its_own_limit(system, tmp_path):
    """Limit 3 (many source sides over it): Moses loading the full table with table-limit=3 and
    Moses loading our table limited to 3 give the same translations."""
    _, model, manifest, grammar, lm = system
    entry = manifest["grammars"]["test"]
    ini_text = (model / entry["moses_ini"]).read_text()
    full_table = str(model / entry["rule_table_text"])
    rows = table_limit(grammar, WEIGHTS, lm, 3)
    assert len(grammar) - len(rows) > 2000         # 12,578 -> 10,093 when written
    sub = HieroGrammar(grammar.table.take(rows), grammar.src_vocab, grammar.tgt_vocab,
                       np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32))
    sub.write_moses(tmp_path / "limited.gz")
    theirs = tmp_path / "theirs.ini"
    theirs.write_text(ini_text.replace(f"path={full_table} ", f"path={full_table} table-limit=3 "))
    ours = tmp_path / "ours.ini"
    ours.write_text(ini_text.replace(f"path={full_table} ",
                                     f"path={tmp_path / 'limited.gz'} table-limit=3 "))
    source = model / entry["input"]
    assert _run_moses(theirs, source) == _run_moses(ours, source)


def test_cdec_files(system, tmp_path):
    folder, model, manifest, grammar, lm = system
    entry = manifest["grammars"]["test"]
    sentences = read_lines(model / entry["input"])
    info = write_cdec_files(grammar, sentences, tmp_path / "cdec", model / manifest["files"]["lm_arpa"],
                            WEIGHTS, lm)
    rows = table_limit(grammar, WEIGHTS, lm)
    assert info["rules"] == len(rows)
    rules = read_cdec_rules(tmp_path / "cdec" / "grammar.gz")
    assert len(rules) == len(rows)
    t = grammar.table
    for rule, r in zip(rules[::97], rows[::97].tolist()):
        src = [NT("X", -x) if x < 0 else grammar.src_vocab[x] for x in t.src_syms[t.src_off[r]:t.src_off[r + 1]]]
        tgt = [NT("X", -x) if x < 0 else grammar.tgt_vocab[x] for x in t.tgt_syms[t.tgt_off[r]:t.tgt_off[r + 1]]]
        assert [s if isinstance(s, str) else s.index for s in rule.source] == \
            [s if isinstance(s, str) else s.index for s in src]
        assert [s if isinstance(s, str) else s.index for s in rule.target] == \
            [s if isinstance(s, str) else s.index for s in tgt]
        expected = {f"TM{i}": max(math.log(t.scores[r, i]), -100.0) for i in range(4)}
        assert rule.features.keys() == set(expected) | {"PhrasePenalty"}
        assert all(rule.features[k] == pytest.approx(v, rel=1e-6, abs=1e-6) for k, v in expected.items())
    assert read_lines(tmp_path / "cdec" / "glue") == list(CDEC_GLUE)
    assert read_lines(tmp_path / "cdec" / "input.txt")[0] == f"<s> {sentences[0]} </s>"
    weights = dict(line.split() for line in read_lines(tmp_path / "cdec" / "weights"))
    assert {k: float(v) for k, v in weights.items()} == pytest.approx(cdec_weights(WEIGHTS))
    assert float(weights["WordPenalty"]) == pytest.approx(-math.log(10))
    assert float(weights["PassThrough"]) == pytest.approx(-99.8)

    cdec = shared_path("tools", "cdec", "cdec")
    if not cdec.is_file():
        pytest.skip(f"{cdec} is not a file")
    done = subprocess.run([str(cdec), "-c", str(tmp_path / "cdec" / "cdec.ini"), "-w",
                           str(tmp_path / "cdec" / "weights"), "-i", str(tmp_path / "cdec" / "input.txt")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    ours = [line.removeprefix("<s>").removesuffix("</s>").strip() for line in done.stdout.splitlines()]
    moses = _run_moses(model / entry["moses_ini"], model / entry["input"])
    assert len(ours) == len(moses) == len(sentences)
    same = sum(a == b.strip() for a, b in zip(ours, moses))
    assert same >= 0.95 * len(sentences), same     # 297 of 300 when written
