"""The detector's test statistic for a batch of label matrices (spec ``spectral.md`` §6.3): the top eigenvalues of
the standardised residual Ẽ = (Q̂ − v̂v̂ᵀ)/σ̂ of the rank-one fit, and the top eigenvalues of the completed R̂.

Batched over bootstrap replicates: Method A (delta weights) per replicate, then a hard-impute power iteration
for all replicates at once, warm-started at the null model's eigenvector.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusion_core.diagnostics.cartels.eigen import batched_power, solve_batched


@dataclass(frozen=True)
class BatchMoments:
    """Pairwise-complete moments of nb replicates (nb × m × m unless noted)."""

    qz: np.ndarray  # covariances, 0 off the valid pairs
    valid: np.ndarray  # bool: valid pairs
    sigma2: np.ndarray  # (1−μ̂_i²)(1−μ̂_j²)/(n_ij − 1)
    base: np.ndarray  # nb × m: 1 − μ̂² (μ̂ clipped away from ±1)


def batched_stats(
    Z: np.ndarray, O: np.ndarray, n_min: int, n_extra: int, x0: np.ndarray, *, n_spec: int = 0, weights: str = "delta"
) -> tuple[np.ndarray, np.ndarray]:
    """For each replicate b of Z (b × m × n, 0 where missing; O the m × n mask): the top ``n_extra``
    eigenvalues of the standardised residual of the rank-one fit (§6.3) and the top ``n_spec`` eigenvalues
    of the completed R̂."""
    Of = O.astype(float)
    N = Of @ Of.T
    S1 = Z @ Of.T
    S12 = Z @ Z.transpose(0, 2, 1)
    return stats_from_products(N, S1, S12, n_min=n_min, n_extra=n_extra, x0=x0, n_spec=n_spec, weights=weights)


def batch_moments(N: np.ndarray, S1: np.ndarray, S12: np.ndarray, n_min: int) -> BatchMoments:
    """Moments from the products N = OOᵀ (shared), S1 = ZOᵀ and S12 = ZZᵀ (per replicate), as in
    :func:`fusion_core.methods.spectral.pairwise_moments`."""
    m = S1.shape[1]
    n_i = np.diagonal(N)
    mu = np.diagonal(S1, axis1=1, axis2=2) / np.maximum(n_i, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (S12 - S1 * S1.transpose(0, 2, 1) / N) / (N - 1)
    varies = np.abs(S1) < N - 1e-9
    off = ~np.eye(m, dtype=bool)
    valid = off & (max(n_min, 2) <= N) & varies & varies.transpose(0, 2, 1)
    const = np.abs(mu) >= 1 - 1e-12
    valid &= ~const[:, :, None] & ~const[:, None, :]
    muc = np.clip(mu, -(1 - 1e-6), 1 - 1e-6)
    base = 1 - muc**2
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma2 = base[:, :, None] * base[:, None, :] / (N - 1)
    return BatchMoments(qz=np.where(valid, q, 0.0), valid=valid, sigma2=sigma2, base=base)


def method_a_weights(
    qz: np.ndarray, valid: np.ndarray, sigma2: np.ndarray, weights: str
) -> tuple[np.ndarray, np.ndarray]:
    """Method A's weights and targets (§3.3) on any layout of pairs: ``W`` = q̂²/σ̂² (``weights`` "delta"; else 1)
    on the valid pairs with q̂ ≠ 0, 0 elsewhere, and ``Y`` = log|q̂| where ``W`` > 0, 0 elsewhere; ``sigma2``
    finite on the valid pairs."""
    if weights == "delta":
        W = np.where(valid & (qz != 0), qz**2 / sigma2, 0.0)
    else:
        W = (valid & (qz != 0)).astype(float)
    with np.errstate(divide="ignore"):
        Y = np.where(W > 0, np.log(np.abs(qz) + (W == 0)), 0.0)
    return W, Y


def batch_diagonal(bm: BatchMoments, weights: str) -> np.ndarray:
    """Method A per replicate (§3.3): the completed diagonal r = min(e^{2t}, 1 − μ̂²), nb × m; isolated annotators
    get t = 0 (the min-norm value)."""
    qz, valid = bm.qz, bm.valid
    m = qz.shape[1]
    W, Y = method_a_weights(qz, valid, np.where(valid, bm.sigma2, 1.0), weights)
    deg = W.sum(axis=2)
    A = W.copy()
    A[:, np.arange(m), np.arange(m)] += np.where(deg > 0, deg, 1.0)
    c = (W * Y).sum(axis=2)
    t = solve_batched(A, c)
    return np.minimum(np.exp(2 * t), bm.base)


def stats_from_products(
    N: np.ndarray,
    S1: np.ndarray,
    S12: np.ndarray,
    *,
    n_min: int,
    n_extra: int,
    x0: np.ndarray,
    n_spec: int = 0,
    weights: str = "delta",
) -> tuple[np.ndarray, np.ndarray]:
    """The statistics of :func:`batched_stats` from the moment products (N shared, S1/S12 per replicate)."""
    nb, m, _ = S1.shape
    bm = batch_moments(N, S1, S12, n_min)
    qz, valid = bm.qz, bm.valid
    R = qz.copy()
    R[:, np.arange(m), np.arange(m)] = batch_diagonal(bm, weights)
    miss = ~np.eye(m, dtype=bool) & ~valid
    Mf = miss.astype(float) if miss.any() else None

    def matvec(x: np.ndarray, lam: np.ndarray) -> np.ndarray:
        # R_f x with R_f = R off the missing pairs and λ x xᵀ on them: R x + λ x ⊙ (M x²)
        y = np.matmul(R, x[:, :, None])[:, :, 0]
        if Mf is not None:
            y += lam[:, None] * x * np.matmul(Mf, (x * x)[:, :, None])[:, :, 0]
        return y

    x, lam = batched_power(matvec, x0, nb, m)
    v = np.sqrt(np.maximum(lam, 0))[:, None] * x
    E = np.where(valid, (qz - v[:, :, None] * v[:, None, :]) / np.sqrt(np.where(valid, bm.sigma2, 1.0)), 0.0)
    s = np.linalg.eigvalsh(E)[:, ::-1][:, :n_extra]
    spec = np.zeros((nb, 0))
    if n_spec:
        Rf = np.where(miss, lam[:, None, None] * x[:, :, None] * x[:, None, :], R) if Mf is not None else R
        spec = np.linalg.eigvalsh(Rf)[:, ::-1][:, :n_spec]
    return s, spec
