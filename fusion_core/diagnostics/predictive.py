"""The model the re-labelling plan reasons with (:mod:`.plan`): each annotator's *predictive* confusion matrix —
how they will answer the next item, not how well their fitted matrix explains the responses it was fitted on — and
the items' posterior under it.

A Dawid–Skene fit on two or three responses per item, with many annotators seen a dozen times each, is
over-confident: the fitted rows of a little-seen annotator are mostly noise, and a plan that trusts them picks
the annotators whose matrices happen to look best (the winner's curse) and the items that look settled.  Each
row is therefore shrunk towards the crowd's average matrix by a Dirichlet prior (the community prior of Venanzi
et al. 2014; Gelman et al., BDA §5, hierarchical shrinkage), ``Γ̃_w[k] = (n_w π_k Γ_w[k] + β Γ̄[k]) /
(n_w π_k + β)``, and the strength ``β`` is chosen where the shrunk matrices best predict responses they were not
fitted on (:func:`held_out_strength`: empirical Bayes by two-fold cross-fit over items, no gold needed).  With
``prior_count="auto"`` the plan does not take one M-step from the fit's posterior: it fits the shrunk model
itself (:func:`community_em`, MAP EM from the fit's posterior, the strength re-chosen at its fixed point), since
on a crowd of little-seen annotators the fit's posterior is as overfit as its matrices (a simulated sparse crowd at
2 responses per item: ds 0.59 accurate at mean confidence 0.88, the shrunk model's fixed point 0.75; docs/PLAN.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.methods.em import EMSettings, EStep, run_em
from fusion_core.methods.numerics import PROB_FLOOR, safe_log
from fusion_core.methods.results import FitResult

#: prior strengths (pseudo-responses per cell: K per row) tried by :func:`held_out_strength`
STRENGTH_GRID = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
#: responses scored by :func:`held_out_strength` at most (about; whole items are kept) — bounds its cost
MAX_SCORED = 200_000
#: EM steps of the shrunk model per choice of its strength, and choices of the strength (:func:`community_em`)
EM_STEPS = 30
STRENGTH_ROUNDS = 3
#: the shrunk model's EM runs at most this many response-steps in all (responses × steps: ~1 s CPU)
EM_WORK = 20_000_000
#: the shrunk model's EM stops at this relative change of its log posterior (the shared driver's rule)
EM_TOL = 1e-6
#: z at which an annotator's agreement is told apart from the crowd's as worse (:func:`distinct_annotators`;
#: as better: the same one-sided level divided by the number of annotators)
EVIDENCE_Z = 1.96
#: "better" at the one-sided level divided by the number of annotators (Bonferroni) — or, False (the plan's
#: choice, docs/PLAN.md), at the level itself: the plan caps anyone's share of the budget, so the few alike annotators
#: called better by chance cost little, while a family-wise bar pools the real differences too
BONFERRONI = False
#: True: the items' belief counts an annotator's past responses by their own matrix only when the responses tell
#: them apart from the crowd, as their next response is valued (:func:`planning_model`).  Off: replayed, it helped
#: the confusable and face crowds and cost the binary, sparse and bluebirds crowds more (docs/PLAN.md, sixth session)
POOLED_BELIEF = False


def item_log_joint(
    item: np.ndarray, worker: np.ndarray, label: np.ndarray, confusion: np.ndarray, prior: np.ndarray, *, n_items: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(lg, joint)``: per response ``log Γ_w[·, l_r]`` (responses × K) and per item ``log π + Σ_r log Γ_w[·, l_r]``
    (items × K), clipped logs; a response's leave-one-out joint is ``joint[item] − lg`` (a loop over classes)."""
    lg = safe_log(confusion[worker, :, label])
    joint = np.tile(safe_log(np.asarray(prior, dtype=float)), (n_items, 1))
    for c in range(confusion.shape[-1]):  # a loop over classes, not responses
        joint[:, c] += np.bincount(item, weights=lg[:, c], minlength=n_items)
    return lg, joint


