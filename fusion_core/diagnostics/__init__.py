"""Diagnostics: cartels, agreement, reliability, bootstrap intervals, tables, the audit.

``detect_cartels`` and ``CartelReport`` are re-exported lazily, so importing a light module of this package (e.g.
``fusion_core.diagnostics.tables`` in the CLI's ``fit``) does not load the cartel machinery (0.4 s of imports)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fusion_core.diagnostics.cartels import CartelReport, detect_cartels

__all__ = ["CartelReport", "detect_cartels"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from fusion_core.diagnostics import cartels

        return getattr(cartels, name)
    raise AttributeError(f"module 'fusion_core.diagnostics' has no attribute {name!r}")
