"""SQUAREM acceleration of EM runs with a monotone safeguard (Varadhan & Roland 2008, scheme SqS3).

One cycle from parameters θ0 makes two plain EM steps θ1 = M(θ0), θ2 = M(θ1), extrapolates along the squared
iteration

    r = θ1 − θ0,  v = θ2 − 2 θ1 + θ0,  α = −‖r‖ / ‖v‖ (at most −1),  θ' = θ0 − 2 α r + α² v

(α = −1 gives θ' = θ2, i.e. no extrapolation) and makes one more EM step θ3 = M(θ') from it, which brings the
parameters back into the model's feasible set.  **Monotone safeguard:** θ3 is accepted only when its
log-likelihood is at least that of θ2; otherwise the cycle ends at the plain EM iterate θ2.  The objective trace
therefore holds only plain EM iterates and accepted θ3, and never decreases more than an exact EM step would.
The largest |α| starts at 1 and is multiplied by 4 each time it is reached and divided by 4 on a rejection (the
``step.max`` rule of the authors' SQUAREM package).

A model supplies, beyond ``e_step`` and ``m_step``: ``flat(state)`` (the parameters as one vector) and
``unflat(vector)`` (a state from a vector, projected onto the parameter domain the E-step needs, e.g.
probabilities clipped into [ε, 1 − ε]).  Runs advance in lockstep like :func:`~.driver.run_em_lockstep`: every
round makes exactly one M-step of every run still going, by one call ``m_steps(runs, stats)``.

Counting: ``n_iter`` = 1 + the number of M-steps made (plain, extrapolated and rejected ones alike, so that
``max_iter`` bounds the work as in plain EM); ``log_likelihood`` has one entry per accepted iterate.  The
convergence rule is the driver's, applied after every accepted iterate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from fusion_core.methods.em.driver import EMRun, EMSettings, EStep, _warn_unconverged, converged, run_em

S = TypeVar("S")

STEP_FACTOR = 4.0  # the authors' ``mstep``: growth (and shrink) factor of the largest step length


class Extrapolable(Protocol[S]):
    def e_step(self, state: S, temperature: float = 1.0) -> EStep: ...

    def m_step(self, stats: Any) -> S: ...

    def flat(self, state: S) -> np.ndarray: ...

    def unflat(self, vector: np.ndarray) -> S: ...


@dataclass
class _Cycle(Generic[S]):
    """One run's place in its SQUAREM cycle: phase 0 (next M-step gives θ1), 1 (θ2) or 2 (θ3 from θ')."""

    state: S  # last accepted iterate
    estep: EStep  # its E-step
    trace: list[float]
    phase: int = 0
    its: int = 1
    done: bool = False
    step_max: float = 1.0
    theta: list[np.ndarray] = field(default_factory=list)  # θ0, θ1 (flat) of the current cycle
    fallback: tuple[Any, EStep] | None = None  # θ2 and its E-step while θ3 is being made
    pending: EStep | None = None  # the E-step whose statistics the next M-step uses


def squarem_alpha(r: np.ndarray, v: np.ndarray, step_max: float) -> float:
    """SqS3 step length α = −‖r‖/‖v‖, clipped to [−step_max, −1] (−1 when v = 0 or not finite)."""
    # einsum, not np.linalg.norm: BLAS dot spawns threads, 60 ms for a 33k vector on a loaded 2-core machine vs 0.1 ms
    nr, nv = float(np.sqrt(np.einsum("i,i->", r, r))), float(np.sqrt(np.einsum("i,i->", v, v)))
    if not (nv > 0 and np.isfinite(nr) and np.isfinite(nv)):
        return -1.0
    return float(np.clip(-nr / nv, -step_max, -1.0))


def run_squarem_lockstep(
    models: Sequence[Extrapolable[S]],
    states0: Sequence[S],
    settings: Sequence[EMSettings],
    m_steps: Callable[[list[int], list[Any]], list[S]],
) -> list[EMRun[S]]:
    """SQUAREM-accelerated EM runs from parameters ``states0``, advanced in lockstep (module docstring)."""
    runs: list[_Cycle[S]] = []
    for m, s in zip(models, states0):
        e = m.e_step(s)
        runs.append(_Cycle(s, e, [float(e.log_likelihood)], pending=e))
    going = [q for q in range(len(runs)) if runs[q].its < int(settings[q].max_iter)]
    while going:
        new = m_steps(going, [runs[q].pending.stats for q in going])  # type: ignore[union-attr]
        for q, st in zip(going, new):
            _advance(models[q], runs[q], st, settings[q])
        going = [q for q in going if not runs[q].done and runs[q].its < int(settings[q].max_iter)]
    out = []
    for q, run in enumerate(runs):
        if not run.done:
            _warn_unconverged(settings[q], run.trace)
        out.append(
            EMRun(state=run.state, estep=run.estep, log_likelihood=run.trace, n_iter=run.its, converged=run.done)
        )
    return out


def _accept(run: _Cycle[S], state: S, e: EStep, tol: float) -> None:
    run.state, run.estep = state, e
    run.trace.append(float(e.log_likelihood))
    run.done = converged(run.trace, tol)


def _advance(model: Extrapolable[S], run: _Cycle[S], new: S, settings: EMSettings) -> None:
    """Take one M-step's result ``new`` into the run's cycle and prepare the statistics of its next M-step."""
    run.its += 1
    e = model.e_step(new)
    if run.phase == 2:  # θ3 = M(θ'): keep it only if it does not lose likelihood against θ2
        assert run.fallback is not None
        s2, e2 = run.fallback
        run.fallback = None
        if float(e.log_likelihood) >= float(e2.log_likelihood):
            _accept(run, new, e, settings.tol)
        else:
            run.step_max = max(1.0, run.step_max / STEP_FACTOR)
            run.state, run.estep = s2, e2  # θ2 is already in the trace
        run.phase, run.pending = 0, run.estep
        return
    prev = model.flat(run.state)  # θ0 in phase 0, θ1 in phase 1
    _accept(run, new, e, settings.tol)
    run.pending = e
    if run.phase == 0:
        run.theta = [prev]
        run.phase = 1
        return
    # phase 1: θ2 = new; extrapolate from θ0, θ1, θ2
    t0, t1, t2 = run.theta[0], prev, model.flat(new)
    run.theta = []
    run.phase = 0
    if run.done:
        return
    r, v = t1 - t0, t2 - 2.0 * t1 + t0
    alpha = squarem_alpha(r, v, run.step_max)
    if alpha == -run.step_max:
        run.step_max *= STEP_FACTOR
    if alpha == -1.0:  # no extrapolation: θ' = θ2, whose E-step is the pending one
        return
    prime = model.unflat(t0 - 2.0 * alpha * r + alpha * alpha * v)
    run.fallback = (new, e)
    run.pending = model.e_step(prime)
    run.phase = 2


def run_em_extrapolated(model: Extrapolable[S], state0: S, settings: EMSettings) -> EMRun[S]:
    """EM from ``state0`` in cycles of one *plain* EM step (two E-steps through :func:`~.driver.run_em`); every
    cycle after the first starts from the squared extrapolation (the SqS3 step above) of the previous cycle's three
    iterates θ, M(θ), M(M(θ)).  The run stops when a cycle's plain step meets the driver's convergence rule, so the
    test is exactly a plain EM run's (on a plain step, same ``tol``) and the result is a plain EM iterate; only the
    starts of the cycles are extrapolated.  Safeguard: an extrapolated start whose objective is below the last
    accepted iterate's is dropped for M(M(θ)) and the step limit shrinks, so the trace (accepted iterates only) never
    decreases.  ``n_iter`` counts every E-step (dropped ones too), bounded by ``max_iter``.  Used by the incremental
    Dawid–Skene update, whose warm start leaves one slow global mode (the untouched items lagging the batch)."""
    trace: list[float] = []
    n_iter, step_max = 0, STEP_FACTOR
    theta, plain = state0, state0
    last: EMRun[S] | None = None
    while n_iter < settings.max_iter:
        cycle = replace(settings, max_iter=min(2, settings.max_iter - n_iter), anneal=None, warn=False)
        run = run_em(model, theta, cycle)
        n_iter += run.n_iter
        if last is not None and theta is not plain and run.log_likelihood[0] < trace[-1]:
            step_max = max(1.0, step_max / STEP_FACTOR)  # overshot: continue from the plain iterate instead
            theta = plain
            continue
        trace += run.log_likelihood
        last = run
        if run.converged:
            break
        plain = model.m_step(run.estep.stats)
        t0, t1, t2 = model.flat(theta), model.flat(run.state), model.flat(plain)
        r, v = t1 - t0, t2 - 2.0 * t1 + t0
        alpha = squarem_alpha(r, v, step_max)
        if alpha == -step_max:
            step_max *= STEP_FACTOR
        theta = plain if alpha == -1.0 else model.unflat(t0 - 2.0 * alpha * r + alpha * alpha * v)
    assert last is not None  # max_iter ≥ 1: the first cycle is always accepted
    if not last.converged:
        _warn_unconverged(settings, trace)
    return EMRun(state=last.state, estep=last.estep, log_likelihood=trace, n_iter=n_iter, converged=last.converged)
