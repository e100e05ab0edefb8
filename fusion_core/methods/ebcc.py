"""EBCC: Enhanced Bayesian Classifier Combination (Li, Rubinstein & Cohn, "Exploiting worker correlation for label
aggregation in crowdsourcing", ICML 2019; updates, defaults and the restart rule from the authors' code
``yuan-li/truth-inference-at-scale``, ``code/ebcc.py`` and ``test_ebcc.ipynb``).

Model: each true class k has ``M`` latent *subtypes* (a mixture); an item draws its class and then a
subtype, and every annotator has one confusion row per (class, subtype), so annotators who err on the same kind of
item are correlated through the subtype::

    τ ~ Dir(α),  π_k ~ Dir(a_π/M · 1_M),  v_jkm ~ Dir(β_k)   (β_kk = a_v, β_kl = b_v)
    z_i ~ τ,  g_i | z_i = k ~ π_k,  y_ij | z_i = k, g_i = m ~ v_jkm.

Mean-field VB ``q(z, g) q(τ) Π_k q(π_k) Π_jkm q(v_jkm)`` (the updates of the authors' ``ebcc_vb``):

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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma, gammaln

from fusion_core.data.responses import Responses, canonical_order
from fusion_core.errors import UserInputError
from fusion_core.methods.base import Aggregator, Gold, clamp_gold, initial_posterior
from fusion_core.methods.bayesian_ds import expected_log_dirichlet, kl_dirichlet
from fusion_core.methods.em import EMSettings, EStep, run_em
from fusion_core.methods.em.squarem import run_squarem_lockstep
from fusion_core.methods.params import Bool, Float, Int, Param, Seed
from fusion_core.methods.registry import register
from fusion_core.methods.results import AnnotatorColumn, Fit, Restarts

MAX_CONFUSION_ENTRIES = 10_000_000  # W·K·M·K Dirichlet parameters (80 MB; ~5 such arrays live), checked first
BATCH_ENTRIES = 8_000_000  # starts run side by side while their μ and q arrays stay below this many entries (64 MB)


class EBCCState(NamedTuple):
    """Variational Dirichlet parameters of S starts run side by side: ``class_prior`` ν (S × K), ``subtype`` η
    (S × K × M) and ``confusion`` μ (reported × workers × S × true × subtype)."""

    class_prior: np.ndarray
    subtype: np.ndarray
    confusion: np.ndarray

    def pick(self, s: int) -> EBCCState:
        """Start ``s`` alone (S = 1)."""
        return EBCCState(self.class_prior[s : s + 1], self.subtype[s : s + 1], self.confusion[:, :, s : s + 1])

    def mean_confusion(self) -> np.ndarray:
        """``E[v_jkml]`` of the first start as workers × true × subtype × reported (rows sum to 1)."""
        mu = self.confusion[:, :, 0].transpose(1, 2, 3, 0)
        return mu / mu.sum(axis=-1, keepdims=True)

    def subtype_share(self) -> np.ndarray:
        """``E[π_km]`` of the first start (K × M)."""
        return self.subtype[0] / self.subtype[0].sum(axis=1, keepdims=True)

    def marginal_confusion(self) -> np.ndarray:
        """``Γ_j[k, l] = Σ_m E[π_km] E[v_jkml]`` of the first start: the distribution of one response given the
        class (workers × true × reported, rows sum to 1)."""
        return np.einsum("km,wkml->wkl", self.subtype_share(), self.mean_confusion())


class EBCCStats(NamedTuple):
    """E-step output for the M-step: ``q`` (items × S·K·M, start-major then class-major), each start's ELBO (S) and
    class posterior (items × S × K)."""

    q: np.ndarray
    elbo: np.ndarray
    posterior: np.ndarray


@dataclass
class EBCCModel:
    """EBCC's mean-field VB for the EM driver (module docstring), ``n_starts`` independent starts advanced side by
    side: every step is one sparse–dense product for all starts, and the driver traces the sum of their ELBOs
    (each is non-decreasing, so the sum is; ``history`` maps each traced sum to the starts' own ELBOs).  Arrays are
    reported-label-major (``μ[l, j, s, k, m]``) and the count matrix has one column per (reported label,
    annotator), so the products' outputs are reshapes, not transposed copies."""

    resp: Responses
    n_subtypes: int
    n_starts: int
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
        indptr = np.zeros(r.n_items + 1, dtype=np.int64)  # responses come sorted by item (canonical order)
        np.cumsum(np.bincount(r.item, minlength=r.n_items), out=indptr[1:])
        self.counts = sp.csr_matrix((values, cols, indptr), shape=(r.n_items, k * w))
        self.counts_t = self.counts.T  # CSC view: the M-step's product needs no conversion
        # Σ_l lnΓ(β_kl) − lnΓ(Σ_l β_kl): the prior's share of KL(q(v_jkm) ‖ Dir(β_k)), per class k
        self.prior_lognorm = gammaln(self.beta).sum(axis=1) - gammaln(self.beta.sum(axis=1))
        self.history: dict[float, np.ndarray] = {}

    # ---------------------------------------------------------------------------------------------- steps
    def m_step(self, stats: EBCCStats | np.ndarray) -> EBCCState:
        """Dirichlet parameters from ``q`` (items × S·K·M)."""
        q = stats.q if isinstance(stats, EBCCStats) else stats
        w, k, m, s = self.resp.n_workers, self.resp.n_classes, self.n_subtypes, self.n_starts
        tot = q.sum(axis=0).reshape(s, k, m)
        mu = np.asarray(self.counts_t @ q).reshape(k, w, s, k, m)  # reported × worker × start × class × subtype
        mu += self.beta.T[:, None, None, :, None]
        return EBCCState(self.alpha[None, :] + tot.sum(axis=2), tot + self.a_pi / m, mu)

    def e_step(self, state: EBCCState, temperature: float = 1.0) -> EStep:
        r, m, s = self.resp, self.n_subtypes, self.n_starts
        n, k, w = r.n_items, r.n_classes, r.n_workers
        nu, eta, mu = state
        total = mu[0].copy()
        for lab in range(1, k):
            total += mu[lab]
        elog_v = digamma(mu)
        elog_v -= digamma(total)[None]
        joint = np.asarray(self.counts @ elog_v.reshape(k * w, s * k * m)).reshape(n, s, k * m)
        elog_tau = digamma(nu) - digamma(nu.sum(axis=1, keepdims=True))
        joint += (expected_log_dirichlet(eta) + elog_tau[:, :, None]).reshape(1, s, k * m)
        if temperature != 1.0:
            joint /= temperature
        # row-wise log-normalisation in place (q is the joint array, no copies of items × S·K·M)
        top = joint.max(axis=2)
        joint -= top[:, :, None]
        np.exp(joint, out=joint)
        tot = joint.sum(axis=2)
        joint /= tot[:, :, None]
        lognorm = np.log(tot) + top
        q = joint.reshape(n, s, k, m)
        if self.gold is not None and len(self.gold[0]):  # q(z_i = gold, g_i = m) ∝ q̃_i,gold,m; log Z_i over those
            items, cls = self.gold
            mass = q[items, :, cls, :]  # gold items × S × M
            share = mass.sum(axis=2)
            lognorm[items] += np.log(np.maximum(share, 1e-300))
            q[items] = 0.0
            q[items, :, cls, :] = mass / np.maximum(share, 1e-300)[:, :, None]
        post = q.sum(axis=3)
        # KL(Dir(μ_jskm) ‖ Dir(β_k)) = lnΓ(Σμ) − Σ lnΓ(μ) − lnΓ(Σβ) + Σ lnΓ(β) + Σ (μ − β) E[log v], per start
        kl = gammaln(total).sum(axis=(0, 2, 3)) - gammaln(mu).sum(axis=(0, 1, 3, 4)) + w * m * self.prior_lognorm.sum()
        kl += np.einsum("lwskm,lwskm->s", mu, elog_v) - np.einsum("lk,lwskm->s", self.beta.T, elog_v)
        kl += kl_dirichlet(nu, self.alpha[None, :]) + kl_dirichlet(eta, np.full(m, self.a_pi / m)).sum(axis=1)
        elbo = lognorm.sum(axis=0) - kl
        self.history[float(elbo.sum())] = elbo
        best = int(np.argmax(elbo))
        return EStep(post[:, best], float(elbo.sum()), stats=EBCCStats(q.reshape(n, -1), elbo, post))

    def flat(self, state: EBCCState) -> np.ndarray:
        """All Dirichlet parameters as one vector (SQUAREM's extrapolation space)."""
        return np.concatenate([a.ravel() for a in state])

    def unflat(self, vector: np.ndarray) -> EBCCState:
        """A state from :meth:`flat`'s vector, every Dirichlet parameter kept positive."""
        s, k, m, w = self.n_starts, self.resp.n_classes, self.n_subtypes, self.resp.n_workers
        v = np.maximum(vector, 1e-8)
        a, b = s * k, s * k + s * k * m
        return EBCCState(v[:a].reshape(s, k), v[a:b].reshape(s, k, m), v[b:].reshape(k, w, s, k, m))

    def start(self, z: np.ndarray, splits: np.ndarray) -> EBCCState:
        """Parameters from the class posterior ``z`` (items × K) and subtype splits (items × S × M)."""
        q = z[:, None, :, None] * splits[:, :, None, :]
        return self.m_step(q.reshape(z.shape[0], -1))


def check_size(resp: Responses, n_subtypes: int) -> None:
    """Refuse fits whose confusion parameters (one start) would not fit in memory (checked before allocating)."""
    k = resp.n_classes
    size = resp.n_workers * k * k * n_subtypes
    if size > MAX_CONFUSION_ENTRIES:
        raise UserInputError(
            f"EBCC would need {size:,} confusion parameters ({resp.n_workers:,} annotators × {k} classes² × "
            f"{n_subtypes} subtypes), more than {MAX_CONFUSION_ENTRIES:,}; lower n_subtypes or use 'ds'."
        )


def batches(n_starts: int, resp: Responses, n_subtypes: int) -> list[int]:
    """Starts per batch: as many as keep μ and q below :data:`BATCH_ENTRIES` entries (at least one start)."""
    k = resp.n_classes
    per_start = max(resp.n_workers * k * k * n_subtypes, resp.n_items * k * n_subtypes, 1)
    size = max(1, min(n_starts, BATCH_ENTRIES // per_start))
    return [min(size, n_starts - i) for i in range(0, n_starts, size)]


@register(
    "ebcc",
    title="EBCC (correlated annotators)",
    summary="Enhanced Bayesian Classifier Combination: each class has latent subtypes shared by all annotators, so "
    "annotators who err on the same kind of item are modelled as correlated (variational Bayes).",
    family="bayesian",
    reference="Li, Rubinstein & Cohn, 'Exploiting worker correlation for label aggregation in crowdsourcing', "
    "ICML 2019 (updates and defaults of the authors' code, yuan-li/truth-inference-at-scale).",
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
            5,
            low=1,
            high=200,
            help="Random subtype splits to start from, run side by side; the best ELBO is kept (the authors' "
            "published runs keep the best of 40; one start alone lands in a poorer optimum on some crowds).",
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
        "accelerate": Bool(
            True,
            help="SQUAREM extrapolation with a monotone safeguard (the ELBO never decreases): same optima in a third "
            "to a half of the iterations; off = plain coordinate ascent.",
        ),
        "random_state": Seed(1234, help="Seed of the random subtype splits (authors' default 1234)."),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        n_sub = int(self.n_subtypes)
        check_size(responses, n_sub)
        resp = canonical_order(responses)
        z = clamp_gold(initial_posterior(resp, "mv"), gold)
        alpha = z.sum(axis=0) if self.empirical_prior else np.ones(resp.n_classes)
        alpha = np.maximum(alpha, 1e-3)  # a class nobody voted for keeps a proper prior
        rng = np.random.default_rng(self.random_state)
        settings = EMSettings(tol=float(self.tol), max_iter=int(self.max_iter), name="EBCC VB")
        best: tuple[float, EBCCState, np.ndarray, list[float]] | None = None
        finals: list[float] = []
        n_iter, done = 0, True
        for size in batches(int(self.n_starts), resp, n_sub):
            # one Dir(1) split per item and start, drawn in item-code order and shared by the classes
            splits = rng.dirichlet(np.ones(n_sub), size=(size, resp.n_items)).transpose(1, 0, 2)
            model = EBCCModel(resp, n_sub, size, alpha, float(self.a_pi), float(self.a_v), float(self.b_v), gold)
            state0 = model.start(z, splits)
            if self.accelerate:
                run = run_squarem_lockstep([model], [state0], [settings], _batched_m_steps(model))[0]
            else:
                run = run_em(model, state0, settings)
            stats: EBCCStats = run.estep.stats
            finals += stats.elbo.tolist()
            n_iter, done = max(n_iter, run.n_iter), done and run.converged
            s = int(np.argmax(stats.elbo))
            if best is None or stats.elbo[s] > best[0]:
                trace = [float(model.history[v][s]) for v in run.log_likelihood]
                best = (float(stats.elbo[s]), run.state.pick(s), stats.posterior[:, s], trace)
        assert best is not None
        _, state, posterior, trace = best
        restarts = None
        if len(finals) > 1:
            restarts = Restarts(log_likelihoods=np.asarray(finals), best=int(np.argmax(finals)))
        return Fit(
            posterior=clamp_gold(posterior.copy(), gold),
            confusion=state.marginal_confusion(),
            class_prior=state.class_prior[0] / state.class_prior[0].sum(),
            log_likelihood=trace,
            n_iter=n_iter,
            converged=done,
            annotator_columns=(_spread_column(state),),
            restarts=restarts,
            details={"subtype_weights": state.subtype_share()},
        )


def _batched_m_steps(model: EBCCModel) -> Callable[[list[int], list[Any]], list[EBCCState]]:
    """SQUAREM's lockstep M-step call for the one model of a batch."""

    def m_steps(_: list[int], stats: list[Any]) -> list[EBCCState]:
        return [model.m_step(x) for x in stats]

    return m_steps


def _spread_column(state: EBCCState) -> AnnotatorColumn:
    """Per annotator: the largest spread (max − min) of the accuracy ``E[v_jkmk]`` between the subtypes of a
    class that carry at least 5 % of it, over classes."""
    pi = state.subtype_share()
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
