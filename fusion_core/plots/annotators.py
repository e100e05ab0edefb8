"""Annotator figures: confusion heatmaps (rows = true, columns = reported), skill ranking, eigenvector."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from fusion_core.plots._common import HEAT, as_result, base_layout, color_for, empty_figure, esc, esc_all


def _worker_code(result, worker: Any) -> int:
    codes = result.workers.get_indexer([worker])
    if codes[0] < 0:
        codes = pd.Index(result.workers.astype(str)).get_indexer([str(worker)])
    if codes[0] < 0:
        raise KeyError(f"annotator {worker!r} is not in the result")
    return int(codes[0])


def confusion_heatmap(result: Any, worker: Any) -> go.Figure:
    """One annotator's confusion matrix P(reported | true): y axis "true" (rows), x axis "reported"."""
    res = as_result(result)
    if res.confusion is None:
        return empty_figure("Confusion matrix", f"method '{res.method}' estimates no confusion matrices")
    w = _worker_code(res, worker)
    labels = esc_all(res.classes)
    mat = res.confusion[w]
    fig = go.Figure(
        go.Heatmap(
            z=mat,
            x=labels,
            y=labels,
            zmin=0,
            zmax=1,
            colorscale=HEAT,
            text=np.round(mat, 2),
            texttemplate="%{text}",
            hovertemplate="true %{y}<br>reported %{x}<br>P = %{z:.3f}<extra></extra>",
            colorbar={"title": {"text": "P"}},
        )
    )
    fig.update_xaxes(title_text="reported", type="category", side="bottom")
    fig.update_yaxes(title_text="true", type="category", autorange="reversed")
    return base_layout(fig, f"Confusion matrix of {esc(res.workers[w])} ({esc(res.method)})", height=380)


def confusion_small_multiples(
    result: Any, workers: Sequence[Any] | None = None, *, max_panels: int = 12, columns: int = 4
) -> go.Figure:
    """Confusion heatmaps of several annotators on one shared colour scale (0–1).

    ``workers`` in display order (default: the ``max_panels`` most skilled).  Every panel has y = "true",
    x = "reported".
    """
    res = as_result(result)
    if res.confusion is None:
        return empty_figure("Confusion matrices", f"method '{res.method}' estimates no confusion matrices")
    skills = np.asarray(res.worker_skill, dtype=float)
    if workers is None:
        workers = list(res.workers.take(np.argsort(-np.nan_to_num(skills, nan=-np.inf), kind="stable")))
    workers = list(workers)[:max_panels]
    if not workers:
        return empty_figure("Confusion matrices", "no annotators selected")
    codes = [_worker_code(res, w) for w in workers]
    ncol = min(columns, len(codes))
    nrow = int(np.ceil(len(codes) / ncol))
    titles = [f"{esc(res.workers[c])} (skill {skills[c]:.2f})" for c in codes]
    fig = make_subplots(rows=nrow, cols=ncol, subplot_titles=titles, horizontal_spacing=0.07, vertical_spacing=0.16)
    labels = esc_all(res.classes)
    for i, c in enumerate(codes):
        r, col = divmod(i, ncol)
        fig.add_trace(
            go.Heatmap(
                z=res.confusion[c],
                x=labels,
                y=labels,
                zmin=0,
                zmax=1,
                colorscale=HEAT,
                showscale=i == 0,
                colorbar={"title": {"text": "P"}},
                hovertemplate=f"{esc(res.workers[c])}<br>true %{{y}}<br>reported %{{x}}<br>P = %{{z:.3f}}<extra></extra>",
            ),
            row=r + 1,
            col=col + 1,
        )
        last_row = i + ncol >= len(codes)
        fig.update_xaxes(title_text="reported" if last_row else None, type="category", row=r + 1, col=col + 1)
        fig.update_yaxes(
            title_text="true" if col == 0 else None, type="category", autorange="reversed", row=r + 1, col=col + 1
        )
    return base_layout(
        fig, f"Confusion matrices ({esc(res.method)}): rows = true, columns = reported", height=260 * nrow + 80
    )


