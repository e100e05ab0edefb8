"""Shared test fixtures: the real datasets in ../shared (tests skip cleanly without them)."""

from __future__ import annotations

from pathlib import Path

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


@pytest.fixture
def rng():
    import numpy as np

    return np.random.default_rng(12345)
