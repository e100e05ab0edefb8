"""``auto``: unsupervised choice among the registered probabilistic methods by held-out annotation
log-likelihood (spec ``multilabel.md`` §8, [EXT]; :mod:`fusion_core.diagnostics.model_selection`).

Every candidate is fitted on the same training splits (a random 10 % of responses hidden, 3 splits by default)
and scored on the hidden responses by a posterior predictive (each worker's fitted response distribution shrunk towards the
crowd's, the same rule for every candidate); the best mean score wins (never the training likelihood, which favours
over-parameterised fits, spec §7.4) and is refitted on all responses.  The scores are reported in
``extras["heldout_scores"]`` and ``heldout_scores_``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fusion_core.errors import UserInputError
from fusion_core.methods.base import Aggregator, Fit
from fusion_core.methods.registry import available, create, register


def default_candidates() -> list[str]:
    """Registered plain probabilistic methods (excluding ``auto`` itself)."""
    return [m.name for m in available(("plain",)) if m.probabilistic and m.name != "auto" and m.needs() == ()]


@register(
    "auto",
    summary="Automatic method choice: fits the probabilistic methods and keeps the one that best predicts held-out responses.",
    family="model_selection",
    params={
        "candidates": {
            "kind": "object",
            "help": "Method names to compare (default: every registered plain probabilistic method).",
        },
        "frac": {"low": 0.01, "high": 0.5, "help": "Share of responses hidden per split."},
        "n_splits": {"low": 1, "high": 20, "help": "Number of random held-out splits."},
        "random_state": {"kind": "int", "help": "Seed of the splits."},
        "rule": {
            "choices": ("best", "simplest"),
            "help": "'best' mean score, or the simplest candidate within 2 standard errors (when parameter counts are known).",
            "advanced": True,
        },
        "prior_strength": {
            "kind": "object",
            "help": "Pseudo-responses β shrinking each worker's fitted response distribution towards the crowd's when scoring held-out responses: 'auto' (chosen per candidate by its held-out score) or a number (default 2; 0 = the spec's plug-in fit).",
            "advanced": True,
        },
    },
    reference="Held-out annotation log-likelihood, spec multilabel.md §8 (inspired by Streich 2010, eqs. (2.24)–(2.26)).",
)
class AutoSelect(Aggregator):
    """Picks a method by held-out annotation log-likelihood and refits it on all responses.

    Fitted attributes beyond the base: ``heldout_scores_`` (DataFrame: method, score in nats per hidden response,
    se, per-split scores, seconds, error), ``chosen_method_``, ``best_estimator_`` (the refitted estimator).
    """

    def __init__(
        self,
        candidates: Sequence[str] | None = None,
        frac: float = 0.1,
        n_splits: int = 3,
        random_state: int = 0,
        rule: str = "best",
        prior_strength: float | str = 2.0,
    ):
        self.candidates = candidates
        self.frac = frac
        self.n_splits = n_splits
        self.random_state = random_state
        self.rule = rule
        self.prior_strength = prior_strength

    def _fit(self, responses, *, gold, graph, context) -> Fit:
        from fusion_core.diagnostics.model_selection import compare

        names = list(self.candidates) if self.candidates is not None else default_candidates()
        names = [n for n in names if n != "auto"]
        if not names:
            raise UserInputError("auto has no candidate methods to compare.")
        table, chosen, _ = compare(
            names,
            responses,
            frac=float(self.frac),
            n_splits=int(self.n_splits),
            random_state=int(self.random_state),
            rule=self.rule,
            prior_strength=self.prior_strength,
        )
        best = create(chosen).fit(responses)
        r = best.result_
        extras = dict(r.extras)
        scores = {m: float(s) for m, s in zip(table["method"], table["score"])}
        extras["heldout_scores"] = scores
        extras["heldout_table"] = table[
            ["method", "score", "se", "prior_strength", "seconds", "error", "chosen"]
        ].to_dict("records")
        extras["chosen_method"] = chosen
        self._table = table
        self._best = best
        return Fit(
            posterior=r.posterior,
            confusion=r.confusion,
            class_prior=r.class_prior,
            log_likelihood=list(r.log_likelihood),
            n_iter=r.n_iter,
            converged=r.converged,
            extras=extras,
            warnings=list(r.warnings),
        )

    def _set_fitted(self, resp, fit, seconds) -> None:
        super()._set_fitted(resp, fit, seconds)
        self.heldout_scores_ = self._table
        self.chosen_method_ = fit.extras["chosen_method"]
        self.best_estimator_ = self._best

    def response_log_likelihood(self, responses) -> np.ndarray:
        return self.best_estimator_.response_log_likelihood(responses)
