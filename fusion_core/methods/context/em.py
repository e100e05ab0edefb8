"""``context-em``'s EM models for the shared driver (:func:`fusion_core.methods.em.run_em`).

One model class, :class:`CurveModel`, with two kinds of curves: :class:`BinaryCurves` (one binary problem:
false-alarm and detection curves p_0k(x), p_1k(x); E-step eq. (7) in the log domain, M-step eq. (14)) and
:class:`ConfusionCurves` (per-class confusion curves π_k(x)[i, j], §9.2 option 2).  Both start from the paper's
curves (detection 0.8, false alarm 0.2; confusion diagonal 0.8) and follow one of the two variants of spec §4:

* ``shared_prior`` ([EXT]): one class prior re-estimated each M-step; the E-step under the initial curves gives
  the initial posteriors (a soft majority vote), then EM runs to the driver's convergence rule
  (:func:`run_shared_prior`);
* ``paper`` (Algorithm 1): a per-item prior φ_i(t) = the previous posterior, a fixed number of iterations, the
  decision from the last E-step and the reported curves from the last M-step (:func:`run_paper`).

Gold labels (item codes, class codes) are clamped in every E-step and contribute their complete-data term.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol

import numpy as np

from fusion_core.methods.base import Gold, posterior_terms
from fusion_core.methods.context.interior_point import MStepInfo
from fusion_core.methods.context.mstep import PairChains, binary_mstep, binary_msteps, confusion_mstep
from fusion_core.methods.em import EMRun, EMSettings, EStep, run_em, run_em_lockstep
from fusion_core.methods.em.squarem import run_squarem_lockstep
from fusion_core.methods.numerics import log_normalize


# ====================================================================== binary problem (eqs. (7), (14))
@dataclass
class BinaryResponses:
    """One binary problem: responses as item code, y ∈ {0, 1} ("reported the positive class") and pair id."""

    item: np.ndarray
    y: np.ndarray
    pid: np.ndarray
    n_items: int


def binary_log_likelihood(data: BinaryResponses, P: np.ndarray) -> np.ndarray:
    """L[t, i] = Σ_{responses on t} log P(y | true class i) with the curves ``P`` (2 × pairs) at each response's
    pair, items × 2."""
    p0 = P[0][data.pid]
    p1 = P[1][data.pid]
    y = data.y
    l0 = np.where(y == 1, np.log(p0), np.log1p(-p0))
    l1 = np.where(y == 1, np.log(p1), np.log1p(-p1))
    L = np.empty((data.n_items, 2))
    L[:, 0] = np.bincount(data.item, weights=l0, minlength=data.n_items)
    L[:, 1] = np.bincount(data.item, weights=l1, minlength=data.n_items)
    return L


def binary_e_step(data: BinaryResponses, P: np.ndarray, log_prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eq. (7) in the log domain.  ``log_prior``: 2-vector (shared prior) or items × 2 (paper's φ).
    Returns (posterior items × 2, per-item log normaliser)."""
    return log_normalize(binary_log_likelihood(data, P) + log_prior)


def binary_counts(data: BinaryResponses, gamma1: np.ndarray, npair: int) -> tuple[np.ndarray, np.ndarray]:
    """M-step statistics per pair: A[i] = Σ γ_i·y and B[i] = Σ γ_i·(1 − y) for true class i ∈ {0, 1}."""
    g1 = gamma1[data.item]
    g0 = 1.0 - g1
    y = data.y.astype(float)
    A = np.vstack(
        [np.bincount(data.pid, weights=g0 * y, minlength=npair), np.bincount(data.pid, weights=g1 * y, minlength=npair)]
    )
    B = np.vstack(
        [
            np.bincount(data.pid, weights=g0 * (1 - y), minlength=npair),
            np.bincount(data.pid, weights=g1 * (1 - y), minlength=npair),
        ]
    )
    return A, B


