"""Per-class confusion curves for ``context-em`` (spec ``context.md`` §9.2 option 2, [EXT]).

Each annotator k has a confusion matrix π_k(x)[i, j] = P(ŷ_k = j | y = i, x) over the context x; every entry is
c_ik-Lipschitz in x and every row lies on the simplex.  The M-step of row (k, i) is

    maximise Σ_u Σ_j n_{u,j} log π_{u,j}   s.t.  Σ_j π_{u,j} = 1,  |π_{u+1,j} − π_{u,j}| ≤ h_u,  π ≥ ε,

a concave program with linear constraints.  :func:`lipschitz_simplex_mstep` solves all (k, i) rows of one
M-step at once by the §6 primal–dual interior-point method (Mehrotra predictor–corrector, per-chain step
lengths, finished chains get identity blocks, a chain whose factorisation breaks down is frozen) extended by one
equality per level.  The spec suggests the banded KKT system with the equalities kept (level-major, bandwidth
O(J), banded LU); that system is numerically singular once barrier weights reach ~1e14 on near-duplicate contexts
(the J link constraints of two levels and their two equalities are linearly dependent; measured: KKT residuals of
order 1, no convergence).  The equalities are therefore eliminated per level with a null-space basis whose
dependent entry is the one with the smallest Newton diagonal; the reduced Newton matrix is symmetric positive
definite and banded with half-bandwidth 2J − 3 (tridiagonal for J = 2), factorised once per iteration by
LAPACK's banded Cholesky (``dpbtrf``/``dpbtrs``): O(U J²) per iteration, as in the spec.  A duality-gap
certificate (the §6.5 bound with an inner simplex dual per level) accepts each row; a row that fails it goes to
an equality-constrained log-barrier fallback.

With J = 2 the program is exactly the binary chain program of §5.3 (π_{u,1} = p_u, π_{u,0} = 1 − p_u; the two
entries' Lipschitz constraints coincide and the floors give [ε, 1 − ε]), so the model reproduces the binary
two-coin curves (tested).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack

from fusion_core.errors import UserInputError
from fusion_core.methods.base import log_normalize


@dataclass
class SimplexMStepInfo:
    """Diagnostics of one batched simplex-chain M-step."""

    iterations: int = 0
    gap: float = 0.0  # largest relative certificate gap
    n_chains: int = 0
    n_closed_form: int = 0
    n_frozen: int = 0
    n_fallback: int = 0


# ====================================================================== small helpers


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


def _shift(v: np.ndarray) -> np.ndarray:
    out = np.empty_like(v)
    out[0] = 0.0
    out[1:] = v[:-1]
    return out


def _chain_index(starts: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ends = np.r_[starts[1:], n]
    lens = ends - starts
    chain = np.repeat(np.arange(len(starts)), lens)
    link = np.ones(n, bool)
    link[ends - 1] = False
    return lens, chain, link


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


def _reduced_factor(diagP: np.ndarray, om: np.ndarray, act: np.ndarray | None):
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


def _reduced_solve(fac, g: np.ndarray) -> np.ndarray:
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


def _level_of(pos: int, J: int) -> int:
    return pos // max(J - 1, 1)


# ====================================================================== certificate


def _inner_bound(N: np.ndarray, s: np.ndarray, tau0: np.ndarray, eps: float, n_steps: int = 8) -> np.ndarray:
    """Upper bound on max_{π_u ∈ simplex, π ≥ ε} Σ_j n_j log π_j − s_j π_j per level (columns of the class-major
    J × n arrays ``N``, ``s``) by weak
    duality on the simplex equality: φ(τ) = τ + Σ_j max_{π ∈ [ε, 1]} (n_j log π − (s_j + τ) π) ≥ the maximum for
    every τ, with equality at the minimiser.  φ is convex with φ'(τ) = 1 − Σ_j π_j(τ) increasing; safeguarded Newton
    steps inside a bracket from ``tau0`` (the solver's ν), keeping the smallest value seen."""

    def value(tau):
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


def _certificate(N, h, link, P, lam, nu, starts, eps, zL=None) -> np.ndarray:
    """Relative duality gap (ψ̄ − ψ(π)) / (1 + |ψ(π)|) per chain: the §6.5 bound with the chain constraints
    dualised by λ = z^U − z^D and each level's simplex maximised by :func:`_inner_bound` (a valid bound for any
    multipliers, tight at the optimum).  Adding a constant κ_u to all J multipliers of a link is absorbed by the
    levels' τ (Σ_j Δπ_j = 0), so the dual is degenerate along that direction and the solver's λ can drift along it
    on near-duplicate contexts; the per-link median is removed first (it only tightens the bound).  All per-entry
    arrays are class-major (J × n).  With ``zL`` a second λ is tried — rebuilt from the stationarity conditions by
    a running sum along each chain, λ_u = λ_{u−1} + ν_u − n_u/π_u − z^L_u (exact where the interior-point λ has
    stalled on near-duplicate links) — and the smaller gap is kept (both are valid bounds)."""
    gap = _certificate_one(N, h, link, P, lam, nu, starts, eps)
    if zL is not None:
        step = nu - N / P - zL
        csum = np.cumsum(step, axis=1)
        first = csum[:, starts] - step[:, starts]  # running sum before each chain
        lens = np.diff(np.r_[starts, N.shape[1]])
        lam2 = csum - np.repeat(first, lens, axis=1)
        gap = np.minimum(gap, _certificate_one(N, h, link, P, lam2, nu, starts, eps))
    return gap


def _certificate_one(N, h, link, P, lam, nu, starts, eps) -> np.ndarray:
    lam = np.where(link, lam, 0.0)
    kappa = np.where(link, np.median(lam, axis=0), 0.0)
    lam = lam - kappa
    s = np.zeros_like(lam)
    s[:, 1:] = lam[:, :-1]
    s -= lam
    tau0 = nu + _shift(kappa) - kappa
    inner = _inner_bound(N, s, tau0, eps)
    dual = np.add.reduceat(inner + np.where(link, h, 0.0) * np.abs(lam).sum(axis=0), starts)
    primal = np.add.reduceat(np.where(N > 0, N * np.log(P), 0.0).sum(axis=0), starts)
    return (dual - primal) / (1.0 + np.abs(primal))


# ====================================================================== solver


def lipschitz_simplex_mstep(
    N: np.ndarray, h: np.ndarray, starts: np.ndarray, eps: float = 1e-6, max_iter: int = 60
) -> tuple[np.ndarray, SimplexMStepInfo]:
    """Solve the stacked simplex-chain programs of spec §9.2 option 2 exactly:

    maximise Σ_u Σ_j N[u, j] log π[u, j]  s.t. Σ_j π[u, j] = 1, |π[u+1, j] − π[u, j]| ≤ h[u] within each chain,
    π ≥ ε.

    ``N``: levels × J weighted counts (rows with Σ_j N > 0; the callers drop zero-weight levels); ``starts``: first
    level of every chain (chains contiguous, levels sorted); ``h[u]`` > 0 bounds the link u → u+1 (ignored at a
    chain's last level).  Chains whose per-level optimum (:func:`floored_simplex`) is feasible return it; the others
    go through the batched interior-point method (one banded LU per iteration for all chains)."""
    N = np.asarray(N, float)
    h = np.asarray(h, float)
    starts = np.asarray(starts, dtype=np.int64)
    n, J = N.shape
    info = SimplexMStepInfo(n_chains=len(starts))
    if n == 0:
        return np.zeros((0, J)), info
    if J * eps >= 0.05:
        raise UserInputError(f"eps = {eps} is too large for {J} classes (need eps · classes < 0.05).")
    lens, chain, link = _chain_index(starts, n)
    P = floored_simplex(N, eps)
    d = np.zeros_like(P)
    d[:-1] = P[1:] - P[:-1]
    viol = link & (np.abs(d) > h[:, None]).any(axis=1)
    bad = np.add.reduceat(viol.astype(np.int64), starts) > 0
    info.n_closed_form = int((~bad).sum())
    if not bad.any():
        return P, info
    sel = bad[chain]
    sub_starts = np.r_[0, np.cumsum(lens[bad])[:-1]]
    P_sub, sub = _simplex_ip(N[sel], h[sel], sub_starts, eps, max_iter)
    P[sel] = P_sub
    info.iterations, info.gap, info.n_frozen, info.n_fallback = sub.iterations, sub.gap, sub.n_frozen, sub.n_fallback
    return P, info


def _simplex_ip(N, h, starts, eps, max_iter) -> tuple[np.ndarray, SimplexMStepInfo]:
    """Batched Mehrotra predictor–corrector (spec §6.3 with one equality multiplier ν_u per level).

    Internally every per-entry array is stored class-major (J × n) so that sums over the J entries of a level
    combine J long rows (fast) instead of reducing a short last axis."""
    n, J = N.shape
    nch = len(starts)
    lens, chain, link = _chain_index(starts, n)
    lf = link.astype(float)
    hh = np.where(link, h, 1.0)
    Nt = np.ascontiguousarray(N.T)
    W = Nt.sum(axis=0)
    sumW = np.add.reduceat(W, starts)
    m_c = (J * (3 * lens - 2)).astype(float)
    pooled = np.add.reduceat(N, starts) / sumW[:, None]
    P = np.ascontiguousarray((0.9 * pooled + 0.1 / J)[chain].T)

    def diffs(v):
        out = np.empty_like(v)
        out[:, :-1] = v[:, 1:] - v[:, :-1]
        out[:, -1] = 0.0
        out *= lf
        return out

    def shift(v):
        out = np.empty_like(v)
        out[:, 0] = 0.0
        out[:, 1:] = v[:, :-1]
        return out

    def colsum(v):
        return v.sum(axis=0)

    dP0 = diffs(P)
    sU = np.where(link, hh - dP0, 1.0)
    sD = np.where(link, hh + dP0, 1.0)
    sL = P - eps
    mu0 = (0.01 * sumW / lens)[chain]
    zU = lf * mu0 / sU
    zD = lf * mu0 / sD
    zL = mu0 / sL
    done = np.zeros(nch, bool)
    frozen = np.zeros(nch, bool)
    info = SimplexMStepInfo(n_chains=nch)
    tmp = np.empty((J, n))

    def max_step(pairs):
        lvl = np.full((J, n), np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            for v, dv in pairs:
                np.negative(dv, out=tmp)
                np.maximum(tmp, 0.0, out=tmp)
                np.divide(v, tmp, out=tmp)
                np.fmin(lvl, tmp, out=lvl)
        return np.minimum.reduceat(lvl.min(axis=0), starts)

    def certificate(P_, lam_, nu_, which=None):
        """Certificate gaps per chain; with ``which`` only for those chains (others +inf)."""
        if which is None:
            return _certificate(Nt, hh, link, P_, lam_, nu_, starts, eps, zL)
        lv = which[chain]
        sub_starts = np.r_[0, np.cumsum(lens[which])[:-1]]
        g = np.full(nch, np.inf)
        g[which] = _certificate(
            Nt[:, lv], hh[lv], link[lv], P_[:, lv], lam_[:, lv], nu_[lv], sub_starts, eps, zL[:, lv]
        )
        return g

    it = 0
    fac = None
    nu = np.zeros(n)
    for it in range(1, max_iter + 1):
        ip = 1.0 / P
        fp = -Nt * ip
        H = Nt * ip * ip
        lam = zU - zD
        r = fp + shift(lam) - lam - zL
        nu = -r.mean(axis=0)  # least-squares equality multiplier; the reduced step does not depend on it
        r += nu
        dP = diffs(P)
        rpU = lf * (dP - hh + sU)
        rpD = lf * (-dP - hh + sD)
        rpL = -P + eps + sL
        cU, cD, cL = sU * zU, sD * zD, sL * zL
        comp = np.add.reduceat(colsum(cU + cD + cL), starts)
        mu = comp / m_c
        res = np.add.reduceat(colsum(np.abs(r)), starts)
        fin = (comp <= 1e-10 * sumW) & (res <= 1e-10 * sumW)
        near = (comp <= 1e-6 * sumW) & ~fin & ~done
        if near.any():
            gap = certificate(P, lam, nu, near)
            fin |= near & (gap <= 1e-9)
        done |= fin
        active = ~done & ~frozen
        if not active.any():
            break
        wU, wD, wL = zU / sU, zD / sD, zL / sL
        om = (wU + wD) * lf
        while True:
            act = None if active.all() else active[chain]
            diagP = H + wL + om + shift(om)
            bad_rows = ~np.isfinite(diagP).all(axis=0)
            if bad_rows.any():
                frozen[np.unique(chain[bad_rows])] = True
            else:
                fac, code = _reduced_factor(diagP, om, act)
                if code == 0:
                    break
                bad = chain[min(_level_of(code - 1, J), n - 1)]
                one = np.zeros(nch, bool)
                one[bad] = True
                if certificate(P, lam, nu, one)[bad] <= 1e-8:
                    done[bad] = True  # the factorisation broke down at an already optimal point
                else:
                    frozen[bad] = True  # §6.3 step 7
            active = ~done & ~frozen
            if not active.any():
                break
        if not active.any():
            break
        actf = active[chain].astype(float)

        def solve(rcU, rcD, rcL):
            vU = rcU / sU - wU * rpU
            vD = rcD / sD - wD * rpD
            vL = rcL / sL - wL * rpL
            rhs = ((shift(vU) - vU) - (shift(vD) - vD) - vL - r) * actf
            dp = _reduced_solve(fac, rhs) * actf
            dd = diffs(dp)
            dsU = (-rpU - dd) * actf
            dsD = (-rpD + dd) * actf
            dsL = (dp - rpL) * actf
            dzU = -(rcU + zU * dsU) / sU
            dzD = -(rcD + zD * dsD) / sD
            dzL = -(rcL + zL * dsL) / sL
            return dp, (dsU, dsD, dsL), (dzU, dzD, dzL)

        S = (sU, sD, sL)
        Z = (zU, zD, zL)
        _, dS, dZ = solve(cU, cD, cL)
        a_aff = np.minimum(1.0, max_step(list(zip(S, dS)) + list(zip(Z, dZ))))[chain]
        comp_aff = colsum(sum((s_ + a_aff * ds_) * (z_ + a_aff * dz_) for s_, ds_, z_, dz_ in zip(S, dS, Z, dZ)))
        mu_aff = np.add.reduceat(comp_aff, starts) / m_c
        sigma = np.clip(mu_aff / np.maximum(mu, 1e-300), 0.0, 1.0) ** 3
        smu = (sigma * mu)[chain]
        rc = [c_ + ds_ * dz_ - smu for c_, ds_, dz_ in zip((cU, cD, cL), dS, dZ)]
        rc[0] *= lf
        rc[1] *= lf
        dp, dS, dZ = solve(*rc)
        alpha = np.minimum(1.0, 0.995 * max_step(list(zip(S, dS)) + list(zip(Z, dZ))))
        alpha = (alpha * active)[chain]
        P = P + alpha * dp
        sU, sD, sL = (s_ + alpha * ds_ for s_, ds_ in zip(S, dS))
        zU, zD, zL = (z_ + alpha * dz_ for z_, dz_ in zip(Z, dZ))
        bad_rows = ~np.isfinite(P).all(axis=0)
        if bad_rows.any():
            frozen[np.unique(chain[bad_rows])] = True
            P = np.where(np.isfinite(P), P, 1.0 / J)
    info.iterations = it
    P = np.maximum(P, eps)
    P /= colsum(P)
    lam = zU - zD
    nu = -(-Nt / P + shift(lam) - lam - zL).mean(axis=0)
    gap = certificate(P, lam, nu)
    P = np.ascontiguousarray(P.T)
    failed = np.flatnonzero(gap > 1e-8)  # frozen chains whose last iterate passes the certificate are kept
    info.n_frozen = int(frozen.sum())
    ends = np.r_[starts[1:], n]
    for c in failed:  # fallback: equality-constrained primal log-barrier method on the chain
        lo, hi = starts[c], ends[c]
        P[lo:hi] = _simplex_barrier_chain(N[lo:hi], h[lo:hi], P[lo:hi], eps)
        info.n_fallback += 1
    if len(failed):
        gap[failed] = 0.0  # the barrier iterate carries no multipliers; its suboptimality is bounded by m / t
    info.gap = float(gap.max()) if len(gap) else 0.0
    return P, info


def _simplex_barrier_chain(N, h, P0, eps) -> np.ndarray:
    """Primal log-barrier method with the simplex equalities (Boyd & Vandenberghe §11.3, Newton steps on the
    equality-constrained centring problem through the same banded KKT matrix)."""
    n, J = N.shape
    link = np.ones(n, bool)
    link[-1] = False
    lf = link.astype(float)[:, None]
    hh = np.where(link, h, 1.0)[:, None]

    def diffs(v):
        out = np.zeros_like(v)
        out[:-1] = v[1:] - v[:-1]
        return out * lf

    def slacks(P):
        d = diffs(P)
        return np.where(lf > 0, hh - d, 1.0), np.where(lf > 0, hh + d, 1.0), P - eps

    def barrier(P, t):
        sU, sD, sL = slacks(P)
        if (sU <= 0).any() or (sD <= 0).any() or (sL <= 0).any():
            return np.inf
        f = -np.where(N > 0, N * np.log(P), 0.0).sum()
        return t * f - (np.log(sU) * lf).sum() - (np.log(sD) * lf).sum() - np.log(sL).sum()

    P = P0 / P0.sum(axis=1, keepdims=True)
    if not np.isfinite(barrier(P, 1.0)):
        q = N.sum(axis=0) / N.sum()
        P = np.tile(0.9 * q + 0.1 / J, (n, 1))
    m = J * (3 * n - 2)
    t = 1.0
    for _ in range(40):
        for _ in range(100):
            sU, sD, sL = slacks(P)
            fp = -N / P
            H = N / P**2
            iu, idn = lf / sU, lf / sD
            grad = t * fp + (_shift(iu) - iu) - (_shift(idn) - idn) - 1.0 / sL
            om = lf * (1.0 / sU**2 + 1.0 / sD**2)
            diagP = t * H + 1.0 / sL**2 + om + _shift(om)
            fac, code = _reduced_factor(np.ascontiguousarray(diagP.T), np.ascontiguousarray(om.T), None)
            if code != 0:
                return P
            dx = _reduced_solve(fac, np.ascontiguousarray(-grad.T)).T
            dec = -(grad * dx).sum()
            if dec / 2 <= 1e-12:
                break
            step, b0 = 1.0, barrier(P, t)
            while barrier(P + step * dx, t) > b0 - 0.25 * step * dec and step > 1e-12:
                step *= 0.5
            P = P + step * dx
        if m / t <= 1e-10 * (1 + abs(np.where(N > 0, N * np.log(P), 0.0).sum())):
            break
        t *= 10.0
    return P


# ====================================================================== the confusion-curve model (§9.2 option 2)


def confusion_mstep(
    N: np.ndarray,
    pair_worker: np.ndarray,
    pair_level: np.ndarray,
    x_levels: np.ndarray,
    c: np.ndarray,
    eps: float,
    discrete: bool = False,
    pos: int = 1,
) -> tuple[np.ndarray, SimplexMStepInfo]:
    """M-step of every row (worker k, true class i): ``N`` is J × npair × J (true, (worker, level) pair, reported)
    weighted counts, pairs sorted by worker then level; ``c`` is J × workers.  Returns π at the pairs
    (npair × J × J) and the solver diagnostics.  c = 0 rows pool all levels (the Dawid–Skene row); zero-weight
    pairs of constrained rows are dropped from the program and filled by the interpolation (17)–(19) (§5.2);
    categorical contexts (§5.4): c ≥ 1 decouples categories, J = 2 uses the exact binary window program and J > 2
    the all-pairs program of :func:`categorical_simplex_mstep`."""
    from fusion_core.methods.context import discrete_mstep

    J, npair, _ = N.shape
    out = np.empty((npair, J, J))
    info = SimplexMStepInfo()
    if npair == 0:
        return out, info
    first = np.r_[True, pair_worker[1:] != pair_worker[:-1]]
    wstarts = np.flatnonzero(first)
    chain_worker = pair_worker[wstarts]
    chain_of = np.cumsum(first) - 1
    xp = x_levels[pair_level]
    blocks_N, blocks_h, blocks_st, places = [], [], [], []
    offset = 0
    for i in range(J):
        Ni = N[i]
        W = Ni.sum(axis=1)
        cw = c[i][chain_worker]
        tot = np.add.reduceat(Ni, wstarts, axis=0)
        has = tot.sum(axis=1) > 0
        pooled = np.full(tot.shape, 1.0 / J)
        if has.any():
            pooled[has] = floored_simplex(tot[has], eps)
        out[:, i, :] = pooled[chain_of]
        sel = (W > 0) & (cw > 0)[chain_of]
        if not sel.any():
            continue
        idx = np.flatnonzero(sel)
        places.append((i, idx))
        if discrete:
            for ch in np.unique(chain_of[idx]):
                part = idx[chain_of[idx] == ch]
                cv = float(cw[ch])
                if cv >= 1.0:
                    out[part, i, :] = floored_simplex(Ni[part], eps)
                elif J == 2:
                    p = discrete_mstep(Ni[part, pos], Ni[part, 1 - pos], cv, eps)
                    out[part, i, pos] = p
                    out[part, i, 1 - pos] = 1.0 - p
                else:
                    out[part, i, :] = categorical_simplex_mstep(Ni[part], cv, eps)
            continue
        ch = chain_of[idx]
        xs = xp[idx]
        same = np.r_[ch[1:] == ch[:-1], False]
        h = np.zeros(len(idx))
        h[:-1] = cw[ch[:-1]] * (xs[1:] - xs[:-1])
        h = np.where(same, h, 0.0)
        blocks_N.append(Ni[idx])
        blocks_h.append(h)
        blocks_st.append(np.flatnonzero(np.r_[True, ch[1:] != ch[:-1]]) + offset)
        offset += len(idx)
    if offset:
        P, info = lipschitz_simplex_mstep(
            np.concatenate(blocks_N), np.concatenate(blocks_h), np.concatenate(blocks_st), eps
        )
        pos = 0
        for i, idx in places:
            if not discrete:
                out[idx, i, :] = P[pos : pos + len(idx)]
                pos += len(idx)
    for i, idx in places:  # zero-weight pairs inside constrained rows: interpolation (§5.2, §7)
        W = N[i].sum(axis=1)
        constrained = np.zeros(npair, bool)
        constrained[np.flatnonzero(np.isin(chain_of, np.unique(chain_of[idx])))] = True
        missing = np.flatnonzero(constrained & (W <= 0))
        for ch in np.unique(chain_of[missing]):
            k = np.flatnonzero(chain_of == ch)
            ok, miss = k[W[k] > 0], k[W[k] <= 0]
            if len(ok):
                cv = float(c[i][chain_worker[ch]])
                out[miss, i, :] = _interp_rows(xp[ok], out[ok, i, :], cv, xp[miss], "paper", discrete, eps, pos)
    return out, info


def _interp_rows(xs, rows, c, xq, mode, discrete, eps, pos: int = 1) -> np.ndarray:
    """Interpolate confusion rows (levels × J) to ``xq`` entry by entry by (17)–(19), then back onto the simplex:
    J = 2 keeps the binary model's convention (interpolate the positive class's entry ``pos``, the other is its
    complement; the lower extension (19) is not symmetric under p ↦ 1 − p);
    J > 2 clips at ``eps`` and renormalises."""
    from fusion_core.methods.context import interpolate_levels

    J = rows.shape[1]
    if J == 2:
        p = np.clip(interpolate_levels(xs, rows[:, pos], c, xq, mode, discrete), eps, 1 - eps)
        return np.column_stack([1 - p, p]) if pos == 1 else np.column_stack([p, 1 - p])
    vals = np.column_stack([interpolate_levels(xs, rows[:, j], c, xq, mode, discrete) for j in range(J)])
    vals = np.maximum(vals, eps)
    return vals / vals.sum(axis=1, keepdims=True)


@dataclass
class ConfusionFit:
    Pi: np.ndarray  # npair × J (true) × J (reported)
    posterior: np.ndarray  # items × J
    prior: np.ndarray  # J
    trace: list[float]
    n_iter: int
    converged: bool
    gap: float
    n_fallback: int
    max_dP: list[float]
    raw_phi: np.ndarray | None = None


def _conf_e_step(item, pid, label, Pi, log_prior, n_items):
    """E-step γ(i, t) ∝ π_i Π_k π_k(X(t))[i, ŷ_k(t)] in the log domain (§9.2 option 2)."""
    J = Pi.shape[1]
    logPi = np.log(Pi)
    L = np.empty((n_items, J))
    for i in range(J):
        L[:, i] = np.bincount(item, weights=logPi[pid, i, label], minlength=n_items)
    return log_normalize(L + log_prior)


def _conf_stats(item, pid, label, post, npair, J) -> np.ndarray:
    key = pid * J + label
    return np.stack([np.bincount(key, weights=post[item, i], minlength=npair * J).reshape(npair, J) for i in range(J)])


def fit_confusion(
    item,
    worker,
    label,
    pid,
    pair_worker,
    pair_level,
    x_levels,
    c,
    n_items,
    J,
    *,
    variant,
    n_iter,
    tol,
    max_iter,
    eps,
    final_estep,
    pos,
    discrete,
) -> ConfusionFit:
    """EM for the confusion-curve model; mirrors the binary ``_fit_binary`` (same initialisation: diagonal 0.8,
    off-diagonal 0.2/(J − 1); prior 1/J, or the paper's φ_pos = 0.6 when J = 2), so J = 2 reproduces it."""
    npair = len(pair_worker)
    Pi = np.full((npair, J, J), 0.2 / (J - 1))
    Pi[:, np.arange(J), np.arange(J)] = 0.8
    gap, n_fb = 0.0, 0
    trace: list[float] = []
    dPs: list[float] = []
    if variant == "paper":
        phi = np.full((n_items, J), 1.0 / J)
        if J == 2:
            phi[:, pos], phi[:, 1 - pos] = 0.6, 0.4
        post = phi
        for _ in range(int(n_iter)):
            post, lz = _conf_e_step(item, pid, label, Pi, np.log(phi), n_items)
            trace.append(float(lz.sum()))
            phi = np.clip(post, eps, 1 - eps)
            phi /= phi.sum(axis=1, keepdims=True)
            Pn, info = confusion_mstep(
                _conf_stats(item, pid, label, post, npair, J), pair_worker, pair_level, x_levels, c, eps, discrete, pos
            )
            gap, n_fb = max(gap, info.gap), n_fb + info.n_fallback
            dPs.append(float(np.max(np.abs(Pn - Pi))) if npair else 0.0)
            Pi = Pn
        if final_estep:
            post, _ = _conf_e_step(item, pid, label, Pi, np.log(phi), n_items)
        return ConfusionFit(Pi, post, phi.mean(axis=0), trace, int(n_iter), True, gap, n_fb, dPs, raw_phi=post.copy())
    prior = np.full(J, 1.0 / J)
    post, lz = _conf_e_step(item, pid, label, Pi, np.log(prior), n_items)
    trace.append(float(lz.sum()))
    converged = False
    it = 0
    for it in range(1, int(max_iter) + 1):
        Pn, info = confusion_mstep(
            _conf_stats(item, pid, label, post, npair, J), pair_worker, pair_level, x_levels, c, eps, discrete, pos
        )
        gap, n_fb = max(gap, info.gap), n_fb + info.n_fallback
        dPs.append(float(np.max(np.abs(Pn - Pi))) if npair else 0.0)
        Pi = Pn
        prior = np.clip(post.mean(axis=0), eps, 1 - eps)
        prior /= prior.sum()
        post, lz = _conf_e_step(item, pid, label, Pi, np.log(prior), n_items)
        trace.append(float(lz.sum()))
        if abs(trace[-1] - trace[-2]) <= tol * abs(trace[-1]):
            converged = True
            break
    return ConfusionFit(Pi, post, prior, trace, it, converged, gap, n_fb, dPs)


def confusion_at(x_levels, pair_worker, pair_level, Pi, c, xq, w, mode, discrete, eps=0.0, pos: int = 1) -> np.ndarray:
    """Worker ``w``'s confusion matrices at contexts ``xq`` (len(xq) × J × J) by (17)–(19) entry by entry
    (:func:`_interp_rows`); NaN when the worker has no responses."""
    J = Pi.shape[1]
    sel = pair_worker == w
    out = np.full((len(xq), J, J), np.nan)
    if not sel.any():
        return out
    xs = x_levels[pair_level[sel]]
    for i in range(J):
        out[:, i, :] = _interp_rows(xs, Pi[sel, i, :], float(c[i, w]), np.asarray(xq, float), mode, discrete, eps, pos)
    return out


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
    P = np.tile(q, (U, 1))
    L = q - 0.5 * c
    nv = U * J + J
    A = np.zeros((U, nv))
    A[np.repeat(np.arange(U), J), np.arange(U * J)] = 1.0
    m = 3 * U * J

    def parts(P, L):
        return P - L, L + c - P, P - eps

    def barrier(P, L, t):
        s1, s2, s3 = parts(P, L)
        if (s1 <= 0).any() or (s2 <= 0).any() or (s3 <= 0).any():
            return np.inf
        return -t * np.where(N > 0, N * np.log(P), 0.0).sum() - np.log(s1).sum() - np.log(s2).sum() - np.log(s3).sum()

    t = 1.0
    for _ in range(60):
        for _ in range(100):
            s1, s2, s3 = parts(P, L)
            gP = -t * N / P - 1 / s1 + 1 / s2 - 1 / s3
            gL = (1 / s1).sum(axis=0) - (1 / s2).sum(axis=0)
            hP = t * N / P**2 + 1 / s1**2 + 1 / s2**2 + 1 / s3**2
            w = 1 / s1**2 + 1 / s2**2  # π–L coupling: ∂²/∂π∂L = −w
            H = np.zeros((nv, nv))
            idx = np.arange(U * J)
            H[idx, idx] = hP.ravel()
            lj = U * J + np.tile(np.arange(J), U)
            H[idx, lj] = -w.ravel()
            H[lj, idx] = -w.ravel()
            H[U * J + np.arange(J), U * J + np.arange(J)] = w.sum(axis=0)
            K = np.zeros((nv + U, nv + U))
            K[:nv, :nv] = H
            K[:nv, nv:] = A.T
            K[nv:, :nv] = A
            rhs = np.concatenate([-gP.ravel(), -gL, np.zeros(U)])
            try:
                sol = np.linalg.solve(K, rhs)
            except np.linalg.LinAlgError:
                break
            dP = sol[: U * J].reshape(U, J)
            dL = sol[U * J : nv]
            dec = -(gP * dP).sum() - (gL * dL).sum()
            if dec / 2 <= 1e-12:
                break
            step, b0 = 1.0, barrier(P, L, t)
            while barrier(P + step * dP, L + step * dL, t) > b0 - 0.25 * step * dec and step > 1e-14:
                step *= 0.5
            P, L = P + step * dP, L + step * dL
        if m / t <= 1e-10 * (1 + abs(np.where(N > 0, N * np.log(P), 0.0).sum())):
            break
        t *= 10.0
    P = np.maximum(P, eps)
    return P / P.sum(axis=1, keepdims=True)
