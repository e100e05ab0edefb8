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

The detector flags *correlation*, not intent (spec P15): classifiers of one family or annotators sharing a
guideline look the same.  Binary labels only (the positive class is ``positive_label`` or the second label).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.linalg as sla
import scipy.sparse as sp

from fusion_core.data.responses import Responses, as_responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import initial_posterior
from fusion_core.methods.dawid_skene import run_em
from fusion_core.spectral import (
    BinaryMatrix,
    SparseOverlapWarning,
    fit_binary,
    loglinear_diagonal,
    pairwise_moments,
    pair_weights,
    resolve_sign,
    spectral_core,
    top_eigenpair,
)


SPARSE_BOOTSTRAP_CELLS = 4_000_000  # above this many annotator × item cells (and < 30% observed) the
# bootstrap draws only observed entries and uses sparse products instead of dense batched ones


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
    undetermined: pd.Index = field(default_factory=lambda: pd.Index([], name="worker"))  # near-random annotators (no usable signal)
    rho: pd.Series = field(default_factory=lambda: pd.Series(dtype=float, name="rho"))  # signal strength √(L1² + L2²)
    method: str = "sml"
    positive_label: Any = None

    @property
    def significant(self) -> bool:
        """True when at least one cartel was detected."""
        return bool(self.groups)


# ------------------------------------------------------------------------------ batched moments
def _batched_stats(Z: np.ndarray, O: np.ndarray, n_min: int, n_extra: int, x0: np.ndarray,
                   n_spec: int = 0, weights: str = "delta") -> tuple[np.ndarray, np.ndarray]:
    """For each replicate b of Z (b × m × n, 0 where missing; O the m × n mask): the top ``n_extra``
    eigenvalues of the standardised residual of the rank-one fit (§6.3) and the top ``n_spec`` eigenvalues
    of the completed R̂.  Method A (delta weights) + hard-impute power iteration warm-started at x0.
    """
    Of = O.astype(float)
    N = Of @ Of.T
    S1 = Z @ Of.T
    S12 = Z @ Z.transpose(0, 2, 1)
    return _stats_from_products(N, S1, S12, n_min, n_extra, x0, n_spec, weights)


def _sparse_products(worker: np.ndarray, item: np.ndarray, zs: np.ndarray, m: int, n: int):
    """N (m × m) and per-replicate S1, S12 (b × m × m) from labels ``zs`` (b × entries) at fixed (worker, item)
    coordinates: one sparse product [P; M][P; M]ᵀ per replicate (as in ``pairwise_moments``)."""
    nb = zs.shape[0]
    S1 = np.empty((nb, m, m))
    S12 = np.empty((nb, m, m))
    N = None
    for r in range(nb):  # loop over replicates, not responses
        X = sp.csr_matrix((np.ones(len(item)), (worker + m * (zs[r] < 0), item)), shape=(2 * m, n))
        G = (X @ X.T).toarray()
        PP, PM, MP, MM = G[:m, :m], G[:m, m:], G[m:, :m], G[m:, m:]
        N = PP + PM + MP + MM
        S1[r] = PP + PM - MP - MM
        S12[r] = PP - PM - MP + MM
    return N, S1, S12


