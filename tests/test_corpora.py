"""Corpora: the synthetic language pair (determinism, phenomena, true alignments), the
registry's pinned Multi30k files, fetch (copy, download, checksum refusal, no repeated work)
and the ``minismt corpora`` command."""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import io
import json
import os
import shutil
import subprocess
import sys
import urllib.error
from collections import defaultdict

import pytest

from conftest import shared_path
from corpora import fetch as fetch_module
from corpora import registry
from corpora.cli import add_corpora_command
from corpora.fetch import fetch
from corpora.synthetic import LEXICON, MAX_LENGTH, MIN_LENGTH, default_held_out, generate, write_synthetic
from minismt.corpus import Alignment, Tokenizer
from minismt.errors import InputError
from minismt.io import read_lines

DE_EN_FILES = [f"{stem}.{lang}.gz" for stem in ("train", "val", "test_2016_flickr", "test_2017_flickr")
               for lang in ("de", "en")]


# ---------------------------------------------------------------- synthetic corpus

@pytest.fixture(scope="module")
def corpus():
    return generate(3000, 11)


def _links(corpus, s):
    return [(int(i), int(j)) for i, j in corpus.alignment.sentence(s)]


def _folder_bytes(folder):
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


def test_same_seed_same_bytes_other_seed_differs(tmp_path):
    first = write_synthetic(tmp_path / "a", 400, 5)
    write_synthetic(tmp_path / "b", 400, 5)
    write_synthetic(tmp_path / "c", 400, 6)
    assert _folder_bytes(tmp_path / "a") == _folder_bytes(tmp_path / "b")
    assert (tmp_path / "a" / "train.src").read_bytes() != (tmp_path / "c" / "train.src").read_bytes()
    assert read_lines(tmp_path / "a" / "train.src") == generate(400, 5).src
    assert first["seed"] == 5 and first["splits"]["dev"]["align"]["lines"] == 40
    # Another process with another hash seed: no dependence on set or dict hashing.
    code = ("import sys; from corpora.synthetic import write_synthetic; "
            "write_synthetic(sys.argv[1], 400, 5)")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "d")], check=True, env=env)
    assert _folder_bytes(tmp_path / "a") == _folder_bytes(tmp_path / "d")


def test_files_line_counts_and_held_out_sentences_are_new(tmp_path):
    manifest = write_synthetic(tmp_path, 300, 2, dev=40, test=25)
    expected = {"train": 300, "dev": 40, "test": 25}
    for split, n in expected.items():
        for side in ("src", "tgt", "align"):
            assert len(read_lines(tmp_path / f"{split}.{side}")) == n
            assert manifest["splits"][split][side]["lines"] == n
    assert json.loads((tmp_path / "corpus.json").read_text()) == manifest
    train = set(read_lines(tmp_path / "train.src"))
    dev, test = read_lines(tmp_path / "dev.src"), read_lines(tmp_path / "test.src")
    assert not (train & set(dev)) and not (train & set(test)) and not (set(dev) & set(test))
    assert len(set(dev)) == 40 and len(set(test)) == 25
    assert [default_held_out(n) for n in (9, 300, 5000, 10 ** 6)] == [0, 30, 500, 500]
    write_synthetic(tmp_path / "small", 30, 2)
    assert len(read_lines(tmp_path / "small" / "dev.tgt")) == 3


def test_alignment_in_bounds_and_every_word_explained(corpus, tmp_path):
    for s in range(len(corpus)):
        n_src, n_tgt = len(corpus.src[s].split()), len(corpus.tgt[s].split())
        links = _links(corpus, s)
        assert all(0 <= i < n_src and 0 <= j < n_tgt for i, j in links)
        assert {j for _, j in links} == set(range(n_tgt))
        assert {i for i, _ in links} == set(range(n_src))
        assert len(corpus.src_tags[s]) == n_src and len(corpus.tgt_tags[s]) == n_tgt
    corpus.alignment.write(tmp_path / "a.align")
    assert Alignment.read(tmp_path / "a.align").to_lists() == corpus.alignment.to_lists()


def test_lengths_vary_within_bounds(corpus):
    lengths = [len(line.split()) for line in corpus.src]
    target_lengths = [len(line.split()) for line in corpus.tgt]
    assert min(lengths) == MIN_LENGTH and max(lengths) == MAX_LENGTH
    assert MIN_LENGTH <= min(target_lengths) and max(target_lengths) <= MAX_LENGTH
    assert 6 < sum(lengths) / len(lengths) < 12
    assert all(line == line.lower() and "  " not in line for line in corpus.src + corpus.tgt)


