"""Writing the tables users download — the one writer of the CLI and the app.

CSV opens in a spreadsheet as text and reads back exactly:

* every text field is quoted, so delimiters, quotes, CR and LF inside ids and labels are safe; numbers are written
  unquoted as the shortest text that reads back as the same number; missing values are empty;
* with ``escape_formulas`` (the default) a text value a spreadsheet would run as a formula — one starting with
  ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (OWASP's CSV-injection advice) — gets a leading ``'``; so
  does a value that itself starts with ``'``, which keeps reading back unambiguous: drop one leading ``'``
  (:func:`unescape_formula`, :func:`read_csv_export`).  A plain number written as text (``-1``, ``+2.5``, ``1e-3``)
  is not a formula and is left as it is; ``-1+2`` is escaped.  Column names follow the same rule.

Parquet keeps types (text as UTF-8 strings, numbers as numbers) and is never escaped: it is for programs.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from fusion_core.data.stages import stage
from fusion_core.data.text import NUMBER, plain_values, text_values
from fusion_core.errors import UserInputError

EXPORT_FORMATS = ("csv", "parquet")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet cell a formula (OWASP CSV injection)."""
_ESCAPE = r"^[=+\-@\t\r']"
_ESCAPE_BYTES = np.frombuffer("".join(FORMULA_START).encode() + b"'", dtype=np.uint8)
_PLAIN_NUMBER = f"^{NUMBER}$"

Target = str | os.PathLike | BinaryIO


def needs_escape(text: str) -> bool:
    """Whether ``text`` gets a leading ``'`` in a formula-safe CSV (see the module docs)."""
    import re

    return bool(text) and text[0] in (*FORMULA_START, "'") and not re.fullmatch(NUMBER, text)


def _first_bytes(values: pa.Array) -> np.ndarray:
    """The first byte of every value, read from the offsets and data buffers (0 for an empty value; a missing
    value may show any byte, so callers check their candidates again)."""
    _, offsets, data = values.buffers()[:3]
    out = np.zeros(len(values), dtype=np.uint8)
    if data is None or offsets is None or len(values) == 0:
        return out
    kind = np.int64 if pa.types.is_large_string(values.type) else np.int32
    bounds: np.ndarray = np.frombuffer(offsets, dtype=kind)[values.offset : values.offset + len(values) + 1]
    starts = bounds[:-1]
    filled = bounds[1:] > starts
    out[filled] = np.frombuffer(data, dtype=np.uint8)[starts[filled]]
    return out


def escape_formulas(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Text values with a leading ``'`` where a spreadsheet would see a formula (or a leading ``'``).

    Linear and cheap when nothing needs escaping: the first byte of every value is checked at once, and only the
    values starting with one of the formula characters (or ``'``) are matched against the number pattern."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if len(values) == 0:
        return values
    candidates = np.flatnonzero(np.isin(_first_bytes(values), _ESCAPE_BYTES))
    if len(candidates) == 0:
        return values
    some = values.take(pa.array(candidates))
    starts = pc.fill_null(pc.match_substring_regex(some, _ESCAPE), False)
    number = pc.fill_null(pc.match_substring_regex(some, _PLAIN_NUMBER), False)
    chosen = pc.and_(starts, pc.invert(number)).to_numpy(zero_copy_only=False)
    if not chosen.any():
        return values
    mask = np.zeros(len(values), dtype=bool)
    mask[candidates[chosen]] = True
    escaped = pc.utf8_replace_slice(some.filter(pa.array(chosen)), start=0, stop=0, replacement="'")
    return pc.replace_with_mask(values, pa.array(mask), escaped)


def unescape_formula(text: str) -> str:
    """A value read from a formula-safe CSV as it was before escaping (one leading ``'`` dropped)."""
    return text[1:] if text.startswith("'") else text


def _column(values: pd.Series, *, escape: bool) -> pa.Array:
    """One column for writing: numbers and booleans as they are, everything else as canonical text; a categorical
    column of text stays dictionary-encoded (its distinct values converted and escaped once)."""
    if isinstance(values.dtype, pd.CategoricalDtype) and _is_text(values.dtype.categories):
        categories = values.dtype.categories
        text = pa.array(text_values(categories), from_pandas=True).cast(pa.string())
        text = escape_formulas(text) if escape else text
        codes = np.asarray(values.cat.codes, dtype=np.int32)
        return pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), text)
    values = plain_values(values)
    if pd.api.types.is_bool_dtype(values.dtype) or pd.api.types.is_numeric_dtype(values.dtype):
        return pa.array(values.to_numpy(), from_pandas=True)
    if pd.api.types.is_string_dtype(values.dtype) and values.dtype != object:
        text = pa.array(values, from_pandas=True).cast(pa.string())
    else:
        text = pa.array(text_values(values), from_pandas=True).cast(pa.string())
    return escape_formulas(text) if escape else text


