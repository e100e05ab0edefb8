"""Bayesian Dawid–Skene with shared hyper-parameters: mean-field variational Bayes as in Kim & Ghahramani's
IBCC (AISTATS 2012, §3–4) with the empirical-Bayes hyper-parameter step of Li et al.'s EBCC style models.

Model: class prior ``π ~ Dir(a₀)``; annotator j's confusion row k ``Γ_jk ~ Dir(α₀_k)`` with the **same** K × K
hyper-parameters ``α₀`` for every annotator; ``T_i ~ π``, ``L_r ~ Γ_{j_r, T_i}``.  Mean-field
``q(T) q(π) Π_j q(Γ_j)``:

* E-step: ``log q_ik = E[log π_k] + Σ_r E[log Γ_{j_r, k, l_r}] + const`` with
  ``E[log Γ_jkl] = ψ(α_jkl) − ψ(Σ_l α_jkl)`` (``counts @ E[log Γ]``, as Dawid–Skene);
* M-step: ``α_jk = α₀_k + C_jk`` with expected counts ``C_jkl = Σ_i q_ik #(j said l on i)``; ``a = a₀ + Σ_i q_i``;
  then ``α₀`` by empirical Bayes: each row maximises ``Σ_j E_q[log Dir(Γ_jk; α₀_k)]``, the Dirichlet
  maximum-likelihood problem with sufficient statistics ``mean_j E[log Γ_jk]``, solved by Minka's fixed point
  ``ψ(α₀_kl) = ψ(Σ_l α₀_kl) + mean_j E[log Γ_jkl]`` (Minka 2000, "Estimating a Dirichlet distribution", eq. 9).

Every step is a coordinate ascent step on the evidence lower bound
``ELBO = Σ_i log Σ_k exp(log q̃_ik) − Σ_jk KL(q(Γ_jk) ‖ Dir(α₀_k)) − KL(q(π) ‖ Dir(a₀))``, which is the objective
the EM driver traces.  Sparse annotators keep confusion rows close to the crowd's ``α₀`` (shrinkage); annotators
with many responses are driven by their own counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
from scipy.special import digamma, gammaln, polygamma

from fusion_core.data.responses import Responses
from fusion_core.methods.base import Aggregator, Gold, clamp_gold, initial_posterior
from fusion_core.methods.dawid_skene.core import expected_counts, unary_log_likelihood
from fusion_core.methods.em import EMSettings, EStep, run_em
from fusion_core.methods.numerics import log_normalize
from fusion_core.methods.params import Choice, Float, Int, Param
from fusion_core.methods.registry import register
from fusion_core.methods.results import AnnotatorColumn, Fit

HYPER_RANGE = (1e-2, 1e4)  # α₀ entries are kept in this range (guards the fixed point on degenerate data)


class BDSState(NamedTuple):
    """Variational parameters: ``confusion`` (W × K × K Dirichlet parameters of q(Γ_j)), ``class_prior``
    (Dirichlet parameters of q(π)) and the shared hyper-parameters ``hyper`` (K × K, α₀)."""

    confusion: np.ndarray
    class_prior: np.ndarray
    hyper: np.ndarray


def expected_log_dirichlet(alpha: np.ndarray) -> np.ndarray:
    """``E[log p]`` under Dir(α) along the last axis: ``ψ(α) − ψ(Σ α)``."""
    return digamma(alpha) - digamma(alpha.sum(axis=-1, keepdims=True))


def kl_dirichlet(alpha: np.ndarray, alpha0: np.ndarray) -> np.ndarray:
    """KL(Dir(α) ‖ Dir(α₀)) along the last axis (α₀ broadcast against α)."""
    a0 = np.broadcast_to(alpha0, alpha.shape)
    s, s0 = alpha.sum(axis=-1), a0.sum(axis=-1)
    return (
        gammaln(s)
        - gammaln(alpha).sum(axis=-1)
        - gammaln(s0)
        + gammaln(a0).sum(axis=-1)
        + ((alpha - a0) * expected_log_dirichlet(alpha)).sum(axis=-1)
    )


def inverse_digamma(y: np.ndarray, n_newton: int = 6) -> np.ndarray:
    """ψ⁻¹(y) by Newton's method from Minka's starting point (Minka 2000, appendix C)."""
    x = np.where(y >= -2.22, np.exp(y) + 0.5, -1.0 / (y - digamma(1.0)))
    for _ in range(n_newton):
        x = x - (digamma(x) - y) / polygamma(1, x)
    return x


def dirichlet_fixed_point(mean_log: np.ndarray, start: np.ndarray, n_iter: int = 50) -> np.ndarray:
    """Dirichlet ML estimate per row from the mean log-probabilities (Minka's fixed point, eq. 9)."""
    alpha = start.copy()
    for _ in range(n_iter):
        new = inverse_digamma(digamma(alpha.sum(axis=-1, keepdims=True)) + mean_log)
        new = np.clip(new, *HYPER_RANGE)
        if np.max(np.abs(new - alpha) / alpha) < 1e-8:
            return new
        alpha = new
    return alpha


@dataclass
class BayesianDSModel:
    """Variational Bayesian Dawid–Skene for the EM driver (see the module docstring)."""

    resp: Responses
    hyper0: np.ndarray
    prior_class: float = 1.0
    empirical_bayes: bool = True
    gold: Gold | None = None

    def e_step(self, state: BDSState, temperature: float = 1.0) -> EStep:
        elog_conf = expected_log_dirichlet(state.confusion)
        joint = unary_log_likelihood(self.resp, np.exp(elog_conf)) + expected_log_dirichlet(state.class_prior)
        post, lognorm = log_normalize(joint)
        terms = lognorm
        if temperature != 1.0:
            post = log_normalize(joint / temperature)[0]
        if self.gold is not None and len(self.gold[0]):
            terms = lognorm.copy()
            terms[self.gold[0]] = joint[self.gold[0], self.gold[1]]
            clamp_gold(post, self.gold)
        kl = kl_dirichlet(state.confusion, state.hyper[None]).sum()
        kl += float(kl_dirichlet(state.class_prior, np.full_like(state.class_prior, self.prior_class)))
        return EStep(post, float(terms.sum() - kl), stats=(post, state.hyper), log_joint=joint)

    def m_step(self, stats: tuple[np.ndarray, np.ndarray]) -> BDSState:
        """q(Γ), q(π) given the posteriors and the current α₀; then α₀ by empirical Bayes."""
        post, hyper = stats
        counts = expected_counts(self.resp, post)
        conf = hyper[None] + counts
        if self.empirical_bayes:
            active = self.resp.responses_per_worker > 0
            mean_log = expected_log_dirichlet(conf[active]).mean(axis=0)
            hyper = dirichlet_fixed_point(mean_log, hyper, n_iter=5)  # warm start; each pass raises the ELBO
        return BDSState(conf, self.prior_class + post.sum(axis=0), hyper)

    def start(self, posterior: np.ndarray) -> BDSState:
        return self.m_step((clamp_gold(np.array(posterior, dtype=float), self.gold), self.hyper0))

    def permute(self, state: BDSState, source: np.ndarray) -> BDSState:
        """Latent class j of the new state is class ``source[j]`` of ``state`` (reported labels unchanged)."""
        return BDSState(state.confusion[:, source, :], state.class_prior[source], state.hyper[source, :])


@register(
    "bds",
    title="Bayesian Dawid–Skene (annotators shrunk towards the crowd)",
    summary="Variational Bayes Dawid–Skene whose Dirichlet priors are shared by all annotators and learnt "
    "from the data, so annotators with few responses borrow strength from the crowd.",
    family="bayesian_ds",
    reference="Kim & Ghahramani, 'Bayesian Classifier Combination', AISTATS 2012 (IBCC, VB); shared "
    "hyper-parameters by empirical Bayes (Minka 2000 fixed point), as in Li et al.'s EBCC.",
)
class BayesianDawidSkene(Aggregator):
    """Bayesian Dawid–Skene (IBCC, mean-field VB) with hyper-parameters shared across annotators.

    Every annotator's confusion row k has the prior Dir(α₀_k); α₀ starts at ``prior_off_diagonal`` everywhere
    plus ``prior_diagonal`` on the diagonal and, with ``hyperparameters="empirical-bayes"``, is re-estimated
    from all annotators at each step, so the crowd decides how much a sparse annotator is shrunk.
    ``confusion_`` holds posterior means; ``loss_history_`` the ELBO.  Reported per annotator
    (``result_.annotator_columns``): ``crowd_share``, the share of the annotator's confusion estimate that
    comes from the shared prior rather than their own responses.  Gold labels are clamped.

    Examples
    --------
    >>> from fusion_core.simulate import dawid_skene
    >>> sim = dawid_skene(n_items=300, n_workers=40, n_classes=2, responses_per_item=3, seed=0)
    >>> b = BayesianDawidSkene().fit(sim.responses)
    >>> bool((b.labels_ == sim.truth.reindex(b.labels_.index)).mean() > 0.8)
    True
    """

    params: ClassVar[dict[str, Param]] = {
        "hyperparameters": Choice(
            "empirical-bayes",
            ("empirical-bayes", "fixed"),
            help="'empirical-bayes': learn the shared Dirichlet priors from all annotators; 'fixed': keep them.",
        ),
        "prior_diagonal": Float(
            2.0, low=0.0, high=1000.0, help="Extra pseudo-count on correct answers in the (initial) shared prior."
        ),
        "prior_off_diagonal": Float(
            1.0, low=0.0, high=1000.0, low_open=True, help="Pseudo-count on every cell of the (initial) shared prior."
        ),
        "prior_class": Float(1.0, low=0.0, high=1000.0, low_open=True, help="Dirichlet pseudo-count on class priors."),
        "tol": Float(1e-6, low=0.0, high=1.0, help="Stop when the relative change of the ELBO is below tol."),
        "max_iter": Int(500, low=1, high=100_000, help="Maximum VB iterations."),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        k = responses.n_classes
        hyper0 = np.full((k, k), float(self.prior_off_diagonal)) + float(self.prior_diagonal) * np.eye(k)
        model = BayesianDSModel(
            responses, hyper0, float(self.prior_class), self.hyperparameters == "empirical-bayes", gold
        )
        settings = EMSettings(tol=float(self.tol), max_iter=int(self.max_iter), name="Bayesian DS VB")
        run = run_em(model, model.start(initial_posterior(responses, "mv")), settings)
        st = run.state
        conf = st.confusion / st.confusion.sum(axis=2, keepdims=True)
        prior = st.class_prior / st.class_prior.sum()
        own = st.confusion.sum(axis=(1, 2)) - st.hyper.sum()
        share = st.hyper.sum() / (st.hyper.sum() + own)
        return Fit(
            posterior=run.posterior,
            confusion=conf,
            class_prior=prior,
            log_likelihood=run.log_likelihood,
            n_iter=run.n_iter,
            converged=run.converged,
            annotator_columns=(
                AnnotatorColumn(
                    "crowd_share",
                    "share borrowed from the crowd",
                    share,
                    "Share of this annotator's confusion estimate that comes from the crowd's shared prior "
                    "(1 = no responses of their own, 0 = only their own responses).",
                ),
            ),
            details={"hyperparameters": st.hyper},
        )
