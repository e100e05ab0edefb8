"""AppTest of reliability over time in the app: an upload with a time column is mapped on the Data page (the column
guessed by its name), and the Audit page answers "Whose reliability changed over time?" with the crowd's chart,
shows any annotator's accuracy over time and offers the three tables as downloads."""

from __future__ import annotations

import pytest

from fusion_core.simulate.drift import drift_crowd

pytest.importorskip("streamlit.testing.v1")
from apptest import go, start_app


def test_time_column_upload_and_audit_over_time():
    sim = drift_crowd(n_items=600, n_workers=8, responses_per_item=5, n_classes=3, timestamps=True, seed=1)
    at = go(start_app(), "pages/1_Data.py")
    data = sim.responses.to_csv(index=False).encode()
    at.file_uploader(key="upload_responses").set_value(("crowd.csv", data, "text/csv")).run()
    assert at.selectbox(key="map_time").value == "time"  # guessed from its name
    at.button(key="use_columns").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["fc_dataset"].responses.time.kind == "timestamp"

    go(at, "pages/0_Audit.py")
    at.button(key="audit_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    heads = [s.value for s in at.subheader]
    assert "Whose reliability changed over time?" in heads and "Reliability over time, per annotator" in heads
    answer = next(m.value for m in at.markdown if "accuracy fell from" in m.value)
    assert answer.startswith(sim.drifting)
    pick = at.selectbox(key="audit_drift_annotator")
    assert pick.value == sim.drifting  # the changed annotator first
    labels = {b.label for b in at.get("download_button")}
    assert {
        "Change test per annotator (CSV)",
        "Accuracy per annotator and window (CSV)",
        "The crowd per window (CSV)",
    } <= labels
    other = next(w for w in pick.options if w != sim.drifting)
    pick.set_value(other).run()
    assert not at.exception, [e.value for e in at.exception]
