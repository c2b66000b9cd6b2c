"""PRO and APRO against slow obvious references and the real Moses fixtures.

APRO's O(k log k) loss, gradient and generalised Hessian-vector product are
compared with an explicit double loop over the preference pairs (eqs. 1-3 of
Dreyer & Dong 2015) on data with ties in BLEU and in model score, dense and
sparse; PRO's sampling and pro.data writer are checked against Moses' ``pro``
output.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_path
from hypothesis import given, settings
from hypothesis import strategies as st

from minismt.errors import InputError
from minismt.features import FeatureSpace
from minismt.kbest import KBestBuilder
from plugins.moses.mertfiles import read_extractor_files
from tuners.apro import APRO, APROObjective
from tuners.pro import (MOSES_PRO_BLEU, PRO, draw_candidates, logistic_loss, pair_differences,
                        pro_data_lines, select_pairs, training_set, write_pro_data)

# Moses' corpus BLEU (smooth="none") of the fixtures' model-best translations (README table)
INIT_BLEU = {"example": 0.757740, "scorer100": 0.082519}
MERT_BLEU = {"example": 0.938144, "scorer100": 0.098092}
KBMIRA_DEDUPFIX_BLEU = {"example": 0.918909, "scorer100": 0.093316}


# ---- reference: an explicit double loop over the preference pairs ----------------------------
def naive_apro(offsets, X, bleu, w, C, v):
    """Objective (eq. 3), gradient, generalised Hessian times v, and q/r of eqs. (5)-(7), pair by pair.

    ``X`` is the full feature matrix ``[N, n_weights]`` (dense and sparse columns).
    """
    n, dim = X.shape
    h = X @ w
    loss = 0.0
    grad = np.zeros(dim)
    hess = np.zeros((dim, dim))
    q_i_dot = np.zeros(n, dtype=np.int64)
    q_dot_i = np.zeros(n, dtype=np.int64)
    r_i_dot = np.zeros(n)
    r_dot_i = np.zeros(n)
    for s in range(len(offsets) - 1):
        for i in range(offsets[s], offsets[s + 1]):
            for j in range(offsets[s], offsets[s + 1]):
                if not bleu[i] > bleu[j]:
                    continue
                margin = 1.0 - h[i] + h[j]
                if margin > 0:
                    x = X[i] - X[j]
                    loss += margin * margin
                    grad -= 2.0 * margin * x
                    hess += 2.0 * np.outer(x, x)
                    q_i_dot[i] += 1
                    q_dot_i[j] += 1
                    r_i_dot[i] += h[j]
                    r_dot_i[j] += h[i]
    scale = C / n
    return {"loss": loss, "objective": 0.5 * w @ w + scale * loss, "gradient": w + scale * grad,
            "hessp": v + scale * hess @ v, "q_i_dot": q_i_dot, "q_dot_i": q_dot_i,
            "r_i_dot": r_i_dot, "r_dot_i": r_dot_i}


def csr_of(dense_part, sparse_part):
    """CSR block (global column indices after the dense ones) of a dense ``[N, n_sparse]`` matrix."""
    n_dense = dense_part.shape[1]
    indptr, indices, values = [0], [], []
    for row in sparse_part:
        nz = np.flatnonzero(row)
        indices.extend((nz + n_dense).tolist())
        values.extend(row[nz].tolist())
        indptr.append(len(indices))
    return np.array(indptr), np.array(indices, dtype=np.int32), np.array(values, dtype=np.float64)


def objective_of(offsets, dense, sparse, bleu, C):
    indptr, indices, values = csr_of(dense, sparse)
    return APROObjective(offsets, dense, indptr, indices, values, bleu, C,
                         dense.shape[1] + sparse.shape[1])


def relative_error(a, b):
    a, b = np.atleast_1d(np.asarray(a, float)), np.atleast_1d(np.asarray(b, float))
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def check_against_naive(offsets, dense, sparse, bleu, w, v, C):
    objective = objective_of(offsets, dense, sparse, bleu, C)
    ref = naive_apro(offsets, np.hstack([dense, sparse]), bleu, w, C, v)
    f, g = objective(w)
    assert relative_error(objective.loss(w), ref["loss"]) <= 1e-9 or abs(ref["loss"]) < 1e-12
    assert relative_error(f, ref["objective"]) <= 1e-9
    assert relative_error(g, ref["gradient"]) <= 1e-9
    assert relative_error(objective.hessp(w, v), ref["hessp"]) <= 1e-9
    stats = objective.pair_statistics(w)
    for name in ("q_i_dot", "q_dot_i"):
        assert np.array_equal(stats[name], ref[name]), name
    for name in ("r_i_dot", "r_dot_i"):
        np.testing.assert_allclose(stats[name], ref[name], rtol=1e-9, atol=1e-9)


# ---- (a) APRO quantities, loss, gradient and Hessian-vector product vs the double loop -------
# small integers and dyadic weights: many exact ties in h, in b, and margins of exactly 0
sentences_st = st.lists(st.integers(0, 9), min_size=1, max_size=4).filter(lambda sizes: sum(sizes) > 0)


@settings(max_examples=60, deadline=None)
@given(sizes=sentences_st, seed=st.integers(0, 2 ** 32 - 1))
def test_apro_matches_double_loop_with_ties(sizes, seed):
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(offsets[-1])
    dense = rng.integers(-2, 3, size=(n, 3)).astype(float)
    sparse = rng.choice([0.0, 0.0, 1.0, -0.5], size=(n, 2))
    bleu = rng.choice([0.1, 0.25, 0.5], size=n)
    w = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=5)
    v = rng.choice([-1.0, 0.5, 2.0], size=5)
    check_against_naive(offsets, dense, sparse, bleu, w, v, C=0.7)


@pytest.mark.parametrize("seed", range(4))
def test_apro_matches_double_loop_random_floats(seed):
    rng = np.random.default_rng(100 + seed)
    sizes = rng.integers(0, 30, size=5)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(offsets[-1])
    dense = 3.0 * rng.standard_normal((n, 4))
    dense[1::7] = dense[0::7][: dense[1::7].shape[0]]           # ties in model score
    sparse = rng.standard_normal((n, 3)) * (rng.random((n, 3)) < 0.3)
    bleu = np.round(rng.random(n), 1)                          # ties in BLEU
    w = 0.3 * rng.standard_normal(7)
    v = rng.standard_normal(7)
    check_against_naive(offsets, dense, sparse, bleu, w, v, C=0.01 * n)


# ---- (b) derivatives vs finite differences --------------------------------------------------
def test_apro_gradient_and_hessian_vs_finite_differences():
    rng = np.random.default_rng(7)
    offsets = np.array([0, 40, 40, 95, 130])
    n = int(offsets[-1])
    dense = rng.standard_normal((n, 5))
    sparse = rng.standard_normal((n, 2)) * (rng.random((n, 2)) < 0.4)
    bleu = rng.random(n)
    objective = objective_of(offsets, dense, sparse, bleu, C=5.0)
    w = rng.standard_normal(7)
    f, g = objective(w)
    step = 1e-6
    numeric = np.array([(objective(w + step * e)[0] - objective(w - step * e)[0]) / (2 * step)
                        for e in np.eye(7)])
    assert relative_error(g, numeric) < 1e-6
    # away from margin boundaries the generalised Hessian is the Hessian
    v = rng.standard_normal(7)
    numeric_hv = (objective(w + step * v)[1] - objective(w - step * v)[1]) / (2 * step)
    assert relative_error(objective.hessp(w, v), numeric_hv) < 1e-5


# ---- (c) APRO on the Moses fixtures ---------------------------------------------------------
def moses_fixture(name):
    folder = shared_path("fixtures", "moses", name)
    data = read_extractor_files([folder / "features.dat"], [folder / "scores.dat"])
    init = np.array([float(x) for x in (folder / "init.opt").read_text().splitlines()[0].split()])
    return data, init


@pytest.mark.parametrize("name", ["example", "scorer100"])
def test_apro_on_moses_fixtures(name):
    """APRO minimises its own objective (eq. 3): at the result it is far below its value at the start
    (Moses' init weights; measured ratio 0.161 example, 0.111 scorer100) and below its value at w = 0
    (29.2 vs 46.9, 26.9 vs 40.4). The objective is strictly convex, so the result is its unique
    minimum whatever the start or floating-point path; the training BLEU there is that of the
    optimum (checked equal at a 100 times tighter tolerance; measured: the same anywhere within 1%
    of the optimum), not a seed's luck."""
    data, init = moses_fixture(name)
    assert data.bleu(init, smooth="none") == pytest.approx(INIT_BLEU[name], abs=1e-6)
    tuner = APRO()
    w = tuner.fit(data, init)
    bleu = data.bleu(w, smooth="none")
    print(f"APRO {name}: BLEU {bleu:.6f} (init {INIT_BLEU[name]}, mert {MERT_BLEU[name]}, "
          f"kbmira-dedupfix {KBMIRA_DEDUPFIX_BLEU[name]}), {tuner.n_iter_} Newton iterations")
    assert tuner.converged_ and tuner.n_pairs_ > 0
    objective = APROObjective.from_kbest(data, data.sentence_bleu(), tuner.C)
    assert objective(w)[0] < 0.25 * objective(init)[0]
    assert objective(w)[0] < 0.75 * objective(np.zeros_like(w))[0]
    assert np.linalg.norm(objective(w)[1]) <= tuner.tol * np.linalg.norm(objective(np.zeros_like(w))[1])
    assert tuner.history_[-1]["objective"] == pytest.approx(objective(w)[0], rel=1e-12)
    assert all(b["objective"] <= a["objective"] for a, b in zip(tuner.history_, tuner.history_[1:]))
    again = APRO().fit(data, init)
    assert np.array_equal(w, again), "APRO must be deterministic"
    # the optimum does not depend on the start point (strictly convex objective)
    from_uniform = APRO(tol=1e-8).fit(data, np.ones_like(init))
    tight = APRO(tol=1e-8).fit(data, init)
    assert relative_error(from_uniform, tight) < 1e-5
    # the training BLEU of the unique optimum (0.873087 example, 0.092471 scorer100)
    assert data.bleu(tight, smooth="none") == bleu > INIT_BLEU[name]


def test_apro_does_not_depend_on_the_thread_count():
    data, init = moses_fixture("scorer100")
    folder = shared_path("fixtures", "moses", "scorer100")
    script = ("import sys, numpy as np\n"
              "from plugins.moses.mertfiles import read_extractor_files\n"
              "from tuners.apro import APRO\n"
              "folder = sys.argv[1]\n"
              "data = read_extractor_files([folder + '/features.dat'], [folder + '/scores.dat'])\n"
              "init = np.array(open(folder + '/init.opt').readline().split(), dtype=float)\n"
              "print(APRO().fit(data, init).tobytes().hex())\n")
    env = dict(os.environ, NUMBA_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True,
                         check=True, env=env, cwd=Path(__file__).resolve().parents[1]).stdout
    assert out.strip() == APRO().fit(data, init).tobytes().hex()


def test_apro_sparse_fixture_and_interpolation():
    """APRO's unique optimum gives the two sparse features weights -0.00030 and -0.138 (the objective's
    gradient in them is -0.0073 and 1.02 with them at 0), the same to 1e-12 with the features times
    (1 + 1e-9 noise): ``!= 0`` has that much room."""
    data, init = moses_fixture("sparse_demo")
    assert len(data.space) - data.space.n_dense == 2
    w = APRO().fit(data, init)
    assert w.shape == (17,) and np.all(w[15:] != 0)
    assert np.array_equal(w, APRO().fit(data, init))
    half = APRO(psi=0.5).fit(data, init)
    np.testing.assert_allclose(half, 0.5 * w + 0.5 * data.weight_array(init), rtol=1e-12)


# ---- (d) PRO --------------------------------------------------------------------------------
def test_pro_pair_sampling_statistics():
    data, _ = moses_fixture("scorer100")
    bleu = data.sentence_bleu(**MOSES_PRO_BLEU)
    first, second = draw_candidates(data.offsets, np.random.default_rng(5), 5000)
    assert first.shape == (100 * 5000,)
    sent_first = np.searchsorted(data.offsets, first, side="right") - 1
    assert np.array_equal(sent_first, np.searchsorted(data.offsets, second, side="right") - 1)
    assert np.array_equal(np.bincount(sent_first), np.full(100, 5000))
    better, worse, chosen = select_pairs(data.offsets, bleu, first, second, 0.05, 50)
    gap = bleu[better] - bleu[worse]
    assert np.all(gap >= 0.05)
    sentence = np.searchsorted(data.offsets, better, side="right") - 1
    assert np.all(np.bincount(sentence, minlength=100) <= 50)
    # per sentence: the kept gaps are the largest of the candidates, and kept in draw order
    candidate_gap = np.abs(bleu[first] - bleu[second])
    for s in range(100):
        mine = candidate_gap[(sent_first == s) & (candidate_gap >= 0.05)]
        kept = np.sort(gap[sentence == s])[::-1]
        assert np.array_equal(kept, np.sort(mine)[::-1][: kept.shape[0]])
        assert kept.shape[0] == min(50, mine.shape[0])
    assert np.all(np.diff(chosen) > 0)                              # in draw order
    ends = np.sort(np.stack([first[chosen], second[chosen]]), axis=0)
    assert np.array_equal(ends, np.sort(np.stack([better, worse]), axis=0))


def test_pro_seeded_determinism_and_improvement():
    """PRO minimises the regularised logistic loss of its sampled pairs; the classifier ``w'``
    (``w = psi w' + (1 - psi) init``) is that loss's unique minimum. Measured over seeds 0-29, with and
    without the features times (1 + 1e-9 noise): L(w') / L(0) <= 0.208 and L(w') / L(init) <= 0.159
    (checked < 0.3), |grad L(w')| / |grad L(0)| <= 2.5e-7 (checked <= 1e-4). The training BLEU gain over init
    was 0.00118 to 0.00180 (never <= 0, and the same with the perturbation: BLEU is a step function);
    pairs kept 2473 to 2504."""
    data, init = moses_fixture("scorer100")
    tuner = PRO(seed=1)
    w = tuner.fit(data, init)
    assert np.array_equal(w, PRO(seed=1).fit(data, init))
    assert not np.array_equal(w, PRO(seed=2).fit(data, init))
    dense, sparse, labels = training_set(*pair_differences(data, *tuner.pairs_))

    def loss(v):
        return logistic_loss(v, dense, sparse, labels, tuner.lam)

    classifier = (w - (1.0 - tuner.psi) * init) / tuner.psi
    zero = np.zeros_like(w)
    assert loss(classifier)[0] < 0.3 * min(loss(zero)[0], loss(init)[0])
    assert np.linalg.norm(loss(classifier)[1]) <= 1e-4 * np.linalg.norm(loss(zero)[1])
    assert tuner.history_[-1]["loss"] == pytest.approx(loss(classifier)[0], rel=1e-9)
    bleu = data.bleu(w, smooth="none")
    print(f"PRO scorer100: BLEU {bleu:.6f} (init {INIT_BLEU['scorer100']})")
    assert bleu > INIT_BLEU["scorer100"]
    assert tuner.converged_ and len(tuner.history_) == tuner.n_iter_
    assert 2400 < tuner.pairs_[0].shape[0] <= 5000      # Moses' pro kept 2482 pairs here
    bleu = data.sentence_bleu(**MOSES_PRO_BLEU)
    first, second = draw_candidates(data.offsets, np.random.default_rng(1), 5000)
    better, worse, _ = select_pairs(data.offsets, bleu, first, second, 0.05, 50)
    assert np.array_equal(tuner.pairs_[0], better) and np.array_equal(tuner.pairs_[1], worse)


def test_logistic_regression_gradient_vs_finite_differences():
    data, _ = moses_fixture("sparse_demo")
    tuner = PRO(seed=3)
    tuner.fit(data, np.zeros(17))
    dense, sparse, labels = training_set(*pair_differences(data, *tuner.pairs_))
    assert sparse is not None and sparse.shape == (dense.shape[0], 2)
    rng = np.random.default_rng(0)
    w = 0.05 * rng.standard_normal(17)
    _, g = logistic_loss(w, dense, sparse, labels, 1.0)
    step = 1e-6
    numeric = np.array([(logistic_loss(w + step * e, dense, sparse, labels, 1.0)[0]
                         - logistic_loss(w - step * e, dense, sparse, labels, 1.0)[0]) / (2 * step)
                        for e in np.eye(17)])
    assert relative_error(g, numeric) < 1e-6


def recover_moses_pairs(data, path):
    """Candidate (better, worse) rows of each pair of Moses' pro.data, found from its two lines.

    A pair's lines fix its difference vector up to %g rounding; each pair gets
    every row pair of its sentence whose lines (as :func:`pro_data_lines` writes
    them) are identical to Moses' two lines.
    """
    n_dense = data.space.n_dense
    f32 = data.features.astype(np.float32)
    text = path.read_text()
    lines = text.split("\n")[:-1]
    pairs = []
    s = 0
    for p in range(0, len(lines), 2):
        expected = lines[p] + "\n" + lines[p + 1] + "\n"
        tokens = lines[p].split()
        assert tokens[0] == "1"
        d = np.zeros(n_dense, dtype=np.float32)
        for name, value in zip(tokens[1::2], tokens[2::2]):
            if re.fullmatch(r"F\d+", name):
                d[int(name[1:])] = float(value)
        while True:
            rows = data.rows(s)
            block = f32[rows.start:rows.stop]
            diff = block[:, None, :] - block[None, :, :]
            diff[np.abs(diff) <= 1e-5] = 0
            match = np.argwhere(np.all(np.abs(diff - d) <= 1e-5 * np.abs(d) + 1e-6, axis=2))
            candidates = [(rows.start + int(i), rows.start + int(j)) for i, j in match
                          if pro_data_lines(data, rows.start + int(i), rows.start + int(j)) == expected]
            if candidates:
                pairs.append(candidates)
                break
            s += 1
    return pairs


@pytest.mark.parametrize("name", ["example", "sparse_demo"])
def test_pro_data_as_moses(name, tmp_path):
    data, _ = moses_fixture(name)
    fixture = shared_path("fixtures", "moses", name, "pro.data")
    pairs = recover_moses_pairs(data, fixture)
    assert len(pairs) == 150 and all(len(candidates) == 1 for candidates in pairs)
    better, worse = (np.array(rows) for rows in zip(*[candidates[0] for candidates in pairs]))
    # each of Moses' pairs passes our Moses-PRO BLEU+1 filter, with the same orientation
    bleu = data.sentence_bleu(**MOSES_PRO_BLEU)
    assert np.all(bleu[better] - bleu[worse] >= 0.05)
    write_pro_data(tmp_path / "pro.data", data, better, worse)
    assert (tmp_path / "pro.data").read_bytes() == fixture.read_bytes()


def test_pro_on_example_runs():
    data, init = moses_fixture("example")
    w = PRO().fit(data, init)
    # one PRO step on 3 sentences and 150 pairs does not beat init here (reported, not a bug):
    # the classifier ranks all training pairs right but the top-1 choice gets worse
    print(f"PRO example: BLEU {data.bleu(w, smooth='none'):.6f} (init {INIT_BLEU['example']})")
    assert np.all(np.isfinite(w))


# ---- (e) bad input --------------------------------------------------------------------------
def tiny_kbest(stats_rows):
    space = FeatureSpace(["a_0", "b_0"])
    builder = KBestBuilder(space)
    for k, stats in enumerate(stats_rows):
        builder.add(0, f"h{k}", [float(k), 1.0], stats=stats)
    return builder.build()


@pytest.mark.parametrize("make", [
    lambda: APRO(C=-1.0), lambda: APRO(C=float("nan")), lambda: APRO(psi=0.0), lambda: APRO(psi=1.5),
    lambda: APRO(tol=0.0), lambda: APRO(max_iter=0), lambda: APRO(method="bfgs"),
    lambda: APRO(bleu_options={"no_such_option": 1}), lambda: APRO(bleu_options="moses"),
    lambda: PRO(gamma=0), lambda: PRO(xi=0), lambda: PRO(beta=-0.1), lambda: PRO(psi=0.0),
    lambda: PRO(lam=0.0), lambda: PRO(bleu_options={"no_such_option": 1}),
])
def test_bad_parameters_raise_input_error(make):
    data = tiny_kbest([[3, 4, 2, 3, 1, 2, 0, 1, 4], [1, 4, 0, 3, 0, 2, 0, 1, 4]])
    with pytest.raises(InputError):
        make().fit(data, np.zeros(2))


@pytest.mark.parametrize("cls", [APRO, PRO])
def test_bad_data_raise_input_error(cls):
    good = tiny_kbest([[3, 4, 2, 3, 1, 2, 0, 1, 4], [1, 4, 0, 3, 0, 2, 0, 1, 4]])
    with pytest.raises(InputError):
        cls().fit(good, np.array([np.inf, 0.0]))
    with pytest.raises(InputError):
        cls().fit(good, np.zeros(1))
    with pytest.raises(InputError):
        cls().fit("features.dat", np.zeros(2))
    ties = tiny_kbest([[3, 4, 2, 3, 1, 2, 0, 1, 4]] * 3)
    with pytest.raises(InputError, match="pairs"):
        cls().fit(ties, np.zeros(2))
    no_stats = tiny_kbest([[3, 4, 2, 3, 1, 2, 0, 1, 4]] * 2)
    no_stats.stats = None
    with pytest.raises(InputError):
        cls().fit(no_stats, np.zeros(2))
