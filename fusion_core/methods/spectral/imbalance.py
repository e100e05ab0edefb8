"""Class imbalance ``b = P(+1) − P(−1)`` and the sensitivity/specificity it implies (spec ``spectral.md``
§3.7–§3.9; Jaffe et al. 2015).

Two estimators of b: the third-moment tensor (J15 Algorithm 1, O(responses), :func:`estimate_b_tensor`) and the
restricted likelihood scan (J15 Algorithm 2, :func:`estimate_b_likelihood`).  Given b, ψ and η follow from the
eigenvector and the annotators' means (J15 Lemma 2, :func:`psi_eta_from_v`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from fusion_core.methods.layout import n_threads
from fusion_core.methods.spectral.binary import DELTA_B, EPS, GRID_STEP, BinaryMatrix
from fusion_core.methods.spectral.errors import DegenerateSpectrumWarning


def psi_eta_from_v(mu: np.ndarray, v: np.ndarray, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Raw sensitivity and specificity (J15 Lemma 2, Eq. 5); v must be J15-scaled."""
    b = float(np.clip(b, -1 + 1e-9, 1 - 1e-9))
    psi = 0.5 * (1 + mu + v * np.sqrt((1 - b) / (1 + b)))
    eta = 0.5 * (1 - mu + v * np.sqrt((1 + b) / (1 - b)))
    return psi, eta


# ------------------------------------------------------------------------------- tensor (J15 Alg. 1)
def _e3_per_item(B: BinaryMatrix, x: np.ndarray) -> np.ndarray:
    """Per item l: e₃ of the values x[r] over its entries r, via power sums (p₁³ − 3p₁p₂ + 2p₃)/6."""
    p1 = np.bincount(B.item, weights=x, minlength=B.n)
    p2 = np.bincount(B.item, weights=x**2, minlength=B.n)
    p3 = np.bincount(B.item, weights=x**3, minlength=B.n)
    return (p1**3 - 3 * p1 * p2 + 2 * p3) / 6.0


