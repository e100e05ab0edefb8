"""Can errors correlated given the truth be measured from the responses?  The excess agreement of pairs of
responses on the same item over what the fitted model predicts (issue 22, calibration of the expected gain).

Under a Dawid–Skene-type model two responses on an item are independent given its truth, so annotators ``a`` and
``b`` agree with probability ``Σ_k q_k Σ_l Γ_a[k, l] Γ_b[k, l]`` (``q`` the item's posterior from its *other*
responses).  A one-parameter model of the excess (a *common shock*, the one
:func:`fusion_core.diagnostics.refit_gain.refit_gain` draws from with ``dependence=τ``): each item draws a shared
label ``u ~ Γ̄[z]`` from the crowd's row at its truth ``z``, and each response copies ``u`` with probability ``ρ``,
else answers from its annotator's row.  Two responses then agree in excess of the independent prediction by
``ρ² (1 − Σ_l Γ̄[z, l]²)``, so

    τ̂ = Σ_pairs (agree − predicted) / Σ_pairs Σ_k q_k (1 − Σ_l Γ̄[k, l]²)

estimates ``τ = ρ²``, the intraclass correlation given the truth (design effect ``1 + (m − 1) τ``: Kish 1965).
Cross-fitted (two folds of items; each fold's pairs scored by matrices one M-step from the fit's posterior on the
other fold, shrunk as the plan's; each pair given its item's responses other than the two), standard error with
items as clusters.

Prints, for a planted common shock (ρ = 0, 0.2, 0.4 on a 3-class Dawid–Skene crowd, 600 items × 4), ``τ̂`` with the
fitted matrices and with the true marginal matrices (the oracle), and ``τ̂`` at the replay's starts (2, 3, 5
responses per item) on the simulated and public crowds of ``relabel_replay.py``.  Finding (docs/PLAN.md): the
fitted matrices absorb the shock (agreement looks like accuracy), so ``τ̂`` ≈ 0 whatever the planted ``τ``.

    python benchmarks/dependence_check.py [--datasets rte dog ...] [--seeds 4]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from _common import load, make_parser

from fusion_core.diagnostics.predictive import crowd_confusion, held_out_strength, item_log_joint, model_confusion
from fusion_core.diagnostics.refit_gain import cross_fitted
from fusion_core.methods import create
from fusion_core.simulate import dawid_skene

#: pairs of responses per item scored at most (the next ``MAX_OFFSET`` responses of each, in a random order):
#: bounds the cost at ``MAX_OFFSET`` × responses pairs on items with many responses
MAX_OFFSET = 8
#: elements of the largest pairs × K × K temporary
CHUNK_ELEMENTS = 4_000_000
#: largest copy probability ``ρ`` used (a crowd that always copies carries one response per item)
MAX_RHO = 0.9


@dataclass(frozen=True)
class Dependence:
    """The excess agreement (module docstring): ``tau`` (ρ², the intraclass correlation given the truth) and its
    standard error, the pairs scored, and the observed and predicted agreement rates."""

    tau: float
    se: float
    pairs: int
    observed: float
    predicted: float

    @property
    def rho(self) -> float:
        """The common shock's copy probability ``√τ`` as far as the estimate supports (0 when ``τ̂ ≤ 0``)."""
        return float(min(MAX_RHO, np.sqrt(max(self.tau, 0.0))))

    @property
    def z(self) -> float:
        return self.tau / self.se if self.se > 0 else 0.0


NONE = Dependence(0.0, 0.0, 0, 0.0, 0.0)


