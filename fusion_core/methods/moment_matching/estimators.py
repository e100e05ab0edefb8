"""Moment matching (``mm``) and Dawid–Skene EM started from it (``mm-ds``).

Traganitis & Giannakis §3.1–3.2, eqs. (13)–(18); spec ``sequential-networked.md`` §2.1–2.2.  The estimators'
``confusion_`` is the package's ``workers × true × reported`` layout (``confusion_[m] == Γ_m.T``, floored).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.methods.base import Aggregator, Gold, clamp_gold
from fusion_core.methods.dawid_skene import ds_fit, fit_em_from, unary_log_likelihood
from fusion_core.methods.moment_matching.moments import LabelEntries, moment_terms
from fusion_core.methods.moment_matching.qp import floor_columns
from fusion_core.methods.moment_matching.solver import MMResult, moment_matching, pair_residuals
from fusion_core.methods.numerics import log_normalize, safe_log
from fusion_core.methods.params import Bool, Float, Int, Object, Param, Seed
from fusion_core.methods.registry import register
from fusion_core.methods.results import AnnotatorColumn, Fit
from fusion_core.methods.ties import class_priority


def check_min_support(value: Any) -> Any:
    """Parameter check for ``min_pair_support`` / ``min_triple_support``: None or a whole number ≥ 1."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise UserInputError("None (the default minimum) or a whole number ≥ 1")
    return value


def check_item_weights(value: Any) -> Any:
    """Parameter check for ``item_weights``: None or finite non-negative numbers by task (Series or dict)."""
    if not isinstance(value, (pd.Series, Mapping)):
        raise UserInputError("None or a Series (or dict) of non-negative weights by task")
    try:
        w = pd.Series(value, dtype=float).to_numpy()
    except (TypeError, ValueError):
        raise UserInputError("None or a Series (or dict) of non-negative numbers by task") from None
    if not np.all(np.isfinite(w)) or (w < 0).any():
        raise UserInputError("None or a Series (or dict) of finite, non-negative weights by task")
    return value


MM_PARAMS = {
    "n_restarts": Int(
        0, low=0, high=50, help="Extra random simplex restarts of moment matching; the lowest objective wins."
    ),
    "max_iter": Int(500, low=1, high=100_000, help="Maximum block-coordinate sweeps of moment matching."),
    "tol": Float(
        1e-7, low=0.0, high=1.0, advanced=True, help="Moment matching stops when max |ΔΓ| over a sweep is below tol."
    ),
    "inner_iter": Int(
        50, low=1, high=1000, advanced=True, help="FISTA iterations per block when the exact block solvers fail."
    ),
    "min_pair_support": Object(
        None,
        help="Minimum co-labelled items for a pair moment (None: max(20, K²)).",
        text="None (the default minimum) or a whole number ≥ 1",
        check=check_min_support,
    ),
    "min_triple_support": Object(
        None,
        help="Minimum co-labelled items for a triple moment (None: max(20, K³/2)).",
        text="None (the default minimum) or a whole number ≥ 1",
        check=check_min_support,
    ),
    "item_weights": Object(
        None,
        help="Optional weight per item (Series by task) for the sample moments.",
        text="None or a Series (or dict) of non-negative weights by task",
        check=check_item_weights,
    ),
    "random_state": Seed(0, help="Seed of the random restarts."),
}


def mm_settings(est: Any) -> dict[str, Any]:
    """The moment-matching parameters of an estimator that declares :data:`MM_PARAMS`."""
    return {name: getattr(est, name) for name in MM_PARAMS}


def item_weight_array(resp: Responses, item_weights: Any) -> np.ndarray | None:
    """Weights by task (Series/dict) as one weight per item code (0 for tasks not listed)."""
    if item_weights is None:
        return None
    s = pd.Series(item_weights, dtype=float)
    codes = resp.item_codes(s.index, what="item-weight tasks")
    w = np.zeros(resp.n_items)
    w[codes] = s.to_numpy()
    return w


def fit_mm(
    resp: Responses,
    *,
    n_restarts: int = 0,
    max_iter: int = 500,
    tol: float = 1e-7,
    inner_iter: int = 50,
    min_pair_support: int | None = None,
    min_triple_support: int | None = None,
    item_weights: Any = None,
    random_state: int | None = 0,
) -> MMResult:
    """:func:`~fusion_core.methods.moment_matching.solver.moment_matching` on a :class:`Responses`."""
    return moment_matching(
        LabelEntries.from_codes(resp.worker, resp.item, resp.label, resp.n_workers, resp.n_items),
        resp.n_classes,
        weights=item_weight_array(resp, item_weights),
        n_restarts=int(n_restarts),
        max_iter=int(max_iter),
        tol=float(tol),
        inner_iter=int(inner_iter),
        min_pair_support=min_pair_support,
        min_triple_support=min_triple_support,
        random_state=random_state,
        rank=class_priority(resp),
    )


def map_posterior(resp: Responses, gamma: np.ndarray, pi: np.ndarray) -> tuple[np.ndarray, float]:
    """MAP rule (18) as posteriors: softmax over k of ``log π_k + Σ_m log Γ_m(f_m, k)``, floored Γ (P5).
    Returns ``(posterior, observed log-likelihood)``."""
    conf = floor_columns(gamma).transpose(0, 2, 1)
    joint = unary_log_likelihood(resp, conf) + safe_log(pi)[None, :]
    post, lognorm = log_normalize(joint)
    return post, float(lognorm.sum())


