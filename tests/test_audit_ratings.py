"""The audit for ratings (issue 13 item 5): ``run_audit(label_type=…)`` carries the rating verdicts; the Audit page
offers the label type and shows the rating verdict table and the bias/noise chart."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit import audit_summary, findings, flagged_tile, run_audit, suggested_label_type
from fusion_core.diagnostics.cartels.words import BAD_QUESTION
from fusion_core.errors import UserInputError
from fusion_core.plots.audit import audit_figures
from fusion_core.simulate.ratings import ordinal_crowd

LEVELS = ["poor", "fair", "good", "very good", "excellent"]


def _quick(data, **kw):
    return run_audit(data, method="ds", n_bootstrap=0, cartel_bootstrap=20, rating_bootstrap=40, **kw)


def test_ordinal_crowd_harsh_lenient_noisy_get_their_verdicts_through_the_audit():
    sim = ordinal_crowd(n_items=300, n_workers=12, n_lenient=3, n_harsh=3, n_noisy=2, labels=LEVELS, seed=1)
    roles = sim.role
    audit = _quick(sim.responses, label_type="ordinal", levels=LEVELS)
    assert audit.label_type == "ordinal" and audit.ratings is not None and audit.ratings.kind == "ordinal"
    verdict = audit.ratings.table["verdict"].reindex(roles.index)
    for role in ("lenient", "harsh", "noisy"):
        assert verdict[roles == role].str.contains(role).all(), (role, verdict[roles == role].tolist())
    assert (verdict[roles == "reliable"] == "reliable").mean() >= 0.75
    # the summary asks the ratings question first, backed by the bias/noise chart
    first = findings(audit)[0]
    assert first.chart == "ratings" and "lenient" in first.answer and "harsh" in first.answer
    assert "ratings" in audit_figures(audit)
    # one verdict set leads (issue 26 item 3): no categorical trust/spammer findings unless asked
    questions = [f.question for f in findings(audit)]
    assert "Whom can I trust?" not in questions and BAD_QUESTION not in questions
    asked = [f.question for f in findings(audit, categorical=True)]
    assert {"Whom can I trust?", BAD_QUESTION} <= set(asked)
    label, value = flagged_tile(audit)
    rated = audit.ratings.table["verdict"]
    assert (
        "rating" in label and value == f"{int((~rated.isin(['reliable', 'not enough ratings to tell'])).sum())} of 12"
    )
    assert flagged_tile(audit, categorical=True)[0] == "annotators flagged"
    # summary.json carries the verdict set that leads, and the model it came from
    rv = audit_summary(audit)["rating_verdicts"]
    assert rv["verdicts"] == audit.ratings.counts() and sum(rv["verdicts"].values()) == 12
    assert rv["model"] == audit.ratings.model and rv["model"] in ("ordinal-em", "ordinal-ds")
    # the nominal audit of the same data has no rating verdicts and no ratings question
    nominal = _quick(sim.responses)
    assert nominal.ratings is None and all(f.chart != "ratings" for f in findings(nominal))
    assert "rating_verdicts" not in audit_summary(nominal)


def test_numbers_as_text_suggestion_numeric_order_and_input_errors():
    sim = ordinal_crowd(n_items=200, n_workers=10, n_lenient=2, n_harsh=2, n_noisy=0, n_levels=5, seed=0)
    df = sim.responses.assign(label=sim.responses["label"].astype(str))  # levels 1 … 5 written as text
    resp = Responses.from_frame(df)
    assert suggested_label_type(resp) == "ordinal"
    text = df.assign(label="x" + df["label"])
    assert suggested_label_type(Responses.from_frame(text)) == "nominal"
    audit = _quick(resp, label_type="ordinal")  # numeric levels, in numeric order
    assert audit.ratings is not None and list(map(str, audit.ratings.fit.classes)) == ["1", "2", "3", "4", "5"]
    numeric = _quick(resp, label_type="numeric")  # the same labels read as numbers
    assert numeric.ratings is not None and numeric.ratings.kind == "numeric"
    roles = sim.role
    lenient = numeric.ratings.table["bias"].reindex(roles.index)[roles == "lenient"]
    harsh = numeric.ratings.table["bias"].reindex(roles.index)[roles == "harsh"]
    assert lenient.min() > 0 > harsh.max()
    with pytest.raises(UserInputError, match="'label_type' must be one of"):
        _quick(resp, label_type="interval")
    with pytest.raises(UserInputError, match="order"):
        _quick(text, label_type="ordinal")
    with pytest.raises(UserInputError, match="numbers"):
        _quick(text, label_type="numeric")


# ------------------------------------------------------------------------------------------ the page
st_testing = pytest.importorskip("streamlit.testing.v1")
ROOT = Path(__file__).resolve().parents[1]


def test_audit_page_with_ordinal_labels():
    from streamlit import config as st_config

    st_config.set_option("client.showErrorDetails", True)
    sim = ordinal_crowd(n_items=200, n_workers=10, n_lenient=2, n_harsh=2, n_noisy=1, seed=3)
    roles = sim.role
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    at.run()
    at.switch_page("pages/1_Data.py").run()
    csv = sim.responses.to_csv(index=False).encode()
    at.file_uploader(key="upload_responses").set_value(("ratings.csv", csv, "text/csv")).run()
    at.button(key="use_columns").click().run()
    at.switch_page("pages/0_Audit.py").run()
    assert not at.exception, [e.value for e in at.exception]
    radio = at.radio(key="audit_label_type")
    assert radio.value == "nominal"  # the default, with the suggestion to declare ordered levels
    assert any("Ordered levels" in i.value for i in at.info)
    radio.set_value("ordinal").run()
    at.button(key="audit_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    audit = at.session_state["fc_audit"][1]
    assert audit.label_type == "ordinal" and audit.ratings is not None
    assert at.subheader[0].value == "Who rates too leniently, too harshly or too noisily?"
    assert at.metric[0].label == "annotators flagged (rating verdicts)"  # the headline uses the rating verdicts
    assert "Every annotator, worst first" not in [h.value for h in at.subheader]  # categorical ones only if asked
    assert "Whom can I trust?" not in [h.value for h in at.subheader]
    table = next(d.value for d in at.dataframe if "bias_low" in map(str, d.value.columns))
    assert len(table) == 10
    got = table["verdict"].reindex(roles.index.astype(str))
    for role in ("lenient", "harsh"):
        assert got[(roles == role).to_numpy()].str.contains(role).all()
    titles = [str(c.proto.spec) for c in at.get("plotly_chart")]
    assert any("Bias and noise per annotator" in t for t in titles)
    assert at.radio(key="audit_label_type").value == "ordinal"
    at.toggle(key="audit_categorical").set_value(True).run()
    assert "Every annotator, worst first" in [h.value for h in at.subheader]
    assert at.metric[0].label == "annotators flagged (rating verdicts)"
    # a rerun keeps the rated audit
    at.run()
    assert at.session_state["fc_audit"][1].ratings is not None and not at.exception
