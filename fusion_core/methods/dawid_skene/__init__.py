"""Dawid–Skene family: EM steps (:mod:`.core`) and the ``ds`` / ``ds1`` estimators (:mod:`.estimators`)."""

from fusion_core.methods.dawid_skene.core import (
    DawidSkeneModel,
    DSState,
    ds_fit,
    e_step,
    e_step_joint,
    expected_counts,
    fit_em_from,
    m_step,
    normalize_confusion,
    unary_log_likelihood,
)
from fusion_core.methods.dawid_skene.estimators import DawidSkene, DawidSkeneBase, OneCoinDawidSkene

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
