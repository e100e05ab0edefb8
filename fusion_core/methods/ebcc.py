"""EBCC: Enhanced Bayesian Classifier Combination (Li, Rubinstein & Cohn, "Exploiting worker correlation for label
aggregation in crowdsourcing", ICML 2019, §3; defaults and the restart rule from the authors' code
``yuan-li/truth-inference-at-scale``, ``code/ebcc.py`` and ``test_ebcc.ipynb``).

Model (paper §3.1): each true class k has ``M`` latent *subtypes* (a mixture); an item draws its class and then a
subtype, and every annotator has one confusion row per (class, subtype), so annotators who err on the same kind of
item are correlated through the subtype::

    τ ~ Dir(α),  π_k ~ Dir(a_π/M · 1_M),  v_jkm ~ Dir(β_k)   (β_kk = a_v, β_kl = b_v)
    z_i ~ τ,  g_i | z_i = k ~ π_k,  y_ij | z_i = k, g_i = m ~ v_jkm.

Mean-field VB ``q(z, g) q(τ) Π_k q(π_k) Π_jkm q(v_jkm)`` (paper §3.2, eqs. 6–9):

* M-step: ``ν = α + Σ_i q(z_i)``, ``η_km = a_π/M + Σ_i q_ikm``, ``μ_jkml = β_kl + Σ_i q_ikm #(j said l on i)``
  (``countsᵀ @ q``, one sparse–dense product);
* E-step: ``log q_ikm = E[log τ_k] + E[log π_km] + Σ_r E[log v_{j_r k m l_r}] + const`` (``counts @ E[log v]``);
* objective: the evidence lower bound ``Σ_i log Σ_km exp(log q̃_ikm) − KL(q(τ)‖p) − Σ_k KL(q(π_k)‖p)
  − Σ_jkm KL(q(v_jkm)‖p)``, non-decreasing under both steps (traced by the shared EM driver).

Start (authors' code): the class posterior is the majority-vote share and the subtype split is random,
``q_ikm = z_ik · d_im`` with ``d_i ~ Dir(1_M)``; several starts, the one with the highest ELBO kept (the authors'
published figures keep the best of 40).  Here ``d_i`` is drawn per item in item-code order and shared by the
classes, so neither the row order nor the label names change a start.  ``α`` is the majority-vote class count
(the authors' ``empirical_prior=True``) or 1 per class.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar, NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma, gammaln

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.methods.base import Aggregator, Gold, clamp_gold, initial_posterior
from fusion_core.methods.bayesian_ds import expected_log_dirichlet, kl_dirichlet
from fusion_core.methods.em import EMSettings, EStep, best_run, run_em
from fusion_core.methods.numerics import log_normalize
from fusion_core.methods.params import Bool, Float, Int, Param, Seed
from fusion_core.methods.registry import register
from fusion_core.methods.results import AnnotatorColumn, Fit

MAX_CONFUSION_ENTRIES = 50_000_000  # W·K·M·K Dirichlet parameters (400 MB as float64) checked before allocating


class EBCCState(NamedTuple):
    """Variational Dirichlet parameters: ``class_prior`` ν (K), ``subtype`` η (K × M) and ``confusion`` μ
    (reported × workers × true × subtype)."""

    class_prior: np.ndarray
    subtype: np.ndarray
    confusion: np.ndarray

    def mean_confusion(self) -> np.ndarray:
        """``E[v_jkml]`` as workers × true × subtype × reported (rows over the reported label sum to 1)."""
        mu = self.confusion.transpose(1, 2, 3, 0)
        return mu / mu.sum(axis=-1, keepdims=True)

    def marginal_confusion(self) -> np.ndarray:
        """``Γ_j[k, l] = Σ_m E[π_km] E[v_jkml]``: the response distribution of one response given the class
        (workers × true × reported, rows sum to 1)."""
        pi = self.subtype / self.subtype.sum(axis=1, keepdims=True)
        return np.einsum("km,wkml->wkl", pi, self.mean_confusion())


def canonical_order(resp: Responses) -> Responses:
    """The responses sorted by (item, worker, label) codes, so sums never depend on the input's row order."""
    k, w = resp.n_classes, resp.n_workers
    key = (resp.item.astype(np.int64) * w + resp.worker) * k + resp.label
    order = np.argsort(key, kind="stable")
    weight = None if resp.weight is None else resp.weight[order]
    return replace(resp, item=resp.item[order], worker=resp.worker[order], label=resp.label[order], weight=weight)


