"""Numerical helpers every method shares: clipped logs and row-wise log-normalisation.

Likelihoods are kept in log space and probabilities are clipped at :data:`PROB_FLOOR` before any log, so no
method ever produces ``-inf`` or NaN from a zero probability.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

import numpy as np

PROB_FLOOR = 1e-10  # probabilities are clipped here before any log

HAVE_NUMBA = importlib.util.find_spec("numba") is not None  # optional JIT: pip install fusion_core[fast]


def jit_enabled() -> bool:
    """Whether compiled kernels run: numba is installed and ``FUSION_CORE_JIT`` is not ``0``.  Every kernel has a
    numpy twin giving the same numbers, used otherwise."""
    return HAVE_NUMBA and os.environ.get("FUSION_CORE_JIT", "1") != "0"


def njit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` compiled by numba (cached on disk, GIL released), imported lazily on first use."""
    compiled: list[Callable[..., Any]] = []

    def call(*args: Any) -> Any:
        if not compiled:
            import numba as nb

            compiled.append(nb.njit(cache=True, nogil=True, error_model="numpy")(fn))
        return compiled[0](*args)

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def stable_argsort(key: np.ndarray, bound: int) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` for integer keys in [0, bound): numpy's stable sort is a radix sort for
    16-bit keys, so keys below 2³² take two such passes, low then high half (measured 0.42 s → 0.05 s on 2.4M
    pair keys); the same permutation (any other keys: numpy's)."""
    if bound > 2**32 or len(key) < 50_000 or key.min() < 0:
        return np.argsort(key, kind="stable")
    if bound <= 2**16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    first = np.argsort((key & 0xFFFF).astype(np.uint16), kind="stable")
    return first[np.argsort((key[first] >> 16).astype(np.uint16), kind="stable")]


def safe_log(p: np.ndarray, floor: float = PROB_FLOOR) -> np.ndarray:
    """``log(max(p, floor))``: never -inf, never NaN for p in [0, 1]."""
    return np.log(np.maximum(p, floor))


def log_normalize(log_p: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Row-normalise log-probabilities: returns (probabilities, log normaliser per row).

    For the common items × K case the reduction runs over a transposed copy, one class at a time: numpy
    reduces a short last axis about 10× slower than it combines K long rows (measured: 27 ms → 2.5 ms for
    200k × 4)."""
    if log_p.ndim == 2 and axis in (-1, 1) and log_p.shape[1] <= 64:
        t = np.array(log_p.T, dtype=float, order="C")
        mx = t.max(axis=0) if t.shape[0] > 8 else _rowwise(np.maximum, t)
        t -= mx
        np.exp(t, out=t)
        tot = _rowwise(np.add, t)
        t /= tot
        return np.ascontiguousarray(t.T), np.log(tot) + mx
    mx = np.max(log_p, axis=axis, keepdims=True)
    z = np.exp(log_p - mx)
    s = z.sum(axis=axis, keepdims=True)
    return z / s, (np.log(s) + mx).squeeze(axis)


def log_normalize_into(log_p: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Row-normalise items × K log-probabilities ``log_p`` into ``out`` (may be ``log_p`` itself); returns the log
    normaliser per row.  Column views and in-place ufuncs: no items × K temporary, one pass per class."""
    k = log_p.shape[1]
    mx = log_p[:, 0].copy()
    for j in range(1, k):
        np.maximum(mx, log_p[:, j], out=mx)
    np.subtract(log_p, mx[:, None], out=out)
    np.exp(out, out=out)
    tot = out[:, 0].copy()
    for j in range(1, k):
        np.add(tot, out[:, j], out=tot)
    np.divide(out, tot[:, None], out=out)
    np.log(tot, out=tot)
    np.add(tot, mx, out=tot)
    return tot


def _rowwise(op: Callable[..., np.ndarray], t: np.ndarray) -> np.ndarray:
    out = t[0].copy()
    for row in t[1:]:  # K rows (classes), not responses
        op(out, row, out=out)
    return out


def normalize_rows(counts: np.ndarray, smoothing: float = 0.0) -> np.ndarray:
    """Rows (last axis) of ``counts + smoothing`` normalised to probabilities; empty rows become uniform."""
    k = counts.shape[-1]
    c = counts + smoothing
    tot = c.sum(axis=-1, keepdims=True)
    return np.where(tot > 0, c / np.where(tot > 0, tot, 1.0), 1.0 / k)
