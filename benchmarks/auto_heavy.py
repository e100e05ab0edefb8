"""The recommended method on simulated crowds dominated by a few heavy annotators (issue 21; the simulator is
``fusion_core.simulate.heavy``), plus the dense and sparse crowds of ``bench_auto.py``.

For each variant and seed: accuracy of ``auto`` and of ``mv``, ``ds``, ``ds1``, ``mace`` (and any ``--extra``
methods), auto's pick, and the targets: auto ≥ max(ds1, mv) − 0.5 pt on every heavy variant's mean, ≥ ds + 2 pt
where the heavy annotators are near chance, dense crowds within 0.3 pt of ds.

    python benchmarks/auto_heavy.py [--seeds 10] [--variants heavy,heavy-near-chance,...] [--extra glad,ebcc]
"""

from __future__ import annotations

import os
import warnings

import pandas as pd
from _common import make_parser

from fusion_core.methods import create
from fusion_core.simulate.heavy import HEAVY_VARIANTS


def _others() -> dict:
    from bench_auto import SCENARIOS

    return {"dense": SCENARIOS["dense"], "sparse": SCENARIOS["sparse"]}


def accuracy(est, truth: pd.Series) -> float:
    return float((est.labels_.reindex(truth.index).astype(str) == truth.astype(str)).mean())


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--variants", default=",".join([*HEAVY_VARIANTS, "dense", "sparse"]))
    ap.add_argument("--extra", default="", help="more methods to show, comma-separated (e.g. glad,ebcc)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    gens = {**HEAVY_VARIANTS, **_others()}
    methods = ["mv", "ds", "ds1", "mace", *[m for m in args.extra.split(",") if m]]
    lines = []
    for v in args.variants.split(","):
        rows = []
        for s in range(args.seeds):
            sim = gens[v](s)
            auto = create("auto").fit(sim.responses)
            row = {"seed": s, "auto": accuracy(auto, sim.truth), "pick": "+".join(auto.members_)}
            row.update({m: accuracy(create(m).fit(sim.responses), sim.truth) for m in methods})
            rows.append(row)
        df = pd.DataFrame(rows)
        print(f"\n{v} ({len(sim.responses):,} responses, load {os.getloadavg()[0]:.1f})")
        with pd.option_context("display.width", 200, "display.float_format", "{:.4f}".format):
            print(df.to_string(index=False))
        mean = df.drop(columns=["seed", "pick"]).mean()
        ref = max(mean["ds1"], mean["mv"])
        line = (
            f"{v}: auto {100 * mean['auto']:.2f} | max(ds1, mv) {100 * ref:.2f} ({100 * (mean['auto'] - ref):+.2f} pt) "
            f"| ds {100 * mean['ds']:.2f} ({100 * (mean['auto'] - mean['ds']):+.2f} pt)"
        )
        if v.startswith("heavy"):
            ok = mean["auto"] >= ref - 0.005 and (v != "heavy-near-chance" or mean["auto"] >= mean["ds"] + 0.02)
            line += f"  target {'met' if ok else 'NOT met'}"
        elif v == "dense":
            line += f"  target (within 0.3 pt of ds) {'met' if mean['auto'] >= mean['ds'] - 0.003 else 'NOT met'}"
        lines.append(line)
        print(line, flush=True)
    print("\nSUMMARY")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
