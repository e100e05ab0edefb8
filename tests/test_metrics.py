"""Metrics (spec sequential-networked §3.1, P8; oracle T14)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score

from fusion_core.metrics import (
    accuracy,
    bio_spans,
    confusion_error,
    entity_scores,
    macro_f1,
    per_sequence_f1,
    transition_error,
)


def test_t14_confusion_error_induced_norm():
    for k in (2, 4, 7):
        ident = np.eye(k)[None]
        uniform = np.full((1, k, k), 1.0 / k)
        assert confusion_error(ident, uniform) == pytest.approx(2 * (k - 1) / k)
    # induced (max column of Γ = max row of the package layout) differs from the entrywise sum
    a = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    b = np.array([[[0.5, 0.5], [0.0, 1.0]]])
    assert confusion_error(a, b) == pytest.approx(1.0)
    t = np.array([[0.9, 0.2], [0.1, 0.8]])
    assert transition_error(t, np.full((2, 2), 0.5)) == pytest.approx(0.8)


@pytest.mark.parametrize("seed", range(5))
def test_t14_macro_f1_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    y = pd.Series(rng.integers(0, 5, 300))
    p = pd.Series(rng.integers(0, 6, 300))
    assert macro_f1(p, y) == pytest.approx(f1_score(y, p, average="macro"))
    assert accuracy(p, y) == pytest.approx(np.mean(p == y))


def test_t14_per_sequence_average_is_mean_of_per_sequence_scores():
    rng = np.random.default_rng(0)
    n = 200
    seq = pd.Series(rng.integers(0, 12, n))
    y = pd.Series(rng.integers(0, 4, n))
    p = pd.Series(np.where(rng.random(n) < 0.7, y, rng.integers(0, 4, n)))
    manual = np.mean([f1_score(y[seq == s], p[seq == s], average="macro") for s in np.unique(seq)])
    assert per_sequence_f1(p, y, seq) == pytest.approx(manual)
    # P8: a class predicted but absent from the gold scores 0; classes absent from both are skipped
    one = pd.Series([0, 0, 1])
    assert per_sequence_f1(pd.Series([0, 0, 2]), one, pd.Series([0, 0, 0])) == pytest.approx((1.0 + 0.0 + 0.0) / 3)


def test_bio_spans_and_entity_scores():
    tags = np.array(["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "B-LOC", "B-ORG", "I-PER"])
    seqs = np.array([0, 0, 0, 0, 0, 0, 1, 1])
    spans = bio_spans(tags, seqs)
    assert spans.values.tolist() == [[0, 2, "PER"], [3, 5, "LOC"], [5, 6, "LOC"], [6, 7, "ORG"], [7, 8, "PER"]]
    idx = [f"t{i}" for i in range(8)]
    truth = pd.Series(tags, index=idx)
    pred = pd.Series(["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "B-LOC", "B-ORG", "O"], index=idx)
    seq = pd.Series(seqs, index=idx)
    pos = pd.Series([0, 1, 2, 3, 4, 5, 0, 1], index=idx)
    s = entity_scores(pred, truth, seq, pos)
    # predicted spans: PER(0-2) ✓, LOC(3-5) ✓, LOC(5-6) ✓, ORG(6-7) ✓ ; gold has 5 → P = 4/4, R = 4/5
    assert s["precision"] == pytest.approx(1.0) and s["recall"] == pytest.approx(0.8)
    assert s["f1"] == pytest.approx(2 * 0.8 / 1.8)
    # a span broken by a sequence boundary is two entities
    assert len(bio_spans(np.array(["B-PER", "I-PER"]), np.array([0, 1]))) == 2
