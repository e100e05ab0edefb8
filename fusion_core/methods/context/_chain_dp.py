"""Exact dynamic programme for the binary chain M-step (numba; imported only by :func:`.chain.dynamic_chain_mstep`).

Per chain, minimise F(p) = Σ_u f_u(p_u), f_u(p) = −A_u log p − B_u log(1 − p), subject to |p_{u+1} − p_u| ≤ h_u and
ε ≤ p ≤ 1 − ε (spec ``context.md`` §5.3).  Bellman's recursion along the chain:

    V_0 = f_0,    V_u(x) = f_u(x) + min_{|y − x| ≤ h_{u−1}} V_{u−1}(y).

Every V_u is convex; with r_{u−1} its minimiser on the box, the inner minimum is attained at y = clip(r_{u−1},
x − h, x + h), so V'_u(x) = f'_u(x) + V'_{u−1}(y) when that clip is active and f'_u(x) otherwise.  V'_u(x) is
therefore the sum of f'_v along the *trajectory* of x (y_u = x, y_{v−1} = clip(r_{v−1}, y_v ± h_{v−1})) until the
clip is inactive.  Forward, r_u is found by a safeguarded Newton method on x(1 − x)·V'_u(x) (linear for one
level); where r_u lies in the band |x − r_{u−1}| ≤ h_{u−1} it is clip(A_u / W_u) without any trajectory.  Backward,
p_last = r_last and p_u = clip(r_u, p_{u+1} − h_u, p_{u+1} + h_u): the exact optimum (up to the root tolerance).

V'_u jumps where a trajectory passes a level whose minimiser is on the box with a non-zero derivative (A = 0 or
B = 0 levels are common: one response per level); the root search steps onto such a jump instead of across it.

Multipliers for the §6.5 certificate: λ_u = λ_{u−1} + f'_u(p_u) − z^L_u + z^H_u with λ = 0 on free links and past
the chain's end, λ ≥ 0 on links tight upwards and ≤ 0 downwards; box multipliers only at levels on the box.  The
feasible interval of each λ_u is propagated forwards and a value picked backwards.

A chain whose trajectories grow too long (work above ``budget`` × its length; long runs of tight links make the
recursion quadratic) is abandoned (``failed``) and left to the interior-point method, as is any chain whose
certificate fails in the caller.
"""

from __future__ import annotations

import numba as nb
import numpy as np

JUMP_TOL = 1e-15  # tight links and box levels are recognised within this (p is a sum of a few link bounds)
BOX_TOL = 1e-12


@nb.njit(cache=True, nogil=True)
def _level(a, b, x):
    """f'_u(x) and f''_u(x) of one level (A_u = a, B_u = b)."""
    ip = 1.0 / x
    iq = 1.0 / (1.0 - x)
    ai = a * ip
    bi = b * iq
    return bi - ai, ai * ip + bi * iq


@nb.njit(cache=True, nogil=True)
def _slope(u, x, A, B, h, r, vr, lo):  # noqa: PLR0917 - a compiled kernel takes its arrays positionally
    """V'_u(x), V''_u(x), the nearest jumps of V'_u below and above x, and the trajectory length."""
    g = 0.0
    c = 0.0
    y = x
    v = u
    klo = -1.0
    khi = 2.0
    steps = 1
    while True:
        gv, cv = _level(A[v], B[v], y)
        g += gv
        c += cv
        if v == lo:
            break
        hv = h[v - 1]
        rv = r[v - 1]
        if vr[v - 1] != 0.0:  # the clip at this level switches where y = r ± h: V'_u jumps there
            for kink in (x + (rv - hv - y), x + (rv + hv - y)):
                if kink < x:
                    klo = max(klo, kink)
                elif kink > x:
                    khi = min(khi, kink)
        if y + hv < rv:
            y += hv
        elif y - hv > rv:
            y -= hv
        else:
            break
        v -= 1
        steps += 1
    return g, c, klo, khi, steps


