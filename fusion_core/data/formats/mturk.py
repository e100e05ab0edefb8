"""Amazon Mechanical Turk batch results CSV (``Download CSV`` of a batch): one row per assignment with ``HITId``,
``WorkerId``, ``AssignmentStatus``, the task inputs ``Input.*`` and the answers ``Answer.*``.

The label is the one ``Answer.*`` question: a single column (``Answer.sentiment`` or a classifier's
``Answer.sentiment.label``), or a group of true/false columns ``Answer.<question>.<option>`` (radio buttons and
check boxes: the options marked true, several sorted and joined with ``|``).  ``field`` chooses the question when
there are several.  The item is ``HITId`` (one item per HIT).  Rejected assignments are left out and counted;
submitted and approved ones are kept; a worker's later assignment of a HIT wins.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fusion_core.data.formats import FormatInfo, Sniff, register_format
from fusion_core.data.formats.export import Collector, ExportRead, choose_field
from fusion_core.data.readers import Input, ReadOptions
from fusion_core.data.tabular import read_csv
from fusion_core.data.text import show_value
from fusion_core.errors import UserInputError

TRUE = {"true", "on", "1", "yes"}
FALSE = {"false", "off", "0", "no", ""}


def questions(columns: list[str]) -> dict[str, list[str]]:
    """Question → its ``Answer.*`` columns (one column, or the true/false columns of its options)."""
    out: dict[str, list[str]] = {}
    for c in columns:
        if c.startswith("Answer."):
            out.setdefault(c[len("Answer.") :].split(".", 1)[0], []).append(c)
    return out


def _answers(frame: pd.DataFrame, cols: list[str], question: str, inp: Input) -> pd.Series:
    """The answer of every row as text (None when there is none)."""
    if len(cols) == 1:
        return frame[cols[0]].astype(object).where(frame[cols[0]].notna(), None)
    values = frame[cols].astype(object).fillna("").apply(lambda s: s.str.strip().str.lower())
    odd = ~values.isin(TRUE | FALSE).to_numpy()
    if odd.any():
        row, c = (int(x[0]) for x in np.nonzero(odd))
        raise UserInputError(
            f"{inp.label}: {cols[c]} on row {row + 2:,} is {show_value(frame[cols[c]].iloc[row])}, but the columns of "
            f"question {show_value(question)} hold true/false per option."
        )
    options = np.array([c.split(".", 2)[-1] for c in cols], dtype=object)
    order = np.argsort(options.astype(str))
    marked = values.isin(TRUE).to_numpy()[:, order]
    picked = ["|".join(options[order][m]) or None for m in marked]
    return pd.Series(picked, index=frame.index, dtype=object)


def read(inp: Input, options: ReadOptions, field: str | None = None) -> ExportRead:
    """Read an MTurk batch results CSV (module docstring)."""
    frame = read_csv(inp, "csv", None, options).frame()
    for need in ("HITId", "WorkerId"):
        if need not in frame.columns:
            raise UserInputError(f"{inp.label} has no {need} column; it is not an MTurk batch results file.")
    qs = questions([str(c) for c in frame.columns])
    question = choose_field(sorted(qs), field, "Answer question", inp)
    labels = _answers(frame, qs[question], question, inp)
    status = frame["AssignmentStatus"].astype(object).fillna("") if "AssignmentStatus" in frame else None
    rejected = (status.str.lower() == "rejected").to_numpy() if status is not None else np.zeros(len(frame), bool)
    col = Collector("MTurk batch results")
    col.records = len(frame)
    col.count("rejected", int(rejected.sum()))
    ok = ~rejected & frame["HITId"].notna().to_numpy() & frame["WorkerId"].notna().to_numpy()
    has = labels.notna().to_numpy()
    col.count("empty", int((ok & ~has).sum()))
    keep = ok & has
    col.rows = list(
        zip(
            frame["HITId"].astype(object)[keep],
            frame["WorkerId"].astype(object)[keep],
            labels[keep],
            strict=True,
        )
    )
    mapping = [("task", "HITId"), ("annotator", "WorkerId"), ("label", ", ".join(qs[question]))]
    notes = [f"question read: {show_value(question)}."]
    if len(qs[question]) > 1:
        notes.append("options marked true became the label (several: sorted, joined with |).")
    return col.finish(mapping, notes)


def _detect(s: Sniff) -> bool:
    names = s.header(",")
    return {"HITId", "WorkerId"} <= set(names) and any(n.startswith("Answer.") for n in names)


INFO = register_format(
    FormatInfo(
        name="mturk",
        title="Amazon Mechanical Turk batch results CSV (HITId, WorkerId, Input.*, Answer.*)",
        kind="export",
        extensions=(".csv",),
        help="MTurk batch results. Item = HITId, annotator = WorkerId, label = the Answer.* question (--field to "
        "choose); rejected assignments are left out and counted.",
        detect=_detect,
        read_export=read,
        options=("field",),
        example="fusion-core report Batch_123_batch_results.csv --out report.html",
    )
)
