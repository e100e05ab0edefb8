"""Chance-corrected inter-annotator agreement: Fleiss' κ, Krippendorff's α (nominal), pairwise Cohen's κ.

All three work on sparse long-format responses (most annotators label few items) and are computed from
the items × K vote-count matrix or sparse worker × item indicator matrices — no loop over responses.

* Fleiss (1971), generalised to unequal numbers of ratings per item: ``P_i = Σ_k n_ik(n_ik−1) / (n_i(n_i−1))``
  over items with ``n_i ≥ 2``, ``P̄`` their mean, ``p_k`` the pooled label shares of those items,
  ``P_e = Σ_k p_k²``, ``κ = (P̄ − P_e)/(1 − P_e)``.  With equal ``n_i`` this is Fleiss' κ exactly.
* Krippendorff (2011, "Computing Krippendorff's alpha-reliability"), nominal metric: coincidence matrix
  ``o_ck = Σ_u (n_uc n_uk − δ_ck n_uc)/(m_u − 1)`` over units with ``m_u ≥ 2`` values,
  ``α = 1 − (n−1) Σ_{c≠k} o_ck / Σ_{c≠k} n_c n_k``.
* Cohen (1960) κ for every pair of annotators over the items both labelled (the last response counts when
  an annotator labelled an item twice): ``κ_ab = (p_o − p_e)/(1 − p_e)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fusion_core.data.responses import Responses, as_responses


@dataclass
class AgreementSummary:
    """Headline agreement figures for a dataset."""

    fleiss_kappa: float
    krippendorff_alpha: float
    items_used: int  # items with at least two responses
    mean_ratings_per_item: float
    mean_pairwise_kappa: float
    pairs_used: int


def _counts(data: Responses | pd.DataFrame) -> np.ndarray:
    return as_responses(data).vote_counts(use_confidence=False)


def fleiss_kappa(data: Responses | pd.DataFrame | np.ndarray) -> float:
    """Fleiss' κ for unequal numbers of ratings per item (see module docstring).

    ``data`` may also be an items × K count matrix.  Items with fewer than two ratings carry no agreement
    information and are left out.  Returns NaN when fewer than one item has two ratings or ``P_e = 1``.
    """
    counts = np.asarray(data, dtype=float) if isinstance(data, np.ndarray) else _counts(data)
    n_i = counts.sum(axis=1)
    keep = n_i >= 2
    if not keep.any():
        return float("nan")
    c, n = counts[keep], n_i[keep]
    p_i = (c * (c - 1)).sum(axis=1) / (n * (n - 1))
    p_bar = p_i.mean()
    p_k = c.sum(axis=0) / n.sum()
    p_e = float((p_k**2).sum())
    if np.isclose(p_e, 1.0):
        return float("nan")
    return float((p_bar - p_e) / (1.0 - p_e))


def krippendorff_alpha(data: Responses | pd.DataFrame | np.ndarray) -> float:
    """Krippendorff's α with the nominal metric (see module docstring); ``data`` as for :func:`fleiss_kappa`.

    Units (items) with a single value are not pairable and are left out.  NaN when nothing is pairable or
    only one value occurs.
    """
    counts = np.asarray(data, dtype=float) if isinstance(data, np.ndarray) else _counts(data)
    m_u = counts.sum(axis=1)
    keep = m_u >= 2
    if not keep.any():
        return float("nan")
    c, m = counts[keep], m_u[keep]
    w = 1.0 / (m - 1.0)
    # o_ck = Σ_u w_u (n_uc n_uk − δ_ck n_uc)
    o = (c * w[:, None]).T @ c - np.diag((c * w[:, None]).sum(axis=0))
    n_c = o.sum(axis=1)
    n = n_c.sum()
    disagree_obs = o.sum() - np.trace(o)
    disagree_exp = n**2 - (n_c**2).sum()
    if disagree_exp <= 0:
        return float("nan")
    return float(1.0 - (n - 1.0) * disagree_obs / disagree_exp)


def _indicators(resp: Responses, workers: np.ndarray | None) -> tuple[sp.csr_matrix, list[sp.csr_matrix], np.ndarray]:
    """Worker × item presence matrix B and one indicator matrix per label (last duplicate wins).  The annotators
    are selected before the duplicates are dropped (a duplicate is the same annotator's: same result, and only the
    selected annotators' responses are hashed — 30 of 100 annotators at 1M responses: 0.19 → 0.05 s)."""
    if workers is None:
        workers = np.arange(resp.n_workers)
    remap = np.full(resp.n_workers, -1, dtype=np.int64)
    remap[workers] = np.arange(len(workers))
    sel = np.flatnonzero(remap[resp.worker] >= 0)
    dense_last = pd.DataFrame({"w": resp.worker[sel], "i": resp.item[sel], "l": resp.label[sel]}).drop_duplicates(
        subset=["w", "i"], keep="last"
    )
    w, i, lab = (dense_last[c].to_numpy() for c in ("w", "i", "l"))
    w = remap[w]
    shape = (len(workers), resp.n_items)
    ones = np.ones(len(w))
    presence = sp.csr_matrix((ones, (w, i)), shape=shape)
    per_label = [
        sp.csr_matrix((ones[lab == k], (w[lab == k], i[lab == k])), shape=shape) for k in range(resp.n_classes)
    ]
    return presence, per_label, workers


def cohen_kappa_matrix(
    data: Responses | pd.DataFrame, *, workers: list | pd.Index | None = None, min_overlap: int = 2
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Pairwise Cohen's κ over shared items: (κ matrix, shared-item counts), both worker × worker.

    ``workers`` restricts to these annotator ids (e.g. the most active 30, for display).  Pairs sharing
    fewer than ``min_overlap`` items, or whose expected agreement is 1, get NaN.  The diagonal is 1 for
    annotators with any response.  Computed with sparse products: ``S = B Bᵀ`` shared items,
    ``A = Σ_k X_k X_kᵀ`` agreements, ``M_k = X_k Bᵀ`` (a's count of label k on items shared with b).
    """
    resp = as_responses(data)
    codes = None if workers is None else resp.workers.get_indexer(pd.Index(workers))
    if codes is not None and (codes < 0).any():
        codes = codes[codes >= 0]
    presence, per_label, codes = _indicators(resp, codes)
    shared = (presence @ presence.T).toarray()
    agree = np.zeros_like(shared)
    expected = np.zeros_like(shared)
    for xk in per_label:  # loop over classes only
        agree += (xk @ xk.T).toarray()
        m = (xk @ presence.T).toarray()
        expected += m * m.T
    with np.errstate(invalid="ignore", divide="ignore"):
        p_o = agree / shared
        p_e = expected / shared**2
        kappa = (p_o - p_e) / (1.0 - p_e)
    undefined = (shared < min_overlap) | np.isclose(p_e, 1.0) | ~np.isfinite(kappa)
    kappa = np.where(undefined, np.nan, kappa)
    idx = np.arange(len(codes))
    kappa[idx, idx] = np.where(np.diag(shared) > 0, 1.0, np.nan)
    names = pd.Index(resp.workers.take(codes), name="worker")
    return (
        pd.DataFrame(kappa, index=names, columns=names.rename("other")),
        pd.DataFrame(shared.astype(np.int64), index=names, columns=names.rename("other")),
    )


def most_active(data: Responses | pd.DataFrame, n: int = 30) -> pd.Index:
    """The ``n`` annotators with the most responses (ties by code order) — the default heatmap selection."""
    resp = as_responses(data)
    order = np.argsort(-resp.responses_per_worker, kind="stable")[:n]
    return pd.Index(resp.workers.take(order), name="worker")


def agreement_summary(
    data: Responses | pd.DataFrame, *, max_workers: int = 30, min_overlap: int = 2, kappa: pd.DataFrame | None = None
) -> AgreementSummary:
    """Fleiss' κ, Krippendorff's α and the mean pairwise Cohen's κ among the most active annotators (``kappa``:
    their :func:`cohen_kappa_matrix` if the caller has it already)."""
    resp = as_responses(data)
    counts = resp.vote_counts(use_confidence=False)
    n_i = counts.sum(axis=1)
    if kappa is None:
        kappa, _ = cohen_kappa_matrix(resp, workers=most_active(resp, max_workers), min_overlap=min_overlap)
    k = kappa.to_numpy().copy()
    np.fill_diagonal(k, np.nan)
    upper = k[np.triu_indices_from(k, 1)]
    upper = upper[np.isfinite(upper)]
    return AgreementSummary(
        fleiss_kappa=fleiss_kappa(counts),
        krippendorff_alpha=krippendorff_alpha(counts),
        items_used=int((n_i >= 2).sum()),
        mean_ratings_per_item=float(n_i.mean()) if len(n_i) else float("nan"),
        mean_pairwise_kappa=float(upper.mean()) if len(upper) else float("nan"),
        pairs_used=len(upper),
    )
