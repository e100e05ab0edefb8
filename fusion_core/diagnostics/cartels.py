"""Cartel detection: groups of annotators whose errors are correlated beyond the one-truth model.

P14 §Cartel (Lemma 2, Theorem 1) shows that a cartel following its own target labelling adds a second
rank-one component to the annotators' covariance.  The detector is the spec's product extension
(``spectral.md`` §6.2–6.6, [EXT]):

* statistic (§6.3): top eigenvalues of the standardised residual Ẽ = (Q̂ − v̂v̂ᵀ)/σ̂ of the rank-one fit;
* null (§6.4): parametric bootstrap from the fitted independent two-coin model (i-SML then EM), with the
  observed missingness pattern copied exactly; p = (1 + #{s* ≥ s})/(B + 1);
* groups (§6.5): rank-2 fit, angle clustering of the loadings, recursive splitting, reassignment by
  regression evidence, merging; the largest group is "honest" (the *main* group — nothing identifies which
  group is honest, P14), the others "cartel 1", "cartel 2", …;
* labels recomputed without the cartel members (§6.5 step 9).

Large sparse crowds (hundreds of annotators, a few percent of the cells observed) [EXT, ours]:

* the null draws only the observed entries and computes the moments on the fixed pattern of candidate
  pairs (``_PairPattern``: segment sums over shared items, cost Σ n_ij per replicate instead of m²·n);
* the split and merge tests stop their bootstrap early (Besag–Clifford sequential p-value, same decision
  as the full B on the same stream, see ``_Analysis.test``); the first test always draws all B;
* the statistic of those tests (top residual eigenvalue) comes from a batched Lanczos, the rank fits
  from warm-started eigen-solvers; each is certified against LAPACK or falls back to it;
* BLAS runs single-threaded during detection (threadpoolctl, when installed).

The detector flags *correlation*, not intent (spec P15): classifiers of one family or annotators sharing a
guideline look the same.  Binary labels only (the positive class is ``positive_label`` or the second label).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import ArpackNoConvergence, eigsh

from fusion_core.data.responses import Responses, as_responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import initial_posterior
from fusion_core.methods.dawid_skene import run_em
from fusion_core.spectral import (
    BinaryMatrix,
    SparseOverlapWarning,
    fit_binary,
    loglinear_diagonal,
    pair_weights,
    pairwise_moments,
    resolve_sign,
    spectral_core,
    top_eigenpair,
    top_eigh,
)

SPARSE_BOOTSTRAP_CELLS = 200_000  # above this many annotator × item cells (and < 30% observed) the
# bootstrap draws only observed entries and sums over the fixed pair pattern (``_PairPattern``) instead of
# dense batched products (whose cost m²·n per replicate made 800-annotator crowds take minutes)


@dataclass
class CartelReport:
    """Result of :func:`detect_cartels` (field names are the app's contract)."""

    workers: pd.Index  # annotators analysed (those with enough overlap)
    eigenvalues: np.ndarray  # spectrum of the completed covariance, descending
    null_eigenvalues: np.ndarray  # bootstrap eigenvalues under the fitted independent model (B × n_components)
    p_value: np.ndarray  # one per extra component (index 0 = 2nd eigenvalue)
    loadings: pd.DataFrame  # index worker, columns "v1","v2",... (scaled eigenvectors)
    groups: list[set]  # detected cartels only (sets of worker ids); [] when none
    membership: pd.Series  # worker -> "honest" or "cartel 1", "cartel 2", ...
    scores: pd.Series  # per-annotator cartel score in [0, 1]
    labels: pd.Series  # labels (by task) from the full crowd
    labels_without_cartel: pd.Series  # labels recomputed without cartel members
    alpha: float
    n_bootstrap: int
    warnings: list[str]
    # extras beyond the contract
    statistic: np.ndarray = field(default_factory=lambda: np.array([]))  # observed residual eigenvalues s
    null_statistic: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # bootstrap s* (B × n_extra)
    undetermined: pd.Index = field(
        default_factory=lambda: pd.Index([], name="worker")
    )  # near-random annotators (no usable signal)
    rho: pd.Series = field(default_factory=lambda: pd.Series(dtype=float, name="rho"))  # signal strength √(L1² + L2²)
    method: str = "sml"
    positive_label: Any = None

    @property
    def significant(self) -> bool:
        """True when at least one cartel was detected."""
        return bool(self.groups)


# ------------------------------------------------------------------------------ batched moments
def _batched_stats(
    Z: np.ndarray, O: np.ndarray, n_min: int, n_extra: int, x0: np.ndarray, n_spec: int = 0, weights: str = "delta"
) -> tuple[np.ndarray, np.ndarray]:
    """For each replicate b of Z (b × m × n, 0 where missing; O the m × n mask): the top ``n_extra``
    eigenvalues of the standardised residual of the rank-one fit (§6.3) and the top ``n_spec`` eigenvalues
    of the completed R̂.  Method A (delta weights) + hard-impute power iteration warm-started at x0.
    """
    Of = O.astype(float)
    N = Of @ Of.T
    S1 = Z @ Of.T
    S12 = Z @ Z.transpose(0, 2, 1)
    return _stats_from_products(N, S1, S12, n_min, n_extra, x0, n_spec, weights)


def _stats_from_products(N, S1, S12, n_min, n_extra, x0, n_spec=0, weights="delta"):
    """The statistics of :func:`_batched_stats` from the moment products (N shared, S1/S12 per replicate)."""
    nb, m, _ = S1.shape
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
    qz = np.where(valid, q, 0.0)
    if weights == "delta":
        W = np.where(valid & (qz != 0), qz**2 / np.where(valid, sigma2, 1.0), 0.0)
    else:
        W = (valid & (qz != 0)).astype(float)
    with np.errstate(divide="ignore"):
        Y = np.where(W > 0, np.log(np.abs(qz) + (W == 0)), 0.0)
    deg = W.sum(axis=2)
    A = W.copy()
    A[:, np.arange(m), np.arange(m)] += np.where(deg > 0, deg, 1.0)  # isolated: t_i = 0 (the min-norm value)
    c = (W * Y).sum(axis=2)
    t = _solve_batched(A, c)
    r = np.minimum(np.exp(2 * t), base)
    R = qz.copy()
    R[:, np.arange(m), np.arange(m)] = r
    miss = off & ~valid
    Mf = miss.astype(float) if miss.any() else None

    def matvec(x, lam):  # R_f x with R_f = R off the missing pairs and λ x xᵀ on them: R x + λ x ⊙ (M x²)
        y = np.matmul(R, x[:, :, None])[:, :, 0]
        if Mf is not None:
            y += lam[:, None] * x * np.matmul(Mf, (x * x)[:, :, None])[:, :, 0]
        return y

    x, lam = _batched_power(matvec, x0, nb, m)
    v = np.sqrt(np.maximum(lam, 0))[:, None] * x
    E = np.where(valid, (qz - v[:, :, None] * v[:, None, :]) / np.sqrt(np.where(valid, sigma2, 1.0)), 0.0)
    s = np.linalg.eigvalsh(E)[:, ::-1][:, :n_extra]
    spec = np.zeros((nb, 0))
    if n_spec:
        Rf = np.where(miss, lam[:, None, None] * x[:, :, None] * x[:, None, :], R) if Mf is not None else R
        spec = np.linalg.eigvalsh(Rf)[:, ::-1][:, :n_spec]
    return s, spec


def _solve_batched(A: np.ndarray, c: np.ndarray) -> np.ndarray:
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


def _power_top(R: np.ndarray, e: np.ndarray, tol: float = 1e-13, max_steps: int = 40):
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


def _batched_power(matvec, x0: np.ndarray, nb: int, m: int, max_steps: int = 200, tol: float = 1e-9):
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


def _top_eigenpair_warm(R: np.ndarray, valid: np.ndarray, max_impute: int = 200, tol: float = 1e-8):
    """``spectral.top_eigenpair(R, valid, spectrum=False)`` (same hard-impute, tolerance and iteration cap) with
    each inner eigenpair found by power iteration warm-started at the previous one (the imputed matrix moves
    little between steps) instead of a LAPACK solve.  Certified at the end: the LAPACK top eigenpair of the
    final matrix must agree, else the reference routine is run.  Returns (λ, e)."""
    spec, e, R_final = top_eigenpair(R, valid, max_impute=max_impute, tol=tol, spectrum=False, warm=_power_top)
    lam = float(spec[0])
    if not (~valid & ~np.eye(len(R), dtype=bool)).any():
        return lam, e
    lam_ref, e_ref = top_eigh(R_final)
    if abs(lam_ref - lam) > 1e-9 * max(abs(lam_ref), 1.0) or abs(abs(e_ref @ e) - 1) > 1e-9:
        spec, e, _ = top_eigenpair(R, valid, max_impute=max_impute, tol=tol, spectrum=False)
        return float(spec[0]), e
    return float(lam_ref), (e_ref if e_ref @ e >= 0 else -e_ref)


def _lanczos_top(A: sp.csr_matrix, nb: int, m: int, max_steps: int = 120, tol: float = 1e-11):
    """Largest eigenvalue of each m × m diagonal block of the block-diagonal A (nb blocks) by Lanczos with
    full reorthogonalisation, all blocks at once.  The start vector is fixed (not drawn from the user's
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
        w = (A @ q.ravel()).reshape(nb, m)
        alpha[:, k] = np.einsum("bi,bi->b", q, w)
        for _ in range(2):  # full reorthogonalisation (classical Gram–Schmidt, twice)
            w -= np.einsum("bk,bkm->bm", np.einsum("bkm,bm->bk", Qs[:, : k + 1], w), Qs[:, : k + 1])
        beta[:, k] = np.linalg.norm(w, axis=1)
        done = k + 1 == k_max
        if (k + 1) % 10 == 0 or done:
            for r in range(nb):  # small tridiagonal eigenproblems, one per block
                if ok[r]:
                    continue
                if k == 0:
                    theta[r], ok[r] = alpha[r, 0], beta[r, 0] <= tol * max(abs(alpha[r, 0]), 1.0)
                    continue
                val, vec = sla.eigh_tridiagonal(alpha[r, : k + 1], beta[r, :k], select="i", select_range=(k, k))
                theta[r] = val[0]
                ok[r] = beta[r, k] * abs(vec[-1, 0]) <= tol * max(abs(val[0]), 1.0) or (done and k + 1 == m)
            if ok.all():
                break
        if done:
            break
        q = w / np.maximum(beta[:, k : k + 1], 1e-300)
    return theta[:, None], ok


class _PairPattern:
    """The fixed missingness pattern of a group under the parametric bootstrap (§6.4 step 2, [EXT]).

    Observed entries ``(worker[e], item[e])``; for every *candidate* pair i < j (``n_ij ≥ max(n_min, 2)``,
    the only pairs that can be valid) the entries of i and of j on their shared items, sorted by pair, so
    that ``S1_ij = Σ z_il``, ``S1_ji = Σ z_jl`` and ``S12_ij = Σ z_il z_jl`` over the overlap are segment
    sums (``np.add.reduceat``) of gathered labels: cost ∝ Σ_pairs n_ij per replicate instead of m²·n.
    """

    def __init__(self, worker: np.ndarray, item: np.ndarray, m: int, n: int, n_min: int):
        self.m, self.n, self.nnz = m, n, len(worker)
        order = np.lexsort((worker, item))  # by item, then annotator
        w, it = worker[order], item[order]
        ea_parts, eb_parts = [], []
        deg_max = int(np.bincount(item, minlength=n).max()) if len(item) else 0
        for k in range(1, deg_max):  # offsets within an item (≤ the largest item degree), not responses
            same = np.flatnonzero(it[k:] == it[:-k])
            ea_parts.append(order[same])
            eb_parts.append(order[same + k])
        ea = np.concatenate(ea_parts) if ea_parts else np.zeros(0, dtype=np.int64)
        eb = np.concatenate(eb_parts) if eb_parts else np.zeros(0, dtype=np.int64)
        key = worker[ea] * m + worker[eb]  # worker[ea] < worker[eb] (sorted within the item)
        counts = np.bincount(key, minlength=m * m)
        self.N = (counts + counts.reshape(m, m).T.ravel()).reshape(m, m).astype(float)
        self.N[np.arange(m), np.arange(m)] = np.bincount(worker, minlength=m)
        cand = counts[key] >= max(n_min, 2)
        ea, eb, key = ea[cand], eb[cand], key[cand]
        srt = np.argsort(key, kind="stable")
        self.ea, self.eb, key = ea[srt], eb[srt], key[srt]
        first = np.r_[True, key[1:] != key[:-1]] if len(key) else np.zeros(0, dtype=bool)
        self.starts = np.flatnonzero(first)
        self.a, self.b = np.divmod(key[self.starts], m)
        self.worker = worker
        self.ind = sp.csr_matrix((np.ones(len(worker)), (np.arange(len(worker)), worker)), shape=(len(worker), m))

        # symmetric CSR structure of one replicate's candidate pairs; ``src`` maps CSR slots to pair values
        P = len(self.a)
        rows, cols = np.r_[self.a, self.b], np.r_[self.b, self.a]
        order = np.lexsort((cols, rows))
        self.src = np.r_[np.arange(P), np.arange(P)][order]
        self.indices = cols[order]
        self.indptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=m))]

    @property
    def work(self) -> int:
        """Gathered entries per replicate."""
        return len(self.ea) + self.nnz

    def sums(self, zs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per replicate (rows of ``zs``, b × entries): Σ_l z_il (b × m), and on the candidate pairs
        S1_ij, S1_ji, S12_ij (b × P)."""
        diag = np.asarray((self.ind.T @ zs.T).T)
        if not len(self.starts):
            e = np.zeros((zs.shape[0], 0))
            return diag, e, e, e
        z32 = zs.astype(np.float32)  # ±1 sums are exact in float32; small sub-chunks stay in cache
        out = []
        for i in range(0, len(z32), 4):
            za, zb = z32[i : i + 4][:, self.ea], z32[i : i + 4][:, self.eb]
            out.append(
                (
                    np.add.reduceat(za, self.starts, axis=1),
                    np.add.reduceat(zb, self.starts, axis=1),
                    np.add.reduceat(za * zb, self.starts, axis=1),
                )
            )
        s1a, s1b, s12 = (np.concatenate(v).astype(float) for v in zip(*out))
        return diag, s1a, s1b, s12

    def block(self, vals: np.ndarray) -> sp.csr_matrix:
        """Block-diagonal (b·m × b·m) symmetric matrix with the pair values ``vals`` (b × P) of each replicate."""
        nb, m = vals.shape[0], self.m
        nnz = len(self.indices)
        indptr = (self.indptr[:-1][None, :] + nnz * np.arange(nb)[:, None]).ravel()
        indptr = np.r_[indptr, nb * nnz]
        indices = (self.indices[None, :] + m * np.arange(nb)[:, None]).ravel()
        return sp.csr_matrix((vals[:, self.src].ravel(), indices, indptr), shape=(nb * m, nb * m))

    def _dense_eigvals(self, e: np.ndarray) -> np.ndarray:
        """Eigenvalues (descending) of the symmetric matrices with pair values ``e`` (b × P), zero diagonal."""
        E = np.zeros((e.shape[0], self.m, self.m))
        E[:, self.a, self.b] = e
        E[:, self.b, self.a] = e
        return np.linalg.eigvalsh(E)[:, ::-1]

    def stats(
        self, zs: np.ndarray, n_min: int, n_extra: int, x0: np.ndarray, n_spec: int = 0, weights: str = "delta"
    ) -> tuple[np.ndarray, np.ndarray]:
        """:func:`_stats_from_products` computed on the candidate pairs only (same statistic: the other
        pairs are never valid), with the hard-impute power iteration as sparse block-diagonal products."""
        nb, m = zs.shape[0], self.m
        diag, s1a, s1b, s12 = self.sums(zs)
        a, b = self.a, self.b
        n_i = np.diagonal(self.N)
        Np = self.N[a, b]
        mu = diag / np.maximum(n_i, 1)
        q = (s12 - s1a * s1b / Np) / (Np - 1)
        const = np.abs(mu) >= 1 - 1e-12
        valid = (np.abs(s1a) < Np - 1e-9) & (np.abs(s1b) < Np - 1e-9) & ~const[:, a] & ~const[:, b]
        muc = np.clip(mu, -(1 - 1e-6), 1 - 1e-6)
        base = 1 - muc**2
        sigma2 = base[:, a] * base[:, b] / (Np - 1)
        qz = np.where(valid, q, 0.0)
        if weights == "delta":
            W = np.where(valid & (qz != 0), qz**2 / sigma2, 0.0)
        else:
            W = (valid & (qz != 0)).astype(float)
        with np.errstate(divide="ignore"):
            Y = np.where(W > 0, np.log(np.abs(qz) + (W == 0)), 0.0)
        rep = np.arange(nb)[:, None] * m
        deg = np.bincount((rep + a).ravel(), W.ravel(), nb * m) + np.bincount((rep + b).ravel(), W.ravel(), nb * m)
        c = (
            np.bincount((rep + a).ravel(), (W * Y).ravel(), nb * m)
            + np.bincount((rep + b).ravel(), (W * Y).ravel(), nb * m)
        ).reshape(nb, m)
        A = np.zeros((nb, m, m))
        A[:, a, b] = W
        A[:, b, a] = W
        A[:, np.arange(m), np.arange(m)] = np.where(deg > 0, deg, 1.0).reshape(nb, m)  # isolated: t_i = 0
        t = _solve_batched(A, c)
        del A
        r = np.minimum(np.exp(2 * t), base)
        any_miss = bool((valid.sum(axis=1) < m * (m - 1) // 2).any())
        Qs = self.block(qz)
        Vs = self.block(valid.astype(float)) if any_miss else None

        def matvec(x, lam):  # the dense path's product on the sparse pair pattern; missing pairs imputed by λ x xᵀ
            y = (Qs @ x.ravel()).reshape(nb, m) + r * x
            if Vs is not None:  # Σ_{j missing} x_j² = Σ_{j≠i} x_j² − Σ_{j valid} x_j²
                x2 = x * x
                y += lam[:, None] * x * ((x2.sum(axis=1, keepdims=True) - x2) - (Vs @ x2.ravel()).reshape(nb, m))
            return y

        x, lam = _batched_power(matvec, x0, nb, m)
        v = np.sqrt(np.maximum(lam, 0))[:, None] * x
        e = np.where(valid, (qz - v[:, a] * v[:, b]) / np.sqrt(np.where(valid, sigma2, 1.0)), 0.0)
        s = None
        if n_extra == 1 and m >= 100:  # the statistic alone: Lanczos on the sparse residual
            s, ok = _lanczos_top(self.block(e), nb, m)
            if not ok.all():
                s[~ok] = self._dense_eigvals(e[~ok])[:, :1]
        if s is None:
            s = self._dense_eigvals(e)[:, :n_extra]
        spec = np.zeros((nb, 0))
        if n_spec:
            Rf = lam[:, None, None] * x[:, :, None] * x[:, None, :]
            f = np.where(valid, qz, lam[:, None] * x[:, a] * x[:, b])
            Rf[:, a, b] = f
            Rf[:, b, a] = f
            Rf[:, np.arange(m), np.arange(m)] = r
            spec = np.linalg.eigvalsh(Rf)[:, ::-1][:, :n_spec]
        return s, spec


def _stop_count(alpha: float, n_bootstrap: int) -> int:
    """Exceedances h at which the sequential bootstrap stops: h ≥ α(B+1) − 1, so the full-B test could no
    longer reject, and h ≥ αB, so neither can the stopped one (p = h/n ≥ h/B ≥ α); at least 10."""
    h_min = max(int(np.ceil(alpha * (n_bootstrap + 1) - 1 - 1e-9)), int(np.ceil(alpha * n_bootstrap - 1e-9)))
    return max(h_min, 10)


class _Analysis:
    """Dense view of the core annotators' labels plus cached group tests."""

    def __init__(
        self,
        resp: Responses,
        B: BinaryMatrix,
        workers_idx: np.ndarray,
        *,
        n_bootstrap: int,
        alpha: float,
        n_min: int,
        rng: np.random.Generator,
        pos: int,
    ):
        self.resp, self.pos = resp, pos
        self.idx = workers_idx  # codes of analysed annotators
        sub = B.subset_workers(np.isin(np.arange(B.m), workers_idx))
        items = np.unique(sub.item)
        remap = np.full(B.n, -1)
        remap[items] = np.arange(len(items))
        self.Z = np.zeros((sub.m, len(items)))
        self.O = np.zeros((sub.m, len(items)), dtype=bool)
        self.Z[sub.worker, remap[sub.item]] = sub.z
        self.O[sub.worker, remap[sub.item]] = True
        self.B = BinaryMatrix.from_dense(np.where(self.O, self.Z, np.nan))
        self.n_bootstrap, self.alpha, self.n_min, self.rng = n_bootstrap, alpha, n_min, rng
        self.mom = pairwise_moments(self.B, n_min=n_min)
        self.cache: dict[frozenset, dict[str, Any]] = {}
        self.fits: dict[tuple[str, bytes], np.ndarray] = {}

    # -------------------------------------------------------------------- tests
    def null_model(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """§6.4 step 1: i-SML then EM on group g (local indices); ψ, η clipped to [0.01, 0.99], b to ±0.98."""
        Bg = self.B.subset_workers(np.isin(np.arange(self.B.m), g))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AggregationWarning)
            bf = fit_binary(Bg, n_min=self.n_min, d_min=1)
        keep = np.isin(Bg.item, np.unique(Bg.item))
        # two-coin EM from the i-SML posterior (spec §3.11) on a Responses built from the group's labels
        r = Responses(
            item=Bg.item[keep],
            worker=Bg.worker[keep],
            label=(Bg.z[keep] > 0).astype(np.int64),
            items=pd.RangeIndex(Bg.n),
            workers=pd.RangeIndex(Bg.m),
            classes=pd.Index([0, 1]),
        )
        if bf.llr is not None:
            p = 1 / (1 + np.exp(-np.clip(bf.llr + np.log((1 + bf.b) / (1 - bf.b)), -50, 50)))
            q0 = np.stack([1 - p, p], axis=1)
        else:
            q0 = initial_posterior(r, "mv")
        f = run_em(r, q0, smoothing=0.01, estimate_priors=True, tol=1e-8, max_iter=500)
        psi = np.clip(f.confusion[:, 1, 1], 0.01, 0.99)
        eta = np.clip(f.confusion[:, 0, 0], 0.01, 0.99)
        b = float(np.clip(f.class_prior[1] - f.class_prior[0], -0.98, 0.98))
        return psi, eta, b

    def test(
        self, g: np.ndarray, n_extra: int = 1, n_spec: int = 0, chunk: int = 50, sequential: bool = False
    ) -> dict[str, Any]:
        """Statistic and bootstrap p-values for group g (local indices), cached by membership.

        ``sequential`` [EXT, ours]: Besag–Clifford sequential Monte Carlo test (Besag & Clifford 1991,
        Biometrika 78:301).  Replicates are drawn in chunks and the bootstrap stops as soon as ``h``
        replicates reach the observed statistic; the p-value is then ``h / n`` (n = replicates drawn), else
        the full-B p-value ``(1 + c) / (B + 1)``.  With ``h ≥ h_min`` (a count at which neither the full-B
        test nor the stopped one, h/n ≥ h/B, can reject), the decision p < α is exactly the one the full B
        replicates of this stream would give (the count can only grow); ``h = max(h_min, 10)`` keeps p
        precise enough to rank the merge candidates (§6.5 step 7).  Used for the split and merge tests, not for the first test, whose
        full null is displayed.
        """
        key = frozenset(int(i) for i in g)
        hit = self.cache.get(key)
        if hit is not None and hit["s"].shape[0] >= n_extra and hit["spec"].shape[0] >= n_spec:
            return hit
        g = np.sort(np.asarray(list(key)))
        Zg, Og = self.Z[g], self.O[g]
        keep_items = Og.any(axis=0)
        Zg, Og = Zg[:, keep_items], Og[:, keep_items]
        psi, eta, b = self.null_model(g)
        x0 = np.sqrt(1 - b**2) * (psi + eta - 1)
        if np.linalg.norm(x0) == 0:
            x0 = np.ones(len(g))
        m, n = Zg.shape
        # dense batched products for small or well-filled matrices; for sparse ones, segment sums over the
        # fixed pattern of candidate pairs (only labels are redrawn under the parametric bootstrap)
        sparse = m * n > SPARSE_BOOTSTRAP_CELLS and Og.mean() < 0.3
        if sparse:
            w_idx, i_idx = np.nonzero(Og)
            pat = _PairPattern(w_idx, i_idx, m, n, self.n_min)
            chunk = max(1, min(chunk, int(3_000_000 // (m * m)), int(20_000_000 // max(pat.work, 1))))
            s_obs, spec_obs = pat.stats(Zg[w_idx, i_idx][None], self.n_min, n_extra, x0, n_spec)
        else:
            chunk = max(1, min(chunk, int(10_000_000 // (m * n))))
            s_obs, spec_obs = _batched_stats(Zg[None], Og, self.n_min, n_extra, x0, n_spec)
        B = self.n_bootstrap
        h = _stop_count(self.alpha, B) if sequential else B + 1
        s_null, spec_null, count, stop_at = [], [], 0, None
        for start in range(0, B, chunk):  # chunks bound memory
            nb = min(chunk, B - start)
            y = self.rng.random((nb, n)) < (1 + b) / 2
            if sparse:  # draw only the observed entries (the missingness mask is copied exactly)
                u = self.rng.random((nb, len(w_idx)))
                yy = y[:, i_idx]
                zs = np.where(yy, np.where(u < psi[w_idx], 1.0, -1.0), np.where(u < eta[w_idx], -1.0, 1.0))
                s, sp_ = pat.stats(zs, self.n_min, n_extra, x0, n_spec)
            else:
                u = self.rng.random((nb, m, n))
                zs = (
                    np.where(
                        y[:, None, :],
                        np.where(u < psi[None, :, None], 1.0, -1.0),
                        np.where(u < eta[None, :, None], -1.0, 1.0),
                    )
                    * Og[None]
                )
                s, sp_ = _batched_stats(zs, Og, self.n_min, n_extra, x0, n_spec)
            s_null.append(s)
            spec_null.append(sp_)
            hits = count + np.cumsum(s[:, 0] >= s_obs[0, 0])
            if hits[-1] >= h:  # sequential stop: the h-th exceedance
                stop_at = start + int(np.argmax(hits >= h)) + 1
                break
            count = int(hits[-1])
        s_null_a = np.concatenate(s_null)
        spec_null_a = np.concatenate(spec_null)
        if stop_at is not None:
            s_null_a, spec_null_a = s_null_a[:stop_at], spec_null_a[:stop_at]
            p = (1 + (s_null_a >= s_obs[0][None, :]).sum(axis=0)) / (stop_at + 1)
            p[0] = h / stop_at
        else:
            p = (1 + (s_null_a >= s_obs[0][None, :]).sum(axis=0)) / (B + 1)
        out = {
            "s": s_obs[0],
            "s_null": s_null_a,
            "p": p,
            "spec": spec_obs[0],
            "spec_null": spec_null_a,
            "null": (psi, eta, b),
            "n_drawn": len(s_null_a),
        }
        self.cache[key] = out
        return out

    # ------------------------------------------------------------ rank fits
    def sub_q(self, g: np.ndarray):
        mom = self.mom
        ix = np.ix_(g, g)
        return mom.Q[ix], mom.valid[ix], mom.sigma2[ix], mom.N[ix]

    def _cached(self, kind: str, g: np.ndarray, fit) -> np.ndarray:
        """Rank fits are pure functions of the group (in its order): computed once per group."""
        key = (kind, np.asarray(g, dtype=np.int64).tobytes())
        if key not in self.fits:
            self.fits[key] = fit(np.asarray(g))
        return self.fits[key].copy()

    def rank_one(self, g: np.ndarray) -> np.ndarray:
        """Method A rank-one vector (J15-scaled, sum-rule sign) of group g."""
        return self._cached("one", g, self._rank_one)

    def rank_two(self, g: np.ndarray) -> np.ndarray:
        """§6.5 step 1: principal-axis iteration of rank 2 (missing pairs imputed); loadings L (|g| × 2)."""
        return self._cached("two", g, self._rank_two)

    def _rank_one(self, g: np.ndarray) -> np.ndarray:
        Q, valid, sigma2, N = self.sub_q(g)
        from fusion_core.spectral import Moments

        sub = Moments(self.mom.mu[g], self.mom.n_i[g], N, Q, valid, sigma2, self.mom.constant[g], self.n_min)
        W = pair_weights(sub, "delta")
        qdiag = np.diag(Q).copy()
        r, _ = loglinear_diagonal(Q, W, qdiag)
        R = np.where(valid, Q, 0.0)
        np.fill_diagonal(R, r)
        lam, e = _top_eigenpair_warm(R, valid)
        return resolve_sign(np.sqrt(max(lam, 0)) * e, "sum")[0]

    def _rank_two(self, g: np.ndarray, max_iter: int = 300, warm: bool = True) -> np.ndarray:
        """Principal-axis iteration of rank 2.  With ``warm`` (m ≥ 60) each top-2 eigenpair comes from
        Lanczos (ARPACK) started at the previous leading eigenvector; the last step is redone by LAPACK and
        must agree (else the LAPACK-only iteration is run), so L is what the LAPACK iteration returns."""
        Q, valid, _, _ = self.sub_q(g)
        m = len(g)
        warm = warm and m >= 60
        Qz = np.where(valid, Q, 0.0)
        miss = ~valid & ~np.eye(m, dtype=bool)
        d = np.max(np.abs(Qz), axis=1)
        R = Qz.copy()
        v0 = None
        for _ in range(max_iter):
            np.fill_diagonal(R, d)
            vals = vecs = None
            if warm and v0 is not None:
                try:
                    vals, vecs = eigsh(R, k=2, which="LA", v0=v0, tol=1e-13)
                except ArpackNoConvergence:
                    vals = None
            if vals is None:
                vals, vecs = sla.eigh(R, subset_by_index=[m - 2, m - 1], check_finite=False)
            vals, vecs = vals[::-1], vecs[:, ::-1]
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
            ref, vref = sla.eigh(R_used, subset_by_index=[m - 2, m - 1], check_finite=False)
            ref, vref = ref[::-1], vref[:, ::-1]
            if np.max(np.abs(ref - vals)) > 1e-9 * max(abs(ref[0]), 1.0):
                return self._rank_two(g, max_iter, warm=False)
            L = vref * np.sqrt(np.maximum(ref, 0))[None, :]
        return L

    def evidence(self, groups: list[np.ndarray], return_coef: bool = False):
        """§6.5 step 6: z_ig = (Σ_{j∈g, j≠i} w_ij q̂_ij u_j)² / Σ_{j∈g, j≠i} w_ij u_j², w = 1/σ̂² (m × G).

        With ``return_coef`` also the regression coefficients Σ w q u / Σ w u² (annotator i's loading on
        group g's factor)."""
        mom = self.mom
        Wt = np.where(mom.valid, 1.0 / np.where(mom.valid, mom.sigma2, 1.0), 0.0)
        Qz = np.where(mom.valid, mom.Q, 0.0)
        z = np.zeros((self.B.m, len(groups)))
        coef = np.zeros((self.B.m, len(groups)))
        for k, g in enumerate(groups):  # loop over groups (≤ k_max + 1)
            if len(g) < 3:
                continue
            u = np.zeros(self.B.m)
            u[g] = self.rank_one(g)
            num = (Wt * Qz) @ u
            den = Wt @ (u**2)
            ok = den > 0
            z[:, k] = np.where(ok, num**2 / np.where(ok, den, 1), 0.0)
            coef[:, k] = np.where(ok, num / np.where(ok, den, 1), 0.0)
        return (z, coef) if return_coef else z


def _split(an: _Analysis, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """§6.5 steps 1–3: (main ∪ undetermined, subgroup, undetermined) of group g (local indices)."""
    L = an.rank_two(g)
    rho2 = (L**2).sum(axis=1)
    sig = an.mom.sigma2[np.ix_(g, g)]
    sigbar2 = np.nanmedian(sig[an.mom.valid[np.ix_(g, g)]]) if an.mom.valid[np.ix_(g, g)].any() else 0.0
    undet = rho2 <= 4 * sigbar2
    phi = 2 * np.arctan2(L[:, 1], L[:, 0])
    w = np.where(undet, 0.0, rho2)
    centres = np.array([0.0, np.pi])
    assign = np.zeros(len(g), dtype=int)
    for _ in range(100):
        dist = np.abs(np.angle(np.exp(1j * (phi[:, None] - centres[None, :]))))
        assign = np.argmin(dist, axis=1)
        new = centres.copy()
        for k in range(2):
            sel = assign == k
            if (w[sel] > 0).any():
                new[k] = np.angle(np.sum(w[sel] * np.exp(1j * phi[sel])))
        if np.allclose(new, centres, atol=1e-12):
            break
        centres = new
    mass = [w[(assign == k)].sum() for k in range(2)]
    main = int(np.argmax(mass))
    is_main = (assign == main) | undet
    return g[is_main], g[~is_main], g[undet]


def _one_blas_thread():
    """Single-threaded BLAS while detecting (threadpoolctl when installed): the work is thousands of small
    batched LAPACK/BLAS calls, for which OpenBLAS threads only add synchronisation; on a loaded 2-core
    machine the default threading made the adult crowd 5–20× slower."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: without it BLAS keeps its own thread setting
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def detect_cartels(
    df_or_responses: Responses | pd.DataFrame,
    *,
    n_bootstrap: int = 200,
    alpha: float = 0.05,
    method: str = "sml",
    random_state: int | None = 0,
    positive_label: Any = None,
    n_min: int = 10,
    d_min: int = 3,
    m_min: int = 8,
    k_max: int = 3,
    n_components: int = 10,
    merge: bool = True,
) -> CartelReport:
    """Detect groups of annotators with correlated errors (spec ``spectral.md`` §6, P14 §Cartel).

    ``alpha``: test level for each component (the spec's stricter default is 0.01); ``n_bootstrap``:
    replicates of the parametric null; ``method``: registry method used for ``labels`` and
    ``labels_without_cartel``; ``m_min``/``k_max``: smallest group tested / maximum number of splits.
    ``p_value[c]`` is the bootstrap p-value of the (c+1)-th largest eigenvalue of the standardised residual
    of the rank-one fit (index 0 is the spec's statistic s, the evidence for a second component).
    """
    from fusion_core.methods.registry import create

    if int(n_bootstrap) < 1:
        raise UserInputError(f"n_bootstrap must be ≥ 1, got {n_bootstrap}.")
    if not 0 < alpha < 1:
        raise UserInputError(f"alpha must be between 0 and 1, got {alpha}.")
    resp = as_responses(df_or_responses)
    if resp.n_classes != 2:
        raise UserInputError(
            f"cartel detection needs binary labels; these data have {resp.n_classes} classes "
            f"{list(resp.classes)[:6]}. Recode to one class versus the rest first."
        )
    pos = 1 if positive_label is None else int(resp.label_codes([positive_label], what="positive_label")[0])
    rng = np.random.default_rng(random_state)
    msgs: list[str] = []
    with warnings.catch_warnings(record=True) as caught, _one_blas_thread():
        warnings.simplefilter("always", AggregationWarning)
        report = _detect(
            resp,
            pos,
            rng,
            int(n_bootstrap),
            float(alpha),
            method,
            n_min,
            d_min,
            m_min,
            k_max,
            n_components,
            merge,
            create,
        )
    for w in caught:
        if issubclass(w.category, AggregationWarning):
            msgs.append(str(w.message))
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    report.warnings = list(dict.fromkeys(report.warnings + msgs))
    return report


def _detect(resp, pos, rng, n_bootstrap, alpha, method, n_min, d_min, m_min, k_max, n_components, merge, create):
    z = np.where(resp.label == pos, 1.0, -1.0)
    B = BinaryMatrix.from_codes(resp.worker, resp.item, z, resp.n_workers, resp.n_items)
    full = create(method).fit(resp)
    labels = full.labels_
    mom = pairwise_moments(B, n_min=n_min)
    core = spectral_core(B, mom, d_min=d_min)
    notes: list[str] = []
    if core.too_sparse:
        warnings.warn(f"cartel detection not applicable: {core.reason}.", SparseOverlapWarning, stacklevel=3)
        empty = pd.Index([], name="worker")
        return CartelReport(
            empty,
            np.array([]),
            np.zeros((n_bootstrap, 0)),
            np.array([]),
            pd.DataFrame(index=empty),
            [],
            pd.Series(dtype=object, name="membership"),
            pd.Series(dtype=float, name="cartel_score"),
            labels,
            labels.copy(),
            alpha,
            n_bootstrap,
            notes,
            method=method,
            positive_label=resp.classes[pos],
        )
    idx = np.flatnonzero(core.mask)
    an = _Analysis(resp, B, idx, n_bootstrap=n_bootstrap, alpha=alpha, n_min=n_min, rng=rng, pos=pos)
    m = len(idx)
    workers = pd.Index(resp.workers.take(idx), name="worker")
    n_comp = int(min(n_components, m))
    all_g = np.arange(m)
    first = an.test(all_g, n_extra=max(n_comp - 1, 1), n_spec=n_comp)

    # spectrum and loadings for display (§6.6)
    L = an.rank_two(all_g) if m >= 3 else np.zeros((m, 2))
    R = np.where(an.mom.valid, an.mom.Q, 0.0)
    np.fill_diagonal(R, (L**2).sum(axis=1))
    vals, vecs = np.linalg.eigh(R)
    vals, vecs = vals[::-1][:n_comp], vecs[:, ::-1][:, :n_comp]
    load = vecs * np.sqrt(np.maximum(vals, 0))[None, :]
    load[:, 0] = resolve_sign(load[:, 0], "sum")[0]
    loadings = pd.DataFrame(load, index=workers, columns=[f"v{k + 1}" for k in range(load.shape[1])])
    rho = pd.Series(np.sqrt((L**2).sum(axis=1)), index=workers, name="rho")

    final: list[np.ndarray] = []
    if first["p"][0] < alpha:
        queue, splits = [all_g], 0
        while queue:
            g = queue.pop(0)
            if len(g) < m_min or splits >= k_max:
                final.append(g)
                continue
            res = first if len(g) == m else an.test(g, sequential=True)
            if res["p"][0] >= alpha:
                final.append(g)
                continue
            main, subg, _ = _split(an, g)
            if len(main) < 3 or len(subg) < 3:
                final.append(g)
                continue
            splits += 1
            queue += [main, subg]
        # reassignment (step 6)
        if len(final) > 1:
            for _ in range(10):
                zmat = an.evidence(final)
                lab = np.argmax(zmat, axis=1)
                new = [np.flatnonzero(lab == k) for k in range(len(final))]
                new = [g for g in new if len(g)]
                if len(new) == len(final) and all(np.array_equal(a, b) for a, b in zip(new, final)):
                    break
                final = new
        # merge (step 7)
        while merge and len(final) > 1:
            best, best_p = None, -1.0
            for a in range(len(final)):
                for b in range(a + 1, len(final)):
                    union = np.sort(np.concatenate([final[a], final[b]]))
                    p = (first if len(union) == m else an.test(union, sequential=True))["p"][0]
                    if p >= alpha and p > best_p:
                        best, best_p = (a, b), p
            if best is None:
                break
            a, b = best
            merged = np.sort(np.concatenate([final[a], final[b]]))
            final = [g for k, g in enumerate(final) if k not in (a, b)] + [merged]
    if not final:
        final = [all_g]

    # main group: largest rank-one eigenvalue ‖v̂_G‖² (step 8)
    strength = [float(np.sum(an.rank_one(g) ** 2)) if len(g) >= 3 else 0.0 for g in final]
    main_k = int(np.argmax(strength))
    # undetermined (§6.5 step 2, applied to the final groups): the loading on the best-fitting group's
    # factor is within the noise floor, ρ_i² ≤ (2σ̄)²
    zfin, coef = an.evidence(final, return_coef=True)
    best_coef = coef[np.arange(m), np.argmax(zfin, axis=1)]
    valid = an.mom.valid
    sigbar2 = float(np.median(an.mom.sigma2[valid])) if valid.any() else 0.0
    undetermined = best_coef**2 <= 4 * sigbar2
    if undetermined.any():  # near-random annotators go with the main group for fusion
        final = [
            np.setdiff1d(g, np.flatnonzero(undetermined))
            if k != main_k
            else np.union1d(g, np.flatnonzero(undetermined))
            for k, g in enumerate(final)
        ]
    others = [g for k, g in enumerate(final) if k != main_k and len(g)]
    others.sort(key=lambda g: -len(g))
    membership = pd.Series("honest", index=workers, name="membership", dtype=object)
    groups: list[set] = []
    for c, g in enumerate(others, start=1):
        membership.iloc[g] = f"cartel {c}"
        groups.append(set(workers.take(g)))
    scores = pd.Series(0.0, index=workers, name="cartel_score")
    if others:
        ordered = [final[main_k]] + others
        zmat = an.evidence(ordered)
        zo = zmat[:, 1:].max(axis=1)
        tot = zo + zmat[:, 0]
        scores[:] = np.where(tot > 0, zo / np.where(tot > 0, tot, 1), 0.0)
        if len(final[main_k]) <= 0.5 * m:
            notes.append("no group holds more than half of the annotators: which group is 'honest' is unclear (P14).")
            warnings.warn(notes[-1], AggregationWarning, stacklevel=3)
        srt = sorted(strength, reverse=True)
        if len(srt) > 1 and srt[1] >= 0.8 * srt[0]:
            notes.append(
                "the two strongest groups have rank-one eigenvalues within 20%: the main-group choice is unreliable."
            )
            warnings.warn(notes[-1], AggregationWarning, stacklevel=3)

    if first["p"][0] < alpha and not groups:
        notes.append(
            f"a second covariance component is significant (p = {first['p'][0]:.3g}) but no separate group "
            "of annotators could be split off: the correlation is spread over the crowd (e.g. item "
            "difficulty or shared guidelines) rather than concentrated in a cartel."
        )
        warnings.warn(notes[-1], AggregationWarning, stacklevel=3)
    labels_wo = labels.copy()
    if groups:
        cartel_workers = set().union(*groups)
        keep = ~np.isin(resp.worker, resp.workers.get_indexer(list(cartel_workers)))
        sub = resp.subset(keep)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AggregationWarning)
            est = create(method).fit(sub)
        has = np.bincount(sub.item, minlength=resp.n_items) > 0
        labels_wo = labels.copy()
        labels_wo.iloc[np.flatnonzero(has)] = est.labels_.to_numpy()[has]
        if (~has).any():
            notes.append(
                f"{int((~has).sum())} items were labelled only by cartel members; they keep the full-crowd label."
            )
    return CartelReport(
        workers=workers,
        eigenvalues=np.asarray(first["spec"]),
        null_eigenvalues=np.asarray(first["spec_null"]),
        p_value=np.asarray(first["p"]),
        loadings=loadings,
        groups=groups,
        membership=membership,
        scores=scores,
        labels=labels,
        labels_without_cartel=labels_wo.rename("label"),
        alpha=alpha,
        n_bootstrap=n_bootstrap,
        warnings=notes,
        statistic=np.asarray(first["s"]),
        null_statistic=np.asarray(first["s_null"]),
        undetermined=workers[undetermined],
        rho=rho,
        method=method,
        positive_label=resp.classes[pos],
    )
