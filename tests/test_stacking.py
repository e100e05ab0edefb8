"""The stacked accuracy estimate (issue 21, item 4; fusion_core.diagnostics.audit.stacking) and the abstention model
of one-label annotators (fusion_core.diagnostics.audit.abstention): hand-computed cases, the leave-one-out
predictive against a brute-force loop, ŵ ≈ 1 on well-specified crowds and the estimate moving towards the truth
where annotators share errors, the abstention model recovering labelling functions' accuracy."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from test_difficulty import _fit, _range_and_truth, shared_error_crowd

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit.abstention import abstention_accuracy
from fusion_core.diagnostics.audit.difficulty import difficulty_mixture
from fusion_core.diagnostics.audit.safety import label_safety
from fusion_core.diagnostics.audit.stacking import (
    confusion_counts,
    latent_class_loo,
    population_loo,
    stacking_weight,
)
from fusion_core.diagnostics.audit.words import accuracy_words
from fusion_core.methods import create
from fusion_core.simulate.dawid_skene import dawid_skene
from fusion_core.simulate.weak import labelling_functions


def test_stacking_weight_by_hand():
    # v = (½, ½), a = (0.9, 0.2), b = (0.5, 0.5): 0.4/(0.5 + 0.4w) = 0.3/(0.5 − 0.3w)  ⇒  w = 0.05/0.24
    a, b, v = np.array([0.9, 0.2]), np.array([0.5, 0.5]), np.array([0.5, 0.5])
    assert stacking_weight(a, b, v) == pytest.approx(0.05 / 0.24, abs=1e-9)
    assert stacking_weight(np.array([0.9, 0.6]), b, v) == 1.0  # a predicts every response better
    assert stacking_weight(np.array([0.1, 0.4]), b, v) == 0.0


def test_population_loo_by_hand():
    # t0: a a b; t1: b b.  Overall shares (with one pseudo-count each) ρ = (3/7, 4/7).
    rows = [("t0", "w1", "a"), ("t0", "w2", "a"), ("t0", "w3", "b"), ("t1", "w1", "b"), ("t1", "w2", "b")]
    resp = Responses.from_frame(pd.DataFrame(rows, columns=["task", "worker", "label"]))
    scored = np.ones(resp.n_responses, dtype=bool)
    v = np.full(resp.n_responses, 1 / resp.n_responses)
    p, alpha = population_loo(resp, resp.item, resp.n_items, scored, v)
    rho = np.array([3 / 7, 4 / 7])
    same = np.array([1, 1, 0, 1, 1], dtype=float)  # other responses of the item with the same label
    others = np.array([2, 2, 2, 1, 1], dtype=float)
    y = resp.label
    np.testing.assert_allclose(p, (same + alpha * rho[y]) / (others + alpha))


def test_latent_class_loo_matches_a_brute_force_loop():
    sim = dawid_skene(n_items=40, n_workers=6, n_classes=3, responses_per_item=4, seed=5)
    resp, post, _ = _fit(sim.responses)
    K, n = resp.n_classes, resp.n_items
    prior = post.mean(axis=0)
    raw, pooled = confusion_counts(resp, post[resp.item], K)
    counts = raw + 2.0 * pooled[None]
    scored = resp.responses_per_item[resp.item] >= 2
    fast = latent_class_loo(resp, resp.item, n, prior=prior, post=post, counts=counts, scored=scored)
    slow = []
    for r in np.flatnonzero(scored):  # the definition, one response at a time
        i = resp.item[r]
        mine = np.flatnonzero(resp.item == i)
        theta = {}
        for s in mine:  # each response's confusion row without the item's own expected counts
            row = counts[resp.worker[s]] - np.outer(post[i], np.eye(K)[resp.label[s]])
            theta[s] = row[:, resp.label[s]] / row.sum(axis=1)
        q = prior * np.prod([theta[s] for s in mine if s != r], axis=0)
        slow.append(float((q / q.sum()) @ theta[r]))
    np.testing.assert_allclose(fast, slow, rtol=1e-9)


def test_a_well_specified_crowd_keeps_its_estimate():
    sim = dawid_skene(n_items=500, n_workers=20, n_classes=3, responses_per_item=5, seed=1)
    resp, post, label = _fit(sim.responses)
    st = difficulty_mixture(resp, post, label).stacking
    assert st is not None and st.weight > 0.9 and st.score_latent > st.score_population
    fit = create("ds").fit(resp).result_
    acc = label_safety(resp, fit, label, create("mv").fit(resp).result_.label_codes).accuracy
    assert acc.latent_estimate is not None and abs(acc.estimate - acc.latent_estimate) < 0.02
    assert acc.low <= acc.estimate <= acc.high
    true_acc = float((resp.classes.take(label).to_numpy() == sim.truth.reindex(resp.items).to_numpy()).mean())
    assert acc.low - 0.01 <= true_acc <= acc.high + 0.01  # the latent-class figures alone stop at .956 (truth .938)


def test_shared_errors_move_the_estimate_towards_the_truth():
    acc, true_acc = _range_and_truth(*shared_error_crowd(0))
    assert acc.latent_weight is not None and acc.latent_weight < 0.8
    assert (
        acc.latent_estimate is not None and acc.latent_estimate > true_acc + 0.05
    )  # the latent-class figure overstates
    assert abs(acc.estimate - true_acc) < 0.5 * (acc.latent_estimate - true_acc)
    assert acc.low <= acc.estimate <= acc.high
    assert acc.reference_low >= min(acc.model, acc.latent_estimate) - 0.1  # verdicts' reference: latent figures only
    assert f"(the model gets {100 * acc.latent_weight:.0f}% of the weight)" in accuracy_words(acc, 600)


def test_the_abstention_model_reads_labelling_functions():
    sim = labelling_functions(n_items=600, seed=0)
    resp = Responses.from_frame(sim.responses)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = create("auto").fit(resp).result_
    label = np.asarray(fit.label_codes)
    truth = sim.truth.reindex(resp.items).to_numpy()
    true_acc = float((resp.classes.take(label).to_numpy() == truth).mean())
    ab = abstention_accuracy(resp, np.asarray(fit.posterior), label)
    assert ab.converged and np.all(np.diff(ab.loglik) >= -1e-6 * resp.n_items)
    assert abs(ab.accuracy - true_acc) < 0.03
    s = label_safety(resp, fit, label, create("mv").fit(resp).result_.label_codes)
    acc = s.accuracy
    assert acc.abstention is not None and not acc.identifiable
    assert acc.low - 0.01 <= true_acc <= acc.high + 0.01
    assert s.summary()["accuracy_abstention_model"]["accuracy"] == pytest.approx(ab.accuracy)


@pytest.mark.slow
def test_stacking_and_abstention_over_many_seeds():
    # 20 Dawid–Skene crowds: the stacked estimate moves by < 1 pt on average; 20 shared-error crowds: it is nearer
    # the truth than the latent-class figure on ≥ 17; 20 crowds of labelling functions: covered on ≥ 17
    shift = []
    for seed in range(20):
        sim = dawid_skene(n_items=600, n_workers=30, n_classes=3, responses_per_item=7, seed=300 + seed)
        resp, _, label = _fit(sim.responses)
        fit = create("ds").fit(resp).result_
        acc = label_safety(resp, fit, label, create("mv").fit(resp).result_.label_codes).accuracy
        shift.append(acc.estimate - acc.latent_estimate)
    nearer = 0
    for seed in range(20):
        acc, true_acc = _range_and_truth(*shared_error_crowd(200 + seed))
        nearer += abs(acc.estimate - true_acc) < abs(acc.latent_estimate - true_acc)
    covered = 0
    for seed in range(20):
        sim = labelling_functions(seed=400 + seed)
        resp = Responses.from_frame(sim.responses)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = create("auto").fit(resp).result_
        label = np.asarray(fit.label_codes)
        acc = label_safety(resp, fit, label, create("mv").fit(resp).result_.label_codes).accuracy
        true_acc = float((resp.classes.take(label).to_numpy() == sim.truth.reindex(resp.items).to_numpy()).mean())
        covered += acc.low - 0.01 <= true_acc <= acc.high + 0.01
    print(
        f"DS shift {100 * np.mean(shift):+.2f} pt; shared errors nearer {nearer}/20; labelling functions {covered}/20"
    )
    assert abs(np.mean(shift)) < 0.01 and nearer >= 17 and covered >= 17
