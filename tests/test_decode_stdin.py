"""``minismt decode`` from standard input to standard output, as ``moses -f moses.ini < in > out``: the same
translations as from a file, in input order with ``--jobs 2``, each line printed as soon as it is decoded
(before the next line is even written), k-best lists and forests beside it, and input errors that name
``<stdin>`` and the line; for both engines (a Hiero model reads each chunk's grammar from its rule store)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import synthetic_system
from minismt.cli import main
from minismt.io import read_lines


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    """A small synthetic phrase-based model and a 12-sentence test set."""
    return synthetic_system(tmp_path_factory, n_pairs=600, seed=5, dev=6, test=12)


def minismt() -> str:
    return shutil.which("minismt") or str(Path(sys.executable).with_name("minismt"))


def run(argv: list[str], stdin: bytes) -> subprocess.CompletedProcess:
    return subprocess.run([minismt(), *argv], input=stdin, capture_output=True, timeout=300)


@pytest.fixture(params=["phrase", "hiero"])
def engine_system(request):
    """The phrase-based system, then the Hiero one (whose grammars are read from its rule store on stdin)."""
    return request.getfixturevalue("system" if request.param == "phrase" else "hiero_system")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_stdin_to_stdout_equals_the_file_decode_with_its_kbest_list(engine_system, tmp_path, jobs):
    data, model = engine_system
    source = data / "test.src"
    assert main(["decode", "--model", str(model), "--input", str(source), "--output", str(tmp_path / "file.out"),
                 "--kbest", "5", "--kbest-out", str(tmp_path / "file.nbest"), "--quiet"]) == 0
    done = run(["decode", "--model", str(model), "--jobs", jobs, "--kbest", "5", "--kbest-out",
                str(tmp_path / "stdin.nbest")], source.read_bytes())
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode("utf-8").splitlines() == read_lines(tmp_path / "file.out")
    assert read_lines(tmp_path / "stdin.nbest") == read_lines(tmp_path / "file.nbest")
    assert done.stderr.decode().splitlines()[-1] == (
        f"decoded {len(read_lines(source))} sentences ({sum(len(line.split()) for line in read_lines(source))} words)")


def test_a_file_input_can_go_to_stdout_and_stdin_to_a_file(system, tmp_path):
    data, model = system
    source = data / "test.src"
    expected = tmp_path / "expected.out"
    assert main(["decode", "--model", str(model), "--input", str(source), "--output", str(expected),
                 "--quiet"]) == 0
    to_stdout = run(["decode", "--model", str(model), "--input", str(source), "--output", "-"], b"")
    assert to_stdout.stdout.decode("utf-8").splitlines() == read_lines(expected)
    from_stdin = run(["decode", "--model", str(model), "--input", "-", "--output", str(tmp_path / "out")],
                     source.read_bytes())
    assert from_stdin.returncode == 0 and from_stdin.stdout == b""
    assert read_lines(tmp_path / "out") == read_lines(expected)
    one_word = run(["decode", "--model", str(model)], read_lines(source)[0].split()[0].encode("utf-8") + b"\n")
    assert one_word.returncode == 0 and one_word.stderr.decode().splitlines()[-1] == "decoded 1 sentence (1 word)"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_each_line_is_translated_before_the_next_is_written(engine_system, tmp_path, jobs):
    """An interactive session: the translation of a line comes back while the decoder waits for the next one
    (a decoder that read ahead or buffered its output would hang here until its input closes)."""
    data, model = engine_system
    lines = read_lines(data / "test.src")[:3]
    expected = tmp_path / "expected.out"
    (tmp_path / "three.src").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert main(["decode", "--model", str(model), "--input", str(tmp_path / "three.src"), "--output",
                 str(expected), "--quiet"]) == 0
    hypergraphs = tmp_path / "hg"
    process = subprocess.Popen([minismt(), "decode", "--model", str(model), "--jobs", jobs, "--hypergraph-dir",
                                str(hypergraphs)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    answers: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [answers.put(line) for line in iter(process.stdout.readline, b"")],
                     daemon=True).start()
    try:
        for line, translation in zip(lines, read_lines(expected)):
            process.stdin.write(line.encode("utf-8") + b"\n")
            process.stdin.flush()
            assert answers.get(timeout=120).decode("utf-8").rstrip("\n") == translation
        process.stdin.close()
        assert process.wait(timeout=120) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert sorted(os.listdir(hypergraphs)) == ["0.json.gz", "1.json.gz", "2.json.gz"]


def test_a_closed_reader_stops_the_decoder_quietly(system):
    data, model = system
    many = (data / "test.src").read_bytes() * 20
    process = subprocess.Popen([minismt(), "decode", "--model", str(model), "--jobs", "2"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdin.write(many)
    process.stdin.close()
    assert process.stdout.readline()
    process.stdout.close()  # as `| head -1` does
    assert process.wait(timeout=120) == 0
    assert b"Traceback" not in process.stderr.read()


def test_stdin_that_is_not_utf8_names_the_line(system):
    _, model = system
    done = run(["decode", "--model", str(model)], "ein haus .\n".encode() + b"\xff\xfe kaputt\n")
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        "minismt: <stdin>:2: not UTF-8 at byte 0 (expected UTF-8 text)"]


def test_kbest_out_must_be_a_file_of_its_own(system, capsys):
    _, model = system
    assert main(["decode", "--model", str(model), "--kbest", "3", "--kbest-out", "-"]) == 2
    assert "a file of its own" in capsys.readouterr().err


def test_hiero_on_stdin_without_a_rule_store_says_so_before_reading(hiero_system, tmp_path):
    """A model folder without a store (an older minismt's) is one line and exit 2 before any line is read (the
    typed line and the unknown words of the store's grammars: test_hiero_store)."""
    _, model = hiero_system
    old = tmp_path / "old-model"
    shutil.copytree(model, old, ignore=shutil.ignore_patterns("rule-store"))
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["files"]["rule_store"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    done = run(["decode", "--model", str(old)], b"ein haus .\n")
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().splitlines() == [
        f"minismt: {old / 'manifest.json'}: the Hiero model has no rule store (trained by an older minismt) and no "
        "grammar for these sentences (expected a model trained again with 'minismt train --hiero', or the input "
        "given to its --grammar-for)"]
