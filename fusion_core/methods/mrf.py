"""Ensemble MRF for networked items: ICM label estimation and EM with a Potts prior (Alg. 3 / Alg. 4).

Spec ``sequential-networked.md`` §2.4 (paper: Traganitis & Giannakis §5).

* Potts local energy (29): ``U_n(k) = (δ_n / 2) Σ_{n' ∈ N_n} w_nn' I(k ≠ y_n')`` (edge weights ``w`` default 1).
* ICM (33): ``y_n ← argmax_k L[n, k] − U_n(k)``.  ``mode='gauss_seidel'`` (default) updates the colour
  classes of a greedy graph colouring one after another — nodes of one colour are never adjacent, so
  this is exact Gauss–Seidel (Besag) in colour order and never increases
  ``E(y) = −Σ_n L[n, y_n] + (δ/2) Σ_edges w I(y_n ≠ y_n')``; ``mode='jacobi'`` is the paper-literal
  synchronous update (may oscillate; stops at ``t_max``).  A node keeps its label on ties.
* EM (Alg. 3): inner ICM, pseudo-likelihood E-step (34)–(35) with neighbours clamped at the ICM labels,
  M-step (36) = (11).  Alg. 4 starts from moment matching, 'MV + Alg. 3' from majority vote.
* Edge-agreement diagnostic (pitfall P10): share of edges whose endpoints carry the same initial label,
  against the chance level ``Σ_k p_k²``; low lift warns of over-smoothing.
"""

from __future__ import annotations

import warnings

import networkx as nx
import numpy as np
import pandas as pd

from fusion_core.data.graph import ItemGraph, graph_for_responses
from fusion_core.data.responses import Responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import Aggregator, Fit, log_normalize
from fusion_core.methods.dawid_skene import expected_counts, normalize_confusion, unary_log_likelihood
from fusion_core.methods.moment_matching import _MM_PARAMS, fit_mm, floor_columns, map_posterior
from fusion_core.methods.registry import register

AGREEMENT_LIFT_WARN = 0.2


def node_delta(delta, resp: Responses) -> np.ndarray:
    """Per-node Potts strength: 'M' (number of annotators, the paper's synthetic/citation setting),
    'half_answered' (``M_n / 2``, the paper's crowd setting) or a non-negative number."""
    n = resp.n_items
    if isinstance(delta, str):
        key = delta.strip()
        if key == "M":
            return np.full(n, float(resp.n_workers))
        if key == "half_answered":
            return resp.responses_per_item.astype(float) / 2.0
        try:
            delta = float(key)
        except ValueError:
            raise UserInputError(f"delta must be 'M', 'half_answered' or a number ≥ 0, got {delta!r}.") from None
    value = float(delta)
    if not np.isfinite(value) or value < 0:
        raise UserInputError(f"delta must be a number ≥ 0, got {delta!r}.")
    return np.full(n, value)


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
) -> tuple[np.ndarray, int, bool]:
    """ICM (33) from ``labels``; returns (labels, sweeps, converged).  See the module docstring for modes."""
    n, k = unary.shape
    y = labels.copy()
    adj = graph.adjacency
    wdeg = np.asarray(adj.sum(axis=1)).ravel()
    if graph.n_edges == 0:
        return np.argmax(unary, axis=1), 1, True
    if mode == "gauss_seidel":
        groups = colors if colors is not None else color_classes(graph)
    elif mode == "jacobi":
        groups = [np.arange(n)]
    else:
        raise UserInputError(f"ICM mode must be 'gauss_seidel' or 'jacobi', got {mode!r}.")
    rows = [adj[g] for g in groups]
    for sweep in range(1, int(t_max) + 1):
        changed = 0
        snapshot = y.copy() if mode == "jacobi" else None
        for g, sub in zip(groups, rows):
            src = snapshot if snapshot is not None else y
            onehot = np.zeros((n, k))
            onehot[np.arange(n), src] = 1.0
            agree = np.asarray(sub @ onehot)
            score = unary[g] - 0.5 * delta[g, None] * (wdeg[g, None] - agree)
            best = np.argmax(score, axis=1)
            cur = y[g]
            better = score[np.arange(len(g)), best] > score[np.arange(len(g)), cur] + 1e-12
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