def test_vocabulary_is_a_few_hundred_lemmas_and_mostly_seen(corpus):
    assert 300 <= LEXICON.n_lemmas() <= 450
    seen = {LEXICON.src_forms[w].lemma for line in corpus.src for w in line.split()}
    nouns = {n.src for group in LEXICON.nouns.values() for n in group}
    verbs = {v.src for group in LEXICON.verbs.values() for v in group}
    assert len(seen & nouns) > 0.9 * len(nouns) and len(seen & verbs) > 0.9 * len(verbs)


def test_verb_final_in_source_moves_forward_in_target(corpus):
    moved = crossing = 0
    for s in range(len(corpus)):
        src_tags, tgt_tags = corpus.src_tags[s], corpus.tgt_tags[s]
        links = _links(corpus, s)
        verb = len(src_tags) - 1
        assert src_tags[verb] == "V"
        verb_targets = [j for i, j in links if i == verb]
        assert tgt_tags[verb_targets[0]] == "V"
        moved += max(verb_targets) < len(tgt_tags) - 1
        objects = [j for i, j in links if i == verb - 1 and src_tags[i] == "N"]
        crossing += bool(objects) and min(objects) > max(verb_targets)
    assert moved > 0.6 * len(corpus)
    assert crossing > 0.1 * len(corpus)


def test_adjective_noun_order_swaps(corpus):
    swaps = 0
    for s in range(len(corpus)):
        tags, links = corpus.src_tags[s], _links(corpus, s)
        for i in range(len(tags) - 1):
            if tags[i] == "N" and tags[i + 1] == "ADJ":
                noun = [j for a, j in links if a == i]
                adjective = [j for a, j in links if a == i + 1]
                assert max(adjective) < min(noun)
                swaps += 1
    assert swaps > 300


def _aligned_target(corpus, s, i, tag):
    words = corpus.tgt[s].split()
    return [words[j] for a, j in _links(corpus, s) if a == i and corpus.tgt_tags[s][j] == tag]


def test_ambiguous_verbs_translated_by_object_class(corpus):
    translations = defaultdict(lambda: defaultdict(set))
    ambiguous = {v.src: v for v in LEXICON.verbs["amb"]}
    for s in range(len(corpus)):
        words = corpus.src[s].split()
        for i, word in enumerate(words):
            if word not in ambiguous:
                continue
            noun = next(w for w in reversed(words[:i]) if LEXICON.src_forms[w].tag == "N")
            object_class = LEXICON.src_forms[noun].feature("class")
            (target,) = _aligned_target(corpus, s, i, "V")
            lemma = LEXICON.tgt_forms[target].lemma
            assert lemma == ambiguous[word].by_object[object_class]
            translations[word][object_class].add(lemma)
    both = [w for w, by_class in translations.items()
            if len(by_class) == 2 and len(set.union(*by_class.values())) == 2]
    assert len(both) >= 5


def test_ambiguous_adjectives_translated_by_noun_class(corpus):
    translations = defaultdict(set)
    adjectives = {a.src: a for a in LEXICON.adjectives if a.tgt != a.tgt_inanimate}
    for s in range(len(corpus)):
        words = corpus.src[s].split()
        for i, word in enumerate(words):
            form = LEXICON.src_forms[word]
            if form.tag != "ADJ" or form.lemma not in adjectives:
                continue
            noun = next(w for w in reversed(words[:i]) if LEXICON.src_forms[w].tag == "N")
            (target,) = _aligned_target(corpus, s, i, "ADJ")
            assert target == adjectives[form.lemma].translate(LEXICON.src_forms[noun].feature("class"))
            translations[form.lemma].add(target)
    assert sum(len(targets) == 2 for targets in translations.values()) >= 5


