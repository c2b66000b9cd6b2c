"""Interpolated modified Kneser-Ney estimation, computed as KenLM's ``lmplz`` computes it.

References
----------
S. F. Chen and J. Goodman (1998). An Empirical Study of Smoothing Techniques for
Language Modeling. Harvard TR-10-98. Modified Kneser-Ney (p. 20): interpolated
absolute discounting with a discount D(c) of 0, D1, D2 or D3+ by count, the weight
gamma(h) = (D1 N1(h .) + D2 N2(h .) + D3+ N3+(h .)) / sum_w c(h w), and the discount
estimates of eq. (26): Y = n1 / (n1 + 2 n2), D1 = 1 - 2 Y n2/n1, D2 = 2 - 3 Y n3/n2,
D3+ = 3 - 4 Y n4/n3.

K. Heafield, I. Pouzyrevsky, J. H. Clark and P. Koehn (2013). Scalable Modified
Kneser-Ney Language Model Estimation. ACL. Section 3, whose symbols this module uses:

* 3.1 counting: every sentence is ``<s> w_1 .. w_L </s>``; N-grams are counted
  with the sentence start padded by ``<s>``;
* 3.2 adjusted counts ``a``: the raw count for the highest order N and for
  n-grams that begin with ``<s>``, else the number of distinct words that
  precede the n-gram (``<s>`` included); discounts ``D_n(k)`` from the counts of
  adjusted counts ``t_{n,k}`` by eq. (26) above;
* 3.3 normalisation: ``u(w | h) = (a(h w) - D_n(a(h w))) / sum_x a(h x)`` and the
  back-off ``b(h) = sum_k D_n(k) |{x : a(h x) = k}| / sum_x a(h x)`` (k = 3 means 3+);
* 3.4 interpolation: ``p(w | h) = u(w | h) + b(h) p(w | h')`` with h' = h minus
  its first word, down to ``p(w) = u(w) + b() / |V|``.

lmplz details this module reproduces (``lm/builder/adjust_counts.cc``,
``initial_probabilities.cc``, ``interpolate.cc``, ``pipeline.cc``):

* words are split on space, tab, CR, LF and NUL only; ``<s>``, ``</s>``, ``<unk>``
  in the text are an error (lmplz's default); ids are ``<unk>`` 0, ``<s>`` 1,
  ``</s>`` 2, then words in order of first appearance; an empty line is the
  sentence ``<s> </s>``;
* the vocabulary always holds ``<unk>`` and ``<s>`` with adjusted count 0;
  |V| in the uniform distribution counts ``<unk>`` but not ``<s>``; ``<unk>``
  gets only the interpolated mass, ``b() / |V|``; ``<s>`` gets probability 1
  (log10 0, written as ``0``), since it is never predicted;
* counts of adjusted counts include every n-gram of the order, the ``<s>``-initial
  ones with their raw counts. lmplz adds the last n-gram of each lower order (in
  its suffix-sorted stream: the suffixes of the full N-gram that sorts last by
  its last word, then the word before, ...) with its raw count instead of its
  adjusted count (the final flush in ``AdjustCounts::Run``); so does this module.
  It changes a discount only when that n-gram's two counts differ, which takes
  a tiny corpus in practice;
* a discount is unusable when n1, n2 or n3 is 0 or a D_k falls outside [0, k];
  lmplz then stops unless ``--discount_fallback`` gives D1=0.5 D2=1 D3+=1.5 for
  that order;
* an n-gram's back-off is b of the same words as a context (every n-gram below
  the highest order that does not end in ``</s>`` is one), else 0; a log10
  probability above 0 is written as 0.

Arithmetic is float64 throughout, where lmplz uses float32; its models agree with
ours to about 1e-6 in log10 (see ``tests/test_lm.py``).

Counting is array code: the k-gram ending at each token is identified by one
int64 ``index of its (k-1)-gram prefix * |V| + last word``, and ``np.unique`` over
those keys counts, sorts and numbers the k-grams of a whole corpus at once, for
any order and vocabulary size (while (k-1)-grams times words stay below 2^63).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from minismt.corpus import TokenArray, Vocabulary
from minismt.errors import InputError
from minismt.io import iter_lines
from minismt.lm.arpa import BOS, BOS_ID, EOS, EOS_ID, MAX_ORDER, UNK, ArpaModel
from minismt.progress import bar as progress_bar

MIN_ORDER = 2
LMPLZ_DISCOUNT_FALLBACK = (0.5, 1.0, 1.5)  # lmplz --discount_fallback defaults

_LMPLZ_DELIMITERS = str.maketrans({"\t": " ", "\r": " ", "\n": " ", "\0": " "})
_SPECIALS = (UNK, BOS, EOS)


@dataclass
class _Level:
    """The k-grams of one order, in ascending key order (= lexicographic order of their words).

    ``keys[i] = prefix[i] * V + last word``; ``prefix`` indexes the (k-1)-grams,
    ``suffix`` the (k-1)-gram made of the last k-1 words.
    """

    keys: np.ndarray         # int64[n_k]
    raw: np.ndarray          # int64[n_k] raw counts
    suffix: np.ndarray       # int64[n_k] (unused for unigrams)
    bos_initial: np.ndarray  # bool[n_k] k-grams beginning with <s>


def _check_order(order) -> int:
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)):
        raise InputError(f"order {order!r} is not an integer", expected=f"{MIN_ORDER} <= order <= {MAX_ORDER}")
    if not MIN_ORDER <= order <= MAX_ORDER:
        raise InputError(f"order {order} is out of range", expected=f"{MIN_ORDER} <= order <= {MAX_ORDER}")
    return int(order)


def _check_fallback(discount_fallback) -> np.ndarray | None:
    if discount_fallback is None or discount_fallback is False:
        return None
    if discount_fallback is True:
        values = LMPLZ_DISCOUNT_FALLBACK
    else:
        try:
            values = tuple(float(d) for d in discount_fallback)
        except (TypeError, ValueError):
            raise InputError(f"discount_fallback={discount_fallback!r}",
                             expected="None, True or three discounts (D1, D2, D3+)") from None
    if len(values) != 3 or not all(np.isfinite(values)) or min(values) < 0:
        raise InputError(f"discount_fallback={discount_fallback!r}",
                         expected="three finite discounts D1, D2, D3+ >= 0")
    return np.array([0.0, *values])


def _encode_lines(lines: Iterable[tuple[int, object]], path) -> tuple[Vocabulary, np.ndarray, np.ndarray]:
    """lmplz's word ids of the tokens (without ``</s>``) and the number of tokens per line."""
    vocab = Vocabulary(_SPECIALS)
    add = vocab.add
    flat: list[int] = []
    lengths: list[int] = []
    numbers: list[int] = []
    for number, line in lines:
        if isinstance(line, (bytes, bytearray)):
            try:
                line = bytes(line).decode("utf-8")
            except UnicodeDecodeError as err:
                raise InputError(f"not UTF-8 at byte {err.start}", path, number, "UTF-8 text") from None
        elif not isinstance(line, str):
            raise InputError(f"a {type(line).__name__} where a line of text belongs", path, number,
                             "str or UTF-8 bytes")
        tokens = [t for t in line.translate(_LMPLZ_DELIMITERS).split(" ") if t]
        flat.extend(map(add, tokens))
        lengths.append(len(tokens))
        numbers.append(number)
    if not lengths:
        raise InputError("the corpus is empty", path, expected="at least one line of text")
    ids = np.array(flat, dtype=np.int64)
    lengths_arr = np.array(lengths, dtype=np.int64)
    special = np.flatnonzero(ids <= EOS_ID)
    if special.size:
        sentence = int(np.searchsorted(np.cumsum(lengths_arr), special[0], side="right"))
        word = vocab[int(ids[special[0]])]
        raise InputError(f"the special word {word} appears in the text", path, numbers[sentence],
                         "text without <s>, </s> and <unk> (as lmplz requires)")
    return vocab, ids, lengths_arr