def _stats_from_products(N, S1, S12, n_min, n_extra, x0, n_spec=0, weights="delta"):
    """The statistics of :func:`_batched_stats` from the moment products (N shared, S1/S12 per replicate)."""
    nb, m, _ = S1.shape
    n_i = np.diagonal(N)
    mu = np.diagonal(S1, axis1=1, axis2=2) / np.maximum(n_i, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (S12 - S1 * S1.transpose(0, 2, 1) / N) / (N - 1)
    varies = np.abs(S1) < N - 1e-9
    off = ~np.eye(m, dtype=bool)
    valid = off & (N >= max(n_min, 2)) & varies & varies.transpose(0, 2, 1)
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
    A = W.copy()
    A[:, np.arange(m), np.arange(m)] += W.sum(axis=2)
    c = (W * Y).sum(axis=2)
    try:
        t = np.linalg.solve(A, c[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:
        t = np.stack([np.linalg.lstsq(A[b], c[b], rcond=None)[0] for b in range(nb)])
    r = np.minimum(np.exp(2 * t), base)
    R = qz.copy()
    R[:, np.arange(m), np.arange(m)] = r
    miss = off & ~valid
    x = np.broadcast_to(x0 / np.linalg.norm(x0), (nb, m)).copy()
    lam = np.ones(nb)
    Rf = R
    for _ in range(200):  # power iteration (the null has a large spectral gap); imputes missing pairs
        if miss.any():
            Rf = np.where(miss, lam[:, None, None] * x[:, :, None] * x[:, None, :], R)
        y = np.einsum("bij,bj->bi", Rf, x)
        lam_new = np.einsum("bi,bi->b", x, y)
        xn = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-300)
        done = np.max(np.abs(xn - x)) < 1e-9 and np.max(np.abs(lam_new - lam)) < 1e-9
        x, lam = xn, lam_new
        if done:
            break
    v = np.sqrt(np.maximum(lam, 0))[:, None] * x
    E = np.where(valid, (qz - v[:, :, None] * v[:, None, :]) / np.sqrt(np.where(valid, sigma2, 1.0)), 0.0)
    s = np.linalg.eigvalsh(E)[:, ::-1][:, :n_extra]
    spec = np.zeros((nb, 0))
    if n_spec:
        if miss.any():
            Rf = np.where(miss, lam[:, None, None] * x[:, :, None] * x[:, None, :], R)
        spec = np.linalg.eigvalsh(Rf)[:, ::-1][:, :n_spec]
    return s, spec


class _Analysis:
    """Dense view of the core annotators' labels plus cached group tests."""

    def __init__(self, resp: Responses, B: BinaryMatrix, workers_idx: np.ndarray, *, n_bootstrap: int, alpha: float,
                 n_min: int, rng: np.random.Generator, pos: int):
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

    # -------------------------------------------------------------------- tests
    def null_model(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """§6.4 step 1: i-SML then EM on group g (local indices); ψ, η clipped to [0.01, 0.99], b to ±0.98."""
        Bg = self.B.subset_workers(np.isin(np.arange(self.B.m), g))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AggregationWarning)
            bf = fit_binary(Bg, n_min=self.n_min, d_min=1)
        keep = np.isin(Bg.item, np.unique(Bg.item))
        # two-coin EM from the i-SML posterior (spec §3.11) on a Responses built from the group's labels
        r = Responses(item=Bg.item[keep], worker=Bg.worker[keep], label=(Bg.z[keep] > 0).astype(np.int64),
                      items=pd.RangeIndex(Bg.n), workers=pd.RangeIndex(Bg.m), classes=pd.Index([0, 1]))
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

    def test(self, g: np.ndarray, n_extra: int = 1, n_spec: int = 0, chunk: int = 50) -> dict[str, Any]:
        """Statistic and bootstrap p-values for group g (local indices), cached by membership."""
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
        # dense batched products for small or well-filled matrices, sparse products otherwise
        sparse = m * n > SPARSE_BOOTSTRAP_CELLS and Og.mean() < 0.3
        if sparse:
            w_idx, i_idx = np.nonzero(Og)
            chunk = max(1, min(chunk, int(3_000_000 // (m * m))))
            N, S1, S12 = _sparse_products(w_idx, i_idx, Zg[w_idx, i_idx][None], m, n)
            s_obs, spec_obs = _stats_from_products(N, S1, S12, self.n_min, n_extra, x0, n_spec)
        else:
            chunk = max(1, min(chunk, int(10_000_000 // (m * n))))
            s_obs, spec_obs = _batched_stats(Zg[None], Og, self.n_min, n_extra, x0, n_spec)
        s_null, spec_null = [], []
        for start in range(0, self.n_bootstrap, chunk):  # chunks bound memory
            nb = min(chunk, self.n_bootstrap - start)
            y = self.rng.random((nb, n)) < (1 + b) / 2
            if sparse:  # draw only the observed entries (the missingness mask is copied exactly)
                u = self.rng.random((nb, len(w_idx)))
                yy = y[:, i_idx]
                zs = np.where(yy, np.where(u < psi[w_idx], 1.0, -1.0), np.where(u < eta[w_idx], -1.0, 1.0))
                _, S1, S12 = _sparse_products(w_idx, i_idx, zs, m, n)
                s, sp_ = _stats_from_products(N, S1, S12, self.n_min, n_extra, x0, n_spec)
            else:
                u = self.rng.random((nb, m, n))
                zs = np.where(y[:, None, :], np.where(u < psi[None, :, None], 1.0, -1.0),
                              np.where(u < eta[None, :, None], -1.0, 1.0)) * Og[None]
                s, sp_ = _batched_stats(zs, Og, self.n_min, n_extra, x0, n_spec)
            s_null.append(s)
            spec_null.append(sp_)
        s_null_a = np.concatenate(s_null)
        p = (1 + (s_null_a >= s_obs[0][None, :]).sum(axis=0)) / (self.n_bootstrap + 1)
        out = {"s": s_obs[0], "s_null": s_null_a, "p": p, "spec": spec_obs[0], "spec_null": np.concatenate(spec_null),
               "null": (psi, eta, b)}
        self.cache[key] = out
        return out

    # ------------------------------------------------------------ rank fits
    def sub_q(self, g: np.ndarray):
        mom = self.mom
        ix = np.ix_(g, g)
        return mom.Q[ix], mom.valid[ix], mom.sigma2[ix], mom.N[ix]

    def rank_one(self, g: np.ndarray) -> np.ndarray:
        """Method A rank-one vector (J15-scaled, sum-rule sign) of group g."""
        Q, valid, sigma2, N = self.sub_q(g)
        from fusion_core.spectral import Moments

        sub = Moments(self.mom.mu[g], self.mom.n_i[g], N, Q, valid, sigma2, self.mom.constant[g], self.n_min)
        W = pair_weights(sub, "delta")
        qdiag = np.diag(Q).copy()
        r, _ = loglinear_diagonal(Q, W, qdiag)
        R = np.where(valid, Q, 0.0)
        np.fill_diagonal(R, r)
        spec, e, _ = top_eigenpair(R, valid)
        return resolve_sign(np.sqrt(max(spec[0], 0)) * e, "sum")[0]

    def rank_two(self, g: np.ndarray, max_iter: int = 300) -> np.ndarray:
        """§6.5 step 1: principal-axis iteration of rank 2 (missing pairs imputed); loadings L (|g| × 2)."""
        Q, valid, _, _ = self.sub_q(g)
        m = len(g)
        Qz = np.where(valid, Q, 0.0)
        miss = ~valid & ~np.eye(m, dtype=bool)
        d = np.max(np.abs(Qz), axis=1)
        R = Qz.copy()
        for _ in range(max_iter):
            np.fill_diagonal(R, d)
            vals, vecs = sla.eigh(R, subset_by_index=[m - 2, m - 1], check_finite=False)
            vals, vecs = vals[::-1], vecs[:, ::-1]
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
            f"{list(resp.classes)[:6]}. Recode to one class versus the rest first.")
    pos = 1 if positive_label is None else int(resp.label_codes([positive_label], what="positive_label")[0])
    rng = np.random.default_rng(random_state)
    msgs: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AggregationWarning)
        report = _detect(resp, pos, rng, int(n_bootstrap), float(alpha), method, n_min, d_min, m_min, k_max,
                         n_components, merge, create)
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
        return CartelReport(empty, np.array([]), np.zeros((n_bootstrap, 0)), np.array([]),
                            pd.DataFrame(index=empty), [], pd.Series(dtype=object, name="membership"),
                            pd.Series(dtype=float, name="cartel_score"), labels, labels.copy(), alpha, n_bootstrap,
                            notes, method=method, positive_label=resp.classes[pos])
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
            res = first if len(g) == m else an.test(g)
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
                    p = (first if len(union) == m else an.test(union))["p"][0]
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
        final = [np.setdiff1d(g, np.flatnonzero(undetermined)) if k != main_k else np.union1d(g, np.flatnonzero(undetermined))
                 for k, g in enumerate(final)]
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
            notes.append("the two strongest groups have rank-one eigenvalues within 20%: the main-group choice is unreliable.")
            warnings.warn(notes[-1], AggregationWarning, stacklevel=3)

    if first["p"][0] < alpha and not groups:
        notes.append(f"a second covariance component is significant (p = {first['p'][0]:.3g}) but no separate group "
                     "of annotators could be split off: the correlation is spread over the crowd (e.g. item "
                     "difficulty or shared guidelines) rather than concentrated in a cartel.")
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
            notes.append(f"{int((~has).sum())} items were labelled only by cartel members; they keep the full-crowd label.")
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
