"""Shared estimator base: the scikit-learn contract with crowd-kit's fitted attributes.

A method subclasses :class:`Aggregator`, declares its parameters once in ``params`` (see
:mod:`fusion_core.methods.params`) and implements ``_fit(responses, *, gold, graph, context) -> Fit``.  The base
then provides, the same way for every method:

* a keyword-only ``__init__`` generated from ``params`` (values stored unchanged, so ``sklearn.base.clone`` works)
  and the numpydoc ``Parameters`` section of the class docstring;
* central validation of every parameter at the start of ``fit`` (:class:`~fusion_core.errors.UserInputError`
  naming the parameter and the allowed values);
* gold labels handled once: ``true_labels=`` is aligned to item and label codes and passed to ``_fit`` (which
  clamps them), or refused with a clear message by methods that set ``supports_gold = False``;
* warnings recorded once each in ``FitResult.warnings``;
* the fitted attributes: ``labels_`` (Series by task), ``probas_`` (DataFrame task × label), ``confusion_`` (our
  orientation, workers × true × reported), ``errors_`` (crowd-kit's layout: index (worker, reported label), columns
  true label), ``priors_``, ``skills_``, ``loss_history_``, ``n_iter_``, ``converged_``, ``log_likelihood_`` and
  ``result_`` (a :class:`~fusion_core.methods.results.FitResult` for diagnostics, plots and reports); the tables
  (``labels_``, ``probas_``, ``skills_``, ``errors_``) are built from ``result_`` on first read (:class:`FittedTable`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd

from fusion_core import progress
from fusion_core.data.responses import Responses, as_responses, canonical_order
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.numerics import log_normalize, safe_log
from fusion_core.methods.params import Declared
from fusion_core.methods.results import Fit, FitResult
from fusion_core.methods.ties import class_priority
from fusion_core.methods.votes import vote_shares

Gold = tuple[np.ndarray, np.ndarray]  # (item codes, class codes) of the gold-labelled items


class FittedTable:
    """A fitted attribute (``labels_``, ``probas_``, ``skills_``, ``errors_``) built from the estimator's ``result_``
    on first read and then stored on the instance, so later reads are plain attribute reads and an assignment (a
    subclass setting its own table) simply replaces it.  A non-data descriptor: :meth:`Aggregator._set_fitted`
    drops the stored tables, so each fit's are built from its own result.  Unfitted (no ``result_``), or a table
    the result cannot give (``errors_`` without confusion matrices): ``AttributeError``, as for an attribute never
    set."""

    def __init__(self, build: Callable[[Any], Any]) -> None:
        self.build = build
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, est: Any, owner: type | None = None) -> Any:
        if est is None:
            return self
        if "result_" not in est.__dict__:
            raise AttributeError(f"{type(est).__name__!r} has no attribute {self.name!r}: it is set by fit.")
        value = self.build(est)
        est.__dict__[self.name] = value
        return value


#: the fitted attributes built on first read (:class:`FittedTable`)
LAZY_ATTRIBUTES = ("probas_", "labels_", "skills_", "errors_")


def _errors_of(result: FitResult) -> pd.DataFrame:
    if result.confusion is None:
        raise AttributeError("'errors_' is set by methods with confusion matrices only.")
    return errors_frame(result.confusion, result.workers, result.classes)


class Aggregator(Declared):
    """Base of every registered method (see the module docstring)."""

    #: filled in by :func:`fusion_core.methods.registry.register`
    method_name: ClassVar[str] = ""
    inputs: ClassVar[tuple[str, ...]] = ("plain",)
    #: latent-class models; False for rules such as majority vote
    learns_confusion: ClassVar[bool] = True
    #: models abstentions (e.g. the labelling-function label model), so one-sided annotators are not warned about
    handles_one_sided: ClassVar[bool] = False
    #: whether ``fit(true_labels=…)`` is honoured (clamped); otherwise refused with ``gold_refusal``
    supports_gold: ClassVar[bool] = True
    gold_refusal: ClassVar[str] = ""
    #: whether per-response confidences (``Responses.weight``) are used; otherwise responses carrying them are refused
    uses_confidence: ClassVar[bool] = True
    #: fit the responses in their canonical order (``canonical_order``), for models whose floating-point sums or
    #: random draws would otherwise depend on the row order (see :meth:`canonical_rows`)
    row_order_sensitive: ClassVar[bool] = False

    def canonical_rows(self) -> bool:
        """Whether ``_fit`` receives the responses sorted by (item, worker, label) codes rather than in row order."""
        return self.row_order_sensitive

    def validated_params(self) -> dict[str, Any]:
        """Every parameter checked against its declaration (raises :class:`UserInputError` on the first bad one)."""
        return self._validated(self.method_name or type(self).__name__)

    # --------------------------------------------------------------- fitting
    def fit(
        self,
        data: Responses | pd.DataFrame,
        *,
        graph: Any = None,
        context: pd.Series | None = None,
        true_labels: pd.Series | None = None,
    ) -> Self:
        """Fit on long-format responses (crowd-kit columns ``task, worker, label``; ``sequence``/``position``
        columns for sequential data) or a :class:`~fusion_core.data.responses.Responses`.  Returns ``self``.

        ``graph`` (item graph), ``context`` (a value per task) and ``true_labels`` (gold labels by task, clamped)
        are used by the methods that take them."""
        t0 = time.perf_counter()
        self.validated_params()
        resp = self._responses(data)
        self._check_inputs(resp, graph=graph, context=context)
        gold = self._gold(resp, true_labels)
        with warnings.catch_warnings(record=True) as caught, progress.stage(self.method_name or type(self).__name__):
            warnings.simplefilter("always", AggregationWarning)
            if self.learns_confusion and not self.handles_one_sided:
                warn_one_sided(resp, self.method_name)
            rows = canonical_order(resp) if self.canonical_rows() else resp
            fit = self._fit(rows, gold=gold, graph=graph, context=context)
            del rows
        seen = set(fit.warnings)
        for w in caught:
            if issubclass(w.category, AggregationWarning):
                msg = str(w.message)
                if msg in seen:
                    continue
                seen.add(msg)
                fit.warnings.append(msg)
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        self._set_fitted(resp, fit, time.perf_counter() - t0)
        return self

    def _responses(self, data: Responses | pd.DataFrame) -> Responses:
        """The responses :meth:`fit` works on (``ordinal-em`` puts the labels in level order here)."""
        return as_responses(data)

    def _gold(self, resp: Responses, true_labels: pd.Series | Mapping[Any, Any] | None) -> Gold | None:
        if true_labels is None:
            return None
        if not self.supports_gold:
            why = f" ({self.gold_refusal})" if self.gold_refusal else ""
            raise UserInputError(
                f"method '{self.method_name}' cannot use gold labels{why}; fit without true_labels, or choose a method "
                "that clamps them, such as 'ds'."
            )
        codes, values = resp.align_items(true_labels, what="gold label")
        return codes, resp.label_codes(values, what="gold labels")

    def _check_inputs(self, resp: Responses, *, graph: Any, context: Any) -> None:
        if resp.weight is not None and not self.uses_confidence:
            raise UserInputError(
                f"method '{self.method_name}' does not use per-response confidences; fit without the confidence "
                "column (--confidence-col), or choose a method that weighs them, such as 'ds' or 'mv'."
            )
        needs = set(self.inputs) - {"plain"}
        if "sequence" in needs and not resp.has_sequences:
            raise UserInputError(
                f"method '{self.method_name}' needs sequential data: add 'sequence' and 'position' columns."
            )
        if "graph" in needs and graph is None:
            raise UserInputError(f"method '{self.method_name}' needs an item graph: pass graph=.")
        if "context" in needs and context is None:
            raise UserInputError(f"method '{self.method_name}' needs a context value per item: pass context=.")

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        raise NotImplementedError  # abstract: every registered method implements it

    def fit_predict(self, data: Responses | pd.DataFrame, **kwargs: Any) -> pd.Series:
        return self.fit(data, **kwargs).labels_

    def fit_predict_proba(self, data: Responses | pd.DataFrame, **kwargs: Any) -> pd.DataFrame:
        return self.fit(data, **kwargs).probas_

    # ------------------------------------------- response model (held-out scoring, multilabel.md §8)
    def response_log_likelihood(self, responses: Responses) -> np.ndarray:
        """``log P(response r | true class k)`` as an ``n_responses × K`` array under the fitted model:
        ``log Γ_w[k, l]`` from ``confusion_``.  ``responses`` must use the fitted coding (e.g. a
        :meth:`Responses.subset` of the data passed to ``fit``).  Methods whose confusion depends on more than the
        worker (context, item difficulty) override this."""
        conf = getattr(self, "confusion_", None)
        if conf is None:
            raise UserInputError(
                f"method '{self.method_name}' has no response model (no confusion matrices) to score responses with."
            )
        return safe_log(conf[responses.worker, :, responses.label])

    def predict_response_proba(self, responses: Responses) -> np.ndarray:
        """Probability of each given response under the fitted model: ``Σ_k q_nk Γ_w[k, l]`` with the fitted
        posterior ``q`` of the response's item (uses :meth:`response_log_likelihood`)."""
        ll = self.response_log_likelihood(responses)
        q = self.result_.posterior[responses.item]
        return np.einsum("rk,rk->r", q, np.exp(ll))

    # ------------------------------------------------------ fitted attributes
    def _set_fitted(self, resp: Responses, fit: Fit, seconds: float) -> None:
        post = np.asarray(fit.posterior, dtype=float)
        if not np.all(np.isfinite(post)):
            raise FloatingPointError(f"{self.method_name} produced non-finite posteriors")
        skills = fit.skills if fit.skills is not None else worker_skills(resp, post, fit.confusion, fit.class_prior)
        for col in fit.annotator_columns:
            if len(col.values) != resp.n_workers:
                raise ValueError(
                    f"{self.method_name}: annotator column {col.key!r} has {len(col.values)} values for {resp.n_workers} annotators"
                )
        for icol in fit.item_columns:
            if len(icol.values) != resp.n_items:
                raise ValueError(
                    f"{self.method_name}: item column {icol.key!r} has {len(icol.values)} values for {resp.n_items} items"
                )
        self.result_ = FitResult.from_fit(
            fit,
            posterior=post,
            method=self.method_name,
            params=self.get_params(),
            items=resp.items,
            workers=resp.workers,
            classes=resp.classes,
            worker_skill=np.asarray(skills, dtype=float),
            seconds=seconds,
            class_rank=class_priority(resp),
        )
        r = self.result_
        for name in LAZY_ATTRIBUTES:  # built again from this fit's result on first read
            self.__dict__.pop(name, None)
        self.responses_ = resp
        self.classes_ = resp.classes
        self.workers_ = resp.workers
        self.loss_history_ = list(r.log_likelihood)
        self.log_likelihood_ = r.log_likelihood[-1] if r.log_likelihood else None
        self.n_iter_ = r.n_iter
        self.converged_ = r.converged
        self.warnings_ = list(r.warnings)
        labels = pd.Index(resp.classes, name="label")
        prior = fit.class_prior if fit.class_prior is not None else post.mean(axis=0)
        self.priors_ = pd.Series(prior, index=labels, name="prior")
        if fit.confusion is not None:
            self.confusion_ = fit.confusion

    # tables built from ``result_`` on first read (a fit or an update that nobody reads pays nothing for them)
    probas_ = FittedTable(lambda est: est.result_.probas)
    labels_ = FittedTable(lambda est: est.result_.labels)
    skills_ = FittedTable(lambda est: est.result_.skills)
    errors_ = FittedTable(lambda est: _errors_of(est.result_))


