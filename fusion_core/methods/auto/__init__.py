"""``auto``: the recommended method — chooses among (or averages) fast candidate methods by how well they predict
held-out responses (spec ``multilabel.md`` §8, [EXT]; design and measurements in ``docs/AUTO.md``).

1. Responses are hashed into folds by their task and annotator ids (:mod:`.folds`); a split hides one fold.
2. Every candidate is fitted on the training responses and scored on the hidden ones by a posterior predictive
   (:mod:`.scoring`): its own response model, or for voting rules the one-coin model their posterior implies, with
   annotator-balanced weights (a heavy annotator counts as a typical one); a candidate whose labelling collapsed is
   never chosen.
3. Of the candidates within ``n_se`` standard errors of the best score (paired over hidden items; the margin
   shrinks where no annotator dominates the data), those of the simplest response model are kept and averaged
   (:mod:`.choice`, the one-standard-error rule), and refitted on all responses; the other plausible candidates are refitted too, so the audit can show which labels depend on the
   model choice (``ModelChoice.alternatives``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from fusion_core import progress
from fusion_core.data.responses import Responses, canonical_order
from fusion_core.errors import UserInputError
from fusion_core.methods.auto.choice import alternatives, label_free_argmax, plausible, score_table
from fusion_core.methods.auto.folds import heldout_masks
from fusion_core.methods.auto.scoring import CandidateScore, discount, score_candidates
from fusion_core.methods.base import Aggregator, Gold
from fusion_core.methods.dawid_skene.core import expected_counts, normalize_confusion
from fusion_core.methods.ordinal.levels import is_numeric_label
from fusion_core.methods.params import Choice, Float, Int, Object
from fusion_core.methods.registry import available, create, register
from fusion_core.methods.results import Fit, FitResult, ModelChoice
from fusion_core.methods.ties import class_priority

DEFAULT_CANDIDATES = ("mv", "wawa", "ds", "ds1", "mace")
"""Fast candidates covering the model families that win on real crowds: votes, full and one-coin Dawid–Skene
(the latter with estimated class priors, for sparse crowds), MACE (spammers).  Slower methods (``bds``, ``glad``,
``sml``, spectral and moment methods) would break the time budget of ≤ 10 fits of ``ds``; pass them in
``candidates`` to compare them too."""

ORDINAL_CANDIDATE = "ordinal-ds"
"""The ordinal candidate added when the labels are ordered levels (``ordered``): Dawid–Skene rows pulled towards
each grader's ordinal profile, so that it is never behind the nominal model on graded data (docs/RATINGS.md)."""

CANDIDATE_PARAMS: dict[str, dict[str, Any]] = {"ds1": {"smoothing": 1.0}, ORDINAL_CANDIDATE: {"tol": 1e-5}}
"""Settings auto gives a candidate (its own defaults otherwise): the one-coin model is smoothed by one pseudo-count
per confusion cell, so that an annotator with one or two responses does not get an extreme accuracy and make the
posterior over-confident (sparse crowds: +0.4 to +0.9 points, docs/AUTO.md); the ordinal model stops at a relative
change of 1e-5 (its profiles and rows converge slowly: adult 300 iterations and 31 s at its default, 49 iterations
and 5.6 s at 1e-5, labels as good)."""

CRITERION = (
    "held-out responses predicted by each candidate, every annotator counting at most as much as a typical one "
    "(weighted nats per hidden response, higher is better); the simplest model within the standard errors wins"
)


def candidate(name: str) -> Aggregator:
    """A fresh candidate estimator with auto's settings for it (:data:`CANDIDATE_PARAMS`)."""
    return create(name, **CANDIDATE_PARAMS.get(name, {}))


def default_candidates(resp: Responses | None = None, ordered: str = "auto") -> list[str]:
    """The candidates ``auto`` compares by default (:data:`DEFAULT_CANDIDATES`, those registered), plus the ordinal
    model when the labels of ``resp`` are ordered levels (:func:`ordered_levels`)."""
    names = {m.name for m in available(("plain",))}
    out = [n for n in DEFAULT_CANDIDATES if n in names]
    if resp is not None and ORDINAL_CANDIDATE in names and ordered_levels(resp, ordered):
        out.append(ORDINAL_CANDIDATE)
    return out


def ordered_levels(resp: Responses, ordered: str = "auto") -> bool:
    """Whether the labels are ordered levels: ``ordered="yes"`` (declared, in the classes' order), ``"no"``, or
    ``"auto"``: three or more labels that are all numbers (numbers are ordered; two labels have no order to use)."""
    if ordered != "auto":
        return ordered == "yes" and resp.n_classes >= 2
    return resp.n_classes >= 3 and all(is_numeric_label(c) for c in resp.classes)


