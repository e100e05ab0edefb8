"""The registered spectral estimators: ``sml`` (P14), ``isml`` (J15) and ``sml-ds`` (Dawid–Skene EM started from
them, P14's "iMLE"); spec ``spectral.md`` §4.

Binary data: the *positive* class (coded +1; sensitivity ψ and the class imbalance b = P(+) − P(−) refer to it)
is ``positive_label``, by default the second class in the data's label order (e.g. 1 of {0, 1}, 2 of {1, 2}).
More than two classes: the one-vs-all reduction (:mod:`.one_vs_all`): class priors and confusion diagonals only.
Sparse data: pairwise-complete moments on the spectral core (§5); when no core exists the method warns and falls
back to Dawid–Skene EM from majority vote, or raises with ``strict=True``.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.methods.base import Aggregator, Gold, clamp_gold
from fusion_core.methods.params import Bool, Choice, Float, Int, Object, Param
from fusion_core.methods.registry import register
from fusion_core.methods.results import Fit, FitResult, SpectralSummary
from fusion_core.methods.spectral.binary import BinaryMatrix
from fusion_core.methods.spectral.decisions import (
    EM_SMOOTHING,
    BinaryDecisions,
    binary_decisions,
    spectral_confusion,
)
from fusion_core.methods.spectral.eigenvector import COMPLETIONS
from fusion_core.methods.spectral.em_stage import EM_STARTS, EMStage, EMStageSettings, em_fallback, em_from_starts
from fusion_core.methods.spectral.one_vs_all import one_vs_all, ova_specificity, per_class_fits
from fusion_core.methods.spectral.outputs import (
    METHOD_FALLBACK,
    METHOD_ONE_VS_ALL,
    METHOD_SPECTRAL,
    binary_columns,
    class_columns,
    eigenvector_ranking,
    em_ranking,
    label_value,
)
from fusion_core.methods.spectral.pipeline import BinaryFit, fit_binary
from fusion_core.methods.spectral.signs import SIGN_RULES


def check_label(value: Any) -> Any:
    """Parameter check for ``positive_label``: one label value (whether it occurs is checked against the data)."""
    if isinstance(value, (str, numbers.Number, np.generic)):
        return value
    raise TypeError("one label value that occurs in the data (binary data only), or None for the second label")


def check_b(value: Any) -> Any:
    """Parameter check for ``b``: a number strictly between −1 and 1."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not -1 < float(value) < 1:
        raise ValueError("a number strictly between −1 and 1 (P(positive) − P(negative)), or None to estimate it")
    return value


COMMON_PARAMS = {
    "positive_label": Object(
        None,
        help="Binary data: the label coded +1 (sensitivity and b refer to it); None = the second label in label order.",
        text="one label value that occurs in the data (binary data only), or None for the second label",
        check=check_label,
        advanced=False,
    ),
    "completion": Choice(
        "auto",
        COMPLETIONS,
        help="Diagonal completion: log-linear least squares (P14), then a Gauss–Seidel rank-one fit when entries "
        "are missing ('auto').",
        advanced=True,
    ),
    "weights": Choice(
        "delta",
        ("delta", "uniform"),
        help="Pair weights of the log-linear fit (inverse delta-method variance, or P14's plain least squares).",
        advanced=True,
    ),
    "sign_rule": Choice(
        "sum",
        SIGN_RULES,
        help="Eigenvector sign: annotators better than random on average ('sum') or in majority ('count').",
        advanced=True,
    ),
    "n_min": Int(
        10,
        low=2,
        high=10_000,
        help="Minimum items two annotators must share for their covariance to be used.",
        advanced=True,
    ),
    "d_min": Int(
        3,
        low=1,
        high=100,
        help="Minimum number of valid partners for an annotator to stay in the spectral core.",
        advanced=True,
    ),
    "strict": Bool(
        False,
        help="Raise instead of falling back to EM when the data are too sparse for the spectral stage.",
        advanced=True,
    ),
}
IMBALANCE_PARAMS = {
    "b_method": Choice(
        "likelihood",
        ("likelihood", "tensor", "both"),
        help="Class-imbalance estimator: restricted likelihood (J15 Alg. 2) or 3-D tensor (J15 Alg. 1); 'both' uses "
        "the likelihood and reports the tensor value.",
    ),
    "b": Object(
        None,
        help="Known class imbalance P(+) − P(−) (binary data only); None = estimate it.",
        text="a number strictly between −1 and 1 (P(positive) − P(negative)), or None to estimate it",
        check=check_b,
    ),
    "use_prior": Bool(
        False,
        help="Add the prior log-odds ln((1+b)/(1−b)) to the i-SML rule (MAP, better accuracy) instead of the papers' "
        "ML rule (better balanced accuracy).",
    ),
}
EM_PARAMS = {
    "init": Choice("isml", EM_STARTS, help="Start of EM (P14's iMLE starts from SML)."),
    "multi_start": Bool(
        True, help="Also run EM from majority vote and keep the run with the higher log-likelihood (§3.11)."
    ),
    "smoothing": Float(EM_SMOOTHING, low=0.0, high=100.0, help="Pseudo-count added to confusion counts in the M-step."),
    "tol": Float(1e-8, low=0.0, high=1.0, help="Stop when the relative log-likelihood change is below tol."),
    "max_iter": Int(500, low=1, high=10_000, help="Maximum EM iterations."),
}


