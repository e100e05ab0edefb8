"""The one batched primal–dual interior-point method behind both ``context-em`` M-steps (spec ``context.md`` §6).

Both M-step programs are *chain programs*: on every chain (one annotator's sorted context levels) maximise a
separable concave objective subject to |x_{u+1} − x_u| ≤ h_u on the chain's links and floors x ≥ ε — the binary
curves also x ≤ 1 − ε (§5.3, :mod:`.chain`), the confusion rows Σ_j x_{u,j} = 1 per level (§9.2 option 2,
:mod:`.simplex`).  :func:`solve_chains` is the Mehrotra predictor–corrector of §6.1–§6.5 for any such program:
slacks and multipliers for the link and floor constraints, per-chain step lengths (fraction to the boundary
0.995), finished chains leave the Newton system (identity blocks), a chain whose factorisation breaks down is
accepted when its duality-gap certificate already holds and frozen otherwise (§6.3 step 7), and every chain whose
final certificate exceeds 1e-8 is re-solved by the program's log-barrier fallback (:func:`barrier_path`, §6.5).

What differs between the programs — objective derivatives, the Newton factorisation (tridiagonal or banded on
the simplex's null space), the certificate, the equality multiplier — is supplied by a :class:`ChainProgram`.
Arrays are per level, shape ``(n,)`` (binary) or class-major ``(J, n)`` (simplex); the chain axis is the last.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

DONE_GAP = 1e-9  # certificate gap that finishes a nearly complementary chain
ACCEPT_GAP = 1e-8  # certificate gap a final iterate must meet, else the barrier fallback runs


@dataclass
class MStepInfo:
    """Diagnostics of one batched M-step."""

    iterations: int = 0  # interior-point iterations (0 when every chain had a closed form)
    gap: float = 0.0  # largest relative certificate gap (§6.5)
    n_chains: int = 0
    n_closed_form: int = 0
    n_frozen: int = 0
    n_fallback: int = 0
    n_dynamic: int = 0  # chains solved by the compiled dynamic programme (binary chains, :mod:`.chain`)

    def absorb(self, other: MStepInfo) -> None:
        """Take over the solver figures of ``other`` (the solver runs on the non-closed-form chains)."""
        self.iterations, self.gap = other.iterations, other.gap
        self.n_frozen, self.n_fallback = other.n_frozen, other.n_fallback
        self.n_dynamic = other.n_dynamic


class Chains:
    """Contiguous chains over ``n`` levels: ``starts`` (first level of each chain), ``ends``, ``lens``, ``chain``
    (chain of each level) and ``link`` (the level has a successor in its chain)."""

    def __init__(self, starts: np.ndarray, n: int):
        self.starts = np.asarray(starts, dtype=np.int64)
        self.n = n
        self.ends = np.r_[self.starts[1:], n]
        self.lens = self.ends - self.starts
        self.chain = np.repeat(np.arange(len(self.starts)), self.lens)
        self.link = np.ones(n, bool)
        self.link[self.ends - 1] = False

    @property
    def n_chains(self) -> int:
        return len(self.starts)


def shift(v: np.ndarray) -> np.ndarray:
    """``v`` moved one level along the last (chain) axis: (shift v)_u = v_{u−1}, 0 at u = 0."""
    out = np.empty_like(v)
    out[..., 0] = 0.0
    out[..., 1:] = v[..., :-1]
    return out


def back_diffs(v: np.ndarray) -> np.ndarray:
    """``shift(v) − v`` in one pass: v_{u−1} − v_u along the chain axis (−v_0 at u = 0)."""
    out = np.empty_like(v)
    np.negative(v[..., 0], out=out[..., 0])
    np.subtract(v[..., :-1], v[..., 1:], out=out[..., 1:])
    return out


def link_diffs(v: np.ndarray, lf: np.ndarray) -> np.ndarray:
    """Forward differences v_{u+1} − v_u along the chain axis, zero where ``lf`` (links as 0/1) is 0."""
    out = np.empty_like(v)
    out[..., :-1] = v[..., 1:] - v[..., :-1]
    out[..., -1] = 0.0
    out *= lf
    return out


class ChainProgram(Protocol):
    """What :func:`solve_chains` needs from a chain program (see :mod:`.chain` and :mod:`.simplex`).

    ``floors``: the box constraints as signs, −1 for x ≥ ε and +1 for x ≤ 1 − ε; ``width``: entries per level;
    ``hh``: link bounds h (1 where a level has no link); ``level_weight``: total weight per level; ``reset``: the
    value that replaces a non-finite iterate entry."""

    chains: Chains
    floors: tuple[int, ...]
    width: int
    eps: float
    hh: np.ndarray
    level_weight: np.ndarray
    reset: float

    def start(self) -> np.ndarray: ...

    def gradient(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First derivative and Hessian diagonal of the objective to minimise (−ψ)."""
        ...

    def equality(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The dual residual with the equality multiplier ν added (and ν), or unchanged and None."""
        ...

    def factor(self, diag: np.ndarray, om: np.ndarray, active: np.ndarray | None) -> tuple[Any, int | None]:
        """Factorise the Newton matrix (``diag`` on levels, couplings −``om`` along links; inactive levels are
        identity blocks): (factor, None), or (None, the level where the factorisation broke down)."""
        ...

    def solve(self, fac: Any, rhs: np.ndarray) -> np.ndarray: ...

    def certificate(
        self, x: np.ndarray, lam: np.ndarray, zF: list[np.ndarray], nu: Any, which: np.ndarray | None
    ) -> np.ndarray:
        """Relative duality gap per chain (§6.5); with ``which`` only those chains need to be right."""
        ...

    def finish(self, x: np.ndarray, lam: np.ndarray, zF: list[np.ndarray]) -> tuple[np.ndarray, Any]:
        """The last iterate projected onto the feasible box/simplex, and the multiplier ν for the certificate."""
        ...

    def output(self, x: np.ndarray) -> np.ndarray:
        """The solution in the caller's layout (levels first)."""
        ...

    def rescue(self, x: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """The barrier fallback on levels lo:hi (one chain, caller's layout)."""
        ...

    def subset(self, levels: np.ndarray, starts: np.ndarray) -> ChainProgram:
        """The same program on the given levels (whole chains, in order) with chain ``starts`` among them."""
        ...


# ------------------------------------------------------------------------------------------- floors
def _floor_slack(x: np.ndarray, sign: int, eps: float) -> np.ndarray:
    return x - eps if sign < 0 else 1 - eps - x


def _floor_residual(x: np.ndarray, s: np.ndarray, sign: int, eps: float) -> np.ndarray:
    return -x + eps + s if sign < 0 else x - (1 - eps) + s


def _floor_step(dx: np.ndarray, rp: np.ndarray, sign: int) -> np.ndarray:
    return dx - rp if sign < 0 else -rp - dx


def _add_floor(acc: np.ndarray, v: np.ndarray, sign: int) -> np.ndarray:
    return acc - v if sign < 0 else acc + v


def _levelsum(v: np.ndarray) -> np.ndarray:
    return v if v.ndim == 1 else v.sum(axis=0)


# ------------------------------------------------------------------------------------------- the solver
@dataclass
class _Residuals:
    r: np.ndarray  # dual residual
    nu: Any  # equality multiplier (simplex) or None
    lam: np.ndarray  # link multipliers z^U − z^D
    rp: list[np.ndarray]  # primal residuals: up, down, floors
    comp: list[np.ndarray]  # complementarity products s·z, same order
    comp_sum: np.ndarray  # Σ s·z over the families, per entry
    H: np.ndarray  # Hessian diagonal of the objective
    comp_total: np.ndarray  # Σ s·z per chain
    resid: np.ndarray  # Σ |r| per chain
    m_c: np.ndarray  # number of complementarity pairs per chain

    @property
    def mu(self) -> np.ndarray:
        return self.comp_total / self.m_c


class _InteriorPoint:
    """State of one :func:`solve_chains` run: iterate x, slacks s and multipliers z (up, down, floors)."""

    def __init__(self, prog: ChainProgram, state: tuple[np.ndarray, list[np.ndarray], list[np.ndarray]] | None = None):
        self.prog = prog
        ch = prog.chains
        self.starts, self.chain, self.lens = ch.starts, ch.chain, ch.lens
        self.lf = ch.link.astype(float)
        self.sumW = np.add.reduceat(prog.level_weight, ch.starts)
        self.m_c = (prog.width * ((2 + len(prog.floors)) * ch.lens - 2)).astype(float)
        self.done = np.zeros(ch.n_chains, bool)
        self.frozen = np.zeros(ch.n_chains, bool)
        if state is not None:  # the iterate of a larger run, restricted to these chains (see solve_chains)
            self.x, self.s, self.z = state
            return
        x = prog.start()
        mu0 = (0.01 * self.sumW / ch.lens)[ch.chain]
        dx0 = link_diffs(x, self.lf)
        s_up = np.where(ch.link, prog.hh - dx0, 1.0)
        s_down = np.where(ch.link, prog.hh + dx0, 1.0)
        s_floor = [_floor_slack(x, sign, prog.eps) for sign in prog.floors]
        self.x = x
        self.s = [s_up, s_down, *s_floor]
        self.z = [self.lf * mu0 / s_up, self.lf * mu0 / s_down, *(mu0 / s for s in s_floor)]

    def restrict(self, keep: np.ndarray) -> tuple[_InteriorPoint, np.ndarray]:
        """A run on the chains ``keep`` (boolean per chain) only, from their current iterate; and their levels."""
        ch = self.prog.chains
        lv = np.flatnonzero(keep[ch.chain])
        sub_starts = np.r_[0, np.cumsum(ch.lens[keep])[:-1]].astype(np.int64)
        state = (self.x[..., lv], [v[..., lv] for v in self.s], [v[..., lv] for v in self.z])
        return _InteriorPoint(self.prog.subset(lv, sub_starts), state), lv

    def absorb(self, sub: _InteriorPoint, lv: np.ndarray, chains: np.ndarray) -> None:
        """Take back the iterate and flags of a restricted run on levels ``lv`` (chains ``chains``)."""
        self.x[..., lv] = sub.x
        for mine, theirs in zip([*self.s, *self.z], [*sub.s, *sub.z]):
            mine[..., lv] = theirs
        self.done[chains] = sub.done
        self.frozen[chains] = sub.frozen

    @property
    def active(self) -> np.ndarray:
        return ~self.done & ~self.frozen

    def per_level(self, v: np.ndarray) -> np.ndarray:
        """A per-chain value at every level of its chain (``v[chain]``; chains are contiguous, so a repeat)."""
        return np.repeat(v, self.lens)

    def residuals(self) -> _Residuals:
        prog, x, s, z = self.prog, self.x, self.s, self.z
        fp, H = prog.gradient(x)
        lam = z[0] - z[1]
        r = fp + back_diffs(lam)
        for sign, zf in zip(prog.floors, z[2:]):
            r = _add_floor(r, zf, sign)
        r, nu = prog.equality(r)
        dxn = link_diffs(x, self.lf)
        rp = [self.lf * (dxn - prog.hh + s[0]), self.lf * (-dxn - prog.hh + s[1])]
        rp += [_floor_residual(x, sf, sign, prog.eps) for sign, sf in zip(prog.floors, s[2:])]
        comp = [sk * zk for sk, zk in zip(s, z)]
        comp_sum = sum(comp[1:], comp[0])
        total = np.add.reduceat(_levelsum(comp_sum), self.starts)
        resid = np.add.reduceat(_levelsum(np.abs(r)), self.starts)
        return _Residuals(r, nu, lam, rp, comp, comp_sum, H, total, resid, self.m_c)

    def update_done(self, res: _Residuals) -> None:
        """§6.5: a chain is done when complementarity and residual are tiny, or nearly so and certified."""
        tol = self.sumW
        fin = (res.comp_total <= 1e-10 * tol) & (res.resid <= 1e-10 * tol)
        near = (res.comp_total <= 1e-6 * tol) & ~fin & ~self.done
        if near.any():
            gap = self.prog.certificate(self.x, res.lam, self.z[2:], res.nu, near)
            fin |= near & (gap <= DONE_GAP)
        self.done |= fin

    def factor(self, res: _Residuals) -> Any:
        """The Newton matrix factorised for the active chains; None when no chain is left active.  Also keeps the
        reciprocals 1/s and 1/z and the weights w = z/s that both directions and step lengths of the iteration use
        (products, not divisions, in the passes that follow)."""
        prog = self.prog
        self.inv_s = [1.0 / sk for sk in self.s]
        with np.errstate(divide="ignore"):  # z = 0 on the masked link rows: 1/z = inf there (see max_step)
            self.inv_z = [1.0 / zk for zk in self.z]
        w = [zk * ik for zk, ik in zip(self.z, self.inv_s)]
        self.w = w
        om = (w[0] + w[1]) * self.lf
        diag = res.H
        for wf in w[2:]:
            diag = diag + wf
        diag = diag + om + shift(om)
        while True:
            active = self.active
            if not active.any():
                return None
            act = None if active.all() else active[self.chain]
            d = diag if act is None else np.where(act, diag, 1.0)
            finite = np.isfinite(d) if d.ndim == 1 else np.isfinite(d).all(axis=0)
            if not finite.all():
                self.frozen[np.unique(self.chain[~finite])] = True
                continue
            fac, bad = prog.factor(d, om, act)
            if bad is None:
                return fac
            c = self.chain[bad]
            one = np.zeros(len(self.done), bool)
            one[c] = True
            if prog.certificate(self.x, res.lam, self.z[2:], res.nu, one)[c] <= ACCEPT_GAP:
                self.done[c] = True  # the factorisation broke down at an already optimal point
            else:
                self.frozen[c] = True  # §6.3 step 7

    def direction(
        self, fac: Any, res: _Residuals, t: list[np.ndarray], actf: np.ndarray | None
    ) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
        """Newton direction (dx, ds, dz) for complementarity right-hand sides r_c given as ``t`` = r_c / s
        (eliminating ds and dz: Δz = −(r_c + z Δs) / s = −t − w Δs)."""
        prog, w, rp = self.prog, self.w, res.rp
        v = [tk - wk * rpk for tk, wk, rpk in zip(t, w, rp)]
        u = v[0] - v[1]
        rhs = back_diffs(u)
        for sign, vf in zip(prog.floors, v[2:]):
            rhs = _add_floor(rhs, vf, sign)
        rhs -= res.r
        if actf is not None:
            rhs *= actf
        dx = prog.solve(fac, rhs)
        if actf is not None:
            dx *= actf
        ddx = link_diffs(dx, self.lf)
        ds = [-rp[0] - ddx, -rp[1] + ddx, *(_floor_step(dx, rpf, sign) for sign, rpf in zip(prog.floors, rp[2:]))]
        if actf is not None:
            for d in ds:
                d *= actf
        dz = []
        for tk, wk, dsk in zip(t, w, ds):
            d = wk * dsk
            d += tk
            np.negative(d, out=d)
            dz.append(d)
        return dx, ds, dz

    def max_step(self, ds: list[np.ndarray], dz: list[np.ndarray]) -> np.ndarray:
        """Largest step keeping every slack and multiplier ≥ 0, per chain: 1 / the largest relative decrease
        −dv / v (+inf where nothing decreases; the 0 · inf ratios of the masked link rows are NaN, ignored)."""
        lvl = np.full(self.x.shape, np.inf)
        tmp = np.empty(self.x.shape)
        with np.errstate(invalid="ignore"):
            for inv, dv in [*zip(self.inv_s, ds), *zip(self.inv_z, dz)]:
                np.multiply(dv, inv, out=tmp)
                np.fmin(lvl, tmp, out=lvl)
        worst = np.fmin.reduceat(lvl if lvl.ndim == 1 else np.fmin.reduce(lvl, axis=0), self.starts)
        out = np.full(worst.shape, np.inf)
        neg = worst < 0
        out[neg] = -1.0 / worst[neg]
        return out

    def step(self, fac: Any, res: _Residuals) -> None:
        """One Mehrotra predictor–corrector step of every active chain (§6.3)."""
        active = self.active
        actf = None if active.all() else self.per_level(active.astype(float))
        _, ds, dz = self.direction(fac, res, self.z, actf)  # predictor (affine scaling): r_c = s z, t = z
        a_aff = self.per_level(np.minimum(1.0, self.max_step(ds, dz)))
        dsdz = [d_s * d_z for d_s, d_z in zip(ds, dz)]
        # Σ (s + a Δs)(z + a Δz) = (1 − a) Σ s z + a² Σ Δs Δz, as s Δz + z Δs = −r_c = −s z in the predictor
        comp_aff = _levelsum((1.0 - a_aff) * res.comp_sum + a_aff * a_aff * sum(dsdz[1:], dsdz[0]))
        mu_aff = np.add.reduceat(comp_aff, self.starts) / self.m_c
        sigma = np.clip(mu_aff / np.maximum(res.mu, 1e-300), 0.0, 1.0) ** 3
        smu = self.per_level(sigma * res.mu)
        t = []  # corrector: r_c = s z + Δs Δz − σ µ (0 on the masked link rows), t = r_c / s
        for k, (p, zk, ik) in enumerate(zip(dsdz, self.z, self.inv_s)):
            p -= smu
            p *= ik
            p += zk
            if k < 2:
                p *= self.lf
            t.append(p)
        dx, ds, dz = self.direction(fac, res, t, actf)  # corrector
        alpha = np.minimum(1.0, 0.995 * self.max_step(ds, dz))
        alpha = self.per_level(alpha * active)
        self.x = self.x + alpha * dx
        for v, d in [*zip(self.s, ds), *zip(self.z, dz)]:
            d *= alpha
            v += d
        finite = np.isfinite(self.x) if self.x.ndim == 1 else np.isfinite(self.x).all(axis=0)
        if not finite.all():
            self.frozen[np.unique(self.chain[~finite])] = True
            self.x = np.where(np.isfinite(self.x), self.x, self.prog.reset)


def solve_chains(prog: ChainProgram, max_iter: int = 60) -> tuple[np.ndarray, MStepInfo]:
    """Batched Mehrotra predictor–corrector for every chain of ``prog`` (spec §6.1–§6.5, module docstring).

    Returns the solution in the program's output layout and the diagnostics (iterations, largest certificate
    gap, frozen chains, barrier fallbacks)."""
    full = ip = _InteriorPoint(prog)
    lv, chains = np.arange(prog.chains.n), np.arange(prog.chains.n_chains)
    info = MStepInfo(n_chains=prog.chains.n_chains)
    for it in range(1, max_iter + 1):
        info.iterations = it
        res = ip.residuals()
        ip.update_done(res)
        active = ip.active
        if not active.any():
            break
        if ip.prog.chains.lens[active].sum() * 2 < len(lv):  # most levels finished: iterate on the rest only
            if ip is not full:
                full.absorb(ip, lv, chains)
            keep = np.zeros(prog.chains.n_chains, bool)
            keep[chains[active]] = True
            ip, lv = full.restrict(keep)
            chains = np.flatnonzero(keep)
            res = ip.residuals()
        fac = ip.factor(res)
        if fac is None:
            break
        ip.step(fac, res)
    if ip is not full:
        full.absorb(ip, lv, chains)
    ip = full
    lam = ip.z[0] - ip.z[1]
    x, nu = prog.finish(ip.x, lam, ip.z[2:])
    gap = prog.certificate(x, lam, ip.z[2:], nu, None)
    out = prog.output(x)
    failed = np.flatnonzero(gap > ACCEPT_GAP)  # frozen chains whose last iterate passes the certificate are kept
    info.n_frozen = int(ip.frozen.sum())
    ch = prog.chains
    for c in failed:  # §6.5 fallback: primal log-barrier method on the chain
        lo, hi = int(ch.starts[c]), int(ch.ends[c])
        out[lo:hi] = prog.rescue(out[lo:hi], lo, hi)
        info.n_fallback += 1
    gap[failed] = 0.0  # the barrier iterate carries no multipliers; its suboptimality is bounded by m / t
    info.gap = float(gap.max()) if len(gap) else 0.0
    return out, info


def solve_violating(
    closed: np.ndarray,
    h: np.ndarray,
    starts: np.ndarray,
    solve_some: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, MStepInfo]],
) -> tuple[np.ndarray, MStepInfo]:
    """Per-level optima ``closed`` (levels first) where they satisfy every link bound of their chain; the chains
    that violate one are solved by ``solve_some(level mask, sub-chain starts)`` (the interior-point method)."""
    starts = np.asarray(starts, dtype=np.int64)
    ch = Chains(starts, len(closed))
    d = np.zeros_like(closed)
    d[:-1] = closed[1:] - closed[:-1]
    over = np.abs(d) > (h if closed.ndim == 1 else h[:, None])
    viol = ch.link & (over if closed.ndim == 1 else over.any(axis=1))
    bad = np.add.reduceat(viol.astype(np.int64), starts) > 0
    info = MStepInfo(n_chains=len(starts), n_closed_form=int((~bad).sum()))
    if not bad.any():
        return closed, info
    sel = bad[ch.chain]
    sub_starts = np.r_[0, np.cumsum(ch.lens[bad])[:-1]]
    part, sub = solve_some(sel, sub_starts)
    closed[sel] = part
    info.absorb(sub)
    return closed, info


