"""Chance-corrected agreement for the audit, both with bootstrap percentile intervals over items: Fleiss' κ
(the unequal-ratings form of :func:`fusion_core.diagnostics.agreement.fleiss_kappa`, as a function of item
weights so replicates are matrix products) and Krippendorff's α (nominal, :func:`.krippendorff.krippendorff`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.krippendorff import alpha_statistic, krippendorff, units_of
from fusion_core.diagnostics.reliability import ItemStatistic, ReliabilityEstimate, estimate_joint


def _fleiss_statistic(counts: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """κ(weights) for items × K counts of items with ≥ 2 ratings: ``P̄ = Σ w_i P_i / Σ w_i``,
    ``p_k = Σ w_i n_ik / Σ w_i n_i``, ``κ = (P̄ − Σ p_k²)/(1 − Σ p_k²)`` (Fleiss 1971, unequal n_i).  Every
    weighted sum of a replicate comes from one product ``w @ [n_ik, n_i, P_i, 1]``."""
    n = counts.sum(axis=1)
    p_i = (counts * (counts - 1)).sum(axis=1) / (n * (n - 1))
    k = counts.shape[1]
    columns = np.column_stack([counts, n, p_i, np.ones(len(n))])

    def stat(w: np.ndarray) -> np.ndarray:
        sums = w @ columns
        p_bar = sums[:, k + 1] / sums[:, k + 2]
        p_k = sums[:, :k] / sums[:, k, None]
        p_e = (p_k**2).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(np.isclose(p_e, 1.0), np.nan, (p_bar - p_e) / (1.0 - p_e))

    return stat


def _fleiss_spec(resp: Responses) -> tuple[ItemStatistic, int]:
    counts = resp.vote_counts(use_confidence=False)
    counts = np.asarray(counts[counts.sum(axis=1) >= 2], dtype=float)
    note = f"{len(counts)} items with two or more responses"
    return ItemStatistic(_fleiss_statistic(counts), "Fleiss' kappa", counts.size, note), len(counts)


def agreement_intervals(
    resp: Responses, *, n_bootstrap: int = 500, level: float = 0.9, random_state: int | None = 0
) -> tuple[ReliabilityEstimate, ReliabilityEstimate]:
    """Fleiss' κ and Krippendorff's α (nominal) with bootstrap percentile intervals, from one stream of item
    resamples: both are statistics of the items with two or more responses, in item order, so one draw of
    multiplicities serves both (half the cost of two calls on large data)."""
    fleiss, n_fleiss = _fleiss_spec(resp)
    alpha, n_alpha = alpha_statistic(units_of(resp, "nominal"), "nominal")
    if n_fleiss != n_alpha or not n_fleiss:  # not the same items: each on its own
        return fleiss_interval(resp, n_bootstrap=n_bootstrap, level=level, random_state=random_state), alpha_interval(
            resp, n_bootstrap=n_bootstrap, level=level, random_state=random_state
        )
    kappa, a = estimate_joint(
        [fleiss, alpha], n_fleiss, n_bootstrap=n_bootstrap, level=level, random_state=random_state
    )
    return kappa, a


def fleiss_interval(
    resp: Responses, *, n_bootstrap: int = 500, level: float = 0.9, random_state: int | None = 0
) -> ReliabilityEstimate:
    """Fleiss' κ with a bootstrap percentile interval over the items that have two or more responses."""
    spec, n_items = _fleiss_spec(resp)
    b = n_bootstrap if n_items else 0
    return estimate_joint([spec], n_items, n_bootstrap=b, level=level, random_state=random_state)[0]


def alpha_interval(
    resp: Responses, *, n_bootstrap: int = 500, level: float = 0.9, random_state: int | None = 0
) -> ReliabilityEstimate:
    """Krippendorff's α (nominal) with a bootstrap percentile interval over items."""
    return krippendorff(resp, metric="nominal", n_bootstrap=n_bootstrap, level=level, random_state=random_state)
