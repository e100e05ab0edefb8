"""Incremental Dawid–Skene: a new batch of responses updates a fitted ``ds`` / ``ds1`` from its previous state.

The batch is coded against the fitted coding (:func:`fusion_core.data.merge.append_responses`: known items,
annotators and labels keep their codes, new ones are appended), and EM restarts from the previous posterior —
new items from their soft majority vote, a new label with no mass anywhere gets a small uniform share — through
the shared driver with the estimator's own ``tol`` and ``max_iter``.  The first M-step then re-estimates every
annotator (new ones included) from the previous posteriors and every response, so EM starts next to the previous
optimum instead of at majority vote (Neal & Hinton 1998 on warm-started EM; Dawid & Skene 1979 for the steps).
Two phases.  (1) *Local EM* (the incremental EM of Neal & Hinton 1998, §4): only the items the batch touched are
E-stepped; the other items' expected counts are held at their previous posteriors — kept from the previous state
(:class:`WarmState`: the final E-step's expected counts, minus the touched earlier items' share, a pass over their
responses only), so an iteration costs the touched items' responses only; it stops at the whole objective's
absolute tolerance.  (2) Plain EM over everything from the local phase's parameters until the driver's convergence
rule holds (usually 4–6 E-steps), so the result is a fixed point of the full EM map; its sparse layout is the
previous one with the batch's entries inserted (:func:`~fusion_core.methods.layout.sweep_data_appended`), not re-sorted.
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
from fusion_core.methods.dawid_skene.core import DawidSkeneModel, DSState, SweepStats, params_from_counts
from fusion_core.methods.dawid_skene.sweep import default_backend, expected_counts_of, sweep_data_appended
from fusion_core.methods.em import EMRun, EMSettings, EStep, run_em
from fusion_core.methods.priors import collapse_message, prior_collapsed
from fusion_core.methods.results import Fit

#: share of a label's mass given to every class when a label that no item had before appears
NEW_CLASS_SHARE = 1e-3


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
    touch need no pass over their responses."""

    resp: Responses
    maps: tuple[dict[Any, int], dict[Any, int]]
    counts: np.ndarray
    class_total: np.ndarray


def _row_counts(resp: Responses, rows: np.ndarray, q: np.ndarray, n_workers: int) -> np.ndarray:
    """Expected counts (workers × true × reported) of the responses ``rows`` under item posteriors ``q`` (rows
    indexed by ``resp.item``): K bincounts over those responses only."""
    k = q.shape[1]
    cell = resp.worker[rows] * k + resp.label[rows]
    w = None if resp.weight is None else resp.weight[rows]
    flat = np.empty((n_workers * k, k))
    qi = q[resp.item[rows]]
    for c in range(k):
        flat[:, c] = np.bincount(cell, weights=qi[:, c] if w is None else qi[:, c] * w, minlength=n_workers * k)
    return flat.reshape(n_workers, k, k).transpose(0, 2, 1)


def _subset(resp: Responses, rows: np.ndarray, t_idx: np.ndarray) -> Responses:
    """The responses ``rows`` (all on the items ``t_idx``, sorted), items re-coded 0..len(t_idx)−1 in ``t_idx``
    order; the item ids are not carried (the local model never reads them)."""
    pos = np.full(resp.n_items, -1, dtype=np.int64)
    pos[t_idx] = np.arange(len(t_idx))
    return Responses(
        item=pos[resp.item[rows]],
        worker=resp.worker[rows],
        label=resp.label[rows],
        items=pd.RangeIndex(len(t_idx)),
        workers=resp.workers,
        classes=resp.classes,
        weight=None if resp.weight is None else resp.weight[rows],
    )


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
) -> EMRun[DSState]:
    """Local EM on the items the batch touched, the others' statistics taken from ``warm``, then full EM (module
    docstring).  ``previous``: the posterior of the state updated."""
    resp = model.resp
    n_old_resp = resp.n_responses - appended.n_new_responses
    n_old_items = appended.n_old_items
    touched = np.zeros(resp.n_items, dtype=bool)
    touched[resp.item[n_old_resp:]] = True
    t_idx = np.flatnonzero(touched)
    old_t = t_idx[t_idx < n_old_items]
    new_rows = np.arange(n_old_resp, resp.n_responses)
    # the earlier responses on touched items: one boolean gather over the earlier items (none when the batch
    # brings new items only)
    rows = np.concatenate([np.flatnonzero(touched[resp.item[:n_old_resp]]), new_rows]) if len(old_t) else new_rows
    m = resp.n_workers
    fixed = np.zeros((m, resp.n_classes, resp.n_classes))
    fixed[: appended.n_old_workers] = warm.counts
    fixed_total = warm.class_total.copy()
    if len(old_t):  # the touched earlier items' share of the kept statistics, under their previous posteriors
        old_rows = rows[: len(rows) - len(new_rows)]
        fixed -= _row_counts(resp, old_rows, previous, m)
        fixed_total -= previous[old_t].sum(axis=0)
    fixed, fixed_total = np.maximum(fixed, 0.0), np.maximum(fixed_total, 0.0)  # rounding
    if not len(t_idx):  # an empty batch: EM from the kept statistics
        return run_em(model, local_state(model, fixed, fixed_total), settings)
    backend = default_backend(resp.n_responses)  # the whole data's: compiled when the full fit is
    inner = DawidSkeneModel(
        _subset(resp, rows, t_idx),
        model.smoothing,
        model.estimate_priors,
        model.one_coin,
        None,
        keep_joint=False,
        backend=backend,
    )
    local = LocalModel(inner, fixed, fixed_total)
    q_t = np.empty((len(t_idx), resp.n_classes))
    q_t[: len(old_t)] = previous[old_t]
    q_t[len(old_t) :] = new_item_votes(resp, n_old_items, n_old_resp)
    # the local objective is a part of the whole one: stop at the whole one's tolerance (same absolute change)
    local_tol = settings.tol * resp.n_responses / max(len(rows), 1)
    state = run_em(
        local,
        local.state_from(q_t),
        EMSettings(tol=local_tol, max_iter=settings.max_iter, name=settings.name + ", touched items", warn=False),
    ).state
    sweep_data_appended(warm.resp, resp)
    return run_em(model, state, settings)


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
    appended = append_responses(old, code_batch(data, old), None if kept is None else kept.maps)
    resp = appended.responses
    previous = est.result_.posterior
    settings = EMSettings(tol=float(est.tol), max_iter=int(est.max_iter), name=f"{est.method_name} EM (update)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AggregationWarning)
        model = est.model(resp, None)
        if resp.n_classes == appended.n_old_classes:
            if kept is None:  # first update after a fit: the statistics of the fitted posterior, one pass
                kept = WarmState(old, appended.maps, expected_counts_of(old, previous), previous.sum(axis=0))
            run = warm_run(model, previous, kept, appended, settings)
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
    stats = run.estep.stats
    est._warm = WarmState(resp, appended.maps, stats.counts, stats.class_total)


__all__ = ["NEW_CLASS_SHARE", "update_fit", "warm_posterior"]
