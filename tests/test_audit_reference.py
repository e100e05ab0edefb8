"""Flags that do not rest on an uncertain reference (fusion_core.diagnostics.audit.reference; docs/AUDIT.md)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from fusion_core.diagnostics.audit import ACCEPTABLE, ADVERSARIAL, SPAMMER, TOO_FEW, VerdictRule, decide, run_audit
from fusion_core.diagnostics.audit.reference import attenuation
from fusion_core.simulate import dawid_skene

RULE = VerdictRule(level=0.9, min_responses=10, chance_band=0.15, reliable_skill=0.5, max_width=0.4)


def test_a_flag_must_hold_against_the_most_favourable_reference():
    # P(κ < band) and P(κ < 0) against the chosen labels, then against the most favourable plausible reference
    #        skill   low    high  p_near p_worse r_near r_worse r_skill expected
    cases = [
        (0.05, -0.05, 0.12, 0.99, 0.30, 0.99, 0.30, 0.05, SPAMMER),  # the reference is pinned down: unchanged
        (0.05, -0.05, 0.20, 0.80, 0.30, 0.55, 0.20, 0.10, SPAMMER),  # still more likely than not below the band
        (0.05, -0.05, 0.12, 0.99, 0.30, 0.40, 0.20, 0.20, TOO_FEW),  # favourable: more likely above the band
        (-0.50, -0.60, -0.40, 1.00, 1.00, 1.00, 1.00, -0.50, ADVERSARIAL),
        (-0.50, -0.60, -0.40, 1.00, 1.00, 0.90, 0.60, -0.10, SPAMMER),  # another model: bad, not clearly worse
        (-0.50, -0.60, -0.40, 1.00, 1.00, 0.30, 0.10, 0.20, TOO_FEW),  # another model: maybe fine
        (0.70, 0.60, 0.80, 0.00, 0.00, 0.00, 0.00, 0.90, "reliable"),  # verdicts that are no flag do not move
    ]
    skill, low, high, p_near, p_worse, r_near, r_worse, r_skill, expected = (
        np.array(c, dtype=object) for c in zip(*cases)
    )
    n, cartel = np.full(len(cases), 200), np.zeros(len(cases), dtype=bool)
    f = [x.astype(float) for x in (skill, low, high, p_near, p_worse, r_near, r_worse, r_skill)]
    verdict, reason = decide(
        *f[:3],
        n,
        cartel,
        rule=RULE,
        p_near=f[3],
        p_worse=f[4],
        robust_p_near=f[5],
        robust_p_worse=f[6],
        robust_skill=f[7],
        robust_why="the labels may be only 60–80% right",
    )
    assert list(verdict) == list(expected)
    assert all(
        "flagged only against the estimated labels: the labels may be only 60–80% right" in r
        for r in reason[verdict == TOO_FEW]
    )
    plain = decide(*f[:3], n, cartel, rule=RULE, p_near=f[3], p_worse=f[4])[0]
    same = decide(
        *f[:3], n, cartel, rule=RULE, p_near=f[3], p_worse=f[4], robust_p_near=f[3], robust_p_worse=f[4]
    )[0]
    assert list(plain) == list(same)  # a reference that is pinned down changes nothing


def test_attenuation_recovers_skill_measured_against_an_imperfect_reference():
    """κ against a reference right with probability r (errors independent of the annotator's) is κ_true·κ_ref(r);
    the factor for a model that claims 1.0 when the reference is only r right undoes it, and a guesser stays at 0."""
    assert attenuation(1.0, 0.75, np.array([0.5, 0.5])) == pytest.approx(2.0)
    assert attenuation(0.9, 0.9, np.array([0.3, 0.7])) == 1.0 and attenuation(0.9, 0.5, np.array([0.5, 0.5])) == np.inf
    rng = np.random.default_rng(0)
    n, r = 200_000, 0.8
    truth = rng.integers(0, 2, n)
    ref = np.where(rng.random(n) < r, truth, 1 - truth)
    f = attenuation(1.0, r, np.array([0.5, 0.5]))
    for acc in (0.5, 0.65, 0.9):
        ann = np.where(rng.random(n) < acc, truth, 1 - truth)
        kappa_obs = 2 * (ann == ref).mean() - 1
        assert kappa_obs * f == pytest.approx(2 * acc - 1, abs=0.01)


def test_weak_sparse_crowd_accuses_no_honest_annotator():
    """3 responses per item from annotators 55–75 % right: the labels cannot be pinned down (the honest range is
    wide), and before the reference check 12 honest annotators were called near or worse than chance here."""
    sim = dawid_skene(
        n_items=600, n_workers=30, n_classes=2, responses_per_item=3, accuracy=(0.55, 0.75), spammers=5, seed=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        audit = run_audit(sim.responses, n_bootstrap=0, cartel_bootstrap=20, random_state=0)
    v = pd.Series(audit.annotators.verdict, index=audit.annotators.workers)
    roles = pd.Series(sim.role).astype(str).reindex(v.index)
    assert v[roles == "honest"].isin([*ACCEPTABLE, TOO_FEW]).all(), v[roles == "honest"].value_counts()
    undecided = audit.annotators.frame().loc[v.index[(roles == "honest") & (v == TOO_FEW)]]
    assert (
        undecided["why"]
        .str.contains("flagged only against the estimated labels|labels of its items are too uncertain")
        .all()
    )
