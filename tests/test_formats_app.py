"""The app reads a labelling tool's export with no mapping step: the upload box accepts it (its extension comes
from the formats registry), the dataset carries the export's gold and spans, and the Annotators page shows the
span agreement."""

from __future__ import annotations

from pathlib import Path

import pytest

FIX = Path(__file__).resolve().parent / "fixtures" / "formats"


def _upload(name: str):
    pytest.importorskip("streamlit.testing.v1")
    from apptest import start_app
    from streamlit import config as st_config

    st_config.set_option("client.showErrorDetails", True)
    at = start_app(timeout=120)
    at.switch_page("pages/1_Data.py").run()
    at.file_uploader(key="upload_responses").set_value((name, (FIX / name).read_bytes(), "application/json")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def test_export_upload_is_read_without_mapping():
    """The Data page's reader (fast, no app): an export gives responses and gold; a plain table gives None (it
    goes through the column mapping)."""
    from fusion_core.data.uploads import read_export_upload

    got = read_export_upload("label_studio.json", (FIX / "label_studio.json").read_bytes(), 1 << 20)
    assert got is not None and got.responses.n_responses == 11 and got.gold.to_dict() == {"103": "Neutral"}
    assert read_export_upload("a.csv", b"task,worker,label\n1,a,x\n", 1 << 20) is None


@pytest.mark.slow
def test_label_studio_upload_needs_no_mapping_and_keeps_gold():
    at = _upload("label_studio.json")
    ds = at.session_state["fc_dataset"]
    assert at.session_state["fc_pending"] is None  # no column mapping step
    assert ds.responses.n_responses == 11 and ds.gold.to_dict() == {"103": "Neutral"}
    assert "read the Label Studio JSON export" in ds.description
    at.switch_page("pages/0_Audit.py").run()  # the one-click audit on the export, no mapping step
    at.button(key="audit_run").click().run(timeout=300)
    assert not at.exception, [e.value for e in at.exception]
    assert any(s.value == "Back to your labelling tool" for s in at.subheader)


@pytest.mark.slow
def test_ner_upload_shows_span_agreement_on_the_annotators_page():
    at = _upload("label_studio_ner.json")
    assert at.session_state["fc_dataset"].spans is not None
    at.switch_page("pages/2_Fit.py").run()
    at.multiselect(key="fit_methods").set_value(["hmm-em"]).run()
    at.button(key="fit_button").click().run()
    at.switch_page("pages/3_Annotators.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(s.value == "Span agreement" for s in at.subheader)
    assert any("spans (5 spans)" in c.value.replace("\\", "") for c in at.caption), [c.value for c in at.caption]
