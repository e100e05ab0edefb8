"""Graded labels (issue 21 item 5): accuracy, mean absolute level error and auto's held-out score of the nominal
methods (mv, ds, mace) and the ordinal ones (ordinal-em, ordinal-ds) on adult, relevance and simulated graded crowds.

The held-out score is the one ``auto`` ranks candidates by (``fusion_core.methods.auto.scoring.score_candidates``:
one hashed split of five folds, β = 2, tolerance loosened to 1e-5), printed as the difference to ``ds`` in nats
per hidden response with its paired standard error, so one can read whether a held-out criterion would pick the
ordinal model on ordered-probit graders and ``ds`` on Dawid–Skene graders.

    python benchmarks/graded.py                       # real sets + 10 seeds of each simulated crowd (27 min at load ≈ 18)
    python benchmarks/graded.py --seeds 2 --no-real   # a quick look
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
from _common import DATASETS, load, make_parser

from fusion_core.data.responses import Responses
from fusion_core.methods import create
from fusion_core.methods.auto import canonical_order
from fusion_core.methods.auto.folds import heldout_masks
from fusion_core.methods.auto.scoring import CandidateScore, paired_gap, score_candidates
from fusion_core.simulate.graded import GradedCrowd, confusion_graders, probit_graders

METHODS = ("mv", "ds", "mace", "ordinal-em", "ordinal-ds")
ORDINAL = ("ordinal-em", "ordinal-ds")
SIMS: dict[str, Callable[[int], GradedCrowd]] = {
    "confusion": lambda seed: confusion_graders(seed=seed),
    "probit": lambda seed: probit_graders(seed=seed),
    "confusion-sparse": lambda seed: confusion_graders(n_workers=120, sparse=True, seed=seed),
    "probit-sparse": lambda seed: probit_graders(n_workers=120, sparse=True, seed=seed),
}


def make(name: str, params: dict[str, dict], tol: float | None = None):
    est = create(name, **params.get(name, {}))
    if tol is not None and "tol" in type(est).params and float(est.tol) < tol:
        est.set_params(tol=tol)
    return est


def evaluate(answers: pd.DataFrame, truth: pd.Series, methods: list[str], params: dict, heldout: bool) -> dict:
    """Accuracy, MAE, seconds per method and (optionally) the held-out score table of ``score_candidates``."""
    out: dict = {}
    for name in methods:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = make(name, params).fit(answers)
        lab = est.labels_.reindex(truth.index)
        out[name] = {
            "acc": float((lab == truth).mean()),
            "mae": float((lab.astype(float) - truth.astype(float)).abs().mean()),
            "sec": time.perf_counter() - t0,
        }
    if heldout:
        resp = canonical_order(Responses.from_frame(answers))
        order = [float(c) for c in resp.classes]
        assert order == sorted(order), "levels must be the classes' own order for the held-out fits"
        masks = heldout_masks(resp, 5, 1)
        ho = {n: {k: v for k, v in p.items() if k != "levels"} for n, p in params.items()}  # numbers: own order
        scores = score_candidates(methods, lambda n: make(n, ho, 1e-5), resp, masks, fit_kwargs={}, prior_strength=2.0)
        by = {s.name: s for s in scores}
        ref: CandidateScore = by["ds"]
        usable = [s for s in scores if s.usable]
        best = max(usable, key=lambda s: s.score).name if usable else "-"
        for s in scores:
            gap, se = paired_gap(ref, s)  # ds − s
            out[s.name].update(score=s.score, vs_ds=-gap, se=se, collapsed=s.collapsed)
        out["_best"] = best
    return out


def fmt_row(label: str, res: dict, methods: list[str], heldout: bool) -> str:
    cells = [f"{res[m]['acc']:.4f} / {res[m]['mae']:.3f}" for m in methods]
    line = f"| {label} | " + " | ".join(cells) + " |"
    if heldout:
        ho = [f"{res[m]['vs_ds']:+.4f} ± {res[m]['se']:.4f}" for m in methods]
        line += " " + " | ".join(ho) + f" | {res['_best']} |"
    return line


def header(methods: list[str], heldout: bool) -> str:
    h = "| set | " + " | ".join(f"{m} acc / MAE" for m in methods) + " |"
    if heldout:
        h += " " + " | ".join(f"{m} held-out − ds" for m in methods) + " | held-out best |"
    return h + "\n|" + "---|" * (1 + len(methods) * (2 if heldout else 1) + (1 if heldout else 0))


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--seeds", type=int, default=10, help="seeds per simulated crowd (default 10)")
    ap.add_argument("--sims", default=",".join(SIMS), help=f"simulated crowds, comma-separated ({', '.join(SIMS)})")
    ap.add_argument("--datasets", default="adult,relevance", help="real sets in ../shared/datasets (comma-separated)")
    ap.add_argument("--no-real", action="store_true", help="skip the real sets")
    ap.add_argument("--no-heldout", action="store_true", help="skip the held-out scores (half the time)")
    ap.add_argument("--methods", default=",".join(METHODS), help="methods, comma-separated (must include ds)")
    ap.add_argument("--strength", type=float, default=None, help="ordinal-ds strength (default: the method's)")
    args = ap.parse_args()
    methods = args.methods.split(",")
    heldout = not args.no_heldout
    params: dict[str, dict] = {m: {"levels": "numeric"} for m in ORDINAL}
    if args.strength is not None:
        params["ordinal-ds"]["strength"] = args.strength
    print(f"methods: {methods}; ordinal methods with levels='numeric'; ordinal-ds params {params['ordinal-ds']}")
    print("cells: accuracy / mean absolute level error; held-out: nats per hidden response − ds's (± paired SE)\n")

    if not args.no_real and DATASETS.exists():
        print("## Real sets\n")
        print(header(methods, heldout))
        secs = {}
        for name in args.datasets.split(","):
            answers, truth = load(name)
            res = evaluate(answers, truth, methods, params, heldout)
            print(fmt_row(name, res, methods, heldout), flush=True)
            secs[name] = {m: round(res[m]["sec"], 1) for m in methods}
        print("\nseconds per fit:", secs, "\n")

    for kind in args.sims.split(","):
        rows = []
        for seed in range(args.seeds):
            sim = SIMS[kind](seed)
            rows.append(evaluate(sim.responses, sim.truth, methods, params, heldout))
        print(f"## {kind} ({args.seeds} seeds)\n")
        print(header(methods, heldout))
        for seed, res in enumerate(rows):
            print(fmt_row(f"seed {seed}", res, methods, heldout))
        mean = {
            m: {k: float(np.mean([r[m][k] for r in rows])) for k in rows[0][m] if k != "collapsed"} for m in methods
        }
        if heldout:
            mean["_best"] = ", ".join(
                f"{b}×{n}" for b, n in pd.Series([r["_best"] for r in rows]).value_counts().items()
            )
        print(fmt_row("**mean**", mean, methods, heldout))
        gain = {m: 100 * (mean[m]["acc"] - mean["ds"]["acc"]) for m in methods}
        wins = {m: sum(r[m]["acc"] > r["ds"]["acc"] for r in rows) for m in methods}
        print(f"\naccuracy − ds (points): { ({m: round(g, 2) for m, g in gain.items()}) }; seeds above ds: {wins}")
        print(f"seconds per fit (mean): { {m: round(mean[m]['sec'], 2) for m in methods} }\n", flush=True)


if __name__ == "__main__":
    main()
