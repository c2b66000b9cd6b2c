"""Numba kernels of the phrase-based stack decoder (Koehn 2004, "Pharaoh"; Moses' ``SearchNormal``).

:func:`search` takes its inputs as NamedTuples of arrays (numba passes them whole, as
:class:`~minismt.lm._kernels.LMTables`): :class:`SearchOptions` (the sentence's translation
options), :class:`Scoring` (the stateful features' weights), :class:`Limits` (stack size,
beam, distortion limit) and :class:`Reference` (forced decoding). Its state is four more:

:class:`Hypotheses`, a growing arena, one row per hypothesis:

``ints``   int32[H, NI]      PSTART, PEND (source span of the last phrase, -1 for the empty
                             hypothesis), LOPT (last option, -1), FWD (class of the last option's
                             forward reordering scores, -1), NCOV (covered words), TPOS (target
                             words produced: the first path's, or in forced decoding, where it is
                             part of the state, every path's), LMS (LM state id), BEST (best incoming arc), ALIVE
``floats`` float64[H, 2]     SCORE (w . h of the best path), FUT (future cost estimate; for a
                             complete hypothesis the exact score of ``</s>`` and the end)
``cov``    uint64[H, W + 1]  the coverage bitset (W words of 64 bits), then the state hash

:class:`Arcs`: every accepted expansion, including those into recombined hypotheses, as rows
of ``ints`` int32[E, 3] (TAIL, HEAD, OPT) and ``lm`` float64[E] (log10 LM probability of the
option's words after the tail's state).

:class:`LMStates`: LM states (KenLM's: context words newest first, their back-offs, the
length) interned per sentence (:func:`_intern`), so a hypothesis holds one id and
recombination compares ids. A direct-mapped cache maps (state id, word) to the log10
probability and the next state id (:func:`transition_cache`, kept by the caller and cleared
per sentence): hypotheses with the same LM state are expanded with the same words many
times, and a cache probe is much cheaper than the probes into the n-gram table.

:class:`Stacks`: stack k holds hypotheses covering k source words, ``mem[k, :count[k]]``,
with an open-addressing table ``table[k]`` on the recombination state, pruned lazily to
the stack size when it holds twice as many (Moses' ``HypothesisStackNormal``).

The loops run in :func:`_expand`, which allocates nothing and is compiled without numba's
reference counting (:func:`~minismt._primitives.njit_borrowing`), as are the LM lookups it makes
on a transition-cache miss: the atomic increments and decrements of the arrays it reads, at
every hypothesis expanded and every LM lookup, were a fifth of a sentence's search time. Before
expanding a hypothesis it checks that the stores have room for all its expansions may add; when
one has not, it returns where it stopped and :func:`search` grows the store (a NamedTuple's
fields cannot be assigned, so a grown store is rebound) and calls it again from there. Pruning
a stack sorts it in scratch arrays (:class:`PruneWork`) for the same reason.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from minismt._primitives import grow, grow_rows, mix_in, njit_borrowing, power_of_two
from minismt.extract._kernels import phrase_hash
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
    score the last phrase's forward orientation w.r.t. the sentence end; ``word_bounds``
    float64[LM vocabulary] an upper bound of each word's log10 probability in any context
    (:func:`word_bounds`).
    """

    reordering: np.ndarray
    distortion: float
    lm: float
    eos_bound: float
    end_orientation: bool
    word_bounds: np.ndarray


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


class Hypotheses(NamedTuple):
    """The hypothesis arena, one row per hypothesis: ``ints`` int32[H, NI], ``floats``
    float64[H, NF], ``cov`` uint64[H, W+1] (columns: the module docstring)."""

    ints: np.ndarray
    floats: np.ndarray
    cov: np.ndarray


class Arcs(NamedTuple):
    """Every accepted expansion: ``ints`` int32[E, 3] (TAIL, HEAD, OPT), ``lm`` float64[E] the
    log10 LM probability of the option's words after the tail's state."""

    ints: np.ndarray
    lm: np.ndarray


class Stacks(NamedTuple):
    """Stack k holds ``mem[k, :count[k]]``, found by recombination state in the open-addressing
    table ``table[k]``; ``best[k]`` is the best score + future cost it has met, ``worst[k]`` the
    threshold an expansion into it must reach (beam, or the last kept by histogram pruning)."""

    mem: np.ndarray
    count: np.ndarray
    table: np.ndarray
    best: np.ndarray
    worst: np.ndarray


class LMStates(NamedTuple):
    """The sentence's interned LM states (:func:`_intern`): row i is ``words``, ``backs``,
    ``length``, ``hashes``, found through the open-addressing table ``table``; ``next_words`` /
    ``next_backs`` receive a state being made (by KenLM's scoring) before it is interned."""

    words: np.ndarray
    backs: np.ndarray
    length: np.ndarray
    hashes: np.ndarray
    table: np.ndarray
    next_words: np.ndarray
    next_backs: np.ndarray


def transition_cache(size: int = TRANSITION_CACHE_SIZE) -> np.ndarray:
    """The (LM state id, word) -> (log10 prob, next state id) cache of :func:`search`
    (one 32-byte record per entry, so a probe touches one cache line)."""
    cache = np.zeros(size, TRANSITION)
    cache["key"] = -1
    return cache


LN10 = math.log(10.0)


