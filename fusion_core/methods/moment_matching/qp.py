"""Convex quadratic programs over simplex-type sets, solved exactly (spec ``sequential-networked.md`` §2.2.4).

* :func:`qp_columns`: ``min tr(X G Xᵀ) − 2 tr(Xᵀ F)`` over column-stochastic K×K matrices (one Γ_m block);
  :func:`qp_columns_batch` solves a stack of them at once.
* :func:`qp_simplex`: ``min xᵀ Q x − 2 rᵀ x`` over the probability simplex (the π block of moment matching and
  the transition QP (22)–(23) of the sequential family).

Each tries the equality-constrained closed form first, then an active-set KKT solve on the zero pattern, and
FISTA with Euclidean simplex projection as the last resort.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

GAMMA_FLOOR = 1e-6  # spec P5: floor and renormalise before logs / EM


def project_simplex_columns(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of every column of ``v`` onto the probability simplex (Duchi et al. 2008)."""
    k = v.shape[0]
    u = -np.sort(-v, axis=0)
    css = np.cumsum(u, axis=0) - 1.0
    ind = np.arange(1, k + 1).reshape((k,) + (1,) * (v.ndim - 1))
    cond = u - css / ind > 0
    rho = k - 1 - np.argmax(cond[::-1], axis=0)
    if v.ndim == 2:
        theta = css[rho, np.arange(v.shape[1])] / (rho + 1)
    else:
        theta = np.take_along_axis(css, rho[None], axis=0)[0] / (rho + 1)
    return np.maximum(v - theta, 0.0)


def floor_columns(gamma: np.ndarray, eps: float = GAMMA_FLOOR) -> np.ndarray:
    """Floor at ``eps`` and renormalise columns (axis -2 is the response axis), spec P5."""
    g = np.maximum(gamma, eps)
    return g / g.sum(axis=-2, keepdims=True)


def active_set(
    hess: np.ndarray, lin: np.ndarray, eq: np.ndarray, zero: np.ndarray, max_iter: int = 50
) -> np.ndarray | None:
    """Exact ``min ½xᵀHx − cᵀx`` s.t. ``E x = 1``, ``x ≥ 0`` by a guess-and-check active set on the
    zero pattern (KKT solve on the free variables, then multiplier signs).  ``None`` if it does not settle."""
    n = len(lin)
    ne = eq.shape[0]
    zero = zero.copy()
    for _ in range(max_iter):
        free = ~zero
        nf = int(free.sum())
        kkt = np.zeros((nf + ne, nf + ne))
        kkt[:nf, :nf] = hess[np.ix_(free, free)]
        kkt[:nf, nf:] = eq[:, free].T
        kkt[nf:, :nf] = eq[:, free]
        rhs = np.r_[lin[free], np.ones(ne)]
        try:
            sol = np.linalg.solve(kkt, rhs)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(sol)):
            return None
        x = np.zeros(n)
        x[free] = sol[:nf]
        if x.min() < -1e-13:
            zero |= x < -1e-13
            continue
        mult = hess @ x - lin + eq.T @ sol[nf:]
        mz = np.where(zero, mult, np.inf)
        j = int(np.argmin(mz))
        if mz[j] >= -1e-11 * max(1.0, np.abs(lin).max()):
            return np.maximum(x, 0.0)
        zero[j] = False
    return None


@functools.lru_cache(maxsize=32)
def column_sum_operator(k: int) -> np.ndarray:
    """``E`` with ``E vec(X) = Xᵀ1`` for the row-major vec of a K×K matrix."""
    return np.kron(np.ones((1, k)), np.eye(k))


def _block_hessian(gram: np.ndarray) -> np.ndarray:
    """``2 (I ⊗ G)`` for one K×K ``gram`` or a stack (…×K×K): the Hessian of a Γ block in row-major vec."""
    k = gram.shape[-1]
    hess = np.zeros((*gram.shape[:-2], k * k, k * k))
    for i in range(k):  # block-diagonal; k is the number of classes
        hess[..., i * k : (i + 1) * k, i * k : (i + 1) * k] = 2.0 * gram
    return hess


def qp_columns(gram: np.ndarray, lin: np.ndarray, start: np.ndarray, inner_iter: int) -> np.ndarray:
    """``min tr(X gram Xᵀ) − 2 tr(Xᵀ lin)`` over column-stochastic X (K×K), spec §2.2.4.

    Exact: closed form of the equality-constrained problem when it is non-negative, else an active-set
    KKT solve; FISTA with column-wise simplex projection as the last resort.
    """
    k = gram.shape[0]
    ones = np.ones(k)
    x = None
    try:
        ginv_t = np.linalg.solve(gram.T + 1e-14 * np.trace(gram) * np.eye(k), np.eye(k)).T  # gram^{-1}
        lam = (ones @ lin - ones @ gram) / k
        x = (lin - np.outer(ones, lam)) @ ginv_t
        if np.all(np.isfinite(x)) and x.min() >= 0:
            return x
    except np.linalg.LinAlgError:
        pass
    zero = start.ravel() <= 1e-14  # warm start: the previous block solution's zero pattern
    if not zero.any() and x is not None and np.all(np.isfinite(x)):
        zero = x.ravel() <= 0
    out = active_set(_block_hessian(gram), 2.0 * lin.ravel(), column_sum_operator(k), zero)
    if out is not None:
        return out.reshape(k, k)
    return fista(lambda y: 2.0 * (y @ gram - lin), gram, start, inner_iter, project_simplex_columns)


