"""Statistical test oracles of spec spectral.md §8.2–§8.10 (thresholds unchanged).

Default suite: 3 seeds, per-seed bounds.  ``@pytest.mark.slow``: the spec's full seed counts and every mean
or rate bound.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.methods import create
from fusion_core.methods.spectral import METHOD_FALLBACK, BinaryMatrix, SparseOverlapWarning, fit_binary, fit_spectral
from fusion_core.metrics import balanced_accuracy
from fusion_core.simulate.dawid_skene import dawid_skene
from fusion_core.simulate.spectral import cartel, independent, split_balanced_accuracy

FAST = range(3)
FULL = range(20)


def _binary(sim) -> tuple[Responses, BinaryMatrix]:
    resp = Responses.from_frame(sim.responses)
    z = np.where(resp.label == 1, 1.0, -1.0)
    return resp, BinaryMatrix.from_codes(resp.worker, resp.item, z, resp.n_workers, resp.n_items)


def _aligned(sim, resp, key):
    return getattr(sim, key).reindex(resp.workers).to_numpy()


def _ba(labels: pd.Series, truth: pd.Series) -> float:
    return balanced_accuracy(labels.reindex(truth.index).to_numpy(), truth.to_numpy())


def _quiet_fit(name, data, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create(name, **params).fit(data)


# ------------------------------------------------------------------------------------ §8.2 ranking
def _paper_ranking_sim(seed):
    rng = np.random.default_rng(seed)
    while True:  # redraw π until A3 holds (≥ 12 of 20 better than random)
        pi = rng.uniform(0.3, 0.8, 20)
        if (pi > 0.5).sum() >= 12:
            break
    psi, eta = split_balanced_accuracy(pi, rng)
    return independent(n=5000, b=0.0, psi=psi, eta=eta, seed=seed)


def _spearmans(sim):
    resp, B = _binary(sim)
    target = 2 * _aligned(sim, resp, "balanced_accuracy") - 1
    out = {}
    for completion in ("loglinear", "als"):
        res = fit_spectral(B, completion=completion, warn=False)
        out[completion] = spearmanr(res.v, target).statistic
    return out


@pytest.mark.parametrize("seed", FAST)
def test_ranking_paper_generator(seed):
    sp = _spearmans(_paper_ranking_sim(seed))
    assert sp["loglinear"] >= 0.90
    assert abs(sp["loglinear"] - sp["als"]) <= 0.02


@pytest.mark.parametrize("seed", FAST)
def test_ranking_j15_generator(seed):
    sp = _spearmans(independent(m=20, n=5000, b=0.3, psi_range=(0.5, 0.8), seed=seed))
    assert sp["loglinear"] >= 0.85
    assert abs(sp["loglinear"] - sp["als"]) <= 0.02


@pytest.mark.slow
def test_ranking_full():
    paper = [_spearmans(_paper_ranking_sim(s)) for s in FULL]
    j15 = [_spearmans(independent(m=20, n=5000, b=0.3, psi_range=(0.5, 0.8), seed=s)) for s in FULL]
    assert min(p["loglinear"] for p in paper) >= 0.90
    assert min(p["loglinear"] for p in j15) >= 0.85
    assert np.mean([p["loglinear"] for p in j15]) >= 0.95
    assert max(abs(p["loglinear"] - p["als"]) for p in paper + j15) <= 0.02


@pytest.mark.slow
@pytest.mark.parametrize("with_cartel", [False, True])
def test_top1_top5_replication(with_cartel):
    """§8.3: argmax |v̂| is the empirically best annotator in ≥ 75% (72% with a cartel); top-5 in ≥ 98%."""
    top1 = top5 = 0
    runs = 300
    for seed in range(runs):
        sim = cartel(r=0.33, pi_c=0.5, seed=seed) if with_cartel else independent(seed=seed)
        Z = sim.dense
        y = np.where(sim.truth.to_numpy() == 1, 1.0, -1.0)
        emp = 0.5 * ((Z[:, y > 0] > 0).mean(axis=1) + (Z[:, y < 0] < 0).mean(axis=1))
        best = int(np.argmax(emp))
        v = np.abs(fit_spectral(BinaryMatrix.from_dense(Z), warn=False).v)
        order = np.argsort(-v)
        top1 += order[0] == best
        top5 += best in order[:5]
    assert top1 / runs >= (0.72 if with_cartel else 0.75)
    assert top5 / runs >= 0.98


# ------------------------------------------------------------------------ §8.4–8.5 b and ψ/η
def _b_psi_eta(seed, b, n=10_000):
    sim = independent(m=10, n=n, b=b, psi_range=(0.5, 0.8), seed=seed)
    B = BinaryMatrix.from_dense(sim.dense)
    fit = fit_binary(B, b_method="both", warn=False)
    psi, eta = sim.psi.to_numpy(), sim.eta.to_numpy()
    mae = 0.5 * (np.mean(np.abs(fit.psi - psi)) + np.mean(np.abs(fit.eta - eta)))
    return abs(fit.b_likelihood - b), abs(fit.b_tensor - b), mae


@pytest.mark.parametrize("b", [0.0, 0.3, 0.6])
@pytest.mark.parametrize("seed", FAST)
def test_class_imbalance_and_psi_eta(seed, b):
    err_lik, err_ten, mae = _b_psi_eta(seed, b)
    assert err_lik <= 0.20 and err_ten <= 0.20
    assert mae <= 0.03


@pytest.mark.slow
@pytest.mark.parametrize("b", [0.0, 0.3, 0.6])
def test_class_imbalance_full(b):
    res = np.array([_b_psi_eta(s, b) for s in FULL])
    assert res[:, 0].mean() <= 0.04 and res[:, 1].mean() <= 0.04
    assert res[:, :2].max() <= 0.20
    assert res[:, 0].mean() <= res[:, 1].mean() + 0.01
    assert res[:, 2].max() <= 0.03 and res[:, 2].mean() <= 0.015


@pytest.mark.slow
@pytest.mark.parametrize("b", [0.0, 0.3, 0.6])
def test_class_imbalance_large_n(b):
    for seed in range(5):
        err_lik, err_ten, _ = _b_psi_eta(seed, b, n=100_000)
        assert err_lik <= 0.05 and err_ten <= 0.05


# ----------------------------------------------------------------- §8.6–8.7 SML vs MV, cartels
def _p14_run(seed, r=0.0):
    sim = cartel(r=r, pi_c=0.5, seed=seed) if r else independent(seed=seed)
    truth = sim.truth
    out = {}
    for name, params in (
        ("mv", {"tie_break": "random", "random_state": seed}),
        ("sml", {}),
        ("isml", {}),
        ("sml-ds", {"multi_start": False}),
        ("sml-ds", {"init": "mv", "multi_start": False}),
        ("sml-ds", {}),
    ):
        key = (
            name
            if name != "sml-ds"
            else f"em-{params.get('init', 'isml')}-{'multi' if params.get('multi_start', True) else 'single'}"
        )
        out[key] = _ba(_quiet_fit(name, sim.responses, **params).labels_, truth)
    return out


@pytest.mark.parametrize("seed", FAST)
def test_sml_beats_mv_on_p14_setup(seed):
    res = _p14_run(seed)
    assert res["sml"] >= 0.98
    assert res["sml"] >= res["mv"]
    assert res["em-isml-single"] >= 0.98


@pytest.mark.parametrize("seed", FAST)
def test_sml_robust_to_cartel(seed):
    res = _p14_run(seed, r=0.33)
    assert res["sml"] >= 0.95
    assert res["em-isml-single"] >= 0.97
    assert res["em-isml-multi"] >= 0.97


@pytest.mark.slow
def test_p14_setups_full():
    ind = [_p14_run(s) for s in FULL]
    assert sum(r["sml"] >= r["mv"] for r in ind) >= 19
    assert min(r["sml"] for r in ind) >= 0.98
    assert np.mean([r["mv"] for r in ind]) <= 0.90
    assert min(r["em-isml-single"] for r in ind) >= 0.98
    car = [_p14_run(s, r=0.33) for s in FULL]
    assert min(r["sml"] for r in car) >= 0.95
    assert np.mean([r["mv"] for r in car]) <= 0.80
    assert np.mean([r["sml"] - r["mv"] for r in car]) >= 0.15
    assert min(r["em-isml-single"] for r in car) >= 0.97


# -------------------------------------------------------------------- §8.8 i-SML vs SML
def _one_expert(seed):
    rng = np.random.default_rng(seed)
    psi = rng.uniform(0.6, 0.75, 10)
    eta = rng.uniform(0.6, 0.75, 10)
    psi[0], eta[0] = rng.uniform(0.97, 0.99, 2)
    sim = independent(n=5000, b=0.3, psi=psi, eta=eta, seed=seed)
    Z = sim.dense
    B = BinaryMatrix.from_dense(Z)
    fit = fit_binary(B, warn=False)
    y = np.where(sim.truth.to_numpy() == 1, 1, -1)
    sml = np.where(fit.score > 0, 1, -1)
    isml = np.where(fit.llr > 0, 1, -1)
    p, e = sim.psi.to_numpy(), sim.eta.to_numpy()
    ln_a = np.log(p * e / ((1 - p) * (1 - e)))
    ln_b = np.log(p * (1 - p) / (e * (1 - e)))
    oracle = np.where((Z * ln_a[:, None] + ln_b[:, None]).sum(axis=0) > 0, 1, -1)
    return balanced_accuracy(sml, y), balanced_accuracy(isml, y), balanced_accuracy(oracle, y)


@pytest.mark.parametrize("seed", FAST)
def test_isml_beats_sml_with_one_expert(seed):
    sml, isml, _ = _one_expert(seed)
    assert isml >= sml


@pytest.mark.slow
def test_isml_one_expert_full():
    res = np.array([_one_expert(s) for s in FULL])
    assert (res[:, 1] >= res[:, 0]).all()
    assert (res[:, 1] - res[:, 0]).mean() >= 0.008
    assert np.abs(res[:, 1] - res[:, 2]).mean() <= 0.003


# ------------------------------------------------------------------- §8.9 multiclass one-vs-all
def _ova(seed, k, prior, symmetric):
    sim = dawid_skene(
        n_items=10_000,
        n_workers=10,
        n_classes=k,
        responses_per_item=10,
        accuracy=(0.5, 0.9),
        class_prior=prior,
        symmetric_errors=symmetric,
        seed=seed,
    )
    est = _quiet_fit("isml", sim.responses)
    order = pd.Index(sim.workers).get_indexer(est.workers_)
    diag_true = np.einsum("wkk->wk", sim.confusion)[order]
    mae_p = np.mean(np.abs(est.priors_.to_numpy() - np.asarray(sim.class_prior)))
    mae_d = np.mean(np.abs(est.sensitivity_.to_numpy() - diag_true))
    return mae_p, mae_d, est.result_.details["class_prior_sum"]


CASES = [(3, [0.5, 0.3, 0.2], True), (3, [0.5, 0.3, 0.2], False), (4, None, True), (4, None, False)]


@pytest.mark.parametrize("k,prior,symmetric", CASES)
def test_one_vs_all_multiclass(k, prior, symmetric):
    for seed in range(2):
        mae_p, mae_d, total = _ova(seed, k, prior, symmetric)
        assert mae_p <= 0.02 and mae_d <= 0.03 and 0.95 <= total <= 1.05


@pytest.mark.slow
@pytest.mark.parametrize("k,prior,symmetric", CASES)
def test_one_vs_all_multiclass_full(k, prior, symmetric):
    for seed in FULL:
        mae_p, mae_d, total = _ova(seed, k, prior, symmetric)
        assert mae_p <= 0.02 and mae_d <= 0.03 and 0.95 <= total <= 1.05


# ---------------------------------------------------------------------- §8.10 missing data
def _mcar(seed):
    sim = independent(m=30, n=3000, b=0.3, psi_range=(0.55, 0.85), observed=0.3, seed=seed)
    resp, B = _binary(sim)
    fit = fit_binary(B, b_method="both", warn=False)
    psi, eta = _aligned(sim, resp, "psi"), _aligned(sim, resp, "eta")
    sp = spearmanr(fit.spectral.v, psi + eta - 1).statistic
    mae = 0.5 * (np.mean(np.abs(fit.psi - psi)) + np.mean(np.abs(fit.eta - eta)))
    ba_sml = _ba(_quiet_fit("sml", resp).labels_, sim.truth)
    ba_mv = _ba(_quiet_fit("mv", resp, tie_break="random", random_state=seed).labels_, sim.truth)
    # likelihood ranking: balanced accuracy ψ+η−1 of the EM started from i-SML (sml-ds, §3.11)
    em_ba = _quiet_fit("sml-ds", resp).result_.column("balanced_accuracy").values
    sp_em = spearmanr(em_ba, psi + eta - 1).statistic
    return sp, mae, abs(fit.b_likelihood - 0.3), abs(fit.b_tensor - 0.3), ba_sml, ba_mv, sp_em


@pytest.mark.parametrize("seed", FAST)
def test_mcar_sparse(seed):
    sp, mae, *_, sp_em = _mcar(seed)
    assert sp >= 0.80 and mae <= 0.035
    assert sp_em >= 0.80


@pytest.mark.parametrize("seed", FAST)
def test_mcar_uses_weighted_rank_one_fit(seed):
    """§5.1/§8.13: with missing entries 'auto' runs Method A then Method B (w_ij = n_ij), even when every pair
    is valid; both give the same ranking (§3.3: Spearman equal to about 2 decimals)."""
    sim = independent(m=30, n=3000, b=0.3, psi_range=(0.55, 0.85), observed=0.3, seed=seed)
    resp, B = _binary(sim)
    target = _aligned(sim, resp, "psi") + _aligned(sim, resp, "eta") - 1
    auto = fit_spectral(B, warn=False)
    assert auto.moments.valid[~np.eye(B.m, dtype=bool)].all()  # every pair valid: only entries are missing
    assert auto.diagnostics["completion"] == "als" and auto.diagnostics["als_converged"]
    loglin = fit_spectral(B, completion="loglinear", warn=False)
    assert abs(spearmanr(auto.v, target).statistic - spearmanr(loglin.v, target).statistic) <= 0.02


@pytest.fixture(scope="module")
def mcar_full():
    return np.array([_mcar(s) for s in FULL])


@pytest.mark.slow
def test_mcar_sparse_full(mcar_full):
    res = mcar_full
    assert res[:, 1].max() <= 0.035
    assert res[:, 2].mean() <= 0.035 and res[:, 3].mean() <= 0.035
    assert res[:, 4].mean() >= res[:, 5].mean() + 0.005


def _mcar_spearman(seed):
    """Spearman of the spectral ranking v̂ with ψ+η−1 on the §8.10 MCAR crowd (30% of entries observed)."""
    sim = independent(m=30, n=3000, b=0.3, psi_range=(0.55, 0.85), observed=0.3, seed=seed)
    resp, B = _binary(sim)
    fit = fit_binary(B, warn=False)
    return spearmanr(fit.spectral.v, _aligned(sim, resp, "psi") + _aligned(sim, resp, "eta") - 1).statistic


def test_mcar_spearman_seeds():
    """§8.10 ranking bound as decided in issue 14 (the spec's "≥ 0.80 on every seed" fails ~1 in 3 sets of 20
    seeds for the reference estimator too), default-run version on 20 seeds: the 200-seed bounds (mean ≥ 0.92,
    ≤ 3 % of seeds below 0.80) scaled to 20 seeds — mean ≥ 0.90 (0.92 less 3 standard errors of a 20-seed mean,
    per-seed sd 0.035) and at most 1 seed below 0.80 (3 % of 20, rounded up).  Measured: mean 0.922, 1 seed
    (0.798) below."""
    sp = np.array([_mcar_spearman(s) for s in FULL])
    assert sp.mean() >= 0.90 and (sp < 0.80).sum() <= 1


@pytest.mark.slow
def test_mcar_spearman_200_seeds():
    """§8.10 ranking bound as decided in issue 14: mean Spearman ≥ 0.92 over 200 seeds and at most 3 % of the
    seeds below 0.80 (the reference estimator gives 2 %).  Measured: mean 0.929, 4 of 200 below 0.80."""
    sp = np.array([_mcar_spearman(s) for s in range(200)])
    assert sp.mean() >= 0.92 and (sp < 0.80).mean() <= 0.03


@pytest.mark.slow
def test_mcar_likelihood_ranking_every_seed(mcar_full):
    """§8.10 bound (0.80 per seed) on the likelihood ranking: EM (sml-ds) balanced accuracies started from
    i-SML.  Measured: min 0.829, mean 0.940 over these 20 seeds; 0 of 200 seeds below 0.80."""
    assert mcar_full[:, 6].min() >= 0.80
    assert mcar_full[:, 6].mean() >= mcar_full[:, 0].mean()


@pytest.mark.parametrize("seed", FAST)
def test_fixed_redundancy_does_not_fall_back(seed):
    sim = independent(m=50, n=2000, b=0.0, psi_range=(0.55, 0.85), per_item=10, seed=seed)
    resp, B = _binary(sim)
    fit = fit_binary(B, warn=False)
    assert fit.diagnostics["method_used"] == "spectral"
    assert fit.diagnostics["core_size"] == 50 and fit.spectral.core.coverage == 1.0


@pytest.mark.parametrize("seed", FAST)
def test_too_sparse_falls_back(seed):
    """§8.10 fallback trigger: 3 random annotators per item out of 100."""
    sim = independent(m=100, n=1000, b=0.0, psi_range=(0.6, 0.9), per_item=3, seed=seed)
    for name in ("sml", "isml", "sml-ds"):
        with pytest.warns(SparseOverlapWarning):
            est = create(name).fit(sim.responses)
        assert est.result_.spectral.method_used == METHOD_FALLBACK
        assert any("spectral stage not possible" in w for w in est.warnings_)
        assert est.labels_.notna().all()
        with pytest.raises(UserInputError):
            create(name, strict=True).fit(sim.responses)
