"""Compiled twins of the pairwise models' inner steps (numba, the optional ``fast`` extra).

A pairwise fit is small arrays and many iterations: an EM iteration of ``ds-pairwise`` on 2,500 judgements is a
few dozen numpy calls of microseconds each, so its time is call overhead, not arithmetic.  With numba installed
each step below is one compiled loop with the numpy version's arithmetic: the Davidson Newton step with backtracking
(:func:`.davidson.newton`), the E-step of the pairwise Dawid–Skene model (items' log joint, normalised, and the
observed-data log-likelihood) and its M-step statistics (confusion counts and each pair's soft targets).  Both
paths give the same numbers to rounding (tests compare them); ``FUSION_CORE_JIT=0`` forces numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_COMPILED: dict[str, Any] = {}
HELPERS = ("_log_probs", "_diffs", "_value", "_solve", "_ds_m_counts")
KERNELS = ("_newton", "_ds_e_step", "_ds_m_step")


def _compiled(name: str) -> Any:
    """Kernel ``name`` compiled by numba (cached on disk; imported lazily on first use).  The helpers the kernels
    call are compiled first and put in their place in this module, where the kernels look them up."""
    if not _COMPILED:
        import numba as nb

        jit = nb.njit(cache=True, nogil=True, error_model="numpy")
        names = globals()
        for helper in HELPERS:
            names[helper] = jit(names[helper])
        for kernel in KERNELS:
            _COMPILED[kernel] = jit(names[kernel])
    return _COMPILED[name]


def newton_kernel(*args: Any) -> tuple[np.ndarray, float]:
    """:func:`.davidson.newton` compiled: (cols, signs, T, w, ridge, x, log ν, ties, steps) → (x, log ν)."""
    return _compiled("_newton")(*args)


def ds_e_step(*args: Any) -> tuple[np.ndarray, float]:
    """The pairwise Dawid–Skene E-step compiled (:func:`_ds_e_step`)."""
    return _compiled("_ds_e_step")(*args)


def ds_m_step(*args: Any) -> tuple[np.ndarray, np.ndarray]:
    """The pairwise Dawid–Skene M-step's closed-form part compiled (:func:`_ds_m_step`)."""
    return _compiled("_ds_m_step")(*args)


def _log_probs(d: np.ndarray, log_nu: float, ties: bool) -> np.ndarray:  # pragma: no cover (compiled)
    """:func:`.davidson.log_probs` (``ties`` False: two columns, log σ(d) and log σ(−d))."""
    n = len(d)
    out = np.empty((n, 3 if ties else 2))
    for r in range(n):
        if ties:
            h = d[r] / 2
            m = max(abs(h), log_nu)
            lse = m + np.log(np.exp(h - m) + np.exp(-h - m) + np.exp(log_nu - m))
            out[r, 0] = h - lse
            out[r, 1] = -h - lse
            out[r, 2] = log_nu - lse
        else:
            a = abs(d[r])
            soft = np.log1p(np.exp(-a))  # log(1 + e^{-|d|}): log σ(d) = −(max(−d, 0) + soft)
            out[r, 0] = -(max(-d[r], 0.0) + soft)
            out[r, 1] = -(max(d[r], 0.0) + soft)
    return out


def _diffs(cols: np.ndarray, signs: np.ndarray, x: np.ndarray) -> np.ndarray:  # pragma: no cover (compiled)
    n, m = cols.shape
    d = np.zeros(n)
    for r in range(n):
        for j in range(m):
            d[r] += signs[j] * x[cols[r, j]]
    return d


def _value(lp: np.ndarray, T: np.ndarray, w: np.ndarray, ridge: np.ndarray, x: np.ndarray) -> float:  # pragma: no cover
    tot = 0.0
    for r in range(lp.shape[0]):
        row = 0.0
        for t in range(lp.shape[1]):
            row += T[r, t] * lp[r, t]
        tot += w[r] * row
    pen = 0.0
    for j in range(len(x)):
        pen += ridge[j] * x[j] * x[j]
    return tot - 0.5 * pen


