"""Deterministic checks of fusion_core.methods.spectral (spec spectral.md §8.1, §8.12, §3.2, §3.8, §5.1, §5.2)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from fusion_core.methods.spectral import (
    BinaryMatrix,
    als_rank_one,
    estimate_b_tensor,
    fit_spectral,
    isml_llr,
    loglinear_diagonal,
    pair_weights,
    pairwise_moments,
    pattern_design,
    principal_axis,
    psi_eta_from_v,
    resolve_sign,
    restricted_log_likelihood,
    spectral_core,
)


def _population(seed: int, b: float, m: int = 8):
    rng = np.random.default_rng(seed)
    psi = rng.uniform(0.55, 0.9, m)
    eta = rng.uniform(0.55, 0.9, m)
    pi = (psi + eta) / 2
    delta = (psi - eta) / 2
    mu = 2 * delta + b * (2 * pi - 1)  # (I3)
    v = np.sqrt(1 - b**2) * (2 * pi - 1)  # (I2), J15 scaling
    Q = np.outer(v, v)
    np.fill_diagonal(Q, 1 - mu**2)  # (I1)
    return psi, eta, mu, v, Q


@pytest.mark.parametrize("b", [-0.5, 0.0, 0.3, 0.7])
def test_population_identities(b):
    """§8.1: both completions give R = vvᵀ, Eq. 5 gives ψ, η, and the tensor formula gives b (to 1e-10)."""
    psi, eta, mu, v, Q = _population(1, b)
    m = len(v)
    valid = ~np.eye(m, dtype=bool)
    W = valid.astype(float)
    r, heywood = loglinear_diagonal(Q, W, np.diag(Q).copy())
    assert heywood == 0
    np.testing.assert_allclose(r, v**2, atol=1e-10)
    R = Q.copy()
    np.fill_diagonal(R, r)
    vals, vecs = np.linalg.eigh(R)
    v_hat = resolve_sign(np.sqrt(vals[-1]) * vecs[:, -1])[0]
    np.testing.assert_allclose(v_hat, v, atol=1e-10)
    # Method B, both variants, started away from the answer
    u, _, conv = als_rank_one(Q, W, v * 0.7 + 0.05, np.diag(Q).copy(), tol=1e-14, max_sweeps=5000)
    assert conv
    np.testing.assert_allclose(np.outer(u, u)[valid], Q[valid], atol=1e-10)
    np.testing.assert_allclose(resolve_sign(u)[0], v, atol=1e-10)
    u2, _ = principal_axis(Q, np.abs(np.diag(Q)) * 0.5, tol=1e-14, max_iter=5000)
    np.testing.assert_allclose(resolve_sign(u2)[0], v, atol=1e-9)
    # (I5) with the true b
    p_hat, e_hat = psi_eta_from_v(mu, v, b)
    np.testing.assert_allclose(p_hat, psi, atol=1e-10)
    np.testing.assert_allclose(e_hat, eta, atol=1e-10)
    # (I6): exact T, least-squares α_T, inverse Eq. 17
    num = den = 0.0
    for i, j, k in itertools.combinations(range(m), 3):
        t = -2 * b * (1 - b**2) * np.prod([(2 * ((psi + eta) / 2)[x] - 1) for x in (i, j, k)])
        prod = v[i] * v[j] * v[k]
        num += t * prod
        den += prod**2
    alpha = num / den
    np.testing.assert_allclose(-alpha / np.sqrt(4 + alpha**2), b, atol=1e-10)


def test_sample_moments_match_numpy_and_pandas():
    """§3.2/§5.1: dense data give np.cov; missing data give pandas' pairwise-complete cov on valid pairs."""
    rng = np.random.default_rng(3)
    Z = np.where(rng.random((7, 300)) < 0.6, 1.0, -1.0)
    mom = pairwise_moments(BinaryMatrix.from_dense(Z), n_min=10)
    C = np.cov(Z)
    off = ~np.eye(7, dtype=bool)
    np.testing.assert_allclose(mom.Q[off], C[off], atol=1e-12)
    np.testing.assert_allclose(mom.mu, Z.mean(axis=1), atol=1e-12)
    Zm = np.where(rng.random(Z.shape) < 0.4, Z, np.nan)
    Zm[0, :] = np.where(np.isnan(Zm[0]), np.nan, 1.0)  # a constant annotator: never valid
    mom = pairwise_moments(BinaryMatrix.from_dense(Zm), n_min=10)
    ref = pd.DataFrame(Zm.T).cov(min_periods=10).to_numpy()
    assert mom.constant[0] and not mom.valid[0].any()
    np.testing.assert_allclose(mom.Q[mom.valid], ref[mom.valid], atol=1e-12)
    np.testing.assert_array_equal(mom.N, (~np.isnan(Zm)).astype(float) @ (~np.isnan(Zm)).T.astype(float))
    assert np.isnan(mom.Q[~mom.valid & off]).all()