def _encode_token_array(corpus: TokenArray, vocab: Vocabulary | None) -> tuple[Vocabulary, np.ndarray, np.ndarray]:
    """Renumber a TokenArray's ids into lmplz's order (specials, then first appearance)."""
    if vocab is None:
        raise InputError("a TokenArray needs the Vocabulary that encoded it", expected="vocab=...")
    ids = np.asarray(corpus.ids, dtype=np.int64)
    offsets = np.asarray(corpus.offsets, dtype=np.int64)
    if offsets.ndim != 1 or offsets.shape[0] < 2:
        raise InputError("the corpus is empty", expected="at least one sentence")
    if offsets[0] != 0 or offsets[-1] != ids.shape[0] or np.any(np.diff(offsets) < 0):
        raise InputError("TokenArray offsets do not partition its ids",
                         expected="offsets rising from 0 to len(ids)")
    if ids.size and (ids.min() < 0 or ids.max() >= len(vocab)):
        raise InputError("TokenArray ids outside the vocabulary", expected=f"ids in [0, {len(vocab)})")
    lengths = np.diff(offsets)
    used, first = np.unique(ids, return_index=True)
    used = used[np.argsort(first, kind="stable")]
    lm_vocab = Vocabulary(_SPECIALS)
    for word_id in used.tolist():
        word = vocab[word_id]
        if word in _SPECIALS or not word or any(c in word for c in " \t\r\n\0"):
            where = int(np.flatnonzero(ids == word_id)[0])
            sentence = int(np.searchsorted(offsets, where, side="right")) - 1
            raise InputError(f"word {word[:40]!r} (id {word_id}) in sentence {sentence + 1}",
                             expected="no <s>, </s>, <unk> or whitespace in words (as lmplz requires)")
        lm_vocab.add(word)
    mapping = np.zeros(len(vocab), dtype=np.int64)
    mapping[used] = np.arange(3, 3 + used.shape[0])
    return lm_vocab, mapping[ids], lengths


