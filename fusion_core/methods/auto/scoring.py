"""Held-out scores of ``auto``'s candidates (spec ``multilabel.md`` §8, [EXT]; design in ``docs/AUTO.md``).

Each candidate is fitted on the training responses of a split and scored on every hidden response r by its
posterior predictive

    m_r = log Σ_k q̂_{i_r k} P̃_{w_r}(l_r | k),

and the score is the weighted mean ``Σ_r v_r m_r / Σ_r v_r`` in nats per hidden response (higher is better).
``q̂`` is the candidate's training posterior; ``P̃`` is a response model shrunk towards the crowd by β
pseudo-responses (``prior_strength``):

* a candidate with a response model (a likelihood) uses its own fitted ``P_w(l | k)``, each worker's row shrunk
  towards the candidate's population row (:func:`fusion_core.methods.heldout.predictive_log_likelihood`);
* a voting rule without one (``mv``, ``wawa``, ``sml``) is scored through the one-coin model its posterior
  implies: a weighted vote is the decision rule of the one-coin model (weights = log-odds of each annotator's
  accuracy), so one M-step from ``q̂`` gives each annotator's accuracy
  ``a_w = (Σ_{training r of w} q̂_{i_r, l_r} + β ā) / (n_w + β)`` (ā: the crowd's), errors spread evenly.

**Annotator-balanced weights** ``v_r = min(1, c / n_{w_r})`` (``c``: the median number of responses per
annotator, ``n_w``: annotator w's responses): every annotator counts at most as much as a typical one.  Predicting
responses well is not labelling well when a few heavy annotators give most responses: a full confusion model can
learn their label preferences and shared errors and move its latent classes towards them, which predicts *their*
held-out responses better while the labels drift (docs/AUTO.md, the heavy-annotator study).  Balanced weights
make the score ask how well the labels predict the many independent annotators.

A candidate whose labelling *collapsed* (some class that plurality vote gives to at least 1 % of the items gets
fewer than a quarter of that share, the ratio of :data:`~fusion_core.methods.priors.COLLAPSE_RATIO`) is marked
and never chosen: with one-sided annotators (labelling functions without their abstentions) every response is
predicted whatever the labels, so a constant labelling would otherwise score best.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from fusion_core import progress
from fusion_core.data.responses import Responses
from fusion_core.methods.heldout import PRIOR_STRENGTHS, predictive_log_likelihood
from fusion_core.methods.numerics import safe_log
from fusion_core.methods.priors import COLLAPSE_RATIO
from fusion_core.methods.registry import info
from fusion_core.methods.results import HeldoutCheck

MIN_SHARE = 0.01  # classes plurality vote gives to fewer items are not checked for collapse
PRUNE_SE = 4.0  # after the first of several splits, candidates this many standard errors behind are dropped


@dataclass
class CandidateScore:
    """One candidate's held-out result: ``splits`` holds, for each split it was scored on, the weighted sum
    ``Σ_{r ∈ H_i} v_r m_r`` of every hidden item (items by code × β values), ``hidden`` the total weight ``Σ v_r``
    of each split's hidden responses; ``prior_strength`` is the β with the best pooled score.  ``collapsed``: its labelling collapsed on some split; ``pruned``: dropped after
    the first split; ``error``: the failure that stopped it."""

    name: str
    splits: list[np.ndarray] = field(default_factory=list)
    hidden: list[float] = field(default_factory=list)
    betas: tuple[float, ...] = (2.0,)
    collapsed: bool = False
    pruned: bool = False
    check: HeldoutCheck | None = None
    seconds: float = 0.0
    error: str | None = None

    @property
    def beta_index(self) -> int:
        return int(np.argmax(np.concatenate(self.splits).sum(axis=0))) if self.splits else 0

    @property
    def prior_strength(self) -> float | None:
        return float(self.betas[self.beta_index]) if self.splits else None

    def pooled(self, n_splits: int | None = None) -> tuple[np.ndarray, float]:
        """(item sums at the chosen β over the first ``n_splits`` splits, the total weight of their hidden
        responses)."""
        k = len(self.splits) if n_splits is None else n_splits
        if k == 0:
            return np.zeros(0), 0.0
        return np.concatenate(self.splits[:k])[:, self.beta_index], float(sum(self.hidden[:k]))

    @property
    def item_scores(self) -> np.ndarray:
        return self.pooled()[0]

    @property
    def n_hidden(self) -> float:
        """Total weight of the hidden responses scored (their number when every weight is 1)."""
        return float(sum(self.hidden))

    @property
    def score(self) -> float:
        """Weighted nats per hidden response (NaN when the candidate failed)."""
        if self.error is not None or self.n_hidden == 0:
            return float("nan")
        return float(self.item_scores.sum() / self.n_hidden)

    @property
    def usable(self) -> bool:
        return self.error is None and not self.collapsed and not self.pruned and bool(np.isfinite(self.score))


def paired_gap(best: CandidateScore, other: CandidateScore) -> tuple[float, float]:
    """(D, SE): difference of ``other`` to ``best`` in weighted nats per hidden response over the splits both were
    scored on, and its standard error (paired over hidden items, so responses of one item count as one cluster)."""
    if other is best:
        return 0.0, 0.0
    k = min(len(best.splits), len(other.splits))
    a, n_hidden = best.pooled(k)
    d = a - other.pooled(k)[0]
    if n_hidden == 0:
        return float("nan"), float("nan")
    se = float(d.std(ddof=1) * np.sqrt(len(d)) / n_hidden) if len(d) > 1 else 0.0
    return float(d.sum() / n_hidden), se


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


def response_weights(resp: Responses) -> np.ndarray:
    """``v_r = min(1, c / n_{w_r})`` per response, ``c`` the median number of responses per annotator (module
    docstring): heavy annotators count as a typical annotator, the others fully."""
    n_w = np.bincount(resp.worker, minlength=resp.n_workers).astype(float)
    c = float(np.median(n_w[n_w > 0])) if np.any(n_w > 0) else 1.0
    return np.minimum(1.0, c / np.maximum(n_w, 1.0))[resp.worker]


def discount(resp: Responses) -> float:
    """Share of the responses the annotator-balanced weights discount, ``1 − Σ_r v_r / R``: near 0 when every
    annotator gives about as many responses as the others, near 1 when a handful give almost all of them."""
    if resp.n_responses == 0:
        return 0.0
    return float(1.0 - response_weights(resp).sum() / resp.n_responses)


def item_scores(posterior: np.ndarray, test: Responses, log_pred: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Per hidden item, ``Σ_{r ∈ H_i} v_r m_r`` (hidden items by code × β) from ``log_pred`` (β × hidden
    responses × K) and the weights ``weight`` of the hidden responses."""
    n_items = posterior.shape[0]
    items = np.flatnonzero(np.bincount(test.item, minlength=n_items))  # np.unique's, without a sort
    log_q = safe_log(posterior[test.item])
    out = np.empty((len(items), log_pred.shape[0]))
    for j in range(log_pred.shape[0]):  # a few β values, not responses
        tot = log_q + log_pred[j]
        mx = tot.max(axis=1)
        m = mx + np.log(np.exp(tot - mx[:, None]).sum(axis=1))
        out[:, j] = np.bincount(test.item, weights=weight * m, minlength=n_items)[items]
    return out


