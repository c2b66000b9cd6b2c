"""Numba kernels of the phrase-based stack decoder (Koehn 2004, "Pharaoh"; Moses' ``SearchNormal``).

Hypotheses live in a growing arena of three arrays, one row per hypothesis:

``h_int``  int32[H, NI]      PSTART, PEND (source span of the last phrase, -1 for the empty
                             hypothesis), LOPT (last option, -1), FWD (class of the last option's
                             forward reordering scores, -1), NCOV (covered words), TPOS (target
                             words produced), LMS (LM state id), BEST (best incoming arc), ALIVE
``h_flt``  float64[H, 2]     SCORE (w . h of the best path), FUT (future cost estimate; for a
                             complete hypothesis the exact score of ``</s>`` and the end)
``h_cov``  uint64[H, W + 1]  the coverage bitset (W words of 64 bits), then the state hash

Arcs (every accepted expansion, including those into recombined hypotheses) are rows
of ``e_int`` int32[E, 3] (TAIL, HEAD, OPT) and ``e_lm`` float64[E] (log10 LM probability
of the option's words after the tail's state).

LM states (KenLM's: context words newest first, their back-offs, the length) are
interned per sentence (``s_*`` arrays, :func:`_intern`), so a hypothesis holds one id and
recombination compares ids. A direct-mapped cache maps (state id, word) to the log10
probability and the next state id (:func:`transition_cache`, kept by the caller and cleared
per sentence): hypotheses with the same LM state are expanded with the same words many
times, and a cache probe is much cheaper than the probes into the n-gram table.

Stack k holds hypotheses covering k source words: ``st_mem[k, :st_cnt[k]]`` with an
open-addressing table ``st_tab[k]`` on the recombination state, pruned lazily to the
stack size when it holds twice as many (Moses' ``HypothesisStackNormal``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from minismt._primitives import grow, grow_rows, mix_in
from minismt.lm._kernels import begin_state, score_word

# hypothesis integer columns
PSTART, PEND, LOPT, FWD, NCOV, TPOS, LMS, BEST, ALIVE = 0, 1, 2, 3, 4, 5, 6, 7, 8
NI = 9
# hypothesis float columns
SCORE, FUT = 0, 1
NF = 2
# arc columns
TAIL, HEAD, OPT = 0, 1, 2
# orientations (Moses LRModel: M = 0, S = 1, D = 2)
MONO, SWAP, DISC = 0, 1, 2
# feature roles: the column of each in the feature space is passed in ``cols``
R_LR, R_DIST, R_LM = 0, 6, 7
# search statistics
ST_EXPANSIONS, ST_DISCARDED, ST_EARLY, ST_RECOMBINED, ST_CREATED, ST_PRUNED, ST_LM_CALLS, ST_LM_MISSES = range(8)
N_STATS = 8
_BOUND_SLACK = 1e-7  # rounding margin of the LM upper bound test
TRANSITION_CACHE_SIZE = 1 << 15  # entries of the (state, word) cache (a power of two)
TRANSITION = np.dtype([("key", np.int64), ("logprob", np.float64), ("next", np.int64), ("pad", np.int64)])


class SearchOptions(NamedTuple):
    """The translation options of a sentence as :func:`search` reads them, sorted by span.

    ``start``/``end`` int32[O] source span (end exclusive); ``static`` float64[O] w . (TM,
    word, phrase and unknown-word penalties, sparse features); ``reordering`` float64[O, 6]
    the reordering log probabilities and ``fwd_class`` int32[O] the class of the forward
    three; ``tgt``/``lm_ids`` int32 target words as hypergraph and LM ids, both CSR by
    ``tgt_offsets`` int64[O+1]; ``lm_inner``/``lm_state_*`` from :func:`phrase_lm`;
    ``lm_bound`` float64[O] an upper bound of the option's log10 LM score in any context;
    ``span_lo``/``span_hi`` int64[n, L]: the options of span (i, length l) are
    ``span_lo[i, l-1]:span_hi[i, l-1]``.
    """

    start: np.ndarray
    end: np.ndarray
    static: np.ndarray
    reordering: np.ndarray
    fwd_class: np.ndarray
    tgt_offsets: np.ndarray
    tgt: np.ndarray
    lm_ids: np.ndarray
    lm_inner: np.ndarray
    lm_state_words: np.ndarray
    lm_state_backs: np.ndarray
    lm_state_len: np.ndarray
    lm_bound: np.ndarray
    span_lo: np.ndarray
    span_hi: np.ndarray


class Scoring(NamedTuple):
    """The weights of the stateful features :func:`search` scores, and the ``</s>`` bound.

    ``reordering`` float64[6], ``distortion``, ``lm`` (per log10 unit, i.e. times ln 10);
    ``eos_bound`` an upper bound of log10 p(``</s>``) in any context; ``end_orientation``:
    score the last phrase's forward orientation w.r.t. the sentence end.
    """

    reordering: np.ndarray
    distortion: float
    lm: float
    eos_bound: float
    end_orientation: bool


class Limits(NamedTuple):
    """The search limits (Moses ``-s``, ``-b``, ``distortion-limit``): ``stack_size`` (histogram
    pruning), ``log_beam`` (log of the beam threshold, -inf: none), ``distortion_limit`` (< 0: none)."""

    stack_size: int
    log_beam: float
    distortion_limit: int


class Reference(NamedTuple):
    """Forced decoding: when ``forced``, the target must be ``words`` (int32, ids as the options' ``tgt``)."""

    forced: bool
    words: np.ndarray


def transition_cache(size: int = TRANSITION_CACHE_SIZE) -> np.ndarray:
    """The (LM state id, word) -> (log10 prob, next state id) cache of :func:`search`
    (one 32-byte record per entry, so a probe touches one cache line)."""
    cache = np.zeros(size, TRANSITION)
    cache["key"] = -1
    return cache


LN10 = math.log(10.0)


@njit(cache=True)
def gather_ranges(flat, offsets, rows):
    """``flat[offsets[r]:offsets[r+1]]`` for r in ``rows``, concatenated (rows < 0 give nothing)."""
    total = 0
    for r in rows:
        if r >= 0:
            total += offsets[r + 1] - offsets[r]
    out = np.empty(total, flat.dtype)
    p = 0
    for r in rows:
        if r >= 0:
            for i in range(offsets[r], offsets[r + 1]):
                out[p] = flat[i]
                p += 1
    return out


@njit(cache=True, inline="always")
def _phrase_hash(h, word):
    """Hash chain of a source phrase, extended by one word (:func:`source_hashes`)."""
    return mix_in(h, word + 1)


@njit(cache=True)
def source_hashes(src_words, src_offsets):
    """The hash of every source phrase of a phrase table (for :func:`span_sources`)."""
    n = src_offsets.shape[0] - 1
    out = np.empty(n, np.uint64)
    for u in range(n):
        h = np.uint64(0)
        for i in range(src_offsets[u], src_offsets[u + 1]):
            h = _phrase_hash(h, src_words[i])
        out[u] = h
    return out


@njit(cache=True)
def span_sources(ids, max_len, sorted_hashes, order, src_words, src_offsets, out):
    """``out[s, l-1]`` = the table's source phrase equal to ``ids[s:s+l]``, or -1.

    ``sorted_hashes``/``order``: :func:`source_hashes` sorted, and the phrase of each.
    """
    n = ids.shape[0]
    out[:, :] = -1
    for s in range(n):
        h = np.uint64(0)
        for length in range(1, max_len + 1):
            if s + length > n or ids[s + length - 1] < 0:
                break
            h = _phrase_hash(h, ids[s + length - 1])
            pos = np.searchsorted(sorted_hashes, h)
            while pos < sorted_hashes.shape[0] and sorted_hashes[pos] == h:
                u = order[pos]
                if src_offsets[u + 1] - src_offsets[u] == length:
                    same = True
                    for i in range(length):
                        if src_words[src_offsets[u] + i] != ids[s + i]:
                            same = False
                            break
                    if same:
                        out[s, length - 1] = u
                        break
                pos += 1


@njit(cache=True)
def phrase_lm(t, ids, offsets, estimate, inner, st_words, st_backs, st_len):
    """Context-free LM scores of target phrases (log10), as Moses' ``CalcScore``.

    Each phrase is scored from the null context (KenLM ``NullContextState``):
    ``estimate[o]`` is the sum over all its words (the future-cost estimate),
    ``inner[o]`` the sum over words at positions >= C = order-1, whose full
    context lies inside the phrase and whose score is therefore final. For a
    phrase of at least C words the state after its last word does not depend on
    what precedes the phrase; it goes to ``st_*[o]``.
    """
    c = st_words.shape[1]
    aw = np.empty(c, np.int32)
    ab = np.empty(c, np.float64)
    bw = np.empty(c, np.int32)
    bb = np.empty(c, np.float64)
    for o in range(offsets.shape[0] - 1):
        aw[:] = -1
        ab[:] = 0.0
        length = 0
        total = 0.0
        rest = 0.0
        j = 0
        for p in range(offsets[o], offsets[o + 1]):
            if j % 2 == 0:
                lp, _, length = score_word(t, aw, ab, length, ids[p], bw, bb)
            else:
                lp, _, length = score_word(t, bw, bb, length, ids[p], aw, ab)
            total += lp
            if j >= c:
                rest += lp
            j += 1
        estimate[o] = total
        inner[o] = rest
        if j % 2 == 1:
            st_words[o] = bw
            st_backs[o] = bb
        else:
            st_words[o] = aw
            st_backs[o] = ab
        st_len[o] = length


@njit(cache=True)
def word_bounds(t, out):
    """``out[w]`` >= log10 p(w | any context): the best log probability of an n-gram ending
    in w, plus C times the largest positive back-off (none in a Kneser-Ney model)."""
    for w in range(out.shape[0]):
        out[w] = t.uni_values[w, 0]
    positive = 0.0
    for w in range(out.shape[0]):
        if t.uni_values[w, 1] > positive:
            positive = t.uni_values[w, 1]
    for s in range(t.slots.shape[0]):
        slot = t.slots[s]
        if slot.key != 0:
            if slot.logprob > out[slot.words[0]]:
                out[slot.words[0]] = slot.logprob
            if slot.backoff > positive:
                positive = slot.backoff
    for w in range(out.shape[0]):
        out[w] += (t.order - 1) * positive


@njit(cache=True)
def future_costs(n, span_lo, span_hi, o_future, fc):
    """Koehn's future-cost table: ``fc[i, j]`` = best estimated score of translating words i..j-1.

    The best option of each span, then by dynamic programming the best split
    ``fc[i, j] = max(best option of [i, j), max_k fc[i, k] + fc[k, j])``;
    ``fc[i, i] = 0``; ``-inf`` where no option sequence covers the span.
    """
    max_len = span_lo.shape[1]
    for i in range(n + 1):
        fc[i, i] = 0.0
    for length in range(1, n + 1):
        for i in range(n - length + 1):
            j = i + length
            best = -np.inf
            if length <= max_len:
                for o in range(span_lo[i, length - 1], span_hi[i, length - 1]):
                    if o_future[o] > best:
                        best = o_future[o]
            for k in range(i + 1, j):
                v = fc[i, k] + fc[k, j]
                if v > best:
                    best = v
            fc[i, j] = best


@njit(cache=True)
def _intern(words, backs, length, s_w, s_b, s_len, s_hash, s_tab, n_states):
    """Id of the LM state (``words``, ``backs``, ``length``) in the sentence's state store,
    adding it if new. States are equal when their words are (the back-offs follow from them).

    Returns the id and the (possibly grown) store arrays with its new size.
    """
    h = mix_in(np.uint64(length), 0)
    for i in range(length):
        h = mix_in(h, words[i] + 1)
    mask = s_tab.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    while s_tab[slot] >= 0:
        sid = s_tab[slot]
        if s_hash[sid] == h and s_len[sid] == length:
            same = True
            for i in range(length):
                if s_w[sid, i] != words[i]:
                    same = False
                    break
            if same:
                return sid, s_w, s_b, s_len, s_hash, s_tab, n_states
        slot = (slot + 1) & mask
    if n_states == s_len.shape[0]:
        s_w = grow_rows(s_w, n_states + 1)
        s_b = grow_rows(s_b, n_states + 1)
        s_len = grow(s_len, n_states + 1)
        s_hash = grow(s_hash, n_states + 1)
    sid = n_states
    for i in range(s_w.shape[1]):
        s_w[sid, i] = words[i]
        s_b[sid, i] = backs[i]
    s_len[sid] = length
    s_hash[sid] = h
    s_tab[slot] = sid
    n_states += 1
    if 2 * n_states > s_tab.shape[0]:
        s_tab = np.full(2 * s_tab.shape[0], -1, np.int32)
        mask = s_tab.shape[0] - 1
        for j in range(n_states):
            slot = np.int64(s_hash[j] & np.uint64(mask))
            while s_tab[slot] >= 0:
                slot = (slot + 1) & mask
            s_tab[slot] = j
    return sid, s_w, s_b, s_len, s_hash, s_tab, n_states


@njit(cache=True, inline="always")
def _transition_slot(state, word, cache):
    """Slot and key of (LM state id, word) in the direct-mapped transition cache."""
    key = (np.int64(state) << 32) | np.int64(word)
    return np.int64(mix_in(np.uint64(key), 0) & np.uint64(cache.shape[0] - 1)), key


@njit(cache=True, inline="always")
def _covered(cov, pos):
    return (cov[pos >> 6] >> np.uint64(pos & 63)) & np.uint64(1)


@njit(cache=True, inline="always")
def _orientation(pstart, pend, s, e):
    """Moses' ``LRModel::GetOrientation`` (msd): of the span [s, e] after the span [pstart, pend];
    after the empty hypothesis (pend < 0) monotone iff the phrase starts the sentence."""
    if pend < 0:
        return MONO if s == 0 else DISC
    if s == pend + 1:
        return MONO
    if pstart == e + 1:
        return SWAP
    return DISC


@njit(cache=True, inline="always")
def _same(h_int, h_cov, h, cov, w, full, pstart, pend, fwd, tpos, state):
    """Whether hypothesis ``h`` has this recombination state."""
    if h_int[h, LMS] != state or h_int[h, TPOS] != tpos:
        return False
    if full and (h_int[h, PEND] != pend or h_int[h, PSTART] != pstart or h_int[h, FWD] != fwd):
        return False
    for i in range(w):
        if h_cov[h, i] != cov[i]:
            return False
    return True


@njit(cache=True, inline="always")
def _state_hash(cov_hash, full, pstart, pend, fwd, tpos, state):
    h = mix_in(cov_hash, tpos)
    if full:
        h = mix_in(h, pstart + 1)
        h = mix_in(h, pend + 1)
        h = mix_in(h, fwd + 1)
    return mix_in(h, state)


@njit(cache=True)
def _rebuild_table(k, st_mem, st_cnt, st_tab, h_cov, w):
    st_tab[k, :] = -1
    mask = st_tab.shape[1] - 1
    for i in range(st_cnt[k]):
        h = st_mem[k, i]
        slot = np.int64(h_cov[h, w] & np.uint64(mask))
        while st_tab[k, slot] >= 0:
            slot = (slot + 1) & mask
        st_tab[k, slot] = h


@njit(cache=True)
def _prune(k, keep, log_beam, st_mem, st_cnt, st_tab, st_worst, h_int, h_flt, h_cov, w, stats):
    """Keep the ``keep`` best hypotheses of stack k whose score + future cost is within
    ``log_beam`` of the best (Moses' ``PruneToSize``), sorted best first."""
    m = st_cnt[k]
    if m == 0:
        return
    totals = np.empty(m)
    for i in range(m):
        h = st_mem[k, i]
        totals[i] = h_flt[h, SCORE] + h_flt[h, FUT]
    order = np.argsort(-totals, kind="mergesort")
    threshold = totals[order[0]] + log_beam
    kept_hyps = np.empty(m, np.int32)
    kept = 0
    last = totals[order[0]]
    for i in range(m):
        j = order[i]
        h = st_mem[k, j]
        if kept < keep and totals[j] >= threshold:
            kept_hyps[kept] = h
            kept += 1
            last = totals[j]
        else:
            h_int[h, ALIVE] = 0
            stats[ST_PRUNED] += 1
    st_mem[k, :kept] = kept_hyps[:kept]
    st_cnt[k] = kept
    if kept == keep and kept < m and last > st_worst[k]:
        st_worst[k] = last
    _rebuild_table(k, st_mem, st_cnt, st_tab, h_cov, w)


@njit(cache=True, nogil=True)
def search(t, n, fc, options, scoring, limits, reference, cache):
    """Beam search over stacks of hypotheses by number of covered source words.

    Parameters
    ----------
    t : LMTables
    n : source length
    fc : float64[n+1, n+1] future costs (:func:`future_costs`)
    options : SearchOptions
    scoring : Scoring
    limits : Limits
    reference : Reference
    cache : the transition cache (:func:`transition_cache`)

    Returns
    -------
    h_int, h_flt, h_cov, e_int, e_lm (trimmed), st_mem, st_cnt (every stack pruned and sorted
    best first), s_w, s_b, s_len (the LM states), stats int64[N_STATS]
    """
    o_start, o_static, o_reo, o_fwd = options.start, options.static, options.reordering, options.fwd_class
    o_lm_off, o_lm_ids, o_inner, o_lm_bound = options.tgt_offsets, options.lm_ids, options.lm_inner, options.lm_bound
    o_st_words, o_st_backs, o_st_len = options.lm_state_words, options.lm_state_backs, options.lm_state_len
    o_tgt_off, o_tgt, span_lo, span_hi = options.tgt_offsets, options.tgt, options.span_lo, options.span_hi
    w_reo, w_dist, w_lm = scoring.reordering, scoring.distortion, scoring.lm
    eos_bound, end_orientation = scoring.eos_bound, scoring.end_orientation
    stack_size, log_beam, dist_limit = limits.stack_size, limits.log_beam, limits.distortion_limit
    forced, ref = reference.forced, reference.words
    c = o_st_words.shape[1]
    w = max(1, (n + 63) // 64)
    ref_len = ref.shape[0]
    stats = np.zeros(N_STATS, np.int64)
    early = w_lm >= 0.0
    for i in range(cache.shape[0]):
        cache[i].key = -1

    cap = 16
    while cap < 2 * stack_size and cap < 1024:
        cap *= 2
    st_mem = np.empty((n + 1, cap), np.int32)
    st_cnt = np.zeros(n + 1, np.int64)
    st_tab = np.full((n + 1, 4 * cap), -1, np.int32)
    st_best = np.full(n + 1, -np.inf)
    st_worst = np.full(n + 1, -np.inf)

    h_int = np.empty((1024, NI), np.int32)
    h_flt = np.empty((1024, NF), np.float64)
    h_cov = np.zeros((1024, w + 1), np.uint64)
    e_int = np.empty((4096, 3), np.int32)
    e_lm = np.empty(4096, np.float64)
    n_arc = 0

    s_w = np.empty((1024, c), np.int32)
    s_b = np.empty((1024, c), np.float64)
    s_len = np.empty(1024, np.int32)
    s_hash = np.empty(1024, np.uint64)
    s_tab = np.full(4096, -1, np.int32)
    n_states = 0
    aw = np.empty(c, np.int32)
    ab = np.empty(c, np.float64)
    bw = np.empty(c, np.int32)
    bb = np.empty(c, np.float64)
    hc = np.empty(w, np.uint64)
    nc = np.empty(w, np.uint64)
    gap_lo = np.empty(max(n, 1), np.int64)
    gap_hi = np.empty(max(n, 1), np.int64)

    # the final LM state of every option of at least C words, and the state after <s>
    n_opt = o_start.shape[0]
    o_state = np.full(n_opt, -1, np.int64)
    for o in range(n_opt):
        if o_lm_off[o + 1] - o_lm_off[o] >= c:
            o_state[o], s_w, s_b, s_len, s_hash, s_tab, n_states = _intern(
                o_st_words[o], o_st_backs[o], o_st_len[o], s_w, s_b, s_len, s_hash, s_tab, n_states)
    length0 = begin_state(t, aw, ab)
    state0, s_w, s_b, s_len, s_hash, s_tab, n_states = _intern(aw, ab, length0, s_w, s_b, s_len, s_hash,
                                                               s_tab, n_states)

    # the empty hypothesis
    h_int[0, :] = -1
    h_int[0, NCOV] = 0
    h_int[0, TPOS] = 0
    h_int[0, LMS] = state0
    h_int[0, ALIVE] = 1
    h_flt[0, SCORE] = 0.0
    if n > 0:
        h_flt[0, FUT] = fc[0, n]
    else:
        lp, _, _ = score_word(t, aw, ab, length0, t.eos, bw, bb)
        h_flt[0, FUT] = w_lm * lp
        if forced and ref_len > 0:
            h_flt[0, FUT] = -np.inf
    h_cov[0, w] = _state_hash(mix_in(np.uint64(0), 0), False, -1, -1, -1, 0, state0)
    n_hyp = 1
    if h_flt[0, FUT] > -np.inf:
        st_mem[0, 0] = 0
        st_cnt[0] = 1
        _rebuild_table(0, st_mem, st_cnt, st_tab, h_cov, w)

    for k in range(n):
        if st_cnt[k] == 0:
            continue
        _prune(k, stack_size, log_beam, st_mem, st_cnt, st_tab, st_worst, h_int, h_flt, h_cov, w, stats)
        for member in range(st_cnt[k]):
            tail = st_mem[k, member]
            pstart = h_int[tail, PSTART]
            pend = h_int[tail, PEND]
            lopt = h_int[tail, LOPT]
            tpos = h_int[tail, TPOS]
            tail_state = h_int[tail, LMS]
            for i in range(w):
                hc[i] = h_cov[tail, i]
            score = h_flt[tail, SCORE]
            fut_old = h_flt[tail, FUT]
            # gaps of the coverage and the first one
            first_gap = n
            i = 0
            while i < n:
                if _covered(hc, i):
                    i += 1
                    continue
                j = i
                while j < n and not _covered(hc, j):
                    j += 1
                if first_gap == n:
                    first_gap = i
                for p in range(i, j):
                    gap_lo[p] = i
                    gap_hi[p] = j
                i = j
            for s in range(first_gap, n):
                if _covered(hc, s):
                    continue
                dist = abs(s - (pend + 1))
                if dist_limit >= 0 and dist > dist_limit:
                    if s > pend + 1:
                        break
                    continue
                for length in range(1, span_lo.shape[1] + 1):
                    e = s + length - 1
                    if e >= n or _covered(hc, e):
                        break
                    # Moses: a phrase not at the first gap must leave it reachable
                    if dist_limit >= 0 and s != first_gap and e + 1 - first_gap > dist_limit:
                        break
                    lo = span_lo[s, length - 1]
                    hi = span_hi[s, length - 1]
                    if lo == hi:
                        continue
                    ori = _orientation(pstart, pend, s, e)
                    a = gap_lo[s]
                    b = gap_hi[s]
                    fut_new = fut_old - fc[a, b] + fc[a, s] + fc[e + 1, b]
                    if fut_new == -np.inf or fut_new != fut_new:
                        continue
                    for i in range(w):
                        nc[i] = hc[i]
                    for p in range(s, e + 1):
                        nc[p >> 6] |= np.uint64(1) << np.uint64(p & 63)
                    cov_hash = np.uint64(0)
                    for i in range(w):
                        cov_hash = mix_in(cov_hash, nc[i])
                    k2 = k + length
                    complete = k2 == n
                    full = not complete or end_orientation
                    end_ori = MONO if e == n - 1 else DISC
                    base = score - w_dist * dist
                    if lopt >= 0:
                        base += w_reo[3 + ori] * o_reo[lopt, 3 + ori]
                    for o in range(lo, hi):
                        t_lo = o_tgt_off[o]
                        t_len = o_tgt_off[o + 1] - t_lo
                        tpos2 = tpos + t_len
                        if forced:
                            if tpos2 > ref_len or (complete != (tpos2 == ref_len)):
                                continue
                            ok = True
                            for q in range(t_len):
                                if o_tgt[t_lo + q] != ref[tpos + q]:
                                    ok = False
                                    break
                            if not ok:
                                continue
                        stats[ST_EXPANSIONS] += 1
                        partial = base + o_static[o] + w_reo[ori] * o_reo[o, ori]
                        if early:
                            # discard before the LM lookups when even the best LM score is too low
                            bound = partial + w_lm * o_lm_bound[o]
                            if complete:
                                bound += w_lm * eos_bound
                                if end_orientation:
                                    bound += w_reo[3 + end_ori] * o_reo[o, 3 + end_ori]
                            else:
                                bound += fut_new
                            if bound + _BOUND_SLACK < st_worst[k2]:
                                stats[ST_DISCARDED] += 1
                                stats[ST_EARLY] += 1
                                continue
                        # language model: the first C words see the tail's context
                        cur = tail_state
                        lm = 0.0
                        eos_lp = 0.0
                        m = t_len if t_len < c else c
                        for q in range(m + 1 if complete else m):
                            word = o_lm_ids[o_lm_off[o] + q] if q < m else t.eos
                            if q == m:
                                # </s> after a complete hypothesis' phrase (its state is final)
                                if t_len >= c:
                                    cur = o_state[o]
                            stats[ST_LM_CALLS] += 1
                            slot, key = _transition_slot(cur, word, cache)
                            entry = cache[slot]
                            if entry.key == key:
                                lp = entry.logprob
                                nxt = entry.next
                            else:
                                stats[ST_LM_MISSES] += 1
                                for i in range(c):
                                    aw[i] = s_w[cur, i]
                                    ab[i] = s_b[cur, i]
                                lp, _, nl = score_word(t, aw, ab, s_len[cur], word, bw, bb)
                                nxt, s_w, s_b, s_len, s_hash, s_tab, n_states = _intern(
                                    bw, bb, nl, s_w, s_b, s_len, s_hash, s_tab, n_states)
                                entry.key = key
                                entry.logprob = lp
                                entry.next = nxt
                            if q < m:
                                lm += lp
                                cur = nxt
                            else:
                                eos_lp = lp
                        state = cur
                        if t_len >= c:
                            lm += o_inner[o]
                            state = o_state[o]
                        new_score = partial + w_lm * lm
                        if complete:
                            fut = w_lm * eos_lp
                            if end_orientation:
                                fut += w_reo[3 + end_ori] * o_reo[o, 3 + end_ori]
                        else:
                            fut = fut_new
                        total = new_score + fut
                        if total < st_worst[k2]:
                            stats[ST_DISCARDED] += 1
                            continue
                        fwd = o_fwd[o]
                        hsh = _state_hash(cov_hash, full, s, e, fwd, tpos2, state)
                        mask = st_tab.shape[1] - 1
                        slot = np.int64(hsh & np.uint64(mask))
                        found = -1
                        while st_tab[k2, slot] >= 0:
                            cand = st_tab[k2, slot]
                            if h_cov[cand, w] == hsh and _same(h_int, h_cov, cand, nc, w, full, s, e, fwd, tpos2,
                                                               state):
                                found = cand
                                break
                            slot = (slot + 1) & mask
                        if n_arc == e_int.shape[0]:
                            e_int = grow_rows(e_int, n_arc + 1)
                            e_lm = grow(e_lm, n_arc + 1)
                        e_int[n_arc, TAIL] = tail
                        e_int[n_arc, OPT] = o
                        e_lm[n_arc] = lm
                        if found >= 0:
                            stats[ST_RECOMBINED] += 1
                            e_int[n_arc, HEAD] = found
                            if new_score > h_flt[found, SCORE]:
                                h_flt[found, SCORE] = new_score
                                h_int[found, BEST] = n_arc
                                if total > st_best[k2]:
                                    st_best[k2] = total
                                    if total + log_beam > st_worst[k2]:
                                        st_worst[k2] = total + log_beam
                            n_arc += 1
                            continue
                        # a new hypothesis
                        if n_hyp == h_int.shape[0]:
                            h_int = grow_rows(h_int, n_hyp + 1)
                            h_flt = grow_rows(h_flt, n_hyp + 1)
                            h_cov = grow_rows(h_cov, n_hyp + 1)
                        hid = n_hyp
                        n_hyp += 1
                        stats[ST_CREATED] += 1
                        h_int[hid, PSTART] = s
                        h_int[hid, PEND] = e
                        h_int[hid, LOPT] = o
                        h_int[hid, FWD] = fwd
                        h_int[hid, NCOV] = k2
                        h_int[hid, TPOS] = tpos2
                        h_int[hid, LMS] = state
                        h_int[hid, BEST] = n_arc
                        h_int[hid, ALIVE] = 1
                        h_flt[hid, SCORE] = new_score
                        h_flt[hid, FUT] = fut
                        for i in range(w):
                            h_cov[hid, i] = nc[i]
                        h_cov[hid, w] = hsh
                        e_int[n_arc, HEAD] = hid
                        n_arc += 1
                        if st_cnt[k2] == st_mem.shape[1]:
                            new_cap = 2 * st_mem.shape[1]
                            grown = np.empty((n + 1, new_cap), np.int32)
                            grown[:, :st_mem.shape[1]] = st_mem
                            st_mem = grown
                            st_tab = np.full((n + 1, 4 * new_cap), -1, np.int32)
                            for kk in range(n + 1):
                                _rebuild_table(kk, st_mem, st_cnt, st_tab, h_cov, w)
                            mask = st_tab.shape[1] - 1
                            slot = np.int64(hsh & np.uint64(mask))
                            while st_tab[k2, slot] >= 0:
                                slot = (slot + 1) & mask
                        st_mem[k2, st_cnt[k2]] = hid
                        st_cnt[k2] += 1
                        st_tab[k2, slot] = hid
                        if total > st_best[k2]:
                            st_best[k2] = total
                            if total + log_beam > st_worst[k2]:
                                st_worst[k2] = total + log_beam
                        if st_cnt[k2] > 2 * stack_size - 1:
                            _prune(k2, stack_size, log_beam, st_mem, st_cnt, st_tab, st_worst, h_int, h_flt,
                                   h_cov, w, stats)
    _prune(n, stack_size, log_beam, st_mem, st_cnt, st_tab, st_worst, h_int, h_flt, h_cov, w, stats)
    return (h_int[:n_hyp], h_flt[:n_hyp], h_cov[:n_hyp], e_int[:n_arc], e_lm[:n_arc], st_mem, st_cnt,
            s_w[:n_states], s_b[:n_states], s_len[:n_states], stats)


@njit(cache=True, nogil=True)
def emit(t, n, h_int, e_int, e_lm, st_mem, st_cnt, s_w, s_b, s_len, o_start, o_end, o_dense, o_reo,
         o_tgt_off, o_tgt, cols, end_orientation):
    """The search graph as hypergraph arrays (nodes in stack order, goal last).

    Node 0 is the empty hypothesis with one axiom edge (no tail, no features, empty
    template); then the surviving hypotheses that reach the goal, stack by stack in
    each stack's order; the goal's edges come from the complete hypotheses and
    carry the ``</s>`` LM score (and the end orientation's forward score when
    ``end_orientation``). Every arc between kept hypotheses is an edge
    ``[tail] target words`` with its feature delta (zeros left out).

    Returns
    -------
    n_nodes, in_offsets, tails, tail_offsets, feat_offsets, feat_ids, feat_values, tmpl_offsets,
    tmpl, node_hyp int32[n_nodes] (-1 for the goal), edge_arc int32[E] (-1 axiom, -2 goal),
    arc_edge int32[arcs] (-1 if dropped)
    """
    n_h = h_int.shape[0]
    n_a = e_int.shape[0]
    d = o_dense.shape[1]
    c = s_w.shape[1]
    useful = np.zeros(n_h, np.uint8)
    for i in range(st_cnt[n]):
        useful[st_mem[n, i]] = 1
    for a in range(n_a - 1, -1, -1):
        head = e_int[a, HEAD]
        if useful[head] and h_int[head, ALIVE]:
            useful[e_int[a, TAIL]] = 1
    arc_edge = np.full(n_a, -1, np.int32)
    if n_h == 0 or not useful[0]:
        z = np.zeros(1, np.int64)
        return (0, z, np.zeros(0, np.int32), z, z, np.zeros(0, np.int32), np.zeros(0), z, np.zeros(0, np.int32),
                np.zeros(0, np.int32), np.zeros(0, np.int32), arc_edge)
    node_of = np.full(n_h, -1, np.int64)
    node_of[0] = 0
    n_nodes = 1
    for k in range(1, n + 1):
        for i in range(st_cnt[k]):
            h = st_mem[k, i]
            if useful[h]:
                node_of[h] = n_nodes
                n_nodes += 1
    goal = n_nodes
    n_nodes += 1
    node_hyp = np.full(n_nodes, -1, np.int32)
    for h in range(n_h):
        if node_of[h] >= 0:
            node_hyp[node_of[h]] = h
    indeg = np.zeros(n_nodes, np.int64)
    indeg[0] = 1
    for a in range(n_a):
        head = e_int[a, HEAD]
        if node_of[head] > 0:
            indeg[node_of[head]] += 1
    n_complete = 0
    for i in range(st_cnt[n]):
        if node_of[st_mem[n, i]] >= 0:
            n_complete += 1
    indeg[goal] = n_complete
    in_offsets = np.zeros(n_nodes + 1, np.int64)
    for v in range(n_nodes):
        in_offsets[v + 1] = in_offsets[v] + indeg[v]
    n_edges = in_offsets[n_nodes]
    fill = in_offsets[:n_nodes].copy()
    edge_arc = np.empty(n_edges, np.int32)
    edge_arc[0] = -1
    fill[0] = 1
    for a in range(n_a):
        v = node_of[e_int[a, HEAD]]
        if v > 0:
            arc_edge[a] = fill[v]
            edge_arc[fill[v]] = a
            fill[v] += 1
    goal_tail = np.empty(n_complete, np.int32)
    g = 0
    for i in range(st_cnt[n]):
        h = st_mem[n, i]
        if node_of[h] >= 0:
            goal_tail[g] = h
            edge_arc[in_offsets[goal] + g] = -2
            g += 1
    # tails: every edge but the axiom has one
    tail_offsets = np.empty(n_edges + 1, np.int64)
    tail_offsets[0] = 0
    tails = np.empty(n_edges - 1, np.int32)
    for x in range(1, n_edges + 1):
        tail_offsets[x] = x - 1
    # templates and features
    tmpl_offsets = np.zeros(n_edges + 1, np.int64)
    for x in range(n_edges):
        a = edge_arc[x]
        size = 0
        if a >= 0:
            o = e_int[a, OPT]
            size = 1 + o_tgt_off[o + 1] - o_tgt_off[o]
        elif a == -2:
            size = 1
        tmpl_offsets[x + 1] = tmpl_offsets[x] + size
    tmpl = np.empty(tmpl_offsets[n_edges], np.int32)
    feat_offsets = np.zeros(n_edges + 1, np.int64)
    feat_ids = np.empty(n_edges * d, np.int32)
    feat_values = np.empty(n_edges * d, np.float64)
    row = np.zeros(d)
    hw = np.empty(c, np.int32)
    hb = np.empty(c, np.float64)
    ow = np.empty(c, np.int32)
    ob = np.empty(c, np.float64)
    g = 0
    nnz = 0
    for x in range(1, n_edges):
        a = edge_arc[x]
        p = tmpl_offsets[x]
        tmpl[p] = -1
        row[:] = 0.0
        if a >= 0:
            u = e_int[a, TAIL]
            o = e_int[a, OPT]
            tails[x - 1] = node_of[u]
            for q in range(o_tgt_off[o], o_tgt_off[o + 1]):
                p += 1
                tmpl[p] = o_tgt[q]
            for j in range(d):
                row[j] = o_dense[o, j]
            s = o_start[o]
            e = o_end[o] - 1
            pstart = h_int[u, PSTART]
            pend = h_int[u, PEND]
            lopt = h_int[u, LOPT]
            row[cols[R_DIST]] = -abs(s - (pend + 1))
            ori = _orientation(pstart, pend, s, e)
            row[cols[R_LR + ori]] += o_reo[o, ori]
            if lopt >= 0:
                row[cols[R_LR + 3 + ori]] += o_reo[lopt, 3 + ori]
            row[cols[R_LM]] = LN10 * e_lm[a]
        else:
            h = goal_tail[g]
            g += 1
            tails[x - 1] = node_of[h]
            state = h_int[h, LMS]
            for q in range(c):
                hw[q] = s_w[state, q]
                hb[q] = s_b[state, q]
            lp, _, _ = score_word(t, hw, hb, s_len[state], t.eos, ow, ob)
            row[cols[R_LM]] = LN10 * lp
            lopt = h_int[h, LOPT]
            if end_orientation and lopt >= 0:
                end_ori = MONO if h_int[h, PEND] == n - 1 else DISC
                row[cols[R_LR + 3 + end_ori]] += o_reo[lopt, 3 + end_ori]
        for j in range(d):
            if row[j] != 0.0:
                feat_ids[nnz] = j
                feat_values[nnz] = row[j]
                nnz += 1
        feat_offsets[x + 1] = nnz
    return (n_nodes, in_offsets, tails, tail_offsets, feat_offsets, feat_ids[:nnz].copy(),
            feat_values[:nnz].copy(), tmpl_offsets, tmpl, node_hyp, edge_arc, arc_edge)


@njit(cache=True)
def append_edge_features(feat_offsets, feat_ids, feat_values, add_offsets, add_ids, add_values):
    """The edges' feature CSR with a second CSR per edge (``add_*``, the sparse features of its
    phrase pair) appended after each edge's own features (the dense ids, all smaller)."""
    n_edges = feat_offsets.shape[0] - 1
    offsets = np.zeros(n_edges + 1, np.int64)
    for x in range(n_edges):
        offsets[x + 1] = (offsets[x] + feat_offsets[x + 1] - feat_offsets[x]
                          + add_offsets[x + 1] - add_offsets[x])
    ids = np.empty(offsets[n_edges], np.int32)
    values = np.empty(offsets[n_edges], np.float64)
    for x in range(n_edges):
        p = offsets[x]
        for q in range(feat_offsets[x], feat_offsets[x + 1]):
            ids[p] = feat_ids[q]
            values[p] = feat_values[q]
            p += 1
        for q in range(add_offsets[x], add_offsets[x + 1]):
            ids[p] = add_ids[q]
            values[p] = add_values[q]
            p += 1
    return offsets, ids, values
