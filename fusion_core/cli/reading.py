"""The command line's reading options (``--input-format``, ``--field``, ``--missing``, ``--strip-whitespace``,
``--max-mb``) as the loaders' keyword arguments: one definition for every sub-command that reads files (``fit``,
``report``, ``agreement``, ``numeric``; the formats and their help come from the registry,
:mod:`fusion_core.data.formats`); and the warnings of a fit printed as one line each (:func:`printed_warnings`);
``--time-col`` (when each response was given) for the sub-commands that read categorical answers."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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


def add_duplicates_option(parser: argparse.ArgumentParser) -> None:
    """``--duplicates``: what to do with repeated (task, worker) pairs (docs/DATA.md)."""
    parser.add_argument(
        "--duplicates",
        choices=["keep", "first", "last", "error"],
        default="keep",
        help="what to do with repeated (task, worker) pairs",
    )


def add_gold_options(p: argparse.ArgumentParser) -> None:
    """``--gold-task-col`` and ``--gold-truth-col``: the gold file's columns (default: guessed from their names)."""
    p.add_argument("--gold-task-col", default=None, help="gold file's task column (default: 'task', else guessed)")
    p.add_argument(
        "--gold-truth-col", default=None, help="gold file's truth column (default: 'truth', 'label', 'gold' … guessed)"
    )


def gold_columns(args: argparse.Namespace) -> dict[str, Any]:
    """The gold file's column options as :func:`~fusion_core.data.loading.read_gold` keywords."""
    return {"task": getattr(args, "gold_task_col", None), "label": getattr(args, "gold_truth_col", None)}


def add_format_options(f: argparse.ArgumentParser) -> None:
    """``--input-format`` (choices and help from the formats registry) and ``--field``."""
    from fusion_core.data.formats import format_names, formats_help

    f.add_argument(
        "--input-format",
        choices=format_names(),
        metavar="FORMAT",
        help=f"format of the answers file (default: detected from its name and content) — {formats_help()}",
    )
    f.add_argument(
        "--field",
        default=None,
        metavar="NAME",
        help="a labelling tool's export with several questions: the one to read (e.g. a Label Studio control name)",
    )


def read_answers_args(args: argparse.Namespace, **extra: Any) -> Any:
    """The answers file as :class:`~fusion_core.data.answers.Answers` (responses, gold and spans of a tool's
    export, what was read), with the shared input options; prints what was understood on stderr (the export's
    read report, or the guessed column mapping).  ``extra``: further keywords (sequence, position, confidence)."""
    from fusion_core.data.answers import read_answers

    answers = read_answers(
        args.answers,
        format=args.input_format,
        layout=getattr(args, "layout", "long"),
        task=args.task_col,
        worker=args.worker_col,
        label=getattr(args, "label_col", None),
        duplicates=getattr(args, "duplicates", "keep"),
        field=getattr(args, "field", None),
        time=getattr(args, "time_col", None),
        **extra,
        **reading_options(args),
    )
    for line in answers.lines():
        print(line, file=sys.stderr)
    return answers


def load_answers(args: argparse.Namespace, **extra: Any) -> Any:
    """The answers file as :class:`~fusion_core.data.responses.Responses` (see :func:`read_answers_args`)."""
    return read_answers_args(args, **extra).responses


@contextmanager
def printed_warnings(shown: Sequence[str] = ()) -> Iterator[list[str]]:
    """Warnings raised inside the block, printed once each on stderr as ``warning: <message>`` when it ends (never
    as Python's two-line warning with a file name); ``shown``: messages already printed.  Yields the list of
    messages, filled at the end."""
    messages: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield messages
    messages.extend(m for m in dict.fromkeys(str(w.message) for w in caught) if m not in shown)
    for m in messages:
        print(f"warning: {m}", file=sys.stderr)
