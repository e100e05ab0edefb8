"""The latent-scale model of graded labels (fusion_core.diagnostics.audit.latent_scale) and the three-model stacking
(fusion_core.diagnostics.audit.stacking.stacking_weights): hand-computed weights, the ordered levels of numeric and
declared labels, the model's gradient against finite differences, the Fisher step never raising a grader's
objective, recovery of the labels' accuracy on ordered-probit graders whose items sit near cut points (where the
one-type latent-class model overstates it), and a Dawid–Skene-style graded crowd giving it no weight."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit import latent_scale as ls
from fusion_core.diagnostics.audit.difficulty import difficulty_mixture
from fusion_core.diagnostics.audit.stacking import stacking_weight, stacking_weights
from fusion_core.methods import create
from fusion_core.simulate.graded import confusion_graders


def test_stacking_weights_by_hand():
    # v = (½, ½), a = (0.8, 0.2), b = (0.4, 0.4): 0.4/(0.4 + 0.4w) = 0.2/(0.4 − 0.2w)  ⇒  w = ½
    a, b, v = np.array([0.8, 0.2]), np.array([0.4, 0.4]), np.array([0.5, 0.5])
    w, cov = stacking_weights(np.stack([a, b]), v, np.array([0, 1]))
    assert w[0] == pytest.approx(0.5, abs=1e-6) and w.sum() == pytest.approx(1.0)
    assert cov.shape == (1, 1) and cov[0, 0] >= 0.0
    rng = np.random.default_rng(0)  # two models: the same optimum as the bracketed Newton of stacking_weight
    a, b, v = rng.uniform(0.05, 1, 50), rng.uniform(0.05, 1, 50), np.full(50, 1 / 50)
    w, _ = stacking_weights(np.stack([a, b]), v, np.arange(50))
    assert w[0] == pytest.approx(stacking_weight(a, b, v), abs=1e-5)
    # a third model no better than the others on any response gets no weight
    w, _ = stacking_weights(np.stack([a, b, np.minimum(a, b) * 0.5]), v, np.arange(50))
    assert w[2] < 1e-6


def test_level_ranks():
    resp = Responses.from_frame(pd.DataFrame({"task": [0, 0, 1, 1], "worker": [0, 1, 0, 1], "label": [10, 2, 3, 2]}))
    ranks = ls.level_ranks(resp)
    values = [float(str(c)) for c in resp.classes]
    assert [values[i] for i in np.argsort(ranks)] == [2.0, 3.0, 10.0]  # numeric order, not text order
    words = pd.DataFrame({"task": [0, 0, 1], "worker": [0, 1, 0], "label": ["high", "low", "mid"]})
    resp = Responses.from_frame(words)
    assert ls.level_ranks(resp) is None  # categories
    ranks = ls.level_ranks(resp, "ordinal", ["low", "mid", "high"])
    assert dict(zip(map(str, resp.classes), ranks.tolist())) == {"low": 0, "mid": 1, "high": 2}
    two = Responses.from_frame(pd.DataFrame({"task": [0, 1], "worker": [0, 1], "label": [0, 1]}))
    assert ls.level_ranks(two) is None and ls.level_ranks(two, "ordinal") is not None


def test_fisher_rounds_reach_the_minimum():
    # every round lowers (never raises) each grader's objective, and rounds converge to the minimum L-BFGS-B finds
    # in the same box
    from scipy.optimize import minimize

    rng = np.random.default_rng(1)
    for k in (2, 4):
        w = 3
        u, _, _ = ls._grid(k)
        counts = rng.poisson(2.0, (w, len(u), k)).astype(float)
        theta = ls._by_grader(rng.normal(0, 0.3, w * k), w, k)
        for _ in range(40):
            after = ls._fisher_round(theta, counts, u)
            assert np.all(ls._grader_objective(after, counts, u) <= ls._grader_objective(theta, counts, u) + 1e-9)
            theta = after
        box = [(-k, k)] * w + [(-3.0, 2.0)] * (w * (k - 2)) + [(np.log(0.02), np.log(2.0 * k))] * w  # the step's box
        best = minimize(
            lambda v: float(ls._grader_objective(ls._by_grader(v, w, k), counts, u).sum()),
            ls._flat(theta),
            method="L-BFGS-B",
            bounds=box,
        )
        assert ls._grader_objective(theta, counts, u).sum() <= best.fun + 1e-6


def near_thresholds(seed: int, n: int = 300, m: int = 20, r: int = 6, k: int = 4) -> tuple[pd.DataFrame, pd.Series]:
    """Ordered-probit graders (own cut points, bias, noise) on items 80 % of which sit 0.4–0.5 levels from their
    level's centre (next to a cut point); the truth is the level (as benchmarks/accuracy_honesty.py)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n)
    side = np.where(truth == 0, 1, np.where(truth == k - 1, -1, np.where(rng.random(n) < 0.5, -1, 1)))
    latent = truth + np.where(rng.random(n) < 0.8, side * rng.uniform(0.4, 0.5, n), rng.uniform(-0.25, 0.25, n))
    bias, noise = 0.3 * rng.standard_normal(m), rng.uniform(0.3, 0.9, m)
    cuts = np.sort(np.arange(1, k) - 0.5 + 0.2 * rng.standard_normal((m, k - 1)), axis=1)
    item = np.repeat(np.arange(n), r)
    worker = np.concatenate([rng.choice(m, r, replace=False) for _ in range(n)])
    seen = latent[item] + bias[worker] + noise[worker] * rng.standard_normal(len(item))
    label = (seen[:, None] > cuts[worker]).sum(axis=1) + 1
    return pd.DataFrame({"task": item, "worker": worker, "label": label}), pd.Series(truth + 1)


