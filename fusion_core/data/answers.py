"""The answers file read in one call for the front ends: responses, the gold labels and spans a tool's export
carries, what the reader understood (:class:`~fusion_core.data.formats.export.ReadReport`) and the column names
guessed for a plain table (:mod:`fusion_core.data.guess`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from fusion_core.data.formats.dispatch import encode_frame, read_input
from fusion_core.data.formats.export import ReadReport
from fusion_core.data.guess import check_label_column, guess_columns
from fusion_core.data.readers import Source, read_options
from fusion_core.data.responses import Responses
from fusion_core.data.spans import SpanTable
from fusion_core.errors import UserInputError


@dataclass
class Answers:
    """``responses``; ``format`` (the registry's name); ``gold`` and ``spans`` from a tool's export; ``read``:
    the export's read report; ``notes``: plain sentences on how the file was understood (the column mapping)."""

    responses: Responses
    format: str
    gold: pd.Series | None = None
    spans: SpanTable | None = None
    read: ReadReport | None = None
    notes: tuple[str, ...] = ()
    control: tuple[str, str, str] | None = None
    """Label Studio exports: (from_name, to_name, type) of the question read."""

    def lines(self) -> list[str]:
        """What was read, in plain sentences (the CLI prints them on stderr; the app shows them)."""
        return [*(self.read.lines() if self.read is not None else []), *self.notes]


def read_answers(
    source: Source,
    *,
    name: str | None = None,
    format: str | None = None,
    layout: str = "long",
    task: str | None = None,
    worker: str | None = None,
    label: str | None = None,
    sequence: str | None = None,
    position: str | None = None,
    confidence: str | None = None,
    time: str | None = None,
    duplicates: str = "keep",
    field: str | None = None,
    max_bytes: int | None = None,
    na_values: Sequence[str] | str | None = None,
    strip_whitespace: bool = False,
) -> Answers:
    """Read an answers file of any registered format.  A tool's export is read by its reader (the column options
    do not apply); a plain long table maps ``task``/``worker``/``label`` given as None to the column of that
    name, else to the one column whose name suggests the role (``item_id``, ``annotator``, ``answer`` …; see
    :func:`~fusion_core.data.guess.guess_columns`); ``time``: an optional column with when each response was given
    (plain long tables; :mod:`fusion_core.data.times`).  A label column that looks like an id or a time (nearly one
    value per response, or dates) is refused (:func:`~fusion_core.data.guess.check_label_column`)."""
    if layout not in ("long", "wide"):
        raise UserInputError(f"layout must be 'long' or 'wide', got {layout!r}.")
    opts = read_options(na_values, strip_whitespace, max_bytes)
    got = read_input(source, name=name, format=format, options=opts, field=field)
    if got.export is not None:
        ex = got.export
        given = {k: v for k, v in (("task", task), ("worker", worker), ("label", label)) if v is not None}
        if given or layout != "long":
            raise UserInputError(
                f"{got.format.name} exports are read by their own reader; drop --layout and the column options "
                f"({', '.join(given) or 'layout'})."
            )
        resp = Responses.from_table(encode_frame(ex.table, got.format.name, opts), duplicates=duplicates)
        check_label_column(resp.classes, resp.n_responses)
        return Answers(resp, got.format.name, ex.gold, ex.spans, ex.report, control=ex.control)
    table = got.table
    assert table is not None
    if layout == "wide":
        if time is not None:
            raise UserInputError("a time column needs the long layout (one row per response); use layout='long'.")
        frame = table.frame()
        item = task if task is not None and task in frame.columns else frame.columns[0]
        return Answers(Responses.from_wide(frame, task=item), got.format.name)
    cols, note = guess_columns(table.names, {"task": task, "worker": worker, "label": label})
    resp = Responses.from_table(
        table,
        task=cols["task"],
        worker=cols["worker"],
        label=cols["label"],
        sequence=sequence,
        position=position,
        duplicates=duplicates,
        confidence=confidence,
        time=time,
    )
    check_label_column(resp.classes, resp.n_responses, cols["label"])
    return Answers(resp, got.format.name, notes=(note,) if note else ())


__all__ = ["Answers", "read_answers"]
