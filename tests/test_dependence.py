"""Dependent annotators in the accuracy range (issue 21, item 4; fusion_core.diagnostics.audit.dependence): the pair
enumeration and the one-factor fit by hand, exact copies weighted 1/k, no dependence found (and nothing changed) on
a Dawid–Skene crowd, and classifiers that copy one source found and counted once, which brings the range to the
truth."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from test_difficulty import _fit

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit.dependence import dependence_check, one_factor, response_pairs
from fusion_core.diagnostics.audit.difficulty import difficulty_mixture
from fusion_core.diagnostics.audit.safety import accuracy_range, label_safety
from fusion_core.diagnostics.audit.words import accuracy_words
from fusion_core.methods import create
from fusion_core.simulate.dawid_skene import dawid_skene
from fusion_core.simulate.weak import classifier_ensemble


def test_response_pairs_by_hand():
    # responses' items: 0 1 0 2 0 1 → item 0 holds responses 0, 2, 4; item 1 holds 1, 5; item 2 one response
    item = np.array([0, 1, 0, 2, 0, 1])
    r, s = response_pairs(item, 3, np.arange(3))
    assert sorted(zip(r.tolist(), s.tolist())) == [(0, 2), (0, 4), (1, 5), (2, 4)]


def test_one_factor_recovers_a_rank_one_agreement():
    v = np.array([0.9, 0.6, 0.3, -0.5])
    a, b = np.triu_indices(4, 1)
    got = one_factor(a, b, v[a] * v[b], np.ones(len(a)), 4)
    assert np.allclose(got * np.sign(got[0]), v, atol=1e-6)  # up to the sign of the whole factor


def _check(df: pd.DataFrame):
    resp = Responses.from_frame(df)
    seen: list[np.ndarray] = []

    def refit(weight: np.ndarray) -> tuple[np.ndarray, int, bool]:
        seen.append(weight)
        return np.full((resp.n_items, resp.n_classes), 1.0 / resp.n_classes), 1, True

    dep = dependence_check(
        resp,
        resp.item,
        resp.n_items,
        label=np.zeros(resp.n_items, dtype=np.int64),
        order_key=np.arange(resp.n_items),
        one_type_accuracy=0.9,
        refit=refit,
    )
    return resp, dep, seen


def test_exact_copies_weigh_as_one_annotator():
    # 6 independent annotators (accuracy 0.75) and 3 exact copies of a seventh on 400 binary items: the copies'
    # pairs agree always (excess 1), so each copy's response has load 1 + 2 = 3 — weight 1/3, the three as one
    rng = np.random.default_rng(3)
    n = 400
    truth = rng.integers(0, 2, n)
    rows = []
    for j in range(7):
        lab = np.where(rng.random(n) < 0.75, truth, 1 - truth)
        for name in [f"c{c}" for c in range(3)] if j == 6 else [f"a{j}"]:
            rows.append(pd.DataFrame({"task": np.arange(n), "worker": name, "label": lab}))
    resp, dep, seen = _check(pd.concat(rows, ignore_index=True))
    assert dep is not None and dep.found
    assert set(dep.annotators) == {"c0", "c1", "c2"} and dep.pairs_dependent == 3
    assert all(e == pytest.approx(1.0) for _, _, e in dep.strongest)
    copies = np.isin(resp.workers.take(resp.worker), ["c0", "c1", "c2"])
    np.testing.assert_allclose(seen[0][copies], 1 / 3)
    np.testing.assert_allclose(seen[0][~copies], 1.0)
    assert dep.shift == pytest.approx(0.5 - 0.9)  # the refit's figure (½ here) minus the one-type figure


def test_a_dawid_skene_crowd_shows_no_dependence_and_keeps_its_range():
    sim = dawid_skene(n_items=400, n_workers=12, n_classes=2, responses_per_item=6, seed=4)
    resp, post, label = _fit(sim.responses)
    d = difficulty_mixture(resp, post, label)
    assert d.dependence is not None and d.dependence.pairs_tested > 30 and not d.dependence.found
    assert d.dependence.shift == 0.0 and d.dependence.accuracy == pytest.approx(d.one_type_accuracy)
    fit = create("ds").fit(resp).result_
    with_check = accuracy_range(fit, label, difficulty=d)
    without = accuracy_range(fit, label, difficulty=_without_dependence(d))
    assert (with_check.estimate, with_check.low, with_check.high) == (without.estimate, without.low, without.high)


def _without_dependence(d):
    from dataclasses import replace

    return replace(d, dependence=None)


def _ensemble_range(seed: int, n_items: int, **shape):
    """The label safety of a DS fit on a simulated classifier ensemble (``shape``: its parameters), and the
    labels' true accuracy."""
    sim = classifier_ensemble(n_items=n_items, seed=seed, **shape)
    resp = Responses.from_frame(sim.responses)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = create("ds").fit(resp).result_
    label = np.asarray(fit.label_codes)
    s = label_safety(resp, fit, label, create("mv").fit(resp).result_.label_codes)
    true_acc = float((resp.classes.take(label).to_numpy() == sim.truth.reindex(resp.items).to_numpy()).mean())
    return s, true_acc


def test_classifiers_copying_one_source_are_counted_once():
    s, true_acc = _ensemble_range(0, 600)
    acc = s.accuracy
    dep = acc.difficulty.dependence if acc.difficulty is not None else None
    assert dep is not None and set(dep.annotators) == {f"m{j}" for j in range(6)}  # the members, no one else
    assert acc.model > true_acc + 0.1  # counted as independent votes, the copies overstate
    assert abs(dep.accuracy - true_acc) < 0.05
    assert acc.low - 0.01 <= true_acc <= acc.high + 0.01
    assert acc.latent_estimate is not None and abs(acc.latent_estimate - true_acc) < 0.05
    assert acc.reference_low > dep.accuracy  # the verdicts' reference leaves it out
    assert f"counting that shared part once, {100 * dep.accuracy:.0f}%" in accuracy_words(acc, 600)
    summary = s.summary()["accuracy_difficulty_check"]["excess_agreement"]
    assert summary["pairs_with_excess_agreement"] == dep.pairs_dependent and summary["shift"] < -0.1


@pytest.mark.slow
def test_copies_counted_once_over_many_seeds():
    # 10 classifier ensembles (6 members of one source, 6 independent annotators): covered on ≥ 9, the estimate
    # within 5 pt on ≥ 9; 20 Dawid–Skene crowds: dependence found on ≤ 2, the estimate moved < 0.2 pt on average
    covered = near = 0
    for seed in range(10):
        s, true_acc = _ensemble_range(100 + seed, 1500)
        acc = s.accuracy
        covered += acc.low - 0.01 <= true_acc <= acc.high + 0.01
        near += abs(acc.estimate - true_acc) < 0.05
    found, moved = 0, []
    for seed in range(20):
        sim = dawid_skene(n_items=600, n_workers=30, n_classes=3, responses_per_item=7, seed=500 + seed)
        resp, post, label = _fit(sim.responses)
        d = difficulty_mixture(resp, post, label)
        found += d.dependence is not None and d.dependence.found
        moved.append(0.0 if d.dependence is None else d.dependence.shift)
    print(f"ensembles covered {covered}/10, within 5 pt {near}/10; DS found {found}/20, moved {np.mean(moved):+.4f}")
    assert covered >= 9 and near >= 9 and found <= 2 and abs(np.mean(moved)) < 0.002
