"""Reliability over time (docs/AUDIT.md, *Over time*): each annotator's accuracy in time windows with intervals, a
change-point test per annotator (did the accuracy drop or rise, when, by how much, how sure), the crowd's accuracy
and agreement over time, and per-window (per-batch) quality — from responses with a time column and a fitted
posterior.

*Score of a response.*  Response r = (item i, annotator j, label l) is scored by the probability that l is right
under the posterior of item i **without j's responses**: ``x_r = q^{−j}_i[l]`` with
``q^{−j}_i ∝ q_i / Γ_j[·, l]`` — the fitted posterior with j's own likelihood factor divided out (Dawid & Skene
1979, eq. 2.5; Γ_j is the Dawid–Skene M-step confusion of j from the same posterior, eq. 2.3, smoothed by half a
response per cell).  Leaving j out keeps an annotator's own votes from propping up its score (with 2–3 responses per
item they would), and it is what makes a changed annotator stand out: the others' view of an item does not follow
j's change.  Only items with at least one other response count (as in the audit's verdicts).

*Accuracy in a window* = Σ x / n over j's responses in the window, with the Beta posterior
``Beta(1 + Σx, 1 + n − Σx)`` (as :mod:`fusion_core.diagnostics.audit.evidence`); shown only from ``min_window``
responses.  *Windows*: one per batch when the times are at most ``max_batches`` distinct numbers, else
``n_windows`` windows holding equal numbers of responses.  *Change test*: :mod:`.changepoint` — one change per
annotator, at level ``alpha`` for the whole crowd (Bonferroni over the annotators tested, exact permutation
p-values near the threshold); annotators with fewer than ``2 · min_segment`` scored responses are not tested, and
the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from fusion_core.data.responses import Responses
from fusion_core.data.times import TimeColumn
from fusion_core.diagnostics.changepoint import Scan, scan
from fusion_core.diagnostics.drift_scores import efficient_scores, leave_out_scores
from fusion_core.errors import UserInputError


@dataclass(frozen=True)
class DriftRule:
    """The thresholds of reliability over time (docs/AUDIT.md): responses per window before its accuracy is shown,
    responses on each side of a change, the crowd-wide false-alarm rate, windows, batches and interval level.

    ``alpha`` is the chance that a crowd without any change gets a finding; the test is exact (permutation p-values,
    Bonferroni over the annotators), so that chance is ≈ ``alpha``, not below it.  0.03 keeps the rate measured over
    a few hundred crowds below 5 % (0.05 would exceed 5 % in about half of such measurements).  ``min_segment``: a
    change is looked for only where it leaves 50 responses on each side — over fewer, an accuracy is known to ±0.07
    at best, a 0.2 change is not detectable anyway, and scanning those splits only raises the bar for the others."""

    min_window: int = 20
    min_segment: int = 50
    alpha: float = 0.03
    n_windows: int = 10
    max_batches: int = 30
    level: float = 0.9

    def __post_init__(self) -> None:
        if not (0 < self.alpha < 1 and 0 < self.level < 1):
            raise UserInputError("alpha and level of the drift rule must be between 0 and 1.")
        if self.min_window < 1 or self.min_segment < 2 or self.n_windows < 1 or self.max_batches < 1:
            raise UserInputError("min_window ≥ 1, min_segment ≥ 2, n_windows ≥ 1 and max_batches ≥ 1, please.")


DEFAULT_DRIFT = DriftRule()


@dataclass(frozen=True)
class DriftReport:
    """Reliability over time.  Per annotator (``workers`` order): responses scored ``n``, whether it was ``tested``,
    the scan's ``statistic``, ``p_value`` and verdict ``changed`` (p ≤ ``threshold``), the change time (``change_time``:
    midway between the last response before and the first after; ``last_before``, ``first_after``), and the
    accuracy ``before``/``after`` with intervals and counts.  Per window (``window_start``/``window_end``, inclusive
    bounds in the time column's units): ``window_n`` and ``window_accuracy`` (+ ``_low``/``_high``; NaN below
    ``rule.min_window``) per annotator × window; the crowd's ``crowd_n``, ``crowd_accuracy`` (+ interval),
    ``crowd_agreement`` (share of the other responses on the item that agree) and ``label_confidence`` (mean label
    probability of the items first labelled in the window, ``window_items``)."""

    time: TimeColumn
    workers: pd.Index
    rule: DriftRule
    window_start: np.ndarray
    window_end: np.ndarray
    batches: bool
    window_n: np.ndarray
    window_accuracy: np.ndarray
    window_low: np.ndarray
    window_high: np.ndarray
    crowd_n: np.ndarray
    crowd_accuracy: np.ndarray
    crowd_low: np.ndarray
    crowd_high: np.ndarray
    crowd_agreement: np.ndarray
    window_items: np.ndarray
    label_confidence: np.ndarray
    n: np.ndarray
    tested: np.ndarray
    statistic: np.ndarray
    p_value: np.ndarray
    permuted: np.ndarray
    changed: np.ndarray
    threshold: float
    change_time: np.ndarray
    last_before: np.ndarray
    first_after: np.ndarray
    n_before: np.ndarray
    n_after: np.ndarray
    before: np.ndarray
    before_low: np.ndarray
    before_high: np.ndarray
    after: np.ndarray
    after_low: np.ndarray
    after_high: np.ndarray
    n_permutations: int
    span: tuple[float, float]
    notes: tuple[str, ...] = field(default=())

    @property
    def n_tested(self) -> int:
        return int(self.tested.sum())

    def changes(self) -> pd.DataFrame:
        """One row per annotator whose accuracy changed, largest change first (``annotators()`` filtered)."""
        table = self.annotators()
        table = table[table["changed"]]
        return table.iloc[np.argsort(-np.abs(table["change"].to_numpy()), kind="stable")]

    def annotators(self) -> pd.DataFrame:
        """The change test per annotator (one row each; times as datetimes for timestamps)."""
        pct = f"{100 * self.rule.level:.0f}%"
        show = self.time.display
        df = pd.DataFrame(
            {
                "responses scored": self.n,
                "tested": self.tested,
                "changed": self.changed,
                "direction": np.where(~self.changed, "", np.where(self.after < self.before, "fell", "rose")),
                "change time": show(self.change_time).to_numpy(),
                "last response before": show(self.last_before).to_numpy(),
                "first response after": show(self.first_after).to_numpy(),
                "accuracy before": self.before,
                f"before {pct} low": self.before_low,
                f"before {pct} high": self.before_high,
                "accuracy after": self.after,
                f"after {pct} low": self.after_low,
                f"after {pct} high": self.after_high,
                "change": self.after - self.before,
                "responses before": self.n_before,
                "responses after": self.n_after,
                "p-value": self.p_value,
                "scan statistic (max Z²)": self.statistic,
            },
            index=pd.Index(self.workers, name="annotator"),
        )
        return df

    def windows(self) -> pd.DataFrame:
        """Accuracy per annotator and window, long format (blank accuracy where the window has too few responses)."""
        m, w = self.window_n.shape
        pct = f"{100 * self.rule.level:.0f}%"
        return pd.DataFrame(
            {
                "annotator": np.repeat(np.asarray(self.workers, dtype=object), w),
                "window": np.tile(np.arange(1, w + 1), m),
                "from": np.tile(self.time.display(self.window_start).to_numpy(), m),
                "to": np.tile(self.time.display(self.window_end).to_numpy(), m),
                "responses": self.window_n.reshape(-1),
                "accuracy": self.window_accuracy.reshape(-1),
                f"{pct} low": self.window_low.reshape(-1),
                f"{pct} high": self.window_high.reshape(-1),
            }
        )

    def crowd(self) -> pd.DataFrame:
        """The crowd per window (per batch): responses, accuracy with interval, agreement, label confidence."""
        pct = f"{100 * self.rule.level:.0f}%"
        return pd.DataFrame(
            {
                "from": self.time.display(self.window_start).to_numpy(),
                "to": self.time.display(self.window_end).to_numpy(),
                "responses": self.crowd_n,
                "accuracy": self.crowd_accuracy,
                f"{pct} low": self.crowd_low,
                f"{pct} high": self.crowd_high,
                "agreement": self.crowd_agreement,
                "items first labelled": self.window_items,
                "label confidence": self.label_confidence,
            },
            index=pd.Index(np.arange(1, len(self.crowd_n) + 1), name="batch" if self.batches else "window"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The findings for ``summary.json`` (plain JSON types; times as ISO text for timestamps)."""

        def when(v: float) -> Any:
            if not np.isfinite(v):
                return None
            return self.time.display(np.array([v])).iloc[0].isoformat() if self.time.kind == "timestamp" else float(v)

        ch = self.changes()
        return {
            "time_column": self.time.name,
            "time_kind": self.time.kind,
            "windows": len(self.crowd_n),
            "annotators_tested": self.n_tested,
            "annotators_not_tested": int((~self.tested).sum()),
            "false_alarm_rate": self.rule.alpha,
            "threshold_p": self.threshold,
            "changes": [
                {
                    "annotator": str(w),
                    "direction": str(r["direction"]),
                    "change_time": when(float(self.change_time[self.workers.get_loc(w)])),
                    "accuracy_before": float(r["accuracy before"]),
                    "accuracy_after": float(r["accuracy after"]),
                    "responses_after": int(r["responses after"]),
                    "p_value": float(r["p-value"]),
                }
                for w, r in ch.iterrows()
            ],
            "crowd_accuracy": [None if not np.isfinite(v) else float(v) for v in self.crowd_accuracy],
            "crowd_agreement": [None if not np.isfinite(v) else float(v) for v in self.crowd_agreement],
            "notes": list(self.notes),
        }

    def sentences(self) -> list[str]:
        """The findings in plain words: each change, then what was (not) tested, then the crowd."""
        span = self.span[1] - self.span[0]
        out = []
        for w, r in self.changes().iterrows():
            j = self.workers.get_loc(w)
            out.append(
                f"{w}'s accuracy {r['direction']} from {r['accuracy before']:.2f} to {r['accuracy after']:.2f} after "
                f"{self.time.show(float(self.last_before[j]), span=span)}; {int(r['responses after']):,} labels "
                f"since then (p = {_p(float(r['p-value']))}, below the {_p(self.threshold)} needed with "
                f"{self.n_tested} annotators tested)."
            )
        if not out and self.n_tested:
            out.append(
                f"No annotator's accuracy changed detectably over time ({self.n_tested} tested at a "
                f"{self.rule.alpha:.0%} false-alarm rate for the whole crowd)."
            )
        out.extend(self.notes)
        ok = np.flatnonzero(self.crowd_n >= self.rule.min_window)
        if len(ok) >= 2:
            a, b = ok[0], ok[-1]
            unit, units = ("batch", "batches") if self.batches else ("window", "windows")
            out.append(
                f"The crowd's accuracy was {self.crowd_accuracy[a]:.2f} in the first {unit} and "
                f"{self.crowd_accuracy[b]:.2f} in the last ({len(self.crowd_n)} {units}; agreement "
                f"{self.crowd_agreement[a]:.2f} → {self.crowd_agreement[b]:.2f})."
            )
        return out