def expected_counts(
    item: np.ndarray, worker: np.ndarray, label: np.ndarray, posterior: np.ndarray, *, n_workers: int
) -> np.ndarray:
    """One M-step's sufficient statistics from the items' ``posterior``: ``C_w[k, l] = Σ_{r: w, l} q_{i_r k}``
    (workers × K true × K reported)."""
    k = posterior.shape[1]
    counts = np.zeros((n_workers * k, k))
    q = posterior[item]  # responses × K (true)
    cell = worker[:, None] * k + np.arange(k)[None, :]
    for c in range(k):  # a loop over reported labels, not responses
        sel = label == c
        counts[:, c] = np.bincount(cell[sel].ravel(), weights=q[sel].ravel(), minlength=n_workers * k)
    return counts.reshape(n_workers, k, k)


def model_confusion(fit: FitResult) -> tuple[np.ndarray, np.ndarray, str | None]:
    """The fit's confusion matrices (workers × true × reported) and class prior; one-coin matrices from the
    annotator skills when the method has none (with a note saying so)."""
    k = len(fit.classes)
    prior = fit.class_prior if fit.class_prior is not None else fit.posterior.mean(axis=0)
    if fit.confusion is not None:
        return np.asarray(fit.confusion, float), np.asarray(prior, float), None
    acc = np.clip(np.nan_to_num(np.asarray(fit.worker_skill, float), nan=1.0 / k), 1.0 / k, 1.0 - 1e-6)
    conf = np.repeat(((1 - acc) / (k - 1))[:, None, None], k, 1).repeat(k, 2)
    conf[:, np.arange(k), np.arange(k)] = acc[:, None]
    return (
        conf,
        np.asarray(prior, float),
        f"'{fit.method}' has no confusion matrices: one-coin matrices from its skills.",
    )


def crowd_confusion(confusion: np.ndarray, prior: np.ndarray, n_responses: np.ndarray) -> np.ndarray:
    """The crowd's average confusion matrix (K × K): every annotator's rows weighted by their expected responses
    per true class ``n_w π_k``."""
    w = np.asarray(n_responses, float)[:, None] * np.asarray(prior, float)[None, :]  # workers × true
    tot = (w[:, :, None] * confusion).sum(axis=0)
    k = confusion.shape[-1]
    return np.where(tot.sum(axis=1, keepdims=True) > 0, tot / np.maximum(tot.sum(axis=1, keepdims=True), 1e-300), 1 / k)


def predictive_confusion(
    confusion: np.ndarray,
    prior: np.ndarray,
    n_responses: np.ndarray,
    prior_count: float,
    center: np.ndarray | None = None,
) -> np.ndarray:
    """Each annotator's predictive confusion: the posterior mean of a Dirichlet row prior given the fitted rows as
    ``n_w π_k`` expected observations (``n_w`` the annotator's responses, ``π`` the class prior).  Without
    ``center`` the prior is Dirichlet(``prior_count``) per cell, ``(n_w π_k Γ_w[k, l] + α) / (n_w π_k + K α)``;
    with a ``center`` matrix (the crowd's, :func:`crowd_confusion`) it has mean ``center[k]`` and strength
    ``K α`` — an annotator seen on few items is not trusted as if their fitted matrix were exact (Gelman et al.,
    BDA §2.4, conjugate Dirichlet–multinomial)."""
    if prior_count <= 0:
        return confusion
    k = confusion.shape[-1]
    seen = np.asarray(n_responses, float)[:, None] * np.asarray(prior, float)[None, :]  # workers × true
    pseudo = prior_count if center is None else k * prior_count * center[None, :, :]
    return np.asarray((seen[:, :, None] * confusion + pseudo) / (seen[:, :, None] + k * prior_count))


def held_out_log_likelihood(
    item: np.ndarray, worker: np.ndarray, label: np.ndarray, confusion: np.ndarray, prior: np.ndarray, *, n_items: int
) -> float:
    """Sum of the log probabilities of responses given their item's *other* responses (leave one response out):
    ``log Σ_k q^{-r}_k Γ_w[k, l_r]`` with ``q^{-r} ∝ π Π_{s≠r} Γ_s[·, l_s]`` (vectorised; a loop over classes)."""
    lg, tot = item_log_joint(item, worker, label, confusion, prior, n_items=n_items)
    loo = tot[item] - lg
    loo -= loo.max(axis=1, keepdims=True)
    w = np.exp(loo)
    pred = (w * np.exp(lg)).sum(axis=1) / w.sum(axis=1)
    return float(np.log(np.clip(pred, PROB_FLOOR, 1.0)).sum())


