"""Exact ties (issue 11): hard decisions between tied classes follow the data, never the internal class codes.

The rule (fusion_core.methods.ties): the tied class with more responses over the whole table wins, then the class
that appears first in the table.  Hand-built tied cases for every family show the rule and that renaming the
labels (which reorders the codes) or shuffling the rows does not change a labelling.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fusion_core.data.responses import Responses
from fusion_core.methods import available, create
from fusion_core.methods.ties import argmax_ties, class_priority

PLAIN = [m.name for m in available() if m.inputs == ("plain",)]


def fit(name: str, df: pd.DataFrame, **kwargs: Any):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create(name).fit(df, **kwargs)


def renamed(df: pd.DataFrame, mapping: dict[str, str]) -> pd.DataFrame:
    return df.assign(label=df["label"].map(mapping))


def assert_renaming_invariant(name: str, df: pd.DataFrame, mapping: dict[str, str], **kwargs: Any) -> pd.Series:
    a, b = fit(name, df, **kwargs), fit(name, renamed(df, mapping), **kwargs)
    pd.testing.assert_series_equal(a.labels_.map(mapping), b.labels_.reindex(a.labels_.index), check_names=False)
    return a.labels_


def long(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["task", "worker", "label"])


# ------------------------------------------------------------------------------------------------ the rule
def test_priority_is_more_votes_then_first_appearance():
    df = long([("1", "a", "m"), ("1", "b", "z"), ("2", "a", "z"), ("2", "b", "z"), ("3", "a", "b"), ("3", "b", "m")])
    resp = Responses.from_frame(df)
    assert list(resp.classes) == ["b", "m", "z"]  # codes follow the sorted text …
    assert class_priority(resp).tolist() == [2, 1, 0]  # … priority follows the data: z (3 votes), m (first), b
    post = np.array([[0.5, 0.5, 0.0], [0.2, 0.4, 0.4], [1 / 3, 1 / 3, 1 / 3], [0.6, 0.4, 0.0]])
    assert argmax_ties(post, class_priority(resp)).tolist() == [1, 2, 2, 0]


def test_majority_vote_two_against_two():
    """A 2-vs-2 item goes to the label with more votes over the table, whatever the names."""
    rows = [("t1", w, lab) for w, lab in zip("abcd", "xxyy")] + [("t2", w, lab) for w, lab in zip("abcd", "yyyx")]
    df = long(rows)
    assert fit("mv", df).labels_["t1"] == "y"  # y: 5 votes, x: 3
    for mapping in ({"x": "b", "y": "a"}, {"x": "a", "y": "b"}):
        assert assert_renaming_invariant("mv", df, mapping)["t1"] == "y"
    smallest = create("mv", tie_break="smallest")  # the code-order rule, kept for the datasets' mv_accuracy
    assert (
        smallest.fit(df).labels_["t1"] == "x" and smallest.fit(renamed(df, {"x": "b", "y": "a"})).labels_["t1"] == "a"
    )


def test_majority_vote_equal_totals_go_to_the_first_label_in_the_table():
    df = long([("t1", "a", "q"), ("t1", "b", "p"), ("t2", "a", "p"), ("t2", "b", "q")])
    assert fit("mv", df).labels_.tolist() == ["q", "q"]  # q is written first
    assert fit("mv", renamed(df, {"q": "a", "p": "b"})).labels_.tolist() == ["a", "a"]
    assert fit("mv", df.iloc[::-1]).labels_.tolist() == ["q", "q"]  # t2's row "q" is still before its "p" …
    assert fit("mv", df.iloc[[1, 0, 2, 3]]).labels_.tolist() == ["p", "p"]  # … only the table's order decides


def symmetric_crowd(n_items: int = 12) -> pd.DataFrame:
    """Two annotators who always disagree, the two labels used equally often: every posterior is exactly tied."""
    rows = []
    for i in range(n_items):
        first, second = ("dog", "cat") if i % 2 == 0 else ("cat", "dog")
        rows += [(f"i{i:02d}", "ann", first), (f"i{i:02d}", "bob", second)]
    return long(rows)


@pytest.mark.parametrize("name", PLAIN)
def test_fully_tied_items_follow_the_table_not_the_codes(name):
    """Every item tied, equal totals: every method that reports a tie labels it with the label written first
    ("dog", which sorts after "cat"), and renaming the labels so that they sort the other way changes nothing."""
    df = symmetric_crowd()
    labels = assert_renaming_invariant(name, df, {"dog": "a-dog", "cat": "z-cat"})
    est = fit(name, df)
    tied = np.isclose(est.probas_["dog"], est.probas_["cat"], atol=1e-9)
    assert (labels[tied] == "dog").all()


@pytest.mark.parametrize("name", PLAIN)
def test_two_against_two_items_are_renaming_invariant(name):
    rng = np.random.default_rng(3)
    rows = []
    for i in range(40):
        labs = rng.choice(["lo", "mid", "hi"], size=4, p=[0.5, 0.3, 0.2])
        if i % 3 == 0:  # an exact 2-vs-2 split
            labs = np.array([labs[0], labs[0], *(["mid", "mid"] if labs[0] != "mid" else ["hi", "hi"])])
        rows += [(f"t{i}", w, str(lab)) for w, lab in zip("abcd", labs)]
    df = long(rows)
    if name in (
        "ordinal-em",
        "ordinal-ds",
    ):  # the scale is the labels' order (hi < lo < mid as text): a renaming may reverse it
        assert_renaming_invariant(name, df, {"hi": "3", "lo": "2", "mid": "1"})
        return
    assert_renaming_invariant(name, df, {"lo": "z", "mid": "a", "hi": "m"})


def test_moment_matching_start_on_ten_classes():
    """The issue's case: 10 classes, 25 items, few responses each — the majority-vote start of mm had ties."""
    from fusion_core.simulate import dawid_skene

    sim = dawid_skene(n_items=25, n_workers=6, n_classes=10, responses_per_item=3, seed=4)
    names = sorted(sim.responses["label"].unique())
    perm = np.random.default_rng(0).permutation(len(names))
    mapping = {c: f"c{perm[i]:02d}" for i, c in enumerate(names)}
    for name in ("mm", "mm-ds", "ds", "mv"):
        assert_renaming_invariant(name, sim.responses, mapping)


