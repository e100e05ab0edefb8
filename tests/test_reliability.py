"""Agreement with intervals (issue 13 item 3): weighted Cohen's κ, Krippendorff's α (nominal, ordinal, interval,
ratio) and ICC, checked against reference implementations (krippendorff, scikit-learn, pingouin: tests only) on
the real datasets, and the bootstrap intervals' coverage on simulated replicates."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from conftest import load_dataset

from fusion_core.data.numeric import NumericResponses
from fusion_core.data.responses import Responses
from fusion_core.diagnostics import reliability
from fusion_core.diagnostics.krippendorff import METRICS, krippendorff
from fusion_core.diagnostics.reliability import icc, pair_ratings, weighted_kappa
from fusion_core.errors import UserInputError
from fusion_core.simulate.ratings import numeric_ratings, ordinal_crowd

REAL = ["relevance", "face", "dog", "bluebirds", "rte"]
TOL = 1e-10


def _real(name: str) -> tuple[pd.DataFrame, Responses]:
    answers, _ = load_dataset(name)
    answers = answers.drop_duplicates(["task", "worker"], keep="last")
    return answers, Responses.from_frame(answers)


def reliability_data(resp: Responses) -> np.ndarray:
    """coders × units matrix of label values with NaN where missing (the krippendorff package's layout)."""
    codes = resp.dense_matrix()
    values = np.asarray(resp.classes, dtype=float)
    return np.where(codes >= 0, values[np.maximum(codes, 0)], np.nan)


# ------------------------------------------------------------------------------------------ reference oracles
@pytest.mark.parametrize("name", REAL)
def test_alpha_equals_the_krippendorff_package_on_real_data(name):
    kd = pytest.importorskip("krippendorff")
    answers, resp = _real(name)
    numeric = NumericResponses.from_frame(answers, value="label")
    data = reliability_data(resp)
    for metric in METRICS:
        ref = kd.alpha(reliability_data=data, level_of_measurement=metric)
        assert krippendorff(resp, metric=metric, n_bootstrap=0).value == pytest.approx(ref, abs=TOL)
        assert krippendorff(numeric, metric=metric, n_bootstrap=0).value == pytest.approx(ref, abs=TOL)


def busiest(answers: pd.DataFrame, size: int) -> list:
    """The ``size`` annotators (among the 12 most active) sharing the most items, each with more than one label."""
    top = answers["worker"].value_counts().index[:12]
    wide = answers[answers["worker"].isin(top)].pivot(index="task", columns="worker", values="label")

    def shared(group):
        block = wide[list(group)].dropna()
        return len(block) * bool(block.nunique().min() > 1)

    return list(max(itertools.combinations(top, size), key=shared))


@pytest.mark.parametrize("name", ["relevance", "face", "dog"])
def test_weighted_kappa_equals_scikit_learn_on_real_data(name):
    from sklearn.metrics import cohen_kappa_score

    answers, resp = _real(name)
    a, b = pair_ratings(resp, *busiest(answers, 2))
    assert len(a) > 100 and a.index.equals(b.index)
    for weights in reliability.KAPPA_WEIGHTS:
        ref = cohen_kappa_score(a, b, weights=weights)
        assert weighted_kappa(a, b, weights=weights, n_bootstrap=0).value == pytest.approx(ref, abs=TOL)


@pytest.mark.parametrize("name", ["relevance", "face", "dog"])
def test_icc_equals_pingouin_on_real_data(name):
    pg = pytest.importorskip("pingouin")
    answers, _ = _real(name)
    raters = busiest(answers, 3)
    numeric = NumericResponses.from_frame(answers, value="label")
    block = answers[answers["worker"].isin(raters)].pivot(index="task", columns="worker", values="label").dropna()
    long = block.reset_index().melt(id_vars="task", var_name="worker", value_name="value")
    ref = pg.intraclass_corr(data=long, targets="task", raters="worker", ratings="value").set_index("Type")["ICC"]
    assert icc(NumericResponses.from_frame(long), form="1", n_bootstrap=0).value == pytest.approx(
        ref["ICC(1,1)"], abs=TOL
    )
    for form, key in (("2", "ICC(A,1)"), ("3", "ICC(C,1)")):
        est = icc(numeric, form=form, raters=raters, n_bootstrap=0)
        assert est.value == pytest.approx(ref[key], abs=TOL)
        assert est.n_items == len(block)


def test_icc_on_shrout_and_fleiss_table():
    """Shrout & Fleiss (1979), Table 2: ICC(1,1) = .17, ICC(2,1) = .29, ICC(3,1) = .71."""
    wide = pd.DataFrame(
        {"a": [9, 6, 8, 7, 10, 6], "b": [2, 1, 4, 1, 5, 2], "c": [5, 3, 6, 2, 6, 4], "d": [8, 2, 8, 6, 9, 7]}
    )
    data = NumericResponses.from_wide(wide)
    got = [round(icc(data, form=f, n_bootstrap=0).value, 2) for f in ("1", "2", "3")]
    assert got == [0.17, 0.29, 0.71]


def test_alpha_ordinal_with_declared_levels_matches_krippendorffs_example():
    """The krippendorff package's word example (Krippendorff 2011, p. 8): ordinal α = 0.815 with declared levels."""
    kd = pytest.importorskip("krippendorff")
    rows = [
        ["very low", "low", "mid", "mid", "low", "very low", "high", "very low", "low", np.nan, np.nan, np.nan],
        ["very low", "low", "mid", "mid", "low", "low", "high", "very low", "low", "very high", np.nan, "mid"],
        [np.nan, "mid", "mid", "mid", "low", "mid", "high", "low", "low", "very high", "very low", np.nan],
        ["very low", "low", "mid", "mid", "low", "high", "high", "very low", "low", "very high", "very low", np.nan],
    ]
    order = ["very low", "low", "mid", "high", "very high"]
    resp = Responses.from_wide(pd.DataFrame(rows).T)
    ref = kd.alpha(np.array(rows, dtype=object).astype(str), level_of_measurement="ordinal", value_domain=order)
    assert krippendorff(resp, metric="ordinal", levels=order, n_bootstrap=0).value == pytest.approx(ref, abs=TOL)
    assert round(ref, 3) == 0.815


# ------------------------------------------------------------------------------------------ behaviour
def test_bootstrap_is_deterministic_and_chunking_does_not_matter(monkeypatch):
    sim = ordinal_crowd(n_items=150, n_workers=8, responses_per_item=3, n_lenient=2, n_harsh=2, n_noisy=1, seed=0)
    resp = Responses.from_frame(sim.responses)
    a = krippendorff(resp, metric="ordinal", n_bootstrap=300, random_state=5)
    b = krippendorff(resp, metric="ordinal", n_bootstrap=300, random_state=5)
    assert (a.low, a.high) == (b.low, b.high) and a.low < a.value < a.high and a.n_valid == 300
    monkeypatch.setattr(reliability, "_MAX_CELLS", 1000)  # many small chunks, same draws
    c = krippendorff(resp, metric="ordinal", n_bootstrap=300, random_state=5)
    assert (c.low, c.high) == pytest.approx((a.low, a.high), abs=1e-12)
    d = krippendorff(resp, metric="ordinal", n_bootstrap=300, random_state=6)
    assert (d.low, d.high) != (a.low, a.high)


def test_row_order_and_unpaired_values_do_not_matter():
    sim = numeric_ratings(n_items=80, n_workers=6, responses_per_item=3, seed=2)
    df = sim.responses
    lone = pd.DataFrame({"task": ["solo"], "worker": ["w0"], "value": [3.0]})  # a unit with one value: not pairable
    a = krippendorff(df, metric="interval", n_bootstrap=0).value
    b = krippendorff(pd.concat([df, lone]).sample(frac=1.0, random_state=1), metric="interval", n_bootstrap=0).value
    assert a == pytest.approx(b, abs=1e-12)


def test_bad_inputs_are_refused_with_one_sentence():
    df = pd.DataFrame({"task": [1, 1, 2, 2], "worker": list("abab"), "label": ["x", "y", "x", "x"]})
    with pytest.raises(UserInputError, match="metric must be one of"):
        krippendorff(df, metric="cosine")
    with pytest.raises(UserInputError, match="interval metric needs labels that are numbers"):
        krippendorff(df, metric="interval")
    with pytest.raises(UserInputError, match="ratio metric needs values ≥ 0"):
        krippendorff(pd.DataFrame({"task": [1, 1], "worker": ["a", "b"], "value": [-1.0, 2.0]}), metric="ratio")
    with pytest.raises(UserInputError, match="level must be between 0 and 1"):
        krippendorff(df, level=95)
    with pytest.raises(UserInputError, match="n_bootstrap"):
        weighted_kappa([1, 2], [1, 2], n_bootstrap=-1)
    with pytest.raises(UserInputError, match="one label per item each"):
        weighted_kappa([1, 2, 3], [1, 2])
    with pytest.raises(UserInputError, match="weights must be"):
        weighted_kappa([1, 2], [1, 2], weights="cubic")
    sparse = numeric_ratings(n_items=50, n_workers=10, responses_per_item=2, seed=0).responses
    with pytest.raises(UserInputError, match="use form='1'"):
        icc(sparse, form="2")
    assert icc(sparse, form="1", n_bootstrap=0).n_items == 50


# ------------------------------------------------------------------------------------------ coverage
def _ordinal(seed: int, n: int) -> Responses:
    sim = ordinal_crowd(n, 10, 5, 4, n_lenient=2, n_harsh=2, n_noisy=2, seed=seed, workers_seed=7)
    return Responses.from_frame(sim.responses)


def _pair(seed: int, n: int) -> tuple[pd.Series, pd.Series]:
    sim = ordinal_crowd(n, 2, 5, 2, n_lenient=1, n_harsh=0, n_noisy=0, seed=seed, workers_seed=7)
    return pair_ratings(Responses.from_frame(sim.responses), "w0", "w1")


def _complete(seed: int, n: int) -> NumericResponses:
    return NumericResponses.from_frame(numeric_ratings(n, 4, 4, seed=seed, workers_seed=7).responses)


def _sparse(seed: int, n: int) -> NumericResponses:
    return NumericResponses.from_frame(numeric_ratings(n, 12, 3, seed=seed, workers_seed=7).responses)


COVERAGE_CASES = {
    **{f"alpha {m}": (_ordinal, lambda d, m=m, **k: krippendorff(d, metric=m, **k)) for m in METRICS},
    "kappa linear": (_pair, lambda d, **k: weighted_kappa(*d, weights="linear", **k)),
    "kappa quadratic": (_pair, lambda d, **k: weighted_kappa(*d, weights="quadratic", **k)),
    **{
        f"icc {f}": (_sparse if f == "1" else _complete, lambda d, f=f, **k: icc(d, form=f, **k))
        for f in ("1", "2", "3")
    },
}


def coverage(name: str, replicates: int, n_items: int = 200) -> float:
    """Share of ``replicates`` simulated datasets (one fixed crowd) whose 95 % interval holds the true value (the
    statistic on 200,000 items of the same crowd)."""
    simulate, stat = COVERAGE_CASES[name]
    truth = stat(simulate(10**6, 200_000), n_bootstrap=0).value
    hits = [
        (e.low <= truth <= e.high)
        for e in (stat(simulate(r, n_items), n_bootstrap=1000, random_state=r) for r in range(replicates))
    ]
    return float(np.mean(hits))


@pytest.mark.slow
def test_intervals_cover_the_true_value_a_few_replicates():
    """Pooled over every statistic, 20 replicates each (the full study per statistic is the slow test)."""
    assert np.mean([coverage(name, 20) for name in COVERAGE_CASES]) >= 0.90


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COVERAGE_CASES))
def test_intervals_cover_the_true_value(name):
    assert coverage(name, 200) >= 0.90
