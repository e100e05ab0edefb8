"""context-em (spec context.md §14 oracles O1–O26; many-seed versions are marked slow)."""

from __future__ import annotations

import itertools
import warnings
from functools import cache

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

from fusion_core.errors import UserInputError
from fusion_core.methods import DawidSkene, MajorityVote
from fusion_core.methods.context import ContextEM, dp_metric, lipschitz_chain_mstep, lipschitz_interpolate
from fusion_core.methods.context.em import BinaryResponses, binary_e_step
from fusion_core.methods.numerics import jit_enabled
from fusion_core.simulate.context import confusion_crowd, flat, oracle_posterior, random_smooth, table1

EPS = 1e-6


def _fit(sim, **kw) -> ContextEM:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ContextEM(**kw).fit(sim.responses, context=sim.context)


def _err(model, sim) -> float:
    return float((model.labels_.reindex(sim.truth.index) != sim.truth).mean())


@cache
def experiment(K: int, T: int, seed: int, variant: str = "paper") -> dict:
    """DP and error of context EM, context-blind EM (c = 0), majority vote and the oracle (spec §13.2)."""
    sim = table1(K, T, seed=1000 + seed)
    ctx = _fit(sim, variant=variant, lipschitz=sim.lipschitz)
    blind = _fit(sim, variant=variant, lipschitz=0.0)
    mv = MajorityVote(tie_break="random", random_state=seed).fit(sim.responses)
    p0, p1 = sim.p0, sim.p1
    orc = (oracle_posterior(sim) > 0.5).astype(int)
    return {
        "dp_ctx": dp_metric(ctx, p0, p1),
        "dp_blind": dp_metric(blind, p0, p1),
        "err_ctx": _err(ctx, sim),
        "err_blind": _err(blind, sim),
        "err_maj": float((mv.labels_.reindex(sim.truth.index) != sim.truth).mean()),
        "err_oracle": float((orc != sim.truth.to_numpy()).mean()),
        "gap": ctx.mstep_gap_,
        "fallbacks": ctx.n_mstep_fallbacks_,
    }


def mean(K, T, seeds, key, variant="paper"):
    return float(np.mean([experiment(K, T, s, variant)[key] for s in seeds]))


# ------------------------------------------------------------------ O1, O2: E-step
def _random_binary(rng, K, T, p_fill=1.0):
    item = np.repeat(np.arange(T), K)
    worker = np.tile(np.arange(K), T)
    keep = rng.uniform(size=len(item)) < p_fill
    item, worker = item[keep], worker[keep]
    y = rng.integers(0, 2, len(item)).astype(np.int8)
    pid = worker * T + item  # one pair per response (every item its own level)
    uniq, pid = np.unique(pid, return_inverse=True)
    return BinaryResponses(item, y, pid, T), len(uniq)


def test_o1_estep_matches_brute_force_bayes():
    rng = np.random.default_rng(1)
    K, T = 3, 5
    data, npair = _random_binary(rng, K, T)
    P = rng.uniform(0.05, 0.95, size=(2, npair))
    phi1 = rng.uniform(0.1, 0.9, T)
    post, _ = binary_e_step(data, P, np.log(np.column_stack([1 - phi1, phi1])))
    for t in range(T):
        sel = data.item == t
        lik = []
        for i in (0, 1):
            p = P[i][data.pid[sel]]
            lik.append(np.prod(np.where(data.y[sel] == 1, p, 1 - p)) * (phi1[t] if i else 1 - phi1[t]))
        assert abs(post[t, 1] - lik[1] / (lik[0] + lik[1])) < 1e-12
    # no underflow at the floor and with K = 200
    big, npair = _random_binary(rng, 200, 4)
    Pb = np.vstack([np.full(npair, EPS), np.full(npair, 1 - EPS)])
    pb, lz = binary_e_step(big, Pb, np.log([0.5, 0.5]))
    assert np.all(np.isfinite(pb)) and np.all(np.isfinite(lz))


def test_o2_first_estep_is_soft_majority():
    sim = table1(4, 60, seed=3)
    m = _fit(sim, variant="paper", n_iter=1, lipschitz=sim.lipschitz)
    df = sim.responses
    d = df.groupby("task")["label"].agg(lambda s: int((s == 1).sum() - (s == 0).sum()))
    expect = 1.5 * 4.0**d / (1 + 1.5 * 4.0**d)
    got = m.probas_[1].reindex(expect.index)
    assert np.max(np.abs(got.to_numpy() - expect.to_numpy())) < 1e-12


# ------------------------------------------------------------------ O3, O4: M-step solver
def _random_program(rng, U, c, ties=True):
    x = np.sort(rng.uniform(0, 1, U))
    if ties and U > 3:
        x[1] = x[0] + 1e-3  # near tie
    A = rng.integers(0, 6, U).astype(float)
    B = rng.integers(0, 6, U).astype(float)
    zero = (A + B) == 0
    A[zero] = 1.0
    A[rng.uniform(size=U) < 0.2] = 0.0  # box-active points
    B[(A + B) == 0] = 1.0
    h = np.zeros(U)
    h[:-1] = c * np.diff(x)
    return x, A, B, h


