"""Level order of ordinal labels: ``levels=None`` (the labels' own order), ``'numeric'`` or a declared list."""

from __future__ import annotations

from dataclasses import replace
from numbers import Number
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError


def check_levels(value: Any) -> Any:
    if value is None or (isinstance(value, str) and value == "numeric"):
        return value
    if isinstance(value, (list, tuple, pd.Index, np.ndarray)) and not isinstance(value, str):
        vals = list(value)
        if len(vals) >= 2 and len(set(map(str, vals))) == len(vals):
            return value
    raise ValueError("None (the labels' own order), 'numeric', or a list of at least two distinct levels, lowest first")


def is_numeric_label(v: Any) -> bool:
    """A finite number (not a boolean) or text that reads as one ("3", "4.5")."""
    if isinstance(v, (bool, np.bool_)):
        return False
    try:
        return bool(np.isfinite(float(str(v))))
    except ValueError:
        return False


def with_levels(resp: Responses, levels: Any) -> Responses:
    """The responses recoded so that the classes are the levels, lowest first.

    ``levels=None`` keeps the classes' order (numeric order for numbers); ``"numeric"`` sorts labels as numbers
    and refuses other labels; a list gives the order explicitly (levels nobody used are kept as classes)."""
    if levels is None:
        return resp
    classes = resp.classes
    if isinstance(levels, str):  # "numeric"
        bad = [str(c) for c in classes if not is_numeric_label(c)]
        if bad:
            raise UserInputError(
                f"levels='numeric' needs labels that are numbers, but {bad[:5]} are not; pass the order "
                "explicitly, e.g. levels=['low', 'medium', 'high'] (lowest first)."
            )
        new = classes.take(np.argsort([float(str(c)) for c in classes], kind="stable"))
    else:
        declared = pd.Index(list(levels))
        if declared.astype(str).has_duplicates or len(declared) < 2:
            raise UserInputError(
                f"levels must be at least two distinct values, lowest first; got {[str(v) for v in declared]}."
            )
        pos = declared.get_indexer(classes)
        if (pos < 0).any():  # "3" vs 3: match on text
            pos = np.where(pos < 0, pd.Index(declared.astype(str)).get_indexer(classes.astype(str)), pos)
        if (pos < 0).any():
            missing = [str(c) for c in classes[pos < 0]][:5]
            raise UserInputError(
                f"labels {missing} occur in the responses but not in levels {[str(v) for v in declared]}; add them "
                "to levels in their place (lowest first)."
            )
        values = list(declared)
        for code, p in enumerate(pos):  # K classes: keep the responses' own label values
            values[p] = classes[code]
        new = pd.Index(values)
    code = new.get_indexer(classes)
    return replace(resp, label=code[resp.label], classes=new)


def numeric_order(classes: pd.Index) -> bool:
    return all(isinstance(c, (Number, np.number)) and not isinstance(c, (bool, np.bool_)) for c in classes)
