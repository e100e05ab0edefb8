"""Item figures: confidence histogram, sequence posterior strip, graph neighbourhood view.

An item's label is the method's own hard label (``FitResult.label_codes``: Viterbi, ICM or the posterior argmax)
and its confidence the posterior probability of that label, as in the item table."""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
import plotly.graph_objects as go

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.tables import label_confidence
from fusion_core.plots._common import HEAT, as_result, base_layout, color_for, empty_figure, esc, esc_all


def posterior_histogram(result: Any, *, bins: int = 30) -> go.Figure:
    """Histogram of each item's confidence: the posterior probability of its label (at least 1/K when the label
    is the posterior argmax; a joint decoding such as Viterbi can pick a less probable label).  Binned here (a bar
    per bin), so the figure holds ``bins`` numbers, not one per item."""
    res = as_result(result)
    conf = label_confidence(res)
    k = len(res.classes)
    start = min(1.0 / k, float(conf.min())) if len(conf) else 1.0 / k
    counts, edges = np.histogram(conf, bins=bins, range=(start, 1.0))
    width = edges[1] - edges[0]
    fig = go.Figure(
        go.Bar(
            x=(edges[:-1] + edges[1:]) / 2,
            y=counts,
            width=width,
            marker_color=color_for(0),
            customdata=np.stack([edges[:-1], edges[1:]], axis=1),
            hovertemplate="confidence %{customdata[0]:.3f}–%{customdata[1]:.3f}: %{y:,} items<extra></extra>",
        )
    )
    fig.update_layout(bargap=0.02)
    fig.update_xaxes(title_text="posterior of the label (confidence)", range=[start - 0.01, 1.01])
    fig.update_yaxes(title_text="items")
    return base_layout(fig, f"Item confidence ({esc(res.method)}): {len(conf):,} items", height=330)


def sequence_strip(result: Any, responses: Responses, sequence: Any) -> go.Figure:
    """Posteriors along one sequence: a class × position heatmap with the method's labels on top (its own decoding,
    e.g. the Viterbi path of a sequence model, else the most likely label per position)."""
    res = as_result(result)
    seq_of, names, position = responses.sequence, responses.sequences, responses.position
    if seq_of is None or names is None or position is None:
        return empty_figure("Sequence posteriors", "the data has no sequences")
    codes = names.get_indexer([sequence])
    if codes[0] < 0:
        codes = pd.Index(names.astype(str)).get_indexer([str(sequence)])
    if codes[0] < 0:
        return empty_figure("Sequence posteriors", f"sequence {sequence!r} is not in the data")
    items = np.flatnonzero(seq_of == codes[0])
    items = items[np.argsort(position[items], kind="stable")]
    # the result may list items in another order than the responses (same ids): map by id
    rows = pd.Index(res.items).get_indexer(responses.items.take(items))
    ok = rows >= 0
    items, rows = items[ok], rows[ok]
    post = res.posterior[rows]
    pos = position[items]
    labels = esc_all(res.classes)
    best = np.asarray(labels, dtype=object)[np.asarray(res.label_codes)[rows]]
    seq, hard = res.sequence, res.hard_labels
    if hard is not None and seq is not None and seq.viterbi is not None and np.array_equal(hard, seq.viterbi):
        marker_name = "Viterbi path"
    else:
        marker_name = "decoded label" if hard is not None else "most likely"
    fig = go.Figure(
        go.Heatmap(
            z=post.T,
            x=pos,
            y=labels,
            zmin=0,
            zmax=1,
            colorscale=HEAT,
            customdata=np.tile(np.asarray(esc_all(responses.items.take(items)), dtype=object), (len(labels), 1)),
            hovertemplate="position %{x}<br>task %{customdata}<br>%{y}: %{z:.3f}<extra></extra>",
            colorbar={"title": {"text": "posterior"}},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=pos, y=best, mode="markers", marker={"symbol": "x", "color": "#E45756", "size": 8}, name=marker_name
        )
    )
    fig.update_xaxes(title_text="position")
    fig.update_yaxes(title_text="label", type="category")
    return base_layout(fig, f"Posteriors along sequence {esc(names[codes[0]])} ({esc(res.method)})", height=330)


def neighbourhood_view(
    graph: nx.Graph,
    result: Any,
    center: Any,
    *,
    radius: int = 2,
    max_nodes: int = 150,
    random_state: int = 0,
) -> go.Figure:
    """The graph around ``center`` (``radius`` hops) coloured by the method's label.

    Neighbourhoods over ``max_nodes`` are sampled (the centre and its direct neighbours first, then a
    seeded random sample of the rest) and the title says so.  Layout: seeded spring layout.
    """
    res = as_result(result)
    if graph is None or center not in graph:
        return empty_figure("Graph neighbourhood", f"item {center!r} is not a node of the graph")
    rng = np.random.default_rng(random_state)
    hops = nx.single_source_shortest_path_length(graph, center, cutoff=radius)
    nodes = list(hops)
    total = len(nodes)
    if total > max_nodes:
        near = [n for n in nodes if hops[n] <= 1][:max_nodes]
        rest = [n for n in nodes if hops[n] > 1]
        take = max_nodes - len(near)
        pick = list(rng.choice(len(rest), size=min(take, len(rest)), replace=False)) if take > 0 and rest else []
        nodes = near + [rest[i] for i in pick]
    sub = graph.subgraph(nodes)
    pos = nx.spring_layout(sub, seed=random_state)
    index = pd.Index(res.items)
    codes = index.get_indexer(list(sub.nodes))
    if (codes < 0).any():
        alt = pd.Index(index.astype(str)).get_indexer([str(n) for n in sub.nodes])
        codes = np.where(codes < 0, alt, codes)
    ex, ey = [], []
    for u, v in sub.edges:
        ex += [pos[u][0], pos[v][0], None]
        ey += [pos[u][1], pos[v][1], None]
    fig = go.Figure(
        go.Scatter(x=ex, y=ey, mode="lines", line={"color": "#ccc", "width": 1}, hoverinfo="skip", showlegend=False)
    )
    node_list = list(sub.nodes)
    lab_code = np.where(codes >= 0, res.label_codes[np.maximum(codes, 0)], -1)
    conf = np.where(codes >= 0, label_confidence(res)[np.maximum(codes, 0)], np.nan)
    for k in [-1, *range(len(res.classes))]:
        sel = np.flatnonzero(lab_code == k)
        if not len(sel):
            continue
        name = "no responses" if k < 0 else esc(res.classes[k])
        fig.add_trace(
            go.Scatter(
                x=[pos[node_list[i]][0] for i in sel],
                y=[pos[node_list[i]][1] for i in sel],
                mode="markers",
                marker={
                    "size": [18 if node_list[i] == center else 10 for i in sel],
                    "color": "#999" if k < 0 else color_for(k),
                    "line": {"width": [3 if node_list[i] == center else 0.5 for i in sel], "color": "#000"},
                },
                name=name,
                text=[f"{esc(node_list[i])}<br>confidence {conf[i]:.2f}" for i in sel],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    sampled = f", sampled {len(nodes)} of {total} nodes" if total > len(nodes) else ""
    return base_layout(
        fig, f"Neighbourhood of {esc(center)} ({radius} hops{sampled}) coloured by {esc(res.method)} label", height=480
    )
