"""The moment-matching objective g of eq. (17) and its block quadratics (spec ``sequential-networked.md`` §2.2.4).

For fixed π and the other learners, the terms of g containing ``Γ_m`` are ``tr(Γ G Γᵀ) − 2 tr(Γᵀ F) + const``;
for fixed Γ, g is ``πᵀQπ − 2rᵀπ + const``.  [OURS] Learners that share no kept pair/triple have independent
blocks: a greedy colouring of the co-occurrence graph groups them and each colour is assembled as one batch.
Orientation: ``gamma[m]`` is the paper's ``Γ_m[k_resp, k_true]`` (columns are pmfs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fusion_core.methods.moment_matching.moments import Moments


def objective(mom: Moments, gamma: np.ndarray, pi: np.ndarray) -> float:
    """The MM objective g of eq. (17) on the kept moments (unit weights)."""
    g1 = np.einsum("mik,k->mi", gamma, pi)
    val = float(((mom.mu - g1) ** 2)[mom.mu_ok].sum())
    if len(mom.pair):
        a, b = gamma[mom.pair[:, 0]], gamma[mom.pair[:, 1]]
        model = np.einsum("pik,k,pjk->pij", a, pi, b)
        val += float(((mom.S - model) ** 2).sum())
    if len(mom.triple):
        a, b, c = (gamma[mom.triple[:, i]] for i in range(3))
        model = np.einsum("qik,k,qjk,qlk->qijl", a, pi, b, c, optimize=True)
        val += float(((mom.T3 - model) ** 2).sum())
    return val


def block_quadratic(mom: Moments, gamma: np.ndarray, pi: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``(G_m, F_m)``: the terms of (17) containing ``Γ_m`` equal ``tr(Γ G Γᵀ) − 2 tr(Γᵀ F) + const`` (§2.2.4)."""
    k = mom.n_classes
    s_m, s_other, t_m, o1, o2 = mom.blocks(m)
    gram = np.zeros((k, k))
    lin = np.zeros((k, k))
    if mom.mu_ok[m]:
        gram += np.outer(pi, pi)
        lin += np.outer(mom.mu[m], pi)
    pp = np.outer(pi, pi)
    if len(s_other):
        go = gamma[s_other]
        flat = go.reshape(-1, k)
        gram += pp * (flat.T @ flat)
        lin += (s_m.transpose(1, 0, 2).reshape(k, -1) @ flat) * pi[None, :]
    if len(o1):
        g1, g2 = gamma[o1], gamma[o2]
        a1 = np.matmul(g1.transpose(0, 2, 1), g1)
        a2 = np.matmul(g2.transpose(0, 2, 1), g2)
        gram += pp * (a1 * a2).sum(axis=0)
        inner = np.matmul(t_m, g2[:, None, :, :])  # t,i,j,r = Σ_l T[i,j,l] Γc[l,r]
        lin += (inner * g1[:, None, :, :]).sum(axis=(0, 2)) * pi[None, :]
    return gram, lin


