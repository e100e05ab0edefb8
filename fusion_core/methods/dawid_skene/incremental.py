"""Incremental Dawid–Skene: a new batch of responses updates a fitted ``ds`` / ``ds1`` from its previous state.

The batch is coded against the fitted coding (:func:`fusion_core.data.merge.append_responses`: known items,
annotators and labels keep their codes, new ones are appended), and EM restarts from the previous posterior —
new items from their soft majority vote, a new label with no mass anywhere gets a small uniform share — through
the shared driver with the estimator's own ``tol`` and ``max_iter``.  The first M-step then re-estimates every
annotator (new ones included) from the previous posteriors and every response, so EM starts next to the previous
optimum instead of at majority vote (Neal & Hinton 1998 on warm-started EM; Dawid & Skene 1979 for the steps).
Two phases.  (1) *Local EM* (the incremental EM of Neal & Hinton 1998, §4): only the items the batch touched are
E-stepped; the other items' expected counts are held at their previous posteriors (one pass over their responses,
once), so an iteration costs the touched items' responses only.  (2) Plain EM over everything from the local
phase's parameters until the driver's convergence rule holds (usually 2–3 E-steps), so the result is a fixed
point of the full EM map.  At convergence the fit is the maximum of the same likelihood as a full refit's; the two agree to the
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
from fusion_core.methods.dawid_skene.core import DawidSkeneModel, DSState, SweepStats, params_from_counts
from fusion_core.methods.dawid_skene.sweep import expected_counts_of
from fusion_core.methods.em import EMSettings, EStep, run_em
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
        on = resp.item >= n_old_items  # the new items' responses only
        cell = (resp.item[on] - n_old_items) * k + resp.label[on]
        w = None if resp.weight is None else resp.weight[on]
        votes = np.bincount(cell, weights=w, minlength=(resp.n_items - n_old_items) * k).reshape(-1, k)
        total = votes.sum(axis=1, keepdims=True)
        q[n_old_items:] = np.where(total > 0, votes / np.where(total > 0, total, 1.0), 1.0 / k)
    if (q.sum(axis=0) <= 0).any():
        q = (1 - NEW_CLASS_SHARE) * q + NEW_CLASS_SHARE / k
    return q


def _items_subset(resp: Responses, keep: np.ndarray) -> Responses:
    """The responses on the items ``keep`` (item indices), items re-coded 0..len(keep)−1, the rest as they are."""
    pos = np.full(resp.n_items, -1, dtype=np.int64)
    pos[keep] = np.arange(len(keep))
    on = pos[resp.item] >= 0
    return Responses(
        item=pos[resp.item[on]],
        worker=resp.worker[on],
        label=resp.label[on],
        items=resp.items[keep],
        workers=resp.workers,
        classes=resp.classes,
        weight=None if resp.weight is None else resp.weight[on],
    )


class LocalModel:
    """Dawid–Skene EM on the touched items only, the others' statistics fixed (``fixed_counts``, ``fixed_total``)."""

    def __init__(self, inner: DawidSkeneModel, fixed_counts: np.ndarray, fixed_total: np.ndarray) -> None:
        self.inner, self.fixed_counts, self.fixed_total = inner, fixed_counts, fixed_total

    def state_from(self, posterior: np.ndarray) -> DSState:
        counts = expected_counts_of(self.inner.resp, posterior)
        return self.m_step(SweepStats(posterior, counts, posterior.sum(axis=0)))

    def e_step(self, state: DSState, temperature: float = 1.0) -> EStep:
        return self.inner.e_step(state, temperature)

    def m_step(self, stats: SweepStats) -> DSState:
        m = self.inner
        return params_from_counts(
            stats.counts + self.fixed_counts,
            stats.class_total + self.fixed_total,
            m.smoothing,
            m.estimate_priors,
            m.one_coin,
        )

    def recycle(self, estep: EStep) -> None:
        self.inner.recycle(estep)


def warm_run(model: DawidSkeneModel, q0: np.ndarray, touched: np.ndarray, settings: EMSettings) -> Any:
    """Local EM on the ``touched`` items (boolean per item) from ``q0``, then full EM (module docstring)."""
    resp = model.resp
    t_idx, u_idx = np.flatnonzero(touched), np.flatnonzero(~touched)
    state = None
    if len(t_idx) > 0 and len(u_idx):
        sub_t = _items_subset(resp, t_idx)
        # the untouched items' statistics: everything's minus the touched items' (one pass each, no second subset)
        fixed = expected_counts_of(resp, q0) - expected_counts_of(sub_t, q0[t_idx])
        inner = DawidSkeneModel(sub_t, model.smoothing, model.estimate_priors, model.one_coin, None, keep_joint=False)
        local = LocalModel(inner, fixed, q0.sum(axis=0) - q0[t_idx].sum(axis=0))
        state = run_em(
            local,
            local.state_from(q0[t_idx]),
            EMSettings(
                tol=settings.tol, max_iter=settings.max_iter, name=settings.name + ", touched items", warn=False
            ),
        ).state
    return run_em(model, model.start(q0) if state is None else state, settings)


def update_fit(est: Any, data: Responses | pd.DataFrame) -> None:
    """Add the batch ``data`` to the fitted ``est`` (a ``ds`` / ``ds1`` estimator) and refit from its previous
    state (module docstring)."""
    t0 = time.perf_counter()
    old = getattr(est, "responses_", None)
    if old is None:
        raise UserInputError(f"'{est.method_name}' has not been fitted yet: call fit before update.")
    est.validated_params()
    cached = getattr(est, "_merge_maps", None)
    maps = cached[1] if cached is not None and cached[0] is old else None  # valid for the responses they coded
    appended = append_responses(old, code_batch(data, old), maps)
    resp = appended.responses
    q0 = warm_posterior(est.result_.posterior, resp, appended.n_old_items)
    settings = EMSettings(tol=float(est.tol), max_iter=int(est.max_iter), name=f"{est.method_name} EM (update)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AggregationWarning)
        touched = np.zeros(resp.n_items, dtype=bool)
        touched[resp.item[resp.n_responses - appended.n_new_responses :]] = True
        model = est.model(resp, None)
        run = warm_run(model, q0, touched, settings)
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
    est._merge_maps = (resp, appended.maps)


__all__ = ["NEW_CLASS_SHARE", "update_fit", "warm_posterior"]
