"""GLAD: Generative model of Labels, Abilities and Difficulties (Whitehill, Ruvolo, Wu, Bergsma & Movellan,
NIPS 2009).

Model (paper eq. 1, multi-class form of §3): annotator j has ability ``α_j`` (negative = adversarial), item i has
inverse difficulty ``β_i = exp(b_i) > 0`` (difficulty ``1/β_i``), and

    P(L_ij = Z_i) = σ(α_j β_i),   P(L_ij = l) = (1 − σ(α_j β_i)) / (K − 1) for every other label l.

E-step (eq. 3): ``q_ik ∝ π_k Π_r P(L_r | Z_i = k)``, computed per response as a base term ``log((1−σ)/(K−1))``
for every class plus a bonus ``log σ − log((1−σ)/(K−1))`` at the reported label (two ``np.bincount``).  M-step
(eqs. 4–5): maximise ``Q = Σ_r [p_r log σ(x_r) + (1 − p_r) log((1 − σ(x_r))/(K − 1))] + log N(α; μ_α, 1) +
log N(b; μ_b, 1)`` with ``x_r = α_j β_i`` and ``p_r = q_{i, L_r}``, gradient ``∂Q/∂x_r = p_r − σ(x_r)``
(vectorised over responses, ``np.bincount``).  The paper uses a gradient method for this M-step; here it is
block-coordinate Fisher scoring (all α given b, then all b given α: each block is a set of independent 1-D
problems), which needs a handful of passes over the responses where L-BFGS on the joint vector (W + N
parameters) spent most of its time in the optimiser itself (measured: 37 s on relevance).  The objective is the log-likelihood plus the
Gaussian log priors (MAP).

Defaults = crowd-kit's ``GLAD`` target (crowd-kit 1.4.2, ``aggregation/classification/glad.py``): priors
α ~ N(1, 1) and b = log β ~ N(1, 1), **fixed equal class priors**, and the first E-step from α = 1, b = 1 (a
soft majority vote).  Unlike crowd-kit, EM runs until the MAP objective settles: crowd-kit stops at the first
iteration where its per-cell expected complete-data log-likelihood ``Q/(N·K)`` does not rise by ``tol``, which on
sparse or one-sided data happens after two EM iterations (youtube_lf, labelme, face), before its own optimum
(run on, crowd-kit reaches our labels: youtube_lf 0.548; ``docs/PEER_MODELS.md``, ``benchmarks/glad_vs_crowdkit.py``).
``stop="crowdkit"`` is the drop-in: crowd-kit's loop exactly (:class:`CrowdkitStop`, its conjugate-gradient M-step),
so its labels, reported as stopped by that rule (not converged) when ``Q`` fell.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any, ClassVar, NamedTuple

import numpy as np
from scipy.special import expit

from fusion_core.data.responses import Responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import Aggregator, Gold, clamp_gold, posterior_terms
from fusion_core.methods.em import EMRun, EMSettings, EStep, RuleStop, run_em
from fusion_core.methods.numerics import safe_log
from fusion_core.methods.params import Bool, Choice, Float, Int, Param
from fusion_core.methods.priors import COLLAPSE_RATIO, collapse_message, prior_collapsed
from fusion_core.methods.registry import register
from fusion_core.methods.results import AnnotatorColumn, Fit, ItemColumn, Ranking


class GladState(NamedTuple):
    """GLAD parameters: ability per annotator, log inverse difficulty ``b_i = log β_i`` per item, class prior."""

    ability: np.ndarray
    log_beta: np.ndarray
    class_prior: np.ndarray


def response_log_probs(resp: Responses, ability: np.ndarray, log_beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per response: (log P(correct), log P(one given wrong label)) = (log σ(x), log((1 − σ(x))/(K − 1)))."""
    x = ability[resp.worker] * np.exp(log_beta[resp.item])
    return -np.logaddexp(0.0, -x), -np.logaddexp(0.0, x) - np.log(resp.n_classes - 1)


