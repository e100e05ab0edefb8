"""The library does not need the app: importing it loads no Streamlit, and its lower layers no Plotly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _loaded_after(imports: str, prefixes: tuple[str, ...]) -> list[str]:
    code = (
        f"import sys; {imports}; print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] in {prefixes!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_library_and_plots_import_no_streamlit():
    imports = "import fusion_core.methods, fusion_core.diagnostics, fusion_core.plots, fusion_core.cli"
    imports += "; from fusion_core.methods import available; available()"  # every method module
    assert _loaded_after(imports, ("streamlit", "fusion_app")) == []


def test_data_methods_diagnostics_import_without_plotly():
    imports = (
        "import fusion_core.data, fusion_core.data.dataset, fusion_core.data.uploads, fusion_core.methods, "
        "fusion_core.diagnostics.tables, fusion_core.diagnostics.compare, fusion_core.diagnostics.bootstrap, "
        "fusion_core.diagnostics.agreement, fusion_core.diagnostics.cartels, "
        "fusion_core.simulate.demo, fusion_core.cli"
        "; from fusion_core.methods import available; available()"
    )
    assert _loaded_after(imports, ("plotly", "streamlit")) == []


def test_no_library_module_imports_streamlit_or_the_app():
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "fusion_core").rglob("*.py")
        if any(s in p.read_text() for s in ("import streamlit", "from streamlit", "fusion_app"))
    ]
    assert offenders == []
