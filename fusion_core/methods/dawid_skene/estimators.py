"""Dawid–Skene EM (``ds``) and its one-coin variant (``ds1``).

Dawid & Skene 1979; Traganitis & Giannakis §3.1, eqs. (8)–(11).  The EM steps are in :mod:`.core`; the loop,
annealing, restarts and the convergence rule are the shared driver's (:mod:`fusion_core.methods.em`).
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.errors import AggregationWarning
from fusion_core.methods.base import Aggregator, Gold, check_init, initial_posterior
from fusion_core.methods.dawid_skene.core import DawidSkeneModel, DSState, ds_fit
from fusion_core.methods.dawid_skene.incremental import update_fit
from fusion_core.methods.em import EMRun, EMSettings, best_run, check_anneal, class_alignment, resolve_schedule, run_em
from fusion_core.methods.params import Bool, Float, Int, Object, Param, Seed
from fusion_core.methods.priors import COLLAPSE_RATIO, collapse_message, prior_collapsed
from fusion_core.methods.registry import register
from fusion_core.methods.results import Fit
from fusion_core.methods.ties import class_priority

EM_PARAMS = {
    "smoothing": Float(
        0.0,
        low=0.0,
        high=100.0,
        help="Dirichlet pseudo-count added to every confusion count (0 = plain maximum likelihood).",
    ),
    "estimate_priors": Bool(
        True, help="Estimate class priors (Dawid & Skene); off = equal priors as in the paper's §3.1."
    ),
    "init": Object(
        "mv",
        help="Where EM starts: 'mv' (soft majority vote) or initial posteriors.",
        text="'mv' or initial posteriors (items × classes array or task × label DataFrame)",
        check=check_init,
    ),
    "tol": Float(1e-7, low=0.0, high=1.0, help="Stop when the relative change of the log-likelihood is below tol."),
    "max_iter": Int(500, low=1, high=100_000, help="Maximum EM iterations."),
    "anneal": Object(
        False,
        help="Deterministic annealing (multilabel.md §7): off (default), on, or a dict of schedule "
        "settings. Off by default: on sparse data it can reach a higher training likelihood but a lower accuracy.",
        text="off (False/None), on (True/'default'), or a dict of schedule settings",
        check=check_anneal,
    ),
    "n_restarts": Int(
        0,
        low=0,
        high=100,
        advanced=True,
        help="Extra EM runs from random posteriors; every run's classes are aligned to majority vote and the "
        "run with the best final log-likelihood is kept.",
    ),
    "random_state": Seed(0, help="Seed of the random restarts."),
}


class DawidSkeneBase(Aggregator):
    """EM for a Dawid–Skene-type model; subclasses choose the confusion parametrisation."""

    one_coin: ClassVar[bool] = False
    params = EM_PARAMS

    def model(self, responses: Responses, gold: Gold | None, keep_joint: bool = False) -> DawidSkeneModel:
        return DawidSkeneModel(
            responses, float(self.smoothing), bool(self.estimate_priors), self.one_coin, gold, keep_joint=keep_joint
        )

    def canonical_rows(self) -> bool:
        """Restarts compare final log-likelihoods that can tie to rounding: canonical rows make them exact."""
        return int(self.n_restarts) > 0

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        q0 = initial_posterior(responses, self.init)
        starts = [q0]
        if int(self.n_restarts) > 0:  # random posteriors (Dirichlet(1) rows), seeded
            rng = np.random.default_rng(self.random_state)
            rank = class_priority(responses)  # draw columns by class priority, not code: renaming labels is harmless
            starts += [
                rng.dirichlet(np.ones(responses.n_classes), size=responses.n_items)[:, rank]
                for _ in range(int(self.n_restarts))
            ]
        settings = EMSettings(
            tol=float(self.tol),
            max_iter=int(self.max_iter),
            anneal=resolve_schedule(self.anneal),
            name=f"{self.method_name} EM",
        )
        runs: list[EMRun[DSState]] = []
        for q in starts:  # a model per run: a model reuses its posterior buffers from one E-step to the next
            model = self.model(responses, gold, keep_joint=settings.anneal is not None)
            runs.append(run_em(model, model.start(q), settings))
        # several starts: align every run's classes to majority vote so a mirror optimum is never returned
        reference = initial_posterior(responses, "mv") if gold is None and len(runs) > 1 else None
        run, restarts = best_run(runs, model=model, reference=reference)
        self._fit_stats = run.estep.stats  # the final E-step's statistics: an update starts from them (no pass)
        fit = ds_fit(run)
        fit.restarts = restarts
        if settings.anneal is not None:
            warn_label_switching(responses, run)
        return fit

    def update(self, new_responses: Responses | pd.DataFrame) -> Self:
        """Add a batch of responses (long format or coded; new tasks, annotators and labels may appear) and refit
        from the previous state instead of from scratch: EM restarts at the previous posterior and converges to
        the full refit's optimum (:mod:`.incremental`).  Returns ``self``."""
        update_fit(self, new_responses)
        return self

    partial_fit = update


