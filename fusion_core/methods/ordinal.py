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
× reported, so its cost does not grow with the number of responses) by L-BFGS-B with the analytic gradient,
warm-started at the previous parameters.  A weak Gaussian prior of weight λ (``regularization``) on b_j,
log s_j − log ½ and the gap logits keeps annotators with few responses finite and centres the biases (they are
relative to the crowd: a shift of every bias is otherwise a shift of the cut points).  Responses with a
confidence (:attr:`~fusion_core.data.responses.Responses.weight`) count as fractional votes.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from functools import partial
from numbers import Number
from typing import Any, ClassVar, NamedTuple

import numpy as np
import pandas as pd
from scipy.special import ndtr
from threadpoolctl import threadpool_limits

from fusion_core.data.responses import Responses, as_responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import Aggregator, Gold, clamp_gold, initial_posterior
from fusion_core.methods.dawid_skene import e_step_joint, expected_counts
from fusion_core.methods.em import EMRun, EMSettings, EStep, run_em
from fusion_core.methods.numerics import PROB_FLOOR
from fusion_core.methods.params import Choice, Float, Int, Object, Param
from fusion_core.methods.registry import register
from fusion_core.methods.results import AnnotatorColumn, Fit, OrdinalScale, Ranking

LENIENT_BIAS = 0.3  # |bias| ≥ this many levels: "lenient" / "harsh"
NOISY_NOISE = 0.75  # noise ≥ this many levels (exact level less than half the time even when unbiased): "noisy"
VERDICT_RULE = (
    f"lenient if bias ≥ +{LENIENT_BIAS} levels, harsh if bias ≤ −{LENIENT_BIAS}, noisy if noise ≥ {NOISY_NOISE} "
    "levels (an unbiased annotator then reports the exact level less than half the time), reliable otherwise"
)
NOISE_CENTER = np.log(0.5)  # prior mean of log s_j
_Z_CLIP = 50.0  # |z| beyond this: Φ is 0 or 1 and φ is 0 in double precision


class OrdinalState(NamedTuple):
    """Parameters in level order: ``bias`` and ``log_noise`` per annotator, the scale's gap logits ``scale``
    (2K − 2; all zero = equally spaced levels, midpoint cut points) and ``class_prior``."""

    bias: np.ndarray
    log_noise: np.ndarray
    scale: np.ndarray
    class_prior: np.ndarray


def scale_points(scale: np.ndarray) -> np.ndarray:
    """The 2K − 1 ordered points ``μ_0 < τ_1 < μ_1 < … < τ_{K−1} < μ_{K−1}`` from the gap logits: gaps
    ``(K − 1)·softmax(scale)``, so μ_0 = 0 and μ_{K−1} = K − 1 (the scale's unit is one level on average)."""
    k = len(scale) // 2 + 1
    e = np.exp(scale - scale.max())
    return np.concatenate([[0.0], np.cumsum((k - 1) * e / e.sum())])


