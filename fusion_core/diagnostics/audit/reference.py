"""Flags that do not rest on an uncertain reference (docs/AUDIT.md, "The verdict rule").

An annotator's skill above chance is measured against the rest of the crowd's posterior — the reference
(:mod:`.evidence`: leave-self-out, so nobody is judged against labels they shaped).  Where the reference is itself
uncertain, disagreeing with it is weak evidence: a minority of good annotators who disagree with a poor majority look
near chance (or worse) against labels that follow the majority.  Two checks that do not trust the chosen model
decide how far the reference may be wrong, and a flag (near chance, worse than chance) stands only if it also holds
against the most favourable plausible reference — the verdict reads the *smallest* posterior probability of
"below the band" (and of "below 0") over these references:

1. **The other plausible models** (``ModelChoice.alternatives``: the held-out responses cannot tell them from the
   chosen one).  The annotator is measured against each of their posteriors too.
2. **The honest accuracy range** (:mod:`.safety`).  The model's own figure ``M`` assumes the model is right; the
   range's low end ``L`` is what the checks that do not trust it allow.  An annotator whose errors are independent
   of the reference's shows against a reference right with probability r a skill attenuated by the reference's
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
    """Per annotator, against the most favourable plausible reference: ``p_near`` / ``p_worse``, the smallest
    posterior probability that the skill above chance is below the band / below 0 (``p_near`` with its prior
    probability ``prior_near``, from the reference that leaves the near-chance flag the least margin,
    ``p_near − max(flag_probability, prior_near)``), and ``skill`` / ``high``, the
    highest estimate and upper end of the interval; ``gap``: how much the model's own accuracy figure exceeds the
    honest range's low end; ``factor``: κ_ref(M)/κ_ref(L) (module docstring);
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
    against the chosen posterior, the fit's plausible alternatives and the honest ``accuracy`` range: every
    reference as the model gives it and made as unsure as the range's low end allows."""
    gap, lo, hi, factor = 0.0, float("nan"), float("nan"), 1.0
    if accuracy is not None:
        gap = float(max(accuracy.model - accuracy.reference_low, 0.0))
        lo, hi = accuracy.reference_low, accuracy.high
        prior = fit.class_prior if fit.class_prior is not None else fit.posterior.mean(axis=0)
        factor = attenuation(accuracy.model, accuracy.reference_low, prior)
    sel = fit.selection
    names: tuple[str, ...] = ()
    refs: list[tuple[np.ndarray, np.ndarray | None]] = []
    if sel is not None and sel.alternative_posteriors:
        names = tuple(sel.alternatives)
        refs = [(np.asarray(post, dtype=float), None) for post in sel.alternative_posteriors]
    found = [evidence]
    if factor > 1.0 or refs:
        for post, conf in [(np.asarray(fit.posterior, dtype=float), fit.confusion), *refs]:
            found.append(
                accuracy_evidence(
                    resp,
                    post,
                    fit.class_prior,
                    level=evidence.level,
                    confusion=conf,
                    chance_band=evidence.chance_band,
                    attenuation=factor,
                )
            )
    with np.errstate(invalid="ignore", over="ignore"):
        skill = np.fmax.reduce([np.where(e.skill > 0, e.skill * factor, e.skill) for e in found])
        high = np.fmax.reduce([np.where(e.skill_high > 0, e.skill_high * factor, e.skill_high) for e in found])
    nan = np.full(len(evidence.skill), np.nan)
    p = np.stack([nan if e.p_near_chance is None else e.p_near_chance for e in found])
    p0 = np.stack([nan if e.prior_near_chance is None else e.prior_near_chance for e in found])
    margin = np.where(np.isfinite(p), p - np.maximum(flag_probability, np.nan_to_num(p0)), np.inf)
    least = np.argmin(margin, axis=0)
    rows = np.arange(p.shape[1])
    return ReferenceBounds(
        skill=skill,
        high=high,
        p_near=p[least, rows],
        prior_near=p0[least, rows],
        p_worse=np.fmin.reduce([nan if e.p_worse is None else e.p_worse for e in found]),
        gap=gap,
        factor=factor,
        alternatives=names,
        range_low=lo,
        range_high=hi,
    )
