"""Worst fit time per registered method over generated small inputs (issue 11 item 5; prints figures, not a test).

Every method is fitted on ``--inputs`` inputs of its kind drawn by :func:`fusion_core.simulate.adversarial.
adversarial_case` (≤ 2,000 responses: many labels, single-response annotators, exactly tied items, extreme context
values, up to 200 labels for multi-label data).  Prints, per method, the worst and median fit time, the seed of
the worst input, how many inputs were refused with a ``UserInputError`` and any other exception.  Targets: < 5 s
for ``context-em`` and ``multilabel-em``, ≤ 30 s for every method.  Times are the process CPU time of each fit
(single-threaded, so what the fit takes on an idle core) and, for the worst input, its wall-clock time too with
the machine's load average: on a shared machine wall-clock times are upper bounds.

    python benchmarks/bench_pathologies.py [--inputs 200] [--methods context-em,multilabel-em] [--max-responses 2000]

BLAS runs single-threaded here (threadpoolctl): on a loaded machine multi-threaded BLAS on these small matrices
measured 20 ms per 794 × 12 × 217 product instead of 0.1 ms, which would time the scheduler, not the method.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from _common import make_parser

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET = {"context-em": 5.0, "multilabel-em": 5.0}
LIMIT = 30.0


def main(argv: list[str] | None = None) -> int:
    from threadpoolctl import threadpool_limits

    from fusion_core.errors import UserInputError
    from fusion_core.methods import available, create
    from fusion_core.methods.context.chain import warm_chain_programme
    from fusion_core.methods.numerics import jit_enabled
    from fusion_core.simulate.adversarial import adversarial_case

    ap = make_parser(__doc__)
    ap.add_argument("--inputs", type=int, default=200, help="generated inputs per method")
    ap.add_argument("--methods", default="", help="comma-separated method names (default: all registered)")
    ap.add_argument("--max-responses", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    args = ap.parse_args(argv)
    names = [m.name for m in available()] if not args.methods else args.methods.split(",")
    if jit_enabled() and "context-em" in names:  # compiled once per machine (cached on disk), loaded once per process
        t0 = time.perf_counter()
        warm_chain_programme()
        print(f"context-em's compiled chain kernel loaded in {time.perf_counter() - t0:.2f} s (not in the times below)")
    print(f"load average {os.getloadavg()[0]:.1f} / {os.cpu_count()} cores; {args.inputs} inputs per method")
    print(
        f"{'method':<14} {'worst s':>8} {'(wall)':>8} {'median s':>9} {'worst input':>12} {'refused':>8} {'errors':>7}  target"
    )
    failed = False
    with threadpool_limits(1):
        for name in names:
            kind = next((k for k in create(name).inputs if k != "plain"), "plain")
            times, refused, errors, worst = [], 0, [], (0.0, -1, "", 0.0)
            for seed in range(args.seed, args.seed + args.inputs):
                case = adversarial_case(seed, kind, max_responses=args.max_responses)
                t0, c0 = time.perf_counter(), time.process_time()
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        create(name).fit(case.df, **case.kwargs)
                except UserInputError:
                    refused += 1
                except Exception as exc:  # reported, not raised: the benchmark measures every input
                    errors.append(f"seed {seed}: {type(exc).__name__}: {exc}")
                dt, wall = time.process_time() - c0, time.perf_counter() - t0
                times.append(dt)
                if dt > worst[0]:
                    worst = (dt, seed, case.shape, wall)
            target = TARGET.get(name, LIMIT)
            ok = worst[0] < target and not errors
            failed |= not ok
            print(
                f"{name:<14} {worst[0]:>8.2f} {worst[3]:>8.2f} {float(np.median(times)):>9.3f} {f'seed {worst[1]}':>12} {refused:>8} "
                f"{len(errors):>7}  {'<' if name in TARGET else '≤'} {target:.0f} s {'ok' if ok else 'OVER'}",
                flush=True,
            )
            print(f"{'':<14} worst input: {worst[2]}")
            top = np.argsort(times)[::-1][:3]
            print(f"{'':<14} slowest: " + ", ".join(f"seed {args.seed + int(k)} {times[k]:.2f} s" for k in top))
            for e in errors[:3]:
                print(f"{'':<14} {e[:160]}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
