"""Numeric responses (fusion_core.data.numeric) and numeric truth inference (fusion_core.methods.numeric),
issue 13 item 2."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import multivariate_normal

from fusion_core.data.numeric import NumericResponses
from fusion_core.errors import UserInputError
from fusion_core.methods.numeric import NumericModel, NumericState, NumericTruth, item_medians, typical_noise_var
from fusion_core.simulate.ratings import numeric_ratings


def _rmse(est: pd.Series, truth: pd.Series) -> float:
    return float(np.sqrt(((est.reindex(truth.index) - truth) ** 2).mean()))


# ------------------------------------------------------------------------------------------ the data model
def test_ids_are_kept_exactly_and_values_coded():
    df = pd.DataFrame(
        {"task": [10, 10, "x", "x", 7.5], "worker": ["a", 3, "a", 3, "a"], "value": [1.0, 2, "3.5", 4, -1e3]}
    )
    r = NumericResponses.from_frame(df)
    assert set(r.items) == {10, "x", 7.5} and set(r.workers) == {"a", 3}
    back = r.to_frame()
    assert back["value"].tolist() == [1.0, 2.0, 3.5, 4.0, -1000.0]
    assert back["task"].tolist() == [10, 10, "x", "x", 7.5]
    assert np.isnan(r.matrix()).sum() == 1


def test_non_numeric_values_are_refused_with_row_numbers():
    df = pd.DataFrame({"task": [1, 1, 2, 2], "worker": list("abab"), "value": [1.0, "high", 3.0, "n/a"]})
    with pytest.raises(UserInputError, match=r"rows 2, 4 hold other values \(e.g. 'high'\)"):
        NumericResponses.from_frame(df)
    with pytest.raises(UserInputError, match="row 3 hold"):
        NumericResponses.from_frame(df.assign(value=[1.0, 2.0, np.inf, 4.0]))
    with pytest.raises(UserInputError, match="true/false"):
        NumericResponses.from_frame(df.assign(value=[True, False, True, True]))
    with pytest.raises(UserInputError, match="missing value column 'score'"):
        NumericResponses.from_frame(df, value="score")


def test_blank_values_are_dropped_and_counted():
    df = pd.DataFrame({"task": [1, 1, 2, 2, 3], "worker": list("ababa"), "value": [1.0, None, " ", 2.0, 5.0]})
    r = NumericResponses.from_frame(df)
    assert r.n_responses == 3 and r.report.dropped_missing_label == 2
    with pytest.raises(UserInputError, match="repeat a"):
        NumericResponses.from_frame(pd.concat([df, df.iloc[[0]]]), duplicates="error")
    assert NumericResponses.from_frame(pd.concat([df, df.iloc[[0]]]), duplicates="first").n_responses == 3


def test_item_medians():
    df = pd.DataFrame({"task": [1, 1, 1, 2, 2, 3], "worker": list("abcabc"), "value": [5.0, 1.0, 3.0, 4.0, 2.0, 9.0]})
    r = NumericResponses.from_frame(df)
    assert item_medians(r).tolist() == [3.0, 3.0, 9.0]


# ------------------------------------------------------------------------------------------ the model
def test_gaussian_objective_is_the_exact_marginal_likelihood():
    """Oracle: with Gaussian noise the E-step objective equals log N(x_i; (m + b) 1, τ² 11ᵀ + diag σ²) summed over
    items plus the noise prior."""
    sim = numeric_ratings(n_items=6, n_workers=4, responses_per_item=3, seed=1)
    r = NumericResponses.from_frame(sim.responses)
    model = NumericModel(r, None, 1.0, typical_noise_var(r), np.ones(r.n_workers, dtype=bool))
    rng = np.random.default_rng(0)
    state = NumericState(48.0, 90.0, rng.normal(0, 3, r.n_workers), rng.uniform(2, 20, r.n_workers), None)
    total = 0.0
    for i in range(r.n_items):
        sel = r.item == i
        cov = state.spread + np.diag(state.noise_var[r.worker[sel]])
        total += multivariate_normal(state.mean + state.bias[r.worker[sel]], cov).logpdf(r.value[sel])
    assert model.e_step(state).log_likelihood == pytest.approx(total + model.log_prior(state), rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_truth_beats_mean_and_median_and_bias_is_recovered(seed):
    """Issue 13 done-when: lower RMSE than the mean and the median of the ratings; bias correlation ≥ 0.95."""
    sim = numeric_ratings(seed=seed)
    fit = NumericTruth().fit(sim.responses)
    by_task = sim.responses.groupby("task")["value"]
    rmse = _rmse(fit.truth_, sim.truth)
    assert rmse < _rmse(by_task.mean(), sim.truth) and rmse < _rmse(by_task.median(), sim.truth)
    assert fit.bias_.corr(sim.bias) >= 0.95
    assert fit.noise_.corr(sim.noise) >= 0.9
    n = fit.responses_.responses_per_worker
    assert abs(fit.bias_.to_numpy() @ n) < 1e-9 * n.sum()  # the identifiability constraint: Σ n_j b_j = 0
    trace = np.array(fit.result_.log_likelihood)
    assert (np.diff(trace) >= -1e-9 * np.abs(trace[1:])).all() and fit.result_.converged


def test_gaussian_intervals_cover_the_truth():
    covered = []
    for seed in range(4):
        sim = numeric_ratings(n_items=400, seed=10 + seed)
        res = NumericTruth().fit(sim.responses).result_
        lo, hi = res.interval_low.reindex(sim.truth.index), res.interval_high.reindex(sim.truth.index)
        covered.append(((lo <= sim.truth) & (sim.truth <= hi)).to_numpy())
    assert np.concatenate(covered).mean() >= 0.93


def test_robust_variant_resists_outliers():
    sim = numeric_ratings(outlier_rate=0.05, seed=3)
    gauss = NumericTruth().fit(sim.responses)
    robust = NumericTruth(noise="student-t").fit(sim.responses)
    by_task = sim.responses.groupby("task")["value"]
    r_rob = _rmse(robust.truth_, sim.truth)
    assert r_rob < _rmse(gauss.truth_, sim.truth)
    assert r_rob < _rmse(by_task.mean(), sim.truth) and r_rob < _rmse(by_task.median(), sim.truth)
    assert robust.bias_.corr(sim.bias) >= 0.95
    weight = robust.result_.response_weight
    assert weight is not None
    assert np.median(weight[sim.outlier]) < 0.2 and weight[~sim.outlier].mean() > 0.8
    trace = np.array(robust.result_.log_likelihood)
    assert (np.diff(trace) >= -1e-9 * np.abs(trace[1:])).all()


def test_reference_annotators_fix_the_bias_origin():
    sim = numeric_ratings(n_items=200, n_workers=8, seed=4)
    base = NumericTruth().fit(sim.responses)
    ref = NumericTruth(reference=["w3"]).fit(sim.responses)
    assert ref.bias_["w3"] == pytest.approx(0.0, abs=1e-9)
    shift = ref.truth_ - base.truth_
    assert np.allclose(shift, shift.iloc[0], atol=1e-6)  # only the origin moves
    assert np.allclose(ref.bias_ - base.bias_, -shift.iloc[0], atol=1e-6)
    with pytest.raises(UserInputError, match="reference annotators"):
        NumericTruth(reference=["nobody"]).fit(sim.responses)


def test_parameters_are_declared_and_checked():
    from sklearn.base import clone

    est = NumericTruth(noise="student-t", df=3.0)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est
    assert "df=3.0" in repr(est)
    sim = numeric_ratings(n_items=20, n_workers=4, responses_per_item=3, seed=0)
    for bad in ({"noise": "laplace"}, {"df": 0.5}, {"level": 1.0}, {"reference": "w1"}, {"max_iter": 0}):
        with pytest.raises(UserInputError, match=next(iter(bad))):
            NumericTruth(**bad).fit(sim.responses)
    assert "Parameters\n----------\nnoise :" in (NumericTruth.__doc__ or "")


def test_sparse_annotators_stay_finite():
    sim = numeric_ratings(n_items=100, n_workers=10, seed=5)
    extra = pd.DataFrame({"task": ["t0"], "worker": ["lonely"], "value": [1000.0]})
    fit = NumericTruth().fit(pd.concat([sim.responses, extra], ignore_index=True))
    assert np.isfinite(fit.noise_["lonely"]) and fit.noise_["lonely"] > 0.5
    # its one wild response is absorbed by its own bias and barely moves the origin (Σ n_j b_j = 0)
    assert abs(fit.truth_["t0"] - sim.truth["t0"]) < 10
    assert _rmse(fit.truth_, sim.truth) < 3.0
