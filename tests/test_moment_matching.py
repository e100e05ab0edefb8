"""Moment matching (spec sequential-networked §2.2; oracles T3, T4, T5)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import fit_or_explain

from fusion_core.data.responses import Responses
from fusion_core.errors import AggregationWarning
from fusion_core.methods import create
from fusion_core.methods.dawid_skene import unary_log_likelihood
from fusion_core.methods.moment_matching import (
    block_quadratic,
    compute_moments,
    fix_permutation_as2,
    moment_matching,
    objective,
    prior_quadratic,
)
from fusion_core.metrics import accuracy, confusion_error
from fusion_core.simulate.sequential import gen_confusions, sample_responses


def _exact_pattern_problem(seed):
    rng = np.random.default_rng(seed)
    k, m = 3, 5
    gamma = np.empty((m, k, k))
    for j in range(m):
        for c in range(k):
            d = rng.uniform(0.4, 0.8)
            off = (1 - d) * rng.dirichlet(np.ones(k - 1))
            gamma[j, :, c] = np.insert(off, c, d)
    pi = np.array([0.5, 0.3, 0.2])
    patterns = np.array(list(itertools.product(range(k), repeat=m))).T  # m × 243
    prob = (pi[None, :] * np.prod(gamma[np.arange(m)[:, None], patterns, :], axis=0)).sum(axis=1)
    return gamma, pi, patterns, prob


@pytest.mark.slow
def test_t3_exact_moment_recovery_from_weighted_patterns():
    gamma, pi, patterns, prob = _exact_pattern_problem(0)
    assert abs(prob.sum() - 1) < 1e-12
    mom = compute_moments(patterns, 3, weights=prob)
    rng = np.random.default_rng(1)
    for _ in range(3):  # three random initialisations
        g0 = rng.dirichlet(np.ones(3), size=(5, 3)).transpose(0, 2, 1)
        p0 = rng.dirichlet(np.ones(3))
        from fusion_core.methods.moment_matching import solve_moments

        g, p, trace, _, _ = solve_moments(mom, g0, p0, max_iter=5000, tol=1e-13, obj_tol=0.0)
        g, p, _ = fix_permutation_as2(g, p)
        eps = np.abs(g - gamma).sum(axis=1).max(axis=1).mean()
        assert eps < 1e-6 and np.abs(p - pi).sum() < 1e-6
        assert all(b <= a + 1e-12 for a, b in itertools.pairwise(trace))  # block-coordinate descent is monotone


def test_t3_estimator_accepts_item_weights():
    gamma, pi, patterns, prob = _exact_pattern_problem(2)
    m, n = patterns.shape
    df = pd.DataFrame(
        {"task": np.repeat(np.arange(n), m), "worker": np.tile(np.arange(m), n), "label": patterns.T.ravel()}
    )
    est = create("mm", item_weights=pd.Series(prob)).fit(df)
    ref = moment_matching(patterns, 3, weights=prob)
    np.testing.assert_allclose(est.gamma_, ref.gamma, atol=1e-12)
    assert confusion_error(gamma.transpose(0, 2, 1), est.confusion_) < 0.01  # default stopping, exact moments
    assert np.abs(est.priors_.to_numpy() - pi).sum() < 0.01
    unweighted = create("mm").fit(df)  # all 243 patterns equally likely: a different (uninformative) problem
    assert confusion_error(gamma.transpose(0, 2, 1), unweighted.confusion_) > 0.1


def _brute_objective(F, k, gamma, pi):
    m, n = F.shape
    onehot = np.eye(k)[F]  # m × n × k
    val = sum(((onehot[a].mean(axis=0) - gamma[a] @ pi) ** 2).sum() for a in range(m))
    for a, b in itertools.combinations(range(m), 2):
        s = onehot[a].T @ onehot[b] / n
        val += ((s - gamma[a] @ np.diag(pi) @ gamma[b].T) ** 2).sum()
    for a, b, c in itertools.combinations(range(m), 3):
        t = np.einsum("ni,nj,nl->ijl", onehot[a], onehot[b], onehot[c]) / n
        model = np.einsum("ik,k,jk,lk->ijl", gamma[a], pi, gamma[b], gamma[c])
        val += ((t - model) ** 2).sum()
    return val


def test_t3_aggregated_statistics_equal_brute_force_objective():
    rng = np.random.default_rng(0)
    k, m, n = 3, 5, 200
    F = rng.integers(0, k, size=(m, n))
    mom = compute_moments(F, k, min_pair_support=1, min_triple_support=1)
    g = rng.dirichlet(np.ones(k), size=(m, k)).transpose(0, 2, 1)
    p = rng.dirichlet(np.ones(k))
    assert abs(objective(mom, g, p) - _brute_objective(F, k, g, p)) < 1e-10
    # block quadratic: objective differences when only Γ_2 changes
    g2 = g.copy()
    g2[2] = rng.dirichlet(np.ones(k), size=k).T
    gram, lin = block_quadratic(mom, g, p, 2)
    q = lambda x: np.trace(x @ gram @ x.T) - 2 * np.trace(x.T @ lin)
    assert abs((_brute_objective(F, k, g2, p) - _brute_objective(F, k, g, p)) - (q(g2[2]) - q(g[2]))) < 1e-10
    # π block
    quad, plin = prior_quadratic(mom, g)
    p2 = rng.dirichlet(np.ones(k))
    r = lambda x: x @ quad @ x - 2 * plin @ x
    assert abs((_brute_objective(F, k, g, p2) - _brute_objective(F, k, g, p)) - (r(p2) - r(p))) < 1e-10


def _t4_data(seed, n):
    rng = np.random.default_rng(seed)
    k, m = 4, 10
    conf = gen_confusions(k, m, 6, 0.35, 0.65, rng=rng)
    pi = rng.dirichlet(5 * np.ones(k))
    y = rng.choice(k, size=n, p=pi)
    item, worker, label = sample_responses(y, conf, rng)
    df = pd.DataFrame({"task": item, "worker": worker, "label": label})
    return df, pd.Series(y), conf, pi


def _oracle_map(df, conf, pi, truth):
    resp = Responses.from_frame(df)
    post = unary_log_likelihood(resp, conf) + np.log(pi)
    return accuracy(pd.Series(np.argmax(post, axis=1), index=resp.items), truth)


def _check_t4(seed):
    errs = {}
    for n, bound, slack in ((1000, 0.30, 0.03), (5000, 0.12, 0.01), (20000, 0.07, None)):
        df, truth, conf, pi = _t4_data(seed, n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AggregationWarning)
            mm = create("mm").fit(df)
            mv = create("mv").fit(df)
        errs[n] = confusion_error(conf, mm.confusion_)
        assert errs[n] <= bound, (n, errs[n])
        acc = accuracy(mm.labels_, truth)
        if slack is not None:
            assert acc >= _oracle_map(df, conf, pi, truth) - slack
            assert acc - accuracy(mv.labels_, truth) >= 0.15
        if n == 5000:
            ds = create("mm-ds").fit(df)
            assert confusion_error(conf, ds.confusion_) <= errs[n] + 0.01  # T5
            assert accuracy(ds.labels_, truth) >= acc - 0.005
            tr = ds.loss_history_
            assert all(b >= a - 1e-9 * abs(a) for a, b in itertools.pairwise(tr))
    return errs


@pytest.mark.parametrize("seed", [0])
def test_t4_t5_finite_sample_accuracy(seed):
    _check_t4(seed)


@pytest.mark.slow
def test_t4_many_seeds_errors_decrease_with_n():
    errs = [_check_t4(seed) for seed in range(1, 5)]
    means = {n: np.mean([e[n] for e in errs]) for n in (1000, 5000, 20000)}
    assert means[1000] > means[5000] > means[20000]


def test_t5_permutation_equivariance_and_permuted_init():
    df, truth, conf, pi = _t4_data(3, 3000)
    sigma = np.array([2, 0, 3, 1])
    df_p = df.assign(label=sigma[df["label"].to_numpy()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        a = create("mm-ds").fit(df)
        b = create("mm-ds").fit(df_p)
    np.testing.assert_array_equal(sigma[a.labels_.to_numpy()], b.labels_.reindex(a.labels_.index).to_numpy())
    # Γ rows and columns permuted the same way (package layout: workers × true × reported)
    np.testing.assert_allclose(b.confusion_[:, sigma][:, :, sigma], a.confusion_, atol=1e-4)  # up to EM tolerance
    # a column-permuted start followed by the As2 fix gives the same estimate
    resp = Responses.from_frame(df)
    F = resp.dense_matrix()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        r = moment_matching(F, 4)
    from fusion_core.methods.moment_matching import solve_moments

    g, p, _, _, _ = solve_moments(r.moments, r.gamma[:, :, sigma], r.class_prior[sigma])
    g, p, _ = fix_permutation_as2(g, p)
    np.testing.assert_allclose(g, r.gamma, atol=1e-4)  # same fixed point, up to the stopping tolerance


def test_missing_responses_and_fallback():
    df, truth, conf, pi = _t4_data(4, 4000)
    rng = np.random.default_rng(0)
    sparse = df[rng.random(len(df)) < 0.5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        mm = create("mm").fit(sparse)
    assert accuracy(mm.labels_, truth) > accuracy(create("mv").fit(sparse).labels_, truth)
    # K = 2 with two annotators: no triples, MM falls back to the MV start with a warning (P15)
    tiny = pd.DataFrame({"task": [0, 0, 1, 1, 2, 2], "worker": ["a", "b"] * 3, "label": [0, 0, 1, 1, 0, 1]})
    with pytest.warns(AggregationWarning, match="not identifiable"):
        est = create("mm").fit(tiny)
    assert est.result_.details["mm_fallback"] is True


def test_sparse_moments_use_their_own_support():
    rng = np.random.default_rng(5)
    k, m, n = 3, 4, 400
    F = rng.integers(0, k, size=(m, n))
    F[rng.random((m, n)) < 0.4] = -1
    mom = compute_moments(F, k, min_pair_support=1, min_triple_support=1)
    # first order: over the items each learner labelled
    for a in range(m):
        seen = F[a] >= 0
        np.testing.assert_allclose(mom.mu[a], np.bincount(F[a, seen], minlength=k) / seen.sum())
    # pairs and triples: over the items all of them labelled
    for p, (a, b) in enumerate(mom.pair):
        both = (F[a] >= 0) & (F[b] >= 0)
        expect = np.zeros((k, k))
        np.add.at(expect, (F[a, both], F[b, both]), 1.0 / both.sum())
        np.testing.assert_allclose(mom.S[p], expect)
        assert mom.pair_support[p] == both.sum()
    assert len(mom.triple) == 4  # C(4, 3)
    for q, (a, b, c) in enumerate(mom.triple):
        allm = (F[a] >= 0) & (F[b] >= 0) & (F[c] >= 0)
        expect = np.zeros((k, k, k))
        np.add.at(expect, (F[a, allm], F[b, allm], F[c, allm]), 1.0 / allm.sum())
        np.testing.assert_allclose(mom.T3[q], expect)
    # minimum support drops thinly co-labelled pairs/triples (spec §2.2.6)
    strict = compute_moments(F, k, min_pair_support=10_000, min_triple_support=10_000)
    assert len(strict.pair) == 0 and len(strict.triple) == 0


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_rows = st.lists(
    st.tuples(st.integers(0, 12), st.sampled_from(["w1", "w2", "w3", "w4"]), st.sampled_from(["a", "b", "c"])),
    min_size=4,
    max_size=50,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_rows, st.sampled_from(["mm", "mm-ds"]))
def test_random_sparse_data_fit_or_explain(data, method):
    df = pd.DataFrame(data, columns=["task", "worker", "label"]).drop_duplicates(["task", "worker"])
    est = fit_or_explain(df, method, ignore=AggregationWarning)
    if est is None:
        return
    assert np.allclose(est.confusion_.sum(axis=2), 1)


def test_as1_pair_residual_flags_copying_annotators():
    gamma, pi, patterns, prob = _exact_pattern_problem(0)
    clean = moment_matching(patterns, 3, weights=prob, max_iter=3000, tol=1e-12)
    from fusion_core.methods.moment_matching import pair_residuals

    base = pair_residuals(clean.moments, clean.gamma, clean.class_prior)
    assert np.nanmax(base) < 1e-4  # As1 holds: every pair is fitted
    # learner 4 copies learner 0 (exact population weights): an As1 violation the fit cannot absorb
    four = np.array(list(itertools.product(range(3), repeat=4))).T
    p4 = (pi[None, :] * np.prod(gamma[np.arange(4)[:, None], four, :], axis=0)).sum(axis=1)
    copied = np.vstack([four, four[:1]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        bad = moment_matching(copied, 3, weights=p4, max_iter=3000, tol=1e-12)
    res = pair_residuals(bad.moments, bad.gamma, bad.class_prior)
    assert res[0] > 10 * np.nanmax(base) and res[4] > 10 * np.nanmax(base)
    # (the fit spreads the misfit over other pairs, so this flags that As1 fails, not always which pair)


def test_gold_labels_are_clamped():
    df, truth, conf, pi = _t4_data(5, 1500)
    gold = truth.iloc[::5]
    rest = truth.index.difference(gold.index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        for name in ("mm", "mm-ds"):
            free = create(name).fit(df)
            est = create(name).fit(df, true_labels=gold)
            np.testing.assert_array_equal(est.probas_.loc[gold.index].to_numpy().max(axis=1), 1.0)
            assert (est.labels_.loc[gold.index] == gold).all()
            assert accuracy(est.labels_.loc[rest], truth) >= accuracy(free.labels_.loc[rest], truth) - 0.005


def test_out_of_range_parameters_are_refused():
    from fusion_core.errors import UserInputError

    bad = [
        ("mm", {"min_pair_support": 0}),
        ("mm", {"min_triple_support": 2.5}),
        ("mm", {"max_iter": 0}),
        ("mm", {"n_restarts": -1}),
        ("mm", {"item_weights": [1.0, 2.0]}),
        ("mm", {"item_weights": {0: float("nan")}}),
        ("mm-ds", {"em_max_iter": 0}),
        ("mm-ds", {"em_tol": -1e-3}),
    ]
    for name, params in bad:
        with pytest.raises(UserInputError, match=next(iter(params))):
            create(name, **params)
    assert create("mm", min_pair_support=None, min_triple_support=5).min_triple_support == 5
