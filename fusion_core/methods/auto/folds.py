"""Held-out folds of ``auto``: every response is assigned to a fold by a hash of its task and annotator ids.

The fold of a response depends only on the text of its task id and annotator id, never on the row order, the
label values or a random seed, so shuffling the rows or renaming the labels gives the same folds.  A split hides
one fold, restricted to responses whose task and annotator each have at least two responses; a task or annotator
left without training responses gets back its hidden response of smallest hash, so every task and annotator keeps
at least one training response (spec ``multilabel.md`` §8 steps 1–2, with hashing in place of a random draw).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError

HASH_KEY = "fusion_core_fold"  # 16 bytes, as pandas' siphash needs
_MIX = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def id_hashes(ids: pd.Index) -> np.ndarray:
    """A 64-bit hash of each id's text (``str(id)``): the same id always hashes the same way."""
    text = np.asarray(ids.astype(str), dtype=object)
    return pd.util.hash_array(text, hash_key=HASH_KEY, categorize=False)


def smallest_first(size: np.ndarray, key: np.ndarray, cap: float) -> np.ndarray:
    """Boolean per element: the elements of smallest ``key`` (e.g. an id hash) whose ``size`` (responses, pairs …)
    adds up to at most ``cap``, taken whole in ``key`` order — a deterministic, row-order-free subsample."""
    order = np.argsort(key, kind="stable")
    keep = np.zeros(len(size), dtype=bool)
    keep[order[np.cumsum(size[order]) <= cap]] = True
    return keep


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser: spreads the bits of ``x`` (uint64) so that ``x % n`` is uniform."""
    x = x ^ (x >> np.uint64(30))
    x = x * _MIX[0]
    x = x ^ (x >> np.uint64(27))
    x = x * _MIX[1]
    return x ^ (x >> np.uint64(31))


def response_hashes(resp: Responses) -> np.ndarray:
    """A 64-bit hash per response from its (task id, annotator id) pair."""
    hi = id_hashes(resp.items)
    hw = _mix(id_hashes(resp.workers))
    with np.errstate(over="ignore"):
        return _mix(hi[resp.item] ^ hw[resp.worker])


def response_folds(resp: Responses, n_folds: int) -> np.ndarray:
    """The fold (0 … ``n_folds`` − 1) of every response."""
    if int(n_folds) < 2:
        raise UserInputError(f"n_folds must be at least 2, got {n_folds}.")
    with np.errstate(over="ignore"):
        return (response_hashes(resp) % np.uint64(n_folds)).astype(np.int64)


def _give_back(hidden: np.ndarray, codes: np.ndarray, n: int, h: np.ndarray) -> None:
    """Un-hide, for every code (task or annotator) left without training responses, its hidden response with the
    smallest hash ``h`` (ties: the first).  Only those codes' hidden responses are sorted (usually none or few)."""
    train = np.bincount(codes[~hidden], minlength=n)
    cand = np.flatnonzero(hidden & (train[codes] == 0))  # increasing position
    if len(cand):
        cand = cand[np.argsort(h[cand], kind="stable")]  # by hash, ties by position
        _, first = np.unique(codes[cand], return_index=True)
        hidden[cand[first]] = False


def heldout_masks(resp: Responses, n_folds: int = 5, n_splits: int = 1) -> list[np.ndarray]:
    """Boolean masks of the hidden responses of splits 0 … ``n_splits`` − 1 (split b hides fold b)."""
    if not 1 <= int(n_splits) <= int(n_folds):
        raise UserInputError(f"n_splits must be between 1 and n_folds ({n_folds}), got {n_splits}.")
    h = response_hashes(resp)
    with np.errstate(over="ignore"):
        fold = (h % np.uint64(n_folds)).astype(np.int64)
    eligible = (resp.responses_per_item[resp.item] >= 2) & (resp.responses_per_worker[resp.worker] >= 2)
    masks = []
    for b in range(int(n_splits)):
        hidden = eligible & (fold == b)
        _give_back(hidden, resp.item, resp.n_items, h)
        _give_back(hidden, resp.worker, resp.n_workers, h)
        if not hidden.any():
            raise UserInputError(
                "no response can be held out to compare the candidate methods: every task or annotator has a single "
                "response; choose a method directly."
            )
        masks.append(hidden)
    return masks