def mm_details(res: MMResult) -> dict[str, Any]:
    """Moment-matching diagnostics for experts and tests (``FitResult.details``)."""
    return {
        "pair_residual": pair_residuals(res.moments, res.gamma, res.class_prior),
        "diagonal_dominance": res.dominance,
        "mm_objective": res.objective[-1] if res.objective else None,
        "mm_fallback": res.fallback,
        "n_pairs": len(res.moments.pair),
        "n_triples": len(res.moments.triple),
        "moment_terms": moment_terms(res.moments),
    }


def overlaps_column(res: MMResult) -> AnnotatorColumn:
    """Per annotator: how many kept pair and triple moments include it (0 = not identified by moments)."""
    return AnnotatorColumn(
        key="moment_terms",
        title="overlaps with other annotators (pairs + triples)",
        values=moment_terms(res.moments).astype(float),
        help="Groups of two or three annotators with enough items labelled in common that include this annotator; "
        "0 means its reliability could not be estimated from agreement with others, only from its own label "
        "frequencies.",
    )


@register(
    "mm",
    title="Moment matching (agreement statistics, no EM)",
    summary="Moment matching: confusion matrices and priors from 1st–3rd order response moments (no EM).",
    family="moment_matching",
    reference="Traganitis & Giannakis §3.2, eqs. (13)–(18); spec sequential-networked §2.2.",
)
class MomentMatching(Aggregator):
    """Moment matching (spec §2.2): solves (17) by block-coordinate descent, As2 permutation fix, labels by the
    MAP rule (18) with the estimated priors.  ``confusion_[m] = Γ_m.T`` (floored at 1e-6); ``gamma_`` is the
    paper's ``Γ_m[reported, true]`` before flooring.  Gold labels (``true_labels=``) are clamped in the posteriors
    (moments do not use them).

    The annotator table gets, per annotator, the number of kept pair and triple moments it appears in (0 = its
    confusion is not identified by moments, §2.2.6).  ``result_.details``: ``diagonal_dominance`` (As2, P3),
    ``pair_residual`` (As1, P4), ``mm_objective``, ``mm_fallback``, ``n_pairs``, ``n_triples``.

    Examples
    --------
    >>> from fusion_core.simulate import dawid_skene
    >>> sim = dawid_skene(n_items=400, n_workers=8, n_classes=3, responses_per_item=8, seed=0)
    >>> mm = MomentMatching().fit(sim.responses)
    >>> bool((mm.labels_ == sim.truth.reindex(mm.labels_.index)).mean() > 0.9)
    True
    >>> mm.confusion_.shape
    (8, 3, 3)
    """

    row_order_sensitive = True  # sums over responses in row order decided near-ties (issue 25 item 6)

    params: ClassVar[dict[str, Param]] = MM_PARAMS

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        res = fit_mm(responses, **mm_settings(self))
        post, ll = map_posterior(responses, res.gamma, res.class_prior)
        self.gamma_ = res.gamma
        return Fit(
            posterior=clamp_gold(post, gold),
            confusion=floor_columns(res.gamma).transpose(0, 2, 1),
            class_prior=res.class_prior,
            log_likelihood=[ll],
            n_iter=res.n_iter,
            converged=res.converged,
            annotator_columns=(overlaps_column(res),),
            details=mm_details(res),
        )


@register(
    "mm-ds",
    title="Dawid–Skene started from moment matching",
    summary="Dawid–Skene EM initialised from moment matching (the paper's 'DS' baseline).",
    family="moment_matching",
    reference="Traganitis & Giannakis §3.1–3.2 ('DS' = EM of [14] initialised with MM); spec §2.1, §2.2.",
)
class MomentMatchingDawidSkene(Aggregator):
    """Dawid–Skene EM started from the moment-matching estimate: the E-step with MM's floored Γ and π̂ gives the
    initial posteriors, then Dawid–Skene EM runs through the shared driver (spec §2.1 step 1).  Gold labels
    (``true_labels=``) are clamped in EM.  ``result_.details`` holds the moment-matching diagnostics of ``mm``.

    Examples
    --------
    >>> from fusion_core.simulate import dawid_skene
    >>> sim = dawid_skene(n_items=400, n_workers=8, n_classes=3, responses_per_item=8, seed=0)
    >>> est = MomentMatchingDawidSkene().fit(sim.responses)
    >>> bool((est.labels_ == sim.truth.reindex(est.labels_.index)).mean() > 0.9)
    True
    >>> est.converged_
    True
    """

    row_order_sensitive = True  # sums over responses in row order decided near-ties (issue 25 item 6)

    params: ClassVar[dict[str, Param]] = {
        **MM_PARAMS,
        "smoothing": Float(0.0, low=0.0, high=100.0, help="Dirichlet pseudo-count on the EM confusion counts."),
        "estimate_priors": Bool(True, help="Estimate class priors in EM (default on, as Dawid & Skene)."),
        "em_tol": Float(
            1e-7,
            low=0.0,
            high=1.0,
            advanced=True,
            help="EM stops when the relative log-likelihood change is below this.",
        ),
        "em_max_iter": Int(500, low=1, high=10_000, help="Maximum EM iterations."),
    }
    smoothing: float
    estimate_priors: bool
    em_tol: float
    em_max_iter: int

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        res = fit_mm(responses, **mm_settings(self))
        post0, _ = map_posterior(responses, res.gamma, res.class_prior)
        run = fit_em_from(
            responses,
            post0,
            smoothing=float(self.smoothing),
            estimate_priors=bool(self.estimate_priors),
            tol=float(self.em_tol),
            max_iter=int(self.em_max_iter),
            gold=gold,
            name=f"{self.method_name} EM",
        )
        fit = ds_fit(run)
        fit.details = mm_details(res)
        return fit
