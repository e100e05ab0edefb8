"""Context-dependent annotator reliability: Lipschitz-constrained EM (``context-em``).

Soltanmohammadi, Naraghi-Pour & van der Schaar, ICML 2015 (``papers/soltanmohammadi-context-fusion.txt``);
spec ``context.md``.  Each annotator k has a detection curve p_1k(x) (sensitivity) and a false-alarm curve
p_0k(x) (1 − specificity) over a numeric per-item context x, constrained to be c_ik-Lipschitz (eq. 2).

* E-step eq. (7) in the log domain; M-step eq. (14) solved exactly per (class, annotator) on the chain of the
  annotator's distinct context levels (§5.2–§5.3: adjacent constraints are exact in one dimension) by a
  dedicated batched primal–dual interior-point method with tridiagonal Newton systems (§6, Mehrotra
  predictor–corrector, LAPACK ``dpttrf``/``dpttrs``), a duality-gap certificate (§6.5) and a log-barrier fallback.
* Variants (§4): ``"shared_prior"`` (default, [EXT]: one class prior, EM to convergence) and ``"paper"``
  (per-item φ_i(t), fixed ``n_iter`` = 5, decision from the last E-step).
* Smoothness in user terms (§10): ``swing`` s = the largest total change of a curve across the observed
  context range, i.e. c = s / (max x − min x); ``lipschitz`` overrides it (probability per context unit).
* Sparse responses (§9.1, [EXT]) with per-annotator coverage against the context and a warning where fewer than
  3 annotators have responses; multiclass by one-vs-rest (§9.2 option 1, [EXT], default) or per-class confusion
  curves (§9.2 option 2, [EXT], ``multiclass="confusion"``; solver in ``fusion_core/context_solver.py``).
* Curves on a grid and at observed contexts by the interpolation (17)–(19) (§7).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.linalg import lapack

from fusion_core.data.responses import Responses, as_responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import Aggregator, Fit, log_normalize
from fusion_core.methods.registry import register

# ====================================================================== M-step solver (spec §6)


@dataclass
class MStepInfo:
    """Diagnostics of one batched M-step."""

    iterations: int = 0  # interior-point iterations (0 when every chain had a closed form)
    gap: float = 0.0  # largest relative certificate gap (§6.5)
    n_chains: int = 0
    n_closed_form: int = 0
    n_frozen: int = 0
    n_fallback: int = 0


def _shift_right(v: np.ndarray) -> np.ndarray:
    out = np.empty_like(v)
    out[0] = 0.0
    out[1:] = v[:-1]
    return out


def _chain_objective(A, B, p, starts) -> np.ndarray:
    """ψ(p) = Σ_u A_u log p_u + B_u log(1 − p_u), per chain."""
    return np.add.reduceat(A * np.log(p) + B * np.log1p(-p), starts)


def _certificate(A, B, W, h, link, p, lam, starts, eps) -> np.ndarray:
    """Relative duality gap (ψ̄(λ) − ψ(p)) / (1 + |ψ(p)|) per chain (spec §6.5)."""
    lam = np.where(link, lam, 0.0)
    s = _shift_right(lam) - lam
    sw = s + W
    disc = np.sqrt(np.maximum(sw * sw - 4.0 * s * A, 0.0))
    den = sw + disc
    with np.errstate(divide="ignore", invalid="ignore"):
        p_in = np.where(den > 0, 2.0 * A / np.where(den > 0, den, 1.0), 1.0 + B / np.where(s != 0, s, -1.0))
    pstar = np.clip(p_in, eps, 1.0 - eps)
    dual = np.add.reduceat(
        A * np.log(pstar) + B * np.log1p(-pstar) - s * pstar + np.where(link, h * np.abs(lam), 0.0), starts
    )
    primal = _chain_objective(A, B, p, starts)
    return (dual - primal) / (1.0 + np.abs(primal))


def _barrier_chain(A, B, h, p0, eps) -> np.ndarray:
    """Primal log-barrier method on one chain (Boyd & Vandenberghe §11.3), the §6.5 fallback."""
    n = len(A)
    link = np.ones(n, bool)
    link[-1] = False
    hh = np.where(link, h, 1.0)
    p = p0.copy()

    def slacks(p):
        d = np.zeros(n)
        d[:-1] = p[1:] - p[:-1]
        return hh - d, hh + d, p - eps, 1.0 - eps - p

    def barrier(p, t):
        sU, sD, sL, sH = slacks(p)
        if np.any(sL <= 0) or np.any(sH <= 0) or np.any(sU[link] <= 0) or np.any(sD[link] <= 0):
            return np.inf
        f = -(A * np.log(p) + B * np.log1p(-p)).sum()
        return t * f - np.log(sL).sum() - np.log(sH).sum() - np.log(sU[link]).sum() - np.log(sD[link]).sum()

    if not np.isfinite(barrier(p, 1.0)):
        p = np.full(n, np.clip(A.sum() / (A + B).sum(), 0.05, 0.95))
    m = 4 * n - 2
    t = 1.0
    for _ in range(40):
        for _ in range(100):
            sU, sD, sL, sH = slacks(p)
            fp = -A / p + B / (1 - p)
            H = A / p**2 + B / (1 - p) ** 2
            iu = np.where(link, 1 / sU, 0.0)
            idn = np.where(link, 1 / sD, 0.0)
            grad = t * fp + (_shift_right(iu) - iu) - (_shift_right(idn) - idn) + 1 / sL - 1 / sH
            om = np.where(link, 1 / sU**2 + 1 / sD**2, 0.0)
            d = t * H + 1 / sL**2 + 1 / sH**2 + om + _shift_right(om)
            df, ef, info = lapack.dpttrf(d, -om[:-1])
            if info != 0:
                return p
            dx = lapack.dpttrs(df, ef, -grad)[0]
            dec = -grad @ dx
            if dec / 2 <= 1e-12:
                break
            step, b0 = 1.0, barrier(p, t)
            while barrier(p + step * dx, t) > b0 - 0.25 * step * dec and step > 1e-12:
                step *= 0.5
            p = p + step * dx
        if m / t <= 1e-10 * (1 + abs((A * np.log(p) + B * np.log1p(-p)).sum())):
            break
        t *= 10.0
    return p


def lipschitz_chain_mstep(
    A: np.ndarray, B: np.ndarray, h: np.ndarray, starts: np.ndarray, eps: float = 1e-6, max_iter: int = 60
) -> tuple[np.ndarray, MStepInfo]:
    """Solve the stacked chain programs of spec §5.3 exactly:

    maximise Σ_u A_u log p_u + B_u log(1 − p_u)  s.t. |p_{u+1} − p_u| ≤ h_u within each chain, ε ≤ p ≤ 1 − ε.

    ``starts``: first index of every chain (chains are contiguous, levels sorted); ``h[u]`` is the bound of the
    link u → u+1 (ignored at a chain's last level).  Requires W = A + B > 0 and h > 0 on links (the callers drop
    zero-weight levels and contract zero links, §5.2, §5.5).  Chains whose unconstrained optimum
    clip(A/W, ε, 1−ε) is feasible return it directly; the others go through the batched interior-point method
    of §6 (one tridiagonal factorisation per iteration for all chains).
    """
    A = np.asarray(A, float)
    B = np.asarray(B, float)
    h = np.asarray(h, float)
    starts = np.asarray(starts, dtype=np.int64)
    n = len(A)
    info = MStepInfo(n_chains=len(starts))
    if n == 0:
        return np.zeros(0), info
    W = A + B
    ends = np.r_[starts[1:], n]
    lens = ends - starts
    chain = np.repeat(np.arange(len(starts)), lens)
    link = np.ones(n, bool)
    link[ends - 1] = False
    p = np.clip(A / W, eps, 1 - eps)
    d = np.zeros(n)
    d[:-1] = p[1:] - p[:-1]
    viol = link & (np.abs(d) > h)
    bad_chain = np.add.reduceat(viol.astype(np.int64), starts) > 0
    info.n_closed_form = int((~bad_chain).sum())
    if not bad_chain.any():
        return p, info
    sel = bad_chain[chain]
    sub_lens = lens[bad_chain]
    sub_starts = np.r_[0, np.cumsum(sub_lens)[:-1]]
    p_sub, sub_info = _interior_point(A[sel], B[sel], h[sel], sub_starts, eps, max_iter)
    p[sel] = p_sub
    info.iterations = sub_info.iterations
    info.gap = sub_info.gap
    info.n_frozen = sub_info.n_frozen
    info.n_fallback = sub_info.n_fallback
    return p, info


def _interior_point(A, B, h, starts, eps, max_iter) -> tuple[np.ndarray, MStepInfo]:
    """Batched Mehrotra predictor–corrector on stacked chains (spec §6.1–§6.5).

    All four constraint families are stored as length-n vectors indexed by level; the up/down rows of a chain's
    last level are inactive (slack 1, multiplier 0, every step 0), which keeps chains decoupled in one
    tridiagonal Newton matrix."""
    n = len(A)
    nch = len(starts)
    ends = np.r_[starts[1:], n]
    lens = ends - starts
    chain = np.repeat(np.arange(nch), lens)
    link = np.ones(n, bool)
    link[ends - 1] = False
    lf = link.astype(float)
    hh = np.where(link, h, 1.0)
    W = A + B
    sumW = np.add.reduceat(W, starts)
    m_c = (4 * lens - 2).astype(float)
    p = np.clip(np.add.reduceat(A, starts) / sumW, 0.05, 0.95)[chain]

    def diffs(v):
        out = np.empty(n)
        out[:-1] = v[1:] - v[:-1]
        out[-1] = 0.0
        out *= lf
        return out

    def shift(v):
        out = np.empty(n)
        out[0] = 0.0
        out[1:] = v[:-1]
        return out

    dp0 = diffs(p)
    sU = np.where(link, hh - dp0, 1.0)
    sD = np.where(link, hh + dp0, 1.0)
    sL = p - eps
    sH = 1 - eps - p
    mu0 = (0.01 * sumW / lens)[chain]
    zU = lf * mu0 / sU
    zD = lf * mu0 / sD
    zL = mu0 / sL
    zH = mu0 / sH
    done = np.zeros(nch, bool)
    frozen = np.zeros(nch, bool)
    info = MStepInfo(n_chains=nch)
    inf_n = np.full(n, np.inf)

    def max_step(pairs):
        """Largest step keeping every (v + a dv) ≥ 0, per chain; branch-free: v / max(−dv, 0) is +inf where dv ≥ 0."""
        lvl = inf_n.copy()
        tmp = np.empty(n)
        with np.errstate(divide="ignore", invalid="ignore"):
            for v, dv in pairs:
                np.negative(dv, out=tmp)
                np.maximum(tmp, 0.0, out=tmp)
                np.divide(v, tmp, out=tmp)
                np.fmin(lvl, tmp, out=lvl)
        return np.minimum.reduceat(lvl, starts)

    it = 0
    for it in range(1, max_iter + 1):
        ip, iq = 1.0 / p, 1.0 / (1 - p)
        fp = B * iq - A * ip
        H = A * ip * ip + B * iq * iq
        lam = zU - zD
        r = fp + shift(lam) - lam - zL + zH
        dpn = diffs(p)
        rpU = lf * (dpn - hh + sU)
        rpD = lf * (-dpn - hh + sD)
        rpL = -p + eps + sL
        rpH = p - (1 - eps) + sH
        cU, cD, cL, cH = sU * zU, sD * zD, sL * zL, sH * zH
        comp = np.add.reduceat(cU + cD + cL + cH, starts)
        mu = comp / m_c
        res = np.add.reduceat(np.abs(r), starts)
        fin = (comp <= 1e-10 * sumW) & (res <= 1e-10 * sumW)
        near = (comp <= 1e-6 * sumW) & ~fin & ~done
        if near.any():
            gap = _certificate(A, B, W, hh, link, p, lam, starts, eps)
            fin |= near & (gap <= 1e-9)
        done |= fin
        active = ~done & ~frozen
        if not active.any():
            break
        all_active = bool(active.all())
        actf = None if all_active else active[chain].astype(float)
        wU, wD, wL, wH = zU / sU, zD / sD, zL / sL, zH / sH
        om = wU + wD  # zero on inactive links (z = 0 there)
        while True:
            if actf is None:
                diag = H + wL + wH + om + shift(om)
                off = -om[:-1]
            else:
                omA = om * actf
                diag = actf * (H + wL + wH + omA + shift(omA)) + (1 - actf)
                off = -omA[:-1]
            if not np.all(np.isfinite(diag)):
                frozen[np.unique(chain[~np.isfinite(diag)])] = True
            else:
                df, ef, code = lapack.dpttrf(diag, off)
                if code == 0:
                    break
                frozen[chain[code - 1]] = True  # §6.3 step 7: freeze the chain holding the failed pivot
            active = ~done & ~frozen
            if not active.any():
                break
            actf = active[chain].astype(float)
        if not active.any():
            break

        def solve(rcU, rcD, rcL, rcH):
            vU = rcU / sU - wU * rpU
            vD = rcD / sD - wD * rpD
            vL = rcL / sL - wL * rpL
            vH = rcH / sH - wH * rpH
            rhs = (shift(vU) - vU) - (shift(vD) - vD) - vL + vH - r
            if actf is not None:
                rhs *= actf
            dp = lapack.dpttrs(df, ef, rhs)[0]
            if actf is not None:
                dp *= actf
            ddp = diffs(dp)
            dsU = -rpU - ddp
            dsD = -rpD + ddp
            dsL = dp - rpL
            dsH = -rpH - dp
            if actf is not None:
                dsU *= actf
                dsD *= actf
                dsL *= actf
                dsH *= actf
            dzU = -(rcU + zU * dsU) / sU
            dzD = -(rcD + zD * dsD) / sD
            dzL = -(rcL + zL * dsL) / sL
            dzH = -(rcH + zH * dsH) / sH
            return dp, (dsU, dsD, dsL, dsH), (dzU, dzD, dzL, dzH)

        S = (sU, sD, sL, sH)
        Z = (zU, zD, zL, zH)
        _, dS, dZ = solve(cU, cD, cL, cH)  # predictor (cU, cD are 0 on inactive links)
        a_aff = np.minimum(1.0, max_step(list(zip(S, dS)) + list(zip(Z, dZ))))[chain]
        comp_aff = np.zeros(n)
        for s_, ds_, z_, dz_ in zip(S, dS, Z, dZ):
            comp_aff += (s_ + a_aff * ds_) * (z_ + a_aff * dz_)
        mu_aff = np.add.reduceat(comp_aff, starts) / m_c
        sigma = np.clip(mu_aff / np.maximum(mu, 1e-300), 0.0, 1.0) ** 3
        smu = (sigma * mu)[chain]
        rc = [c_ + ds_ * dz_ - smu for c_, ds_, dz_ in zip((cU, cD, cL, cH), dS, dZ)]
        rc[0] *= lf
        rc[1] *= lf
        dp, dS, dZ = solve(*rc)
        alpha = np.minimum(1.0, 0.995 * max_step(list(zip(S, dS)) + list(zip(Z, dZ))))
        alpha = (alpha * active)[chain]
        p = p + alpha * dp
        sU, sD, sL, sH = (s_ + alpha * ds_ for s_, ds_ in zip(S, dS))
        zU, zD, zL, zH = (z_ + alpha * dz_ for z_, dz_ in zip(Z, dZ))
        if not np.all(np.isfinite(p)):
            frozen[np.unique(chain[~np.isfinite(p)])] = True
            p = np.where(np.isfinite(p), p, 0.5)
    info.iterations = it
    p = np.clip(p, eps, 1 - eps)
    gap = _certificate(A, B, W, hh, link, p, zU - zD, starts, eps)
    failed = np.flatnonzero((gap > 1e-8) | frozen)
    info.n_frozen = int(frozen.sum())
    for c in failed:  # §6.5 fallback: primal log-barrier method on the chain
        lo, hi = starts[c], ends[c]
        p[lo:hi] = _barrier_chain(A[lo:hi], B[lo:hi], h[lo:hi], p[lo:hi], eps)
        info.n_fallback += 1
    if len(failed):
        gap = _certificate(A, B, W, hh, link, p, zU - zD, starts, eps)
        gap[failed] = 0.0  # the barrier iterate has no λ; its suboptimality is bounded by m / t
    info.gap = float(gap.max()) if len(gap) else 0.0
    return p, info


# ====================================================================== interpolation (spec §7)


def lipschitz_interpolate(
    x_levels: np.ndarray, p_levels: np.ndarray, c: float, x_query: np.ndarray, mode: str = "paper"
) -> np.ndarray:
    """Eqs. (17)–(19): lower envelope p^(1), upper envelope p^(2); ``"paper"`` = min(p^(1), p^(2)),
    ``"mid"`` = their mean.  O(U + G) scan for scalar contexts; clipped to [0, 1]."""
    xl = np.asarray(x_levels, float)
    pl = np.asarray(p_levels, float)
    xq = np.asarray(x_query, float)
    if len(xl) == 0:
        return np.full(xq.shape, np.nan)
    order = np.argsort(xl, kind="stable")
    xl, pl = xl[order], pl[order]
    u = len(xl)
    i_le = np.searchsorted(xl, xq, side="right") - 1  # last level ≤ x
    i_ge = np.searchsorted(xl, xq, side="left")  # first level ≥ x
    has_le = i_le >= 0
    has_ge = i_ge < u
    le = np.clip(i_le, 0, u - 1)
    ge = np.clip(i_ge, 0, u - 1)
    a = np.maximum.accumulate(pl + c * xl)
    b = np.maximum.accumulate((pl - c * xl)[::-1])[::-1]
    lower = np.maximum(np.where(has_le, a[le] - c * xq, -np.inf), np.where(has_ge, b[ge] + c * xq, -np.inf))
    a2 = np.minimum.accumulate(pl - c * xl)
    b2 = np.minimum.accumulate((pl + c * xl)[::-1])[::-1]
    upper = np.minimum(np.where(has_le, a2[le] + c * xq, np.inf), np.where(has_ge, b2[ge] - c * xq, np.inf))
    out = np.minimum(lower, upper) if mode == "paper" else 0.5 * (lower + upper)
    return np.clip(out, 0.0, 1.0)


def discrete_mstep(A: np.ndarray, B: np.ndarray, c: float, eps: float = 1e-6) -> np.ndarray:
    """Categorical context (discrete metric, spec §5.4): maximise Σ_u A_u log p_u + B_u log(1 − p_u) subject to
    |p_a − p_b| ≤ c for all pairs, i.e. max p − min p ≤ c, and ε ≤ p ≤ 1 − ε.  For a window [L, L + c] the optimum
    is clip(A/W, L, L + c); the best value as a function of L is concave (partial maximisation of a concave function
    over a convex set), so a bounded scalar search over L is exact to its tolerance.  c ≥ 1 decouples the levels."""
    from scipy.optimize import minimize_scalar

    A = np.asarray(A, float)
    B = np.asarray(B, float)
    u = np.clip(A / (A + B), eps, 1 - eps)
    if len(u) < 2 or u.max() - u.min() <= c:
        return u
    if c <= 0:
        return np.full_like(u, np.clip(A.sum() / (A + B).sum(), eps, 1 - eps))

    def neg(L):
        q = np.clip(u, L, L + c)
        return -float((A * np.log(q) + B * np.log1p(-q)).sum())

    lo, hi = max(eps, float(u.min())), min(float(u.max()) - c, 1 - eps - c)
    if hi <= lo:
        L = lo
    else:
        L = minimize_scalar(neg, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}).x
    return np.clip(u, L, L + c)


def interpolate_levels(x_levels, p_levels, c, x_query, mode: str = "paper", discrete: bool = False) -> np.ndarray:
    """Eqs. (17)–(19) for a scalar metric (:func:`lipschitz_interpolate`) or the discrete metric (categorical
    contexts: d = 1 between different categories, so an unseen category gets min(max p − c, min p + c))."""
    if not discrete:
        return lipschitz_interpolate(x_levels, p_levels, c, x_query, mode)
    xl = np.asarray(x_levels, float)
    pl = np.asarray(p_levels, float)
    xq = np.asarray(x_query, float)
    if len(xl) == 0:
        return np.full(xq.shape, np.nan)
    lower, upper = pl.max() - c, pl.min() + c
    other = min(lower, upper) if mode == "paper" else 0.5 * (lower + upper)
    pos = {v: i for i, v in enumerate(xl.tolist())}
    idx = np.array([pos.get(v, -1) for v in xq.tolist()], dtype=np.int64)  # few categories
    return np.clip(np.where(idx >= 0, pl[np.maximum(idx, 0)], other), 0.0, 1.0)


# ====================================================================== the binary model


@dataclass
class _BinaryData:
    """One binary problem: responses coded as (item, worker, y ∈ {0,1}) and the (worker, level) pairs."""

    item: np.ndarray
    worker: np.ndarray
    y: np.ndarray
    pid: np.ndarray  # pair id per response
    pair_worker: np.ndarray
    pair_level: np.ndarray
    n_items: int
    n_workers: int


def _pairs(item, worker, item_level, n_levels):
    key = worker.astype(np.int64) * n_levels + item_level[item]
    uniq, pid = np.unique(key, return_inverse=True)
    return pid, (uniq // n_levels).astype(np.int64), (uniq % n_levels).astype(np.int64)


class _ChainLayout:
    """Chains of one M-step: class i ∈ {0, 1} × workers, each over the worker's pairs (levels sorted)."""

    def __init__(self, data: _BinaryData, x_levels: np.ndarray, c: np.ndarray, discrete: bool = False):
        self.discrete = discrete
        npair = len(data.pair_worker)
        self.npair = npair
        w = data.pair_worker
        first = np.r_[True, w[1:] != w[:-1]] if npair else np.zeros(0, bool)
        self.wstarts = np.flatnonzero(first)
        self.chain_worker = w[self.wstarts]
        xp = x_levels[data.pair_level]
        dx = np.zeros(npair)
        dx[:-1] = xp[1:] - xp[:-1]
        last = np.r_[first[1:], True] if npair else np.zeros(0, bool)
        dx[last] = 0.0
        self.xp = xp
        self.dx = dx
        self.last = last
        self.c = c  # 2 × n_workers

    def solve(self, A: np.ndarray, B: np.ndarray, eps: float) -> tuple[np.ndarray, MStepInfo]:
        """M-step for both classes: A, B are 2 × npair.  Handles c = 0 (pooled closed form), zero-weight
        pairs (dropped, then filled by interpolation, §5.2) and hands the rest to the chain solver."""
        out = np.empty((2, self.npair))
        info = MStepInfo()
        all_A, all_B, all_h, all_starts, places = [], [], [], [], []
        offset = 0
        for i in (0, 1):
            W = A[i] + B[i]
            keep = W > 0
            cw = self.c[i][self.chain_worker]
            # pooled closed form for c = 0 chains (and chains of one level)
            sA = np.add.reduceat(A[i], self.wstarts) if self.npair else np.zeros(0)
            sW = np.add.reduceat(W, self.wstarts) if self.npair else np.zeros(0)
            pooled = np.clip(sA / np.where(sW > 0, sW, 1.0), eps, 1 - eps)
            pooled = np.where(sW > 0, pooled, 0.5)
            chain_of = np.repeat(np.arange(len(self.wstarts)), np.diff(np.r_[self.wstarts, self.npair]))
            zero_c = cw <= 0
            out[i] = pooled[chain_of]
            sel = keep & ~zero_c[chain_of]
            if not sel.any():
                continue
            idx = np.flatnonzero(sel)
            if self.discrete:  # categorical context: one small exact problem per chain (§5.4)
                ch = chain_of[idx]
                for k in np.unique(ch):
                    part = idx[ch == k]
                    out[i, part] = discrete_mstep(A[i][part], B[i][part], float(cw[k]), eps)
                places.append((i, idx))
                continue
            # h between consecutive kept pairs of the same chain: c × (x_next − x)
            ch = chain_of[idx]
            xs = self.xp[idx]
            nxt_same = np.r_[ch[1:] == ch[:-1], False]
            h = np.zeros(len(idx))
            h[:-1] = cw[ch[:-1]] * (xs[1:] - xs[:-1])
            h = np.where(nxt_same, h, 0.0)
            st = np.flatnonzero(np.r_[True, ch[1:] != ch[:-1]])
            all_A.append(A[i][idx])
            all_B.append(B[i][idx])
            all_h.append(h)
            all_starts.append(st + offset)
            places.append((i, idx))
            offset += len(idx)
        if offset or (self.discrete and places):
            if offset:
                p, info = lipschitz_chain_mstep(
                    np.concatenate(all_A), np.concatenate(all_B), np.concatenate(all_h), np.concatenate(all_starts), eps
                )
                pos = 0
                for i, idx in places:
                    out[i, idx] = p[pos : pos + len(idx)]
                    pos += len(idx)
            # fill dropped zero-weight pairs of constrained chains by interpolation (§5.2, §7)
            for i, idx in places:
                W = A[i] + B[i]
                missing = np.flatnonzero(W <= 0)
                if len(missing):
                    chain_of = np.repeat(np.arange(len(self.wstarts)), np.diff(np.r_[self.wstarts, self.npair]))
                    for ch in np.unique(chain_of[missing]):
                        lo = self.wstarts[ch]
                        hi = self.wstarts[ch + 1] if ch + 1 < len(self.wstarts) else self.npair
                        k = np.arange(lo, hi)
                        ok = k[W[k] > 0]
                        miss = k[W[k] <= 0]
                        if len(ok):
                            cval = self.c[i][self.chain_worker[ch]]
                            out[i, miss] = np.clip(
                                interpolate_levels(
                                    self.xp[ok], out[i, ok], cval, self.xp[miss], discrete=self.discrete
                                ),
                                eps,
                                1 - eps,
                            )
        return out, info


