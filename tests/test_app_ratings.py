"""AppTest of the Ratings page for each label type (ordinal, numeric, judges): demos and the current data."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit.testing.v1")
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

st_config.set_option("client.showErrorDetails", True)
ROOT = Path(__file__).resolve().parents[1]
PAGE = "pages/7_Ratings.py"


def _page() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(t.value == "Ratings and judges" for t in at.title)
    return at


def _run(at: AppTest, kind: str, source: str = "Simulated demo", boot: int = 20) -> AppTest:
    at.radio(key="rt_kind").set_value(kind).run()
    at.radio(key="rt_source").set_value(source).run()
    at.select_slider(key="rt_boot").set_value(boot).run()
    assert not at.exception, [e.value for e in at.exception]
    if any(b.key == "rt_run" for b in at.button):
        at.button(key="rt_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _frame(at: AppTest, *columns: str):
    for d in at.dataframe:
        if set(columns) <= set(map(str, d.value.columns)):
            return d.value
    raise AssertionError(f"no dataframe with columns {columns}")


def _charts(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


def test_ordinal_demo_shows_verdicts_confusion_and_agreement():
    at = _run(_page(), "ordinal")
    table = _frame(at, "verdict", "bias_low", "noise_high", "simulated role")
    flagged = table[table["simulated role"] != "reliable"]
    assert (flagged.apply(lambda r: r["simulated role"] in r["verdict"], axis=1)).mean() >= 0.8
    assert _charts(at) == 3  # scatter, ordinal confusion, agreement
    agreement = _frame(at, "statistic", "low", "high")
    assert "Krippendorff's alpha (ordinal)" in set(agreement["statistic"])
    assert any(b.proto.label.startswith("Download verdicts") for b in at.get("download_button"))
    who = at.selectbox(key="rt_who")
    who.set_value(who.options[1]).run()  # one annotator's model confusion
    assert not at.exception and _charts(at) == 3


def test_numeric_demo_shows_verdicts_and_scatter():
    at = _run(_page(), "numeric")
    table = _frame(at, "verdict", "bias", "noise", "simulated role")
    assert (table["verdict"] == table["simulated role"]).mean() >= 0.8
    agreement = _frame(at, "statistic", "value")
    assert {"Krippendorff's alpha (interval)", "ICC(1,1) one-way"} <= set(agreement["statistic"])
    assert _charts(at) == 2


def test_judges_demo_shows_calibration_and_correlated_group():
    at = _page()
    at.radio(key="rt_kind").set_value("judges").run()
    at.checkbox(key="rt_truth").check().run()
    at = _run(at, "judges")
    table = _frame(at, "overconfidence", "ece", "verdict", "simulated role")
    shares = table["simulated role"] == "shares errors"
    assert (table.loc[shares, "verdict"] == "over-confident").all()
    assert (table.loc[shares, "shares errors with"] == "group 1").all()
    assert any("shares errors" in w.value for w in at.warning)
    assert _charts(at) == 2  # calibration, agreement


def test_current_data_each_type():
    at = _page()  # the default demo dataset: binary labels "negative"/"positive", no confidences
    at = _run(at, "ordinal", "Current data")
    assert at.multiselect(key="rt_levels").value == ["negative", "positive"]
    assert _frame(at, "verdict", "ratings") is not None
    at = _run(at, "numeric", "Current data")
    assert any("numbers" in e.value for e in at.error)  # words are not numeric ratings: one clear message
    at = _run(at, "judges", "Current data")
    assert any("confidence" in e.value for e in at.error)


def _with_data(resp, gold=None) -> AppTest:
    from fusion_core.data.dataset import make_dataset

    at = _page()
    at.session_state["fc_dataset"] = make_dataset(resp, name="uploaded ratings", source="upload", gold=gold)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_current_data_numeric_levels_confirmed_then_numeric():
    from fusion_core.data.responses import Responses
    from fusion_core.simulate.ratings import ordinal_crowd

    sim = ordinal_crowd(n_items=200, n_workers=10, n_lenient=2, n_harsh=2, n_noisy=2, seed=3)
    at = _with_data(Responses.from_frame(sim.responses.astype(str)))  # labels "1" … "5" as text
    at.radio(key="rt_kind").set_value("ordinal").run()
    at.radio(key="rt_source").set_value("Current data").run()
    assert any("Detected numeric levels" in m.value for m in at.markdown)
    assert not any(b.key == "rt_run" for b in at.button)  # nothing is fitted before the order is confirmed
    at.checkbox(key="rt_confirm").check().run()
    at = _run(at, "ordinal", "Current data")
    table = _frame(at, "verdict", "bias")
    role = sim.role.reindex(table.index)
    assert table.loc[role == "lenient", "verdict"].str.contains("lenient").all()
    heat = at.get("plotly_chart")[1].proto.spec
    assert '"reported"' in heat and '"true"' in heat
    at = _run(at, "numeric", "Current data")  # the same levels read as numbers
    assert _frame(at, "verdict", "noise_high") is not None


def test_current_data_judges_with_confidences_and_gold():
    from fusion_core.data.responses import Responses
    from fusion_core.simulate.judges import judge_panel

    sim = judge_panel(n_items=300, seed=4)
    at = _with_data(Responses.from_frame(sim.responses, confidence="confidence"), gold=sim.truth)
    at.radio(key="rt_kind").set_value("judges").run()
    at.radio(key="rt_source").set_value("Current data").run()
    at.checkbox(key="rt_gold").check().run()
    at = _run(at, "judges", "Current data")
    table = _frame(at, "overconfidence", "verdict")
    group = sim.group.reindex(table.index)
    assert (table.loc[group, "verdict"] == "over-confident").all()


def test_without_data_only_the_demos_are_offered():
    at = _page()
    at.session_state["fc_dataset"] = None
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="rt_source").options == ["Simulated demo"]
    at = _run(at, "numeric")
    assert _frame(at, "verdict", "simulated role") is not None
