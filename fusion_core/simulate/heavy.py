"""Sparse crowds dominated by a few heavy annotators (issue 21's failure shape, described as a principle).

Most annotators give a handful of responses; a few *heavy* annotators give most of them.  Some heavy annotators
are worse than the majority-class rate because their errors are one-sided (they over-report a minority class) and
shared: on a subset of confusing items they make the same mistake.  A full confusion model explains such
annotators' label preferences by moving its latent classes towards them, so it predicts their responses well
while its labels drift from the truth; robust models (one coin, votes) do not.

``heavy_crowd`` draws one such crowd; :data:`HEAVY_VARIANTS` names the variants the selection study and the tests
use (class prior 78/22, 60/40 and 90/10; three classes; heavy annotators all honest; biased heavy annotators near
chance).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError
from fusion_core.simulate.dawid_skene import CrowdSimulation, confusion_from_accuracy


@dataclass(frozen=True)
class HeavyShape:
    """The parameters of :func:`heavy_crowd` (defaults: the entity-linking shape of issue 21)."""

    n_items: int = 2000
    n_light: int = 80
    n_heavy: int = 5
    n_biased: int = 2
    heavy_share: float = 0.7
    responses_per_item: float = 5.0
    class_prior: tuple[float, ...] = (0.78, 0.22)
    biased_accuracy: tuple[float, float] = (0.66, 0.72)
    honest_accuracy: tuple[float, float] = (0.74, 0.84)
    light_accuracy: tuple[float, float] = (0.65, 0.95)
    light_spammers: float = 0.1
    confusing_share: float = 0.3
    casual_share: float = 0.65


@dataclass
class HeavyCrowd(CrowdSimulation):
    """A heavy-annotator crowd: :class:`CrowdSimulation` (``role``: heavy honest / heavy biased / light / light
    spammer) plus ``confusing``, a bool Series by task marking the items biased annotators get wrong together."""

    confusing: pd.Series


def heavy_crowd(shape: HeavyShape | None = None, *, seed: int | None = 0) -> HeavyCrowd:
    """One crowd of ``shape`` (see the module docstring).

    Each heavy annotator labels each item with probability ``heavy_share · r / n_heavy`` (r responses per item);
    the rest of the responses (``(1 − heavy_share) · r`` per item on average, at least one) come from light
    annotators: regular ones and casual ones (a share ``casual_share`` of them, each about a thirtieth as active),
    so that most annotators give fewer than 10 responses.  Biased heavy
    annotators report the minority class (the last label) for items of the other classes when the item is
    *confusing* (a share ``confusing_share`` of the items, the same for all of them: shared errors), and with a
    small rate otherwise; their overall accuracy is drawn from ``biased_accuracy``.  Returns a :class:`HeavyCrowd`:
    ``role`` (heavy honest / heavy biased / light / light spammer by worker), ``accuracy`` (by worker),
    ``confusing`` (by task).
    """
    s = shape or HeavyShape()
    prior = np.asarray(s.class_prior, dtype=float)
    k = len(prior)
    if k < 2 or not np.isclose(prior.sum(), 1.0) or np.any(prior <= 0):
        raise UserInputError("class_prior must have at least two positive shares summing to 1.")
    if not 0 <= s.n_biased <= s.n_heavy or s.n_light < 2 or not 0 < s.heavy_share < 1:
        raise UserInputError("need 0 ≤ n_biased ≤ n_heavy, at least 2 light annotators and 0 < heavy_share < 1.")
    rng = np.random.default_rng(seed)
    n = s.n_items
    truth = rng.choice(k, size=n, p=prior)
    minority = k - 1
    confusing = rng.random(n) < s.confusing_share

    # heavy responses: each heavy annotator covers each item with the same probability
    p_heavy = min(s.heavy_share * s.responses_per_item / s.n_heavy, 1.0)
    cover = rng.random((n, s.n_heavy)) < p_heavy
    h_item, h_worker = np.nonzero(cover)
    acc_heavy = rng.uniform(*s.honest_accuracy, size=s.n_heavy)
    biased = np.zeros(s.n_heavy, dtype=bool)
    biased[rng.permutation(s.n_heavy)[: s.n_biased]] = True
    acc_heavy[biased] = rng.uniform(*s.biased_accuracy, size=int(biased.sum()))
    conf_heavy = confusion_from_accuracy(acc_heavy, k, rng, symmetric=True)
    h_label = _draw(rng, conf_heavy[h_worker, truth[h_item]])
    # biased: on confusing non-minority items say the minority class; elsewhere err at the rate that gives their
    # overall accuracy (errors again towards the minority class)
    not_min = truth != minority
    share_conf = float((confusing & not_min).mean())
    for j in np.flatnonzero(biased):  # a handful of annotators, not a loop over responses
        rows = h_worker == j
        items = h_item[rows]
        target_err = 1.0 - acc_heavy[j]
        p_conf = min(target_err / max(share_conf, 1e-9), 1.0)
        rest_rate = max(target_err - share_conf, 0.0) / max(1.0 - share_conf, 1e-9)
        u = rng.random(len(items))
        err = (confusing[items] & not_min[items] & (u < p_conf)) | (rng.random(len(items)) < rest_rate)
        lab = truth[items].copy()
        lab[err & not_min[items]] = minority
        wrong_min = err & ~not_min[items]
        lab[wrong_min] = rng.integers(0, k - 1, size=int(wrong_min.sum()))
        h_label[rows] = lab
        acc_heavy[j] = float((lab == truth[items]).mean())

    # light responses: a few regular annotators and many casual ones (a thirtieth of a regular one's activity, so
    # about 60 % of all annotators give fewer than 10 responses), at least one light response per item
    mean_light = max((1.0 - s.heavy_share) * s.responses_per_item, 1.0)
    n_light_resp = np.maximum(rng.poisson(mean_light - 1.0, size=n) + 1, 1)
    l_item = np.repeat(np.arange(n), n_light_resp)
    casual = rng.random(s.n_light) < s.casual_share
    weight = np.where(casual, 1.0 / 30.0, 1.0) * rng.lognormal(0.0, 0.5, size=s.n_light)
    l_worker = _distinct_per_item(rng, l_item, weight)
    acc_light = rng.uniform(*s.light_accuracy, size=s.n_light)
    conf_light = confusion_from_accuracy(acc_light, k, rng, symmetric=False)
    spam = rng.random(s.n_light) < s.light_spammers
    conf_light[spam] = 1.0 / k
    acc_light[spam] = 1.0 / k
    l_label = _draw(rng, conf_light[l_worker, truth[l_item]])

    item = np.concatenate([h_item, l_item])
    worker = np.concatenate([h_worker, s.n_heavy + l_worker])
    label = np.concatenate([h_label, l_label])
    order = np.lexsort((worker, item))
    task_ids = pd.Index([f"t{i}" for i in range(n)])
    worker_ids = pd.Index([f"h{j}" for j in range(s.n_heavy)] + [f"w{j}" for j in range(s.n_light)])
    classes = pd.Index(list(range(k)))
    role = np.array(
        [("heavy biased" if b else "heavy honest") for b in biased]
        + [("light spammer" if sp else "light") for sp in spam],
        dtype=object,
    )
    responses = pd.DataFrame(
        {"task": task_ids.take(item[order]), "worker": worker_ids.take(worker[order]), "label": label[order]}
    )
    conf = np.concatenate([conf_heavy, conf_light])
    return HeavyCrowd(
        responses=responses,
        truth=pd.Series(truth, index=pd.Index(task_ids, name="task"), name="truth"),
        confusion=conf,
        class_prior=prior,
        workers=worker_ids,
        classes=classes,
        role=pd.Series(role, index=worker_ids, name="role"),
        accuracy=pd.Series(np.concatenate([acc_heavy, acc_light]), index=worker_ids, name="accuracy"),
        confusing=pd.Series(confusing, index=task_ids, name="confusing"),
    )


def _draw(rng: np.random.Generator, rows: np.ndarray) -> np.ndarray:
    """One label per row of probabilities (inverse CDF)."""
    cdf = np.cumsum(rows, axis=1)
    return np.minimum((rng.random(len(rows))[:, None] > cdf).sum(axis=1), rows.shape[1] - 1)


def _distinct_per_item(rng: np.random.Generator, item: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """An annotator ∝ ``weight`` for each entry of ``item`` (sorted), distinct within an item: clashes are
    redrawn (vectorised rounds; items have few light responses)."""
    cdf = np.cumsum(weight / weight.sum())
    out = np.minimum(np.searchsorted(cdf, rng.random(len(item))), len(weight) - 1)
    for _ in range(100):
        key = item * len(weight) + out
        order = np.argsort(key, kind="stable")
        dup = np.zeros(len(item), dtype=bool)
        dup[order[1:]] = key[order[1:]] == key[order[:-1]]
        if not dup.any():
            return out
        out[dup] = np.minimum(np.searchsorted(cdf, rng.random(int(dup.sum()))), len(weight) - 1)
    raise UserInputError("could not draw distinct light annotators per item; use more light annotators.")


HEAVY_VARIANTS: dict[str, Callable[[int], HeavyCrowd]] = {
    "heavy": lambda s: heavy_crowd(HeavyShape(), seed=s),
    "heavy-60/40": lambda s: heavy_crowd(HeavyShape(class_prior=(0.6, 0.4), biased_accuracy=(0.52, 0.58)), seed=s),
    "heavy-90/10": lambda s: heavy_crowd(HeavyShape(class_prior=(0.9, 0.1), biased_accuracy=(0.8, 0.86)), seed=s),
    "heavy-3class": lambda s: heavy_crowd(
        HeavyShape(class_prior=(0.6, 0.25, 0.15), biased_accuracy=(0.5, 0.56)), seed=s
    ),
    "heavy-honest": lambda s: heavy_crowd(HeavyShape(n_biased=0), seed=s),
    "heavy-near-chance": lambda s: heavy_crowd(HeavyShape(biased_accuracy=(0.5, 0.56), confusing_share=0.45), seed=s),
}
"""Named variants of the heavy-annotator shape (seed → crowd)."""


def variant_names(names: Sequence[str] | None = None) -> list[str]:
    """The variant names, checked."""
    if names is None:
        return list(HEAVY_VARIANTS)
    unknown = [v for v in names if v not in HEAVY_VARIANTS]
    if unknown:
        raise UserInputError(f"unknown heavy-crowd variant(s) {unknown}; known: {', '.join(HEAVY_VARIANTS)}.")
    return list(names)
