"""Label Studio JSON-min export (``Export → JSON-MIN``): one flat object per annotation — the task ``id``, its data
fields, ``annotator``, ``annotation_id``, timestamps and one key per control with its answer (a choice as text,
several as ``{"choices": [...]}``, a rating or number, ``{"taxonomy": [[...]]}``, or a list of spans
``{"start", "end", "labels"}``).  The same records come from the CSV export (:mod:`.label_studio_csv`).

The question is the one key that is neither a known Label Studio field nor task data (task data: the same value
in every annotation of a task and a different one for most tasks); ``field`` chooses when several remain.
JSON-min carries no ground-truth flag and no cancelled annotations; a person's later annotation of a task wins.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fusion_core.data.formats import FormatInfo, Sniff, register_format
from fusion_core.data.formats.export import Collector, ExportRead, choose_field, load_json, need_list, text_of
from fusion_core.data.formats.label_studio import answer_text, span_rows
from fusion_core.data.readers import Input, ReadOptions
from fusion_core.data.spans import SpanTable
from fusion_core.data.text import show_value
from fusion_core.errors import UserInputError

META = {"id", "annotator", "annotation_id", "created_at", "updated_at", "lead_time", "agreement", "drafts",
        "predictions", "annotations", "total_annotations", "cancelled_annotations", "total_predictions",
        "file_upload", "storage_filename", "project", "updated_by", "completed_by", "ground_truth"}  # fmt: skip


def _decoded(value: Any) -> Any:
    """A CSV cell holding JSON (``{"choices": [...]}``, a list of spans) decoded; other text as it is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.JSONDecoder(parse_int=str, parse_float=str).decode(value)
        except (ValueError, RecursionError):
            return value
    return value


def _is_spans(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and "start" in v for v in value)


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return next((k for k in ("choices", "taxonomy", "rating", "number") if k in value), "choices")
    return "choices"


def _questions(records: list[dict[str, Any]]) -> list[str]:
    """Keys that are neither Label Studio fields nor task data (module docstring)."""
    keys = list(dict.fromkeys(k for r in records for k in r if k not in META))
    tasks = {text_of(r.get("id")) for r in records}
    out = []
    for k in keys:
        per_task: dict[Any, set[str]] = {}
        for r in records:
            per_task.setdefault(text_of(r.get("id")), set()).add(json.dumps(r.get(k), sort_keys=True))
        constant = all(len(v) == 1 for v in per_task.values())
        distinct = len({json.dumps(r.get(k), sort_keys=True) for r in records})
        spans = any(_is_spans(_decoded(r.get(k))) for r in records)
        if spans or not (constant and distinct > len(tasks) / 2 and len(tasks) > 1):
            out.append(k)
    return out


def read_records(records: Sequence[Any], inp: Input, fmt: str, field: str | None, data_key: str = "text") -> ExportRead:
    """Flat Label Studio records (JSON-min objects or CSV rows) → responses (module docstring)."""
    for i, r in enumerate(records):
        if not isinstance(r, dict) or "annotator" not in r or "id" not in r:
            raise UserInputError(f"{inp.label}: record {i + 1} is not a Label Studio annotation (id, annotator).")
    rows = [dict(r) for r in records]
    question = choose_field(_questions(rows), field, "question", inp)
    col = Collector(fmt)
    spans_mode = any(_is_spans(_decoded(r.get(question))) for r in rows)
    annotations: list[tuple[str, str]] = []
    spans: list[tuple[int, int, int, str]] = []
    texts: dict[str, str] = {}
    for r in rows:
        col.records += 1
        task, worker = text_of(r["id"]), text_of(r["annotator"])
        if task is None or worker is None:
            col.count("empty")
            continue
        value = _decoded(r.get(question))
        if spans_mode:
            text = r.get(data_key)
            if not isinstance(text, str):
                raise UserInputError(f"{inp.label}: task {show_value(task)} has spans but no {data_key!r} text.")
            texts[task] = text
            k = len(annotations)
            annotations.append((task, worker))
            where = f"{inp.label}, task {show_value(task)}"
            spans += [(k, s, e, lab) for v in (value or []) for s, e, lab in span_rows(v, text, where)]
            continue
        label = answer_text(_kind(value), value)
        if label is None:
            col.count("empty")
        else:
            col.add(task, worker, label)
    mapping = [("task", "id"), ("annotator", "annotator"), ("label", question)]
    notes = [f"question read: {show_value(question)}."]
    if spans_mode:
        notes.append("spans became token sequences (BIO tags, tokens split at spaces).")
        out = col.finish(mapping, notes, SpanTable.build(annotations, spans, texts))
        out.control = (question, data_key, "labels")
        return out
    out = col.finish(mapping, notes)
    out.control = (question, data_key, "choices")
    return out


def read(inp: Input, options: ReadOptions, field: str | None = None) -> ExportRead:
    """Read a Label Studio JSON-min export (module docstring)."""
    records = need_list(load_json(inp, options, "Label Studio JSON-min export"), "the export", inp)
    return read_records(records, inp, "Label Studio JSON-min", field)


def _detect(s: Sniff) -> bool:
    obj = s.first_object
    if not s.text.lstrip(" \t\r\n").startswith("["):
        return False
    if obj is None:  # a first record longer than the head
        return '"annotation_id"' in s.text and '"annotator"' in s.text and '"annotations"' not in s.text
    return "annotator" in obj and "annotation_id" in obj


INFO = register_format(
    FormatInfo(
        name="label-studio-min",
        title="Label Studio JSON-min export (one flat object per annotation)",
        kind="export",
        extensions=(".json",),
        help="Label Studio Export → JSON-MIN. Annotator = annotator; the question is detected (--field to choose).",
        detect=_detect,
        read_export=read,
        options=("field",),
        example="fusion-core report project-1-min.json --out report.html",
    )
)
