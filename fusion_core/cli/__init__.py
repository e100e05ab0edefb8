"""Command line: ``fusion-core methods | fit | simulate`` (``report``, ``plan`` and the ratings commands in their modules).

Every user-input problem — bad files, bad columns, bad parameters and bad option values alike — exits with status 2
and one line on stderr (:class:`UserInputError`'s message, or argparse's made one line by :class:`OneLineParser`).
Output files are written by :mod:`fusion_core.data.export`: formula-safe CSV by default, Parquet with
``--format parquet``; ids and labels come back exactly as they were read.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import pandas as pd

from fusion_core.cli.dask import add_engine_options
from fusion_core.cli.pairwise import add_pairwise_command
from fusion_core.cli.plan import add_plan_command
from fusion_core.cli.ratings import (
    add_fit_rating_options,
    add_rating_commands,
    fit_rating_params,
    write_fit_rating_outputs,
)
from fusion_core.cli.reading import (
    add_duplicates_option,
    add_format_options,
    add_gold_options,
    add_time_option,
    gold_columns,
    read_answers_args,
    reading_options,
)
from fusion_core.data.export import EXPORT_FORMATS, output_dir, write_csv, write_table
from fusion_core.data.responses import Responses
from fusion_core.data.stages import process_seconds, stage, timed
from fusion_core.data.text import text_values
from fusion_core.diagnostics.tables import annotator_table, confusion_table
from fusion_core.errors import UserInputError
from fusion_core.methods import available, create, info
from fusion_core.methods.base import Aggregator
from fusion_core.methods.params import Param, show
from fusion_core.methods.registry import MethodInfo
from fusion_core.methods.results import jsonable
from fusion_core.report.cli import add_report_command


def _param_json(p: Param) -> dict[str, Any]:
    return {
        "name": p.name,
        "default": jsonable(p.default),
        "kind": p.kind,
        "allowed": p.allowed(),
        "help": p.help,
        "choices": [jsonable(c) for c in p.choices] if p.choices else None,
        "low": p.low,
        "high": p.high,
        "advanced": p.advanced,
    }


def param_lines(meta: MethodInfo, indent: str = "  ") -> list[str]:
    """One line per declared parameter: ``--param NAME=…``, default, allowed values (``Param.allowed``), help."""
    return [
        f"{indent}--param {p.name}=…  default {show(p.default)}; {p.allowed()}. {p.help}".rstrip() for p in meta.params
    ]


def _cmd_methods(args: argparse.Namespace) -> int:
    infos = available()
    if args.json:
        out = [
            {
                "name": m.name,
                "title": m.label,
                "summary": m.summary,
                "inputs": list(m.inputs),
                "probabilistic": m.probabilistic,
                "parameters": [_param_json(p) for p in m.params],
            }
            for m in infos
        ]
        print(json.dumps(out, indent=2))
        return 0
    width = max(len(m.name) for m in infos)
    for m in infos:
        needs = f" [needs {', '.join(m.needs())}]" if m.needs() else ""
        print(f"{m.name:<{width}}  {m.summary}{needs}")
        if args.verbose:
            for line in param_lines(m, indent=" " * (width + 4)):
                print(line)
    return 0


def _parse_params(items: Sequence[str] | None, method: str) -> dict[str, Any]:
    """``--param NAME=VALUE`` options parsed and validated by the method's declarations (``Param.parse``)."""
    meta = info(method)
    specs = {p.name: p for p in meta.params}
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise UserInputError(f"--param expects NAME=VALUE, got {item!r}.")
        key, value = item.split("=", 1)
        key = key.strip().replace("-", "_")
        if key not in specs:
            raise UserInputError(
                f"method '{method}' has no parameter '{key}'; it has {', '.join(specs) or 'none'} "
                f"(see `fusion-core methods -v`)."
            )
        out[key] = specs[key].parse(value)
    return out


def posterior_table(est: Aggregator) -> pd.DataFrame:
    """One row per item: ``task`` and ``P(<label>)`` for every class (prefixed headers, so a label named ``task``
    never collides with the id column)."""
    res = est.result_
    columns = {f"P({c})": res.posterior[:, k] for k, c in enumerate(text_values(res.classes))}
    return pd.DataFrame({"task": res.items, **columns})


