"""Reliability over time on simulated crowds (docs/AUDIT.md, *Over time*): detection rate of a 0.2 drop in one
annotator's accuracy, the error of the change time found (share of the data's time span), and the false-alarm rate
on crowds without a change — over N seeds.

    python benchmarks/drift.py --seeds 200
    python benchmarks/drift.py --seeds 50 --items 1600 --per-item 5      # fewer responses per annotator
    python benchmarks/drift.py --seeds 0 --null-seeds 400                 # the false-alarm rate alone

Each seed: ``fusion_core.simulate.drift.drift_crowd`` (with and without the drop), Dawid–Skene fit, then
``drift_report``.  A drifting crowd counts as detected when the drifting annotator is flagged; the change-time
error is measured on the detected ones.  A false alarm is counted **per crowd**: a crowd without drift with at
least one annotator flagged counts once, however many are flagged — the rate the rule's ``alpha`` bounds (the
test is exact, so the rate is ≈ alpha, not below it); other annotators flagged in a drifting crowd are reported
apart.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from _common import make_parser

from fusion_core.data.loading import load_responses
from fusion_core.diagnostics.drift import drift_report
from fusion_core.methods import create
from fusion_core.simulate.drift import drift_crowd


def one(seed: int, drift: bool, args: argparse.Namespace) -> tuple[bool, float, bool]:
    """(drifting annotator flagged, change-time error / span, another annotator flagged)."""
    sim = drift_crowd(
        n_items=args.items,
        n_workers=args.workers,
        responses_per_item=args.per_item,
        n_classes=args.classes,
        drift=drift,
        drop=args.drop,
        rise=args.rise,
        seed=seed,
    )
    resp = load_responses(sim.responses, time="time")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = create("ds").fit(resp).result_
    rep = drift_report(resp, fit.posterior, random_state=seed)
    flagged = {str(w) for w in rep.workers[rep.changed]}
    hit = sim.drifting is not None and sim.drifting in flagged
    err = np.nan
    if hit:
        j = rep.workers.get_loc(sim.drifting)
        err = abs(float(rep.change_time[j]) - sim.change_time) / sim.span
    return hit, err, bool(flagged - {sim.drifting})


def main() -> None:
    p = make_parser(__doc__)
    p.add_argument("--seeds", type=int, default=20, help="simulated crowds with and without drift (default 20)")
    p.add_argument("--null-seeds", type=int, default=None, help="crowds without drift (default: --seeds)")
    p.add_argument("--null-from", type=int, default=0, help="first crowd without drift (seed 10000 + this)")
    p.add_argument("--items", type=int, default=3000)
    p.add_argument("--workers", type=int, default=20)
    p.add_argument("--per-item", type=int, default=7)
    p.add_argument("--classes", type=int, default=2)
    p.add_argument("--drop", type=float, default=0.2, help="change in the drifting annotator's accuracy")
    p.add_argument("--rise", action="store_true", help="the accuracy rises instead of dropping")
    args = p.parse_args()
    t0, c0 = time.perf_counter(), time.process_time()
    drifted = [one(s, True, args) for s in range(args.seeds)]
    n_null = args.seeds if args.null_seeds is None else args.null_seeds
    null = [one(10_000 + s, False, args) for s in range(args.null_from, args.null_from + n_null)]
    hits = np.array([d[0] for d in drifted], dtype=bool)
    errs = np.array([d[1] for d in drifted if d[0]])
    others = np.array([d[2] for d in drifted], dtype=bool)
    alarms = np.array([n[2] for n in null], dtype=bool)
    n = args.seeds
    print(
        f"crowds: {args.items} items x {args.per_item} responses, {args.workers} annotators "
        f"(~{args.items * args.per_item // args.workers} responses each), {args.classes} classes, "
        f"{'rise' if args.rise else 'drop'} {args.drop}"
    )
    if n:
        print(f"detection rate            {hits.mean():.3f} ({hits.sum()}/{n})")
    if len(errs):
        print(
            f"change-time error / span  mean {errs.mean():.4f}, median {np.median(errs):.4f}, max {errs.max():.4f}; "
            f"within 10%: {(errs <= 0.1).mean():.3f}"
        )
    if n_null:
        print(
            f"false alarms, no drift    {alarms.mean():.3f} ({alarms.sum()}/{n_null} crowds with any annotator "
            f"flagged; seeds {10_000 + args.null_from}–{10_000 + args.null_from + n_null - 1})"
        )
    if n:
        print(f"others flagged, drift     {others.mean():.3f} ({others.sum()}/{n} drifting crowds)")
    print(
        f"time: {time.perf_counter() - t0:.1f} s wall, {time.process_time() - c0:.1f} s CPU for {n + n_null} crowds; "
        f"load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
