"""Numba kernels for word alignment: IBM Model 1 and HMM EM, Viterbi, symmetrisation.

Notation (one sentence pair): the model generates ``f = f_0 .. f_{J-1}`` from the
conditioning side ``e = e_0 .. e_{I-1}`` plus the empty word NULL.

The translation table ``t(f|e)`` is sparse: ``t[p]`` is the probability of the
p-th co-occurring pair of the corpus (see :class:`minismt.align.translation_table.PairIndex`).
Sentence s owns the block ``pair_ids[block_offsets[s]:block_offsets[s+1]]`` of
``J * (I + 1)`` pair ids laid out as ``[j, i]``, column ``i = I`` being
``(NULL, f_j)``, so every EM iteration is array lookups. A pair with an empty
side has an empty block and is skipped.

* IBM Model 1 (Brown et al. 1993, Sec. 4.1):
  ``Pr(f|e) = prod_j 1/(I+1) sum_{i=0..I} t(f_j|e_i)`` (the constant length
  term epsilon left out); E-step ``c(f|e) += t(f|e) / sum_{i'} t(f|e_{i'})``
  for every (i, j) with ``e_i = e, f_j = f``; M-step ``t(f|e) = c(f|e) / sum_f c(f|e)``.
* HMM (Vogel, Ney & Tillmann 1996) with empty words as in Och & Ney (2003):
  states ``0..I-1`` are the words of e, state ``i + I`` is
  the empty twin of position i. Transitions, for ``i, i' < I``:

  ``p(i | i', I) = p(i | i' + I, I) = (1 - p0) c(i - i') / sum_{i''<I} c(i'' - i')``,
  ``p(i + I | i', I) = p(i + I | i' + I, I) = p0 delta(i, i')``,

  optionally interpolated with the uniform ``1 / I`` (Och & Ney's smoothing,
  ``(1 - alpha) c(i - i') / sum + alpha / I``, alpha = ``smoothing``),

  emissions ``t(f_j|e_i)`` and ``t(f_j|NULL)``; initial state
  ``(1 - p0) c0(i) / sum_{i''<I} c0(i'')`` (smoothed alike) and ``p0 / I`` for each
  empty twin.
  The jump widths ``i - i'`` are clipped to ``[-max_jump, max_jump]``
  (``jump[d + max_jump] = c(d)``), the initial positions to ``[0, max_jump]``
  (``initial[min(i, max_jump)] = c0(i)``). The E-step is scaled forward-backward
  (Rabiner 1989), so no sentence length underflows; the M-step sets ``c(d)`` to
  the expected number of jumps of width d into a real word (Vogel et al.'s
  ``s(i - i')``, Och & Ney's ``c(i - i')``), ``c0(i)`` to the expected number of
  sentences starting at real position i, and ``t`` as for Model 1 from the
  state posteriors.
* Symmetrisation: intersection, union and grow-diag-final-and with the
  semantics of fast_align's ``atools`` (Koehn et al. 2003).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

INTERSECTION = 0
UNION = 1
GROW_DIAG_FINAL_AND = 2

_NEIGHBOURS_I = np.array([1, -1, 0, 0, 1, -1, 1, -1], dtype=np.int64)
_NEIGHBOURS_J = np.array([0, 0, 1, -1, 1, 1, -1, -1], dtype=np.int64)


@njit(cache=True)
def build_pair_index(f_ids, f_offsets, e_ids, e_offsets, n_f, n_e, block_offsets):
    """The co-occurring pairs of a corpus and every sentence's block of pair ids, in O(corpus).

    Returns ``(keys, row_offsets, pair_ids)``: ``keys`` the sorted distinct codes
    ``e * n_f + f`` (NULL is ``e = n_e``), ``row_offsets[e]:row_offsets[e+1]`` the
    entries of e, and ``pair_ids`` the blocks described in the module docstring.
    Each e's sentence occurrences are visited in turn; a stamp per f word finds
    its distinct partners, which are then sorted.
    """
    n_sentences = f_offsets.shape[0] - 1
    occ_count = np.zeros(n_e + 2, dtype=np.int64)
    for s in range(n_sentences):
        n_i = e_offsets[s + 1] - e_offsets[s]
        if n_i == 0 or f_offsets[s + 1] == f_offsets[s]:
            continue
        for k in range(e_offsets[s], e_offsets[s + 1]):
            occ_count[e_ids[k] + 1] += 1
        occ_count[n_e + 1] += 1
    occ_offsets = np.cumsum(occ_count)
    occ_sentence = np.empty(occ_offsets[-1], dtype=np.int64)
    occ_position = np.empty(occ_offsets[-1], dtype=np.int64)
    fill = occ_offsets[:-1].copy()
    for s in range(n_sentences):
        n_i = e_offsets[s + 1] - e_offsets[s]
        if n_i == 0 or f_offsets[s + 1] == f_offsets[s]:
            continue
        for i in range(n_i):
            e = e_ids[e_offsets[s] + i]
            occ_sentence[fill[e]] = s
            occ_position[fill[e]] = i
            fill[e] += 1
        occ_sentence[fill[n_e]] = s
        occ_position[fill[n_e]] = n_i
        fill[n_e] += 1
    pair_f = np.empty(block_offsets[-1], dtype=np.int64)
    row_offsets = np.zeros(n_e + 2, dtype=np.int64)
    stamp = np.full(max(n_f, 1), -1, dtype=np.int64)
    n_pairs = 0
    for e in range(n_e + 1):
        for k in range(occ_offsets[e], occ_offsets[e + 1]):
            s = occ_sentence[k]
            for j in range(f_offsets[s], f_offsets[s + 1]):
                f = f_ids[j]
                if stamp[f] != e:
                    stamp[f] = e
                    pair_f[n_pairs] = f
                    n_pairs += 1
        row_offsets[e + 1] = n_pairs
        pair_f[row_offsets[e]:n_pairs] = np.sort(pair_f[row_offsets[e]:n_pairs])
    keys = np.empty(n_pairs, dtype=np.int64)
    pair_ids = np.empty(block_offsets[-1], dtype=np.int32)
    local = np.empty(max(n_f, 1), dtype=np.int32)
    for e in range(n_e + 1):
        for p in range(row_offsets[e], row_offsets[e + 1]):
            keys[p] = e * n_f + pair_f[p]
            local[pair_f[p]] = p
        for k in range(occ_offsets[e], occ_offsets[e + 1]):
            s = occ_sentence[k]
            i = occ_position[k]
            width = e_offsets[s + 1] - e_offsets[s] + 1
            pos = block_offsets[s] + i
            for j in range(f_offsets[s], f_offsets[s + 1]):
                pair_ids[pos] = local[f_ids[j]]
                pos += width
    return keys, row_offsets, pair_ids


@njit(cache=True)
def normalize_rows(counts, row_offsets, t):
    """M-step: ``t[p] = counts[p] / sum(counts[row of p])`` for every row with a positive total."""
    for r in range(row_offsets.shape[0] - 1):
        lo, hi = row_offsets[r], row_offsets[r + 1]
        total = 0.0
        for p in range(lo, hi):
            total += counts[p]
        if total > 0.0:
            for p in range(lo, hi):
                t[p] = counts[p] / total


@njit(cache=True)
def ibm1_expectation(pair_ids, block_offsets, e_lengths, f_lengths, t, counts):
    """IBM Model 1 E-step: add the expected counts to ``counts`` (zeroed here); return the log-likelihood."""
    counts[:] = 0.0
    loglik = 0.0
    for s in range(e_lengths.shape[0]):
        n_i, n_j = e_lengths[s], f_lengths[s]
        if n_i == 0 or n_j == 0:
            continue
        width = n_i + 1
        log_width = math.log(width)
        row = block_offsets[s]
        for j in range(n_j):
            total = 0.0
            for i in range(width):
                total += t[pair_ids[row + i]]
            loglik += math.log(total) - log_width
            inv = 1.0 / total
            for i in range(width):
                p = pair_ids[row + i]
                counts[p] += t[p] * inv
            row += width
    return loglik


@njit(cache=True)
def ibm1_viterbi(pair_ids, block_offsets, e_lengths, f_lengths, t, out):
    """Most probable e position of every f word under Model 1 (-1: NULL); ties go to the lowest i,
    NULL only when strictly more probable. ``out`` is indexed like the flat f ids."""
    pos = 0
    for s in range(e_lengths.shape[0]):
        n_i, n_j = e_lengths[s], f_lengths[s]
        if n_i == 0:
            for j in range(n_j):
                out[pos + j] = -1
            pos += n_j
            continue
        row = block_offsets[s]
        for j in range(n_j):
            best = -1.0
            best_i = 0
            for i in range(n_i + 1):
                v = t[pair_ids[row + i]]
                if v > best:
                    best = v
                    best_i = i
            out[pos + j] = best_i if best_i < n_i else -1
            row += n_i + 1
        pos += n_j


@njit(cache=True)
def transition_matrix(n_i, jump, p0, max_jump, smoothing, a):
    """``a[i', i] = (1 - p0) ((1 - smoothing) c(i - i') / sum_{i''} c(i'' - i') + smoothing / I)``
    for ``i, i' < I = n_i``."""
    for ip in range(n_i):
        z = 0.0
        for i in range(n_i):
            d = i - ip
            if d > max_jump:
                d = max_jump
            elif d < -max_jump:
                d = -max_jump
            z += jump[d + max_jump]
        scale = (1.0 - p0) * (1.0 - smoothing) / z
        floor = (1.0 - p0) * smoothing / n_i
        for i in range(n_i):
            d = i - ip
            if d > max_jump:
                d = max_jump
            elif d < -max_jump:
                d = -max_jump
            a[ip, i] = jump[d + max_jump] * scale + floor


@njit(cache=True)
def initial_distribution(n_i, initial, p0, max_jump, smoothing, pi):
    """``pi[i] = (1 - p0) ((1 - smoothing) c0(i) / sum_{i''} c0(i'') + smoothing / I)`` and
    ``pi[i + I] = p0 / I``."""
    z = 0.0
    for i in range(n_i):
        z += initial[min(i, max_jump)]
    for i in range(n_i):
        pi[i] = (1.0 - p0) * ((1.0 - smoothing) * initial[min(i, max_jump)] / z + smoothing / n_i)
        pi[i + n_i] = p0 / n_i


@njit(cache=True)
def hmm_expectation(pair_ids, block_offsets, e_lengths, f_lengths, t, jump, initial, p0, max_jump,
                    smoothing, t_counts, jump_counts, initial_counts):
    """HMM E-step by scaled forward-backward: fill the expected counts (zeroed here) of t,
    of the clipped jump widths and of the clipped initial positions; return the log-likelihood."""
    t_counts[:] = 0.0
    jump_counts[:] = 0.0
    initial_counts[:] = 0.0
    max_i = 1
    max_j = 1
    for s in range(e_lengths.shape[0]):
        max_i = max(max_i, e_lengths[s])
        max_j = max(max_j, f_lengths[s])
    alpha = np.empty((max_j, 2 * max_i))
    beta = np.empty((max_j, 2 * max_i))
    scale = np.empty(max_j)
    emit = np.empty((max_j, max_i + 1))
    a = np.empty((max_i, max_i))
    xi = np.empty((max_i, max_i))
    pi = np.empty(2 * max_i)
    prev = np.empty(max_i)
    g = np.empty(max_i)
    loglik = 0.0
    for s in range(e_lengths.shape[0]):
        n_i, n_j = e_lengths[s], f_lengths[s]
        if n_i == 0 or n_j == 0:
            continue
        n_s = 2 * n_i
        base = block_offsets[s]
        transition_matrix(n_i, jump, p0, max_jump, smoothing, a)
        initial_distribution(n_i, initial, p0, max_jump, smoothing, pi)
        for j in range(n_j):
            for i in range(n_i + 1):
                emit[j, i] = t[pair_ids[base + j * (n_i + 1) + i]]
        # forward
        c = 0.0
        for i in range(n_i):
            alpha[0, i] = pi[i] * emit[0, i]
            alpha[0, i + n_i] = pi[i + n_i] * emit[0, n_i]
        for k in range(n_s):
            c += alpha[0, k]
        scale[0] = c
        for k in range(n_s):
            alpha[0, k] /= c
        for j in range(1, n_j):
            for i in range(n_i):
                prev[i] = alpha[j - 1, i] + alpha[j - 1, i + n_i]
                alpha[j, i] = 0.0
            for ip in range(n_i):
                w = prev[ip]
                for i in range(n_i):
                    alpha[j, i] += a[ip, i] * w
            null_emit = p0 * emit[j, n_i]
            c = 0.0
            for i in range(n_i):
                alpha[j, i] *= emit[j, i]
                alpha[j, i + n_i] = null_emit * prev[i]
                c += alpha[j, i] + alpha[j, i + n_i]
            scale[j] = c
            for k in range(n_s):
                alpha[j, k] /= c
        for j in range(n_j):
            loglik += math.log(scale[j])
        # backward, with the jump posteriors accumulated as xi[i', i] / a[i', i]
        for ip in range(n_i):
            for i in range(n_i):
                xi[ip, i] = 0.0
        for k in range(n_s):
            beta[n_j - 1, k] = 1.0
        for j in range(n_j - 1, 0, -1):
            inv = 1.0 / scale[j]
            null_emit = p0 * emit[j, n_i] * inv
            for i in range(n_i):
                g[i] = emit[j, i] * beta[j, i] * inv
            for ip in range(n_i):
                v = null_emit * beta[j, ip + n_i]
                w = alpha[j - 1, ip] + alpha[j - 1, ip + n_i]
                for i in range(n_i):
                    v += a[ip, i] * g[i]
                    xi[ip, i] += w * g[i]
                beta[j - 1, ip] = v
                beta[j - 1, ip + n_i] = v
        for ip in range(n_i):
            for i in range(n_i):
                d = i - ip
                if d > max_jump:
                    d = max_jump
                elif d < -max_jump:
                    d = -max_jump
                jump_counts[d + max_jump] += a[ip, i] * xi[ip, i]
        # state posteriors -> t counts and initial counts
        for j in range(n_j):
            row = base + j * (n_i + 1)
            null_gamma = 0.0
            for i in range(n_i):
                t_counts[pair_ids[row + i]] += alpha[j, i] * beta[j, i]
                null_gamma += alpha[j, i + n_i] * beta[j, i + n_i]
            t_counts[pair_ids[row + n_i]] += null_gamma
        for i in range(n_i):
            initial_counts[min(i, max_jump)] += alpha[0, i] * beta[0, i]
    return loglik


@njit(cache=True)
def _log(x):
    """``log(x)``, and -inf for 0."""
    return math.log(x) if x > 0.0 else -np.inf


@njit(cache=True)
def hmm_viterbi(pair_ids, block_offsets, e_lengths, f_lengths, t, jump, initial, p0, max_jump,
                smoothing, out):
    """Viterbi state sequence of every pair in log space; ``out`` (indexed like the flat f ids)
    gets the e position of every f word or -1 for an empty state. Ties go to the lower state."""
    max_i = 1
    max_j = 1
    for s in range(e_lengths.shape[0]):
        max_i = max(max_i, e_lengths[s])
        max_j = max(max_j, f_lengths[s])
    delta = np.empty((max_j, 2 * max_i))
    back = np.empty((max_j, 2 * max_i), dtype=np.int64)
    a = np.empty((max_i, max_i))
    log_a = np.empty((max_i, max_i))
    pi = np.empty(2 * max_i)
    best_prev = np.empty(max_i)
    best_state = np.empty(max_i, dtype=np.int64)
    log_p0 = _log(p0)
    pos = 0
    for s in range(e_lengths.shape[0]):
        n_i, n_j = e_lengths[s], f_lengths[s]
        if n_i == 0 or n_j == 0:
            for j in range(n_j):
                out[pos + j] = -1
            pos += n_j
            continue
        n_s = 2 * n_i
        base = block_offsets[s]
        transition_matrix(n_i, jump, p0, max_jump, smoothing, a)
        initial_distribution(n_i, initial, p0, max_jump, smoothing, pi)
        for ip in range(n_i):
            for i in range(n_i):
                log_a[ip, i] = _log(a[ip, i])
        log_null = _log(t[pair_ids[base + n_i]])
        for i in range(n_i):
            delta[0, i] = _log(pi[i]) + _log(t[pair_ids[base + i]])
            delta[0, i + n_i] = _log(pi[i + n_i]) + log_null
        for j in range(1, n_j):
            row = base + j * (n_i + 1)
            for ip in range(n_i):
                if delta[j - 1, ip + n_i] > delta[j - 1, ip]:
                    best_prev[ip] = delta[j - 1, ip + n_i]
                    best_state[ip] = ip + n_i
                else:
                    best_prev[ip] = delta[j - 1, ip]
                    best_state[ip] = ip
            log_null = _log(t[pair_ids[row + n_i]]) + log_p0
            for i in range(n_i):
                best = -np.inf
                arg = 0
                for ip in range(n_i):
                    v = best_prev[ip] + log_a[ip, i]
                    if v > best:
                        best = v
                        arg = ip
                delta[j, i] = best + _log(t[pair_ids[row + i]])
                back[j, i] = best_state[arg]
                delta[j, i + n_i] = best_prev[i] + log_null
                back[j, i + n_i] = best_state[i]
        state = 0
        best = -np.inf
        for k in range(n_s):
            if delta[n_j - 1, k] > best:
                best = delta[n_j - 1, k]
                state = k
        for j in range(n_j - 1, -1, -1):
            out[pos + j] = state if state < n_i else -1
            if j > 0:
                state = back[j, state]
        pos += n_j


@njit(cache=True)
def symmetrize(fwd_links, fwd_offsets, rev_links, rev_offsets, mode, out_links, out_offsets):
    """Combine two alignments of the same sentences, both as (source, target) links.

    ``mode``: INTERSECTION, UNION or GROW_DIAG_FINAL_AND as fast_align's ``atools``:
    start from the intersection; grow: visit the union points not yet in the result
    in (i, j) order, adding a point when one of its 8 neighbours is in the result and
    its source or its target word is still unaligned, passes repeated until one adds
    nothing; final-and: visit the forward, then the reverse points in (i, j) order,
    adding those whose source and target words are both unaligned. Writes the links
    in (i, j) order to ``out_links`` and returns their number.
    """
    pos = 0
    out_offsets[0] = 0
    for s in range(fwd_offsets.shape[0] - 1):
        flo, fhi = fwd_offsets[s], fwd_offsets[s + 1]
        rlo, rhi = rev_offsets[s], rev_offsets[s + 1]
        n_i = 0
        n_j = 0
        for k in range(flo, fhi):
            n_i = max(n_i, fwd_links[k, 0] + 1)
            n_j = max(n_j, fwd_links[k, 1] + 1)
        for k in range(rlo, rhi):
            n_i = max(n_i, rev_links[k, 0] + 1)
            n_j = max(n_j, rev_links[k, 1] + 1)
        fwd = np.zeros((n_i, n_j), dtype=np.bool_)
        rev = np.zeros((n_i, n_j), dtype=np.bool_)
        for k in range(flo, fhi):
            fwd[fwd_links[k, 0], fwd_links[k, 1]] = True
        for k in range(rlo, rhi):
            rev[rev_links[k, 0], rev_links[k, 1]] = True
        res = np.zeros((n_i, n_j), dtype=np.bool_)
        if mode == UNION:
            for i in range(n_i):
                for j in range(n_j):
                    res[i, j] = fwd[i, j] or rev[i, j]
        else:
            aligned_i = np.zeros(n_i, dtype=np.bool_)
            aligned_j = np.zeros(n_j, dtype=np.bool_)
            for i in range(n_i):
                for j in range(n_j):
                    if fwd[i, j] and rev[i, j]:
                        res[i, j] = True
                        aligned_i[i] = True
                        aligned_j[j] = True
            if mode == GROW_DIAG_FINAL_AND:
                cand_i = np.empty(n_i * n_j, dtype=np.int64)
                cand_j = np.empty(n_i * n_j, dtype=np.int64)
                n_cand = 0
                for i in range(n_i):
                    for j in range(n_j):
                        if (fwd[i, j] or rev[i, j]) and not res[i, j]:
                            cand_i[n_cand] = i
                            cand_j[n_cand] = j
                            n_cand += 1
                alive = np.ones(n_cand, dtype=np.bool_)
                added = True
                while added:
                    added = False
                    for k in range(n_cand):
                        if not alive[k]:
                            continue
                        i, j = cand_i[k], cand_j[k]
                        if aligned_i[i] and aligned_j[j]:
                            continue
                        for q in range(8):
                            ni = i + _NEIGHBOURS_I[q]
                            nj = j + _NEIGHBOURS_J[q]
                            if 0 <= ni < n_i and 0 <= nj < n_j and res[ni, nj]:
                                res[i, j] = True
                                aligned_i[i] = True
                                aligned_j[j] = True
                                alive[k] = False
                                added = True
                                break
                for i in range(n_i):
                    for j in range(n_j):
                        if fwd[i, j] and not res[i, j] and not aligned_i[i] and not aligned_j[j]:
                            res[i, j] = True
                            aligned_i[i] = True
                            aligned_j[j] = True
                for i in range(n_i):
                    for j in range(n_j):
                        if rev[i, j] and not res[i, j] and not aligned_i[i] and not aligned_j[j]:
                            res[i, j] = True
                            aligned_i[i] = True
                            aligned_j[j] = True
        for i in range(n_i):
            for j in range(n_j):
                if res[i, j]:
                    out_links[pos, 0] = i
                    out_links[pos, 1] = j
                    pos += 1
        out_offsets[s + 1] = pos
    return pos
