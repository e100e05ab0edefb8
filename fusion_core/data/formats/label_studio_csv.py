"""Label Studio CSV export (``Export → CSV``): one row per annotation with the JSON-min fields as columns
(multi-choice answers and spans as JSON text in their cell); read as text, then as :mod:`.label_studio_min`."""

from __future__ import annotations

from fusion_core.data.formats import FormatInfo, Sniff, register_format
from fusion_core.data.formats.export import ExportRead
from fusion_core.data.formats.label_studio_min import read_records
from fusion_core.data.readers import Input, ReadOptions
from fusion_core.data.tabular import read_csv


def read(inp: Input, options: ReadOptions, field: str | None = None) -> ExportRead:
    """Read a Label Studio CSV export (module docstring); cells are text, an empty cell is no answer."""
    frame = read_csv(inp, "csv", None, options).frame()
    records = [
        {k: v for k, v in row.items() if isinstance(v, str)} for row in frame.astype(object).to_dict(orient="records")
    ]
    return read_records(records, inp, "Label Studio CSV", field)


def _detect(s: Sniff) -> bool:
    names = set(s.header(","))
    return {"id", "annotator", "annotation_id"} <= names


INFO = register_format(
    FormatInfo(
        name="label-studio-csv",
        title="Label Studio CSV export (one row per annotation)",
        kind="export",
        extensions=(".csv",),
        help="Label Studio Export → CSV. Annotator = annotator; the question is detected (--field to choose).",
        detect=_detect,
        read_export=read,
        options=("field",),
        example="fusion-core report project-1.csv --out report.html",
    )
)
