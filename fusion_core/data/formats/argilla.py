"""Argilla / Hugging Face datasets with per-annotator responses, from a local export (Parquet, JSON lines or a JSON
array): one row per record.

* Argilla 2 (``Dataset.to_hub`` / ``to_disk``): per question ``<q>.responses`` (the answers),
  ``<q>.responses.users`` (who gave them) and ``<q>.responses.status`` (submitted / discarded / draft);
* Argilla 1 (``FeedbackDataset.format_as("datasets")``): per question a list of ``{"user_id", "value",
  "status"}``.

The item is ``id`` (else ``external_id``, else the row number); answers that are lists (multi-label) are sorted
and joined with ``|``; a span question (lists of ``{"start", "end", "label"}`` over ``text``) gives token
sequences.  Submitted answers are kept; discarded ones are counted as skipped, drafts as drafts.  ``field``
chooses the question when there are several.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fusion_core.data.formats import FormatInfo, Sniff, register_format
from fusion_core.data.formats.export import Collector, ExportRead, choose_field, json_lines, load_json, text_of
from fusion_core.data.formats.label_studio import span_rows
from fusion_core.data.readers import Input, ReadOptions
from fusion_core.data.spans import SpanTable
from fusion_core.data.text import format_size
from fusion_core.errors import UserInputError

V2 = ".responses.users"


def _rows(inp: Input, options: ReadOptions) -> list[dict[str, Any]]:
    """The records: Parquet (declared rows and size checked before reading), JSON lines or a JSON array."""
    if inp.head.startswith(b"PAR1"):
        try:
            pf = pq.ParquetFile(inp.stream(), memory_map=False)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise UserInputError(f"{inp.label} is not a readable Parquet file ({str(exc)[:120]}).") from None
        meta = pf.metadata
        size = sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups))
        if meta.num_rows * max(meta.num_columns, 1) > options.max_cells or size > options.max_bytes // 4:
            raise UserInputError(
                f"{inp.label} declares {meta.num_rows:,} rows and {format_size(size)} of data, over what the "
                f"{format_size(options.max_bytes)} limit allows for a nested export; raise the limit."
            )
        try:
            return list(pf.read().to_pylist())
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise UserInputError(f"{inp.label} could not be read ({str(exc)[:120]}).") from None
    if inp.head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"["):
        doc = load_json(inp, options, "JSON export")
        if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
            raise UserInputError(f"{inp.label} is not a list of records.")
        return doc
    return [o for _, o in json_lines(inp, "dataset export")]


def _questions(row: dict[str, Any]) -> dict[str, str]:
    """Question → "v2" or "v1"."""
    out = {k[: -len(V2)]: "v2" for k in row if k.endswith(V2)}
    for k, v in row.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) and "user_id" in x and "value" in x for x in v):
            out.setdefault(k, "v1")
    return out


def _answers(row: dict[str, Any], q: str, kind: str) -> list[tuple[Any, Any, str]]:
    """(user, value, status) of one record's answers to ``q``."""
    if kind == "v2":
        users, values = _list(row.get(q + V2)), _list(row.get(q + ".responses"))
        status = _list(row.get(q + ".responses.status")) or ["submitted"] * len(users)
        if not len(users) == len(values) == len(status):
            raise UserInputError(f"record {row.get('id')!r}: {q}.responses, .users and .status differ in length.")
        return list(zip(users, values, status, strict=True))
    answers = [a for a in _list(row.get(q)) if isinstance(a, dict)]
    return [(a.get("user_id"), a.get("value"), str(a.get("status", "submitted"))) for a in answers]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _label(value: Any) -> str | None:
    if isinstance(value, list):
        parts = sorted({t for v in value if (t := text_of(v)) is not None})
        return "|".join(parts) or None
    return text_of(value)


def read(inp: Input, options: ReadOptions, field: str | None = None) -> ExportRead:
    """Read an Argilla / Hugging Face export (module docstring)."""
    rows = _rows(inp, options)
    found: dict[str, str] = {}
    for r in rows:
        found.update({k: v for k, v in _questions(r).items() if k not in found})
    question = choose_field(sorted(found), field, "question with per-annotator responses", inp)
    kind = found[question]
    col = Collector("Argilla / Hugging Face")
    spans_mode = any(
        isinstance(v, list) and v and isinstance(v[0], dict) and "start" in v[0]
        for r in rows
        for _, v, _ in _answers(r, question, kind)
    )
    annotations: list[tuple[str, str]] = []
    spans: list[tuple[int, int, int, str]] = []
    texts: dict[str, str] = {}
    for i, r in enumerate(rows):
        task = text_of(r.get("id")) or text_of(r.get("external_id")) or str(i)
        answers = _answers(r, question, kind)
        if not answers:
            col.count("skipped")
        for user, value, status in answers:
            col.records += 1
            worker = text_of(user)
            if str(status).lower() == "discarded":
                col.count("skipped")
            elif str(status).lower() == "draft":
                col.count("drafts")
            elif worker is None:
                col.count("empty")
            elif spans_mode:
                text = r.get("text")
                if not isinstance(text, str):
                    raise UserInputError(f"{inp.label}: record {task} has spans but no 'text'.")
                texts[task] = text
                k = len(annotations)
                annotations.append((task, worker))
                for sp in _list(value):
                    v = {**sp, "labels": [sp.get("label")]} if isinstance(sp, dict) else sp
                    spans += [(k, s, e, lab) for s, e, lab in span_rows(v, text, f"{inp.label}, record {task}")]
            elif (label := _label(value)) is None:
                col.count("empty")
            else:
                col.add(task, worker, label)
    src = f"{question}{V2}" if kind == "v2" else f"{question}[].user_id"
    id_key = next((k for k in ("id", "external_id") if any(k in r for r in rows)), "row number")
    mapping = [("task", id_key), ("annotator", src), ("label", question)]
    notes = [f"question read: {question} (Argilla {'2' if kind == 'v2' else '1'} layout)."]
    if spans_mode:
        return col.finish(mapping, notes, SpanTable.build(annotations, spans, texts))
    return col.finish(mapping, notes)


def _detect(s: Sniff) -> bool:
    if s.parquet_names:
        return any(n.endswith(V2) for n in s.parquet_names)
    obj = s.first_object
    return obj is not None and s.first_line[:1] in ("{", "[") and bool(_questions(obj))


INFO = register_format(
    FormatInfo(
        name="argilla",
        title="Argilla / Hugging Face dataset with per-annotator responses (Parquet, JSON lines or JSON)",
        kind="export",
        extensions=(".parquet", ".jsonl", ".json"),
        help="Argilla 2 (<q>.responses, <q>.responses.users, <q>.responses.status) or Argilla 1 (lists of user_id/"
        "value/status); submitted answers kept, discarded and drafts counted; --field chooses the question.",
        detect=_detect,
        read_export=read,
        options=("field",),
        example="fusion-core report argilla_dataset.parquet --out report.html",
    )
)
