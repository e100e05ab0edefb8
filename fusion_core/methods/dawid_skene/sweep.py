"""One fused pass of Dawid–Skene EM over the responses: the E-step and the next M-step's statistics together.

Per item ``i`` (rows of the sparse count matrix ``A`` = :attr:`Responses.counts`, items × workers·K):

* ``J_ik = log π_k + Σ_{(w,l) on i} A_i,wl · log Γ_w[k, l]``  (E-step, eq. 9 in log space);
* ``q_i = softmax(J_i / T)`` and ``log Σ_k e^{J_ik}`` (the observed-data log-likelihood term at T = 1); gold
  items are clamped to their class and contribute their complete-data term ``J_i,g``;
* ``C[w·K + l, :] += A_i,wl · q_i`` and ``t += q_i``: the expected counts ``Aᵀq`` of the next M-step (eq. 11) and
  the class totals of the priors, accumulated while item ``i``'s responses are still in cache.

One read of the CSR structure (int32 column indices, values skipped when every count is 1) and one write of the
posteriors per iteration: the memory-traffic floor of an EM iteration.  With numba installed (the optional
``fast`` extra) the pass is one compiled loop; without it the same quantities come from two sparse products
(``A @ log Γ`` and the column-order ``Aᵀ @ q``, never a random row gather) and an in-place log-normalisation.
Both give the same numbers to rounding (tests compare them to 1e-10).  ``FUSION_CORE_JIT=0`` forces numpy.
"""

from __future__ import annotations

import os
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from fusion_core.data.responses import Responses
from fusion_core.methods.numerics import HAVE_NUMBA, PROB_FLOOR, jit_enabled, log_normalize_into, njit

#: below this many responses numpy is fast enough and numba's import and first call (≈ 1–2 s) would cost more
JIT_MIN_RESPONSES = 200_000


def default_backend(n_responses: int) -> str:
    """``'numba'`` for ≥ :data:`JIT_MIN_RESPONSES` responses when numba is installed and ``FUSION_CORE_JIT`` is not
    ``0``; else ``'numpy'``."""
    use = jit_enabled() and n_responses >= JIT_MIN_RESPONSES
    return "numba" if use else "numpy"


@dataclass
class SweepData:
    """What the pass reads, derived once per :class:`Responses` in the method layer (``Responses.counts`` is never
    built for it): CSR row pointers and column indices ``worker·K + label`` of the items × workers·K count matrix as
    unsigned 32-bit integers when they fit, and the values (``None`` when every response weighs 1; repeated
    responses stay separate entries, which the sums treat as counts)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray | None
    n_items: int
    n_cols: int

    @property
    def nbytes(self) -> int:
        """Bytes of the structure one pass reads."""
        return self.indptr.nbytes + self.indices.nbytes + (0 if self.data is None else self.data.nbytes)

    @cached_property
    def counts(self) -> sp.csr_matrix:
        """The same matrix for scipy (numpy path)."""
        data = np.ones(len(self.indices)) if self.data is None else self.data
        idx = self.indices.view(np.int32) if self.indices.dtype == np.uint32 else self.indices.view(np.int64)
        ptr = self.indptr.view(np.int32) if self.indptr.dtype == np.uint32 else self.indptr.view(np.int64)
        return sp.csr_matrix((data, idx, ptr), shape=(self.n_items, self.n_cols))


_CACHE: weakref.WeakKeyDictionary[Responses, SweepData] = weakref.WeakKeyDictionary()


def sweep_data(resp: Responses) -> SweepData:
    """The :class:`SweepData` of ``resp`` (cached while ``resp`` lives).  Unsigned indices let compiled indexing
    skip the negative-index wrap (15% of the pass)."""
    got = _CACHE.get(resp)
    if got is None:
        n, k = resp.n_items, resp.n_classes
        n_cols = resp.n_workers * k
        small = n_cols < np.iinfo(np.int32).max
        col: np.ndarray = resp.worker.astype(np.int32 if small else np.int64)
        np.multiply(col, k, out=col)
        np.add(col, resp.label, out=col, casting="unsafe")
        item = resp.item
        order = None if not len(item) or bool(np.all(item[1:] >= item[:-1])) else np.argsort(item, kind="stable")
        if order is not None:
            col = col[order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(item, minlength=n), out=indptr[1:])
        data = None
        if resp.weight is not None:
            w = np.asarray(resp.weight, dtype=float)
            data = np.ascontiguousarray(w if order is None else w[order])
        got = SweepData(_unsigned(indptr), col.view(np.uint32) if small else col.view(np.uint64), data, n, n_cols)
        _CACHE[resp] = got
    return got


def expected_counts_of(resp: Responses, posterior: np.ndarray) -> np.ndarray:
    """``Aᵀ q`` as workers × true × reported (the M-step statistics of given posteriors), on the pass's structure."""
    d = sweep_data(resp)
    k = resp.n_classes
    q = np.ascontiguousarray(posterior, dtype=float)
    if jit_enabled():
        c = np.zeros((d.n_cols, k))
        _counts_kernel(d.indptr, d.indices, d.data if d.data is not None else np.empty(0), q, c)
    else:
        c = np.asarray(d.counts.T @ q)
    return _as_counts(c, resp)


