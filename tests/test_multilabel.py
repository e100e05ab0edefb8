"""multilabel-em (spec multilabel.md §12 oracles ML1–ML19; many-seed versions are marked slow)."""

from __future__ import annotations

import warnings
from functools import cache

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

from fusion_core.data.multilabel import MultiLabelResponses, parse_multilabel
from fusion_core.methods.heldout import compare
from fusion_core.errors import UserInputError
from fusion_core.methods import DawidSkene, available
from fusion_core.methods.multilabel import (
    MultiLabelEM,
    MultiLabelModel,
    NoiseState,
    admissible_sets,
    flip_to_mixture,
    mixture_to_flip,
    multilabel_metrics,
    q_flip,
    q_mixture,
)
from fusion_core.simulate.multilabel import multilabel_crowd


def quiet_fit(est, data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(data, **kw)


@cache
def s1(seed: int):
    return multilabel_crowd(seed=seed)


def _rates(model, sim):
    J, C = len(model.workers_), len(model.classes_)
    fr = model.flip_rates_
    e0 = fr["false_positive"].to_numpy().reshape(J, C)
    e1 = fr["miss"].to_numpy().reshape(J, C)
    wi = model.workers_.get_indexer(sim.workers)
    ci = model.classes_.get_indexer(sim.labels)
    return e0[np.ix_(wi, ci)], e1[np.ix_(wi, ci)]


# ------------------------------------------------------------------ ML1 parsing
def test_ml1_formats_a_and_b_agree():
    a = pd.DataFrame(
        {
            "task": ["i1", "i1", "i1", "i2", "i2"],
            "worker": ["w1", "w2", "w3", "w1", "w3"],
            "label": ["cat|dog", "cat", "", " dog ", "cat||dog|cat"],
        }
    )
    da = parse_multilabel(a)
    assert list(da.labels) == ["cat", "dog"]
    assert da.X.tolist() == [[True, True], [True, False], [False, False], [False, True], [True, True]]
    assert da.report["repeated_labels_in_set"] == 1
    b = pd.DataFrame(
        {
            "task": ["i1", "i1", "i1", "i1", "i1", "i2", "i2", "i2", "i2"],
            "worker": ["w1", "w1", "w2", "w2", "w3", "w1", "w1", "w3", "w3"],
            "label": ["cat", "dog", "cat", "dog", "cat", "dog", "dog", "cat", "dog"],
            "present": [1, "yes", "true", 0, 0, 1, 1, "1", "True"],
        }
    )
    with pytest.warns(Warning, match="partial judgments"):
        db = parse_multilabel(b)
    assert db.report["collapsed_duplicates"] == 1
    fa = pd.DataFrame(
        {"t": da.items.take(da.item), "w": da.workers.take(da.worker), "b": [tuple(r) for r in da.X]}
    ).sort_values(["t", "w"])
    fb = pd.DataFrame(
        {"t": db.items.take(db.item), "w": db.workers.take(db.worker), "b": [tuple(r) for r in db.X]}
    ).sort_values(["t", "w"])
    assert fa.values.tolist() == fb.values.tolist()
    assert da.O is None and db.O is None
    # separator, lists, a user vocabulary with an unreported label
    c = pd.DataFrame({"task": [1, 1], "worker": ["a", "b"], "label": [["x", "y"], ("y",)]})
    dc = parse_multilabel(c, labels=["z"])
    assert list(dc.labels) == ["z", "x", "y"] and dc.X.tolist() == [[False, True, True], [False, False, True]]
    d = pd.DataFrame({"task": [1, 1], "worker": ["a", "b"], "label": ["x;y", "y"]})
    assert parse_multilabel(d, sep=";").X.tolist() == [[True, True], [False, True]]
    # round trip A → frame → A
    assert parse_multilabel(da.to_frame()).X.tolist() == da.X.tolist()


def test_ml1_errors_and_open_world():
    nan = pd.DataFrame({"task": [1, 2], "worker": ["a", "b"], "label": ["x", np.nan]})
    with pytest.raises(UserInputError, match=r"rows \[1\]: label set missing"):
        parse_multilabel(nan)
    conflict = pd.DataFrame({"task": [1, 1], "worker": ["a", "a"], "label": ["x", "x"], "present": [1, 0]})
    with pytest.raises(UserInputError, match="conflicting"):
        parse_multilabel(conflict)
    badp = pd.DataFrame({"task": [1], "worker": ["a"], "label": ["x"], "present": ["maybe"]})
    with pytest.raises(UserInputError, match="row 0"):
        parse_multilabel(badp)
    part = pd.DataFrame({"task": [1, 1, 1], "worker": ["a", "a", "b"], "label": ["x", "y", "x"], "present": [1, 0, 1]})
    dm = parse_multilabel(part, unlisted="missing")
    assert dm.O.tolist() == [[True, True], [True, False]]
    with pytest.warns(Warning, match="partial judgments"):
        parse_multilabel(part, unlisted="absent")


# ------------------------------------------------------------------ ML2, ML3 thesis noise models
def test_ml2_ml3_noise_models():
    rng = np.random.default_rng(2)
    for _ in range(50):
        beta = rng.uniform(size=3)
        bL = np.prod(beta[:2])  # β_L for L = {1, 2}
        eps, r = rng.uniform(), rng.uniform()
        e0, e1 = rng.uniform(0, 0.5), rng.uniform(0, 0.5)
        for q in (q_mixture(bL, eps, r), q_flip(bL, e0, e1)):
            assert 0 <= q <= 1
        assert abs(q_mixture(1.0, eps, r) - eps * r) < 1e-12  # ∅: β = 1
        assert abs(q_flip(1.0, e0, e1) - e0) < 1e-12
        f0, f1 = mixture_to_flip(eps, r)
        assert abs(q_mixture(bL, eps, r) - q_flip(bL, f0, f1)) < 1e-12
        back = flip_to_mixture(f0, f1)
        assert abs(back[0] - eps) < 1e-12 and abs(back[1] - r) < 1e-12
        # OR of two Boolean sources: P(u_L = 1) = p1 + p2 − p1 p2 with p = 1 − β
        p1, p2 = 1 - beta[0], 1 - beta[1]
        assert abs((1 - bL) - (p1 + p2 - p1 * p2)) < 1e-12
    assert np.isnan(flip_to_mixture(0.0, 0.0)[1])
    with pytest.raises(UserInputError):
        flip_to_mixture(0.7, 0.6)


# ------------------------------------------------------------------ ML4 efficient likelihood
def test_ml4_efficient_likelihood_equals_direct_product():
    rng = np.random.default_rng(4)
    C, R, N, J = 4, 60, 12, 5
    item = rng.integers(0, N, R)
    item[:N] = np.arange(N)
    worker = rng.integers(0, J, R)
    X = rng.uniform(size=(R, C)) < 0.4
    O = rng.uniform(size=(R, C)) > 0.3
    d = MultiLabelResponses(item, worker, X, O, pd.Index(range(N)), pd.Index(range(J)), pd.Index(list("abcd")))
    Z = admissible_sets(C, C, True)
    model = MultiLabelModel(
        d, granularity="annotator_label", noise="flip", Z=Z, prior="uniform", alpha=0.01, kappa=0.0, factorised=False
    )
    st = NoiseState(
        rng.uniform(0.01, 0.4, J * C), rng.uniform(0.01, 0.4, J * C), np.full(len(Z), -np.log(len(Z))), None
    )
    B, D = model.scatter(st)
    fast = B[:, None] + D @ Z.T.astype(float)
    e0, e1 = st.eps0.reshape(J, C), st.eps1.reshape(J, C)
    direct = np.zeros((N, len(Z)))
    for s, z in enumerate(Z):
        q = np.where(z[None, :], 1 - e1[worker], e0[worker])
        lp = np.where(X, np.log(q), np.log1p(-q)) * O
        direct[:, s] = np.bincount(item, weights=lp.sum(axis=1), minlength=N)
    assert np.max(np.abs(fast - direct)) < 1e-10


# ------------------------------------------------------------------ ML7 monotonicity, ML8 M-step
@pytest.mark.parametrize("noise", ["flip", "mixture", "symmetric"])
def test_ml7_monotone(noise):
    sim = s1(0)
    m = quiet_fit(MultiLabelEM(noise=noise, granularity="annotator_label", max_degree=2), sim.responses)
    tr = np.asarray(m.loss_history_)
    assert len(tr) > 3
    assert np.all(np.diff(tr) >= -1e-9 * np.abs(tr[1:]))


def test_ml8_mstep_optimality():
    rng = np.random.default_rng(8)
    for _ in range(20):
        n11, n10, n01, n00 = rng.integers(0, 50, 4).astype(float)
        a = 0.01

        def q(e):
            e0, e1 = e
            return -(
                (n11 + a) * np.log(1 - e1)
                + (n10 + a) * np.log(e1)
                + (n01 + a) * np.log(e0)
                + (n00 + a) * np.log(1 - e0)
            )

        e1 = (n10 + a) / (n11 + n10 + 2 * a)
        e0 = (n01 + a) / (n01 + n00 + 2 * a)
        res = minimize(
            q, [0.3, 0.3], bounds=[(1e-9, 1 - 1e-9)] * 2, method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12}
        )
        assert q([e0, e1]) <= res.fun + 1e-8
    # mixture boundary: a 'pure guesser' cell (ε0 + ε1 > 1) gets ε = 1 and r = its report rate
    X = np.array([[True], [False], [True], [True]])
    d = MultiLabelResponses(
        np.array([0, 1, 2, 3]), np.zeros(4, int), X, None, pd.Index(range(4)), pd.Index(["w"]), pd.Index(["c"])
    )
    model = MultiLabelModel(
        d,
        granularity="global",
        noise="mixture",
        Z=admissible_sets(1, 1),
        prior="uniform",
        alpha=0.0,
        kappa=0.0,
        factorised=False,
    )
    m = np.array([[0.0], [1.0], [0.0], [0.0]])  # reports mostly where the label is believed absent
    e0, e1 = model.m_noise(m)
    assert abs(e0[0] + e1[0] - 1) < 1e-9 and abs(e0[0] - 0.75) < 1e-9


