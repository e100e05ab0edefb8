"""Why ``auto`` misses the best method on some datasets, and which selection rules were measured instead (issue 14).

For every dataset (the real ones of ``../shared/datasets``, or the simulated crowds of ``bench_auto.SCENARIOS``)
each candidate (auto's five and ``bds``, ``glad``) is fitted on the training responses of all five hashed folds
and scored on the hidden ones exactly as ``auto`` does (own response model, voting rules through their implied
one-coin model, β = 2, collapse guard).  Printed: the accuracy on gold of every candidate fitted on all
responses; the held-out score of every candidate pooled over the five splits and its paired difference to DS in
standard errors; and the accuracy of the labels chosen by each rule:

* ``current``: auto's rule (first split, average of the candidates within 2 SE of the best);
* ``5 splits``: the same over all five splits (less score noise, 5× the fits);
* ``5 splits NB``: five splits, SE of the mean split-level difference with Nadeau & Bengio's (2003) correction
  ``(1/J + n_test/n_train)`` for overlapping training sets (a better variance estimate for cross-validation);
* ``best only``: no averaging;
* ``+bds`` / ``+glad``: a Bayesian DS / item-difficulty model added to the candidates;
* ``agreement``: candidates ranked by the mean posterior their training labelling gives to the hidden responses
  (a criterion that scores labels, not response models);
* ``DS channel``: every candidate's training posterior scored through the Dawid–Skene channel it implies (one
  M-step, β = 2), the same response model for all.

    python benchmarks/auto_selection_study.py [--sim] [--seeds 4] [dataset-or-scenario ...]
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from _common import categorical_datasets, load, make_parser
from bench_auto import SCENARIOS

from fusion_core.data.responses import Responses, as_responses
from fusion_core.methods import create
from fusion_core.methods.auto import DEFAULT_CANDIDATES, canonical_order
from fusion_core.methods.auto.choice import label_free_argmax, plausible
from fusion_core.methods.auto.folds import heldout_masks
from fusion_core.methods.auto.scoring import CandidateScore, item_scores, score_candidates
from fusion_core.methods.numerics import safe_log

EXTRA = ("bds", "glad")
N_FOLDS = 5


@dataclass
class Study:
    """Held-out results of every candidate on every split of one dataset."""

    resp: Responses
    gold: np.ndarray  # class code per item, −1 without gold
    masks: list[np.ndarray]
    scores: dict[str, CandidateScore]  # all splits
    train_posteriors: dict[tuple[str, int], np.ndarray] = field(default_factory=dict)
    labels: dict[str, np.ndarray] = field(default_factory=dict)  # hard labels, fitted on all responses
    posteriors: dict[str, np.ndarray] = field(default_factory=dict)


def gold_codes(resp: Responses, truth: pd.Series) -> np.ndarray:
    codes = {str(c): j for j, c in enumerate(resp.classes)}
    pos = pd.Index(resp.items.astype(str)).get_indexer(truth.index.astype(str))
    gold = np.full(resp.n_items, -1)
    ok = pos >= 0
    gold[pos[ok]] = [codes.get(str(v), -1) for v in truth.to_numpy()[ok]]
    return gold


def study(answers: pd.DataFrame, truth: pd.Series, names: list[str]) -> Study:
    resp = canonical_order(as_responses(answers))
    masks = heldout_masks(resp, N_FOLDS, N_FOLDS)
    st = Study(resp, gold_codes(resp, truth), masks, {n: CandidateScore(n) for n in names})
    for b, hidden in enumerate(masks):
        fitted: dict[str, object] = {}

        def make(name: str, fitted: dict[str, object] = fitted) -> object:
            est = create(name)
            if "tol" in type(est).params and float(est.tol) < 1e-5:
                est.set_params(tol=1e-5)
            fitted[name] = est
            return est

        for s in score_candidates(names, make, resp, [hidden], fit_kwargs={}, prior_strength=2.0):
            acc = st.scores[s.name]
            acc.splits += s.splits
            acc.hidden += s.hidden
            acc.collapsed = acc.collapsed or s.collapsed
            acc.error = acc.error or s.error
            post = getattr(fitted.get(s.name), "result_", None)
            if post is not None:
                st.train_posteriors[(s.name, b)] = np.asarray(post.posterior, float)
    for n in names:
        try:
            r = create(n).fit(resp).result_
        except Exception:  # a failing method is left out of the accuracy table
            continue
        post = np.asarray(r.posterior, float)
        st.posteriors[n] = post
        st.labels[n] = np.asarray(r.hard_labels) if r.hard_labels is not None else label_free_argmax(post, post.mean(0))
    return st


def accuracy(st: Study, members: list[str]) -> float:
    has = st.gold >= 0
    if len(members) == 1:
        lab = st.labels[members[0]]
    else:
        p = np.mean([st.posteriors[m] for m in members], axis=0)
        lab = label_free_argmax(p, p.mean(axis=0))
    return float((lab[has] == st.gold[has]).mean())


def restricted(st: Study, names: list[str], k: int, per_item: Callable | None = None) -> list[CandidateScore]:
    """Candidate scores over the first k splits; ``per_item(name, b)`` replaces auto's item scores."""
    out = []
    for n in names:
        src = st.scores[n]
        s = CandidateScore(n, collapsed=src.collapsed, error=src.error)
        if src.error is None and len(src.splits) >= k:
            s.splits = [src.splits[b] if per_item is None else per_item(n, b)[:, None] for b in range(k)]
            s.hidden = list(src.hidden[:k])
        else:
            s.error = src.error or "not scored"
        out.append(s)
    return out


