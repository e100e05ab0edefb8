"""Fuzz every registered method on small random and adversarial inputs (issue 11 items 5–6).

Inputs come from :func:`fusion_core.simulate.adversarial.adversarial_case` (many labels, single-response annotators,
exactly tied items, extreme context values, up to 200 labels in multi-label data); a fit must return finite
probabilities (summing to 1 per item for single-label methods, marginals in [0, 1] for multi-label data), or refuse
the input with a :class:`UserInputError` — never another exception.  The default run is bounded (small inputs, a
few examples per method); ``-m slow`` fits inputs of up to 2,000 responses.  Fit times are measured by
``benchmarks/bench_pathologies.py``, not here.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusion_core.errors import UserInputError
from fusion_core.methods import available, create
from fusion_core.simulate.adversarial import adversarial_case

METHODS = [m.name for m in available()]
SLOW_FITS = {"ordinal-ds", "ordinal-em", "ebcc"}  # slow on adversarial inputs (tens of seconds): under -m slow
FAST = settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
LONG = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def kind_of(name: str) -> str:
    return next((k for k in create(name).inputs if k != "plain"), "plain")


def check_fit(name: str, seed: int, max_responses: int) -> None:
    case = adversarial_case(seed, kind_of(name), max_responses=max_responses)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = create(name).fit(case.df, **case.kwargs)
    except UserInputError as exc:
        msg = str(exc)
        assert msg and "\n" not in msg.strip() and "Traceback" not in msg
        return
    p = est.probas_.to_numpy(dtype=float)
    assert p.shape[0] == len(est.labels_) > 0, case.shape
    assert np.isfinite(p).all() and (p >= -1e-12).all() and (p <= 1 + 1e-9).all(), case.shape
    if "multilabel" not in est.inputs:
        np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-8, err_msg=case.shape)
        assert set(est.labels_) <= set(est.probas_.columns), case.shape


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_FITS else n for n in METHODS])
@FAST
@given(seed=st.integers(0, 2**31 - 1))
def test_fits_on_adversarial_inputs_give_probabilities(name, seed):
    check_fit(name, seed, max_responses=200)


@pytest.mark.slow
@pytest.mark.parametrize("name", METHODS)
@LONG
@given(seed=st.integers(0, 2**31 - 1))
def test_fits_on_adversarial_inputs_give_probabilities_long(name, seed):
    check_fit(name, seed, max_responses=2000)


@pytest.mark.parametrize("kind", ["plain", "sequence", "graph", "context", "multilabel"])
def test_most_generated_inputs_are_fitted_not_refused(kind):
    """The generator makes valid inputs: a method of each kind fits nearly all of them (so the property above
    is not passed by refusing everything)."""
    name = {"plain": "ds", "sequence": "hmm-mv", "graph": "mrf-mv", "context": "context-em"}.get(kind, "multilabel-em")
    refused = 0
    for seed in range(12):
        case = adversarial_case(seed, kind, max_responses=200)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                create(name).fit(case.df, **case.kwargs)
        except UserInputError:
            refused += 1
    assert refused <= 3


# ------------------------------------------------------------------------ issue 25: fits that refused wrongly
def test_methods_that_ignore_confidences_refuse_them():
    """Item 4: mace ignored a confidence column without a word; it now refuses it, and auto leaves mace out of its
    default candidates when responses carry confidences (ds weighs them: a response at confidence 0 counts for
    nothing, so its label cannot win)."""
    import pandas as pd

    df = pd.DataFrame(
        {"task": [1, 1, 1, 2, 2, 2], "worker": list("abcabc"), "label": list("xyyyxx"), "c": [1, 0, 0, 1, 1, 1]}
    )
    with pytest.raises(UserInputError, match="does not use per-response confidences"):
        create("mace").fit(df.rename(columns={"c": "confidence"}).pipe(_with_confidence))
    assert create("mv").fit(_with_confidence(df.rename(columns={"c": "confidence"}))).labels_.tolist() == ["x", "x"]
    auto = create("auto").fit(_with_confidence(df.rename(columns={"c": "confidence"})))
    assert "mace" not in set(auto.heldout_scores_.index.astype(str)) | set(auto.heldout_scores_.iloc[:, 0].astype(str))


def _with_confidence(df):
    from fusion_core.data.responses import Responses

    return Responses.from_frame(df, confidence="confidence")


def test_context_em_refuses_infinite_or_many_column_context_clearly():
    """Item 9: an infinite context value or a table as context raised ValueError."""
    import pandas as pd

    df = pd.DataFrame({"task": [1, 1, 2, 2, 3, 3], "worker": list("ababab"), "label": list("xxyyxy")})
    with pytest.raises(UserInputError, match="is infinite"):
        create("context-em").fit(df, context=pd.Series([1.0, np.inf, 2.0], index=[1, 2, 3]))
    with pytest.raises(UserInputError, match="one value per task"):
        create("context-em").fit(df, context=pd.DataFrame({"a": [1, 2, 3], "b": [1, 2, 3]}, index=[1, 2, 3]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = create("context-em").fit(df, context=pd.DataFrame({"c": [1.0, 2.0, 3.0]}, index=[1, 2, 3]))
        series = create("context-em").fit(df, context=pd.Series([1.0, 2.0, 3.0], index=[1, 2, 3]))
    np.testing.assert_allclose(one.probas_.to_numpy(), series.probas_.to_numpy())


def _fit_quiet(name: str, df, kwargs: dict, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create(name, **params).fit(df, **kwargs)


ROW_ORDER_CASES = [("mm", {}), ("hmm-mv", {}), ("mrf-em", {})]  # each changed labels on these seeds before
ROW_ORDER_SLOW = [("mm-ds", {}), ("hmm-em", {}), ("hmm-mm", {}), ("mrf-mv", {}), ("ds", {"n_restarts": 3})]
ROW_ORDER_SLOW += [("mace", {"n_restarts": 3})]


@pytest.mark.parametrize(
    ("name", "params"), ROW_ORDER_CASES + [pytest.param(*c, marks=pytest.mark.slow) for c in ROW_ORDER_SLOW]
)
def test_row_order_gives_bit_identical_fits(name, params):
    """Item 6: row order changed the labels of mm, mm-ds, hmm-*, mrf-* (1 of 40 random sets) and of ds with
    restarts (1 of 64), through floating-point sums and tie-broken starts taken in row order.  These methods fit the
    responses in their canonical order, so a shuffled table gives the same probabilities to the last bit.  Seeds 3,
    5 and 9 are sets whose labels changed before (found by a search over 40 seeds: mm 8 sets, hmm-mv 9, mrf-em 5;
    0 with the canonical order)."""
    for seed in (3, 5, 9):
        case = adversarial_case(seed, kind_of(name), max_responses=200)
        try:
            a = _fit_quiet(name, case.df, case.kwargs, **params)
        except UserInputError:
            continue
        pa_ = a.probas_.sort_index()
        top = np.sort(pa_.to_numpy(), axis=1)
        clear = pa_.index[top[:, -1] - top[:, -2] > 1e-9]  # exact ties follow the documented tie rule (row order)
        for shuffle in (1, 2):
            shuffled = case.df.sample(frac=1.0, random_state=shuffle).reset_index(drop=True)
            b = _fit_quiet(name, shuffled, case.kwargs, **params)
            pb = b.probas_.reindex(index=pa_.index, columns=pa_.columns).to_numpy()
            assert np.array_equal(pa_.to_numpy(), pb), (seed, shuffle)
            assert a.labels_[clear].equals(b.labels_[clear]), (seed, shuffle)


@pytest.mark.parametrize(
    ("name", "seeds"),
    [("ds1", (5,)), ("mace", (0,))]
    + [pytest.param(n, range(8), marks=pytest.mark.slow) for n in ("ds", "ds1", "mace")],
)
def test_restarts_do_not_depend_on_label_names(name, seeds):
    """Item 6: with n_restarts=3 the random starts were drawn per class code, so renaming the labels (which
    reorders the codes) changed ds1's and mace's labels (ds1 on seeds 5–7 of 8, mace on 7 of 8); the draws now
    follow the data's class priority."""
    from fusion_core.simulate import dawid_skene

    for seed in seeds:
        df = dawid_skene(n_items=60, n_workers=6, n_classes=3, responses_per_item=3, seed=seed).responses
        classes = sorted(df["label"].unique())
        rename = {c: f"z{len(classes) - i:02d}" for i, c in enumerate(classes)}  # reverses the code order
        a = _fit_quiet(name, df, {}, n_restarts=3, random_state=seed)
        b = _fit_quiet(name, df.assign(label=df["label"].map(rename)), {}, n_restarts=3, random_state=seed)
        assert (a.labels_.map(rename) == b.labels_.reindex(a.labels_.index)).all()
        renamed = b.probas_.rename(columns={v: k for k, v in rename.items()})[a.probas_.columns]
        np.testing.assert_allclose(renamed.to_numpy(), a.probas_.to_numpy(), atol=1e-6)
