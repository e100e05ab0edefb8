"""Majority vote: the baseline every paper compares against."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fusion_core.methods.base import Aggregator, Fit
from fusion_core.methods.registry import register


@register(
    "mv",
    summary="Majority vote: each item's posterior is its (weighted) vote share.",
    family="majority",
    probabilistic=False,
    params={
        "tie_break": {"choices": ("smallest", "random"), "help": "How hard labels break ties in the vote."},
        "weights": {"help": "Optional weight per worker (Series by worker id); missing workers weigh 1."},
        "random_state": {"kind": "int", "help": "Seed for tie_break='random'."},
    },
    reference="Baseline in every source paper (e.g. Traganitis & Giannakis §2.0).",
)
class MajorityVote(Aggregator):
    """Soft majority vote.

    ``probas_`` is the (weighted) share of votes for each label.  Tie rule for ``labels_``: with
    ``tie_break='smallest'`` (default, deterministic) the smallest label in the class order wins — the rule
    of ``../shared/datasets`` ``mv_accuracy``; with ``'random'`` tied labels are chosen uniformly with
    ``random_state``.  Items with no responses get uniform probabilities.
    """

    learns_confusion = False

    def __init__(self, tie_break: str = "smallest", weights: pd.Series | None = None, random_state: int = 0):
        self.tie_break = tie_break
        self.weights = weights
        self.random_state = random_state

    def _fit(self, responses, *, gold, graph, context) -> Fit:
        w = None
        if self.weights is not None:
            ws = pd.Series(self.weights, dtype=float)
            w = ws.reindex(responses.workers).fillna(1.0).to_numpy()
            if (w < 0).any():
                from fusion_core.errors import UserInputError

                raise UserInputError("majority-vote weights must be non-negative.")
        votes = responses.vote_counts(w)
        tot = votes.sum(axis=1, keepdims=True)
        post = np.where(tot > 0, votes / np.where(tot > 0, tot, 1), 1.0 / responses.n_classes)
        if gold is not None:
            post[gold[0]] = 0.0
            post[gold[0], gold[1]] = 1.0
        extras = {}
        if self.tie_break == "random":
            # a tiny seeded jitter among exactly-tied maxima makes argmax pick uniformly among them
            rng = np.random.default_rng(self.random_state)
            is_max = post >= post.max(axis=1, keepdims=True) - 1e-12
            jitter = rng.random(post.shape) * is_max
            choice = np.argmax(jitter, axis=1)
            extras["hard_labels"] = choice
            post = post + 1e-9 * np.eye(responses.n_classes)[choice] * is_max[np.arange(len(choice)), choice][:, None]
            post /= post.sum(axis=1, keepdims=True)
        return Fit(posterior=post, n_iter=0, converged=True, extras=extras)
