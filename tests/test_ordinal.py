"""ordinal-em: the ordered-probit latent-truth model (fusion_core.methods.ordinal), issue 13 item 1; ordinal-ds
and the graded-crowd simulators, issue 21 item 5."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import approx_fprime
from scipy.special import ndtr

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.methods import create
from fusion_core.methods.ordinal import (
    OrdinalEM,
    m_step_objective,
    ordinal_confusion,
    scale_points,
    verdicts,
)
from fusion_core.methods.ordinal.ds import OrdinalDSModel, OrdinalDSState, backbone_objective, shrunk_confusion
from fusion_core.simulate.graded import confusion_graders, probit_graders
from fusion_core.simulate.ratings import ordinal_crowd


def _scores(est, truth: pd.Series) -> tuple[float, float]:
    lab = est.labels_.reindex(truth.index).astype(float)
    return float((lab == truth).mean()), float((lab - truth).abs().mean())


def _fit(name: str, df: pd.DataFrame, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create(name, **params).fit(df)


@pytest.mark.parametrize("estimated", [True, False])
def test_m_step_gradient_matches_finite_differences(estimated):
    rng = np.random.default_rng(0)
    w, k = 4, 5
    counts = rng.random((w, k, k)) * 10
    scale = None if estimated else np.zeros(2 * k - 2)
    parts = [rng.normal(0, 0.5, w), rng.normal(-0.5, 0.3, w)] + ([rng.normal(0, 0.5, 2 * k - 2)] if estimated else [])
    x = np.concatenate(parts)

    def f(v):
        return m_step_objective(v, counts, scale=scale, regularization=0.7)

    numeric = approx_fprime(x, lambda v: f(v)[0], 1e-7)
    assert np.max(np.abs(f(x)[1] - numeric)) <= 1e-5 * np.max(np.abs(numeric))


def test_confusion_is_a_stochastically_ordered_channel():
    """Rows sum to 1 and a higher true level never makes a low report more likely (P(report ≤ m | k) falls in k)."""
    rng = np.random.default_rng(1)
    conf = ordinal_confusion(rng.normal(0, 0.6, 6), np.exp(rng.normal(-0.5, 0.5, 6)), rng.normal(0, 0.7, 8))
    assert np.allclose(conf.sum(axis=2), 1.0)
    cdf = np.cumsum(conf, axis=2)[..., :-1]
    assert (np.diff(cdf, axis=1) <= 1e-12).all()
    pts = scale_points(np.zeros(8))
    assert np.allclose(pts[0::2], np.arange(5)) and np.allclose(pts[1::2], np.arange(1, 5) - 0.5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beats_dawid_skene_and_majority_vote_on_ordinal_crowds(seed):
    """Issue 13 done-when: lenient/harsh/noisy crowd → higher exact-level accuracy and lower MAE than ds and mv."""
    sim = ordinal_crowd(n_items=500, n_workers=20, seed=seed)
    acc_o, mae_o = _scores(_fit("ordinal-em", sim.responses, levels="numeric"), sim.truth)
    acc_d, mae_d = _scores(_fit("ds", sim.responses), sim.truth)
    acc_m, mae_m = _scores(_fit("mv", sim.responses), sim.truth)
    assert acc_o > acc_d and acc_o > acc_m
    assert mae_o < mae_d and mae_o < mae_m


def test_bias_noise_and_verdicts_are_recovered():
    sim = ordinal_crowd(n_items=600, n_workers=16, n_lenient=4, n_harsh=4, n_noisy=3, seed=3)
    est = _fit("ordinal-em", sim.responses, levels="numeric")
    scale = est.result_.ordinal
    assert scale is not None and scale.estimated
    true_bias = sim.bias.reindex(est.workers_).to_numpy()
    true_noise = sim.noise.reindex(est.workers_).to_numpy()
    assert np.corrcoef(scale.bias, true_bias)[0, 1] >= 0.95
    assert np.corrcoef(scale.noise, true_noise)[0, 1] >= 0.95
    assert (scale.verdict == sim.role.reindex(est.workers_).to_numpy()).all()
    titles = [c.title for c in est.result_.annotator_columns]
    assert titles == ["bias (levels)", "noise (levels)", "expected error (levels)", "verdict"]
    assert np.allclose(est.result_.column("bias").values, scale.bias)


def test_verdict_rule():
    out = verdicts(np.array([0.0, 0.5, -0.5, 0.0, 0.4, 0.29]), np.array([0.3, 0.3, 0.3, 0.9, 0.8, 0.74]))
    assert out.tolist() == ["reliable", "lenient", "harsh", "noisy", "lenient and noisy", "reliable"]


def test_em_objective_never_decreases_and_confusion_is_derived():
    sim = ordinal_crowd(n_items=300, n_workers=12, n_lenient=3, n_harsh=3, n_noisy=2, seed=4)
    for scale in ("estimated", "equal"):
        est = _fit("ordinal-em", sim.responses, levels="numeric", scale=scale)
        trace = np.array(est.loss_history_)
        assert (np.diff(trace) >= -1e-6 * np.abs(trace[1:])).all()
        assert est.converged_
        sc = est.result_.ordinal
        assert np.allclose(est.confusion_, ordinal_confusion(sc.bias, sc.noise, _logits(sc)))
        # held-out scoring works through the derived confusion matrices
        assert est.response_log_likelihood(est.responses_).shape == (est.responses_.n_responses, 5)


def _logits(sc) -> np.ndarray:
    """Gap logits reproducing the reported positions/thresholds (softmax is defined up to a constant)."""
    pts = np.empty(2 * len(sc.positions) - 1)
    pts[0::2], pts[1::2] = sc.positions, sc.thresholds
    return np.log(np.diff(pts))


# ------------------------------------------------------------------------------------------ level order
def test_declared_order_is_used_and_numeric_is_refused_for_words():
    sim = ordinal_crowd(n_items=200, n_workers=10, n_lenient=2, n_harsh=2, n_noisy=2, n_levels=3, seed=5)
    words = {1: "low", 2: "mid", 3: "high"}
    df = sim.responses.assign(label=sim.responses["label"].map(words))
    with pytest.raises(UserInputError, match="levels='numeric' needs labels that are numbers"):
        OrdinalEM(levels="numeric").fit(df)
    est = OrdinalEM(levels=["low", "mid", "high"]).fit(df)
    assert list(est.classes_) == ["low", "mid", "high"]
    assert list(est.probas_.columns) == ["low", "mid", "high"]
    ref = _fit("ordinal-em", sim.responses, levels="numeric")
    assert (est.labels_ == ref.labels_.map(words)).all()
    # no declared order for words: their sorted order, with a warning that says how to declare it
    with pytest.warns(UserWarning, match="pass levels"):
        OrdinalEM().fit(df)


def test_reversed_levels_mirror_the_biases():
    sim = ordinal_crowd(n_items=300, n_workers=12, n_lenient=3, n_harsh=3, n_noisy=2, seed=6)
    up = _fit("ordinal-em", sim.responses, levels=[1, 2, 3, 4, 5], scale="equal")
    down = _fit("ordinal-em", sim.responses, levels=[5, 4, 3, 2, 1], scale="equal")
    assert (up.labels_ == down.labels_).all()
    assert np.allclose(up.result_.ordinal.bias, -down.result_.ordinal.bias, atol=1e-4)


def test_level_errors_and_unused_levels():
    df = pd.DataFrame({"task": [1, 1, 2, 2, 3, 3], "worker": list("ababab"), "label": [1, 2, 2, 2, 1, 1]})
    with pytest.raises(UserInputError, match=r"labels \['2'\] occur in the responses but not in levels"):
        OrdinalEM(levels=[1, 3]).fit(df)
    with pytest.raises(UserInputError, match="levels"):
        OrdinalEM(levels=[1, 1]).fit(df)
    with pytest.raises(UserInputError, match="levels"):
        OrdinalEM(levels="sorted").fit(df)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = OrdinalEM(levels=["1", "2", "3"]).fit(df)  # text levels match numeric labels; 3 is never used
    assert list(est.classes_) == [1, 2, "3"]
    assert est.probas_.shape == (3, 3)


def test_confidence_weight_zero_equals_dropping_the_responses():
    sim = ordinal_crowd(n_items=200, n_workers=10, n_lenient=2, n_harsh=2, n_noisy=2, seed=7)
    df = sim.responses.copy()
    rng = np.random.default_rng(0)
    first = ~df.duplicated("task")  # keep every item's first response at weight 1
    df["confidence"] = np.where(first | (rng.random(len(df)) < 0.7), 1.0, 0.0)
    weighted = _fit("ordinal-em", Responses.from_frame(df, confidence="confidence"), levels="numeric")
    kept = _fit("ordinal-em", df[df["confidence"] > 0].drop(columns="confidence"), levels="numeric")
    assert np.allclose(weighted.probas_.to_numpy(), kept.probas_.reindex(weighted.probas_.index).to_numpy(), atol=1e-6)


# ------------------------------------------------------------------------------------------ ordinal-ds (issue 21)
@pytest.mark.parametrize("estimated", [True, False])
def test_backbone_gradient_matches_finite_differences(estimated):
    rng = np.random.default_rng(2)
    w, k = 4, 5
    conf = rng.dirichlet(np.ones(k), size=(w, k))
    scale = None if estimated else np.zeros(2 * k - 2)
    parts = [rng.normal(0, 0.5, w), rng.normal(-0.5, 0.3, w)] + ([rng.normal(0, 0.5, 2 * k - 2)] if estimated else [])
    x = np.concatenate(parts)

    def f(v):
        return backbone_objective(v, np.log(conf), strength=3.0, scale=scale, regularization=0.7)

    numeric = approx_fprime(x, lambda v: f(v)[0], 1e-7)
    assert np.max(np.abs(f(x)[1] - numeric)) <= 1e-5 * np.max(np.abs(numeric))


def test_ordinal_ds_hand_computed_case():
    """Two graders, two items, two levels: the Γ-step, the E-step posterior and the objective J by hand."""
    counts = np.array([[[3.0, 1.0], [0.0, 0.0]]])
    backbone = np.array([[[0.8, 0.2], [0.3, 0.7]]])
    gamma = shrunk_confusion(counts, backbone, 2.0)
    assert np.allclose(gamma, [[[4.6 / 6, 1.4 / 6], [0.3, 0.7]]])  # (C + αB)/(n + α); an empty row is B
    df = pd.DataFrame({"task": ["a", "a", "b"], "worker": ["u", "v", "u"], "label": [1, 2, 2]})
    resp = Responses.from_frame(df)
    conf = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.6, 0.4], [0.3, 0.7]]])  # u, v
    state = OrdinalDSState(conf, np.zeros(2), np.full(2, np.log(0.5)), np.zeros(2), np.array([0.25, 0.75]))
    model = OrdinalDSModel(resp, strength=2.0, estimate_scale=True, regularization=1.0)
    e = model.e_step(state)
    # item a: u said 1, v said 2 -> level 1: .25·.9·.4, level 2: .75·.2·.7; item b: u said 2 -> .25·.1, .75·.8
    ja, jb = np.array([0.25 * 0.9 * 0.4, 0.75 * 0.2 * 0.7]), np.array([0.25 * 0.1, 0.75 * 0.8])
    assert np.allclose(e.posterior, [ja / ja.sum(), jb / jb.sum()])
    b = ordinal_confusion(np.zeros(2), np.full(2, 0.5), np.zeros(2))  # levels 0, 1; cut ½; noise ½ -> Φ(±1)
    assert np.allclose(b[0, 0], [ndtr(1.0), ndtr(-1.0)])
    kl = float((b * np.log(b / conf)).sum())
    assert e.log_likelihood == pytest.approx(np.log(ja.sum()) + np.log(jb.sum()) - 2.0 * kl)


def test_ordinal_ds_strength_spans_dawid_skene_and_the_ordinal_model():
    """α → ∞: Γ is the ordered-probit backbone; small α: Γ follows the counts (Dawid–Skene's labels).  Γ is within
    n_jk/(n_jk + α) of B after every M-step, so a few iterations show it."""
    sim = probit_graders(n_items=300, n_workers=10, seed=11)
    stiff = _fit("ordinal-ds", sim.responses, levels="numeric", strength=1e4, max_iter=10)
    sc = stiff.result_.ordinal
    assert np.abs(stiff.confusion_ - ordinal_confusion(sc.bias, sc.noise, _logits(sc))).max() < 0.02
    loose = _fit("ordinal-ds", sim.responses, levels="numeric", strength=0.01)
    ds = _fit("ds", sim.responses)
    assert (loose.labels_ == ds.labels_.reindex(loose.labels_.index)).mean() >= 0.98


def test_ordinal_ds_objective_never_decreases_and_parameters_are_recovered():
    sim = probit_graders(n_items=600, n_workers=15, responses_per_item=6, seed=12)
    est = _fit("ordinal-ds", sim.responses, levels="numeric")
    trace = np.array(est.loss_history_)
    assert (np.diff(trace) >= -1e-6 * np.abs(trace[1:])).all() and est.converged_
    bias = est.result_.ordinal.bias
    true = sim.bias.reindex(est.workers_).to_numpy()
    assert np.corrcoef(bias, true)[0, 1] >= 0.9
    assert np.abs((bias - bias.mean()) - (true - true.mean())).mean() <= 0.15  # relative to the crowd, in levels
    # the backbone's cut points are the crowd's: the mean of the graders' own (levels 1 … 5 → scale 0 … 4)
    crowd_cuts = sim.thresholds.to_numpy().mean(axis=0) - 1.0
    assert np.abs(est.result_.ordinal.thresholds - crowd_cuts).max() <= 0.1
    # the full rows recover each grader's own confusion (their own cut points) better than Dawid–Skene's
    truth_conf = sim.confusion[sim.workers.get_indexer(est.workers_)]
    ds = _fit("ds", sim.responses)
    err_o = np.abs(est.confusion_ - truth_conf).mean()
    err_d = np.abs(ds.confusion_[ds.workers_.get_indexer(est.workers_)] - truth_conf).mean()
    assert err_o < err_d and err_o <= 0.05


def _gain_over_ds(make, seeds) -> tuple[float, list[float]]:
    gains = []
    for seed in seeds:
        sim = make(seed)
        acc_o, _ = _scores(_fit("ordinal-ds", sim.responses, levels="numeric"), sim.truth)
        acc_d, _ = _scores(_fit("ds", sim.responses), sim.truth)
        gains.append(100 * (acc_o - acc_d))
    return float(np.mean(gains)), gains


def test_ordinal_ds_beats_dawid_skene_on_ordered_probit_graders():
    """Issue 21 item 5: ≥ ds + 2 points on graders with their own cut points (two seeds, each above ds)."""
    mean, gains = _gain_over_ds(lambda s: probit_graders(seed=s), [0, 1])
    assert mean >= 2.0 and min(gains) > 0


@pytest.mark.slow
def test_ordinal_ds_against_dawid_skene_many_seeds():
    """10 seeds each: ≥ ds + 2 points on ordered-probit graders (dense and sparse), ≥ ds − 0.5 on DS-style ones."""
    assert _gain_over_ds(lambda s: probit_graders(seed=s), range(10))[0] >= 2.0
    assert _gain_over_ds(lambda s: probit_graders(n_workers=120, sparse=True, seed=s), range(10))[0] >= 2.0
    assert _gain_over_ds(lambda s: confusion_graders(seed=s), range(10))[0] >= -0.5
    assert _gain_over_ds(lambda s: confusion_graders(n_workers=120, sparse=True, seed=s), range(10))[0] >= -0.5


def test_graded_simulators():
    """Known truth and parameters: rows sum to 1, the implied probit confusion matches the responses, the sparse
    crowd's heavy graders give about their share."""
    sim = probit_graders(n_items=3000, n_workers=6, responses_per_item=6, seed=3)
    assert np.allclose(sim.confusion.sum(axis=2), 1.0) and sim.thresholds.shape == (6, 4)
    assert (np.diff(sim.thresholds.to_numpy(), axis=1) >= 0).all()
    df = sim.responses.assign(truth=sim.truth.reindex(sim.responses["task"]).to_numpy())
    emp = pd.crosstab([df["worker"], df["truth"]], df["label"], normalize="index").to_numpy().reshape(6, 5, 5)
    assert np.abs(emp - sim.confusion).max() < 0.06
    sparse = confusion_graders(n_items=2000, n_workers=100, sparse=True, heavy_share=0.5, seed=4)
    share = sparse.responses["worker"].isin(sparse.heavy[sparse.heavy].index).mean()
    assert 0.4 <= share <= 0.55
    per = sparse.responses["worker"].value_counts()
    assert (per < 20).sum() >= 40  # many light graders
    near = np.abs(np.arange(5)[:, None] - np.arange(5)[None, :]) == 1
    far = np.abs(np.arange(5)[:, None] - np.arange(5)[None, :]) >= 2
    assert sparse.confusion[:, near].mean() > sparse.confusion[:, far].mean()  # errors mostly to neighbours
