"""Figures of a pairwise judge panel (:class:`~fusion_core.diagnostics.pairwise_audit.PairwiseAudit` parts in,
plotly Figures out): the ranking with bootstrap intervals, the judges' bias effects with intervals, and the win
rates — judge average, corrected, gold only."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from fusion_core.diagnostics.judge_bias import KINDS, JudgeBias
from fusion_core.diagnostics.pairwise_eval import CorrectedWinRates, RankingIntervals
from fusion_core.plots._common import PALETTE, base_layout, empty_figure, esc_all


def ranking_chart(ranking: RankingIntervals) -> go.Figure:
    """Strength of each option (logit scale), strongest on top, with the bootstrap interval as error bars."""
    t = ranking.table.iloc[::-1]
    err = {}
    if "low" in t:
        err = {
            "error_x": {
                "type": "data",
                "array": (t["high"] - t["strength"]).to_numpy(),
                "arrayminus": (t["strength"] - t["low"]).to_numpy(),
            }
        }
    fig = go.Figure(
        go.Scatter(
            x=t["strength"],
            y=esc_all(t.index),
            mode="markers",
            marker={"color": PALETTE[0], "size": 9},
            hovertext=[f"rank {r}" for r in t["rank"]],
            name="strength",
            **err,
        )
    )
    fig.update_xaxes(title_text="strength (logit scale; a gap of 1 ≈ 73% preference)")
    fig.update_yaxes(title_text="option", type="category")
    level = f"{ranking.level:.0%} intervals over {ranking.n_bootstrap} prompt resamples" if ranking.n_bootstrap else ""
    return base_layout(fig, f"Ranking of the options ({ranking.method}; {level})", height=120 + 28 * len(t))


def bias_chart(bias: JudgeBias) -> go.Figure:
    """One panel per audited bias: each judge's effect (probability points) with its interval; flagged judges in
    red; the ± ``min_effect`` band shaded."""
    kinds = [k for k in KINDS if k not in bias.skipped]
    if not kinds:
        return empty_figure("Judge biases", "No bias could be audited.")
    fig = make_subplots(rows=1, cols=len(kinds), shared_yaxes=True, subplot_titles=[KINDS[k][2] for k in kinds])
    for c, kind in enumerate(kinds, start=1):
        t = bias.frame(kind)
        colour = np.where(t["flagged"].to_numpy(dtype=bool), PALETTE[3], PALETTE[0])
        fig.add_trace(
            go.Scatter(
                x=t["effect"],
                y=esc_all(t.index),
                mode="markers",
                marker={"color": colour, "size": 9},
                error_x={
                    "type": "data",
                    "array": (t["high"] - t["effect"]).to_numpy(),
                    "arrayminus": (t["effect"] - t["low"]).to_numpy(),
                },
                hovertext=esc_all(t["verdict"]),
                showlegend=False,
            ),
            row=1,
            col=c,
        )
        fig.add_vrect(x0=-bias.rule.min_effect, x1=bias.rule.min_effect, fillcolor="#eee", line_width=0, row=1, col=c)
        fig.add_vline(x=0, line_color="#999", row=1, col=c)
        fig.update_xaxes(title_text="effect (probability points)", row=1, col=c)
    fig.update_yaxes(title_text="judge", type="category", row=1, col=1)
    lvl = f"{bias.rule.level:.0%}"
    return base_layout(
        fig, f"Judge biases ({lvl} intervals; red = bias called)", height=160 + 26 * bias.table["judge"].nunique()
    )


def win_rate_chart(wins: CorrectedWinRates) -> go.Figure:
    """Per option: the plain judge average, the gold-only estimate and the bias-corrected estimate (with
    intervals)."""
    t = wins.table.iloc[::-1]
    y = esc_all(t.index)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=t["judge_average"], y=y, mode="markers", name="judge average",
                             marker={"symbol": "x", "size": 10, "color": PALETTE[1]}))  # fmt: skip
    for col, low, high, name, color, size in (
        ("gold_only", "gold_low", "gold_high", "gold only", PALETTE[9], 7),
        ("corrected", "low", "high", "corrected (PPI)", PALETTE[0], 9),
    ):
        fig.add_trace(
            go.Scatter(
                x=t[col],
                y=y,
                mode="markers",
                name=name,
                marker={"color": color, "size": size},
                error_x={
                    "type": "data",
                    "array": (t[high] - t[col]).to_numpy(),
                    "arrayminus": (t[col] - t[low]).to_numpy(),
                },
            )
        )
    fig.update_xaxes(title_text="win rate (ties count ½)", range=[0, 1])
    fig.update_yaxes(title_text="option", type="category")
    return base_layout(fig, f"Win rates: judges vs corrected ({wins.level:.0%} intervals)", height=140 + 28 * len(t))
