"""The multi-label noise model's EM steps, for the shared driver (:func:`fusion_core.methods.em.run_em`).

Spec ``multilabel.md`` (Streich 2010, ETH Diss. 19229, Ch. 9).  Each item has a latent label set L in an admissible
family 𝕃 (rows of ``Z``); annotator j reports label c with P(x = 1 | c ∈ L) = 1 − ε1 and P(x = 1 | c ∉ L) = ε0 per
noise cell (granularity §6).  E-step (§5.1) over sets with the scatter-sum form log p(x_i | L) = B_i + Σ_c z_Lc Δ_ic
(§4.3), in item chunks; closed-form MAP M-step (§5.2–§5.4): Beta(1 + α, 1 + α) on every noise rate, Dirichlet
(1 + κ) on the set prior; set / uniform / product prior (§4.4); when the model decouples (all subsets, product
prior, per-label cells) the exact factorised "binary relevance" path (§4.5) works per (item, label).  For
deterministic annealing (§7, the driver's ``anneal``) the E-step is tempered and also returns the log-joint, and the
model reports ``flat`` parameters and its informativeness J_max = max |1 − ε0 − ε1| (§7.3).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from fusion_core.data.multilabel import MultiLabelResponses
from fusion_core.errors import UserInputError
from fusion_core.methods.em import EStep
from fusion_core.methods.numerics import log_normalize

FLOOR = 1e-6
#: numbers (sets × items) per E-step chunk: ~1 MB of float64, cache-resident (see ``MultiLabelModel._chunks``)
CHUNK_NUMBERS = 1 << 17
GRANULARITIES = ("global", "label", "annotator", "annotator_label", "item")
GoldSets = tuple[np.ndarray, np.ndarray]  # (item codes, set index per item) or (item codes, bits items × labels)


class NoiseState(NamedTuple):
    """Model parameters: noise rates per cell, and the log prior per admissible set (enumerated) or the per-label
    prior ρ (factorised / product prior)."""

    eps0: np.ndarray
    eps1: np.ndarray
    log_prior: np.ndarray | None
    rho: np.ndarray | None


class SetStats(NamedTuple):
    """M-step statistics: marginals m (items × labels) and Σ_i γ_iL per set (None when factorised)."""

    m: np.ndarray
    gsum: np.ndarray | None


def noise_cells(data: MultiLabelResponses, granularity: str) -> tuple[np.ndarray, int]:
    """Noise cell of every (response, label) (R × C) and the number of cells (spec §6)."""
    R, C = data.X.shape
    if granularity == "global":
        return np.zeros((R, C), np.int64), 1
    if granularity == "label":
        return np.broadcast_to(np.arange(C), (R, C)).copy(), C
    if granularity == "annotator":
        return np.repeat(data.worker[:, None], C, axis=1), data.n_workers
    if granularity == "annotator_label":
        return data.worker[:, None] * C + np.arange(C)[None, :], data.n_workers * C
    if granularity == "item":
        return np.repeat(data.item[:, None], C, axis=1), data.n_items
    raise UserInputError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}.")


class MultiLabelModel:
    """Sufficient statistics and E/M steps of one fit (everything vectorised over responses; see the module
    docstring).  ``gold``: clamped items as (item codes, set index) — or (item codes, label bits) when factorised;
    ``keep_joint``: the E-step also returns the log-joint per (item, set), which annealing needs."""

    def __init__(
        self,
        data: MultiLabelResponses,
        *,
        granularity: str,
        noise: str,
        Z: np.ndarray | None,
        prior: str,
        alpha: float,
        kappa: float,
        factorised: bool,
        gold: GoldSets | None = None,
        keep_joint: bool = False,
        chunk: int = 20000,
    ):
        self.d = data
        R, C = data.X.shape
        self.C = C
        self.noise, self.prior, self.granularity = noise, prior, granularity
        self.alpha, self.kappa = float(alpha), float(kappa)
        self.Z = Z
        self.Zf = None if Z is None else Z.astype(float)
        self.factorised = factorised
        self.chunk = int(chunk)
        self.keep_joint = keep_joint
        self.gold_set = self.gold_bits = None
        self.gold_items = None if gold is None else gold[0]
        if gold is not None and factorised:
            self.gold_bits = gold[1]
        elif gold is not None:
            self.gold_set = np.full(data.n_items, -1, np.int64)
            self.gold_set[gold[0]] = gold[1]
        self.inc = sp.csr_matrix((np.ones(R), (data.item, np.arange(R))), shape=(data.n_items, R))
        self.cell: np.ndarray | None = None
        # fast path (closed world, worker-based cells): every parameter is a workers × labels table, statistics
        # come from the item × worker count matrix and the present bits only — O(R + nnz(X)) per iteration
        self.fast = data.O is None and granularity != "item"
        if self.fast:
            self._fast_statistics()
        else:
            self._cell_statistics()

    def _fast_statistics(self) -> None:
        d, C = self.d, self.C
        J, N, R = d.n_workers, d.n_items, d.n_responses
        jj, cc = np.divmod(np.arange(J * C), C)
        self.cell_of_wc, self.ncell = {
            "global": (np.zeros(J * C, np.int64), 1),
            "label": (cc, C),
            "annotator": (jj, J),
            "annotator_label": (np.arange(J * C), J * C),
        }[self.granularity]
        nz_r, nz_c = np.nonzero(d.X)
        self.nz_wc = d.worker[nz_r] * C + nz_c
        self.nz_ic = d.item[nz_r] * C + nz_c
        self.nz_item = d.item[nz_r]
        self.IW = sp.csr_matrix((np.ones(R), (d.item, d.worker)), shape=(N, J))
        self.IW.sum_duplicates()
        self.IWt = self.IW.T.tocsr()
        n_w = np.bincount(d.worker, minlength=J).astype(float)
        per_wc = np.bincount(self.nz_wc, minlength=J * C).astype(float)
        self.Sx = np.bincount(self.cell_of_wc, weights=per_wc, minlength=self.ncell)
        self.So = np.bincount(self.cell_of_wc, weights=np.repeat(n_w, C), minlength=self.ncell)
        self.cell = None

    def _cell_statistics(self) -> None:
        d = self.d
        cell, ncell = noise_cells(d, self.granularity)
        self.cell, self.ncell = cell, ncell
        if d.O is None:
            self.Sx = np.bincount(cell.ravel(), weights=d.X.ravel().astype(float), minlength=ncell)
            self.So = np.bincount(cell.ravel(), minlength=ncell).astype(float)
        else:
            self.Sx = np.bincount(cell.ravel(), weights=(d.X & d.O).ravel().astype(float), minlength=ncell)
            self.So = np.bincount(cell.ravel(), weights=d.O.ravel().astype(float), minlength=ncell)

    # ---------------------------------------------------------------- M-step (§5.2–§5.4)
    def m_noise(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Noise rates per cell from marginals ``m``: (ε0, ε1), MAP with α pseudo-counts, floored."""
        if self.fast:
            Sm_wc = np.asarray(self.IWt @ m).ravel()  # Σ_r m[i_r, c] per (worker, label)
            Smx_wc = np.bincount(self.nz_wc, weights=m.ravel()[self.nz_ic], minlength=len(self.cell_of_wc))
            Sm = np.bincount(self.cell_of_wc, weights=Sm_wc, minlength=self.ncell)
            Smx = np.bincount(self.cell_of_wc, weights=Smx_wc, minlength=self.ncell)
        else:
            assert self.cell is not None
            mr = m[self.d.item]
            if self.d.O is not None:
                mr = mr * self.d.O
            Sm = np.bincount(self.cell.ravel(), weights=mr.ravel(), minlength=self.ncell)
            Smx = np.bincount(self.cell.ravel(), weights=(mr * self.d.X).ravel(), minlength=self.ncell)
        n11, n10, n01 = Smx, Sm - Smx, self.Sx - Smx
        n00 = self.So - Sm - self.Sx + Smx
        a = self.alpha
        if self.noise == "symmetric":
            e = np.clip((n10 + n01 + a) / (self.So + 2 * a), FLOOR, 1 - FLOOR)
            return e, e.copy()
        e1 = (n10 + a) / (n11 + n10 + 2 * a)
        e0 = (n01 + a) / (n01 + n00 + 2 * a)
        if self.noise == "mixture":  # §5.3: project onto ε0 + ε1 ≤ 1 (pure guesser on the boundary)
            over = e0 + e1 > 1
            if over.any():
                r = (n11 + n01 + 2 * a) / (self.So + 4 * a)
                e0 = np.where(over, r, e0)
                e1 = np.where(over, 1 - r, e1)
        return np.clip(e0, FLOOR, 1 - FLOOR), np.clip(e1, FLOOR, 1 - FLOOR)

    def m_prior(self, gamma_sum: np.ndarray | None, m: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Set prior (log, per admissible set) or per-label prior ρ (factorised / product prior)."""
        if self.factorised or self.prior == "product":
            rho = np.clip(m.mean(axis=0), FLOOR, 1 - FLOOR)
            if self.factorised:
                return None, rho
            assert self.Z is not None
            return self.Z @ np.log(rho) + (~self.Z) @ np.log1p(-rho), rho
        assert self.Z is not None
        S = self.Z.shape[0]
        if self.prior == "uniform":
            return np.full(S, -np.log(S)), None
        assert gamma_sum is not None
        pi = (gamma_sum + self.kappa) / (self.d.n_items + self.kappa * S)
        return np.log(pi), None

    def m_step(self, stats: SetStats) -> NoiseState:
        e0, e1 = self.m_noise(stats.m)
        lp, rho = self.m_prior(stats.gsum, stats.m)
        return NoiseState(e0, e1, lp, rho)

    def penalty(self, st: NoiseState) -> float:
        """Log prior terms of the MAP objective (Beta(1+α, 1+α) on noise, Dirichlet(1+κ) on the set prior)."""
        a = self.alpha
        if self.noise == "symmetric":
            pen = a * (np.log(st.eps0) + np.log1p(-st.eps0)).sum()
        else:
            pen = a * (np.log(st.eps0) + np.log1p(-st.eps0) + np.log(st.eps1) + np.log1p(-st.eps1)).sum()
        if st.log_prior is not None and self.prior == "set" and not self.factorised:
            pen += self.kappa * st.log_prior.sum()
        return float(pen)

    def initial_state(self) -> NoiseState:
        """§5.5: m_ic = vote share of label c on item i (observed bits), one noise M-step, uniform prior."""
        d = self.d
        if d.O is None:
            num = (
                np.bincount(self.nz_ic, minlength=d.n_items * self.C).reshape(d.n_items, self.C).astype(float)
                if self.fast
                else np.asarray(self.inc @ d.X.astype(float))
            )
            den = np.bincount(d.item, minlength=d.n_items).astype(float)[:, None]
        else:
            obs = d.O.astype(float)
            num = np.asarray(self.inc @ (d.X * obs))
            den = np.asarray(self.inc @ obs)
        m = np.where(den > 0, num / np.where(den > 0, den, 1), 0.5)
        e0, e1 = self.m_noise(m)
        if self.factorised or self.prior == "product":  # the product prior's M-step from the vote shares
            lp, rho = self.m_prior(None, m)
            return NoiseState(e0, e1, lp, rho)
        assert self.Z is not None
        S = self.Z.shape[0]
        return NoiseState(e0, e1, np.full(S, -np.log(S)), None)

    # ---------------------------------------------------------------- E-step (§4.3, §5.1)
    def scatter(
        self,
        st: NoiseState,
        data: MultiLabelResponses | None = None,
        cell: np.ndarray | None = None,
        inc: sp.csr_matrix | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """B (items) and Δ (items × C) by scatter-sums over observed bits (of ``data``, default the training
        responses, with its noise ``cell`` per bit and item incidence ``inc``)."""
        if data is None and self.fast:
            return self._scatter_fast(st)
        d = data or self.d
        if cell is None:
            cell = self.cell if self.cell is not None else noise_cells(self.d, self.granularity)[0]
        inc = self.inc if inc is None else inc
        le0, l1e0 = np.log(st.eps0), np.log1p(-st.eps0)
        le1, l1e1 = np.log(st.eps1), np.log1p(-st.eps1)
        X = d.X
        b = np.where(X, le0[cell], l1e0[cell])
        dl = np.where(X, (l1e1 - le0)[cell], (le1 - l1e0)[cell])
        if d.O is not None:
            b = b * d.O
            dl = dl * d.O
        return np.asarray(inc @ b.sum(axis=1)).ravel(), np.asarray(inc @ dl)

    def _scatter_fast(self, st: NoiseState) -> tuple[np.ndarray, np.ndarray]:
        d = self.d
        J, C, N = d.n_workers, self.C, d.n_items
        e0 = st.eps0[self.cell_of_wc].reshape(J, C)
        e1 = st.eps1[self.cell_of_wc].reshape(J, C)
        l0_abs, l0_pres = np.log1p(-e0), np.log(e0)  # x = 0 / x = 1 terms of B (label absent from L)
        d_abs = np.log(e1) - l0_abs  # x = 0 term of Δ
        d_pres = np.log1p(-e1) - l0_pres  # x = 1 term of Δ
        B = self.IW @ l0_abs.sum(axis=1)
        B += np.bincount(self.nz_item, weights=(l0_pres - l0_abs).ravel()[self.nz_wc], minlength=N)
        D = np.asarray(self.IW @ d_abs)
        D += np.bincount(self.nz_ic, weights=(d_pres - d_abs).ravel()[self.nz_wc], minlength=N * C).reshape(N, C)
        return np.asarray(B).ravel(), D

    def e_step(self, state: NoiseState, temperature: float = 1.0) -> EStep:
        """Posterior marginals (tempered when T ≠ 1), the MAP objective at T = 1 and the M-step statistics."""
        if self.factorised:
            m, ll, joint = self._e_factorised(state, temperature)
            gsum = None
        else:
            m, gsum, ll, joint = self._e_enumerated(state, temperature)
        return EStep(posterior=m, log_likelihood=ll + self.penalty(state), stats=SetStats(m, gsum), log_joint=joint)

    def _e_factorised(self, st: NoiseState, T: float) -> tuple[np.ndarray, float, np.ndarray | None]:
        """Per (item, label): P(c ∈ L_i) from log(1 − ρ_c) vs log ρ_c + Δ_ic (§4.5)."""
        assert st.rho is not None
        B, D = self.scatter(st)
        lo = np.log1p(-st.rho)[None, :]
        l1 = np.log(st.rho)[None, :] + D
        both = np.logaddexp(lo, l1)
        m = 1.0 / (1.0 + np.exp(-((l1 - lo) / T)))
        if self.gold_bits is not None:
            g, bits = self.gold_items, self.gold_bits
            both[g] = np.where(bits, l1[g], np.broadcast_to(lo, bits.shape))
            m[g] = bits
        joint = None
        if self.keep_joint:  # rows (item, label); B_i / C on both states keeps the free energy exact
            base = B[:, None] / self.C
            joint = np.stack([np.broadcast_to(lo, D.shape) + base, l1 + base], axis=2).reshape(-1, 2)
        return m, float(B.sum() + both.sum()), joint

    def _chunks(self, st: NoiseState) -> Iterator[tuple[int, int, np.ndarray]]:
        """Log-joint per (set, item) for consecutive item chunks (sets × items: reductions over the short set
        axis run as fast row-wise passes).  A chunk holds about :data:`CHUNK_NUMBERS` numbers so that the dozen
        passes over it (product, sums, max, exp, normalisation, marginals) stay in the CPU cache: with chunks of
        5e6 numbers every pass went to main memory and the E-step ran 3–4× slower."""
        assert self.Zf is not None and st.log_prior is not None
        B, D = self.scatter(st)
        S = self.Zf.shape[0]
        n = self.d.n_items
        chunk = max(64, min(self.chunk, CHUNK_NUMBERS // max(S, 1)))
        DT = np.ascontiguousarray(D.T)
        lp = st.log_prior[:, None]
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            lj = self.Zf @ DT[:, lo:hi]
            lj += B[None, lo:hi]
            lj += lp
            yield lo, hi, lj

    def _chunk_posterior(self, lo: int, hi: int, lj: np.ndarray, T: float) -> tuple[np.ndarray, np.ndarray]:
        """Posterior over sets (sets × items, tempered when T ≠ 1) and log-normalisers at T = 1 of one chunk, gold
        items clamped to their set (with their complete-data term)."""
        mx = lj.max(axis=0)
        g = lj - mx
        np.exp(g, out=g)
        tot = g.sum(axis=0)
        g /= tot
        lz = np.log(tot) + mx
        if T != 1.0:
            g = lj / T
            g -= g.max(axis=0)
            np.exp(g, out=g)
            g /= g.sum(axis=0)
        if self.gold_set is not None:
            gs = self.gold_set[lo:hi]
            cols = np.flatnonzero(gs >= 0)
            if len(cols):
                lz[cols] = lj[gs[cols], cols]
                g[:, cols] = 0.0
                g[gs[cols], cols] = 1.0
        return g, lz

    def _e_enumerated(self, st: NoiseState, T: float) -> tuple[np.ndarray, np.ndarray, float, np.ndarray | None]:
        assert self.Zf is not None
        n, S = self.d.n_items, self.Zf.shape[0]
        m = np.empty((n, self.C))
        gsum = np.zeros(S)
        ll = 0.0
        joint = np.empty((n, S)) if self.keep_joint else None
        for lo, hi, lj in self._chunks(st):
            if joint is not None:
                joint[lo:hi] = lj.T
            g, lz = self._chunk_posterior(lo, hi, lj, T)
            ll += float(lz.sum())
            m[lo:hi] = (self.Zf.T @ g).T
            gsum += g.sum(axis=1)
        return m, gsum, ll, joint

    def decode(self, st: NoiseState, top: int = 5) -> tuple[np.ndarray, list[tuple[int, np.ndarray, np.ndarray]]]:
        """MAP set per item and, per chunk, the ``top`` most probable sets with their posteriors (enumerated)."""
        assert self.Zf is not None
        mp = np.empty(self.d.n_items, np.int64)
        tops = []
        k = min(top, self.Zf.shape[0])
        for lo, hi, lj in self._chunks(st):
            mp[lo:hi] = np.argmax(lj, axis=0)
            g, _ = self._chunk_posterior(lo, hi, lj, 1.0)
            gi = g.T
            idx = np.argsort(-gi, axis=1)[:, :k].copy()  # a copy: the slice would keep items × sets alive
            tops.append((lo, idx, np.take_along_axis(gi, idx, axis=1)))
        if self.gold_set is not None:
            gold = self.gold_set >= 0
            mp[gold] = self.gold_set[gold]
        return mp, tops

    # ---------------------------------------------------------------- annealing (§7.3)
    def flat(self, st: NoiseState) -> np.ndarray:
        parts = [st.eps0, st.eps1]
        if st.log_prior is not None:
            parts.append(np.exp(st.log_prior))
        if st.rho is not None:
            parts.append(st.rho)
        return np.concatenate(parts)

    def informativeness(self, st: NoiseState) -> float:
        """J_max = max |1 − ε0 − ε1| over cells: 0 when every annotator reports independently of the truth."""
        return float(np.max(np.abs(1 - st.eps0 - st.eps1)))

    # ---------------------------------------------------------------- held-out scoring (§8)
    def heldout_item_scores(self, st: NoiseState, hidden: MultiLabelResponses) -> tuple[np.ndarray, np.ndarray]:
        """(item codes, S_i) for the items with hidden responses: S_i = log Σ_L γ̂_iL Π_{r∈H_i} p(x_r | L; θ̂) (joint
        posterior predictive, spec §8 step 4) with the fitted posterior and the cells' training estimates."""
        cell, _ = noise_cells(hidden, self.granularity)
        R = hidden.n_responses
        inc = sp.csr_matrix((np.ones(R), (hidden.item, np.arange(R))), shape=(hidden.n_items, R))
        Bh, Dh = self.scatter(st, data=hidden, cell=cell, inc=inc)
        items = np.unique(hidden.item)
        B_tr, D_tr = self.scatter(st)
        if self.factorised:
            assert st.rho is not None
            lo = np.log1p(-st.rho)[None, :]
            l1 = np.log(st.rho)[None, :] + D_tr[items]
            logm1 = l1 - np.logaddexp(lo, l1)
            logm0 = lo - np.logaddexp(lo, l1)
            if self.gold_bits is not None:
                logm1, logm0 = self._clamped_log_marginals(items, logm1, logm0)
            return items, Bh[items] + np.logaddexp(logm0, logm1 + Dh[items]).sum(axis=1)
        assert self.Zf is not None and st.log_prior is not None
        lj = B_tr[items, None] + D_tr[items] @ self.Zf.T + st.log_prior[None, :]
        logg = lj - log_normalize(lj)[1][:, None]
        if self.gold_set is not None:
            gs = self.gold_set[items]
            with np.errstate(divide="ignore"):
                onehot = np.log(np.arange(lj.shape[1])[None, :] == gs[:, None])
            logg = np.where((gs >= 0)[:, None], onehot, logg)
        tot = logg + Bh[items, None] + Dh[items] @ self.Zf.T
        mx = tot.max(axis=1)
        return items, mx + np.log(np.exp(tot - mx[:, None]).sum(axis=1))

    def _clamped_log_marginals(
        self, items: np.ndarray, logm1: np.ndarray, logm0: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        assert self.gold_items is not None and self.gold_bits is not None
        pos = np.full(self.d.n_items, -1)
        pos[self.gold_items] = np.arange(len(self.gold_items))
        rows = pos[items]
        has = rows >= 0
        bits = self.gold_bits[rows[has]]
        with np.errstate(divide="ignore"):
            logm1[has], logm0[has] = np.log(bits.astype(float)), np.log((~bits).astype(float))
        return logm1, logm0
