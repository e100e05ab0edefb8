"""Unsupervised model choice by held-out annotation log-likelihood (spec ``multilabel.md`` §8, [EXT]).

Procedure (§8 and pitfall 9): the unit is one whole response.  For split b = 0..B−1 (seed ``random_state + b``)
hide a uniformly random ``frac`` of all responses, drawn from those whose item and worker each have ≥ 2
responses, then un-hide one response of any item or worker left without training responses.  Every candidate
is fitted on the same training responses (same coding, so posteriors and parameters line up) and scored on the
hidden ones by the joint posterior predictive

    S_i = log Σ_k q̂_ik Π_{r ∈ H_i} P(r | k; θ̂)          (classes k; label sets for the multi-label model)

in nats per hidden response.  The candidate score is the mean over splits.

P(r | k; θ̂) is a posterior predictive, not the plug-in fitted value [OURS].  With q̂ the candidate's training
posterior, ñ_wk = Σ_{training responses of w} q̂_ik (worker w's expected responses on true class k) and
P̄(l | k) = Σ_w ñ_wk P_w(l | k; θ̂) / Σ_w ñ_wk (the candidate's own population response distribution; for
methods without confusion matrices, e.g. context curves, the pooled training responses
Σ_{responses with label l} q̂_ik / Σ_{responses} q̂_ik),

    P̃_w(l | k) = (ñ_wk · P_w(l | k; θ̂) + β · P̄(l | k)) / (ñ_wk + β)

i.e. each worker's fitted row shrunk towards the population's by β pseudo-responses: for Dawid–Skene exactly the
Dirichlet(β P̄) posterior predictive given the expected counts.  β (``prior_strength``) defaults to 2: enough
that a cell training never showed costs a few nats instead of tens (the plug-in fit of a full confusion matrix on sparse data puts near-zero mass on such cells), small next to the
responses of any annotator whose row matters.  β = 0 is the spec's plug-in score; ``"auto"`` picks β per candidate
from :data:`PRIOR_STRENGTHS` by its own mean held-out score (empirical Bayes).  The same rule applies to every
candidate.  ``auto`` (:mod:`fusion_core.methods.auto`) uses :func:`predictive_log_likelihood` on hashed folds.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses, as_responses
from fusion_core.errors import UserInputError
from fusion_core.methods.numerics import safe_log


@dataclass
class HeldoutScore:
    """One candidate's held-out result."""

    name: str
    score: float  # mean over splits of Σ_i S_i / |H|  (nats per hidden response; higher is better)
    split_scores: list[float]
    item_scores: np.ndarray  # S_i of every (split, hidden item), pooled in split order
    n_hidden: list[int]
    seconds: float
    n_parameters: int | None = None
    error: str | None = None
    prior_strength: float | None = None  # β of the posterior predictive that produced ``score``

    @property
    def se(self) -> float:
        """Standard error of the candidate score over splits (0 with one split)."""
        s = np.asarray(self.split_scores, float)
        return float(s.std(ddof=1) / np.sqrt(len(s))) if len(s) > 1 else 0.0


def heldout_splits(
    item: np.ndarray,
    worker: np.ndarray,
    n_items: int,
    n_workers: int,
    *,
    frac: float = 0.1,
    n_splits: int = 3,
    random_state: int = 0,
) -> list[np.ndarray]:
    """Boolean masks of hidden responses, one per split (spec §8 steps 1–2)."""
    if not 0 < frac < 1:
        raise UserInputError(f"frac (share of responses to hide) must be in (0, 1), got {frac}.")
    if int(n_splits) < 1:
        raise UserInputError(f"n_splits must be ≥ 1, got {n_splits}.")
    R = len(item)
    per_item = np.bincount(item, minlength=n_items)
    per_worker = np.bincount(worker, minlength=n_workers)
    eligible = np.flatnonzero((per_item[item] >= 2) & (per_worker[worker] >= 2))
    n_hide = min(round(frac * R), len(eligible))
    if n_hide == 0:
        raise UserInputError("no response can be held out: every item or worker has a single response.")
    masks = []
    for b in range(int(n_splits)):
        rng = np.random.default_rng(int(random_state) + b)
        hidden = np.zeros(R, bool)
        hidden[rng.choice(eligible, size=n_hide, replace=False)] = True
        for codes, n in ((item, n_items), (worker, n_workers)):
            train_cnt = np.bincount(codes[~hidden], minlength=n)
            h_idx = np.flatnonzero(hidden)
            lost = train_cnt[codes[h_idx]] == 0
            if lost.any():
                cand = h_idx[lost]
                _, first = np.unique(codes[cand], return_index=True)
                hidden[cand[first]] = False
        masks.append(hidden)
    return masks


