"""Results back to the labelling tool: Label Studio predictions (the consensus label and its probability per task,
importable as pre-annotations), the audit's verdicts per annotator with the platform's worker-id column, and the
hook for a per-platform "send these items again" file.

Ids are written exactly as read (a Label Studio task id that was a JSON number goes back as that number).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.spans import SpanTable
from fusion_core.diagnostics.audit import AuditResult
from fusion_core.errors import UserInputError
from fusion_core.methods.results import FitResult

WORKER_COLUMN = {
    "label-studio": "completed_by",
    "label-studio-min": "annotator",
    "label-studio-csv": "annotator",
    "mturk": "WorkerId",
    "toloka": "ASSIGNMENT:worker_id",
    "argilla": "user_id",
    "prodigy": "_annotator_id",
    "doccano": "user",
}
"""The column that names an annotator in each tool's own files (other formats: ``annotator``)."""
ITEM_COLUMN = {
    "label-studio": "id",
    "label-studio-min": "id",
    "label-studio-csv": "id",
    "mturk": "HITId",
    "toloka": "ASSIGNMENT:task_id",
    "argilla": "id",
    "prodigy": "_input_hash",
    "doccano": "id",
}
"""The column that names an item in each tool's own files (other formats: ``task``)."""
_INT = re.compile(r"-?(0|[1-9][0-9]*)")


def _task_id(text: str) -> Any:
    """A task id as Label Studio wrote it: a JSON number when the text is a plain integer, else the text."""
    return int(text) if _INT.fullmatch(text) else text


def _value(kind: str, label: str) -> dict[str, Any]:
    """The ``value`` of one Label Studio result for a label read from a control of type ``kind``."""
    if kind in ("rating", "number"):
        return {kind: json.loads(label) if re.fullmatch(r"-?[0-9.eE+]+", label) else label}
    if kind == "taxonomy":
        return {"taxonomy": [p.split("/") for p in label.split("|")]}
    return {"choices": label.split("|")}


def label_studio_predictions(
    fit: FitResult,
    control: tuple[str, str, str],
    *,
    spans: SpanTable | None = None,
    model_version: str = "fusion_core",
) -> list[dict[str, Any]]:
    """One prediction per task (``task``, ``model_version``, ``score``, ``result``) — the body of Label Studio's
    ``POST /api/predictions`` (or ``project.create_predictions`` in its SDK): the consensus label with its
    posterior probability; for span questions the aggregated spans, scored by the mean probability of their
    tokens' labels."""
    from_name, to_name, kind = control
    codes = fit.label_codes
    score = fit.posterior[np.arange(len(codes)), codes]
    items = [str(i) for i in fit.items]
    if spans is None:
        return [
            {
                "task": _task_id(item),
                "model_version": model_version,
                "score": round(float(s), 6),
                "result": [{"from_name": from_name, "to_name": to_name, "type": kind, "value": _value(kind, str(lab))}],
            }
            for item, lab, s in zip(items, fit.classes.take(codes), score, strict=True)
        ]
    tags = pd.Series(fit.classes.take(codes).astype(str), index=items)
    found = spans.spans_from_tags(tags)
    by_task = pd.Series(score, index=[i.rpartition("/")[0] for i in items]).groupby(level=0).mean()
    out = []
    for task in spans.annotations["task"].drop_duplicates():
        mine = found[found["task"] == task]
        text = spans.texts[task]
        result = [
            {
                "from_name": from_name,
                "to_name": to_name,
                "type": "labels",
                "value": {"start": int(s), "end": int(e), "text": text[int(s) : int(e)], "labels": [lab]},
            }
            for s, e, lab in zip(mine["start"], mine["end"], mine["label"], strict=True)
        ]
        out.append(
            {
                "task": _task_id(str(task)),
                "model_version": model_version,
                "score": round(float(by_task.get(task, np.nan)), 6),
                "result": result,
            }
        )
    return out


def predictions_json(predictions: list[dict[str, Any]]) -> bytes:
    """The predictions as UTF-8 JSON (ids and labels exactly as read)."""
    return json.dumps(predictions, ensure_ascii=False, indent=1).encode("utf-8")


def verdicts_table(audit: AuditResult, format: str | None = None) -> pd.DataFrame:
    """The audit's per-annotator verdicts with the annotator id in the platform's own column (``WorkerId`` for
    MTurk, ``ASSIGNMENT:worker_id`` for Toloka …), for blocking, bonuses or retraining there."""
    frame = audit.annotators.frame()
    column = WORKER_COLUMN.get(format or "", "annotator")
    return frame.rename_axis(column).reset_index()


def resend_table(items: Sequence[Any] | pd.DataFrame, format: str | None = None) -> pd.DataFrame:
    """A per-platform "send these items again" file: the items in the platform's item-id column (``HITId``,
    ``ASSIGNMENT:task_id``, Label Studio's task ``id`` …).  ``items`` is a list of item ids or the re-labelling
    plan's table (:meth:`fusion_core.diagnostics.plan.RelabelPlan.frame`: its ``task`` column is renamed, and
    ``suggested annotators`` names the platform's worker-id column; the other columns are kept)."""
    if not len(items):
        raise UserInputError("no items to send again.")
    item_col = ITEM_COLUMN.get(format or "", "task")
    if isinstance(items, pd.DataFrame):
        worker_col = WORKER_COLUMN.get(format or "", "annotator")
        return items.rename(columns={"task": item_col, "suggested annotators": f"suggested {worker_col}"})
    return pd.DataFrame({item_col: list(items)})


__all__ = [
    "ITEM_COLUMN",
    "WORKER_COLUMN",
    "label_studio_predictions",
    "predictions_json",
    "resend_table",
    "verdicts_table",
]