@njit(cache=True)
def span_sources(ids, max_len, sorted_hashes, order, src_words, src_offsets, out):
    """``out[s, l-1]`` = the table's source phrase equal to ``ids[s:s+l]``, or -1.

    ``sorted_hashes``/``order``: :func:`minismt.extract._kernels.source_hashes` sorted, and the phrase of each.
    """
    n = ids.shape[0]
    out[:, :] = -1
    for s in range(n):
        h = np.uint64(0)
        for length in range(1, max_len + 1):
            if s + length > n or ids[s + length - 1] < 0:
                break
            h = phrase_hash(h, ids[s + length - 1])
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
                lp, _, length, _ = score_word(t, aw, ab, length, ids[p], bw, bb)
            else:
                lp, _, length, _ = score_word(t, bw, bb, length, ids[p], aw, ab)
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
    positive = 0.0
    for w in range(out.shape[0]):
        if t.uni_values[w, 1] > positive:
            positive = t.uni_values[w, 1]
    for s in range(t.slots.shape[0]):
        if t.slots[s].key != 0 and t.slots[s].backoff > positive:
            positive = t.slots[s].backoff
    for w in range(out.shape[0]):
        out[w] = t.ending_best[w] + (t.order - 1) * positive


@njit(cache=True)
def forward_classes(reordering, out):
    """``out[o]`` = the class of option o's forward reordering scores ``reordering[o, 3:]``: options with
    equal triples share one (numbered in order of first appearance), so the recombination state holds
    a class instead of three floats."""
    n = reordering.shape[0]
    table = np.full(power_of_two(2 * max(n, 1)), -1, np.int64)
    mask = table.shape[0] - 1
    n_classes = 0
    for o in range(n):
        h = np.uint64(0)
        for j in range(3, 6):
            h = mix_in(h, np.float64(reordering[o, j] + 0.0).view(np.uint64))  # -0.0 and 0.0 alike
        slot = np.int64(h & np.uint64(mask))
        while True:
            first = table[slot]
            if first < 0:
                table[slot] = o
                out[o] = n_classes
                n_classes += 1
                break
            if (reordering[first, 3] == reordering[o, 3] and reordering[first, 4] == reordering[o, 4]
                    and reordering[first, 5] == reordering[o, 5]):
                out[o] = out[first]
                break
            slot = (slot + 1) & mask


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


@njit(cache=True, inline="always")
def _free_slot(table, h):
    """The first empty slot from ``h``'s in an open-addressing table (linear probing)."""
    mask = table.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    while table[slot] >= 0:
        slot = (slot + 1) & mask
    return slot


@njit_borrowing
def _intern(states, n_states, words, backs, length):
    """Id of the LM state (``words``, ``backs``, ``length``) among the ``n_states`` of ``states``,
    adding it if new (the store has room: :func:`_lm_room`). States are equal when their words
    are (the back-offs follow from them). Returns the id and the store's new size.
    """
    h = mix_in(np.uint64(length), 0)
    for i in range(length):
        h = mix_in(h, words[i] + 1)
    mask = states.table.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    while states.table[slot] >= 0:
        sid = states.table[slot]
        if states.hashes[sid] == h and states.length[sid] == length:
            same = True
            for i in range(length):
                if states.words[sid, i] != words[i]:
                    same = False
                    break
            if same:
                return sid, n_states
        slot = (slot + 1) & mask
    sid = n_states
    for i in range(states.words.shape[1]):
        states.words[sid, i] = words[i]
        states.backs[sid, i] = backs[i]
    states.length[sid] = length
    states.hashes[sid] = h
    states.table[slot] = sid
    return sid, n_states + 1


@njit(cache=True, inline="always")
def _lacks_room(states, need):
    """Whether the LM state store must grow to hold ``need`` states (its table at most half full)."""
    return (need > states.length.shape[0]) | (2 * need > states.table.shape[0])


@njit(cache=True)
def _lm_room(states, need):
    """The LM state store with room for ``need`` states (grown if not), its table at most half full."""
    if need > states.length.shape[0]:
        states = LMStates(grow_rows(states.words, need), grow_rows(states.backs, need), grow(states.length, need),
                          grow(states.hashes, need), states.table, states.next_words, states.next_backs)
    if 2 * need > states.table.shape[0]:
        table = np.full(power_of_two(2 * need), -1, np.int32)
        for j in range(states.table.shape[0]):
            sid = states.table[j]
            if sid >= 0:
                table[_free_slot(table, states.hashes[sid])] = sid
        states = LMStates(states.words, states.backs, states.length, states.hashes, table, states.next_words,
                          states.next_backs)
    return states


@njit(cache=True)
def _new_lm_states(c):
    """An empty LM state store for a model of context length ``c`` = order - 1."""
    return LMStates(np.empty((1024, c), np.int32), np.empty((1024, c), np.float64), np.empty(1024, np.int32),
                    np.empty(1024, np.uint64), np.full(4096, -1, np.int32), np.empty(c, np.int32),
                    np.empty(c, np.float64))


@njit(cache=True)
def _option_states(options, states):
    """The interned LM state after every option of at least C words (-1 for shorter ones):
    it does not depend on what precedes the option."""
    c = states.words.shape[1]
    n_states = 0
    o_state = np.full(options.start.shape[0], -1, np.int64)
    states = _lm_room(states, o_state.shape[0])
    for o in range(o_state.shape[0]):
        if options.tgt_offsets[o + 1] - options.tgt_offsets[o] >= c:
            o_state[o], n_states = _intern(states, n_states, options.lm_state_words[o], options.lm_state_backs[o],
                                           options.lm_state_len[o])
    return o_state, states, n_states


