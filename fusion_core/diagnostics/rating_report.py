"""Everything the ratings view shows, for one label type, from one call: the fit, the verdicts with intervals,
agreement with intervals and (judges) calibration and correlated judges.

Label types (:data:`LABEL_TYPES`): ``"ordinal"`` (ordered levels: ``ordinal-em``, verdicts, Krippendorff's α
ordinal and nominal), ``"numeric"`` (numbers: numeric truth, verdicts, α interval and ICC(1,1)), ``"judges"``
(categorical labels with a confidence per response: Dawid–Skene weighing confidences, calibration, correlated
judges, α nominal).  :func:`rating_demo` gives the simulated data of each type (known roles / truth).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fusion_core.data.numeric import NumericResponses
from fusion_core.data.responses import Responses
from fusion_core.diagnostics.calibration import Calibration, calibration
from fusion_core.diagnostics.judges import CorrelatedJudges, correlated_judges
from fusion_core.diagnostics.krippendorff import krippendorff
from fusion_core.diagnostics.rating_verdicts import RatingVerdicts, numeric_verdicts, ordinal_verdicts
from fusion_core.diagnostics.reliability import ReliabilityEstimate, icc
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.ordinal import is_numeric_label

LABEL_TYPES = {
    "ordinal": "Ordinal levels (e.g. 1–5 scores)",
    "numeric": "Numeric ratings (continuous values)",
    "judges": "Judges with confidences",
}


@dataclass(frozen=True)
class RatingDemo:
    """Simulated data of one label type: the long ``responses`` table (task, worker, label or value[, confidence]),
    the true ``truth`` by task, the simulated ``roles`` by worker, the level order (ordinal) and a description."""

    kind: str
    responses: pd.DataFrame
    truth: pd.Series
    roles: pd.Series
    levels: tuple[Any, ...] | None
    description: str


@dataclass(frozen=True)
class RatingReport:
    """What :func:`rating_report` found.  ``verdicts`` (ordinal, numeric), ``calibration`` and ``correlated``
    (judges) are None where they do not apply; ``agreement`` holds the statistics with their intervals; ``fit`` is
    the ordinal ``FitResult``, the fitted ``NumericTruth`` or the judges' Dawid–Skene ``FitResult``."""

    kind: str
    responses: Responses | NumericResponses
    fit: Any
    verdicts: RatingVerdicts | None
    agreement: tuple[ReliabilityEstimate, ...]
    calibration: Calibration | None
    correlated: CorrelatedJudges | None


def rating_demo(kind: str, seed: int = 0) -> RatingDemo:
    """The simulated demo of a label type (module docstring)."""
    from fusion_core.simulate.judges import judge_panel
    from fusion_core.simulate.ratings import numeric_crowd, ordinal_crowd

    if kind == "ordinal":
        levels = ("poor", "fair", "good", "very good", "excellent")
        sim = ordinal_crowd(n_items=300, n_workers=15, n_lenient=3, n_harsh=3, n_noisy=2, n_chance=1, labels=levels,
                            seed=seed)  # fmt: skip
        text = "15 annotators grade 300 items on 5 levels (3 lenient, 3 harsh, 2 noisy, 1 near chance, 6 reliable)."
        return RatingDemo(kind, sim.responses, sim.truth, sim.role, levels, text)
    if kind == "numeric":
        sim = numeric_crowd(n_items=300, n_workers=15, n_lenient=3, n_harsh=3, n_noisy=2, n_chance=1, seed=seed)
        text = "15 annotators rate 300 items on a continuous scale (3 lenient, 3 harsh, 2 noisy, 1 near chance)."
        return RatingDemo(kind, sim.responses, sim.truth, sim.role, None, text)
    if kind == "judges":
        panel = judge_panel(n_items=400, n_judges=8, n_correlated=3, seed=seed)
        group = panel.group.map({True: "shares errors", False: "independent"})
        text = "8 judges label 400 items pass/fail with a confidence; 3 share a base model, its errors and over-confidence."
        return RatingDemo(kind, panel.responses, panel.truth, group.rename("role"), None, text)
    raise UserInputError(f"unknown label type {kind!r}; use one of {', '.join(LABEL_TYPES)}.")


def numeric_from(resp: Responses) -> NumericResponses:
    """Categorical responses whose labels are numbers as numeric responses (the labels read as numbers)."""
    bad = [str(c) for c in resp.classes if not is_numeric_label(c)]
    if bad:
        raise UserInputError(
            f"numeric ratings need labels that are numbers, but {bad[:5]} are not; choose ordinal levels or judges."
        )
    df = resp.to_frame()
    return NumericResponses.from_frame(df.assign(value=df["label"].map(lambda v: float(str(v)))))


def rating_report(
    data: Responses | NumericResponses | pd.DataFrame,
    kind: str,
    *,
    levels: Any = None,
    n_bootstrap: int = 100,
    level: float = 0.95,
    random_state: int | None = 0,
    reference: pd.Series | None = None,
) -> RatingReport:
    """Fit and diagnose ``data`` as label type ``kind`` (module docstring).  ``levels``: the ordinal order (a list,
    lowest first, or "numeric"); ``reference``: gold labels for the judges' calibration (default: the consensus).
    Judges with more than two labels are checked for shared errors on their first label against the rest."""
    if kind not in LABEL_TYPES:
        raise UserInputError(f"unknown label type {kind!r}; use one of {', '.join(LABEL_TYPES)}.")
    boot: dict[str, Any] = {"n_bootstrap": n_bootstrap, "level": level, "random_state": random_state}
    if kind == "numeric":
        num = data if isinstance(data, NumericResponses) else None
        if num is None:
            num = numeric_from(data) if isinstance(data, Responses) else NumericResponses.from_frame(data)
        v = numeric_verdicts(num, **boot)
        stats = (krippendorff(num, metric="interval", **boot), icc(num, form="1", **boot))
        return RatingReport(kind, num, v.fit, v, stats, None, None)
    if isinstance(data, NumericResponses):
        raise UserInputError("these are numeric ratings; choose the numeric label type.")
    resp = data if isinstance(data, Responses) else _categorical(data)
    if kind == "ordinal":
        v = ordinal_verdicts(resp, levels=levels, **boot)
        order = list(v.fit.classes)
        ordinal = (
            krippendorff(resp, metric="ordinal", levels=order, **boot),
            krippendorff(resp, metric="nominal", **boot),
        )
        return RatingReport(kind, resp, v.fit, v, ordinal, None, None)
    if resp.weight is None:
        raise UserInputError(
            "these responses carry no confidence; load the data with a confidence column to look at judges."
        )
    from fusion_core.methods.registry import create

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        fit = create("ds").fit(resp).result_
    consensus = pd.Series(fit.classes.take(fit.label_codes), index=fit.items)
    name = "gold labels" if reference is not None else "the consensus of ds (confidence-weighted)"
    cal = calibration(resp, reference if reference is not None else consensus, level=level, reference_name=name)
    corr = correlated_judges(resp, true_labels=reference, positive_label=None if resp.n_classes == 2 else
                             resp.classes[0], random_state=random_state)  # fmt: skip
    agree = (krippendorff(resp, metric="nominal", **boot),)
    return RatingReport(kind, resp, fit, None, agree, cal, corr)


def _categorical(df: pd.DataFrame) -> Responses:
    return Responses.from_frame(df, confidence="confidence" if "confidence" in df.columns else None)


__all__ = ["LABEL_TYPES", "RatingDemo", "RatingReport", "numeric_from", "rating_demo", "rating_report"]
