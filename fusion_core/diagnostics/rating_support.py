"""Which model the rating verdicts of ordered levels come from (issue 26 item 3, issue 21 item 5): the latent scale of
``ordinal-em`` only when the responses support it, else the confusion rows of ``ordinal-ds`` read on the scale.

**Support.** ``ordinal-em`` (:mod:`fusion_core.methods.ordinal.em`) describes each grader by a bias and a noise on
one shared latent scale; ``ordinal-ds`` (:mod:`fusion_core.methods.ordinal.ds`) gives each grader full confusion
rows pulled towards that profile.  Real graders are not one latent scale plus noise: some use their own cut points,
confuse two grades, or use a grade off the scale.  Where they do, the latent-scale model mis-reads them — on the
public ``relevance`` crowd it put 220 of 763 graders near chance, 62 of them above the median gold accuracy, its
reliability running *against* gold (docs/AUDIT.md).  Both models are scored the way ``auto`` scores its candidates
(:mod:`fusion_core.methods.auto.scoring`: the same hashed held-out fold, annotator-balanced weights, β = 2): the
latent scale is **supported** when it predicts the held-out ratings at least as well as ``ordinal-ds`` (the paired
gap, over held-out items, at most :data:`SUPPORT_SE` = 0 standard errors).  Not ``auto``'s one-standard-error
rule: parsimony protects *labels* from latent-class drift, while a verdict describes a grader, and the costs are
not symmetric.  Keeping the latent scale where it does not hold misses whole kinds of graders — uniform spammers
look "noisy" to it, not near chance (near-chance recall 0.05–0.28 on the DS-style and scale-using shapes of
``benchmarks/rating_support.py``) — while handing an ordered-probit crowd to the confusion reading costs little
(the same flags, near-chance recall 0.89 against 0.94).  At 2 standard errors the gate kept the latent scale on 3 of
6 DS-style crowds of 7,500 ratings; at 0 on none, and it kept it on every ``probit`` crowd (the model itself).

**Confusion reading.**  Otherwise the verdicts come from confusion rows read on the scale: each grader's rows are
the Dawid–Skene M-step (Dawid & Skene 1979, eq. 2.3) from the better-supported fit's posterior q,
``Γ_jk = (C_jk + α Γ̄_k) / (n_jk + α)`` (``C`` the expected counts over the items someone else rated too, ``Γ̄`` the
crowd's pooled rows, α = 1 pseudo-response), and under the class prior π (joint ``P_j(k, l) = π_k Γ_jkl``):

* **bias** = E[l − k], the mean signed error in levels (> 0 lenient);
* **noise** = sd(l − k), the spread of the error in levels;
* **reliability** = sign(cov) · corr²(l, k): the share of the grader's rating variance that the true level
  explains (classical test theory; for an ordered-probit grader ≈ τ²/(τ² + s²), the latent model's reliability),
  negative for a reversed scale.

The posterior keeps the grader's own response.  Dividing it out (``q⁻ʲ_i ∝ q_i / Γ_j[·, l]``, as the categorical
audit's evidence does) was measured and not kept: the rest of the crowd's uncertainty about the level then counts
as the grader's error, so every reliability is attenuated (Spearman 1904: the correlation with a noisy criterion
is the true one times the criterion's reliability) and good graders on sparsely rated items read as near chance —
on the simulated shapes of ``benchmarks/rating_support.py`` and on ``relevance`` alike (docs/RATINGS.md).

Intervals are percentile intervals over ``n_bootstrap`` item-resampled replicates of the counts (posterior held,
a zero-EM-step bootstrap as ``ordinal-em``'s one-step one); the verdicts are those of
:func:`~fusion_core.diagnostics.rating_verdicts.decide` with the same rule, near chance read from the reliability
interval.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.rating_verdicts import ORDINAL_RULE, RatingVerdicts, VerdictRule, verdict_table
from fusion_core.errors import UserInputError
from fusion_core.methods.auto import candidate
from fusion_core.methods.auto.folds import heldout_masks
from fusion_core.methods.auto.scoring import CandidateScore, paired_gap, score_candidates
from fusion_core.methods.results import FitResult

LATENT = "ordinal-em"
RIVAL = "ordinal-ds"
SUPPORT_SE = 0.0
"""Standard errors by which ``ordinal-ds`` may predict held-out ratings better than ``ordinal-em`` with the latent
scale still leading the verdicts (module docstring: 0, the better predictor leads)"""
SCORING_TOL = 1e-5
"""Convergence tolerance of the two held-out fits (``auto``'s ``scoring_tol``)."""
ROW_PRIOR = 1.0
"""α: pseudo-responses of the crowd's pooled row added to each grader's confusion row (module docstring)."""


@dataclass(frozen=True)
class ScaleSupport:
    """The held-out comparison of the latent-scale model with the confusion model: scores in weighted nats per
    held-out response (higher is better), ``gap`` = rival − latent with its paired standard error ``se``,
    ``supported`` the decision (module docstring); ``note`` says why no comparison was made (then supported)."""

    supported: bool
    latent_score: float = float("nan")
    rival_score: float = float("nan")
    gap: float = float("nan")
    se: float = float("nan")
    n_hidden: int = 0
    note: str = ""

    def words(self) -> str:
        """One plain sentence: which model the verdicts come from and why."""
        if self.note:
            source = f"the latent scale ({LATENT})" if self.supported else f"the graders' confusion rows ({RIVAL})"
            return f"Verdicts from {source}: {self.note}."
        how = (
            f"on {self.n_hidden:,} held-out ratings {RIVAL} predicts {self.gap:+.3f} nats per rating against "
            f"{LATENT} (standard error {self.se:.3f})"
        )
        if self.supported:
            return (
                f"Verdicts from the latent scale ({LATENT}, a bias and a noise per grader): it predicts held-out "
                f"ratings at least as well as the graders' own confusion rows ({how})."
            )
        return (
            f"Verdicts from the graders' confusion rows ({RIVAL}) read on the scale (bias = mean signed error, noise "
            f"= its spread, reliability = the share of rating variance the true level explains): they predict "
            f"held-out ratings better than one latent scale for all graders ({how})."
        )


def _estimator(name: str) -> Any:
    est = candidate(name)
    if float(est.tol) < SCORING_TOL:
        est.set_params(tol=SCORING_TOL)
    return est


def scale_support(resp: Responses, n_se: float = SUPPORT_SE) -> ScaleSupport:
    """Whether the responses (classes in level order, lowest first) support ``ordinal-em``'s latent scale against
    ``ordinal-ds`` on ``auto``'s held-out fold (module docstring)."""
    try:
        masks = heldout_masks(resp, 5, 1)
    except UserInputError as exc:
        return ScaleSupport(True, note=f"too few ratings to compare it with {RIVAL} on held-out ratings ({exc})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        latent, rival = score_candidates(
            [LATENT, RIVAL], _estimator, resp, masks, fit_kwargs={}, prior_strength=2.0
        )  # fmt: skip
    bad = [s for s in (latent, rival) if not s.usable]
    if bad:
        why = "; ".join(f"{s.name}: {s.error or 'its labelling collapsed'}" for s in bad)
        if not latent.usable and rival.usable:
            return ScaleSupport(False, rival_score=rival.score, note=f"{LATENT} could not be scored ({why})")
        return ScaleSupport(True, note=f"no held-out comparison with {RIVAL} ({why})")
    return _decide(latent, rival, n_se, int(masks[0].sum()))


def _decide(latent: CandidateScore, rival: CandidateScore, n_se: float, n_hidden: int) -> ScaleSupport:
    gap, se = paired_gap(rival, latent)  # how much better the rival predicts (> 0: rival better)
    return ScaleSupport(bool(gap <= n_se * se), latent.score, rival.score, gap, se, n_hidden)


# ------------------------------------------------------------------------------------------ confusion reading
def leave_self_out(q: np.ndarray, worker: np.ndarray, label: np.ndarray, confusion: np.ndarray) -> np.ndarray:
    """Per response: the latent level's posterior with the grader's own response divided out (rows of ``q`` are
    the responses' items), ``q⁻ʲ_i ∝ q_i / Γ_j[·, l]`` (Γ clipped below at 1e-3)."""
    own = np.clip(confusion[worker, :, label], 1e-3, 1.0)
    loo = q / own
    return loo / np.maximum(loo.sum(axis=1, keepdims=True), 1e-300)


def level_counts(worker: np.ndarray, label: np.ndarray, loo: np.ndarray, weight: np.ndarray, w: int) -> np.ndarray:
    """Expected counts ``C[j, k, l] = Σ_r weight_r q⁻ʲ_r[k] [l_r = l]`` (workers × true × reported)."""
    k = loo.shape[1]
    key = worker * k + label
    out = np.empty((w, k, k))
    for t in range(k):  # K levels, not responses
        out[:, t, :] = np.bincount(key, weights=weight * loo[:, t], minlength=w * k).reshape(w, k)
    return out


def scale_reading(counts: np.ndarray, prior: np.ndarray, alpha: float = ROW_PRIOR) -> tuple[np.ndarray, ...]:
    """(bias, noise, reliability) per grader from expected counts (workers × true × reported) and the class prior
    (module docstring), in level steps; the rows get ``alpha`` pseudo-responses of the crowd's pooled row."""
    k = counts.shape[1]
    pooled = counts.sum(axis=0) + 1e-9
    pooled /= pooled.sum(axis=1, keepdims=True)
    rows = (counts + alpha * pooled[None]) / (counts.sum(axis=2, keepdims=True) + alpha)
    joint = prior[None, :, None] * rows  # P_j(k, l)
    lv = np.arange(k, dtype=float)
    err = lv[None, :] - lv[:, None]  # l − k
    bias = np.einsum("wkl,kl->w", joint, err)
    noise = np.sqrt(np.maximum(np.einsum("wkl,wkl->w", joint, (err[None] - bias[:, None, None]) ** 2), 0.0))
    mk = prior @ lv
    ml = np.einsum("wkl,l->w", joint, lv)
    var_k = float(prior @ (lv - mk) ** 2)
    var_l = np.einsum("wkl,wl->w", joint, (lv[None, :] - ml[:, None]) ** 2)
    cov = np.einsum("wkl,k,wl->w", joint, lv - mk, lv[None, :] - ml[:, None])
    rel = np.sign(cov) * cov**2 / np.maximum(var_k * var_l, 1e-12)
    return bias, noise, rel


def confusion_verdicts(
    resp: Responses,
    posterior: np.ndarray,
    class_prior: np.ndarray,
    confusion: np.ndarray,
    *,
    n_bootstrap: int = 100,
    level: float = 0.95,
    random_state: int | None = 0,
    rule: VerdictRule = ORDINAL_RULE,
    fit: Any = None,
    notes: tuple[str, ...] = (),
    leave_out: bool = False,
) -> RatingVerdicts:
    """Rating verdicts from confusion rows read on the scale (module docstring): ``resp`` with classes in level
    order, the fit's ``posterior`` (items × levels), ``class_prior`` and ``confusion`` (workers × true × reported)
    in the same order.  The table's ``ratings`` are those on items someone else rated too.  ``leave_out``: divide each grader's own response out of the posterior first (measured and
    not the default, module docstring)."""
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, (int, np.integer)) or n_bootstrap < 20:
        raise UserInputError(f"the verdicts need at least 20 bootstrap replicates; got {n_bootstrap!r}.")
    w, k = resp.n_workers, resp.n_classes
    q = np.asarray(posterior, float)
    prior = np.asarray(class_prior, float)
    prior = prior / prior.sum()
    per_item = np.bincount(resp.item, minlength=resp.n_items)
    shared = per_item[resp.item] >= 2  # an item only j rated says nothing about j
    worker, label = resp.worker[shared], resp.label[shared]
    loo = q[resp.item[shared]] if not leave_out else leave_self_out(q[resp.item[shared]], worker, label, confusion)
    ones = np.ones(len(worker))
    bias, noise, rel = scale_reading(level_counts(worker, label, loo, ones, w), prior)
    rng = np.random.default_rng(random_state)
    samples = np.full((3, n_bootstrap, w), np.nan)
    item = resp.item[shared]
    for r in range(n_bootstrap):  # replicates, not responses
        draws = np.bincount(rng.integers(0, resp.n_items, size=resp.n_items), minlength=resp.n_items)
        wt = draws[item].astype(float)
        seen = np.bincount(worker, weights=wt, minlength=w) > 0
        b, s, p = scale_reading(level_counts(worker, label, loo, wt, w), prior)
        samples[0, r, seen], samples[1, r, seen], samples[2, r, seen] = b[seen], s[seen], p[seen]
    lv = np.arange(k, dtype=float)
    tau = float(np.sqrt(prior @ (lv - prior @ lv) ** 2))
    table = verdict_table(
        resp.workers, np.bincount(worker, minlength=w), bias, noise, (samples[0], samples[1]),
        rule=rule, scale_sd=tau, unit="levels", level=level, reliability=(rel, samples[2]),
    )  # fmt: skip
    return RatingVerdicts("ordinal", table, rule, "levels", tau, level, n_bootstrap, fit, notes, model=RIVAL)


def in_level_order(fit: FitResult, levels: Responses) -> tuple[np.ndarray, ...]:
    """The fit's posterior, class prior and confusion with its classes put in the order of ``levels.classes``
    (matched as text: the responses recoded by :func:`~fusion_core.methods.ordinal.with_levels`)."""
    perm = pd.Index(fit.classes.astype(str)).get_indexer(levels.classes.astype(str))
    post = np.asarray(fit.posterior, float)[:, perm]
    prior = fit.class_prior if fit.class_prior is not None else np.asarray(fit.posterior, float).mean(axis=0)
    conf = np.asarray(fit.confusion, float)[:, perm][:, :, perm]
    return post, np.asarray(prior, float)[perm], conf


__all__ = [
    "LATENT",
    "RIVAL",
    "SUPPORT_SE",
    "ScaleSupport",
    "confusion_verdicts",
    "in_level_order",
    "leave_self_out",
    "level_counts",
    "scale_reading",
    "scale_support",
]
