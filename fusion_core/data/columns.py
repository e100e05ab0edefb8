"""Id and label columns as codes: the value rules shared by every layout and source.

A column becomes integer codes (−1 = missing) into its distinct values (:class:`Coded`), factorised once.  Text is
kept exactly (an empty string is missing; ``na_values``/``strip_whitespace`` as in ``docs/DATA.md``), numbers and
booleans stay as they are, and a column mixing types (``3`` and ``"3"``) is mapped to canonical text
(:mod:`fusion_core.data.text`) so equal values are one class.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from fusion_core.data.readers import ReadOptions, clean_text
from fusion_core.data.text import canonical_scalar, natural_order, show_value, text_values
from fusion_core.data.validation import DUPLICATE_POLICIES
from fusion_core.errors import UserInputError


@dataclass
class Coded:
    """Integer ``codes`` (int64, −1 = missing) into the distinct ``values`` of one column."""

    codes: np.ndarray
    values: pd.Index

    def take(self, mask: np.ndarray) -> Coded:
        return Coded(self.codes[mask], self.values)

    def compact(self) -> Coded:
        """Only the values used, in their natural order (codes remapped; linear in the rows)."""
        used = np.bincount(self.codes, minlength=len(self.values)) > 0
        kept = self.values[used]
        order = natural_order(kept)
        if len(kept) == len(self.values) and bool((order == np.arange(len(order))).all()):
            return Coded(self.codes.astype(np.int64), kept)  # already in order: the codes stay
        new = np.full(len(self.values), -1, dtype=np.int64)
        new[np.flatnonzero(used)[order]] = np.arange(len(kept))
        return Coded(new[self.codes], kept.take(order))


class CodedSizes:
    """Sizes of responses coded as ``item``/``worker`` codes into ``items``/``workers``: shared by the response
    models (:class:`~fusion_core.data.responses.Responses`, numeric and multi-label responses)."""

    item: np.ndarray
    worker: np.ndarray
    items: pd.Index
    workers: pd.Index

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    @property
    def n_responses(self) -> int:
        return int(self.item.shape[0])

    @cached_property
    def responses_per_item(self) -> np.ndarray:
        return np.bincount(self.item, minlength=self.n_items)

    @cached_property
    def responses_per_worker(self) -> np.ndarray:
        return np.bincount(self.worker, minlength=self.n_workers)


def _is_text_index(values: pd.Index) -> bool:
    if values.dtype == object:
        return bool(len(values)) and all(isinstance(v, str) for v in values)
    return pd.api.types.is_string_dtype(values.dtype)


def _kind(values: pd.Index) -> str:
    """'text', 'number', 'bool' or 'mixed' for the distinct values of a column."""
    if _is_text_index(values) or len(values) == 0:
        return "text"
    if pd.api.types.is_bool_dtype(values.dtype):
        return "bool"
    if pd.api.types.is_numeric_dtype(values.dtype):
        return "number"
    if values.dtype == object:
        if all(isinstance(v, (bool, np.bool_)) for v in values):
            return "bool"
        if all(
            isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)) for v in values
        ):
            return "number"
    return "mixed"


def _first_row(codes: np.ndarray, j: int) -> int:
    return int(np.argmax(codes == j)) + 1


def _as_text(values: pd.Index, codes: np.ndarray, column: str) -> pd.Index:
    """Canonical text of distinct values (row numbers in messages from ``codes``)."""
    out = []
    for j, v in enumerate(values):
        try:
            out.append(canonical_scalar(v, column=column))
        except UserInputError:
            canonical_scalar(v, column=column, row=_first_row(codes, j))
    return pd.Index(out, dtype="str")


def _refactor(codes: np.ndarray, values: pd.Index) -> Coded:
    """Codes into ``values`` re-coded after values changed (merged or made missing)."""
    new_codes, uniques = pd.factorize(values, use_na_sentinel=True)
    remap = np.append(new_codes.astype(np.int64), -1)
    return Coded(remap[codes], pd.Index(uniques))


def _has_empty(uniques: pd.Index) -> bool:
    """Whether the empty string is one of the distinct text values (a set lookup for a few values: comparing an
    Arrow-backed index costs ~1 ms, 5 s over the 5,000 columns of a wide table)."""
    if len(uniques) <= 64:
        return "" in set(uniques.tolist())
    return bool((uniques == "").any())


def role_codes(values: pd.Series, *, column: str, options: ReadOptions | None = None) -> Coded:
    """One id/label column as codes into its distinct values (see the module docs for the value rules)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        cat = values.array  # the Categorical itself: its accessor costs more than the codes of a short column
        codes = np.asarray(cat.codes, dtype=np.int64)
        uniques = pd.Index(cat.categories)
    else:
        try:
            raw, found = pd.factorize(values, use_na_sentinel=True)
        except TypeError:  # unhashable cells (lists, dicts)
            for i, v in enumerate(values):
                canonical_scalar(v, column=column, row=i + 1)
            raise
        codes, uniques = raw.astype(np.int64), pd.Index(found)
    kind = _kind(uniques)
    merged = False
    if kind == "mixed" or uniques.dtype.kind in "mM":
        uniques, kind = _as_text(uniques, codes, column), "text"
        merged = uniques.has_duplicates  # 1 and "1": one canonical text, so one value
    if kind != "text":
        return Coded(codes, uniques)
    if uniques.dtype == object:
        uniques = pd.Index(uniques, dtype="str")
    opts = options or ReadOptions()
    if not merged and not opts.strip_whitespace and not opts.na_values and not _has_empty(uniques):
        return Coded(codes, uniques)
    cleaned = clean_text(pa.array(uniques, pa.large_string()), opts)
    return _refactor(codes, pd.Index(cleaned.to_pandas(), dtype="str"))


