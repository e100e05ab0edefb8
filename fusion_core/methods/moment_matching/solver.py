"""Alg. A2 (spec ``sequential-networked.md`` §2.2.4–2.2.5): block-coordinate descent on the moment objective
(17), majority-vote start, random restarts and the As2 permutation fix.

Each ``Γ_m`` block and the ``π`` block is a convex QP over a simplex-type set, solved exactly
(:mod:`~fusion_core.methods.moment_matching.qp`).  [OURS] The learners of one colour of the co-occurrence graph
are updated as one batch (a sequential sweep in colour order, so the descent is unchanged), and a projected
extrapolation step, kept only when it lowers g, roughly halves the sweeps.  Annotators with no kept pair or
triple are not identified by the moments; an :class:`~fusion_core.errors.AggregationWarning` says how many.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from fusion_core.errors import AggregationWarning, ConvergenceWarning
from fusion_core.methods.moment_matching.blocks import block_quadratics, colour_plans, objective, prior_quadratic
from fusion_core.methods.moment_matching.moments import (
    LabelEntries,
    Moments,
    as_entries,
    compute_moments,
    moment_terms,
)
from fusion_core.methods.moment_matching.qp import project_simplex_columns, qp_columns_batch, qp_simplex
from fusion_core.methods.ties import argmax_ties


@dataclass
class MMResult:
    """A moment-matching fit: ``gamma`` (M × K_resp × K_true, paper orientation, permutation-fixed, not
    floored), ``class_prior``, the objective trace g, sweeps, convergence, the moments, whether it fell back to
    the majority-vote start, and per learner the As2 diagonal dominance."""

    gamma: np.ndarray
    class_prior: np.ndarray
    objective: list[float]
    n_iter: int
    converged: bool
    moments: Moments
    fallback: bool = False
    dominance: np.ndarray | None = None


def mv_init(
    F: np.ndarray | LabelEntries,
    n_classes: int,
    weights: np.ndarray | None = None,
    smoothing: float = 0.01,
    rank: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Γ⁽⁰⁾ from the M-step (11) on one-hot MV labels plus smoothing, π⁽⁰⁾ = MV label frequencies (§2.2.5).

    MV ties go to the tied class of lowest ``rank`` (:func:`fusion_core.methods.ties.class_priority`, so renaming
    the labels cannot change the start), or to the lowest class index without one.  Returns ``(Γ⁽⁰⁾, π⁽⁰⁾, MV
    labels)``.
    """
    e = as_entries(F)
    m_count, n = e.shape
    k = n_classes
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    mm, nn, lab = e.learner, e.item, e.label
    votes = np.bincount(nn * k + lab, minlength=n * k).reshape(n, k)
    mv = np.argmax(votes, axis=1) if rank is None else argmax_ties(votes, rank)
    has = votes.sum(axis=1) > 0
    codes = (mm * k + lab) * k + mv[nn]
    counts = np.bincount(codes, weights=w[nn] * has[nn], minlength=m_count * k * k).reshape(m_count, k, k) + smoothing
    gamma = counts / counts.sum(axis=1, keepdims=True)
    pi = np.bincount(mv[has], weights=w[has], minlength=k) + 1e-12
    return gamma, pi / pi.sum(), mv


