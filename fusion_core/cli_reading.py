"""The command line's reading options (``--missing``, ``--strip-whitespace``, ``--max-mb``) as the loaders' keyword
arguments: one definition for every sub-command that reads files (``fit``, ``report``, ``agreement``, ``numeric``);
and the warnings of a fit printed as one line each (:func:`printed_warnings`)."""

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
        **extra,
        **reading_options(args),
    )


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
