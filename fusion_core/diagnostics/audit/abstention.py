"""One-label annotators: a plausible model in which *whether* an annotator responds depends on the class.

A labelling function (a keyword rule; Ratner et al., *Data Programming*, NeurIPS 2016) fires on the items that
match it and then always votes its own class.  Its confusion rows are identical, so a model of independent
annotators in which a missing response says nothing cannot tell how often it is right (:mod:`.safety`, the
one-label condition).  Data programming's label model reads the skill where it lies: in *which* items it fires
on.  Here every annotator ``j`` responds to an item of class ``c`` with probability ``β_jc`` and then reports
``k`` with probability ``Θ_j[c, k]``; an item's likelihood over the annotators who did *not* respond is
``Π_j (1 − β_jc)``, so

    log P(item i, c) = log π_c + Σ_j log(1 − β_jc) + Σ_{r ∈ i} [log β_{w_r c} + log Θ_{w_r}[c, y_r] − log(1 − β_{w_r c})],

``O(responses × classes + annotators × classes)`` per E-step, no items × annotators matrix; beyond
:data:`~.difficulty.MAX_RESPONSES` responses it reads the difficulty check's items (whole items of smallest id hash).  EM (the project's
SQUAREM driver) from the chosen labels' posterior and from the vote shares (the better optimum is kept: a
collapsed labelling is a fixed point); the M-step is ``β_jc = (Σ_{r of j} q_{i_r c} + 1) /
(Σ_i q_ic + 2)`` and the confusion rows shrunk towards the pooled rows of the chosen labels (:data:`SHRINK` pseudo-responses): a MAP
fit (Beta(2, 2) and Dirichlet priors, whose log-densities the objective includes, so the trace never decreases).  Items
on which nobody responded are not in the data, so the firing rates are those among the items seen.  The model's
accuracy of the chosen labels, ``Σ_i P(c_i = label_i) / n`` with its Poisson-binomial interval, is one more
plausible figure of the accuracy range when most responses come from one-label annotators; it assumes the
annotators fire independently given the class (the same assumption as the confusion models, applied to firing).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit.difficulty import items_read
from fusion_core.diagnostics.audit.items import label_quality
from fusion_core.diagnostics.audit.stacking import confusion_counts
from fusion_core.methods.em import EMSettings, EStep
from fusion_core.methods.em.squarem import run_squarem_lockstep

SHRINK = 2.0
"""Pseudo-responses pulling each annotator's confusion rows towards the pooled rows."""
MAX_ITER = 300
TOL = 1e-7


@dataclass(frozen=True)
class AbstentionFit:
    """The model's ``accuracy`` of the chosen labels, its interval ``low``–``high`` (Poisson-binomial), the class
    prior it found, ``iterations``, ``converged`` and the log-likelihood trace."""

    accuracy: float
    low: float
    high: float
    class_prior: tuple[float, ...]
    iterations: int
    converged: bool
    loglik: tuple[float, ...]

    def summary(self) -> dict:
        """Plain JSON values (for ``summary.json``)."""
        return {
            "accuracy": self.accuracy,
            "low": self.low,
            "high": self.high,
            "iterations": self.iterations,
            "converged": self.converged,
        }


