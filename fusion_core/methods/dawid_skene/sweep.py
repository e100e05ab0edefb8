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

Measured and not used: a float32 ``log Γ`` table in the compiled pass (1M responses, K = 4) is slower (6.7 vs
5.9 ms, the conversions cost more than the halved table saves) and moves posteriors by up to 1.3·10⁻⁷.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.methods.layout import (
    JIT_MIN_RESPONSES,
    MIN_CHUNK,
    SweepData,
    default_backend,
    n_threads,
    sweep_data,
    sweep_data_appended,
)
from fusion_core.methods.numerics import HAVE_NUMBA, PROB_FLOOR, log_normalize_into, njit

__all__ = [  # the layout's names stay reachable here (the pass is where they were first defined)
    "JIT_MIN_RESPONSES",
    "MIN_CHUNK",
    "Sweep",
    "SweepData",
    "default_backend",
    "ds_sweep",
    "expected_counts_of",
    "gold_array",
    "log_emission",
    "n_threads",
    "sweep_data",
    "sweep_data_appended",
]


def expected_counts_of(resp: Responses, posterior: np.ndarray, *, backend: str | None = None) -> np.ndarray:
    """``Aᵀ q`` as workers × true × reported (the M-step statistics of given posteriors), on the pass's structure;
    ``backend`` as in :func:`ds_sweep`."""
    d = sweep_data(resp)
    k = resp.n_classes
    q = np.ascontiguousarray(posterior, dtype=float)
    backend = backend or default_backend(resp.n_responses)  # small data: numpy (no numba import and first call)
    if backend == "numba" and HAVE_NUMBA:
        c = np.zeros((d.n_cols, k))
        _counts_kernel(d.indptr, d.indices, d.data if d.data is not None else np.empty(0), q, c)
    else:
        c = np.asarray(d.counts.T @ q)
    return _as_counts(c, resp)


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
        bounds = d.chunks(n_threads())
        c = np.zeros((len(bounds) - 1, d.n_cols, k))
        tot = np.zeros((len(bounds) - 1, k))
        args = (d.indptr, d.indices, data, log_g, log_prior, gold_class, 1.0 / float(temperature), q, joint)

        def run(t: int) -> float:
            return float(kernel(*args, c[t], tot[t], bounds[t], bounds[t + 1]))

        if len(bounds) == 2:
            lls = [run(0)]
        else:  # the compiled pass releases the GIL: one chunk of items per thread (the first on this one, the
            # others on threads kept from one pass to the next), statistics summed after in chunk order
            pool = _pool(len(bounds) - 2)
            rest = [pool.submit(run, t) for t in range(1, len(bounds) - 1)]
            lls = [run(0)] + [f.result() for f in rest]
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


_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}


def _pool(workers: int) -> ThreadPoolExecutor:
    """A thread pool of ``workers`` threads, made once per process (starting threads every pass cost ~0.1 ms each;
    keyed by the process id too, since a forked child inherits the pool but not its threads)."""
    key = (os.getpid(), workers)
    pool = _POOLS.get(key)
    if pool is None:
        pool = _POOLS[key] = ThreadPoolExecutor(workers, thread_name_prefix="fusion-ds")
    return pool


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


def _kernel(k: int, unit: bool) -> Any:
    """The pass compiled for ``k`` classes and unit or weighted counts (compile-time constants, so the class loops
    unroll and vectorise and the weight branch disappears); :mod:`._compiled` imports numba, so only here."""
    fn = _KERNELS.get((k, unit))
    if fn is None:
        import numba as nb

        from fusion_core.methods.dawid_skene._compiled import make_pass

        fn = _KERNELS[(k, unit)] = nb.njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})(
            make_pass(k, unit)
        )
    return fn
