"""The registered spectral methods (sml, isml, sml-ds): API, invariances (spec §8.14), warnings, real data."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import load_dataset

from fusion_core.errors import AggregationWarning
from fusion_core.methods import InformedSML, SpectralDawidSkene, SpectralMetaLearner, available, create, info
from fusion_core.methods.results import SpectralSummary
from fusion_core.methods.spectral import (
    METHOD_FALLBACK,
    METHOD_SPECTRAL,
    ClassImbalanceWarning,
    DegenerateSpectrumWarning,
    FewAnnotatorsWarning,
    SparseOverlapWarning,
)
from fusion_core.methods.spectral.outputs import RANKING_BY_EIGENVECTOR, RANKING_BY_EM
from fusion_core.metrics import accuracy, balanced_accuracy
from fusion_core.simulate.spectral import independent

NAMES = ("sml", "isml", "sml-ds")


def _fit(name, data, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        return create(name, **params).fit(data)


@pytest.fixture(scope="module")
def sim():
    return independent(m=15, n=800, b=0.3, psi_range=(0.6, 0.9), seed=7)


def test_registry_entries():
    names = {m.name for m in available()}
    assert set(NAMES) <= names
    assert info("isml").family == "spectral" and "b_method" in {p.name for p in info("isml").params}
    assert create("sml-ds").init == "isml"
    assert isinstance(create("sml"), SpectralMetaLearner)
    assert isinstance(create("isml"), InformedSML) and isinstance(create("sml-ds"), SpectralDawidSkene)


@pytest.mark.parametrize("name", NAMES)
def test_fitted_attributes_binary(sim, name):
    est = _fit(name, sim.responses)
    workers = est.workers_
    for attr in ("eigenvector_", "balanced_accuracy_", "sensitivity_", "specificity_"):
        s = getattr(est, attr)
        assert isinstance(s, pd.Series) and s.index.equals(workers)
    assert isinstance(est.class_imbalance_, float)
    assert est.eigenvalues_[0] == est.eigenvalues_.max()
    res = est.result_
    assert isinstance(res.spectral, SpectralSummary) and res.spectral.method_used == METHOD_SPECTRAL
    np.testing.assert_array_equal(res.spectral.eigenvector, est.eigenvector_.to_numpy())
    np.testing.assert_array_equal(res.spectral.eigenvalues, est.eigenvalues_)
    assert res.spectral.class_imbalance == est.class_imbalance_ and res.spectral.positive_label == 1
    # annotator columns: exactly one value per annotator, plain titles; never eigenvalues or a ranking
    cols = {c.key: c for c in res.annotator_columns}
    assert list(cols) == ["sensitivity", "specificity", "balanced_accuracy"]
    assert (
        cols["sensitivity"].title == "sensitivity (detects 1)"
        and cols["specificity"].title == "specificity (detects 0)"
    )
    for key, col in cols.items():
        assert col.values.shape == (len(workers),)
        np.testing.assert_allclose(col.values, getattr(est, key + "_").to_numpy())
    assert est.confusion_.shape == (15, 2, 2)
    np.testing.assert_allclose(est.confusion_.sum(axis=2), 1.0)
    assert est.errors_.shape == (30, 2) and est.skills_.index.equals(workers)
    # recovered parameters are close to the truth (n = 800, 15 annotators)
    truth_sens = sim.psi.reindex(workers)
    assert np.mean(np.abs(est.sensitivity_ - truth_sens)) < 0.06
    assert abs(est.class_imbalance_ - 0.3) < 0.1
    assert accuracy(est.labels_, sim.truth) > 0.95
    # ranking by the eigenvector follows the true balanced accuracy
    ba_true = sim.balanced_accuracy.reindex(workers)
    assert est.eigenvector_.corr(ba_true, method="spearman") > 0.8
    assert est.positive_label_ == 1
    # ranking_: by v̂ (spectral core) for sml/isml; by the EM balanced accuracy, over every annotator, for sml-ds
    order = est.ranking_
    if name == "sml-ds":
        assert len(order) == len(workers)
        ba = est.balanced_accuracy_.reindex(order).to_numpy()
        assert np.all(np.diff(ba) <= 0)
        assert est.result_.ranking.source == RANKING_BY_EM
    else:
        assert np.all(np.diff(est.eigenvector_.reindex(order).to_numpy()) <= 0)
        assert est.result_.ranking.source == RANKING_BY_EIGENVECTOR
    assert pd.Series(np.arange(len(order)), index=order).corr(-ba_true.reindex(order), method="spearman") > 0.8


def test_sml_posterior_is_hard_and_score_kept(sim):
    est = _fit("sml", sim.responses)
    p = est.probas_.to_numpy()
    assert set(np.unique(p)) <= {0.0, 1.0}
    score = est.result_.details["score"]
    assert np.array_equal(est.labels_.to_numpy() == 1, score > 0)


def test_any_two_label_values_and_positive_label(sim):
    """Binary data coded with arbitrary values; positive_label swaps ψ↔η and negates b (§8.14, P8)."""
    df = sim.responses.copy()
    df["label"] = df["label"].map({0: "no", 1: "yes"})
    a = _fit("isml", df, positive_label="yes")
    b = _fit("isml", df, positive_label="no")
    default = _fit("isml", df)
    assert default.positive_label_ == "yes"  # second in label order
    assert a.class_imbalance_ == pytest.approx(-b.class_imbalance_, abs=1e-6)
    np.testing.assert_allclose(a.sensitivity_, b.specificity_, atol=1e-6)
    np.testing.assert_allclose(a.eigenvector_, b.eigenvector_, atol=1e-9)
    assert (a.labels_ == b.labels_).all()


def test_permutation_invariance(sim):
    """§8.14: relabelling/reordering annotators and items leaves estimates and labels unchanged."""
    base = _fit("isml", sim.responses)
    df = sim.responses.sample(frac=1.0, random_state=3).copy()
    wmap = {w: f"z{99 - int(w[1:]):03d}" for w in sim.workers}
    tmap = {t: f"item{(int(t[1:]) * 7919) % 100000:06d}" for t in sim.truth.index}
    df["worker"] = df["worker"].map(wmap)
    df["task"] = df["task"].map(tmap)
    perm = _fit("isml", df)
    back = perm.eigenvector_.rename(index={v: k for k, v in wmap.items()}).reindex(base.workers_)
    np.testing.assert_allclose(back, base.eigenvector_, atol=1e-9)
    sens = perm.sensitivity_.rename(index={v: k for k, v in wmap.items()}).reindex(base.workers_)
    np.testing.assert_allclose(sens, base.sensitivity_, atol=1e-9)
    assert perm.class_imbalance_ == pytest.approx(base.class_imbalance_, abs=1e-9)
    lab = perm.labels_.rename(index={v: k for k, v in tmap.items()}).reindex(base.labels_.index)
    assert (lab == base.labels_).all()


def test_constant_annotator_changes_nothing(sim):
    """§8.14: adding an annotator whose labels are all equal leaves the spectral outputs unchanged."""
    extra = pd.DataFrame({"task": sim.truth.index, "worker": "const", "label": 1})
    df = pd.concat([sim.responses, extra], ignore_index=True)
    for name in ("sml", "isml"):
        a, b = _fit(name, sim.responses), _fit(name, df)
        assert b.eigenvector_["const"] == 0.0
        np.testing.assert_allclose(b.eigenvector_.drop("const"), a.eigenvector_, atol=1e-12)
        assert (a.labels_ == b.labels_).all()
    a, b = _fit("isml", sim.responses), _fit("isml", df)
    assert a.class_imbalance_ == pytest.approx(b.class_imbalance_, abs=1e-9)
    a, b = _fit("sml-ds", sim.responses), _fit("sml-ds", df)
    np.testing.assert_allclose(b.sensitivity_.drop("const"), a.sensitivity_, atol=1e-3)


def test_multiclass_attributes():
    from fusion_core.simulate.dawid_skene import dawid_skene

    s = dawid_skene(n_items=3000, n_workers=8, n_classes=3, responses_per_item=8, accuracy=(0.6, 0.9), seed=1)
    for name in NAMES:
        est = _fit(name, s.responses)
        assert est.sensitivity_.shape == (8, 3) and est.eigenvector_.shape == (8, 3)
        assert isinstance(est.class_imbalance_, pd.Series) and len(est.class_imbalance_) == 3
        assert est.balanced_accuracy_.shape == (8,)
        cols = est.result_.annotator_columns
        assert [c.title for c in cols] == ["balanced accuracy"] + [f"accuracy on class {c}" for c in range(3)]
        assert all(c.values.shape == (8,) for c in cols)
        np.testing.assert_allclose(cols[1].values, est.sensitivity_[0].to_numpy())
        assert est.result_.spectral.positive_label is None and est.result_.ranking is None
        np.testing.assert_allclose(est.confusion_.sum(axis=2), 1.0, atol=1e-9)
        assert accuracy(est.labels_, s.truth) > 0.9


def test_few_annotators_warn():
    s = independent(m=4, n=2000, b=0.0, psi_range=(0.7, 0.9), seed=1)
    with pytest.warns(FewAnnotatorsWarning):
        est = create("isml").fit(s.responses)
    assert any("only 4 annotators" in w for w in est.warnings_)
    s2 = independent(m=2, n=500, b=0.0, psi_range=(0.7, 0.9), seed=1)
    with pytest.warns(SparseOverlapWarning):
        est2 = create("sml").fit(s2.responses)
    assert est2.result_.spectral.method_used == METHOD_FALLBACK


def test_random_annotators_warn_degenerate():
    """P5: random guessers give a leading eigenvalue at the noise level; informative ones do not."""
    s = independent(m=10, n=3000, b=0.0, psi=np.full(10, 0.5), eta=np.full(10, 0.5), seed=2)
    with pytest.warns(DegenerateSpectrumWarning):
        est = create("sml").fit(s.responses)
    assert any("noise level" in w for w in est.warnings_)
    good = independent(m=10, n=3000, b=0.0, psi_range=(0.6, 0.8), seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateSpectrumWarning)
        create("sml").fit(good.responses)


def test_extreme_imbalance_warns():
    s = independent(m=10, n=5000, b=0.95, psi_range=(0.7, 0.9), seed=3)
    with pytest.warns(ClassImbalanceWarning):
        est = create("isml").fit(s.responses)
    assert est.class_imbalance_ > 0.85


# --------------------------------------------------------------------------------- real data
REAL = ["rte", "temp", "bluebirds", "possent", "product"]


@pytest.mark.parametrize("name", REAL)
def test_real_data_smoke(name):
    """§8.13 loose gates: SML ≥ MV − 0.01 and EM ≥ MV − 0.01 (accuracy on gold items)."""
    answers, truth = load_dataset(name)
    mv = accuracy(_fit("mv", answers).labels_, truth)
    sml = accuracy(_fit("sml", answers).labels_, truth)
    em = accuracy(_fit("sml-ds", answers).labels_, truth)
    assert sml >= mv - 0.01 and em >= mv - 0.01


def test_temp_labels_one_two():
    """TEMP is coded 1/2: positive class is 2 by default; naming 1 flips b and swaps ψ/η."""
    answers, truth = load_dataset("temp")
    a = _fit("isml", answers)
    b = _fit("isml", answers, positive_label=1)
    assert a.positive_label_ == 2 and b.positive_label_ == 1
    assert a.class_imbalance_ == pytest.approx(-b.class_imbalance_, abs=1e-6)
    both = a.sensitivity_.notna()
    np.testing.assert_allclose(a.sensitivity_[both], b.specificity_[both], atol=1e-6)
    assert balanced_accuracy(a.labels_.reindex(truth.index).to_numpy(), truth.to_numpy()) > 0.9


# ------------------------------------------------------------------------------ robustness
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fusion_core.errors import UserInputError  # noqa: E402

_rows = st.lists(
    st.tuples(st.integers(0, 40), st.sampled_from([f"w{i}" for i in range(8)]), st.sampled_from(["a", "b", "c"])),
    min_size=1,
    max_size=250,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_rows, st.sampled_from(NAMES), st.booleans())
def test_random_small_data_fit_or_explain(data, name, binary):
    """Tiny, sparse, degenerate inputs: a finite result (possibly the documented fallback) or a UserInputError."""
    df = pd.DataFrame(data, columns=["task", "worker", "label"])
    if binary:
        df["label"] = df["label"].replace({"c": "a"})
    try:
        est = _fit(name, df)
    except UserInputError:
        assert df["label"].nunique() < 2 or df["worker"].nunique() < 2
        return
    assert np.isfinite(est.probas_.to_numpy()).all()
    np.testing.assert_allclose(est.probas_.sum(axis=1), 1.0)
    assert est.labels_.index.equals(est.probas_.index)


@pytest.mark.parametrize(
    "name,params",
    [
        ("isml", {"b_method": "none"}),
        ("sml", {"n_min": 1}),
        ("sml", {"completion": "svd"}),
        ("isml", {"b": 1.0}),
        ("isml", {"b": "half"}),
        ("isml", {"positive_label": [0, 1]}),
        ("sml-ds", {"max_iter": 0}),
        ("sml-ds", {"init": "ds"}),
        ("sml-ds", {"smoothing": -1.0}),
    ],
)
def test_out_of_range_parameters_refused(name, params):
    """Declared parameters (fusion_core.methods.params): each bad value names the parameter and what it accepts."""
    with pytest.raises(UserInputError, match=next(iter(params))):
        create(name, **params)


def test_multiclass_needs_class_imbalance():
    """One-vs-all needs b for every class: sml with b_method='none' is refused with a sentence (it used to crash
    with a TypeError), as is a known b."""
    from fusion_core.simulate.dawid_skene import dawid_skene

    s = dawid_skene(n_items=300, n_workers=6, n_classes=3, seed=0)
    with pytest.raises(UserInputError, match="b_method"):
        create("sml", b_method="none").fit(s.responses)
    with pytest.raises(UserInputError, match="binary data only"):
        create("isml", b=0.2).fit(s.responses)


def test_annotator_column_must_be_one_value_per_annotator():
    """A matrix (e.g. eigenvalues of one-vs-all, or per-class sensitivities) can never become an annotator column."""
    from fusion_core.methods.results import AnnotatorColumn

    with pytest.raises(ValueError, match="one value per annotator"):
        AnnotatorColumn("sensitivity", "sensitivity", np.zeros((8, 3)))
