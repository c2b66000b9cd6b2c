"""Back-off n-gram models in the ARPA format: the :class:`ArpaModel` arrays, a reader and a writer.

The writer produces what KenLM's ``lmplz`` writes (``lm/builder/print.cc``)::

    \\data\\
    ngram 1=4500
    ngram 2=16052

    \\1-grams:
    -4.2080727<TAB><unk><TAB>0
    0<TAB><s><TAB>-1.3171109
    ...

    \\2-grams:
    -1.4754227<TAB>outside </s>
    ...

    \\end\\

Every n-gram below the highest order carries its back-off, also when it is 0
(``lmplz`` writes ``<unk>\\t0`` and ``... </s>\\t0``); the highest order has none.
Numbers are the shortest decimal that reads back as the same 32-bit float, which
is how ``lmplz`` prints them (``-0.09133526``, ``-4.2080727``): KenLM stores
float32, so nothing a KenLM reader uses is lost.

The reader accepts lmplz, SRILM and IRSTLM files, plain or gzipped, and turns
anything malformed into :class:`~minismt.errors.InputError` naming the line.
It follows KenLM's loader where the format leaves room: ``#`` lines and blank
lines may precede ``\\data\\``; a missing ``<unk>`` is added with log10
probability -100 (KenLM's ``unknown_missing_logprob``); a missing ``<s>`` or
``</s>`` is an error; a positive log10 probability is set to 0 with a warning.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import warnings
import zlib
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from minismt.corpus import Vocabulary
from minismt.errors import InputError
from minismt.io import atomic_write, open_binary

UNK, BOS, EOS = "<unk>", "<s>", "</s>"
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
MISSING_UNK_LOGPROB = -100.0  # KenLM's Config::unknown_missing_logprob
MAX_ORDER = 6                 # KenLM's default KENLM_MAX_ORDER

_SECTION = re.compile(r"\\(\d+)-grams:")
_COUNT = re.compile(r"ngram\s+(\d+)\s*=\s*(\d+)")
_ARPA_SPACE = re.compile(r"[ \t\r]+")  # as KenLM's kARPASpaces


@dataclass
class ArpaModel:
    """A back-off n-gram model as arrays, one entry per order.

    Attributes
    ----------
    vocab : Vocabulary
        The words; ``<unk>`` is id 0, ``<s>`` id 1 and ``</s>`` id 2, and unigram
        row ``i`` is word ``i`` (``ngrams[0][:, 0] == arange(len(vocab))``).
    ngrams : list of int32[count_n, n]
        ``ngrams[n-1][r]`` are the word ids of the r-th n-gram, oldest word first.
        Estimated models list them in ``lmplz``'s order (sorted by last word,
        then the word before it, ...); read models in the file's order.
    logprob : list of float64[count_n]
        log10 p(w_n | w_1 .. w_{n-1}) of each n-gram.
    backoff : list of float64[count_n]
        log10 back-off weight of each n-gram as a context; all zero for the
        highest order (which has none).
    discounts : float64[order, 3] or None
        The modified Kneser-Ney discounts D1, D2, D3+ of every order, for
        models made by :func:`~minismt.lm.estimate_kn` (None when read from a file).
    counts_of_counts : int64[order, 4] or None
        n1..n4 per order: how many n-grams have adjusted count 1, 2, 3, 4 (the
        statistics the discounts come from), for estimated models.
    """

    vocab: Vocabulary
    ngrams: list
    logprob: list
    backoff: list
    discounts: np.ndarray | None = None
    counts_of_counts: np.ndarray | None = None

    @property
    def order(self) -> int:
        return len(self.ngrams)

    @property
    def counts(self) -> list[int]:
        """Number of n-grams of each order (the ``ngram N=count`` lines)."""
        return [int(rows.shape[0]) for rows in self.ngrams]

    def items(self, n: int) -> Iterator[tuple[tuple[str, ...], float, float]]:
        """``(words, log10 prob, log10 backoff)`` of every n-gram of order ``n`` (slow; for inspection)."""
        words = self.vocab.words
        rows, probs, backs = self.ngrams[n - 1], self.logprob[n - 1], self.backoff[n - 1]
        for r in range(rows.shape[0]):
            yield tuple(words[i] for i in rows[r]), float(probs[r]), float(backs[r])


# ----------------------------------------------------------------------------- writing

def _format_log10(values: np.ndarray) -> np.ndarray:
    """Shortest decimal strings that read back as the same float32 (lmplz's number format).

    Integral values print without a fraction (``0``, ``-99``) and small ones in
    positional notation, as the double-conversion library behind lmplz does.
    """
    as32 = np.asarray(values, dtype=np.float64).astype(np.float32)
    as32 = as32 + np.float32(0.0)  # -0.0 -> 0.0
    unique, inverse = np.unique(as32, return_inverse=True)
    text = unique.astype(str).astype(object)
    for i, value in enumerate(unique):
        item = text[i]
        if item.endswith(".0"):
            text[i] = item[:-2]
        elif "e" in item and math.isfinite(value):
            if abs(value) >= 1e-6:
                text[i] = np.format_float_positional(value, unique=True, trim="-")
            else:
                mantissa, exponent = item.split("e")
                text[i] = f"{mantissa}e{int(exponent)}"
    return text[inverse.reshape(-1)]


def write_arpa(model: ArpaModel, path: str | os.PathLike) -> None:
    """Write ``model`` as an ARPA file, atomically; gzip-compressed when ``path`` ends in ``.gz``."""
    words = np.array(model.vocab.words, dtype=object)
    order = model.order
    with atomic_write(path) as out:
        out.write("\\data\\\n")
        for n, count in enumerate(model.counts, 1):
            out.write(f"ngram {n}={count}\n")
        out.write("\n")
        for n in range(1, order + 1):
            out.write(f"\\{n}-grams:\n")
            rows = model.ngrams[n - 1]
            if rows.shape[0]:
                text = words[rows[:, 0]]
                for c in range(1, n):
                    text = text + " " + words[rows[:, c]]
                lines = _format_log10(model.logprob[n - 1]) + "\t" + text
                if n < order:
                    lines = lines + "\t" + _format_log10(model.backoff[n - 1])
                out.write("\n".join(lines.tolist()))
                out.write("\n")
            out.write("\n")
        out.write("\\end\\\n")


# ----------------------------------------------------------------------------- reading

def _parse_float(token: str, what: str, path, number: int) -> float:
    try:
        value = float(token)
    except ValueError:
        raise InputError(f"{what} {token[:40]!r} is not a number", path, number,
                         "a log10 value") from None
    if math.isnan(value) or value == math.inf:
        raise InputError(f"{what} {token[:40]!r} is not a log10 value", path, number,
                         "a finite number or -inf")
    return value


class _ArpaLines:
    """Numbered lines of a plain or gzipped UTF-8 file, read in blocks, with look-ahead and bulk takes."""

    BLOCK = 1 << 22

    def __init__(self, path):
        self.path = path
        self._handle = open_binary(path)
        self._buffer: list[str] = []
        self._pos = 0
        self._first = 1       # line number of self._buffer[0]
        self._eof = False
        self.number = 0       # line number of the last line handed out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()

    def _fill(self) -> bool:
        """Append the next block of lines to the buffer; False at the end of the file."""
        if self._eof:
            return False
        try:
            raw = self._handle.readlines(self.BLOCK)
        except (EOFError, zlib.error, gzip.BadGzipFile) as err:
            raise InputError(f"corrupt gzip stream ({err})", self.path, self._first + len(self._buffer)) from None
        if not raw:
            self._eof = True
            return False
        self._first += self._pos
        del self._buffer[:self._pos]
        self._pos = 0
        start = self._first + len(self._buffer)
        try:
            decoded = [line.decode("utf-8") for line in raw]
        except UnicodeDecodeError:
            for offset, line in enumerate(raw):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise InputError(f"not UTF-8 at byte {err.start}", self.path, start + offset,
                                     "UTF-8 text") from None
        if start == 1 and decoded[0].startswith("\ufeff"):
            decoded[0] = decoded[0][1:]
        self._buffer.extend(line.rstrip("\r\n") for line in decoded)
        return True

    def next(self) -> tuple[int, str] | None:
        if self._pos == len(self._buffer) and not self._fill():
            return None
        self.number = self._first + self._pos
        self._pos += 1
        return self.number, self._buffer[self._pos - 1]

    def next_nonblank(self) -> tuple[int, str] | None:
        while True:
            item = self.next()
            if item is None or item[1].strip():
                return item

    def peek(self) -> tuple[int, str] | None:
        if self._pos == len(self._buffer) and not self._fill():
            return None
        return self._first + self._pos, self._buffer[self._pos]

    def take(self, count: int) -> tuple[list[str], int]:
        """Up to ``count`` next lines (fewer at the end of the file) and the number of the first."""
        while len(self._buffer) - self._pos < count and self._fill():
            pass
        first = self._first + self._pos
        taken = self._buffer[self._pos:self._pos + count]
        self._pos += len(taken)
        self.number = first + len(taken) - 1
        return taken, first


def _read_header(lines: _ArpaLines) -> list[int]:
    path = lines.path
    while True:
        item = lines.next()
        if item is None:
            raise InputError("no \\data\\ line: empty or not an ARPA file", path,
                             expected="an ARPA language model")
        number, text = item
        if text.strip() and not text.startswith("#"):
            break
    if text.strip() != "\\data\\":
        raise InputError(f"{text[:40]!r} where the ARPA header begins", path, number, "\\data\\")
    counts: list[int] = []
    while True:
        item = lines.peek()
        if item is None:
            raise InputError("the file ends inside the \\data\\ header", path, lines.number,
                             "'ngram N=count' lines, then the n-gram sections")
        number, text = item
        stripped = text.strip()
        if not stripped:
            lines.next()
            if counts:
                break
            continue
        if stripped.startswith("\\"):
            break
        lines.next()
        match = _COUNT.fullmatch(stripped)
        if not match:
            raise InputError(f"count line {text[:40]!r}", path, number, "'ngram N=count'")
        n, count = int(match.group(1)), int(match.group(2))
        if n != len(counts) + 1:
            raise InputError(f"'ngram {n}=' after {len(counts)} count lines", path, number,
                             "count lines for n = 1, 2, 3, ... in order")
        counts.append(count)
    if not counts:
        raise InputError("no 'ngram N=count' lines", path, lines.number, "at least 'ngram 1=count'")
    if len(counts) > MAX_ORDER:
        raise InputError(f"order {len(counts)} model", path, lines.number,
                         f"order at most {MAX_ORDER}")
    if counts[0] == 0:
        raise InputError("'ngram 1=0': no vocabulary", path, lines.number, "at least one unigram")
    return counts


def _split_entry(text: str, n: int, path, number: int) -> tuple[str, list[str], str | None]:
    fields = text.split("\t")
    if len(fields) in (2, 3) and fields[0] and " " not in fields[0]:
        words = fields[1].split(" ")
        if len(words) != n or "" in words:
            words = [w for w in _ARPA_SPACE.split(fields[1]) if w]
        back = fields[2].strip() if len(fields) == 3 else None
        if back == "":
            back = None
        prob = fields[0].strip()
    else:
        tokens = [t for t in _ARPA_SPACE.split(text) if t]
        if len(tokens) not in (n + 1, n + 2):
            raise InputError(f"{len(tokens)} fields in {text[:60]!r}", path, number,
                             f"log10prob, {n} word(s) and an optional back-off")
        prob, words = tokens[0], tokens[1:n + 1]
        back = tokens[n + 1] if len(tokens) == n + 2 else None
    if len(words) != n:
        raise InputError(f"{len(words)} words in a {n}-gram line {text[:60]!r}", path, number,
                         f"{n} word(s)")
    return prob, words, back


def _section_lines(lines: _ArpaLines, n: int, count: int) -> tuple[list[str], np.ndarray]:
    """The ``count`` entry lines of the n-gram section and their line numbers."""
    texts, first = lines.take(count)
    for r, text in enumerate(texts):
        if not text or text[0] in " \t\\":
            if not text.strip() or text.lstrip().startswith("\\"):
                raise InputError(f"{r} {n}-grams where the header announced {count}", lines.path, first + r,
                                 f"{count} lines in the \\{n}-grams: section")
    if len(texts) < count:
        raise InputError(f"the file ends after {len(texts)} of {count} {n}-grams", lines.path, lines.number,
                         f"{count} lines in the \\{n}-grams: section")
    return texts, np.arange(first, first + count, dtype=np.int64)


def _per_line(text: str, char: str) -> np.ndarray:
    """How often ``char`` (ASCII) occurs on each ``\\n``-separated line of ``text``."""
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    newlines = np.flatnonzero(data == 10)
    line_of = np.searchsorted(newlines, np.flatnonzero(data == ord(char)))
    return np.bincount(line_of, minlength=newlines.shape[0] + 1)


def _parse_fast(texts: list[str], n: int, highest: bool, vocab: Vocabulary, seen_special: list[bool]):
    """Bulk parse of a section of regular ``prob<TAB>w1 .. wn[<TAB>backoff]`` lines; None when any
    line is irregular (then :func:`_parse_slow` finds and reports the problem)."""
    width = 2 if highest else 3
    block = "\n".join(texts)
    if np.any(_per_line(block, "\t") != width - 1):
        return None
    fields = block.replace("\n", "\t").split("\t")
    try:
        probs = np.array(fields[0::width], dtype=np.float64)
        backs = np.zeros(len(texts)) if highest else np.array(fields[2::width], dtype=np.float64)
    except ValueError:
        return None
    if not (np.all(probs <= 0.0) and np.all(backs < np.inf)):
        return None
    words = "\n".join(fields[1::width])
    if np.any(_per_line(words, " ") != n - 1):
        return None
    index = dict(zip(vocab.words, range(len(vocab))))
    get = index.get
    ids = np.array([get(w, -1) for w in words.replace("\n", " ").split(" ")], dtype=np.int64)
    special = np.unique(ids[ids < 3])
    if special.size and (special[0] < 0 or not all(seen_special[i] for i in special)):
        return None
    return ids.reshape(len(texts), n).astype(np.int32), probs, backs


def _parse_slow(texts, numbers, n: int, highest: bool, vocab: Vocabulary, seen_special: list[bool],
                path, warned_positive: bool):
    """Line-by-line parse with an :class:`InputError` naming the first bad line."""
    count = len(texts)
    rows = np.empty((count, n), dtype=np.int32)
    probs = np.empty(count, dtype=np.float64)
    backs = np.zeros(count, dtype=np.float64)
    positive = np.zeros(count, dtype=bool)
    for r, text in enumerate(texts):
        number = int(numbers[r])
        prob_text, words, back_text = _split_entry(text, n, path, number)
        prob = _parse_float(prob_text, "log10 probability", path, number)
        if prob > 0.0:
            if not warned_positive:
                warnings.warn(f"{os.fspath(path)}:{number}: positive log10 probability "
                              f"{prob_text}; set to 0 (as KenLM does)", stacklevel=3)
                warned_positive = True
            positive[r] = True
            prob = 0.0
        probs[r] = prob
        if back_text is not None:
            if highest:
                raise InputError(f"a back-off on a highest-order ({n}-gram) line", path, number,
                                 "no back-off in the last section")
            backs[r] = _parse_float(back_text, "log10 back-off", path, number)
        if n == 1:
            word = words[0]
            wid = (UNK, BOS, EOS).index(word) if word in (UNK, BOS, EOS) else -1
            if wid >= 0:
                if seen_special[wid]:
                    raise InputError(f"unigram {word!r} listed twice", path, number, "each n-gram once")
                seen_special[wid] = True
            else:
                if word in vocab:
                    raise InputError(f"unigram {word[:40]!r} listed twice", path, number,
                                     "each n-gram once")
                wid = vocab.add(word)
            rows[r, 0] = wid
        else:
            for c, word in enumerate(words):
                wid = vocab.get(word)
                if wid < 0 or (wid < 3 and not seen_special[wid]):
                    raise InputError(f"word {word[:40]!r} is not among the unigrams", path, number,
                                     "every word listed in the \\1-grams: section")
                rows[r, c] = wid
    return rows, probs, backs, positive


def _check_ngrams(n: int, rows: np.ndarray, numbers: np.ndarray, sorted_keys: list, vocab_size: int,
                  words: list[str], path) -> None:
    """Vectorised checks of one section: every context is an (n-1)-gram, no n-gram twice.

    An n-gram's key is ``index of its context among the sorted (n-1)-gram keys * V + last word``,
    so one int64 identifies it exactly; ``sorted_keys[n-1]`` receives this order's keys, sorted.
    """
    index = rows[:, 0].astype(np.int64)
    for c in range(2, n):
        key = index * vocab_size + rows[:, c - 1]
        table = sorted_keys[c - 1]
        pos = np.minimum(np.searchsorted(table, key), max(table.shape[0] - 1, 0))
        bad = np.flatnonzero(table[pos] != key) if table.shape[0] else np.arange(key.shape[0])
        if bad.size:
            r = bad[0]
            context = " ".join(words[i] for i in rows[r, :-1])
            raise InputError(f"the context {context[:60]!r} of this {n}-gram is not a {n - 1}-gram",
                             path, int(numbers[r]),
                             "the first n-1 words of every n-gram listed as an (n-1)-gram")
        index = pos.astype(np.int64)
    keys = index * vocab_size + rows[:, n - 1]
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    repeated = np.flatnonzero(ordered[1:] == ordered[:-1])
    if repeated.size:
        r = order[repeated[0] + 1]
        text = " ".join(words[i] for i in rows[r])
        raise InputError(f"{n}-gram {text[:60]!r} listed twice", path, int(numbers[r]),
                         "each n-gram once")
    sorted_keys.append(ordered)


def read_arpa(path: str | os.PathLike) -> ArpaModel:
    """Read an ARPA language model (plain or gzipped) into an :class:`ArpaModel`.

    Unigrams are renumbered so that ``<unk>``, ``<s>``, ``</s>`` are ids 0, 1, 2
    and the other words follow in file order. Raises :class:`InputError` for
    anything malformed: a bad header, wrong counts, a word missing from the
    unigrams, a duplicate n-gram, an n-gram whose context (its first n-1 words)
    is not listed, a missing ``<s>`` or ``</s>``, text that is not UTF-8.
    """
    with _ArpaLines(path) as lines:
        return _read(lines, path)


def _read(lines: _ArpaLines, path) -> ArpaModel:
    counts = _read_header(lines)
    order = len(counts)
    vocab = Vocabulary([UNK, BOS, EOS])
    seen_special = [False, False, False]
    ngrams, logprob, backoff, sorted_keys = [], [], [], []
    warned_positive = False
    for n in range(1, order + 1):
        item = lines.next_nonblank()
        if item is None:
            raise InputError(f"the file ends before the \\{n}-grams: section", path, lines.number,
                             f"\\{n}-grams:")
        number, text = item
        match = _SECTION.fullmatch(text.strip())
        if not match or int(match.group(1)) != n:
            raise InputError(f"{text[:40]!r} where the {n}-gram section begins", path, number,
                             f"\\{n}-grams:")
        count = counts[n - 1]
        texts, numbers = _section_lines(lines, n, count)
        parsed = None
        if n > 1:
            parsed = _parse_fast(texts, n, n == order, vocab, seen_special)
        if parsed is None:
            parsed = _parse_slow(texts, numbers, n, n == order, vocab, seen_special, path, warned_positive)
            warned_positive = warned_positive or bool(np.any(parsed[3]))
        rows, probs, backs = parsed[:3]
        if n == 1:
            if not seen_special[1] or not seen_special[2]:
                missing = BOS if not seen_special[1] else EOS
                raise InputError(f"the unigrams lack {missing}", path, lines.number,
                                 "<s> and </s> among the unigrams (as KenLM requires)")
            ids = rows[:, 0]
            if not seen_special[0]:
                ids = np.concatenate([[UNK_ID], ids]).astype(np.int32)
                probs = np.concatenate([[MISSING_UNK_LOGPROB], probs])
                backs = np.concatenate([[0.0], backs])
            perm = np.argsort(ids, kind="stable")
            rows = ids[perm].reshape(-1, 1).astype(np.int32)
            probs, backs = probs[perm], backs[perm]
            sorted_keys.append(rows[:, 0].astype(np.int64))
        else:
            _check_ngrams(n, rows, numbers, sorted_keys, len(vocab), vocab.words, path)
        ngrams.append(rows)
        logprob.append(probs)
        backoff.append(backs)
    item = lines.next_nonblank()
    if item is None or item[1].strip() != "\\end\\":
        found = "the end of the file" if item is None else repr(item[1][:40])
        raise InputError(f"{found} after the {order}-gram section", path, lines.number,
                         "\\end\\ after exactly the announced number of n-grams")
    trailing = lines.next_nonblank()
    if trailing is not None:
        raise InputError(f"{trailing[1][:40]!r} after \\end\\", path, trailing[0], "nothing after \\end\\")
    return ArpaModel(vocab=vocab, ngrams=ngrams, logprob=logprob, backoff=backoff)
