"""Rating verdicts for ordered levels against simulated truth: the latent scale (``ordinal-em``), the confusion
reading (``ordinal-ds`` rows read on the scale) and the gate that picks between them on held-out ratings
(``fusion_core.diagnostics.rating_support``; docs/RATINGS.md "Which model the verdicts come from").

Truth per grader, the same for every model, from the simulator's own confusion matrix Γ_j and level prior π
(``scale_reading`` with no pseudo-responses): bias = E[l − k], noise = sd(l − k), reliability = signed corr²(l, k);
truly *near chance* when the reliability is at most 0.2, *flagged* when near chance, |bias| ≥ 0.3 or noise ≥ 0.75
(the verdict rule's thresholds).  Shapes, built to principles (never to a public set), 5 levels, 60 graders on
1,500 items × 5 ratings, each with 6 spammers (uniform ratings) added unless said:

* ``probit`` — ``ordinal_crowd``: the latent-scale model itself (8 lenient, 8 harsh, 8 noisy, 6 near chance);
* ``probit-cuts`` — ``probit_graders``: ordered-probit graders with their own cut points (jitter 0.3 levels);
* ``confusion`` — ``confusion_graders``: Dawid–Skene rows over ordered levels, no shared scale;
* ``scale-users`` — ``probit_graders`` with cut points jittered by 0.8 levels (graders who use the scale
  differently: some never use a grade, some stretch one over two);
* ``confusion-sparse`` — ``confusion_graders`` with a few heavy graders and many light ones.

Prints per crowd the gate (held-out gap of ``ordinal-ds`` over ``ordinal-em`` in nats per rating, its standard
error, the model kept) and, pooled per shape, for each of latent / confusion / gated: near-chance calls (precision,
recall against truly near chance) and flags (precision against truly flagged, recall); ``leave-out`` is the
confusion reading with each grader's own response divided out of the posterior (measured, not kept).

    python benchmarks/rating_support.py                         # 3 seeds per shape
    python benchmarks/rating_support.py --seeds 1 --shapes probit confusion
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd
from _common import make_parser

from fusion_core.data.responses import as_responses
from fusion_core.diagnostics.rating_support import (
    confusion_verdicts,
    in_level_order,
    scale_reading,
    scale_support,
)
from fusion_core.diagnostics.rating_verdicts import ORDINAL_RULE, ordinal_verdicts
from fusion_core.methods.auto import candidate
from fusion_core.methods.ordinal import with_levels
from fusion_core.methods.ordinal.scale import ordinal_confusion
from fusion_core.simulate.graded import confusion_graders, probit_graders
from fusion_core.simulate.ratings import ordinal_crowd

N_ITEMS, N_WORKERS, N_SPAM = 1500, 60, 6


def _spammers(answers: pd.DataFrame, conf: np.ndarray, k: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The last ``N_SPAM`` graders rate uniformly at random (their true rows become uniform)."""
    rng = np.random.default_rng(seed + 1000)
    spam = [f"g{j}" for j in range(N_WORKERS - N_SPAM, N_WORKERS)]
    rows = answers["worker"].isin(spam).to_numpy()
    out = answers.copy()
    out.loc[rows, "label"] = rng.integers(1, k + 1, size=int(rows.sum()))
    conf = conf.copy()
    conf[N_WORKERS - N_SPAM :] = 1.0 / k
    return out, conf


