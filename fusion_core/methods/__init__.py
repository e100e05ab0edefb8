"""Aggregation methods.  ``available()`` lists them, ``create(name, **params)`` builds one.

Classes are importable by name (``from fusion_core.methods import DawidSkene``); every module and family package
of this package that registers a class is found automatically (see :mod:`fusion_core.methods.registry`).
"""

from typing import Any

from fusion_core.methods.base import Aggregator
from fusion_core.methods.dawid_skene import DawidSkene, OneCoinDawidSkene
from fusion_core.methods.majority import MajorityVote
from fusion_core.methods.params import Param
from fusion_core.methods.registry import MethodInfo, available, create, info, register
from fusion_core.methods.results import Fit, FitResult

__all__ = [
    "Aggregator",
    "DawidSkene",
    "Fit",
    "FitResult",
    "MajorityVote",
    "MethodInfo",
    "OneCoinDawidSkene",
    "Param",
    "available",
    "create",
    "info",
    "register",
]


def __getattr__(name: str) -> Any:
    """Any registered estimator class by its class name (e.g. ``SpectralMetaLearner``)."""
    for m in available():
        if m.cls.__name__ == name:
            return m.cls
    raise AttributeError(f"module 'fusion_core.methods' has no attribute {name!r}")
