"""The k largest eigenvalues of a stack of symmetric matrices by LAPACK's ``syevx`` called through SciPy's
Cython LAPACK with ctypes [EXT, ours]: the same routine as ``scipy.linalg.eigh(..., driver="evx")`` (equal
values), but ctypes releases the GIL for the call, so the bootstrap replicates of the cartel check run on
several threads (``scipy.linalg.eigh`` holds the GIL: a second thread measured 0 progress during a call).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

_P = ctypes.c_void_p


@cache
def _syevx(dtype: str) -> Callable[..., None] | None:
    """ctypes handle on ``ssyevx``/``dsyevx`` of ``scipy.linalg.cython_lapack`` (None if it cannot be had)."""
    try:
        import scipy.linalg.cython_lapack as lapack

        capsule = lapack.__pyx_capi__[{"float32": "ssyevx", "float64": "dsyevx"}[dtype]]
        api = ctypes.pythonapi
        api.PyCapsule_GetName.restype = ctypes.c_char_p
        api.PyCapsule_GetName.argtypes = [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        address = api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))
        return ctypes.CFUNCTYPE(None, *([_P] * 20))(address)
    except Exception:  # any failure means: use scipy.linalg.eigh instead
        return None


def top_eigvals_evx(A: np.ndarray, k: int) -> np.ndarray | None:
    """The k largest eigenvalues (descending, float64) of each matrix of the stack A (b × m × m, float32 or
    float64, symmetric; its lower triangle is read), or None when the ctypes route is unavailable or LAPACK
    reports an error (the caller then uses ``scipy.linalg.eigh``)."""
    nb, m = A.shape[0], A.shape[-1]
    fn = _syevx(A.dtype.name)
    if fn is None or not 1 <= k <= m:
        return None
    dt = A.dtype
    jobz, rng, uplo = (np.array([ord(c)], dtype=np.uint8) for c in "NIL")  # values only, by index, lower
    n = np.array([m], dtype=np.int32)
    il, iu = np.array([m - k + 1], dtype=np.int32), np.array([m], dtype=np.int32)
    vl, vu, abstol = np.zeros(1, dt), np.zeros(1, dt), np.zeros(1, dt)  # abstol 0: LAPACK's default tolerance
    found, info, ldz = np.zeros(1, np.int32), np.zeros(1, np.int32), np.ones(1, np.int32)
    w, z = np.empty(m, dt), np.empty(1, dt)
    iwork, ifail = np.empty(5 * m, np.int32), np.empty(m, np.int32)
    a = np.empty((m, m), dt)
    work, lwork = np.empty(1, dt), np.array([-1], np.int32)

    def call() -> int:
        args: list[Any] = [jobz, rng, uplo, n, a, n, vl, vu, il, iu, abstol, found, w, z, ldz, work, lwork]
        fn(*(x.ctypes.data_as(_P) for x in [*args, iwork, ifail, info]))
        return int(info[0])

    if call() != 0:  # workspace query: the blocked tridiagonal reduction needs (block + 3)·m
        return None
    lwork[0] = max(int(work[0]), 8 * m)
    work = np.empty(int(lwork[0]), dt)
    out = np.empty((nb, k))
    for b in range(nb):  # one LAPACK call per matrix (b ≤ a chunk of replicates)
        a[...] = A[b]  # a symmetric matrix is its own Fortran-order copy
        if call() != 0 or int(found[0]) != k:
            return None
        out[b] = w[:k][::-1]
    return out
