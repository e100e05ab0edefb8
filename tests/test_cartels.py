"""Cartel detector (spec spectral.md §6, oracles §8.11): power, membership, false positives, report API."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from fusion_core.diagnostics.cartels import CartelReport, detect_cartels
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.simulate.dawid_skene import dawid_skene
from fusion_core.simulate.spectral import cartel, independent

ALPHA = 0.01  # the spec's decision level for these oracles


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """BLAS on one thread, as ``detect_cartels`` runs its analysis (detector.py): the tests that drive the analysis
    directly ran thousands of small products on OpenBLAS's spinning threads (the sequential bootstrap test took
    29 s instead of 1 s with another process busy)."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _detect(sim, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        return detect_cartels(sim.responses, alpha=kw.pop("alpha", ALPHA), **kw)


def _f1(pred: set, true: set) -> float:
    tp = len(pred & true)
    return 0.0 if tp == 0 else 2 * tp / (len(pred) + len(true))


def _membership_f1(sim, rep: CartelReport) -> tuple[float, float]:
    """(identifiable-member F1, all-member F1) of 'in a detected cartel' vs 'cartel member' (§8.11)."""
    g = sim.group
    pi, xi = sim.pi, sim.xi
    true = set(g[g != "honest"].index)
    pred = set().union(*rep.groups) if rep.groups else set()
    ident = set(
        g.index[((g == "honest") & (np.abs(2 * pi - 1) >= 0.1)) | ((g != "honest") & (np.abs(2 * xi - 1) >= 0.1))]
    )
    return _f1(pred & ident, true & ident), _f1(pred, true)


@pytest.mark.parametrize("seed", range(3))
def test_cartel_power_and_membership(seed):
    sim = cartel(m=100, n=600, r=0.33, pi_c=0.5, seed=seed)
    rep = _detect(sim, random_state=seed)
    assert rep.p_value[0] < ALPHA and len(rep.groups) >= 1
    f1_ident, _ = _membership_f1(sim, rep)
    assert f1_ident >= 0.90
    members = set().union(*rep.groups)
    assert (rep.membership[list(members)] != "honest").all()
    # cartel members score high, honest annotators low
    g = sim.group.reindex(rep.scores.index)
    assert rep.scores[g != "honest"].mean() > 0.7 > 0.3 > rep.scores[g == "honest"].mean()


@pytest.mark.parametrize("seed", range(3))
def test_no_cartel_among_independent_annotators(seed):
    sim = independent(m=100, n=600, seed=seed)
    rep = _detect(sim, random_state=seed)
    assert rep.p_value[0] >= ALPHA and rep.groups == []
    assert rep.status == "no_evidence" and rep.reason.startswith("no extra covariance component")
    assert (rep.membership == "honest").all() and (rep.scores == 0).all()
    assert (rep.labels == rep.labels_without_cartel).all()


def test_report_contract():
    sim = cartel(m=40, n=500, r=0.3, pi_c=0.5, xi_range=(0.7, 0.9), pi_range=(0.6, 0.85), seed=11)
    rep = _detect(sim, n_bootstrap=50, random_state=1, alpha=0.05)
    assert isinstance(rep, CartelReport)
    assert rep.status == "groups_found" and rep.significant and "1 group(s)" in rep.reason
    assert rep.workers.equals(rep.membership.index) and rep.workers.equals(rep.scores.index)
    assert list(rep.loadings.columns[:2]) == ["v1", "v2"] and rep.loadings.index.equals(rep.workers)
    assert rep.eigenvalues.shape == (10,) and np.all(np.diff(rep.eigenvalues) <= 1e-12)
    assert rep.null_eigenvalues.shape == (50, 10)
    assert rep.p_value.shape == (9,) and np.all((rep.p_value > 0) & (rep.p_value <= 1))
    assert rep.p_value.min() >= 1 / 51
    assert rep.n_bootstrap == 50 and rep.alpha == 0.05
    assert ((rep.scores >= 0) & (rep.scores <= 1)).all()
    assert rep.labels.index.equals(rep.labels_without_cartel.index)
    assert set(rep.membership.unique()) == {"honest", "cartel 1"}
    assert rep.groups and all(isinstance(g, set) for g in rep.groups)
    truth = sim.truth.reindex(rep.labels.index)
    # a strong cartel drags majority-based labels; dropping it does not make them worse
    assert (rep.labels_without_cartel == truth).mean() >= (rep.labels == truth).mean() - 0.01


def test_reproducible_given_seed():
    sim = cartel(m=60, n=400, r=0.3, seed=4)
    a = _detect(sim, n_bootstrap=40, random_state=7)
    b = _detect(sim, n_bootstrap=40, random_state=7)
    np.testing.assert_array_equal(a.p_value, b.p_value)
    assert a.groups == b.groups