class Curves(Protocol):
    """One kind of reliability curve at the (worker, level) pairs (see the module docstring)."""

    eps: float

    def initial(self) -> np.ndarray: ...

    def initial_prior(self, per_item: bool) -> np.ndarray: ...

    def log_likelihood(self, values: np.ndarray) -> np.ndarray: ...

    def solve(self, posterior: np.ndarray) -> tuple[np.ndarray, MStepInfo]: ...

    def update_prior(self, posterior: np.ndarray, per_item: bool) -> np.ndarray: ...

    def project(self, values: np.ndarray) -> np.ndarray: ...

    def value_weights(self) -> tuple[np.ndarray, int]:
        """Responses at each curve value's pair (the values' shape) and the number of items."""
        ...


@dataclass
class BinaryCurves:
    """False-alarm and detection curves (2 × pairs) of one binary problem; ``c`` is 2 × workers."""

    data: BinaryResponses
    chains: PairChains
    c: np.ndarray
    eps: float
    discrete: bool

    def initial(self) -> np.ndarray:
        return np.vstack([np.full(self.chains.npair, 0.2), np.full(self.chains.npair, 0.8)])

    def initial_prior(self, per_item: bool) -> np.ndarray:
        if per_item:  # the paper's φ_i(0) = 0.6
            phi1 = np.full(self.data.n_items, 0.6)
            return np.column_stack([1 - phi1, phi1])
        return np.array([1 - 0.5, 0.5])

    def log_likelihood(self, values: np.ndarray) -> np.ndarray:
        return binary_log_likelihood(self.data, values)

    def solve(self, posterior: np.ndarray) -> tuple[np.ndarray, MStepInfo]:
        A, B = binary_counts(self.data, posterior[:, 1], self.chains.npair)
        return binary_mstep(self.chains, A, B, self.c, eps=self.eps, discrete=self.discrete)

    def update_prior(self, posterior: np.ndarray, per_item: bool) -> np.ndarray:
        if per_item:
            phi1 = np.clip(posterior[:, 1], self.eps, 1 - self.eps)
            return np.column_stack([1 - phi1, phi1])
        prior1 = float(np.clip(posterior[:, 1].mean(), self.eps, 1 - self.eps))
        return np.array([1 - prior1, prior1])

    def project(self, values: np.ndarray) -> np.ndarray:
        """Extrapolated curves (SQUAREM) back into (0, 1): p and 1 − p floored at ε and renormalised, as a
        2-label confusion row (:meth:`ConfusionCurves.project`) is."""
        hit = np.clip(values, self.eps, 1.0)
        return hit / (hit + np.clip(1.0 - values, self.eps, 1.0))

    def value_weights(self) -> tuple[np.ndarray, int]:
        n = np.bincount(self.data.pid, minlength=self.chains.npair).astype(float)
        return np.vstack([n, n]), self.data.n_items


# ====================================================================== confusion curves (§9.2 option 2)
@dataclass
class ConfusionCurves:
    """Confusion matrices at the pairs (pairs × true × reported); ``c`` is classes × workers (one row per true
    class); ``pos`` the positive class for 2 labels (the paper's φ_pos(0) = 0.6)."""

    item: np.ndarray
    pid: np.ndarray
    label: np.ndarray
    n_items: int
    chains: PairChains
    c: np.ndarray
    eps: float
    discrete: bool
    n_classes: int
    pos: int = 1

    def initial(self) -> np.ndarray:
        J = self.n_classes
        Pi = np.full((self.chains.npair, J, J), 0.2 / (J - 1))
        Pi[:, np.arange(J), np.arange(J)] = 0.8
        return Pi

    def initial_prior(self, per_item: bool) -> np.ndarray:
        J = self.n_classes
        if not per_item:
            return np.full(J, 1.0 / J)
        phi = np.full((self.n_items, J), 1.0 / J)
        if J == 2:
            phi[:, self.pos], phi[:, 1 - self.pos] = 0.6, 0.4
        return phi

    def log_likelihood(self, values: np.ndarray) -> np.ndarray:
        """L[t, i] = Σ_k log π_k(X(t))[i, ŷ_k(t)], items × classes."""
        logPi = np.log(values)
        L = np.empty((self.n_items, self.n_classes))
        for i in range(self.n_classes):  # classes, not responses
            L[:, i] = np.bincount(self.item, weights=logPi[self.pid, i, self.label], minlength=self.n_items)
        return L

    def solve(self, posterior: np.ndarray) -> tuple[np.ndarray, MStepInfo]:
        J, npair = self.n_classes, self.chains.npair
        key = self.pid * J + self.label
        N = np.stack(
            [np.bincount(key, weights=posterior[self.item, i], minlength=npair * J).reshape(npair, J) for i in range(J)]
        )
        return confusion_mstep(self.chains, N, self.c, eps=self.eps, discrete=self.discrete, pos=self.pos)

    def update_prior(self, posterior: np.ndarray, per_item: bool) -> np.ndarray:
        if per_item:
            phi = np.clip(posterior, self.eps, 1 - self.eps)
            return phi / phi.sum(axis=1, keepdims=True)
        prior = np.clip(posterior.mean(axis=0), self.eps, 1 - self.eps)
        return prior / prior.sum()

    def project(self, values: np.ndarray) -> np.ndarray:
        """Extrapolated confusion rows (SQUAREM) floored at ε and renormalised onto the simplex."""
        Pi = np.clip(values, self.eps, 1.0)
        return Pi / Pi.sum(axis=2, keepdims=True)

    def value_weights(self) -> tuple[np.ndarray, int]:
        n = np.bincount(self.pid, minlength=self.chains.npair).astype(float)
        J = self.n_classes  # half weight: a binary curve value is a 2-label row (1 − p, p) whose entries both move
        return np.broadcast_to(n[:, None, None] / 2.0, (len(n), J, J)), self.n_items