class _Model:
    """E- and M-steps of the responding-depends-on-class model (module docstring) on ``resp``; the state is the
    flat vector (prior K, firing W × K, confusion W × K × K)."""

    def __init__(self, resp: Responses, K: int, pooled: np.ndarray, item: np.ndarray, n: int) -> None:
        self.resp, self.K, self.W, self.pooled, self.item, self.n = resp, K, resp.n_workers, pooled, item, n

    def split(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        K, W = self.K, self.W
        prior = np.clip(theta[:K], 1e-9, None)
        fire = np.clip(theta[K : K + W * K].reshape(W, K), 1e-6, 1 - 1e-6)
        conf = np.clip(theta[K + W * K :].reshape(W, K, K), 1e-9, None)
        return prior / prior.sum(), fire, conf / conf.sum(axis=2, keepdims=True)

    def e_step(self, theta: np.ndarray, temperature: float = 1.0) -> EStep:
        r, K = self.resp, self.K
        prior, fire, conf = self.split(theta)
        per = np.log(fire[r.worker]) - np.log1p(-fire[r.worker]) + np.log(conf[r.worker, :, r.label])
        flat = (self.item[:, None] * K + np.arange(K)[None, :]).ravel()
        log_joint = np.bincount(flat, weights=per.ravel(), minlength=self.n * K).reshape(self.n, K)
        log_joint += np.log(prior)[None, :] + np.log1p(-fire).sum(axis=0)[None, :]
        top = log_joint.max(axis=1, keepdims=True)
        post = np.exp(log_joint - top)
        total = post.sum(axis=1, keepdims=True)
        post /= total
        log_prior = float(
            np.log(fire).sum() + np.log1p(-fire).sum() + SHRINK * (self.pooled[None] * np.log(conf)).sum()
        )
        return EStep(post, float((top + np.log(total)).sum()) + log_prior)

    def m_step(self, post: np.ndarray) -> np.ndarray:
        r, K, W = self.resp, self.K, self.W
        prior = np.clip(post.mean(axis=0), 1e-9, None)
        q = post[self.item]
        flat = (r.worker[:, None] * K + np.arange(K)[None, :]).ravel()
        fired = np.bincount(flat, weights=q.ravel(), minlength=W * K).reshape(W, K)
        fire = (fired + 1.0) / (post.sum(axis=0)[None, :] + 2.0)
        counts, _ = confusion_counts(r, q, K)
        conf = counts + SHRINK * self.pooled[None]
        return np.concatenate([prior / prior.sum(), fire.ravel(), (conf / conf.sum(axis=2, keepdims=True)).ravel()])

    def flat(self, theta: np.ndarray) -> np.ndarray:
        return theta

    def unflat(self, vector: np.ndarray) -> np.ndarray:
        prior, fire, conf = self.split(vector)
        return np.concatenate([prior, fire.ravel(), conf.ravel()])


def abstention_accuracy(resp: Responses, posterior: np.ndarray, label: np.ndarray, level: float = 0.9) -> AbstentionFit:
    """Fit the model (module docstring) from ``posterior`` and score the chosen ``label`` (class codes)."""
    read = items_read(resp)
    if not read.all():
        resp = resp.subset(read[resp.item])
    idx = np.flatnonzero(read)
    item, n = np.searchsorted(idx, resp.item), len(idx)  # the items read, coded 0 … n − 1
    posterior, label = np.asarray(posterior, dtype=float)[idx], np.asarray(label, dtype=np.int64)[idx]
    K = posterior.shape[1]
    q0 = np.clip(posterior, 1e-9, None)
    q0 /= q0.sum(axis=1, keepdims=True)
    model = _Model(resp, K, confusion_counts(resp, q0[item], K)[1], item, n)
    settings = EMSettings(tol=TOL, max_iter=MAX_ITER, name="abstention model", warn=False)
    votes = resp.vote_counts(use_confidence=False).astype(float)[idx]
    runs = []
    for start in (posterior, votes):  # two starts: the chosen labels and the vote
        q = np.clip(start, 1e-9, None)
        q /= q.sum(axis=1, keepdims=True)
        runs += run_squarem_lockstep(
            [model], [model.m_step(q)], [settings], lambda _, st: [model.m_step(x) for x in st]
        )
    run = max(runs, key=lambda r: r.log_likelihood[-1])
    post = np.asarray(run.posterior)
    own = label_quality(post, label, level)
    prior, _, _ = model.split(run.state)
    return AbstentionFit(
        accuracy=own.accuracy,
        low=own.low,
        high=own.high,
        class_prior=tuple(float(p) for p in prior),
        iterations=run.n_iter,
        converged=run.converged,
        loglik=tuple(run.log_likelihood),
    )
