"""Typed results: what a method returns (:class:`Fit`, arrays in code order) and what other layers read
(:class:`FitResult`, the same arrays with the user's ids).

Everything a plot, a page, a report or the CLI needs is a documented field here, never a string key: per-annotator
columns (:class:`AnnotatorColumn`), per-item columns such as GLAD's difficulty (:class:`ItemColumn`), the annotator ranking (:class:`Ranking`), the spectral summary
(:class:`SpectralSummary`), context curves (:class:`ContextCurves`), the sequence model (:class:`SequenceModel`),
the item graph summary (:class:`GraphSummary`), the choice ``auto`` made (:class:`ModelChoice`), annealing,
restarts and the ordinal scale (:class:`OrdinalScale`).  ``details`` holds method-internal diagnostics for experts and tests; no other layer reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.methods.ties import argmax_ties


@dataclass(frozen=True)
class AnnotatorColumn:
    """One per-annotator quantity, shown as a column of the annotator table.

    ``values`` has one entry per annotator in the result's ``workers`` order (NaN where undefined).  ``title`` is
    the plain-words header users see ("balanced accuracy"), ``key`` a stable machine name, ``help`` one sentence.
    """

    key: str
    title: str
    values: np.ndarray
    help: str = ""

    def __post_init__(self) -> None:
        if np.ndim(self.values) != 1:
            raise ValueError(
                f"annotator column {self.key!r} must hold one value per annotator (a 1-D array), "
                f"got shape {np.shape(self.values)}"
            )


@dataclass(frozen=True)
class ItemColumn:
    """One per-item quantity a model estimates besides the posterior (e.g. GLAD's item difficulty).

    ``values`` has one entry per item in the result's ``items`` order (NaN where undefined); ``title`` is the
    plain-words header ("difficulty"), ``key`` a stable machine name, ``help`` one sentence.
    """

    key: str
    title: str
    values: np.ndarray
    help: str = ""


@dataclass(frozen=True)
class Ranking:
    """Annotators ordered best first.  ``order`` holds worker codes; ``score`` one value per annotator (higher is
    better) in ``workers`` order; ``source`` says in plain words what the score is."""

    order: np.ndarray
    score: np.ndarray
    source: str

    @classmethod
    def from_score(cls, score: np.ndarray, source: str) -> Ranking:
        s = np.asarray(score, dtype=float)
        return cls(order=np.argsort(-np.nan_to_num(s, nan=-np.inf), kind="stable"), score=s, source=source)


@dataclass(frozen=True)
class SpectralSummary:
    """Spectral Meta-Learner quantities (Parisi et al. 2014; Jaffe et al. 2015).

    ``eigenvector``: the ranking eigenvector, one entry per annotator (binary) or annotators × classes (one-vs-all),
    NaN where not estimated (outside the spectral core, or everywhere after an EM fallback);
    ``eigenvalues``: the leading eigenvalues of the annotators' covariance (classes × components, NaN-padded, for
    one-vs-all; empty after an EM fallback); ``positive_label``: the label coded +1
    (binary); ``class_imbalance``: b = P(+) − P(−) (binary) or per class (one-vs-all); ``method_used``: which path
    produced the labels ("spectral", "spectral-ova", or an EM fallback) in plain words.
    """

    eigenvector: np.ndarray
    eigenvalues: np.ndarray
    positive_label: Any = None
    class_imbalance: float | np.ndarray | None = None
    method_used: str = "spectral"


@dataclass(frozen=True)
class ContextCurves:
    """Reliability as a function of a per-item context value (Soltanmohammadi et al.).

    ``grid``: context values where curves are given (sorted; the category values when ``categorical``);
    ``detection`` / ``false_alarm``: annotators × grid for binary data (the curves of ``positive_label``), or
    annotators × classes × grid (class c vs the rest, classes in the result's order); ``confusion``: annotators ×
    grid × true × reported (per-class confusion curves) or None; ``coverage``: annotators × grid response counts
    near each grid point (None when not computed); ``categorical``: the grid points are categories, not numbers;
    ``positive_label``: binary data, the label whose detection (P(reported it | true it)) the curves show.
    """

    grid: np.ndarray
    detection: np.ndarray | None = None
    false_alarm: np.ndarray | None = None
    confusion: np.ndarray | None = None
    coverage: np.ndarray | None = None
    categorical: bool = False
    positive_label: Any = None


@dataclass(frozen=True)
class SequenceModel:
    """Hidden-Markov label model: ``transition[next, previous]`` (columns sum to 1), ``start_prob``, the
    Viterbi path (class codes per item) when decoded, and the annotator model (``emission``): "independent"
    (each token's label depends only on its true label) or "markov" (also on the annotator's own previous label)."""

    transition: np.ndarray
    start_prob: np.ndarray
    viterbi: np.ndarray | None = None
    emission: str = "independent"


@dataclass(frozen=True)
class GraphSummary:
    """Markov-random-field label model on an item graph: the Potts strength used (``delta``; its mean over items
    when it varies by item) and the share of edges whose two items got the same initial label
    (``edge_agreement``, before the graph is used: the over-smoothing check of the method)."""

    delta: float
    edge_agreement: float
    n_edges: int


@dataclass(frozen=True)
class HeldoutCheck:
    """How the labels of a model fitted on a split's training responses agree with the hidden responses
    (annotator-balanced weights, docs/AUDIT.md): ``agreement`` observed, ``expected_agreement`` as the model
    predicts it, ``discrimination`` the model's mean ``P(r = l | true l) − P(r = l | true ≠ l)`` of the hidden
    responses' annotators, ``confidence`` the model's mean label probability on the hidden items, and ``n_hidden``
    the hidden responses.  ``calibrated`` turns the gap into the accuracy the labels on those items have."""

    agreement: float
    expected_agreement: float
    discrimination: float
    confidence: float
    n_hidden: int

    @property
    def calibrated(self) -> float:
        """Label accuracy on the hidden items corrected by the agreement gap:
        ``confidence − (expected_agreement − agreement) / discrimination`` (clipped to [0, 1])."""
        gap = (self.expected_agreement - self.agreement) / max(self.discrimination, 1e-6)
        return float(np.clip(self.confidence - gap, 0.0, 1.0))


@dataclass(frozen=True)
class ModelChoice:
    """The choice an automatic method made: ``chosen`` (a registered method name), ``criterion`` in plain words,
    ``table`` (one row per candidate: method, score, se, seconds, error, chosen, …) and ``members``: the methods
    whose posteriors the result averages (just ``(chosen,)`` when one method was kept).  ``alternatives``: the other
    candidates the held-out evidence could not tell from the best (or the best itself when a simpler model was
    chosen), with their posteriors on all responses in ``alternative_posteriors`` (same item and class order), so
    that one can see which labels depend on the model choice; ``checks``: each member's :class:`HeldoutCheck`."""

    chosen: str
    criterion: str
    table: pd.DataFrame
    members: tuple[str, ...] = ()
    alternatives: tuple[str, ...] = ()
    alternative_posteriors: tuple[np.ndarray, ...] = ()
    checks: tuple[HeldoutCheck, ...] = ()


@dataclass(frozen=True)
class AnnealingTrace:
    """Deterministic annealing (Streich 2010, eqs. (9.20)–(9.25)): temperature, free energy and log-likelihood per
    iteration of the annealing phase, the starting temperature, guard restarts, and whether it fell back to
    plain EM."""

    temperatures: np.ndarray
    free_energy: np.ndarray
    log_likelihood: np.ndarray
    T0: float
    restarts: int
    fell_back: bool


@dataclass(frozen=True)
class OrdinalScale:
    """The ordered-probit reading of the annotators (``ordinal-em``; the result's ``classes`` are the levels, lowest
    first).

    True level k sits at ``positions[k]`` on a latent scale (0 … K − 1); annotator j perceives
    ``positions[k] + bias[j] + noise[j]·ε`` (ε standard normal) and reports level l when the perception falls
    between ``thresholds[l − 1]`` and ``thresholds[l]`` (K − 1 ordered cut points).  ``estimated`` False means equally
    spaced levels with midpoint cut points.  ``bias`` (> 0 lenient, < 0 harsh) and ``noise`` are in levels, one
    per annotator in ``workers`` order; ``verdict`` is one plain word per annotator ("reliable", "lenient",
    "harsh", "noisy", "lenient and noisy", …) by the rule in ``rule``.
    """

    positions: np.ndarray
    thresholds: np.ndarray
    bias: np.ndarray
    noise: np.ndarray
    verdict: np.ndarray
    rule: str
    estimated: bool


@dataclass(frozen=True)
class Restarts:
    """Several EM starts: final log-likelihood of each (after aligning its classes to majority vote) and the
    index of the run kept."""

    log_likelihoods: np.ndarray
    best: int
    labels: tuple[str, ...] = ()


@dataclass(kw_only=True)
class FitFields:
    """The fields a method fills and a result carries, declared once: :class:`Fit` (code order, what ``_fit``
    returns) and :class:`FitResult` (the same with the user's ids) both inherit them, and
    :meth:`FitResult.from_fit` copies every one of them, so a new result field is one line here.

    ``posterior`` is items × classes; ``confusion`` workers × true × reported (rows sum to 1); ``hard_labels`` the
    method's own joint decoding (Viterbi, ICM) or None (then labels are the posterior argmax).  The typed optional
    fields are set only by the methods that estimate them (see the module docstring).
    """

    posterior: np.ndarray  # n_items × K
    confusion: np.ndarray | None = None  # n_workers × K(true) × K(reported)
    class_prior: np.ndarray | None = None  # K
    log_likelihood: list[float] = field(default_factory=list)
    n_iter: int = 0
    converged: bool = True
    hard_labels: np.ndarray | None = None  # joint decoding (Viterbi, ICM); default: posterior argmax
    annotator_columns: tuple[AnnotatorColumn, ...] = ()
    item_columns: tuple[ItemColumn, ...] = ()
    ranking: Ranking | None = None
    spectral: SpectralSummary | None = None
    context: ContextCurves | None = None
    sequence: SequenceModel | None = None
    graph: GraphSummary | None = None
    selection: ModelChoice | None = None
    annealing: AnnealingTrace | None = None
    restarts: Restarts | None = None
    ordinal: OrdinalScale | None = None
    details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Fit(FitFields):
    """What a method's ``_fit`` returns (arrays in the code order of the :class:`Responses`): the shared
    :class:`FitFields` plus ``skills``, one value per worker (default: expected accuracy, see
    ``base.worker_skills``), which the result carries as ``worker_skill``."""

    skills: np.ndarray | None = None


@dataclass(kw_only=True)
class FitResult(FitFields):
    """A fitted method's outputs with the user's ids: the input to diagnostics, plots, reports and the CLI.

    The shared :class:`FitFields` plus who and what they are about: the ``method`` and its ``params``, the
    ``items``, ``workers`` and ``classes`` (the user's ids, in the arrays' order), ``worker_skill`` one value per
    annotator in ``workers`` order (expected accuracy unless the method says otherwise; ``skills`` is the same as a
    Series by annotator id), the fit's ``seconds`` and ``class_rank`` (the tie priority of every class,
    :func:`fusion_core.methods.ties.class_priority`).
    """

    method: str
    params: dict[str, Any]
    items: pd.Index
    workers: pd.Index
    classes: pd.Index
    worker_skill: np.ndarray
    seconds: float
    class_rank: np.ndarray | None = None

    @classmethod
    def from_fit(cls, fit: Fit, **about: Any) -> FitResult:
        """The result of ``fit``: every :class:`FitFields` field copied (lists and dicts as new containers,
        warnings once each), plus ``about`` (``method``, ``params``, ``items``, ``workers``, ``classes``,
        ``worker_skill``, ``seconds``, ``class_rank``; a shared field given here, such as a checked ``posterior``,
        wins over the copy)."""
        shared = {f.name: getattr(fit, f.name) for f in fields(FitFields)}
        shared.update(
            log_likelihood=[float(x) for x in fit.log_likelihood],
            n_iter=int(fit.n_iter),
            converged=bool(fit.converged),
            annotator_columns=tuple(fit.annotator_columns),
            item_columns=tuple(fit.item_columns),
            details=dict(fit.details),
            warnings=list(dict.fromkeys(fit.warnings)),
        )
        return cls(**{**shared, **about})

    @property
    def label_codes(self) -> np.ndarray:
        """Hard label per item: the method's own decoding when it has one, else the posterior argmax; exact ties go
        to the tied class of best ``class_rank`` (more responses overall, then first in the table; see
        :mod:`fusion_core.methods.ties`), or to the first class in ``classes`` when no rank is set."""
        if self.hard_labels is not None:
            return np.asarray(self.hard_labels)
        if self.class_rank is not None:
            return argmax_ties(self.posterior, self.class_rank)
        return np.argmax(self.posterior, axis=1)

    @property
    def task_index(self) -> pd.Index:
        return pd.Index(self.items, name="task")

    @property
    def labels(self) -> pd.Series:
        return pd.Series(self.classes.take(self.label_codes), index=self.task_index, name="label")

    @property
    def probas(self) -> pd.DataFrame:
        return pd.DataFrame(self.posterior, index=self.task_index, columns=pd.Index(self.classes, name="label"))

    @property
    def skills(self) -> pd.Series:
        return pd.Series(self.worker_skill, index=pd.Index(self.workers, name="worker"), name="skill")

    def column(self, key: str) -> AnnotatorColumn | None:
        """The per-annotator column with machine name ``key``, if the method reported it."""
        return next((c for c in self.annotator_columns if c.key == key), None)

    def item_column(self, key: str) -> ItemColumn | None:
        """The per-item column with machine name ``key`` (e.g. ``"difficulty"``), if the method reported it."""
        return next((c for c in self.item_columns if c.key == key), None)

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (method, parameters, convergence, sizes, warnings, and the choice of ``auto``)."""
        ll = self.log_likelihood[-1] if self.log_likelihood else None
        out: dict[str, Any] = {
            "method": self.method,
            "parameters": {k: jsonable(v) for k, v in self.params.items()},
            "iterations": int(self.n_iter),
            "converged": bool(self.converged),
            "log_likelihood": None if ll is None else float(ll),
            "seconds": float(self.seconds),
            "items": len(self.items),
            "workers": len(self.workers),
            "classes": [jsonable(c) for c in self.classes],
            "warnings": list(self.warnings),
        }
        if self.selection is not None:
            out["chosen_method"] = self.selection.chosen
            out["combined_methods"] = list(self.selection.members or (self.selection.chosen,))
            out["selection_criterion"] = self.selection.criterion
            out["candidates"] = [
                {k: jsonable(v) for k, v in row.items()} for row in self.selection.table.to_dict("records")
            ]
        return out


def jsonable(v: Any) -> Any:
    """Plain JSON types for numpy scalars, tuples and unknown objects (their text)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return None
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def as_result(obj: Any) -> FitResult:
    """A :class:`FitResult` from a FitResult or a fitted estimator (anything with ``result_``)."""
    if isinstance(obj, FitResult):
        return obj
    res = getattr(obj, "result_", None)
    if isinstance(res, FitResult):
        return res
    raise TypeError(f"expected a FitResult or a fitted estimator, got {type(obj).__name__}")
