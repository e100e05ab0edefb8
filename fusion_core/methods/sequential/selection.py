"""[OURS] ``emission='auto'``: choose between the paper's emission (39) and the annotator-Markov emission by the
held-out log-likelihood of whole (annotator, sequence) blocks.

About 10% of the blocks are held out (seeded); Baum–Welch with each emission runs from the Dawid–Skene start on
the rest, and the emission with the higher ``log Pr(F_held | F_rest) = log Pr(F_all) − log Pr(F_rest)``
(forward algorithm) is kept.  Whole blocks are held out so that an annotator's correlated labels within a
sentence cannot be predicted from its own neighbouring labels.  Known limit: the Markov emission is only weakly
identified when the chain is very sticky and annotators copy their previous label (the chain's and the
annotators' persistence are confounded); the held-out criterion does not detect this.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.methods.base import Gold
from fusion_core.methods.sequential.emission import context_subset
from fusion_core.methods.sequential.inference import SequenceLayout, forward_backward_packed
from fusion_core.methods.sequential.model import HMMState, baum_welch, clamp_emission, log_emission

HELDOUT_FRACTION = 0.1  # share of (annotator, sequence) blocks held out
SELECTION_TOL = 1e-6  # relative objective tolerance of the two held-out fits (at least)
MIN_BLOCKS = 20  # fewer blocks: keep the paper's emission


def held_out_responses(resp: Responses, random_state: int | None) -> np.ndarray | None:
    """Mask of the responses in the held-out (annotator, sequence) blocks, or None with too few blocks."""
    if resp.sequence is None:
        return None
    blocks = resp.sequence[resp.item].astype(np.int64) * resp.n_workers + resp.worker
    uniq, inv = np.unique(blocks, return_inverse=True)
    if len(uniq) < MIN_BLOCKS:
        return None
    rng = np.random.default_rng(random_state)
    held_block = np.zeros(len(uniq), dtype=bool)
    held_block[rng.choice(len(uniq), max(2, round(HELDOUT_FRACTION * len(uniq))), replace=False)] = True
    return held_block[inv]


def select_emission(
    resp: Responses,
    layout: SequenceLayout,
    previous: np.ndarray,
    *,
    ds_start_of: Callable[[Responses], HMMState],
    bw: dict[str, Any],
    random_state: int | None,
    gold: Gold | None = None,
) -> tuple[str, dict[str, float]]:
    """The emission ('independent' or 'markov') with the higher held-out log-likelihood, and both scores.

    ``previous``: each response's own previous label (:func:`~.emission.previous_own_label`); ``ds_start_of``:
    the Dawid–Skene start of a response subset; ``bw``: Baum–Welch settings (``smoothing``, ``start_mode``,
    ``tol``, ``max_iter``, ``context_prior``)."""
    held = held_out_responses(resp, random_state)
    if held is None:
        return "independent", {}
    train, test = resp.subset(~held), resp.subset(held)
    ctx_train, ctx_test = context_subset(resp, previous, ~held), context_subset(resp, previous, held)
    start = ds_start_of(train)
    settings = {**bw, "tol": max(float(bw["tol"]), SELECTION_TOL)}
    pk, rows = layout.packing, layout.pack_items
    scores = {}
    for kind, c_train, c_test in (("independent", None, None), ("markov", ctx_train, ctx_test)):
        run = baum_welch(
            train, layout, start, context=c_train, prior_mean=start.confusion, gold=gold, warn=False, **settings
        )
        le_train = log_emission(train, run.state, c_train)
        le_test = log_emission(test, run.state, c_test)
        t, p0 = run.state.transition, run.state.start
        ll_rest = forward_backward_packed(clamp_emission(le_train, gold)[rows], pk, t, p0).log_likelihood.sum()
        ll_all = forward_backward_packed(clamp_emission(le_train + le_test, gold)[rows], pk, t, p0).log_likelihood.sum()
        scores[kind] = float(ll_all - ll_rest)
    return max(scores, key=lambda k: scores[k]), scores
