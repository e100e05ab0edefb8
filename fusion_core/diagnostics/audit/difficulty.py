"""Do items differ in difficulty?  A check the responses can make, and what it does to the accuracy figure.

A conditionally independent model (Dawid & Skene 1979 and its relatives) takes every item of a class to be as easy
as every other: given the class, an item's responses are independent draws from the annotators' confusions.  Real
items are not alike (Whitehill et al. 2009, GLAD): on hard items the crowd splits, on easy ones it agrees, so there
are *more* unanimous items and *more* split items than such a model predicts (overdispersion of the vote margins).
The model then reads a split as a few annotators' slips and overstates the accuracy of the labels on split items.

**Two-type model.**  Items are *easy* (responses follow the annotators' confusions ``Θ_w``) or, with probability
``τ``, *hard*: each response is informative with probability ``λ`` and otherwise a draw from the overall label
shares ``ρ``, ``P(r = k | c, hard) = λ Θ_w[c, k] + (1 − λ) ρ_k``.  EM over (class, item type): the one-type model
(``τ = 0``) is fitted first from the chosen labels' posterior ``q`` (``Θ_w`` shrunk towards the pooled confusion,
:data:`SHRINK` pseudo-responses), the two-type model then starts from its optimum with ``τ = 0.2, λ = 0.5`` (and is replaced by
it when it ends lower), so ``lr``, twice the log-likelihood gain, is ≥ 0 and measures the evidence of difficulty.  Under ``τ = 0`` the parameter ``λ`` is not
identified (Davies 1987), so the χ² on two degrees of freedom is only a guide; the check fires when the gain is
large (:data:`FLAG_P`) *and* material: at least :data:`FLAG_HARD` of the items are hard.

**What it implies.**  ``accuracy``: the chosen labels' accuracy under the two-type model, ``Σ_i P(c_i = label_i |
responses) / n``.  It assumes annotators are better than chance on hard items too; nothing in the responses can
show that (a hard item on which the crowd agrees on a wrong label looks like an easy item of the other class), so
``at_chance`` is the plausible model where errors concentrate where the check says: the hard items' labels are
right only as often as their class's share.

**Shared confusion** (``overdispersed``).  Items can differ in a way the two-type model does not describe (items
that lie between two classes, ambiguous items that pull the crowd one way): then the annotators' errors are
correlated item by item, and the crowd is unanimous on more items than a model of equally hard items predicts.  The
count of items with two or more responses all alike is compared with its expectation under the one-type fit
(``Σ_i Σ_c π_c Σ_k Π_r Θ_w(r)[c, k]``) in units of its Poisson-binomial standard deviation; one-sided, at
:data:`OVERDISPERSION_Z` (5 %), the check says the errors are shared item by item, and the accuracy range adds the
*population* figure (:mod:`.safety`).  The expectation uses parameters fitted to the same responses, which makes
the test conservative (simulated Dawid–Skene crowds: ``benchmarks/accuracy_honesty.py``).  Cost: two EM fits (SQUAREM-accelerated, Varadhan & Roland 2008) of
at most :data:`MAX_ITER` steps, each ``O(responses × classes)``; beyond :data:`MAX_RESPONSES` responses the check
runs on the items of smallest id hash that hold that many (the same items whatever the row order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit.copy_block import CopyBlock, copy_block_check
from fusion_core.diagnostics.audit.dependence import DependenceCheck, dependence_check, pair_agreement
from fusion_core.diagnostics.audit.latent_scale import LatentScaleFit, latent_scale_fit
from fusion_core.diagnostics.audit.stacking import Stacking, confusion_counts, stack_models
from fusion_core.methods.auto.folds import id_hashes, smallest_first
from fusion_core.methods.em import EMSettings, EStep
from fusion_core.methods.em.squarem import run_squarem_lockstep

SHRINK = 2.0
"""Pseudo-responses pulling each annotator's confusion rows towards the pooled confusion."""
MAX_ITER = 150
"""E-steps of each fit (one-type, then two-type), extrapolations included."""
TOL = 1e-6
"""The EM driver's rule: stop when the log-likelihood changes by at most this share of itself."""
MAX_RESPONSES = 100_000
"""Responses the check reads at most (a subset of whole items, chosen by id hash)."""
MAX_CLASSES_UNANIMOUS = 20
"""Most classes for which the expected number of unanimous items is computed (cost: classes × one E-step)."""
FLAG_P = 1e-3
"""Difficulty is reported when the likelihood-ratio p-value (χ², 2 degrees of freedom) is below this …"""
FLAG_HARD = 0.05
"""… and the two-type model calls at least this share of the items hard."""
OVERDISPERSION_Z = 1.645
"""Unanimous items above the one-type fit's expectation, in standard deviations, from which the errors are called
shared item by item (one-sided 5 %)."""


