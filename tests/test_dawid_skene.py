"""Dawid–Skene EM: hand-computed case, recovery on simulated crowds, degenerate inputs, determinism."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fusion_core.methods import DawidSkene, MajorityVote, OneCoinDawidSkene, create
from fusion_core.metrics import accuracy
from fusion_core.simulate import dawid_skene

TINY = pd.DataFrame(
    {
        "task": ["i0"] * 3 + ["i1"] * 3 + ["i2"] * 3,
        "worker": ["a", "b", "c"] * 3,
        "label": [0, 0, 1, 1, 1, 1, 0, 1, 0],
    }
)


def test_one_em_iteration_matches_hand_computation():
    """MV init → one M-step → one E-step, every number derived by hand (see comments)."""
    ds = DawidSkene(max_iter=1).fit(TINY)
    # soft MV: i0 [2/3, 1/3], i1 [0, 1], i2 [2/3, 1/3]  → priors = column means
    np.testing.assert_allclose(ds.priors_.to_numpy(), [4 / 9, 5 / 9])
    # worker a said 0,1,0: true-0 row counts (4/3, 0); true-1 row counts (2/3, 1)
    np.testing.assert_allclose(ds.confusion_[0], [[1.0, 0.0], [0.4, 0.6]])
    # worker b said 0,1,1: true-0 (2/3, 2/3); true-1 (1/3, 4/3)
    np.testing.assert_allclose(ds.confusion_[1], [[0.5, 0.5], [0.2, 0.8]])
    np.testing.assert_allclose(ds.confusion_[2], [[0.5, 0.5], [0.2, 0.8]])
    # E-step on i0 (a=0, b=0, c=1): class 0 ∝ 4/9·1·.5·.5 = 1/9, class 1 ∝ 5/9·.4·.2·.8 = .32/9
    np.testing.assert_allclose(ds.probas_.loc["i0"].to_numpy(), [1 / 1.32, 0.32 / 1.32])
    np.testing.assert_allclose(ds.probas_.loc["i2"].to_numpy(), [1 / 1.32, 0.32 / 1.32])
    assert ds.probas_.loc["i1", 1] > 1 - 1e-8  # Γ_a[0, 1] = 0 (floored) rules class 0 out
    expected_ll = 2 * np.log(1.32 / 9) + np.log(4 / 9 * 1e-10 * 0.25 + 5 / 9 * 0.6 * 0.8 * 0.8)
    assert ds.loss_history_[-1] == pytest.approx(expected_ll, rel=1e-9)


def test_errors_frame_is_crowd_kit_layout():
    ds = DawidSkene().fit(TINY)
    err = ds.errors_
    assert err.index.names == ["worker", "label"] and err.columns.name == "label"
    for wi, w in enumerate(ds.workers_):
        for t in range(2):
            for r in range(2):
                assert err.loc[(w, r), t] == ds.confusion_[wi, t, r]
    # columns (true label) of each worker's block sum to 1, as in crowd-kit
    np.testing.assert_allclose(err.groupby(level="worker").sum().to_numpy(), 1.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_simulated_confusions_and_priors(seed):
    """3,000 items, 20 workers, 5 per item → ~250 responses per worker per true class, so each confusion
    entry has sampling s.d. ≤ √(.25/250) ≈ 0.032: the mean absolute error must be well under that and no
    entry may be off by more than 5 s.d. (0.16).  Priors from 3,000 items: s.d. ≈ 0.009, bound 0.03."""
    sim = dawid_skene(
        n_items=3000,
        n_workers=20,
        n_classes=3,
        responses_per_item=5,
        accuracy=(0.55, 0.9),
        class_prior=[0.5, 0.3, 0.2],
        seed=seed,
    )
    ds = DawidSkene().fit(sim.responses)
    order = sim.workers.get_indexer(ds.workers_)
    err = np.abs(ds.confusion_ - sim.confusion[order])
    assert err.mean() < 0.025
    assert err.max() < 0.16
    np.testing.assert_allclose(ds.priors_.to_numpy(), sim.class_prior, atol=0.03)
    assert ds.converged_
    assert np.all(np.diff(ds.loss_history_) >= -1e-8 * np.abs(ds.loss_history_[1:]))  # EM never decreases
    assert accuracy(ds.labels_, sim.truth) > accuracy(MajorityVote().fit(sim.responses).labels_, sim.truth)


def test_spammers_and_adversaries_are_ranked_last():
    sim = dawid_skene(n_items=2000, n_workers=25, n_classes=3, responses_per_item=6, spammers=4, adversarial=2, seed=3)
    ds = DawidSkene().fit(sim.responses)
    role = sim.role.reindex(ds.skills_.index)
    worst = ds.skills_.sort_values().index[:6]
    assert set(role[worst]) <= {"spammer", "adversarial"}


def test_one_coin_recovers_accuracies():
    sim = dawid_skene(n_items=3000, n_workers=15, n_classes=4, responses_per_item=5, symmetric_errors=True, seed=4)
    ds1 = OneCoinDawidSkene().fit(sim.responses)
    acc_true = sim.accuracy.reindex(ds1.workers_).to_numpy()
    acc_est = ds1.confusion_[:, 0, 0]
    assert np.abs(acc_est - acc_true).max() < 0.06  # ~1000 responses per worker: s.d. ≈ 0.015
    assert np.allclose(ds1.confusion_.sum(axis=2), 1)


def test_label_permutation_equivariance():
    """Renaming the classes permutes confusion rows/columns and priors; labels map through the renaming."""
    sim = dawid_skene(n_items=800, n_workers=10, n_classes=3, seed=5)
    rename = {0: "c", 1: "a", 2: "b"}  # sorted order becomes a, b, c = old 1, 2, 0
    renamed = sim.responses.assign(label=sim.responses["label"].map(rename))
    a = DawidSkene().fit(sim.responses)
    b = DawidSkene().fit(renamed)
    perm = [1, 2, 0]
    np.testing.assert_allclose(b.confusion_, a.confusion_[:, perm][:, :, perm], atol=1e-8)
    np.testing.assert_allclose(b.priors_.to_numpy(), a.priors_.to_numpy()[perm], atol=1e-8)
    assert (b.labels_ == a.labels_.map(rename)).all()


def test_deterministic_and_row_order_invariant():
    sim = dawid_skene(n_items=500, n_workers=12, n_classes=3, seed=6)
    a = DawidSkene().fit(sim.responses)
    b = DawidSkene().fit(sim.responses)
    np.testing.assert_array_equal(a.probas_.to_numpy(), b.probas_.to_numpy())
    shuffled = sim.responses.sample(frac=1.0, random_state=1)
    c = DawidSkene().fit(shuffled)
    np.testing.assert_allclose(c.probas_.loc[a.probas_.index].to_numpy(), a.probas_.to_numpy(), atol=1e-9)


@pytest.mark.parametrize("method", ["mv", "ds", "ds1"])
def test_degenerate_inputs_stay_finite(method):
    cases = {
        "all agree": pd.DataFrame({"task": [1, 1, 2, 2, 3, 3], "worker": list("ababab"), "label": [0, 0, 1, 1, 0, 0]}),
        "perfect annotator": pd.DataFrame(
            {"task": [1, 1, 1, 2, 2, 2], "worker": list("pqrpqr"), "label": [0, 1, 1, 1, 0, 0]}
        ),
        "one response": pd.DataFrame({"task": [1, 1, 2, 2, 3], "worker": list("ababc"), "label": [0, 1, 1, 1, 0]}),
    }
    for name, df in cases.items():
        est = create(method).fit(df)
        assert np.isfinite(est.probas_.to_numpy()).all(), name
        assert np.allclose(est.probas_.sum(axis=1), 1), name
        if hasattr(est, "confusion_"):
            assert np.isfinite(est.confusion_).all() and np.allclose(est.confusion_.sum(axis=2), 1), name
        assert all(np.isfinite(est.loss_history_)), name
    # only one class observed, the other declared
    one = pd.DataFrame({"task": [1, 1, 2, 2], "worker": list("abab"), "label": ["x"] * 4})
    from fusion_core import Responses

    est = create(method).fit(Responses.from_frame(one, classes=["x", "y"]))
    assert (est.labels_ == "x").all() and np.isfinite(est.probas_.to_numpy()).all()


def test_gold_labels_are_clamped_and_help():
    sim = dawid_skene(n_items=600, n_workers=8, n_classes=2, responses_per_item=3, accuracy=(0.55, 0.75), seed=7)
    gold = sim.truth.iloc[:200]
    ds = DawidSkene().fit(sim.responses, true_labels=gold)
    assert (ds.labels_.loc[gold.index] == gold).all()
    assert np.allclose(ds.probas_.loc[gold.index].max(axis=1), 1.0)
    rest = sim.truth.iloc[200:]
    assert accuracy(ds.labels_, rest) >= accuracy(DawidSkene().fit(sim.responses).labels_, rest) - 0.01


def test_init_from_posteriors_and_stopping():
    sim = dawid_skene(n_items=400, n_workers=10, n_classes=3, seed=8)
    truth_post = pd.get_dummies(sim.truth).astype(float)
    ds = DawidSkene(init=truth_post, max_iter=3, tol=0).fit(sim.responses)
    assert ds.n_iter_ == 3 and not ds.converged_ and len(ds.loss_history_) == 3
    conv = DawidSkene(tol=1e-6).fit(sim.responses)
    assert conv.converged_ and conv.n_iter_ < 500


def test_mv_tie_rule_and_weights():
    df = pd.DataFrame(
        {"task": [1, 1, 2, 2, 2], "worker": ["a", "b", "a", "b", "c"], "label": ["y", "x", "x", "y", "y"]}
    )
    mv = MajorityVote().fit(df)
    assert mv.labels_.loc[1] == "y"  # tie → the label with more votes overall (y: 3, x: 2)
    assert MajorityVote(tie_break="smallest").fit(df).labels_.loc[1] == "x"  # the manifest's rule
    np.testing.assert_allclose(mv.probas_.loc[2].to_numpy(), [1 / 3, 2 / 3])
    weighted = MajorityVote(weights=pd.Series({"a": 5.0})).fit(df)
    assert weighted.labels_.loc[2] == "x" and weighted.labels_.loc[1] == "y"
    rnd = [MajorityVote(tie_break="random", random_state=s).fit(df).labels_.loc[1] for s in range(20)]
    assert set(rnd) == {"x", "y"}


def test_sklearn_contract():
    ds = create("ds", smoothing=0.5, max_iter=50)
    assert ds.get_params()["smoothing"] == 0.5
    assert ds.fit(TINY) is ds
    assert ds.fit_predict(TINY).equals(ds.labels_)
    assert ds.fit_predict_proba(TINY).equals(ds.probas_)
    assert ds.set_params(tol=1e-3) is ds and ds.tol == 1e-3


def test_one_sided_annotators_are_flagged():
    """Labelling functions that only ever vote one class (abstentions dropped): the confusion matrices are not
    identified, so latent-class methods warn; majority vote does not."""
    import warnings

    from fusion_core.errors import AggregationWarning
    from fusion_core.methods import create

    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, 400)
    rows = []
    for w in range(8):
        fires = rng.random(400) < np.where(truth == w % 2, 0.6, 0.1)  # votes its class, mostly when right
        rows.append(pd.DataFrame({"task": np.flatnonzero(fires), "worker": f"lf{w}", "label": w % 2}))
    df = pd.concat(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        ds = create("ds").fit(df)
        mv = create("mv").fit(df)
    assert any("always give the same label" in w for w in ds.warnings_)
    assert not any("always give the same label" in w for w in mv.warnings_)
    honest = create("ds").fit(df.assign(label=np.where(rng.random(len(df)) < 0.8, df["label"], 1 - df["label"])))
    assert not any("always give the same label" in w for w in honest.warnings_)


@pytest.mark.parametrize("seeds", [range(8), pytest.param(range(200), marks=pytest.mark.slow)])
def test_restarts_keep_the_label_orientation(seeds):
    """Random restarts reach the label-swapped mirror optimum (same likelihood) on many binary crowds; the driver
    aligns every run to majority vote before comparing, so the oriented solution comes back (before: 84 of 200
    seeds returned the mirror, accuracy < 0.5; without the alignment seeds 0, 1 and 5 of the default eight do)."""
    import warnings

    from fusion_core.simulate import dawid_skene

    mirrored = 0
    for s in seeds:
        sim = dawid_skene(n_items=200, n_workers=10, n_classes=2, responses_per_item=3, seed=s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = DawidSkene(n_restarts=3, random_state=s).fit(sim.responses)
            plain = DawidSkene().fit(sim.responses)
        acc = (m.labels_ == sim.truth.reindex(m.labels_.index)).mean()
        mirrored += acc < 0.5
        assert m.log_likelihood_ >= plain.log_likelihood_ - 1e-6 * abs(plain.log_likelihood_)
    assert mirrored == 0
