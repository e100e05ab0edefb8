"""Figures for ratings and judge panels (issue 13): the ordinal confusion heatmap (levels in their declared
order; rows = true, columns = reported), the bias/noise scatter of the rating verdicts with interval bars, the
calibration chart (reliability diagram) of judges with confidences, and agreement statistics with intervals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.calibration import Calibration
from fusion_core.diagnostics.rating_verdicts import RatingVerdicts
from fusion_core.diagnostics.reliability import ReliabilityEstimate
from fusion_core.plots._common import HEAT, as_result, base_layout, color_for, empty_figure, esc, esc_all

VERDICT_COLOURS = {
    "reliable": "#54A24B",
    "lenient": "#F58518",
    "harsh": "#4C78A8",
    "noisy": "#B279A2",
    "near chance": "#E45756",
    "not enough ratings to tell": "#BAB0AC",
}
"""One colour per verdict word; joined verdicts ("lenient and noisy") take the colour of their first word."""


def verdict_colour(verdict: str) -> str:
    return VERDICT_COLOURS.get(verdict, VERDICT_COLOURS.get(verdict.split(" and ", maxsplit=1)[0], "#9D755D"))


def ordinal_confusion_heatmap(result: Any, responses: Responses | None = None, worker: Any = None) -> go.Figure:
    """P(reported level | true level) with the levels in the fit's order (lowest first): one annotator's
    model-derived matrix (``worker``), or, with ``responses``, the whole crowd's from the posterior-weighted
    counts ``Σ_i q_ik [label = l]``.  y axis "true", x axis "reported"."""
    res = as_result(result)
    labels = esc_all(res.classes)
    if worker is not None:
        if res.confusion is None:
            return empty_figure("Ordinal confusion", f"method '{res.method}' estimates no confusion matrices")
        codes = pd.Index(res.workers.astype(str)).get_indexer([str(worker)])
        if codes[0] < 0:
            raise KeyError(f"annotator {worker!r} is not in the result")
        mat, title = res.confusion[codes[0]], f"Ordinal confusion of {esc(worker)} (model)"
        counts = None
    elif responses is not None:
        k = len(res.classes)
        post = res.posterior[responses.item]  # responses × true levels
        counts = np.stack([np.bincount(responses.label, weights=post[:, t], minlength=k) for t in range(k)])
        mat = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1e-300)
        title = "Ordinal confusion of the crowd (estimated true level)"
    else:
        return empty_figure("Ordinal confusion", "choose an annotator or pass the responses")
    text = np.round(mat, 2).astype(str) if counts is None else np.char.add(
        np.round(mat, 2).astype(str), np.char.add("<br>n≈", np.round(counts).astype(int).astype(str))
    )  # fmt: skip
    fig = go.Figure(
        go.Heatmap(
            z=mat, x=labels, y=labels, zmin=0, zmax=1, colorscale=HEAT, text=text, texttemplate="%{text}",
            hovertemplate="true %{y}<br>reported %{x}<br>P = %{z:.3f}<extra></extra>", colorbar={"title": {"text": "P"}},
        )
    )  # fmt: skip
    fig.update_xaxes(title_text="reported", type="category", categoryorder="array", categoryarray=labels)
    fig.update_yaxes(
        title_text="true", type="category", categoryorder="array", categoryarray=labels, autorange="reversed"
    )
    return base_layout(fig, title, height=420)


def bias_noise_scatter(verdicts: RatingVerdicts) -> go.Figure:
    """Each annotator's bias (x) against noise (y) with their interval bars, coloured by verdict, with the
    thresholds of the rule drawn (numeric thresholds are multiples of τ, the true values' sd)."""
    t = verdicts.table
    if t.empty:
        return empty_figure("Bias and noise", "no annotators")
    scale = verdicts.scale_sd if verdicts.kind == "numeric" else 1.0
    unit = "levels" if verdicts.kind == "ordinal" else "data units"
    fig = go.Figure()
    for word in dict.fromkeys(t["verdict"]):
        part = t[t["verdict"] == word]
        fig.add_trace(
            go.Scatter(
                x=part["bias"], y=part["noise"], mode="markers", name=esc(word),
                marker={"color": verdict_colour(str(word)), "size": 10, "line": {"width": 1, "color": "white"}},
                error_x={"type": "data", "symmetric": False, "array": part["bias_high"] - part["bias"],
                         "arrayminus": part["bias"] - part["bias_low"], "thickness": 1},
                error_y={"type": "data", "symmetric": False, "array": part["noise_high"] - part["noise"],
                         "arrayminus": part["noise"] - part["noise_low"], "thickness": 1},
                text=esc_all(part.index), customdata=part["ratings"],
                hovertemplate="%{text}<br>bias %{x:.3g}<br>noise %{y:.3g}<br>%{customdata} ratings<extra></extra>",
            )
        )  # fmt: skip
    rule = verdicts.rule
    for x in (-rule.bias * scale, rule.bias * scale):
        fig.add_vline(x=x, line_dash="dot", line_color="#888")
    fig.add_hline(y=rule.noise * scale, line_dash="dot", line_color="#888")
    fig.add_hline(
        y=verdicts.scale_sd * np.sqrt(1 / rule.near_chance - 1),  # reliability τ²/(τ² + s²) = near_chance
        line_dash="dash",
        line_color=VERDICT_COLOURS["near chance"],
        annotation_text="near chance",
    )
    fig.update_xaxes(title_text=f"bias ({unit}): > 0 lenient, < 0 harsh", zeroline=True)
    fig.update_yaxes(title_text=f"noise ({unit})", rangemode="tozero")
    pct = round(100 * verdicts.level)
    return base_layout(fig, f"Bias and noise per annotator ({pct}% bootstrap intervals)", height=460)


def calibration_chart(cal: Calibration, judges: Sequence[Any] | None = None) -> go.Figure:
    """Reliability diagram: stated confidence (x) against observed accuracy (y) per confidence bin, pooled (with
    Wilson interval bars) and for ``judges``; the diagonal is perfect calibration; the lower panel counts the
    responses per bin."""
    if cal.bins.empty:
        return empty_figure("Calibration", "no responses with a reference label")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.75, 0.25], vertical_spacing=0.05)
    fig.add_trace(
        go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfect calibration", line={"dash": "dot", "color": "#888"}),
        row=1, col=1,
    )  # fmt: skip
    pooled = cal.bins[cal.bins["judge"].isna()]
    fig.add_trace(
        go.Scatter(
            x=pooled["confidence"], y=pooled["accuracy"], mode="lines+markers", name="all judges",
            line={"color": "#222", "width": 3},
            error_y={"type": "data", "symmetric": False, "array": pooled["high"] - pooled["accuracy"],
                     "arrayminus": pooled["accuracy"] - pooled["low"]},
            customdata=pooled["count"],
            hovertemplate="stated %{x:.2f}<br>observed %{y:.2f}<br>%{customdata} responses<extra>all</extra>",
        ),
        row=1, col=1,
    )  # fmt: skip
    fig.add_trace(
        go.Bar(x=(pooled["bin_low"] + pooled["bin_high"]) / 2, y=pooled["count"], name="responses per bin",
               width=float((pooled["bin_high"] - pooled["bin_low"]).min()) * 0.9, marker_color="#BAB0AC"),
        row=2, col=1,
    )  # fmt: skip
    per = cal.bins[cal.bins["judge"].notna()]
    ids = pd.Index(per["judge"].astype(str))
    for i, judge in enumerate(judges or []):
        part = per[ids == str(judge)]
        if part.empty:
            continue
        fig.add_trace(
            go.Scatter(
                x=part["confidence"], y=part["accuracy"], mode="lines+markers", name=esc(judge),
                line={"color": color_for(i)}, customdata=part["count"],
                hovertemplate="stated %{x:.2f}<br>observed %{y:.2f}<br>%{customdata} responses<extra>%{fullData.name}"
                "</extra>",
            ),
            row=1, col=1,
        )  # fmt: skip
    fig.update_xaxes(title_text="stated confidence", range=[0, 1.02], row=2, col=1)
    fig.update_yaxes(title_text="observed accuracy", range=[0, 1.02], row=1, col=1)
    fig.update_yaxes(title_text="responses", row=2, col=1)
    return base_layout(fig, f"Calibration against {esc(cal.reference)}", height=560)


