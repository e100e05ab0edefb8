"""Rating simulators with known truth: ordinal crowds (lenient, harsh, noisy and reliable annotators on a
1…K scale) and numeric ratings (per-annotator bias and noise, optional gross outliers)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError
from fusion_core.simulate.dawid_skene import Simulation, sample_distinct


@dataclass
class RatingCrowd(Simulation):
    """Simulated ratings: :class:`Simulation` plus each annotator's ``bias`` and ``noise`` (Series by worker), their
    ``role`` (Series by worker; None for :func:`numeric_ratings`) and, with gross outliers, ``outlier`` (bool per
    response)."""

    bias: pd.Series
    noise: pd.Series
    role: pd.Series | None = None
    outlier: np.ndarray | None = None


#: (bias range, noise range) in levels for each ordinal role
ORDINAL_ROLES: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    "reliable": ((-0.15, 0.15), (0.25, 0.45)),
    "lenient": ((0.6, 1.0), (0.25, 0.45)),
    "harsh": ((-1.0, -0.6), (0.25, 0.45)),
    "noisy": ((-0.15, 0.15), (1.0, 1.5)),
    "near chance": ((-0.15, 0.15), (3.5, 5.0)),
}


def _roles(n_workers: int, counts: dict[str, int], rng: np.random.Generator) -> np.ndarray:
    if sum(counts.values()) > n_workers:
        raise UserInputError(f"the role counts {counts} add up to more than n_workers ({n_workers}).")
    role = np.array(["reliable"] * n_workers, dtype=object)
    order = rng.permutation(n_workers)
    start = 0
    for name, n in counts.items():
        role[order[start : start + n]] = name
        start += n
    return role


def _check_design(n_workers: int, responses_per_item: int) -> None:
    if not 1 <= responses_per_item <= n_workers:
        raise UserInputError(f"responses_per_item must be between 1 and n_workers ({n_workers}).")


def ordinal_crowd(
    n_items: int = 500,
    n_workers: int = 20,
    n_levels: int = 5,
    responses_per_item: int = 5,
    *,
    n_lenient: int = 5,
    n_harsh: int = 5,
    n_noisy: int = 4,
    n_chance: int = 0,
    class_prior: Sequence[float] | None = None,
    labels: Sequence[Any] | None = None,
    seed: int | None = 0,
    workers_seed: int | None = None,
) -> RatingCrowd:
    """An ordinal crowd under the ordered-probit model of :mod:`fusion_core.methods.ordinal` (thresholds at the
    midpoints l − ½): each item's true level k, each annotator reports the level whose interval holds
    ``k + b_j + s_j ε``.  Roles (:data:`ORDINAL_ROLES`): lenient (bias +0.6…+1), harsh (−1…−0.6), noisy (noise
    1…1.5 levels), near chance (noise 3.5…5 levels: the report says little about the level), the rest reliable.  Labels are ``1 … n_levels`` unless given.  ``workers_seed`` (default
    ``seed``) draws the annotators' roles and parameters, ``seed`` the items and responses, so simulation studies
    can keep one crowd fixed.  Typed fields (:class:`RatingCrowd`): ``role``, ``bias``, ``noise`` (Series by worker).

    Examples
    --------
    >>> sim = ordinal_crowd(n_items=100, n_workers=10, n_lenient=2, n_harsh=2, n_noisy=2, seed=0)
    >>> len(sim.responses), sorted(sim.responses["label"].unique().tolist())
    (500, [1, 2, 3, 4, 5])
    >>> dict(sorted(sim.role.value_counts().items()))
    {'harsh': 2, 'lenient': 2, 'noisy': 2, 'reliable': 4}
    """
    if n_levels < 2 or n_workers < 2 or n_items < 1:
        raise UserInputError("simulation needs at least 2 levels, 2 workers and 1 item.")
    _check_design(n_workers, responses_per_item)
    rng = np.random.default_rng(seed)
    wrng = rng if workers_seed is None else np.random.default_rng(workers_seed)
    k = n_levels
    prior = np.full(k, 1.0 / k) if class_prior is None else np.asarray(class_prior, dtype=float)
    if prior.shape != (k,) or np.any(prior < 0) or not np.isclose(prior.sum(), 1.0):
        raise UserInputError(f"class_prior must be {k} non-negative numbers summing to 1.")
    counts = {"lenient": n_lenient, "harsh": n_harsh, "noisy": n_noisy, "near chance": n_chance}
    role = _roles(n_workers, counts, wrng)
    lo_b = np.array([ORDINAL_ROLES[r][0][0] for r in role])
    hi_b = np.array([ORDINAL_ROLES[r][0][1] for r in role])
    lo_s = np.array([ORDINAL_ROLES[r][1][0] for r in role])
    hi_s = np.array([ORDINAL_ROLES[r][1][1] for r in role])
    bias = wrng.uniform(lo_b, hi_b)
    noise = wrng.uniform(lo_s, hi_s)
    truth = rng.choice(k, size=n_items, p=prior)
    chosen = sample_distinct(rng, n_items, responses_per_item, np.ones(n_workers))
    item = np.repeat(np.arange(n_items), responses_per_item)
    worker = chosen.ravel()
    perceived = truth[item] + bias[worker] + noise[worker] * rng.standard_normal(len(item))
    reported = np.searchsorted(np.arange(1, k) - 0.5, perceived)
    values = pd.Index(list(labels) if labels is not None else list(range(1, k + 1)))
    if len(values) != k:
        raise UserInputError(f"labels must have {k} values.")
    task_ids = pd.Index([f"t{i}" for i in range(n_items)])
    worker_ids = pd.Index([f"w{j}" for j in range(n_workers)])
    return RatingCrowd(
        responses=pd.DataFrame(
            {"task": task_ids.take(item), "worker": worker_ids.take(worker), "label": values.take(reported)}
        ),
        truth=pd.Series(values.take(truth), index=pd.Index(task_ids, name="task"), name="truth"),
        confusion=None,
        class_prior=prior,
        workers=worker_ids,
        classes=values,
        role=pd.Series(role, index=worker_ids, name="role"),
        bias=pd.Series(bias, index=worker_ids, name="bias"),
        noise=pd.Series(noise, index=worker_ids, name="noise"),
    )


def numeric_ratings(
    n_items: int = 400,
    n_workers: int = 15,
    responses_per_item: int = 5,
    *,
    truth_mean: float = 50.0,
    truth_sd: float = 10.0,
    bias_sd: float = 4.0,
    noise_range: tuple[float, float] = (1.0, 8.0),
    outlier_rate: float = 0.0,
    seed: int | None = 0,
    workers_seed: int | None = None,
) -> RatingCrowd:
    """Numeric ratings ``x = μ_i + b_j + ε``, ε ~ N(0, σ_j²): true values μ_i ~ N(truth_mean, truth_sd²), biases
    b_j ~ N(0, bias_sd²) re-centred so that the average response is unbiased (the identifiability assumption of
    :class:`~fusion_core.methods.numeric.NumericTruth`), noise σ_j ~ U(noise_range).  With ``outlier_rate`` > 0
    that share of responses is replaced by a gross error drawn uniformly over truth_mean ± 5·truth_sd.
    ``responses`` has columns task, worker, value; ``truth`` is a float Series by task; typed fields: ``bias``,
    ``noise`` (Series by worker) and ``outlier`` (bool per response row).  ``workers_seed`` (default ``seed``)
    draws the annotators' biases and noise levels, ``seed`` everything else.

    Examples
    --------
    >>> sim = numeric_ratings(n_items=50, n_workers=6, responses_per_item=3, seed=0)
    >>> list(sim.responses.columns), len(sim.responses)
    (['task', 'worker', 'value'], 150)
    """
    if n_workers < 2 or n_items < 1:
        raise UserInputError("simulation needs at least 2 workers and 1 item.")
    _check_design(n_workers, responses_per_item)
    if not 0.0 <= outlier_rate < 1.0:
        raise UserInputError("outlier_rate must be at least 0 and below 1.")
    rng = np.random.default_rng(seed)
    wrng = rng if workers_seed is None else np.random.default_rng(workers_seed)
    bias = bias_sd * wrng.standard_normal(n_workers)
    noise = wrng.uniform(noise_range[0], noise_range[1], size=n_workers)
    return _numeric_simulation(
        rng,
        n_items,
        responses_per_item,
        bias=bias,
        noise=noise,
        truth_mean=truth_mean,
        truth_sd=truth_sd,
        outlier_rate=outlier_rate,
    )


def _numeric_simulation(
    rng: np.random.Generator,
    n_items: int,
    responses_per_item: int,
    *,
    bias: np.ndarray,
    noise: np.ndarray,
    truth_mean: float,
    truth_sd: float,
    outlier_rate: float | None = None,
    role: np.ndarray | None = None,
) -> RatingCrowd:
    """Draw true values and responses ``x = μ_i + b_j + σ_j ε`` for annotators with these biases (re-centred in
    place so that the average response is unbiased) and noise levels; ``outlier_rate`` (None: no outlier draw at
    all) replaces that share of responses by gross errors over truth_mean ± 5·truth_sd."""
    n_workers = len(bias)
    mu = truth_mean + truth_sd * rng.standard_normal(n_items)
    chosen = sample_distinct(rng, n_items, responses_per_item, np.ones(n_workers))
    item = np.repeat(np.arange(n_items), responses_per_item)
    worker = chosen.ravel()
    bias -= np.bincount(worker, minlength=n_workers) @ bias / len(worker)  # the average response is unbiased
    value = mu[item] + bias[worker] + noise[worker] * rng.standard_normal(len(item))
    task_ids = pd.Index([f"t{i}" for i in range(n_items)])
    worker_ids = pd.Index([f"w{j}" for j in range(n_workers)])
    outlier = None
    if outlier_rate is not None:
        outlier = rng.random(len(item)) < outlier_rate
        value[outlier] = rng.uniform(truth_mean - 5 * truth_sd, truth_mean + 5 * truth_sd, size=int(outlier.sum()))
    return RatingCrowd(
        responses=pd.DataFrame({"task": task_ids.take(item), "worker": worker_ids.take(worker), "value": value}),
        truth=pd.Series(mu, index=pd.Index(task_ids, name="task"), name="truth"),
        confusion=None,
        class_prior=None,
        workers=worker_ids,
        classes=pd.Index([]),
        bias=pd.Series(bias, index=worker_ids, name="bias"),
        noise=pd.Series(noise, index=worker_ids, name="noise"),
        role=None if role is None else pd.Series(role, index=worker_ids, name="role"),
        outlier=outlier,
    )


#: (bias range, noise range) in units of the true values' sd for each numeric role
NUMERIC_ROLES: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    "reliable": ((-0.05, 0.05), (0.1, 0.3)),
    "lenient": ((0.5, 0.8), (0.1, 0.3)),
    "harsh": ((-0.8, -0.5), (0.1, 0.3)),
    "noisy": ((-0.05, 0.05), (0.9, 1.3)),
    "near chance": ((-0.05, 0.05), (3.0, 4.0)),
}


def numeric_crowd(
    n_items: int = 400,
    n_workers: int = 15,
    responses_per_item: int = 5,
    *,
    n_lenient: int = 3,
    n_harsh: int = 3,
    n_noisy: int = 2,
    n_chance: int = 0,
    truth_mean: float = 50.0,
    truth_sd: float = 10.0,
    seed: int | None = 0,
    workers_seed: int | None = None,
) -> RatingCrowd:
    """Numeric ratings ``x = μ_i + b_j + ε`` (μ_i ~ N(truth_mean, truth_sd²), ε ~ N(0, s_j²)) from a crowd with
    known roles (:data:`NUMERIC_ROLES`, in units of truth_sd): lenient (bias +0.5…+0.8 sd), harsh, noisy (noise
    0.9…1.3 sd), near chance (3…4 sd), the rest reliable.  Biases are re-centred so that the average response is
    unbiased, as :func:`numeric_ratings`.  Typed fields: ``role``, ``bias``, ``noise`` (Series by worker).

    Examples
    --------
    >>> sim = numeric_crowd(n_items=50, n_workers=8, n_lenient=1, n_harsh=1, n_noisy=1, seed=0)
    >>> len(sim.responses), dict(sorted(sim.role.value_counts().items()))
    (250, {'harsh': 1, 'lenient': 1, 'noisy': 1, 'reliable': 5})
    """
    if n_workers < 2 or n_items < 1 or truth_sd <= 0:
        raise UserInputError("simulation needs at least 2 workers, 1 item and truth_sd > 0.")
    _check_design(n_workers, responses_per_item)
    rng = np.random.default_rng(seed)
    wrng = rng if workers_seed is None else np.random.default_rng(workers_seed)
    counts = {"lenient": n_lenient, "harsh": n_harsh, "noisy": n_noisy, "near chance": n_chance}
    role = _roles(n_workers, counts, wrng)
    ranges = np.array([[*NUMERIC_ROLES[r][0], *NUMERIC_ROLES[r][1]] for r in role])
    bias = truth_sd * wrng.uniform(ranges[:, 0], ranges[:, 1])
    noise = truth_sd * wrng.uniform(ranges[:, 2], ranges[:, 3])
    return _numeric_simulation(
        rng, n_items, responses_per_item, bias=bias, noise=noise, truth_mean=truth_mean, truth_sd=truth_sd, role=role
    )