def _count(tokens: np.ndarray, position: np.ndarray, vocab_size: int, order: int):
    """Raw counts of all k-grams (k = 1..N) and the ids of the lmplz quirk's n-grams.

    ``tokens`` are the predicted tokens (words and ``</s>``), ``position`` their
    index within the sentence. The k-gram ending at token t exists (without
    ``<s>`` inside it) when k <= position + 2; it begins with ``<s>`` when
    k == position + 2.
    """
    n_tokens = tokens.shape[0]
    # The full N-gram (with <s> padding) that sorts last in lmplz's suffix order:
    # largest last word, then largest word before it, and so on.
    cand = np.flatnonzero(tokens == tokens.max())
    for back in range(1, order):
        words = np.where(position[cand] >= back, tokens[np.maximum(cand - back, 0)], BOS_ID)
        cand = cand[words == words.max()]
    t_last = int(cand[0])
    last_ids = [int(tokens[t_last])]

    unigrams = _Level(keys=np.arange(vocab_size, dtype=np.int64),
                      raw=np.bincount(tokens, minlength=vocab_size).astype(np.int64),
                      suffix=np.zeros(vocab_size, dtype=np.int64),
                      bos_initial=np.zeros(vocab_size, dtype=bool))
    levels = [unigrams]
    ids_prev = tokens
    for k in range(2, order + 1):
        if levels[-1].keys.shape[0] * vocab_size >= 2**63:
            raise InputError(f"{levels[-1].keys.shape[0]} {k - 1}-grams times {vocab_size} words overflow "
                             "the int64 n-gram keys", expected="a smaller corpus")
        at = np.flatnonzero(position >= k - 2)
        pos = position[at]
        prefix = np.where(pos >= 1, ids_prev[np.maximum(at - 1, 0)], BOS_ID)
        keys, inverse, raw = np.unique(prefix * vocab_size + tokens[at], return_inverse=True,
                                       return_counts=True)
        inverse = inverse.reshape(-1)
        suffix = np.empty(keys.shape[0], dtype=np.int64)
        suffix[inverse] = ids_prev[at]
        bos_initial = np.zeros(keys.shape[0], dtype=bool)
        bos_initial[inverse[pos == k - 2]] = True
        levels.append(_Level(keys=keys, raw=raw.astype(np.int64), suffix=suffix, bos_initial=bos_initial))
        ids_k = np.full(n_tokens, -1, dtype=np.int64)
        ids_k[at] = inverse
        last_ids.append(int(ids_k[t_last]))
        ids_prev = ids_k
    return levels, last_ids


def _adjusted_counts(levels: list[_Level]) -> list[np.ndarray]:
    """Heafield et al. (2013) sec. 3.2: raw counts for order N and <s>-initial n-grams,
    else the number of distinct one-word left extensions."""
    order = len(levels)
    adjusted = [None] * order
    adjusted[-1] = levels[-1].raw
    for k in range(order - 1, 0, -1):
        level = levels[k - 1]
        a = np.bincount(levels[k].suffix, minlength=level.keys.shape[0]).astype(np.int64)
        a[level.bos_initial] = level.raw[level.bos_initial]
        adjusted[k - 1] = a
    return adjusted


