"""AppTest of the Plan page: after a fit, the plan's summary, chart, table and downloads; a zero budget plans
nothing and says so."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit.testing.v1")
from apptest import go, start_app


def test_plan_page_after_a_fit() -> None:
    at = start_app()
    go(at, "pages/8_Plan.py")
    assert any("Fit" in str(i.value) for i in at.info)  # nothing fitted yet: pointer to the Fit page
    go(at, "pages/2_Fit.py")
    at.button(key="fit_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    go(at, "pages/8_Plan.py")
    summary = " ".join(str(i.value) for i in at.info)
    assert "expected accuracy rises from" in summary
    table = at.dataframe[0].value
    assert {"task", "suggested annotators", "expected gain", "current label", "confidence"} <= set(table.columns)
    assert (table["expected gain"].diff().dropna() <= 1e-12).all()  # best first
    assert len(at.get("plotly_chart")) == 1
    at.number_input(key="plan_budget").set_value(0).run()
    assert not at.exception
    assert any("No extra label is suggested" in str(i.value) for i in at.info)
