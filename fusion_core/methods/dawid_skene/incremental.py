"""Incremental Dawid–Skene: a new batch of responses updates a fitted ``ds`` / ``ds1`` from its previous state.

The batch is coded against the fitted coding (:func:`fusion_core.data.merge.code_batch` factorises each column of
the batch once; :func:`~fusion_core.data.merge.append_responses` looks its distinct ids up in the id → code
dictionaries kept between batches: known items, annotators and labels keep their codes, new ones are appended, and
the response arrays grow in place), and EM restarts from the previous state with the estimator's own ``tol`` and
``max_iter`` (Neal & Hinton 1998 on warm-started EM; Dawid & Skene 1979 for the steps).  Two phases.
(1) *Local EM* (the incremental EM of Neal & Hinton 1998, §4): only the items the batch touched are E-stepped; the
other items' expected counts are held at their previous posteriors — kept from the previous state
(:class:`WarmState`: the final E-step's expected counts — after a fit, the fit's own (:func:`fitted_statistics`) —
minus the touched earlier items' share, a pass over their responses only), so an iteration costs the touched items' responses only (their layout is cut out of the whole
one, :func:`~fusion_core.methods.layout.layout_subset`); it stops at :data:`LOCAL_TOL_FACTOR` times the whole
objective's absolute tolerance (it only makes the start of the next phase).
(2) EM over everything from the local phase's parameters, in cycles of one plain EM step whose starts after the
first are extrapolated (:func:`~fusion_core.methods.em.squarem.run_em_extrapolated`): the items the batch did not
touch lag one EM step behind the others (one slow global mode), which the extrapolation shortens (4–6 E-steps
instead of 5–10).  It stops when a plain EM step meets the driver's rule — the test a full fit applies — so the
result is a fixed point of the full EM map to the same tolerance.  Its sparse layout is the previous one with the
batch's entries inserted (:func:`~fusion_core.methods.layout.sweep_data_appended`), not re-sorted.  The class tie
priority's keys are kept and updated from the batch's rows (:func:`~fusion_core.methods.ties.class_votes`).
At convergence the fit is the maximum of the same likelihood as a full refit's; the two agree to the
convergence tolerance when both reach the same optimum (tests/test_incremental.py checks 1e-6 at a tight
``tol``).  Annealing and random restarts are not rerun (plain EM from the warm start); gold labels passed to the
first ``fit`` are not kept.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.merge import Appended, append_responses, code_batch
from fusion_core.data.responses import Responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.dawid_skene.core import DawidSkeneModel, DSState, SweepStats, ds_fit, params_from_counts
from fusion_core.methods.dawid_skene.sweep import default_backend, expected_counts_of, sweep_data_appended
from fusion_core.methods.em import EMRun, EMSettings, EStep, run_em
from fusion_core.methods.em.squarem import run_em_extrapolated
from fusion_core.methods.layout import layout_subset
from fusion_core.methods.priors import collapse_message, prior_collapsed
from fusion_core.methods.ties import class_keys, class_votes, remember_class_priority

#: share of a label's mass given to every class when a label that no item had before appears
NEW_CLASS_SHARE = 1e-3

#: the local phase stops at this multiple of the whole objective's absolute tolerance.  It only makes the full
#: phase's start (any stopping point is valid: Neal & Hinton 1998, §4; the full phase applies the fit's own rule),
#: and precision below the untouched items' lag, which it cannot remove, is wasted: its first full step gains 7–35
#: nats against a tolerance of 0.02–0.09 (1M-response benchmark, tol 1e-7).  Measured on three simulated 10-batch
#: streams, in full passes per update against the refit's: ×1 0.56–0.62 of the refit's EM work on average, ×10
#: 0.43–0.51, ×100 0.43–0.46, ×1000 0.43–0.46 (docs/PLAN.md)
LOCAL_TOL_FACTOR = 100.0


def new_item_votes(resp: Responses, n_old_items: int, first_row: int) -> np.ndarray:
    """The soft majority vote of the items from ``n_old_items`` on (their responses are all from ``first_row``
    on): (n_items − n_old_items) × K."""
    k = resp.n_classes
    item, label = resp.item[first_row:], resp.label[first_row:]
    on = item >= n_old_items  # the new items' responses only
    cell = (item[on] - n_old_items) * k + label[on]
    w = None if resp.weight is None else resp.weight[first_row:][on]
    votes = np.bincount(cell, weights=w, minlength=(resp.n_items - n_old_items) * k).reshape(-1, k)
    total = votes.sum(axis=1, keepdims=True)
    return np.where(total > 0, votes / np.where(total > 0, total, 1.0), 1.0 / k)


def warm_posterior(previous: np.ndarray, resp: Responses, n_old_items: int) -> np.ndarray:
    """The start of EM after a batch: the previous posterior of the earlier items (new classes at 0), the soft
    majority vote of the new items; a class with no mass at all gets :data:`NEW_CLASS_SHARE` everywhere."""
    k = resp.n_classes
    q = np.zeros((resp.n_items, k))
    q[:n_old_items, : previous.shape[1]] = previous
    q[n_old_items:] = new_item_votes(resp, n_old_items, 0)
    if (q.sum(axis=0) <= 0).any():
        q = (1 - NEW_CLASS_SHARE) * q + NEW_CLASS_SHARE / k
    return q


@dataclass(frozen=True)
class WarmState:
    """What an update keeps from the state it updates: the responses it belongs to, the id → code dictionaries of
    items and annotators, and the M-step statistics of the final E-step (expected counts, workers × true ×
    reported, and class totals Σ_i q_i) — the per-item sufficient statistics summed, so the items a batch does not
    touch need no pass over their responses — and the two keys of the class tie priority (``votes``, ``first``:
    :func:`~fusion_core.methods.ties.class_votes`), so the fitted labels need no pass either."""

    resp: Responses
    maps: tuple[dict[Any, int], dict[Any, int]]
    counts: np.ndarray
    class_total: np.ndarray
    votes: np.ndarray
    first: np.ndarray


class LocalModel:
    """Dawid–Skene EM on the touched items only, the others' statistics fixed (``fixed_counts``, ``fixed_total``)."""

    def __init__(self, inner: DawidSkeneModel, fixed_counts: np.ndarray, fixed_total: np.ndarray) -> None:
        self.inner, self.fixed_counts, self.fixed_total = inner, fixed_counts, fixed_total

    def state_from(self, posterior: np.ndarray) -> DSState:
        counts = expected_counts_of(self.inner.resp, posterior, backend=self.inner.backend)
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


