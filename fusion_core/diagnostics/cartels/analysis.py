"""The detector's working state (spec ``spectral.md`` §6.3–§6.5): the core annotators' labels as a dense matrix,
their moments, cached bootstrap tests and rank fits per group, the regression evidence that assigns annotators to
groups, and the rank-two split of a group."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from fusion_core.diagnostics.cartels.bootstrap import GroupTest, bootstrap_test, fit_null_model, pair_pattern
from fusion_core.diagnostics.cartels.eigen import rank_one_vector, rank_two_loadings
from fusion_core.methods.spectral import BinaryMatrix, Moments, pairwise_moments


class GroupAnalysis:
    """The analysed (core) annotators' labels (sparse coordinates ``B``) plus cached group tests and rank fits.

    Groups are arrays of local indices (positions among the analysed annotators, codes ``idx``)."""

    def __init__(
        self,
        B: BinaryMatrix,
        workers_idx: np.ndarray,
        *,
        n_bootstrap: int,
        alpha: float,
        n_min: int,
        rng: np.random.Generator,
        moments: Moments | None = None,
    ):
        self.idx = workers_idx  # codes of analysed annotators
        sub = B.subset_workers(np.isin(np.arange(B.m), workers_idx))
        # entries stay sorted by (annotator, item) (``BinaryMatrix.from_codes``), items renumbered in order: the
        # coordinates of the former dense m × n view, without its memory (2 GB at 1M responses)
        self.B = _compact_items(sub)
        self.n_bootstrap, self.alpha, self.n_min, self.rng = n_bootstrap, alpha, n_min, rng
        # pairwise, so the analysed annotators' moments are the rows and columns of all annotators' (``moments``)
        self.mom = pairwise_moments(self.B, n_min=n_min) if moments is None else moments
        self.cache: dict[frozenset[int], GroupTest] = {}
        self.fits: dict[tuple[str, bytes], np.ndarray] = {}

    # -------------------------------------------------------------------- tests
    def test(
        self,
        g: np.ndarray,
        *,
        n_extra: int = 1,
        n_spec: int = 0,
        chunk: int = 50,
        sequential: bool = False,
        meanwhile: Callable[[], None] | None = None,
    ) -> GroupTest:
        """Statistic and bootstrap p-values for group g, cached by membership (see
        :func:`~fusion_core.diagnostics.cartels.bootstrap.bootstrap_test`; ``sequential``: Besag–Clifford early
        stop, which every test of the detector uses; ``meanwhile``: work for this thread while the group's null model
        and pair pattern are built on two others)."""
        key = frozenset(int(i) for i in g)
        hit = self.cache.get(key)
        if hit is not None and hit.s.shape[0] >= n_extra and hit.spec.shape[0] >= n_spec:
            return hit
        g = np.sort(np.asarray(list(key)))
        in_g = np.zeros(self.B.m, dtype=bool)
        in_g[g] = True
        sub = self.B.subset_workers(in_g)
        compact, pattern = _compact_items(sub), None
        mom = self.mom.restrict(g)  # the group's moments (pairwise: rows and columns of the analysed annotators')
        if meanwhile is None:
            null = fit_null_model(sub, self.n_min, moments=mom)
        else:
            with ThreadPoolExecutor(2, thread_name_prefix="fusion-cartel-null") as pool:
                job = pool.submit(fit_null_model, sub, self.n_min, quiet=True, moments=mom)
                pattern_job = pool.submit(pair_pattern, compact, self.n_min)  # needs no null model either
                meanwhile()
                null, pattern = job.result(), pattern_job.result()
        out = bootstrap_test(
            compact,
            null,
            self.rng,
            n_bootstrap=self.n_bootstrap,
            alpha=self.alpha,
            n_min=self.n_min,
            n_extra=n_extra,
            n_spec=n_spec,
            chunk=chunk,
            sequential=sequential,
            pattern=pattern,
        )
        self.cache[key] = out
        return out

    # ------------------------------------------------------------ rank fits
    def _cached(self, kind: str, g: np.ndarray, fit: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Rank fits are pure functions of the group (in its order): computed once per group."""
        key = (kind, np.asarray(g, dtype=np.int64).tobytes())
        if key not in self.fits:
            self.fits[key] = fit(np.asarray(g))
        return self.fits[key].copy()

    def rank_one(self, g: np.ndarray) -> np.ndarray:
        """Method A rank-one vector (J15-scaled, sum-rule sign) of group g."""
        return self._cached("one", g, lambda h: rank_one_vector(self.mom.restrict(h)))

    def rank_two(self, g: np.ndarray) -> np.ndarray:
        """§6.5 step 1: principal-axis iteration of rank 2 (missing pairs imputed); loadings L (|g| × 2)."""
        return self._cached("two", g, self._rank_two)

    def _rank_two(self, g: np.ndarray, warm: bool = True) -> np.ndarray:
        ix = np.ix_(g, g)
        return rank_two_loadings(self.mom.Q[ix], self.mom.valid[ix], warm=warm)

    # ------------------------------------------------------------ evidence
    def evidence(self, groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """§6.5 step 6: z_ig = (Σ_{j∈g, j≠i} w_ij q̂_ij u_j)² / Σ_{j∈g, j≠i} w_ij u_j², w = 1/σ̂² (m × G), and the
        regression coefficients Σ w q u / Σ w u² (annotator i's loading on group g's factor)."""
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
        return z, coef

    def noise_floor(self, g: np.ndarray | None = None) -> float:
        """σ̄²: the median squared standard error of a valid covariance (of group g, or of every analysed pair)."""
        if g is None:
            valid = self.mom.valid
            return float(np.median(self.mom.sigma2[valid])) if valid.any() else 0.0
        ix = np.ix_(g, g)
        valid = self.mom.valid[ix]
        return float(np.nanmedian(self.mom.sigma2[ix][valid])) if valid.any() else 0.0


def _compact_items(B: BinaryMatrix) -> BinaryMatrix:
    """B restricted to the items it has entries for, renumbered in their order (entry order unchanged)."""
    present = np.bincount(B.item, minlength=B.n) > 0  # O(n), not a sort of the entries
    code = np.cumsum(present) - 1
    return BinaryMatrix(B.worker, code[B.item], B.z, B.m, int(present.sum()))


def split_group(an: GroupAnalysis, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """§6.5 steps 1–3: (main ∪ undetermined, subgroup, undetermined) of group g (local indices): angle clustering
    of the rank-two loadings, weighted by signal strength ρ²; near-random annotators (ρ² ≤ 4σ̄²) stay in the main
    part."""
    L = an.rank_two(g)
    rho2 = (L**2).sum(axis=1)
    undet = rho2 <= 4 * an.noise_floor(g)
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