# ---------------------------------------------------------------------------------------- helpers
def errors_frame(confusion: np.ndarray, workers: pd.Index, classes: pd.Index) -> pd.DataFrame:
    """crowd-kit's ``errors_`` layout from our ``workers × true × reported`` array:
    index (worker, reported label), columns true label, ``df.loc[(w, reported), true] = P(reported | true)``."""
    w, k, _ = confusion.shape
    values = confusion.transpose(0, 2, 1).reshape(w * k, k)
    index = pd.MultiIndex.from_product([workers, classes], names=["worker", "label"])
    return pd.DataFrame(values, index=index, columns=pd.Index(classes, name="label"))


def worker_skills(
    resp: Responses, posterior: np.ndarray, confusion: np.ndarray | None, prior: np.ndarray | None
) -> np.ndarray:
    """Per-worker accuracy estimate.

    With a confusion model: ``Σ_k π_k Γ_w[k, k]`` (expected accuracy under the class prior).  Without one (e.g.
    majority vote): the posterior mass each worker's responses put on their own label, averaged over the worker's
    responses (crowd-kit's agreement-with-aggregate skill, soft form).
    """
    if confusion is not None:
        pri = prior if prior is not None else posterior.mean(axis=0)
        return np.einsum("k,wkk->w", pri, confusion)
    agree = posterior[resp.item, resp.label]
    n = np.maximum(resp.responses_per_worker, 1)
    return np.bincount(resp.worker, weights=agree, minlength=resp.n_workers) / n


