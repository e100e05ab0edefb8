"""Reliability over time (a :class:`~fusion_core.diagnostics.drift.DriftReport` in, a plotly Figure out): one
annotator's accuracy per time window with its interval and the change found, and the crowd's accuracy and agreement
per window (per batch)."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from fusion_core.diagnostics.drift import DriftReport
from fusion_core.plots._common import base_layout, empty_figure, esc

ACCURACY = "accuracy (agreement with the others' posterior)"


def _x(report: DriftReport, values: np.ndarray) -> Any:
    """Times for an axis: datetimes for timestamps, numbers otherwise."""
    return report.time.display(values).to_numpy()


def _mid(report: DriftReport) -> np.ndarray:
    return (report.window_start + report.window_end) / 2.0


def _x_title(report: DriftReport) -> str:
    unit = "batch" if report.batches else "time window, middle"
    return f"{esc(report.time.name)} ({unit}{', UTC' if report.time.kind == 'timestamp' else ''})"


def annotator_over_time(report: DriftReport, worker: Any) -> go.Figure:
    """One annotator's accuracy in each window (points with intervals; windows with too few responses left out),
    with the accuracy before and after the change and the change time when the test found one."""
    j = report.workers.get_loc(worker)
    title = f"Accuracy over time: {esc(worker)}"
    ok = np.isfinite(report.window_accuracy[j])
    if not ok.any():
        return empty_figure(title, f"No window holds {report.rule.min_window} or more responses of this annotator.")
    pct = f"{100 * report.rule.level:.0f}%"
    acc, low, high = report.window_accuracy[j][ok], report.window_low[j][ok], report.window_high[j][ok]
    fig = go.Figure(
        go.Scatter(
            x=_x(report, _mid(report)[ok]),
            y=acc,
            mode="lines+markers",
            name="per window",
            marker={"color": "#4C78A8", "size": 8},
            error_y={"type": "data", "symmetric": False, "array": high - acc, "arrayminus": acc - low, "width": 0},
            customdata=np.column_stack([report.window_n[j][ok], low, high]),
            hovertemplate=f"accuracy %{{y:.2f}} ({pct} interval %{{customdata[1]:.2f}} to %{{customdata[2]:.2f}})"
            "<br>%{customdata[0]} responses<extra></extra>",
        )
    )
    if report.tested[j]:
        lo_t, hi_t = report.span
        cut = report.change_time[j]
        for a, b, value, name in ((lo_t, cut, report.before[j], "before"), (cut, hi_t, report.after[j], "after")):
            fig.add_trace(
                go.Scatter(
                    x=_x(report, np.array([a, b])),
                    y=[value, value],
                    mode="lines",
                    name=f"{name}: {value:.2f}",
                    line={"color": "#E45756" if report.changed[j] else "#9D9D9D", "dash": "dot"},
                    hoverinfo="skip",
                )
            )
        if report.changed[j]:
            fig.add_vline(x=_x(report, np.array([cut]))[0], line_dash="dash", line_color="#E45756")
    fig.update_xaxes(title_text=_x_title(report))
    fig.update_yaxes(title_text=ACCURACY, range=[0, 1.02])
    verdict = "changed" if report.changed[j] else ("no change found" if report.tested[j] else "too few to test")
    return base_layout(fig, f"{title} ({verdict})", height=360)


def crowd_over_time(report: DriftReport) -> go.Figure:
    """The crowd per window (per batch): accuracy against the others' posterior with its interval, and the share
    of the other responses on an item that agree."""
    title = "The crowd over time"
    ok = report.crowd_n > 0
    if not ok.any():
        return empty_figure(title, "No response on an item with two or more responses.")
    pct = f"{100 * report.rule.level:.0f}%"
    x = _x(report, _mid(report)[ok])
    acc, low, high = report.crowd_accuracy[ok], report.crowd_low[ok], report.crowd_high[ok]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=x,
            y=acc,
            mode="lines+markers",
            name="accuracy",
            marker={"color": "#4C78A8", "size": 8},
            error_y={"type": "data", "symmetric": False, "array": high - acc, "arrayminus": acc - low, "width": 0},
            customdata=np.column_stack([report.crowd_n[ok], low, high]),
            hovertemplate=f"accuracy %{{y:.2f}} ({pct} interval %{{customdata[1]:.2f}} to %{{customdata[2]:.2f}})"
            "<br>%{customdata[0]} responses<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=report.crowd_agreement[ok],
            mode="lines+markers",
            name="agreement with the others",
            marker={"color": "#F58518", "size": 7},
            hovertemplate="agreement %{y:.2f}<extra></extra>",
        )
    )
    for j in np.flatnonzero(report.changed):
        fig.add_vline(
            x=_x(report, np.array([report.change_time[j]]))[0],
            line_dash="dash",
            line_color="#E45756",
            annotation_text=esc(report.workers[j]),
            annotation_position="top",
        )
    fig.update_xaxes(title_text=_x_title(report))
    fig.update_yaxes(title_text="share (accuracy, agreement)", range=[0, 1.02])
    return base_layout(fig, title, height=360)


__all__ = ["annotator_over_time", "crowd_over_time"]
