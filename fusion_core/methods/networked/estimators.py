"""Graph-aware estimators: ``mrf-em`` (Alg. 4: moment-matching start, then Alg. 3) and ``mrf-mv`` (MV + Alg. 3).

Traganitis & Giannakis §5, spec ``sequential-networked.md`` §2.4.  ``labels_`` are the final ICM labels
(``result_.hard_labels``), ``probas_`` the pseudo-posteriors (35).
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any, ClassVar

import numpy as np

from fusion_core.data.graph import ItemGraph, graph_for_responses
from fusion_core.data.responses import Responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import Aggregator, Gold
from fusion_core.methods.dawid_skene import expected_counts, normalize_confusion
from fusion_core.methods.moment_matching import MM_PARAMS, fit_mm, floor_columns, map_posterior, mm_settings
from fusion_core.methods.networked.icm import ICM_MODES, edge_agreement, node_delta
from fusion_core.methods.networked.model import network_em
from fusion_core.methods.params import Choice, Float, Int, Object, Param
from fusion_core.methods.registry import register
from fusion_core.methods.results import Fit, GraphSummary
from fusion_core.methods.ties import argmax_ties, class_priority, hard_votes

AGREEMENT_LIFT_WARN = 0.2  # warn when the initial labels' edge agreement lifts less than this above chance


def check_delta(value: Any) -> Any:
    """Parameter check for ``delta``: 'M', 'half_answered' or a positive number."""
    if isinstance(value, str) and value in ("M", "half_answered"):
        return value
    number = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    if not number or not np.isfinite(float(value)) or float(value) <= 0:
        raise UserInputError("'M' (number of annotators), 'half_answered' or a positive number")
    return value


MRF_PARAMS = {
    "delta": Object(
        "M",
        help="Potts strength δ: 'M' (number of annotators), 'half_answered' (half the item's responses) or a number.",
        text="'M' (number of annotators), 'half_answered' or a positive number",
        check=check_delta,
        advanced=False,
    ),
    "icm_mode": Choice(
        "gauss_seidel", ICM_MODES, help="ICM update order: Gauss–Seidel (monotone) or Jacobi (paper-literal)."
    ),
    "t_max": Int(50, low=1, high=10_000, help="Maximum ICM sweeps per EM iteration."),
    "em_max_iter": Int(50, low=1, high=10_000, help="Maximum outer EM iterations."),
    "em_tol": Float(
        1e-9,
        low=0.0,
        high=1.0,
        advanced=True,
        help="EM stops when the relative change of the log pseudo-likelihood is below this.",
    ),
    "smoothing": Float(0.01, low=0.0, high=100.0, help="Dirichlet pseudo-count on the confusion counts (P5)."),
}


class NetworkedBase(Aggregator):
    """Shared MRF fitting.  ``result_.graph``: the Potts strength, the initial labels' edge agreement (the
    over-smoothing check, P10) and the number of edges; ``edge_agreement_`` the same share.  Gold labels
    (``true_labels=``) are clamped: gold items keep their label in ICM and their class in the posteriors.
    ``result_.details``: ``edge_agreement_chance``, ``icm_sweeps`` (per E-step), ``average_degree``."""

    row_order_sensitive = True  # sums over responses in row order decided near-ties (issue 25 item 6)

    use_mm: ClassVar[bool] = True
    delta: Any
    icm_mode: str
    t_max: int
    em_max_iter: int
    em_tol: float
    smoothing: float

    def _init(self, resp: Responses, gold: Gold | None) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """Γ⁽⁰⁾ and initial labels: moment matching + MAP (18) (Alg. 4), or the M-step on one-hot majority vote."""
        k = resp.n_classes
        if self.use_mm:
            res = fit_mm(resp, **mm_settings(self))
            post, _ = map_posterior(resp, res.gamma, res.class_prior)
            y0 = argmax_ties(post, class_priority(resp))
            return floor_columns(res.gamma).transpose(0, 2, 1), y0, {"mm_fallback": res.fallback}
        mv = hard_votes(resp)  # ties: more votes overall, then first in the table (methods.ties)
        if gold is not None and len(gold[0]):
            mv[gold[0]] = gold[1]
        return normalize_confusion(expected_counts(resp, np.eye(k)[mv]), 0.01), mv, {}

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        g = graph_for_responses(graph, responses)
        delta = node_delta(self.delta, responses)
        conf0, y0, details = self._init(responses, gold)
        agree, chance = edge_agreement(y0, g, responses.n_classes)
        warn_over_smoothing(g, agree, chance)
        run, model = network_em(
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
            name=f"{self.method_name} EM",
        )
        details.update(edge_agreement_chance=chance, icm_sweeps=list(model.sweeps), average_degree=g.average_degree)
        return run.to_fit(
            confusion=run.state.confusion,
            class_prior=None,
            hard_labels=run.estep.stats.labels,
            graph=GraphSummary(
                delta=float(delta.mean()) if len(delta) else 0.0, edge_agreement=agree, n_edges=g.n_edges
            ),
            details=details,
        )

    def _set_fitted(self, resp: Responses, fit: Fit, seconds: float) -> None:
        super()._set_fitted(resp, fit, seconds)
        graph = self.result_.graph
        self.edge_agreement_ = graph.edge_agreement if graph is not None else float("nan")


def warn_over_smoothing(graph: ItemGraph, agree: float, chance: float) -> None:
    """Pitfall P10: warn when few edges join items with the same initial label (a weakly homophilous graph)."""
    if not graph.n_edges or not np.isfinite(agree):
        return
    lift = (agree - chance) / max(1 - chance, 1e-12)
    if lift < AGREEMENT_LIFT_WARN:
        warnings.warn(
            f"only {agree:.0%} of graph edges join items with the same initial label (chance level {chance:.0%}); "
            "the graph looks weakly homophilous, so the Potts prior may over-smooth the labels. "
            "Consider a smaller delta or a method without the graph.",
            AggregationWarning,
            stacklevel=3,
        )


@register(
    "mrf-em",
    title="Graph-aware model (Potts prior, EM from moment matching)",
    summary="Graph-aware EM: moment-matching start, Potts prior over the item graph, ICM + EM (Alg. 4).",
    inputs=("graph",),
    family="networked",
    reference="Traganitis & Giannakis Alg. 4 (§5, eqs. (28)–(36)).",
)
class MRFEM(NetworkedBase):
    """Alg. 4: Γ̂ by moment matching (17), initial labels by MAP (18), then Alg. 3 (ICM + EM).  See
    :class:`NetworkedBase` for the fitted attributes.

    Examples
    --------
    >>> from fusion_core.simulate.graph import sbm
    >>> sim = sbm(n_items=400, avg_degree=5, seed=0)
    >>> est = MRFEM().fit(sim.responses, graph=sim.edges)
    >>> bool((est.labels_ == sim.truth.reindex(est.labels_.index)).mean() > 0.9)
    True
    >>> est.result_.graph.n_edges > 0
    True
    """

    params: ClassVar[dict[str, Param]] = {**MRF_PARAMS, **MM_PARAMS}


@register(
    "mrf-mv",
    title="Graph-aware model started from majority vote",
    summary="Graph-aware EM from majority vote: Potts prior over the item graph, ICM + EM (MV + Alg. 3).",
    inputs=("graph",),
    family="networked",
    reference="Traganitis & Giannakis 'MV + Alg. 3' (§5.2).",
)
class MRFMajority(NetworkedBase):
    """MV + Alg. 3: Γ⁽⁰⁾ from the M-step on one-hot majority-vote labels (+0.01), then ICM + EM.  See
    :class:`NetworkedBase` for the fitted attributes.

    Examples
    --------
    >>> from fusion_core.simulate.graph import sbm
    >>> sim = sbm(n_items=400, avg_degree=5, seed=0)
    >>> est = MRFMajority().fit(sim.responses, graph=sim.edges)
    >>> bool((est.labels_ == sim.truth.reindex(est.labels_.index)).mean() > 0.9)
    True
    """

    use_mm = False
    params: ClassVar[dict[str, Param]] = MRF_PARAMS