@pytest.mark.parametrize("sparse_path", [False, True])
def test_sparse_cartel_detected(sparse_path, monkeypatch):
    """Missing data [EXT]: each entry observed with probability 0.3; the observed mask is copied in the null
    (dense batched bootstrap and the sparse-product bootstrap used for large matrices)."""
    import fusion_core.diagnostics.cartels.bootstrap as mod

    if sparse_path:
        monkeypatch.setattr(mod, "SPARSE_BOOTSTRAP_CELLS", 0)
    sim = cartel(m=60, n=1500, r=0.33, pi_c=0.5, observed=0.2, seed=2)
    rep = _detect(sim, n_bootstrap=100, random_state=0)
    assert rep.p_value[0] < ALPHA
    f1_ident, _ = _membership_f1(sim, rep)
    assert f1_ident >= 0.85
    ind = independent(m=60, n=1500, observed=0.2, seed=2)
    assert _detect(ind, n_bootstrap=100, random_state=0).p_value[0] >= ALPHA


def test_input_problems():
    s = dawid_skene(n_items=200, n_workers=10, n_classes=3, responses_per_item=5, seed=0)
    with pytest.raises(UserInputError, match="binary"):
        detect_cartels(s.responses)
    sim = independent(m=50, n=300, per_item=2, seed=0)
    with pytest.warns(AggregationWarning, match="not applicable"):
        rep = detect_cartels(sim.responses, n_bootstrap=10)
    assert rep.groups == [] and len(rep.workers) == 0 and rep.warnings
    assert rep.status == "could_not_run" and "share" in rep.reason
    with pytest.raises(UserInputError):
        detect_cartels(sim.responses, n_bootstrap=0)


def test_status_could_not_run_and_groups_found():
    """The report says in plain words whether the test could run: annotators who never share an item give
    'could_not_run' (every array empty, labels still given); a simulated cartel gives 'groups_found'."""
    rng = np.random.default_rng(0)
    rows = [
        pd.DataFrame({"task": [f"t{w}_{i}" for i in range(30)], "worker": f"w{w}", "label": rng.integers(0, 2, 30)})
        for w in range(12)
    ]
    disjoint = pd.concat(rows, ignore_index=True)  # each annotator labels its own 30 items
    with pytest.warns(AggregationWarning, match="not applicable"):
        rep = detect_cartels(disjoint, n_bootstrap=10)
    assert rep.status == "could_not_run"
    assert rep.reason == "only 0 annotators share ≥ 10 items with ≥ 3 others"
    assert rep.p_value.size == 0 and rep.eigenvalues.size == 0 and len(rep.membership) == 0
    assert rep.labels.index.equals(rep.labels_without_cartel.index) and len(rep.labels) == 360
    sim = cartel(m=60, n=500, r=0.3, pi_c=0.5, seed=5)
    found = _detect(sim, n_bootstrap=50, random_state=0, alpha=0.05)
    assert found.status == "groups_found" and found.groups and found.p_value[0] < 0.05


# ----------------------------------------------------------------------- fast paths (large sparse crowds)
def _analysis(sim, n_bootstrap=200, alpha=ALPHA, seed=0):
    """The detector's internal state on the core annotators of ``sim`` (as ``detect_cartels`` builds it)."""
    from fusion_core.data.responses import as_responses
    from fusion_core.diagnostics.cartels.analysis import GroupAnalysis
    from fusion_core.methods.spectral import BinaryMatrix, pairwise_moments, spectral_core

    resp = as_responses(sim.responses)
    z = np.where(resp.label == 1, 1.0, -1.0)
    B = BinaryMatrix.from_codes(resp.worker, resp.item, z, resp.n_workers, resp.n_items)
    core = spectral_core(B, pairwise_moments(B, n_min=10), d_min=3)
    return GroupAnalysis(
        B,
        np.flatnonzero(core.mask),
        n_bootstrap=n_bootstrap,
        alpha=alpha,
        n_min=10,
        rng=np.random.default_rng(seed),
    )


