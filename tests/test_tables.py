"""The shared tables (annotator, item, confusion): typed fields only, one row per annotator / item."""

from __future__ import annotations

import re
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.compare import compare_methods
from fusion_core.diagnostics.tables import (
    annotator_table,
    confusion_table,
    filter_items,
    item_table,
    label_confidence,
)
from fusion_core.methods import DawidSkene, available, create
from fusion_core.methods.results import AnnotatorColumn
from fusion_core.simulate import dawid_skene

NOT_PER_ANNOTATOR = re.compile(r"eigen|ranking", re.IGNORECASE)


@pytest.fixture(scope="module")
def crowd():
    sim = dawid_skene(n_items=150, n_workers=9, n_classes=2, responses_per_item=5, spammers=1, seed=3)
    return sim, Responses.from_frame(sim.responses)


@pytest.fixture(scope="module")
def ds_fit(crowd):
    return DawidSkene().fit(crowd[1])


@pytest.mark.parametrize("name", [m.name for m in available() if not m.needs()])
def test_annotator_table_holds_only_per_annotator_quantities(crowd, name):
    _, resp = crowd
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = create(name).fit(resp).result_
    table = annotator_table(res, resp)
    assert len(table) == resp.n_workers and table.index.is_unique
    assert set(table.index) == set(resp.workers.astype(str))
    titles = [
        c.title if c.title not in ("accuracy", "responses") else f"{c.title} ({c.key})" for c in res.annotator_columns
    ]
    assert list(table.columns) == ["accuracy", "responses", *titles]
    assert not [c for c in table.columns if NOT_PER_ANNOTATOR.search(str(c))]
    for col in res.annotator_columns:  # each column is the method's values, annotator by annotator
        by_worker = pd.Series(np.asarray(col.values), index=res.workers.astype(str))
        header = col.title if col.title != "accuracy" else f"{col.title} ({col.key})"
        np.testing.assert_array_equal(table[header].to_numpy(), by_worker.reindex(table.index).to_numpy())
    np.testing.assert_allclose(table["accuracy"], res.skills.set_axis(res.workers.astype(str)).reindex(table.index))
    assert table["accuracy"].is_monotonic_decreasing
    counts = pd.Series(resp.responses_per_worker, index=resp.workers.astype(str))
    np.testing.assert_array_equal(table["responses"], counts.reindex(table.index))


def test_same_length_arrays_never_become_annotator_columns(ds_fit, crowd):
    """The old table took any per-worker-length array for an annotator column (eigenvalues, ranking)."""
    _, resp = crowd
    w = resp.n_workers
    res = replace(
        ds_fit.result_,
        details={"eigenvalues": np.linspace(3, 0, w), "ranking": np.arange(w), "pair_residual": np.ones(w)},
        annotator_columns=(AnnotatorColumn("balanced_accuracy", "balanced accuracy", np.linspace(0.5, 1, w)),),
    )
    table = annotator_table(res, resp)
    assert list(table.columns) == ["accuracy", "responses", "balanced accuracy"]


def test_annotator_table_intervals_roles_and_title_clash(ds_fit, crowd):
    sim, resp = crowd
    res = replace(
        ds_fit.result_,
        annotator_columns=(AnnotatorColumn("skill_raw", "accuracy", np.zeros(resp.n_workers), "a clashing title"),),
    )
    skills = res.skills
    intervals = pd.DataFrame({"low": skills - 0.1, "high": skills + 0.2}, index=skills.index)
    table = annotator_table(res, resp, intervals=intervals, roles=sim.role)
    assert list(table.columns) == [
        "accuracy",
        "responses",
        "accuracy (skill_raw)",
        "accuracy low",
        "accuracy high",
        "simulated role",
    ]
    np.testing.assert_allclose(table["accuracy high"] - table["accuracy"], 0.2)
    spammer = sim.role[sim.role == "spammer"].index.astype(str)
    assert (table.loc[spammer, "simulated role"] == "spammer").all()


def test_item_table_uses_the_methods_own_labels(ds_fit, crowd):
    sim, resp = crowd
    res = ds_fit.result_
    table = item_table(res, resp, gold=sim.truth)
    assert len(table) == resp.n_items and table.index.name == "task"
    np.testing.assert_array_equal(table["label"], res.labels.astype(str).to_numpy())
    np.testing.assert_allclose(table["confidence"], res.posterior.max(axis=1))
    np.testing.assert_allclose(table[[f"P({c})" for c in res.classes]].sum(axis=1), 1.0)
    assert (table["gold"] == sim.truth.astype(str).reindex(res.items).to_numpy()).all()
    # a joint decoding (e.g. Viterbi) that differs from the posterior argmax is what the table shows
    flipped = 1 - res.posterior.argmax(axis=1)
    joint = replace(res, hard_labels=flipped)
    t2 = item_table(joint, resp)
    np.testing.assert_array_equal(t2["label"], res.classes.take(flipped).astype(str))
    np.testing.assert_allclose(t2["confidence"], res.posterior[np.arange(len(flipped)), flipped])
    np.testing.assert_allclose(label_confidence(joint), t2["confidence"])
    # ... and the Compare page's labels agree with it
    cmp = compare_methods({"argmax": res, "joint": joint})
    assert cmp.changed.loc["argmax", "joint"] == resp.n_items


