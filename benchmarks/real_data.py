"""Benchmark (c): accuracy of every registered method on every categorical dataset in ../shared/datasets.

Methods come from the registry (those that need only plain responses), so new methods appear here
automatically; crowd-kit's MV, DS, GLAD, MACE and Wawa are added when crowd-kit is installed.
Prints one table (rows = datasets, columns = methods) and the fit seconds per method.

Run: python benchmarks/real_data.py [--methods mv,ds,...] [--no-crowdkit]
"""

from __future__ import annotations

import time
import warnings

import pandas as pd
from _common import DATASETS, categorical_datasets, load, make_parser

from fusion_core.methods import available, create
from fusion_core.metrics import accuracy


def crowdkit_methods() -> dict:
    try:
        from crowdkit.aggregation import GLAD, MACE, DawidSkene, MajorityVote, Wawa
    except ImportError:
        return {}
    return {
        "ck-mv": MajorityVote,
        "ck-ds": lambda: DawidSkene(n_iter=100),
        "ck-glad": lambda: GLAD(n_iter=100, silent=True),
        "ck-mace": lambda: MACE(n_iter=100, random_state=0),
        "ck-wawa": Wawa,
    }


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--methods", default=None, help="comma-separated registry names (default: all plain methods)")
    ap.add_argument("--datasets", default=None, help="comma-separated dataset names (default: all categorical)")
    ap.add_argument("--no-crowdkit", action="store_true")
    args = ap.parse_args()
    names = categorical_datasets()
    if not names:
        print(f"no datasets: {DATASETS} is absent")
        return
    if args.datasets:
        names = [n for n in names if n in args.datasets.split(",")]
    methods = [m.name for m in available(inputs=("plain",)) if m.name != "auto" or not args.methods]
    if args.methods:
        methods = args.methods.split(",")
    ck = {} if args.no_crowdkit else crowdkit_methods()
    acc = pd.DataFrame(index=names, columns=methods + list(ck), dtype=float)
    secs = pd.DataFrame(index=names, columns=methods + list(ck), dtype=float)
    for ds in names:
        answers, truth = load(ds)
        for m in methods:
            t0 = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = create(m).fit(answers)
                acc.loc[ds, m] = accuracy(est.labels_, truth)
            except Exception as exc:  # a method may refuse a dataset (e.g. binary-only on K > 2): report it
                print(f"  {ds} / {m}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
            secs.loc[ds, m] = time.perf_counter() - t0
            print(f"  {ds:<15} {m:<14} acc {acc.loc[ds, m]:.4f}  {secs.loc[ds, m]:7.2f} s", flush=True)
        for m, make in ck.items():
            t0 = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    labels = make().fit_predict(answers)
                acc.loc[ds, m] = accuracy(labels, truth)
            except Exception as exc:
                print(f"  {ds} / {m}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
            secs.loc[ds, m] = time.perf_counter() - t0
            print(f"  {ds:<15} {m:<14} acc {acc.loc[ds, m]:.4f}  {secs.loc[ds, m]:7.2f} s", flush=True)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 50)
    print("\nAccuracy on gold items (NaN = method refused the dataset)")
    print(acc.round(4).to_string())
    print("\nFit seconds")
    print(secs.round(2).to_string())


if __name__ == "__main__":
    main()