def _pairwise_reference(x, A, B, c):
    """Full pairwise form (14) by SLSQP with the analytic gradient, two starts, best kept (spec §6.7)."""
    U = len(x)
    li, lj = np.triu_indices(U, 1)
    rho = c * (x[lj] - x[li])
    G = np.zeros((len(li), U))
    G[np.arange(len(li)), li] = 1
    G[np.arange(len(li)), lj] = -1
    cons = [
        {"type": "ineq", "fun": lambda p: rho - G @ p, "jac": lambda p: -G},
        {"type": "ineq", "fun": lambda p: rho + G @ p, "jac": lambda p: G},
    ]
    f = lambda p: -(A * np.log(p) + B * np.log1p(-p)).sum()
    g = lambda p: -(A / p - B / (1 - p))
    best = None
    for start in (np.full(U, 0.5), np.clip(A / (A + B), 0.1, 0.9).mean() * np.ones(U)):
        r = minimize(
            f,
            start,
            jac=g,
            bounds=[(EPS, 1 - EPS)] * U,
            constraints=cons,
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 1000},
        )
        if best is None or r.fun < best.fun:
            best = r
    return best.x, -best.fun


def _objective(A, B, p):
    return float((A * np.log(p) + B * np.log1p(-p)).sum())


def test_o3_closed_forms():
    rng = np.random.default_rng(3)
    x, A, B, _ = _random_program(rng, 12, 1.0, ties=False)
    c = 1.0 / np.diff(x).min() + 1.0
    h = np.r_[c * np.diff(x), 0.0]
    p, info = lipschitz_chain_mstep(A, B, h, np.array([0]))
    assert np.max(np.abs(p - np.clip(A / (A + B), EPS, 1 - EPS))) < 1e-8
    assert info.iterations == 0
    # c = 0: the pooled Dawid–Skene estimate (through the estimator's layout: a constant curve)
    sim = table1(4, 80, seed=5)
    m = _fit(sim, variant="paper", lipschitz=0.0, n_iter=2)
    cur = m.curves_
    assert (cur.groupby("worker")["detection"].nunique() == 1).all()
    assert (cur.groupby("worker")["false_alarm"].nunique() == 1).all()


@pytest.mark.slow
@pytest.mark.parametrize("n_programs", [4, pytest.param(60, marks=pytest.mark.slow)])
def test_o4_mstep_optimal_and_feasible(n_programs):
    rng = np.random.default_rng(4)
    for k in range(n_programs):
        c = [0.3, 2.0, 10.0][k % 3]
        U = int(rng.integers(3, 31))
        x, A, B, h = _random_program(rng, U, c)
        p, info = lipschitz_chain_mstep(A, B, h, np.array([0]))
        viol = max(0.0, np.max(np.abs(np.diff(p)) - h[:-1]), np.max(EPS - p), np.max(p - (1 - EPS)))
        assert viol <= 1e-9
        pref, fref = _pairwise_reference(x, A, B, c)
        f = _objective(A, B, p)
        assert f >= fref - 1e-8 * abs(fref), (k, f, fref)
        assert np.max(np.abs(p - pref)) < 1e-4 or f > fref + 1e-8 * abs(fref)
        assert info.gap <= 1e-8


def test_o4_batched_equals_separate():
    rng = np.random.default_rng(44)
    progs = [_random_program(rng, int(rng.integers(3, 25)), 2.0) for _ in range(6)]
    A = np.concatenate([q[1] for q in progs])
    B = np.concatenate([q[2] for q in progs])
    h = np.concatenate([q[3] for q in progs])
    starts = np.r_[0, np.cumsum([len(q[0]) for q in progs])[:-1]]
    p, _ = lipschitz_chain_mstep(A, B, h, starts)
    for s, q in zip(starts, progs):
        ps, _ = lipschitz_chain_mstep(q[1], q[2], q[3], np.array([0]))
        assert np.max(np.abs(p[s : s + len(ps)] - ps)) < 1e-6


