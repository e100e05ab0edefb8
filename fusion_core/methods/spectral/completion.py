"""Rank-one completion of the annotators' covariance and its leading eigenpair (spec ``spectral.md`` §3.3).

Off the diagonal the covariance of conditionally independent annotators is rank one, ``q_ij = v_i v_j``
(P14 Eq. 4); the diagonal is unknown.  Method A fits ``log|q_ij| ≈ t_i + t_j`` by weighted least squares
(:func:`loglinear_diagonal`); Method B minimises the weighted squared error of ``u uᵀ`` directly
(:func:`als_rank_one`, :func:`principal_axis`).  Missing pairs are imputed by the current rank-one prediction
(hard-impute, :func:`top_eigenpair`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.linalg as sla

from fusion_core.errors import UserInputError
from fusion_core.methods.spectral.moments import Moments

#: an inner eigen-solver for the hard-impute loop: (matrix, previous eigenvector) → (λ, e), or None for LAPACK
WarmSolver = Callable[[np.ndarray, np.ndarray], "tuple[float, np.ndarray] | None"]


def pair_weights(mom: Moments, kind: str = "delta") -> np.ndarray:
    """Weights of the log-linear fit: 'uniform' (P14) or 'delta' = q̂²/σ̂² (§3.3, §5.1); 0 if invalid."""
    q = np.where(mom.valid, mom.Q, 0.0)
    if kind == "uniform":
        w = mom.valid.astype(float)
    elif kind == "delta":
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(mom.valid, q**2 / mom.sigma2, 0.0)
    else:
        raise UserInputError(f"weights must be 'delta' or 'uniform', got {kind!r}.")
    return np.where(np.abs(q) > 0, w, 0.0)


def loglinear_diagonal(Q: np.ndarray, W: np.ndarray, qdiag: np.ndarray) -> tuple[np.ndarray, int]:
    """Method A: solve (D + W) t = c for log|q_ij| ≈ t_i + t_j; r̂_ii = min(e^{2t_i}, q̂_ii) (Heywood guard).

    Returns (r̂ diagonal, number of clipped entries).
    """
    with np.errstate(divide="ignore"):
        Y = np.where(W > 0, np.log(np.abs(np.nan_to_num(Q))), 0.0)
    A = W + np.diag(W.sum(axis=1))
    c = (W * Y).sum(axis=1)
    try:
        t = np.linalg.solve(A, c)
        if not np.all(np.isfinite(t)):
            raise np.linalg.LinAlgError
    except np.linalg.LinAlgError:  # singular: disconnected or bipartite pair graph (§3.3 step 3)
        t = np.linalg.lstsq(A, c, rcond=None)[0]
    r = np.exp(2 * t)
    clipped = r > qdiag
    return np.minimum(r, qdiag), int(clipped.sum())


def top_eigh(R: np.ndarray) -> tuple[float, np.ndarray]:
    """Largest algebraic eigenpair of a symmetric matrix (LAPACK subset solver)."""
    vals, vecs = sla.eigh(R, subset_by_index=[len(R) - 1, len(R) - 1], check_finite=False)
    return float(vals[0]), vecs[:, 0]


def top_eigenpair(
    R: np.ndarray,
    valid: np.ndarray,
    *,
    max_impute: int = 200,
    tol: float = 1e-8,
    spectrum: bool = True,
    warm: WarmSolver | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Largest *algebraic* eigenpair of R (diagonal already completed; never the largest magnitude, §3.3).

    Invalid off-diagonal entries are imputed by the current rank-one prediction (hard-impute iteration)
    [CHOICE for §5].  ``warm(R, e_prev)`` optionally solves each inner step from the previous eigenvector
    (returns (λ, e) or None to use LAPACK); the caller certifies the result.  Returns (eigenvalues of the
    completed matrix, descending — only λ₁ when ``spectrum`` is False; top eigenvector; completed matrix).
    """
    R = R.copy()
    missing = ~np.eye(len(R), dtype=bool) & ~valid
    R[missing] = 0.0
    lam, e = top_eigh(R)
    if missing.any():
        for _ in range(max_impute):
            pred = max(lam, 0.0) * np.outer(e, e)
            delta = np.max(np.abs(pred[missing] - R[missing]))
            R[missing] = pred[missing]
            res = warm(R, e) if warm is not None else None
            lam, e = res if res is not None else top_eigh(R)
            if delta < tol:
                break
    return (np.linalg.eigvalsh(R)[::-1] if spectrum else np.array([lam])), e, R


def als_rank_one(
    Q: np.ndarray,
    W: np.ndarray,
    u0: np.ndarray,
    qdiag: np.ndarray,
    *,
    tol: float = 1e-10,
    max_sweeps: int = 500,
) -> tuple[np.ndarray, int, bool]:
    """Method B: Gauss–Seidel minimisation of Σ_{i<j} w_ij (q̂_ij − u_i u_j)², |u_i| ≤ √q̂_ii (§3.3).

    Returns (u, sweeps, converged).  u is J15-scaled (R ≈ u uᵀ).
    """
    Qz = np.where(W > 0, np.nan_to_num(Q), 0.0)
    WQ = W * Qz
    u = u0.astype(float).copy()
    bound = np.sqrt(np.maximum(qdiag, 0)).tolist()
    for sweep in range(1, max_sweeps + 1):
        change = 0.0
        for i in range(len(u)):  # loop over annotators (Gauss–Seidel needs the in-place order)
            den = W[i] @ (u * u)
            if den <= 0:
                continue
            new = min(max(float(WQ[i] @ u) / den, -bound[i]), bound[i])
            change = max(change, abs(new - u[i]))
            u[i] = new
        if change < tol:
            return u, sweep, True
    return u, max_sweeps, False


def principal_axis(Q: np.ndarray, d0: np.ndarray, *, tol: float = 1e-9, max_iter: int = 5000) -> tuple[np.ndarray, int]:
    """Dense Method B variant: R = offdiag(Q) + diag(d); d ← λ e² until max|Δd| < tol (§3.3 step 4).

    Returns (u, iterations) with u J15-scaled."""
    R = Q.copy()
    d = d0.copy()
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007  (it is returned)
        np.fill_diagonal(R, d)
        lam, e = top_eigh(R)
        new = max(lam, 0) * e**2
        if np.max(np.abs(new - d)) < tol:
            d = new
            break
        d = new
    np.fill_diagonal(R, d)
    lam, e = top_eigh(R)
    return np.sqrt(max(lam, 0)) * e, it
