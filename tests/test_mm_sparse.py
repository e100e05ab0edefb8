"""Moment matching on sparse crowds (spec sequential-networked §2.2.4–2.2.6): the co-occurrence-only
moment assembly, the colour-batched block updates, and the warnings for annotators MM cannot identify."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest

from fusion_core.errors import AggregationWarning
from fusion_core.methods import create
from fusion_core.methods.moment_matching import (
    block_quadratic,
    block_quadratics,
    colour_learners,
    colour_plans,
    compute_moments,
    fix_permutation_as2,
    moment_terms,
    objective,
    qp_columns,
    qp_columns_batch,
    solve_moments,
)
from fusion_core.methods.moment_matching import moments as mmod
from fusion_core.metrics import accuracy


def _brute_moments(F, k, p_min, t_min):
    """Pair and triple moments by a plain loop over learner pairs/triples (reference for small data)."""
    m = F.shape[0]
    pairs, triples = {}, {}
    for a, b in itertools.combinations(range(m), 2):
        both = (F[a] >= 0) & (F[b] >= 0)
        if both.sum() >= max(p_min, 1):
            s = np.zeros((k, k))
            np.add.at(s, (F[a, both], F[b, both]), 1.0 / both.sum())
            pairs[(a, b)] = (s, both.sum())
    for a, b, c in itertools.combinations(range(m), 3):
        allm = (F[a] >= 0) & (F[b] >= 0) & (F[c] >= 0)
        if allm.sum() >= max(t_min, 1):
            t = np.zeros((k, k, k))
            np.add.at(t, (F[a, allm], F[b, allm], F[c, allm]), 1.0 / allm.sum())
            triples[(a, b, c)] = (t, allm.sum())
    return pairs, triples


def _check_against_brute(F, k, p_min, t_min):
    mom = compute_moments(F, k, min_pair_support=p_min, min_triple_support=t_min)
    pairs, triples = _brute_moments(F, k, p_min, t_min)
    assert sorted(pairs) == sorted(map(tuple, mom.pair.tolist()))
    assert sorted(triples) == sorted(map(tuple, mom.triple.tolist()))
    for p, key in enumerate(map(tuple, mom.pair.tolist())):
        np.testing.assert_allclose(mom.S[p], pairs[key][0], atol=1e-14)
        assert mom.pair_support[p] == pairs[key][1]
    for q, key in enumerate(map(tuple, mom.triple.tolist())):
        np.testing.assert_allclose(mom.T3[q], triples[key][0], atol=1e-14)
        assert mom.triple_support[q] == triples[key][1]
    return mom


def test_sparse_crowd_moments_match_brute_force_on_both_triple_paths(monkeypatch):
    """Many learners, few labels per item: only co-occurring pairs/triples are enumerated (§2.2.6)."""
    rng = np.random.default_rng(3)
    k, m, n = 3, 40, 1500
    F = np.full((m, n), -1)
    act = rng.dirichlet(0.5 * np.ones(m))  # skewed activity, as on real crowds
    for i in range(n):
        w = rng.choice(m, size=rng.integers(1, 7), replace=False, p=act)
        F[w, i] = rng.integers(0, k, size=len(w))
    dense = _check_against_brute(F, k, 5, 4)
    assert len(dense.triple) > 20 and len(dense.pair) > 50
    # the path used with many learners (triples counted by sorting, pre-filtered by their pairs' support)
    monkeypatch.setattr(mmod, "_DENSE_TRIPLE_RANKS", 10)
    sparse = _check_against_brute(F, k, 5, 4)
    np.testing.assert_array_equal(sparse.triple, dense.triple)
    # chunked enumeration gives the same sums
    monkeypatch.setattr(mmod, "_CHUNK", 7)
    _check_against_brute(F, k, 5, 4)


def _sparse_problem(seed, k=3, m=30, n=800):
    rng = np.random.default_rng(seed)
    F = np.full((m, n), -1)
    for i in range(n):
        w = rng.choice(m, size=rng.integers(2, 6), replace=False)
        F[w, i] = rng.integers(0, k, size=len(w))
    mom = compute_moments(F, k, min_pair_support=8, min_triple_support=3)
    g = rng.dirichlet(np.ones(k), size=(m, k)).transpose(0, 2, 1)
    p = rng.dirichlet(np.ones(k))
    return mom, g, p


def test_colour_batches_are_independent_and_equal_per_learner_blocks():
    mom, g, p = _sparse_problem(0)
    colour = colour_learners(mom)
    linked = [mom.pair] + [mom.triple[:, list(c)] for c in ((0, 1), (0, 2), (1, 2))]
    for a, b in np.concatenate(linked):
        assert colour[a] != colour[b]  # learners of a colour share no kept moment
    plans = colour_plans(mom)
    assert sum(len(pl.members) for pl in plans) == mom.n_learners
    assert max(len(pl.members) for pl in plans) > 1  # the sparse crowd really is batched
    for pl in plans:
        gram, lin = block_quadratics(mom, g, p, pl)
        for j, m in enumerate(pl.members):
            g_ref, l_ref = block_quadratic(mom, g, p, int(m))
            np.testing.assert_allclose(gram[j], g_ref, rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(lin[j], l_ref, rtol=1e-12, atol=1e-15)


def test_batched_block_qp_equals_single_block_solver():
    rng = np.random.default_rng(1)
    k, nb = 4, 60
    z = rng.normal(size=(nb, k, k))
    gram = np.matmul(z.transpose(0, 2, 1), z) + 0.05 * np.eye(k)
    lin = rng.normal(size=(nb, k, k))  # mostly infeasible closed forms: the active set is exercised
    start = rng.dirichlet(np.ones(k), size=(nb, k)).transpose(0, 2, 1)
    start[::3, 0, :] = 0.0
    start[::3] /= start[::3].sum(axis=1, keepdims=True)
    out = qp_columns_batch(gram, lin, start, 50)
    for b in range(nb):
        ref = qp_columns(gram[b], lin[b], start[b], 50)
        np.testing.assert_allclose(out[b], ref, atol=1e-9)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, atol=1e-12)
    assert out.min() >= 0 and (out == 0).any()
    # optimality: no feasible random direction lowers the block objective
    f = lambda x: np.trace(x @ gram[0] @ x.T) - 2 * np.trace(x.T @ lin[0])
    for _ in range(200):
        y = rng.dirichlet(np.ones(k), size=k).T
        assert f(out[0] + 0.01 * (y - out[0])) >= f(out[0]) - 1e-12


@pytest.mark.slow
def test_exact_recovery_with_batched_colours():
    """Exact population moments on a design where several learners share a colour: the batched
    block-coordinate descent still recovers Γ and π and decreases g monotonically (oracle T3 style)."""
    rng = np.random.default_rng(7)
    k, m = 3, 7
    gamma = np.empty((m, k, k))
    for j in range(m):
        for c in range(k):
            d = rng.uniform(0.45, 0.8)
            gamma[j, :, c] = np.insert((1 - d) * rng.dirichlet(np.ones(k - 1)), c, d)
    pi = np.array([0.45, 0.35, 0.2])
    groups = [(0, 1, 2), (3, 4, 5), (0, 3, 6), (1, 4, 6), (2, 5, 6)]  # each pair in exactly one group
    pats = np.array(list(itertools.product(range(k), repeat=3))).T  # 3 × 27
    prob = (pi[None, :] * np.prod(gamma[np.array(groups)[:, :, None], pats[None], :], axis=1)).sum(axis=2)
    F = np.full((m, len(groups) * pats.shape[1]), -1)
    for g_i, grp in enumerate(groups):
        F[list(grp), g_i * 27 : (g_i + 1) * 27] = pats
    mom = compute_moments(F, k, weights=prob.ravel(), min_pair_support=1, min_triple_support=1)
    assert len(mom.triple) == len(groups) and len(mom.pair) == 15
    assert max(len(pl.members) for pl in colour_plans(mom)) >= 2
    g0 = rng.dirichlet(np.ones(k), size=(m, k)).transpose(0, 2, 1)
    p0 = rng.dirichlet(np.ones(k))
    g, p, trace, _, _ = solve_moments(mom, g0, p0, max_iter=4000, tol=1e-13, obj_tol=0.0)
    assert all(b <= a + 1e-12 for a, b in itertools.pairwise(trace))  # still a block-coordinate descent
    g, p, _ = fix_permutation_as2(g, p)
    assert objective(mom, g, p) < 1e-11
    assert np.abs(g - gamma).sum(axis=1).max() < 1e-5 and np.abs(p - pi).sum() < 1e-5


def _sparse_crowd(seed, n=3000, heavy=12, light=300, k=3):
    """A crowd like the real sparse sets: 12 heavy annotators (each labels ~30% of the items) and 300
    light ones (1–3 per item, ~20 labels each, rarely co-labelling); accuracies 0.5–0.85, symmetric errors."""
    rng = np.random.default_rng(seed)
    acc = rng.uniform(0.5, 0.85, size=heavy + light)
    y = rng.integers(0, k, size=n)
    item, worker = [], []
    for i in range(n):
        ws = np.r_[
            np.flatnonzero(rng.random(heavy) < 0.3), heavy + rng.choice(light, size=rng.integers(1, 4), replace=False)
        ]
        item += [i] * len(ws)
        worker += list(ws)
    item, worker = np.array(item), np.array(worker)
    right = rng.random(len(item)) < acc[worker]
    label = np.where(right, y[item], (y[item] + rng.integers(1, k, size=len(item))) % k)
    return pd.DataFrame({"task": item, "worker": worker, "label": label}), pd.Series(y), acc


def test_sparse_crowd_fits_and_names_the_unidentified_annotators():
    df, truth, acc = _sparse_crowd(0)
    with pytest.warns(AggregationWarning, match=r"annotators share no pair with at least 20") as rec:
        mm = create("mm").fit(df)
    column = mm.result_.column("moment_terms")
    assert column is not None and "moment_terms" not in column.title  # plain words for the annotator table
    terms = column.values.astype(int)
    np.testing.assert_array_equal(terms, mm.result_.details["moment_terms"])
    workers = mm.responses_.workers.to_numpy()
    heavy = workers < 12
    assert (terms[heavy] > 0).all()
    lone = int((terms == 0).sum())
    assert lone > 250
    assert any(f"{lone} of {len(terms)} annotators" in str(w.message) for w in rec)
    assert mm.converged_
    # the identified (heavy) annotators' accuracies are recovered from the moments
    est_acc = np.einsum("mkk->mk", mm.confusion_[heavy]).mean(axis=1)
    assert np.abs(est_acc - acc[workers[heavy]]).max() < 0.1
    mv = create("mv").fit(df)
    assert accuracy(mm.labels_, truth) >= accuracy(mv.labels_, truth) - 0.02
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        ds = create("mm-ds").fit(df)
        again = create("mm").fit(df)
    assert accuracy(ds.labels_, truth) >= accuracy(mv.labels_, truth) - 0.02
    np.testing.assert_array_equal(again.confusion_, mm.confusion_)  # deterministic
    # annotators without kept moments: only their label frequencies constrain Γ_m (Γ_m π ≈ μ_m)
    mom = compute_moments(mm.responses_.dense_matrix(-1), 3)
    lone_idx = np.flatnonzero(moment_terms(mom) == 0)
    model_mu = np.einsum("mik,k->mi", mm.gamma_[lone_idx], mm.priors_.to_numpy())
    np.testing.assert_allclose(model_mu, mom.mu[lone_idx], atol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("name,floor", [("relevance", 0.54), ("adult", 0.65)])
def test_real_sparse_crowds_finish(name, floor):
    from conftest import load_dataset

    answers, truth = load_dataset(name)
    with pytest.warns(AggregationWarning, match="share no pair"):
        est = create("mm").fit(answers)
    common = truth.index.intersection(est.labels_.index)
    assert accuracy(truth.loc[common], est.labels_.loc[common]) >= floor
    assert est.converged_


def test_extrapolation_keeps_the_descent_and_the_fixed_point():
    from fusion_core.data.responses import Responses
    from fusion_core.methods.moment_matching import mv_init

    df, _, _ = _sparse_crowd(1)
    resp = Responses.from_frame(df)
    F = resp.dense_matrix(-1)
    mom = compute_moments(F, 3)
    g0, p0, _ = mv_init(F, 3)
    fast = solve_moments(mom, g0, p0, extrapolate=True)
    plain = solve_moments(mom, g0, p0, extrapolate=False)
    for _, _, trace, _, conv in (fast, plain):
        assert conv and all(b <= a + 1e-12 for a, b in itertools.pairwise(trace))
    assert abs(fast[2][-1] - plain[2][-1]) <= 1e-6 * plain[2][-1]
    heavy = resp.workers.to_numpy() < 12  # well-identified annotators: same estimate
    assert np.abs(fast[0][heavy] - plain[0][heavy]).max() < 0.01
    assert np.abs(fast[1] - plain[1]).max() < 0.01
