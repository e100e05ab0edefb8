"""Benchmark: ``detect_cartels`` at 100k and 1M simulated binary responses (issue 15 item 3: ≤ 5 s at 1M).

Each size runs in a fresh process (imports and the numba cache load are timed apart, as a warm-up on a 50k-response
crowd of 100 annotators that runs the same sparse bootstrap path; ``--cold`` times the first call instead),
``--repeat`` times; prints the best and median CPU and wall seconds, the status, the first p-value, the
replicates the first test drew (Besag–Clifford stop) and the load.  Crowds: independent two-coin annotators, 5
responses per item (100k: 100 annotators, 20k items; 1M: 500 annotators, 200k items — the bench_scale crowd);
``--cartel`` adds a 1M crowd of 500 annotators with a 100-member cartel (every test then needs all B replicates).
Run: python benchmarks/bench_cartels.py [--sizes 100000 1000000] [--repeat 3] [--cartel] [--cold]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _common import make_parser

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, time, warnings
warnings.simplefilter("ignore")
import numpy as np
from fusion_core.diagnostics.cartels import detect_cartels
from fusion_core.simulate import dawid_skene
from fusion_core.simulate.spectral import cartel
n, kind, cold = __n__, __kind__, __cold__
if kind == "cartel":
    sim = cartel(m=500, n=n // 10, r=0.2, pi_c=0.5, observed=0.02, seed=0)
else:
    sim = dawid_skene(n_items=n // 5, n_workers=100 if n <= 100_000 else 500, n_classes=2, responses_per_item=5,
                      seed=0)
if not cold:  # warm-up: imports and compiled kernels from the cache (a crowd large enough for the sparse bootstrap;
    # the former 1,000-response slice of the crowd could not run, so nothing was loaded)
    detect_cartels(dawid_skene(n_items=10_000, n_workers=100, n_classes=2, responses_per_item=5, seed=1).responses,
                   n_bootstrap=2)
t0, c0 = time.perf_counter(), time.process_time()
rep = detect_cartels(sim.responses)
print(json.dumps(dict(wall=time.perf_counter() - t0, cpu=time.process_time() - c0, responses=len(sim.responses),
                      status=rep.status, p=float(rep.p_value[0]) if len(rep.p_value) else None,
                      drawn=len(rep.null_statistic), groups=len(rep.groups), m=len(rep.workers))))
"""


def run(n: int, kind: str, cold: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    code = CHILD.replace("__n__", str(n)).replace("__kind__", repr(kind)).replace("__cold__", repr(cold))
    proc = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT, env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = make_parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cartel", action="store_true")
    p.add_argument("--cold", action="store_true", help="no warm-up: the first call's time (imports, numba cache load)")
    args = p.parse_args()
    cases = [(n, "independent") for n in args.sizes] + ([(1_000_000, "cartel")] if args.cartel else [])
    for n, kind in cases:
        runs = [run(n, kind, args.cold) for _ in range(args.repeat)]
        cpu = sorted(r["cpu"] for r in runs)
        wall = sorted(r["wall"] for r in runs)
        r = runs[0]
        a, b, c = os.getloadavg()
        print(
            f"detect_cartels {kind}{' (cold)' if args.cold else ''} {r['responses']:,} responses ({r['m']} annotators analysed): CPU best "
            f"{cpu[0]:.1f} s, median {cpu[len(cpu) // 2]:.1f} s; wall best {wall[0]:.1f} s, median "
            f"{wall[len(wall) // 2]:.1f} s (target <= 5 s at 1M); {r['status']}, p = {r['p']}, first test drew "
            f"{r['drawn']} of 200 replicates, {r['groups']} group(s) [load {a:.1f} {b:.1f} {c:.1f}, "
            f"{os.cpu_count()} cores]",
            flush=True,
        )


if __name__ == "__main__":
    main()
