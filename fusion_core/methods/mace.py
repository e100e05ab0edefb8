"""MACE: Multi-Annotator Competence Estimation (Hovy, Berg-Kirkpatrick, Vaswani & Hovy, NAACL 2013).

Generative model (paper §2): the true label ``T_i`` is uniform over the K labels; on item i annotator j spams
with probability ``θ_j`` (``S_ij = 1``; the paper's ``1 − θ_j``, here θ_j is the *spamming* probability); a
competent response is the true label, a spammed one is drawn from the annotator's strategy ``ξ_j``::

    P(A_ij = l | T_i = k) = (1 − θ_j) [l = k] + θ_j ξ_jl,   i.e. Γ_j = (1 − θ_j) I + θ_j 1 ξ_jᵀ.

E-step: ``q_ik ∝ Π_r Γ_j[k, l_r]`` (``counts @ log Γ``, as Dawid–Skene); the expected number of competent
responses of j with label l is ``C_j[l, l] · ρ_jl`` with ``C_j[k, l] = Σ_i q_ik #(j said l on i)`` and
``ρ_jl = (1 − θ_j) / (1 − θ_j + θ_j ξ_jl)`` (the posterior of ``S = 0`` given ``A = T = l``).  M-step: ``θ_j``
= expected spammed share of j's responses, ``ξ_jl`` ∝ expected spammed responses with label l.

``method="vb"`` (paper §2.2): Beta(α, β) prior on the spamming probability and a symmetric Dirichlet(γ) on the
strategy; mean-field VB replaces every parameter in the E-step by ``exp E[log ·]`` (digamma expectations) and
the reported objective is the evidence lower bound ``Σ_i log Z_i − KL(q(θ) ‖ p(θ)) − KL(q(ξ) ‖ p(ξ))``.
``method="em"``: MAP with the same pseudo-counts added to the expected counts (objective: log-likelihood plus
log prior).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
from scipy.special import betaln, digamma, gammaln

from fusion_core.data.responses import Responses
from fusion_core.methods.base import Aggregator, Gold, clamp_gold, initial_posterior, posterior_terms
from fusion_core.methods.dawid_skene.core import expected_counts, unary_log_likelihood
from fusion_core.methods.em import EMSettings, EStep, best_run, run_em
from fusion_core.methods.numerics import safe_log
from fusion_core.methods.params import Choice, Float, Int, Param, Seed
from fusion_core.methods.registry import register
from fusion_core.methods.results import AnnotatorColumn, Fit, Ranking
from fusion_core.methods.ties import class_priority


class MaceState(NamedTuple):
    """Posterior pseudo-counts (prior included): competent and spammed responses per annotator (W,) and spammed
    responses per label (W × K).  Point estimates are their normalised means."""

    competent: np.ndarray
    spammed: np.ndarray
    strategy: np.ndarray

    @property
    def spam_probability(self) -> np.ndarray:
        return self.spammed / (self.competent + self.spammed)

    @property
    def strategy_probability(self) -> np.ndarray:
        return self.strategy / self.strategy.sum(axis=1, keepdims=True)


def mace_confusion(competent: np.ndarray, spam: np.ndarray, strategy: np.ndarray) -> np.ndarray:
    """``Γ_j = (1 − θ_j) I + θ_j 1 ξ_jᵀ`` (workers × true × reported) from the competent weight ``1 − θ_j``, the
    spam weight ``θ_j`` and the strategy ``ξ_j``; with VB's sub-normalised weights the rows sum to less than 1."""
    k = strategy.shape[1]
    conf = np.repeat((spam[:, None] * strategy)[:, None, :], k, axis=1)
    idx = np.arange(k)
    conf[:, idx, idx] += competent[:, None]
    return conf


