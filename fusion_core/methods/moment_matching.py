"""Moment matching (MM) for i.i.d. multiclass data, and Dawid–Skene EM initialised from it.

Spec ``sequential-networked.md`` §2.2 (paper: Traganitis & Giannakis §3.2, eq. (17); solver [OURS]).

* Sample moments with missing responses (§2.2.6): ``mu_m`` over the items learner m labelled,
  ``S_mm'`` over the items both labelled, ``T_mm'm''`` over the items all three labelled; pairs and
  triples with too little support are dropped.  Only co-occurring learners are ever touched: pairs
  come from sparse products of the response indicators, triples are enumerated per item
  (``Σ_n C(|obs_n|, 3)`` work, in bounded chunks), never as an ``M²``/``M³`` loop over learners.
* Block-coordinate solver (§2.2.4): each ``Γ_m`` block and the ``π`` block is a convex QP over a
  simplex-type set, solved exactly: equality-constrained closed form when it is non-negative, else an
  active-set KKT solve (FISTA with column-wise simplex projection as the last resort).
  [OURS] Learners that share no kept pair/triple have independent blocks; a greedy colouring of the
  co-occurrence graph groups them, and each colour is updated as one batch (a sequential sweep in colour
  order, so the descent is unchanged; sparse crowds of ~800 annotators need ~30 batches per sweep),
  and a projected extrapolation step, kept only when it lowers g, roughly halves the sweeps.
* Annotators with no kept pair or triple are not identified by the moments; an AggregationWarning
  says how many (their Γ_m only matches their label frequencies, from the majority-vote start).
* As2 permutation fix (§2.2.5): Hungarian assignment on ``Σ_m Γ_m``.

Orientation: inside this module ``gamma[m]`` is the paper's ``Γ_m[k_resp, k_true]`` (columns are pmfs);
the fitted ``confusion_`` of the estimators is the package's ``workers × true × reported`` layout
(``confusion_[m] == gamma[m].T``).
"""

from __future__ import annotations

import functools
import itertools
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment

from fusion_core.data.responses import Responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import Aggregator, Fit, log_normalize, safe_log
from fusion_core.methods.dawid_skene import run_em, unary_log_likelihood
from fusion_core.methods.registry import register

GAMMA_FLOOR = 1e-6  # spec P5: floor and renormalise before logs / EM


