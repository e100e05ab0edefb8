"""Dawid–Skene EM steps as an :class:`~fusion_core.methods.em.EMModel` (full and one-coin confusion matrices).

Traganitis & Giannakis §3.1 (``papers/traganitis-giannakis-sequential-networked.txt``), spec
``sequential-networked.md`` §2.1: E-step eq. (9) with log priors, M-step eq. (11), priors
``π_k = (1/N) Σ_n q_nk``.  Missing responses contribute nothing (spec §1.4).

With the sparse count matrix ``A`` (items × workers·K) of :class:`~fusion_core.data.responses.Responses`, the
E-step's unary log-likelihood is ``L = A @ log Γ`` and the M-step's expected counts are ``Aᵀ @ q``: two
sparse–dense products per iteration, O(|responses|·K), no Python loop over responses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.methods.base import Gold, clamp_gold
from fusion_core.methods.dawid_skene.sweep import ds_sweep, expected_counts_of, gold_array
from fusion_core.methods.em import EMRun, EMSettings, EStep, run_em
from fusion_core.methods.numerics import log_normalize, log_normalize_into, normalize_rows, safe_log
from fusion_core.methods.results import Fit


class SweepStats(NamedTuple):
    """M-step statistics gathered during the E-step pass: expected counts (workers × true × reported) and class
    totals ``Σ_i q_i`` (the posterior itself is kept for models that need it)."""

    posterior: np.ndarray
    counts: np.ndarray
    class_total: np.ndarray


class DSState(NamedTuple):
    """Dawid–Skene parameters: ``confusion`` workers × true × reported (rows sum to 1) and ``class_prior``."""

    confusion: np.ndarray
    class_prior: np.ndarray


def expected_counts(resp: Responses, posterior: np.ndarray) -> np.ndarray:
    """M-step statistics ``C[w, k, l] = Σ_n q_nk · #(w said l on n)`` as ``workers × true × reported``."""
    k = resp.n_classes
    c = resp.counts.T @ posterior  # (W·K_reported) × K_true, read in item order (no random row gathers)
    return np.asarray(c).reshape(resp.n_workers, k, k).transpose(0, 2, 1)


def normalize_confusion(counts: np.ndarray, smoothing: float) -> np.ndarray:
    """Rows (true class) of ``counts + smoothing`` normalised to probabilities; empty rows become uniform."""
    return normalize_rows(counts, smoothing)


def unary_log_likelihood(resp: Responses, confusion: np.ndarray) -> np.ndarray:
    """``L[n, k] = Σ_{responses (w, l) on n} log Γ_w[k, l]`` (spec §2.0), items × K."""
    k = resp.n_classes
    log_g = safe_log(confusion).transpose(0, 2, 1).reshape(resp.n_workers * k, k)
    return np.asarray(resp.counts @ log_g)


def one_coin_confusion(counts: np.ndarray, smoothing: float) -> np.ndarray:
    """One-coin M-step: ``Γ_w = a_w I + (1 − a_w)/(K − 1)(11ᵀ − I)`` with ``a_w`` the expected share of worker w's
    responses that are correct (plus ``smoothing`` pseudo-counts on both outcomes)."""
    k = counts.shape[-1]
    correct = np.einsum("wkk->w", counts)
    total = counts.sum(axis=(1, 2))
    acc = (correct + smoothing) / np.maximum(total + 2 * smoothing, 1e-300)
    acc = np.where(total + 2 * smoothing > 0, acc, 1.0 / k)
    off = (1.0 - acc) / (k - 1)
    conf = np.repeat(off[:, None, None], k, axis=1).repeat(k, axis=2)
    idx = np.arange(k)
    conf[:, idx, idx] = acc[:, None]
    return conf


def log_dirichlet_prior(confusion: np.ndarray, smoothing: float) -> float:
    """The MAP objective's extra term ``α Σ log Γ`` (so the trace stays monotone with smoothing > 0)."""
    return float(smoothing * safe_log(confusion).sum()) if smoothing > 0 else 0.0