def write_outputs(
    est: Aggregator, out_dir: Path, *, format: str = "csv", escape_formulas: bool = True
) -> dict[str, Any]:
    """Write labels, posteriors, confusion (long), workers and summary files for a fitted estimator.

    Layout (user values are always cell values, never column names, except inside ``P(<label>)``):
    ``labels`` (task, label), ``posteriors`` (task, P(<label>)…), ``confusion`` (worker, true, reported,
    probability), ``workers`` (worker, skill, responses, the method's per-annotator columns), ``summary.json``.
    """
    output_dir(out_dir)
    res = est.result_
    tables = {
        "labels": pd.DataFrame(
            {"task": res.items, "label": pd.Categorical.from_codes(res.label_codes, categories=res.classes)}
        ),
        "posteriors": posterior_table(est),
        "confusion": confusion_table(res),
        "workers": annotator_table(res, est.responses_).rename_axis("worker").reset_index(),
    }
    for stem, table in tables.items():
        if table is not None:
            write_table(table, out_dir, stem, format=format, escape_formulas=escape_formulas)
    summary = res.summary()
    summary["validation"] = est.responses_.report.to_dict()
    if est.responses_.time is not None:  # --time-col: reliability over time (who changed, when)
        from fusion_core.diagnostics.drift import drift_report

        summary["drift"] = drift_report(est.responses_, res.posterior).to_dict()
    try:
        with stage("write", "summary.json"):
            (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    except OSError as exc:
        raise UserInputError(f"cannot write {out_dir / 'summary.json'}: {exc.strerror or 'not allowed'}.") from None
    return summary


def _side_inputs(args: argparse.Namespace, meta: MethodInfo, resp: Responses) -> dict[str, Any]:
    """Gold labels, context and item graph read from their files; a method missing one it needs is refused."""
    from fusion_core.data.loading import read_context, read_gold

    fit_kwargs: dict[str, Any] = {}
    reading = reading_options(args)
    if args.gold:
        fit_kwargs["true_labels"] = read_gold(args.gold, **gold_columns(args), **reading)
    if args.context:
        fit_kwargs["context"] = read_context(args.context, column=args.context_col, **reading)
    if args.graph:
        from fusion_core.data.graph import read_graph  # networkx: 0.3 s of start-up, only with --graph

        fit_kwargs["graph"] = read_graph(args.graph, **reading)
    missing = [
        n
        for n in meta.needs()
        if (n == "sequence" and not resp.has_sequences) or (n in ("graph", "context") and n not in fit_kwargs)
    ]
    if missing:
        hint = {"sequence": "--sequence-col/--position-col", "graph": "--graph FILE", "context": "--context FILE"}
        raise UserInputError(
            f"method '{meta.name}' needs {', '.join(missing)}: pass {', '.join(hint[m] for m in missing)}."
        )
    return fit_kwargs


def _cmd_fit(args: argparse.Namespace) -> int:
    if not args.timings:
        return _fit(args)
    with timed() as timings:
        status = _fit(args)
    print("\n".join(timings.lines(process=process_seconds())), file=sys.stderr)
    return status


def _fit(args: argparse.Namespace) -> int:

    meta = info(args.method)
    params = fit_rating_params(args, meta, _parse_params(args.param, args.method))
    if not args.max_mb > 0:
        raise UserInputError(f"--max-mb must be a positive number of megabytes; got {args.max_mb:g}.")
    output_dir(args.out)  # a file or an unwritable place is refused before reading and fitting
    if "multilabel" in meta.needs():  # label sets per answer: their own reader and outputs
        from fusion_core.cli.multilabel import fit_multilabel

        if args.label_sep is not None and "sep" not in params:
            params["sep"] = meta.param("sep").parse(args.label_sep)
        return fit_multilabel(args, params, reading_options(args))
    if args.label_sep is not None:
        raise UserInputError(f"--label-sep applies to multi-label methods (multilabel-em), not to '{meta.name}'.")
    if args.engine == "dask":
        from fusion_core.cli.dask import fit_dask

        return fit_dask(args, params, reading_options(args))
    answers = read_answers_args(
        args, sequence=args.sequence_col, position=args.position_col, confidence=args.confidence_col
    )
    resp = answers.responses
    fit_kwargs = _side_inputs(args, meta, resp)
    if answers.gold is not None and "true_labels" not in fit_kwargs:
        fit_kwargs["true_labels"] = answers.gold  # the export's ground-truth answers, as --gold would give them
    with warnings.catch_warnings(record=True) as caught:  # printed once below, not also by Python
        warnings.simplefilter("always")
        with stage("fit", args.method):
            est = create(args.method, **params).fit(resp, **fit_kwargs)
    summary = write_outputs(est, Path(args.out), format=args.format, escape_formulas=not args.no_escape_formulas)
    write_fit_rating_outputs(args, est, resp, params, fit_kwargs.get("true_labels"))
    for line in resp.report.messages():
        print(line, file=sys.stderr)
    shown = list(summary["warnings"])
    shown += [m for m in dict.fromkeys(str(w.message) for w in caught) if m not in shown]
    for w in shown:
        print(f"warning: {w}", file=sys.stderr)
    ll = summary["log_likelihood"]
    print(
        f"{args.method}: {summary['items']:,} items, {summary['workers']:,} workers, "
        f"{summary['iterations']} iterations, converged={summary['converged']}, "
        f"log-likelihood={'n/a' if ll is None else f'{ll:.3f}'}, {summary['seconds']:.2f} s -> {args.out}"
    )
    if "chosen_method" in summary:
        print(f"{args.method} chose {_choice_words(summary)} (criterion: {summary['selection_criterion']})")
    return 0


def _choice_words(summary: dict[str, Any]) -> str:
    """What ``auto`` chose: one method, or the average of several (the best named)."""
    members = summary.get("combined_methods") or [summary["chosen_method"]]
    if len(members) <= 1:
        return str(summary["chosen_method"])
    return f"the average of {', '.join(members)} (best held-out score: {summary['chosen_method']})"


def _cmd_simulate(args: argparse.Namespace) -> int:
    from fusion_core.simulate import dawid_skene

    sim = dawid_skene(
        n_items=args.items,
        n_workers=args.workers,
        n_classes=args.classes,
        responses_per_item=args.per_item,
        accuracy=(args.min_accuracy, args.max_accuracy),
        spammers=args.spammers,
        adversarial=args.adversarial,
        worker_activity=args.activity,
        seed=args.seed,
    )
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_csv(sim.responses, out / "answers.csv")
        write_csv(sim.truth.rename("truth").reset_index(), out / "truth.csv")
    except OSError as exc:
        raise UserInputError(f"cannot write the simulated data to {out}: {exc.strerror or 'not allowed'}.") from None
    print(f"wrote {len(sim.responses):,} responses for {args.items:,} items to {out}/answers.csv (+ truth.csv)")
    return 0


def _fit_epilog(method: str) -> str:
    """The parameters of ``method`` with their allowed values, for ``fit --help``."""
    try:
        meta = info(method)
    except UserInputError as exc:
        return str(exc)
    head = f"parameters of {meta.name} ({meta.label}); for another method: fit --method NAME --help"
    return "\n".join([head, *param_lines(meta)]) if meta.params else f"{meta.name} has no parameters."


def _method_in(argv: Sequence[str]) -> str:
    """The value of ``--method`` in a command line (default ``ds``), read before parsing so --help can list the
    method's parameters."""
    for i, arg in enumerate(argv):
        if arg == "--method" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--method="):
            return arg.split("=", 1)[1]
    return "ds"


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors (unknown option, bad choice, bad number) are one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split()).rstrip(".")
        self.exit(2, f"error: {text}; see `{self.prog} --help`.\n")


