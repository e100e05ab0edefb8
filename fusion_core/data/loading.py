"""Reading user files: CSV, TSV, Parquet, JSON lines — long or wide — with clear messages.

Sources may be a path, raw bytes, or a file-like object with a ``.name`` (e.g. a Streamlit upload).
Nothing here ever unpickles or evaluates user content: text formats go through pandas' parsers,
Parquet through pyarrow.
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError

FORMATS = ("csv", "tsv", "parquet", "jsonl")
DEFAULT_MAX_BYTES = 200 * 1024 * 1024
_EXT = {
    ".csv": "csv",
    ".txt": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}

Source = str | os.PathLike | bytes | BinaryIO


def _read_bytes(source: Source, max_bytes: int | None) -> tuple[bytes, str]:
    """(content, name) from a path, bytes or file-like, enforcing the size limit before reading it all."""
    limit = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), ""
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise UserInputError(f"file not found: {path}")
        size = path.stat().st_size
        if size > limit:
            raise UserInputError(f"{path.name} is {size / 1e6:,.1f} MB, over the {limit / 1e6:,.1f} MB limit.")
        data, name = path.read_bytes(), path.name
    elif hasattr(source, "read"):
        name = str(getattr(source, "name", "") or "")
        size = getattr(source, "size", None)
        if size is not None and size > limit:
            raise UserInputError(
                f"{name or 'the upload'} is {size / 1e6:,.1f} MB, over the {limit / 1e6:,.1f} MB limit."
            )
        if hasattr(source, "seek"):
            try:
                source.seek(0)
            except (OSError, ValueError):
                pass
        data = source.read(limit + 1)
        if isinstance(data, str):
            data = data.encode("utf-8")
    else:
        raise UserInputError(f"cannot read responses from a {type(source).__name__}; give a file path or bytes.")
    if len(data) > limit:
        raise UserInputError(f"{name or 'the input'} is over the {limit / 1e6:,.1f} MB limit.")
    if len(data) == 0:
        raise UserInputError(f"{name or 'the file'} is empty (0 bytes).")
    return data, name


def detect_format(name: str, data: bytes) -> str:
    """Format from the file extension, falling back to content sniffing."""
    ext = Path(name).suffix.lower() if name else ""
    if ext in _EXT:
        return _EXT[ext]
    if data[:4] == b"PAR1":
        return "parquet"
    head = data[:4096].lstrip()
    if head.startswith(b"{"):
        return "jsonl"
    first_line = head.split(b"\n", 1)[0]
    return "tsv" if first_line.count(b"\t") > first_line.count(b",") else "csv"


def _decode(data: bytes, name: str) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserInputError(
            f"{name or 'the file'} is not UTF-8 text (byte 0x{data[exc.start]:02x} at position {exc.start:,}); "
            "re-save it as UTF-8 CSV, or upload Parquet."
        ) from None
    if "\x00" in text[:65536]:
        raise UserInputError(
            f"{name or 'the file'} looks binary, not a text table; upload CSV, TSV, JSON lines or Parquet."
        )
    return text


def read_table(
    source: Source, *, name: str | None = None, format: str | None = None, max_bytes: int | None = None
) -> pd.DataFrame:
    """Read a table from CSV / TSV / Parquet / JSON lines; every failure is a :class:`UserInputError`."""
    data, found_name = _read_bytes(source, max_bytes)
    name = name or found_name
    fmt = (format or detect_format(name, data)).lower()
    if fmt not in FORMATS:
        raise UserInputError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
    label = name or "the file"
    try:
        if fmt == "parquet":
            if data[:4] != b"PAR1":
                raise UserInputError(f"{label} is not a Parquet file (no PAR1 header).")
            df = pd.read_parquet(io.BytesIO(data), engine="pyarrow")
        else:
            text = _decode(data, name)
            if not text.strip():
                raise UserInputError(f"{label} contains only whitespace: no header, no rows.")
            if fmt == "jsonl":
                stripped = text.lstrip()
                df = pd.read_json(io.StringIO(text), lines=not stripped.startswith("["))
            else:
                with warnings.catch_warnings():  # a row longer than the header would silently lose data
                    warnings.simplefilter("error", pd.errors.ParserWarning)
                    df = pd.read_csv(
                        io.StringIO(text),
                        sep="\t" if fmt == "tsv" else ",",
                        skipinitialspace=True,
                        index_col=False,
                        on_bad_lines="error",
                    )
    except UserInputError:
        raise
    except pd.errors.EmptyDataError:
        raise UserInputError(f"{label} has no columns: it is empty or only blank lines.") from None
    except Exception as exc:  # parser errors from pandas / pyarrow: say which file and why, in one line
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserInputError(f"could not read {label} as {fmt.upper()}: {msg}") from None
    df.columns = [str(c).strip() for c in df.columns]
    if df.columns.duplicated().any():
        dup = sorted({c for c in df.columns[df.columns.duplicated()]})
        raise UserInputError(f"{label} repeats column name(s) {dup}; column names must be unique.")
    if df.shape[1] == 0:
        raise UserInputError(f"{label} has no columns.")
    return df


def load_responses(
    source: Source | pd.DataFrame,
    *,
    name: str | None = None,
    format: str | None = None,
    layout: str = "long",
    task: str = "task",
    worker: str = "worker",
    label: str = "label",
    sequence: str | None = None,
    position: str | None = None,
    classes: Sequence[Any] | None = None,
    duplicates: str = "keep",
    max_bytes: int | None = None,
    confidence: str | None = None,
) -> Responses:
    """Read and validate responses.  ``layout='long'`` (one row per response; crowd-kit columns by
    default) or ``'wide'`` (one row per item, one column per annotator, blanks = missing; ``task`` names
    the item-id column, or the first column is used when ``task`` is not a column).  ``confidence`` names an
    optional per-response confidence column (long layout only; see :attr:`Responses.weight`)."""
    df = (
        source
        if isinstance(source, pd.DataFrame)
        else read_table(source, name=name, format=format, max_bytes=max_bytes)
    )
    if layout == "long":
        return Responses.from_frame(
            df,
            task=task,
            worker=worker,
            label=label,
            sequence=sequence,
            position=position,
            classes=classes,
            duplicates=duplicates,
            confidence=confidence,
        )
    if layout == "wide":
        if confidence is not None:
            raise UserInputError("a confidence column needs the long layout (one row per response); use layout='long'.")
        item_col = task if task in df.columns else df.columns[0]
        return Responses.from_wide(df, task=item_col, classes=classes)
    raise UserInputError(f"layout must be 'long' or 'wide', got {layout!r}.")


def read_gold(
    source: Source | pd.DataFrame,
    *,
    name: str | None = None,
    task: str = "task",
    label: str | None = None,
    max_bytes: int | None = None,
) -> pd.Series:
    """Gold labels as a Series by task.  The label column is ``label`` if given, else 'truth', 'label'
    or 'gold' (first present)."""
    df = source if isinstance(source, pd.DataFrame) else read_table(source, name=name, max_bytes=max_bytes)
    if task not in df.columns:
        raise UserInputError(f"gold file has no '{task}' column; it has {list(df.columns)}.")
    if label is None:
        label = next((c for c in ("truth", "label", "gold") if c in df.columns), None)
        if label is None:
            raise UserInputError(f"gold file needs a 'truth' (or 'label'/'gold') column; it has {list(df.columns)}.")
    elif label not in df.columns:
        raise UserInputError(f"gold file has no '{label}' column; it has {list(df.columns)}.")
    gold = df[[task, label]].dropna()
    if gold[task].duplicated().any():
        dup = gold[task][gold[task].duplicated()].iloc[0]
        raise UserInputError(f"gold file gives task {dup!r} more than once; give one gold label per task.")
    return pd.Series(gold[label].to_numpy(), index=pd.Index(gold[task].to_numpy(), name="task"), name="truth")


def read_context(
    source: Source | pd.DataFrame,
    *,
    name: str | None = None,
    task: str = "task",
    column: str = "context",
    max_bytes: int | None = None,
) -> pd.Series:
    """A numeric context value per item as a Series by task (e.g. image resolution, text length)."""
    df = source if isinstance(source, pd.DataFrame) else read_table(source, name=name, max_bytes=max_bytes)
    for col in (task, column):
        if col not in df.columns:
            raise UserInputError(f"context file has no '{col}' column; it has {list(df.columns)}.")
    values = pd.to_numeric(df[column], errors="coerce")
    if values.isna().any():
        bad = df[column][values.isna()].iloc[0]
        raise UserInputError(f"context column '{column}' must be numeric; found {bad!r}.")
    ctx = pd.Series(values.to_numpy(), index=pd.Index(df[task].to_numpy(), name="task"), name=column)
    if ctx.index.duplicated().any():
        raise UserInputError(f"context gives task {ctx.index[ctx.index.duplicated()][0]!r} more than once.")
    return ctx
