"""Fleiss' κ, the one implementation: Fleiss (1971), generalised to unequal numbers of ratings per item.

Over the items with ``n_i ≥ 2`` ratings: ``P_i = Σ_k n_ik(n_ik−1) / (n_i(n_i−1))``, ``P̄`` their mean, ``p_k`` the
pooled label shares of those items, ``P_e = Σ_k p_k²``, ``κ = (P̄ − P_e)/(1 − P_e)``.  With equal ``n_i`` this is
Fleiss' κ exactly.  The statistic is written as a function of item weights (``P̄ = Σ w_i P_i / Σ w_i``,
``p_k = Σ w_i n_ik / Σ w_i n_i``), so the point value is the weights all one and every bootstrap replicate of the
audit is one matrix product (:mod:`fusion_core.diagnostics.reliability`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses, as_responses
from fusion_core.diagnostics.reliability import ItemStatistic


def rated_counts(data: Responses | pd.DataFrame | np.ndarray) -> np.ndarray:
    """Items × K counts of the items with two or more ratings (``data`` may be such a count matrix already)."""
    counts = (
        np.asarray(data, dtype=float)
        if isinstance(data, np.ndarray)
        else as_responses(data).vote_counts(use_confidence=False)
    )
    return np.asarray(counts[counts.sum(axis=1) >= 2], dtype=float)


def fleiss_of_weights(counts: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """κ(weights) (``b × n_items`` in, ``b`` values out) for items × K ``counts`` of items with ≥ 2 ratings: every
    weighted sum of a replicate comes from one product ``w @ [n_ik, n_i, P_i, 1]``."""
    n = counts.sum(axis=1)
    p_i = (counts * (counts - 1)).sum(axis=1) / (n * (n - 1))
    k = counts.shape[1]
    columns = np.column_stack([counts, n, p_i, np.ones(len(n))])

    def stat(w: np.ndarray) -> np.ndarray:
        sums = w @ columns
        with np.errstate(divide="ignore", invalid="ignore"):
            p_bar = sums[:, k + 1] / sums[:, k + 2]
            p_k = sums[:, :k] / sums[:, k, None]
            p_e = (p_k**2).sum(axis=1)
            return np.where(np.isclose(p_e, 1.0), np.nan, (p_bar - p_e) / (1.0 - p_e))

    return stat


def fleiss_statistic(resp: Responses) -> tuple[ItemStatistic, int]:
    """Fleiss' κ as a statistic of the weights of the items with two or more responses, and their number."""
    counts = rated_counts(resp)
    note = f"{len(counts)} items with two or more responses"
    return ItemStatistic(fleiss_of_weights(counts), "Fleiss' kappa", counts.size, note), len(counts)


def fleiss_kappa(data: Responses | pd.DataFrame | np.ndarray) -> float:
    """Fleiss' κ (module docstring); ``data`` may also be an items × K count matrix.  Items with fewer than two
    ratings carry no agreement information and are left out.  NaN when no item has two ratings or ``P_e = 1``."""
    counts = rated_counts(data)
    if not len(counts):
        return float("nan")
    return float(fleiss_of_weights(counts)(np.ones((1, len(counts))))[0])
