"""Scale benchmark (issue 15): Dawid–Skene per EM iteration against the memory-traffic bound, crowd-kit side by side,
peak memory at 10M responses, and the slow families at 1M responses.  Prints every figure with the load average.

* Bandwidth: numpy copy of 200 MB (``np.copyto``), best of 10; bytes moved = read + written.
* DS per iteration at 1M and 10M responses (K = 4, 5 responses per item, integer ids, 500 / 1000 annotators):
  one EM iteration (fused E-step pass + M-step) timed 20 times on the fitted model, median and best, wall and CPU.
  Bytes per iteration as the issue counts them for the unfused algorithm: the E-step reads the CSR count matrix
  (int32 indices, float64 values, row pointers) and writes the items × K log-joint, the M-step reads the CSR and the
  posteriors again: 2·CSR + 2·items·K·8.  The bound is those bytes over the copy bandwidth; the ratio is time / bound.
  The fused pass moves less (one CSR read without values when every count is 1, one posterior write): printed too.
* crowd-kit's DawidSkene at 1M (same data; run from ``/work/ckvenv`` or ``$CROWDKIT_PYTHON`` if that interpreter
  exists, never a dependency of this project): seconds per iteration = (t(21 iterations) − t(1)) / 20, for both.
* Peak RSS of a DS fit (50 iterations) at 10M responses, sampled every 5 ms above the RSS before the fit, against
  the coded data (item, worker, label int64 arrays).
* ``mm``, ``auto`` and ``detect_cartels`` (binary) at 1M responses; ``multilabel-em`` at 100k and 1M items.

Each figure comes from its own child process (fresh memory, JIT caches warm after the first).  The machine is shared:
wall times include waiting for a core; CPU times (process time) do not.

    python benchmarks/bench_scale.py [--only ds,crowdkit,rss,mm,auto,cartels,multilabel] [--timeout 900]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _common import ROOT, make_parser

CROWDKIT_PYTHON = os.environ.get("CROWDKIT_PYTHON", "/work/ckvenv/bin/python")

GEN = r"""
import numpy as np, pandas as pd
def gen(n_items, n_workers, k=4, r=5, seed=0):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n_items)
    item = np.repeat(np.arange(n_items), r)
    base = rng.integers(0, n_workers, n_items)
    worker = ((base[:, None] + np.arange(r)[None, :] * 7919) % n_workers).ravel()  # r distinct annotators per item
    acc = rng.uniform(0.5, 0.9, n_workers)
    correct = rng.random(n_items * r) < acc[worker]
    label = np.where(correct, truth[item], (truth[item] + rng.integers(1, k, n_items * r)) % k)
    return pd.DataFrame({"task": item, "worker": worker, "label": label}), truth
"""

CHILD_BANDWIDTH = r"""
import json, time, numpy as np
src = np.ones(25_000_000); dst = np.empty_like(src); np.copyto(dst, src)
wall, cpu = [], []
for _ in range(10):
    t0, c0 = time.perf_counter(), time.process_time(); np.copyto(dst, src)
    wall.append(time.perf_counter() - t0); cpu.append(time.process_time() - c0)
print(json.dumps({"gbs_wall": 2 * src.nbytes / min(wall) / 1e9, "gbs_cpu": 2 * src.nbytes / max(min(cpu), 1e-9) / 1e9}))
"""

CHILD_DS = (
    GEN
    + r"""
import json, sys, time, warnings
import numpy as np
from fusion_core import Responses
from fusion_core.methods import DawidSkene
from fusion_core.methods.base import initial_posterior
from fusion_core.methods.dawid_skene.core import DawidSkeneModel
from fusion_core.methods.dawid_skene import sweep
warnings.simplefilter("ignore")
n_items, n_workers = __items__, __workers__
df, truth = gen(n_items, n_workers)
resp = Responses.from_frame(df)
del df
model = DawidSkeneModel(resp, keep_joint=False)
state = model.start(initial_posterior(resp, "mv"))
e = model.e_step(state)  # compiles (or loads) the kernel
wall, cpu = [], []
for _ in range(20):
    t0, c0 = time.perf_counter(), time.process_time()
    state = model.m_step(e.stats)
    model.recycle(e)
    e = model.e_step(state)
    wall.append(time.perf_counter() - t0); cpu.append(time.process_time() - c0)
