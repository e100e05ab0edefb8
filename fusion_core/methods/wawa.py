"""Wawa: majority vote weighted by each annotator's agreement with the plain majority (crowd-kit's ``Wawa``).

This module is also the worked example in ``CONTRIBUTING.md``: a method is one file with one registered class.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.methods.base import Aggregator, Gold, clamp_gold
from fusion_core.methods.params import Float
from fusion_core.methods.registry import register
from fusion_core.methods.results import AnnotatorColumn, Fit


@register(
    "wawa",
    title="Weighted majority vote (agreement with the majority)",
    summary="Majority vote in which each annotator's vote counts by how often they agree with the plain majority.",
    family="majority",
    probabilistic=False,
    reference="Worker Agreement With Aggregate (Wawa), as in crowd-kit; a baseline, not from the source papers.",
)
class Wawa(Aggregator):
    """Weighted majority vote: weight of annotator w = share of w's responses that agree with the plain majority
    label of the item (soft: the majority's vote share), then a vote weighted by those weights.

    ``probas_`` are the weighted vote shares, ``skills_`` the weights.  Gold labels are clamped.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": [1, 1, 1, 2, 2, 2], "worker": list("abcabc"), "label": list("xxyyyx")})
    >>> Wawa().fit(df).labels_.tolist()
    ['x', 'y']
    """

    learns_confusion = False
    params = {
        "min_weight": Float(0.0, low=0.0, high=1.0, help="Weight floor, so that no annotator is ignored completely."),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        votes = responses.vote_counts()
        share = votes / np.maximum(votes.sum(axis=1, keepdims=True), 1.0)
        clamp_gold(share, gold)
        agree = share[responses.item, responses.label]  # how much each response agrees with its item's majority
        n = np.maximum(responses.responses_per_worker, 1)
        weight = np.maximum(
            np.bincount(responses.worker, weights=agree, minlength=responses.n_workers) / n, self.min_weight
        )
        weighted = responses.vote_counts(weight)
        total = weighted.sum(axis=1, keepdims=True)
        post = np.where(total > 0, weighted / np.where(total > 0, total, 1.0), 1.0 / responses.n_classes)
        clamp_gold(post, gold)
        column = AnnotatorColumn(
            "agreement_weight",
            "agreement with the majority",
            weight,
            "Share of the annotator's responses that agree with the plain majority vote.",
        )
        return Fit(posterior=post, skills=weight, annotator_columns=(column,))
