"""Simulators for the peer models: MACE spammer crowds (Hovy et al. 2013) and GLAD crowds with item difficulty
(Whitehill et al. 2009).  Known parameters come back as typed fields (:class:`MaceCrowd`, :class:`GladCrowd`) for
the tests' oracles."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError
from fusion_core.simulate.dawid_skene import Simulation, sample_distinct


@dataclass
class MaceCrowd(Simulation):
    """A MACE crowd: :class:`Simulation` plus ``spammer`` (bool Series by worker), ``spam_probability`` θ_j
    (Series by worker) and ``strategy`` ξ (workers × classes)."""

    spammer: pd.Series
    spam_probability: pd.Series
    strategy: np.ndarray


@dataclass
class GladCrowd(Simulation):
    """A GLAD crowd: :class:`Simulation` plus ``ability`` α_j (Series by worker) and ``difficulty`` 1/β_i (Series by
    task)."""

    ability: pd.Series
    difficulty: pd.Series


def _frame(
    item: np.ndarray, worker: np.ndarray, label: np.ndarray, truth: np.ndarray, *, n_workers: int, k: int
) -> tuple[pd.DataFrame, pd.Series, pd.Index, pd.Index]:
    task_ids = pd.Index([f"t{i}" for i in range(len(truth))])
    worker_ids = pd.Index([f"w{j}" for j in range(n_workers)])
    df = pd.DataFrame({"task": task_ids.take(item), "worker": worker_ids.take(worker), "label": label})
    return df, pd.Series(truth, index=pd.Index(task_ids, name="task"), name="truth"), worker_ids, pd.Index(range(k))


def _assign(
    rng: np.random.Generator, n_items: int, n_workers: int, per_item: int, activity: str
) -> tuple[np.ndarray, np.ndarray]:
    if not 1 <= per_item <= n_workers:
        raise UserInputError(f"responses_per_item must be between 1 and n_workers ({n_workers}).")
    weight: np.ndarray
    if activity == "uniform":
        weight = np.ones(n_workers)
    elif activity == "zipf":
        weight = (1.0 / np.arange(1, n_workers + 1) ** 0.8)[rng.permutation(n_workers)]
    else:
        raise UserInputError("worker_activity must be 'uniform' or 'zipf'.")
    chosen = sample_distinct(rng, n_items, per_item, weight)
    return np.repeat(np.arange(n_items), per_item), chosen.ravel()


def mace_crowd(
    n_items: int = 500,
    n_workers: int = 20,
    n_spammers: int = 5,
    n_classes: int = 3,
    responses_per_item: int = 5,
    *,
    competent_spam: tuple[float, float] = (0.0, 0.3),
    spammer_spam: tuple[float, float] = (0.85, 1.0),
    class_prior: Sequence[float] | None = None,
    worker_activity: str = "uniform",
    seed: int | None = 0,
) -> MaceCrowd:
    """A MACE crowd: worker j spams with probability θ_j (U(``competent_spam``) for honest workers,
    U(``spammer_spam``) for the ``n_spammers`` spammers) and then answers from a personal strategy ξ_j ~
    Dirichlet(1); otherwise it gives the true label.  Returns a :class:`MaceCrowd`."""
    if n_spammers > n_workers or n_classes < 2:
        raise UserInputError("n_spammers must not exceed n_workers, and n_classes must be at least 2.")
    rng = np.random.default_rng(seed)
    k = n_classes
    prior = np.full(k, 1.0 / k) if class_prior is None else np.asarray(class_prior, dtype=float)
    truth = rng.choice(k, size=n_items, p=prior)
    spammer = np.zeros(n_workers, bool)
    spammer[rng.permutation(n_workers)[:n_spammers]] = True
    theta = np.where(spammer, rng.uniform(*spammer_spam, n_workers), rng.uniform(*competent_spam, n_workers))
    strategy = rng.dirichlet(np.ones(k), size=n_workers)
    item, worker = _assign(rng, n_items, n_workers, responses_per_item, worker_activity)
    spams = rng.random(len(item)) < theta[worker]
    cdf = np.cumsum(strategy[worker], axis=1)
    drawn = np.minimum((rng.random(len(item))[:, None] > cdf).sum(axis=1), k - 1)
    label = np.where(spams, drawn, truth[item])
    df, truth_s, workers, classes = _frame(item, worker, label, truth, n_workers=n_workers, k=k)
    conf = theta[:, None, None] * np.repeat(strategy[:, None, :], k, axis=1)
    conf[:, np.arange(k), np.arange(k)] += (1 - theta)[:, None]
    return MaceCrowd(
        responses=df,
        truth=truth_s,
        confusion=conf,
        class_prior=prior,
        workers=workers,
        classes=classes,
        spammer=pd.Series(spammer, index=workers, name="spammer"),
        spam_probability=pd.Series(theta, index=workers, name="spam_probability"),
        strategy=strategy,
    )


def glad_crowd(
    n_items: int = 500,
    n_workers: int = 20,
    n_classes: int = 2,
    responses_per_item: int = 8,
    *,
    ability: tuple[float, float] = (1.5, 1.0),
    log_inverse_difficulty: tuple[float, float] = (0.5, 1.0),
    class_prior: Sequence[float] | None = None,
    worker_activity: str = "uniform",
    seed: int | None = 0,
) -> GladCrowd:
    """A GLAD crowd (Whitehill et al. 2009, eq. 1): ``P(correct) = σ(α_j β_i)`` with ability α_j ~
    N(``ability``) and β_i = exp(b_i), b_i ~ N(``log_inverse_difficulty``); wrong answers are uniform over the
    other labels.  Returns a :class:`GladCrowd`."""
    if n_classes < 2:
        raise UserInputError("n_classes must be at least 2.")
    rng = np.random.default_rng(seed)
    k = n_classes
    prior = np.full(k, 1.0 / k) if class_prior is None else np.asarray(class_prior, dtype=float)
    truth = rng.choice(k, size=n_items, p=prior)
    alpha = rng.normal(ability[0], ability[1], n_workers)
    beta = np.exp(rng.normal(log_inverse_difficulty[0], log_inverse_difficulty[1], n_items))
    item, worker = _assign(rng, n_items, n_workers, responses_per_item, worker_activity)
    p_correct = 1.0 / (1.0 + np.exp(-alpha[worker] * beta[item]))
    wrong = (truth[item] + rng.integers(1, k, len(item))) % k  # uniform over the other labels
    label = np.where(rng.random(len(item)) < p_correct, truth[item], wrong)
    df, truth_s, workers, classes = _frame(item, worker, label, truth, n_workers=n_workers, k=k)
    return GladCrowd(
        responses=df,
        truth=truth_s,
        confusion=None,
        class_prior=prior,
        workers=workers,
        classes=classes,
        ability=pd.Series(alpha, index=workers, name="ability"),
        difficulty=pd.Series(1.0 / beta, index=truth_s.index, name="difficulty"),
    )
