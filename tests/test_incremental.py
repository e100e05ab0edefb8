"""Incremental Dawid–Skene (issue 22, item 4): a warm-started update equals a full refit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fusion_core import UserInputError
from fusion_core.methods import create
from fusion_core.simulate import dawid_skene

pytestmark = pytest.mark.filterwarnings("ignore::fusion_core.errors.ConvergenceWarning")

# EM run to its fixed point: tol 0 stops only when the log-likelihood no longer changes at all in double
# precision (the relative rule at 1e-7 leaves parameter differences of ~1e-5 between two starts)
TIGHT = {"tol": 0.0, "max_iter": 1500}


def _batches(seed: int) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    sim = dawid_skene(n_items=1000, n_workers=30, n_classes=3, responses_per_item=6, accuracy=(0.65, 0.95), seed=seed)
    df = sim.responses[["task", "worker", "label"]]
    rng = np.random.default_rng(seed)
    late_items = set(sim.truth.index[-200:])  # these items appear only in later batches
    late_worker = df["worker"] == df["worker"].iloc[0]  # so does one annotator
    late = df["task"].isin(late_items) | late_worker
    first = df[~late & (rng.random(len(df)) < 0.8)]
    rest = df.drop(first.index).sample(frac=1.0, random_state=seed)
    return first, [rest.iloc[: len(rest) // 2], rest.iloc[len(rest) // 2 :]]


def _text(df: pd.DataFrame) -> pd.DataFrame:
    """Labels as text: a table mixing numbers and words (the batch's) is read as text, the first one as numbers."""
    out = df.copy()
    out.columns = out.columns.map(str)
    if isinstance(out.index, pd.MultiIndex):
        out.index = pd.MultiIndex.from_arrays([out.index.get_level_values(i).map(str) for i in range(2)])
    return out


def _same(a, b) -> None:
    pa, pb = _text(a.probas_), _text(b.probas_)
    assert np.abs(pa.reindex(index=pb.index, columns=pb.columns).to_numpy() - pb.to_numpy()).max() < 1e-6
    ea, eb = _text(a.errors_), _text(b.errors_)
    assert np.abs(ea.reindex(index=eb.index, columns=eb.columns).to_numpy() - eb.to_numpy()).max() < 1e-6
    assert (a.labels_.map(str).reindex(b.labels_.index) == b.labels_.map(str)).all()
    assert (
        np.abs(a.priors_.rename(index=str).reindex(b.priors_.rename(index=str).index) - b.priors_.to_numpy()).max()
        < 1e-6
    )


@pytest.mark.parametrize("method", ["ds", "ds1"])
def test_warm_update_equals_full_refit(method: str) -> None:
    first, batches = _batches(seed=3)
    full = create(method, **TIGHT).fit(pd.concat([first, *batches]))
    warm = create(method, **TIGHT).fit(first)
    n0 = warm.n_iter_
    for b in batches:
        warm.update(b)
    assert warm.responses_.n_responses == full.responses_.n_responses
    assert set(warm.result_.items) == set(full.result_.items) and len(warm.result_.items) == 1000
    _same(warm, full)
    del n0


def test_update_with_a_new_label_and_one_annotator() -> None:
    first, _ = _batches(seed=4)
    est = create("ds").fit(first)
    batch = pd.DataFrame({"task": ["t0", "t1", "new"], "worker": ["zz"] * 3, "label": ["other"] * 3})
    est.update(batch)
    assert list(est.classes_)[-1] == "other" and "zz" in list(est.workers_) and "new" in est.labels_.index
    assert est.responses_.n_responses == len(first) + 3 and est.converged_
    assert np.allclose(est.probas_.sum(axis=1), 1.0)
    # (no comparison with a full refit here: one annotator's word is the only evidence of the 4th class, so the
    # likelihood has several optima and EM from majority vote and from the warm start may reach different ones)
    with pytest.raises(UserInputError, match="fit before update"):
        create("ds").update(batch)


def test_appended_sparse_layout_equals_a_fresh_one() -> None:
    """The update inserts a batch into the previous layout instead of sorting everything again: entry for entry
    the layout built from scratch, for a batch of new items only and for one spread over earlier items."""
    import dataclasses

    from fusion_core.methods import layout as sweep  # the shared sparse layout (methods/layout.py)

    first, batches = _batches(seed=5)
    est = create("ds").fit(first)
    for b in (batches[0][batches[0]["task"].isin(set(batches[0]["task"]) - set(first["task"]))], batches[1]):
        old = est.responses_
        est.update(b)
        resp = est.responses_
        del sweep._CACHE[resp]
        sweep.sweep_data_appended(old, resp)
        got = sweep._CACHE[resp]
        fresh = sweep.sweep_data(dataclasses.replace(resp))
        assert np.array_equal(got.indptr, fresh.indptr) and np.array_equal(got.indices, fresh.indices)
