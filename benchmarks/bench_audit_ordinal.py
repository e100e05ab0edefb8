"""Ordinal audit time against the nominal audit of the same responses (issue 26 item 3: ordinal ≤ 5× nominal).

Times ``run_audit(data)`` and ``run_audit(data, label_type="ordinal")`` (defaults otherwise: ``auto``, agreement
bootstrap, cartel check, 100 rating-bootstrap replicates), one after the other in this process, and prints the
wall time, the stage times and the ratio.  Data: a simulated ordinal crowd (``ordinal_crowd``, 5 levels, 5
ratings per item) or a public set (``--set relevance``).

    python benchmarks/bench_audit_ordinal.py                   # 100k simulated responses
    python benchmarks/bench_audit_ordinal.py --responses 20000 --set relevance
"""

from __future__ import annotations

import os
import time
import warnings

from _common import load, make_parser

from fusion_core.diagnostics.audit import run_audit
from fusion_core.simulate.ratings import ordinal_crowd


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--responses", type=int, default=100_000, help="simulated responses (5 per item)")
    ap.add_argument("--workers", type=int, default=250, help="simulated annotators")
    ap.add_argument("--set", default=None, help="a public set instead of the simulation (e.g. relevance)")
    ap.add_argument("--rating-bootstrap", type=int, default=100, help="rating-bootstrap replicates")
    args = ap.parse_args()
    if args.set:
        data, _ = load(args.set)
        name = args.set
    else:
        sim = ordinal_crowd(
            n_items=args.responses // 5, n_workers=args.workers, n_lenient=25, n_harsh=25, n_noisy=20, seed=0
        )
        data, name = sim.responses, "ordinal_crowd"
    print(f"{name}: {len(data):,} responses, {data['worker'].nunique():,} annotators; load {os.getloadavg()[0]:.1f}")
    seconds = {}
    for label_type in ("nominal", "ordinal"):
        t0, c0 = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            audit = run_audit(data, label_type=label_type, rating_bootstrap=args.rating_bootstrap)
        seconds[label_type] = time.perf_counter() - t0
        stages = ", ".join(f"{s.stage} {s.seconds:.1f}" for s in audit.timings)
        print(f"{label_type:8s} {seconds[label_type]:6.1f} s wall, {time.process_time() - c0:6.1f} s CPU ({stages})")
    print(f"ordinal / nominal: {seconds['ordinal'] / seconds['nominal']:.1f}x; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
