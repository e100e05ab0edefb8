"""Forward–backward and Viterbi for hidden Markov chains, batched over sequences (pure inference).

Traganitis & Giannakis App. A with the [FIX]ed orientation of spec ``sequential-networked.md`` §2.3: the
transition matrix is ``T[k_next, k_prev]`` (column-stochastic); forward ``α_{n+1} = b_{n+1} ⊙ (T α_n)``,
backward ``β_n = Tᵀ(b_{n+1} ⊙ β_{n+1})``, ``ξ_n(k,k') ∝ α_n(k) T[k',k] b_{n+1}(k') β_{n+1}(k')`` (pitfall P1).

Sequences are sorted by decreasing length and packed time-major without padding (:class:`Packing`), so
position t costs O(#sequences longer than t · K²); Rabiner scaling for forward–backward, log domain for
Viterbi.  Nothing here knows about annotators: the input is a per-position log-emission table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.methods.numerics import safe_log


@dataclass
class Packing:
    """Sequences sorted by decreasing length and stored time-major without padding: position t holds the
    ``active[t]`` sequences longer than t (a prefix of the sorted order) at rows ``offsets[t]:offsets[t+1]``."""

    perm: np.ndarray  # sorted position -> sequence index
    active: np.ndarray  # L
    offsets: np.ndarray  # L + 1
    seq_of: np.ndarray  # packed row -> sorted sequence position
    t_of: np.ndarray  # packed row -> time step

    @property
    def prev_rows(self) -> np.ndarray:
        """Packed row of the previous position for every row with t ≥ 1 (in packed order)."""
        later = self.t_of >= 1
        return self.offsets[self.t_of[later] - 1] + self.seq_of[later]

    def pack(self, padded: np.ndarray) -> np.ndarray:
        """``sequences × length × …`` → packed rows × …"""
        return padded[self.perm[self.seq_of], self.t_of]

    def unpack(self, x: np.ndarray, shape: tuple[int, int], fill: float = 0.0) -> np.ndarray:
        """Packed rows × … → ``shape`` (sequences × length) × …, padding set to ``fill``."""
        out = np.full(shape + x.shape[1:], fill, dtype=x.dtype)
        out[self.perm[self.seq_of], self.t_of] = x
        return out


def make_packing(lengths: np.ndarray) -> Packing:
    """The :class:`Packing` of sequences with the given lengths."""
    lengths = np.asarray(lengths, dtype=np.int64)
    perm = np.argsort(-lengths, kind="stable")
    lmax = int(lengths.max()) if len(lengths) else 0
    active = (lengths[perm][None, :] > np.arange(lmax)[:, None]).sum(axis=1)
    offsets = np.r_[0, np.cumsum(active)]
    t_of = np.repeat(np.arange(lmax), active)
    seq_of = np.arange(int(offsets[-1])) - np.repeat(offsets[:-1], active)
    return Packing(perm, active, offsets, seq_of, t_of)


@dataclass
class SequenceLayout:
    """Items arranged as a padded ``n_sequences × max_length`` grid (``index`` = item code, -1 = padding);
    ``packing`` / ``pack_items`` give the packed order used by the inference routines."""

    index: np.ndarray
    lengths: np.ndarray
    packing: Packing = field(init=False, repr=False)
    pack_items: np.ndarray = field(init=False, repr=False)  # item code of every packed row

    def __post_init__(self) -> None:
        self.packing = make_packing(self.lengths)
        self.pack_items = self.index[self.packing.perm[self.packing.seq_of], self.packing.t_of]

    @property
    def valid(self) -> np.ndarray:
        return np.arange(self.index.shape[1])[None, :] < self.lengths[:, None]

    def pad(self, per_item: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """``per_item`` (items × …) placed on the grid; padding gets ``fill``."""
        out = np.full(self.index.shape + per_item.shape[1:], fill, dtype=per_item.dtype)
        v = self.valid
        out[v] = per_item[self.index[v]]
        return out

    def transitions(self) -> tuple[np.ndarray, np.ndarray]:
        """(previous item, next item) codes of every within-sequence consecutive pair."""
        v = self.valid
        nxt = v[:, 1:]
        return self.index[:, :-1][nxt], self.index[:, 1:][nxt]

    def first_items(self) -> np.ndarray:
        """Item code at the first position of every sequence (in packed order)."""
        return self.pack_items[: self.packing.active[0]] if len(self.packing.active) else np.zeros(0, np.int64)


def layout_from_responses(resp: Responses) -> SequenceLayout:
    """Padded grid from ``item_order``/``sequence_bounds`` (positions sorted; gaps treated as adjacent)."""
    bounds = resp.sequence_bounds
    lengths = np.diff(bounds)
    n_seq, lmax = len(lengths), int(lengths.max()) if len(lengths) else 0
    index = np.full((n_seq, lmax), -1, dtype=np.int64)
    seq_of = np.repeat(np.arange(n_seq), lengths)
    pos_of = np.arange(resp.n_items) - np.repeat(bounds[:-1], lengths)
    index[seq_of, pos_of] = resp.item_order
    return SequenceLayout(index=index, lengths=lengths)


@dataclass
class PackedPosteriors:
    """Forward–backward on packed rows: posteriors, ``XI[k, k'] = Σ_n Pr(y_n = k, y_{n+1} = k' | F)``, log-likelihood
    per sorted sequence, and the scaled ``alpha``, ``beta``, scale factors ``c`` and ``w_t = b_t ⊙ β_t / c_t``."""

    posterior: np.ndarray
    xi_sum: np.ndarray
    log_likelihood: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray
    scale: np.ndarray
    w: np.ndarray


def forward_backward_packed(
    log_emission: np.ndarray, pk: Packing, transition: np.ndarray, start: np.ndarray
) -> PackedPosteriors:
    """Scaled forward–backward (A1–A2) on packed log-emissions (rows × K).
    ``log Pr(F) = Σ_n (log c_n + max_k L[n, k])`` per sequence."""
    act, off = pk.active, pk.offsets
    mx = log_emission.max(axis=1, keepdims=True)
    b = np.exp(log_emission - mx)
    alpha = np.empty_like(b)
    scale = np.empty(len(b))
    tt = np.ascontiguousarray(transition.T)
    a = start[None, :] * b[: act[0]]
    scale[: act[0]] = a.sum(axis=1)
    alpha[: act[0]] = a / scale[: act[0], None]
    for t in range(1, len(act)):  # positions, not responses
        na = act[t]
        cur, prev = slice(off[t], off[t] + na), slice(off[t - 1], off[t - 1] + na)
        a = b[cur] * (alpha[prev] @ tt)
        scale[cur] = a.sum(axis=1)
        alpha[cur] = a / scale[cur, None]
    beta = np.ones_like(b)
    w = np.zeros_like(b)
    for t in range(len(act) - 1, -1, -1):
        na = act[t]
        if t + 1 < len(act):
            nn = act[t + 1]
            beta[off[t] : off[t] + nn] = w[off[t + 1] : off[t + 1] + nn] @ transition  # β_t = Tᵀ(b ⊙ β)/c
        if t >= 1:
            cur = slice(off[t], off[t] + na)
            w[cur] = b[cur] * beta[cur] / scale[cur, None]
    post = alpha * beta
    post /= post.sum(axis=1, keepdims=True)
    later = pk.t_of >= 1
    xi_sum = (alpha[pk.prev_rows].T @ w[later]) * tt if later.any() else np.zeros((len(tt), len(tt)))
    loglik = np.bincount(pk.seq_of, weights=np.log(scale) + mx[:, 0], minlength=len(pk.perm))
    return PackedPosteriors(post, xi_sum, loglik, alpha, beta, scale, w)


def viterbi_packed(log_emission: np.ndarray, pk: Packing, transition: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Log-domain Viterbi (A3) on packed log-emissions; the state code of every packed row."""
    act, off = pk.active, pk.offsets
    log_t = safe_log(transition, 1e-300)
    d = safe_log(start, 1e-300)[None, :] + log_emission[: act[0]]
    back = np.zeros(log_emission.shape, dtype=np.int64)
    last = np.zeros(len(pk.perm), dtype=np.int64)
    for t in range(1, len(act)):
        na, pna = act[t], act[t - 1]
        if na < pna:  # sequences that ended at t-1
            last[na:pna] = d[na:pna].argmax(axis=1)
        cand = d[:na, :, None].transpose(0, 2, 1) + log_t[None, :, :]  # s, next, prev
        arg = cand.argmax(axis=2)
        back[off[t] : off[t] + na] = arg
        d = log_emission[off[t] : off[t] + na] + np.take_along_axis(cand, arg[:, :, None], axis=2)[:, :, 0]
    if len(act):
        last[: act[-1]] = d.argmax(axis=1)
    path = np.empty(len(log_emission), dtype=np.int64)
    state = np.zeros(0, dtype=np.int64)
    for t in range(len(act) - 1, -1, -1):
        na = act[t]
        nn = act[t + 1] if t + 1 < len(act) else 0
        new = np.empty(na, dtype=np.int64)
        new[nn:na] = last[nn:na]
        if nn:
            new[:nn] = back[off[t + 1] + np.arange(nn), state[:nn]]
        path[off[t] : off[t] + na] = new
        state = new
    return path


