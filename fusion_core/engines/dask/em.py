"""Dawid–Skene EM and majority vote over coded partitions, through the shared EM driver.

Each EM iteration is one pass over the partitions: the current confusion matrices and class priors are broadcast,
every partition runs the in-memory E-step on its own items (:func:`~.kernels.em_stats`: posteriors eq. (9), the
log-likelihood, and the expected counts ``countsᵀ @ q`` of eq. (11)), and a tree reduction sums the statistics.
The M-step (:func:`~fusion_core.methods.dawid_skene.core.params_from_counts`) runs once on the summed statistics.
The loop, the convergence rule (relative change of the log-likelihood ≤ ``tol``), the ``ConvergenceWarning`` and
the progress reports are :func:`fusion_core.methods.em.run_em`'s, exactly as for the in-memory ``ds`` and ``ds1``;
posteriors stay on the workers and are written by the output pass (:func:`write_posteriors`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from fusion_core.engines.dask.ingest import CodedResponses
from fusion_core.engines.dask.kernels import EMStats, OutputStats, em_stats, output_stats, posterior, start_stats
from fusion_core.engines.dask.runner import map_reduce
from fusion_core.engines.dask.store import PartitionRef, Store, as_responses
from fusion_core.errors import AggregationWarning
from fusion_core.methods.dawid_skene.core import DSState, log_dirichlet_prior, params_from_counts
from fusion_core.methods.em import EMSettings, EStep, run_em
from fusion_core.methods.priors import collapse_message
from fusion_core.methods.ties import argmax_ties


@dataclass
class DistributedDawidSkene:
    """The Dawid–Skene model for the EM driver, with its E-step distributed over partitions.

    ``sources`` are the partitions (loaders, or responses persisted on the workers).  The E-step's ``stats`` are
    the summed :class:`~.kernels.EMStats`; its ``posterior`` is empty (posteriors stay on the workers), so the
    driver's annealing and restarts, which need posteriors, are not available here."""

    sources: Sequence[Any]
    n_classes: int
    smoothing: float = 0.0
    estimate_priors: bool = True
    one_coin: bool = False
    seconds: list[float] = field(default_factory=list)

    def start(self) -> tuple[DSState, EMStats]:
        """Parameters from the majority-vote posteriors (``init='mv'``) and the start's statistics."""
        stats = map_reduce(_start, self.sources)
        return self.m_step(stats), stats

    def m_step(self, stats: EMStats) -> DSState:
        return params_from_counts(stats.counts, stats.class_total, self.smoothing, self.estimate_priors, self.one_coin)

    def e_step(self, state: DSState, temperature: float = 1.0) -> EStep:
        if temperature != 1.0:
            raise ValueError("the Dask engine does not anneal")
        t0 = time.perf_counter()
        stats: EMStats = map_reduce(_em, self.sources, state)
        self.seconds.append(time.perf_counter() - t0)
        ll = stats.log_likelihood + log_dirichlet_prior(state.confusion, self.smoothing)
        return EStep(posterior=np.empty((0, self.n_classes)), log_likelihood=ll, stats=stats)


def _start(source: PartitionRef | Any) -> EMStats:
    return start_stats(as_responses(source))


def _em(source: PartitionRef | Any, state: DSState) -> EMStats:
    return em_stats(as_responses(source), state)


@dataclass
class EngineFit:
    """A finished fit on the engine: parameters (None for majority vote), the log-likelihood trace, iterations,
    convergence, seconds per EM iteration and the warnings raised."""

    state: DSState | None
    log_likelihood: list[float]
    n_iter: int
    converged: bool
    iteration_seconds: list[float]
    warnings: list[str] = field(default_factory=list)


