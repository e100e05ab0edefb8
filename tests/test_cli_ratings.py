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
    assert np.corrcoef(workers["bias"], sim.bias.reindex(workers.index))[0, 1] > 0.9
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


def test_fit_levels_order_and_verdicts(tmp_path, capsys):
    levels = ["poor", "fair", "good", "great", "superb"]
    sim = ordinal_crowd(n_items=200, n_workers=10, n_lenient=2, n_harsh=2, n_noisy=2, labels=levels, seed=5)
    src = tmp_path / "answers.csv"
    sim.responses.assign(worker="=" + sim.responses["worker"]).to_csv(src, index=False)  # formula-like ids
    out = tmp_path / "o"
    args = ["fit", str(src), "--method", "ordinal-em", "--levels", ",".join(levels), "--out", str(out)]
    assert main([*args, "--verdicts", "--bootstrap", "30"]) == 0
    assert "verdicts (30 bootstrap refits over items)" in capsys.readouterr().out
    confusion = pd.read_csv(out / "confusion.csv")
    assert list(dict.fromkeys(confusion["true"])) == levels  # the declared order, not the text order
    from fusion_core.data.export import read_csv_export
    from fusion_core.diagnostics.rating_verdicts import ordinal_verdicts

    raw = (out / "verdicts.csv").read_text()
    assert "\"'=w" in raw  # formula-safe writer
    got = read_csv_export(out / "verdicts.csv").set_index("worker")
    ref = ordinal_verdicts(
        sim.responses.assign(worker="=" + sim.responses["worker"]).astype(str), levels=levels, n_bootstrap=30
    ).table
    assert (got.loc[ref.index.astype(str), "verdict"].to_numpy() == ref["verdict"].to_numpy()).all()
    role = sim.role.rename(index=lambda w: "=" + w)
    assert (got.loc[role.index[role == "lenient"], "verdict"].str.contains("lenient")).all()
    # the wrong order is refused with one line; --levels and --verdicts only where they apply
    assert main([*args[:-2], "--out", str(tmp_path / "x"), "--levels", "poor,fair"]) == 2
    assert "superb" in capsys.readouterr().err
    assert main(["fit", str(src), "--method", "ds", "--levels", "a,b", "--out", str(tmp_path / "y")]) == 2
    assert "ordinal methods" in capsys.readouterr().err
    assert main(["fit", str(src), "--method", "mv", "--verdicts", "--out", str(tmp_path / "z")]) == 2
    assert "bias and noise" in capsys.readouterr().err
    assert main([*args, "--verdicts", "--bootstrap", "5"]) == 2


def test_fit_levels_numeric_equals_param(tmp_path):
    sim = ordinal_crowd(n_items=120, n_workers=10, n_lenient=2, n_harsh=2, n_noisy=2, seed=6)
    src = tmp_path / "answers.csv"
    sim.responses.to_csv(src, index=False)
    base = ["fit", str(src), "--method", "ordinal-em"]
    assert main([*base, "--levels", "numeric", "--out", str(tmp_path / "a")]) == 0
    assert main([*base, "--param", "levels=numeric", "--out", str(tmp_path / "b")]) == 0
    a = pd.read_csv(tmp_path / "a" / "workers.csv")
    b = pd.read_csv(tmp_path / "b" / "workers.csv")
    pd.testing.assert_frame_equal(a, b)
    assert main([*base, "--levels", "numeric", "--param", "levels=numeric", "--out", str(tmp_path / "c")]) == 2


def test_numeric_verdicts(tmp_path, capsys):
    from fusion_core.simulate.ratings import numeric_crowd

    sim = numeric_crowd(n_items=200, n_workers=10, n_lenient=2, n_harsh=2, n_noisy=2, seed=7)
    src = tmp_path / "ratings.csv"
    sim.responses.to_csv(src, index=False)
    out = tmp_path / "out"
    assert main(["numeric", str(src), "--out", str(out), "--verdicts", "--bootstrap", "30"]) == 0
    got = pd.read_csv(out / "verdicts.csv").set_index("worker")
    role = sim.role
    assert (got["verdict"].reindex(role.index) == role).mean() >= 0.9
    assert {"bias_low", "bias_high", "noise_low", "noise_high", "reason"} <= set(got.columns)
    assert "verdicts" in capsys.readouterr().out


def test_judge_calibration_output(tmp_path, capsys):
    from fusion_core.simulate.judges import judge_panel

    sim = judge_panel(n_items=300, seed=2)
    src = tmp_path / "judges.csv"
    sim.responses.to_csv(src, index=False)
    gold = tmp_path / "gold.csv"
    sim.truth.rename("truth").reset_index().to_csv(gold, index=False)
    out = tmp_path / "out"
    args = ["fit", str(src), "--method", "mv", "--confidence-col", "confidence", "--out", str(out)]
    assert main([*args, "--calibration", "--gold", str(gold)]) == 0
    assert "calibration against gold labels" in capsys.readouterr().out
    cal = pd.read_csv(out / "calibration.csv").set_index("worker")
    group = sim.group
    assert cal.loc[group.index[group], "overconfidence"].min() > cal.loc[group.index[~group], "overconfidence"].max()
    bins = pd.read_csv(out / "calibration_bins.csv")
    assert bins.loc[bins["judge"].isna(), "count"].sum() == len(sim.responses)
    no_conf = ["fit", str(src), "--method", "mv", "--calibration", "--out", str(tmp_path / "n")]
    assert main(no_conf) == 2 and "--confidence-col" in capsys.readouterr().err
