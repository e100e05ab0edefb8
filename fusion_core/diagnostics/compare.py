"""Comparing fitted methods: label agreement, items that change, annotator rankings, accuracy on gold."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from fusion_core.diagnostics.tables import label_confidence
from fusion_core.methods.results import as_result
from fusion_core.metrics import accuracy as _accuracy


@dataclass
class Comparison:
    """Methods side by side (all frames indexed by the names given to :func:`compare_methods`)."""

    agreement: pd.DataFrame  # methods × methods: fraction of shared items with the same label
    changed: pd.DataFrame  # methods × methods: number of shared items whose label differs
    rank_correlation: pd.DataFrame  # methods × methods: Spearman ρ of annotator skills (shared annotators)
    accuracy: pd.Series  # per method, against gold (NaN without gold)
    gold_items: int
    summary: pd.DataFrame  # one row per method: items, mean confidence (of its labels), accuracy, iterations, seconds


def compare_methods(results: Mapping[str, Any], gold: pd.Series | None = None) -> Comparison:
    """Compare several fitted results (``{name: FitResult or fitted estimator}``), optionally on gold labels."""
    res = {name: as_result(r) for name, r in results.items()}
    names = list(res)
    labels = {n: r.labels for n, r in res.items()}
    skills = {n: r.skills for n, r in res.items()}
    m = len(names)
    agree = np.full((m, m), np.nan)
    changed = np.zeros((m, m), dtype=np.int64)
    rho = np.full((m, m), np.nan)
    for a in range(m):
        for b in range(m):  # loop over method pairs only; comparisons inside are vectorised
            la, lb = labels[names[a]], labels[names[b]]
            common = la.index.intersection(lb.index)
            if len(common):
                same = la.loc[common].to_numpy() == lb.loc[common].to_numpy()
                agree[a, b] = same.mean()
                changed[a, b] = int((~same).sum())
            sa, sb = skills[names[a]], skills[names[b]]
            cw = sa.index.intersection(sb.index)
            if len(cw) >= 3:
                x, y = sa.loc[cw].to_numpy(float), sb.loc[cw].to_numpy(float)
                if np.ptp(x) > 0 and np.ptp(y) > 0:
                    rho[a, b] = spearmanr(x, y).statistic
    idx = pd.Index(names, name="method")
    acc = pd.Series(np.nan, index=idx, name="accuracy")
    n_gold = 0
    if gold is not None and len(gold):
        gold = pd.Series(gold).dropna()
        for n in names:
            g = gold[gold.index.isin(labels[n].index)]
            n_gold = max(n_gold, len(g))
            acc[n] = _accuracy(labels[n], g) if len(g) else np.nan
    summary = pd.DataFrame(
        {
            "items": [len(r.items) for r in res.values()],
            "mean confidence": [float(label_confidence(r).mean()) for r in res.values()],
            "accuracy on gold": acc.to_numpy(),
            "iterations": [r.n_iter for r in res.values()],
            "converged": [r.converged for r in res.values()],
            "seconds": [round(r.seconds, 3) for r in res.values()],
        },
        index=idx,
    )
    return Comparison(
        agreement=pd.DataFrame(agree, index=idx, columns=idx),
        changed=pd.DataFrame(changed, index=idx, columns=idx),
        rank_correlation=pd.DataFrame(rho, index=idx, columns=idx),
        accuracy=acc,
        gold_items=n_gold,
        summary=summary,
    )


def changed_items(a: Any, b: Any) -> pd.DataFrame:
    """Items whose label differs between results ``a`` and ``b``: task, label_a, label_b, and the posterior
    probability each method gives its own label."""
    ra, rb = as_result(a), as_result(b)
    na, nb = ra.method, rb.method if rb.method != ra.method else f"{rb.method} (2)"
    la, lb = ra.labels, rb.labels
    common = la.index.intersection(lb.index)
    diff = common[la.loc[common].to_numpy() != lb.loc[common].to_numpy()]
    ca = pd.Series(label_confidence(ra), index=la.index)
    cb = pd.Series(label_confidence(rb), index=lb.index)
    return pd.DataFrame(
        {
            f"label ({na})": la.loc[diff].astype(str),
            f"label ({nb})": lb.loc[diff].astype(str),
            f"confidence ({na})": ca.loc[diff],
            f"confidence ({nb})": cb.loc[diff],
        },
        index=pd.Index(diff, name="task"),
    )
