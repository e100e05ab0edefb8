"""Streaming readers for user tables: every cell is text, dictionary-encoded as it streams.

* CSV/TSV go through pyarrow's streaming CSV reader (never one Python string for the whole file);
* JSON lines are parsed line by line (:mod:`fusion_core.data.jsonl`);
* Parquet metadata (rows, columns, uncompressed size) is checked before any data is read, then row batches are read
  and their values mapped to canonical text (:mod:`fusion_core.data.text`).

Each column is kept as integer codes into its unique values, so memory is the codes (4 bytes a cell) plus the
distinct values, not a Python string per cell.  The size limit (``max_bytes``) bounds the file, the number of cells
(``max_bytes // 2``) and, for Parquet, the declared uncompressed size.  Reading rules: ``docs/DATA.md``.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from fusion_core.data.text import format_size, show_value, size_over_limit
from fusion_core.errors import UserInputError

DEFAULT_MAX_BYTES = 200 * 1024 * 1024
_HEAD = 1 << 16
_BLOCK = 1 << 22


def _pool() -> pa.MemoryPool:
    try:
        pool = pa.jemalloc_memory_pool()
        pa.jemalloc_set_decay_ms(0)  # freed pages go back to the system at once
        return pool
    except NotImplementedError:  # pragma: no cover - Arrow built without jemalloc
        return pa.default_memory_pool()


POOL = _pool()
"""The readers' Arrow memory pool: jemalloc returning freed pages at once kept the peak lowest (with 4 MB CSV
blocks) of the pools measured by ``benchmarks/bench_io_memory.py`` (malloc and mimalloc keep freed blocks)."""

Source = str | os.PathLike | bytes | bytearray | memoryview | BinaryIO


@dataclass(frozen=True)
class ReadOptions:
    """How cells become values: ``na_values`` are extra missing-value markers (an empty cell is always missing),
    ``strip_whitespace`` trims both ends of every cell and column name, ``max_bytes`` is the size limit."""

    na_values: tuple[str, ...] = ()
    strip_whitespace: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES

    @property
    def max_cells(self) -> int:
        """Most cells (rows × columns) a table may have: one per four bytes of the limit (a coded cell takes about
        12–16 bytes while responses are built, so memory stays within a few times the limit)."""
        return max(self.max_bytes // 4, 10_000)


def read_options(
    na_values: Sequence[str] | str | None = None, strip_whitespace: bool = False, max_bytes: int | None = None
) -> ReadOptions:
    """Checked :class:`ReadOptions`."""
    if isinstance(na_values, str):
        na_values = (na_values,)
    markers = tuple(na_values or ())
    if not all(isinstance(m, str) for m in markers):
        raise UserInputError(f"na_values must be text markers such as 'NA'; got {list(markers)}.")
    limit = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit <= 0:
        raise UserInputError(f"the size limit must be a positive number of bytes; got {limit!r}.")
    return ReadOptions(markers, bool(strip_whitespace), int(limit))


# ------------------------------------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class Input:
    """An opened source: its name (for messages), size, first bytes, and either a path or the bytes."""

    name: str
    size: int
    head: bytes
    path: Path | None = None
    data: bytes | None = None

    @property
    def label(self) -> str:
        return self.name or "the file"

    def stream(self) -> pa.NativeFile:
        return pa.OSFile(str(self.path), memory_pool=POOL) if self.path is not None else pa.BufferReader(self.data)

    def binary(self) -> BinaryIO:
        return open(self.path, "rb") if self.path is not None else io.BytesIO(self.data or b"")

    def read_all(self) -> bytes:
        return self.path.read_bytes() if self.path is not None else bytes(self.data or b"")


def _too_big(label: str, size: int, limit: int) -> UserInputError:
    return UserInputError(
        f"{label} {size_over_limit(size, limit)}; split the file or raise the limit (max_bytes, --max-mb)."
    )


def open_input(source: Source, name: str | None, max_bytes: int) -> Input:
    """Name, size and head of a path, bytes or file-like source, refusing what is over the limit or empty."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, found = bytes(source), ""
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise UserInputError(f"file not found: {path}")
        size = path.stat().st_size
        label = name or path.name
        if size > max_bytes:
            raise _too_big(label, size, max_bytes)
        if size == 0:
            raise UserInputError(f"{label} is empty (0 bytes).")
        try:
            with path.open("rb") as fh:
                head = fh.read(_HEAD)
        except OSError as exc:
            raise UserInputError(f"cannot read {path}: {exc.strerror or 'permission denied'}.") from None
        return Input(label, size, head, path=path)
    elif hasattr(source, "read"):
        found = str(getattr(source, "name", "") or "")
        declared = getattr(source, "size", None)
        if isinstance(declared, int) and declared > max_bytes:
            raise _too_big(name or found or "the upload", declared, max_bytes)
        if hasattr(source, "seek"):
            with contextlib.suppress(OSError, ValueError):
                source.seek(0)
        raw = source.read(max_bytes + 1)
        data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
    else:
        raise UserInputError(f"cannot read a table from a {type(source).__name__}; give a file path or bytes.")
    label = name or found
    if len(data) > max_bytes:
        if isinstance(source, (bytes, bytearray, memoryview)):
            raise _too_big(label or "the input", len(data), max_bytes)
        raise UserInputError(
            f"{label or 'the input'} is over the {format_size(max_bytes)} limit; split the file or raise the limit."
        )
    if not data:
        raise UserInputError(f"{label or 'the file'} is empty (0 bytes).")
    return Input(label, len(data), data[:_HEAD], data=data)