def test_one_to_many_and_many_to_one_links(corpus):
    kinds = defaultdict(int)
    for s in range(len(corpus)):
        links = _links(corpus, s)
        src_tags, tgt_tags = corpus.src_tags[s], corpus.tgt_tags[s]
        per_source, per_target = defaultdict(list), defaultdict(list)
        for i, j in links:
            per_source[i].append(j)
            per_target[j].append(i)
        for i, targets in per_source.items():
            if len(targets) > 1:
                kinds["1-n " + src_tags[i] + " -> " + " ".join(tgt_tags[j] for j in sorted(targets))] += 1
        for j, sources in per_target.items():
            if len(sources) > 1:
                kinds["n-1 " + " ".join(src_tags[i] for i in sorted(sources)) + " -> " + tgt_tags[j]] += 1
    assert kinds["1-n N -> N N"] > 50      # compounds
    assert kinds["1-n V -> V PRT"] > 50    # particle verbs
    assert kinds["n-1 ART N -> N"] > 1000  # definite article + noun
    assert set(kinds) == {"1-n N -> N N", "1-n V -> V PRT", "n-1 ART N -> N"}


def test_inflection_case_and_agreement(corpus):
    agreeing = 0
    cases = defaultdict(set)
    for s in range(len(corpus)):
        words = corpus.src[s].split()
        for i, word in enumerate(words):
            form = LEXICON.src_forms[word]
            if form.tag == "N":
                cases[form.lemma].add(form.feature("case"))
                before = [LEXICON.src_forms[w].tag for w in words[max(0, i - 2):i]]
                if before[-1:] == ["P"] or before == ["P", "ART"]:
                    assert form.feature("case") == "obl"
                if i == 0 or (i == 1 and before == ["ART"]):
                    assert form.feature("case") == "nom"
        subject = LEXICON.src_forms[words[0]]
        if subject.tag == "PRON":
            (verb,) = _aligned_target(corpus, s, len(words) - 1, "V")
            target = LEXICON.tgt_forms[verb]
            assert (target.feature("person"), target.feature("number")) == \
                (subject.feature("person"), subject.feature("number"))
            agreeing += 1
    assert agreeing > 300
    assert sum(cases_seen == {"nom", "acc", "obl"} for cases_seen in cases.values()) > 20


@pytest.mark.parametrize("call", [
    lambda d: write_synthetic(d, 0, 1),
    lambda d: write_synthetic(d, 10, -1),
    lambda d: write_synthetic(d, 10, 1, dev=-2),
    lambda d: write_synthetic(d, "ten", 1),
    lambda d: generate(5, 1.5),
])
def test_bad_synthetic_arguments(call, tmp_path):
    with pytest.raises(InputError):
        call(tmp_path)


# ---------------------------------------------------------------- registry

def test_registry_names_urls_and_pinned_checksums():
    multi30k = shared_path("corpora", "multi30k")
    assert {"multi30k-de-en", "multi30k-fr-en", "multi30k-en-de", "multi30k-en-fr"} <= set(registry.names())
    for name in registry.names():
        spec = registry.get(name)
        assert name == f"multi30k-{spec.source}-{spec.target}"
        assert set(spec.splits) == set(registry.SPLITS)
        assert spec.splits["dev"].src.name == f"val.{spec.source}.gz"
        assert spec.splits["test"].tgt.name == f"test_2016_flickr.{spec.target}.gz"
        assert spec.splits["test2017"].src.name == f"test_2017_flickr.{spec.source}.gz"
        for remote in spec.files():
            assert remote.url == ("https://raw.githubusercontent.com/multi30k/dataset/master/"
                                  "data/task1/raw/" + remote.name)
            data = (multi30k / remote.name).read_bytes()
            assert hashlib.sha256(data).hexdigest() == remote.sha256 and len(data) == remote.size
    with pytest.raises(InputError, match="multi30k-de-en"):
        registry.get("multi30k-xx-en")


# ---------------------------------------------------------------- fetch

@pytest.fixture(scope="module")
def full_de_en(tmp_path_factory):
    """multi30k-de-en fetched (copied) from ../shared and fully prepared, once."""
    multi30k = shared_path("corpora", "multi30k")
    out = tmp_path_factory.mktemp("m30k")
    result = fetch("multi30k-de-en", out, from_dir=multi30k, progress=False)
    return out, result, multi30k


def _copy_files(source, dest, names=DE_EN_FILES):
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(source / name, dest / name)
    return dest