@dataclass(frozen=True)
class Split:
    """What every candidate of one split shares, built once per split: the training and hidden responses (so their
    cached count matrices are built once too) and the class shares of plurality vote on the training responses."""

    train: Responses
    test: Responses
    test_weight: np.ndarray  # v_r of each hidden response
    has: np.ndarray  # items with training responses
    vote_shares: np.ndarray

    @classmethod
    def of(cls, resp: Responses, hidden: np.ndarray, weight: np.ndarray) -> Split:
        train = resp.subset(~hidden)
        votes = train.vote_counts().astype(float)
        has = votes.sum(axis=1) > 0
        return cls(train, resp.subset(hidden), weight[hidden], has, plurality_shares(votes[has]))


def heldout_check(posterior: np.ndarray, test: Responses, log_pred: np.ndarray, weight: np.ndarray) -> HeldoutCheck:
    """Agreement of the training labels with the hidden responses, observed and as the model predicts it
    (:class:`~fusion_core.methods.results.HeldoutCheck`).  The prediction uses each hidden response's annotator
    accuracy on its own label, ``a_r = P̃_w(l_r | l_r)``, with errors spread evenly: ``P(r = L_i) = p a_r +
    (1 − p)(1 − a_r)/(K − 1)``, ``p`` the label's probability."""
    K = posterior.shape[1]
    label = posterior.argmax(axis=1)
    p = posterior[test.item, label[test.item]]
    a = np.exp(log_pred[np.arange(test.n_responses), test.label])
    off = (1.0 - a) / max(K - 1, 1)
    w = weight / max(float(weight.sum()), 1e-300)
    items = np.flatnonzero(np.bincount(test.item, minlength=posterior.shape[0]))
    return HeldoutCheck(
        agreement=float((w * (label[test.item] == test.label)).sum()),
        expected_agreement=float((w * (p * a + (1.0 - p) * off)).sum()),
        discrimination=float((w * (a - off)).sum()),
        confidence=float(posterior[items].max(axis=1).mean()) if len(items) else float("nan"),
        n_hidden=int(test.n_responses),
    )


