"""Value of information of extra responses under a fitted confusion model (the arithmetic of :mod:`.plan`).

Under a Dawid–Skene-type model (Dawid & Skene 1979) an item with posterior ``q`` (K classes) that gets responses
from annotators ``s = 1..m`` with confusion matrices ``Γ_s`` (true × reported) has, for each joint outcome
``o = (l_1, …, l_m)``, the unnormalised joint ``J[k, o] = q_k Π_s Γ_s[k, l_s]``; the posterior after the outcome
is ``J[:, o] / Σ_k J[k, o]`` and the outcome's probability ``Σ_k J[k, o]``.  The expected probability that the
label (the posterior argmax) is right after the responses is therefore

    E[max_k q'_k] = Σ_o P(o) max_k q'_k(o) = Σ_o max_k J[k, o],

and the value of information (expected gain in label accuracy) is that minus ``max_k q_k`` (Howard 1966; the
myopic knowledge-gradient of Frazier et al. 2008 with the 0–1 reward).  It is ≥ 0 (Jensen) and 0 when the item is
certain.  One response can leave it at exactly 0 although two would help (an item at 0.8 asking a 0.8-accurate
annotator: a dissent only brings it back to a tie); :func:`pair_gain` looks one step further.
"""

from __future__ import annotations

import numpy as np

#: elements of the largest temporary array built at once (items × candidates × K × K … chunks)
CHUNK_ELEMENTS = 4_000_000


def expected_accuracy(joint: np.ndarray) -> float:
    """``Σ_o max_k J[k, o]`` of one item's joint table ``J`` (K × outcomes)."""
    return float(joint.max(axis=0).sum())


def gain_variance(joint: np.ndarray) -> float:
    """Variance, under the model, of the change in correctness ``Δ ∈ {−1, 0, 1}`` of an item's label (its argmax)
    after the responses of its joint table ``J`` (K × outcomes): with ``b`` the current label (argmax of the row
    sums, the posterior) and ``a(o)`` the label after outcome ``o``, ``Δ = ±1`` only when ``a(o) ≠ b`` and the
    truth is ``a(o)`` or ``b``, so ``E[Δ²] = Σ_{o: a(o)≠b} (J[a(o), o] + J[b, o])`` and the variance is
    ``E[Δ²] − (Σ_o max_k J[k, o] − Σ_o J[b, o])²``.  Items are independent under the model, so the variance of
    the accuracy gain of a plan is the sum over its items divided by n²."""
    b = int(np.argmax(joint.sum(axis=1)))
    a = np.argmax(joint, axis=0)
    cols = np.arange(joint.shape[1])
    top, cur = joint[a, cols], joint[b]
    moved = a != b
    mean = float(top.sum() - cur.sum())
    return max(0.0, float((top[moved] + cur[moved]).sum()) - mean * mean)


def extend(joint: np.ndarray, confusion: np.ndarray) -> np.ndarray:
    """The joint table after one more response from an annotator with ``confusion`` (K × K): K × (O·K)."""
    k = joint.shape[0]
    return (joint[:, :, None] * confusion[:, None, :]).reshape(k, -1)


def candidate_gain(joint: np.ndarray, confusions: np.ndarray, repeat: int = 1) -> np.ndarray:
    """Expected accuracy after ``repeat`` more responses from each candidate (C × K × K confusions; ``repeat`` 2
    = two annotators like the candidate), minus the current one, for one item's joint table (K × O): shape (C,)."""
    now = expected_accuracy(joint)
    g = confusions  # C × K × L
    t = joint[None, :, :, None] * g[:, :, None, :]  # C × K × O × L
    if repeat == 2:
        t = t[..., None] * g[:, :, None, None, :]  # C × K × O × L × L
    c = len(confusions)
    return np.asarray(t.reshape(c, joint.shape[0], -1).max(axis=1).sum(axis=1) - now)