def e_step(
    resp: Responses, confusion: np.ndarray, class_prior: np.ndarray, gold: Gold | None = None, temperature: float = 1.0
) -> tuple[np.ndarray, float]:
    """Posteriors (eq. 9 with log priors) and the observed-data log-likelihood ``Σ_n log Σ_k π_k e^{L_nk}``.

    Gold items are clamped to their class and contribute their complete-data term.  ``temperature`` > 1 flattens
    the posterior (deterministic annealing); the log-likelihood is always at T = 1."""
    post, ll, _ = e_step_joint(resp, confusion, class_prior, gold, temperature)
    return post, ll


def e_step_joint(
    resp: Responses, confusion: np.ndarray, class_prior: np.ndarray, gold: Gold | None = None, temperature: float = 1.0
) -> tuple[np.ndarray, float, np.ndarray]:
    """:func:`e_step` plus the log-joint ``log π_k + L_nk`` (items × K) that annealing needs."""
    joint = unary_log_likelihood(resp, confusion)
    joint += safe_log(class_prior)[None, :]
    post = np.empty_like(joint)
    lognorm = log_normalize_into(joint, post)
    ll_terms = lognorm
    if temperature != 1.0:
        post, _ = log_normalize(joint / temperature)
    if gold is not None and len(gold[0]):
        ll_terms = ll_terms.copy()
        ll_terms[gold[0]] = joint[gold[0], gold[1]]
        clamp_gold(post, gold)
    return post, float(ll_terms.sum()), joint


def m_step(
    resp: Responses, posterior: np.ndarray, smoothing: float, estimate_priors: bool, one_coin: bool = False
) -> DSState:
    """Confusion matrices (eq. 11, plus optional Dirichlet smoothing) and class priors from posteriors."""
    counts = expected_counts(resp, posterior)
    return params_from_counts(counts, np.ones(len(posterior)) @ posterior, smoothing, estimate_priors, one_coin)


def params_from_counts(
    counts: np.ndarray, class_total: np.ndarray, smoothing: float, estimate_priors: bool, one_coin: bool
) -> DSState:
    """Confusion matrices (eq. 11, plus optional Dirichlet smoothing) and class priors from expected counts."""
    k = counts.shape[-1]
    conf = one_coin_confusion(counts, smoothing) if one_coin else normalize_confusion(counts, smoothing)
    if estimate_priors:
        prior = class_total + 1e-12
        prior = prior / prior.sum()
    else:
        prior = np.full(k, 1.0 / k)
    return DSState(conf, prior)


