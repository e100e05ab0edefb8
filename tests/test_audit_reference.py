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
    same = decide(*f[:3], n, cartel, rule=RULE, p_near=f[3], p_worse=f[4], robust_p_near=f[3], robust_p_worse=f[4])[0]
    assert list(plain) == list(same)  # a reference that is pinned down changes nothing


def test_a_near_chance_flag_must_come_from_the_responses_not_the_prior():
    # the uniform prior on the accuracy already puts P(κ < 0.15) at 0.575 on balanced binary labels and at 0.82
    # for an annotator whose chance accuracy is 0.79 (imbalanced labels): a posterior of 0.6 after 16 responses
    # is then mostly prior, and the flag needs the posterior to exceed the prior too (Bayes factor ≥ 1)
    args = (np.array([0.0, 0.0]), np.array([-0.9, -0.3]), np.array([0.7, 0.3]), np.array([16, 200]), np.zeros(2, bool))
    p_near, prior = np.array([0.6, 0.6]), np.array([0.82, 0.575])
    v, why = decide(*args, rule=RULE, p_near=p_near, p_worse=np.array([0.5, 0.5]), prior_near=prior)
    assert v[0] == TOO_FEW and v[1] == SPAMMER
    assert decide(*args, rule=RULE, p_near=p_near, p_worse=np.array([0.5, 0.5]))[0][0] == SPAMMER  # prior ignored


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