def _split(st: Study, b: int) -> tuple[Responses, Responses]:
    return st.resp.subset(~st.masks[b]), st.resp.subset(st.masks[b])


def agreement(st: Study, name: str, b: int) -> np.ndarray:
    _, test = _split(st, b)
    q = st.train_posteriors[(name, b)]
    s = np.bincount(test.item, weights=q[test.item, test.label], minlength=st.resp.n_items)
    return s[np.unique(test.item)]


def ds_channel(st: Study, name: str, b: int, beta: float = 2.0) -> np.ndarray:
    train, test = _split(st, b)
    q = st.train_posteriors[(name, b)]
    K, W = q.shape[1], st.resp.n_workers
    counts = np.zeros((W, K, K))  # worker × true × reported
    for l in range(K):  # K labels × K classes, not responses
        sel = train.label == l
        for k in range(K):
            counts[:, k, l] = np.bincount(train.worker[sel], weights=q[train.item[sel], k], minlength=W)
    pooled = counts.sum(axis=0)
    pooled /= np.maximum(pooled.sum(axis=1, keepdims=True), 1e-300)
    conf = (counts + beta * pooled[None]) / (counts.sum(axis=2, keepdims=True) + beta)
    log_pred = safe_log(conf[test.worker, :, test.label])[None]
    return item_scores(q, test, log_pred, np.ones(test.n_responses))[:, 0]


def nadeau_bengio(scores: list[CandidateScore], n_se: float) -> list[CandidateScore]:
    """Average of the candidates whose mean split-level difference to the best is within ``n_se`` corrected SE."""
    ok = [s for s in scores if s.usable]
    best = max(ok, key=lambda s: s.score)
    J = len(best.splits)
    out = []
    for s in sorted(ok, key=lambda s: -s.score):
        d = np.array([(best.splits[b][:, 0].sum() - s.splits[b][:, 0].sum()) / s.hidden[b] for b in range(J)])
        se = 0.0 if s is best else float(np.sqrt((1 / J + 1 / (N_FOLDS - 1)) * d.var(ddof=1)))
        if d.mean() <= n_se * se:
            out.append(s)
    return out


