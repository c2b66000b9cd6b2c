"""The LM inside the chart decoder (minismt.decode._chart_lm): on random word sequences cut into
random trees of rule applications, every item's value is the LM score of its yield from no context
(KenLM's ``score(yield, bos=False, eos=False)``), the goal's is the sentence score with ``<s>`` and
``</s>``, and each application adds exactly the difference; items with equal states continue alike."""

from __future__ import annotations

import numpy as np
import pytest

from minismt.decode import _chart_lm
from minismt.lm import LanguageModel, estimate_kn
from minismt.lm._kernels import score_word

WORDS = "a b c d e f g h".split()


@pytest.fixture(scope="module", params=[2, 3, 4])
def lm(request):
    rng = np.random.default_rng(request.param)
    lines = [" ".join(rng.choice(WORDS[:6], size=int(rng.integers(1, 12)))) for _ in range(300)]
    return LanguageModel.from_model(estimate_kn(lines, order=request.param, discount_fallback=True))


class Chart:
    """Item rows as the decoder keeps them, with the columns as arrays."""

    def __init__(self, lm: LanguageModel, capacity: int = 4096):
        t = lm.tables
        self.lm = lm
        self.rows = np.full((capacity, _chart_lm.row_width(t.order)), -1, dtype=np.int32)
        self.est = np.zeros(capacity)
        self.states = _chart_lm.new_states(t)
        self.value = np.zeros(capacity)
        self.n = 0

    def apply(self, target: list, children: list[int]) -> int:
        """target: words (str) and ("NT", k) for children[k]; returns the new item."""
        t = self.lm.tables
        codes = np.array([-1 - s[1] if isinstance(s, tuple) else
                          (t.bos if s == "<s>" else t.eos if s == "</s>" else int(self.lm.encode([s])[0]))
                          for s in target], dtype=np.int64)
        out = self.n
        self.states = _chart_lm.room(self.states, len(codes) + 2 * t.order)
        kids = list(children) + [-1] * (2 - len(children))
        delta = _chart_lm.apply_rule(t, self.states, codes, 0, len(codes), kids[0], kids[1], self.rows, self.est,
                                     self.rows, self.est, out)
        self.value[out] = delta + sum(self.value[c] for c in children)
        self.n += 1
        return out

    @property
    def length(self):
        return self.rows[:, _chart_lm.LENGTH]

    @property
    def left_len(self):
        return self.rows[:, _chart_lm.LEFT_LEN]

    @property
    def left(self):
        return self.rows[:, _chart_lm.LEFT:]

    @property
    def full(self):
        return (self.rows[:, _chart_lm.FLAGS] & _chart_lm.FULL) != 0

    @property
    def complete(self):
        return (self.rows[:, _chart_lm.FLAGS] & _chart_lm.COMPLETE) != 0

    def right_words(self, item: int) -> list[int]:
        """The words of the item's right state (newest first)."""
        state = self.rows[item, _chart_lm.RIGHT]
        return self.states.words[state, 1:1 + self.states.words[state, 0]].tolist()


def _random_tree(rng, words: list[str]):
    """A random derivation of ``words``: (target pieces, children trees), the pieces being words
    and ("NT", k); children cover contiguous parts, placed in the target in random order."""
    if len(words) <= 1 or rng.random() < 0.2:
        return list(words), []
    cuts = sorted(rng.choice(np.arange(1, len(words)), size=min(len(words) - 1, int(rng.integers(1, 4))),
                             replace=False).tolist())
    parts = [words[a:b] for a, b in zip([0] + cuts, cuts + [len(words)])]
    chosen = sorted(rng.choice(len(parts), size=min(2, len(parts)), replace=False).tolist())
    order = list(rng.permutation(len(chosen)))   # children in a random target order
    target = []
    k_of = {part: order[i] for i, part in enumerate(chosen)}
    for i, part in enumerate(parts):
        if i in k_of:
            target.append(("NT", k_of[i]))
        else:
            target.extend(part)
    kids = [None] * len(chosen)
    for i in chosen:
        kids[k_of[i]] = _random_tree(rng, parts[i])
    return target, kids


