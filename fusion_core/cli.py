"""Command line: ``fusion-core methods | fit | simulate``.

Every user-input problem exits with status 2 and the one-line message of :class:`UserInputError`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError


def _cmd_methods(args: argparse.Namespace) -> int:
    from fusion_core.methods import available

    infos = available()
    if args.json:
        out = [
            {
                "name": m.name,
                "summary": m.summary,
                "inputs": list(m.inputs),
                "probabilistic": m.probabilistic,
                "parameters": [
                    {
                        "name": p.name,
                        "default": p.default
                        if isinstance(p.default, (int, float, str, bool, type(None)))
                        else str(p.default),
                        "kind": p.kind,
                        "help": p.help,
                        "choices": list(p.choices) if p.choices else None,
                    }
                    for p in m.params
                ],
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
            for p in m.params:
                choices = f" one of {list(p.choices)}" if p.choices else ""
                print(f"{'':<{width}}    --param {p.name}=… (default {p.default!r}{choices}) {p.help}")
    return 0


def _parse_params(items: Sequence[str], method: str) -> dict[str, Any]:
    from fusion_core.methods import info

    specs = {p.name: p for p in info(method).params}
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise UserInputError(f"--param expects NAME=VALUE, got {item!r}.")
        key, value = item.split("=", 1)
        key = key.strip().replace("-", "_")
        if key not in specs:
            raise UserInputError(f"method {method!r} has no parameter {key!r}; it has {sorted(specs)}.")
        out[key] = specs[key].parse(value)
    return out


def _worker_table(est) -> pd.DataFrame:
    res = est.result_
    resp = est.responses_
    df = pd.DataFrame({"worker": res.workers, "skill": res.extras["skills"], "responses": resp.responses_per_worker})
    for key, value in res.extras.items():
        if key == "skills":
            continue
        if isinstance(value, pd.Series) and len(value) == len(res.workers) and value.index.equals(res.workers):
            df[key] = value.to_numpy()
        elif isinstance(value, np.ndarray) and value.ndim == 1 and len(value) == len(res.workers):
            df[key] = value
    return df.sort_values("skill", ascending=False)


def write_outputs(est, out_dir: Path) -> dict[str, Any]:
    """Write labels, posteriors, confusion (long), workers and summary files for a fitted estimator."""
    out_dir.mkdir(parents=True, exist_ok=True)
    res = est.result_
    res.labels.rename("label").reset_index().to_csv(out_dir / "labels.csv", index=False)
    res.probas.reset_index().to_csv(out_dir / "posteriors.csv", index=False)
    if res.confusion is not None:
        w, k, _ = res.confusion.shape
        conf = pd.DataFrame(
            {
                "worker": np.repeat(np.asarray(res.workers, dtype=object), k * k),
                "true": np.tile(np.repeat(np.asarray(res.classes, dtype=object), k), w),
                "reported": np.tile(np.asarray(res.classes, dtype=object), w * k),
                "probability": res.confusion.reshape(-1),
            }
        )
        conf.to_csv(out_dir / "confusion.csv", index=False)
    _worker_table(est).to_csv(out_dir / "workers.csv", index=False)
    summary = res.summary()
    summary["validation"] = est.responses_.report.to_dict()
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _cmd_fit(args: argparse.Namespace) -> int:
    from fusion_core.data.loading import load_responses, read_context, read_gold
    from fusion_core.methods import create, info

    meta = info(args.method)
    params = _parse_params(args.param, args.method)
    resp = load_responses(
        args.answers,
        format=args.format,
        layout=args.layout,
        task=args.task_col,
        worker=args.worker_col,
        label=args.label_col,
        sequence=args.sequence_col,
        position=args.position_col,
        duplicates=args.duplicates,
        max_bytes=int(args.max_mb * 1024 * 1024),
    )
    fit_kwargs: dict[str, Any] = {}
    if args.gold:
        fit_kwargs["true_labels"] = read_gold(args.gold)
    if args.context:
        fit_kwargs["context"] = read_context(args.context, column=args.context_col)
    if args.graph:
        from fusion_core.data.graph import read_graph

        fit_kwargs["graph"] = read_graph(args.graph)
    missing = [
        n
        for n in meta.needs()
        if (n == "sequence" and not resp.has_sequences) or (n in ("graph", "context") and n not in fit_kwargs)
    ]
    if missing:
        hint = {"sequence": "--sequence-col/--position-col", "graph": "--graph FILE", "context": "--context FILE"}
        raise UserInputError(
            f"method {args.method!r} needs {', '.join(missing)}: pass {', '.join(hint[m] for m in missing)}."
        )
    est = create(args.method, **params).fit(resp, **fit_kwargs)
    summary = write_outputs(est, Path(args.out))
    for line in resp.report.messages():
        print(line, file=sys.stderr)
    for w in summary["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    ll = summary["log_likelihood"]
    print(
        f"{args.method}: {summary['items']:,} items, {summary['workers']:,} workers, "
        f"{summary['iterations']} iterations, converged={summary['converged']}, "
        f"log-likelihood={'n/a' if ll is None else f'{ll:.3f}'}, {summary['seconds']:.2f} s -> {args.out}"
    )
    return 0


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
    out.mkdir(parents=True, exist_ok=True)
    sim.responses.to_csv(out / "answers.csv", index=False)
    sim.truth.rename("truth").reset_index().to_csv(out / "truth.csv", index=False)
    print(f"wrote {len(sim.responses):,} responses for {args.items:,} items to {out}/answers.csv (+ truth.csv)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fusion-core", description="Annotator reliability without ground truth.")
    sub = p.add_subparsers(dest="command", required=True)

    m = sub.add_parser("methods", help="list the registered methods")
    m.add_argument("--json", action="store_true", help="machine-readable output")
    m.add_argument("-v", "--verbose", action="store_true", help="show parameters")
    m.set_defaults(func=_cmd_methods)

    f = sub.add_parser("fit", help="fit a method to an answers file and write the results")
    f.add_argument("answers", help="CSV, TSV, Parquet or JSON-lines file of responses")
    f.add_argument("--method", default="ds", help="registered method name (see `fusion-core methods`)")
    f.add_argument("--out", required=True, help="output directory")
    f.add_argument("--format", choices=["csv", "tsv", "parquet", "jsonl"], help="override format detection")
    f.add_argument("--layout", choices=["long", "wide"], default="long")
    f.add_argument("--task-col", default="task")
    f.add_argument("--worker-col", default="worker")
    f.add_argument("--label-col", default="label")
    f.add_argument("--sequence-col", default=None, help="sequence id column (sequential data)")
    f.add_argument("--position-col", default=None, help="position column (sequential data)")
    f.add_argument(
        "--duplicates",
        choices=["keep", "first", "last", "error"],
        default="keep",
        help="what to do with repeated (task, worker) pairs",
    )
    f.add_argument("--gold", help="gold labels file (task, truth) clamped during fitting")
    f.add_argument("--graph", help="item graph: edge list CSV (source,target[,weight]), GraphML or GML")
    f.add_argument("--context", help="per-item context file (task, context)")
    f.add_argument("--context-col", default="context")
    f.add_argument("--param", action="append", metavar="NAME=VALUE", help="method parameter (repeatable)")
    f.add_argument("--max-mb", type=float, default=1024.0, help="refuse inputs larger than this (MB)")
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
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UserInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
