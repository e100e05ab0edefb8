"""Incremental Dawid–Skene: a new batch of responses updates a fitted ``ds`` / ``ds1`` from its previous state.

The batch is coded against the fitted coding (:func:`fusion_core.data.merge.append_responses`: known items,
annotators and labels keep their codes, new ones are appended), and EM restarts from the previous posterior —
new items from their soft majority vote, a new label with no mass anywhere gets a small uniform share — through
the shared driver with the estimator's own ``tol`` and ``max_iter``.  The first M-step then re-estimates every
annotator (new ones included) from the previous posteriors and every response, so EM starts next to the previous
optimum instead of at majority vote (Neal & Hinton 1998 on warm-started EM; Dawid & Skene 1979 for the steps).
At convergence the fit is the maximum of the same likelihood as a full refit's; the two agree to the
convergence tolerance when both reach the same optimum (tests/test_incremental.py checks 1e-6 at a tight
``tol``).  Annealing and random restarts are not rerun (plain EM from the warm start); gold labels passed to the
first ``fit`` are not kept.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.merge import append_responses, code_batch
from fusion_core.data.responses import Responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.em import EMSettings, run_em
from fusion_core.methods.priors import collapse_message, prior_collapsed
from fusion_core.methods.results import Fit

#: share of a label's mass given to every class when a label that no item had before appears
NEW_CLASS_SHARE = 1e-3


def warm_posterior(previous: np.ndarray, resp: Responses, n_old_items: int) -> np.ndarray:
    """The start of EM after a batch: the previous posterior of the earlier items (new classes at 0), the soft
    majority vote of the new items; a class with no mass at all gets :data:`NEW_CLASS_SHARE` everywhere."""
    k = resp.n_classes
    q = np.zeros((resp.n_items, k))
    q[:n_old_items, : previous.shape[1]] = previous
    if resp.n_items > n_old_items:
        votes = resp.vote_counts()[n_old_items:]
        total = votes.sum(axis=1, keepdims=True)
        q[n_old_items:] = np.where(total > 0, votes / np.where(total > 0, total, 1.0), 1.0 / k)
    if (q.sum(axis=0) <= 0).any():
        q = (1 - NEW_CLASS_SHARE) * q + NEW_CLASS_SHARE / k
    return q


def update_fit(est: Any, data: Responses | pd.DataFrame) -> None:
    """Add the batch ``data`` to the fitted ``est`` (a ``ds`` / ``ds1`` estimator) and refit from its previous
    state (module docstring)."""
    t0 = time.perf_counter()
    old = getattr(est, "responses_", None)
    if old is None:
        raise UserInputError(f"'{est.method_name}' has not been fitted yet: call fit before update.")
    est.validated_params()
    appended = append_responses(old, code_batch(data, old))
    resp = appended.responses
    q0 = warm_posterior(est.result_.posterior, resp, appended.n_old_items)
    settings = EMSettings(tol=float(est.tol), max_iter=int(est.max_iter), name=f"{est.method_name} EM (update)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AggregationWarning)
        model = est.model(resp, None)
        run = run_em(model, model.start(q0), settings)
        if (
            est.one_coin
            and est.estimate_priors
            and prior_collapsed(run.state.class_prior, resp, None, float(getattr(est, "prior_guard", 0.0)))
        ):
            warnings.warn(
                collapse_message("ds1", run.state.class_prior, resp.classes), AggregationWarning, stacklevel=2
            )
            model = est.model(resp, None)
            model.estimate_priors = False
            run = run_em(model, model.start(q0), settings)
    fit = Fit(
        posterior=run.posterior,
        confusion=run.state.confusion,
        class_prior=run.state.class_prior,
        log_likelihood=run.log_likelihood,
        n_iter=run.n_iter,
        converged=run.converged,
    )
    fit.details["update"] = {"batch_responses": appended.n_new_responses, "warm_start": True}
    fit.warnings.extend(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, AggregationWarning)))
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    est._set_fitted(resp, fit, time.perf_counter() - t0)


__all__ = ["NEW_CLASS_SHARE", "update_fit", "warm_posterior"]
