"""Ids and labels as text: the canonical text of typed values, the natural order of classes, numbers parsed from
text, and sizes and values written for people.  The rules are documented in ``docs/DATA.md``.

Canonical text (Parquet columns, and mixed-type columns of a DataFrame) is the same for every column type, so the
same value is the same class in long and wide layouts:

* integers: their digits (``3`` → ``"3"``, ``-7`` → ``"-7"``);
* floats: whole numbers below 2**53 in magnitude as integers (``3.0`` → ``"3"``), other values as the shortest
  text that reads back as the same number (``0.1`` → ``"0.1"``, ``1e20`` → ``"1e+20"``, ``inf``); NaN is missing;
* booleans: ``"true"`` / ``"false"``;
* bytes: their UTF-8 text (refused when not UTF-8);
* dates ``2020-01-02``; timestamps ``2020-01-02T03:04:05`` (fraction kept when not zero, ``+0000`` offset when the
  column has a time zone); decimals, times and durations as Arrow writes them;
* lists, maps and structs are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from fusion_core.errors import UserInputError

NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
"""A plain decimal number as text (no spaces, no ``inf``/``nan``, no thousands separators)."""
_INTEGER = r"[+-]?\d{1,18}"
_EXACT = 2.0**53


# ------------------------------------------------------------------------------------------ canonical text
def _float_text(arr: pa.Array) -> pa.Array:
    """Whole floats below 2**53 as integers, the rest as Arrow's shortest round-trip text; NaN → null."""
    values = arr.to_numpy(zero_copy_only=False)
    whole = np.isfinite(values) & (np.abs(values) < _EXACT) & (np.floor(values) == values)
    text = pc.cast(arr, pa.string())
    if whole.any():
        ints = pa.array(np.where(whole, values, 0).astype(np.int64)).cast(pa.string())
        text = pc.if_else(pa.array(whole), ints, text)
    nan = pa.array(np.isnan(values))
    return pc.if_else(nan, pa.nulls(len(arr), pa.string()), text)


def _binary_text(arr: pa.Array, column: str) -> pa.Array:
    try:
        return arr.cast(pa.string()).cast(pa.string())  # the second cast validates UTF-8
    except pa.ArrowInvalid:
        pass
    for i, value in enumerate(arr.to_pylist()):
        if value is not None:
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                raise UserInputError(
                    f"column {column!r} holds bytes that are not UTF-8 text (row {i + 1:,}); store ids and labels "
                    "as UTF-8 strings."
                ) from None
    raise UserInputError(f"column {column!r} holds bytes that cannot be read as text; store them as UTF-8 strings.")


def _first_valid_row(arr: pa.Array) -> int:
    valid = np.flatnonzero(arr.is_valid().to_numpy(zero_copy_only=False))
    return int(valid[0]) if len(valid) else 0