def _p(p: float) -> str:
    return f"{p:.2g}" if p >= 1e-4 else "< 0.0001"


def _beta(s: np.ndarray, n: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b = 1.0 + s, 1.0 + np.maximum(n - s, 0.0)
    return a / (a + b), stats.beta.ppf((1 - level) / 2, a, b), stats.beta.ppf((1 + level) / 2, a, b)


def _windows(t: np.ndarray, rule: DriftRule, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(window of each response, window starts, window ends, one window per batch?)."""
    distinct = np.unique(t)
    if kind == "number" and len(distinct) <= rule.max_batches:
        win = np.searchsorted(distinct, t)
        return win, distinct, distinct, True
    edges = np.unique(np.quantile(t, np.linspace(0, 1, rule.n_windows + 1)[1:-1], method="higher"))
    win = np.searchsorted(edges, t, side="right")
    w = len(edges) + 1
    start = np.full(w, np.inf)
    end = np.full(w, -np.inf)
    np.minimum.at(start, win, t)
    np.maximum.at(end, win, t)
    keep = np.isfinite(start)
    remap = np.cumsum(keep) - 1
    return remap[win], start[keep], end[keep], False


MAX_ROUNDS = 8
"""Rounds of scoring and scanning at most: each accepts the clearest change and re-scores the others (one round per
change found, plus one)."""


def _keep(new: Scan, old: Scan, rows: np.ndarray) -> Scan:
    """``new`` with the entries of ``rows`` taken from ``old``."""

    def pick(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(rows, b, a)

    return replace(
        new,
        statistic=pick(new.statistic, old.statistic),
        split=pick(new.split, old.split),
        p_value=pick(new.p_value, old.p_value),
        permuted=pick(new.permuted, old.permuted),
    )


def _segments(
    resp: Responses, t_all: np.ndarray, worker: np.ndarray, t: np.ndarray, *, split: np.ndarray, changed: np.ndarray
) -> np.ndarray:
    """A segment code per response: the annotator's own, or ``n_workers + i`` after the change of the i-th changed
    annotator (its responses from the first one after the scan's split on)."""
    m = resp.n_workers
    order = np.lexsort((t, worker))
    ws, ts = worker[order], t[order]
    n = np.bincount(ws, minlength=m)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]])
    first_after = np.full(m, np.inf)
    ok = changed & (split > 0) & (split < n)
    first_after[ok] = ts[starts[ok] + split[ok]]
    rank = np.cumsum(ok) - 1
    after = ok[resp.worker] & (t_all >= first_after[resp.worker])
    return np.where(after, m + rank[resp.worker], resp.worker)


