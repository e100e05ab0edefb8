"""``fusion-core report`` on a file of pairwise judgements (:func:`pairwise_report`): the audit of the judges'
choices and the report with its pairwise section (:func:`~fusion_core.report.pairwise.pairwise_section`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fusion_core.errors import UserInputError


def pairwise_report(args: argparse.Namespace) -> int | None:
    """``fusion-core report`` on a pairwise file: the audit of the judges' choices plus the pairwise section in one
    HTML file (returns the exit status); None when the file is not pairwise (the normal report runs)."""
    from fusion_core.data.pairwise import file_columns, pairwise_columns

    cols = file_columns(args.answers, format=args.input_format)
    if cols is None or pairwise_columns(cols) is None:
        return None
    from fusion_core.cli.pairwise import read_pairwise
    from fusion_core.cli.reading import reading_options
    from fusion_core.data.dataset import pairwise_dataset
    from fusion_core.data.loading import read_table
    from fusion_core.diagnostics.audit import run_audit
    from fusion_core.report.html import report_html

    data = read_pairwise(args)
    gold = read_table(args.gold, **reading_options(args)) if args.gold else None
    audit = run_audit(
        pairwise_dataset(data, name=Path(args.answers).name),
        n_bootstrap=args.bootstrap,
        cartel_bootstrap=args.cartel_bootstrap,
        pairwise_gold=gold,
    )
    pw = audit.pairwise
    assert pw is not None  # a pairwise dataset always gets its pairwise audit
    out = Path(args.out)
    title = args.title or f"Judge panel audit: {Path(args.answers).name}"
    try:
        out.write_text(report_html(audit, title=title), encoding="utf-8")
    except OSError as exc:
        raise UserInputError(f"cannot write the report to {out}: {exc.strerror or 'not allowed'}.") from None
    best = pw.ranking.table.index[0]
    print(
        f"pairwise audit of {data.n:,} judgements ({data.n_options} options, {data.n_judges} judges): best {best}; "
        f"position bias: {len(pw.bias.flagged('position'))} judge(s); report -> {out} "
        f"({out.stat().st_size / 1e6:.1f} MB)",
        file=sys.stdout,
    )
    return 0