def _split_scores(
    est: Any, split: Split, fit_kwargs: Mapping[str, Any], betas: Sequence[float]
) -> tuple[np.ndarray, bool, HeldoutCheck]:
    """Fit ``est`` on the training responses of one split; S_i of its hidden items (× β), whether it collapsed, and
    its labels' held-out check (at the first β)."""
    train, test = split.train, split.test
    est.fit(train, **fit_kwargs)
    post = np.asarray(est.result_.posterior, float)
    collapsed = is_collapsed(post[split.has], split.vote_shares)
    if info(est.method_name).probabilistic:
        ll = np.asarray(est.response_log_likelihood(test), float)
        conf = getattr(est, "confusion_", None)
        log_pred = predictive_log_likelihood(ll, train, test, posterior=post, prior_strengths=betas, confusion=conf)
    else:
        log_pred = one_coin_predictive(train, test, post, betas)
    check = heldout_check(post, test, log_pred[0], split.test_weight)
    return item_scores(post, test, log_pred, split.test_weight), collapsed, check


def _score_split(score: CandidateScore, make: Callable[[], Any], split: Split, fit_kwargs: Mapping[str, Any]) -> None:
    """Add one split to ``score`` (warnings of the fit suppressed; a failure goes to ``error``)."""
    t0 = time.perf_counter()
    try:
        with progress.stage(score.name), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            S, collapsed, check = _split_scores(make(), split, fit_kwargs, score.betas)
    except Exception as exc:  # a failing candidate is reported, not fatal
        score.error = f"{type(exc).__name__}: {exc}"
    else:
        score.splits.append(S)
        score.hidden.append(float(split.test_weight.sum()))
        score.collapsed = score.collapsed or collapsed
        score.check = score.check or check
    score.seconds += time.perf_counter() - t0


def _prune(scores: Sequence[CandidateScore], n_se: float) -> None:
    """Drop the candidates more than ``n_se`` standard errors behind the best after the first split."""
    ok = [s for s in scores if s.usable]
    if not ok:
        return
    best = max(ok, key=lambda s: s.score)
    for s in ok:
        gap, se = paired_gap(best, s)
        s.pruned = bool(gap > n_se * se)


def score_candidates(
    names: Sequence[str],
    make: Callable[[str], Any],
    resp: Responses,
    masks: Sequence[np.ndarray],
    *,
    fit_kwargs: Mapping[str, Any],
    prior_strength: float | str,
) -> list[CandidateScore]:
    """Held-out scores of every candidate (``make(name)``: a fresh estimator), split by split; after the first of
    several splits, candidates :data:`PRUNE_SE` standard errors behind the best are not fitted again."""
    betas = PRIOR_STRENGTHS if prior_strength == "auto" else (float(prior_strength),)
    scores = [CandidateScore(name, betas=tuple(betas)) for name in names]
    weight = response_weights(resp)
    for b, hidden in enumerate(masks):
        split: Split | None = None
        for s in scores:
            if s.error is None and not s.pruned and not s.collapsed:
                split = Split.of(resp, hidden, weight) if split is None else split
                with progress.stage(f"held-out split {b + 1}/{len(masks)}"):
                    _score_split(s, partial(make, s.name), split, fit_kwargs)
        if b == 0 and len(masks) > 1:
            _prune(scores, PRUNE_SE)
    return scores