@njit(cache=True, inline="always")
def _transition_slot(state, word, cache):
    """Slot and key of (LM state id, word) in the direct-mapped transition cache."""
    key = (np.int64(state) << 32) | np.int64(word)
    return np.int64(mix_in(np.uint64(key), 0) & np.uint64(cache.shape[0] - 1)), key


@njit(cache=True, inline="always")
def _cached(cache, state, word):
    """Probe of the transition cache for (LM state id, word): whether it holds the pair, then its
    log10 probability and next state (meaningless on a miss: :func:`_lm_transition`)."""
    slot, key = _transition_slot(state, word, cache)
    entry = cache[slot]
    return entry.key == key, entry.logprob, entry.next


@njit_borrowing
def _lm_transition(t, cache, states, n_states, state, word):
    """log10 p(``word`` | LM state ``state``) by KenLM's scoring, its next state interned and the
    pair put in the transition cache (a cache miss). Returns the log probability, the next state
    and the store's new size."""
    lp, _, length, _ = score_word(t, states.words[state], states.backs[state], states.length[state], word,
                               states.next_words, states.next_backs)
    nxt, n_states = _intern(states, n_states, states.next_words, states.next_backs, length)
    slot, key = _transition_slot(state, word, cache)
    entry = cache[slot]
    entry.key = key
    entry.logprob = lp
    entry.next = nxt
    return lp, nxt, n_states


@njit(cache=True, inline="always")
def _covered(cov, pos):
    """Whether source word ``pos`` is covered in the bitset ``cov``."""
    return (cov[pos >> 6] >> np.uint64(pos & 63)) & np.uint64(1)


@njit(cache=True, inline="always")
def _coverage_gaps(cov, n, gap_lo, gap_hi):
    """The gaps (maximal uncovered runs) of a coverage: ``[gap_lo[p], gap_hi[p])`` is the gap of
    each uncovered word p. Returns the first gap's start (n if every word is covered)."""
    first_gap = n
    i = 0
    while i < n:
        if _covered(cov, i):
            i += 1
            continue
        j = i
        while j < n and not _covered(cov, j):
            j += 1
        if first_gap == n:
            first_gap = i
        for p in range(i, j):
            gap_lo[p] = i
            gap_hi[p] = j
        i = j
    return first_gap


@njit(cache=True, inline="always")
def _too_far(s, pend, limit):
    """Moses' distortion limit: a phrase starts at most ``limit`` words from the end of the previous one."""
    return limit >= 0 and abs(s - (pend + 1)) > limit


@njit(cache=True, inline="always")
def _strands_first_gap(s, e, first_gap, limit):
    """Moses' ``SearchNormal``: a phrase not at the first gap must end within ``limit`` words of
    it, or the gap could no longer be reached."""
    return limit >= 0 and s != first_gap and e + 1 - first_gap > limit


@njit(cache=True, inline="always")
def _cover(cov, out, s, e):
    """``out`` = the coverage ``cov`` with words s..e covered; returns its hash."""
    for i in range(cov.shape[0]):
        out[i] = cov[i]
    for p in range(s, e + 1):
        out[p >> 6] |= np.uint64(1) << np.uint64(p & 63)
    h = np.uint64(0)
    for i in range(out.shape[0]):
        h = mix_in(h, out[i])
    return h


@njit(cache=True, inline="always")
def _future_after(fut, fc, a, b, s, e):
    """The future cost once [s, e] of the gap [a, b) is covered: the gap's estimate gives way to
    those of what is left of it (Koehn 2004)."""
    return fut - fc[a, b] + fc[a, s] + fc[e + 1, b]


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
def _span_score(score, lopt, ori, dist, scoring, reordering):
    """A hypothesis' score plus what each option of a span adds after it: the distortion penalty
    and the previous option's forward reordering score of the orientation (none after the
    empty hypothesis, ``lopt`` < 0)."""
    w_dist = scoring.distortion
    forward = scoring.reordering[3 + ori] * reordering[lopt, 3 + ori]
    base = score - w_dist * dist
    if lopt >= 0:
        base += forward
    return base


@njit(cache=True, inline="always")
def _fits_reference(tgt, lo, t_len, tpos, complete, ref):
    """Forced decoding: the option's words ``tgt[lo:lo+t_len]`` continue the reference at ``tpos``
    and end it exactly when the hypothesis is complete."""
    if tpos + t_len > ref.shape[0] or complete != (tpos + t_len == ref.shape[0]):
        return False
    for q in range(t_len):
        if tgt[lo + q] != ref[tpos + q]:
            return False
    return True


@njit(cache=True, inline="always")
def _end_score(scoring, options, o, end_ori):
    """The last option's forward reordering score of its orientation w.r.t. the sentence end."""
    return scoring.reordering[3 + end_ori] * options.reordering[o, 3 + end_ori]


@njit(cache=True, inline="always")
def _bound(partial, scoring, options, o, complete, end_ori, fut):
    """An upper bound of the score + future cost of an expansion: its LM score bounded by the best
    probability of each word in any context, so that one below the stack's threshold is
    discarded before any LM lookup (and, with each looked-up word's probability in place of
    its bound, before the lookups of the words after it)."""
    w_lm = scoring.lm
    lm_bound = options.lm_bound[o]
    eos_bound = scoring.eos_bound
    end = _end_score(scoring, options, o, end_ori)
    bound = partial + w_lm * lm_bound
    if complete:
        bound += w_lm * eos_bound
        if scoring.end_orientation:
            bound += end
    else:
        bound += fut
    return bound


