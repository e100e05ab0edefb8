"""Cached computations behind the pages: fits (per session, keyed by data fingerprint, method, parameters and
gold), agreement statistics (``st.cache_data`` keyed by the data fingerprint), bootstrap intervals and cartel
reports (per session).  Switching pages or re-running a page never refits; only new data or new parameters do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

import pandas as pd
import streamlit as st

from fusion_app.state import State, session
from fusion_core.data.dataset import Dataset
from fusion_core.data.responses import Responses
from fusion_core.diagnostics.agreement import agreement_summary, cohen_kappa_matrix, most_active
from fusion_core.diagnostics.bootstrap import BootstrapResult, bootstrap_intervals
from fusion_core.diagnostics.cartels import CartelFinding, CartelReport, explain_cartels
from fusion_core.diagnostics.cartels.collusion import DEFAULTS as COLLUSION
from fusion_core.diagnostics.cartels.collusion import CollusionCheck, check_collusion
from fusion_core.errors import UserInputError
from fusion_core.methods import create, info
from fusion_core.methods.results import FitResult

FitKey = tuple[str, str, tuple[tuple[str, str], ...], str | None]
T = TypeVar("T")
MAX_VIEWS = 24
"""Per-session cache of built tables and figures (:func:`view`): at most this many, oldest dropped first."""
_log = logging.getLogger(__name__)


def fit_key(ds: Dataset, method: str, params: Mapping[str, Any], use_gold: bool = False) -> FitKey:
    """Cache key of a fit: data fingerprint, method, parameters (as text), gold fingerprint when gold is used."""
    params_key = tuple(sorted((k, repr(v)) for k, v in params.items()))
    return (ds.fingerprint, method, params_key, ds.gold_fingerprint if use_gold else None)


def get_fit(
    ds: Dataset,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    use_gold: bool = False,
    ss: State | None = None,
) -> FitResult:
    """The cached fit for (data, method, params, gold), fitting only on a cache miss; marks it active."""
    ss = session() if ss is None else ss
    params = dict(params or {})
    key = fit_key(ds, method, params, use_gold)
    fits = ss.setdefault("fc_fits", {})
    if key not in fits:
        est = create(method, **params)
        est.fit(ds.responses, **ds.fit_inputs(info(method).needs(), use_gold=use_gold))
        fits[key] = est.result_
        ss["fc_fit_count"] = ss.get("fc_fit_count", 0) + 1
    ss.setdefault("fc_active", {})[method] = key
    ss.setdefault("fc_params", {})[method] = params
    return fits[key]


def fit_many(
    ds: Dataset,
    requests: Mapping[str, Mapping[str, Any]],
    *,
    use_gold: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
    ss: State | None = None,
) -> tuple[dict[str, FitResult], dict[str, str]]:
    """Fit several methods ``{name: params}``; returns (results, error message per failed method)."""
    done, errors = {}, {}
    for i, (name, params) in enumerate(requests.items()):
        if progress is not None:
            progress(i, len(requests), name)
        try:
            done[name] = get_fit(ds, name, params, use_gold=use_gold, ss=ss)
        except UserInputError as exc:
            errors[name] = str(exc)
        except Exception:  # a method failing must not take the page down; the details go to the server log
            _log.exception("fitting %s failed", name)
            errors[name] = (
                "the fit failed with an internal error (the details are in the server log); the other results are "
                "unaffected — try other parameters or another method."
            )
    if progress is not None:
        progress(len(requests), len(requests), "")
    return done, errors


def active_results(ss: State | None = None) -> dict[str, FitResult]:
    """Results shown on the pages: the active fit of every method on the current data."""
    ss = session() if ss is None else ss
    ds = ss.get("fc_dataset")
    if ds is None:
        return {}
    fits = ss.get("fc_fits", {})
    return {m: fits[k] for m, k in ss.get("fc_active", {}).items() if k in fits and k[0] == ds.fingerprint}


@st.cache_data(max_entries=8, show_spinner=False)
def agreement_stats(fp: str, _responses: Responses, max_workers: int = 30) -> dict[str, Any]:
    """Fleiss' κ, Krippendorff's α, pairwise Cohen's κ and overlap among the most active annotators (cached by
    the data fingerprint ``fp``)."""
    kappa, shared = cohen_kappa_matrix(_responses, workers=most_active(_responses, max_workers))
    summary = agreement_summary(_responses, max_workers=max_workers, kappa=kappa)  # the κ matrix once, not twice
    return {"summary": summary, "kappa": kappa, "shared": shared}


def _bootstrap_key(method: str, n_bootstrap: int, level: float, ss: State) -> tuple[Any, ...]:
    return (ss.get("fc_active", {}).get(method), n_bootstrap, level)


def bootstrap_for(ds: Dataset, method: str, n_bootstrap: int, level: float, ss: State | None = None) -> BootstrapResult:
    """Bootstrap intervals for the active fit of ``method``, cached per (fit, replicates, level)."""
    ss = session() if ss is None else ss
    key = _bootstrap_key(method, n_bootstrap, level, ss)
    cache = ss.setdefault("fc_bootstrap", {})
    if key not in cache:
        params = dict(ss.get("fc_params", {}).get(method, {}))
        fit_kwargs = {"context": ds.context} if "context" in info(method).needs() else None
        cache[key] = bootstrap_intervals(
            ds.responses, method, params, n_bootstrap=n_bootstrap, level=level, fit_kwargs=fit_kwargs
        )
    return cache[key]


def cached_bootstrap(method: str, n_bootstrap: int, level: float, ss: State | None = None) -> BootstrapResult | None:
    """The bootstrap intervals already computed for the active fit of ``method``, or None."""
    ss = session() if ss is None else ss
    return ss.get("fc_bootstrap", {}).get(_bootstrap_key(method, n_bootstrap, level, ss))


def cartels_for(
    ds: Dataset, n_bootstrap: int, alpha: float, ss: State | None = None, one_vs_rest: Any = None
) -> CartelReport:
    """Cartel report for the data (binary), or for ``one_vs_rest`` against the other labels (multi-class): the
    audit's collusion check (:func:`~fusion_core.diagnostics.cartels.collusion.check_collusion`, same defaults),
    showing only the groups it calls colluding; the check itself is kept for :func:`collusion_for`."""
    ss = session() if ss is None else ss
    key = (ds.fingerprint, n_bootstrap, alpha, one_vs_rest)
    cache = ss.setdefault("fc_cartels", {})
    if key not in cache:
        resp = ds.responses if one_vs_rest is None else ds.responses.one_vs_rest(one_vs_rest)
        check = check_collusion(resp, replace(COLLUSION, n_bootstrap=n_bootstrap, alpha=alpha), random_state=0)
        ss.setdefault("fc_collusion", {})[key] = check
        cache[key] = check.confirmed()
    return cache[key]


def collusion_for(
    ds: Dataset, n_bootstrap: int, alpha: float, ss: State | None = None, one_vs_rest: Any = None
) -> CollusionCheck | None:
    """The collusion check behind :func:`cartels_for` (the evidence on every proposed group), or None."""
    ss = session() if ss is None else ss
    return ss.get("fc_collusion", {}).get((ds.fingerprint, n_bootstrap, alpha, one_vs_rest))


def cached_cartels(
    ds: Dataset, n_bootstrap: int, alpha: float, ss: State | None = None, one_vs_rest: Any = None
) -> CartelReport | None:
    """The cartel report already computed for these settings, or None."""
    ss = session() if ss is None else ss
    return ss.get("fc_cartels", {}).get((ds.fingerprint, n_bootstrap, alpha, one_vs_rest))


def skills_for_cartels(ss: State | None = None) -> tuple[str | None, pd.Series | None]:
    """(method, annotator skills) of the fit whose skills annotate the cartel table: ``auto`` when fitted, else the
    first fitted method; (None, None) when nothing is fitted."""
    results = active_results(ss)
    if not results:
        return None, None
    name = "auto" if "auto" in results else next(iter(results))
    return name, results[name].skills


def cartel_finding(
    ds: Dataset, n_bootstrap: int, alpha: float, ss: State | None = None, one_vs_rest: Any = None
) -> CartelFinding | None:
    """The cached report explained (:func:`~fusion_core.diagnostics.cartels.explain_cartels`) on the real labels,
    with near-chance notes from the skills of :func:`skills_for_cartels`; None until the report exists."""
    ss = session() if ss is None else ss
    report = cached_cartels(ds, n_bootstrap, alpha, ss, one_vs_rest)
    if report is None:
        return None
    method, skills = skills_for_cartels(ss)
    key = (ds.fingerprint, n_bootstrap, alpha, one_vs_rest, ss.get("fc_active", {}).get(method) if method else None)
    cache = ss.setdefault("fc_cartel_findings", {})
    if key not in cache:
        cache[key] = explain_cartels(report, ds.responses, skills=skills)
    return cache[key]


def view(kind: str, key: Any, build: Callable[[], T], ss: State | None = None) -> T:
    """A table or figure built once per session for ``(kind, key)`` — ``key`` must identify its inputs (data
    fingerprint, fit key, settings) — so page switches and widget changes do not rebuild it.  Evicted with the
    data (:func:`fusion_app.state.set_dataset`) and beyond :data:`MAX_VIEWS` entries."""
    ss = session() if ss is None else ss
    cache = ss.setdefault("fc_views", {})
    k = (kind, key)
    if k in cache:
        cache[k] = cache.pop(k)  # most recently used last
        return cache[k]
    out = build()
    cache[k] = out
    while len(cache) > MAX_VIEWS:
        cache.pop(next(iter(cache)))
    return out


def active_key(method: str, ss: State | None = None) -> Any:
    """The fit key the pages show for ``method`` (identifies its result in :func:`view` keys)."""
    ss = session() if ss is None else ss
    return ss.get("fc_active", {}).get(method)
