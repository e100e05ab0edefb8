"""The difficulty check of the accuracy figure (issue 21, item 4; fusion_core.diagnostics.audit.difficulty) and the
one-label condition: recovery on simulated crowds of two item types, nothing on a well-specified crowd, monotone EM,
the item subset for large data, and the audit's words and summary when the accuracy cannot be estimated."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import fusion_core.diagnostics.audit.difficulty as difficulty
from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit.difficulty import difficulty_mixture
from fusion_core.diagnostics.audit.safety import (
    AccuracyRange,
    label_safety,
    one_label_share,
    population_accuracy,
    population_shares,
)
from fusion_core.diagnostics.audit.words import accuracy_words
from fusion_core.methods import create
from fusion_core.simulate.dawid_skene import dawid_skene
from fusion_core.simulate.weak import labelling_functions


def two_type_crowd(
    seed: int, n: int = 600, r: int = 9, hard: float = 0.3
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Binary items, 30 annotators of accuracy 0.85–0.95 on easy items and at chance on a share ``hard``."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    is_hard = rng.random(n) < hard
    acc = rng.uniform(0.85, 0.95, 30)
    item = np.repeat(np.arange(n), r)
    worker = np.concatenate([rng.choice(30, r, replace=False) for _ in range(n)])
    a = np.where(is_hard[item], 0.5, acc[worker])
    label = np.where(rng.random(len(item)) < a, truth[item], 1 - truth[item])
    return pd.DataFrame({"task": item, "worker": worker, "label": label}), truth, is_hard


def _fit(df: pd.DataFrame) -> tuple[Responses, np.ndarray, np.ndarray]:
    resp = Responses.from_frame(df)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = create("ds").fit(resp).result_
    return resp, np.asarray(fit.posterior), np.asarray(fit.label_codes)


def test_two_item_types_are_found_and_the_overstatement_shrinks():
    df, truth, is_hard = two_type_crowd(0)
    resp, post, label = _fit(df)
    d = difficulty_mixture(resp, post, label)
    true_acc = float((resp.classes.take(label).to_numpy() == truth[resp.items.to_numpy()]).mean())
    assert d.flagged and d.p_value < 1e-6
    assert d.hard_share == pytest.approx(is_hard.mean(), abs=0.1)
    assert d.one_type_accuracy > true_acc + 0.04  # what the check is for: equally hard items overstate
    assert abs(d.accuracy - true_acc) < d.one_type_accuracy - true_acc - 0.02
    assert d.at_chance <= d.accuracy <= d.one_type_accuracy
    assert d.unanimous > 1.3 * d.unanimous_expected  # easy items agree more than equally hard items would
    assert d.converged and np.all(np.diff(d.loglik) >= -1e-6 * resp.n_items)  # EM (with SQUAREM) never goes down


def test_a_well_specified_crowd_shows_no_difficulty_and_keeps_its_range():
    sim = dawid_skene(n_items=500, n_workers=20, n_classes=3, responses_per_item=5, seed=1)
    resp, post, label = _fit(sim.responses)
    d = difficulty_mixture(resp, post, label)
    assert not d.flagged and d.hard_share < 0.05
    assert d.accuracy == pytest.approx(d.one_type_accuracy, abs=0.01)
    assert d.unanimous == pytest.approx(d.unanimous_expected, rel=0.15)
    assert d.accuracy - d.at_chance < 0.02  # the hard-at-chance figure does not widen the range
    fit = create("ds").fit(resp).result_
    s = label_safety(resp, fit, label, create("mv").fit(resp).result_.label_codes)
    assert s.accuracy.identifiable and s.accuracy.difficulty is not None
    # independent errors: no unanimity excess, so the population figure (≈ the vote share, far below the truth on
    # such a crowd) stays out of the range
    assert abs(d.unanimous_z) < 1.645 and not s.accuracy.population_in_range
    assert s.accuracy.population is not None and s.accuracy.population < s.accuracy.low


def test_large_data_reads_a_row_order_invariant_subset(monkeypatch):
    df, _, _ = two_type_crowd(2, n=300)
    monkeypatch.setattr(difficulty, "MAX_RESPONSES", 1000)
    resp, post, label = _fit(df)
    d = difficulty_mixture(resp, post, label)
    assert 1000 // 9 - 1 <= d.n_items <= 1000 // 9
    shuffled = df.sample(frac=1.0, random_state=3)
    resp2 = Responses.from_frame(shuffled)
    order = resp2.items.get_indexer(resp.items)
    post2, label2 = np.empty_like(post), np.empty_like(label)
    post2[order], label2[order] = post, label
    d2 = difficulty_mixture(resp2, post2, label2)
    assert d2.n_items == d.n_items and d2.hard_share == pytest.approx(d.hard_share, abs=1e-6)


def test_one_label_share_by_hand():
    # a: 10 responses all "x" (one-label); b: 10 with two labels; c: 3 responses all "x" (too few to count)
    rows = [(f"t{i}", "a", "x") for i in range(10)] + [(f"t{i}", "b", "xy"[i % 2]) for i in range(10)]
    rows += [(f"t{i}", "c", "x") for i in range(3)]
    resp = Responses.from_frame(pd.DataFrame(rows, columns=["task", "worker", "label"]))
    assert one_label_share(resp) == pytest.approx(10 / 23)


def test_labelling_functions_make_the_accuracy_inestimable():
    sim = labelling_functions(n_items=600, seed=0)
    resp = Responses.from_frame(sim.responses)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = create("ds").fit(resp).result_
    s = label_safety(resp, fit, fit.label_codes, create("mv").fit(resp).result_.label_codes)
    acc = s.accuracy
    assert acc.one_label and not acc.identifiable and not acc.pinned
    summary = s.summary()
    assert summary["accuracy_can_be_estimated"] is False and summary["accuracy_estimate"] is None
    assert "cannot be estimated" in accuracy_words(acc, resp.n_items)


def test_words_when_items_differ_in_difficulty():
    df, _, _ = two_type_crowd(0)
    resp, post, label = _fit(df)
    d = difficulty_mixture(resp, post, label)
    acc = AccuracyRange(0.95, 0.8, 0.97, 0.9, 0.96, None, (), d)
    text = accuracy_words(acc, resp.n_items)
    assert not acc.identifiable and not acc.pinned
    assert "cannot be estimated from the responses alone" in text and "differ in difficulty" in text
    assert f"{d.unanimous:,} items are unanimous" in text


@pytest.mark.slow
def test_two_type_crowds_are_flagged_and_covered_over_many_seeds():
    # 20 seeds of the two-type crowd: the check fires on every one, and the range of label_safety (ds's own
    # interval plus the two difficulty figures) covers the true accuracy (± 1 pt) on at least 85 % of them
    fired = covered = 0
    for seed in range(20):
        df, truth, _ = two_type_crowd(100 + seed)
        resp = Responses.from_frame(df)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = create("ds").fit(resp).result_
        label = np.asarray(fit.label_codes)
        acc = label_safety(resp, fit, label, create("mv").fit(resp).result_.label_codes).accuracy
        true_acc = float((resp.classes.take(label).to_numpy() == truth[resp.items.to_numpy()]).mean())
        fired += not acc.identifiable
        covered += acc.low - 0.01 <= true_acc <= acc.high + 0.01
    print(f"two-type crowds: check fired {fired}/20, range covered {covered}/20")
    assert fired == 20 and covered >= 17


def shared_error_crowd(seed: int, n: int = 600, k: int = 3) -> tuple[pd.DataFrame, np.ndarray]:
    """30 annotators of accuracy 0.65–0.95, 7 responses per item; 30 % of the items are hard (accuracy 0.45 lower,
    floor 1/k) and on half of those every annotator leans to the same wrong label: errors shared item by item."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n)
    acc = rng.uniform(0.65, 0.95, 30)
    hard = rng.random(n) < 0.3
    lean = np.where(hard & (rng.random(n) < 0.5), (truth + rng.integers(1, k, n)) % k, -1)
    item = np.repeat(np.arange(n), 7)
    worker = np.concatenate([rng.choice(30, 7, replace=False) for _ in range(n)])
    a = np.where(hard[item], np.maximum(acc[worker] - 0.45, 1.0 / k), acc[worker])
    other = (truth[item] + rng.integers(1, k, len(item))) % k
    label = np.where(rng.random(len(item)) < a, truth[item], np.where(lean[item] >= 0, lean[item], other))
    return pd.DataFrame({"task": item, "worker": worker, "label": label}), truth


