"""CSV: comma-separated values with a header line, read as text (``docs/DATA.md``; :mod:`fusion_core.data.tabular`)."""

from __future__ import annotations

from collections.abc import Sequence

from fusion_core.data.formats import FormatInfo, Sniff, register_format
from fusion_core.data.readers import EncodedTable, Input, ReadOptions
from fusion_core.data.tabular import read_csv


def _detect(s: Sniff) -> bool:
    line = s.first_line
    return not s.head.startswith(b"PAR1") and line[:1] not in ("{", "[") and line.count(",") >= line.count("\t")


def _read(inp: Input, columns: Sequence[str] | None, options: ReadOptions) -> EncodedTable:
    return read_csv(inp, "csv", columns, options)


INFO = register_format(
    FormatInfo(
        name="csv",
        title="CSV table (long: task, annotator, label per row; or wide: one column per annotator)",
        kind="table",
        extensions=(".csv", ".txt"),
        help="Comma-separated, standard quoting, a header line; every cell read as text.",
        detect=_detect,
        read_table=_read,
        dask=True,
        example="fusion-core report answers.csv --out report.html",
    )
)
