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

RECOMMENDED = "auto"
"""The method preselected on the Fit page (the quality issue's recommended method)."""

PLAIN = {
    "auto": "Tries the standard methods below on part of the answers, checks which predicts the rest "
    "best, and keeps it (or averages those it cannot tell apart).",
    "mv": "Majority vote: every annotator counts the same. The simple baseline.",
    "wawa": "Weighted majority vote: annotators who usually agree with the majority count more.",
    "ds": "Learns how often each annotator confuses each label with each other label (Dawid–Skene). Best when "
    "every annotator gave many answers.",
    "ds1": "Learns one accuracy per annotator; simpler than full confusion tables, steadier with few answers.",
    "bds": "Like the confusion-table model, but annotators with few answers borrow from the crowd's average.",
    "mm": "Reads each annotator's confusions off agreement patterns directly, without iterating (fast; needs three "
    "or more annotators per item).",
    "mm-ds": "Confusion-table model started from the agreement-pattern estimate.",
    "sml": "Two labels only: ranks annotators by how much they agree with everyone else, then a weighted vote.",
    "isml": "Two labels only: like sml, and also how well each annotator detects each of the two labels.",
    "sml-ds": "Two labels only: confusion-table model started from the spectral ranking.",
    "glad": "Models each annotator's ability and each item's difficulty.",
    "mace": "Separates careful answers from spamming; good at spotting spammers.",
    "lf": "For automatic labelling rules (weak supervision) that may abstain.",
    "ordinal-em": "For ordered ratings (e.g. 1–5): each annotator's harshness or leniency and noise.",
    "hmm-em": "For sequences (e.g. words in sentences): neighbouring items' labels help, one best label path.",
    "hmm-mm": "For sequences: like hmm-em but from agreement patterns, without iterating.",
    "hmm-mv": "For sequences: like hmm-em, started from majority vote.",
    "mrf-em": "For items linked in a graph: linked items tend to share a label.",
    "mrf-mv": "For items linked in a graph, started from majority vote.",
    "context-em": "Reliability that changes with a numeric property of the item (e.g. length, time of day).",
    "multilabel-em": "For answers that are sets of labels.",
}
"""What each method does, in plain words (the registry's ``summary`` is the expert's description)."""


def describe(meta: MethodInfo) -> str:
    """The plain-words description of a method (its registry summary when none is written)."""
    return PLAIN.get(meta.name, meta.summary)


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