# ------------------------------------------------------------------------------------------- fallback
def barrier_path(
    x: np.ndarray,
    *,
    barrier: Callable[[np.ndarray, float], float],
    newton: Callable[[np.ndarray, float], tuple[np.ndarray, float] | None],
    objective: Callable[[np.ndarray], float],
    m: int,
    outer: int = 40,
    min_step: float = 1e-12,
) -> np.ndarray:
    """Primal log-barrier method (Boyd & Vandenberghe §11.3): centring by damped Newton steps with backtracking
    (Armijo 0.25, halving), t ← 10 t until the duality bound m / t ≤ 1e-10 (1 + |ψ|).

    ``barrier(x, t)``: t·(−ψ) − Σ log slacks (+inf outside); ``newton(x, t)``: (step, Newton decrement²) or None
    when the Newton system cannot be factorised (the current iterate is returned); ``m``: number of inequality
    constraints."""
    t = 1.0
    for _ in range(outer):
        b0 = barrier(x, t)
        for _ in range(100):
            found = newton(x, t)
            if found is None:
                return x
            dx, dec = found
            if not dec / 2 > 1e-12:  # centred (a NaN decrement also ends the centring)
                break
            # damped Newton on a self-concordant barrier accepts a step ≥ 1/(1 + λ) (λ² = dec, B&V §9.6.4); a much
            # shorter one means rounding (slacks near ε) has taken over: take it if it helps, then stop centring
            smallest = max(min_step, 0.05 / (1.0 + np.sqrt(dec)))
            step = 1.0
            b1 = barrier(x + dx, t)
            while b1 > b0 - 0.25 * step * dec and step > smallest:
                step *= 0.5
                b1 = barrier(x + step * dx, t)
            if b1 < b0:
                x = x + step * dx
            if step <= smallest or not b0 - b1 > 1e-13 * max(1.0, abs(b0)):
                break
            b0 = b1  # the barrier at the new x
        if m / t <= 1e-10 * (1 + abs(objective(x))):
            break
        t *= 10.0
    return x
