"""Reliability along a per-item context (``context-em``, spec ``context.md`` §8 and §15): detection and false-alarm
curves per annotator, and per-class confusion curves (§9.2 option 2).  Where an annotator has no response near a
grid point the curve is interpolation only (§9.1): drawn dotted there.  Everything is read from the result's
:class:`~fusion_core.methods.results.ContextCurves` (``result.context``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from fusion_core.methods.results import ContextCurves, FitResult
from fusion_core.plots._common import as_result, base_layout, color_for, empty_figure, esc


def _worker_codes(res: FitResult, workers: Sequence[Any] | None, max_workers: int) -> list[int]:
    if workers is None:
        order = np.argsort(-np.asarray(res.worker_skill, float), kind="stable")
        return [int(i) for i in order[:max_workers]]
    codes = res.workers.get_indexer(list(workers))
    if np.any(codes < 0):
        missing = [w for w, c in zip(workers, codes) if c < 0]
        raise KeyError(f"annotators not in this result: {missing[:5]}")
    return [int(c) for c in codes[:max_workers]]


def _covered_split(y: np.ndarray, covered: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(solid part, dotted part) of a curve, NaN outside each; the dotted part also takes the covered points next
    to an uncovered one, so the two parts join."""
    if covered is None:
        return y, np.full_like(y, np.nan)
    gap = ~covered
    touches_gap = gap | np.r_[gap[1:], False] | np.r_[False, gap[:-1]]
    return np.where(covered, y, np.nan), np.where(touches_gap, y, np.nan)


def _coverage_mask(curves: ContextCurves, w: int) -> np.ndarray | None:
    """Grid points with a response of annotator ``w`` within ±2.5 % of the grid (a gap narrower than that is
    sampling, not a region left unlabelled); categories: that category."""
    cov, n_grid = curves.coverage, len(curves.grid)
    if cov is None or np.shape(cov)[-1] != n_grid:
        return None
    counts = np.asarray(cov[w], float)
    if not curves.categorical:
        half = max(1, n_grid // 40)
        counts = np.convolve(counts, np.ones(2 * half + 1), mode="same")
    return counts > 0


def _curve_traces(
    fig: go.Figure,
    x: Any,
    y: np.ndarray,
    covered: np.ndarray | None,
    *,
    name: str,
    color: str,
    row: int,
    col: int,
    dash_solid: str = "solid",
    legend: bool = True,
    categorical: bool = False,
) -> None:
    solid, dotted = _covered_split(y, covered)
    mode = "lines+markers" if categorical else "lines"
    fig.add_trace(
        go.Scatter(
            x=x,
            y=solid,
            mode=mode,
            name=name,
            legendgroup=name,
            showlegend=legend,
            line={"color": color, "dash": dash_solid},
            hovertemplate=f"{name}<br>context %{{x}}<br>%{{y:.3f}}<extra></extra>",
        ),
        row=row,
        col=col,
    )
    if np.isfinite(dotted).any():
        fig.add_trace(
            go.Scatter(
                x=x,
                y=dotted,
                mode=mode,
                name=f"{name} (interpolated)",
                legendgroup=name,
                showlegend=False,
                line={"color": color, "dash": "dot", "width": 1},
                hovertemplate=f"{name}<br>context %{{x}}<br>%{{y:.3f}} (no responses here)<extra></extra>",
            ),
            row=row,
            col=col,
        )


def context_reliability(
    result: Any, workers: Sequence[Any] | None = None, *, label: Any = None, max_workers: int = 8
) -> go.Figure:
    """Detection P(reported = c | true = c, x) and false alarm P(reported = c | true ≠ c, x) against the context,
    one line per annotator (default: the ``max_workers`` most skilled).  ``label`` picks c for 3+ labels (class vs
    rest); binary data use the positive label the method chose.  Dotted where the annotator gave no response near
    x."""
    res = as_result(result)
    curves = res.context
    if curves is None or curves.detection is None or curves.false_alarm is None:
        return empty_figure("Reliability along the context", f"method '{res.method}' has no context curves")
    det, fa = np.asarray(curves.detection, float), np.asarray(curves.false_alarm, float)
    grid = np.asarray(curves.grid)
    categorical = curves.categorical
    classes = list(res.classes)
    if det.ndim == 3:  # workers × classes × grid: class c vs rest
        c = 0 if label is None else classes.index(label)
        det, fa = det[:, c], fa[:, c]
        target = classes[c]
    else:
        target = curves.positive_label
    x = [esc(v) for v in grid] if categorical else grid
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.06,
        subplot_titles=(
            f"detection: reported {esc(target)} | true {esc(target)}",
            f"false alarm: reported {esc(target)} | true not {esc(target)}",
        ),
    )
    for j, w in enumerate(_worker_codes(res, workers, max_workers)):
        covered = _coverage_mask(curves, w)
        name, color = esc(res.workers[w]), color_for(j)
        _curve_traces(fig, x, det[w], covered, name=name, color=color, row=1, col=1, categorical=categorical)
        _curve_traces(
            fig, x, fa[w], covered, name=name, color=color, row=1, col=2, legend=False, categorical=categorical
        )
    fig.update_xaxes(title_text="context", type="category" if categorical else None)
    fig.update_yaxes(title_text="probability", range=[0, 1], row=1, col=1)
    fig = base_layout(fig, f"Reliability along the context ({esc(res.method)}); dotted: no responses there", height=440)
    return fig.update_layout(margin={"t": 95})


def context_confusion_curves(result: Any, worker: Any, true_class: Any) -> go.Figure:
    """Row ``true_class`` of one annotator's confusion matrix against the context: P(reported = j | true = i, x),
    one line per reported label j (``context-em`` with ``multiclass="confusion"``, spec §9.2 option 2)."""
    res = as_result(result)
    ctx = res.context
    if ctx is None or ctx.confusion is None:
        return empty_figure(
            "Confusion along the context", f"method '{res.method}' has no confusion curves (multiclass='confusion')"
        )
    curves = np.asarray(ctx.confusion, float)  # workers × grid × true × reported
    grid = np.asarray(ctx.grid)
    categorical = ctx.categorical
    w = _worker_codes(res, [worker], 1)[0]
    i = list(res.classes).index(true_class)
    covered = _coverage_mask(ctx, w)
    x = [esc(v) for v in grid] if categorical else grid
    fig = make_subplots(rows=1, cols=1)
    for j, lab in enumerate(res.classes):
        _curve_traces(
            fig,
            x,
            curves[w, :, i, j],
            covered,
            name=f"reported {esc(lab)}",
            color=color_for(j),
            row=1,
            col=1,
            dash_solid="solid" if j == i else "dash",
            categorical=categorical,
        )
    fig.update_xaxes(title_text="context", type="category" if categorical else None)
    fig.update_yaxes(title_text=f"P(reported | true {esc(true_class)})", range=[0, 1])
    return base_layout(
        fig,
        f"Confusion along the context: annotator {esc(res.workers[w])}, true {esc(true_class)} ({esc(res.method)})",
        height=380,
    )
