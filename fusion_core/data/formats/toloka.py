"""Toloka / Yandex Tasks assignments TSV (``Download results``): one row per task of an assignment with
``INPUT:<field>``, ``OUTPUT:<field>``, ``GOLDEN:<field>`` (control tasks' known answers), ``HINT:…`` and
``ASSIGNMENT:…`` columns (``task_id``, ``worker_id``, ``status``).

The label is the one ``OUTPUT:`` field (``field`` chooses when there are several); the item is
``ASSIGNMENT:task_id`` (else the ``INPUT:`` fields together); the annotator ``ASSIGNMENT:worker_id``.  A
``GOLDEN:`` answer gives the task's gold label.  Rejected assignments are left out and counted, as are skipped
and expired ones (no answer); submitted and accepted ones are kept; a worker's later answer to a task wins.
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


def _text(frame: pd.DataFrame, col: str) -> pd.Series:
    return frame[col].astype(object).where(frame[col].notna(), None)


def read(inp: Input, options: ReadOptions, field: str | None = None) -> ExportRead:
    """Read a Toloka assignments TSV (module docstring)."""
    frame = read_csv(inp, "tsv", None, options).frame()
    names = [str(c) for c in frame.columns]
    if "ASSIGNMENT:worker_id" not in names:
        raise UserInputError(f"{inp.label} has no ASSIGNMENT:worker_id column; it is not a Toloka results file.")
    outputs = [n[len("OUTPUT:") :] for n in names if n.startswith("OUTPUT:")]
    question = choose_field(outputs, field, "OUTPUT field", inp)
    inputs = [n for n in names if n.startswith("INPUT:")]
    if "ASSIGNMENT:task_id" in names:
        task, task_src = _text(frame, "ASSIGNMENT:task_id"), "ASSIGNMENT:task_id"
    elif inputs:
        task = frame[inputs].astype(object).fillna("").agg("\t".join, axis=1).astype(object)
        task_src = " + ".join(inputs)
    else:
        raise UserInputError(f"{inp.label} has neither ASSIGNMENT:task_id nor INPUT: columns to tell the tasks apart.")
    worker, label = _text(frame, "ASSIGNMENT:worker_id"), _text(frame, f"OUTPUT:{question}")
    status = (
        frame["ASSIGNMENT:status"].astype(object).fillna("").str.upper()
        if "ASSIGNMENT:status" in names
        else pd.Series("", index=frame.index)
    )
    col = Collector("Toloka assignments")
    col.records = len(frame)
    rejected = (status == "REJECTED").to_numpy()
    skipped = status.isin(["SKIPPED", "EXPIRED"]).to_numpy()
    col.count("rejected", int(rejected.sum()))
    col.count("skipped", int(skipped.sum()))
    ok = ~rejected & ~skipped & task.notna().to_numpy() & worker.notna().to_numpy()
    has = label.notna().to_numpy()
    col.count("empty", int((ok & ~has).sum()))
    keep = ok & has
    col.frame = pd.DataFrame({"task": task[keep], "worker": worker[keep], "label": label[keep]})
    golden = f"GOLDEN:{question}"
    if golden in names:
        g = _text(frame, golden)
        mask = g.notna().to_numpy() & task.notna().to_numpy()
        for t, v in zip(task[mask], g[mask], strict=True):
            if col.gold.setdefault(t, v) != v:
                raise UserInputError(f"{inp.label}: task {show_value(t)} has two different {golden} answers.")
    mapping = [("task", task_src), ("annotator", "ASSIGNMENT:worker_id"), ("label", f"OUTPUT:{question}")]
    if golden in names:
        mapping.append(("gold", golden))
    notes = [f"question read: {show_value(question)}."]
    if np.any(status == "ACCEPTED") or np.any(status == "SUBMITTED"):
        notes.append("submitted and accepted assignments are kept.")
    return col.finish(mapping, notes)


def _detect(s: Sniff) -> bool:
    names = s.header("\t")
    return "ASSIGNMENT:worker_id" in names and any(n.startswith("OUTPUT:") for n in names)


INFO = register_format(
    FormatInfo(
        name="toloka",
        title="Toloka / Yandex Tasks assignments TSV (INPUT:, OUTPUT:, GOLDEN:, ASSIGNMENT:worker_id)",
        kind="export",
        extensions=(".tsv",),
        help="Toloka results. Item = ASSIGNMENT:task_id, annotator = ASSIGNMENT:worker_id, label = the OUTPUT: "
        "field (--field to choose), gold = GOLDEN:; rejected, skipped and expired assignments are counted.",
        detect=_detect,
        read_export=read,
        options=("field",),
        example="fusion-core report assignments_from_pool_123.tsv --out report.html",
    )
)
