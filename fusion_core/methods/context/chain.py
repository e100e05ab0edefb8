"""The binary chain M-step of ``context-em`` (spec ``context.md`` §5.2–§5.4, §6).

Per (class, annotator) the M-step (14) on the chain of the annotator's distinct context levels is

    maximise ψ(p) = Σ_u A_u log p_u + B_u log(1 − p_u)  s.t. |p_{u+1} − p_u| ≤ h_u,  ε ≤ p ≤ 1 − ε,

exact with adjacent constraints in one dimension (§5.3).  :func:`lipschitz_chain_mstep` returns the closed form
clip(A/W, ε, 1 − ε) for chains where it is feasible, solves chains of ≤ 4 levels exactly by enumerating their tight
links (:func:`short_chain_mstep`) and the rest together with the shared interior-point
method (:mod:`.interior_point`) on a tridiagonal Newton matrix (LAPACK ``dpttrf``/``dpttrs``).  Categorical
contexts (the discrete metric, §5.4) have their own exact small program, :func:`discrete_mstep`.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np
from scipy.linalg import lapack

from fusion_core.methods.context.interior_point import (
    ACCEPT_GAP,
    Chains,
    MStepInfo,
    barrier_path,
    shift,
    solve_chains,
    solve_violating,
)
from fusion_core.methods.numerics import jit_enabled


def chain_objective(A: np.ndarray, B: np.ndarray, p: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """ψ(p) = Σ_u A_u log p_u + B_u log(1 − p_u), per chain."""
    return np.add.reduceat(A * np.log(p) + B * np.log1p(-p), starts)


def chain_certificate(
    A: np.ndarray,
    B: np.ndarray,
    hh: np.ndarray,
    link: np.ndarray,
    p: np.ndarray,
    *,
    lam: np.ndarray,
    starts: np.ndarray,
    eps: float,
) -> np.ndarray:
    """Relative duality gap (ψ̄(λ) − ψ(p)) / (1 + |ψ(p)|) per chain (spec §6.5): the Lagrangian with the link
    constraints dualised by λ is maximised level by level in closed form."""
    lam = np.where(link, lam, 0.0)
    s = shift(lam) - lam
    sw = s + (A + B)
    disc = np.sqrt(np.maximum(sw * sw - 4.0 * s * A, 0.0))
    den = sw + disc
    with np.errstate(divide="ignore", invalid="ignore"):
        p_in = np.where(den > 0, 2.0 * A / np.where(den > 0, den, 1.0), 1.0 + B / np.where(s != 0, s, -1.0))
    pstar = np.clip(p_in, eps, 1.0 - eps)
    dual = np.add.reduceat(
        A * np.log(pstar) + B * np.log1p(-pstar) - s * pstar + np.where(link, hh * np.abs(lam), 0.0), starts
    )
    primal = chain_objective(A, B, p, starts)
    return (dual - primal) / (1.0 + np.abs(primal))


class BinaryChains:
    """The binary chain program for :func:`~.interior_point.solve_chains` (floors ε ≤ p ≤ 1 − ε, tridiagonal
    Newton matrix, closed-form certificate)."""

    floors: tuple[int, ...] = (-1, 1)
    width = 1
    reset = 0.5

    def __init__(self, A: np.ndarray, B: np.ndarray, h: np.ndarray, starts: np.ndarray, eps: float):
        self.A, self.B, self.h, self.eps = A, B, h, eps
        self.chains = Chains(starts, len(A))
        self.hh = np.where(self.chains.link, h, 1.0)
        self.level_weight = A + B

    def start(self) -> np.ndarray:
        st = self.chains.starts
        sumW = np.add.reduceat(self.level_weight, st)
        return np.clip(np.add.reduceat(self.A, st) / sumW, 0.05, 0.95)[self.chains.chain]

    def gradient(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ip, iq = 1.0 / x, 1.0 / (1 - x)
        a, b = self.A * ip, self.B * iq
        return b - a, a * ip + b * iq

    def equality(self, r: np.ndarray) -> tuple[np.ndarray, None]:
        return r, None

    def factor(self, diag: np.ndarray, om: np.ndarray, active: np.ndarray | None) -> tuple[Any, int | None]:
        off = -(om if active is None else om * active)[:-1]
        df, ef, code = lapack.dpttrf(diag, off)
        return ((df, ef), None) if code == 0 else (None, code - 1)

    def solve(self, fac: Any, rhs: np.ndarray) -> np.ndarray:
        return lapack.dpttrs(fac[0], fac[1], rhs, overwrite_b=True)[0]  # rhs is the caller's scratch

    def certificate(self, x: np.ndarray, lam: np.ndarray, zF: Any, nu: Any, which: Any) -> np.ndarray:
        ch = self.chains
        if which is None or which.all():
            return chain_certificate(self.A, self.B, self.hh, ch.link, x, lam=lam, starts=ch.starts, eps=self.eps)
        lv = which[ch.chain]  # only the chains asked about (the per-chain sums are the same)
        gap = np.full(ch.n_chains, np.inf)
        sub_starts = np.r_[0, np.cumsum(ch.lens[which])[:-1]]
        gap[which] = chain_certificate(
            self.A[lv], self.B[lv], self.hh[lv], ch.link[lv], x[lv], lam=lam[lv], starts=sub_starts, eps=self.eps
        )
        return gap

    def finish(self, x: np.ndarray, lam: np.ndarray, zF: Any) -> tuple[np.ndarray, None]:
        return np.clip(x, self.eps, 1 - self.eps), None

    def output(self, x: np.ndarray) -> np.ndarray:
        return x

    def rescue(self, x: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """The barrier method from the interior-point iterate and from the pooled rate (a centred feasible start:
        the iterate of a failed run can sit so near a bound that centring stalls there); the better optimum."""
        A, B, h = self.A[lo:hi], self.B[lo:hi], self.h[lo:hi]
        pooled = np.full(len(A), np.clip(A.sum() / (A + B).sum(), 0.05, 0.95))
        runs = [barrier_chain(A, B, h, start, self.eps) for start in (x, pooled)]
        return max(runs, key=lambda p: float((A * np.log(p) + B * np.log1p(-p)).sum()))

    def subset(self, levels: np.ndarray, starts: np.ndarray) -> BinaryChains:
        return BinaryChains(self.A[levels], self.B[levels], self.h[levels], starts, self.eps)


def barrier_chain(A: np.ndarray, B: np.ndarray, h: np.ndarray, p0: np.ndarray, eps: float) -> np.ndarray:
    """Primal log-barrier method on one chain (Boyd & Vandenberghe §11.3), the §6.5 fallback."""
    n = len(A)
    link = np.ones(n, bool)
    link[-1] = False
    hh = np.where(link, h, 1.0)

    def slacks(p: np.ndarray) -> tuple[np.ndarray, ...]:
        d = np.zeros(n)
        d[:-1] = p[1:] - p[:-1]
        return hh - d, hh + d, p - eps, 1.0 - eps - p

    def objective(p: np.ndarray) -> float:
        return float((A * np.log(p) + B * np.log1p(-p)).sum())

    def barrier(p: np.ndarray, t: float) -> float:
        sU, sD, sL, sH = slacks(p)
        every = np.concatenate([sU[link], sD[link], sL, sH])  # one pass over all slacks (called ~10² times a chain)
        if not every.min() > 0:
            return np.inf
        return float(-t * objective(p) - np.log(every).sum())

    def newton(p: np.ndarray, t: float) -> tuple[np.ndarray, float] | None:
        sU, sD, sL, sH = slacks(p)
        fp = -A / p + B / (1 - p)
        H = A / p**2 + B / (1 - p) ** 2
        iu = np.where(link, 1 / sU, 0.0)
        idn = np.where(link, 1 / sD, 0.0)
        grad = t * fp + (shift(iu) - iu) - (shift(idn) - idn) + 1 / sL - 1 / sH
        om = np.where(link, 1 / sU**2 + 1 / sD**2, 0.0)
        d = t * H + 1 / sL**2 + 1 / sH**2 + om + shift(om)
        df, ef, info = lapack.dpttrf(d, -om[:-1])
        if info != 0:
            return None
        dx = lapack.dpttrs(df, ef, -grad)[0]
        return dx, float(-grad @ dx)

    p = p0.copy()
    if not np.isfinite(barrier(p, 1.0)):
        p = np.full(n, np.clip(A.sum() / (A + B).sum(), 0.05, 0.95))
    return barrier_path(p, barrier=barrier, newton=newton, objective=objective, m=4 * n - 2)


SHORT_CHAIN = 4  # chains of at most this many levels are solved exactly by enumerating the tight links


@functools.cache
def _link_patterns(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every assignment of the n − 1 links to free (0), tight upwards (+1) or tight downwards (−1): the signs
    (patterns × n − 1), the first level of each level's block (a free link starts a new block) and the
    same-block matrix (patterns × n × n)."""
    signs = np.array(list(itertools.product((0, 1, -1), repeat=n - 1)), dtype=float).reshape(-1, n - 1)
    first = np.zeros((len(signs), n), dtype=np.int64)
    for u in range(1, n):
        first[:, u] = np.where(signs[:, u - 1] == 0, u, first[:, u - 1])
    same = (first[:, :, None] == first[:, None, :]).astype(float)
    return signs, first, same