def _build(chart: Chart, tree) -> tuple[int, list[str]]:
    target, kids = tree
    built = [_build(chart, kid) for kid in kids]
    item = chart.apply(target, [b[0] for b in built])
    words = []
    for s in target:
        words.extend(built[s[1]][1] if isinstance(s, tuple) else [s])
    return item, words


@pytest.mark.parametrize("seed", range(40))
def test_item_values_are_lm_scores_of_their_yields(lm, seed):
    rng = np.random.default_rng(seed)
    chart = Chart(lm)
    words = list(rng.choice(WORDS, size=int(rng.integers(1, 14))))     # g, h: unknown to the LM
    item, yielded = _build(chart, _random_tree(rng, words))
    for i in range(chart.n):
        assert chart.length[i] >= 1
    assert sorted(yielded) == sorted(words)
    assert chart.value[item] == pytest.approx(lm.score(" ".join(yielded), bos=False, eos=False), abs=1e-9)
    # the glue: <s>, then S -> S X, then S -> S </s>
    start = chart.apply(["<s>"], [])
    glued = chart.apply([("NT", 0), ("NT", 1)], [start, item])
    goal = chart.apply([("NT", 0), "</s>"], [glued])
    assert chart.complete[goal] and chart.left_len[goal] == 0
    assert chart.value[goal] == pytest.approx(lm.score(" ".join(yielded), bos=True, eos=True), abs=1e-9)


def test_every_item_of_a_tree_scores_its_own_yield(lm):
    rng = np.random.default_rng(7)
    for _ in range(30):
        chart = Chart(lm)
        words = list(rng.choice(WORDS, size=int(rng.integers(2, 12))))
        tree = _random_tree(rng, words)
        yields = {}

        def build(node):
            target, kids = node
            built = [build(k) for k in kids]
            item = chart.apply(target, built)
            out = []
            for s in target:
                out.extend(yields[built[s[1]]] if isinstance(s, tuple) else [s])
            yields[item] = out
            return item

        build(tree)
        n_ctx = lm.tables.order - 1
        for item, words_of in yields.items():
            assert chart.value[item] == pytest.approx(lm.score(" ".join(words_of), bos=False, eos=False), abs=1e-9)
            assert chart.length[item] == len(words_of)
            # the left state: the first words, at most N-1; all of them unless it is full
            n_left = chart.left_len[item]
            assert n_left <= n_ctx and (chart.full[item] or n_left == len(words_of))
            assert chart.left[item, :n_left].tolist() == lm.encode(words_of[:n_left]).tolist()


def test_equal_states_continue_alike(lm):
    """Two items with the same left words and right state: any continuation adds the same."""
    rng = np.random.default_rng(3)
    n_ctx = lm.tables.order - 1
    for _ in range(50):
        chart = Chart(lm)
        prefix = list(rng.choice(WORDS, size=n_ctx))
        middle_a = list(rng.choice(WORDS, size=int(rng.integers(0, 4))))
        middle_b = list(rng.choice(WORDS, size=int(rng.integers(0, 4))))
        suffix = list(rng.choice(WORDS, size=n_ctx))
        a = chart.apply(prefix + middle_a + suffix, [])
        b = chart.apply(prefix + middle_b + suffix, [])
        same = (chart.left[a].tolist() == chart.left[b].tolist() and chart.full[a] == chart.full[b] and
                chart.right_words(a) == chart.right_words(b))
        assert same
        context = list(rng.choice(WORDS, size=3))
        after = list(rng.choice(WORDS, size=3))
        for item in (a, b):
            base = chart.value[item]
            new = chart.apply(context + [("NT", 0)] + after, [item])
            chart.value[new] -= base
        assert chart.value[chart.n - 1] == pytest.approx(chart.value[chart.n - 2], abs=1e-9)