def held_out_strength(
    item: np.ndarray,
    worker: np.ndarray,
    label: np.ndarray,
    posterior: np.ndarray,
    prior: np.ndarray,
    *,
    n_workers: int,
    seed: int = 0,
    grid: tuple[float, ...] = STRENGTH_GRID,
) -> tuple[float, bool, np.ndarray]:
    """The shrinkage under which annotators' matrices best predict responses they were *not* fitted on: its
    strength, whether towards the crowd's matrix (else towards uniform: little-seen annotators count as
    uninformative), and every candidate's held-out log-likelihood (2 × grid: crowd, uniform).  Two folds of items:
    each fold's matrices are one M-step from the fit's posterior on its items (expected counts), shrunk as
    :func:`predictive_confusion` towards that fold's crowd matrix or uniform, and score the other fold's responses
    leave one out (:func:`held_out_log_likelihood`; at most about :data:`MAX_SCORED` responses, of random items)."""
    n, k = posterior.shape
    rng = np.random.default_rng(seed)
    fold = np.less(rng.random(n), 0.5)
    scored = np.less(rng.random(n), min(1.0, MAX_SCORED / max(len(item), 1)))  # items whose responses are scored
    scores = np.zeros((2, len(grid)))
    for f in (True, False):
        fit_r = fold[item] == f
        test_r = ~fit_r & scored[item]
        counts = expected_counts(item[fit_r], worker[fit_r], label[fit_r], posterior, n_workers=n_workers)
        rows = counts.sum(axis=2, keepdims=True)
        center = counts.sum(axis=0) / np.maximum(counts.sum(axis=(0, 2))[:, None], 1e-300)
        it, wk, lb = item[test_r], worker[test_r], label[test_r]
        for c, towards in enumerate((center, np.full((k, k), 1.0 / k))):
            for g, a in enumerate(grid):
                conf = (counts + k * a * towards[None]) / (rows + k * a)
                scores[c, g] += held_out_log_likelihood(it, wk, lb, conf, prior, n_items=n)
    best, g = divmod(int(np.argmax(scores)), len(grid))
    return float(grid[g]), best == 0, scores


def predictive_posterior(
    item: np.ndarray, worker: np.ndarray, label: np.ndarray, confusion: np.ndarray, prior: np.ndarray, *, n_items: int
) -> np.ndarray:
    """Items' posteriors ``∝ π_k Π Γ̃_w[k, l]`` over their responses under the predictive confusions ``Γ̃``
    (log space, clipped): less sure than the fit's where the evidence comes from little-seen annotators."""
    ok = worker >= 0
    _, joint = item_log_joint(item[ok], worker[ok], label[ok], confusion, prior, n_items=n_items)
    joint -= joint.max(axis=1, keepdims=True)
    q = np.exp(joint)
    return np.asarray(q / q.sum(axis=1, keepdims=True))


def loo_right(
    item: np.ndarray, worker: np.ndarray, label: np.ndarray, confusion: np.ndarray, prior: np.ndarray, *, n_items: int
) -> np.ndarray:
    """Per response, the probability that its label is the true one given its item's *other* responses (leave
    one response out): ``q^{-r}[l_r]`` with ``q^{-r} ∝ π Π_{s≠r} Γ_s[·, l_s]`` — the annotator's agreement with
    the truth as the rest of the crowd sees it, free of the bias of scoring a response against a posterior it
    helped to make."""
    lg, tot = item_log_joint(item, worker, label, confusion, prior, n_items=n_items)
    loo = tot[item] - lg
    loo -= loo.max(axis=1, keepdims=True)
    w = np.exp(loo)
    return np.asarray(w[np.arange(len(item)), label] / w.sum(axis=1))


