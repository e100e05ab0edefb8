"""Spectral estimators for binary annotators: covariance, rank-one completion, ranking, b, ψ/η, i-SML.

Spec ``../shared/specs/spectral.md`` (§n below); papers P14 (Parisi et al. 2014, SML, ranking, cartels)
and J15 (Jaffe et al. 2015, i-SML, class imbalance).  Labels are coded ±1: the *positive* class (+1) is
the one sensitivity ψ and the class imbalance ``b = P(+1) − P(−1)`` refer to (§3.1, pitfall P8).

Missing responses (sparse crowds) are the spec's §5 extension [EXT], assuming missing-completely-at-random:
pairwise-complete covariances over shared items with overlap counts ``n_ij``; pairs with ``n_ij < n_min``
or a constant annotator on the overlap are *missing entries*; the spectral stage runs on the *core*
(k-core with ``d_min`` valid partners, largest connected, non-bipartite component).

Everything here works on integer-coded arrays and scipy.sparse products; no Python loop over responses.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, connected_components

from fusion_core.errors import AggregationWarning, UserInputError

EPS = 1e-3  # probability clip inside logs (§1, [CHOICE])
DELTA_B = 0.02  # b restricted to [−1+δ_b, 1−δ_b] (J15 Eq. 24)
GRID_STEP = 0.01


# ----------------------------------------------------------------------------------------- warnings
class SparseOverlapWarning(AggregationWarning):
    """Too few annotators share enough items for the spectral stage (§5.2); a fallback was used."""


class FewAnnotatorsWarning(AggregationWarning):
    """3–4 usable annotators: the rank-one fit has little redundancy (§3.1, P7)."""


class SignAmbiguityWarning(AggregationWarning):
    """The global ±1 sign of the eigenvector is weakly determined (§3.4, P1)."""


class DegenerateSpectrumWarning(AggregationWarning):
    """Near-zero leading eigenvalue or tensor denominator (§3.8, P5)."""


class ClassImbalanceWarning(AggregationWarning):
    """b̂ at or near the boundary ±1 (P3)."""


class SparseOverlapError(UserInputError):
    """Raised instead of the fallback when ``strict=True`` (§5.2 step 5)."""


# ------------------------------------------------------------------------------------ binary data
@dataclass
class BinaryMatrix:
    """Observed ±1 labels as coordinates: annotator ``worker[r]`` gave ``z[r]`` to item ``item[r]``.

    One entry per (annotator, item) pair (the last duplicate response wins).  ``Z`` and ``O`` are the
    m × n sparse label and indicator matrices of §5.1.
    """

    worker: np.ndarray
    item: np.ndarray
    z: np.ndarray
    m: int
    n: int

    @classmethod
    def from_codes(cls, worker: np.ndarray, item: np.ndarray, z: np.ndarray, m: int, n: int) -> BinaryMatrix:
        worker = np.asarray(worker, dtype=np.int64)
        item = np.asarray(item, dtype=np.int64)
        z = np.asarray(z, dtype=float)
        key = worker * n + item
        # keep the last response of each (worker, item): unique on the reversed array
        _, first_rev = np.unique(key[::-1], return_index=True)
        keep = len(key) - 1 - first_rev
        return cls(worker=worker[keep], item=item[keep], z=z[keep], m=m, n=n)

    @classmethod
    def from_dense(cls, Z: np.ndarray) -> BinaryMatrix:
        """From an m × n array of ±1 with NaN for missing entries."""
        Z = np.asarray(Z, dtype=float)
        w, i = np.nonzero(~np.isnan(Z))
        return cls(worker=w, item=i, z=Z[w, i], m=Z.shape[0], n=Z.shape[1])

    @cached_property
    def Z(self) -> sp.csr_matrix:
        return sp.csr_matrix((self.z, (self.worker, self.item)), shape=(self.m, self.n))

    @cached_property
    def O(self) -> sp.csr_matrix:
        return sp.csr_matrix((np.ones(len(self.z)), (self.worker, self.item)), shape=(self.m, self.n))

    @property
    def dense(self) -> bool:
        return len(self.z) == self.m * self.n

    def to_dense(self) -> np.ndarray:
        out = np.full((self.m, self.n), np.nan)
        out[self.worker, self.item] = self.z
        return out

    def subset_workers(self, keep: np.ndarray) -> BinaryMatrix:
        """Only annotators with ``keep`` True (renumbered in order); items unchanged."""
        keep = np.asarray(keep, dtype=bool)
        new = np.cumsum(keep) - 1
        sel = keep[self.worker]
        return BinaryMatrix(new[self.worker[sel]], self.item[sel], self.z[sel], int(keep.sum()), self.n)


# -------------------------------------------------------------------------------------- moments
@dataclass
class Moments:
    """Pairwise-complete first and second moments (§3.2, §5.1)."""

    mu: np.ndarray  # per-annotator mean over its own items
    n_i: np.ndarray  # items per annotator
    N: np.ndarray  # overlap counts n_ij (diagonal n_i)
    Q: np.ndarray  # q̂_ij (ddof=1) on valid pairs, NaN elsewhere; diagonal 1 − μ̂²
    valid: np.ndarray  # bool, off-diagonal valid pairs
    sigma2: np.ndarray  # (1−μ̂_i²)(1−μ̂_j²)/(n_ij − 1), leading term of P14 Eq. 9
    constant: np.ndarray  # annotators whose labels are all equal (§3.1 step 3)
    n_min: int


def pairwise_moments(B: BinaryMatrix, n_min: int = 10) -> Moments:
    """μ̂, Q̂ and overlap counts from sparse products ``N = OOᵀ, S1 = ZOᵀ, S12 = ZZᵀ`` (§5.1).

    A pair is valid iff ``n_ij ≥ n_min`` and both annotators vary on their shared items; invalid pairs are
    missing (NaN), never 0.  Dense data give exactly ``np.cov(Z)``.
    """
    # one sparse product X Xᵀ with X = [P; M] (indicators of +1 and −1 labels) gives all three moments:
    # with Z = P − M and O = P + M, OOᵀ, ZOᵀ and ZZᵀ are signed sums of its four blocks
    m = B.m
    pos = B.z > 0
    X = sp.csr_matrix((np.ones(len(B.z)), (B.worker + m * (~pos), B.item)), shape=(2 * m, B.n))
    G = (X @ X.T).toarray()
    PP, PM, MP, MM = G[:m, :m], G[:m, m:], G[m:, :m], G[m:, m:]
    N = PP + PM + MP + MM
    S1 = PP + PM - MP - MM
    S12 = PP - PM - MP + MM
    n_i = np.diag(N).copy()
    mu = np.divide(np.diag(S1), n_i, out=np.zeros(B.m), where=n_i > 0)
    constant = (n_i == 0) | (np.abs(mu) >= 1 - 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (S12 - S1 * S1.T / N) / (N - 1)
    varies = np.abs(S1) < N - 1e-9  # annotator i (row) is non-constant on the items shared with j
    off = ~np.eye(B.m, dtype=bool)
    valid = off & (max(n_min, 2) <= N) & varies & varies.T
    valid[constant, :] = False
    valid[:, constant] = False
    Q = np.where(valid, q, np.nan)
    np.fill_diagonal(Q, 1 - mu**2)
    muc = np.clip(mu, -(1 - 1e-6), 1 - 1e-6)
    base = 1 - muc**2
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma2 = np.where(valid, np.outer(base, base) / (N - 1), np.nan)
    return Moments(mu=mu, n_i=n_i, N=N, Q=Q, valid=valid, sigma2=sigma2, constant=constant, n_min=n_min)


# --------------------------------------------------------------------------------- the core (§5.2)
@dataclass
class Core:
    mask: np.ndarray  # annotators in the spectral core
    coverage: float
    valid_pair_fraction: float
    median_overlap: float
    bipartite: bool
    too_sparse: bool
    reason: str = ""


def _is_bipartite(adj: sp.csr_matrix) -> bool:
    """2-colouring by BFS depth parity (connected graph)."""
    if adj.shape[0] == 0:
        return True
    order, pred = breadth_first_order(adj, 0, directed=False, return_predecessors=True)
    depth = np.zeros(adj.shape[0], dtype=np.int64)
    for node in order[1:]:  # loop over annotators (≤ a few thousand), not responses
        depth[node] = depth[pred[node]] + 1
    coo = adj.tocoo()
    return bool(np.all((depth[coo.row] - depth[coo.col]) % 2 == 1))


def spectral_core(B: BinaryMatrix, mom: Moments, d_min: int = 3, min_coverage: float = 0.5) -> Core:
    """k-core (≥ d_min valid partners) → largest connected component → non-bipartite check (§5.2)."""
    valid = mom.valid
    alive = ~mom.constant
    while True:
        deg = (valid & alive[None, :]).sum(axis=1)
        drop = alive & (deg < d_min)
        if not drop.any():
            break
        alive &= ~drop
    mask = np.zeros(B.m, dtype=bool)
    bip = False
    if alive.sum() >= 3:
        idx = np.flatnonzero(alive)
        adj = sp.csr_matrix(valid[np.ix_(idx, idx)].astype(np.int8))
        ncomp, lab = connected_components(adj, directed=False)
        big = np.argmax(np.bincount(lab))
        members = idx[lab == big]
        sub = sp.csr_matrix(valid[np.ix_(members, members)].astype(np.int8))
        bip = _is_bipartite(sub)
        mask[members] = True
    offdiag = B.m * (B.m - 1)
    n_labels = max(len(B.z), 1)
    coverage = float(np.isin(B.worker, np.flatnonzero(mask)).sum() / n_labels)
    vp = float(valid.sum() / offdiag) if offdiag else 0.0
    ov = mom.N[valid]
    med = float(np.median(ov)) if ov.size else 0.0
    reason = ""
    n_const = int(mom.constant.sum())
    if mask.sum() < 3 and B.m - n_const < 3:
        reason = (
            f"{n_const} of {B.m} annotators always give the same label (e.g. labelling functions that abstain "
            "otherwise), so they carry no covariance information"
        )
    elif mask.sum() < 3:
        reason = f"only {int(mask.sum())} annotators share ≥ {mom.n_min} items with ≥ {d_min} others"
    elif bip:
        reason = "the graph of annotator pairs with enough overlap is bipartite (no odd cycle)"
    elif coverage < min_coverage:
        reason = f"the core annotators gave only {coverage:.0%} of the labels (< {min_coverage:.0%})"
    return Core(mask, coverage, vp, med, bip, bool(reason), reason)


# ------------------------------------------------------------------ rank-one completion (§3.3)
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
    R: np.ndarray, valid: np.ndarray, max_impute: int = 200, tol: float = 1e-8, spectrum: bool = True, warm=None
):
    """Largest *algebraic* eigenpair of R (diagonal already completed; never the largest magnitude, §3.3).
    Invalid off-diagonal entries are imputed by the current rank-one prediction (hard-impute iteration)
    [CHOICE for §5].  ``warm(R, e_prev)`` optionally solves each inner step from the previous eigenvector
    (returns (λ, e) or None to use LAPACK); the caller certifies the result.  Returns (eigenvalues of the
    completed matrix, descending; top eigenvector; matrix).
    """
    R = R.copy()
    off = ~np.eye(len(R), dtype=bool)
    missing = off & ~valid
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
    Q: np.ndarray, W: np.ndarray, u0: np.ndarray, qdiag: np.ndarray, tol: float = 1e-10, max_sweeps: int = 500
):
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


def principal_axis(Q: np.ndarray, d0: np.ndarray, tol: float = 1e-9, max_iter: int = 5000):
    """Dense Method B variant: R = offdiag(Q) + diag(d); d ← λ e² until max|Δd| < tol (§3.3 step 4)."""
    R = Q.copy()
    d = d0.copy()
    for it in range(1, max_iter + 1):
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


def resolve_sign(v: np.ndarray, rule: str = "sum") -> tuple[np.ndarray, dict[str, Any]]:
    """Sign rule of §3.4 ('sum' default, 'count' = the papers' A3) with its diagnostics."""
    v = np.asarray(v, dtype=float)
    s = v.sum()
    n_pos, n_neg = int((v > 0).sum()), int((v < 0).sum())
    if rule == "sum":
        flip = s < 0 or (s == 0 and n_pos < n_neg)
    elif rule == "count":
        flip = n_pos < n_neg or (n_pos == n_neg and s < 0)
    else:
        raise UserInputError(f"sign_rule must be 'sum' or 'count', got {rule!r}.")
    out = -v if flip else v
    tot = np.abs(v).sum()
    margin = float(out.sum() / tot) if tot > 0 else 0.0
    count_flip = n_pos < n_neg
    sum_flip = s < 0
    return out, {
        "sign_margin": margin,
        "frac_positive": float((out > 0).mean()) if len(out) else 0.0,
        "sign_rule_disagreement": bool(count_flip != sum_flip and n_pos != n_neg and s != 0),
    }


# --------------------------------------------------------------------------- the spectral fit
@dataclass
class SpectralResult:
    """Outputs of §3.3–3.4 on the core, keyed by annotator position (NaN outside the core)."""

    v: np.ndarray  # J15-scaled leading eigenvector (R ≈ v vᵀ), NaN outside the core, 0 for constant ones
    v_unit: np.ndarray
    mu: np.ndarray
    spectrum: np.ndarray  # eigenvalues of the completed R̂ (core), descending
    core: Core
    moments: Moments
    diagnostics: dict[str, Any] = field(default_factory=dict)

    @property
    def ranking(self) -> np.ndarray:
        """Annotator positions by signed v̂, best first (core only; P14 Eq. 8)."""
        idx = np.flatnonzero(self.core.mask)
        return idx[np.argsort(-self.v[idx], kind="stable")]


def fit_spectral(
    B: BinaryMatrix,
    *,
    completion: str = "auto",
    weights: str = "delta",
    sign_rule: str = "sum",
    n_min: int = 10,
    d_min: int = 3,
    strict: bool = False,
    warn: bool = True,
) -> SpectralResult | None:
    """Moments → core → rank-one completion → leading eigenvector with sign (§3.2–3.4, §5).

    ``completion``: 'loglinear' (Method A), 'als' (Method A then Gauss–Seidel Method B), 'auto'
    (A alone on dense data, A then B with missing entries).  Returns None (after a SparseOverlapWarning)
    when there is no usable core, or raises :class:`SparseOverlapError` if ``strict``.
    """
    if completion not in ("auto", "loglinear", "als"):
        raise UserInputError(f"completion must be 'auto', 'loglinear' or 'als', got {completion!r}.")
    mom = pairwise_moments(B, n_min=n_min)
    core = spectral_core(B, mom, d_min=d_min)
    if core.too_sparse:
        msg = (
            f"spectral stage not possible: {core.reason} (valid-pair fraction {core.valid_pair_fraction:.3f}, "
            f"core size {int(core.mask.sum())}, coverage {core.coverage:.0%}, median overlap {core.median_overlap:.0f})."
        )
        if strict:
            raise SparseOverlapError(msg + " Collect more overlapping labels or use a non-spectral method (ds).")
        if warn:
            warnings.warn(
                msg + " Falling back to Dawid–Skene EM from majority vote.", SparseOverlapWarning, stacklevel=3
            )
        return None
    idx = np.flatnonzero(core.mask)
    Qc = mom.Q[np.ix_(idx, idx)]
    valid_c = mom.valid[np.ix_(idx, idx)]
    qdiag = np.diag(Qc).copy()
    sub = Moments(
        mom.mu[idx],
        mom.n_i[idx],
        mom.N[np.ix_(idx, idx)],
        Qc,
        valid_c,
        mom.sigma2[np.ix_(idx, idx)],
        mom.constant[idx],
        n_min,
    )
    W = pair_weights(sub, weights)
    rdiag, heywood = loglinear_diagonal(Qc, W, qdiag)
    R = np.where(valid_c, Qc, 0.0)
    np.fill_diagonal(R, rdiag)
    # 'auto': Method B (weights n_ij, §5.1) whenever the core has missing entries — not only missing pairs —
    # as in the spec's reference pipeline (§8.13 "Method A then Method B")
    sparse_core = bool(np.any(B.n > sub.N))
    use_als = completion == "als" or (completion == "auto" and sparse_core)
    spectrum, e1, Rc = top_eigenpair(R, valid_c, max_impute=5 if use_als else 200, spectrum=not use_als)
    lam = spectrum[0]
    v = np.sqrt(max(lam, 0.0)) * e1
    als_info: dict[str, Any] = {}
    if use_als:
        v = resolve_sign(v, sign_rule)[0]  # ALS start with the resolved sign
        wB = np.where(valid_c, sub.N, 0.0)
        u, sweeps, conv = als_rank_one(Qc, wB, v, qdiag)
        if np.all(np.isfinite(u)) and np.linalg.norm(u) > 0:
            v = u
        als_info = {"als_sweeps": sweeps, "als_converged": conv}
        if warn and not conv:
            warnings.warn(
                f"the rank-one fit of the covariances did not converge in {sweeps} sweeps; the eigenvector "
                "is approximate.",
                DegenerateSpectrumWarning,
                stacklevel=3,
            )
        Rf = np.where(valid_c, Qc, np.outer(v, v))
        np.fill_diagonal(Rf, v**2)
        spectrum = np.linalg.eigvalsh(Rf)[::-1]
        lam = float(v @ v)
    v, sign_diag = resolve_sign(v, sign_rule)
    norm = np.linalg.norm(v)
    v_unit = v / norm if norm > 0 else v
    m = B.m
    v_full = np.full(m, np.nan)
    v_full[idx] = v
    v_full[mom.constant] = 0.0
    vu_full = np.full(m, np.nan)
    vu_full[idx] = v_unit
    vu_full[mom.constant] = 0.0
    trace = float(np.sum(spectrum))
    # edge of the noise spectrum: 2√m · (typical standard error of a covariance entry) [CHOICE, P5]
    sig = np.sqrt(sub.sigma2[valid_c]) if valid_c.any() else np.array([0.0])
    noise_floor = float(2 * np.sqrt(len(idx)) * np.median(sig))
    diag: dict[str, Any] = {
        **sign_diag,
        "explained": float(spectrum[0] / trace) if trace > 0 else float("nan"),
        "eigen_gap": float(spectrum[0] / spectrum[1]) if len(spectrum) > 1 and spectrum[1] > 0 else float("inf"),
        "top_eigenvalues": spectrum[:10].tolist(),
        "heywood_count": heywood,
        "noise_floor": noise_floor,
        "core_size": int(core.mask.sum()),
        "coverage": core.coverage,
        "valid_pair_fraction": core.valid_pair_fraction,
        "median_overlap": core.median_overlap,
        "constant_annotators": int(mom.constant.sum()),
        "completion": "als" if use_als else "loglinear",
        **als_info,
    }
    if warn:
        n_core = int(core.mask.sum())
        if n_core < 5:
            warnings.warn(
                f"only {n_core} annotators in the spectral core: the rank-one fit has little redundancy and the "
                "estimates are fragile (spec P7).",
                FewAnnotatorsWarning,
                stacklevel=3,
            )
        if lam <= noise_floor:
            warnings.warn(
                f"leading eigenvalue {lam:.3g} is at the noise level ({noise_floor:.3g}): the annotators look like "
                "random guessers, so the ranking and weights are noise.",
                DegenerateSpectrumWarning,
                stacklevel=3,
            )
        if sign_diag["sign_rule_disagreement"] or sign_diag["sign_margin"] < 0.2:
            warnings.warn(
                f"SML/i-SML may be label-inverted (sign margin {sign_diag['sign_margin']:.2f}, "
                f"{sign_diag['frac_positive']:.0%} positive entries); inspect a few items.",
                SignAmbiguityWarning,
                stacklevel=3,
            )
    return SpectralResult(v_full, vu_full, mom.mu, np.asarray(spectrum), core, mom, diag)


# -------------------------------------------------------------------------- ψ, η and b (§3.7–3.9)
def psi_eta_from_v(mu: np.ndarray, v: np.ndarray, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Raw sensitivity and specificity (J15 Lemma 2, Eq. 5); v must be J15-scaled."""
    b = float(np.clip(b, -1 + 1e-9, 1 - 1e-9))
    psi = 0.5 * (1 + mu + v * np.sqrt((1 - b) / (1 + b)))
    eta = 0.5 * (1 - mu + v * np.sqrt((1 + b) / (1 - b)))
    return psi, eta


def _e3_per_item(B: BinaryMatrix, x: np.ndarray) -> np.ndarray:
    """Per item l: e₃ of the values x[r] over its entries r, via power sums (p₁³ − 3p₁p₂ + 2p₃)/6."""
    p1 = np.bincount(B.item, weights=x, minlength=B.n)
    p2 = np.bincount(B.item, weights=x**2, minlength=B.n)
    p3 = np.bincount(B.item, weights=x**3, minlength=B.n)
    return (p1**3 - 3 * p1 * p2 + 2 * p3) / 6.0


def estimate_b_tensor(
    B: BinaryMatrix, mu: np.ndarray, v: np.ndarray, delta_b: float = DELTA_B, warn: bool = True
) -> tuple[float, float]:
    """J15 Algorithm 1 with the triple-overlap weighting of §5.3: α̂_T = Σ_l e₃(v∘C_l) / Σ_l e₃(v²∘O_l),
    b̂ = −α̂_T/√(4+α̂_T²) (J15 Eq. 17), clipped.  Entries with NaN v (outside the core) are ignored.

    Returns (b̂, α̂_T); NaN with a warning when the denominator vanishes.
    """
    vw = np.nan_to_num(v)[B.worker]
    c = B.z - mu[B.worker]
    num = _e3_per_item(B, vw * c).sum()
    den = _e3_per_item(B, vw**2).sum()
    if not den > 1e-12:
        if warn:
            warnings.warn(
                "tensor estimate of b unavailable: too few informative annotators share items (spec §3.8 guard).",
                DegenerateSpectrumWarning,
                stacklevel=2,
            )
        return float("nan"), float("nan")
    alpha = num / den
    b = -alpha / np.sqrt(4 + alpha**2)
    return float(np.clip(b, -1 + delta_b, 1 - delta_b)), float(alpha)


def _pattern_design(B: BinaryMatrix, use: np.ndarray) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray]:
    """Items × annotators count matrices of +1 and −1 labels (annotators in ``use``), compressed to unique
    rows with multiplicities when that saves work (§3.9 step 7)."""
    sel = use[B.worker]
    w, i, z = B.worker[sel], B.item[sel], B.z[sel]
    P = sp.csr_matrix(((z > 0).astype(float), (i, w)), shape=(B.n, B.m))
    M = sp.csr_matrix(((z < 0).astype(float), (i, w)), shape=(B.n, B.m))
    counts = np.ones(B.n)
    if B.m <= 62 and B.n > 64:
        # dense pattern compression: each item's (observed, value) pattern as two bit codes
        code_p = np.bincount(i, weights=(z > 0) * (2.0**w), minlength=B.n)
        code_o = np.bincount(i, weights=2.0**w, minlength=B.n)
        keys = np.stack([code_p, code_o], axis=1)
        uniq, first, counts = np.unique(keys, axis=0, return_index=True, return_counts=True)
        P, M = P[first], M[first]
    return P.tocsr(), M.tocsr(), counts.astype(float)


def restricted_log_likelihood(P, M, counts, mu, v, b_grid: np.ndarray, eps: float = EPS) -> np.ndarray:
    """Ĝ(b̃) of J15 Eqs. 22–23 for every b̃ in ``b_grid`` (observed entries only, §5.4), per item mean."""
    b_grid = np.atleast_1d(np.asarray(b_grid, dtype=float))
    vz = np.nan_to_num(v)
    psi = np.clip(0.5 * (1 + mu[:, None] + vz[:, None] * np.sqrt((1 - b_grid) / (1 + b_grid))[None, :]), eps, 1 - eps)
    eta = np.clip(0.5 * (1 - mu[:, None] + vz[:, None] * np.sqrt((1 + b_grid) / (1 - b_grid))[None, :]), eps, 1 - eps)
    lp = P @ np.log(psi) + M @ np.log1p(-psi) + np.log((1 + b_grid) / 2)[None, :]
    ln = M @ np.log(eta) + P @ np.log1p(-eta) + np.log((1 - b_grid) / 2)[None, :]
    ll = np.logaddexp(lp, ln)
    return counts @ ll / counts.sum()


def estimate_b_likelihood(
    B: BinaryMatrix,
    mu: np.ndarray,
    v: np.ndarray,
    use: np.ndarray,
    delta_b: float = DELTA_B,
    grid_step: float = GRID_STEP,
    eps: float = EPS,
) -> tuple[float, np.ndarray, np.ndarray]:
    """J15 Algorithm 2: grid scan of Ĝ on [−1+δ_b, 1−δ_b] (step h) and golden-section refinement (§3.9).
    With more than 5·10⁷ entry-evaluations the scan is two-level (every 5th point, then step h around the
    best) [CHOICE, speed].

    Returns (b̂, grid, Ĝ on the grid).
    """
    P, M, counts = _pattern_design(B, use)
    grid = np.round(np.arange(-1 + delta_b, 1 - delta_b + 1e-12, grid_step), 10)
    if P.nnz * len(grid) > 5e7:
        # large sparse data: scan every 5th grid point, then the full-resolution grid around the best one
        coarse = grid[::5]
        cc = restricted_log_likelihood(P, M, counts, mu, v, coarse, eps)
        kc = int(np.argmax(cc))
        fine = grid[(grid >= coarse[max(kc - 1, 0)]) & (grid <= coarse[min(kc + 1, len(coarse) - 1)])]
        cf = restricted_log_likelihood(P, M, counts, mu, v, fine, eps)
        grid = np.concatenate([coarse, fine])
        curve = np.concatenate([cc, cf])
        order = np.argsort(grid, kind="stable")
        grid, curve = grid[order], curve[order]
        grid, uniq = np.unique(grid, return_index=True)
        curve = curve[uniq]
    else:
        curve = restricted_log_likelihood(P, M, counts, mu, v, grid, eps)
    k = int(np.argmax(curve))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    g = (np.sqrt(5) - 1) / 2
    f = lambda b: float(restricted_log_likelihood(P, M, counts, mu, v, np.array([b]), eps)[0])  # noqa: E731
    a, d = lo, hi
    c1, c2 = d - g * (d - a), a + g * (d - a)
    f1, f2 = f(c1), f(c2)
    while d - a > 1e-6:
        if f1 >= f2:
            d, c2, f2 = c2, c1, f1
            c1 = d - g * (d - a)
            f1 = f(c1)
        else:
            a, c1, f1 = c1, c2, f2
            c2 = a + g * (d - a)
            f2 = f(c2)
    b_ref = (a + d) / 2
    b_hat = b_ref if f(b_ref) >= curve[k] else grid[k]
    return float(b_hat), grid, curve


# ------------------------------------------------------------------------------ predictions
def sml_scores(B: BinaryMatrix, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s_l = Σ_i Z_il v̂_i over observed core entries (P14 Eq. 15, §5.4); also core labels per item."""
    vw = v[B.worker]
    ok = np.isfinite(vw)
    s = np.bincount(B.item[ok], weights=B.z[ok] * vw[ok], minlength=B.n)
    n_core = np.bincount(B.item[ok], minlength=B.n)
    return s, n_core


def isml_llr(B: BinaryMatrix, psi: np.ndarray, eta: np.ndarray, use: np.ndarray, eps: float = EPS) -> np.ndarray:
    """LLR_l = ½ Σ_{i obs} (Z_il ln α_i + ln β_i) (I9, J15 Eqs. 8–9) with ψ̂, η̂ clipped to [ε, 1−ε].

    ½·(…) equals log P(f|+1) − log P(f|−1), so σ(LLR + ln((1+b)/(1−b))) is the posterior (§3.10).
    """
    p = np.clip(psi, eps, 1 - eps)
    e = np.clip(eta, eps, 1 - eps)
    ln_a = np.log(p) + np.log(e) - np.log1p(-p) - np.log1p(-e)
    ln_b = np.log(p) + np.log1p(-p) - np.log(e) - np.log1p(-e)
    sel = use[B.worker]
    w = B.worker[sel]
    return 0.5 * np.bincount(B.item[sel], weights=B.z[sel] * ln_a[w] + ln_b[w], minlength=B.n)


# ------------------------------------------------------------------------- full binary pipeline
@dataclass
class BinaryFit:
    """Everything the binary spectral pipeline estimates (positions = annotator codes)."""

    spectral: SpectralResult | None
    b: float = float("nan")
    b_tensor: float = float("nan")
    b_likelihood: float = float("nan")
    b_curve: tuple[np.ndarray, np.ndarray] | None = None
    psi_raw: np.ndarray | None = None
    eta_raw: np.ndarray | None = None
    score: np.ndarray | None = None  # SML score per item
    llr: np.ndarray | None = None  # i-SML log-likelihood ratio per item
    n_core_labels: np.ndarray | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)

    @property
    def psi(self) -> np.ndarray:
        return np.clip(self.psi_raw, 0, 1)

    @property
    def eta(self) -> np.ndarray:
        return np.clip(self.eta_raw, 0, 1)


def fit_binary(
    B: BinaryMatrix,
    *,
    b: float | None = None,
    b_method: str = "likelihood",
    completion: str = "auto",
    weights: str = "delta",
    sign_rule: str = "sum",
    n_min: int = 10,
    d_min: int = 3,
    strict: bool = False,
    delta_b: float = DELTA_B,
    eps: float = EPS,
    want_llr: bool = True,
    warn: bool = True,
) -> BinaryFit:
    """SML (§3.6) + b (§3.8/§3.9, or the given ``b``) + ψ/η (§3.7) + i-SML LLR (§3.10).

    ``b_method``: 'likelihood', 'tensor', 'both' (likelihood used, tensor reported) or 'none'.
    """
    if b_method not in ("likelihood", "tensor", "both", "none"):
        raise UserInputError(f"b_method must be 'likelihood', 'tensor', 'both' or 'none', got {b_method!r}.")
    spec = fit_spectral(
        B,
        completion=completion,
        weights=weights,
        sign_rule=sign_rule,
        n_min=n_min,
        d_min=d_min,
        strict=strict,
        warn=warn,
    )
    if spec is None:
        return BinaryFit(spectral=None, diagnostics={"method_used": "em_mv_fallback"})
    use = spec.core.mask
    v = np.where(use, spec.v, np.nan)
    mu = spec.mu
    score, n_core = sml_scores(B, v)
    out = BinaryFit(
        spectral=spec, score=score, n_core_labels=n_core, diagnostics={**spec.diagnostics, "method_used": "spectral"}
    )
    if b is not None:
        if not -1 < b < 1:
            raise UserInputError(f"the class imbalance b must lie strictly between −1 and 1, got {b}.")
        out.b = float(b)
    elif b_method != "none":
        if b_method in ("tensor", "both"):
            out.b_tensor = estimate_b_tensor(B, mu, v, delta_b, warn=warn)[0]
        if b_method in ("likelihood", "both"):
            out.b_likelihood, grid, curve = estimate_b_likelihood(B, mu, v, use, delta_b, GRID_STEP, eps)
            out.b_curve = (grid, curve)
        out.b = out.b_tensor if b_method == "tensor" else out.b_likelihood
        if b_method == "tensor" and not np.isfinite(out.b):  # tensor unavailable: likelihood (§5.3)
            out.b_likelihood, grid, curve = estimate_b_likelihood(B, mu, v, use, delta_b, GRID_STEP, eps)
            out.b_curve = (grid, curve)
            out.b = out.b_likelihood
    if np.isfinite(out.b):
        if warn and abs(out.b) > 0.9:
            warnings.warn(
                f"class imbalance b̂ = {out.b:+.3f} is near the boundary ±1: sensitivity/specificity of the rare "
                "class are poorly determined (spec P3).",
                ClassImbalanceWarning,
                stacklevel=2,
            )
        psi, eta = psi_eta_from_v(mu, np.where(use, spec.v, 0.0), out.b)
        psi[~use] = np.nan
        eta[~use] = np.nan
        out.psi_raw, out.eta_raw = psi, eta
        out.diagnostics["out_of_range_count"] = int(np.sum(use & ((psi < 0) | (psi > 1) | (eta < 0) | (eta > 1))))
        if want_llr:
            out.llr = isml_llr(B, np.nan_to_num(psi, nan=0.5), np.nan_to_num(eta, nan=0.5), use, eps)
    out.diagnostics.update(b=out.b, b_tensor=out.b_tensor, b_likelihood=out.b_likelihood)
    if np.isfinite(out.b_tensor) and np.isfinite(out.b_likelihood):
        out.diagnostics["b_gap"] = abs(out.b_tensor - out.b_likelihood)
    return out


def balanced_accuracy_from_v(v: np.ndarray, b: float) -> np.ndarray:
    """π̂ = ½(v̂/√(1−b²) + 1) (J15 Eq. 30)."""
    return 0.5 * (v / np.sqrt(1 - b**2) + 1)


def balanced_accuracy(pred: np.ndarray, truth: np.ndarray) -> float:
    """Mean per-class recall of ``pred`` against ``truth`` (P14 Eq. 1 for two classes)."""
    pred, truth = np.asarray(pred), np.asarray(truth)
    classes = np.unique(truth)
    return float(np.mean([np.mean(pred[truth == c] == c) for c in classes]))
