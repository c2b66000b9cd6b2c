"""Parallel text: reading with clear errors, tokenisation, cleaning, vocabularies, token-id arrays.

Tokenisation is sacremoses (the Python port of Moses' ``tokenizer.perl``) with
``escape=False``, then optional lowercasing: exactly the preprocessing of the
Moses reference system on Multi30k (``tokenizer.perl -no-escape | lowercase.perl``),
so BLEU on tokenised lowercased text is comparable with its numbers.

Inside the engine a text is a :class:`TokenArray`: one flat ``int32`` array of
word ids plus ``int64`` sentence offsets, which numba kernels take directly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from minismt.errors import InputError
from minismt.io import atomic_write, iter_lines

DEFAULT_MAX_LENGTH = 80  # clean-corpus-n.perl's usual limit
DEFAULT_MAX_RATIO = 9.0  # clean-corpus-n.perl's default length ratio


class Vocabulary:
    """Words <-> integer ids (0, 1, 2, ... in order of first use)."""

    def __init__(self, words: Iterable[str] = ()):
        self._words: list[str] = []
        self._ids: dict[str, int] = {}
        for word in words:
            self.add(word)

    def __len__(self) -> int:
        return len(self._words)

    def __contains__(self, word: str) -> bool:
        return word in self._ids

    def __getitem__(self, index: int) -> str:
        return self._words[index]

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocabulary) and self._words == other._words

    def add(self, word: str) -> int:
        index = self._ids.get(word)
        if index is None:
            index = len(self._words)
            self._words.append(word)
            self._ids[word] = index
        return index

    def get(self, word: str, default: int = -1) -> int:
        return self._ids.get(word, default)

    @property
    def words(self) -> list[str]:
        return list(self._words)

    def encode(self, tokens: Sequence[str], grow: bool = True) -> np.ndarray:
        """Ids of ``tokens``; unknown words get new ids when ``grow``, else -1."""
        if grow:
            return np.array([self.add(t) for t in tokens], dtype=np.int32)
        return np.array([self._ids.get(t, -1) for t in tokens], dtype=np.int32)

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self._words[i] for i in ids]

    def save(self, path: str | os.PathLike) -> None:
        """One word per line, id order (atomic)."""
        with atomic_write(path) as out:
            for word in self._words:
                out.write(word + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Vocabulary":
        vocab = cls()
        for number, word in iter_lines(path):
            if not word or any(c.isspace() for c in word):
                raise InputError(f"bad vocabulary entry {word[:40]!r}", path, number,
                                 "one word without spaces per line")
            if word in vocab:
                raise InputError(f"word {word[:40]!r} listed twice", path, number, "each word once")
            vocab.add(word)
        return vocab


def words_to_array(words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Words as one UTF-8 byte array and the offsets of each (how vocabularies are stored in ``.npy``/``.npz``)."""
    encoded = [w.encode("utf-8") for w in words]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(), offsets


def array_to_words(data: np.ndarray, offsets: np.ndarray) -> list[str]:
    """The words :func:`words_to_array` stored."""
    raw = data.tobytes()
    bounds = offsets.tolist()
    return [raw[a:b].decode("utf-8") for a, b in zip(bounds[:-1], bounds[1:])]


@dataclass
class TokenArray:
    """A tokenised text as flat word ids: sentence i is ``ids[offsets[i]:offsets[i+1]]``."""

    ids: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    def sentence(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i]:self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @classmethod
    def from_sentences(cls, sentences: Iterable[Sequence[str]], vocab: Vocabulary,
                       grow: bool = True) -> "TokenArray":
        """Encode whitespace-split sentences (lists of tokens or strings) with ``vocab``."""
        ids: list[np.ndarray] = []
        offsets = [0]
        for sentence in sentences:
            tokens = sentence.split() if isinstance(sentence, str) else sentence
            encoded = vocab.encode(tokens, grow=grow)
            ids.append(encoded)
            offsets.append(offsets[-1] + encoded.shape[0])
        flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int32)
        return cls(flat.astype(np.int32), np.asarray(offsets, dtype=np.int64))


def read_parallel(src_path, tgt_path) -> tuple[list[str], list[str]]:
    """Both sides of a parallel corpus (plain or gzipped); different line counts are an InputError."""
    src = [text for _, text in iter_lines(src_path)]
    tgt = [text for _, text in iter_lines(tgt_path)]
    if len(src) != len(tgt):
        raise InputError(f"{len(tgt)} lines, but the source side {os.fspath(src_path)} has {len(src)}",
                         tgt_path, expected="the same number of lines on both sides")
    return src, tgt