@njit(cache=True, inline="always")
def _estimate(scoring, options, o, complete, end_ori, fut, eos_lp):
    """A new hypothesis' FUT: its future cost ``fut``, or for a complete one the exact score
    of its goal edge (``</s>`` and, if scored, the end orientation)."""
    w_lm = scoring.lm
    end = _end_score(scoring, options, o, end_ori)
    if not complete:
        return fut
    goal = w_lm * eos_lp
    if scoring.end_orientation:
        goal += end
    return goal


@njit(cache=True, inline="always")
def _state_hash(cov_hash, full, pstart, pend, fwd, tpos, state):
    """Hash of a recombination state (see :func:`_same_state`)."""
    h = mix_in(cov_hash, tpos)
    if full:
        h = mix_in(h, pstart + 1)
        h = mix_in(h, pend + 1)
        h = mix_in(h, fwd + 1)
    return mix_in(h, state)


@njit(cache=True, inline="always")
def _same_state(h_ints, h_cov, h, cov, full, pstart, pend, fwd, tpos, state, forced):
    """Whether hypothesis ``h`` has this recombination state: coverage, LM state, in forced decoding the
    target position (which reference word comes next), and, unless ``full`` is off (a complete
    hypothesis), the last span and its forward class: Moses' state (its stateful features' states:
    the LM's, the lexicalised reordering's and the distortion's); the number of target words is not
    part of it, as the word penalty is stateless."""
    if h_ints[h, LMS] != state or (forced and h_ints[h, TPOS] != tpos):
        return False
    if full and (h_ints[h, PEND] != pend or h_ints[h, PSTART] != pstart or h_ints[h, FWD] != fwd):
        return False
    for i in range(cov.shape[0]):
        if h_cov[h, i] != cov[i]:
            return False
    return True


@njit(cache=True, inline="always")
def _find(table, h_ints, h_cov, k, hsh, cov, full, pstart, pend, fwd, tpos, state, forced):
    """The hypothesis of stack k with this recombination state (hash ``hsh``), or -1, and the
    slot of stack k's ``table`` where it is or a new one goes."""
    w = cov.shape[0]
    mask = table.shape[1] - 1
    slot = np.int64(hsh & np.uint64(mask))
    while table[k, slot] >= 0:
        cand = table[k, slot]
        if h_cov[cand, w] == hsh and _same_state(h_ints, h_cov, cand, cov, full, pstart, pend, fwd, tpos, state,
                                                 forced):
            return cand, slot
        slot = (slot + 1) & mask
    return -1, slot


@njit(cache=True, inline="always")
def _add_arc(arcs, a, tail, head, o, lm):
    """Arc ``a``: tail, head, option, LM score."""
    arcs.ints[a, TAIL] = tail
    arcs.ints[a, HEAD] = head
    arcs.ints[a, OPT] = o
    arcs.lm[a] = lm


@njit(cache=True, inline="always")
def _beam(best, worst, total, log_beam):
    """A stack's best score + future cost and threshold once it has met ``total``: a new best
    raises the beam threshold (Moses' ``HypothesisStackNormal``)."""
    if total > best:
        best = total
        if total + log_beam > worst:
            worst = total + log_beam
    return best, worst


@njit(cache=True, inline="always")
def _set_best_arc(hyps, h, arc, score):
    """Recombination (Koehn 2004): a better arc into hypothesis h becomes its best, with its score."""
    hyps.floats[h, SCORE] = score
    hyps.ints[h, BEST] = arc


@njit(cache=True, inline="always")
def _add_hypothesis(hyps, h, s, e, o, fwd, k, tpos, state, arc, score, fut, cov, hsh):
    """Row h of the arena: the hypothesis that option o on [s, e] makes by arc ``arc``."""
    hyps.ints[h, PSTART] = s
    hyps.ints[h, PEND] = e
    hyps.ints[h, LOPT] = o
    hyps.ints[h, FWD] = fwd
    hyps.ints[h, NCOV] = k
    hyps.ints[h, TPOS] = tpos
    hyps.ints[h, LMS] = state
    hyps.ints[h, BEST] = arc
    hyps.ints[h, ALIVE] = 1
    hyps.floats[h, SCORE] = score
    hyps.floats[h, FUT] = fut
    for i in range(cov.shape[0]):
        hyps.cov[h, i] = cov[i]
    hyps.cov[h, cov.shape[0]] = hsh


@njit(cache=True)
def _grow_hypotheses(hyps, need):
    """The arena grown to room for ``need`` hypotheses."""
    return Hypotheses(grow_rows(hyps.ints, need), grow_rows(hyps.floats, need), grow_rows(hyps.cov, need))


@njit(cache=True)
def _grow_arcs(arcs, need):
    """The arcs grown to room for ``need``."""
    return Arcs(grow_rows(arcs.ints, need), grow(arcs.lm, need))


@njit(cache=True)
def _new_stacks(n, stack_size):
    """Empty stacks 0..n with room for 2 x ``stack_size`` hypotheses (up to 1024; they grow)."""
    cap = min(power_of_two(2 * stack_size), 1024)
    return Stacks(np.empty((n + 1, cap), np.int32), np.zeros(n + 1, np.int64), np.full((n + 1, 4 * cap), -1, np.int32),
                  np.full(n + 1, -np.inf), np.full(n + 1, -np.inf))


