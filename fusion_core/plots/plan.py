"""The re-labelling plan's chart (a :class:`~fusion_core.diagnostics.plan.RelabelPlan` in, a plotly Figure out):
expected accuracy of the labels against the extra labels bought, in the plan's order, with each annotator's load."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from fusion_core.diagnostics.plan import RelabelPlan
from fusion_core.plots._common import base_layout, color_for, empty_figure, esc_all

#: annotators shown in the load bars (the busiest)
MAX_ANNOTATORS = 20


def plan_curve(plan: RelabelPlan) -> go.Figure:
    """Left: expected accuracy (mean probability that a label is right, under the model) after each planned
    label, in the order chosen; right: the labels asked of each annotator (the busiest 20)."""
    if plan.n_labels == 0:
        return empty_figure("Re-labelling plan", f"No extra label is suggested ({plan.stop_reason}).")
    x = np.arange(plan.n_labels + 1)
    y = plan.accuracy_before + np.concatenate([[0.0], np.cumsum(plan.assignment_gain)]) / max(plan.n_items, 1)
    step = max(1, len(x) // 2000)  # at most ~2,000 points shipped
    keep = np.unique(np.r_[x[::step], x[-1]])
    fig = make_subplots(rows=1, cols=2, column_widths=[0.62, 0.38], subplot_titles=("", "labels asked per annotator"))
    fig.add_trace(
        go.Scatter(
            x=x[keep],
            y=y[keep],
            mode="lines",
            line={"color": color_for(0)},
            hovertemplate="%{x} labels: expected accuracy %{y:.3f}<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=1,
    )
    load = plan.assignments()["annotator"].value_counts().head(MAX_ANNOTATORS)[::-1]
    fig.add_trace(
        go.Bar(
            x=load.to_numpy(),
            y=esc_all(load.index),
            orientation="h",
            marker_color=color_for(1),
            hovertemplate="%{y}: %{x} labels<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(title_text="extra labels bought (plan order)", row=1, col=1)
    fig.update_yaxes(title_text="expected accuracy of the labels", row=1, col=1)
    fig.update_xaxes(title_text="labels", row=1, col=2)
    fig.update_yaxes(title_text="annotator", type="category", row=1, col=2)
    title = f"{plan.n_labels:,} more labels: expected accuracy {plan.accuracy_before:.1%} → {plan.accuracy_after:.1%}"
    return base_layout(fig, title, height=380)


__all__ = ["plan_curve"]