@dataclass
class EBCCModel:
    """EBCC's mean-field VB for the EM driver (see the module docstring).  Arrays are reported-label-major
    (``μ[l, j, k, m]``) and the count matrix has one column per (reported label, annotator), so the M-step's
    ``countsᵀ @ q`` and the E-step's table are reshapes, not transposed copies, and sums over the reported label
    are additions of K contiguous blocks."""

    resp: Responses
    n_subtypes: int
    alpha: np.ndarray  # K: Dirichlet prior of the class shares
    a_pi: float
    a_v: float
    b_v: float
    gold: Gold | None = None

    def __post_init__(self) -> None:
        r = self.resp
        k, w = r.n_classes, r.n_workers
        self.beta = np.full((k, k), float(self.b_v))  # true × reported
        np.fill_diagonal(self.beta, float(self.a_v))
        values = np.ones(r.n_responses) if r.weight is None else np.asarray(r.weight, dtype=float)
        cols = r.label.astype(np.int64) * w + r.worker
        self.counts = sp.csr_matrix((values, (r.item, cols)), shape=(r.n_items, k * w))
        self.counts_t = self.counts.T.tocsr()
        # Σ_l lnΓ(β_kl) − lnΓ(Σ_l β_kl): the prior's share of KL(q(v_jkm) ‖ Dir(β_k)), per class k
        self.prior_lognorm = gammaln(self.beta).sum(axis=1) - gammaln(self.beta.sum(axis=1))

    # ---------------------------------------------------------------------------------------------- steps
    def m_step(self, q: np.ndarray) -> EBCCState:
        """Dirichlet parameters from ``q`` (items × K·M, class-major)."""
        w, k, m = self.resp.n_workers, self.resp.n_classes, self.n_subtypes
        tot = q.sum(axis=0).reshape(k, m)
        mu = np.asarray(self.counts_t @ q).reshape(k, w, k, m)  # reported × worker × class × subtype
        mu += self.beta.T[:, None, :, None]
        return EBCCState(self.alpha + tot.sum(axis=1), tot + self.a_pi / m, mu)

    def e_step(self, state: EBCCState, temperature: float = 1.0) -> EStep:
        r, m = self.resp, self.n_subtypes
        k, w = r.n_classes, r.n_workers
        nu, eta, mu = state
        total = mu[0].copy()
        for l in range(1, k):
            total += mu[l]
        dg_total = digamma(total)
        elog_v = digamma(mu)
        elog_v -= dg_total[None]
        joint = np.asarray(self.counts @ elog_v.reshape(k * w, k * m))
        prior = expected_log_dirichlet(eta) + (digamma(nu) - digamma(nu.sum()))[:, None]
        joint += prior.reshape(1, k * m)
        if temperature != 1.0:
            joint /= temperature
        q, lognorm = log_normalize(joint)
        if self.gold is not None and len(self.gold[0]):
            items, cls = self.gold
            cols = cls[:, None] * m + np.arange(m)[None, :]
            sub, sub_norm = log_normalize(joint[items[:, None], cols])
            q[items] = 0.0
            q[items[:, None], cols] = sub
            lognorm = lognorm.copy()
            lognorm[items] = sub_norm
        post = q.reshape(-1, k, m).sum(axis=2)
        # KL(Dir(μ_jkm) ‖ Dir(β_k)) = lnΓ(Σμ) − Σ lnΓ(μ) − lnΓ(Σβ) + Σ lnΓ(β) + Σ (μ − β) E[log v]
        kl_v = gammaln(total).sum() - gammaln(mu).sum() + w * m * self.prior_lognorm.sum()
        kl_v += float(np.einsum("lwkm,lwkm->", mu, elog_v)) - float(np.einsum("lk,lwkm->", self.beta.T, elog_v))
        kl = kl_v + float(kl_dirichlet(nu, self.alpha)) + float(kl_dirichlet(eta, np.full(m, self.a_pi / m)).sum())
        return EStep(post, float(lognorm.sum()) - kl, stats=q)

    def start(self, z: np.ndarray, split: np.ndarray) -> EBCCState:
        """Parameters from the class posterior ``z`` (items × K) and a subtype split ``split`` (items × M)."""
        q = (z[:, :, None] * split[:, None, :]).reshape(z.shape[0], -1)
        return self.m_step(q)


def check_size(resp: Responses, n_subtypes: int) -> None:
    """Refuse fits whose confusion parameters would not fit in memory (checked before allocating)."""
    k = resp.n_classes
    size = resp.n_workers * k * k * n_subtypes
    if size > MAX_CONFUSION_ENTRIES:
        raise UserInputError(
            f"EBCC would need {size:,} confusion parameters ({resp.n_workers:,} annotators × {k} classes² × "
            f"{n_subtypes} subtypes), more than {MAX_CONFUSION_ENTRIES:,}; lower n_subtypes or use 'ds'."
        )