class SpectralBase(Aggregator):
    """Shared binary / one-vs-all machinery; subclasses choose the prediction rule (``level``)."""

    level: ClassVar[str] = "sml"
    params = COMMON_PARAMS

    # ----------------------------------------------------------------------- entry
    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        p = self.get_params()
        if responses.n_classes == 2:
            return self._fit_binary(responses, gold, p)
        if p.get("b") is not None:
            raise UserInputError("a known b applies to binary data only; with more than two classes leave b=None.")
        if p["b_method"] == "none":
            raise UserInputError(
                "with more than two classes the one-vs-all reduction needs the class imbalance of each class: "
                "set b_method to 'likelihood', 'tensor' or 'both'."
            )
        return self._fit_multiclass(responses, gold, p)

    @staticmethod
    def _spectral_settings(p: dict[str, Any]) -> dict[str, Any]:
        return {k: p[k] for k in ("completion", "weights", "sign_rule", "n_min", "d_min", "strict")}

    def _em_stage(self, resp: Responses, gold: Gold | None, starts: dict[str, np.ndarray | None]) -> EMStage | None:
        """The EM stage of ``sml-ds`` (None for ``sml`` and ``isml``)."""
        if self.level != "sml-ds":
            return None
        p = self.get_params()
        settings = EMStageSettings(p["init"], p["multi_start"], p["smoothing"], p["tol"], p["max_iter"])
        return em_from_starts(resp, gold, starts, settings)

    def _posterior(self, starts: dict[str, np.ndarray | None], em: EMStage | None) -> np.ndarray:
        """The level's posterior: SML labels, the i-SML posterior, or the EM run kept."""
        if em is not None:
            return em.run.posterior
        post = starts["sml" if self.level == "sml" else "isml"]
        assert post is not None
        return post

    # -------------------------------------------------------------------- binary
    def _fit_binary(self, resp: Responses, gold: Gold | None, p: dict[str, Any]) -> Fit:
        label = p["positive_label"]
        pos = 1 if label is None else int(resp.label_codes([label], what="positive_label")[0])
        neg = 1 - pos
        z = np.where(resp.label == pos, 1.0, -1.0)
        B = BinaryMatrix.from_codes(resp.worker, resp.item, z, resp.n_workers, resp.n_items)
        known_b = p.get("b")
        bf = fit_binary(
            B,
            b=None if known_b is None else float(known_b),
            b_method=p["b_method"],
            want_llr=True,
            **self._spectral_settings(p),
        )
        if bf.spectral is None:
            return self._fallback(resp, gold, pos)
        dec = binary_decisions(resp, bf, pos, use_prior=bool(p.get("use_prior", False)))
        starts = {"sml": dec.sml_posterior, "isml": dec.isml_posterior, "mv": dec.majority_vote}
        em = self._em_stage(resp, gold, starts)
        post = clamp_gold(self._posterior(starts, em).copy(), gold)
        if em is not None:
            conf, prior = em.run.state.confusion, em.run.state.class_prior
            b_out = float(prior[pos] - prior[neg])
        else:
            conf = spectral_confusion(resp, bf, post, pos)
            b_out = bf.b
            prior = _binary_prior(bf.b, pos) if np.isfinite(bf.b) else post.mean(axis=0)
        sens, spec = conf[:, pos, pos], conf[:, neg, neg]
        spectral = bf.spectral
        ranking = (
            em_ranking((sens + spec) / 2) if em is not None else eigenvector_ranking(spectral.v, spectral.core.mask)
        )
        return Fit(
            posterior=post,
            confusion=conf,
            class_prior=prior,
            log_likelihood=em.run.log_likelihood if em is not None else [],
            n_iter=em.run.n_iter if em is not None else 0,
            converged=em.run.converged if em is not None else True,
            annotator_columns=binary_columns(sens, spec, resp.classes, pos),
            ranking=ranking,
            spectral=SpectralSummary(
                eigenvector=spectral.v,
                eigenvalues=np.asarray(spectral.spectrum),
                positive_label=label_value(resp.classes[pos]),
                class_imbalance=b_out,
                method_used=METHOD_SPECTRAL,
            ),
            restarts=em.restarts if em is not None else None,
            details={**_binary_details(bf, dec, sens, spec), **(em.details if em is not None else {})},
        )

    # ---------------------------------------------------------------- multiclass
    def _fit_multiclass(self, resp: Responses, gold: Gold | None, p: dict[str, Any]) -> Fit:
        """One-vs-all (J15 §5, spec §3.12): per class k the binary pipeline on f = +1 iff label == k."""
        fits = per_class_fits(resp, b_method=p["b_method"], spectral=self._spectral_settings(p))
        if fits is None:
            return self._fallback(resp, gold, 1)
        ova = one_vs_all(resp, fits, use_prior=bool(p.get("use_prior", False)))
        starts: dict[str, np.ndarray | None] = {
            "sml": ova.sml_posterior,
            "isml": ova.isml_posterior,
            "mv": ova.majority_vote,
        }
        em = self._em_stage(resp, gold, starts)
        post = clamp_gold(self._posterior(starts, em).copy(), gold)
        conf, prior = (
            (em.run.state.confusion, em.run.state.class_prior) if em is not None else (ova.confusion, ova.prior)
        )
        sens = np.einsum("wkk->wk", conf)
        spec = ova_specificity(conf, prior) if em is not None else ova.specificity
        details: dict[str, Any] = {
            "score": ova.scores,
            "class_prior_raw": ova.prior_raw,
            "class_prior_sum": ova.prior_sum,
            "in_core": ova.in_core,
            "diagnostics": ova.diagnostics(resp.classes),
            **(em.details if em is not None else {}),
            "sensitivity": sens,
            "specificity": spec,
            "balanced_accuracy": sens.mean(axis=1),
        }
        return Fit(
            posterior=post,
            confusion=conf,
            class_prior=prior,
            log_likelihood=em.run.log_likelihood if em is not None else [],
            n_iter=em.run.n_iter if em is not None else 0,
            converged=em.run.converged if em is not None else True,
            annotator_columns=class_columns(sens, resp.classes),
            spectral=SpectralSummary(
                eigenvector=ova.eigenvector,
                eigenvalues=ova.eigenvalues,
                class_imbalance=2 * np.asarray(prior) - 1,
                method_used=METHOD_ONE_VS_ALL,
            ),
            restarts=em.restarts if em is not None else None,
            details=details,
        )

    # ------------------------------------------------------------------ fallback
    def _fallback(self, resp: Responses, gold: Gold | None, pos: int) -> Fit:
        """§5.2 step 5: Dawid–Skene EM from majority vote on all annotators; no eigenvector (NaN)."""
        run = em_fallback(resp, gold, self.method_name or type(self).__name__)
        conf, prior = run.state.confusion, run.state.class_prior
        k, m = resp.n_classes, resp.n_workers
        diag = np.einsum("wkk->wk", conf)
        binary = k == 2
        sens = diag[:, pos] if binary else diag
        spec = diag[:, 1 - pos] if binary else np.full((m, k), np.nan)
        return run.to_fit(
            confusion=conf,
            class_prior=prior,
            annotator_columns=binary_columns(sens, spec, resp.classes, pos)
            if binary
            else class_columns(diag, resp.classes),
            spectral=SpectralSummary(
                eigenvector=np.full(m, np.nan) if binary else np.full((m, k), np.nan),
                eigenvalues=np.array([]),
                positive_label=label_value(resp.classes[pos]) if binary else None,
                class_imbalance=float(prior[pos] - prior[1 - pos]) if binary else 2 * prior - 1,
                method_used=METHOD_FALLBACK,
            ),
            details={
                "diagnostics": {"method_used": "em_mv_fallback"},
                "sensitivity": sens,
                "specificity": spec,
                "balanced_accuracy": diag.mean(axis=1),
            },
        )

    # ------------------------------------------------------------- fitted attrs
    def _set_fitted(self, resp: Responses, fit: Fit, seconds: float) -> None:
        super()._set_fitted(resp, fit, seconds)
        _spectral_attributes(self, self.result_)


