"""The shared sparse layout of the responses, family-free: items × workers·K in CSR form with column
``worker·K + label`` (:class:`SweepData`), the rule that picks the compiled or the numpy path, and the thread count.

Dawid–Skene's fused pass (:mod:`~fusion_core.methods.dawid_skene.sweep`), its incremental update and the Dask
engine read it, and the spectral family and the cartel check take their thread count here; it depends on no family.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fusion_core.data.merge import extend_buffer
from fusion_core.data.responses import Responses
from fusion_core.methods.numerics import jit_enabled, njit

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

    _bounds: dict[int, list[int]] = field(default_factory=dict, repr=False)

    def chunks(self, threads: int) -> list[int]:
        """:func:`_chunks` of these rows, computed once per thread count (it reads all the row pointers)."""
        got = self._bounds.get(threads)
        if got is None:
            got = self._bounds[threads] = _chunks(self.indptr, threads)
        return got

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
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(item, minlength=n), out=indptr[1:])
        order = None
        if len(item) and not bool(np.all(item[1:] >= item[:-1])):
            if default_backend(len(item)) == "numba":  # counting sort, O(n): 10M responses 0.24 s → 0.05 s
                order = np.empty(len(item), dtype=np.int64)
                _stable_order_kernel(item, indptr, order)
            else:
                order = np.argsort(item, kind="stable")
            col = col[order]
        data = None
        if resp.weight is not None:
            w = np.asarray(resp.weight, dtype=float)
            data = np.ascontiguousarray(w if order is None else w[order])
        got = SweepData(_unsigned(indptr), col.view(np.uint32) if small else col.view(np.uint64), data, n, n_cols)
        _CACHE[resp] = got
    return got


def sweep_data_appended(old: Responses, resp: Responses) -> None:
    """Build and cache the :class:`SweepData` of ``resp`` — ``old``'s responses followed by a batch, same classes,
    ``old``'s items first (:func:`fusion_core.data.merge.append_responses`) — from ``old``'s cached one by inserting
    the batch's entries into its rows (the earlier responses are moved, not sorted again; a batch of new items only is
    written after them, into the spare room of ``old``'s arrays when they have some — :func:`extend_buffer` — so a
    stream of such batches moves no earlier entry).  The result equals :func:`sweep_data`'s entry for entry; nothing
    is done when ``old`` has none cached or weights are involved."""
    d = _CACHE.get(old)
    k = resp.n_classes
    if (
        d is None
        or resp in _CACHE
        or old.weight is not None
        or resp.weight is not None
        or k != old.n_classes
        or d.indices.dtype != np.uint32
        or resp.n_workers * k >= np.iinfo(np.int32).max
    ):
        return
    n_old, n_old_items = old.n_responses, old.n_items
    b_item = resp.item[n_old:]
    b_col = (resp.worker[n_old:] * k + resp.label[n_old:]).astype(np.uint32)
    new_only = not len(b_item) or int(b_item.min()) >= n_old_items
    in_order = not len(b_item) or bool(np.all(b_item[1:] >= b_item[:-1]))
    if new_only and d.indptr.dtype == np.uint32 and int(d.indptr[-1]) + len(b_item) < np.iinfo(np.int32).max:
        # new items only: their rows go after the earlier ones, which stay; written into the spare room of the
        # earlier arrays when they have some (extend_buffer), so a stream of batches moves no earlier entry
        if not in_order:
            order = np.argsort(b_item, kind="stable")
            b_item, b_col = b_item[order], b_col[order]
        b_ptr = np.cumsum(np.bincount(b_item - n_old_items, minlength=resp.n_items - n_old_items))
        b_ptr += int(d.indptr[-1])
        indptr = extend_buffer(d.indptr, b_ptr.astype(np.uint32))
        _CACHE[resp] = SweepData(indptr, extend_buffer(d.indices, b_col), None, resp.n_items, resp.n_workers * k)
        return
    old_ptr = d.indptr.astype(np.int64)
    old_len = np.zeros(resp.n_items, dtype=np.int64)
    old_len[:n_old_items] = np.diff(old_ptr)
    b_len = np.bincount(b_item, minlength=resp.n_items)
    indptr = np.zeros(resp.n_items + 1, dtype=np.int64)
    np.cumsum(old_len + b_len, out=indptr[1:])
    cols = np.empty(int(indptr[-1]), dtype=np.uint32)
    if new_only:  # the earlier rows stay where they are
        if not in_order:
            b_col = b_col[np.argsort(b_item, kind="stable")]
        cols[: len(d.indices)] = d.indices
        cols[len(d.indices) :] = b_col
    else:
        order = np.argsort(b_item, kind="stable")
        b_item, b_col = b_item[order], b_col[order]
        shift = indptr[:n_old_items] - old_ptr[:-1]
        cols[np.arange(len(d.indices)) + np.repeat(shift, np.diff(old_ptr))] = d.indices
        b_start = np.cumsum(b_len) - b_len
        cols[indptr[b_item] + old_len[b_item] + np.arange(len(b_item)) - b_start[b_item]] = b_col
    _CACHE[resp] = SweepData(_unsigned(indptr), cols, None, resp.n_items, resp.n_workers * k)


def layout_subset(resp: Responses, rows: np.ndarray) -> Responses:
    """The responses on the items ``rows`` (increasing item codes), items renumbered 0..len(rows)−1 in that order,
    with their :class:`SweepData` cut out of ``resp``'s (a slice when the rows are one block, else one gather of
    their entries; nothing is sorted) and cached.  Responses are listed in the layout's order (by item); item ids
    are not carried (a :class:`~pandas.RangeIndex`)."""
    d = sweep_data(resp)
    ptr = d.indptr.astype(np.int64)
    start = ptr[rows]
    length = ptr[rows + 1] - start
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(length, out=indptr[1:])
    take: slice | np.ndarray
    if len(rows) and int(rows[-1]) - int(rows[0]) + 1 == len(rows):  # one block of items: their entries are a slice
        take = slice(int(start[0]), int(start[0] + indptr[-1]))
    else:
        take = np.repeat(start - indptr[:-1], length) + np.arange(indptr[-1])
    indices = np.ascontiguousarray(d.indices[take])
    data = None if d.data is None else np.ascontiguousarray(d.data[take])
    k = resp.n_classes
    col = indices.astype(np.int64)
    sub = Responses(
        item=np.repeat(np.arange(len(rows)), length),
        worker=col // k,
        label=col % k,
        items=pd.RangeIndex(len(rows)),
        workers=resp.workers,
        classes=resp.classes,
        weight=data,
    )
    _CACHE[sub] = SweepData(_unsigned(indptr), indices, data, len(rows), d.n_cols)
    return sub


def _unsigned(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.int32 or (x.dtype == np.int64 and (not len(x) or x.max() < np.iinfo(np.int32).max)):
        return np.ascontiguousarray(x, dtype=np.int32).view(np.uint32)
    return np.ascontiguousarray(x, dtype=np.int64).view(np.uint64)


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
    if t == 1:
        return [0, len(indptr) - 1]
    cuts = np.searchsorted(indptr.astype(np.int64), np.arange(1, t) * (nnz / t)).tolist()
    return sorted({0, *cuts, len(indptr) - 1})


@njit
def _stable_order_kernel(item: Any, indptr: Any, order: Any) -> None:  # pragma: no cover - compiled
    """``order`` = the stable argsort of ``item`` by counting sort (``indptr``: the start of every item's rows)."""
    pos = indptr[:-1].copy()
    for p in range(item.shape[0]):
        i = item[p]
        order[pos[i]] = p
        pos[i] += 1