# ------------------------------------------------------------------ ML9, ML10 reductions to binary DS
def _binary_crowd(seed=9, N=300, J=8):
    rng = np.random.default_rng(seed)
    y = rng.uniform(size=N) < 0.4
    e0 = rng.uniform(0.05, 0.3, J)
    e1 = rng.uniform(0.05, 0.4, J)
    item = np.repeat(np.arange(N), 4)
    wk = np.argsort(rng.uniform(size=(N, J)), axis=1)[:, :4].ravel()
    u = rng.uniform(size=len(item))
    x = np.where(y[item], u >= e1[wk], u < e0[wk])
    return item, wk, x


def test_ml9_binary_special_case_equals_ds():
    item, wk, x = _binary_crowd()
    ml_df = pd.DataFrame({"task": item, "worker": wk, "label": np.where(x, "c", "")})
    ds_df = pd.DataFrame({"task": item, "worker": wk, "label": x.astype(int)})
    n = 25
    ml = quiet_fit(
        MultiLabelEM(granularity="annotator", max_degree=1, prior="uniform", alpha=0.01, tol=0.0, max_iter=n), ml_df
    )
    ds = DawidSkene(smoothing=0.01, estimate_priors=False, tol=0.0, max_iter=n).fit(ds_df)
    assert np.max(np.abs(ml.probas_["c"].to_numpy() - ds.probas_[1].to_numpy())) < 1e-8
    fr = ml.flip_rates_.xs("c", level="label")
    assert np.max(np.abs(fr["false_positive"].to_numpy() - ds.confusion_[:, 0, 1])) < 1e-8
    assert np.max(np.abs(fr["miss"].to_numpy() - ds.confusion_[:, 1, 0])) < 1e-8
    assert np.max(np.abs(np.asarray(ml.loss_history_) - np.asarray(ds.loss_history_))) < 1e-8 * abs(
        ds.loss_history_[-1]
    )


