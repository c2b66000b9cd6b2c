"""Files: gzip-transparent line reading with exact line numbers, atomic writes."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import sys
import tempfile
import zlib
from typing import Iterator

from minismt.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"


class _GzipReader(gzip.GzipFile):
    """A gzip stream over an already open file, closing that file with itself."""

    def __init__(self, raw):
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self):
        try:
            super().close()
        finally:
            self._raw.close()


def open_binary(path: str | os.PathLike):
    """Open ``path`` for binary reading, decompressing gzip whatever its name.

    The gzip magic is peeked, not read, so pipes such as ``/dev/stdin`` work.
    """
    path = os.fspath(path)
    try:
        handle = open(path, "rb")
    except OSError as err:
        raise InputError(f"cannot open: {err.strerror or err}", path) from None
    try:
        if handle.peek(2)[:2] == GZIP_MAGIC:
            return _GzipReader(handle)
    except OSError as err:
        handle.close()
        raise InputError(f"cannot read: {err.strerror or err}", path) from None
    return handle


def read_binary(path: str | os.PathLike) -> bytes:
    """All bytes of a plain or gzipped file; an unreadable file or a broken gzip stream is an
    :class:`InputError` naming it."""
    try:
        with open_binary(path) as handle:
            return handle.read()
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise InputError(f"corrupt gzip stream ({err})", path) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", path) from None


def iter_raw_lines(path: str | os.PathLike) -> Iterator[tuple[int, str, str]]:
    r"""Yield ``(line_number, text, line_ending)`` of a plain or gzipped UTF-8 file.

    The ending is ``"\n"``, ``"\r\n"`` or ``""`` (a last line without one), so
    that a file can be rewritten byte for byte. Undecodable bytes and broken gzip
    streams become :class:`InputError` naming the line.
    """
    path = os.fspath(path)
    number = 0
    with open_binary(path) as handle:
        try:
            for number, text, ending in _split_lines(handle, path):
                yield number, text, ending
        except (EOFError, zlib.error, gzip.BadGzipFile) as err:
            raise InputError(f"corrupt gzip stream ({err})", path, number + 1) from None


def _split_lines(handle, name: str) -> Iterator[tuple[int, str, str]]:
    """``(line_number, text, line_ending)`` of each line of a binary stream, read one line at a time (a pipe's
    line is yielded as soon as it ends); bytes that are not UTF-8 are an :class:`InputError` naming ``name``
    and the line."""
    for number, raw in enumerate(iter(handle.readline, b""), 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"not UTF-8 at byte {err.start}", name, number, "UTF-8 text") from None
        ending = ""
        if text.endswith("\n"):
            ending, text = "\n", text[:-1]
            if text.endswith("\r"):
                ending, text = "\r\n", text[:-1]
        yield number, text, ending


def stdin_lines() -> Iterator[str]:
    """The lines of standard input as they arrive (UTF-8, without line endings or a leading byte-order mark),
    for ``--input -``: each is yielded as soon as its line ends, so a pipe or a terminal is translated line
    by line."""
    for number, text, _ in _split_lines(sys.stdin.buffer, "<stdin>"):
        yield text[1:] if number == 1 and text.startswith("\ufeff") else text


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    r"""Yield ``(line_number, text)`` for each line of a plain or gzipped UTF-8 file.

    Line numbers start at 1; the line ending (``\n`` or ``\r\n``) and a UTF-8
    byte-order mark at the start of the file are removed.
    """
    for number, text, _ in iter_raw_lines(path):
        if number == 1 and text.startswith("\ufeff"):
            text = text[1:]
        yield number, text


def read_lines(path: str | os.PathLike) -> list[str]:
    """All lines of a plain or gzipped UTF-8 file, without line endings."""
    return [text for _, text in iter_lines(path)]


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def json_sha256(value) -> str:
    """Hex sha256 of a JSON-able value (keys sorted, other objects by ``str``): a key for settings."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def lines_sha256(lines) -> str:
    """Hex sha256 of lines of text (joined by newlines): identifies a dev set's sentences or references."""
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, compress: bool | None = None, binary: bool = False,
                 compresslevel: int = 6):
    """Write a file atomically: a temporary file in the same folder, then rename.

    A crash or kill leaves either the old file or the complete new one, never a
    partial one. Yields a UTF-8 text handle, or a bytes handle when ``binary``.
    ``compress`` defaults to ``path`` ending in ``.gz``; level 6 is gzip's
    default (level 9 is several times slower for a few percent).
    """
    path = os.fspath(path)
    if compress is None:
        compress = path.endswith(".gz")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=folder)
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as raw:
            with contextlib.ExitStack() as stack:
                stream = raw
                if compress:
                    stream = stack.enter_context(gzip.GzipFile(
                        fileobj=raw, mode="wb", compresslevel=compresslevel, mtime=0))
                if not binary:
                    stream = stack.enter_context(_UnclosingText(stream))
                yield stream
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def replaced_folder(path: str | os.PathLike):
    """Build a folder beside ``path`` (``PATH.partial``, a killed build's leftover removed first), yielded,
    and rename it into place when the block ends without an error (a folder already there is replaced):
    readers find the old folder, none, or the whole new one, never a partial one."""
    import shutil
    path = os.path.abspath(os.fspath(path))
    partial = path + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    yield partial
    shutil.rmtree(path, ignore_errors=True)
    os.replace(partial, path)