def _binary_prior(b: float, pos: int) -> np.ndarray:
    """Class prior from b = P(+) − P(−) with the positive class at code ``pos``."""
    prior = np.zeros(2)
    prior[pos], prior[1 - pos] = (1 + b) / 2, (1 - b) / 2
    return prior


def _binary_details(
    bf: BinaryFit, dec: BinaryDecisions, sensitivity: np.ndarray, specificity: np.ndarray
) -> dict[str, Any]:
    """Method-internal results of a binary fit (``details``): scores, flags, diagnostics, raw ψ̂/η̂, b curve, LLR."""
    assert bf.spectral is not None
    out: dict[str, Any] = {
        "score": bf.score,
        "sml_labels": dec.sml_labels,
        "tied_items": np.flatnonzero(dec.tied),
        "items_without_core_label": np.flatnonzero(dec.no_core),
        "diagnostics": {**bf.diagnostics, "sml_mv_agreement": dec.sml_mv_agreement},
        "in_core": bf.spectral.core.mask,
        "sensitivity_raw": bf.psi_raw,
        "specificity_raw": bf.eta_raw,
        "sensitivity": np.asarray(sensitivity),
        "specificity": np.asarray(specificity),
        "balanced_accuracy": (np.asarray(sensitivity) + np.asarray(specificity)) / 2,
    }
    if bf.b_curve is not None:
        out["b_curve"] = {"b": bf.b_curve[0], "G": bf.b_curve[1]}
    if bf.llr is not None:
        out["llr"] = bf.llr
    return out