def _check(df: pd.DataFrame, truth: pd.Series):
    resp = Responses.from_frame(df)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = create("ds").fit(resp).result_
    codes = np.asarray(fit.label_codes)
    d = difficulty_mixture(resp, np.asarray(fit.posterior), codes, ls.level_ranks(resp))
    gold = truth.reindex(resp.items).astype(str).to_numpy()
    return d, float((resp.classes.take(codes).astype(str) == gold).mean())


def test_recovers_accuracy_near_cut_points():
    d, true_acc = _check(*near_thresholds(0))
    assert d.latent_scale is not None and d.stacking is not None and d.stacking.weight_scale is not None
    # within three sampling standard deviations of an accuracy near 0.7 on 300 items (√(0.21/300) ≈ 0.026)
    assert abs(d.latent_scale.accuracy - true_acc) < 0.08
    assert d.one_type_accuracy - true_acc > 0.15  # the nominal model reads split items as clean
    assert d.latent_scale.loglik[-1] >= d.latent_scale.loglik[0]


@pytest.mark.slow
def test_near_cut_points_many_seeds():
    # the benchmark's crowds (benchmarks/accuracy_honesty.py, graded-near-thresholds: 1,000 items, 40 graders); on
    # 300 items and 20 graders the error is larger (|·| 5.2 pt over seeds 0–9, −14 pt on one)
    errors, gaps, weights = [], [], []
    for seed in range(10):
        d, true_acc = _check(*near_thresholds(seed, n=1000, m=40))
        errors.append(d.latent_scale.accuracy - true_acc)
        gaps.append(d.one_type_accuracy - true_acc)
        weights.append(d.stacking.weight_scale)
    assert np.mean(np.abs(errors)) < 0.04 and np.mean(gaps) > 0.15
    assert min(weights) > 0.1  # the left-out responses support the model


@pytest.mark.slow
def test_dawid_skene_graders_give_no_weight():
    for seed in range(5):
        sim = confusion_graders(n_items=600, n_workers=25, n_levels=4, responses_per_item=5, seed=seed)
        d, _ = _check(sim.responses, sim.truth)
        assert d.stacking.weight_scale < 0.1
