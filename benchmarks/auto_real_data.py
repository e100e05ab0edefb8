"""``auto`` on the real categorical and ensemble datasets (issue 14 "Done when"): the accuracy on gold of every
registered plain method, auto's choice and accuracy, and the summary lines (within 1 point of the best on ≥ 10
of 12; mean ≥ the best single method's mean + 0.5 point; youtube_lf ≥ 85 %).

    python benchmarks/auto_real_data.py [dataset ...] [--methods ds,ds1,...]

``--methods`` restricts the accuracy columns (default: every registered plain method except auto).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd
from _common import categorical_datasets, load, make_parser

from fusion_core.methods import available, create


def accuracy(labels: pd.Series, truth: pd.Series) -> float:
    common = truth.index.intersection(labels.index)
    return float((labels.loc[common].astype(str) == truth.loc[common].astype(str)).mean())


def one_dataset(name: str, methods: list[str]) -> dict:
    answers, truth = load(name)
    row: dict = {"dataset": name}
    for m in methods:
        try:
            row[m] = accuracy(create(m).fit(answers).labels_, truth)
        except Exception as exc:  # report, keep going
            row[m] = float("nan")
            print(f"  {name}: {m} failed: {type(exc).__name__}: {exc}")
    t0 = time.perf_counter()
    auto = create("auto").fit(answers)
    row["auto_s"] = time.perf_counter() - t0
    row["auto"] = accuracy(auto.labels_, truth)
    row["pick"] = "+".join(auto.members_)
    table = auto.heldout_scores_
    print(
        f"== {name}: auto {row['auto']:.4f} = {row['pick']} ({row['auto_s']:.2f} s); held-out scores: "
        + ", ".join(f"{m} {s:.4f}" for m, s in zip(table["method"], table["score"])),
        flush=True,
    )
    return row


def summary(df: pd.DataFrame, methods: list[str]) -> list[str]:
    acc = df.set_index("dataset")[methods]
    best = acc.max(axis=1)
    within = df.set_index("dataset")["auto"] >= best - 0.01 - 1e-12
    means = acc.mean().sort_values(ascending=False)
    top, top_mean = means.index[0], float(means.iloc[0])
    auto_mean = float(df["auto"].mean())
    yt = df.loc[df["dataset"] == "youtube_lf", "auto"]
    lines = [
        f"auto within 1 point of the best registered method on {int(within.sum())}/{len(df)} datasets "
        f"(target ≥ 10 of 12): {'met' if within.sum() >= 10 else 'NOT met'}; misses: "
        + (
            ", ".join(
                f"{d} ({df.set_index('dataset').loc[d, 'auto']:.4f} vs {best[d]:.4f})" for d in within.index[~within]
            )
            or "none"
        ),
        f"mean accuracy: auto {auto_mean:.4f}; best single method {top} {top_mean:.4f}; target {top_mean + 0.005:.4f}: "
        f"{'met' if auto_mean >= top_mean + 0.005 else 'NOT met'}; per-dataset best (oracle) {best.mean():.4f}",
    ]
    if len(yt):
        lines.append(
            f"youtube_lf: auto {float(yt.iloc[0]):.4f} (target ≥ 0.85): {'met' if yt.iloc[0] >= 0.85 else 'NOT met'}"
        )
    lines.append("method means: " + ", ".join(f"{m} {v:.4f}" for m, v in means.items()))
    return lines


def main(names: list[str], methods: list[str] | None = None) -> None:
    warnings.simplefilter("ignore")
    names = names or categorical_datasets()
    methods = methods or [m.name for m in available(("plain",)) if m.needs() == () and m.name != "auto"]
    print(f"methods: {methods}\n")
    df = pd.DataFrame([one_dataset(n, methods) for n in names])
    with pd.option_context("display.width", 250, "display.max_columns", 60, "display.float_format", "{:.4f}".format):
        print("\nACCURACY ON GOLD (dataset × method; auto = its labels, pick = the methods it averaged)")
        print(df[["dataset", *methods, "auto", "pick"]].to_string(index=False))
        mean_row = df[[*methods, "auto"]].mean()
        print("mean   " + "  ".join(f"{m} {v:.4f}" for m, v in mean_row.items()))
    print()
    for line in summary(df, methods):
        print(line)
    if np.isfinite(df["auto_s"]).all():
        print(f"auto seconds: total {df['auto_s'].sum():.1f} (per dataset: see bench_auto.py for ratios to ds)")


if __name__ == "__main__":
    ap = make_parser(__doc__)
    ap.add_argument("datasets", nargs="*", help="dataset names (default: every categorical and ensemble set)")
    ap.add_argument("--methods", help="comma-separated method names for the accuracy columns")
    args = ap.parse_args()
    main(args.datasets, args.methods.split(",") if args.methods else None)