def test_pair_pattern_matches_dense_products():
    """The pair-list statistics equal the dense-product ones (same residual eigenvalues and spectrum) on a
    sparse crowd, for the observed labels and for relabellings with the same missingness pattern."""
    from fusion_core.diagnostics.cartels.pair_pattern import PairPattern
    from fusion_core.diagnostics.cartels.statistic import stats_from_products

    sim = cartel(m=70, n=900, r=0.3, observed=0.15, seed=3)
    an = _analysis(sim)
    w, i = an.B.worker, an.B.item  # sorted by (annotator, item), as np.nonzero of the dense mask
    O = np.zeros((an.B.m, an.B.n), dtype=bool)
    O[w, i] = True
    Z = np.zeros(O.shape)
    Z[w, i] = an.B.z
    pat = PairPattern(w, i, O.shape[0], O.shape[1], 10)
    np.testing.assert_array_equal(pat.N, O.astype(float) @ O.T.astype(float))
    rng = np.random.default_rng(0)
    zs = np.vstack([Z[w, i], np.where(rng.random((4, len(w))) < 0.5, 1.0, -1.0)])
    dense = np.zeros((len(zs),) + O.shape)
    dense[:, w, i] = zs
    x0 = np.ones(O.shape[0])
    S1, S12 = dense @ O.T.astype(float), dense @ dense.transpose(0, 2, 1)
    s_ref, spec_ref = stats_from_products(pat.N, S1, S12, n_min=10, n_extra=5, x0=x0, n_spec=4)
    s, spec = pat.stats(zs, 10, 5, x0, n_spec=4)
    np.testing.assert_allclose(s, s_ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(spec, spec_ref, rtol=1e-9, atol=1e-9)
    assert s_ref[0, 0] > s_ref[1:, 0].max()  # the cartel makes the observed statistic stand out


def test_sequential_bootstrap_same_decision_as_full():
    """Besag–Clifford stopping [EXT]: on the same random stream the decision p < α equals the full-B one; a
    stopped test reports h/n with exactly h exceedances among the n replicates drawn."""
    for sim, expect_reject in ((cartel(m=60, n=500, r=0.3, seed=5), True), (independent(m=60, n=500, seed=5), False)):
        g = np.arange(len(_analysis(sim).idx))
        full = _analysis(sim, seed=1).test(g)
        seq = _analysis(sim, seed=1).test(g, sequential=True)
        assert (full.p[0] < ALPHA) == (seq.p[0] < ALPHA) == expect_reject
        n = seq.n_drawn
        np.testing.assert_allclose(seq.s_null, full.s_null[:n])  # same stream, prefix of the full null
        if n < 200:
            h = int((seq.s_null[:, 0] >= seq.s[0]).sum())
            assert h == 10 and seq.p[0] == pytest.approx(h / n)
            assert seq.s_null[-1, 0] >= seq.s[0]  # stopped at the h-th exceedance
        else:
            assert seq.p[0] == full.p[0]
    assert n < 200  # under the null (here p ≈ 0.09 ≫ 10/200) the bootstrap stops early


def test_sequential_stop_count_never_changes_the_decision():
    """For every B and α: once h replicates exceed s, the full-B test cannot reject, and the stopped p = h/n
    (n ≤ B) is not below α either."""
    from fusion_core.diagnostics.cartels.bootstrap import stop_count

    for B in range(1, 801):
        for alpha in (0.001, 0.01, 0.02, 0.05, 0.1, 0.2):
            h = stop_count(alpha, B)
            assert (1 + h) / (B + 1) >= alpha and h / B >= alpha and h >= 10


def test_warm_rank_fits_match_lapack_iterations():
    """The warm-started eigen-solvers reproduce the LAPACK-only iterations (rank-one completion, rank-two
    principal axes) on a sparse covariance."""
    from fusion_core.diagnostics.cartels.eigen import top_eigenpair_warm
    from fusion_core.methods.spectral import top_eigenpair

    sim = cartel(m=90, n=1500, r=0.3, observed=0.2, seed=1)
    an = _analysis(sim)
    g = np.arange(len(an.idx))
    assert (~an.mom.valid[np.ix_(g, g)]).sum() > len(g)  # some pairs are missing and get imputed
    L_warm, L_ref = an._rank_two(g), an._rank_two(g, warm=False)
    np.testing.assert_allclose(np.abs(L_warm), np.abs(L_ref), atol=1e-9)
    Q, valid = an.mom.Q[np.ix_(g, g)], an.mom.valid[np.ix_(g, g)]
    R = np.where(valid, Q, 0.0)
    np.fill_diagonal(R, np.max(np.abs(R), axis=1))
    lam, e = top_eigenpair_warm(R, valid)
    spec, e_ref, _ = top_eigenpair(R, valid, spectrum=False)
    assert lam == pytest.approx(spec[0], rel=1e-9) and abs(e @ e_ref) == pytest.approx(1, abs=1e-9)


def test_lanczos_top_matches_eigvalsh():
    """Batched Lanczos: the largest eigenvalue of every diagonal block (sparse Wigner-like residuals and a
    block with a planted spike) equals LAPACK's; unconverged blocks are flagged, never returned wrong."""
    import scipy.sparse as sp

    from fusion_core.diagnostics.cartels.eigen import lanczos_top

    rng = np.random.default_rng(0)
    m, nb = 150, 5
    blocks = []
    for b in range(nb):
        A = np.where(rng.random((m, m)) < 0.1, rng.standard_normal((m, m)), 0.0)
        A = np.triu(A, 1) + np.triu(A, 1).T
        if b == 0:
            u = rng.standard_normal(m)
            A += 0.2 * np.outer(u, u)
        blocks.append(A)
    theta, ok = lanczos_top(sp.block_diag(blocks, format="csr"), nb, m)
    ref = np.array([np.linalg.eigvalsh(A)[-1] for A in blocks])
    assert ok.all()
    np.testing.assert_allclose(theta[:, 0], ref, rtol=1e-9)
    theta2, ok2 = lanczos_top(sp.block_diag(blocks, format="csr"), nb, m, max_steps=3)
    assert not ok2.all()  # three steps cannot resolve a noise edge: reported as not converged


def test_large_sparse_crowd():
    """200 annotators each labelling 15% of 2,000 items (large-crowd regime, sparse path): the cartel is found
    (identifiable-member F1 ≥ 0.85, the threshold of the sparse test above); without a cartel, none is."""
    kw = {"m": 200, "n": 2000, "observed": 0.15, "pi_range": (0.6, 0.85)}
    sim = cartel(r=0.25, xi_range=(0.6, 0.85), seed=1, **kw)
    rep = _detect(sim, n_bootstrap=100, random_state=0)
    assert rep.p_value[0] < ALPHA and len(rep.groups) >= 1
    f1_ident, _ = _membership_f1(sim, rep)
    assert f1_ident >= 0.85
    rep0 = _detect(independent(seed=1, **kw), n_bootstrap=100, random_state=0)
    assert rep0.p_value[0] >= ALPHA and rep0.groups == []


# ------------------------------------------------------------------------------------ slow, full
@pytest.mark.slow
def test_false_positive_rate_full():
    """§8.11: rejection rate ≤ 5% over 100 seeds at α = 0.01, B = 200."""
    rejected = sum(_detect(independent(m=100, n=600, seed=s), random_state=s).p_value[0] < ALPHA for s in range(100))
    assert rejected <= 5


@pytest.mark.slow
def test_power_and_membership_full():
    f1s = []
    for seed in range(20):
        sim = cartel(m=100, n=600, r=0.33, pi_c=0.5, seed=seed)
        rep = _detect(sim, random_state=seed)
        assert rep.p_value[0] < ALPHA
        f1s.append(_membership_f1(sim, rep))
    f1s = np.array(f1s)
    assert f1s[:, 0].min() >= 0.90 and f1s[:, 0].mean() >= 0.95
    assert f1s[:, 1].mean() >= 0.85


@pytest.mark.slow
def test_two_cartels_full():
    """§8.11: 60 honest + 20 + 20; exactly 3 groups in ≥ 18/20 seeds, mean F1 and purity ≥ 0.85."""
    n3, f1s, purity = 0, [], []
    for seed in range(20):
        sim = cartel(m=100, n=600, r=[0.2, 0.2], pi_c=0.5, seed=seed)
        rep = _detect(sim, n_bootstrap=100, random_state=seed)
        n3 += len(rep.groups) == 2
        g = sim.group.reindex(rep.membership.index)
        pred = set().union(*rep.groups) if rep.groups else set()
        f1s.append(_f1(pred, set(g[g != "honest"].index)))
        majority = g.groupby(rep.membership).agg(lambda x: x.value_counts().index[0])
        purity.append(float((rep.membership.map(majority) == g).mean()))
    assert n3 >= 18 and np.mean(f1s) >= 0.85 and np.mean(purity) >= 0.85


@pytest.mark.parametrize("seed", [12, 26])
def test_same_sign_keeps_random_answerers_out_of_the_cartel(seed):
    """The app's demo crowd (members all better than random on the cartel's target): with the squared evidence
    alone, spammers whose covariance row loads *against* the cartel's core by noise were absorbed (seeds 12, 26);
    with ``same_sign`` the cartel is exactly its members and every spammer stays with the main group."""
    from fusion_core.simulate.demo import crowd_demo

    demo = crowd_demo(seed)
    kw: dict[str, Any] = {"n_bootstrap": 200, "alpha": 0.05, "random_state": seed}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        loose = detect_cartels(demo.responses, **kw)
        strict = detect_cartels(demo.responses, same_sign=True, **kw)
    roles = demo.roles
    members = set(roles.index[roles.str.startswith("cartel")])
    spammers = set(roles.index[roles == "spammer"])
    assert set().union(*loose.groups) & spammers  # the defect this guards against, on these seeds
    assert len(strict.groups) == 1 and strict.groups[0] == members
    assert (strict.membership[list(spammers)] == "honest").all()
    # the sign rule: the cartel's members load on the cartel's factor with one sign (its core's)
    cartel_loadings = strict.loadings.loc[list(members), "v2"]
    assert (np.sign(cartel_loadings) == np.sign(cartel_loadings.iloc[0])).all()