@register(
    "ebcc",
    title="EBCC (correlated annotators)",
    summary="Enhanced Bayesian Classifier Combination: each class has latent subtypes shared by all annotators, so "
    "annotators who err on the same kind of item are modelled as correlated (variational Bayes).",
    family="bayesian",
    reference="Li, Rubinstein & Cohn, 'Exploiting worker correlation for label aggregation in crowdsourcing', "
    "ICML 2019, §3 (defaults of the authors' code).",
)
class EBCC(Aggregator):
    """Enhanced Bayesian Classifier Combination (Li, Rubinstein & Cohn, ICML 2019).

    Every true class is a mixture of ``n_subtypes`` latent subtypes; each annotator has a Dirichlet-distributed
    confusion row per (class, subtype), so correlated errors on one kind of item are explained by the subtype
    instead of by the annotators' independence.  Mean-field variational Bayes through the shared EM driver
    (objective: the ELBO); ``n_starts`` random subtype splits, the start with the best ELBO kept.
    ``confusion_[j, k, l] = Σ_m E[π_km] E[v_jkml]`` (one response's distribution given the class);
    ``result_.annotator_columns``: ``subtype_accuracy_spread`` (how much the annotator's accuracy changes
    between the subtypes of a class).  Gold labels are clamped.

    Examples
    --------
    >>> from fusion_core.simulate import dawid_skene
    >>> sim = dawid_skene(n_items=300, n_workers=10, n_classes=2, seed=1)
    >>> m = EBCC(n_starts=1).fit(sim.responses)
    >>> bool((m.labels_ == sim.truth.reindex(m.labels_.index)).mean() > 0.9)
    True
    """

    params: ClassVar[dict[str, Param]] = {
        "n_subtypes": Int(10, low=1, high=100, help="Latent subtypes per class (paper's M; authors' default 10)."),
        "n_starts": Int(
            1,
            low=1,
            high=200,
            help="Random subtype splits to start from; the fit with the best ELBO is kept (the authors' published "
            "runs keep the best of 40).",
        ),
        "a_pi": Float(
            0.1, low=0.0, high=1000.0, low_open=True, help="Total Dirichlet pseudo-count on a class's subtypes."
        ),
        "a_v": Float(4.0, low=0.0, high=1000.0, low_open=True, help="Prior pseudo-count on a correct response."),
        "b_v": Float(1.0, low=0.0, high=1000.0, low_open=True, help="Prior pseudo-count on each wrong response."),
        "empirical_prior": Bool(
            True,
            help="Dirichlet prior of the class shares = the majority-vote class counts (authors' runs); off: 1 each.",
        ),
        "tol": Float(1e-6, low=0.0, high=1.0, help="Stop when the relative change of the ELBO is below tol."),
        "max_iter": Int(500, low=1, high=100_000, help="Maximum iterations per start."),
        "random_state": Seed(1234, help="Seed of the random subtype splits (authors' default 1234)."),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        n_sub = int(self.n_subtypes)
        check_size(responses, n_sub)
        resp = canonical_order(responses)
        z = clamp_gold(initial_posterior(resp, "mv"), gold)
        alpha = z.sum(axis=0) if self.empirical_prior else np.ones(resp.n_classes)
        alpha = np.maximum(alpha, 1e-3)  # a class nobody voted for keeps a proper prior
        model = EBCCModel(resp, n_sub, alpha, float(self.a_pi), float(self.a_v), float(self.b_v), gold)
        rng = np.random.default_rng(self.random_state)
        settings = EMSettings(tol=float(self.tol), max_iter=int(self.max_iter), name="EBCC VB")
        runs = []
        for _ in range(int(self.n_starts)):
            split = rng.dirichlet(np.ones(n_sub), size=resp.n_items)
            runs.append(run_em(model, model.start(z, split), settings))
        run, restarts = best_run(runs)
        state: EBCCState = run.state
        conf = state.marginal_confusion()
        prior = state.class_prior / state.class_prior.sum()
        return Fit(
            posterior=clamp_gold(run.posterior.copy(), gold),
            confusion=conf,
            class_prior=prior,
            log_likelihood=run.log_likelihood,
            n_iter=run.n_iter,
            converged=run.converged,
            annotator_columns=(_spread_column(state),),
            restarts=restarts,
            details={"subtype_weights": state.subtype / state.subtype.sum(axis=1, keepdims=True)},
        )


def _spread_column(state: EBCCState) -> AnnotatorColumn:
    """Per annotator: the largest spread (max − min) of the accuracy ``E[v_jkmk]`` between the subtypes of a
    class that carry at least 5 % of it, over classes."""
    pi = state.subtype / state.subtype.sum(axis=1, keepdims=True)
    v = state.mean_confusion()
    k = v.shape[1]
    acc = v[:, np.arange(k), :, np.arange(k)].transpose(1, 0, 2)  # W × K × M
    used = (pi >= 0.05)[None, :, :]
    hi = np.where(used, acc, -np.inf).max(axis=2)
    lo = np.where(used, acc, np.inf).min(axis=2)
    spread = np.where(np.isfinite(hi - lo), hi - lo, 0.0).max(axis=1)
    return AnnotatorColumn(
        "subtype_accuracy_spread",
        "accuracy spread between subtypes",
        spread,
        "How much this annotator's accuracy changes between the latent subtypes of a class (0 = the same on every "
        "kind of item; large = good on some kinds, poor on others, which is where annotators are correlated).",
    )
