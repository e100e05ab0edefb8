"""GLAD: Generative model of Labels, Abilities and Difficulties (Whitehill, Ruvolo, Wu, Bergsma & Movellan,
NIPS 2009).

Model (paper eq. 1, multi-class form of §3): annotator j has ability ``α_j`` (negative = adversarial), item i has
inverse difficulty ``β_i = exp(b_i) > 0`` (difficulty ``1/β_i``), and

    P(L_ij = Z_i) = σ(α_j β_i),   P(L_ij = l) = (1 − σ(α_j β_i)) / (K − 1) for every other label l.

E-step (eq. 3): ``q_ik ∝ π_k Π_r P(L_r | Z_i = k)``, computed per response as a base term ``log((1−σ)/(K−1))``
for every class plus a bonus ``log σ − log((1−σ)/(K−1))`` at the reported label (two ``np.bincount``).  M-step
(eqs. 4–5): maximise ``Q = Σ_r [p_r log σ(x_r) + (1 − p_r) log((1 − σ(x_r))/(K − 1))] + log N(α; μ_α, 1) +
log N(b; μ_b, 1)`` with ``x_r = α_j β_i`` and ``p_r = q_{i, L_r}`` by L-BFGS (``scipy.optimize``) on (α, b),
gradient ``∂Q/∂x_r = p_r − σ(x_r)`` (vectorised over responses).  The objective is the log-likelihood plus the
Gaussian log priors (MAP).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from fusion_core.data.responses import Responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import Aggregator, Gold, clamp_gold, initial_posterior
from fusion_core.methods.em import EMSettings, EStep, run_em
from fusion_core.methods.numerics import log_normalize, safe_log
from fusion_core.methods.params import Bool, Float, Int
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
    log_beta_prior: float = 0.0
    estimate_priors: bool = True
    m_step_iter: int = 25
    gold: Gold | None = None

    def e_step(self, state: GladState, temperature: float = 1.0) -> EStep:
        resp, k = self.resp, self.resp.n_classes
        log_c, log_w = response_log_probs(resp, state.ability, state.log_beta)
        base = np.bincount(resp.item, weights=log_w, minlength=resp.n_items)
        bonus = np.bincount(resp.item * k + resp.label, weights=log_c - log_w, minlength=resp.n_items * k)
        joint = base[:, None] + bonus.reshape(resp.n_items, k) + safe_log(state.class_prior)[None, :]
        post, lognorm = log_normalize(joint)
        terms = lognorm
        if temperature != 1.0:
            post = log_normalize(joint / temperature)[0]
        if self.gold is not None and len(self.gold[0]):
            terms = lognorm.copy()
            terms[self.gold[0]] = joint[self.gold[0], self.gold[1]]
            clamp_gold(post, self.gold)
        objective = float(terms.sum()) + self.log_prior(state.ability, state.log_beta)
        return EStep(post, objective, stats=(post, state), log_joint=joint)

    def log_prior(self, ability: np.ndarray, log_beta: np.ndarray) -> float:
        """Gaussian priors N(μ_α, 1) on abilities and N(μ_b, 1) on log inverse difficulties (paper §3)."""
        return float(
            -0.5 * ((ability - self.ability_prior) ** 2).sum() - 0.5 * ((log_beta - self.log_beta_prior) ** 2).sum()
        )

    def m_step(self, stats: tuple[np.ndarray, GladState]) -> GladState:
        """Class prior from the posteriors; (α, b) by L-BFGS from the previous values (warm start)."""
        resp, (post, prev) = self.resp, stats
        p = post[resp.item, resp.label]  # posterior that the response is correct
        w, n = resp.n_workers, resp.n_items

        def negative_q(theta: np.ndarray) -> tuple[float, np.ndarray]:
            a, b = theta[:w], theta[w:]
            beta = np.exp(b)
            x = a[resp.worker] * beta[resp.item]
            log_c, log_wr = -np.logaddexp(0.0, -x), -np.logaddexp(0.0, x)
            q = float((p * log_c + (1 - p) * log_wr).sum()) + self.log_prior(a, b)
            g = p - expit(x)  # ∂Q/∂x_r
            ga = np.bincount(resp.worker, weights=g * beta[resp.item], minlength=w) - (a - self.ability_prior)
            gb = np.bincount(resp.item, weights=g * x, minlength=n) - (b - self.log_beta_prior)
            return -q, -np.concatenate([ga, gb])

        x0 = np.concatenate([prev.ability, prev.log_beta])
        opt = minimize(negative_q, x0, jac=True, method="L-BFGS-B", options={"maxiter": self.m_step_iter})
        theta = opt.x if opt.fun <= negative_q(x0)[0] else x0  # never step downhill (generalised EM)
        if self.estimate_priors:
            prior = post.sum(axis=0) + 1e-12
            prior /= prior.sum()
        else:
            prior = np.full(resp.n_classes, 1.0 / resp.n_classes)
        return GladState(theta[:w], theta[w:], prior)

    def neutral(self) -> GladState:
        k = self.resp.n_classes
        return GladState(
            np.full(self.resp.n_workers, self.ability_prior),
            np.full(self.resp.n_items, self.log_beta_prior),
            np.full(k, 1.0 / k),
        )

    def start(self, posterior: np.ndarray) -> GladState:
        return self.m_step((clamp_gold(np.array(posterior, dtype=float), self.gold), self.neutral()))

    def permute(self, state: GladState, source: np.ndarray) -> GladState:
        """GLAD's classes are tied to the labels (a correct response is the true label): nothing to permute but the
        class prior's order."""
        return GladState(state.ability, state.log_beta, state.class_prior[source])


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
    with equal priors and warned about.  Gold labels are clamped.

    Examples
    --------
    >>> from fusion_core.simulate.peer import glad_crowd
    >>> sim = glad_crowd(n_items=200, n_workers=10, seed=0)
    >>> g = GLAD().fit(sim.responses)
    >>> difficulty = g.result_.item_column("difficulty").values
    >>> difficulty.shape
    (200,)
    """

    params = {
        "estimate_priors": Bool(True, help="Estimate class priors (with the collapse guard); off = equal priors."),
        "ability_prior": Float(1.0, low=-10.0, high=10.0, help="Mean of the N(μ, 1) prior on abilities."),
        "log_beta_prior": Float(
            0.0, low=-10.0, high=10.0, help="Mean of the N(μ, 1) prior on log inverse difficulty (0: difficulty 1)."
        ),
        "m_step_iter": Int(25, low=1, high=1000, advanced=True, help="L-BFGS iterations per M-step."),
        "tol": Float(1e-6, low=0.0, high=1.0, help="Stop when the relative change of the objective is below tol."),
        "max_iter": Int(200, low=1, high=100_000, help="Maximum EM iterations."),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        if responses.n_classes < 2:
            raise UserInputError("GLAD needs at least 2 labels in the responses.")
        settings = EMSettings(tol=float(self.tol), max_iter=int(self.max_iter), name="GLAD EM")
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
        acc = np.where(responses.responses_per_worker > 0, acc, expit(self.ability_prior))
        k = responses.n_classes
        conf = np.repeat(((1 - acc) / (k - 1))[:, None, None], k, axis=1).repeat(k, axis=2)
        conf[:, np.arange(k), np.arange(k)] = acc[:, None]
        return Fit(
            posterior=run.posterior,
            confusion=conf,
            class_prior=st.class_prior,
            log_likelihood=run.log_likelihood,
            n_iter=run.n_iter,
            converged=run.converged,
            annotator_columns=(
                AnnotatorColumn("ability", "ability", st.ability, "GLAD ability α: 0 = guessing, negative = adversarial."),
                AnnotatorColumn("mean_accuracy", "accuracy", acc, "Mean P(correct) over the items this annotator labelled."),
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
        return run_em(model, model.start(initial_posterior(responses, "mv")), settings)

    def response_log_likelihood(self, responses: Responses) -> np.ndarray:
        """``log P(response | true class k)`` with the fitted ability and the item's own difficulty."""
        ability = self.result_.column("ability").values
        log_beta = -np.log(self.result_.item_column("difficulty").values)
        log_c, log_w = response_log_probs(responses, ability, log_beta)
        out = np.repeat(log_w[:, None], responses.n_classes, axis=1)
        out[np.arange(responses.n_responses), responses.label] = log_c
        return out
