"""``fusion-core fit --method multilabel-em``: multi-label responses (a set of labels per answer) from a file.

The answers file has one row per (task, annotator) with the label set as text joined by ``--label-sep`` (format A;
an empty cell is the empty set), or one row per (task, annotator, label) with a ``present`` column (format B); see
:func:`fusion_core.data.multilabel.parse_multilabel`.  Outputs (CSV or Parquet, written by
:mod:`fusion_core.data.export`): ``labels`` (task, labels: the decoded set joined by the separator), ``posteriors``
(task, P(<label>): the probability that each label is in the true set), ``workers`` (worker, skill and the
per-annotator columns), ``flip_rates`` (worker, label, false_positive, miss, sensitivity, specificity) and
``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from fusion_core.cli.reading import printed_warnings
from fusion_core.data.export import output_dir, write_table
from fusion_core.data.guess import guess_columns
from fusion_core.data.loading import read_table
from fusion_core.data.text import plain_values, text_values
from fusion_core.errors import UserInputError
from fusion_core.methods import create


def read_multilabel_table(args: argparse.Namespace, reading: dict[str, Any]) -> pd.DataFrame:
    """The answers as a table of text (task, worker, label set[, present]); an empty label cell is the empty set."""
    table = read_table(args.answers, format=args.input_format, **reading)
    given = {"task": args.task_col, "worker": args.worker_col, "label": args.label_col}
    cols, note = guess_columns([str(c) for c in table.columns], given)
    args.task_col, args.worker_col, args.label_col = cols["task"], cols["worker"], cols["label"]
    if note:
        print(note, file=sys.stderr)
    wanted = [args.task_col, args.worker_col, args.label_col]
    missing = [c for c in wanted if c not in table.columns]
    if missing:
        raise UserInputError(
            f"missing column(s) {missing}; the table has columns {[str(c) for c in table.columns]}. Map the columns "
            "with --task-col/--worker-col/--label-col."
        )
    keep = [*wanted, *(["present"] if "present" in table.columns else [])]
    out = pd.DataFrame({c: plain_values(table[c]) for c in keep})
    if "present" not in out.columns:
        out[args.label_col] = out[args.label_col].fillna("")
    return out


def fit_multilabel(args: argparse.Namespace, params: dict[str, Any], reading: dict[str, Any]) -> int:
    """Fit a multi-label method on the answers file and write its outputs."""
    from fusion_core.cli.reading import gold_columns
    from fusion_core.data.loading import read_gold

    table = read_multilabel_table(args, reading)
    est = create(args.method, **params)
    gold = read_gold(args.gold, **gold_columns(args), **reading) if args.gold else None
    if gold is not None:
        gold = gold.fillna("")
    with printed_warnings():
        est.fit(
            table.rename(columns={args.task_col: "task", args.worker_col: "worker", args.label_col: "label"}),
            true_labels=gold,
        )
    summary = write_multilabel_outputs(
        est, Path(args.out), sep=str(est.sep), format=args.format, escape_formulas=not args.no_escape_formulas
    )
    print(
        f"{args.method}: {summary['items']:,} items, {summary['workers']:,} workers, {len(summary['classes'])} labels, "
        f"{summary['iterations']} iterations, converged={summary['converged']} -> {args.out}"
    )
    return 0


def write_multilabel_outputs(
    est: Any, out_dir: Path, *, sep: str, format: str = "csv", escape_formulas: bool = True
) -> dict[str, Any]:
    """Write labels, posteriors (label marginals), workers, flip rates and summary for a fitted multi-label EM."""
    output_dir(out_dir)
    res = est.result_
    names = [str(v) for v in text_values(res.classes)]
    sets = [sep.join(str(v) for v in text_values(list(labels))) for labels in est.labels_.to_numpy()]
    workers = pd.DataFrame({"worker": res.workers, "skill": res.worker_skill})
    for col in res.annotator_columns:
        workers[col.title] = col.values
    flips = est.flip_rates_.reset_index()
    tables = {
        "labels": pd.DataFrame({"task": res.items, "labels": sets}),
        "posteriors": pd.DataFrame(
            {"task": res.items, **{f"P({n})": res.posterior[:, k] for k, n in enumerate(names)}}
        ),
        "workers": workers.sort_values("skill", ascending=False, kind="stable"),
        "flip_rates": flips,
    }
    for stem, table in tables.items():
        write_table(table, out_dir, stem, format=format, escape_formulas=escape_formulas)
    summary = res.summary()
    summary["validation"] = {k: v for k, v in est.data_.report.items() if isinstance(v, (int, float, str))}
    try:
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    except OSError as exc:
        raise UserInputError(f"cannot write {out_dir / 'summary.json'}: {exc.strerror or 'not allowed'}.") from None
    return summary
