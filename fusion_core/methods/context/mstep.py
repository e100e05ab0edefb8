"""The M-steps of ``context-em`` over (annotator, level) pairs (spec ``context.md`` §5.2–§5.5, §9.2 option 2).

Every annotator's pairs form one chain per curve (sorted levels).  A curve with c = 0 pools all levels (the
context-blind Dawid–Skene estimate); pairs without weight are dropped from the chain program and filled afterwards
by the interpolation (17)–(19) (§5.2); the remaining chains of all curves are solved together, by the binary chain
solver (:mod:`.chain`) for detection/false-alarm curves or the simplex-chain solver (:mod:`.simplex`) for confusion
rows.  Categorical contexts use the exact discrete-metric programs (§5.4).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from fusion_core.methods.context.chain import discrete_mstep, lipschitz_chain_mstep
from fusion_core.methods.context.interior_point import MStepInfo
from fusion_core.methods.context.model import interpolate_levels, interpolate_rows
from fusion_core.methods.context.simplex import categorical_simplex_mstep, floored_simplex, lipschitz_simplex_mstep


class PairChains:
    """(worker, level) pairs sorted by worker then level, one chain per worker: ``wstarts`` (first pair of each
    worker), ``chain_worker``, ``chain_of`` (chain of each pair) and ``xp`` (context level of each pair)."""

    def __init__(self, pair_worker: np.ndarray, pair_level: np.ndarray, levels: np.ndarray):
        self.npair = len(pair_worker)
        first = np.r_[True, pair_worker[1:] != pair_worker[:-1]] if self.npair else np.zeros(0, bool)
        self.wstarts = np.flatnonzero(first)
        self.chain_worker = pair_worker[self.wstarts]
        self.chain_of = np.cumsum(first) - 1
        self.xp = levels[pair_level]

    def links(self, idx: np.ndarray, cw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Link bounds c × (x_next − x) between consecutive selected pairs ``idx`` of the same chain (``cw``: c per
        chain) and the first position of every chain among them."""
        ch = self.chain_of[idx]
        xs = self.xp[idx]
        same = np.zeros(len(idx), bool)
        np.equal(ch[1:], ch[:-1], out=same[:-1])
        h = np.zeros(len(idx))
        h[:-1] = cw[ch[:-1]] * (xs[1:] - xs[:-1])
        first = np.ones(len(idx), bool)
        first[1:] = ~same[:-1]
        return np.where(same, h, 0.0), np.flatnonzero(first)

    def unobserved(self, W: np.ndarray, idx: np.ndarray) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Chains holding a selected pair that also have pairs without weight: (chain, weighted pairs, others)."""
        if not (W <= 0).any():  # every pair has weight (the usual case)
            return
        constrained = np.isin(self.chain_of, np.unique(self.chain_of[idx]))
        missing = np.flatnonzero(constrained & (W <= 0))
        for ch in np.unique(self.chain_of[missing]):  # chains (workers), not responses
            k = np.flatnonzero(self.chain_of == ch)
            ok, miss = k[W[k] > 0], k[W[k] <= 0]
            if len(ok):
                yield int(ch), ok, miss


def _batched(blocks: Sequence[tuple[np.ndarray, ...]]) -> tuple[list[np.ndarray], np.ndarray]:
    """Concatenated chain blocks (values…, h, starts) with the starts shifted to the stacked positions."""
    sizes = [len(b[0]) for b in blocks]
    offsets = np.r_[0, np.cumsum(sizes)[:-1]]
    cols = [np.concatenate([b[j] for b in blocks]) for j in range(len(blocks[0]) - 1)]
    return cols, np.concatenate([b[-1] + off for b, off in zip(blocks, offsets)])


def binary_mstep(
    chains: PairChains, A: np.ndarray, B: np.ndarray, c: np.ndarray, *, eps: float, discrete: bool
) -> tuple[np.ndarray, MStepInfo]:
    """Eq. (14) for both curves: ``A``, ``B`` are 2 × pairs expected counts of "reported positive" / "reported
    negative" under true class 0 (false-alarm curve) and 1 (detection curve); ``c`` is 2 × workers.  Returns the
    curves at the pairs (2 × pairs) and the solver diagnostics."""
    outs, info = binary_msteps(chains, [(A, B)], c, eps=eps, discrete=discrete)
    return outs[0], info


def binary_msteps(
    chains: PairChains, counts: Sequence[tuple[np.ndarray, np.ndarray]], c: np.ndarray, *, eps: float, discrete: bool
) -> tuple[list[np.ndarray], MStepInfo]:
    """:func:`binary_mstep` of several independent binary problems on the same pairs (one-vs-rest), their chain
    programs stacked into one interior-point run (the chains are solved independently, so each problem's curves
    are those of its own M-step; the batch only shares the solver's per-iteration overhead)."""
    outs = [np.empty((2, chains.npair)) for _ in counts]
    if chains.npair == 0:
        return outs, MStepInfo()
    blocks, places = [], []
    for q, (A, B) in enumerate(counts):
        out = outs[q]
        for i in (0, 1):
            W = A[i] + B[i]
            cw = c[i][chains.chain_worker]
            sA = np.add.reduceat(A[i], chains.wstarts)
            sW = np.add.reduceat(W, chains.wstarts)
            pooled = np.clip(sA / np.where(sW > 0, sW, 1.0), eps, 1 - eps)
            out[i] = np.where(sW > 0, pooled, 0.5)[chains.chain_of]  # c = 0: the pooled (Dawid–Skene) estimate
            idx = np.flatnonzero((W > 0) & (cw > 0)[chains.chain_of])
            if not len(idx):
                continue
            places.append((q, i, idx))
            if discrete:  # categorical context: one small exact problem per chain (§5.4)
                for k in np.unique(chains.chain_of[idx]):
                    part = idx[chains.chain_of[idx] == k]
                    out[i, part] = discrete_mstep(A[i][part], B[i][part], float(cw[k]), eps)
                continue
            blocks.append((A[i][idx], B[i][idx], *chains.links(idx, cw)))
    info = MStepInfo()
    if blocks:
        (a, b, h), starts = _batched(blocks)
        p, info = lipschitz_chain_mstep(a, b, h, starts, eps=eps)
        at = 0
        for q, i, idx in places:
            if not discrete:
                outs[q][i, idx] = p[at : at + len(idx)]
                at += len(idx)
    for q, i, idx in places:  # pairs without weight in constrained chains: interpolation (§5.2, §7)
        A, B = counts[q]
        out = outs[q]
        for ch, ok, miss in chains.unobserved(A[i] + B[i], idx):
            cv = c[i][chains.chain_worker[ch]]
            fill = interpolate_levels(chains.xp[ok], out[i, ok], cv, chains.xp[miss], discrete=discrete)
            out[i, miss] = np.clip(fill, eps, 1 - eps)
    return outs, info


def confusion_mstep(
    chains: PairChains, N: np.ndarray, c: np.ndarray, *, eps: float, discrete: bool, pos: int = 1
) -> tuple[np.ndarray, MStepInfo]:
    """M-step of every confusion row (worker k, true class i): ``N`` is J × pairs × J (true, pair, reported)
    expected counts, ``c`` is J × workers.  Returns π at the pairs (pairs × J × J) and the solver diagnostics.
    Categorical contexts: c ≥ 1 decouples categories, J = 2 uses the exact binary window program (positive class
    ``pos``) and J > 2 the all-pairs program :func:`~.simplex.categorical_simplex_mstep`."""
    J, npair, _ = N.shape
    out = np.empty((npair, J, J))
    if npair == 0:
        return out, MStepInfo()
    blocks, places = [], []
    for i in range(J):
        Ni = N[i]
        cw = c[i][chains.chain_worker]
        tot = np.add.reduceat(Ni, chains.wstarts, axis=0)
        has = tot.sum(axis=1) > 0
        pooled = np.full(tot.shape, 1.0 / J)
        if has.any():
            pooled[has] = floored_simplex(tot[has], eps)
        out[:, i, :] = pooled[chains.chain_of]  # c = 0: the Dawid–Skene row
        idx = np.flatnonzero((Ni.sum(axis=1) > 0) & (cw > 0)[chains.chain_of])
        if not len(idx):
            continue
        places.append((i, idx))
        if discrete:
            _categorical_rows(out, chains, Ni, i, idx, cw=cw, eps=eps, pos=pos)
            continue
        blocks.append((Ni[idx], *chains.links(idx, cw)))
    info = MStepInfo()
    if blocks:
        (n_, h), starts = _batched(blocks)
        if J == 2:  # a two-class row is the binary chain program in π_1 (its floors are the box ε ≤ π_1 ≤ 1 − ε)
            p1, info = lipschitz_chain_mstep(n_[:, 1], n_[:, 0], h, starts, eps=eps)
            P = np.stack([1.0 - p1, p1], axis=1)
        else:
            P, info = lipschitz_simplex_mstep(n_, h, starts, eps=eps)
        at = 0
        for i, idx in places:
            out[idx, i, :] = P[at : at + len(idx)]
            at += len(idx)
    for i, idx in places:  # pairs without weight in constrained rows: interpolation (§5.2, §7)
        for ch, ok, miss in chains.unobserved(N[i].sum(axis=1), idx):
            cv = float(c[i][chains.chain_worker[ch]])
            out[miss, i, :] = interpolate_rows(
                chains.xp[ok], out[ok, i, :], cv, chains.xp[miss], mode="paper", discrete=discrete, eps=eps, pos=pos
            )
    return out, info


def _categorical_rows(
    out: np.ndarray,
    chains: PairChains,
    Ni: np.ndarray,
    i: int,
    idx: np.ndarray,
    *,
    cw: np.ndarray,
    eps: float,
    pos: int,
) -> None:
    """Confusion row i of every worker for a categorical context (§5.4), written into ``out``."""
    J = Ni.shape[1]
    for ch in np.unique(chains.chain_of[idx]):  # workers, not responses
        part = idx[chains.chain_of[idx] == ch]
        cv = float(cw[ch])
        if cv >= 1.0:
            out[part, i, :] = floored_simplex(Ni[part], eps)
        elif J == 2:
            p = discrete_mstep(Ni[part, pos], Ni[part, 1 - pos], cv, eps)
            out[part, i, pos] = p
            out[part, i, 1 - pos] = 1.0 - p
        else:
            out[part, i, :] = categorical_simplex_mstep(Ni[part], cv, eps)