def rules(st: Study) -> dict[str, list[str]]:
    base = list(DEFAULT_CANDIDATES)

    def names(scs: list[CandidateScore]) -> list[str]:
        return [s.name for s in scs]

    return {
        "current": names(plausible(restricted(st, base, 1), 2.0, "average")),
        "5 splits": names(plausible(restricted(st, base, N_FOLDS), 2.0, "average")),
        "5 splits NB": names(nadeau_bengio(restricted(st, base, N_FOLDS), 2.0)),
        "best only": names(plausible(restricted(st, base, 1), 2.0, "best")),
        "+bds": names(plausible(restricted(st, [*base, "bds"], 1), 2.0, "average")),
        "+glad": names(plausible(restricted(st, [*base, "glad"], 1), 2.0, "average")),
        "agreement": names(plausible(restricted(st, base, 1, lambda n, b: agreement(st, n, b)), 2.0, "average")),
        "DS channel": names(plausible(restricted(st, base, 1, lambda n, b: ds_channel(st, n, b)), 2.0, "average")),
    }


def report(name: str, st: Study, rows: list[dict]) -> None:
    accs = {n: accuracy(st, [n]) for n in st.labels}
    ds = st.scores["ds"]
    gaps = []
    for n, s in st.scores.items():
        if n == "ds":
            gaps.append(f"ds {s.score:.4f} (reference)")
            continue
        if not s.usable:
            gaps.append(f"{n} {'collapsed' if s.collapsed else 'failed'}")
            continue
        d = np.concatenate(s.splits)[:, 0] - np.concatenate(ds.splits)[:, 0]
        se = d.std(ddof=1) * np.sqrt(len(d)) / s.n_hidden
        gaps.append(f"{n} {s.score:.4f} ({d.sum() / s.n_hidden:+.4f} = {d.sum() / s.n_hidden / se:+.1f} SE)")
    best = max(accs.values())
    print(f"== {name}: accuracy " + ", ".join(f"{n} {a:.4f}" for n, a in accs.items()))
    print("   held-out score over 5 splits (difference to ds): " + "; ".join(gaps))
    row: dict = {"data": name, "best": best, "ds": accs.get("ds", np.nan)}
    for rule, members in rules(st).items():
        row[rule] = accuracy(st, members)
        row[rule + " pick"] = "+".join(members)
    print("   picks: " + "; ".join(f"{r} {row[r]:.4f} ({row[r + ' pick']})" for r in rules_order()), flush=True)
    rows.append(row)


def rules_order() -> list[str]:
    return ["current", "5 splits", "5 splits NB", "best only", "+bds", "+glad", "agreement", "DS channel"]


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--sim", action="store_true", help="the simulated scenarios instead of the real datasets")
    ap.add_argument("--seeds", type=int, default=4)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    names = [*DEFAULT_CANDIDATES, *EXTRA]
    rows: list[dict] = []
    if args.sim:
        for kind in args.names or list(SCENARIOS):
            for seed in range(args.seeds):
                sim = SCENARIOS[kind](seed)
                report(f"{kind}/{seed}", study(sim.responses, sim.truth, names), rows)
    else:
        for d in args.names or categorical_datasets():
            answers, truth = load(d)
            report(d, study(answers, truth, names), rows)
    df = pd.DataFrame(rows)
    print("\nACCURACY OF EACH RULE'S LABELS (best = best single candidate incl. bds, glad)")
    with pd.option_context("display.width", 250, "display.float_format", "{:.4f}".format):
        print(df[["data", "best", "ds", *rules_order()]].to_string(index=False))
    print("\nSUMMARY: mean accuracy; gain over ds (pt); datasets within 1 pt of the best candidate")
    for r in rules_order():
        within = int((df[r] >= df["best"] - 0.01 - 1e-12).sum())
        print(f"  {r:12s} mean {df[r].mean():.4f}  vs ds {100 * (df[r] - df['ds']).mean():+.2f} pt  {within}/{len(df)}")
    if args.sim:
        df["kind"] = df["data"].str.split("/").str[0]
        gain = df.groupby("kind")[rules_order()].mean().sub(df.groupby("kind")["ds"].mean(), axis=0) * 100
        print("\nGAIN OVER DS BY SCENARIO (pt)")
        with pd.option_context("display.width", 250, "display.float_format", "{:+.2f}".format):
            print(gain.to_string())


if __name__ == "__main__":
    main()
