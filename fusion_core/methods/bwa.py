"""BWA: Bayesian weighted average (Li, Rubinstein & Cohn, "Truth inference at scale: a Bayesian model for
adjudicating highly redundant crowd annotations", WWW 2019; updates, defaults and the prior correction from the
authors' code ``yuan-li/truth-inference-at-scale``, ``code/bwa.py``).

One binary problem per class k (one-vs-rest): the indicator ``y_r = [l_r = k]`` of response r on item i by
annotator j is the item's score ``z_ik`` plus noise of annotator precision ``v_jk``::

    y_r ~ N(z_ik, 1/v_jk),   z_ik ~ N(μ_k, 1/λ),   v_jk ~ Gamma(a_v/2 + 1, b_vk/2).

The authors' iteration (μ, then v, then z; start: z = the vote share) is coordinate ascent on the joint
log-density (our derivation; each step is its block's exact maximiser)::

    F = Σ_jk [(n_j + a_v)/2 · log v_jk − v_jk (b_vk + S_jk)/2] − λ/2 Σ_ik (z_ik − μ_k)²,
    S_jk = Σ_{r of j} (z_{i_r k} − y_rk)²,
    μ_k = mean_i z_ik,   v_jk = (n_j + a_v) / (b_vk + S_jk),   z_ik = (λ μ_k + Σ_r v_jk y_rk) / (λ + Σ_r v_jk),

so ``F`` never decreases and is the objective the shared EM driver traces.  ``z_ik`` is a precision-weighted
average of the votes for k shrunk towards the class's mean share: a one-coin-style worker weight per class, with
Gamma shrinkage for annotators with few responses.  Prior correction (authors' default): ``b_vk = a_v · 4(1 − 1/K)
· Σ_i n_i z⁰_ik (1 − z⁰_ik) / Σ_i n_i`` from the vote shares z⁰ (n_i responses on item i).  Labels are
``argmax_k z_ik``; ``probas_`` is ``z`` normalised over the classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
import scipy.sparse as sp

from fusion_core.data.responses import Responses, canonical_order
from fusion_core.methods.base import Aggregator, Gold, clamp_gold, initial_posterior
from fusion_core.methods.dawid_skene.core import expected_counts, normalize_confusion
from fusion_core.methods.em import EMSettings, EStep, run_em
from fusion_core.methods.numerics import safe_log
from fusion_core.methods.params import Bool, Float, Int, Param
from fusion_core.methods.registry import register
from fusion_core.methods.results import AnnotatorColumn, Fit

PRECISION_SCALE_FLOOR = 1e-9  # b_vk floor (relative to a_v): a class every item agrees on keeps a finite precision


class BWAState(NamedTuple):
    """Parameters: annotator precisions ``precision`` (workers × classes) and class mean scores ``mean`` (K)."""

    precision: np.ndarray
    mean: np.ndarray


@dataclass
class BWAModel:
    """BWA's coordinate ascent for the EM driver (see the module docstring); all classes at once."""

    resp: Responses
    a_v: float
    lam: float
    b_v: np.ndarray  # K
    gold: Gold | None = None

    def __post_init__(self) -> None:
        r = self.resp  # in canonical order: sorted by item, so the item × worker matrix is built without a sort
        k = r.n_classes
        self.w = None if r.weight is None else np.asarray(r.weight, dtype=float)
        ones = np.ones(r.n_responses) if self.w is None else self.w
        indptr = np.zeros(r.n_items + 1, dtype=np.int64)
        np.cumsum(np.bincount(r.item, minlength=r.n_items), out=indptr[1:])
        self.item_worker = sp.csr_matrix((ones, r.worker, indptr), shape=(r.n_items, r.n_workers))
        self.worker_item = self.item_worker.T  # CSC view: products with it need no conversion
        self.n_worker = np.bincount(r.worker, weights=self.w, minlength=r.n_workers)
        self.item_label = r.item.astype(np.int64) * k + r.label
        self.worker_label = r.worker.astype(np.int64) * k + r.label
        # Σ_r y_rk per (worker, class): the y² and y terms of S_jk
        self.n_worker_label = np.bincount(self.worker_label, weights=self.w, minlength=r.n_workers * k).reshape(-1, k)

    def weighted(self, values: np.ndarray) -> np.ndarray:
        """Per-response values times the response weights (when there are any)."""
        return values if self.w is None else values * self.w

    def residuals(self, z: np.ndarray) -> np.ndarray:
        """``S_jk = Σ_r (z_{i_r k} − y_rk)²`` = Σ_r z² − 2 Σ_{r: l_r = k} z + #(j said k) (workers × K)."""
        r, k = self.resp, self.resp.n_classes
        zz = np.asarray(self.worker_item @ (z * z))
        said = self.weighted(z.ravel().take(self.item_label))
        agree = np.bincount(self.worker_label, weights=said, minlength=r.n_workers * k).reshape(-1, k)
        zz -= 2.0 * agree
        zz += self.n_worker_label
        return np.maximum(zz, 0.0, out=zz)

    def m_step(self, stats: np.ndarray | tuple[np.ndarray, np.ndarray]) -> BWAState:
        """``μ`` and ``v`` from the scores ``z`` (or ``(z, S)`` when the E-step already has the residuals)."""
        z, s = stats if isinstance(stats, tuple) else (stats, self.residuals(stats))
        v = (self.n_worker[:, None] + self.a_v) / (self.b_v[None, :] + s)
        return BWAState(v, z.mean(axis=0))

    def scores(self, state: BWAState) -> np.ndarray:
        """``z_ik = (λ μ_k + Σ_r v_jk y_rk) / (λ + Σ_r v_jk)`` (items × K), gold rows clamped."""
        r, k = self.resp, self.resp.n_classes
        v, mu = state
        vote = self.weighted(v.ravel().take(self.worker_label))
        z = np.asarray(np.bincount(self.item_label, weights=vote, minlength=r.n_items * k), dtype=float).reshape(-1, k)
        z += self.lam * mu[None, :]
        z /= np.asarray(self.item_worker @ v) + self.lam
        return clamp_gold(z, self.gold)

    def objective(self, z: np.ndarray, s: np.ndarray, state: BWAState) -> float:
        """``F`` at scores ``z`` with residuals ``s`` (module docstring)."""
        v, mu = state
        lik = ((self.n_worker[:, None] + self.a_v) * safe_log(v) - v * (self.b_v[None, :] + s)).sum() / 2.0
        return float(lik - self.lam / 2.0 * ((z - mu[None, :]) ** 2).sum())

    def e_step(self, state: BWAState, temperature: float = 1.0) -> EStep:
        z = self.scores(state)
        s = self.residuals(z)
        return EStep(normalised(z), self.objective(z, s, state), stats=(z, s))