def drift_report(
    resp: Responses,
    posterior: np.ndarray,
    *,
    rule: DriftRule = DEFAULT_DRIFT,
    random_state: int | None = 0,
    n_permutations: int | None = None,
) -> DriftReport:
    """Reliability over time of responses with a time column, against a fitted ``posterior`` (items × classes,
    e.g. ``FitResult.posterior``); see the module docstring.  Deterministic given ``random_state``."""
    if resp.time is None:
        raise UserInputError("reliability over time needs a time column: load the responses with time='column'.")
    q = np.asarray(posterior, dtype=float)
    if q.shape != (resp.n_items, resp.n_classes):
        raise UserInputError(f"the posterior has shape {q.shape}; expected {(resp.n_items, resp.n_classes)}.")
    t_all = np.asarray(resp.time.values, dtype=float)
    m = resp.n_workers
    rng = np.random.default_rng(random_state)
    segment = resp.worker
    found: Scan | None = None
    changed = np.zeros(m, dtype=bool)
    for _ in range(MAX_ROUNDS):  # score, scan; rescore the others with the changed annotators split in two
        x_all, accuracy = leave_out_scores(resp, q, segment)
        shared = np.isfinite(x_all)
        worker, t, x = resp.worker[shared], t_all[shared], x_all[shared]
        u = efficient_scores(x, accuracy[worker], resp.n_classes)
        sc = scan(
            worker,
            t,
            u,
            m,
            min_segment=rule.min_segment,
            alpha=rule.alpha,
            rng=rng,
            n_permutations=n_permutations,
            settled=changed,
        )
        if found is not None:  # an annotator found in an earlier round keeps that round's test
            sc = _keep(sc, found, changed)
        found = sc
        threshold = rule.alpha / max(int(sc.tested.sum()), 1)
        new = np.flatnonzero(sc.tested & (sc.p_value <= threshold) & ~changed)
        if not len(new):
            break
        # the clearest change first: it alone re-scores the others (a changed annotator drags the others' agreement
        # with the crowd along, and that must not count as their change)
        changed[new[np.lexsort((-sc.statistic[new], sc.p_value[new]))[0]]] = True
        segment = _segments(resp, t_all, worker, t, split=sc.split, changed=changed)
    assert found is not None
    sc = found
    win_all, start, end, batches = _windows(t_all, rule, resp.time.kind)
    w = len(start)
    win = win_all[shared]
    cell = worker * w + win
    n_cell = np.bincount(cell, minlength=m * w).reshape(m, w)
    s_cell = np.bincount(cell, weights=x, minlength=m * w).reshape(m, w)
    acc, low, high = _beta(s_cell, n_cell.astype(float), rule.level)
    few = n_cell < rule.min_window
    acc, low, high = (np.where(few, np.nan, a) for a in (acc, low, high))

    crowd_n = np.bincount(win, minlength=w)
    crowd_acc, crowd_low, crowd_high = _beta(
        np.bincount(win, weights=x, minlength=w), crowd_n.astype(float), rule.level
    )
    votes = resp.vote_counts(use_confidence=False)
    item = resp.item[shared]
    n_item = resp.responses_per_item[item].astype(float)
    agree = (votes[item, resp.label[shared]] - 1.0) / np.maximum(n_item - 1.0, 1.0)
    crowd_agree = np.bincount(win, weights=agree, minlength=w) / np.maximum(crowd_n, 1)
    first_win = np.full(resp.n_items, w, dtype=np.int64)
    np.minimum.at(first_win, resp.item, win_all)
    items_in = np.bincount(first_win, minlength=w + 1)[:w]
    conf = np.bincount(first_win, weights=q.max(axis=1), minlength=w + 1)[:w] / np.maximum(items_in, 1)
    empty = crowd_n == 0
    crowd_acc, crowd_low, crowd_high, crowd_agree = (
        np.where(empty, np.nan, a) for a in (crowd_acc, crowd_low, crowd_high, crowd_agree)
    )
    # the two segments of every tested annotator: responses sorted by (annotator, time) as in the scan
    order = np.lexsort((t, worker))
    ws, ts, xs = worker[order], t[order], x[order]
    starts = np.concatenate([[0], np.cumsum(sc.n)[:-1]])
    pos = np.arange(len(ws)) - starts[ws]
    split = np.where(sc.tested, sc.split, 0)
    before_mask = pos < split[ws]
    n_before = np.bincount(ws[before_mask], minlength=m)
    s_before = np.bincount(ws[before_mask], weights=xs[before_mask], minlength=m)
    n_after = sc.n - n_before
    s_after = np.bincount(ws, weights=xs, minlength=m) - s_before
    before, b_low, b_high = _beta(s_before, n_before.astype(float), rule.level)
    after, a_low, a_high = _beta(s_after, n_after.astype(float), rule.level)
    idx = np.clip(starts + split, 1, max(len(ts) - 1, 1))
    last_before = np.where(sc.tested, ts[np.maximum(idx - 1, 0)] if len(ts) else np.nan, np.nan)
    first_after = np.where(sc.tested, ts[np.minimum(idx, len(ts) - 1)] if len(ts) else np.nan, np.nan)
    untested = ~sc.tested
    for arr in (before, b_low, b_high, after, a_low, a_high):
        arr[untested] = np.nan
    n_before = np.where(untested, 0, n_before)
    n_after = np.where(untested, 0, n_after)

    notes = []
    short = int(((sc.n > 0) & untested).sum())
    if short:
        notes.append(
            f"{short} of {m} annotators gave too few responses on shared items over time to test for a change (at "
            f"least {2 * rule.min_segment} at two or more different times are needed); their windows are shown "
            f"only where they hold {rule.min_window} or more responses."
        )
    if len(np.unique(t_all)) < 2:
        notes.append("Every response has the same time: there is nothing to compare over time.")
    return DriftReport(
        time=resp.time,
        workers=pd.Index(resp.workers, name="worker"),
        rule=rule,
        window_start=start,
        window_end=end,
        batches=batches,
        window_n=n_cell,
        window_accuracy=acc,
        window_low=low,
        window_high=high,
        crowd_n=crowd_n,
        crowd_accuracy=crowd_acc,
        crowd_low=crowd_low,
        crowd_high=crowd_high,
        crowd_agreement=crowd_agree,
        window_items=items_in,
        label_confidence=np.where(items_in > 0, conf, np.nan),
        n=sc.n,
        tested=sc.tested,
        statistic=sc.statistic,
        p_value=sc.p_value,
        permuted=sc.permuted,
        changed=changed,
        threshold=threshold,
        change_time=(last_before + first_after) / 2.0,
        last_before=last_before,
        first_after=first_after,
        n_before=n_before,
        n_after=n_after,
        before=before,
        before_low=b_low,
        before_high=b_high,
        after=after,
        after_low=a_low,
        after_high=a_high,
        n_permutations=sc.n_permutations,
        span=(float(t_all.min()), float(t_all.max())),
        notes=tuple(notes),
    )


def drift_for_audit(resp: Responses, posterior: np.ndarray, random_state: int | None = 0) -> DriftReport | None:
    """The audit's reliability over time (:func:`drift_report` with the default rule), or None without a time
    column."""
    if resp.time is None:
        return None
    return drift_report(resp, posterior, random_state=random_state)


__all__ = ["DEFAULT_DRIFT", "DriftReport", "DriftRule", "drift_for_audit", "drift_report", "leave_out_scores"]
