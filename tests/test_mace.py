"""MACE (Hovy et al. 2013): spammer recovery oracle, a hand-computed E-step, the VB objective and the confusion."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from fusion_core.data.responses import Responses
from fusion_core.methods import create
from fusion_core.methods.mace import MaceModel, MaceState
from fusion_core.simulate.peer import mace_crowd


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_spammers(seed):
    """Issue 14 oracle: the spamming probability ranks the known spammers first (AUC ≥ 0.95)."""
    sim = mace_crowd(
        n_items=400, n_workers=40, n_spammers=8, responses_per_item=4, competent_spam=(0.0, 0.5), seed=seed
    )
    m = create("mace").fit(sim.responses)
    spam = m.result_.column("spam_probability").values
    truth = sim.spammer.reindex(m.workers_).to_numpy()
    assert roc_auc_score(truth, spam) >= 0.95


def test_one_e_step_by_hand():
    """One item, two annotators, EM weights: q ∝ Π_j ((1 − θ_j)[l_j = k] + θ_j ξ_j,l_j)."""
    df = pd.DataFrame({"task": ["i", "i"], "worker": ["a", "b"], "label": ["x", "y"]})
    resp = Responses.from_frame(df)
    # θ_a = 0.2, θ_b = 0.6 as pseudo-counts (competent, spammed); ξ_a = (0.5, 0.5), ξ_b = (0.9, 0.1)
    state = MaceState(np.array([8.0, 4.0]), np.array([2.0, 6.0]), np.array([[1.0, 1.0], [9.0, 1.0]]))
    e = MaceModel(resp, variational=False).e_step(state)
    p_x = (0.8 + 0.2 * 0.5) * (0.6 * 0.1)  # T = x: a is right, b (said y) spammed y
    p_y = (0.2 * 0.5) * (0.4 + 0.6 * 0.1)  # T = y: a (said x) spammed x, b is right
    assert e.posterior[0] == pytest.approx([p_x / (p_x + p_y), p_y / (p_x + p_y)])
    assert e.log_likelihood - MaceModel(resp, variational=False).prior_term(state) == pytest.approx(
        np.log(0.5 * p_x + 0.5 * p_y)
    )
    # expected competence of a's response: P(T = x) · (1 − θ_a) / (1 − θ_a + θ_a ξ_a,x)
    rho = e.stats[1]
    assert rho[0, 0] == pytest.approx(0.8 / (0.8 + 0.1))


@pytest.mark.parametrize("method", ["vb", "em"])
def test_objective_never_decreases_and_confusion_is_mace_shaped(method):
    sim = mace_crowd(n_items=200, n_workers=15, n_spammers=3, seed=4)
    m = create("mace", method=method).fit(sim.responses)
    trace = np.asarray(m.loss_history_)
    assert np.all(np.diff(trace) >= -1e-8 * np.abs(trace[1:]))
    theta = m.result_.column("spam_probability").values
    xi = np.column_stack([m.result_.column(f"strategy[{c}]").values for c in m.classes_])
    expected = theta[:, None, None] * xi[:, None, :] + (1 - theta)[:, None, None] * np.eye(len(m.classes_))
    assert np.allclose(m.confusion_, expected)
    assert np.allclose(m.confusion_.sum(axis=2), 1.0)