# ------------------------------------------------------------------------------------- sequences and graphs
def tied_sequences() -> pd.DataFrame:
    rows = []
    for s in range(4):
        for p in range(6):
            a, b = ("B", "A") if (s + p) % 2 else ("A", "B")
            rows += [(f"s{s}_{p}", "w1", a, s, p), (f"s{s}_{p}", "w2", b, s, p), (f"s{s}_{p}", "w3", a, s, p)]
            if p % 3 == 0:
                rows.append((f"s{s}_{p}", "w4", b, s, p))  # a 2-vs-2 split
    return pd.DataFrame(rows, columns=["task", "worker", "label", "sequence", "position"])


@pytest.mark.parametrize("name", ["hmm-em", "hmm-mm", "hmm-mv"])
def test_sequence_methods_are_renaming_invariant_on_ties(name):
    df = tied_sequences()
    assert_renaming_invariant(name, df, {"A": "zz", "B": "aa"})
    sym = symmetric_crowd(12)
    sym["sequence"], sym["position"] = 0, np.repeat(np.arange(12), 2)
    assert_renaming_invariant(name, sym, {"dog": "a-dog", "cat": "z-cat"})


@pytest.mark.parametrize("name", ["mrf-em", "mrf-mv"])
def test_graph_methods_are_renaming_invariant_on_ties(name):
    df = symmetric_crowd(12)
    items = sorted(df["task"].unique())
    edges = pd.DataFrame({"source": items[:-1], "target": items[1:]})
    labels = assert_renaming_invariant(name, df, {"dog": "a-dog", "cat": "z-cat"}, graph=edges)
    assert labels.nunique() == 1  # a chain of tied items: one label, the one written first
    assert labels.iloc[0] == "dog"


def test_context_method_is_renaming_invariant_on_ties():
    df = symmetric_crowd(12)
    ctx = pd.Series(np.linspace(0.0, 1.0, 12), index=sorted(df["task"].unique()))
    assert_renaming_invariant("context-em", df, {"dog": "a-dog", "cat": "z-cat"}, context=ctx)


# ------------------------------------------------------------------------------------------ row order
@pytest.mark.parametrize("name", [*PLAIN, "hmm-em", "mrf-mv"])
def test_row_order_does_not_change_tied_labels_when_totals_differ(name):
    """Shuffling the rows changes neither probabilities nor labels when the whole-table counts break the ties."""
    df = symmetric_crowd(12)
    df = pd.concat([df, long([("i00", "cid", "dog"), ("i01", "cid", "dog"), ("i02", "cid", "cat")])])
    kwargs: dict[str, Any] = {}
    if name.startswith("hmm"):
        df = df.assign(sequence=0, position=df["task"].str[1:].astype(int))
    if name.startswith("mrf"):
        items = sorted(df["task"].unique())
        kwargs["graph"] = pd.DataFrame({"source": items[:-1], "target": items[1:]})
    a = fit(name, df.reset_index(drop=True), **kwargs)
    b = fit(name, df.sample(frac=1.0, random_state=5).reset_index(drop=True), **kwargs)
    pb = b.probas_.reindex(index=a.probas_.index, columns=a.probas_.columns)
    np.testing.assert_allclose(a.probas_.to_numpy(float), pb.to_numpy(float), atol=1e-6)
    pd.testing.assert_series_equal(a.labels_, b.labels_.reindex(a.labels_.index))