def test_ml10_factorisation():
    sets = [_binary_crowd(seed=s) for s in (1, 2, 3)]
    item, wk, _ = sets[0]
    labs = ["a", "b", "c"]
    # same (item, worker) pairs for the three labels: draw label bits per crowd on the pairs of crowd 0
    bits = []
    for c, s in enumerate((1, 2, 3)):
        r = np.random.default_rng(s)
        y = r.uniform(size=300) < 0.3 + 0.1 * c
        e0, e1 = r.uniform(0.05, 0.3, 8), r.uniform(0.05, 0.4, 8)
        u = r.uniform(size=len(item))
        bits.append(np.where(y[item], u >= e1[wk], u < e0[wk]))
    bits = np.column_stack(bits)
    ml_df = pd.DataFrame({"task": item, "worker": wk, "label": ["|".join(np.array(labs)[row]) for row in bits]})
    kw = {"granularity": "annotator_label", "admissible": "all", "prior": "product", "tol": 0.0, "max_iter": 40}
    fac = quiet_fit(MultiLabelEM(**kw), ml_df)
    enum = quiet_fit(MultiLabelEM(factorize=False, **kw), ml_df)
    assert np.max(np.abs(fac.probas_.to_numpy() - enum.probas_.to_numpy())) < 1e-10
    for c, lab in enumerate(labs):
        ds = DawidSkene(smoothing=0.01, tol=0.0, max_iter=40).fit(
            pd.DataFrame({"task": item, "worker": wk, "label": bits[:, c].astype(int)})
        )
        assert np.max(np.abs(fac.probas_[lab].to_numpy() - ds.probas_[1].to_numpy())) < 1e-6