@nb.njit(cache=True, nogil=True)
def _root(u, a, b, x, A, B, h, r, vr, lo, eps, work):  # noqa: PLR0917 - a compiled kernel takes its arrays positionally
    """Minimiser of V_u in [a, b] from x (V'_u < 0 just above a unless a = ε, > 0 just below b unless b = 1 − ε).
    Returns (x, V'_u(x) when x is a box end with a non-zero derivative else 0, V''_u(x))."""
    top = 1.0 - eps
    tried_lo = a != eps
    tried_hi = b != top
    c = 0.0
    for _ in range(200):
        if not (a < x < b):
            if x <= a and not tried_lo:
                tried_lo = True
                ge, ce, _, _, n = _slope(u, eps, A, B, h, r, vr, lo)
                work[0] += n
                if ge >= 0.0:
                    return eps, ge, ce
            elif x >= b and not tried_hi:
                tried_hi = True
                ge, ce, _, _, n = _slope(u, top, A, B, h, r, vr, lo)
                work[0] += n
                if ge <= 0.0:
                    return top, ge, ce
            x = 0.5 * (a + b)
        g, c, klo, khi, n = _slope(u, x, A, B, h, r, vr, lo)
        work[0] += n
        if g > 0.0:
            b = x
        elif g < 0.0:
            a = x
        else:
            return x, 0.0, c
        w = x * (1.0 - x)
        dG = (1.0 - 2.0 * x) * g + w * c
        nx = x - w * g / dG if dG > 0.0 else x - g / c
        if abs(nx - x) <= max(1e-13 * min(x, 1.0 - x), JUMP_TOL):
            return (nx if a < nx < b else x), 0.0, c
        k = klo if g > 0.0 else khi
        if a < k < b and ((g > 0.0 and nx < k) or (g < 0.0 and nx > k)):
            # the step crosses a jump of V': the root is at the jump if the sign changes there
            gk, ck, _, _, n1 = _slope(u, k, A, B, h, r, vr, lo)
            kk = np.nextafter(k, -1.0) if g > 0.0 else np.nextafter(k, 2.0)
            gk2, ck2, _, _, n2 = _slope(u, kk, A, B, h, r, vr, lo)
            work[0] += n1 + n2
            if (gk > 0.0) != (gk2 > 0.0) or gk == 0.0 or gk2 == 0.0:
                return k, 0.0, ck
            if gk > 0.0:  # positive on both sides: the root is below the jump
                b = min(k, kk)
                nx = b - gk2 / ck2 if g > 0.0 else 0.5 * (a + b)
            else:
                a = max(k, kk)
                nx = a - gk2 / ck2 if g < 0.0 else 0.5 * (a + b)
        if b - a <= 4e-16 * b:
            return 0.5 * (a + b), 0.0, c
        x = nx
    return x, 0.0, c


@nb.njit(cache=True, nogil=True)
def _forward(lo, hi, A, B, h, eps, r, vr, cr, budget):  # noqa: PLR0917 - a compiled kernel takes its arrays positionally
    """Minimisers r_u of V_u for one chain; False when the trajectories exceed the work budget."""
    top = 1.0 - eps
    work = np.zeros(1, np.int64)
    limit = budget * (hi - lo)
    for u in range(lo, hi):
        Au = A[u]
        Bu = B[u]
        rho = min(max(Au / (Au + Bu), eps), top)  # the minimiser of f_u alone
        fl, fc = eps, top
        if u > lo:
            fl = max(r[u - 1] - h[u - 1], eps)
            fc = min(r[u - 1] + h[u - 1], top)
        if fl <= rho <= fc:  # in the band where V'_u = f'_u
            g, c = _level(Au, Bu, rho)
            r[u] = rho
            vr[u] = g if (rho == eps and g > 0.0) or (rho == top and g < 0.0) else 0.0
            cr[u] = c
            continue
        end = fc if rho > fc else fl  # V'_u has one sign on the band: the root is beyond this end of it (inside
        # the box: rho lies in it and beyond this end)
        ge, ce = _level(Au, Bu, end)
        gt = ge + vr[u - 1]  # V'_u just beyond the band (the clip active) and its slope
        ct = ce + cr[u - 1]
        if (rho > fc and gt >= 0.0) or (rho < fl and gt <= 0.0):  # V' jumps across 0 at the band's end
            r[u] = end
            vr[u] = 0.0
            cr[u] = ct
            continue
        if rho > fc:
            x, v, cc = _root(u, fc, top, fc - gt / ct, A, B, h, r, vr, lo, eps, work)
        else:
            x, v, cc = _root(u, eps, fl, fl - gt / ct, A, B, h, r, vr, lo, eps, work)
        r[u] = x
        vr[u] = v
        cr[u] = cc
        if work[0] > limit:
            return False
    return True


