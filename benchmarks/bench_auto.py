"""``auto``'s cost and its simulated-crowd targets (issue 14 "Done when").

1. Time of ``auto`` against one ``ds`` fit on the same data at the same moment (median of ``--repeat``
   alternating runs, both from the answers table, so both include coding the data): every dataset of
   ``../shared/datasets`` and 1M simulated responses (200 000 items × 5, 1000 annotators).  Targets: ≤ 10× ds,
   < 10 s on 1M responses.  The machine is shared: the 1-minute load average is printed with the times.
2. Simulated crowds whose truth is known (:data:`SCENARIOS`): sparse crowds (600 annotators, Zipf activity,
   median ≤ 10 responses each, class prior 80/20, 10 % spammers) where auto must beat full Dawid–Skene by ≥ 2
   points, and dense crowds (30 annotators, ~167 responses each) where it must match it within 0.3 point; then
   MACE crowds (dense, and sparse with imbalanced classes), GLAD crowds (item difficulty), cartels (correlated
   annotators) and dense crowds with 4 imbalanced classes, where auto is compared with DS and with the best of
   ds/ds1/mace/wawa.

    python benchmarks/bench_auto.py [--repeat 3] [--seeds 10] [--skip-real] [--skip-1m] [--skip-sim] [--kinds a,b]
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
from _common import categorical_datasets, load, make_parser

from fusion_core.methods import create
from fusion_core.simulate import dawid_skene
from fusion_core.simulate.dawid_skene import Simulation
from fusion_core.simulate.peer import glad_crowd, mace_crowd
from fusion_core.simulate.spectral import cartel


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(method: str, answers: pd.DataFrame) -> tuple[float, object]:
    t0 = time.perf_counter()
    est = create(method).fit(answers)
    return time.perf_counter() - t0, est


def ratio_row(name: str, answers: pd.DataFrame, repeat: int) -> dict:
    timed("ds", answers)  # warm-up: imports, caches
    ds_s, auto_s = [], []
    for _ in range(repeat):  # alternate, so both see the same load
        ds_s.append(timed("ds", answers)[0])
        t, _ = timed("auto", answers)
        auto_s.append(t)
    d, a = float(np.median(ds_s)), float(np.median(auto_s))
    return {"data": name, "responses": len(answers), "ds_s": d, "auto_s": a, "ratio": a / d, "load": loadavg()}


def timing(repeat: int, real: bool, big: bool) -> None:
    rows = []
    if real:
        for name in categorical_datasets():
            rows.append(ratio_row(name, load(name)[0], repeat))
            print(f"  {rows[-1]}", flush=True)
    if big:
        sim = dawid_skene(
            n_items=200_000, n_workers=1000, n_classes=2, responses_per_item=5, class_prior=[0.8, 0.2],
            spammers=100, worker_activity="zipf", seed=0,
        )  # fmt: skip
        rows.append(ratio_row("simulated 1M", sim.responses, repeat))
        print(f"  {rows[-1]}", flush=True)
    df = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        print("\nTIME: auto vs one ds fit (median of alternating runs; load = 1/5/15-minute load average)")
        print(df.to_string(index=False))
    print(
        f"max ratio {df['ratio'].max():.1f}× (target ≤ 10×); datasets over 10×: {list(df.loc[df['ratio'] > 10, 'data'])}"
    )
    big_rows = df[df["data"] == "simulated 1M"]
    if len(big_rows):
        print(
            f"1M responses: auto {big_rows['auto_s'].iloc[0]:.2f} s (target < 10 s), ds {big_rows['ds_s'].iloc[0]:.2f} s"
        )


def accuracy(est, truth: pd.Series) -> float:
    return float((est.labels_.reindex(truth.index) == truth).mean())


SCENARIOS: dict[str, Callable[[int], Simulation]] = {
    # the two targets
    "sparse": lambda s: dawid_skene(
        n_items=2000, n_workers=600, n_classes=2, responses_per_item=5, class_prior=[0.8, 0.2], spammers=60,
        worker_activity="zipf", seed=s,
    ),
    "dense": lambda s: dawid_skene(n_items=1000, n_workers=30, n_classes=3, responses_per_item=5, seed=s),
    # principle-based scenarios beyond the targets: spammers with personal strategies (MACE's model), dense and
    # sparse with imbalanced classes; item difficulty (GLAD's model); correlated annotators (cartels following a
    # shared target labelling); 4 imbalanced classes with full confusion matrices
    "mace": lambda s: mace_crowd(n_items=1000, n_workers=40, n_spammers=10, n_classes=4, responses_per_item=6, seed=s),
    "mace-sparse": lambda s: mace_crowd(
        n_items=2000, n_workers=400, n_spammers=80, n_classes=4, responses_per_item=5,
        class_prior=[0.55, 0.25, 0.15, 0.05], worker_activity="zipf", seed=s,
    ),
    "glad": lambda s: glad_crowd(n_items=1000, n_workers=30, n_classes=2, responses_per_item=8, seed=s),
    "cartel": lambda s: cartel(m=40, n=800, r=0.25, per_item=8, seed=s),
    "dense-imbalanced": lambda s: dawid_skene(
        n_items=1500, n_workers=50, n_classes=4, responses_per_item=6, class_prior=[0.5, 0.3, 0.15, 0.05], seed=s
    ),
}  # fmt: skip
"""Simulated crowds whose truth is known (``bench_auto.py`` and ``auto_selection_study.py``)."""

REFERENCE = ("ds", "ds1", "mace", "wawa")
"""Methods whose accuracy is shown next to auto's on the simulated crowds (best of them: "best")."""


