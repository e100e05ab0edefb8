"""Estimators of the Dask engine: ``ds``, ``ds1`` and ``mv`` on data that outgrows one machine.

They take the in-memory methods' parameter declarations (the same names, defaults, ranges and messages; restarts,
annealing and initial posteriors are in-memory only) and the same ``fit`` → ``self`` contract, with the small
fitted attributes under the same names (``confusion_``, ``errors_``, ``priors_``, ``skills_``, ``n_iter_``,
``converged_``, ``log_likelihood_``, ``loss_history_``); ``probas_`` and ``labels_`` are lazy dask collections
over the partitioned Parquet output.  :func:`fit` is the same by method name (what ``fusion-core fit --engine
dask`` calls).
"""

from __future__ import annotations

import atexit
import shutil
import time
import warnings
from collections.abc import Mapping
from typing import Any, ClassVar, Self

import numpy as np

from fusion_core.engines.dask.em import EngineFit, fit_ds, one_sided_message, write_posteriors
from fusion_core.engines.dask.ingest import CodedResponses, ingest, local_temp_dir
from fusion_core.engines.dask.kernels import agreement_skill, worker_skill_from_confusion
from fusion_core.engines.dask.results import DaskFitResult
from fusion_core.engines.dask.runner import require_dask
from fusion_core.engines.dask.runner import scheduler as use_scheduler
from fusion_core.engines.dask.store import Store
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.dawid_skene.estimators import EM_PARAMS, OneCoinDawidSkene
from fusion_core.methods.params import Declared, Param

CACHES = ("disk", "memory")
_EM = ("smoothing", "estimate_priors", "tol", "max_iter")


class DaskAggregator(Declared):
    """Base of the engine's estimators: ingest (unless given :class:`CodedResponses`), fit, write the output."""

    method_name: ClassVar[str] = ""
    learns_confusion: ClassVar[bool] = True

    def validated_params(self) -> dict[str, Any]:
        """Every parameter checked against its declaration; messages name the method as in memory ('ds')."""
        return self._validated(self.method_name or type(self).__name__)

    def fit(
        self,
        data: Any,
        *,
        output: str | None = None,
        scheduler: Any = None,
        cache: str = "disk",
        storage_options: Mapping[str, Any] | None = None,
        **ingest_options: Any,
    ) -> Self:
        """Fit on ``data``: a ``dask.dataframe`` (or pandas DataFrame) of long-format responses, a path, glob or
        object-storage URL of Parquet or CSV/TSV files, or :class:`CodedResponses` from :func:`ingest`.

        ``output`` is where the posteriors go (partitioned Parquet; default: a local temporary directory removed
        when Python exits).  ``scheduler``: None (the active ``distributed.Client`` or dask's default), a
        ``Client``, a scheduler address or 'threads'/'synchronous'.  ``cache='disk'`` re-reads the coded
        partitions every iteration (memory per worker bounded by the partition size); ``'memory'`` keeps them on
        the workers (faster, memory ∝ data / workers).  ``storage_options`` go to fsspec for the input, the
        scratch and the output.  The other keywords are :func:`ingest`'s (``task``, ``worker``, ``label``,
        ``format``, ``classes``, ``na_values``, ``strip_whitespace``, ``scratch``, ``partition_size``)."""
        require_dask()
        t0 = time.perf_counter()
        params = self.validated_params()
        if cache not in CACHES:
            raise UserInputError(f"cache must be 'disk' or 'memory', got {cache!r}.")
        with use_scheduler(scheduler):
            coded = data
            if isinstance(data, CodedResponses) and ingest_options:
                raise UserInputError(
                    f"the responses are already ingested; pass {', '.join(sorted(ingest_options))} to ingest()."
                )
            if not isinstance(data, CodedResponses):
                coded = ingest(data, storage_options=storage_options, **ingest_options)
            out = Store(output or _temporary_output(), dict(storage_options or {}) if output else {})
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", AggregationWarning)
                sources = _sources(coded, cache)
                run = self._run(coded, sources, params)
                stats = write_posteriors(coded, sources, run.state, out)
        self.result_ = self._result(coded, run, stats, out=out, params=params, seconds=time.perf_counter() - t0)
        self.result_.warnings = _record(caught, run.warnings)
        if coded is not data:  # coded for this fit only
            coded.cleanup()
        self._set_fitted()
        return self

    def _run(self, coded: CodedResponses, sources: list[Any], params: dict[str, Any]) -> EngineFit:
        raise NotImplementedError  # each estimator runs its method

    def _result(
        self, coded: CodedResponses, run: EngineFit, stats: Any, *, out: Store, params: dict[str, Any], seconds: float
    ) -> DaskFitResult:
        rpw = coded.responses_per_worker
        if run.state is None:  # majority vote: agreement skill, priors = mean posterior
            confusion, prior = None, stats.class_total / max(stats.n_items, 1)
            skill = agreement_skill(stats.agreement, rpw)
        else:
            confusion, prior = run.state.confusion, run.state.class_prior
            skill = worker_skill_from_confusion(confusion, prior)
        return DaskFitResult(
            method=self.method_name,
            params=params,
            workers=coded.workers,
            classes=coded.classes,
            confusion=confusion,
            class_prior=np.asarray(prior, dtype=float),
            worker_skill=np.asarray(skill, dtype=float),
            responses_per_worker=rpw,
            log_likelihood=[float(x) for x in run.log_likelihood],
            n_iter=run.n_iter,
            converged=run.converged,
            seconds=seconds,
            iteration_seconds=run.iteration_seconds,
            n_items=coded.n_items,
            n_responses=coded.n_responses,
            n_partitions=coded.n_partitions,
            output=out,
            report=coded.report,
        )

    def _set_fitted(self) -> None:
        r = self.result_
        self.classes_ = r.classes
        self.workers_ = r.workers
        self.priors_ = r.priors
        self.skills_ = r.skills
        self.annotators_ = r.annotator_table()
        self.loss_history_ = list(r.log_likelihood)
        self.log_likelihood_ = r.log_likelihood[-1] if r.log_likelihood else None
        self.n_iter_ = r.n_iter
        self.converged_ = r.converged
        self.warnings_ = list(r.warnings)
        self.probas_ = r.posteriors()
        self.labels_ = r.labels()
        if r.confusion is not None:
            self.confusion_ = r.confusion
            self.errors_ = r.errors


