"""Bayesian Dawid–Skene with shared hyper-parameters: beats plain DS on sparse crowds, VB pieces checked by hand."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import digamma, polygamma

from fusion_core.data.responses import Responses
from fusion_core.methods import create
from fusion_core.methods.bayesian_ds import BayesianDSModel, BDSState, dirichlet_ml, trigamma
from fusion_core.metrics import accuracy
from fusion_core.simulate import dawid_skene


def sparse_crowd(seed: int):
    """Issue 14's sparse crowd: 600 annotators (zipf activity, median ≤ 10 responses), prior 80/20, 10 % spammers."""
    return dawid_skene(
        n_items=2000,
        n_workers=600,
        n_classes=2,
        responses_per_item=5,
        class_prior=[0.8, 0.2],
        spammers=60,
        worker_activity="zipf",
        seed=seed,
    )


def _gain(seed: int) -> float:
    sim = sparse_crowd(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bds = create("bds").fit(sim.responses)
        ds = create("ds").fit(sim.responses)
    return accuracy(bds.labels_, sim.truth) - accuracy(ds.labels_, sim.truth)


def test_sparse_crowd_is_really_sparse():
    counts = sparse_crowd(0).responses["worker"].value_counts()
    assert len(counts) >= 500 and counts.median() <= 10


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beats_plain_ds_on_sparse_crowds(seed):
    assert _gain(seed) > 0.0


@pytest.mark.slow
def test_beats_plain_ds_on_sparse_crowds_many_seeds():
    gains = np.array([_gain(seed) for seed in range(20)])
    assert (gains > 0).mean() >= 0.9 and gains.mean() >= 0.02


def test_trigamma_and_dirichlet_ml():
    x = np.array([1e-3, 0.05, 0.7, 3.0, 9.5, 250.0, 1e4])
    assert trigamma(x) == pytest.approx(polygamma(1, x), rel=1e-10)
    rng = np.random.default_rng(0)
    alpha = np.array([[8.0, 2.0, 1.0], [1.0, 5.0, 3.0]])
    mean_log = np.stack([np.log(rng.dirichlet(a, size=20000)).mean(axis=0) for a in alpha])
    assert dirichlet_ml(mean_log, np.ones((2, 3))) == pytest.approx(alpha, rel=0.05)


def test_one_e_step_by_hand():
    """E[log Γ] = ψ(α) − ψ(Σα): on item 1 annotator b says class 1; q ∝ exp(E[log π_k] + E[log Γ_b,k,1])."""
    resp = Responses.from_frame(pd.DataFrame({"task": [0, 1], "worker": ["a", "b"], "label": [0, 1]}))
    conf = np.array([[[1.0, 1.0], [1.0, 1.0]], [[6.0, 2.0], [1.0, 3.0]]])[["ab".index(w) for w in resp.workers]]
    cls = np.array([2.0, 4.0])
    model = BayesianDSModel(resp, np.ones((2, 2)), empirical_bayes=False)
    e = model.e_step(BDSState(conf, cls, np.ones((2, 2))))
    elog_pi = digamma(cls) - digamma(6.0)
    item1 = elog_pi + np.array([digamma(2.0) - digamma(8.0), digamma(3.0) - digamma(4.0)])
    expected = np.exp(item1 - item1.max())
    assert e.posterior[list(resp.items).index(1)] == pytest.approx(expected / expected.sum())


def test_elbo_never_decreases_and_sparse_annotators_borrow_more():
    sim = sparse_crowd(3)
    b = create("bds").fit(sim.responses)
    trace = np.asarray(b.loss_history_)
    assert np.all(np.diff(trace) >= -1e-8 * np.abs(trace[1:]))
    share = b.result_.column("crowd_share").values
    n = b.responses_.responses_per_worker
    assert share[n <= 3].mean() > share[n >= 50].mean()


def _many_classes(n_classes: int, n_items: int, seed: int):
    """Every one of 4 annotators labels every item; accuracy U(0.6, 0.9); many classes, ~1 response per row."""
    return dawid_skene(n_items=n_items, n_workers=4, n_classes=n_classes, responses_per_item=4, seed=seed)


def _converges(n_classes: int, n_items: int, seed: int, max_iter: int):
    sim = _many_classes(n_classes, n_items, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ConvergenceWarning
        b = create("bds", max_iter=max_iter).fit(sim.responses)
    assert b.result_.converged
    trace = np.asarray(b.loss_history_)
    assert np.all(np.diff(trace) >= -1e-8 * np.abs(trace[1:]))  # SQUAREM's safeguard keeps the ELBO monotone
    return sim, b


def test_many_classes_converge_and_recover_labels_as_well_as_majority_vote():
    """Issue 21 item 6: on a 30-class crowd with ~1 response per confusion row, bds converges (was: crawled to
    max_iter) with a monotone ELBO and labels at least as well as majority vote (here ds is 3 items better)."""
    sim, b = _converges(30, 120, seed=0, max_iter=400)
    assert accuracy(b.labels_, sim.truth) >= accuracy(create("mv").fit(sim.responses).labels_, sim.truth)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_hundred_classes_converge(seed):
    """200 classes, 1,200 responses: converged within 500 iterations (was: unconverged at 500).  Against ds the
    labels were +0.7 / −1.0 / 0.0 pt on seeds 0 / 1 / 2, majority vote 4–7 pt above both (reported, not asserted)."""
    _converges(200, 300, seed=seed, max_iter=500)
