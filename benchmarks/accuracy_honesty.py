"""Is the audit's label-accuracy figure honest?  (issue 21, item 4; docs/AUDIT.md, "Never confidently wrong")

For each public dataset with gold (``../shared/datasets``) and for simulated crowds that break the models'
assumptions (heavy correlated annotators, cartels, item difficulty), fits the recommended method, computes the
audit's accuracy range (``fusion_core.diagnostics.audit.safety``) and compares it with the accuracy measured on the
truth: does the range (widened by 1 pt) cover it, and how far is the estimate, and the model's own figure, above it.

    python benchmarks/accuracy_honesty.py [--seeds 10] [--skip-real] [--skip-sim]
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pandas as pd
from _common import categorical_datasets, load, make_parser

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit.safety import label_safety
from fusion_core.methods import create
from fusion_core.simulate.heavy import HEAVY_VARIANTS
from fusion_core.simulate.peer import glad_crowd
from fusion_core.simulate.spectral import cartel


def one(answers: pd.DataFrame, truth: pd.Series) -> dict:
    resp = Responses.from_frame(answers)
    fit = create("auto").fit(resp).result_
    majority = create("mv").fit(resp).result_.label_codes
    codes = np.asarray(fit.label_codes)
    s = label_safety(resp, fit, codes, majority)
    gold = truth.reindex(resp.items)
    known = gold.notna().to_numpy()
    labels = resp.classes.take(codes).astype(str)
    true_acc = float((labels[known] == gold[known].astype(str).str.replace(r"\.0$", "", regex=True)).mean())
    a = s.accuracy
    return {
        "gold": true_acc,
        "estimate": a.estimate,
        "low": a.low,
        "high": a.high,
        "model": a.model,
        "heldout": a.heldout,
        "covered": bool(a.low - 0.01 <= true_acc <= a.high + 0.01),
        "over": a.estimate - true_acc,
        "model_over": a.model - true_acc,
        "pinned": a.pinned,
        "depends": int(s.depends.sum()),
    }


SIMS = {
    "heavy": HEAVY_VARIANTS["heavy"],
    "heavy-near-chance": HEAVY_VARIANTS["heavy-near-chance"],
    "cartel": lambda s: cartel(m=40, n=800, r=0.25, per_item=8, seed=s),
    "glad": lambda s: glad_crowd(n_items=1000, n_workers=30, n_classes=2, responses_per_item=8, seed=s),
}


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--skip-sim", action="store_true")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    fmt = {"display.width": 200, "display.float_format": "{:.3f}".format}
    if not args.skip_real:
        rows = []
        for name in categorical_datasets():
            answers, truth = load(name)
            rows.append({"dataset": name, **one(answers, truth)})
            print(rows[-1], flush=True)
        df = pd.DataFrame(rows).set_index("dataset")
        with pd.option_context(*[x for kv in fmt.items() for x in kv]):
            print(df.to_string())
        print(
            f"public sets: range (±1 pt) covers gold on {int(df.covered.sum())}/{len(df)} (target ≥ 10); mean "
            f"overstatement of the estimate {100 * df.over.mean():+.1f} pt (target ≤ 2), of the model's own figure "
            f"{100 * df.model_over.mean():+.1f} pt; load {os.getloadavg()[0]:.1f}"
        )
    if not args.skip_sim:
        for kind, make in SIMS.items():
            rows = []
            for s in range(args.seeds):
                sim = make(s)
                rows.append(one(sim.responses, sim.truth))
            df = pd.DataFrame(rows)
            print(
                f"{kind}: covered {int(df.covered.sum())}/{len(df)} (target ≥ 85 %); estimate − truth "
                f"{100 * df.over.mean():+.1f} pt, model − truth {100 * df.model_over.mean():+.1f} pt; mean range "
                f"width {100 * (df.high - df.low).mean():.1f} pt",
                flush=True,
            )


if __name__ == "__main__":
    main()
