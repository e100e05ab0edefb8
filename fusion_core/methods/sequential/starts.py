"""Where Baum–Welch starts (spec ``sequential-networked.md`` §2.3.3–2.3.4).

* ``mm`` (Alg. 2): moment matching on the pooled items, then the transition matrix from lagged moments;
* ``mv`` ('MV + Alg. 1'): the M-step on one-hot majority-vote labels and MV transition counts;
* ``ds`` [OURS]: the M-step on Dawid–Skene posteriors (EM from soft MV) and expected transition counts.

Gold labels (when given) replace the majority vote / are clamped in the Dawid–Skene EM of the starts.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import Gold, initial_posterior
from fusion_core.methods.dawid_skene import expected_counts, fit_em_from, normalize_confusion
from fusion_core.methods.moment_matching import fit_mm, floor_columns
from fusion_core.methods.sequential.inference import SequenceLayout
from fusion_core.methods.sequential.model import HMMState
from fusion_core.methods.sequential.transitions import estimate_transition_mm, lagged_moments
from fusion_core.methods.ties import hard_votes

START_SMOOTHING = 0.01  # pseudo-count of the MV / DS starts' confusion and transition counts


def stationary_or_mean(transition: np.ndarray, posterior: np.ndarray) -> np.ndarray:
    """The stationary distribution of ``transition`` (eigenvector of eigenvalue 1), else the mean posterior."""
    vals, vecs = np.linalg.eig(transition)
    v = np.abs(np.real(vecs[:, np.argmin(np.abs(vals - 1))]))
    if not np.all(np.isfinite(v)) or v.sum() <= 0:
        return posterior.mean(axis=0)
    return v / v.sum()


def mv_start(resp: Responses, layout: SequenceLayout, start_prob: str, gold: Gold | None = None) -> HMMState:
    """MV + Alg. 1 init: Γ⁽⁰⁾ from the M-step on one-hot MV (+0.01), T⁽⁰⁾ from within-sequence MV transition
    counts (+0.01, column-normalised), p0 uniform unless 'stationary' (spec §2.3.4)."""
    k = resp.n_classes
    mv = hard_votes(resp)  # ties: more votes overall, then first in the table (methods.ties)
    if gold is not None and len(gold[0]):
        mv[gold[0]] = gold[1]
    conf = normalize_confusion(expected_counts(resp, np.eye(k)[mv]), START_SMOOTHING)
    prev, nxt = layout.transitions()
    counts = np.bincount(mv[nxt] * k + mv[prev], minlength=k * k).reshape(k, k) + START_SMOOTHING  # [next, prev]
    t0 = counts / counts.sum(axis=0, keepdims=True)
    start = np.full(k, 1.0 / k)
    if start_prob == "stationary":
        vals, vecs = np.linalg.eig(t0)
        start = np.abs(np.real(vecs[:, np.argmin(np.abs(vals - 1))]))
        start = start / start.sum()
    return HMMState(conf, t0, start)


def ds_posterior(resp: Responses, *, tol: float, gold: Gold | None = None) -> np.ndarray:
    """Dawid–Skene posteriors (EM from soft majority vote, as ``ds``; no warning: it only seeds a start)."""
    return fit_em_from(
        resp, initial_posterior(resp, "mv"), tol=tol, max_iter=500, gold=gold, name="Dawid–Skene start", warn=False
    ).posterior


def ds_start(resp: Responses, layout: SequenceLayout, posterior: np.ndarray, start_prob: str) -> HMMState:
    """[OURS] Γ⁽⁰⁾ = M-step (27) on the Dawid–Skene posteriors (+0.01), T⁽⁰⁾ = expected within-sequence
    transition counts Σ q_n q_{n+1}ᵀ (+0.01, column-normalised)."""
    k = resp.n_classes
    q = posterior
    conf = normalize_confusion(expected_counts(resp, q), START_SMOOTHING)
    prev, nxt = layout.transitions()
    counts = q[nxt].T @ q[prev] + START_SMOOTHING  # [next, prev]
    t0 = counts / counts.sum(axis=0, keepdims=True)
    if start_prob == "uniform":
        start = np.full(k, 1.0 / k)
    elif start_prob == "estimate":
        start = q[layout.index[:, 0]].mean(axis=0) + 1e-12
    else:
        start = stationary_or_mean(t0, q)
    return HMMState(conf, t0, start / start.sum())


def mm_start(
    resp: Responses,
    layout: SequenceLayout,
    *,
    start_prob: str,
    lag_pairs: str,
    mm: dict[str, Any],
    gold: Gold | None = None,
) -> tuple[HMMState, dict[str, Any]]:
    """Alg. 2 steps 1–2: moment matching (settings ``mm``) on the pooled items, then T̂ from the lagged moments
    (22)–(23); MV transitions (with a warning) when no annotator pair has enough consecutive items.
    Returns the start and its diagnostics."""
    res = fit_mm(resp, **mm)
    gamma = floor_columns(res.gamma)
    s_tilde, support = lagged_moments(resp, layout)
    k = resp.n_classes
    try:
        t_hat, _, pi_hat = estimate_transition_mm(gamma, s_tilde, support, pairs=lag_pairs)
    except UserInputError:
        warnings.warn(
            "no pair of annotators labelled enough consecutive items to estimate the transition matrix by "
            "moments (22)–(23); starting from majority-vote transition counts instead.",
            AggregationWarning,
            stacklevel=2,
        )
        t_hat = mv_start(resp, layout, start_prob, gold).transition
        pi_hat = res.class_prior
    start = {"stationary": pi_hat, "estimate": pi_hat, "uniform": np.full(k, 1.0 / k)}[start_prob]
    details = {
        "mm_transition": t_hat,
        "mm_fallback": res.fallback,
        "diagonal_dominance": res.dominance,
        "mm_converged": bool(res.converged or res.fallback),
    }
    return HMMState(gamma.transpose(0, 2, 1), t_hat, np.maximum(start, 1e-12)), details
