"""Ordinal labels (1–5 scores, relevance grades): a latent-truth model whose annotator parameters keep the order.

Ordered-probit rater model (the graded-response form of Johnson & Albert 1999, *Ordinal Data Modeling*, ch. 5,
with a latent true level as in Dawid & Skene 1979).  An item's true level k ∈ {0, …, K−1} has prior π_k and sits
at μ_k on a latent scale; annotator j perceives ``μ_k + b_j + s_j ε`` (ε standard normal) and reports level l
when the perception falls between the cut points τ_l and τ_{l+1} (τ_0 = −∞, τ_K = +∞)::

    P_j(l | k) = Φ((τ_{l+1} − μ_k − b_j) / s_j) − Φ((τ_l − μ_k − b_j) / s_j)

so two numbers describe an annotator: the bias b_j (> 0 lenient, < 0 harsh) and the noise s_j, both in levels.
The confusion matrix P_j is derived from them, so heatmaps, expected accuracy and held-out scoring work as for
Dawid–Skene.  The scale is shared by the crowd, ``μ_0 < τ_1 < μ_1 < … < τ_{K−1} < μ_{K−1}`` with μ_0 = 0 and
μ_{K−1} = K − 1: ``scale="equal"`` spaces the levels one apart with the cut points midway (τ_l = l − ½);
``scale="estimated"`` (default) learns the gaps (softmax of 2K − 2 logits, shrunk towards equal spacing), for
scales whose levels are not equally far apart (e.g. a last grade that annotators rarely confuse with the others).

EM through the shared driver: the E-step is Dawid–Skene's with the derived confusion matrices (log space,
gold clamped); the M-step maximises ``Σ_jkl C_jkl log P_j(l | k)`` from the expected counts ``C`` (workers × true
× reported, so its cost does not grow with the number of responses) by Fisher scoring vectorised over annotators
(:mod:`.fisher`), warm-started at the previous parameters.  A weak Gaussian prior of weight λ (``regularization``) on b_j,
log s_j − log ½ and the gap logits keeps annotators with few responses finite and centres the biases (they are
relative to the crowd: a shift of every bias is otherwise a shift of the cut points).  Responses with a
confidence (:attr:`~fusion_core.data.responses.Responses.weight`) count as fractional votes.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from fusion_core.data.responses import Responses, as_responses
from fusion_core.errors import AggregationWarning
from fusion_core.methods.base import Aggregator, Gold, clamp_gold, initial_posterior
from fusion_core.methods.dawid_skene import e_step_joint, expected_counts
from fusion_core.methods.em import EMRun, EMSettings, EStep, run_em
from fusion_core.methods.ordinal.fisher import CountsLoss, fisher_profiles
from fusion_core.methods.ordinal.levels import check_levels, numeric_order, with_levels
from fusion_core.methods.ordinal.scale import NOISE_CENTER, ordinal_confusion, scale_points
from fusion_core.methods.params import Choice, Float, Int, Object, Param
from fusion_core.methods.registry import register
from fusion_core.methods.results import AnnotatorColumn, Fit, OrdinalScale, Ranking

M_STEP_ROUNDS = 200
"""Fisher-scoring rounds of the M-step at most (:mod:`.fisher`; it stops once a round gains less than 1e-10
relative: a full M-step, as EM assumes)."""

LENIENT_BIAS = 0.3  # |bias| ≥ this many levels: "lenient" / "harsh"
NOISY_NOISE = 0.75  # noise ≥ this many levels (exact level less than half the time even when unbiased): "noisy"
VERDICT_RULE = (
    f"lenient if bias ≥ +{LENIENT_BIAS} levels, harsh if bias ≤ −{LENIENT_BIAS}, noisy if noise ≥ {NOISY_NOISE} "
    "levels (an unbiased annotator then reports the exact level less than half the time), reliable otherwise"
)


class OrdinalState(NamedTuple):
    """Parameters in level order: ``bias`` and ``log_noise`` per annotator, the scale's gap logits ``scale``
    (2K − 2; all zero = equally spaced levels, midpoint cut points) and ``class_prior``."""

    bias: np.ndarray
    log_noise: np.ndarray
    scale: np.ndarray
    class_prior: np.ndarray


def log_prior(state: OrdinalState, regularization: float, estimate_scale: bool) -> float:
    """The MAP objective's prior term ``−λ/2 [Σ_j (b_j² + (log s_j − log ½)²) + Σ gap logits²]``."""
    dev = state.log_noise - NOISE_CENTER
    total = float((state.bias**2).sum() + (dev**2).sum())
    if estimate_scale:
        total += float((state.scale**2).sum())
    return -0.5 * regularization * total