@njit_borrowing
def _rebuild_table(stacks, k, h_cov):
    """Stack k's recombination table anew from its hypotheses' state hashes."""
    for j in range(stacks.table.shape[1]):
        stacks.table[k, j] = -1
    w = h_cov.shape[1] - 1
    for i in range(stacks.count[k]):
        h = stacks.mem[k, i]
        stacks.table[k, _free_slot(stacks.table[k], h_cov[h, w])] = h


@njit(cache=True)
def _stack_room(stacks, k, room, h_cov):
    """The stacks with room for ``room`` more hypotheses in each stack after k: as they are, or
    with their capacity doubled until then and their tables rebuilt."""
    rows, cap = stacks.mem.shape
    need = _stack_need(stacks, k, room)
    if need <= cap:
        return stacks
    new_cap = power_of_two(need)
    mem = np.empty((rows, new_cap), np.int32)
    mem[:, :cap] = stacks.mem
    grown = Stacks(mem, stacks.count, np.full((rows, 4 * new_cap), -1, np.int32), stacks.best, stacks.worst)
    for kk in range(rows):
        _rebuild_table(grown, kk, h_cov)
    return grown


@njit(cache=True, inline="always")
def _push(stacks, k, h, slot):
    """Hypothesis h into stack k, at the recombination table's ``slot`` (from :func:`_find`)."""
    stacks.mem[k, stacks.count[k]] = h
    stacks.count[k] += 1
    stacks.table[k, slot] = h


class PruneWork(NamedTuple):
    """Scratch of :func:`_prune`, one slot per hypothesis a stack can hold: ``totals`` float64,
    ``order`` and ``buffer`` int64 (the merge sort's), ``kept`` int32."""

    totals: np.ndarray
    order: np.ndarray
    buffer: np.ndarray
    kept: np.ndarray


@njit(cache=True)
def _prune_work(capacity):
    """Scratch for :func:`_prune` on stacks of ``capacity`` hypotheses."""
    return PruneWork(np.empty(capacity), np.empty(capacity, np.int64), np.empty(capacity, np.int64),
                     np.empty(capacity, np.int32))


@njit(cache=True, inline="always")
def _sort_best_first(totals, m, order, buffer):
    """``order[:m]`` = 0..m-1 by ``totals`` descending, ties in index order (a bottom-up merge sort
    through ``buffer``: NumPy's stable ``argsort(-totals)`` without allocating)."""
    for i in range(m):
        order[i] = i
    width = 1
    while width < m:
        for lo in range(0, m, 2 * width):
            mid = min(lo + width, m)
            hi = min(lo + 2 * width, m)
            i, j = lo, mid
            for p in range(lo, hi):
                if j >= hi or (i < mid and not totals[order[j]] > totals[order[i]]):
                    buffer[p] = order[i]
                    i += 1
                else:
                    buffer[p] = order[j]
                    j += 1
        for i in range(m):
            order[i] = buffer[i]
        width *= 2


@njit_borrowing
def _prune(stacks, k, limits, hyps, stats, work):
    """Keep the ``stack_size`` best hypotheses of stack k whose score + future cost is within
    ``log_beam`` of the best (Moses' ``HypothesisStackNormal::PruneToSize``), sorted best first
    (``work``: :class:`PruneWork` for the stacks' capacity). Pruning a pruned stack changes nothing."""
    m = stacks.count[k]
    if m == 0:
        return
    keep = limits.stack_size
    totals = work.totals
    for i in range(m):
        h = stacks.mem[k, i]
        totals[i] = hyps.floats[h, SCORE] + hyps.floats[h, FUT]
    order = work.order
    _sort_best_first(totals, m, order, work.buffer)
    threshold = totals[order[0]] + limits.log_beam
    kept_hyps = work.kept
    kept = 0
    last = totals[order[0]]
    for i in range(m):
        j = order[i]
        h = stacks.mem[k, j]
        if kept < keep and totals[j] >= threshold:
            kept_hyps[kept] = h
            kept += 1
            last = totals[j]
        else:
            hyps.ints[h, ALIVE] = 0
            stats[ST_PRUNED] += 1
    for i in range(kept):
        stacks.mem[k, i] = kept_hyps[i]
    stacks.count[k] = kept
    if kept == keep and kept < m and last > stacks.worst[k]:
        stacks.worst[k] = last
    _rebuild_table(stacks, k, hyps.cov)


@njit(cache=True)
def _seed(t, n, fc, scoring, reference, hyps, stacks, states, state0):
    """The empty hypothesis (row 0, LM state ``state0`` after ``<s>``), put in stack 0 unless
    nothing can follow it."""
    w = hyps.cov.shape[1] - 1
    hyps.ints[0, :] = -1
    hyps.ints[0, NCOV] = 0
    hyps.ints[0, TPOS] = 0
    hyps.ints[0, LMS] = state0
    hyps.ints[0, ALIVE] = 1
    hyps.floats[0, SCORE] = 0.0
    if n > 0:
        hyps.floats[0, FUT] = fc[0, n]
    else:
        lp, _, _, _ = score_word(t, states.words[state0], states.backs[state0], states.length[state0], t.eos,
                              states.next_words, states.next_backs)
        hyps.floats[0, FUT] = scoring.lm * lp
        if reference.forced and reference.words.shape[0] > 0:
            hyps.floats[0, FUT] = -np.inf
    hyps.cov[0, w] = _state_hash(mix_in(np.uint64(0), 0), False, -1, -1, -1, 0, state0)
    if hyps.floats[0, FUT] > -np.inf:
        stacks.mem[0, 0] = 0
        stacks.count[0] = 1
        _rebuild_table(stacks, 0, hyps.cov)