def _check_candidates(value: Any) -> Any:
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise UserInputError("a list of registered method names, or None for the default candidates")
    plain = {m.name for m in available(("plain",)) if m.needs() == () and m.name != "auto"}
    unknown = [v for v in value if v not in plain]
    if unknown:
        raise UserInputError(f"a list of plain registered methods other than auto (not usable: {', '.join(unknown)})")
    if not value:
        raise UserInputError("at least one candidate method")
    return value


def _check_strength(value: Any) -> Any:
    if value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
        raise UserInputError("'auto' or a number ≥ 0")
    return value


@register(
    "auto",
    title="Automatic choice (recommended)",
    summary="Recommended method: compares fast methods (votes, Dawid–Skene, one-coin, MACE) on held-out responses "
    "of every annotator and keeps the simplest of those it cannot tell from the best.",
    family="model_selection",
    reference="Held-out annotation log-likelihood, spec multilabel.md §8 (hashed folds, implied response models, "
    "averaging within standard errors; docs/AUTO.md).",
)
class AutoSelect(Aggregator):
    """Chooses a method by held-out prediction of responses and refits it on all responses.

    Candidates (default :data:`DEFAULT_CANDIDATES`) are fitted on the training responses of hashed folds and
    scored on the hidden ones; candidates within ``n_se`` standard errors of the best are averaged.  Gold labels
    given to ``fit`` are passed to every candidate.  Candidates' warnings while scoring are suppressed; the
    result carries the warnings of the chosen method(s) only.  Fitted attributes beyond the base:
    ``heldout_scores_`` (the score table), ``chosen_method_`` (the best), ``members_`` (the averaged methods),
    ``best_estimator_`` and ``estimators_`` (the refitted members); ``result_.selection`` holds the choice as a
    :class:`~fusion_core.methods.results.ModelChoice`.

    Examples
    --------
    >>> from fusion_core.simulate import dawid_skene
    >>> sim = dawid_skene(n_items=300, n_workers=10, n_classes=2, seed=1)
    >>> auto = AutoSelect(candidates=["ds", "ds1"]).fit(sim.responses)
    >>> auto.chosen_method_ in ("ds", "ds1") and set(auto.members_) <= {"ds", "ds1"}
    True
    """

    handles_one_sided = True  # the candidates warn for themselves; a collapsed candidate is never chosen
    params = {
        "candidates": Object(
            None,
            help="Method names to compare (default: mv, wawa, ds, ds1, mace).",
            text="a list of plain registered method names, or None",
            check=_check_candidates,
        ),
        "ordered": Choice(
            "auto",
            ("auto", "yes", "no"),
            help="Whether the labels are ordered levels, adding the ordinal candidate (ordinal-ds): 'auto' = three or "
            "more labels that are all numbers; 'yes' = ordered in the labels' order; 'no' = categories.",
        ),
        "n_folds": Int(5, low=2, high=20, help="Folds the responses are hashed into; a split hides one fold."),
        "n_splits": Int(
            1, low=1, high=20, help="Folds used as held-out splits (at most n_folds); each costs one fit per candidate."
        ),
        "combine": Choice(
            "average",
            ("average", "best"),
            help="'average' the posteriors of the candidates within n_se standard errors of the best, or keep the "
            "'best' alone.",
        ),
        "n_se": Float(2.0, low=0.0, high=10.0, help="Standard errors within which candidates count as tied."),
        "scoring_tol": Float(
            1e-5,
            low=1e-12,
            high=1e-2,
            advanced=True,
            help="Convergence tolerance of the candidates' fits on the held-out splits (their own default in the "
            "final fit): the last EM iterations change the held-out scores far less than their standard errors.",
        ),
        "prior_strength": Object(
            2.0,
            help="Pseudo-responses β shrinking each annotator's fitted response distribution towards the crowd's "
            "when scoring held-out responses: a number (default 2; 0 = the plug-in fit) or 'auto' (chosen per "
            "candidate).",
            text="'auto' or a number ≥ 0",
            check=_check_strength,
        ),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        resp = canonical_order(responses)
        names = list(self.candidates) if self.candidates is not None else default_candidates(resp, self.ordered)
        if resp.weight is not None and self.candidates is None:  # those that would refuse the confidences
            names = [n for n in names if create(n).uses_confidence]
        fit_kwargs: dict[str, Any] = {}
        if gold is not None:
            fit_kwargs["true_labels"] = pd.Series(resp.classes.take(gold[1]), index=resp.items.take(gold[0]))
        masks = heldout_masks(resp, int(self.n_folds), int(self.n_splits))
        scores = score_candidates(
            names,
            lambda n: _scoring_estimator(n, float(self.scoring_tol)),
            resp,
            masks,
            fit_kwargs=fit_kwargs,
            prior_strength=self.prior_strength,
        )
        members = plausible(scores, float(self.n_se), self.combine, discount(resp))
        fitted, silent = _refit([s.name for s in members], resp, fit_kwargs)
        others = [s.name for s in alternatives(scores, members, float(self.n_se))]
        table = score_table(scores, members, float(self.n_se))
        choice = ModelChoice(
            chosen=members[0].name,
            criterion=CRITERION,
            table=table,
            members=tuple(s.name for s in members),
            alternatives=tuple(others),
            alternative_posteriors=_alternative_posteriors(others, resp, fit_kwargs),
            checks=tuple(s.check for s in members if s.check is not None),
        )
        self.heldout_scores_ = table
        self.chosen_method_ = members[0].name
        self.members_ = choice.members
        self.estimators_ = fitted
        self.best_estimator_ = fitted[members[0].name]
        results = [fitted[s.name].result_ for s in members]
        fit = _single_fit(results[0], choice) if len(results) == 1 else _averaged_fit(resp, results, choice)
        fit.warnings = silent
        return fit

    def response_log_likelihood(self, responses: Responses) -> np.ndarray:
        if len(self.members_) == 1:
            return self.best_estimator_.response_log_likelihood(responses)
        return super().response_log_likelihood(responses)


def _scoring_estimator(name: str, tol: float) -> Aggregator:
    """A fresh candidate for a held-out split, its convergence tolerance loosened to ``tol`` (never tightened)."""
    est = candidate(name)
    if "tol" in type(est).params and float(est.tol) < tol:
        est.set_params(tol=tol)
    return est


def _refit(names: list[str], resp: Responses, fit_kwargs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The members fitted on all responses, and those of their recorded warnings they did not emit.  The emitted
    ones are emitted again here, so that ``fit`` records them (once each) as ``auto``'s warnings."""
    fitted = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in names:
            with progress.stage(f"final fit: {name}"):
                fitted[name] = candidate(name).fit(resp, **fit_kwargs)
    emitted = {str(w.message) for w in caught}
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    silent = [m for name in names for m in fitted[name].result_.warnings if m not in emitted]
    return fitted, list(dict.fromkeys(silent))


def _alternative_posteriors(names: list[str], resp: Responses, fit_kwargs: dict[str, Any]) -> tuple[np.ndarray, ...]:
    """Posteriors of the alternatives fitted on all responses (their warnings are not auto's: suppressed)."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in names:
            with progress.stage(f"alternative fit: {name}"):
                out.append(np.asarray(candidate(name).fit(resp, **fit_kwargs).result_.posterior, float))
    return tuple(out)


def _hard_labels(
    posterior: np.ndarray, class_prior: np.ndarray, own: np.ndarray | None, rank: np.ndarray | None
) -> np.ndarray:
    """The member's own hard labels where the posterior has a clear maximum; label-free tie-break elsewhere."""
    free = label_free_argmax(posterior, class_prior, rank)
    if own is None:
        return free
    tied = (posterior >= posterior.max(axis=1, keepdims=True) - 1e-12).sum(axis=1) > 1
    return np.where(tied, free, own)


def _single_fit(r: FitResult, choice: ModelChoice) -> Fit:
    """The chosen method's result as auto's (every typed field carried over)."""
    prior = r.class_prior if r.class_prior is not None else r.posterior.mean(axis=0)
    return Fit(
        posterior=r.posterior,
        confusion=r.confusion,
        class_prior=r.class_prior,
        log_likelihood=list(r.log_likelihood),
        n_iter=r.n_iter,
        converged=r.converged,
        skills=r.worker_skill,
        hard_labels=_hard_labels(r.posterior, np.asarray(prior, float), r.hard_labels, r.class_rank),
        annotator_columns=r.annotator_columns,
        item_columns=r.item_columns,
        ranking=r.ranking,
        spectral=r.spectral,
        context=r.context,
        sequence=r.sequence,
        graph=r.graph,
        selection=choice,
        annealing=r.annealing,
        restarts=r.restarts,
        ordinal=r.ordinal,
        details=dict(r.details),
    )


def _averaged_fit(resp: Responses, results: list[FitResult], choice: ModelChoice) -> Fit:
    """Equal-weight average of the members' posteriors; confusion matrices are the Dawid–Skene M-step this
    posterior implies (expected counts, normalised), the class prior its mean."""
    posterior = np.mean([r.posterior for r in results], axis=0)
    prior = posterior.mean(axis=0)
    return Fit(
        posterior=posterior,
        confusion=normalize_confusion(expected_counts(resp, posterior), 0.0),
        class_prior=prior,
        log_likelihood=[],
        n_iter=max(r.n_iter for r in results),
        converged=all(r.converged for r in results),
        hard_labels=label_free_argmax(posterior, prior, class_priority(resp)),
        selection=choice,
        details={"members": choice.members},
    )


__all__ = ["DEFAULT_CANDIDATES", "AutoSelect", "CandidateScore", "default_candidates"]
