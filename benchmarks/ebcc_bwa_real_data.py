"""EBCC and BWA against the authors' published accuracies (issue 21 item 1), and their cost against ``ds``.

Published figures: the authors' notebooks (``yuan-li/truth-inference-at-scale``, ``code/test_ebcc.ipynb`` and
``code/test_bwa.ipynb``).  Their protocol, followed here: exact duplicate rows dropped (``drop_duplicates``); BWA
run once (deterministic); EBCC run from 40 random starts, the start with the best ELBO kept.  Accuracy is on the
gold items, ties split evenly between the tied classes as in the authors' ``get_acc`` (no tie occurred in our runs:
the column ``acc (our ties)`` is the plain accuracy of ``labels_``).

Columns: ``ebcc`` = the default (best of 5 starts, seed 1234), ``ebcc·N`` = best of N starts (the authors' protocol
with N = 40, ``--starts``), ``ebcc best-of-n`` = best of the first n starts (same seed, so the same first n draws).
Times: CPU seconds of this process, best of ``--repeat`` fits, each on a fresh copy of the coded responses (so
``ds`` cannot reuse the sweep structure it caches per ``Responses``); the load average is printed.  The simulated
crowd prints wall-clock seconds too.

Run: python benchmarks/ebcc_bwa_real_data.py [--datasets rte,face] [--starts 40] [--repeat 3] [--sim 1000000]
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
from _common import DATASETS, make_parser

from fusion_core.data.responses import Responses, as_responses
from fusion_core.methods import create

PUBLISHED = {  # dataset: (EBCC, BWA) accuracy in the authors' notebooks
    "adult": (0.747748, 0.741742),
    "bluebirds": (0.861111, 0.759259),
    "dog": (0.840149, 0.831475),
    "face": (0.635274, 0.618151),
    "rte": (0.93125, 0.9275),
    "product": (0.934937, 0.919423),
    "possent": (0.961, 0.956),
}


def load(name: str) -> tuple[Responses, pd.Series]:
    answers = pd.read_csv(DATASETS / name / "answers.csv").drop_duplicates(keep="first")
    truth = pd.read_csv(DATASETS / name / "truth.csv").set_index("task")["truth"]
    return as_responses(answers), truth


def fit(method: str, resp: Responses, repeat: int = 1, *, cpu: bool = False, **params):
    """(fitted estimator, best time of ``repeat`` fits): wall-clock seconds, or this process's CPU seconds with
    ``cpu`` (steadier when the machine is shared)."""
    clock = time.process_time if cpu else time.perf_counter
    best = np.inf
    est = None
    for _ in range(repeat):
        fresh = replace(resp)  # a new Responses: no method reuses structures cached by an earlier fit (ds does)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = clock()
            est = create(method, **params).fit(fresh)
            best = min(best, clock() - t0)
    return est, best


def tie_split_accuracy(est, truth: pd.Series) -> float:
    """The authors' ``get_acc``: each gold item scores 1/(number of classes tied at the maximum) if gold is among
    them."""
    p = est.probas_.reindex(truth.index)
    arr = p.to_numpy(dtype=float)
    win = (arr >= arr.max(axis=1, keepdims=True) - 1e-12).astype(float)
    win /= win.sum(axis=1, keepdims=True)
    cols = list(p.columns)
    return float(win[np.arange(len(truth)), [cols.index(v) for v in truth.to_numpy()]].mean())


def accuracy(est, truth: pd.Series) -> float:
    return float((est.labels_.reindex(truth.index) == truth).mean())


def warm_up() -> None:
    """One small fit of every method timed here, so that no timed fit pays for imports or loading compiled kernels."""
    from fusion_core.simulate import dawid_skene

    small = dawid_skene(n_items=50, n_workers=5, n_classes=2, seed=0).responses
    for method in ("mv", "ds", "bwa", "ebcc"):
        fit(method, as_responses(small))


def real(names: list[str], starts: int, repeat: int, best_of: list[int]) -> None:
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    head = (
        f"{'dataset':10s} {'EBCC pub':>8s} {'ebcc':>7s} {f'ebcc·{starts}':>8s} {'Δ':>6s} | {'BWA pub':>7s} "
        f"{'bwa':>7s} {'Δ':>6s} | {'t ds':>6s} {'t bwa':>6s} {'×ds':>5s} {'t ebcc':>8s} {'×ds':>5s} "
        f"{f't ebcc·{starts}':>9s} | ebcc best-of-n (n: acc)"
    )
    print(head)
    print("-" * len(head))
    sums = np.zeros(4)
    default_starts = int(create("ebcc").n_starts)
    for name in names:
        resp, truth = load(name)
        _, t_ds = fit("ds", resp, repeat, cpu=True)
        bwa, t_bwa = fit("bwa", resp, repeat, cpu=True)
        e1, t_e1 = fit("ebcc", resp, repeat, cpu=True)
        en, t_en = fit("ebcc", resp, 1, cpu=True, n_starts=starts)
        pe, pb = PUBLISHED[name]
        a_e1, a_en, a_b = (tie_split_accuracy(e, truth) for e in (e1, en, bwa))
        assert abs(a_b - accuracy(bwa, truth)) < 1e-12 and abs(a_en - accuracy(en, truth)) < 1e-12
        sums += (a_e1 - pe, a_en - pe, a_b - pb, 1)
        bo = []
        for n in best_of:
            if 0 < n < starts and n != default_starts:
                bo.append(f"{n}: {tie_split_accuracy(fit('ebcc', resp, 1, n_starts=n)[0], truth):.4f}")
        print(
            f"{name:10s} {pe:8.4f} {a_e1:7.4f} {a_en:8.4f} {100 * (a_en - pe):+6.2f} | {pb:7.4f} {a_b:7.4f} "
            f"{100 * (a_b - pb):+6.2f} | {t_ds:6.3f} {t_bwa:6.3f} {t_bwa / t_ds:5.1f} {t_e1:8.3f} {t_e1 / t_ds:5.1f} "
            f"{t_en:9.2f} | {', '.join(bo)}",
            flush=True,
        )
    n = max(sums[3], 1)
    print(
        f"mean difference to published (points): ebcc {100 * sums[0] / n:+.2f}, ebcc·{starts} "
        f"{100 * sums[1] / n:+.2f}, bwa {100 * sums[2] / n:+.2f}"
    )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def simulated(n_responses: int, repeat: int) -> None:
    from fusion_core.simulate import dawid_skene

    per_item = 5
    sim = dawid_skene(n_items=n_responses // per_item, n_workers=200, n_classes=2, responses_per_item=per_item, seed=0)
    resp = as_responses(sim.responses)
    print(
        f"\nsimulated DS crowd: {resp.n_responses:,} responses, {resp.n_items:,} items, {resp.n_workers} annotators, K=2"
    )
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    ds, t_ds = fit("ds", resp, repeat)
    _, c_ds = fit("ds", resp, repeat, cpu=True)
    truth = sim.truth
    for method, params in (("ds", {}), ("bwa", {}), ("ebcc", {"n_starts": 1}), ("ebcc", {})):
        if method == "ds":
            est, t, c = ds, t_ds, c_ds
        else:
            est, t = fit(method, resp, repeat, **params)
            c = fit(method, resp, 1, cpu=True, **params)[1]
        name = f"{method}·{params['n_starts']}" if params else method
        print(
            f"{name:7s} {t:7.2f} s wall ({t / t_ds:4.1f}× ds), {c:7.2f} s CPU ({c / c_ds:4.1f}× ds)  iterations "
            f"{est.n_iter_:4d}  accuracy {accuracy(est, truth):.4f}",
            flush=True,
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = make_parser(__doc__)
    parser.add_argument("--datasets", default=",".join(PUBLISHED), help="comma-separated subset of the 7 datasets")
    parser.add_argument("--starts", type=int, default=40, help="EBCC starts of the authors' protocol (40)")
    parser.add_argument("--best-of", default="1,10", help="also print EBCC's best of the first n starts (comma list)")
    parser.add_argument("--repeat", type=int, default=3, help="timed fits per method (best kept)")
    parser.add_argument("--sim", type=int, default=1_000_000, help="responses of the simulated crowd (0: skip)")
    parser.add_argument("--no-real", action="store_true", help="skip the real datasets")
    args = parser.parse_args()
    warm_up()
    if not args.no_real:
        if not DATASETS.is_dir():
            print(f"{DATASETS} is absent: real datasets skipped")
        else:
            names = [n for n in args.datasets.split(",") if n]
            unknown = [n for n in names if n not in PUBLISHED]
            if unknown:
                parser.error(f"no published figures for {', '.join(unknown)}; choose from {', '.join(PUBLISHED)}")
            best_of = [int(x) for x in args.best_of.split(",") if x]
            real(names, args.starts, args.repeat, best_of)
    if args.sim:
        simulated(args.sim, args.repeat)


if __name__ == "__main__":
    main()
