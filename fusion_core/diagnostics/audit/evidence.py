"""Each annotator's accuracy against the labels the *rest of the crowd* gives their items, with its posterior
interval and the posterior probability that their skill is below a line, and how much evidence the rest provides.

Over the ``n_j`` responses of annotator j on items that at least one other annotator labelled too (an item only j
labelled carries no evidence about j), ``C_j = Σ_{responses (i, l) of j} q_il`` is the Dawid–Skene M-step statistic
(Dawid & Skene 1979, eq. 2.3) under the fitted posterior ``q``; it is kept (``correct``) but the accuracy is not
read from it: ``q`` contains j's own votes, which flatter j (most for heavy annotators, who shape the labels they
are judged against), and a Beta on fractional counts is narrow where the labels are uncertain.  Instead the
accuracy ``a_j`` has the posterior of the **leave-self-out one-coin model** below (uniform prior): its mean is the
accuracy, its equal-tailed quantiles the interval, and ``P(κ_j < x)`` for the verdict's lines.  Where the rest of
the crowd decides the labels it is exactly ``Beta(1 + right, 1 + wrong)``.  The chance accuracy
``c_j = Σ_k π_k r_jk`` uses the class prior π and j's own label frequencies r_j on those responses.

The Beta on ``C_j`` trusts the model's labels.  Where the model cannot tell the labels — e.g. a crowd of labelling
functions that each vote one class and abstain otherwise, which no model of independent annotators identifies —
``q`` stays near the class prior, ``C_j / n_j`` near chance, and the interval is narrow: a confident "near chance"
about annotators the data say nothing about.  **Effective responses** measure the evidence instead: with j's own
vote divided out of the posterior (``q⁻ʲ_i[t] ∝ q_i[t] / θ_j[t, l]``, θ_j the fit's confusion matrix of j), a
response l of j has, under the one-coin model with j's fitted error profile, the probability
``u + a_j (q⁻ʲ_il − u)`` with ``u = Σ_{t ≠ l} q⁻ʲ_i[t] θ_j[t, l] / (1 − θ_j[t, t])`` the chance of that report from a
wrong annotator.  The posterior of ``a_j`` under these (uniform prior, on a grid) is ``Beta(1 + right, 1 + wrong)``
exactly where the rest of the crowd decides the labels and flat where it cannot tell them; its spread, expressed as
the number of responses on certain labels that give the same spread (``m(1 − m)/v − 3`` for mean m and variance
v), is ``n_effective``.  The verdict rule asks for ``min_responses`` of those (:mod:`.rules`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse

from fusion_core.data.responses import Responses

GRID = 129
"""Points of the accuracy grid (twice: once over [0, 1], then over each annotator's region of non-negligible
posterior)."""
Q_STEPS = 200
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
    ``n_effective``: responses on certain labels worth the same evidence; ``p_near_chance`` / ``p_worse``: the
    posterior probabilities that the skill is below ``chance_band`` / below 0 (module docstring), and
    ``prior_near_chance`` the uniform prior's own probability of the former (before any response: the accuracy at
    the band's line — 0.575 on balanced binary labels, 0.82 for an annotator whose chance accuracy is 0.79)."""

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
    p_near_chance: np.ndarray | None = None
    p_worse: np.ndarray | None = None
    chance_band: float = 0.15
    prior_near_chance: np.ndarray | None = None


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