def not_utf8(inp: Input, where: str = "") -> UserInputError:
    """The message for a text file that is not UTF-8, naming the first bad byte and its line."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset, lines = 0, 1
    with inp.binary() as fh:
        while chunk := fh.read(1 << 20):
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                pos = exc.start
                byte = chunk[pos] if pos < len(chunk) else 0
                line = lines + chunk.count(b"\n", 0, max(pos, 0))
                return UserInputError(
                    f"{inp.label} is not UTF-8 text (byte 0x{byte:02x} on line {line:,}{where}); re-save it as UTF-8, "
                    "or use Parquet."
                )
            offset += len(chunk)
            lines += chunk.count(b"\n")
    return UserInputError(f"{inp.label} is not UTF-8 text; re-save it as UTF-8, or use Parquet.")


# ---------------------------------------------------------------------------------------------- encoding
def code_dtype(n_values: int) -> type[np.signedinteger]:
    """The smallest signed integer type for codes 0..n_values−1 and −1 (missing)."""
    for dtype in (np.int8, np.int16, np.int32):
        if n_values <= np.iinfo(dtype).max:
            return dtype
    return np.int64


@dataclass
class Column:
    """One column as integer ``codes`` (int32, −1 = missing) into its distinct text ``values``."""

    codes: np.ndarray
    values: pd.Index

    def categorical(self) -> pd.Categorical:
        return pd.Categorical.from_codes(self.codes, dtype=pd.CategoricalDtype(self.values), validate=False)


def clean_text(values: pa.Array, options: ReadOptions) -> pa.Array:
    """Whitespace trimmed (if asked) and missing markers (the empty cell and ``na_values``) made null."""
    if options.strip_whitespace:
        values = pc.utf8_trim_whitespace(values, memory_pool=POOL)
    missing = pc.equal(values, "")
    if options.na_values:
        missing = pc.or_(missing, pc.is_in(values, value_set=pa.array(options.na_values, pa.string())))
    return pc.if_else(missing, pa.scalar(None, values.type), values)


def _as_string(values: pa.Array) -> pa.Array:
    return values if values.type == pa.string() else values.cast(pa.string())


class Encoder:
    """Incremental dictionary encoding of one text column.

    Each batch is dictionary-encoded; its codes go straight into one growing int32 array and its distinct values
    wait in ``pending``.  When the pending values outgrow the merged ones they are merged (one hash pass; values
    already merged keep their codes) and the batch codes are mapped in place, so memory is the codes plus at most
    twice the distinct values, and the total work stays linear.

    With ``bulk_bytes`` a column whose first batch is mostly distinct values (item ids) is not encoded batch by
    batch: its text batches are kept until they hold ``bulk_bytes`` and encoded together, so each value is hashed
    about once instead of once per batch it occurs in and once more per merge (the low-cardinality columns —
    annotators, labels — stay batch-encoded, where a batch's few distinct values are cheap to hash).
    """

    MERGE_BYTES = 1 << 22
    """Pending distinct values are merged once they hold more than this and more than the merged ones."""
    BULK_RATIO = 1 / 2
    """A column goes to bulk encoding when its first batch has more distinct values than this share of its rows."""

    def __init__(self, capacity: int = 1 << 16, bulk_bytes: int = 0) -> None:
        """``capacity``: expected rows (an upper bound costs nothing: untouched memory is never committed);
        ``bulk_bytes``: the text kept before a bulk-encoded column is encoded (0: always batch by batch)."""
        self.codes = np.empty(max(capacity, 16), dtype=np.int32)
        self.rows = 0
        self.values = pa.array([], pa.string())
        self.pending: list[tuple[int, int, pa.Array, bool]] = []
        self.pending_bytes = 0
        self.bulk_bytes = bulk_bytes
        self.bulk: bool | None = None if bulk_bytes > 0 else False
        self.held: list[pa.Array] = []
        self.held_start = 0
        self.held_bytes = 0

    def _reserve(self, stop: int) -> None:
        if stop > len(self.codes):  # a new block: untouched pages of np.empty take no memory, only copied ones do
            grown = np.empty(max(stop, 2 * len(self.codes)), dtype=np.int32)
            grown[: self.rows] = self.codes[: self.rows]
            self.codes = grown
        if self.rows < stop:
            self.codes[self.rows : stop] = -1
            self.rows = stop

    def add(self, start: int, values: pa.Array) -> None:
        """Values of rows ``start, start+1, …``: a string array or a dictionary array of strings."""
        if pa.types.is_dictionary(values.type):
            self._add_encoded(start, values, unique=False)
            return
        if self.bulk:
            if not self.held:
                self.held_start = start
            self.held.append(values)
            self.held_bytes += values.nbytes
            if self.held_bytes >= self.bulk_bytes:
                self._release()
            return
        encoded = pc.dictionary_encode(values, memory_pool=POOL)
        if self.bulk is None:  # the first batch decides
            self.bulk = len(encoded.dictionary) > self.BULK_RATIO * max(len(values), 1)
        self._add_encoded(start, encoded, unique=True)

    def _release(self) -> None:
        """Encode the held text batches together."""
        if not self.held:
            return
        encoded = pc.dictionary_encode(pa.chunked_array(self.held, type=self.held[0].type), memory_pool=POOL)
        self.held, self.held_bytes = [], 0  # the text goes before the codes are copied
        start = self.held_start
        for chunk in encoded.chunks:  # every chunk's indices point into the last chunk's dictionary
            self._codes_from(start, chunk.indices)
            start += len(chunk)
        self._pend(self.held_start, start, encoded.chunk(encoded.num_chunks - 1).dictionary, unique=True)

    def _codes_from(self, start: int, indices: pa.Array) -> int:
        """Store the codes of rows ``start, …`` (missing → −1); returns the row after the last."""
        if indices.null_count:
            indices = pc.fill_null(indices, -1)
        stop = start + len(indices)
        self._reserve(stop)
        self.codes[start:stop] = indices.to_numpy(zero_copy_only=False)
        return stop

    def _add_encoded(self, start: int, values: pa.Array, *, unique: bool) -> None:
        """A dictionary array of rows ``start, …``; ``unique``: its dictionary has no repeated value."""
        stop = self._codes_from(start, values.indices)
        self._pend(start, stop, values.dictionary, unique=unique)

    def _pend(self, start: int, stop: int, dictionary: pa.Array, *, unique: bool) -> None:
        """Rows ``start:stop`` hold codes into ``dictionary``, to be merged into :attr:`values`."""
        if dictionary.type != self.values.type:
            dictionary = dictionary.cast(self.values.type, memory_pool=POOL)
        self.pending.append((start, stop, dictionary, unique))
        self.pending_bytes += dictionary.nbytes
        if self.pending_bytes > max(self.MERGE_BYTES, self.values.nbytes):
            self._merge()

    def _merge(self) -> None:
        if not self.pending:
            return
        if len(self.values) == 0 and len(self.pending) == 1 and self.pending[0][3]:  # nothing to merge with
            self.values = self.pending[0][2]
            self.pending, self.pending_bytes = [], 0
            return
        if len(self.values) + sum(len(d) for _, _, d, _ in self.pending) <= FEW:
            self._merge_few()
            return
        if self.values.type == pa.string() and self.values.nbytes + self.pending_bytes > 1 << 30:
            self.values = self.values.cast(pa.large_string(), memory_pool=POOL)  # offsets beyond 2 GB
            self.pending = [(a, b, d.cast(pa.large_string(), memory_pool=POOL), u) for a, b, d, u in self.pending]
        first = [self.values] if len(self.values) else []
        chunks = first + [d for _, _, d, _ in self.pending if len(d)]
        merged = pc.dictionary_encode(pa.chunked_array(chunks, type=self.values.type), memory_pool=POOL)
        if merged.num_chunks != len(chunks):  # pragma: no cover - Arrow keeps one output chunk per input chunk
            raise RuntimeError("dictionary encoding changed the chunking")
        outputs = iter(merged.chunks[len(first) :])  # merged values come first and keep their codes
        for start, stop, dictionary, _ in self.pending:
            ids = pc.fill_null(next(outputs).indices, -1).to_numpy(zero_copy_only=False) if len(dictionary) else []
            mapping = np.append(np.asarray(ids, dtype=np.int32), np.int32(-1))  # code −1 (missing) → −1
            self.codes[start:stop] = mapping[self.codes[start:stop]]
        if merged.num_chunks:
            self.values = merged.chunk(0).dictionary
        self.pending, self.pending_bytes = [], 0

    def _merge_few(self) -> None:
        """:meth:`_merge` of at most :data:`FEW` values in all, in Python: the merged values keep their codes and
        new values follow in order of first appearance (as Arrow's ``dictionary_encode`` orders them)."""
        merged = self.values.to_pylist()
        position = {v: i for i, v in enumerate(merged)}
        for start, stop, dictionary, _ in self.pending:
            ids = []
            for v in dictionary.to_pylist():
                if v is None:
                    ids.append(-1)
                    continue
                if v not in position:
                    position[v] = len(merged)
                    merged.append(v)
                ids.append(position[v])
            mapping = np.array([*ids, -1], dtype=np.int32)  # code −1 (missing) → −1
            self.codes[start:stop] = mapping[self.codes[start:stop]]
        self.values = pa.array(merged, self.values.type)
        self.pending, self.pending_bytes = [], 0

    def finish(self, n_rows: int, options: ReadOptions) -> Column:
        """The column: codes in the smallest integer type into the cleaned distinct values."""
        self._release()
        self._merge()
        self._reserve(n_rows)
        codes = self.codes[:n_rows]
        # a few values (a wide table's annotator columns): the same cleaning in Python, without Arrow's per-call
        # cost (~8 calls a column: 5,000 columns 3.6 → 1.4 s CPU)
        if len(self.values) <= FEW and not self.values.null_count and not options.strip_whitespace:
            return self._finish_few(codes, options)
        cleaned = clean_text(self.values, options)
        if cleaned.null_count or not cleaned.equals(self.values):
            again = pc.dictionary_encode(cleaned, memory_pool=POOL)
            mapping = np.append(pc.fill_null(again.indices, -1).to_numpy(zero_copy_only=False), np.int32(-1))
            for i in range(0, n_rows, 1 << 20):
                codes[i : i + (1 << 20)] = mapping[codes[i : i + (1 << 20)]]
            cleaned = again.dictionary
        dtype = code_dtype(len(cleaned))
        out = codes if dtype == np.int32 else codes.astype(dtype)  # a view: the unused tail was never touched
        del codes
        self.codes = np.empty(0, dtype=np.int32)
        return Column(out, pd.Index(cleaned.to_pandas(), dtype="str"))

    def _finish_few(self, codes: np.ndarray, options: ReadOptions) -> Column:
        """:meth:`finish` for at most :data:`FEW` distinct values and no trimming: the empty string and
        ``na_values`` become missing, the other values keep their order (as ``clean_text`` then
        ``dictionary_encode`` would leave them)."""
        values = self.values.to_pylist()
        missing = {"", *options.na_values}
        kept = [v for v in values if v not in missing]
        if len(kept) < len(values):
            position = {v: i for i, v in enumerate(kept)}
            mapping = np.array([position.get(v, -1) for v in values] + [-1], dtype=np.int32)
            for i in range(0, len(codes), 1 << 20):
                codes[i : i + (1 << 20)] = mapping[codes[i : i + (1 << 20)]]
        dtype = code_dtype(len(kept))
        out = codes if dtype == np.int32 else codes.astype(dtype)
        self.codes = np.empty(0, dtype=np.int32)
        return Column(out, pd.Index(kept, dtype="str"))


FEW = 64
"""Distinct values up to which a column is finished in Python (:meth:`Encoder._finish_few`)."""


@dataclass
class EncodedTable:
    """A table read as text: every column ``names`` of the file, the ``columns`` that were read, ``n_rows``."""

    name: str
    names: list[str]
    columns: dict[str, Column] = field(default_factory=dict)
    n_rows: int = 0

    def frame(self) -> pd.DataFrame:
        """The columns read as a DataFrame of categoricals of text (missing = NaN), in file order."""
        return pd.DataFrame(
            {n: self.columns[n].categorical() for n in self.names if n in self.columns},
            index=pd.RangeIndex(self.n_rows),
        )


def check_names(names: Sequence[str], label: str, options: ReadOptions) -> list[str]:
    """Column names as written (trimmed with ``strip_whitespace``), refusing repeated or missing ones."""
    out = [str(n).strip() if options.strip_whitespace else str(n) for n in names]
    if not out:
        raise UserInputError(f"{label} has no columns: it has no header line.")
    seen: dict[str, int] = {}
    for i, n in enumerate(out):
        if n in seen:
            raise UserInputError(
                f"{label} repeats the column name {show_value(n)} (columns {seen[n] + 1} and {i + 1}); column names "
                "must be unique."
            )
        seen[n] = i
    return out


class Budget:
    """Counts cells while reading and refuses a table with more than the limit allows."""

    def __init__(self, label: str, options: ReadOptions, n_columns: int) -> None:
        self.label, self.options, self.n_columns, self.rows = label, options, max(n_columns, 1), 0

    def add(self, rows: int) -> None:
        self.rows += rows
        if self.rows * self.n_columns > self.options.max_cells:
            raise UserInputError(
                f"{self.label} has more than {self.options.max_cells:,} cells (rows × columns), the most the "
                f"{format_size(self.options.max_bytes)} limit allows; split the file or raise the limit."
            )
