"""``ordinal-ds``: Dawid–Skene confusion rows shrunk towards each annotator's ordered-probit backbone.

Real graders are not one latent scale plus noise (issue 21 item 5): each has their own cut points, some confuse
two grades more than their neighbours, and a grade may not sit on the scale at all (a "cannot judge" level).  A
full confusion matrix per annotator (Dawid & Skene 1979) can say all of that but needs many responses per row; the
ordered-probit model of :mod:`.em` needs two numbers per annotator but cannot.  ``ordinal-ds`` keeps the full rows
and gives each row a Dirichlet-type prior centred on the annotator's ordered-probit confusion ``B_j`` (bias b_j,
noise s_j on the crowd's estimated scale, :func:`~.scale.ordinal_confusion`), with ``α`` (``strength``)
pseudo-responses per row: the MAP objective (responses ``x``, latent levels integrated out)

    J(Γ, θ, π) = log p(x | Γ, π) − α Σ_jk KL(B_θ,jk ‖ Γ_jk) − λ/2 ‖θ‖²_prior

(λ and the prior of θ as ``ordinal-em``).  A sparse annotator's rows are their backbone's — lenient or harsh,
sharp or noisy, from a handful of responses — and a heavy annotator's rows are their own counts, ordinal or not.

EM through the shared driver: the E-step is Dawid–Skene's with Γ (log space, gold clamped); the M-step is one
coordinate ascent of J from the expected counts ``C`` (workers × true × reported): θ ← argmin Σ_jk KL(B_θ,jk ‖ Γ_jk)
+ prior (one round of Fisher scoring, :mod:`.fisher`, warm-started), then the closed form
``Γ_jk = (C_jk + α B_jk) / (n_jk + α)`` and ``π ∝ Σ_i q_i``.  Both steps increase J, so the trace never falls.
As α → 0 this is Dawid–Skene; as α → ∞ an ordered-probit model fitted through its rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
from threadpoolctl import threadpool_limits

from fusion_core.data.responses import Responses
from fusion_core.methods.base import Gold, clamp_gold, initial_posterior
from fusion_core.methods.dawid_skene import e_step_joint, expected_counts
from fusion_core.methods.em import EMSettings, EStep, run_em
from fusion_core.methods.numerics import PROB_FLOOR, safe_log
from fusion_core.methods.ordinal.em import OrdinalEM, OrdinalModel, OrdinalState, ordinal_fit
from fusion_core.methods.ordinal.fisher import KLLoss, fisher_profiles
from fusion_core.methods.ordinal.scale import (
    NOISE_CENTER,
    cut_z,
    interval_prob,
    ordinal_confusion,
    probit_gradient,
    scale_points,
)
from fusion_core.methods.params import Float, Param
from fusion_core.methods.registry import register
from fusion_core.methods.results import Fit

BACKBONE_ROUNDS = 1
"""Fisher-scoring rounds per M-step for the backbone (:mod:`.fisher`; warm-started: a partial step still increases
J — generalised EM — and the backbone converges over the EM iterations)."""


class OrdinalDSState(NamedTuple):
    """Parameters in level order: the confusion matrices Γ (workers × true × reported), the backbone's ``bias``,
    ``log_noise`` and gap logits ``scale`` (as :class:`~.em.OrdinalState`) and ``class_prior``."""

    confusion: np.ndarray
    bias: np.ndarray
    log_noise: np.ndarray
    scale: np.ndarray
    class_prior: np.ndarray
    backbone: np.ndarray | None = None  # the ordered-probit confusion of (bias, log_noise, scale), when computed


def kl_rows(backbone: np.ndarray, confusion: np.ndarray) -> float:
    """``Σ_jk KL(B_jk ‖ Γ_jk)`` (0 log 0 = 0; both clipped below at the probability floor inside the logs)."""
    return float((backbone * (safe_log(backbone) - safe_log(confusion))).sum())


def backbone_objective(
    x: np.ndarray, log_confusion: np.ndarray, *, strength: float, scale: np.ndarray | None, regularization: float
) -> tuple[float, np.ndarray]:
    """``α Σ_jk KL(B_θ,jk ‖ Γ_jk) + λ/2 ‖θ‖²_prior`` and its gradient in ``x = [b, log s, (gap logits)]``, given
    ``log Γ`` (clipped; ``scale``: the fixed gap logits, or None when they are in ``x``)."""
    w = log_confusion.shape[0]
    b, log_s = x[:w], x[w : 2 * w]
    eta = x[2 * w :] if scale is None else scale
    s = np.exp(log_s)
    z = cut_z(b, s, scale_points(eta))
    p = np.maximum(interval_prob(z), 0.0)
    gap = np.log(np.maximum(p, PROB_FLOOR)) - log_confusion  # ∂KL/∂B up to a constant (Σ_l ∂B_l = 0)
    dev = log_s - NOISE_CENTER
    f = strength * float((p * gap).sum()) + 0.5 * regularization * float((b**2).sum() + (dev**2).sum())
    g_b, g_s, g_eta = probit_gradient(strength * gap, z, s, None if scale is not None else eta)
    g_b = g_b + regularization * b
    g_s = g_s + regularization * dev
    if g_eta is None:
        return f, np.concatenate([g_b, g_s])
    f += 0.5 * regularization * float((eta**2).sum())
    return f, np.concatenate([g_b, g_s, g_eta + regularization * eta])


def shrunk_confusion(counts: np.ndarray, backbone: np.ndarray, strength: float) -> np.ndarray:
    """The Γ-step: ``Γ_jk = (C_jk + α B_jk) / (n_jk + α)``."""
    return (counts + strength * backbone) / (counts.sum(axis=2, keepdims=True) + strength)


@dataclass
class OrdinalDSModel:
    """Dawid–Skene rows with an ordered-probit backbone for the EM driver (module docstring)."""

    resp: Responses
    strength: float = 5.0
    estimate_scale: bool = True
    regularization: float = 1.0
    gold: Gold | None = None

    def backbone(self, state: OrdinalDSState) -> np.ndarray:
        if state.backbone is not None:
            return state.backbone
        return ordinal_confusion(state.bias, np.exp(state.log_noise), state.scale)

    def objective_terms(self, state: OrdinalDSState) -> float:
        """``−α Σ KL(B ‖ Γ) − λ/2 ‖θ‖²_prior``: J minus the observed-data log-likelihood."""
        dev = state.log_noise - NOISE_CENTER
        reg = float((state.bias**2).sum() + (dev**2).sum())
        if self.estimate_scale:
            reg += float((state.scale**2).sum())
        return -self.strength * kl_rows(self.backbone(state), state.confusion) - 0.5 * self.regularization * reg

    def e_step(self, state: OrdinalDSState, temperature: float = 1.0) -> EStep:
        post, ll, joint = e_step_joint(self.resp, state.confusion, state.class_prior, self.gold, temperature)
        return EStep(
            posterior=post, log_likelihood=ll + self.objective_terms(state), stats=(post, state), log_joint=joint
        )

    def m_step(self, stats: tuple[np.ndarray, OrdinalDSState]) -> OrdinalDSState:
        posterior, previous = stats
        counts = expected_counts(self.resp, posterior)
        bias, log_noise, scale, backbone = fisher_profiles(
            KLLoss(safe_log(previous.confusion), self.strength),
            previous.bias,
            previous.log_noise,
            previous.scale,
            estimate_scale=self.estimate_scale,
            regularization=self.regularization,
            rounds=BACKBONE_ROUNDS,
        )
        prior = posterior.sum(axis=0) + 1e-12
        conf = shrunk_confusion(counts, backbone, self.strength)
        return OrdinalDSState(conf, bias, log_noise, scale, prior / prior.sum(), backbone)

    def start(self, posterior: np.ndarray) -> OrdinalDSState:
        """From initial posteriors (gold rows clamped): ``ordinal-em``'s start (its M-step fits the backbone to the
        expected counts), then the Γ-step."""
        q = clamp_gold(np.array(posterior, dtype=float), self.gold)
        probit: OrdinalState = OrdinalModel(self.resp, self.estimate_scale, self.regularization, self.gold).start(q)
        backbone = ordinal_confusion(probit.bias, np.exp(probit.log_noise), probit.scale)
        conf = shrunk_confusion(expected_counts(self.resp, q), backbone, self.strength)
        return OrdinalDSState(conf, probit.bias, probit.log_noise, probit.scale, probit.class_prior, backbone)


@register(
    "ordinal-ds",
    title="Ordinal Dawid–Skene (confusion rows shrunk to each annotator's ordinal scale)",
    summary="Dawid–Skene for ordered levels: full confusion rows, shrunk towards each annotator's ordered-probit "
    "bias and noise, so sparse graders stay stable and heavy graders keep their own habits.",
    family="ordinal",
    reference="Dawid & Skene 1979 with a Dirichlet-type prior centred on the ordered-probit rater model (Johnson & "
    "Albert 1999, ch. 5); MAP-EM, docs/RATINGS.md.",
)
class OrdinalDawidSkene(OrdinalEM):
    """Latent true level; each annotator has a full confusion matrix whose rows are shrunk, by ``strength``
    pseudo-responses, towards the annotator's ordered-probit confusion (bias and noise on the crowd's scale, as
    ``ordinal-em``; module docstring).  Levels, ``result_.ordinal`` and the annotator columns ("bias (levels)",
    "noise (levels)" of the backbone, "expected error (levels)" of the confusion, "verdict") are as ``ordinal-em``'s;
    ``confusion_`` is Γ.  Class priors are estimated; gold labels are clamped.

    Examples
    --------
    >>> from fusion_core.simulate.ratings import ordinal_crowd
    >>> sim = ordinal_crowd(n_items=300, n_workers=12, n_lenient=3, n_harsh=3, n_noisy=2, seed=0)
    >>> m = OrdinalDawidSkene(levels="numeric").fit(sim.responses)
    >>> bool((m.labels_ == sim.truth.reindex(m.labels_.index)).mean() > 0.9)
    True
    >>> m.confusion_.shape
    (12, 5, 5)
    """

    params: ClassVar[dict[str, Param]] = {
        **OrdinalEM.params,
        "strength": Float(
            5.0,
            low=0.01,
            high=1e4,
            help="Pseudo-responses per true level with which each annotator's confusion row is pulled towards their "
            "ordered-probit backbone (small: Dawid–Skene; large: a pure ordinal model).",
        ),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        self._warn_unordered(responses)
        model = OrdinalDSModel(
            responses, float(self.strength), self.scale == "estimated", float(self.regularization), gold
        )
        settings = EMSettings(tol=float(self.tol), max_iter=int(self.max_iter), name=f"{self.method_name} EM")
        with threadpool_limits(limits=1, user_api="blas"):  # many small array operations, as ordinal-em
            run = run_em(model, model.start(initial_posterior(responses, "mv")), settings)
        return ordinal_fit(run, run.state.confusion, model.estimate_scale)