def _range_and_truth(df: pd.DataFrame, truth: np.ndarray):
    resp, _, label = _fit(df)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = create("ds").fit(resp).result_
    acc = label_safety(resp, fit, label, create("mv").fit(resp).result_.label_codes).accuracy
    true_acc = float((resp.classes.take(label).to_numpy() == truth[resp.items.to_numpy()]).mean())
    return acc, true_acc


def test_population_shares_by_hand():
    # t0: a a b (label a: 2/3); t1: b b (label b: 1); t2: a (one response: the mean share of label a over the
    # items with two or more responses labelled a, i.e. t0's 2/3)
    rows = [("t0", "w1", "a"), ("t0", "w2", "a"), ("t0", "w3", "b"), ("t1", "w1", "b"), ("t1", "w2", "b")]
    rows += [("t2", "w1", "a")]
    resp = Responses.from_frame(pd.DataFrame(rows, columns=["task", "worker", "label"]))
    label = np.array([0, 1, 0])  # a, b, a
    np.testing.assert_allclose(population_shares(resp, label), [2 / 3, 1.0, 2 / 3])
    assert population_accuracy(resp, label) == pytest.approx((2 / 3 + 1 + 2 / 3) / 3)
    single = Responses.from_frame(
        pd.DataFrame([("t2", "w1", "a"), ("t3", "w2", "b")], columns=["task", "worker", "label"])
    )
    assert population_accuracy(single, np.array([0, 1])) is None


