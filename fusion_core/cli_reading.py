"""The command line's reading options (``--missing``, ``--strip-whitespace``, ``--max-mb``) as the loaders' keyword
arguments: one definition for every sub-command that reads files (``fit``, ``report``, ``agreement``, ``numeric``)."""

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
