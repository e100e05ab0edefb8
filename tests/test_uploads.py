"""The data layer behind the app's Data page: datasets and their fingerprints, upload readers, demo datasets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fusion_core.data.dataset import fingerprint, make_dataset
from fusion_core.data.graph import ItemGraph, graph_for_responses
from fusion_core.data.responses import Responses
from fusion_core.data.uploads import (
    build_responses,
    context_from_table,
    find_markup,
    guess_column,
    read_context_upload,
    read_gold_upload,
    read_graph_upload,
    read_upload,
)
from fusion_core.errors import UserInputError
from fusion_core.simulate import dawid_skene
from fusion_core.simulate.demo import DEMOS, demo_dataset, load_demo


@pytest.fixture(scope="module")
def table():
    sim = dawid_skene(n_items=40, n_workers=5, n_classes=2, responses_per_item=3, seed=0)
    return sim.responses.rename(columns={"task": "item_id", "worker": "annotator", "label": "answer"})


@pytest.fixture(scope="module")
def resp(table):
    return build_responses(table, layout="long", task="item_id", worker="annotator", label="answer")


def _csv(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode()


def test_column_roles_are_guessed_by_name():
    cols = ["Item_ID", "rater", "Rating", "seq", "pos", "score"]
    taken: set[str] = set()
    guesses = {}
    for role in ("task", "worker", "label", "sequence", "position", "context"):
        guesses[role] = guess_column(cols, role, taken)
        taken.add(guesses[role])
    assert guesses == {
        "task": "Item_ID",
        "worker": "rater",
        "label": "Rating",
        "sequence": "seq",
        "position": "pos",
        "context": "score",
    }
    assert guess_column(["a", "b"], "task") is None
    assert guess_column(["task"], "task", {"task"}) is None


def test_upload_reading_and_mapping_errors(table, resp):
    assert resp.n_items == 40 and resp.n_workers == 5
    with pytest.raises(UserInputError, match="upload limit"):
        read_upload("big.csv", _csv(table), limit=100)
    assert len(read_upload("ok.csv", _csv(table), limit=10**6)) == len(table)
    with pytest.raises(UserInputError, match="three different columns"):
        build_responses(table, layout="long", task="item_id", worker="item_id", label="answer")
    with pytest.raises(UserInputError, match="choose the task"):
        build_responses(table, layout="long", task="item_id", worker=None, label="answer")
    html = table.assign(answer=table["answer"].astype(str).replace("1", "<b>one</b>"))
    with pytest.raises(UserInputError, match="HTML markup"):
        build_responses(html, layout="long", task="item_id", worker="annotator", label="answer")
    assert find_markup(["ok", "&amp;", "<i>x</i>", 3, "a < b"]) == ["&amp;", "<i>x</i>"]


def test_gold_context_and_graph_uploads(table, resp):
    gold = pd.DataFrame({"task": list(resp.items[:10]) + ["unknown"], "truth": [0] * 10 + [1]})
    g = read_gold_upload("gold.csv", _csv(gold), resp, limit=10**6)
    assert len(g) == 10 and set(g.index) <= set(resp.items)  # unknown tasks dropped
    with pytest.raises(UserInputError, match="none of the gold tasks"):
        read_gold_upload("gold.csv", _csv(gold.assign(task=[f"zz{i}" for i in range(len(gold))])), resp, limit=10**6)
    with pytest.raises(UserInputError, match="HTML markup"):
        read_gold_upload("gold.csv", _csv(gold.assign(truth="<b>x</b>")), resp, limit=10**6)
    ctx = pd.DataFrame({"task": resp.items, "context": np.arange(resp.n_items) / 10})
    c = read_context_upload("ctx.csv", _csv(ctx), resp, limit=10**6)
    assert c.name == "context" and len(c) == resp.n_items
    with pytest.raises(UserInputError, match="upload limit"):
        read_context_upload("ctx.csv", _csv(ctx), resp, limit=10)
    values = {t: 2.0 * i for i, t in enumerate(resp.items)}
    in_table = context_from_table(table.assign(ctx=table["item_id"].map(values)), "item_id", "ctx", resp)
    assert len(in_table) == resp.n_items and in_table.to_dict() == values
    with pytest.raises(UserInputError, match="numeric"):
        context_from_table(table.assign(ctx="high"), "item_id", "ctx", resp)
    items = list(resp.items)
    edges = pd.DataFrame({"source": items[:-1], "target": items[1:]})
    graph = read_graph_upload("edges.csv", _csv(edges), resp, limit=10**6)
    assert isinstance(graph, ItemGraph) and graph.n_edges == resp.n_items - 1
    with pytest.raises(UserInputError, match="not tasks"):
        read_graph_upload("edges.csv", _csv(edges.assign(target="nope")), resp, limit=10**6)


def test_fingerprints_follow_what_a_fit_depends_on(resp):
    ds = make_dataset(resp, name="x", source="upload")
    assert ds.fingerprint == fingerprint(resp) and ds.inputs == ("plain",) and ds.gold_fingerprint is None
    gold = pd.Series(np.zeros(5, dtype=int), index=resp.items[:5])
    with_gold = ds.with_gold(gold)
    assert with_gold.fingerprint == ds.fingerprint and with_gold.gold_fingerprint is not None
    assert with_gold.fit_inputs((), use_gold=True)["true_labels"] is gold and ds.fit_inputs(()) == {}
    ctx = pd.Series(np.arange(resp.n_items, dtype=float), index=resp.items)
    with_ctx = ds.with_context(ctx)
    assert with_ctx.fingerprint != ds.fingerprint and "context" in with_ctx.inputs
    assert with_ctx.with_context(ctx * 2).fingerprint != with_ctx.fingerprint
    items = list(resp.items)
    edges = pd.DataFrame({"source": items[:3], "target": items[1:4]})
    with_graph = ds.with_graph(graph_for_responses(edges, resp), "edges.csv")
    assert with_graph.fingerprint != ds.fingerprint and "graph" in with_graph.inputs
    assert with_graph.graph_view.number_of_edges() == 3
    assert with_graph.fit_inputs(("graph",))["graph"] is with_graph.graph
    assert fingerprint(Responses.from_frame(resp.to_frame().iloc[1:])) != ds.fingerprint


@pytest.mark.parametrize("key", list(DEMOS))
def test_demo_datasets(key):
    ds = demo_dataset(key)
    demo = load_demo(key)
    assert ds.source == "demo" and ds.gold is not None and ds.roles is not None
    assert ds.responses.n_responses == len(demo.responses)
    assert set(ds.roles.index) == set(ds.responses.workers)
    assert ("sequence" in ds.inputs) == (key == "sequence") and ("graph" in ds.inputs) == (key == "graph")
    assert demo_dataset(key).fingerprint == ds.fingerprint  # deterministic
    with pytest.raises(UserInputError, match="unknown demo"):
        load_demo("nope")


def test_guess_layout_wide_versus_long_with_small_extra_columns():
    import numpy as np
    import pandas as pd

    from fusion_core.data.uploads import guess_layout

    rng = np.random.default_rng(0)
    long = pd.DataFrame(
        {
            "task": np.arange(200).astype(str),
            "worker": rng.integers(0, 50, 200).astype(str),
            "label": rng.choice(["cat", "dog"], 200),
            "confidence": rng.integers(1, 6, 200).astype(str),  # a 1–5 scale and a round number: not annotators
            "round": rng.integers(1, 4, 200).astype(str),
        }
    )
    assert guess_layout(long) == ("long", 0)
    wide = pd.DataFrame({"task": np.arange(50), **{f"w{i}": rng.choice(["a", "b", None], 50) for i in range(5)}})
    assert guess_layout(wide) == ("wide", 5)
    assert guess_layout(wide.iloc[:, :3]) == ("long", 0)  # too few columns to tell


def test_files_that_are_not_tables_are_named():
    from fusion_core.data.uploads import read_upload, sniff_not_a_table
    from fusion_core.errors import UserInputError

    assert sniff_not_a_table("x.csv", b"\xef\xbb\xbf  <!doctype html><html>") == "HTML (a web page)"
    assert sniff_not_a_table("x.csv", b"%PDF-1.7") == "a PDF document"
    assert sniff_not_a_table("x.csv", b"PK\x03\x04rest") is not None
    assert sniff_not_a_table("x.csv", b"task,worker,label\n<b>,w,1\n") is None
    assert sniff_not_a_table("x.parquet", b"PAR1....") is None
    with pytest.raises(UserInputError, match="looks like HTML"):
        read_upload("export.csv", b"<html><body>login</body></html>", 10_000)