# where :func:`_expand` resumes and the stores' sizes: stack, member, hypotheses, arcs, LM states
P_STACK, P_MEMBER, P_HYPS, P_ARCS, P_STATES = range(5)
N_PROGRESS = 5


class Scratch(NamedTuple):
    """Per-sentence scratch of :func:`_expand`: a tail's coverage ``hc`` and an expansion's ``nc``
    (uint64[W]), the gap of each uncovered word ``gap_lo``/``gap_hi`` (int64[n])."""

    hc: np.ndarray
    nc: np.ndarray
    gap_lo: np.ndarray
    gap_hi: np.ndarray


@njit(cache=True, inline="always")
def _stack_need(stacks, k, room):
    """The capacity every stack after k needs to take ``room`` more hypotheses."""
    need = 0
    for kk in range(k + 1, stacks.count.shape[0]):
        need = max(need, stacks.count[kk] + room)
    return need


@njit(cache=True, inline="always")
def _lacks_room_for_tail(hyps, arcs, states, stacks, limits, k, n_hyp, n_arc, n_states, n_opt, c):
    """Whether a store lacks room for what a hypothesis of stack k may add when expanded."""
    return (n_hyp + n_opt > hyps.ints.shape[0] or n_arc + n_opt > arcs.ints.shape[0]
            or _lacks_room(states, n_states + (c + 1) * n_opt)
            or (stacks.mem.shape[1] < 2 * limits.stack_size and _stack_need(stacks, k, n_opt) > stacks.mem.shape[1]))