# ------------------------------------------------------------------ ML11, ML12 recovery
def test_ml11_perfect_annotators():
    sim = multilabel_crowd(n_items=500, seed=11, eps0_range=(0.0, 0.0), eps1_range=(0.0, 0.0))
    m = quiet_fit(MultiLabelEM(granularity="annotator_label", max_degree=2), sim.responses)
    assert (m.labels_.reindex(sim.truth.index) == sim.truth).all()
    p = m.probas_.to_numpy()
    assert np.all((p < 1e-6) | (p > 1 - 1e-6))


def _recovery(seed):
    sim = s1(seed)
    m = quiet_fit(MultiLabelEM(granularity="annotator_label", max_degree=2), sim.responses)
    br = quiet_fit(MultiLabelEM(granularity="annotator_label", admissible="all", prior="product"), sim.responses)
    d = parse_multilabel(sim.responses)
    share = pd.DataFrame(d.X.astype(float)).groupby(d.item).mean().to_numpy()
    lab = np.asarray(d.labels, dtype=object)
    mv = pd.Series([tuple(lab[row]) for row in share > 0.5], index=d.items)
    truth = sim.truth
    acc = (m.labels_.reindex(truth.index) == truth).mean()
    acc_br = (br.labels_.reindex(truth.index) == truth).mean()
    acc_mv = (mv.reindex(truth.index) == truth).mean()
    e0, e1 = _rates(m, sim)
    return acc, acc_br, acc_mv, np.abs(e0 - sim.eps0).mean(), np.abs(e1 - sim.eps1).mean()


@pytest.mark.parametrize("seeds", [range(2), pytest.param(range(5), marks=pytest.mark.slow)])
def test_ml12_recovery(seeds):
    for s in seeds:
        acc, acc_br, acc_mv, d0, d1 = _recovery(s)
        assert acc >= 0.84 and acc >= acc_mv + 0.08 and acc >= acc_br + 0.03
        assert d0 <= 0.03 and d1 <= 0.07


