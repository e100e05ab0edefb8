"""The one EM driver every EM method uses.

A model supplies two steps (protocol :class:`EMModel`):

* ``e_step(state, temperature=1.0) -> EStep``: posteriors (tempered when ``temperature`` ≠ 1), the sufficient
  statistics its M-step needs, and the observed-data objective **at T = 1** (log-likelihood plus any MAP prior
  term), so that the trace is comparable across iterations;
* ``m_step(stats) -> state``: new parameters;
* optionally ``recycle(estep)``: called once the M-step has used ``estep``, so the model may reuse its arrays (the
  last E-step of a run is never recycled).

``EMSettings.rule`` replaces the driver's convergence rule by a model's own (e.g. a peer library's loop, for
drop-in parity): it is asked after every M-step and may stop the run there, before the next E-step.

The driver owns everything else, the same way for every family: the optional annealing phase
(:mod:`~fusion_core.methods.em.annealing`), the iteration limit, the convergence rule (relative change of the
objective ≤ ``tol``·max(1, |objective|)), the objective trace, a :class:`~fusion_core.errors.ConvergenceWarning`
when ``max_iter`` is reached first, progress reports, and several starts (:func:`best_run`), whose latent classes
are aligned to a reference labelling before they are compared, so a label-swapped mirror optimum (same
likelihood) is never returned in place of the oriented one.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from fusion_core import progress
from fusion_core.errors import ConvergenceWarning
from fusion_core.methods.em.annealing import AnnealSchedule, anneal_phase
from fusion_core.methods.results import AnnealingTrace, Fit, Restarts

S = TypeVar("S")


@dataclass
class EStep:
    """What an E-step returns: ``posterior`` (items × classes, tempered when T ≠ 1, gold rows clamped),
    ``log_likelihood`` (objective at T = 1), ``stats`` for the M-step (default: the posterior) and, for models
    that can be annealed, ``log_joint`` (items × classes log p(x_i, k))."""

    posterior: np.ndarray
    log_likelihood: float
    stats: Any = None
    log_joint: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.stats is None:
            self.stats = self.posterior


class EMModel(Protocol[S]):
    def e_step(self, state: S, temperature: float = 1.0) -> EStep: ...

    def m_step(self, stats: Any) -> S: ...


@dataclass(frozen=True)
class RuleStop:
    """A run stopped by ``EMSettings.rule``: why (plain words), and whether the rule counts that as converged."""

    reason: str
    converged: bool


StopRule = Callable[[EStep, Any, Any], RuleStop | None]
"""``rule(estep, before, after)``, asked after each M-step with the E-step it used and the parameters before and
after it: ``None`` to go on, a :class:`RuleStop` to stop there (the run then keeps ``after`` and ``estep``)."""


@dataclass(frozen=True)
class EMSettings:
    """Stopping rule and options of one EM run.  ``name`` is used in progress reports and warnings.  With a
    ``rule`` (:data:`StopRule`) the driver's own convergence rule is off and a run that reaches ``max_iter`` is not
    warned about (the rule reports its own stops)."""

    tol: float = 1e-7
    max_iter: int = 500
    anneal: AnnealSchedule | None = None
    name: str = "EM"
    warn: bool = True
    rule: StopRule | None = None


@dataclass
class EMRun(Generic[S]):
    """One finished EM run: final parameters, the T = 1 E-step under them, the objective trace (one entry per
    E-step), iterations, whether the convergence rule was met, and the annealing phase if any.  After a stop by
    ``EMSettings.rule``: the last M-step's parameters, the E-step that M-step used, and the rule's ``stop_reason``."""

    state: S
    estep: EStep
    log_likelihood: list[float]
    n_iter: int
    converged: bool
    annealing: AnnealingTrace | None = None
    label: str = ""
    stop_reason: str = ""

    @property
    def posterior(self) -> np.ndarray:
        return self.estep.posterior

    @property
    def final(self) -> float:
        return self.log_likelihood[-1] if self.log_likelihood else -np.inf

    def to_fit(self, **fields: Any) -> Fit:
        """The :class:`Fit` of this run: its posterior, objective trace, iterations, convergence and annealing phase,
        plus the method's own ``fields`` (confusion, class_prior, annotator columns …)."""
        return Fit(
            posterior=self.posterior,
            log_likelihood=self.log_likelihood,
            n_iter=self.n_iter,
            converged=self.converged,
            annealing=self.annealing,
            **fields,
        )


def converged(trace: Sequence[float], tol: float) -> bool:
    """The driver's convergence rule: the last relative change of the objective is at most ``tol``."""
    if len(trace) < 2:
        return False
    return abs(trace[-1] - trace[-2]) <= tol * max(1.0, abs(trace[-1]))


