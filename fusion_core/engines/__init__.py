"""Execution engines: the methods' numeric kernels run outside one process's memory.

:mod:`fusion_core.engines.dask` fits Dawid–Skene, one-coin Dawid–Skene and majority vote on a ``dask.dataframe``
(partitioned Parquet or CSV, local or on object storage) with a dask.distributed cluster.  It needs the optional
extra ``fusion_core[dask]``; nothing else in the library imports it.
"""