def candidate_score(joint: np.ndarray, confusions: np.ndarray, lookahead: bool, offset: float = 0.0) -> np.ndarray:
    """:func:`candidate_gain`, or with ``lookahead`` the larger of it and half the two-response gain, sharing the
    one-response table (the plan's per-item score); ``offset`` is added to both gains before the halving (the
    plan's credit for correcting a label its model doubts)."""
    now = expected_accuracy(joint)
    c, k = len(confusions), joint.shape[0]
    t = joint[None, :, :, None] * confusions[:, :, None, :]  # C × K × O × L
    g = t.reshape(c, k, -1).max(axis=1).sum(axis=1) - now + offset
    if lookahead:
        t2 = t[..., None] * confusions[:, :, None, None, :]
        g = np.maximum(g, (t2.reshape(c, k, -1).max(axis=1).sum(axis=1) - now + offset) / 2)
    return np.asarray(g)


def initial_gains(posterior: np.ndarray, confusions: np.ndarray, repeat: int = 1) -> np.ndarray:
    """:func:`candidate_gain` for every item with nothing planned yet (its joint table is its posterior):
    items × candidates, computed in chunks of items so no temporary exceeds :data:`CHUNK_ELEMENTS`."""
    n, k = posterior.shape
    c = len(confusions)
    out = np.empty((n, c))
    per_item = max(1, c * k ** (1 + repeat))
    step = max(1, CHUNK_ELEMENTS // per_item)
    now = posterior.max(axis=1)
    for a in range(0, n, step):
        q = posterior[a : a + step]
        t = q[:, None, :, None] * confusions[None, :, :, :]  # I × C × K × L
        if repeat == 2:
            t = t[..., None] * confusions[None, :, :, None, :]  # I × C × K × L × L
        t = t.reshape(len(q), c, k, -1)
        out[a : a + step] = t.max(axis=2).sum(axis=2) - now[a : a + step, None]
    return np.maximum(out, 0.0)


def decided_accuracy(
    posterior: np.ndarray,
    decider: np.ndarray,
    confusions: np.ndarray,
    decider_confusions: np.ndarray,
    repeat: int = 1,
) -> np.ndarray:
    """Expected accuracy, under ``posterior`` and ``confusions``, of the label another model decides after
    ``repeat`` responses from each candidate: for each outcome ``o`` the label is ``a(o) = argmax_k D[k, o]`` of
    the decider's joint (its ``decider`` posterior and ``decider_confusions``), and the expected accuracy is
    ``Σ_o J[a(o), o]`` of the believed joint ``J`` (:func:`initial_gains`' tables; equal to it when the two models
    agree).  The plan believes its own model but the labels after the refit are the fit's.  Items × candidates,
    chunked as :func:`initial_gains`."""
    n, k = posterior.shape
    c = len(confusions)
    out = np.empty((n, c))
    step = max(1, CHUNK_ELEMENTS // max(1, 2 * c * k ** (1 + repeat)))
    for a in range(0, n, step):
        q, d = posterior[a : a + step], decider[a : a + step]
        t = q[:, None, :, None] * confusions[None, :, :, :]  # I × C × K × L
        u = d[:, None, :, None] * decider_confusions[None, :, :, :]
        if repeat == 2:
            t = t[..., None] * confusions[None, :, :, None, :]
            u = u[..., None] * decider_confusions[None, :, :, None, :]
        t = t.reshape(len(q), c, k, -1)
        u = u.reshape(len(q), c, k, -1)
        pick = np.argmax(u, axis=2)[:, :, None, :]
        out[a : a + step] = np.take_along_axis(t, pick, axis=2)[:, :, 0, :].sum(axis=2)
    return out


def pair_gain(posterior_row: np.ndarray, first: np.ndarray, second: np.ndarray) -> float:
    """Expected gain of two responses, from annotators with confusions ``first`` and ``second``."""
    joint = extend(extend(posterior_row[:, None], first), second)
    return expected_accuracy(joint) - float(posterior_row.max())


__all__ = [
    "CHUNK_ELEMENTS",
    "candidate_gain",
    "candidate_score",
    "decided_accuracy",
    "expected_accuracy",
    "extend",
    "gain_variance",
    "initial_gains",
    "pair_gain",
]