def _hard_chains(rng, n_chains, length):
    """One-vs-rest-like chain programs (one response per level: A or B zero, weights γ ∈ (0, 1)) on Cauchy
    contexts, so most links are tiny (≈ 1e-9–1e-5) and a few wide: the pathological inputs of issue 11."""
    blocks = []
    for _ in range(n_chains):
        U = int(rng.integers(length // 2, length + 1))
        x = np.sort(rng.standard_cauchy(U) * 1e6)
        x = x[np.r_[True, np.diff(x) > 0]]
        U = len(x)
        w = rng.uniform(1e-6, 1.0, U) ** 3
        y = rng.uniform(size=U) < rng.uniform(0.02, 0.98)
        h = np.r_[rng.uniform(1e-12, 1e-9) * np.diff(x), 0.0]
        blocks.append((np.where(y, w, 0.0), np.where(y, 0.0, w), h))
    A, B, h = (np.concatenate([b[j] for b in blocks]) for j in range(3))
    starts = np.r_[0, np.cumsum([len(b[0]) for b in blocks])[:-1]]
    return A, B, h, starts


@pytest.mark.slow
@pytest.mark.skipif(not jit_enabled(), reason="the dynamic programme is compiled by numba")
def test_dynamic_programme_matches_pairwise_reference():
    """The compiled dynamic programme (chain.dynamic_chain_mstep) solves the random programs of O4 (ties, box-active
    levels, c ∈ {0.3, 2, 10}) in one batch: feasible, certified, and no worse than the full pairwise form by SLSQP."""
    from fusion_core.methods.context.chain import dynamic_chain_mstep

    rng = np.random.default_rng(45)
    progs = [_random_program(rng, int(rng.integers(3, 31)), [0.3, 2.0, 10.0][k % 3]) for k in range(12)]
    A, B, h = (np.concatenate([q[j] for q in progs]) for j in (1, 2, 3))
    starts = np.r_[0, np.cumsum([len(q[0]) for q in progs])[:-1]]
    p, solved, gap = dynamic_chain_mstep(A, B, h, starts, EPS)
    assert solved.all() and gap.max() <= 1e-8
    for k, (s, (x, a, b, hk)) in enumerate(zip(starts, progs)):
        pk = p[s : s + len(x)]
        assert np.all(np.abs(np.diff(pk)) <= hk[:-1] * (1 + 1e-12) + 1e-15) and pk.min() >= EPS and pk.max() <= 1 - EPS
        _, fref = _pairwise_reference(x, a, b, [0.3, 2.0, 10.0][k % 3])
        assert _objective(a, b, pk) >= fref - 1e-8 * abs(fref), k


@pytest.mark.skipif(not jit_enabled(), reason="the dynamic programme is compiled by numba")
def test_dynamic_programme_on_tiny_links_agrees_with_interior_point(monkeypatch):
    """On the pathological family (tiny links, single-response levels, long chains) the dynamic programme
    solves ≥ 95 % of the chains itself, each feasible and at least as good as the interior-point optimum; the M-step
    hands the rest to the interior point, and with the dynamic programme over budget everywhere the M-step is the
    interior point's alone."""
    from fusion_core.methods.context import chain
    from fusion_core.methods.context.interior_point import Chains

    rng = np.random.default_rng(46)
    A, B, h, starts = _hard_chains(rng, 80, 120)
    ch = Chains(starts, len(A))
    p, solved, _ = chain.dynamic_chain_mstep(A, B, h, starts, EPS)
    assert solved.mean() >= 0.95
    monkeypatch.setattr(chain, "DP_MIN_LEVELS", 10**9)
    ip, ip_info = chain.lipschitz_chain_mstep(A, B, h, starts)
    assert ip_info.n_dynamic == 0 and ip_info.iterations > 0
    f_dp = chain.chain_objective(A, B, p, starts)
    f_ip = chain.chain_objective(A, B, ip, starts)
    assert np.all(f_dp[solved] >= f_ip[solved] - 1e-9 * (1 + np.abs(f_ip[solved])))
    d = np.abs(np.diff(p)) - h[:-1]
    assert d[ch.link[:-1] & solved[ch.chain][:-1]].max() <= 1e-15
    monkeypatch.setattr(chain, "DP_MIN_LEVELS", 1)
    both, info = chain.lipschitz_chain_mstep(A, B, h, starts)
    assert info.n_dynamic == int(solved.sum()) and info.gap <= 1e-8
    f_both = chain.chain_objective(A, B, both, starts)
    assert np.all(f_both >= f_ip - 1e-8 * (1 + np.abs(f_ip)))
    monkeypatch.setattr(chain, "DP_BUDGET", 0)  # every chain over budget: the interior point solves them all
    none, info = chain.lipschitz_chain_mstep(A, B, h, starts)
    assert info.n_dynamic == 0 and np.array_equal(none, ip)


# ------------------------------------------------------------------ O5–O7
def test_o5_certificate_in_em_fits():
    for seed in range(3):
        r = experiment(4, 400, seed)
        assert r["gap"] <= 1e-8
        assert r["fallbacks"] == 0


def test_o6_grouping_replicated_items():
    sim = table1(4, 60, seed=6)
    df = sim.responses
    rep = pd.concat([df.assign(task=df["task"] + f"_{r}") for r in range(3)], ignore_index=True)
    ctx = sim.context
    ctx3 = pd.concat([pd.Series(ctx.to_numpy(), index=ctx.index + f"_{r}") for r in range(3)])
    c = sim.lipschitz
    m1 = ContextEM(lipschitz=c, tol=0, max_iter=15).fit(
        df.assign(task=df["task"] + "_0"), context=pd.Series(ctx.to_numpy(), index=ctx.index + "_0")
    )
    m3 = ContextEM(lipschitz=c, tol=0, max_iter=15).fit(rep, context=ctx3)
    g1 = m1.probas_[1]
    for r in range(3):
        g = m3.probas_[1]
        g = g[[t.endswith(f"_{r}") for t in g.index]]
        g.index = [t.rsplit("_", 1)[0] + "_0" for t in g.index]
        assert np.max(np.abs(g.reindex(g1.index).to_numpy() - g1.to_numpy())) < 1e-8
    x = np.linspace(0, 1, 50)
    a0, a1 = m1.interpolate(x)
    b0, b1 = m3.interpolate(x)
    assert np.max(np.abs(a0 - b0)) < 1e-8 and np.max(np.abs(a1 - b1)) < 1e-8


@pytest.mark.parametrize("seeds", [range(2), pytest.param(range(10), marks=pytest.mark.slow)])
def test_o7_em_monotone(seeds):
    for s in seeds:
        sim = table1(4, 100, seed=1000 + s)
        for kw in ({"variant": "shared_prior", "tol": 0.0, "max_iter": 30}, {"variant": "paper", "n_iter": 8}):
            m = _fit(sim, lipschitz=sim.lipschitz, **kw)
            tr = np.asarray(m.loss_history_)
            assert np.all(np.diff(tr) >= -1e-8 * np.abs(tr[1:])), (s, kw)


# ------------------------------------------------------------------ O8: interpolation
def test_o8_interpolation_properties():
    sim = table1(4, 100, seed=1001)
    m = _fit(sim, lipschitz=sim.lipschitz)
    cur = m.curves_
    c = sim.lipschitz
    grid = np.linspace(-0.2, 1.2, 701)
    for k, w in enumerate(m.workers_):
        sel = cur[cur["worker"] == w]
        xs, ps = sel["context"].to_numpy(), sel["detection"].to_numpy()
        at = lipschitz_interpolate(xs, ps, c[1, k], xs)
        assert np.max(np.abs(at - ps)) < 1e-12
        g = lipschitz_interpolate(xs, ps, c[1, k], grid)
        assert np.all((g >= 0) & (g <= 1))
        slope = np.abs(np.diff(g)) / np.diff(grid)
        assert slope.max() <= c[1, k] + 1e-9
        # scan version = O(U·G) definition; lower ≤ upper envelope for the feasible fit
        d = np.abs(grid[:, None] - xs[None, :])
        lower = np.max(ps[None, :] - c[1, k] * d, axis=1)
        upper = np.min(ps[None, :] + c[1, k] * d, axis=1)
        assert np.max(np.abs(g - np.clip(np.minimum(lower, upper), 0, 1))) < 1e-12
        assert np.all(lower <= upper + 1e-9)
        mid = lipschitz_interpolate(xs, ps, c[1, k], grid, mode="mid")
        assert np.max(np.abs(mid - np.clip((lower + upper) / 2, 0, 1))) < 1e-12


# ------------------------------------------------------------------ O9–O11: symmetries, reduction to DS
def test_o9_flip_equivariance():
    sim = table1(4, 150, seed=1009)
    c = sim.lipschitz
    ctx = sim.context
    m = ContextEM(lipschitz=c).fit(sim.responses, context=ctx)
    flipped = sim.responses.assign(label=1 - sim.responses["label"])
    mf = ContextEM(lipschitz=c[::-1]).fit(flipped, context=ctx)
    a, b = m.curves_, mf.curves_  # fitted values at the observed levels (eq. (19) itself is not flip-symmetric)
    assert np.max(np.abs(b["detection"].to_numpy() - (1 - a["false_alarm"].to_numpy()))) < 1e-6
    assert np.max(np.abs(b["false_alarm"].to_numpy() - (1 - a["detection"].to_numpy()))) < 1e-6
    assert (mf.labels_ == 1 - m.labels_).all()


def test_o10_permutation_equivariance():
    sim = table1(4, 120, seed=1010)
    c = sim.lipschitz
    ctx = sim.context
    m = ContextEM(lipschitz=c).fit(sim.responses, context=ctx)
    rng = np.random.default_rng(0)
    perm_rows = sim.responses.sample(frac=1.0, random_state=1)
    rename = {f"a{k + 1}": f"b{j}" for k, j in enumerate(rng.permutation(4))}
    perm = perm_rows.assign(worker=perm_rows["worker"].map(rename))
    inv = {v: k for k, v in rename.items()}
    order = [f"b{j}" for j in range(4)]
    c_perm = np.column_stack([c[:, int(inv[b][1:]) - 1] for b in order])
    mp = ContextEM(lipschitz=c_perm).fit(perm, context=ctx.sample(frac=1.0, random_state=2))
    assert np.max(np.abs(mp.probas_.reindex(m.probas_.index).to_numpy() - m.probas_.to_numpy())) < 1e-10
    x = np.linspace(0, 1, 31)
    for b in order:
        a = m.interpolate(x, worker=inv[b])
        bb = mp.interpolate(x, worker=b)
        assert np.max(np.abs(a[0] - bb[0])) < 1e-10 and np.max(np.abs(a[1] - bb[1])) < 1e-10


def test_o11_c0_is_dawid_skene():
    sim = table1(4, 200, seed=1011)
    n = 12  # iteration by iteration: plain EM (SQUAREM's iterates differ; its fixed point is checked below)
    m = ContextEM(lipschitz=0.0, tol=0.0, max_iter=n, accelerate=False).fit(sim.responses, context=sim.context)
    # DS from the context model's first E-step (soft majority 4^d / (1 + 4^d) under the init 0.2/0.8, π = 0.5)
    df = sim.responses
    d = df.groupby("task")["label"].agg(lambda s: int((s == 1).sum() - (s == 0).sum()))
    g = 4.0**d / (1 + 4.0**d)
    init = pd.DataFrame({0: 1 - g, 1: g})
    ds = DawidSkene(init=init, tol=0.0, max_iter=n).fit(df)
    assert np.max(np.abs(ds.probas_.reindex(m.probas_.index).to_numpy() - m.probas_.to_numpy())) < 1e-8
    for k, w in enumerate(m.workers_):
        sel = m.curves_[m.curves_["worker"] == w]
        assert abs(sel["detection"].iloc[0] - ds.confusion_[k, 1, 1]) < 1e-8
        assert abs(sel["false_alarm"].iloc[0] - ds.confusion_[k, 0, 1]) < 1e-8


def test_accelerated_c0_reaches_dawid_skene_fixed_point():
    """SQUAREM (the default) with c = 0 converges to the fixed point of plain DS from the same start, in fewer
    M-steps, with a log-likelihood at least plain EM's."""
    sim = table1(4, 200, seed=1011)
    df = sim.responses
    d = df.groupby("task")["label"].agg(lambda s: int((s == 1).sum() - (s == 0).sum()))
    g = 4.0**d / (1 + 4.0**d)
    ds = DawidSkene(init=pd.DataFrame({0: 1 - g, 1: g}), tol=1e-13, max_iter=5000).fit(df)
    fits = {
        acc: ContextEM(lipschitz=0.0, tol=1e-13, max_iter=5000, accelerate=acc).fit(df, context=sim.context)
        for acc in (False, True)
    }
    fast, plain = fits[True], fits[False]
    assert fast.converged_ and fast.n_iter_ < plain.n_iter_
    assert fast.loss_history_[-1] >= plain.loss_history_[-1] - 1e-9 * abs(plain.loss_history_[-1])
    assert np.max(np.abs(ds.probas_.reindex(fast.probas_.index).to_numpy() - fast.probas_.to_numpy())) < 1e-5
    for k, w in enumerate(fast.workers_):
        sel = fast.curves_[fast.curves_["worker"] == w]
        assert abs(sel["detection"].iloc[0] - ds.confusion_[k, 1, 1]) < 1e-5
        assert abs(sel["false_alarm"].iloc[0] - ds.confusion_[k, 0, 1]) < 1e-5


@pytest.mark.parametrize("seeds", [range(3), pytest.param(range(10), marks=pytest.mark.slow)])
def test_accelerated_em_matches_plain_em_at_convergence(seeds):
    """SQUAREM with its monotone safeguard: a non-decreasing trace, a final log-likelihood at least plain EM's at
    convergence (to the stopping tolerance), fewer M-steps in total, and the same fused labels up to a few
    near-ties (binary Table 1 data, K = 4, T = 400, and a 3-label one-vs-rest set)."""
    tol = 1e-6
    steps = {False: 0, True: 0}
    for s in seeds:
        sim = table1(4, 400, seed=1000 + s)
        fits = {acc: _fit(sim, lipschitz=sim.lipschitz, accelerate=acc) for acc in (False, True)}
        fast, plain = fits[True], fits[False]
        tr = np.asarray(fast.loss_history_)
        assert np.all(np.diff(tr) >= -1e-8 * np.abs(tr[1:])), s
        assert fast.converged_
        assert tr[-1] >= plain.loss_history_[-1] - 10 * tol * abs(tr[-1]), s
        assert (fast.labels_ != plain.labels_).mean() <= 0.01, s
        for acc, m in fits.items():
            steps[acc] += m.n_iter_
    assert steps[True] < steps[False]


def test_accelerated_one_vs_rest_at_least_plain_likelihood():
    """One-vs-rest (lockstep runs): every label's accelerated run ends at a log-likelihood at least plain EM's."""
    rng = np.random.default_rng(12)
    T, K, C = 300, 4, 3
    x = rng.uniform(0, 1, T)
    y = rng.integers(0, C, T)
    acc = 0.5 + 0.4 * np.where(np.arange(K)[None, :] % 2 == 0, x[:, None], 1 - x[:, None])
    lab = np.where(rng.uniform(size=(T, K)) < acc, y[:, None], (y[:, None] + rng.integers(1, C, (T, K))) % C)
    df = pd.DataFrame({"task": np.repeat(np.arange(T), K), "worker": np.tile(np.arange(K), T), "label": lab.ravel()})
    ctx = pd.Series(x, index=np.arange(T))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = {acc: ContextEM(swing=1.0, tol=1e-8, accelerate=acc).fit(df, context=ctx) for acc in (False, True)}
    fast, plain = fits[True], fits[False]
    assert fast.converged_ and plain.converged_
    assert fast.loss_history_[-1] >= plain.loss_history_[-1] - 1e-6 * abs(plain.loss_history_[-1])
    assert (fast.labels_ == plain.labels_).mean() >= 0.99
    assert (fast.labels_.to_numpy() == y).mean() >= 0.8


# ------------------------------------------------------------------ O12–O23: recovery on Table 1
SEEDS_O12 = [range(5), pytest.param(range(10), marks=pytest.mark.slow)]


@pytest.mark.parametrize("seeds", SEEDS_O12)
def test_o12_recovery_beats_context_blind(seeds):
    dp_ctx, dp_blind = mean(4, 400, seeds, "dp_ctx"), mean(4, 400, seeds, "dp_blind")
    assert dp_ctx <= 0.25 and dp_blind >= 0.28 and dp_ctx <= dp_blind - 0.08


@pytest.mark.parametrize("seeds", SEEDS_O12)
def test_o14_fusion_error(seeds):
    e = {k: mean(4, 400, seeds, k) for k in ("err_ctx", "err_maj", "err_blind", "err_oracle")}
    assert e["err_ctx"] <= e["err_maj"] - 0.025
    assert e["err_ctx"] <= e["err_blind"]
    assert e["err_ctx"] - e["err_oracle"] <= 0.03


@pytest.mark.parametrize("seeds", [range(3), pytest.param(range(6), marks=pytest.mark.slow)])
def test_o15_more_annotators_help(seeds):
    assert mean(8, 400, seeds, "err_ctx") <= 0.04
    assert mean(8, 400, seeds, "err_ctx") <= mean(8, 400, seeds, "err_maj")
    assert mean(8, 400, seeds, "dp_ctx") <= 0.20


@pytest.mark.slow
def test_o13_o16_more_data_helps():
    seeds = range(6)
    d100, d400, d1000 = (mean(4, T, seeds, "dp_ctx") for T in (100, 400, 1000))
    assert d1000 <= 0.20
    assert d100 > d400 > d1000


def _tv(model):
    cur = model.curves_.sort_values(["worker", "context"])
    return (
        cur.groupby("worker").apply(
            lambda g: np.abs(np.diff(g["detection"])).sum() + np.abs(np.diff(g["false_alarm"])).sum(),
            include_groups=False,
        )
        / 2
    )


def test_o17_smoothness_tradeoff():
    tv, dp = {}, {}
    for c in (0.2, 1.7, 3.2):
        tvs, dps = [], []
        for s in range(6):
            sim = table1(4, 100, seed=1000 + s)
            m = _fit(sim, variant="paper", lipschitz=c)
            tvs.append(_tv(m).mean())
            dps.append(dp_metric(m, sim.p0, sim.p1))
        tv[c], dp[c] = np.mean(tvs), np.mean(dps)
    assert tv[0.2] < tv[1.7] < tv[3.2]
    assert dp[1.7] <= dp[0.2] and dp[1.7] <= dp[3.2]


def test_o18_no_harm_when_flat():
    errs_c, errs_b, dps = [], [], []
    for s in range(8):
        sim = flat(4, 400, seed=s)
        m = _fit(sim, variant="paper", lipschitz=0.5)
        b = _fit(sim, variant="paper", lipschitz=0.0)
        errs_c.append(_err(m, sim))
        errs_b.append(_err(b, sim))
        dps.append(dp_metric(m, sim.p0, sim.p1))
    assert np.mean(errs_c) <= np.mean(errs_b) + 0.01
    assert np.mean(dps) <= 0.25


@pytest.mark.parametrize("seeds", [range(2), pytest.param(range(5), marks=pytest.mark.slow)])
def test_o19_posterior_sharpening_paper_variant(seeds):
    res = {}
    for N in (1, 5, 10, 20):
        sharp, sat = [], []
        for s in seeds:
            sim = table1(4, 100, seed=1000 + s)
            m = _fit(sim, variant="paper", n_iter=N, lipschitz=sim.lipschitz)
            phi = m.raw_phi_.to_numpy()
            sharp.append(np.mean(np.abs(phi - 0.5)))
            sat.append(np.mean((phi <= 0.01) | (phi >= 0.99)))
        res[N] = (np.mean(sharp), np.mean(sat))
    s = [res[N][0] for N in (1, 5, 10, 20)]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(s))
    assert res[1][1] <= 0.5 and res[5][1] >= 0.9 and res[20][1] >= 0.99


def test_o20_total_variation_bound():
    sim = table1(4, 100, seed=1020)
    m = _fit(sim, variant="paper", lipschitz=0.2)
    cur = m.curves_.sort_values(["worker", "context"])
    span = sim.context.max() - sim.context.min()
    for _, g in cur.groupby("worker"):
        for col in ("detection", "false_alarm"):
            assert np.abs(np.diff(g[col])).sum() <= 0.2 * span + 1e-9


@pytest.mark.parametrize("seeds", SEEDS_O12)
def test_o21_shared_prior_quality(seeds):
    dp = mean(4, 400, seeds, "dp_ctx", "shared_prior")
    err = mean(4, 400, seeds, "err_ctx", "shared_prior")
    assert dp <= 0.22
    assert err <= mean(4, 400, seeds, "err_maj", "shared_prior") - 0.03
    assert err <= mean(4, 400, seeds, "err_blind", "shared_prior")
    assert dp <= mean(4, 400, seeds, "dp_ctx", "paper") + 0.01


@pytest.mark.slow
def test_o22_shared_prior_more_data():
    assert mean(4, 1000, range(6), "dp_ctx", "shared_prior") <= 0.14
    assert mean(8, 400, range(6), "err_ctx", "shared_prior") <= 0.035


def _sparse_run(seed):
    sim = table1(8, 2000, seed=1000 + seed, responses_per_item=3)
    m = _fit(sim, lipschitz=sim.lipschitz)
    b = _fit(sim, lipschitz=0.0)
    mv = MajorityVote(tie_break="random", random_state=seed).fit(sim.responses)
    p0, p1 = sim.p0, sim.p1
    return (
        _err(m, sim),
        _err(b, sim),
        float((mv.labels_.reindex(sim.truth.index) != sim.truth).mean()),
        dp_metric(m, p0, p1),
        dp_metric(b, p0, p1),
    )


@pytest.mark.parametrize("seeds", [range(1), pytest.param(range(6), marks=pytest.mark.slow)])
def test_o23_sparse_extension(seeds):
    r = np.mean([_sparse_run(s) for s in seeds], axis=0)
    err_c, err_b, err_m, dp_c, dp_b = r
    assert err_c <= err_b - 0.008 and err_c <= err_m - 0.008
    assert dp_c <= 0.16 and dp_b >= 0.24


@pytest.mark.slow
def test_o24_binning():
    for seed in (1, 2):
        sim = table1(8, 10000, seed=seed)
        a = _fit(sim)
        b = _fit(sim, max_context_levels=None)
        assert (a.labels_ == b.labels_).mean() >= 0.995
        p0, p1 = sim.p0, sim.p1
        assert abs(dp_metric(a, p0, p1) - dp_metric(b, p0, p1)) <= 0.005


# ------------------------------------------------------------------ O26: inputs, extensions
def test_o26_input_validation():
    sim = table1(4, 50, seed=7)
    df = sim.responses
    bad = df.copy()
    bad.loc[bad.index[0], "context"] = 5.0
    with pytest.raises(UserInputError, match="constant within a task"):
        ContextEM().fit(bad, context="context")
    ctx = sim.context.copy()
    ctx.iloc[:3] = np.nan
    with pytest.raises(UserInputError, match="3 tasks have no context"):
        ContextEM().fit(df, context=ctx)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = ContextEM(drop_missing_context=True).fit(df, context=ctx)
    assert any("dropped 3 tasks" in w for w in m.warnings_)
    with pytest.raises(UserInputError, match="one value per task"):
        ContextEM().fit(df, context=pd.concat([sim.context, sim.context.iloc[:2] + 1]))
    with pytest.raises(UserInputError, match="needs a context"):
        ContextEM().fit(df)
    one = df[df["worker"] == "a1"]
    with pytest.raises(UserInputError):
        ContextEM().fit(one, context=sim.context)
    # constant context: exactly context-blind DS (c irrelevant)
    const = pd.Series(0.3, index=sim.context.index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mc = ContextEM(swing=2.0).fit(df, context=const)
        mb = ContextEM(lipschitz=0.0).fit(df, context=sim.context)
    assert np.max(np.abs(mc.probas_.to_numpy() - mb.probas_.to_numpy())) < 1e-10


def test_context_column_and_datetime():
    sim = table1(4, 80, seed=8)
    a = ContextEM(swing=1.0).fit(sim.responses, context="context")
    b = ContextEM(swing=1.0).fit(sim.responses, context=sim.context)
    assert np.allclose(a.probas_.to_numpy(), b.probas_.to_numpy())
    # a datetime context in days: swing is scale-free, so the fit is identical
    days = pd.Timestamp("2024-01-01") + pd.to_timedelta(sim.context * 30, unit="D")
    c = ContextEM(swing=1.0).fit(sim.responses, context=days)
    assert np.max(np.abs(c.probas_.to_numpy() - b.probas_.to_numpy())) < 1e-8
    curves = b.result_.context
    assert curves.detection.shape == (4, len(curves.grid)) and not curves.categorical
    assert curves.false_alarm.shape == (4, len(curves.grid))
    assert curves.positive_label == 1 and curves.coverage.shape == (4, len(curves.grid))


def test_multiclass_one_vs_rest_beats_majority():
    """3 classes: each annotator's accuracy depends on the context (good on one half, poor on the other)."""
    rng = np.random.default_rng(11)
    T, K, C = 800, 6, 3
    x = rng.uniform(0, 1, T)
    y = rng.integers(0, C, T)
    acc = np.where((np.arange(K)[None, :] % 2 == 0), 0.35 + 0.6 * x[:, None], 0.95 - 0.6 * x[:, None])
    correct = rng.uniform(size=(T, K)) < acc
    wrong = (y[:, None] + rng.integers(1, C, (T, K))) % C
    lab = np.where(correct, y[:, None], wrong)
    df = pd.DataFrame({"task": np.repeat(np.arange(T), K), "worker": np.tile(np.arange(K), T), "label": lab.ravel()})
    ctx = pd.Series(x, index=np.arange(T))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = ContextEM(swing=1.0).fit(df, context=ctx)
    mv = MajorityVote().fit(df)
    acc_ctx = (m.labels_.to_numpy() == y).mean()
    acc_mv = (mv.labels_.to_numpy() == y).mean()
    assert acc_ctx >= acc_mv + 0.02
    assert any("one-vs-rest" in w for w in m.warnings_)
    assert m.detection_curves_.shape == (K, C, m.grid_size)


def test_random_smooth_generator_recovery():
    sim = random_smooth(6, 2000, seed=3)
    m = _fit(sim, swing=1.5)
    b = _fit(sim, swing=0.0)
    p0, p1 = sim.p0, sim.p1
    assert dp_metric(m, p0, p1) < dp_metric(b, p0, p1)


def test_swing_selection_prefers_context_when_curves_vary():
    from fusion_core.methods.context import select_swing

    sim = table1(8, 1500, seed=1003)
    table, chosen = select_swing(sim.responses, sim.context, swings=(0.0, 2.0))
    sc = table.set_index("swing")["score"]
    assert chosen == 2.0 and sc[2.0] > sc[0.0] + 0.02
    flat_sim = flat(8, 600, seed=3)
    table2, chosen2 = select_swing(flat_sim.responses, flat_sim.context, swings=(0.0, 3.0))
    assert chosen2 == 0.0  # constant curves: the smoothest setting is kept


def test_discrete_mstep_matches_pairwise_reference():
    from fusion_core.methods.context import discrete_mstep

    rng = np.random.default_rng(21)
    for k in range(8):
        U = int(rng.integers(2, 7))
        A = rng.integers(0, 8, U).astype(float)
        B = rng.integers(0, 8, U).astype(float)
        B[(A + B) == 0] = 1.0
        c = [0.0, 0.1, 0.3, 1.0][k % 4]
        p = discrete_mstep(A, B, c)
        assert p.max() - p.min() <= c + 1e-9 and np.all((p >= EPS) & (p <= 1 - EPS))
        # all pairs at distance 1 = the pairwise program with rho = c: reuse the reference on a unit-spaced line
        # with a Lipschitz constant large enough that only |p_a − p_b| ≤ c binds
        li, lj = np.triu_indices(U, 1)
        cons = [
            {"type": "ineq", "fun": lambda q: c - (q[li] - q[lj])},
            {"type": "ineq", "fun": lambda q: c + (q[li] - q[lj])},
        ]
        f = lambda q: -(A * np.log(q) + B * np.log1p(-q)).sum()
        best = min(
            (
                minimize(
                    f,
                    s0,
                    bounds=[(EPS, 1 - EPS)] * U,
                    constraints=cons,
                    method="SLSQP",
                    options={"ftol": 1e-14, "maxiter": 500},
                )
                for s0 in (np.full(U, 0.5), np.full(U, 0.3))
            ),
            key=lambda r: r.fun,
        )
        assert _objective(A, B, p) >= -best.fun - 1e-8 * abs(best.fun)


def test_categorical_context():
    """Annotators whose reliability depends on a category (e.g. the source of an item)."""
    rng = np.random.default_rng(22)
    T, K = 900, 5
    cat = rng.choice(["phone", "scan", "web"], T)
    y = (rng.uniform(size=T) < 0.5).astype(int)
    good = {"phone": [0, 1], "scan": [2, 3], "web": [4, 0]}
    lab = np.empty((T, K), int)
    for t in range(T):  # simulator loop over items (test data)
        acc = np.where(np.isin(np.arange(K), good[cat[t]]), 0.92, 0.6)
        lab[t] = np.where(rng.uniform(size=K) < acc, y[t], 1 - y[t])
    df = pd.DataFrame(
        {"task": np.repeat(np.arange(T), K), "worker": np.tile([f"a{k}" for k in range(K)], T), "label": lab.ravel()}
    )
    ctx = pd.Series(cat, index=np.arange(T))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = ContextEM(swing=1.0).fit(df, context=ctx)
        b = ContextEM(swing=0.0).fit(df, context=ctx)
    acc_m = (m.labels_.to_numpy() == y).mean()
    acc_b = (b.labels_.to_numpy() == y).mean()
    assert acc_m >= acc_b + 0.02
    assert list(m.result_.context.grid) == ["phone", "scan", "web"] and m.result_.context.categorical
    cur = m.curves_.set_index(["worker", "context"])["detection"]
    assert cur[("a2", "scan")] > cur[("a2", "phone")] + 0.15
    p0, p1 = m.interpolate(["scan", "unseen"], worker="a2")
    assert abs(p1[0] - cur[("a2", "scan")]) < 1e-12 and 0 <= p1[1] <= 1
    # swing 0.1 caps the spread between categories
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = ContextEM(swing=0.1).fit(df, context=ctx)
    spread = s.curves_.groupby("worker")["detection"].agg(lambda v: v.max() - v.min())
    assert (spread <= 0.1 + 1e-9).all()


# ------------------------------------------------------------------ gold labels (issue 10: clamped, never ignored)
def test_gold_labels_are_clamped():
    sim = table1(4, 200, seed=12)
    ctx = sim.context
    gold = sim.truth.iloc[:60]
    flipped = 1 - gold  # gold that contradicts the crowd must still win
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for variant in ("shared_prior", "paper"):
            m = ContextEM(swing=1.0, variant=variant, tol=0.0, max_iter=30).fit(
                sim.responses, context=ctx, true_labels=flipped
            )
            post = m.probas_.loc[flipped.index]
            assert (post.to_numpy() == np.eye(2)[flipped.to_numpy()]).all(), variant
            tr = np.asarray(m.loss_history_)
            assert np.all(np.diff(tr) >= -1e-8 * np.abs(tr[1:])), variant  # still EM with the gold items observed
        # every item gold and c = 0: the curves are the supervised per-annotator rates
        full = ContextEM(lipschitz=0.0).fit(sim.responses, context=ctx, true_labels=sim.truth)
    df = sim.responses.assign(y=sim.truth.reindex(sim.responses["task"]).to_numpy())
    for w, g in df.groupby("worker"):
        sel = full.curves_[full.curves_["worker"] == w]
        assert abs(sel["detection"].iloc[0] - (g.loc[g.y == 1, "label"] == 1).mean()) < 1e-9
        assert abs(sel["false_alarm"].iloc[0] - (g.loc[g.y == 0, "label"] == 1).mean()) < 1e-9
    # both multiclass modes clamp too
    cc = confusion_crowd(4, 150, 3, seed=1)
    gold3 = cc.truth.iloc[:40]
    for kw in ({}, {"multiclass": "confusion"}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m3 = ContextEM(swing=1.0, **kw).fit(cc.responses, context=cc.context, true_labels=gold3)
        assert (m3.probas_.loc[gold3.index].to_numpy() == np.eye(3)[gold3.to_numpy()]).all(), kw
    with pytest.raises(UserInputError, match="gold label"):
        ContextEM().fit(sim.responses, context=ctx, true_labels=pd.Series([7], index=[sim.truth.index[0]]))


def test_short_chains_exact_on_degenerate_corners():
    """Chains of ≤ 4 levels are solved by enumerating tight links (chain.short_chain_mstep); with A or B zero at
    a level (the corners the interior point cycled on) the result is feasible and no worse than the log-barrier
    method or a fine grid over the first level with the rest clipped greedily."""
    from fusion_core.methods.context.chain import barrier_chain, short_chain_mstep

    rng = np.random.default_rng(11)
    for n in (2, 3, 4):
        for _ in range(40):
            A = rng.integers(0, 3, n) * rng.uniform(0.01, 1.5, n)
            B = rng.integers(0, 3, n) * rng.uniform(0.01, 1.5, n)
            A[rng.integers(n)] = 0.0
            B[(A + B) == 0] = rng.uniform(1e-7, 0.3)
            h = np.r_[rng.uniform(1e-3, 0.6, n - 1), 0.0]
            p = short_chain_mstep(A[None], B[None], h[None], EPS)[0]
            assert np.all(np.abs(np.diff(p)) <= h[:-1] * (1 + 1e-9)) and p.min() >= EPS and p.max() <= 1 - EPS
            ref = barrier_chain(A, B, h, np.full(n, 0.5), EPS)
            assert _objective(A, B, p) >= _objective(A, B, ref) - 1e-9 * (1 + abs(_objective(A, B, ref)))
            p2, info = lipschitz_chain_mstep(A, B, h, np.array([0]))
            assert np.max(np.abs(p2 - np.clip(A / (A + B), EPS, 1 - EPS))) < 1e-12 or np.allclose(p2, p, atol=1e-12)
