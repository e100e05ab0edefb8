"""Each annotator's accuracy against the estimated true labels, with a Beta posterior interval.

With the fitted posterior ``q`` (items × K), the expected number of correct responses of annotator j is the
Dawid–Skene M-step statistic ``C_j = Σ_{responses (i, l) of j} q_il`` (Dawid & Skene 1979, eq. 2.3; the
diagonal of the expected confusion counts), over the ``n_j`` responses on items that at least one other annotator
labelled too (an item only j labelled carries no evidence about j: the posterior there follows j's own vote).
The accuracy ``a_j`` has the posterior ``Beta(1 + C_j, 1 + n_j − C_j)`` (uniform prior, fractional counts); the
chance accuracy ``c_j = Σ_k π_k r_jk`` uses the class prior π and j's own label frequencies r_j on those responses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from fusion_core.data.responses import Responses


@dataclass(frozen=True)
class AccuracyEvidence:
    """Per annotator (``workers`` order): responses on shared items, expected correct ones, accuracy estimate and
    interval, chance accuracy, and skill above chance ``(a − c)/(1 − c)`` with its interval (at ``level``)."""

    workers: pd.Index
    n_responses: np.ndarray
    n_shared: np.ndarray
    correct: np.ndarray
    accuracy: np.ndarray
    accuracy_low: np.ndarray
    accuracy_high: np.ndarray
    chance: np.ndarray
    skill: np.ndarray
    skill_low: np.ndarray
    skill_high: np.ndarray
    level: float


def accuracy_evidence(
    resp: Responses, posterior: np.ndarray, class_prior: np.ndarray | None, level: float = 0.9
) -> AccuracyEvidence:
    """Accuracy with Beta posterior intervals and skill above chance for every annotator (module docstring)."""
    q = np.asarray(posterior, dtype=float)
    prior = np.asarray(class_prior if class_prior is not None else q.mean(axis=0), dtype=float)
    prior = prior / prior.sum()
    w, k = resp.n_workers, resp.n_classes
    shared = resp.responses_per_item[resp.item] >= 2
    wk, lab = resp.worker[shared], resp.label[shared]
    n = np.bincount(wk, minlength=w).astype(float)
    correct = np.bincount(wk, weights=q[resp.item[shared], lab], minlength=w)
    shares = np.bincount(wk * k + lab, minlength=w * k).reshape(w, k) / np.maximum(n, 1.0)[:, None]
    chance = shares @ prior
    a_post, b_post = 1.0 + correct, 1.0 + np.maximum(n - correct, 0.0)
    accuracy = a_post / (a_post + b_post)
    low = stats.beta.ppf((1 - level) / 2, a_post, b_post)
    high = stats.beta.ppf((1 + level) / 2, a_post, b_post)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(1.0 - chance > 1e-9, 1.0 / (1.0 - chance), np.nan)
        empty = np.where(n > 0, 1.0, np.nan)
        skill, skill_low, skill_high = ((x - chance) * scale * empty for x in (accuracy, low, high))
    return AccuracyEvidence(
        workers=pd.Index(resp.workers, name="worker"),
        n_responses=np.asarray(resp.responses_per_worker, dtype=np.int64),
        n_shared=n.astype(np.int64),
        correct=correct,
        accuracy=accuracy * empty,
        accuracy_low=low * empty,
        accuracy_high=high * empty,
        chance=np.where(n > 0, chance, np.nan),
        skill=skill,
        skill_low=skill_low,
        skill_high=skill_high,
        level=level,
    )
