"""Dawid–Skene for pairwise judgements, with a Bradley–Terry prior on the true preferences (docs/JUDGES.md).

Each comparison item i = (prompt, options lo < hi) has a latent true preference t_i ∈ {lo better, hi better[, tie]}
with prior Davidson(θ_lo − θ_hi, ν) (:mod:`.davidson`).  Judge j reports in *shown* coordinates with its own
confusion matrix π_j[s, y] (s = first-shown better / second-shown better / tie; y = first / second / tie), so a
judge who picks the first-shown answer has a heavy first column — position bias is part of the confusion, as in
Dawid & Skene (1979) with the classes re-expressed in shown order per judgement.  EM: the E-step is the items'
posterior q_i(t) ∝ prior_i(t) Π_c π_{j_c}[s_c(t), y_c] (log space, one ``np.bincount`` per class); the M-step
counts π_j from q (Dirichlet(1 + α) smoothing, in the objective) and takes Newton steps on (θ, log ν) with q as soft
targets.  Started from the judges' weighted vote shares, so the solution is the one aligned with the majority
(the mirror solution, every judge adversarial, has the same likelihood up to the prior).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fusion_core.data.pairwise import TIE, as_pairwise
from fusion_core.methods.em import EMSettings, EStep
from fusion_core.methods.em.squarem import run_squarem_lockstep
from fusion_core.methods.numerics import PROB_FLOOR, log_normalize, safe_log
from fusion_core.methods.pairwise.davidson import Problem, design, grouped, log_probs, newton, use_jit
from fusion_core.methods.pairwise.kernels import ds_e_step, ds_m_step
from fusion_core.methods.pairwise.results import PairwiseFit
from fusion_core.methods.params import Bool, Declared, Float, Int

SWAP = np.array([1, 0, 2])  # a truth in item coordinates seen in the other order
LOG_FLOOR = float(np.log(PROB_FLOOR))


@dataclass(frozen=True)
class DSState:
    theta: np.ndarray
    log_nu: float | None
    log_conf: np.ndarray  # judges × true (shown) × reported (shown), log probabilities


class PairwiseDSModel:
    """The EM model (``e_step`` / ``m_step`` for the driver; ``flat`` / ``unflat`` for SQUAREM).

    A judgement enters the E-step through its *kind* (judge, whether the item's lower-coded option was shown first,
    reported outcome) and the M-step through the confusion cell its kind and the item's truth t select; both are
    fixed, so they are coded once: the E-step sums each item's judgements' log π[cell] with one ``np.add.reduceat``
    over the judgements sorted by item, the M-step counts the cells with one ``np.bincount``, and the strengths'
    Newton step works on the distinct option pairs (:func:`.davidson.grouped`)."""

    def __init__(self, data: Any, weight: np.ndarray, prompt_weight: np.ndarray, *, ridge: float, smoothing: float):
        self.d = data
        self.item, self.item_prompt, self.lo, self.hi = data.items()
        self.n_items = len(self.lo)
        self.wc = weight  # an item's evidence (the posterior does not depend on how often the item was drawn)
        self.iw = prompt_weight[self.item_prompt]  # how often each item counts (bootstrap draws)
        self.w = weight * prompt_weight[data.prompt]
        self.ties = data.has_ties
        k = self.k = 3 if self.ties else 2
        self.y = data.shown_outcome.astype(np.int64)
        self.lo_first = data.first == self.lo[self.item]
        self.J = data.n_judges
        # s_c(t): the shown-coordinate truth of judgement c when the item's truth is t
        t = np.arange(k)
        self.s = np.where(self.lo_first[:, None], t[None, :], SWAP[t][None, :])
        cell = (data.judge[:, None] * k + self.s) * k + self.y[:, None]  # judgements × truths, into π.ravel()
        self.order = np.argsort(self.item, kind="stable")  # judgements grouped by item (every item has one)
        self.starts = np.flatnonzero(np.r_[True, np.diff(self.item[self.order]) != 0])
        self.cell_by_item = cell[self.order]
        self.wc_sorted = np.ascontiguousarray(self.wc[self.order], dtype=float)
        self.wc_by_item = self.wc_sorted[:, None]
        self.cells = cell
        self.n_cells = self.J * k * k
        self.X = design(self.lo, self.hi, data.n_options, None, 0)
        self.group, self.Xg = grouped(self.X)  # items with the same pair share the prior
        self.n_groups = len(self.Xg.cols)
        self.W = np.bincount(self.group, weights=self.iw, minlength=self.n_groups)  # per pair: summed item weight
        self.target_index = (self.group[:, None] * k + t).ravel()
        self.ridge = np.full(data.n_options, ridge)
        self.alpha = smoothing
        self.jit = use_jit(data.n)

    def log_prior(self, state: DSState) -> np.ndarray:
        return log_probs(self.Xg @ state.theta, state.log_nu if self.ties else None)[self.group]

    def e_step(self, state: DSState, temperature: float = 1.0) -> EStep:
        if self.jit:
            log_nu = state.log_nu if state.log_nu is not None and self.ties else 0.0
            post, ll = ds_e_step(self.Xg.cols, self.Xg.signs, state.theta, log_nu, self.ties, self.group,
                                 self.starts, self.cell_by_item, self.wc_sorted, state.log_conf.ravel(), self.iw)  # fmt: skip
        else:
            lj = log_probs(self.Xg @ state.theta, state.log_nu if self.ties else None)[self.group]
            lj += np.add.reduceat(state.log_conf.ravel()[self.cell_by_item] * self.wc_by_item, self.starts, axis=0)
            post, norm = log_normalize(lj)
            ll = float(self.iw @ norm)
        prior = self.alpha * float(state.log_conf.sum()) - 0.5 * float(self.ridge @ (state.theta * state.theta))
        return EStep(posterior=post, log_likelihood=float(ll) + prior, stats=(post, state))

    def m_step(self, stats: Any) -> DSState:
        post, old = stats
        if self.jit:
            log_conf, T = ds_m_step(post, self.item, self.w, self.cells, self.J, self.alpha, PROB_FLOOR, self.group,
                                    self.iw, self.W)  # fmt: skip
        else:
            weights = (post[self.item] * self.w[:, None]).ravel()
            flat = np.bincount(self.cells.ravel(), weights=weights, minlength=self.n_cells)
            wt = np.bincount(
                self.target_index, weights=(post * self.iw[:, None]).ravel(), minlength=self.n_groups * self.k
            )
            cells = flat.reshape(self.J, self.k, self.k) + self.alpha
            log_conf = safe_log(cells / cells.sum(axis=2, keepdims=True))
            T = wt.reshape(self.n_groups, self.k) / np.maximum(self.W, 1e-300)[:, None]
        prob = Problem(self.Xg, T, self.W, self.ridge, self.ties)
        theta, log_nu = newton(prob, old.theta, old.log_nu, jit=self.jit)
        return DSState(theta, log_nu, log_conf)

    def flat(self, state: DSState) -> np.ndarray:
        """Unconstrained coordinates for SQUAREM: θ, log ν, log π."""
        nu = [] if state.log_nu is None else [state.log_nu]
        return np.concatenate([state.theta, nu, state.log_conf.ravel()])

    def unflat(self, v: np.ndarray) -> DSState:
        p = self.d.n_options
        log_nu = float(np.clip(v[p], -20.0, 5.0)) if self.ties else None
        lc = v[p + (1 if self.ties else 0) :].reshape(self.J, self.k, self.k)
        lc = lc - lc.max(axis=2, keepdims=True)
        lc = lc - np.log(np.exp(lc).sum(axis=2, keepdims=True))
        return DSState(v[:p].copy(), log_nu, np.maximum(lc, LOG_FLOOR))

    def start(self) -> DSState:
        y_lo = self.d.lo_outcome()
        votes = np.bincount(self.item * self.k + y_lo, weights=self.w, minlength=self.n_items * self.k)
        votes = votes.reshape(self.n_items, self.k)
        post = (votes + 0.5) / (votes + 0.5).sum(axis=1, keepdims=True)
        share = float(np.mean(y_lo == TIE))
        log_nu = float(np.log(max(2 * share / max(1 - share, 1e-6), 1e-4))) if self.ties else None
        flat = np.full((self.J, self.k, self.k), -np.log(self.k))
        return self.m_step((post, DSState(np.zeros(self.d.n_options), log_nu, flat)))

    def reliability(self, state: DSState) -> tuple[np.ndarray, np.ndarray]:
        """Per judge: P(first | first better) + P(second | second better) − 1 and the position bias
        ½(P(first | first better) + P(first | second better)) − ½, both among decisive reports."""
        c = np.exp(state.log_conf)[:, :2, :2]
        c = c / c.sum(axis=2, keepdims=True)
        return c[:, 0, 0] + c[:, 1, 1] - 1, 0.5 * (c[:, 0, 0] + c[:, 1, 0]) - 0.5


class PairwiseDS(Declared):
    """Dawid–Skene over pairwise items with a Bradley–Terry prior (module docstring); ``fit(data)`` → self with
    ``result_`` (:class:`PairwiseFit`, including ``item_posterior``) and ``scores_``.

    Examples
    --------
    >>> from fusion_core.simulate.pairwise import pairwise_panel
    >>> sim = pairwise_panel(n_comparisons=300, n_judges=4, position_bias=[0.25, 0, 0, 0], seed=0)
    >>> fit = PairwiseDS().fit(sim.responses).result_
    >>> bool(fit.position[0] > 0.1 > abs(fit.position[1:]).max())
    True
    """

    name = "ds-pairwise"
    params = {
        "use_confidence": Bool(True, help="Weigh each judgement by its confidence, when the data has one."),
        "smoothing": Float(1.0, low=0.0, help="Dirichlet pseudo-count added to every confusion cell.", advanced=True),
        "ridge": Float(0.01, low=0.0, help="Ridge penalty on the strengths.", advanced=True),
        "tol": Float(
            1e-7, low=0.0, low_open=True, help="Relative change of the objective that stops EM.", advanced=True
        ),
        "max_iter": Int(300, low=1, help="Most EM iterations.", advanced=True),
    }

    def fit(self, data: Any, *, prompt_weight: np.ndarray | None = None, init: DSState | None = None) -> PairwiseDS:
        """Fit to pairwise judgements; ``prompt_weight`` multiplies every judgement and item of a prompt."""
        p = self._validated(self.name)
        d = as_pairwise(data)
        pw = np.ones(d.n_prompts) if prompt_weight is None else prompt_weight
        w = d.weights if p["use_confidence"] else np.ones(d.n)
        model = PairwiseDSModel(d, w, pw, ridge=p["ridge"], smoothing=p["smoothing"])
        state0 = model.start() if init is None else init
        settings = EMSettings(tol=p["tol"], max_iter=p["max_iter"], name=self.name, warn=init is None)
        # EM's rate is linear (the judges' confusions and the strengths pull on each other): SQUAREM with its
        # monotone safeguard takes a third of the M-steps to the same fixed point
        run = run_squarem_lockstep([model], [state0], [settings], lambda _, st: [model.m_step(s) for s in st])[0]
        st = run.state
        rel, pos = model.reliability(st)
        self.state_, self.model_ = st, model
        self.result_ = PairwiseFit(
            method=self.name,
            options=d.options,
            strength=st.theta - st.theta.mean(),
            judges=d.judges,
            reliability=rel,
            position=pos,
            tie_strength=float(np.exp(st.log_nu)) if st.log_nu is not None else 0.0,
            log_likelihood=tuple(run.log_likelihood),
            n_iter=run.n_iter,
            converged=run.converged,
            item_prompt=model.item_prompt,
            item_lo=model.lo,
            item_hi=model.hi,
            item_posterior=run.posterior,
        )
        self.scores_ = self.result_.scores
        return self
