"""Gold-free signals for the re-labelling plan at a replay's start (issue 22; docs/PLAN.md, sixth session).

For every crowd of :mod:`relabel_replay` (first start; 2, 3 and 5 responses per item) it prints

* the audit's **stacking weight** of the latent-class model against the population model
  (:mod:`fusion_core.diagnostics.audit.stacking`; Yao et al. 2018) ± its sandwich sd — low where the model's
  posteriors are not supported by left-out responses;
* at 2 responses per item, the annotators the responses tell apart from the crowd
  (:func:`fusion_core.diagnostics.predictive.planning_confusion`), and where the plan's model (its own-matrix
  posterior) and the fit label an item differently, how often each is right on gold (gold only scores);
* the expected calibration error (10 bins) of the plan's belief that the fit's label is right, with every
  annotator's own shrunk matrix and with the alike annotators' past responses weighed alike (``POOLED_BELIEF``).

    python benchmarks/plan_signals.py --datasets rte temp dog face bluebirds --simulated 1 --confusable 2 \\
        --shared-confusion 2 --sparse 1
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import relabel_replay as rr
from _common import load, make_parser

import fusion_core.diagnostics.predictive as predictive
from fusion_core.diagnostics.audit.difficulty import difficulty_mixture


def ece(p: np.ndarray, right: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error of probabilities ``p`` against outcomes ``right`` (equal-width bins)."""
    b = np.minimum((p * bins).astype(int), bins - 1)
    n = np.bincount(b, minlength=bins)
    gap = np.abs(np.bincount(b, p, bins) - np.bincount(b, right.astype(float), bins))
    return float(gap.sum() / max(n.sum(), 1))


def signals(name: str, answers: pd.DataFrame, truth: pd.Series, seed: int) -> None:
    weights = []
    for m in (2, 3, 5):
        filtered, _, start = rr.replay_start(answers, truth, np.random.default_rng(seed), per_item=m)
        est = rr._fit(filtered[start], "ds")
        res, resp = est.result_, est.responses_
        st = difficulty_mixture(resp, res.posterior, res.label_codes).stacking
        weights.append(f"{st.weight:.2f} ± {st.weight_sd:.2f}" if st is not None else "—")
        if m != 2:
            continue
        gold = pd.Index(res.classes).get_indexer(truth.reindex(pd.Index(res.items)))
        fit_label = res.label_codes
        rows = np.arange(len(fit_label))
        right = fit_label == gold
        default = predictive.POOLED_BELIEF
        predictive.POOLED_BELIEF = False
        own = predictive.planning_model(resp, res)
        predictive.POOLED_BELIEF = True
        pooled = predictive.planning_model(resp, res)
        predictive.POOLED_BELIEF = default
        differ = own.posterior.argmax(axis=1) != fit_label
        votes = resp.vote_counts()
        ties = (votes == votes.max(axis=1, keepdims=True)).sum(axis=1) > 1
        two = (
            f"{int(own.distinct.sum())}/{len(own.distinct)} | {int(differ.sum())} ({int((differ & ties).sum())} ties):"
            f" {(own.posterior.argmax(axis=1) == gold)[differ].mean():.2f} / {right[differ].mean():.2f} | "
            f"{ece(own.posterior[rows, fit_label], right):.3f} → {ece(pooled.posterior[rows, fit_label], right):.3f}"
        )
    print(f"| {name} | {' | '.join(weights)} | {two} |", flush=True)


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--datasets", nargs="*", default=["rte", "temp", "dog", "face", "bluebirds"])
    ap.add_argument("--simulated", type=int, default=1)
    ap.add_argument("--confusable", type=int, default=2)
    ap.add_argument("--shared-confusion", type=int, default=2)
    ap.add_argument("--sparse", type=int, default=1)
    args = ap.parse_args()
    print(
        "| crowd | stacking weight, 2 responses per item | 3 | 5 | told apart | model ≠ fit (ties): model / fit"
        " right | ECE of P(fit's label right): own matrices → alike weighed alike |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.datasets:
        signals(name, *load(name), 0)
    crowds = [("simulated binary", rr.simulated, args.simulated), ("confusable", rr.confusable, args.confusable)]
    crowds += [("shared confusion", rr.shared_confusion, args.shared_confusion), ("sparse", rr.sparse, args.sparse)]
    for label, make, count in crowds:
        for s in range(count):
            signals(f"{label}, seed {s}", *make(s), s)


if __name__ == "__main__":
    main()
