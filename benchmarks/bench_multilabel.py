"""multilabel-em scaling (issue 15 item 3): time and peak memory at 100k and 1M items, and the per-item time ratio.

Data: ``multilabel_crowd`` (10 labels, 500 annotators, 5 responses per item, true sets of ≤ 2 labels), format A
text (``"|"``-joined sets), as a user uploads it.  Each size runs in its own child process: the parse
(``parse_multilabel``) and the fit (``multilabel-em`` defaults) are timed apart, wall and CPU (process time); peak
RSS is sampled every 5 ms during parse + fit and printed above the RSS before them.  The per-item ratio is
(CPU seconds per item at the larger size) / (at the smaller); per iteration too, since the EM may stop after a
different number of iterations.  Linear scaling ⇔ ratio ≈ 1.  The machine is shared: the load average is printed;
wall times include waiting for a core, CPU times do not.

    python benchmarks/bench_multilabel.py [--sizes 100000,1000000] [--code DIR] [--timeout 1800]

``--code DIR`` runs another checkout's ``fusion_core`` (e.g. an exported older commit) for a before/after figure.

Measured 2026-11-26 (2 cores shared, load 2–10; 386 admissible sets, M = 4):
before (c73eabb) 100k items: parse 1.49 s CPU, fit 55.3 s CPU (1.04 s/iteration), peak +531 MB;
after 100k: parse 0.18 s, fit 19.8 s CPU (0.37 s/iteration), peak +152 MB; 1M: parse 2.4 s, fit 216 s CPU
(3.5 s/iteration, 61 iterations), peak +1.2 GB; per-item CPU ratio 1M / 100k = 1.09 (fit per iteration 0.95).
Same log-likelihood and accuracy before and after.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

from _common import ROOT, make_parser

CHILD = r"""
import json, os, threading, time, warnings
warnings.simplefilter("ignore")
from fusion_core.simulate.multilabel import multilabel_crowd
from fusion_core.data.multilabel import parse_multilabel
from fusion_core.methods import create

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

sim = multilabel_crowd(n_items=__items__, n_labels=10, n_workers=500, responses_per_item=5, seed=0)
df = sim.responses
base = rss(); peak = [base]; stop = threading.Event()
def sample():
    while not stop.is_set():
        peak[0] = max(peak[0], rss()); time.sleep(0.005)
th = threading.Thread(target=sample, daemon=True); th.start()
t0 = time.perf_counter(); c0 = time.process_time()
d = parse_multilabel(df)
t1 = time.perf_counter(); c1 = time.process_time()
est = create("multilabel-em").fit(d)
t2 = time.perf_counter(); c2 = time.process_time()
stop.set(); th.join()
acc = float((est.labels_ == sim.truth.reindex(est.labels_.index)).mean())
print(json.dumps(dict(responses=len(df), parse_wall=t1 - t0, parse_cpu=c1 - c0, fit_wall=t2 - t1, fit_cpu=c2 - c1,
                      n_iter=est.n_iter_, sets=len(est.model_.Z), peak=(peak[0] - base) / 1e6, rss=peak[0] / 1e6,
                      accuracy=acc, ll=est.log_likelihood_)))
"""


def load() -> str:
    a, b, c = os.getloadavg()
    return f"[load {a:.1f} {b:.1f} {c:.1f}, {os.cpu_count()} cores]"


def run(items: int, code: str, timeout: float) -> dict | None:
    env = {**os.environ, "PYTHONPATH": code + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD.replace("__items__", str(items))],
            check=False,
            capture_output=True,
            text=True,
            cwd=code,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"> {timeout:.0f} s (timed out)"}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--code", default=str(ROOT), help="checkout whose fusion_core is measured")
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args()
    print(f"multilabel-em scaling, code from {args.code} {load()}")
    done: list[tuple[int, dict]] = []
    for items in (int(s) for s in args.sizes.split(",")):
        r = run(items, args.code, args.timeout)
        if not r or "error" in r:
            print(f"{items:,} items: {r and r.get('error')}")
            continue
        done.append((items, r))
        print(
            f"{items:,} items ({r['responses']:,} responses, {r['sets']} sets, {r['n_iter']} iterations): "
            f"parse {r['parse_cpu']:.2f} s CPU ({r['parse_wall']:.2f} wall), fit {r['fit_cpu']:.1f} s CPU "
            f"({r['fit_wall']:.1f} wall, {r['fit_cpu'] / r['n_iter']:.3f} s CPU/iteration); peak RSS "
            f"+{r['peak']:.0f} MB over the loaded data ({r['rss']:.0f} MB total); exact-set accuracy "
            f"{r['accuracy']:.4f}; log-lik {r['ll']:.6g} {load()}",
            flush=True,
        )
    for (n0, a), (n1, b) in itertools.pairwise(done):
        print(
            f"per-item CPU ratio {n1:,} / {n0:,} items: parse + fit {(b['parse_cpu'] + b['fit_cpu']) / n1 / ((a['parse_cpu'] + a['fit_cpu']) / n0):.2f}, parse "
            f"{b['parse_cpu'] / n1 / (a['parse_cpu'] / n0):.2f}, fit per iteration "
            f"{b['fit_cpu'] / b['n_iter'] / n1 / (a['fit_cpu'] / a['n_iter'] / n0):.2f}; peak memory per item "
            f"{b['peak'] / n1 / (a['peak'] / n0):.2f} (linear ⇔ ≈ 1)"
        )


if __name__ == "__main__":
    main()
