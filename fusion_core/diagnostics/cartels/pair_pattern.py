"""Moments on a fixed missingness pattern (spec ``spectral.md`` §6.4 step 2, [EXT, ours]).

Under the parametric bootstrap only the labels are redrawn; which annotator labelled which item is copied from
the data.  For large sparse crowds the moments of every replicate are therefore sums over the fixed list of
*candidate* pairs (those that share at least ``max(n_min, 2)`` items, the only pairs that can be valid): cost
Σ n_ij per replicate instead of m²·n for dense batched products.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fusion_core.diagnostics.cartels.eigen import (
    batched_power,
    cg_batched,
    eig_dtype,
    lanczos_top,
    solve_batched,
    top_eigvalsh,
)
from fusion_core.methods.numerics import jit_enabled, njit


def stable_argsort(key: np.ndarray, bound: int) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` for integer keys in [0, bound): numpy's stable sort is a radix sort for
    16-bit keys, so keys below 2³² take two such passes, low then high half (measured 0.42 s → 0.05 s on 2.4M
    pair keys); the same permutation."""
    if bound > 2**32 or len(key) < 50_000:
        return np.argsort(key, kind="stable")
    if bound <= 2**16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    first = np.argsort((key & 0xFFFF).astype(np.uint16), kind="stable")
    return first[np.argsort((key[first] >> 16).astype(np.uint16), kind="stable")]