def _state(folder):
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_fetch_from_folder_prepares_every_split(full_de_en):
    out, result, multi30k = full_de_en
    assert sorted(result["actions"]["copied"]) == sorted(DE_EN_FILES)
    assert result["actions"]["prepared"] == ["train", "dev", "test", "test2017"]
    for name in DE_EN_FILES:
        assert (out / "raw" / name).read_bytes() == (multi30k / name).read_bytes()
    cleaning = result["splits"]["train"]["cleaning"]
    assert cleaning["kept"] + sum(cleaning["dropped"].values()) == 29000
    expected = {"train": cleaning["kept"], "dev": 1014, "test": 1000, "test2017": 1000}
    for split, n in expected.items():
        for side in ("src", "tgt"):
            lines = read_lines(out / f"{split}.{side}")
            assert len(lines) == n == result["splits"][split][side]["lines"]
        assert result["splits"][split]["cleaning"] is None or split == "train"
    raw_dev = read_lines(multi30k / "val.de.gz")
    tokenize = Tokenizer("de")
    dev = read_lines(out / "dev.src")
    assert [tokenize(line) for line in raw_dev[:50]] == dev[:50]
    assert all(line == line.lower() for line in dev)
    raw_test = read_lines(multi30k / "test_2016_flickr.en.gz")
    assert read_lines(out / "test.tgt")[0] == Tokenizer("en")(raw_test[0])
    manifest = json.loads((out / "corpus.json").read_text())
    assert manifest == {k: v for k, v in result.items() if k != "actions"}
    assert manifest["source_language"] == "de" and manifest["target_language"] == "en"
    assert manifest["tokenizer"] == {"name": "sacremoses", "escape": False,
                                     "version": importlib.metadata.version("sacremoses")}
    pinned = registry.get("multi30k-de-en").splits["train"].src.sha256
    assert manifest["raw"]["train.de.gz"]["sha256"] == pinned
    assert manifest["splits"]["train"]["src"]["sha256"] == hashlib.sha256(
        (out / "train.src").read_bytes()).hexdigest()


def test_fetch_again_does_no_work(full_de_en):
    out, _, multi30k = full_de_en
    before = _state(out)
    result = fetch("multi30k-de-en", out, from_dir=multi30k, progress=False)
    assert result["actions"] == {"downloaded": [], "copied": [], "kept": DE_EN_FILES,
                                 "prepared": [], "reused": ["train", "dev", "test", "test2017"]}
    assert _state(out) == before


def test_prepare_redoes_only_what_changed(full_de_en, tmp_path):
    raw = full_de_en[0] / "raw"
    result = fetch("multi30k-de-en", tmp_path, from_dir=raw, max_train=300, progress=False)
    assert len(read_lines(tmp_path / "train.src")) == 300
    assert result["splits"]["train"]["raw_lines"] == 29000
    result = fetch("multi30k-de-en", tmp_path, from_dir=raw, max_train=200, progress=False)
    assert result["actions"]["prepared"] == ["train"] and len(read_lines(tmp_path / "train.tgt")) == 200
    (tmp_path / "dev.tgt").write_text("edited by hand\n")
    result = fetch("multi30k-de-en", tmp_path, from_dir=raw, max_train=200, progress=False)
    assert result["actions"]["prepared"] == ["dev"] and len(read_lines(tmp_path / "dev.tgt")) == 1014


def test_fetch_raw_text_without_tokenising_lowercasing_or_cleaning(full_de_en, tmp_path):
    multi30k = full_de_en[2]
    result = fetch("multi30k-en-fr", tmp_path, from_dir=multi30k, tokenize=False, lowercase=False,
                   clean=False, max_train=100, progress=False)
    assert read_lines(tmp_path / "dev.src") == read_lines(multi30k / "val.en.gz")
    assert read_lines(tmp_path / "train.tgt") == read_lines(multi30k / "train.fr.gz")[:100]
    assert result["tokenizer"] is None and result["splits"]["train"]["cleaning"] is None