acc = float((np.argmax(e.posterior, axis=1) == truth[resp.items.to_numpy()]).mean())
from fusion_core.methods import MajorityVote
mv_wall, mv_cpu = [], []
for _ in range(5):  # majority vote's work: one vote-count pass over the coded responses, then the shares
    t0, c0 = time.perf_counter(), time.process_time()
    MajorityVote()._fit(resp, gold=None, graph=None, context=None)
    mv_wall.append(time.perf_counter() - t0); mv_cpu.append(time.process_time() - c0)
mv_bytes = resp.item.nbytes + resp.label.nbytes + 2 * resp.n_items * resp.n_classes * 8
def fit(n):
    t0, c0 = time.perf_counter(), time.process_time()
    DawidSkene(max_iter=n, tol=0.0).fit(resp)
    return time.perf_counter() - t0, time.process_time() - c0
(one, one_c), (many, many_c) = fit(1), fit(21)
a = resp.counts
csr = a.indptr.nbytes + a.nnz * 4 + a.nnz * 8
q = resp.n_items * resp.n_classes * 8
d = sweep.sweep_data(resp)
print(json.dumps(dict(responses=resp.n_responses, items=resp.n_items, wall_med=float(np.median(wall)),
    wall_min=min(wall), cpu_med=float(np.median(cpu)), cpu_min=min(cpu), fit_per_iter=(many - one) / 20,
    fit_per_iter_cpu=(many_c - one_c) / 20,
    bytes_unfused=2 * csr + 2 * q, bytes_fused=d.nbytes + q, backend=sweep.default_backend(resp.n_responses),
    threads=sweep.n_threads(), accuracy=acc, mv_wall=min(mv_wall), mv_cpu=min(mv_cpu), mv_bytes=mv_bytes)))
"""
)

CHILD_CROWDKIT = (
    GEN
    + r"""
import json, time, warnings
warnings.simplefilter("ignore")
from crowdkit.aggregation import DawidSkene
df, truth = gen(__items__, __workers__)
def fit(n):
    t0, c0 = time.perf_counter(), time.process_time()
    DawidSkene(n_iter=n, tol=0.0).fit_predict(df)
    return time.perf_counter() - t0, time.process_time() - c0
one, many = fit(1), fit(21)
print(json.dumps(dict(fit_per_iter=(many[0] - one[0]) / 20, fit_per_iter_cpu=(many[1] - one[1]) / 20)))
"""
)

CHILD_RSS = (
    GEN
    + r"""
import json, os, threading, time, warnings, gc
import numpy as np
from fusion_core import Responses
from fusion_core.methods import DawidSkene
warnings.simplefilter("ignore")
df, truth = gen(__items__, __workers__)
resp = Responses.from_frame(df)
del df; gc.collect()
coded = resp.item.nbytes + resp.worker.nbytes + resp.label.nbytes
page = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page
DawidSkene(max_iter=2, tol=0.0).fit(resp.subset(np.arange(resp.n_responses) < 300_000))  # JIT warm-up
gc.collect()
base = rss(); peak = [base]; done = threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], rss()); time.sleep(0.005)
th = threading.Thread(target=sample); th.start()
t0 = time.perf_counter(); est = DawidSkene(max_iter=50, tol=0.0).fit(resp); secs = time.perf_counter() - t0
done.set(); th.join()
print(json.dumps(dict(coded=coded, base=base, peak=peak[0], seconds=secs, n_iter=est.n_iter_)))
"""
)

CHILD_METHOD = r"""
import json, time, warnings
warnings.simplefilter("ignore")
from fusion_core.simulate import dawid_skene
what = __what__
sim = dawid_skene(n_items=200_000, n_workers=500, n_classes=2 if what == "cartels" else 4, responses_per_item=5, seed=0)
t0 = time.perf_counter(); c0 = time.process_time()
if what == "cartels":
    from fusion_core.diagnostics.cartels import detect_cartels
    out = detect_cartels(sim.responses).status
