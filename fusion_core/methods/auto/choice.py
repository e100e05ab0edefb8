"""``auto``'s decision from the held-out scores: the best candidate, the candidates the held-out evidence cannot
tell from it, the simplest of those, and the score table shown to users.

The paired difference of candidate m to the best is ``D_m = Σ_i (S_best,i − S_m,i) / Σ v`` over the hidden items
i of all splits (``S_i`` the weighted item sums of :mod:`.scoring`), with standard error
``SE_m = sd_i(S_best,i − S_m,i) · √n_items / Σ v``.  The candidates with ``D_m ≤ n_se · SE_m`` (the best included)
are *plausible*: the split cannot tell them apart.

**Parsimony** (the one-standard-error rule of model selection, Breiman et al. 1984; Hastie, Tibshirani & Friedman,
*ESL* §7.10): among the candidates within ``d · n_se`` standard errors of the best only those of the simplest
response model are kept
(:data:`RESPONSE_MODEL_LEVEL`: votes and one-coin models, then per-annotator spam or ability models, then full
confusion matrices, then mixtures).  A richer model is chosen only when the held-out evidence says it predicts
better; when it cannot be told from a simpler one, its extra freedom is what lets latent classes drift (it can
explain annotators' label preferences by moving items between classes), so the simpler model is the safer label.
The margin scales with ``d``, the share of the responses that the annotator-balanced weights discount
(:func:`.scoring.discount`): the drift needs a few annotators to dominate the data, so where every annotator gives
about as many responses as the others (``d`` ≈ 0) the best model is kept, and where a handful give most of them
(``d`` ≈ 0.9) the full margin applies.
Voting rules (``mv``, ``wawa``) are scored through the one-coin model they imply, so when a fitted model of the
same level (``ds1``) is plausible they give way to it.  With ``combine="average"`` the kept candidates' posteriors
are averaged with equal weights — the Bayes decision under a uniform posterior over them — and with
``combine="best"`` the best alone is kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError
from fusion_core.methods.auto.scoring import CandidateScore, paired_gap
from fusion_core.methods.registry import info

RESPONSE_MODEL_LEVEL: dict[str, int] = {
    "mv": 1,  # votes are scored through the one-coin model they imply
    "wawa": 1,
    "ds1": 1,
    "bwa": 1,
    "sml": 1,
    "isml": 1,
    "glad": 2,  # one ability per annotator plus a difficulty per item
    "mace": 2,  # competence and a spamming strategy per annotator
    "lf": 2,
    "ds": 3,  # a full confusion matrix per annotator
    "bds": 3,
    "sml-ds": 3,
    "mm": 3,
    "mm-ds": 3,
    "ordinal-em": 2,
    "ordinal-ds": 3,  # Dawid–Skene rows pulled towards an ordinal profile
    "ebcc": 4,  # a confusion matrix per annotator and latent subtype
}
"""How much freedom each candidate's response model has (lower = simpler); unknown methods count as 3."""


def level(name: str) -> int:
    """The response-model level of a candidate (:data:`RESPONSE_MODEL_LEVEL`, 3 when not listed)."""
    return RESPONSE_MODEL_LEVEL.get(name, 3)


def plausible(
    scores: Sequence[CandidateScore], n_se: float, combine: str, discount: float = 1.0
) -> list[CandidateScore]:
    """The members of the decision, best first: of the usable candidates within ``discount · n_se`` standard errors
    of the best (the best included), those of the simplest response model (module docstring); with
    ``combine="best"`` only the best of those, else all of them (ordered by score, then by the given order).
    ``discount``: the share of the responses the annotator-balanced weights discount (:func:`.scoring.discount`)."""
    ok = [s for s in scores if s.usable]
    if not ok:
        failed = "; ".join(f"{s.name}: {s.error or 'collapsed'}" for s in scores)
        raise UserInputError(f"auto could not score any candidate method on held-out responses ({failed}).")
    order = sorted(range(len(ok)), key=lambda j: (-ok[j].score, j))
    best = ok[order[0]]
    tied = []
    for j in order:
        gap, se = paired_gap(best, ok[j])
        if gap <= discount * n_se * se:
            tied.append(ok[j])
    simplest = min(level(s.name) for s in tied)
    members = [s for s in tied if level(s.name) == simplest]
    # a voting rule is scored through the one-coin model it implies (one M-step from the vote): when a fitted model
    # of the same level is plausible, the votes give way to it (they would only add a missing class prior)
    models = [s for s in members if info(s.name).probabilistic]
    members = models or members
    return members[:1] if combine == "best" else members


