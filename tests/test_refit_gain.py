"""The plan's interval for the realised accuracy gain, with the refit (issue 22: calibrated expected gains)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from fusion_core import UserInputError
from fusion_core.diagnostics.plan import plan_relabel
from fusion_core.diagnostics.refit_gain import RefitGain, _shock_log_joint, change_ratio, refit_gain
from fusion_core.methods import create
from fusion_core.simulate import dawid_skene


def _crowd(seed: int, n_items: int = 300, per_item: int = 2):
    sim = dawid_skene(
        n_items=n_items, n_workers=25, n_classes=3, responses_per_item=per_item, accuracy=(0.5, 0.9), seed=seed
    )
    return sim, create("ds").fit(sim.responses[["task", "worker", "label"]])


def test_interval_sd_is_the_simulated_spread_plus_the_change_allowance() -> None:
    # hand case: draws (0.01, 0.03) → variance 1e-4; 4 and 6 labels changed → 5 expected; the method's refit
    # changed 9 > 5 labels, so the allowance is 9 / n² (ratio < 1 never narrows it)
    rg = RefitGain(np.array([0.01, 0.03]), np.zeros(2), np.array([[3, 1], [4, 2]]), 100, 0.7, (5, 4))
    assert rg.changes == 9
    assert rg.sd == pytest.approx(np.sqrt(1e-4 + 9 / 100**2))
    lo, hi = rg.interval()
    assert lo == pytest.approx(0.02 - 1.6448536 * rg.sd) and hi == pytest.approx(0.02 + 1.6448536 * rg.sd)
    assert RefitGain(np.array([0.01, 0.03]), np.zeros(2), np.array([[3, 1], [4, 2]]), 100, 2.0).sd == pytest.approx(
        np.sqrt(1e-4 + 2 * 5 / 100**2)
    )


def test_refit_gain_is_deterministic_and_counts_the_methods_refit() -> None:
    sim, est = _crowd(0, n_items=120)
    res = est.result_
    tasks = pd.Index(res.items[:20])
    workers = pd.Index([res.workers[3]] * 10 + ["new annotator"] * 10)  # an annotator the fit has not seen
    seen: list[pd.DataFrame] = []

    def refit(df: pd.DataFrame):
        seen.append(df)
        return create("ds").fit(df).result_

    a = refit_gain(est.responses_, res, tasks, workers, seed=3, refit=refit)
    b = refit_gain(est.responses_, res, tasks, workers, seed=3)
    assert np.array_equal(a.draws, b.draws) and len(a.draws) >= 16
    assert len(seen) == 1 and len(seen[0]) == len(sim.responses) + 20
    new = refit(seen[0]).labels.reindex(res.items).to_numpy() != res.labels.to_numpy()
    touched = np.isin(res.items, tasks)
    assert a.refit_changed == (int(new[touched].sum()), int(new[~touched].sum()))
    assert 0 <= a.changed[:, 0].max() <= 20 and a.changes >= b.changes


def test_change_ratio_near_one_when_the_model_holds() -> None:
    # responses drawn from the Dawid–Skene model itself: a response changes labels as often as predicted
    sim, est = _crowd(1, n_items=600, per_item=4)
    res, resp = est.result_, est.responses_
    k = len(res.classes)
    ratio = change_ratio(
        resp.item, resp.worker, resp.label, res.posterior, res.class_prior,
        towards=np.full((k, k), 1 / k), strength=k * 1.0, n_workers=resp.n_workers,
    )  # fmt: skip
    assert 0.8 <= ratio <= 1.25, ratio


def test_plan_interval_choices() -> None:
    _, est = _crowd(2, n_items=150)
    plans = {iv: plan_relabel(est.responses_, est.result_, 15, interval=iv) for iv in ("model", "simulated", "refit")}
    assert plans["model"].refit is None and plans["model"].gain_interval() == plans["model"].model_interval()
    for iv in ("simulated", "refit"):
        p = plans[iv]
        assert p.refit is not None and p.gain_interval() == p.refit.interval()
        d = p.to_dict()
        assert d["expected_gain_interval_90"] == list(p.refit.interval())
        assert d["expected_gain_interval_90_model_only"] == list(p.model_interval())
    assert plans["simulated"].refit.refit_changed is None and plans["refit"].refit.refit_changed is not None
    with pytest.raises(UserInputError, match="interval"):
        plan_relabel(est.responses_, est.result_, 15, interval="exact")


def _coverage_run(seed: int) -> tuple[float, float, float, float]:
    """A simulated crowd at 2 responses per item; the plan's responses bought from the annotators' true matrices;
    ``ds`` refitted: (realised gain, interval low, high, model interval width)."""
    sim, est = _crowd(seed)
    res = est.result_
    plan = plan_relabel(est.responses_, res, 60)
    rng = np.random.default_rng(seed)
    widx = pd.Index(sim.workers)
    rows = []
    for t, w in zip(plan.assignment_task, plan.assignment_annotator, strict=True):
        p = sim.confusion[widx.get_loc(w), sim.classes.get_loc(sim.truth[t])]
        rows.append((t, w, sim.classes[rng.choice(len(p), p=p)]))
    known = sim.responses[["task", "worker", "label"]]
    after = create("ds").fit(pd.concat([known, pd.DataFrame(rows, columns=list(known.columns))], ignore_index=True))
    truth = sim.truth.reindex(res.items).to_numpy()
    gain = float(
        (after.labels_.reindex(res.items).to_numpy() == truth).mean() - (res.labels.to_numpy() == truth).mean()
    )
    lo, hi = plan.gain_interval()
    mlo, mhi = plan.model_interval()
    return gain, lo, hi, mhi - mlo


@pytest.mark.slow
def test_plan_interval_covers_the_realised_gain_many_seeds() -> None:
    out = np.array([_coverage_run(seed) for seed in range(20)])
    inside = (out[:, 1] <= out[:, 0] + 1e-12) & (out[:, 0] <= out[:, 2] + 1e-12)
    assert inside.mean() >= 0.8, out
    assert np.mean(out[:, 2] - out[:, 1]) <= 3 * np.mean(out[:, 3]), out  # honest, not uselessly wide


def test_shock_log_joint_matches_the_common_shock_likelihood_by_hand() -> None:
    # two draws, two items, three annotators, K = 2: log π_z + log Γ̄[z, u] + Σ_s log(ρ [l_s = u] + (1 − ρ)
    # Γ_s[z, l_s]) up to a per-item constant, against the sparse form
    rng = np.random.default_rng(0)
    k, n, nw, nb, rho = 2, 2, 3, 2, 0.3
    gam = rng.dirichlet(np.ones(k), size=(nb, nw, k))  # draw × worker × true × reported
    prior, center = np.array([0.6, 0.4]), np.array([[0.8, 0.2], [0.3, 0.7]])
    resp = [(0, 0, 0), (0, 1, 1), (0, 2, 1), (1, 0, 1)]  # (item, worker, label)
    rows = [d * n + i for d in range(nb) for i, _, _ in resp]
    cols = [(d * nw + w) * k + lab for d in range(nb) for _, w, lab in resp]
    a = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(nb * n, nb * nw * k))
    logq = np.asarray(a @ np.log(gam).transpose(0, 1, 3, 2).reshape(-1, k)) + np.log(prior)[None]
    got = _shock_log_joint(a, gam, logq, center, rho).reshape(nb, n, k, k)
    for d in range(nb):
        for i in range(n):
            want = np.array(
                [
                    [
                        np.log(prior[z] * center[z, u])
                        + sum(np.log(rho * (lab == u) + (1 - rho) * gam[d, w, z, lab]) for j, w, lab in resp if j == i)
                        for u in range(k)
                    ]
                    for z in range(k)
                ]
            )
            diff = got[d, i] - want  # a constant: m_i log(1 − ρ)
            assert np.allclose(diff, diff.flat[0]), (d, i, diff)


def _shock_crowd(seed: int, rho: float, n_items: int = 300):
    """A 3-class Dawid–Skene crowd at 2 responses per item whose responses copy the item's common shock
    ``u ~ Γ̄[z]`` with probability ``rho``; the simulation and a function answering (task, annotator) pairs the
    same way (the shock is the item's, so bought responses copy it too)."""
    sim, _ = _crowd(seed, n_items=n_items)
    rng = np.random.default_rng(10_000 + seed)  # not the simulator's stream
    mean = np.asarray(sim.confusion).mean(axis=0)
    z = sim.classes.get_indexer(sim.truth.to_numpy())
    u = (rng.random((len(z), 1)) > np.cumsum(mean[z], axis=1)).sum(axis=1).clip(max=len(sim.classes) - 1)
    shock = pd.Series(sim.classes.take(u), index=sim.truth.index)
    widx = pd.Index(sim.workers)

    def answer(tasks: pd.Index, workers: pd.Index) -> list:
        out = []
        for t, w in zip(tasks, workers, strict=True):
            p = sim.confusion[widx.get_loc(w), sim.classes.get_loc(sim.truth[t])]
            out.append(shock[t] if rng.random() < rho else sim.classes[rng.choice(len(p), p=p)])
        return out

    df = sim.responses[["task", "worker", "label"]].copy()
    df["label"] = answer(pd.Index(df["task"]), pd.Index(df["worker"]))
    return sim, df, answer


def _shock_run(seed: int, rho: float) -> tuple[float, float, float]:
    """Realised gain of a 60-label plan on a common-shock crowd, and the simulated mean gain with the planted
    ``τ = ρ²`` and with ``τ = 0`` (ds refitted)."""
    sim, df, answer = _shock_crowd(seed, rho)
    est = create("ds").fit(df)
    res = est.result_
    plan = plan_relabel(est.responses_, res, 60, interval="model")
    tasks, workers = plan.assignment_task, plan.assignment_annotator
    with_tau = refit_gain(est.responses_, res, tasks, workers, seed=seed, dependence=rho**2)
    without = refit_gain(est.responses_, res, tasks, workers, seed=seed)
    extra = pd.DataFrame({"task": tasks, "worker": workers, "label": answer(tasks, workers)})
    after = create("ds").fit(pd.concat([df, extra], ignore_index=True))
    truth = sim.truth.reindex(res.items).to_numpy()
    gain = float(
        (after.labels_.reindex(res.items).to_numpy() == truth).mean() - (res.labels.to_numpy() == truth).mean()
    )
    return gain, with_tau.mean, without.mean


def test_common_shock_draws_lower_the_simulated_gain() -> None:
    # a response that copies the item's shock repeats what the item's other responses say: it is worth less
    sim, df, _ = _shock_crowd(3, 0.6, n_items=120)
    est = create("ds").fit(df)
    plan = plan_relabel(est.responses_, est.result_, 25, interval="model", prior_count=1.0)
    args = (est.responses_, est.result_, plan.assignment_task, plan.assignment_annotator)
    none, shock = refit_gain(*args, seed=1), refit_gain(*args, seed=1, dependence=0.36)
    assert np.array_equal(none.draws, refit_gain(*args, seed=1, dependence=0.0).draws) and none.tau == 0.0
    assert shock.tau == 0.36 and shock.mean < none.mean - 0.002, (shock.mean, none.mean)
    with pytest.raises(ValueError, match="dependence"):
        refit_gain(*args, dependence=1.5)


@pytest.mark.slow
def test_common_shock_with_the_planted_tau_is_nearer_the_realised_gain_many_seeds() -> None:
    # the planted τ predicts the realised gain better than τ = 0, but not without bias: the fitted rows already
    # absorb part of the shock and the draws copy it on top (docs/PLAN.md, "the planted-shock oracle"; measured
    # over 40 seeds: −1.24 ± 0.30 pt with τ, −2.69 without) — the bias must stay below three quarters of τ = 0's
    # and below 2 pt
    out = np.array([_shock_run(seed, 0.5) for seed in range(20)])
    err_tau, err_none = out[:, 0] - out[:, 1], out[:, 0] - out[:, 2]
    assert abs(err_tau.mean()) < min(0.02, 0.75 * abs(err_none.mean())), out
