"""Audit figures (an :class:`~fusion_core.diagnostics.audit.AuditResult` in, a plotly Figure out): verdict counts,
skill above chance against evidence with interval bars and the chance line, label confidence, items to look at
again, agreement with intervals, changes against majority vote.  :func:`audit_figures` gives every chart the
audit's findings name (:func:`fusion_core.diagnostics.audit.findings`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from fusion_core.diagnostics.audit import VERDICTS, AuditResult
from fusion_core.diagnostics.audit.rules import ADVERSARIAL, DEPENDENT, NOISY, RELIABLE, SPAMMER, SWAPS, TOO_FEW
from fusion_core.plots._common import base_layout, color_for, empty_figure, esc, esc_all
from fusion_core.plots.cartels import loadings_scatter
from fusion_core.plots.drift import crowd_over_time
from fusion_core.plots.ratings import bias_noise_scatter

VERDICT_COLORS = {
    ADVERSARIAL: "#9E1B32",
    DEPENDENT: "#7B4FA3",
    SPAMMER: "#F58518",
    SWAPS: "#E4A11B",
    TOO_FEW: "#9D9D9D",
    NOISY: "#72B7B2",
    RELIABLE: "#2E8B57",
}


def _count_bars(
    counts: pd.Series, colors: list[str], *, category: str, unit: str, title: str, height: int
) -> go.Figure:
    """``counts`` (``unit`` per ``category``) as horizontal bars in their order, the first on top."""
    fig = go.Figure(
        go.Bar(
            y=list(counts.index),
            x=counts.to_numpy(),
            orientation="h",
            marker_color=colors,
            text=counts.to_numpy(),
            textposition="auto",
            hovertemplate=f"%{{y}}: %{{x}} {unit}<extra></extra>",
        )
    )
    fig.update_yaxes(title_text=category, autorange="reversed", automargin=True)
    fig.update_xaxes(title_text=unit, rangemode="tozero")
    return base_layout(fig, title, height=height)


def verdict_counts(audit: AuditResult) -> go.Figure:
    """Annotators per verdict (horizontal bars, worst on top)."""
    counts = audit.annotators.counts()
    colors = [VERDICT_COLORS[v] for v in counts.index]
    title = f"Verdicts for {audit.n_workers:,} annotators"
    return _count_bars(counts, colors, category="verdict", unit="annotators", title=title, height=330)


def skill_evidence(audit: AuditResult) -> go.Figure:
    """Skill above chance (0 = guessing, 1 = always right) against the responses it rests on, with the interval
    of every annotator, the chance line and the "near chance" band; one colour per verdict."""
    v = audit.annotators
    e = v.evidence
    pct = f"{100 * e.level:.0f}%"
    fig = go.Figure()
    x = np.maximum(e.n_shared, 1)
    for word in VERDICTS:
        sel = (v.verdict == word) & np.isfinite(e.skill)
        if not sel.any():
            continue
        fig.add_trace(
            go.Scatter(
                x=x[sel],
                y=e.skill[sel],
                mode="markers",
                name=word,
                marker={"color": VERDICT_COLORS[word], "size": 8},
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": e.skill_high[sel] - e.skill[sel],
                    "arrayminus": e.skill[sel] - e.skill_low[sel],
                    "thickness": 1,
                    "width": 0,
                    "color": VERDICT_COLORS[word],
                },
                customdata=np.column_stack([esc_all(e.workers[sel]), e.skill_low[sel], e.skill_high[sel]]),
                hovertemplate="annotator %{customdata[0]}<br>skill above chance %{y:.2f} "
                f"({pct} interval %{{customdata[1]:.2f}} to %{{customdata[2]:.2f}})<br>"
                "%{x} responses on shared items<extra>" + esc(word) + "</extra>",
            )
        )
    fig.add_hline(y=0, line_dash="dash", line_color="#444", annotation_text="chance", annotation_position="top left")
    fig.add_hline(
        y=v.rule.chance_band,
        line_dash="dot",
        line_color="#999",
        annotation_text="near-chance limit",
        annotation_position="bottom right",
    )
    fig.update_xaxes(title_text="responses on items others labelled too (log scale)", type="log")
    fig.update_yaxes(title_text=f"skill above chance ({pct} interval)", range=[-1.05, 1.05])
    fig.update_layout(legend_title_text="verdict")
    return base_layout(fig, "Annotator skill above chance, with the evidence behind it", height=460)


def label_confidence(audit: AuditResult, bins: int = 40) -> go.Figure:
    """Histogram of each item's label probability (binned here, so the figure stays small on any number of
    items), with the review threshold."""
    r = audit.review
    counts, edges = np.histogram(np.clip(r.confidence, 0.0, 1.0), bins=bins, range=(0.0, 1.0))
    mids = (edges[:-1] + edges[1:]) / 2
    fig = go.Figure(
        go.Bar(
            x=mids,
            y=counts,
            width=np.diff(edges),
            marker_color=color_for(0),
            customdata=np.column_stack([edges[:-1], edges[1:]]),
            hovertemplate="label probability %{customdata[0]:.3f}–%{customdata[1]:.3f}: %{y} items<extra></extra>",
        )
    )
    fig.add_vline(
        x=r.rule.min_confidence,
        line_dash="dash",
        line_color="#9E1B32",
        annotation_text="look again below",
        annotation_position="top left",
    )
    fig.update_xaxes(title_text="probability that the item's label is right (model)", range=[0, 1.01])
    fig.update_yaxes(title_text="items")
    return base_layout(fig, f"Label confidence of {len(r.items):,} items", height=330)


def review_reasons(audit: AuditResult) -> go.Figure:
    """Items to look at again, per reason (an item may have several) and in total."""
    c = audit.review.counts()
    colors = [color_for(1)] * (len(c) - 1) + [color_for(3)]
    return _count_bars(c, colors, category="reason", unit="items", title="Items that need another look", height=300)


def agreement_intervals(audit: AuditResult) -> go.Figure:
    """Every registered agreement statistic (Fleiss' κ, Krippendorff's α …) with its bootstrap interval, on the −1 … 1 scale with chance at 0."""
    rows = [e for e in audit.agreement if np.isfinite(e.value)]
    if not rows:
        return empty_figure("Agreement between annotators", audit.agreement_note or "agreement could not be measured")
    names = [e.statistic for e in rows]
    vals = np.array([e.value for e in rows])
    lo = np.array([e.low if np.isfinite(e.low) else e.value for e in rows])
    hi = np.array([e.high if np.isfinite(e.high) else e.value for e in rows])
    fig = go.Figure(
        go.Scatter(
            x=vals,
            y=names,
            mode="markers",
            marker={"size": 12, "color": color_for(0)},
            error_x={"type": "data", "symmetric": False, "array": hi - vals, "arrayminus": vals - lo},
            hovertemplate="%{y}: %{x:.3f}<extra></extra>",
        )
    )
    fig.add_vline(x=0, line_dash="dash", line_color="#444", annotation_text="chance", annotation_position="top")
    fig.update_xaxes(title_text=f"agreement ({100 * rows[0].level:.0f}% bootstrap interval); 1 = full", range=[-1, 1])
    fig.update_yaxes(title_text="statistic", automargin=True)
    return base_layout(fig, "Agreement between annotators (chance-corrected)", height=260)


def majority_changes(audit: AuditResult, max_pairs: int = 20) -> go.Figure:
    """Labels that differ from majority vote, by (majority label → audit label)."""
    ch = audit.review.changes()
    if ch.empty:
        return empty_figure("Changes against majority vote", "every label equals the majority vote")
    pairs = (ch["majority vote"].astype(str) + " → " + ch["label"].astype(str)).value_counts().iloc[:max_pairs]
    fig = go.Figure(
        go.Bar(
            x=esc_all(pairs.index),
            y=pairs.to_numpy(),
            marker_color=color_for(4),
            hovertemplate="%{x}: %{y} items<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="majority vote → audit label", type="category")
    fig.update_yaxes(title_text="items", rangemode="tozero")
    return base_layout(fig, f"{len(ch):,} labels differ from majority vote", height=320)


def audit_figures(audit: AuditResult) -> dict[str, go.Figure]:
    """Every chart of the audit by the key its findings name (``cartel`` only when the cartel test ran,
    ``ratings`` — bias against noise — only for ordinal or numeric labels)."""
    figs = {
        "verdicts": verdict_counts(audit),
        "skill": skill_evidence(audit),
        "labels": label_confidence(audit),
        "review": review_reasons(audit),
        "agreement": agreement_intervals(audit),
        "changes": majority_changes(audit),
    }
    rep = audit.cartel.report
    if rep is not None and audit.cartel.status != "could_not_run":
        figs["cartel"] = loadings_scatter(rep)
    if audit.ratings is not None:
        figs["ratings"] = bias_noise_scatter(audit.ratings)
    if audit.drift is not None:
        figs["drift"] = crowd_over_time(audit.drift)
    return figs
