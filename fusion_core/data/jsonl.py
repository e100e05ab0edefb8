"""JSON lines (or one JSON array of objects) read as text, in chunks of rows.

Numbers keep the text they were written with (``1.0`` stays ``"1.0"``, ``1e3`` stays ``"1e3"``), strings are kept
exactly, ``true``/``false`` become ``"true"``/``"false"``, ``null`` and absent keys are missing.  A list or an object
as a value, a key repeated within an object, or a line that is not a JSON object is refused with its line number.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from fusion_core.data.readers import (
    Budget,
    EncodedTable,
    Encoder,
    Input,
    ReadOptions,
    check_names,
    not_utf8,
)
from fusion_core.data.text import format_size, show_value
from fusion_core.errors import UserInputError

_CHUNK_ROWS = 1 << 14


class _Decoder:
    """A JSON decoder that keeps number text, refuses repeated keys and knows the current line for messages."""

    def __init__(self, label: str) -> None:
        self.label, self.line = label, 0
        self.decoder = json.JSONDecoder(
            parse_int=str, parse_float=str, parse_constant=str, object_pairs_hook=self._object
        )

    def _object(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise UserInputError(
                    f"{self.label} line {self.line:,} repeats the key {show_value(key)} within one object; each key "
                    "must appear once."
                )
            out[key] = value
        return out

    def invalid(self, exc: json.JSONDecodeError, what: str) -> UserInputError:
        return UserInputError(
            f"{self.label} {what} is not valid JSON ({exc.msg} at column {exc.colno:,}); write one JSON object per line."
        )


def _cell(value: Any, key: str, line: int, label: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value is True or value is False:
        return "true" if value else "false"
    kind = "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__
    raise UserInputError(
        f"{label} line {line:,}: the value of {show_value(key)} is {kind}; ids and labels must be single values "
        "(text, numbers, true/false or null)."
    )


def _decode(dec: _Decoder, text: str, where: str, start: int | None = None) -> tuple[Any, int]:
    """One JSON value (and where it ends), every failure a :class:`UserInputError` (nesting so deep that Python's
    decoder runs out of stack included)."""
    try:
        if start is None:
            return dec.decoder.decode(text), len(text)
        return dec.decoder.raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise dec.invalid(exc, where if start is None else f"line {exc.lineno:,}") from None
    except RecursionError:
        raise UserInputError(
            f"{dec.label} {where} nests lists or objects too deeply to read; ids and labels must be single values "
            "(one JSON object of column: value pairs per line)."
        ) from None


def _lines(inp: Input, dec: _Decoder) -> Iterator[tuple[int, dict[str, Any]]]:
    with inp.binary() as fh:
        for number, raw in enumerate(fh, start=1):
            dec.line = number
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise not_utf8(inp) from None
            if number == 1:
                text = text.lstrip("\ufeff")
            if not text.strip():
                continue
            yield number, _decode(dec, text, f"line {number:,}")[0]


def _array(inp: Input, dec: _Decoder) -> Iterator[tuple[int, dict[str, Any]]]:
    """Objects of a JSON array, decoded one at a time (the text is held once, the objects only per chunk; line
    numbers are counted on from the previous object, so the whole read stays linear)."""
    try:
        text = inp.read_all().decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError:
        raise not_utf8(inp) from None
    ws = " \t\r\n"
    i, n = text.index("[") + 1, len(text)
    counted, line = 0, 1
    while True:
        while i < n and text[i] in ws:
            i += 1
        if i < n and text[i] == "]":
            return
        line += text.count("\n", counted, i)
        counted = i
        dec.line = line
        obj, i = _decode(dec, text, f"line {line:,}", i)
        yield line, obj
        while i < n and text[i] in ws:
            i += 1
        if i < n and text[i] == ",":
            i += 1
        elif i >= n or text[i] != "]":
            raise UserInputError(f"{inp.label} is a JSON array that is not closed by ']' (line {line:,}).")


def cell_limit(inp: Input, options: ReadOptions) -> int:
    """Most cells (rows × distinct keys) a JSON file may spread into: the size limit's, and no more than
    ``KEY_CELLS_PER_BYTE`` per byte of the file (at least ``KEY_CELLS_FLOOR``), so that absent keys — a new key on
    every line — cannot make a small file into a huge table (memory is bounded by the file, not by the limit)."""
    return min(options.max_cells, max(KEY_CELLS_PER_BYTE * inp.size, KEY_CELLS_FLOOR))


KEY_CELLS_PER_BYTE = 4
KEY_CELLS_FLOOR = 1 << 24


def read_jsonl(inp: Input, columns: Sequence[str] | None, options: ReadOptions) -> EncodedTable:
    """Rows of JSON objects as text columns (only ``columns`` encoded when given).  A column that is present but
    null on every row is read as a column of missing values."""
    if b"\x00" in inp.head:
        raise UserInputError(f"{inp.label} looks binary, not UTF-8 text; use JSON lines, CSV, TSV or Parquet.")
    dec = _Decoder(inp.label)
    start = inp.head.lstrip(b"\xef\xbb\xbf \t\r\n")
    rows: Callable[[Input, _Decoder], Iterator[tuple[int, dict[str, Any]]]] = (
        _array if start.startswith(b"[") else _lines
    )
    names: dict[str, None] = {}  # every key seen, in order of first appearance
    encoders: dict[str, Encoder] = {}
    budget = Budget(inp.label, options, 1)
    limit = cell_limit(inp, options)
    wanted = None if columns is None else {c.strip() if options.strip_whitespace else c for c in columns}
    chunk = _Chunk(inp.label, wanted)
    kept = 0  # distinct keys that are read (all, or those of ``columns``)
    for line, obj in rows(inp, dec):
        if not isinstance(obj, dict):
            kind = "a list" if isinstance(obj, list) else "a single value"
            raise UserInputError(f"{inp.label} line {line:,} holds {kind}, not a JSON object of column: value pairs.")
        for key in obj:
            if key not in names:
                names[key] = None
                kept += wanted is None or key in wanted or key.strip() in wanted
        if (budget.rows + chunk.n + 1) * kept > limit:
            raise _too_many_keys(inp, budget.rows + chunk.n + 1, kept, limit)
        chunk.add(line, obj)
        if chunk.n >= _CHUNK_ROWS:
            chunk.flush(encoders, budget, kept)
    chunk.flush(encoders, budget, kept)
    if not names:
        raise UserInputError(f"{inp.label} holds no JSON objects: it is empty or only blank lines.")
    ordered = list(names)
    checked = check_names(ordered, inp.label, options)
    table = EncodedTable(inp.label, checked, n_rows=budget.rows)
    for raw, name in zip(ordered, checked):
        if wanted is not None and raw not in wanted and raw.strip() not in wanted:
            continue
        table.columns[name] = encoders.get(raw, Encoder(0)).finish(budget.rows, options)
    return table


def _too_many_keys(inp: Input, rows: int, keys: int, limit: int) -> UserInputError:
    return UserInputError(
        f"{inp.label} has {keys:,} different keys within its first {rows:,} objects: {rows:,} × {keys:,} cells, "
        f"more than the {limit:,} a file of {format_size(inp.size)} may spread into; give every line the same few "
        "keys (task, worker, label), or write a wide table as CSV."
    )


class _Chunk:
    """Rows gathered column by column (only the present cells of the wanted keys), encoded every
    ``_CHUNK_ROWS`` rows; absent keys are missing."""

    def __init__(self, label: str, wanted: set[str] | None) -> None:
        self.label, self.wanted, self.n = label, wanted, 0
        self.cells: dict[str, tuple[list[int], list[str | None]]] = {}
        self.skip: set[str] = set()

    def add(self, line: int, obj: dict[str, Any]) -> None:
        for key, value in obj.items():
            if key in self.skip:
                continue
            got = self.cells.get(key)
            if got is None:
                if self.wanted is not None and key not in self.wanted and key.strip() not in self.wanted:
                    self.skip.add(key)
                    continue
                got = self.cells[key] = ([], [])
            got[0].append(self.n)
            got[1].append(_cell(value, key, line, self.label))
        self.n += 1

    def flush(self, encoders: dict[str, Encoder], budget: Budget, n_columns: int) -> None:
        if not self.n:
            return
        for key, (rows, values) in self.cells.items():
            if len(rows) == self.n:
                full = values
            else:
                full = [None] * self.n
                for r, v in zip(rows, values):
                    full[r] = v
            encoders.setdefault(key, Encoder()).add(budget.rows, pa.array(full, type=pa.string()))
        budget.n_columns = max(n_columns, 1)
        budget.add(self.n)
        self.cells.clear()
        self.n = 0
