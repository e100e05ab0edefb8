"""Which model of the crowd predicts a left-out response better: the latent-class model or the population model?

Two plausible models of the same responses, with different answers to "how often is a label right":

* the **latent-class model** (Dawid & Skene 1979; here the difficulty check's one-type fit, :mod:`.difficulty`):
  each item has one true class, and its responses are independent draws from the annotators' confusion rows
  ``Θ_w[c, ·]``;
* the **population model**: each item's responses are exchangeable draws from the item's own share vector
  ``s_i ~ Dirichlet(α ρ)`` (``ρ`` the overall label shares; the Dirichlet-multinomial), and a known answer is one
  more such draw (:func:`.safety.population_shares`).

Neither nests the other, and no response-based test decides between them, but they predict a response *left out*
differently: the latent-class model through the item's posterior from its other responses and the annotator's
confusion row, ``p_LC(y_r | others) = Σ_c q_{i,−r}(c) Θ_{w,−r}[c, y_r]``, the population model through the other
responses' shares, ``p_pop(y_r | others) = (n_{i,y_r} − 1 + α ρ_{y_r}) / (n_i − 1 + α)``.  **Stacking** (Yao,
Vehtari, Simpson & Gelman 2018, "Using stacking to average Bayesian predictive distributions", Bayesian Analysis 13,
eq. 3) weighs them by the mixture that predicts the left-out responses best,

    ŵ = argmax_{w ∈ [0, 1]}  Σ_r v_r log(w p_LC(y_r | others) + (1 − w) p_pop(y_r | others)),

over every response of an item with two or more responses (``v_r`` the annotator-balanced weights of the held-out
scores, :func:`fusion_core.methods.auto.scoring.response_weights`: a few heavy annotators do not decide alone).
The objective is concave in ``w``; its derivative is monotone, so ``ŵ`` is found by bisection.  When the
latent-class model is right, its predictive is the true one and no mixture beats it (Gibbs' inequality): ``ŵ → 1``.
Where items carry errors shared by their annotators, the item's own shares predict its next response better and
``ŵ`` falls.

Leave-one-out without refitting: the item's posterior without ``r`` is ``q_{i,−r}(c) ∝ q_i(c) / Θ_w[c, y_r]`` (the
product form of the posterior), and the annotator's confusion row without ``r`` removes ``r``'s expected count
``q_i(c)`` from the shrunk counts; ``α`` maximises the population model's own leave-one-out score over a grid
(empirical Bayes).  All vectorised over responses; cost ``O(responses × classes × grid)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.methods.auto.scoring import response_weights

ALPHAS = np.geomspace(0.05, 500.0, 41)
"""Grid of the population model's Dirichlet concentration ``α`` (pseudo-responses at the overall shares)."""
SHRINKS = np.geomspace(0.5, 512.0, 11)
"""Grid of the latent-class model's shrinkage (pseudo-responses at the pooled confusion rows per annotator row)."""
FLOOR = 1e-12
"""Smallest predictive probability (log-space safety)."""


@dataclass(frozen=True)
class Stacking:
    """The stacking of the latent-class and population models (module docstring): ``weight`` ``ŵ`` of the
    latent-class model and its standard error ``weight_sd`` (the
    sandwich of the M-estimator, scores summed by item: responses of an item are not independent),
    ``concentration`` ``α``, ``shrink`` the latent-class model's shrinkage, the mean weighted log predictive per left-out response of each
    model and of the stacked mixture (nats), and ``n_responses`` the responses scored."""

    weight: float
    weight_sd: float
    concentration: float
    shrink: float
    score_latent: float
    score_population: float
    score_stacked: float
    n_responses: int
    weight_scale: float | None = None
    score_scale: float | None = None
    weight_cov: tuple[tuple[float, float], tuple[float, float]] | None = None

    def summary(self) -> dict:
        """Plain JSON values (for ``summary.json``)."""
        return {
            "latent_class_weight": self.weight,
            "latent_class_weight_sd": self.weight_sd,
            "population_concentration": self.concentration,
            "latent_class_shrink": self.shrink,
            "log_score_latent_class": self.score_latent,
            "log_score_population": self.score_population,
            "log_score_stacked": self.score_stacked,
            "responses_scored": self.n_responses,
            "latent_scale_weight": self.weight_scale,
            "log_score_latent_scale": self.score_scale,
        }


