"""Never confidently wrong (issue 21): the heavy-annotator simulator, auto on it, and the audit's safety checks
(departure from the vote, labels that depend on the model choice, the honest accuracy range)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit import audit_summary, run_audit
from fusion_core.diagnostics.audit.safety import PINNED_WIDTH, label_safety, vote_departure, vote_margin
from fusion_core.methods import create
from fusion_core.methods.results import HeldoutCheck
from fusion_core.simulate.heavy import HEAVY_VARIANTS, HeavyShape, heavy_crowd


def _acc(est, truth: pd.Series) -> float:
    return float((est.labels_.reindex(truth.index).astype(str) == truth.astype(str)).mean())


def test_heavy_crowd_has_the_shape_it_claims():
    sim = heavy_crowd(HeavyShape(), seed=0)
    per_worker = sim.responses.groupby("worker").size()
    role = sim.role
    heavy = role.index[role.str.startswith("heavy")]
    assert len(sim.responses) == pytest.approx(2000 * 5, rel=0.05)
    assert per_worker.reindex(heavy).sum() / len(sim.responses) == pytest.approx(0.7, abs=0.03)
    assert (per_worker < 10).mean() >= 0.5  # most annotators give a handful of responses
    biased = role.index[role == "heavy biased"]
    assert len(biased) == 2 and (sim.accuracy.reindex(biased) < 0.78).all()  # below the majority rate
    assert not sim.responses.duplicated(["task", "worker"]).any()
    assert sim.truth.value_counts(normalize=True).loc[0] == pytest.approx(0.78, abs=0.03)


def test_auto_is_not_confidently_wrong_where_full_dawid_skene_drifts():
    # seeds on which full Dawid–Skene moves its classes towards the two biased heavy annotators (about 73 %)
    for seed in (1, 3):
        sim = HEAVY_VARIANTS["heavy"](seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            auto, ds = create("auto").fit(sim.responses), create("ds").fit(sim.responses)
            mv = create("mv").fit(sim.responses)
        assert _acc(ds, sim.truth) < _acc(mv, sim.truth) - 0.1  # the failure this guards against
        assert _acc(auto, sim.truth) >= _acc(mv, sim.truth) + 0.01
        assert "ds" in auto.result_.selection.alternatives or "ds" not in auto.members_


def test_vote_departure_by_hand():
    classes = pd.Index(["a", "b"])
    majority = np.array([0] * 30 + [1] * 10)
    label = majority.copy()
    label[:25] = 1  # 25 close votes moved a → b, one moved b → a
    label[30] = 0
    margin = np.ones(40, dtype=int)
    d = vote_departure(label, majority, margin, classes)
    assert d.direction == ("a", "b") and d.n_direction == 25 and d.one_way
    assert int(d.changed.sum()) == 26
    margin[:25] = 3  # the same changes on clear votes are not a close-vote drift
    d = vote_departure(label, majority, margin, classes)
    assert not d.one_way and d.n_direction == 1


def test_vote_margin_counts_responses():
    df = pd.DataFrame({"task": list("aaabbc"), "worker": list("xyzxyx"), "label": list("001011")})
    r = Responses.from_frame(df)
    margin, top = vote_margin(r)
    assert dict(zip(r.items, margin)) == {"a": 1, "b": 0, "c": 1}
    assert r.classes[top[list(r.items).index("a")]] == "0"


def test_heldout_check_calibration_by_hand():
    # the model predicts 0.9 agreement, 0.8 is observed, an annotator's response moves 0.5 with the truth: the
    # model overstates its labels' accuracy by (0.9 - 0.8) / 0.5 = 0.2
    c = HeldoutCheck(agreement=0.8, expected_agreement=0.9, discrimination=0.5, confidence=0.95, n_hidden=1000)
    assert c.calibrated == pytest.approx(0.75)
    assert HeldoutCheck(0.9, 0.9, 0.5, 0.95, 10).calibrated == pytest.approx(0.95)


def test_safety_checks_and_summary_on_a_heavy_crowd():
    sim = HEAVY_VARIANTS["heavy"](1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = run_audit(sim.responses, n_bootstrap=20, cartel_bootstrap=20)
    s = a.safety
    assert s is not None and "ds" in s.alternatives
    ds_labels = s.alternative_labels[list(s.alternatives).index("ds")]
    assert np.array_equal(s.depends, (s.alternative_labels != s.label[None, :]).any(axis=0))
    assert s.depends.sum() >= (ds_labels != s.label).sum() > 100  # DS's drift shows as model-dependent labels
    acc = s.accuracy
    truth = sim.truth.reindex(a.review.items).to_numpy()
    true_acc = float((a.classes.take(s.label) == truth).mean())
    assert acc.low <= true_acc + 0.01 and acc.high >= true_acc - 0.01
    assert acc.low <= dict(acc.by_model)["ds"] + 1e-12  # the alternatives' figures are inside the range
    assert not acc.pinned and acc.high - acc.low > PINNED_WIDTH
    frame = s.frame()
    assert len(frame) >= int(s.depends.sum()) and "label by ds" in frame.columns
    summary = audit_summary(a)
    json.dumps(summary)
    assert summary["label_safety"]["labels_depending_on_model"] == int(s.depends.sum())


def test_label_safety_without_a_choice_is_the_model_figure():
    sim = HEAVY_VARIANTS["heavy-honest"](0)
    r = Responses.from_frame(sim.responses)
    fit = create("ds").fit(r).result_
    majority = create("mv").fit(r).result_.label_codes
    s = label_safety(r, fit, fit.label_codes, majority)
    assert s.alternatives == () and not s.depends.any() and s.accuracy.heldout is None
    dep = s.accuracy.difficulty.dependence if s.accuracy.difficulty is not None else None
    shift = dep.shift if dep is not None and dep.found else 0.0  # copies counted once (docs/AUDIT.md)
    assert s.accuracy.estimate == pytest.approx(fit.posterior.max(axis=1).mean() + shift, abs=1e-9)