def simulated(seeds: int, kinds: list[str]) -> None:
    summary = []
    for kind in kinds:
        rows = []
        for s in range(seeds):
            sim = SCENARIOS[kind](s)
            auto = create("auto").fit(sim.responses)
            per_worker = sim.responses.groupby("worker").size()
            row = {"seed": s, "annotators": len(per_worker), "median_responses": float(per_worker.median())}
            row.update({m: accuracy(create(m).fit(sim.responses), sim.truth) for m in REFERENCE})
            row["auto"] = accuracy(auto, sim.truth)
            row["pick"] = "+".join(auto.members_)
            rows.append(row)
        df = pd.DataFrame(rows)
        df["gain_pt"] = 100 * (df["auto"] - df["ds"])
        df["vs_best_pt"] = 100 * (df["auto"] - df[list(REFERENCE)].max(axis=1))
        print(f"\n{kind.upper()} CROWDS")
        with pd.option_context("display.width", 200, "display.float_format", "{:.4f}".format):
            print(df.to_string(index=False))
        line = (
            f"{kind}: auto − ds mean {df['gain_pt'].mean():+.2f} pt (min {df['gain_pt'].min():+.2f}); auto − best of "
            f"{'/'.join(REFERENCE)} mean {df['vs_best_pt'].mean():+.2f} pt; within 1 pt of it on "
            f"{int((df['vs_best_pt'] >= -1).sum())}/{len(df)} seeds"
        )
        if kind == "sparse":
            ok = df["gain_pt"].min() >= 2
            line += f" (target ≥ +2 pt over ds on every seed: {'met' if ok else 'NOT met'})"
        elif kind == "dense":
            ok = df["gain_pt"].mean() >= -0.3
            line += f" (target: mean within 0.3 pt of ds: {'met' if ok else 'NOT met'})"
        print(line)
        summary.append(line)
    print("\nSIMULATED SUITE SUMMARY")
    for line in summary:
        print("  " + line)


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--skip-1m", action="store_true")
    ap.add_argument("--skip-sim", action="store_true")
    ap.add_argument("--kinds", default=",".join(SCENARIOS), help="simulated scenarios, comma-separated")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    print(f"load average at start: {loadavg()} ({os.cpu_count()} cores)")
    if not (args.skip_real and args.skip_1m):
        timing(args.repeat, not args.skip_real, not args.skip_1m)
    if not args.skip_sim:
        simulated(args.seeds, args.kinds.split(","))
    print(f"\nload average at end: {loadavg()}")


if __name__ == "__main__":
    main()
