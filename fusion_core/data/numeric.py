"""Numeric responses (continuous ratings, counts, bounding-box coordinates): who gave which number to what.

These are not classes, so they get their own response model beside :class:`~fusion_core.data.responses.Responses`:
integer item and worker codes, the float values, and the user's ids kept exactly (``items``, ``workers``).
Build it from a long table ``task, worker, value`` with :meth:`NumericResponses.from_frame`; every unusable input
raises :class:`~fusion_core.errors.UserInputError` naming the rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.columns import CodedSizes, _factorize, _is_missing, row_numbers
from fusion_core.data.validation import DUPLICATE_POLICIES, ValidationReport
from fusion_core.errors import UserInputError


@dataclass(frozen=True, eq=False)
class NumericResponses(CodedSizes):
    """Integer-coded numeric responses.

    Attributes
    ----------
    item, worker : int64 arrays of length ``n_responses`` (codes into ``items`` / ``workers``).
    value : float array of length ``n_responses`` (finite).
    items, workers : the user's ids in code order.
    report : what validation did (rows read, rows dropped for a missing value or id, duplicates).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": ["a", "a", "b", "b"], "worker": [1, 2, 1, 2], "value": [3.5, 4.0, 7, None]})
    >>> r = NumericResponses.from_frame(df)
    >>> r.n_responses, list(r.items), list(r.workers), r.report.dropped_missing_label
    (3, ['a', 'b'], [1, 2], 1)
    """

    item: np.ndarray
    worker: np.ndarray
    value: np.ndarray
    items: pd.Index
    workers: pd.Index
    report: ValidationReport = field(default_factory=ValidationReport)

    def matrix(self) -> np.ndarray:
        """``n_items × n_workers`` values with NaN where no response (the last of repeated responses wins)."""
        out = np.full((self.n_items, self.n_workers), np.nan)
        out[self.item, self.worker] = self.value
        return out

    def to_frame(self) -> pd.DataFrame:
        """Long format with the user's ids: task, worker, value."""
        return pd.DataFrame(
            {"task": self.items.take(self.item), "worker": self.workers.take(self.worker), "value": self.value}
        )

    def subset(self, mask: np.ndarray) -> NumericResponses:
        """The responses selected by a boolean mask, with the same item/worker coding."""
        mask = np.asarray(mask, dtype=bool)
        rep = replace(self.report, responses=int(mask.sum()), notes=list(self.report.notes))
        return replace(self, item=self.item[mask], worker=self.worker[mask], value=self.value[mask], report=rep)

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        *,
        task: str = "task",
        worker: str = "worker",
        value: str = "value",
        duplicates: str = "keep",
        min_workers: int = 2,
    ) -> NumericResponses:
        """Validate and code a long table of numeric responses (one row per response).

        Rows with a blank value or id are dropped (and counted in ``report``); a value that is not a finite number
        raises :class:`UserInputError` naming the rows.  ``duplicates`` as for categorical responses: 'keep'
        (separate responses), 'first', 'last' or 'error'.
        """
        if not isinstance(df, pd.DataFrame):
            raise UserInputError(f"expected a table (pandas DataFrame) of responses, got {type(df).__name__}.")
        if duplicates not in DUPLICATE_POLICIES:
            raise UserInputError(f"duplicates must be one of {DUPLICATE_POLICIES}, got {duplicates!r}.")
        wanted = {"task": task, "worker": worker, "value": value}
        missing = [f"{role} column '{col}'" for role, col in wanted.items() if col not in df.columns]
        if missing:
            raise UserInputError(
                f"missing {', '.join(missing)}; the table has columns {[str(c) for c in df.columns]}. "
                "Name the columns (task=, worker=, value=) or rename them."
            )
        if len(df) == 0:
            raise UserInputError("the responses table is empty: it has a header but no rows.")
        report = ValidationReport(rows_read=len(df), duplicate_policy=duplicates)
        id_missing = _is_missing(df[task]) | _is_missing(df[worker])
        value_missing = _is_missing(df[value]) & ~id_missing
        report.dropped_missing_id = int(id_missing.sum())
        report.dropped_missing_label = int(value_missing.sum())
        rows = np.flatnonzero(~(id_missing | value_missing))
        if len(rows) == 0:
            raise UserInputError("no usable responses: every row has a missing task, worker or value.")
        work = df.iloc[rows]
        values = _numbers(work[value], rows, value)
        keep = _duplicate_policy(work, task, worker, duplicates, report)
        work, values = work[keep], values[keep]
        item_code, item_index = _factorize(work[task])
        worker_code, worker_index = _factorize(work[worker])
        if len(worker_index) < min_workers:
            raise UserInputError(
                f"only {len(worker_index)} annotator gave numeric responses; estimating biases and noise levels "
                f"needs at least {min_workers} annotators."
            )
        report.responses = len(work)
        return cls(item_code, worker_code, values, item_index, worker_index, report)

    @classmethod
    def from_wide(cls, df: pd.DataFrame, *, task: str | None = None, min_workers: int = 2) -> NumericResponses:
        """Wide table: one row per item (the index, or the ``task`` column), one column per annotator, blank or
        NaN = no response (row numbers in messages count the stacked responses)."""
        return numeric_from_wide(df, task=task, min_workers=min_workers)


