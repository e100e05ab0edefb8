"""Per-partition kernels of the Dask engine: plain numpy on one partition's own coded responses.

A partition holds every response of its items (the responses are partitioned by item at ingest), so the E-step of
an item never needs another partition.  Items are coded locally (0 … n_items − 1 inside the partition); workers and
classes use the global codes, so a partition's sufficient statistics (``W × K × K`` expected counts, the class
totals, the log-likelihood) add up across partitions.  The numeric steps are the in-memory Dawid–Skene ones
(:mod:`fusion_core.methods.dawid_skene.core`): E-step eq. (9) with log priors, M-step statistics for eq. (11)
(Traganitis & Giannakis §3.1).  Nothing here imports dask.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.methods.base import initial_posterior
from fusion_core.methods.dawid_skene.core import DSState, e_step
from fusion_core.methods.dawid_skene.sweep import ds_sweep, expected_counts_of

T = TypeVar("T")


def partition_responses(
    item: np.ndarray, worker: np.ndarray, label: np.ndarray, *, n_workers: int, n_classes: int
) -> Responses:
    """A partition's coded responses as :class:`Responses` (local item codes 0 … n − 1, global worker and class
    codes), so the in-memory kernels (``counts @ log Γ``, ``countsᵀ @ q``) run on it unchanged."""
    item = np.asarray(item, dtype=np.int64)
    n_items = int(item.max()) + 1 if len(item) else 0
    return Responses(
        item=item,
        worker=np.asarray(worker, dtype=np.int64),
        label=np.asarray(label, dtype=np.int64),
        items=pd.RangeIndex(n_items),
        workers=pd.RangeIndex(n_workers),
        classes=pd.RangeIndex(n_classes),
    )


@dataclass
class EMStats:
    """What one E-step over some partitions yields for the M-step, summed over partitions: the observed-data
    log-likelihood, the expected counts ``C[w, k, l]`` (workers × true × reported) and the class totals
    ``Σ_n q_nk``."""

    log_likelihood: float
    counts: np.ndarray
    class_total: np.ndarray
    n_items: int

    def __add__(self, other: EMStats) -> EMStats:
        return EMStats(
            self.log_likelihood + other.log_likelihood,
            self.counts + other.counts,
            self.class_total + other.class_total,
            self.n_items + other.n_items,
        )


@dataclass
class OutputStats:
    """What the output pass yields, summed over partitions: per worker the posterior mass on the worker's own
    labels (``agreement``, the numerator of majority vote's skill), the class totals of the posteriors and the
    number of items written."""

    agreement: np.ndarray
    class_total: np.ndarray
    n_items: int

    def __add__(self, other: OutputStats) -> OutputStats:
        return OutputStats(
            self.agreement + other.agreement, self.class_total + other.class_total, self.n_items + other.n_items
        )


def start_stats(resp: Responses) -> EMStats:
    """Statistics of the majority-vote start (soft vote shares, as ``DawidSkeneModel.start`` with ``init='mv'``)."""
    q = initial_posterior(resp, "mv")
    return EMStats(0.0, expected_counts_of(resp, q), q.sum(axis=0), resp.n_items)


def em_stats(resp: Responses, state: DSState) -> EMStats:
    """One E-step under ``state`` (posteriors eq. 9, log-likelihood ``Σ_n log Σ_k π_k e^{L_nk}``) and the M-step
    statistics of its posteriors."""
    sw = ds_sweep(resp, state.confusion, state.class_prior)  # the fused pass of the in-memory fit
    return EMStats(sw.log_likelihood, sw.counts, sw.class_total, resp.n_items)


def posterior(resp: Responses, state: DSState | None) -> np.ndarray:
    """Items × K posteriors: the E-step under ``state``, or majority vote's vote shares when ``state`` is None."""
    if state is None:
        return initial_posterior(resp, "mv")
    return e_step(resp, state.confusion, state.class_prior)[0]


def output_stats(resp: Responses, post: np.ndarray) -> OutputStats:
    """The annotator-report statistics of one partition's final posteriors."""
    agree = np.bincount(resp.worker, weights=post[resp.item, resp.label], minlength=resp.n_workers)
    return OutputStats(agree, post.sum(axis=0), resp.n_items)


def total(parts: Sequence[T]) -> T:
    """The sum of partial statistics (one node of the tree reduction)."""
    return functools.reduce(operator.add, parts)


def worker_skill_from_confusion(confusion: np.ndarray, class_prior: np.ndarray) -> np.ndarray:
    """Expected accuracy ``Σ_k π_k Γ_w[k, k]`` (the in-memory skill of models with confusion matrices)."""
    return np.einsum("k,wkk->w", class_prior, confusion)


def agreement_skill(agreement: np.ndarray, responses_per_worker: np.ndarray) -> np.ndarray:
    """Majority vote's skill: the posterior mass on each worker's own labels per response."""
    return agreement / np.maximum(responses_per_worker, 1)
