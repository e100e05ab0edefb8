"""Vote shares: each item's (weighted) share of votes per label, the posterior of majority vote
(:class:`~fusion_core.methods.majority.MajorityVote`) and the default start of every EM
(:meth:`~fusion_core.methods.base.Aggregator`'s ``init='mv'``); family-free, so both import it from here."""

from __future__ import annotations

from typing import Any

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.methods.layout import JIT_MIN_RESPONSES, sweep_data
from fusion_core.methods.numerics import jit_enabled


def vote_shares(resp: Responses, worker_weight: np.ndarray | None = None, *, backend: str | None = None) -> np.ndarray:
    """Items × K (weighted) vote shares, uniform for items without responses.  Large data with numba: one compiled
    pass over the item-ordered responses (the structure of the Dawid–Skene pass), else ``vote_counts``;
    ``backend`` (``'numba'``/``'numpy'``) overrides that choice."""
    k = resp.n_classes
    if backend is None:
        backend = "numba" if jit_enabled() and resp.n_responses >= JIT_MIN_RESPONSES else "numpy"
    if backend == "numba" and jit_enabled():
        d = sweep_data(resp)
        out = np.empty((resp.n_items, k))
        ww = np.empty(0) if worker_weight is None else np.asarray(worker_weight, dtype=float)
        _shares_kernel(k)(d.indptr, d.indices, d.data if d.data is not None else np.empty(0), ww, out)
        return out
    votes = resp.vote_counts(worker_weight)
    tot = votes.sum(axis=1, keepdims=True)
    return np.where(tot > 0, votes / np.where(tot > 0, tot, 1), 1.0 / k)


_SHARES: dict[int, Any] = {}


def _shares_kernel(k: int) -> Any:
    """The vote-share pass compiled for ``k`` classes (:mod:`._votes_compiled`, which needs numba)."""
    fn = _SHARES.get(k)
    if fn is None:
        import numba as nb

        from fusion_core.methods._votes_compiled import make_shares

        fn = _SHARES[k] = nb.njit(cache=True, nogil=True, error_model="numpy")(make_shares(k))
    return fn
