"""Davidson's Bradley–Terry model with ties, and its weighted Newton M-step (shared by the pairwise models).

Davidson (1970), "On extending the Bradley–Terry model to accommodate ties in paired comparison experiments",
JASA 65: P(i ≻ k) ∝ e^{θ_i}, P(k ≻ i) ∝ e^{θ_k}, P(tie) ∝ ν e^{(θ_i+θ_k)/2}; with d = θ_i − θ_k that is the
softmax of z = (d/2, −d/2, log ν).  Without ties it is Bradley & Terry (1952): P(i ≻ k) = σ(d).

The M-step maximises Σ_c w_c Σ_y T_cy log P_y(d_c, log ν) − λ/2 ‖x‖² over x = (θ, per-judge shift γ), where
d = X x (X: +1 for the first option, −1 for the second, +1 for the judge's shift), by Newton steps with
backtracking (each step raises the objective, so EM stays monotone: a generalised EM, Dempster et al. 1977 §3).
Gradient and Hessian in (d, log ν) per row (negative Hessian of log softmax: diag p − p pᵀ, projected on
(½, −½, 0) and (0, 0, 1)):  g_d = ½(T_F − T_S − p_F + p_S),  g_ν = T_tie − p_tie,
h_dd = ¼(p_F + p_S) − ¼(p_F − p_S)²,  h_νν = p_tie(1 − p_tie),  h_dν = −½ p_tie (p_F − p_S).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusion_core.methods.numerics import jit_enabled

LOG_TINY = -700.0
JIT_MIN_JUDGEMENTS = 2_000
"""Fits on at least this many judgements use the compiled kernels when numba is installed (the ``fast`` extra);
smaller ones take a few milliseconds in numpy, less than numba's import and first call."""


def log_probs(d: np.ndarray, log_nu: float | None) -> np.ndarray:
    """Log probabilities (first ≻ second, second ≻ first, tie) for strength differences ``d``; without ties
    (``log_nu`` None) two columns, log σ(d) and log σ(−d)."""
    if log_nu is None:
        return np.stack([-np.logaddexp(0.0, -d), -np.logaddexp(0.0, d)], axis=1)
    h = d / 2
    m = np.maximum(np.abs(h), log_nu)
    lse = m + np.log(np.exp(h - m) + np.exp(-h - m) + np.exp(log_nu - m))
    out = np.empty((len(d), 3))
    out[:, 0] = h - lse
    out[:, 1] = -h - lse
    out[:, 2] = log_nu - lse
    return out


class Design:
    """The sparse design without a sparse matrix: row c is Σ_k ``signs[k]`` e_{cols[c, k]} (e.g. e_first −
    e_second + e_judge), so products, gradients and the Hessian are fancy indexing and ``np.bincount``."""

    def __init__(self, cols: np.ndarray, signs: np.ndarray, width: int):
        self.cols = cols
        self.signs = signs
        self.width = width
        self._pairs: np.ndarray | None = None  # built on the first gram (the ungrouped designs never need it)
        self._pair_signs = np.outer(signs, signs).ravel()
        self._cols_flat = cols.ravel()

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x[self.cols] @ self.signs)

    def rmatvec(self, g: np.ndarray) -> np.ndarray:
        """Xᵀ g."""
        return np.bincount(self._cols_flat, weights=(g[:, None] * self.signs).ravel(), minlength=self.width)

    def gram(self, h: np.ndarray) -> np.ndarray:
        """Xᵀ diag(h) X (dense, width × width)."""
        if self._pairs is None:
            c = self.cols
            self._pairs = (c[:, :, None] * self.width + c[:, None, :]).ravel()
        w = (h[:, None] * self._pair_signs).ravel()
        return np.bincount(self._pairs, weights=w, minlength=self.width**2).reshape(self.width, self.width)


def grouped(X: Design) -> tuple[np.ndarray, Design]:
    """Rows with the same design (same options, same judge) grouped: each row's group and the groups' design.
    The M-step objective only needs per-group weights and mean targets (:func:`compress`), so its Newton steps
    cost as many rows as there are distinct (first, second[, judge]) triples, not judgements."""
    key = np.zeros(len(X.cols), dtype=np.int64)
    for k in range(X.cols.shape[1]):  # 2 or 3 design columns
        key = key * X.width + X.cols[:, k]
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return inv.ravel().astype(np.int64), Design(X.cols[first], X.signs, X.width)


