"""The compiled Dawid–Skene pass (numba; imported only by :func:`~fusion_core.methods.dawid_skene.sweep._kernel`).

Per block of items: the log-joint rows (E-step, eq. 9 in log space) accumulated in registers, their exponentials by
a vectorisable polynomial, normalisation and the log-likelihood, then the posterior rows written out and added to
the expected counts ``C[w·K + l]`` of the next M-step (eq. 11).  Module docstring of
:mod:`~fusion_core.methods.dawid_skene.sweep` for the layout.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusion_core.methods._jit_scratch import alloca_f64, carray

LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01  # Cody–Waite split of log 2 (fdlibm)
LN2_LO = 1.90821492927058770002e-10
MAGIC = 6755399441055744.0  # 1.5·2⁵²: adding it rounds to an integer held in the low mantissa bits
EXP_FLOOR = -708.0  # exp below this is < 3e-308 (subnormal); clipped there so 2ⁿ stays a normal number


BLOCK_CELLS = 2048  # log-joints per block (512 items at K = 4): they stay in L1 between the passes below


def make_pass(k: int, unit_counts: bool) -> Any:
    """The pass as a Python closure over compile-time constants only (numba's disk cache keys a closure on its
    variables, so the stack allocator is a module global here, and no nested compiled function is used: a nested
    dispatcher would force a recompile in the next process).  Its work arrays are on the stack
    (:mod:`fusion_core.methods._jit_scratch`), so the running sums of the E-step and the row added to the expected
    counts stay in registers."""
    K = k
    UNIT = unit_counts
    BLOCK = max(8, BLOCK_CELLS // K)  # items per block
    CELLS = BLOCK * K

    def sweep(  # noqa: PLR0917 - a compiled kernel takes its arrays positionally
        indptr: Any,
        indices: Any,
        data: Any,
        log_g: Any,
        log_prior: Any,
        gold: Any,
        inv_t: float,
        q: Any,
        joint: Any,
        c: Any,
        tot: Any,
        lo: int,
        hi: int,
    ) -> float:
        has_gold = gold.shape[0] > 0
        keep = joint.shape[0] > 0
        x = carray(alloca_f64(CELLS), CELLS)  # the block's log-joints, then their exponentials
        t = carray(alloca_f64(CELLS), CELLS)
        bits = t.view(np.int64)
        saved = np.empty(BLOCK * K if inv_t != 1.0 else 0)
        mxs = carray(alloca_f64(BLOCK), BLOCK)
        gjs = carray(alloca_f64(BLOCK), BLOCK)  # gold items: the log-joint of their class (their log-likelihood term)
        acc = carray(alloca_f64(K), K)
        for j in range(K):
            acc[j] = 0.0
        ll = 0.0
        prod = 1.0  # Σ log s_i kept as log Π s_i, flushed every 64 items (s_i ∈ [1, K]: no overflow)
        for b0 in range(lo, hi, BLOCK):
            nb_ = min(BLOCK, hi - b0)
            for m in range(nb_):  # E-step: log-joint rows, minus their maxima
                i = b0 + m
                o = m * K
                for j in range(K):
                    x[o + j] = log_prior[j]
                for p in range(indptr[i], indptr[i + 1]):
                    col = indices[p]
                    if UNIT:
                        for j in range(K):
                            x[o + j] += log_g[col, j]
                    else:
                        v = data[p]
                        for j in range(K):
                            x[o + j] += v * log_g[col, j]
                if keep:
                    for j in range(K):
                        joint[i, j] = x[o + j]
                mx = x[o]
                for j in range(1, K):
                    mx = max(mx, x[o + j])
                mxs[m] = mx
                if has_gold and gold[i] >= 0:
                    gjs[m] = x[o + gold[i]]
                for j in range(K):
                    x[o + j] -= mx
            if inv_t != 1.0:
                for m in range(nb_ * K):
                    saved[m] = x[m]  # x − max, for the tempered posteriors
            # x ← exp(x) on the block (entries ≤ 0), in one vectorisable loop: Cody–Waite reduction and a degree-13
            # Taylor polynomial (relative error < 2·10⁻¹⁶ on |r| ≤ log(2)/2) times 2ⁿ, made by writing n + 1023
            # into the exponent bits of t (``bits`` views t as int64)
            for j in range(nb_ * K):
                v = max(x[j], EXP_FLOOR)
                nf = (v * LOG2E + MAGIC) - MAGIC  # round(v / log 2)
                r = (v - nf * LN2_HI) - nf * LN2_LO
                pp = 1.6059043836821613e-10
                pp = pp * r + 2.08767569878681e-09
                pp = pp * r + 2.505210838544172e-08
                pp = pp * r + 2.755731922398589e-07
                pp = pp * r + 2.7557319223985893e-06
                pp = pp * r + 2.48015873015873e-05
                pp = pp * r + 0.0001984126984126984
                pp = pp * r + 0.001388888888888889
                pp = pp * r + 0.008333333333333333
                pp = pp * r + 0.041666666666666664
                pp = pp * r + 0.16666666666666666
                pp = pp * r + 0.5
                pp = pp * r + 1.0
                bits[j] = (np.int64(nf) + 1023) << 52
                x[j] = (pp * r + 1.0) * t[j]
            for m in range(nb_):  # normalise, log-likelihood, then the M-step statistics
                i = b0 + m
                o = m * K
                s = 0.0
                for j in range(K):
                    s += x[o + j]
                g = gold[i] if has_gold else -1
                if g >= 0:
                    ll += gjs[m]
                else:
                    ll += mxs[m]
                    prod *= s
                    if ((i - lo) & 63) == 63:
                        ll += np.log(prod)
                        prod = 1.0
                inv = 1.0 / s
                for j in range(K):
                    x[o + j] *= inv
            if inv_t != 1.0:  # annealing only: posteriors at temperature 1/inv_t from the saved rows
                for m in range(nb_):
                    o = m * K
                    s = 0.0
                    for j in range(K):
                        x[o + j] = np.exp(saved[o + j] * inv_t)
                        s += x[o + j]
                    for j in range(K):
                        x[o + j] /= s
            for m in range(nb_):
                i = b0 + m
                o = m * K
                g = gold[i] if has_gold else -1
                if g >= 0:
                    for j in range(K):
                        x[o + j] = 0.0
                    x[o + g] = 1.0
                for j in range(K):
                    q[i, j] = x[o + j]
                    acc[j] += x[o + j]
                for p in range(indptr[i], indptr[i + 1]):
                    col = indices[p]
                    if UNIT:
                        for j in range(K):
                            c[col, j] += x[o + j]
                    else:
                        v = data[p]
                        for j in range(K):
                            c[col, j] += v * x[o + j]
        for j in range(K):
            tot[j] = acc[j]
        return ll + np.log(prod)

    return sweep