def canonical_text(arr: pa.Array | pa.ChunkedArray, *, column: str = "value", first_row: int = 1) -> pa.Array:
    """The canonical text (Arrow ``string``) of every value of an Arrow array, nulls kept; see the module docs.

    ``first_row`` is the row number of ``arr[0]`` in the user's table, for messages.
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    if pa.types.is_dictionary(t):
        values = canonical_text(arr.dictionary, column=column, first_row=first_row)
        return values.take(arr.indices)
    if pa.types.is_string(t):
        return arr
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return arr.cast(pa.string())
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.string())
    if pa.types.is_boolean(t):
        return pc.if_else(arr, "true", "false")
    if pa.types.is_integer(t):
        return arr.cast(pa.string())
    if pa.types.is_floating(t):
        return _float_text(arr)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return _binary_text(arr if not pa.types.is_fixed_size_binary(t) else arr.cast(pa.binary()), column)
    if pa.types.is_timestamp(t):
        fmt = "%Y-%m-%dT%H:%M:%S" + ("%z" if t.tz else "")
        text = pc.replace_substring_regex(pc.strftime(arr, format=fmt), r"\.0+$", "")
        return pc.replace_substring_regex(text, r"\.0+([+-]\d{4})$", r"\1")
    if pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_decimal(t) or pa.types.is_duration(t):
        return arr.cast(pa.string())
    kind = "a list" if pa.types.is_list(t) or pa.types.is_large_list(t) else f"a {t} value"
    if pa.types.is_struct(t) or pa.types.is_map(t):
        kind = "a dictionary (object)"
    raise UserInputError(
        f"row {first_row + _first_valid_row(arr):,} of column {column!r} holds {kind}; ids and labels must be "
        "single values (text or numbers)."
    )


def canonical_scalar(value: Any, *, column: str = "value", row: int = 1) -> str | None:
    """The canonical text of one Python value (None for missing), by the same rules as :func:`canonical_text`."""
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, set, frozenset, dict, np.ndarray)):
        kind = "a dictionary (object)" if isinstance(value, dict) else "a list"
        raise UserInputError(
            f"row {row:,} of column {column!r} holds {kind}; ids and labels must be single values (text or numbers)."
        )
    try:
        arr = pa.array([value])
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return str(value)
    out = canonical_text(arr, column=column, first_row=row)[0].as_py()
    return None if out is None else str(out)


def text_values(values: Iterable[Any], *, column: str = "value") -> pd.Index:
    """Canonical text of each value (an Index of ``str``, missing values as NaN), for matching ids across types."""
    if isinstance(values, pd.Index) and pd.api.types.is_string_dtype(values.dtype) and values.dtype != object:
        return values
    seq = list(values) if not isinstance(values, (pd.Index, pd.Series, np.ndarray)) else values
    try:  # one type: converted at once
        arr = pa.array(np.asarray(seq) if isinstance(seq, (pd.Index, pd.Series)) else seq, from_pandas=True)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        arr = None
    if arr is not None and not pa.types.is_nested(arr.type):
        return pd.Index(canonical_text(arr, column=column).to_pandas(), dtype="str")
    return pd.Index([canonical_scalar(v, column=column, row=i + 1) for i, v in enumerate(seq)], dtype="str")


def plain_values(values: pd.Series) -> pd.Series:
    """A column as plain values (a categorical read from a file becomes ``str``), with a fresh 0..n-1 index."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        values = values.astype(values.dtype.categories.dtype)
    return values.reset_index(drop=True)


# --------------------------------------------------------------------------------------------- ordering
def _numbers_of(text: pa.Array) -> np.ndarray | None:
    """Numeric values when every text is a plain number (integers exactly, up to 18 digits), else None."""
    if len(text) == 0:
        return None
    first = text[0].as_py()
    if first is None or not re.fullmatch(NUMBER, first):  # most id columns are not numbers: no scan of them all
        return None
    if pc.all(pc.match_substring_regex(text, f"^{_INTEGER}$")).as_py():
        return pc.cast(pc.replace_substring_regex(text, r"^\+", ""), pa.int64()).to_numpy()
    if pc.all(pc.match_substring_regex(text, f"^{NUMBER}$")).as_py():
        return pc.cast(text, pa.float64()).to_numpy()
    return None


def natural_order(values: pd.Index) -> np.ndarray:
    """Positions that sort unique values naturally: numbers by value, text by number value when every text is a
    plain number (ties such as ``"7"``/``"007"`` by text), else by text (code points)."""
    n = len(values)
    if n <= 1:
        return np.arange(n)
    if pd.api.types.is_bool_dtype(values.dtype) or pd.api.types.is_numeric_dtype(values.dtype):
        return np.argsort(np.asarray(values), kind="stable")
    text = values if pd.api.types.is_string_dtype(values.dtype) and values.dtype != object else text_values(values)
    arr = pa.array(text, from_pandas=True)
    by_text = pc.sort_indices(arr).to_numpy()
    numbers = _numbers_of(arr)
    if numbers is None:
        return by_text
    text_rank = np.empty(n, dtype=np.int64)
    text_rank[by_text] = np.arange(n)
    return np.lexsort((text_rank, numbers))


def sorted_index(values: Iterable[Any]) -> pd.Index:
    """Unique values in their natural order (see :func:`natural_order`)."""
    arr = values if isinstance(values, (pd.Series, pd.Index, np.ndarray)) else list(values)
    uniq = pd.Index(pd.unique(pd.Series(arr)))
    return uniq.take(natural_order(uniq))