def _e_step(data: _BinaryData, P: np.ndarray, log_prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eq. (7) in the log domain.  ``log_prior``: 2-vector (shared prior) or items × 2 (paper's φ).
    Returns (posterior items × 2, per-item log normaliser)."""
    p0 = P[0][data.pid]
    p1 = P[1][data.pid]
    y = data.y
    l0 = np.where(y == 1, np.log(p0), np.log1p(-p0))
    l1 = np.where(y == 1, np.log(p1), np.log1p(-p1))
    L = np.empty((data.n_items, 2))
    L[:, 0] = np.bincount(data.item, weights=l0, minlength=data.n_items)
    L[:, 1] = np.bincount(data.item, weights=l1, minlength=data.n_items)
    return log_normalize(L + log_prior)


def _m_stats(data: _BinaryData, gamma1: np.ndarray, npair: int) -> tuple[np.ndarray, np.ndarray]:
    g1 = gamma1[data.item]
    g0 = 1.0 - g1
    y = data.y.astype(float)
    A = np.vstack(
        [np.bincount(data.pid, weights=g0 * y, minlength=npair), np.bincount(data.pid, weights=g1 * y, minlength=npair)]
    )
    B = np.vstack(
        [
            np.bincount(data.pid, weights=g0 * (1 - y), minlength=npair),
            np.bincount(data.pid, weights=g1 * (1 - y), minlength=npair),
        ]
    )
    return A, B


@dataclass
class _BinaryFit:
    P: np.ndarray  # 2 × npair fitted values at the (worker, level) pairs
    posterior1: np.ndarray  # items: P(y = 1)
    prior1: float
    trace: list[float]
    n_iter: int
    converged: bool
    gap: float
    n_fallback: int
    max_dP: list[float]
    raw_phi: np.ndarray | None = None


def _fit_binary(
    data: _BinaryData,
    layout: _ChainLayout,
    *,
    variant: str,
    n_iter: int,
    tol: float,
    max_iter: int,
    eps: float,
    final_estep: bool,
) -> _BinaryFit:
    npair = layout.npair
    P = np.vstack([np.full(npair, 0.2), np.full(npair, 0.8)])
    gap, n_fb = 0.0, 0
    trace: list[float] = []
    dPs: list[float] = []
    if variant == "paper":
        phi1 = np.full(data.n_items, 0.6)
        post = None
        for _ in range(int(n_iter)):
            log_phi = np.log(np.column_stack([1 - phi1, phi1]))
            post, lz = _e_step(data, P, log_phi)
            trace.append(float(lz.sum()))
            phi1 = np.clip(post[:, 1], eps, 1 - eps)
            A, B = _m_stats(data, post[:, 1], npair)
            Pn, info = layout.solve(A, B, eps)
            gap, n_fb = max(gap, info.gap), n_fb + info.n_fallback
            dPs.append(float(np.max(np.abs(Pn - P))) if npair else 0.0)
            P = Pn
        if final_estep:
            log_phi = np.log(np.column_stack([1 - phi1, phi1]))
            post, _ = _e_step(data, P, log_phi)
        return _BinaryFit(
            P, post[:, 1], float(np.mean(phi1)), trace, int(n_iter), True, gap, n_fb, dPs, raw_phi=post[:, 1].copy()
        )
    prior1 = 0.5
    post, lz = _e_step(data, P, np.log([1 - prior1, prior1]))
    trace.append(float(lz.sum()))
    converged = False
    it = 0
    for it in range(1, int(max_iter) + 1):
        A, B = _m_stats(data, post[:, 1], npair)
        Pn, info = layout.solve(A, B, eps)
        gap, n_fb = max(gap, info.gap), n_fb + info.n_fallback
        dPs.append(float(np.max(np.abs(Pn - P))) if npair else 0.0)
        P = Pn
        prior1 = float(np.clip(post[:, 1].mean(), eps, 1 - eps))
        post, lz = _e_step(data, P, np.log([1 - prior1, prior1]))
        trace.append(float(lz.sum()))
        if abs(trace[-1] - trace[-2]) <= tol * abs(trace[-1]):
            converged = True
            break
    return _BinaryFit(P, post[:, 1], prior1, trace, it, converged, gap, n_fb, dPs)


# ====================================================================== coverage (spec §9.1 last bullet)


def context_coverage(
    x_resp: np.ndarray,
    worker: np.ndarray,
    n_workers: int,
    grid: np.ndarray,
    discrete: bool,
    n_regions: int = 10,
    names=None,
) -> tuple[np.ndarray, list[str]]:
    """Responses per annotator against the context: (workers × grid counts, each response counted at its nearest
    grid point; categories for a categorical context) and the context regions (10 equal-width bins of the range,
    or the categories) in which fewer than 3 annotators have responses, as readable labels."""
    G = len(grid)
    if discrete:
        cell = x_resp.astype(np.int64)
        reg, edges = cell, None
        nreg = G
    else:
        lo, hi = float(grid[0]), float(grid[-1])
        span = hi - lo if hi > lo else 1.0
        cell = np.clip(np.rint((x_resp - lo) / span * (G - 1)), 0, G - 1).astype(np.int64)
        nreg = n_regions
        reg = np.clip(np.floor((x_resp - lo) / span * nreg), 0, nreg - 1).astype(np.int64)
        edges = lo + span * np.arange(nreg + 1) / nreg
    cov = np.bincount(worker * G + cell, minlength=n_workers * G).reshape(n_workers, G)
    per_region = (np.bincount(worker * nreg + reg, minlength=n_workers * nreg).reshape(n_workers, nreg) > 0).sum(axis=0)
    thin = []
    for r in np.flatnonzero(per_region < 3):  # ≤ 10 regions (or categories)
        where = (
            f"category {(names[r] if names is not None else grid[r])!r}"
            if discrete
            else f"[{edges[r]:.4g}, {edges[r + 1]:.4g}]"
        )
        thin.append(f"{where}: {int(per_region[r])} annotator{'s' if per_region[r] != 1 else ''}")
    return cov, thin


# ====================================================================== estimator

_PARAMS = {
    "variant": {
        "choices": ("shared_prior", "paper"),
        "help": "'shared_prior' (default, extension: one class prior, EM to convergence) or 'paper' (per-item φ, fixed n_iter iterations, Soltanmohammadi et al. 2015 Algorithm 1).",
    },
    "swing": {
        "low": 0.0,
        "high": 100.0,
        "help": "Smoothness in user terms: the largest total change of a reliability curve across the observed context range (c = swing / range). 0 = context-blind Dawid–Skene.",
    },
    "lipschitz": {
        "kind": "object",
        "help": "Lipschitz constants c (probability per context unit): a number or a 2 × workers array [false-alarm row, detection row]; overrides swing.",
        "advanced": True,
    },
    "n_iter": {"low": 1, "high": 1000, "help": "Iterations of the paper variant (the paper uses 5).", "advanced": True},
    "tol": {
        "low": 0.0,
        "high": 1.0,
        "help": "Shared-prior variant: stop when the relative change of the log-likelihood is below tol.",
    },
    "max_iter": {"low": 1, "high": 10000, "help": "Shared-prior variant: maximum EM iterations."},
    "eps": {"low": 1e-12, "high": 0.01, "help": "Probability floor: curves stay in [eps, 1 − eps].", "advanced": True},
    "max_context_levels": {
        "kind": "object",
        "help": "Bin more distinct context values than this into equal-frequency levels (None = exact).",
        "advanced": True,
    },
    "interpolation": {
        "choices": ("paper", "mid"),
        "help": "Curve values between fitted levels: 'paper' eq. (19) (lower extension) or 'mid' (mean of both envelopes).",
        "advanced": True,
    },
    "final_estep": {"help": "Paper variant: decide with one more E-step under the last curves.", "advanced": True},
    "positive_label": {
        "kind": "object",
        "help": "Binary data: the label meaning 'positive' (default: the second label in sorted order).",
    },
    "grid_size": {"low": 2, "high": 10000, "help": "Number of grid points for the reported curves.", "advanced": True},
    "drop_missing_context": {
        "help": "Drop tasks without a context value (their posteriors stay at the prior) instead of failing."
    },
    "multiclass": {
        "choices": ("one_vs_rest", "confusion"),
        "help": "More than 2 labels (extension, spec §9.2): 'one_vs_rest' fits one binary model per label; 'confusion' fits full per-annotator confusion matrices whose entries are Lipschitz in the context (rows on the simplex).",
    },
}


@register(
    "context-em",
    summary="Context-dependent reliability: per-annotator detection/false-alarm curves over a numeric item context (Lipschitz-constrained EM).",
    inputs=("context",),
    family="context",
    params=_PARAMS,
    reference="Soltanmohammadi, Naraghi-Pour & van der Schaar, ICML 2015, eqs. (1)–(20); spec context.md.",
)
class ContextEM(Aggregator):
    """Lipschitz-constrained EM over a numeric context (spec ``context.md``).

    ``fit(df, context=Series by task)`` (or ``context="column"`` naming a column of ``df`` that is constant within
    each task).  Binary labels follow the paper; more than two labels use one-vs-rest binary models (§9.2 option 1,
    an extension; the C models are fitted independently and can disagree, a warning says so), or with
    ``multiclass="confusion"`` full confusion matrices π_k(x)[i, j] whose entries are c_ik-Lipschitz in x and whose
    rows lie on the simplex (§9.2 option 2, an extension; with 2 labels it is the binary model).  ``lipschitz`` is
    then a number, a J-vector or a J × workers array (one row per true class).

    Fitted attributes beyond the base: ``variant_``, ``lipschitz_`` (2 × workers, or classes × 2 × workers),
    ``context_grid_``, ``detection_curves_`` / ``false_alarm_curves_`` (workers × grid, or workers × classes × grid),
    ``curves_`` (long table at each worker's observed contexts), ``mstep_gap_``, ``n_mstep_fallbacks_``,
    ``context_binning_bound_``, ``raw_phi_`` (paper variant), ``context_coverage_`` (workers × grid response counts,
    each response at its nearest grid point; categories for a categorical context) and :meth:`interpolate`.
    ``multiclass="confusion"`` adds ``confusion_curves_`` (workers × grid × true × reported; extras key
    "confusion_curves") and :meth:`interpolate_confusion`; ``detection_curves_``/``false_alarm_curves_`` are then
    class-vs-rest curves P(ŷ = c | y = c, x) and the prior-weighted P(ŷ = c | y ≠ c, x) (workers × classes × grid;
    workers × grid for 2 labels).
    """

    def __init__(
        self,
        variant: str = "shared_prior",
        swing: float = 1.0,
        lipschitz: Any = None,
        n_iter: int = 5,
        tol: float = 1e-6,
        max_iter: int = 200,
        eps: float = 1e-6,
        max_context_levels: int | None = 1000,
        interpolation: str = "paper",
        final_estep: bool = False,
        positive_label: Any = None,
        grid_size: int = 101,
        drop_missing_context: bool = False,
        multiclass: str = "one_vs_rest",
    ):
        self.variant = variant
        self.swing = swing
        self.lipschitz = lipschitz
        self.n_iter = n_iter
        self.tol = tol
        self.max_iter = max_iter
        self.eps = eps
        self.max_context_levels = max_context_levels
        self.interpolation = interpolation
        self.final_estep = final_estep
        self.positive_label = positive_label
        self.grid_size = grid_size
        self.drop_missing_context = drop_missing_context
        self.multiclass = multiclass

    # ---------------------------------------------------------------- input
    def fit(self, data, *, graph=None, context=None, true_labels=None) -> ContextEM:
        """As :meth:`Aggregator.fit`; ``context`` is a Series by task or the name of a column of ``data``."""
        if isinstance(context, str):
            if not isinstance(data, pd.DataFrame) or context not in data.columns:
                raise UserInputError(f"context column {context!r} is not in the responses table.")
            task_col = "task"
            grp = data.groupby(task_col, sort=False)[context]
            nun = grp.nunique(dropna=False)
            bad = list(nun.index[nun > 1][:5])
            if bad:
                raise UserInputError(
                    f"the context column {context!r} must be constant within a task; it varies in {int((nun > 1).sum())} tasks, e.g. {bad}."
                )
            context = grp.first()
        return super().fit(data, graph=graph, context=context, true_labels=true_labels)

    def _context_values(self, resp: Responses, context) -> tuple[np.ndarray, str]:
        """Context per item code (NaN = missing) as float, and its kind."""
        ctx = pd.Series(context)
        if ctx.index.has_duplicates:
            g = ctx.groupby(level=0)
            nun = g.nunique(dropna=False)
            bad = list(nun.index[nun > 1][:5])
            if bad:
                raise UserInputError(f"the context must be one value per task; tasks with several values: {bad}.")
            ctx = g.first()
        kind = "numeric"
        if pd.api.types.is_datetime64_any_dtype(ctx.dtype):
            kind = "datetime (days)"
            vals = (ctx - ctx.min()).dt.total_seconds() / 86400.0
        elif pd.api.types.is_timedelta64_dtype(ctx.dtype):
            kind = "timedelta (days)"
            vals = ctx.dt.total_seconds() / 86400.0
        elif pd.api.types.is_bool_dtype(ctx.dtype) or pd.api.types.is_numeric_dtype(ctx.dtype):
            vals = ctx.astype(float)
        else:
            conv = pd.to_numeric(ctx, errors="coerce") if not isinstance(ctx.dtype, pd.CategoricalDtype) else None
            if conv is not None and not (conv.isna() & ctx.notna()).any():
                vals = conv.astype(float)
            else:  # categorical context: the discrete metric (d = 1 between different categories), spec §1.1, §5.4
                kind = "categorical"
                from fusion_core.data.coding import sorted_index

                cats = sorted_index(ctx.dropna().to_numpy())
                if len(cats) > 300:
                    raise UserInputError(
                        f"the context is neither numeric nor a usable categorical: {len(cats)} distinct non-numeric values "
                        f"(e.g. {list(cats[:3])}); a categorical context may have at most 300 categories (spec §5.4). Convert it "
                        "to a number (or a date) or group the values."
                    )
                self._categories = cats
                vals = pd.Series(cats.get_indexer(ctx.to_numpy()).astype(float), index=ctx.index)
                vals[ctx.isna().to_numpy()] = np.nan
        self._discrete = kind == "categorical"
        x = np.full(resp.n_items, np.nan)
        codes = resp.item_codes(vals.index, what="context tasks", strict=False)
        ok = codes >= 0
        x[codes[ok]] = vals.to_numpy()[ok]
        return x, kind

    def _check_params(self) -> None:
        if self.variant not in ("shared_prior", "paper"):
            raise UserInputError(f"variant must be 'shared_prior' or 'paper', got {self.variant!r}.")
        if self.interpolation not in ("paper", "mid"):
            raise UserInputError(f"interpolation must be 'paper' or 'mid', got {self.interpolation!r}.")
        if self.lipschitz is None and not (float(self.swing) >= 0):
            raise UserInputError(f"swing must be ≥ 0, got {self.swing}.")
        if not (0 < float(self.eps) < 0.5):
            raise UserInputError(f"eps must be in (0, 0.5), got {self.eps}.")
        self._multiclass = "one_vs_rest" if self.multiclass == "one-vs-rest" else self.multiclass
        if self._multiclass not in ("one_vs_rest", "confusion"):
            raise UserInputError(f"multiclass must be 'one_vs_rest' or 'confusion', got {self.multiclass!r}.")
        if self.max_context_levels is not None and int(self.max_context_levels) < 1:
            raise UserInputError(f"max_context_levels must be ≥ 1 or None, got {self.max_context_levels}.")

    def _lipschitz(self, n_workers: int, x_range: float, rows: int = 2) -> np.ndarray:
        """c as ``rows`` × workers: rows = (false-alarm, detection) for the binary model, or one row per true class
        for the confusion-curve model (§9.2 option 2; with 2 labels the binary layout (false-alarm, detection) is
        kept and mapped onto the true classes)."""
        if self.lipschitz is not None:
            c = np.asarray(self.lipschitz, dtype=float)
            if c.ndim == 0:
                c = np.full((rows, n_workers), float(c))
            elif c.shape == (rows,):
                c = np.repeat(c[:, None], n_workers, axis=1)
            if c.shape != (rows, n_workers):
                what = "false-alarm row, detection row" if rows == 2 else "one row per true class"
                raise UserInputError(
                    f"lipschitz must be a number or a {rows} × {n_workers} array ({what}); got shape {c.shape}."
                )
            if (c < 0).any() or not np.all(np.isfinite(c)):
                raise UserInputError("lipschitz constants must be finite and ≥ 0.")
            return c
        s = float(self.swing)
        return np.full((rows, n_workers), s / x_range if x_range > 0 else 0.0)

    # ---------------------------------------------------------------- levels
    def _levels(self, x_items: np.ndarray, used: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """Level index per item (−1 if no context) and level locations (§5.2, §5.6 binning)."""
        xi = x_items[used]
        uniq, inv = np.unique(xi, return_inverse=True)
        cap = self.max_context_levels
        width = 0.0
        if cap is not None and len(uniq) > int(cap):
            nb = int(cap)
            bins = (np.arange(len(uniq)) * nb) // len(uniq)
            item_bin = bins[inv]
            cnt = np.bincount(item_bin, minlength=nb)
            loc = np.bincount(item_bin, weights=xi, minlength=nb) / np.maximum(cnt, 1)
            lo = np.full(nb, np.inf)
            hi = np.full(nb, -np.inf)
            np.minimum.at(lo, bins, uniq)
            np.maximum.at(hi, bins, uniq)
            width = float(np.max(hi - lo))
            level = np.full(len(x_items), -1)
            level[used] = item_bin
            return level, loc, width
        level = np.full(len(x_items), -1)
        level[used] = inv
        return level, uniq, width

    # ---------------------------------------------------------------- fit
    def _fit(self, responses: Responses, *, gold, graph, context) -> Fit:
        self._check_params()
        resp = responses
        if resp.n_workers < 2:
            raise UserInputError("context-em needs at least 2 annotators (3 or more for identifiable curves).")
        x_items, kind = self._context_values(resp, context)
        has_resp = resp.responses_per_item > 0
        missing = np.isnan(x_items) & has_resp
        warn: list[str] = []
        if missing.any():
            ex = list(resp.items[missing][:5])
            if not self.drop_missing_context:
                raise UserInputError(
                    f"{int(missing.sum())} tasks have no context value (e.g. {ex}); supply them or pass "
                    "drop_missing_context=True to drop those tasks."
                )
            warn.append(
                f"dropped {int(missing.sum())} tasks without a context value; their posteriors are the class prior."
            )
        keep_r = ~np.isnan(x_items[resp.item])
        used = ~np.isnan(x_items) & has_resp
        if not used.any():
            raise UserInputError("no task with responses has a context value.")
        if self._discrete:
            x_levels = np.arange(len(self._categories), dtype=float)
            level = np.where(used, x_items, -1).astype(np.int64)
            bin_width = 0.0
            x_range = 1.0 if len(np.unique(x_items[used])) > 1 else 0.0  # the discrete metric's diameter
        else:
            level, x_levels, bin_width = self._levels(x_items, used)
            x_range = float(x_levels.max() - x_levels.min())
        confusion_mode = self._multiclass == "confusion"
        c = self._lipschitz(resp.n_workers, x_range, rows=resp.n_classes if confusion_mode else 2)
        bound = float(c.max() * bin_width)
        if bound > 0.02:
            warn.append(
                f"context binning to {len(x_levels)} levels can move a curve by up to {bound:.3f}; raise max_context_levels or pass None for the exact fit."
            )
        n_contrib = np.bincount(resp.worker[keep_r], minlength=resp.n_workers)
        if (n_contrib > 0).sum() < 3:
            warn.append(
                "fewer than 3 annotators: the two-coin model is not identifiable (spec §2); results rest on the initialisation."
            )
        if x_range == 0:
            warn.append("the context is constant: context-em reduces to context-blind two-coin Dawid–Skene.")

        item_r, worker_r, label_r = resp.item[keep_r], resp.worker[keep_r], resp.label[keep_r]
        pid, pw, pl = _pairs(item_r, worker_r, level, len(x_levels))
        K = resp.n_classes
        grid = (
            x_levels.copy()
            if self._discrete
            else np.linspace(float(x_levels.min()), float(x_levels.max()), int(self.grid_size))
        )
        coverage, thin = context_coverage(
            x_items[item_r],
            worker_r,
            resp.n_workers,
            grid,
            self._discrete,
            names=self._categories if self._discrete else None,
        )
        if thin and (n_contrib > 0).sum() >= 3 and x_range > 0:
            shown = "; ".join(thin[:3]) + (f" and {len(thin) - 3} more" if len(thin) > 3 else "")
            warn.append(
                f"fewer than 3 annotators have responses in part of the context range ({shown}): the curves there rest on "
                "1–2 annotators or are pure interpolation (spec §9.1); extras['context_coverage'] shows who labelled where."
            )
        if confusion_mode:
            return self._fit_confusion_curves(
                resp, item_r, worker_r, label_r, pid, pw, pl, x_levels, x_items, c, grid, coverage, bound, warn, kind
            )
        if K == 2:
            pos = (
                1
                if self.positive_label is None
                else int(resp.label_codes([self.positive_label], what="positive_label")[0])
            )
            problems = [pos]
        else:
            if self.positive_label is not None:
                raise UserInputError(
                    "positive_label applies to binary data; with more than 2 labels context-em fits one-vs-rest models for every label."
                )
            problems = list(range(K))
            warn.append(
                f"{K} labels: one-vs-rest extension (spec §9.2): {K} binary models fitted independently; they can disagree."
            )
        self._pairs_ = (pw, pl)
        self._x_levels = x_levels
        self._x_items = x_items
        self._c = c
        fits = []
        for cls in problems:
            data = _BinaryData(
                item_r, worker_r, (label_r == cls).astype(np.int8), pid, pw, pl, resp.n_items, resp.n_workers
            )
            layout = _ChainLayout(data, x_levels, c, discrete=self._discrete)
            fits.append(
                _fit_binary(
                    data,
                    layout,
                    variant=self.variant,
                    n_iter=int(self.n_iter),
                    tol=float(self.tol),
                    max_iter=int(self.max_iter),
                    eps=float(self.eps),
                    final_estep=bool(self.final_estep),
                )
            )
        self._problems = problems
        self._fits = fits
        # posterior in class order
        if K == 2:
            g = fits[0].posterior1
            post = np.zeros((resp.n_items, 2))
            post[:, pos] = g
            post[:, 1 - pos] = 1 - g
            prior = np.zeros(2)
            prior[pos] = fits[0].prior1
            prior[1 - pos] = 1 - fits[0].prior1
        else:
            scores = np.column_stack([f.posterior1 for f in fits])
            tot = scores.sum(axis=1, keepdims=True)
            post = np.where(tot > 0, scores / np.where(tot > 0, tot, 1), 1.0 / K)
            prior = post.mean(axis=0)
        # per-worker average confusion (binary only): mean of the curves over the worker's responses
        confusion = None
        if K == 2:
            f = fits[0]
            cnt = np.maximum(np.bincount(worker_r, minlength=resp.n_workers), 1)
            p0 = np.bincount(worker_r, weights=f.P[0][pid], minlength=resp.n_workers) / cnt
            p1 = np.bincount(worker_r, weights=f.P[1][pid], minlength=resp.n_workers) / cnt
            p0 = np.where(n_contrib > 0, p0, 0.5)
            p1 = np.where(n_contrib > 0, p1, 0.5)
            confusion = np.zeros((resp.n_workers, 2, 2))
            confusion[:, 1 - pos, pos] = p0
            confusion[:, 1 - pos, 1 - pos] = 1 - p0
            confusion[:, pos, pos] = p1
            confusion[:, pos, 1 - pos] = 1 - p1
            youden = p1 - p0
            if (youden[n_contrib > 0] <= 0).mean() > 0.5:
                warn.append("most annotators have mean Youden J ≤ 0: the labels may be swapped (spec §12 pitfall 6).")
        # curves on a grid
        det = np.full((len(fits), resp.n_workers, len(grid)), np.nan)
        fa = np.full_like(det, np.nan)
        rows = []
        for j, f in enumerate(fits):
            for w in range(resp.n_workers):
                sel = pw == w
                if not sel.any():
                    continue
                xs = x_levels[pl[sel]]
                fa[j, w] = interpolate_levels(xs, f.P[0][sel], c[0, w], grid, self.interpolation, self._discrete)
                det[j, w] = interpolate_levels(xs, f.P[1][sel], c[1, w], grid, self.interpolation, self._discrete)
            cnt_pair = np.bincount(pid, minlength=len(pw))
            rows.append(
                pd.DataFrame(
                    {
                        "worker": resp.workers.take(pw),
                        "label": resp.classes[problems[j]],
                        "context": self._categories.take(pl) if self._discrete else x_levels[pl],
                        "detection": f.P[1],
                        "false_alarm": f.P[0],
                        "n_responses": cnt_pair,
                    }
                )
            )
        if K == 2:
            det_out, fa_out = det[0], fa[0]
        else:
            det_out, fa_out = det.transpose(1, 0, 2), fa.transpose(1, 0, 2)
        trace = (
            fits[0].trace
            if K == 2
            else list(np.sum([np.asarray(f.trace[-min(len(g.trace) for g in fits) :]) for f in fits], axis=0))
        )
        gap = max(f.gap for f in fits)
        n_fb = sum(f.n_fallback for f in fits)
        for w_ in warn:
            warnings.warn(w_, AggregationWarning)
        extras = self._curve_extras(
            grid,
            det_out,
            fa_out,
            x_levels,
            kind,
            c,
            gap,
            n_fb,
            bound,
            fits[0].max_dP,
            coverage,
            "one_vs_rest" if K > 2 else "binary",
        )
        self._curves_frame = pd.concat(rows, ignore_index=True)
        return Fit(
            posterior=post,
            confusion=confusion,
            class_prior=prior,
            log_likelihood=trace,
            n_iter=max(f.n_iter for f in fits),
            converged=all(f.converged for f in fits),
            extras=extras,
        )

    def _curve_extras(
        self, grid, det, fa, x_levels, kind, lipschitz, gap, n_fallback, bound, max_dP, coverage, multiclass, **more
    ) -> dict:
        """The extras every context-em fit reports (curves on the grid, levels, solver diagnostics, coverage)."""
        return {
            "context_grid": np.asarray(self._categories, dtype=object) if self._discrete else grid,
            "detection_curves": det,
            "false_alarm_curves": fa,
            **more,
            "context_levels": x_levels,
            "context_kind": kind,
            "variant": self.variant,
            "lipschitz": lipschitz,
            "mstep_gap": gap,
            "mstep_fallbacks": n_fallback,
            "context_binning_bound": bound,
            "max_dP": max_dP,
            "context_coverage": coverage,
            "multiclass": multiclass,
        }

    def _fit_confusion_curves(
        self, resp, item_r, worker_r, label_r, pid, pw, pl, x_levels, x_items, c, grid, coverage, bound, warn, kind
    ) -> Fit:
        """§9.2 option 2 [EXT]: per-annotator confusion curves π_k(x)[i, j], each entry c_ik-Lipschitz, rows on the
        simplex (``fusion_core.context_solver``).  With 2 labels this is the binary paper model."""
        from fusion_core.context_solver import confusion_at, fit_confusion

        J = resp.n_classes
        W = resp.n_workers
        pos = (
            1 if self.positive_label is None else int(resp.label_codes([self.positive_label], what="positive_label")[0])
        )
        if J > 2 and self.positive_label is not None:
            raise UserInputError("positive_label applies to binary data; multiclass='confusion' models every label.")
        if J > 2:
            warn.append(f"{J} labels: per-class confusion curves (extension, spec §9.2 option 2).")
        c_user = c
        if J == 2 and pos == 0:  # 2 labels: rows are (false-alarm, detection) as in the binary model → true-class order
            c = c[::-1].copy()
        f = fit_confusion(
            item_r,
            worker_r,
            label_r,
            pid,
            pw,
            pl,
            x_levels,
            c,
            resp.n_items,
            J,
            variant=self.variant,
            n_iter=int(self.n_iter),
            tol=float(self.tol),
            max_iter=int(self.max_iter),
            eps=float(self.eps),
            final_estep=bool(self.final_estep),
            pos=pos,
            discrete=self._discrete,
        )
        self._pairs_ = (pw, pl)
        self._x_levels = x_levels
        self._x_items = x_items
        self._c = c
        self._conf_fit = f
        self._pos = pos
        self._fits = []
        self._problems = list(range(J)) if J > 2 else [pos]
        # per-worker average confusion over the worker's responses
        cnt = np.bincount(worker_r, minlength=W)
        confusion = np.empty((W, J, J))
        for i in range(J):
            for j in range(J):
                confusion[:, i, j] = np.bincount(worker_r, weights=f.Pi[pid, i, j], minlength=W) / np.maximum(cnt, 1)
        confusion[cnt == 0] = np.full((J, J), 1.0 / J)
        n_contrib = cnt
        if J == 2:
            youden = confusion[:, pos, pos] - confusion[:, 1 - pos, pos]
        else:
            youden = np.einsum("wii->wi", confusion).mean(axis=1) - (
                confusion.sum(axis=1) - np.einsum("wii->wi", confusion)
            ).mean(axis=1) / (J - 1)
        if (youden[n_contrib > 0] <= 0).mean() > 0.5:
            warn.append(
                "most annotators look worse than chance on average: the labels may be permuted (spec §12 pitfall 6)."
            )
        conf_grid = np.full((W, len(grid), J, J), np.nan)  # workers × grid × true × reported
        for w in range(W):  # workers (not responses)
            conf_grid[w] = confusion_at(
                x_levels, pw, pl, f.Pi, c, grid, w, self.interpolation, self._discrete, pos=pos if J == 2 else 1
            )
        det, fa = _one_vs_rest_curves(conf_grid, f.prior)  # workers × J × grid
        if J == 2:
            det_out, fa_out = det[:, pos], fa[:, pos]
        else:
            det_out, fa_out = det, fa
        cnt_pair = np.bincount(pid, minlength=len(pw))
        d_pair, f_pair = _one_vs_rest_curves(f.Pi[None], f.prior)  # 1 × J × npair
        classes = [pos] if J == 2 else list(range(J))
        self._curves_frame = pd.concat(
            [
                pd.DataFrame(
                    {
                        "worker": resp.workers.take(pw),
                        "label": resp.classes[k],
                        "context": self._categories.take(pl) if self._discrete else x_levels[pl],
                        "detection": d_pair[0, k],
                        "false_alarm": f_pair[0, k],
                        "n_responses": cnt_pair,
                    }
                )
                for k in classes
            ],
            ignore_index=True,
        )
        for w_ in warn:
            warnings.warn(w_, AggregationWarning)
        extras = self._curve_extras(
            grid,
            det_out,
            fa_out,
            x_levels,
            kind,
            c_user,
            f.gap,
            f.n_fallback,
            bound,
            f.max_dP,
            coverage,
            "confusion",
            confusion_curves=conf_grid,
        )
        return Fit(
            posterior=f.posterior,
            confusion=confusion,
            class_prior=f.prior,
            log_likelihood=f.trace,
            n_iter=f.n_iter,
            converged=f.converged,
            extras=extras,
        )

    def interpolate_confusion(self, x, worker=None, *, _codes: bool = False) -> np.ndarray:
        """Confusion curves at contexts ``x`` (multiclass='confusion'): workers × len(x) × true × reported, or
        len(x) × true × reported for one ``worker`` id; eqs. (17)–(19) per entry, rows back on the simplex."""
        from fusion_core.context_solver import confusion_at

        if self._multiclass != "confusion":
            raise UserInputError("interpolate_confusion needs a model fitted with multiclass='confusion'.")
        if self._discrete and not _codes:
            x = self._categories.get_indexer(pd.Index(np.atleast_1d(np.asarray(x, dtype=object)))).astype(float)
        x = np.atleast_1d(np.asarray(x, dtype=float))
        pw, pl = self._pairs_
        ws = range(self.responses_.n_workers) if worker is None else [int(self.responses_.workers.get_loc(worker))]
        pos = self._pos if self.responses_.n_classes == 2 else 1
        out = np.stack(
            [
                confusion_at(
                    self._x_levels,
                    pw,
                    pl,
                    self._conf_fit.Pi,
                    self._c,
                    x,
                    w,
                    self.interpolation,
                    self._discrete,
                    pos=pos,
                )
                for w in ws
            ]
        )
        return out[0] if worker is not None else out

    def _set_fitted(self, resp, fit, seconds) -> None:
        super()._set_fitted(resp, fit, seconds)
        ex = fit.extras
        self.variant_ = self.variant
        self.lipschitz_ = ex["lipschitz"]
        self.context_grid_ = ex["context_grid"]
        self.detection_curves_ = ex["detection_curves"]
        self.false_alarm_curves_ = ex["false_alarm_curves"]
        self.mstep_gap_ = ex["mstep_gap"]
        self.n_mstep_fallbacks_ = ex["mstep_fallbacks"]
        self.context_binning_bound_ = ex["context_binning_bound"]
        self.curves_ = self._curves_frame
        self.context_coverage_ = ex["context_coverage"]
        if "confusion_curves" in ex:
            self.confusion_curves_ = ex["confusion_curves"]
            if self.variant == "paper":
                self.raw_phi_ = pd.DataFrame(
                    self._conf_fit.raw_phi, index=pd.Index(resp.items, name="task"), columns=resp.classes
                )
        elif self.variant == "paper":
            self.raw_phi_ = pd.Series(self._fits[0].raw_phi, index=pd.Index(resp.items, name="task"), name="phi")

    # ---------------------------------------------------------------- queries
    def interpolate(self, x, worker=None, label=None, *, _codes: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(false-alarm, detection) curves at contexts ``x`` by eqs. (17)–(19): arrays workers × len(x)
        (or len(x) for one ``worker`` id).  ``label`` picks the one-vs-rest model for multiclass data.
        Categorical contexts take category values (unseen categories get the (19) value)."""
        if self._multiclass == "confusion":
            conf = self.interpolate_confusion(x, worker, _codes=_codes)
            det, fa = _one_vs_rest_curves(conf if worker is None else conf[None], self._conf_fit.prior)
            k = self._problems[0] if label is None else int(self.responses_.label_codes([label])[0])
            return (fa[:, k], det[:, k]) if worker is None else (fa[0, k], det[0, k])
        if self._discrete and not _codes:
            x = self._categories.get_indexer(pd.Index(np.atleast_1d(np.asarray(x, dtype=object)))).astype(float)
        x = np.atleast_1d(np.asarray(x, dtype=float))
        j = 0 if label is None else self._problems.index(int(self.responses_.label_codes([label])[0]))
        f = self._fits[j]
        pw, pl = self._pairs_
        ws = range(self.responses_.n_workers) if worker is None else [int(self.responses_.workers.get_loc(worker))]
        out0 = np.full((len(ws), len(x)), np.nan)
        out1 = np.full_like(out0, np.nan)
        for row, w in enumerate(ws):
            sel = pw == w
            if sel.any():
                xs = self._x_levels[pl[sel]]
                out0[row] = interpolate_levels(xs, f.P[0][sel], self._c[0, w], x, self.interpolation, self._discrete)
                out1[row] = interpolate_levels(xs, f.P[1][sel], self._c[1, w], x, self.interpolation, self._discrete)
        if worker is not None:
            return out0[0], out1[0]
        return out0, out1

    def response_log_likelihood(self, responses: Responses) -> np.ndarray:
        """log P(response | true class) per response (R × K) under the fitted curves at each item's context,
        for held-out scoring.  Binary: the two-coin curves; multiclass (one-vs-rest): P(l | k) ∝ p^(l)_{1{l=k}}(x)
        normalised over l (a heuristic joint of the independent binary models)."""
        K = self.responses_.n_classes
        x = self._x_items[responses.item]
        R = responses.n_responses
        eps = float(self.eps)
        if self._multiclass == "confusion":
            out = np.full((R, K), np.log(1.0 / K))
            for w in np.unique(responses.worker):  # workers, not responses
                sel = np.flatnonzero(responses.worker == w)
                conf = self.interpolate_confusion(x[sel], worker=self.responses_.workers[w], _codes=True)
                if np.isnan(conf).all():
                    continue
                conf = np.clip(conf, eps, 1.0)
                out[sel] = np.log(conf[np.arange(len(sel)), :, responses.label[sel]])
            return out
        if K == 2:
            pos = self._problems[0]
            p0 = np.full(R, 0.5)
            p1 = np.full(R, 0.5)
            for w in np.unique(responses.worker):
                sel = responses.worker == w
                a, b = self.interpolate(x[sel], worker=self.responses_.workers[w], _codes=True)
                p0[sel] = np.where(np.isnan(a), 0.5, a)
                p1[sel] = np.where(np.isnan(b), 0.5, b)
            p0 = np.clip(p0, eps, 1 - eps)
            p1 = np.clip(p1, eps, 1 - eps)
            said_pos = responses.label == pos
            out = np.empty((R, 2))
            out[:, pos] = np.where(said_pos, np.log(p1), np.log1p(-p1))
            out[:, 1 - pos] = np.where(said_pos, np.log(p0), np.log1p(-p0))
            return out
        # one-vs-rest: score[r, k, l]
        score = np.empty((R, K, K))
        for j, cls in enumerate(self._problems):
            p0 = np.full(R, 0.5)
            p1 = np.full(R, 0.5)
            for w in np.unique(responses.worker):
                sel = responses.worker == w
                a, b = self.interpolate(
                    x[sel], worker=self.responses_.workers[w], label=self.responses_.classes[cls], _codes=True
                )
                p0[sel] = np.where(np.isnan(a), 0.5, a)
                p1[sel] = np.where(np.isnan(b), 0.5, b)
            score[:, :, cls] = np.clip(p0, eps, 1 - eps)[:, None]
            score[:, cls, cls] = np.clip(p1, eps, 1 - eps)
        score /= score.sum(axis=2, keepdims=True)
        return np.log(score[np.arange(R), :, responses.label])


def _one_vs_rest_curves(conf: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Class-vs-rest curves from confusion curves ``conf`` (workers × points × true × reported): detection
    P(ŷ = c | y = c) and false alarm P(ŷ = c | y ≠ c) = Σ_{i≠c} π_i P(ŷ = c | y = i) / Σ_{i≠c} π_i, as
    workers × classes × points."""
    J = conf.shape[-1]
    det = np.einsum("wgcc->wcg", conf)
    w = np.clip(np.asarray(prior, float), 1e-12, None)
    weighted = np.einsum("wgic,i->wcg", conf, w) - det * w[None, :, None]
    fa = weighted / (w.sum() - w)[None, :, None]
    return det, fa


def dp_metric(model: ContextEM, p0_true, p1_true, lo: float = 0.0, hi: float = 1.0, n: int = 1001) -> float:
    """Spec eq. (21) (lower is better): DP = (1/2K) Σ_i Σ_k ∫|p_ik − p̂_ik| dx / ∫ p_ik dx on ``n`` trapezoid points.
    ``p0_true``/``p1_true``: lists of vectorised functions, one per worker in ``model.workers_`` order."""
    x = np.linspace(lo, hi, n)
    f0, f1 = model.interpolate(x)
    tot = 0.0
    k = len(p0_true)
    for i, (truth, fit) in enumerate(((p0_true, f0), (p1_true, f1))):
        for w in range(k):
            t = np.asarray(truth[w](x), dtype=float) * np.ones_like(x)
            tot += np.trapezoid(np.abs(t - fit[w]), x) / np.trapezoid(t, x)
    return tot / (2 * k)


def select_swing(
    data,
    context,
    swings: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0),
    *,
    frac: float = 0.1,
    n_splits: int = 3,
    random_state: int = 0,
    **params: Any,
) -> tuple[pd.DataFrame, float]:
    """Smoothness selection by held-out responses (spec §9.3, [EXT]): score each common swing s by the held-out
    annotation log-likelihood (3 splits of 10 %), keep the smoothest s whose paired per-item difference to the
    best has mean below 2 standard errors.  Returns (score table, chosen swing)."""
    from fusion_core.methods.heldout import choose, heldout_score, heldout_splits

    resp = as_responses(data)
    splits = heldout_splits(
        resp.item, resp.worker, resp.n_items, resp.n_workers, frac=frac, n_splits=n_splits, random_state=random_state
    )
    if isinstance(context, str):
        if not isinstance(data, pd.DataFrame):
            raise UserInputError("a context column name needs the responses as a DataFrame.")
        context = data.groupby("task", sort=False)[context].first()
    scores = []
    order = sorted(float(s) for s in swings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        for rank, s in enumerate(order):
            hs = heldout_score(
                ContextEM(swing=s, **params), resp, splits=splits, fit_kwargs={"context": context}, name=f"{s:g}"
            )
            hs.n_parameters = rank  # smoother = simpler
            scores.append(hs)
    chosen = float(choose(scores, rule="simplest"))
    table = pd.DataFrame({"swing": order, "score": [h.score for h in scores], "se": [h.se for h in scores]})
    table["chosen"] = table["swing"] == chosen
    return table, chosen
