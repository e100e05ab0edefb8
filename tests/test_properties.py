"""Property tests: random valid inputs never crash; random malformed inputs raise UserInputError only."""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusion_core import UserInputError
from fusion_core.data import load_responses, read_table
from fusion_core.methods import create

rows = st.lists(
    st.tuples(
        st.integers(0, 15), st.sampled_from(["w1", "w2", "w3", "w4", "w5"]), st.sampled_from(["a", "b", "c", 0, 1])
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows, st.sampled_from(["mv", "ds", "ds1"]), st.sampled_from(["keep", "first", "last"]))
def test_random_valid_responses_fit_or_explain(data, method, dup):
    df = pd.DataFrame(data, columns=["task", "worker", "label"]).astype({"label": str})
    try:
        est = create(method)
        from fusion_core import Responses

        est.fit(Responses.from_frame(df, duplicates=dup))
    except UserInputError as exc:  # only the documented refusals: one class, one annotator (after the policy)
        kept = df if dup == "keep" else df.drop_duplicates(["task", "worker"], keep=dup)
        assert kept["label"].nunique() < 2 or kept["worker"].nunique() < 2, str(exc)
        return
    p = est.probas_.to_numpy()
    assert np.isfinite(p).all() and np.allclose(p.sum(axis=1), 1)
    assert set(est.labels_.index) == set(df["task"])


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400), st.sampled_from(["x.csv", "x.tsv", "x.jsonl", "x.parquet", "noext"]))
def test_random_bytes_never_raise_anything_but_user_input_error(blob, name):
    try:
        df = read_table(blob, name=name)
    except UserInputError:
        return
    assert isinstance(df, pd.DataFrame)
    with contextlib.suppress(UserInputError):
        load_responses(df)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=8), min_size=1, max_size=5, unique=True), st.integers(0, 20))
def test_malformed_tables_raise_user_input_error(columns, n_rows):
    """Tables lacking any of task/worker/label always raise UserInputError naming the missing column."""
    cols = [c for c in columns if c not in ("task", "worker", "label")] or ["x"]
    df = pd.DataFrame(np.zeros((n_rows, len(cols))), columns=cols)
    try:
        load_responses(df)
    except UserInputError as exc:
        assert "missing" in str(exc) or "empty" in str(exc)
    else:
        raise AssertionError("a table without task/worker/label columns was accepted")