# ------------------------------------------------------------------------------ planted spammers, sparse honest
def _planted(seed: int) -> tuple[pd.Series, pd.Series]:
    """Verdicts on a 600-item binary crowd (20 annotators 65–90 % right, 5 per item) with 5 planted spammers of 60
    uniform random answers each and 10 honest sparse annotators of 15 answers, 80 % right (the leave-self-out
    posterior, the flag at P(κ < 0.15) ≥ ½; a DS fit and no honest range: the reference is the fit's); and the
    sparse annotators' realised number of right answers."""
    from fusion_core.data.responses import Responses
    from fusion_core.diagnostics.audit import accuracy_evidence
    from fusion_core.diagnostics.audit.reference import reference_bounds
    from fusion_core.methods import create

    sim = dawid_skene(n_items=600, n_workers=20, n_classes=2, responses_per_item=5, accuracy=(0.65, 0.9), seed=seed)
    rng = np.random.default_rng(seed + 1000)
    items, truth = sim.truth.index.to_numpy(), sim.truth.to_numpy()
    rows = []
    for s in range(5):
        rows += [(items[i], f"spam{s}", sim.classes[rng.integers(0, 2)]) for i in rng.choice(len(items), 60, False)]
    right = {}
    for h in range(10):
        pick = rng.choice(len(items), 15, replace=False)
        ok = rng.random(15) < 0.8
        rows += [(items[i], f"sparse{h}", truth[i] if r else 1 - truth[i]) for i, r in zip(pick, ok)]
        right[f"sparse{h}"] = int(ok.sum())
    resp = Responses.from_frame(
        pd.concat([sim.responses, pd.DataFrame(rows, columns=["task", "worker", "label"])], ignore_index=True)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = create("ds").fit(resp).result_
    ev = accuracy_evidence(resp, fit.posterior, fit.class_prior, confusion=fit.confusion)
    b = reference_bounds(resp, fit, ev, None, RULE.flag_probability)
    v, _ = decide(
        *(ev.skill, ev.skill_low, ev.skill_high, ev.n_shared, np.zeros(resp.n_workers, bool)),
        rule=RULE,
        n_effective=ev.n_effective,
        p_near=ev.p_near_chance,
        p_worse=ev.p_worse,
        robust_p_near=b.p_near,
        robust_p_worse=b.p_worse,
        robust_skill=b.skill,
        prior_near=ev.prior_near_chance,
        robust_prior_near=b.prior_near,
    )
    return pd.Series(v, index=resp.workers.astype(str)), pd.Series(right)


def test_planted_spammers_with_60_responses_are_flagged_and_sparse_honest_annotators_are_not():
    # sparse annotators right on ≥ 11 of their 15 answers (skill above chance ≥ 0.47) are never flagged; one who
    # happened to be right on 7 or 9 (skill ≤ 0.2, gold interval through 0) may be
    v, right = _planted(seed=0)
    spam, sparse = v[v.index.str.startswith("spam")], v[right.index]
    assert (spam == SPAMMER).sum() >= 4, spam.value_counts()
    assert sparse[right >= 11].isin([*ACCEPTABLE, TOO_FEW]).all(), pd.concat([sparse, right], axis=1)
    assert v[v.index.str.startswith("w")].isin([*ACCEPTABLE, TOO_FEW]).all()


@pytest.mark.slow
def test_planted_spammers_and_sparse_honest_annotators_many_seeds():
    # measured over seeds 0–39 (this session): spammers of 60 answers flagged 0.77 (the flag needs
    # P(κ < 0.15) ≥ 0.575, the uniform prior's own mass below the band on binary labels); sparse annotators right
    # on ≥ 11 of their 15 answers flagged 2/345
    spam, good, good_flagged = [], 0, 0
    for seed in range(40):
        v, right = _planted(seed)
        spam += list(v[v.index.str.startswith("spam")] == SPAMMER)
        s = v[right.index][right >= 11]
        good += len(s)
        good_flagged += int((~s.isin([*ACCEPTABLE, TOO_FEW])).sum())
    print(f"spammers flagged {np.mean(spam):.3f}; sparse annotators right on ≥ 11/15 flagged {good_flagged}/{good}")
    assert np.mean(spam) >= 0.75
    assert good_flagged / good <= 0.02


@pytest.mark.slow
def test_simulated_crowds_flag_precision_and_recall_against_gold():
    """The benchmark's simulated crowds (benchmarks/verdicts_vs_gold.py: 4,000 binary or 3-label items × 5 responses,
    120 zipf-active annotators, 12 spammers, 4 adversaries) on seeds it does not print (20–22): measured (fifth
    session, plausible models averaged) 109 flags, precision 0.945, recall 0.792 of 130 bad annotators (the
    fourth session's rule, their minimum: 107 flags, 0.94 / 0.78; on the benchmark's seeds 0–2 averaging gives
    1.00 / 0.79, the minimum 1.00 / 0.76).  The issue's 0.95 / 0.85 are *not* met here: the misses are honest
    annotators at skill 0.10–0.15 (the audit's skill sits within ±0.08 of the gold one: a coin flip at the band),
    the false flags honest ones at 0.19–0.35 whose 70–230 responses put their estimate below the band; and the
    honest range's low end sits 6–10 points under the labels' true accuracy on these crowds.  This guards the
    measured level."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from verdicts_vs_gold import FLAGS, compare, simulated

    rows = []
    for k in (2, 3):
        for seed in range(20, 23):
            answers, truth = simulated(seed, k)
            rows.append(compare(answers, truth, cartel_bootstrap=200)[0])
    r = pd.concat(rows)
    judged = r[r["band"] != "few gold"]
    bad = judged["band"].isin(["near chance", "worse than chance"])
    flagged = judged["verdict"].isin(FLAGS)
    precision, recall = (flagged & bad).sum() / flagged.sum(), (flagged & bad).sum() / bad.sum()
    print(f"flags {int(flagged.sum())}, precision {precision:.3f}, recall {recall:.3f} of {int(bad.sum())}")
    assert precision >= 0.94 and recall >= 0.78


def test_plausible_models_are_averaged_not_the_most_favourable_one():
    """Models the held-out responses cannot tell apart get equal weight (Bayesian model averaging): the flag reads the
    mean of their probabilities of "below the band", not the smallest.  Here an alternative whose labels follow a
    spammer's makes the spammer look skilled against it; the flag's probability is the average of the two, computed
    by hand from each model's own evidence."""
    from dataclasses import replace

    from fusion_core.data.responses import Responses
    from fusion_core.diagnostics.audit import accuracy_evidence
    from fusion_core.diagnostics.audit.reference import reference_bounds
    from fusion_core.methods import create
    from fusion_core.methods.results import ModelChoice

    sim = dawid_skene(n_items=300, n_workers=8, n_classes=2, responses_per_item=5, spammers=1, seed=3)
    resp = Responses.from_frame(sim.responses)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = create("ds").fit(resp).result_
    spammer = int(np.flatnonzero(sim.role.reindex(resp.workers).to_numpy() == "spammer")[0])
    follows = np.full((resp.n_items, 2), 0.5)  # an alternative that labels each item as the spammer does
    mine = resp.worker == spammer
    follows[resp.item[mine]] = np.eye(2)[resp.label[mine]] * 0.9 + 0.05
    choice = ModelChoice("ds", "held-out likelihood", pd.DataFrame(), ("ds",), ("follows",), (follows,))
    fit2 = replace(fit, selection=choice)
    ev = accuracy_evidence(resp, fit.posterior, fit.class_prior, confusion=fit.confusion)
    alt = accuracy_evidence(resp, follows, fit.class_prior)
    b = reference_bounds(resp, fit2, ev, None, RULE.flag_probability)
    assert ev.p_near_chance[spammer] > 0.9 and alt.p_near_chance[spammer] < 0.1
    np.testing.assert_allclose(b.p_near, (ev.p_near_chance + alt.p_near_chance) / 2)
    np.testing.assert_allclose(b.p_worse, (ev.p_worse + alt.p_worse) / 2)
    np.testing.assert_allclose(b.skill, (ev.skill + alt.skill) / 2)
