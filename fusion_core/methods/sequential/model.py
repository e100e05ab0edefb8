"""The ensemble HMM's EM steps: Baum–Welch (Alg. 1 of Traganitis & Giannakis, App. A; spec §2.3.4) as an
:class:`~fusion_core.methods.em.EMModel` for the shared driver.

E-step: forward–backward on all sequences (:mod:`.inference`), returning the item posteriors and the pairwise
expectations ``XI[k, k'] = Σ_n Pr(y_n = k, y_{n+1} = k' | F)`` the M-step needs.  M-step: Γ by (27) and
``T_new[k, k'] = Σ_n ξ_n(k', k) / Σ_n q_{nk'}`` (the [FIX]ed (26)), with Dirichlet ``smoothing`` on both count
tables (P5); p0 re-estimated as the mean first-position posterior when ``start_mode='estimate'``.

[OURS] With the annotator-Markov emission (:mod:`.emission`) the M-step is
``Γ_w[c, k, ·] ∝ C[w, c, k, ·] + smoothing + β μ_w[k, ·]`` with a FIXED prior mean μ (a proper Dirichlet prior,
so MAP-EM stays monotone).  The objective the driver monitors is log Pr(F) plus the smoothing/prior log-density.
Gold tokens are clamped in the emission table, so forward–backward, XI and Viterbi condition on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.methods.base import Gold
from fusion_core.methods.dawid_skene import expected_counts, normalize_confusion, unary_log_likelihood
from fusion_core.methods.em import EMRun, EMSettings, EStep, run_em
from fusion_core.methods.moment_matching import floor_columns
from fusion_core.methods.numerics import safe_log
from fusion_core.methods.sequential.emission import ResponseContext, context_counts, context_log_likelihood
from fusion_core.methods.sequential.inference import SequenceLayout, forward_backward_packed, viterbi_packed

T_FLOOR = 1e-6  # transition entries are floored here at the start of Baum–Welch (P5)
CLAMPED = -1e30  # log-emission of the classes a gold token does not have


@dataclass(frozen=True)
class HMMState:
    """HMM parameters: ``confusion`` workers × true × reported (context-free Γ, eq. 39), ``transition``
    ``T[next, prev]``, ``start`` p0, and for the annotator-Markov emission ``context_confusion``
    workers × (K+1 previous labels) × true × reported."""

    confusion: np.ndarray
    transition: np.ndarray
    start: np.ndarray
    context_confusion: np.ndarray | None = None


@dataclass(frozen=True)
class HMMStats:
    """E-step statistics: item posteriors, ``xi_sum`` (K × K), first-position posteriors (packed order), the
    observed ``log Pr(F)`` (no prior terms) and the p0 they were computed with."""

    posterior: np.ndarray
    xi_sum: np.ndarray
    first: np.ndarray
    log_evidence: float
    start: np.ndarray


def floor_transition(t: np.ndarray) -> np.ndarray:
    """Columns of ``T`` floored at :data:`T_FLOOR` and renormalised."""
    return floor_columns(t[None], T_FLOOR)[0]


def log_emission(resp: Responses, state: HMMState, ctx: ResponseContext | None = None) -> np.ndarray:
    """``L[n, k]`` (items × K): Σ over item n's responses of log Γ (or log Γ_w[c, k, l] with contexts)."""
    if state.context_confusion is not None:
        if ctx is None:
            raise ValueError("a context-dependent emission needs the response contexts")
        return context_log_likelihood(ctx, state.context_confusion)
    return unary_log_likelihood(resp, state.confusion)


def clamp_emission(log_e: np.ndarray, gold: Gold | None) -> np.ndarray:
    """Gold tokens keep only their known class (the others get :data:`CLAMPED`): inference conditions on them."""
    if gold is None or not len(gold[0]):
        return log_e
    out = np.array(log_e, dtype=float)
    keep = out[gold[0], gold[1]]
    out[gold[0]] = CLAMPED
    out[gold[0], gold[1]] = keep
    return out


def hmm_e_step(
    resp: Responses,
    layout: SequenceLayout,
    state: HMMState,
    ctx: ResponseContext | None = None,
    gold: Gold | None = None,
) -> HMMStats:
    """Forward–backward on all sequences: item posteriors, XI, first-position posteriors and log Pr(F)."""
    pk, rows = layout.packing, layout.pack_items
    le = clamp_emission(log_emission(resp, state, ctx), gold)[rows]
    fb = forward_backward_packed(le, pk, state.transition, state.start)
    q_items = np.zeros((resp.n_items, resp.n_classes))
    q_items[rows] = fb.posterior
    return HMMStats(q_items, fb.xi_sum, fb.posterior[: pk.active[0]], float(fb.log_likelihood.sum()), state.start)


def hmm_viterbi(
    resp: Responses,
    layout: SequenceLayout,
    state: HMMState,
    ctx: ResponseContext | None = None,
    gold: Gold | None = None,
    *,
    rank: np.ndarray | None = None,
) -> np.ndarray:
    """Viterbi label code of every item.  With ``rank`` (:func:`fusion_core.methods.ties.class_priority`) the
    classes are visited in priority order, so exactly tied paths go to the preferred classes, not to low codes."""
    rows = layout.pack_items
    le = clamp_emission(log_emission(resp, state, ctx), gold)[rows]
    order = np.argsort(rank, kind="stable") if rank is not None else np.arange(resp.n_classes)
    out = np.zeros(resp.n_items, dtype=np.int64)
    path = viterbi_packed(le[:, order], layout.packing, state.transition[np.ix_(order, order)], state.start[order])
    out[rows] = order[path]
    return out