def _temporary_output() -> str:
    path = local_temp_dir("output", "fusion_core_posteriors_")
    atexit.register(shutil.rmtree, path, True)  # the lazy probas_/labels_ read it until the session ends
    return path


def _sources(coded: CodedResponses, cache: str) -> list[Any]:
    refs: list[Any] = coded.refs()
    if cache == "disk":
        return refs
    import dask
    from dask import delayed

    return list(dask.persist(*[delayed(r.load, pure=True)() for r in refs]))


def _record(caught: list[warnings.WarningMessage], extra: list[str]) -> list[str]:
    """Warnings raised during the fit: AggregationWarnings recorded once each, every warning re-emitted."""
    seen = list(extra)
    for w in caught:
        if issubclass(w.category, AggregationWarning) and str(w.message) not in seen:
            seen.append(str(w.message))
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return seen


_DS_PARAMS: dict[str, Param] = {k: EM_PARAMS[k] for k in _EM}


class DaskDawidSkene(DaskAggregator):
    """Dawid–Skene EM on the Dask engine (Dawid & Skene 1979; Traganitis & Giannakis §3.1, eqs. (8)–(11)).

    The same model, start (soft majority vote) and stopping rule as the in-memory ``ds``: equal results to 1e-6
    on data that fits in memory.  ``confusion_[w]`` has rows = true class, columns = reported label.

    Examples
    --------
    >>> import dask.dataframe as dd
    >>> from fusion_core.simulate import dawid_skene
    >>> sim = dawid_skene(n_items=300, n_workers=10, n_classes=3, seed=0)
    >>> answers = dd.from_pandas(sim.responses.astype(str), npartitions=3)
    >>> ds = DaskDawidSkene().fit(answers, scheduler="synchronous", partition_size=500)
    >>> ds.confusion_.shape, ds.result_.n_partitions
    ((10, 3, 3), 3)
    >>> labels = ds.labels_.compute()
    >>> bool((labels == sim.truth.astype(str).reindex(labels.index)).mean() > 0.9)
    True
    """

    one_coin: ClassVar[bool] = False
    method_name = "ds"
    params = _DS_PARAMS

    def _run(self, coded: CodedResponses, sources: list[Any], params: dict[str, Any]) -> EngineFit:
        msg = one_sided_message(coded.label_counts, self.method_name)
        if msg:
            warnings.warn(msg, AggregationWarning, stacklevel=3)
        return fit_ds(
            coded,
            sources,
            smoothing=float(params["smoothing"]),
            estimate_priors=bool(params["estimate_priors"]),
            one_coin=self.one_coin,
            tol=float(params["tol"]),
            max_iter=int(params["max_iter"]),
            prior_guard=float(params.get("prior_guard", 0.0)),
            name=self.method_name,
        )


