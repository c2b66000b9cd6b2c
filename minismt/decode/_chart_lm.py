"""The n-gram LM inside a chart decoder: an item's LM state and the LM score of a rule application.

An item (a chart entry: a span, a label, a target yield) carries, for an LM of order N, one int32 row
of ``N - 1 + 4`` columns (:data:`LENGTH`, :data:`LEFT_LEN`, :data:`FLAGS`, :data:`RIGHT`, then the
left words from :data:`LEFT`) and one float, ``est``:

* ``LENGTH``: the number of target words of its yield (an item that starts with ``<s>`` counts it);
* the left words: KenLM's minimised left state: its first words (LM ids, at most N-1) whose scores can
  still change with words to their left.  It ends before a word whose matched n-gram is the suffix of
  no longer one (KenLM's ``independent_left``) and after a word where the LM state stopped growing
  (the item's first words have left the context); the :data:`FULL` flag says it has ended (always so
  for an item longer than its left words); empty when the item starts with ``<s>`` (:data:`COMPLETE`);
* ``est``: what the left words add to its value (scored from no context);
* ``RIGHT``: the id of KenLM's state after its last word in the sentence's :class:`LMStates` (minimised
  as KenLM's right state), the context of whatever follows it;
* its LM value ``V`` (kept by the caller): the log10 probability of its yield scored as KenLM scores
  a sentence from no context, ``sum_p log10 p(w_p | w_{p-N+1} .. w_{p-1})`` with the context cut at
  the item's start (or from ``<s>`` when the item starts with it).

:func:`apply_rule` walks a rule's target side -- words and the items its non-terminals stand for --
and returns ``V(new item) - sum V(children)``: each new word scored in its context, and each
child's left word rescored with the context the new item gives it, minus the score it had inside
the child; after a full child, the back-offs of the contexts that reach past its left words into
the new item's (which its next word would be charged) and its right state.  This is KenLM's
``RuleScore`` (lm/left.hh) with our states.  So the values of a derivation's items telescope: the
goal item (``<s> ... </s>``) has ``V`` = the sentence's LM score (KenLM's ``score(sentence, bos=True,
eos=True)``), and an edge of the forest carries exactly the LM score its rule application adds.

Two items with equal rows from :data:`STATE` on (equal left words, flags and right state) score every
continuation alike (recombination).

The LM states of a sentence are interned (:class:`LMStates`): a state is an id, and a step from a
state by a word is looked up in a memo of transitions before the LM is asked; in cube pruning nearly
every step repeats (97% on Multi30k), so the walk costs a few array reads per word.  The arrays are
passed whole and rows are addressed by index, and :func:`apply_rule` is compiled without reference
counting (:func:`~minismt._primitives.njit_borrowing`): numba's atomic increments and decrements of
array views and arguments were half the decoder's time.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from minismt._primitives import GOLDEN, grow_rows, mix_in, njit_borrowing, power_of_two
from minismt.lm._kernels import begin_state, score_word


LENGTH, LEFT_LEN, FLAGS, RIGHT, LEFT = 0, 1, 2, 3, 4
"""The columns of an item's row: yield length, left-state length, flags, right state id, left words;
the columns from :data:`STATE` on are its LM state, on which items recombine."""
STATE = LEFT_LEN
COMPLETE, FULL = 1, 2
"""The flags: the item starts with ``<s>``; its left state has ended."""
EMPTY_STATE = 0
"""The id of the empty context in every :class:`LMStates`."""
TRANSITION_BITS = 14
"""The memo of transitions holds ``2**14`` steps (384 kB: it stays in the L2 cache)."""


@njit(cache=True)
def row_width(order):
    """The columns of an item's row for an LM of ``order``."""
    return max(order - 1, 1) + LEFT


@njit_borrowing
def row_hash(rows, i, first):
    """The hash of ``rows[i, first:]`` (items' LM states, states' words: -1 padded, so equal
    states have equal rows)."""
    h = GOLDEN
    for k in range(first, rows.shape[1]):
        h = mix_in(h, rows[i, k] + 2)
    return h


@njit(cache=True, inline="always")
def same_row(rows, a, b, first):
    """``rows[a, first:]`` equals ``rows[b, first:]``."""
    for k in range(first, rows.shape[1]):
        if rows[a, k] != rows[b, k]:
            return False
    return True


