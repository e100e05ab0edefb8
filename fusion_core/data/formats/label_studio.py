"""Label Studio JSON export (``Export → JSON``): a list of tasks, each with its ``data`` and ``annotations``.

Each annotation's ``result`` holds one answer per control (``from_name``): choices (one → the choice; several →
the choices sorted and joined with ``|``), rating, number, taxonomy (each path joined with ``/``, several paths
with ``|``) or labels (NER spans: token sequences for the sequence methods, spans for span agreement).  The
annotator is ``completed_by`` (its ``id`` when it is an object); an annotation flagged ``ground_truth`` gives the
task's gold label (and is not counted as a response); cancelled (skipped) annotations and drafts are left out and
counted; when one person annotated a task twice, the later annotation is kept.  With several controls, ``field``
chooses one (the CLI's ``--field``).  The JSON-min and CSV exports are :mod:`.label_studio_min` and
:mod:`.label_studio_csv`.
"""

from __future__ import annotations

from typing import Any

from fusion_core.data.formats import FormatInfo, Sniff, register_format
from fusion_core.data.formats.export import (
    Collector,
    ExportRead,
    choose_field,
    load_json,
    need_list,
    text_of,
)
from fusion_core.data.readers import Input, ReadOptions
from fusion_core.data.spans import SpanTable
from fusion_core.data.text import show_value
from fusion_core.errors import UserInputError

SPAN_TYPES = ("labels", "hypertextlabels", "paragraphlabels")
VALUE_KEYS = {"choices": "choices", "rating": "rating", "number": "number", "taxonomy": "taxonomy"}


def answer_text(kind: str, value: Any) -> str | None:
    """One control's answer as text: a single choice as written, several sorted and joined with ``|``; a rating
    or number as written; taxonomy paths joined with ``/`` (several with ``|``).  None when there is no answer."""
    if not isinstance(value, dict):
        return text_of(value)
    raw = value.get(VALUE_KEYS.get(kind, kind))
    if kind == "taxonomy" and isinstance(raw, list):
        paths = [
            "/".join(t for p in ([path] if not isinstance(path, list) else path) if (t := text_of(p))) for path in raw
        ]
        raw = [p for p in paths if p]
    if isinstance(raw, list):
        parts = sorted({t for v in raw if (t := text_of(v)) is not None})
        return "|".join(parts) if parts else None
    return text_of(raw)


def span_rows(value: Any, text: str, where: str) -> list[tuple[int, int, str]]:
    """(start, end, label) of one span result (``value.start``, ``value.end``, ``value.labels``), checked."""
    if not isinstance(value, dict):
        raise UserInputError(f"{where}: a span must be an object with start, end and labels.")
    try:
        start, end = int(str(value.get("start"))), int(str(value.get("end")))
    except ValueError:
        raise UserInputError(f"{where}: span start/end must be whole numbers; got {value.get('start')!r}.") from None
    if not 0 <= start < end <= len(text):
        raise UserInputError(f"{where}: span {start}–{end} is outside the task's text ({len(text)} characters).")
    labels = value.get("labels") or value.get("hypertextlabels") or []
    if not isinstance(labels, list) or not labels:
        raise UserInputError(f"{where}: a span needs a list of labels.")
    return [(start, end, lab) for v in labels if (lab := text_of(v)) is not None]


def annotator_of(completed_by: Any) -> str | None:
    """``completed_by`` as text: the number as written, or the ``id`` (else ``email``) of a user object."""
    if isinstance(completed_by, dict):
        return text_of(completed_by.get("id")) or text_of(completed_by.get("email"))
    return text_of(completed_by)


