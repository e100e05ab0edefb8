"""Benchmarks for issue 5 (prints figures; not a test):

* P1/P2/P3 (spec context.md §14): context-em, T = 10,000 items, K = 8 annotators (dense, Table 1), shared prior
  (target < 5 s), paper variant (< 5 s), exact program (report); P4: the M-step alone, 16 chains × 10,000 levels.
* multilabel-em: 100k items, 500k responses (5 per item), J = 500, C = 10, M = 2, annotator_label flip, set prior,
  tol 1e-7 (target < 10 s and < 1 GB peak RSS, measured in a fresh child process).
* auto on the `product` dataset (target < 30 s).
* context-em with per-class confusion curves (spec §9.2 option 2): simplex-chain M-step alone and full fits
  (report only; no target in the spec).

    python benchmarks/bench_context_multilabel.py [--skip-auto]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from _common import make_parser

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def context_benchmarks() -> None:
    from fusion_core.methods.context import ContextEM, dp_metric, lipschitz_chain_mstep
    from fusion_core.simulate.context import table1

    print("== context-em, T = 10,000 items, K = 8 annotators (Table 1, dense) ==")
    print(
        f"  (machine load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: wall times include waiting; CPU = process time)"
    )
    configs = (
        ("P1 shared prior, 1000 levels, Table 1 c", {}, True),
        ("P1' shared prior, defaults (swing 1)", {}, False),
        ("P2 paper variant (5 iterations), Table 1 c", {"variant": "paper"}, True),
        ("P3 exact program, Table 1 c", {"max_context_levels": None}, True),
    )
    for label, kw, table_c in configs:
        for seed in (1, 2):
            sim = table1(8, 10_000, seed=seed)
            if table_c:
                kw = {**kw, "lipschitz": sim.lipschitz}
            t0, c0 = time.perf_counter(), time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = ContextEM(**kw).fit(sim.responses, context=sim.context)
            dt, ct = time.perf_counter() - t0, time.process_time() - c0
            err = float((m.labels_.reindex(sim.truth.index) != sim.truth).mean())
            dp = dp_metric(m, sim.p0, sim.p1)
            print(
                f"  {label:45s} seed {seed}: wall {dt:6.2f} s  CPU {ct:6.2f} s  EM iterations {m.n_iter_:3d}  error {err:.4f}  DP {dp:.4f}  max M-step gap {m.mstep_gap_:.1e}  fallbacks {m.n_mstep_fallbacks_}"
            )
    print("== P4: M-step alone, 16 chains × 10,000 levels ==")
    rng = np.random.default_rng(0)
    U, nch = 10_000, 16
    x = np.sort(rng.uniform(0, 1, U))
    A = np.concatenate([(rng.uniform(size=U) < 0.3 + 0.4 * x).astype(float) for _ in range(nch)])
    h = np.concatenate([np.r_[2.0 * np.diff(x), 0.0] for _ in range(nch)])
    t0, c0 = time.perf_counter(), time.process_time()
    _, info = lipschitz_chain_mstep(A, 1 - A, h, np.arange(nch) * U)
    print(
        f"  wall {time.perf_counter() - t0:.2f} s  CPU {time.process_time() - c0:.2f} s  interior-point iterations {info.iterations}  relative gap {info.gap:.1e}  fallbacks {info.n_fallback}"
    )
    confusion_benchmarks()


def confusion_benchmarks() -> None:
    """§9.2 option 2 (per-class confusion curves): the simplex-chain M-step alone and full fits (report only)."""
    from fusion_core.methods import DawidSkene, MajorityVote
    from fusion_core.methods.context import ContextEM, lipschitz_simplex_mstep
    from fusion_core.simulate.context import confusion_crowd, table1

    print("== confusion curves (spec §9.2 option 2): simplex-chain M-step alone ==")
    rng = np.random.default_rng(0)
    for J, U, nch in ((2, 10_000, 16), (3, 1000, 24), (3, 10_000, 24), (5, 2000, 40)):
        x = np.sort(rng.uniform(0, 1, U))
        acc = 0.3 + 0.4 * x
        N = np.concatenate(
            [np.eye(J)[np.where(rng.uniform(size=U) < acc, 0, rng.integers(1, J, U))] for _ in range(nch)]
        )
        h = np.concatenate([np.r_[2.0 * np.diff(x), 0.0] for _ in range(nch)])
        t0, c0 = time.perf_counter(), time.process_time()
        _, info = lipschitz_simplex_mstep(N, h, np.arange(nch) * U)
        print(
            f"  J = {J}, {nch} chains × {U} levels: wall {time.perf_counter() - t0:.2f} s  CPU {time.process_time() - c0:.2f} s  iterations {info.iterations}  gap {info.gap:.1e}  fallbacks {info.n_fallback}"
        )
    print("== confusion curves: full fits ==")
    sim = table1(8, 10_000, seed=1)
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = ContextEM(multiclass="confusion", lipschitz=sim.lipschitz).fit(sim.responses, context=sim.context)
    err = float((m.labels_.reindex(sim.truth.index) != sim.truth).mean())
    print(
        f"  J = 2 (Table 1, T = 10,000, K = 8, = the binary model): wall {time.perf_counter() - t0:.2f} s  CPU {time.process_time() - c0:.2f} s  EM iterations {m.n_iter_}  error {err:.4f}  gap {m.mstep_gap_:.1e}"
    )
    for T, K, rpi in ((1000, 6, None), (3000, 8, 3), (10_000, 8, None)):
        sim = confusion_crowd(K, T, 3, seed=0, responses_per_item=rpi)
        t0, c0 = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = ContextEM(multiclass="confusion", swing=1.0).fit(sim.responses, context=sim.context)
        dt, ct = time.perf_counter() - t0, time.process_time() - c0
        ds = DawidSkene().fit(sim.responses)
        mv = MajorityVote(tie_break="random", random_state=0).fit(sim.responses)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ovr = ContextEM(swing=1.0).fit(sim.responses, context=sim.context)
        true = np.stack([f(m.context_grid_) for f in sim.confusion_fn])
        mae = float(np.abs(m.confusion_curves_ - true).mean())
        mae_ds = float(np.abs(ds.confusion_[:, None] - true).mean())
        dens = "dense" if rpi is None else f"{rpi} per item"
        print(
            f"  J = 3, T = {T}, K = {K} ({dens}): wall {dt:.2f} s  CPU {ct:.2f} s  EM iterations {m.n_iter_}  error confusion {_error(m, sim):.3f} / one-vs-rest {_error(ovr, sim):.3f} / DS {_error(ds, sim):.3f} / MV {_error(mv, sim):.3f}"
            f"  curve MAE {mae:.4f} (DS {mae_ds:.4f})  gap {m.mstep_gap_:.1e}  fallbacks {m.n_mstep_fallbacks_}"
        )


def _error(model, sim) -> float:
    return float((model.labels_.reindex(sim.truth.index) != sim.truth).mean())


CHILD = r"""
import json, resource, time, warnings
warnings.simplefilter("ignore")
from fusion_core.simulate.multilabel import multilabel_crowd
from fusion_core.data.multilabel import parse_multilabel
from fusion_core.methods.multilabel import MultiLabelEM
sim = multilabel_crowd(n_items=100_000, n_labels=10, n_workers=500, responses_per_item=5, max_degree=2, seed=0)
rss_data = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0, c0 = time.perf_counter(), time.process_time()
d = parse_multilabel(sim.responses)
t_parse, c_parse = time.perf_counter() - t0, time.process_time() - c0
t1, c1 = time.perf_counter(), time.process_time()
m = MultiLabelEM(granularity="annotator_label", max_degree=2, tol=1e-7).fit(d)
t_fit, c_fit = time.perf_counter() - t1, time.process_time() - c1
acc = float((m.labels_.reindex(sim.truth.index) == sim.truth).mean())
print(json.dumps({"parse_s": t_parse, "fit_s": t_fit, "parse_cpu": c_parse, "fit_cpu": c_fit, "iterations": m.n_iter_, "converged": bool(m.converged_),
                  "sets": int(len(m.set_prior_)), "exact_set_accuracy": acc,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rss_after_data_mb": rss_data}))
"""


CHILD_MEM = r"""
import json, tracemalloc, warnings
warnings.simplefilter("ignore")
from fusion_core.simulate.multilabel import multilabel_crowd
from fusion_core.data.multilabel import parse_multilabel
from fusion_core.methods.multilabel import MultiLabelEM
sim = multilabel_crowd(n_items=100_000, n_labels=10, n_workers=500, responses_per_item=5, max_degree=2, seed=0)
tracemalloc.start()
d = parse_multilabel(sim.responses)
m = MultiLabelEM(granularity="annotator_label", max_degree=2, tol=1e-7).fit(d)
print(json.dumps({"traced_peak_mb": tracemalloc.get_traced_memory()[1] / 2**20}))
"""


def multilabel_benchmark() -> None:
    print("== multilabel-em: 100k items, 500k responses, 500 annotators, 10 labels, M = 2 (56 sets) ==")
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"  wall: parse {r['parse_s']:.2f} s + EM fit {r['fit_s']:.2f} s = {r['parse_s'] + r['fit_s']:.2f} s; "
        f"CPU: parse {r['parse_cpu']:.2f} s + fit {r['fit_cpu']:.2f} s = {r['parse_cpu'] + r['fit_cpu']:.2f} s; {r['iterations']} iterations (converged {r['converged']}), "
        f"{r['sets']} sets, exact-set accuracy {r['exact_set_accuracy']:.4f}"
    )
    print(
        f"  peak RSS of the whole child process {r['peak_rss_mb']:.0f} MB (after simulating the data: {r['rss_after_data_mb']:.0f} MB)"
    )
    out = subprocess.run([sys.executable, "-c", CHILD_MEM], capture_output=True, text=True, check=True)
    mem = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"  peak memory allocated by parse + fit (tracemalloc, numpy included): {mem['traced_peak_mb']:.0f} MB")


def auto_benchmark() -> None:
    import pandas as pd

    from fusion_core.methods.auto import AutoSelect, default_candidates

    path = DATASETS / "product"
    if not path.is_dir():
        print("== auto on product: dataset not available ==")
        return
    ans = pd.read_csv(path / "answers.csv")
    truth = pd.read_csv(path / "truth.csv").set_index("task")["truth"]
    for cands in (None, ["ds", "ds1"]):
        t0, c0 = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = AutoSelect(candidates=cands).fit(ans)
        dt, ct = time.perf_counter() - t0, time.process_time() - c0
        acc = float((a.labels_.reindex(truth.index) == truth).mean())
        name = "default candidates " + str(default_candidates()) if cands is None else f"candidates {cands}"
        print(
            f"== auto on product ({len(ans):,} responses), {name}: wall {dt:.1f} s, CPU {ct:.1f} s, pick {a.chosen_method_} (accuracy {acc:.4f}) =="
        )
        tab = a.heldout_scores_[["method", "score", "se", "seconds"]]
        print("  " + tab.to_string(index=False).replace("\n", "\n  "))


if __name__ == "__main__":
    ap = make_parser(__doc__)
    ap.add_argument("--skip-auto", action="store_true", help="leave out auto on the product dataset")
    args = ap.parse_args()
    context_benchmarks()
    multilabel_benchmark()
    if not args.skip_auto:
        auto_benchmark()
