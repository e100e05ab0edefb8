"""Bradley–Terry over options with per-judge reliability and position bias, ties by Davidson (docs/JUDGES.md).

Each judgement c of judge j is, with probability r_j, *attentive*: Davidson's model on the shown pair with the
judge's position shift γ_j added to the first-shown option, d_c = θ_first − θ_second + γ_j; otherwise *random*:
first / second / tie with the judge's own proportions ρ_j (which absorb a careless judge's habit of picking the
first answer).  A judge who prefers at random gets r_j → 0 and so no weight on θ; one who picks the first-shown
option more than the strengths explain gets γ_j > 0 (or a lopsided ρ_j).  Mixture of a model and a noise
component as in Raykar et al. (2010) and crowd-kit's noisy BT (Bugakova et al. 2019), here fitted by EM: the
E-step is each judgement's posterior probability of being attentive, the M-step closed-form r_j and ρ_j (with
Beta(2, 2) and Dirichlet(2) priors) and Newton steps on (θ, γ, log ν) weighted by those posteriors
(:mod:`.davidson`).  The objective in the trace is the log posterior (log-likelihood + priors + ridge on θ, γ).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fusion_core.data.pairwise import TIE, PairwiseResponses, as_pairwise
from fusion_core.methods.em import EMSettings, EStep, run_em
from fusion_core.methods.em.squarem import run_squarem_lockstep
from fusion_core.methods.numerics import safe_log
from fusion_core.methods.pairwise.davidson import Problem, compress, design, grouped, log_probs, newton, use_jit
from fusion_core.methods.pairwise.results import PairwiseFit
from fusion_core.methods.params import Bool, Declared, Float, Int

RIDGE_POSITION = 1.0  # γ_j ~ N(0, 1) on the logit scale: a shift of 1 already moves P(first) from .5 to .73


@dataclass(frozen=True)
class BTState:
    x: np.ndarray  # θ (options) then γ (judges, when fitted)
    log_nu: float | None
    rel: np.ndarray
    rho: np.ndarray  # judges × outcomes (shown coordinates)


class BTJudgesModel:
    """The EM model (``e_step`` / ``m_step`` for :func:`~fusion_core.methods.em.run_em`)."""

    def __init__(self, data: PairwiseResponses, weight: np.ndarray, *, reliability: bool, position: bool, ridge: float):
        self.data = data
        self.w = weight
        self.y = data.shown_outcome.astype(np.int64)
        self.ties = data.has_ties
        self.k = 3 if self.ties else 2
        self.j = data.judge
        self.J = data.n_judges
        self.reliability = reliability
        self.X = design(data.first, data.second, data.n_options, data.judge if position else None, data.n_judges)
        self.ridge = np.concatenate(
            [np.full(data.n_options, ridge), np.full(self.X.width - data.n_options, RIDGE_POSITION)]
        )
        self.T = np.eye(self.k)[self.y]
        self.group, self.Xg = grouped(self.X)
        self.n_groups = len(self.Xg.cols)
        self.alpha = 1.0  # Dirichlet(2) on ρ_j: pseudo-count 1 per outcome
        self.jit = use_jit(data.n)

    def attentive_log(self, state: BTState) -> np.ndarray:
        lp = log_probs(self.Xg @ state.x, state.log_nu if self.ties else None)
        return lp[self.group, self.y]

    def e_step(self, state: BTState, temperature: float = 1.0) -> EStep:
        la = self.attentive_log(state)
        if self.reliability:
            lr = safe_log(state.rho)[self.j, self.y]
            a = safe_log(state.rel)[self.j] + la
            b = safe_log(1 - state.rel)[self.j] + lr
            mix = np.logaddexp(a, b)
            resp = np.exp(a - mix)
            prior = float(
                np.sum(safe_log(state.rel) + safe_log(1 - state.rel)) + self.alpha * np.sum(safe_log(state.rho))
            )
        else:
            mix, resp, prior = la, np.ones(len(la)), 0.0
        ll = float(np.sum(self.w * mix)) + prior - 0.5 * float(np.sum(self.ridge * state.x * state.x))
        return EStep(posterior=np.column_stack([resp, 1 - resp]), log_likelihood=ll, stats=(resp, state))

    def m_step(self, stats: Any) -> BTState:
        resp, old = stats
        rel, rho = old.rel, old.rho
        if self.reliability:
            wr = self.w * resp
            tot = np.bincount(self.j, weights=self.w, minlength=self.J)
            rel = np.clip((np.bincount(self.j, weights=wr, minlength=self.J) + 1.0) / (tot + 2.0), 1e-6, 1 - 1e-6)
            flat = np.bincount(self.j * self.k + self.y, weights=self.w - wr, minlength=self.J * self.k)
            cells = flat.reshape(self.J, self.k) + self.alpha
            rho = cells / cells.sum(axis=1, keepdims=True)
        T, W = compress(self.group, self.n_groups, self.T, self.w * resp)
        prob = Problem(self.Xg, T, W, self.ridge, self.ties)
        x, log_nu = newton(prob, old.x, old.log_nu, jit=self.jit)
        return BTState(x=x, log_nu=log_nu, rel=rel, rho=rho)

    def flat(self, state: BTState) -> np.ndarray:
        """Unconstrained coordinates for SQUAREM: θ, γ, log ν, logit r, log ρ."""
        nu = [] if state.log_nu is None else [state.log_nu]
        rel = np.log(state.rel) - np.log1p(-state.rel)
        return np.concatenate([state.x, nu, rel, np.log(state.rho).ravel()])

    def unflat(self, v: np.ndarray) -> BTState:
        p = self.X.width
        log_nu = None if not self.ties else float(np.clip(v[p], -20.0, 5.0))
        q = p + (1 if self.ties else 0)
        rel = np.clip(1 / (1 + np.exp(-v[q : q + self.J])), 1e-6, 1 - 1e-6)
        lr = v[q + self.J :].reshape(self.J, self.k)
        rho = np.exp(lr - lr.max(axis=1, keepdims=True))
        return BTState(v[:p].copy(), log_nu, rel, rho / rho.sum(axis=1, keepdims=True))

    def start(self) -> BTState:
        share = float(np.sum(self.w * (self.y == TIE)) / max(np.sum(self.w), 1e-12))
        log_nu = float(np.log(max(2 * share / max(1 - share, 1e-6), 1e-4))) if self.ties else None
        flat = np.bincount(self.j * self.k + self.y, weights=self.w, minlength=self.J * self.k)
        cells = flat.reshape(self.J, self.k) + self.alpha
        s0 = BTState(np.zeros(self.X.width), log_nu, np.full(self.J, 0.8), cells / cells.sum(axis=1, keepdims=True))
        return self.m_step((np.full(len(self.y), 0.8 if self.reliability else 1.0), s0))

    def position(self, state: BTState, n_options: int) -> np.ndarray:
        """P(first | equal options, decisive) − ½ under the fitted model, per judge."""
        gamma = state.x[n_options:] if len(state.x) > n_options else np.zeros(self.J)
        att = 1 / (1 + np.exp(-gamma)) - 0.5
        rnd = state.rho[:, 0] / (state.rho[:, 0] + state.rho[:, 1]) - 0.5
        return state.rel * att + (1 - state.rel) * rnd if self.reliability else att


class PairwiseBT(Declared):
    """Bradley–Terry (Davidson ties) over options, optionally with per-judge reliability and position bias
    (module docstring).  ``fit(data)`` → self with ``result_`` (:class:`PairwiseFit`) and ``scores_``.

    Examples
    --------
    >>> from fusion_core.simulate.pairwise import pairwise_panel
    >>> sim = pairwise_panel(n_comparisons=300, n_judges=4, reliability=[0.8, 0.8, 0.8, 0.0], seed=0)
    >>> fit = PairwiseBT().fit(sim.responses).result_
    >>> bool(fit.reliability[3] < 0.3 < fit.reliability[:3].min())
    True
    """

    name = "bt-judges"
    params = {
        "reliability": Bool(True, help="Fit each judge's reliability (a judge preferring at random gets no weight)."),
        "position_bias": Bool(True, help="Fit each judge's shift towards the first-shown option."),
        "use_confidence": Bool(True, help="Weigh each judgement by its confidence, when the data has one."),
        "ridge": Float(
            0.01, low=0.0, help="Ridge penalty on the strengths (keeps never-winning options finite).", advanced=True
        ),
        "tol": Float(
            1e-7, low=0.0, low_open=True, help="Relative change of the objective that stops EM.", advanced=True
        ),
        "max_iter": Int(500, low=1, help="Most EM iterations.", advanced=True),
    }

    def fit(self, data: Any, *, prompt_weight: np.ndarray | None = None, init: BTState | None = None) -> PairwiseBT:
        """Fit to pairwise judgements (a table or :class:`PairwiseResponses`); ``prompt_weight`` (one per prompt)
        multiplies every judgement of a prompt (the bootstrap's resampling counts); ``init`` starts EM there."""
        p = self._validated(self.name)
        d = as_pairwise(data)
        w = d.weights.copy() if p["use_confidence"] else np.ones(d.n)
        if prompt_weight is not None:
            w = w * prompt_weight[d.prompt]
        model = BTJudgesModel(d, w, reliability=p["reliability"], position=p["position_bias"], ridge=p["ridge"])
        state0 = model.start() if init is None else replace(init)
        settings = EMSettings(tol=p["tol"], max_iter=p["max_iter"], name=self.name, warn=init is None)
        if p["reliability"]:  # the mixture's EM is slow (linear rate): SQUAREM with its monotone safeguard
            run = run_squarem_lockstep([model], [state0], [settings], lambda _, st: [model.m_step(s) for s in st])[0]
        else:
            run = run_em(model, state0, settings)
        st = run.state
        theta = st.x[: d.n_options] - st.x[: d.n_options].mean()
        self.state_ = st
        self.result_ = PairwiseFit(
            method=self.name if (p["reliability"] or p["position_bias"]) else "bt",
            options=d.options,
            strength=theta,
            judges=d.judges,
            reliability=st.rel if p["reliability"] else np.ones(d.n_judges),
            position=model.position(st, d.n_options),
            tie_strength=float(np.exp(st.log_nu)) if st.log_nu is not None else 0.0,
            log_likelihood=tuple(run.log_likelihood),
            n_iter=run.n_iter,
            converged=run.converged,
        )
        self.scores_ = self.result_.scores
        return self


class PlainBT(PairwiseBT):
    """Davidson's Bradley–Terry with every judgement counted alike (no judge reliability, no position bias): the
    baseline the judge-aware models improve on."""

    name = "bt"
    params = {
        **PairwiseBT.params,
        "reliability": Bool(False, help="Fit each judge's reliability."),
        "position_bias": Bool(False, help="Fit each judge's shift towards the first-shown option."),
    }
