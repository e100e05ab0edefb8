"""The ranking eigenvector: moments → core → rank-one completion → leading eigenvector with its sign
(spec ``spectral.md`` §3.2–§3.4, §5; Parisi et al. 2014 Eqs. 4–8).

``v̂`` is J15-scaled (``R ≈ v̂ v̂ᵀ``, ``v̂_i = √(1−b²)(2π_i − 1)`` with π_i the balanced accuracy), so ranking
annotators by ``v̂`` ranks them by balanced accuracy (P14 Eq. 8).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusion_core.errors import UserInputError
from fusion_core.methods.spectral.binary import BinaryMatrix
from fusion_core.methods.spectral.completion import als_rank_one, loglinear_diagonal, pair_weights, top_eigenpair
from fusion_core.methods.spectral.errors import (
    DegenerateSpectrumWarning,
    FewAnnotatorsWarning,
    SignAmbiguityWarning,
    SparseOverlapError,
    SparseOverlapWarning,
)
from fusion_core.methods.spectral.moments import Core, Moments, pairwise_moments, spectral_core
from fusion_core.methods.spectral.signs import resolve_sign

COMPLETIONS = ("auto", "loglinear", "als")


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


@dataclass
class _Completed:
    """The rank-one fit on the core: signed-later vector v, spectrum of the completed matrix, λ₁, details."""

    v: np.ndarray
    spectrum: np.ndarray
    lam: float
    heywood: int
    use_als: bool
    als_info: dict[str, Any]


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
    moments: Moments | None = None,
) -> SpectralResult | None:
    """Moments → core → rank-one completion → leading eigenvector with sign (§3.2–3.4, §5).

    ``completion``: 'loglinear' (Method A), 'als' (Method A then Gauss–Seidel Method B), 'auto'
    (A alone on dense data, A then B with missing entries).  Returns None (after a SparseOverlapWarning)
    when there is no usable core, or raises :class:`SparseOverlapError` if ``strict``.  ``moments``: B's
    :func:`pairwise_moments` with this ``n_min``, when the caller has them already.
    """
    if completion not in COMPLETIONS:
        raise UserInputError(f"completion must be 'auto', 'loglinear' or 'als', got {completion!r}.")
    mom = pairwise_moments(B, n_min=n_min) if moments is None else moments
    core = spectral_core(B, mom, d_min=d_min)
    if core.too_sparse:
        _no_core(core, strict=strict, warn=warn)
        return None
    idx = np.flatnonzero(core.mask)
    sub = mom.restrict(idx)
    fit = _complete(B, sub, completion=completion, weights=weights, sign_rule=sign_rule, warn=warn)
    v, sign_diag = resolve_sign(fit.v, sign_rule)
    norm = np.linalg.norm(v)
    v_unit = v / norm if norm > 0 else v
    v_full = np.full(B.m, np.nan)
    v_full[idx] = v
    v_full[mom.constant] = 0.0
    vu_full = np.full(B.m, np.nan)
    vu_full[idx] = v_unit
    vu_full[mom.constant] = 0.0
    diag = {**sign_diag, **_diagnostics(fit, sub, core, mom)}
    if warn:
        _warn_spectrum(int(core.mask.sum()), fit.lam, diag)
    return SpectralResult(v_full, vu_full, mom.mu, np.asarray(fit.spectrum), core, mom, diag)


def _no_core(core: Core, *, strict: bool, warn: bool) -> None:
    """§5.2 step 5: no usable core — raise when ``strict``, else warn that the caller falls back."""
    msg = (
        f"spectral stage not possible: {core.reason} (valid-pair fraction {core.valid_pair_fraction:.3f}, "
        f"core size {int(core.mask.sum())}, coverage {core.coverage:.0%}, median overlap {core.median_overlap:.0f})."
    )
    if strict:
        raise SparseOverlapError(msg + " Collect more overlapping labels or use a non-spectral method (ds).")
    if warn:
        warnings.warn(msg + " Falling back to Dawid–Skene EM from majority vote.", SparseOverlapWarning, stacklevel=4)


def _complete(
    B: BinaryMatrix, sub: Moments, *, completion: str, weights: str, sign_rule: str, warn: bool
) -> _Completed:
    """Method A (log-linear diagonal, hard-impute eigenpair), then Method B (weights n_ij) when 'als' or when
    'auto' meets missing entries in the core — not only missing pairs — as in the spec's reference pipeline
    (§5.1, §8.13 "Method A then Method B")."""
    Qc, valid_c = sub.Q, sub.valid
    qdiag = np.diag(Qc).copy()
    rdiag, heywood = loglinear_diagonal(Qc, pair_weights(sub, weights), qdiag)
    R = np.where(valid_c, Qc, 0.0)
    np.fill_diagonal(R, rdiag)
    has_missing = bool(np.any(B.n > sub.N))  # some core pair does not share every item
    use_als = completion == "als" or (completion == "auto" and has_missing)
    spectrum, e1, _ = top_eigenpair(R, valid_c, max_impute=5 if use_als else 200, spectrum=not use_als)
    lam = float(spectrum[0])
    v = np.sqrt(max(lam, 0.0)) * e1
    if not use_als:
        return _Completed(v, spectrum, lam, heywood, False, {})
    v = resolve_sign(v, sign_rule)[0]  # ALS start with the resolved sign
    u, sweeps, conv = als_rank_one(Qc, np.where(valid_c, sub.N, 0.0), v, qdiag)
    if np.all(np.isfinite(u)) and np.linalg.norm(u) > 0:
        v = u
    if warn and not conv:
        warnings.warn(
            f"the rank-one fit of the covariances did not converge in {sweeps} sweeps; the eigenvector is approximate.",
            DegenerateSpectrumWarning,
            stacklevel=4,
        )
    Rf = np.where(valid_c, Qc, np.outer(v, v))
    np.fill_diagonal(Rf, v**2)
    info = {"als_sweeps": sweeps, "als_converged": conv}
    return _Completed(v, np.linalg.eigvalsh(Rf)[::-1], float(v @ v), heywood, True, info)


def _diagnostics(fit: _Completed, sub: Moments, core: Core, mom: Moments) -> dict[str, Any]:
    """Explained variance, eigen-gap, noise floor and the core's shape (spec §3.5, §5.2)."""
    spectrum = fit.spectrum
    trace = float(np.sum(spectrum))
    # edge of the noise spectrum: 2√m · (typical standard error of a covariance entry) [CHOICE, P5]
    sig = np.sqrt(sub.sigma2[sub.valid]) if sub.valid.any() else np.array([0.0])
    return {
        "explained": float(spectrum[0] / trace) if trace > 0 else float("nan"),
        "eigen_gap": float(spectrum[0] / spectrum[1]) if len(spectrum) > 1 and spectrum[1] > 0 else float("inf"),
        "top_eigenvalues": spectrum[:10].tolist(),
        "heywood_count": fit.heywood,
        "noise_floor": float(2 * np.sqrt(len(sub.mu)) * np.median(sig)),
        "core_size": int(core.mask.sum()),
        "coverage": core.coverage,
        "valid_pair_fraction": core.valid_pair_fraction,
        "median_overlap": core.median_overlap,
        "constant_annotators": int(mom.constant.sum()),
        "completion": "als" if fit.use_als else "loglinear",
        **fit.als_info,
    }


def _warn_spectrum(n_core: int, lam: float, diag: dict[str, Any]) -> None:
    """Pitfalls P7 (few annotators), P5 (noise-level spectrum) and P1 (weakly determined sign)."""
    if n_core < 5:
        warnings.warn(
            f"only {n_core} annotators in the spectral core: the rank-one fit has little redundancy and the "
            "estimates are fragile (spec P7).",
            FewAnnotatorsWarning,
            stacklevel=4,
        )
    if lam <= diag["noise_floor"]:
        warnings.warn(
            f"leading eigenvalue {lam:.3g} is at the noise level ({diag['noise_floor']:.3g}): the annotators look like "
            "random guessers, so the ranking and weights are noise.",
            DegenerateSpectrumWarning,
            stacklevel=4,
        )
    if diag["sign_rule_disagreement"] or diag["sign_margin"] < 0.2:
        warnings.warn(
            f"SML/i-SML may be label-inverted (sign margin {diag['sign_margin']:.2f}, "
            f"{diag['frac_positive']:.0%} positive entries); inspect a few items.",
            SignAmbiguityWarning,
            stacklevel=4,
        )