else:
    from fusion_core.methods import create
    out = str(create(what).fit(sim.responses).result_.method)
print(json.dumps(dict(seconds=time.perf_counter() - t0, cpu=time.process_time() - c0, out=out,
                      responses=len(sim.responses))))
"""

CHILD_MULTILABEL = r"""
import json, time, warnings
warnings.simplefilter("ignore")
from fusion_core.simulate.multilabel import multilabel_crowd
from fusion_core.methods import create
sim = multilabel_crowd(n_items=__items__, n_labels=10, n_workers=500, responses_per_item=5, seed=0)
t0 = time.perf_counter(); c0 = time.process_time()
est = create("multilabel-em").fit(sim.responses)
print(json.dumps(dict(seconds=time.perf_counter() - t0, cpu=time.process_time() - c0, n_iter=est.n_iter_,
                      responses=len(sim.responses))))
"""


def child(code: str, timeout: float, python: str = sys.executable, **fill: object) -> dict | None:
    for key, value in fill.items():
        code = code.replace(f"__{key}__", str(value))
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        proc = subprocess.run(
            [python, "-c", code], check=False, capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"> {timeout:.0f} s (timed out)"}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def load() -> str:
    a, b, c = os.getloadavg()
    return f"[load {a:.1f} {b:.1f} {c:.1f}, {os.cpu_count()} cores]"


def ds_section(timeout: float, with_crowdkit: bool) -> None:
    bw = child(CHILD_BANDWIDTH, timeout) or {}
    print(f"copy bandwidth (read + write): {bw['gbs_wall']:.1f} GB/s wall, {bw['gbs_cpu']:.1f} GB/s CPU time {load()}")
    ours_1m = None
    for items, workers in ((200_000, 500), (2_000_000, 1000)):
        r = child(CHILD_DS, timeout, items=items, workers=workers)
        if not r or "error" in r:
            print(f"DS {items * 5:,} responses: {r and r.get('error')}")
            continue
        if items == 200_000:
            ours_1m = r
        bound_w = r["bytes_unfused"] / (bw["gbs_wall"] * 1e9) * 1e3
        bound_c = r["bytes_unfused"] / (bw["gbs_cpu"] * 1e9) * 1e3
        fused_c = r["bytes_fused"] / (bw["gbs_cpu"] * 1e9) * 1e3
        print(
            f"DS {r['responses']:,} responses ({r['items']:,} items, K=4; {r['backend']}, {r['threads']} thread(s)): "
            f"per iteration {r['wall_med'] * 1e3:.1f} ms wall (best {r['wall_min'] * 1e3:.1f}), "
            f"{r['cpu_med'] * 1e3:.1f} ms CPU (best {r['cpu_min'] * 1e3:.1f}); {load()}"
        )
        print(
            f"   bytes/iteration {r['bytes_unfused'] / 1e6:.1f} MB (unfused E+M, the issue's count) -> bound "
            f"{bound_w:.2f} ms wall-bandwidth / {bound_c:.2f} ms CPU-bandwidth; ratio best wall "
            f"{r['wall_min'] * 1e3 / bound_w:.1f}x, median CPU {r['cpu_med'] * 1e3 / bound_c:.1f}x, "
            f"best CPU {r['cpu_min'] * 1e3 / bound_c:.1f}x (target <= 3x)"
        )
        print(
            f"   fused pass moves {r['bytes_fused'] / 1e6:.1f} MB (bound {fused_c:.2f} ms CPU); "
            f"fit-difference seconds/iteration {r['fit_per_iter'] * 1e3:.1f} ms; accuracy {r['accuracy']:.4f}"
        )
        mv_bound = r["mv_bytes"] / (bw["gbs_cpu"] * 1e9) * 1e3
        print(
            f"   majority vote (one pass): {r['mv_cpu'] * 1e3:.1f} ms CPU, {r['mv_wall'] * 1e3:.1f} ms wall (best of 5); "
            f"reads item+label int64 and writes votes and shares, {r['mv_bytes'] / 1e6:.0f} MB -> bound {mv_bound:.2f} "
            f"ms CPU-bandwidth, ratio {r['mv_cpu'] * 1e3 / mv_bound:.1f}x"
        )
    if not with_crowdkit:
        return
    if not Path(CROWDKIT_PYTHON).exists():
        print("crowd-kit not installed (create /work/ckvenv with crowd-kit, or set CROWDKIT_PYTHON)")
        return
    ck = child(CHILD_CROWDKIT, timeout, python=CROWDKIT_PYTHON, items=200_000, workers=500)
    if not ck or "error" in ck:
        print(f"crowd-kit: {ck and ck.get('error')}")
        return
    print(
        f"crowd-kit DawidSkene 1,000,000 responses: {ck['fit_per_iter'] * 1e3:.1f} ms wall, "
        f"{ck['fit_per_iter_cpu'] * 1e3:.1f} ms CPU per iteration {load()}"
    )
    if ours_1m:
        print(
            f"   ours (same measure: (t(21) - t(1)) / 20): {ours_1m['fit_per_iter'] * 1e3:.1f} ms wall, "
            f"{ours_1m['fit_per_iter_cpu'] * 1e3:.1f} ms CPU.  Speed-up per iteration: "
            f"{ck['fit_per_iter'] / ours_1m['fit_per_iter']:.0f}x wall, "
            f"{ck['fit_per_iter_cpu'] / ours_1m['fit_per_iter_cpu']:.0f}x CPU (target >= 60x)"
        )


def rss_section(timeout: float) -> None:
    r = child(CHILD_RSS, timeout, items=2_000_000, workers=1000)
    if not r or "error" in r:
        print(f"DS peak RSS at 10M: {r and r.get('error')}")
        return
    extra = r["peak"] - r["base"]
    print(
        f"DS 10M responses, 50 iterations in {r['seconds']:.1f} s: coded data {r['coded'] / 1e6:.0f} MB; RSS before "
        f"the fit {r['base'] / 1e6:.0f} MB, peak during it {r['peak'] / 1e6:.0f} MB: the fit adds {extra / 1e6:.0f} MB "
        f"= {extra / r['coded']:.2f}x the coded data (target <= 2x) {load()}"
    )


def methods_section(what: list[str], timeout: float) -> None:
    for name in ("mm", "auto", "cartels"):
        if name not in what:
            continue
        r = child(CHILD_METHOD, timeout, what=repr(name))
        label = "detect_cartels (K=2)" if name == "cartels" else name
        if not r or "error" in r:
            print(f"{label} at 1M responses: {r and r.get('error')}")
            continue
        target = 5 if name == "cartels" else 10
        print(
            f"{label} at {r['responses']:,} responses: {r['seconds']:.1f} s wall, {r['cpu']:.1f} s CPU "
            f"(target <= {target} s; {r['out']}) {load()}"
        )
    if "multilabel" in what:
        for items in (100_000, 1_000_000):
            r = child(CHILD_MULTILABEL, timeout, items=items)
            if not r or "error" in r:
                print(f"multilabel-em {items:,} items: {r and r.get('error')}")
                continue
            print(
                f"multilabel-em {items:,} items ({r['responses']:,} responses): {r['seconds']:.1f} s wall, "
                f"{r['cpu']:.1f} s CPU, {r['n_iter']} iterations {load()}"
            )


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--only", default="ds,crowdkit,rss,mm,auto,cartels,multilabel")
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    what = args.only.split(",")
    print(f"bench_scale {load()}")
    if "ds" in what:
        ds_section(args.timeout, "crowdkit" in what)
    if "rss" in what:
        rss_section(args.timeout)
    methods_section(what, args.timeout)


if __name__ == "__main__":
    main()
