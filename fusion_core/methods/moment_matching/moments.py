"""Sample moments of eq. (17) with missing responses (spec ``sequential-networked.md`` §2.2.2, §2.2.6).

``mu_m`` over the items learner m labelled, ``S_mm'`` over the items both labelled, ``T_mm'm''`` over the items
all three labelled; pairs and triples with too little support are dropped.  Only co-occurring learners are
ever touched: pairs come from sparse products of the response indicators, triples are enumerated per item
(``Σ_n C(|obs_n|, 3)`` work, in bounded chunks), never as an ``M²``/``M³`` loop over learners.
"""

from __future__ import annotations

import functools
import itertools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from fusion_core.errors import AggregationWarning, UserInputError

_CHUNK = 2_000_000  # triple instances materialised at once (bounded memory on dense crowds)
_DENSE_TRIPLE_RANKS = 4_000_000  # below this many possible triples, count supports in a dense array


@dataclass(frozen=True)
class LabelEntries:
    """Observed responses as entries (learner, item, label), sorted by item then learner, one per cell: the sparse
    form of the learners × items matrix ``F`` (-1 = no response) that moment matching reads."""

    learner: np.ndarray
    item: np.ndarray
    label: np.ndarray
    n_learners: int
    n_items: int

    @property
    def shape(self) -> tuple[int, int]:
        return self.n_learners, self.n_items

    @property
    def size(self) -> int:
        return self.n_learners * self.n_items

    @property
    def complete(self) -> bool:
        """Every learner labelled every item."""
        return len(self.item) == self.n_learners * self.n_items

    @classmethod
    def from_dense(cls, F: np.ndarray) -> LabelEntries:
        F = np.asarray(F, dtype=np.int64)
        item, learner = np.nonzero(F.T >= 0)
        return cls(learner, item, F[learner, item], F.shape[0], F.shape[1])

    @classmethod
    def from_codes(
        cls, learner: np.ndarray, item: np.ndarray, label: np.ndarray, n_learners: int, n_items: int
    ) -> LabelEntries:
        """From coded responses in any order; of repeated (learner, item) cells the last one is kept (as in
        :meth:`~fusion_core.data.responses.Responses.dense_matrix`)."""
        key = np.asarray(item, dtype=np.int64) * n_learners + np.asarray(learner, dtype=np.int64)
        order = np.argsort(key, kind="stable")
        ks = key[order]
        last = np.r_[ks[1:] != ks[:-1], True] if len(ks) else np.zeros(0, dtype=bool)
        sel = order[last]
        return cls(
            np.asarray(learner, dtype=np.int64)[sel],
            np.asarray(item, dtype=np.int64)[sel],
            np.asarray(label, dtype=np.int64)[sel],
            int(n_learners),
            int(n_items),
        )