def _is_text(values: pd.Index) -> bool:
    """Whether distinct values are all text (a categorical of numbers is written as numbers)."""
    if pd.api.types.is_string_dtype(values.dtype) and values.dtype != object:
        return True
    return values.dtype == object and all(isinstance(v, str) for v in values)


def to_arrow(df: pd.DataFrame, *, escape: bool = False) -> pa.Table:
    """The columns of ``df`` (its index is not written: reset it first) as an Arrow table of text and numbers."""
    names = [str(n) for n in text_values(list(df.columns))]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise UserInputError(f"cannot write a table with two columns named {dup!r}.")
    if escape:
        names = [("'" + n) if needs_escape(n) else n for n in names]
    arrays = [_column(df.iloc[:, j], escape=escape) for j in range(df.shape[1])]
    return pa.Table.from_arrays(arrays, names=names)


def write_csv(df: pd.DataFrame, target: Target, *, escape_formulas: bool = True) -> None:
    """``df`` (columns only) as UTF-8 CSV to a path or binary file; see the module docs for quoting and escaping."""
    table = to_arrow(df, escape=escape_formulas)
    options = pcsv.WriteOptions(
        include_header=True, batch_size=1 << 16, quoting_style="needed", quoting_header="needed"
    )
    sink = str(target) if isinstance(target, (str, os.PathLike)) else target
    pcsv.write_csv(table, sink, write_options=options)


def write_parquet(df: pd.DataFrame, target: Target) -> None:
    """``df`` (columns only) as Parquet (text as UTF-8 strings, numbers as numbers; never escaped)."""
    sink = str(target) if isinstance(target, (str, os.PathLike)) else target
    table = to_arrow(df, escape=False)
    plain = [c.cast(pa.string()) if pa.types.is_dictionary(c.type) else c for c in table.columns]
    pq.write_table(pa.Table.from_arrays(plain, names=table.column_names), sink)


def output_dir(path: str | os.PathLike) -> Path:
    """The output directory ``path``, created if needed; a path that is a file, or a directory that cannot be
    created, is a :class:`UserInputError` (checked before any fitting, so no work is lost)."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise UserInputError(f"the output path {out} is a file, not a directory; give a directory for --out.")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserInputError(f"cannot create the output directory {out}: {exc.strerror or 'not allowed'}.") from None
    return out


def write_text(path: Path, text: str) -> None:
    """Write a small text file (``summary.json``); failures are a :class:`UserInputError` naming the file."""
    try:
        with stage("write", path.name):
            path.write_text(text)
    except OSError as exc:
        raise UserInputError(f"cannot write {path}: {exc.strerror or 'not allowed'}.") from None


def write_table(
    df: pd.DataFrame, directory: Path, stem: str, *, format: str = "csv", escape_formulas: bool = True
) -> Path:
    """Write ``df`` to ``directory/stem.csv`` or ``.parquet``; returns the path.  Output problems (no permission,
    a full disk) are a :class:`UserInputError` naming the file."""
    if format not in EXPORT_FORMATS:
        raise UserInputError(f"unknown output format {format!r}; use one of {', '.join(EXPORT_FORMATS)}.")
    path = Path(directory) / f"{stem}.{format}"
    try:
        with stage("write", f"{path.name} ({len(df):,} rows)"):
            if format == "csv":
                write_csv(df, path, escape_formulas=escape_formulas)
            else:
                write_parquet(df, path)
    except (OSError, pa.ArrowIOError) as exc:
        reason = getattr(exc, "strerror", None) or "it cannot be written"
        raise UserInputError(f"cannot write {path}: {reason}.") from None
    return path


def csv_bytes(df: pd.DataFrame, *, escape_formulas: bool = True) -> bytes:
    """``df`` (columns only) as formula-safe CSV bytes, e.g. for a download button."""
    buf = io.BytesIO()
    write_csv(df, buf, escape_formulas=escape_formulas)
    return buf.getvalue()


def parquet_bytes(df: pd.DataFrame) -> bytes:
    """``df`` (columns only) as Parquet bytes (raw values, for programs)."""
    buf = io.BytesIO()
    write_parquet(df, buf)
    return buf.getvalue()


def read_csv_export(source: str | os.PathLike | bytes) -> pd.DataFrame:
    """A CSV written by :func:`write_csv` read back as text (``str`` columns, empty cells NaN), formula escapes
    removed, so ids and labels come back exactly as they were given."""
    from fusion_core.data.loading import read_table

    table = read_table(source, name="export.csv", format="csv", max_bytes=1 << 40)
    out = pd.DataFrame(
        {unescape_formula(str(c)): plain_values(table[c]).map(unescape_formula, na_action="ignore") for c in table}
    )
    return out.astype("str") if len(out.columns) else out
