"""Data summary figures: response counts, label distribution, annotator overlap, Cohen's κ heatmap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from fusion_core.data.responses import Responses, as_responses
from fusion_core.plots._common import DIVERGING, HEAT, base_layout, color_for, empty_figure, esc_all


def _count_bars(values: np.ndarray, color: str, what: str) -> go.Bar:
    """Bars of how many annotators/items have each number of responses (counted here: the figure holds one number
    per distinct count, not one per item)."""
    counts, freq = np.unique(np.asarray(values, dtype=np.int64), return_counts=True)
    return go.Bar(
        x=counts,
        y=freq,
        marker_color=color,
        name=what,
        hovertemplate=f"%{{x}} responses: %{{y:,}} {what}<extra></extra>",
    )


def response_count_histograms(data: Responses | pd.DataFrame) -> go.Figure:
    """Two histograms: responses per annotator and responses per item."""
    resp = as_responses(data)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("responses per annotator", "responses per item"))
    fig.add_trace(_count_bars(resp.responses_per_worker, color_for(0), "annotators"), row=1, col=1)
    fig.add_trace(_count_bars(resp.responses_per_item, color_for(1), "items"), row=1, col=2)
    fig.update_xaxes(title_text="responses", row=1, col=1)
    fig.update_xaxes(title_text="responses", row=1, col=2)
    fig.update_yaxes(title_text="annotators", row=1, col=1)
    fig.update_yaxes(title_text="items", row=1, col=2)
    fig.update_layout(showlegend=False, bargap=0.05)
    return base_layout(
        fig, f"{resp.n_responses:,} responses by {resp.n_workers:,} annotators on {resp.n_items:,} items", height=330
    )


def label_distribution(data: Responses | pd.DataFrame) -> go.Figure:
    """How often each label was reported."""
    resp = as_responses(data)
    counts = np.bincount(resp.label, minlength=resp.n_classes)
    fig = go.Figure(
        go.Bar(
            x=esc_all(resp.classes),
            y=counts,
            marker_color=[color_for(k) for k in range(resp.n_classes)],
            hovertemplate="label %{x}: %{y:,} responses<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="label", type="category")
    fig.update_yaxes(title_text="responses")
    return base_layout(fig, "Label distribution", height=330)


def overlap_heatmap(shared: pd.DataFrame) -> go.Figure:
    """Number of items each pair of annotators both labelled (from :func:`cohen_kappa_matrix`)."""
    if shared.empty:
        return empty_figure("Annotator overlap", "no annotators")
    fig = go.Figure(
        go.Heatmap(
            z=shared.to_numpy(),
            x=esc_all(shared.columns),
            y=esc_all(shared.index),
            colorscale=HEAT,
            hovertemplate="%{y} & %{x}: %{z} shared items<extra></extra>",
            colorbar={"title": {"text": "items"}},
        )
    )
    fig.update_xaxes(type="category", title_text="annotator")
    fig.update_yaxes(type="category", title_text="annotator", autorange="reversed")
    return base_layout(fig, f"Shared items between the {len(shared)} most active annotators", height=480)


def kappa_heatmap(kappa: pd.DataFrame) -> go.Figure:
    """Pairwise Cohen's κ (−1…1, diverging scale; blank = too few shared items)."""
    if kappa.empty:
        return empty_figure("Pairwise Cohen's κ", "no annotators")
    z = kappa.to_numpy(dtype=float)
    fig = go.Figure(
        go.Heatmap(
            z=np.where(np.isfinite(z), z, None),
            x=esc_all(kappa.columns),
            y=esc_all(kappa.index),
            zmin=-1,
            zmax=1,
            colorscale=DIVERGING,
            hovertemplate="%{y} & %{x}: κ = %{z:.2f}<extra></extra>",
            colorbar={"title": {"text": "κ"}},
        )
    )
    fig.update_xaxes(type="category", title_text="annotator")
    fig.update_yaxes(type="category", title_text="annotator", autorange="reversed")
    return base_layout(fig, f"Pairwise Cohen's κ ({len(kappa)} most active annotators)", height=480)