def as_entries(F: np.ndarray | LabelEntries) -> LabelEntries:
    """``F`` (learners × items, -1 = missing) or entries, as entries."""
    return F if isinstance(F, LabelEntries) else LabelEntries.from_dense(F)


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
    cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    def blocks(self, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Terms containing learner m, re-oriented with m first (cached): ``(S_m, other learner, T_m, o1, o2)``."""
        if m not in self.cache:
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
            self.cache[m] = (s_m, s_other, np.concatenate(parts), np.concatenate(o1), np.concatenate(o2))
        return self.cache[m]


def default_min_support(k: int) -> tuple[int, int]:
    """Spec §2.2.6: n_min = max(20, K²) for pairs and max(20, K³/2) for triples."""
    return max(20, k * k), max(20, int(np.ceil(k**3 / 2)))


def moment_terms(mom: Moments) -> np.ndarray:
    """Per learner: the number of kept pair and triple moments it appears in (0 = not identified by MM)."""
    ids = np.concatenate([mom.pair.ravel(), mom.triple.ravel()]).astype(np.int64)
    return np.bincount(ids, minlength=mom.n_learners)


@functools.lru_cache(maxsize=64)
def _combinations3(r: int) -> np.ndarray:
    return np.array(list(itertools.combinations(range(r), 3)), dtype=np.int64).reshape(-1, 3)


@dataclass
class _Observed:
    """Responses sorted by item (learners ascending within an item), with item weights."""

    learner: np.ndarray
    label: np.ndarray
    item: np.ndarray
    weight: np.ndarray  # per response
    per_item: np.ndarray  # responses per item
    starts: np.ndarray  # offset of each item's responses

    @classmethod
    def from_entries(cls, e: LabelEntries, w: np.ndarray) -> _Observed:
        r_item = np.bincount(e.item, minlength=e.n_items)
        return cls(e.learner, e.label, e.item, w[e.item], r_item, np.r_[0, np.cumsum(r_item)])


def _triple_instances(
    obs: _Observed, complete: bool = False
) -> Iterator[tuple[np.ndarray, np.ndarray | tuple[np.ndarray, ...], list[np.ndarray]]]:
    """Every observed learner triple of every item, in chunks: ``(items, learners, labels)`` with
    ``learners``/``labels`` three (items × C(r, 3)) arrays, learners ascending (spec §2.2.6: Σ_n C(|obs_n|, 3)).
    ``complete`` (every learner labels every item): the learners are the same for all items, returned 1-D."""
    r_item = obs.per_item
    for r in np.unique(r_item[r_item >= 3]):
        items_r = np.flatnonzero(r_item == r)
        cmb = _combinations3(int(r))
        per = max(1, _CHUNK // len(cmb))
        for s in range(0, len(items_r), per):
            it = items_r[s : s + per]
            pos = obs.starts[it][:, None] + np.arange(r)[None, :]
            lrn = cmb.T if complete else obs.learner[pos][:, cmb].transpose(2, 0, 1)
            lab = obs.label[pos]
            yield it, lrn, [lab[:, cmb[:, j]] for j in range(3)]


def _first_order(obs: _Observed, m_count: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    mu = np.bincount(obs.learner * k + obs.label, weights=obs.weight, minlength=m_count * k).reshape(m_count, k)
    wm = mu.sum(axis=1)
    mu_ok = wm > 0
    return np.where(mu_ok[:, None], mu / np.where(wm > 0, wm, 1)[:, None], 0.0), mu_ok


def _pair_moments(
    obs: _Observed, n: int, m_count: int, k: int, p_min: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Kept pairs from the co-occurrence counts ``Bᵀ B`` and weighted code products ``Cᵀ W C`` (sparse).

    Returns ``(pair, S, pair_support, all pair keys a·M + b (sorted), their supports)``."""
    ones = np.ones(len(obs.item))
    ind = sp.csr_matrix((ones, (obs.item, obs.learner)), shape=(n, m_count))
    cnt = (ind.T @ ind).tocoo()
    upper = cnt.row < cnt.col
    pa, pb, pc = cnt.row[upper].astype(np.int64), cnt.col[upper].astype(np.int64), np.rint(cnt.data[upper])
    code = obs.learner * k + obs.label
    onehot_w = sp.csr_matrix((obs.weight, (obs.item, code)), shape=(n, m_count * k))
    onehot = sp.csr_matrix((ones, (obs.item, code)), shape=(n, m_count * k))
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
    return pair, S, pc[sel], pkey, pc


@dataclass
class _TripleRanks:
    """Combination ranks ``c3[l2] + b2[l1] + l0`` of learner triples and how their supports are counted."""

    m_count: int
    strong: np.ndarray  # sorted keys a·M + b of the pairs a triple can be built on (many-learner path)

    def __post_init__(self) -> None:
        cand = np.arange(self.m_count, dtype=np.int64)
        self.c3 = cand * (cand - 1) * (cand - 2) // 6
        self.b2 = cand * (cand - 1) // 2
        self.n_all = self.m_count * (self.m_count - 1) * (self.m_count - 2) // 6
        self.dense = self.n_all <= _DENSE_TRIPLE_RANKS

    def strong_pair(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if not len(self.strong):
            return np.zeros(a.shape, dtype=bool)
        key = a * self.m_count + b
        return self.strong[np.minimum(np.searchsorted(self.strong, key), len(self.strong) - 1)] == key

    def instances(
        self, obs: _Observed, complete: bool
    ) -> Iterator[tuple[np.ndarray, np.ndarray, list[np.ndarray], np.ndarray | None]]:
        """``(items, ranks, labels, ok)``; with many learners a triple counts only if its three pairs reach the
        triple minimum (a triple's support never exceeds its pairs'), else ``ok`` is None."""
        for it, lrn, lab in _triple_instances(obs, complete):
            l0, l1, l2 = lrn
            rk = self.c3[l2] + self.b2[l1] + l0
            if self.dense:
                yield it, rk, lab, None
            else:
                yield it, rk, lab, self.strong_pair(l0, l1) & self.strong_pair(l0, l2) & self.strong_pair(l1, l2)

    def decode(self, ranks: np.ndarray) -> np.ndarray:
        if not len(ranks):
            return np.zeros((0, 3), dtype=np.int64)
        cc = np.searchsorted(self.c3, ranks, side="right") - 1
        rem = ranks - self.c3[cc]
        bcode = np.searchsorted(self.b2, rem, side="right") - 1
        return np.stack([rem - self.b2[bcode], bcode, cc], axis=1)


def _triple_supports(
    obs: _Observed, ranks: _TripleRanks, n: int, t_min: int, complete: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Ranks of the kept triples (support ≥ ``t_min``) and their supports."""
    if complete:
        keep_t = np.arange(ranks.n_all) if n >= t_min else np.zeros(0, dtype=np.int64)
        return keep_t, np.full(len(keep_t), float(n))
    if ranks.dense:
        tri_cnt = np.zeros(ranks.n_all)
        for _, rk, _, _ in ranks.instances(obs, complete):
            tri_cnt += np.bincount(rk.ravel(), minlength=ranks.n_all)
        keep_t = np.flatnonzero(tri_cnt >= t_min)
        return keep_t, tri_cnt[keep_t]
    uniq, counts = [], []
    for _, rk, _, ok in ranks.instances(obs, complete):
        u, c = np.unique(rk[ok], return_counts=True)
        uniq.append(u)
        counts.append(c)
    u_all = np.concatenate(uniq) if uniq else np.zeros(0, dtype=np.int64)
    u, inv = np.unique(u_all, return_inverse=True)
    tot = np.bincount(inv, weights=np.concatenate(counts) if counts else None, minlength=len(u))
    return u[tot >= t_min], tot[tot >= t_min]


def _triple_moments(
    obs: _Observed, ranks: _TripleRanks, keep_t: np.ndarray, k: int, *, weights: np.ndarray | None, complete: bool
) -> np.ndarray:
    """Weighted label counts ``keep × K × K × K`` of the kept triples (codes of the kept triples only)."""
    t_acc = np.zeros(len(keep_t) * k**3)
    if not len(keep_t):
        return t_acc.reshape(0, k, k, k)
    if ranks.dense:
        compact = np.full(ranks.n_all, -1, dtype=np.int64)
        compact[keep_t] = np.arange(len(keep_t)) * k**3
    for it, rk, lab, _ in ranks.instances(obs, complete):
        if ranks.dense:
            idx = compact[rk]
            hit = idx >= 0
        else:
            idx = np.minimum(np.searchsorted(keep_t, rk), len(keep_t) - 1)
            hit = keep_t[idx] == rk
            idx = idx * k**3
        code = idx + (lab[0] * k + lab[1]) * k + lab[2]
        wt = None if weights is None else np.broadcast_to(weights[it][:, None], code.shape)
        if hit.all():
            t_acc += np.bincount(code.ravel(), weights=None if wt is None else wt.ravel(), minlength=len(t_acc))
        else:
            hit = np.broadcast_to(hit, code.shape)
            t_acc += np.bincount(code[hit], weights=None if wt is None else wt[hit], minlength=len(t_acc))
    return t_acc.reshape(len(keep_t), k, k, k)


def compute_moments(
    F: np.ndarray | LabelEntries,
    n_classes: int,
    *,
    weights: np.ndarray | None = None,
    min_pair_support: int | None = None,
    min_triple_support: int | None = None,
    max_triple_entries: int = 40_000_000,
) -> Moments:
    """Sample moments from ``F`` (learners × items, -1 = no response, or its :class:`LabelEntries`) with optional
    item weights.

    Each moment is normalised by its own (weighted) support; pairs/triples whose unweighted support
    (number of items) is below the minimum are dropped (spec §2.2.6).  Only co-occurring pairs and
    triples are ever enumerated: pairs from the sparse products ``Bᵀ B`` / ``Cᵀ W C`` of the response
    indicators, triples per item; with many learners a triple is counted only when its three pairs
    all reach the triple minimum (a triple's support never exceeds its pairs').
    """
    entries = as_entries(F)
    m_count, n = entries.shape
    k = int(n_classes)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (n,) or (w < 0).any():
        raise UserInputError("item weights must be one non-negative number per item.")
    p_min, t_min = default_min_support(k)
    p_min = p_min if min_pair_support is None else int(min_pair_support)
    t_min = t_min if min_triple_support is None else int(min_triple_support)
    obs = _Observed.from_entries(entries, w)
    mu, mu_ok = _first_order(obs, m_count, k)
    pair, S, pair_support, pkey, pc = _pair_moments(obs, n, m_count, k, p_min)

    ranks = _TripleRanks(m_count, strong=pkey[pc >= t_min])
    complete = bool(ranks.n_all) and entries.complete
    keep_t, support_t = _triple_supports(obs, ranks, n, t_min, complete)
    budget = max(1, max_triple_entries // k**3)
    if len(keep_t) > budget:  # [OURS] memory cap: keep the best-supported triples
        warnings.warn(
            f"moment matching kept the {budget:,} best-supported of {len(keep_t):,} learner triples (memory cap).",
            AggregationWarning,
            stacklevel=2,
        )
        best = np.sort(np.argsort(-support_t, kind="stable")[:budget])
        keep_t, support_t = keep_t[best], support_t[best]
    T3 = _triple_moments(obs, ranks, keep_t, k, weights=weights if weights is None else w, complete=complete)
    tot = T3.sum(axis=(1, 2, 3))
    good = tot > 0
    T3, keep_t, support_t = T3[good] / tot[good, None, None, None], keep_t[good], support_t[good]
    return Moments(
        n_learners=m_count,
        n_classes=k,
        mu=mu,
        mu_ok=mu_ok,
        pair=pair,
        S=S,
        triple=ranks.decode(keep_t),
        T3=T3,
        pair_support=pair_support,
        triple_support=support_t,
        min_pair_support=p_min,
        min_triple_support=t_min,
    )