def _pairs(item: np.ndarray, rng: np.random.Generator, max_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs of responses on the same item: each response with the next ``max_offset`` of its item, the
    responses of an item in a random order."""
    order = np.lexsort((rng.random(len(item)), item))
    s = item[order]
    first, second = [], []
    for d in range(1, max_offset + 1):  # a loop over offsets, not responses
        same = s[:-d] == s[d:]
        if not same.any():
            break
        first.append(order[:-d][same])
        second.append(order[d:][same])
    if not first:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(first), np.concatenate(second)


def excess_agreement(
    item: np.ndarray,
    worker: np.ndarray,
    label: np.ndarray,
    posterior: np.ndarray,
    prior: np.ndarray,
    *,
    towards: np.ndarray,
    strength: float,
    center: np.ndarray,
    n_workers: int,
    seed: int = 0,
    max_offset: int = MAX_OFFSET,
    confusion: np.ndarray | None = None,
) -> Dependence:
    """The cross-fitted excess agreement ``τ̂`` and its standard error (module docstring).  ``towards`` and
    ``strength``: the shrinkage of the plan's matrices (pseudo-responses per row); ``center``: the crowd's matrix
    (true × reported) the common shock is drawn from."""
    n, k = posterior.shape
    rng = np.random.default_rng(seed)
    fold = np.less(rng.random(n), 0.5)
    own = confusion is not None  # the oracle: given matrices instead of the cross-fitted ones
    spread = 1.0 - (np.asarray(center, float) ** 2).sum(axis=1)  # per true class: 1 − Σ_l Γ̄[k, l]²
    num = np.zeros(n)
    den = np.zeros(n)
    obs_sum = pred_sum = 0.0
    n_pairs = 0
    for held, shrunk in cross_fitted(
        item, worker, label, posterior, fold, towards=towards, strength=strength, n_workers=n_workers
    ):
        conf = confusion if own else shrunk
        it, wk, lb = item[held], worker[held], label[held]
        lg, tot = item_log_joint(it, wk, lb, conf, prior, n_items=n)
        a, b = _pairs(it, rng, max_offset)
        step = max(1, CHUNK_ELEMENTS // (k * k))
        for s in range(0, len(a), step):
            pa, pb = a[s : s + step], b[s : s + step]
            loo = tot[it[pa]] - lg[pa] - lg[pb]  # the item's posterior without the pair
            loo -= loo.max(axis=1, keepdims=True)
            q = np.exp(loo)
            q /= q.sum(axis=1, keepdims=True)
            pred = (q * (conf[wk[pa]] * conf[wk[pb]]).sum(axis=2)).sum(axis=1)
            obs = (lb[pa] == lb[pb]).astype(float)
            num += np.bincount(it[pa], weights=obs - pred, minlength=n)
            den += np.bincount(it[pa], weights=q @ spread, minlength=n)
            obs_sum += float(obs.sum())
            pred_sum += float(pred.sum())
            n_pairs += len(pa)
    total = float(den.sum())
    if n_pairs == 0 or total <= 0:
        return NONE
    tau = float(num.sum()) / total
    se = float(np.sqrt(((num - tau * den) ** 2).sum())) / total
    return Dependence(tau, se, n_pairs, obs_sum / n_pairs, pred_sum / n_pairs)


def fitted_excess(
    df: pd.DataFrame, oracle: np.ndarray | None = None, classes: pd.Index | None = None, workers: pd.Index | None = None
) -> Dependence:
    """``τ̂`` of a ``ds`` fit of ``df`` (task, worker, label); ``oracle`` (``workers`` × true × reported, classes in
    ``classes`` order): score with those matrices instead of the cross-fitted ones."""
    est = create("ds").fit(df)
    res, resp = est.result_, est.responses_
    conf, prior, _ = model_confusion(res)
    post = np.asarray(res.posterior, float)
    k = len(res.classes)
    beta, crowd, _ = held_out_strength(resp.item, resp.worker, resp.label, post, prior, n_workers=resp.n_workers)
    center = crowd_confusion(conf, prior, np.bincount(resp.worker, minlength=resp.n_workers))
    towards = center if crowd else np.full((k, k), 1 / k)
    if oracle is not None and classes is not None and workers is not None:
        ci = classes.get_indexer(pd.Index(res.classes))
        oracle = oracle[workers.get_indexer(pd.Index(res.workers))][:, ci][:, :, ci]
        center = oracle.mean(axis=0)
    return excess_agreement(
        resp.item, resp.worker, resp.label, post, prior,
        towards=towards, strength=k * beta, center=center, n_workers=resp.n_workers, confusion=oracle,
    )  # fmt: skip


def shock_crowd(seed: int, rho: float, n_items: int = 600, per_item: int = 4):
    """A 3-class Dawid–Skene crowd (30 annotators, accuracy U(0.55, 0.85)) whose responses copy the item's common
    shock ``u ~ Γ̄[z]`` with probability ``rho``; also the true marginal matrices ``ρ Γ̄ + (1 − ρ) Γ_w``, the classes
    and the annotators (the matrices' order)."""
    sim = dawid_skene(
        n_items=n_items, n_workers=30, n_classes=3, responses_per_item=per_item, accuracy=(0.55, 0.85), seed=seed
    )
    df = sim.responses[["task", "worker", "label"]].copy()
    rng = np.random.default_rng(10_000 + seed)  # not the simulator's stream (its first draws made the truth)
    classes = pd.Index(sim.classes)
    conf = np.asarray(sim.confusion)
    mean = conf.mean(axis=0)
    z = classes.get_indexer(sim.truth.to_numpy())
    u = (rng.random((len(z), 1)) > np.cumsum(mean[z], axis=1)).sum(axis=1).clip(max=len(classes) - 1)
    shock = pd.Series(classes.take(u), index=sim.truth.index)
    copy = rng.random(len(df)) < rho
    df.loc[copy, "label"] = shock.reindex(df.loc[copy, "task"]).to_numpy()
    return df, rho * mean[None] + (1 - rho) * conf, classes, pd.Index(sim.workers)


def confusable_marginal(seed: int, n_workers: int = 110, hard: float = 0.3) -> tuple[np.ndarray, pd.Index]:
    """The true marginal matrices of ``relabel_replay.confusable(seed)``'s annotators (easy and hard rows mixed at
    the hard share) and their ids: the oracle for that crowd."""
    rng = np.random.default_rng(1000 + seed)  # the simulator's first draws: truth, then accuracy
    rng.integers(0, 4, 800)
    acc = rng.uniform(0.6, 0.8, n_workers)

    def rows(a: np.ndarray) -> np.ndarray:
        out = np.repeat(((1 - a) * 0.075)[:, None, None], 4, 1).repeat(4, 2)
        k = np.arange(4)
        out[:, k, k] = a[:, None]
        out[:, k, k ^ 1] = ((1 - a) * 0.85)[:, None]
        return out

    marginal = (1 - hard) * rows(acc) + hard * rows(np.maximum(0.3, acc - 0.35))
    return marginal, pd.Index([f"w{w}" for w in range(n_workers)])


def _start(answers: pd.DataFrame, m: int, seed: int = 0) -> pd.DataFrame:
    key = np.random.default_rng(seed).random(len(answers))
    rank = pd.Series(key).groupby(answers["task"].to_numpy()).rank(method="first").to_numpy()
    return answers[rank <= m]


def main() -> None:
    import sys
    import warnings

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    import relabel_replay as rr

    ap = make_parser(__doc__)
    ap.add_argument("--datasets", nargs="*", default=[], help="public sets (../shared/datasets)")
    ap.add_argument("--seeds", type=int, default=4, help="seeds of the planted common shock")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    print("planted common shock (3 classes, 600 items x 4 responses, 30 annotators): tau-hat ± se")
    print("| rho | planted tau | fitted matrices (each seed) | true marginal matrices (oracle) |")
    print("|---|---|---|---|")
    for rho in (0.0, 0.2, 0.4):
        fit, orc = [], []
        for s in range(args.seeds):
            df, marginal, classes, workers = shock_crowd(s, rho)
            d = fitted_excess(df)
            o = fitted_excess(df, marginal, classes, workers)
            fit.append(f"{d.tau:+.3f}±{d.se:.3f}")
            orc.append(f"{o.tau:+.3f}±{o.se:.3f}")
        print(f"| {rho} | {rho**2:.2f} | {', '.join(fit)} | {', '.join(orc)} |")
    print("\nconfusable crowd (relabel_replay.py), all 10 responses per item: fitted vs oracle (true marginal rows)")
    for s in (0, 1):
        answers, _ = rr.confusable(s)
        d = fitted_excess(answers)
        o = fitted_excess(answers, *confusable_marginal(s)[:1], pd.Index(range(4)), confusable_marginal(s)[1])
        print(f"  seed {s}: fitted {d.tau:+.3f}±{d.se:.3f}, oracle {o.tau:+.3f}±{o.se:.3f}")
    crowds = [(f"binary seed {s}", *rr.simulated(s)) for s in (0, 1)]
    crowds += [(f"confusable seed {s}", *rr.confusable(s)) for s in (0, 1)]
    crowds += [(name, *load(name)) for name in args.datasets]
    print("\nreplay starts (responses per item): tau-hat ± se (z)")
    print("| crowd | 2 | 3 | 5 |")
    print("|---|---|---|---|")
    for name, answers, truth in crowds:
        answers = answers[answers["task"].isin(truth.index)].reset_index(drop=True)
        cells = []
        for m in (2, 3, 5):
            d = fitted_excess(_start(answers, m))
            cells.append(f"{d.tau:+.3f}±{d.se:.3f} ({d.z:+.1f})")
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
