"""Panels of judges (issue 13 item 4): per-response confidence in Responses, judge metadata, the judge-panel
simulator and the correlated-judges analysis built on the cartel detector."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from fusion_core.data.judges import AnnotatorInfo
from fusion_core.data.loading import load_responses
from fusion_core.data.responses import Responses
from fusion_core.diagnostics.agreement import fleiss_kappa, krippendorff_alpha
from fusion_core.diagnostics.judges import correlated_judges, error_lift, reweigh, split_by_loadings
from fusion_core.errors import UserInputError
from fusion_core.methods import create
from fusion_core.simulate import dawid_skene
from fusion_core.simulate.judges import judge_panel


def _fit(name: str, data, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create(name, **params).fit(data)


# ------------------------------------------------------------------------------------------ confidence column
def test_confidence_column_is_read_and_carried():
    df = pd.DataFrame(
        {"task": [1, 1, 2, 2, 3], "worker": list("ababa"), "label": list("xyxxy"), "conf": [0.9, 0.5, 1, 0.2, None]}
    )
    with pytest.raises(UserInputError, match="empty in row 5; fill in a confidence"):
        Responses.from_frame(df, confidence="conf")
    resp = Responses.from_frame(df.iloc[:4], confidence="conf")
    assert resp.weight.tolist() == [0.9, 0.5, 1.0, 0.2]
    assert resp.vote_counts().tolist() == [[0.9, 0.5], [1.2, 0.0]]
    assert resp.vote_counts(use_confidence=False).tolist() == [[1.0, 1.0], [2.0, 0.0]]
    assert resp.to_frame()["confidence"].tolist() == [0.9, 0.5, 1.0, 0.2]
    assert resp.subset(np.array([True, False, True, True])).weight.tolist() == [0.9, 1.0, 0.2]
    assert resp.with_items_resampled(np.array([1, 1])).weight.tolist() == [1.0, 0.2, 1.0, 0.2]
    assert resp.one_vs_rest("x").weight.tolist() == [0.9, 0.5, 1.0, 0.2]
    with pytest.raises(UserInputError, match=r"numbers between 0 and 1, but rows 1, 3 hold other values \(e.g. '90'\)"):
        Responses.from_frame(df.iloc[:4].assign(conf=["90", 0.5, 2, 0.1]), confidence="conf")
    with pytest.raises(UserInputError, match="missing confidence column 'p'"):
        Responses.from_frame(df, confidence="p")
    with pytest.raises(UserInputError, match="long layout"):
        load_responses(df, layout="wide", confidence="conf")
    assert load_responses(df.iloc[:4], confidence="conf").weight is not None


def test_confidence_weights_are_fractional_votes_in_mv_and_ds():
    sim = dawid_skene(n_items=200, n_workers=8, n_classes=3, responses_per_item=4, seed=1)
    df = sim.responses.copy()
    ones = Responses.from_frame(df.assign(c=1.0), confidence="c")
    for name in ("mv", "ds"):
        assert np.allclose(_fit(name, ones).probas_.to_numpy(), _fit(name, df).probas_.to_numpy(), atol=1e-12)
    # weight 0 = the response is not there (every item keeps its first response)
    rng = np.random.default_rng(0)
    c = np.where(~df.duplicated("task") | (rng.random(len(df)) < 0.6), 1.0, 0.0)
    zeroed = Responses.from_frame(df.assign(c=c), confidence="c")
    for name in ("mv", "ds"):
        a = _fit(name, zeroed).probas_
        b = _fit(name, df[c > 0]).probas_.reindex(a.index)
        assert np.allclose(a.to_numpy(), b.to_numpy(), atol=1e-6)


def test_agreement_statistics_ignore_confidences():
    sim = dawid_skene(n_items=100, n_workers=6, n_classes=3, responses_per_item=3, seed=2)
    rng = np.random.default_rng(1)
    weighted = Responses.from_frame(sim.responses.assign(c=rng.random(len(sim.responses))), confidence="c")
    plain = Responses.from_frame(sim.responses)
    assert fleiss_kappa(weighted) == fleiss_kappa(plain)
    assert krippendorff_alpha(weighted) == krippendorff_alpha(plain)


# ------------------------------------------------------------------------------------------ metadata
def test_annotator_info():
    meta = pd.DataFrame({"worker": [7, "b", "c"], "model": ["m1", "m1", "m2"], "prompt_version": ["v1", "v2", "v1"]})
    info = AnnotatorInfo.from_frame(meta)
    rows = info.for_workers(pd.Index(["7", "c", "zz"]))
    assert rows["model"].tolist()[:2] == ["m1", "m2"] and rows.loc["zz"].isna().all()
    assert info.unknown(pd.Index(["7", "zz"])) == ["zz"]
    assert info.shared([7, "b"]) == {"model": "m1"}
    with pytest.raises(UserInputError, match="more than once"):
        AnnotatorInfo.from_frame(pd.concat([meta, meta.iloc[[0]]]))
    with pytest.raises(UserInputError, match="no 'judge' column"):
        AnnotatorInfo.from_frame(meta, worker="judge")


def test_judge_panel_simulator():
    sim = judge_panel(n_items=300, n_judges=8, n_correlated=3, seed=4)
    assert len(sim.responses) == 300 * 8 and set(sim.responses.columns) == {"task", "worker", "label", "confidence"}
    group = sim.group
    assert group.sum() == 3
    models = sim.judges.for_workers(sim.workers)["model"]
    assert (models[group] == "model-a").all() and models[~group].nunique() == 5
    # the group is wrong together on the shared-error items
    wide = sim.responses.pivot(index="task", columns="worker", values="label")
    shared = sim.shared_error
    wrong = wide[group.index[group]].ne(sim.truth, axis=0)
    assert wrong[shared].mean().min() > 0.8 and wrong[~shared].mean().max() < 0.2


# ------------------------------------------------------------------------------------------ correlated judges
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_correlated_group_is_detected_and_down_weighting_improves_accuracy(seed):
    """Issue 13 done-when: 3 of 8 judges share errors → the group is detected and down-weighting it helps."""
    sim = judge_panel(n_items=600, n_judges=8, n_correlated=3, seed=seed)
    truth_group = tuple(sorted(sim.group.index[sim.group]))
    for method in ("ds", "mv"):
        res = correlated_judges(sim.responses, method=method, true_labels=sim.truth, judges=sim.judges)
        assert res.significant and res.groups == (truth_group,)
        assert res.effect.accuracy_after > res.effect.accuracy_before
        assert (res.effect.weight[list(truth_group)] == 1 / 3).all()
        assert res.group_summary.loc[1, "model"] == "model-a"
        lift = res.error_lift
        inside = lift.loc[list(truth_group), list(truth_group)].to_numpy()
        others = lift.drop(index=list(truth_group), columns=list(truth_group)).to_numpy()
        assert np.nanmin(inside) > 1.5 and np.nanmax(others) < np.nanmin(inside)
        assert abs(np.nanmean(others) - 1) < 0.15  # independent judges: errors independent given the truth


def test_no_group_when_judges_are_independent():
    sim = dawid_skene(n_items=500, n_workers=8, n_classes=2, responses_per_item=8, accuracy=(0.7, 0.85), seed=3)
    res = correlated_judges(sim.responses, true_labels=sim.truth)
    assert not res.significant and res.groups == () and res.source == "none"
    assert (res.effect.weight == 1).all() and len(res.effect.changed) == 0
    assert res.effect.accuracy_before == res.effect.accuracy_after


def test_split_by_loadings_and_error_lift():
    angles = np.deg2rad([10, 15, 20, 25, 50, 55, 60])
    load = pd.DataFrame({"v1": np.cos(angles), "v2": np.sin(angles)}, index=list("abcdefg"))
    assert sorted(map(sorted, split_by_loadings(load))) == [["a", "b", "c", "d"], ["e", "f", "g"]]
    df = pd.DataFrame({"task": np.repeat(np.arange(10), 3), "worker": list("xyz") * 10, "label": [0] * 30})
    df.loc[(df.worker != "z") & (df.task < 4), "label"] = 1  # x and y are wrong together on 4 of 10 items
    df.loc[(df.worker == "z") & (df.task.isin([5, 6])), "label"] = 1
    lift = error_lift(Responses.from_frame(df), pd.Series(0, index=np.arange(10)))
    assert lift.loc["x", "y"] == pytest.approx(2.5) and lift.loc["x", "z"] == 0.0


def test_bad_requests_are_refused():
    sim = judge_panel(n_items=100, seed=0)
    with pytest.raises(UserInputError, match="does not weigh responses"):
        reweigh(sim.responses, pd.Series({"judge1": 0.5}), method="mm")
    with pytest.raises(UserInputError, match="group_weight must be"):
        correlated_judges(sim.responses, group_weight=2.0)
    multi = dawid_skene(n_items=100, n_workers=6, n_classes=3, responses_per_item=6, seed=0)
    with pytest.raises(UserInputError, match="pass positive_label="):
        correlated_judges(multi.responses)
    res = correlated_judges(multi.responses, positive_label=1, method="mv")
    assert len(res.effect.labels_after) == 100
