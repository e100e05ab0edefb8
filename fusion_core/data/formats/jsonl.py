"""JSON lines (one object per line; one JSON array of objects is also read), values kept as written
(``docs/DATA.md``; :mod:`fusion_core.data.jsonl`)."""

from __future__ import annotations

from fusion_core.data.formats import FormatInfo, Sniff, register_format
from fusion_core.data.jsonl import read_jsonl


def _detect(s: Sniff) -> bool:
    return s.first_line[:1] in ("{", "[")


INFO = register_format(
    FormatInfo(
        name="jsonl",
        title="JSON lines table (one flat object per response; a JSON array of objects too)",
        kind="table",
        extensions=(".jsonl", ".ndjson", ".json"),
        help="One flat JSON object per line (or one array of them); numbers keep the text they were written with.",
        detect=_detect,
        read_table=read_jsonl,
        aliases=("json",),
        example="fusion-core report answers.jsonl --out report.html",
    )
)
