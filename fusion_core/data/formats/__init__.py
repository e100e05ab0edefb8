"""The one registry of input formats: plain tables (CSV, TSV, Parquet, JSON lines) and the exports of labelling
tools (Label Studio, MTurk, Toloka, Argilla / Hugging Face, Prodigy, doccano).

A format is one module of this package with one :func:`register_format` call: its name, file extensions, a
content rule for detection, its help text, and its reader.  Everything that lists formats derives the list from
here — ``read_table``/``load_responses`` (:mod:`fusion_core.data.formats.dispatch`), the command line's
``--input-format`` choices and help, the app's upload box and the Dask ingest — and ``tests/test_formats.py``
checks that every consumer lists every format.  Adding a format is one file.
"""

from __future__ import annotations

import functools
import importlib
import json
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fusion_core.errors import UserInputError

if TYPE_CHECKING:
    from fusion_core.data.formats.export import ExportRead
    from fusion_core.data.readers import EncodedTable, Input, ReadOptions


@dataclass(frozen=True)
class Sniff:
    """What detection may look at: the file name, its extension (lower case, with the dot) and its first bytes
    (at most 64 KiB; nothing else of the file is read before a format is chosen)."""

    name: str
    head: bytes
    parquet_names: tuple[str, ...] = ()
    """A Parquet file's column names (from its footer, read by the dispatcher; the head holds no schema)."""

    @property
    def ext(self) -> str:
        return Path(self.name).suffix.lower() if self.name else ""

    @functools.cached_property
    def text(self) -> str:
        return self.head.lstrip(b"\xef\xbb\xbf").decode("utf-8", errors="replace")

    @functools.cached_property
    def first_line(self) -> str:
        return self.text.lstrip(" \t\r\n").split("\n", 1)[0].rstrip("\r")

    def header(self, delimiter: str) -> list[str]:
        """The first line split at ``delimiter`` (quotes stripped): enough to recognise a tool's column names."""
        return [c.strip().strip('"') for c in self.first_line.split(delimiter)]

    @functools.cached_property
    def first_object(self) -> dict[str, Any] | None:
        """The first JSON object of a JSON-lines file or of a JSON array, when it fits in the head, else None."""
        start = self.text.lstrip(" \t\r\n")
        try:
            if start.startswith("["):
                obj, _ = json.JSONDecoder().raw_decode(start[1:].lstrip(" \t\r\n"))
            elif start.startswith("{"):
                obj, _ = json.JSONDecoder().raw_decode(start)
            else:
                return None
        except (ValueError, RecursionError):
            return None
        return obj if isinstance(obj, dict) else None


@dataclass(frozen=True)
class FormatInfo:
    """One input format.  ``kind`` is ``"table"`` (a table of responses, long or wide, read as text) or
    ``"export"`` (a labelling tool's export, turned into responses, gold and a :class:`ReadReport`).
    ``extensions`` are the file names it is read from (the app's upload box accepts them); ``detect`` recognises
    its content (tool exports are tried before the plain tables, whose ``detect`` is the fallback by extension);
    ``options`` names the options the reader understands (``field``: which question of an export to read);
    ``dask``: the Dask engine reads it."""

    name: str
    title: str
    kind: str
    extensions: tuple[str, ...]
    help: str
    detect: Callable[[Sniff], bool]
    read_table: Callable[[Input, Any, ReadOptions], EncodedTable] | None = None
    read_export: Callable[..., ExportRead] | None = None
    options: tuple[str, ...] = ()
    dask: bool = False
    example: str = ""
    aliases: tuple[str, ...] = field(default=())


_REGISTRY: dict[str, FormatInfo] = {}


def register_format(info: FormatInfo) -> FormatInfo:
    """Declare a format (once, at import of its module)."""
    if info.kind not in ("table", "export"):
        raise ValueError(f"format kind must be 'table' or 'export', got {info.kind!r}")
    if info.name in _REGISTRY and _REGISTRY[info.name] is not info:
        raise ValueError(f"format {info.name!r} is registered twice")
    if (info.read_table is None) == (info.read_export is None):
        raise ValueError(f"format {info.name!r} needs exactly one reader")
    _REGISTRY[info.name] = info
    return info


@functools.cache
def _load_all() -> None:
    """Import every module of this package (each registers its format)."""
    for mod in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
        importlib.import_module(mod.name)


def available_formats() -> list[FormatInfo]:
    """Every registered format: plain tables first, then the tools' exports, each group by name."""
    _load_all()
    return sorted(_REGISTRY.values(), key=lambda f: (f.kind != "table", f.name))


def format_names() -> list[str]:
    """The names accepted by ``format=`` and ``--input-format``."""
    return [f.name for f in available_formats()]


def format_info(name: str) -> FormatInfo:
    """The entry of format ``name`` (or one of its aliases); an unknown name lists the known ones."""
    _load_all()
    key = str(name).lower()
    for f in _REGISTRY.values():
        if key == f.name or key in f.aliases:
            return f
    raise UserInputError(f"unknown format {name!r}; use one of {', '.join(format_names())}.")


def upload_types() -> list[str]:
    """File extensions (without the dot) the app's upload box accepts: those of every format."""
    return sorted({e.lstrip(".") for f in available_formats() for e in f.extensions})


def dask_formats() -> tuple[str, ...]:
    """Formats the Dask engine reads."""
    return tuple(f.name for f in available_formats() if f.dask)


def formats_help() -> str:
    """One line per format for ``--input-format`` help and the docs."""
    return "; ".join(f"{f.name}: {f.title}" for f in available_formats())


def detect(sniff: Sniff) -> FormatInfo:
    """The format of a file: a tool's export when its content says so, else a table by extension, else by content
    (Parquet magic, a JSON object, tabs or commas in the first line)."""
    formats = available_formats()
    for f in formats:
        if f.kind == "export" and f.detect(sniff):
            return f
    for f in formats:
        if f.kind == "table" and sniff.ext in f.extensions:
            return f
    for f in formats:
        if f.kind == "table" and f.detect(sniff):
            return f
    return format_info("csv")


__all__ = [
    "FormatInfo",
    "Sniff",
    "available_formats",
    "dask_formats",
    "detect",
    "format_info",
    "format_names",
    "formats_help",
    "register_format",
    "upload_types",
]
