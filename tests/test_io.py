"""Line reading (gzip, CRLF, stdin-like pipes, bad bytes) and atomic writes."""

from __future__ import annotations

import gzip
import os

import pytest

from minismt.errors import InputError
from minismt.features import FeatureSpace, read_weights, write_weights
from minismt.io import atomic_write, iter_lines, read_lines


def test_plain_gzip_and_crlf(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"x y\r\nz\n\nlast")
    with gzip.open(tmp_path / "b.unusual-name", "wb") as handle:
        handle.write(b"x y\r\nz\n\nlast")
    assert read_lines(tmp_path / "a.txt") == ["x y", "z", "", "last"]
    assert read_lines(tmp_path / "b.unusual-name") == ["x y", "z", "", "last"]


def test_non_utf8_and_corrupt_gzip_name_the_line(tmp_path):
    (tmp_path / "bad").write_bytes(b"fine\nfine\n\xc3\x28 broken\n")
    with pytest.raises(InputError) as err:
        read_lines(tmp_path / "bad")
    assert err.value.line == 3 and err.value.path == str(tmp_path / "bad")
    data = gzip.compress(b"line\n" * 1000)
    (tmp_path / "cut.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="gzip"):
        read_lines(tmp_path / "cut.gz")
    with pytest.raises(InputError, match="cannot open"):
        list(iter_lines(tmp_path / "missing"))


def test_atomic_write_keeps_the_old_file_when_interrupted(tmp_path):
    target = tmp_path / "weights.txt"
    target.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as out:
            out.write("partial")
            raise RuntimeError("killed")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["weights.txt"]
    with atomic_write(tmp_path / "x.gz") as out:
        out.write("compressed\n")
    assert read_lines(tmp_path / "x.gz") == ["compressed"]


def test_weights_round_trip_exactly(tmp_path):
    weights = {"LM0_0": 0.1 + 0.2, "WordPenalty0_0": -1e-17, "sp_a": 3.0}
    write_weights(tmp_path / "w", weights)
    assert read_weights(tmp_path / "w") == weights
    (tmp_path / "bad").write_text("a 1\nb nan\n")
    with pytest.raises(InputError) as err:
        read_weights(tmp_path / "bad")
    assert err.value.line == 2


def test_feature_space_dense_first_then_growing_sparse():
    space = FeatureSpace(["a", "b"])
    assert space.add("s1") == 2 and space.add("a") == 0 and space.add("s1") == 2
    assert space.dense_names == ["a", "b"] and space.sparse_names == ["s1"]
    dense, idx, val = space.split({"b": 2.0, "s2": 1.5, "a": -1.0})
    assert dense.tolist() == [-1.0, 2.0] and idx.tolist() == [3] and val.tolist() == [1.5]
    w = space.weights({"s2": 4.0, "a": 1.0})
    assert w.tolist() == [1.0, 0.0, 0.0, 4.0]
    assert space.weights_dict(w) == {"a": 1.0, "b": 0.0, "s2": 4.0}
    with pytest.raises(InputError, match="unknown feature"):
        space.index("nope")
    with pytest.raises(InputError):
        FeatureSpace(["a", "a"])
    with pytest.raises(InputError):
        space.add("has space")
    assert FeatureSpace.from_json(space.to_json()) == space


def test_strict_numbers_bom_and_unwritable_weights(tmp_path):
    from minismt.features import parse_float
    for bad in ["1_000", "\u0661\u0662", "\uff11.5", "nan", "inf", "-Infinity", "1e999", "", "0x10"]:
        with pytest.raises(InputError):
            parse_float(bad)
    assert parse_float(".5") == 0.5 and parse_float("-3e-05") == -3e-05 and parse_float("+2.") == 2.0
    (tmp_path / "bom").write_bytes("\ufeffGlue 1\nLM 2\n".encode("utf-8"))
    assert read_weights(tmp_path / "bom") == {"Glue": 1.0, "LM": 2.0}
    for weights in ({"a b": 1.0}, {"a#b": 1.0}, {"": 1.0}, {"x": float("nan")}):
        with pytest.raises(InputError):
            write_weights(tmp_path / "out", weights)
        assert not (tmp_path / "out").exists()


def test_builder_rejects_negative_sentence_ids():
    from minismt.kbest import KBestBuilder
    with pytest.raises(InputError, match="sentence id -1"):
        KBestBuilder(FeatureSpace()).add(-1, "a", [])