@dataclass
class BaumWelch:
    """Baum–Welch for the driver (see the module docstring).  ``prior_mean`` μ is required with ``context``."""

    resp: Responses
    layout: SequenceLayout
    smoothing: float = 0.01
    start_mode: str = "stationary"
    context: ResponseContext | None = None
    context_prior: float = 50.0
    prior_mean: np.ndarray | None = None
    gold: Gold | None = None
    alpha: np.ndarray | None = field(init=False, default=None)  # Dirichlet parameters of the context tables

    def __post_init__(self) -> None:
        if self.context is not None:
            if self.prior_mean is None:
                raise ValueError("the annotator-Markov emission needs a prior mean")
            self.alpha = self.smoothing + self.context_prior * self.prior_mean[:, None]

    def prepare(self, init: HMMState) -> HMMState:
        """The start as Baum–Welch uses it: Γ renormalised, T floored (P5), p0 normalised, and for the Markov
        emission context tables (when ``init`` has none: μ for every previous label)."""
        ctx_conf = None
        if self.context is not None:
            assert self.prior_mean is not None  # checked in __post_init__
            ctx_conf = init.context_confusion
            if ctx_conf is None:
                ctx_conf = np.repeat(self.prior_mean[:, None], self.resp.n_classes + 1, axis=1)
        conf0 = normalize_confusion(init.confusion, 0.0)
        return HMMState(conf0, floor_transition(init.transition), init.start / init.start.sum(), ctx_conf)

    def e_step(self, state: HMMState, temperature: float = 1.0) -> EStep:
        """Forward–backward; the objective is log Pr(F) plus the smoothing/prior log-density (not annealed)."""
        if temperature != 1.0:
            raise NotImplementedError("Baum–Welch is not annealed")
        stats = hmm_e_step(self.resp, self.layout, state, self.context, self.gold)
        ll = stats.log_evidence
        if self.alpha is not None and state.context_confusion is not None:
            ll += float((self.alpha * safe_log(state.context_confusion)).sum()) + self.smoothing * float(
                safe_log(state.transition).sum()
            )
        elif self.smoothing > 0:
            ll += self.smoothing * (safe_log(state.confusion).sum() + safe_log(state.transition).sum())
        return EStep(posterior=stats.posterior, log_likelihood=float(ll), stats=stats)

    def m_step(self, stats: HMMStats) -> HMMState:
        """Γ by (27), T by the [FIX]ed (26), p0 re-estimated or kept; Markov-emission tables with their prior."""
        q = stats.posterior
        conf = normalize_confusion(expected_counts(self.resp, q), self.smoothing)
        ctx_conf = None
        if self.context is not None:
            ctx_conf = normalize_confusion(context_counts(self.context, q) + self.alpha, 0.0)
        xi = stats.xi_sum + self.smoothing
        t_new = (xi / xi.sum(axis=1, keepdims=True)).T
        start = stats.start
        if self.start_mode == "estimate":
            start = stats.first.mean(axis=0) + 1e-12
            start = start / start.sum()
        return HMMState(conf, t_new, start, ctx_conf)


def baum_welch(
    resp: Responses,
    layout: SequenceLayout,
    init: HMMState,
    *,
    smoothing: float = 0.01,
    start_mode: str = "stationary",
    tol: float = 1e-7,
    max_iter: int = 500,
    context: ResponseContext | None = None,
    context_prior: float = 50.0,
    prior_mean: np.ndarray | None = None,
    gold: Gold | None = None,
    name: str = "Baum–Welch",
    warn: bool = True,
) -> EMRun[HMMState]:
    """Alg. 1 from ``init`` through the shared EM driver: the E-step at the (prepared) start, then ``max_iter``
    M-step/E-step rounds at most (the driver starts from the first M-step, as DS EM starts from posteriors).

    With ``context`` the prior mean μ is ``prior_mean`` or, by default, the start's confusion; the returned
    state's ``confusion`` is then the context-free M-step (27) at the final posteriors.  ``run.estep.stats``
    holds the final :class:`HMMStats` (``log_evidence`` = log Pr(F) without prior terms)."""
    mu = prior_mean if prior_mean is not None or context is None else normalize_confusion(init.confusion, 0.0)
    model = BaumWelch(resp, layout, smoothing, start_mode, context, context_prior, mu, gold)
    first = model.e_step(model.prepare(init))
    run = run_em(model, model.m_step(first.stats), EMSettings(tol=tol, max_iter=max_iter, name=name, warn=warn))
    if context is not None:  # report the context-free confusion at the final posteriors
        conf = normalize_confusion(expected_counts(resp, run.posterior), smoothing)
        run = replace(run, state=replace(run.state, confusion=conf))
    return run


def evaluate(
    resp: Responses,
    layout: SequenceLayout,
    init: HMMState,
    gold: Gold | None = None,
) -> EMRun[HMMState]:
    """No refinement (``hmm-mm``): the E-step at ``init`` with its transition floored, as a zero-iteration run."""
    state = HMMState(init.confusion, floor_transition(init.transition), init.start)
    stats = hmm_e_step(resp, layout, state, gold=gold)
    e = EStep(posterior=stats.posterior, log_likelihood=stats.log_evidence, stats=stats)
    return EMRun(state=state, estep=e, log_likelihood=[stats.log_evidence], n_iter=0, converged=True)
