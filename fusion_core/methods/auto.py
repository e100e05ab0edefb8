"""``auto``: unsupervised choice among the registered probabilistic methods by held-out annotation log-likelihood
(spec ``multilabel.md`` §8, [EXT]; scoring in :mod:`fusion_core.methods.heldout`).

Every candidate is fitted on the same training splits and scored on the hidden responses by a posterior predictive
(each worker's fitted response distribution shrunk towards the crowd's, the same rule for every candidate); the
best mean score wins (never the training likelihood, which favours over-parameterised fits, spec §7.4) and is
refitted on all responses.  The choice and the score table are in ``result_.selection``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.methods.base import Aggregator, Gold
from fusion_core.methods.heldout import compare
from fusion_core.methods.params import Choice, Float, Int, Object, Seed
from fusion_core.methods.registry import available, create, register
from fusion_core.methods.results import Fit, ModelChoice


def default_candidates() -> list[str]:
    """Registered plain probabilistic methods (excluding ``auto`` itself)."""
    return [m.name for m in available(("plain",)) if m.probabilistic and m.name != "auto" and m.needs() == ()]


def _check_candidates(value: Any) -> Any:
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise UserInputError("a list of registered method names, or None for every plain probabilistic method")
    names = {m.name for m in available()}
    unknown = [v for v in value if v not in names]
    if unknown:
        raise UserInputError(f"a list of registered method names (unknown: {', '.join(unknown)})")
    return value


def _check_strength(value: Any) -> Any:
    if value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
        raise UserInputError("'auto' or a number ≥ 0")
    return value


@register(
    "auto",
    title="Automatic choice (best held-out fit)",
    summary="Automatic method choice: fits the probabilistic methods and keeps the one that best predicts held-out responses.",
    family="model_selection",
    reference="Held-out annotation log-likelihood, spec multilabel.md §8 (inspired by Streich 2010, eqs. (2.24)–(2.26)).",
)
class AutoSelect(Aggregator):
    """Picks a method by held-out annotation log-likelihood and refits it on all responses.

    Gold labels given to ``fit`` are passed to every candidate (clamped while scoring and in the final refit).
    Fitted attributes beyond the base: ``heldout_scores_`` (the score table: method, score in nats per hidden
    response, se, per-split scores, seconds, error), ``chosen_method_`` and ``best_estimator_`` (the refitted
    estimator); ``result_.selection`` holds the same choice as a :class:`~fusion_core.methods.results.ModelChoice`.

    Examples
    --------
    >>> from fusion_core.simulate import dawid_skene
    >>> sim = dawid_skene(n_items=200, n_workers=8, n_classes=2, seed=1)
    >>> auto = AutoSelect(candidates=["ds", "ds1"]).fit(sim.responses)
    >>> auto.chosen_method_ in ("ds", "ds1")
    True
    """

    params = {
        "candidates": Object(
            None,
            help="Method names to compare (default: every registered plain probabilistic method).",
            text="a list of registered method names, or None",
            check=_check_candidates,
        ),
        "frac": Float(0.1, low=0.01, high=0.5, help="Share of responses hidden per split."),
        "n_splits": Int(3, low=1, high=20, help="Number of held-out splits."),
        "random_state": Seed(0, help="Seed of the splits."),
        "rule": Choice(
            "best",
            ("best", "simplest"),
            advanced=True,
            help="'best' mean score, or the simplest candidate within 2 standard errors (when parameter counts are known).",
        ),
        "prior_strength": Object(
            2.0,
            help="Pseudo-responses β shrinking each worker's fitted response distribution towards "
            "the crowd's when scoring held-out responses: a number (default 2; 0 = the plug-in fit) "
            "or 'auto' (chosen per candidate).",
            text="'auto' or a number ≥ 0",
            check=_check_strength,
        ),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        names = list(self.candidates) if self.candidates is not None else default_candidates()
        names = [n for n in names if n != "auto"]
        if not names:
            raise UserInputError("auto has no candidate methods to compare.")
        fit_kwargs: dict[str, Any] = {}
        if gold is not None:
            fit_kwargs["true_labels"] = pd.Series(responses.classes.take(gold[1]), index=responses.items.take(gold[0]))
        table, chosen, _ = compare(
            names,
            responses,
            frac=float(self.frac),
            n_splits=int(self.n_splits),
            random_state=int(self.random_state),
            rule=self.rule,
            prior_strength=self.prior_strength,
            fit_kwargs=fit_kwargs,
        )
        best = create(chosen).fit(responses, **fit_kwargs)
        self.heldout_scores_ = table
        self.chosen_method_ = chosen
        self.best_estimator_ = best
        shown = table[["method", "score", "se", "prior_strength", "seconds", "error", "chosen"]].reset_index(drop=True)
        choice = ModelChoice(
            chosen=chosen,
            criterion="held-out annotation log-likelihood (nats per hidden response, higher is better)",
            table=shown,
        )
        r = best.result_
        return Fit(
            posterior=r.posterior,
            confusion=r.confusion,
            class_prior=r.class_prior,
            log_likelihood=list(r.log_likelihood),
            n_iter=r.n_iter,
            converged=r.converged,
            skills=r.worker_skill,
            hard_labels=r.hard_labels,
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
            details=dict(r.details),
            warnings=list(r.warnings),
        )

    def response_log_likelihood(self, responses: Responses) -> np.ndarray:
        return self.best_estimator_.response_log_likelihood(responses)
