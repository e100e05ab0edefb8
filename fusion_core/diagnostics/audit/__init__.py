"""The one-click audit (docs/AUDIT.md): :func:`run_audit` fits the recommended method, measures agreement, runs
the cartel check and decides a verdict per annotator from their accuracy with its uncertainty.

* :mod:`.rules` — the verdicts and the thresholds of the rule (declared once, :class:`VerdictRule`);
* :mod:`.patterns` — what an annotator's labels look like beside the crowd's (a swap of labels, one label
  given almost always), for the verdicts and their reasons;
* :mod:`.evidence` — each annotator's accuracy and skill above chance against the rest of the crowd's labels
  (leave-self-out posterior: interval and the probabilities the flags read);
* :mod:`.items` — expected accuracy of the labels, items to look at again, changes against majority vote;
* agreement: every statistic of :data:`fusion_core.diagnostics.agreement.AGREEMENT_STATISTICS` with bootstrap
  intervals;
* :mod:`.result` — :class:`AuditResult` and its parts; :mod:`.runner` — :func:`run_audit`;
* :mod:`.ratings` — the label type (nominal, ordinal, numeric) and the rating verdicts for ordered levels or
  numbers;
* :mod:`.words` — the findings in plain words, for the app and the report; :mod:`.glossary` — every term once.
"""

from fusion_core.diagnostics.audit.evidence import AccuracyEvidence, accuracy_evidence
from fusion_core.diagnostics.audit.items import DEFAULT_REVIEW, LabelQuality, ReviewItems, ReviewRule
from fusion_core.diagnostics.audit.ratings import (
    AUDIT_LABEL_TYPES,
    audit_ratings,
    rating_verdicts_for,
    suggested_label_type,
)
from fusion_core.diagnostics.audit.result import (
    AnnotatorVerdicts,
    AuditProgress,
    AuditResult,
    CartelCheck,
    StageTime,
)
from fusion_core.diagnostics.audit.rules import (
    ACCEPTABLE,
    ADVERSARIAL,
    DEFAULT_RULE,
    DEPENDENT,
    NOISY,
    RELIABLE,
    SPAMMER,
    SWAPS,
    TOO_FEW,
    VERDICTS,
    VerdictRule,
    decide,
)
from fusion_core.diagnostics.audit.runner import describe_method, run_audit
from fusion_core.diagnostics.audit.safety import AccuracyRange, LabelSafety, VoteDeparture, label_safety
from fusion_core.diagnostics.audit.summary import audit_summary
from fusion_core.diagnostics.audit.words import Finding, accuracy_tile, findings, flagged_tile, needs_care

__all__ = [
    "ACCEPTABLE",
    "ADVERSARIAL",
    "AUDIT_LABEL_TYPES",
    "DEFAULT_REVIEW",
    "DEFAULT_RULE",
    "DEPENDENT",
    "NOISY",
    "RELIABLE",
    "SPAMMER",
    "SWAPS",
    "TOO_FEW",
    "VERDICTS",
    "AccuracyEvidence",
    "AccuracyRange",
    "AnnotatorVerdicts",
    "AuditProgress",
    "AuditResult",
    "CartelCheck",
    "Finding",
    "LabelQuality",
    "LabelSafety",
    "ReviewItems",
    "ReviewRule",
    "StageTime",
    "VerdictRule",
    "VoteDeparture",
    "accuracy_evidence",
    "accuracy_tile",
    "audit_ratings",
    "audit_summary",
    "decide",
    "describe_method",
    "findings",
    "flagged_tile",
    "label_safety",
    "needs_care",
    "rating_verdicts_for",
    "run_audit",
    "suggested_label_type",
]
