"""The rating commands of the CLI (issue 13): numeric truth with intervals, agreement with intervals, ordinal
ratings through ``fit --method ordinal-em``, and per-response confidences through ``fit --confidence-col``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fusion_core.cli import main
from fusion_core.data.numeric import NumericResponses
from fusion_core.diagnostics.krippendorff import krippendorff
from fusion_core.methods.numeric import NumericTruth
from fusion_core.simulate.ratings import numeric_ratings, ordinal_crowd


def test_numeric_command_equals_the_library(tmp_path, capsys):
    sim = numeric_ratings(n_items=120, n_workers=8, seed=3)
    src = tmp_path / "ratings.csv"
    sim.responses.to_csv(src, index=False)
    assert main(["numeric", str(src), "--out", str(tmp_path / "out"), "--value-col", "value"]) == 0
    items = pd.read_csv(tmp_path / "out" / "items.csv", dtype={"task": str}).set_index("task")
    ref = NumericTruth().fit(NumericResponses.from_frame(sim.responses.astype(str))).result_.items_frame()
    assert np.allclose(items.loc[ref.index.astype(str), "truth"].to_numpy(), ref["truth"].to_numpy(), atol=1e-9)
    assert (items["interval_low"] <= items["truth"]).all() and (items["truth"] <= items["interval_high"]).all()
    workers = pd.read_csv(tmp_path / "out" / "annotators.csv", dtype={"worker": str}).set_index("worker")
    assert np.corrcoef(workers["bias"], sim.extras["bias"].reindex(workers.index))[0, 1] > 0.9
    assert "numeric ratings" in capsys.readouterr().out


def test_agreement_command_prints_alpha_with_an_interval(tmp_path, capsys):
    sim = ordinal_crowd(n_items=150, n_workers=20, seed=1)
    src = tmp_path / "answers.csv"
    sim.responses.to_csv(src, index=False)
    assert main(["agreement", str(src), "--metric", "ordinal", "--bootstrap", "200", "--json"]) == 0
    (est,) = json.loads(capsys.readouterr().out)
    ref = krippendorff(sim.responses.astype(str), metric="ordinal", levels="numeric", n_bootstrap=0)
    assert abs(est["value"] - ref.value) < 1e-12 and est["low"] <= est["value"] <= est["high"]
    with pytest.raises(SystemExit) as stop:
        main(["agreement", str(src), "--metric", "bogus"])
    assert stop.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_ordinal_and_confidence_through_fit(tmp_path):
    sim = ordinal_crowd(n_items=150, n_workers=20, seed=2)
    src = tmp_path / "answers.csv"
    df = sim.responses.assign(conf=0.9)
    df.to_csv(src, index=False)
    out = tmp_path / "o"
    args = ["fit", str(src), "--method", "ordinal-em", "--param", "levels=numeric", "--out", str(out)]
    assert main(args) == 0
    assert "verdict" in pd.read_csv(out / "workers.csv").columns
    assert main(["fit", str(src), "--method", "mv", "--confidence-col", "conf", "--out", str(tmp_path / "c")]) == 0
    assert main(["fit", str(src), "--method", "mv", "--confidence-col", "nope", "--out", str(tmp_path / "d")]) == 2