def alternatives(
    scores: Sequence[CandidateScore], members: Sequence[CandidateScore], n_se: float
) -> list[CandidateScore]:
    """The usable candidates within ``n_se`` standard errors of the best score that are not members (richer models
    set aside by parsimony, or the best itself when a simpler model was chosen): the plausible other labellings."""
    ok = [s for s in scores if s.usable]
    if not ok:
        return []
    best = max(ok, key=lambda s: s.score)
    out = []
    for s in sorted(ok, key=lambda s: -s.score):
        gap, se = paired_gap(best, s)
        if s not in members and gap <= n_se * se:
            out.append(s)
    return out


def _status(s: CandidateScore, members: Sequence[CandidateScore], n_se: float, best: CandidateScore) -> str:
    if s.error is not None:
        return f"failed: {s.error}"
    if s.collapsed:
        return "not used: its labelling collapsed (a class most annotators use got almost no items)"
    if s.pruned:
        return "not used: far behind the best on the first split (not scored on the others)"
    if s is members[0]:
        what = "best held-out score" if s is best else "simplest model within the standard errors of the best"
        return f"chosen ({what})" if len(members) == 1 else f"chosen ({what}), averaged"
    if s in members:
        return f"averaged (within {n_se:g} standard errors of the best)"
    if s.usable:
        gap, se = paired_gap(best, s)
        if gap <= n_se * se:
            return "not used: a simpler model predicts the held-out responses as well"
    return "not used: worse than the best held-out score"


def score_table(scores: Sequence[CandidateScore], members: Sequence[CandidateScore], n_se: float) -> pd.DataFrame:
    """One row per candidate: method, score, difference to the best and its standard error, β, weight in the
    result, seconds, status in plain words, error and ``chosen`` (the best member)."""
    chosen = members[0]
    usable = [s for s in scores if s.usable]
    best = max(usable, key=lambda s: s.score) if usable else chosen
    rows = []
    for s in scores:
        gap, se = paired_gap(best, s) if s.error is None else (float("nan"), float("nan"))
        rows.append(
            {
                "method": s.name,
                "score": s.score,
                "difference": gap,
                "se": se,
                "prior_strength": s.prior_strength,
                "weight": 1.0 / len(members) if s in members else 0.0,
                "seconds": s.seconds,
                "status": _status(s, members, n_se, best),
                "error": s.error,
                "chosen": s is chosen,
            }
        )
    return pd.DataFrame(rows)


def label_free_argmax(posterior: np.ndarray, class_prior: np.ndarray, rank: np.ndarray | None = None) -> np.ndarray:
    """Argmax per item; exact ties go to the tied class with the larger total posterior mass, so renaming the
    labels never changes a tied item's label; a tie in that mass too goes to the class of lowest ``rank``
    (:func:`fusion_core.methods.ties.class_priority`: more responses, then first in the table), or to the class
    order without one."""
    tied = posterior >= posterior.max(axis=1, keepdims=True) - 1e-12
    score = np.where(tied, class_prior[None, :], -np.inf)
    if rank is None:
        return score.argmax(axis=1)
    best = score >= score.max(axis=1, keepdims=True) - 1e-12
    return np.where(best, -np.asarray(rank, dtype=float)[None, :], -np.inf).argmax(axis=1)
