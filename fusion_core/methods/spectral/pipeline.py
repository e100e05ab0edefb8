"""The binary spectral pipeline: SML score (§3.6), b (§3.8/§3.9), ψ/η (§3.7) and the i-SML log-likelihood ratio
(§3.10) of spec ``spectral.md`` (Parisi et al. 2014 Eq. 15; Jaffe et al. 2015 Eqs. 5, 8–9)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusion_core.errors import UserInputError
from fusion_core.methods.spectral.binary import DELTA_B, EPS, GRID_STEP, BinaryMatrix
from fusion_core.methods.spectral.eigenvector import SpectralResult, fit_spectral
from fusion_core.methods.spectral.errors import ClassImbalanceWarning
from fusion_core.methods.spectral.imbalance import estimate_b_likelihood, estimate_b_tensor, psi_eta_from_v
from fusion_core.methods.spectral.moments import Moments

B_METHODS = ("likelihood", "tensor", "both", "none")


def sml_scores(B: BinaryMatrix, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s_l = Σ_i Z_il v̂_i over observed core entries (P14 Eq. 15, §5.4); also core labels per item."""
    vw = v[B.worker]
    ok = np.isfinite(vw)
    s = np.bincount(B.item[ok], weights=B.z[ok] * vw[ok], minlength=B.n)
    n_core = np.bincount(B.item[ok], minlength=B.n)
    return s, n_core


def isml_llr(B: BinaryMatrix, psi: np.ndarray, eta: np.ndarray, use: np.ndarray, *, eps: float = EPS) -> np.ndarray:
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
        """Sensitivity ψ̂ clipped to [0, 1] (NaN outside the core)."""
        return np.clip(np.asarray(self.psi_raw, dtype=float), 0, 1)

    @property
    def eta(self) -> np.ndarray:
        """Specificity η̂ clipped to [0, 1] (NaN outside the core)."""
        return np.clip(np.asarray(self.eta_raw, dtype=float), 0, 1)


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
    moments: Moments | None = None,
) -> BinaryFit:
    """SML (§3.6) + b (§3.8/§3.9, or the given ``b``) + ψ/η (§3.7) + i-SML LLR (§3.10).

    ``b_method``: 'likelihood', 'tensor', 'both' (likelihood used, tensor reported) or 'none'.  Without a usable
    core the result has ``spectral=None`` (the caller falls back, §5.2 step 5).  ``moments``: B's pairwise moments
    with this ``n_min``, when the caller has them already.
    """
    if b_method not in B_METHODS:
        raise UserInputError(f"b_method must be 'likelihood', 'tensor', 'both' or 'none', got {b_method!r}.")
    if b is not None and not -1 < b < 1:
        raise UserInputError(f"the class imbalance b must lie strictly between −1 and 1, got {b}.")
    spec = fit_spectral(
        B,
        completion=completion,
        weights=weights,
        sign_rule=sign_rule,
        n_min=n_min,
        d_min=d_min,
        strict=strict,
        warn=warn,
        moments=moments,
    )
    if spec is None:
        return BinaryFit(spectral=None, diagnostics={"method_used": "em_mv_fallback"})
    use = spec.core.mask
    v = np.where(use, spec.v, np.nan)
    score, n_core = sml_scores(B, v)
    out = BinaryFit(
        spectral=spec, score=score, n_core_labels=n_core, diagnostics={**spec.diagnostics, "method_used": "spectral"}
    )
    if b is not None:
        out.b = float(b)
    elif b_method != "none":
        _estimate_b(out, B, v, b_method, delta_b=delta_b, eps=eps, warn=warn)
    if np.isfinite(out.b):
        _psi_eta_llr(out, B, want_llr=want_llr, eps=eps, warn=warn)
    out.diagnostics.update(b=out.b, b_tensor=out.b_tensor, b_likelihood=out.b_likelihood)
    if np.isfinite(out.b_tensor) and np.isfinite(out.b_likelihood):
        out.diagnostics["b_gap"] = abs(out.b_tensor - out.b_likelihood)
    return out


def _estimate_b(
    out: BinaryFit, B: BinaryMatrix, v: np.ndarray, b_method: str, *, delta_b: float, eps: float, warn: bool
) -> None:
    """b by the tensor and/or the likelihood (the likelihood also when the tensor is unavailable, §5.3)."""
    assert out.spectral is not None
    mu, use = out.spectral.mu, out.spectral.core.mask

    def by_likelihood() -> None:
        out.b_likelihood, grid, curve = estimate_b_likelihood(
            B, mu, v, use, delta_b=delta_b, grid_step=GRID_STEP, eps=eps
        )
        out.b_curve = (grid, curve)

    if b_method in ("tensor", "both"):
        out.b_tensor = estimate_b_tensor(B, mu, v, delta_b=delta_b, warn=warn)[0]
    if b_method in ("likelihood", "both"):
        by_likelihood()
    out.b = out.b_tensor if b_method == "tensor" else out.b_likelihood
    if b_method == "tensor" and not np.isfinite(out.b):  # tensor unavailable: likelihood (§5.3)
        by_likelihood()
        out.b = out.b_likelihood


def _psi_eta_llr(out: BinaryFit, B: BinaryMatrix, *, want_llr: bool, eps: float, warn: bool) -> None:
    """ψ̂, η̂ on the core from v̂, μ̂ and b (J15 Eq. 5) and, when wanted, the i-SML LLR per item."""
    assert out.spectral is not None
    spec, use = out.spectral, out.spectral.core.mask
    if warn and abs(out.b) > 0.9:
        warnings.warn(
            f"class imbalance b̂ = {out.b:+.3f} is near the boundary ±1: sensitivity/specificity of the rare "
            "class are poorly determined (spec P3).",
            ClassImbalanceWarning,
            stacklevel=3,
        )
    psi, eta = psi_eta_from_v(spec.mu, np.where(use, spec.v, 0.0), out.b)
    psi[~use] = np.nan
    eta[~use] = np.nan
    out.psi_raw, out.eta_raw = psi, eta
    out.diagnostics["out_of_range_count"] = int(np.sum(use & ((psi < 0) | (psi > 1) | (eta < 0) | (eta > 1))))
    if want_llr:
        out.llr = isml_llr(B, np.nan_to_num(psi, nan=0.5), np.nan_to_num(eta, nan=0.5), use, eps=eps)