@dataclass
class DawidSkeneModel:
    """The Dawid–Skene model for the EM driver (also used by ``mm-ds``, ``sml-ds`` and the HMM starts).

    Each E-step is one fused pass (:func:`~fusion_core.methods.dawid_skene.sweep.ds_sweep`) that also gathers the
    next M-step's statistics.  ``keep_joint`` keeps the items × K log-joint (annealing needs it; tempered E-steps
    always keep it; the estimators turn it off when they do not anneal).  The driver hands back finished E-steps (:meth:`recycle`), whose posterior array the next
    E-step overwrites, so EM allocates no items × K array per iteration."""

    resp: Responses
    smoothing: float = 0.0
    estimate_priors: bool = True
    one_coin: bool = False
    gold: Gold | None = None
    keep_joint: bool = True
    backend: str | None = None
    _spare: np.ndarray | None = field(default=None, init=False, repr=False)
    _gold_class: np.ndarray | None = field(default=None, init=False, repr=False)

    def start(self, posterior: np.ndarray) -> DSState:
        """Parameters from initial posteriors (gold rows clamped first)."""
        return self.m_step(clamp_gold(np.array(posterior, dtype=float), self.gold))

    def m_step(self, stats: np.ndarray | SweepStats) -> DSState:
        if isinstance(stats, SweepStats):
            return params_from_counts(
                stats.counts, stats.class_total, self.smoothing, self.estimate_priors, self.one_coin
            )
        counts = expected_counts_of(self.resp, stats)  # on the pass's structure: Responses.counts is never built
        return params_from_counts(counts, stats.sum(axis=0), self.smoothing, self.estimate_priors, self.one_coin)

    def e_step(self, state: DSState, temperature: float = 1.0) -> EStep:
        if self._gold_class is None:
            self._gold_class = gold_array(self.resp.n_items, self.gold)
        out, self._spare = self._spare, None
        sw = ds_sweep(
            self.resp,
            state.confusion,
            state.class_prior,
            self.gold,
            temperature,
            want_joint=self.keep_joint or temperature != 1.0,
            out=out,
            backend=self.backend,
            gold_class=self._gold_class,
        )
        prior_term = log_dirichlet_prior(state.confusion, self.smoothing)
        return EStep(
            posterior=sw.posterior,
            log_likelihood=sw.log_likelihood + prior_term,
            stats=SweepStats(sw.posterior, sw.counts, sw.class_total),
            log_joint=sw.joint,
        )

    def recycle(self, estep: EStep) -> None:
        """The driver is done with ``estep`` (its M-step has run): its posterior buffer may be reused."""
        post = estep.posterior
        if post.shape == (self.resp.n_items, self.resp.n_classes) and post.flags.c_contiguous:
            self._spare = post

    # annealing (spec multilabel.md §7.3) and restarts
    def flat(self, state: DSState) -> np.ndarray:
        return np.concatenate([state.confusion.ravel(), state.class_prior.ravel()])

    def unflat(self, vector: np.ndarray) -> DSState:
        """The state of a :meth:`flat` vector (an extrapolated one, :mod:`fusion_core.methods.em.squarem`): entries
        clipped into [1e-12, 1], confusion rows and priors renormalised (a one-coin matrix stays one-coin)."""
        m, k = self.resp.n_workers, self.resp.n_classes
        conf = np.clip(vector[: m * k * k], 1e-12, 1.0).reshape(m, k, k)
        conf /= conf.sum(axis=2, keepdims=True)
        prior = np.clip(vector[m * k * k :], 1e-12, 1.0)
        return DSState(conf, prior / prior.sum())

    def informativeness(self, state: DSState) -> float:
        """DS J_max = max_w max_{k,k',l} |θ_w[k,l] − θ_w[k',l]| (spec §7.3)."""
        conf = state.confusion
        if conf.size == 0:
            return 0.0
        return float((conf.max(axis=1) - conf.min(axis=1)).max())

    def permute(self, state: DSState, source: np.ndarray) -> DSState:
        """Latent class j of the new state is class ``source[j]`` of ``state`` (reported labels unchanged)."""
        return DSState(state.confusion[:, source, :], state.class_prior[source])


def fit_em_from(
    resp: Responses,
    posterior: np.ndarray,
    *,
    smoothing: float = 0.0,
    estimate_priors: bool = True,
    tol: float = 1e-7,
    max_iter: int = 500,
    gold: Gold | None = None,
    one_coin: bool = False,
    name: str = "Dawid–Skene EM",
    warn: bool = True,
) -> EMRun[DSState]:
    """Dawid–Skene EM from initial posteriors through the shared driver (used by ``ds``, ``mm-ds``, ``sml-ds`` and the
    HMM starts)."""
    model = DawidSkeneModel(resp, smoothing, estimate_priors, one_coin, gold, keep_joint=False)
    return run_em(model, model.start(posterior), EMSettings(tol=tol, max_iter=max_iter, name=name, warn=warn))


def ds_fit(run: EMRun[DSState]) -> Fit:
    """The :class:`Fit` of a Dawid–Skene EM run."""
    return run.to_fit(confusion=run.state.confusion, class_prior=run.state.class_prior)