class DaskOneCoinDawidSkene(DaskDawidSkene):
    """One-coin Dawid–Skene on the Dask engine: one accuracy per annotator, errors spread evenly; class priors
    with the in-memory collapse guard (refit with equal priors and a warning).  Equal to the in-memory ``ds1``.

    Examples
    --------
    >>> import dask.dataframe as dd
    >>> from fusion_core.simulate import dawid_skene
    >>> sim = dawid_skene(n_items=300, n_workers=10, n_classes=3, seed=0)
    >>> m = DaskOneCoinDawidSkene().fit(dd.from_pandas(sim.responses, npartitions=2), scheduler="synchronous")
    >>> m.skills_.between(0, 1).all()
    np.True_
    """

    one_coin = True
    method_name = "ds1"
    params = {**_DS_PARAMS, **{k: OneCoinDawidSkene.params[k] for k in ("estimate_priors", "prior_guard")}}


class DaskMajorityVote(DaskAggregator):
    """Majority vote on the Dask engine: each item's posterior is its vote share; ties → the tied class with more
    responses overall, then the first in the class order (in memory: ``tie_break='data'``).  Skill = the posterior mass on each annotator's own labels.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": ["1", "1", "1", "2", "2", "2"], "worker": list("abcabc"),
    ...                    "label": ["x", "x", "y", "y", "y", "x"]})
    >>> DaskMajorityVote().fit(df, scheduler="synchronous").labels_.compute().sort_index().tolist()
    ['x', 'y']
    """

    learns_confusion = False
    method_name = "mv"
    params = {}

    def _run(self, coded: CodedResponses, sources: list[Any], params: dict[str, Any]) -> EngineFit:
        return EngineFit(None, [], 0, True, [])


ESTIMATORS: dict[str, type[DaskAggregator]] = {
    "ds": DaskDawidSkene,
    "ds1": DaskOneCoinDawidSkene,
    "mv": DaskMajorityVote,
}


def create(method: str, **params: Any) -> DaskAggregator:
    """An unfitted engine estimator for a registered method name ('ds', 'ds1' or 'mv')."""
    if method not in ESTIMATORS:
        raise UserInputError(
            f"the Dask engine runs {', '.join(repr(m) for m in ESTIMATORS)}; method '{method}' runs in memory only "
            "(fit it without --engine dask)."
        )
    est = ESTIMATORS[method](**params)
    est.validated_params()
    return est


def fit(data: Any, method: str = "ds", *, params: Mapping[str, Any] | None = None, **options: Any) -> DaskFitResult:
    """Fit method ``method`` with ``params`` on ``data`` on the Dask engine and return its
    :class:`~.results.DaskFitResult` (``options``: ``output``, ``scheduler``, ``cache`` and :func:`ingest`'s).
    This is what ``fusion-core fit --engine dask --scheduler ADDRESS`` calls."""
    return create(method, **dict(params or {})).fit(data, **options).result_