def _z(bias: np.ndarray, noise: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``z[j, k, m] = (τ_m − μ_k − b_j)/s_j`` for the K + 1 cut points m (±∞ at the ends), clipped; W × K × (K+1)."""
    cuts = np.concatenate([[-np.inf], points[1::2], [np.inf]])
    z = (cuts[None, None, :] - points[0::2][None, :, None] - bias[:, None, None]) / noise[:, None, None]
    return np.clip(z, -_Z_CLIP, _Z_CLIP)


def _interval_prob(z: np.ndarray) -> np.ndarray:
    """``Φ(z_{l+1}) − Φ(z_l)`` along the last axis, from the upper tail where both are positive (no cancellation)."""
    lo, hi = z[..., :-1], z[..., 1:]
    return np.where(lo > 0, ndtr(-lo) - ndtr(-hi), ndtr(hi) - ndtr(lo))


def ordinal_confusion(bias: np.ndarray, noise: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Confusion matrices ``P_j(l | k)`` (workers × true × reported, rows sum to 1) from the ordered-probit
    parameters (module docstring)."""
    return np.maximum(_interval_prob(_z(bias, noise, scale_points(scale))), 0.0)


def m_step_objective(
    x: np.ndarray, counts: np.ndarray, *, scale: np.ndarray | None, regularization: float
) -> tuple[float, np.ndarray]:
    """Negative expected complete-data log-posterior and its gradient in ``x = [b, log s, (gap logits)]``.

    ``counts`` are the expected counts ``C[j, k, l]``; ``scale`` the fixed gap logits, or None when they are in
    ``x``."""
    w = counts.shape[0]
    k = counts.shape[1]
    b, log_s = x[:w], x[w : 2 * w]
    eta = x[2 * w :] if scale is None else scale
    s = np.exp(log_s)
    z = _z(b, s, scale_points(eta))
    p = _interval_prob(z)
    inside = p > PROB_FLOOR
    log_p = np.log(np.where(inside, p, PROB_FLOOR))
    a = np.where(inside, counts / np.where(inside, p, 1.0), 0.0)  # ∂(Σ C log P)/∂P
    phi = np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi)
    zphi = z * phi
    dev = log_s - NOISE_CENTER
    f = -float((counts * log_p).sum()) + 0.5 * regularization * float((b**2).sum() + (dev**2).sum())
    shift = a * (phi[..., :-1] - phi[..., 1:]) / s[:, None, None]  # ∂P/∂(μ_k + b_j) · ∂/∂P, per j, k, l
    g_b = -shift.sum(axis=(1, 2)) + regularization * b
    g_s = -np.einsum("jkl,jkl->j", a, zphi[..., :-1] - zphi[..., 1:]) + regularization * dev
    if scale is not None:
        return f, np.concatenate([g_b, g_s])
    f += 0.5 * regularization * float((eta**2).sum())
    g_points = np.empty(2 * k - 1)
    g_points[0::2] = -shift.sum(axis=(0, 2))  # level positions μ_k
    inner = phi[..., 1:-1] / s[:, None, None]  # ∂P_l/∂τ_m = φ_m/s · ([m = l + 1] − [m = l])
    g_points[1::2] = -np.einsum("jkm,jkm->m", inner, a[..., :-1] - a[..., 1:])
    g_gap = np.cumsum(g_points[::-1])[::-1][1:]  # point n is the sum of the gaps before it
    e = np.exp(eta - eta.max())
    sm = e / e.sum()
    g_eta = (k - 1) * sm * (g_gap - float(sm @ g_gap)) + regularization * eta
    return f, np.concatenate([g_b, g_s, g_eta])


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
        w, k = self.resp.n_workers, self.resp.n_classes
        x0 = [previous.bias, previous.log_noise]
        bounds = [(-float(k), float(k))] * w + [(np.log(0.02), np.log(2.0 * k))] * w
        if self.estimate_scale:
            x0.append(previous.scale)
            bounds += [(-5.0, 5.0)] * (2 * k - 2)
        from scipy.optimize import minimize  # lazy: scipy.optimize costs 0.2 s of start-up

        res = minimize(
            partial(
                m_step_objective,
                counts=counts,
                scale=None if self.estimate_scale else previous.scale,
                regularization=self.regularization,
            ),
            np.clip(np.concatenate(x0), [lo for lo, _ in bounds], [hi for _, hi in bounds]),
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": 200},
        )
        x = res.x
        scale = x[2 * w :] if self.estimate_scale else previous.scale
        prior = posterior.sum(axis=0) + 1e-12
        return OrdinalState(x[:w], x[w : 2 * w], np.asarray(scale, dtype=float), prior / prior.sum())

    def start(self, posterior: np.ndarray) -> OrdinalState:
        """Parameters from initial posteriors (gold rows clamped): unbiased, noise ½ level, equally spaced levels,
        then one M-step."""
        w, k = self.resp.n_workers, self.resp.n_classes
        flat = OrdinalState(np.zeros(w), np.full(w, NOISE_CENTER), np.zeros(2 * k - 2), np.full(k, 1.0 / k))
        return self.m_step((clamp_gold(np.array(posterior, dtype=float), self.gold), flat))


# ------------------------------------------------------------------------------------------ level order
def _check_levels(value: Any) -> Any:
    if value is None or (isinstance(value, str) and value == "numeric"):
        return value
    if isinstance(value, (list, tuple, pd.Index, np.ndarray)) and not isinstance(value, str):
        vals = list(value)
        if len(vals) >= 2 and len(set(map(str, vals))) == len(vals):
            return value
    raise ValueError("None (the labels' own order), 'numeric', or a list of at least two distinct levels, lowest first")


def is_numeric_label(v: Any) -> bool:
    """A finite number (not a boolean) or text that reads as one ("3", "4.5")."""
    if isinstance(v, (bool, np.bool_)):
        return False
    try:
        return bool(np.isfinite(float(str(v))))
    except ValueError:
        return False


