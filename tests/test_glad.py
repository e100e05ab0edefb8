"""GLAD (Whitehill et al. 2009): difficulty-ordering oracle, a hand-computed E-step, monotone objective."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from scipy.stats import spearmanr

from fusion_core.data.responses import Responses
from fusion_core.methods import create
from fusion_core.methods.glad import GladModel, GladState
from fusion_core.simulate.peer import glad_crowd


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_difficulty_ordering(seed):
    """Issue 14 oracle: Spearman(estimated, true difficulty) ≥ 0.8 on data from the GLAD model
    (500 items, 30 annotators, 15 responses per item)."""
    sim = glad_crowd(n_items=500, n_workers=30, responses_per_item=15, seed=seed)
    g = create("glad").fit(sim.responses)
    est = g.result_.item_column("difficulty").values
    true = sim.difficulty.reindex(g.result_.items).to_numpy()
    assert spearmanr(est, true)[0] >= 0.8
    ability = g.result_.column("ability").values
    assert spearmanr(ability, sim.ability.reindex(g.workers_))[0] >= 0.9


def test_one_e_step_by_hand():
    """Three labels, two annotators: P(l | k) = σ(αβ) if l = k else (1 − σ(αβ))/2 (item j only makes z a label)."""
    df = pd.DataFrame({"task": ["i", "i", "j"], "worker": ["a", "b", "a"], "label": ["x", "y", "z"]})
    resp = Responses.from_frame(df)
    ability = np.where(resp.workers == "a", 2.0, 0.5)
    log_beta = np.log(np.where(resp.items == "i", 1.5, 1.0))
    e = GladModel(resp, estimate_priors=False).e_step(GladState(ability, log_beta, np.full(3, 1 / 3)))
    sa, sb = expit(2.0 * 1.5), expit(0.5 * 1.5)
    like = np.array([sa * (1 - sb) / 2, (1 - sa) / 2 * sb, (1 - sa) / 2 * (1 - sb) / 2])  # T = x, y, z
    i = list(resp.items).index("i")
    order = [list(resp.classes).index(c) for c in "xyz"]
    assert e.posterior[i, order] == pytest.approx(like / like.sum())


def test_objective_never_decreases():
    sim = glad_crowd(n_items=200, n_workers=12, n_classes=3, seed=5)
    g = create("glad").fit(sim.responses)
    trace = np.asarray(g.loss_history_)
    assert np.all(np.diff(trace) >= -1e-8 * np.abs(trace[1:]))
    assert np.allclose(g.confusion_.sum(axis=2), 1.0)
    ll = g.response_log_likelihood(g.responses_)
    assert ll.shape == (g.responses_.n_responses, 3) and np.isfinite(ll).all()


# ------------------------------------------------------------------- crowd-kit's target (issue 21 item 6)
def test_defaults_are_crowdkits_target():
    """α ~ N(1, 1), log β ~ N(1, 1), equal fixed class priors, first E-step from α = 1, log β = 1."""
    g = create("glad")
    assert (g.ability_prior, g.log_beta_prior, g.estimate_priors) == (1.0, 1.0, False)
    df = pd.DataFrame({"task": ["i", "i", "i"], "worker": ["a", "b", "c"], "label": ["x", "x", "y"]})
    model = GladModel(Responses.from_frame(df))
    first = model.e_step(model.start())
    s = expit(np.e)  # P(correct) at α = 1, β = e
    odds = (s / (1 - s)) ** 2 * ((1 - s) / s)
    assert first.posterior[0, 0] == pytest.approx(odds / (1 + odds))


def _state_objective(resp: Responses, ability: np.ndarray, log_beta: np.ndarray) -> float:
    k = resp.n_classes
    return GladModel(resp).e_step(GladState(ability, log_beta, np.full(k, 1 / k))).log_likelihood


@pytest.mark.slow
def test_matches_crowdkit_on_a_glad_crowd():
    """Same target: on a simulated GLAD crowd our labels equal crowd-kit's on ≥ 99 % of items, and our MAP
    objective is at least its value at crowd-kit's own α, β (we optimise the same function, at least as well)."""
    ck = pytest.importorskip("crowdkit.aggregation")
    sim = glad_crowd(n_items=100, n_workers=8, responses_per_item=4, n_classes=3, seed=7)
    ours = create("glad").fit(sim.responses)
    theirs = ck.GLAD()
    labels = theirs.fit_predict(sim.responses)
    assert (ours.labels_ == labels.reindex(ours.labels_.index)).mean() >= 0.99
    resp = ours.responses_
    alpha = theirs.alphas_.reindex(resp.workers).to_numpy()
    log_beta = theirs.betas_.reindex(resp.items).to_numpy()
    assert ours.loss_history_[-1] >= _state_objective(resp, alpha, log_beta) - 1e-6


