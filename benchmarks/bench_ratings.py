"""Ratings, agreement with intervals and judge panels (issue 13): every figure of the closing note.

1. Ordinal crowds (lenient / harsh / noisy annotators, 5 levels): exact-level accuracy and mean absolute error in
   levels of ``ordinal-em`` against full Dawid–Skene and majority vote; bias/noise recovery; the relevance
   grades of ../shared/datasets when present.
2. Numeric ratings: RMSE of NumericTruth (Gaussian and Student-t) against the mean and the median of the
   ratings, bias correlation, 95 % interval coverage, with and without 5 % gross outliers.
3. Agreement statistics against the reference packages (krippendorff, scikit-learn, pingouin) on the real
   datasets: largest absolute difference.
4. Coverage of the 95 % bootstrap intervals on simulated replicates (one fixed crowd, 200 items each).
5. Judge panels: 8 judges, 3 sharing errors: detection and accuracy before/after down-weighting.

Run: python benchmarks/bench_ratings.py [--seeds 5] [--replicates 200] [--quick]
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np
import pandas as pd
from _common import DATASETS, ROOT, make_parser

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the reference checks and the coverage study are tests/test_reliability.py's

from fusion_core.data.numeric import NumericResponses
from fusion_core.data.responses import Responses
from fusion_core.diagnostics.judges import correlated_judges
from fusion_core.diagnostics.krippendorff import METRICS, krippendorff
from fusion_core.diagnostics.reliability import icc, pair_ratings, weighted_kappa
from fusion_core.methods import create
from fusion_core.methods.numeric import NumericTruth
from fusion_core.simulate.judges import judge_panel
from fusion_core.simulate.ratings import numeric_ratings, ordinal_crowd


def _fit(name: str, data, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create(name, **params).fit(data)


def _acc_mae(labels: pd.Series, truth: pd.Series) -> tuple[float, float]:
    lab = labels.reindex(truth.index).astype(float)
    return float((lab == truth.astype(float)).mean()), float((lab - truth.astype(float)).abs().mean())


def ordinal_section(seeds: int) -> None:
    print("\n== 1. Ordinal crowds: 500 items, 20 annotators (5 lenient, 5 harsh, 4 noisy, 6 reliable), 5 per item")
    methods = [("ordinal-em", {"levels": "numeric"}), ("ordinal-em", {"levels": "numeric", "scale": "equal"})]
    methods += [("ds", {}), ("ds1", {}), ("mv", {})]
    rows = []
    for seed in range(seeds):
        sim = ordinal_crowd(seed=seed)
        for name, params in methods:
            est = _fit(name, sim.responses, **params)
            acc, mae = _acc_mae(est.labels_, sim.truth)
            rows.append({"method": name + ("" if "scale" not in params else " (equal scale)"), "acc": acc, "mae": mae})
            if name == "ordinal-em" and "scale" not in params:
                sc = est.result_.ordinal
                rows[-1]["bias_r"] = np.corrcoef(sc.bias, sim.bias.reindex(est.workers_))[0, 1]
                rows[-1]["noise_r"] = np.corrcoef(sc.noise, sim.noise.reindex(est.workers_))[0, 1]
                rows[-1]["verdicts"] = float((sc.verdict == sim.role.reindex(est.workers_).to_numpy()).mean())
    table = pd.DataFrame(rows).groupby("method", sort=False).mean()
    print(f"(mean over {seeds} seeds)")
    print(table.round(4).to_string())
    if (DATASETS / "relevance").is_dir():
        answers = pd.read_csv(DATASETS / "relevance" / "answers.csv")
        truth = pd.read_csv(DATASETS / "relevance" / "truth.csv").set_index("task")["truth"]
        print("relevance grades 0–3 (real, 4,460 gold items):")
        for name, params in [("ordinal-em", {}), ("ds", {}), ("mv", {})]:
            acc, mae = _acc_mae(_fit(name, answers, **params).labels_, truth)
            print(f"  {name:12s} accuracy {acc:.4f}  MAE {mae:.4f}")


def numeric_section(seeds: int) -> None:
    print("\n== 2. Numeric ratings: 400 items, 15 annotators, 5 per item (bias sd 4, noise sd 1–8)")
    for outliers in (0.0, 0.05):
        rows = []
        for seed in range(seeds):
            sim = numeric_ratings(seed=seed, outlier_rate=outliers)
            t = sim.truth
            grouped = sim.responses.groupby("task")["value"]
            row = {"mean": grouped.mean(), "median": grouped.median()}
            out: dict[str, float] = {k: float(np.sqrt(((v.reindex(t.index) - t) ** 2).mean())) for k, v in row.items()}
            for noise in ("gaussian", "student-t"):
                fit = NumericTruth(noise=noise).fit(sim.responses)
                res = fit.result_
                lo, hi = res.interval_low.reindex(t.index), res.interval_high.reindex(t.index)
                out[noise] = float(np.sqrt(((fit.truth_.reindex(t.index) - t) ** 2).mean()))
                out[f"{noise} bias r"] = float(fit.bias_.corr(sim.bias))
                out[f"{noise} coverage"] = float(((lo <= t) & (t <= hi)).mean())
            rows.append(out)
        print(f"outliers {outliers:.0%} (RMSE, mean over {seeds} seeds):")
        print(pd.DataFrame(rows).mean().round(4).to_string())


def reference_section() -> None:
    print("\n== 3. Agreement statistics vs reference implementations (largest |difference| over the datasets)")
    try:
        import krippendorff as kd
        import pingouin as pg
        from sklearn.metrics import cohen_kappa_score
    except ImportError as exc:
        print(f"skipped: {exc.name} is not installed (pip install -e '.[test]')")
        return
    from test_reliability import busiest, reliability_data

    worst: dict[str, float] = {}
    for name in ("relevance", "face", "dog", "bluebirds", "rte"):
        if not (DATASETS / name).is_dir():
            continue
        answers = pd.read_csv(DATASETS / name / "answers.csv").drop_duplicates(["task", "worker"], keep="last")
        resp = Responses.from_frame(answers)
        data = reliability_data(resp)
        for metric in METRICS:
            diff = abs(
                kd.alpha(data, level_of_measurement=metric) - krippendorff(resp, metric=metric, n_bootstrap=0).value
            )
            worst[f"alpha {metric}"] = max(worst.get(f"alpha {metric}", 0.0), diff)
        if name in ("bluebirds", "rte"):
            continue
        a, b = pair_ratings(resp, *busiest(answers, 2))
        for w in (None, "linear", "quadratic"):
            diff = abs(cohen_kappa_score(a, b, weights=w) - weighted_kappa(a, b, weights=w, n_bootstrap=0).value)
            worst[f"kappa {w or 'unweighted'}"] = max(worst.get(f"kappa {w or 'unweighted'}", 0.0), diff)
        raters = busiest(answers, 3)
        block = answers[answers["worker"].isin(raters)].pivot(index="task", columns="worker", values="label").dropna()
        long = block.reset_index().melt(id_vars="task", var_name="worker", value_name="value")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = pg.intraclass_corr(data=long, targets="task", raters="worker", ratings="value").set_index("Type")
        numeric = NumericResponses.from_frame(long)
        for form, key in (("1", "ICC(1,1)"), ("2", "ICC(A,1)"), ("3", "ICC(C,1)")):
            diff = abs(ref.loc[key, "ICC"] - icc(numeric, form=form, n_bootstrap=0).value)
            worst[f"ICC form {form}"] = max(worst.get(f"ICC form {form}", 0.0), diff)
    for k, v in worst.items():
        print(f"  {k:22s} {v:.1e}")


def coverage_section(replicates: int) -> None:
    from test_reliability import COVERAGE_CASES, coverage

    print(f"\n== 4. Coverage of 95 % bootstrap intervals ({replicates} replicates of 200 items, 1,000 resamples each)")
    for name in COVERAGE_CASES:
        t0 = time.perf_counter()
        print(f"  {name:18s} {coverage(name, replicates):.3f}   ({time.perf_counter() - t0:.1f} s)")


def judges_section(seeds: int) -> None:
    print("\n== 5. Judge panels: 600 items, 8 judges, 3 sharing errors on 30 % of the items")
    rows = []
    for seed in range(seeds):
        sim = judge_panel(seed=seed)
        truth_group = tuple(sorted(sim.group.index[sim.group]))
        for method in ("ds", "mv"):
            res = correlated_judges(sim.responses, method=method, true_labels=sim.truth, judges=sim.judges)
            rows.append(
                {
                    "seed": seed,
                    "method": method,
                    "detected": res.groups == (truth_group,),
                    "source": res.source,
                    "p": res.p_value,
                    "before": res.effect.accuracy_before,
                    "after": res.effect.accuracy_after,
                    "changed": len(res.effect.changed),
                    "group lift": float(res.group_summary["error_lift"].iloc[0]) if len(res.groups) else np.nan,
                }
            )
    table = pd.DataFrame(rows)
    print(table.round(4).to_string(index=False))
    print(table.groupby("method")[["detected", "before", "after", "changed"]].mean().round(4).to_string())


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--replicates", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="2 seeds and 20 coverage replicates")
    args = ap.parse_args()
    seeds, reps = (2, 20) if args.quick else (args.seeds, args.replicates)
    t0 = time.perf_counter()
    ordinal_section(seeds)
    numeric_section(seeds)
    reference_section()
    coverage_section(reps)
    judges_section(seeds)
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
