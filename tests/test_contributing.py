"""CONTRIBUTING.md's claim, checked: adding a method is one new file, and the CLI and the app list it with no other
edit.  The worked example (Wawa) is the shipped file, verbatim; a copy of the project without that file does not
list the method, and the same copy with only the file added back lists it in the CLI and on the app's Fit page."""

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