def normalised(z: np.ndarray) -> np.ndarray:
    """Scores as probabilities over the classes.  Every score is a weighted average of 0/1 votes and a class mean
    in [0, 1], so it is ≥ 0 and each item's scores have a positive sum (its own votes count)."""
    tot = z[:, 0].copy()
    for j in range(1, z.shape[1]):  # K column additions: numpy reduces a short last axis ~10× slower
        tot += z[:, j]
    return z / np.maximum(tot, 1e-300)[:, None]


def prior_scale(resp: Responses, z0: np.ndarray, a_v: float, correction: bool) -> np.ndarray:
    """``b_vk = a_v · c · Σ_i n_i z⁰_ik (1 − z⁰_ik) / Σ_i n_i`` with ``c = 4(1 − 1/K)`` (prior correction) or 1."""
    n_i = resp.responses_per_item.astype(float) if resp.weight is None else resp.vote_counts().sum(axis=1)
    coef = 4.0 * (1.0 - 1.0 / resp.n_classes) if correction else 1.0
    b = a_v * coef * (n_i @ (z0 * (1.0 - z0))) / max(float(n_i.sum()), 1e-300)
    return np.maximum(b, PRECISION_SCALE_FLOOR * a_v)


@register(
    "bwa",
    title="BWA (Bayesian weighted average)",
    summary="Bayesian weighted average: each annotator's votes weigh by a precision learnt per class, shrunk by a "
    "shared prior; fast on large, highly redundant crowds.",
    family="bayesian",
    reference="Li, Rubinstein & Cohn, 'Truth inference at scale: a Bayesian model for adjudicating highly redundant "
    "crowd annotations', WWW 2019 (updates and defaults of the authors' code, yuan-li/truth-inference-at-scale).",
)
class BWA(Aggregator):
    """Bayesian weighted average (Li, Rubinstein & Cohn, WWW 2019).

    Per class k, every item's score ``z_ik`` is the average of the indicator votes ``[l = k]`` weighted by the
    annotators' precisions ``v_jk`` and shrunk towards the class's mean score; precisions are updated from each
    annotator's squared residuals with a Gamma prior (``a_v`` pseudo-responses, scale from the votes' spread).
    Coordinate ascent through the shared EM driver (objective: the joint log-density, module docstring).
    ``result_.annotator_columns``: ``precision[<label>]`` per class; ``confusion_`` is the Dawid–Skene confusion
    the posterior implies (expected counts, rows = true), ``skills_`` the expected accuracy under it.  Gold
    labels are clamped.

    Examples
    --------
    >>> from fusion_core.simulate import dawid_skene
    >>> sim = dawid_skene(n_items=300, n_workers=10, n_classes=2, seed=1)
    >>> m = BWA().fit(sim.responses)
    >>> bool((m.labels_ == sim.truth.reindex(m.labels_.index)).mean() > 0.9)
    True
    """

    params: ClassVar[dict[str, Param]] = {
        "a_v": Float(
            15.0, low=0.0, high=1e6, low_open=True, help="Gamma prior pseudo-responses on each annotator's precision."
        ),
        "lam": Float(1.0, low=0.0, high=1e6, help="Prior precision of an item's score around its class's mean (λ)."),
        "prior_correction": Bool(True, help="Scale the precision prior by 4(1 − 1/K) (authors' default)."),
        "tol": Float(1e-6, low=0.0, high=1.0, help="Stop when the relative change of the objective is below tol."),
        "max_iter": Int(500, low=1, high=100_000, help="Maximum iterations."),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        resp = canonical_order(responses)  # sums never depend on the input's row order
        a_v = float(self.a_v)
        z0 = clamp_gold(initial_posterior(resp, "mv"), gold)
        model = BWAModel(resp, a_v, float(self.lam), prior_scale(resp, z0, a_v, bool(self.prior_correction)), gold)
        run = run_em(model, model.m_step(z0), EMSettings(tol=float(self.tol), max_iter=int(self.max_iter), name="BWA"))
        post = clamp_gold(run.posterior.copy(), gold)
        prior = post.mean(axis=0)
        conf = normalize_confusion(expected_counts(resp, post), 0.0)
        columns = tuple(
            AnnotatorColumn(
                f"precision[{label}]",
                f"vote weight for '{label}'",
                run.state.precision[:, code],
                f"Precision of this annotator's votes for '{label}' (how closely they follow the items' scores; "
                "higher = more weight).",
            )
            for code, label in enumerate(resp.classes)
        )
        return Fit(
            posterior=post,
            confusion=conf,
            class_prior=prior,
            log_likelihood=run.log_likelihood,
            n_iter=run.n_iter,
            converged=run.converged,
            annotator_columns=columns,
            details={"scores": run.estep.stats[0]},
        )
