"""CSV/TSV and Parquet readers (see :mod:`fusion_core.data.readers` for the shared rules).

CSV/TSV: pyarrow's streaming reader with every column typed as dictionary-encoded text (no type inference, no
missing-value guessing), 4 MB blocks, quoted newlines allowed; a row with too few or too many fields is refused
with its row number.  Parquet: rows × columns and the uncompressed size declared in the metadata are checked
against the limit before any data is read; values are mapped to canonical text (:mod:`fusion_core.data.text`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from fusion_core.data.readers import (
    _BLOCK,
    _HEAD,
    POOL,
    Budget,
    EncodedTable,
    Encoder,
    Input,
    ReadOptions,
    check_names,
    not_utf8,
)
from fusion_core.data.text import canonical_text, format_size
from fusion_core.errors import UserInputError

# -------------------------------------------------------------------------------------------------- CSV
_BAD_ROW = re.compile(r"Row #(\d+): Expected (\d+) columns, got (\d+)")


def _csv_parse(fmt: str) -> pcsv.ParseOptions:
    return pcsv.ParseOptions(delimiter="\t" if fmt == "tsv" else ",", newlines_in_values=True)


def _csv_failure(exc: Exception, inp: Input, fmt: str) -> UserInputError:
    """One sentence for a CSV the parser refused (the row number is in pyarrow's message: rows counted from the
    header, with ``use_threads=False``)."""
    msg = str(exc)
    bad = _BAD_ROW.search(msg)
    if bad:
        row, expected, got = (int(g) for g in bad.groups())
        what = "fewer" if got < expected else "more"
        return UserInputError(
            f"{inp.label} row {row:,} (counting the header as row 1) has {got} field(s) but the header has "
            f"{expected}: {what} fields than columns; fix that row, or quote values that contain the delimiter."
        )
    if "UTF8" in msg or "UTF-8" in msg:
        return not_utf8(inp)
    if "Empty CSV" in msg:
        return UserInputError(f"{inp.label} has no header line: it is empty or only blank lines.")
    detail = msg.split(": ", 1)[-1].splitlines()[0] if msg else type(exc).__name__
    return UserInputError(f"could not read {inp.label} as {fmt.upper()}: {detail}.")


def _csv_header(inp: Input, fmt: str) -> tuple[list[str], int]:
    """The header names and a block size that holds the header row."""
    block = _HEAD
    while True:
        try:
            reader = pcsv.open_csv(
                inp.stream(),
                read_options=pcsv.ReadOptions(block_size=block, use_threads=False),
                parse_options=_csv_parse(fmt),
                convert_options=pcsv.ConvertOptions(include_columns=[]),
                memory_pool=POOL,
            )
            names = list(reader.schema.names)
            reader.close()
            return names, block
        except pa.ArrowInvalid as exc:
            # a header row longer than the block (thousands of annotator columns) is "straddling" or, when the
            # block holds no line end at all, an "empty block": read a larger block before giving up
            grow = "straddl" in str(exc) or ("Empty CSV" in str(exc) and inp.size > block)
            if grow and block < inp.size + 1:
                block *= 8
                continue
            raise _csv_failure(exc, inp, fmt) from None
        except UnicodeDecodeError:
            raise not_utf8(inp, " in the header") from None


def read_csv(inp: Input, fmt: str, columns: Sequence[str] | None, options: ReadOptions) -> EncodedTable:
    """CSV/TSV in batches; only ``columns`` (all when None) are encoded."""
    if b"\x00" in inp.head:
        raise UserInputError(
            f"{inp.label} looks binary, not UTF-8 text; use CSV, TSV, JSON lines or Parquet (with the right extension)."
        )
    if inp.size <= len(inp.head) and not inp.head.strip():
        raise UserInputError(f"{inp.label} contains only whitespace: no header, no rows.")
    raw_names, block = _csv_header(inp, fmt)
    block = max(block, _BLOCK)
    longest = _longest_line(inp) if inp.size > block else 0
    if 2 * longest > block:  # grown at once: a failed read of a row that straddles blocks holds memory in vain
        block = min(max(block, 4 * longest), inp.size + 1)
    names = check_names(raw_names, inp.label, options)
    keep = [i for i, n in enumerate(names) if columns is None or n in columns]
    threads = True
    while True:
        try:
            return _read_csv_blocks(inp, fmt, (raw_names, names, keep), block, options, threads=threads)
        except _Straddle:
            if block > inp.size:
                raise UserInputError(f"could not read {inp.label}: a row is longer than the file.") from None
            block = min(block * 8, inp.size + 1)
        except _Unnumbered:  # the parallel reader does not number rows: read again in order for the message
            threads = False


def _longest_line(inp: Input) -> int:
    """Bytes of the longest physical line (a row with quoted line ends is longer; the straddle retry covers it),
    from one pass over the file in 4 MB pieces."""
    longest, carry = 0, 0
    with inp.binary() as fh:
        while piece := fh.read(_BLOCK):
            ends = np.flatnonzero(np.frombuffer(piece, dtype=np.uint8) == 10)
            if not len(ends):
                carry += len(piece)
                continue
            longest = max(longest, carry + int(ends[0]) + 1, int(np.diff(ends).max(initial=0)))
            carry = len(piece) - int(ends[-1]) - 1
    return max(longest, carry)


def _next_batch(batches: Any) -> pa.RecordBatch | None:
    """The next batch of a reader, or of a reversed list of batches (popped, so each is freed once encoded)."""
    if isinstance(batches, list):
        return batches.pop() if batches else None
    try:
        return batches.read_next_batch()
    except StopIteration:
        return None


class _Straddle(Exception):
    pass


def _mostly_distinct(inp: Input, fmt: str, include: list[str], block: int) -> set[str]:
    """The columns whose first block has more distinct values than ``Encoder.BULK_RATIO`` of its rows (read as
    text and encoded in bulk; the others are dictionary-encoded by the parser).  A file the parser refuses is left
    to the full read, which words the message."""
    dictionary = pa.dictionary(pa.int32(), pa.string())
    try:
        reader = pcsv.open_csv(
            inp.stream(),
            read_options=pcsv.ReadOptions(block_size=block, use_threads=False),
            parse_options=_csv_parse(fmt),
            convert_options=pcsv.ConvertOptions(
                column_types=dict.fromkeys(include, dictionary),
                include_columns=include,
                strings_can_be_null=False,
                null_values=[],
                quoted_strings_can_be_null=False,
            ),
            memory_pool=POOL,
        )
        first = reader.read_next_batch()
        reader.close()
    except (pa.ArrowException, StopIteration, UnicodeDecodeError):
        return set()
    rows = max(first.num_rows, 1)
    return {n for n, col in zip(include, first.columns) if len(col.dictionary) > Encoder.BULK_RATIO * rows}


class _Unnumbered(Exception):
    pass


def _read_csv_blocks(
    inp: Input,
    fmt: str,
    header: tuple[list[str], list[str], list[int]],
    block: int,
    options: ReadOptions,
    *,
    threads: bool,
) -> EncodedTable:
    """The kept columns as text, encoded as they stream (:class:`Encoder`): columns with few distinct values are
    dictionary-encoded block by block by the parser itself, id columns with mostly distinct values are read as text
    and encoded in bulks of up to a third of the file size.  ``threads``: blocks parsed in parallel (rows are not numbered in
    pyarrow's errors then: :class:`_Unnumbered` asks for an ordered re-read)."""
    raw_names, names, keep = header
    include = [raw_names[i] for i in keep]
    # rows longer than the 4 MB block (a block grown to hold them): text columns, which the parser holds once fewer
    # times than dictionary columns (3× rather than 4× the longest row; benchmarks/bench_io_memory.py)
    distinct = set(include) if block > _BLOCK else _mostly_distinct(inp, fmt, include, block)
    dictionary = pa.dictionary(pa.int32(), pa.string())
    convert = pcsv.ConvertOptions(
        column_types={n: pa.string() if n in distinct else dictionary for n in include},
        include_columns=include,
        strings_can_be_null=False,
        null_values=[],
        quoted_strings_can_be_null=False,
    )
    capacity = min(inp.size // max(len(names), 1) + 2, options.max_cells // max(len(names), 1) + 2)
    bulk = max(inp.size // 3, _BLOCK)
    encoders = [Encoder(capacity, bulk) for _ in keep]
    budget = Budget(inp.label, options, len(names))
    try:
        reader = pcsv.open_csv(
            inp.stream(),
            read_options=pcsv.ReadOptions(block_size=block, use_threads=threads),
            parse_options=_csv_parse(fmt),
            convert_options=convert,
            memory_pool=POOL,
        )
        if block > _BLOCK:  # rows longer than 4 MB: the parser's block goes before the text is encoded
            batches: Any = list(reader)
            reader.close()
            reader = None  # the closed reader still holds its last block until it is released
            batches.reverse()
        else:
            batches = reader
        while batch := _next_batch(batches):
            for enc, col in zip(encoders, batch.columns):
                enc.add(budget.rows, col)
            budget.add(batch.num_rows)
        batch = col = batches = None
        if reader is not None:
            reader.close()  # its blocks are freed before the held columns are encoded
            reader = None
    except pa.ArrowInvalid as exc:
        if "straddl" in str(exc):
            raise _Straddle from None
        if threads and "Expected" in str(exc) and not _BAD_ROW.search(str(exc)):
            raise _Unnumbered from None
        raise _csv_failure(exc, inp, fmt) from None
    table = EncodedTable(inp.label, names, n_rows=budget.rows)
    for i, enc in zip(keep, encoders):
        table.columns[names[i]] = enc.finish(budget.rows, options)
    return table


# ------------------------------------------------------------------------------------------------ Parquet
CELLS_PER_BYTE = 32
"""Most cells a Parquet file may declare per byte of file (at least ``CELLS_FLOOR``): a declared-row bomb is refused
from its metadata, so memory (4 bytes a cell while reading) is bounded by the file, not only by the size limit.
Real answer tables reach 0.6 (random ids) to 1.3 (sorted ids) cells per byte, and 9 for a dense item × annotator grid
with one constant label (zstd or snappy)."""
CELLS_FLOOR = 1 << 22


def _leaf_sizes(meta: pq.FileMetaData, wanted: set[str]) -> int:
    total = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for j in range(group.num_columns):
            chunk = group.column(j)
            if chunk.path_in_schema.split(".", 1)[0] in wanted:
                total += chunk.total_uncompressed_size
    return total


def _parquet_file(inp: Input, **kwargs: Any) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(inp.stream(), memory_map=False, **kwargs)
    except (pa.ArrowException, OSError, ValueError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else "unreadable footer"
        raise UserInputError(f"{inp.label} is not a readable Parquet file ({detail}).") from None


def read_parquet(inp: Input, columns: Sequence[str] | None, options: ReadOptions) -> EncodedTable:
    """Parquet: metadata checked against the limit first, then batches mapped to canonical text."""
    if inp.head[:4] != b"PAR1":
        raise UserInputError(f"{inp.label} is not a Parquet file (it does not start with PAR1).")
    pf = _parquet_file(inp)
    meta, schema = pf.metadata, pf.schema_arrow
    names = check_names(schema.names, inp.label, options)
    keep = [i for i, n in enumerate(names) if columns is None or n in columns]
    cells = meta.num_rows * len(keep)
    if cells > options.max_cells:
        raise UserInputError(
            f"{inp.label} declares {meta.num_rows:,} rows × {len(keep)} column(s) = {cells:,} cells, more than the "
            f"{options.max_cells:,} the {format_size(options.max_bytes)} limit allows; split the file or raise the limit."
        )
    if cells > max(CELLS_PER_BYTE * inp.size, CELLS_FLOOR):
        raise UserInputError(
            f"{inp.label} declares {meta.num_rows:,} rows × {len(keep)} column(s) = {cells:,} cells in a file of only "
            f"{format_size(inp.size)}, more than {CELLS_PER_BYTE} cells per byte (answer tables reach about 10); it "
            "was refused before reading, as a decompression bomb would be; if the data is real, save it as CSV."
        )
    raw = [schema.names[i] for i in keep]
    unpacked = _leaf_sizes(meta, set(raw))
    if unpacked > options.max_bytes:
        raise UserInputError(
            f"{inp.label} holds {format_size(unpacked)} of uncompressed data in the columns read, over the "
            f"{format_size(options.max_bytes)} limit; split the file or raise the limit."
        )
    text_like = [
        n
        for n in raw
        if pa.types.is_string(schema.field(n).type)
        or pa.types.is_large_string(schema.field(n).type)
        or pa.types.is_binary(schema.field(n).type)
        or pa.types.is_large_binary(schema.field(n).type)
    ]
    pf = _parquet_file(inp, read_dictionary=text_like)
    encoders = [Encoder(meta.num_rows) for _ in keep]
    budget = Budget(inp.label, options, len(keep))
    try:
        for batch in pf.iter_batches(batch_size=1 << 16, columns=raw, use_threads=False):
            for enc, col, i in zip(encoders, batch.columns, keep):
                enc.add(budget.rows, _typed_to_text(col, names[i], budget.rows + 1))
            budget.add(batch.num_rows)
    except (pa.ArrowException, OSError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserInputError(f"could not read {inp.label} as Parquet: {detail}.") from None
    table = EncodedTable(inp.label, names, n_rows=budget.rows)
    for i, enc in zip(keep, encoders):
        table.columns[names[i]] = enc.finish(budget.rows, options)
    return table


def _typed_to_text(values: pa.Array, column: str, first_row: int) -> pa.Array:
    """A Parquet column batch as a dictionary array of canonical text (the distinct values converted once)."""
    t = values.type
    nested = pa.types.is_nested(t) or (pa.types.is_dictionary(t) and pa.types.is_nested(t.value_type))
    if nested:
        return canonical_text(values, column=column, first_row=first_row)  # raises: not a single value
    encoded = values if pa.types.is_dictionary(t) else pc.dictionary_encode(values, memory_pool=POOL)
    try:
        text = canonical_text(encoded.dictionary, column=column, first_row=first_row)
    except UserInputError:
        canonical_text(values, column=column, first_row=first_row)  # the message with the right row
        raise
    return pa.DictionaryArray.from_arrays(encoded.indices, text)
