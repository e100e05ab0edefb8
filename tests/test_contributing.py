"""CONTRIBUTING.md's claims, checked: adding a method is one new file, and the CLI and the app list it with no other
edit.  The worked example (Wawa) is the shipped file, verbatim; a copy of the project without that file does not
list the method, and the same copy with only the file added back lists it in the CLI and on the app's Fit page.
The other worked examples too: a result field is one line (``FitFields``), an input format one file (``tsv.py``,
verbatim), an agreement statistic one entry (``AGREEMENT_STATISTICS``), each checked without a subprocess."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fusion_core.methods import create

ROOT = Path(__file__).resolve().parents[1]
WAWA = ROOT / "fusion_core" / "methods" / "wawa.py"


def _example_from_contributing() -> str:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    example = next(b for b in blocks if "@register(" in b)
    return example


def test_the_worked_example_is_the_shipped_file():
    assert _example_from_contributing() == WAWA.read_text(encoding="utf-8")


_APP_CHECK = """
from streamlit.testing.v1 import AppTest
at = AppTest.from_file("app.py", default_timeout=120)
at.run()
at.switch_page("pages/2_Fit.py").run()
assert not at.exception, [e.value for e in at.exception]
names = set()
for frame in at.dataframe:
    if "method" in map(str, frame.value.columns):
        names |= set(frame.value["method"].astype(str))