def check_columns(wanted: Mapping[str, Any], available: Sequence[Any]) -> None:
    """Refuse role columns that are not in the table, naming the roles, the table's columns and near misses."""
    names = [str(c) for c in available]
    missing = [(role, col) for role, col in wanted.items() if col not in available]
    if not missing:
        return
    listed = ", ".join(f"{role} column {show_value(col)}" for role, col in missing)
    near = [
        n
        for role, col in missing
        for n in names
        if n.strip() == str(col).strip() or n.casefold() == str(col).casefold()
    ]
    hint = (
        f" (the table has {show_value(near[0])}: check spaces and case, or use strip_whitespace=True)" if near else ""
    )
    raise UserInputError(
        f"missing {listed}{hint}; the table has columns {names}. Map the columns (e.g. --task-col/--worker-col/"
        "--label-col) or rename them."
    )


def long_roles(
    read: Collection[Any],
    names: Sequence[Any],
    *,
    duplicates: str,
    task: str,
    worker: str,
    label: str,
    sequence: str | None,
    position: str | None,
    confidence: str | None,
    time: str | None,
) -> tuple[dict[str, str], str | None, str | None]:
    """The checks of a long table's columns (:mod:`fusion_core.data.coding`): the duplicate policy, sequence/position
    (by default the columns of those names when both were ``read``; both or neither) and the role columns among
    ``names``.  Returns the role → column map and the sequence and position columns."""
    if duplicates not in DUPLICATE_POLICIES:
        raise UserInputError(f"duplicates must be one of {DUPLICATE_POLICIES}, got {show_value(duplicates)}.")
    if sequence is None and position is None and {"sequence", "position"} <= set(read):
        sequence, position = "sequence", "position"
    if (sequence is None) != (position is None):
        raise UserInputError("sequential data needs both a sequence column and a position column.")
    wanted = {"task": task, "worker": worker, "label": label}
    if sequence is not None:
        wanted.update(sequence=sequence, position=str(position))
    if confidence is not None:
        wanted["confidence"] = confidence
    if time is not None:
        wanted["time"] = time
    check_columns(wanted, names)
    return wanted, sequence, position


def row_numbers(positions: np.ndarray, limit: int = 5) -> str:
    """Row numbers for messages, e.g. "row 3" or "rows 3, 8 and 12 more" (1 = the first data row)."""
    shown = ", ".join(str(int(p) + 1) for p in positions[:limit])
    more = f" and {len(positions) - limit:,} more" if len(positions) > limit else ""
    return ("row " if len(positions) == 1 else "rows ") + shown + more


def confidence_values(column: Coded, rows: np.ndarray | None, name: str) -> np.ndarray:
    """The confidence column as floats in [0, 1] (numbers parsed from text); ``rows`` are the table positions of
    the values (for messages)."""
    positions = np.arange(len(column.codes)) if rows is None else rows
    blank = column.codes < 0
    if blank.any():
        raise UserInputError(
            f"confidence column {show_value(name)} is empty in {row_numbers(positions[blank])}; fill in a confidence "
            "between 0 and 1 (e.g. 1 for a sure answer) or drop those rows."
        )
    values = pd.Series(column.values)
    if not (pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype)):
        values = pd.Series(text_values(values)).str.strip()
    per_value = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    num = per_value[column.codes]
    bad = ~np.isfinite(num) | (num < 0) | (num > 1)
    if bad.any():
        first = column.values[column.codes[int(np.argmax(bad))]]
        raise UserInputError(
            f"confidence column {show_value(name)} must hold numbers between 0 and 1, but "
            f"{row_numbers(positions[bad])} hold other values (e.g. {show_value(first)}); rescale percentages to 0–1."
        )
    return num


def _is_missing(values: pd.Series) -> np.ndarray:
    """Missing cells of a column of numbers or judge metadata: NaN/None or blank text (spaces only).  Id and label
    columns of categorical responses follow :func:`role_codes` instead (only the empty string is missing)."""
    miss = values.isna().to_numpy().copy()
    if values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
        stripped = values.astype("string").str.strip()
        miss |= (stripped == "").fillna(True).to_numpy(dtype=bool)
    return miss


def _factorize(values: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Codes and sorted distinct values of an id column of numeric responses (values kept as given; mixed types
    ordered by their text)."""
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:  # mixed types that do not sort: order by their text
        codes, uniques = pd.factorize(values.astype(str), sort=True)
        first = pd.Series(values.to_numpy()).groupby(codes).first()
        uniques = pd.Index(first.to_numpy(), dtype=object)
    return codes.astype(np.int64), pd.Index(uniques)
