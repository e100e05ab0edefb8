"""Coding a user's table into :class:`~fusion_core.data.responses.Responses`: validation, missing values,
duplicate (task, worker) pairs, class order, sequences.  Every unusable input raises
:class:`~fusion_core.errors.UserInputError` with one actionable message."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from numbers import Number
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.responses import DUPLICATE_POLICIES, Responses, ValidationReport
from fusion_core.errors import UserInputError


def _is_missing(values: pd.Series) -> np.ndarray:
    miss = values.isna().to_numpy().copy()
    if values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
        stripped = values.astype("string").str.strip()
        miss |= (stripped == "").fillna(True).to_numpy(dtype=bool)
    return miss


def sorted_index(values: Iterable[Any]) -> pd.Index:
    """Unique values in a natural order: numeric order when all are numbers, string order otherwise."""
    uniq = pd.unique(pd.Series(list(values) if not isinstance(values, (pd.Series, pd.Index, np.ndarray)) else values))
    if all(isinstance(v, (Number, np.number)) and not isinstance(v, bool) for v in uniq):
        return pd.Index(sorted(uniq))
    try:
        return pd.Index(sorted(uniq))
    except TypeError:
        return pd.Index(sorted(uniq, key=str))


def _factorize(values: pd.Series) -> tuple[np.ndarray, pd.Index]:
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:  # mixed types that do not sort: order by their text
        codes, uniques = pd.factorize(values.astype(str), sort=True)
        first = pd.Series(values.to_numpy()).groupby(codes).first()
        uniques = pd.Index(first.to_numpy(), dtype=object)
    return codes.astype(np.int64), pd.Index(uniques)


def code_long(
    df: pd.DataFrame,
    *,
    task: str = "task",
    worker: str = "worker",
    label: str = "label",
    sequence: str | None = None,
    position: str | None = None,
    classes: Sequence[Any] | None = None,
    duplicates: str = "keep",
    min_workers: int = 2,
    confidence: str | None = None,
) -> Responses:
    """Validate and code a long-format table (crowd-kit columns by default).

    ``sequence``/``position`` default to the columns of those names when both are present.  ``confidence`` names
    an optional column with each response's confidence in [0, 1] (kept as :attr:`Responses.weight`).
    Raises :class:`UserInputError` with one actionable message for any unusable input.
    """
    if not isinstance(df, pd.DataFrame):
        raise UserInputError(f"expected a table (pandas DataFrame) of responses, got {type(df).__name__}.")
    if duplicates not in DUPLICATE_POLICIES:
        raise UserInputError(f"duplicates must be one of {DUPLICATE_POLICIES}, got {duplicates!r}.")
    if sequence is None and position is None and {"sequence", "position"} <= set(df.columns):
        sequence, position = "sequence", "position"
    if (sequence is None) != (position is None):
        raise UserInputError("sequential data needs both a sequence column and a position column.")
    wanted = {"task": task, "worker": worker, "label": label}
    if sequence is not None:
        wanted.update(sequence=sequence, position=str(position))
    if confidence is not None:
        wanted["confidence"] = confidence
    missing = [f"{role} column '{col}'" for role, col in wanted.items() if col not in df.columns]
    if missing:
        raise UserInputError(
            f"missing {', '.join(missing)}; the table has columns {[str(c) for c in df.columns]}. "
            "Map the columns (e.g. --task-col/--worker-col/--label-col) or rename them."
        )
    if len(df) == 0:
        raise UserInputError("the responses table is empty: it has a header but no rows.")
    report = ValidationReport(rows_read=len(df), duplicate_policy=duplicates)
    cols = list(dict.fromkeys(wanted.values()))
    work = df[cols].copy()

    id_missing = _is_missing(work[task]) | _is_missing(work[worker])
    label_missing = _is_missing(work[label]) & ~id_missing
    if sequence is not None:
        id_missing |= _is_missing(work[sequence]) | work[position].isna().to_numpy()
    report.dropped_missing_id = int(id_missing.sum())
    report.dropped_missing_label = int(label_missing.sum())
    kept_rows = np.flatnonzero(~(id_missing | label_missing))
    work = work[~(id_missing | label_missing)]
    if len(work) == 0:
        raise UserInputError("no usable responses: every row has a missing task, worker or label.")
    weight = None if confidence is None else confidence_values(work[confidence], kept_rows, confidence)

    pair_dup = work.duplicated(subset=[task, worker], keep="first").to_numpy()
    report.duplicate_rows = int(pair_dup.sum())
    if report.duplicate_rows:
        if duplicates == "error":
            ex = work[pair_dup].iloc[0]
            raise UserInputError(
                f"{report.duplicate_rows:,} rows repeat a (task, worker) pair, e.g. task {ex[task]!r} by worker "
                f"{ex[worker]!r}; choose duplicates='keep', 'first' or 'last'."
            )
        if duplicates in ("first", "last"):
            keep = ~work.duplicated(subset=[task, worker], keep=duplicates).to_numpy()
            report.duplicates_removed = int((~keep).sum())
            work = work[keep]
            weight = None if weight is None else weight[keep]

    labels = work[label]
    if classes is None:
        class_index = sorted_index(labels.to_numpy())
    else:
        class_index = pd.Index(list(classes))
        if class_index.has_duplicates:
            raise UserInputError(f"the declared classes repeat a value: {list(class_index)}.")
    label_code = class_index.get_indexer(labels.to_numpy())
    if (label_code < 0).any():
        bad = sorted({str(v) for v in labels.to_numpy()[label_code < 0]})[:5]
        raise UserInputError(f"labels {bad} are not among the declared classes {list(class_index)}.")
    if len(class_index) < 2:
        raise UserInputError(
            f"only one label value ({class_index[0]!r}) occurs, so there is nothing to aggregate; "
            "pass the full list of classes if the others exist but were never chosen."
        )
    item_code, item_index = _factorize(work[task])
    worker_code, worker_index = _factorize(work[worker])
    if len(worker_index) < min_workers:
        raise UserInputError(
            f"only {len(worker_index)} annotator ({worker_index[0]!r}) gave responses; estimating reliability "
            f"needs at least {min_workers} annotators."
        )

    seq_codes = pos = seq_index = None
    if sequence is not None:
        seq_codes, seq_index, pos = _code_sequences(
            work, item_code, len(item_index), columns=(sequence, str(position), worker), report=report
        )

    report.responses = len(work)
    return Responses(
        item=item_code,
        worker=worker_code,
        label=label_code.astype(np.int64),
        items=item_index,
        workers=worker_index,
        classes=class_index,
        report=report,
        sequence=seq_codes,
        position=pos,
        sequences=seq_index,
        weight=weight,
    )


def row_numbers(positions: np.ndarray, limit: int = 5) -> str:
    """Row numbers for messages, e.g. "row 3" or "rows 3, 8 and 12 more" (1 = the first data row)."""
    shown = ", ".join(str(int(p) + 1) for p in positions[:limit])
    more = f" and {len(positions) - limit:,} more" if len(positions) > limit else ""
    return ("row " if len(positions) == 1 else "rows ") + shown + more


def confidence_values(values: pd.Series, rows: np.ndarray, column: str) -> np.ndarray:
    """The confidence column as floats in [0, 1]; ``rows`` are the table positions of ``values`` (for messages)."""
    num = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    blank = _is_missing(values)
    if blank.any():
        raise UserInputError(
            f"confidence column '{column}' is empty in {row_numbers(rows[blank])}; fill in a confidence "
            "between 0 and 1 (e.g. 1 for a sure answer) or drop those rows."
        )
    bad = ~np.isfinite(num) | (num < 0) | (num > 1)
    if bad.any():
        first = values.to_numpy()[bad][0]
        raise UserInputError(
            f"confidence column '{column}' must hold numbers between 0 and 1, but {row_numbers(rows[bad])} "
            f"hold other values (e.g. {str(first)!r}); rescale percentages to 0–1."
        )
    return num


def code_wide(
    df: pd.DataFrame,
    *,
    task: str | None = None,
    classes: Sequence[Any] | None = None,
    min_workers: int = 2,
) -> Responses:
    """Wide format: one row per item, one column per annotator, blanks = no response.

    ``task`` names the item-id column; without it the index is the item id.
    """
    if not isinstance(df, pd.DataFrame):
        raise UserInputError(f"expected a table (pandas DataFrame), got {type(df).__name__}.")
    if len(df) == 0:
        raise UserInputError("the responses table is empty: it has a header but no rows.")
    if task is not None:
        if task not in df.columns:
            raise UserInputError(f"missing task column '{task}'; the table has columns {[str(c) for c in df.columns]}.")
        df = df.set_index(task)
    if df.shape[1] == 0:
        raise UserInputError("the wide table has no annotator columns.")
    wide = df.copy()
    wide.index = wide.index.rename("task")
    wide.columns = pd.Index(wide.columns, name="worker")
    long = wide.stack(future_stack=True).rename("label").reset_index()
    blank = _is_missing(long["label"])
    report_blank = int(blank.sum())
    resp = code_long(long[~blank], classes=classes, min_workers=min_workers)
    resp.report.rows_read = len(wide)
    resp.report.notes.append(
        f"Wide table: {len(wide):,} items × {wide.shape[1]:,} annotators; {report_blank:,} blank cells = no response."
    )
    return resp


def _code_sequences(
    work: pd.DataFrame,
    item_code: np.ndarray,
    n_items: int,
    *,
    columns: tuple[str, str, str],
    report: ValidationReport,
) -> tuple[np.ndarray, pd.Index, np.ndarray]:
    """Per-item sequence code and position, with the checks sequential models rely on (``columns``: the sequence,
    position and worker columns)."""
    sequence, position, worker_col = columns
    pos_raw = pd.to_numeric(work[position], errors="coerce")
    if pos_raw.isna().any() or (pos_raw % 1 != 0).any():
        bad = work[position][pos_raw.isna() | (pos_raw % 1 != 0)].iloc[0]
        raise UserInputError(f"position column '{position}' must hold whole numbers; found {bad!r}.")
    seq_code_rows, seq_index = _factorize(work[sequence])
    pos_rows = pos_raw.to_numpy().astype(np.int64)
    seq_of_item = np.full(n_items, -1, dtype=np.int64)
    pos_of_item = np.full(n_items, -1, dtype=np.int64)
    seq_of_item[item_code] = seq_code_rows
    pos_of_item[item_code] = pos_rows
    conflict = (seq_of_item[item_code] != seq_code_rows) | (pos_of_item[item_code] != pos_rows)
    if conflict.any():
        row = work.iloc[int(np.flatnonzero(conflict)[0])]
        raise UserInputError(
            f"task {row.iloc[0]!r} appears at more than one (sequence, position); each task must sit at one place."
        )
    key = pd.DataFrame({"s": seq_of_item, "p": pos_of_item})
    clash = key.duplicated(keep=False).to_numpy()
    if clash.any():
        i = int(np.flatnonzero(clash)[0])
        raise UserInputError(
            f"two different tasks share sequence {seq_index[seq_of_item[i]]!r} position {pos_of_item[i]}; "
            "positions must be unique within a sequence."
        )
    order = np.lexsort((pos_of_item, seq_of_item))
    s_sorted, p_sorted = seq_of_item[order], pos_of_item[order]
    same = s_sorted[1:] == s_sorted[:-1]
    gaps = int(((p_sorted[1:] - p_sorted[:-1]) > 1)[same].sum())
    if gaps:
        report.notes.append(
            f"{gaps:,} gaps in sequence positions (e.g. a missing token); the tokens on either side are "
            "treated as neighbours."
        )
    # within each annotator's pass over a sequence, rows should come in position order
    worker_rows = pd.factorize(work[worker_col])[0]
    grp = np.lexsort((seq_code_rows, worker_rows))  # stable: keeps row order inside a group
    same_grp = (worker_rows[grp][1:] == worker_rows[grp][:-1]) & (seq_code_rows[grp][1:] == seq_code_rows[grp][:-1])
    unsorted = int((np.diff(pos_rows[grp]) < 0)[same_grp].sum())
    if unsorted:
        report.notes.append(
            f"{unsorted:,} rows came before an earlier position of the same sequence and annotator; "
            "order never matters here: tokens are placed by their position."
        )
    return seq_of_item, seq_index, pos_of_item