def estimate_b_tensor(
    B: BinaryMatrix, mu: np.ndarray, v: np.ndarray, *, delta_b: float = DELTA_B, warn: bool = True
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


# --------------------------------------------------------------------------- likelihood (J15 Alg. 2)
THREADED_BLOCK_ENTRIES = 200_000  # responses × grid points of a block above which blocks run on several threads
BLOCK_ENTRIES = 1 << 19
"""Pattern × grid entries per block of :func:`restricted_log_likelihood` (4 MB per float array): the whole grid at
once took 97 MB of temporaries on 20k items (measured), the largest per-session peak of an ``sml-ds`` fit."""


class PatternDesign(NamedTuple):
    """Items × annotators count matrices of +1 (``P``) and −1 (``M``) labels, one row per distinct item pattern,
    with the number of items sharing it (``counts``)."""

    P: sp.csr_matrix
    M: sp.csr_matrix
    counts: np.ndarray


def pattern_design(B: BinaryMatrix, use: np.ndarray) -> PatternDesign:
    """The labels of the annotators in ``use``, compressed to unique item patterns with multiplicities when that
    saves work (§3.9 step 7)."""
    sel = use[B.worker]
    w, i, z = B.worker[sel], B.item[sel], B.z[sel]
    P = sp.csr_matrix(((z > 0).astype(float), (i, w)), shape=(B.n, B.m))
    M = sp.csr_matrix(((z < 0).astype(float), (i, w)), shape=(B.n, B.m))
    if not (B.m <= 62 and B.n > 64):
        return PatternDesign(P.tocsr(), M.tocsr(), np.ones(B.n))
    # dense pattern compression: each item's (observed, value) pattern as two bit codes
    code_p = np.bincount(i, weights=(z > 0) * (2.0**w), minlength=B.n)
    code_o = np.bincount(i, weights=2.0**w, minlength=B.n)
    keys = np.stack([code_p, code_o], axis=1)
    _, first, counts = np.unique(keys, axis=0, return_index=True, return_counts=True)
    return PatternDesign(P[first].tocsr(), M[first].tocsr(), counts.astype(float))


def restricted_log_likelihood(
    design: PatternDesign, mu: np.ndarray, v: np.ndarray, b_grid: np.ndarray, *, eps: float = EPS
) -> np.ndarray:
    """Ĝ(b̃) of J15 Eqs. 22–23 for every b̃ in ``b_grid`` (observed entries only, §5.4), per item mean.  The grid is
    evaluated in blocks of at most :data:`BLOCK_ENTRIES` pattern × grid entries, so the temporaries stay small."""
    P, M, counts = design
    b_grid = np.atleast_1d(np.asarray(b_grid, dtype=float))
    step = max(1, BLOCK_ENTRIES // max(P.shape[0], 1))
    if len(b_grid) > step:
        blocks = [b_grid[s : s + step] for s in range(0, len(b_grid), step)]
        threads = min(n_threads(), len(blocks), 4)
        if threads == 1 or P.nnz * step < THREADED_BLOCK_ENTRIES:
            parts = [restricted_log_likelihood(design, mu, v, g, eps=eps) for g in blocks]
        else:  # sparse products and ufuncs release the GIL: blocks on several threads, concatenated in grid order
            with ThreadPoolExecutor(threads, thread_name_prefix="fusion-isml") as pool:
                parts = list(pool.map(lambda g: restricted_log_likelihood(design, mu, v, g, eps=eps), blocks))
        return np.concatenate(parts)
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
    *,
    delta_b: float = DELTA_B,
    grid_step: float = GRID_STEP,
    eps: float = EPS,
) -> tuple[float, np.ndarray, np.ndarray]:
    """J15 Algorithm 2: grid scan of Ĝ on [−1+δ_b, 1−δ_b] (step h) and golden-section refinement (§3.9).

    Returns (b̂, grid, Ĝ on the grid).
    """
    design = pattern_design(B, use)

    def G(b_grid: np.ndarray) -> np.ndarray:
        return restricted_log_likelihood(design, mu, v, b_grid, eps=eps)

    grid = np.round(np.arange(-1 + delta_b, 1 - delta_b + 1e-12, grid_step), 10)
    grid, curve = _scan(G, grid, two_level=design.P.nnz * len(grid) > 5e7)
    k = int(np.argmax(curve))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    b_ref = _golden_section(lambda b: float(G(np.array([b]))[0]), lo, hi)
    b_hat = b_ref if float(G(np.array([b_ref]))[0]) >= curve[k] else grid[k]
    return float(b_hat), grid, curve


def _scan(G: Callable[[np.ndarray], np.ndarray], grid: np.ndarray, *, two_level: bool) -> tuple[np.ndarray, np.ndarray]:
    """Ĝ on the grid.  With more than 5·10⁷ entry-evaluations (``two_level``) the scan visits every 5th point,
    then the full-resolution grid around the best one [CHOICE, speed]; returns the points visited and Ĝ there."""
    if not two_level:
        return grid, G(grid)
    coarse = grid[::5]
    cc = G(coarse)
    kc = int(np.argmax(cc))
    fine = grid[(grid >= coarse[max(kc - 1, 0)]) & (grid <= coarse[min(kc + 1, len(coarse) - 1)])]
    cf = G(fine)
    pts = np.concatenate([coarse, fine])
    curve = np.concatenate([cc, cf])
    order = np.argsort(pts, kind="stable")
    pts, curve = pts[order], curve[order]
    pts, uniq = np.unique(pts, return_index=True)
    return pts, curve[uniq]


def _golden_section(f: Callable[[float], float], lo: float, hi: float, tol: float = 1e-6) -> float:
    """Maximiser of a unimodal f on [lo, hi] by golden-section search (to ``tol``)."""
    g = (np.sqrt(5) - 1) / 2
    a, d = lo, hi
    c1, c2 = d - g * (d - a), a + g * (d - a)
    f1, f2 = f(c1), f(c2)
    while d - a > tol:
        if f1 >= f2:
            d, c2, f2 = c2, c1, f1
            c1 = d - g * (d - a)
            f1 = f(c1)
        else:
            a, c1, f1 = c1, c2, f2
            c2 = a + g * (d - a)
            f2 = f(c2)
    return (a + d) / 2