def prior_quadratic(mom: Moments, gamma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(Q, r)`` with ``g = πᵀQπ − 2rᵀπ + const`` for fixed Γ (§2.2.4, π block)."""
    gram = np.matmul(gamma.transpose(0, 2, 1), gamma)
    quad = gram[mom.mu_ok].sum(axis=0)
    lin = (gamma[mom.mu_ok] * mom.mu[mom.mu_ok][:, :, None]).sum(axis=(0, 1))
    if len(mom.pair):
        a, b = mom.pair[:, 0], mom.pair[:, 1]
        quad = quad + (gram[a] * gram[b]).sum(axis=0)
        lin = lin + (np.matmul(mom.S, gamma[b]) * gamma[a]).sum(axis=(0, 1))
    if len(mom.triple):
        a, b, c = (mom.triple[:, i] for i in range(3))
        quad = quad + (gram[a] * gram[b] * gram[c]).sum(axis=0)
        inner = np.matmul(mom.T3, gamma[c][:, None, :, :])  # q,i,j,k = Σ_l T[i,j,l] Γc[l,k]
        lin = lin + ((inner * gamma[b][:, None, :, :]).sum(axis=2) * gamma[a]).sum(axis=(0, 1))
    return quad, lin


@dataclass
class ColourPlan:
    """Terms of (17) whose Γ_m block is updated in one batch: the learners of one colour of the
    co-occurrence graph (no two share a kept pair or triple, so their block problems are independent)."""

    members: np.ndarray
    pf: np.ndarray  # kept pairs with the member first
    ps: np.ndarray  # kept pairs with the member second
    q: tuple[np.ndarray, ...]  # kept triples with the member in mode 0, 1, 2
    seg: sp.csr_matrix  # members × (pair and triple terms) indicator for the segment sums


def colour_learners(mom: Moments) -> np.ndarray:
    """Greedy colouring (learner index order) of the graph linking learners that share a kept pair or
    triple; learners of one colour have independent Γ blocks (§2.2.4 block-coordinate descent)."""
    m = mom.n_learners
    e = [mom.pair] + [mom.triple[:, list(c)] for c in ((0, 1), (0, 2), (1, 2))]
    ab = np.concatenate(e) if len(mom.triple) or len(mom.pair) else np.zeros((0, 2), dtype=np.int64)
    adj = sp.csr_matrix((np.ones(2 * len(ab)), (np.r_[ab[:, 0], ab[:, 1]], np.r_[ab[:, 1], ab[:, 0]])), shape=(m, m))
    colour = np.full(m, -1, dtype=np.int64)
    for v in range(m):  # greedy colouring: inherently sequential over learners (not responses)
        used = colour[adj.indices[adj.indptr[v] : adj.indptr[v + 1]]]
        used = used[used >= 0]
        mark = np.zeros(len(used) + 1, dtype=bool)
        mark[used[used <= len(used)]] = True
        colour[v] = int(np.argmin(mark))
    return colour


def colour_plans(mom: Moments) -> list[ColourPlan]:
    """One :class:`ColourPlan` per colour of :func:`colour_learners` (cached on ``mom``)."""
    if "plans" in mom.cache:
        return list(mom.cache["plans"])
    colour = colour_learners(mom)
    plans = []
    for c in range(int(colour.max()) + 1 if len(colour) else 0):
        members = np.flatnonzero(colour == c)
        local = np.full(mom.n_learners, -1, dtype=np.int64)
        local[members] = np.arange(len(members))
        pf = np.flatnonzero(local[mom.pair[:, 0]] >= 0)
        ps = np.flatnonzero(local[mom.pair[:, 1]] >= 0)
        q = tuple(np.flatnonzero(local[mom.triple[:, j]] >= 0) for j in range(3))
        tgt = np.concatenate(
            [local[mom.pair[pf, 0]], local[mom.pair[ps, 1]]] + [local[mom.triple[q[j], j]] for j in range(3)]
        )
        seg = sp.csr_matrix((np.ones(len(tgt)), (tgt, np.arange(len(tgt)))), shape=(len(members), len(tgt)))
        plans.append(ColourPlan(members, pf, ps, q, seg))
    mom.cache["plans"] = plans
    return plans


def _triple_terms(
    mom: Moments, gamma: np.ndarray, gram_all: np.ndarray, plan: ColourPlan
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per kept triple of the plan's members: its Gram factor and its linear term (member's mode first)."""
    k = mom.n_classes
    grams, lins = [], []
    for mode, q in enumerate(plan.q):
        if not len(q):
            continue
        t3 = mom.T3[q]
        ia, ib, ic = (mom.triple[q, j] for j in range(3))
        ga, gb, gc = gamma[ia], gamma[ib], gamma[ic]
        if mode == 0:  # Σ_jl T[i,j,l] Γb[j,r] Γc[l,r]
            grams.append(gram_all[ib] * gram_all[ic])
            lins.append((np.matmul(t3, gc[:, None]) * gb[:, None]).sum(axis=2))
        elif mode == 1:  # Σ_il T[i,j,l] Γa[i,r] Γc[l,r]
            grams.append(gram_all[ia] * gram_all[ic])
            lins.append((np.matmul(t3, gc[:, None]) * ga[:, :, None, :]).sum(axis=1))
        else:  # Σ_ij T[i,j,l] Γa[i,r] Γb[j,r]
            grams.append(gram_all[ia] * gram_all[ib])
            tj = np.matmul(t3.transpose(0, 2, 3, 1).reshape(len(q), k * k, k), ga).reshape(len(q), k, k, k)
            lins.append((tj * gb[:, :, None, :]).sum(axis=1))
    return grams, lins


def block_quadratics(
    mom: Moments, gamma: np.ndarray, pi: np.ndarray, plan: ColourPlan, gram_all: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`block_quadratic` for all learners of one colour at once: ``(G, F)`` stacks (B×K×K).
    ``gram_all`` (optional): the current ``Γ_mᵀ Γ_m`` of every learner."""
    k = mom.n_classes
    if gram_all is None:
        gram_all = np.matmul(gamma.transpose(0, 2, 1), gamma)
    mem = plan.members
    pp = np.outer(pi, pi)
    ok = mom.mu_ok[mem]
    gram = np.where(ok[:, None, None], pp, 0.0)
    lin = np.where(ok[:, None, None], mom.mu[mem][:, :, None] * pi[None, None, :], 0.0)
    grams, lins = [], []
    if len(plan.pf) or len(plan.ps):
        other = mom.pair[plan.pf, 1]
        grams.append(gram_all[other])
        lins.append(np.matmul(mom.S[plan.pf], gamma[other]))
        other = mom.pair[plan.ps, 0]
        grams.append(gram_all[other])
        lins.append(np.matmul(mom.S[plan.ps].transpose(0, 2, 1), gamma[other]))
    tg, tl = _triple_terms(mom, gamma, gram_all, plan)
    grams += tg
    lins += tl
    if grams:
        gram = gram + pp * (plan.seg @ np.concatenate(grams).reshape(-1, k * k)).reshape(-1, k, k)
        lin = lin + (plan.seg @ np.concatenate(lins).reshape(-1, k * k)).reshape(-1, k, k) * pi[None, None, :]
    return gram, lin
