"""The Fit page's form: which registered methods the current data allows, and one widget per declared parameter
(generated from the method's :class:`~fusion_core.methods.params.Param` declarations: kind, range, choices, help,
advanced flag)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from fusion_core.data.dataset import Dataset
from fusion_core.methods import available
from fusion_core.methods.params import Param, is_widget
from fusion_core.methods.registry import MethodInfo

NEEDS = {
    "sequence": "sequence + position columns",
    "graph": "an item graph",
    "context": "a context value per item",
    "multilabel": "multi-label responses (label sets; use the command line or the library)",
}
"""What to tell the user a method needs, per input kind."""


def method_status(ds: Dataset | None) -> list[tuple[MethodInfo, bool, str]]:
    """Every registered method with (runnable on this data?, why not)."""
    have = set(ds.inputs) if ds is not None else set()
    out = []
    for meta in available():
        missing = [n for n in meta.needs() if n not in have]
        if ds is None:
            out.append((meta, False, "load data first"))
        elif missing:
            out.append((meta, False, "needs " + ", ".join(NEEDS.get(m, m) for m in missing)))
        else:
            out.append((meta, True, ""))
    return out


def _bounds(spec: Param, value: Any) -> tuple[float | None, float | None]:
    """The declared range, widened (never clipped) to include a saved value outside it."""
    low = 0 if spec.kind == "seed" else spec.low
    lo = None if low is None else (low if value is None else min(low, value))
    hi = None if spec.high is None else (spec.high if value is None else max(spec.high, value))
    return lo, hi


def _number(spec: Param, value: Any, key: str, help_text: str) -> Any:
    """A number input within the declared range (whole numbers for ``int`` and ``seed``)."""
    lo, hi = _bounds(spec, value)
    if spec.kind in ("int", "seed"):
        whole = st.number_input(
            spec.name,
            value=None if value is None else int(value),
            min_value=None if lo is None else int(lo),
            max_value=None if hi is None else int(hi),
            step=1,
            help=help_text,
            key=key,
        )
        return None if whole is None else int(whole)
    real = st.number_input(
        spec.name,
        value=None if value is None else float(value),
        min_value=None if lo is None else float(lo),
        max_value=None if hi is None else float(hi),
        format="%g",
        help=help_text,
        key=key,
    )
    return None if real is None else float(real)


def param_widget(spec: Param, value: Any, key: str) -> Any:
    """One widget for a declared parameter (``is_widget(spec)`` must hold), showing ``value``; returns the value
    the user chose."""
    help_text = f"{spec.help} Allowed: {spec.allowed()}."
    if spec.kind == "bool":
        return st.checkbox(spec.name, value=bool(value), help=help_text, key=key)
    if spec.kind == "choice":
        options = list(spec.choices or ()) + ([None] if spec.nullable else [])
        index = options.index(value) if value in options else 0
        return st.selectbox(spec.name, options, index=index, help=help_text, key=key, format_func=str)
    if spec.kind in ("int", "float", "seed"):
        return _number(spec, value, key, help_text)
    return st.text_input(spec.name, value="" if value is None else str(value), help=help_text, key=key)


def param_inputs(meta: MethodInfo, saved: Mapping[str, Any], *, advanced: bool) -> dict[str, Any]:
    """Widgets for the method's parameters (advanced ones only when asked); returns the values that differ from
    the defaults (only those go to the estimator and into the cache key)."""
    values: dict[str, Any] = {}
    for spec in meta.params:
        if not is_widget(spec) or (spec.advanced and not advanced):
            continue
        value = saved.get(spec.name, spec.default)
        values[spec.name] = param_widget(spec, value, key=f"param_{meta.name}_{spec.name}")
    return {k: v for k, v in values.items() if v != meta.param(k).default}
