"""The audit for ratings (issue 13 item 5): when labels are ordered levels or numbers, the audit also carries the
rating verdicts — reliable / harsh / lenient / noisy / near chance / not enough ratings — of
:mod:`fusion_core.diagnostics.rating_verdicts` (bias and noise with bootstrap intervals, docs/RATINGS.md).

For ordered levels the verdicts come from ``ordinal-em``'s latent scale only when the responses support it against
``ordinal-ds`` on held-out ratings, else from ``ordinal-ds``'s confusion rows read on the scale
(:mod:`fusion_core.diagnostics.rating_support`); ``RatingVerdicts.model`` and ``.basis`` say which and why.

The label type is the user's declaration: ``nominal`` (categories, the default), ``ordinal`` (levels in a given
order, or ``"numeric"`` to order numeric labels by value) or ``numeric`` (labels read as numbers).
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import pandas as pd

from fusion_core.data.dataset import Dataset
from fusion_core.data.responses import Responses, as_responses
from fusion_core.diagnostics.audit.result import AuditResult
from fusion_core.diagnostics.audit_options import AUDIT_LABEL_TYPES
from fusion_core.diagnostics.rating_report import numeric_from
from fusion_core.diagnostics.rating_support import RIVAL, confusion_verdicts, in_level_order, scale_support
from fusion_core.diagnostics.rating_verdicts import RatingVerdicts, numeric_verdicts, ordinal_verdicts
from fusion_core.errors import UserInputError
from fusion_core.methods.auto import candidate
from fusion_core.methods.ordinal import is_numeric_label, with_levels
from fusion_core.methods.results import FitResult


def suggested_label_type(resp: Responses) -> str:
    """``ordinal`` when every label reads as a number (e.g. 1–5 scores) and there are more than two, else
    ``nominal``: a suggestion for the user to confirm, never applied silently."""
    classes = list(resp.classes)
    return "ordinal" if len(classes) > 2 and all(is_numeric_label(c) for c in classes) else "nominal"


def check_label_type(resp: Responses, label_type: str, levels: Any = None) -> Any:
    """The levels to use for ``label_type`` (``"numeric"`` for numeric ordinal labels given no order), or one clear
    :class:`UserInputError` before any fitting."""
    if label_type not in AUDIT_LABEL_TYPES:
        raise UserInputError(f"unknown label type {label_type!r}; use one of {', '.join(AUDIT_LABEL_TYPES)}.")
    numbers = all(is_numeric_label(c) for c in resp.classes)
    if label_type == "numeric" and not numbers:
        bad = [str(c) for c in resp.classes if not is_numeric_label(c)][:5]
        raise UserInputError(f"numeric ratings need labels that are numbers, but {bad} are not; choose ordinal.")
    if label_type == "ordinal" and levels is None:
        if not numbers:
            raise UserInputError(
                "ordinal labels need their order: give the levels lowest first (the labels are not all numbers)."
            )
        return "numeric"
    return levels


def rating_verdicts_for(
    data: Dataset | Responses | pd.DataFrame,
    label_type: str,
    *,
    levels: Any = None,
    n_bootstrap: int = 100,
    level: float = 0.95,
    random_state: int | None = 0,
    fit: FitResult | None = None,
) -> RatingVerdicts | None:
    """The rating verdicts of ``data`` read as ``label_type`` (None for ``nominal``).  ``levels``: the ordinal
    order, lowest first, or ``"numeric"`` (the default when every label is a number).  Ordinal verdicts come from
    the better-supported model (module docstring); ``fit``: a fit of ``data`` reused when it is ``ordinal-ds``
    (e.g. the one ``auto`` chose)."""
    resp = data.responses if isinstance(data, Dataset) else as_responses(data)
    levels = check_label_type(resp, label_type, levels)
    if label_type == "nominal":
        return None
    boot: dict[str, Any] = {"n_bootstrap": n_bootstrap, "level": level, "random_state": random_state}
    if label_type == "numeric":
        return numeric_verdicts(numeric_from(resp), **boot)
    ordered = with_levels(resp, levels)
    support = scale_support(ordered)
    if support.supported:
        return replace(ordinal_verdicts(resp, levels=levels, **boot), basis=support.words())
    post, prior, conf, used = _confusion_fit(resp, ordered, fit)
    return replace(confusion_verdicts(ordered, post, prior, conf, fit=used, **boot), basis=support.words())


def _confusion_fit(resp: Responses, ordered: Responses, fit: FitResult | None) -> tuple[Any, ...]:
    """Posterior, class prior and confusion of ``ordinal-ds`` in level order (``fit`` when it is one, else a new
    fit with ``auto``'s settings for it), and the fit."""
    chosen = fit is not None and (
        fit.method == RIVAL or (fit.selection is not None and fit.selection.members == (RIVAL,))
    )
    same = fit is not None and fit.posterior.shape[0] == resp.n_items
    if fit is not None and chosen and same and set(map(str, fit.classes)) == set(map(str, resp.classes)):
        return (*in_level_order(fit, ordered), fit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        own = candidate(RIVAL).set_params(levels=list(ordered.classes)).fit(ordered).result_
    return (*in_level_order(own, ordered), own)


def audit_ratings(
    audit: AuditResult,
    data: Dataset | Responses | pd.DataFrame,
    label_type: str,
    *,
    levels: Any = None,
    n_bootstrap: int = 100,
    random_state: int | None = 0,
) -> AuditResult:
    """``audit`` of ``data`` with the rating verdicts for ``label_type`` added (``nominal``: none)."""
    ratings = rating_verdicts_for(data, label_type, levels=levels, n_bootstrap=n_bootstrap, random_state=random_state)
    return replace(audit, label_type=label_type, ratings=ratings)


__all__ = ["AUDIT_LABEL_TYPES", "audit_ratings", "check_label_type", "rating_verdicts_for", "suggested_label_type"]
