"""The class-prior collapse guard shared by models that estimate class priors with few parameters per annotator
(one-coin Dawid–Skene, GLAD).

Failure mode (measured on ``../shared/datasets``, see ``docs/PEER_MODELS.md``): a one-coin model with estimated
priors can explain annotators' label preferences by a collapsed class prior (bluebirds 0.97/0.03, relevance
0.83 on one grade, youtube_lf 1.00/0.00) and lose up to 18 points; a weak Dirichlet prior on the class prior does
not prevent it.  A healthy fit keeps every class at no less than a quarter of its majority-vote share (sparse
simulated crowds with an 80/20 prior: ratio ≥ 0.47; collapsed real fits: ≤ 0.17), so a fit below
:data:`COLLAPSE_RATIO` is refitted with equal priors.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.methods.base import Gold, clamp_gold, initial_posterior

COLLAPSE_RATIO = 0.25


def vote_shares(resp: Responses, gold: Gold | None) -> np.ndarray:
    """Mean soft majority-vote posterior (gold rows clamped): the class shares the guard compares against."""
    return clamp_gold(initial_posterior(resp, "mv"), gold).mean(axis=0)


def prior_collapsed(class_prior: np.ndarray, resp: Responses, gold: Gold | None, ratio: float) -> bool:
    """True when some class's estimated prior is below ``ratio`` × its majority-vote share."""
    if ratio <= 0:
        return False
    shares = vote_shares(resp, gold)
    seen = shares > 0
    return bool(np.any(class_prior[seen] < ratio * shares[seen]))


def collapse_message(method: str, class_prior: np.ndarray, classes: pd.Index) -> str:
    """The warning text when the guard refits with equal priors."""
    top = int(np.argmax(class_prior))
    labels = list(classes)
    return (
        f"{method}: the estimated class prior collapsed ({class_prior[top]:.2f} on '{labels[top]}'), which usually "
        "means the model explained annotators' label preferences by the prior; refitted with equal class priors."
    )
