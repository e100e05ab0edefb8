"""The ordered-probit channel: level positions and cut points on a latent scale, per-annotator bias and noise,
the derived confusion matrices and the gradient of any linear functional of them (Johnson & Albert 1999, ch. 5)."""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from fusion_core.methods.numerics import PROB_FLOOR

NOISE_CENTER = np.log(0.5)  # prior mean of log s_j
_Z_CLIP = 50.0  # |z| beyond this: Φ is 0 or 1 and φ is 0 in double precision


def scale_points(scale: np.ndarray) -> np.ndarray:
    """The 2K − 1 ordered points ``μ_0 < τ_1 < μ_1 < … < τ_{K−1} < μ_{K−1}`` from the gap logits: gaps
    ``(K − 1)·softmax(scale)``, so μ_0 = 0 and μ_{K−1} = K − 1 (the scale's unit is one level on average)."""
    k = len(scale) // 2 + 1
    e = np.exp(scale - scale.max())
    return np.concatenate([[0.0], np.cumsum((k - 1) * e / e.sum())])


def parameter_bounds(w: int, k: int, estimate_scale: bool) -> tuple[np.ndarray, np.ndarray]:
    """Box bounds of ``x = [b, log s, (gap logits)]``: |b| ≤ K, s in [0.02, 2K], |gap logit| ≤ 5 (as arrays: scipy
    converts a list of pairs element by element on every call)."""
    lo = [np.full(w, -float(k)), np.full(w, np.log(0.02))] + ([np.full(2 * k - 2, -5.0)] if estimate_scale else [])
    hi = [np.full(w, float(k)), np.full(w, np.log(2.0 * k))] + ([np.full(2 * k - 2, 5.0)] if estimate_scale else [])
    return np.concatenate(lo), np.concatenate(hi)


def cut_z(bias: np.ndarray, noise: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``z[j, k, m] = (τ_m − μ_k − b_j)/s_j`` for the K + 1 cut points m (±∞ at the ends), clipped; W × K × (K+1)."""
    cuts = np.concatenate([[-np.inf], points[1::2], [np.inf]])
    z = (cuts[None, None, :] - points[0::2][None, :, None] - bias[:, None, None]) / noise[:, None, None]
    np.maximum(z, -_Z_CLIP, out=z)  # in place: np.clip's wrapper costs more than the arithmetic here
    return np.minimum(z, _Z_CLIP, out=z)


def interval_prob(z: np.ndarray) -> np.ndarray:
    """``Φ(z_{l+1}) − Φ(z_l)`` along the last axis, from the upper tail where both are positive (no cancellation)."""
    tail = ndtr(-np.abs(z))  # one Φ per cut point: Φ(z) below 0, 1 − Φ(z) above
    cdf = np.where(z > 0, 1.0 - tail, tail)
    return np.where(z[..., :-1] > 0, tail[..., :-1] - tail[..., 1:], cdf[..., 1:] - cdf[..., :-1])


def ordinal_confusion(bias: np.ndarray, noise: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Confusion matrices ``P_j(l | k)`` (workers × true × reported, rows sum to 1) from the ordered-probit
    parameters (module docstring)."""
    return np.maximum(interval_prob(cut_z(bias, noise, scale_points(scale))), 0.0)


def probit_gradient(
    a: np.ndarray, z: np.ndarray, s: np.ndarray, eta: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Gradient of the linear functional ``Σ_jkl a_jkl P_jkl`` of the ordered-probit confusion (``P`` from ``z``, the
    noise ``s`` and the gap logits ``eta``) with respect to the biases, the log noise levels and (when ``eta`` is
    given) the gap logits.  Any smooth objective of ``P`` is differentiated by passing ``a = ∂f/∂P``."""
    k = z.shape[1]
    phi = np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi)
    zphi = z * phi
    shift = a * (phi[..., :-1] - phi[..., 1:]) / s[:, None, None]  # ∂P/∂(μ_k + b_j) · a, per j, k, l
    g_b = shift.sum(axis=(1, 2))
    g_s = np.einsum("jkl,jkl->j", a, zphi[..., :-1] - zphi[..., 1:])
    if eta is None:
        return g_b, g_s, None
    g_points = np.empty(2 * k - 1)
    g_points[0::2] = shift.sum(axis=(0, 2))  # level positions μ_k
    inner = phi[..., 1:-1] / s[:, None, None]  # ∂P_l/∂τ_m = φ_m/s · ([m = l + 1] − [m = l])
    g_points[1::2] = np.einsum("jkm,jkm->m", inner, a[..., :-1] - a[..., 1:])
    g_gap = np.cumsum(g_points[::-1])[::-1][1:]  # point n is the sum of the gaps before it
    e = np.exp(eta - eta.max())
    sm = e / e.sum()
    return g_b, g_s, (k - 1) * sm * (g_gap - float(sm @ g_gap))


def m_step_objective(
    x: np.ndarray, counts: np.ndarray, *, scale: np.ndarray | None, regularization: float
) -> tuple[float, np.ndarray]:
    """Negative expected complete-data log-posterior and its gradient in ``x = [b, log s, (gap logits)]``.

    ``counts`` are the expected counts ``C[j, k, l]``; ``scale`` the fixed gap logits, or None when they are in
    ``x``."""
    w = counts.shape[0]
    b, log_s = x[:w], x[w : 2 * w]
    eta = x[2 * w :] if scale is None else scale
    s = np.exp(log_s)
    z = cut_z(b, s, scale_points(eta))
    p = interval_prob(z)
    inside = p > PROB_FLOOR
    log_p = np.log(np.where(inside, p, PROB_FLOOR))
    a = np.where(inside, counts / np.where(inside, p, 1.0), 0.0)  # ∂(Σ C log P)/∂P
    dev = log_s - NOISE_CENTER
    f = -float((counts * log_p).sum()) + 0.5 * regularization * float((b**2).sum() + (dev**2).sum())
    g_b, g_s, g_eta = probit_gradient(a, z, s, None if scale is not None else eta)
    g_b = -g_b + regularization * b
    g_s = -g_s + regularization * dev
    if g_eta is None:
        return f, np.concatenate([g_b, g_s])
    f += 0.5 * regularization * float((eta**2).sum())
    return f, np.concatenate([g_b, g_s, -g_eta + regularization * eta])
