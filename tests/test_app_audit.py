"""AppTest of the Audit summary and Glossary pages in every state: no data, before the audit, after it (findings
with charts, every annotator in the verdict table, search and filter, downloads, the fit shared with the other
pages), the cartel check that could not run, and a non-binary upload."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_core.diagnostics.audit import DEPENDENT, SPAMMER, TOO_FEW
from fusion_core.diagnostics.cartels.words import BAD_QUESTION, QUESTION
from fusion_core.simulate import dawid_skene

pytest.importorskip("streamlit.testing.v1")
from apptest import go as _go
from apptest import start_app as _app
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

st_config.set_option("client.showErrorDetails", True)
ROOT = Path(__file__).resolve().parents[1]
AUDIT = "pages/0_Audit.py"


def _run_audit(at: AppTest) -> AppTest:
    at.button(key="audit_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _verdicts(at: AppTest):
    return next(d.value for d in at.dataframe if "verdict" in map(str, d.value.columns))


def _upload(at: AppTest, df) -> AppTest:
    _go(at, "pages/1_Data.py")
    at.file_uploader(key="upload_responses").set_value(("crowd.csv", df.to_csv(index=False).encode(), "text/csv"))
    at.run()
    at.button(key="use_columns").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return _go(at, AUDIT)


def test_before_and_after_the_audit_on_the_demo():
    at = _go(_app(), AUDIT)
    assert any(t.value == "Audit summary" for t in at.title)
    assert at.button(key="audit_run").label == "Run audit"
    assert any("Run audit" in i.value for i in at.info) and not at.dataframe and not at.get("plotly_chart")

    _run_audit(at)
    audit = at.session_state["fc_audit"][1]
    # every question answered, each with its chart (7 on the demo: the cartel test ran)
    assert [s.value for s in at.subheader][:8] == [
        "Whom can I trust?",
        BAD_QUESTION,
        QUESTION,
        "How good are the final labels?",
        "Do the labels depend on the model choice?",
        "Which items need another look?",
        "Do annotators agree?",
        "What changed compared with majority vote?",
    ]
    assert len(at.get("plotly_chart")) == 7
    assert any("agree with each other beyond" in w.value for w in at.warning)
    table = _verdicts(at)
    assert len(table) == 24 and table["verdict"].iloc[0] != "reliable"  # every annotator, worst first
    roles = at.session_state["fc_dataset"].roles
    spam = set(roles.index[roles == "spammer"])
    assert set(table.index[table["verdict"] == SPAMMER]) == spam
    assert set(table.index[table["verdict"] == DEPENDENT]) == set(roles.index[roles == "cartel 1"])
    assert {b.label for b in at.get("download_button")} >= {
        "Download report (HTML)",
        "Verdict table (CSV)",
        "Dependent groups (CSV)",
    }
    groups = next(d.value for d in at.dataframe if "annotators" in map(str, d.value.columns))
    assert groups["members"].tolist() == [5]
    assert at.button(key="audit_run").label == "Run the audit again"

    # search and filter reach every annotator
    at.text_input(key="audit_search").set_value(sorted(spam)[0]).run()
    assert list(_verdicts(at).index) == [sorted(spam)[0]]
    at.text_input(key="audit_search").set_value("").run()
    at.multiselect(key="audit_filter").set_value([SPAMMER]).run()
    assert set(_verdicts(at).index) == spam

    # the audit's fit is the other pages' "auto" result; revisiting does not re-run anything
    count = at.session_state["fc_fit_count"]
    assert at.session_state["fc_fits"][at.session_state["fc_active"]["auto"]] is audit.fit
    _go(at, "pages/3_Annotators.py")
    _go(at, AUDIT)
    assert at.session_state["fc_fit_count"] == count and at.session_state["fc_audit"][1] is audit
    assert len(at.get("plotly_chart")) == 7


def test_no_data_state():
    at = _go(_app(), "pages/1_Data.py")
    at.button(key="clear_data").click().run()
    _go(at, AUDIT)
    assert at.info and not at.button


def test_cartel_check_could_not_run_on_sparse_overlap():
    # 60 annotators with ~7 responses each: no pair shares 10 items, so the cartel test cannot run
    sim = dawid_skene(n_items=200, n_workers=60, n_classes=2, responses_per_item=2, seed=5)
    at = _run_audit(_upload(_app(), sim.responses))
    audit = at.session_state["fc_audit"][1]
    assert audit.cartel.status == "could_not_run"
    texts = [w.value for w in at.warning]
    assert any("could not run" in t and "label the same items" in t for t in texts)
    assert not any("No dependent group" in m.value for m in [*at.info, *at.success])  # never the reassuring message
    table = _verdicts(at)
    few = table["responses on shared items"] < 10
    assert (table.loc[few, "verdict"] == TOO_FEW).all() and few.mean() > 0.5  # ~7 responses each: most can't be judged
    assert len(at.get("plotly_chart")) == 6  # no cartel chart when the test did not run


def test_multiclass_upload_audit():
    sim = dawid_skene(n_items=300, n_workers=12, n_classes=3, responses_per_item=5, spammers=2, seed=6)
    at = _run_audit(_upload(_app(), sim.responses))
    assert any("two labels" in w.value and "could not run" in w.value for w in at.warning)
    table = _verdicts(at)
    spam = {w for w, r in sim.role.items() if r == "spammer"}
    assert set(table.index[table["verdict"] == SPAMMER]) == spam


def test_glossary_explains_every_verdict():
    at = _go(_app(), "pages/9_Glossary.py")
    text = " ".join(m.value for m in at.markdown)
    from fusion_core.diagnostics.audit import VERDICTS

    for term in (*VERDICTS, "Confusion matrix", "Posterior", "Fleiss", "Krippendorff", "Cartel", "Skill above chance"):
        assert term in text, term
    at.text_input(key="glossary_search").set_value("kappa").run()
    assert 1 <= len(at.markdown) < 6


@pytest.mark.parametrize("demo", ["sequence", "graph"])
def test_other_demos_audit_and_new_data_evicts_the_audit(demo):
    at = _run_audit(_go(_app(), AUDIT))
    assert at.session_state["fc_audit"] is not None
    _go(at, "pages/1_Data.py")
    at.selectbox(key="demo_choice").set_value(demo).run()
    at.button(key="load_demo").click().run()
    _go(at, AUDIT)
    assert at.session_state["fc_audit"] is None and at.session_state["fc_audit_figures"] is None  # old audit dropped
    assert at.button(key="audit_run").label == "Run audit"
    _run_audit(at)
    audit = at.session_state["fc_audit"][1]
    assert audit.n_workers == at.session_state["fc_dataset"].responses.n_workers
    assert audit.cartel.status == "could_not_run"  # three labels
    assert len(_verdicts(at)) == audit.n_workers and len(at.get("plotly_chart")) == 6