def _newton(  # noqa: PLR0917 (a compiled kernel takes arrays, not objects)
    cols: np.ndarray,
    signs: np.ndarray,
    T: np.ndarray,
    w: np.ndarray,
    ridge: np.ndarray,
    x0: np.ndarray,
    log_nu0: float,
    ties: bool,
    steps: int,
) -> tuple[np.ndarray, float]:  # pragma: no cover (compiled)
    """:func:`.davidson.newton` on the design ``cols`` / ``signs`` (``ties``: log ν is the last coordinate)."""
    p_dim = len(x0)
    n, m = cols.shape
    x = x0.copy()
    log_nu = log_nu0
    lp = _log_probs(_diffs(cols, signs, x), log_nu, ties)
    cur = _value(lp, T, w, ridge, x)
    dim = p_dim + 1 if ties else p_dim
    for _ in range(steps):
        grad = np.zeros(dim)
        H = np.zeros((dim, dim))
        for r in range(n):
            p0 = np.exp(lp[r, 0])
            p1 = np.exp(lp[r, 1])
            diff = p0 - p1
            g_d = w[r] * 0.5 * ((T[r, 0] - T[r, 1]) - diff)
            h_dd = w[r] * 0.25 * ((p0 + p1) - diff * diff)
            for a in range(m):
                ca = cols[r, a]
                grad[ca] += signs[a] * g_d
                for b in range(m):
                    H[ca, cols[r, b]] += signs[a] * signs[b] * h_dd
            if ties:
                p2 = np.exp(lp[r, 2])
                h_dn = w[r] * -0.5 * p2 * diff
                for a in range(m):
                    H[cols[r, a], p_dim] += signs[a] * h_dn
                H[p_dim, p_dim] += w[r] * (p2 * (1 - p2))
                grad[p_dim] += w[r] * (T[r, 2] - p2)
        for j in range(p_dim):
            grad[j] -= ridge[j] * x[j]
            H[j, j] += ridge[j] + 1e-9
        if ties:
            for j in range(p_dim):
                H[p_dim, j] = H[j, p_dim]
            H[p_dim, p_dim] += 1e-6 + 1e-9
        step = _solve(H, grad)
        t = 1.0
        improved = False
        for _ in range(30):  # backtracking halvings
            nx = x + t * step[:p_dim]
            nn = log_nu
            if ties:
                nn = min(max(log_nu + t * step[p_dim], -20.0), 5.0)
            nlp = _log_probs(_diffs(cols, signs, nx), nn, ties)
            val = _value(nlp, T, w, ridge, nx)
            if val >= cur - 1e-12 * max(1.0, abs(cur)):
                improved = val > cur
                x, log_nu, lp, cur = nx, nn, nlp, val
                break
            t *= 0.5
        if not improved or np.max(np.abs(t * step)) < 1e-10:
            break
    return x, log_nu


def _solve(H: np.ndarray, g: np.ndarray) -> np.ndarray:  # pragma: no cover (compiled)
    """H⁻¹ g by Gaussian elimination with partial pivoting (LAPACK's gesv, without its compile time)."""
    n = len(g)
    A = H.copy()
    b = g.copy()
    for c in range(n):
        piv = c
        for r in range(c + 1, n):
            if abs(A[r, c]) > abs(A[piv, c]):
                piv = r
        if piv != c:
            for j in range(n):
                A[c, j], A[piv, j] = A[piv, j], A[c, j]
            b[c], b[piv] = b[piv], b[c]
        for r in range(c + 1, n):
            f = A[r, c] / A[c, c]
            for j in range(c, n):
                A[r, j] -= f * A[c, j]
            b[r] -= f * b[c]
    x = np.empty(n)
    for r in range(n - 1, -1, -1):
        v = b[r]
        for j in range(r + 1, n):
            v -= A[r, j] * x[j]
        x[r] = v / A[r, r]
    return x