@dataclass
class GladModel:
    """GLAD for the EM driver (see the module docstring)."""

    resp: Responses
    ability_prior: float = 1.0
    log_beta_prior: float = 1.0
    estimate_priors: bool = False
    m_step_iter: int = 1
    gold: Gold | None = None
    m_step_solver: str = "scoring"  # or "cg": crowd-kit's M-step (CG on (α, b) jointly, ≤ 25 steps, gtol 1e-2)

    def e_step(self, state: GladState, temperature: float = 1.0) -> EStep:
        resp, k = self.resp, self.resp.n_classes
        log_c, log_w = response_log_probs(resp, state.ability, state.log_beta)
        base = np.bincount(resp.item, weights=log_w, minlength=resp.n_items)
        bonus = np.bincount(resp.item * k + resp.label, weights=log_c - log_w, minlength=resp.n_items * k)
        joint = base[:, None] + bonus.reshape(resp.n_items, k) + safe_log(state.class_prior)[None, :]
        post, terms = posterior_terms(joint, self.gold, temperature)
        objective = float(terms.sum()) + self.log_prior(state.ability, state.log_beta)
        return EStep(post, objective, stats=(post, state), log_joint=joint)

    def log_prior(self, ability: np.ndarray, log_beta: np.ndarray) -> float:
        """Gaussian priors N(μ_α, 1) on abilities and N(μ_b, 1) on log inverse difficulties (paper §3)."""
        return float(
            -0.5 * ((ability - self.ability_prior) ** 2).sum() - 0.5 * ((log_beta - self.log_beta_prior) ** 2).sum()
        )

    def m_step(self, stats: tuple[np.ndarray, GladState]) -> GladState:
        """Class prior from the posteriors; (α, b) by ``m_step_iter`` sweeps of block-coordinate Fisher scoring
        from the previous values.  Each block (all α_j given β, then all b_i given α) is a set of independent 1-D
        problems, so every coordinate's step is halved until its own term of Q does not decrease (generalised EM:
        the objective trace never goes down)."""
        resp, (post, prev) = self.resp, stats
        p = post[resp.item, resp.label]  # posterior that the response is correct
        a, b = prev.ability.copy(), prev.log_beta.copy()
        if self.m_step_solver == "cg":
            a, b = self._cg_step(a, b, p)
        else:
            for _ in range(self.m_step_iter):
                a = self._scoring_step(a, b, p, ability=True)
                b = self._scoring_step(a, b, p, ability=False)
        if self.estimate_priors:
            prior = post.sum(axis=0) + 1e-12
            prior /= prior.sum()
        else:
            prior = np.full(resp.n_classes, 1.0 / resp.n_classes)
        return GladState(a, b, prior)

    def expected_q(self, p: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray]:
        """crowd-kit's M-step objective and its gradient in (α, b): ``Q = Σ_r [p_r log σ(x_r) + (1 − p_r)
        log((1 − σ(x_r))/(K − 1))] + Σ_j log N(α_j; μ_α, 1) + Σ_i log N(b_i; μ_b, 1)``, the normal densities with
        their constants (crowd-kit's ``_compute_Q`` and ``_gradient_Q``)."""
        resp = self.resp
        beta = np.exp(b[resp.item])
        x = a[resp.worker] * beta
        terms = -p * np.logaddexp(0.0, -x) - (1 - p) * (np.logaddexp(0.0, x) + np.log(resp.n_classes - 1))
        da, db = a - self.ability_prior, b - self.log_beta_prior
        q = float(terms.sum()) - 0.5 * float(da @ da + db @ db) - 0.5 * np.log(2 * np.pi) * (len(a) + len(b))
        g = p - expit(x)
        grad_a = np.bincount(resp.worker, weights=g * beta, minlength=resp.n_workers) - da
        grad_b = np.bincount(resp.item, weights=g * x, minlength=resp.n_items) - db
        return (q if np.isfinite(q) else -np.inf), np.concatenate([grad_a, grad_b])

    def _cg_step(self, a: np.ndarray, b: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """crowd-kit's M-step: scipy's conjugate gradient on −Q over (α, b) jointly, ≤ 25 steps, tol 1e-2."""
        from scipy.optimize import minimize  # lazy: scipy.optimize costs 0.2 s of start-up

        n = len(a)

        def neg_q(v: np.ndarray) -> tuple[float, np.ndarray]:
            q, grad = self.expected_q(p, v[:n], v[n:])
            return -q, -grad

        res = minimize(neg_q, np.concatenate([a, b]), jac=True, method="CG", tol=1e-2, options={"maxiter": 25})
        return res.x[:n].copy(), res.x[n:].copy()

    def _block_q(self, a: np.ndarray, b: np.ndarray, p: np.ndarray, ability: bool) -> np.ndarray:
        """Q split by annotator (``ability``) or by item: Σ_r of the block's responses plus its Gaussian prior."""
        resp = self.resp
        x = a[resp.worker] * np.exp(b[resp.item])
        terms = -p * np.logaddexp(0.0, -x) - (1 - p) * np.logaddexp(0.0, x)
        if ability:
            return (
                np.bincount(resp.worker, weights=terms, minlength=resp.n_workers) - 0.5 * (a - self.ability_prior) ** 2
            )
        return np.bincount(resp.item, weights=terms, minlength=resp.n_items) - 0.5 * (b - self.log_beta_prior) ** 2

    def _scoring_step(self, a: np.ndarray, b: np.ndarray, p: np.ndarray, *, ability: bool) -> np.ndarray:
        """One Fisher-scoring step on α (``ability``) or b, with per-coordinate step halving."""
        resp = self.resp
        beta = np.exp(b[resp.item])
        x = a[resp.worker] * beta
        s = expit(x)
        g, h = p - s, s * (1 - s)
        if ability:
            idx, n, cur, mu = resp.worker, resp.n_workers, a, self.ability_prior
            grad = np.bincount(idx, weights=g * beta, minlength=n) - (cur - mu)
            info = np.bincount(idx, weights=h * beta**2, minlength=n) + 1.0
        else:
            idx, n, cur, mu = resp.item, resp.n_items, b, self.log_beta_prior
            grad = np.bincount(idx, weights=g * x, minlength=n) - (cur - mu)
            info = np.bincount(idx, weights=h * x**2, minlength=n) + 1.0
        step = np.clip(grad / info, -2.0, 2.0)
        q0 = self._block_q(a, b, p, ability)
        out = cur.copy()
        todo = np.ones(n, dtype=bool)
        for _ in range(8):
            trial = np.where(todo, cur + step, out)
            q1 = self._block_q(trial, b, p, True) if ability else self._block_q(a, trial, p, False)
            ok = todo & (q1 >= q0 - 1e-12)
            out[ok] = trial[ok]
            todo &= ~ok
            if not todo.any():
                break
            step *= 0.5
        return out

    def neutral(self) -> GladState:
        k = self.resp.n_classes
        return GladState(
            np.full(self.resp.n_workers, self.ability_prior),
            np.full(self.resp.n_items, self.log_beta_prior),
            np.full(k, 1.0 / k),
        )

    def start(self, posterior: np.ndarray | None = None) -> GladState:
        """The prior means (crowd-kit's start: the first E-step is a soft majority vote with P(correct) =
        σ(μ_α e^{μ_b})), or one M-step from ``posterior``."""
        if posterior is None:
            return self.neutral()
        return self.m_step((clamp_gold(np.array(posterior, dtype=float), self.gold), self.neutral()))

    def permute(self, state: GladState, source: np.ndarray) -> GladState:
        """GLAD's classes are tied to the labels (a correct response is the true label): nothing to permute but the
        class prior's order."""
        return GladState(state.ability, state.log_beta, state.class_prior[source])


@dataclass
class CrowdkitStop:
    """crowd-kit 1.4.2's GLAD loop as an EM stopping rule (``EMSettings.rule``; ``GLAD.fit`` in crowdkit's
    ``aggregation/classification/glad.py``).  After the M-step of iteration t it computes ``Q_t = Q(θ_{t+1}; q_t)
    / (N·K)`` (:meth:`GladModel.expected_q` at the new parameters with the posteriors that M-step used, per
    response × class cell) and stops at the first t with ``Q_t − Q_{t−1} < tol`` — including when ``Q`` fell.
    ``Q_0`` is the start's *total* ``Q(θ_0; q_0)`` (not per cell, as crowd-kit), so iteration 1 never stops;
    after ``n_iter`` iterations it stops anyway.  ``history`` keeps ``Q_1, Q_2, …`` (crowd-kit's
    ``loss_history_``).  ``Q(θ_{t+1}; q_t)`` is not monotone under EM, so a fall is reported as not converged."""

    model: GladModel
    tol: float = 1e-5
    n_iter: int = 100
    history: list[float] | None = None

    def __call__(self, estep: EStep, before: GladState, after: GladState) -> RuleStop | None:
        resp, post = self.model.resp, estep.posterior
        p = post[resp.item, resp.label]
        if self.history is None:
            self.history = []
            last = self.model.expected_q(p, before.ability, before.log_beta)[0]
        else:
            last = self.history[-1]
        q = float(self.model.expected_q(p, after.ability, after.log_beta)[0] / (resp.n_responses * resp.n_classes))
        self.history.append(q)
        t = len(self.history)
        if q - last < self.tol:
            if q < last:
                return RuleStop(
                    f"stopped by crowd-kit's rule at iteration {t}: Q/(N·K) fell from {last:.6f} to {q:.6f} "
                    "(not converged: this Q is not monotone under EM)",
                    False,
                )
            return RuleStop(f"crowd-kit's rule at iteration {t}: Q/(N·K) rose by less than tol = {self.tol:g}", True)
        if t >= self.n_iter:
            return RuleStop(f"stopped after crowd-kit's {self.n_iter} iterations, Q/(N·K) still rising", False)
        return None


@register(
    "glad",
    title="GLAD (annotator ability × item difficulty)",
    summary="GLAD: P(correct) = σ(ability × 1/difficulty); errors spread evenly over the other labels.",
    family="glad",
    reference="Whitehill, Ruvolo, Wu, Bergsma & Movellan, 'Whose Vote Should Count More', NIPS 2009, eqs. (1)–(5).",
)
class GLAD(Aggregator):
    """GLAD (Whitehill et al. 2009): annotator ability α_j and item difficulty 1/β_i, ``P(correct) = σ(α_j β_i)``.

    Reported: ``result_.annotator_columns`` ``ability`` (α_j; 0 = guessing, negative = adversarial) and
    ``result_.item_columns`` ``difficulty`` (1/β_i, one per item; larger = harder).  ``confusion_[j]`` is the
    one-coin matrix at annotator j's mean accuracy σ(α_j β_i) over the items they labelled (for plots and
    held-out scoring; :meth:`response_log_likelihood` uses the item-specific difficulty).  With
    ``estimate_priors`` a collapsed class prior (some class below a quarter of its majority-vote share) is refitted
    with equal priors and warned about.  Gold labels are clamped.  ``stop="crowdkit"`` reproduces crowd-kit's GLAD
    loop (its labels; a stop on a falling ``Q`` is reported as not converged, with the reason in ``warnings``).

    Examples
    --------
    >>> from fusion_core.simulate.peer import glad_crowd
    >>> sim = glad_crowd(n_items=200, n_workers=10, seed=0)
    >>> g = GLAD().fit(sim.responses)
    >>> difficulty = g.result_.item_column("difficulty").values
    >>> difficulty.shape
    (200,)
    """

    params: ClassVar[dict[str, Param]] = {
        "estimate_priors": Bool(
            False, help="Estimate class priors (with the collapse guard); off = equal priors, as crowd-kit."
        ),
        "ability_prior": Float(1.0, low=-10.0, high=10.0, help="Mean of the N(μ, 1) prior on abilities."),
        "log_beta_prior": Float(
            1.0,
            low=-10.0,
            high=10.0,
            help="Mean of the N(μ, 1) prior on log inverse difficulty b = log β (1, as crowd-kit: difficulty 1/e).",
        ),
        "m_step_iter": Int(1, low=1, high=1000, advanced=True, help="Fisher-scoring sweeps (α, then b) per M-step."),
        "tol": Float(1e-6, low=0.0, high=1.0, help="Stop when the relative change of the objective is below tol."),
        "max_iter": Int(200, low=1, high=100_000, help="Maximum EM iterations."),
        "stop": Choice(
            "objective",
            ("objective", "crowdkit"),
            advanced=True,
            help="'objective': EM until the MAP objective settles (tol, max_iter). 'crowdkit': drop-in for crowd-kit "
            "1.4.2's GLAD, its loop exactly (conjugate-gradient M-step, ≤ 25 steps; stop at the first iteration "
            "where Q/(N·K) does not rise by 1e-5, also when it falls; at most 100 iterations; tol, max_iter and "
            "m_step_iter unused): its labels, often an early iterate; a stop on a falling Q is reported as not "
            "converged.",
        ),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        if responses.n_classes < 2:
            raise UserInputError("GLAD needs at least 2 labels in the responses.")
        settings = EMSettings(tol=float(self.tol), max_iter=int(self.max_iter), name="GLAD EM")
        if self.stop == "crowdkit" and self.estimate_priors:
            raise UserInputError(
                "glad: stop='crowdkit' keeps crowd-kit's fixed equal class priors; set estimate_priors=False."
            )
        run = self._run(responses, gold, settings, bool(self.estimate_priors))
        if self.estimate_priors and prior_collapsed(run.state.class_prior, responses, gold, COLLAPSE_RATIO):
            warnings.warn(
                collapse_message("glad", run.state.class_prior, responses.classes), AggregationWarning, stacklevel=2
            )
            run = self._run(responses, gold, settings, False)
        st = run.state
        x = st.ability[responses.worker] * np.exp(st.log_beta[responses.item])
        n = np.maximum(responses.responses_per_worker, 1)
        acc = np.bincount(responses.worker, weights=expit(x), minlength=responses.n_workers) / n
        acc = np.where(responses.responses_per_worker > 0, acc, expit(self.ability_prior * np.exp(self.log_beta_prior)))
        k = responses.n_classes
        conf = np.repeat(((1 - acc) / (k - 1))[:, None, None], k, axis=1).repeat(k, axis=2)
        conf[:, np.arange(k), np.arange(k)] = acc[:, None]
        return run.to_fit(
            confusion=conf,
            class_prior=st.class_prior,
            warnings=[run.stop_reason] if run.stop_reason and not run.converged else [],
            annotator_columns=(
                AnnotatorColumn(
                    "ability", "ability", st.ability, "GLAD ability α: 0 = guessing, negative = adversarial."
                ),
                AnnotatorColumn(
                    "mean_accuracy", "accuracy", acc, "Mean P(correct) over the items this annotator labelled."
                ),
            ),
            item_columns=(
                ItemColumn("difficulty", "difficulty", np.exp(-st.log_beta), "GLAD difficulty 1/β: larger = harder."),
            ),
            ranking=Ranking.from_score(st.ability, "ability (GLAD)"),
        )

    def _run(self, responses: Responses, gold: Gold | None, settings: EMSettings, estimate: bool) -> Any:
        model = GladModel(
            responses, float(self.ability_prior), float(self.log_beta_prior), estimate, int(self.m_step_iter), gold
        )
        if self.stop == "crowdkit":
            return crowdkit_run(model)[0]
        return run_em(model, model.start(), settings)

    def response_log_likelihood(self, responses: Responses) -> np.ndarray:
        """``log P(response | true class k)`` with the fitted ability and the item's own difficulty."""
        ability_col, difficulty_col = self.result_.column("ability"), self.result_.item_column("difficulty")
        if ability_col is None or difficulty_col is None:
            raise UserInputError("fit GLAD before scoring responses with it.")
        ability, log_beta = ability_col.values, -np.log(difficulty_col.values)
        log_c, log_w = response_log_probs(responses, ability, log_beta)
        out = np.repeat(log_w[:, None], responses.n_classes, axis=1)
        out[np.arange(responses.n_responses), responses.label] = log_c
        return out


def crowdkit_run(model: GladModel, tol: float = 1e-5, n_iter: int = 100) -> tuple[EMRun[GladState], CrowdkitStop]:
    """``model`` fitted by crowd-kit 1.4.2's GLAD loop (its defaults ``tol``, ``n_iter``; CG M-step, start at the
    prior means): the EM run and the rule (its ``history`` = crowd-kit's ``loss_history_``)."""
    model = replace(model, m_step_solver="cg")
    rule = CrowdkitStop(model, tol, n_iter)
    settings = EMSettings(max_iter=n_iter + 1, name="GLAD EM (crowd-kit's loop)", rule=rule)
    return run_em(model, model.start(), settings), rule