def test_duplicate_responses_keep_the_last():
    B = BinaryMatrix.from_codes(np.array([0, 0, 1]), np.array([2, 2, 0]), np.array([1.0, -1.0, 1.0]), 2, 3)
    assert len(B.z) == 2 and B.to_dense()[0, 2] == -1.0
    # large enough for the radix sort: the same entries, in the same order, as numpy's unique on the reversed keys
    rng = np.random.default_rng(4)
    w, i = rng.integers(0, 300, 200_000), rng.integers(0, 5_000, 200_000)
    z = np.where(rng.random(200_000) < 0.5, 1.0, -1.0)
    B = BinaryMatrix.from_codes(w, i, z, 300, 5_000)
    _, first_rev = np.unique((w * 5_000 + i)[::-1], return_index=True)
    keep = len(w) - 1 - first_rev
    assert len(keep) < len(w)  # there are duplicates
    np.testing.assert_array_equal(B.worker, w[keep])
    np.testing.assert_array_equal(B.item, i[keep])
    np.testing.assert_array_equal(B.z, z[keep])


def test_tensor_numerator_matches_brute_force():
    """§3.8/§5.3: the e₃ power-sum contraction equals the triple loop, with and without missing entries."""
    rng = np.random.default_rng(5)
    m, n = 6, 40
    Z = np.where(rng.random((m, n)) < 0.5, 1.0, -1.0)
    Z[rng.random((m, n)) < 0.3] = np.nan
    B = BinaryMatrix.from_dense(Z)
    mu = np.nanmean(Z, axis=1)
    v = rng.uniform(-0.5, 0.8, m)
    C = np.nan_to_num(Z - mu[:, None])
    O = (~np.isnan(Z)).astype(float)
    num = den = 0.0
    for i, j, k in itertools.combinations(range(m), 3):
        num += np.sum(C[i] * C[j] * C[k]) * v[i] * v[j] * v[k]
        den += np.sum(O[i] * O[j] * O[k]) * (v[i] * v[j] * v[k]) ** 2
    b_hat, alpha = estimate_b_tensor(B, mu, v, delta_b=1e-9, warn=False)
    np.testing.assert_allclose(alpha, num / den, rtol=1e-12)


def test_likelihood_pattern_compression_keeps_counts():
    """§3.9 step 7 / P9: compressing items to unique patterns does not change Ĝ."""
    rng = np.random.default_rng(2)
    Z = np.where(rng.random((5, 400)) < 0.7, 1.0, -1.0)
    Z[rng.random(Z.shape) < 0.2] = np.nan
    B = BinaryMatrix.from_dense(Z)
    mu = np.nanmean(Z, axis=1)
    v = np.full(5, 0.4)
    use = np.ones(5, dtype=bool)
    design = pattern_design(B, use)
    P, M, counts = design
    assert P.shape[0] < 400 and counts.sum() == 400
    grid = np.array([-0.5, 0.0, 0.4])
    G = restricted_log_likelihood(design, mu, v, grid)
    # direct per-item evaluation
    psi, eta = [np.clip(x, 1e-3, 1 - 1e-3) for x in psi_eta_from_v(mu, v, 0.4)]
    obs = ~np.isnan(Z)
    lp = np.log(0.7) + np.sum(
        np.where(obs & (Z > 0), np.log(psi)[:, None], 0) + np.where(obs & (Z < 0), np.log(1 - psi)[:, None], 0), axis=0
    )
    ln = np.log(0.3) + np.sum(
        np.where(obs & (Z < 0), np.log(eta)[:, None], 0) + np.where(obs & (Z > 0), np.log(1 - eta)[:, None], 0), axis=0
    )
    np.testing.assert_allclose(G[2], np.mean(np.logaddexp(lp, ln)), rtol=1e-12)