def confusion_counts(resp: Responses, w_resp: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Each annotator's expected confusion counts from per-response class weights ``w_resp`` (responses × K;
    annotators × K(true) × K(reported)) and the pooled confusion rows (K × K, rows sum to 1)."""
    W = resp.n_workers
    flat = ((resp.worker * K)[:, None] * K + np.arange(K)[None, :] * K + resp.label[:, None]).ravel()
    counts = np.bincount(flat, weights=w_resp.ravel(), minlength=W * K * K).reshape(W, K, K)
    pooled = counts.sum(axis=0) + 1e-2
    return counts, pooled / pooled.sum(axis=1, keepdims=True)


def latent_class_loo(
    resp: Responses,
    item: np.ndarray,
    n: int,
    *,
    prior: np.ndarray,
    post: np.ndarray,
    counts: np.ndarray,
    scored: np.ndarray,
) -> np.ndarray:
    """``p_LC(y_r | others)`` of the responses ``scored`` (boolean per response), every annotator's confusion row
    taken without the item's own expected counts (cross-fitted by item): ``post`` the items' posterior (items × K),
    ``prior`` the class prior, ``counts`` the annotators' shrunk confusion counts (annotators × K × K,
    unnormalised), ``item`` the responses' item codes (0 … ``n`` − 1)."""
    own = counts[resp.worker, :, resp.label]  # responses × K: C_w[c, y_r]
    total = counts.sum(axis=2)[resp.worker]  # responses × K: Σ_k C_w[c, k]
    return _loo(own, total, post[item], item, n, prior=prior, scored=scored)


def _loo(
    own: np.ndarray,
    total: np.ndarray,
    q: np.ndarray,
    item: np.ndarray,
    n: int,
    *,
    prior: np.ndarray,
    scored: np.ndarray,
) -> np.ndarray:
    """:func:`latent_class_loo` from each response's count ``own`` = C_w[c, y_r] and row total (responses × K)
    and its item's posterior ``q`` (responses × K)."""
    K = q.shape[1]
    theta = np.clip((own - q) / np.maximum(total - q, 1e-300), FLOOR, 1.0)  # Θ_w[c, y_r] without item i
    log_theta = np.log(theta)
    flat = (item[:, None] * K + np.arange(K)[None, :]).ravel()
    loglik = np.bincount(flat, weights=log_theta.ravel(), minlength=n * K).reshape(n, K)
    log_minus = np.log(np.clip(prior, FLOOR, None))[None, :] + loglik[item[scored]] - log_theta[scored]
    log_minus -= log_minus.max(axis=1, keepdims=True)
    q_minus = np.exp(log_minus)
    q_minus /= q_minus.sum(axis=1, keepdims=True)
    return np.clip((q_minus * theta[scored]).sum(axis=1), FLOOR, 1.0)


def population_loo(
    resp: Responses, item: np.ndarray, n: int, scored: np.ndarray, v: np.ndarray
) -> tuple[np.ndarray, float]:
    """``p_pop(y_r | others)`` of the responses ``scored`` at the concentration ``α`` of :data:`ALPHAS` that
    maximises their weighted (``v``) leave-one-out log score, and that ``α``."""
    K = resp.n_classes
    votes = np.bincount(item * K + resp.label, minlength=n * K).reshape(n, K).astype(float)
    rho = np.bincount(resp.label, minlength=K).astype(float) + 1.0
    rho /= rho.sum()
    i, y = item[scored], resp.label[scored]
    same = votes[i, y] - 1.0
    others = votes[i].sum(axis=1) - 1.0
    best, best_alpha, best_p = -np.inf, float(ALPHAS[0]), np.zeros(len(i))
    for alpha in ALPHAS:  # a grid of concentrations, not responses
        p = np.clip((same + alpha * rho[y]) / (others + alpha), FLOOR, 1.0)
        s = float(v @ np.log(p))
        if s > best:
            best, best_alpha, best_p = s, float(alpha), p
    return best_p, best_alpha


def stacking_weight(a: np.ndarray, b: np.ndarray, v: np.ndarray, iterations: int = 60, tol: float = 1e-10) -> float:
    """``argmax_{w ∈ [0, 1]} Σ_r v_r log(w a_r + (1 − w) b_r)``: concave, so Newton steps on the monotone derivative,
    kept inside a bracket that shrinks around the root (a bisection step whenever Newton leaves it)."""
    d = a - b

    def slopes(w: float) -> tuple[float, float]:
        x = d / np.maximum(w * a + (1.0 - w) * b, 1e-300)
        return float(v @ x), float(v @ (x * x))

    if slopes(1.0)[0] >= 0.0:
        return 1.0
    if slopes(0.0)[0] <= 0.0:
        return 0.0
    lo, hi, w = 0.0, 1.0, 0.5
    for _ in range(iterations):  # Newton/bisection steps, not responses
        g, h = slopes(w)
        lo, hi = (w, hi) if g > 0.0 else (lo, w)
        step = g / max(h, 1e-300)
        if abs(step) < tol or hi - lo < tol:
            break
        w = w + step if lo < w + step < hi else 0.5 * (lo + hi)
    return float(w)


def weight_sd(a: np.ndarray, b: np.ndarray, v: np.ndarray, w: float, item: np.ndarray) -> float:
    """Sandwich standard error of the stacking weight ``w``: ``√(Σ_i G_i²) / |H|`` with ``G_i`` the item's summed
    scores ``v_r (a_r − b_r) / m_r`` and ``H = −Σ_r v_r (a_r − b_r)² / m_r²`` (``m_r`` the mixture's
    probability); items cluster their responses."""
    m = np.maximum(w * a + (1.0 - w) * b, 1e-300)
    g = v * (a - b) / m
    h = float((v * ((a - b) / m) ** 2).sum())
    G = np.bincount(item, weights=g)
    return float(np.sqrt((G**2).sum()) / max(h, 1e-300))