@pytest.mark.parametrize("seeds", [range(1), pytest.param(range(5), marks=pytest.mark.slow)])
def test_ml13_annealing_equals_em_on_easy_data(seeds):
    for s in seeds:
        sim = s1(s)
        em = quiet_fit(MultiLabelEM(granularity="annotator_label", max_degree=2), sim.responses)
        da = quiet_fit(MultiLabelEM(granularity="annotator_label", max_degree=2, anneal="default"), sim.responses)
        assert (em.labels_ == da.labels_).mean() >= 0.995
        assert abs(em.log_likelihood_ - da.log_likelihood_) <= 1e-6 * abs(em.log_likelihood_)
        assert da.result_.annealing.T0 in (2.0, 4.0, 8.0) and em.result_.annealing is None
        assert max(da.temperatures_) == da.result_.annealing.T0 and da.temperatures_[-1] == 1.0


# ------------------------------------------------------------------ ML14, ML15 held-out selection
GRANS = ["global", "label", "annotator", "annotator_label"]


def _select(truth, seed, grans=GRANS):
    sim = multilabel_crowd(noise=truth, seed=seed)
    cands = {g: MultiLabelEM(granularity=g, max_degree=2) for g in grans}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table, chosen, _ = compare(cands, sim.responses, frac=0.1, n_splits=3, random_state=0)
    return table.set_index("method")["score"], chosen


@pytest.mark.slow
def test_ml14_heldout_selects_true_granularity_many():
    hits = 0
    for truth in ("global", "annotator", "annotator_label"):
        for seed in (0, 1):
            sc, chosen = _select(truth, seed)
            hits += chosen == truth
            if truth == "annotator":
                assert sc["annotator"] >= sc["global"] + 0.03 and sc["annotator"] >= sc["annotator_label"] + 0.02
            if truth == "annotator_label":
                assert sc["annotator_label"] >= sc["annotator"] + 0.02
    assert hits >= 5


def test_ml14_heldout_selects_annotator_granularity():
    sc, chosen = _select("annotator", 0, grans=["global", "annotator", "annotator_label"])
    assert chosen == "annotator"
    assert sc["annotator"] >= sc["global"] + 0.03 and sc["annotator"] >= sc["annotator_label"] + 0.02


def test_ml15_item_noise_overfits():
    sc, chosen = _select("global", 0, grans=["global", "item"])
    assert chosen == "global"
    assert sc["item"] <= sc["global"] - 0.3


# ------------------------------------------------------------------ ML18 metrics, ML19 warnings, outputs
def test_ml18_metrics_hand_made():
    truth = pd.Series([("a",), ("a", "b"), (), ("b",)], index=[1, 2, 3, 4])
    pred = pd.Series([("a",), ("a",), ("b",), ("b",)], index=[1, 2, 3, 4])
    r = multilabel_metrics(pred, truth, labels=["a", "b"])
    assert r["exact_set_accuracy"] == 0.5
    assert r["hamming_loss"] == 2 / 8
    # a: tp 2, fp 0, fn 0 → 1; b: tp 1, fp 1, fn 1 → 0.5
    assert r["per_label_f1"] == {"a": 1.0, "b": 0.5}
    assert r["macro_f1"] == 0.75
    # per-set recall: 1, 0.5, 1 (empty truth), 1 → mean 0.875
    assert abs(r["ber"] - 0.125) < 1e-12


def test_ml19_warnings():
    sim = multilabel_crowd(n_items=300, n_labels=3, n_workers=10, seed=19)
    df = sim.responses.copy()
    m = quiet_fit(MultiLabelEM(max_degree=2), df, labels=["L0", "L1", "L2", "ghost"])
    assert any("'ghost' is never reported" in w for w in m.warnings_)
    const = df.copy()
    sel = const["worker"] == "w0"
    const.loc[sel, "label"] = const.loc[sel, "label"].map(
        lambda s: "|".join(sorted(set(filter(None, s.split("|"))) | {"L2"}))
    )
    m2 = quiet_fit(MultiLabelEM(max_degree=3), const)
    assert any("constant" in w and "'w0'/'L2'" in w for w in m2.warnings_)
    # mirror: true sets are {x} or {y}; annotators report x correctly and y inverted
    rng = np.random.default_rng(0)
    N = 200
    has_x = rng.uniform(size=N) < 0.5
    rows = []
    for w in range(5):
        noise = rng.uniform(size=N) < 0.05
        rep_x = has_x ^ noise
        rep_y = has_x  # inverted meaning of y
        rows += [(i, f"w{w}", "|".join([v for v, b in (("x", rep_x[i]), ("y", rep_y[i])) if b])) for i in range(N)]
    mir = pd.DataFrame(rows, columns=["task", "worker", "label"])
    m3 = quiet_fit(MultiLabelEM(max_degree=1, include_empty=False, granularity="annotator_label"), mir)
    # the two readings (x accurate / y inverted, or the reverse) have equal likelihood; either label is flagged
    flagged = [w for w in m3.warnings_ if "inverted" in w]
    assert len(flagged) == 1 and ("'y'" in flagged[0] or "'x'" in flagged[0])