def _counts_of_counts(adjusted: list[np.ndarray], levels: list[_Level], last_ids: list[int]) -> np.ndarray:
    """t_{n,1..4}: n-grams with adjusted count 1..4 per order, with lmplz's final-flush quirk."""
    order = len(adjusted)
    table = np.zeros((order, 4), dtype=np.int64)
    for k in range(1, order + 1):
        counts = np.bincount(np.minimum(adjusted[k - 1], 5), minlength=6)
        table[k - 1] = counts[1:5]
    for k in range(1, order):
        g = last_ids[k - 1]
        if g < 0:
            break
        a, raw = int(adjusted[k - 1][g]), int(levels[k - 1].raw[g])
        if a != raw:
            if 1 <= a <= 4:
                table[k - 1, a - 1] -= 1
            if 1 <= raw <= 4:
                table[k - 1, raw - 1] += 1
    return table


def _discounts(counts_of_counts: np.ndarray, fallback: np.ndarray | None) -> np.ndarray:
    """Chen & Goodman (1998) eq. (26) per order; ``D[:, 0] = 0`` is the discount of count 0."""
    order = counts_of_counts.shape[0]
    discounts = np.zeros((order, 4))
    for k in range(1, order + 1):
        t = [0, *counts_of_counts[k - 1].tolist()]
        problem = None
        for c in (1, 2, 3):
            if t[c] == 0:
                problem = (f"could not calculate Kneser-Ney discounts for {k}-grams with adjusted count "
                           f"{c + 1} because no {k}-gram has adjusted count {c}")
                break
        if problem is None:
            y = t[1] / (t[1] + 2.0 * t[2])
            for c in (1, 2, 3):
                discounts[k - 1, c] = c - (c + 1) * y * t[c + 1] / t[c]
                if not 0.0 <= discounts[k - 1, c] <= c:
                    problem = (f"the {k}-gram discount for adjusted count {c} is "
                               f"{discounts[k - 1, c]:.6g}, outside [0, {c}]")
                    break
        if problem is not None:
            if fallback is None:
                raise InputError(problem + "; is this small or artificial data?",
                                 expected="more text, or discount_fallback=True for lmplz's "
                                          "--discount_fallback discounts D1=0.5 D2=1 D3+=1.5")
            discounts[k - 1] = fallback
    return discounts


def _probabilities(levels: list[_Level], adjusted: list[np.ndarray], discounts: np.ndarray, vocab_size: int):
    """Heafield et al. (2013) sec. 3.3-3.4: interpolated probabilities p and back-offs b, in log10.

    b(h) is Chen & Goodman's gamma(h) (the weight of the lower order in p(. | h)) and
    also h's ARPA back-off, since the model is interpolated.
    """
    order = len(levels)
    probs: list[np.ndarray] = []
    backoffs: list[np.ndarray] = []
    with np.errstate(divide="ignore"):
        a = adjusted[0]
        d = discounts[0][np.minimum(a, 3)]
        total = float(a.sum())
        b_empty = float(d.sum()) / total
        p = (a - d) / total + b_empty / (vocab_size - 1)  # |V| counts <unk>, not <s>
        p[BOS_ID] = 1.0
        probs.append(p)
        for k in range(2, order + 1):
            level, a = levels[k - 1], adjusted[k - 1]
            context = level.keys // vocab_size
            n_contexts = levels[k - 2].keys.shape[0]
            d = discounts[k - 1][np.minimum(a, 3)]
            denominator = np.bincount(context, weights=a, minlength=n_contexts).astype(np.float64)
            b = np.bincount(context, weights=d, minlength=n_contexts).astype(np.float64)
            is_context = denominator > 0
            b[is_context] /= denominator[is_context]
            backoffs.append(np.where(is_context, np.log10(b), 0.0))
            p = (a - d) / denominator[context] + b[context] * probs[-1][level.suffix]
            probs.append(p)
        backoffs.append(np.zeros(levels[-1].keys.shape[0]))
        logprobs = [np.minimum(0.0, np.log10(p)) + 0.0 for p in probs]
    return logprobs, [bo + 0.0 for bo in backoffs]


