"""Vote shares: each item's (weighted) share of votes per label, the posterior of majority vote
(:class:`~fusion_core.methods.majority.MajorityVote`) and the default start of every EM
(:meth:`~fusion_core.methods.base.Aggregator`'s ``init='mv'``); family-free, so both import it from here.

One ``np.bincount`` over the responses.  A compiled pass (numba, votes summed in stack scratch) was measured and
removed: 3.8 % of a 1M-response ``mv`` fit (``benchmarks/kernels.py``, docs/KERNELS.md).
"""

from __future__ import annotations

import numpy as np

from fusion_core.data.responses import Responses


def vote_shares(resp: Responses, worker_weight: np.ndarray | None = None) -> np.ndarray:
    """Items × K (weighted) vote shares, uniform for items without responses (``worker_weight``: one weight per
    annotator, in code order)."""
    k = resp.n_classes
    votes = resp.vote_counts(worker_weight)
    tot = votes.sum(axis=1, keepdims=True)
    return np.where(tot > 0, votes / np.where(tot > 0, tot, 1), 1.0 / k)
