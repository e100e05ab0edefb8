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
from fusion_core.data.text import show_value
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
            try:
                obj = dec.decoder.decode(text)
            except json.JSONDecodeError as exc:
                raise dec.invalid(exc, f"line {number:,}") from None
            yield number, obj


def _array(inp: Input, dec: _Decoder) -> Iterator[tuple[int, dict[str, Any]]]:
    """Objects of a JSON array, decoded one at a time (the text is held once, the objects only per chunk)."""
    try:
        text = inp.read_all().decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError:
        raise not_utf8(inp) from None
    ws = " \t\r\n"
    i, n = text.index("[") + 1, len(text)
    while True:
        while i < n and text[i] in ws:
            i += 1
        if i < n and text[i] == "]":
            return
        dec.line = text.count("\n", 0, i) + 1
        try:
            obj, i = dec.decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise dec.invalid(exc, f"line {exc.lineno:,}") from None
        yield dec.line, obj
        while i < n and text[i] in ws:
            i += 1
        if i < n and text[i] == ",":
            i += 1
        elif i >= n or text[i] != "]":
            raise UserInputError(f"{inp.label} is a JSON array that is not closed by ']' (line {dec.line:,}).")


def read_jsonl(inp: Input, columns: Sequence[str] | None, options: ReadOptions) -> EncodedTable:
    """Rows of JSON objects as text columns (only ``columns`` encoded when given)."""
    if b"\x00" in inp.head:
        raise UserInputError(f"{inp.label} looks binary, not UTF-8 text; use JSON lines, CSV, TSV or Parquet.")
    dec = _Decoder(inp.label)
    start = inp.head.lstrip(b"\xef\xbb\xbf \t\r\n")
    rows: Callable[[Input, _Decoder], Iterator[tuple[int, dict[str, Any]]]] = (
        _array if start.startswith(b"[") else _lines
    )
    names: list[str] = []
    encoders: dict[str, Encoder] = {}
    budget = Budget(inp.label, options, 1)
    chunk: list[tuple[int, dict[str, Any]]] = []
    wanted = None if columns is None else {c.strip() if options.strip_whitespace else c for c in columns}
    for line, obj in rows(inp, dec):
        if not isinstance(obj, dict):
            kind = "a list" if isinstance(obj, list) else "a single value"
            raise UserInputError(f"{inp.label} line {line:,} holds {kind}, not a JSON object of column: value pairs.")
        chunk.append((line, obj))
        if len(chunk) >= _CHUNK_ROWS:
            _flush(chunk, names, encoders, budget, (inp.label, wanted))
    _flush(chunk, names, encoders, budget, (inp.label, wanted))
    if not names:
        raise UserInputError(f"{inp.label} holds no JSON objects: it is empty or only blank lines.")
    checked = check_names(names, inp.label, options)
    table = EncodedTable(inp.label, checked, n_rows=budget.rows)
    for raw, name in zip(names, checked):
        if raw in encoders:
            table.columns[name] = encoders[raw].finish(budget.rows, options)
    return table


def _flush(
    chunk: list[tuple[int, dict[str, Any]]],
    names: list[str],
    encoders: dict[str, Encoder],
    budget: Budget,
    where: tuple[str, set[str] | None],
) -> None:
    """Encode a chunk of rows (new keys become new columns; absent keys are missing) and empty it."""
    if not chunk:
        return
    label, wanted = where
    known = set(names)
    for _, obj in chunk:
        for key in obj:
            if key not in known:
                known.add(key)
                names.append(key)
    for key in names:
        if wanted is not None and key not in wanted and key.strip() not in wanted:
            continue
        values = [_cell(obj.get(key), key, line, label) for line, obj in chunk]
        if all(v is None for v in values):
            continue
        encoders.setdefault(key, Encoder()).add(budget.rows, pa.array(values, type=pa.string()))
    budget.n_columns = max(len(names), 1)
    budget.add(len(chunk))
    chunk.clear()
