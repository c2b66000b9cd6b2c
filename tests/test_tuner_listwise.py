"""The listwise tuners (Chen et al. 2017) against the permutation probability model written out.

Every loss is compared with the slowest obvious computation from eq. (4):
probabilities of whole permutations, summed over all ``k!`` of them to get
prefix and top-one probabilities; gradients with central finite differences
on lists with BLEU ties and sparse features; the training loop with a plain
numpy AdaDelta over mini-batches; and fits on a toy list where one feature
predicts BLEU.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tuners
from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.kbest import KBest
from tuners.listwise import ListMLE, ListMLETE, ListNet, ListNetTE

NAMES = ["listnet", "listnet-te", "listmle", "listmle-top5", "listmle-te"]

# BLEU statistics [m1 t1 m2 t2 m3 t3 m4 t4 ref]; few distinct rows, so BLEU+1 ties are common
STATS_POOL = np.array([[9, 10, 6, 9, 4, 8, 2, 7, 10],
                       [5, 10, 3, 9, 2, 8, 1, 7, 10],
                       [7, 12, 4, 11, 2, 10, 1, 9, 10],
                       [0, 10, 0, 9, 0, 8, 0, 7, 10]], dtype=np.int32)


def make_kbest(sizes, seed, n_dense=3, n_sparse=3):
    """Random lists of the given sizes with dense and sparse features and BLEU ties."""
    rng = np.random.default_rng(seed)
    space = FeatureSpace([f"d{i}" for i in range(n_dense)], [f"sp{i}" for i in range(n_sparse)])
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(offsets[-1])
    features = rng.standard_normal((n, n_dense))
    indptr, indices, values = [0], [], []
    for _ in range(n):
        columns = np.flatnonzero(rng.random(n_sparse) < 0.4)
        indices.extend((columns + n_dense).tolist())
        values.extend(rng.choice([1.0, -0.5, 2.0], size=columns.size).tolist())
        indptr.append(len(indices))
    stats = STATS_POOL[rng.integers(0, len(STATS_POOL), size=n)]
    return KBest(space, offsets, features, np.zeros(0, dtype=np.uint8), np.zeros(n + 1, dtype=np.int64),
                 np.array(indptr), np.array(indices, dtype=np.int32), np.array(values), stats)


def full_matrix(data):
    """Dense ``[N, n_weights]`` feature matrix (dense block and sparse columns)."""
    X = np.zeros((data.n_hypotheses, len(data.space)))
    X[:, : data.space.n_dense] = data.features
    for row in range(data.n_hypotheses):
        for index, value in zip(*data.sparse_row(row)):
            X[row, index] += value
    return X


# ---- the permutation probability model, the slowest obvious way ------------------------------
def pl_probability(perm, z):
    """Eq. (4): prod_j exp z(pi(j)) / sum_{t >= j} exp z(pi(t))."""
    p = 1.0
    for j in range(len(perm)):
        p *= math.exp(z[perm[j]]) / sum(math.exp(z[perm[t]]) for t in range(j, len(perm)))
    return p


def all_rankings(items, z):
    """Every permutation of ``items`` with its probability under ``z``."""
    return [(perm, pl_probability(perm, z)) for perm in itertools.permutations(items)]


def prefix_probability(rankings, prefix):
    """Probability that the ranking starts with ``prefix``: the sum over all permutations that do."""
    prefix = tuple(prefix)
    return sum(p for perm, p in rankings if perm[: len(prefix)] == prefix)


def top_one(items, z):
    """Top-one probability of each item: the sum over all permutations starting with it."""
    rankings = all_rankings(items, z)
    return {e: prefix_probability(rankings, [e]) for e in items}


def ground_truth(bleu):
    return sorted(range(len(bleu)), key=lambda i: (-bleu[i], i))


def cost(j, k):
    """Eq. (6), 1-based position j."""
    return (k - j + 1) / sum(range(1, k + 1))


def brute_listmle(s, bleu, top_n=None, enhanced=False):
    """ListMLE (eq. 5), top-n ListMLE, or ListMLE-TE, from probabilities of permutations."""
    k = len(s)
    pi = ground_truth(bleu)
    rankings = all_rankings(range(k), s)
    if enhanced:
        loss = 0.0
        for j in range(1, k + 1):
            q_j = prefix_probability(rankings, pi[:j]) / prefix_probability(rankings, pi[: j - 1])
            loss -= cost(j, k) * math.log(q_j)
        return loss
    n = k if top_n is None else min(top_n, k)
    return -math.log(prefix_probability(rankings, pi[:n]))


def brute_listnet(s, e):
    """Top-one ListNet: cross entropy of the enumerated top-one probabilities."""
    items = range(len(s))
    p_eval, p_model = top_one(items, e), top_one(items, s)
    return -sum(p_eval[i] * math.log(p_model[i]) for i in items)


def brute_listnet_te(s, e, bleu):
    """This module's ListNet-TE: at each position of pi_eval, c(j) times the top-one cross entropy
    over the hypotheses not yet placed."""
    k = len(s)
    pi = ground_truth(bleu)
    loss = 0.0
    for j in range(1, k + 1):
        rest = pi[j - 1:]
        p_eval, p_model = top_one(rest, e), top_one(rest, s)
        loss -= cost(j, k) * sum(p_eval[i] * math.log(p_model[i]) for i in rest)
    return loss


def paper_listnet_te(s, e):
    """The paper's L_Net-TE: expectation over every permutation pi ~ P_eval of
    -sum_j c(j) log q_j(pi)."""
    k = len(s)
    loss = 0.0
    for perm, p in all_rankings(range(k), e):
        for j in range(1, k + 1):
            q_j = math.exp(s[perm[j - 1]]) / sum(math.exp(s[perm[t]]) for t in range(j - 1, k))
            loss -= p * cost(j, k) * math.log(q_j)
    return loss


def brute_loss(name, s, bleu, eval_scale):
    e = [eval_scale * b for b in bleu]
    if name == "listnet":
        return brute_listnet(s, e)
    if name == "listnet-te":
        return brute_listnet_te(s, e, bleu)
    if name == "listmle":
        return brute_listmle(s, bleu)
    if name == "listmle-top5":
        return brute_listmle(s, bleu, top_n=5)
    return brute_listmle(s, bleu, enhanced=True)


def tuner_for(name, eval_scale=1.0, **params):
    if name.startswith("listnet"):
        params["eval_scale"] = eval_scale
    return tuners.get_tuner(name, **params)


# ---- (b) each loss vs enumeration of all permutations ---------------------------------------
lists_st = st.lists(
    st.lists(st.tuples(st.floats(-4, 4, allow_nan=False), st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.8])),
             min_size=1, max_size=6),
    min_size=1, max_size=2)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40, deadline=None)
@given(lists=lists_st, eval_scale=st.sampled_from([1.0, 6.0]))
def test_losses_match_enumerated_permutations(name, lists, eval_scale):
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in lists])]).astype(np.int64)
    scores = np.array([s for x in lists for s, _ in x])
    bleu = np.array([b for x in lists for _, b in x])
    losses, dscores = tuner_for(name, eval_scale).list_losses(offsets, scores, bleu)
    for i, x in enumerate(lists):
        expected = brute_loss(name, [s for s, _ in x], [b for _, b in x], eval_scale)
        assert losses[i] == pytest.approx(expected, rel=1e-9, abs=1e-12)
        # every loss depends on score differences only: the derivatives sum to 0
        assert abs(dscores[offsets[i]:offsets[i + 1]].sum()) < 1e-12


def test_enumeration_is_a_distribution_and_listmle_te_weights_sum_to_one():
    z = [0.3, -1.0, 2.0, 0.0]
    assert sum(p for _, p in all_rankings(range(4), z)) == pytest.approx(1.0, abs=1e-12)
    assert sum(cost(j, 7) for j in range(1, 8)) == pytest.approx(1.0, abs=1e-15)


@settings(max_examples=25, deadline=None)
@given(s=st.lists(st.floats(-3, 3, allow_nan=False), min_size=1, max_size=5),
       levels=st.permutations([0.1, 0.2, 0.3, 0.4, 0.5]))
def test_listnet_te_against_the_papers_expectation_over_permutations(s, levels):
    """Exact for k <= 2; as P_eval becomes peaked, the paper's form, this one and ListMLE-TE meet."""
    bleu = np.array(levels[: len(s)])
    offsets = np.array([0, len(s)])
    for scale, tolerance in ((1.0, None), (3.0, None), (400.0, 1e-9)):
        ours = ListNetTE(eval_scale=scale).list_losses(offsets, np.array(s), bleu)[0][0]
        paper = paper_listnet_te(s, [scale * b for b in bleu])
        if len(s) <= 2:
            assert ours == pytest.approx(paper, rel=1e-9, abs=1e-12)
        if tolerance is not None:
            mle_te = ListMLETE().list_losses(offsets, np.array(s), bleu)[0][0]
            assert ours == pytest.approx(mle_te, rel=tolerance, abs=tolerance)
            assert paper == pytest.approx(mle_te, rel=tolerance, abs=tolerance)


