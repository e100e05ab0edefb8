"""Every compiled kernel is in docs/KERNELS.md's table (the operation it serves and its measured end-to-end gain,
printed by ``benchmarks/kernels.py``): a function compiled with numba's decorator is named there by its module
(``family/module.py``) or as ``module.function``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _decorated_kernels() -> list[tuple[Path, str]]:
    out = []
    for path in sorted((ROOT / "fusion_core").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "njit" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef):
                for dec in node.decorator_list:
                    target = dec.func if isinstance(dec, ast.Call) else dec
                    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                    if name == "njit":
                        out.append((path, node.name))
    return out


def test_every_compiled_kernel_is_in_the_kernel_table():
    table = (ROOT / "docs" / "KERNELS.md").read_text(encoding="utf-8")
    kernels = _decorated_kernels()
    assert len(kernels) >= 8  # the layout's sort, DS's expected counts, the chain DP's and the cartel check's
    missing = [
        f"{p.relative_to(ROOT)}::{fn}"
        for p, fn in kernels
        if f"{p.parent.name}/{p.name}" not in table and f"{p.stem}.{fn}" not in table
    ]
    assert not missing, f"compiled kernels without a row in docs/KERNELS.md: {missing}"
