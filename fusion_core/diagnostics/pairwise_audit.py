"""Everything about a pairwise judge panel from one call (:func:`pairwise_audit`): the ranking of the options with
intervals, each judge's reliability, the bias audits, and — with a gold subset — the bias-corrected win rates;
:func:`pairwise_findings` says it in plain words.  The CLI (``fusion-core pairwise``), the HTML report and the
Ratings page read this result (docs/JUDGES.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.pairwise import PairwiseResponses, as_pairwise
from fusion_core.diagnostics.judge_bias import BiasRule, JudgeBias, judge_bias
from fusion_core.diagnostics.pairwise_eval import (
    CorrectedWinRates,
    RankingIntervals,
    corrected_win_rates,
    ranking_intervals,
)
from fusion_core.methods.pairwise import DEFAULT_METHOD, PairwiseDS, create_pairwise

RELIABLE, WEAK = 0.5, 0.2  # judge reliability thresholds (0 = prefers at random, 1 = follows the truth)


@dataclass(frozen=True)
class PairwiseAudit:
    """``ranking`` (:class:`RankingIntervals` of ``method``), ``judges`` (one row per judge: judgements,
    reliability, position from the pairwise Dawid–Skene fit, and a reliability verdict), ``bias``
    (:class:`JudgeBias`), ``win_rates`` (:class:`CorrectedWinRates`, None without gold), ``fit`` (the fitted
    :class:`~fusion_core.methods.pairwise.PairwiseDS`, whose item posteriors the audits use) and ``data``."""

    data: PairwiseResponses
    method: str
    ranking: RankingIntervals
    judges: pd.DataFrame
    bias: JudgeBias
    win_rates: CorrectedWinRates | None
    fit: Any


def _judge_table(data: PairwiseResponses, ds: PairwiseDS) -> pd.DataFrame:
    res = ds.result_
    rel = res.reliability
    verdict = np.where(rel >= RELIABLE, "reliable", np.where(rel >= WEAK, "weak", "near random"))
    return pd.DataFrame(
        {
            "judgements": np.bincount(data.judge, minlength=data.n_judges),
            "reliability": rel,
            "position": res.position,
            "verdict": verdict,
        },
        index=pd.Index(data.judges, name="judge"),
    )


def pairwise_audit(
    data: PairwiseResponses | pd.DataFrame,
    *,
    method: str = DEFAULT_METHOD,
    gold: pd.DataFrame | None = None,
    n_bootstrap: int = 100,
    level: float = 0.9,
    rule: BiasRule | None = None,
    random_state: int | None = 0,
) -> PairwiseAudit:
    """Rank the options with ``method`` (bootstrap intervals over prompts), audit every judge, and correct the
    win rates with ``gold`` (a table prompt, option_a, option_b, preference) when given.

    Examples
    --------
    >>> from fusion_core.simulate.pairwise import pairwise_panel
    >>> sim = pairwise_panel(n_comparisons=300, n_judges=4, reliability=[0.8, 0.8, 0.8, 0.0], seed=0)
    >>> audit = pairwise_audit(sim.responses, gold=sim.gold, n_bootstrap=20)
    >>> audit.ranking.table.index[0], audit.judges.loc["judge4", "verdict"]
    ('system8', 'near random')
    """
    d = as_pairwise(data)
    ds = PairwiseDS().fit(d)
    est = ds if method == "ds-pairwise" else create_pairwise(method)
    ranking = ranking_intervals(d, est, n_bootstrap=n_bootstrap, level=level, random_state=random_state)
    bias = judge_bias(d, ds, n_bootstrap=max(n_bootstrap, 100), rule=rule, random_state=random_state)
    wins = corrected_win_rates(d, ds, gold, level=level) if gold is not None else None
    return PairwiseAudit(d, method, ranking, _judge_table(d, ds), bias, wins, ds)


def pairwise_findings(audit: PairwiseAudit) -> list[tuple[str, str]]:
    """(question, answer in plain words) pairs for the report and the app."""
    r = audit.ranking.table
    best = r.index[0]
    tied = r.index[(r["rank_low"] == 1)] if "rank_low" in r else pd.Index([best])
    lvl = f"{audit.ranking.level:.0%}"
    out = [
        (
            "Which option is best?",
            f"{best} ranks first ({audit.ranking.method}, {len(r)} options)."
            + (
                f" Within the {lvl} bootstrap intervals {', '.join(map(str, tied))} could each be first."
                if len(tied) > 1
                else f" Its {lvl} bootstrap rank interval is 1–1: clearly first."
            ),
        )
    ]
    j = audit.judges
    weak = [f"{w} ({j.loc[w, 'verdict']})" for w in j.index[j["verdict"] != "reliable"]]
    out.append(
        (
            "Which judges can be trusted?",
            f"{(j['verdict'] == 'reliable').sum()} of {len(j)} judges are reliable"
            + (f"; {', '.join(weak)} carry little weight in the ranking." if weak else "."),
        )
    )
    for kind, noun in (("position", "position"), ("length", "length"), ("self", "self-preference")):
        if kind in audit.bias.skipped:
            continue
        flagged = audit.bias.flagged(kind)
        t = audit.bias.frame(kind)
        text = (
            "; ".join(f"{f} {t.loc[f, 'verdict']} ({t.loc[f, 'effect']:+.2f})" for f in flagged)
            if len(flagged)
            else "no judge shows one"
        )
        out.append((f"Which judges show a {noun} bias?", text + "."))
    if audit.win_rates is not None:
        w = audit.win_rates.table
        worst = w["judge_bias"].abs().idxmax()
        out.append(
            (
                "How far off is the plain judge average?",
                f"Corrected with {int(w['gold'].sum() // 2)} gold comparisons, the judges' average is off by up to "
                f"{w.loc[worst, 'judge_bias']:+.3f} ({worst}: judges say {w.loc[worst, 'judge_average']:.3f}, "
                f"corrected {w.loc[worst, 'corrected']:.3f}, {audit.win_rates.level:.0%} interval "
                f"{w.loc[worst, 'low']:.3f}–{w.loc[worst, 'high']:.3f}).",
            )
        )
    return out