def with_levels(resp: Responses, levels: Any) -> Responses:
    """The responses recoded so that the classes are the levels, lowest first.

    ``levels=None`` keeps the classes' order (numeric order for numbers); ``"numeric"`` sorts labels as numbers
    and refuses other labels; a list gives the order explicitly (levels nobody used are kept as classes)."""
    if levels is None:
        return resp
    classes = resp.classes
    if isinstance(levels, str):  # "numeric"
        bad = [str(c) for c in classes if not is_numeric_label(c)]
        if bad:
            raise UserInputError(
                f"levels='numeric' needs labels that are numbers, but {bad[:5]} are not; pass the order "
                "explicitly, e.g. levels=['low', 'medium', 'high'] (lowest first)."
            )
        new = classes.take(np.argsort([float(str(c)) for c in classes], kind="stable"))
    else:
        declared = pd.Index(list(levels))
        if declared.astype(str).has_duplicates or len(declared) < 2:
            raise UserInputError(
                f"levels must be at least two distinct values, lowest first; got {[str(v) for v in declared]}."
            )
        pos = declared.get_indexer(classes)
        if (pos < 0).any():  # "3" vs 3: match on text
            pos = np.where(pos < 0, pd.Index(declared.astype(str)).get_indexer(classes.astype(str)), pos)
        if (pos < 0).any():
            missing = [str(c) for c in classes[pos < 0]][:5]
            raise UserInputError(
                f"labels {missing} occur in the responses but not in levels {[str(v) for v in declared]}; add them "
                "to levels in their place (lowest first)."
            )
        values = list(declared)
        for code, p in enumerate(pos):  # K classes: keep the responses' own label values
            values[p] = classes[code]
        new = pd.Index(values)
    code = new.get_indexer(classes)
    return replace(resp, label=code[resp.label], classes=new)


def _numeric_order(classes: pd.Index) -> bool:
    return all(isinstance(c, (Number, np.number)) and not isinstance(c, (bool, np.bool_)) for c in classes)


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
    >>> bool(all(verdict[w] == role for w, role in sim.extras["role"].items()))
    True
    """

    params: ClassVar[dict[str, Param]] = {
        "levels": Object(
            None,
            help="Order of the levels, lowest first: None (the labels' own order), 'numeric' (sort numbers), "
            "or a list.",
            text="None, 'numeric', or a list of at least two distinct levels, lowest first",
            check=_check_levels,
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

    def fit(
        self,
        data: Responses | pd.DataFrame,
        *,
        graph: Any = None,
        context: pd.Series | None = None,
        true_labels: pd.Series | None = None,
    ) -> OrdinalEM:
        """Fit on responses whose labels are levels (see the class docstring for the level order)."""
        self.validated_params()
        resp = with_levels(as_responses(data), self.levels)
        return super().fit(resp, graph=graph, context=context, true_labels=true_labels)

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        if self.levels is None and not _numeric_order(responses.classes):
            shown = " < ".join(str(c) for c in responses.classes[:6])
            warnings.warn(
                f"the labels are not numbers and no order was declared, so 'ordinal-em' takes their sorted order "
                f"({shown}); pass levels=[...] (lowest first) to declare it.",
                AggregationWarning,
                stacklevel=3,
            )
        model = OrdinalModel(responses, self.scale == "estimated", float(self.regularization), gold)
        settings = EMSettings(tol=float(self.tol), max_iter=int(self.max_iter), name=f"{self.method_name} EM")
        # L-BFGS-B makes many tiny BLAS calls: threads only add synchronisation (5 s → 0.2 s on 2 loaded cores)
        with threadpool_limits(limits=1, user_api="blas"):
            run = run_em(model, model.start(initial_posterior(responses, "mv")), settings)
        return ordinal_fit(model, run)


def verdicts(bias: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """One plain word per annotator by :data:`VERDICT_RULE` ("lenient and noisy" when both apply)."""
    side = np.where(bias >= LENIENT_BIAS, "lenient", np.where(bias <= -LENIENT_BIAS, "harsh", ""))
    noisy = noise >= NOISY_NOISE
    both = np.char.add(np.char.add(side, np.where((side != "") & noisy, " and ", "")), np.where(noisy, "noisy", ""))
    return np.where(both == "", "reliable", both).astype(object)


def ordinal_fit(model: OrdinalModel, run: EMRun[OrdinalState]) -> Fit:
    """The :class:`Fit` of an ordinal EM run: derived confusion, typed :class:`OrdinalScale` and annotator columns."""
    state = run.state
    noise = np.exp(state.log_noise)
    conf = model.confusion(state)
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
        estimated=model.estimate_scale,
    )
    return Fit(
        posterior=run.posterior,
        confusion=conf,
        class_prior=state.class_prior,
        log_likelihood=run.log_likelihood,
        n_iter=run.n_iter,
        converged=run.converged,
        annotator_columns=columns,
        ranking=Ranking.from_score(-expected_error, "expected error in levels (lower is better)"),
        ordinal=summary,
    )