def qp_simplex(quad: np.ndarray, lin: np.ndarray, start: np.ndarray, inner_iter: int) -> np.ndarray:
    """``min xᵀ quad x − 2 linᵀ x`` over the probability simplex (closed form, active set, or FISTA)."""
    k = quad.shape[0]
    ones = np.ones(k)
    x = None
    try:
        reg = quad + 1e-14 * np.trace(quad) * np.eye(k)
        qi_r = np.linalg.solve(reg, lin)
        qi_1 = np.linalg.solve(reg, ones)
        nu = (ones @ qi_r - 1.0) / (ones @ qi_1)
        x = qi_r - nu * qi_1
        if np.all(np.isfinite(x)) and x.min() >= 0:
            return x
    except np.linalg.LinAlgError:
        pass
    zero = (x <= 0) if x is not None and np.all(np.isfinite(x)) else (start <= 0)
    out = active_set(2.0 * quad, 2.0 * lin, ones[None, :], zero)
    if out is not None:
        return out

    def proj(y: np.ndarray) -> np.ndarray:
        return project_simplex_columns(y[:, None])[:, 0]

    return fista(lambda y: 2.0 * (quad @ y - lin), quad, start, inner_iter, proj)


def fista(
    grad: Callable[[np.ndarray], np.ndarray],
    quad: np.ndarray,
    start: np.ndarray,
    n_iter: int,
    proj: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """Accelerated projected gradient (Beck & Teboulle 2009) with step 1/L, L = 2 λ_max(quad)."""
    lip = 2.0 * max(np.linalg.eigvalsh((quad + quad.T) / 2).max(), 1e-12)
    x = proj(start)
    y, t = x.copy(), 1.0
    for _ in range(n_iter):
        x_new = proj(y - grad(y) / lip)
        if np.abs(x_new - x).max() < 1e-13:
            return x_new
        t_new = (1 + np.sqrt(1 + 4 * t * t)) / 2
        y = x_new + ((t - 1) / t_new) * (x_new - x)
        x, t = x_new, t_new
    return x


def active_set_batch(
    hess: np.ndarray, lin: np.ndarray, eq: np.ndarray, zero: np.ndarray, max_iter: int = 50
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`active_set` for a stack of problems at once (same guess-and-check on the zero pattern; the
    KKT system keeps its full size with identity rows for the variables held at zero).

    Returns ``(x, done)``; problems with ``done == False`` did not settle (or hit a singular system).
    """
    nb, n = lin.shape
    ne = eq.shape[0]
    x_out = np.zeros((nb, n))
    done = np.zeros(nb, dtype=bool)
    zero = zero.copy()
    act = np.arange(nb)
    diag = np.arange(n)
    for _ in range(max_iter):
        if not len(act):
            break
        z = zero[act]
        free = ~z
        kkt = np.zeros((len(act), n + ne, n + ne))
        kkt[:, :n, :n] = hess[act] * (free[:, :, None] & free[:, None, :])
        kkt[:, diag, diag] += z
        kkt[:, :n, n:] = eq.T[None] * free[:, :, None]
        kkt[:, n:, :n] = eq[None] * free[:, None, :]
        rhs = np.concatenate([lin[act] * free, np.ones((len(act), ne))], axis=1)
        try:
            sol = np.linalg.solve(kkt, rhs[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            break
        finite = np.isfinite(sol).all(axis=1)
        x = np.where(free, sol[:, :n], 0.0)
        neg = finite & (x.min(axis=1) < -1e-13)
        zero[act[neg]] |= x[neg] < -1e-13
        mult = np.einsum("bij,bj->bi", hess[act], x) - lin[act] + sol[:, n:] @ eq
        mz = np.where(z, mult, np.inf)
        j = np.argmin(mz, axis=1)
        mval = mz[np.arange(len(act)), j]
        thr = -1e-11 * np.maximum(1.0, np.abs(lin[act]).max(axis=1))
        fin = finite & ~neg & (mval >= thr)
        x_out[act[fin]] = np.maximum(x[fin], 0.0)
        done[act[fin]] = True
        rel = finite & ~neg & ~fin
        zero[act[rel], j[rel]] = False
        act = act[finite & ~fin]
    return x_out, done


def qp_columns_batch(gram: np.ndarray, lin: np.ndarray, start: np.ndarray, inner_iter: int) -> np.ndarray:
    """:func:`qp_columns` for a stack of blocks (B×K×K): batched closed form, then a batched active set
    for the blocks whose closed form is infeasible; per-block fallback for anything left."""
    nb, k, _ = gram.shape
    eye = np.eye(k)
    try:
        ginv_t = np.linalg.inv(gram.transpose(0, 2, 1) + 1e-14 * np.trace(gram, axis1=1, axis2=2)[:, None, None] * eye)
        ginv_t = ginv_t.transpose(0, 2, 1)
    except np.linalg.LinAlgError:
        return np.stack([qp_columns(gram[b], lin[b], start[b], inner_iter) for b in range(nb)])
    lam = (lin.sum(axis=1) - gram.sum(axis=1)) / k
    x = np.matmul(lin - lam[:, None, :], ginv_t)
    finite = np.isfinite(x).all(axis=(1, 2))
    ok = finite & (x.min(axis=(1, 2), initial=np.inf) >= 0)
    out = np.where(ok[:, None, None], x, 0.0)
    bad = np.flatnonzero(~ok)
    if len(bad):
        zero = start[bad].reshape(len(bad), -1) <= 1e-14
        from_x = ~zero.any(axis=1) & finite[bad]
        zero[from_x] = x[bad[from_x]].reshape(-1, k * k) <= 0
        hess = _block_hessian(gram[bad])
        xs, done = active_set_batch(hess, 2.0 * lin[bad].reshape(len(bad), -1), column_sum_operator(k), zero)
        out[bad[done]] = xs[done].reshape(-1, k, k)
        for b in bad[~done]:
            out[b] = qp_columns(gram[b], lin[b], start[b], inner_iter)
    return out
