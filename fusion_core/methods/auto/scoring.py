"""Held-out scores of ``auto``'s candidates (spec ``multilabel.md`` §8, [EXT]).

Each candidate is fitted on the training responses of a split and scored on the hidden ones by the joint
posterior predictive of every hidden item,

    S_i = log Σ_k q̂_ik Π_{r ∈ H_i} P̃_{w_r}(l_r | k),

in nats per hidden response (higher is better).  ``q̂`` is the candidate's training posterior; ``P̃`` is a response
model shrunk towards the crowd by β pseudo-responses (``prior_strength``):

* a candidate with a response model (a likelihood) uses its own fitted ``P_w(l | k)``, each worker's row shrunk
  towards the candidate's population row (:func:`fusion_core.methods.heldout.predictive_log_likelihood`);
* a voting rule without one (``mv``, ``wawa``, ``sml``) is scored through the one-coin model its posterior
  implies: a weighted vote is the decision rule of the one-coin model (weights = log-odds of each annotator's
  accuracy), so one M-step from ``q̂`` gives each annotator's accuracy
  ``a_w = (Σ_{training r of w} q̂_{i_r, l_r} + β ā) / (n_w + β)`` (ā: the crowd's), errors spread evenly.

A candidate whose labelling *collapsed* (some class that plurality vote gives to at least 1 % of the items gets
fewer than a quarter of that share, the ratio of :data:`~fusion_core.methods.priors.COLLAPSE_RATIO`) is marked
and never chosen: with one-sided annotators (labelling functions without their abstentions) every response is
predicted whatever the labels, so a constant labelling would otherwise score best.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusion_core import progress
from fusion_core.data.responses import Responses
from fusion_core.methods.heldout import PRIOR_STRENGTHS, predictive_log_likelihood
from fusion_core.methods.numerics import safe_log
from fusion_core.methods.priors import COLLAPSE_RATIO
from fusion_core.methods.registry import info

MIN_SHARE = 0.01  # classes plurality vote gives to fewer items are not checked for collapse


@dataclass
class CandidateScore:
    """One candidate's held-out result: ``item_scores`` S_i of every hidden item of every split (splits in order,
    items by code), the number of hidden responses, the β that produced the score, whether its labelling
    collapsed, its fitting time and the error that stopped it (if any)."""

    name: str
    item_scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    n_hidden: int = 0
    prior_strength: float | None = None
    collapsed: bool = False
    seconds: float = 0.0
    error: str | None = None

    @property
    def score(self) -> float:
        """Nats per hidden response (NaN when the candidate failed)."""
        if self.error is not None or self.n_hidden == 0:
            return float("nan")
        return float(self.item_scores.sum() / self.n_hidden)

    @property
    def usable(self) -> bool:
        return self.error is None and not self.collapsed and bool(np.isfinite(self.score))


def plurality_shares(posterior: np.ndarray) -> np.ndarray:
    """Share of items whose largest posterior entry is each class; an exact tie counts evenly for the tied
    classes (so the shares do not depend on the order of the labels)."""
    top = posterior >= posterior.max(axis=1, keepdims=True) - 1e-12
    return (top / top.sum(axis=1, keepdims=True)).mean(axis=0)


def is_collapsed(posterior: np.ndarray, vote_shares: np.ndarray) -> bool:
    """Some class plurality vote gives to ≥ 1 % of items gets < :data:`COLLAPSE_RATIO` of that share."""
    seen = vote_shares >= MIN_SHARE
    return bool(np.any(plurality_shares(posterior)[seen] < COLLAPSE_RATIO * vote_shares[seen]))


def one_coin_predictive(
    train: Responses, test: Responses, posterior: np.ndarray, prior_strengths: Sequence[float]
) -> np.ndarray:
    """``log P̃_w(l | k)`` (β × hidden responses × K) of the one-coin model implied by ``posterior`` (module
    docstring)."""
    K = posterior.shape[1]
    W = train.n_workers
    agree = np.bincount(train.worker, weights=posterior[train.item, train.label], minlength=W)
    n = np.bincount(train.worker, minlength=W).astype(float)
    crowd = agree.sum() / max(n.sum(), 1.0)
    same = np.arange(K)[None, :] == test.label[:, None]
    out = np.empty((len(prior_strengths), test.n_responses, K))
    for j, beta in enumerate(prior_strengths):  # a few β values, not responses
        acc = (agree + beta * crowd) / np.maximum(n + beta, 1e-300)
        a = acc[test.worker][:, None]
        out[j] = np.where(same, safe_log(a), safe_log((1.0 - a) / (K - 1)))
    return out


def item_scores(posterior: np.ndarray, test: Responses, log_pred: np.ndarray) -> np.ndarray:
    """S_i (hidden items by code × β) from ``log_pred`` (β × hidden responses × K)."""
    items = np.unique(test.item)
    K = posterior.shape[1]
    out = np.empty((len(items), log_pred.shape[0]))
    for j in range(log_pred.shape[0]):
        H = np.zeros((posterior.shape[0], K))
        for k in range(K):  # K classes, not responses
            H[:, k] = np.bincount(test.item, weights=log_pred[j, :, k], minlength=posterior.shape[0])
        tot = safe_log(posterior[items]) + H[items]
        mx = tot.max(axis=1)
        out[:, j] = mx + np.log(np.exp(tot - mx[:, None]).sum(axis=1))
    return out


def _split_scores(
    est: Any, resp: Responses, hidden: np.ndarray, fit_kwargs: Mapping[str, Any], betas: Sequence[float]
) -> tuple[np.ndarray, bool]:
    """Fit ``est`` on the training responses of one split; S_i of its hidden items (× β) and whether it collapsed."""
    train, test = resp.subset(~hidden), resp.subset(hidden)
    est.fit(train, **fit_kwargs)
    post = np.asarray(est.result_.posterior, float)
    votes = train.vote_counts().astype(float)
    has = votes.sum(axis=1) > 0
    collapsed = is_collapsed(post[has], plurality_shares(votes[has]))
    if info(est.method_name).probabilistic:
        ll = np.asarray(est.response_log_likelihood(test), float)
        conf = getattr(est, "confusion_", None)
        log_pred = predictive_log_likelihood(ll, train, test, posterior=post, prior_strengths=betas, confusion=conf)
    else:
        log_pred = one_coin_predictive(train, test, post, betas)
    return item_scores(post, test, log_pred), collapsed


def score_candidate(
    name: str,
    make: Any,
    resp: Responses,
    masks: Sequence[np.ndarray],
    *,
    fit_kwargs: Mapping[str, Any],
    prior_strength: float | str,
) -> CandidateScore:
    """Held-out score of the candidate ``make()`` (a fresh estimator per split); warnings of these fits are
    suppressed, a failure is reported in ``error``."""
    betas = PRIOR_STRENGTHS if prior_strength == "auto" else (float(prior_strength),)
    t0 = time.perf_counter()
    per_split, collapsed = [], False
    try:
        for b, hidden in enumerate(masks):
            with progress.stage(f"held-out split {b + 1}/{len(masks)}: {name}"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                S, c = _split_scores(make(), resp, hidden, fit_kwargs, betas)
            per_split.append(S)
            collapsed = collapsed or c
    except Exception as exc:  # a failing candidate is reported, not fatal
        return CandidateScore(name, seconds=time.perf_counter() - t0, error=f"{type(exc).__name__}: {exc}")
    pooled = np.concatenate(per_split)
    j = int(np.argmax(pooled.sum(axis=0)))
    n_hidden = int(sum(int(m.sum()) for m in masks))
    return CandidateScore(
        name, pooled[:, j], n_hidden, float(betas[j]), collapsed=collapsed, seconds=time.perf_counter() - t0
    )