def numeric_from_wide(df: pd.DataFrame, *, task: str | None = None, min_workers: int = 2) -> NumericResponses:
    """Wide table: one row per item (index, or the ``task`` column), one column per annotator, blanks = no
    response; see :meth:`NumericResponses.from_wide`."""
    if not isinstance(df, pd.DataFrame):
        raise UserInputError(f"expected a table (pandas DataFrame), got {type(df).__name__}.")
    if task is not None:
        if task not in df.columns:
            raise UserInputError(f"missing task column '{task}'; the table has columns {[str(c) for c in df.columns]}.")
        df = df.set_index(task)
    if df.shape[1] == 0 or len(df) == 0:
        raise UserInputError("the wide table needs at least one item row and one annotator column.")
    wide = df.copy()
    wide.index = wide.index.rename("task")
    wide.columns = pd.Index(wide.columns, name="worker")
    long = wide.stack(future_stack=True).rename("value").reset_index()
    blank = _is_missing(long["value"])
    resp = NumericResponses.from_frame(long[~blank], min_workers=min_workers)
    resp.report.rows_read = len(wide)
    resp.report.notes.append(
        f"Wide table: {len(wide):,} items × {wide.shape[1]:,} annotators; {int(blank.sum()):,} blank cells = no response."
    )
    return resp


def _numbers(values: pd.Series, rows: np.ndarray, column: str) -> np.ndarray:
    """The value column as finite floats, or :class:`UserInputError` naming the rows that are not numbers."""
    if pd.api.types.is_bool_dtype(values.dtype):
        raise UserInputError(f"value column '{column}' holds true/false answers; use categorical responses for those.")
    num = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(num)
    if bad.any():
        first = values.to_numpy()[bad][0]
        raise UserInputError(
            f"value column '{column}' must hold numbers, but {row_numbers(rows[bad])} hold other values "
            f"(e.g. {str(first)!r}); fix or remove them, or treat the answers as categories."
        )
    return _in_range(num, column)


MAX_MAGNITUDE = 1e100
"""The largest |rating| accepted, and 1/MAX_MAGNITUDE the smallest non-zero spread: squares and variances of the
ratings (the models' sufficient statistics) then stay far from float64's overflow and underflow."""


def _in_range(num: np.ndarray, column: str) -> np.ndarray:
    """``num``, refusing ratings so large that their squares overflow or so close that their differences vanish."""
    big = float(np.abs(num).max()) if len(num) else 0.0
    if big > MAX_MAGNITUDE:
        raise UserInputError(
            f"value column '{column}' holds numbers as large as {big:.3g}; ratings must lie within ±{MAX_MAGNITUDE:g} "
            "(their squares are summed): rescale them, e.g. divide by a power of ten."
        )
    spread = float(num.max() - num.min()) if len(num) else 0.0
    if 0 < spread < 1 / MAX_MAGNITUDE:
        raise UserInputError(
            f"the values of column '{column}' differ by at most {spread:.3g}, too little to estimate noise levels "
            f"(at least {1 / MAX_MAGNITUDE:g} is needed): rescale them, e.g. multiply by a power of ten."
        )
    return num


def _duplicate_policy(work: pd.DataFrame, task: str, worker: str, policy: str, report: ValidationReport) -> np.ndarray:
    """Rows kept under the duplicate (task, worker) policy; counts go to ``report``."""
    dup = work.duplicated(subset=[task, worker], keep="first").to_numpy()
    report.duplicate_rows = int(dup.sum())
    if not report.duplicate_rows or policy == "keep":
        return np.ones(len(work), dtype=bool)
    if policy == "error":
        ex = work[dup].iloc[0]
        raise UserInputError(
            f"{report.duplicate_rows:,} rows repeat a (task, worker) pair, e.g. task {ex[task]!r} by worker "
            f"{ex[worker]!r}; choose duplicates='keep', 'first' or 'last'."
        )
    keep = ~work.duplicated(subset=[task, worker], keep=policy).to_numpy()
    report.duplicates_removed = int((~keep).sum())
    return keep


def as_numeric_responses(data: NumericResponses | pd.DataFrame, **kwargs: Any) -> NumericResponses:
    """Accept either a :class:`NumericResponses` or a long table (task, worker, value)."""
    if isinstance(data, NumericResponses):
        return data
    return NumericResponses.from_frame(data, **kwargs)
