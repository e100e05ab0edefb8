"""``fusion-core report``: run the one-click audit on an answers file and write the self-contained HTML report
(the same file the app's "Download report (HTML)" gives)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from fusion_core.cli.reading import (
    add_duplicates_option,
    add_gold_options,
    add_time_option,
    gold_columns,
    read_answers_args,
    reading_options,
)
from fusion_core.diagnostics.audit_options import AUDIT_OPTIONS, cli_type, cli_value, option_help
from fusion_core.errors import UserInputError
from fusion_core.report.pairwise_cli import pairwise_report

AUDIT_FLAGS = (  # (flag, argparse dest, audit option): each read from and checked by the audit's declaration
    ("--label-type", "label_type", "label_type"),
    ("--rating-bootstrap", "rating_bootstrap", "rating_bootstrap"),
    ("--bootstrap", "bootstrap", "n_bootstrap"),
    ("--cartel-bootstrap", "cartel_bootstrap", "cartel_bootstrap"),
)


def cmd_report(args: argparse.Namespace) -> int:
    """Load the answers, audit them and write the report; one summary line on stdout."""
    from fusion_core.data.dataset import make_dataset
    from fusion_core.data.loading import read_gold
    from fusion_core.diagnostics.audit import run_audit
    from fusion_core.diagnostics.audit.summary import audit_summary
    from fusion_core.diagnostics.span_agreement import span_agreement_for
    from fusion_core.report.html import write_report

    if not args.max_mb > 0:
        raise UserInputError(f"--max-mb must be a positive number of megabytes; got {args.max_mb:g}.")
    if (status := pairwise_report(args)) is not None:  # pairwise judgements: their own section (docs/JUDGES.md)
        return status
    if args.levels and args.label_type != "ordinal":
        raise UserInputError("--levels gives the order of ordinal labels; add --label-type ordinal.")
    options = {name: cli_value(flag, name, getattr(args, dest)) for flag, dest, name in AUDIT_FLAGS}  # before reading
    answers = read_answers_args(args)
    resp = answers.responses
    gold = read_gold(args.gold, **gold_columns(args), **reading_options(args)) if args.gold else answers.gold
    ds = make_dataset(resp, name=Path(args.answers).name, source="upload", gold=gold)
    audit = run_audit(ds, levels=_levels(args.levels), **options)
    spans = span_agreement_for(answers.spans, audit.fit, audit.fit.method) if answers.spans is not None else None
    out = write_report(audit, args.out, title=args.title, spans=spans)
    summary_path = out.with_name(out.stem + ".summary.json")
    try:
        summary_path.write_text(json.dumps(audit_summary(audit), indent=2), encoding="utf-8")
    except OSError as exc:
        raise UserInputError(f"cannot write {summary_path}: {exc.strerror or 'not allowed'}.") from None
    write_tool_files(args, audit, answers)
    for line in resp.report.messages():
        print(line, file=sys.stderr)
    counts = audit.annotators.counts()
    flagged = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    print(
        f"audit of {audit.n_responses:,} responses ({audit.n_items:,} items, {audit.n_workers:,} annotators): "
        f"{flagged}; report -> {out} ({out.stat().st_size / 1e6:.1f} MB), summary -> {summary_path}"
    )
    return 0


def write_tool_files(args: argparse.Namespace, audit: Any, answers: Any) -> None:
    """``--verdicts-out`` (verdicts with the platform's worker ids), ``--resend-out`` (the re-labelling plan's items
    in the platform's item and worker columns) and ``--predictions-out`` (Label Studio predictions from the audit's
    fit)."""
    from fusion_core.data.export import write_csv
    from fusion_core.report.tool_files import label_studio_predictions, predictions_json, resend_table, verdicts_table

    try:
        if args.verdicts_out:
            write_csv(verdicts_table(audit, answers.format), args.verdicts_out)
        if args.resend_out:
            if audit.plan is None or not len(audit.plan.tasks):
                raise UserInputError("--resend-out: the audit's re-labelling plan has no items to send again.")
            write_csv(resend_table(audit.plan.frame(), answers.format), args.resend_out)
        if args.predictions_out:
            if answers.control is None:
                raise UserInputError("--predictions-out writes Label Studio predictions: read a Label Studio export.")
            body = label_studio_predictions(
                audit.fit, answers.control, spans=answers.spans, model_version=f"fusion_core {audit.fit.method}"
            )
            Path(args.predictions_out).write_bytes(predictions_json(body))
    except OSError as exc:
        raise UserInputError(f"cannot write an output file: {exc.strerror or 'not allowed'}.") from None


def _levels(text: str | None) -> Any:
    """``--levels``: ``numeric``, or the level order lowest first, comma-separated (None: numeric levels)."""
    if not text:
        return None
    if text.strip() == "numeric":
        return "numeric"
    return text.split(",")


def add_report_command(sub: Any, add_io: Any, add_columns: Any, answers_help: str) -> None:
    """The ``report`` sub-command (``add_io`` adds the shared reading options, ``add_columns`` the column options)."""
    r = sub.add_parser("report", help="audit an answers file and write a self-contained HTML report")
    r.add_argument("answers", help=answers_help)
    r.add_argument("--out", required=True, help="the HTML file to write")
    add_io(r)
    r.add_argument("--layout", choices=["long", "wide"], default="long")
    add_columns(r)
    add_time_option(r)
    add_duplicates_option(r)
    r.add_argument("--gold", help="known answers (task, truth), used only to report the labels' measured accuracy")
    add_gold_options(r)
    name = "label_type"
    r.add_argument(
        "--label-type", choices=AUDIT_OPTIONS[name].choices, default=AUDIT_OPTIONS[name].default, help=option_help(name)
    )
    r.add_argument("--levels", help="ordinal labels: their order, lowest first, comma-separated (default: numbers)")
    for flag, _, name in AUDIT_FLAGS[1:3]:  # type, default and help from the audit's declaration
        r.add_argument(flag, type=cli_type(name), default=AUDIT_OPTIONS[name].default, help=option_help(name))
    r.add_argument("--title", help="the report's title (default: 'Annotation audit: FILE')")
    flag, _, name = AUDIT_FLAGS[3]
    r.add_argument(flag, type=cli_type(name), default=AUDIT_OPTIONS[name].default, help=option_help(name))
    r.add_argument(
        "--verdicts-out", metavar="CSV", help="also write the verdicts per annotator with the platform's ids"
    )
    r.add_argument(
        "--resend-out",
        metavar="CSV",
        help="also write the re-labelling plan's items (which labels to buy next, and from whom) with the "
        "platform's item and worker ids",
    )
    r.add_argument(
        "--predictions-out",
        metavar="JSON",
        help="Label Studio exports: also write the consensus label and its probability per task as Label Studio "
        "predictions (pre-annotations: POST /api/predictions)",
    )
    r.set_defaults(func=cmd_report)


__all__ = ["add_report_command", "cmd_report"]
