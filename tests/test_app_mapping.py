"""Data page mapping (issue 26, item 4): a timestamp picked as the label column is warned about at mapping time
and refused on load with the previous data kept; the label's first guess skips id/time columns; gold uploads get
their columns guessed and can be re-mapped."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("streamlit.testing.v1")
from apptest import go, start_app


def _csv(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode()


def _crowd(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """Columns in alphabetical order, none named like a label: by position the label would be the timestamp."""
    rng = np.random.default_rng(seed)
    t0 = pd.Timestamp("2024-03-01T08:00:00")
    return pd.DataFrame(
        {
            "item": [f"t{i // 5}" for i in range(n)],
            "annotator": [f"w{i % 5}" for i in range(n)],
            "created_at": [(t0 + pd.Timedelta(seconds=int(s))).isoformat() for s in rng.integers(0, 10**7, n)],
            "sentiment": rng.choice(["pos", "neg"], n).tolist(),
        }
    )


def _upload(at, name: str, data: bytes, key: str = "upload_responses"):
    at.file_uploader(key=key).set_value((name, data, "text/csv")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_timestamp_label_warned_at_mapping_and_refused_on_load():
    at = go(start_app(), "pages/1_Data.py")
    before = at.session_state["fc_dataset"].fingerprint
    _upload(at, "crowd.csv", _csv(_crowd()))
    assert at.selectbox(key="map_label").value == "sentiment"  # never created_at by position
    assert not [w for w in at.warning if "dates or times" in w.value]
    at.selectbox(key="map_label").set_value("created_at").run()
    warned = [w.value for w in at.warning if "dates or times" in w.value]
    assert len(warned) == 1 and "created\\_at" in warned[0] and "choose the column" in warned[0]
    at.button(key="use_columns").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "dates or times" in errors[0], errors
    assert at.session_state["fc_dataset"].fingerprint == before  # nothing loaded, the previous data kept
    at.selectbox(key="map_label").set_value("sentiment").run()
    at.button(key="use_columns").click().run()
    assert at.session_state["fc_dataset"].responses.n_classes == 2


def test_gold_upload_guessed_then_remapped():
    at = go(start_app(), "pages/1_Data.py")
    crowd = _crowd()
    _upload(at, "crowd.csv", _csv(crowd))
    at.button(key="use_columns").click().run()
    items = sorted(set(crowd["item"]))
    gold = pd.DataFrame({"item_id": items, "wrong": ["x"] * len(items), "gold_label": ["pos"] * len(items)})
    _upload(at, "gold.csv", _csv(gold), key="upload_gold")
    assert not at.error, [e.value for e in at.error]
    ds = at.session_state["fc_dataset"]
    assert ds.gold is not None and len(ds.gold) == len(items) and set(ds.gold) == {"pos"}
    assert at.selectbox(key="map_gold_truth").value == "gold_label"
    # a file whose columns cannot be guessed: one message, then mapped by hand
    odd = pd.DataFrame({"a": items, "b": ["neg"] * len(items), "c": ["x"] * len(items)})
    _upload(at, "odd.csv", _csv(odd), key="upload_gold")
    assert len(at.error) == 1 and "task id" in at.error[0].value
    at.selectbox(key="map_gold_task").set_value("a")
    at.selectbox(key="map_gold_truth").set_value("b").run()
    at.button(key="use_gold_columns").click().run()
    assert not at.error, [e.value for e in at.error]
    assert set(at.session_state["fc_dataset"].gold) == {"neg"}
