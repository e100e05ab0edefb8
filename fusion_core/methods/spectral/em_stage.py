"""Dawid–Skene EM started from the spectral estimates ("iMLE", P14; spec ``spectral.md`` §3.11) and the EM
fallback when the data are too sparse for the spectral stage (§5.2 step 5).

Both run through the shared driver (:func:`fusion_core.methods.dawid_skene.fit_em_from`); of several starts the
run with the highest final log-likelihood is kept (:func:`fusion_core.methods.em.best_run`; exact ties go to the
first start).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.methods.base import Gold, initial_posterior
from fusion_core.methods.dawid_skene import DSState, fit_em_from
from fusion_core.methods.em import EMRun, best_run
from fusion_core.methods.results import Restarts
from fusion_core.methods.spectral.decisions import EM_SMOOTHING

EM_STARTS = ("isml", "sml", "mv")


@dataclass(frozen=True)
class EMStageSettings:
    """The EM stage's settings (the ``sml-ds`` parameters of the same names)."""

    init: str = "isml"
    multi_start: bool = True
    smoothing: float = EM_SMOOTHING
    tol: float = 1e-8
    max_iter: int = 500


@dataclass(frozen=True)
class EMStage:
    """The EM run kept, the starts compared (None with a single start) and what to record in ``details``."""

    run: EMRun[DSState]
    restarts: Restarts | None
    details: dict[str, Any]


def em_from_starts(
    resp: Responses, gold: Gold | None, starts: Mapping[str, np.ndarray | None], settings: EMStageSettings
) -> EMStage:
    """§3.11: EM from the i-SML posterior (or SML labels, or majority vote), with ``multi_start`` also from majority
    vote; the run with the higher final log-likelihood is kept.

    The starts are informed and oriented (the spectral sign rule, majority vote), so they are compared as they
    are, not realigned to a reference labelling.
    """
    init = settings.init
    if init == "isml" and starts.get("isml") is None:
        init = "sml"
    names = [init] + (["mv"] if settings.multi_start and init != "mv" else [])
    runs = []
    for name in names:
        start = starts[name]
        assert start is not None
        run = fit_em_from(
            resp,
            start,
            smoothing=float(settings.smoothing),
            estimate_priors=True,
            tol=float(settings.tol),
            max_iter=int(settings.max_iter),
            gold=gold,
            name=f"sml-ds EM from {name}",
        )
        run.label = name
        runs.append(run)
    best, restarts = best_run(runs)  # the highest final log-likelihood; exact ties go to the first start
    details = {"em_start": best.label, "em_log_likelihoods": {r.label: float(r.final) for r in runs}}
    return EMStage(best, restarts, details)


def em_fallback(resp: Responses, gold: Gold | None, name: str) -> EMRun[DSState]:
    """§5.2 step 5: Dawid–Skene EM from majority vote on all annotators (two-coin when binary)."""
    return fit_em_from(
        resp,
        initial_posterior(resp, "mv"),
        smoothing=EM_SMOOTHING,
        estimate_priors=True,
        tol=1e-8,
        max_iter=500,
        gold=gold,
        name=f"{name} fallback EM",
    )
