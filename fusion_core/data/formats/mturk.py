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


def _flags(values: pd.Series, column: str, inp: Input) -> np.ndarray:
    """True where a true/false option column is marked (its few distinct values checked once, not per row)."""
    cat = values.astype("category")
    norm = pd.Index(cat.cat.categories.astype(str)).str.strip().str.lower()
    codes = cat.cat.codes.to_numpy()
    known = np.append(norm.isin(list(TRUE | FALSE)), True)[codes]  # code −1 (empty) is "false"
    if not known.all():
        row = int(np.argmin(known))
        raise UserInputError(
            f"{inp.label}: {column} on row {row + 2:,} is {show_value(values.iloc[row])}, but the option columns of "
            "a question hold true or false."
        )
    return np.append(norm.isin(list(TRUE)), False)[codes]


def _answers(frame: pd.DataFrame, cols: list[str], inp: Input) -> pd.Categorical:
    """The answer of every row as a categorical of text (missing when there is none): the column itself, or
    the options marked true (sorted, joined with ``|``), each distinct combination spelt once."""
    if len(cols) == 1:
        return pd.Categorical(frame[cols[0]])
    names = np.array([c.split(".", 2)[-1] for c in cols], dtype=object)
    order = np.argsort(names.astype(str))
    marked = np.column_stack([_flags(frame[cols[i]], cols[i], inp) for i in order])
    combo = marked @ (np.int64(1) << np.arange(len(cols), dtype=np.int64))
    found, codes = np.unique(combo, return_inverse=True)
    texts = ["|".join(names[order][[(c >> k) & 1 == 1 for k in range(len(cols))]]) for c in found]
    codes = np.where(found[codes] == 0, -1, codes)  # nothing marked: no answer
    return pd.Categorical.from_codes(codes, categories=pd.Index(texts, dtype=object))


def read(inp: Input, options: ReadOptions, field: str | None = None) -> ExportRead:
    """Read an MTurk batch results CSV (module docstring)."""
    frame = read_csv(inp, "csv", None, options).frame()
    for need in ("HITId", "WorkerId"):
        if need not in frame.columns:
            raise UserInputError(f"{inp.label} has no {need} column; it is not an MTurk batch results file.")
    qs = questions([str(c) for c in frame.columns])
    question = choose_field(sorted(qs), field, "Answer question", inp)
    labels = _answers(frame, qs[question], inp)
    status = frame["AssignmentStatus"].astype(object).fillna("") if "AssignmentStatus" in frame else None
    rejected = (status.str.lower() == "rejected").to_numpy() if status is not None else np.zeros(len(frame), bool)
    col = Collector("MTurk batch results")
    col.records = len(frame)
    col.count("rejected", int(rejected.sum()))
    ok = ~rejected & frame["HITId"].notna().to_numpy() & frame["WorkerId"].notna().to_numpy()
    has = np.asarray(labels.codes) >= 0
    col.count("empty", int((ok & ~has).sum()))
    keep = ok & has
    col.frame = pd.DataFrame({"task": frame["HITId"][keep], "worker": frame["WorkerId"][keep], "label": labels[keep]})
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
