"""Prodigy JSONL (``prodigy db-out``): one object per answer with ``_input_hash``, ``_task_hash``, ``answer``
(accept / reject / ignore) and ``_annotator_id`` (else ``_session_id``).

Three kinds of task, told apart over the whole file: choice tasks (``accept``: the chosen option ids, several
sorted and joined with ``|``; a rejected or ignored answer is left out and counted); span tasks (``spans`` with
``start``, ``end``, ``label`` over ``text``: token sequences and span agreement; rejected and ignored answers
left out); binary tasks (one ``label`` per question: the item is the question, ``_task_hash``, and the label is
the answer, accept or reject; ignored answers are skipped).  The item of choice and span tasks is ``_input_hash``.
A person's later answer to a task wins.
"""

from __future__ import annotations

from typing import Any

from fusion_core.data.formats import FormatInfo, Sniff, register_format
from fusion_core.data.formats.export import Collector, ExportRead, json_lines, text_of
from fusion_core.data.formats.label_studio import span_rows
from fusion_core.data.readers import Input, ReadOptions
from fusion_core.data.spans import SpanTable
from fusion_core.errors import UserInputError


def _kind(lines: list[dict[str, Any]]) -> str:
    if any(isinstance(o.get("accept"), list) for o in lines):
        return "choice"
    if any(isinstance(o.get("spans"), list) and o.get("spans") for o in lines):
        return "spans"
    return "binary"


def read(inp: Input, options: ReadOptions, field: str | None = None) -> ExportRead:
    """Read a Prodigy JSONL export (module docstring); ``field`` is not used (one question per dataset)."""
    lines = [obj for _, obj in json_lines(inp, "Prodigy export")]
    kind = _kind(lines)
    col = Collector("Prodigy")
    annotations: list[tuple[str, str]] = []
    spans: list[tuple[int, int, int, str]] = []
    texts: dict[str, str] = {}
    id_key = "_task_hash" if kind == "binary" else "_input_hash"
    for n, o in enumerate(lines, start=1):
        col.records += 1
        task = text_of(o.get(id_key))
        worker = text_of(o.get("_annotator_id")) or text_of(o.get("_session_id"))
        answer = text_of(o.get("answer"))
        if task is None or worker is None or answer not in ("accept", "reject", "ignore"):
            raise UserInputError(
                f"answer {n:,} of {inp.label} lacks {id_key}, _annotator_id/_session_id or an answer "
                "(accept/reject/ignore); is it a Prodigy db-out export?"
            )
        if answer == "ignore":
            col.count("skipped")
            continue
        if kind == "binary":
            col.add(task, worker, answer)
            continue
        if answer == "reject":
            col.count("rejected")
            continue
        if kind == "choice":
            accepted = o["accept"] if isinstance(o.get("accept"), list) else []
            chosen = sorted({t for v in accepted if (t := text_of(v)) is not None})
            if chosen:
                col.add(task, worker, "|".join(chosen))
            else:
                col.count("empty")
            continue
        text = o.get("text")
        if not isinstance(text, str):
            raise UserInputError(f"answer {n:,} of {inp.label} has spans but no text.")
        texts[task] = text
        k = len(annotations)
        annotations.append((task, worker))
        for sp in o["spans"] if isinstance(o.get("spans"), list) else []:
            value = {**sp, "labels": [sp.get("label")]} if isinstance(sp, dict) else sp
            spans += [(k, s, e, lab) for s, e, lab in span_rows(value, text, f"{inp.label}, answer {n:,}")]
    mapping = [("task", id_key), ("annotator", "_annotator_id")]
    notes = {
        "choice": "choice task: the accepted options are the label.",
        "spans": "span task: spans became token sequences (BIO tags, tokens split at spaces).",
        "binary": "binary task: each (text, label) question is an item and accept/reject the answer.",
    }
    mapping.append(("label", {"choice": "accept", "spans": "spans", "binary": "answer"}[kind]))
    if kind == "spans":
        return col.finish(mapping, [notes[kind]], SpanTable.build(annotations, spans, texts))
    return col.finish(mapping, [notes[kind]])


def _detect(s: Sniff) -> bool:
    obj = s.first_object
    return s.first_line.startswith("{") and obj is not None and "_input_hash" in obj and "answer" in obj


INFO = register_format(
    FormatInfo(
        name="prodigy",
        title="Prodigy JSONL (db-out: accept/reject, multiple choice, spans)",
        kind="export",
        extensions=(".jsonl",),
        help="prodigy db-out. Item = _input_hash (binary: _task_hash), annotator = _annotator_id; ignored and "
        "rejected answers are left out and counted.",
        detect=_detect,
        read_export=read,
        example="fusion-core report ner_dataset.jsonl --out report.html",
    )
)
