"""The optional time column of the responses: when each response was given, as a timestamp or a batch/round number.

A time column is read like the other optional columns (``confidence``, ``sequence``/``position``): every distinct
value is parsed once.  Accepted values (docs/DATA.md):

* numbers (``3``, ``12.5``): batch, round or any ordered number, kept as numbers; whole numbers from 10⁹ to
  4.1·10⁹ are read as Unix epoch seconds and from 10¹² to 4.1·10¹² as epoch milliseconds (2001–2099; no batch
  counter is that large);
* ISO 8601 dates and timestamps (``2026-10-03``, ``2026-10-03 14:05``, ``2026-10-03T14:05:00Z``,
  ``…+02:00``): converted to UTC (a time without an offset is read as UTC); Parquet and DataFrame date/time
  columns arrive as ISO text (docs/DATA.md) and are read the same way.

Anything else (``03/10/2026``, ``yesterday``, a mix of numbers and dates) is refused with one
:class:`~fusion_core.errors.UserInputError` naming the value and its row; so is an empty time cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import numpy as np
import pandas as pd

from fusion_core.data.text import NUMBER, show_value, text_values
from fusion_core.errors import UserInputError

EPOCH_SECONDS = (1e9, 4.1e9)
EPOCH_MILLISECONDS = (1e12, 4.1e12)
TimeKind = Literal["timestamp", "number"]


@dataclass(frozen=True, eq=False)
class TimeColumn:
    """One time per response: ``values`` are seconds since 1970-01-01 UTC (``kind`` ``timestamp``) or the numbers
    as given (``kind`` ``number``: batches, rounds); ``name`` is the user's column name."""

    values: np.ndarray
    kind: TimeKind
    name: str

    def take(self, index: np.ndarray) -> TimeColumn:
        """The times of the responses selected by a mask or an index array."""
        return TimeColumn(np.asarray(self.values)[index], self.kind, self.name)

    def display(self, values: np.ndarray | None = None) -> pd.Series:
        """Times for tables and downloads: UTC datetimes for timestamps, the numbers otherwise."""
        v = np.asarray(self.values if values is None else values, dtype=float)
        if self.kind == "timestamp":
            return pd.Series(pd.to_datetime(np.round(v * 1e3).astype(np.int64), unit="ms", utc=True))
        return pd.Series(v)

    def show(self, value: float, *, span: float | None = None) -> str:
        """One time in plain words: ``3 Oct 2026`` (with the hour when the data span less than 3 days) or
        ``batch 12`` style (the column name, then the number)."""
        if not np.isfinite(value):
            return "unknown time"
        if self.kind == "timestamp":
            t = datetime.fromtimestamp(float(value), UTC)
            day = f"{t.day} {t.strftime('%b %Y')}"
            return f"{day} {t.strftime('%H:%M')} UTC" if span is not None and span < 3 * 86400 else day
        number = f"{value:g}" if float(value) != int(value) or abs(value) >= 1e15 else str(int(value))
        return f"{self.name} {number}"


def _rows(positions: np.ndarray, limit: int = 5) -> str:
    shown = ", ".join(str(int(p) + 1) for p in positions[:limit])
    more = f" and {len(positions) - limit:,} more" if len(positions) > limit else ""
    return ("row " if len(positions) == 1 else "rows ") + shown + more


def parse_times(codes: np.ndarray, values: pd.Index, rows: np.ndarray | None, name: str) -> TimeColumn:
    """The time column (``codes`` into its distinct ``values``, −1 = empty) as a :class:`TimeColumn`; ``rows`` are
    the table positions of the codes (for messages).  Parses each distinct value once (module docstring)."""
    positions = np.arange(len(codes)) if rows is None else rows
    blank = codes < 0
    if blank.any():
        raise UserInputError(
            f"time column {show_value(name)} is empty in {_rows(positions[blank])}; give every response a time "
            "(a date, a timestamp or a batch number) or drop those rows."
        )
    kind: TimeKind = "number"
    if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype):
        per_value = values.to_numpy(dtype=float)
        bad = ~np.isfinite(per_value)
    else:
        text = pd.Series(text_values(values)).str.strip()
        plain = text.str.fullmatch(NUMBER).fillna(False).to_numpy(dtype=bool)
        if plain.all():
            per_value = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
            bad = ~np.isfinite(per_value)
        else:
            stamps = pd.to_datetime(text.where(~pd.Series(plain)), errors="coerce", utc=True, format="ISO8601")
            dated = stamps.notna().to_numpy()
            if plain.any() and not dated.any():  # numbers and some text that is no date: the text is wrong
                per_value = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
                bad = ~plain | ~np.isfinite(per_value)
            else:  # dates (and any numbers among them are wrong)
                kind = "timestamp"
                per_value = np.where(dated, stamps.to_numpy(dtype="datetime64[ns]").astype(np.int64) / 1e9, np.nan)
                bad = ~dated
    used_bad = bad[codes]
    if used_bad.any():
        first = values[codes[int(np.argmax(used_bad))]]
        raise UserInputError(
            f"time column {show_value(name)} holds {show_value(first)} in {_rows(positions[used_bad])}, which is not "
            "a time; write every time the same way: all ISO 8601 dates or timestamps (2026-10-03, "
            "2026-10-03T14:05:00Z) or all finite numbers (a batch or round number, epoch seconds)."
        )
    if kind == "number":
        used = per_value[np.unique(codes)]
        whole = bool((np.floor(used) == used).all())
        if whole and len(used) and used.min() >= EPOCH_SECONDS[0] and used.max() < EPOCH_SECONDS[1]:
            kind = "timestamp"
        elif whole and len(used) and used.min() >= EPOCH_MILLISECONDS[0] and used.max() < EPOCH_MILLISECONDS[1]:
            kind, per_value = "timestamp", per_value / 1e3
    return TimeColumn(per_value[codes].astype(float), kind, str(name))


__all__ = ["TimeColumn", "parse_times"]
