"""``auto``'s decision from the held-out scores: the best candidate, the candidates the held-out evidence cannot
tell from it, and the score table shown to users.

The paired difference of candidate m to the best is ``D_m = Σ_i (S_best,i − S_m,i) / |H|`` over the hidden items
i of all splits, with standard error ``SE_m = sd_i(S_best,i − S_m,i) · √n_items / |H|``.  The candidates with
``D_m ≤ n_se · SE_m`` (the best included) are *plausible*: one split cannot tell them apart.  With
``combine="average"`` their posteriors are averaged with equal weights — the Bayes decision (item-wise argmax)
under a uniform posterior over the plausible models — and with ``combine="best"`` the best alone is kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError
from fusion_core.methods.auto.scoring import CandidateScore, paired_gap


def plausible(scores: Sequence[CandidateScore], n_se: float, combine: str) -> list[CandidateScore]:
    """The members of the decision, best first: the best usable candidate, and with ``combine="average"`` every
    usable candidate within ``n_se`` standard errors of it (ordered by score, then by the given order)."""
    ok = [s for s in scores if s.usable]
    if not ok:
        failed = "; ".join(f"{s.name}: {s.error or 'collapsed'}" for s in scores)
        raise UserInputError(f"auto could not score any candidate method on held-out responses ({failed}).")
    order = sorted(range(len(ok)), key=lambda j: (-ok[j].score, j))
    best = ok[order[0]]
    if combine == "best":
        return [best]
    members = []
    for j in order:
        gap, se = paired_gap(best, ok[j])
        if gap <= n_se * se:
            members.append(ok[j])
    return members


def _status(s: CandidateScore, members: Sequence[CandidateScore], n_se: float) -> str:
    if s.error is not None:
        return f"failed: {s.error}"
    if s.collapsed:
        return "not used: its labelling collapsed (a class most annotators use got almost no items)"
    if s.pruned:
        return "not used: far behind the best on the first split (not scored on the others)"
    if s is members[0]:
        return "chosen (best held-out score)" if len(members) == 1 else "chosen (best held-out score), averaged"
    if s in members:
        return f"averaged (within {n_se:g} standard errors of the best)"
    return "not used: worse than the best held-out score"


def score_table(scores: Sequence[CandidateScore], members: Sequence[CandidateScore], n_se: float) -> pd.DataFrame:
    """One row per candidate: method, score, difference to the best and its standard error, β, weight in the
    result, seconds, status in plain words, error and ``chosen`` (the best member)."""
    best = members[0]
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
                "status": _status(s, members, n_se),
                "error": s.error,
                "chosen": s is best,
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