# ------------------------------------------------------------------------------------- numbers from text
def parse_numbers(values: pd.Series, *, what: str, whole: bool = False) -> np.ndarray:
    """Finite floats from text or numbers (``what`` names the column in messages); refuses text that is not a
    number, NaN and infinite values, and (``whole``) non-integers or integers beyond 2**53."""
    raw = values.to_numpy(dtype=object) if not pd.api.types.is_numeric_dtype(values.dtype) else None
    if raw is None:
        nums = values.to_numpy(dtype=float)
    else:
        text = pd.Series(values, dtype="str").str.strip()
        nums = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
        plain = text.str.fullmatch(NUMBER).fillna(False).to_numpy(dtype=bool)
        special = text.str.lower().isin(["inf", "+inf", "-inf", "infinity", "-infinity", "nan"]).to_numpy()
        bad = ~plain & ~special
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise UserInputError(f"{what} must be numeric; found {show_value(raw[i])} (row {i + 1:,}).")
    if not np.isfinite(nums).all():
        i = int(np.flatnonzero(~np.isfinite(nums))[0])
        shown = show_value(raw[i]) if raw is not None else repr(float(nums[i]))
        raise UserInputError(f"{what} must hold finite numbers; found {shown} (row {i + 1:,}).")
    if whole:
        bad = (np.floor(nums) != nums) | (np.abs(nums) >= _EXACT)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            shown = show_value(raw[i]) if raw is not None else repr(float(nums[i]))
            raise UserInputError(
                f"{what} must hold whole numbers below 2**53 in magnitude; found {shown} (row {i + 1:,})."
            )
    return nums


# ------------------------------------------------------------------------------------- text for people
def show_value(value: Any) -> str:
    """A value as a user wrote it, quoted so spaces show: ``'x '`` (never a numpy type name)."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "an empty cell"
    return repr(value) if isinstance(value, str) else str(value)


def show_values(values: Sequence[Any], limit: int = 5) -> str:
    """Up to ``limit`` values for a message: ``'a', 'b ', 3 more``."""
    shown = [show_value(v) for v in list(values)[:limit]]
    more = len(values) - limit
    return ", ".join(shown) + (f" and {more:,} more" if more > 0 else "")


def _difference(bad: Sequence[Any], known: Sequence[Any]) -> str:
    """How the first of ``bad`` (up to 20 looked at) that resembles a known value differs from it, or ''."""
    known_text = [str(v) for v in known]
    forms = (
        (str.strip, "only by spaces at its ends"),
        (str.casefold, "only in upper/lower case"),
        (lambda t: " ".join(t.split()), "only in its spaces"),
    )
    for norm, how in forms:
        lookup: dict[str, str] = {}
        for k in known_text:
            lookup.setdefault(norm(k), k)
        for v in bad[:20]:
            match = lookup.get(norm(str(v)))
            if match is not None and match != str(v):
                return f"{show_value(str(v))} differs from {show_value(match)} {how}"
    return ""


def difference_hint(bad: Sequence[Any], known: Sequence[Any]) -> str:
    """'': or ``: 'x ' differs from 'x' only by spaces at its ends`` for the first bad value that looks known."""
    hint = _difference(list(bad), known)
    if not hint:
        return ""
    fix = " (read with strip_whitespace=True, --strip-whitespace)" if "spaces at its ends" in hint else ""
    return f": {hint}{fix}"


def explain_unknown(bad: Sequence[Any], known: Sequence[Any], *, what: str, among: str) -> str:
    """One sentence: values ``bad`` of ``what`` are not ``among`` the ``known`` ones (shown as written), saying
    what differs when a bad value looks like a known one (spaces at the ends, case)."""
    verb = "is" if len(bad) == 1 else "are"
    msg = f"{what}: {show_values(bad)} {verb} not among {among} ({show_values(known, 8)})"
    return msg + difference_hint(bad, known) + "."


def format_size(n: float) -> str:
    """A byte count for people: ``512 bytes``, ``1.5 KB``, ``16 KB``, ``200 MB`` (1 KB = 1024 bytes)."""
    if n < 1024:
        return f"{int(n):,} bytes"
    for unit in ("KB", "MB", "GB", "TB"):
        n /= 1024.0
        if n < 1024 or unit == "TB":
            return f"{n:,.1f} {unit}" if n < 10 else f"{n:,.0f} {unit}"
    return f"{n:,.0f} TB"  # pragma: no cover


def size_over_limit(size: int, limit: int) -> str:
    """``is 16 KB, over the 10 KB limit``, in bytes when the two would round to the same text."""
    a, b = format_size(size), format_size(limit)
    if a == b:
        return f"is {size:,} bytes, over the {limit:,}-byte limit"
    return f"is {a}, over the {b} limit"