def test_filter_items_orders(ds_fit, crowd):
    table = item_table(ds_fit, crowd[1])
    low = filter_items(table, labels=None, search="", sort="lowest confidence first")
    assert low["confidence"].is_monotonic_increasing
    one = table["label"].iloc[0]
    only = filter_items(table, labels=[one], search="", sort="highest entropy first")
    assert (only["label"] == one).all() and only["entropy"].is_monotonic_decreasing
    tid = table.index[5]
    assert tid in filter_items(table, labels=None, search=tid, sort="task id").index


def test_confusion_table_long_form(ds_fit, crowd):
    res = ds_fit.result_
    conf = confusion_table(res)
    w, k, _ = res.confusion.shape
    assert list(conf.columns) == ["worker", "true", "reported", "probability"] and len(conf) == w * k * k
    assert conf.groupby(["worker", "true"])["probability"].sum().round(9).eq(1).all()
    row = conf[(conf["worker"] == res.workers[2]) & (conf["true"] == res.classes[0])]
    np.testing.assert_allclose(row["probability"], res.confusion[2, 0])
    assert confusion_table(create("mv").fit(crowd[1])) is None


def test_skill_lower_bound_penalises_little_evidence():
    from fusion_core.diagnostics.tables import skill_lower_bound

    low = skill_lower_bound(np.array([0.9, 0.85, 0.5]), np.array([10, 500, 500]))
    assert low[0] < low[1]  # 10 responses at 0.9 rank below 500 at 0.85
    assert np.all(low <= [0.9, 0.85, 0.5])
    # Wilson score interval by hand: p = 0.8, n = 100, z = 1.645 (90 % two-sided)
    z, p, n = 1.6448536269514722, 0.8, 100
    hand = (p + z * z / (2 * n) - z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / (1 + z * z / n)
    assert skill_lower_bound(np.array([p]), np.array([n]))[0] == pytest.approx(hand)


def test_annotator_table_lower_bound_column_and_order(ds_fit, crowd):
    table = annotator_table(ds_fit, crowd[1], lower_bound=True)
    assert list(table.columns[:4]) == ["accuracy", "accuracy (lower bound)", "accuracy (shrunk)", "responses"]
    assert table["accuracy (lower bound)"].is_monotonic_decreasing


def test_shrunk_accuracy_matches_the_beta_posterior_by_hand():
    from scipy.stats import beta

    from fusion_core.diagnostics.tables import MIN_PRIOR, shrunk_accuracy

    acc, n = np.array([1.0, 0.8, 0.7]), np.array([10, 400, 600])
    out = shrunk_accuracy(acc, n)
    m = (10 + 0.8 * 400 + 0.7 * 600) / 1010  # response-weighted crowd accuracy
    assert out.crowd_mean == pytest.approx(m)
    s = out.prior_strength
    assert MIN_PRIOR <= s <= 20
    a0, b0 = max(s * m, 0.5), max(s * (1 - m), 0.5)
    assert out.estimate[0] == pytest.approx((a0 + 10) / (a0 + b0 + 10))
    assert out.low[0] == pytest.approx(beta.ppf(0.05, a0 + 10, b0))
    assert out.low[0] < 0.95 and out.high[0] > out.low[0]  # 10 perfect answers: never 1–1
    assert out.low[0] < out.low[1]  # below 400 answers at 0.8


@pytest.mark.parametrize("seed", [0, 1])
def test_few_responses_never_rank_near_one_on_an_imperfect_crowd(seed):
    """Issue 26: on simulated crowds where no annotator is perfect, no annotator with < 30 responses gets a
    ranking lower bound ≥ 0.99 (sparse zipf crowd: many annotators with a handful of responses, DS often fits
    them at accuracy 1)."""
    sim = dawid_skene(n_items=1500, n_workers=120, n_classes=2, accuracy=(0.7, 0.98), worker_activity="zipf", seed=seed)
    resp = Responses.from_frame(sim.responses)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = DawidSkene().fit(resp)
    table = annotator_table(fit, resp, lower_bound=True)
    few = table[table["responses"] < 30]
    assert len(few) > 20 and (few["accuracy"] > 0.99).any()  # the case the issue describes occurs
    assert (few["accuracy (lower bound)"] < 0.99).all()
    assert (table["accuracy (lower bound)"] <= table["accuracy (shrunk)"]).all()
    # a bootstrap that sees the same few perfect answers in every refit gives 1–1: the ranking still does not
    skills = fit.result_.skills
    collapsed = pd.DataFrame({"low": skills, "high": skills}, index=skills.index)
    table = annotator_table(fit, resp, intervals=collapsed, lower_bound=True)
    few = table[table["responses"] < 30]
    assert (few["accuracy (lower bound)"] < 0.99).all() and (few["accuracy low"] < few["accuracy high"]).all()


def test_plain_words_rewrites_internal_wording():
    from fusion_core.diagnostics.tables import plain_words

    assert plain_words("class imbalance b̂ = +0.990 is near ±1 (spec P3).") == (
        "the estimated class balance = +0.990 is near ±1."
    )
    assert plain_words("only 2 annotators (valid-pair fraction 0.001, core size 2, coverage 3%) left") == (
        "only 2 annotators left"
    )
    assert plain_words("label np.int64(0) never used") == "label 0 never used"