def run_em(model: EMModel[S], state0: S, settings: EMSettings) -> EMRun[S]:
    """EM from parameters ``state0``: (annealing phase,) then E-step, M-step, E-step … until the objective settles.

    Iteration 1 is the E-step under ``state0`` (callers starting from posteriors pass ``m_step(posterior)``), so
    ``n_iter`` counts E-steps and ``max_iter = 1`` means one M-step and one E-step from the initial posteriors.
    """
    max_iter = int(settings.max_iter)
    ann = None
    state = state0
    if settings.anneal is not None:
        out = anneal_phase(model, state0, settings.anneal)
        state, ann = out.state, out.trace
    e = model.e_step(state)
    trace = [float(e.log_likelihood)]
    it = 1
    done = False
    listening = progress.listening()
    recycle = getattr(model, "recycle", None)  # optional: the model may reuse a finished E-step's buffers
    rule = settings.rule
    while it < max_iter:
        it += 1
        new = model.m_step(e.stats)
        if rule is not None and (stop := rule(e, state, new)) is not None:
            return EMRun(new, e, trace, it - 1, stop.converged, annealing=ann, stop_reason=stop.reason)
        state = new
        if recycle is not None:
            recycle(e)
        e = model.e_step(state)
        trace.append(float(e.log_likelihood))
        if listening:
            progress.report(settings.name, it / max_iter, iteration=it, log_likelihood=trace[-1])
        if rule is None and converged(trace, settings.tol):
            done = True
            break
    if not done and rule is None:
        _warn_unconverged(settings, trace)
    return EMRun(state=state, estep=e, log_likelihood=trace, n_iter=it, converged=done, annealing=ann)


def _warn_unconverged(settings: EMSettings, trace: list[float]) -> None:
    """The one ConvergenceWarning of an EM run that stopped at ``max_iter`` (stack level: the estimator's fit)."""
    max_iter = int(settings.max_iter)
    if not settings.warn or max_iter <= 1:
        return
    change = abs(trace[-1] - trace[-2]) / max(1.0, abs(trace[-1])) if len(trace) >= 2 else float("nan")
    warnings.warn(
        f"{settings.name} stopped after {max_iter} iterations before converging (last relative change "
        f"{change:.1e}, tolerance {settings.tol:g}); raise max_iter or loosen tol.",
        ConvergenceWarning,
        stacklevel=3,
    )


def run_em_lockstep(
    models: Sequence[EMModel[S]],
    states0: Sequence[S],
    settings: Sequence[EMSettings],
    m_steps: Callable[[list[int], list[Any]], list[S]],
) -> list[EMRun[S]]:
    """Several independent EM runs (no annealing) advanced in lockstep: run ``q`` is exactly
    ``run_em(models[q], states0[q], settings[q])``, but each iteration the M-steps of the runs still going are made
    by one call ``m_steps(runs, stats)`` (so a family can batch its solver across runs, e.g. one-vs-rest)."""
    n = len(models)
    es = [m.e_step(s) for m, s in zip(models, states0)]
    states = list(states0)
    traces = [[float(e.log_likelihood)] for e in es]
    its = [1] * n
    done = [False] * n
    going = [q for q in range(n) if its[q] < int(settings[q].max_iter)]
    while going:
        new = m_steps(going, [es[q].stats for q in going])
        for q, st in zip(going, new):
            its[q] += 1
            states[q] = st
            es[q] = models[q].e_step(st)
            traces[q].append(float(es[q].log_likelihood))
            done[q] = converged(traces[q], settings[q].tol)
        going = [q for q in going if not done[q] and its[q] < int(settings[q].max_iter)]
    for q in range(n):
        if not done[q]:
            _warn_unconverged(settings[q], traces[q])
    return [
        EMRun(state=states[q], estep=es[q], log_likelihood=traces[q], n_iter=its[q], converged=done[q])
        for q in range(n)
    ]


# ------------------------------------------------------------------------------------- several starts
def class_alignment(posterior: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The relabelling of latent classes that best matches ``reference`` (items × classes, e.g. majority-vote
    shares): returns ``source`` with ``aligned[:, j] = posterior[:, source[j]]`` (Hungarian matching on the soft
    agreement ``posteriorᵀ · reference``; the identity when nothing is gained)."""
    k = posterior.shape[1]
    agree = posterior.T @ reference  # latent class × reference class
    from scipy.optimize import linear_sum_assignment  # lazy: scipy.optimize costs 0.2 s of start-up

    rows, cols = linear_sum_assignment(-agree)
    source = np.empty(k, dtype=np.int64)
    source[cols] = rows
    ident = np.arange(k)
    if agree[ident, ident].sum() >= agree[source, ident].sum() - 1e-12:
        return ident
    return source


class Permutable(Protocol[S]):
    def permute(self, state: S, source: np.ndarray) -> S: ...


def align_run(model: Permutable[S], run: EMRun[S], reference: np.ndarray) -> EMRun[S]:
    """``run`` with its latent classes relabelled to match ``reference`` (state, posterior and statistics)."""
    source = class_alignment(run.posterior, reference)
    if np.array_equal(source, np.arange(len(source))):
        return run
    e = run.estep
    stats = e.stats[:, source] if e.stats is e.posterior else e.stats
    new_e = replace(
        e,
        posterior=e.posterior[:, source],
        stats=stats,
        log_joint=None if e.log_joint is None else e.log_joint[:, source],
    )
    return replace(run, state=model.permute(run.state, source), estep=new_e)


def best_run(
    runs: Sequence[EMRun[S]], *, model: Permutable[S] | None = None, reference: np.ndarray | None = None
) -> tuple[EMRun[S], Restarts | None]:
    """The run with the highest final objective.  With a ``reference`` labelling (and a ``model`` that can permute
    its states) every run's classes are first aligned to it, so mirror optima with equal likelihood come back in
    the same orientation; ties go to the earliest run."""
    if reference is not None and model is not None:
        runs = [align_run(model, r, reference) for r in runs]
    finals = np.array([r.final for r in runs], dtype=float)
    best = int(np.argmax(finals))  # the first of equal maxima
    info = Restarts(log_likelihoods=finals, best=best, labels=tuple(r.label for r in runs)) if len(runs) > 1 else None
    return runs[best], info