def test_shared_errors_are_seen_and_the_population_end_covers_the_truth():
    # the one-type figures overstate (the crowd agrees on its shared mistakes); the unanimity excess shows the
    # shared errors and the population figure brings the range's low end down to the truth
    df, truth = shared_error_crowd(0)
    acc, true_acc = _range_and_truth(df, truth)
    d = acc.difficulty
    assert d is not None and d.unanimous_z > 1.645 and acc.shared_confusion and acc.population_in_range
    assert min(acc.model, acc.estimate) > true_acc + 0.05  # what the population figure is for
    assert acc.population is not None and acc.low == pytest.approx(min(acc.low, acc.population))
    assert acc.low - 0.01 <= true_acc <= acc.high + 0.01
    # verdicts re-scale skills by the latent-truth figures only: the population figure is not among them
    # (the estimate stacks the latent-class and population models, so its latent-class part is the one counted)
    figures = [acc.model, acc.latent_estimate, *(f for _, f in acc.by_model), d.accuracy, d.at_chance]
    assert acc.reference_low > acc.low and acc.reference_low <= min(figures) + 1e-12
    text = accuracy_words(acc, 600)
    assert "one more annotator's" in text and f"{100 * acc.population:.0f}%" in text
    assert ("share mistakes item by item" in text) == (not d.flagged)  # the difficulty words quote the counts
    summary = d.summary()
    assert summary["errors_shared_item_by_item"] is True and summary["unanimous_items_sd_if_equally_hard"] > 0


@pytest.mark.slow
def test_shared_error_crowds_are_covered_and_ds_crowds_keep_their_range_over_many_seeds():
    # 20 shared-error crowds: the range covers the truth (± 1 pt) on ≥ 85 %; 20 Dawid–Skene crowds (independent
    # errors): the unanimity test (one-sided 5 %) adds the population figure on at most 3
    covered = fired_shared = 0
    for seed in range(20):
        acc, true_acc = _range_and_truth(*shared_error_crowd(200 + seed))
        covered += acc.low - 0.01 <= true_acc <= acc.high + 0.01
        fired_shared += acc.shared_confusion
    fired_ds = 0
    for seed in range(20):
        sim = dawid_skene(n_items=600, n_workers=30, n_classes=3, responses_per_item=7, seed=300 + seed)
        resp, post, label = _fit(sim.responses)
        fired_ds += difficulty_mixture(resp, post, label).overdispersed
    print(f"shared errors: covered {covered}/20, test fired {fired_shared}/20; Dawid–Skene crowds: fired {fired_ds}/20")
    assert covered >= 17 and fired_ds <= 3