class LMStates(NamedTuple):
    """A sentence's LM states (KenLM right states) by id, and the memo of steps between them.

    ``words``: int32[S, N]: the state's length, then its words (newest first, -1 padded);
    ``backoffs``: float64[S, N-1]; ``index``: an open-addressing set of the ids (-1 empty);
    ``step_key``: int64[M] (``state << 32 | word``, -1 empty), ``step_value``: int64[M] (``next << 2 |
    independent << 1 | grew``), ``step_logprob``: float64[M]: a direct-mapped memo of
    :func:`~minismt.lm._kernels.score_word`; ``count``: int64[2], the number of states and the id of
    ``<s>``'s state."""

    words: np.ndarray
    backoffs: np.ndarray
    index: np.ndarray
    step_key: np.ndarray
    step_value: np.ndarray
    step_logprob: np.ndarray
    count: np.ndarray


@njit(cache=True)
def _find(words, index, s):
    """``(slot, True)`` of the state equal to row ``s`` in ``index``, or ``(free slot, False)``."""
    mask = index.shape[0] - 1
    slot = np.int64(row_hash(words, s, 0) & np.uint64(mask))
    while index[slot] >= 0:
        if same_row(words, index[slot], s, 0):
            return slot, True
        slot = (slot + 1) & mask
    return slot, False


@njit(cache=True)
def _intern(states):
    """The id of the state written in the first free row (which becomes a state if it is new)."""
    n = states.count[0]
    slot, found = _find(states.words, states.index, n)
    if found:
        return states.index[slot]
    states.index[slot] = n
    states.count[0] = n + 1
    return n


@njit(cache=True)
def new_states(t, capacity=1024):
    """The states of a new sentence: the empty context (:data:`EMPTY_STATE`) and ``<s>``'s
    (``capacity``: a power of two)."""
    n_ctx = max(t.order - 1, 1)
    states = LMStates(np.full((capacity, n_ctx + 1), -1, dtype=np.int32), np.zeros((capacity, n_ctx)),
                      np.full(4 * capacity, -1, dtype=np.int64),
                      np.full(1 << TRANSITION_BITS, -1, dtype=np.int64), np.zeros(1 << TRANSITION_BITS, dtype=np.int64),
                      np.zeros(1 << TRANSITION_BITS), np.zeros(2, dtype=np.int64))
    states.words[0, 0] = 0
    _intern(states)
    states.words[1, 0] = begin_state(t, states.words[1, 1:], states.backoffs[1])
    states.count[1] = _intern(states)
    return states


@njit(cache=True)
def room(states, extra):
    """``states`` with room for ``extra`` more states (itself, or grown copies of its tables; the
    caller may skip the call while ``count[0] + extra < words.shape[0]``)."""
    need = states.count[0] + extra + 1
    if need <= states.words.shape[0]:
        return states
    rows = power_of_two(need)       # and so the index's size
    words = grow_rows(states.words, rows)
    words[states.count[0]:] = -1
    index = np.full(4 * rows, -1, dtype=np.int64)
    for s in range(states.count[0]):
        slot, _ = _find(words, index, s)
        index[slot] = s
    return LMStates(words, grow_rows(states.backoffs, rows), index, states.step_key, states.step_value,
                    states.step_logprob, states.count)


@njit(cache=True, inline="always")
def step(t, states, state, word):
    """log10 p(word | state), the next state, whether no words further left can change the score
    (KenLM's ``independent_left``) and whether the state grew by the word: from the memo, or
    :func:`~minismt.lm._kernels.score_word` (the new state interned)."""
    key = (np.int64(state) << 32) | np.int64(word)
    # Fibonacci hashing: the top bits of one product (a mix of the key would cost two more products
    # and shifts on the chain of dependent steps)
    slot = np.int64((np.uint64(key) * GOLDEN) >> np.uint64(64 - TRANSITION_BITS))
    if states.step_key[slot] == key:
        value = states.step_value[slot]
        return states.step_logprob[slot], value >> 2, (value & 2) != 0, (value & 1) != 0
    return _score_step(t, states, state, word, key, slot)


@njit(cache=True)
def _score_step(t, states, state, word, key, slot):
    free = states.count[0]
    logprob, _, length, independent = score_word(t, states.words[state, 1:], states.backoffs[state],
                                                 states.words[state, 0], word, states.words[free, 1:],
                                                 states.backoffs[free])
    states.words[free, 0] = length
    grew = length == states.words[state, 0] + 1
    following = _intern(states)
    states.step_key[slot] = key
    states.step_value[slot] = (following << 2) | (2 if independent else 0) | (1 if grew else 0)
    states.step_logprob[slot] = logprob
    return logprob, following, independent, grew