def _clone(est):
    return type(est)(**est.get_params())


def _is_multilabel(est) -> bool:
    return hasattr(est, "heldout_item_scores")


PRIOR_STRENGTHS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
"""Grid of β (pseudo-responses) searched when ``prior_strength="auto"``."""


def predictive_log_likelihood(
    log_lik: np.ndarray,
    train: Responses,
    test: Responses,
    *,
    posterior: np.ndarray,
    prior_strengths: Sequence[float],
    confusion: np.ndarray | None = None,
) -> np.ndarray:
    """``log P̃_w(l | k)`` of the held-out responses ``test``, ``len(prior_strengths) × R_h × K``, from the fitted
    ``log P_w(l | k)`` (R_h × K): each worker's row shrunk towards the population one by β (module docstring).
    ``confusion`` (workers × true × reported), when the model has one, defines the population row."""
    test_worker, test_label = test.worker, test.label
    K = posterior.shape[1]
    W = int(max(train.worker.max(initial=-1), test_worker.max(initial=-1))) + 1
    q_tr = posterior[train.item]
    n_wk = np.empty((W, K))
    for k in range(K):  # K classes, not responses
        n_wk[:, k] = np.bincount(train.worker, weights=q_tr[:, k], minlength=W)
    if confusion is not None and np.shape(confusion) == (W, K, K):
        pooled = np.einsum("wk,wkl->kl", n_wk, np.asarray(confusion, float))  # true × reported
    else:
        pooled = np.stack([np.bincount(train.label, weights=q_tr[:, k], minlength=K)[:K] for k in range(K)])
    pooled /= np.maximum(pooled.sum(axis=1, keepdims=True), 1e-300)
    n = n_wk[test_worker]
    p = np.exp(log_lik)
    pbar = pooled[:, test_label].T
    out = np.empty((len(prior_strengths), *log_lik.shape))
    for j, beta in enumerate(prior_strengths):
        out[j] = log_lik if beta <= 0 else safe_log((n * p + beta * pbar) / (n + beta))
    return out


def _score_split(
    est, data, hidden: np.ndarray, fit_kwargs: Mapping[str, Any], prior_strengths=(0.0,)
) -> tuple[np.ndarray, int]:
    """Fit on the training responses and return S_i (hidden items × len(prior_strengths))."""
    train = data.subset(~hidden)
    test = data.subset(hidden)
    est.fit(train, **fit_kwargs)
    if _is_multilabel(est):
        _, S = est.heldout_item_scores(test)
        return np.repeat(np.asarray(S, float)[:, None], len(prior_strengths), axis=1), test.n_responses
    post = np.asarray(est.result_.posterior, float)
    ll = np.asarray(est.response_log_likelihood(test), float)  # R_h × K
    lls = predictive_log_likelihood(
        ll, train, test, posterior=post, prior_strengths=prior_strengths, confusion=getattr(est, "confusion_", None)
    )
    K = post.shape[1]
    items = np.unique(test.item)
    S = np.empty((len(items), len(prior_strengths)))
    for j in range(len(prior_strengths)):
        H = np.zeros((data.n_items, K))
        for k in range(K):  # K classes, not responses
            H[:, k] = np.bincount(test.item, weights=lls[j, :, k], minlength=data.n_items)
        tot = safe_log(post[items]) + H[items]
        mx = tot.max(axis=1)
        S[:, j] = mx + np.log(np.exp(tot - mx[:, None]).sum(axis=1))
    return S, test.n_responses


def _strengths(prior_strength) -> tuple[float, ...]:
    if isinstance(prior_strength, str):
        if prior_strength != "auto":
            raise UserInputError(f"prior_strength must be 'auto' or a number ≥ 0, got {prior_strength!r}.")
        return PRIOR_STRENGTHS
    if not np.isfinite(prior_strength) or prior_strength < 0:
        raise UserInputError(f"prior_strength must be 'auto' or a number ≥ 0, got {prior_strength!r}.")
    return (float(prior_strength),)


