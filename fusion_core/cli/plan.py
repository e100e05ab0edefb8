"""``fusion-core plan``: fit a method to an answers file and write a re-labelling plan — which items to send for
more labels, to whom, the expected gain (:func:`fusion_core.diagnostics.plan.plan_relabel`)."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from fusion_core.cli.reading import add_duplicates_option, load_answers, reading_options
from fusion_core.data.export import write_table
from fusion_core.errors import UserInputError


def _side_table(path: str | None, columns: list[str], args: argparse.Namespace) -> pd.DataFrame | None:
    """A small side file (cost, capacity, exclusions) read as text with the shared reading options."""
    if not path:
        return None
    from fusion_core.data.loading import read_table

    table = read_table(path, **reading_options(args))
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise UserInputError(
            f"{Path(path).name} needs the column(s) {', '.join(missing)}; it has {', '.join(map(str, table.columns))}."
        )
    return pd.DataFrame({c: table[c].astype(str) for c in columns})


def _per_worker(path: str | None, column: str, args: argparse.Namespace) -> pd.Series | None:
    table = _side_table(path, ["worker", column], args)
    if table is None:
        return None
    values = pd.to_numeric(table[column], errors="coerce")
    if values.isna().any():
        raise UserInputError(f"every {column} in {Path(str(path)).name} must be a number.")
    return pd.Series(values.to_numpy(), index=pd.Index(table["worker"]))


def cmd_plan(args: argparse.Namespace) -> int:
    """Fit, plan and write ``plan`` (one row per item), ``assignments`` (one per response) and ``summary.json``."""
    from fusion_core.diagnostics.plan import plan_relabel
    from fusion_core.methods import create

    resp = load_answers(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = create(args.method).fit(resp)
    capacity: Any = _per_worker(args.capacity, "capacity", args)
    plan = plan_relabel(
        resp,
        est.result_,
        args.budget,
        target=args.target,
        cost=_per_worker(args.cost, "cost", args),
        capacity=capacity,
        exclude=_side_table(args.exclude, ["task", "worker"], args),
        max_per_item=args.max_per_item,
    )
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        escape = not args.no_escape_formulas
        write_table(plan.frame(), out, "plan", format=args.format, escape_formulas=escape)
        write_table(plan.assignments(), out, "assignments", format=args.format, escape_formulas=escape)
        (out / "summary.json").write_text(json.dumps({"method": est.result_.method, "plan": plan.to_dict()}, indent=2))
    except OSError as exc:
        raise UserInputError(f"cannot write to {out}: {exc.strerror or 'not allowed'}.") from None
    for line in resp.report.messages():
        print(line, file=sys.stderr)
    print(f"{plan.summary()} Plan -> {out / ('plan.' + args.format)}")
    return 0


def add_plan_command(sub: Any, add_io: Any) -> None:
    """The ``plan`` sub-command (``add_io`` adds the shared reading options)."""
    p = sub.add_parser("plan", help="which items to send for more labels, to whom, and the expected gain")
    p.add_argument("answers", help="CSV, TSV, Parquet or JSON-lines file of responses")
    p.add_argument("--out", required=True, help="output directory (plan, assignments, summary.json)")
    p.add_argument("--budget", type=float, required=True, help="extra labels to buy (cost units with --cost)")
    p.add_argument("--target", type=float, help="label confidence at which an item needs nothing more (e.g. 0.95)")
    p.add_argument("--method", default="auto", help="the method whose fit the plan uses (default auto)")
    p.add_argument("--cost", help="file with columns worker, cost (the budget then counts cost)")
    p.add_argument("--capacity", help="file with columns worker, capacity (annotators not listed are unavailable)")
    p.add_argument("--exclude", help="file with columns task, worker: who may not label which item again")
    p.add_argument("--max-per-item", type=int, default=3, help="most extra labels per item (default 3)")
    add_io(p)
    p.add_argument("--layout", choices=["long", "wide"], default="long")
    p.add_argument("--task-col", default="task")
    p.add_argument("--worker-col", default="worker")
    p.add_argument("--label-col", default="label")
    add_duplicates_option(p)
    p.set_defaults(func=cmd_plan)


__all__ = ["add_plan_command", "cmd_plan"]