def test_likelihood_in_grid_blocks_equals_whole_grid(monkeypatch):
    """Evaluating Ĝ in blocks of grid points (bounded memory), on one thread or several, gives the whole-grid
    values."""
    from fusion_core.methods.spectral import imbalance

    rng = np.random.default_rng(5)
    Z = np.where(rng.random((7, 300)) < 0.6, 1.0, -1.0)
    Z[rng.random(Z.shape) < 0.3] = np.nan
    design = pattern_design(BinaryMatrix.from_dense(Z), np.ones(7, dtype=bool))
    mu, v = np.nanmean(Z, axis=1), rng.uniform(0.1, 0.5, 7)
    grid = np.linspace(-0.9, 0.9, 37)
    whole = restricted_log_likelihood(design, mu, v, grid)
    monkeypatch.setattr(imbalance, "BLOCK_ENTRIES", 5 * design.P.shape[0])  # blocks of 5 grid points (8 blocks)
    monkeypatch.setenv("FUSION_CORE_THREADS", "1")
    blocked = restricted_log_likelihood(design, mu, v, grid)
    np.testing.assert_allclose(blocked, whole, rtol=1e-13)
    # the blocks on several threads: exactly the sequential values, in grid order
    monkeypatch.setenv("FUSION_CORE_THREADS", "3")
    monkeypatch.setattr(imbalance, "THREADED_BLOCK_ENTRIES", 0)
    np.testing.assert_array_equal(restricted_log_likelihood(design, mu, v, grid), blocked)
    assert np.argmax(whole) == np.argmax(restricted_log_likelihood(design, mu, v, grid))


def test_isml_llr_is_the_log_likelihood_ratio():
    """(I9): ½Σ(Z ln α + ln β) = log P(f|+1) − log P(f|−1), ln β inside the sum."""
    psi = np.array([0.9, 0.7, 0.6])
    eta = np.array([0.8, 0.65, 0.55])
    Z = np.array([[1.0], [-1.0], [1.0]])
    llr = isml_llr(BinaryMatrix.from_dense(Z), psi, eta, np.ones(3, dtype=bool))[0]
    lp = np.log(0.9) + np.log(1 - 0.7) + np.log(0.6)
    ln = np.log(1 - 0.8) + np.log(0.65) + np.log(1 - 0.55)
    assert llr == pytest.approx(lp - ln, abs=1e-12)


def test_sign_rules():
    v = np.array([-0.1, -0.1, -0.1, 0.6])
    s, d = resolve_sign(v, "sum")
    assert s.sum() > 0 and d["sign_rule_disagreement"]
    c, _ = resolve_sign(v, "count")
    assert (c > 0).sum() == 3
    assert resolve_sign(-np.array([0.3, 0.2, 0.1]))[1]["sign_margin"] == pytest.approx(1.0)


def test_core_prunes_low_degree_and_detects_bipartite():
    """§5.2: k-core with d_min valid partners; a bipartite valid-pair graph is too sparse."""
    rng = np.random.default_rng(0)
    m, n = 6, 400
    Z = np.where(rng.random((m, n)) < 0.6, 1.0, -1.0)
    # annotators {0,1,2} label items 0..199, {3,4,5} label 200..399; annotator 5 also shares 10 items with 0
    Z[:3, 200:] = np.nan
    Z[3:, :200] = np.nan
    B = BinaryMatrix.from_dense(Z)
    mom = pairwise_moments(B, n_min=10)
    core = spectral_core(B, mom, d_min=2)
    assert core.mask.sum() == 3 and not core.too_sparse and core.coverage == pytest.approx(0.5)
    # a 4-cycle 0-1-2-3-0 (bipartite) of overlaps
    Zb = np.full((4, 400), np.nan)
    X = np.where(rng.random((2, 400)) < 0.6, 1.0, -1.0)
    blocks = [(0, 1), (1, 2), (2, 3), (3, 0)]
    for k, (i, j) in enumerate(blocks):
        cols = slice(100 * k, 100 * (k + 1))
        Zb[i, cols] = X[0, cols]
        Zb[j, cols] = X[1, cols]
    Bb = BinaryMatrix.from_dense(Zb)
    core_b = spectral_core(Bb, pairwise_moments(Bb, 10), d_min=2)
    assert core_b.bipartite and core_b.too_sparse


