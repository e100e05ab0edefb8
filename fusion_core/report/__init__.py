"""The shareable audit report: one self-contained HTML file (:func:`report_html`, :func:`write_report`) — the
findings in plain words, every chart embedded with plotly.js inlined once (no network needed to open it), the
method and data description, and the tables (escaped).  ``fusion-core report`` (:mod:`.cli`) writes the same file.

The writers are imported on first use, so the command line starts without loading plotly.
"""

from __future__ import annotations

from typing import Any

__all__ = ["report_html", "write_report"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from fusion_core.report import html

        return getattr(html, name)
    raise AttributeError(f"module 'fusion_core.report' has no attribute {name!r}")
