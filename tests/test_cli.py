"""The command line: methods listing, fit outputs, simulate, and exit codes on bad input."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from fusion_core.cli import main
from fusion_core.methods import available


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
    assert len(workers) == 12 and workers["skill"].is_monotonic_decreasing
    assert summary["method"] == "ds" and summary["parameters"]["smoothing"] == 0.1
    assert {"iterations", "converged", "log_likelihood", "seconds"} <= set(summary)
    truth = pd.read_csv(sim_dir / "truth.csv").set_index("task")["truth"]
    assert (labels.set_index("task")["label"].reindex(truth.index) == truth).mean() > 0.8


def test_column_options_and_bad_input_exit_codes(tmp_path, capsys):
    src = tmp_path / "a.csv"
    pd.DataFrame({"item": [1, 1, 2, 2], "who": ["a", "b", "a", "b"], "ans": [0, 1, 1, 1]}).to_csv(src, index=False)
    assert main(["fit", str(src), "--out", str(tmp_path / "o")]) == 2
    assert "missing task column 'task'" in capsys.readouterr().err
    assert (
        main(
            [
                "fit",
                str(src),
                "--task-col",
                "item",
                "--worker-col",
                "who",
                "--label-col",
                "ans",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 0
    )
    assert main(["fit", str(src), "--method", "nope", "--out", str(tmp_path / "o")]) == 2
    assert "unknown method" in capsys.readouterr().err
    empty = tmp_path / "e.csv"
    empty.write_bytes(b"")
    assert main(["fit", str(empty), "--out", str(tmp_path / "o")]) == 2
    assert "empty" in capsys.readouterr().err
    assert (
        main(
            [
                "fit",
                str(src),
                "--task-col",
                "item",
                "--worker-col",
                "who",
                "--label-col",
                "ans",
                "--param",
                "max_iter=abc",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
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