# ----------------------------------------------------------------------------- simplex helpers
def project_simplex_columns(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of every column of ``v`` onto the probability simplex (Duchi et al. 2008)."""
    k = v.shape[0]
    u = -np.sort(-v, axis=0)
    css = np.cumsum(u, axis=0) - 1.0
    ind = np.arange(1, k + 1).reshape((k,) + (1,) * (v.ndim - 1))
    cond = u - css / ind > 0
    rho = k - 1 - np.argmax(cond[::-1], axis=0)
    if v.ndim == 2:
        theta = css[rho, np.arange(v.shape[1])] / (rho + 1)
    else:
        theta = np.take_along_axis(css, rho[None], axis=0)[0] / (rho + 1)
    return np.maximum(v - theta, 0.0)


def floor_columns(gamma: np.ndarray, eps: float = GAMMA_FLOOR) -> np.ndarray:
    """Floor at ``eps`` and renormalise columns (axis -2 is the response axis), spec P5."""
    g = np.maximum(gamma, eps)
    return g / g.sum(axis=-2, keepdims=True)


def _active_set(
    hess: np.ndarray, lin: np.ndarray, eq: np.ndarray, zero: np.ndarray, max_iter: int = 50
) -> np.ndarray | None:
    """Exact ``min ½xᵀHx − cᵀx`` s.t. ``E x = 1``, ``x ≥ 0`` by a guess-and-check active set on the
    zero pattern (KKT solve on the free variables, then multiplier signs).  ``None`` if it does not settle."""
    n = len(lin)
    ne = eq.shape[0]
    zero = zero.copy()
    for _ in range(max_iter):
        free = ~zero
        nf = int(free.sum())
        kkt = np.zeros((nf + ne, nf + ne))
        kkt[:nf, :nf] = hess[np.ix_(free, free)]
        kkt[:nf, nf:] = eq[:, free].T
        kkt[nf:, :nf] = eq[:, free]
        rhs = np.r_[lin[free], np.ones(ne)]
        try:
            sol = np.linalg.solve(kkt, rhs)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(sol)):
            return None
        x = np.zeros(n)
        x[free] = sol[:nf]
        if x.min() < -1e-13:
            zero |= x < -1e-13
            continue
        mult = hess @ x - lin + eq.T @ sol[nf:]
        mz = np.where(zero, mult, np.inf)
        j = int(np.argmin(mz))
        if mz[j] >= -1e-11 * max(1.0, np.abs(lin).max()):
            return np.maximum(x, 0.0)
        zero[j] = False
    return None


@functools.lru_cache(maxsize=32)
def _column_sum_operator(k: int) -> np.ndarray:
    return np.kron(np.ones((1, k)), np.eye(k))


def _qp_columns(gram: np.ndarray, lin: np.ndarray, start: np.ndarray, inner_iter: int) -> np.ndarray:
    """``min tr(X gram Xᵀ) − 2 tr(Xᵀ lin)`` over column-stochastic X (K×K), spec §2.2.4.

    Exact: closed form of the equality-constrained problem when it is non-negative, else an active-set
    KKT solve; FISTA with column-wise simplex projection as the last resort.
    """
    k = gram.shape[0]
    ones = np.ones(k)
    x = None
    try:
        ginv_t = np.linalg.solve(gram.T + 1e-14 * np.trace(gram) * np.eye(k), np.eye(k)).T  # gram^{-1}
        lam = (ones @ lin - ones @ gram) / k
        x = (lin - np.outer(ones, lam)) @ ginv_t
        if np.all(np.isfinite(x)) and x.min() >= 0:
            return x
    except np.linalg.LinAlgError:
        pass
    # row-major vec: x[i*K + c] = X[i, c]; Hessian 2 (I ⊗ gram), column sums = 1
    hess = np.zeros((k * k, k * k))
    for i in range(k):  # block-diagonal 2 (I ⊗ gram); k is the number of classes
        hess[i * k : (i + 1) * k, i * k : (i + 1) * k] = 2.0 * gram
    eq = _column_sum_operator(k)
    zero = start.ravel() <= 1e-14  # warm start: the previous block solution's zero pattern
    if not zero.any() and x is not None and np.all(np.isfinite(x)):
        zero = x.ravel() <= 0
    out = _active_set(hess, 2.0 * lin.ravel(), eq, zero)
    if out is not None:
        return out.reshape(k, k)
    return _fista(lambda y: 2.0 * (y @ gram - lin), gram, start, inner_iter, project_simplex_columns)


def _qp_vector(quad: np.ndarray, lin: np.ndarray, start: np.ndarray, inner_iter: int) -> np.ndarray:
    """``min xᵀ quad x − 2 linᵀ x`` over the simplex (closed form, active set, or FISTA)."""
    k = quad.shape[0]
    ones = np.ones(k)
    x = None
    try:
        reg = quad + 1e-14 * np.trace(quad) * np.eye(k)
        qi_r = np.linalg.solve(reg, lin)
        qi_1 = np.linalg.solve(reg, ones)
        nu = (ones @ qi_r - 1.0) / (ones @ qi_1)
        x = qi_r - nu * qi_1
        if np.all(np.isfinite(x)) and x.min() >= 0:
            return x
    except np.linalg.LinAlgError:
        pass
    zero = (x <= 0) if x is not None and np.all(np.isfinite(x)) else (start <= 0)
    out = _active_set(2.0 * quad, 2.0 * lin, ones[None, :], zero)
    if out is not None:
        return out
    proj = lambda y: project_simplex_columns(y[:, None])[:, 0]  # noqa: E731
    return _fista(lambda y: 2.0 * (quad @ y - lin), quad, start, inner_iter, proj)


def _fista(grad, quad: np.ndarray, start: np.ndarray, n_iter: int, proj) -> np.ndarray:
    lip = 2.0 * max(np.linalg.eigvalsh((quad + quad.T) / 2).max(), 1e-12)
    x = proj(start)
    y, t = x.copy(), 1.0
    for _ in range(n_iter):
        x_new = proj(y - grad(y) / lip)
        if np.abs(x_new - x).max() < 1e-13:
            return x_new
        t_new = (1 + np.sqrt(1 + 4 * t * t)) / 2
        y = x_new + ((t - 1) / t_new) * (x_new - x)
        x, t = x_new, t_new
    return x


# ----------------------------------------------------------------------------- moments
@dataclass
class Moments:
    """Sample moments of (17) with their supports (spec §2.2.2, §2.2.6).

    ``mu`` (M×K) with ``mu_ok``; pairs ``pair (P×2)`` with ``S (P×K×K)`` (row = first learner's response);
    triples ``triple (Q×3)`` with ``T3 (Q×K×K×K)``; learner indices ascending within each pair/triple.
    """

    n_learners: int
    n_classes: int
    mu: np.ndarray
    mu_ok: np.ndarray
    pair: np.ndarray
    S: np.ndarray
    triple: np.ndarray
    T3: np.ndarray
    pair_support: np.ndarray = field(default_factory=lambda: np.zeros(0))
    triple_support: np.ndarray = field(default_factory=lambda: np.zeros(0))
    min_pair_support: int = 0
    min_triple_support: int = 0
    _blocks: dict = field(default_factory=dict, repr=False)

    def blocks(self, m: int):
        """Terms containing learner m, re-oriented with m first (cached)."""
        if m not in self._blocks:
            pa, pb = self.pair[:, 0], self.pair[:, 1]
            s_first = np.flatnonzero(pa == m)
            s_second = np.flatnonzero(pb == m)
            s_m = np.concatenate([self.S[s_first], self.S[s_second].transpose(0, 2, 1)])
            s_other = np.concatenate([pb[s_first], pa[s_second]])
            tri = self.triple
            parts, o1, o2 = [], [], []
            for mode, (x, y), axes in ((0, (1, 2), (0, 1, 2, 3)), (1, (0, 2), (0, 2, 1, 3)), (2, (0, 1), (0, 3, 1, 2))):
                idx = np.flatnonzero(tri[:, mode] == m)
                parts.append(self.T3[idx].transpose(axes))
                o1.append(tri[idx, x])
                o2.append(tri[idx, y])
            k = self.n_classes
            t_m = np.concatenate(parts) if parts else np.zeros((0, k, k, k))
            self._blocks[m] = (s_m, s_other, t_m, np.concatenate(o1), np.concatenate(o2))
        return self._blocks[m]


def default_min_support(k: int) -> tuple[int, int]:
    """Spec §2.2.6: n_min = max(20, K²) for pairs and max(20, K³/2) for triples."""
    return max(20, k * k), max(20, int(np.ceil(k**3 / 2)))


_CHUNK = 2_000_000  # triple instances materialised at once (bounded memory on dense crowds)
_DENSE_TRIPLE_RANKS = 4_000_000  # below this many possible triples, count supports in a dense array


@functools.lru_cache(maxsize=64)
def _combinations3(r: int) -> np.ndarray:
    return np.array(list(itertools.combinations(range(r), 3)), dtype=np.int64).reshape(-1, 3)


def _triple_instances(r_item, starts, learner_of, label_of, complete: bool = False):
    """Every observed learner triple of every item, in chunks: ``(items, learners, labels)`` with
    ``learners``/``labels`` three (items × C(r, 3)) arrays, learners ascending (spec §2.2.6: Σ_n C(|obs_n|, 3)).
    ``complete`` (every learner labels every item): the learners are the same for all items, returned 1-D."""
    for r in np.unique(r_item[r_item >= 3]):
        items_r = np.flatnonzero(r_item == r)
        cmb = _combinations3(int(r))
        per = max(1, _CHUNK // len(cmb))
        for s in range(0, len(items_r), per):
            it = items_r[s : s + per]
            pos = starts[it][:, None] + np.arange(r)[None, :]
            lrn, lab = (cmb.T if complete else learner_of[pos][:, cmb].transpose(2, 0, 1)), label_of[pos]
            yield it, lrn, [lab[:, cmb[:, j]] for j in range(3)]


def compute_moments(
    F: np.ndarray,
    n_classes: int,
    *,
    weights: np.ndarray | None = None,
    min_pair_support: int | None = None,
    min_triple_support: int | None = None,
    max_triple_entries: int = 40_000_000,
) -> Moments:
    """Sample moments from ``F`` (learners × items, -1 = no response) with optional item weights.

    Each moment is normalised by its own (weighted) support; pairs/triples whose unweighted support
    (number of items) is below the minimum are dropped (spec §2.2.6).  Only co-occurring pairs and
    triples are ever enumerated: pairs from the sparse products ``Bᵀ B`` / ``Cᵀ W C`` of the response
    indicators, triples per item; with many learners a triple is counted only when its three pairs
    all reach the triple minimum (a triple's support never exceeds its pairs').
    """
    F = np.asarray(F, dtype=np.int64)
    m_count, n = F.shape
    k = int(n_classes)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (n,) or (w < 0).any():
        raise UserInputError("item weights must be one non-negative number per item.")
    p_min, t_min = default_min_support(k)
    p_min = p_min if min_pair_support is None else int(min_pair_support)
    t_min = t_min if min_triple_support is None else int(min_triple_support)

    # responses sorted by item, learners ascending within an item
    item_of, learner_of = np.nonzero(F.T >= 0)
    label_of = F[learner_of, item_of]
    w_of = w[item_of]
    r_item = np.bincount(item_of, minlength=n)
    starts = np.r_[0, np.cumsum(r_item)]

    # first order
    mu = np.bincount(learner_of * k + label_of, weights=w_of, minlength=m_count * k).reshape(m_count, k)
    wm = mu.sum(axis=1)
    mu_ok = wm > 0
    mu = np.where(mu_ok[:, None], mu / np.where(wm > 0, wm, 1)[:, None], 0.0)

    # second order: co-occurrence counts Bᵀ B and weighted code products Cᵀ W C (sparse)
    ones = np.ones(len(item_of))
    ind = sp.csr_matrix((ones, (item_of, learner_of)), shape=(n, m_count))
    cnt = (ind.T @ ind).tocoo()
    upper = cnt.row < cnt.col
    pa, pb, pc = cnt.row[upper].astype(np.int64), cnt.col[upper].astype(np.int64), np.rint(cnt.data[upper])
    code = learner_of * k + label_of
    onehot_w = sp.csr_matrix((w_of, (item_of, code)), shape=(n, m_count * k))
    onehot = sp.csr_matrix((ones, (item_of, code)), shape=(n, m_count * k))
    prod = (onehot_w.T @ onehot).tocoo()
    ra, rb = prod.row // k, prod.col // k
    up = ra < rb
    pkey = pa * m_count + pb
    order = np.argsort(pkey)
    pkey, pa, pb, pc = pkey[order], pa[order], pb[order], pc[order]
    slot = np.searchsorted(pkey, ra[up] * m_count + rb[up])
    pair_w = np.zeros((len(pkey), k, k))
    np.add.at(pair_w, (slot, prod.row[up] % k, prod.col[up] % k), prod.data[up])
    keep = (pc >= p_min) & (pair_w.sum(axis=(1, 2)) > 0)
    rank = pb * (pb - 1) // 2 + pa  # combination rank: pairs ordered by (b, a)
    sel = np.flatnonzero(keep)[np.argsort(rank[keep], kind="stable")]
    S = pair_w[sel]
    S = S / S.sum(axis=(1, 2), keepdims=True) if len(sel) else np.zeros((0, k, k))
    pair = np.stack([pa[sel], pb[sel]], axis=1) if len(sel) else np.zeros((0, 2), dtype=np.int64)
    pair_support = pc[sel]

    # third order: supports first, then the codes of the kept triples only
    cand = np.arange(m_count, dtype=np.int64)
    c3, b2 = cand * (cand - 1) * (cand - 2) // 6, cand * (cand - 1) // 2
    n_tri_all = m_count * (m_count - 1) * (m_count - 2) // 6
    dense_ranks = n_tri_all <= _DENSE_TRIPLE_RANKS
    strong = pkey[pc >= t_min]  # sorted keys a·M + b of the pairs a triple can be built on

    def strong_pair(a, b):
        if not len(strong):
            return np.zeros(a.shape, dtype=bool)
        key = a * m_count + b
        return strong[np.minimum(np.searchsorted(strong, key), len(strong) - 1)] == key

    complete = bool(n_tri_all) and bool((F >= 0).all())

    def instances():
        for it, lrn, lab in _triple_instances(r_item, starts, learner_of, label_of, complete):
            l0, l1, l2 = lrn
            rk = c3[l2] + b2[l1] + l0
            if dense_ranks:
                yield it, rk, lab, None
            else:
                # many learners: count a triple only if its three pairs reach the triple minimum
                ok = strong_pair(l0, l1) & strong_pair(l0, l2) & strong_pair(l1, l2)
                yield it, rk, lab, ok

    if complete:
        keep_t = np.arange(n_tri_all) if n >= t_min else np.zeros(0, dtype=np.int64)
        support_t = np.full(len(keep_t), float(n))
    elif dense_ranks:
        tri_cnt = np.zeros(n_tri_all)
        for _, rk, _, _ in instances():
            tri_cnt += np.bincount(rk.ravel(), minlength=n_tri_all)
        keep_t = np.flatnonzero(tri_cnt >= t_min)
        support_t = tri_cnt[keep_t]
    else:
        uniq, counts = [], []
        for _, rk, _, ok in instances():
            u, c = np.unique(rk[ok], return_counts=True)
            uniq.append(u)
            counts.append(c)
        u_all = np.concatenate(uniq) if uniq else np.zeros(0, dtype=np.int64)
        u, inv = np.unique(u_all, return_inverse=True)
        tot = np.bincount(inv, weights=np.concatenate(counts) if counts else None, minlength=len(u))
        keep_t = u[tot >= t_min]
        support_t = tot[tot >= t_min]
    budget = max(1, max_triple_entries // k**3)
    if len(keep_t) > budget:  # [OURS] memory cap: keep the best-supported triples
        warnings.warn(
            f"moment matching kept the {budget:,} best-supported of {len(keep_t):,} learner triples (memory cap).",
            AggregationWarning,
        )
        best = np.sort(np.argsort(-support_t, kind="stable")[:budget])
        keep_t, support_t = keep_t[best], support_t[best]
    t_acc = np.zeros(len(keep_t) * k**3)
    if len(keep_t):
        if dense_ranks:
            compact = np.full(n_tri_all, -1, dtype=np.int64)
            compact[keep_t] = np.arange(len(keep_t)) * k**3
        for it, rk, lab, ok in instances():
            if dense_ranks:
                idx = compact[rk]
                hit = idx >= 0
            else:
                idx = np.minimum(np.searchsorted(keep_t, rk), len(keep_t) - 1)
                hit = keep_t[idx] == rk
                idx = idx * k**3
            code = idx + (lab[0] * k + lab[1]) * k + lab[2]
            wt = None if weights is None else np.broadcast_to(w[it][:, None], code.shape)
            if hit.all():
                t_acc += np.bincount(code.ravel(), weights=None if wt is None else wt.ravel(), minlength=len(t_acc))
            else:
                hit = np.broadcast_to(hit, code.shape)
                t_acc += np.bincount(code[hit], weights=None if wt is None else wt[hit], minlength=len(t_acc))
    T3 = t_acc.reshape(len(keep_t), k, k, k)
    tot = T3.sum(axis=(1, 2, 3))
    good = tot > 0
    T3, keep_t, support_t = T3[good] / tot[good, None, None, None], keep_t[good], support_t[good]
    if len(keep_t):  # decode combination ranks
        cc = np.searchsorted(c3, keep_t, side="right") - 1
        rem = keep_t - c3[cc]
        bcode = np.searchsorted(b2, rem, side="right") - 1
        triple = np.stack([rem - b2[bcode], bcode, cc], axis=1)
    else:
        triple = np.zeros((0, 3), dtype=np.int64)
    return Moments(
        n_learners=m_count,
        n_classes=k,
        mu=mu,
        mu_ok=mu_ok,
        pair=pair,
        S=S,
        triple=triple,
        T3=T3,
        pair_support=pair_support,
        triple_support=support_t,
        min_pair_support=p_min,
        min_triple_support=t_min,
    )


# ----------------------------------------------------------------------------- objective and blocks
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


# ----------------------------------------------------------------------------- batched block updates
def _active_set_batch(hess: np.ndarray, lin: np.ndarray, eq: np.ndarray, zero: np.ndarray, max_iter: int = 50):
    """:func:`_active_set` for a stack of problems at once (same guess-and-check on the zero pattern; the
    KKT system keeps its full size with identity rows for the variables held at zero).

    Returns ``(x, done)``; problems with ``done == False`` did not settle (or hit a singular system).
    """
    nb, n = lin.shape
    ne = eq.shape[0]
    x_out = np.zeros((nb, n))
    done = np.zeros(nb, dtype=bool)
    zero = zero.copy()
    act = np.arange(nb)
    diag = np.arange(n)
    for _ in range(max_iter):
        if not len(act):
            break
        z = zero[act]
        free = ~z
        kkt = np.zeros((len(act), n + ne, n + ne))
        kkt[:, :n, :n] = hess[act] * (free[:, :, None] & free[:, None, :])
        kkt[:, diag, diag] += z
        kkt[:, :n, n:] = eq.T[None] * free[:, :, None]
        kkt[:, n:, :n] = eq[None] * free[:, None, :]
        rhs = np.concatenate([lin[act] * free, np.ones((len(act), ne))], axis=1)
        try:
            sol = np.linalg.solve(kkt, rhs[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            break
        finite = np.isfinite(sol).all(axis=1)
        x = np.where(free, sol[:, :n], 0.0)
        neg = finite & (x.min(axis=1) < -1e-13)
        zero[act[neg]] |= x[neg] < -1e-13
        mult = np.einsum("bij,bj->bi", hess[act], x) - lin[act] + sol[:, n:] @ eq
        mz = np.where(z, mult, np.inf)
        j = np.argmin(mz, axis=1)
        mval = mz[np.arange(len(act)), j]
        thr = -1e-11 * np.maximum(1.0, np.abs(lin[act]).max(axis=1))
        fin = finite & ~neg & (mval >= thr)
        x_out[act[fin]] = np.maximum(x[fin], 0.0)
        done[act[fin]] = True
        rel = finite & ~neg & ~fin
        zero[act[rel], j[rel]] = False
        act = act[finite & ~fin]
    return x_out, done


def _qp_columns_batch(gram: np.ndarray, lin: np.ndarray, start: np.ndarray, inner_iter: int) -> np.ndarray:
    """:func:`_qp_columns` for a stack of blocks (B×K×K): batched closed form, then a batched active set
    for the blocks whose closed form is infeasible; per-block fallback for anything left."""
    nb, k, _ = gram.shape
    eye = np.eye(k)
    try:
        ginv_t = np.linalg.inv(gram.transpose(0, 2, 1) + 1e-14 * np.trace(gram, axis1=1, axis2=2)[:, None, None] * eye)
        ginv_t = ginv_t.transpose(0, 2, 1)
    except np.linalg.LinAlgError:
        return np.stack([_qp_columns(gram[b], lin[b], start[b], inner_iter) for b in range(nb)])
    lam = (lin.sum(axis=1) - gram.sum(axis=1)) / k
    x = np.matmul(lin - lam[:, None, :], ginv_t)
    finite = np.isfinite(x).all(axis=(1, 2))
    ok = finite & (x.min(axis=(1, 2), initial=np.inf) >= 0)
    out = np.where(ok[:, None, None], x, 0.0)
    bad = np.flatnonzero(~ok)
    if len(bad):
        zero = start[bad].reshape(len(bad), -1) <= 1e-14
        from_x = ~zero.any(axis=1) & finite[bad]
        zero[from_x] = x[bad[from_x]].reshape(-1, k * k) <= 0
        hess = np.zeros((len(bad), k * k, k * k))
        for i in range(k):  # block-diagonal 2 (I ⊗ gram); k is the number of classes
            hess[:, i * k : (i + 1) * k, i * k : (i + 1) * k] = 2.0 * gram[bad]
        xs, done = _active_set_batch(hess, 2.0 * lin[bad].reshape(len(bad), -1), _column_sum_operator(k), zero)
        out[bad[done]] = xs[done].reshape(-1, k, k)
        for b in bad[~done]:
            out[b] = _qp_columns(gram[b], lin[b], start[b], inner_iter)
    return out


@dataclass
class _ColourPlan:
    """Terms of (17) whose Γ_m block is updated in one batch: the learners of one colour of the
    co-occurrence graph (no two share a kept pair or triple, so their block problems are independent)."""

    members: np.ndarray
    pf: np.ndarray  # kept pairs with the member first
    ps: np.ndarray  # kept pairs with the member second
    q: tuple  # kept triples with the member in mode 0, 1, 2
    seg: sp.csr_matrix  # members × (pair and triple terms) indicator for the segment sums


def colour_learners(mom: Moments) -> np.ndarray:
    """Greedy colouring (learner index order) of the graph linking learners that share a kept pair or
    triple; learners of one colour have independent Γ blocks (§2.2.4 block-coordinate descent)."""
    m = mom.n_learners
    e = [mom.pair] + [mom.triple[:, list(c)] for c in ((0, 1), (0, 2), (1, 2))]
    ab = np.concatenate(e) if len(mom.triple) or len(mom.pair) else np.zeros((0, 2), dtype=np.int64)
    adj = sp.csr_matrix((np.ones(2 * len(ab)), (np.r_[ab[:, 0], ab[:, 1]], np.r_[ab[:, 1], ab[:, 0]])), shape=(m, m))
    colour = np.full(m, -1, dtype=np.int64)
    for v in range(m):
        used = colour[adj.indices[adj.indptr[v] : adj.indptr[v + 1]]]
        used = used[used >= 0]
        mark = np.zeros(len(used) + 1, dtype=bool)
        mark[used[used <= len(used)]] = True
        colour[v] = int(np.argmin(mark))
    return colour


def _colour_plans(mom: Moments) -> list[_ColourPlan]:
    if "plans" in mom._blocks:
        return mom._blocks["plans"]
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
        plans.append(_ColourPlan(members, pf, ps, q, seg))
    mom._blocks["plans"] = plans
    return plans


def block_quadratics(
    mom: Moments, gamma: np.ndarray, pi: np.ndarray, plan: _ColourPlan, gram_all: np.ndarray | None = None
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
    if grams:
        gram = gram + pp * (plan.seg @ np.concatenate(grams).reshape(-1, k * k)).reshape(-1, k, k)
        lin = lin + (plan.seg @ np.concatenate(lins).reshape(-1, k * k)).reshape(-1, k, k) * pi[None, None, :]
    return gram, lin


def moment_terms(mom: Moments) -> np.ndarray:
    """Per learner: the number of kept pair and triple moments it appears in (0 = not identified by MM)."""
    ids = np.concatenate([mom.pair.ravel(), mom.triple.ravel()]).astype(np.int64)
    return np.bincount(ids, minlength=mom.n_learners)


def fix_permutation_as2(
    gamma: np.ndarray, pi: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """As2 fix (§2.2.5): the column permutation maximising the diagonal mass of ``Σ_m Γ_m``.

    Returns ``(Γ P, Pᵀ π, perm)`` with ``new column i = old column perm[i]``.
    """
    total = gamma.sum(axis=0)
    rows, cols = linear_sum_assignment(-total)
    perm = np.empty(gamma.shape[-1], dtype=np.int64)
    perm[rows] = cols
    return gamma[:, :, perm], (None if pi is None else pi[perm]), perm


def diagonal_dominance(gamma: np.ndarray) -> np.ndarray:
    """Per learner: fraction of columns whose diagonal entry is the column's largest (As2)."""
    k = gamma.shape[-1]
    diag = gamma[:, np.arange(k), np.arange(k)]
    return (diag >= gamma.max(axis=1) - 1e-12).mean(axis=1)


@dataclass
class MMResult:
    gamma: np.ndarray  # M × K_resp × K_true (paper orientation), permutation-fixed, not floored
    class_prior: np.ndarray
    objective: list[float]
    n_iter: int
    converged: bool
    moments: Moments
    fallback: bool = False
    dominance: np.ndarray | None = None


def mv_init(F: np.ndarray, n_classes: int, weights: np.ndarray | None = None, smoothing: float = 0.01):
    """Γ⁽⁰⁾ from the M-step (11) on one-hot MV labels plus smoothing, π⁽⁰⁾ = MV label frequencies (§2.2.5).

    MV ties go to the lowest class index.
    """
    m_count, n = F.shape
    k = n_classes
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    mm, nn = np.nonzero(F >= 0)
    votes = np.bincount(nn * k + F[mm, nn], minlength=n * k).reshape(n, k)
    mv = np.argmax(votes, axis=1)
    has = votes.sum(axis=1) > 0
    counts = np.bincount((mm * k + F[mm, nn]) * k + mv[nn], weights=w[nn] * has[nn], minlength=m_count * k * k).reshape(
        m_count, k, k
    )
    counts = counts + smoothing
    gamma = counts / counts.sum(axis=1, keepdims=True)
    pi = np.bincount(mv[has], weights=w[has], minlength=k) + 1e-12
    return gamma, pi / pi.sum(), mv


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
    """Block-coordinate descent on (17): Γ_1..Γ_M then π per sweep (§2.2.4).  Learners that share no
    kept pair or triple have independent blocks; they are updated together, one colour of
    :func:`colour_learners` at a time (the same descent as a sequential sweep in colour order).

    [OURS] ``extrapolate``: after each sweep try the projected step ``x + β (x − x_prev)`` on (Γ, π), as
    the line search of alternating least squares for CP models; it is kept only when it lowers g, so the
    descent stays monotone (β grows ×1.5 up to 20 on success, halves down to 1 on failure).  It roughly
    halves the sweeps on the real crowds.

    Stops when ``max|ΔΓ| < tol`` or the relative change of ``πᵀQπ − 2rᵀπ`` (g minus a data constant) is
    below ``obj_tol`` (§2.2.5).  The returned trace is g itself.
    """
    gamma = np.array(gamma0, dtype=float)
    pi = np.array(pi0, dtype=float)
    trace = [objective(mom, gamma, pi)]
    quad0, lin0 = prior_quadratic(mom, gamma)
    monitor = [float(pi @ quad0 @ pi - 2 * lin0 @ pi)]
    const = trace[0] - monitor[0]
    converged = False
    it = 0
    k = mom.n_classes
    plans = _colour_plans(mom)
    gram_all = np.matmul(gamma.transpose(0, 2, 1), gamma)  # Γ_mᵀ Γ_m, refreshed after each colour
    beta = 1.0
    for it in range(1, max_iter + 1):
        old, old_pi = gamma.copy(), pi.copy()
        for plan in plans:  # one colour = a batch of independent Γ_m blocks
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
            gamma[idx] = _qp_columns_batch(gram, lin, gamma[idx], inner_iter)
            gram_all[idx] = np.matmul(gamma[idx].transpose(0, 2, 1), gamma[idx])
        quad, lin = prior_quadratic(mom, gamma)
        pi = _qp_vector(quad, lin, pi, inner_iter)
        mon = float(pi @ quad @ pi - 2 * lin @ pi)  # g minus a data-only constant (§2.2.4)
        if extrapolate and it >= 3:
            g_try = project_simplex_columns((gamma + beta * (gamma - old)).transpose(1, 0, 2)).transpose(1, 0, 2)
            p_try = project_simplex_columns((pi + beta * (pi - old_pi))[:, None])[:, 0]
            q_try, l_try = prior_quadratic(mom, g_try)
            mon_try = float(p_try @ q_try @ p_try - 2 * l_try @ p_try)
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


def moment_matching(
    F: np.ndarray,
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
) -> MMResult:
    """Alg. A2 (spec §2.2): MV-initialised block-coordinate MM plus ``n_restarts`` random simplex
    restarts (columns ~ Dirichlet(1)); keeps the lowest g, then applies the As2 permutation fix.

    Falls back to the MV initialisation (with an :class:`AggregationWarning`) when no learner triple
    has enough support (e.g. K = 2 with M < 3, or very sparse data; spec P15, §2.2.6).
    """
    F = np.asarray(F, dtype=np.int64)
    k = int(n_classes)
    mom = moments or compute_moments(
        F, k, weights=weights, min_pair_support=min_pair_support, min_triple_support=min_triple_support
    )
    g0, p0, _ = (
        mv_init(F, k, weights) if F.size else (np.full((mom.n_learners, k, k), 1.0 / k), np.full(k, 1 / k), None)
    )
    if len(mom.triple) == 0:
        warnings.warn(
            "moment matching: no learner triple has enough co-labelled items, so the model is not identifiable "
            "from moments; falling back to the majority-vote initialisation.",
            AggregationWarning,
        )
        gamma, pi, _ = fix_permutation_as2(g0, p0)
        return MMResult(gamma, pi, [], 0, False, mom, fallback=True, dominance=diagonal_dominance(gamma))
    lone = mom.mu_ok & (moment_terms(mom) == 0)
    if lone.any():
        warnings.warn(
            f"moment matching: {int(lone.sum())} of {int(mom.mu_ok.sum())} annotators share no pair with at least "
            f"{mom.min_pair_support} (nor a triple with {mom.min_triple_support}) co-labelled items; the moments do not "
            "identify their confusion matrices, which are only fitted to their own label frequencies starting from "
            "the majority-vote estimate (spec §2.2.6).",
            AggregationWarning,
        )
    rng = np.random.default_rng(random_state)
    best = None
    for restart in range(int(n_restarts) + 1):
        if restart == 0:
            gi, pi_i = g0, p0
        else:
            gi = rng.dirichlet(np.ones(k), size=(mom.n_learners, k)).transpose(0, 2, 1)
            pi_i = rng.dirichlet(np.ones(k))
        out = solve_moments(mom, gi, pi_i, max_iter=max_iter, tol=tol, inner_iter=inner_iter)
        if best is None or out[2][-1] < best[2][-1]:
            best = out
    gamma, pi, trace, n_iter, converged = best
    gamma, pi, _ = fix_permutation_as2(gamma, pi)
    dom = diagonal_dominance(gamma)
    if (dom >= 0.5).mean() < 0.5:
        warnings.warn(
            f"only {(dom >= 0.5).mean():.0%} of annotators have a dominant diagonal in most classes after the As2 permutation fix; "
            "the label permutation may be wrong (As2 assumes most annotators beat random guessing).",
            AggregationWarning,
        )
    last_rel = abs(trace[-2] - trace[-1]) / max(abs(trace[-2]), 1e-300) if len(trace) > 1 else 0.0
    if not converged and last_rel > 1e-7:  # a slow linear tail (ΔΓ still > tol, g settled) is not worth a warning
        warnings.warn(
            f"moment matching did not converge in {max_iter} sweeps (last relative change of the objective "
            f"{last_rel:.1e}); raise max_iter.",
            AggregationWarning,
        )
    return MMResult(gamma, pi, trace, n_iter, converged, mom, dominance=dom)


def map_posterior(resp: Responses, gamma: np.ndarray, pi: np.ndarray) -> tuple[np.ndarray, float]:
    """MAP rule (18) as posteriors: softmax over k of ``log π_k + Σ_m log Γ_m(f_m, k)``, floored Γ (P5)."""
    conf = floor_columns(gamma).transpose(0, 2, 1)
    joint = unary_log_likelihood(resp, conf) + safe_log(pi)[None, :]
    post, lognorm = log_normalize(joint)
    return post, float(lognorm.sum())


def item_weight_array(resp: Responses, item_weights) -> np.ndarray | None:
    if item_weights is None:
        return None
    s = pd.Series(item_weights, dtype=float)
    codes = resp.item_codes(s.index, what="item-weight tasks")
    w = np.zeros(resp.n_items)
    w[codes] = s.to_numpy()
    if not np.all(np.isfinite(w)) or (w < 0).any():
        raise UserInputError("item weights must be finite and non-negative.")
    return w


_MM_PARAMS = {
    "n_restarts": {"low": 0, "high": 50, "help": "Extra random simplex restarts; the lowest objective wins."},
    "max_iter": {"low": 1, "high": 100000, "help": "Maximum block-coordinate sweeps."},
    "tol": {"low": 0.0, "high": 1.0, "help": "Stop when max |ΔΓ| over a sweep is below tol.", "advanced": True},
    "inner_iter": {
        "low": 1,
        "high": 1000,
        "help": "FISTA iterations per block when the closed form is infeasible.",
        "advanced": True,
    },
    "min_pair_support": {
        "kind": "object",
        "help": "Minimum co-labelled items for a pair moment (default max(20, K²)).",
        "advanced": True,
    },
    "min_triple_support": {
        "kind": "object",
        "help": "Minimum co-labelled items for a triple moment (default max(20, K³/2)).",
        "advanced": True,
    },
    "item_weights": {
        "kind": "object",
        "help": "Optional weight per item (Series by task) for the sample moments.",
        "advanced": True,
    },
    "random_state": {"kind": "int", "help": "Seed for the random restarts."},
}


def fit_mm(resp: Responses, est) -> MMResult:
    """Run :func:`moment_matching` with an estimator's parameters on a :class:`Responses`."""
    if int(est.max_iter) < 1 or int(est.n_restarts) < 0:
        raise UserInputError("max_iter must be ≥ 1 and n_restarts ≥ 0.")
    return moment_matching(
        resp.dense_matrix(-1),
        resp.n_classes,
        weights=item_weight_array(resp, est.item_weights),
        n_restarts=int(est.n_restarts),
        max_iter=int(est.max_iter),
        tol=float(est.tol),
        inner_iter=int(est.inner_iter),
        min_pair_support=est.min_pair_support,
        min_triple_support=est.min_triple_support,
        random_state=est.random_state,
    )


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


def _mm_extras(res: MMResult) -> dict:
    return {
        "pair_residual": pair_residuals(res.moments, res.gamma, res.class_prior),
        "diagonal_dominance": res.dominance,
        "mm_objective": res.objective[-1] if res.objective else None,
        "mm_fallback": res.fallback,
        "n_pairs": len(res.moments.pair),
        "n_triples": len(res.moments.triple),
        "moment_terms": moment_terms(res.moments),
    }


@register(
    "mm",
    summary="Moment matching: confusion matrices and priors from 1st–3rd order response moments (no EM).",
    family="moment_matching",
    params=_MM_PARAMS,
    reference="Traganitis & Giannakis §3.2, eqs. (13)–(18); spec sequential-networked §2.2.",
)
class MomentMatching(Aggregator):
    """Moment matching (spec §2.2): solves (17) by block-coordinate descent, As2 permutation fix,
    labels by the MAP rule (18) with the estimated priors.  ``confusion_[m] = Γ_m.T`` (floored at 1e-6).
    Extras: ``diagonal_dominance`` per annotator (As2 diagnostic, P3), ``pair_residual`` per annotator (largest pair
    residual: the As1 diagnostic, P4), ``mm_objective``, ``n_pairs``, ``n_triples``, ``moment_terms`` per annotator
    (kept pair and triple moments it appears in; 0 = not identified by MM, §2.2.6).
    """

    def __init__(
        self,
        n_restarts: int = 0,
        max_iter: int = 500,
        tol: float = 1e-7,
        inner_iter: int = 50,
        min_pair_support: int | None = None,
        min_triple_support: int | None = None,
        item_weights: pd.Series | None = None,
        random_state: int = 0,
    ):
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.tol = tol
        self.inner_iter = inner_iter
        self.min_pair_support = min_pair_support
        self.min_triple_support = min_triple_support
        self.item_weights = item_weights
        self.random_state = random_state

    def _fit(self, responses, *, gold, graph, context) -> Fit:
        res = fit_mm(responses, self)
        post, ll = map_posterior(responses, res.gamma, res.class_prior)
        if gold is not None and len(gold[0]):
            post[gold[0]] = 0.0
            post[gold[0], gold[1]] = 1.0
        self.gamma_ = res.gamma
        return Fit(
            posterior=post,
            confusion=floor_columns(res.gamma).transpose(0, 2, 1),
            class_prior=res.class_prior,
            log_likelihood=[ll],
            n_iter=res.n_iter,
            converged=res.converged,
            extras=_mm_extras(res),
        )


@register(
    "mm-ds",
    summary="Dawid–Skene EM initialised from moment matching (the paper's 'DS' baseline).",
    family="moment_matching",
    params={
        **_MM_PARAMS,
        "smoothing": {"low": 0.0, "high": 100.0, "help": "Dirichlet pseudo-count on the EM confusion counts."},
        "estimate_priors": {"help": "Estimate class priors in EM (default on, as Dawid & Skene)."},
        "em_tol": {"low": 0.0, "high": 1.0, "help": "EM relative log-likelihood tolerance.", "advanced": True},
        "em_max_iter": {"low": 1, "high": 10000, "help": "Maximum EM iterations."},
    },
    reference="Traganitis & Giannakis §3.1–3.2 ('DS' = EM of [14] initialised with MM); spec §2.1, §2.2.",
)
class MomentMatchingDawidSkene(MomentMatching):
    """Dawid–Skene EM started from the MM estimate: the E-step with MM's floored Γ and π̂ gives the
    initial posteriors, then :func:`fusion_core.methods.dawid_skene.run_em` iterates (spec §2.1 step 1)."""

    def __init__(
        self,
        n_restarts: int = 0,
        max_iter: int = 500,
        tol: float = 1e-7,
        inner_iter: int = 50,
        min_pair_support: int | None = None,
        min_triple_support: int | None = None,
        item_weights: pd.Series | None = None,
        random_state: int = 0,
        smoothing: float = 0.0,
        estimate_priors: bool = True,
        em_tol: float = 1e-7,
        em_max_iter: int = 500,
    ):
        super().__init__(
            n_restarts, max_iter, tol, inner_iter, min_pair_support, min_triple_support, item_weights, random_state
        )
        self.smoothing = smoothing
        self.estimate_priors = estimate_priors
        self.em_tol = em_tol
        self.em_max_iter = em_max_iter

    def _fit(self, responses, *, gold, graph, context) -> Fit:
        res = fit_mm(responses, self)
        post0, _ = map_posterior(responses, res.gamma, res.class_prior)
        fit = run_em(
            responses,
            post0,
            smoothing=float(self.smoothing),
            estimate_priors=bool(self.estimate_priors),
            tol=float(self.em_tol),
            max_iter=int(self.em_max_iter),
            gold=gold,
        )
        fit.extras.update(_mm_extras(res))
        return fit