def _state(chart: Chart, item: int) -> tuple:
    """What the decoder recombines on: the left words, whether the left state is full, the right words."""
    return (tuple(chart.left[item, :chart.left_len[item]].tolist()), bool(chart.full[item]),
            tuple(chart.right_words(item)), bool(chart.complete[item]))


def test_items_with_equal_minimised_states_continue_alike(lm):
    """KenLM's state minimisation: items of different yields but equal (minimised) left and right states
    add the same in every context, as a child at the start, in the middle and after <s>; items whose
    first words stop mattering to what precedes them have a left state shorter than N-1 words."""
    rng = np.random.default_rng(11)
    chart = Chart(lm, capacity=200_000)
    by_state: dict = {}
    for _ in range(1500):
        words = list(rng.choice(WORDS, size=int(rng.integers(1, 7))))
        item, _ = _build(chart, _random_tree(rng, words))
        by_state.setdefault(_state(chart, item), set()).add(item)
    groups = [sorted(items) for items in by_state.values() if len(items) > 1]
    minimised = sum(1 for i in range(chart.n) if chart.full[i] and chart.left_len[i] < min(
        chart.length[i], lm.tables.order - 1))
    assert minimised > 0
    compared = 0
    for items in groups[:150]:
        first, others = items[0], items[1:4]
        for context in (([], ["c", "a"]), (["b", "e"], ["d"]), (["<s>", "a"], ["</s>"])):
            before, after = context
            added = []
            for item in [first] + others:
                new = chart.apply(before + [("NT", 0)] + after, [item])
                added.append(chart.value[new] - chart.value[item])
            assert added == pytest.approx([added[0]] * len(added), abs=1e-9)
            compared += 1
    assert compared >= 30


def test_interned_states_and_memoised_steps_equal_the_lm(lm):
    """Every step of random walks, through the memo or not, gives score_word's probability and next
    state, and equal states get one id."""
    t = lm.tables
    n_ctx = t.order - 1
    rng = np.random.default_rng(5)
    states = _chart_lm.new_states(t)
    words, backs = np.full(n_ctx, -1, dtype=np.int32), np.zeros(n_ctx)
    next_words, next_backs = np.empty(n_ctx, dtype=np.int32), np.empty(n_ctx)
    ids_of: dict = {}
    for _ in range(300):
        state, length = _chart_lm.EMPTY_STATE, 0
        words[:], backs[:] = -1, 0.0
        for word in lm.encode(list(rng.choice(WORDS, size=8))):
            states = _chart_lm.room(states, 1)
            logprob, following, independent, grew = _chart_lm.step(t, states, state, int(word))
            expected, _, next_length, expected_independent = score_word(t, words, backs, length, int(word),
                                                                       next_words, next_backs)
            assert logprob == expected and independent == expected_independent
            assert grew == (next_length == length + 1)
            got = states.words[following]
            assert got[0] == next_length and got[1:].tolist() == next_words.tolist()
            assert states.backoffs[following].tolist() == next_backs.tolist()
            assert ids_of.setdefault(tuple(next_words.tolist()), following) == following
            state, length = following, next_length
            words[:], backs[:] = next_words, next_backs


@pytest.mark.parametrize("extra", [1, 1500, 3001, 70_000])
def test_room_grows_the_tables_to_powers_of_two_and_keeps_every_state(lm, extra):
    t = lm.tables
    states = _chart_lm.new_states(t)
    walked = []
    state = _chart_lm.EMPTY_STATE
    for word in lm.encode(list(WORDS) * 3):
        states = _chart_lm.room(states, 1)
        state = _chart_lm.step(t, states, state, int(word))[1]
        walked.append(state)
    count = int(states.count[0])
    states = _chart_lm.room(states, extra)
    rows, size = states.words.shape[0], states.index.shape[0]
    assert rows >= count + extra + 1 and rows & (rows - 1) == 0 and size & (size - 1) == 0
    state = _chart_lm.EMPTY_STATE
    for word, expected in zip(lm.encode(list(WORDS) * 3), walked):
        state = _chart_lm.step(t, states, state, int(word))[1]
        assert state == expected
    assert states.count[0] == count