@dataclass(frozen=True)
class OneCoinPosterior:
    """Per annotator (rows), the one-coin posterior of the accuracy on a grid of ``cells`` of equal ``width``
    (midpoints ``grid``, masses ``mass``; the grid covers the region of non-negligible posterior).  ``seen``:
    annotators with responses (others are NaN everywhere)."""

    grid: np.ndarray
    mass: np.ndarray
    width: np.ndarray
    seen: np.ndarray

    def mean(self) -> np.ndarray:
        return np.where(self.seen, (self.mass * self.grid).sum(axis=1), np.nan)

    def variance(self) -> np.ndarray:
        m = (self.mass * self.grid).sum(axis=1)
        v = (self.mass * (self.grid - m[:, None]) ** 2).sum(axis=1) + self.width**2 / 12
        return np.where(self.seen, np.maximum(v, 1e-300), np.nan)

    def cdf(self, x: np.ndarray) -> np.ndarray:
        """``P(a_j < x_j)`` per annotator (linear within a cell)."""
        lo = self.grid[:, 0] - self.width / 2
        t = (np.asarray(x, dtype=float) - lo) / self.width
        g = self.grid.shape[1]
        i = np.clip(np.floor(np.nan_to_num(t, nan=0.0)), 0, g - 1).astype(np.int64)
        below = np.cumsum(self.mass, axis=1) - self.mass  # mass of the cells before each cell
        rows = np.arange(len(i))
        p = below[rows, i] + self.mass[rows, i] * np.clip(t - i, 0.0, 1.0)
        p = np.where(t <= 0, 0.0, np.where(t >= g, 1.0, p))
        return np.where(self.seen & np.isfinite(t), np.clip(p, 0.0, 1.0), np.nan)

    def quantile(self, prob: float) -> np.ndarray:
        """The accuracy below which the posterior has mass ``prob``, per annotator."""
        cum = np.cumsum(self.mass, axis=1)
        rows = np.arange(len(cum))
        i = np.minimum((cum < prob).sum(axis=1), cum.shape[1] - 1)
        before = cum[rows, i] - self.mass[rows, i]
        frac = np.clip((prob - before) / np.maximum(self.mass[rows, i], 1e-300), 0.0, 1.0)
        x = self.grid[rows, i] - self.width / 2 + frac * self.width
        return np.where(self.seen, np.clip(x, 0.0, 1.0), np.nan)

    def n_effective(self) -> np.ndarray:
        """Responses on certain labels with the same spread: ``m(1 − m)/v − 3``."""
        m = (self.mass * self.grid).sum(axis=1)
        return np.where(self.seen, np.maximum(m * (1 - m) / self.variance() - 3.0, 0.0), np.nan)


