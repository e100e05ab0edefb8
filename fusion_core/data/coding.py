"""Coding a user's table into :class:`~fusion_core.data.responses.Responses`: missing values, duplicate (task, worker)
pairs, class order, sequences.  Every unusable input raises :class:`~fusion_core.errors.UserInputError` with one
actionable message.

Each id/label column is factorised once (categorical columns from the readers are already codes); duplicate pairs
come from the codes, so coding is linear in the number of rows.  Values are kept as given: text exactly (an empty
string is missing; ``na_values``/``strip_whitespace`` as in ``docs/DATA.md``), numbers and booleans as they are,
and a column mixing types (e.g. ``3`` and ``"3"``) is mapped to canonical text so equal values are one class.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fusion_core.data.columns import (
    Coded,
    _as_text,
    _kind,
    check_columns,
    confidence_values,
    long_roles,
    role_codes,
    row_numbers,
)
from fusion_core.data.readers import EncodedTable, read_options
from fusion_core.data.stages import stage
from fusion_core.data.text import (
    explain_unknown,
    parse_numbers,
    show_value,
    show_values,
    sorted_index,
    text_values,
)
from fusion_core.data.times import TimeColumn, parse_times
from fusion_core.data.validation import ValidationReport
from fusion_core.errors import UserInputError

if TYPE_CHECKING:  # the class is handed in (``into``): responses.py imports this module for its builders
    from fusion_core.data.responses import Responses

__all__ = [
    "check_columns",
    "code_long",
    "code_table",
    "code_wide",
    "confidence_values",
    "role_codes",
    "row_numbers",
    "sorted_index",
]


def code_long(
    df: pd.DataFrame,
    *,
    into: type[Responses],
    task: str = "task",
    worker: str = "worker",
    label: str = "label",
    sequence: str | None = None,
    position: str | None = None,
    classes: Sequence[Any] | None = None,
    duplicates: str = "keep",
    min_workers: int = 2,
    na_values: Sequence[str] | str | None = None,
    strip_whitespace: bool = False,
    confidence: str | None = None,
    time: str | None = None,
) -> Responses:
    """Validate and code a long-format table (crowd-kit columns by default) into ``into`` (the response class:
    called as :meth:`Responses.from_frame <fusion_core.data.responses.Responses.from_frame>`).

    ``sequence``/``position`` default to the columns of those names when both are present.  ``na_values`` and
    ``strip_whitespace`` apply to text cells as when reading a file.  ``confidence`` names an optional column with
    each response's confidence in [0, 1] (kept as :attr:`Responses.weight`); ``time`` an optional column with when
    each response was given (:mod:`fusion_core.data.times`; kept as :attr:`Responses.time`).
    """
    if not isinstance(df, pd.DataFrame):
        raise UserInputError(f"expected a table (pandas DataFrame) of responses, got {type(df).__name__}.")
    wanted, sequence, position = long_roles(
        df.columns,
        list(df.columns),
        duplicates=duplicates,
        task=task,
        worker=worker,
        label=label,
        sequence=sequence,
        position=position,
        confidence=confidence,
        time=time,
    )
    if df.columns.duplicated().any():
        dup = df.columns[df.columns.duplicated()][0]
        raise UserInputError(f"the table repeats the column name {show_value(dup)}; column names must be unique.")
    if len(df) == 0:
        raise UserInputError("the responses table is empty: it has a header but no rows.")
    opts = read_options(na_values, strip_whitespace)
    cols = {role: role_codes(df[col], column=str(col), options=opts) for role, col in wanted.items()}
    seq = None
    if sequence is not None:
        seq = (cols["sequence"], cols["position"], str(sequence), str(position))
    return assemble(
        into,
        cols["task"],
        cols["worker"],
        cols["label"],
        report=ValidationReport(rows_read=len(df), duplicate_policy=duplicates),
        classes=classes,
        duplicates=duplicates,
        min_workers=min_workers,
        sequence=seq,
        confidence=(cols["confidence"], str(confidence)) if confidence is not None else None,
        time=(cols["time"], str(time)) if time is not None else None,
    )


def code_table(
    table: EncodedTable,
    *,
    into: type[Responses],
    task: str = "task",
    worker: str = "worker",
    label: str = "label",
    sequence: str | None = None,
    position: str | None = None,
    classes: Sequence[Any] | None = None,
    duplicates: str = "keep",
    min_workers: int = 2,
    confidence: str | None = None,
    time: str | None = None,
) -> Responses:
    """Code a long-format table read by :mod:`fusion_core.data.readers` into ``into`` (called as
    :meth:`Responses.from_table <fusion_core.data.responses.Responses.from_table>`; its columns are already codes into
    cleaned text values; they are handed over, not copied, and removed from ``table``)."""
    wanted, sequence, position = long_roles(
        table.columns,
        table.names,
        duplicates=duplicates,
        task=task,
        worker=worker,
        label=label,
        sequence=sequence,
        position=position,
        confidence=confidence,
        time=time,
    )
    if table.n_rows == 0:
        raise UserInputError(f"{table.name} has a header but no rows.")
    cols = {role: Coded(table.columns[col].codes, table.columns[col].values) for role, col in wanted.items()}
    table.columns.clear()
    seq = (cols["sequence"], cols["position"], str(sequence), str(position)) if sequence is not None else None
    return assemble(
        into,
        cols.pop("task"),
        cols.pop("worker"),
        cols.pop("label"),
        report=ValidationReport(rows_read=table.n_rows, duplicate_policy=duplicates),
        classes=classes,
        duplicates=duplicates,
        min_workers=min_workers,
        sequence=seq,
        confidence=(cols["confidence"], str(confidence)) if confidence is not None else None,
        time=(cols["time"], str(time)) if time is not None else None,
    )


def _class_index(label: Coded, classes: Sequence[Any] | None) -> Coded:
    """Label codes into the declared ``classes`` (matched exactly, then by canonical text), or the labels used in
    their natural order."""
    if classes is None:
        return label.compact()
    declared = pd.Index(list(classes))
    if declared.has_duplicates:
        raise UserInputError(f"the declared classes repeat a value: {show_values(list(declared), 10)}.")
    pos = declared.get_indexer(label.values)
    if (pos < 0).any():
        text = text_values(declared)
        if not text.has_duplicates:
            retry = text.get_indexer(text_values(label.values))
            pos = np.where(pos < 0, retry, pos)
    used = np.zeros(len(label.values), dtype=bool)
    used[label.codes] = True
    bad = label.values[used & (pos < 0)]
    if len(bad):
        raise UserInputError(explain_unknown(list(bad), list(declared), what="labels", among="the declared classes"))
    return Coded(pos.astype(np.int64)[label.codes], declared)


def _drop_duplicates(task: Coded, worker: Coded, report: ValidationReport) -> np.ndarray | None:
    """Rows to keep under the duplicate policy (None = all), from the (item, worker) codes (one pair key per row;
    no second factorisation of the ids)."""
    item, n_workers = task.codes, len(worker.values)
    key = item.astype(np.int64)
    key *= max(n_workers, 1)
    key += worker.codes
    if report.duplicate_policy == "keep":  # only the count is needed: sort the keys in place (8 bytes a row)
        key.sort()
        report.duplicate_rows = int(len(key) - 1 - np.count_nonzero(key[1:] != key[:-1])) if len(key) else 0
        return None
    dup = pd.Series(key).duplicated(keep="first").to_numpy()
    report.duplicate_rows = int(dup.sum())
    if not report.duplicate_rows:
        return None
    if report.duplicate_policy == "error":
        i = int(np.argmax(dup))
        t, w = task.values[task.codes[i]], worker.values[worker.codes[i]]
        raise UserInputError(
            f"{report.duplicate_rows:,} rows repeat a (task, worker) pair, e.g. task {show_value(t)} by worker "
            f"{show_value(w)}; choose duplicates='keep', 'first' or 'last'."
        )
    keep = ~pd.Series(key).duplicated(keep=report.duplicate_policy).to_numpy()
    report.duplicates_removed = int((~keep).sum())
    return keep


def assemble(
    into: type[Responses],
    task: Coded,
    worker: Coded,
    label: Coded,
    *,
    report: ValidationReport,
    classes: Sequence[Any] | None = None,
    duplicates: str = "keep",
    min_workers: int = 2,
    sequence: tuple[Coded, Coded, str, str] | None = None,
    confidence: tuple[Coded, str] | None = None,
    time: tuple[Coded, str] | None = None,
) -> Responses:
    """Responses from coded columns: drop rows with a missing id or label, apply the duplicate policy, order the
    items, annotators and classes naturally, check the sequences and read the confidence and time columns."""
    with stage("validate", f"{len(task.codes):,} rows"):
        task, worker, label, sequence, weight, times = _usable(
            task, worker, label, report=report, sequence=sequence, confidence=confidence, time=time
        )
    columns = [task, worker, label]
    del task, worker, label  # owned by _coded from here, which frees each as soon as it is recoded
    with stage("code", f"{len(columns[0].codes):,} responses"):
        return _coded(
            into,
            columns,
            report=report,
            classes=classes,
            min_workers=min_workers,
            sequence=sequence,
            weight=weight,
            time=times,
        )


def _usable(
    task: Coded,
    worker: Coded,
    label: Coded,
    *,
    report: ValidationReport,
    sequence: tuple[Coded, Coded, str, str] | None,
    confidence: tuple[Coded, str] | None,
    time: tuple[Coded, str] | None = None,
) -> tuple[Coded, Coded, Coded, tuple[Coded, Coded, str, str] | None, np.ndarray | None, TimeColumn | None]:
    """The rows kept: no missing id or label, the duplicate policy applied; the confidence and time columns read."""
    extra = confidence is not None or time is not None
    rows = np.arange(len(task.codes)) if extra else None  # table positions, for messages
    id_missing = (task.codes < 0) | (worker.codes < 0)
    report.dropped_missing_id = int(id_missing.sum())
    if sequence is not None:
        place_missing = ((sequence[0].codes < 0) | (sequence[1].codes < 0)) & ~id_missing
        report.dropped_missing_place = int(place_missing.sum())
        id_missing |= place_missing
        del place_missing
    label_missing = (label.codes < 0) & ~id_missing
    report.dropped_missing_label = int(label_missing.sum())
    if report.dropped_missing_id or report.dropped_missing_place or report.dropped_missing_label:
        keep = ~(id_missing | label_missing)
        task, worker, label = task.take(keep), worker.take(keep), label.take(keep)
        if sequence is not None:
            sequence = (sequence[0].take(keep), sequence[1].take(keep), sequence[2], sequence[3])
        if confidence is not None:
            confidence = (confidence[0].take(keep), confidence[1])
        if time is not None:
            time = (time[0].take(keep), time[1])
        if rows is not None:
            rows = rows[keep]
    del id_missing, label_missing
    if len(task.codes) == 0:
        raise UserInputError("no usable responses: every row has a missing task, worker or label.")
    weight = confidence_values(confidence[0], rows, confidence[1]) if confidence is not None else None
    times = parse_times(time[0].codes, time[0].values, rows, time[1]) if time is not None else None
    kept = _drop_duplicates(task, worker, report)
    if kept is not None:
        task, worker, label = task.take(kept), worker.take(kept), label.take(kept)
        if sequence is not None:
            sequence = (sequence[0].take(kept), sequence[1].take(kept), sequence[2], sequence[3])
        weight = None if weight is None else weight[kept]
        times = None if times is None else times.take(kept)
    return task, worker, label, sequence, weight, times


def _coded(
    into: type[Responses],
    columns: list[Coded],
    *,
    report: ValidationReport,
    classes: Sequence[Any] | None,
    min_workers: int,
    sequence: tuple[Coded, Coded, str, str] | None,
    weight: np.ndarray | None,
    time: TimeColumn | None = None,
) -> Responses:
    """Items, annotators and classes in their natural order (codes remapped), sequences checked; ``columns`` (task,
    worker, label) are emptied as they are recoded."""
    task, worker, label = columns
    columns.clear()
    cls = _class_index(label, classes)
    del label
    if len(cls.values) < 2:
        raise UserInputError(
            f"only one label value ({show_value(cls.values[0])}) occurs, so there is nothing to aggregate; pass the "
            "full list of classes if the others exist but were never chosen."
        )
    items = task.compact()
    del task
    workers = worker.compact()
    del worker
    if len(workers.values) < min_workers:
        raise UserInputError(
            f"only {len(workers.values)} annotator ({show_value(workers.values[0])}) gave responses; estimating "
            f"reliability needs at least {min_workers} annotators."
        )
    seq_codes = pos = seq_index = None
    if sequence is not None:
        seq_codes, seq_index, pos = _code_sequences(items, workers.codes, sequence, report)
    report.responses = len(items.codes)
    return into(
        item=items.codes,
        worker=workers.codes,
        label=cls.codes,
        items=items.values,
        workers=workers.values,
        classes=cls.values,
        report=report,
        sequence=seq_codes,
        position=pos,
        sequences=seq_index,
        weight=weight,
        time=time,
    )


def code_wide(
    df: pd.DataFrame,
    *,
    into: type[Responses],
    task: str | None = None,
    classes: Sequence[Any] | None = None,
    min_workers: int = 2,
    na_values: Sequence[str] | str | None = None,
    strip_whitespace: bool = False,
) -> Responses:
    """Wide format: one row per item, one column per annotator, empty cells = no response; coded into ``into``
    (called as :meth:`Responses.from_wide <fusion_core.data.responses.Responses.from_wide>`).

    ``task`` names the item-id column; without it the index is the item id.  Labels of every annotator column
    share one set of classes (a column of numbers and a column of text are compared by canonical text).
    """
    if not isinstance(df, pd.DataFrame):
        raise UserInputError(f"expected a table (pandas DataFrame), got {type(df).__name__}.")
    if len(df) == 0:
        raise UserInputError("the responses table is empty: it has a header but no rows.")
    if df.columns.duplicated().any():
        dup = df.columns[df.columns.duplicated()][0]
        raise UserInputError(f"the table repeats the column name {show_value(dup)}; column names must be unique.")
    opts = read_options(na_values, strip_whitespace)
    if task is not None:
        check_columns({"task": task}, list(df.columns))
        ids, annot = df[task], df.drop(columns=[task])
    else:
        ids, annot = pd.Series(df.index, index=df.index), df
    if annot.shape[1] == 0:
        raise UserInputError("the wide table has no annotator columns.")
    item = role_codes(ids.reset_index(drop=True), column=str(task or "index"), options=opts)
    per_column = [role_codes(col, column=str(c), options=opts) for c, col in annot.items()]  # codes by position
    label = _shared_classes(per_column)
    n, m = len(df), annot.shape[1]
    matrix = np.column_stack([c.codes for c in label])  # n × m label codes, −1 = no response
    blank = matrix < 0
    present = ~blank.reshape(-1)
    rows = np.repeat(np.arange(n), m)[present]
    cols = np.tile(np.arange(m), n)[present]
    resp = assemble(
        into,
        Coded(item.codes[rows], item.values),
        Coded(cols.astype(np.int64), pd.Index(annot.columns)),
        Coded(matrix.reshape(-1)[present], label[0].values if label else pd.Index([])),
        report=ValidationReport(rows_read=n, duplicate_policy="keep"),
        classes=classes,
        min_workers=min_workers,
    )
    resp.report.notes.append(
        f"Wide table: {n:,} items × {m:,} annotators; {int(blank.sum()):,} blank cells = no response."
    )
    return resp


def _shared_classes(columns: list[Coded]) -> list[Coded]:
    """The label columns of a wide table re-coded into one shared set of values."""
    kinds = {_kind(c.values) for c in columns if len(c.values)}
    if len(kinds) > 1:
        columns = [Coded(c.codes, _as_text(c.values, c.codes, "label")) for c in columns]
    sizes = np.cumsum([0] + [len(c.values) for c in columns])
    allv = columns[0].values.append([c.values for c in columns[1:]])
    ids, uniques = pd.factorize(allv)
    uniques = pd.Index(uniques)
    out = []
    for j, c in enumerate(columns):
        remap = np.append(ids[sizes[j] : sizes[j + 1]].astype(np.int64), -1)
        out.append(Coded(remap[c.codes], uniques))
    return out


def _code_sequences(
    items: Coded, worker_codes: np.ndarray, sequence: tuple[Coded, Coded, str, str], report: ValidationReport
) -> tuple[np.ndarray, pd.Index, np.ndarray]:
    """Per-item sequence code and position, with the checks sequential models rely on."""
    seq, pos_col, seq_name, pos_name = sequence
    numbers = parse_numbers(pd.Series(pos_col.values), what=f"position column {show_value(pos_name)}", whole=True)
    pos_rows = numbers.astype(np.int64)[pos_col.codes]
    seqs = seq.compact()
    seq_rows, n_items = seqs.codes, len(items.values)
    seq_of_item = np.full(n_items, -1, dtype=np.int64)
    pos_of_item = np.full(n_items, -1, dtype=np.int64)
    seq_of_item[items.codes] = seq_rows
    pos_of_item[items.codes] = pos_rows
    conflict = (seq_of_item[items.codes] != seq_rows) | (pos_of_item[items.codes] != pos_rows)
    if conflict.any():
        t = items.values[items.codes[int(np.argmax(conflict))]]
        raise UserInputError(
            f"task {show_value(t)} appears at more than one (sequence, position); each task must sit at one place."
        )
    key = pd.DataFrame({"s": seq_of_item, "p": pos_of_item})
    clash = key.duplicated(keep=False).to_numpy()
    if clash.any():
        i = int(np.argmax(clash))
        raise UserInputError(
            f"two different tasks share sequence {show_value(seqs.values[seq_of_item[i]])} position "
            f"{int(pos_of_item[i])}; positions must be unique within a sequence ({seq_name!s})."
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
    grp = np.lexsort((seq_rows, worker_codes))  # stable: keeps row order inside a group
    same_grp = (worker_codes[grp][1:] == worker_codes[grp][:-1]) & (seq_rows[grp][1:] == seq_rows[grp][:-1])
    unsorted = int((np.diff(pos_rows[grp]) < 0)[same_grp].sum())
    if unsorted:
        report.notes.append(
            f"{unsorted:,} rows came before an earlier position of the same sequence and annotator; "
            "order never matters here: tokens are placed by their position."
        )
    return seq_of_item, seqs.values, pos_of_item