def _spectral_attributes(est: Any, r: FitResult) -> None:
    """The estimator's spectral attributes (``eigenvector_``, ``sensitivity_`` …) by annotator id."""
    workers = pd.Index(r.workers, name="worker")
    classes = pd.Index(r.classes, name="label")

    def by_worker(a: Any, name: str) -> pd.Series | pd.DataFrame:
        a = np.asarray(a, dtype=float)
        if a.ndim == 2:
            return pd.DataFrame(a, index=workers, columns=classes)
        return pd.Series(a, index=workers, name=name)

    assert r.spectral is not None
    est.eigenvector_ = by_worker(r.spectral.eigenvector, "eigenvector")
    est.eigenvalues_ = np.asarray(r.spectral.eigenvalues)
    est.balanced_accuracy_ = by_worker(r.details["balanced_accuracy"], "balanced_accuracy")
    est.sensitivity_ = by_worker(r.details["sensitivity"], "sensitivity")
    est.specificity_ = by_worker(r.details["specificity"], "specificity")
    ci = np.asarray(r.spectral.class_imbalance, dtype=float)
    est.class_imbalance_ = float(ci) if ci.ndim == 0 else pd.Series(ci, index=classes, name="class_imbalance")
    est.diagnostics_ = r.details.get("diagnostics", {})
    est.positive_label_ = r.spectral.positive_label
    if r.ranking is not None:
        est.ranking_ = pd.Index(r.workers.take(r.ranking.order), name="worker")


