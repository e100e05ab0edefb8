"""The layers of the code base, enforced: no upward import between layers, no import cycles, no streamlit in the
library, no oversized modules (docs/ARCHITECTURE.md).

Layers, lowest first (a module may import its own layer and the layers below it):

0. foundation: ``fusion_core.errors``, ``fusion_core.progress``, ``fusion_core._version``
1. data loading/validation and the response model: ``fusion_core.data``; simulators (``fusion_core.simulate``) sit
   beside it and may import only the foundation and ``data``
2. methods: ``fusion_core.methods``
3. diagnostics: ``fusion_core.diagnostics``
4. plots: ``fusion_core.plots``
   evaluation against gold (``fusion_core.metrics``) sits with the diagnostics; execution engines
   (``fusion_core.engines``: methods' kernels on a Dask cluster) sit there too: they use data and methods, and
   only the front ends use them
5. front ends in the library: the ``fusion_core.cli`` package, ``fusion_core.report``, ``fusion_core.__main__``
(the app side, ``app.py``, ``pages/`` and its support package, sits above all of them, outside ``fusion_core``.)
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "fusion_core"
LAYERS = {
    "fusion_core.errors": 0,
    "fusion_core.progress": 0,
    "fusion_core._version": 0,
    "fusion_core.data": 1,
    "fusion_core.simulate": 1,
    "fusion_core.methods": 2,
    "fusion_core.diagnostics": 3,
    "fusion_core.plots": 4,
    "fusion_core.cli": 5,
    "fusion_core.report": 5,
    "fusion_core.__main__": 5,
    "fusion_core.metrics": 3,
    "fusion_core.engines": 3,
}
MAX_LINES = 500


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@functools.cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PKG.rglob("*.py")}


def layer(mod: str) -> int | None:
    best = None
    for prefix, rank in LAYERS.items():
        if (mod == prefix or mod.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, rank)
    return None if best is None else best[1]


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Ids of the nodes inside ``if TYPE_CHECKING:`` blocks: imports there never run."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def imports(path: Path, mod: str, *, at_run_time: bool = False) -> set[str]:
    """Absolute names of the fusion_core modules (or packages) imported by a module, wherever the import statement
    is: at the top, inside a function or a method (every Import/ImportFrom node of its syntax tree).
    ``from package import name`` counts as an import of the submodule when ``name`` is one, else of the package's
    facade.  ``at_run_time`` leaves out the imports under ``if TYPE_CHECKING:`` (annotations only)."""
    tree = _tree(path)
    skip = _type_checking_only(tree) if at_run_time else set()
    known = modules()
    out: set[str] = set()
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names]
            out.update(n for n in names if n in known)
            if not all(n in known for n in names):
                out.add(base)
    return {m for m in out if m in known}


def test_known_layers_cover_every_module():
    unknown = [m for m in modules() if m != "fusion_core" and layer(m) is None]
    assert not unknown, f"modules outside the declared layers: {unknown}; add them to LAYERS and docs/ARCHITECTURE.md"


def test_no_upward_imports():
    bad = []
    for mod, path in modules().items():
        rank = layer(mod)
        if rank is None:
            continue
        for dep in imports(path, mod):
            dep_rank = layer(dep)
            if dep_rank is None:  # the package facade fusion_core/__init__.py
                continue
            if dep_rank > rank:
                bad.append(f"{mod} (layer {rank}) imports {dep} (layer {dep_rank})")
            if mod.startswith("fusion_core.simulate") and dep_rank > 1:
                bad.append(f"{mod} (simulators) imports {dep}: simulators may only use the foundation and data layers")
    assert not bad, "upward imports:\n" + "\n".join(sorted(bad))


@functools.cache
def import_graph() -> nx.DiGraph:
    """Module → module it imports at run time, imports inside functions included."""
    g = nx.DiGraph()
    for mod, path in modules().items():
        g.add_node(mod)
        g.add_edges_from((mod, dep) for dep in imports(path, mod, at_run_time=True) if dep != mod)
    return g


def test_no_import_cycles():
    """No cycle at all, not even through a lazy import inside a function (a module of a package imports the
    package's facade only for names the facade defines itself)."""
    cycles = sorted(sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1)
    assert not cycles, f"import cycles (each a group of modules that reach each other): {cycles[:5]}"


def test_the_cycle_check_sees_imports_inside_functions(tmp_path):
    """The graph has the edge of an import written inside a function (base.py's start from vote shares was one
    such lazy import, and it hid a cycle with majority.py), and none for an import only type checkers run."""
    g = import_graph()
    assert g.has_edge("fusion_core.methods.base", "fusion_core.methods.votes")
    lazy = tmp_path / "lazy.py"
    lazy.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fusion_core.data import text\n"
        "def f():\n    from fusion_core.data.responses import Responses\n    return Responses\n"
    )
    assert imports(lazy, "fusion_core.lazy", at_run_time=True) == {"fusion_core.data.responses"}
    assert imports(lazy, "fusion_core.lazy") == {"fusion_core.data.responses", "fusion_core.data.text"}


def test_the_library_never_imports_streamlit():
    found = [m for m, p in modules().items() if any(n.split(".")[0] == "streamlit" for n in _all_imports(p))]
    assert not found, f"library modules importing streamlit: {found}"
    code = (
        "import sys, fusion_core.methods, fusion_core.diagnostics, fusion_core.plots, fusion_core.data, fusion_core.cli;"
        "from fusion_core.methods import available; available();"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'streamlit'); print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stdout + res.stderr


def _all_imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_stay_small(path):
    n = sum(1 for _ in path.open(encoding="utf-8"))
    assert n <= MAX_LINES, f"{path.relative_to(ROOT)} has {n} lines (> {MAX_LINES}): split it along its seams"
