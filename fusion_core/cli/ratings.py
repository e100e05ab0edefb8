"""``fusion-core numeric`` (numeric ratings: true value per item with an interval, each annotator's bias and noise)
and ``fusion-core agreement`` (Krippendorff's α for any level of measurement and ICC, with bootstrap intervals).

Ordinal ratings need no command of their own: ``fusion-core fit --method ordinal-em --levels low,mid,high`` (or
``--levels numeric``).  The options of ``fit`` that follow the label type are here too: ``--verdicts``
(ordinal-em; also on ``numeric``) writes ``verdicts.csv`` — each annotator's verdict from bootstrap intervals
(:mod:`fusion_core.diagnostics.rating_verdicts`) — and ``--calibration`` (judges with ``--confidence-col``) writes
``calibration.csv`` and ``calibration_bins.csv`` (:mod:`fusion_core.diagnostics.calibration`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fusion_core.cli.reading import load_answers, printed_warnings, reading_options
from fusion_core.data.export import output_dir, write_table, write_text
from fusion_core.errors import UserInputError

METRICS = ("nominal", "ordinal", "interval", "ratio")


def _table(args: argparse.Namespace) -> Any:
    from fusion_core.data.loading import read_table

    return read_table(
        args.answers,
        format=args.input_format,
        **reading_options(args),
    )


def _numeric(args: argparse.Namespace) -> Any:
    from fusion_core.data.numeric import NumericResponses

    return NumericResponses.from_frame(
        _table(args), task=args.task_col or "task", worker=args.worker_col or "worker", value=args.value_col
    )


def _write_verdicts(verdicts: Any, out: Path, args: argparse.Namespace) -> None:
    escape = not args.no_escape_formulas
    write_table(verdicts.export_frame(), out, "verdicts", format=args.format, escape_formulas=escape)
    counts = ", ".join(f"{n} {word}" for word, n in verdicts.counts().items())
    print(f"verdicts ({verdicts.n_bootstrap} bootstrap refits over items): {counts} -> {out}/verdicts.{args.format}")


def cmd_numeric(args: argparse.Namespace) -> int:
    """Fit the numeric truth model and write items (truth with interval), annotators (bias, noise), summary."""
    from fusion_core.methods.numeric import NumericTruth

    out = output_dir(args.out)
    data = _numeric(args)
    reference = [r for r in (args.reference or "").split(",") if r] or None
    est = NumericTruth(noise="student-t" if args.robust else "gaussian", reference=reference, level=args.level)
    with printed_warnings():
        fit = est.fit(data).result_
    escape = not args.no_escape_formulas
    items = fit.items_frame().rename_axis("task").reset_index()
    workers = fit.annotators_frame().rename_axis("worker").reset_index()
    write_table(items, out, "items", format=args.format, escape_formulas=escape)
    write_table(workers, out, "annotators", format=args.format, escape_formulas=escape)
    summary = {
        "noise_model": fit.noise_model,
        "items": len(items),
        "annotators": len(workers),
        "interval_level": fit.level,
        "iterations": fit.n_iter,
        "converged": fit.converged,
        "log_likelihood": fit.log_likelihood[-1] if fit.log_likelihood else None,
        "warnings": list(fit.warnings),
    }
    write_text(out / "summary.json", json.dumps(summary, indent=2))
    print(f"numeric ratings ({fit.noise_model} noise): {len(items):,} items, {len(workers):,} annotators -> {out}")
    if args.verdicts:
        from fusion_core.diagnostics.rating_verdicts import numeric_verdicts

        noise = "student-t" if args.robust else "gaussian"
        with printed_warnings():
            v = numeric_verdicts(data, noise=noise, reference=reference, n_bootstrap=args.bootstrap, level=args.level)
        _write_verdicts(v, out, args)
    return 0


# ------------------------------------------------------------------------------------------ fit options
def add_fit_rating_options(f: argparse.ArgumentParser) -> None:
    """The options of ``fit`` that follow the label type: ordinal levels, verdicts, judges' calibration."""
    f.add_argument(
        "--levels",
        metavar="ORDER",
        help="ordinal methods (ordinal-em): the level order, lowest first, comma-separated (e.g. poor,fair,good), "
        "or 'numeric' to sort numbers",
    )
    f.add_argument(
        "--verdicts",
        action="store_true",
        help="ordinal-em: also write verdicts.csv (reliable / lenient / harsh / noisy / near chance / not enough "
        "ratings to tell, from bootstrap intervals of each annotator's bias and noise)",
    )
    f.add_argument(
        "--calibration",
        action="store_true",
        help="judges with --confidence-col: also write calibration.csv (per judge: stated confidence against "
        "accuracy on the fitted labels, or on --gold; expected calibration error) and calibration_bins.csv",
    )
    f.add_argument(
        "--bootstrap", type=int, default=100, help="--verdicts: bootstrap refits over items (default 100, at least 20)"
    )


