"""Rating figures and the judges' calibration numbers: axes, level order, what each trace holds, hand-checked
calibration bins."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.calibration import calibration, wilson
from fusion_core.diagnostics.krippendorff import krippendorff
from fusion_core.diagnostics.rating_verdicts import numeric_verdicts, ordinal_verdicts
from fusion_core.diagnostics.reliability import icc
from fusion_core.errors import UserInputError
from fusion_core.methods.ordinal import OrdinalEM
from fusion_core.plots.ratings import (
    VERDICT_COLOURS,
    agreement_chart,
    bias_noise_scatter,
    calibration_chart,
    ordinal_confusion_heatmap,
)
from fusion_core.simulate.judges import judge_panel
from fusion_core.simulate.ratings import numeric_crowd, ordinal_crowd

LEVELS = ["poor", "fair", "good", "great", "superb"]


@pytest.fixture(scope="module")
def ordinal():
    sim = ordinal_crowd(n_items=200, n_workers=10, n_lenient=2, n_harsh=2, n_noisy=2, labels=LEVELS, seed=0)
    shuffled = sim.responses.sample(frac=1.0, random_state=1)  # first-seen label order is not the level order
    resp = Responses.from_frame(shuffled)
    return sim, resp, OrdinalEM(levels=LEVELS).fit(resp)


def test_ordinal_heatmap_keeps_the_declared_level_order(ordinal):
    sim, resp, est = ordinal
    assert list(est.classes_) == LEVELS
    crowd = ordinal_confusion_heatmap(est, responses=est.responses_)
    (hm,) = crowd.data
    assert list(hm.x) == LEVELS and list(hm.y) == LEVELS
    assert crowd.layout.xaxis.title.text == "reported" and crowd.layout.yaxis.title.text == "true"
    assert list(crowd.layout.xaxis.categoryarray) == LEVELS
    z = np.asarray(hm.z)
    assert np.allclose(z.sum(axis=1), 1.0) and np.trace(z) / len(z) > 0.5  # mostly on the diagonal
    harsh = sim.role.index[sim.role == "harsh"][0]
    one = np.asarray(ordinal_confusion_heatmap(est, worker=harsh).data[0].z)
    assert np.triu(one, 1).sum() < np.tril(one, -1).sum()  # a harsh annotator reports below the truth


def test_bias_noise_scatter_has_interval_bars_and_verdict_colours():
    sim = numeric_crowd(n_items=150, n_workers=10, n_lenient=2, n_harsh=2, n_noisy=2, seed=2)
    v = numeric_verdicts(sim.responses, n_bootstrap=30)
    fig = bias_noise_scatter(v)
    by_name = {tr.name: tr for tr in fig.data}
    assert set(by_name) == set(v.table["verdict"])
    for name, tr in by_name.items():
        part = v.table[v.table["verdict"] == name]
        assert np.allclose(tr.x, part["bias"]) and np.allclose(tr.y, part["noise"])
        assert np.allclose(np.asarray(tr.error_x.arrayminus), part["bias"] - part["bias_low"])
        assert tr.marker.color == VERDICT_COLOURS.get(name, VERDICT_COLOURS.get(name.split(" and ")[0]))
    assert "bias" in fig.layout.xaxis.title.text and "noise" in fig.layout.yaxis.title.text
    thresholds = sorted(s.x0 for s in fig.layout.shapes if s.x0 == s.x1)
    assert np.allclose(thresholds, [-0.25 * v.scale_sd, 0.25 * v.scale_sd])


def test_scatter_for_ordinal_verdicts_is_in_levels(ordinal):
    sim, resp, _ = ordinal
    v = ordinal_verdicts(resp, levels=LEVELS, n_bootstrap=20)
    fig = bias_noise_scatter(v)
    assert "levels" in fig.layout.xaxis.title.text
    assert sum(len(tr.x) for tr in fig.data) == 10


def test_calibration_numbers_by_hand():
    df = pd.DataFrame(
        {
            "task": ["a", "b", "c", "d", "a", "b", "c", "d"],
            "worker": ["j1"] * 4 + ["j2"] * 4,
            "label": ["x", "x", "y", "y", "x", "y", "y", "x"],
            "confidence": [0.95, 0.92, 0.55, 0.58, 0.75, 0.75, 0.75, 0.75],
        }
    )
    gold = pd.Series(["x", "x", "y", "x"], index=["a", "b", "c", "d"])
    cal = calibration(df, gold, bins=10)
    assert cal.reference == "gold labels"
    j1 = cal.bins[cal.bins["judge"] == "j1"].set_index("bin_low")
    assert j1.loc[0.9, "count"] == 2 and j1.loc[0.9, "accuracy"] == 1.0
    assert np.isclose(j1.loc[0.9, "confidence"], 0.935)
    assert j1.loc[0.5, "count"] == 2 and j1.loc[0.5, "accuracy"] == 0.5  # c right, d wrong
    # ECE of j1: (2·|1 − 0.935| + 2·|0.5 − 0.565|)/4
    assert np.isclose(cal.summary.loc["j1", "ece"], (2 * 0.065 + 2 * 0.065) / 4)
    assert np.isclose(cal.summary.loc["j2", "accuracy"], 0.75) and np.isclose(cal.summary.loc["j2", "ece"], 0.0)
    assert np.isclose(cal.pooled["accuracy"], 6 / 8)
    lo, hi = wilson(np.array([2.0]), np.array([2.0]), 0.95)
    assert np.isclose(hi[0], 1.0) and 0.3 < lo[0] < 0.4  # Wilson for 2/2: (0.342, 1)
    with pytest.raises(UserInputError, match="confidence"):
        calibration(df.drop(columns="confidence"), gold)


def test_calibration_chart_shows_the_overconfident_group():
    sim = judge_panel(n_items=400, seed=1)
    cal = calibration(sim.responses, sim.truth)
    group = sim.group
    over = cal.summary["overconfidence"]
    assert over[group].min() > over[~group].max()  # the group says 0.85–1 and is right ≈ 70 % of the time
    fig = calibration_chart(cal, judges=list(group.index[:2]))
    names = [tr.name for tr in fig.data]
    assert names[:2] == ["perfect calibration", "all judges"] and "judge1" in names
    assert fig.layout.xaxis2.title.text == "stated confidence" and fig.layout.yaxis.title.text == "observed accuracy"
    bars = [tr for tr in fig.data if tr.type == "bar"]
    assert sum(bars[0].y) == len(sim.responses)


def test_agreement_chart_shows_intervals():
    sim = numeric_crowd(n_items=120, n_workers=8, n_lenient=1, n_harsh=1, n_noisy=1, seed=3)
    ests = [
        krippendorff(sim.responses, metric="interval", n_bootstrap=50),
        icc(sim.responses, form="1", n_bootstrap=50),
    ]
    fig = agreement_chart(ests)
    (tr,) = fig.data
    assert np.allclose(tr.x, [e.value for e in ests])
    assert np.allclose(np.asarray(tr.error_x.array), [e.high - e.value for e in ests])
    assert "bootstrap" in fig.layout.title.text
    assert agreement_chart([]).layout.xaxis.visible is False
