"""Parquet: typed columns mapped to canonical text; declared sizes checked before any data is read
(``docs/DATA.md``; :mod:`fusion_core.data.tabular`)."""

from __future__ import annotations

from fusion_core.data.formats import FormatInfo, Sniff, register_format
from fusion_core.data.tabular import read_parquet


def _detect(s: Sniff) -> bool:
    return s.head.startswith(b"PAR1")


INFO = register_format(
    FormatInfo(
        name="parquet",
        title="Parquet table (long or wide)",
        kind="table",
        extensions=(".parquet", ".pq"),
        help="Columns of any flat type, each value mapped to one canonical text.",
        detect=_detect,
        read_table=read_parquet,
        dask=True,
        example="fusion-core report answers.parquet --out report.html",
    )
)