def initial_posterior(resp: Responses, init: Any) -> np.ndarray:
    """Posterior to start EM from: 'mv' (soft majority vote) or an items × K array / task × label DataFrame."""
    if isinstance(init, str):
        if init != "mv":
            raise UserInputError(f"unknown initialisation {init!r}; use 'mv' or pass posteriors.")
        if resp.weight is None:  # whole votes (totals 0 or >= 1): the shares of majority vote's pass, same numbers
            return vote_shares(resp)
        votes = resp.vote_counts()
        tot = votes.sum(axis=1, keepdims=True)
        return np.where(tot > 0, votes / np.maximum(tot, 1), 1.0 / resp.n_classes)
    if isinstance(init, pd.DataFrame):
        arr = np.full((resp.n_items, resp.n_classes), 1.0 / resp.n_classes)
        codes = resp.item_codes(init.index, what="initial posterior tasks")
        cols = resp.label_codes(init.columns, what="initial posterior columns")
        arr[np.ix_(codes, cols)] = init.to_numpy(dtype=float)
        init = arr
    arr = np.asarray(init, dtype=float)
    if arr.shape != (resp.n_items, resp.n_classes):
        raise UserInputError(f"initial posteriors must have shape {(resp.n_items, resp.n_classes)}, got {arr.shape}.")
    arr = np.clip(arr, 0, None)
    s = arr.sum(axis=1, keepdims=True)
    return np.where(s > 0, arr / np.where(s > 0, s, 1), 1.0 / resp.n_classes)


