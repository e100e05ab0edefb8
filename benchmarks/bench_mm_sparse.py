"""Moment matching (`mm`, `mm-ds`) on every categorical / ensemble dataset in ../shared/datasets.

Prints per dataset: workers, responses, classes, kept pairs/triples, wall and CPU seconds of the fit
(CPU time is the robust figure on a shared machine) and accuracy on the gold items
for `mm` and `mm-ds`, plus the AggregationWarnings raised.  Each fit runs in a child process with a
time limit (``--timeout``, default 600 s) so a slow fit is reported as ">limit" instead of hanging.
Also times the dense synthetic case of bench_sequential_networked.py (100k items × 20 workers × K=5,
every worker labels every item; target < 10 s).

Run: python benchmarks/bench_mm_sparse.py [--datasets rte,adult] [--timeout 600] [--no-synthetic]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings

from _common import DATASETS, ROOT, categorical_datasets, load, make_parser


def _one(ds: str, method: str) -> dict:
    from fusion_core.methods import create
    from fusion_core.metrics import accuracy

    if ds == "synthetic-dense":
        import numpy as np
        import pandas as pd

        from fusion_core.simulate.sequential import gen_confusions, sample_responses

        rng = np.random.default_rng(0)  # the case of bench_sequential_networked.py: 100k items × 20 × K=5
        n, m, k = 100_000, 20, 5
        conf = gen_confusions(k, m, 12, 0.35, 0.65, rng=rng)
        y = rng.choice(k, size=n, p=rng.dirichlet(5 * np.ones(k)))
        item, worker, label = sample_responses(y, conf, rng)
        answers = pd.DataFrame({"task": item, "worker": worker, "label": label})
        truth = pd.Series(y, index=pd.RangeIndex(n))
    else:
        answers, truth = load(ds)
    est = create(method)  # imports the registry outside the timed fit
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(answers)
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    lab = est.labels_
    common = truth.index.intersection(lab.index)
    ex = est.result_.details  # moment-matching diagnostics (this family's benchmark)
    return {
        "workers": int(answers["worker"].nunique()),
        "responses": len(answers),
        "classes": int(est.result_.posterior.shape[1]),
        "seconds": secs,
        "cpu": cpu,
        "accuracy": float(accuracy(truth.loc[common], lab.loc[common])),
        "pairs": ex.get("n_pairs"),
        "triples": ex.get("n_triples"),
        "n_iter": int(est.n_iter_) if est.n_iter_ is not None else None,
        "warnings": sorted({str(w.message)[:110] for w in caught}),
    }


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--methods", default="mm,mm-ds")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--no-synthetic", action="store_true")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_one(*args.child)))
        return
    names = categorical_datasets()
    if not names:
        print(f"no datasets: {DATASETS} is absent")
    if args.datasets:
        names = [n for n in names if n in args.datasets.split(",")]
    if not args.no_synthetic:
        names = [*names, "synthetic-dense"]
    methods = args.methods.split(",")
    hdr = f"{'dataset':<16}{'workers':>8}{'resp':>8}{'K':>3}{'pairs':>8}{'triples':>9}"
    for m in methods:
        hdr += f"{m + ' s':>10}{'cpu s':>8}{m + ' acc':>11}"
    print(hdr)
    notes = []
    for ds in names:
        row, info = {}, {}
        for m in methods:
            try:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", ds, m],
                    capture_output=True,
                    check=False,
                    text=True,
                    timeout=args.timeout,
                    cwd=ROOT,
                )
                if out.returncode != 0:
                    row[m] = ("error", "", float("nan"))
                    notes.append(f"{ds}/{m}: {out.stderr.strip().splitlines()[-1]}")
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                row[m] = (f"{r['seconds']:.2f}", f"{r['cpu']:.2f}", r["accuracy"])
                info = r
                for w in r["warnings"]:
                    notes.append(f"{ds}/{m}: {w}")
            except subprocess.TimeoutExpired:
                row[m] = (f">{args.timeout:.0f}", "", float("nan"))
        line = (
            f"{ds:<16}{info.get('workers', ''):>8}{info.get('responses', ''):>8}{info.get('classes', ''):>3}"
            f"{info.get('pairs', '')!s:>8}{info.get('triples', '')!s:>9}"
        )
        for m in methods:
            s, c, a = row[m]
            line += f"{s:>10}{c:>8}{a:>11.4f}"
        print(line, flush=True)
    if notes:
        print("\nwarnings:")
        for n in notes:
            print("  " + n)


if __name__ == "__main__":
    main()
