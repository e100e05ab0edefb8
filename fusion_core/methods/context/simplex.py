"""The simplex-chain M-step of ``context-em``'s confusion curves (spec ``context.md`` §9.2 option 2, [EXT]).

Each annotator k has a confusion matrix π_k(x)[i, j] = P(ŷ_k = j | y = i, x); every entry is c_ik-Lipschitz in
the context x and every row lies on the simplex.  The M-step of row (k, i) is

    maximise Σ_u Σ_j n_{u,j} log π_{u,j}   s.t.  Σ_j π_{u,j} = 1,  |π_{u+1,j} − π_{u,j}| ≤ h_u,  π ≥ ε,

a concave program with linear constraints, solved for all rows at once by the shared interior-point method
(:mod:`.interior_point`) with one equality multiplier ν_u per level.  The equalities are eliminated per level with
a null-space basis whose dependent entry is the one with the smallest Newton diagonal; the reduced Newton matrix is
symmetric positive definite and banded with half-bandwidth 2J − 3 (tridiagonal for J = 2), factorised once per
iteration by LAPACK's banded Cholesky (``dpbtrf``/``dpbtrs``): O(U J²) per iteration.  (The banded KKT system with
the equalities kept, as the spec suggests, is numerically singular once barrier weights reach ~1e14 on
near-duplicate contexts.)  A duality-gap certificate (the §6.5 bound with an inner simplex dual per level) accepts
each row; a row that fails it goes to an equality-constrained log-barrier fallback.  With J = 2 the program is the
binary chain program of §5.3 (π_{u,1} = p_u), which :func:`~.mstep.confusion_mstep` hands to the binary solver, so the
model reproduces the binary two-coin curves (tested).
Categorical contexts (§5.4) use :func:`categorical_simplex_mstep`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import lapack

from fusion_core.errors import UserInputError
from fusion_core.methods.context.interior_point import (
    Chains,
    MStepInfo,
    barrier_path,
    shift,
    solve_chains,
    solve_violating,
)


def floored_simplex(N: np.ndarray, eps: float) -> np.ndarray:
    """Row-wise argmax of Σ_j n_j log π_j over {π ≥ ε, Σ π = 1}: π_j = max(ε, n_j / τ) (water-filling, ≤ J passes).

    The clipped set only grows (τ increases with it), so the loop ends after at most J passes."""
    N = np.asarray(N, float)
    J = N.shape[1]
    clipped = np.zeros(N.shape, bool)
    for _ in range(J + 1):
        free = 1.0 - eps * clipped.sum(axis=1)
        tau = np.where(clipped, 0.0, N).sum(axis=1) / free
        new = (eps * tau[:, None] > N) | clipped
        if np.array_equal(new, clipped):
            break
        clipped = new
    out = np.where(clipped, eps, N / tau[:, None])
    return out


def _null_basis(diagP: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per level, a basis Z_u of {Σ_j Δπ_j = 0}: columns e_{f_a} − e_e, a = 0..J−2, where the dependent entry e is the
    one with the smallest Newton diagonal (so the 11ᵀ term it adds to the reduced block is the smallest possible)
    and f_a the other entries.  Eliminating a fixed entry instead cancels catastrophically in the Cholesky
    factorisation when that entry's barrier weight is huge (near-duplicate contexts).  Returns (e, f): n and
    (J−1) × n index arrays."""
    J = diagP.shape[0]
    e = np.argmin(diagP, axis=0)
    a = np.arange(J - 1)[:, None]
    return e, a + (a >= e[None, :])