def test_outputs_and_registry():
    sim = multilabel_crowd(n_items=400, n_labels=4, n_workers=12, seed=3)
    m = quiet_fit(MultiLabelEM(max_degree=2), sim.responses)
    assert m.probas_.shape == (400, 4) and list(m.probas_.columns) == list(m.classes_)
    assert all(isinstance(v, tuple) for v in m.labels_)
    assert m.result_.details["flip_rates"].shape == (12, 4, 2)
    assert m.flip_rates_.index.names == ["worker", "label"]
    assert abs(m.set_prior_.sum() - 1) < 1e-9
    assert (m.top_sets_.groupby("task")["probability"].sum() <= 1 + 1e-9).all()
    assert m.get_params()["granularity"] == "annotator"
    names = [i.name for i in available(("plain",))]
    assert "multilabel-em" not in names and "multilabel-em" in [i.name for i in available()]
    with pytest.raises(UserInputError):
        MultiLabelEM(granularity="bogus").fit(sim.responses)
    with pytest.raises(UserInputError, match="product"):
        MultiLabelEM(prior="product").fit(sim.responses)


# ------------------------------------------------------------------ gold label sets (issue 10: clamped, never ignored)
def test_gold_label_sets_are_clamped():
    sim = multilabel_crowd(n_items=300, n_labels=4, n_workers=8, seed=5)
    df = sim.responses
    gold = sim.truth.iloc[:60]
    wrong = pd.Series([("L0", "L2")] * len(gold), index=gold.index)  # contradicts the crowd: must still win
    m = quiet_fit(MultiLabelEM(max_degree=2, tol=0.0, max_iter=40), df, true_labels=wrong)
    assert (m.labels_.loc[wrong.index] == ("L0", "L2")).all()
    assert (m.probas_.loc[wrong.index].to_numpy() == [1.0, 0.0, 1.0, 0.0]).all()
    assert (m.top_sets_.query("rank == 1").set_index("task").loc[wrong.index, "probability"] == 1.0).all()
    tr = np.asarray(m.loss_history_)
    assert np.all(np.diff(tr) >= -1e-9 * np.abs(tr[1:]))  # still (MAP-)EM with the gold items observed
    plain = quiet_fit(MultiLabelEM(max_degree=2), df)
    honest = quiet_fit(MultiLabelEM(max_degree=2), df, true_labels=gold.map(lambda s: "|".join(s)))  # format A text
    rest = sim.truth.index[60:]
    acc = lambda model: (model.labels_.reindex(rest) == sim.truth.reindex(rest)).mean()
    assert acc(honest) >= acc(plain) - 0.01
    # the factorised path clamps the label bits
    kw = {"admissible": "all", "prior": "product", "granularity": "annotator_label"}
    f = quiet_fit(MultiLabelEM(**kw), df, true_labels=wrong)
    assert (f.probas_.loc[wrong.index].to_numpy() == [1.0, 0.0, 1.0, 0.0]).all()
    with pytest.raises(UserInputError, match="not admissible"):
        MultiLabelEM(max_degree=1).fit(df, true_labels=pd.Series([("L0", "L1")], index=[gold.index[0]]))
    with pytest.raises(UserInputError, match="not in the responses"):
        MultiLabelEM(max_degree=1).fit(df, true_labels=pd.Series([("zzz",)], index=[gold.index[0]]))
