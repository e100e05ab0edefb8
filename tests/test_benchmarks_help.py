"""Every benchmark script answers ``--help`` from the shared runner (``benchmarks/_common.make_parser``): usage and
its docstring, exit 0, before any work (run in this process: the scripts' imports are the library's, already
loaded, so the whole check costs well under a second), and ``benchmarks/README.md`` lists every script."""

from __future__ import annotations

import ast
import contextlib
import io
import runpy
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_prints_usage_and_exits_before_any_work(script, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(script), "--help"])
    monkeypatch.syspath_prepend(str(BENCH))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
        runpy.run_path(str(script), run_name="__main__")
    text = out.getvalue()
    assert stop.value.code == 0, text
    assert text.startswith(f"usage: {script.name}"), text[:200]
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    flat = " ".join(text.split())
    for part in doc.split("\n\n", 1):  # the description (first paragraph) and the epilog (the rest)
        assert " ".join(part.split()) in flat, "--help does not print the script's docstring"


def test_the_readme_lists_every_script():
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in SCRIPTS if f"`{p.name}`" not in readme]
    assert not missing, f"benchmarks/README.md does not list {missing}"