@dataclass
class OrdinalModel:
    """The ordered-probit latent-truth model for the EM driver (``e_step`` / ``m_step``)."""

    resp: Responses
    estimate_scale: bool = True
    regularization: float = 1.0
    gold: Gold | None = None

    def confusion(self, state: OrdinalState) -> np.ndarray:
        return ordinal_confusion(state.bias, np.exp(state.log_noise), state.scale)

    def e_step(self, state: OrdinalState, temperature: float = 1.0) -> EStep:
        post, ll, joint = e_step_joint(self.resp, self.confusion(state), state.class_prior, self.gold, temperature)
        return EStep(
            posterior=post,
            log_likelihood=ll + log_prior(state, self.regularization, self.estimate_scale),
            stats=(post, state),
            log_joint=joint,
        )

    def m_step(self, stats: tuple[np.ndarray, OrdinalState]) -> OrdinalState:
        posterior, previous = stats
        counts = expected_counts(self.resp, posterior)
        bias, log_noise, scale, _ = fisher_profiles(
            CountsLoss(counts),
            previous.bias,
            previous.log_noise,
            previous.scale,
            estimate_scale=self.estimate_scale,
            regularization=self.regularization,
            rounds=M_STEP_ROUNDS,
        )
        prior = posterior.sum(axis=0) + 1e-12
        return OrdinalState(bias, log_noise, scale, prior / prior.sum())

    def start(self, posterior: np.ndarray) -> OrdinalState:
        """Parameters from initial posteriors (gold rows clamped): unbiased, noise ½ level, equally spaced levels,
        then one M-step."""
        w, k = self.resp.n_workers, self.resp.n_classes
        flat = OrdinalState(np.zeros(w), np.full(w, NOISE_CENTER), np.zeros(2 * k - 2), np.full(k, 1.0 / k))
        return self.m_step((clamp_gold(np.array(posterior, dtype=float), self.gold), flat))


# ------------------------------------------------------------------------------------------ estimator
@register(
    "ordinal-em",
    title="Ordinal scale (bias and noise per annotator)",
    summary="Ordered-probit EM for ordered levels: each annotator has a bias (harsh/lenient) and a noise level.",
    family="ordinal",
    reference="Ordered-probit rater model (Johnson & Albert 1999, ch. 5) with a latent true level (Dawid & Skene 1979).",
)
class OrdinalEM(Aggregator):
    """Latent true level with an ordered-probit annotator model (module docstring): per annotator a bias and a
    noise level in levels, a shared ordered scale (level positions and cut points), posteriors over the true level.

    The level order: ``levels=None`` uses the labels' own order (numbers in numeric order; other labels in
    sorted text order, with a warning), ``levels='numeric'`` sorts the labels as numbers (refused when they are
    not), a list declares it (lowest first).  ``classes_``, ``probas_`` columns and ``confusion_`` are then in
    level order.  ``result_.ordinal`` (:class:`~fusion_core.methods.results.OrdinalScale`) holds the
    scale, biases, noise levels and verdicts; the annotator columns are "bias (levels)", "noise (levels)",
    "expected error (levels)" and "verdict".  Gold labels are clamped.

    Examples
    --------
    >>> from fusion_core.simulate.ratings import ordinal_crowd
    >>> sim = ordinal_crowd(n_items=300, n_workers=12, n_lenient=3, n_harsh=3, n_noisy=2, seed=0)
    >>> m = OrdinalEM(levels="numeric").fit(sim.responses)
    >>> bool((m.labels_ == sim.truth.reindex(m.labels_.index)).mean() > 0.9)
    True
    >>> verdict = dict(zip(m.workers_, m.result_.column("verdict").values))
    >>> [verdict[w] for w in ("w0", "w1", "w2", "w4")]
    ['noisy', 'reliable', 'lenient', 'harsh']
    >>> bool(all(verdict[w] == role for w, role in sim.role.items()))
    True
    """

    params: ClassVar[dict[str, Param]] = {
        "levels": Object(
            None,
            help="Order of the levels, lowest first: None (the labels' own order), 'numeric' (sort numbers), "
            "or a list.",
            text="None, 'numeric', or a list of at least two distinct levels, lowest first",
            check=check_levels,
            advanced=False,
        ),
        "scale": Choice(
            "estimated",
            ("estimated", "equal"),
            help="'estimated': the distances between levels and the cut points are learned for the crowd; "
            "'equal': levels one apart, cut points midway.",
        ),
        "regularization": Float(
            1.0,
            low=0.0,
            high=1e4,
            advanced=True,
            help="Weight λ of the weak Gaussian prior on each annotator's bias (mean 0) and log noise (mean log ½) "
            "and on the scale's gap logits (equal spacing).",
        ),
        "tol": Float(1e-7, low=0.0, high=1.0, help="Stop when the relative change of the objective is below tol."),
        "max_iter": Int(500, low=1, high=100_000, help="Maximum EM iterations."),
    }

    def _responses(self, data: Responses | pd.DataFrame) -> Responses:
        """Responses whose labels are levels (see the class docstring for the level order)."""
        return with_levels(as_responses(data), self.levels)

    def _warn_unordered(self, responses: Responses) -> None:
        """Warn when no order was declared and the labels are not numbers (their sorted order is taken)."""
        if self.levels is None and not numeric_order(responses.classes):
            shown = " < ".join(str(c) for c in responses.classes[:6])
            warnings.warn(
                f"the labels are not numbers and no order was declared, so '{self.method_name}' takes their sorted "
                f"order ({shown}); pass levels=[...] (lowest first) to declare it.",
                AggregationWarning,
                stacklevel=4,
            )

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        self._warn_unordered(responses)
        model = OrdinalModel(responses, self.scale == "estimated", float(self.regularization), gold)
        settings = EMSettings(tol=float(self.tol), max_iter=int(self.max_iter), name=f"{self.method_name} EM")
        # many small array operations: BLAS threads only add synchronisation (5 s → 0.2 s on 2 loaded cores)
        with threadpool_limits(limits=1, user_api="blas"):
            run = run_em(model, model.start(initial_posterior(responses, "mv")), settings)
        return ordinal_fit(run, model.confusion(run.state), model.estimate_scale)