@dataclass
class ForwardBackward:
    """Forward–backward on padded ``S × L`` sequences (zeros at padding): posteriors ``S × L × K``, ``xi_sum``
    (K × K), log-likelihood per sequence, and on request ``xi`` (S × (L−1) × K × K), ``alpha``, ``beta``,
    ``scale``."""

    posterior: np.ndarray
    xi_sum: np.ndarray
    log_likelihood: np.ndarray
    xi: np.ndarray | None = None
    alpha: np.ndarray | None = None
    beta: np.ndarray | None = None
    scale: np.ndarray | None = None


def forward_backward(
    log_emission: np.ndarray, lengths: np.ndarray, transition: np.ndarray, start: np.ndarray, *, return_xi: bool = False
) -> ForwardBackward:
    """Rabiner-scaled forward–backward (App. A with the [FIX]ed orientation), batched over sequences.

    ``log_emission`` is ``S × L × K`` (``L[n, k] = Σ_m log Γ_m(f_m(x_n), k)``, ignored at padding);
    ``transition[k_next, k_prev]`` column-stochastic; ``start`` = p0.
    """
    s_count, lmax, k = log_emission.shape
    pk = make_packing(lengths)
    fb = forward_backward_packed(pk.pack(log_emission), pk, transition, start)
    loglik = np.empty(s_count)
    loglik[pk.perm] = fb.log_likelihood
    xi = None
    if return_xi and lmax > 1:
        later = pk.t_of >= 1
        xi_rows = fb.alpha[pk.prev_rows][:, :, None] * transition.T[None] * fb.w[later][:, None, :]
        xi = np.zeros((s_count, lmax - 1, k, k))
        xi[pk.perm[pk.seq_of[later]], pk.t_of[later] - 1] = xi_rows
    shape = (s_count, lmax)
    return ForwardBackward(
        pk.unpack(fb.posterior, shape),
        fb.xi_sum,
        loglik,
        xi,
        pk.unpack(fb.alpha, shape),
        pk.unpack(fb.beta, shape),
        pk.unpack(fb.scale, shape, 1.0),
    )


def viterbi(log_emission: np.ndarray, lengths: np.ndarray, transition: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Log-domain Viterbi (A3) for every sequence at once; returns ``S × L`` state codes (-1 at padding).

    ``d_1 = log p0 + L_1``; ``d_n(k) = L_n(k) + max_k' [d_{n-1}(k') + log T(k, k')]`` — the [FIX]ed (19).
    """
    s_count, lmax, _ = log_emission.shape
    pk = make_packing(lengths)
    path = viterbi_packed(pk.pack(log_emission), pk, transition, start)
    return pk.unpack(path, (s_count, lmax), -1)
