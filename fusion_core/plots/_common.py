"""Helpers shared by the figure functions: result coercion (:func:`as_result`), escaping of user-provided text,
layout and colours.

Plotly renders a subset of HTML in text (``<b>``, ``<br>``, links …), so every user id or label value that
ends up in a figure goes through :func:`esc` and is shown literally.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

import plotly.graph_objects as go

from fusion_core.methods.results import as_result

PALETTE = (
    "#4C78A8",
    "#F58518",
    "#54A24B",
    "#E45756",
    "#72B7B2",
    "#EECA3B",
    "#B279A2",
    "#FF9DA6",
    "#9D755D",
    "#BAB0AC",
)
HEAT = "Blues"
DIVERGING = "RdBu"
__all__ = ["DIVERGING", "HEAT", "PALETTE", "as_result", "base_layout", "color_for", "empty_figure", "esc", "esc_all"]


def esc(value: Any) -> str:
    """User text made safe for Plotly (HTML tags shown literally)."""
    return html.escape(str(value), quote=False)


def esc_all(values: Iterable[Any]) -> list[str]:
    return [esc(v) for v in values]


def base_layout(fig: go.Figure, title: str, *, height: int | None = None) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0.0, "xanchor": "left"},
        margin={"l": 60, "r": 20, "t": 60, "b": 50},
        template="plotly_white",
    )
    if height is not None:
        fig.update_layout(height=height)
    return fig


def empty_figure(title: str, message: str) -> go.Figure:
    """A figure with a centred note (used when there is nothing to draw)."""
    fig = go.Figure()
    fig.add_annotation(text=esc(message), x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return base_layout(fig, title, height=250)


def color_for(i: int) -> str:
    return PALETTE[i % len(PALETTE)]
