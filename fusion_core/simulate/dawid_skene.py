"""Dawid–Skene crowd simulator: known truth and confusion matrices for tests, benchmarks and the demo."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError


@dataclass
class Simulation:
    """Simulated responses with the parameters that generated them.

    ``responses``: long format (task, worker, label, plus any extra columns); ``truth``: Series by task;
    ``confusion``: workers × true × reported (rows sum to 1), in ``workers``/``classes`` order;
    ``class_prior``: the generating prior.  What a generator knows besides (roles, cartel members, an item graph
    …) is a typed field of its own subclass (:class:`CrowdSimulation`, ``GraphCrowd``, ``SpectralCrowd`` …), never a
    string-keyed dictionary.
    """

    responses: pd.DataFrame
    truth: pd.Series
    confusion: np.ndarray | None
    class_prior: np.ndarray | None
    workers: pd.Index
    classes: pd.Index


@dataclass
class CrowdSimulation(Simulation):
    """A Dawid–Skene crowd: :class:`Simulation` plus each annotator's ``role`` ('honest', 'spammer',
    'adversarial'; heavy crowds: their own roles) and generating ``accuracy``, both Series by worker."""

    role: pd.Series
    accuracy: pd.Series


def confusion_from_accuracy(
    accuracy: np.ndarray, n_classes: int, rng: np.random.Generator, *, symmetric: bool
) -> np.ndarray:
    """Confusion matrices (true × reported) with the given diagonal; off-diagonal mass spread evenly
    (``symmetric``) or by a random Dirichlet draw per row."""
    w, k = len(accuracy), n_classes
    acc = np.asarray(accuracy, dtype=float)
    if symmetric:
        off = np.repeat(((1 - acc) / (k - 1))[:, None, None], k, 1).repeat(k, 2)
    else:
        shares = rng.dirichlet(np.ones(k - 1), size=(w, k))  # spread of errors over the other labels
        off = np.zeros((w, k, k))
        for t in range(k):  # k is small; the loop is over classes, not responses
            others = [c for c in range(k) if c != t]
            off[:, t, others] = (1 - acc)[:, None] * shares[:, t, :]
    conf = off
    idx = np.arange(k)
    conf[:, idx, idx] = acc[:, None]
    return conf


def sample_distinct(rng: np.random.Generator, n_rows: int, r: int, weight: np.ndarray) -> np.ndarray:
    """``n_rows × r`` indices into ``weight``, distinct within a row, drawn ∝ weight (successive draws
    without replacement).  Draw all, then redraw only the clashing cells: O(n_rows · r) work, where ranking
    random keys over every worker would be O(n_rows · n_workers)."""
    n = len(weight)
    if r > n:
        raise UserInputError(f"cannot draw {r} distinct workers out of {n}.")
    if r > n // 2:  # dense regime: rank keys (Efraimidis–Spirakis), cost is fine here
        keys = rng.random((n_rows, n)) ** (1.0 / weight)
        return np.argpartition(-keys, r - 1, axis=1)[:, :r]
    cdf = np.cumsum(weight / weight.sum())
    out = np.minimum(np.searchsorted(cdf, rng.random((n_rows, r))), n - 1)
    while True:
        srt = np.sort(out, axis=1)
        bad_rows = np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1))
        if len(bad_rows) == 0:
            return out
        sub = out[bad_rows]
        # within a clashing row, redraw every cell equal to an earlier cell of that row
        order = np.argsort(sub, axis=1, kind="stable")
        ss = np.take_along_axis(sub, order, axis=1)
        dup_sorted = np.zeros_like(ss, dtype=bool)
        dup_sorted[:, 1:] = ss[:, 1:] == ss[:, :-1]
        dup = np.zeros_like(dup_sorted)
        np.put_along_axis(dup, order, dup_sorted, axis=1)
        redraw = np.minimum(np.searchsorted(cdf, rng.random(int(dup.sum()))), n - 1)
        sub[dup] = redraw
        out[bad_rows] = sub


def dawid_skene(
    n_items: int = 1000,
    n_workers: int = 30,
    n_classes: int = 3,
    responses_per_item: int = 5,
    accuracy: tuple[float, float] = (0.6, 0.9),
    *,
    spammers: int = 0,
    adversarial: int = 0,
    class_prior: Sequence[float] | None = None,
    symmetric_errors: bool = False,
    worker_activity: str = "uniform",
    labels: Sequence[Any] | None = None,
    seed: int | None = 0,
) -> CrowdSimulation:
    """Simulate a Dawid–Skene crowd.

    Each item gets ``responses_per_item`` distinct workers (chosen uniformly, or with a heavy-tailed
    ``worker_activity='zipf'`` so most workers label few items, as in real crowds).  Honest workers have a
    diagonal accuracy ~ U(``accuracy``); ``spammers`` answer uniformly at random; ``adversarial`` workers
    report a fixed wrong permutation of the truth with probability 0.8.  Returns a :class:`CrowdSimulation`.
    """
    if n_classes < 2 or n_workers < 2 or n_items < 1:
        raise UserInputError("simulation needs at least 2 classes, 2 workers and 1 item.")
    if not 1 <= responses_per_item <= n_workers:
        raise UserInputError(f"responses_per_item must be between 1 and n_workers ({n_workers}).")
    if spammers + adversarial > n_workers:
        raise UserInputError("spammers + adversarial workers exceed n_workers.")
    rng = np.random.default_rng(seed)
    k = n_classes
    prior = np.full(k, 1.0 / k) if class_prior is None else np.asarray(class_prior, dtype=float)
    if prior.shape != (k,) or np.any(prior < 0) or not np.isclose(prior.sum(), 1.0):
        raise UserInputError(f"class_prior must be {k} non-negative numbers summing to 1.")
    truth = rng.choice(k, size=n_items, p=prior)

    acc = rng.uniform(accuracy[0], accuracy[1], size=n_workers)
    conf = confusion_from_accuracy(acc, k, rng, symmetric=symmetric_errors)
    role = np.array(["honest"] * n_workers, dtype=object)
    order = rng.permutation(n_workers)
    spam_idx, adv_idx = order[:spammers], order[spammers : spammers + adversarial]
    conf[spam_idx] = 1.0 / k
    role[spam_idx] = "spammer"
    if adversarial:
        perm = np.roll(np.arange(k), 1)
        adv = np.full((k, k), 0.2 / (k - 1))
        adv[np.arange(k), perm] = 0.8
        adv[np.arange(k), np.arange(k)] = 0.2 / (k - 1) if k > 2 else 0.2
        adv /= adv.sum(axis=1, keepdims=True)
        conf[adv_idx] = adv
        role[adv_idx] = "adversarial"

    weight: np.ndarray
    if worker_activity == "uniform":
        weight = np.ones(n_workers)
    elif worker_activity == "zipf":
        weight = 1.0 / np.arange(1, n_workers + 1) ** 0.8
        weight = weight[rng.permutation(n_workers)]
    else:
        raise UserInputError("worker_activity must be 'uniform' or 'zipf'.")
    chosen = sample_distinct(rng, n_items, responses_per_item, weight)
    item = np.repeat(np.arange(n_items), responses_per_item)
    worker = chosen.ravel()
    # inverse-CDF sampling of the reported label from the worker's confusion row for the true class
    cdf = np.cumsum(conf[worker, truth[item]], axis=1)
    u = rng.random(len(item))[:, None]
    reported = np.minimum((u > cdf).sum(axis=1), k - 1)

    label_values = pd.Index(list(labels) if labels is not None else list(range(k)))
    if len(label_values) != k:
        raise UserInputError(f"labels must have {k} values.")
    task_ids = pd.Index([f"t{i}" for i in range(n_items)])
    worker_ids = pd.Index([f"w{j}" for j in range(n_workers)])
    responses = pd.DataFrame(
        {"task": task_ids.take(item), "worker": worker_ids.take(worker), "label": label_values.take(reported)}
    )
    return CrowdSimulation(
        responses=responses,
        truth=pd.Series(label_values.take(truth), index=pd.Index(task_ids, name="task"), name="truth"),
        confusion=conf,
        class_prior=prior,
        workers=worker_ids,
        classes=label_values,
        role=pd.Series(role, index=worker_ids, name="role"),
        accuracy=pd.Series(acc, index=worker_ids),
    )