@njit_borrowing
def _expand(t, n, fc, options, scoring, limits, reference, cache, o_state, hyps, arcs, stacks, states, stats, work,
            scratch, progress):
    """The stacks' expansions (the loops of :func:`search`), from stack ``progress[P_STACK]``'s member
    ``progress[P_MEMBER]`` on. Allocates nothing, so it runs without reference counting: before each
    hypothesis is expanded it checks that the stores have room for all its expansions may add (an arc and
    a hypothesis per option, C + 1 LM states per option, a stack's room); when not, it saves where it is
    and the stores' sizes in ``progress`` and returns False for :func:`search` to grow them. True when
    every stack before the last is expanded."""
    w = hyps.cov.shape[1] - 1
    early = scoring.lm >= 0.0
    log_beam = limits.log_beam
    forced, ref = reference.forced, reference.words
    c = options.lm_state_words.shape[1]
    n_opt = options.start.shape[0]
    n_hyp, n_arc, n_states = progress[P_HYPS], progress[P_ARCS], progress[P_STATES]
    hc, nc, gap_lo, gap_hi = scratch.hc, scratch.nc, scratch.gap_lo, scratch.gap_hi
    for k in range(progress[P_STACK], n):
        if stacks.count[k] == 0:
            continue
        first = progress[P_MEMBER] if k == progress[P_STACK] else 0
        if first == 0:
            _prune(stacks, k, limits, hyps, stats, work)
        for member in range(first, stacks.count[k]):
            tail = stacks.mem[k, member]
            pstart = hyps.ints[tail, PSTART]
            pend = hyps.ints[tail, PEND]
            lopt = hyps.ints[tail, LOPT]
            tpos = hyps.ints[tail, TPOS]
            tail_state = hyps.ints[tail, LMS]
            for i in range(w):
                hc[i] = hyps.cov[tail, i]
            score = hyps.floats[tail, SCORE]
            fut_old = hyps.floats[tail, FUT]
            if _lacks_room_for_tail(hyps, arcs, states, stacks, limits, k, n_hyp, n_arc, n_states, n_opt, c):
                progress[P_STACK], progress[P_MEMBER] = k, member
                progress[P_HYPS], progress[P_ARCS], progress[P_STATES] = n_hyp, n_arc, n_states
                return False
            first_gap = _coverage_gaps(hc, n, gap_lo, gap_hi)
            for s in range(first_gap, n):
                if _covered(hc, s):
                    continue
                if _too_far(s, pend, limits.distortion_limit):
                    if s > pend + 1:
                        break
                    continue
                for length in range(1, options.span_lo.shape[1] + 1):
                    e = s + length - 1
                    if e >= n or _covered(hc, e) or _strands_first_gap(s, e, first_gap, limits.distortion_limit):
                        break
                    lo = options.span_lo[s, length - 1]
                    hi = options.span_hi[s, length - 1]
                    if lo == hi:
                        continue
                    ori = _orientation(pstart, pend, s, e)
                    fut_new = _future_after(fut_old, fc, gap_lo[s], gap_hi[s], s, e)
                    if fut_new == -np.inf or fut_new != fut_new:
                        continue
                    cov_hash = _cover(hc, nc, s, e)
                    k2 = k + length
                    complete = k2 == n
                    full = not complete or scoring.end_orientation
                    end_ori = MONO if e == n - 1 else DISC
                    base = _span_score(score, lopt, ori, abs(s - (pend + 1)), scoring, options.reordering)
                    for o in range(lo, hi):
                        t_lo = options.tgt_offsets[o]
                        t_len = options.tgt_offsets[o + 1] - t_lo
                        if forced and not _fits_reference(options.tgt, t_lo, t_len, tpos, complete, ref):
                            continue
                        stats[ST_EXPANSIONS] += 1
                        partial = base + options.static[o] + scoring.reordering[ori] * options.reordering[o, ori]
                        bound = _bound(partial, scoring, options, o, complete, end_ori, fut_new)
                        if early and bound + _BOUND_SLACK < stacks.worst[k2]:
                            stats[ST_DISCARDED] += 1
                            stats[ST_EARLY] += 1
                            continue
                        # the LM extension: the first C words see the tail's context, the rest and the
                        # state after them are the option's own; then </s> after a complete hypothesis
                        state = tail_state
                        lm = 0.0
                        eos_lp = 0.0
                        m = t_len if t_len < c else c
                        beaten = False
                        for q in range(m + 1 if complete else m):
                            word = options.lm_ids[t_lo + q] if q < m else t.eos
                            if q == m and t_len >= c:
                                state = o_state[o]
                            stats[ST_LM_CALLS] += 1
                            hit, lp, nxt = _cached(cache, state, word)
                            if not hit:
                                stats[ST_LM_MISSES] += 1
                                lp, nxt, n_states = _lm_transition(t, cache, states, n_states, state, word)
                            if q < m:
                                lm += lp
                                state = nxt
                                # the bound with this word's probability in place of its bound: the
                                # words after it need no lookup once it falls below the stack's threshold
                                bound += scoring.lm * (lp - scoring.word_bounds[word])
                                if early and (q + 1 < m or complete) and bound + _BOUND_SLACK < stacks.worst[k2]:
                                    beaten = True
                                    break
                            else:
                                eos_lp = lp
                        if beaten:
                            stats[ST_DISCARDED] += 1
                            continue
                        if t_len >= c:
                            lm += options.lm_inner[o]
                            state = o_state[o]
                        new_score = partial + scoring.lm * lm
                        fut = _estimate(scoring, options, o, complete, end_ori, fut_new, eos_lp)
                        total = new_score + fut
                        if total < stacks.worst[k2]:
                            stats[ST_DISCARDED] += 1
                            continue
                        # recombination with the hypothesis of the same state in stack k2, or a new one
                        fwd = options.fwd_class[o]
                        tpos2 = tpos + t_len
                        hsh = _state_hash(cov_hash, full, s, e, fwd, tpos2 if forced else 0, state)
                        found, slot = _find(stacks.table, hyps.ints, hyps.cov, k2, hsh, nc, full, s, e, fwd, tpos2,
                                            state, forced)
                        _add_arc(arcs, n_arc, tail, found if found >= 0 else n_hyp, o, lm)
                        if found >= 0:
                            stats[ST_RECOMBINED] += 1
                            if new_score > hyps.floats[found, SCORE]:
                                _set_best_arc(hyps, found, n_arc, new_score)
                                stacks.best[k2], stacks.worst[k2] = _beam(stacks.best[k2], stacks.worst[k2], total,
                                                                          log_beam)
                        else:
                            stats[ST_CREATED] += 1
                            _add_hypothesis(hyps, n_hyp, s, e, o, fwd, k2, tpos2, state, n_arc, new_score, fut, nc,
                                            hsh)
                            _push(stacks, k2, n_hyp, slot)
                            stacks.best[k2], stacks.worst[k2] = _beam(stacks.best[k2], stacks.worst[k2], total,
                                                                      log_beam)
                            n_hyp += 1
                            if stacks.count[k2] > 2 * limits.stack_size - 1:
                                _prune(stacks, k2, limits, hyps, stats, work)
                        n_arc += 1
    progress[P_STACK], progress[P_MEMBER] = n, 0
    progress[P_HYPS], progress[P_ARCS], progress[P_STATES] = n_hyp, n_arc, n_states
    return True


