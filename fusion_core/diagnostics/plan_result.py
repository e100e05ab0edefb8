"""The re-labelling plan's result (:func:`.plan.plan_relabel`): the assignments, the expected accuracy before and
after, the gain's intervals and the plain-words summary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.diagnostics.refit_gain import RefitGain


@dataclass(frozen=True)
class RelabelPlan:
    """A re-labelling plan (module docstring).  Per planned item (plan order, best first): ``tasks``, the
    suggested ``annotators`` (ids as written, in the order they were chosen), the ``expected_gain`` of all its
    planned responses together, the current ``label`` and its ``confidence``.  ``assignment_*`` list every planned
    (task, annotator) pair in the order chosen with its marginal gain."""

    tasks: pd.Index
    annotators: tuple[tuple[Any, ...], ...]
    expected_gain: np.ndarray
    label: pd.Index
    confidence: np.ndarray
    assignment_task: pd.Index
    assignment_annotator: pd.Index
    assignment_gain: np.ndarray
    n_items: int
    budget: float
    spent: float
    target: float | None
    items_at_target: int
    accuracy_before: float
    accuracy_after: float
    stop_reason: str
    n_candidates: int
    method: str
    notes: tuple[str, ...] = ()
    gain_sd: float = 0.0  # sd of the realised accuracy gain under the model (voi.gain_variance)
    refit: RefitGain | None = None  # the realised gain simulated with the refit (refit_gain.refit_gain)

    def gain_interval(self, level: float = 0.9) -> tuple[float, float]:
        """Interval for the realised accuracy gain (refit labels − current labels, on all items): the simulated
        refit's with its misspecification allowance (:mod:`.refit_gain`) when computed, else :meth:`model_interval`."""
        if self.refit is not None and len(self.refit.draws):
            return self.refit.interval(level)
        return self.model_interval(level)

    def model_interval(self, level: float = 0.9) -> tuple[float, float]:
        """Interval for the realised accuracy gain (after − before) under the model: the expected gain ± z·sd, the
        responses' outcomes being random (normal approximation to the sum over independent items; the refit and
        the model's own error left out — too narrow on real crowds, docs/PLAN.md)."""
        from statistics import NormalDist

        z = NormalDist().inv_cdf(0.5 + level / 2)
        g = self.accuracy_after - self.accuracy_before
        return g - z * self.gain_sd, g + z * self.gain_sd

    @property
    def n_labels(self) -> int:
        return len(self.assignment_task)

    def frame(self) -> pd.DataFrame:
        """One row per item to re-label (best first): what a platform takes — task, suggested annotators
        (``; ``-separated), how many, expected gain, current label and confidence."""
        return pd.DataFrame(
            {
                "task": self.tasks,
                "suggested annotators": ["; ".join(str(w) for w in ws) for ws in self.annotators],
                "labels to buy": [len(ws) for ws in self.annotators],
                "expected gain": self.expected_gain,
                "current label": self.label,
                "confidence": self.confidence,
            }
        )

    def assignments(self) -> pd.DataFrame:
        """One row per planned response, in the order chosen: task, annotator, marginal expected gain."""
        return pd.DataFrame(
            {
                "order": np.arange(1, self.n_labels + 1),
                "task": self.assignment_task,
                "annotator": self.assignment_annotator,
                "marginal gain": self.assignment_gain,
            }
        )

    def summary(self) -> str:
        """The plan in plain words."""
        if self.n_labels == 0:
            head = f"No extra label is suggested ({self.stop_reason}); the expected accuracy stays at {self.accuracy_before:.0%}."
        else:
            head = (
                f"With {self.n_labels:,} more labels on {len(self.tasks):,} items the expected accuracy rises from "
                f"{self.accuracy_before:.1%} to {self.accuracy_after:.1%}"
            )
            if self.gain_sd > 0 or self.refit is not None:
                lo, hi = self.gain_interval()
                a, b = (min(1.0, max(0.0, self.accuracy_before + x)) for x in (lo, hi))
                head += f" (90 % interval {a:.1%}–{b:.1%}; stopped: {self.stop_reason})."
            else:
                head += f" (stopped: {self.stop_reason})."
        if self.target is not None:
            head += f" {self.items_at_target:,} of {self.n_items:,} items already meet the target confidence {self.target:g}."
        return head

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready figures (for ``summary.json``)."""
        return {
            "labels": self.n_labels,
            "items": len(self.tasks),
            "budget": float(self.budget),
            "spent": float(self.spent),
            "target": self.target,
            "items_at_target": int(self.items_at_target),
            "expected_accuracy_before": float(self.accuracy_before),
            "expected_accuracy_after": float(self.accuracy_after),
            "expected_gain_interval_90": [float(x) for x in self.gain_interval()],
            "expected_gain_interval_90_model_only": [float(x) for x in self.model_interval()],
            "interval_refit_draws": 0 if self.refit is None else len(self.refit.draws),
            "stop_reason": self.stop_reason,
            "candidates": int(self.n_candidates),
            "method": self.method,
            "summary": self.summary(),
            "notes": list(self.notes),
        }
