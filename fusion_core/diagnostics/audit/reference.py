"""Flags that do not rest on an uncertain reference (docs/AUDIT.md, "The verdict rule").

An annotator's skill above chance is measured against the fitted posterior — the reference.  Where the reference
is itself uncertain, disagreeing with it is weak evidence: a minority of good annotators who disagree with a poor
majority look near chance (or worse) against labels that follow the majority.  Two checks that do not trust the
chosen model decide how far the reference may be wrong, and a flag (near chance, worse than chance) stands only if
it also holds against the most favourable plausible reference:

1. **The other plausible models** (``ModelChoice.alternatives``: the held-out responses cannot tell them from the
   chosen one).  The annotator's skill is measured against each of their posteriors too; the most favourable
   estimate and upper end count.
2. **The honest accuracy range** (:mod:`.safety`).  The model's own figure ``M`` assumes the model is right; the
   range's low end ``L`` is what the checks that do not trust it allow.  An annotator whose errors are independent
   of the reference's shows against a reference right with probability r a skill attenuated by the reference's
   own skill above chance, ``κ_obs ≈ κ_j · κ_ref(r)`` with ``κ_ref(r) = (r − c₀)/(1 − c₀)``, ``c₀ = Σ_k π_k²``
   (the attenuation of an association by misclassification in the reference, for errors spread evenly over the
   other labels).  The skill is measured as if the reference were ``M`` right; if it is only ``L`` right,
   it is ``κ_ref(M)/κ_ref(L)`` times larger.  The most favourable value over ``r`` in ``[L, M]`` counts for the
   estimate and for the interval's upper end (a positive skill grows, a negative one keeps its value).  A
   guesser stays at 0 against any reference — near-chance verdicts of real guessers survive — while an interval
   that reaches the band once the reference's uncertainty is counted no longer supports a flag.

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
    """Per annotator, the most favourable skill above chance any plausible reference allows: ``skill`` (estimate)
    and ``high`` (upper end of the interval); ``gap``: how much the model's own accuracy figure exceeds the honest
    range's low end; ``factor``: κ_ref(M)/κ_ref(L) (module docstring); ``alternatives``: the plausible models also
    measured against; ``range_low``/``range_high``: the honest range."""

    skill: np.ndarray
    high: np.ndarray
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
    resp: Responses, fit: FitResult, evidence: AccuracyEvidence, accuracy: AccuracyRange | None
) -> ReferenceBounds:
    """The most favourable plausible reference per annotator (module docstring), from the audit's ``evidence``
    against the chosen posterior, the fit's plausible alternatives and the honest ``accuracy`` range."""
    skill = np.asarray(evidence.skill, dtype=float).copy()
    high = np.asarray(evidence.skill_high, dtype=float).copy()
    sel = fit.selection
    names: tuple[str, ...] = ()
    if sel is not None and sel.alternative_posteriors:
        names = tuple(sel.alternatives)
        for post in sel.alternative_posteriors:
            alt = accuracy_evidence(resp, np.asarray(post, dtype=float), fit.class_prior, level=evidence.level)
            skill = np.fmax(skill, alt.skill)
            high = np.fmax(high, alt.skill_high)
    gap, lo, hi, factor = 0.0, float("nan"), float("nan"), 1.0
    if accuracy is not None:
        gap = float(max(accuracy.model - accuracy.low, 0.0))
        lo, hi = accuracy.low, accuracy.high
        prior = fit.class_prior if fit.class_prior is not None else fit.posterior.mean(axis=0)
        factor = attenuation(accuracy.model, accuracy.low, prior)
    with np.errstate(invalid="ignore", over="ignore"):
        skill = np.where(skill > 0, skill * factor, skill)
        high = np.where(high > 0, high * factor, high)
    return ReferenceBounds(skill, high, gap, factor, names, lo, hi)
