"""doccano JSONL exports with the annotator of each label.

* one object per example with ``annotations``: a list of ``{"label", "user"}`` (text classification) or
  ``{"label", "start_offset", "end_offset", "user"}`` (sequence labelling) — the collaborative export;
* one object per (example, annotator) with ``label`` (a list of labels, or of ``[start, end, label]`` spans) and
  the annotator in ``user`` (or ``annotator``) — per-user files joined with the user's name.

The item is ``id``; several labels of one person are sorted and joined with ``|``; spans become token sequences
(and span agreement).  An example nobody labelled is counted as skipped; a person's later labels win.
"""

from __future__ import annotations

from typing import Any

from fusion_core.data.formats import FormatInfo, Sniff, register_format
from fusion_core.data.formats.export import Collector, ExportRead, json_lines, text_of
from fusion_core.data.formats.label_studio import span_rows
from fusion_core.data.readers import Input, ReadOptions
from fusion_core.data.spans import SpanTable
from fusion_core.errors import UserInputError


def _entries(o: dict[str, Any], n: int, inp: Input) -> list[tuple[str, Any]]:
    """(annotator, label entry) of one line."""
    if isinstance(o.get("annotations"), list):
        out = []
        for a in o["annotations"]:
            user = text_of(a.get("user")) if isinstance(a, dict) else None
            if user is None:
                raise UserInputError(f"line {n:,} of {inp.label}: every annotation needs its user.")
            out.append((user, a))
        return out
    user = text_of(o.get("user")) or text_of(o.get("annotator"))
    if user is None:
        raise UserInputError(
            f"line {n:,} of {inp.label} has no annotator ('user' or 'annotator'); doccano writes one file per user "
            "— add each line's user name, or export with the collaborative 'annotations' list."
        )
    labels = o.get("label")
    if not isinstance(labels, list):
        labels = [labels] if labels is not None else []
    return [(user, {"label": lab}) if not isinstance(lab, list) else (user, lab) for lab in labels] or [(user, None)]


def _span(entry: Any) -> dict[str, Any] | None:
    if isinstance(entry, list) and len(entry) == 3:
        return {"start": entry[0], "end": entry[1], "labels": [entry[2]]}
    if isinstance(entry, dict) and "start_offset" in entry:
        return {"start": entry["start_offset"], "end": entry["end_offset"], "labels": [entry.get("label")]}
    return None


def read(inp: Input, options: ReadOptions, field: str | None = None) -> ExportRead:
    """Read a doccano JSONL export (module docstring)."""
    lines = list(json_lines(inp, "doccano export"))
    spans_mode = any(_span(e) is not None for n, o in lines for _, e in _entries(o, n, inp))
    col = Collector("doccano")
    per: dict[tuple[str, str], list[Any]] = {}
    texts: dict[str, str] = {}
    for n, o in lines:
        col.records += 1
        task = text_of(o.get("id"))
        if task is None:
            raise UserInputError(f"line {n:,} of {inp.label} has no example id.")
        entries = _entries(o, n, inp)
        if not entries:
            col.count("skipped")
        if isinstance(o.get("text"), str):
            texts[task] = o["text"]
        for user, e in entries:
            per.setdefault((task, user), []).append(e)
    annotations: list[tuple[str, str]] = []
    spans: list[tuple[int, int, int, str]] = []
    for (task, user), given in per.items():
        if spans_mode:
            if task not in texts:
                raise UserInputError(f"{inp.label}: example {task} has spans but no text.")
            k = len(annotations)
            annotations.append((task, user))
            for e in given:
                sp = _span(e)
                if sp is not None:
                    spans += [(k, s, t, lab) for s, t, lab in span_rows(sp, texts[task], f"{inp.label}, id {task}")]
            continue
        found = (text_of(e.get("label")) if isinstance(e, dict) else None for e in given)
        labels = sorted({t for t in found if t is not None})
        if labels:
            col.add(task, user, "|".join(labels))
        else:
            col.count("empty")
    mapping = [("task", "id"), ("annotator", "user"), ("label", "label")]
    if spans_mode:
        return col.finish(
            mapping, ["spans became token sequences (BIO tags)."], SpanTable.build(annotations, spans, texts)
        )
    return col.finish(mapping, ["several labels of one person are sorted and joined with |."])


def _detect(s: Sniff) -> bool:
    obj = s.first_object
    if not s.first_line.startswith("{") or obj is None or "id" not in obj or "_input_hash" in obj:
        return False
    anns = obj.get("annotations")
    if isinstance(anns, list):
        return all(isinstance(a, dict) and "user" in a for a in anns)
    return "text" in obj and isinstance(obj.get("label"), list) and ("user" in obj or "annotator" in obj)


INFO = register_format(
    FormatInfo(
        name="doccano",
        title="doccano JSONL (text classification or sequence labelling, with each label's user)",
        kind="export",
        extensions=(".jsonl",),
        help="doccano export with the annotator of each label (collaborative 'annotations', or a user per line).",
        detect=_detect,
        read_export=read,
        example="fusion-core report doccano_export.jsonl --out report.html",
    )
)