def task_text(data: Any, to_name: str | None, task: str) -> str:
    """The text the spans of a task point into: ``data[to_name]``, else the only text value of ``data``."""
    if isinstance(data, dict):
        if to_name and isinstance(data.get(to_name), str):
            return str(data[to_name])
        texts = [v for v in data.values() if isinstance(v, str)]
        if len(texts) == 1:
            return texts[0]
    raise UserInputError(f"task {show_value(task)}: cannot tell which data field the spans point into.")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _controls(tasks: list[Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    for t in tasks:
        for a in _as_list(t.get("annotations")) if isinstance(t, dict) else []:
            for r in _as_list(a.get("result")) if isinstance(a, dict) else []:
                if isinstance(r, dict) and r.get("from_name") is not None:
                    found.setdefault(str(r["from_name"]), str(r.get("type", "")).lower())
    return found


def read(inp: Input, options: ReadOptions, field: str | None = None) -> ExportRead:
    """Read a Label Studio JSON export (module docstring)."""
    tasks = need_list(load_json(inp, options, "Label Studio JSON export"), "the export", inp)
    controls = _controls(tasks)
    control = choose_field(sorted(controls), field, "control (question)", inp)
    spans_mode = controls[control] in SPAN_TYPES
    col = Collector("Label Studio JSON")
    annotations: list[tuple[str, str]] = []
    spans: list[tuple[int, int, int, str]] = []
    texts: dict[str, str] = {}
    no_annotation = gold_spans = 0
    for i, t in enumerate(tasks):
        if not isinstance(t, dict) or "id" not in t:
            raise UserInputError(f"{inp.label}: task {i + 1} is not a Label Studio task (an object with an id).")
        task = text_of(t["id"]) or str(i)
        col.count("drafts", len(_as_list(t.get("drafts"))))
        anns = need_list(t.get("annotations") or [], f"task {show_value(task)}'s annotations", inp)
        no_annotation += not anns
        for a in anns:
            col.records += 1
            if not isinstance(a, dict):
                raise UserInputError(f"{inp.label}: an annotation of task {show_value(task)} is not an object.")
            if a.get("was_cancelled"):
                col.count("cancelled")
                continue
            worker = annotator_of(a.get("completed_by"))
            if worker is None:
                raise UserInputError(f"{inp.label}: an annotation of task {show_value(task)} has no completed_by.")
            results = [r for r in need_list(a.get("result") or [], "result", inp) if isinstance(r, dict)]
            mine = [r for r in results if str(r.get("from_name")) == control]
            if spans_mode:
                if a.get("ground_truth"):
                    gold_spans += 1
                    continue
                text = task_text(t.get("data"), str(mine[0].get("to_name")) if mine else None, task)
                texts[task] = text
                k = len(annotations)
                annotations.append((task, worker))
                where = f"{inp.label}, task {show_value(task)}"
                spans += [(k, s, e, lab) for r in mine for s, e, lab in span_rows(r.get("value"), text, where)]
                continue
            label = answer_text(controls[control], mine[0].get("value")) if mine else None
            if label is None:
                col.count("empty")
            elif a.get("ground_truth"):
                col.gold[task] = label
            else:
                col.add(task, worker, label)
    notes = [f"question read: {show_value(control)} ({controls[control]})."]
    if len(controls) > 1:
        notes.append(f"other questions in the export: {', '.join(map(show_value, sorted(set(controls) - {control})))}.")
    if no_annotation:
        notes.append(f"{no_annotation:,} tasks have no annotation.")
    mapping = [("task", "id"), ("annotator", "completed_by"), ("label", f"result[{control}]")]
    if spans_mode:
        notes.append("spans became token sequences (BIO tags, tokens split at spaces).")
        if gold_spans:
            notes.append(f"{gold_spans:,} ground-truth span annotations are left out of the responses.")
        out = col.finish(mapping, notes, SpanTable.build(annotations, spans, texts))
    else:
        out = col.finish(mapping, notes)
    out.control = (control, _to_name(tasks, control), controls[control])
    return out


def _to_name(tasks: list[Any], control: str) -> str:
    """The ``to_name`` of a control (the object tag it labels), as the export writes it."""
    for t in tasks:
        for a in _as_list(t.get("annotations")):
            for r in _as_list(a.get("result")) if isinstance(a, dict) else []:
                if isinstance(r, dict) and str(r.get("from_name")) == control and r.get("to_name") is not None:
                    return str(r["to_name"])
    return "text"


def _detect(s: Sniff) -> bool:
    obj = s.first_object
    if not s.text.lstrip(" \t\r\n").startswith("["):
        return False
    if obj is None:  # a first task longer than the head: its keys are still in the text
        return '"annotations"' in s.text and '"completed_by"' in s.text
    return "annotations" in obj and "data" in obj


INFO = register_format(
    FormatInfo(
        name="label-studio",
        title="Label Studio JSON export (tasks with annotations: choices, rating, number, taxonomy, NER spans)",
        kind="export",
        extensions=(".json",),
        help="Label Studio Export → JSON. Annotator = completed_by; ground_truth annotations are gold; cancelled "
        "annotations and drafts are left out and counted; --field chooses the question when there are several.",
        detect=_detect,
        read_export=read,
        options=("field",),
        example="fusion-core report project-1-at-2024-01-01.json --out report.html",
    )
)