def network_em(
    resp: Responses,
    graph: ItemGraph,
    confusion0: np.ndarray,
    labels0: np.ndarray,
    delta: np.ndarray,
    *,
    smoothing: float = 0.01,
    mode: str = "gauss_seidel",
    t_max: int = 50,
    max_iter: int = 50,
    tol: float = 1e-6,
    gold=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[float], int, bool, list[int]]:
    """Alg. 3 (spec §2.4.3) from ``confusion0`` (workers × true × reported) and ``labels0``.

    Each outer iteration: ICM with the current Γ (t reset to 0), E-step (34)–(35) with neighbours clamped at
    the ICM labels, M-step (36) with Dirichlet ``smoothing``.  Stops when ``max|ΔΓ| < tol`` and the labels
    are unchanged, or after ``max_iter``; a final ICM pass uses the final Γ.
    Returns (posterior, labels, confusion, pseudo-log-likelihood trace, n_iter, converged, ICM sweeps).
    """
    k = resp.n_classes
    colors = color_classes(graph) if mode == "gauss_seidel" else None
    conf, y = confusion0, labels0.copy()
    trace: list[float] = []
    sweeps: list[int] = []
    converged = False
    it = 0

    def clamp(u, yy):
        if gold is not None and len(gold[0]):
            u = u.copy()
            u[gold[0]] = -1e9
            u[gold[0], gold[1]] = 0.0
        return u

    for it in range(1, int(max_iter) + 1):
        unary = clamp(unary_log_likelihood(resp, conf), y)
        y_new, n_sw, _ = icm(unary, graph, y, delta, mode=mode, t_max=t_max, colors=colors)
        sweeps.append(n_sw)
        post, lognorm = log_normalize(unary - potts_energy(y_new, graph, delta, k))
        trace.append(float(lognorm.sum()))
        conf_new = normalize_confusion(expected_counts(resp, post), smoothing)
        stable = np.abs(conf_new - conf).max() < tol and np.array_equal(y_new, y)
        conf, y = conf_new, y_new
        if stable:
            converged = True
            break
    unary = clamp(unary_log_likelihood(resp, conf), y)
    y, n_sw, _ = icm(unary, graph, y, delta, mode=mode, t_max=t_max, colors=colors)
    sweeps.append(n_sw)
    post, _ = log_normalize(unary - potts_energy(y, graph, delta, k))
    return post, y, conf, trace, it, converged, sweeps


_MRF_PARAMS = {
    "delta": {
        "kind": "str",
        "help": "Potts strength δ: 'M' (number of annotators), 'half_answered' (M_n/2) or a number.",
    },
    "icm_mode": {
        "choices": ("gauss_seidel", "jacobi"),
        "help": "ICM update order: Gauss–Seidel (monotone) or Jacobi (paper-literal).",
    },
    "t_max": {"low": 1, "high": 10000, "help": "Maximum ICM sweeps per EM iteration."},
    "em_max_iter": {"low": 1, "high": 10000, "help": "Maximum outer EM iterations."},
    "em_tol": {
        "low": 0.0,
        "high": 1.0,
        "help": "Stop when max |ΔΓ| is below this and labels are unchanged.",
        "advanced": True,
    },
    "smoothing": {"low": 0.0, "high": 100.0, "help": "Dirichlet pseudo-count on the confusion counts (P5)."},
    **_MM_PARAMS,
}


