"""Honest offline evaluation of the re-labelling plan (issue 22, item 2): replay real and simulated crowds.

Every item starts with 2 of its responses (drawn at random); the others are held back.  In rounds, each strategy
"buys" held-back responses, the method is refitted on everything bought so far, and the labels are scored
against gold (used only here, never by a strategy):

* ``plan``     — :func:`fusion_core.diagnostics.plan.plan_relabel` with a per-round budget (items with nothing
                 left to buy are closed: ``items=``).  When the plan asks annotator X for item i and X's real
                 response to i is not held back (X never labelled i), the benchmark buys another held-back
                 response of i: its most informative annotator's under the plan's model (``--substitute
                 informative``, the default; one the fit has not seen counts as median) or a random one
                 (``random``: whoever the platform finds) — counted and printed as "substituted";
* ``uniform``  — one more random held-back response for every item per round (extra overlap 3, 4, …);
* ``fixed``    — today's audit rule (``ReviewRule``: label probability < 0.9, label differs from the vote, or
                 < 3 responses), least confident first, one random held-back response per flagged item, 10 % of
                 the items per round; it runs first and the plan gets its budget round by round (equal budget,
                 same rounds).

``--decompose`` adds ``plan/random`` (the plan's items, a random available annotator) and ``fixed/informative``
(the fixed rule's items, the plan model's most informative available annotator): is a loss item or annotator choice?

Printed: accuracy against labels bought per strategy; for every uniform overlap, the labels the plan needed to
reach the same accuracy (ratio ≤ 0.6 is the issue's bar) and the plan's and the fixed rule's accuracy at equal
budget; over the replays together (:func:`share_of_uniform`), the same share read off the mean curves and the paired
accuracy gap at the bar's budget (plan at 60 % of uniform's labels − uniform), which stay well conditioned where
uniform's curve is flat and one replay's ratio is noise; the calibration table (:func:`calibration`: predicted
gain of each plan round's bought responses and its 90 % intervals — the model's and the plan's,
:mod:`fusion_core.diagnostics.refit_gain` — vs the realised gain on gold over all items; ``--calibration-only``
replays the plan alone).  ``--plot`` writes an HTML chart under benchmarks/out.

    python benchmarks/relabel_replay.py --datasets rte temp dog --seeds 3
    python benchmarks/relabel_replay.py --simulated 2 --datasets
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
from _common import ROOT, load, make_parser

import fusion_core.diagnostics.plan as plan_module
import fusion_core.diagnostics.predictive as predictive_module
from fusion_core.diagnostics.audit.items import DEFAULT_REVIEW, review_items
from fusion_core.diagnostics.plan import plan_relabel
from fusion_core.diagnostics.predictive import EVIDENCE_Z, planning_model
from fusion_core.diagnostics.refit_gain import RefitGain, refit_gain
from fusion_core.diagnostics.voi import expected_accuracy, extend, gain_variance, initial_gains
from fusion_core.methods import create

Z90 = 1.6448536269514722  # two-sided 90 % normal quantile


@dataclass
class Curve:
    labels: list[int] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    predicted: list[tuple[float, float]] = field(default_factory=list)  # plan only: expected gain and sd, as planned
    bought: list[tuple[float, float]] = field(default_factory=list)  # plan: same for the responses actually bought
    realised: list[tuple[float, float, float]] = field(default_factory=list)  # gain, low, high
    on_bought: list[float] = field(default_factory=list)  # realised gain of the items that got responses (÷ all items)
    off_bought: list[float] = field(default_factory=list)  # realised gain of the items that got nothing (÷ all items)
    refit: list[RefitGain] = field(default_factory=list)  # plan: the bought responses' simulated realised gain
    flips: list[tuple[int, int]] = field(default_factory=list)  # labels changed by the refit: touched, untouched items
    seconds: list[float] = field(default_factory=list)  # the simulated refit's time per round
    substituted: int = 0
    asked: int = 0
    bought_right: float = 0.0  # bought responses that match gold
    on_wrong: float = 0.0  # bought responses on items whose label was wrong when bought
    n_bought: int = 0
    items_touched: int = 0
    n_items: int = 0
    on_hard: float = 0.0  # simulated crowds with hard items: bought responses on them


def _fit(df: pd.DataFrame, method: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = create(method).fit(df)
    return est


def _correct(est, truth: pd.Series, tasks: pd.Index) -> np.ndarray:
    return (est.labels_.reindex(tasks).to_numpy() == truth.reindex(tasks).to_numpy()).astype(float)


def _boot(delta: np.ndarray, rng: np.random.Generator, reps: int = 400) -> tuple[float, float]:
    idx = rng.integers(0, len(delta), size=(reps, len(delta)))
    means = delta[idx].mean(axis=1)
    return float(np.quantile(means, 0.05)), float(np.quantile(means, 0.95))


def _bought_gain(
    post: np.ndarray, conf: np.ndarray, res, answers: pd.DataFrame, rows: list[int], fallback_conf: np.ndarray
) -> tuple[float, float]:
    """Expected accuracy gain, and its sd, under the plan's model (``post``, ``conf``: the predictive posterior and
    confusions) of the responses actually bought (their annotators, not the plan's)."""
    items = pd.Index(res.items).get_indexer(answers["task"].iloc[rows])
    workers = pd.Index(res.workers).get_indexer(answers["worker"].iloc[rows])
    gain = var = 0.0
    for i in np.unique(items):
        joint = post[i][:, None]
        for w in workers[items == i]:
            joint = extend(joint, conf[w] if w >= 0 else fallback_conf)
        gain += expected_accuracy(joint) - float(post[i].max())
        var += gain_variance(joint)
    return gain / len(post), float(np.sqrt(var)) / len(post)


def replay_start(
    answers: pd.DataFrame, truth: pd.Series, rng: np.random.Generator, per_item: int = 2
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """A replay's start: the responses of items with gold and ≥ 5 responses, a random key per response (the order
    in which a strategy buys them) and the start mask, ``per_item`` responses of each item (the lowest keys)."""
    answers = answers[answers["task"].isin(truth.index)].reset_index(drop=True)
    per = answers.groupby("task")["task"].transform("size")
    answers = answers[per >= 5].reset_index(drop=True)
    key = rng.random(len(answers))
    rank = pd.Series(key).groupby(answers["task"].to_numpy()).rank(method="first").to_numpy()
    return answers, key, rank <= per_item


def replay(
    answers: pd.DataFrame,
    truth: pd.Series,
    *,
    method: str,
    round_share: float,
    max_extra: int,
    seed: int,
    max_per_item: int = 3,
    plan_kw: dict | None = None,
    strategies: tuple[str, ...] = ("plan", "fixed"),
    plan_buy: str = "asked",
    substitute: str = "informative",
    dependence: float = 0.0,
) -> dict[str, Curve]:
    """One replay of the three strategies from the same 2-response start."""
    rng = np.random.default_rng(seed)
    answers, key, start = replay_start(answers, truth, rng)
    tasks = pd.Index(pd.unique(answers["task"]))
    n = len(tasks)
    budget = max(1, round(round_share * n))
    pair_row = pd.MultiIndex.from_frame(answers[["task", "worker"]].astype(str))
    item_rows = answers.groupby("task").indices
    out: dict[str, Curve] = {}

    # uniform extra overlap
    known = start.copy()
    cur = Curve()
    est = _fit(answers[known], method)
    cur.labels.append(0)
    cur.accuracy.append(float(_correct(est, truth, tasks).mean()))
    for _ in range(max_extra):
        pool = ~known
        pick = pd.Series(np.where(pool, key, np.inf)).groupby(answers["task"].to_numpy()).idxmin().to_numpy()
        pick = pick[pool[pick]]
        if len(pick) == 0:
            break
        known[pick] = True
        est = _fit(answers[known], method)
        cur.labels.append(int(known.sum() - start.sum()))
        cur.accuracy.append(float(_correct(est, truth, tasks).mean()))
    out["uniform"] = cur
    total = cur.labels[-1]

    # the fixed rule first: the plan then gets the same budget as the fixed rule in each of its rounds (equal budget,
    # same rounds: no interpolation between the plan's rounds), and the full round budget after the rule stops
    rounds: list[int] = []
    for strategy in sorted(strategies, key=lambda s: not s.startswith("fixed")):
        known = start.copy()
        cur = Curve(n_items=n)
        est = _fit(answers[known], method)
        correct = _correct(est, truth, tasks)
        cur.labels.append(0)
        cur.accuracy.append(float(correct.mean()))
        while cur.labels[-1] < total:
            pool = ~known
            open_tasks = pd.Index(answers["task"][pool].unique())
            if len(open_tasks) == 0:
                break
            res = est.result_
            buy: list[int] = []
            items_src, who = strategy.partition("/")[::2]
            info, fallback = pd.Series(dtype=float), 0.0
            if items_src == "plan" or who == "informative":
                z = (
                    (plan_kw or {}).get("evidence_z", EVIDENCE_Z)
                    if (plan_kw or {}).get("prior_count", "auto") == "auto"
                    else 0.0
                )
                pm = planning_model(est.responses_, res, z=z)  # the plan's belief and matrices
                post, own, conf = pm.posterior, pm.own, pm.confusion
                info = pd.Series(
                    initial_gains(np.full((1, conf.shape[1]), 1 / conf.shape[1]), conf)[0], index=res.workers
                )
                fallback = float(info.median())

            def informative(cands: list[int], info: pd.Series = info, fallback: float = fallback) -> int:
                # the plan model's most informative annotator; ties (and annotators the fit has not seen: median)
                # broken at random (the replay key)
                scores = info.reindex(answers["worker"].iloc[cands].to_numpy()).fillna(fallback).to_numpy()
                best = [cands[i] for i in np.flatnonzero(scores >= scores.max() - 1e-12)]
                return best[int(np.argmin(key[best]))]

            taken: set[int] = set()
            if items_src == "plan":
                t_round = len(cur.labels) - 1
                plan = plan_relabel(
                    est.responses_,
                    res,
                    rounds[t_round] if t_round < len(rounds) else budget,
                    items=open_tasks,
                    max_per_item=max_per_item,
                    **(plan_kw or {}),
                )
                if plan.n_labels == 0:
                    break
                rows = pair_row.get_indexer(
                    pd.MultiIndex.from_arrays([plan.assignment_task.astype(str), plan.assignment_annotator.astype(str)])
                )
                for t, r in zip(plan.assignment_task, rows, strict=True):
                    cur.asked += 1
                    if who == "random" or plan_buy == "random":  # whoever answers, ignoring the plan's annotators
                        cands = [x for x in item_rows[t] if pool[x] and x not in taken]
                        if cands:
                            taken.add(min(cands, key=lambda x: key[x]))
                        continue
                    if r >= 0 and pool[r] and r not in taken:
                        taken.add(r)
                        continue
                    cands = [x for x in item_rows[t] if pool[x] and x not in taken]
                    if not cands:
                        continue
                    cur.substituted += 1
                    if substitute == "random":  # the platform gives the item to whoever is available
                        taken.add(min(cands, key=lambda x: key[x]))
                        continue
                    taken.add(informative(cands))
                buy = sorted(taken)
                cur.predicted.append((plan.accuracy_after - plan.accuracy_before, plan.gain_sd))
                cur.bought.append(_bought_gain(post, own, res, answers, buy, fallback_conf=np.median(own, axis=0)))
                t1 = time.process_time()
                rg = refit_gain(
                    est.responses_,
                    res,
                    answers["task"].iloc[buy],
                    answers["worker"].iloc[buy],
                    seed=seed,
                    refit=lambda df: _fit(df, method).result_,
                    dependence=dependence,
                )
                cur.seconds.append(time.process_time() - t1)
                cur.refit.append(rg)
            else:
                rv = review_items(
                    est.responses_,
                    res.posterior,
                    res.label_codes,
                    np.argmax(est.responses_.vote_counts(), 1),
                    DEFAULT_REVIEW,
                )
                flagged = pd.Index(res.items)[rv.flagged]
                order = np.argsort(rv.confidence[rv.flagged], kind="stable")
                chosen = [t for t in flagged[order] if t in open_tasks][:budget]
                for t in chosen:
                    cands = [x for x in item_rows[t] if pool[x]]
                    buy.append(informative(cands) if who == "informative" else min(cands, key=lambda x: key[x]))
            if not buy:
                break
            b = np.asarray(buy)
            cur.n_bought += len(b)
            cur.bought_right += float(
                (answers["label"].to_numpy()[b] == truth.reindex(answers["task"].iloc[b]).to_numpy()).sum()
            )
            cur.on_wrong += float((1 - correct[tasks.get_indexer(answers["task"].iloc[b])]).sum())
            if "hard" in truth.attrs:
                cur.on_hard += float(answers["task"].iloc[b].isin(truth.attrs["hard"]).sum())
            labels_before = est.result_.labels.reindex(tasks).to_numpy()
            known[b] = True
            cur.items_touched = int(answers["task"][known & ~start].nunique())
            est = _fit(answers[known], method)
            new = _correct(est, truth, tasks)
            if strategy == "plan":
                lo, hi = _boot(new - correct, rng)
                cur.realised.append((float((new - correct).mean()), lo, hi))
                touched = np.zeros(len(tasks), bool)
                touched[tasks.get_indexer(answers["task"].iloc[b])] = True
                cur.on_bought.append(float(((new - correct) * touched).mean()))
                cur.off_bought.append(float(((new - correct) * ~touched).mean()))
                moved = est.result_.labels.reindex(tasks).to_numpy() != labels_before
                cur.flips.append((int(moved[touched].sum()), int(moved[~touched].sum())))
            correct = new
            cur.labels.append(int(known.sum() - start.sum()))
            cur.accuracy.append(float(correct.mean()))
        out[strategy] = cur
        if strategy == "fixed":
            rounds = np.diff(cur.labels).tolist()
    return out


def labels_to_reach(curve: Curve, acc: float) -> float:
    hit = [lab for lab, a in zip(curve.labels, curve.accuracy, strict=True) if a >= acc - 1e-12]
    return float(hit[0]) if hit else float("nan")


def at_budget(curve: Curve, labels: int) -> float:
    """Accuracy at ``labels`` bought, linearly interpolated between rounds (flat after the last one)."""
    return float(np.interp(labels, curve.labels, curve.accuracy))


def share_of_uniform(runs: list[dict[str, Curve]], replay_sd: float, bar: float = 0.6) -> dict[str, float]:
    """The issue's bar — the plan reaches uniform overlap's accuracy with ≤ ``bar`` of its labels — judged on the
    replays together.  A single replay's ratio (first plan round at or above uniform's accuracy ÷ uniform's labels)
    is a label count read off a noisy curve: its error is the accuracy noise divided by uniform's slope, so where
    uniform's curve is flat (its last overlap adds little) one replay's ratio swings by tenths.  Two readings that
    average that noise out: (1) the ratio of the *mean* curves (the replays' plan accuracy averaged on a 1-label
    grid, linearly interpolated between rounds, against uniform's mean accuracy at the overlap), and (2) the paired
    accuracy gap at the bar's budget, plan at ``bar`` × uniform's labels minus uniform at its labels, mean over
    replays with its standard error — the bar holds in expectation iff that gap is ≥ 0; noise in accuracy units,
    so it stays well conditioned where uniform's curve is flat.  Also printed per overlap: uniform's mean gain
    from the previous overlap against one replay's accuracy sd at one budget (``replay_sd``): a gain below that sd
    is where single-replay ratios are ill-conditioned."""
    n_o = min(len(r["uniform"].labels) for r in runs)
    top = max(max(r["plan"].labels) for r in runs)
    grid = np.arange(top + 1)
    mean_plan = np.mean([np.interp(grid, r["plan"].labels, r["plan"].accuracy) for r in runs], axis=0)
    worst_mean_ratio, worst_gap, worst_z = 0.0, float("inf"), float("inf")
    print(
        f"  share of uniform's labels over the {len(runs)} replays (bar {bar:.0%}): overlap, uniform's mean gain from "
        "the previous overlap (pt), ratio of the mean curves, plan at the bar's budget − uniform (pt, mean ± se)"
    )
    for o in range(1, n_o):
        lab = np.array([r["uniform"].labels[o] for r in runs], float)
        u_acc = np.array([r["uniform"].accuracy[o] for r in runs])
        u_gain = float(np.mean([r["uniform"].accuracy[o] - r["uniform"].accuracy[o - 1] for r in runs]))
        hit = np.flatnonzero(mean_plan >= u_acc.mean() - 1e-12)
        mean_ratio = float(grid[hit[0]] / lab.mean()) if len(hit) else float("inf")
        gap = np.array([at_budget(r["plan"], int(bar * x + 0.5)) - u for r, x, u in zip(runs, lab, u_acc, strict=True)])
        se = float(gap.std(ddof=1) / np.sqrt(len(gap))) if len(gap) > 1 else float("nan")
        worst_mean_ratio = max(worst_mean_ratio, mean_ratio)
        worst_gap = min(worst_gap, float(gap.mean()))
        worst_z = min(worst_z, float(gap.mean() / se) if se > 0 else float("inf"))
        flat = "  (uniform's gain < one replay's sd: single ratios ill-conditioned)" if u_gain < replay_sd else ""
        print(f"  {o + 2:7d}  {100 * u_gain:+6.2f}  {mean_ratio:5.2f}  {100 * gap.mean():+6.2f} ± {100 * se:.2f}{flat}")
    return {"mean_curve_ratio": worst_mean_ratio, "gap_at_bar": worst_gap, "gap_at_bar_z": worst_z}


def report(name: str, runs: list[dict[str, Curve]]) -> dict[str, float]:
    print(f"\n=== {name}: {len(runs)} replays ===")
    ratios, worse, worst, n_budgets = [], 0, 0.0, 0
    for s, r in enumerate(runs):
        u, p, f = r["uniform"], r["plan"], r["fixed"]
        print(
            f"seed {s}: plan substituted {p.substituted}/{p.asked} asks; labels bought "
            f"plan {p.labels[-1]}, fixed {f.labels[-1]}, uniform {u.labels[-1]}"
        )
        print(
            f"  bought responses right (gold): plan {p.bought_right / max(p.n_bought, 1):.3f}, fixed "
            f"{f.bought_right / max(f.n_bought, 1):.3f}; on items labelled wrong when bought: plan "
            f"{p.on_wrong / max(p.n_bought, 1):.3f}, fixed {f.on_wrong / max(f.n_bought, 1):.3f}"
        )
        print("  overlap  uniform labels  uniform acc  plan labels to reach  ratio  plan acc@same  fixed acc@same")
        for o in range(1, len(u.labels)):
            need = labels_to_reach(p, u.accuracy[o])
            ratio = need / u.labels[o] if u.labels[o] else float("nan")
            ratios.append(ratio)
            print(f"  {o + 2:7d}  {u.labels[o]:14d}  {u.accuracy[o]:11.4f}  {need:20.0f}  {ratio:5.2f}")
        print("  budget  plan acc  fixed acc")
        for lab in f.labels[1:]:
            pa, fa = at_budget(p, lab), at_budget(f, lab)
            worse += pa < fa - 1e-12
            worst = max(worst, fa - pa)
            n_budgets += 1
            print(f"  {lab:6d}  {pa:8.4f}  {fa:9.4f}{'  <-- plan worse' if pa < fa - 1e-12 else ''}")
    # the same budgets (the fixed rule's round b) over the replays: mean gap, its standard error, and the spread of
    # one replay's gap — how noisy a single budget's comparison is
    n_b = min(len(r["fixed"].labels) for r in runs)
    gaps = np.array(
        [[at_budget(r["plan"], r["fixed"].labels[b]) - r["fixed"].accuracy[b] for b in range(1, n_b)] for r in runs]
    ).reshape(len(runs), -1)
    mean_gap = gaps.mean(axis=0)
    sd_gap = gaps.std(axis=0, ddof=1) if len(runs) > 1 else np.full(gaps.shape[1], np.nan)
    below_mean = int((mean_gap < -1e-12).sum())
    below_sig = int((mean_gap + Z90 * sd_gap / np.sqrt(len(runs)) < 0).sum()) if len(runs) > 1 else -1
    print(
        f"  over the {len(runs)} replays at the fixed rule's budgets: plan − fixed mean {100 * mean_gap.mean():+.2f} pt; "
        f"mean below the fixed rule at {below_mean}/{len(mean_gap)} budgets (worst mean {100 * -min(0.0, mean_gap.min()):.2f} pt), "
        f"significantly below (mean + 1.645 se < 0) at {below_sig}/{len(mean_gap)}; one replay's gap at one budget "
        f"varies with sd {100 * float(np.nanmedian(sd_gap)):.2f} pt (median over budgets)"
    )
    fin = [x for x in ratios if np.isfinite(x)]
    share = share_of_uniform(runs, float(np.nanmedian(sd_gap)) if len(runs) > 1 else float("nan"))
    summary = {
        **share,
        "worst_ratio": max(fin) if len(fin) == len(ratios) and fin else float("inf"),
        "plan_worse_than_fixed": worse,
        "worst_shortfall": worst,
        "mean_gap": float(mean_gap.mean()),
        "budgets_mean_below": below_mean,
        "budgets_significantly_below": below_sig,
        "worst_mean_gap": float(-min(0.0, mean_gap.min())),
        "single_budget_sd": float(np.nanmedian(sd_gap)),
        "n_budget_rounds": len(mean_gap),
    }
    print(
        f"  summary: worst ratio (plan labels / uniform labels) {summary['worst_ratio']:.2f} (worst replay), "
        f"{summary['mean_curve_ratio']:.2f} (mean curves); plan at 60 % of uniform's labels − uniform: worst overlap "
        f"{100 * summary['gap_at_bar']:+.2f} pt (z {summary['gap_at_bar_z']:+.1f}); plan worse than fixed at "
        f"{worse}/{n_budgets} budgets (worst by {100 * worst:.2f} pt)"
    )
    return summary


def calibration(name: str, runs: list[dict[str, Curve]]) -> dict[str, float]:
    """Predicted vs realised accuracy gain of every plan round, for the responses actually bought.  Realised: the
    accuracy on gold of the labels after the refit on all responses minus before, over all items.  Predicted: the
    value of information of the bought responses (``voi``) with its model interval (±1.645 sd of
    ``voi.gain_variance``: the bought items' outcomes only), and ``refit_gain`` (simulated refits; its interval adds
    the misspecification allowance and the method's own refit on one draw — the plan's default; "simulated": the
    same without that refit, the audit's).  Prints the first replay's rounds; returns the crowd's row."""
    print(f"  calibration, {name} (first replay's rounds; accuracy points; label changes of the refit on items")
    print("  that got nothing, predicted / real)")
    print("    round  voi [90% model]            refit-sim [90%]            realised  changes (untouched)")
    rows = []
    for s, r in enumerate(runs):
        p = r["plan"]
        for k, ((bought, bsd), (g, _, _), rg, (_, fu)) in enumerate(
            zip(p.bought, p.realised, p.refit, p.flips, strict=False)
        ):
            lo, hi = rg.interval()
            slo, shi = replace(rg, refit_changed=None).interval()
            pred_u = rg.refit_changed[1] if rg.refit_changed is not None else float(rg.changed[:, 1].mean())
            rows.append((bought, bought - Z90 * bsd, bought + Z90 * bsd, rg.mean, lo, hi, slo, shi, g))
            if s == 0:
                print(
                    f"    {k + 1:5d}  {100 * bought:+6.2f} [{100 * (bought - Z90 * bsd):+6.2f}, "
                    f"{100 * (bought + Z90 * bsd):+6.2f}]  {100 * rg.mean:+6.2f} [{100 * lo:+6.2f}, {100 * hi:+6.2f}]  "
                    f"{100 * g:+8.2f}  {pred_u:.0f} / {fu}{'' if lo - 1e-12 <= g <= hi + 1e-12 else '  outside'}"
                )
    a = np.array(rows).reshape(-1, 9)
    g = a[:, 8]

    def inside(lo: np.ndarray, hi: np.ndarray) -> float:
        return float(((lo - 1e-12 <= g) & (g <= hi + 1e-12)).mean())

    row = {
        "rounds": len(a),
        "voi": float(a[:, 0].mean()),
        "refit": float(a[:, 3].mean()),
        "realised": float(g.mean()),
        "voi_inside": inside(a[:, 1], a[:, 2]),
        "voi_width": float((a[:, 2] - a[:, 1]).mean()),
        "refit_inside": inside(a[:, 4], a[:, 5]),
        "refit_width": float((a[:, 5] - a[:, 4]).mean()),
        "sim_inside": inside(a[:, 6], a[:, 7]),
        "sim_width": float((a[:, 7] - a[:, 6]).mean()),
        "seconds": float(np.mean([x for r in runs for x in r["plan"].seconds])),
    }
    print(
        f"    {name}: {row['rounds']} rounds; mean gain voi {100 * row['voi']:+.2f}, refit-sim {100 * row['refit']:+.2f},"
        f" realised {100 * row['realised']:+.2f} pt; inside the 90% interval: voi {row['voi_inside']:.0%} (width "
        f"{100 * row['voi_width']:.2f} pt), refit-sim {row['refit_inside']:.0%} (width {100 * row['refit_width']:.2f}"
        f" pt; without the method's refit {row['sim_inside']:.0%}, {100 * row['sim_width']:.2f} pt); "
        f"{row['seconds']:.2f} s CPU per round"
    )
    return row


def decompose(name: str, runs: list[dict[str, Curve]]) -> None:
    """Where the plan's loss to the fixed rule comes from, per budget (the fixed rule's label counts): accuracy
    minus the fixed rule's of the plan, of the plan's items with a random available annotator (``plan/random``:
    item choice alone) and of the fixed rule's items with the plan model's most informative available annotator
    (``fixed/informative``: annotator choice alone), in points; mean over the replays and the worst replay."""
    variants = [v for v in ("plan", "plan/random", "fixed/informative") if all(v in r for r in runs)]
    print(f"  decomposition ({name}): accuracy − fixed rule's at the fixed rule's budgets, points (mean over replays)")
    print("  budget " + "".join(f"{v:>20s}" for v in variants))
    n_b = min(len(r["fixed"].labels) for r in runs)
    lost = dict.fromkeys(variants, 0)
    for b in range(1, n_b):
        gaps = {
            v: [100 * (at_budget(r[v], r["fixed"].labels[b]) - r["fixed"].accuracy[b]) for r in runs] for v in variants
        }
        for v in variants:
            lost[v] += sum(g < -1e-9 for g in gaps[v])
        lab = int(np.mean([r["fixed"].labels[b] for r in runs]))
        print(f"  {lab:6d} " + "".join(f"{np.mean(gaps[v]):+13.2f} (≥{min(gaps[v]):+.1f})" for v in variants))
    tot = len(runs) * (n_b - 1)
    print("  budgets below the fixed rule: " + ", ".join(f"{v} {lost[v]}/{tot}" for v in variants))


def simulated(seed: int) -> tuple[pd.DataFrame, pd.Series]:
    from fusion_core.simulate import dawid_skene

    sim = dawid_skene(
        n_items=800,
        n_workers=60,
        n_classes=2,
        responses_per_item=8,
        accuracy=(0.55, 0.9),
        spammers=6,
        worker_activity="zipf",
        seed=seed,
    )
    return sim.responses[["task", "worker", "label"]], sim.truth


def sparse(seed: int) -> tuple[pd.DataFrame, pd.Series]:
    """A sparse crowd: 800 items × 8 responses from 400 annotators of uniform activity (~16 responses each, ~4 at
    the start of a replay), 3 imbalanced classes (0.6, 0.3, 0.1), accuracy U(0.5, 0.9), 20 spammers — almost
    nothing is known about any one annotator, so a plan can only choose items."""
    from fusion_core.simulate import dawid_skene

    sim = dawid_skene(
        n_items=800,
        n_workers=400,
        n_classes=3,
        responses_per_item=8,
        accuracy=(0.5, 0.9),
        spammers=20,
        class_prior=(0.6, 0.3, 0.1),
        seed=500 + seed,
    )
    return sim.responses[["task", "worker", "label"]], sim.truth


def confusable(
    seed: int,
    n_items: int = 800,
    n_workers: int = 110,
    per_item: int = 10,
    hard: float = 0.3,
    accuracy: tuple[float, float] = (0.6, 0.8),
    spammers: int = 0,
):
    """A dense 4-class crowd on which the plan used to lose to the fixed rule (as on the dog and face sets): many
    little-seen annotators (110, zipf activity, ~15 responses each at 2 per item) of similar skill (accuracy
    U(``accuracy``) on easy items), classes in confusable pairs (0↔1, 2↔3) shared by every annotator (85 % of
    errors go to the partner), and a ``hard`` share of items hard for everyone (accuracy − 0.35, at least 0.3:
    errors correlated given the truth, which one confusion matrix per annotator cannot express).  Each fitted
    matrix is mostly noise, so a plan that trusts them picks annotators and items by that noise.  ``spammers``
    answer at random.  ``truth.attrs["hard"]``: the hard items."""
    from fusion_core.simulate.dawid_skene import sample_distinct

    rng = np.random.default_rng(1000 + seed)
    k = 4
    truth = rng.integers(0, k, n_items)
    acc = rng.uniform(accuracy[0], accuracy[1], n_workers)
    spam = rng.permutation(n_workers)[:spammers]
    weight = 1.0 / np.arange(1, n_workers + 1) ** 0.8
    chosen = sample_distinct(rng, n_items, per_item, weight[rng.permutation(n_workers)])
    item = np.repeat(np.arange(n_items), per_item)
    worker = chosen.ravel()
    is_hard = rng.random(n_items) < hard
    p_right = np.where(is_hard[item], np.maximum(0.3, acc[worker] - 0.35), acc[worker])
    t = truth[item]
    probs = np.zeros((len(item), k))
    probs[:, :] = ((1 - p_right) * 0.15 / (k - 2))[:, None]
    probs[np.arange(len(item)), t] = p_right
    probs[np.arange(len(item)), t ^ 1] = (1 - p_right) * 0.85
    probs[np.isin(worker, spam)] = 1.0 / k
    return _draw(rng, probs, item, worker, truth, is_hard)


def _draw(
    rng: np.random.Generator,
    probs: np.ndarray,
    item: np.ndarray,
    worker: np.ndarray,
    truth: np.ndarray,
    hard: np.ndarray,
) -> tuple[pd.DataFrame, pd.Series]:
    """One reported label per response row from its class probabilities ``probs``, as the long format, and the
    truth with ``attrs["hard"]`` (the ``hard`` items' ids)."""
    u = rng.random(len(item))[:, None]
    reported = np.minimum((u > np.cumsum(probs, axis=1)).sum(axis=1), probs.shape[1] - 1)
    tasks = pd.Index([f"t{i}" for i in range(len(truth))])
    answers = pd.DataFrame({"task": tasks.take(item), "worker": [f"w{w}" for w in worker], "label": reported})
    out = pd.Series(truth, index=tasks)
    out.attrs["hard"] = tasks[hard]
    return answers, out


def shared_confusion(
    seed: int,
    n_items: int = 800,
    n_workers: int = 80,
    per_item: int = 10,
    ambiguous: float = 0.5,
    careful: float = 0.3,
    accuracy: tuple[float, float] = (0.7, 0.8),
    strength: tuple[float, float] = (0.5, 1.0),
):
    """A 4-class crowd whose errors are shared item by item, so that agreement misranks the annotators (the shape
    of the face set, built from principles: no face figure is used).  Every annotator has an accuracy U(``accuracy``) on
    *plain* items (errors spread over the other classes).  An ``ambiguous`` share of the items carries a
    *lure*, the true class's partner (0↔1, 2↔3), with an item strength λ_i ~ U(``strength``): annotator w reports the
    lure with probability λ_i s_w and otherwise answers as on a plain item.  Most annotators follow the lure
    (susceptibility s_w ~ U(0.7, 1)); a ``careful`` share resists it (s_w ~ U(0, 0.3)) but is a little less
    accurate on plain items (accuracy − 0.05).  On a strongly lured item the crowd's majority is the lure, the
    careful annotators disagree with it and *look* worse by agreement while being at least as right on gold; a
    conditionally independent model rates the followers best and reads a lured item as settled.  80 zipf-active
    annotators, 800 items × 10 responses.  ``truth.attrs["hard"]``: the lured items."""
    from fusion_core.simulate.dawid_skene import sample_distinct

    rng = np.random.default_rng(2000 + seed)
    k = 4
    truth = rng.integers(0, k, n_items)
    is_careful = rng.random(n_workers) < careful
    acc = rng.uniform(accuracy[0], accuracy[1], n_workers)
    susceptible = np.where(is_careful, rng.uniform(0.0, 0.3, n_workers), rng.uniform(0.7, 1.0, n_workers))
    weight = 1.0 / np.arange(1, n_workers + 1) ** 0.8
    chosen = sample_distinct(rng, n_items, per_item, weight[rng.permutation(n_workers)])
    item = np.repeat(np.arange(n_items), per_item)
    worker = chosen.ravel()
    lured = rng.random(n_items) < ambiguous
    pull = np.where(lured, rng.uniform(strength[0], strength[1], n_items), 0.0)
    t = truth[item]
    p_lure = pull[item] * susceptible[worker]
    probs = np.zeros((len(item), k))
    probs[:, :] = ((1 - p_lure) * (1 - acc[worker]) / (k - 1))[:, None]
    probs[np.arange(len(item)), t] = (1 - p_lure) * acc[worker]
    probs[np.arange(len(item)), t ^ 1] += p_lure
    return _draw(rng, probs, item, worker, truth, lured)


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--datasets", nargs="*", default=["rte", "temp", "dog"], help="real sets in ../shared/datasets")
    ap.add_argument("--simulated", type=int, default=1, help="number of simulated crowds (seeds 0, 1, …)")
    ap.add_argument("--confusable", type=int, default=0, help="number of simulated dense 4-class crowds (confusable)")
    ap.add_argument(
        "--sparse", type=int, default=0, help="number of simulated sparse crowds (400 little-seen annotators)"
    )
    ap.add_argument(
        "--shared-confusion",
        type=int,
        default=0,
        help="number of simulated 4-class crowds whose errors are shared item by item (agreement misranks them)",
    )
    ap.add_argument("--seeds", type=int, default=2, help="replays per real set (different 2-response starts)")
    ap.add_argument("--method", default="ds", help="method refitted every round")
    ap.add_argument("--round-share", type=float, default=0.1, help="plan / fixed budget per round, share of items")
    ap.add_argument("--max-extra", type=int, default=3, help="uniform rounds (extra overlap beyond 2)")
    ap.add_argument("--max-per-item", type=int, default=3, help="the plan's most extra labels per item per round")
    ap.add_argument(
        "--substitute",
        choices=["random", "informative"],
        default="informative",
        help="when the annotator the plan asks never labelled the item: the held-back response of its most "
        "informative annotator under the plan's model, or a random one (whoever the platform finds)",
    )
    ap.add_argument(
        "--calibration-only", action="store_true", help="replay the plan only and print only its calibration table"
    )
    ap.add_argument(
        "--decompose",
        action="store_true",
        help="also replay the plan's items with random annotators and the fixed rule's items with the plan model's "
        "annotators: is the loss to the fixed rule item choice or annotator choice?",
    )
    ap.add_argument(
        "--evidence-z",
        type=float,
        default=None,
        help="the plan's evidence_z (default: the plan's, 1.96 — an annotator chosen by their own predictive matrix only when told apart from the crowd; 0: every annotator by their own)",
    )
    ap.add_argument(
        "--near-tie",
        type=float,
        default=None,
        help="the plan's NEAR_TIE (relative step within which scores are a near tie; 0: exact scores, as before)",
    )
    ap.add_argument(
        "--bonferroni",
        action="store_true",
        help="an annotator is told apart as better only at the one-sided level divided by the number of annotators "
        "(the fourth session's rule; default: at the level itself)",
    )
    ap.add_argument(
        "--pooled-belief",
        action="store_true",
        help="the plan's item belief counts the past responses of annotators not told apart from the crowd by the "
        "crowd's matrix (predictive.POOLED_BELIEF; default: every annotator's by their own)",
    )
    ap.add_argument("--sim-replays", type=int, default=1, help="replays per simulated crowd (different starts)")
    ap.add_argument(
        "--dependence",
        type=float,
        default=0.0,
        help="the gain interval's common-shock intraclass correlation τ (refit_gain's dependence; 0: independent)",
    )
    ap.add_argument("--plot", action="store_true", help="write benchmarks/out/relabel_replay.html")
    args = ap.parse_args()
    if args.near_tie is not None:
        plan_module.NEAR_TIE = args.near_tie
    if args.pooled_belief:
        predictive_module.POOLED_BELIEF = True
    if args.bonferroni:
        predictive_module.BONFERRONI = True
    sets: list[tuple[str, list[dict[str, Curve]]]] = []
    t0 = time.perf_counter()

    def run(answers: pd.DataFrame, truth: pd.Series, seed: int) -> dict[str, Curve]:
        return replay(
            answers,
            truth,
            method=args.method,
            round_share=args.round_share,
            max_extra=args.max_extra,
            seed=seed,
            max_per_item=args.max_per_item,
            substitute=args.substitute,
            dependence=args.dependence,
            plan_kw=None if args.evidence_z is None else {"evidence_z": args.evidence_z},
            strategies=("plan",)
            if args.calibration_only
            else ("plan", "fixed", "plan/random", "fixed/informative")
            if args.decompose
            else ("plan", "fixed"),
        )

    for name in args.datasets:
        answers, truth = load(name)
        sets.append((name, [run(answers, truth, s) for s in range(args.seeds)]))
    for s in range(args.simulated):
        answers, truth = simulated(s)
        sets.append((f"simulated zipf crowd seed {s}", [run(answers, truth, s + r) for r in range(args.sim_replays)]))
    for s in range(args.confusable):
        answers, truth = confusable(s)
        sets.append(
            (
                f"simulated confusable 4-class crowd seed {s}",
                [run(answers, truth, s + r) for r in range(args.sim_replays)],
            )
        )
    for s in range(args.shared_confusion):
        answers, truth = shared_confusion(s)
        sets.append(
            (
                f"simulated shared-confusion crowd seed {s}",
                [run(answers, truth, s + r) for r in range(args.sim_replays)],
            )
        )
    for s in range(args.sparse):
        answers, truth = sparse(s)
        sets.append((f"simulated sparse crowd seed {s}", [run(answers, truth, s + r) for r in range(args.sim_replays)]))
    table = []
    for name, runs in sets:
        if not args.calibration_only:
            report(name, runs)
            if args.decompose:
                decompose(name, runs)
        table.append((name, calibration(name, runs)))
    print("\ncalibration of the expected gain (plan rounds, all replays; gains and widths in accuracy points)")
    print(
        "| crowd | rounds | mean predicted (voi / refit-sim) | mean realised | inside 90 %: model / refit-sim / no method"
        " refit | mean width: model / refit-sim / no method refit | CPU s/round |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, c in table:
        print(
            f"| {name} | {c['rounds']} | {100 * c['voi']:+.2f} / {100 * c['refit']:+.2f} | {100 * c['realised']:+.2f} | "
            f"{c['voi_inside']:.0%} / **{c['refit_inside']:.0%}** / {c['sim_inside']:.0%} | {100 * c['voi_width']:.2f}"
            f" / {100 * c['refit_width']:.2f} / {100 * c['sim_width']:.2f} | {c['seconds']:.2f} |"
        )
    print(f"\n{time.perf_counter() - t0:.1f} s")

    if args.plot:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        fig = make_subplots(rows=1, cols=len(sets), subplot_titles=[n for n, _ in sets])
        for c, (_, runs) in enumerate(sets, start=1):
            for s, colour in (("uniform", "#888"), ("fixed", "#d62728"), ("plan", "#1f77b4")):
                cv = runs[0][s]
                fig.add_trace(
                    go.Scatter(x=cv.labels, y=cv.accuracy, name=s, line={"color": colour}, showlegend=c == 1),
                    row=1,
                    col=c,
                )
            fig.update_xaxes(title_text="labels bought", row=1, col=c)
        fig.update_yaxes(title_text="accuracy (gold)", row=1, col=1)
        out = ROOT / "benchmarks" / "out"
        out.mkdir(exist_ok=True)
        fig.write_html(out / "relabel_replay.html", include_plotlyjs="cdn")
        print(f"plot -> {Path(out / 'relabel_replay.html')}")


if __name__ == "__main__":
    main()