def warn_label_switching(responses: Responses, run: EMRun[Any]) -> None:
    """After annealing: warn when the best matching of the posterior classes to majority vote is not the identity
    (Hungarian matching, spec multilabel.md §7.4)."""
    votes = responses.vote_counts()
    has = votes.sum(axis=1) > 0
    k = responses.n_classes
    mv = np.eye(k)[np.argmax(votes[has], axis=1)]
    em = np.eye(k)[np.argmax(run.posterior[has], axis=1)]
    source = class_alignment(em, mv)
    if not np.array_equal(source, np.arange(k)):
        warnings.warn(
            "annealed EM: its classes match majority vote best after relabelling them (possible label switching); "
            "check a few items by hand.",
            AggregationWarning,
            stacklevel=3,
        )


@register(
    "ds",
    title="Dawid–Skene (full confusion matrices)",
    summary="Dawid–Skene EM: a full confusion matrix per annotator and class priors.",
    family="dawid_skene",
    reference="Dawid & Skene 1979; Traganitis & Giannakis §3.1, eqs. (8)–(11).",
)
class DawidSkene(DawidSkeneBase):
    """Dawid–Skene EM.  ``confusion_[w]`` has rows = true class, columns = reported label (each row sums to 1).

    Gold labels passed to ``fit`` via ``true_labels=`` are clamped.

    Examples
    --------
    >>> from fusion_core.simulate import dawid_skene
    >>> sim = dawid_skene(n_items=300, n_workers=10, n_classes=3, seed=0)
    >>> ds = DawidSkene().fit(sim.responses)
    >>> bool((ds.labels_ == sim.truth.reindex(ds.labels_.index)).mean() > 0.9)
    True
    """


@register(
    "ds1",
    title="One-coin Dawid–Skene (one accuracy per annotator)",
    summary="One-coin Dawid–Skene: one accuracy per annotator, errors spread evenly over the other labels.",
    family="dawid_skene",
    reference="One-coin model (e.g. Zhang et al. 2014); EM as Traganitis & Giannakis §3.1 with Γ_w = a_w I + (1−a_w)/(K−1)(11ᵀ−I).",
)
class OneCoinDawidSkene(DawidSkeneBase):
    """One-coin Dawid–Skene: ``Γ_w[k, k] = a_w``, ``Γ_w[k, l] = (1 − a_w)/(K − 1)`` for l ≠ k.

    Far fewer parameters than full DS, which helps on sparse crowds where most workers answer a handful of items.
    M-step: ``a_w`` = expected fraction of worker w's responses that are correct.  Class priors are estimated by
    default (issue 14: +4.1 pt over equal priors on simulated sparse crowds with an 80/20 prior) with a collapse
    guard: the one-coin model can explain asymmetric workers by a collapsed prior (bluebirds 0.97/0.03, accuracy
    0.58), so when some class's prior falls below ``prior_guard`` × its majority-vote share the fit is redone with
    equal priors and a warning (:mod:`fusion_core.methods.priors`; evidence in ``docs/PEER_MODELS.md``).

    Examples
    --------
    >>> from fusion_core.simulate import dawid_skene
    >>> sim = dawid_skene(n_items=300, n_workers=10, n_classes=3, seed=0)
    >>> m = OneCoinDawidSkene().fit(sim.responses)
    >>> m.confusion_.shape
    (10, 3, 3)
    """

    one_coin = True
    params: ClassVar[dict[str, Param]] = {
        **EM_PARAMS,
        "estimate_priors": Bool(
            True, help="Estimate class priors (with the collapse guard); off = equal priors, as ZenCrowd's model."
        ),
        "prior_guard": Float(
            COLLAPSE_RATIO,
            low=0.0,
            high=1.0,
            advanced=True,
            help="Refit with equal priors when a class's estimated prior is below this share of its majority-vote "
            "share (0 = never).",
        ),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        fit = super()._fit(responses, gold=gold, graph=graph, context=context)
        prior = fit.class_prior
        if (
            self.estimate_priors
            and prior is not None
            and prior_collapsed(prior, responses, gold, float(self.prior_guard))
        ):
            warnings.warn(collapse_message("ds1", prior, responses.classes), AggregationWarning, stacklevel=2)
            fit = self.clone_with(estimate_priors=False)._fit(responses, gold=gold, graph=graph, context=context)
        return fit

    def clone_with(self, **changes: Any) -> OneCoinDawidSkene:
        return type(self)(**{**self.get_params(), **changes})
