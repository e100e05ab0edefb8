"""Eigen-solvers of the cartel detector [EXT, ours]: batched and warm-started power iteration, batched Lanczos,
and the rank-one / rank-two fits of a group's covariance, each certified against LAPACK (or falling back to it).

The detector solves thousands of small, slowly changing eigenproblems (hard-impute steps, bootstrap replicates);
warm starts make them cheap, and the certification keeps every result equal to the LAPACK-only iteration.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import ArpackNoConvergence, eigsh

from fusion_core.methods.spectral import (
    Moments,
    loglinear_diagonal,
    pair_weights,
    resolve_sign,
    top_eigenpair,
    top_eigh,
)

#: applies each replicate's completed matrix to a batch of vectors: (x, λ) → y (both nb × m)
MatVec = Callable[[np.ndarray, np.ndarray], np.ndarray]


def solve_batched(A: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Solve A_b t_b = c_b for a stack; replicates whose A_b is singular (a bipartite pair graph, §3.3 step 3)
    get the least-squares (min-norm) solution, the others a plain solve."""
    try:
        t = np.linalg.solve(A, c[:, :, None])[:, :, 0]
        if np.all(np.isfinite(t)):
            return t
    except np.linalg.LinAlgError:
        pass
    t = np.empty_like(c)
    for b in range(len(A)):  # loop over the replicates of a chunk, only when one of them is singular
        try:
            t[b] = np.linalg.solve(A[b], c[b])
            if not np.all(np.isfinite(t[b])):
                raise np.linalg.LinAlgError
        except np.linalg.LinAlgError:
            t[b] = np.linalg.lstsq(A[b], c[b], rcond=None)[0]
    return t


def top_eigvalsh(A: np.ndarray, k: int) -> np.ndarray:
    """The k largest eigenvalues (descending) of each symmetric matrix of the stack A (b × m × m).  For m ≥ 100
    and k ≤ m/10 LAPACK's bisection driver (``syevx``, ``scipy.linalg.eigh(driver="evx")``) on the top k only, in
    single precision: the tridiagonal reduction is the cost, and float32 halves it (measured 6.2 ms against 13.2 ms
    for ``syevr`` in double at m = 500, one thread).  The eigenvalues are then exact to ~1e-7·‖A‖ (a few 1e-6 on
    the detector's standardised residuals, whose bootstrap comparisons s* ≥ s this can only change at such
    near-ties).  Else numpy's batched ``eigvalsh`` in double.  (A ctypes call of the same routine that released
    the GIL was measured and removed: no end-to-end gain, docs/KERNELS.md.)"""
    m = A.shape[-1]
    if eig_dtype(m, k) is np.float64:
        return np.linalg.eigvalsh(A)[:, ::-1][:, :k]
    A32 = A.astype(np.float32, copy=False)
    out = np.empty((len(A), k))
    for b in range(len(A)):  # one LAPACK call per replicate (b ≤ a chunk)
        out[b] = sla.eigh(A32[b], eigvals_only=True, subset_by_index=[m - k, m - 1], driver="evx", check_finite=False)[
            ::-1
        ]
    return out


def eig_dtype(m: int, k: int) -> type:
    """The precision :func:`top_eigvalsh` computes the k largest eigenvalues of m × m matrices in."""
    return np.float64 if m < 100 or k > m // 10 else np.float32


def cg_batched(
    matvec: Callable[[np.ndarray], np.ndarray], c: np.ndarray, *, tol: float = 1e-12, max_iter: int = 300
) -> np.ndarray | None:
    """Solve A_b t_b = c_b (nb × m) for symmetric positive semi-definite A_b applied by ``matvec`` with conjugate
    gradients from 0, all replicates at once; None unless every relative residual ‖c − At‖ ≤ tol‖c‖ within
    ``max_iter`` steps (the caller then solves directly).  From 0 the iterates stay in the Krylov space of c, so
    a singular but consistent system (a bipartite pair graph, §3.3 step 3) gets the min-norm solution, as
    :func:`solve_batched`'s least squares."""
    t = np.zeros_like(c)
    res = c.copy()
    p = res.copy()
    rr = np.einsum("bi,bi->b", res, res)
    goal = tol**2 * rr
    for _ in range(max_iter):
        act = rr > goal
        if not act.any():
            return t
        Ap = matvec(p)
        pAp = np.einsum("bi,bi->b", p, Ap)
        if np.any(act & ~(pAp > 0)):
            return None
        step = np.where(act, rr / np.where(act, pAp, 1.0), 0.0)
        t += step[:, None] * p
        res -= step[:, None] * Ap
        rr_new = np.einsum("bi,bi->b", res, res)
        p = res + np.where(act, rr_new / np.where(act, rr, 1.0), 0.0)[:, None] * p
        rr = rr_new
    return None


