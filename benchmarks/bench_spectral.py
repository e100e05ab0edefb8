"""Speed of the spectral family (issue 3 targets), printed as figures.

1. SML on 1M sparse responses from 500 annotators (100,000 items × 10 annotators each): target < 1 s.
   Also i-SML and sml-ds on the same data for reference.
2. ``detect_cartels`` with 200 bootstrap replicates at M = 100, S = 600 (P14 setup): target < 5 s,
   with a 33% cartel (the full pipeline: test, split, sub-tests, reassignment, merge) and without one.
3. ``detect_cartels`` on large sparse real crowds (target < 10 s each): adult (825 workers, 92k responses)
   and relevance (766 workers, 98k responses), both recoded to "label 0" vs "any other label" (cartel
   detection is binary), B = 200, α = 0.01; and a simulated sparse crowd of 400 annotators (10% observed).
   Prints the analysed core, the p-value of the 2nd component, the groups, and the bootstrap replicates
   drawn per test (sequential stopping, ``GroupAnalysis.test``).

Timings are the median of ``--repeat`` runs of the fit alone (data simulated and coded beforehand), with
BLAS limited to one thread (``--threads``), since the target machine has 2 cores shared with other work.
Both wall time and this process's CPU time are printed, with the 1-minute load average: on a loaded
machine the wall time is inflated, the CPU time (single-threaded) is what one idle core would need.

Run: python benchmarks/bench_spectral.py [--repeat 3] [--threads 1]
"""

from __future__ import annotations

import os
import sys

from _common import make_parser

ap = make_parser(__doc__)
ap.add_argument("--repeat", type=int, default=3)
ap.add_argument("--threads", default="1", help="BLAS threads (set before numpy is imported)")
args = ap.parse_args()
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, args.threads)

import time
import warnings

import numpy as np
from _common import DATASETS, peak_rss_mb

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.cartels import detect_cartels
from fusion_core.errors import AggregationWarning
from fusion_core.methods import create
from fusion_core.simulate.spectral import cartel, independent


def median_time(fn, repeat: int) -> tuple[float, float, object]:
    """(median wall seconds, median CPU seconds of this process, last result)."""
    wall, cpu, out = [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return float(np.median(wall)), float(np.median(cpu)), out


def main() -> None:
    warnings.simplefilter("ignore", AggregationWarning)
    print(
        f"load average (1 min) at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; BLAS threads {args.threads}"
    )
    print()
    print("1) SML on 1M sparse responses, 500 annotators (target < 1 s)")
    sim = independent(m=500, n=100_000, b=0.2, pi_range=(0.55, 0.85), per_item=10, seed=0)
    resp = Responses.from_frame(sim.responses)
    print(f"   data: {resp.n_responses:,} responses, {resp.n_workers} annotators, {resp.n_items:,} items")
    truth = sim.truth
    for name, params in (("sml", {}), ("sml", {"b_method": "none"}), ("isml", {}), ("sml-ds", {})):
        secs, cpu, est = median_time(lambda name=name, params=params: create(name, **params).fit(resp), args.repeat)
        acc = float((est.labels_.reindex(truth.index) == truth).mean())
        label = name + (f" {params}" if params else "")
        print(
            f"   {label:<28} wall {secs:6.3f} s  cpu {cpu:6.3f} s   accuracy {acc:.4f}   "
            f"completion {est.diagnostics_.get('completion')}"
        )
    secs, cpu, _ = median_time(lambda: create("sml").fit(sim.responses), 1)
    print(f"   {'sml from the DataFrame':<28} wall {secs:6.3f} s  cpu {cpu:6.3f} s   (includes coding the table)")
    print()
    print("2) detect_cartels, n_bootstrap=200, M=100, S=600 (target < 5 s)")
    for label, s in (
        ("33% cartel, pi_c=0.5", cartel(m=100, n=600, r=0.33, pi_c=0.5, seed=0)),
        ("independent annotators", independent(m=100, n=600, seed=0)),
    ):
        secs, cpu, rep = median_time(
            lambda s=s: detect_cartels(s.responses, n_bootstrap=200, alpha=0.01, random_state=0), args.repeat
        )
        sizes = [len(g) for g in rep.groups]
        print(
            f"   {label:<24} wall {secs:6.3f} s  cpu {cpu:6.3f} s   p(2nd component) {rep.p_value[0]:.4f}   cartels {sizes}"
        )
    print()
    print("3) detect_cartels on large sparse crowds, n_bootstrap=200, alpha=0.01 (target < 10 s)")
    import pandas as pd

    from fusion_core.diagnostics.cartels.analysis import GroupAnalysis

    drawn: list[int] = []
    test_fn = GroupAnalysis.test

    def counting_test(self, g, *a, **k):  # record the replicates each new bootstrap test draws
        known = frozenset(int(i) for i in g) in self.cache
        out = test_fn(self, g, *a, **k)
        if not known:
            drawn.append(int(out.n_drawn))
        return out

    GroupAnalysis.test = counting_test
    crowds = []
    for name in ("adult", "relevance"):
        path = DATASETS / name / "answers.csv"
        if path.exists():
            answers = pd.read_csv(path)
            answers["label"] = (answers["label"] != 0).astype(int)  # label 0 vs the rest
            crowds.append((f"{name} (0 vs rest)", answers))
        else:
            print(f"   {name}: dataset absent ({path})")
    sim = cartel(m=400, n=3000, r=0.2, observed=0.1, pi_range=(0.6, 0.85), xi_range=(0.6, 0.85), seed=0)
    crowds.append(("simulated 400 x 3000, 10%", sim.responses))
    for label, answers in crowds:
        drawn.clear()
        secs, cpu, rep = median_time(
            lambda answers=answers: detect_cartels(answers, n_bootstrap=200, alpha=0.01, random_state=0), 1
        )
        print(
            f"   {label:<26} wall {secs:6.2f} s  cpu {cpu:6.2f} s   {answers['worker'].nunique()} workers, "
            f"{len(answers):,} responses, core {len(rep.workers)}   p(2nd) {rep.p_value[0]:.4f}   "
            f"groups {[len(g) for g in rep.groups]}   undetermined {len(rep.undetermined)}   "
            f"replicates per test {drawn}"
        )
    GroupAnalysis.test = test_fn
    print()
    print(f"peak RSS {peak_rss_mb():.0f} MB; load average (1 min) at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
