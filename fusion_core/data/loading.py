"""Reading user files — CSV, TSV, Parquet, JSON lines, long or wide, and the exports of labelling tools (the
formats registry, :mod:`fusion_core.data.formats`) — into responses, gold labels and context.

Ids and labels are text exactly as written (reading rules: ``docs/DATA.md``; readers: :mod:`fusion_core.data.readers`).
Sources may be a path, raw bytes, or a file-like object with a ``.name`` (e.g. a Streamlit upload).  Nothing here
ever unpickles or evaluates user content.  Every problem is a :class:`~fusion_core.errors.UserInputError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from fusion_core.data.formats.dispatch import encode_frame, read_encoded, read_input
from fusion_core.data.guess import guess_gold_columns
from fusion_core.data.readers import DEFAULT_MAX_BYTES, ReadOptions, Source, read_options
from fusion_core.data.responses import Responses
from fusion_core.data.text import parse_numbers, plain_values, show_value
from fusion_core.errors import UserInputError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ReadOptions",
    "load_responses",
    "read_context",
    "read_gold",
    "read_table",
]


def read_table(
    source: Source,
    *,
    name: str | None = None,
    format: str | None = None,
    max_bytes: int | None = None,
    na_values: Sequence[str] | str | None = None,
    strip_whitespace: bool = False,
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Read a table from any registered format (``format=None``: detected) with every cell as text; a labelling
    tool's export gives its long table of responses (task, worker, label[, sequence, position]).

    Each column is a pandas categorical of ``str`` values (missing cells NaN): empty cells and the ``na_values``
    markers are missing, ``strip_whitespace`` trims both ends of every value and column name, Parquet values are
    mapped to canonical text.  ``columns`` reads only those columns.  Every failure is a :class:`UserInputError`.
    """
    opts = read_options(na_values, strip_whitespace, max_bytes)
    return read_encoded(source, name=name, format=format, columns=columns, options=opts).frame()


def load_responses(
    source: Source | pd.DataFrame,
    *,
    name: str | None = None,
    format: str | None = None,
    layout: str = "long",
    task: str = "task",
    worker: str = "worker",
    label: str = "label",
    sequence: str | None = None,
    position: str | None = None,
    classes: Sequence[Any] | None = None,
    duplicates: str = "keep",
    max_bytes: int | None = None,
    na_values: Sequence[str] | str | None = None,
    strip_whitespace: bool = False,
    confidence: str | None = None,
    field: str | None = None,
    time: str | None = None,
) -> Responses:
    """Read and validate responses.  ``layout='long'`` (one row per response; crowd-kit columns by default) or
    ``'wide'`` (one row per item, one column per annotator, empty cells = no response; ``task`` names the item-id
    column, or the first column is used when ``task`` is not a column).  ``na_values``/``strip_whitespace``: see
    :func:`read_table`.  ``confidence`` names an optional per-response confidence column (long layout only; see
    :attr:`Responses.weight`).  A labelling tool's export (detected, or ``format=`` one of
    :func:`~fusion_core.data.formats.format_names`) is read by its reader and the column options do not apply;
    ``field`` chooses its question when it has several (use :func:`~fusion_core.data.formats.dispatch.read_input`
    for its gold labels, spans and read report); ``time`` an optional column with when each response was given —
    a timestamp or a batch/round number (long layout only; :mod:`fusion_core.data.times`)."""
    if layout not in ("long", "wide"):
        raise UserInputError(f"layout must be 'long' or 'wide', got {show_value(layout)}.")
    if layout == "wide" and confidence is not None:
        raise UserInputError("a confidence column needs the long layout (one row per response); use layout='long'.")
    if layout == "wide" and time is not None:
        raise UserInputError("a time column needs the long layout (one row per response); use layout='long'.")
    opts = read_options(na_values, strip_whitespace, max_bytes)
    clean: dict[str, Any] = {}
    long: dict[str, Any] = {  # the long layout's columns and rules, for a table read here or a DataFrame
        "task": task,
        "worker": worker,
        "label": label,
        "sequence": sequence,
        "position": position,
        "classes": classes,
        "duplicates": duplicates,
        "confidence": confidence,
        "time": time,
    }
    if isinstance(source, pd.DataFrame):
        df, clean = source, {"na_values": opts.na_values, "strip_whitespace": opts.strip_whitespace}
    else:
        wanted = None
        if layout == "long":
            extra = [c for c in (sequence, position) if c] or ["sequence", "position"]
            wanted = [task, worker, label, *extra, *([confidence] if confidence else []), *([time] if time else [])]
        got = read_input(source, name=name, format=format, columns=wanted, options=opts, field=field)
        if got.export is not None:
            return Responses.from_table(encode_frame(got.export.table, got.format.name, opts), duplicates=duplicates)
        assert got.table is not None
        table = got.table
        if layout == "long":
            return Responses.from_table(table, **long)
        df = table.frame()
    if layout == "wide":
        item_col = task if task in df.columns else df.columns[0]
        return Responses.from_wide(df, task=item_col, classes=classes, **clean)
    return Responses.from_frame(df, **long, **clean)


