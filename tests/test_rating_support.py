"""Which model the rating verdicts of ordered levels come from (issue 26 item 3, issue 21 item 5): the latent scale
of ``ordinal-em`` only when held-out ratings support it against ``ordinal-ds``, else ``ordinal-ds``'s confusion
rows read on the scale.  Hand-computed readings of confusion rows, the gate's rule on hand-built held-out scores,
the wiring through the audit; many-seed simulator oracles behind ``slow``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fusion_core.data.responses import as_responses
from fusion_core.diagnostics.audit import ratings as audit_ratings
from fusion_core.diagnostics.audit import run_audit
from fusion_core.diagnostics.rating_support import (
    SUPPORT_SE,
    ScaleSupport,
    _decide,
    confusion_verdicts,
    in_level_order,
    scale_reading,
    scale_support,
)
from fusion_core.diagnostics.rating_verdicts import ORDINAL_RULE, decide
from fusion_core.methods.auto import candidate
from fusion_core.methods.auto.scoring import CandidateScore
from fusion_core.methods.ordinal import with_levels
from fusion_core.simulate.graded import probit_graders
from fusion_core.simulate.ratings import ordinal_crowd

PRIOR = np.full(3, 1 / 3)


def _rows(*rows: list[list[float]]) -> np.ndarray:
    return np.array(rows, dtype=float) * 1e6  # counts large enough that the pseudo-response does not matter


def test_scale_reading_by_hand():
    perfect = np.eye(3)
    shifted = [[0, 1, 0], [0, 0, 1], [0, 0, 1]]  # one level up, capped at the top
    uniform = np.full((3, 3), 1 / 3)
    reversed_ = perfect[::-1]
    bias, noise, rel = scale_reading(_rows(perfect, shifted, uniform, reversed_), PRIOR, alpha=0.0)
    # perfect: no error; shifted: errors +1, +1, 0 → bias 2/3, sd √(2/9); uniform: l independent of k
    np.testing.assert_allclose(bias, [0, 2 / 3, 0, 0], atol=1e-9)
    np.testing.assert_allclose(noise[:2], [0, np.sqrt(2 / 9)], atol=1e-9)
    # uniform: Var(l − k) = Var(l) + Var(k) = 2 · 2/3; reversed: errors 2, 0, −2 → sd √(8/3)
    np.testing.assert_allclose(noise[2:], [np.sqrt(4 / 3), np.sqrt(8 / 3)], atol=1e-9)
    # shifted: l = (1, 2, 2) for k = (0, 1, 2): cov 1/3, Var l 2/9, Var k 2/3 → corr² = (1/9) / (4/27) = 3/4
    np.testing.assert_allclose(rel, [1, 0.75, 0, -1], atol=1e-9)


def test_decide_reads_near_chance_from_the_reliability_interval():
    n = 4
    ratings = np.full(n, 50)
    bias, noise = np.zeros(n), np.full(n, 0.4)
    ci_b, ci_n = (bias - 0.1, bias + 0.1), (noise - 0.1, noise + 0.1)
    rho = np.array([0.1, 0.1, 0.3, 0.9])
    high = np.array([0.45, 0.55, 0.5, 0.95])  # the margin: 1 / (1 + ½² · (1/0.2 − 1)) = 0.5
    words, why = decide(
        ratings, bias, ci_b, noise, ci_n, valid=np.ones(n), rule=ORDINAL_RULE, scale_sd=1.0, unit="levels",
        reliability=(rho, high),
    )  # fmt: skip
    assert list(words[:1]) == ["near chance"] and "reliability 0.10" in why[0]
    assert words[1] != "near chance" and words[2] != "near chance" and words[3] == "reliable"


def _score(name: str, item_sums: np.ndarray) -> CandidateScore:
    return CandidateScore(name, splits=[item_sums[:, None]], hidden=[float(len(item_sums))])


def test_the_better_predictor_of_held_out_ratings_leads():
    rng = np.random.default_rng(0)
    base = rng.normal(-1.0, 0.5, size=400)
    noise = rng.normal(0.0, 0.1, size=400)
    # rival better by 0.005 nats per rating, SE of the paired gap ≈ 0.1 / √400 = 0.005 (z ≈ 1)
    latent, close = _score("ordinal-em", base), _score("ordinal-ds", base + 0.005 + noise - noise.mean())
    lost = _decide(latent, close, SUPPORT_SE, 400)
    assert not lost.supported and 0.5 < lost.gap / lost.se < 1.5 and "confusion rows" in lost.words()
    assert _decide(latent, close, 2.0, 400).supported  # auto's 2 SE would keep the simpler model
    kept = _decide(_score("ordinal-em", base + 0.01 + noise), _score("ordinal-ds", base), SUPPORT_SE, 400)
    assert kept.supported and kept.gap < 0 and "latent scale" in kept.words()


def test_confusion_verdicts_find_spammers_and_a_lenient_grader():
    rng = np.random.default_rng(1)
    n_items, k = 240, 4
    truth = rng.integers(0, k, n_items)
    rows = []
    for j in range(8):  # 5 good graders, one lenient by a level, two spammers (uniform)
        for i in range(n_items):
            if j < 5:
                label = truth[i] if rng.random() < 0.85 else int(np.clip(truth[i] + rng.choice([-1, 1]), 0, k - 1))
            elif j == 5:
                label = min(truth[i] + 1, k - 1)
            else:
                label = int(rng.integers(0, k))
            rows.append((f"t{i}", f"g{j}", label))
    resp = with_levels(as_responses(pd.DataFrame(rows, columns=["task", "worker", "label"])), "numeric")
    fit = candidate("ordinal-ds").fit(resp).result_
    v = confusion_verdicts(resp, *in_level_order(fit, resp), n_bootstrap=30)
    verdict = v.table["verdict"]
    assert v.model == "ordinal-ds"
    assert list(verdict[["g6", "g7"]]) == ["near chance", "near chance"]
    assert "lenient" in verdict["g5"]
    assert (verdict[[f"g{j}" for j in range(5)]] == "reliable").all(), verdict.tolist()


def test_the_audit_takes_the_confusion_reading_when_the_scale_is_not_supported(monkeypatch):
    sim = ordinal_crowd(n_items=150, n_workers=8, n_lenient=2, n_harsh=1, n_noisy=1, seed=2)
    answers = sim.responses
    monkeypatch.setattr(audit_ratings, "scale_support", lambda resp: ScaleSupport(False, -1.2, -1.0, 0.2, 0.01, 99))
    audit = run_audit(
        answers, method="ordinal-ds", n_bootstrap=0, cartel_bootstrap=20, rating_bootstrap=20, label_type="ordinal"
    )
    v = audit.ratings
    assert v is not None and v.model == "ordinal-ds" and v.fit is audit.fit  # the audit's own fit, reused
    assert "better than one latent scale" in v.basis
    lenient = sim.role[sim.role == "lenient"].index
    assert v.table.loc[lenient, "verdict"].str.contains("lenient").all()
    monkeypatch.setattr(audit_ratings, "scale_support", lambda resp: ScaleSupport(True, -1.0, -1.0, 0.0, 0.01, 99))
    kept = audit_ratings.rating_verdicts_for(answers, "ordinal", n_bootstrap=20)
    assert kept is not None and kept.model == "ordinal-em" and "at least as well" in kept.basis


def test_in_level_order_puts_a_fit_in_the_declared_order():
    from types import SimpleNamespace

    levels = ["poor", "fair", "good"]
    answers = pd.DataFrame({"task": ["a", "a", "b"], "worker": ["x", "y", "x"], "label": ["good", "poor", "fair"]})
    ordered = with_levels(as_responses(answers), levels)
    fit_classes = pd.Index(["fair", "good", "poor"])  # a fit in sorted text order
    post = np.array([[0.2, 0.7, 0.1], [0.6, 0.3, 0.1]])
    conf = np.arange(2 * 9, dtype=float).reshape(2, 3, 3)
    fit = SimpleNamespace(classes=fit_classes, posterior=post, class_prior=np.array([0.5, 0.3, 0.2]), confusion=conf)
    q, prior, c = in_level_order(fit, ordered)
    order = [2, 0, 1]  # poor, fair, good in the fit's columns
    np.testing.assert_array_equal(q, post[:, order])
    np.testing.assert_array_equal(prior, [0.2, 0.5, 0.3])
    assert c[1, 0, 2] == conf[1, 2, 1]  # true poor, reported good


# ------------------------------------------------------------------------------------------ simulator oracles
def _flags(table: pd.DataFrame) -> pd.Series:
    return table["verdict"].str.contains("near chance", regex=False)


@pytest.mark.slow
def test_gate_keeps_the_latent_scale_on_ordered_probit_crowds():
    kept = 0
    for seed in range(5):
        sim = ordinal_crowd(
            n_items=800, n_workers=30, n_lenient=4, n_harsh=4, n_noisy=4, n_chance=3, seed=seed
        )  # fmt: skip
        resp = with_levels(as_responses(sim.responses), "numeric")
        kept += scale_support(resp).supported
        v = audit_ratings.rating_verdicts_for(sim.responses, "ordinal", n_bootstrap=40, random_state=seed)
        assert v is not None
        called = _flags(v.table).reindex(sim.role.index)
        truly = sim.role == "near chance"
        assert (called & truly).sum() == called.sum() and (called & truly).sum() >= 2  # precision 1, recall ≥ 2/3
    assert kept == 5


@pytest.mark.slow
def test_gate_hands_graders_who_use_the_scale_differently_to_the_confusion_reading():
    for seed in range(4):
        sim = probit_graders(n_items=1000, n_workers=40, threshold_jitter=0.8, seed=seed)
        answers = sim.responses.copy()
        spam = answers["worker"].isin([f"g{j}" for j in range(36, 40)]).to_numpy()
        answers.loc[spam, "label"] = np.random.default_rng(seed).integers(1, 6, size=int(spam.sum()))
        resp = with_levels(as_responses(answers), "numeric")
        assert not scale_support(resp).supported
        v = audit_ratings.rating_verdicts_for(answers, "ordinal", n_bootstrap=40, random_state=seed)
        assert v is not None and v.model == "ordinal-ds"
        called = _flags(v.table)
        spammers = pd.Index([f"g{j}" for j in range(36, 40)])
        assert called[spammers].all() and called.sum() == len(spammers), v.table.loc[called, "verdict"]