def test_weights_zero_on_invalid_pairs():
    rng = np.random.default_rng(1)
    Z = np.where(rng.random((5, 50)) < 0.6, 1.0, -1.0)
    Z[0, 5:] = np.nan  # only 5 shared items with everyone: all pairs of annotator 0 invalid
    mom = pairwise_moments(BinaryMatrix.from_dense(Z), n_min=10)
    W = pair_weights(mom, "delta")
    assert (W[0] == 0).all() and (W[1:, 1:][~np.eye(4, dtype=bool)] > 0).all()


def _theorem1(pi, xi, pi_c, b):
    """P14 Theorem 1 with the corrected α_Th (spec §6.1): eigenvalues and directions of R."""
    a, c = 2 * pi - 1, 2 * xi - 1
    lam_p, lam_c = (1 - b**2) * np.sum(a**2), (1 - b**2) * np.sum(c**2)
    k1, k2 = 2 * pi_c - 1, lam_c / lam_p
    s = np.sqrt(1 - k1**2)
    a0 = 0.5 * np.arctan2(2 * k1 * k2 * s, k2 * (1 - 2 * k1**2) - 1)
    b0 = 0.5 * np.arctan2(2 * k1 * s, 1 - k2 - 2 * k1**2)
    best = None
    for da in (0, np.pi / 2, -np.pi / 2, np.pi):
        for db in (0, np.pi / 2, -np.pi / 2, np.pi):
            al, be = a0 + da, b0 + db
            err = abs(np.sin(al + be) - k1)
            if best is None or err < best[0]:
                best = (err, al, be)
    _, al, be = best
    lam1 = lam_p * np.cos(al) ** 2 + lam_c * np.sin(be) ** 2
    lam2 = lam_p * np.sin(al) ** 2 + lam_c * np.cos(be) ** 2
    e1 = np.concatenate([a * np.cos(al), c * np.sin(be)])
    e2 = np.concatenate([a * np.sin(al), c * np.cos(be)])
    return lam1, lam2, e1, e2


@pytest.mark.parametrize("seed", range(20))
def test_theorem1_corrected_angles(seed):
    """§8.12: the exact Lemma 2 matrix has the Theorem 1 spectrum (corrected α_Th) to 1e-9."""
    rng = np.random.default_rng(seed)
    pi = rng.uniform(0.3, 0.9, 12)
    xi = rng.uniform(0.3, 0.9, 6)
    pi_c, b = rng.uniform(0.05, 0.95), rng.uniform(-0.6, 0.6)
    a, c = 2 * pi - 1, 2 * xi - 1
    k1 = 2 * pi_c - 1
    u = np.concatenate([a, c])
    R = (1 - b**2) * np.outer(u, u)
    R[:12, 12:] *= k1  # P–C block (Lemma 2)
    R[12:, :12] *= k1
    vals, vecs = np.linalg.eigh(R)
    lam1, lam2, e1, e2 = _theorem1(pi, xi, pi_c, b)
    np.testing.assert_allclose(sorted([lam1, lam2]), sorted(vals[-2:]), rtol=1e-9, atol=1e-12)
    for e in (e1, e2):
        cos = np.max(np.abs(vecs[:, -2:].T @ (e / np.linalg.norm(e))))
        assert cos == pytest.approx(1.0, abs=1e-9)


def test_fit_spectral_recovers_population_ranking():
    """With a huge sample the estimated v̂ is close to √(1−b²)(2π−1) (J15 scaling, P2)."""
    rng = np.random.default_rng(0)
    m, n, b = 8, 200_000, 0.2
    psi, eta = rng.uniform(0.55, 0.9, m), rng.uniform(0.55, 0.9, m)
    y = rng.random(n) < (1 + b) / 2
    u = rng.random((m, n))
    Z = np.where(y, np.where(u < psi[:, None], 1.0, -1.0), np.where(u < eta[:, None], -1.0, 1.0))
    res = fit_spectral(BinaryMatrix.from_dense(Z))
    v = np.sqrt(1 - b**2) * (psi + eta - 1)
    np.testing.assert_allclose(res.v, v, atol=0.01)
    assert res.diagnostics["explained"] > 0.8
    assert list(res.ranking) == list(np.argsort(-res.v))
