"""Querying a back-off n-gram model as KenLM does, through a numba hash table.

:class:`LanguageModel` mirrors the ``kenlm.Model`` Python API (``score``,
``full_scores``, ``perplexity``, ``BeginSentenceWrite``/``BaseScore`` as
``begin_sentence_state``/``score_word``) and gives the same numbers to float32
precision: ``tests/test_lm.py`` checks every token of held-out text against
``kenlm.Model``.

For the decoder's numba code, ``LanguageModel.tables`` is an
:class:`~minismt.lm._kernels.LMTables` tuple of arrays and
:func:`~minismt.lm._kernels.score_word` the kernel to call with it::

    from minismt.lm import _kernels as lmk
    t = lm.tables                                  # pass to @njit code as one argument
    words = np.empty(lm.order - 1, np.int32)       # state: newest word first, -1 padded
    backs = np.empty(lm.order - 1, np.float64)     # state: log10 back-offs of its suffixes
    length = lmk.begin_state(t, words, backs)      # context <s>
    next_words, next_backs = np.empty_like(words), np.empty_like(backs)
    logprob, matched, next_length, _ = lmk.score_word(t, words, backs, length, word_id,
                                                   next_words, next_backs)

``lmk.score_sentence`` / ``lmk.score_sentences`` score whole sentences
(``LanguageModel.score_ids`` wraps the latter).

Word ids are the model's (``lm.vocab``; ``lm.vocab_map(other_vocab)`` translates
another Vocabulary's ids, unknown words to ``<unk>`` = 0). States with equal
``words`` rows are interchangeable for every continuation, so a decoder
recombines hypotheses on them; like KenLM's, they are trimmed to the longest
suffix the model can extend, so more hypotheses recombine.

Models whose n-grams lack some of their suffixes (SRILM pruning) are completed
as KenLM's loader completes them (``lm/search_hashed.cc``): the missing suffix
gets the probability the back-off formula gives it, so that longer matches stay
reachable.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from minismt._primitives import power_of_two
from minismt.corpus import Vocabulary, array_to_words, words_to_array
from minismt.errors import InputError
from minismt.io import load_arrays, read_folder_info, replaced_folder, save_arrays, write_folder_info
from minismt.lm import _kernels as kernels
from minismt.lm._kernels import LMTables
from minismt.lm.arpa import BOS_ID, EOS_ID, UNK_ID, ArpaModel, read_arpa

TABLES_FORMAT = "minismt-lm-tables"
TABLES_VERSION = 2


@dataclass(frozen=True)
class State:
    """A language-model state: the context words (newest first) the next word is scored against.

    Equality and hashing use the words only, as KenLM's ``State`` does.
    """

    words: tuple[int, ...]
    backoffs: tuple[float, ...] = field(compare=False)

    @property
    def length(self) -> int:
        return len(self.words)


def _capacity(entries: int) -> int:
    """A power of two at least twice ``entries`` (load factor at most 1/2)."""
    return int(power_of_two(2 * entries))


def _reversed_rows(rows: np.ndarray, width: int) -> np.ndarray:
    """n-gram word rows (oldest first) as newest-first rows padded with -1 to ``width``."""
    out = np.full((rows.shape[0], width), -1, dtype=np.int32)
    out[:, :rows.shape[1]] = rows[:, ::-1]
    return out


def _older_tables(path: str) -> bool:
    """Whether ``path`` is a query tables folder of an older version than this one reads (a newer one, or
    anything else, is left to :meth:`LanguageModel.load` to refuse)."""
    try:
        with open(os.path.join(path, "lm.json"), encoding="utf-8") as handle:
            info = json.load(handle)
    except (OSError, ValueError):
        return False
    return (isinstance(info, dict) and info.get("format") == TABLES_FORMAT and isinstance(info.get("version"), int)
            and info["version"] < TABLES_VERSION)


def _refuse_duplicate(rev: list[np.ndarray], k: int, row: int) -> None:
    """The error for the k-gram ``rev[k-1][row]`` whose key an earlier n-gram already has: the same n-gram
    listed twice, or (about 1 in 10**7 for a model of a million n-grams) another with the same 62 hash bits."""
    rows = rev[k - 1]
    if np.any(np.all(rows[:row] == rows[row], axis=1)):
        raise InputError(f"a {k}-gram is listed twice", expected="each n-gram once")
    raise InputError(f"two n-grams of the model have the same 62-bit hash (the {k}-gram of row {row}); the query "
                     "table cannot hold both", expected="a model without that pair (remove one n-gram)")


def _ngram_text(vocab: Vocabulary, rev_row: np.ndarray, k: int) -> str:
    return " ".join(vocab[int(w)] for w in rev_row[:k][::-1])


class LanguageModel:
    """A back-off n-gram language model queried through numba kernels with KenLM's semantics.

    Build it with :meth:`from_arpa` (any ARPA file) or :meth:`from_model` (an
    :class:`ArpaModel`, e.g. straight from :func:`~minismt.lm.estimate_kn`).

    Attributes
    ----------
    order : int
    vocab : Vocabulary
        ``<unk>`` = 0, ``<s>`` = 1, ``</s>`` = 2, then the other words.
    tables : LMTables
        The arrays for numba code (see the module docstring).
    """

    def __init__(self, model: ArpaModel):
        self.order = model.order
        self.vocab = model.vocab
        self._index = {w: i for i, w in enumerate(model.vocab.words)}
        self.tables = self._build(model)

    @classmethod
    def from_arpa(cls, path: str | os.PathLike) -> "LanguageModel":
        """Load an ARPA file (plain or gzipped); malformed files raise :class:`InputError`."""
        return cls(read_arpa(path))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LanguageModel":
        """A folder written by :meth:`save` (its tables memory-mapped, copy-on-write: no parsing, and the
        processes decoding with one model share its pages), else an ARPA file (:meth:`from_arpa`)."""
        path = os.fspath(path)
        if not os.path.isdir(path):
            return cls.from_arpa(path)
        try:
            info = read_folder_info(os.path.join(path, "lm.json"), TABLES_FORMAT, TABLES_VERSION, "minismt LM folder")
            arrays = load_arrays(path, ("uni_values", "uni_extends", "uni_left", "slots", "ending_best",
                                        "vocab_utf8", "vocab_offsets"))
            words = array_to_words(arrays["vocab_utf8"], arrays["vocab_offsets"])
            order = int(info["order"])
            if (arrays["uni_values"].shape != (len(words), 2) or arrays["ending_best"].shape != (len(words),)
                    or arrays["slots"].dtype != kernels.SLOT_DTYPE):
                raise InputError("LM arrays of the wrong size or type", path)
        except InputError:
            raise
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise InputError(f"not a minismt LM folder ({type(err).__name__}: {err})", path) from None
        lm = cls.__new__(cls)
        lm.order, lm.vocab = order, Vocabulary(words)
        lm._index = {w: i for i, w in enumerate(words)}
        # the record type with its aligned-struct flag, which .npy does not keep (numba types the two apart)
        slots = arrays["slots"].view(kernels.SLOT_DTYPE)
        lm.tables = LMTables(order=order, bos=BOS_ID, eos=EOS_ID, unk=UNK_ID, uni_values=arrays["uni_values"],
                             uni_extends=arrays["uni_extends"], uni_left=arrays["uni_left"], slots=slots,
                             ending_best=arrays["ending_best"])
        return lm

    def save(self, path: str | os.PathLike) -> None:
        """Write the query tables as a folder of ``.npy`` files (built beside ``path``, renamed into place),
        what :meth:`load` memory-maps."""
        t = self.tables
        utf8, offsets = words_to_array(self.vocab.words)
        with replaced_folder(path) as partial:
            save_arrays(partial, {"uni_values": t.uni_values, "uni_extends": t.uni_extends, "uni_left": t.uni_left,
                                  "slots": t.slots, "ending_best": t.ending_best, "vocab_utf8": utf8,
                                  "vocab_offsets": offsets})
            write_folder_info(os.path.join(partial, "lm.json"),
                              {"format": TABLES_FORMAT, "version": TABLES_VERSION, "order": self.order})

    @classmethod
    def of_model(cls, model_dir: str | os.PathLike, files: dict) -> "LanguageModel":
        """The LM of a model folder whose manifest lists ``files``: its query tables (``lm_tables``), else its
        ARPA file (``lm_arpa``, models older than the tables). Tables of an older format are rebuilt from the
        ARPA file first, once (under a lock beside them, so that processes loading the model together build
        them once), or in memory only when the folder cannot be written."""
        arpa = os.path.join(model_dir, files["lm_arpa"])
        if not files.get("lm_tables"):
            return cls.load(arpa)
        path = os.path.join(model_dir, files["lm_tables"])
        if not _older_tables(path):
            return cls.load(path)
        import fcntl
        try:
            with open(path + ".lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if _older_tables(path):
                    print(f"rebuilding the LM query tables {path} (an older format) from {arpa}", file=sys.stderr,
                          flush=True)
                    cls.from_arpa(arpa).save(path)
        except OSError:
            return cls.from_arpa(arpa)
        return cls.load(path)

    @classmethod
    def from_model(cls, model: ArpaModel) -> "LanguageModel":
        return cls(model)

    # ------------------------------------------------------------------ building

    def _build(self, model: ArpaModel) -> LMTables:
        order, vocab = model.order, model.vocab
        size = len(vocab)
        if model.ngrams[0].shape[0] != size or np.any(model.ngrams[0][:, 0] != np.arange(size)):
            raise InputError("unigram rows are not the word ids 0..V-1", expected="an ArpaModel from "
                             "read_arpa or estimate_kn")
        # every value at float32 precision, as KenLM holds them (the n-gram slots store float32)
        uni_values = np.column_stack([model.logprob[0], model.backoff[0]]).astype(np.float32).astype(np.float64)
        rev = [_reversed_rows(model.ngrams[k - 1], order) for k in range(1, order + 1)]
        probs = [np.asarray(p, dtype=np.float64) for p in model.logprob]
        backs = [np.asarray(b, dtype=np.float64) for b in model.backoff]
        tables = self._fill(order, uni_values, rev, probs, backs)
        blanks = self._blanks(tables, rev)
        if blanks:
            for k, (rows, blank_probs) in blanks.items():
                rev[k - 1] = np.concatenate([rev[k - 1], rows])
                probs[k - 1] = np.concatenate([probs[k - 1], blank_probs])
                backs[k - 1] = np.concatenate([backs[k - 1], np.zeros(rows.shape[0])])
            tables = self._fill(order, uni_values, rev, probs, backs)
        for k in range(2, order + 1):
            bad = kernels.mark_neighbours(tables, rev[k - 1], k)
            if bad >= 0:
                text = _ngram_text(vocab, rev[k - 1][bad], k)
                raise InputError(f"the context of the {k}-gram {text[:60]!r} is not a {k - 1}-gram",
                                 expected="the first n-1 words of every n-gram listed as an (n-1)-gram")
        return tables

    @staticmethod
    def _fill(order, uni_values, rev, probs, backs) -> LMTables:
        entries = sum(r.shape[0] for r in rev[1:])
        slots = np.zeros(_capacity(entries), dtype=kernels.SLOT_DTYPE)
        ending_best = uni_values[:, 0].copy()
        for k in range(2, order + 1):
            dup = kernels.insert_rows(slots, rev[k - 1], k, probs[k - 1], backs[k - 1])
            if dup >= 0:
                _refuse_duplicate(rev, k, dup)
            np.maximum.at(ending_best, rev[k - 1][:, 0], probs[k - 1].astype(np.float32))
        return LMTables(order=order, bos=BOS_ID, eos=EOS_ID, unk=UNK_ID, uni_values=uni_values,
                        uni_extends=uni_values[:, 1] != 0.0,
                        uni_left=np.zeros(uni_values.shape[0], dtype=np.bool_), slots=slots,
                        ending_best=ending_best)

    @staticmethod
    def _blanks(t: LMTables, rev: list[np.ndarray]) -> dict:
        """KenLM's completion of missing suffixes (``FindLower``/``AdjustLower``).

        For an n-gram whose (n-1)-word suffix is absent, every absent suffix s_m
        above the longest present one s_b gets
        log10 p(s_m) = log10 p(s_b) + sum_{j=b+1..m} b(the j-1 words before the last word),
        counting back-offs of present contexts only, and back-off 0.
        """
        order = t.order
        found: dict[tuple, float] = {}

        def slot_of(words_rev: tuple) -> int:
            row = np.array([list(words_rev) + [-1] * (order - len(words_rev))], dtype=np.int32)
            out = np.empty(1, dtype=np.int64)
            kernels.lookup_rows(t.slots, row, len(words_rev), out)
            return int(out[0])

        def prob_of(words_rev: tuple) -> float | None:
            if len(words_rev) == 1:
                return float(t.uni_values[words_rev[0], 0])
            if words_rev in found:
                return found[words_rev]
            s = slot_of(words_rev)
            return None if s < 0 else float(t.slots[s]["logprob"])

        def backoff_of(words_rev: tuple) -> float:
            if len(words_rev) == 1:
                return float(t.uni_values[words_rev[0], 1])
            if words_rev in found:
                return 0.0
            s = slot_of(words_rev)
            return 0.0 if s < 0 else float(t.slots[s]["backoff"])

        added: dict[int, list] = {}
        for k in range(3, order + 1):
            rows = rev[k - 1]
            slots = np.empty(rows.shape[0], dtype=np.int64)
            kernels.lookup_rows(t.slots, np.ascontiguousarray(rows[:, :k - 1]), k - 1, slots)
            for r in np.flatnonzero(slots < 0).tolist():
                words = tuple(int(w) for w in rows[r, :k])
                if words[:k - 1] in found:
                    continue
                basis = k - 2
                while basis > 1 and prob_of(words[:basis]) is None:
                    basis -= 1
                prob = prob_of(words[:basis])
                for m in range(basis + 1, k):
                    prob += backoff_of(words[1:m])
                    found[words[:m]] = prob
                    added.setdefault(m, []).append((words[:m], prob))
        blanks = {}
        for m, items in added.items():
            rows = _reversed_rows(np.array([w[::-1] for w, _ in items], dtype=np.int32), order)
            blanks[m] = (rows, np.array([p for _, p in items]))
        return blanks

    # ------------------------------------------------------------------ words

    def encode(self, sentence: str | Sequence[str]) -> np.ndarray:
        """Model word ids of a sentence (a string is split on whitespace); unknown words -> ``<unk>`` (0)."""
        tokens = sentence.split() if isinstance(sentence, str) else sentence
        get = self._index.get
        return np.array([get(w, UNK_ID) for w in tokens], dtype=np.int32)

    def encode_lines(self, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, offsets)`` of many sentences at once: sentence s is ``ids[offsets[s]:offsets[s+1]]``."""
        tokens: list[str] = []
        lengths = [0]
        for line in lines:
            words = line.split()
            tokens.extend(words)
            lengths.append(len(words))
        get = self._index.get
        ids = np.array([get(w, UNK_ID) for w in tokens], dtype=np.int32)
        return ids, np.cumsum(lengths, dtype=np.int64)

    def vocab_map(self, vocab: Vocabulary) -> np.ndarray:
        """int32[len(vocab)]: the model's id of each word of ``vocab`` (``<unk>`` = 0 when absent)."""
        get = self._index.get
        return np.array([get(w, UNK_ID) for w in vocab.words], dtype=np.int32)

    # ------------------------------------------------------------------ scoring

    def score_ids(self, ids: np.ndarray, offsets: np.ndarray, bos: bool = True, eos: bool = True):
        """Score many encoded sentences at once (sentence s is ``ids[offsets[s]:offsets[s+1]]``).

        Returns ``(logprobs, matched)``: per token (and per ``</s>`` when ``eos``,
        after each sentence's tokens) its log10 probability and the length of the
        n-gram that matched.
        """
        ids = np.ascontiguousarray(ids, dtype=np.int32)
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        n_out = ids.shape[0] + (offsets.shape[0] - 1 if eos else 0)
        logprobs = np.empty(n_out, dtype=np.float64)
        matched = np.empty(n_out, dtype=np.int64)
        kernels.score_sentences(self.tables, ids, offsets, bool(bos), bool(eos), logprobs, matched)
        return logprobs, matched

    def _score_one(self, sentence: str, bos: bool, eos: bool):
        get = self._index.get
        ids = [get(w, UNK_ID) for w in sentence.split()]
        n_out = len(ids) + (1 if eos else 0)
        logprobs = np.empty(n_out, dtype=np.float64)
        matched = np.empty(n_out, dtype=np.int64)
        total = kernels.score_sentence(self.tables, np.array(ids, dtype=np.int32), bool(bos), bool(eos),
                                       logprobs, matched)
        return ids, logprobs, matched, total

    def full_scores(self, sentence: str, bos: bool = True, eos: bool = True) -> Iterator[tuple[float, int, bool]]:
        """``(log10 prob, n-gram length, oov)`` per word (and ``</s>``), as ``kenlm.Model.full_scores``."""
        ids, logprobs, matched, _ = self._score_one(sentence, bos, eos)
        oov = [i == UNK_ID for i in ids] + [False] * (len(logprobs) - len(ids))
        return zip(logprobs.tolist(), matched.tolist(), oov)

    def score(self, sentence: str, bos: bool = True, eos: bool = True) -> float:
        """Total log10 probability of a sentence, as ``kenlm.Model.score``."""
        return float(self._score_one(sentence, bos, eos)[3])

    def perplexity(self, sentence: str) -> float:
        """10 ** (-log10 prob / (words + 1)), as ``kenlm.Model.perplexity``."""
        words = len(sentence.split()) + 1
        return math.pow(10.0, -self.score(sentence) / words)

    # ------------------------------------------------------------------ incremental

    def _state(self, words: np.ndarray, backs: np.ndarray, length: int) -> State:
        return State(tuple(int(w) for w in words[:length]), tuple(float(b) for b in backs[:length]))

    def begin_sentence_state(self) -> State:
        """The state after ``<s>`` (KenLM's ``BeginSentenceWrite``)."""
        words = np.empty(self.order - 1, dtype=np.int32)
        backs = np.empty(self.order - 1, dtype=np.float64)
        length = kernels.begin_state(self.tables, words, backs)
        return self._state(words, backs, length)

    def null_context_state(self) -> State:
        """The empty state (KenLM's ``NullContextWrite``)."""
        return State((), ())

    def score_word(self, state: State, word: str | int) -> tuple[float, State]:
        """``(log10 p(word | state), next state)``, as KenLM's ``BaseScore``; ``word`` is a string or model id."""
        wid = self._index.get(word, UNK_ID) if isinstance(word, str) else int(word)
        if not 0 <= wid < len(self.vocab):
            raise InputError(f"word id {wid}", expected=f"0 <= id < {len(self.vocab)}")
        n_ctx = self.order - 1
        words = np.full(n_ctx, -1, dtype=np.int32)
        backs = np.zeros(n_ctx, dtype=np.float64)
        words[:state.length] = state.words
        backs[:state.length] = state.backoffs
        out_words = np.empty(n_ctx, dtype=np.int32)
        out_backs = np.empty(n_ctx, dtype=np.float64)
        logprob, _, length, _ = kernels.score_word(self.tables, words, backs, state.length, wid,
                                                out_words, out_backs)
        return float(logprob), self._state(out_words, out_backs, length)

    def next_word_logprobs(self, state: State) -> np.ndarray:
        """float64[V]: log10 p(w | state) for every word id w (``<s>`` included)."""
        n_ctx = self.order - 1
        words = np.full(n_ctx, -1, dtype=np.int32)
        backs = np.zeros(n_ctx, dtype=np.float64)
        words[:state.length] = state.words
        backs[:state.length] = state.backoffs
        out = np.empty(len(self.vocab), dtype=np.float64)
        kernels.next_word_logprobs(self.tables, words, backs, state.length, out)
        return out