@dataclass(frozen=True)
class DifficultyCheck:
    """The two-type model's fit (module docstring): ``hard_share`` (``τ``), ``informative`` (``λ``), ``accuracy``
    of the chosen labels under it, ``at_chance`` (its hard items' labels right only at their class's share) and
    ``one_type_accuracy`` under the refitted one-type model; ``lr`` twice the log-likelihood gain over the one-type
    model and ``p_value``; ``iterations``, ``converged`` and the log-likelihood trace of the two-type fit; ``n_items``
    the items it read, ``unanimous`` those of them with two or more responses all alike and ``unanimous_expected``
    how many the one-type fit predicts, ``unanimous_sd`` its standard deviation (both NaN beyond
    :data:`MAX_CLASSES_UNANIMOUS` classes)."""

    hard_share: float
    informative: float
    accuracy: float
    at_chance: float
    one_type_accuracy: float
    lr: float
    p_value: float
    iterations: int
    converged: bool
    loglik: tuple[float, ...]
    n_items: int
    unanimous: int = 0
    unanimous_expected: float = float("nan")
    unanimous_sd: float = float("nan")
    stacking: Stacking | None = None
    dependence: DependenceCheck | None = None
    latent_scale: LatentScaleFit | None = None
    copy_block: CopyBlock | None = None

    @property
    def unanimous_z(self) -> float:
        """Observed unanimous items above the expectation, in Poisson-binomial standard deviations (NaN when not
        computed)."""
        if not (np.isfinite(self.unanimous_expected) and np.isfinite(self.unanimous_sd)):
            return float("nan")
        return float((self.unanimous - self.unanimous_expected) / max(self.unanimous_sd, 1e-9))

    @property
    def overdispersed(self) -> bool:
        """The crowd is unanimous on more items than equally hard items allow: errors shared item by item (module
        docstring, "Shared confusion")."""
        return bool(np.isfinite(self.unanimous_z) and self.unanimous_z > OVERDISPERSION_Z)

    @property
    def flagged(self) -> bool:
        """Items differ in difficulty: the gain is significant and material (module docstring)."""
        return bool(self.p_value < FLAG_P and self.hard_share >= FLAG_HARD)

    def summary(self) -> dict:
        """Plain JSON values (for ``summary.json``)."""
        return {
            "flagged": self.flagged,
            "hard_share": self.hard_share,
            "informative_on_hard": self.informative,
            "accuracy_two_type": self.accuracy,
            "accuracy_hard_at_chance": self.at_chance,
            "likelihood_ratio": self.lr,
            "p_value": self.p_value,
            "iterations": self.iterations,
            "converged": self.converged,
            "items_read": self.n_items,
            "unanimous_items": self.unanimous,
            "unanimous_items_expected_if_equally_hard": self.unanimous_expected,
            "unanimous_items_sd_if_equally_hard": self.unanimous_sd,
            "errors_shared_item_by_item": self.overdispersed,
            "stacking": self.stacking.summary() if self.stacking is not None else None,
            "excess_agreement": self.dependence.summary() if self.dependence is not None else None,
            "latent_scale": self.latent_scale.summary() if self.latent_scale is not None else None,
            "copy_block": self.copy_block.summary() if self.copy_block is not None else None,
        }


