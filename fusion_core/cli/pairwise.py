"""``fusion-core pairwise``: a panel of judges comparing two answers — rank the options with intervals, weigh
and audit the judges (position, length, self-preference), and correct the win rates with a gold subset
(docs/JUDGES.md).  Writes ``ranking``, ``judges``, ``bias`` [``win_rates``] tables and ``summary.json``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fusion_core.cli.reading import reading_options
from fusion_core.errors import UserInputError

ROLE_OPTIONS = {
    "prompt": "prompt (item) id column",
    "option_a": "option A column (the system that wrote answer A)",
    "option_b": "option B column",
    "judge": "judge column",
    "preference": "preference column: A, B or tie (or the preferred option's id)",
    "order": "which option was shown first: A/B, AB/BA or the option's id (default: A first)",
    "confidence": "per-judgement confidence in [0, 1]",
    "length_a": "length of answer A (for the length-bias audit)",
    "length_b": "length of answer B",
    "family_a": "model family of option A (for the self-preference audit)",
    "family_b": "model family of option B",
    "judge_family": "model family of the judge",
}


def role_columns(args: argparse.Namespace) -> dict[str, str]:
    """The ``--<role>-col`` options given (the others are found by their conventional names)."""
    return {role: getattr(args, f"{role}_col") for role in ROLE_OPTIONS if getattr(args, f"{role}_col", None)}


def read_pairwise(args: argparse.Namespace, path: str | None = None) -> Any:
    """The pairwise file (``args.answers``, or ``path``) as :class:`~fusion_core.data.pairwise.PairwiseResponses`."""
    from fusion_core.data.loading import read_table
    from fusion_core.data.pairwise import PairwiseResponses

    table = read_table(path or args.answers, format=args.input_format, **reading_options(args))
    return PairwiseResponses.from_frame(table, role_columns(args))


def cmd_pairwise(args: argparse.Namespace) -> int:
    """Audit the panel and write the tables; the findings in plain words on stdout."""
    from fusion_core.data.export import write_table
    from fusion_core.data.loading import read_table
    from fusion_core.diagnostics.pairwise_audit import pairwise_audit, pairwise_findings

    if not args.max_mb > 0:
        raise UserInputError(f"--max-mb must be a positive number of megabytes; got {args.max_mb:g}.")
    if args.bootstrap < 0 or not 0 < args.level < 1:
        raise UserInputError("--bootstrap must be ≥ 0 and --level between 0 and 1.")
    data = read_pairwise(args)
    gold = read_table(args.gold, **reading_options(args)) if args.gold else None
    audit = pairwise_audit(data, method=args.method, gold=gold, n_bootstrap=args.bootstrap, level=args.level)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserInputError(f"cannot create the output directory {out}: {exc.strerror or 'not allowed'}.") from None
    opts = {"format": args.format, "escape_formulas": not args.no_escape_formulas}
    write_table(audit.ranking.table.reset_index(), out, "ranking", **opts)
    write_table(audit.judges.reset_index(), out, "judges", **opts)
    write_table(audit.bias.table, out, "bias", **opts)
    if audit.win_rates is not None:
        write_table(audit.win_rates.table.reset_index(), out, "win_rates", **opts)
    fit = audit.ranking.fit
    summary = {
        "method": audit.method,
        "judgements": data.n,
        "options": data.n_options,
        "judges": data.n_judges,
        "prompts": data.n_prompts,
        "iterations": fit.n_iter,
        "converged": fit.converged,
        "log_likelihood": fit.log_likelihood[-1] if fit.log_likelihood else None,
        "bootstrap": audit.ranking.n_bootstrap,
        "bias_rule": audit.bias.rule.text(),
        "skipped_audits": list(audit.bias.skipped),
        "findings": [{"question": q, "answer": a} for q, a in pairwise_findings(audit)],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(
        f"pairwise audit of {data.n:,} judgements ({data.n_options} options, {data.n_judges} judges, "
        f"{data.n_prompts:,} prompts) -> {out}"
    )
    for q, a in pairwise_findings(audit):
        print(f"- {q} {a}")
    return 0


def add_role_options(p: argparse.ArgumentParser) -> None:
    """``--prompt-col``, ``--option-a-col`` … (default: the conventional names, docs/JUDGES.md)."""
    for role, text in ROLE_OPTIONS.items():
        p.add_argument(f"--{role.replace('_', '-')}-col", dest=f"{role}_col", default=None, help=text)


def add_pairwise_command(sub: Any, add_io: Any) -> None:
    """The ``pairwise`` sub-command (``add_io`` adds the shared reading and writing options)."""
    from fusion_core.methods.pairwise import DEFAULT_METHOD, PAIRWISE_METHODS

    p = sub.add_parser(
        "pairwise",
        help="rank options judged in pairs (A vs B), weigh and audit the judges, correct win rates with gold",
    )
    p.add_argument("answers", help="pairwise judgements: prompt, option_a, option_b, judge, preference[, order …]")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--method", choices=list(PAIRWISE_METHODS), default=DEFAULT_METHOD, help="ranking model")
    p.add_argument("--gold", help="human preferences on some comparisons (prompt, option_a, option_b, preference)")
    p.add_argument("--bootstrap", type=int, default=100, help="prompt resamples for the intervals (default 100)")
    p.add_argument("--level", type=float, default=0.9, help="interval level of rankings and win rates (0.9)")
    add_io(p)
    add_role_options(p)
    p.set_defaults(func=cmd_pairwise)


__all__ = ["add_pairwise_command", "add_role_options", "cmd_pairwise", "read_pairwise", "role_columns"]
