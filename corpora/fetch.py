"""Download a registered corpus, verify it, and prepare tokenised, lowercased, cleaned splits.

Layout of ``out_dir`` after :func:`fetch`::

    raw/<file>.gz                   the registry's files, byte for byte (sha256 verified)
    {train,dev,test,test2017}.src   prepared source side, one sentence per line
    {train,dev,test,test2017}.tgt   prepared target side, line-aligned with .src
    corpus.json                     manifest: files, checksums, line counts, cleaning, tokenizer

Every file arrives under a temporary name and is renamed into place only after its sha256
has been checked, so an interrupted or bad download never replaces a good copy. A raw file
already present with the right checksum is not fetched again, and a split whose inputs and
options are unchanged since the last run (per corpus.json) is not prepared again.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import importlib.metadata
import json
import os
import tempfile
import urllib.error
from urllib.request import urlopen

from minismt import __version__
from minismt.corpus import DEFAULT_MAX_LENGTH, DEFAULT_MAX_RATIO, Tokenizer, clean_pairs, read_parallel
from minismt.errors import InputError
from minismt.io import atomic_write, file_sha256, write_lines
from minismt.progress import bar as progress_bar
from corpora import registry

MANIFEST = "corpus.json"
RAW_DIR = "raw"
CHUNK = 1 << 16
TIMEOUT = 60.0
FILE_MODE = 0o644  # data files are meant to be shared; temporary files start as 0600


def _make_dir(path: str | os.PathLike) -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot create folder: {err.strerror or err}", path) from None



def _is_good(path: str, remote: registry.RemoteFile) -> bool:
    return (os.path.isfile(path) and os.path.getsize(path) == remote.size
            and file_sha256(path) == remote.sha256)


def _transfer(reader, dest: str, remote: registry.RemoteFile, origin: str, progress: bool) -> None:
    """Copy ``reader`` to a temporary file next to ``dest``, verify size and sha256, rename.

    Anything that goes wrong (read error, truncation, wrong checksum, full disk,
    interruption) deletes the temporary file and leaves ``dest`` as it was; errors become
    InputError naming ``origin`` (or ``dest`` for a write error).
    """
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{remote.name}.", suffix=".part",
                                   dir=os.path.dirname(dest))
    except OSError as err:
        raise InputError(f"cannot write: {err.strerror or err}", dest) from None
    digest = hashlib.sha256()
    received = 0
    try:
        with os.fdopen(fd, "wb") as out, progress_bar(total=remote.size, unit="B", unit_scale=True,
                                                      desc=remote.name, enabled=progress,
                                                      leave=False) as bar:
            while True:
                try:
                    block = reader.read(CHUNK)
                except (OSError, http.client.HTTPException) as err:
                    raise InputError(f"reading failed after {received} bytes: {err}",
                                     origin) from None
                if not block:
                    break
                out.write(block)
                digest.update(block)
                received += len(block)
                bar.update(len(block))
            out.flush()
            os.fsync(out.fileno())
        if received < remote.size:
            raise InputError(f"truncated: got {received} of {remote.size} bytes", origin,
                             expected=f"the complete {remote.name}")
        if received != remote.size or digest.hexdigest() != remote.sha256:
            raise InputError(f"checksum mismatch: sha256 {digest.hexdigest()} of {received} bytes",
                             origin, expected=f"{remote.name} with sha256 {remote.sha256} "
                                              f"({remote.size} bytes)")
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, dest)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise InputError(f"cannot write: {err.strerror or err}", dest) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def download(remote: registry.RemoteFile, dest: str, url: str | None = None,
             progress: bool = True) -> None:
    """Download ``remote`` (from ``url``, default its registry address) to ``dest``, verified."""
    url = url or remote.url
    try:
        response = urlopen(url, timeout=TIMEOUT)
    except urllib.error.HTTPError as err:
        raise InputError(f"download failed: HTTP {err.code} {err.reason}", url) from None
    except urllib.error.URLError as err:
        raise InputError(f"download failed: {err.reason}", url) from None
    except (OSError, ValueError, http.client.HTTPException) as err:
        raise InputError(f"download failed: {err}", url) from None
    with response:
        _transfer(response, dest, remote, url, progress)


def copy_local(remote: registry.RemoteFile, dest: str, from_dir: str | os.PathLike,
               progress: bool = True) -> None:
    """Copy ``remote`` from the folder ``from_dir`` to ``dest``, verified like a download."""
    source = os.path.join(os.fspath(from_dir), remote.name)
    try:
        reader = open(source, "rb")
    except FileNotFoundError:
        raise InputError("missing", source, expected=f"the file {remote.name} of the corpus "
                                                     f"(sha256 {remote.sha256})") from None
    except OSError as err:
        raise InputError(f"cannot open: {err.strerror or err}", source) from None
    with reader:
        _transfer(reader, dest, remote, source, progress)


def fetch_raw(spec: registry.CorpusSpec, out_dir: str | os.PathLike, from_dir=None,
              mirror: str | None = None, progress: bool = True) -> dict[str, list[str]]:
    """Put every file of ``spec`` into ``out_dir/raw``, verified; returns what was done.

    The result maps ``downloaded``, ``copied`` and ``kept`` (already present and good) to
    file names. ``from_dir`` copies from a local folder; ``mirror`` is a base URL (http,
    https or file) holding the files under the registry's names.
    """
    raw_dir = os.path.join(os.fspath(out_dir), RAW_DIR)
    if from_dir is not None and mirror is not None:
        raise InputError("both a local folder and a mirror given", expected="one source of files")
    if from_dir is not None and not os.path.isdir(from_dir):
        raise InputError("not a folder", from_dir, expected="a folder holding the corpus files")
    _make_dir(raw_dir)
    actions: dict[str, list[str]] = {"downloaded": [], "copied": [], "kept": []}
    for remote in spec.files():
        dest = os.path.join(raw_dir, remote.name)
        if _is_good(dest, remote):
            actions["kept"].append(remote.name)
        elif from_dir is not None:
            copy_local(remote, dest, from_dir, progress)
            actions["copied"].append(remote.name)
        else:
            url = mirror.rstrip("/") + "/" + remote.name if mirror else remote.url
            download(remote, dest, url, progress)
            actions["downloaded"].append(remote.name)
    return actions


def tokenizer_info() -> dict:
    """Name, version and settings of the tokenizer, as recorded in corpus.json."""
    return {"name": "sacremoses", "version": importlib.metadata.version("sacremoses"),
            "escape": False}


def _load_manifest(path: str) -> dict:
    """The previous corpus.json, or {} when it is absent or unreadable (it is only a cache)."""
    try:
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def _write_lines(path: str, lines: list[str]) -> dict:
    write_lines(path, lines)
    return {"path": os.path.basename(path), "lines": len(lines), "sha256": file_sha256(path)}


def _outputs_intact(out_dir: str, record: dict) -> bool:
    try:
        return all(file_sha256(os.path.join(out_dir, record[side]["path"])) == record[side]["sha256"]
                   for side in ("src", "tgt"))
    except (OSError, KeyError, TypeError):
        return False


def _counted(items, bar):
    """Yield ``items``, advancing the progress ``bar`` by one for each."""
    for item in items:
        yield item
        bar.update(1)


def _prepare_split(spec: registry.CorpusSpec, split: str, out_dir: str, raw_dir: str,
                   options: dict, progress: bool) -> dict:
    """Read, tokenise, lowercase and (train only) clean one split; write its .src/.tgt."""
    files = spec.splits[split]
    src, tgt = read_parallel(os.path.join(raw_dir, files.src.name),
                             os.path.join(raw_dir, files.tgt.name))
    raw_lines = len(src)
    if options["max_lines"] is not None:
        src, tgt = src[:options["max_lines"]], tgt[:options["max_lines"]]
    if options["tokenize"]:
        tokenize_src = Tokenizer(spec.source, lowercase=options["lowercase"])
        tokenize_tgt = Tokenizer(spec.target, lowercase=options["lowercase"])
        with progress_bar(total=2 * len(src), unit=" lines", desc=f"tokenising {split}",
                          enabled=progress, leave=False) as bar:
            src = [tokenize_src(line) for line in _counted(src, bar)]
            tgt = [tokenize_tgt(line) for line in _counted(tgt, bar)]
    elif options["lowercase"]:
        src, tgt = [line.lower() for line in src], [line.lower() for line in tgt]
    cleaning = None
    if options["clean"] is not None:
        src, tgt, _, report = clean_pairs(src, tgt, **options["clean"])
        cleaning = {"kept": report.kept, "dropped": dict(sorted(report.dropped.items()))}
    record = {"src": _write_lines(os.path.join(out_dir, f"{split}.src"), src),
              "tgt": _write_lines(os.path.join(out_dir, f"{split}.tgt"), tgt),
              "raw_lines": raw_lines, "cleaning": cleaning}
    return record


def prepare(spec: registry.CorpusSpec, out_dir: str | os.PathLike, tokenize: bool = True,
            lowercase: bool = True, clean: bool = True, max_train: int | None = None,
            progress: bool = True) -> tuple[dict, dict[str, list[str]]]:
    """Write ``out_dir/{split}.{src,tgt}`` and corpus.json from the verified raw files.

    Returns the manifest and ``{"prepared": [...], "reused": [...]}``: a split is reused
    when corpus.json records the same raw checksums and options for it and its outputs
    still have the recorded checksums.
    """
    out_dir = os.fspath(out_dir)
    raw_dir = os.path.join(out_dir, RAW_DIR)
    manifest_path = os.path.join(out_dir, MANIFEST)
    old = _load_manifest(manifest_path)
    old_splits = old.get("splits") if old.get("name") == spec.name else None
    old_splits = old_splits if isinstance(old_splits, dict) else {}
    raw = {remote.name: {"url": remote.url, "sha256": remote.sha256, "bytes": remote.size}
           for remote in spec.files()}
    actions: dict[str, list[str]] = {"prepared": [], "reused": []}
    splits = {}
    for split, files in spec.splits.items():
        options = {
            "tokenize": tokenize, "lowercase": lowercase,
            "tokenizer": tokenizer_info() if tokenize else None,
            "clean": ({"max_length": DEFAULT_MAX_LENGTH, "max_ratio": DEFAULT_MAX_RATIO}
                      if clean and split == "train" else None),
            "max_lines": max_train if split == "train" else None,
        }
        inputs = {files.src.name: files.src.sha256, files.tgt.name: files.tgt.sha256}
        previous = old_splits.get(split)
        if (isinstance(previous, dict) and previous.get("inputs") == inputs
                and previous.get("options") == options and _outputs_intact(out_dir, previous)):
            splits[split] = previous
            actions["reused"].append(split)
            continue
        record = _prepare_split(spec, split, out_dir, raw_dir, options, progress)
        splits[split] = {**record, "inputs": inputs, "options": options}
        actions["prepared"].append(split)
    manifest = {
        "name": spec.name, "description": spec.description,
        "source_language": spec.source, "target_language": spec.target,
        "raw": raw, "splits": splits,
        "tokenizer": tokenizer_info() if tokenize else None, "lowercase": lowercase,
        "minismt_version": __version__,
    }
    if manifest != old:
        with atomic_write(manifest_path) as out:
            out.write(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest, actions


def fetch(name: str, out_dir: str | os.PathLike, from_dir: str | os.PathLike | None = None,
          tokenize: bool = True, lowercase: bool = True, clean: bool = True,
          progress: bool = True, max_train: int | None = None,
          mirror: str | None = None) -> dict:
    """Fetch the registered corpus ``name`` into ``out_dir`` and prepare its splits.

    Files come from the registry's addresses, from ``mirror`` (a base URL) or, with
    ``from_dir``, from a local folder; all are verified by sha256. Text is tokenised with
    sacremoses (``escape=False``) and lowercased unless switched off; only train is
    cleaned (at most 80 words a side, length ratio at most 9, as ``clean-corpus-n.perl
    1 80``) and ``max_train`` keeps only its first lines. Returns the manifest written
    to corpus.json plus ``actions``: which raw files were downloaded, copied or kept and
    which splits were prepared or reused.
    """
    spec = registry.get(name)
    if max_train is not None and (not isinstance(max_train, int) or max_train < 1):
        raise InputError(f"max_train {max_train!r}", expected="a positive number of lines")
    actions = fetch_raw(spec, out_dir, from_dir=from_dir, mirror=mirror, progress=progress)
    manifest, prepared = prepare(spec, out_dir, tokenize=tokenize, lowercase=lowercase,
                                 clean=clean, max_train=max_train, progress=progress)
    return {**manifest, "actions": {**actions, **prepared}}
