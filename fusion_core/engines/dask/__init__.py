"""Dawid–Skene, one-coin Dawid–Skene and majority vote on a ``dask.dataframe``: data that outgrows one machine.

Data flow (one shuffle at ingest, then one pass per EM iteration):

* :func:`ingest` reads partitioned Parquet or CSV (local or object storage), counts the distinct workers and
  labels (small global categories, broadcast), shuffles the responses by a hash of the task id so every item's
  responses share a partition, and stores each partition coded (:mod:`.ingest`, :mod:`.store`);
* each EM iteration broadcasts the confusion matrices and class priors; every partition runs the in-memory E-step
  and M-step statistics on its own sparse count matrix (:mod:`.kernels`); a tree reduction sums them; the M-step
  and the convergence rule are the in-memory ones, through the shared EM driver (:mod:`.em`);
* the output pass writes posteriors and labels by task as partitioned Parquet (:mod:`.results`).

Needs the optional extra ``fusion_core[dask]`` (``dask[dataframe]``, ``distributed``); importing this package does
not import dask.
"""

from fusion_core.engines.dask.estimators import (
    ESTIMATORS,
    DaskAggregator,
    DaskDawidSkene,
    DaskMajorityVote,
    DaskOneCoinDawidSkene,
    create,
    fit,
)
from fusion_core.engines.dask.ingest import CodedResponses, ingest
from fusion_core.engines.dask.results import DaskFitResult

__all__ = [
    "ESTIMATORS",
    "CodedResponses",
    "DaskAggregator",
    "DaskDawidSkene",
    "DaskFitResult",
    "DaskMajorityVote",
    "DaskOneCoinDawidSkene",
    "create",
    "fit",
    "ingest",
]