def stacking_weights(p: np.ndarray, v: np.ndarray, item: np.ndarray, iterations: int = 2000, tol: float = 1e-10):
    """``argmax_{w ∈ simplex} Σ_r v_r log(Σ_m w_m p_mr)`` for M models (``p``: M × responses) by the EM updates of
    mixture weights ``w_m ← Σ_r v_r w_m p_mr / m_r`` (``v`` sums to 1; the objective never falls), and the sandwich
    covariance of the first M − 1 weights (the last is ``1 − Σ``; scores summed by item, as :func:`weight_sd`)."""
    m_models = p.shape[0]
    w = np.full(m_models, 1.0 / m_models)
    for _ in range(iterations):  # EM steps on M weights, not responses
        mix = np.maximum(w @ p, 1e-300)
        new = w * (p @ (v / mix))
        new /= new.sum()
        if np.abs(new - w).max() < tol:
            w = new
            break
        w = new
    mix = np.maximum(w @ p, 1e-300)
    d = (p[:-1] - p[-1]) / mix  # (M − 1) × responses: the score of each free weight
    h = (d * v) @ d.T
    g = np.stack([np.bincount(item, weights=v * x) for x in d])
    cov = np.linalg.pinv(h) @ (g @ g.T) @ np.linalg.pinv(h)
    return w, cov


def stack_models(
    resp: Responses,
    item: np.ndarray,
    n: int,
    prior: np.ndarray,
    post: np.ndarray,
    *,
    scale: np.ndarray | None = None,
) -> Stacking | None:
    """Stack the latent-class model (class ``prior``, items' posterior ``post``: :func:`latent_class_loo`, its
    annotators' rows shrunk towards the pooled rows by the strength of :data:`SHRINKS` that predicts best) and the
    population model on ``resp`` (responses of ``n`` items coded ``item``); None when no item has two or more
    responses.  ``scale``: a third model's predictive of each response left out of its item (NaN where it has
    none; the latent-scale model of graded labels, :mod:`.latent_scale`): the three are then stacked by
    :func:`stacking_weights` on the responses it predicts."""
    per_item = np.bincount(item, minlength=n)
    scored = per_item[item] >= 2
    if not scored.any():
        return None
    v = response_weights(resp)[scored]
    v = v / v.sum()
    q = post[item]
    raw, pooled = confusion_counts(resp, q, post.shape[1])
    own, total, pooled_y = raw[resp.worker, :, resp.label], raw.sum(axis=2)[resp.worker], pooled[:, resp.label].T
    p_lc, best, shrink = np.zeros(int(scored.sum())), -np.inf, float(SHRINKS[0])
    for s in SHRINKS:  # a grid of strengths, not responses (pooled rows sum to 1: each adds s to the row total)
        p = _loo(own + s * pooled_y, total + s, q, item, n, prior=prior, scored=scored)
        score = float(v @ np.log(p))
        if score > best:
            p_lc, best, shrink = p, score, float(s)
    p_pop, alpha = population_loo(resp, item, n, scored, v)
    w = stacking_weight(p_lc, p_pop, v)
    if scale is not None and np.isfinite(scale[scored]).any():
        on = np.isfinite(scale[scored])  # the responses the third model predicts
        p_lc, p_pop, v, it = p_lc[on], p_pop[on], v[on] / v[on].sum(), item[scored][on]
        p_ls = np.clip(scale[scored][on], FLOOR, 1.0)
        ws, cov = stacking_weights(np.stack([p_lc, p_ls, p_pop]), v, it)
        return Stacking(
            weight=float(ws[0]),
            weight_sd=float(np.sqrt(max(cov[0, 0], 0.0))),
            concentration=alpha,
            shrink=shrink,
            score_latent=float(v @ np.log(p_lc)),
            score_population=float(v @ np.log(p_pop)),
            score_stacked=float(v @ np.log(ws @ np.stack([p_lc, p_ls, p_pop]))),
            n_responses=int(on.sum()),
            weight_scale=float(ws[1]),
            score_scale=float(v @ np.log(p_ls)),
            weight_cov=((float(cov[0, 0]), float(cov[0, 1])), (float(cov[1, 0]), float(cov[1, 1]))),
        )
    return Stacking(
        weight=w,
        weight_sd=weight_sd(p_lc, p_pop, v, w, item[scored]),
        concentration=alpha,
        shrink=shrink,
        score_latent=float(v @ np.log(p_lc)),
        score_population=float(v @ np.log(p_pop)),
        score_stacked=float(v @ np.log(w * p_lc + (1.0 - w) * p_pop)),
        n_responses=int(scored.sum()),
    )