def _add_io_options(f: argparse.ArgumentParser) -> None:
    """``fit`` options for reading the input and writing the outputs (docs/DATA.md)."""
    add_format_options(f)
    f.add_argument(
        "--format", choices=list(EXPORT_FORMATS), default="csv", help="format of the output tables (default csv)"
    )
    f.add_argument(
        "--missing",
        action="append",
        metavar="MARKER",
        help="treat cells equal to MARKER as missing (repeatable, e.g. --missing NA --missing null); "
        "by default only empty cells are missing",
    )
    f.add_argument(
        "--strip-whitespace", action="store_true", help="trim spaces at both ends of every value and column name"
    )
    f.add_argument(
        "--no-escape-formulas",
        action="store_true",
        help="write CSV values starting with = + - @ as they are (for programs; spreadsheets would run them)",
    )
    f.add_argument("--max-mb", type=float, default=1024.0, help="refuse inputs larger than this (MB)")


ANSWERS_HELP = (
    "file of responses: a CSV, TSV, Parquet or JSON-lines table, or a labelling tool's export (Label Studio, MTurk, "
    "Toloka, Argilla, Prodigy, doccano; see --input-format)"
)


def add_column_options(f: argparse.ArgumentParser) -> None:
    """``--task-col``, ``--worker-col``, ``--label-col``: by default the column of that name, else the one whose
    name suggests it (``item_id``, ``annotator``, ``answer`` …), with a note on stderr."""
    for role, example in (("task", "item_id"), ("worker", "annotator"), ("label", "answer")):
        f.add_argument(
            f"--{role}-col",
            default=None,
            help=f"the {role} column (default: '{role}', else guessed from common names such as '{example}')",
        )