# ====================================================================== the EM model
class CurveState(NamedTuple):
    """Curves at the pairs and the class prior (shared prior: classes; paper: the per-item φ, items × classes)."""

    values: np.ndarray
    prior: np.ndarray


class CurveStats(NamedTuple):
    posterior: np.ndarray
    previous: np.ndarray  # the curves that produced the posterior (for the largest change per M-step)


@dataclass
class MStepLog:
    """Solver diagnostics over the M-steps of one run: largest certificate gap, barrier fallbacks and the largest
    change of any curve value per M-step."""

    gap: float = 0.0
    n_fallback: int = 0
    max_change: list[float] = field(default_factory=list)

    def add(self, info: MStepInfo, old: np.ndarray, new: np.ndarray) -> None:
        self.gap = max(self.gap, info.gap)
        self.n_fallback += info.n_fallback
        self.max_change.append(float(np.max(np.abs(new - old))) if new.size else 0.0)


@dataclass
class CurveModel:
    """A context-curve model for the EM driver (module docstring)."""

    curves: Curves
    per_item_prior: bool = False
    gold: Gold | None = None
    log: MStepLog = field(default_factory=MStepLog)
    _sqrt_w: np.ndarray | None = field(default=None, repr=False)

    def initial_state(self) -> CurveState:
        return CurveState(self.curves.initial(), self.curves.initial_prior(self.per_item_prior))

    def e_step(self, state: CurveState, temperature: float = 1.0) -> EStep:
        joint = self.curves.log_likelihood(state.values) + np.log(state.prior)
        post, terms = posterior_terms(joint, self.gold, temperature)
        return EStep(posterior=post, log_likelihood=float(terms.sum()), stats=CurveStats(post, state.values))

    def m_step(self, stats: CurveStats) -> CurveState:
        values, info = self.curves.solve(stats.posterior)
        self.log.add(info, stats.previous, values)
        return CurveState(values, self.curves.update_prior(stats.posterior, self.per_item_prior))

    def _scale(self, state: CurveState) -> np.ndarray:
        """√(responses at the pair) per curve value and √(items) for the prior entries (1 where 0)."""
        if self._sqrt_w is None:
            w, n_items = self.curves.value_weights()
            both = np.concatenate([np.ravel(w), np.full(state.prior.size, float(n_items))])
            self._sqrt_w = np.sqrt(np.where(both > 0, both, 1.0))
        return self._sqrt_w

    def flat(self, state: CurveState) -> np.ndarray:
        """Curves and shared class prior as one vector for SQUAREM's step length, each curve value weighted by
        √(its pair's responses): the norm is then that of the curves under the annotators' response distribution
        over the context, the same whether a curve is stored at one level or repeated over many (c = 0 and a
        constant context give the same run, oracle O26)."""
        return np.concatenate([state.values.ravel(), state.prior.ravel()]) * self._scale(state)

    def unflat(self, vector: np.ndarray) -> CurveState:
        """A state from :meth:`flat`'s layout, projected onto the domain of the E-step (curves floored at ε on both
        sides, confusion rows on the floored simplex, prior floored at ε and normalised)."""
        like = self.initial_state()
        vector = vector / self._scale(like)
        n = like.values.size
        prior = np.clip(vector[n:], self.curves.eps, 1.0)
        return CurveState(self.curves.project(vector[:n].reshape(like.values.shape)), prior / prior.sum())