def _item_sum(item: np.ndarray, x: np.ndarray, n: int) -> np.ndarray:
    """Per-item sums of the rows of ``x`` (responses × K)."""
    K = x.shape[1]
    flat = (item[:, None] * K + np.arange(K)[None, :]).ravel()
    return np.bincount(flat, weights=x.ravel(), minlength=n * K).reshape(n, K)


def _confusions(resp: Responses, w_resp: np.ndarray, K: int) -> np.ndarray:
    """Θ_w[c, k] from per-response class weights ``w_resp`` (responses × K), shrunk towards the pooled rows."""
    conf = _confusion_counts(resp, w_resp, K)
    return conf / conf.sum(axis=2, keepdims=True)


def _confusion_counts(resp: Responses, w_resp: np.ndarray, K: int) -> np.ndarray:
    """The counts behind :func:`_confusions`: expected responses plus :data:`SHRINK` pooled pseudo-responses."""
    counts, pooled = confusion_counts(resp, w_resp, K)
    return counts + SHRINK * pooled[None]


def _unpack(theta: np.ndarray, W: int, K: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(prior, Θ, τ, λ) from the flat parameter vector, projected back onto the simplex and the bounds."""
    prior = np.clip(theta[:K], 1e-6, None)
    conf = np.clip(theta[K : K + W * K * K].reshape(W, K, K), 1e-9, None)
    tau, lam = float(np.clip(theta[-2], 0.0, 1 - 1e-4)), float(np.clip(theta[-1], 1e-3, 1.0))
    return prior / prior.sum(), conf / conf.sum(axis=2, keepdims=True), tau, lam


def _pack(prior: np.ndarray, conf: np.ndarray, tau: float, lam: float) -> np.ndarray:
    return np.concatenate([prior, conf.ravel(), [tau, lam]])


class _Model:
    """E- and M-steps of the one-type (``two_types`` False: ``τ = 0``) or two-type model on ``resp``, whose
    responses belong to ``n`` items coded ``item`` (0 … n − 1)."""

    def __init__(
        self, resp: Responses, K: int, two_types: bool, item: np.ndarray, n: int, *, weight: np.ndarray | None = None
    ) -> None:
        self.resp, self.K, self.two_types, self.item, self.n = resp, K, two_types, item, n
        self.weight = None if weight is None else np.asarray(weight, dtype=float)[:, None]  # per response
        rho = np.bincount(resp.label, minlength=K).astype(float) + 1.0
        self.rho_r = (rho / rho.sum())[resp.label][:, None]

    def e_step(self, theta: np.ndarray, temperature: float = 1.0) -> EStep:
        """Posterior over (class, type) per item (items × K × 2 types, or × 1), the log-likelihood; ``stats`` carry
        what the M-step needs (the parameters, Θ_w[c, l_r] and the hard items' mixture)."""
        r, K, n = self.resp, self.K, self.n
        prior, conf, tau, lam = _unpack(theta, r.n_workers, K)
        th = np.clip(conf[r.worker, :, r.label], 1e-12, 1.0)  # responses × K: Θ_w[c, l_r]
        log_th = np.log(th) if self.weight is None else self.weight * np.log(th)  # weighted: :mod:`.dependence`
        logj = [np.log(prior) + _item_sum(self.item, log_th, n) + np.log1p(-tau)]
        mix = th
        if self.two_types:
            mix = lam * th + (1.0 - lam) * self.rho_r
            logj.append(np.log(prior) + _item_sum(self.item, np.log(mix), n) + np.log(max(tau, 1e-300)))
        joint = np.stack(logj, axis=2)
        top = joint.max(axis=(1, 2))
        post = np.exp(joint - top[:, None, None])
        total = post.sum(axis=(1, 2))
        post /= total[:, None, None]
        return EStep(post, float((top + np.log(total)).sum()), stats=(theta, post, th, mix))

    def m_step(self, stats: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
        """One M-step from the E-step's ``stats``: the new parameters (flat)."""
        theta, post, th, mix = stats
        r, K = self.resp, self.K
        _, _, tau, lam = _unpack(theta, r.n_workers, K)
        prior = np.clip(post.sum(axis=2).mean(axis=0), 1e-6, None)
        w = post[self.item, :, 0]
        if self.two_types:
            h = post[self.item, :, 1]
            informative = h * (lam * th / mix)
            w = w + informative
            tau = float(np.clip(post[:, :, 1].sum() / self.n, 1e-4, 1 - 1e-4))
            lam = float(np.clip(informative.sum() / max(h.sum(), 1e-12), 1e-3, 1 - 1e-3))
        if self.weight is not None:
            w = w * self.weight
        return _pack(prior / prior.sum(), _confusions(r, w, K), tau, lam)

    def flat(self, theta: np.ndarray) -> np.ndarray:
        return theta

    def unflat(self, vector: np.ndarray) -> np.ndarray:
        """An extrapolated vector projected back onto the simplex and the bounds."""
        return _pack(*_unpack(vector, self.resp.n_workers, self.K))


def _em(model: _Model, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[float], int, bool]:
    """The project's SQUAREM-accelerated EM (:func:`~fusion_core.methods.em.squarem.run_squarem_lockstep`, scheme
    S3 with the plain step as fallback, so the trace never decreases); returns the parameters, the posterior at
    them, the log-likelihood trace, the E-steps taken and whether it converged."""
    settings = EMSettings(tol=TOL, max_iter=MAX_ITER, name="item-difficulty check", warn=False)
    (run,) = run_squarem_lockstep([model], [theta], [settings], lambda _, stats: [model.m_step(x) for x in stats])
    return run.state, run.posterior, run.log_likelihood, run.n_iter, run.converged


def _unanimous(
    resp: Responses, item: np.ndarray, n: int, prior: np.ndarray, conf: np.ndarray
) -> tuple[int, float, float]:
    """Items with two or more responses all alike: observed, expected under the one-type model ``(prior, conf)``
    (``Σ_i p_i``, ``p_i = Σ_c prior_c Σ_k Π_r Θ_w(r)[c, k]`` over those items) and its standard deviation
    (``√Σ_i p_i(1 − p_i)``, items independent)."""
    per_item = np.bincount(item, minlength=n)
    several = per_item >= 2
    K = len(prior)
    distinct = (np.bincount(item * K + resp.label, minlength=n * K).reshape(n, K) > 0).sum(axis=1)
    observed = int((several & (distinct == 1)).sum())
    if K > MAX_CLASSES_UNANIMOUS:
        return observed, float("nan"), float("nan")
    p = np.zeros(n)
    for k in range(K):
        log_all_k = _item_sum(item, np.log(np.clip(conf[resp.worker, :, k], 1e-300, 1.0)), n)  # items × c
        p += np.exp(log_all_k) @ prior
    p = np.clip(p[several], 0.0, 1.0)
    return observed, float(p.sum()), float(np.sqrt((p * (1.0 - p)).sum()))


def items_read(resp: Responses) -> np.ndarray:
    """Items the check reads: all that have responses, or beyond :data:`MAX_RESPONSES` responses those of smallest
    id hash that hold that many (boolean per item)."""
    per_item = resp.responses_per_item
    if resp.n_responses <= MAX_RESPONSES:
        return per_item > 0
    return smallest_first(per_item, id_hashes(resp.items), MAX_RESPONSES) & (per_item > 0)


def difficulty_mixture(
    resp: Responses, posterior: np.ndarray, label: np.ndarray, ranks: np.ndarray | None = None
) -> DifficultyCheck:
    """Fit the one-type and then the two-type model from ``posterior`` and score the chosen ``label`` (module
    docstring); with ``ranks`` (each class code's position among ordered levels) the latent-scale model of graded
    labels too (:mod:`.latent_scale`), stacked as a third model."""
    q = np.clip(np.asarray(posterior, float), 0.0, 1.0)
    q = q / np.maximum(q.sum(axis=1, keepdims=True), 1e-300)
    label = np.asarray(label, dtype=np.int64)
    read = items_read(resp)
    if not read.all():
        resp = resp.subset(read[resp.item])
    idx = np.flatnonzero(read)
    item, n = np.searchsorted(idx, resp.item), len(idx)  # the items read, coded 0 … n − 1
    K = q.shape[1]
    prior = np.clip(q[idx].mean(axis=0), 1e-6, None)
    theta, post1, tr1, _, _ = _em(
        _Model(resp, K, False, item, n), _pack(prior / prior.sum(), _confusions(resp, q[resp.item], K), 0.0, 1.0)
    )
    prior1, conf1, _, _ = _unpack(theta, resp.n_workers, K)
    unanimous, expected, spread = _unanimous(resp, item, n, prior1, conf1)
    q1 = post1[:, :, 0]
    j, lab = np.arange(n), label[idx]
    scale = None
    if ranks is not None:
        scale = latent_scale_fit(resp, item, n, rank=ranks, posterior=q[idx], label=lab, item_ids=resp.items[idx])
    stacked = stack_models(resp, item, n, prior1, q1, scale=None if scale is None else scale.predictive)

    def refit(weight: np.ndarray) -> tuple[np.ndarray, int, bool]:
        """The one-type model refitted with per-response weights, from its optimum (:mod:`.dependence`,
        :mod:`.copy_block`)."""
        _, post, _, its, done = _em(_Model(resp, K, False, item, n, weight=weight), theta)
        return post[:, :, 0], its, done

    order_key = id_hashes(resp.items)[idx]  # the pairs' reading order (row-order invariant)
    pairs = pair_agreement(resp, item, n, order_key)
    dependence = dependence_check(
        resp,
        item,
        n,
        label=lab,
        order_key=order_key,
        one_type_accuracy=float(q1[j, lab].mean()),
        refit=refit,
        pairs=pairs,
    )
    block = copy_block_check(resp, item, n, pairs, label=lab, refit=refit)
    post1 = np.concatenate([post1, np.zeros_like(post1)], axis=2)  # items × K × (easy, hard)
    theta2, post2, tr2, it, conv = _em(_Model(resp, K, True, item, n), _pack(prior1, conf1, 0.2, 0.5))
    if tr2[-1] <= tr1[-1]:  # the two-type optimum found is no better: the one-type fit is the two-type MLE
        theta2, post2, tr2 = _pack(prior1, conf1, 0.0, 1.0), post1, tr1
    prior2, _, tau, lam = _unpack(theta2, resp.n_workers, K)
    lr = 2.0 * (tr2[-1] - tr1[-1])
    right = post2[j, lab]  # P(class = label, type) per item read
    return DifficultyCheck(
        hard_share=tau,
        informative=lam,
        accuracy=float(right.sum(axis=1).mean()),
        at_chance=float((right[:, 0] + post2[j, :, 1].sum(axis=1) * prior2[lab]).mean()),
        one_type_accuracy=float(post1[j, lab, 0].mean()),
        lr=lr,
        p_value=float(stats.chi2.sf(lr, 2)),
        iterations=it,
        converged=conv,
        loglik=tuple(tr2),
        n_items=len(idx),
        unanimous=unanimous,
        unanimous_expected=expected,
        unanimous_sd=spread,
        stacking=stacked,
        dependence=dependence,
        latent_scale=scale,
        copy_block=block,
    )