def short_chain_mstep(A: np.ndarray, B: np.ndarray, h: np.ndarray, eps: float) -> np.ndarray:
    """Exact optimum of the chain program (module docstring) on K chains of n ≤ :data:`SHORT_CHAIN` levels
    (``A``, ``B``, ``h``: K × n).  ψ is strictly concave (W > 0), so the optimum is the unique maximiser with its
    tight links as equalities (KKT).  For every pattern of tight links each block of levels joined by tight links
    is p_u = q + o_u (o_u the summed signed bounds), ψ is maximised over the block's q ∈ [max(ε − o),
    min(1 − ε − o)] (an end when ψ' does not change sign there, else safeguarded Newton on the decreasing ψ'(q));
    the best pattern whose free links hold is the optimum.  Used instead of the interior-point method, which can
    cycle on the degenerate corners of tiny chains (A or B zero at a level: optimum on a floor, links tight)."""
    K, n = A.shape
    signs, first, same = _link_patterns(n)
    P = len(signs)
    cum = np.zeros((K, P, n))
    cum[:, :, 1:] = np.cumsum(signs[None] * h[:, None, :-1], axis=2)
    off = cum - cum[:, np.arange(P)[:, None], first]  # offset from the block's first level

    def block_sum(v: np.ndarray) -> np.ndarray:  # per level: the sum over its block
        return np.matmul(same, v[..., None])[..., 0]

    big = 10.0
    lo = np.max(np.where(same > 0, (eps - off)[:, :, None, :], -big), axis=3)
    hi = np.min(np.where(same > 0, (1 - eps - off)[:, :, None, :], big), axis=3)
    feasible = (lo <= hi).all(axis=2)
    hi = np.maximum(lo, hi)
    Ak, Bk = A[:, None, :], B[:, None, :]

    def derivs(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = np.clip(q + off, eps, 1 - eps)
        ip, iq = 1.0 / p, 1.0 / (1.0 - p)
        return block_sum(Ak * ip - Bk * iq), block_sum(Ak * ip * ip + Bk * iq * iq)

    g_lo, c_lo = derivs(lo)
    g_hi, c_hi = derivs(hi)
    at_lo, at_hi = g_lo <= 0, g_hi >= 0  # ψ' of one sign on the bracket: the optimum is an end
    hi = np.where(at_lo, lo, hi)
    lo = np.where(at_hi & ~at_lo, hi, lo)
    q = 0.5 * (lo + hi)
    for _ in range(100):  # Newton on ψ'(q) from q, else from the bracket's other end, else bisection
        g, curv = derivs(q)
        up = g > 0
        lo, hi = np.where(up, q, lo), np.where(up, hi, q)
        g_lo, c_lo = np.where(up, g, g_lo), np.where(up, curv, c_lo)
        g_hi, c_hi = np.where(up, g_hi, g), np.where(up, c_hi, curv)
        with np.errstate(divide="ignore", invalid="ignore"):
            nq = q + g / curv
            other = np.where(up, hi + g_hi / c_hi, lo + g_lo / c_lo)  # ψ' convex or concave: one end converges
        other = np.where((other >= lo) & (other <= hi), other, 0.5 * (lo + hi))
        nq = np.where((nq >= lo) & (nq <= hi), nq, other)
        step = float(np.abs(nq - q).max())
        q = nq
        if step <= 1e-14:
            break
    p = np.clip(q + off, eps, 1 - eps)
    slack = h[:, None, :-1] * (1 + 1e-12) + 1e-15 - np.abs(np.diff(p, axis=2))
    feasible &= (slack >= 0).all(axis=2)
    with np.errstate(divide="ignore"):
        val = (Ak * np.log(p) + Bk * np.log1p(-p)).sum(axis=2)
    best = np.where(feasible, val, -np.inf).argmax(axis=1)
    return p[np.arange(K), best]


#: levels (in chains longer than SHORT_CHAIN) from which the compiled dynamic programme is used when numba is
#: installed: always.  Even a few hundred levels can cost the interior point 60 iterations and barrier fallbacks in
#: each of 200 EM iterations (seed 2214 of bench_pathologies, 476 levels: 6.3 s CPU, not converged; 0.43 s, 25 iterations with it),
#: which outweighs numba's one-off load per process (≈ 0.6 s; the app warms it at start)
DP_MIN_LEVELS = 1
#: trajectory steps per level after which the dynamic programme leaves a chain to the interior-point method: about
#: the interior point's own cost (≈ 3 ns a step against ≈ 60 ns per level and iteration, up to 60 iterations).  Long
#: runs of tight links make the recursion quadratic in the chain length; 500 left chains of 110–124 levels of seed 81
#: (bench_pathologies) to the interior point, which needed 60 iterations and its barrier fallback on them
DP_BUDGET = 2000


def dynamic_chain_mstep(
    A: np.ndarray, B: np.ndarray, h: np.ndarray, starts: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The chain programs solved by the exact dynamic programme of :mod:`._chain_dp` (compiled; needs numba): the
    solution, which chains it solved (within the work budget and certified, gap ≤ 1e-8, §6.5) and their gaps."""
    from fusion_core.methods.context import _chain_dp

    n = len(A)
    ch = Chains(starts, n)
    p = np.full(n, 0.5)
    lam = np.zeros(n)
    failed = np.zeros(ch.n_chains, dtype=np.bool_)
    _chain_dp.solve(A, B, h, ch.starts, float(eps), DP_BUDGET, p, lam, failed)
    bad = failed[ch.chain]
    p[bad] = 0.5
    lam[bad] = 0.0
    gap = chain_certificate(A, B, np.where(ch.link, h, 1.0), ch.link, p, lam=lam, starts=ch.starts, eps=eps)
    solved = ~failed & (gap <= ACCEPT_GAP)
    return p, solved, gap


def warm_chain_programme() -> None:
    """Load (or, the first time on a machine, compile and cache on disk: ≈ 4 s) the dynamic programme's kernel."""
    dynamic_chain_mstep(
        np.array([1.0, 0.0, 1.0]), np.array([0.0, 1.0, 1.0]), np.array([0.1, 0.1, 0.0]), np.zeros(1, np.int64), 1e-6
    )


def lipschitz_chain_mstep(
    A: np.ndarray, B: np.ndarray, h: np.ndarray, starts: np.ndarray, *, eps: float = 1e-6, max_iter: int = 60
) -> tuple[np.ndarray, MStepInfo]:
    """Solve the stacked chain programs of spec §5.3 exactly (module docstring).

    ``starts``: first index of every chain (chains are contiguous, levels sorted); ``h[u]`` is the bound of the
    link u → u+1 (ignored at a chain's last level).  Requires W = A + B > 0 and h > 0 on links (the callers drop
    zero-weight levels and contract zero links, §5.2, §5.5).  With numba and ≥ :data:`DP_MIN_LEVELS` levels to
    solve, the dynamic programme (:func:`dynamic_chain_mstep`) goes first and the interior-point method takes the
    chains it leaves; both return the optimum within the §6.5 certificate."""
    A = np.asarray(A, float)
    B = np.asarray(B, float)
    h = np.asarray(h, float)
    starts = np.asarray(starts, dtype=np.int64)
    if len(A) == 0:
        return np.zeros(0), MStepInfo(n_chains=len(starts))

    def solve_some(sel: np.ndarray, sub_starts: np.ndarray) -> tuple[np.ndarray, MStepInfo]:
        a, b, hs = A[sel], B[sel], h[sel]
        ch = Chains(sub_starts, len(a))
        short = ch.lens <= SHORT_CHAIN
        out = np.empty(len(a))
        for n in np.unique(ch.lens[short]):  # tiny chains: exact enumeration of the tight links
            lv = ch.starts[ch.lens == n][:, None] + np.arange(n)
            out[lv] = short_chain_mstep(a[lv], b[lv], hs[lv], eps)
        if short.all():
            return out, MStepInfo(n_chains=ch.n_chains)
        left = ~short
        dp_gap = 0.0
        n_dynamic = 0
        if jit_enabled() and ch.lens[left].sum() >= DP_MIN_LEVELS:
            lv = left[ch.chain]
            p, solved, gap = dynamic_chain_mstep(a[lv], b[lv], hs[lv], np.r_[0, np.cumsum(ch.lens[left])[:-1]], eps)
            which = np.flatnonzero(left)
            out[lv] = p
            left[which[solved]] = False
            n_dynamic = int(solved.sum())
            dp_gap = float(gap[solved].max()) if n_dynamic else 0.0
        info = MStepInfo()
        if left.any():
            rest = left[ch.chain]
            part, info = solve_chains(
                BinaryChains(a[rest], b[rest], hs[rest], np.r_[0, np.cumsum(ch.lens[left])[:-1]], eps), max_iter
            )
            out[rest] = part
        info.n_chains = ch.n_chains
        info.n_dynamic = n_dynamic
        info.gap = max(info.gap, dp_gap)
        return out, info

    return solve_violating(np.clip(A / (A + B), eps, 1 - eps), h, starts, solve_some)


def discrete_mstep(A: np.ndarray, B: np.ndarray, c: float, eps: float = 1e-6) -> np.ndarray:
    """Categorical context (discrete metric, spec §5.4): maximise Σ_u A_u log p_u + B_u log(1 − p_u) subject to
    |p_a − p_b| ≤ c for all pairs, i.e. max p − min p ≤ c, and ε ≤ p ≤ 1 − ε.  For a window [L, L + c] the optimum
    is clip(A/W, L, L + c); the best value as a function of L is concave (partial maximisation of a concave function
    over a convex set), so a bounded scalar search over L is exact to its tolerance.  c ≥ 1 decouples the levels."""
    A = np.asarray(A, float)
    B = np.asarray(B, float)
    u = np.clip(A / (A + B), eps, 1 - eps)
    if len(u) < 2 or u.max() - u.min() <= c:
        return u
    if c <= 0:
        return np.full_like(u, np.clip(A.sum() / (A + B).sum(), eps, 1 - eps))

    def neg(L: float) -> float:
        q = np.clip(u, L, L + c)
        return -float((A * np.log(q) + B * np.log1p(-q)).sum())

    lo, hi = max(eps, float(u.min())), min(float(u.max()) - c, 1 - eps - c)
    if hi <= lo:
        L = lo
    else:
        from scipy.optimize import minimize_scalar  # lazy: scipy.optimize costs 0.2 s of start-up

        L = minimize_scalar(neg, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}).x
    return np.clip(u, L, L + c)