def _reduced_factor(diagP: np.ndarray, om: np.ndarray, act: np.ndarray | None) -> tuple[Any, int]:
    """Banded Cholesky of the Newton matrix on the simplex's null space (``diagP``, ``om``: J × n, class-major).

    The π-space Newton matrix is M = diag(diagP) with couplings −om[j, u] between (u, j) and (u + 1, j); each
    level's equality Σ_j π_{u,j} = 1 is eliminated with the basis Z_u of :func:`_null_basis`, so ZᵀMZ has,
    level-major, blocks B_ab = D_{f_a} δ_ab + D_e and couplings −Z_uᵀ diag(ω_u) Z_{u+1}: symmetric positive definite
    and banded with half-bandwidth 2J − 3 (tridiagonal for J = 2, the binary solver's matrix).  Solving the KKT
    system with its equality rows instead (banded LU) loses all accuracy once barrier weights reach 1e14 on
    near-duplicate contexts.  Inactive levels (``act`` False) get identity blocks.  Returns (factor, info)."""
    J, n = diagP.shape
    m = J - 1
    kd = max(2 * m - 1, 1)
    e, f = _null_basis(diagP)
    cols = np.arange(n)
    De = diagP[e, cols]
    Df = np.take_along_axis(diagP, f, axis=0)  # m × n
    # couplings between level u (e, f) and u + 1 (e', f'): (e_fa − e_e)ᵀ Ω (e_f'b − e_e')
    e0, e1 = e[:-1], e[1:]
    f0, f1 = f[:, :-1], f[:, 1:]
    w = om[:, :-1]
    c0 = cols[:-1]
    w_f0 = np.take_along_axis(w, f0, axis=0)  # ω at f_a
    w_e0 = w[e0, c0]
    ab = np.zeros((kd + 1, n * m))
    base = cols * m
    actf = None if act is None else act.astype(float)
    actl = None if act is None else act[:-1].astype(float)
    for i in range(m):
        for k in range(i, m):
            blk = De + (Df[i] if i == k else 0.0)
            if actf is not None:
                blk = actf * blk + (1.0 - actf) * (1.0 if i == k else 0.0)
            ab[kd - (k - i), base + k] = blk
        for k in range(m):
            d = m + k - i
            if d > kd:
                continue
            cab = w_f0[i] * (f0[i] == f1[k]) - w_f0[i] * (f0[i] == e1) - w_e0 * (e0 == f1[k]) + w_e0 * (e0 == e1)
            if actl is not None:
                cab = cab * actl
            ab[kd - d, base[:-1] + m + k] = -cab
    c, info = lapack.dpbtrf(ab, lower=0)
    return (c, e, f), info


def _reduced_solve(fac: Any, g: np.ndarray) -> np.ndarray:
    """Solve (ZᵀMZ) y = Zᵀ g for a π-space right-hand side ``g`` (J × n); returns Δπ = Z y (J × n, Σ_j Δπ = 0)."""
    c, e, f = fac
    J, n = g.shape
    cols = np.arange(n)
    rhs = np.take_along_axis(g, f, axis=0) - g[e, cols]  # (J−1) × n
    y, _ = lapack.dpbtrs(c, np.ascontiguousarray(rhs.T).reshape(-1), lower=0)
    y = y.reshape(n, J - 1).T
    out = np.zeros((J, n))
    np.put_along_axis(out, f, y, axis=0)
    out[e, cols] = -y.sum(axis=0)
    return out


