"""Which reader reads a source: the format given, or the one :func:`fusion_core.data.formats.detect` finds.

:func:`read_encoded` gives a table of text (a tool's export gives its long table of responses), :func:`read_input`
the table or the export with its gold labels, spans and :class:`~fusion_core.data.formats.export.ReadReport`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fusion_core.data.formats import FormatInfo, Sniff, detect, format_info
from fusion_core.data.formats.export import ExportRead
from fusion_core.data.readers import (
    Column,
    EncodedTable,
    Input,
    ReadOptions,
    Source,
    check_names,
    clean_text,
    open_input,
)
from fusion_core.data.stages import stage
from fusion_core.data.text import format_size
from fusion_core.errors import UserInputError


def open_source(source: Source, name: str | None, format: str | None, options: ReadOptions) -> tuple[Input, FormatInfo]:
    """The opened source (size checked) and its format (given, or detected from the name and first bytes)."""
    inp = open_input(source, name, options.max_bytes)
    fmt = format_info(format) if format else detect(Sniff(inp.name, inp.head, _parquet_names(inp)))
    return inp, fmt


def _parquet_names(inp: Input) -> tuple[str, ...]:
    """Column names from a Parquet footer (nothing when the file is not Parquet or its footer is unreadable)."""
    if not inp.head.startswith(b"PAR1"):
        return ()
    try:
        return tuple(pq.read_schema(inp.stream()).names)
    except (pa.ArrowException, OSError, ValueError):
        return ()


def read_export(inp: Input, fmt: FormatInfo, options: ReadOptions, field: str | None = None) -> ExportRead:
    """A tool's export read by its registered reader."""
    assert fmt.read_export is not None
    with stage("read", f"{inp.label} ({format_size(inp.size)}, {fmt.name})"):
        try:
            return fmt.read_export(inp, options, field=field)
        except UserInputError:
            raise
        except RecursionError:
            raise UserInputError(f"{inp.label} is nested too deeply to be a {fmt.name} export.") from None
        except (TypeError, AttributeError, KeyError, IndexError, ValueError) as exc:  # a value of an unexpected type
            detail = " ".join(str(exc).split())[:120]
            raise UserInputError(
                f"{inp.label} does not have the structure of a {fmt.title} ({type(exc).__name__}: {detail}); export "
                "it again, or name the format with --input-format."
            ) from None


@dataclass
class Loaded:
    """A source read: a plain ``table`` (EncodedTable) or a tool's ``export``."""

    format: FormatInfo
    table: EncodedTable | None = None
    export: ExportRead | None = None


def read_input(
    source: Source,
    *,
    name: str | None = None,
    format: str | None = None,
    columns: Sequence[str] | None = None,
    options: ReadOptions | None = None,
    field: str | None = None,
) -> Loaded:
    """Read a source as its format says: a table of text (only ``columns`` when given) or a tool's export."""
    opts = options or ReadOptions()
    inp, fmt = open_source(source, name, format, opts)
    if fmt.kind == "export":
        return Loaded(fmt, export=read_export(inp, fmt, opts, field))
    if field is not None:
        raise UserInputError(
            f"field= (--field) chooses a question of a labelling tool's export, not of a {fmt.name} table."
        )
    assert fmt.read_table is not None
    with stage("read", f"{inp.label} ({format_size(inp.size)})"):
        return Loaded(fmt, table=fmt.read_table(inp, columns, opts))


def encode_frame(frame: pd.DataFrame, name: str, options: ReadOptions) -> EncodedTable:
    """A DataFrame of text (an export's long table) as an :class:`EncodedTable`, cleaned like a file's cells."""
    names = check_names([str(c) for c in frame.columns], name, options)
    table = EncodedTable(name, names, n_rows=len(frame))
    for col, key in zip(frame.columns, names, strict=True):
        values = pa.array(frame[col].astype(object).where(frame[col].notna(), None).to_numpy(), pa.string())
        encoded = pc.dictionary_encode(clean_text(values, options))
        codes = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int32)
        table.columns[key] = Column(codes, pd.Index(encoded.dictionary.to_pandas(), dtype="str"))
    return table


def read_encoded(
    source: Source,
    *,
    name: str | None = None,
    format: str | None = None,
    columns: Sequence[str] | None = None,
    options: ReadOptions | None = None,
) -> EncodedTable:
    """Read a table as text columns (only ``columns`` when given; the file's names are always listed); a tool's
    export gives its long table of responses (task, worker, label[, sequence, position])."""
    opts = options or ReadOptions()
    got = read_input(source, name=name, format=format, columns=columns, options=opts)
    if got.export is not None:
        return encode_frame(got.export.table, got.format.name, opts)
    assert got.table is not None
    return got.table


__all__ = ["Loaded", "encode_frame", "open_source", "read_encoded", "read_export", "read_input"]
