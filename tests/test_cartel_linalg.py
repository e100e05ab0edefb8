"""The cartel bootstrap's linear algebra: the GIL-free LAPACK call, the batched CG solve, the dense pair-pattern
path and the thread-independent replicate streams."""

from __future__ import annotations

import numpy as np
import pytest

from fusion_core.diagnostics.cartels import pair_pattern
from fusion_core.diagnostics.cartels.bootstrap import NullModel, bootstrap_test
from fusion_core.diagnostics.cartels.eigen import cg_batched, solve_batched, top_eigvalsh
from fusion_core.diagnostics.cartels.pair_pattern import PairPattern
from fusion_core.methods.numerics import stable_argsort
from fusion_core.methods.spectral import BinaryMatrix


def _sym(rng: np.random.Generator, b: int, m: int) -> np.ndarray:
    A = rng.standard_normal((b, m, m))
    return (A + A.transpose(0, 2, 1)) / 2


def test_top_eigvalsh_single_precision_is_close_to_double():
    """m ≥ 100: single precision within ~1e-7·‖A‖ of the double-precision eigenvalues."""
    A = _sym(np.random.default_rng(1), 2, 200)
    ref = np.linalg.eigvalsh(A)[:, ::-1][:, :5]
    got = top_eigvalsh(A, 5)
    assert np.max(np.abs(got - ref)) <= 1e-6 * np.abs(ref).max()


def test_cg_solves_like_direct_and_gives_min_norm_on_singular_systems():
    rng = np.random.default_rng(2)
    m = 40
    W = np.abs(rng.standard_normal((2, m, m)))
    W = (W + W.transpose(0, 2, 1)) / 2
    W[:, np.arange(m), np.arange(m)] = 0
    A = W.copy()
    A[:, np.arange(m), np.arange(m)] = W.sum(axis=2)  # signless Laplacian: PSD
    c = rng.standard_normal((2, m))
    t = cg_batched(lambda x: np.matmul(A, x[:, :, None])[:, :, 0], c)
    assert t is not None
    np.testing.assert_allclose(t, solve_batched(A, c), rtol=1e-9, atol=1e-10)
    # a bipartite pair graph makes A singular; c = Σ_j W_ij y_ij with symmetric y is in its range
    side = np.arange(m) < m // 2
    Wb = np.where(side[:, None] != side[None, :], W[0], 0.0)
    Ab = Wb + np.diag(Wb.sum(axis=1))
    Y = rng.standard_normal((m, m))
    cb = ((Wb * (Y + Y.T)).sum(axis=1))[None]
    tb = cg_batched(lambda x: (Ab @ x[0])[None], cb)
    assert tb is not None
    np.testing.assert_allclose(tb[0], np.linalg.lstsq(Ab, cb[0], rcond=None)[0], rtol=1e-8, atol=1e-9)


def _crowd(m: int = 120, n: int = 3000, per_item: int = 8, seed: int = 0):
    rng = np.random.default_rng(seed)
    w = np.concatenate([rng.choice(m, per_item, replace=False) for _ in range(n)])
    i = np.repeat(np.arange(n), per_item)
    order = np.lexsort((i, w))
    w, i = w[order], i[order]
    z = np.where(rng.random(len(w)) < 0.75, 1.0, -1.0)
    return w, i, z


def test_dense_and_sparse_pair_paths_agree(monkeypatch):
    """The dense per-replicate matrices (most pairs candidates) and the block-diagonal CSR path give the same
    statistics (the eigenvalues are computed alike; only the products and the diagonal solve differ)."""
    w, i, z = _crowd()
    m, n = 120, 3000
    rng = np.random.default_rng(3)
    zs = np.vstack([z, np.where(rng.random((3, len(w))) < 0.5, 1.0, -1.0)])
    x0 = np.ones(m)
    out = {}
    for share in (0.0, 2.0):  # always dense / never dense
        monkeypatch.setattr(pair_pattern, "DENSE_PAIR_SHARE", share)
        pat = PairPattern(w, i, m, n, 10)
        assert pat.dense == (share == 0.0)
        out[share] = (pat.stats(zs, 10, 1, x0), pat.stats(zs, 10, 4, x0, n_spec=3))
    for a, b in zip(out[0.0], out[2.0]):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


def test_replicates_do_not_depend_on_threads():
    """Each chunk draws from its own seeded stream: 1 or 3 threads give identical replicates and p-values."""
    w, i, z = _crowd(m=110, n=2500)
    B = BinaryMatrix(w, i, z, 110, 2500)
    null = NullModel(psi=np.full(110, 0.75), eta=np.full(110, 0.7), b=0.1)
    res = [
        bootstrap_test(B, null, np.random.default_rng(5), n_bootstrap=30, alpha=0.05, n_min=10, chunk=4, threads=t)
        for t in (1, 3)
    ]
    np.testing.assert_array_equal(res[0].s_null, res[1].s_null)
    np.testing.assert_array_equal(res[0].p, res[1].p)
    assert res[0].n_drawn == 30


@pytest.mark.parametrize("bound", [7, 60_000, 250_000, 2**31])
def test_radix_argsort_is_numpys_stable_argsort(bound):
    key = np.random.default_rng(bound).integers(0, bound, size=120_000)
    np.testing.assert_array_equal(stable_argsort(key, bound), np.argsort(key, kind="stable"))


@pytest.mark.parametrize("p_right", [0.8, 0.5])  # labels unrelated to any truth; at 0.8 the spectral fit warns
def test_quiet_null_model_equals_filtered_one_and_warns_nothing(p_right):
    """The null model fitted on a second thread asks its fits not to warn (warning filters are process-wide):
    same model as the filtered fit, and no warning at all."""
    import warnings

    from fusion_core.diagnostics.cartels.bootstrap import fit_null_model

    w, i, _ = _crowd(m=40, n=600, per_item=6, seed=4)
    z = np.where(np.random.default_rng(9).random(len(w)) < p_right, 1.0, -1.0)
    B = BinaryMatrix(w, i, z, 40, 600)
    from fusion_core.methods.spectral.pipeline import fit_binary

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_binary(B, n_min=10, d_min=1)
    assert bool(caught) == (p_right == 0.8)  # what the filtered fit has to filter
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet = fit_null_model(B, 10, quiet=True)
    assert caught == []
    loud = fit_null_model(B, 10)
    np.testing.assert_array_equal(quiet.psi, loud.psi)
    np.testing.assert_array_equal(quiet.eta, loud.eta)
    assert quiet.b == loud.b
