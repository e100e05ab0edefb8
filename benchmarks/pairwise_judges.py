"""Pairwise judge panels against crowd-kit's BradleyTerry and NoisyBradleyTerry on the same simulated comparisons.

Each seed simulates a panel (``fusion_core.simulate.pairwise.pairwise_panel``: 8 options with evenly spaced
strengths, judges × comparisons as given, reliabilities U(0.5, 0.9), two position-biased judges, one judge that
prefers at random unless ``--no-random-judge``) and fits

* fusion_core ``bt`` (Davidson BT), ``bt-judges`` (BT with judge reliability and position bias) and
  ``ds-pairwise`` (Dawid–Skene with a BT prior), from the table (columns prompt, option_a, option_b, judge,
  preference, order), and
* crowd-kit ``BradleyTerry`` and ``NoisyBradleyTerry`` from its table (worker, left = shown first, right, label =
  the preferred option; ties dropped, crowd-kit has none),

and prints per method the mean Spearman correlation of the fitted strengths with the true ones (and the share of
seeds ≥ 0.95), and the median wall and CPU milliseconds per fit (reading the table included for fusion_core; the
rows "fit of coded data" and "reading the table" split that CPU time), then each fusion_core method's median CPU
time per fit over crowd-kit BradleyTerry's, seed by seed (< 1: faster).  With numba installed (the ``fast``
extra) fits of ≥ 2,000 judgements run compiled kernels; ``FUSION_CORE_JIT=0`` times the numpy path.

Run: python benchmarks/pairwise_judges.py [--seeds 20 --judges 5 --comparisons 500 --options 8]
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np
import pandas as pd
from _common import make_parser
from scipy.stats import spearmanr

from fusion_core.data.pairwise import PairwiseResponses
from fusion_core.methods.pairwise import PlainBT, create_pairwise
from fusion_core.simulate.pairwise import pairwise_panel

COLUMNS = ["prompt", "option_a", "option_b", "judge", "preference", "order"]


def crowdkit_table(r: pd.DataFrame) -> pd.DataFrame:
    r = r[r["preference"] != "tie"]
    a_first = (r["order"] == "AB").to_numpy()
    first = np.where(a_first, r["option_a"], r["option_b"])
    second = np.where(a_first, r["option_b"], r["option_a"])
    win = np.where(r["preference"] == "A", r["option_a"], r["option_b"])
    return pd.DataFrame({"worker": r["judge"].to_numpy(), "left": first, "right": second, "label": win})


def timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--seeds", type=int, default=20, help="simulated panels (default 20)")
    ap.add_argument("--judges", type=int, default=5)
    ap.add_argument("--comparisons", type=int, default=500, help="comparison items, each judged by every judge")
    ap.add_argument("--options", type=int, default=8)
    ap.add_argument("--no-random-judge", action="store_true", help="every judge has reliability U(0.5, 0.9)")
    ap.add_argument("--no-noisy", action="store_true", help="skip crowd-kit's NoisyBradleyTerry (seconds per fit)")
    ap.add_argument("--no-crowdkit", action="store_true", help="skip crowd-kit (e.g. when it is not installed)")
    args = ap.parse_args()

    fits = {name: (lambda name=name: create_pairwise(name)) for name in ("bt", "bt-judges", "ds-pairwise")}
    results: dict[str, list[tuple[float, float, float]]] = {}
    if not args.no_crowdkit:
        from crowdkit.aggregation import BradleyTerry, NoisyBradleyTerry

        ck = {"crowd-kit BradleyTerry": lambda: BradleyTerry(n_iter=100)}
        if not args.no_noisy:
            ck["crowd-kit NoisyBradleyTerry"] = NoisyBradleyTerry
    else:
        ck = {}
    PlainBT().fit(pairwise_panel(50, 2, 3, seed=0).responses[COLUMNS])  # warm-up (imports)
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        rel = rng.uniform(0.5, 0.9, args.judges)
        if not args.no_random_judge:
            rel[-1] = 0.0
        pos = np.zeros(args.judges)
        pos[: min(2, args.judges)] = 0.15 * rng.choice([-1, 1], min(2, args.judges))
        sim = pairwise_panel(args.comparisons, args.judges, args.options, reliability=rel, position_bias=pos, seed=seed)
        table = sim.responses[COLUMNS]
        coded, _, read_cpu = timed(lambda table=table: PairwiseResponses.from_frame(table))
        results.setdefault("(fusion_core reading the table)", []).append((np.nan, 0.0, read_cpu))
        for name, make in fits.items():
            est, wall, cpu = timed(lambda make=make, table=table: make().fit(table))
            rho = spearmanr(est.scores_.reindex(sim.strengths.index), sim.strengths).statistic
            results.setdefault(name, []).append((rho, wall, cpu))
            _, _, fit_cpu = timed(lambda make=make, coded=coded: make().fit(coded))
            results.setdefault(f"{name} (fit of coded data)", []).append((rho, 0.0, fit_cpu))
        ctab = crowdkit_table(sim.responses)
        for name, make in ck.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est, wall, cpu = timed(lambda make=make, ctab=ctab: make().fit(ctab))
            rho = spearmanr(est.scores_.reindex(sim.strengths.index).fillna(-np.inf), sim.strengths).statistic
            results.setdefault(name, []).append((rho, wall, cpu))
    load = os.getloadavg()[0]
    print(
        f"{args.seeds} seeds, {args.judges} judges x {args.comparisons} comparisons, {args.options} options "
        f"({'one random judge, ' if not args.no_random_judge else ''}two judges with position bias 0.15); "
        f"load average {load:.1f}"
    )
    from fusion_core.methods.numerics import jit_enabled

    print(f"compiled kernels: {'on' if jit_enabled() else 'off (numpy)'}")
    print(f"{'method':<36}{'Spearman mean':>14}{'>= 0.95':>9}{'wall ms (median)':>18}{'CPU ms (median)':>17}")
    for name, rows in results.items():
        arr = np.array(rows)
        rho = (
            f"{arr[:, 0].mean():>14.4f}{np.mean(arr[:, 0] >= 0.95):>9.0%}" if np.isfinite(arr[:, 0]).all() else " " * 23
        )
        wall = f"{1000 * np.median(arr[:, 1]):>18.2f}" if arr[:, 1].any() else " " * 18
        print(f"{name:<36}{rho}{wall}{1000 * np.median(arr[:, 2]):>17.2f}")
    ref = results.get("crowd-kit BradleyTerry")
    if ref is not None:
        ck_cpu = np.array(ref)[:, 2]
        ratios = {n: np.median(np.array(results[n])[:, 2] / ck_cpu) for n in fits}
        print("CPU time per fit / crowd-kit BradleyTerry's (median over seeds): "
              + ", ".join(f"{n} {r:.2f}" for n, r in ratios.items()))  # fmt: skip


if __name__ == "__main__":
    main()