def skill_ranking(
    result: Any, intervals: pd.DataFrame | None = None, *, max_workers: int = 60, ascending: bool = False
) -> go.Figure:
    """Bar chart of annotator skill, best first, with error bars from ``intervals`` (columns low, high).

    ``intervals`` is indexed by worker, e.g. :attr:`BootstrapResult.skills`; workers beyond
    ``max_workers`` are left out (say so in the title).
    """
    res = as_result(result)
    skills = res.skills.astype(float)
    order = skills.sort_values(ascending=ascending, kind="stable")
    shown = order.iloc[:max_workers]
    err = None
    if intervals is not None and {"low", "high"} <= set(intervals.columns):
        iv = intervals.reindex(shown.index)
        err = {
            "type": "data",
            "symmetric": False,
            "array": np.clip(iv["high"].to_numpy(float) - shown.to_numpy(), 0, None),
            "arrayminus": np.clip(shown.to_numpy() - iv["low"].to_numpy(float), 0, None),
            "color": "#333",
        }
    fig = go.Figure(
        go.Bar(
            x=esc_all(shown.index),
            y=shown.to_numpy(),
            error_y=err,
            marker_color=color_for(0),
            hovertemplate="%{x}<br>skill %{y:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="annotator", type="category")
    fig.update_yaxes(title_text="skill", range=[0, max(1.0, float(np.nanmax(shown.to_numpy())) if len(shown) else 1.0)])
    more = f" (top {len(shown)} of {len(skills)})" if len(shown) < len(skills) else ""
    ci = " with bootstrap intervals" if err is not None else ""
    return base_layout(fig, f"Annotator skill ({esc(res.method)}){ci}{more}", height=380)


def skill_scatter(
    result: Any,
    responses_per_worker: pd.Series,
    intervals: pd.DataFrame | None = None,
    *,
    chance: float | None = None,
) -> go.Figure:
    """Every annotator's skill (expected accuracy) against their number of responses (log axis), with interval
    bars from ``intervals`` (columns low, high, by annotator), and a dashed line at ``chance`` (default
    1 / number of labels: random guessing).  No annotator is left out."""
    res = as_result(result)
    skills = res.skills.astype(float)
    n = responses_per_worker.reindex(skills.index).fillna(0).to_numpy(float)
    chance = 1.0 / max(len(res.classes), 1) if chance is None else chance
    err, hover_iv = None, [""] * len(skills)
    y = skills.to_numpy()
    if intervals is not None and {"low", "high"} <= set(intervals.columns):
        iv = intervals.reindex(skills.index)
        lo, hi = iv["low"].to_numpy(float), iv["high"].to_numpy(float)
        err = {
            "type": "data",
            "symmetric": False,
            "array": np.clip(np.nan_to_num(hi - y), 0, None),
            "arrayminus": np.clip(np.nan_to_num(y - lo), 0, None),
            "color": "#999",
            "thickness": 1,
        }
        hover_iv = [f" (interval {a:.2f}–{b:.2f})" if np.isfinite(a) else "" for a, b in zip(lo, hi)]
    below = y <= chance + 0.1
    text = [f"{esc(w)}<br>skill {s:.3f}{h}<br>{int(k):,} responses" for w, s, h, k in zip(skills.index, y, hover_iv, n)]
    scatter = go.Scattergl if len(y) > 2000 else go.Scatter
    fig = go.Figure(
        scatter(
            x=np.maximum(n, 1),
            y=y,
            mode="markers",
            error_y=err,
            marker={"color": [color_for(3) if b else color_for(0) for b in below], "size": 7, "opacity": 0.8},
            text=text,
            hovertemplate="%{text}<extra></extra>",
            name="annotators",
        )
    )
    fig.add_hline(
        y=chance,
        line_dash="dash",
        line_color="#666",
        annotation_text=f"random guessing ({chance:.2f})",
        annotation_position="bottom right",
    )
    fig.update_xaxes(title_text="responses (log scale)", type="log")
    top = max(1.0, float(np.nanmax(y)) if len(y) else 1.0)
    fig.update_yaxes(title_text="skill (expected accuracy)", range=[0, top * 1.02])
    ci = " with intervals" if err is not None else ""
    return base_layout(fig, f"Skill of all {len(y):,} annotators ({esc(res.method)}){ci}", height=420)


def eigenvector_bar(result: Any) -> go.Figure:
    """The ranking eigenvector of a spectral method (``result.spectral.eigenvector``), one bar per annotator, sorted:
    its entries are ∝ 2·balanced accuracy − 1 (P14 Eq. 8).  One-vs-all fits show one bar series per class;
    annotators outside the spectral core have no entry and are left out."""
    res = as_result(result)
    summary = res.spectral
    if summary is None:
        return empty_figure(
            "Ranking eigenvector", f"method '{res.method}' is not spectral: it has no ranking eigenvector"
        )
    vec = np.asarray(summary.eigenvector, dtype=float)
    if not np.isfinite(vec).any():
        return empty_figure("Ranking eigenvector", f"no eigenvector was computed ({summary.method_used})")
    cols = vec.reshape(len(res.workers), -1)
    finite = np.isfinite(cols)
    mean = np.where(finite, cols, 0.0).sum(axis=1) / np.maximum(finite.sum(axis=1), 1)
    shown = np.flatnonzero(finite.any(axis=1))
    shown = shown[np.argsort(-mean[shown], kind="stable")]  # best first (mean over classes for one-vs-all)
    names = esc_all(res.workers.take(shown))
    fig = go.Figure()
    if cols.shape[1] == 1:
        y = cols[shown, 0]
        colors = [color_for(0) if v >= 0 else color_for(3) for v in y]
        fig.add_trace(go.Bar(x=names, y=y, marker_color=colors, name="eigenvector entry"))
    else:
        for k, c in enumerate(res.classes):  # one bar series per class (one-vs-all)
            fig.add_trace(
                go.Bar(x=names, y=cols[shown, k], marker_color=color_for(k), name=f"class {esc(c)} vs the rest")
            )
        fig.update_layout(barmode="group")
    left_out = len(res.workers) - len(shown)
    fig.update_xaxes(
        title_text="annotator" + (f" ({left_out} outside the spectral core not shown)" if left_out else ""),
        type="category",
    )
    fig.update_yaxes(title_text="eigenvector entry (∝ 2·balanced accuracy − 1)")
    return base_layout(fig, f"Ranking eigenvector ({esc(res.method)})", height=350)