def _one_sided(seed: int, n: int = 600) -> tuple[pd.DataFrame, pd.Series]:
    """Labelling-function-like sources, abstentions dropped: each only ever votes for its own class."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(n) < 0.5).astype(int)
    frames = []
    for j in range(8):
        fire = rng.random(n) < np.where(truth == j % 2, 0.5 if j % 2 else 0.6, 0.15 if j % 2 else 0.3)
        frames.append(pd.DataFrame({"task": np.flatnonzero(fire), "worker": f"lf{j}", "label": j % 2}))
    return pd.concat(frames, ignore_index=True), pd.Series(truth)


@pytest.mark.parametrize("seed", [0, 1])
def test_one_sided_sources_collapse_at_the_map_not_by_the_optimiser(seed):
    """Why youtube_lf differs from crowd-kit: with one-sided sources GLAD's MAP gives the weaker side's sources
    negative ability and labels (almost) everything one class.  EM started from the true labels reaches the same
    objective (so the collapse is the target's optimum, not an optimiser failure); crowd-kit's labels there come
    from stopping after two iterations."""
    answers, truth = _one_sided(seed)
    with pytest.warns(Warning):
        g = create("glad").fit(answers)
    resp = g.responses_
    gold = np.zeros((resp.n_items, 2))
    gold[np.arange(resp.n_items), truth.reindex(resp.items).to_numpy()] = 1.0
    model = GladModel(resp)
    model.m_step_iter = 20
    from fusion_core.methods.em import EMSettings, run_em

    run = run_em(model, model.start(gold), EMSettings(tol=1e-10, max_iter=2000, warn=False))
    assert g.loss_history_[-1] >= run.final - 1e-3 * abs(run.final)
    shares = g.labels_.value_counts(normalize=True)
    assert shares.max() >= 0.9  # a (nearly) constant labelling
    side = np.asarray(g.workers_.str[-1].astype(int)) % 2  # the class each source votes for
    ability = g.result_.column("ability").values
    assert (ability[side != shares.idxmax()] < 0).all() and (ability[side == shares.idxmax()] > 0).all()


# ------------------------------------------------------- stop="crowdkit": crowd-kit's loop as a drop-in (issue 21)
def _crowdkit_q_by_hand(resp: Responses, post: np.ndarray, alpha: np.ndarray, log_beta: np.ndarray) -> float:
    """crowd-kit's ``_compute_Q`` cell by cell (response × class), divided by the number of cells."""
    from scipy.stats import norm

    k = resp.n_classes
    s = expit(alpha[resp.worker] * np.exp(log_beta[resp.item]))
    total = 0.0
    for c in range(k):
        delta = resp.label == c
        total += (post[resp.item, c] * np.where(delta, np.log(s), np.log((1 - s) / (k - 1)))).sum()
    total += norm.logpdf(alpha - 1.0).sum() + norm.logpdf(log_beta - 1.0).sum()
    return total / (resp.n_responses * k)


def test_crowdkit_stop_is_its_rule_on_a_falling_q():
    """On a simulated GLAD crowd where crowd-kit's Q/(N·K) falls at iteration 2: the crowdkit loop stops exactly
    there (every earlier step rose by ≥ tol), reports not converged with the reason, and its last Q equals
    crowd-kit's formula computed by hand at the returned parameters and posteriors."""
    from fusion_core.methods.glad import crowdkit_run

    sim = glad_crowd(n_items=60, n_workers=6, responses_per_item=4, n_classes=3, seed=7)
    resp = Responses.from_frame(sim.responses)
    run, rule = crowdkit_run(GladModel(resp))
    q = np.asarray(rule.history)
    assert q[-1] < q[-2] and (np.diff(q[:-1]) >= 1e-5).all()
    assert run.n_iter == len(q) and not run.converged and "fell" in run.stop_reason
    assert q[-1] == pytest.approx(_crowdkit_q_by_hand(resp, run.posterior, run.state.ability, run.state.log_beta))
    g = create("glad", stop="crowdkit").fit(sim.responses)
    assert not g.result_.converged and g.n_iter_ == len(q) and "crowd-kit's rule" in g.result_.warnings[0]
    with pytest.raises(Exception, match="estimate_priors"):
        create("glad", stop="crowdkit", estimate_priors=True).fit(sim.responses)


@pytest.mark.slow  # imports crowd-kit (1.4 s) and fits twice
def test_crowdkit_stop_matches_crowdkits_glad():
    """The drop-in gives crowd-kit's labels, iterations and loss history (its Q/(N·K) trace) on a small simulated
    crowd whose Q falls at iteration 2."""
    ck = pytest.importorskip("crowdkit.aggregation")
    sim = glad_crowd(n_items=24, n_workers=5, responses_per_item=3, n_classes=2, seed=3)
    theirs = ck.GLAD()
    labels = theirs.fit_predict(sim.responses)
    from fusion_core.methods.glad import crowdkit_run

    resp = Responses.from_frame(sim.responses)
    _, rule = crowdkit_run(GladModel(resp))
    assert rule.history == pytest.approx(theirs.loss_history_, rel=1e-7)
    ours = create("glad", stop="crowdkit").fit(sim.responses)
    assert (ours.labels_ == labels.reindex(ours.labels_.index)).all()
    assert np.allclose(ours.result_.column("ability").values, theirs.alphas_.reindex(ours.workers_), atol=1e-5)
