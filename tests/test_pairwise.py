"""Pairwise judge panels (issue 24): input validation, the models against hand-computed and simulated truths, the
bias audits, prediction-powered win rates, the CLI and the report hook.  Many-seed oracles:
tests/test_pairwise_oracles.py (slow)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from fusion_core.cli import main
from fusion_core.data.pairwise import PairwiseResponses, file_columns, pairwise_columns
from fusion_core.diagnostics.judge_bias import judge_bias
from fusion_core.diagnostics.pairwise_audit import pairwise_audit, pairwise_findings
from fusion_core.diagnostics.pairwise_eval import corrected_win_rates, ppi_mean, ranking_intervals
from fusion_core.errors import UserInputError
from fusion_core.methods.pairwise import PAIRWISE_METHODS, PairwiseBT, PairwiseDS, PlainBT, create_pairwise
from fusion_core.simulate.pairwise import pairwise_panel


def _table(**over):
    base = {
        "prompt": ["p1", "p1", "p2", "p3"],
        "option_a": ["x", "x", "y", "007"],
        "option_b": ["y", "y", "007", "x"],
        "judge": ["j1", "j2", "j1", "j2"],
        "preference": ["A", "tie", "b", "007"],
    }
    base.update(over)
    return pd.DataFrame(base)


# ----------------------------------------------------------------------------------------- input
def test_reading_codes_preferences_orders_and_keeps_ids_as_text():
    d = PairwiseResponses.from_frame(_table(order=["AB", "BA", "007", "x"]))
    assert list(d.options) == ["x", "y", "007"]
    assert d.outcome.tolist() == [0, 2, 1, 0]  # "007" is option A of the last row
    assert d.a_first.tolist() == [True, False, False, False]
    assert d.shown_outcome.tolist() == [0, 2, 0, 1]  # B shown first and preferred → first; A second and preferred
    assert d.n_items == 3 and d.order_given


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"preference": ["A", "maybe", "B", "A"]}, ["preference", "'maybe'", "row 2"]),
        ({"option_b": ["x", "y", "007", "x"]}, ["same", "row 1"]),
        ({"judge": ["j1", None, "j1", "j2"]}, ["'judge'", "empty", "row 2"]),
        ({"order": ["AB", "first", "AB", "AB"]}, ["order", "'first'"]),
        ({"confidence": [0.5, 1.5, 0.2, 0.9]}, ["confidence", "[0, 1]", "row 2"]),
        ({"length_a": [10, 0, 5, 5], "length_b": [3, 3, 3, 3]}, ["length", "positive"]),
        ({"length_a": [10, 3, 5, 5]}, ["both length columns"]),
    ],
)
def test_bad_input_is_one_clear_user_error(change, words):
    with pytest.raises(UserInputError) as err:
        PairwiseResponses.from_frame(_table(**change))
    assert all(w in str(err.value) for w in words), str(err.value)


def test_missing_column_and_detection_by_names(tmp_path):
    with pytest.raises(UserInputError, match="missing judge column"):
        PairwiseResponses.from_frame(_table().drop(columns="judge"))
    assert pairwise_columns(["Prompt", "model_a", "model_b", "judge", "winner"])["preference"] == "winner"
    assert pairwise_columns(["task", "worker", "label"]) is None
    path = tmp_path / "p.csv"
    _table().to_csv(path, index=False)
    assert file_columns(path) == list(_table().columns)
    assert file_columns(b"not a path") is None


# ----------------------------------------------------------------------------------------- models
def test_davidson_matches_the_closed_form_for_two_options():
    """Two options, A wins 6, B 2, ties 2: the MLE is e^d = 6/2 and ν = p_tie/√(p_A p_B) = 0.2/√0.12."""
    df = pd.DataFrame({"prompt": range(10), "option_a": "a", "option_b": "b", "judge": "j",
                       "preference": ["A"] * 6 + ["B"] * 2 + ["tie"] * 2})  # fmt: skip
    fit = PlainBT(ridge=0.0, tol=1e-12).fit(df).result_
    d = fit.strength[0] - fit.strength[1]
    assert d == pytest.approx(np.log(3), abs=1e-6)
    assert fit.tie_strength == pytest.approx(0.2 / np.sqrt(0.12), abs=1e-6)


@pytest.mark.parametrize("name", list(PAIRWISE_METHODS))
def test_em_trace_is_monotone_and_prompt_weights_equal_copies(name):
    sim = pairwise_panel(200, 3, 5, position_bias=[0.15, 0, 0], seed=4)
    d = PairwiseResponses.from_frame(sim.responses)
    fit = create_pairwise(name).fit(d).result_
    assert fit.converged and np.all(np.diff(fit.log_likelihood) >= -1e-8 * abs(fit.log_likelihood[-1]))
    weighted = create_pairwise(name, tol=1e-10).fit(d, prompt_weight=np.full(d.n_prompts, 2.0)).result_
    copy = sim.responses.assign(prompt=sim.responses["prompt"] + "/copy")  # a resampled prompt is a new prompt
    doubled = create_pairwise(name, tol=1e-10).fit(pd.concat([sim.responses, copy])).result_
    np.testing.assert_allclose(weighted.strength, doubled.strength, atol=1e-4)


@pytest.mark.parametrize("ties", [True, False])
def test_compiled_kernels_give_the_numpy_fits(monkeypatch, ties):
    """With numba (the ``fast`` extra) fits of ≥ 2,000 judgements run compiled kernels; FUSION_CORE_JIT=0 runs
    their numpy twins: the same EM path (iterations) and the same estimates to rounding, with and without ties."""
    pytest.importorskip("numba")
    from fusion_core.methods.pairwise.davidson import JIT_MIN_JUDGEMENTS

    sim = pairwise_panel(800, 3, 6, position_bias=[0.15, 0, 0], seed=5)
    table = sim.responses if ties else sim.responses[sim.responses["preference"] != "tie"]
    d = PairwiseResponses.from_frame(table)
    assert d.n >= JIT_MIN_JUDGEMENTS and d.has_ties == ties
    fits = {}
    for flag in ("1", "0"):
        monkeypatch.setenv("FUSION_CORE_JIT", flag)
        fits[flag] = [create_pairwise(name).fit(d).result_ for name in ("ds-pairwise", "bt-judges")]
    for jit, ref in zip(fits["1"], fits["0"]):
        assert jit.n_iter == ref.n_iter, jit.method
        np.testing.assert_allclose(jit.strength, ref.strength, rtol=1e-8, atol=1e-9)
        np.testing.assert_allclose(jit.position, ref.position, rtol=1e-8, atol=1e-9)
        np.testing.assert_allclose(jit.log_likelihood, ref.log_likelihood, rtol=1e-10)
        assert jit.tie_strength == pytest.approx(ref.tie_strength, rel=1e-8, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_rankings_recover_the_strengths_and_random_judges_get_no_weight(seed):
    sim = pairwise_panel(500, 5, 8, reliability=[0.8, 0.7, 0.6, 0.8, 0.0], seed=seed)
    d = PairwiseResponses.from_frame(sim.responses)
    truth = sim.strengths.reindex(d.options)
    for cls in (PairwiseDS, PairwiseBT):
        fit = cls().fit(d).result_
        assert spearmanr(fit.strength, truth).statistic >= 0.95, cls.__name__
        assert fit.reliability[4] < 0.15 < 0.3 < fit.reliability[:4].min(), (cls.__name__, fit.reliability)


def test_ds_pairwise_recovers_reliability_position_and_ties():
    sim = pairwise_panel(1500, 4, 6, reliability=[0.8, 0.6, 0.7, 0.5], position_bias=[0.15, 0, -0.1, 0], seed=7)
    fit = PairwiseDS().fit(sim.responses).result_
    # the simulator lowers a biased judge's reliability so that its bias is exact (judge1: 0.96 - 2 * 0.15)
    np.testing.assert_allclose(sim.judges["reliability"], [0.66, 0.6, 0.7, 0.5])
    np.testing.assert_allclose(fit.reliability, sim.judges["reliability"], atol=0.08)
    np.testing.assert_allclose(fit.position, [0.15, 0, -0.1, 0], atol=0.04)
    # ties: the plain likelihood.  Weighing each judgement by its confidence (the default) tempers the likelihood,
    # which flattens the posteriors and pulls the rare tie class down: at the converged fit the tie share is then
    # 0.0351 short on this seed (0.0346 when EM stopped earlier; reported in the session notes, not loosened here)
    fit = PairwiseDS(use_confidence=False).fit(sim.responses).result_
    true_ties = (sim.truth["preference"] == "tie").mean()  # ≈ 0.1 of the items
    assert abs(fit.item_posterior[:, 2].mean() - true_ties) < 0.035
    assert 0.1 < fit.tie_strength < 0.5  # ν = 0.3; ν̂ reaches 0.30 with 5,000 items


# ----------------------------------------------------------------------------------------- audits
def test_bias_audits_flag_the_biased_judges_only():
    sim = pairwise_panel(600, 5, 8, position_bias=[0.15, 0, 0, 0, -0.12], length_bias=[0, 0.12, 0, 0, 0],
                         self_preference=[0, 0, 0.15, 0, 0], seed=11)  # fmt: skip
    d = PairwiseResponses.from_frame(sim.responses)
    audit = judge_bias(d, PairwiseDS().fit(d), n_bootstrap=200)
    assert list(audit.flagged("position")) == ["judge1", "judge5"]
    assert list(audit.flagged("length")) == ["judge2"]
    assert list(audit.flagged("self")) == ["judge3"]
    pos = audit.frame("position")
    assert pos.loc["judge5", "verdict"] == "prefers the second-shown answer"
    assert (pos["low"] <= pos["effect"]).all() and (pos["effect"] <= pos["high"]).all()


def test_audit_without_lengths_or_families_skips_them():
    sim = pairwise_panel(150, 3, 4, seed=2)
    d = PairwiseResponses.from_frame(sim.responses[["prompt", "option_a", "option_b", "judge", "preference"]])
    audit = judge_bias(d, PairwiseDS().fit(d), n_bootstrap=20)
    assert audit.skipped == ("length", "self") and set(audit.table["kind"]) == {"position"}


def test_ppi_mean_hand_case_and_gold_only_fallback():
    y = np.array([1.0, 0.0, 1.0, 1.0])
    r = ppi_mean(y, np.full(4, 0.5), np.full(10, 0.5))  # constant predictions carry no information: λ = 0
    assert r.lam == 0 and r.estimate == pytest.approx(0.75) and r.low == pytest.approx(r.gold_low)
    f = y * 0.8 + 0.1  # predictions = 0.1 + 0.8 Y on the gold: λ = 1 / (0.8 (1 + 4/4))
    r = ppi_mean(y, f, np.array([0.9, 0.1, 0.9, 0.9]))
    assert r.lam == pytest.approx(min(1.0, 1 / (0.8 * 2)))
    assert r.estimate == pytest.approx(0.75 + r.lam * (0.7 - 0.7))


def test_corrected_win_rates_remove_the_judges_bias():
    sim = pairwise_panel(1000, 5, 6, length_bias=[0.15, 0.15, 0.15, 0.1, 0.1], verbosity=0.8, gold=0.2, seed=5)
    d = PairwiseResponses.from_frame(sim.responses)
    w = corrected_win_rates(d, PairwiseDS().fit(d), sim.gold).table
    truth = sim.win_rate.reindex(w.index)
    assert (w["corrected"] - truth).abs().mean() < 0.5 * (w["judge_average"] - truth).abs().mean()
    assert ((w["low"] <= truth) & (truth <= w["high"])).mean() >= 4 / 6
    assert ((w["high"] - w["low"]) <= (w["gold_high"] - w["gold_low"]) + 1e-9).all()


def test_ranking_intervals_and_findings():
    sim = pairwise_panel(300, 4, 5, reliability=[0.8, 0.8, 0.8, 0.0], position_bias=[0.2, 0, 0, 0], seed=3)
    ri = ranking_intervals(PairwiseResponses.from_frame(sim.responses), PlainBT(), n_bootstrap=30)
    t = ri.table
    assert (t["low"] <= t["strength"]).all() and (t["strength"] <= t["high"]).all()
    assert (t["rank_low"] <= t["rank"]).all() and (t["rank"] <= t["rank_high"]).all()
    audit = pairwise_audit(sim.responses, gold=sim.gold, n_bootstrap=20)
    words = dict(pairwise_findings(audit))
    assert "judge1 prefers the first-shown answer" in words["Which judges show a position bias?"]
    assert "judge4 (near random)" in words["Which judges can be trusted?"]


# ----------------------------------------------------------------------------------------- front ends
def test_cli_pairwise_and_one_click_report(tmp_path, capsys):
    sim = pairwise_panel(60, 3, 4, position_bias=[0.2, 0, 0], seed=1)
    answers, gold = tmp_path / "pairwise.csv", tmp_path / "gold.csv"
    sim.responses.to_csv(answers, index=False)
    sim.gold.to_csv(gold, index=False)
    out = tmp_path / "out"
    assert main(["pairwise", str(answers), "--gold", str(gold), "--out", str(out), "--bootstrap", "10"]) == 0
    ranking = pd.read_csv(out / "ranking.csv")
    assert set(ranking["option"]) == set(sim.strengths.index) and (out / "win_rates.csv").exists()
    assert "Which judges show a position bias?" in capsys.readouterr().out
    html = tmp_path / "r.html"
    assert main(["report", str(answers), "--out", str(html), "--bootstrap", "10", "--cartel-bootstrap", "5"]) == 0
    text = html.read_text(encoding="utf-8")
    assert "Pairwise judge panel" in text and 'id="chart-pairwise-ranking"' in text
    assert main(["pairwise", str(answers), "--out", str(out), "--judge-col", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0]


def test_simulator_biases_are_exact_and_correlated_judges_share_errors():
    sim = pairwise_panel(3000, 3, 6, reliability=0.7, position_bias=[0.15, 0, 0], judge_families=["f", "f", "g"],
                         correlated=[True, True, False], shared_error=0.3, both_orders=True, seed=0)  # fmt: skip
    d = PairwiseResponses.from_frame(sim.responses)
    decisive = d.outcome != 2
    first = (d.shown_outcome == 0)[decisive]
    judge = d.judge[decisive]
    p_first = np.array([first[judge == j].mean() for j in range(3)]) - 0.5  # three judges
    np.testing.assert_allclose(p_first, [0.15, 0, 0], atol=0.03)
    assert (np.bincount(d.prompt, minlength=d.n_prompts) == 6).all()  # 3 judges × both orders
    truth = sim.truth.set_index("prompt")["preference"]
    wrong = sim.responses["preference"].to_numpy() != truth.reindex(sim.responses["prompt"]).to_numpy()
    per = pd.DataFrame({"prompt": sim.responses["prompt"], "judge": sim.responses["judge"], "wrong": wrong})
    w = per.groupby(["prompt", "judge"])["wrong"].mean().unstack()
    lift = lambda a, b: (w[a] * w[b]).mean() / (w[a].mean() * w[b].mean())
    assert lift("judge1", "judge2") > 1.2 > lift("judge1", "judge3")