def fit_ds(
    coded: CodedResponses,
    sources: Sequence[Any],
    *,
    smoothing: float,
    estimate_priors: bool,
    one_coin: bool,
    tol: float,
    max_iter: int,
    prior_guard: float = 0.0,
    name: str = "ds",
) -> EngineFit:
    """Dawid–Skene (or one-coin) EM from the majority-vote start, as the in-memory ``ds`` / ``ds1`` without
    restarts or annealing.  With ``one_coin`` and ``prior_guard`` > 0, a class prior below ``prior_guard`` × its
    majority-vote share is refitted with equal priors and a warning (:mod:`fusion_core.methods.priors`)."""
    model = DistributedDawidSkene(sources, coded.n_classes, smoothing, estimate_priors, one_coin)
    state0, start = model.start()
    settings = EMSettings(tol=tol, max_iter=max_iter, name=f"{name} EM (Dask)")
    run = run_em(model, state0, settings)
    out = EngineFit(run.state, run.log_likelihood, run.n_iter, run.converged, list(model.seconds))
    shares = start.class_total / max(start.n_items, 1)  # mean majority-vote posterior (vote_shares)
    seen = shares > 0
    if estimate_priors and prior_guard > 0 and np.any(run.state.class_prior[seen] < prior_guard * shares[seen]):
        msg = collapse_message(name, run.state.class_prior, coded.classes)
        warnings.warn(msg, AggregationWarning, stacklevel=2)
        model = DistributedDawidSkene(sources, coded.n_classes, smoothing, False, one_coin)
        state0, _ = model.start()
        run = run_em(model, state0, settings)
        out = EngineFit(run.state, run.log_likelihood, run.n_iter, run.converged, list(model.seconds), [msg])
    return out


def one_sided_message(label_counts: np.ndarray, method: str, min_responses: int = 5) -> str | None:
    """The in-memory warning for annotators who only ever give one label (``base.warn_one_sided``'s rule on the
    workers × classes response counts), or None."""
    n = label_counts.sum(axis=1)
    active = n >= min_responses
    if active.sum() < 2:
        return None
    one = (label_counts > 0).sum(axis=1) == 1
    if float(one[active].mean()) < 0.5:
        return None
    return (
        f"{int(one[active].sum())} of {int(active.sum())} annotators always give the same label (one-sided, like "
        f"labelling functions that abstain otherwise). '{method}' treats missing responses as missing at random, "
        "so it cannot tell their accuracy from their label choice and may collapse; majority vote is safer, or "
        "keep the abstentions as a label."
    )


# ------------------------------------------------------------------------------------------- output pass
def probability_column(value: Any) -> str:
    """The posterior column of a class in the output files: ``P(<label>)``."""
    return f"P({value})"


def write_posteriors(
    coded: CodedResponses, sources: Sequence[Any], state: DSState | None, output: Store
) -> OutputStats:
    """Posteriors and hard labels (posterior argmax; exact ties → the tied class with more responses overall, then
    the first to appear in the data, as :mod:`fusion_core.methods.ties` in memory) of every item, one Parquet file per
    partition under ``output`` (columns ``task``, ``label``, ``P(<label>)`` …); returns the summed statistics of
    the annotator report."""
    pairs = list(zip(coded.refs(), sources))
    totals = np.asarray(coded.label_counts).sum(axis=0)
    k = len(totals)
    first = np.arange(k) if coded.label_first is None else coded.label_first
    rank = np.empty(k, dtype=np.int64)
    rank[np.lexsort((np.arange(k), first, -totals))] = np.arange(k)
    return map_reduce(_write_partition, pairs, state, output, coded.classes, rank)


def _write_partition(
    pair: tuple[PartitionRef, Any], state: DSState | None, output: Store, classes: Any, rank: np.ndarray
) -> OutputStats:
    ref, source = pair
    resp = as_responses(source)
    post = posterior(resp, state)
    columns: dict[str, Any] = {
        "task": ref.tasks(),
        "label": pa.array(np.asarray(classes.take(argmax_ties(post, rank))), from_pandas=True),
    }
    for j, value in enumerate(classes):
        columns[probability_column(value)] = pa.array(post[:, j])
    output.write("", ref.index, pa.table(columns))
    return output_stats(resp, post)
