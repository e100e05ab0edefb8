"""The pruned 'degree' family of ``multilabel-em`` (issue 11 item 5): many labels no longer enumerate (or refuse)
tens of thousands of true sets."""

from __future__ import annotations

import warnings
from math import comb

import numpy as np
import pandas as pd
import pytest

from fusion_core.errors import AggregationWarning
from fusion_core.methods.multilabel import MultiLabelEM
from fusion_core.methods.multilabel.family import FAMILY_CAP


def many_labels(n_labels: int = 60, n_items: int = 150, seed: int = 0) -> tuple[pd.DataFrame, pd.Series]:
    """Three annotators per item; true sets of 1–2 labels, each annotator drops or adds a label now and then."""
    rng = np.random.default_rng(seed)
    labels = [f"L{i:02d}" for i in range(n_labels)]
    rows, truth = [], {}
    for i in range(n_items):
        true = set(rng.choice(labels, size=int(rng.integers(1, 3)), replace=False))
        truth[f"t{i}"] = tuple(sorted(true))
        for w in rng.choice(8, size=3, replace=False):
            said = set(true)
            if rng.random() < 0.15:
                said.discard(next(iter(said)))
            if rng.random() < 0.15:
                said.add(str(rng.choice(labels)))
            rows.append((f"t{i}", f"w{w}", "|".join(sorted(said))))
    return pd.DataFrame(rows, columns=["task", "worker", "label"]), pd.Series(truth)


def test_large_degree_family_is_pruned_warned_and_loses_nothing_here(monkeypatch):
    """60 labels, true sets of ≤ 2 labels: the 1,831 sets of ≤ 2 labels are cut to the cap; the pruned fit is as
    accurate as the complete family's (the true sets were reported, so they stay in the family)."""
    from fusion_core.methods.multilabel import family

    df, truth = many_labels()
    assert comb(60, 2) + 61 > FAMILY_CAP
    with pytest.warns(AggregationWarning, match="too many to enumerate"):
        pruned = MultiLabelEM(max_degree=2).fit(df)
    assert len(pruned.set_prior_) <= FAMILY_CAP
    assert {(), ("L00",), ("L59",)} <= set(pruned.set_prior_.index)  # ∅ and every single label are kept
    monkeypatch.setattr(family, "FAMILY_CAP", 10**6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        complete = MultiLabelEM(max_degree=2).fit(df)
    assert len(complete.set_prior_) == comb(60, 2) + 61

    def acc(m):
        return (m.labels_.reindex(truth.index) == truth).mean()

    assert acc(pruned) >= acc(complete) - 0.02 and acc(pruned) > 0.5


def test_pruned_family_does_not_depend_on_row_order():
    df, _ = many_labels(seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = MultiLabelEM().fit(df)
        b = MultiLabelEM().fit(df.sample(frac=1.0, random_state=3).reset_index(drop=True))
    pb = b.probas_.reindex(index=a.probas_.index, columns=a.probas_.columns)
    np.testing.assert_allclose(a.probas_.to_numpy(float), pb.to_numpy(float), atol=1e-6)


def test_gold_set_outside_the_pruned_family_is_added():
    df, truth = many_labels(seed=2)
    rare = ("L00", "L59")  # a pair nobody reported together
    assert not df["label"].str.fullmatch("L00\\|L59").any()
    gold = pd.Series({"t0": rare})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = MultiLabelEM().fit(df, true_labels=gold)
    assert m.labels_["t0"] == rare
