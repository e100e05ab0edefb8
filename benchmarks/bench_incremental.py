"""Incremental Dawid–Skene updates (issue 22, item 4): 10 batches of 100k responses, each added with
``update`` (warm start from the previous fit) against a full refit of everything so far.

Prints, per batch: responses so far, the update's seconds and EM iterations, the full refit's seconds and
iterations (both from a DataFrame, so both include coding: the batch's for the update, everything for the refit),
the ratio, the same ratio in CPU seconds of this process (``time.process_time``: on a machine shared with other
jobs the wall-clock ratio mostly measures the others' load), and the share of items whose label differs (and the
largest posterior difference).  Each timing is the least of ``--repeat`` runs, so other jobs on a shared machine
inflate it less; the load average is printed.  The updates are ``--repeat`` live streams (each fitted on the first
batch, then updated batch after batch), so every timed update starts from the state a user's stream has: the
response arrays and the sparse layout with the spare room the earlier appends left (an append fills it in place,
or copies everything into a larger buffer when it is used up, as a stream does every few batches).

The fitted tables (``labels_``, ``probas_``, ``errors_``, ``skills_``) are built on first read, so neither timing
includes them unless ``--read`` is given (then both read ``labels_`` and ``probas_`` inside the timing, as a user
who looks at the result after every batch would).  ``passes`` is the number of E-steps over all responses in the
update's full phase (its local phase's E-steps cover the touched items only).

``--phases`` adds, per batch, where the fastest update's CPU went (ms): coding and appending the batch, the local
phase, the full phase, the rest; and ``floor``, the least share of the refit any warm start ending on a plain EM
step that meets the refit's rule could take with these costs: coding + local + rest + two full passes (a pass
costed as the full phase's time over its passes).

``--base N`` fits the first N responses instead of one batch, then adds the batches: the same updates onto a larger
collection (e.g. ``--base 1000000 --batches 11``: 10 batches of 100k onto 1M), where a batch is a smaller share of
the whole.

    python benchmarks/bench_incremental.py [--method ds|ds1] [--batches 10] [--batch-size 100000] [--repeat 3]
        [--base N] [--read] [--phases]
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings

import numpy as np
from _common import make_parser, peak_rss_mb

from fusion_core.methods import create
from fusion_core.simulate import dawid_skene


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--method", default="ds", choices=["ds", "ds1"])
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=100_000)
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument(
        "--base",
        type=int,
        default=None,
        help="responses in the first fit (default: one batch); the other batches are --batch-size each",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="timings: the least of this many runs")
    ap.add_argument(
        "--order",
        choices=["tasks", "random"],
        default="tasks",
        help="tasks: each batch brings new tasks with their responses (tasks published in batches); random: "
        "responses in random order, so a batch touches ~40%% of the tasks seen so far",
    )
    ap.add_argument("--read", action="store_true", help="read labels_ and probas_ inside both timings")
    ap.add_argument("--phases", action="store_true", help="print the update's CPU by phase and the floor")
    args = ap.parse_args()
    base = args.batch_size if args.base is None else args.base
    n = base + (args.batches - 1) * args.batch_size
    per_item = 5
    sim = dawid_skene(
        n_items=n // per_item,
        n_workers=500,
        n_classes=args.classes,
        responses_per_item=per_item,
        accuracy=(0.55, 0.9),
        worker_activity="zipf",
        seed=args.seed,
    )
    df = sim.responses[["task", "worker", "label"]]
    if args.order == "random":
        df = df.sample(frac=1.0, random_state=args.seed).reset_index(drop=True)
    ends = [base + i * args.batch_size for i in range(args.batches)]
    batches = [df.iloc[(ends[i - 1] if i else 0) : ends[i]] for i in range(args.batches)]
    print(
        f"{args.method}, {args.order} order: {n:,} responses, {sim.truth.size:,} items, 500 annotators (zipf), K = {args.classes}; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    warnings.simplefilter("ignore")
    create(args.method).fit(df.iloc[:200_000])  # warm-up: imports and the compiled kernels (≥ 200k) out of the timings
    # one live stream per repeat (fit on the first batch, then every batch in turn), so each timed update starts from
    # the state a stream has — its arrays with the spare room earlier appends left, or none — not from a copy
    streams = [create(args.method).fit(batches[0]) for _ in range(args.repeat)]
    print(" batch  responses  update s  local/passes  refit s  passes  ratio  CPU ratio  labels differ  max |Δq|")
    ratios, cpu_ratios, phases = [], [], []
    for b in range(1, args.batches):
        tu = cu = tf = cf = np.inf
        best: dict[str, float] = {}
        for est in streams:
            with _phase_clock(args.phases) as clock:
                t0, c0 = time.perf_counter(), time.process_time()
                est.update(batches[b])
                if args.read:
                    _ = est.labels_, est.probas_
                c1 = time.process_time() - c0
            if c1 < cu:
                best = {**clock, "total": c1}
            tu, cu = min(tu, time.perf_counter() - t0), min(cu, c1)
            t0, c0 = time.perf_counter(), time.process_time()
            full = create(args.method).fit(df.iloc[: ends[b]])
            if args.read:
                _ = full.labels_, full.probas_
            tf, cf = min(tf, time.perf_counter() - t0), min(cf, time.process_time() - c0)
        warm = streams[-1]
        local = warm.result_.details["update"]["local_iterations"]
        lw = warm.labels_.reindex(full.labels_.index)
        differ = float((lw != full.labels_).mean())
        dq = np.abs(warm.probas_.reindex(index=full.probas_.index).to_numpy() - full.probas_.to_numpy()).max()
        ratios.append(tu / tf)
        cpu_ratios.append(cu / cf)
        if args.phases:
            phases.append((b + 1, best, warm.n_iter_, cf))
        print(
            f" {b + 1:5d}  {ends[b]:9,d}  {tu:8.2f}  {local:5d}/{warm.n_iter_:<6d}  {tf:7.2f}  "
            f"{full.n_iter_:6d}  {tu / tf:5.2f}  {cu / cf:9.2f}  {differ:13.5f}  {dq:.1e}"
        )
    print(
        f"update / full refit: median {np.median(ratios):.2f}, worst {max(ratios):.2f} (CPU: median "
        f"{np.median(cpu_ratios):.2f}, worst {max(cpu_ratios):.2f}); load "
        f"{os.getloadavg()[0]:.1f}; peak RSS {peak_rss_mb():.0f} MB"
    )
    if phases:
        print(" batch  update ms  coding  local  full (passes)  rest   refit ms  floor")
        for batch, ph, passes, refit in phases:
            coding = ph["code_batch"] + ph["append_responses"]
            rest = ph["total"] - coding - ph["run_em"] - ph["run_em_extrapolated"]
            floor = coding + ph["run_em"] + rest + 2 * ph["run_em_extrapolated"] / max(passes, 1)
            print(
                f" {batch:5d}  {ph['total'] * 1e3:9.1f}  {coding * 1e3:6.1f}  {ph['run_em'] * 1e3:5.1f}  "
                f"{ph['run_em_extrapolated'] * 1e3:5.1f} ({passes:2d})   {rest * 1e3:5.1f}  {refit * 1e3:8.1f}  "
                f"{floor / refit:5.2f}"
            )


@contextlib.contextmanager
def _phase_clock(on: bool):
    """CPU seconds spent in the update's phases (the incremental module's calls of the batch coding, the local
    and the full EM), while the block runs; nothing is wrapped when ``on`` is false."""
    from fusion_core.methods.dawid_skene import incremental

    names = ("code_batch", "append_responses", "run_em", "run_em_extrapolated")
    spent = dict.fromkeys(names, 0.0)
    saved = {n: getattr(incremental, n) for n in names}

    def timed(name, fn):
        def call(*a, **k):
            c0 = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.process_time() - c0

        return call

    if on:
        for n in names:
            setattr(incremental, n, timed(n, saved[n]))
    try:
        yield spent
    finally:
        for n in names:
            setattr(incremental, n, saved[n])


if __name__ == "__main__":
    main()
