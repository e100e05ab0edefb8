"""One-coin Dawid–Skene with estimated class priors (issue 14 item 1): the default and its collapse guard."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import load_dataset

from fusion_core.methods import create
from fusion_core.metrics import accuracy
from fusion_core.simulate import dawid_skene


def test_estimated_priors_win_on_sparse_imbalanced_crowds():
    gains = []
    for seed in range(3):
        sim = dawid_skene(
            n_items=2000, n_workers=600, n_classes=2, responses_per_item=5, class_prior=[0.8, 0.2],
            spammers=60, worker_activity="zipf", seed=seed,
        )  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = create("ds1").fit(sim.responses)
            eq = create("ds1", estimate_priors=False).fit(sim.responses)
        assert not est.warnings_  # the guard does not fire on a healthy 80/20 fit
        gains.append(accuracy(est.labels_, sim.truth) - accuracy(eq.labels_, sim.truth))
    assert min(gains) > 0.02


def test_collapse_guard_refits_bluebirds_with_equal_priors():
    """bluebirds: estimated priors collapse to 0.97/0.03 (accuracy 0.583); the guard refits with equal priors."""
    answers, truth = load_dataset("bluebirds")
    with pytest.warns(Warning, match="collapsed"):
        guarded = create("ds1").fit(answers)
    assert np.allclose(guarded.priors_.to_numpy(), 0.5)
    assert accuracy(guarded.labels_, truth) == pytest.approx(0.7222, abs=1e-4)
    unguarded = create("ds1", prior_guard=0.0).fit(answers)
    assert unguarded.priors_.max() > 0.95
