"""The n-gram LM inside a chart decoder: an item's LM state and the LM score of a rule application.

An item (a chart entry: a span, a label, a target yield) carries, for an LM of order N:

* ``length``: the number of target words of its yield (an item that starts with ``<s>`` counts it);
* ``left``: KenLM's minimised left state: its first words (LM ids, at most N-1) whose scores can
  still change with words to their left.  It ends before a word whose matched n-gram is the suffix of
  no longer one (KenLM's ``independent_left``) and after a word where the LM state stopped growing
  (the item's first words have left the context); ``full`` says it has ended (always so for an item
  longer than its left words); empty when the item starts with ``<s>`` (``complete``);
* ``right``: KenLM's state after its last word (``words`` newest first, ``backoffs``, ``length``;
  minimised as KenLM's right state), the context of whatever follows it;
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

Two items with the same ``left`` words, ``full`` flag, ``right`` words and ``complete`` flag score every
continuation alike (recombination).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minismt.lm._kernels import begin_state, score_word


@njit(cache=True)
def _copy_state(words, backoffs, length, out_words, out_backoffs):
    out_words[:] = words
    out_backoffs[:] = backoffs
    return length


def scratch(order: int) -> tuple[np.ndarray, np.ndarray]:
    """The work space :func:`apply_rule` needs for an LM of ``order``."""
    n_ctx = max(order - 1, 1)
    return np.empty((3, n_ctx), dtype=np.int32), np.empty((2, n_ctx), dtype=np.float64)


@njit(cache=True, inline="always")
def _left_state(word, logprob, independent, grew, left_done, new_left, new_left_len):
    """The new item's left state after ``word`` (scored ``logprob``): until the state is done, the word
    joins it unless no words further left can change its score (KenLM's ``RuleScore::ProcessRet``); the
    state is done at such a word, or when the LM state did not grow by the word (the item's first words
    have left it).  Returns ``(done, left words, the word's score if it joined else 0)``."""
    if left_done or independent:
        return True, new_left_len, 0.0
    new_left[new_left_len] = word
    return not grew, new_left_len + 1, logprob


@njit(cache=True)
def apply_rule(t, target, children, item_left, item_left_len, item_left_est, item_full, item_right_words,
               item_right_backoffs, item_right_len, item_length, item_complete, out, scratch_ints,
               scratch_floats):
    """The LM score a rule application adds, writing the new item's state at index ``out``.

    ``target``: the rule's target side: LM word ids (``t.bos`` may only come first), ``-1 - k`` for
    the item of non-terminal ``k`` (``children[k]``, an index into the ``item_*`` arrays).
    ``item_left_est``: what an item's left words add to its value (scored from no context);
    ``item_full``: its left state has ended (see the module docstring).  Returns
    ``V(new) - sum_k V(children[k])`` (log10).  ``scratch_*``: work space (:func:`scratch`)."""
    state_w = scratch_ints[0]
    next_w = scratch_ints[1]
    new_left = scratch_ints[2]
    state_b = scratch_floats[0]
    next_b = scratch_floats[1]
    state_w[:] = -1
    state_b[:] = 0.0
    state_len = 0
    emitted = 0          # words of the new item so far
    complete = False
    left_done = False
    new_left[:] = -1
    new_left_len = 0
    new_left_est = 0.0
    delta = 0.0
    for q in range(target.shape[0]):
        sym = target[q]
        if sym >= 0:
            if sym == t.bos:
                if q != 0:
                    raise ValueError("<s> inside a rule's target side")
                state_len = begin_state(t, state_w, state_b)
                complete = True
                left_done = True
                emitted += 1
                continue
            logprob, _, next_len, independent = score_word(t, state_w, state_b, state_len, sym, next_w, next_b)
            left_done, new_left_len, est = _left_state(sym, logprob, independent, next_len == state_len + 1,
                                                       left_done, new_left, new_left_len)
            new_left_est += est
            state_len = next_len
            state_w, next_w = next_w, state_w
            state_b, next_b = next_b, state_b
            delta += logprob
            emitted += 1
            continue
        child = children[-1 - sym]
        if item_complete[child]:
            if q != 0:
                raise ValueError("an item that starts with <s> inside a rule's target side")
            complete = True
            left_done = True
            emitted = item_length[child]
            state_len = _copy_state(item_right_words[child], item_right_backoffs[child],
                                    item_right_len[child], state_w, state_b)
            continue
        if emitted == 0:
            # nothing precedes the child: its words keep their scores, its left state is ours
            for k in range(item_left_len[child]):
                new_left[k] = item_left[child, k]
            new_left_len = item_left_len[child]
            new_left_est = item_left_est[child]
            left_done = item_full[child]
            emitted = item_length[child]
            state_len = _copy_state(item_right_words[child], item_right_backoffs[child],
                                    item_right_len[child], state_w, state_b)
            continue
        # the child's left words: rescored in the new context, minus their score inside the child
        delta -= item_left_est[child]
        for k in range(item_left_len[child]):
            word = item_left[child, k]
            logprob, _, next_len, independent = score_word(t, state_w, state_b, state_len, word, next_w, next_b)
            left_done, new_left_len, est = _left_state(word, logprob, independent, next_len == state_len + 1,
                                                       left_done, new_left, new_left_len)
            new_left_est += est
            state_len = next_len
            state_w, next_w = next_w, state_w
            state_b, next_b = next_b, state_b
            delta += logprob
        emitted += item_length[child]
        if item_length[child] > item_left_len[child]:
            # words after its left words (so its left state is full): scored inside it with all the
            # context that can change their probabilities; the first of them is also charged the
            # back-offs of the contexts that reach past the child's left words into ours (KenLM's
            # RuleScore::NonTerminal with a full left state); what follows sees its right state
            for i in range(item_left_len[child], state_len):
                delta += state_b[i]
            left_done = True
            state_len = _copy_state(item_right_words[child], item_right_backoffs[child],
                                    item_right_len[child], state_w, state_b)
    item_left[out, :] = new_left
    item_left_len[out] = 0 if complete else new_left_len
    item_left_est[out] = 0.0 if complete else new_left_est
    item_full[out] = complete or left_done
    item_right_words[out, :] = state_w
    item_right_backoffs[out, :] = state_b
    item_right_len[out] = state_len
    item_length[out] = emitted
    item_complete[out] = complete
    return delta