@dataclass
class MaceModel:
    """MACE for the EM driver (see the module docstring)."""

    resp: Responses
    prior_spam: float = 0.5
    prior_competent: float = 0.5
    prior_strategy: float = 0.1
    variational: bool = True
    gold: Gold | None = None

    def weights(self, state: MaceState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(competent weight (W,), spam weight (W,), strategy weights (W × K)): normalised parameters (EM) or
        ``exp E[log ·]`` (VB)."""
        c, s, g = state
        if self.variational:
            tot = digamma(c + s)
            return (
                np.exp(digamma(c) - tot),
                np.exp(digamma(s) - tot),
                np.exp(digamma(g) - digamma(g.sum(axis=1, keepdims=True))),
            )
        return c / (c + s), s / (c + s), g / g.sum(axis=1, keepdims=True)

    def e_step(self, state: MaceState, temperature: float = 1.0) -> EStep:
        wc, ws, wg = self.weights(state)
        conf = mace_confusion(wc, ws, wg)
        joint = unary_log_likelihood(self.resp, conf) - np.log(self.resp.n_classes)  # uniform prior on T (paper)
        post, terms = posterior_terms(joint, self.gold, temperature)
        rho = wc[:, None] / (wc[:, None] + ws[:, None] * wg)  # P(competent | A = T = l), W × K
        objective = float(terms.sum()) + self.prior_term(state)
        return EStep(post, objective, stats=(post, rho), log_joint=joint)

    def m_step(self, stats: tuple[np.ndarray, np.ndarray]) -> MaceState:
        post, rho = stats
        cnt = expected_counts(self.resp, post)  # W × true × reported
        idx = np.arange(self.resp.n_classes)
        n_wl = cnt.sum(axis=1)  # responses of w with label l
        competent_wl = cnt[:, idx, idx] * rho
        spam_wl = np.maximum(n_wl - competent_wl, 0.0)
        return MaceState(
            competent_wl.sum(axis=1) + self.prior_competent,
            spam_wl.sum(axis=1) + self.prior_spam,
            spam_wl + self.prior_strategy,
        )

    def start(self, posterior: np.ndarray) -> MaceState:
        """Parameters from initial posteriors (gold clamped), with a neutral ρ (θ = 1/2, uniform strategy)."""
        k = self.resp.n_classes
        post = clamp_gold(np.array(posterior, dtype=float), self.gold)
        rho = np.full((self.resp.n_workers, k), 1.0 / (1.0 + 1.0 / k))
        return self.m_step((post, rho))

    def prior_term(self, state: MaceState) -> float:
        """VB: −KL(q ‖ prior) of the Beta and Dirichlet factors; EM: the log prior density at the MAP point."""
        c, s, g = state
        a, b, gam = self.prior_spam, self.prior_competent, self.prior_strategy
        k = g.shape[1]
        if self.variational:
            tot = digamma(c + s)
            kl_beta = betaln(a, b) - betaln(s, c) + (s - a) * (digamma(s) - tot) + (c - b) * (digamma(c) - tot)
            g0 = g.sum(axis=1)
            elog = digamma(g) - digamma(g0)[:, None]
            kl_dir = (
                gammaln(g0)
                - gammaln(g).sum(axis=1)
                - gammaln(k * gam)
                + k * gammaln(gam)
                + ((g - gam) * elog).sum(axis=1)
            )
            return float(-(kl_beta.sum() + kl_dir.sum()))
        th = s / (c + s)
        xi = g / g.sum(axis=1, keepdims=True)
        # pseudo-counts a, b, γ added to the counts are the MAP of Beta(a + 1, b + 1) and Dirichlet(γ + 1)
        return float((a * safe_log(th) + b * safe_log(1 - th)).sum() + (gam * safe_log(xi)).sum())

    def permute(self, state: MaceState, source: np.ndarray) -> MaceState:
        """MACE's latent classes are tied to the labels (a competent response *is* the true label), so there is no
        label switching to undo: the state is returned unchanged."""
        return state


@register(
    "mace",
    title="MACE (spammer detection)",
    summary="MACE: each annotator is competent (gives the true label) or spams with a personal label strategy.",
    family="mace",
    reference="Hovy, Berg-Kirkpatrick, Vaswani & Hovy, 'Learning Whom to Trust with MACE', NAACL 2013, §2.",
)
class MACE(Aggregator):
    """Multi-Annotator Competence Estimation (Hovy et al. 2013).

    Each annotator j spams with probability θ_j ("spamming probability"); a competent response is the true label,
    a spammed one is drawn from the annotator's strategy ξ_j.  ``confusion_[j] = (1 − θ_j) I + θ_j 1 ξ_jᵀ``
    (posterior means), so held-out scoring and confusion plots work as for Dawid–Skene.  Reported per annotator
    (``result_.annotator_columns``): ``spam_probability`` and one ``strategy[<label>]`` column per label; the
    annotator ranking is by ``1 − θ_j``.  Gold labels are clamped.  EM through the shared driver; the objective is
    the ELBO (``method="vb"``) or the MAP objective (``method="em"``).

    Examples
    --------
    >>> from fusion_core.simulate.peer import mace_crowd
    >>> sim = mace_crowd(n_items=300, n_workers=12, n_spammers=3, seed=0)
    >>> m = MACE().fit(sim.responses)
    >>> spam = m.result_.column("spam_probability").values
    >>> is_spammer = sim.spammer.reindex(m.workers_).to_numpy()
    >>> bool(spam[is_spammer].mean() > spam[~is_spammer].mean() + 0.5)
    True
    """

    uses_confidence = False  # the spam/competence model counts whole responses
    params: ClassVar[dict[str, Param]] = {
        "method": Choice(
            "vb",
            ("vb", "em"),
            help="'vb': variational Bayes with Beta/Dirichlet priors (paper §2.2); 'em': MAP estimates.",
        ),
        "prior_spam": Float(
            0.5, low=0.0, high=1000.0, low_open=True, help="Beta prior pseudo-count on spamming (paper's β)."
        ),
        "prior_competent": Float(
            0.5, low=0.0, high=1000.0, low_open=True, help="Beta prior pseudo-count on competence (paper's α)."
        ),
        "prior_strategy": Float(
            0.1,
            low=0.0,
            high=1000.0,
            low_open=True,
            help="Symmetric Dirichlet pseudo-count on each label of a spamming strategy.",
        ),
        "tol": Float(1e-7, low=0.0, high=1.0, help="Stop when the relative change of the objective is below tol."),
        "max_iter": Int(500, low=1, high=100_000, help="Maximum EM iterations."),
        "n_restarts": Int(
            0,
            low=0,
            high=100,
            advanced=True,
            help="Extra runs from random posteriors; the run with the best final objective is kept.",
        ),
        "random_state": Seed(0, help="Seed of the random restarts."),
    }

    def canonical_rows(self) -> bool:
        """Restarts compare final log-likelihoods that can tie to rounding: canonical rows make them exact."""
        return int(self.n_restarts) > 0

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        model = MaceModel(
            responses,
            float(self.prior_spam),
            float(self.prior_competent),
            float(self.prior_strategy),
            variational=self.method == "vb",
            gold=gold,
        )
        starts = [initial_posterior(responses, "mv")]
        if int(self.n_restarts) > 0:
            rng = np.random.default_rng(self.random_state)
            k, rank = responses.n_classes, class_priority(responses)  # columns by class priority: rename-proof
            starts += [rng.dirichlet(np.ones(k), size=responses.n_items)[:, rank] for _ in range(int(self.n_restarts))]
        settings = EMSettings(tol=float(self.tol), max_iter=int(self.max_iter), name="MACE EM")
        run, restarts = best_run([run_em(model, model.start(q), settings) for q in starts])
        state = run.state
        spam, strat = state.spam_probability, state.strategy_probability
        columns = [
            AnnotatorColumn(
                "spam_probability",
                "spamming probability",
                spam,
                "Share of this annotator's responses that are spam (labels drawn from the strategy, not from the item).",
            )
        ]
        for code, label in enumerate(responses.classes):
            columns.append(
                AnnotatorColumn(
                    f"strategy[{label}]",
                    f"when spamming, answers '{label}'",
                    strat[:, code],
                    f"Probability that a spammed response of this annotator is '{label}'.",
                )
            )
        k = responses.n_classes
        return run.to_fit(
            confusion=mace_confusion(1.0 - spam, spam, strat),
            class_prior=np.full(k, 1.0 / k),
            annotator_columns=tuple(columns),
            ranking=Ranking.from_score(1.0 - spam, "1 − spamming probability (MACE)"),
            restarts=restarts,
        )
