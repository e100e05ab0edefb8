"""The command line: methods listing, fit outputs, simulate, and exit codes on bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fusion_core.cli import main
from fusion_core.data.responses import Responses
from fusion_core.diagnostics.tables import annotator_table, confusion_table
from fusion_core.methods import available, create, info
from fusion_core.simulate import dawid_skene


def test_methods_lists_the_registry(capsys):
    assert main(["methods", "--json"]) == 0
    listed = {m["name"] for m in json.loads(capsys.readouterr().out)}
    assert listed == {m.name for m in available()} and {"mv", "ds", "ds1"} <= listed


def test_simulate_then_fit_writes_every_output(tmp_path, capsys):
    sim_dir, out = tmp_path / "sim", tmp_path / "out"
    assert (
        main(["simulate", "--out", str(sim_dir), "--items", "300", "--workers", "12", "--classes", "3", "--seed", "1"])
        == 0
    )
    assert (
        main(["fit", str(sim_dir / "answers.csv"), "--method", "ds", "--param", "smoothing=0.1", "--out", str(out)])
        == 0
    )
    labels = pd.read_csv(out / "labels.csv")
    post = pd.read_csv(out / "posteriors.csv")
    conf = pd.read_csv(out / "confusion.csv")
    workers = pd.read_csv(out / "workers.csv")
    summary = json.loads((out / "summary.json").read_text())
    assert len(labels) == len(post) == 300 and list(labels.columns) == ["task", "label"]
    assert list(conf.columns) == ["worker", "true", "reported", "probability"] and len(conf) == 12 * 9
    assert conf.groupby(["worker", "true"])["probability"].sum().round(9).eq(1).all()
    assert len(workers) == 12 and workers["accuracy"].is_monotonic_decreasing
    assert summary["method"] == "ds" and summary["parameters"]["smoothing"] == 0.1
    assert {"iterations", "converged", "log_likelihood", "seconds"} <= set(summary)
    truth = pd.read_csv(sim_dir / "truth.csv").set_index("task")["truth"]
    assert (labels.set_index("task")["label"].reindex(truth.index) == truth).mean() > 0.8


def test_column_options_and_bad_input_exit_codes(tmp_path, capsys):
    src = tmp_path / "a.csv"
    pd.DataFrame({"item": [1, 1, 2, 2], "who": ["a", "b", "a", "b"], "ans": [0, 1, 1, 1]}).to_csv(src, index=False)
    assert main(["fit", str(src), "--out", str(tmp_path / "o")]) == 2
    assert "no column looks like the worker column; the file has 'item', 'who', 'ans'" in capsys.readouterr().err
    mapped = ["fit", str(src), "--task-col", "item", "--worker-col", "who", "--label-col", "ans"]
    assert main([*mapped, "--out", str(tmp_path / "o")]) == 0
    assert main(["fit", str(src), "--method", "nope", "--out", str(tmp_path / "o")]) == 2
    assert "unknown method" in capsys.readouterr().err
    empty = tmp_path / "e.csv"
    empty.write_bytes(b"")
    assert main(["fit", str(empty), "--out", str(tmp_path / "o")]) == 2
    assert "empty" in capsys.readouterr().err
    assert main([*mapped, "--param", "max_iter=abc", "--out", str(tmp_path / "o")]) == 2
    assert "'max_iter' must be a whole number" in capsys.readouterr().err


@pytest.mark.parametrize("needs", ["graph", "context"])
def test_methods_needing_extra_inputs_say_so(tmp_path, capsys, needs):
    names = [m.name for m in available() if needs in m.inputs]
    if not names:
        pytest.skip(f"no registered method needs a {needs}")
    src = tmp_path / "a.csv"
    pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["a", "b", "a", "b"], "label": [0, 1, 1, 1]}).to_csv(src, index=False)
    assert main(["fit", str(src), "--method", names[0], "--out", str(tmp_path / "o")]) == 2
    assert needs in capsys.readouterr().err


def test_parameters_are_listed_with_their_allowed_values(capsys):
    assert main(["methods", "-v"]) == 0
    out = capsys.readouterr().out
    spec = info("ds").param("max_iter")
    assert f"--param max_iter=…  default 500; {spec.allowed()}." in out and "from 1 to 100000" in out
    assert main(["methods", "--json"]) == 0
    listed = {m["name"]: m for m in json.loads(capsys.readouterr().out)}
    tie = next(p for p in listed["mv"]["parameters"] if p["name"] == "tie_break")
    assert tie["allowed"] == info("mv").param("tie_break").allowed() and tie["choices"] == [
        "data",
        "smallest",
        "random",
    ]
    with pytest.raises(SystemExit) as stop:
        main(["fit", "x.csv", "--out", "o", "--method", "hmm-em", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "parameters of hmm-em" in out
    for p in info("hmm-em").params:
        assert f"--param {p.name}=…  default" in out and p.allowed() in out


def test_parameters_parsed_and_checked_by_their_declarations(tmp_path, capsys):
    src = tmp_path / "a.csv"
    pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["a", "b", "a", "b"], "label": [0, 1, 1, 1]}).to_csv(src, index=False)
    out = tmp_path / "o"
    for bad, message in [
        ("max_iter=0", "parameter 'max_iter' must be a whole number from 1 to 100000; got 0."),
        ("estimate_priors=maybe", "parameter 'estimate_priors' must be true or false"),
        ("no_such=1", "method 'ds' has no parameter 'no_such'"),
        ("max_iter", "--param expects NAME=VALUE"),
    ]:
        assert main(["fit", str(src), "--param", bad, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert main(["fit", str(src), "--method", "mv", "--param", "tie_break=__bogus__", "--out", str(out)]) == 2
    assert "one of 'data', 'smallest', 'random'" in capsys.readouterr().err
    assert main(["fit", str(src), "--param", "max_iter=700", "--param", "estimate_priors=no", "--out", str(out)]) == 0
    params = json.loads((out / "summary.json").read_text())["parameters"]
    assert params["max_iter"] == 700 and params["estimate_priors"] is False


def test_outputs_are_the_shared_tables_and_the_result_summary(tmp_path):
    sim = dawid_skene(n_items=120, n_workers=7, n_classes=3, responses_per_item=4, seed=2)
    src, out = tmp_path / "a.csv", tmp_path / "o"
    sim.responses.to_csv(src, index=False)
    assert main(["fit", str(src), "--method", "ds", "--out", str(out)]) == 0
    est = create("ds").fit(Responses.from_frame(pd.read_csv(src)))
    workers = pd.read_csv(out / "workers.csv")
    expected = annotator_table(est.result_, est.responses_).rename_axis("worker").reset_index()
    assert list(workers.columns) == list(expected.columns)
    assert workers["worker"].astype(str).tolist() == expected["worker"].tolist()
    np.testing.assert_allclose(workers["accuracy"], expected["accuracy"])
    conf = pd.read_csv(out / "confusion.csv")
    np.testing.assert_allclose(conf["probability"], confusion_table(est.result_)["probability"])
    summary = json.loads((out / "summary.json").read_text())
    reference = est.result_.summary()
    for key in ("method", "parameters", "iterations", "converged", "items", "workers", "warnings"):
        assert summary[key] == json.loads(json.dumps(reference[key])), key
    assert summary["log_likelihood"] == pytest.approx(reference["log_likelihood"])
    assert "validation" in summary