def fit_rating_params(args: argparse.Namespace, meta: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with ``--levels`` applied; options that do not fit the method are refused before any fitting."""
    names = {p.name for p in meta.params}
    if args.levels is not None:
        if "levels" not in names:
            raise UserInputError(f"--levels applies to ordinal methods (ordinal-em), not to '{meta.name}'.")
        if "levels" in params:
            raise UserInputError("give the level order once: --levels or --param levels=…, not both.")
        order = [v for v in args.levels.split(",") if v != ""]
        levels = meta.param("levels").validate("numeric" if order == ["numeric"] else order, meta.name)
        params = {**params, "levels": levels}
    if args.verdicts and "levels" not in names:
        raise UserInputError(
            f"--verdicts reads each annotator's bias and noise, which '{meta.name}' does not estimate; use "
            "--method ordinal-em (ordinal labels) or the numeric command (numbers)."
        )
    if getattr(args, "engine", "memory") == "dask" and (args.verdicts or args.calibration):
        raise UserInputError("--verdicts and --calibration run in memory; drop --engine dask for them.")
    if args.calibration and args.confidence_col is None:
        raise UserInputError("--calibration compares the judges' stated confidences: name them with --confidence-col.")
    return params


def write_fit_rating_outputs(
    args: argparse.Namespace, est: Any, resp: Any, params: dict[str, Any], gold: Any = None
) -> None:
    """``verdicts`` and ``calibration`` tables of a fit, when asked for."""
    out = Path(args.out)
    if args.verdicts:
        from fusion_core.diagnostics.rating_verdicts import ordinal_verdicts

        v = ordinal_verdicts(
            resp, levels=params.get("levels"), scale=params.get("scale", "estimated"), n_bootstrap=args.bootstrap
        )
        _write_verdicts(v, out, args)
    if args.calibration:
        from fusion_core.diagnostics.calibration import calibration

        name = "gold labels" if gold is not None else f"the labels of {args.method}"
        cal = calibration(resp, gold if gold is not None else est.labels_, reference_name=name)
        escape = not args.no_escape_formulas
        summary = cal.summary.rename_axis("worker").reset_index()
        write_table(summary, out, "calibration", format=args.format, escape_formulas=escape)
        write_table(cal.bins, out, "calibration_bins", format=args.format, escape_formulas=escape)
        worst = cal.summary["overconfidence"].idxmax()
        print(
            f"calibration against {name}: pooled ECE {cal.pooled['ece']:.3f}; most over-confident judge "
            f"{worst} (+{cal.summary.loc[worst, 'overconfidence']:.3f}) -> {out}/calibration.{args.format}"
        )


def cmd_agreement(args: argparse.Namespace) -> int:
    """Print Krippendorff's α (and ICC for numeric ratings; every registered agreement statistic for the nominal
    metric) with bootstrap intervals; ``--json`` for programs."""
    from fusion_core.diagnostics.krippendorff import krippendorff
    from fusion_core.diagnostics.reliability import icc

    if args.metric in ("interval", "ratio"):
        data: Any = _numeric(args)
        estimates = [
            krippendorff(data, metric=args.metric, n_bootstrap=args.bootstrap, level=args.level),
            icc(data, n_bootstrap=args.bootstrap, level=args.level),
        ]
    else:
        data = load_answers(args)  # a tool's export, or a table with guessed column names
        levels: Any = _levels(args.levels) if args.levels else ("numeric" if args.metric == "ordinal" else None)
        if args.metric == "nominal":  # every registered statistic: Fleiss' κ, Krippendorff's α (nominal) …
            from fusion_core.diagnostics.agreement import agreement_intervals

            estimates = list(agreement_intervals(data, n_bootstrap=args.bootstrap, level=args.level))
        else:
            estimates = [
                krippendorff(data, metric=args.metric, levels=levels, n_bootstrap=args.bootstrap, level=args.level)
            ]
    if args.json:
        print(json.dumps([e.as_dict() for e in estimates], indent=2, default=float))
        return 0
    for e in estimates:
        interval = f" ({round(100 * e.level)}% interval {e.low:.3f} to {e.high:.3f})" if e.n_bootstrap else ""
        print(f"{e.statistic}: {e.value:.3f}{interval} on {e.n_items:,} items{'; ' + e.note if e.note else ''}")
    return 0


def _levels(text: str) -> list[str]:
    """``--levels a,b,c`` as a list (empty entries dropped), refusing an empty or repeated order."""
    order = [v for v in text.split(",") if v != ""]
    if len(order) < 2 or len(set(order)) < len(order):
        raise UserInputError(
            f"--levels needs at least two distinct labels, lowest first, separated by commas; got {text!r}."
        )
    return order


def add_rating_commands(sub: Any, add_io: Any) -> None:
    """The ``numeric`` and ``agreement`` sub-commands (``add_io`` adds the shared reading/writing options)."""
    n = sub.add_parser("numeric", help="numeric ratings: estimated true value per item, annotators' bias and noise")
    n.add_argument("answers", help="long table of responses: task, worker, value")
    n.add_argument("--out", required=True, help="output directory")
    add_io(n)
    n.add_argument("--task-col", default="task")
    n.add_argument("--worker-col", default="worker")
    n.add_argument("--value-col", default="value")
    n.add_argument("--robust", action="store_true", help="Student-t noise: outlying ratings weigh less")
    n.add_argument("--reference", help="comma-separated annotators whose mean bias is 0 (default: the whole crowd)")
    n.add_argument("--level", type=_unit, default=0.95, help="interval level (default 0.95)")
    n.add_argument(
        "--verdicts",
        action="store_true",
        help="also write verdicts.csv: each annotator reliable / lenient / harsh / noisy / near chance / not enough "
        "ratings to tell, from bootstrap intervals of bias and noise",
    )
    n.add_argument("--bootstrap", type=int, default=100, help="--verdicts: bootstrap refits over items (default 100)")
    n.set_defaults(func=cmd_numeric)

    a = sub.add_parser("agreement", help="Krippendorff's alpha (and ICC for numbers) with bootstrap intervals")
    a.add_argument("answers", help="long table of responses: task, worker, label (or value)")
    add_io(a)
    a.add_argument("--metric", choices=METRICS, default="nominal", help="level of measurement of the labels")
    a.add_argument("--levels", help="ordinal metric: the label order, lowest first, comma-separated (default: numbers)")
    a.add_argument("--task-col", default=None, help="default: 'task', else guessed from common names (item_id …)")
    a.add_argument("--worker-col", default=None, help="default: 'worker', else guessed (annotator, rater …)")
    a.add_argument("--label-col", default=None, help="default: 'label', else guessed (answer, rating …)")
    a.add_argument("--value-col", default="value", help="interval/ratio metrics: the numeric column")
    a.add_argument("--bootstrap", type=int, default=1000, help="bootstrap replicates over items (0: no interval)")
    a.add_argument("--level", type=_unit, default=0.95, help="interval level (default 0.95)")
    a.add_argument("--json", action="store_true", help="machine-readable output")
    a.set_defaults(func=cmd_agreement)


def _unit(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value


__all__ = [
    "METRICS",
    "add_fit_rating_options",
    "add_rating_commands",
    "cmd_agreement",
    "cmd_numeric",
    "fit_rating_params",
    "write_fit_rating_outputs",
]
