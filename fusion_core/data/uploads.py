"""Reading files a user uploads (bytes + file name): the responses table with its column mapping, gold labels,
an item graph and per-item context values.  Every problem is a :class:`UserInputError` with one sentence.

Label values containing HTML markup are refused: they would be a display hazard wherever labels are shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import pandas as pd

from fusion_core.data.answers import Answers, read_answers
from fusion_core.data.formats.dispatch import open_source
from fusion_core.data.graph import ItemGraph, graph_for_responses, read_graph
from fusion_core.data.guess import (
    ROLE_GUESSES,
    check_label_column,
    guess_column,
    label_column_problem,
    looks_like_id_or_time,
)
from fusion_core.data.loading import read_context, read_gold, read_table
from fusion_core.data.readers import read_options
from fusion_core.data.responses import Responses
from fusion_core.data.text import parse_numbers, plain_values, show_value, size_over_limit
from fusion_core.errors import UserInputError

__all__ = [
    "ROLE_GUESSES",
    "build_responses",
    "context_from_table",
    "find_markup",
    "guess_column",
    "guess_label_column",
    "guess_layout",
    "label_problem",
    "read_context_upload",
    "read_export_upload",
    "read_gold_upload",
    "read_graph_upload",
    "read_upload",
    "sniff_not_a_table",
]

_MARKUP = re.compile(r"<\s*/?\s*[A-Za-z!?][^>]*>|&[A-Za-z#0-9]+;")


def find_markup(values: Iterable[object]) -> list[str]:
    """Values that contain HTML tags or entities."""
    return [str(v) for v in values if isinstance(v, str) and _MARKUP.search(v)]


def _check_size(name: str, data: bytes, limit: int) -> None:
    """The upload limit, checked before anything is parsed (the upload widget's own limit may be higher)."""
    if len(data) > limit:
        raise UserInputError(
            f"{name} {size_over_limit(len(data), limit)} upload limit; split the file or ask the administrator to "
            "raise the upload limit."
        )


_NOT_A_TABLE = (
    (re.compile(rb"^\s*(<!doctype\s+html|<html|<head|<body|<\?xml[^>]*>\s*<html)", re.I), "HTML (a web page)"),
    (re.compile(rb"^\s*<\?xml", re.I), "XML"),
    (re.compile(rb"^%PDF-"), "a PDF document"),
    (re.compile(rb"^PK\x03\x04"), "a ZIP archive or an Excel/Office file"),
    (re.compile(rb"^\xd0\xcf\x11\xe0"), "an old Excel/Office file"),
    (re.compile(rb"^\x1f\x8b"), "a gzip archive"),
)


def sniff_not_a_table(name: str, data: bytes) -> str | None:
    """What the file looks like when its first bytes show it is not a text table (HTML, XML, PDF, ZIP/Excel,
    gzip), else None.  Parquet files are recognised by their own magic and never flagged."""
    head = data[:512].lstrip(b"\xef\xbb\xbf")
    if head.startswith(b"PAR1"):
        return None
    for pattern, what in _NOT_A_TABLE:
        if pattern.match(head):
            return what
    return None


def guess_layout(table: pd.DataFrame, *, max_labels: int = 20) -> tuple[str, int]:
    """("wide", n) when a table looks like one row per item and one column per annotator, else ("long", 0).

    n counts the columns (after the first) whose values come from a small set (≤ ``max_labels`` distinct values)
    shared with the others (Jaccard overlap ≥ 0.5 with the column that matches most): wide when n ≥ 3 and at
    least half the columns after the first.  A long file with a few small columns (label, a 1–5 confidence, a
    round number) has no three columns sharing their values."""
    cols = list(table.columns)
    if len(cols) < 4:
        return "long", 0
    head = table.head(2000)
    sets = []
    for c in cols[1:]:
        values = head[c].dropna().unique()
        if 0 < len(values) <= max_labels:
            sets.append(set(map(str, values)))
    best = max((sum(len(a & b) / len(a | b) >= 0.5 for b in sets) for a in sets), default=0)
    return ("wide", best) if best >= 3 and best >= (len(cols) - 1) / 2 else ("long", 0)


def read_upload(
    name: str, data: bytes, limit: int, *, na_values: Sequence[str] = (), strip_whitespace: bool = False
) -> pd.DataFrame:
    """An uploaded table (CSV/TSV/Parquet/JSON lines) read as text within the size limit (bytes); the limit also
    bounds the number of cells and, for Parquet, the declared size (checked before reading the data).  A file
    that is not a table (an HTML page saved as .csv, a PDF, an Excel file) gets one clear message."""
    _check_size(name, data, limit)
    what = sniff_not_a_table(name, data)
    if what is not None:
        raise UserInputError(
            f"{show_value(name)} is not a CSV/TSV/Parquet/JSON-lines file: it looks like {what}. Export the "
            "responses as CSV (one row per response, or one row per item and one column per annotator) and upload "
            "that file."
        )
    return read_table(data, name=name, max_bytes=limit, na_values=na_values, strip_whitespace=strip_whitespace)


def read_export_upload(
    name: str, data: bytes, limit: int, *, na_values: Sequence[str] = (), strip_whitespace: bool = False
) -> Answers | None:
    """An uploaded labelling tool's export (Label Studio, MTurk, Toloka, Argilla, Prodigy, doccano — detected by
    the formats registry) read with no mapping step: responses, gold, spans and what was read.  None when the
    upload is a plain table (it then goes through the column mapping)."""
    _check_size(name, data, limit)
    opts = read_options(na_values, strip_whitespace, limit)
    _, fmt = open_source(data, name, None, opts)
    if fmt.kind != "export":
        return None
    answers = read_answers(
        data, name=name, format=fmt.name, max_bytes=limit, na_values=na_values, strip_whitespace=strip_whitespace
    )
    bad = find_markup(answers.responses.classes)
    if bad:
        raise UserInputError(
            f"{len(bad)} label value(s) contain HTML markup, e.g. {bad[0]!r}; labels must be plain text."
        )
    return answers


def _distinct(table: pd.DataFrame, column: str) -> tuple[list[str], int]:
    """A column's distinct non-empty values and its number of non-empty cells."""
    values = table[column].dropna()
    return [str(v) for v in pd.unique(values)], len(values)


def label_problem(table: pd.DataFrame, column: str | None) -> str | None:
    """Why ``column`` cannot be the label column of a long upload (an id or a time), or None — the mapping
    page's warning, shown before the user loads (:func:`~fusion_core.data.guess.label_column_problem`)."""
    if not column or column not in table.columns:
        return None
    return label_column_problem(*_distinct(table, column), column)


def guess_label_column(table: pd.DataFrame, taken: Sequence[str] = ()) -> str | None:
    """The label column of a long upload: the one whose name suggests it, else the first column not ``taken``
    whose values do not look like an id or a time (never ``created_at`` by position), else None."""
    cols = [str(c) for c in table.columns]
    by_name = guess_column(cols, "label", set(taken))
    if by_name is not None:
        return by_name
    free = [c for c in cols if c not in taken]
    return next((c for c in free if not looks_like_id_or_time(c) and label_problem(table, c) is None), None)


def build_responses(
    table: pd.DataFrame,
    *,
    layout: str,
    task: str | None,
    worker: str | None = None,
    label: str | None = None,
    sequence: str | None = None,
    position: str | None = None,
    duplicates: str = "keep",
    time: str | None = None,
) -> Responses:
    """Code a mapped upload (``layout`` "long" or "wide"; ``time``: the optional time column, long only); refuses
    labels with HTML markup and a label column that looks like an id or a time
    (:func:`~fusion_core.data.guess.check_label_column`)."""
    if layout == "wide":
        resp = Responses.from_wide(table, task=task)
    else:
        if not task or not worker or not label:
            raise UserInputError("choose the task, annotator and label columns.")
        if len({task, worker, label}) < 3:
            raise UserInputError("task, annotator and label must be three different columns.")
        check_label_column(*_distinct(table, label), label)
        resp = Responses.from_frame(
            table,
            task=task,
            worker=worker,
            label=label,
            sequence=sequence or None,
            position=position or None,
            duplicates=duplicates,
            time=time or None,
        )
    bad = find_markup(resp.classes)
    if bad:
        raise UserInputError(
            f"{len(bad)} label value(s) contain HTML markup, e.g. {bad[0]!r}; labels must be plain text. "
            "Clean the label column and upload again."
        )
    return resp


def _on_items(values: pd.Series, responses: Responses, what: str) -> pd.Series:
    """Values by task id restricted to the tasks of ``responses`` (ids as the responses spell them)."""
    codes = responses.item_codes(values.index, what=what, strict=False)
    if (codes < 0).all():
        raise UserInputError(f"none of the {what} occur in the responses; check the task ids.")
    out = values[codes >= 0]
    out.index = responses.items.take(codes[codes >= 0])
    return out


def context_from_table(table: pd.DataFrame, task: str, column: str, responses: Responses) -> pd.Series:
    """One numeric context value per item from a column of the responses table."""
    ctx = table[[task, column]].dropna().drop_duplicates(subset=[task])
    values = parse_numbers(plain_values(ctx[column]), what=f"context column {show_value(column)}")
    out = pd.Series(values, index=pd.Index(plain_values(ctx[task])), name="context")
    return _on_items(out, responses, "context tasks")


def read_gold_upload(
    name: str,
    data: bytes,
    responses: Responses,
    limit: int,
    *,
    na_values: Sequence[str] = (),
    strip_whitespace: bool = False,
    task: str | None = None,
    truth: str | None = None,
) -> pd.Series:
    """Gold labels from an uploaded file, checked against the responses.  ``task``/``truth`` name its columns
    (the app's mapping); None guesses them (:func:`~fusion_core.data.guess.guess_gold_columns`)."""
    _check_size(name, data, limit)
    gold = read_gold(
        data,
        name=name,
        task=task,
        label=truth,
        max_bytes=limit,
        na_values=na_values,
        strip_whitespace=strip_whitespace,
    )
    bad = find_markup(pd.unique(gold.astype(str)))
    if bad:
        raise UserInputError(f"gold labels contain HTML markup, e.g. {bad[0]!r}; labels must be plain text.")
    gold = _on_items(gold, responses, "gold tasks")
    responses.label_codes(gold.to_numpy(), what="gold labels")
    return gold


def read_context_upload(
    name: str,
    data: bytes,
    responses: Responses,
    limit: int,
    *,
    na_values: Sequence[str] = (),
    strip_whitespace: bool = False,
) -> pd.Series:
    """A numeric context value per item from an uploaded file with ``task`` and ``context`` columns."""
    _check_size(name, data, limit)
    ctx = read_context(data, name=name, max_bytes=limit, na_values=na_values, strip_whitespace=strip_whitespace)
    return _on_items(ctx, responses, "context tasks").rename("context")


def read_graph_upload(
    name: str,
    data: bytes,
    responses: Responses,
    limit: int,
    *,
    na_values: Sequence[str] = (),
    strip_whitespace: bool = False,
) -> ItemGraph:
    """An item graph (edge-list CSV, GraphML, GML) from an upload, validated against the responses."""
    _check_size(name, data, limit)
    edges = read_graph(data, name=name, max_bytes=limit, na_values=na_values, strip_whitespace=strip_whitespace)
    return graph_for_responses(edges, responses)