@register(
    "sml",
    title="Spectral meta-learner (ranking eigenvector, weighted vote)",
    summary="Spectral Meta-Learner: rank annotators by the leading eigenvector of their covariance; weighted vote.",
    family="spectral",
    probabilistic=False,
    reference="Parisi et al. 2014 (PNAS) Eqs. 4–8, 13–15; spec spectral.md §3.2–3.6, §5.",
)
class SpectralMetaLearner(SpectralBase):
    """SML: ŷ = sign(Σ_i Z_i v̂_i) with v̂ the sign-resolved leading eigenvector of the rank-one-completed
    covariance (P14 Eq. 15).

    ``probas_`` are hard (0/1): the SML score is not a probability.  ``result_.spectral`` holds the eigenvector
    (which ranks annotators by balanced accuracy, ``result_.ranking``), the eigenvalues, the positive label and b̂;
    sensitivity, specificity and balanced accuracy per annotator (ψ/η from v̂ and b̂, J15 Eq. 5) are
    ``result_.annotator_columns``.  Gold labels (``true_labels=``) are clamped in the output posteriors.

    Examples
    --------
    >>> from fusion_core.simulate.spectral import independent
    >>> sim = independent(m=15, n=500, b=0.3, psi_range=(0.6, 0.9), seed=7)
    >>> sml = SpectralMetaLearner().fit(sim.responses)
    >>> bool((sml.labels_ == sim.truth.reindex(sml.labels_.index)).mean() > 0.9)
    True
    >>> sml.result_.spectral.positive_label, len(sml.ranking_)
    (1, 15)
    """

    level = "sml"
    params: ClassVar[dict[str, Param]] = {
        **COMMON_PARAMS,
        "b_method": Choice(
            "tensor",
            ("likelihood", "tensor", "both", "none"),
            help="Estimator of b for the reported sensitivity/specificity (labels do not use it); the O(responses) "
            "tensor method by default.",
        ),
    }


@register(
    "isml",
    title="Informed spectral meta-learner (i-SML)",
    summary="i-SML: sensitivity/specificity per annotator from the eigenvector and class imbalance; ML fusion.",
    family="spectral",
    reference="Jaffe et al. 2015 (AISTATS) Lemma 2, Alg. 1–2, Eqs. 8–9; spec spectral.md §3.7–3.10, §3.12.",
)
class InformedSML(SpectralBase):
    """i-SML: ψ̂, η̂ from v̂, μ̂ and b̂ (J15 Eq. 5), then the ML rule sign(Σ Z ln α + ln β) (J15 Eq. 8).

    ``use_prior=True`` adds the prior log-odds (MAP).  ``probas_`` = σ(LLR [+ prior log-odds]).  Typed results as
    for :class:`SpectralMetaLearner`.  Gold labels are clamped in the output posteriors.

    Examples
    --------
    >>> from fusion_core.simulate.spectral import independent
    >>> sim = independent(m=15, n=500, b=0.3, psi_range=(0.6, 0.9), seed=7)
    >>> isml = InformedSML().fit(sim.responses)
    >>> abs(isml.class_imbalance_ - 0.3) < 0.1
    True
    >>> [c.title for c in isml.result_.annotator_columns]
    ['sensitivity (detects 1)', 'specificity (detects 0)', 'balanced accuracy']
    """

    level = "isml"
    params: ClassVar[dict[str, Param]] = {**COMMON_PARAMS, **IMBALANCE_PARAMS}


@register(
    "sml-ds",
    title="Dawid–Skene started from the spectral meta-learner",
    summary="Dawid–Skene EM started from i-SML/SML (P14's iMLE), multi-start with majority vote.",
    family="spectral",
    reference="Parisi et al. 2014 §SML (iMLE); Jaffe et al. 2015 §3.1; spec spectral.md §3.11.",
)
class SpectralDawidSkene(SpectralBase):
    """EM for the Dawid–Skene model (two-coin when binary) from the i-SML posterior (default), SML labels or
    majority vote; with ``multi_start`` also from majority vote, keeping the run with the higher final
    log-likelihood (``result_.restarts``; the start kept is ``result_.details['em_start']``).

    Annotators are ranked by their EM balanced accuracy (``result_.ranking``, every annotator).  Gold labels
    (``true_labels=``) are clamped in EM.

    Examples
    --------
    >>> from fusion_core.simulate.spectral import independent
    >>> sim = independent(m=15, n=500, b=0.3, psi_range=(0.6, 0.9), seed=7)
    >>> em = SpectralDawidSkene().fit(sim.responses)
    >>> bool((em.labels_ == sim.truth.reindex(em.labels_.index)).mean() > 0.9)
    True
    >>> em.result_.details["em_start"] in ("isml", "mv"), em.result_.ranking.source
    (True, 'balanced accuracy estimated by Dawid–Skene EM (every annotator)')
    """

    level = "sml-ds"
    params: ClassVar[dict[str, Param]] = {**COMMON_PARAMS, **IMBALANCE_PARAMS, **EM_PARAMS}
