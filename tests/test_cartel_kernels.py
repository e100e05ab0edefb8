"""Compiled cartel-bootstrap kernels (optional numba) give exactly the numpy path's numbers (bit-packed pair sums,
label draws, fused moments and dense matrices)."""

from __future__ import annotations

import numpy as np
import pytest

from fusion_core.diagnostics.cartels.bootstrap import NullModel, _Replicates
from fusion_core.diagnostics.cartels.pair_pattern import PairPattern
from fusion_core.methods.numerics import HAVE_NUMBA
from fusion_core.methods.spectral import BinaryMatrix

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="numba absent")


def _sparse_group(seed: int = 0, m: int = 30, n: int = 20_000, per_item: int = 4):
    rng = np.random.default_rng(seed)
    O = np.zeros((m, n), dtype=bool)
    for i in range(n):
        O[rng.choice(m, per_item, replace=False), i] = True
    Z = np.where(O, np.where(rng.random((m, n)) < 0.7, 1.0, -1.0), 0.0)
    return Z, O


def test_pair_sums_and_draws_equal_numpy(monkeypatch):
    Z, O = _sparse_group()
    m = Z.shape[0]
    null = NullModel(psi=np.linspace(0.6, 0.9, m), eta=np.linspace(0.9, 0.55, m), b=0.2)
    B = BinaryMatrix.from_dense(np.where(O, Z, np.nan))
    reps = _Replicates(B, null, n_min=10, n_extra=1, n_spec=0)
    # n_min near the mean overlap: only part of the pairs are candidates (the completed R̂ imputes the others)
    part = _Replicates(B, null, n_min=275, n_extra=2, n_spec=3)
    assert reps.sparse and 0 < len(part.pat.a) < m * (m - 1) // 2
    w, i = np.nonzero(O)
    pat = PairPattern(w, i, m, Z.shape[1], 10)
    # 11 replicates: two packed words; pairs share ~270 items, past a byte lane's 255 (the kernel flushes)
    zs = np.where(np.random.default_rng(3).random((11, len(w))) < 0.5, 1.0, -1.0)
    assert pat.N[pat.a, pat.b].max() > 255
    out = {}
    for flag in ("1", "0"):
        monkeypatch.setenv("FUSION_CORE_JIT", flag)
        sums = pat.sums(zs)
        draw = reps.draw(np.random.default_rng(7), 3) + part.draw(np.random.default_rng(8), 3)
        out[flag] = (sums, draw)
    for a, b in zip(out["1"][0], out["0"][0]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(out["1"][1], out["0"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
