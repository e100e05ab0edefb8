"""Checks every registered method must pass (the estimator contract), run over the registry so a new method is
checked without writing a test: finite probabilities summing to 1, determinism under a seed, row-order invariance,
label-renaming invariance, ``sklearn.base.clone``, out-of-range parameters refused, gold honoured (or refused
clearly), non-convergence warned."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fusion_core.errors import ConvergenceWarning, UserInputError
from fusion_core.methods import available, create
from fusion_core.methods.params import Param

METHODS = [m.name for m in available()]


@dataclass
class Case:
    """Data a method can fit: the long table plus its extra inputs, and the true label of some items."""

    df: pd.DataFrame
    kwargs: dict[str, Any]
    truth: pd.Series


def _plain(seed: int = 0) -> Case:
    from fusion_core.simulate import dawid_skene

    sim = dawid_skene(
        n_items=150, n_workers=8, n_classes=3, responses_per_item=6, labels=["cat", "dog", "emu"], seed=seed
    )
    return Case(sim.responses, {}, sim.truth)


def _sequence() -> Case:
    from fusion_core.simulate.sequential import hmm_chain

    sim = hmm_chain(n_sequences=12, length=10, n_classes=3, n_workers=5, n_good=4, accuracy=(0.6, 0.8), seed=0)
    return Case(sim.responses, {}, sim.truth)


def _graph() -> Case:
    from fusion_core.simulate.graph import sbm

    sim = sbm(n_items=150, n_classes=3, n_workers=6, accuracy=(0.5, 0.7), seed=0)
    return Case(sim.responses, {"graph": sim.edges}, sim.truth)


def _context() -> Case:
    from fusion_core.simulate.context import table1

    sim = table1(n_annotators=4, n_items=200, seed=3)
    return Case(sim.responses[["task", "worker", "label"]], {"context": sim.context}, sim.truth)


def _multilabel() -> Case:
    from fusion_core.simulate.multilabel import multilabel_crowd

    sim = multilabel_crowd(n_items=80, n_labels=3, n_workers=8, responses_per_item=3, seed=0)
    return Case(sim.responses, {}, pd.Series(dtype=object))


def case_for(name: str) -> Case:
    needs = create(name).inputs
    if "sequence" in needs:
        return _sequence()
    if "graph" in needs:
        return _graph()
    if "context" in needs:
        return _context()
    if "multilabel" in needs:
        return _multilabel()
    return _plain()


def fit(name: str, case: Case, df: pd.DataFrame | None = None, **params: Any):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create(name, **params).fit(case.df if df is None else df, **case.kwargs)


# ----------------------------------------------------------------------------------------------- the checks
@pytest.mark.parametrize("name", METHODS)
def test_probabilities_are_finite_and_sum_to_one(name):
    est = fit(name, case_for(name))
    p = est.probas_.to_numpy(dtype=float)
    assert np.isfinite(p).all() and (p >= -1e-12).all()
    if "multilabel" not in est.inputs:
        assert np.allclose(p.sum(axis=1), 1.0, atol=1e-8)
    assert len(est.labels_) == len(est.probas_)


@pytest.mark.parametrize("name", METHODS)
def test_deterministic_under_a_seed(name):
    case = case_for(name)
    a, b = fit(name, case), fit(name, case)
    assert np.array_equal(a.probas_.to_numpy(), b.probas_.to_numpy())
    assert a.labels_.equals(b.labels_)


ROW_ORDER_KNOWN: dict[str, str] = {}


@pytest.mark.parametrize("name", METHODS)
def test_row_order_invariance(name):
    if name in ROW_ORDER_KNOWN:
        pytest.xfail(ROW_ORDER_KNOWN[name])
    case = case_for(name)
    shuffled = case.df.sample(frac=1.0, random_state=1).reset_index(drop=True)
    a, b = fit(name, case), fit(name, case, shuffled)
    pa = a.probas_.sort_index()
    pb = b.probas_.reindex(index=pa.index, columns=pa.columns)
    assert np.allclose(pa.to_numpy(dtype=float), pb.to_numpy(dtype=float), atol=1e-6)


@pytest.mark.parametrize("name", METHODS)
def test_label_renaming_invariance(name):
    """Renaming the classes (here: reversing their sorted order) must not change any item's labelling (ties are
    broken on the data, fusion_core.methods.ties; tests/test_ties.py has the tied cases)."""
    case = case_for(name)
    if "multilabel" in create(name).inputs:
        pytest.skip("multi-label responses are label sets; renaming is covered by the multi-label tests")
    classes = sorted(case.df["label"].unique())
    rename = {c: f"z{len(classes) - i:02d}" for i, c in enumerate(classes)}  # reverses the sorted order
    renamed = case.df.assign(label=case.df["label"].map(rename))
    a, b = fit(name, case), fit(name, case, renamed)
    assert (a.labels_.map(rename) == b.labels_.reindex(a.labels_.index)).all()


@pytest.mark.parametrize("name", METHODS)
def test_sklearn_clone(name):
    from sklearn.base import clone

    est = create(name)
    twin = clone(est)
    assert type(twin) is type(est) and twin.get_params() == est.get_params()
    assert twin is not est


def _bad_values(p: Param) -> list[Any]:
    """Values outside a declaration."""
    if p.kind == "int":
        out: list[Any] = ["three", 2.5, True]
        out += [int(p.low) - 1] if p.low is not None else []
        out += [int(p.high) + 1] if p.high is not None else []
        return out
    if p.kind == "float":
        out = ["x", float("nan"), float("inf")]
        out += [p.low - 1.0] if p.low is not None else []
        out += [p.high + 1.0] if p.high is not None else []
        return out
    if p.kind == "choice":
        return ["__bogus__"]
    if p.kind == "bool":
        return ["maybe", 2]
    if p.kind == "seed":
        return [-1, "abc"]
    if p.kind == "str":
        return [3]
    return [object()]


@pytest.mark.parametrize("name", METHODS)
def test_out_of_range_parameters_are_refused(name):
    meta = next(m for m in available() if m.name == name)
    case = case_for(name)
    for p in meta.params:
        for bad in _bad_values(p):
            with pytest.raises(UserInputError, match=p.name):
                fit(name, case, **{p.name: bad})


@pytest.mark.parametrize("name", METHODS)
def test_gold_is_honoured_or_refused(name):
    case = case_for(name)
    if case.truth.empty:
        pytest.skip("no item-level truth for this input kind")
    est = create(name)
    gold = case.truth.iloc[::5]
    if not est.supports_gold:
        with pytest.raises(UserInputError, match="gold"):
            est.fit(case.df, true_labels=gold, **case.kwargs)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(case.df, true_labels=gold, **case.kwargs)
    assert (est.labels_.reindex(gold.index) == gold).all()


def _iteration_limit(name: str) -> dict[str, Any] | None:
    """Every iteration limit of the method set to 2 and every tolerance to 0 (so no stage can converge)."""
    meta = next(m for m in available() if m.name == name)
    names = {p.name for p in meta.params}
    limits = {n: 2 for n in ("max_iter", "em_max_iter") if n in names}
    tols = {n: 0.0 for n in ("tol", "em_tol") if n in names}
    if not limits or not tols:
        return None
    return {**limits, **tols}


@pytest.mark.parametrize("name", METHODS)
def test_non_convergence_is_warned(name):
    params = _iteration_limit(name)
    if params is None:
        pytest.skip("no iteration limit: the method is not iterative")
    case = case_for(name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = create(name, **params).fit(case.df, **case.kwargs)
    said = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert said, f"{name} stopped at its iteration limit without a ConvergenceWarning"
    assert not est.converged_
    assert set(said) <= set(est.result_.warnings)  # recorded once in the result, in plain words
