"""Which labels to buy next: a re-labelling plan from a fitted confusion model.

Given the responses, a fit with confusion matrices and class priors (``ds``, ``ds1``, ``auto`` …) and a budget of
extra labels, :func:`plan_relabel` ranks the items by the expected gain in label accuracy from more responses —
the value of information under the model, counting who would answer (:mod:`.voi`) — and suggests whom to ask.

Greedy assignment (exact for each item, items being independent under the model): every open item keeps its
best (annotator, score); the best pair overall is taken, the annotator's capacity and the budget are charged, and
only that item's next score is recomputed with the responses already planned for it (the joint table of
:mod:`.voi` over their outcomes).  An item's score is its marginal gain per unit cost, or half the gain of two
responses from annotators like the candidate when that is larger (one response alone can be worth 0 — module
:mod:`.voi`), so items that need two more labels are not starved.  Candidates are the annotators of the fit,
most informative first (expected gain on an item with a uniform posterior), not already on the item, not
excluded, with capacity left; nobody gets more than ``max_share`` of the budget unless given a capacity.  With
``evidence_z`` an annotator is scored by their own (predictive) matrix only when their responses tell them apart
from the crowd (:func:`.predictive.planning_confusion`); the others are asked as alike, the least loaded first.
Ties between items (:data:`NEAR_TIE`) go to the item today's review rule would pick.  Gains are counted from the
label the user has (the fit's): the expected accuracy before is the model's probability that the fit's labels are
right, and an item's first responses are scored by the expected accuracy, under the plan's model, of the label
the fit's own posterior and matrices will give after them (:data:`FROM_FIT_LABEL`).

Stopping: the budget is spent, every item meets ``target`` (its current or planned expected confidence), or no
candidate is expected to help.  Expected accuracy = the mean probability that the label is right
(``mean_i max_k q_ik``), before and after the planned responses.  Methods without confusion matrices (``mv``,
``wawa``) get one-coin matrices from their annotator skills (stated in ``notes``).
"""

from __future__ import annotations

import heapq
import math
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses, as_responses
from fusion_core.diagnostics.plan_result import RelabelPlan
from fusion_core.diagnostics.predictive import (
    EVIDENCE_Z,
    ShrunkFit,
    model_confusion,
    planning_model,
    predictive_confusion,
    predictive_model,
)
from fusion_core.diagnostics.refit_gain import RefitGain, refit_gain
from fusion_core.diagnostics.voi import (
    CHUNK_ELEMENTS,
    candidate_score,
    decided_accuracy,
    expected_accuracy,
    extend,
    gain_variance,
    initial_gains,
)
from fusion_core.errors import UserInputError
from fusion_core.methods.results import FitResult

#: scores at or below this are "no expected help"
MIN_GAIN = 1e-9
#: the audit's plan: a budget of this share of the items (at least 1 label), items at this confidence need nothing
AUDIT_BUDGET_SHARE = 0.1
AUDIT_MAX_BUDGET = 1000  # the greedy step is ~0.3 ms: 10k labels cost ~3 s CPU, too much for every audit
AUDIT_TARGET = 0.95
#: the "refit" interval refits the method once when its fit took at most this long (seconds, `FitResult.seconds`)
MAX_REFIT_SECONDS = 1.0
#: ties between items' scores are broken as today's review rule would (the item whose fitted label is least
#: confident first, then the one with fewer responses); scores within this relative step of each other count as
#: tied (0: exact ties only — 0.02 was replayed and was not better: docs/PLAN.md)
NEAR_TIE = 0.0
#: the gain is counted from the label the user has (the fit's), not from the plan model's argmax, and an item's
#: first responses are scored by the label the fit will give after them (:func:`.voi.decided_accuracy`; docs/PLAN.md)
FROM_FIT_LABEL = True


def _per_worker(
    values: int | float | pd.Series | Mapping[Any, Any] | None, workers: pd.Index, what: str, missing: float
) -> np.ndarray | None:
    """A value per annotator (``workers`` order) from a number, a Series or a mapping by annotator id."""
    if values is None:
        return None
    if isinstance(values, int | float) and not isinstance(values, bool):
        return np.full(len(workers), float(values))
    s = pd.Series(values) if not isinstance(values, pd.Series) else values
    try:
        out = pd.to_numeric(s, errors="raise").astype(float)
    except (TypeError, ValueError):
        raise UserInputError(f"every {what} must be a number.") from None
    idx = workers.get_indexer(out.index)
    if (idx < 0).all() and len(out):
        raise UserInputError(f"none of the annotators given a {what} is in the data (e.g. {out.index[0]!r}).")
    arr = np.full(len(workers), missing)
    arr[idx[idx >= 0]] = out.to_numpy()[idx >= 0]
    if np.isnan(arr).any() or (arr < 0).any():
        raise UserInputError(f"every {what} must be a number ≥ 0.")
    return arr


