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
    true = sim.extras["difficulty"].reindex(g.result_.items).to_numpy()
    assert spearmanr(est, true)[0] >= 0.8
    ability = g.result_.column("ability").values
    assert spearmanr(ability, sim.extras["ability"].reindex(g.workers_))[0] >= 0.9


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