def power_top(R: np.ndarray, e: np.ndarray, tol: float = 1e-13, max_steps: int = 40) -> tuple[float, np.ndarray] | None:
    """Top eigenpair of symmetric R by power iteration warm-started at unit vector e; None if the residual
    ‖Re − λe‖ is not below tol·‖R e‖ within max_steps or λ ≤ 0 (the caller then uses LAPACK)."""
    for _ in range(max_steps):
        y = R @ e
        lam = float(e @ y)
        ny = np.linalg.norm(y)
        if lam <= 0 or ny == 0:
            return None
        if np.linalg.norm(y - lam * e) <= tol * ny:
            return lam, y / ny
        e = y / ny
    return None


def batched_power(
    matvec: MatVec, x0: np.ndarray, nb: int, m: int, *, max_steps: int = 200, tol: float = 1e-9
) -> tuple[np.ndarray, np.ndarray]:
    """Power iteration for nb replicates at once (the null has a large spectral gap), from x0; ``matvec(x, λ)``
    applies each replicate's completed matrix (missing pairs imputed by the current λ x xᵀ).  Returns (x, λ)."""
    x = np.broadcast_to(x0 / np.linalg.norm(x0), (nb, m)).copy()
    lam = np.ones(nb)
    for _ in range(max_steps):
        y = matvec(x, lam)
        lam_new = np.einsum("bi,bi->b", x, y)
        xn = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-300)
        done = np.max(np.abs(xn - x)) < tol and np.max(np.abs(lam_new - lam)) < tol
        x, lam = xn, lam_new
        if done:
            break
    return x, lam


def top_eigenpair_warm(
    R: np.ndarray, valid: np.ndarray, *, max_impute: int = 200, tol: float = 1e-8
) -> tuple[float, np.ndarray]:
    """``top_eigenpair(R, valid, spectrum=False)`` (same hard-impute, tolerance and iteration cap) with each inner
    eigenpair found by power iteration warm-started at the previous one (the imputed matrix moves little between
    steps) instead of a LAPACK solve.  Certified at the end: the LAPACK top eigenpair of the final matrix must
    agree, else the reference routine is run.  Returns (λ, e)."""
    spec, e, R_final = top_eigenpair(R, valid, max_impute=max_impute, tol=tol, spectrum=False, warm=power_top)
    lam = float(spec[0])
    if not (~valid & ~np.eye(len(R), dtype=bool)).any():
        return lam, e
    lam_ref, e_ref = top_eigh(R_final)
    if abs(lam_ref - lam) > 1e-9 * max(abs(lam_ref), 1.0) or abs(abs(e_ref @ e) - 1) > 1e-9:
        spec, e, _ = top_eigenpair(R, valid, max_impute=max_impute, tol=tol, spectrum=False)
        return float(spec[0]), e
    return float(lam_ref), (e_ref if e_ref @ e >= 0 else -e_ref)


def lanczos_top(
    A: sp.csr_matrix | Callable[[np.ndarray], np.ndarray], nb: int, m: int, *, max_steps: int = 120, tol: float = 1e-11
) -> tuple[np.ndarray, np.ndarray]:
    """Largest eigenvalue of each m × m diagonal block of the block-diagonal A (nb blocks; or of the nb matrices
    a function ``A(q)`` applies to the rows of q, nb × m) by Lanczos with full reorthogonalisation, all blocks
    at once.  The start vector is fixed (not drawn from the user's
    stream), so results are deterministic.  A block counts as converged when the Ritz residual bound
    |β_k s_k| ≤ tol·max(|θ|, 1); returns (values nb × 1, converged mask) — the caller solves the others
    densely."""
    k_max = min(max_steps, m)
    q = np.broadcast_to(np.random.default_rng(20140613).standard_normal(m), (nb, m)).copy()
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    Qs = np.zeros((nb, k_max, m))
    alpha = np.zeros((nb, k_max))
    beta = np.zeros((nb, k_max))
    theta = np.full(nb, np.nan)
    ok = np.zeros(nb, dtype=bool)
    for k in range(k_max):
        Qs[:, k] = q
        w = A(q) if callable(A) else (A @ q.ravel()).reshape(nb, m)
        alpha[:, k] = np.einsum("bi,bi->b", q, w)
        for _ in range(2):  # full reorthogonalisation (classical Gram–Schmidt, twice)
            w -= np.einsum("bk,bkm->bm", np.einsum("bkm,bm->bk", Qs[:, : k + 1], w), Qs[:, : k + 1])
        beta[:, k] = np.linalg.norm(w, axis=1)
        done = k + 1 == k_max
        if (k + 1) % 10 == 0 or done:
            _ritz_check(alpha, beta, k, theta, ok, tol=tol, last=done and k + 1 == m)
            if ok.all():
                break
        if done:
            break
        q = w / np.maximum(beta[:, k : k + 1], 1e-300)
    return theta[:, None], ok