def _pairs(frame: pd.DataFrame | None, fit: FitResult) -> tuple[np.ndarray, np.ndarray]:
    """``exclude``: (task, worker) pairs as item and worker codes (workers not in the fit are ignored)."""
    if frame is None or len(frame) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if not {"task", "worker"} <= set(frame.columns):
        raise UserInputError("exclusions need the columns 'task' and 'worker' (who may not label which item again).")
    items = pd.Index(fit.items).get_indexer(pd.Index(frame["task"]))
    if (items < 0).any():
        bad = frame["task"].iloc[int(np.flatnonzero(items < 0)[0])]
        raise UserInputError(f"exclusions name tasks that are not in the data (e.g. {bad!r}).")
    workers = pd.Index(fit.workers).get_indexer(pd.Index(frame["worker"]))
    keep = workers >= 0
    return items[keep].astype(np.int64), workers[keep].astype(np.int64)


def plan_relabel(
    responses: Responses | pd.DataFrame,
    fit: FitResult,
    budget: float,
    *,
    target: float | None = None,
    cost: pd.Series | Mapping[Any, Any] | None = None,
    capacity: int | pd.Series | Mapping[Any, Any] | None = None,
    exclude: pd.DataFrame | None = None,
    items: Iterable[Any] | None = None,
    max_share: float = 0.1,
    max_per_item: int = 3,
    max_candidates: int = 100,
    lookahead: bool = True,
    prior_count: float | str = "auto",
    interval: str = "refit",
    evidence_z: float = EVIDENCE_Z,
) -> RelabelPlan:
    """Plan up to ``budget`` extra labels (module docstring).

    ``target``: items whose label confidence (posterior probability) reaches it need nothing.  ``cost``: per
    annotator id (then ``budget`` counts cost, default 1 each).  ``capacity``: labels each annotator can still give
    (a number for all, or per id — ids not listed are unavailable).  ``exclude``: a frame of (task, worker) pairs
    that may not be asked.  ``items``: only these tasks may get labels (e.g. those still open).  ``max_share``:
    most of the budget one annotator gets when no capacity is given.  ``max_per_item``: most extra labels per
    item.  ``max_candidates``: the most informative annotators considered.  ``prior_count``: "auto" shrinks the
    annotators' matrices towards the crowd's with the strength that best predicts held-out responses
    (:mod:`.predictive`); a number is a Dirichlet pseudo-count per cell towards uniform; 0 = the fitted rows.
    ``interval``: how the gain's 90 % interval is computed (:mod:`.refit_gain`) — "refit" (simulated refits plus
    one refit of the fit's method on simulated responses, when the fit took ≤ :data:`MAX_REFIT_SECONDS`),
    "simulated" (without that refit: cheaper, narrower),
    "model" (the planned items' outcomes only: too narrow on real crowds).
    ``evidence_z`` (:data:`.predictive.EVIDENCE_Z`; 0: every annotator by their own predictive matrix): annotators
    are chosen by their own matrix only when their agreement differs from the crowd's by this many standard errors
    (:func:`.predictive.planning_confusion`, each annotator at that level); the others are asked as alike, the load
    spread (only with ``prior_count`` "auto") — agreement ranks conformity, not accuracy, where the crowd shares
    its errors item by item, and the responses cannot tell at two or three per item (docs/PLAN.md)."""
    if interval not in ("refit", "simulated", "model"):
        raise UserInputError(f"interval must be 'refit', 'simulated' or 'model'; got {interval!r}.")
    if not (isinstance(budget, int | float) and math.isfinite(budget) and budget >= 0):
        raise UserInputError(f"the budget must be a number of labels ≥ 0; got {budget!r}.")
    if target is not None and not 0 < target <= 1:
        raise UserInputError(f"the target confidence must be in (0, 1]; got {target!r}.")
    if (
        not 0 < max_share <= 1
        or max_per_item < 1
        or max_candidates < 1
        or not (prior_count == "auto" or (isinstance(prior_count, int | float) and prior_count >= 0))
        or not evidence_z >= 0
    ):
        raise UserInputError(
            "max_share must be in (0, 1], max_per_item and max_candidates at least 1, prior_count 'auto' or ≥ 0, "
            "evidence_z ≥ 0."
        )
    resp = as_responses(responses, classes=list(fit.classes), min_workers=1)
    fitted = np.clip(np.asarray(fit.posterior, float), 0.0, 1.0)
    n, k = fitted.shape
    pm = planning_model(resp, fit, prior_count, evidence_z)
    post, own, conf, distinct = pm.posterior, pm.own, pm.confusion, pm.distinct
    item_of, worker_of, shrunk = pm.item, pm.worker, pm.shrunk
    notes = [pm.note] if pm.note else []
    workers = pd.Index(fit.workers)
    seen_ok = worker_of >= 0
    if evidence_z > 0 and prior_count == "auto":
        notes.append(
            f"{int((~distinct).sum()):,} of {len(workers):,} annotators are not told apart from the crowd by their "
            "responses: asked as alike (their values averaged), the least loaded first."
        )
    seen = np.bincount(worker_of[seen_ok], minlength=len(workers))

    costs = _per_worker(cost, workers, "cost", np.nan)
    if costs is not None and (costs <= 0).any():
        raise UserInputError("every annotator's cost must be > 0.")
    costs = np.ones(len(workers)) if costs is None else costs
    caps = _per_worker(capacity, workers, "capacity", 0.0)
    if caps is None:  # load spread: nobody gets more than max_share of the budget
        caps = np.maximum(1.0, np.ceil(max_share * budget / costs))

    uniform = np.full((1, k), 1.0 / k)
    informative = initial_gains(uniform, conf)[0]
    ok = (caps >= 1) & (informative > MIN_GAIN)
    cand = np.flatnonzero(ok)
    # most informative per unit cost first; among equals (the crowd's average annotator) the most active
    cand = cand[np.lexsort((-seen[cand], -(informative[cand] / costs[cand])))][:max_candidates]
    c = len(cand)
    ccost, ccap = costs[cand], caps[cand].copy()
    pooled = ~distinct[cand]
    # an item's value: each candidate's own predictive matrix, averaged over the alike ones (the one asked is any
    # of them; the value under the crowd's average matrix instead was worse in the replays: docs/PLAN.md)
    cconf = own[cand]

    def alike_mean(g: np.ndarray, ok: np.ndarray, alike: np.ndarray) -> np.ndarray:  # g, ok: (…, candidates)
        if not alike.any():
            return g
        w = ok & alike
        m = (np.where(w, g, 0.0).sum(axis=-1) / np.maximum(w.sum(axis=-1), 1))[..., None]
        return np.where(alike, m, g)

    load = np.zeros(c, np.int64)
    fit_conf_all = model_confusion(fit)[0]

    def first_scores(rows: np.ndarray, js: np.ndarray, repeat: int) -> np.ndarray:
        """An item's score for its first new response(s), from each candidate in ``js``: the expected accuracy,
        under the plan's model, of the label the *fit* will give after them (:func:`.voi.decided_accuracy`; the
        fit's own posterior and matrices decide) minus that of its label now — with ``repeat`` 2 the larger of the
        one-response gain and half the two-response gain.  Without :data:`FROM_FIT_LABEL`: the plan's own."""
        if not FROM_FIT_LABEL:
            g = initial_gains(post[rows], cconf[js])
            if repeat == 2:
                g = np.maximum(g, initial_gains(post[rows], cconf[js], repeat=2) / 2)
            return g
        fconf = fit_conf_all[cand[js]]
        now = conf_now[rows][:, None]
        g = decided_accuracy(post[rows], fitted[rows], cconf[js], fconf) - now
        if repeat == 2:
            g = np.maximum(g, (decided_accuracy(post[rows], fitted[rows], cconf[js], fconf, repeat=2) - now) / 2)
        return g

    # the probability, under the plan's model, that the label the user has (the fit's) is right; it is below the
    # model's own confidence where the two disagree (an item's first responses are scored by the label the fit
    # will then give: first_scores)
    conf_now = post[np.arange(n), fit.label_codes] if FROM_FIT_LABEL else post.max(axis=1)
    before = float(conf_now.mean()) if n else float("nan")
    open_mask = np.ones(n, bool)
    if items is not None:
        wanted = pd.Index(fit.items).get_indexer(pd.Index(list(items)))
        if (wanted < 0).any():
            raise UserInputError("`items` names tasks that are not in the data.")
        open_mask[:] = False
        open_mask[wanted] = True
    at_target = int((conf_now >= target).sum()) if target is not None else 0
    if target is not None:
        open_mask &= conf_now < target
    elig = np.flatnonzero(open_mask)
    pos = np.full(n, -1)
    pos[elig] = np.arange(len(elig))
    cpos = np.full(len(workers), -1)
    cpos[cand] = np.arange(c)

    allowed = np.ones((len(elig), c), bool)
    ex_i, ex_w = _pairs(exclude, fit)
    for it, wk in ((item_of, worker_of), (ex_i, ex_w)):
        sel = (pos[it] >= 0) & (wk >= 0)
        sel[sel] &= cpos[wk[sel]] >= 0
        allowed[pos[it[sel]], cpos[wk[sel]]] = False

    def can_look(m: int) -> bool:  # C × K × K^m × K² stays within the chunk bound
        return lookahead and c * k ** (m + 3) <= CHUNK_ELEMENTS

    def can_add(m: int) -> bool:
        return m < max_per_item and c * k ** (m + 2) <= CHUNK_ELEMENTS

    score = np.full((len(elig), c), -np.inf)
    if len(elig) and c:
        g = first_scores(elig, np.arange(c), 2 if can_look(0) else 1)
        score = np.where(allowed, alike_mean(g, allowed, pooled) / ccost[None, :], -np.inf)

    joints: dict[int, np.ndarray] = {}

    planned: dict[int, list[int]] = {}
    heap: list[tuple[float, float, int, int, int, int, float]] = []
    version = np.zeros(len(elig), np.int64)
    fit_conf = fitted[elig, fit.label_codes[elig]] if len(elig) else np.zeros(0)
    n_resp = np.bincount(item_of, minlength=n)[elig]
    step = math.log1p(NEAR_TIE) if NEAR_TIE > 0 else 0.0

    def bucket(v: np.ndarray) -> np.ndarray:  # heap key: −score, or −(its near-tie step)
        if step == 0:
            return -v
        return np.asarray(-np.floor(np.log(np.maximum(v, MIN_GAIN)) / step))

    if c and len(elig):
        best = np.argmax(score, axis=1)
        val = score[np.arange(len(elig)), best]
        ok = np.flatnonzero(np.isfinite(val))
        heap = list(
            zip(
                bucket(val[ok]).tolist(),
                fit_conf[ok].tolist(),
                n_resp[ok].tolist(),
                ok.tolist(),
                best[ok].tolist(),
                [0] * len(ok),
                val[ok].tolist(),
                strict=True,
            )
        )
    heapq.heapify(heap)

    def rescore(r: int) -> None:
        version[r] += 1
        m = len(planned.get(r, ()))
        if not can_add(m):
            return
        joint = joints.get(r, post[elig[r]][:, None])
        if target is not None and (expected_accuracy(joint) if m else float(conf_now[elig[r]])) >= target:
            return
        avail = np.flatnonzero(allowed[r] & (ccap >= 1) & (ccost <= budget - spent + 1e-12))
        if len(avail) == 0:
            return
        if m:
            s = candidate_score(joint, cconf[avail], can_look(m))
        else:
            s = first_scores(elig[r : r + 1], avail, 2 if can_look(0) else 1)[0]
        s = alike_mean(s, np.ones(len(avail), bool), pooled[avail]) / ccost[avail]
        i = int(np.argmax(s))
        key = float(bucket(s[i : i + 1])[0])
        heapq.heappush(heap, (key, float(fit_conf[r]), int(n_resp[r]), r, int(avail[i]), int(version[r]), float(s[i])))

    spent = 0.0
    order_r: list[int] = []
    order_j: list[int] = []
    gains: list[float] = []
    while heap:
        _, _, _, r, j, ver, top = heapq.heappop(heap)
        if ver != version[r]:
            continue
        if spent + ccost[j] > budget + 1e-12 or ccap[j] < 1:
            if budget - spent < ccost.min(initial=np.inf) - 1e-12:
                break
            rescore(r)
            continue
        if top <= MIN_GAIN:
            break
        if pooled[j]:  # alike annotators (same score, same cost): the least loaded one who may label the item
            alike = np.flatnonzero(pooled & allowed[r] & (ccap >= 1) & (ccost == ccost[j]))
            if len(alike):
                j = int(alike[np.argmin(load[alike])])
        joint = joints.get(r, post[elig[r]][:, None])
        new = extend(joint, cconf[j])
        gains.append(expected_accuracy(new) - (expected_accuracy(joint) if r in joints else float(conf_now[elig[r]])))
        joints[r] = new
        planned.setdefault(r, []).append(j)
        allowed[r, j] = False
        ccap[j] -= 1
        load[j] += 1
        spent += float(ccost[j])
        order_r.append(r)
        order_j.append(j)
        rescore(r)
    if c and budget - spent < ccost.min() - 1e-12:
        stop = "budget spent"
    elif (
        target is not None
        and len(planned) == len(elig)
        and all(expected_accuracy(joints[r]) >= target for r in planned)
    ):
        stop = "every item meets the target"
    else:
        stop = "no label is expected to help (or no annotator can give one)"

    rows = sorted(planned, key=lambda r: -(expected_accuracy(joints[r]) - conf_now[elig[r]]))
    item_gain = np.array([expected_accuracy(joints[r]) - conf_now[elig[r]] for r in rows])
    codes = elig[np.asarray(rows, dtype=np.int64)]
    classes = pd.Index(fit.classes)
    cw = workers[cand] if c else workers[:0]
    cw_ids = cw.tolist()  # one conversion (a pandas take per item costs ~0.2 ms)
    after = before + float(item_gain.sum()) / n if n else before
    sd = math.sqrt(sum(gain_variance(joints[r]) for r in rows)) / n if n else 0.0
    asked_tasks = pd.Index(fit.items).take(elig[np.asarray(order_r, dtype=np.int64)])
    asked = cw.take(np.asarray(order_j, dtype=np.int64))
    refit = _refit_interval(resp, fit, asked_tasks, asked, prior_count=prior_count, interval=interval, shrunk=shrunk)
    if refit is not None and len(refit.draws) == 0:
        notes.append("the gain's interval is the model's only (too many responses to simulate the refit).")
    elif refit is not None and interval == "refit" and refit.refit_changed is None:
        notes.append(f"the gain's interval counts simulated refits only ('{fit.method}' was not refitted).")
    return RelabelPlan(
        tasks=pd.Index(fit.items).take(codes).rename("task"),
        annotators=tuple(tuple(cw_ids[j] for j in planned[r]) for r in rows),
        expected_gain=item_gain,
        label=classes.take(fit.label_codes[codes]),
        confidence=fitted[codes, fit.label_codes[codes]],
        assignment_task=asked_tasks,
        assignment_annotator=asked,
        assignment_gain=np.asarray(gains),
        n_items=n,
        budget=float(budget),
        spent=spent,
        target=target,
        items_at_target=at_target,
        accuracy_before=before,
        accuracy_after=after,
        stop_reason=stop,
        n_candidates=c,
        method=fit.method,
        notes=tuple(notes),
        gain_sd=sd,
        refit=refit,
    )


