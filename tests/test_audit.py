"""The one-click audit: the verdict rule on hand-built cases, the evidence and label figures hand-computed, agreement
intervals, progress, and the verdict oracle on the app's demo crowd (spammers, adversaries, a cartel)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fusion_core.data.dataset import make_dataset
from fusion_core.data.responses import Responses
from fusion_core.diagnostics.agreement import AGREEMENT_STATISTICS, agreement_intervals, fleiss_kappa
from fusion_core.diagnostics.audit import (
    ACCEPTABLE,
    ADVERSARIAL,
    DEPENDENT,
    NOISY,
    RELIABLE,
    SPAMMER,
    TOO_FEW,
    VERDICTS,
    VerdictRule,
    accuracy_evidence,
    decide,
    findings,
    run_audit,
)
from fusion_core.diagnostics.audit.evidence import leave_one_out
from fusion_core.diagnostics.audit.items import ReviewRule, label_quality, review_items
from fusion_core.diagnostics.cartels.words import QUESTION
from fusion_core.diagnostics.krippendorff import krippendorff
from fusion_core.errors import UserInputError
from fusion_core.simulate import dawid_skene
from fusion_core.simulate.demo import crowd_demo

RULE = VerdictRule(level=0.9, min_responses=10, chance_band=0.15, reliable_skill=0.5, max_width=0.4)


# ------------------------------------------------------------------------------------------ the rule
def test_decide_each_branch_on_hand_built_cases():
    #            skill  low    high   n    cartel  expected
    cases = [
        (0.80, 0.70, 0.90, 200, True, DEPENDENT),  # a cartel member, whatever the accuracy
        (0.90, 0.80, 0.95, 9, False, TOO_FEW),  # below the minimum evidence
        (-0.50, -0.60, -0.40, 200, False, ADVERSARIAL),  # interval wholly below 0, estimate below −0.15
        (-0.10, -0.19, -0.03, 200, False, SPAMMER),  # below 0 but close to it: an unlucky guesser
        (0.70, 0.60, 0.80, 200, False, RELIABLE),  # above the band, estimate ≥ 0.5
        (0.35, 0.25, 0.45, 200, False, NOISY),  # above the band, estimate < 0.5
        (0.02, -0.08, 0.12, 200, False, SPAMMER),  # interval wholly below the band
        (0.05, -0.05, 0.25, 200, False, SPAMMER),  # straddles the band, narrow, estimate below
        (0.25, 0.10, 0.40, 200, False, NOISY),  # straddles the band, narrow, estimate above
        (0.30, -0.20, 0.70, 30, False, TOO_FEW),  # straddles the band, too wide to tell
        (-0.10, -0.50, 0.20, 30, False, TOO_FEW),  # could be adversarial or a spammer: too wide
        (np.nan, np.nan, np.nan, 50, False, TOO_FEW),  # undefined (one label on items of that label)
    ]
    skill, low, high, n, cartel, expected = (np.array(c, dtype=object) for c in zip(*cases))
    verdict, reason = decide(
        skill.astype(float), low.astype(float), high.astype(float), n.astype(int), cartel.astype(bool), rule=RULE
    )
    assert list(verdict) == list(expected)
    assert all(isinstance(r, str) and r for r in reason)
    assert set(verdict) <= set(VERDICTS)


def test_thresholds_move_the_decisions():
    skill, low, high = np.array([0.45]), np.array([0.35]), np.array([0.55])
    base = decide(skill, low, high, np.array([100]), np.array([False]), rule=RULE)[0]
    stricter = decide(skill, low, high, np.array([100]), np.array([False]), rule=VerdictRule(reliable_skill=0.4))[0]
    assert base[0] == NOISY and stricter[0] == RELIABLE
    few = decide(skill, low, high, np.array([100]), np.array([False]), rule=VerdictRule(min_responses=101))[0]
    assert few[0] == TOO_FEW
    assert "0.15" in RULE.describe() and "10 responses" in RULE.describe()


# ------------------------------------------------------------------------------------------ the evidence
def test_accuracy_evidence_hand_computed():
    # a: right on 9 of 10 shared items, b and c right on all; item t10 only a labelled (no evidence about a)
    rows = [(f"t{i}", "a", "x" if i != 0 else "y") for i in range(10)] + [("t10", "a", "y")]
    rows += [(f"t{i}", w, "x") for i in range(10) for w in ("b", "c")]
    resp = Responses.from_frame(pd.DataFrame(rows, columns=["task", "worker", "label"]))
    post = np.zeros((resp.n_items, 2))
    truth = np.array([0 if t != "t10" else 1 for t in resp.items])  # all x except t10
    x, y = list(resp.classes).index("x"), list(resp.classes).index("y")
    post[np.arange(resp.n_items), np.where(truth == 0, x, y)] = 1.0
    prior = np.array([0.5, 0.5])
    ev = accuracy_evidence(resp, post, prior, level=0.9)
    a = list(ev.workers).index("a")
    assert ev.n_responses[a] == 11 and ev.n_shared[a] == 10 and ev.correct[a] == pytest.approx(9.0)
    # certain labels: the leave-self-out one-coin posterior is Beta(1 + 9, 1 + 1) itself (on a grid)
    assert ev.accuracy[a] == pytest.approx(10 / 12, abs=1e-3)
    assert ev.accuracy_low[a] == pytest.approx(stats.beta.ppf(0.05, 10, 2), abs=2e-3)
    assert ev.accuracy_high[a] == pytest.approx(stats.beta.ppf(0.95, 10, 2), abs=2e-3)
    assert ev.chance[a] == pytest.approx(0.5)  # 9 x and 1 y under a uniform prior
    assert ev.skill[a] == pytest.approx((10 / 12 - 0.5) / 0.5, abs=2e-3)
    # P(κ < 0.15) = P(a < 0.575) and P(κ < 0) = P(a < 0.5) under Beta(10, 2)
    assert ev.p_near_chance is not None and ev.p_worse is not None
    assert ev.p_near_chance[a] == pytest.approx(stats.beta.cdf(0.575, 10, 2), abs=2e-3)
    assert ev.p_worse[a] == pytest.approx(stats.beta.cdf(0.5, 10, 2), abs=2e-3)
    assert ev.prior_near_chance is not None and ev.prior_near_chance[a] == pytest.approx(0.575)  # U(0, 1) below
    # certain labels: the one-coin posterior is Beta(10, 2) itself (on a grid), worth its 10 responses
    assert ev.n_effective is not None and ev.n_effective[a] == pytest.approx(10, abs=0.1)
    # … so 10 responses on certain labels still reach min_responses (the grid's 9.99 is not "too few")
    args = (ev.skill, ev.skill_low, ev.skill_high, ev.n_shared, np.zeros(len(ev.skill), bool))
    assert decide(*args, rule=RULE, n_effective=ev.n_effective)[0][a] != TOO_FEW
    b = list(ev.workers).index("b")
    assert ev.accuracy[b] == pytest.approx(11 / 12, abs=1e-3) and ev.n_shared[b] == 10


def test_accuracy_evidence_on_labels_the_model_cannot_tell():
    # 200 binary items, 3 annotators agreeing on everything, but the posterior is 1/2 everywhere (a model that
    # cannot call the labels): C/n = 1/2 would give a narrow Beta(101, 101) interval — "near chance" — yet the
    # responses say nothing about the annotators' accuracy: the posterior against the others' labels stays flat
    # (interval 0.05–0.95, P(κ < 0.15) = the prior's 0.575), worth 0 responses, so "not enough to tell"
    rows = [(f"t{i}", w, i % 2) for i in range(200) for w in ("a", "b", "c")]
    resp = Responses.from_frame(pd.DataFrame(rows, columns=["task", "worker", "label"]))
    ev = accuracy_evidence(resp, np.full((resp.n_items, 2), 0.5), np.array([0.5, 0.5]), level=0.9)
    assert np.allclose(ev.accuracy_low, 0.05, atol=2e-3) and np.allclose(ev.accuracy_high, 0.95, atol=2e-3)
    assert ev.p_near_chance is not None and np.allclose(ev.p_near_chance, 0.575, atol=2e-3)
    assert ev.n_effective is not None and np.allclose(ev.n_effective, 0.0, atol=0.1)
    args = (ev.skill, ev.skill_low, ev.skill_high, ev.n_shared, np.zeros(3, bool))
    verdict, why = decide(*args, rule=RULE, n_effective=ev.n_effective, p_near=ev.p_near_chance, p_worse=ev.p_worse)
    assert set(verdict) == {TOO_FEW} and all("too uncertain" in w for w in why)


def test_accuracy_evidence_leaves_the_annotator_out():
    # two annotators on 100 binary items, a agrees with b on 60, both with the confusion [[.6, .4], [.4, .6]]: the
    # posterior with both votes is 0.69 on agreeing items and 1/2 on the others, so a's own vote would flatter a.
    # With a's vote divided out the posterior is b's vote alone (0.6 sure): a's report has probability
    # 0.4 + 0.2 acc on the 60 agreeing items and 0.6 − 0.2 acc on the 40 others (u = 1 − q on two labels)
    rng = np.random.default_rng(0)
    b = rng.integers(0, 2, 100)
    a = np.where(np.arange(100) < 60, b, 1 - b)
    rows = [(f"t{i}", "a", a[i]) for i in range(100)] + [(f"t{i}", "b", b[i]) for i in range(100)]
    resp = Responses.from_frame(pd.DataFrame(rows, columns=["task", "worker", "label"]))
    theta = np.array([[0.6, 0.4], [0.4, 0.6]])
    conf = np.stack([theta, theta])
    pos = np.array([list(resp.items).index(f"t{i}") for i in range(100)])
    lik = np.ones((resp.n_items, 2))
    for votes in (a, b):
        lik[pos] *= theta[:, votes].T
    post = lik / lik.sum(axis=1, keepdims=True)
    ev = accuracy_evidence(resp, post, np.array([0.5, 0.5]), level=0.9, confusion=conf)
    # the one-coin posterior of a's accuracy under a uniform prior, hand-computed on a fine grid, as responses
    x = np.linspace(0, 1, 200001)
    ll = 60 * np.log(0.4 + 0.2 * x) + 40 * np.log(0.6 - 0.2 * x)
    p = np.exp(ll - ll.max())
    p /= p.sum()
    m = (p * x).sum()
    v = (p * (x - m) ** 2).sum()
    assert ev.n_effective is not None
    assert ev.n_effective[list(ev.workers).index("a")] == pytest.approx(m * (1 - m) / v - 3, rel=0.02)


def test_leave_one_out_without_a_confusion_uses_true_by_reported_counts():
    # one annotator, two labels, without the fit's confusion: θ from its expected counts, rows true, columns
    # reported, half a response of smoothing — true 0: reported 0 on 0.9 + 0.2, 1 on 0.3 → (1.6, 0.8)/2.4;
    # true 1: reported 0 on 0.1 + 0.8, 1 on 0.7 → (1.4, 1.2)/2.6
    q = np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7]])
    label = np.array([0, 0, 1])
    theta = np.array([[1.6 / 2.4, 0.8 / 2.4], [1.4 / 2.6, 1.2 / 2.6]])
    q_rep, u = leave_one_out(q, np.zeros(3, dtype=np.int64), label, 1, None)
    loo = q / theta[:, label].T
    loo /= loo.sum(axis=1, keepdims=True)
    assert q_rep == pytest.approx(loo[np.arange(3), label])
    assert u == pytest.approx(1 - q_rep)  # two labels: a wrong annotator reports the other one


def test_label_quality_and_review_hand_computed():
    post = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8]])
    labels = np.array([0, 0, 1])
    q = label_quality(post, labels, level=0.9, gold_hits=(2, 3))
    p = np.array([0.9, 0.6, 0.8])
    half = stats.norm.ppf(0.95) * np.sqrt((p * (1 - p)).sum()) / 3
    assert q.accuracy == pytest.approx(p.mean()) and q.low == pytest.approx(p.mean() - half)
    assert (
        q.high == pytest.approx(min(1.0, p.mean() + half)) and q.gold_accuracy == pytest.approx(2 / 3) and q.n_gold == 3
    )

    rows = [("i1", "a", "p"), ("i1", "b", "p"), ("i1", "c", "p"), ("i2", "a", "p"), ("i2", "b", "n")]
    rows += [("i3", "a", "n"), ("i3", "b", "n"), ("i3", "c", "p")]
    resp = Responses.from_frame(pd.DataFrame(rows, columns=["task", "worker", "label"]))
    post = np.array([[0.05, 0.95], [0.3, 0.7], [0.5, 0.5]])  # classes n, p
    label = np.array([1, 1, 1])
    majority = np.array([1, 1, 0])
    r = review_items(resp, post, label, majority, ReviewRule(min_confidence=0.9, min_responses=3))
    assert r.low_confidence.tolist() == [False, True, True]
    assert r.disagrees.tolist() == [False, False, True]
    assert r.few_responses.tolist() == [False, True, False]
    assert r.counts().iloc[-1] == 2
    table = r.frame()
    assert list(table.index) == ["i3", "i2"]  # least confident first
    assert table.loc["i3", "why"] == "low confidence; differs from majority vote"
    assert list(r.changes().index) == ["i3"] and r.changes().loc["i3", "majority vote"] == "n"


def test_agreement_intervals_match_the_point_estimates_and_cover_them():
    sim = dawid_skene(n_items=300, n_workers=8, n_classes=3, responses_per_item=4, seed=3)
    resp = Responses.from_frame(sim.responses)
    e, a = agreement_intervals(resp, n_bootstrap=300, level=0.9, random_state=1)
    assert [s.key for s in AGREEMENT_STATISTICS] == ["fleiss_kappa", "krippendorff_alpha"]
    assert e.value == pytest.approx(fleiss_kappa(resp))
    assert e.low < e.value < e.high and e.n_valid == 300
    assert e.high - e.low < 0.2
    # one stream of item resamples for both: α's interval is the one α gets alone from the same seed
    alone = krippendorff(resp, metric="nominal", n_bootstrap=300, level=0.9, random_state=1)
    assert (a.value, a.low, a.high, a.statistic) == (alone.value, alone.low, alone.high, alone.statistic)


# ------------------------------------------------------------------------------------------ the runner
def _demo_dataset(seed: int):
    d = crowd_demo(seed)
    resp = Responses.from_frame(d.responses)
    return make_dataset(resp, name=f"demo {seed}", source="demo", gold=d.truth, roles=d.roles), d.roles


def test_run_audit_progress_is_monotone_and_estimates_time_left(monkeypatch):
    from fusion_core.diagnostics.audit import runner

    ticks = iter(range(10**9))
    monkeypatch.setattr(runner, "_now", lambda: 0.01 * next(ticks))  # 10 ms per reading, whatever the machine's speed
    ds, _ = _demo_dataset(0)
    events = []
    audit = run_audit(ds, n_bootstrap=100, cartel_bootstrap=50, progress=events.append)
    fractions = [e.fraction for e in events]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and fractions[0] == 0.0
    inside_fit = [e.fraction for e in events if "Fitting the recommended model (fit" in e.stage]
    assert len(set(inside_fit)) >= 3 and min(inside_fit) > 0 and max(inside_fit) < 0.3  # progress inside the fit
    assert any("bootstrap test" in e.stage for e in events)  # and inside the cartel test
    assert any(e.seconds_left is not None and e.seconds_left >= 0 for e in events)
    assert events[-1].seconds_left == pytest.approx(0.0)
    assert [t.stage for t in audit.timings] == ["fit", "agreement", "cartel", "verdicts"]
    assert audit.fit.method == "auto" and "recommended method" in audit.method


def test_audit_result_fields_on_the_demo():
    ds, roles = _demo_dataset(1)
    audit = run_audit(ds, n_bootstrap=200, cartel_bootstrap=100)
    assert audit.n_workers == 24 and audit.n_items == 400
    table = audit.annotators.frame()
    assert len(table) == 24 and set(table.index) == set(ds.responses.workers)  # every annotator, worst first
    severity = [VERDICTS.index(v) for v in table["verdict"]]
    assert severity == sorted(severity)
    assert audit.cartel.status == "groups_found"
    assert audit.labels.low <= audit.labels.accuracy <= audit.labels.high
    assert audit.labels.gold_accuracy is not None and abs(audit.labels.gold_accuracy - audit.labels.accuracy) < 0.05
    assert len(audit.agreement) == len(AGREEMENT_STATISTICS)
    for est in audit.agreement:
        assert est.low <= est.value <= est.high
    majority_changed = audit.review.changes()
    assert len(majority_changed) == int(audit.review.disagrees.sum()) > 0
    answers = findings(audit)
    assert answers[0].question == "Whom can I trust?"
    assert all(f.answer for f in answers)


def test_multiclass_crowd_verdicts_and_cartel_could_not_run():
    sim = dawid_skene(n_items=600, n_workers=20, n_classes=3, responses_per_item=6, spammers=3, adversarial=2, seed=4)
    roles = pd.Series(sim.role).astype(str)
    audit = run_audit(sim.responses, n_bootstrap=50)
    assert audit.cartel.status == "could_not_run" and "two labels" in audit.cartel.reason
    v = pd.Series(audit.annotators.verdict, index=audit.annotators.workers)
    roles = roles.reindex(v.index)
    assert (v[roles == "spammer"] == SPAMMER).all()
    assert (v[roles == "adversarial"] == ADVERSARIAL).all()
    assert v[roles == "honest"].isin(ACCEPTABLE).all()


def test_few_responses_are_not_judged():
    sim = dawid_skene(n_items=300, n_workers=10, n_classes=2, responses_per_item=5, seed=2)
    extra = pd.DataFrame({"task": sim.responses["task"].unique()[:4], "worker": "newcomer", "label": 0})
    audit = run_audit(pd.concat([sim.responses, extra], ignore_index=True), n_bootstrap=0, cartel_bootstrap=20)
    v = pd.Series(audit.annotators.verdict, index=audit.annotators.workers)
    assert v["newcomer"] == TOO_FEW
    fleiss = audit.agreement_of("fleiss_kappa")
    assert fleiss is not None and np.isnan(fleiss.low)  # no bootstrap asked: no interval


# ------------------------------------------------------------------------------------------ the oracle
def _oracle(seeds) -> tuple[dict[str, float], float, int]:
    """Share of each bad kind flagged with its own verdict, and share of honest annotators flagged."""
    hits: dict[str, list[bool]] = {"spammer": [], "adversary": [], "cartel": []}
    honest_flags: list[bool] = []
    for seed in seeds:
        ds, roles = _demo_dataset(seed)
        audit = run_audit(ds, n_bootstrap=50, cartel_bootstrap=100, random_state=seed)
        v = pd.Series(audit.annotators.verdict, index=audit.annotators.workers).reindex(roles.index)
        hits["spammer"] += list(v[roles == "spammer"] == SPAMMER)
        hits["adversary"] += list(v[roles == "adversary"] == ADVERSARIAL)
        hits["cartel"] += list(v[roles.str.startswith("cartel")] == DEPENDENT)
        honest_flags += list(~v[roles == "honest"].isin(ACCEPTABLE))
    return {k: float(np.mean(x)) for k, x in hits.items()}, float(np.mean(honest_flags)), len(honest_flags)


def test_demo_verdict_oracle_few_seeds():
    rates, false_flags, _ = _oracle(range(3))
    assert all(r >= 0.9 for r in rates.values()), rates
    assert false_flags <= 0.05


@pytest.mark.slow
def test_demo_verdict_oracle_many_seeds():
    rates, false_flags, n_honest = _oracle(range(30))
    print(f"hit rates {rates}; honest annotators flagged {false_flags:.3f} of {n_honest}")
    assert all(r >= 0.9 for r in rates.values()), rates
    assert false_flags <= 0.05


def test_independent_binary_crowd_no_cartel_found_and_said_so():
    sim = dawid_skene(n_items=400, n_workers=12, n_classes=2, responses_per_item=8, spammers=2, seed=7)
    audit = run_audit(sim.responses, n_bootstrap=50, cartel_bootstrap=100)
    assert audit.cartel.status == "no_evidence" and audit.cartel.groups == ()
    answer = next(f.answer for f in findings(audit) if f.question == QUESTION)
    assert answer.startswith("No dependent group (copies or collusion) found (the test ran).") and answer.endswith(".")
    assert "collud" not in answer and "cartel" not in answer
    v = pd.Series(audit.annotators.verdict, index=audit.annotators.workers)
    roles = pd.Series(sim.role).astype(str).reindex(v.index)
    assert (v[roles == "spammer"] == SPAMMER).all() and v[roles == "honest"].isin(ACCEPTABLE).all()


def test_tiny_data_falls_back_to_dawid_skene_and_says_why():
    single = pd.DataFrame(
        {
            "task": [f"t{i}" for i in range(30)],
            "worker": [f"w{i % 5}" for i in range(30)],
            "label": ["a", "b", "b"] * 10,
        }
    )
    audit = run_audit(single, n_bootstrap=20, cartel_bootstrap=20)
    assert audit.fit.method == "ds" and any("could not compare methods" in w for w in audit.warnings)
    assert set(audit.annotators.verdict) == {TOO_FEW}  # nobody shares an item with anyone
    agreement = next(f.answer for f in findings(audit) if f.question == "Do annotators agree?")
    assert agreement.startswith("Agreement could not be measured.")
    assert audit.cartel.status == "could_not_run"
    with pytest.raises(UserInputError, match="only 1 annotator"):
        run_audit(single.assign(worker="w0"))


def test_audit_options_are_declared_once_and_checked_before_any_work(capsys):
    import inspect

    from fusion_core.cli import main
    from fusion_core.diagnostics.audit_options import AUDIT_OPTIONS
    from fusion_core.diagnostics.cartels.collusion import DEFAULTS as COLLUSION

    sig = inspect.signature(run_audit)
    assert list(sig.parameters)[1:] == list(AUDIT_OPTIONS)
    assert all(sig.parameters[n].default == p.default for n, p in AUDIT_OPTIONS.items())
    assert all(f"{n} : " in (run_audit.__doc__ or "") for n in AUDIT_OPTIONS)
    assert (AUDIT_OPTIONS["cartel_bootstrap"].default, AUDIT_OPTIONS["cartel_alpha"].default) == (
        COLLUSION.n_bootstrap,
        COLLUSION.alpha,
    )
    df = pd.DataFrame({"task": [1, 1, 2, 2], "worker": list("abab"), "label": list("xxyx")})
    for name, bad in [("n_bootstrap", -1), ("cartel_alpha", 1.0), ("label_type", "graded"), ("rule", 3)]:
        with pytest.raises(UserInputError, match=f"'{name}' must be"):
            run_audit(df, **{name: bad})
    with pytest.raises(TypeError, match="unknown option"):
        run_audit(df, n_boostrap=10)
    # the report command reads the same declaration, and checks a flag before reading the file
    assert main(["report", "missing.csv", "--out", "r.html", "--bootstrap", "-1"]) == 2
    assert "--bootstrap must be a whole number ≥ 0; got -1." in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ failure shapes (issue 26)
def _function_verdicts(seed: int, n_items: int, method: str) -> pd.Series:
    from fusion_core.simulate.weak import labelling_functions

    sim = labelling_functions(n_items=n_items, spammers=2, seed=seed)
    if method == "audit":
        audit = run_audit(sim.responses, n_bootstrap=0, cartel_bootstrap=20, random_state=seed)
        v = pd.Series(audit.annotators.verdict, index=audit.annotators.workers)
    else:
        from fusion_core.methods import create

        resp = Responses.from_frame(sim.responses)
        fit = create(method).fit(resp).result_
        ev = accuracy_evidence(resp, fit.posterior, fit.class_prior, level=RULE.level, confusion=fit.confusion)
        args = (ev.skill, ev.skill_low, ev.skill_high, ev.n_shared, np.zeros(len(ev.skill), bool))
        v = pd.Series(decide(*args, n_effective=ev.n_effective)[0], index=ev.workers)
    roles = sim.role
    return v[roles.reindex(v.index) == "function"]


def test_one_class_labelling_functions_are_never_called_near_chance():
    # labelling functions vote one class and abstain elsewhere (fusion_core.simulate.weak): no model of independent
    # annotators identifies them, its posterior stays near the prior, and the old fractional-count evidence called
    # every function (precision 0.75-0.98) "near chance" with a narrow interval; it cannot tell, so it must say so
    v = _function_verdicts(seed=1, n_items=400, method="mace")
    assert len(v) == 10 and not (v == SPAMMER).any() and not (v == ADVERSARIAL).any(), v.value_counts()


@pytest.mark.slow
def test_labelling_functions_audit_many_seeds():
    for seed in range(8):
        v = _function_verdicts(seed=seed, n_items=2000, method="audit")
        assert not v.isin([SPAMMER, ADVERSARIAL, DEPENDENT]).any(), (seed, v.value_counts())


def test_undecided_for_uncertain_labels_says_so():
    args = (np.array([0.1]), np.array([-0.8]), np.array([0.9]), np.array([300]), np.array([False]))
    v, why = decide(*args, rule=RULE, n_effective=np.array([2.0]))
    assert v[0] == TOO_FEW and "too uncertain" in why[0] and "300 responses weigh like 2" in why[0]
    assert "more responses needed" in decide(*args, rule=RULE, n_effective=np.array([290.0]))[1][0]


def test_majority_class_annotator_on_imbalanced_labels_is_near_chance():
    # 85/15 labels: an annotator who always answers the majority class is right 85 % of the time and near chance
    # (skill above chance with its own label shares; an honest crowd of 0.85–0.95); on 1,000 responses (κ is 1/0.15 times as uncertain as the
    # accuracy here: 300 responses leave "not enough to tell") its responses are worth enough evidence to judge it
    sim = dawid_skene(
        n_items=1200,
        n_workers=12,
        n_classes=2,
        responses_per_item=5,
        accuracy=(0.85, 0.95),
        class_prior=[0.85, 0.15],
        seed=3,
    )
    lazy = pd.DataFrame({"task": sim.truth.index[:1000], "worker": "lazy", "label": sim.classes[0]})
    resp = Responses.from_frame(pd.concat([sim.responses, lazy], ignore_index=True))
    from fusion_core.methods import create

    fit = create("ds").fit(resp).result_
    ev = accuracy_evidence(resp, fit.posterior, fit.class_prior, level=RULE.level, confusion=fit.confusion)
    args = (ev.skill, ev.skill_low, ev.skill_high, ev.n_shared, np.zeros(len(ev.skill), bool))
    v = pd.Series(decide(*args, n_effective=ev.n_effective)[0], index=ev.workers)
    at = list(ev.workers).index("lazy")
    assert ev.n_effective is not None and ev.n_effective[at] > 100
    assert v["lazy"] == SPAMMER and ev.accuracy[at] > 0.75
    assert v.drop("lazy").isin(ACCEPTABLE).all(), v.value_counts()
