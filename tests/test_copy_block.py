"""Copies that are most of the crowd (issue 21, item 4; fusion_core.diagnostics.audit.copy_block): the block grown
by hand, a majority of classifiers copying one source found and counted once (the range reaches the truth and the
accuracy is marked not estimable), nothing on a Dawid–Skene crowd, the same figure where the pair test found the
copies too; slow: many seeds of both."""

from __future__ import annotations

import numpy as np
import pytest
from test_dependence import _ensemble_range
from test_difficulty import _fit

from fusion_core.diagnostics.audit.copy_block import grow_block
from fusion_core.diagnostics.audit.difficulty import difficulty_mixture
from fusion_core.diagnostics.audit.words import accuracy_words
from fusion_core.simulate.dawid_skene import dawid_skene
from fusion_core.simulate.weak import classifier_ensemble


def test_grow_block_by_hand():
    # 7 annotators: 0–3 a block (κ .9 among them), 4–6 independent with skill .6, everyone else at .6 × .7 = .42
    # (the block members' skill .7 against the rest): the block beats every other nested set on inner − cross
    v = np.array([0.7, 0.7, 0.7, 0.7, 0.6, 0.6, 0.6])
    a, b = np.triu_indices(7, 1)
    kappa = v[a] * v[b]
    kappa[(a < 4) & (b < 4)] = 0.9
    kappa[(a == 1) & (b == 2)] = 0.95  # the seed pair
    got = grow_block(a, b, kappa, np.full(len(a), 100.0), 7)
    assert got.tolist() == [True] * 4 + [False] * 3


def _majority_range(seed: int, n_items: int):
    return _ensemble_range(seed, n_items, n_classes=3, n_members=8)


def test_copies_that_are_most_of_the_crowd_are_counted_once():
    s, true_acc = _majority_range(0, 600)
    acc = s.accuracy
    d = acc.difficulty
    assert d is not None and d.copy_block is not None
    block = d.copy_block
    assert set(block.annotators) == {f"m{j}" for j in range(8)}  # the members, no one else
    assert acc.model > true_acc + 0.1  # the copies define the latent class: the model overstates
    assert abs(block.accuracy - true_acc) < 0.05
    assert acc.low - 0.01 <= true_acc <= acc.high + 0.01 and not acc.identifiable
    assert acc.reference_low > block.accuracy  # the verdicts' reference leaves it out
    assert f"If they are one source, about {100 * block.accuracy:.0f}%" in accuracy_words(acc, 600)
    summary = s.summary()
    assert summary["accuracy_estimate"] is None and not summary["accuracy_can_be_estimated"]
    assert summary["accuracy_difficulty_check"]["copy_block"]["accuracy_block_as_one_source"] == block.accuracy


def test_no_block_on_a_dawid_skene_crowd():
    sim = dawid_skene(n_items=400, n_workers=12, n_classes=2, responses_per_item=6, seed=4)
    resp, post, label = _fit(sim.responses)
    d = difficulty_mixture(resp, post, label)
    assert d.dependence is not None and d.dependence.pairs_tested > 30 and d.copy_block is None


def test_good_annotators_beside_spammers_are_no_block():
    # 6 good annotators and 2 spammers, everyone on every item: the good ones agree with each other far more than
    # with the spammers, but the spammers' pairs fix no scale, so nothing reads the block's skills (a block was
    # reported on this crowd before the others had to agree beyond chance)
    sim = dawid_skene(n_items=800, n_workers=8, n_classes=2, responses_per_item=8, spammers=2, seed=2)
    resp, post, label = _fit(sim.responses)
    assert difficulty_mixture(resp, post, label).copy_block is None


def test_copies_the_pair_test_found_give_the_same_figure():
    # a minority of copies by count (6 members beside 6 independent annotators) that gives most of the responses:
    # the pair test finds and weighs them; the block test finds the same annotators and, counting them once, about
    # the same figure
    sim = classifier_ensemble(n_items=600, seed=0)
    resp, post, label = _fit(sim.responses)
    d = difficulty_mixture(resp, post, label)
    assert d.dependence is not None and d.dependence.found and d.copy_block is not None
    assert set(d.copy_block.annotators) == set(d.dependence.annotators) == {f"m{j}" for j in range(6)}
    assert abs(d.copy_block.accuracy - d.dependence.accuracy) < 0.04


@pytest.mark.slow
def test_copy_block_over_many_seeds():
    # 10 majority ensembles: block found, covered and figure within 5 pt on ≥ 9; 20 Dawid–Skene crowds: found on ≤ 1
    found = covered = near = 0
    for seed in range(10):
        s, true_acc = _majority_range(100 + seed, 1500)
        acc = s.accuracy
        block = acc.difficulty.copy_block if acc.difficulty is not None else None
        found += block is not None
        covered += acc.low - 0.01 <= true_acc <= acc.high + 0.01
        near += block is not None and abs(block.accuracy - true_acc) < 0.05
    false = 0
    for seed in range(20):
        sim = dawid_skene(n_items=600, n_workers=30, n_classes=3, responses_per_item=7, seed=500 + seed)
        resp, post, label = _fit(sim.responses)
        false += difficulty_mixture(resp, post, label).copy_block is not None
    print(f"majority ensembles: block {found}/10, covered {covered}/10, within 5 pt {near}/10; DS found {false}/20")
    assert found >= 9 and covered >= 9 and near >= 9 and false <= 1
