"""Flags that do not rest on an uncertain reference (docs/AUDIT.md, "The verdict rule").

An annotator's skill above chance is measured against the rest of the crowd's posterior — the reference
(:mod:`.evidence`: leave-self-out, so nobody is judged against labels they shaped).  Where the reference is itself
uncertain, disagreeing with it is weak evidence: a minority of good annotators who disagree with a poor majority look
near chance (or worse) against labels that follow the majority.  Two checks that do not trust the chosen model
decide how far the reference may be wrong, and a flag (near chance, worse than chance) stands only if it also holds
against the most favourable plausible reference:

1. **The other plausible models** (``ModelChoice.alternatives``: the held-out responses cannot tell them from the
   chosen one).  The annotator is measured against each of their posteriors too, and the probabilities of "below
   the band" and "below 0" (and the estimates) are *averaged* over the chosen model and these with equal weights:
   Bayesian model averaging (Hoeting et al. 1999, eq. 1) — the held-out likelihood gives the models equal support,
   so ``P(κ < band | data)`` is the mean of the models' probabilities.  (The previous rule took the smallest
   probability over the models, a worst case that counted a model plausible enough to veto a flag but not to
   support one.)
2. **The honest accuracy range** (:mod:`.safety`).  The model's own figure ``M`` assumes the model is right; the
   range's low end ``L`` is what the checks that do not trust it allow (a bound with no distribution over it, so
   the flag must hold at its worst case: the model average at ``L`` as well as at ``M``).  An annotator whose
   errors are independent of the reference's shows against a reference right with probability r a skill attenuated by the reference's
   own skill above chance, ``κ_obs ≈ κ_j · κ_ref(r)`` with ``κ_ref(r) = (r − c₀)/(1 − c₀)``, ``c₀ = Σ_k π_k²``
   (the attenuation of an association by misclassification in the reference, for errors spread evenly over the
   other labels).  The skill is measured as if the reference were ``M`` right; if it is only ``L`` right,
   it is ``κ_ref(M)/κ_ref(L)`` times larger.  So the flag reads ``P(κ_obs < band · κ_ref(L)/κ_ref(M))`` from
   the posterior of the measured skill — the probability that the skill is below the band even if the labels are
   only ``L`` right (a positive skill grows, a negative one keeps its value; the estimate and upper end shown as
   the favourable ones are scaled the same way).  A guesser stays at 0 against any reference — near-chance
   verdicts of real guessers with enough responses survive — while an annotator whose skill reaches the band once
   the reference's uncertainty is counted is not flagged.  ``L`` is the low end over the latent-truth figures
   (``AccuracyRange.reference_low``): the range's *population* figure assumes errors shared with the reference,
   where the attenuation's independence does not hold (against that model the skill measured against the rest of
   the crowd is the skill itself); letting it re-scale skills turned the demo crowd's spammers into "not enough
   responses to tell" wherever its cartel made the crowd look overdispersed (spammers flagged 0.92 → 0.86 over 30
   seeds).

A flag that fails only these checks becomes "not enough responses to tell", with the reason.  Where the reference
is pinned down (alternatives that agree, ``M ≈ L``) nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit.evidence import AccuracyEvidence, accuracy_evidence
from fusion_core.diagnostics.audit.safety import AccuracyRange
from fusion_core.methods.results import FitResult


@dataclass(frozen=True)
class ReferenceBounds:
    """Per annotator, against the most favourable plausible reference: ``p_near`` / ``p_worse``, the posterior
    probability that the skill above chance is below the band / below 0, averaged over the plausible models
    (module docstring, 1.) and read at the model's figure and at the honest range's low end — ``p_near`` with its
    prior probability ``prior_near`` from the one of the two that leaves the near-chance flag the least margin,
    ``p_near − max(flag_probability, prior_near)``, ``p_worse`` the smaller —, and ``skill`` / ``high``, the
    model-averaged estimate and upper end of the interval scaled as at the low end; ``gap``: how much the model's
    own accuracy figure exceeds the honest range's low end; ``factor``: κ_ref(M)/κ_ref(L) (module docstring);
    ``alternatives``: the plausible models also measured against; ``range_low``/``range_high``: the honest range."""

    skill: np.ndarray
    high: np.ndarray
    p_near: np.ndarray
    p_worse: np.ndarray
    prior_near: np.ndarray
    gap: float
    factor: float
    alternatives: tuple[str, ...]
    range_low: float
    range_high: float

    def why(self) -> str:
        """The reason a flag that fails these checks gets (plain words)."""
        parts = []
        if np.isfinite(self.range_low) and self.factor > 1.0:
            parts.append(
                f"the labels it is judged against may be only {100 * self.range_low:.0f}–"
                f"{100 * self.range_high:.0f}% right"
            )
        if self.alternatives:
            parts.append(
                f"{', '.join(self.alternatives)} (as plausible as the chosen model) labels its items otherwise"
            )
        what = "; ".join(parts) or "the labels it is judged against are uncertain"
        return f"{what}: against the most favourable of these its skill could reach the band"


def attenuation(model: float, low: float, prior: np.ndarray) -> float:
    """``κ_ref(model) / κ_ref(low)`` (module docstring, at least 1; infinite when ``low`` is at or below chance
    agreement ``c₀ = Σ_k π_k²``): how much larger an annotator's skill may be than measured against a reference
    the model calls ``model`` right when it is only ``low`` right."""
    p = np.asarray(prior, dtype=float)
    p = p / p.sum()
    c0 = float(p @ p)
    k_model, k_low = (model - c0) / (1.0 - c0), (low - c0) / (1.0 - c0)
    if k_low <= 1e-6:
        return float("inf")
    return float(max(k_model / k_low, 1.0))


def reference_bounds(
    resp: Responses,
    fit: FitResult,
    evidence: AccuracyEvidence,
    accuracy: AccuracyRange | None,
    flag_probability: float = 0.5,
) -> ReferenceBounds:
    """The most favourable plausible reference per annotator (module docstring), from the audit's ``evidence``
    against the chosen posterior, the fit's plausible alternatives and the honest ``accuracy`` range: the model
    average (the chosen model and the alternatives, equal weights) as the models give their labels, and made as
    unsure as the range's low end allows; the near-chance flag reads the one of the two that leaves it the least
    margin, the worse-than-chance flag the smaller probability."""
    gap, lo, hi, factor = 0.0, float("nan"), float("nan"), 1.0
    if accuracy is not None:
        gap = float(max(accuracy.model - accuracy.reference_low, 0.0))
        lo, hi = accuracy.reference_low, accuracy.high
        prior = fit.class_prior if fit.class_prior is not None else fit.posterior.mean(axis=0)
        factor = attenuation(accuracy.model, accuracy.reference_low, prior)
    sel = fit.selection
    names: tuple[str, ...] = ()
    others: list[np.ndarray] = []
    if sel is not None and sel.alternative_posteriors:
        names = tuple(sel.alternatives)
        others = [np.asarray(post, dtype=float) for post in sel.alternative_posteriors]

    def measured(post: np.ndarray, conf: np.ndarray | None, f: float) -> AccuracyEvidence:
        return accuracy_evidence(
            resp,
            post,
            fit.class_prior,
            level=evidence.level,
            confusion=conf,
            chance_band=evidence.chance_band,
            attenuation=f,
        )

    averages = [[evidence, *(measured(post, None, 1.0) for post in others)]]
    if factor > 1.0:
        chosen = (np.asarray(fit.posterior, dtype=float), fit.confusion)
        averages.append([measured(post, conf, factor) for post, conf in [chosen, *((o, None) for o in others)]])
    nan = np.full(len(evidence.skill), np.nan)

    def mean(found: list[AccuracyEvidence], field: str) -> np.ndarray:
        """The model average (module docstring, 1.) of one per-annotator field (NaN where every model's is)."""
        x = np.stack([nan if getattr(e, field) is None else getattr(e, field) for e in found])
        ok = np.isfinite(x)
        return np.where(ok.any(axis=0), np.where(ok, x, 0.0).sum(axis=0) / np.maximum(ok.sum(axis=0), 1), np.nan)

    skill, high = (mean(averages[0], f) for f in ("skill", "skill_high"))
    with np.errstate(invalid="ignore", over="ignore"):
        skill, high = (np.where(x > 0, x * factor, x) for x in (skill, high))
    p = np.stack([mean(a, "p_near_chance") for a in averages])
    p0 = np.stack([mean(a, "prior_near_chance") for a in averages])
    margin = np.where(np.isfinite(p), p - np.maximum(flag_probability, np.nan_to_num(p0)), np.inf)
    least = np.argmin(margin, axis=0)
    rows = np.arange(p.shape[1])
    return ReferenceBounds(
        skill=skill,
        high=high,
        p_near=p[least, rows],
        prior_near=p0[least, rows],
        p_worse=np.fmin.reduce([mean(a, "p_worse") for a in averages]),
        gap=gap,
        factor=factor,
        alternatives=names,
        range_low=lo,
        range_high=hi,
    )