def _overlap_entries(worker: np.ndarray, item: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of entries (ea, eb) on the same item with ``worker[ea] < worker[eb]``."""
    if len(worker) < 2 or np.all(worker[1:] >= worker[:-1]):  # by annotator already: a stable sort by item
        order = stable_argsort(item, n)
    else:
        order = np.lexsort((worker, item))  # by item, then annotator
    it = item[order]
    ea_parts, eb_parts = [], []
    deg_max = int(np.bincount(item, minlength=n).max()) if len(item) else 0
    for k in range(1, deg_max):  # offsets within an item (≤ the largest item degree), not responses
        same = np.flatnonzero(it[k:] == it[:-k])
        ea_parts.append(order[same])
        eb_parts.append(order[same + k])
    ea = np.concatenate(ea_parts) if ea_parts else np.zeros(0, dtype=np.int64)
    eb = np.concatenate(eb_parts) if eb_parts else np.zeros(0, dtype=np.int64)
    return ea, eb


DENSE_PAIR_SHARE = 0.25  # candidate pairs at least this share of all pairs: dense per-replicate matrices

#: per replicate: Σ_l z_il (b × m) and S1_ij, S1_ji, S12_ij on the candidate pairs (b × P)
Sums = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class PairPattern:
    """The fixed missingness pattern of a group under the parametric bootstrap.

    Observed entries ``(worker[e], item[e])``; for every candidate pair i < j the entries of i and of j on their
    shared items, sorted by pair, so that ``S1_ij = Σ z_il``, ``S1_ji = Σ z_jl`` and ``S12_ij = Σ z_il z_jl`` over
    the overlap are segment sums (``np.add.reduceat``) of gathered labels.
    """

    def __init__(self, worker: np.ndarray, item: np.ndarray, m: int, n: int, n_min: int):
        self.m, self.n, self.nnz = m, n, len(worker)
        ea, eb = _overlap_entries(worker, item, n)
        key = worker[ea] * m + worker[eb]  # worker[ea] < worker[eb] (sorted within the item)
        counts = np.bincount(key, minlength=m * m)
        self.N = (counts + counts.reshape(m, m).T.ravel()).reshape(m, m).astype(float)
        self.N[np.arange(m), np.arange(m)] = np.bincount(worker, minlength=m)
        cand = counts[key] >= max(n_min, 2)
        ea, eb, key = ea[cand], eb[cand], key[cand]
        srt = stable_argsort(key, m * m)
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
        # most pairs are candidates (e.g. 500 annotators, 5 per item on 200k items: 96 %): each replicate's
        # matrices are built dense (m² floats, one scatter) and applied by batched matmul, ~30× faster than the
        # block-diagonal CSR product, and LAPACK gets them without a second scatter
        self.dense = DENSE_PAIR_SHARE * m * (m - 1) / 2 <= P
        self.flat_ab, self.flat_ba = self.a * m + self.b, self.b * m + self.a

    @property
    def work(self) -> int:
        """Gathered entries per replicate."""
        return len(self.ea) + self.nnz

    def sums(self, zs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per replicate (rows of ``zs``, b × entries): Σ_l z_il (b × m), and on the candidate pairs
        S1_ij, S1_ji, S12_ij (b × P)."""
        if jit_enabled():
            return self.sums_t(np.ascontiguousarray(zs.T, dtype=np.int8))
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

    def sums_t(self, zt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`sums` of labels stored entry-major (``zt``: entries × b, int8 ±1; compiled kernel): each pair
        entry's labels of all b replicates share a cache line, so the gathers cost one miss per entry instead of
        one per entry and replicate (the same integer sums)."""
        nb_, npairs = zt.shape[1], len(self.starts)
        diag = np.empty((nb_, self.m))
        s1a, s1b, s12 = (np.empty((nb_, npairs)) for _ in range(3))
        _pair_sums_t(zt, self.worker, self.ea, self.eb, self.starts, diag, s1a, s1b, s12)
        return diag, s1a, s1b, s12

    def block(self, vals: np.ndarray) -> sp.csr_matrix:
        """Block-diagonal (b·m × b·m) symmetric matrix with the pair values ``vals`` (b × P) of each replicate."""
        nb, m = vals.shape[0], self.m
        nnz = len(self.indices)
        indptr = (self.indptr[:-1][None, :] + nnz * np.arange(nb)[:, None]).ravel()
        indptr = np.r_[indptr, nb * nnz]
        indices = (self.indices[None, :] + m * np.arange(nb)[:, None]).ravel()
        return sp.csr_matrix((vals[:, self.src].ravel(), indices, indptr), shape=(nb * m, nb * m))

    def scatter(
        self, vals: np.ndarray, diag: np.ndarray | None = None, dtype: type = np.float64, fill: np.ndarray | None = None
    ) -> np.ndarray:
        """Dense symmetric matrices (b × m × m) with the pair values ``vals`` (b × P), ``diag`` on the diagonal
        (else 0) and 0 on the other pairs (or ``fill``'s values there, b × m × m); one flat scatter per replicate."""
        nb, m = vals.shape[0], self.m
        M: np.ndarray = np.zeros((nb, m * m), dtype=dtype) if fill is None else fill.reshape(nb, m * m).astype(dtype)
        for r in range(nb):  # loop over the replicates of a chunk
            M[r, self.flat_ab] = vals[r]
            M[r, self.flat_ba] = vals[r]
            if diag is not None:
                M[r, :: m + 1] = diag[r]
        return M.reshape(nb, m, m)

    def _dense_eigvals(self, e: np.ndarray, k: int) -> np.ndarray:
        """The k largest eigenvalues (descending) of the symmetric matrices with pair values ``e`` (b × P), zero
        diagonal (built in single precision where :func:`.eigen.top_eigvalsh` works in it)."""
        return top_eigvalsh(self.scatter(e, dtype=eig_dtype(self.m, k)), k)

    def _pair_moments(self, zs: np.ndarray | Sums) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(covariances qz, valid, σ̂², 1 − μ̂²) on the candidate pairs of each replicate (b × P, base b × m), from
        labels (b × entries) or their :meth:`sums`; the pair analogue of
        :func:`~fusion_core.diagnostics.cartels.statistic.batch_moments`."""
        diag, s1a, s1b, s12 = self.sums(zs) if isinstance(zs, np.ndarray) else zs
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
        return np.where(valid, q, 0.0), valid, sigma2, base

    def _diagonal(
        self, qz: np.ndarray, valid: np.ndarray, sigma2: np.ndarray, base: np.ndarray, weights: str
    ) -> np.ndarray:
        """Method A per replicate on the pair list (see ``statistic.batch_diagonal``): r, b × m."""
        nb, m = qz.shape[0], self.m
        a, b = self.a, self.b
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
        dd = np.where(deg > 0, deg, 1.0).reshape(nb, m)  # isolated: t_i = 0
        A = self.scatter(W, dd)
        t = cg_batched(lambda x: np.matmul(A, x[:, :, None])[:, :, 0], c) if self.dense else None
        if t is None:  # sparse pattern, or CG did not converge: LAPACK
            t = solve_batched(A, c)
        return np.minimum(np.exp(2 * t), base)

    def stats(
        self,
        zs: np.ndarray | Sums,
        n_min: int,
        n_extra: int,
        x0: np.ndarray,
        *,
        n_spec: int = 0,
        weights: str = "delta",
    ) -> tuple[np.ndarray, np.ndarray]:
        """:func:`~fusion_core.diagnostics.cartels.statistic.stats_from_products` computed on the candidate pairs
        only (same statistic: the other pairs are never valid), with the hard-impute power iteration as sparse
        block-diagonal products; ``zs``: labels (b × entries) or their :meth:`sums`."""
        nb, m = (zs if isinstance(zs, np.ndarray) else zs[0]).shape[0], self.m
        a, b = self.a, self.b
        qz, valid, sigma2, base = self._pair_moments(zs)  # n_min is built into the candidate pairs
        r = self._diagonal(qz, valid, sigma2, base, weights)
        any_miss = bool((valid.sum(axis=1) < m * (m - 1) // 2).any())
        if self.dense:
            Qd = self.scatter(qz)
            Vd = self.scatter(valid.astype(float)) if any_miss else None

            def product(x: np.ndarray, M: np.ndarray) -> np.ndarray:
                return np.matmul(M, x[:, :, None])[:, :, 0]
        else:
            Qd, Vd = self.block(qz), (self.block(valid.astype(float)) if any_miss else None)

            def product(x: np.ndarray, M: np.ndarray) -> np.ndarray:
                return (M @ x.ravel()).reshape(nb, m)

        def matvec(x: np.ndarray, lam: np.ndarray) -> np.ndarray:
            # the dense path's product on the pair pattern; missing pairs imputed by λ x xᵀ
            y = product(x, Qd) + r * x
            if Vd is not None:  # Σ_{j missing} x_j² = Σ_{j≠i} x_j² − Σ_{j valid} x_j²
                x2 = x * x
                y += lam[:, None] * x * ((x2.sum(axis=1, keepdims=True) - x2) - product(x2, Vd))
            return y

        x, lam = batched_power(matvec, x0, nb, m)
        v = np.sqrt(np.maximum(lam, 0))[:, None] * x
        e = np.where(valid, (qz - v[:, a] * v[:, b]) / np.sqrt(np.where(valid, sigma2, 1.0)), 0.0)
        s = None
        if n_extra == 1 and m >= 100:  # the statistic alone: Lanczos on the residual
            if self.dense:
                Ed = self.scatter(e)
                s, ok = lanczos_top(lambda q: product(q, Ed), nb, m)
                if not ok.all():
                    s[~ok] = top_eigvalsh(Ed[~ok], 1)
            else:
                s, ok = lanczos_top(self.block(e), nb, m)
                if not ok.all():
                    s[~ok] = self._dense_eigvals(e[~ok], 1)
        if s is None:
            s = self._dense_eigvals(e, n_extra)
        spec = np.zeros((nb, 0))
        if n_spec:  # completed R: pairs never valid (or not candidates) imputed by λ x xᵀ
            f = np.where(valid, qz, lam[:, None] * x[:, a] * x[:, b])
            outer = None if len(a) == m * (m - 1) // 2 else lam[:, None, None] * x[:, :, None] * x[:, None, :]
            spec = top_eigvalsh(self.scatter(f, r, eig_dtype(m, n_spec), outer), n_spec)
        return s, spec


@njit
def _pair_sums_t(  # noqa: PLR0917 - a compiled kernel takes its arrays positionally
    zt: np.ndarray,
    worker: np.ndarray,
    ea: np.ndarray,
    eb: np.ndarray,
    starts: np.ndarray,
    diag: np.ndarray,
    s1a: np.ndarray,
    s1b: np.ndarray,
    s12: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """S1_ij, S1_ji, S12_ij (b × P) of entry-major labels (entries × b, int8), all replicates in one pass, and the
    per-annotator sums Σ_l z_il (b × m); integer accumulators, so the sums are exact."""
    nb = zt.shape[1]
    npairs, n_ent = starts.shape[0], ea.shape[0]
    dg = np.zeros((diag.shape[1], nb), dtype=np.int64)
    for e in range(zt.shape[0]):
        w = worker[e]
        for r in range(nb):
            dg[w, r] += zt[e, r]
    for w in range(diag.shape[1]):
        for r in range(nb):
            diag[r, w] = dg[w, r]
    sa = np.zeros(nb, dtype=np.int64)
    sb = np.zeros(nb, dtype=np.int64)
    sab = np.zeros(nb, dtype=np.int64)
    for p in range(npairs):
        hi = starts[p + 1] if p + 1 < npairs else n_ent
        sa[:] = 0
        sb[:] = 0
        sab[:] = 0
        for t in range(starts[p], hi):
            a, b = ea[t], eb[t]
            for r in range(nb):
                x = zt[a, r]
                y = zt[b, r]
                sa[r] += x
                sb[r] += y
                sab[r] += x * y
        for r in range(nb):
            s1a[r, p] = sa[r]
            s1b[r, p] = sb[r]
            s12[r, p] = sab[r]