def heldout_score(
    estimator,
    data,
    *,
    frac: float = 0.1,
    n_splits: int = 3,
    random_state: int = 0,
    fit_kwargs: Mapping[str, Any] | None = None,
    name: str | None = None,
    splits: list[np.ndarray] | None = None,
    prior_strength: float | str = 2.0,
) -> HeldoutScore:
    """Held-out annotation log-likelihood of one estimator (or registered method name) on ``data``.
    ``prior_strength``: β of the posterior predictive (default 2), or "auto" (module docstring); 0 scores the
    plug-in fit (spec §8 step 3)."""
    from fusion_core.methods.registry import create, info

    if isinstance(estimator, str):
        if not info(estimator).probabilistic:
            raise UserInputError(f"method '{estimator}' has no likelihood, so it has no held-out score.")
        estimator = create(estimator)
    betas = _strengths(prior_strength)
    name = name or getattr(estimator, "method_name", type(estimator).__name__)
    data = estimator._data(data) if _is_multilabel(estimator) else as_responses(data)
    if splits is None:
        splits = heldout_splits(
            data.item,
            data.worker,
            data.n_items,
            data.n_workers,
            frac=frac,
            n_splits=n_splits,
            random_state=random_state,
        )
    t0 = time.perf_counter()
    per_split, nh = [], []
    est = _clone(estimator)
    for hidden in splits:
        S, n = _score_split(est, data, hidden, dict(fit_kwargs or {}), betas)
        per_split.append(S)
        nh.append(int(n))
    means = np.array([[S[:, j].sum() / n for j in range(len(betas))] for S, n in zip(per_split, nh)])  # splits × β
    j = int(np.argmax(means.mean(axis=0)))
    npar = est.n_free_parameters() if hasattr(est, "n_free_parameters") else None
    split_scores = [float(x) for x in means[:, j]]
    pooled = np.concatenate([S[:, j] for S in per_split])
    out = HeldoutScore(
        str(name), float(np.mean(split_scores)), split_scores, pooled, nh, time.perf_counter() - t0, npar
    )
    out.prior_strength = None if _is_multilabel(est) else betas[j]
    return out


def choose(scores: list[HeldoutScore], rule: str = "simplest") -> str:
    """Spec §8 step 5: the best mean score s*; with ``rule="simplest"`` the simplest candidate (fewest free
    parameters, when known) whose paired per-item difference to s* has mean below 2 standard errors."""
    ok = [s for s in scores if s.error is None and np.isfinite(s.score)]
    if not ok:
        raise UserInputError("no candidate could be scored on held-out responses.")
    best = max(ok, key=lambda s: s.score)
    if rule == "best" or best.n_parameters is None:
        return best.name
    simpler = sorted(
        (s for s in ok if s.n_parameters is not None and s.n_parameters < best.n_parameters),
        key=lambda s: s.n_parameters or 0,
    )
    for s in simpler:
        if len(s.item_scores) != len(best.item_scores):
            continue
        d = best.item_scores - s.item_scores
        se = d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else 0.0
        if d.mean() < 2 * se:
            return s.name
    return best.name


def compare(
    candidates: Mapping[str, Any] | list,
    data,
    *,
    frac: float = 0.1,
    n_splits: int = 3,
    random_state: int = 0,
    fit_kwargs: Mapping[str, Any] | None = None,
    rule: str = "simplest",
    skip_errors: bool = True,
    prior_strength: float | str = 2.0,
) -> tuple[pd.DataFrame, str, list[HeldoutScore]]:
    """Score every candidate (name → estimator, or a list of registered names) on the same splits.

    Returns (table with columns method, score, se, per-split scores, n_parameters, prior_strength, seconds, error; chosen name;
    the :class:`HeldoutScore` objects)."""
    from fusion_core.methods.registry import create

    if not isinstance(candidates, Mapping):
        candidates = {n: create(n) for n in candidates}
    if not candidates:
        raise UserInputError("no candidate methods to compare.")
    first = next(iter(candidates.values()))
    ml = _is_multilabel(first)
    base = first._data(data) if ml else as_responses(data)
    splits = heldout_splits(
        base.item, base.worker, base.n_items, base.n_workers, frac=frac, n_splits=n_splits, random_state=random_state
    )
    results = []
    for name, est in candidates.items():
        try:
            results.append(
                heldout_score(est, base, fit_kwargs=fit_kwargs, name=name, splits=splits, prior_strength=prior_strength)
            )
        except Exception as exc:  # a failing candidate is reported, not fatal
            if not skip_errors:
                raise
            results.append(
                HeldoutScore(name, float("nan"), [], np.zeros(0), [], 0.0, None, f"{type(exc).__name__}: {exc}")
            )
    chosen = choose(results, rule=rule)
    table = pd.DataFrame(
        {
            "method": [r.name for r in results],
            "score": [r.score for r in results],
            "se": [r.se if r.error is None else np.nan for r in results],
            "split_scores": [r.split_scores for r in results],
            "n_parameters": [r.n_parameters for r in results],
            "prior_strength": [r.prior_strength for r in results],
            "seconds": [r.seconds for r in results],
            "error": [r.error for r in results],
        }
    )
    table["chosen"] = table["method"] == chosen
    return table, chosen, results
