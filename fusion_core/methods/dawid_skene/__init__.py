"""Dawid–Skene family: EM steps (:mod:`.core`) and the ``ds`` / ``ds1`` estimators (:mod:`.estimators`)."""

from fusion_core.methods.dawid_skene.core import (
    DawidSkeneModel,
    DSState,
    e_step,
    e_step_joint,
    expected_counts,
    fit_em_from,
    m_step,
    normalize_confusion,
    unary_log_likelihood,
)
from fusion_core.methods.dawid_skene.estimators import DawidSkene, DawidSkeneBase, OneCoinDawidSkene, ds_fit

__all__ = [
    "DSState",
    "DawidSkene",
    "DawidSkeneBase",
    "DawidSkeneModel",
    "OneCoinDawidSkene",
    "ds_fit",
    "e_step",
    "e_step_joint",
    "expected_counts",
    "fit_em_from",
    "m_step",
    "normalize_confusion",
    "unary_log_likelihood",
]


def run_em(resp, posterior, *, smoothing, estimate_priors, tol, max_iter, gold=None, one_coin=False, temperatures=None):  # noqa: ANN
    """TRANSITIONAL (removed when every family uses :func:`fit_em_from`): the old API returning a Fit."""
    from fusion_core.methods.dawid_skene.estimators import ds_fit

    return ds_fit(
        fit_em_from(
            resp,
            posterior,
            smoothing=smoothing,
            estimate_priors=estimate_priors,
            tol=tol,
            max_iter=max_iter,
            gold=gold,
            one_coin=one_coin,
            warn=False,
        )
    )
