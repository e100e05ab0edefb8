"""Streamlit AppTest: every page in every state (no data, demos, upload, after each method fit) and bad uploads."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fusion_core.methods import available
from fusion_core.simulate import dawid_skene

pytest.importorskip("streamlit.testing.v1")
from apptest import start_app
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

# production redacts exception details (.streamlit/config.toml); the tests report the real messages
st_config.set_option("client.showErrorDetails", True)

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    "pages/1_Data.py",
    "pages/2_Fit.py",
    "pages/3_Annotators.py",
    "pages/4_Cartels.py",
    "pages/5_Items.py",
    "pages/6_Compare.py",
]
TITLES = {
    "pages/1_Data.py": "Data",
    "pages/2_Fit.py": "Fit methods",
    "pages/3_Annotators.py": "Annotators",
    "pages/4_Cartels.py": "Cartels",
    "pages/5_Items.py": "Items",
    "pages/6_Compare.py": "Compare methods",
}
RESULT_PAGES = ["pages/3_Annotators.py", "pages/5_Items.py", "pages/6_Compare.py"]


def _app() -> AppTest:
    return start_app(timeout=120)


def _visit(at: AppTest, page: str) -> AppTest:
    at.switch_page(page).run()
    assert not at.exception, f"{page}: {[e.value for e in at.exception]}"
    assert any(t.value == TITLES[page] for t in at.title), f"{page}: title missing"
    return at


def _charts(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


def _frame(at: AppTest, *columns: str):
    """The first dataframe on the page that has all these columns (AppTest exposes no dataframe keys)."""
    for d in at.dataframe:
        v = d.value
        if set(columns) <= set(map(str, v.columns)):
            return v
    raise AssertionError(f"no dataframe with columns {columns}")


def _csv(df) -> bytes:
    return df.to_csv(index=False).encode()


def _upload(at: AppTest, name: str, data: bytes) -> AppTest:
    _visit(at, "pages/1_Data.py")
    at.file_uploader(key="upload_responses").set_value((name, data, "text/csv")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _use_columns(at: AppTest) -> AppTest:
    at.button(key="use_columns").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _fit(at: AppTest, methods: list[str]) -> AppTest:
    _visit(at, "pages/2_Fit.py")
    at.multiselect(key="fit_methods").set_value(methods).run()
    at.button(key="fit_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _result(at: AppTest, method: str):
    return at.session_state["fc_fits"][at.session_state["fc_active"][method]]


def _assert_per_annotator(table, result) -> None:
    """The annotator table has one row per annotator and only per-annotator columns (typed fields)."""
    assert sorted(table.index.astype(str)) == sorted(result.workers.astype(str))
    allowed = {
        "accuracy",
        "accuracy (lower bound)",
        "accuracy (shrunk)",
        "responses",
        "accuracy low",
        "accuracy high",
        "simulated role",
    }
    allowed |= {c.title for c in result.annotator_columns} | {f"{c.title} ({c.key})" for c in result.annotator_columns}
    assert set(map(str, table.columns)) <= allowed, set(table.columns) - allowed
    assert not [c for c in table.columns if re.search(r"eigen|ranking", str(c), re.IGNORECASE)]


def _enabled_methods(at: AppTest) -> list[str]:
    return (
        list(at.multiselect(key="fit_methods").options_values)
        if hasattr(at.multiselect(key="fit_methods"), "options_values")
        else [o.split(" — ")[0] for o in at.multiselect(key="fit_methods").options]
    )


def test_home_loads_demo_and_every_page_renders():
    at = _app()
    assert at.session_state["fc_dataset"].source == "demo"
    assert any("simulated" in s.value for s in at.success)
    assert _charts(at) == 2
    for page in PAGES:
        _visit(at, page)
    _visit(at, "pages/1_Data.py")
    assert {m.label for m in at.metric} >= {
        "responses",
        "items",
        "annotators",
        "Fleiss' κ",
        "Krippendorff's α (nominal)",
    }
    assert _charts(at) == 4  # counts, labels, κ heatmap, overlap
    _visit(at, "pages/2_Fit.py")
    table = _frame(at, "method", "needs")
    assert set(table["method"]) == {m.name for m in available()}


def test_no_data_state_every_page():
    at = _app()
    _visit(at, "pages/1_Data.py")
    at.button(key="clear_data").click().run()
    assert at.session_state["fc_dataset"] is None
    for page in PAGES:
        _visit(at, page)
        if page != "pages/1_Data.py":
            assert at.info, f"{page} should say that no data is loaded"
    at.switch_page("app.py").run()
    assert not at.exception and at.info


@pytest.mark.parametrize(
    "demo", ["crowd", *(pytest.param(d, marks=pytest.mark.slow) for d in ("sequence", "graph"))]
)  # every page with each demo's methods: the crowd demo in the default suite, the others under -m slow
def test_each_demo_then_every_enabled_method(demo):
    at = _app()
    _visit(at, "pages/1_Data.py")
    at.selectbox(key="demo_choice").set_value(demo).run()
    at.button(key="load_demo").click().run()
    assert not at.exception
    ds = at.session_state["fc_dataset"]
    assert ds.source == "demo" and ds.gold is not None
    for page in PAGES:
        _visit(at, page)
    _visit(at, "pages/2_Fit.py")
    enabled = _enabled_methods(at)
    needs = {m.name: set(m.needs()) for m in available()}
    assert all(needs[m] <= set(ds.inputs) for m in enabled)
    assert {m for m, n in needs.items() if n <= set(ds.inputs)} == set(enabled)
    # the methods that need this demo's extra input, plus two plain ones (every plain method is fitted in
    # test_every_method_on_uploaded_data; all methods on the full demos run under -m slow)
    methods = [m for m in enabled if needs[m]] + ["ds", "mv"]
    _fit(at, methods)
    results = at.session_state["fc_active"]
    failed = [e.value for e in at.error]
    assert set(results) == set(methods), failed
    count = at.session_state["fc_fit_count"]
    for page in RESULT_PAGES:
        _visit(at, page)
        for m in methods:
            if page in ("pages/3_Annotators.py", "pages/5_Items.py"):
                key = "ann_method" if page == "pages/3_Annotators.py" else "items_method"
                at.selectbox(key=key).set_value(m).run()
                assert not at.exception, (page, m, [e.value for e in at.exception])
                assert _charts(at) >= 1
                if page == "pages/5_Items.py":  # the method's own labels (e.g. Viterbi), as on the Compare page
                    shown = _frame(at, "label", "confidence", "entropy")["label"]
                    expected = _result(at, m).labels.astype(str)
                    assert (shown.to_numpy() == expected.reindex(shown.index.astype(str)).to_numpy()).all(), m
                else:
                    _assert_per_annotator(_frame(at, "accuracy", "responses"), _result(at, m))
    _visit(at, "pages/5_Items.py")
    assert len(_frame(at, "label", "confidence", "entropy")) == ds.responses.n_items
    if demo == "sequence":
        assert at.get("plotly_chart")[-1] is not None and at.selectbox(key="items_sequence")
    if demo == "graph":
        assert at.text_input(key="items_center").value
    _visit(at, "pages/6_Compare.py")
    cmp_table = _frame(at, "mean confidence", "accuracy on gold")
    assert list(cmp_table.index) == list(results)
    assert cmp_table["accuracy on gold"].notna().all()
    assert at.session_state["fc_fit_count"] == count, "page switches must not refit"


@pytest.mark.slow  # every method on every page: the default suite fits every method in test_common.py
@pytest.mark.parametrize("n_classes", [2, 3])
def test_every_method_on_uploaded_data(n_classes):
    sim = dawid_skene(n_items=120, n_workers=8, n_classes=n_classes, responses_per_item=5, spammers=1, seed=5)
    at = _app()
    _upload(at, "small.csv", _csv(sim.responses))
    _use_columns(at)
    assert at.session_state["fc_dataset"].source == "upload"
    for page in PAGES:
        _visit(at, page)
    _visit(at, "pages/2_Fit.py")
    enabled = _enabled_methods(at)
    assert {m.name for m in available() if not m.needs()} == set(enabled)
    _fit(at, enabled)
    assert set(at.session_state["fc_active"]) == set(enabled), [e.value for e in at.error]
    # auto's held-out score table is shown on the Fit page, the chosen method marked
    heldout = _frame(at, "method", "score", "se", "prior_strength")
    assert heldout["chosen"].sum() == 1 and heldout["score"].notna().any()
    chosen = heldout.loc[heldout["chosen"]].iloc[0]  # the best, or a simpler model within 2 SE of it
    assert chosen["score"] == heldout["score"].max() or chosen["difference"] <= 2 * chosen["se"]
    for page in RESULT_PAGES:
        _visit(at, page)
        if page != "pages/6_Compare.py":
            key = "ann_method" if page == "pages/3_Annotators.py" else "items_method"
            for m in enabled:
                at.selectbox(key=key).set_value(m).run()
                assert not at.exception, (page, m, [e.value for e in at.exception])
                if page == "pages/3_Annotators.py":
                    _assert_per_annotator(_frame(at, "accuracy", "responses"), _result(at, m))
    _visit(at, "pages/6_Compare.py")
    assert len(_frame(at, "mean confidence")) == len(enabled)


@pytest.mark.slow
@pytest.mark.parametrize("demo", ["crowd", "sequence", "graph"])
def test_all_methods_on_full_demos(demo):
    at = _app()
    _visit(at, "pages/1_Data.py")
    at.selectbox(key="demo_choice").set_value(demo).run()
    at.button(key="load_demo").click().run()
    _visit(at, "pages/2_Fit.py")
    enabled = _enabled_methods(at)
    _fit(at, enabled)
    assert set(at.session_state["fc_active"]) == set(enabled), [e.value for e in at.error]
    for page in RESULT_PAGES:
        _visit(at, page)


def test_uploaded_data_with_context_column_and_fit():
    from fusion_core.simulate.context import table1

    sim = table1(n_items=200)
    at = _app()
    _upload(at, "context_export.csv", _csv(sim.responses))
    assert at.selectbox(key="map_task").value == "task"
    assert at.selectbox(key="map_context").value == "context"
    _use_columns(at)
    ds = at.session_state["fc_dataset"]
    assert ds.source == "upload" and "context" in ds.inputs and ds.responses.n_items == 200
    for page in PAGES:
        _visit(at, page)
    _visit(at, "pages/2_Fit.py")
    enabled = _enabled_methods(at)
    ctx_methods = [m.name for m in available() if "context" in m.needs()]
    assert set(ctx_methods) <= set(enabled)
    _fit(at, ctx_methods + ["mv"])
    assert set(at.session_state["fc_active"]) == set(ctx_methods + ["mv"]), [e.value for e in at.error]
    for page in RESULT_PAGES:
        _visit(at, page)
    # reliability along the context, then bootstrap intervals (items resampled with their context values)
    _visit(at, "pages/3_Annotators.py")
    at.selectbox(key="ann_method").set_value("context-em").run()
    assert at.multiselect(key="ann_ctx_workers").value
    assert any("Reliability along the context" in c.proto.spec for c in at.get("plotly_chart"))
    at.select_slider(key="ann_nboot").set_value(20).run()
    at.button(key="ann_boot").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = _frame(at, "accuracy", "responses")
    assert {"accuracy low", "accuracy high"} <= set(table.columns)
    assert (table["accuracy low"] <= table["accuracy"] + 1e-9).all() and (
        table["accuracy"] <= table["accuracy high"] + 1e-9
    ).all()


def test_fit_cache_and_page_switches_do_not_refit():
    at = _app()
    _fit(at, ["ds", "mv"])
    assert at.session_state["fc_fit_count"] == 2
    for _ in range(2):
        for page in PAGES + ["app.py"]:
            at.switch_page(page).run()
            assert not at.exception
    assert at.session_state["fc_fit_count"] == 2
    _fit(at, ["ds", "mv"])  # same data, same parameters: served from the cache
    assert at.session_state["fc_fit_count"] == 2
    at.number_input(key="param_ds_smoothing").set_value(1.0).run()
    at.button(key="fit_button").click().run()
    assert at.session_state["fc_fit_count"] == 3
    assert at.session_state["fc_params"]["ds"] == {"smoothing": 1.0}


def test_annotator_bootstrap_error_bars_and_downloads():
    at = _app()
    _fit(at, ["ds"])
    _visit(at, "pages/3_Annotators.py")
    at.select_slider(key="ann_nboot").set_value(20).run()
    at.button(key="ann_boot").click().run()
    assert not at.exception
    table = _frame(at, "accuracy", "responses")
    assert {"accuracy", "accuracy low", "accuracy high", "simulated role"} <= set(table.columns)
    assert (table["accuracy low"] <= table["accuracy"] + 1e-9).all()
    spam = table[table["simulated role"] == "spammer"]
    honest = table[table["simulated role"] == "honest"]
    assert spam["accuracy"].max() < honest["accuracy"].median()
    assert at.get("download_button")


def _state_snapshot(at: AppTest):
    ds = at.session_state["fc_dataset"]
    return ds.fingerprint, ds.name


@pytest.mark.parametrize(
    "name,data,expect",
    [
        ("empty.csv", b"", "empty"),
        ("garbage.csv", bytes(np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8)), "utf"),
        ("big.csv", b"task,worker,label\n" + b"t1,w1,a\n" * 2000, "limit"),
    ],
)
def test_bad_upload_read_errors_keep_state(name, data, expect):
    at = _app()
    before = _state_snapshot(at)
    at.session_state["fc_max_upload_bytes"] = 10_000  # lowered limit: 'big.csv' is 16 kB
    _upload(at, name, data)
    assert len(at.error) == 1, [e.value for e in at.error]
    assert expect in at.error[0].value.lower()
    assert _state_snapshot(at) == before
    _visit(at, "pages/3_Annotators.py")  # other pages still work on the previous data
    assert _state_snapshot(at) == before


def test_oversize_upload_message_names_the_limit():
    at = _app()
    at.session_state["fc_max_upload_bytes"] = 1024
    payload = _csv(dawid_skene(n_items=200, n_workers=5, seed=0).responses)
    _upload(at, "export.csv", payload)
    assert len(at.error) == 1 and "upload limit" in at.error[0].value


def test_wrong_columns_one_clear_error_and_state_kept():
    at = _app()
    before = _state_snapshot(at)
    _upload(at, "two_cols.csv", b"a,b\n1,2\n3,4\n")
    _use_columns(at)
    assert len(at.error) == 1
    assert "three different columns" in at.error[0].value
    assert _state_snapshot(at) == before


def test_html_labels_refused_escaped_and_state_kept():
    sim = dawid_skene(n_items=100, n_workers=6, n_classes=2, labels=["ok", "<script>alert(1)</script>"], seed=1)
    at = _app()
    before = _state_snapshot(at)
    _upload(at, "labels.csv", _csv(sim.responses))
    _use_columns(at)
    assert len(at.error) == 1
    msg = at.error[0].value
    assert "HTML markup" in msg
    assert "<script>" not in msg and r"\<script\>" in msg  # shown literally, never as markup
    assert _state_snapshot(at) == before


def test_user_strings_escaped_in_markdown():
    sim = dawid_skene(n_items=60, n_workers=5, n_classes=2, seed=2)
    at = _app()
    _upload(at, "<b>evil</b>_name.csv", _csv(sim.responses))
    _use_columns(at)
    ds = at.session_state["fc_dataset"]
    assert ds.source == "upload"
    for page in PAGES:
        _visit(at, page)
        texts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [c.value for c in at.sidebar.caption]
        assert not any("<b>evil" in t for t in texts), page
    assert any(r"\<b\>evil\</b\>" in c.value for c in at.sidebar.caption)


def test_wide_upload():
    sim = dawid_skene(n_items=80, n_workers=6, n_classes=2, responses_per_item=6, seed=3)
    wide = sim.responses.pivot(index="task", columns="worker", values="label").reset_index()
    at = _app()
    _upload(at, "wide.csv", _csv(wide))
    at.radio(key="map_layout").set_value("wide").run()
    at.selectbox(key="map_task").set_value("task").run()
    _use_columns(at)
    assert not at.error
    ds = at.session_state["fc_dataset"]
    assert ds.responses.n_items == 80 and ds.responses.n_workers == 6


def test_cartel_page_finds_the_simulated_cartel():
    at = _app()
    _visit(at, "pages/4_Cartels.py")
    if at.session_state["fc_dataset"].responses.n_classes != 2:
        pytest.fail("the default demo should be the binary crowd")
    at.select_slider(key="cartel_nboot").set_value(50).run()
    at.button(key="cartel_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) == 2  # scree + loadings
    report = next(iter(at.session_state["fc_cartels"].values()))
    roles = at.session_state["fc_dataset"].roles
    assert len(report.groups) == 1
    assert {str(w) for w in report.groups[0]} == set(roles.index[roles == "cartel 1"])
    assert any("agree with each other beyond" in e.value for e in at.error)
    groups = _frame(at, "group", "members", "size")
    assert groups["size"].tolist() == [len(report.groups[0])]
    assert set(groups["members"].iloc[0].split(", ")) == set(roles.index[roles == "cartel 1"])
    count = at.session_state["fc_fit_count"]
    _visit(at, "pages/1_Data.py")
    _visit(at, "pages/4_Cartels.py")  # cached: the report is shown again without re-running the detector
    assert len(at.get("plotly_chart")) == 2 and at.session_state["fc_fit_count"] == count


def test_gold_and_graph_uploads_enable_evaluation_and_graph_methods():
    from fusion_core.simulate.demo import graph_demo

    demo = graph_demo()
    at = _app()
    _upload(at, "answers.csv", _csv(demo.responses))
    _use_columns(at)
    before = at.session_state["fc_dataset"].fingerprint
    gold = demo.truth.rename("truth").reset_index()
    at.file_uploader(key="upload_gold").set_value(("truth.csv", _csv(gold), "text/csv")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    ds = at.session_state["fc_dataset"]
    assert ds.gold is not None and len(ds.gold) == 300 and ds.fingerprint == before  # gold does not invalidate fits
    edges = "source,target\n" + "\n".join(f"{u},{v}" for u, v in demo.graph.edges)
    at.file_uploader(key="upload_graph").set_value(("edges.csv", edges.encode(), "text/csv")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    ds = at.session_state["fc_dataset"]
    assert "graph" in ds.inputs and ds.graph_view.number_of_edges() == demo.graph.number_of_edges()
    bad = "source,target\nn0,not-a-task\n"
    at.file_uploader(key="upload_graph").set_value(("bad.csv", bad.encode(), "text/csv")).run()
    assert len(at.error) == 1 and at.session_state["fc_dataset"].fingerprint == ds.fingerprint
    graph_methods = [m.name for m in available() if "graph" in m.needs()]
    _fit(at, graph_methods + ["mv"])
    assert set(at.session_state["fc_active"]) == set(graph_methods + ["mv"]), [e.value for e in at.error]
    _visit(at, "pages/5_Items.py")
    assert at.text_input(key="items_center").value == "n0"
    assert len(at.get("plotly_chart")) == 2  # confidence histogram + neighbourhood
    _visit(at, "pages/6_Compare.py")
    assert _frame(at, "accuracy on gold")["accuracy on gold"].notna().all()


def test_sequence_upload_guesses_columns_and_context_file():
    from fusion_core.simulate.demo import sequence_demo

    demo = sequence_demo()
    at = _app()
    _upload(at, "tokens.csv", _csv(demo.responses))
    assert at.selectbox(key="map_sequence").value == "sequence"
    assert at.selectbox(key="map_position").value == "position"
    _use_columns(at)
    ds = at.session_state["fc_dataset"]
    assert ds.responses.has_sequences and "sequence" in ds.inputs
    items = ds.responses.items
    ctx = "task,context\n" + "\n".join(f"{t},{i % 7}" for i, t in enumerate(items))
    at.file_uploader(key="upload_context").set_value(("ctx.csv", ctx.encode(), "text/csv")).run()
    assert not at.error, [e.value for e in at.error]
    ds = at.session_state["fc_dataset"]
    assert "context" in ds.inputs and len(ds.context) == len(items)
    at.file_uploader(key="upload_context").set_value(("bad.csv", b"task,context\nt1,high\n", "text/csv")).run()
    assert len(at.error) == 1 and "numeric" in at.error[0].value
    assert at.session_state["fc_dataset"].fingerprint == ds.fingerprint
    _visit(at, "pages/2_Fit.py")
    table = _frame(at, "method", "needs")
    ctx_methods = {m.name for m in available() if "context" in m.needs()}
    assert set(table.loc[table["available"] == "yes", "method"]) >= ctx_methods


def test_cartel_page_on_multiclass_data_tests_one_label_against_the_rest():
    rng = np.random.default_rng(5)
    n, K = 500, 3
    truth = rng.integers(0, K, n)
    target = np.where(rng.random(n) < 0.4, truth, rng.integers(0, K, n))  # the cartel's own labelling
    rows = []
    for w in range(26):
        cartel = w >= 20
        acc = 0.9 if cartel else rng.uniform(0.6, 0.85)
        base = target if cartel else truth
        lab = np.where(rng.random(n) < acc, base, rng.integers(0, K, n))
        rows.append(pd.DataFrame({"task": np.arange(n), "worker": f"{'c' if cartel else 'h'}{w}", "label": lab}))
    df = pd.concat(rows)
    df = df[rng.random(len(df)) < 0.7]  # sparse: each annotator labels ~70 % of the items
    at = _app()
    _upload(at, "multi.csv", _csv(df))
    _use_columns(at)
    _visit(at, "pages/4_Cartels.py")
    assert at.selectbox(key="cartel_target").options == ["0", "1", "2"]
    at.selectbox(key="cartel_target").set_value("1").run()  # labels read from a file are text, as written
    at.select_slider(key="cartel_nboot").set_value(50).run()
    at.button(key="cartel_run").click().run()
    problems = [e.value for e in at.error if "agree with each other beyond" not in e.value]  # red: groups found
    assert not at.exception and not problems, problems
    report = at.session_state["fc_cartels"][(at.session_state["fc_dataset"].fingerprint, 50, 0.05, "1")]
    assert list(report.labels.unique()) != [] and set(map(str, report.labels.unique())) <= {"1", "not 1"}
    found = set().union(*report.groups) if report.groups else set()
    assert {f"c{w}" for w in range(20, 26)} <= {str(w) for w in found}
    assert len(found) <= 8


def test_upload_keeps_ids_and_labels_as_written_with_reading_options():
    data = b"task,worker,label\n007,a,=HYPERLINK(1)\n007,b,x\n7,a, x\n7,b,NA\n1e3,a,x\n1e3,b,x \n"
    at = _app()
    _visit(at, "pages/1_Data.py")
    at.file_uploader(key="upload_responses").set_value(("ids.csv", data, "text/csv")).run()
    _use_columns(at)
    resp = at.session_state["fc_dataset"].responses
    assert list(resp.items) == ["007", "7", "1e3"] and set(resp.classes) == {"=HYPERLINK(1)", "x", " x", "x ", "NA"}
    at.multiselect(key="read_missing").set_value(["NA"]).run()
    at.checkbox(key="read_strip").check().run()  # new options: the same upload is read again
    _use_columns(at)
    resp = at.session_state["fc_dataset"].responses
    assert list(resp.classes) == ["=HYPERLINK(1)", "x"] and resp.report.dropped_missing_label == 1


def test_downloads_are_formula_safe_and_keep_ids():
    from fusion_app.shell import csv_bytes, export_frame
    from fusion_core.data.export import read_csv_export

    table = pd.DataFrame({"label": ["=1+2", "x"], "P(=1+2)": [0.9, 0.1]}, index=pd.Index(["007", "@7"], name="task"))
    data = csv_bytes(table)
    assert data.splitlines()[1:] == [b'"007","\'=1+2",0.9', b'"\'@7","x",0.1']
    back = read_csv_export(data)
    assert back["task"].tolist() == ["007", "@7"] and back["label"].tolist() == ["=1+2", "x"]
    clash = pd.DataFrame({"task": ["a"]}, index=pd.Index(["t1"], name="task"))
    assert list(export_frame(clash).columns) == ["task (id)", "task"]


def test_internal_fit_errors_show_a_sentence_not_the_exception(monkeypatch):
    from fusion_app import cache

    class Broken:
        def fit(self, *args, **kwargs):
            raise RuntimeError("internal detail at /srv/app/secret.py line 3")

    monkeypatch.setattr(cache, "create", lambda name, **params: Broken())
    at = _app()
    ds = at.session_state["fc_dataset"]
    done, errors = cache.fit_many(ds, {"ds": {}}, ss={})
    assert not done and "internal error" in errors["ds"] and "secret" not in errors["ds"]


def test_warm_up_loads_the_compiled_kernels_once():
    pytest.importorskip("numba")
    from fusion_app import warmup
    from fusion_core.methods.dawid_skene import sweep

    if not warmup.jit_enabled():
        pytest.skip("compiled kernels are off (FUSION_CORE_JIT=0)")
    warmup.start_warm_up()
    warmup.start_warm_up()  # a second page run starts nothing new
    took = warmup.wait_warm_up(timeout=300)
    assert took is not None and took > 0
    assert {(2, True), (3, True)} <= set(sweep._KERNELS)  # the two-label and three-label passes are compiled
    assert len(warmup._started) == 1
