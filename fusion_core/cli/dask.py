"""``fusion-core fit --engine dask``: Dawid–Skene, one-coin DS and majority vote on a Dask cluster
(:mod:`fusion_core.engines.dask`), with the same output files as the in-memory fit except the posteriors, which
are partitioned Parquet (``<out>/posteriors/``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from fusion_core.data.export import output_dir, write_table, write_text
from fusion_core.errors import UserInputError

UNSUPPORTED = {
    "gold": "--gold",
    "graph": "--graph",
    "context": "--context",
    "sequence_col": "--sequence-col",
    "position_col": "--position-col",
    "confidence_col": "--confidence-col",  # the engine's E- and M-steps count whole responses
}


def fit_dask(args: argparse.Namespace, params: dict[str, Any], reading: dict[str, Any]) -> int:
    """Fit ``args.method`` on the Dask engine and write labels, posteriors, confusion, workers and summary."""
    from fusion_core.engines.dask import fit

    used = [flag for name, flag in UNSUPPORTED.items() if getattr(args, name, None)]
    if used or args.layout != "long" or args.duplicates != "keep":
        extra = used + (["--layout wide"] if args.layout != "long" else [])
        extra += [f"--duplicates {args.duplicates}"] if args.duplicates != "keep" else []
        raise UserInputError(
            f"the Dask engine reads long-format responses only and does not take {', '.join(extra)}; "
            "fit without --engine dask for those."
        )
    out = output_dir(args.out)
    options: dict[str, Any] = {
        "output": str(out / "posteriors"),
        "scheduler": args.scheduler,
        "cache": args.cache,
        "task": args.task_col or "task",
        "worker": args.worker_col or "worker",
        "label": args.label_col or "label",
        "format": args.input_format,
        "na_values": reading["na_values"],
        "strip_whitespace": reading["strip_whitespace"],
    }
    if args.scratch:
        options["scratch"] = args.scratch
    if args.partition_size is not None:  # 0 or less is refused by the engine, not ignored
        options["partition_size"] = args.partition_size
    result = fit(args.answers, args.method, params=params, **options)
    escape = not args.no_escape_formulas
    write_table(
        result.annotator_table(),
        out,
        "workers",
        format=args.format,
        escape_formulas=escape,
    )
    confusion = result.confusion_table()
    if confusion is not None:
        write_table(confusion, out, "confusion", format=args.format, escape_formulas=escape)
    summary = result.summary()
    write_text(out / "summary.json", json.dumps(summary, indent=2))
    for w in summary.get("warnings", []):
        print(f"warning: {w}", file=sys.stderr)
    print(
        f"{args.method} on the Dask engine: {summary.get('iterations', 0)} iterations, "
        f"converged={summary.get('converged')}; posteriors and labels -> {out / 'posteriors'} (partitioned Parquet)"
    )
    return 0


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """The ``fit`` options that choose and configure the engine."""
    parser.add_argument(
        "--engine",
        choices=["memory", "dask"],
        default="memory",
        help="'dask' fits ds, ds1 or mv on a Dask cluster (install fusion_core[dask])",
    )
    parser.add_argument(
        "--scheduler", default=None, help="Dask scheduler address (tcp://host:8786); default: a local cluster"
    )
    parser.add_argument(
        "--scratch",
        default=None,
        help="where the Dask engine keeps coded partitions (a path or URL every worker can reach)",
    )
    parser.add_argument("--partition-size", type=int, default=None, help="responses per partition (Dask engine)")
    parser.add_argument(
        "--cache",
        choices=["disk", "memory"],
        default="disk",
        help="Dask engine: re-read coded partitions each iteration (disk) or keep them on the workers",
    )