def test_ground_truth_ties_follow_row_order():
    """Equal BLEU+1 keeps the decoder's order: ListMLE of [a, b] tied is -log P(a before b)."""
    s = np.array([0.0, 2.0])
    loss = ListMLE().list_losses(np.array([0, 2]), s, np.array([0.5, 0.5]))[0][0]
    assert loss == pytest.approx(-math.log(math.exp(0.0) / (math.exp(0.0) + math.exp(2.0))), rel=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_losses_are_stable_for_large_scores(name):
    rng = np.random.default_rng(5)
    offsets = np.array([0, 7, 20])
    scores = rng.standard_normal(20)
    bleu = rng.choice([0.0, 0.3, 0.6], size=20)
    tuner = tuner_for(name, eval_scale=50.0)
    base, grad = tuner.list_losses(offsets, scores, bleu)
    shifted, grad_shifted = tuner.list_losses(offsets, scores + 1e6, bleu)
    np.testing.assert_allclose(shifted, base, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(grad_shifted, grad, rtol=1e-6, atol=1e-6)
    big, big_grad = tuner.list_losses(offsets, 1e4 * scores, 1e3 * bleu)
    assert np.all(np.isfinite(big)) and np.all(np.isfinite(big_grad)) and np.all(big >= 0)


# ---- (a) gradients vs central finite differences --------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_gradient_matches_finite_differences(name):
    data = make_kbest([1, 5, 9, 13, 6], seed=11)
    tuner = tuner_for(name, eval_scale=4.0)
    rng = np.random.default_rng(3)
    for _ in range(3):
        w = rng.standard_normal(len(data.space))
        loss, grad = tuner.loss_gradient(data, w)
        assert loss == pytest.approx(tuner.instance_losses(data, w).sum(), rel=1e-12)
        step = 1e-6
        numeric = np.array([(tuner.loss_gradient(data, w + step * u)[0]
                             - tuner.loss_gradient(data, w - step * u)[0]) / (2 * step)
                            for u in np.eye(w.shape[0])])
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-7)
        assert np.any(grad[data.space.n_dense:] != 0), "sparse features take part"


def test_instances_are_the_lists_aggregated_or_not():
    """Aggregated lists are separate instances: the loss is the sum of the lists' losses."""
    first, second = make_kbest([4, 6, 3], seed=1), make_kbest([5, 2, 7], seed=2)
    aggregated = KBest.aggregate([first, second])
    merged = first.merge(second)
    w = np.random.default_rng(0).standard_normal(len(first.space))
    for name in NAMES:
        tuner = tuner_for(name)
        total = tuner.loss_gradient(first, w)[0] + tuner.loss_gradient(second, w)[0]
        assert tuner.loss_gradient(aggregated, w)[0] == pytest.approx(total, rel=1e-12)
        assert tuner.instance_losses(merged, w).shape == (3,)


# ---- training: mini-batch AdaDelta, selection, determinism ----------------------------------
def reference_adadelta(tuner, data, w0, epochs):
    """Mini-batch AdaDelta (Zeiler 2012, Alg. 1) over all weights with numpy, batches as documented."""
    X = full_matrix(data)
    bleu = data.sentence_bleu()
    rng = np.random.default_rng(tuner.seed)
    w = np.array(w0, dtype=float)
    mean_sq_grad, mean_sq_step = np.zeros_like(w), np.zeros_like(w)
    rho, eps = tuner.rho, tuner.eps
    for _ in range(epochs):
        order = rng.permutation(data.n_instances)
        for start in range(0, data.n_instances, tuner.batch_size):
            batch = order[start:start + tuner.batch_size]
            _, dscores = tuner.list_losses(data.offsets, X @ w, bleu)
            rows = np.concatenate([np.arange(data.offsets[i], data.offsets[i + 1]) for i in batch])
            g = X[rows].T @ dscores[rows] / len(batch)
            mean_sq_grad = rho * mean_sq_grad + (1 - rho) * g * g
            step = -np.sqrt(mean_sq_step + eps) / np.sqrt(mean_sq_grad + eps) * g
            mean_sq_step = rho * mean_sq_step + (1 - rho) * step * step
            w = w + step
    return w


@pytest.mark.parametrize("name", NAMES)
def test_training_is_minibatch_adadelta(name):
    data = make_kbest([6, 1, 8, 5, 9, 4, 7, 3, 6, 5, 8], seed=4, n_sparse=5)
    w0 = np.random.default_rng(9).standard_normal(len(data.space))
    tuner = tuner_for(name, epochs=4, batch_size=3, select="last", seed=17)
    w = tuner.fit(data, w0)
    np.testing.assert_allclose(w, reference_adadelta(tuner, data, w0, 4), rtol=1e-9, atol=1e-12)
    assert tuner.n_updates_ == 4 * 4 and len(tuner.history_) == 4


def toy_listwise(n_sentences=30, k=12, seed=0):
    """Feature 0 predicts the BLEU statistics; feature 1 is loud noise; a sparse feature on a third."""
    rng = np.random.default_rng(seed)
    n = n_sentences * k
    quality = rng.uniform(size=n)
    features = np.column_stack([quality + 0.05 * rng.standard_normal(n), 2.0 * rng.standard_normal(n)])
    stats = np.zeros((n, 9), dtype=np.int32)
    for order in range(4):
        stats[:, 2 * order] = np.round(20 * quality ** (order + 1) * 0.9).astype(np.int32) + 1
        stats[:, 2 * order + 1] = 20 - order
    stats[:, 8] = 20
    sparse_rows = np.arange(n) % 3 == 0
    indptr = np.concatenate([[0], np.cumsum(sparse_rows)]).astype(np.int64)
    space = FeatureSpace(["good", "noise"], ["sp"])
    return KBest(space, np.arange(0, n + 1, k), features, np.zeros(0, dtype=np.uint8),
                 np.zeros(n + 1, dtype=np.int64), indptr, np.full(int(sparse_rows.sum()), 2, np.int32),
                 np.ones(int(sparse_rows.sum())), stats)


@pytest.mark.parametrize("name", NAMES)
def test_fit_improves_training_bleu(name):
    """Measured on toy list 0 with tuner seeds 0-9 and toy lists 1-9 with seed 0, each also with the
    features times (1 + 1e-9 noise), for every loss: training BLEU gain at least 0.356 (checked 0.1), w[0] >= 0.63 with
    |w[1]| / w[0] <= 0.097 (checked < 1), the loss the tuner minimises at w at most 0.64 of its value
    at w0 (checked 0.8) and the last epoch's at most 0.64 of the first's (checked < 1)."""
    data = toy_listwise()
    w0 = np.array([0.0, 1.0, 0.0])
    tuner = tuners.get_tuner(name)
    w = tuner.fit(data, w0)
    history = tuner.history_
    assert len(history) == tuner.epochs == tuner.n_iter_
    assert data.bleu(w) > data.bleu(w0) + 0.1
    assert tuner.loss_gradient(data, w)[0] < 0.8 * tuner.loss_gradient(data, w0)[0]
    assert w[0] > 0 and abs(w[1]) < w[0]
    # Algorithm 2's BestBLEU: the first epoch with the highest training BLEU
    bleus = [h["bleu"] for h in history]
    assert tuner.best_epoch_ == 1 + int(np.argmax(bleus))
    assert tuner.best_bleu_ == max(bleus) == data.bleu(w)
    assert history[-1]["loss"] < history[0]["loss"]


def test_same_seed_same_weights_other_seed_other_weights():
    data = make_kbest([6, 8, 5, 9, 4, 7, 3, 6, 5, 8, 7, 6], seed=8)
    w0 = np.zeros(len(data.space))
    for name in NAMES:
        first = tuner_for(name, epochs=5, seed=2, select="last").fit(data, w0)
        again = tuner_for(name, epochs=5, seed=2, select="last").fit(data, w0)
        other = tuner_for(name, epochs=5, seed=3, select="last").fit(data, w0)
        assert np.array_equal(first, again)
        assert not np.array_equal(first, other)


# ---- (e) bad input ------------------------------------------------------------------------
@pytest.mark.parametrize("name, params", [
    ("listmle", {"epochs": 0}), ("listmle", {"epochs": 2.5}), ("listmle-te", {"batch_size": 0}),
    ("listnet", {"rho": 1.0}), ("listnet", {"rho": 0.0}), ("listmle", {"eps": 0.0}),
    ("listmle-te", {"eps": float("nan")}), ("listmle", {"top_n": 0}), ("listmle-top5", {"top_n": 2.0}),
    ("listnet", {"eval_scale": 0.0}), ("listnet-te", {"eval_scale": float("inf")}),
    ("listmle", {"select": "middle"}), ("listnet", {"seed": -1}), ("listmle", {"seed": "abc"}),
    ("listmle", {"seed": 1.5}), ("listmle-te", {"bleu_options": "lin-och"}),
    ("listnet-te", {"bleu_options": {"no_such_option": True}}), ("listmle", {"batch_size": True}),
])
def test_bad_parameters_raise_input_error(name, params):
    data = make_kbest([3, 4], seed=0)
    with pytest.raises(InputError):
        tuners.get_tuner(name, **params).fit(data, np.zeros(len(data.space)))


@pytest.mark.parametrize("name", NAMES)
def test_bad_data_raises_input_error(name):
    data = make_kbest([3, 4], seed=0)
    tuner = tuners.get_tuner(name)
    with pytest.raises(InputError, match="NaN"):
        tuner.fit(data, np.array([np.nan] + [0.0] * (len(data.space) - 1)))
    with pytest.raises(InputError, match="unknown tuner"):
        tuners.get_tuner(name + "-x")
    data.stats = None
    with pytest.raises(InputError, match="statistics"):
        tuner.fit(data, np.zeros(len(data.space)))
    with pytest.raises(InputError):
        tuner.loss_gradient(data, np.zeros(len(data.space)))


def test_registry_names_and_defaults():
    classes = {name: type(tuners.get_tuner(name)) for name in NAMES}
    assert classes == {"listnet": ListNet, "listnet-te": ListNetTE, "listmle": ListMLE,
                       "listmle-top5": tuners.listwise.ListMLETop5, "listmle-te": ListMLETE}
    for name in NAMES:
        params = tuners.get_tuner(name).get_params()
        assert params["batch_size"] == 10 and params["rho"] == 0.95 and params["eps"] == 1e-6
        assert params["seed"] == 0 and params["bleu_options"] is None
    assert tuners.get_tuner("listmle-top5").top_n == 5 and tuners.get_tuner("listmle").top_n is None
