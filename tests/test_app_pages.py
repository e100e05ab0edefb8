"""AppTest of the page states changed by the audit issue: the Fit page's recommended default, the skill chart of
every annotator, tables without internal columns or empty-cell "None"s, wide-file and HTML-file detection, the
sidebar after a load, the four cartel states, downloads, and the per-session caches evicted with the data."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.io as pio
import pytest

from fusion_core.simulate import dawid_skene

pytest.importorskip("streamlit.testing.v1")
from apptest import go as _go
from apptest import start_app as _app
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest
from test_cartel_explain import copying_crowd

st_config.set_option("client.showErrorDetails", True)
ROOT = Path(__file__).resolve().parents[1]
INTERNAL_TEXT = re.compile(r"pair_residual|moment_terms|sensitivity_raw|spec P\d|b̂|np\.\w+\(|valid-pair fraction")
INTERNAL = re.compile(INTERNAL_TEXT.pattern + r"|eigen|ranking", re.I)  # column names: no spectrum, no order


def _upload(at: AppTest, name: str, data: bytes, *, use: bool = True) -> AppTest:
    _go(at, "pages/1_Data.py")
    at.file_uploader(key="upload_responses").set_value((name, data, "text/csv")).run()
    assert not at.exception, [e.value for e in at.exception]
    if use:
        at.button(key="use_columns").click().run()
        assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def _fit(at: AppTest, methods: list[str] | None = None) -> AppTest:
    _go(at, "pages/2_Fit.py")
    if methods is not None:
        at.multiselect(key="fit_methods").set_value(methods).run()
    at.button(key="fit_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _texts(at: AppTest) -> list[str]:
    kinds = ("markdown", "caption", "info", "warning", "error", "success")
    return [str(e.value) for k in kinds for e in at.get(k)]


def _no_none_cells(at: AppTest, where: str) -> None:
    for d in at.dataframe:
        v = d.value
        for c in v.columns:
            bad = v[c].isna() | v[c].astype(str).isin(["None", "nan", "NaN"])
            assert not bad.any(), f"{where}: column {c!r} shows empty cells as None/nan"
        assert not [c for c in v.columns if INTERNAL.search(str(c))], f"{where}: internal column in {list(v.columns)}"


def test_fit_page_preselects_the_recommended_method_in_plain_words():
    at = _go(_app(), "pages/2_Fit.py")
    assert at.multiselect(key="fit_methods").value == ["auto"]
    texts = _texts(at)
    assert any("Recommended" in t and "auto" in t for t in texts)
    assert not any("Fit** page" in t or "open the Fit page" in t.lower() for t in texts)  # we are on it
    assert at.button(key="fit_button").label == "Fit the recommended method"
    table = next(d.value for d in at.dataframe if "what it does" in d.value.columns)
    assert table["what it does"].str.len().min() > 20
    _fit(at)
    assert "auto" in at.session_state["fc_active"]
    assert at.get("download_button")  # the results table downloads
    _no_none_cells(at, "Fit")


def _values(v) -> np.ndarray:
    """A Plotly array, decoded when it came as a typed array ({"dtype", "bdata"})."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
    return np.asarray(v)


def _spammer_crowd(seed: int = 0) -> pd.DataFrame:
    return dawid_skene(
        n_items=600,
        n_workers=100,
        n_classes=2,
        responses_per_item=5,
        spammers=5,
        worker_activity="zipf",
        seed=seed,
    ).responses


def test_skill_chart_shows_every_annotator_with_a_chance_line_and_evidence_aware_ranking():
    df = _spammer_crowd()
    at = _upload(_app(), "crowd.csv", df.to_csv(index=False).encode())
    _fit(at, ["ds"])
    _go(at, "pages/3_Annotators.py")
    fig = pio.from_json(at.get("plotly_chart")[0].proto.spec)
    n_workers = df["worker"].nunique()
    assert len(_values(fig.data[0].y)) == n_workers > 60  # all annotators, not the top 60
    chance = [s for s in fig.layout.shapes if s.y0 == s.y1]
    assert chance and chance[0].y0 == pytest.approx(0.5)
    assert any("expected accuracy" in t for t in _texts(at))  # "skill" is defined on the page
    table = next(d.value for d in at.dataframe if "accuracy (lower bound)" in d.value.columns)
    assert len(table) == n_workers
    low = table["accuracy (lower bound)"].astype(float).to_numpy()
    assert np.all(np.diff(low) <= 1e-12)  # ranked by the evidence-aware bound
    few = table[table["responses"].astype(int) < 10]
    many = table[table["responses"].astype(int) >= 50]
    if len(few) and len(many):  # a barely-measured annotator never outranks a well-measured one of equal skill
        best_few = few["accuracy"].astype(float).idxmax()
        rivals = many[many["accuracy"].astype(float) <= float(few.loc[best_few, "accuracy"])]
        if len(rivals):
            assert table.index.get_loc(best_few) > table.index.get_loc(rivals.index[0])
    _no_none_cells(at, "Annotators")
    labels = [b.label for b in at.get("download_button")]
    assert any("confusion" in lab for lab in labels)


