"""Bayesian DS (``bds``) on many classes against ``ds`` (issue 21 item 6): time, iterations, converged, accuracy.

Times are wall and CPU seconds (CPU is the steadier figure on the shared machine; ``--repeat n`` reports the
fastest of n fits of each method).  The case: a Dawid–Skene crowd from ``fusion_core.simulate.dawid_skene`` with 200 classes and 1,500 responses
(300 items, 5 annotators who each label every item, accuracy U(0.6, 0.9)).  The issue's target is ``bds`` ≤ 10 ×
``ds`` and converged.  ``--public`` also prints ``bds`` accuracy, time and iterations on the public sets.

Run: python benchmarks/bds_many_classes.py [--items 300 --workers 5 --classes 200 --seeds 0 --repeat 1] [--public]
"""

from __future__ import annotations

import os
import time
import warnings

from _common import categorical_datasets, load, make_parser


def fit(method: str, answers):
    from fusion_core.methods import create

    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = create(method).fit(answers)
    return est, time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--items", type=int, default=300)
    ap.add_argument("--workers", type=int, default=5)
    ap.add_argument("--classes", type=int, default=200)
    ap.add_argument("--seeds", default="0", help="comma-separated simulation seeds")
    ap.add_argument("--repeat", type=int, default=1, help="fit each method this many times; report the fastest")
    ap.add_argument("--public", action="store_true", help="also fit bds on every public crowd/ensemble set")
    args = ap.parse_args()

    from fusion_core.metrics import accuracy
    from fusion_core.simulate import dawid_skene

    print(f"load average {os.getloadavg()[0]:.2f} (timings are noisy on a shared machine)")
    tiny = dawid_skene(n_items=20, n_workers=3, n_classes=2, responses_per_item=3, seed=0).responses
    for method in ("ds", "bds"):  # imports: create("bds") loads every registered method (networkx, ...), ~1 s CPU
        fit(method, tiny)
    print(
        f"{'seed':>4} {'responses':>9} {'method':>6} {'wall s':>8} {'CPU s':>8} {'iters':>6} {'converged':>9} {'accuracy':>8}"
    )
    for seed in [int(s) for s in args.seeds.split(",") if s]:
        sim = dawid_skene(
            n_items=args.items,
            n_workers=args.workers,
            n_classes=args.classes,
            responses_per_item=args.workers,
            seed=seed,
        )
        secs, cpu = {}, {}
        for method in ("ds", "bds"):
            runs = [fit(method, sim.responses) for _ in range(max(args.repeat, 1))]  # same fit each time (seeded)
            est, secs[method], cpu[method] = runs[0][0], min(r[1] for r in runs), min(r[2] for r in runs)
            print(
                f"{seed:>4} {len(sim.responses):>9} {method:>6} {secs[method]:>8.3f} {cpu[method]:>8.3f} {est.n_iter_:>6} "
                f"{bool(est.result_.converged)!s:>9} {accuracy(est.labels_, sim.truth):>8.4f}",
                flush=True,
            )
        print(f"     bds / ds time: {secs['bds'] / secs['ds']:.1f}x wall, {cpu['bds'] / cpu['ds']:.1f}x CPU")
    if args.public:
        print(f"\n{'dataset':<16}{'bds acc':>8}{'s':>8}{'iters':>7}{'conv':>6}")
        for name in categorical_datasets():
            answers, truth = load(name)
            est, sec, _ = fit("bds", answers)
            acc = float((est.labels_.reindex(truth.index).astype(str) == truth.astype(str)).mean())
            print(f"{name:<16}{acc:>8.4f}{sec:>8.2f}{est.n_iter_:>7}{bool(est.result_.converged)!s:>6}", flush=True)


if __name__ == "__main__":
    main()
