"""The transition matrix by moments (Alg. 2, eqs. (20)–(23) of Traganitis & Giannakis; spec §2.3.3).

Lagged moments pair learner m at time n (row) with learner m' at time n−1 (column), never across sequence
boundaries (pitfall P2); ``A = T diag(π)`` is then fitted by a QP over the K²-simplex.
"""

from __future__ import annotations

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.methods.moment_matching import qp_simplex
from fusion_core.methods.sequential.inference import SequenceLayout

LAG_PAIRS = ("upper", "distinct", "all")


def lagged_moments(resp: Responses, layout: SequenceLayout) -> tuple[np.ndarray, np.ndarray]:
    """Sample lagged cross-moments (21): ``S~[m, m'] = mean over consecutive pairs (n−1, n) of
    e_{f_m(x_n)} e_{f_m'(x_{n−1})}ᵀ`` — learner m at time n is the ROW (P2).  Each pair (m, m') is
    normalised by its own support (the transitions where both answered); returns ``(S~ (M×M×K×K), support (M×M))``."""
    m_count, k = resp.n_workers, resp.n_classes
    prev, nxt = layout.transitions()
    order = np.argsort(resp.item, kind="stable")
    starts = np.r_[0, np.cumsum(resp.responses_per_item)]
    cn, cp = resp.responses_per_item[nxt], resp.responses_per_item[prev]
    tot = cn * cp
    rep = np.repeat(np.arange(len(nxt)), tot)
    off = np.arange(int(tot.sum())) - np.repeat(np.cumsum(tot) - tot, tot)
    r_next = order[starts[nxt[rep]] + off // cp[rep]]
    r_prev = order[starts[prev[rep]] + off % cp[rep]]
    pair = resp.worker[r_next] * m_count + resp.worker[r_prev]
    code = pair * k * k + resp.label[r_next] * k + resp.label[r_prev]
    acc = np.bincount(code, minlength=m_count * m_count * k * k).reshape(m_count, m_count, k, k).astype(float)
    support = np.bincount(pair, minlength=m_count * m_count).reshape(m_count, m_count).astype(float)
    s_tilde = acc / np.maximum(support, 1)[:, :, None, None]
    return s_tilde, support


def estimate_transition_mm(
    gamma: np.ndarray,
    s_tilde: np.ndarray,
    support: np.ndarray,
    *,
    pairs: str = "upper",
    min_support: int | None = None,
    n_iter: int = 2000,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eqs. (22)–(23): ``min_{A ∈ C_S} Σ ||S~_mm' − Γ_m A Γ_m'ᵀ||²`` then ``T = A diag(π)^{-1}``, ``π = 1ᵀA``.

    ``gamma`` is the paper's ``Γ_m[resp, true]``.  ``pairs``: 'upper' (m < m', the paper), 'distinct'
    (m ≠ m') or 'all' (also m = m').  Pairs with support below ``min_support`` (default max(20, K²)) are
    dropped; none left → :class:`UserInputError`.  Solved as a QP over the K²-simplex.
    Returns ``(T_hat, A_hat, pi_hat)``; columns of T_hat with ``π_k = 0`` are uniform.
    """
    m_count, k, _ = gamma.shape
    ms = max(20, k * k) if min_support is None else min_support
    mi, mj = np.meshgrid(np.arange(m_count), np.arange(m_count), indexing="ij")
    masks = {"upper": mi < mj, "distinct": mi != mj, "all": np.ones_like(mi, dtype=bool)}
    if pairs not in masks:
        raise ValueError(f"lag pairs must be one of {LAG_PAIRS}, got {pairs!r}")
    sel = masks[pairs] & (support >= ms)
    a_idx, b_idx = mi[sel], mj[sel]
    if len(a_idx) == 0:
        raise UserInputError(
            "no pair of annotators labelled enough consecutive items to estimate the transition matrix "
            "by moments; use method 'hmm-mv'."
        )
    gram = np.einsum("mik,mil->mkl", gamma, gamma)
    # column-major vec: vec(Γ_a A Γ_bᵀ) = (Γ_b ⊗ Γ_a) vec(A)
    quad = np.einsum("pjl,pik->jilk", gram[b_idx], gram[a_idx]).reshape(k * k, k * k)
    lin = np.einsum("pia,pij,pjb->ab", gamma[a_idx], s_tilde[sel], gamma[b_idx]).reshape(-1, order="F")
    a_vec = qp_simplex(quad, lin, np.full(k * k, 1.0 / (k * k)), n_iter)
    a_hat = np.maximum(a_vec.reshape(k, k, order="F"), 0.0)
    a_hat /= a_hat.sum()
    pi_hat = a_hat.sum(axis=0)
    t_hat = np.where(pi_hat[None, :] > 0, a_hat / np.where(pi_hat > 0, pi_hat, 1)[None, :], 1.0 / k)
    return t_hat, a_hat, pi_hat