def save_arrays(folder: str | os.PathLike, arrays: dict) -> None:
    """Each array as ``folder/NAME.npy`` (what :func:`load_arrays` memory-maps)."""
    import numpy as np
    for name, array in arrays.items():
        np.save(os.path.join(folder, name + ".npy"), array)


def load_arrays(folder: str | os.PathLike, names, mmap_mode: str | None = "c") -> dict:
    """The arrays :func:`save_arrays` wrote, by name, memory-mapped (``"c"``: copy-on-write, so numba types
    them as ordinary writable arrays and the file is never written; ``"r"``: read-only; None: read)."""
    import numpy as np
    return {name: np.load(os.path.join(folder, name + ".npy"), mmap_mode=mmap_mode, allow_pickle=False)
            for name in names}


def write_folder_info(path: str | os.PathLike, info: dict) -> None:
    """A folder's JSON description ``path`` (format, version, sizes), written last by its builder."""
    with atomic_write(path) as out:
        json.dump(info, out, indent=2, sort_keys=True)
        out.write("\n")


def read_folder_info(path: str | os.PathLike, fmt: str, version: int, what: str, missing: str | None = None,
                     unreadable: str | None = None, expected: str | None = None) -> dict:
    """The JSON description ``path`` of a folder of arrays, checked to be ``fmt`` ``version``; an InputError
    otherwise: ``missing`` (default ``"not a WHAT"``) when the file is absent, ``unreadable`` (default
    ``"unreadable WHAT"``) when it is not JSON, ``"not a WHAT"`` when it describes something else."""
    try:
        with open(path, encoding="utf-8") as handle:
            info = json.load(handle)
    except FileNotFoundError:
        raise InputError(missing or f"not a {what}", os.path.dirname(os.fspath(path)),
                         expected=expected) from None
    except (OSError, ValueError) as err:
        raise InputError(f"{unreadable or 'unreadable ' + what} ({err})", path) from None
    if not isinstance(info, dict) or info.get("format") != fmt or info.get("version") != version:
        raise InputError(f"not a {what}", path, expected=f"{fmt} {version}")
    return info


class _UnclosingText(io.TextIOWrapper):
    """A UTF-8 text layer that flushes but does not close the stream below it."""

    def __init__(self, stream):
        super().__init__(stream, encoding="utf-8", newline="\n")

    def close(self):
        if not self.closed:
            self.flush()
            self.detach()


def write_lines(path: str | os.PathLike, lines) -> None:
    """Write one line per item, atomically (gzip when ``path`` ends in .gz)."""
    with atomic_write(path) as out:
        for line in lines:
            out.write(line + "\n")


def check_writable_dir(path: str | os.PathLike, flag: str | None = None) -> None:
    """Fail before any work if ``path`` cannot be (created and) written as a folder.

    Nothing is created: the nearest existing folder on the way to ``path`` must be
    a folder this process may write into. ``flag`` (an option such as ``"--out"``
    or a configuration key such as ``"output.work_dir"``) says which setting gave
    the path. Raises :class:`InputError` naming ``path``.
    """
    path = os.fspath(path)
    prefix = f"{flag}: " if flag else ""
    expected = "a folder that can be created and written"
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(f"{prefix}not a folder", path, expected=expected)
    folder = os.path.abspath(path)
    while not os.path.exists(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
        where = "" if folder == os.path.abspath(path) else f"{folder} "
        raise InputError(f"{prefix}{where or 'it '}is not a writable folder", path,
                         expected=expected)


def check_writable_file(path: str | os.PathLike, flag: str | None = None) -> None:
    """Fail before any work if the file ``path`` cannot be written (it is a folder, or its folder
    cannot be created and written). ``flag`` names the option that gave the path."""
    path = os.fspath(path)
    prefix = f"{flag}: " if flag else ""
    if os.path.isdir(path):
        raise InputError(f"{prefix}is a folder", path, expected="a file name to write")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise InputError(f"{prefix}is not writable", path, expected="a file this user may replace")
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{prefix}cannot be written ({folder} is not a writable folder)", path,
                         expected="a file in a folder that can be created and written")


def check_readable_file(path: str | os.PathLike, flag: str | None = None) -> None:
    """Fail before any work if ``path`` is not a file this process can read. ``flag`` names the option."""
    path = os.fspath(path)
    prefix = f"{flag}: " if flag else ""
    if not os.path.exists(path):
        raise InputError(f"{prefix}no such file", path, expected="an existing file")
    if not os.path.isfile(path):
        raise InputError(f"{prefix}not a file", path, expected="a file to read")
    if not os.access(path, os.R_OK):
        raise InputError(f"{prefix}not readable", path, expected="a file this user may read")
