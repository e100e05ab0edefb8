"""The command line's reading options (``--missing``, ``--strip-whitespace``, ``--max-mb``) as the loaders' keyword
arguments: one definition for every sub-command that reads files (``fit``, ``report``, ``agreement``, ``numeric``);
``--time-col`` (when each response was given) for the sub-commands that read categorical answers."""

from __future__ import annotations

import argparse
from typing import Any


def reading_options(args: argparse.Namespace) -> dict[str, Any]:
    """``max_bytes``, ``na_values`` and ``strip_whitespace`` for the answers file and the side inputs."""
    return {
        "max_bytes": int(args.max_mb * 1024 * 1024),
        "na_values": tuple(args.missing or ()),
        "strip_whitespace": args.strip_whitespace,
    }


def add_time_option(parser: argparse.ArgumentParser) -> None:
    """``--time-col``: the optional column with when each response was given (docs/DATA.md, *Time*)."""
    parser.add_argument(
        "--time-col",
        default=None,
        help="when each response was given: ISO 8601 date/timestamp, epoch seconds or a batch/round number; "
        "adds reliability over time (who got better or worse, and when)",
    )


def load_answers(args: argparse.Namespace, **extra: Any) -> Any:
    """The answers file as :class:`~fusion_core.data.responses.Responses`, read with the shared input options
    (format, layout, column names, duplicates policy, reading options); ``extra``: further ``load_responses``
    keywords of one sub-command (sequence, position, confidence columns)."""
    from fusion_core.data.loading import load_responses

    return load_responses(
        args.answers,
        format=args.input_format,
        layout=args.layout,
        task=args.task_col,
        worker=args.worker_col,
        label=args.label_col,
        duplicates=args.duplicates,
        time=getattr(args, "time_col", None),
        **extra,
        **reading_options(args),
    )