@njit(cache=True, inline="always")
def _left_state(word, logprob, independent, grew, left_done, row, out, new_left_len):
    """The new item's left state after ``word`` (scored ``logprob``): until the state is done, the word
    joins it unless no words further left can change its score (KenLM's ``RuleScore::ProcessRet``); the
    state is done at such a word, or when the LM state did not grow by the word (the item's first words
    have left it).  Returns ``(done, left words, the word's score if it joined else 0)``."""
    if left_done or independent:
        return True, new_left_len, 0.0
    row[out, LEFT + new_left_len] = word
    return not grew, new_left_len + 1, logprob


@njit_borrowing
def apply_rule(t, states, rule_tgt, lo, hi, child0, child1, item, item_est, out, out_est, o):
    """The LM score a rule application adds, writing the new item's row into ``out[o]`` and
    ``out_est[o]``.

    ``rule_tgt[lo:hi]``: the rule's target side: LM word ids (``t.bos`` may only come first), ``-1``
    for the item ``child0`` and ``-2`` for ``child1`` (rows of ``item``, ``item_est``).  Returns
    ``V(new) - sum V(children)`` (log10); ``states`` (:class:`LMStates`) must have room for
    ``hi - lo`` + 2 (N - 1) new states (:func:`room`)."""
    n_ctx = out.shape[1] - LEFT
    for k in range(n_ctx):
        out[o, LEFT + k] = -1
    state = EMPTY_STATE
    emitted = 0          # words of the new item so far
    complete = False
    left_done = False
    new_left_len = 0
    new_left_est = 0.0
    delta = 0.0
    for q in range(lo, hi):
        sym = rule_tgt[q]
        if sym >= 0:
            if sym == t.bos:
                if q != lo:
                    raise ValueError("<s> inside a rule's target side")
                state = states.count[1]
                complete = True
                left_done = True
                emitted += 1
                continue
            logprob, state_next, independent, grew = step(t, states, state, sym)
            left_done, new_left_len, est = _left_state(sym, logprob, independent, grew, left_done, out, o,
                                                       new_left_len)
            new_left_est += est
            state = state_next
            delta += logprob
            emitted += 1
            continue
        child = child0 if sym == -1 else child1
        if item[child, FLAGS] & COMPLETE:
            if q != lo:
                raise ValueError("an item that starts with <s> inside a rule's target side")
            complete = True
            left_done = True
            emitted = item[child, LENGTH]
            state = item[child, RIGHT]
            continue
        if emitted == 0:
            # nothing precedes the child: its words keep their scores, its left state is ours
            new_left_len = item[child, LEFT_LEN]
            for k in range(new_left_len):
                out[o, LEFT + k] = item[child, LEFT + k]
            new_left_est = item_est[child]
            left_done = (item[child, FLAGS] & FULL) != 0
            emitted = item[child, LENGTH]
            state = item[child, RIGHT]
            continue
        # the child's left words: rescored in the new context, minus their score inside the child
        delta -= item_est[child]
        n_left = item[child, LEFT_LEN]
        for k in range(n_left):
            word = item[child, LEFT + k]
            logprob, state_next, independent, grew = step(t, states, state, word)
            left_done, new_left_len, est = _left_state(word, logprob, independent, grew, left_done, out, o,
                                                       new_left_len)
            new_left_est += est
            state = state_next
            delta += logprob
        emitted += item[child, LENGTH]
        if item[child, LENGTH] > n_left:
            # words after its left words (so its left state is full): scored inside it with all the
            # context that can change their probabilities; the first of them is also charged the
            # back-offs of the contexts that reach past the child's left words into ours (KenLM's
            # RuleScore::NonTerminal with a full left state); what follows sees its right state
            for i in range(n_left, states.words[state, 0]):
                delta += states.backoffs[state, i]
            left_done = True
            state = item[child, RIGHT]
    if complete:
        for k in range(new_left_len):
            out[o, LEFT + k] = -1
        new_left_len = 0
        new_left_est = 0.0
    out[o, LEFT_LEN] = new_left_len
    out[o, FLAGS] = (COMPLETE if complete else 0) | (FULL if complete or left_done else 0)
    out[o, RIGHT] = state
    out[o, LENGTH] = emitted
    out_est[o] = new_left_est
    return delta
