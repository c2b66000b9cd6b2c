"""Numba kernels of batch k-best MIRA (:mod:`tuners.kbmira`): background BLEU, hope/fear, epochs.

Array conventions are those of :class:`minismt.kbest.KBest` (``offsets``, dense
``features``, CSR ``indptr``/``indices``/``values`` with global indices,
``stats`` int32[N, 9] in Moses order ``[m1 t1 m2 t2 m3 t3 m4 t4 ref_len]``).
The averaged weight vector is kept lazily as in Moses' ``MiraWeightVector``:
``w`` (current weights), ``totals`` (sum of past weights), ``last`` (update
count at which each entry of ``totals`` was brought up to date) and
``counter[0]`` (number of updates so far). Kernels assume valid arrays; the
checks are in :mod:`tuners.kbmira`.

The ``glibc_*`` kernels reproduce glibc's ``srand``/``rand`` (the TYPE_3
additive feedback generator of ``random_r.c``) and libstdc++'s
``std::random_shuffle``, so that the sentence order of Moses' kbmira can be
replayed; the generator state is an explicit ``int64[33]`` array (31 state
words as unsigned 32-bit values, then the front and rear positions).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from minismt.kbest._kernels import row_score

N_STATS = 9
MAX_ORDER = 4
REF_LEN = 2 * MAX_ORDER

_GLIBC_DEGREE = 31
_GLIBC_SEPARATION = 3
_MASK32 = 0xFFFFFFFF


@njit(cache=True)
def background_bleu(stats, row, bg):
    """BLEU of ``stats[row]`` added to the background pseudo-document ``bg``, times its reference length.

    ``exp(mean_n log((m_n + bg_m_n) / (t_n + bg_t_n)) + min(0, 1 - R / T1)) * R``
    with ``R = ref_len + bg_ref_len`` and ``T1 = t1 + bg_t1`` (the pseudo-document
    BLEU of Chiang et al. 2008; Moses' ``calculateSentenceLevelBackgroundScore``). An order
    without any match gives 0, as Moses' BLEU scorer.
    """
    logbleu = 0.0
    for n in range(MAX_ORDER):
        m = stats[row, 2 * n] + bg[2 * n]
        if m <= 0.0:
            return 0.0
        logbleu += math.log(m) - math.log(stats[row, 2 * n + 1] + bg[2 * n + 1])
    logbleu /= MAX_ORDER
    ref_len = stats[row, REF_LEN] + bg[REF_LEN]
    brevity = 1.0 - ref_len / (stats[row, 1] + bg[1])
    if brevity < 0.0:
        logbleu += brevity
    return math.exp(logbleu) * ref_len


@njit(cache=True)
def hope_fear(lo, hi, features, indptr, indices, values, stats, w, bg):
    """Rows of hope ``argmax w.h + B(h)``, fear ``argmax w.h - B(h)`` and model ``argmax w.h`` in ``lo:hi``.

    ``B`` is :func:`background_bleu`; the first row wins ties, as in Moses.
    Returns ``(hope, fear, model, B(hope), B(fear))``.
    """
    hope = fear = model = lo
    hope_score = fear_score = best_score = 0.0
    hope_bleu = fear_bleu = 0.0
    for row in range(lo, hi):
        score = row_score(features, indptr, indices, values, w, row)
        bleu = background_bleu(stats, row, bg)
        if row == lo or score + bleu > hope_score:
            hope_score = score + bleu
            hope = row
            hope_bleu = bleu
        if row == lo or score - bleu > fear_score:
            fear_score = score - bleu
            fear = row
            fear_bleu = bleu
        if row == lo or score > best_score:
            best_score = score
            model = row
    return hope, fear, model, hope_bleu, fear_bleu


@njit(cache=True)
def _add_update(w, totals, last, n, index, delta):
    """``w[index] += delta`` with the lazy bookkeeping of the running sum of weights."""
    totals[index] += (n - last[index]) * w[index] + delta
    w[index] += delta
    last[index] = n


@njit(cache=True)
def fix_totals(w, totals, last, counter):
    """Bring every entry of ``totals`` up to date (Moses' ``fixTotals``)."""
    n = counter[0]
    for index in range(w.shape[0]):
        _add_update(w, totals, last, n, index, 0.0)


@njit(cache=True)
def mira_epoch(order, offsets, features, indptr, indices, values, stats, w, totals, last, counter,
               bg, C, decay, model_bg, sparse_epsilon, scratch, seen, touched):
    """One epoch of batch MIRA over the instances in ``order`` (Cherry & Foster 2012, Alg. 1).

    For each instance: hope/fear by :func:`hope_fear`; if they differ and
    ``B(hope) > B(fear)``, ``loss = B(hope) - B(fear) - w.(h_hope - h_fear)`` and,
    if positive, the update ``w += eta * (h_hope - h_fear)`` with
    ``eta = min(C, loss / |h_hope - h_fear|^2)`` (``C`` when the difference is the
    zero vector, as Moses); then the background decays by ``decay`` and takes
    the statistics of the hope (``model_bg``: the model-best). A sparse feature
    present in both hypotheses whose difference is at most ``sparse_epsilon`` in
    absolute value is left out of the difference (Moses' ``MiraFeatureVector``).

    ``scratch`` (float64) and ``seen`` (int8) are zero arrays over the feature
    space and ``touched`` an int64 array of the same length; they come back zeroed.
    Returns ``(updates, examples, summed loss of the updates)``.
    """
    n_dense = features.shape[1]
    updates = 0
    examples = 0
    total_loss = 0.0
    for position in range(order.shape[0]):
        instance = order[position]
        lo, hi = offsets[instance], offsets[instance + 1]
        if hi <= lo:
            continue
        examples += 1
        hope, fear, model, hope_bleu, fear_bleu = hope_fear(lo, hi, features, indptr, indices,
                                                            values, stats, w, bg)
        if hope == fear or not hope_bleu > fear_bleu:
            continue
        # sparse part of h_hope - h_fear, merged by feature index
        n_touched = 0
        for j in range(indptr[hope], indptr[hope + 1]):
            index = indices[j]
            scratch[index] += values[j]
            if seen[index] == 0:
                touched[n_touched] = index
                n_touched += 1
            seen[index] += 1
        for j in range(indptr[fear], indptr[fear + 1]):
            index = indices[j]
            scratch[index] -= values[j]
            if seen[index] == 0:
                touched[n_touched] = index
                n_touched += 1
            seen[index] += 1
        margin = 0.0
        norm = 0.0
        for k in range(n_dense):
            d = features[hope, k] - features[fear, k]
            margin += w[k] * d
            norm += d * d
        for t in range(n_touched):
            index = touched[t]
            d = scratch[index]
            if seen[index] > 1 and abs(d) <= sparse_epsilon:
                seen[index] = 0
                scratch[index] = 0.0
                continue
            margin += w[index] * d
            norm += d * d
        loss = hope_bleu - fear_bleu - margin
        if loss > 0.0:
            eta = C
            if norm > 0.0 and loss / norm < C:
                eta = loss / norm
            counter[0] += 1
            n = counter[0]
            for k in range(n_dense):
                _add_update(w, totals, last, n, k, eta * (features[hope, k] - features[fear, k]))
            for t in range(n_touched):
                index = touched[t]
                if seen[index] > 0:
                    _add_update(w, totals, last, n, index, eta * scratch[index])
            total_loss += loss
            updates += 1
        for t in range(n_touched):
            index = touched[t]
            scratch[index] = 0.0
            seen[index] = 0
        source = model if model_bg else hope
        for k in range(N_STATS):
            bg[k] = bg[k] * decay + stats[source, k]
    return updates, examples, total_loss


@njit(cache=True)
def model_best_stats(offsets, features, indptr, indices, values, stats, w):
    """Summed BLEU statistics (int64[9]) of the model-best hypothesis of every non-empty instance."""
    out = np.zeros(N_STATS, dtype=np.int64)
    for instance in range(offsets.shape[0] - 1):
        lo, hi = offsets[instance], offsets[instance + 1]
        best = -1
        top = 0.0
        for row in range(lo, hi):
            score = row_score(features, indptr, indices, values, w, row)
            if best < 0 or score > top:
                top = score
                best = row
        if best >= 0:
            for k in range(N_STATS):
                out[k] += stats[best, k]
    return out


@njit(cache=True)
def glibc_srand(seed):
    """glibc's generator state after ``srand(seed)`` (``seed`` an unsigned 32-bit value)."""
    state = np.zeros(_GLIBC_DEGREE + 2, dtype=np.int64)
    if seed == 0:
        seed = 1
    state[0] = seed
    word = seed if seed < 2 ** 31 else seed - 2 ** 32  # glibc keeps it as int32_t
    for i in range(1, _GLIBC_DEGREE):
        hi = abs(word) // 127773
        if word < 0:
            hi = -hi
        lo = word - hi * 127773  # C division truncates towards zero
        word = 16807 * lo - 2836 * hi
        if word < 0:
            word += 2147483647
        state[i] = word & _MASK32
    state[_GLIBC_DEGREE] = _GLIBC_SEPARATION
    state[_GLIBC_DEGREE + 1] = 0
    for _ in range(10 * _GLIBC_DEGREE):
        glibc_rand(state)
    return state


@njit(cache=True)
def glibc_rand(state):
    """The next value of glibc's ``rand()`` (0 .. 2**31 - 1), advancing ``state``."""
    front = state[_GLIBC_DEGREE]
    rear = state[_GLIBC_DEGREE + 1]
    value = (state[front] + state[rear]) & _MASK32
    state[front] = value
    front += 1
    rear += 1
    if front >= _GLIBC_DEGREE:
        front = 0
    elif rear >= _GLIBC_DEGREE:
        rear = 0
    state[_GLIBC_DEGREE] = front
    state[_GLIBC_DEGREE + 1] = rear
    return value >> 1


@njit(cache=True)
def glibc_random_shuffle(items, state):
    """Shuffle ``items`` in place as libstdc++'s ``std::random_shuffle`` does with glibc's ``rand()``."""
    for i in range(1, items.shape[0]):
        j = glibc_rand(state) % (i + 1)
        if j != i:
            items[i], items[j] = items[j], items[i]