def verdicts(bias: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """One plain word per annotator by :data:`VERDICT_RULE` ("lenient and noisy" when both apply)."""
    side = np.where(bias >= LENIENT_BIAS, "lenient", np.where(bias <= -LENIENT_BIAS, "harsh", ""))
    noisy = noise >= NOISY_NOISE
    both = np.char.add(np.char.add(side, np.where((side != "") & noisy, " and ", "")), np.where(noisy, "noisy", ""))
    return np.where(both == "", "reliable", both).astype(object)


def ordinal_fit(run: EMRun[Any], conf: np.ndarray, estimate_scale: bool) -> Fit:
    """The :class:`Fit` of an ordinal EM run (its state has ``bias``, ``log_noise``, ``scale``, ``class_prior``) with
    confusion matrices ``conf``: typed :class:`OrdinalScale` and annotator columns."""
    state = run.state
    noise = np.exp(state.log_noise)
    k = conf.shape[1]
    dist = np.abs(np.arange(k)[:, None] - np.arange(k)[None, :])
    expected_error = np.einsum("k,wkl,kl->w", state.class_prior, conf, dist)
    verdict = verdicts(state.bias, noise)
    columns = (
        AnnotatorColumn(
            "bias", "bias (levels)", state.bias, "Shift of the annotator's scores: > 0 lenient, < 0 harsh."
        ),
        AnnotatorColumn(
            "noise", "noise (levels)", noise, "Spread of the annotator's scores around their shifted level."
        ),
        AnnotatorColumn(
            "expected_error",
            "expected error (levels)",
            expected_error,
            "Mean distance between the reported and the true level.",
        ),
        AnnotatorColumn("verdict", "verdict", verdict, VERDICT_RULE),
    )
    points = scale_points(state.scale)
    summary = OrdinalScale(
        positions=points[0::2],
        thresholds=points[1::2],
        bias=state.bias,
        noise=noise,
        verdict=verdict,
        rule=VERDICT_RULE,
        estimated=estimate_scale,
    )
    return run.to_fit(
        confusion=conf,
        class_prior=state.class_prior,
        annotator_columns=columns,
        ranking=Ranking.from_score(-expected_error, "expected error in levels (lower is better)"),
        ordinal=summary,
    )
