"""Shared test fixtures: the real datasets in ../shared (tests skip cleanly without them), and the check of a
fit on random data (:func:`fit_or_explain`)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DATASETS = SHARED / "datasets"


def dataset_path(name: str) -> Path:
    path = DATASETS / name
    if not path.is_dir():
        pytest.skip(f"real dataset '{name}' not available: {path} is absent (../shared is not beside the checkout)")
    return path


def load_dataset(name: str) -> tuple[pd.DataFrame, pd.Series]:
    """(answers in crowd-kit long format, gold labels as a Series by task) for a dataset in ../shared."""
    path = dataset_path(name)
    answers = pd.read_csv(path / "answers.csv")
    truth = pd.read_csv(path / "truth.csv").set_index("task")["truth"]
    return answers, truth


def fit_or_explain(
    df: pd.DataFrame, method: str, *, params: dict[str, Any] | None = None, ignore: type[Warning] = Warning, **fit: Any
) -> Any:
    """``method`` (with ``params``) fitted on random ``df`` (``fit``: the fit's other inputs; ``ignore``: warnings
    silenced) with finite posteriors summing to 1 per item, or None when it refuses the data with a
    :class:`UserInputError` — only for the documented reasons, one label or one annotator."""
    from fusion_core.errors import UserInputError
    from fusion_core.methods import create

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ignore)
            est = create(method, **(params or {})).fit(df, **fit)
    except UserInputError:
        assert df["label"].nunique() < 2 or df["worker"].nunique() < 2
        return None
    p = est.probas_.to_numpy()
    assert np.isfinite(p).all() and np.allclose(p.sum(axis=1), 1)
    return est


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