class _MRFBase(Aggregator):
    """Shared MRF estimator.  Fitted extras: "edge_agreement", "edge_agreement_chance", "icm_labels",
    "icm_sweeps", "average_degree"; ``labels_`` are the final ICM labels, ``probas_`` the pseudo-posteriors (35)."""

    use_mm = True

    def __init__(
        self,
        delta: str | float = "M",
        icm_mode: str = "gauss_seidel",
        t_max: int = 50,
        em_max_iter: int = 50,
        em_tol: float = 1e-6,
        smoothing: float = 0.01,
        n_restarts: int = 0,
        max_iter: int = 500,
        tol: float = 1e-7,
        inner_iter: int = 50,
        min_pair_support: int | None = None,
        min_triple_support: int | None = None,
        item_weights: pd.Series | None = None,
        random_state: int = 0,
    ):
        self.delta = delta
        self.icm_mode = icm_mode
        self.t_max = t_max
        self.em_max_iter = em_max_iter
        self.em_tol = em_tol
        self.smoothing = smoothing
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.tol = tol
        self.inner_iter = inner_iter
        self.min_pair_support = min_pair_support
        self.min_triple_support = min_triple_support
        self.item_weights = item_weights
        self.random_state = random_state

    def _init(self, resp: Responses) -> tuple[np.ndarray, np.ndarray, dict]:
        k = resp.n_classes
        if self.use_mm:
            res = fit_mm(resp, self)
            post, _ = map_posterior(resp, res.gamma, res.class_prior)
            return floor_columns(res.gamma).transpose(0, 2, 1), np.argmax(post, axis=1), {"mm_fallback": res.fallback}
        votes = resp.vote_counts()
        mv = np.argmax(votes, axis=1)  # ties: lowest class index
        conf = normalize_confusion(expected_counts(resp, np.eye(k)[mv]), 0.01)
        return conf, mv, {}

    def _fit(self, responses, *, gold, graph, context) -> Fit:
        if self.icm_mode not in ("gauss_seidel", "jacobi"):
            raise UserInputError(f"icm_mode must be 'gauss_seidel' or 'jacobi', got {self.icm_mode!r}.")
        if int(self.t_max) < 1 or int(self.em_max_iter) < 1 or not self.smoothing >= 0:
            raise UserInputError("t_max and em_max_iter must be ≥ 1 and smoothing ≥ 0.")
        g = graph_for_responses(graph, responses)
        delta = node_delta(self.delta, responses)
        k = responses.n_classes
        conf0, y0, extras = self._init(responses)
        agree, chance = edge_agreement(y0, g, k)
        if g.n_edges and np.isfinite(agree):
            lift = (agree - chance) / max(1 - chance, 1e-12)
            if lift < AGREEMENT_LIFT_WARN:
                warnings.warn(
                    f"only {agree:.0%} of graph edges join items with the same initial label (chance level {chance:.0%}); "
                    "the graph looks weakly homophilous, so the Potts prior may over-smooth the labels. "
                    "Consider a smaller delta or a method without the graph.",
                    AggregationWarning,
                )
        post, y, conf, trace, n_iter, converged, sweeps = network_em(
            responses,
            g,
            conf0,
            y0,
            delta,
            smoothing=float(self.smoothing),
            mode=self.icm_mode,
            t_max=int(self.t_max),
            max_iter=int(self.em_max_iter),
            tol=float(self.em_tol),
            gold=gold,
        )
        extras.update(
            edge_agreement=agree,
            edge_agreement_chance=chance,
            icm_labels=y,
            hard_labels=y,  # labels_ / result_.labels are the ICM labels
            icm_sweeps=sweeps,
            average_degree=g.average_degree,
        )
        return Fit(
            posterior=post,
            confusion=conf,
            class_prior=None,
            log_likelihood=trace,
            n_iter=n_iter,
            converged=converged,
            extras=extras,
        )

    def _set_fitted(self, resp, fit, seconds) -> None:
        super()._set_fitted(resp, fit, seconds)
        self.edge_agreement_ = fit.extras["edge_agreement"]


@register(
    "mrf-em",
    summary="Graph-aware EM: moment-matching start, Potts prior over the item graph, ICM + EM (Alg. 4).",
    inputs=("graph",),
    family="mrf",
    params=_MRF_PARAMS,
    reference="Traganitis & Giannakis Alg. 4 (§5, eqs. (28)–(36)).",
)
class MRFEM(_MRFBase):
    """Alg. 4: Γ̂ by moment matching (17), initial labels by MAP (18), then Alg. 3 (ICM + EM)."""


@register(
    "mrf-mv",
    summary="Graph-aware EM from majority vote: Potts prior over the item graph, ICM + EM (MV + Alg. 3).",
    inputs=("graph",),
    family="mrf",
    params=_MRF_PARAMS,
    reference="Traganitis & Giannakis 'MV + Alg. 3' (§5.2).",
)
class MRFMajority(_MRFBase):
    """MV + Alg. 3: Γ⁽⁰⁾ from the M-step on one-hot majority-vote labels (+0.01), then ICM + EM."""

    use_mm = False