def crowd(shape: str, seed: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, pd.Index]:
    """(answers, true confusion workers × true × reported, level prior, worker ids in the confusion's order)."""
    k = 5
    if shape == "probit":
        sim = ordinal_crowd(
            n_items=N_ITEMS, n_workers=N_WORKERS, n_lenient=8, n_harsh=8, n_noisy=8, n_chance=6, seed=seed
        )
        conf = ordinal_confusion(sim.bias.to_numpy(), sim.noise.to_numpy(), np.zeros(2 * k - 2))
        return sim.responses, conf, np.asarray(sim.class_prior), sim.workers
    if shape in ("probit-cuts", "scale-users"):
        jitter = 0.3 if shape == "probit-cuts" else 0.8
        sim = probit_graders(n_items=N_ITEMS, n_workers=N_WORKERS, threshold_jitter=jitter, seed=seed)
    else:
        sim = confusion_graders(n_items=N_ITEMS, n_workers=N_WORKERS, sparse=shape == "confusion-sparse", seed=seed)
    answers, conf = _spammers(sim.responses, np.asarray(sim.confusion), k, seed)
    return answers, conf, np.asarray(sim.class_prior), sim.workers


def truth(conf: np.ndarray, prior: np.ndarray, workers: pd.Index) -> pd.DataFrame:
    bias, noise, rel = scale_reading(conf * 1e6, prior, alpha=0.0)
    rule = ORDINAL_RULE
    chance = rel <= rule.near_chance
    flagged = chance | (np.abs(bias) >= rule.bias) | (noise >= rule.noise)
    return pd.DataFrame({"chance": chance, "flagged": flagged}, index=workers.astype(str))


def verdicts(answers: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series, object, float]:
    """(latent verdicts, confusion verdicts, confusion verdicts with each grader's own response divided out of the
    posterior, the gate's decision, seconds of the gate)."""
    resp = with_levels(as_responses(answers), "numeric")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        support = scale_support(resp)
        seconds = time.perf_counter() - t0
        latent = ordinal_verdicts(answers, levels="numeric").table["verdict"]
        fit = candidate("ordinal-ds").fit(resp).result_
        conf = confusion_verdicts(resp, *in_level_order(fit, resp)).table["verdict"]
        loo = confusion_verdicts(resp, *in_level_order(fit, resp), leave_out=True).table["verdict"]
    return latent, conf, loo, support, seconds


def score(rows: pd.DataFrame, col: str) -> str:
    v = rows[col]
    told = v != "not enough ratings to tell"
    called = v.str.contains("near chance", regex=False)
    flag = told & (v != "reliable")
    tc, tf = rows["chance"], rows["flagged"]

    def pr(c: pd.Series, t: pd.Series) -> str:
        return f"{int(c.sum())} calls, precision {(c & t).sum() / max(c.sum(), 1):.2f}, recall {(c & t).sum() / max(t.sum(), 1):.2f}"

    return f"{col:9s} near chance: {pr(called, tc)} | flags: {pr(flag, tf)}"


def main() -> None:
    ap = make_parser(__doc__)
    shapes = ["probit", "probit-cuts", "confusion", "scale-users", "confusion-sparse"]
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--shapes", nargs="*", default=shapes, choices=shapes)
    args = ap.parse_args()
    for shape in args.shapes:
        pooled = []
        print(f"== {shape}")
        for seed in range(args.seeds):
            answers, conf, prior, workers = crowd(shape, seed)
            latent, confv, loo, support, seconds = verdicts(answers)
            rows = truth(conf, prior, workers)
            rows["latent"] = latent.reindex(rows.index).fillna("not enough ratings to tell")
            rows["confusion"] = confv.reindex(rows.index).fillna("not enough ratings to tell")
            rows["leave-out"] = loo.reindex(rows.index).fillna("not enough ratings to tell")
            rows["gated"] = rows["latent"] if support.supported else rows["confusion"]
            pooled.append(rows)
            kept = "ordinal-em" if support.supported else "ordinal-ds"
            print(
                f"-- seed {seed}: gap {support.gap:+.4f} ± {support.se:.4f} (z {support.gap / max(support.se, 1e-12):.1f})"
                f" → {kept}; gate {seconds:.1f} s; truly near chance {int(rows['chance'].sum())}, flagged "
                f"{int(rows['flagged'].sum())} of {len(rows)}"
            )
        rows = pd.concat(pooled)
        for col in ("latent", "confusion", "leave-out", "gated"):
            print(score(rows, col))


if __name__ == "__main__":
    main()