def compress(inv: np.ndarray, n_groups: int, T: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group: the summed weight and the weighted mean target (Σ_c w_c T_c log P_g = W_g T̄_g log P_g)."""
    W = np.bincount(inv, weights=w, minlength=n_groups)
    WT = np.stack([np.bincount(inv, weights=w * T[:, k], minlength=n_groups) for k in range(T.shape[1])], axis=1)
    return WT / np.maximum(W, 1e-300)[:, None], W


def design(first: np.ndarray, second: np.ndarray, n_options: int, judge: np.ndarray | None, n_judges: int) -> Design:
    """Rows e_first − e_second (+ e_judge after the option columns when per-judge shifts are fitted)."""
    if judge is None:
        return Design(np.stack([first, second], axis=1), np.array([1.0, -1.0]), n_options)
    return Design(
        np.stack([first, second, n_options + judge], axis=1), np.array([1.0, -1.0, 1.0]), n_options + n_judges
    )


@dataclass(frozen=True)
class Problem:
    """One weighted Davidson fit: design ``X``, soft targets ``T`` (rows × 2 or 3, rows summing to 1), row weights
    ``w``, ridge ``ridge`` per coefficient (length X.width) and whether ties are modelled."""

    X: Design
    T: np.ndarray
    w: np.ndarray
    ridge: np.ndarray
    ties: bool

    def objective(self, x: np.ndarray, log_nu: float | None) -> float:
        return self.value(log_probs(self.X @ x, log_nu if self.ties else None), x)

    def value(self, lp: np.ndarray, x: np.ndarray) -> float:
        """The objective from the rows' log probabilities ``lp`` at ``x``."""
        return float(np.einsum("i,ik,ik->", self.w, self.T, lp) - 0.5 * (self.ridge @ (x * x)))


def use_jit(n_judgements: int) -> bool:
    """Whether a fit on ``n_judgements`` runs the compiled kernels (:mod:`.kernels`): numba installed and enabled,
    and enough judgements that a fit's time is worth numba's import (below, a fit takes a few milliseconds)."""
    return n_judgements >= JIT_MIN_JUDGEMENTS and jit_enabled()


def newton(
    prob: Problem, x: np.ndarray, log_nu: float | None, steps: int = 1, *, jit: bool = False
) -> tuple[np.ndarray, float | None]:
    """Up to ``steps`` Newton steps with backtracking on :class:`Problem` from (x, log ν); never lowers the
    objective.  ``jit``: one compiled loop (:func:`.kernels.newton_kernel`, the same arithmetic)."""
    ties = prob.ties and log_nu is not None
    if jit:
        from fusion_core.methods.pairwise.kernels import newton_kernel

        X = prob.X
        nx, nn = newton_kernel(X.cols, X.signs, prob.T, prob.w, prob.ridge, x, log_nu if ties else 0.0, ties, steps)
        return nx, (float(nn) if ties else log_nu)
    return newton_numpy(prob, x, log_nu, steps)


def newton_numpy(prob: Problem, x: np.ndarray, log_nu: float | None, steps: int = 1) -> tuple[np.ndarray, float | None]:
    """:func:`newton` in numpy (the compiled kernel's twin)."""
    p_dim = len(x)
    ties = prob.ties and log_nu is not None
    T, w = prob.T, prob.w
    lp = log_probs(prob.X @ x, log_nu if ties else None)
    cur = prob.value(lp, x)
    for _ in range(steps):
        p = np.exp(lp)
        diff = p[:, 0] - p[:, 1]
        g_d = w * 0.5 * ((T[:, 0] - T[:, 1]) - diff)
        h_dd = w * 0.25 * ((p[:, 0] + p[:, 1]) - diff * diff)
        grad = prob.X.rmatvec(g_d) - prob.ridge * x
        gram = prob.X.gram(h_dd)
        gram.flat[:: p_dim + 1] += prob.ridge + 1e-9
        if ties:  # the (θ, log ν) block matrix, log ν last
            H = np.empty((p_dim + 1, p_dim + 1))
            H[:p_dim, :p_dim] = gram
            H[:p_dim, p_dim] = H[p_dim, :p_dim] = prob.X.rmatvec(w * -0.5 * p[:, 2] * diff)
            H[p_dim, p_dim] = float(w @ (p[:, 2] * (1 - p[:, 2]))) + 1e-6 + 1e-9
            grad = np.concatenate([grad, [float(w @ (T[:, 2] - p[:, 2]))]])
        else:
            H = gram
        try:
            step = np.linalg.solve(H, grad)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(H, grad, rcond=None)[0]
        t = 1.0
        improved = False
        for _ in range(30):  # backtracking halvings, not a loop over responses
            nx = x + t * step[:p_dim]
            nn = float(np.clip(log_nu + t * float(step[p_dim]), -20.0, 5.0)) if ties else log_nu  # type: ignore[operator]
            nlp = log_probs(prob.X @ nx, nn if ties else None)
            val = prob.value(nlp, nx)
            if val >= cur - 1e-12 * max(1.0, abs(cur)):
                x, log_nu, lp, improved = nx, nn, nlp, val > cur
                cur = val
                break
            t *= 0.5
        if not improved or float(np.max(np.abs(t * step))) < 1e-10:
            break
    return x, log_nu