def distinct_annotators(
    item: np.ndarray,
    worker: np.ndarray,
    label: np.ndarray,
    confusion: np.ndarray,
    prior: np.ndarray,
    *,
    n_items: int,
    z: float = EVIDENCE_Z,
    bonferroni: bool | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Which annotators the responses tell apart from the crowd: per annotator the z statistic of their mean
    leave-one-out agreement with the truth (:func:`loo_right`) against the crowd's mean, with the crowd's
    per-response variance (``z_w = (m_w − m) / (s / √n_w)``), and whether they are told apart: *worse* at
    ``z_w ≤ −z`` (1.96: a 95 % interval that excludes the crowd's), *better* at ``z_w ≥ z`` or, with
    ``bonferroni`` (None: :data:`BONFERRONI`), only at ``z_W``, the same one-sided level divided by the number of annotators tested (then in a
    crowd of alike annotators the chance that anyone is called better is at most that level).  Preferring an annotator concentrates the load on
    them, and the best-looking of many alike annotators is best by chance (the winner's curse); avoiding one
    costs little.  With ~15 responses only a gross difference (a spammer) is told apart."""
    n_workers = confusion.shape[0]
    right = loo_right(item, worker, label, confusion, prior, n_items=n_items)
    n = np.bincount(worker, minlength=n_workers).astype(float)
    if len(right) < 2:
        return np.zeros(n_workers), np.zeros(n_workers, bool)
    mean = np.bincount(worker, weights=right, minlength=n_workers) / np.maximum(n, 1)
    stat = np.where(n > 0, (mean - right.mean()) * np.sqrt(n) / max(float(right.std()), 1e-12), 0.0)
    level = NormalDist().cdf(-z) / (
        max(1, int((n > 0).sum())) if (BONFERRONI if bonferroni is None else bonferroni) else 1
    )
    z_better = NormalDist().inv_cdf(1 - level)
    return np.asarray(stat), (stat <= -z) | (stat >= z_better)


def planning_confusion(
    item: np.ndarray,
    worker: np.ndarray,
    label: np.ndarray,
    confusion: np.ndarray,
    prior: np.ndarray,
    *,
    n_items: int,
    z: float = EVIDENCE_Z,
) -> tuple[np.ndarray, np.ndarray]:
    """The confusions the plan chooses annotators by: an annotator the responses tell apart from the crowd
    (:func:`distinct_annotators`, ``|z_w| ≥ z``) keeps their predictive matrix, every other one gets the crowd's
    average predictive matrix (:func:`crowd_confusion`), so the plan is indifferent between them (and spreads the
    load) instead of preferring whoever looks best by chance.  ``z`` 0: every annotator keeps their own.  Returns
    the matrices and the mask of annotators kept."""
    n_workers = confusion.shape[0]
    if z <= 0 or len(item) == 0:
        return confusion, np.ones(n_workers, bool)
    _, distinct = distinct_annotators(item, worker, label, confusion, prior, n_items=n_items, z=z)
    center = crowd_confusion(confusion, prior, np.bincount(worker, minlength=n_workers))
    return np.where(distinct[:, None, None], confusion, center[None]), distinct


@dataclass
class ShrunkDawidSkene:
    """Dawid–Skene with every annotator's rows under the community prior, as a model of the shared EM driver
    (:func:`fusion_core.methods.em.run_em`; :func:`community_em`): the state is the matrices; the M-step adds ``K β``
    pseudo-counts of the centre (the crowd's matrix of the same expected counts, or uniform) to the expected counts
    (:func:`expected_counts`); the E-step gives the items' posterior under the class prior ``prior`` (held) and the
    objective, the log-likelihood plus the rows' Dirichlet log prior at the last M-step's centre."""

    item: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    prior: np.ndarray
    n_items: int
    n_workers: int
    beta: float
    crowd: bool
    center: np.ndarray = field(init=False, repr=False)

    def m_step(self, posterior: np.ndarray) -> np.ndarray:
        k = posterior.shape[1]
        counts = expected_counts(self.item, self.worker, self.label, posterior, n_workers=self.n_workers)
        if self.crowd:
            self.center = counts.sum(axis=0) / np.maximum(counts.sum(axis=(0, 2))[:, None], 1e-300)
        else:
            self.center = np.full((k, k), 1.0 / k)
        pseudo = k * self.beta
        return np.asarray((counts + pseudo * self.center[None]) / (counts.sum(axis=2, keepdims=True) + pseudo))

    def e_step(self, confusion: np.ndarray, temperature: float = 1.0) -> EStep:
        _, joint = item_log_joint(self.item, self.worker, self.label, confusion, self.prior, n_items=self.n_items)
        top = joint.max(axis=1, keepdims=True)
        q = np.exp(joint - top)
        total = q.sum(axis=1, keepdims=True)
        k = confusion.shape[-1]
        log_prior = float((k * self.beta * self.center[None] * safe_log(confusion)).sum())
        return EStep(q / total, float((np.log(total) + top).sum()) + log_prior)


@dataclass(frozen=True)
class ShrunkFit:
    """What :func:`community_em` ends on: the items' posterior, the matrices, the (held) class prior, the prior's
    strength ``β`` and centre (the crowd's matrix, else uniform), EM steps taken and whether the last run converged."""

    posterior: np.ndarray
    confusion: np.ndarray
    class_prior: np.ndarray
    strength: float
    crowd: bool
    n_iter: int
    converged: bool


def community_em(
    item: np.ndarray,
    worker: np.ndarray,
    label: np.ndarray,
    posterior: np.ndarray,
    prior: np.ndarray,
    *,
    n_workers: int,
) -> ShrunkFit:
    """The plan's own fit of the shrunk model: MAP EM of Dawid–Skene with every annotator's rows under the
    community prior (Venanzi et al. 2014: Dirichlet with the crowd's matrix as mean), from the fit's posterior.
    The EM is the shared driver's on :class:`ShrunkDawidSkene` (M-step: expected counts plus ``K β`` pseudo-counts
    of the centre; E-step: the items' posterior and the log posterior it stops on).  The class prior is held at the class
    shares of the responses: re-estimated with the rest it drifts, on a sparse crowd, to one class (3 of 22
    simulated crowds at 2 responses per item: 0.93/0.05/0.02 for a true 0.6/0.3/0.1), and the fit's own prior is
    as overfit as its matrices.
    The strength and centre are chosen on held-out responses (:func:`held_out_strength`) at the start and again at
    each fixed point (at most :data:`STRENGTH_ROUNDS` choices, :data:`EM_STEPS` steps each and
    :data:`EM_WORK` response-steps in all, stop at the driver's relative rule :data:`EM_TOL`): one M-step from a fit made on two or three responses per item keeps that fit's
    over-confidence (its posteriors were made by the very responses the counts score), while the shrunk model's
    own fixed point does not (docs/PLAN.md: plan-model accuracy and calibration)."""
    n, k = posterior.shape
    q = posterior
    pri = np.asarray(prior, float)
    steps, done = 0, False
    conf = np.full((n_workers, k, k), 1.0 / k)
    max_steps = max(3, EM_WORK // max(len(item), 1))
    if len(label):  # the class shares of the responses, held fixed (see the docstring)
        pri = np.clip(np.bincount(label, minlength=k) / len(label), PROB_FLOOR, 1.0)
        pri = pri / pri.sum()
    beta, crowd = held_out_strength(item, worker, label, q, pri, n_workers=n_workers)[:2]
    for r in range(STRENGTH_ROUNDS):
        if r:  # re-chosen at the fixed point; the same choice again ends the search
            again = held_out_strength(item, worker, label, q, pri, n_workers=n_workers)[:2]
            if again == (beta, crowd) and done:
                break
            (beta, crowd), done = again, False
        budget = min(EM_STEPS, max_steps - steps)
        if budget < 1:
            break
        model = ShrunkDawidSkene(item, worker, label, pri, n_items=n, n_workers=n_workers, beta=beta, crowd=crowd)
        run = run_em(model, model.m_step(q), EMSettings(tol=EM_TOL, max_iter=budget, name="plan model", warn=False))
        q, conf, done = run.posterior, run.state, run.converged
        steps += run.n_iter
    return ShrunkFit(q, np.asarray(conf), pri, beta, crowd, steps, done)


def predictive_model(
    resp: Responses, fit: FitResult, prior_count: float | str = "auto"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, str | None, ShrunkFit | None]:
    """The model the plan reasons with: items' posterior and annotators' confusions under the predictive
    confusions (module docstring; ``prior_count`` "auto": shrunk towards the crowd's matrix with the held-out
    strength, a number: Dirichlet(``prior_count``) towards uniform as :func:`predictive_confusion`, 0: the fit's
    own), the class prior, every response's item and annotator code in the fit, and a note (the one of
    :func:`model_confusion`, and the strength chosen), and with ``prior_count="auto"`` the shrunk model's fit
    (:func:`community_em`; the gain interval draws from it, :mod:`.refit_gain`)."""
    conf, prior, note = model_confusion(fit)
    workers = pd.Index(fit.workers)
    item_of = pd.Index(fit.items).get_indexer(resp.items)[resp.item]
    worker_of = workers.get_indexer(resp.workers)[resp.worker]
    if (item_of < 0).any():
        raise UserInputError("the responses have tasks the fit does not know; plan with the data that was fitted.")
    post = np.clip(np.asarray(fit.posterior, float), 0.0, 1.0)
    ok = worker_of >= 0
    seen = np.bincount(worker_of[ok], minlength=len(workers))
    if prior_count == "auto":
        sf = community_em(item_of[ok], worker_of[ok], resp.label[ok], post, prior, n_workers=len(workers))
        shrink = (
            f"annotators' matrices shrunk towards {'the crowd average' if sf.crowd else 'uniform'} with "
            f"{sf.strength:g} pseudo-responses per cell (chosen on held-out responses; {sf.n_iter} EM steps of the "
            f"shrunk model from the fit's posterior{'' if sf.converged else ', stopped before converging'})."
        )
        note = f"{note} {shrink}" if note else shrink
        return sf.posterior, sf.confusion, sf.class_prior, item_of, worker_of, note, sf
    elif float(prior_count) > 0:
        conf = predictive_confusion(conf, prior, seen, float(prior_count))
    else:
        return post, conf, prior, item_of, worker_of, note, None
    post = predictive_posterior(item_of, worker_of, resp.label, conf, prior, n_items=len(post))
    return post, conf, prior, item_of, worker_of, note, None


@dataclass(frozen=True)
class PlanningModel:
    """What the plan reasons with (:func:`planning_model`): the items' belief ``posterior`` (items × K), every
    annotator's own predictive matrix ``own`` and the matrix the plan values them by, ``confusion`` (their own when
    ``distinct``, the crowd's average otherwise), the class prior, every response's item and annotator code in the
    fit, the note of :func:`predictive_model` and the shrunk model's fit."""

    posterior: np.ndarray
    own: np.ndarray
    confusion: np.ndarray
    distinct: np.ndarray
    class_prior: np.ndarray
    item: np.ndarray
    worker: np.ndarray
    note: str | None
    shrunk: ShrunkFit | None


def planning_model(
    resp: Responses, fit: FitResult, prior_count: float | str = "auto", z: float = EVIDENCE_Z
) -> PlanningModel:
    """The plan's model (:func:`predictive_model`) with the annotators the responses do not tell apart from the
    crowd at ``z`` (:func:`planning_confusion`; only with ``prior_count`` "auto") valued alike — and, with
    :data:`POOLED_BELIEF`, their *past* responses weighed alike too: the items' belief is the posterior under the
    same matrices (:func:`predictive_posterior`).  An item split between two such annotators is then a tie, as
    their evidence says, not settled by the noise of their fitted rows (face at 2 responses per item: where the
    shrunk model's own-matrix posterior and the fit break a tie differently neither is right more often)."""
    post, own, prior, item_of, worker_of, note, shrunk = predictive_model(resp, fit, prior_count)
    z = z if prior_count == "auto" else 0.0  # a given prior_count: the annotators' matrices as given
    ok = worker_of >= 0
    n = len(post)
    conf, distinct = planning_confusion(item_of[ok], worker_of[ok], resp.label[ok], own, prior, n_items=n, z=z)
    if POOLED_BELIEF and z > 0 and not distinct.all():
        post = predictive_posterior(item_of, worker_of, resp.label, conf, prior, n_items=n)
    return PlanningModel(post, own, conf, distinct, prior, item_of, worker_of, note, shrunk)


__all__ = [
    "EVIDENCE_Z",
    "MAX_SCORED",
    "POOLED_BELIEF",
    "STRENGTH_GRID",
    "PlanningModel",
    "ShrunkFit",
    "community_em",
    "crowd_confusion",
    "distinct_annotators",
    "held_out_log_likelihood",
    "held_out_strength",
    "loo_right",
    "model_confusion",
    "planning_confusion",
    "planning_model",
    "predictive_confusion",
    "predictive_model",
    "predictive_posterior",
]
