"""One tie rule for every method (issue 11): exact ties never go to the lowest internal class code.

Class codes follow the natural order of the label texts, so a tie broken towards code 0 changes when the labels
are renamed.  Every hard decision between tied classes — a hard label from a posterior, a hard majority vote that
starts an estimator — uses instead a *class priority* computed from the data: the class with more responses
(weighted votes) over the whole table first, then the class that appears first in the table (the user's own
order).  Renaming the labels permutes both keys with the classes, so it never changes a decision; reordering the
rows can change only decisions that are tied on both the item and the whole-table counts.
"""

from __future__ import annotations

import weakref

import numpy as np

from fusion_core.data.responses import Responses

#: posterior entries this close to an item's maximum count as tied (far above floating-point noise of sums taken
#: in another class order, far below any difference a model resolves)
TIE_TOL = 1e-9


def class_priority(resp: Responses) -> np.ndarray:
    """Rank of every class for breaking ties (0 = preferred): more responses over the whole table first (weighted
    by the response weights when present), then earlier first appearance among the rows; classes nobody used come
    last, in code order (the declared order).  A rank :func:`remember_class_priority` was given is not recomputed."""
    known = _RANKS.get(resp)
    if known is not None:
        return known.copy()
    keys = _KEYS[resp] = class_votes(resp)
    return priority_rank(*keys)


_RANKS: weakref.WeakKeyDictionary[Responses, np.ndarray] = weakref.WeakKeyDictionary()

#: the keys :func:`class_priority` computed, while ``resp`` lives (an incremental update starts from them)
_KEYS: weakref.WeakKeyDictionary[Responses, tuple[np.ndarray, np.ndarray]] = weakref.WeakKeyDictionary()


def class_keys(resp: Responses) -> tuple[np.ndarray, np.ndarray]:
    """:func:`class_votes` of ``resp``, without a pass when :func:`class_priority` has computed them (every fit
    does, for its fitted labels)."""
    got = _KEYS.get(resp)
    return got if got is not None else class_votes(resp)


def remember_class_priority(resp: Responses, votes: np.ndarray, first: np.ndarray) -> None:
    """Keep the rank of ``resp`` made from its keys (:func:`class_votes`) computed elsewhere — the incremental update
    adds a batch's keys to the earlier ones — so :func:`class_priority` needs no pass over the responses."""
    _RANKS[resp] = priority_rank(votes, first)


def class_votes(resp: Responses, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The two keys of :func:`class_priority` over the rows from ``start`` on: (weighted) responses per class and
    the row of each class's first appearance (``resp.n_responses`` for a class not used there)."""
    k = resp.n_classes
    label = resp.label[start:]
    weight = None if resp.weight is None else resp.weight[start:]
    votes = np.bincount(label, weights=weight, minlength=k)[:k].astype(float)
    first = np.full(k, resp.n_responses, dtype=np.int64)
    if k <= 64:  # one vectorised pass per class (np.minimum.at over every response is 10× slower)
        for j in np.flatnonzero(votes > 0) if weight is None else range(k):
            hit = label == j
            at = int(np.argmax(hit))
            if hit[at]:
                first[j] = start + at
    else:
        np.minimum.at(first, label, np.arange(start, resp.n_responses))
    return votes, first


def priority_rank(votes: np.ndarray, first: np.ndarray) -> np.ndarray:
    """:func:`class_priority` from its two keys (:func:`class_votes`)."""
    k = len(votes)
    order = np.lexsort((np.arange(k), first, -votes))
    rank = np.empty(k, dtype=np.int64)
    rank[order] = np.arange(k)
    return rank


def argmax_ties(scores: np.ndarray, rank: np.ndarray, tol: float = TIE_TOL) -> np.ndarray:
    """Row-wise argmax of ``scores`` (items × classes) whose exact ties (within ``tol`` of the row maximum) go to the
    tied class of lowest ``rank`` (:func:`class_priority`)."""
    scores = np.asarray(scores, dtype=float)
    n, k = scores.shape
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if k == 0:
        return np.zeros(n, dtype=np.int64)
    cols = [scores[:, j] for j in range(k)]  # one pass per class: numpy reduces a short last axis ~10× slower
    floor = cols[0].copy()
    for col in cols[1:]:
        np.maximum(floor, col, out=floor)
    floor -= tol
    out = np.full(n, -1, dtype=np.int64)
    open_ = np.ones(n, dtype=bool)  # rows whose class is not chosen yet
    tied = np.empty(n, dtype=bool)
    for j in np.argsort(rank, kind="stable"):  # classes in priority order: the first tied one wins
        np.greater_equal(cols[j], floor, out=tied)
        tied &= open_
        out[tied] = j
        open_ &= ~tied
    out[open_] = 0  # no class within tol of the maximum (a NaN row): class 0, as argmax of an all -inf row
    return out


def hard_votes(resp: Responses, weights: np.ndarray | None = None) -> np.ndarray:
    """Hard majority vote per item with the data tie rule (items without responses: the top-priority class)."""
    return argmax_ties(resp.vote_counts(weights), class_priority(resp))