def one_coin_posterior(worker: np.ndarray, q_reported: np.ndarray, u: np.ndarray, n_workers: int) -> OneCoinPosterior:
    """Per annotator, the posterior (uniform prior) of the accuracy ``a`` under responses of probability
    ``u + a (q − u)``, ``q`` the leave-one-out posterior of the reported label and ``u`` the chance of that report
    from a wrong annotator (module docstring), on a coarse grid and then a fine one over its non-negligible part."""
    steps = Q_STEPS + 1
    worker = np.asarray(worker, dtype=np.int64)
    seen = np.bincount(worker, minlength=n_workers) > 0
    qb = np.clip(np.rint(np.asarray(q_reported, dtype=float) * Q_STEPS), 0, Q_STEPS).astype(np.int64)
    ub = np.clip(np.rint(np.asarray(u, dtype=float) * Q_STEPS), 0, Q_STEPS).astype(np.int64)
    keys, count = np.unique((worker * steps + qb) * steps + ub, return_counts=True)
    rows_w, q, u = keys // (steps * steps), (keys // steps % steps) / Q_STEPS, (keys % steps) / Q_STEPS
    count = count.astype(float)
    coarse = np.broadcast_to((np.arange(GRID) + 0.5) / GRID, (n_workers, GRID))
    ll = _loglik(rows_w, q, u, count, coarse)
    keep = ll >= ll.max(axis=1, keepdims=True) - TAIL
    step = 1.0 / GRID
    rows = np.arange(n_workers)
    lo = np.clip(coarse[rows, keep.argmax(axis=1)] - step, 0.0, 1.0)
    hi = np.clip(coarse[rows, GRID - 1 - keep[:, ::-1].argmax(axis=1)] + step, 0.0, 1.0)
    width = (hi - lo) / GRID
    fine = lo[:, None] + width[:, None] * (np.arange(GRID) + 0.5)  # cell midpoints over [lo, hi]
    ll = _loglik(rows_w, q, u, count, fine)
    p = np.exp(ll - ll.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return OneCoinPosterior(fine, p, width, seen)


def effective_responses(worker: np.ndarray, q_reported: np.ndarray, u: np.ndarray, n_workers: int) -> np.ndarray:
    """Per annotator: the responses on certain labels worth as much evidence about their accuracy as their responses
    judged against the rest of the crowd (module docstring): ``m(1 − m)/v − 3`` for the mean m and variance v of
    the one-coin posterior (:func:`one_coin_posterior`); NaN for annotators without responses."""
    return one_coin_posterior(worker, q_reported, u, n_workers).n_effective()


def leave_one_out(
    q: np.ndarray,
    worker: np.ndarray,
    label: np.ndarray,
    n_workers: int,
    confusion: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per response (rows of ``q``, the posterior rows of the responses' items): the posterior of the reported
    label with the reporting annotator's own response divided out, ``q⁻ʲ_i[t] ∝ q_i[t] / θ_j[t, l]``, and the
    chance of that report from a wrong annotator, ``u = Σ_{t ≠ l} q⁻ʲ_i[t] θ_j[t, l] / (1 − θ_j[t, t])`` (module
    docstring).  ``θ_j`` is the fit's confusion matrix of j or, without one, j's expected confusion counts under
    ``q`` (the Dawid–Skene M-step, eq. 2.3) with half a response of smoothing per cell."""
    n, k = q.shape
    if confusion is None:
        counts = np.stack(
            [
                np.bincount(worker * k + label, weights=q[:, t], minlength=n_workers * k).reshape(n_workers, k)
                for t in range(k)
            ],
            axis=1,
        )  # worker × true × reported
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
    chance_band: float = 0.15,
    attenuation: float = 1.0,
) -> AccuracyEvidence:
    """Accuracy with posterior intervals, skill above chance, the probabilities that it is below ``chance_band`` and
    below 0, and effective responses for every annotator (module docstring), against the rest of the crowd's
    labels: ``confusion`` (workers × true × reported, the fit's) divides each annotator's own vote out of the
    posterior.  ``attenuation`` f ≥ 1: the reference may be less often right than the model says, so that the
    skill is f times what it measures (:mod:`.reference`); ``p_near_chance`` is then ``P(f κ < chance_band)``."""
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
    chance = np.where(n > 0, shares @ prior, np.nan)
    post = one_coin_posterior(wk, q_reported, u, w)
    accuracy, low, high = post.mean(), post.quantile((1 - level) / 2), post.quantile((1 + level) / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(1.0 - chance > 1e-9, 1.0 / (1.0 - chance), np.nan)
        skill, skill_low, skill_high = ((x - chance) * scale for x in (accuracy, low, high))
        line = chance_band / attenuation if np.isfinite(attenuation) else 0.0
        at_line = chance + line * (1.0 - chance)
        p_near = np.where(np.isfinite(scale), post.cdf(at_line), np.nan)
        p_worse = np.where(np.isfinite(scale), post.cdf(chance), np.nan)
    return AccuracyEvidence(
        workers=pd.Index(resp.workers, name="worker"),
        n_responses=np.asarray(resp.responses_per_worker, dtype=np.int64),
        n_shared=n.astype(np.int64),
        correct=correct,
        accuracy=accuracy,
        accuracy_low=low,
        accuracy_high=high,
        chance=chance,
        skill=skill,
        skill_low=skill_low,
        skill_high=skill_high,
        level=level,
        n_effective=post.n_effective(),
        p_near_chance=p_near,
        p_worse=p_worse,
        chance_band=chance_band,
        prior_near_chance=np.where(np.isfinite(scale), np.clip(at_line, 0.0, 1.0), np.nan),
    )
