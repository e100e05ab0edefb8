"""Chance-corrected agreement for the audit, both with bootstrap percentile intervals over items: Fleiss' κ
(the unequal-ratings form of :func:`fusion_core.diagnostics.agreement.fleiss_kappa`, as a function of item
weights so replicates are matrix products) and Krippendorff's α (nominal, :func:`.krippendorff.krippendorff`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.krippendorff import krippendorff
from fusion_core.diagnostics.reliability import ReliabilityEstimate, estimate


def _fleiss_statistic(counts: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """κ(weights) for items × K counts of items with ≥ 2 ratings: ``P̄ = Σ w_i P_i / Σ w_i``,
    ``p_k = Σ w_i n_ik / Σ w_i n_i``, ``κ = (P̄ − Σ p_k²)/(1 − Σ p_k²)`` (Fleiss 1971, unequal n_i)."""
    n = counts.sum(axis=1)
    p_i = (counts * (counts - 1)).sum(axis=1) / (n * (n - 1))

    def stat(w: np.ndarray) -> np.ndarray:
        p_bar = (w @ p_i) / w.sum(axis=1)
        p_k = (w @ counts) / (w @ n)[:, None]
        p_e = (p_k**2).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(np.isclose(p_e, 1.0), np.nan, (p_bar - p_e) / (1.0 - p_e))

    return stat


def fleiss_interval(
    resp: Responses, *, n_bootstrap: int = 500, level: float = 0.9, random_state: int | None = 0
) -> ReliabilityEstimate:
    """Fleiss' κ with a bootstrap percentile interval over the items that have two or more responses."""
    counts = resp.vote_counts(use_confidence=False)
    counts = counts[counts.sum(axis=1) >= 2]
    return estimate(
        _fleiss_statistic(np.asarray(counts, dtype=float)),
        len(counts),
        name="Fleiss' kappa",
        n_bootstrap=n_bootstrap if len(counts) else 0,
        level=level,
        random_state=random_state,
        cells=counts.size,
        note=f"{len(counts)} items with two or more responses",
    )


def alpha_interval(
    resp: Responses, *, n_bootstrap: int = 500, level: float = 0.9, random_state: int | None = 0
) -> ReliabilityEstimate:
    """Krippendorff's α (nominal) with a bootstrap percentile interval over items."""
    return krippendorff(resp, metric="nominal", n_bootstrap=n_bootstrap, level=level, random_state=random_state)
