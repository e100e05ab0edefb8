"""Pairwise judgements (LLM-judge panels comparing two answers): rank the options and weigh the judges
(docs/JUDGES.md).

These models do not fit the registry's contract (items × classes posteriors from (task, worker, label)), so they
have their own list, :data:`PAIRWISE_METHODS`, used by the CLI (``fusion-core pairwise --method``), the report and
the app: ``ds-pairwise`` (Dawid–Skene with a Bradley–Terry prior; the default), ``bt-judges`` (Bradley–Terry with
per-judge reliability and position bias) and ``bt`` (plain Bradley–Terry–Davidson).  Every estimator is
``fit(data) → self`` with ``result_`` (:class:`PairwiseFit`) and ``scores_``; ties follow Davidson (1970).
"""

from __future__ import annotations

from typing import Any

from fusion_core.errors import UserInputError
from fusion_core.methods.pairwise.bt import PairwiseBT, PlainBT
from fusion_core.methods.pairwise.ds import PairwiseDS
from fusion_core.methods.pairwise.results import PairwiseFit

PAIRWISE_METHODS: dict[str, type] = {"ds-pairwise": PairwiseDS, "bt-judges": PairwiseBT, "bt": PlainBT}
DEFAULT_METHOD = "ds-pairwise"


def create_pairwise(name: str = DEFAULT_METHOD, **params: Any) -> Any:
    """An unfitted pairwise estimator by name (:data:`PAIRWISE_METHODS`)."""
    try:
        cls = PAIRWISE_METHODS[name]
    except KeyError:
        raise UserInputError(f"unknown pairwise method '{name}'; available: {', '.join(PAIRWISE_METHODS)}.") from None
    return cls(**params)


__all__ = [
    "DEFAULT_METHOD",
    "PAIRWISE_METHODS",
    "PairwiseBT",
    "PairwiseDS",
    "PairwiseFit",
    "PlainBT",
    "create_pairwise",
]
