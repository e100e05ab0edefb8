"""auto on the real categorical datasets: held-out scores, the pick, the accuracy of every registered plain
method, and whether the pick is within 1 point of the best (issue 5 acceptance).  Prints a table.

    python benchmarks/auto_real_data.py [dataset ...] [--candidates ds,ds1,...] [--methods ds,ds1,mv,...]

``--candidates`` restricts the held-out comparison (default: every registered plain probabilistic method, as
``auto`` does); ``--methods`` restricts the accuracy columns (default: every registered plain method).
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from fusion_core.methods.heldout import compare
from fusion_core.methods import available, create
from fusion_core.methods.auto import default_candidates

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def main(names: list[str], cands: list[str] | None = None, methods: list[str] | None = None) -> None:
    warnings.simplefilter("ignore")
    manifest = json.loads((DATASETS / "manifest.json").read_text())
    cats = [d["name"] for d in manifest if d["kind"] == "categorical"]
    names = names or cats
    plain = methods or [m.name for m in available(("plain",)) if m.needs() == () and m.name != "auto"]
    cands = cands or default_candidates()
    print(f"candidates (held-out scored): {cands}")
    print(f"all plain methods (accuracy): {plain}\n")
    rows = []
    for name in names:
        ans = pd.read_csv(DATASETS / name / "answers.csv")
        truth = pd.read_csv(DATASETS / name / "truth.csv").set_index("task")["truth"]
        t0 = time.perf_counter()
        table, chosen, _ = compare(cands, ans, frac=0.1, n_splits=3, random_state=0)
        t_sel = time.perf_counter() - t0
        acc = {}
        secs = {}
        for m in plain:
            t1 = time.perf_counter()
            try:
                lab = create(m).fit(ans).labels_
                common = truth.index.intersection(lab.index)
                acc[m] = float((lab.loc[common].astype(str) == truth.loc[common].astype(str)).mean())
            except Exception as exc:  # report, keep going
                acc[m] = float("nan")
                print(f"  {name}: {m} failed: {type(exc).__name__}: {exc}")
            secs[m] = time.perf_counter() - t1
        best = max(v for v in acc.values() if np.isfinite(v))
        best_m = [m for m, v in acc.items() if v == best]
        ok = acc[chosen] >= best - 0.01
        scores = dict(zip(table["method"], table["score"]))
        print(
            f"== {name}: pick {chosen} (acc {acc[chosen]:.4f}), best {best_m} ({best:.4f}), within 1 pt: {ok}, selection {t_sel:.1f} s"
        )
        print("   held-out (nats/response): " + ", ".join(f"{m} {s:.4f}" for m, s in scores.items()))
        print("   accuracy: " + ", ".join(f"{m} {a:.4f}" for m, a in acc.items()))
        print("   fit seconds: " + ", ".join(f"{m} {s:.1f}" for m, s in secs.items()), flush=True)
        rows.append(
            {
                "dataset": name,
                "pick": chosen,
                "pick_acc": acc[chosen],
                "best": "/".join(best_m),
                "best_acc": best,
                "within_1pt": ok,
                "select_s": round(t_sel, 1),
                **{f"ho:{m}": round(s, 4) for m, s in scores.items()},
                **{f"acc:{m}": round(a, 4) for m, a in acc.items()},
            }
        )
    df = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_columns", 50):
        print("\nSUMMARY")
        print(df[["dataset", "pick", "pick_acc", "best", "best_acc", "within_1pt", "select_s"]].to_string(index=False))
        print("\nHELD-OUT SCORES (nats per hidden response, higher is better)")
        print(df[["dataset"] + [c for c in df.columns if c.startswith("ho:")]].to_string(index=False))
        print("\nACCURACY")
        print(df[["dataset"] + [c for c in df.columns if c.startswith("acc:")]].to_string(index=False))
    print(f"\npick within 1 point of the best on {int(df['within_1pt'].sum())}/{len(df)} datasets")


if __name__ == "__main__":
    args = sys.argv[1:]
    opts = {}
    for flag in ("--candidates", "--methods"):
        if flag in args:
            i = args.index(flag)
            opts[flag] = args[i + 1].split(",")
            del args[i : i + 2]
    main(args, opts.get("--candidates"), opts.get("--methods"))
