"""What :func:`~fusion_core.diagnostics.audit.run_audit` returns: :class:`AuditResult` and its parts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from fusion_core.diagnostics.agreement import AGREEMENT_STATISTICS
from fusion_core.diagnostics.audit.evidence import AccuracyEvidence
from fusion_core.diagnostics.audit.items import LabelQuality, ReviewItems
from fusion_core.diagnostics.audit.rules import DEPENDENT, SEVERITY, VERDICTS, VerdictRule
from fusion_core.diagnostics.audit.safety import LabelSafety
from fusion_core.diagnostics.cartels import CartelReport
from fusion_core.diagnostics.drift import DriftReport
from fusion_core.diagnostics.pairwise_audit import PairwiseAudit
from fusion_core.diagnostics.plan import RelabelPlan
from fusion_core.diagnostics.rating_verdicts import RatingVerdicts
from fusion_core.diagnostics.reliability import ReliabilityEstimate
from fusion_core.methods.results import FitResult


@dataclass(frozen=True)
class AnnotatorVerdicts:
    """One verdict per annotator (``evidence.workers`` order) with its reason, the evidence it rests on and the
    rule; ``roles`` holds simulated roles (demo data only, for evaluation); ``p_near_chance``: the posterior
    probability that the skill above chance is below the rule's band against the most favourable plausible
    reference, which the near-chance flag reads (:mod:`.reference`)."""

    evidence: AccuracyEvidence
    verdict: np.ndarray
    reason: np.ndarray
    rule: VerdictRule
    roles: pd.Series | None = None
    p_near_chance: np.ndarray | None = None

    @property
    def workers(self) -> pd.Index:
        return self.evidence.workers

    def counts(self) -> pd.Series:
        """Annotators per verdict, worst first (every verdict listed, zeros included)."""
        return pd.Series(self.verdict).value_counts().reindex(list(VERDICTS), fill_value=0).rename("annotators")

    def frame(self) -> pd.DataFrame:
        """The verdict table shown and downloaded: one row per annotator, worst first (verdict severity, then
        skill above chance, lowest first)."""
        e = self.evidence
        pct = f"{100 * e.level:.0f}%"
        df = pd.DataFrame(
            {
                "verdict": self.verdict,
                "skill above chance": e.skill,
                f"skill {pct} low": e.skill_low,
                f"skill {pct} high": e.skill_high,
                "accuracy": e.accuracy,
                "chance accuracy": e.chance,
                "responses": e.n_responses,
                "responses on shared items": e.n_shared,
                "why": self.reason,
            },
            index=pd.Index(e.workers, name="annotator"),
        )
        if self.p_near_chance is not None:
            df.insert(3, f"probability skill < {self.rule.chance_band:g}", self.p_near_chance)
        if self.roles is not None:
            df["simulated role"] = self.roles.reindex(e.workers).astype(str).to_numpy()
        severity = np.array([SEVERITY[v] for v in self.verdict])
        order = np.lexsort((np.nan_to_num(e.skill, nan=np.inf), severity))
        return df.iloc[order]


@dataclass(frozen=True)
class CartelCheck:
    """The collusion check as the audit ran it: ``status`` as :class:`CartelReport`'s (``could_not_run`` also when
    the data do not allow the test at all, e.g. more than two labels), ``reason`` in plain words, the dependent
    ``groups`` found (annotator ids) with their ``kinds`` (near-duplicate annotators / possible collusion, the words
    of :mod:`fusion_core.diagnostics.cartels.words`), and the detector's ``report`` when it ran."""

    status: Literal["groups_found", "no_evidence", "could_not_run"]
    reason: str
    groups: tuple[tuple[str, ...], ...] = ()
    report: CartelReport | None = None
    kinds: tuple[str, ...] = ()

    @property
    def members(self) -> set[str]:
        return {w for g in self.groups for w in g}

    def frame(self) -> pd.DataFrame:
        """One row per dependent group found: its kind, its size and its members (ids as written, comma-separated)."""
        kinds = list(self.kinds) if len(self.kinds) == len(self.groups) else [DEPENDENT] * len(self.groups)
        return pd.DataFrame(
            {
                "kind": kinds,
                "members": [len(g) for g in self.groups],
                "annotators": [", ".join(g) for g in self.groups],
            },
            index=pd.Index([f"group {i + 1}" for i in range(len(self.groups))], name="group"),
        )


@dataclass(frozen=True)
class StageTime:
    """Seconds one stage of the audit took."""

    stage: str
    seconds: float


@dataclass(frozen=True)
class AuditResult:
    """A one-click audit: the recommended method's fit, a verdict per annotator, the quality of the aggregated
    labels, the items to look at again, agreement with intervals and the cartel check.  For ordered levels or
    numbers (``label_type`` ``ordinal`` / ``numeric``), ``ratings`` holds the rating verdicts (harsh, lenient,
    noisy … from bias and noise with bootstrap intervals, :mod:`.ratings`); the categorical parts then read the
    levels as categories.  With a time column, ``drift`` holds reliability over time (who got better or worse, and
    when; :mod:`fusion_core.diagnostics.drift`).  For pairwise judgements (a dataset with ``pairwise``), the
    categorical parts audit the judges' choices and ``pairwise`` holds the ranking of the options with intervals and
    the judges' reliability and biases (:func:`fusion_core.diagnostics.pairwise_audit.pairwise_audit`)."""

    dataset: str
    description: str
    n_responses: int
    n_items: int
    n_workers: int
    classes: pd.Index
    fit: FitResult
    method: str
    annotators: AnnotatorVerdicts
    labels: LabelQuality
    review: ReviewItems
    agreement: tuple[ReliabilityEstimate, ...]  # every statistic of diagnostics.agreement.AGREEMENT_STATISTICS
    agreement_note: str
    cartel: CartelCheck
    timings: tuple[StageTime, ...] = ()
    warnings: tuple[str, ...] = ()
    label_type: str = "nominal"
    ratings: RatingVerdicts | None = None
    wall: float | None = None
    safety: LabelSafety | None = None
    plan: RelabelPlan | None = None  # which labels to buy next (fusion_core.diagnostics.plan.audit_plan)
    drift: DriftReport | None = None
    pairwise: PairwiseAudit | None = None  # pairwise judgements: ranking, judges' biases (pairwise_audit)

    def agreement_of(self, key: str) -> ReliabilityEstimate | None:
        """The estimate of the registered agreement statistic ``key`` (e.g. ``"krippendorff_alpha"``), or None when
        agreement could not be measured."""
        keys = [e.key for e in AGREEMENT_STATISTICS]
        return self.agreement[keys.index(key)] if self.agreement else None

    @property
    def seconds(self) -> float:
        """Seconds the audit took (its stages overlap when some ran in the background: ``wall`` is the elapsed
        time; the stages' sum when it is not known)."""
        return float(self.wall) if self.wall is not None else float(sum(t.seconds for t in self.timings))


@dataclass(frozen=True)
class AuditProgress:
    """One progress event of :func:`run_audit`: the stage in plain words, the share of the whole audit done
    (0–1, never decreasing), seconds since the start and the estimated seconds left (None until estimable)."""

    stage: str
    fraction: float
    elapsed: float
    seconds_left: float | None
