"""Potts prior and ICM label estimation on an item graph (Traganitis & Giannakis §5, eqs. (29), (33);
spec ``sequential-networked.md`` §2.4.2).

* Potts local energy (29): ``U_n(k) = (δ_n / 2) Σ_{n' ∈ N_n} w_nn' I(k ≠ y_n')`` (edge weights ``w`` default 1).
* ICM (33): ``y_n ← argmax_k L[n, k] − U_n(k)``.  ``mode='gauss_seidel'`` updates the colour classes of a greedy
  graph colouring one after another — nodes of one colour are never adjacent, so this is exact Gauss–Seidel
  (Besag) in colour order and never increases ``E(y) = −Σ_n L[n, y_n] + (δ/2) Σ_edges w I(y_n ≠ y_n')``;
  ``mode='jacobi'`` is the paper-literal synchronous update (may oscillate; stops at ``t_max``).  A node keeps
  its label on ties; ``fixed`` nodes (gold labels) never change.
* Edge agreement (pitfall P10): the share of edges whose endpoints carry the same label, against the chance level
  ``Σ_k p_k²``.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np

from fusion_core.data.graph import ItemGraph
from fusion_core.data.responses import Responses
from fusion_core.methods.ties import argmax_ties

ICM_MODES = ("gauss_seidel", "jacobi")


def node_delta(delta: Any, resp: Responses) -> np.ndarray:
    """Per-node Potts strength: 'M' (number of annotators, the paper's synthetic/citation setting),
    'half_answered' (``M_n / 2``, the paper's crowd setting) or a number (validated by the estimators)."""
    n = resp.n_items
    if isinstance(delta, str) and delta.strip() == "M":
        return np.full(n, float(resp.n_workers))
    if isinstance(delta, str) and delta.strip() == "half_answered":
        return resp.responses_per_item.astype(float) / 2.0
    return np.full(n, float(delta))


def potts_energy(labels: np.ndarray, graph: ItemGraph, delta: np.ndarray, k: int) -> np.ndarray:
    """``U[n, k] = (δ_n/2) Σ_{n'} w_nn' I(k ≠ y_n')`` for all nodes and classes (eq. 29)."""
    onehot = np.zeros((graph.n_items, k))
    onehot[np.arange(graph.n_items), labels] = 1.0
    agree = np.asarray(graph.adjacency @ onehot)
    wdeg = np.asarray(graph.adjacency.sum(axis=1)).ravel()
    return 0.5 * delta[:, None] * (wdeg[:, None] - agree)


def icm_energy(unary: np.ndarray, labels: np.ndarray, graph: ItemGraph, delta: float) -> float:
    """``E(y) = −Σ_n L[n, y_n] + (δ/2) Σ_{undirected edges} w I(y_n ≠ y_n')`` (spec §2.4.2, constant δ)."""
    data = -unary[np.arange(len(labels)), labels].sum()
    disagree = (labels[graph.source] != labels[graph.target]) * graph.weight
    return float(data + 0.5 * delta * disagree.sum())


def color_classes(graph: ItemGraph) -> list[np.ndarray]:
    """Node sets of a greedy colouring (largest-first); isolated nodes join the first class."""
    if graph.n_edges == 0:
        return [np.arange(graph.n_items)]
    g = nx.Graph()
    g.add_nodes_from(range(graph.n_items))
    g.add_edges_from(zip(graph.source.tolist(), graph.target.tolist()))
    colors = nx.coloring.greedy_color(g, strategy="largest_first")
    col = np.fromiter((colors[i] for i in range(graph.n_items)), dtype=np.int64, count=graph.n_items)
    return [np.flatnonzero(col == c) for c in range(col.max() + 1)]


def icm(
    unary: np.ndarray,
    graph: ItemGraph,
    labels: np.ndarray,
    delta: np.ndarray,
    *,
    mode: str = "gauss_seidel",
    t_max: int = 50,
    colors: list[np.ndarray] | None = None,
    fixed: np.ndarray | None = None,
    rank: np.ndarray | None = None,
) -> tuple[np.ndarray, int, bool]:
    """ICM (33) from ``labels``; returns (labels, sweeps, converged).  ``fixed`` (boolean per node): nodes that
    keep their label (gold); ``rank``: class tie priority (:func:`fusion_core.methods.ties.class_priority`), so a
    node moving to one of several equally good classes picks the preferred one, not the lowest code.  See the
    module docstring for the modes."""
    pick = (lambda s: np.argmax(s, axis=1)) if rank is None else (lambda s: argmax_ties(s, rank))
    n, k = unary.shape
    if mode not in ICM_MODES:
        raise ValueError(f"ICM mode must be one of {ICM_MODES}, got {mode!r}")
    y = labels.copy()
    adj = graph.adjacency
    wdeg = np.asarray(adj.sum(axis=1)).ravel()
    if graph.n_edges == 0:
        free = pick(unary)
        return (free if fixed is None else np.where(fixed, y, free)), 1, True
    groups = (colors if colors is not None else color_classes(graph)) if mode == "gauss_seidel" else [np.arange(n)]
    movable = [np.ones(len(g), dtype=bool) if fixed is None else ~fixed[g] for g in groups]
    rows = [adj[g] for g in groups]
    for sweep in range(1, int(t_max) + 1):
        changed = 0
        snapshot = y.copy() if mode == "jacobi" else None
        for g, sub, free in zip(groups, rows, movable):  # colour classes, not nodes
            src = snapshot if snapshot is not None else y
            onehot = np.zeros((n, k))
            onehot[np.arange(n), src] = 1.0
            agree = np.asarray(sub @ onehot)
            score = unary[g] - 0.5 * delta[g, None] * (wdeg[g, None] - agree)
            best = pick(score)
            cur = y[g]
            better = free & (score[np.arange(len(g)), best] > score[np.arange(len(g)), cur] + 1e-12)
            new = np.where(better, best, cur)
            changed += int((new != cur).sum())
            y[g] = new
        if changed == 0:
            return y, sweep, True
    return y, int(t_max), False


def edge_agreement(labels: np.ndarray, graph: ItemGraph, k: int) -> tuple[float, float]:
    """(share of edges whose endpoints have the same label, chance level ``Σ_k p_k²``) — pitfall P10."""
    if graph.n_edges == 0:
        return float("nan"), float("nan")
    agree = float(np.mean(labels[graph.source] == labels[graph.target]))
    p = np.bincount(labels, minlength=k) / len(labels)
    return agree, float((p**2).sum())
