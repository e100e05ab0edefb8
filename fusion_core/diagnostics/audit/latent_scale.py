"""Graded labels: the item's true grade as a discretised latent value (docs/AUDIT.md, "Graded labels").

Graders of ordered levels disagree most on items that sit between two grades.  A nominal latent-class model (and
``ordinal-em``, whose latent truth is a level too) takes every item to be cleanly one grade, so a 3-against-2 split
between grades 2 and 3 still reads as "grade 2 with a couple of slips".  The **latent-scale model** (the graded
response form of the ordered-probit rater model, Johnson & Albert 1999, *Ordinal Data Modeling*, ch. 5, with a
continuous item trait as in the hierarchical rater models of Patz et al. 2002) gives every item a continuous value
``u_i`` on the level scale, drawn from a distribution ``g`` (a histogram on a fixed grid, fitted: the nonparametric
maximum likelihood of Laird 1978), and every grader ``j`` a noise ``s_j`` and their own ordered cut points
``τ_j1 < … < τ_j,K−1`` (a harsh or lenient grader's are shifted, a grader who rarely uses a middle grade has them
close): ``j`` perceives ``u_i + s_j ε`` and reports level ``l`` when that falls between ``τ_jl`` and ``τ_j,l+1``,

    P_j(l | u) = Φ((τ_j,l+1 − u) / s_j) − Φ((τ_jl − u) / s_j).

The prior (weight :data:`REGULARIZATION`, as ``ordinal-em``'s) centres each grader's first cut point at ``½``, the
gaps at one level (log-gaps at 0) and ``log s_j`` at ``log ½``; it fixes the scale's origin and unit.  The item's
**true grade** is ``u_i`` discretised at the *crowd's* cut points (the graders' cut points averaged over their
responses), and the chosen labels' accuracy under the model is ``(1/n) Σ_i P(grade(u_i) = label_i | responses)``:
an item whose posterior on ``u`` straddles a cut point counts as half right, whatever its vote.  MAP-EM on the grid
(a latent class per grid point whose confusion rows are probit rows): the E-step is one sparse product (items ×
grader-levels by grader-levels × grid), the M-step the grid weights in closed form (plus :data:`PRIOR_COUNT`
pseudo-items spread evenly) and a round of Fisher scoring per grader (projected Newton in a box, each grader halving
its own step until its objective falls), so the objective never falls; at most :data:`MAX_ITER` iterations (a
cost cap: the grid EM converges slowly; 40, 60 and 100 iterations moved the figure by at most 2 points on simulated
graded crowds; the trace is kept and ``converged`` says whether it stopped by itself).

For stacking (:mod:`.stacking`) the model predicts each response left out of its item,
``p_LS(y_r | others) = Σ_g q_{i,−r}(g) P_{j_r}(y_r | u_g)``, with graders' parameters and the grid weights
**cross-fitted** by item folds (:data:`FOLDS`, hashed ids; each fold's fit starts from the full fit, graders with no
responses outside the fold start at the prior): a grader's parameters never saw the item they predict, as the
latent-class rows (leave-item-out counts) do not.  Cost per iteration ``O(responses × grid + graders × grid ×
levels²)``; at most :data:`MAX_RESPONSES` responses (whole items of smallest id hash among the check's items).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.special import logsumexp

from fusion_core.data.responses import Responses
from fusion_core.methods.auto.folds import id_hashes, smallest_first
from fusion_core.methods.ordinal.levels import is_numeric_label, with_levels
from fusion_core.methods.ordinal.scale import NOISE_CENTER, interval_prob

GRID_STEP = 0.1
"""Spacing of the latent grid in levels (the grid spans half a level beyond the first and last levels' cut points)."""
MAX_GRID = 32
"""Most grid points (the step widens beyond it)."""
MAX_LEVELS = 12
"""Most levels for which the model is fitted."""
REGULARIZATION = 1.0
"""Weight λ of the Gaussian prior on each grader's bias (mean 0) and log noise (mean log ½), as ``ordinal-em``."""
PRIOR_COUNT = 1.0
"""Pseudo-items spread evenly over the grid (keeps every grid weight positive)."""
MAX_ITER = 40
"""EM iterations of the full fit at most."""
FOLD_ITER = 6
"""EM iterations of each cross-fitting fold's fit (from the full fit) at most."""
M_STEPS = 1
"""Fisher-scoring rounds per M-step (warm-started)."""
_HALVINGS = 20
TOL = 1e-7
"""Stop when the objective changes by at most this share of itself."""
FOLDS = 3
"""Item folds of the cross-fitted predictive."""
MAX_RESPONSES = 20_000
"""Responses the model reads at most (whole items of smallest id hash, as the difficulty check; its cost)."""
_Z_CLIP = 50.0


@dataclass(frozen=True)
class LatentScaleFit:
    """The latent-scale model's fit (module docstring): the chosen labels' ``accuracy`` with its sampling interval
    ``low``–``high``, the graders' ``cut_points`` (annotators × K − 1) and ``noise`` (by annotator code; NaN for
    those the model did not read), ``iterations``, ``converged`` and the
    objective's trace ``loglik``; ``n_items`` the items read and ``predictive`` the cross-fitted ``p_LS`` of every
    response of an item with two or more (response order)."""

    accuracy: float
    low: float
    high: float
    cut_points: np.ndarray
    noise: np.ndarray
    iterations: int
    converged: bool
    loglik: tuple[float, ...]
    n_items: int
    predictive: np.ndarray

    def summary(self) -> dict[str, Any]:
        """Plain JSON values (for ``summary.json``)."""
        return {
            "accuracy": self.accuracy,
            "low": self.low,
            "high": self.high,
            "iterations": self.iterations,
            "converged": self.converged,
            "items_read": self.n_items,
        }


def level_ranks(resp: Responses, label_type: str = "nominal", levels: Any = None) -> np.ndarray | None:
    """Each class code's position among ordered levels (0 = lowest), or None when the labels are not ordered:
    declared (``label_type`` ``ordinal`` with ``levels`` lowest first, or ``ordinal``/``numeric`` with numbers), or
    three or more labels that are all numbers (``auto``'s rule, :func:`fusion_core.methods.auto.ordered_levels`)."""
    classes = resp.classes
    if label_type == "ordinal" and levels is not None and not isinstance(levels, str):
        return np.asarray(with_levels(resp, levels).classes.get_indexer(classes), dtype=np.int64)
    numbers = all(is_numeric_label(c) for c in classes)
    if numbers and (label_type != "nominal" or len(classes) >= 3):
        values = np.array([float(str(c)) for c in classes])
        return np.argsort(np.argsort(values, kind="stable"), kind="stable").astype(np.int64)
    return None


def _grid(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Grid points ``u_g`` (cell centres over [−1, K], none on a cut point), the cut points with ±∞ at the ends and
    each point's grade."""
    n_grid = min(round((k + 1) / GRID_STEP), MAX_GRID)
    u = -1.0 + (k + 1) * (np.arange(n_grid) + 0.5) / n_grid
    inner = np.arange(1, k) - 0.5
    cuts = np.concatenate([[-np.inf], inner, [np.inf]])
    return u, cuts, np.searchsorted(inner, u)


def _cut_points(x: np.ndarray, w: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each grader's cut points (graders × K + 1, ±∞ at the ends) and noise from ``x = [δ (W), γ (W × (K − 2)),
    log s (W)]``: ``τ_j1 = ½ + δ_j``, ``τ_j,l+1 = τ_jl + exp(γ_jl)`` (ordered by construction)."""
    delta, gaps, log_s = x[:w], x[w : w + w * (k - 2)].reshape(w, k - 2), x[w + w * (k - 2) :]
    inner = 0.5 + delta[:, None] + np.concatenate([np.zeros((w, 1)), np.cumsum(np.exp(gaps), axis=1)], axis=1)
    cuts = np.concatenate([np.full((w, 1), -np.inf), inner, np.full((w, 1), np.inf)], axis=1)
    return cuts, np.exp(log_s)


def _rows(x: np.ndarray, u: np.ndarray, w: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``z[j, g, m] = (τ_jm − u_g)/s_j`` (clipped), ``P_j(l | u_g)`` (graders × grid × levels) and the noise."""
    cuts, s = _cut_points(x, w, k)
    z = np.clip((cuts[:, None, :] - u[None, :, None]) / s[:, None, None], -_Z_CLIP, _Z_CLIP)
    return z, np.maximum(interval_prob(z), 1e-300), s


def _penalty(x: np.ndarray, w: int) -> tuple[float, np.ndarray]:
    """The prior's ``λ/2 ‖x − x₀‖²`` (cut points at the crowd's, gaps of one level, noise ½) and its gradient."""
    dev = x.copy()
    dev[-w:] -= NOISE_CENTER
    return 0.5 * REGULARIZATION * float(dev @ dev), REGULARIZATION * dev


def _by_grader(x: np.ndarray, w: int, k: int) -> np.ndarray:
    """``x`` (:func:`_cut_points`) as graders × [δ, γ_1 … γ_{K−2}, log s]."""
    return np.concatenate([x[:w, None], x[w : w + w * (k - 2)].reshape(w, k - 2), x[-w:, None]], axis=1)


def _flat(theta: np.ndarray) -> np.ndarray:
    """The inverse of :func:`_by_grader`."""
    return np.concatenate([theta[:, 0], theta[:, 1:-1].ravel(), theta[:, -1]])


def _grader_objective(theta: np.ndarray, counts: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Per grader, ``−Σ_gl C_jgl log P_jgl`` plus the prior term."""
    w, k = counts.shape[0], counts.shape[2]
    _, p, _ = _rows(_flat(theta), u, w, k)
    dev = theta.copy()
    dev[:, -1] -= NOISE_CENTER
    return -(counts * np.log(p)).sum(axis=(1, 2)) + 0.5 * REGULARIZATION * (dev**2).sum(axis=1)


def _fisher_round(theta: np.ndarray, counts: np.ndarray, u: np.ndarray) -> np.ndarray:
    """One Fisher-scoring step per grader (curvature ``Σ_g n_jg Σ_l ∂P ∂Pᵀ / P + λ I``, the expected Hessian of
    the multinomial rows), each halved until the grader's objective falls (kept otherwise)."""
    w, k = counts.shape[0], counts.shape[2]
    x = _flat(theta)
    z, p, s = _rows(x, u, w, k)
    phi = np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi)
    eye = np.eye(k - 1)
    # ∂P_l/∂τ_m' (inner cut m' = 0 … K − 2): φ_{m'+1}/s ([m' = l] − [m' = l − 1])
    d_tau = np.zeros((*z.shape[:2], k, k - 1))
    inner = phi[..., 1:-1] / s[:, None, None]  # graders × grid × (K − 1)
    d_tau[:, :, : k - 1, :] += inner[:, :, None, :] * eye[None, None]
    d_tau[:, :, 1:, :] -= inner[:, :, None, :] * eye[None, None]
    gaps = np.exp(theta[:, 1:-1])
    tri = np.tril(np.ones((k - 1, k - 1)), -1)[:, : k - 2]  # cut m' moves with gap l when m' ≥ l + 1
    dcut = np.concatenate([np.ones((w, k - 1, 1)), tri[None] * gaps[:, None, :]], axis=2)  # graders × cut × param
    n_grid = len(u)
    jac = (d_tau.reshape(w, n_grid * k, k - 1) @ dcut).reshape(w, n_grid, k, k - 1)
    zphi = z * phi
    jac = np.concatenate([jac, (zphi[..., :-1] - zphi[..., 1:])[..., None]], axis=3)  # graders × grid × l × param
    dev = theta.copy()
    dev[:, -1] -= NOISE_CENTER
    flat = jac.reshape(w, n_grid * k, k)
    grad = -((counts / p).reshape(w, 1, n_grid * k) @ flat)[:, 0, :] + REGULARIZATION * dev
    scaled = flat * np.sqrt(counts.sum(axis=2)[:, :, None] / p).reshape(w, n_grid * k, 1)
    info = scaled.transpose(0, 2, 1) @ scaled
    info += REGULARIZATION * np.eye(k)[None]
    lo = np.concatenate([[-float(k)], np.full(k - 2, -3.0), [np.log(0.02)]])  # box: |δ| ≤ K, gaps, noise
    hi = np.concatenate([[float(k)], np.full(k - 2, 2.0), [np.log(2.0 * k)]])
    # projected Newton (Bertsekas 1982): a parameter on its bound with the gradient pushing out stays there
    stuck = ((theta <= lo + 1e-12) & (grad > 0)) | ((theta >= hi - 1e-12) & (grad < 0))
    free = ~stuck
    info = info * (free[:, :, None] & free[:, None, :]) + np.eye(k)[None] * stuck[:, :, None]
    step = -np.linalg.solve(info, (grad * free)[..., None])[..., 0]
    f0 = _grader_objective(theta, counts, u)
    out, t, todo = theta.copy(), 1.0, np.arange(w)
    for _ in range(_HALVINGS):  # step halvings, not responses; only the graders still without a decrease
        trial = np.clip(theta[todo] + t * step[todo], lo, hi)
        ok = _grader_objective(trial, counts[todo], u) <= f0[todo] + 1e-12 * np.abs(f0[todo])
        out[todo[ok]] = trial[ok]
        todo = todo[~ok]
        if not len(todo):
            break
        t *= 0.5
    return out


class _Model:
    """The latent-scale model on responses (``item`` codes 0 … n − 1, grader codes ``worker``, level ``rank``)."""

    def __init__(self, item: np.ndarray, worker: np.ndarray, rank: np.ndarray, *, n: int, n_workers: int, k: int):
        self.n, self.W, self.K = n, n_workers, k
        self.u, self.cuts, self.grade = _grid(k)
        self.A = sp.csr_matrix(
            (np.ones(len(item)), (item, worker * k + rank)), shape=(n, n_workers * k)
        )  # items × (grader, level) counts
        self.At = self.A.T.tocsr()
        self.has = np.bincount(item, minlength=n) > 0  # items with responses (a fold's fit leaves some out)

    def log_rows(self, x: np.ndarray) -> np.ndarray:
        """``log P_j(l | u_g)`` as (grader·level) × grid."""
        _, p, _ = _rows(x, self.u, self.W, self.K)
        return np.log(p).transpose(0, 2, 1).reshape(self.W * self.K, len(self.u))

    def e_step(self, x: np.ndarray, log_g: np.ndarray) -> tuple[np.ndarray, float]:
        joint = log_g[None, :] + self.A @ self.log_rows(x)
        total = logsumexp(joint, axis=1)
        return np.exp(joint - total[:, None]), float(total[self.has].sum())

    def m_step(self, q: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Grid weights in closed form, then :data:`M_STEPS` rounds of Fisher scoring of every grader's parameters
        from the expected counts (separable by grader; each grader halves its own step until its objective falls:
        a generalised M-step, the objective never rises)."""
        G, W, K = len(self.u), self.W, self.K
        g = q[self.has].sum(axis=0) + PRIOR_COUNT / G
        counts = np.asarray(self.At @ q).reshape(W, K, G).transpose(0, 2, 1)  # graders × grid × level
        theta = _by_grader(x, W, K)
        for _ in range(M_STEPS):  # Fisher-scoring rounds, not responses
            theta = _fisher_round(theta, counts, self.u)
        return _flat(theta), np.log(g / g.sum())

    def start(self) -> np.ndarray:
        """The prior's centre: the crowd's cut points, gaps of one level, noise ½."""
        return np.concatenate([np.zeros(self.W * (self.K - 1)), np.full(self.W, NOISE_CENTER)])

    def fit(
        self, q: np.ndarray, x: np.ndarray, max_iter: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[float], int, bool]:
        """EM from the item posterior ``q`` (items × grid) and graders' parameters ``x`` (M-step first); returns
        the parameters, the log grid weights, the posterior, the MAP objective's trace, the iterations and whether
        it converged."""
        trace: list[float] = []
        converged = False
        it = 0
        log_g = np.zeros(len(self.u))
        while it < max_iter:  # EM iterations, not responses
            it += 1
            x, log_g = self.m_step(q, x)
            q, ll = self.e_step(x, log_g)
            trace.append(ll - _penalty(x, self.W)[0])
            if len(trace) > 1 and abs(trace[-1] - trace[-2]) <= TOL * abs(trace[-1]):
                converged = True
                break
        return x, log_g, q, trace, it, converged


def _predictive(
    model: _Model,
    item: np.ndarray,
    worker: np.ndarray,
    rank: np.ndarray,
    *,
    x: np.ndarray,
    log_g: np.ndarray,
    rows: np.ndarray,
) -> np.ndarray:
    """``p_LS(y_r | others)`` of the responses ``rows`` (indices) at the parameters ``x`` and grid weights."""
    lr = model.log_rows(x)  # (grader·level) × grid
    own = lr[worker[rows] * model.K + rank[rows]]  # responses × grid
    items, inv = np.unique(item[rows], return_inverse=True)
    loglik = (model.A[items] @ lr)[inv]
    log_minus = log_g[None, :] + loglik - own
    log_minus -= log_minus.max(axis=1, keepdims=True)
    q = np.exp(log_minus)
    q /= q.sum(axis=1, keepdims=True)
    return np.clip((q * np.exp(own)).sum(axis=1), 1e-12, 1.0)


def latent_scale_fit(
    resp: Responses,
    item: np.ndarray,
    n: int,
    *,
    rank: np.ndarray,
    posterior: np.ndarray,
    label: np.ndarray,
    item_ids: pd.Index,
    level: float = 0.9,
) -> LatentScaleFit | None:
    """Fit the latent-scale model to ``resp`` (responses of ``n`` items coded ``item``; ``rank`` each class code's
    level position) from the class ``posterior`` of those items (each class's mass spread over its grade's grid
    points) and score the chosen ``label`` (class codes per item); ``item_ids`` name the items for the folds.  Beyond
    :data:`MAX_RESPONSES` responses, on the items of smallest id hash that hold that many (``predictive`` NaN on the
    others' responses and on items with one response).  None beyond :data:`MAX_LEVELS` levels."""
    k = int(np.asarray(rank).max()) + 1
    if k < 2 or k > MAX_LEVELS or resp.n_responses == 0:
        return None
    per_item = np.bincount(item, minlength=n)
    if resp.n_responses <= MAX_RESPONSES:
        return _fit_scored(resp, item, n, rank=rank, posterior=posterior, label=label, item_ids=item_ids, level=level)
    keep = smallest_first(per_item, id_hashes(item_ids), MAX_RESPONSES)
    idx = np.flatnonzero(keep)
    rows = keep[item]
    fit = _fit_scored(
        resp.subset(rows),
        np.searchsorted(idx, item[rows]),
        len(idx),
        rank=rank,
        posterior=posterior[idx],
        label=label[idx],
        item_ids=item_ids[idx],
        level=level,
    )
    if fit is None:
        return None
    pred = np.full(resp.n_responses, np.nan)
    pred[rows] = fit.predictive
    return replace(fit, predictive=pred)


def _fit_scored(
    resp: Responses,
    item: np.ndarray,
    n: int,
    *,
    rank: np.ndarray,
    posterior: np.ndarray,
    label: np.ndarray,
    item_ids: pd.Index,
    level: float,
) -> LatentScaleFit | None:
    """:func:`latent_scale_fit` on all of ``resp``."""
    from fusion_core.diagnostics.audit.items import label_quality  # items → safety → difficulty: import here

    k = int(np.asarray(rank).max()) + 1
    y = np.asarray(rank, dtype=np.int64)[resp.label]
    present, worker = np.unique(resp.worker, return_inverse=True)  # only the graders who respond here
    W = len(present)
    model = _Model(item, worker, y, n=n, n_workers=W, k=k)
    by_grade = np.zeros((n, k))
    by_grade[:, rank] = posterior  # class code → its level
    share = np.bincount(model.grade, minlength=k).astype(float)
    q0 = by_grade[:, model.grade] / share[model.grade][None, :]
    x, _, q, trace, its, done = model.fit(q0, model.start(), MAX_ITER)
    cuts = _cut_points(x, W, k)[0][:, 1:-1]
    crowd = np.bincount(worker, minlength=W) @ cuts / max(resp.n_responses, 1)  # the crowd's cut points (by responses)
    right = _right(q, np.searchsorted(crowd, model.u), rank, label)
    quality = label_quality(right[:, None], np.zeros(n, dtype=np.int64), level)
    per_item = np.bincount(item, minlength=n)
    scored = np.flatnonzero(per_item[item] >= 2)
    pred = np.full(resp.n_responses, np.nan)
    fold = (id_hashes(item_ids) % np.uint64(FOLDS)).astype(np.int64)[item]
    for f in range(FOLDS):  # a few folds, not responses
        train = fold != f
        rows = scored[fold[scored] == f]
        if not len(rows):
            continue
        sub = _Model(item[train], worker[train], y[train], n=n, n_workers=W, k=k)
        seen = np.bincount(worker[train], minlength=W) > 0
        # graders with no response outside the fold start at the prior's centre
        x0 = np.where(np.concatenate([seen, np.repeat(seen, k - 2), seen]), x, model.start())
        xf, gf, *_ = sub.fit(q * sub.has[:, None], x0, FOLD_ITER)
        pred[rows] = _predictive(model, item, worker, y, x=xf, log_g=gf, rows=rows)
    return LatentScaleFit(
        accuracy=quality.accuracy,
        low=quality.low,
        high=quality.high,
        cut_points=_by_annotator(cuts, present, resp.n_workers),
        noise=_by_annotator(np.exp(x[-W:]), present, resp.n_workers),
        iterations=its,
        converged=done,
        loglik=tuple(trace),
        n_items=n,
        predictive=pred,
    )


def _by_annotator(values: np.ndarray, present: np.ndarray, n_workers: int) -> np.ndarray:
    """Per-grader ``values`` of the graders ``present`` placed by annotator code (NaN for the others)."""
    out = np.full((n_workers, *values.shape[1:]), np.nan)
    out[present] = values
    return out


def _right(q: np.ndarray, grade: np.ndarray, rank: np.ndarray, label: np.ndarray) -> np.ndarray:
    """Per item, the posterior mass of the grid points whose grade is the chosen label's level."""
    k = int(rank.max()) + 1
    flat = (np.arange(len(q))[:, None] * k + grade[None, :]).ravel()
    by_grade = np.bincount(flat, weights=q.ravel(), minlength=len(q) * k).reshape(len(q), k)
    return by_grade[np.arange(len(q)), np.asarray(rank)[label]]
