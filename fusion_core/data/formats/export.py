"""What a labelling tool's export reader returns, and the helpers the readers share.

:class:`ExportRead` holds the responses as a long table (``task``, ``worker``, ``label``; ``sequence`` and
``position`` too when the labels are spans turned into token sequences), the gold labels the export flags, the
spans themselves (for span agreement) and a :class:`ReadReport`: what was read, what was left out and why, and
which fields of the export became task, annotator and label.  Ids and labels are text exactly as written (numbers
keep their text: JSON is parsed with ``parse_int=str``).  Nothing is evaluated or unpickled; JSON documents are
parsed only within the size limit, and nesting too deep for the parser is one :class:`UserInputError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from fusion_core.data.readers import Input, ReadOptions, not_utf8
from fusion_core.data.spans import SpanTable
from fusion_core.data.text import format_size, show_value
from fusion_core.errors import UserInputError

JSON_SHARE = 4
"""A JSON document parsed whole (Label Studio, doccano arrays) may use at most this share of the size limit
(``max_bytes / 4``): its Python objects take about ten times the text, so memory stays within ~2.5× the limit."""


@dataclass(frozen=True)
class ReadReport:
    """What a tool reader understood.  ``records``: annotations (or rows) seen; ``responses``: responses kept;
    the counts say what was left out and why; ``mapping``: (role, the export's field) pairs; ``notes``: other
    plain sentences (which question was read, how answers were joined)."""

    format: str
    records: int
    responses: int
    tasks: int = 0
    skipped: int = 0
    cancelled: int = 0
    drafts: int = 0
    rejected: int = 0
    repeated: int = 0
    gold: int = 0
    empty: int = 0
    mapping: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """The report in plain sentences (the CLI prints them; the app shows them as the preview)."""
        out = [f"read the {self.format} export: {self.records:,} annotations, {self.responses:,} responses kept."]
        if self.mapping:
            out.append("mapping: " + ", ".join(f"{role} <- {show_value(src)}" for role, src in self.mapping) + ".")
        left = [
            (self.skipped, "skipped"),
            (self.cancelled, "cancelled"),
            (self.drafts, "drafts (not submitted)"),
            (self.rejected, "rejected"),
            (self.repeated, "earlier annotations replaced by the same person's later one"),
            (self.empty, "without an answer to the question read"),
        ]
        shown = [f"{n:,} {what}" for n, what in left if n]
        if shown:
            out.append("left out: " + "; ".join(shown) + ".")
        if self.gold:
            out.append(f"gold: {self.gold:,} tasks carry a ground-truth answer (used as gold labels).")
        return out + list(self.notes)


@dataclass
class ExportRead:
    """A tool's export read: long ``table`` of text (task, worker, label[, sequence, position]), ``gold`` by task,
    ``spans`` (NER-style exports), the :class:`ReadReport`."""

    format: str
    table: pd.DataFrame
    report: ReadReport
    gold: pd.Series | None = None
    spans: SpanTable | None = None
    control: tuple[str, str, str] | None = None
    """Label Studio: (from_name, to_name, type) of the question read, for predictions sent back to the tool."""

    @property
    def sequences(self) -> bool:
        return "sequence" in self.table.columns


@dataclass
class Collector:
    """Rows of responses and gold labels gathered by a reader, with the counts of what was left out."""

    format: str
    rows: list[tuple[str, str, str]] = field(default_factory=list)
    frame: pd.DataFrame | None = None
    """Responses given at once as a table (task, worker, label; text or categorical of text), after ``rows``."""
    gold: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    records: int = 0

    def add(self, task: str, worker: str, label: str) -> None:
        self.rows.append((task, worker, label))

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    def finish(
        self,
        mapping: Sequence[tuple[str, str]],
        notes: Sequence[str] = (),
        spans: SpanTable | None = None,
    ) -> ExportRead:
        """The :class:`ExportRead`; the last answer of a person to a task wins (earlier ones are counted)."""
        if spans is not None:
            table = spans.token_table()
        else:
            table = pd.DataFrame(self.rows, columns=["task", "worker", "label"], dtype=object)
            if self.frame is not None:
                table = self.frame if table.empty else pd.concat([table, self.frame.astype(object)], ignore_index=True)
            before = len(table)
            table = table.drop_duplicates(subset=["task", "worker"], keep="last").reset_index(drop=True)
            self.count("repeated", before - len(table))
        if spans is not None:
            self.count("repeated", spans.repeated)
        if table.empty:
            raise UserInputError(
                f"the {self.format} export has no usable annotation ({self._left_out() or 'it is empty'}); "
                "export the completed annotations."
            )
        gold = pd.Series(self.gold, name="truth", dtype=object) if self.gold else None
        if gold is not None:
            gold.index.name = "task"
        c = self.counts
        report = ReadReport(
            format=self.format,
            records=self.records,
            responses=int(spans.n_annotations if spans is not None else len(table)),
            tasks=int(table["sequence" if spans is not None else "task"].nunique()),
            skipped=c.get("skipped", 0),
            cancelled=c.get("cancelled", 0),
            drafts=c.get("drafts", 0),
            rejected=c.get("rejected", 0),
            repeated=c.get("repeated", 0),
            gold=len(self.gold),
            empty=c.get("empty", 0),
            mapping=tuple(mapping),
            notes=tuple(notes),
        )
        return ExportRead(self.format, table, report, gold, spans)

    def _left_out(self) -> str:
        return ", ".join(f"{n:,} {k}" for k, n in self.counts.items() if n)


def text_of(value: Any) -> str | None:
    """A scalar JSON value as text (numbers were parsed as their text); None for null and empty text."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return None
    out = str(value)
    return out if out != "" else None


def _decoder() -> json.JSONDecoder:
    return json.JSONDecoder(parse_int=str, parse_float=str, parse_constant=str)


def _json_error(inp: Input, exc: ValueError, what: str) -> UserInputError:
    if isinstance(exc, json.JSONDecodeError):
        return UserInputError(
            f"{inp.label} is not valid {what} (line {exc.lineno:,}, column {exc.colno:,}: {exc.msg}); the file may "
            "be cut short — export it again."
        )
    return UserInputError(f"{inp.label} is not valid {what}: {exc}.")


def _text(inp: Input) -> str:
    try:
        return inp.read_all().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise not_utf8(inp) from None


def load_json(inp: Input, options: ReadOptions, what: str) -> Any:
    """A whole JSON document, within ``max_bytes / JSON_SHARE``; numbers as their text."""
    limit = max(options.max_bytes // JSON_SHARE, 1 << 20)
    if inp.size > limit:
        raise UserInputError(
            f"{inp.label} ({format_size(inp.size)}) is over the {format_size(limit)} a whole-document {what} may "
            "take (a quarter of the size limit); raise the limit (max_bytes, --max-mb) or export JSON lines."
        )
    try:
        return _decoder().decode(_text(inp))
    except RecursionError:
        raise UserInputError(f"{inp.label} is nested too deeply to be a {what}; export it again.") from None
    except ValueError as exc:
        raise _json_error(inp, exc, what) from None


def json_lines(inp: Input, what: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of a JSON-lines file, blank lines skipped; a line that is not an object is refused."""
    dec = _decoder()
    with inp.binary() as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8").strip()
            except UnicodeDecodeError:
                raise not_utf8(inp) from None
            if not line:
                continue
            try:
                obj = dec.decode(line)
            except RecursionError:
                raise UserInputError(f"line {number:,} of {inp.label} is nested too deeply; export it again.") from None
            except ValueError as exc:
                raise UserInputError(
                    f"line {number:,} of {inp.label} is not valid JSON ({getattr(exc, 'msg', exc)}); a {what} has one "
                    "JSON object per line — the file may be cut short."
                ) from None
            if not isinstance(obj, dict):
                raise UserInputError(f"line {number:,} of {inp.label} is not a JSON object; a {what} has one per line.")
            yield number, obj


def need_list(value: Any, what: str, inp: Input) -> list[Any]:
    """A JSON value that must be a list (of tasks, annotations, results)."""
    if not isinstance(value, list):
        raise UserInputError(f"{inp.label}: {what} must be a JSON list; got {type(value).__name__}.")
    return value


def choose_field(candidates: Sequence[str], wanted: str | None, what: str, inp: Input) -> str:
    """The question (field) to read: ``wanted`` when given (and present), the only candidate, or an error listing
    the candidates."""
    if wanted is not None:
        if wanted not in candidates:
            raise UserInputError(
                f"{inp.label} has no {what} {show_value(wanted)}; it has {', '.join(map(show_value, candidates))}."
            )
        return wanted
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise UserInputError(f"{inp.label} has no {what} to read as labels.")
    raise UserInputError(
        f"{inp.label} has several {what}s ({', '.join(map(show_value, candidates))}); choose one with "
        "--field NAME (field= in the library)."
    )
