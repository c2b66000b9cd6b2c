"""minismt extract against the real Moses extractor's files (byte for byte), and on cdec k-best lists."""

from __future__ import annotations

import pytest

from conftest import shared_path
from minismt.cli import main
from plugins.moses.mertfiles import read_extractor_files

CASES = {
    "example": ("NBEST.eqlabels", ["REF.0", "REF.1", "REF.2"]),
    "sparse_demo": ("NBEST.sparse", ["REF.0", "REF.1", "REF.2"]),
    "scorer100": ("nbest.eqlabels", ["reference.100.txt"]),
}


@pytest.mark.parametrize("folder", sorted(CASES))
def test_extract_equals_moses_extractor_byte_for_byte(folder, tmp_path):
    nbest, refs = CASES[folder]
    base = ("fixtures", "moses", folder)
    args = ["extract", "--nbest", str(shared_path(*base, nbest)),
            "--ffile", str(tmp_path / "features.dat"), "--scfile", str(tmp_path / "scores.dat")]
    for ref in refs:
        args += ["--ref", str(shared_path(*base, ref))]
    assert main(args) == 0
    assert (tmp_path / "features.dat").read_bytes() == shared_path(*base, "features.dat").read_bytes()
    assert (tmp_path / "scores.dat").read_bytes() == shared_path(*base, "scores.dat").read_bytes()


def test_extract_cdec_kbest_and_corpus_bleu_of_first_entries(tmp_path):
    base = ("fixtures", "cdec", "decode_nc")
    assert main(["extract", "--format", "cdec", "--nbest", str(shared_path(*base, "kbest.init.100")),
                 "--ref", str(shared_path(*base, "dev.refs")),
                 "--ffile", str(tmp_path / "f.dat"), "--scfile", str(tmp_path / "s.dat")]) == 0
    kbest = read_extractor_files([tmp_path / "f.dat"], [tmp_path / "s.dat"])
    assert kbest.n_instances == 10 and kbest.n_hypotheses == 760
    assert "LanguageModel" in kbest.space.dense_names


def test_extract_with_too_few_reference_lines_is_a_clear_error(tmp_path, capsys):
    short = tmp_path / "short.ref"
    short.write_text("only one line\n")
    assert main(["extract", "--nbest", str(shared_path("fixtures", "moses", "example", "NBEST.eqlabels")),
                 "--ref", str(short), "--ffile", str(tmp_path / "f"), "--scfile", str(tmp_path / "s")]) == 2
    assert "references have 1 lines" in capsys.readouterr().err
    assert not (tmp_path / "f").exists()
