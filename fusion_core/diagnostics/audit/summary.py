"""The audit as plain JSON values: what ``fusion-core report`` writes to ``summary.json`` beside the HTML report
and the app offers as a download (one place, so both say the same)."""

from __future__ import annotations

from typing import Any

from fusion_core.diagnostics.audit.result import AuditResult
from fusion_core.diagnostics.pairwise_audit import pairwise_findings
from fusion_core.methods.results import jsonable


def audit_summary(audit: AuditResult) -> dict[str, Any]:
    """Counts, the method and its choice, verdicts per kind, the labels' accuracy (the honest range of
    :mod:`.safety` when the recommended method chose), the safety checks, the cartel check and the warnings."""
    q = audit.labels
    out: dict[str, Any] = {
        "dataset": audit.dataset,
        "responses": audit.n_responses,
        "items": audit.n_items,
        "annotators": audit.n_workers,
        "labels": [str(c) for c in audit.classes],
        "method": audit.method,
        "verdicts": {str(k): int(v) for k, v in audit.annotators.counts().items()},
        "expected_accuracy_if_model_holds": {
            "estimate": jsonable(q.accuracy),
            "low": jsonable(q.low),
            "high": jsonable(q.high),
        },
        "gold_accuracy": jsonable(q.gold_accuracy),
        "gold_items": int(q.n_gold),
        "items_to_look_at_again": int(audit.review.flagged.sum()),
        "cartel": {
            "status": audit.cartel.status,
            "groups": [list(g) for g in audit.cartel.groups],
            "kinds": list(audit.cartel.frame()["kind"]),
        },
        "warnings": list(audit.warnings),
    }
    sel = audit.fit.selection
    if sel is not None:
        out["chosen_method"] = sel.chosen
        out["combined_methods"] = list(sel.members or (sel.chosen,))
    if audit.ratings is not None:  # ordered levels or numbers: the rating verdicts lead (docs/RATINGS.md)
        r = audit.ratings
        out["rating_verdicts"] = {"model": r.model, "basis": r.basis, "unit": r.unit, "verdicts": r.counts()}
    if audit.safety is not None:
        out["label_safety"] = {k: jsonable(v) for k, v in audit.safety.summary().items()}
    if audit.plan is not None:
        out["relabel_plan"] = audit.plan.to_dict()
    if audit.pairwise is not None:  # pairwise judgements: the ranking and the judges' biases
        pw = audit.pairwise
        out["pairwise"] = {
            "method": pw.method,
            "ranking": [str(o) for o in pw.ranking.table.index],
            "position_bias": [str(j) for j in pw.bias.flagged("position")],
            "findings": [{"question": q, "answer": a} for q, a in pairwise_findings(pw)],
        }
    return out


__all__ = ["audit_summary"]