def _inner_bound(N: np.ndarray, s: np.ndarray, tau0: np.ndarray, eps: float, n_steps: int = 8) -> np.ndarray:
    """Upper bound on max_{π_u ∈ simplex, π ≥ ε} Σ_j n_j log π_j − s_j π_j per level (columns of the class-major
    J × n arrays ``N``, ``s``) by weak
    duality on the simplex equality: φ(τ) = τ + Σ_j max_{π ∈ [ε, 1]} (n_j log π − (s_j + τ) π) ≥ the maximum for
    every τ, with equality at the minimiser.  φ is convex with φ'(τ) = 1 − Σ_j π_j(τ) increasing; safeguarded Newton
    steps inside a bracket from ``tau0`` (the solver's ν), keeping the smallest value seen."""

    def value(tau: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = s + tau
        with np.errstate(divide="ignore", invalid="ignore"):
            pi = np.where(a > 0, np.clip(N / np.where(a > 0, a, 1.0), eps, 1.0), 1.0)
            val = tau + (np.where(N > 0, N * np.log(pi), 0.0) - a * pi).sum(axis=0)
        return val, pi, a

    J = N.shape[0]
    lo = -s.max(axis=0)  # some a_j = 0 → π_j = 1 → φ' ≤ 0
    hi = (J * N - s).max(axis=0) + 1.0  # every π_j ≤ max(ε, 1/J) → φ' ≥ 0
    tau = np.clip(tau0, lo, hi)
    best, pi, a = value(tau)
    for _ in range(n_steps):
        g = 1.0 - pi.sum(axis=0)
        lo = np.where(g <= 0, tau, lo)
        hi = np.where(g >= 0, tau, hi)
        interior = (a > 0) & (N > 0) & (pi > eps) & (pi < 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            hess = np.where(interior, N / np.where(interior, a * a, 1.0), 0.0).sum(axis=0)
            newton = tau - g / hess
        ok = (hess > 0) & (newton > lo) & (newton < hi)
        tau = np.where(ok, newton, 0.5 * (lo + hi))
        val, pi, a = value(tau)
        best = np.minimum(best, val)
    return best


def simplex_certificate(
    N: np.ndarray,
    h: np.ndarray,
    link: np.ndarray,
    P: np.ndarray,
    lam: np.ndarray,
    *,
    nu: np.ndarray,
    starts: np.ndarray,
    eps: float,
    zL: np.ndarray | None = None,
) -> np.ndarray:
    """Relative duality gap (ψ̄ − ψ(π)) / (1 + |ψ(π)|) per chain: the §6.5 bound with the chain constraints
    dualised by λ = z^U − z^D and each level's simplex maximised by :func:`_inner_bound` (a valid bound for any
    multipliers, tight at the optimum).  Adding a constant κ_u to all J multipliers of a link is absorbed by the
    levels' τ (Σ_j Δπ_j = 0), so the dual is degenerate along that direction and the solver's λ can drift along it
    on near-duplicate contexts; the per-link median is removed first (it only tightens the bound).  All per-entry
    arrays are class-major (J × n).  With ``zL`` a second λ is tried — rebuilt from the stationarity conditions by
    a running sum along each chain, λ_u = λ_{u−1} + ν_u − n_u/π_u − z^L_u (exact where the interior-point λ has
    stalled on near-duplicate links) — and the smaller gap is kept (both are valid bounds)."""
    gap = _certificate_one(N, h, link, P, lam, nu=nu, starts=starts, eps=eps)
    if zL is not None:
        step = nu - N / P - zL
        csum = np.cumsum(step, axis=1)
        first = csum[:, starts] - step[:, starts]  # running sum before each chain
        lens = np.diff(np.r_[starts, N.shape[1]])
        lam2 = csum - np.repeat(first, lens, axis=1)
        gap = np.minimum(gap, _certificate_one(N, h, link, P, lam2, nu=nu, starts=starts, eps=eps))
    return gap


def _certificate_one(
    N: np.ndarray,
    h: np.ndarray,
    link: np.ndarray,
    P: np.ndarray,
    lam: np.ndarray,
    *,
    nu: np.ndarray,
    starts: np.ndarray,
    eps: float,
) -> np.ndarray:
    lam = np.where(link, lam, 0.0)
    kappa = np.where(link, np.median(lam, axis=0), 0.0)
    lam = lam - kappa
    s = np.zeros_like(lam)
    s[:, 1:] = lam[:, :-1]
    s -= lam
    tau0 = nu + shift(kappa) - kappa
    inner = _inner_bound(N, s, tau0, eps)
    dual = np.add.reduceat(inner + np.where(link, h, 0.0) * np.abs(lam).sum(axis=0), starts)
    primal = np.add.reduceat(np.where(N > 0, N * np.log(P), 0.0).sum(axis=0), starts)
    return (dual - primal) / (1.0 + np.abs(primal))


class SimplexChains:
    """The simplex-chain program for :func:`~.interior_point.solve_chains`: per-entry arrays class-major (J × n),
    floors π ≥ ε, the level equalities through ν and the reduced banded factorisation."""

    floors: tuple[int, ...] = (-1,)

    def __init__(self, N: np.ndarray, h: np.ndarray, starts: np.ndarray, eps: float):
        n, J = N.shape
        self.N, self.h, self.eps, self.J = N, h, eps, J
        self.width = J
        self.reset = 1.0 / J
        self.chains = Chains(starts, n)
        self.hh = np.where(self.chains.link, h, 1.0)
        self.Nt = np.ascontiguousarray(N.T)
        self.level_weight = self.Nt.sum(axis=0)

    def start(self) -> np.ndarray:
        ch = self.chains
        sumW = np.add.reduceat(self.level_weight, ch.starts)
        pooled = np.add.reduceat(self.N, ch.starts) / sumW[:, None]
        return np.ascontiguousarray((0.9 * pooled + 0.1 / self.J)[ch.chain].T)

    def gradient(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ip = 1.0 / x
        return -self.Nt * ip, self.Nt * ip * ip

    def equality(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        nu = -r.mean(axis=0)  # least-squares equality multiplier; the reduced step does not depend on it
        r += nu
        return r, nu

    def factor(self, diag: np.ndarray, om: np.ndarray, active: np.ndarray | None) -> tuple[Any, int | None]:
        fac, code = _reduced_factor(diag, om, active)
        if code == 0:
            return fac, None
        return None, min((code - 1) // max(self.J - 1, 1), self.chains.n - 1)

    def solve(self, fac: Any, rhs: np.ndarray) -> np.ndarray:
        return _reduced_solve(fac, rhs)

    def certificate(
        self, x: np.ndarray, lam: np.ndarray, zF: list[np.ndarray], nu: np.ndarray, which: np.ndarray | None
    ) -> np.ndarray:
        ch, zL = self.chains, zF[0]
        if which is None:
            return simplex_certificate(self.Nt, self.hh, ch.link, x, lam, nu=nu, starts=ch.starts, eps=self.eps, zL=zL)
        lv = which[ch.chain]
        sub_starts = np.r_[0, np.cumsum(ch.lens[which])[:-1]]
        gap = np.full(ch.n_chains, np.inf)
        gap[which] = simplex_certificate(
            self.Nt[:, lv],
            self.hh[lv],
            ch.link[lv],
            x[:, lv],
            lam[:, lv],
            nu=nu[lv],
            starts=sub_starts,
            eps=self.eps,
            zL=zL[:, lv],
        )
        return gap

    def finish(self, x: np.ndarray, lam: np.ndarray, zF: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        P = np.maximum(x, self.eps)
        P /= P.sum(axis=0)
        nu = -(-self.Nt / P + shift(lam) - lam - zF[0]).mean(axis=0)
        return P, nu

    def output(self, x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x.T)

    def rescue(self, x: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """The barrier method from the interior-point iterate and from the pooled rows (a centred feasible start:
        the iterate of a failed run can sit so near a bound that centring stalls there); the better optimum."""
        N, h = self.N[lo:hi], self.h[lo:hi]
        q = N.sum(axis=0) / N.sum()
        pooled = np.tile(0.9 * q + 0.1 / N.shape[1], (len(N), 1))
        runs = [simplex_barrier_chain(N, h, start, self.eps) for start in (x, pooled)]
        return max(runs, key=lambda P: float(np.where(N > 0, N * np.log(P), 0.0).sum()))

    def subset(self, levels: np.ndarray, starts: np.ndarray) -> SimplexChains:
        return SimplexChains(self.N[levels], self.h[levels], starts, self.eps)


def lipschitz_simplex_mstep(
    N: np.ndarray, h: np.ndarray, starts: np.ndarray, *, eps: float = 1e-6, max_iter: int = 60
) -> tuple[np.ndarray, MStepInfo]:
    """Solve the stacked simplex-chain programs (module docstring) exactly.

    ``N``: levels × J weighted counts (rows with Σ_j N > 0; the callers drop zero-weight levels); ``starts``: first
    level of every chain (chains contiguous, levels sorted); ``h[u]`` > 0 bounds the link u → u+1 (ignored at a
    chain's last level).  Chains whose per-level optimum (:func:`floored_simplex`) is feasible return it; the others
    go through the interior-point method."""
    N = np.asarray(N, float)
    h = np.asarray(h, float)
    starts = np.asarray(starts, dtype=np.int64)
    n, J = N.shape
    if n == 0:
        return np.zeros((0, J)), MStepInfo(n_chains=len(starts))
    if J * eps >= 0.05:
        raise UserInputError(f"eps = {eps} is too large for {J} classes (need eps · classes < 0.05).")

    def solve_some(sel: np.ndarray, sub_starts: np.ndarray) -> tuple[np.ndarray, MStepInfo]:
        return solve_chains(SimplexChains(N[sel], h[sel], sub_starts, eps), max_iter)

    return solve_violating(floored_simplex(N, eps), h, starts, solve_some)


def simplex_barrier_chain(N: np.ndarray, h: np.ndarray, P0: np.ndarray, eps: float) -> np.ndarray:
    """Primal log-barrier method with the simplex equalities (Boyd & Vandenberghe §11.3, Newton steps on the
    equality-constrained centring problem through the reduced banded factorisation); levels × J arrays."""
    n, J = N.shape
    link = np.ones(n, bool)
    link[-1] = False
    lf = link.astype(float)[:, None]
    hh = np.where(link, h, 1.0)[:, None]

    def rows_shift(v: np.ndarray) -> np.ndarray:
        return shift(v.T).T

    def slacks(P: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        d = np.zeros_like(P)
        d[:-1] = P[1:] - P[:-1]
        d *= lf
        return np.where(lf > 0, hh - d, 1.0), np.where(lf > 0, hh + d, 1.0), P - eps

    def objective(P: np.ndarray) -> float:
        return float(np.where(N > 0, N * np.log(P), 0.0).sum())

    def barrier(P: np.ndarray, t: float) -> float:
        sU, sD, sL = slacks(P)
        if (sU <= 0).any() or (sD <= 0).any() or (sL <= 0).any():
            return np.inf
        return float(-t * objective(P) - (np.log(sU) * lf).sum() - (np.log(sD) * lf).sum() - np.log(sL).sum())

    def newton(P: np.ndarray, t: float) -> tuple[np.ndarray, float] | None:
        sU, sD, sL = slacks(P)
        iu, idn = lf / sU, lf / sD
        grad = t * (-N / P) + (rows_shift(iu) - iu) - (rows_shift(idn) - idn) - 1.0 / sL
        om = lf * (1.0 / sU**2 + 1.0 / sD**2)
        diagP = t * (N / P**2) + 1.0 / sL**2 + om + rows_shift(om)
        fac, code = _reduced_factor(np.ascontiguousarray(diagP.T), np.ascontiguousarray(om.T), None)
        if code != 0:
            return None
        dx = _reduced_solve(fac, np.ascontiguousarray(-grad.T)).T
        return dx, float(-(grad * dx).sum())

    P = P0 / P0.sum(axis=1, keepdims=True)
    if not np.isfinite(barrier(P, 1.0)):
        q = N.sum(axis=0) / N.sum()
        P = np.tile(0.9 * q + 0.1 / J, (n, 1))
    return barrier_path(P, barrier=barrier, newton=newton, objective=objective, m=J * (3 * n - 2))


def categorical_simplex_mstep(N: np.ndarray, c: float, eps: float = 1e-6) -> np.ndarray:
    """Categorical context with the discrete metric (spec §5.4), confusion rows (§9.2 option 2): maximise
    Σ_u Σ_j N[u, j] log π[u, j] s.t. rows on the simplex, π ≥ ε and |π[a, j] − π[b, j]| ≤ c for every pair of
    categories, i.e. L_j ≤ π[u, j] ≤ L_j + c for some window L.  Primal log-barrier method (Boyd & Vandenberghe
    §11.3) on (π, L) with the simplex equalities in a dense KKT system — the constraint graph is complete, so there
    is no band; fine for the ≤ 300 categories accepted.  Suboptimality after the last centring ≤ m / t ≤
    1e-10 (1 + |ψ|)."""
    N = np.asarray(N, float)
    U, J = N.shape
    P0 = floored_simplex(N, eps)
    if c >= 1.0 or U < 2 or (P0.max(axis=0) - P0.min(axis=0)).max() <= c:
        return P0
    q = 0.9 * N.sum(axis=0) / N.sum() + 0.1 / J
    nP = U * J
    nv = nP + J
    A = np.zeros((U, nv))
    A[np.repeat(np.arange(U), J), np.arange(nP)] = 1.0

    def parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        P, L = x[:nP].reshape(U, J), x[nP:]
        return P - L, L + c - P, P - eps

    def objective(x: np.ndarray) -> float:
        return float(np.where(N > 0, N * np.log(x[:nP].reshape(U, J)), 0.0).sum())

    def barrier(x: np.ndarray, t: float) -> float:
        s1, s2, s3 = parts(x)
        if (s1 <= 0).any() or (s2 <= 0).any() or (s3 <= 0).any():
            return np.inf
        return float(-t * objective(x) - np.log(s1).sum() - np.log(s2).sum() - np.log(s3).sum())

    def newton(x: np.ndarray, t: float) -> tuple[np.ndarray, float] | None:
        """Newton step on (π, L) from the dense KKT system with the level equalities."""
        P = x[:nP].reshape(U, J)
        s1, s2, s3 = parts(x)
        gP = -t * N / P - 1 / s1 + 1 / s2 - 1 / s3
        gL = (1 / s1).sum(axis=0) - (1 / s2).sum(axis=0)
        w = 1 / s1**2 + 1 / s2**2  # π–L coupling: ∂²/∂π∂L = −w
        idx = np.arange(nP)
        lj = nP + np.tile(np.arange(J), U)
        K = np.zeros((nv + U, nv + U))
        K[idx, idx] = (t * N / P**2 + 1 / s1**2 + 1 / s2**2 + 1 / s3**2).ravel()
        K[idx, lj] = -w.ravel()
        K[lj, idx] = -w.ravel()
        K[nP + np.arange(J), nP + np.arange(J)] = w.sum(axis=0)
        K[:nv, nv:] = A.T
        K[nv:, :nv] = A
        try:
            sol = np.linalg.solve(K, np.concatenate([-gP.ravel(), -gL, np.zeros(U)]))
        except np.linalg.LinAlgError:
            return None
        return sol[:nv], float(-(gP * sol[:nP].reshape(U, J)).sum() - (gL * sol[nP:nv]).sum())

    x0 = np.concatenate([np.tile(q, (U, 1)).ravel(), q - 0.5 * c])
    x = barrier_path(x0, barrier=barrier, newton=newton, objective=objective, m=3 * U * J, outer=60, min_step=1e-14)
    P = np.maximum(x[:nP].reshape(U, J), eps)
    return P / P.sum(axis=1, keepdims=True)
