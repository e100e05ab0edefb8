"""Benchmark (a): Dawid–Skene speed, peak memory and accuracy against crowd-kit on the same data.

1M responses (200k items, 500 workers, K = 4, 5 per item), fixed 20 iterations, tol 0.  Each
implementation runs in its own subprocess so peak RSS is measured separately.  crowd-kit is an optional
extra (`pip install -e .[bench]`); without it only our figures are printed.

Run: python benchmarks/bench_ds_vs_crowdkit.py [--items 200000 --workers 500 --iters 20]
"""

from __future__ import annotations

import json
import subprocess
import sys

from _common import ROOT, make_parser

CHILD = r"""
import json, sys, time
sys.path.insert(0, {root!r})
from _common import peak_rss_mb
from fusion_core.simulate import dawid_skene
from fusion_core.metrics import accuracy
sim = dawid_skene(n_items={items}, n_workers={workers}, n_classes=4, responses_per_item=5, accuracy=(0.5, 0.9), seed=0)
base = peak_rss_mb()
impl, iters = {impl!r}, {iters}

def fit(n):
    t0 = time.perf_counter()
    if impl == "fusion_core":
        from fusion_core.methods import DawidSkene
        est = DawidSkene(max_iter=n, tol=0.0).fit(sim.responses)
        labels, n_iter = est.labels_, est.n_iter_
    else:
        from crowdkit.aggregation import DawidSkene
        est = DawidSkene(n_iter=n, tol=0.0)
        labels = est.fit_predict(sim.responses)
        n_iter = len(est.loss_history_)
    return time.perf_counter() - t0, labels, n_iter

one, _, _ = fit(1)           # setup + 1 iteration
secs, labels, n_iter = fit(iters)
print(json.dumps(dict(impl=impl, seconds=secs, iterations=n_iter, per_iter=(secs - one) / max(n_iter - 1, 1),
                      setup=one - (secs - one) / max(n_iter - 1, 1),
                      accuracy=accuracy(labels, sim.truth), peak_rss_mb=peak_rss_mb(), data_rss_mb=base,
                      responses=len(sim.responses))))
"""


def run(impl: str, items: int, workers: int, iters: int) -> dict | None:
    code = CHILD.format(root=str(ROOT / "benchmarks"), items=items, workers=workers, impl=impl, iters=iters)
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        print(f"{impl}: failed\n{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--items", type=int, default=200_000)
    ap.add_argument("--workers", type=int, default=500)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    print(
        f"Dawid–Skene, {args.items * 5:,} responses ({args.items:,} items, {args.workers} workers, K=4), "
        f"{args.iters} iterations, tol 0"
    )
    ours = run("fusion_core", args.items, args.workers, args.iters)
    try:
        import crowdkit  # noqa: F401

        theirs = run("crowd-kit", args.items, args.workers, args.iters)
    except ImportError:
        theirs = None
        print("crowd-kit not installed (pip install -e .[bench]); printing fusion_core only")
    rows = [r for r in (ours, theirs) if r]
    print("s/iter = (time for N iterations − time for 1) / (N − 1): the marginal cost of one EM iteration;")
    print("setup = input coding/validation plus initialisation (total − N · s/iter).")
    print(
        f"{'implementation':<14} {'total s':>8} {'setup s':>8} {'s/iter':>8} {'iters':>5} {'accuracy':>9} {'peak RSS MB':>12}"
    )
    for r in rows:
        print(
            f"{r['impl']:<14} {r['seconds']:8.3f} {r['setup']:8.3f} {r['per_iter']:8.4f} {r['iterations']:5d} "
            f"{r['accuracy']:9.4f} {r['peak_rss_mb']:12.0f}"
        )
    if ours and theirs:
        print(
            f"speed-up per iteration: {theirs['per_iter'] / ours['per_iter']:.1f}x; "
            f"end to end: {theirs['seconds'] / ours['seconds']:.1f}x; "
            f"accuracy difference: {ours['accuracy'] - theirs['accuracy']:+.4f}"
        )


if __name__ == "__main__":
    main()