@njit(cache=True, nogil=True)
def search(t, n, fc, options, scoring, limits, reference, cache):
    """Beam search over stacks of hypotheses by number of covered source words.

    For each stack, for each of its hypotheses (after pruning), for each uncovered span the
    distortion limit allows and each option of the span: the forced-decoding filter, the
    score without the LM and its upper bound, the LM extension, then recombination with the
    hypothesis of the same state in the stack it goes to, or a new hypothesis.

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
    w = max(1, (n + 63) // 64)
    stats = np.zeros(N_STATS, np.int64)
    for i in range(cache.shape[0]):
        cache[i].key = -1
    stacks = _new_stacks(n, limits.stack_size)
    hyps = Hypotheses(np.empty((1024, NI), np.int32), np.empty((1024, NF), np.float64),
                      np.zeros((1024, w + 1), np.uint64))
    arcs = Arcs(np.empty((4096, 3), np.int32), np.empty(4096, np.float64))
    c = options.lm_state_words.shape[1]
    n_opt = options.start.shape[0]
    o_state, states, n_states = _option_states(options, _new_lm_states(c))
    states = _lm_room(states, n_states + 1)
    length0 = begin_state(t, states.next_words, states.next_backs)
    state0, n_states = _intern(states, n_states, states.next_words, states.next_backs, length0)
    _seed(t, n, fc, scoring, reference, hyps, stacks, states, state0)

    progress = np.zeros(N_PROGRESS, np.int64)
    progress[P_HYPS], progress[P_STATES] = 1, n_states
    scratch = Scratch(np.empty(w, np.uint64), np.empty(w, np.uint64), np.empty(max(n, 1), np.int64),
                      np.empty(max(n, 1), np.int64))
    work = _prune_work(stacks.mem.shape[1])
    while not _expand(t, n, fc, options, scoring, limits, reference, cache, o_state, hyps, arcs, stacks, states, stats,
                      work, scratch, progress):
        # room for what the next hypothesis' expansions may add
        n_hyp, n_arc, n_states = progress[P_HYPS], progress[P_ARCS], progress[P_STATES]
        if n_hyp + n_opt > hyps.ints.shape[0]:
            hyps = _grow_hypotheses(hyps, n_hyp + n_opt)
        if n_arc + n_opt > arcs.ints.shape[0]:
            arcs = _grow_arcs(arcs, n_arc + n_opt)
        if _lacks_room(states, n_states + (c + 1) * n_opt):
            states = _lm_room(states, n_states + (c + 1) * n_opt)
        if stacks.mem.shape[1] < 2 * limits.stack_size:  # a stack may outgrow its room (sizes > 512)
            stacks = _stack_room(stacks, progress[P_STACK], n_opt, hyps.cov)
            if work.totals.shape[0] < stacks.mem.shape[1]:
                work = _prune_work(stacks.mem.shape[1])
    n_hyp, n_arc, n_states = progress[P_HYPS], progress[P_ARCS], progress[P_STATES]
    _prune(stacks, n, limits, hyps, stats, work)
    return (hyps.ints[:n_hyp], hyps.floats[:n_hyp], hyps.cov[:n_hyp], arcs.ints[:n_arc], arcs.lm[:n_arc],
            stacks.mem, stacks.count, states.words[:n_states], states.backs[:n_states], states.length[:n_states],
            stats)


@njit(cache=True, inline="always")
def _arc_features(row, a, e_int, e_lm, h_int, o_start, o_end, o_dense, o_reo, cols):
    """``row`` = the dense features arc a adds: its option's own, the distortion, the reordering
    scores of its orientation (its own backward and the tail's last option's forward ones), its LM score."""
    u = e_int[a, TAIL]
    o = e_int[a, OPT]
    for j in range(o_dense.shape[1]):
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


@njit(cache=True, inline="always")
def _goal_features(row, t, n, h, h_int, s_w, s_b, s_len, o_reo, cols, end_orientation, hw, hb, ow, ob):
    """``row`` = the dense features of the goal edge after complete hypothesis h: the LM score of
    ``</s>`` and, when scored, its last option's forward reordering score w.r.t. the sentence end
    (``hw``, ``hb``, ``ow``, ``ob``: scratch LM states)."""
    row[:] = 0.0
    state = h_int[h, LMS]
    for q in range(hw.shape[0]):
        hw[q] = s_w[state, q]
        hb[q] = s_b[state, q]
    lp, _, _, _ = score_word(t, hw, hb, s_len[state], t.eos, ow, ob)
    row[cols[R_LM]] = LN10 * lp
    lopt = h_int[h, LOPT]
    if end_orientation and lopt >= 0:
        end_ori = MONO if h_int[h, PEND] == n - 1 else DISC
        row[cols[R_LR + 3 + end_ori]] += o_reo[lopt, 3 + end_ori]


@njit(cache=True, nogil=True)
def best_path(t, n, h_int, h_flt, e_int, e_lm, st_mem, st_cnt, s_w, s_b, s_len, o_start, o_end, o_dense, o_reo,
              cols, end_orientation):
    """The 1-best without the search graph (what :func:`emit` and the graph's Viterbi path give): the
    best complete hypothesis (stack n is sorted best first), the arcs of its best path from the empty
    hypothesis, its score (with the goal edge's) and its dense features summed edge by edge in path
    order, the goal edge last. No arcs and a score of -inf when no hypothesis is complete."""
    d = o_dense.shape[1]
    features = np.zeros(d)
    if st_cnt[n] == 0:
        return np.zeros(0, np.int64), -np.inf, features
    best = st_mem[n, 0]
    m = 0
    h = best
    while h != 0:
        m += 1
        h = e_int[h_int[h, BEST], TAIL]
    arcs = np.empty(m, np.int64)
    h = best
    for i in range(m - 1, -1, -1):
        arcs[i] = h_int[h, BEST]
        h = e_int[arcs[i], TAIL]
    row = np.zeros(d)
    for i in range(m):
        _arc_features(row, arcs[i], e_int, e_lm, h_int, o_start, o_end, o_dense, o_reo, cols)
        for j in range(d):
            if row[j] != 0.0:
                features[j] += row[j]
    c = s_w.shape[1]
    _goal_features(row, t, n, best, h_int, s_w, s_b, s_len, o_reo, cols, end_orientation, np.empty(c, np.int32),
                   np.empty(c), np.empty(c, np.int32), np.empty(c))
    for j in range(d):
        if row[j] != 0.0:
            features[j] += row[j]
    return arcs, h_flt[best, SCORE] + h_flt[best, FUT], features


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
            _arc_features(row, a, e_int, e_lm, h_int, o_start, o_end, o_dense, o_reo, cols)
        else:
            h = goal_tail[g]
            g += 1
            tails[x - 1] = node_of[h]
            _goal_features(row, t, n, h, h_int, s_w, s_b, s_len, o_reo, cols, end_orientation, hw, hb, ow, ob)
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
