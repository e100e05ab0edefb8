"""``context-em``: annotator reliability that depends on a per-item context (Lipschitz-constrained EM).

Soltanmohammadi, Naraghi-Pour & van der Schaar, ICML 2015, eqs. (1)–(20); spec ``context.md``.  The model and
its preparation are in :mod:`.model`, the EM steps in :mod:`.em` (run by the shared EM driver), the M-step solvers
in :mod:`.chain`, :mod:`.simplex` and :mod:`.interior_point`, and the assembly of the result in :mod:`.fitting`.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses, as_responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import Aggregator, Gold
from fusion_core.methods.context.fitting import FittedCurves, Options, fit_binary, fit_confusion
from fusion_core.methods.context.model import (
    check_lipschitz,
    context_column,
    context_values,
    one_vs_rest_curves,
    prepare_context,
)
from fusion_core.methods.params import Bool, Choice, Float, Int, Object, Param
from fusion_core.methods.registry import register
from fusion_core.methods.results import Fit


@register(
    "context-em",
    title="Context-dependent reliability (curves along an item context)",
    summary="Context-dependent reliability: per-annotator detection/false-alarm curves over a numeric item context "
    "(Lipschitz-constrained EM).",
    inputs=("context",),
    family="context",
    reference="Soltanmohammadi, Naraghi-Pour & van der Schaar, ICML 2015, eqs. (1)–(20); spec context.md.",
)
class ContextEM(Aggregator):
    """Lipschitz-constrained EM over a per-item context (spec ``context.md``).

    ``fit(df, context=Series by task)`` (or ``context="column"`` naming a column of ``df`` that is constant within
    each task); numbers, dates and categories are accepted.  Binary labels follow the paper: each annotator has a
    detection curve p_1(x) and a false-alarm curve p_0(x), each c-Lipschitz in x.  More than two labels use one
    binary model per label (one-vs-rest, §9.2 option 1, an extension; the models are fitted independently and can
    disagree), or with ``multiclass="confusion"`` full confusion matrices π(x)[i, j] whose entries are c_i-Lipschitz
    and whose rows lie on the simplex (§9.2 option 2, an extension; with 2 labels it is the binary model);
    ``lipschitz`` is then a number, a classes-vector or a classes × annotators array.  Gold labels
    (``true_labels=``) are clamped.

    The curves on a grid are in ``result_.context`` (:class:`~fusion_core.methods.results.ContextCurves`).  Fitted
    attributes beyond the base: ``variant_``, ``lipschitz_``, ``context_grid_``, ``detection_curves_`` /
    ``false_alarm_curves_`` (annotators × grid, or annotators × classes × grid), ``confusion_curves_``
    (``multiclass="confusion"``: annotators × grid × true × reported), ``context_coverage_`` (annotators × grid
    response counts), ``curves_`` (long table of the fitted values at each annotator's observed contexts),
    ``fitted_curves_``, ``mstep_gap_``, ``n_mstep_fallbacks_``, ``context_binning_bound_``, ``raw_phi_`` (paper
    variant); :meth:`interpolate` and :meth:`interpolate_confusion` evaluate the curves anywhere.

    Examples
    --------
    >>> import warnings
    >>> from fusion_core.simulate.context import table1
    >>> sim = table1(4, 300, seed=0)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     m = ContextEM(swing=1.0).fit(sim.responses, context=sim.context)
    >>> m.result_.context.detection.shape  # annotators × grid points
    (4, 101)
    >>> bool((m.labels_ == sim.truth.reindex(m.labels_.index)).mean() > 0.85)
    True
    """

    params: ClassVar[dict[str, Param]] = {
        "variant": Choice(
            "shared_prior",
            ("shared_prior", "paper"),
            help="'shared_prior' (extension: one class prior, EM to convergence) or 'paper' (per-item φ, a fixed "
            "n_iter iterations, Soltanmohammadi et al. 2015 Algorithm 1).",
        ),
        "swing": Float(
            1.0,
            low=0.0,
            high=100.0,
            help="Smoothness in user terms: the largest total change of a reliability curve across the observed "
            "context range (c = swing / range). 0 = context-blind Dawid–Skene.",
        ),
        "lipschitz": Object(
            None,
            help="Lipschitz constants c (probability per context unit), overriding swing: a number, or a 2 × "
            "annotators array [false-alarm row, detection row] (confusion curves: one row per true class).",
            text="None, a number ≥ 0, or an array of numbers ≥ 0 (one row per curve)",
            check=check_lipschitz,
        ),
        "n_iter": Int(5, low=1, high=1000, advanced=True, help="Iterations of the paper variant (the paper uses 5)."),
        "tol": Float(
            1e-6,
            low=0.0,
            high=1.0,
            help="Shared-prior variant: stop when the relative change of the log-likelihood is below tol.",
        ),
        "max_iter": Int(200, low=1, high=10_000, help="Shared-prior variant: maximum EM iterations."),
        "accelerate": Bool(
            True,
            advanced=True,
            help="Shared-prior variant: SQUAREM acceleration of EM (Varadhan & Roland 2008) with a monotone "
            "safeguard; False = plain EM, one M-step per iteration.",
        ),
        "eps": Float(
            1e-6, low=1e-12, high=0.01, advanced=True, help="Probability floor: curves stay in [eps, 1 − eps]."
        ),
        "max_context_levels": Int(
            1000,
            low=1,
            high=10_000_000,
            nullable=True,
            advanced=True,
            help="Bin more distinct context values than this into equal-frequency levels (None = exact).",
        ),
        "interpolation": Choice(
            "paper",
            ("paper", "mid"),
            advanced=True,
            help="Curve values between fitted levels: 'paper' eq. (19) (lower extension) or 'mid' (mean of both "
            "envelopes).",
        ),
        "final_estep": Bool(
            False, advanced=True, help="Paper variant: decide with one more E-step under the last curves."
        ),
        "positive_label": Object(
            None,
            advanced=False,
            help="Binary data: the label meaning 'positive' (default: the second label in sorted order).",
            text="a label of the data, or None",
        ),
        "grid_size": Int(101, low=2, high=10_000, advanced=True, help="Number of grid points for the reported curves."),
        "drop_missing_context": Bool(
            False, help="Drop tasks without a context value (their posteriors stay at the prior) instead of failing."
        ),
        "multiclass": Choice(
            "one_vs_rest",
            ("one_vs_rest", "confusion"),
            help="More than 2 labels (extension, spec §9.2): 'one_vs_rest' fits one binary model per label; "
            "'confusion' fits per-annotator confusion matrices whose entries are Lipschitz in the context.",
        ),
    }

    # the declared parameters, as set by the generated keyword-only __init__
    variant: str
    swing: float
    lipschitz: Any
    n_iter: int
    tol: float
    max_iter: int
    accelerate: bool
    eps: float
    max_context_levels: int | None
    interpolation: str
    final_estep: bool
    positive_label: Any
    grid_size: int
    drop_missing_context: bool
    multiclass: str

    # ---------------------------------------------------------------- fitting
    def fit(
        self,
        data: Responses | pd.DataFrame,
        *,
        graph: Any = None,
        context: pd.Series | str | None = None,
        true_labels: pd.Series | None = None,
    ) -> Self:
        """As :meth:`Aggregator.fit`; ``context`` is a Series by task or the name of a column of ``data``."""
        if isinstance(context, str):
            context = context_column(data, context)
        return super().fit(data, graph=graph, context=context, true_labels=true_labels)

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        resp = responses
        if resp.n_workers < 2:
            raise UserInputError("context-em needs at least 2 annotators (3 or more for identifiable curves).")
        confusion = self.multiclass == "confusion"
        pos = self._positive_code(resp)
        setup = prepare_context(
            resp,
            context_values(resp, context),
            lipschitz=self.lipschitz,
            swing=float(self.swing),
            max_levels=None if self.max_context_levels is None else int(self.max_context_levels),
            grid_size=int(self.grid_size),
            drop_missing=bool(self.drop_missing_context),
            rows=resp.n_classes if confusion else 2,
        )
        opts = Options(
            variant=self.variant,
            n_iter=int(self.n_iter),
            tol=float(self.tol),
            max_iter=int(self.max_iter),
            accelerate=bool(self.accelerate),
            eps=float(self.eps),
            final_estep=bool(self.final_estep),
            interpolation=self.interpolation,
            name=self.method_name,
        )
        fit = (fit_confusion if confusion else fit_binary)(resp, setup, opts, pos=pos, gold=gold)
        for msg in setup.warnings:
            warnings.warn(msg, AggregationWarning, stacklevel=2)
        return fit

    def _positive_code(self, resp: Responses) -> int:
        if self.positive_label is None:
            return 1
        if resp.n_classes > 2:
            how = "models every label" if self.multiclass == "confusion" else "fits one-vs-rest models for every label"
            raise UserInputError(
                f"positive_label applies to binary data; with more than 2 labels context-em {how}; drop it."
            )
        return int(resp.label_codes([self.positive_label], what="positive_label")[0])

    def _set_fitted(self, resp: Responses, fit: Fit, seconds: float) -> None:
        super()._set_fitted(resp, fit, seconds)
        d, ctx = fit.details, fit.context
        assert ctx is not None
        self.variant_ = self.variant
        self.lipschitz_ = d["lipschitz"]
        self.context_grid_ = ctx.grid
        self.detection_curves_ = ctx.detection
        self.false_alarm_curves_ = ctx.false_alarm
        self.context_coverage_ = ctx.coverage
        self.mstep_gap_ = d["mstep_gap"]
        self.n_mstep_fallbacks_ = d["mstep_fallbacks"]
        self.context_binning_bound_ = d["context_binning_bound"]
        self.curves_ = d["curves"]
        self.fitted_curves_: FittedCurves = d["fitted_curves"]
        if ctx.confusion is not None:
            self.confusion_curves_ = ctx.confusion
        if "raw_phi" in d:
            self.raw_phi_ = d["raw_phi"]

    # ---------------------------------------------------------------- queries
    def _workers(self, worker: Any) -> list[int]:
        if worker is None:
            return list(range(self.responses_.n_workers))
        return [int(self.responses_.workers.get_loc(worker))]

    def _label_code(self, label: Any) -> int:
        return int(self.responses_.label_codes([label], what="label")[0])

    def interpolate(self, x: Any, worker: Any = None, label: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """(false-alarm, detection) curves at contexts ``x`` by eqs. (17)–(19): arrays annotators × len(x) (or
        len(x) for one ``worker`` id).  ``label`` picks the class-vs-rest curves for multiclass data.  Categorical
        contexts take category values (unseen categories get the (19) value)."""
        return self._interpolate_codes(self.fitted_curves_.values.codes(x), worker, label)

    def _interpolate_codes(self, x: np.ndarray, worker: Any, label: Any) -> tuple[np.ndarray, np.ndarray]:
        fc = self.fitted_curves_
        ws = self._workers(worker)
        if fc.confusion is not None:
            det, fa = one_vs_rest_curves(np.stack([fc.confusion_at(x, w) for w in ws]), fc.prior)
            k = fc.problems[0] if label is None else self._label_code(label)
            return (fa[:, k], det[:, k]) if worker is None else (fa[0, k], det[0, k])
        j = 0 if label is None else fc.problems.index(self._label_code(label))
        both = [fc.binary_at(x, w, j) for w in ws]  # annotators, not responses
        fa, det = np.array([b[0] for b in both]), np.array([b[1] for b in both])
        return (fa, det) if worker is None else (fa[0], det[0])

    def interpolate_confusion(self, x: Any, worker: Any = None) -> np.ndarray:
        """Confusion curves at contexts ``x`` (``multiclass="confusion"``): annotators × len(x) × true × reported,
        or len(x) × true × reported for one ``worker`` id; eqs. (17)–(19) per entry, rows back on the simplex."""
        if self.fitted_curves_.confusion is None:
            raise UserInputError("interpolate_confusion needs a model fitted with multiclass='confusion'.")
        return self._confusion_codes(self.fitted_curves_.values.codes(x), worker)

    def _confusion_codes(self, x: np.ndarray, worker: Any) -> np.ndarray:
        out = np.stack([self.fitted_curves_.confusion_at(x, w) for w in self._workers(worker)])
        return out[0] if worker is not None else out

    def response_log_likelihood(self, responses: Responses) -> np.ndarray:
        """log P(response | true class) per response (R × K) under the fitted curves at each item's context, for
        held-out scoring.  Binary: the two-coin curves; confusion curves: the interpolated confusion rows;
        one-vs-rest: P(l | k) ∝ p^(l)_{1{l=k}}(x) normalised over l (a heuristic joint of the binary models)."""
        x = self.fitted_curves_.values.x[responses.item]
        if self.fitted_curves_.confusion is not None:
            return self._confusion_log_likelihood(responses, x)
        K = self.responses_.n_classes
        if K == 2:
            p0, p1 = self._binary_at_responses(responses, x, None)
            pos = self.fitted_curves_.problems[0]
            said_pos = responses.label == pos
            out = np.empty((responses.n_responses, 2))
            out[:, pos] = np.where(said_pos, np.log(p1), np.log1p(-p1))
            out[:, 1 - pos] = np.where(said_pos, np.log(p0), np.log1p(-p0))
            return out
        score = np.empty((responses.n_responses, K, K))  # score[r, true k, reported l]
        for cls in self.fitted_curves_.problems:  # classes, not responses
            p0, p1 = self._binary_at_responses(responses, x, self.responses_.classes[cls])
            score[:, :, cls] = p0[:, None]
            score[:, cls, cls] = p1
        score /= score.sum(axis=2, keepdims=True)
        return np.log(score[np.arange(responses.n_responses), :, responses.label])

    def _binary_at_responses(self, responses: Responses, x: np.ndarray, label: Any) -> tuple[np.ndarray, np.ndarray]:
        """(false alarm, detection) at every response's context for its annotator (0.5 where undefined), clipped."""
        eps = float(self.eps)
        p0 = np.full(responses.n_responses, 0.5)
        p1 = np.full(responses.n_responses, 0.5)
        for w in np.unique(responses.worker):  # annotators, not responses
            sel = responses.worker == w
            a, b = self._interpolate_codes(x[sel], self.responses_.workers[w], label)
            p0[sel] = np.where(np.isnan(a), 0.5, a)
            p1[sel] = np.where(np.isnan(b), 0.5, b)
        return np.clip(p0, eps, 1 - eps), np.clip(p1, eps, 1 - eps)

    def _confusion_log_likelihood(self, responses: Responses, x: np.ndarray) -> np.ndarray:
        K = self.responses_.n_classes
        out = np.full((responses.n_responses, K), np.log(1.0 / K))
        for w in np.unique(responses.worker):  # annotators, not responses
            sel = np.flatnonzero(responses.worker == w)
            conf = self._confusion_codes(x[sel], self.responses_.workers[w])
            if np.isnan(conf).all():
                continue
            conf = np.clip(conf, float(self.eps), 1.0)
            out[sel] = np.log(conf[np.arange(len(sel)), :, responses.label[sel]])
        return out


def dp_metric(
    model: ContextEM, p0_true: list[Any], p1_true: list[Any], *, lo: float = 0.0, hi: float = 1.0, n: int = 1001
) -> float:
    """Spec eq. (21) (lower is better): DP = (1/2K) Σ_i Σ_k ∫|p_ik − p̂_ik| dx / ∫ p_ik dx on ``n`` trapezoid points.
    ``p0_true``/``p1_true``: lists of vectorised functions, one per annotator in ``model.workers_`` order."""
    x = np.linspace(lo, hi, n)
    f0, f1 = model.interpolate(x)
    tot = 0.0
    k = len(p0_true)
    for truth, fit in ((p0_true, f0), (p1_true, f1)):
        for w in range(k):  # annotators
            t = np.asarray(truth[w](x), dtype=float) * np.ones_like(x)
            tot += np.trapezoid(np.abs(t - fit[w]), x) / np.trapezoid(t, x)
    return tot / (2 * k)


def select_swing(
    data: Responses | pd.DataFrame,
    context: pd.Series | str,
    swings: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0),
    *,
    frac: float = 0.1,
    n_splits: int = 3,
    random_state: int = 0,
    **params: Any,
) -> tuple[pd.DataFrame, float]:
    """Smoothness selection by held-out responses (spec §9.3, [EXT]): score each common swing s by the held-out
    annotation log-likelihood (3 splits of 10 %), keep the smoothest s whose paired per-item difference to the
    best has mean below 2 standard errors.  Returns (score table, chosen swing)."""
    from fusion_core.methods.heldout import choose, heldout_score, heldout_splits

    resp = as_responses(data)
    splits = heldout_splits(
        resp.item, resp.worker, resp.n_items, resp.n_workers, frac=frac, n_splits=n_splits, random_state=random_state
    )
    if isinstance(context, str):
        context = context_column(data, context)
    scores = []
    order = sorted(float(s) for s in swings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        for rank, s in enumerate(order):
            hs = heldout_score(
                ContextEM(swing=s, **params), resp, splits=splits, fit_kwargs={"context": context}, name=f"{s:g}"
            )
            hs.n_parameters = rank  # smoother = simpler
            scores.append(hs)
    chosen = float(choose(scores, rule="simplest"))
    table = pd.DataFrame({"swing": order, "score": [h.score for h in scores], "se": [h.se for h in scores]})
    table["chosen"] = table["swing"] == chosen
    return table, chosen