def check_init(value: Any) -> Any:
    """Parameter check for ``init``: 'mv', an array or a task × label DataFrame of posteriors."""
    if isinstance(value, str):
        if value != "mv":
            raise UserInputError("'mv' or initial posteriors (items × classes array or task × label DataFrame)")
        return value
    if isinstance(value, (np.ndarray, pd.DataFrame, list)):
        return value
    raise UserInputError("'mv' or initial posteriors (items × classes array or task × label DataFrame)")


def clamp_gold(posterior: np.ndarray, gold: Gold | None) -> np.ndarray:
    """Set gold items' posteriors to their known class (one-hot), in place; returns the array."""
    if gold is not None and len(gold[0]):
        posterior[gold[0]] = 0.0
        posterior[gold[0], gold[1]] = 1.0
    return posterior


def posterior_terms(joint: np.ndarray, gold: Gold | None, temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The E-step's end for a log-joint ``log π_k + log p(responses | k)`` (items × K): (posteriors, per-item
    objective terms).  Posteriors are normalised at ``temperature`` (annealing) with gold items clamped; the terms
    are at T = 1: the log normaliser, or the complete-data term ``joint[i, gold_i]`` on gold items."""
    post, terms = log_normalize(joint)
    if temperature != 1.0:
        post = log_normalize(joint / temperature)[0]
    if gold is not None and len(gold[0]):
        terms = terms.copy()
        terms[gold[0]] = joint[gold[0], gold[1]]
        clamp_gold(post, gold)
    return post, terms


def warn_one_sided(resp: Responses, method: str, min_responses: int = 5) -> None:
    """Warn when most annotators (with ≥ ``min_responses`` responses) only ever give one label, e.g. labelling
    functions whose abstentions were dropped: their confusion matrices are then not identified from the
    responses, and latent-class fits can collapse (youtube_lf: DS 0.452 vs majority vote 0.800)."""
    n = resp.responses_per_worker
    active = n >= min_responses
    if active.sum() < 2:
        return
    k = resp.n_classes
    pairs = np.bincount(resp.worker.astype(np.int64) * k + resp.label, minlength=resp.n_workers * k)
    one = (pairs.reshape(resp.n_workers, k) > 0).sum(axis=1) == 1
    share = float(one[active].mean())
    if share >= 0.5:
        warnings.warn(
            f"{int(one[active].sum())} of {int(active.sum())} annotators always give the same label (one-sided, like "
            f"labelling functions that abstain otherwise). '{method}' treats missing responses as missing at random, "
            "so it cannot tell their accuracy from their label choice and may collapse; majority vote is safer, or "
            "keep the abstentions as a label.",
            AggregationWarning,
            stacklevel=3,
        )
