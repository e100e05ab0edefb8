"""Cartel detector (spec spectral.md §6, oracles §8.11): power, membership, false positives, report API."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from fusion_core.diagnostics.cartels import CartelReport, detect_cartels
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.simulate.dawid_skene import dawid_skene
from fusion_core.simulate.spectral import cartel, independent

ALPHA = 0.01  # the spec's decision level for these oracles


def _detect(sim, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        return detect_cartels(sim.responses, alpha=kw.pop("alpha", ALPHA), **kw)


def _f1(pred: set, true: set) -> float:
    tp = len(pred & true)
    return 0.0 if tp == 0 else 2 * tp / (len(pred) + len(true))


def _membership_f1(sim, rep: CartelReport) -> tuple[float, float]:
    """(identifiable-member F1, all-member F1) of 'in a detected cartel' vs 'cartel member' (§8.11)."""
    g = sim.extras["group"]
    pi, xi = sim.extras["pi"], sim.extras["xi"]
    true = set(g[g != "honest"].index)
    pred = set().union(*rep.groups) if rep.groups else set()
    ident = set(g.index[((g == "honest") & (np.abs(2 * pi - 1) >= 0.1)) | ((g != "honest") & (np.abs(2 * xi - 1) >= 0.1))])
    return _f1(pred & ident, true & ident), _f1(pred, true)


@pytest.mark.parametrize("seed", range(3))
def test_cartel_power_and_membership(seed):
    sim = cartel(m=100, n=600, r=0.33, pi_c=0.5, seed=seed)
    rep = _detect(sim, random_state=seed)
    assert rep.p_value[0] < ALPHA and len(rep.groups) >= 1
    f1_ident, _ = _membership_f1(sim, rep)
    assert f1_ident >= 0.90
    members = set().union(*rep.groups)
    assert (rep.membership[list(members)] != "honest").all()
    # cartel members score high, honest annotators low
    g = sim.extras["group"].reindex(rep.scores.index)
    assert rep.scores[g != "honest"].mean() > 0.7 > 0.3 > rep.scores[g == "honest"].mean()


@pytest.mark.parametrize("seed", range(3))
def test_no_cartel_among_independent_annotators(seed):
    sim = independent(m=100, n=600, seed=seed)
    rep = _detect(sim, random_state=seed)
    assert rep.p_value[0] >= ALPHA and rep.groups == []
    assert (rep.membership == "honest").all() and (rep.scores == 0).all()
    assert (rep.labels == rep.labels_without_cartel).all()


def test_report_contract():
    sim = cartel(m=40, n=500, r=0.3, pi_c=0.5, xi_range=(0.7, 0.9), pi_range=(0.6, 0.85), seed=11)
    rep = _detect(sim, n_bootstrap=50, random_state=1, alpha=0.05)
    assert isinstance(rep, CartelReport)
    assert rep.workers.equals(rep.membership.index) and rep.workers.equals(rep.scores.index)
    assert list(rep.loadings.columns[:2]) == ["v1", "v2"] and rep.loadings.index.equals(rep.workers)
    assert rep.eigenvalues.shape == (10,) and np.all(np.diff(rep.eigenvalues) <= 1e-12)
    assert rep.null_eigenvalues.shape == (50, 10)
    assert rep.p_value.shape == (9,) and np.all((rep.p_value > 0) & (rep.p_value <= 1))
    assert rep.p_value.min() >= 1 / 51
    assert rep.n_bootstrap == 50 and rep.alpha == 0.05
    assert ((rep.scores >= 0) & (rep.scores <= 1)).all()
    assert rep.labels.index.equals(rep.labels_without_cartel.index)
    assert set(rep.membership.unique()) == {"honest", "cartel 1"}
    assert rep.groups and all(isinstance(g, set) for g in rep.groups)
    truth = sim.truth.reindex(rep.labels.index)
    # a strong cartel drags majority-based labels; dropping it does not make them worse
    assert (rep.labels_without_cartel == truth).mean() >= (rep.labels == truth).mean() - 0.01


def test_reproducible_given_seed():
    sim = cartel(m=60, n=400, r=0.3, seed=4)
    a = _detect(sim, n_bootstrap=40, random_state=7)
    b = _detect(sim, n_bootstrap=40, random_state=7)
    np.testing.assert_array_equal(a.p_value, b.p_value)
    assert a.groups == b.groups


@pytest.mark.parametrize("sparse_path", [False, True])
def test_sparse_cartel_detected(sparse_path, monkeypatch):
    """Missing data [EXT]: each entry observed with probability 0.3; the observed mask is copied in the null
    (dense batched bootstrap and the sparse-product bootstrap used for large matrices)."""
    import fusion_core.diagnostics.cartels as mod

    if sparse_path:
        monkeypatch.setattr(mod, "SPARSE_BOOTSTRAP_CELLS", 0)
    sim = cartel(m=60, n=1500, r=0.33, pi_c=0.5, observed=0.2, seed=2)
    rep = _detect(sim, n_bootstrap=100, random_state=0)
    assert rep.p_value[0] < ALPHA
    f1_ident, _ = _membership_f1(sim, rep)
    assert f1_ident >= 0.85
    ind = independent(m=60, n=1500, observed=0.2, seed=2)
    assert _detect(ind, n_bootstrap=100, random_state=0).p_value[0] >= ALPHA


def test_input_problems():
    s = dawid_skene(n_items=200, n_workers=10, n_classes=3, responses_per_item=5, seed=0)
    with pytest.raises(UserInputError, match="binary"):
        detect_cartels(s.responses)
    sim = independent(m=50, n=300, per_item=2, seed=0)
    with pytest.warns(AggregationWarning, match="not applicable"):
        rep = detect_cartels(sim.responses, n_bootstrap=10)
    assert rep.groups == [] and len(rep.workers) == 0 and rep.warnings
    with pytest.raises(UserInputError):
        detect_cartels(sim.responses, n_bootstrap=0)


# ------------------------------------------------------------------------------------ slow, full
@pytest.mark.slow
def test_false_positive_rate_full():
    """§8.11: rejection rate ≤ 5% over 100 seeds at α = 0.01, B = 200."""
    rejected = sum(_detect(independent(m=100, n=600, seed=s), random_state=s).p_value[0] < ALPHA for s in range(100))
    assert rejected <= 5


@pytest.mark.slow
def test_power_and_membership_full():
    f1s = []
    for seed in range(20):
        sim = cartel(m=100, n=600, r=0.33, pi_c=0.5, seed=seed)
        rep = _detect(sim, random_state=seed)
        assert rep.p_value[0] < ALPHA
        f1s.append(_membership_f1(sim, rep))
    f1s = np.array(f1s)
    assert f1s[:, 0].min() >= 0.90 and f1s[:, 0].mean() >= 0.95
    assert f1s[:, 1].mean() >= 0.85


@pytest.mark.slow
def test_two_cartels_full():
    """§8.11: 60 honest + 20 + 20; exactly 3 groups in ≥ 18/20 seeds, mean F1 and purity ≥ 0.85."""
    n3, f1s, purity = 0, [], []
    for seed in range(20):
        sim = cartel(m=100, n=600, r=[0.2, 0.2], pi_c=0.5, seed=seed)
        rep = _detect(sim, n_bootstrap=100, random_state=seed)
        n3 += len(rep.groups) == 2
        g = sim.extras["group"].reindex(rep.membership.index)
        pred = set().union(*rep.groups) if rep.groups else set()
        f1s.append(_f1(pred, set(g[g != "honest"].index)))
        majority = g.groupby(rep.membership).agg(lambda x: x.value_counts().index[0])
        purity.append(float((rep.membership.map(majority) == g).mean()))
    assert n3 >= 18 and np.mean(f1s) >= 0.85 and np.mean(purity) >= 0.85