def _ritz_check(
    alpha: np.ndarray, beta: np.ndarray, k: int, theta: np.ndarray, ok: np.ndarray, *, tol: float, last: bool
) -> None:
    """Largest Ritz value of each unconverged block after k + 1 Lanczos steps (in place in ``theta``, ``ok``)."""
    for r in range(len(theta)):  # small tridiagonal eigenproblems, one per block
        if ok[r]:
            continue
        if k == 0:
            theta[r], ok[r] = alpha[r, 0], beta[r, 0] <= tol * max(abs(alpha[r, 0]), 1.0)
            continue
        val, vec = sla.eigh_tridiagonal(alpha[r, : k + 1], beta[r, :k], select="i", select_range=(k, k))
        theta[r] = val[0]
        ok[r] = beta[r, k] * abs(vec[-1, 0]) <= tol * max(abs(val[0]), 1.0) or last


# ------------------------------------------------------------------------------------- group rank fits
def rank_one_vector(mom: Moments) -> np.ndarray:
    """Method A rank-one vector (J15-scaled, sum-rule sign) of a group with moments ``mom``."""
    W = pair_weights(mom, "delta")
    r, _ = loglinear_diagonal(mom.Q, W, np.diag(mom.Q).copy())
    R = np.where(mom.valid, mom.Q, 0.0)
    np.fill_diagonal(R, r)
    lam, e = top_eigenpair_warm(R, mom.valid)
    return resolve_sign(np.sqrt(max(lam, 0)) * e, "sum")[0]


def rank_two_loadings(Q: np.ndarray, valid: np.ndarray, *, max_iter: int = 300, warm: bool = True) -> np.ndarray:
    """§6.5 step 1: principal-axis iteration of rank 2 (missing pairs imputed); loadings L (m × 2).

    With ``warm`` (m ≥ 60) each top-2 eigenpair comes from Lanczos (ARPACK) started at the previous leading
    eigenvector; the last step is redone by LAPACK and must agree (else the LAPACK-only iteration is run), so L
    is what the LAPACK iteration returns."""
    m = len(Q)
    warm = warm and m >= 60
    Qz = np.where(valid, Q, 0.0)
    miss = ~valid & ~np.eye(m, dtype=bool)
    d = np.max(np.abs(Qz), axis=1)
    R = Qz.copy()
    v0 = None
    vals = vecs = R_used = None
    for _ in range(max_iter):
        np.fill_diagonal(R, d)
        vals, vecs = _top_two(R, v0 if warm else None)
        v0 = vecs[:, 0]
        R_used = R.copy() if warm else R
        L = vecs * np.sqrt(np.maximum(vals, 0))[None, :]
        new_d = (L**2).sum(axis=1)
        pred = L @ L.T
        delta = np.max(np.abs(new_d - d))
        if miss.any():
            delta = max(delta, np.max(np.abs(pred[miss] - R[miss])))
            R[miss] = pred[miss]
        d = new_d
        if delta < 1e-9:
            break
    if warm:
        assert vals is not None and R_used is not None
        ref, vref = sla.eigh(R_used, subset_by_index=[m - 2, m - 1], check_finite=False)
        ref, vref = ref[::-1], vref[:, ::-1]
        if np.max(np.abs(ref - vals)) > 1e-9 * max(abs(ref[0]), 1.0):
            return rank_two_loadings(Q, valid, max_iter=max_iter, warm=False)
        L = vref * np.sqrt(np.maximum(ref, 0))[None, :]
    return L


def _top_two(R: np.ndarray, v0: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The two largest eigenpairs of R, descending: ARPACK from ``v0`` when given (and converging), else LAPACK."""
    m = len(R)
    vals = vecs = None
    if v0 is not None:
        try:
            vals, vecs = eigsh(R, k=2, which="LA", v0=v0, tol=1e-13)
        except ArpackNoConvergence:
            vals = None
    if vals is None or vecs is None:
        vals, vecs = sla.eigh(R, subset_by_index=[m - 2, m - 1], check_finite=False)
    return vals[::-1], vecs[:, ::-1]
