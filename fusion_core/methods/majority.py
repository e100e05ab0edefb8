"""Majority vote: the baseline every paper compares against."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.methods.base import Aggregator, Gold, clamp_gold
from fusion_core.methods.params import Choice, Object, Seed
from fusion_core.methods.registry import register
from fusion_core.methods.results import Fit
from fusion_core.methods.votes import vote_shares

__all__ = ["MajorityVote", "vote_shares"]


def _check_weights(value: Any) -> Any:
    try:
        w = pd.Series(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("a weight per annotator (Series by annotator id)") from None
    if not np.all(np.isfinite(w.to_numpy())) or (w < 0).any():
        raise ValueError("a finite, non-negative weight per annotator")
    return value


@register(
    "mv",
    title="Majority vote",
    summary="Majority vote: each item's posterior is its (weighted) vote share.",
    family="majority",
    probabilistic=False,
    reference="Baseline in every source paper (e.g. Traganitis & Giannakis §2.0).",
)
class MajorityVote(Aggregator):
    """Soft majority vote.

    ``probas_`` is the (weighted) share of votes for each label.  Tie rule for ``labels_``: with
    ``tie_break='data'`` (default) the tied label with more votes over the whole table wins, then the one that
    appears first in the table (:mod:`fusion_core.methods.ties`; renaming the labels never changes a label);
    ``'smallest'`` takes the smallest label in the class order (the rule of ``../shared/datasets``
    ``mv_accuracy``); ``'random'`` chooses uniformly among tied labels with ``random_state``.  Items with no
    responses get uniform probabilities.  Gold labels are clamped.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": [1, 1, 1, 2, 2, 2], "worker": list("abcabc"), "label": ["x", "x", "y", "y", "y", "x"]})
    >>> MajorityVote().fit(df).labels_.tolist()
    ['x', 'y']
    """

    learns_confusion = False
    params = {
        "tie_break": Choice(
            "data",
            ("data", "smallest", "random"),
            help="How hard labels break ties in the vote: 'data' (more votes over the whole table, then first in the "
            "table), 'smallest' (first label in sorted order) or 'random'.",
        ),
        "weights": Object(
            None,
            help="Optional weight per annotator (Series by annotator id); missing annotators weigh 1.",
            text="a finite, non-negative weight per annotator (Series by annotator id), or None",
            check=_check_weights,
        ),
        "random_state": Seed(0, help="Seed for tie_break='random'."),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        w = None
        if self.weights is not None:
            w = pd.Series(self.weights, dtype=float).reindex(responses.workers).fillna(1.0).to_numpy()
        post = vote_shares(responses, w)
        clamp_gold(post, gold)
        hard = None
        if self.tie_break == "smallest":
            hard = np.argmax(post, axis=1)
        elif self.tie_break == "random":
            # a tiny seeded jitter among exactly-tied maxima makes argmax pick uniformly among them
            rng = np.random.default_rng(self.random_state)
            is_max = post >= post.max(axis=1, keepdims=True) - 1e-12
            jitter = rng.random(post.shape) * is_max
            hard = np.argmax(jitter, axis=1)
            post = post + 1e-9 * np.eye(responses.n_classes)[hard] * is_max[np.arange(len(hard)), hard][:, None]
            post /= post.sum(axis=1, keepdims=True)
        return Fit(posterior=post, n_iter=0, converged=True, hard_labels=hard)
