"""Bayesian Dawid–Skene with shared hyper-parameters: mean-field variational Bayes as in Kim & Ghahramani's
IBCC (AISTATS 2012, §3–4) with the empirical-Bayes hyper-parameter step of Li et al.'s EBCC style models.

Model: class prior ``π ~ Dir(a₀)``; annotator j's confusion row k ``Γ_jk ~ Dir(α₀_k)`` with the **same** K × K
hyper-parameters ``α₀`` for every annotator; ``T_i ~ π``, ``L_r ~ Γ_{j_r, T_i}``.  Mean-field
``q(T) q(π) Π_j q(Γ_j)``:

* E-step: ``log q_ik = E[log π_k] + Σ_r E[log Γ_{j_r, k, l_r}] + const`` with
  ``E[log Γ_jkl] = ψ(α_jkl) − ψ(Σ_l α_jkl)`` (``counts @ E[log Γ]``, as Dawid–Skene);
* M-step: ``a = a₀ + Σ_i q_i`` and, jointly, ``α₀`` and ``q(Γ_jk) = Dir(α₀_k + C_jk)`` with expected counts
  ``C_jkl = Σ_i q_ik #(j said l on i)``: maximised over q(Γ), the ELBO's Γ terms are the Dirichlet-multinomial
  (Pólya) evidence ``Σ_jk log B(α₀_k + C_jk) − log B(α₀_k)`` of the counts, which ``α₀`` raises by a Newton step
  per row (Minka 2000, "Estimating a Dirichlet distribution", §3–4; empirical Bayes as in Li et al.'s EBCC).

Every step is a (block) coordinate ascent step on the evidence lower bound
``ELBO = Σ_i log Σ_k exp(log q̃_ik) − Σ_jk KL(q(Γ_jk) ‖ Dir(α₀_k)) − KL(q(π) ‖ Dir(a₀))``, which is the objective
the EM driver traces.  Sparse annotators keep confusion rows close to the crowd's ``α₀``
(shrinkage); annotators with many responses are driven by their own counts.

Speed on many classes (issue 21 item 6).  Only the observed (annotator, reported label) pairs (:class:`Cells`)
carry counts: every other cell of q(Γ_j) equals α₀ and contributes nothing to the E-step, to the KL term
(log Γ(α₀) − log Γ(α₀) = 0, α − α₀ = 0) or to the Pólya evidence, and the row totals are ``Σ α₀_k + N_jk``; so
the special functions run over P × K cells (P pairs) plus K × K, never W × K × K, and the E-step's KL term
reuses the evidence the M-step computed.  The hyper-parameters used to be updated with q(Γ) held fixed
(``α₀`` ← Dirichlet ML of ``mean_j E[log Γ_jk]``): that VB-EM step crawls when the shared prior outweighs each
annotator's counts (many classes, ~1 response per confusion row); on the 200-class benchmark it stopped after 89
SQUAREM iterations at an ELBO of −2755.9, a point one evidence step raises by 36 nats.  Updating ``α₀`` on the
evidence with q(Γ) maximised out removes that crawl (the same stationary points: q(Γ) is then optimal given α₀);
the outer iterations are still accelerated by SQUAREM with its monotone safeguard
(:mod:`fusion_core.methods.em.squarem`), so the ELBO trace never decreases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma, gammaln

from fusion_core.data.responses import Responses
from fusion_core.methods.base import Aggregator, Gold, clamp_gold, initial_posterior, posterior_terms
from fusion_core.methods.em import EMSettings, EStep
from fusion_core.methods.em.squarem import run_squarem_lockstep
from fusion_core.methods.params import Choice, Float, Int, Param
from fusion_core.methods.registry import register
from fusion_core.methods.results import AnnotatorColumn, Fit

HYPER_RANGE = (1e-2, 1e4)  # α₀ entries are kept in this range (guards the Newton steps on degenerate data)
HYPER_NEWTON = 1  # Newton steps on α₀ per M-step (warm-started; a generalised M-step, each raises the ELBO)
HYPER_RTOL = 1e-12  # a row whose Newton step would gain less evidence than this (relative) has settled
HALVINGS = 8  # a row whose evidence still falls after this many halvings of its step keeps its α₀
PER_HYPER = 10  # prior_structure="auto": the full K × K prior needs this many responses per hyper-parameter


@dataclass(frozen=True)
class Cells:
    """The observed (annotator j, reported label l) pairs ``p``: the only columns of the W × K × K Dirichlet table
    whose expected counts can be non-zero.  Every other cell of q(Γ_j) equals the prior α₀ and drops out of the
    E-step, the KL term and the Pólya evidence exactly.  ``dense=True`` takes every (j, l) pair (the reference
    path of the tests)."""

    worker: np.ndarray  # P: annotator of each pair
    label: np.ndarray  # P: reported label of each pair
    items: sp.csr_matrix  # items × P response counts (the pairs' columns of ``Responses.counts``)
    items_t: sp.csr_matrix  # P × items
    by_label: sp.csc_matrix  # P × K indicator: (K × P) @ by_label sums over the pairs of each reported label
    owner: np.ndarray  # P: row of each pair's annotator among the W' annotators owning a pair
    by_worker: sp.csc_matrix  # P × W' indicator: (K × P) @ by_worker sums over the pairs of each annotator

    @classmethod
    def of(cls, resp: Responses, dense: bool = False) -> Cells:
        k = resp.n_classes
        counts = resp.counts
        cols = np.arange(counts.shape[1]) if dense else np.flatnonzero(counts.getnnz(axis=0))
        worker, label = cols // k, cols % k
        items = counts[:, cols].tocsr()
        p = len(cols)
        owners, wcode = np.unique(worker, return_inverse=True)
        ones = np.ones(p)
        return cls(
            worker=worker,
            label=label,
            items=items,
            items_t=items.T.tocsr(),
            by_label=sp.csc_matrix((ones, (np.arange(p), label)), shape=(p, k)),
            owner=wcode,
            by_worker=sp.csc_matrix((ones, (np.arange(p), wcode)), shape=(p, len(owners))),
        )


class BDSState(NamedTuple):
    """Variational parameters: the shared hyper-parameters ``hyper`` (K × K, α₀), the expected counts ``counts``
    of the observed pairs (K true classes × P; q(Γ_j) = Dir(α₀ + C_j), zero counts off the pairs) and
    ``class_prior`` (Dirichlet parameters of q(π)); ``evidence`` caches the Pólya evidence of ``counts`` under
    ``hyper`` when the M-step has computed it (None: computed by the E-step)."""

    hyper: np.ndarray
    counts: np.ndarray
    class_prior: np.ndarray
    evidence: float | None = None


def expected_log_dirichlet(alpha: np.ndarray) -> np.ndarray:
    """``E[log p]`` under Dir(α) along the last axis: ``ψ(α) − ψ(Σ α)``."""
    return digamma(alpha) - digamma(alpha.sum(axis=-1, keepdims=True))


def kl_dirichlet(alpha: np.ndarray, alpha0: np.ndarray, elog: np.ndarray | None = None) -> np.ndarray:
    """KL(Dir(α) ‖ Dir(α₀)) along the last axis (α₀ broadcast against α); ``elog`` = E[log p] under Dir(α) if
    already known."""
    if elog is None:
        elog = expected_log_dirichlet(alpha)
    s = alpha.sum(axis=-1)
    a0 = np.asarray(alpha0, dtype=float)
    lead = alpha.shape[:-1]
    norm0 = np.broadcast_to(gammaln(a0.sum(axis=-1)) - gammaln(a0).sum(axis=-1), lead)  # log 1/B(α₀), small
    cross = (alpha * elog).sum(axis=-1) - (elog * a0).sum(axis=-1)
    return gammaln(s) - gammaln(alpha).sum(axis=-1) - norm0 + cross


def trigamma(x: np.ndarray) -> np.ndarray:
    """ψ'(x) for x > 0: ψ'(x) = Σ_{i<7} 1/(x + i)² + ψ'(x + 7), the last by its asymptotic series to y⁻¹¹
    (Abramowitz & Stegun 6.4.12; relative error < 2e-11).  scipy's ``polygamma(1, ·)`` goes through the Hurwitz
    zeta and was the bottleneck of the hyper-parameter step at K = 200; in-place passes, few temporaries."""
    x = np.asarray(x, dtype=float)
    out = np.zeros_like(x)
    t = x.copy()
    r = np.empty_like(x)
    for _ in range(7):
        np.reciprocal(t, out=r)
        r *= r
        out += r
        t += 1.0
    np.reciprocal(t, out=t)  # t = 1/y, y = x + 7
    np.multiply(t, t, out=r)  # r = 1/y²
    # ψ'(y) ≈ t (1 + t/2 + r (1/6 − r/30 + r²/42 − r³/30 + 5 r⁴/66)), Horner in r
    p = r * (5 / 66)
    for c in (-1 / 30, 1 / 42, -1 / 30, 1 / 6):
        p += c
        p *= r
    p += 1.0
    r *= 0.0
    r += t
    r *= 0.5
    p += r
    p *= t
    out += p
    return out


def polya_objective(alpha: np.ndarray, counts: np.ndarray, totals: np.ndarray, cells: Cells) -> np.ndarray:
    """Per row k of α₀ (R × K, with the pairs' counts R × P and the annotators' totals R × W' of the same rows): the
    Dirichlet-multinomial (Pólya) log evidence ``Σ_j log B(α₀_k + C_jk) − log B(α₀_k)``, summed over the observed
    pairs only (a cell without counts contributes log Γ(α) − log Γ(α) = 0, exactly)."""
    a_sum = alpha.sum(axis=1)
    cell = gammaln(alpha[:, cells.label] + counts)
    cell -= gammaln(alpha)[:, cells.label]
    rows = totals.shape[1] * gammaln(a_sum) - gammaln(a_sum[:, None] + totals).sum(axis=1)
    return rows + cell.sum(axis=1)


def polya_derivatives(
    alpha: np.ndarray, counts: np.ndarray, totals: np.ndarray, cells: Cells
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Gradient ``g`` (R × K) of :func:`polya_objective` in α₀ and its Hessian diag(d) + z 11ᵀ per row: d_l =
    Σ_p ψ'(α_l + C_p) − ψ'(α_l) ≤ 0 over the pairs reporting l, z = Σ_j ψ'(A) − ψ'(A + N_j) ≥ 0 (A = Σ α); also
    ψ'(α₀)."""
    n_w = totals.shape[1]
    lab = cells.label
    a_sum = alpha.sum(axis=1)
    x = alpha[:, lab] + counts
    at = a_sum[:, None] + totals
    cell = digamma(x)
    cell -= digamma(alpha)[:, lab]
    grad = np.asarray(cell @ cells.by_label)
    grad += (n_w * digamma(a_sum) - digamma(at).sum(axis=1))[:, None]
    tri = trigamma(alpha)
    cell = trigamma(x)
    cell -= tri[:, lab]
    d = np.asarray(cell @ cells.by_label)
    z = n_w * trigamma(a_sum) - trigamma(at).sum(axis=1)
    return grad, d, z, tri


def halve_steps(
    alpha: np.ndarray,
    step: np.ndarray,
    gain: np.ndarray,
    f0: np.ndarray,
    evaluate: Any,
) -> np.ndarray:
    """Take ``alpha · exp(−step)`` on the rows whose first-order ``gain`` is above rounding, halving a row's step
    until its evidence (``evaluate(trial, rows)``) does not fall; ``f0`` is updated in place.  Returns the new α₀."""
    lo, hi = HYPER_RANGE
    new = alpha.copy()
    rows = np.flatnonzero(gain > HYPER_RTOL * (1.0 + np.abs(f0)))  # the others cannot gain above rounding
    for _ in range(HALVINGS):  # halve the steps of the rows whose evidence would fall (only those are evaluated)
        if not len(rows):
            break
        trial = np.clip(alpha[rows] * np.exp(-step[rows]), lo, hi)
        f1 = evaluate(trial, rows)
        ok = f1 >= f0[rows] - 1e-12 * np.abs(f0[rows])
        new[rows[ok]], f0[rows[ok]] = trial[ok], f1[ok]
        rows = rows[~ok]
        step[rows] *= 0.5
    return new


def polya_ml(
    alpha: np.ndarray, counts: np.ndarray, totals: np.ndarray, cells: Cells, n_iter: int = HYPER_NEWTON
) -> tuple[np.ndarray, np.ndarray]:
    """α₀ raising the Pólya evidence of the expected counts (Minka 2000, "Estimating a Dirichlet distribution",
    §3–4), row by row, by Newton steps in log α₀ from ``alpha`` (multiplicative steps keep α₀ positive).

    In α the Hessian of a row is diag(d) + z 11ᵀ (:func:`polya_derivatives`); in u = log α it is
    diag(α²d + αg) + z ααᵀ.  The αg term is
    kept where negative (so the diagonal stays negative) and the system is solved in O(K) by Sherman–Morrison
    where the matrix is negative definite, otherwise by its diagonal alone.  Entries at a bound of
    :data:`HYPER_RANGE` whose gradient points out stay there; a row's step is halved until its evidence does not
    fall, so each call raises the ELBO (a generalised M-step).  Returns α₀ and each row's evidence under it."""
    lo, hi = HYPER_RANGE
    alpha = np.clip(np.array(alpha, dtype=float), lo, hi)
    f0 = polya_objective(alpha, counts, totals, cells)
    for _ in range(n_iter):
        grad, d, z, tri = polya_derivatives(alpha, counts, totals, cells)
        free = ~(((alpha <= lo) & (grad < 0)) | ((alpha >= hi) & (grad > 0)))
        gu = alpha * grad  # gradient in u = log α
        du = np.minimum(alpha * alpha * d + np.minimum(gu, 0.0), -1e-12 * alpha * alpha * tri)  # d = 0 without counts
        inv = np.where(free, 1.0 / du, 0.0)
        ainv = alpha * inv
        denom = 1.0 + z * (alpha * ainv).sum(axis=1)
        newton = denom > 0
        b = np.where(newton, z * (gu * ainv).sum(axis=1) / np.where(newton, denom, 1.0), 0.0)
        step = gu * inv - b[:, None] * ainv  # H⁻¹ g in u on the free entries, 0 elsewhere; Newton: u − H⁻¹ g
        gain = -(gu * step).sum(axis=1)  # the step's first-order gain in evidence
        alpha = halve_steps(
            alpha, step, gain, f0, lambda trial, rows: polya_objective(trial, counts[rows], totals[rows], cells)
        )
    return alpha, f0


def polya_ml_structured(
    alpha: np.ndarray, counts: np.ndarray, totals: np.ndarray, cells: Cells, n_iter: int = HYPER_NEWTON
) -> tuple[np.ndarray, np.ndarray]:
    """As :func:`polya_ml` with the structured prior of Paun et al. (TACL 2018, "Comparing Bayesian models of
    annotation", the hierarchical Dawid–Skene's row priors): row k of α₀ is a_k on the diagonal and one shared
    b_k off it.  Newton in (log a_k, log b_k) on the same evidence: the chain rule turns the row's gradient g and
    Hessian diag(d) + z 11ᵀ into g_a = g_k, g_b = Σ_{l≠k} g_l, H_aa = d_k + z, H_bb = Σ_{l≠k} d_l + (K−1)² z,
    H_ab = (K−1) z; in log space the 2 × 2 system gets diag(a g_a, b g_b) (kept where negative).  Solved exactly
    where negative definite, else by its diagonal; a value at a bound whose gradient points out stays (the other
    then takes its one-dimensional step), a step that would cross a bound is shortened to stop at it; steps halved until the evidence does not fall.  ``alpha`` must
    be structured (the start, SQUAREM's log-linear extrapolations and the clip keep it so)."""
    lo, hi = HYPER_RANGE
    k = alpha.shape[1]
    eye = np.eye(k, dtype=bool)
    alpha = np.clip(np.array(alpha, dtype=float), lo, hi)
    f0 = polya_objective(alpha, counts, totals, cells)
    rows_k = np.arange(alpha.shape[0])
    for _ in range(n_iter):
        grad, d, z, tri = polya_derivatives(alpha, counts, totals, cells)
        ab = np.stack([alpha[eye], alpha[rows_k, (rows_k + 1) % k]], axis=1)  # R × 2: (a_k, b_k)
        g = np.stack([grad[eye], grad.sum(axis=1) - grad[eye]], axis=1) * ab  # gradient in (log a, log b)
        h_aa = d[eye] + z
        h_bb = d.sum(axis=1) - d[eye] + (k - 1) ** 2 * z
        floor = -1e-12 * ab * ab * np.stack([tri[eye], tri[~eye].reshape(-1, k - 1).sum(axis=1)], axis=1)
        h11 = np.minimum(ab[:, 0] ** 2 * h_aa + np.minimum(g[:, 0], 0.0), floor[:, 0])
        h22 = np.minimum(ab[:, 1] ** 2 * h_bb + np.minimum(g[:, 1], 0.0), floor[:, 1])
        h12 = ab[:, 0] * ab[:, 1] * (k - 1) * z
        det = h11 * h22 - h12 * h12
        newton = det > 0  # h11 < 0 and det > 0: negative definite
        safe = np.where(newton, det, 1.0)
        step = np.where(
            newton[:, None],
            np.stack([(h22 * g[:, 0] - h12 * g[:, 1]) / safe, (h11 * g[:, 1] - h12 * g[:, 0]) / safe], axis=1),
            g / np.stack([h11, h22], axis=1),
        )  # H⁻¹ g in (log a, log b); Newton: u − H⁻¹ g
        fixed = ((ab <= lo * (1 + 1e-9)) & (g < 0)) | ((ab >= hi * (1 - 1e-9)) & (g > 0))  # at a bound, pointing out
        alone = fixed[:, ::-1] & ~fixed  # the other value is fixed: a one-dimensional Newton step
        step = np.where(alone, g / np.stack([h11, h22], axis=1), step)
        step[fixed] = 0.0
        room = np.where(step < 0, np.log(hi / ab), np.log(ab / lo))  # log-distance to the bound each value moves to
        with np.errstate(divide="ignore", invalid="ignore"):
            reach = np.where(np.abs(step) > room, room / np.abs(step), 1.0).min(axis=1)
        step *= np.clip(reach, 0.0, 1.0)[:, None]  # a step stopping at a bound keeps its direction (not clipped)
        gain = -(g * step).sum(axis=1)

        def evaluate(trial: np.ndarray, rows: np.ndarray) -> np.ndarray:
            hyper = np.repeat(trial[:, 1:2], k, axis=1)  # rows ``rows`` of α₀ from their (a, b)
            hyper[np.arange(len(rows)), rows] = trial[:, 0]
            return polya_objective(hyper, counts[rows], totals[rows], cells)

        ab = halve_steps(ab, step, gain, f0, evaluate)
        alpha = np.repeat(ab[:, 1:2], k, axis=1)
        alpha[rows_k, rows_k] = ab[:, 0]
    return alpha, f0


@dataclass
class BayesianDSModel:
    """Variational Bayesian Dawid–Skene for the EM driver (see the module docstring); ``dense=True`` carries every
    (annotator, reported label) pair instead of the observed ones (the same numbers, the tests' reference)."""

    resp: Responses
    hyper0: np.ndarray
    prior_class: float = 1.0
    empirical_bayes: bool = True
    gold: Gold | None = None
    dense: bool = False
    structured: bool = False  # α₀ row k = (a_k on the diagonal, b_k off it): :func:`polya_ml_structured`

    def __post_init__(self) -> None:
        self.cells = Cells.of(self.resp, self.dense)

    def totals(self, counts: np.ndarray) -> np.ndarray:
        """N_jk = Σ_l C_jkl for the annotators owning a pair (K × W')."""
        return np.asarray(counts @ self.cells.by_worker)

    def e_step(self, state: BDSState, temperature: float = 1.0) -> EStep:
        cells = self.cells
        hyper, counts = state.hyper, state.counts
        totals = self.totals(counts)
        evidence = state.evidence
        if evidence is None:
            evidence = float(polya_objective(hyper, counts, totals, cells).sum())
        totals += hyper.sum(axis=1)[:, None]  # K × W' row totals of q(Γ_j)
        elog = digamma(hyper[:, cells.label] + counts)  # K × P: E[log Γ_{j_p, k, l_p}] on the observed pairs
        elog -= digamma(totals)[:, cells.owner]
        joint = np.asarray(elog @ cells.items_t).T  # Σ_r E[log Γ_{j_r, k, l_r}], items × K
        joint += expected_log_dirichlet(state.class_prior)
        post, terms = posterior_terms(joint, self.gold, temperature)
        # Σ_jk KL(Dir(α₀_k + C_jk) ‖ Dir(α₀_k)) = Σ_jkl C_jkl E[log Γ_jkl] − Pólya evidence (no counts: no term)
        kl = float(np.einsum("kp,kp->", counts, elog)) - evidence
        kl += float(kl_dirichlet(state.class_prior, np.full_like(state.class_prior, self.prior_class)))
        return EStep(post, float(terms.sum() - kl), stats=(post, hyper), log_joint=joint)

    def m_step(self, stats: tuple[np.ndarray, np.ndarray]) -> BDSState:
        """q(π) and, jointly, α₀ and q(Γ) given the posteriors: α₀ raises the Pólya evidence of the expected counts
        (the ELBO maximised over q(Γ)), then q(Γ_j) = Dir(α₀ + C_j)."""
        post, hyper = stats
        counts = np.ascontiguousarray(np.asarray(self.cells.items_t @ post).T)  # K × P: Σ_i q_ik #(j_p said l_p on i)
        totals = self.totals(counts)
        if self.empirical_bayes:
            step = polya_ml_structured if self.structured else polya_ml
            hyper, evidence = step(hyper, counts, totals, self.cells)
        else:
            evidence = polya_objective(hyper, counts, totals, self.cells)
        return BDSState(hyper, counts, self.prior_class + post.sum(axis=0), float(evidence.sum()))

    def flat(self, state: BDSState) -> np.ndarray:
        """The state as one vector for SQUAREM: log α₀, the counts, log of q(π)'s parameters."""
        return np.concatenate([np.log(state.hyper).ravel(), state.counts.ravel(), np.log(state.class_prior)])

    def unflat(self, vector: np.ndarray) -> BDSState:
        """A state from :meth:`flat`'s vector, projected onto the domain (α₀ in range, counts ≥ 0)."""
        k, p = self.resp.n_classes, len(self.cells.label)
        hyper = np.clip(np.exp(vector[: k * k]), *HYPER_RANGE).reshape(k, k)
        counts = np.maximum(vector[k * k : k * k + k * p], 0.0).reshape(k, p)
        prior = np.maximum(np.exp(vector[k * k + k * p :]), np.finfo(float).tiny)
        return BDSState(hyper, counts, prior)

    def start(self, posterior: np.ndarray) -> BDSState:
        return self.m_step((clamp_gold(np.array(posterior, dtype=float), self.gold), self.hyper0))

    def permute(self, state: BDSState, source: np.ndarray) -> BDSState:
        """Latent class j of the new state is class ``source[j]`` of ``state`` (reported labels unchanged; a
        structured α₀'s diagonal value then sits in column ``source[j]``: for a final state, not iterated further)."""
        return BDSState(state.hyper[source, :], state.counts[source], state.class_prior[source], state.evidence)

    def confusion(self, state: BDSState) -> np.ndarray:
        """Dense W × K × K Dirichlet parameters of q(Γ) (α₀ everywhere, plus the counts on the observed pairs)."""
        conf = np.repeat(state.hyper[None], self.resp.n_workers, axis=0)
        conf[self.cells.worker, :, self.cells.label] += state.counts.T
        return conf


@register(
    "bds",
    title="Bayesian Dawid–Skene (annotators shrunk towards the crowd)",
    summary="Variational Bayes Dawid–Skene whose Dirichlet priors are shared by all annotators and learnt "
    "from the data, so annotators with few responses borrow strength from the crowd.",
    family="bayesian_ds",
    reference="Kim & Ghahramani, 'Bayesian Classifier Combination', AISTATS 2012 (IBCC, VB); shared "
    "hyper-parameters by empirical Bayes (Minka 2000, Newton), as in Li et al.'s EBCC.",
)
class BayesianDawidSkene(Aggregator):
    """Bayesian Dawid–Skene (IBCC, mean-field VB) with hyper-parameters shared across annotators.

    Every annotator's confusion row k has the prior Dir(α₀_k); α₀ starts at ``prior_off_diagonal`` everywhere
    plus ``prior_diagonal`` on the diagonal and, with ``hyperparameters="empirical-bayes"``, is re-estimated
    from all annotators at each step, so the crowd decides how much a sparse annotator is shrunk.

    ``prior_structure``: the full α₀ has K² free pseudo-counts, learnt from the expected counts of every confusion
    cell; with many classes and few responses (200 classes, 1,500 responses: ~1.5 responses per confusion row,
    0.04 per pseudo-count) the evidence fits α₀ to the observed confusions (off-diagonal cells to the lower bound
    where no one erred, the diagonal to ~10⁴), so q(Γ) reproduces chance coincidences.  The structured prior
    (Paun et al., TACL 2018: row k is a_k on the diagonal and one b_k off it, 2K values) cannot.  ``"auto"`` uses
    the full prior only with at least :data:`PER_HYPER` = 10 responses per pseudo-count (the events-per-parameter
    rule of thumb of Peduzzi et al., J Clin Epidemiol 1996): the full prior's evidence always exceeds the nested
    structured one's, so the two cannot be compared without a penalty, and a rule fixed in advance keeps the
    choice out of the fit.
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
        "prior_structure": Choice(
            "auto",
            ("auto", "full", "structured"),
            help="Shared prior of the confusion rows: 'full' learns all K × K pseudo-counts; 'structured' one "
            "diagonal and one off-diagonal value per true class; 'auto': full when there are at least 10 "
            "responses per pseudo-count (K² of them), else structured.",
        ),
        "prior_class": Float(1.0, low=0.0, high=1000.0, low_open=True, help="Dirichlet pseudo-count on class priors."),
        "tol": Float(1e-6, low=0.0, high=1.0, help="Stop when the relative change of the ELBO is below tol."),
        "max_iter": Int(500, low=1, high=100_000, help="Maximum VB iterations."),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        k = responses.n_classes
        hyper0 = np.full((k, k), float(self.prior_off_diagonal)) + float(self.prior_diagonal) * np.eye(k)
        structured = k > 2 and (  # with 2 classes the structured prior is the full one (a_k, b_k per row)
            self.prior_structure == "structured"
            or (self.prior_structure == "auto" and responses.n_responses < PER_HYPER * k * k)
        )
        model = BayesianDSModel(
            responses,
            hyper0,
            float(self.prior_class),
            self.hyperparameters == "empirical-bayes",
            gold,
            structured=structured,
        )
        settings = EMSettings(tol=float(self.tol), max_iter=int(self.max_iter), name="Bayesian DS VB")
        start = model.start(initial_posterior(responses, "mv"))
        run = run_squarem_lockstep([model], [start], [settings], lambda _, stats: [model.m_step(stats[0])])[0]
        st = run.state
        conf = model.confusion(st)
        conf /= conf.sum(axis=2, keepdims=True)
        prior = st.class_prior / st.class_prior.sum()
        own = np.bincount(model.cells.worker, weights=st.counts.sum(axis=0), minlength=responses.n_workers)
        share = st.hyper.sum() / (st.hyper.sum() + own)
        return run.to_fit(
            confusion=conf,
            class_prior=prior,
            annotator_columns=(
                AnnotatorColumn(
                    "crowd_share",
                    "share borrowed from the crowd",
                    share,
                    "Share of this annotator's confusion estimate that comes from the crowd's shared prior "
                    "(1 = no responses of their own, 0 = only their own responses).",
                ),
            ),
            details={"hyperparameters": st.hyper, "prior_structure": "structured" if structured else "full"},
        )
