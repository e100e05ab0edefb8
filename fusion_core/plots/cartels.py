"""Cartel figures from a :class:`~fusion_core.diagnostics.cartels.CartelReport` (spectral spec §6.6).

* scree plot: observed eigenvalues against the parametric-bootstrap null of independent annotators
  (the band holds the central ``1 − alpha`` of the null; its mean is the independence expectation);
* loadings: annotators on the first two eigenvectors, coloured by detected group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from fusion_core.plots._common import base_layout, color_for, empty_figure, esc, esc_all

NOT_MEMBER = "not in a cartel"

if TYPE_CHECKING:
    from fusion_core.diagnostics.cartels import CartelReport


def scree_plot(report: CartelReport, *, max_components: int | None = None) -> go.Figure:
    """Eigenvalue spectrum (``report.eigenvalues``) with the band of ``report.null_eigenvalues``."""
    eig = np.asarray(report.eigenvalues, dtype=float).ravel()
    if eig.size == 0:
        return empty_figure("Eigenvalue spectrum", "no eigenvalues were computed (see the report's reason)")
    n = eig.size if max_components is None else min(eig.size, max_components)
    x = np.arange(1, n + 1)
    fig = go.Figure()
    null = np.asarray(report.null_eigenvalues, dtype=float)
    alpha = float(report.alpha)
    if null.size:
        if null.ndim == 1:
            null = null[None, :]
        m = min(n, null.shape[1])
        lo = np.nanquantile(null[:, :m], alpha / 2, axis=0)
        hi = np.nanquantile(null[:, :m], 1 - alpha / 2, axis=0)
        mean = np.nanmean(null[:, :m], axis=0)
        xs = x[:m]
        fig.add_trace(
            go.Scatter(
                x=np.r_[xs, xs[::-1]],
                y=np.r_[hi, lo[::-1]],
                fill="toself",
                fillcolor="rgba(150,150,150,0.3)",
                line={"width": 0},
                name=f"independence null ({100 * (1 - alpha):.0f}% band)",
                hoverinfo="skip",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=mean,
                mode="lines",
                line={"dash": "dash", "color": "#666"},
                name="independence expectation",
                hovertemplate="component %{x}<br>expected if independent: %{y:.3f}<extra></extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=eig[:n],
            mode="lines+markers",
            marker={"size": 9, "color": color_for(0)},
            name="observed",
            hovertemplate="component %{x}<br>observed eigenvalue %{y:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="component (1 = agreement with the truth; 2 and up = shared extra structure)", dtick=1)
    fig.update_yaxes(title_text="eigenvalue of the annotators' covariance")
    return base_layout(fig, "Eigenvalue spectrum (scree) vs. independent annotators", height=380)


def loadings_scatter(report: CartelReport) -> go.Figure:
    """Annotators on the first two eigenvectors (``report.loadings`` columns v1, v2) coloured by
    ``report.membership``, with the cartel score (``report.scores``) on hover."""
    load = report.loadings
    if load.shape[1] < 2 or len(load) == 0:
        return empty_figure("Annotator loadings", "fewer than two eigenvectors are available")
    member = report.membership.reindex(load.index).fillna("honest").replace("honest", NOT_MEMBER)
    scores = report.scores.reindex(load.index)
    fig = go.Figure()
    c1, c2 = load.columns[0], load.columns[1]
    for i, group in enumerate(sorted(member.unique(), key=lambda g: (g != NOT_MEMBER, str(g)))):
        sel = member == group
        hover = [
            f"{h}<br>{esc(group)}" + (f"<br>cartel score {s:.2f}" if group != NOT_MEMBER else "")
            for h, s in zip(esc_all(load.index[sel]), scores[sel].to_numpy(float))
        ]
        fig.add_trace(
            go.Scatter(
                x=load.loc[sel, c1],
                y=load.loc[sel, c2],
                mode="markers",
                marker={"size": 10, "color": color_for(i), "symbol": "circle" if group == NOT_MEMBER else "diamond"},
                name=esc(group),
                text=hover,
                hovertemplate="%{text}<extra></extra>",
            )
        )
    fig.add_hline(y=0, line={"color": "#bbb", "width": 1})
    fig.add_vline(x=0, line={"color": "#bbb", "width": 1})
    fig.update_xaxes(title_text=f"loading on eigenvector 1 ({esc(c1)}: agreement with the crowd)")
    fig.update_yaxes(title_text=f"loading on eigenvector 2 ({esc(c2)}: the direction a cartel adds)")
    return base_layout(fig, "Annotator loadings on the first two eigenvectors", height=420)
