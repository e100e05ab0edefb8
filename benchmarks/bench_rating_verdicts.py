"""Verdict oracle for ratings (issue 13 item 5): on simulated crowds with known lenient, harsh, noisy and
near-chance annotators, the share of each kind whose verdict names it, the share of reliable annotators given
any flag (misflagged) or left undecided ("not enough ratings to tell"), and the coverage of the 95 % bias
intervals (numeric: the true biases are known exactly).

Design per seed: 20 annotators (4 lenient, 4 harsh, 4 noisy, 2 near chance, 6 reliable), 5 ratings per item;
400 items (≈ 100 ratings per annotator), and with ``--sparse`` 120 items (≈ 30).
Run: python benchmarks/bench_rating_verdicts.py [--seeds 20] [--bootstrap 100] [--sparse]
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
from _common import ROOT, make_parser

sys.path.insert(0, str(ROOT))

from fusion_core.diagnostics.rating_verdicts import FLAGS, numeric_verdicts, ordinal_verdicts
from fusion_core.simulate.ratings import numeric_crowd, ordinal_crowd

KINDS = ("lenient", "harsh", "noisy", "near chance")
DESIGN = {"n_workers": 20, "n_lenient": 4, "n_harsh": 4, "n_noisy": 4, "n_chance": 2}


def run(kind: str, seeds: int, n_bootstrap: int, items: int) -> None:
    hits: dict[str, list[bool]] = {k: [] for k in KINDS}
    misflag, undecided, covered = [], [], []
    t0 = time.perf_counter()
    for seed in range(seeds):
        if kind == "ordinal":
            sim = ordinal_crowd(n_items=items, seed=1000 + seed, **DESIGN)
            v = ordinal_verdicts(sim.responses, n_bootstrap=n_bootstrap, random_state=seed)
        else:
            sim = numeric_crowd(n_items=items, seed=1000 + seed, **DESIGN)
            v = numeric_verdicts(sim.responses, n_bootstrap=n_bootstrap, random_state=seed)
            true = sim.bias.reindex(v.table.index)
            covered += ((v.table["bias_low"] <= true) & (true <= v.table["bias_high"])).tolist()
        role = sim.role
        verdict = v.table["verdict"].reindex(role.index)
        for w, r in role.items():
            if r == "reliable":
                misflag.append(any(f in verdict[w] for f in FLAGS))
                undecided.append(verdict[w] == "not enough ratings to tell")
            else:
                hits[r].append(r in verdict[w])
    secs = (time.perf_counter() - t0) / seeds
    flagged = ", ".join(f"{k} {100 * np.mean(h):.1f} % of {len(h)}" for k, h in hits.items())
    per = 5 * items / DESIGN["n_workers"]
    print(f"{kind}: {items} items (≈ {per:.0f} ratings per annotator), {seeds} seeds, {n_bootstrap} refits, "
          f"{secs:.1f} s per crowd", flush=True)  # fmt: skip
    print(f"  flagged as their kind: {flagged}")
    print(
        f"  reliable annotators ({len(misflag)}): misflagged {100 * np.mean(misflag):.1f} %, "
        f"not enough ratings to tell {100 * np.mean(undecided):.1f} %",
        flush=True,
    )
    if covered:
        print(f"  95 % bias intervals cover the true bias for {100 * np.mean(covered):.1f} % of {len(covered)}")


def main() -> None:
    p = make_parser(__doc__)
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--bootstrap", type=int, default=100)
    p.add_argument("--sparse", action="store_true", help="also 120 items (≈ 30 ratings per annotator)")
    args = p.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    for items in (400, 120) if args.sparse else (400,):
        for kind in ("ordinal", "numeric"):
            run(kind, args.seeds, args.bootstrap, items)


if __name__ == "__main__":
    main()
