"""Moments on a fixed missingness pattern (spec ``spectral.md`` §6.4 step 2, [EXT, ours]).

Under the parametric bootstrap only the labels are redrawn; which annotator labelled which item is copied from
the data.  For large sparse crowds the moments of every replicate are therefore sums over the fixed list of
*candidate* pairs (those that share at least ``max(n_min, 2)`` items, the only pairs that can be valid): cost
Σ n_ij per replicate instead of m²·n for dense batched products.
"""

from __future__ import annotations

from functools import cached_property

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
from fusion_core.diagnostics.cartels.kernels import (
    completed_symmetric,
    dense_symmetric,
    pack_labels,
    pair_moments_delta,
    pair_sums_packed,
    residual_symmetric,
)
from fusion_core.diagnostics.cartels.statistic import method_a_weights
from fusion_core.methods.numerics import jit_enabled, stable_argsort


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
            return self.sums_packed(pack_labels(zs), zs.shape[0])
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

    def sums_packed(self, xp: np.ndarray, nb: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`sums` of ``nb`` replicates' labels bit-packed entry-major (``xp``: entries × packed width bytes,
        :func:`.kernels.pack_labels`; compiled kernel): the same integer sums, 8 replicates per word."""
        npairs = len(self.starts)
        diag = np.empty((nb, self.m))
        s1a, s1b, s12 = (np.empty((nb, npairs)) for _ in range(3))
        words = xp.view(np.uint64)
        pair_sums_packed(words, nb, self.worker, self.ea, self.eb, self.starts, diag, s1a, s1b, s12)
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
        self,
        vals: np.ndarray,
        diag: np.ndarray | None = None,
        dtype: type = np.float64,
        outer: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """Dense symmetric matrices (b × m × m) with the pair values ``vals`` (b × P) of each replicate, ``diag``
        on the diagonal (else 0) and 0 on the other pairs (or λ_r x_r x_rᵀ there, ``outer`` = (λ, x): b, b × m)."""
        nb, m = vals.shape[0], self.m
        if jit_enabled():  # one compiled pass (numpy's fancy-index scatter took 0.8 ms per replicate and matrix)
            M: np.ndarray = np.empty((nb, m, m), dtype=dtype)
            lam, x = outer if outer is not None else (np.zeros(0), np.zeros((0, 0)))
            dg = np.zeros((0, 0)) if diag is None else diag
            dense_symmetric(vals, self.a, self.b, dg, lam, x, M)
            return M
        if outer is None:
            F: np.ndarray = np.zeros((nb, m * m), dtype=dtype)
        else:
            lam, x = outer
            F = (lam[:, None, None] * x[:, :, None] * x[:, None, :]).reshape(nb, m * m).astype(dtype)
        for r in range(nb):  # loop over the replicates of a chunk
            F[r, self.flat_ab] = vals[r]
            F[r, self.flat_ba] = vals[r]
            if diag is not None:
                F[r, :: m + 1] = diag[r]
        return F.reshape(nb, m, m)

    @cached_property
    def ind(self) -> sp.csr_matrix:
        """Entries × annotators indicator (the numpy path's per-annotator sums)."""
        ne = len(self.worker)
        return sp.csr_matrix((np.ones(ne), (np.arange(ne), self.worker)), shape=(ne, self.m))

    @cached_property
    def candidates(self) -> np.ndarray:
        """The candidate pairs as a dense symmetric 0/1 matrix (m × m, zero diagonal)."""
        return self.scatter(np.ones((1, len(self.a))))[0]

    def _dense_eigvals(self, e: np.ndarray, k: int) -> np.ndarray:
        """The k largest eigenvalues (descending) of the symmetric matrices with pair values ``e`` (b × P), zero
        diagonal (built in single precision where :func:`.eigen.top_eigvalsh` works in it)."""
        return top_eigvalsh(self.scatter(e, dtype=eig_dtype(self.m, k)), k)

    def _residuals(self, qz: np.ndarray, valid: np.ndarray, sigma2: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Standardised residuals (q̂ − v_a v_b)/σ̂ on the valid candidate pairs, 0 on the others (b × P)."""
        a, b = self.a, self.b
        return np.where(valid, (qz - v[:, a] * v[:, b]) / np.sqrt(np.where(valid, sigma2, 1.0)), 0.0)

    def _residual_matrices(
        self, qz: np.ndarray, valid: np.ndarray, sigma2: np.ndarray, v: np.ndarray, e: np.ndarray | None, *, dtype: type
    ) -> np.ndarray:
        """The residuals as dense symmetric matrices in ``dtype`` (from ``e`` if given, else in one compiled pass)."""
        if e is not None:
            return self.scatter(e, dtype=dtype)
        out: np.ndarray = np.empty((len(qz), self.m, self.m), dtype=dtype)
        residual_symmetric(qz, valid, sigma2, v, self.a, self.b, out)
        return out

    def _pair_moments(self, zs: np.ndarray | Sums, weights: str = "delta") -> tuple[np.ndarray, ...]:
        """(covariances qz, valid, σ̂², 1 − μ̂², Method A weights W) on the candidate pairs of each replicate (b × P,
        base b × m) and the per-annotator sums deg = Σ_j W_ij, c = Σ_j W_ij log|q̂_ij| (b × m), from labels
        (b × entries) or their :meth:`sums`; the pair analogue of
        :func:`~fusion_core.diagnostics.cartels.statistic.batch_moments` and ``batch_diagonal``'s weights."""
        diag, s1a, s1b, s12 = self.sums(zs) if isinstance(zs, np.ndarray) else zs
        a, b = self.a, self.b
        n_i = np.diagonal(self.N)
        Np = self.N[a, b]
        nb, m = diag.shape
        if jit_enabled() and weights == "delta":  # one compiled pass, the same operations
            qz, sigma2, W = (np.empty_like(s1a) for _ in range(3))
            valid = np.empty(s1a.shape, dtype=bool)
            base, deg, c = (np.empty((nb, m)) for _ in range(3))
            pair_moments_delta(diag, s1a, s1b, s12, n_i, Np, a, b, qz, valid, sigma2, base, W, deg, c)
            return qz, valid, sigma2, base, W, deg, c
        mu = diag / np.maximum(n_i, 1)
        q = (s12 - s1a * s1b / Np) / (Np - 1)
        const = np.abs(mu) >= 1 - 1e-12
        valid = (np.abs(s1a) < Np - 1e-9) & (np.abs(s1b) < Np - 1e-9) & ~const[:, a] & ~const[:, b]
        muc = np.clip(mu, -(1 - 1e-6), 1 - 1e-6)
        base = 1 - muc**2
        sigma2 = base[:, a] * base[:, b] / (Np - 1)
        qz = np.where(valid, q, 0.0)
        W, Y = method_a_weights(qz, valid, sigma2, weights)  # σ̂² finite: candidate pairs share ≥ 2 items
        rep = np.arange(nb)[:, None] * m
        ia, ib = (rep + a).ravel(), (rep + b).ravel()
        sum_w = np.bincount(ia, W.ravel(), nb * m) + np.bincount(ib, W.ravel(), nb * m)
        sum_wy = np.bincount(ia, (W * Y).ravel(), nb * m) + np.bincount(ib, (W * Y).ravel(), nb * m)
        return qz, valid, sigma2, base, W, sum_w.reshape(nb, m), sum_wy.reshape(nb, m)

    def _diagonal(self, W: np.ndarray, deg: np.ndarray, c: np.ndarray, base: np.ndarray) -> np.ndarray:
        """Method A per replicate on the pair list (see ``statistic.batch_diagonal``) from the weights and sums of
        :meth:`_pair_moments`: r, b × m."""
        dd = np.where(deg > 0, deg, 1.0)  # isolated: t_i = 0
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
        qz, valid, sigma2, base, W, deg, c = self._pair_moments(zs, weights)  # n_min is in the candidate pairs
        r = self._diagonal(W, deg, c, base)
        any_miss = bool((valid.sum(axis=1) < m * (m - 1) // 2).any())
        if self.dense:
            Qd = self.scatter(qz)

            def product(x: np.ndarray, M: np.ndarray) -> np.ndarray:
                return np.matmul(M, x[:, :, None])[:, :, 0]

            def valid_sums(x2: np.ndarray) -> np.ndarray:
                # Σ_{j valid} x_j²: over the fixed candidate pairs (one product for all replicates), less the few
                # candidate pairs a replicate found invalid (constant labels on the overlap)
                out = x2 @ self.candidates
                if len(bad_r):
                    np.subtract.at(out, (bad_r, a[bad_p]), x2[bad_r, b[bad_p]])
                    np.subtract.at(out, (bad_r, b[bad_p]), x2[bad_r, a[bad_p]])
                return out

            bad_r, bad_p = np.nonzero(~valid)
            Vd = valid_sums if any_miss else None
        else:
            Qd, Vb = self.block(qz), (self.block(valid.astype(float)) if any_miss else None)

            def product(x: np.ndarray, M: np.ndarray) -> np.ndarray:
                return (M @ x.ravel()).reshape(nb, m)

            Vd = (lambda x2: product(x2, Vb)) if Vb is not None else None

        def matvec(x: np.ndarray, lam: np.ndarray) -> np.ndarray:
            # the dense path's product on the pair pattern; missing pairs imputed by λ x xᵀ
            y = product(x, Qd) + r * x
            if Vd is not None:  # Σ_{j missing} x_j² = Σ_{j≠i} x_j² − Σ_{j valid} x_j²
                x2 = x * x
                y += lam[:, None] * x * ((x2.sum(axis=1, keepdims=True) - x2) - Vd(x2))
            return y

        x, lam = batched_power(matvec, x0, nb, m)
        v = np.sqrt(np.maximum(lam, 0))[:, None] * x
        jit = jit_enabled()
        e = None if jit and self.dense else self._residuals(qz, valid, sigma2, v)
        s = None
        if n_extra == 1 and m >= 100:  # the statistic alone: Lanczos on the residual
            if self.dense:
                Ed = self._residual_matrices(qz, valid, sigma2, v, e, dtype=np.float64)
                s, ok = lanczos_top(lambda q: product(q, Ed), nb, m)
                if not ok.all():
                    s[~ok] = top_eigvalsh(Ed[~ok], 1)
            else:
                assert e is not None
                s, ok = lanczos_top(self.block(e), nb, m)
                if not ok.all():
                    s[~ok] = self._dense_eigvals(e[~ok], 1)
        if s is None:
            Ed = self._residual_matrices(qz, valid, sigma2, v, e, dtype=eig_dtype(m, n_extra))
            s = top_eigvalsh(Ed, n_extra)
        spec = np.zeros((nb, 0))
        if n_spec:  # completed R: pairs never valid (or not candidates) imputed by λ x xᵀ
            dt = eig_dtype(m, n_spec)
            if jit:
                Rf: np.ndarray = np.empty((nb, m, m), dtype=dt)
                completed_symmetric(qz, valid, lam, x, r, a, b, Rf)
            else:
                f = np.where(valid, qz, lam[:, None] * x[:, a] * x[:, b])
                Rf = self.scatter(f, r, dt, None if len(a) == m * (m - 1) // 2 else (lam, x))
            spec = top_eigvalsh(Rf, n_spec)
        return s, spec