def local_state(model: DawidSkeneModel, counts: np.ndarray, class_total: np.ndarray) -> DSState:
    """The M-step of given statistics."""
    return params_from_counts(counts, class_total, model.smoothing, model.estimate_priors, model.one_coin)


def warm_run(
    model: DawidSkeneModel,
    previous: np.ndarray,
    warm: WarmState,
    appended: Appended,
    settings: EMSettings,
) -> tuple[EMRun[DSState], int]:
    """Local EM on the items the batch touched, the others' statistics taken from ``warm``, then full EM (module
    docstring).  ``previous``: the posterior of the state updated.  Returns the full run and the local phase's
    number of E-steps (over the touched items only)."""
    resp = model.resp
    n_old_resp = resp.n_responses - appended.n_new_responses
    n_old_items = appended.n_old_items
    touched = np.zeros(resp.n_items, dtype=bool)
    touched[resp.item[n_old_resp:]] = True
    t_idx = np.flatnonzero(touched)  # the earlier items the batch touched, then every new item
    old_t = t_idx[t_idx < n_old_items]
    m, k = resp.n_workers, resp.n_classes
    backend = default_backend(resp.n_responses)  # the whole data's: compiled when the full fit is
    fixed = np.zeros((m, k, k))
    fixed[: appended.n_old_workers] = warm.counts
    fixed_total = warm.class_total.copy()
    if len(old_t):  # the touched earlier items' share of the kept statistics, under their previous posteriors
        fixed[: appended.n_old_workers] -= expected_counts_of(
            layout_subset(warm.resp, old_t), previous[old_t], backend=backend
        )
        fixed_total -= previous[old_t].sum(axis=0)
    fixed, fixed_total = np.maximum(fixed, 0.0), np.maximum(fixed_total, 0.0)  # rounding
    sweep_data_appended(warm.resp, resp)  # the whole layout: the earlier one with the batch's entries inserted
    if not len(t_idx):  # an empty batch: EM from the kept statistics
        return run_em(model, local_state(model, fixed, fixed_total), settings), 0
    inner = DawidSkeneModel(
        layout_subset(resp, t_idx),
        model.smoothing,
        model.estimate_priors,
        model.one_coin,
        None,
        keep_joint=False,
        backend=backend,
    )
    local = LocalModel(inner, fixed, fixed_total)
    q_t = np.empty((len(t_idx), k))
    q_t[: len(old_t)] = previous[old_t]
    q_t[len(old_t) :] = new_item_votes(resp, n_old_items, n_old_resp)
    # the local objective is a part of the whole one: an absolute change, LOCAL_TOL_FACTOR × the whole one's
    local_tol = LOCAL_TOL_FACTOR * settings.tol * resp.n_responses / max(inner.resp.n_responses, 1)
    local_run = run_em(
        local,
        local.state_from(q_t),
        EMSettings(tol=local_tol, max_iter=settings.max_iter, name=settings.name + ", touched items", warn=False),
    )
    return run_em_extrapolated(model, local_run.state, settings), local_run.n_iter


