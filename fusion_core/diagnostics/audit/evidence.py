"""Each annotator's accuracy against the estimated true labels, with a posterior interval that knows how sure
those labels are.

With the fitted posterior ``q`` (items × K), annotator j's accuracy ``a_j`` is the chance that a response of j is
the true label.  The true label is not known, only ``q``; under the one-coin model (Dawid & Skene 1979 with one
accuracy per annotator and errors spread evenly over the other K − 1 labels) a response l on item i has the
probability ``P(l | a_j) = a_j q_il + (1 − a_j)(1 − q_il)/(K − 1)``.  The posterior of ``a_j`` (uniform prior) is
the product of these over j's ``n_j`` responses on items that at least one other annotator labelled too (an item
only j labelled carries no evidence about j: the posterior there follows j's own vote), computed on a grid.
Where the labels are certain (``q_il`` 0 or 1) this is exactly ``Beta(1 + right, 1 + wrong)``; where they are
uncertain each response carries less evidence and the interval widens — on items whose labels the model cannot
tell (``q_il`` = 1/K, e.g. a crowd of labelling functions that each vote one class and abstain otherwise, which
no model of independent annotators identifies) the responses say nothing about ``a_j`` at all.  (Counting ``q_il``
as a fractional number of correct responses instead, ``Beta(1 + Σ q_il, 1 + Σ (1 − q_il))``, takes a coin the
model cannot call for a certain half-right answer and puts every annotator of such a crowd confidently at chance.)

``correct`` keeps the expected number of correct responses ``C_j = Σ q_il`` (the Dawid–Skene M-step statistic,
eq. 2.3); ``n_effective`` is the number of responses on certain labels that would give the same posterior spread
(``m(1 − m)/v − 3`` for a posterior of mean m and variance v, from the Beta moments).  The chance accuracy
``c_j = Σ_k π_k r_jk`` uses the class prior π and j's own label frequencies r_j on those responses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse

from fusion_core.data.responses import Responses

GRID = 257
"""Points of the accuracy grid (twice: once over [0, 1], then over each annotator's region of non-negligible
posterior)."""
Q_STEPS = 1000
"""The two per-response probabilities (module docstring) are rounded to 1/Q_STEPS; responses of one annotator
with the same rounded pair are summed once (the grid then costs distinct pairs, not responses)."""
CHUNK = 16384
"""Rows of (annotator, posterior value) pairs evaluated on the grid at once (bounds the memory to CHUNK × GRID)."""
TAIL = 30.0
"""Log-likelihood below the maximum past which the posterior is negligible (e^-30): the fine grid's range."""


@dataclass(frozen=True)
class AccuracyEvidence:
    """Per annotator (``workers`` order): responses on shared items, expected correct ones, accuracy estimate and
    interval, chance accuracy, and skill above chance ``(a − c)/(1 − c)`` with its interval (at ``level``);
    ``n_effective``: responses on certain labels worth the same evidence (module docstring)."""

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
    n_effective: np.ndarray | None = None


