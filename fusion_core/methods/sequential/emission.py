"""Annotator emissions of the sequential model: the paper's per-token confusion (39) and [OURS] the
annotator-Markov emission ``Γ_w[c, k, l]`` (c = the annotator's own label at the previous position).

Why the Markov emission: on CoNLL-NER an annotator's errors persist along a sentence (given gold O, O:
Pr(error at n+1 | error at n) = 0.32 vs Pr(error) = 0.016), so the paper's emission counts one span error once
per token.  The observed previous label keeps forward–backward unchanged (one factor per position); cf. the
"seq" annotator model of BSC-seq (Simpson & Gurevych 2019).  See ``docs/sequential.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fusion_core.data.responses import Responses
from fusion_core.methods.numerics import safe_log
from fusion_core.methods.sequential.inference import SequenceLayout


@dataclass
class ResponseContext:
    """Each response's context ``c`` = the same annotator's label at the previous position of the same
    sequence (``K`` when it has none), and the sparse ``items × (workers·(K+1)·K)`` counts of (w, c, l)."""

    context: np.ndarray
    counts: sp.csr_matrix
    counts_t: sp.csr_matrix


def previous_own_label(resp: Responses, layout: SequenceLayout) -> np.ndarray:
    """Per response: the same annotator's label at the previous position (``K`` = none), by a vectorised
    lookup of (previous item, worker); duplicates count as the annotator's first response on that item."""
    k, w = resp.n_classes, resp.n_workers
    prev_item = np.full(resp.n_items, -1, dtype=np.int64)
    prev, nxt = layout.transitions()
    prev_item[nxt] = prev
    key = resp.item.astype(np.int64) * w + resp.worker
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    p = prev_item[resp.item]
    target = np.where(p >= 0, p * w + resp.worker, -1)
    pos = np.clip(np.searchsorted(sorted_key, target), 0, max(len(sorted_key) - 1, 0))
    found = (p >= 0) & (len(sorted_key) > 0) & (sorted_key[pos] == target)
    return np.where(found, resp.label[order[pos]], k).astype(np.int64)


def response_context(resp: Responses, layout: SequenceLayout) -> ResponseContext:
    """The :class:`ResponseContext` of every response."""
    return context_subset(resp, previous_own_label(resp, layout), np.ones(resp.n_responses, dtype=bool))


def context_subset(resp: Responses, context: np.ndarray, mask: np.ndarray) -> ResponseContext:
    """:class:`ResponseContext` of the responses selected by ``mask`` (contexts computed on all responses)."""
    k, w = resp.n_classes, resp.n_workers
    col = (resp.worker[mask] * (k + 1) + context[mask]) * k + resp.label[mask]
    mat = sp.csr_matrix((np.ones(int(mask.sum())), (resp.item[mask], col)), shape=(resp.n_items, w * (k + 1) * k))
    mat.sum_duplicates()
    return ResponseContext(context[mask], mat, mat.T.tocsr())


def context_log_likelihood(ctx: ResponseContext, context_confusion: np.ndarray) -> np.ndarray:
    """``L[n, k] = Σ_{responses (w, c, l) on n} log Γ_w[c, k, l]`` (items × K)."""
    w, c, k, _ = context_confusion.shape
    log_g = safe_log(context_confusion).transpose(0, 1, 3, 2).reshape(w * c * k, k)
    return np.asarray(ctx.counts @ log_g)


def context_counts(ctx: ResponseContext, posterior: np.ndarray) -> np.ndarray:
    """Expected counts ``C[w, c, k, l] = Σ_n q_nk #(w said l on n after saying c)``."""
    k = posterior.shape[1]
    c = np.asarray(ctx.counts_t @ posterior)  # (W·C·K_reported) × K_true
    return c.reshape(-1, k + 1, k, k).transpose(0, 1, 3, 2)
