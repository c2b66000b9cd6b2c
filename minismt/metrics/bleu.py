"""BLEU sufficient statistics (sacrebleu-exact), corpus BLEU and sentence BLEU+1.

Statistics are one ``int32[N, 9]`` array per k-best list, in the order of
Moses' scores.dat (so that file maps onto it column for column)::

    [m1, t1, m2, t2, m3, t3, m4, t4, ref_len]      m_n: clipped matches, t_n: n-grams

The hypothesis length is ``t1``.
``ref_len`` is the reference length closest to the hypothesis length (ties to
the shorter), matches are clipped by the maximum count over the references, and
tokens are whitespace-separated (``str.split()``), i.e. sacrebleu with
``tokenize='none'``. Corpus BLEU of summed statistics equals
``sacrebleu.corpus_bleu(hyps, refs, tokenize='none').score / 100``.

Sentence BLEU+1 (Lin & Och 2004, "ORANGE") adds 1 to matches and totals of
orders 2..4; the options give the fixes of Nakov, Guzman & Vogel (COLING 2012,
"Optimizing for sentence-level BLEU+1 yields short translations").
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from minismt.errors import InputError
from minismt.io import read_lines
from minismt.metrics import _kernels

N_STATS = 9
MAX_ORDER = _kernels.MAX_ORDER
MATCHES = slice(0, 2 * MAX_ORDER, 2)
TOTALS = slice(1, 2 * MAX_ORDER, 2)
HYP_LEN = 1
REF_LEN = 2 * MAX_ORDER

_SMOOTH = {"exp": _kernels.SMOOTH_EXP, "none": _kernels.SMOOTH_NONE}


def corpus_bleu_from_stats(stats, smooth: str = "exp") -> float:
    """Corpus BLEU in [0, 1] from statistics: one summed row, or an ``[N, 9]`` array summed here.

    ``smooth="exp"`` is sacrebleu's default (NIST smoothing of zero-match
    orders); ``"none"`` gives 0 when an order has no match, as Moses' BLEU.
    """
    if smooth not in _SMOOTH:
        raise InputError(f"smoothing {smooth!r}", expected="'exp' or 'none'")
    stats = np.asarray(stats)
    if stats.ndim == 2:
        stats = stats.sum(axis=0, dtype=np.int64)
    if stats.shape != (N_STATS,):
        raise InputError(f"BLEU statistics of shape {stats.shape}", expected=f"({N_STATS},)")
    return float(_kernels.bleu_from_sums(stats.astype(np.float64), _SMOOTH[smooth]))


def length_ratio(stats) -> float:
    """Output words over reference words of BLEU statistics (one summed row, or ``[N, 9]`` summed here): below 1
    the brevity penalty applies."""
    stats = np.asarray(stats)
    if stats.ndim == 2:
        stats = stats.sum(axis=0, dtype=np.int64)
    return float(stats[HYP_LEN]) / max(1.0, float(stats[REF_LEN]))


def sentence_bleu(stats, *, smooth_unigram: bool = False, smooth_bp: bool = False,
                  ref_scale: float = 1.0, unclipped_bp: bool = False) -> np.ndarray:
    """Sentence BLEU+1 in [0, 1] of each row of ``stats`` (``[N, 9]`` or one row).

    Default: Lin & Och (2004): add 1 to matches and totals of orders 2..4,
    brevity penalty from the raw lengths. Options (Nakov et al. 2012, Sec. 6):

    - ``smooth_unigram``: add 1 to the unigram counts too ("grounded" precision,
      and what Moses' ``sentence-bleu`` and PRO compute).
    - ``smooth_bp``: add 1 to both lengths in the brevity penalty, so the
      penalty is smoothed like the precisions.
    - ``ref_scale``: multiply the reference length by this factor (> 1 pushes
      tuners towards longer output).
    - ``unclipped_bp``: ``exp(1 - r/c)`` also when ``c > r`` (a reward for length).
    """
    stats = np.asarray(stats)
    single = stats.ndim == 1
    stats = np.atleast_2d(stats)
    if stats.ndim != 2 or stats.shape[1] != N_STATS:
        raise InputError(f"BLEU statistics of shape {stats.shape}", expected=f"(N, {N_STATS})")
    score = np.empty(stats.shape[0])
    _kernels.sentence_bleu_rows(stats, smooth_unigram, smooth_bp, float(ref_scale), unclipped_bp, score)
    return score[0] if single else score


def bleu_plus_one(stats, options: dict | None, default: dict | None = None) -> np.ndarray:
    """Sentence BLEU+1 of every row of ``stats``: :func:`sentence_bleu` with its options as one dict.

    The dict is a tuner's ``bleu_options``; None takes ``default`` (None: Lin &
    Och's BLEU+1, no option). Anything but a dict of :func:`sentence_bleu`
    keyword arguments raises InputError.
    """
    options = (default or {}) if options is None else options
    if not isinstance(options, dict):
        raise InputError(f"BLEU+1 options {options!r}",
                         expected="a dict of minismt.metrics.sentence_bleu keyword arguments")
    try:
        return sentence_bleu(stats, **options)
    except TypeError as err:
        raise InputError(f"BLEU+1 options {options!r}: {err}",
                         expected="keyword arguments of minismt.metrics.sentence_bleu") from None


def tokenize(text: str, lowercase: bool = False) -> list[str]:
    """Whitespace tokens as sacrebleu's ``tokenize='none'`` sees them."""
    if lowercase:
        text = text.lower()
    return text.split()


class BleuReferences:
    """References of a set of sentences with their n-grams counted once, for fast statistics.

    Parameters
    ----------
    references : one sequence of reference strings per sentence (one or more each).
    lowercase : compare case-insensitively.
    """

    def __init__(self, references: Sequence[Sequence[str]], lowercase: bool = False):
        self.lowercase = lowercase
        self.n_sentences = len(references)
        self._vocab: list[dict[str, int]] = []
        keys, counts, key_offsets, lens, len_offsets = [], [], [0], [], [0]
        for s, refs in enumerate(references):
            if isinstance(refs, str) or len(refs) == 0:
                raise InputError(f"sentence {s} has {'a bare string' if isinstance(refs, str) else 'no'} "
                                 "references", expected="a list of one or more reference strings")
            vocab: dict[str, int] = {}
            clip: dict[int, int] = {}
            for ref in refs:
                ids = np.array([vocab.setdefault(t, len(vocab)) for t in tokenize(ref, lowercase)],
                               dtype=np.int64)
                lens.append(ids.shape[0])
                here: dict[int, int] = {}
                for n in range(1, MAX_ORDER + 1):
                    for i in range(ids.shape[0] - n + 1):
                        key = 0
                        for k in range(n):
                            key = key * int(_kernels.KEY_BASE) + int(ids[i + k]) + 1
                        here[key] = here.get(key, 0) + 1
                for key, c in here.items():
                    if c > clip.get(key, 0):
                        clip[key] = c
            if len(vocab) >= int(_kernels.KEY_BASE) - 1:
                raise InputError(f"sentence {s}: references have {len(vocab)} distinct words",
                                 expected=f"fewer than {int(_kernels.KEY_BASE) - 1}")
            ordered = sorted(clip)
            keys.extend(ordered)
            counts.extend(clip[k] for k in ordered)
            key_offsets.append(len(keys))
            len_offsets.append(len(lens))
            self._vocab.append(vocab)
        self._keys = np.asarray(keys, dtype=np.int64)
        self._counts = np.asarray(counts, dtype=np.int32)
        self._key_offsets = np.asarray(key_offsets, dtype=np.int64)
        self._lens = np.asarray(lens, dtype=np.int64)
        self._len_offsets = np.asarray(len_offsets, dtype=np.int64)

    @classmethod
    def from_files(cls, paths: Sequence, lowercase: bool = False) -> "BleuReferences":
        """References from one file per reference set (same number of lines each)."""
        if not paths:
            raise InputError("no reference file given", expected="at least one reference file")
        sets = [read_lines(p) for p in paths]
        for path, lines in zip(paths[1:], sets[1:]):
            if len(lines) != len(sets[0]):
                raise InputError(f"{len(lines)} lines", path,
                                 expected=f"{len(sets[0])} lines as {paths[0]}")
        return cls(list(zip(*sets)), lowercase=lowercase)

    def stats(self, sentence_ids, hypotheses: Sequence[str]) -> np.ndarray:
        """``int32[N, 9]`` statistics of ``hypotheses[k]`` against the references of ``sentence_ids[k]``."""
        sentence_ids = np.asarray(sentence_ids, dtype=np.int64)
        if sentence_ids.shape != (len(hypotheses),):
            raise InputError(f"{sentence_ids.shape[0]} sentence ids for {len(hypotheses)} hypotheses")
        if sentence_ids.size and (sentence_ids.min() < 0 or sentence_ids.max() >= self.n_sentences):
            raise InputError(f"sentence id {int(sentence_ids.max())} but only {self.n_sentences} "
                             "sentences have references", expected="one reference line per sentence")
        tokens: list[int] = []
        offsets = np.zeros(len(hypotheses) + 1, dtype=np.int64)
        vocabs = self._vocab
        lowercase = self.lowercase
        for k, (s, hyp) in enumerate(zip(sentence_ids.tolist(), hypotheses)):
            get = vocabs[s].get
            tokens.extend([get(t, -1) for t in tokenize(hyp, lowercase)])
            offsets[k + 1] = len(tokens)
        out = np.zeros((len(hypotheses), N_STATS), dtype=np.int32)
        _kernels.hypothesis_stats(np.asarray(tokens, dtype=np.int32), offsets, sentence_ids,
                                  self._keys, self._counts, self._key_offsets, self._lens,
                                  self._len_offsets, out)
        return out

    def local_ids(self, sentence: int, words: Sequence[str]) -> np.ndarray:
        """int64 per word: its id among the words of ``sentence``'s references (-1: in none), the ids
        :meth:`ngram_codes` are made of."""
        get = self._vocab[sentence].get
        return np.array([get(word.lower() if self.lowercase else word, -1) for word in words], dtype=np.int64)

    def ngram_codes(self, sentence: int) -> np.ndarray:
        """The sorted int64 codes of ``sentence``'s reference n-grams (orders 1 to 4): ``sum_i (id_i + 1)
        KEY_BASE^(n-1-i)`` over their :meth:`local_ids`."""
        return self._keys[self._key_offsets[sentence]:self._key_offsets[sentence + 1]]

    def reference_lengths(self, sentence: int) -> np.ndarray:
        """The lengths of ``sentence``'s references (BLEU takes the one closest to the hypothesis length)."""
        return self._lens[self._len_offsets[sentence]:self._len_offsets[sentence + 1]].copy()

    def kbest_stats(self, kbest) -> np.ndarray:
        """Statistics of every hypothesis of a :class:`~minismt.kbest.KBest`."""
        sentence = np.repeat(kbest.sentence_ids, np.diff(kbest.offsets))
        return self.stats(sentence, kbest.texts())


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[Sequence[str]],
                lowercase: bool = False, smooth: str = "exp") -> float:
    """Corpus BLEU (0..1) of one hypothesis per sentence; ``references[s]`` lists sentence s's references."""
    refs = BleuReferences(references, lowercase=lowercase)
    if len(hypotheses) != refs.n_sentences:
        raise InputError(f"{len(hypotheses)} hypotheses for {refs.n_sentences} reference sentences")
    return corpus_bleu_from_stats(refs.stats(np.arange(len(hypotheses)), hypotheses), smooth)