def update_fit(est: Any, data: Responses | pd.DataFrame) -> None:
    """Add the batch ``data`` to the fitted ``est`` (a ``ds`` / ``ds1`` estimator) and refit from its previous
    state (module docstring)."""
    t0 = time.perf_counter()
    old = getattr(est, "responses_", None)
    if old is None:
        raise UserInputError(f"'{est.method_name}' has not been fitted yet: call fit before update.")
    est.validated_params()
    kept: WarmState | None = getattr(est, "_warm", None)
    if kept is not None and kept.resp is not old:  # kept for other responses (fit since): not valid
        kept = None
    votes, first = class_keys(old) if kept is None else (kept.votes, kept.first)
    appended = append_responses(old, code_batch(data, old), None if kept is None else kept.maps)
    resp = appended.responses
    previous = est.result_.posterior
    settings = EMSettings(tol=float(est.tol), max_iter=int(est.max_iter), name=f"{est.method_name} EM (update)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AggregationWarning)
        model = est.model(resp, None)
        local_iter = 0
        if resp.n_classes == appended.n_old_classes:
            if kept is None:  # first update after a fit: the statistics of the fitted posterior
                counts, total = fitted_statistics(est, old, previous)
                kept = WarmState(old, appended.maps, counts, total, votes, first)
            run, local_iter = warm_run(model, previous, kept, appended, settings)
        else:  # a new label: every item's posterior gains a class; plain EM from the warm posterior
            run = run_em(model, model.start(warm_posterior(previous, resp, appended.n_old_items)), settings)
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
            run = run_em(model, model.start(warm_posterior(previous, resp, appended.n_old_items)), settings)
    fit = ds_fit(run)  # no annealing in an update: its run's trace is None
    # n_iter: E-steps over every response (the full phase); local_iterations: E-steps over the touched items only
    fit.details["update"] = {
        "batch_responses": appended.n_new_responses,
        "warm_start": True,
        "local_iterations": local_iter,
    }
    fit.warnings.extend(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, AggregationWarning)))
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    votes, first = _priority_keys(votes, first, resp, resp.n_responses - appended.n_new_responses)
    remember_class_priority(resp, votes, first)
    est._set_fitted(resp, fit, time.perf_counter() - t0)
    stats = run.estep.stats
    est._warm = WarmState(resp, appended.maps, stats.counts, stats.class_total, votes, first)


def fitted_statistics(est: Any, resp: Responses, posterior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The M-step statistics of the fitted ``posterior`` (expected counts, class totals): those of the fit's final
    E-step (``est._fit_stats``, set by the fit) when that E-step made ``posterior`` — not when the run was
    relabelled after it (restarts) or replaced (``ds1``'s refit with equal priors) — else one pass over ``resp``."""
    made = getattr(est, "_fit_stats", None)
    if isinstance(made, SweepStats) and made.posterior is posterior:
        return made.counts, made.class_total
    return expected_counts_of(resp, posterior), posterior.sum(axis=0)


def _priority_keys(votes: np.ndarray, first: np.ndarray, resp: Responses, n_old: int) -> tuple[np.ndarray, np.ndarray]:
    """The class tie priority's keys of ``resp`` from those of its first ``n_old`` responses and a pass over the
    batch's rows only."""
    new_votes, new_first = class_votes(resp, n_old)
    k = len(votes)
    new_votes[:k] += votes
    new_first[:k] = np.where(first < n_old, first, new_first[:k])
    return new_votes, new_first


__all__ = ["NEW_CLASS_SHARE", "fitted_statistics", "update_fit", "warm_posterior"]
