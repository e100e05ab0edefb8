"""Verdicts for ordinal and numeric ratings (issue 13 item 5): simulated crowds with known lenient, harsh, noisy
and near-chance annotators are flagged as such (≥ 90 % of each kind) while reliable ones are rarely flagged
(≤ 5 %); the minimum-evidence rule and the interval logic on hand-made cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fusion_core.diagnostics.rating_verdicts import (
    FLAGS,
    NUMERIC_RULE,
    ORDINAL_RULE,
    RatingVerdicts,
    decide,
    numeric_verdicts,
    ordinal_verdicts,
)
from fusion_core.errors import UserInputError
from fusion_core.methods.ordinal import LENIENT_BIAS, NOISY_NOISE
from fusion_core.simulate.ratings import numeric_crowd, ordinal_crowd

KINDS = ("lenient", "harsh", "noisy", "near chance")


def _score(runs: list[tuple[RatingVerdicts, pd.Series]]) -> dict[str, float]:
    """Share of each kind whose verdict names it, and share of reliable annotators given any flag."""
    hit: dict[str, list[bool]] = {k: [] for k in KINDS}
    misflag: list[bool] = []
    for v, role in runs:
        verdict = v.table["verdict"].reindex(role.index)
        for w, r in role.items():
            if r == "reliable":
                misflag.append(any(f in verdict[w] for f in FLAGS))
            else:
                hit[r].append(r in verdict[w])
    out = {k: float(np.mean(h)) for k, h in hit.items() if h}
    out["misflagged"] = float(np.mean(misflag))
    return out


def _ordinal(seed: int, n_bootstrap: int) -> tuple[RatingVerdicts, pd.Series]:
    sim = ordinal_crowd(n_items=400, n_workers=20, n_lenient=4, n_harsh=4, n_noisy=4, n_chance=2, seed=seed)
    return ordinal_verdicts(sim.responses, n_bootstrap=n_bootstrap, random_state=seed), sim.role


def _numeric(seed: int, n_bootstrap: int) -> tuple[RatingVerdicts, pd.Series]:
    sim = numeric_crowd(n_items=300, n_workers=20, n_lenient=4, n_harsh=4, n_noisy=4, n_chance=2, seed=seed)
    return numeric_verdicts(sim.responses, n_bootstrap=n_bootstrap, random_state=seed), sim.role


def _check_oracle(score: dict[str, float]) -> None:
    for kind in KINDS:
        assert score[kind] >= 0.9, score
    assert score["misflagged"] <= 0.05, score


def test_ordinal_verdicts_flag_each_kind():
    runs = [_ordinal(seed, 40) for seed in (0, 1)]
    _check_oracle(_score(runs))
    v = runs[0][0]
    assert v.kind == "ordinal" and v.unit == "levels" and v.rule == ORDINAL_RULE
    t = v.table
    assert (t["bias_low"] <= t["bias"] + 0.2).all() and (t["bias_low"] <= t["bias_high"]).all()
    assert (t["noise_low"] > 0).all() and t["reason"].str.len().gt(10).all()
    assert 1.3 < v.scale_sd < 1.55  # uniform true levels 0…4: sd √2


def test_numeric_verdicts_flag_each_kind():
    runs = [_numeric(seed, 40) for seed in (0, 1)]
    _check_oracle(_score(runs))
    v, _ = runs[0]
    assert v.kind == "numeric" and 8 < v.scale_sd < 12  # truth_sd 10
    assert set(v.counts()) <= {"reliable", "lenient", "harsh", "noisy", "near chance", "not enough ratings to tell"}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ordinal", "numeric"])
def test_verdict_oracle_many_seeds(kind):
    run = _ordinal if kind == "ordinal" else _numeric
    _check_oracle(_score([run(seed, 100) for seed in range(10, 22)]))


@pytest.mark.slow
def test_numeric_bias_intervals_cover_the_truth():
    covered = []
    for seed in range(6):
        sim = numeric_crowd(n_items=300, n_workers=20, n_lenient=4, n_harsh=4, n_noisy=4, seed=seed)
        t = numeric_verdicts(sim.responses, n_bootstrap=200, random_state=seed).table
        true = sim.bias.reindex(t.index)
        covered += ((t["bias_low"] <= true) & (true <= t["bias_high"])).tolist()
    assert np.mean(covered) >= 0.88, np.mean(covered)


def test_too_few_ratings_is_not_enough_to_tell():
    sim = ordinal_crowd(n_items=300, n_workers=12, n_lenient=3, n_harsh=3, n_noisy=2, seed=4)
    df = sim.responses
    lenient = sim.role.index[sim.role == "lenient"][0]
    mine = df.index[df["worker"] == lenient]
    df = df.drop(mine[6:])  # six ratings left: the bias is clear in the point estimate, not in the evidence
    v = ordinal_verdicts(df, n_bootstrap=30)
    assert v.table.loc[lenient, "ratings"] == 6
    assert v.table.loc[lenient, "verdict"] == "not enough ratings to tell"
    assert "6 ratings" in v.table.loc[lenient, "reason"]


def _decide(bias, blo, bhi, noise, nlo, nhi, ratings=50, valid=1.0, tau=1.0):
    one = lambda x: np.array([x], dtype=float)
    words, why = decide(
        one(ratings), one(bias), (one(blo), one(bhi)), one(noise), (one(nlo), one(nhi)), valid=one(valid),
        rule=ORDINAL_RULE, scale_sd=tau, unit="levels",
    )  # fmt: skip
    return words[0], why[0]


def test_decide_by_hand():
    b, s = LENIENT_BIAS, NOISY_NOISE
    assert _decide(0.0, -0.1, 0.1, 0.3, 0.2, 0.4)[0] == "reliable"
    assert _decide(0.6, b / 2 + 0.01, 0.8, 0.3, 0.2, 0.4)[0] == "lenient"
    assert _decide(0.6, b / 2 - 0.01, 0.8, 0.3, 0.2, 0.4)[0] == "not enough ratings to tell"  # maybe unbiased
    assert _decide(b - 0.01, 0.2, 1.5 * b - 0.01, 0.3, 0.2, 0.4)[0] == "reliable"  # within the margin
    assert _decide(b - 0.01, 0.2, 1.5 * b + 0.01, 0.3, 0.2, 0.4)[0] == "not enough ratings to tell"
    assert _decide(-0.6, -0.8, -b / 2 - 0.01, s, s / 2 + 0.01, 1.2)[0] == "harsh and noisy"
    assert _decide(0.0, -0.1, 0.1, s - 0.01, 0.5, 1.5 * s - 0.01)[0] == "reliable"
    assert _decide(0.0, -0.1, 0.1, s - 0.01, 0.5, 1.5 * s + 0.01)[0] == "not enough ratings to tell"
    assert _decide(0.0, -0.1, 0.1, 0.3, 0.2, 0.4, ratings=9)[0] == "not enough ratings to tell"
    assert _decide(0.0, -0.1, 0.1, 0.3, 0.2, 0.4, valid=0.5)[0] == "not enough ratings to tell"
    # reliability τ²/(τ² + s²) ≤ 0.2 ⇔ s ≥ 2τ (τ = 1 here), whole interval above τ
    assert _decide(0.0, -1, 1, 2.01, 1.01, 3.0)[0] == "near chance"
    assert _decide(0.0, -1, 1, 1.99, 1.01, 3.0)[0] == "noisy"
    assert _decide(0.0, -1, 1, 2.01, 0.99, 3.0)[0] == "noisy"
    word, why = _decide(0.6, 0.4, 0.8, 0.3, 0.2, 0.4)
    assert word == "lenient" and "+0.60 levels (+0.40 to +0.80)" in why


def test_numeric_thresholds_scale_with_the_spread_of_the_truth():
    sim = numeric_crowd(n_items=200, n_workers=10, n_lenient=2, n_harsh=2, n_noisy=1, seed=5)
    base = numeric_verdicts(sim.responses, n_bootstrap=30)
    scaled = sim.responses.assign(value=1000 * sim.responses["value"] - 7)
    big = numeric_verdicts(scaled, n_bootstrap=30)
    assert (big.table["verdict"] == base.table["verdict"]).all()
    assert np.isclose(big.scale_sd, 1000 * base.scale_sd, rtol=1e-6)
    assert NUMERIC_RULE.bias < NUMERIC_RULE.noise


def test_bad_settings_are_user_errors():
    sim = ordinal_crowd(n_items=50, n_workers=6, n_lenient=1, n_harsh=1, n_noisy=1, seed=0)
    with pytest.raises(UserInputError, match="20 bootstrap"):
        ordinal_verdicts(sim.responses, n_bootstrap=5)
    with pytest.raises(UserInputError, match="level"):
        ordinal_verdicts(sim.responses, level=1.5)
    with pytest.raises(UserInputError, match="levels"):
        ordinal_verdicts(sim.responses.assign(label="x" + sim.responses["label"].astype(str)))


def test_rating_report_refuses_the_wrong_label_type():
    from fusion_core.data.responses import Responses
    from fusion_core.diagnostics.rating_report import numeric_from, rating_demo, rating_report

    words = Responses.from_frame(pd.DataFrame({"task": [1, 1, 2, 2], "worker": list("abab"), "label": list("xyxy")}))
    with pytest.raises(UserInputError, match="numbers"):
        rating_report(words, "numeric")
    with pytest.raises(UserInputError, match="confidence"):
        rating_report(words, "judges")
    with pytest.raises(UserInputError, match="label type"):
        rating_report(words, "colours")
    with pytest.raises(UserInputError, match="label type"):
        rating_demo("colours")
    levels = Responses.from_frame(pd.DataFrame({"task": [1, 1, 2], "worker": list("aba"), "label": ["2", "4.5", "3"]}))
    num = numeric_from(levels)
    assert sorted(num.value.tolist()) == [2.0, 3.0, 4.5] and list(num.workers) == ["a", "b"]


def test_bootstrap_newton_m_step_reaches_the_lbfgs_optimum():
    """The bootstrap's per-annotator Newton M-step (scale fixed) against ordinal-em's joint L-BFGS-B M-step on the
    same expected counts: an objective no higher (to 1e-6 relative) and the same parameters where the problem is
    well conditioned."""
    from fusion_core.data.responses import as_responses
    from fusion_core.diagnostics.rating_verdicts import _ordinal_state, newton_m_step
    from fusion_core.methods.dawid_skene import expected_counts
    from fusion_core.methods.ordinal import OrdinalEM, OrdinalModel, m_step_objective, with_levels

    sim = ordinal_crowd(n_items=600, n_workers=30, n_lenient=4, n_harsh=4, n_noisy=3, n_chance=2, seed=5)
    resp = with_levels(as_responses(sim.responses), "numeric")
    res = OrdinalEM(levels=list(resp.classes)).fit(resp).result_
    start = _ordinal_state(res, res.ordinal, OrdinalModel(resp, True, 1.0))
    boot = resp.with_items_resampled(np.random.default_rng(0).integers(0, resp.n_items, size=resp.n_items))
    model = OrdinalModel(boot, False, 1.0)
    e = model.e_step(start)
    ref = model.m_step(e.stats)
    counts = expected_counts(boot, e.posterior)
    b, log_s = newton_m_step(counts, start, 1.0)

    def objective(bias, log_noise):
        return m_step_objective(np.r_[bias, log_noise], counts, scale=start.scale, regularization=1.0)[0]

    f_ref, f_new = objective(ref.bias, ref.log_noise), objective(b, log_s)
    assert f_new <= f_ref + 1e-6 * abs(f_ref)
    assert np.median(np.abs(b - ref.bias)) < 1e-3 and np.median(np.abs(log_s - ref.log_noise)) < 1e-2
    assert not np.allclose(b, start.bias)  # it moved from the full-data fit
