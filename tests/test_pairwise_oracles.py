"""Many-seed oracles of issue 24 (slow): on simulated panels of 5 judges × 500 comparisons of 8 options,

* option ranking: Spearman ≥ 0.95 with the true strengths (mean over seeds, ds-pairwise and bt-judges);
* position bias: detected for ≥ 90 % of the biased judges (|bias| in [0.1, 0.2]), ≤ 5 % false alarms on the others;
* bias-corrected win rates: the 90 % intervals cover the true win rates in 88–92 % of (seed, option) cases, while
  the plain judge average's bias is reported.

Design per seed: reliabilities U(0.5, 0.9), two of five judges position-biased with random sign, length bias 0.1
for one judge and verbose options (so that the judge average is off), gold = 20 % of the comparisons.  Each case
uses its own seed; the figures are printed (``pytest -s``).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from fusion_core.data.pairwise import PairwiseResponses
from fusion_core.diagnostics.judge_bias import judge_bias
from fusion_core.diagnostics.pairwise_eval import corrected_win_rates
from fusion_core.methods.pairwise import PairwiseBT, PairwiseDS
from fusion_core.simulate.pairwise import pairwise_panel

SEEDS = 200


def panel(seed: int):
    rng = np.random.default_rng(10_000 + seed)
    pos = np.zeros(5)
    pos[:2] = rng.uniform(0.1, 0.2, 2) * rng.choice([-1, 1], 2)
    return pairwise_panel(500, 5, 8, position_bias=pos, length_bias=[0, 0, 0.1, 0, 0], verbosity=0.5, gold=0.2,
                          seed=seed)  # fmt: skip


def one_seed(seed: int) -> dict[str, object]:
    sim = panel(seed)
    d = PairwiseResponses.from_frame(sim.responses)
    truth = sim.strengths.reindex(d.options)
    ds = PairwiseDS().fit(d)
    out: dict[str, object] = {
        "ds": spearmanr(ds.result_.strength, truth).statistic,
        "bt-judges": spearmanr(PairwiseBT().fit(d).result_.strength, truth).statistic,
    }
    flagged = judge_bias(d, ds, n_bootstrap=200, random_state=seed).frame("position")["flagged"]
    flagged = flagged.reindex(sim.judges.index).to_numpy(dtype=bool)
    out["detected"], out["false_alarm"] = flagged[:2], flagged[2:]
    w = corrected_win_rates(d, ds, sim.gold, level=0.9).table
    win = sim.win_rate.reindex(w.index)
    out["covered"] = ((w["low"] <= win) & (win <= w["high"])).to_numpy()
    out["judge_error"] = (w["judge_average"] - win).to_numpy()
    out["corrected_error"] = (w["corrected"] - win).to_numpy()
    return out


@pytest.mark.slow
def test_pairwise_oracles_over_many_seeds():
    runs = [one_seed(s) for s in range(SEEDS)]
    rho_ds = np.array([r["ds"] for r in runs])
    rho_bt = np.array([r["bt-judges"] for r in runs])
    detected = np.concatenate([r["detected"] for r in runs])
    false = np.concatenate([r["false_alarm"] for r in runs])
    covered = np.concatenate([r["covered"] for r in runs])
    judge_err = np.concatenate([r["judge_error"] for r in runs])
    corr_err = np.concatenate([r["corrected_error"] for r in runs])
    print(
        f"\n{SEEDS} seeds: Spearman ds-pairwise mean {rho_ds.mean():.4f} (≥ 0.95 in {np.mean(rho_ds >= 0.95):.1%}), "
        f"bt-judges mean {rho_bt.mean():.4f} (≥ 0.95 in {np.mean(rho_bt >= 0.95):.1%}); position bias detected "
        f"{detected.mean():.1%} of {detected.size}, false alarms {false.mean():.1%} of {false.size}; corrected 90% "
        f"intervals cover {covered.mean():.1%} of {covered.size}; judge average mean |error| "
        f"{np.abs(judge_err).mean():.3f} (max {np.abs(judge_err).max():.3f}), corrected mean |error| "
        f"{np.abs(corr_err).mean():.3f}"
    )
    assert rho_ds.mean() >= 0.95 and rho_bt.mean() >= 0.95
    assert detected.mean() >= 0.90
    assert false.mean() <= 0.05
    assert 0.88 <= covered.mean() <= 0.92
    assert np.abs(judge_err).mean() > np.abs(corr_err).mean()