def test_corrupt_copy_in_from_folder_is_refused_and_good_file_kept(full_de_en, tmp_path):
    multi30k = full_de_en[2]
    source = _copy_files(multi30k, tmp_path / "from")
    data = bytearray((source / "train.en.gz").read_bytes())
    data[1000] ^= 0xFF
    (source / "train.en.gz").write_bytes(bytes(data))
    raw = tmp_path / "out" / "raw"
    _copy_files(multi30k, raw, ["train.de.gz"])
    os.utime(raw / "train.de.gz", ns=(10 ** 18, 10 ** 18))
    before = _state(raw)
    with pytest.raises(InputError, match="checksum mismatch") as err:
        fetch("multi30k-de-en", tmp_path / "out", from_dir=source, progress=False)
    assert err.value.path == str(source / "train.en.gz")
    assert _state(raw) == before  # no bad copy, no temporary file, good file untouched

    _copy_files(multi30k, raw, ["train.en.gz"])
    os.utime(raw / "train.en.gz", ns=(10 ** 18, 10 ** 18))
    kept = (raw / "train.en.gz").stat().st_mtime_ns
    result = fetch("multi30k-de-en", tmp_path / "out", from_dir=source, max_train=50, progress=False)
    assert result["actions"]["kept"] == ["train.de.gz", "train.en.gz"]
    assert (raw / "train.en.gz").stat().st_mtime_ns == kept


def test_missing_truncated_or_bad_local_files(full_de_en, tmp_path):
    multi30k = full_de_en[2]
    source = _copy_files(multi30k, tmp_path / "from")
    (source / "val.de.gz").unlink()
    with pytest.raises(InputError, match="missing") as err:
        fetch("multi30k-de-en", tmp_path / "out", from_dir=source, progress=False)
    assert err.value.path == str(source / "val.de.gz")
    (source / "val.de.gz").write_bytes((multi30k / "val.de.gz").read_bytes()[:5000])
    with pytest.raises(InputError, match="truncated: got 5000 of 24681 bytes"):
        fetch("multi30k-de-en", tmp_path / "out", from_dir=source, progress=False)
    assert sorted(os.listdir(tmp_path / "out" / "raw")) == ["train.de.gz", "train.en.gz"]
    with pytest.raises(InputError, match="not a folder"):
        fetch("multi30k-de-en", tmp_path / "out", from_dir=source / "nowhere", progress=False)
    with pytest.raises(InputError, match="max_train"):
        fetch("multi30k-de-en", tmp_path / "out", from_dir=source, max_train=0, progress=False)
    with pytest.raises(InputError, match="unknown corpus"):
        fetch("multi30k-de-xx", tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_bad_local_copy_in_out_dir_is_repaired(full_de_en, tmp_path):
    multi30k = full_de_en[2]
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "val.en.gz").write_bytes(b"a damaged earlier copy")
    result = fetch("multi30k-de-en", tmp_path, from_dir=multi30k, max_train=50, progress=False)
    assert "val.en.gz" in result["actions"]["copied"]
    assert (tmp_path / "raw" / "val.en.gz").read_bytes() == (multi30k / "val.en.gz").read_bytes()


def test_download_from_file_url_mirror(full_de_en, tmp_path):
    multi30k = full_de_en[2]
    mirror = _copy_files(multi30k, tmp_path / "mirror")
    result = fetch("multi30k-de-en", tmp_path / "out", mirror=mirror.as_uri(), max_train=100,
                   progress=True)
    assert sorted(result["actions"]["downloaded"]) == sorted(DE_EN_FILES)
    for name in DE_EN_FILES:
        assert (tmp_path / "out" / "raw" / name).read_bytes() == (multi30k / name).read_bytes()
    (mirror / "test_2017_flickr.en.gz").unlink()
    (tmp_path / "out" / "raw" / "test_2017_flickr.en.gz").unlink()
    with pytest.raises(InputError, match="download failed") as err:
        fetch("multi30k-de-en", tmp_path / "out", mirror=mirror.as_uri() + "/", progress=False)
    assert err.value.path.endswith("/test_2017_flickr.en.gz")
    with pytest.raises(InputError, match="not both|one source"):
        fetch("multi30k-de-en", tmp_path / "out", mirror=mirror.as_uri(), from_dir=mirror)


class _Broken(io.BytesIO):
    """A response that fails after its first bytes, like a dropped connection."""

    def read(self, size=-1):
        if self.tell() > 0:
            raise ConnectionResetError("connection reset by peer")
        return super().read(min(size, 100))


def _fake_response(kind, data, url):
    if kind == "http404":
        raise urllib.error.HTTPError(url, 404, "Not Found", None, None)
    if kind == "flipped":
        return io.BytesIO(data[:10] + bytes([data[10] ^ 1]) + data[11:])
    if kind == "truncated":
        return io.BytesIO(data[:-1])
    if kind == "longer":
        return io.BytesIO(data + b"\n")
    return _Broken(data)