def _suffix_sorted(levels: list[_Level], vocab_size: int, logprobs, backoffs):
    """n-gram word rows in lmplz's output order (by last word, then the word before, ...)."""
    ngrams, out_probs, out_backs = [], [], []
    rows = levels[0].keys.reshape(-1, 1).astype(np.int32)
    for k, level in enumerate(levels, 1):
        if k > 1:
            rows = np.column_stack([rows[level.keys // vocab_size], level.keys % vocab_size]).astype(np.int32)
        perm = np.lexsort(rows.T) if k > 1 else np.arange(rows.shape[0])
        ngrams.append(np.ascontiguousarray(rows[perm]))
        out_probs.append(logprobs[k - 1][perm])
        out_backs.append(backoffs[k - 1][perm])
    return ngrams, out_probs, out_backs


def estimate_kn(corpus, order: int = 4, discount_fallback=None, progress: bool = False,
                vocab: Vocabulary | None = None) -> ArpaModel:
    """Estimate an interpolated modified Kneser-Ney language model as ``lmplz -o order`` does.

    Parameters
    ----------
    corpus : iterable of str or UTF-8 bytes, path, or TokenArray
        One sentence per line, already tokenised (words are split on space, tab,
        CR, LF and NUL, as lmplz splits them). A ``str`` or ``os.PathLike`` is a
        file to read (plain or gzipped, UTF-8).
        A :class:`~minismt.corpus.TokenArray` needs ``vocab``, the Vocabulary that
        encoded it; the model renumbers its words in lmplz's order.
    order : int
        The n-gram order, 2 to 6.
    discount_fallback : None, True or (D1, D2, D3+)
        What to do when an order's discounts cannot be estimated (a count of
        adjusted counts n1, n2 or n3 is 0, or a discount falls outside [0, k]):
        None raises :class:`InputError` as lmplz does; True substitutes lmplz's
        ``--discount_fallback`` values 0.5 1 1.5; three numbers substitute those.
    progress : bool
        Show a progress bar over the estimation steps.

    Returns
    -------
    ArpaModel
        Probabilities and back-offs per order, plus ``discounts`` (D1, D2, D3+
        per order) and ``counts_of_counts`` (n1..n4 per order).
    """
    order = _check_order(order)
    fallback = _check_fallback(discount_fallback)
    # steps of unrelated lengths: no rate and no remaining time
    with progress_bar(total=6, desc="estimate_kn", unit="step", enabled=progress, eta=False) as bar:
        if isinstance(corpus, TokenArray):
            lm_vocab, ids, lengths = _encode_token_array(corpus, vocab)
        elif isinstance(corpus, (str, os.PathLike)):
            lm_vocab, ids, lengths = _encode_lines(iter_lines(corpus), corpus)
        else:
            try:
                numbered = enumerate(corpus, 1)
            except TypeError:
                raise InputError(f"a {type(corpus).__name__} as the corpus",
                                 expected="lines of text, a file path or a TokenArray") from None
            lm_vocab, ids, lengths = _encode_lines(numbered, None)
        if lengths.shape[0] == 0:
            raise InputError("the corpus is empty", expected="at least one sentence")
        bar.update()
        sizes = lengths + 1
        n_tokens = int(sizes.sum())
        ends = np.cumsum(sizes)
        position = np.arange(n_tokens, dtype=np.int64) - np.repeat(ends - sizes, sizes)
        tokens = np.full(n_tokens, EOS_ID, dtype=np.int64)
        tokens[position < np.repeat(lengths, sizes)] = ids
        vocab_size = len(lm_vocab)
        levels, last_ids = _count(tokens, position, vocab_size, order)
        bar.update()
        adjusted = _adjusted_counts(levels)
        bar.update()
        counts_of_counts = _counts_of_counts(adjusted, levels, last_ids)
        discounts = _discounts(counts_of_counts, fallback)
        bar.update()
        logprobs, backoffs = _probabilities(levels, adjusted, discounts, vocab_size)
        bar.update()
        ngrams, logprobs, backoffs = _suffix_sorted(levels, vocab_size, logprobs, backoffs)
        bar.update()
    return ArpaModel(vocab=lm_vocab, ngrams=ngrams, logprob=logprobs, backoff=backoffs,
                     discounts=discounts[:, 1:].copy(), counts_of_counts=counts_of_counts)