def build_parser(method: str = "ds") -> argparse.ArgumentParser:
    """The argument parser; ``fit --help`` lists the parameters of ``method`` with their allowed values."""
    p = OneLineParser(prog="fusion-core", description="Annotator reliability without ground truth.")
    sub = p.add_subparsers(dest="command", required=True)

    m = sub.add_parser("methods", help="list the registered methods")
    m.add_argument("--json", action="store_true", help="machine-readable output")
    m.add_argument("-v", "--verbose", action="store_true", help="show parameters and their allowed values")
    m.set_defaults(func=_cmd_methods)

    f = sub.add_parser(
        "fit",
        help="fit a method to an answers file and write the results",
        epilog=_fit_epilog(method),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    f.add_argument("answers", help=ANSWERS_HELP)
    f.add_argument("--method", default="ds", help="registered method name (see `fusion-core methods`)")
    f.add_argument("--out", required=True, help="output directory")
    _add_io_options(f)
    f.add_argument(
        "--timings",
        action="store_true",
        help="print the wall and CPU seconds of each stage (read, validate, code, fit, write per file) on stderr",
    )
    add_engine_options(f)
    f.add_argument("--layout", choices=["long", "wide"], default="long")
    add_column_options(f)
    f.add_argument(
        "--label-sep",
        default=None,
        metavar="SEP",
        help="multi-label methods: the separator of the label set in each label cell (default |)",
    )
    f.add_argument(
        "--confidence-col", default=None, help="per-response confidence in [0, 1] (e.g. an LLM judge's probability)"
    )
    add_fit_rating_options(f)
    add_time_option(f)
    f.add_argument("--sequence-col", default=None, help="sequence id column (sequential data)")
    f.add_argument("--position-col", default=None, help="position column (sequential data)")
    add_duplicates_option(f)
    f.add_argument("--gold", help="gold labels file (task, truth) clamped during fitting")
    add_gold_options(f)
    f.add_argument("--graph", help="item graph: edge list CSV (source,target[,weight]), GraphML or GML")
    f.add_argument("--context", help="per-item context file (task, context)")
    f.add_argument("--context-col", default="context")
    f.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="method parameter (repeatable); the method's parameters and allowed values are listed below",
    )
    f.set_defaults(func=_cmd_fit)

    s = sub.add_parser("simulate", help="write simulated Dawid–Skene demo data (answers.csv, truth.csv)")
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--items", type=int, default=1000)
    s.add_argument("--workers", type=int, default=30)
    s.add_argument("--classes", type=int, default=3)
    s.add_argument("--per-item", type=int, default=5)
    s.add_argument("--min-accuracy", type=float, default=0.6)
    s.add_argument("--max-accuracy", type=float, default=0.9)
    s.add_argument("--spammers", type=int, default=0)
    s.add_argument("--adversarial", type=int, default=0)
    s.add_argument("--activity", choices=["uniform", "zipf"], default="uniform")
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(func=_cmd_simulate)
    add_rating_commands(sub, _add_io_options)
    add_report_command(sub, _add_io_options, add_column_options, ANSWERS_HELP)
    add_pairwise_command(sub, _add_io_options)
    add_plan_command(sub, _add_io_options)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 with one line on stderr for a user-input error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_method_in(argv))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UserInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