def _loglik(rows_w: np.ndarray, q: np.ndarray, u: np.ndarray, count: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Σ count · log(u + a (q − u)) per annotator (rows of ``grid``, annotator × points) over the binned responses."""
    w, g = grid.shape
    out = np.zeros((w, g))
    for s in range(0, len(q), CHUNK):
        sl = slice(s, s + CHUNK)
        p = u[sl, None] + grid[rows_w[sl]] * (q[sl] - u[sl])[:, None]
        ll = np.log(np.maximum(p, 1e-300)) * count[sl, None]
        pick = sparse.csr_matrix((np.ones(len(ll)), (rows_w[sl], np.arange(len(ll)))), shape=(w, len(ll)))
        out += pick @ ll
    return out


def accuracy_posterior(
    worker: np.ndarray,
    q_reported: np.ndarray,
    u: np.ndarray,
    n_workers: int,
    level: float,
    *,
    chance: np.ndarray | None = None,
    crowd_prior: bool = True,
) -> tuple[np.ndarray, ...]:
    """Posterior mean, interval ends at ``level`` and effective responses of each annotator's accuracy ``a``
    (uniform prior) from responses of probability ``u + a (q − u)``: ``q`` the (leave-one-out) posterior of the
    reported label, ``u`` the chance of that report from a wrong annotator (module docstring); NaN for annotators
    without responses."""
    steps = Q_STEPS + 1
    qb = np.clip(np.rint(np.asarray(q_reported, dtype=float) * Q_STEPS), 0, Q_STEPS).astype(np.int64)
    ub = np.clip(np.rint(np.asarray(u, dtype=float) * Q_STEPS), 0, Q_STEPS).astype(np.int64)
    keys, count = np.unique((np.asarray(worker, dtype=np.int64) * steps + qb) * steps + ub, return_counts=True)
    rows_w, q, u = keys // (steps * steps), (keys // steps % steps) / Q_STEPS, (keys % steps) / Q_STEPS
    count = count.astype(float)
    seen = np.bincount(rows_w, minlength=n_workers) > 0
    coarse = np.broadcast_to((np.arange(GRID) + 0.5) / GRID, (n_workers, GRID))
    ll = _loglik(rows_w, q, u, count, coarse)
    keep = ll >= ll.max(axis=1, keepdims=True) - TAIL
    step = 1.0 / GRID
    lo = np.clip(coarse[np.arange(n_workers), keep.argmax(axis=1)] - step, 0.0, 1.0)
    hi = np.clip(coarse[np.arange(n_workers), GRID - 1 - keep[:, ::-1].argmax(axis=1)] + step, 0.0, 1.0)
    width = (hi - lo) / GRID
    fine = lo[:, None] + width[:, None] * (np.arange(GRID) + 0.5)  # cell midpoints over [lo, hi]
    ll = _loglik(rows_w, q, u, count, fine)
    lik = np.exp(ll - ll.max(axis=1, keepdims=True))
    weight = lik
    if crowd_prior:  # the crowd's distribution of skill above chance, on κ ∈ [−1, 1]
        c = np.full(n_workers, 0.5) if chance is None else np.nan_to_num(np.asarray(chance, dtype=float), nan=0.5)
        c = np.clip(c, 0.0, 1.0 - 1e-6)[:, None]
        kappa = -1.0 + 2.0 * (np.arange(GRID) + 0.5) / GRID
        acc = c + kappa[None, :] * (1.0 - c)
        ll_k = _loglik(rows_w, q, u, count, np.clip(acc, 0.0, 1.0))
        ll_k[(acc < 0.0) | (acc > 1.0)] = -np.inf
        prior = _crowd_prior(ll_k, seen)
        cell = np.clip((((fine - c) / (1.0 - c) + 1.0) * GRID / 2).astype(np.int64), 0, GRID - 1)
        weight = lik * prior[cell]
    mean, low, high, _ = _summary(weight, fine, lo, width, level)
    n_eff = _summary(lik, fine, lo, width, level)[3]  # from the responses alone (uniform prior)
    nan = np.where(seen, 1.0, np.nan)
    return mean * nan, low * nan, high * nan, n_eff * nan


def _crowd_prior(ll: np.ndarray, seen: np.ndarray, n_iter: int = 500, tol: float = 1e-8) -> np.ndarray:
    """The crowd's distribution of skill above chance on a grid (rows of ``ll``: each annotator's log-likelihood
    there): the nonparametric maximum-likelihood mixing distribution of the annotators' likelihoods (Kiefer & Wolfowitz 1956; Laird 1978's EM), with one pseudo-annotator
    spread evenly so that no accuracy is ruled out a priori."""
    lik = np.exp(ll[seen] - ll[seen].max(axis=1, keepdims=True))
    g = np.full(ll.shape[1], 1.0 / ll.shape[1])
    for _ in range(n_iter):
        post = lik * g
        post /= np.maximum(post.sum(axis=1, keepdims=True), 1e-300)
        new = (post.sum(axis=0) + 1.0 / len(g)) / (len(post) + 1.0)
        if np.abs(new - g).max() < tol:
            g = new
            break
        g = new
    return g


def _summary(
    p: np.ndarray, fine: np.ndarray, lo: np.ndarray, width: np.ndarray, level: float
) -> tuple[np.ndarray, ...]:
    """Mean, interval ends at ``level`` and effective responses (``m(1 − m)/v − 3``) of the grid posteriors ``p``
    (rows; cells of ``width`` from ``lo``, midpoints ``fine``)."""
    n_workers = len(p)
    p = p / np.maximum(p.sum(axis=1, keepdims=True), 1e-300)
    mean = (p * fine).sum(axis=1)
    var = np.maximum((p * (fine - mean[:, None]) ** 2).sum(axis=1) + width**2 / 12, 1e-300)
    cdf = np.cumsum(p, axis=1)
    edges = lo[:, None] + width[:, None] * np.arange(1, GRID + 1)  # the right edge of each cell

    def quantile(prob: float) -> np.ndarray:
        j = np.minimum((cdf < prob).sum(axis=1), GRID - 1)
        rows = np.arange(n_workers)
        below = np.where(j > 0, cdf[rows, np.maximum(j - 1, 0)], 0.0)
        frac = (prob - below) / np.maximum(p[rows, j], 1e-300)
        return edges[rows, j] - width * (1.0 - np.clip(frac, 0.0, 1.0))

    n_eff = np.maximum(mean * (1 - mean) / var - 3.0, 0.0)
    return mean, quantile((1 - level) / 2), quantile((1 + level) / 2), n_eff


def leave_one_out(
    q: np.ndarray, worker: np.ndarray, label: np.ndarray, n_workers: int, confusion: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per response (rows of ``q``, the posterior rows of the responses' items): the posterior of the reported
    label with the reporting annotator's own response divided out, ``q⁻ʲ_i[t] ∝ q_i[t] / θ_j[t, l]``, and the
    chance of that report from a wrong annotator, ``u = Σ_{t ≠ l} q⁻ʲ_i[t] θ_j[t, l] / (1 − θ_j[t, t])`` (module
    docstring).  ``θ_j`` is the fit's confusion matrix of j or, without one, j's expected confusion counts under
    ``q`` (the Dawid–Skene M-step, eq. 2.3) with half a response of smoothing per cell."""
    n, k = q.shape
    if confusion is None:
        counts = np.stack(
            [np.bincount(worker * k + label, weights=q[:, t], minlength=n_workers * k) for t in range(k)], axis=1
        ).reshape(n_workers, k, k)  # worker × true × reported
        theta = (counts + 0.5) / (counts + 0.5).sum(axis=2, keepdims=True)
    else:
        theta = np.asarray(confusion, dtype=float)
    rows = np.arange(n)
    own = np.clip(theta[worker, :, label], 1e-3, 1.0)  # responses × true: P(reported l | true t)
    loo = q / own
    loo /= np.maximum(loo.sum(axis=1, keepdims=True), 1e-300)
    diag = np.diagonal(theta, axis1=1, axis2=2)[worker]  # responses × true: P(right | true t)
    err = own / np.clip(1.0 - diag, 1e-3, None)  # P(reported l | true t, wrong)
    err[rows, label] = 0.0
    return loo[rows, label], np.clip((loo * err).sum(axis=1), 0.0, 1.0)