@pytest.mark.parametrize("kind, message", [
    ("http404", "HTTP 404 Not Found"), ("flipped", "checksum mismatch"),
    ("truncated", "truncated"), ("longer", "checksum mismatch"), ("reset", "connection reset"),
])
def test_bad_download_is_deleted_and_replaces_nothing(full_de_en, tmp_path, monkeypatch, kind, message):
    multi30k = full_de_en[2]
    urls = []

    def urlopen(url, timeout=None):
        urls.append(url)
        return _fake_response(kind, (multi30k / url.rsplit("/", 1)[1]).read_bytes(), url)

    monkeypatch.setattr(fetch_module, "urlopen", urlopen)
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "train.de.gz").write_bytes(b"an earlier damaged copy")
    before = _state(raw)
    with pytest.raises(InputError, match=message) as err:
        fetch("multi30k-de-en", tmp_path, progress=False)
    assert urls == [registry.get("multi30k-de-en").splits["train"].src.url]
    assert err.value.path == urls[0]
    assert _state(raw) == before


def test_good_files_are_not_downloaded_again(full_de_en, tmp_path, monkeypatch):
    def urlopen(url, timeout=None):
        raise AssertionError(f"downloaded {url} although a verified copy exists")

    monkeypatch.setattr(fetch_module, "urlopen", urlopen)
    _copy_files(full_de_en[0] / "raw", tmp_path / "raw")
    result = fetch("multi30k-de-en", tmp_path, max_train=20, progress=False)
    assert result["actions"]["kept"] == DE_EN_FILES and result["actions"]["downloaded"] == []


@pytest.mark.slow
def test_every_registered_corpus_fetches_from_shared(tmp_path):
    multi30k = shared_path("corpora", "multi30k")
    for name in registry.names():
        spec = registry.get(name)
        result = fetch(name, tmp_path / name, from_dir=multi30k, progress=False)
        for split, files in spec.splits.items():
            kept = result["splits"][split]["src"]["lines"]
            assert kept == len(read_lines(tmp_path / name / f"{split}.tgt"))
            assert kept == files.lines or split == "train"


# ---------------------------------------------------------------- command line

def _parser():
    parser = argparse.ArgumentParser(prog="minismt")
    add_corpora_command(parser.add_subparsers())
    return parser


def _run(argv):
    args = _parser().parse_args(argv)
    return args.run(args)


@pytest.mark.parametrize("argv, phrases", [
    (["corpora"], ["synth", "fetch", "list"]),
    (["corpora", "synth"], ["Pharaoh", "SOV", "byte-identical", "--pairs", "min(500"]),
    (["corpora", "fetch"], ["sha256", "raw/", "clean-corpus-n.perl", "test2017", "--from",
                            "--no-tokenize", "--keep-case", "--no-clean", "--max-train"]),
    (["corpora", "list"], ["languages", "download size"]),
])
def test_help_explains_every_command(argv, phrases, capsys):
    with pytest.raises(SystemExit) as stop:
        _parser().parse_args(argv + ["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: minismt " + " ".join(argv))
    for phrase in phrases:
        assert phrase in out


def test_cli_synth_list_fetch_and_errors(full_de_en, tmp_path, capsys):
    assert _run(["corpora"]) == 0
    assert "usage: minismt corpora" in capsys.readouterr().out
    assert _run(["corpora", "synth", "--pairs", "120", "--seed", "4", "--out", str(tmp_path / "s"),
                 "--test", "7"]) == 0
    assert "train 120, dev 12, test 7" in capsys.readouterr().out
    assert read_lines(tmp_path / "s" / "train.tgt") == generate(120, 4).tgt
    assert _run(["corpora", "list"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in registry.names()) and "29000" in listing
    assert _run(["corpora", "fetch", "multi30k-fr-en", "--out", str(tmp_path / "f"), "--from",
                 str(full_de_en[2]), "--max-train", "30", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "multi30k-fr-en (fr -> en)" in out and "8 copied" in out
    assert len(read_lines(tmp_path / "f" / "train.src")) == 30
    for argv in (["corpora", "fetch", "nope", "--out", str(tmp_path / "n")],
                 ["corpora", "fetch", "multi30k-de-en", "--out", str(tmp_path / "n"),
                  "--from", str(tmp_path / "missing")],
                 ["corpora", "synth", "--pairs", "-3", "--out", str(tmp_path / "n")]):
        with pytest.raises(InputError):
            _run(argv)