def _unsigned(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.int32 or (x.dtype == np.int64 and (not len(x) or x.max() < np.iinfo(np.int32).max)):
        return np.ascontiguousarray(x, dtype=np.int32).view(np.uint32)
    return np.ascontiguousarray(x, dtype=np.int64).view(np.uint64)


@dataclass
class Sweep:
    """One pass: ``posterior`` (items × K, tempered when T ≠ 1, gold rows clamped), ``log_likelihood`` (T = 1),
    ``counts`` (expected counts, workers × true × reported), ``class_total`` (Σ_i q_i) and, when asked for,
    ``joint`` (items × K log p(x_i, k))."""

    posterior: np.ndarray
    log_likelihood: float
    counts: np.ndarray
    class_total: np.ndarray
    joint: np.ndarray | None = None


def log_emission(confusion: np.ndarray) -> np.ndarray:
    """``log Γ`` clipped at the probability floor, laid out as the (workers·K_reported) × K_true table of the pass."""
    w, k, _ = confusion.shape
    return np.log(np.maximum(confusion, PROB_FLOOR)).transpose(0, 2, 1).reshape(w * k, k)


def ds_sweep(
    resp: Responses,
    confusion: np.ndarray,
    class_prior: np.ndarray,
    gold: tuple[np.ndarray, np.ndarray] | None = None,
    temperature: float = 1.0,
    *,
    want_joint: bool = False,
    out: np.ndarray | None = None,
    backend: str | None = None,
    gold_class: np.ndarray | None = None,
) -> Sweep:
    """One fused E-step + M-step-statistics pass (module docstring).  ``out`` (items × K float64, C order) is
    written in place when given; ``backend`` is ``'numba'`` or ``'numpy'`` (default :func:`default_backend`)."""
    d = sweep_data(resp)
    k = resp.n_classes
    log_g = np.ascontiguousarray(log_emission(confusion))
    log_prior = np.log(np.maximum(np.asarray(class_prior, dtype=float), PROB_FLOOR))
    q = out if out is not None else np.empty((d.n_items, k))
    backend = backend or default_backend(resp.n_responses)
    if backend == "numba" and HAVE_NUMBA:
        if gold_class is None:
            gold_class = gold_array(d.n_items, gold)
        joint = np.empty((d.n_items, k)) if want_joint else np.empty((0, k))
        data = d.data if d.data is not None else np.empty(0)
        kernel = _kernel(k, d.data is None)
        bounds = _chunks(d.indptr, n_threads())
        c = np.zeros((len(bounds) - 1, d.n_cols, k))
        tot = np.zeros((len(bounds) - 1, k))
        args = (d.indptr, d.indices, data, log_g, log_prior, gold_class, 1.0 / float(temperature), q, joint)

        def run(t: int) -> float:
            return float(kernel(*args, c[t], tot[t], bounds[t], bounds[t + 1]))

        if len(bounds) == 2:
            lls = [run(0)]
        else:  # the compiled pass releases the GIL: one chunk of items per thread, statistics summed after
            with ThreadPoolExecutor(len(bounds) - 1) as pool:
                lls = list(pool.map(run, range(len(bounds) - 1)))
        return Sweep(
            q, float(sum(lls)), _as_counts(c.sum(axis=0), resp), tot.sum(axis=0), joint if want_joint else None
        )
    if backend not in ("numba", "numpy"):
        raise ValueError(f"backend must be 'numba' or 'numpy', got {backend!r}")
    joint = np.asarray(d.counts @ log_g)
    joint += log_prior
    lognorm = log_normalize_into(joint, q)
    if gold is not None and len(gold[0]):
        lognorm[gold[0]] = joint[gold[0], gold[1]]
    ll = float(lognorm.sum())
    if temperature != 1.0:
        log_normalize_into(joint / temperature, q)
    if gold is not None and len(gold[0]):
        q[gold[0]] = 0.0
        q[gold[0], gold[1]] = 1.0
    c = np.asarray(d.counts.T @ q)  # column-order product: reads A in item order
    return Sweep(q, ll, _as_counts(c, resp), q.sum(axis=0), joint if want_joint else None)


def n_threads() -> int:
    """Threads for the compiled pass: ``FUSION_CORE_THREADS`` or the cores this process may use (at most 8)."""
    env = os.environ.get("FUSION_CORE_THREADS")
    if env:
        return max(1, int(env))
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


MIN_CHUNK = 100_000  # responses per thread below which one thread is faster


def _chunks(indptr: np.ndarray, threads: int) -> list[int]:
    """Item boundaries splitting the responses into ≤ ``threads`` chunks of about equal size (deterministic)."""
    nnz = int(indptr[-1])
    t = max(1, min(threads, nnz // MIN_CHUNK))
    cuts = np.searchsorted(indptr.astype(np.int64), np.arange(1, t) * (nnz / t)).tolist()
    return sorted({0, *cuts, len(indptr) - 1})


def _as_counts(c: np.ndarray, resp: Responses) -> np.ndarray:
    k = resp.n_classes
    return c.reshape(resp.n_workers, k, k).transpose(0, 2, 1)


def gold_array(n_items: int, gold: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """Class code per item for gold items, −1 elsewhere (empty when there is no gold)."""
    if gold is None or not len(gold[0]):
        return np.empty(0, dtype=np.int32)
    g = np.full(n_items, -1, dtype=np.int32)
    g[np.asarray(gold[0])] = np.asarray(gold[1], dtype=np.int32)
    return g


@njit
def _counts_kernel(indptr: Any, indices: Any, data: Any, q: Any, c: Any) -> None:  # pragma: no cover - compiled
    """``c[col] += value · q[i]`` over the CSR entries of every item i."""
    k = q.shape[1]
    unit = data.shape[0] == 0
    for i in range(q.shape[0]):
        for p in range(indptr[i], indptr[i + 1]):
            v = 1.0 if unit else data[p]
            for j in range(k):
                c[indices[p], j] += v * q[i, j]


# ----------------------------------------------------------------------------------- compiled pass (numba)
_KERNELS: dict[tuple[int, bool], Any] = {}

LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01  # Cody–Waite split of log 2 (fdlibm)
LN2_LO = 1.90821492927058770002e-10
MAGIC = 6755399441055744.0  # 1.5·2⁵²: adding it rounds to an integer held in the low mantissa bits
MAGIC_BITS = 0x4338000000000000  # its bit pattern
EXP_FLOOR = -708.0  # exp below this is < 3e-308 (subnormal); clipped there so 2ⁿ stays a normal number


def _kernel(k: int, unit: bool) -> Any:
    """The pass compiled for ``k`` classes and unit or weighted counts (compile-time constants, so the class loops
    unroll and vectorise and the weight branch disappears)."""
    fn = _KERNELS.get((k, unit))
    if fn is None:
        import numba as nb

        fn = _KERNELS[(k, unit)] = nb.njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})(
            _make_pass(k, unit)
        )
    return fn


BLOCK = 512  # items per block: the block's K·BLOCK log-joints stay in L1 between the passes below


def _make_pass(k: int, unit_counts: bool) -> Any:
    """The pass as a Python closure over compile-time constants only (no nested compiled functions: numba's disk
    cache recognises such a closure in the next process, where a nested dispatcher would force a recompile)."""
    K = k
    UNIT = unit_counts

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
        x = np.empty(BLOCK * K)  # the block's log-joints, then their exponentials
        t = np.empty(BLOCK * K)
        bits = t.view(np.int64)
        saved = np.empty(BLOCK * K if inv_t != 1.0 else 0)
        mxs = np.empty(BLOCK)
        gjs = np.empty(BLOCK)  # gold items: the log-joint of their class (their log-likelihood term)
        acc = np.zeros(K)
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
            # x ← exp(x) on the block (entries ≤ 0), in three vectorisable loops: Cody–Waite reduction and a
            # degree-13 Taylor polynomial (relative error < 2·10⁻¹⁶ on |r| ≤ log(2)/2), then 2ⁿ written into the
            # exponent bits of t (``bits`` views t as int64) and the product
            for j in range(nb_ * K):
                v = max(x[j], EXP_FLOOR)
                tt = v * LOG2E + MAGIC
                nf = tt - MAGIC
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
                x[j] = pp * r + 1.0
                t[j] = tt
            for j in range(nb_ * K):
                bits[j] = (bits[j] - MAGIC_BITS + 1023) << 52
            for j in range(nb_ * K):
                x[j] *= t[j]
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