def agreement_chart(estimates: Sequence[ReliabilityEstimate]) -> go.Figure:
    """Agreement statistics (Krippendorff's α, ICC, κ) as points with their bootstrap intervals; dotted lines at
    Krippendorff's 0.667 (tentative conclusions) and 0.8 (reliable)."""
    if not estimates:
        return empty_figure("Agreement", "no statistic computed")
    names = esc_all(e.statistic for e in estimates)
    values = np.array([e.value for e in estimates], dtype=float)
    low = np.array([e.low for e in estimates], dtype=float)
    high = np.array([e.high for e in estimates], dtype=float)
    has = np.isfinite(low) & np.isfinite(high)
    fig = go.Figure(
        go.Scatter(
            x=values, y=names, mode="markers", marker={"size": 12, "color": color_for(0)},
            error_x={"type": "data", "symmetric": False, "array": np.where(has, high - values, 0),
                     "arrayminus": np.where(has, values - low, 0)},
            customdata=np.column_stack([low, high, [e.n_items for e in estimates]]),
            hovertemplate="%{y}: %{x:.3f}<br>interval %{customdata[0]:.3f} to %{customdata[1]:.3f}"
            "<br>%{customdata[2]} items<extra></extra>",
        )
    )  # fmt: skip
    for x in (0.667, 0.8):
        fig.add_vline(x=x, line_dash="dot", line_color="#888")
    levels = {round(100 * e.level) for e in estimates if e.n_bootstrap}
    suffix = f" ({'/'.join(map(str, sorted(levels)))}% bootstrap intervals over items)" if levels else ""
    fig.update_xaxes(
        title_text="agreement (1 = perfect, 0 = chance)", range=[min(-0.05, float(np.nanmin(np.r_[low, values]))), 1.02]
    )
    fig.update_yaxes(type="category")
    return base_layout(fig, "Agreement" + suffix, height=150 + 50 * len(estimates))


__all__ = [
    "VERDICT_COLOURS",
    "agreement_chart",
    "bias_noise_scatter",
    "calibration_chart",
    "ordinal_confusion_heatmap",
    "verdict_colour",
]
