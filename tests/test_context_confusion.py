"""context-em extensions: per-class confusion curves (spec context.md §9.2 option 2), coverage against the
context (§9.1 last bullet), categorical-context limits (§5.4)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

from fusion_core.errors import UserInputError
from fusion_core.methods import DawidSkene, MajorityVote
from fusion_core.methods.context import (
    ContextEM,
    categorical_simplex_mstep,
    dp_metric,
    floored_simplex,
    lipschitz_chain_mstep,
    lipschitz_simplex_mstep,
)
from fusion_core.simulate.context import confusion_crowd, table1

EPS = 1e-6


def _quiet_fit(model, df, ctx):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(df, context=ctx)


def _err(model, truth) -> float:
    return float((model.labels_.reindex(truth.index) != truth).mean())


# ------------------------------------------------------------------ the simplex-chain M-step
def _slsqp_reference(N, ineq):
    """Objective −Σ N log π and the best SLSQP solution (two starts) of a simplex-rows program with the pairwise
    inequalities ``ineq`` (rows on the simplex, floor ε)."""
    U, J = N.shape
    obj = lambda q: -(N * np.log(q.reshape(U, J))).sum()
    cons = [{"type": "ineq", "fun": ineq}, {"type": "eq", "fun": lambda q: q.reshape(U, J).sum(axis=1) - 1}]
    runs = (
        minimize(
            obj,
            s0,
            bounds=[(EPS, 1)] * (U * J),
            constraints=cons,
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 1000},
        )
        for s0 in (np.full(U * J, 1 / J), np.tile([0.5, 0.3, 0.2], U))
    )
    return obj, min(runs, key=lambda r: r.fun)


def test_floored_simplex_is_the_per_level_optimum():
    N = np.array([[3.0, 0.0, 1.0], [0.0, 0.0, 5.0], [1e-9, 2.0, 2.0]])
    P = floored_simplex(N, 1e-3)
    assert np.allclose(P.sum(axis=1), 1.0) and (P >= 1e-3 - 1e-15).all()
    assert np.allclose(P[0], [0.75 * (1 - 1e-3), 1e-3, 0.25 * (1 - 1e-3)])
    assert np.allclose(P[1], [1e-3, 1e-3, 1 - 2e-3])


@pytest.mark.parametrize("n_programs", [4, pytest.param(30, marks=pytest.mark.slow)])
def test_simplex_mstep_matches_pairwise_reference(n_programs):
    """Spec §6.7-style reference: full pairwise program with SLSQP (simplex equalities, floor ε)."""
    rng = np.random.default_rng(3)
    J = 3
    for trial in range(n_programs):
        U = int(rng.integers(2, 9))
        x = np.sort(rng.uniform(0, 1, U))
        c = [0.3, 2.0, 10.0][trial % 3]
        N = rng.integers(0, 6, (U, J)).astype(float)
        N[N.sum(axis=1) == 0, 0] = 1.0
        P, info = lipschitz_simplex_mstep(N, np.r_[np.diff(x) * c, 0.0], np.array([0]))
        li, lj = np.triu_indices(U, 1)

        def ineq(q):
            Q = q.reshape(U, J)
            rho = (c * (x[lj] - x[li]))[:, None]
            d = Q[lj] - Q[li]
            return np.concatenate([(rho - d).ravel(), (rho + d).ravel()])

        obj, best = _slsqp_reference(N, ineq)
        assert np.abs(P.sum(axis=1) - 1).max() <= 1e-12 and P.min() >= EPS - 1e-15
        assert -ineq(P.ravel()).max() <= 1e-9  # feasible
        assert obj(P.ravel()) <= best.fun + 1e-8 * abs(best.fun)
        assert info.gap <= 1e-8


def test_simplex_mstep_two_classes_is_the_binary_chain_program():
    rng = np.random.default_rng(4)
    for trial in range(10):
        lens = rng.integers(1, 30, int(rng.integers(1, 5)))
        n = int(lens.sum())
        starts = np.r_[0, np.cumsum(lens)[:-1]]
        x = np.concatenate([np.sort(rng.uniform(0, 1, k)) for k in lens])
        A = rng.integers(0, 5, n).astype(float)
        B = rng.integers(0, 5, n).astype(float)
        B[(A + B) == 0] = 1.0
        h = np.r_[np.diff(x), 1.0] * [0.3, 2.0, 10.0][trial % 3]
        h = np.maximum(h, 1e-9)
        p, _ = lipschitz_chain_mstep(A, B, h, starts)
        P, info = lipschitz_simplex_mstep(np.column_stack([B, A]), h, starts)
        assert np.max(np.abs(P[:, 1] - p)) <= 1e-4 and info.gap <= 1e-8
        obj = lambda q: float((A * np.log(q) + B * np.log1p(-q)).sum())
        assert abs(obj(P[:, 1]) - obj(p)) <= 1e-8 * (1 + abs(obj(p)))


def test_simplex_mstep_near_duplicate_contexts_certified():
    """Spec §12 pitfall 24 for the simplex solver: a link with h ≈ 1e-9 must not need the fallback."""
    rng = np.random.default_rng(1)
    U, J = 300, 3
    x = np.sort(rng.uniform(0, 1, U))
    x[150] = x[149] + 5e-10
    x = np.sort(x)
    N = np.eye(J)[np.where(rng.uniform(size=U) < 0.3 + 0.4 * x, 0, rng.integers(1, J, U))]
    P, info = lipschitz_simplex_mstep(N, np.r_[2.0 * np.diff(x), 0.0], np.array([0]))
    assert info.n_fallback == 0 and info.gap <= 1e-8
    assert np.abs(np.diff(P, axis=0)).max(axis=1).max() <= 2.0 * np.diff(x).max() + 1e-9


def test_categorical_simplex_mstep_matches_pairwise_reference():
    rng = np.random.default_rng(2)
    J = 3
    for trial in range(5):
        U = int(rng.integers(2, 6))
        c = [0.05, 0.2, 0.5][trial % 3]
        N = rng.integers(0, 8, (U, J)).astype(float)
        N[N.sum(axis=1) == 0, 0] = 1.0
        P = categorical_simplex_mstep(N, c, EPS)
        li, lj = np.triu_indices(U, 1)

        def ineq(q):
            d = q.reshape(U, J)[lj] - q.reshape(U, J)[li]
            return np.concatenate([(c - d).ravel(), (c + d).ravel()])

        obj, best = _slsqp_reference(N, ineq)
        assert -ineq(P.ravel()).max() <= 1e-9 and np.allclose(P.sum(axis=1), 1.0)
        assert obj(P.ravel()) <= best.fun + 1e-8 * abs(best.fun)


# ------------------------------------------------------------------ J = 2 reproduces the binary model
@pytest.mark.parametrize("variant", ["shared_prior", "paper"])
def test_confusion_mode_with_two_labels_reproduces_binary_model(variant):
    sim = table1(4, 300, seed=5, responses_per_item=3)
    ctx = sim.context
    for kw in ({"swing": 1.0}, {"lipschitz": sim.lipschitz, "positive_label": 0}, {"swing": 0.0}):
        a = _quiet_fit(ContextEM(variant=variant, **kw), sim.responses, ctx)
        b = _quiet_fit(ContextEM(variant=variant, multiclass="confusion", **kw), sim.responses, ctx)
        assert np.max(np.abs(a.probas_.to_numpy() - b.probas_.to_numpy())) <= 1e-4
        assert (a.labels_ == b.labels_).all()
        assert a.n_iter_ == b.n_iter_
        ea, eb = a.result_.context, b.result_.context
        tol = 1e-4 if variant == "shared_prior" else 1e-2  # paper variant: γ ≈ 1e-14 weights leave flat directions
        assert np.nanmax(np.abs(ea.detection - eb.detection)) <= tol
        assert np.nanmax(np.abs(ea.false_alarm - eb.false_alarm)) <= tol
        assert abs(dp_metric(a, sim.p0, sim.p1) - dp_metric(b, sim.p0, sim.p1)) <= 1e-3
        cc = eb.confusion
        assert cc.shape == (4, len(eb.grid), 2, 2)
        assert np.allclose(cc.sum(axis=3), 1.0)
        pos = 0 if "positive_label" in kw else 1
        assert ea.positive_label == eb.positive_label == pos
        assert np.allclose(cc[:, :, pos, pos], eb.detection)
        assert np.allclose(cc[:, :, 1 - pos, pos], eb.false_alarm)


# ------------------------------------------------------------------ three classes
@pytest.mark.slow
def test_confusion_curves_recovered_on_three_class_context_crowd():
    sim = confusion_crowd(6, 500, 3, seed=0)
    ctx = sim.context
    m = _quiet_fit(ContextEM(multiclass="confusion", swing=1.0), sim.responses, ctx)
    ds = DawidSkene().fit(sim.responses)
    mv = MajorityVote(tie_break="random", random_state=0).fit(sim.responses)
    grid = m.context_grid_
    truth_curves = np.stack([f(grid) for f in sim.confusion_fn])  # workers × grid × true × reported
    cc = m.result_.context.confusion
    assert cc.shape == truth_curves.shape
    assert np.allclose(cc.sum(axis=3), 1.0)
    mae_ctx = float(np.abs(cc - truth_curves).mean())
    mae_ds = float(np.abs(ds.confusion_[:, None] - truth_curves).mean())
    assert mae_ctx <= 0.75 * mae_ds, (mae_ctx, mae_ds)
    e_ctx, e_ds, e_mv = _err(m, sim.truth), _err(ds, sim.truth), _err(mv, sim.truth)
    assert e_ctx <= e_ds and e_ctx <= e_mv, (e_ctx, e_ds, e_mv)
    # Lipschitz bound at the fitted levels (every entry, every worker); the grid curves are interpolated entry by
    # entry and renormalised onto the simplex, so they are only approximately Lipschitz between levels
    fc = m.fitted_curves_
    pw, xl = fc.pair_worker, fc.levels[fc.pair_level]
    c = float(m.lipschitz_.max())
    for w in range(6):
        s = pw == w
        slopes = np.abs(np.diff(fc.confusion[s], axis=0)) / np.diff(xl[s])[:, None, None]
        assert slopes.max() <= c * (1 + 1e-6) + 1e-9
    assert m.detection_curves_.shape == (6, 3, len(grid)) and m.false_alarm_curves_.shape == (6, 3, len(grid))
    assert np.allclose(m.detection_curves_[:, 1], cc[:, :, 1, 1])
    assert m.mstep_gap_ <= 1e-8
    # held-out scoring works through the confusion curves
    ll = m.response_log_likelihood(m.responses_)
    assert ll.shape == (m.responses_.n_responses, 3) and np.all(ll <= 0)
    one = m.interpolate_confusion([0.2, 0.8], worker="a1")
    assert one.shape == (2, 3, 3) and np.allclose(one.sum(axis=2), 1.0)


def test_confusion_mode_parameters():
    sim = confusion_crowd(4, 120, 3, seed=1)
    ctx = sim.context
    with pytest.raises(UserInputError, match="multiclass"):
        _quiet_fit(ContextEM(multiclass="pairs"), sim.responses, ctx)
    with pytest.raises(UserInputError, match="3 × 4"):
        _quiet_fit(ContextEM(multiclass="confusion", lipschitz=np.ones((2, 4))), sim.responses, ctx)
    m = _quiet_fit(ContextEM(multiclass="confusion", lipschitz=np.array([0.0, 5.0, 5.0])), sim.responses, ctx)
    cc = m.result_.context.confusion
    assert np.abs(np.diff(cc[:, :, 0, :], axis=1)).max() <= 1e-12  # c = 0 row: constant (Dawid–Skene row)
    assert m.lipschitz_.shape == (3, 4)


# ------------------------------------------------------------------ coverage (§9.1)
def test_coverage_warning_and_extras():
    sim = table1(4, 400, seed=9)
    df = sim.responses
    thin = (df["context"] > 0.85) & df["worker"].isin(["a3", "a4"])
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        dense = ContextEM().fit(df, context="context")
        sparse = ContextEM().fit(df[~thin], context="context")
    assert not any("fewer than 3 annotators have responses" in w for w in dense.warnings_)
    msgs = [w for w in sparse.warnings_ if "fewer than 3 annotators have responses" in w]
    assert len(msgs) == 1 and "2 annotators" in msgs[0]
    cov = sparse.result_.context.coverage
    grid = sparse.context_grid_
    assert cov.shape == (4, len(grid))
    counts = (
        df[~thin]
        .groupby("worker")
        .size()
        .reindex(sparse.workers_ if hasattr(sparse, "workers_") else sparse.responses_.workers)
    )
    assert (cov.sum(axis=1) == counts.to_numpy()).all()
    hi = grid > 0.87
    assert cov[2:, hi].sum() == 0 and cov[:2, hi].sum() > 0
    assert (sparse.context_coverage_ == cov).all()


# ------------------------------------------------------------------ categorical contexts (§5.4)
def test_categorical_context_limits():
    rng = np.random.default_rng(5)
    sim = confusion_crowd(4, 300, 3, seed=2)
    cats = pd.Series(rng.choice(["a", "b", "c"], 300), index=sim.truth.index)
    m = _quiet_fit(ContextEM(multiclass="confusion", swing=1.0), sim.responses, cats)
    assert m.result_.context.confusion.shape == (4, 3, 3, 3)
    capped = _quiet_fit(ContextEM(multiclass="confusion", swing=0.05), sim.responses, cats)
    cc = capped.result_.context.confusion  # workers × categories × true × reported
    assert (cc.max(axis=1) - cc.min(axis=1)).max() <= 0.05 + 1e-6
    assert (m.result_.context.confusion.max(axis=1) - m.result_.context.confusion.min(axis=1)).max() > 0.05
    many = pd.Series([f"id{i}" for i in range(300)], index=sim.truth.index)
    many.iloc[:5] = "x"
    many2 = pd.Series([f"v{i}" for i in range(301)][:300], index=sim.truth.index)
    ok = _quiet_fit(ContextEM(swing=1.0), sim.responses, many.iloc[:300])  # 296 categories: allowed
    assert len(ok.context_grid_) == 296
    df = pd.concat(
        [sim.responses, pd.DataFrame({"task": ["extra"], "worker": ["a1"], "label": [0]})], ignore_index=True
    )
    with pytest.raises(UserInputError, match="at most 300 categories"):
        _quiet_fit(ContextEM(), df, pd.concat([many2, pd.Series(["zz"], index=["extra"])]))


@pytest.mark.slow
def test_confusion_curves_many_seeds_and_swing_selection():
    from fusion_core.methods.context import select_swing

    for seed in range(3):
        for rpi in (None, 3):
            sim = confusion_crowd(
                6 if rpi is None else 8, 1000 if rpi is None else 2000, 3, seed=seed, responses_per_item=rpi
            )
            m = _quiet_fit(ContextEM(multiclass="confusion", swing=1.0), sim.responses, sim.context)
            ds = DawidSkene().fit(sim.responses)
            mv = MajorityVote(tie_break="random", random_state=seed).fit(sim.responses)
            true = np.stack([f(m.context_grid_) for f in sim.confusion_fn])
            assert np.abs(m.confusion_curves_ - true).mean() <= 0.75 * np.abs(ds.confusion_[:, None] - true).mean()
            assert _err(m, sim.truth) <= min(_err(ds, sim.truth), _err(mv, sim.truth))
            assert m.mstep_gap_ <= 1e-8
    sim = confusion_crowd(6, 600, 3, seed=1)
    table, chosen = select_swing(sim.responses, sim.context, swings=(0.0, 1.0), multiclass="confusion")
    assert chosen == 1.0  # held-out annotation likelihood prefers context-dependent confusion curves


def test_barrier_fallback_reaches_the_optimum_when_the_interior_point_method_stalls():
    """A program on which the interior-point method stops unconverged (60 iterations) and the barrier fallback
    takes over (the 28th program of the slow reference test above): the fallback restarted from a centred point
    reaches the pairwise SLSQP optimum (it used to stall near a bound, 0.9 nats short)."""
    N = np.array([[2, 4, 2], [4, 1, 2], [1, 2, 3], [1, 0, 4], [1, 2, 1], [1, 1, 1], [4, 2, 3], [2, 5, 3]], float)
    h = np.array([0.0374, 0.0743, 0.0637, 0.0044, 0.0148, 0.0386, 0.0088, 0.0])
    P, info = lipschitz_simplex_mstep(N, h, np.array([0]))
    assert info.n_fallback == 1  # the path under test
    x = np.r_[0.0, np.cumsum(h[:-1])]  # links of exactly h: |P[b] − P[a]| ≤ x[b] − x[a]
    li, lj = np.triu_indices(len(N), 1)

    def ineq(q):
        d = q.reshape(N.shape)[lj] - q.reshape(N.shape)[li]
        rho = (x[lj] - x[li])[:, None]
        return np.concatenate([(rho - d).ravel(), (rho + d).ravel()])

    obj, best = _slsqp_reference(N, ineq)
    assert -ineq(P.ravel()).max() <= 1e-9
    assert obj(P.ravel()) <= best.fun + 1e-8 * abs(best.fun)