def _refit_interval(
    resp: Responses,
    fit: FitResult,
    tasks: pd.Index,
    annotators: pd.Index,
    *,
    prior_count: float | str,
    interval: str,
    shrunk: ShrunkFit | None,
) -> RefitGain | None:
    """The planned responses' realised gain simulated with the refit (:func:`.refit_gain.refit_gain`), drawn from
    the plan's own fit of the shrunk model ``shrunk``."""
    if interval == "model" or len(tasks) == 0:
        return None
    from fusion_core.methods import create

    def method_refit(df: pd.DataFrame) -> FitResult:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return create(fit.method, **fit.params).fit(df).result_

    if interval == "refit" and fit.seconds <= MAX_REFIT_SECONDS:
        try:  # methods that need more than the responses (an item graph, context) cannot be refitted here
            return refit_gain(resp, fit, tasks, annotators, prior_count=prior_count, refit=method_refit, shrunk=shrunk)
        except (UserInputError, TypeError, ValueError):
            pass
    return refit_gain(resp, fit, tasks, annotators, prior_count=prior_count, shrunk=shrunk)


def audit_plan(resp: Responses, fit: FitResult) -> RelabelPlan:
    """The audit's plan: :data:`AUDIT_BUDGET_SHARE` of the items (at most :data:`AUDIT_MAX_BUDGET`) as budget, :data:`AUDIT_TARGET` as target, the 50
    most informative annotators as candidates (``fusion-core plan`` and the app's Plan page choose their own)."""
    budget = min(AUDIT_MAX_BUDGET, max(1, math.ceil(AUDIT_BUDGET_SHARE * resp.n_items)))
    return plan_relabel(resp, fit, budget, target=AUDIT_TARGET, max_candidates=50, interval="simulated")


__all__ = [
    "AUDIT_BUDGET_SHARE",
    "AUDIT_TARGET",
    "RelabelPlan",
    "audit_plan",
    "model_confusion",
    "plan_relabel",
    "predictive_confusion",
    "predictive_model",
]
