"""A crowd whose annotators may change over time: the oracle of reliability over time (docs/AUDIT.md, *Over time*).

Items arrive one after another (item i at time i, or every 10 minutes from 1 Oct 2026 with ``timestamps=True``);
each gets ``responses_per_item`` different annotators drawn uniformly, who answer at the item's time.  Annotator j
is right with probability ``accuracy_j`` (one-coin; a wrong answer is uniform over the other classes).  With
``drift=True`` one annotator's accuracy drops by ``drop`` (``rise=True``: rises) at a uniformly drawn response of
its own, leaving at least ``min_before`` responses before and ``min_after`` after the change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

START = np.datetime64("2026-10-01T00:00:00", "s")
STEP_SECONDS = 600


@dataclass(frozen=True)
class DriftSimulation:
    """Responses (``task, worker, label, time``), the true labels, each annotator's accuracy before and after the
    change (equal when it does not change), the ``drifting`` annotator (None without drift), the true
    ``change_time`` (midway between its last response before and its first after, in the time column's numbers:
    seconds since 1970 for timestamps) and its responses before/after, and the time ``span`` of the data."""

    responses: pd.DataFrame
    truth: pd.Series
    accuracy_before: pd.Series
    accuracy_after: pd.Series
    drifting: str | None
    change_time: float
    n_before: int
    n_after: int
    span: float


def drift_crowd(
    *,
    n_items: int = 3000,
    n_workers: int = 20,
    responses_per_item: int = 7,
    n_classes: int = 2,
    accuracy: tuple[float, float] = (0.7, 0.95),
    drift: bool = True,
    drop: float = 0.2,
    rise: bool = False,
    min_before: int = 50,
    min_after: int = 50,
    timestamps: bool = False,
    seed: int | None = 0,
) -> DriftSimulation:
    """Simulate a crowd with (``drift``) or without a change in one annotator's accuracy (module docstring).  The
    changing annotator starts at an accuracy drawn so that it stays in [0.5, 1] after the change."""
    if not (1 <= responses_per_item <= n_workers) or n_classes < 2:
        raise ValueError("need 1 ≤ responses_per_item ≤ n_workers and n_classes ≥ 2.")
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, n_classes, n_items)
    acc = rng.uniform(*accuracy, n_workers)
    workers = np.argsort(rng.random((n_items, n_workers)), axis=1)[:, :responses_per_item]
    item = np.repeat(np.arange(n_items), responses_per_item)
    worker = workers.reshape(-1)
    acc_after = acc.copy()
    drifting, change, n_before, n_after = None, np.nan, 0, 0
    right_p = acc[worker]
    if drift:
        j = int(rng.integers(n_workers))
        if rise:
            acc[j] = rng.uniform(max(accuracy[0] - drop, 0.5), accuracy[1] - drop)
        else:
            acc[j] = rng.uniform(max(accuracy[0], 0.5 + drop), accuracy[1])
        acc_after[j] = acc[j] + (drop if rise else -drop)
        mine = np.flatnonzero(worker == j)  # in time order (items arrive in order)
        if len(mine) < min_before + min_after:
            raise ValueError(f"annotator {j} has {len(mine)} responses; fewer than min_before + min_after.")
        c = int(rng.integers(min_before, len(mine) - min_after + 1))
        right_p = acc[worker]
        right_p[mine[c:]] = acc_after[j]
        drifting, n_before, n_after = f"w{j}", c, len(mine) - c
        change = (item[mine[c - 1]] + item[mine[c]]) / 2.0
    right = rng.random(len(item)) < right_p
    wrong = (truth[item] + rng.integers(1, n_classes, len(item))) % n_classes
    label = np.where(right, truth[item], wrong)
    t = item.astype(float)
    span = float(n_items - 1)
    if timestamps:
        stamps = START + (item * STEP_SECONDS).astype("timedelta64[s]")
        time: object = pd.Series(np.datetime_as_string(stamps, unit="s")).to_numpy()
        change = float(START.astype(np.int64) + change * STEP_SECONDS) if drift else np.nan
        span *= STEP_SECONDS
    else:
        time = t.astype(np.int64)
    ids = np.array([f"w{j}" for j in range(n_workers)], dtype=object)
    responses = pd.DataFrame(
        {"task": [f"t{i}" for i in item], "worker": ids[worker], "label": label.astype(str), "time": time}
    )
    return DriftSimulation(
        responses=responses,
        truth=pd.Series(truth.astype(str), index=pd.Index([f"t{i}" for i in range(n_items)], name="task")),
        accuracy_before=pd.Series(acc, index=pd.Index(ids, name="worker")),
        accuracy_after=pd.Series(acc_after, index=pd.Index(ids, name="worker")),
        drifting=drifting,
        change_time=float(change),
        n_before=n_before,
        n_after=n_after,
        span=span,
    )


__all__ = ["DriftSimulation", "drift_crowd"]
