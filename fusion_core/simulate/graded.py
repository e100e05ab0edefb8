"""Graded crowds with known truth (issue 21 item 5): graders who follow Dawid–Skene confusions over ordered levels,
ordered-probit graders with their own cut points, and sparse variants (many graders with a few responses, a few
heavy ones).  Levels are ``1 … n_levels`` (ordered)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError
from fusion_core.simulate.dawid_skene import Simulation, sample_distinct


@dataclass
class GradedCrowd(Simulation):
    """A simulated graded crowd: :class:`Simulation` (``confusion`` holds every grader's true confusion, workers ×
    true × reported, for both kinds) plus the ordered-probit parameters when ``kind == "probit"``: ``latent`` (each
    item's continuous truth, by task), ``bias`` and ``noise`` (by worker) and ``thresholds`` (workers × the K − 1
    cut points, in levels).  ``heavy`` marks the heavy graders of a sparse crowd."""

    kind: str = "confusion"
    latent: pd.Series | None = None
    bias: pd.Series | None = None
    noise: pd.Series | None = None
    thresholds: pd.DataFrame | None = None
    heavy: pd.Series | None = None


def _activity(n_workers: int, sparse: bool, n_heavy: int, heavy_share: float, rng: np.random.Generator) -> np.ndarray:
    """Relative activity of each grader: equal, or (sparse) ``n_heavy`` graders sharing ``heavy_share`` of the draws
    and the rest Pareto-distributed (most with a few responses)."""
    if not sparse:
        return np.ones(n_workers)
    if not 0 < n_heavy < n_workers or not 0.0 < heavy_share < 1.0:
        raise UserInputError("a sparse crowd needs 0 < n_heavy < n_workers and 0 < heavy_share < 1.")
    light = rng.pareto(1.5, size=n_workers - n_heavy) + 0.05
    weight = np.concatenate([np.full(n_heavy, heavy_share / n_heavy), (1.0 - heavy_share) * light / light.sum()])
    return weight


def _design(
    n_items: int, n_workers: int, n_levels: int, responses_per_item: int, class_prior: Sequence[float] | None
) -> np.ndarray:
    if n_levels < 2 or n_workers < 2 or n_items < 1:
        raise UserInputError("simulation needs at least 2 levels, 2 graders and 1 item.")
    if not 1 <= responses_per_item <= n_workers:
        raise UserInputError(f"responses_per_item must be between 1 and n_workers ({n_workers}).")
    prior = np.full(n_levels, 1.0 / n_levels) if class_prior is None else np.asarray(class_prior, dtype=float)
    if prior.shape != (n_levels,) or np.any(prior < 0) or not np.isclose(prior.sum(), 1.0):
        raise UserInputError(f"class_prior must be {n_levels} non-negative numbers summing to 1.")
    return prior


def _crowd(
    truth: np.ndarray,
    reported_of: np.ndarray,
    item: np.ndarray,
    worker: np.ndarray,
    *,
    n_workers: int,
    n_levels: int,
    confusion: np.ndarray,
    prior: np.ndarray,
    heavy: np.ndarray,
) -> GradedCrowd:
    """The long table and the typed result shared by both kinds."""
    levels = pd.Index(list(range(1, n_levels + 1)))
    tasks = pd.Index([f"t{i}" for i in range(len(truth))])
    workers = pd.Index([f"g{j}" for j in range(n_workers)])
    return GradedCrowd(
        responses=pd.DataFrame(
            {"task": tasks.take(item), "worker": workers.take(worker), "label": levels.take(reported_of)}
        ),
        truth=pd.Series(levels.take(truth), index=pd.Index(tasks, name="task"), name="truth"),
        confusion=confusion,
        class_prior=prior,
        workers=workers,
        classes=levels,
        heavy=pd.Series(heavy, index=workers, name="heavy"),
    )


def confusion_graders(
    n_items: int = 600,
    n_workers: int = 25,
    n_levels: int = 5,
    responses_per_item: int = 5,
    *,
    accuracy: tuple[float, float] = (0.45, 0.85),
    reach: tuple[float, float] = (0.3, 1.5),
    sparse: bool = False,
    n_heavy: int = 5,
    heavy_share: float = 0.5,
    class_prior: Sequence[float] | None = None,
    seed: int | None = 0,
) -> GradedCrowd:
    """Graders with arbitrary Dawid–Skene confusion rows over ordered levels, mostly near the diagonal: grader j
    reports the true level with probability a_j ~ U(``accuracy``); the rest of row k is a Dirichlet draw whose mean
    falls off as ``exp(−|l − k| / r_j)`` (r_j ~ U(``reach``)), so errors go mostly, not only, to neighbouring
    levels, and each row is its own (no shared scale, no per-grader shift).  ``sparse``: many graders with a few
    responses and ``n_heavy`` graders giving ``heavy_share`` of them.

    Examples
    --------
    >>> sim = confusion_graders(n_items=100, n_workers=10, seed=0)
    >>> len(sim.responses), sim.confusion.shape, sim.kind
    (500, (10, 5, 5), 'confusion')
    """
    prior = _design(n_items, n_workers, n_levels, responses_per_item, class_prior)
    rng = np.random.default_rng(seed)
    k = n_levels
    acc = rng.uniform(*accuracy, size=n_workers)
    r = rng.uniform(*reach, size=n_workers)
    dist = np.abs(np.arange(k)[:, None] - np.arange(k)[None, :])
    mean = np.exp(-dist[None, :, :] / r[:, None, None]) * (dist[None] > 0)
    mean /= mean.sum(axis=2, keepdims=True)
    off = rng.gamma(4.0 * mean + 1e-3)  # Dirichlet(4 · mean) per row, drawn as normalised gammas
    off *= (dist[None] > 0) / off.sum(axis=2, keepdims=True, where=dist[None] > 0)
    conf = (1.0 - acc)[:, None, None] * off + acc[:, None, None] * (dist[None] == 0)
    weight = _activity(n_workers, sparse, n_heavy, heavy_share, rng)
    truth = rng.choice(k, size=n_items, p=prior)
    item = np.repeat(np.arange(n_items), responses_per_item)
    worker = sample_distinct(rng, n_items, responses_per_item, weight).ravel()
    cdf = np.cumsum(conf[worker, truth[item]], axis=1)
    reported = np.minimum((rng.random(len(item))[:, None] > cdf).sum(axis=1), k - 1)
    heavy = np.arange(n_workers) < (n_heavy if sparse else 0)
    return _crowd(
        truth, reported, item, worker, n_workers=n_workers, n_levels=k, confusion=conf, prior=prior, heavy=heavy
    )


def probit_graders(
    n_items: int = 600,
    n_workers: int = 25,
    n_levels: int = 5,
    responses_per_item: int = 5,
    *,
    bias_sd: float = 0.4,
    noise: tuple[float, float] = (0.3, 0.9),
    threshold_jitter: float = 0.3,
    within_level: float = 0.3,
    sparse: bool = False,
    n_heavy: int = 5,
    heavy_share: float = 0.5,
    class_prior: Sequence[float] | None = None,
    seed: int | None = 0,
) -> GradedCrowd:
    """Ordered-probit graders with their own cut points: item i has a true level k_i (prior ``class_prior``) and a
    continuous truth ``u_i = k_i + U(−within_level, within_level)``; grader j perceives ``u_i + b_j + s_j ε``
    (b_j ~ N(0, ``bias_sd``²), s_j ~ U(``noise``), ε standard normal) and reports level l when the perception falls
    between their own cut points ``τ_jl = l − ½ + δ_jl`` (δ ~ N(0, ``threshold_jitter``²), sorted).  ``confusion``
    holds the implied confusion matrices (averaged over the within-level spread).  ``sparse`` as
    :func:`confusion_graders`.

    Examples
    --------
    >>> sim = probit_graders(n_items=100, n_workers=10, seed=0)
    >>> len(sim.responses), sim.thresholds.shape, sim.kind
    (500, (10, 4), 'probit')
    """
    prior = _design(n_items, n_workers, n_levels, responses_per_item, class_prior)
    if not 0.0 <= within_level <= 0.5:
        raise UserInputError("within_level must be between 0 and 0.5 (half a level).")
    rng = np.random.default_rng(seed)
    k = n_levels
    bias = bias_sd * rng.standard_normal(n_workers)
    s = rng.uniform(*noise, size=n_workers)
    cuts = np.sort(np.arange(1, k) - 0.5 + threshold_jitter * rng.standard_normal((n_workers, k - 1)), axis=1)
    weight = _activity(n_workers, sparse, n_heavy, heavy_share, rng)
    truth = rng.choice(k, size=n_items, p=prior)
    latent = truth + rng.uniform(-within_level, within_level, size=n_items)
    item = np.repeat(np.arange(n_items), responses_per_item)
    worker = sample_distinct(rng, n_items, responses_per_item, weight).ravel()
    perceived = latent[item] + bias[worker] + s[worker] * rng.standard_normal(len(item))
    reported = (perceived[:, None] > cuts[worker]).sum(axis=1)
    from scipy.special import ndtr  # lazy: only the implied confusion needs it

    grid = np.linspace(-within_level, within_level, 21)  # the within-level spread, by quadrature
    ends = np.concatenate([np.full((n_workers, 1), -np.inf), cuts, np.full((n_workers, 1), np.inf)], axis=1)
    pos = np.arange(k)[:, None] + grid[None, :]  # K × grid
    z = (ends[:, None, None, :] - pos[None, :, :, None] - bias[:, None, None, None]) / s[:, None, None, None]
    conf = np.diff(ndtr(z), axis=3).mean(axis=2)
    heavy = np.arange(n_workers) < (n_heavy if sparse else 0)
    sim = _crowd(
        truth, reported, item, worker, n_workers=n_workers, n_levels=k, confusion=conf, prior=prior, heavy=heavy
    )
    sim.kind = "probit"
    sim.latent = pd.Series(latent + 1.0, index=sim.truth.index, name="latent")  # on the 1 … K scale
    sim.bias = pd.Series(bias, index=sim.workers, name="bias")
    sim.noise = pd.Series(s, index=sim.workers, name="noise")
    sim.thresholds = pd.DataFrame(cuts + 1.0, index=sim.workers, columns=[f"{l}|{l + 1}" for l in range(1, k)])
    return sim