@pytest.mark.parametrize("method", ["auto", "sml", "isml", "mm", "mace", "bds"])
def test_result_pages_show_no_internal_columns_or_none_cells(method):
    at = _fit(_app(), [method, "mv"])
    for page in ("pages/3_Annotators.py", "pages/5_Items.py", "pages/6_Compare.py", "pages/2_Fit.py"):
        _go(at, page)
        _no_none_cells(at, f"{page} ({method})")
        assert not any(INTERNAL_TEXT.search(t) for t in _texts(at)), page


def test_sidebar_names_the_new_data_right_after_loading():
    at = _upload(_app(), "my_export.csv", dawid_skene(n_items=50, n_workers=5, seed=3).responses.to_csv().encode())
    assert any("my\\_export" in c.value for c in at.sidebar.caption)
    assert any("Loaded" in s.value for s in at.success)
    at.selectbox(key="demo_choice").set_value("graph").run()
    at.button(key="load_demo").click().run()
    assert not any("my\\_export" in c.value for c in at.sidebar.caption)


def test_wide_file_is_detected_and_long_reading_warned():
    sim = dawid_skene(n_items=80, n_workers=8, n_classes=3, responses_per_item=8, seed=3)
    wide = sim.responses.pivot(index="task", columns="worker", values="label").reset_index()
    at = _upload(_app(), "wide.csv", wide.to_csv(index=False).encode(), use=False)
    assert at.radio(key="map_layout").value == "wide"  # preselected
    at.radio(key="map_layout").set_value("long").run()
    assert any("looks **wide**" in w.value for w in at.warning)
    at.radio(key="map_layout").set_value("wide").run()
    at.button(key="use_columns").click().run()
    ds = at.session_state["fc_dataset"]
    assert ds.responses.n_workers == 8 and ds.responses.n_items == 80
    long = _upload(_app(), "long.csv", sim.responses.to_csv(index=False).encode(), use=False)
    assert long.radio(key="map_layout").value == "long" and not long.warning


def test_html_file_renamed_csv_gets_a_clear_message_and_state_is_kept():
    at = _app()
    before = at.session_state["fc_dataset"].fingerprint
    page = b"<!DOCTYPE html>\n<html><head><title>Export</title></head><body><table><tr><td>a</td></tr></table>"
    _upload(at, "export.csv", page, use=False)
    assert len(at.error) == 1 and "looks like HTML" in at.error[0].value
    assert "three different columns" not in at.error[0].value
    assert at.session_state["fc_dataset"].fingerprint == before