def run_shared_prior(
    model: CurveModel, *, tol: float, max_iter: int, name: str, accelerate: bool = False
) -> EMRun[CurveState]:
    """EM to convergence from the posteriors of the initial curves (the ``shared_prior`` variant); with
    ``accelerate`` SQUAREM with its monotone safeguard (:mod:`fusion_core.methods.em.squarem`)."""
    first = model.e_step(model.initial_state())
    settings = EMSettings(tol=tol, max_iter=max_iter, name=name)
    if accelerate:
        return run_squarem_lockstep(
            [model], [model.m_step(first.stats)], [settings], lambda idx, stats: [model.m_step(stats[0])]
        )[0]
    return run_em(model, model.m_step(first.stats), settings)


def binary_m_steps(models: list[CurveModel], stats: list[CurveStats]) -> list[CurveState]:
    """The M-steps of several binary problems on the same pairs (one-vs-rest) with one stacked chain solve
    (:func:`~fusion_core.methods.context.mstep.binary_msteps`); the batch's solver diagnostics go to the first
    model's log (the reported gap is a maximum and the fallbacks a sum over the models)."""
    curves = [m.curves for m in models]
    assert all(isinstance(cv, BinaryCurves) for cv in curves)
    bc = [cv for cv in curves if isinstance(cv, BinaryCurves)]
    counts = [binary_counts(cv.data, st.posterior[:, 1], cv.chains.npair) for cv, st in zip(bc, stats)]
    outs, info = binary_msteps(bc[0].chains, counts, bc[0].c, eps=bc[0].eps, discrete=bc[0].discrete)
    states = []
    for k, (m, st, values) in enumerate(zip(models, stats, outs)):
        m.log.add(info if k == 0 else MStepInfo(), st.previous, values)
        states.append(CurveState(values, m.curves.update_prior(st.posterior, m.per_item_prior)))
    return states


def run_shared_prior_lockstep(
    models: list[CurveModel], *, tol: float, max_iter: int, names: list[str], accelerate: bool = False
) -> list[EMRun[CurveState]]:
    """:func:`run_shared_prior` of every one-vs-rest problem, advanced in lockstep so that each iteration's M-steps
    share one interior-point run (same runs as one at a time; issue 11: 22 labels × ~160 iterations)."""
    firsts = [m.e_step(m.initial_state()) for m in models]
    states0 = binary_m_steps(models, [f.stats for f in firsts])
    settings = [EMSettings(tol=tol, max_iter=max_iter, name=n) for n in names]
    run = run_squarem_lockstep if accelerate else run_em_lockstep
    return run(models, states0, settings, lambda idx, stats: binary_m_steps([models[q] for q in idx], stats))


def run_paper(model: CurveModel, *, n_iter: int, final_estep: bool, name: str) -> EMRun[CurveState]:
    """Algorithm 1: ``n_iter`` E-steps (each followed by an M-step) from the initial curves; the decision is the
    last E-step's posterior (or one more E-step under the final curves with ``final_estep``)."""
    run: EMRun[Any] = run_em(model, model.initial_state(), EMSettings(tol=0.0, max_iter=n_iter, name=name, warn=False))
    state = model.m_step(run.estep.stats)  # the last M-step gives the reported curves
    estep = model.e_step(state) if final_estep else run.estep
    return replace(run, state=state, estep=estep, converged=True)
