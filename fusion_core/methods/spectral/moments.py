"""Pairwise-complete moments of ±1 labels and the spectral core (spec ``spectral.md`` §3.2, §5.1–§5.2).

Missing responses (sparse crowds) are the spec's §5 extension [EXT], assuming missing-completely-at-random:
covariances over shared items with overlap counts ``n_ij``; pairs with ``n_ij < n_min`` or a constant annotator on
the overlap are *missing entries*; the spectral stage runs on the *core* (k-core with ``d_min`` valid partners,
largest connected, non-bipartite component).  One sparse product gives every moment; no loop over responses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, connected_components

from fusion_core.methods.spectral.binary import BinaryMatrix


@dataclass
class Moments:
    """Pairwise-complete first and second moments (§3.2, §5.1)."""

    mu: np.ndarray  # per-annotator mean over its own items
    n_i: np.ndarray  # items per annotator
    N: np.ndarray  # overlap counts n_ij (diagonal n_i)
    Q: np.ndarray  # q̂_ij (ddof=1) on valid pairs, NaN elsewhere; diagonal 1 − μ̂²
    valid: np.ndarray  # bool, off-diagonal valid pairs
    sigma2: np.ndarray  # (1−μ̂_i²)(1−μ̂_j²)/(n_ij − 1), leading term of P14 Eq. 9
    constant: np.ndarray  # annotators whose labels are all equal (§3.1 step 3)
    n_min: int

    def restrict(self, idx: np.ndarray) -> Moments:
        """The moments of the annotators ``idx`` only (in that order)."""
        ix = np.ix_(idx, idx)
        return Moments(
            self.mu[idx],
            self.n_i[idx],
            self.N[ix],
            self.Q[ix],
            self.valid[ix],
            self.sigma2[ix],
            self.constant[idx],
            self.n_min,
        )


def pairwise_moments(B: BinaryMatrix, n_min: int = 10) -> Moments:
    """μ̂, Q̂ and overlap counts from sparse products ``N = OOᵀ, S1 = ZOᵀ, S12 = ZZᵀ`` (§5.1).

    A pair is valid iff ``n_ij ≥ n_min`` and both annotators vary on their shared items; invalid pairs are
    missing (NaN), never 0.  Dense data give exactly ``np.cov(Z)``.
    """
    # one sparse product X Xᵀ with X = [P; M] (indicators of +1 and −1 labels) gives all three moments:
    # with Z = P − M and O = P + M, OOᵀ, ZOᵀ and ZZᵀ are signed sums of its four blocks
    m = B.m
    pos = B.z > 0
    X = sp.csr_matrix((np.ones(len(B.z)), (B.worker + m * (~pos), B.item)), shape=(2 * m, B.n))
    G = (X @ X.T).toarray()
    PP, PM, MP, MM = G[:m, :m], G[:m, m:], G[m:, :m], G[m:, m:]
    N = PP + PM + MP + MM
    S1 = PP + PM - MP - MM
    S12 = PP - PM - MP + MM
    n_i = np.diag(N).copy()
    mu = np.divide(np.diag(S1), n_i, out=np.zeros(B.m), where=n_i > 0)
    constant = (n_i == 0) | (np.abs(mu) >= 1 - 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (S12 - S1 * S1.T / N) / (N - 1)
    varies = np.abs(S1) < N - 1e-9  # annotator i (row) is non-constant on the items shared with j
    off = ~np.eye(B.m, dtype=bool)
    valid = off & (max(n_min, 2) <= N) & varies & varies.T
    valid[constant, :] = False
    valid[:, constant] = False
    Q = np.where(valid, q, np.nan)
    np.fill_diagonal(Q, 1 - mu**2)
    muc = np.clip(mu, -(1 - 1e-6), 1 - 1e-6)
    base = 1 - muc**2
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma2 = np.where(valid, np.outer(base, base) / (N - 1), np.nan)
    return Moments(mu=mu, n_i=n_i, N=N, Q=Q, valid=valid, sigma2=sigma2, constant=constant, n_min=n_min)


# --------------------------------------------------------------------------------- the core (§5.2)
@dataclass
class Core:
    """The annotators the spectral stage can use (§5.2) and why there are too few, in plain words."""

    mask: np.ndarray  # annotators in the spectral core
    coverage: float
    valid_pair_fraction: float
    median_overlap: float
    bipartite: bool
    too_sparse: bool
    reason: str = ""


def _is_bipartite(adj: sp.csr_matrix) -> bool:
    """2-colouring by BFS depth parity (connected graph)."""
    if adj.shape[0] == 0:
        return True
    order, pred = breadth_first_order(adj, 0, directed=False, return_predecessors=True)
    depth = np.zeros(adj.shape[0], dtype=np.int64)
    for node in order[1:]:  # loop over annotators (≤ a few thousand), not responses
        depth[node] = depth[pred[node]] + 1
    coo = adj.tocoo()
    return bool(np.all((depth[coo.row] - depth[coo.col]) % 2 == 1))


def _k_core(valid: np.ndarray, alive: np.ndarray, d_min: int) -> np.ndarray:
    """Annotators left after repeatedly dropping those with fewer than ``d_min`` valid partners."""
    alive = alive.copy()
    while True:
        deg = (valid & alive[None, :]).sum(axis=1)
        drop = alive & (deg < d_min)
        if not drop.any():
            return alive
        alive &= ~drop


def spectral_core(B: BinaryMatrix, mom: Moments, d_min: int = 3, min_coverage: float = 0.5) -> Core:
    """k-core (≥ d_min valid partners) → largest connected component → non-bipartite check (§5.2)."""
    valid = mom.valid
    alive = _k_core(valid, ~mom.constant, d_min)
    mask = np.zeros(B.m, dtype=bool)
    bip = False
    if alive.sum() >= 3:
        idx = np.flatnonzero(alive)
        adj = sp.csr_matrix(valid[np.ix_(idx, idx)].astype(np.int8))
        _, lab = connected_components(adj, directed=False)
        members = idx[lab == np.argmax(np.bincount(lab))]
        bip = _is_bipartite(sp.csr_matrix(valid[np.ix_(members, members)].astype(np.int8)))
        mask[members] = True
    offdiag = B.m * (B.m - 1)
    coverage = float(np.isin(B.worker, np.flatnonzero(mask)).sum() / max(len(B.z), 1))
    vp = float(valid.sum() / offdiag) if offdiag else 0.0
    ov = mom.N[valid]
    med = float(np.median(ov)) if ov.size else 0.0
    reason = _too_sparse_reason(B, mom, mask, bip, coverage, d_min=d_min, min_coverage=min_coverage)
    return Core(mask, coverage, vp, med, bip, bool(reason), reason)


def _too_sparse_reason(
    B: BinaryMatrix,
    mom: Moments,
    mask: np.ndarray,
    bipartite: bool,
    coverage: float,
    *,
    d_min: int,
    min_coverage: float,
) -> str:
    """Why the core cannot carry the spectral stage, in plain words ("" when it can)."""
    n_const = int(mom.constant.sum())
    if mask.sum() < 3 and B.m - n_const < 3:
        return (
            f"{n_const} of {B.m} annotators always give the same label (e.g. labelling functions that abstain "
            "otherwise), so they carry no covariance information"
        )
    if mask.sum() < 3:
        return f"only {int(mask.sum())} annotators share ≥ {mom.n_min} items with ≥ {d_min} others"
    if bipartite:
        return "the graph of annotator pairs with enough overlap is bipartite (no odd cycle)"
    if coverage < min_coverage:
        return f"the core annotators gave only {coverage:.0%} of the labels (< {min_coverage:.0%})"
    return ""