def _cartel(at: AppTest) -> AppTest:
    _go(at, "pages/4_Cartels.py")
    at.select_slider(key="cartel_nboot").set_value(50).run()
    at.button(key="cartel_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.success, "no green box on the Cartels page"
    return at


def test_cartel_state_groups_found_with_real_labels_and_downloads():
    at = _cartel(_fit(_app(), ["ds"]))
    assert any("agree with each other beyond" in e.value for e in at.error)
    swing = next(d.value for d in at.dataframe if "label without them" in d.value.columns)
    assert set(swing["label with them"]) | set(swing["label without them"]) <= {"positive", "negative"}
    table = next(d.value for d in at.dataframe if "cartel" in d.value.columns and "skill note" in d.value.columns)
    assert "honest" not in set(table["cartel"])
    spam = table[table["simulated role"] == "spammer"]
    assert (spam["cartel"] == "not in a cartel").all() and spam["skill note"].str.contains("chance").all()
    keys = {b.proto.id.rsplit("-", 1)[-1] for b in at.get("download_button")}
    assert {"cartel_groups_download", "cartel_download", "cartel_annotators_download"} <= keys


def test_cartel_state_could_not_run_says_why_and_what_is_needed():
    sparse = dawid_skene(n_items=400, n_workers=300, n_classes=2, responses_per_item=2, seed=1).responses
    at = _cartel(_upload(_app(), "sparse.csv", sparse.to_csv(index=False).encode()))
    msgs = [w.value for w in at.warning]
    assert any("could not run" in m and "≥ 10 items" in m for m in msgs), msgs
    assert not at.get("plotly_chart") and not any("consistent with independent" in t for t in _texts(at))


def test_cartel_state_no_evidence_with_power_statement():
    dense = dawid_skene(n_items=300, n_workers=20, n_classes=2, responses_per_item=20, seed=1).responses
    at = _cartel(_upload(_app(), "dense.csv", dense.to_csv(index=False).encode()))
    assert any("No dependent group" in i.value and "detect a group of" in i.value for i in at.info)


def test_cartel_state_correlation_but_no_separable_group():
    at = _app()
    _upload(at, "copying.csv", copying_crowd(0.5, seed=0).to_csv(index=False).encode())
    _cartel(at)
    state = next(iter(at.session_state["fc_cartels"].values())).state
    if state == "groups_found":
        pytest.skip("the detector separated this group")
    assert state == "correlated_no_group"
    assert any("Correlation found, but no separable group" in w.value for w in at.warning)


def test_multiclass_cartel_swing_items_in_real_labels():
    rng = np.random.default_rng(5)
    n, k = 400, 3
    truth = rng.integers(0, k, n)
    target = np.where(rng.random(n) < 0.4, truth, rng.integers(0, k, n))
    rows = []
    for w in range(24):
        cartel = w >= 18
        acc = 0.9 if cartel else rng.uniform(0.6, 0.85)
        lab = np.where(rng.random(n) < acc, target if cartel else truth, rng.integers(0, k, n))
        rows.append(pd.DataFrame({"task": np.arange(n), "worker": f"{'c' if cartel else 'h'}{w}", "label": lab}))
    at = _upload(_app(), "multi.csv", pd.concat(rows).to_csv(index=False).encode())
    _go(at, "pages/4_Cartels.py")
    at.selectbox(key="cartel_target").set_value("1").run()
    _cartel(at)
    frames = [d.value for d in at.dataframe if "label without them" in d.value.columns]
    if frames:
        labels = set(frames[0]["label with them"]) | set(frames[0]["label without them"])
        assert labels <= {"0", "1", "2"}, labels  # never "not 1"


def test_session_caches_are_evicted_when_the_data_change():
    at = _cartel(_fit(_app(), ["ds"]))
    _go(at, "pages/3_Annotators.py")
    ss = at.session_state
    assert ss["fc_views"] and ss["fc_cartels"] and ss["fc_fits"]
    old = ss["fc_dataset"].fingerprint
    _upload(at, "new.csv", dawid_skene(n_items=60, n_workers=5, seed=9).responses.to_csv().encode())
    ss = at.session_state
    assert not ss["fc_cartels"] and not ss["fc_cartel_findings"] and not ss["fc_bootstrap"]
    assert all(k[0] != old for k in ss["fc_fits"])
    assert not any(json.dumps(str(k)).find(old) >= 0 for k in ss["fc_views"])


def test_hmm_labels_are_the_same_on_items_and_compare():
    at = _app()
    _go(at, "pages/1_Data.py")
    at.selectbox(key="demo_choice").set_value("sequence").run()
    at.button(key="load_demo").click().run()
    _fit(at, ["hmm-em", "mv"])
    _go(at, "pages/5_Items.py")
    at.selectbox(key="items_method").set_value("hmm-em").run()
    items = next(d.value for d in at.dataframe if "entropy" in d.value.columns)["label"]
    _go(at, "pages/6_Compare.py")
    diff = next(d.value for d in at.dataframe if "label (hmm-em)" in d.value.columns)
    assert (diff["label (hmm-em)"] == items.reindex(diff.index.astype(str))).all()


def test_memory_trimmer_starts_once_per_process():
    import threading

    from fusion_app.memory import start_trimmer

    if not start_trimmer():
        pytest.skip("no glibc: nothing to trim")
    assert start_trimmer()
    names = [t.name for t in threading.enumerate()]
    assert names.count("fusion-app-malloc-trim") == 1


_MALLOC_PROBE = """
import ctypes, sys
from fusion_app.memory import configure_malloc
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "fixed":
    assert configure_malloc(libc)
mmapped = lambda p: bool(ctypes.c_size_t.from_address(p - ctypes.sizeof(ctypes.c_size_t)).value & 0x2)
libc.free(libc.malloc(16 << 20))  # under the dynamic threshold this raises it to 16 MB
print(mmapped(libc.malloc(8 << 20)), mmapped(libc.malloc(1 << 20)))
"""


def test_malloc_threshold_stays_fixed_so_freed_blocks_go_back():
    """With the app's malloc settings (applied at server start, as the app does on its first page run) an 8 MB block
    is mmapped — returned to the OS when freed — even after a freed 16 MB block, which under glibc's dynamic
    threshold raises the threshold and puts the 8 MB block in the (fragmenting) heap.  Checked on the block itself
    (glibc's IS_MMAPPED bit, 0x2 of the size word before the pointer) in a fresh process: in a long-lived one a
    block can come from free heap space whatever the threshold."""
    import subprocess
    import sys

    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        pytest.skip("no glibc")
    root = Path(__file__).resolve().parents[1]

    def probe(mode: str) -> str:
        out = subprocess.run(
            [sys.executable, "-c", _MALLOC_PROBE, mode], cwd=root, capture_output=True, text=True, check=True
        )
        return out.stdout.strip()

    assert probe("fixed") == "True False"  # 8 MB block: own mapping; 1 MB (below 4 MiB): the heap, as usual
    assert probe("dynamic") == "False False"  # glibc's default: the 8 MB block lands in the heap
