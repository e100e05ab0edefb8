"""Evaluation metrics against gold labels (used by benchmarks, the Compare page and tests)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def accuracy(labels: pd.Series, truth: pd.Series) -> float:
    """Fraction of gold items whose predicted label equals the gold label (items without a prediction count wrong)."""
    truth = pd.Series(truth).dropna()
    pred = pd.Series(labels).reindex(truth.index)
    return float((pred.to_numpy() == truth.to_numpy()).mean()) if len(truth) else float("nan")


def macro_f1(labels: pd.Series, truth: pd.Series, classes=None) -> float:
    """Unweighted mean over classes of the per-class F1 score (classes present in gold or predictions)."""
    truth = pd.Series(truth).dropna()
    pred = pd.Series(labels).reindex(truth.index)
    y, p = truth.to_numpy(), pred.to_numpy()
    classes = pd.unique(np.concatenate([y, p[~pd.isna(p)]])) if classes is None else classes
    f1s = []
    for c in classes:
        tp = np.sum((p == c) & (y == c))
        fp = np.sum((p == c) & (y != c))
        fn = np.sum((p != c) & (y == c))
        f1s.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(f1s)) if f1s else float("nan")
