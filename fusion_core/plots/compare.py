"""Method comparison figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from fusion_core.plots._common import HEAT, base_layout, color_for, empty_figure, esc_all


def agreement_matrix(agreement: pd.DataFrame, *, title: str = "Label agreement between methods") -> go.Figure:
    """Methods × methods fraction of shared items given the same label (from ``compare_methods``).  The colour scale
    spans the off-diagonal values' own range (agreement is often 0.95–1, which a 0–1 scale shows as one colour);
    the diagonal (a method with itself) is left blank."""
    if agreement.empty:
        return empty_figure(title, "fit at least one method")
    z = agreement.to_numpy(dtype=float).copy()
    np.fill_diagonal(z, np.nan)
    off = z[np.isfinite(z)]
    lo, hi = (float(off.min()), float(off.max())) if off.size else (0.0, 1.0)
    if hi - lo < 0.01:
        lo = max(0.0, hi - 0.01)
        hi = lo + 0.01
    text = np.where(np.isfinite(z), np.vectorize(lambda v: f"{v:.3f}")(np.nan_to_num(z)), "")
    fig = go.Figure(
        go.Heatmap(
            z=np.where(np.isfinite(z), z, None),
            x=esc_all(agreement.columns),
            y=esc_all(agreement.index),
            zmin=lo,
            zmax=hi,
            colorscale=HEAT,
            text=text,
            texttemplate="%{text}",
            hovertemplate="%{y} and %{x}: %{z:.3f} of shared items get the same label<extra></extra>",
            colorbar={"title": {"text": "same label"}},
        )
    )
    fig.update_xaxes(type="category", title_text="method")
    fig.update_yaxes(type="category", title_text="method", autorange="reversed")
    return base_layout(fig, title, height=160 + 60 * len(agreement))


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
            hovertemplate="%{x}: accuracy %{y:.3f} against gold<extra></extra>",
        )
    )
    fig.update_yaxes(title_text="accuracy", range=[0, 1])
    fig.update_xaxes(type="category", title_text="method")
    return base_layout(fig, "Accuracy against gold labels", height=330)