def accuracy_evidence(
    resp: Responses,
    posterior: np.ndarray,
    class_prior: np.ndarray | None,
    level: float = 0.9,
    *,
    confusion: np.ndarray | None = None,
    crowd_prior: bool = True,
) -> AccuracyEvidence:
    """Accuracy with posterior intervals and skill above chance for every annotator (module docstring);
    ``confusion`` (workers × true × reported, the fit's) divides each annotator's own vote out of the posterior."""
    q = np.asarray(posterior, dtype=float)
    prior = np.asarray(class_prior if class_prior is not None else q.mean(axis=0), dtype=float)
    prior = prior / prior.sum()
    w, k = resp.n_workers, resp.n_classes
    shared = resp.responses_per_item[resp.item] >= 2
    wk, lab = resp.worker[shared], resp.label[shared]
    n = np.bincount(wk, minlength=w).astype(float)
    correct = np.bincount(wk, weights=q[resp.item[shared], lab], minlength=w)
    q_reported, u = leave_one_out(q[resp.item[shared]], wk, lab, w, confusion)
    shares = np.bincount(wk * k + lab, minlength=w * k).reshape(w, k) / np.maximum(n, 1.0)[:, None]
    chance = shares @ prior
    accuracy, low, high, n_eff = accuracy_posterior(
        wk, q_reported, u, w, level, chance=chance, crowd_prior=crowd_prior and w > 1
    )
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
        n_effective=n_eff,
    )