def _frame(
    source: Source | pd.DataFrame, name: str | None, columns: Sequence[str] | None, opts: ReadOptions
) -> pd.DataFrame:
    if isinstance(source, pd.DataFrame):
        return source
    return read_encoded(source, name=name, columns=columns, options=opts).frame()


def read_gold(
    source: Source | pd.DataFrame,
    *,
    name: str | None = None,
    task: str | None = None,
    label: str | None = None,
    max_bytes: int | None = None,
    na_values: Sequence[str] | str | None = None,
    strip_whitespace: bool = False,
) -> pd.Series:
    """Gold labels as a Series by task (both as text when read from a file).  ``task``/``label`` name the
    columns; None guesses them (:func:`~fusion_core.data.guess.guess_gold_columns`: 'task', else an item-id
    name; 'truth', 'label', 'gold' …; a two-column file is read as task, truth).  Rows with an empty task or
    label are skipped."""
    opts = read_options(na_values, strip_whitespace, max_bytes)
    df = _frame(source, name, None, opts)
    task, label, _ = guess_gold_columns([str(c) for c in df.columns], task, label)
    gold = df[[task, label]].dropna()
    ids, values = plain_values(gold[task]), plain_values(gold[label])
    if ids.duplicated().any():
        dup = ids[ids.duplicated()].iloc[0]
        raise UserInputError(
            f"the gold file gives task {show_value(dup)} more than once; give one gold label per task."
        )
    return pd.Series(values.to_numpy(), index=pd.Index(ids.to_numpy(), name="task", dtype=ids.dtype), name="truth")


def read_context(
    source: Source | pd.DataFrame,
    *,
    name: str | None = None,
    task: str = "task",
    column: str = "context",
    max_bytes: int | None = None,
    na_values: Sequence[str] | str | None = None,
    strip_whitespace: bool = False,
) -> pd.Series:
    """A finite numeric context value per item as a Series by task (e.g. image resolution, text length); numbers
    are parsed from text (``1e3`` = 1000); empty, non-numeric or infinite values are refused."""
    opts = read_options(na_values, strip_whitespace, max_bytes)
    df = _frame(source, name, None, opts)
    for col in (task, column):
        if col not in df.columns:
            raise UserInputError(
                f"the context file has no {show_value(col)} column; it has {[str(c) for c in df.columns]}."
            )
    ids, raw = plain_values(df[task]), plain_values(df[column])
    if ids.isna().any():
        raise UserInputError(
            f"the context file has an empty task id (row {int(ids.isna().to_numpy().argmax()) + 1:,})."
        )
    if raw.isna().any():
        row = int(raw.isna().to_numpy().argmax())
        raise UserInputError(
            f"context column {show_value(column)} is empty for task {show_value(ids.iloc[row])} (row {row + 1:,}); "
            "give a number for every task."
        )
    values = parse_numbers(raw, what=f"context column {show_value(column)}")
    ctx = pd.Series(values, index=pd.Index(ids.to_numpy(), name="task", dtype=ids.dtype), name=column)
    if ctx.index.duplicated().any():
        dup = ctx.index[ctx.index.duplicated()][0]
        raise UserInputError(f"the context file gives task {show_value(dup)} more than once; give one value per task.")
    return ctx