class Tokenizer:
    """sacremoses tokenisation (``escape=False``, as ``tokenizer.perl -no-escape``), then lowercasing."""

    def __init__(self, lang: str, lowercase: bool = True):
        from sacremoses import MosesTokenizer  # 0.2 s: only when text is tokenised (train --tokenize, fetch)
        self.lang = lang
        self.lowercase = lowercase
        self._moses = MosesTokenizer(lang=lang)

    def __call__(self, line: str) -> str:
        text = self._moses.tokenize(line, escape=False, return_str=True)
        text = " ".join(text.split())
        return text.lower() if self.lowercase else text


@dataclass
class CleaningReport:
    """How many pairs cleaning kept, and why it dropped the others."""

    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def __str__(self) -> str:
        reasons = ", ".join(f"{n} {why}" for why, n in sorted(self.dropped.items())) or "none"
        return f"kept {self.kept} pairs; dropped: {reasons}"


def clean_pairs(src: Sequence[str], tgt: Sequence[str], max_length: int = DEFAULT_MAX_LENGTH,
                max_ratio: float = DEFAULT_MAX_RATIO, min_length: int = 1):
    """Drop pairs with an empty side, a side longer than ``max_length`` tokens, or a length
    ratio above ``max_ratio`` (as Moses' ``clean-corpus-n.perl``).

    Returns the kept ``(src, tgt)`` lines, the kept indices and a :class:`CleaningReport`.
    """
    report = CleaningReport()
    kept_src, kept_tgt, kept_index = [], [], []
    for index, (s, t) in enumerate(zip(src, tgt)):
        ls, lt = len(s.split()), len(t.split())
        if ls < min_length or lt < min_length:
            report.drop("empty")
        elif ls > max_length or lt > max_length:
            report.drop(f"longer than {max_length} words")
        elif ls > max_ratio * lt or lt > max_ratio * ls:
            report.drop(f"length ratio above {max_ratio:g}")
        else:
            kept_src.append(s)
            kept_tgt.append(t)
            kept_index.append(index)
    report.kept = len(kept_index)
    return kept_src, kept_tgt, kept_index, report


@dataclass
class Alignment:
    """Word alignments of a parallel corpus: sentence i's links are
    ``links[offsets[i]:offsets[i+1]]``, each ``(source position, target position)``, 0-based,
    sorted by source then target position (Pharaoh ``i-j`` order)."""

    links: np.ndarray    # int32[L, 2]
    offsets: np.ndarray  # int64[S+1]

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    def sentence(self, i: int) -> np.ndarray:
        return self.links[self.offsets[i]:self.offsets[i + 1]]

    @classmethod
    def from_lists(cls, per_sentence: Iterable[Iterable[tuple[int, int]]]) -> "Alignment":
        rows: list[tuple[int, int]] = []
        offsets = [0]
        for links in per_sentence:
            rows.extend(sorted(set((int(i), int(j)) for i, j in links)))
            offsets.append(len(rows))
        return cls(np.asarray(rows, dtype=np.int32).reshape(-1, 2),
                   np.asarray(offsets, dtype=np.int64))

    def to_lists(self) -> list[list[tuple[int, int]]]:
        return [[(int(i), int(j)) for i, j in self.sentence(s)] for s in range(len(self))]

    def write(self, path: str | os.PathLike) -> None:
        """Pharaoh format, one line per sentence pair: ``0-0 1-2 ...`` (atomic)."""
        with atomic_write(path) as out:
            for s in range(len(self)):
                out.write(" ".join(f"{i}-{j}" for i, j in self.sentence(s)) + "\n")

    @classmethod
    def read(cls, path: str | os.PathLike) -> "Alignment":
        per_sentence = []
        for number, text in iter_lines(path):
            links = []
            for token in text.split():
                left, dash, right = token.partition("-")
                if not dash or not left.isdigit() or not right.isdigit():
                    raise InputError(f"alignment point {token[:40]!r}", path, number, "'i-j' with i, j >= 0")
                links.append((int(left), int(right)))
            per_sentence.append(links)
        return cls.from_lists(per_sentence)
