"""Method comparison figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from fusion_core.plots._common import HEAT, base_layout, color_for, empty_figure, esc_all


def agreement_matrix(agreement: pd.DataFrame, *, title: str = "Label agreement between methods") -> go.Figure:
    """Methods × methods fraction of shared items given the same label (from ``compare_methods``)."""
    if agreement.empty:
        return empty_figure(title, "fit at least one method")
    z = agreement.to_numpy(dtype=float)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=esc_all(agreement.columns),
            y=esc_all(agreement.index),
            zmin=min(0.0, float(np.nanmin(z))),
            zmax=1,
            colorscale=HEAT,
            text=np.round(z, 3),
            texttemplate="%{text}",
            hovertemplate="%{y} vs %{x}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(type="category", title_text="method")
    fig.update_yaxes(type="category", title_text="method", autorange="reversed")
    return base_layout(fig, title, height=120 + 60 * len(agreement))


def accuracy_bar(accuracy: pd.Series) -> go.Figure:
    """Accuracy against gold per method."""
    if accuracy.dropna().empty:
        return empty_figure("Accuracy against gold", "no gold labels")
    s = accuracy.dropna().sort_values(ascending=False)
    fig = go.Figure(
        go.Bar(
            x=esc_all(s.index),
            y=s.to_numpy(),
            marker_color=[color_for(i) for i in range(len(s))],
            text=np.round(s.to_numpy(), 3),
        )
    )
    fig.update_yaxes(title_text="accuracy", range=[0, 1])
    fig.update_xaxes(type="category", title_text="method")
    return base_layout(fig, "Accuracy against gold labels", height=330)