print("wawa" in names)
"""


def _run(cwd: Path, *args: str) -> str:
    res = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


@pytest.mark.slow  # four subprocesses (CLI and app, with and without the file); the example check stays default
def test_one_new_file_is_all_a_method_needs(tmp_path):
    for part in ("fusion_core", "fusion_app", "pages", ".streamlit"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "app.py", tmp_path / "app.py")
    target = tmp_path / "fusion_core" / "methods" / "wawa.py"
    target.unlink()
    assert "wawa" not in _run(tmp_path, "-m", "fusion_core", "methods")
    assert _run(tmp_path, "-c", _APP_CHECK).strip().endswith("False")

    target.write_text(_example_from_contributing(), encoding="utf-8")  # the one new file, nothing else
    assert "wawa" in _run(tmp_path, "-m", "fusion_core", "methods")
    assert _run(tmp_path, "-c", _APP_CHECK).strip().endswith("True")


def test_wawa_weights_rank_spammers_last():
    from fusion_core.simulate import dawid_skene

    sim = dawid_skene(n_items=600, n_workers=20, n_classes=3, responses_per_item=5, spammers=4, seed=2)
    est = create("wawa").fit(sim.responses)
    role = sim.role.reindex(est.skills_.index)
    spam = est.skills_[role == "spammer"].to_numpy()
    honest = est.skills_[role != "spammer"].to_numpy()
    assert len(spam) == 4 and spam.max() < honest.min()
    acc = lambda m: float(np.mean(m.labels_.to_numpy() == sim.truth.reindex(m.labels_.index).to_numpy()))
    assert acc(est) >= acc(create("mv").fit(sim.responses))


def test_every_shared_result_field_reaches_the_result():
    """A result field is declared once (``FitFields``): whatever a method puts in any of them arrives unchanged
    in ``result_`` with no copy written by hand."""
    from dataclasses import fields

    from fusion_core.methods.results import Fit, FitFields, FitResult

    sentinel = {f.name: object() for f in fields(FitFields)}
    sentinel.update(log_likelihood=[-3.0, -2.5], n_iter=2, converged=False, warnings=["a", "b", "a"])
    sentinel.update(annotator_columns=(), item_columns=(), details={"x": 1})
    res = FitResult.from_fit(
        Fit(**sentinel, skills=np.ones(2)),
        method="m",
        params={},
        items=None,
        workers=None,
        classes=None,
        worker_skill=np.ones(2),
        seconds=0.0,
    )
    for name, value in sentinel.items():
        expected = ["a", "b"] if name == "warnings" else value
        got = getattr(res, name)
        assert got is value or got == expected, name


def test_results_and_simulations_are_typed_fields_not_string_keyed_dicts():
    """Results and simulations carry typed fields; the one dict allowed is ``details`` (method internals that no
    other layer reads)."""
    import dataclasses
    import importlib
    import pkgutil

    import fusion_core.simulate
    from fusion_core.methods import results

    modules = [results] + [
        importlib.import_module(f"fusion_core.simulate.{m.name}")
        for m in pkgutil.iter_modules(fusion_core.simulate.__path__)
    ]
    from fusion_core.simulate import Simulation
    from fusion_core.simulate.multilabel import MultiLabelSimulation

    kinds = (Simulation, MultiLabelSimulation, results.FitFields)
    classes = {c for mod in modules for c in vars(mod).values() if isinstance(c, type) and issubclass(c, kinds)}
    assert {"Simulation", "CrowdSimulation", "SpectralCrowd", "FitResult"} <= {c.__name__ for c in classes}
    dicts = [
        f"{c.__name__}.{f.name}"
        for c in classes
        for f in dataclasses.fields(c)
        if str(f.type).startswith("dict") and f.name not in ("details", "params")
    ]
    assert not dicts, f"string-keyed dictionaries where typed fields belong: {dicts}"


# ------------------------------------------------- the other worked examples: a result field, a format, a statistic
def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"), flags=re.S)


def _module(name: str, source: str):
    import types

    mod = types.ModuleType(name)
    sys.modules[name] = mod  # dataclasses look their module up while building the class
    try:
        exec(compile(source, name, "exec"), mod.__dict__)
    finally:
        del sys.modules[name]
    return mod


def test_adding_a_result_field_is_one_line():
    (line,) = [b for b in _blocks() if "(example field)" in b]
    assert line.count("\n") == 1  # one line in one place
    source = (ROOT / "fusion_core" / "methods" / "results.py").read_text(encoding="utf-8")
    anchor = "    warnings: list[str] = field(default_factory=list)\n"
    assert source.count(anchor) == 1 and source.index("class FitFields") < source.index(anchor)
    mod = _module("_results_with_a_new_field", source.replace(anchor, anchor + line))
    spread = np.array([0.1, 0.4])
    fit = mod.Fit(posterior=np.full((2, 2), 0.5), dispersion=spread)
    res = mod.FitResult.from_fit(
        fit, method="m", params={}, items=None, workers=None, classes=None, worker_skill=np.ones(2), seconds=0.0
    )
    assert res.dispersion is spread


def test_the_format_example_is_the_shipped_file_and_one_registration_lists_it(tmp_path):
    import pandas as pd

    from fusion_core.cli import build_parser
    from fusion_core.data.formats import _REGISTRY, upload_types
    from fusion_core.data.loading import read_table

    (example,) = [b for b in _blocks() if "register_format(" in b]
    assert example == (ROOT / "fusion_core" / "data" / "formats" / "tsv.py").read_text(encoding="utf-8")
    copy = example.replace('name="tsv"', 'name="tsv-example"').replace('(".tsv", ".tab")', '(".tsvx",)')
    _module("_format_example", copy)
    try:
        report = next(a for a in build_parser()._actions if a.dest == "command").choices["report"]
        option = next(a for a in report._actions if "--input-format" in a.option_strings)
        assert "tsv-example" in option.choices and "tsvx" in upload_types()
        src = tmp_path / "answers.tsvx"
        src.write_text("task\tworker\tlabel\n01\ta\tx\n01\tb\ty\n", encoding="utf-8")
        got = read_table(src, format="tsv-example")
        pd.testing.assert_frame_equal(got, read_table(src, format="tsv"))
        assert got["task"].tolist() == ["01", "01"]  # text as written
    finally:
        _REGISTRY.pop("tsv-example")


def test_adding_an_agreement_statistic_is_one_entry(tmp_path, capsys):
    import json

    import pandas as pd

    from fusion_core.cli import main
    from fusion_core.data.responses import Responses
    from fusion_core.diagnostics import agreement
    from fusion_core.diagnostics.fleiss import rated_counts
    from fusion_core.diagnostics.reliability import ItemStatistic

    (function,) = [b for b in _blocks() if "def percent_agreement" in b]
    (entry,) = [b for b in _blocks() if b.lstrip().startswith("AgreementStatistic(")]
    space = {"np": np, "Responses": Responses, "ItemStatistic": ItemStatistic, "rated_counts": rated_counts}
    exec(function, space)
    added = eval(entry.strip().rstrip(","), {**space, "AgreementStatistic": agreement.AgreementStatistic})
    df = pd.DataFrame({"task": ["t1"] * 3 + ["t2"] * 2 + ["t3"], "worker": list("abcabc"), "label": list("xxyxxy")})
    hand = (1 / 3 + 1) / 2  # t1: 1 agreeing pair of 3; t2: 1 of 1; t3 (one response) left out
    agreement.AGREEMENT_STATISTICS.append(added)  # the one edit
    try:
        intervals = agreement.agreement_intervals(Responses.from_frame(df), n_bootstrap=20)
        assert intervals[-1].statistic == "Percent agreement" and intervals[-1].value == pytest.approx(hand)
        assert agreement.agreement_summary(df).value("percent_agreement") == pytest.approx(hand)
        df.to_csv(tmp_path / "answers.csv", index=False)
        assert main(["agreement", str(tmp_path / "answers.csv"), "--bootstrap", "0", "--json"]) == 0
        printed = json.loads(capsys.readouterr().out)
        assert [e["statistic"] for e in printed][-1] == "Percent agreement"
    finally:
        agreement.AGREEMENT_STATISTICS.remove(added)