@nb.njit(cache=True, nogil=True)
def _backward(lo, hi, A, B, h, eps, r, p, lam, tight):  # noqa: PLR0917 - a compiled kernel takes its arrays positionally
    """The optimum p from the minimisers r, and certificate multipliers λ (module docstring)."""
    p[hi - 1] = r[hi - 1]
    for u in range(hi - 2, lo - 1, -1):
        q = p[u + 1]
        if r[u] <= q - h[u] + JUMP_TOL:
            p[u] = max(q - h[u], eps)  # (the max only undoes rounding: r_u ≥ ε)
            tight[u] = 1
        elif r[u] >= q + h[u] - JUMP_TOL:
            p[u] = min(q + h[u], 1.0 - eps)
            tight[u] = -1
        else:
            p[u] = r[u]
            tight[u] = 0
    top = 1.0 - eps
    ilo = np.empty(hi - lo)
    ihi = np.empty(hi - lo)
    plo = 0.0
    phi = 0.0
    for u in range(lo, hi):  # feasible interval of λ_u given the levels up to u
        x = p[u]
        fp = _level(A[u], B[u], x)[0]
        jlo = -np.inf if x <= eps + BOX_TOL else plo + fp
        jhi = np.inf if x >= top - BOX_TOL else phi + fp
        slo = -np.inf if (u < hi - 1 and tight[u] == -1) else 0.0
        shi = np.inf if (u < hi - 1 and tight[u] == 1) else 0.0
        nlo = max(jlo, slo)
        nhi = min(jhi, shi)
        if nlo > nhi:  # empty by rounding: the nearest sign-feasible value
            nlo = nhi = shi if jlo > shi else slo
        ilo[u - lo] = nlo
        ihi[u - lo] = nhi
        plo = nlo
        phi = nhi
    lam[hi - 1] = 0.0
    for u in range(hi - 2, lo - 1, -1):  # λ_u that makes level u + 1 stationary, within its interval
        x = p[u + 1]
        t = lam[u + 1] - _level(A[u + 1], B[u + 1], x)[0]
        tlo = -np.inf if x >= top - BOX_TOL else t
        thi = np.inf if x <= eps + BOX_TOL else t
        L = max(tlo, ilo[u - lo])
        H = min(thi, ihi[u - lo])
        if L <= H:
            lam[u] = min(max(t, L), H)
        else:
            lam[u] = min(max(t, ilo[u - lo]), ihi[u - lo])


@nb.njit(cache=True, nogil=True)
def solve(A, B, h, starts, eps, budget, p, lam, failed):  # noqa: PLR0917 - a compiled kernel takes its arrays positionally
    """Every chain (``starts``; levels sorted, W > 0, h > 0 on links) into ``p`` and ``lam``; ``failed[k]`` for a
    chain over the work budget (its entries are then undefined)."""
    n = A.shape[0]
    r = np.empty(n)
    vr = np.zeros(n)
    cr = np.empty(n)
    tight = np.zeros(n, np.int8)
    nc = starts.shape[0]
    for k in range(nc):
        lo = starts[k]
        hi = starts[k + 1] if k + 1 < nc else n
        if _forward(lo, hi, A, B, h, eps, r, vr, cr, budget):
            _backward(lo, hi, A, B, h, eps, r, p, lam, tight)
            failed[k] = False
        else:
            failed[k] = True