def _ds_e_step(  # noqa: PLR0917
    cols: np.ndarray,
    signs: np.ndarray,
    theta: np.ndarray,
    log_nu: float,
    ties: bool,
    item_group: np.ndarray,
    starts: np.ndarray,
    cell_by_item: np.ndarray,
    wc_by_item: np.ndarray,
    log_conf: np.ndarray,
    iw: np.ndarray,
) -> tuple[np.ndarray, float]:  # pragma: no cover (compiled)
    """Items' posteriors and Σ_i iw_i log Σ_t e^{J_it}, J_it = log prior_{g(i)}(t) + Σ_c w_c log π[cell_c(t)]
    (the prior: Davidson on the pairs' design ``cols`` / ``signs``; judgements sorted by item, item i's from
    ``starts[i]``)."""
    lp_groups = _log_probs(_diffs(cols, signs, theta), log_nu, ties)
    n_items, k = len(starts), lp_groups.shape[1]
    n = len(cell_by_item)
    post = np.empty((n_items, k))
    total = 0.0
    row = np.empty(k)
    for i in range(n_items):
        end = starts[i + 1] if i + 1 < n_items else n
        g = item_group[i]
        for t in range(k):
            row[t] = lp_groups[g, t]
        for c in range(starts[i], end):  # the item's judgements, once
            wv = wc_by_item[c]
            for t in range(k):
                row[t] += log_conf[cell_by_item[c, t]] * wv
        mx = row.max()
        s = 0.0
        for t in range(k):
            row[t] = np.exp(row[t] - mx)
            s += row[t]
        for t in range(k):
            post[i, t] = row[t] / s
        total += iw[i] * (np.log(s) + mx)
    return post, total


def _ds_m_counts(  # noqa: PLR0917
    post: np.ndarray,
    item: np.ndarray,
    w: np.ndarray,
    cells: np.ndarray,
    n_cells: int,
    item_group: np.ndarray,
    iw: np.ndarray,
    n_groups: int,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover (compiled)
    """The M-step's statistics: Σ_c w_c q_{i(c)}(t) per confusion cell ``cells[c, t]``, and per pair Σ_i iw_i q_i."""
    k = post.shape[1]
    counts = np.zeros(n_cells)
    for c in range(len(item)):
        i = item[c]
        for t in range(k):
            counts[cells[c, t]] += post[i, t] * w[c]
    targets = np.zeros((n_groups, k))
    for i in range(post.shape[0]):
        g = item_group[i]
        for t in range(k):
            targets[g, t] += post[i, t] * iw[i]
    return counts, targets


def _ds_m_step(  # noqa: PLR0917
    post: np.ndarray,
    item: np.ndarray,
    w: np.ndarray,
    cells: np.ndarray,
    n_judges: int,
    alpha: float,
    floor: float,
    item_group: np.ndarray,
    iw: np.ndarray,
    pair_weight: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover (compiled)
    """The M-step's closed-form part: log π (the counts plus ``alpha``, normalised per judge and truth, logs floored
    at log ``floor``) and each pair's soft targets (Σ_i iw_i q_i / ``pair_weight``)."""
    k = post.shape[1]
    counts, targets = _ds_m_counts(post, item, w, cells, n_judges * k * k, item_group, iw, len(pair_weight))
    log_conf = np.empty((n_judges, k, k))
    for j in range(n_judges):
        for s in range(k):
            tot = 0.0
            for y in range(k):
                tot += counts[(j * k + s) * k + y] + alpha
            for y in range(k):
                log_conf[j, s, y] = np.log(max((counts[(j * k + s) * k + y] + alpha) / tot, floor))
    for g in range(len(pair_weight)):
        d = max(pair_weight[g], 1e-300)
        for t in range(k):
            targets[g, t] /= d
    return log_conf, targets
