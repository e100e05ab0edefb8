"""The aggregated labels: their expected accuracy with an interval, the items that need another look and why,
and what changed against majority vote.

Expected accuracy: if the model holds, item i's label is right with probability ``p_i = q_i[label_i]``; the
number right is a sum of independent Bernoullis (Poisson-binomial), with mean ``Σ p_i`` and variance
``Σ p_i (1 − p_i)``; the interval is its normal approximation divided by the number of items.  It says how sure
the model is, not whether the model is right: posteriors of real crowds are often overconfident.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from fusion_core.data.responses import Responses


@dataclass(frozen=True)
class ReviewRule:
    """When an item needs another look: its label's posterior probability is below ``min_confidence``, its label
    differs from majority vote, or it has fewer than ``min_responses`` responses."""

    min_confidence: float = 0.9
    min_responses: int = 3


DEFAULT_REVIEW = ReviewRule()


@dataclass(frozen=True)
class LabelQuality:
    """Expected share of correct labels with its interval at ``level`` (module docstring); with gold labels,
    the measured accuracy on the ``n_gold`` items that have one (evaluation only)."""

    accuracy: float
    low: float
    high: float
    level: float
    n_items: int
    gold_accuracy: float | None = None
    n_gold: int = 0


@dataclass(frozen=True)
class ReviewItems:
    """Per item (``items`` order): the label (class code), its posterior probability, the majority-vote label,
    the number of responses and the three reasons to look again (boolean masks)."""

    items: pd.Index
    classes: pd.Index
    label: np.ndarray
    confidence: np.ndarray
    majority: np.ndarray
    n_responses: np.ndarray
    low_confidence: np.ndarray
    disagrees: np.ndarray
    few_responses: np.ndarray
    rule: ReviewRule

    @property
    def flagged(self) -> np.ndarray:
        return self.low_confidence | self.disagrees | self.few_responses

    def counts(self) -> pd.Series:
        """Items per reason (an item may have several) and in total."""
        return pd.Series(
            {
                f"label probability below {self.rule.min_confidence:g}": int(self.low_confidence.sum()),
                "label differs from majority vote": int(self.disagrees.sum()),
                f"fewer than {self.rule.min_responses} responses": int(self.few_responses.sum()),
                "any of these": int(self.flagged.sum()),
            },
            name="items",
        )

    def _rows(self, mask: np.ndarray) -> pd.DataFrame:
        """The selected items (least confident first) with label, probability, majority vote, responses, reasons."""
        sel = np.flatnonzero(mask)
        sel = sel[np.argsort(self.confidence[sel], kind="stable")]
        reasons = np.full(len(sel), "", dtype=object)
        for flags, text in (
            (self.low_confidence, "low confidence"),
            (self.disagrees, "differs from majority vote"),
            (self.few_responses, "few responses"),
        ):
            on = flags[sel]
            reasons = np.where(on, np.where(reasons == "", text, reasons + "; " + text), reasons)
        return pd.DataFrame(
            {
                "label": self.classes.take(self.label[sel]),
                "label probability": self.confidence[sel],
                "majority vote": self.classes.take(self.majority[sel]),
                "responses": self.n_responses[sel],
                "why": reasons,
            },
            index=pd.Index(self.items.take(sel), name="task"),
        )

    def frame(self, only_flagged: bool = True) -> pd.DataFrame:
        """The items to look at again (or all items), least confident first, with their label, majority vote and
        reasons."""
        return self._rows(self.flagged if only_flagged else np.ones(len(self.items), dtype=bool))

    def changes(self) -> pd.DataFrame:
        """Items whose label differs from majority vote (least confident first)."""
        return self._rows(self.disagrees).drop(columns="why")


def label_quality(
    posterior: np.ndarray, label: np.ndarray, level: float = 0.9, gold_hits: tuple[int, int] | None = None
) -> LabelQuality:
    """Expected accuracy of the labels ``label`` (class codes) under ``posterior`` (module docstring)."""
    p = np.clip(np.asarray(posterior, float)[np.arange(len(label)), label], 0.0, 1.0)
    n = len(p)
    if n == 0:
        return LabelQuality(float("nan"), float("nan"), float("nan"), level, 0)
    mean = float(p.mean())
    half = float(stats.norm.ppf((1 + level) / 2) * np.sqrt((p * (1 - p)).sum()) / n)
    gold_acc, n_gold = None, 0
    if gold_hits is not None and gold_hits[1] > 0:
        gold_acc, n_gold = gold_hits[0] / gold_hits[1], gold_hits[1]
    return LabelQuality(mean, max(0.0, mean - half), min(1.0, mean + half), level, n, gold_acc, n_gold)


def review_items(
    resp: Responses, posterior: np.ndarray, label: np.ndarray, majority: np.ndarray, rule: ReviewRule = DEFAULT_REVIEW
) -> ReviewItems:
    """The reasons to look again at each item (see :class:`ReviewRule`)."""
    label = np.asarray(label, dtype=np.int64)
    majority = np.asarray(majority, dtype=np.int64)
    confidence = np.asarray(posterior, float)[np.arange(len(label)), label]
    n = np.asarray(resp.responses_per_item, dtype=np.int64)
    return ReviewItems(
        items=pd.Index(resp.items, name="task"),
        classes=pd.Index(resp.classes),
        label=label,
        confidence=confidence,
        majority=majority,
        n_responses=n,
        low_confidence=confidence < rule.min_confidence,
        disagrees=label != majority,
        few_responses=n < rule.min_responses,
        rule=rule,
    )