def fix_permutation_as2(
    gamma: np.ndarray, pi: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """As2 fix (§2.2.5): the column permutation maximising the diagonal mass of ``Σ_m Γ_m``.

    Returns ``(Γ P, Pᵀ π, perm)`` with ``new column i = old column perm[i]``.
    """
    total = gamma.sum(axis=0)
    from scipy.optimize import linear_sum_assignment  # lazy: scipy.optimize costs 0.2 s of start-up

    rows, cols = linear_sum_assignment(-total)
    perm = np.empty(gamma.shape[-1], dtype=np.int64)
    perm[rows] = cols
    return gamma[:, :, perm], (None if pi is None else pi[perm]), perm


def diagonal_dominance(gamma: np.ndarray) -> np.ndarray:
    """Per learner: fraction of columns whose diagonal entry is the column's largest (As2)."""
    k = gamma.shape[-1]
    diag = gamma[:, np.arange(k), np.arange(k)]
    return (diag >= gamma.max(axis=1) - 1e-12).mean(axis=1)


def pair_residuals(mom: Moments, gamma: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """As1 diagnostic (pitfall P4): per annotator, the largest Frobenius residual ``||S_mm' − Γ_m Π Γ_m'ᵀ||_F``
    over its kept pairs (NaN without pairs).  Near 0 when As1 holds and the moments are exact; copying or
    shared errors raise it — the fit spreads the misfit, so it flags a violation more reliably than its pair."""
    out = np.full(mom.n_learners, -np.inf)
    if not len(mom.pair):
        return np.full(mom.n_learners, np.nan)
    a, b = mom.pair[:, 0], mom.pair[:, 1]
    model = np.einsum("pik,k,pjk->pij", gamma[a], pi, gamma[b])
    res = np.sqrt(((mom.S - model) ** 2).sum(axis=(1, 2)))
    np.maximum.at(out, a, res)
    np.maximum.at(out, b, res)
    return np.where(np.isfinite(out), out, np.nan)


def _prior_value(mom: Moments, gamma: np.ndarray, pi: np.ndarray) -> float:
    """``πᵀQπ − 2rᵀπ``: g minus a data-only constant (§2.2.4)."""
    quad, lin = prior_quadratic(mom, gamma)
    return float(pi @ quad @ pi - 2 * lin @ pi)


def _sweep(
    mom: Moments, gamma: np.ndarray, pi: np.ndarray, gram_all: np.ndarray, *, inner_iter: int, prox: float
) -> tuple[np.ndarray, float]:
    """One block-coordinate sweep: every colour's Γ blocks (in place, with ``gram_all``), then π.
    Returns ``(π, πᵀQπ − 2rᵀπ)``."""
    k = mom.n_classes
    for plan in colour_plans(mom):  # one colour = a batch of independent Γ_m blocks
        gram, lin = block_quadratics(mom, gamma, pi, plan, gram_all)
        live = np.any(gram.reshape(len(gram), -1) != 0, axis=1)
        idx = plan.members[live]
        if not len(idx):
            continue
        # proximal term ρ||Γ − Γ_prev||² (ρ tiny): unique block solutions when a learner's moments do not
        # identify its Γ (e.g. only first-order support); directions the data fix are unaffected.
        rho = prox * np.trace(gram[live], axis1=1, axis2=2) / k
        gram = gram[live] + rho[:, None, None] * np.eye(k)
        lin = lin[live] + rho[:, None, None] * gamma[idx]
        gamma[idx] = qp_columns_batch(gram, lin, gamma[idx], inner_iter)
        gram_all[idx] = np.matmul(gamma[idx].transpose(0, 2, 1), gamma[idx])
    quad, lin = prior_quadratic(mom, gamma)
    pi = qp_simplex(quad, lin, pi, inner_iter)
    return pi, float(pi @ quad @ pi - 2 * lin @ pi)


def solve_moments(
    mom: Moments,
    gamma0: np.ndarray,
    pi0: np.ndarray,
    *,
    max_iter: int = 500,
    tol: float = 1e-7,
    obj_tol: float = 1e-9,
    inner_iter: int = 50,
    prox: float = 1e-6,
    extrapolate: bool = True,
) -> tuple[np.ndarray, np.ndarray, list[float], int, bool]:
    """Block-coordinate descent on (17): Γ_1..Γ_M then π per sweep (§2.2.4), one colour of learners at a time.

    [OURS] ``extrapolate``: after each sweep try the projected step ``x + β (x − x_prev)`` on (Γ, π), as
    the line search of alternating least squares for CP models; it is kept only when it lowers g, so the
    descent stays monotone (β grows ×1.5 up to 20 on success, halves down to 1 on failure).

    Stops when ``max|ΔΓ| < tol`` or the relative change of ``πᵀQπ − 2rᵀπ`` (g minus a data constant) is
    below ``obj_tol`` (§2.2.5).  Returns ``(Γ, π, trace of g, sweeps, converged)``.
    """
    gamma = np.array(gamma0, dtype=float)
    pi = np.array(pi0, dtype=float)
    trace = [objective(mom, gamma, pi)]
    monitor = [_prior_value(mom, gamma, pi)]
    const = trace[0] - monitor[0]
    converged = False
    it = 0
    gram_all = np.matmul(gamma.transpose(0, 2, 1), gamma)  # Γ_mᵀ Γ_m, refreshed after each colour
    beta = 1.0
    for it in range(1, max_iter + 1):
        old, old_pi = gamma.copy(), pi.copy()
        pi, mon = _sweep(mom, gamma, pi, gram_all, inner_iter=inner_iter, prox=prox)
        if extrapolate and it >= 3:
            g_try = project_simplex_columns((gamma + beta * (gamma - old)).transpose(1, 0, 2)).transpose(1, 0, 2)
            p_try = project_simplex_columns((pi + beta * (pi - old_pi))[:, None])[:, 0]
            mon_try = _prior_value(mom, g_try, p_try)
            if mon_try < mon:
                gamma, pi, mon = g_try, p_try, mon_try
                gram_all = np.matmul(gamma.transpose(0, 2, 1), gamma)
                beta = min(1.5 * beta, 20.0)
            else:
                beta = max(1.0, beta / 2)
        monitor.append(mon)
        trace.append(monitor[-1] + const)
        delta = float(np.abs(gamma - old).max())
        rel = abs(monitor[-2] - monitor[-1]) / max(abs(monitor[-2]), 1e-300)
        if delta < tol or (rel < obj_tol and trace[-1] > 1e-20 * const):
            converged = True
            break
    return gamma, pi, trace, it, converged


def _warn_unidentified(mom: Moments) -> None:
    lone = mom.mu_ok & (moment_terms(mom) == 0)
    if lone.any():
        warnings.warn(
            f"moment matching: {int(lone.sum())} of {int(mom.mu_ok.sum())} annotators share no pair with at least "
            f"{mom.min_pair_support} (nor a triple with {mom.min_triple_support}) co-labelled items; the moments do not "
            "identify their confusion matrices, which are only fitted to their own label frequencies starting from "
            "the majority-vote estimate (spec §2.2.6).",
            AggregationWarning,
            stacklevel=3,
        )


def _warn_fit_quality(dom: np.ndarray, trace: list[float], converged: bool, max_iter: int) -> None:
    if (dom >= 0.5).mean() < 0.5:
        warnings.warn(
            f"only {(dom >= 0.5).mean():.0%} of annotators have a dominant diagonal in most classes after the As2 "
            "permutation fix; the label permutation may be wrong (As2 assumes most annotators beat random guessing).",
            AggregationWarning,
            stacklevel=3,
        )
    last_rel = abs(trace[-2] - trace[-1]) / max(abs(trace[-2]), 1e-300) if len(trace) > 1 else 0.0
    if not converged and last_rel > 1e-7:  # a slow linear tail (ΔΓ still > tol, g settled) is not worth a warning
        warnings.warn(
            f"moment matching did not converge in {max_iter} sweeps (last relative change of the objective "
            f"{last_rel:.1e}); raise max_iter.",
            ConvergenceWarning,
            stacklevel=3,
        )


def moment_matching(
    F: np.ndarray | LabelEntries,
    n_classes: int,
    *,
    weights: np.ndarray | None = None,
    moments: Moments | None = None,
    n_restarts: int = 0,
    max_iter: int = 500,
    tol: float = 1e-7,
    inner_iter: int = 50,
    min_pair_support: int | None = None,
    min_triple_support: int | None = None,
    random_state: int | None = 0,
    rank: np.ndarray | None = None,
) -> MMResult:
    """Alg. A2 (spec §2.2): MV-initialised block-coordinate MM plus ``n_restarts`` random simplex
    restarts (columns ~ Dirichlet(1)); keeps the lowest g, then applies the As2 permutation fix.

    Falls back to the MV initialisation (with an :class:`AggregationWarning`) when no learner triple
    has enough support (e.g. K = 2 with M < 3, or very sparse data; spec P15, §2.2.6).  ``rank``: the tie
    priority of the majority-vote start (see :func:`mv_init`).
    """
    F = as_entries(F)
    k = int(n_classes)
    mom = moments or compute_moments(
        F, k, weights=weights, min_pair_support=min_pair_support, min_triple_support=min_triple_support
    )
    if F.size:
        g0, p0, _ = mv_init(F, k, weights, rank=rank)
    else:
        g0, p0 = np.full((mom.n_learners, k, k), 1.0 / k), np.full(k, 1 / k)
    if len(mom.triple) == 0:
        warnings.warn(
            "moment matching: no learner triple has enough co-labelled items, so the model is not identifiable "
            "from moments; falling back to the majority-vote initialisation.",
            AggregationWarning,
            stacklevel=2,
        )
        gamma, _, perm = fix_permutation_as2(g0)
        return MMResult(gamma, p0[perm], [], 0, False, mom, fallback=True, dominance=diagonal_dominance(gamma))
    _warn_unidentified(mom)
    rng = np.random.default_rng(random_state)
    best: tuple[np.ndarray, np.ndarray, list[float], int, bool] = solve_moments(
        mom, g0, p0, max_iter=max_iter, tol=tol, inner_iter=inner_iter
    )
    for _ in range(int(n_restarts)):
        gi = rng.dirichlet(np.ones(k), size=(mom.n_learners, k)).transpose(0, 2, 1)
        pi_i = rng.dirichlet(np.ones(k))
        out = solve_moments(mom, gi, pi_i, max_iter=max_iter, tol=tol, inner_iter=inner_iter)
        if out[2][-1] < best[2][-1]:
            best = out
    gamma, pi_best, trace, n_iter, converged = best
    gamma, _, perm = fix_permutation_as2(gamma)
    dom = diagonal_dominance(gamma)
    _warn_fit_quality(dom, trace, converged, max_iter)
    return MMResult(gamma, pi_best[perm], trace, n_iter, converged, mom, dominance=dom)
